/* loop.c - the one event loop of `lis serve`: an epoll set whose entries
 * carry their callback, timers, deferred frees, and a few worker threads.
 *
 * Why workers: creating and destroying a sandbox (clone, mounts, id maps,
 * the rm -rf of its upper layer) and pulling an image take milliseconds to
 * seconds; on the loop thread they would stall every other client. A job
 * does only that call and hands its result back through an eventfd; all
 * server state is touched on the loop thread alone. The threads live as
 * long as the loop, because a sandbox's set-up child may be tied to the
 * thread that cloned it. */
#include "serve.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

typedef struct job {
    void (*work)(void *);
    void (*done)(void *);
    void *arg;
    struct job *next;
} job;

typedef struct deferred {
    void (*fn)(void *);
    void *arg;
    struct deferred *next;
} deferred;

struct sv_loop {
    int epfd, evfd;
    sv_watch evw;
    sv_timer *timers;
    deferred *defer;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *todo, *todo_tail, *done;
    int stop;
    pthread_t *threads;
    int nthreads;
};

static void *worker(void *arg)
{
    sv_loop *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->todo && !l->stop)
            pthread_cond_wait(&l->cv, &l->mu);
        if (!l->todo)
            break;
        job *j = l->todo;
        l->todo = j->next;
        if (!l->todo)
            l->todo_tail = NULL;
        pthread_mutex_unlock(&l->mu);
        j->work(j->arg);
        pthread_mutex_lock(&l->mu);
        j->next = l->done;
        l->done = j;
        uint64_t one = 1;
        if (write(l->evfd, &one, sizeof one) < 0) {
            /* the counter cannot overflow in practice; the loop polls done anyway */
        }
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void jobs_done(void *arg, uint32_t ev)
{
    sv_loop *l = arg;
    uint64_t n;
    if (read(l->evfd, &n, sizeof n) < 0) {
        /* EAGAIN: nothing new */
    }
    pthread_mutex_lock(&l->mu);
    job *d = l->done;
    l->done = NULL;
    pthread_mutex_unlock(&l->mu);
    /* finish in submission order within a batch is not needed; each job is independent */
    while (d) {
        job *next = d->next;
        d->done(d->arg);
        free(d);
        d = next;
    }
}

sv_loop *sv_loop_new(int workers, lis_error *err)
{
    sv_loop *l = calloc(1, sizeof *l);
    if (!l) {
        lis_oom(err);
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->epfd < 0 || l->evfd < 0) {
        lis_fail_errno(err, "epoll/eventfd");
        sv_loop_free(l);
        return NULL;
    }
    sv_loop_watch(l, &l->evw, l->evfd, EPOLLIN, jobs_done, l);
    l->nthreads = workers > 0 ? workers : 2;
    l->threads = calloc((size_t)l->nthreads, sizeof *l->threads);
    for (int i = 0; l->threads && i < l->nthreads; i++)
        if (pthread_create(&l->threads[i], NULL, worker, l) != 0) {
            l->nthreads = i;
            break;
        }
    if (!l->threads || l->nthreads == 0) {
        lis_fail(err, EAGAIN, "cannot start worker threads");
        sv_loop_free(l);
        return NULL;
    }
    return l;
}

void sv_loop_free(sv_loop *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nthreads; i++)
        pthread_join(l->threads[i], NULL);
    free(l->threads);
    if (l->evfd >= 0)
        jobs_done(l, 0);
    while (l->defer) {
        deferred *d = l->defer;
        l->defer = d->next;
        d->fn(d->arg);
        free(d);
    }
    if (l->epfd >= 0)
        close(l->epfd);
    if (l->evfd >= 0)
        close(l->evfd);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

int sv_loop_watch(sv_loop *l, sv_watch *w, int fd, uint32_t events, sv_fd_cb cb, void *arg)
{
    w->fd = fd;
    w->cb = cb;
    w->arg = arg;
    struct epoll_event e = {.events = events, .data.ptr = w};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &e) < 0)
        return -1;
    w->added = 1;
    return 0;
}

void sv_loop_events(sv_loop *l, sv_watch *w, uint32_t events)
{
    if (!w->added)
        return;
    struct epoll_event e = {.events = events, .data.ptr = w};
    epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &e);
}

void sv_loop_unwatch(sv_loop *l, sv_watch *w)
{
    if (!w->added)
        return;
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
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

int sv_job(sv_loop *l, void (*work)(void *), void (*done)(void *), void *arg)
{
    job *j = calloc(1, sizeof *j);
    if (!j)
        return -1;
    j->work = work;
    j->done = done;
    j->arg = arg;
    pthread_mutex_lock(&l->mu);
    if (l->todo_tail)
        l->todo_tail->next = j;
    else
        l->todo = j;
    l->todo_tail = j;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

int sv_loop_run_once(sv_loop *l, int max_ms)
{
    double now = lis_now();
    int ms = max_ms;
    for (sv_timer *t = l->timers; t; t = t->next) {
        int d = t->when <= now ? 0 : (int)((t->when - now) * 1000) + 1;
        if (ms < 0 || d < ms)
            ms = d;
    }
    struct epoll_event ev[64];
    int n = epoll_wait(l->epfd, ev, 64, ms);
    if (n < 0 && errno != EINTR)
        return -1;
    for (int i = 0; i < n; i++) {
        sv_watch *w = ev[i].data.ptr;
        if (w->cb)
            w->cb(w->arg, ev[i].events);
    }
    now = lis_now();
    for (;;) { /* fire one due timer at a time: a callback may re-arm or cancel others */
        sv_timer *due = NULL;
        for (sv_timer *t = l->timers; t; t = t->next)
            if (t->when <= now) {
                due = t;
                break;
            }
        if (!due)
            break;
        sv_timer_cancel(l, due);
        due->cb(due->arg);
    }
    while (l->defer) {
        deferred *d = l->defer;
        l->defer = d->next;
        d->fn(d->arg);
        free(d);
    }
    return 0;
}
