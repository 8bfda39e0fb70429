/* loop.c - the event loop of lis batch (engine.h says the design): one
 * thread, one epoll set holding curl's sockets, the commands' fds, a signalfd
 * and the pools' completion fds; each iteration in named phases (below), each
 * event handed to sched.c. It never blocks but in epoll_wait. */
#include "engine.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- curl's sockets and timer ----------------------------------------- */

static int on_socket(CURL *h, curl_socket_t s, int what, void *userp, void *socketp)
{
    brun *r = userp;
    (void)h;
    if (what == CURL_POLL_REMOVE) {
        bsched_forget(r, s);
        curl_multi_assign(r->multi, s, NULL);
        return 0;
    }
    struct epoll_event ev = {.data.u64 = TAG(K_CURL, (uint64_t)s)};
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
    int rc;
    if (!socketp) {
        rc = epoll_ctl(r->epfd, EPOLL_CTL_ADD, s, &ev);
        if (rc < 0 && errno == EEXIST) /* a number reused before curl said REMOVE */
            rc = epoll_ctl(r->epfd, EPOLL_CTL_MOD, s, &ev);
        if (rc == 0)
            curl_multi_assign(r->multi, s, r);
    } else {
        rc = epoll_ctl(r->epfd, EPOLL_CTL_MOD, s, &ev);
    }
    /* a socket the loop cannot watch would wait for its timeout (20 min):
     * -1 makes curl fail the transfers on it now, each its episode's error */
    return rc < 0 ? -1 : 0;
}

static int on_timer(CURLM *m, long timeout_ms, void *userp)
{
    (void)m;
    brun *r = userp;
    r->curl_due = timeout_ms < 0 ? -1 : lis_now() + (double)timeout_ms / 1000.0;
    return 0;
}

/* ---- signals and the sweep ------------------------------------------- */

static void on_signal(brun *r)
{
    struct signalfd_siginfo si;
    while (read(r->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        /* our own SIGINT (ctl.c) is lis batch ctl stop's */
        int by_ctl = si.ssi_signo == SIGINT && r->ctl_stops > 0 && si.ssi_pid == (uint32_t)getpid();
        if (by_ctl)
            r->ctl_stops--;
        if (!r->signals++) {
            r->first_signal = (int)si.ssi_signo;
            r->first_by_ctl = by_ctl;
        }
        if (r->signals == 1 && si.ssi_signo == SIGINT) {
            r->draining = 1;
            if (r->o->drain_timeout > 0)
                r->drain_deadline = lis_now() + r->o->drain_timeout;
            bprog_clear(r);
            fprintf(r->o->err,
                    "lis: %s: starting nothing new, waiting for the %zu running "
                    "episodes (%s again cancels them)\n",
                    by_ctl ? "lis batch ctl stop" : "Ctrl-C", r->live,
                    by_ctl ? "a second stop" : "Ctrl-C");
        } else {
            r->draining = r->cancelling = 1;
            bprog_clear(r);
            fprintf(r->o->err,
                    "lis: cancelling the %zu running episodes (--resume runs them "
                    "again)\n",
                    r->live);
            bsched_cancel_all(r, AGENT_STOP_CANCELLED,
                              by_ctl ? "stopped by lis batch ctl stop" : "interrupted");
        }
    }
}

/* Deadlines, retries whose wait is over, stuck kills: once per tick. */
static void sweep(brun *r, double now)
{
    if (r->drain_deadline > 0 && now >= r->drain_deadline && !r->cancelling) {
        r->cancelling = 1;
        bprog_clear(r);
        fprintf(r->o->err,
                "lis: --drain-timeout reached: cancelling the %zu running "
                "episodes\n",
                r->live);
        bsched_cancel_all(r, AGENT_STOP_CANCELLED, "drain timeout");
    }
    for (size_t i = 0; i < r->next; i++) {
        bep *e = &r->eps[i];
        if (e->phase != EP_LIVE)
            continue;
        if (!e->stopped && !e->paused && e->deadline > 0 && now >= e->deadline) {
            char msg[128];
            snprintf(msg, sizeof msg, "the episode ran longer than --episode-timeout %gs",
                     r->o->episode_timeout);
            bsched_stop(e, AGENT_STOP_DEADLINE, msg);
            continue;
        }
        if (e->lq == LQ_RETRY && now >= e->retry_at && !e->stopped) {
            r->retrying--;
            e->lq = LQ_NONE;
            bsched_llm_start(e);
        }
        if (e->proc && e->kill_at > 0 && now >= e->kill_at && e->sb) {
            /* the command outlived SIGKILL (a stuck exit): end the whole sandbox,
             * which ends its connection and so the command */
            syscall(SYS_pidfd_send_signal, lis_sandbox_pidfd(e->sb), SIGKILL, NULL, 0);
            e->kill_at = 0;
        }
    }
}

static void batch_sigset(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
}

void bsched_block_signals(sigset_t *old)
{
    sigset_t set;
    batch_sigset(&set);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

void bsched_restore_signals(const sigset_t *old)
{
    /* a signal that arrived while blocked stays pending: drop it rather than
     * have it kill the process on unblock before the report is written */
    struct timespec zero = {0, 0};
    sigset_t set;
    batch_sigset(&set);
    while (sigtimedwait(&set, NULL, &zero) > 0)
        ;
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* ---- the loop ------------------------------------------------------------
 *
 * One iteration in named phases, as libuv's uv_run (docs/batch.md):
 *   loop_alive    something is live, being made ahead, or still to admit
 *   poll_timeout  how long epoll_wait may sleep: the sweep's tick, or less
 *                 when curl's timer is due sooner
 *   run_io        epoll_wait, then each ready fd to its handler: signals, the
 *                 pools' completions, curl's sockets, the commands
 *   run_timers    curl's timeout action, when due
 *   run_sweep     every 100 ms: deadlines, retries whose wait is over, stuck
 *                 kills, the progress display
 * loop_open makes the epoll set before the first iteration (then admit fills
 * the slots); loop_close takes it down after the last. */

static int loop_add(brun *r, int fd, uint64_t tag, lis_error *err)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return lis_fail_errno(err, "setting up the event loop (epoll_ctl)");
    return 0;
}

static int loop_open(brun *r, lis_error *err)
{
    sigset_t set;
    batch_sigset(&set);
    r->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    r->multi = curl_multi_init();
    if (r->sigfd < 0 || r->epfd < 0 || !r->multi)
        return lis_fail_errno(err, "setting up the event loop");
    curl_multi_setopt(r->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(r->multi, CURLMOPT_SOCKETDATA, r);
    curl_multi_setopt(r->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(r->multi, CURLMOPT_TIMERDATA, r);
    curl_multi_setopt(r->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)r->o->max_llm);
    curl_multi_setopt(r->multi, CURLMOPT_MAXCONNECTS, (long)r->o->max_llm);
    r->curl_due = -1;
    if (loop_add(r, r->sigfd, TAG(K_SIG, 0), err) < 0 ||
        loop_add(r, lis_jobs_fd(r->setup), TAG(K_SETUP, 0), err) < 0 ||
        loop_add(r, lis_jobs_fd(r->misc), TAG(K_MISC, 0), err) < 0)
        return -1;
    return 0;
}

static int loop_alive(const brun *r)
{
    return r->live > 0 || r->spares_creating > 0 ||
           (!r->draining && !r->fatal && r->next < r->neps);
}

static int poll_timeout(const brun *r)
{
    int timeout = 100; /* the sweep's tick */
    if (r->curl_due >= 0) {
        double ms = (r->curl_due - lis_now()) * 1000.0;
        if (ms < timeout)
            timeout = ms <= 0 ? 0 : (int)ms + 1;
    }
    return timeout;
}

static int run_io(brun *r, int timeout, lis_error *err)
{
    struct epoll_event evs[64];
    int n = epoll_wait(r->epfd, evs, 64, timeout);
    if (n < 0 && errno != EINTR)
        return lis_fail_errno(err, "epoll_wait");
    int running;
    for (int i = 0; i < n; i++) {
        uint64_t t = evs[i].data.u64;
        switch (TAG_KIND(t)) {
        case K_SIG: on_signal(r); break;
        case K_SETUP: lis_jobs_reap(r->setup); break;
        case K_MISC: lis_jobs_reap(r->misc); break;
        case K_CURL: {
            int mask = ((evs[i].events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                       ((evs[i].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                       ((evs[i].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(r->multi, (curl_socket_t)TAG_VAL(t), mask, &running);
            bsched_llm_reap(r);
            break;
        }
        case K_PROC: bsched_cmd_event(r, &r->eps[TAG_VAL(t)]); break;
        case K_MON: bctl_monitor_event(r, &r->eps[TAG_VAL(t)]); break;
        case K_HTTP: blive_event(r, TAG_VAL(t)); break;
        }
    }
    return 0;
}

static void run_timers(brun *r, double now)
{
    int running;
    if (r->curl_due >= 0 && now >= r->curl_due) {
        r->curl_due = -1;
        curl_multi_socket_action(r->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        bsched_llm_reap(r);
    }
}

static void run_sweep(brun *r, double now)
{
    if (now - r->last_sweep < 0.1)
        return;
    r->last_sweep = now;
    sweep(r, now);
    bsched_creators_adjust(r);
    bctl_tick(r);
    blive_tick(r);
    bprog_tick(r, 0);
}

static void loop_close(brun *r)
{
    blive_close(r);
    if (r->setup)
        lis_jobs_reap(r->setup);
    while (r->nspares) { /* made ahead, never needed */
        bspare *sp = r->spares[--r->nspares];
        lis_error ign;
        lis_sandbox_destroy(sp->sb, &ign);
        lis_monitor_free(sp->env.mon);
        free(sp);
    }
    if (r->multi)
        curl_multi_cleanup(r->multi);
    r->multi = NULL;
    if (r->epfd >= 0)
        close(r->epfd);
    if (r->sigfd >= 0)
        close(r->sigfd);
}

int bsched_run(brun *r, lis_error *err)
{
    int rc = loop_open(r, err);
    if (rc == 0)
        rc = blive_open(r, err); /* the control socket, and the --live view */
    r->t0 = r->last_sweep = r->last_progress = lis_now();
    if (rc == 0)
        bsched_admit(r);
    while (rc == 0 && loop_alive(r)) {
        if ((rc = run_io(r, poll_timeout(r), err)) < 0)
            break;
        double now = lis_now();
        run_timers(r, now);
        run_sweep(r, now);
    }
    loop_close(r);
    return rc;
}
