/* loop.c - the one event loop of `lis serve`: an epoll set whose entries
 * carry their callback, timers, deferred frees, and the runtime's job pool
 * (lis_jobs, lis.h) for what blocks.
 *
 * One iteration (sv_loop_run_once) is four named phases, as libuv's uv_run
 * (docs/src/design.rst there):
 *   1. poll timeout: the nearest timer, capped by the caller's wait;
 *   2. poll for I/O: epoll_wait, then each ready entry's callback (the job
 *      pool's completions are one of them: done callbacks run here);
 *   3. timers: every timer now due, one at a time (a callback may arm or
 *      cancel others);
 *   4. deferred: the frees asked for during 2 and 3, after every event of
 *      the batch that may still point at the object is dispatched.
 * The caller (server.c) runs libmicrohttpd between iterations.
 *
 * Why workers: creating and destroying a sandbox (clone, mounts, id maps,
 * the rm -rf of its upper layer) and pulling an image take milliseconds to
 * seconds; on the loop thread they would stall every other client. A job
 * does only that call and hands its result back; all server state is
 * touched on the loop thread alone. */
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

typedef struct deferred {
    void (*fn)(void *);
    void *arg;
    struct deferred *next;
} deferred;

struct sv_loop {
    int epfd;
    sv_watch evw;
    sv_timer *timers;
    deferred *defer;
    sv_closer *closers;
    lis_jobs *jobs;
};

static void jobs_done(void *arg, uint32_t ev) { lis_jobs_reap(arg); }
static void phase_deferred(sv_loop *l);

sv_loop *sv_loop_new(int workers, lis_error *err)
{
    sv_loop *l = calloc(1, sizeof *l);
    if (!l) {
        lis_oom(err);
        return NULL;
    }
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0) {
        lis_fail_errno(err, "epoll_create1");
        sv_loop_free(l);
        return NULL;
    }
    if (!(l->jobs = lis_jobs_new(workers > 0 ? (unsigned)workers : 2, err)) ||
        sv_loop_watch(l, &l->evw, lis_jobs_fd(l->jobs), EPOLLIN, jobs_done, l->jobs) < 0) {
        if (l->jobs)
            lis_fail_errno(err, "watching the job pool");
        sv_loop_free(l);
        return NULL;
    }
    return l;
}

void sv_loop_free(sv_loop *l)
{
    if (!l)
        return;
    if (l->jobs) { /* what is queued still runs, and its done callback too */
        lis_jobs_stop(l->jobs);
        lis_jobs_reap(l->jobs);
    }
    while (l->defer) {
        deferred *d = l->defer;
        l->defer = d->next;
        d->fn(d->arg);
        free(d);
    }
    if (l->epfd >= 0)
        close(l->epfd);
    lis_jobs_free(l->jobs);
    free(l);
}

/* Every fd on the loop is non-blocking, whoever made it: one read or write
 * that waits (a pty master, handed over blocking by lis-init, that has
 * nothing to say) would stall every client of the server, and its SIGTERM. */
int sv_loop_watch(sv_loop *l, sv_watch *w, int fd, uint32_t events, sv_fd_cb cb, void *arg)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0))
        return -1;
    w->fd = fd;
    w->cb = cb;
    w->arg = arg;
    struct epoll_event e = {.events = events, .data.ptr = w};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &e) < 0)
        return -1;
    w->added = 1;
    return 0;
}

int sv_loop_events(sv_loop *l, sv_watch *w, uint32_t events)
{
    if (!w->added)
        return 0;
    struct epoll_event e = {.events = events, .data.ptr = w};
    return epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &e);
}

void sv_loop_unwatch(sv_loop *l, sv_watch *w)
{
    if (!w->added)
        return;
    /* DEL fails only for an fd closed before its unwatch (a bug) or not in
     * the set: either way it is out of the set now */
    (void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    w->added = 0;
    w->cb = NULL; /* an event of this batch already fetched is dropped */
}

void sv_timer_arm(sv_loop *l, sv_timer *t, double delay, void (*cb)(void *), void *arg)
{
    sv_timer_cancel(l, t);
    t->when = lis_now() + delay;
    t->cb = cb;
    t->arg = arg;
    t->next = l->timers;
    l->timers = t;
}

void sv_timer_cancel(sv_loop *l, sv_timer *t)
{
    for (sv_timer **p = &l->timers; *p; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            break;
        }
    t->when = 0;
    t->next = NULL;
}

void sv_loop_defer(sv_loop *l, void (*fn)(void *), void *arg)
{
    deferred *d = malloc(sizeof *d);
    if (!d) { /* no memory: leak rather than free under a pending event */
        return;
    }
    d->fn = fn;
    d->arg = arg;
    d->next = l->defer;
    l->defer = d;
}

void sv_loop_closer_add(sv_loop *l, sv_closer *c, void (*fn)(void *), void *arg)
{
    *c = (sv_closer){.fn = fn, .arg = arg, .next = l->closers};
    l->closers = c;
}

void sv_loop_closer_del(sv_loop *l, sv_closer *c)
{
    for (sv_closer **p = &l->closers; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            return;
        }
}

void sv_loop_close_all(sv_loop *l)
{
    while (l->closers) {
        sv_closer *c = l->closers;
        l->closers = c->next; /* fn may free c */
        c->fn(c->arg);
    }
    phase_deferred(l);
}

int sv_job(sv_loop *l, void (*work)(void *), void (*done)(void *, int), void *arg)
{
    lis_error err;
    return lis_jobs_submit(l->jobs, work, done, arg, &err) ? 0 : -1;
}

/* Phase 1: how long the poll may wait: the nearest timer, at most max_ms
 * (-1: only the timers bound it). */
static int phase_poll_timeout(sv_loop *l, int max_ms)
{
    double now = lis_now();
    int ms = max_ms;
    for (sv_timer *t = l->timers; t; t = t->next) {
        int d = t->when <= now ? 0 : (int)((t->when - now) * 1000) + 1;
        if (ms < 0 || d < ms)
            ms = d;
    }
    return ms;
}

/* Phase 2: wait for I/O and run each ready entry's callback. */
static int phase_poll_io(sv_loop *l, int ms)
{
    struct epoll_event ev[64];
    int n = epoll_wait(l->epfd, ev, 64, ms);
    if (n < 0)
        return errno == EINTR ? 0 : -1;
    for (int i = 0; i < n; i++) {
        sv_watch *w = ev[i].data.ptr;
        if (w->cb)
            w->cb(w->arg, ev[i].events);
    }
    return 0;
}

/* Phase 3: the due timers, one at a time: a callback may re-arm or cancel others. */
static void phase_timers(sv_loop *l)
{
    double now = lis_now();
    for (;;) {
        sv_timer *due = NULL;
        for (sv_timer *t = l->timers; t; t = t->next)
            if (t->when <= now) {
                due = t;
                break;
            }
        if (!due)
            return;
        sv_timer_cancel(l, due);
        due->cb(due->arg);
    }
}

/* Phase 4: the deferred frees. */
static void phase_deferred(sv_loop *l)
{
    while (l->defer) {
        deferred *d = l->defer;
        l->defer = d->next;
        d->fn(d->arg);
        free(d);
    }
}

int sv_loop_run_once(sv_loop *l, int max_ms)
{
    if (phase_poll_io(l, phase_poll_timeout(l, max_ms)) < 0)
        return -1;
    phase_timers(l);
    phase_deferred(l);
    return 0;
}
