/* scanner.c - the threads the hub's file scans run on, at the lowest
 * priority (issue 29: one episode cannot slow another).
 *
 * A step's scan of the writable layer and the tmpfs mounts (layer.c) costs
 * what changed: 2,000 new files are ~170 ms of CPU. Run on the caller's
 * thread (a job-pool worker, an event loop's step end) it competes at normal
 * priority with every other episode on the host's few cores. Here it runs on
 * a thread of the hub's scanner at SCHED_IDLE instead, while the caller (the
 * episode that made the files) waits for it: a busy neighbour's work goes
 * first, the scan takes what is left. No lock is held across a scan, so a
 * starved scan holds up only the episode waiting for it; its budget is wall
 * time, so under load it is cut sooner, and the cut is stated as always.
 *
 * The threads start when first needed, at most one per online CPU (up to
 * SCAN_THREADS_MAX): a thread that cannot start leaves the work on the
 * caller's thread, as before, which is no error. Stopping (mon_scanner_free)
 * finishes the scan under way and hands every queued one back to its caller,
 * who runs it itself: nothing hangs and nothing is freed under a waiter. */
#include "monitor.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SCAN_THREADS_MAX 8

enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_RETURNED };

typedef struct scan_job {
    void (*fn)(void *);
    void *arg;
    int state;
    struct scan_job *next;
} scan_job;

struct mon_scanner {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a job was queued, or stop */
    pthread_cond_t done; /* a job is done or handed back */
    pthread_cond_t idle; /* the last waiter left (after stop) */
    scan_job *head, *tail;
    pthread_t thread[SCAN_THREADS_MAX];
    int nthreads, busy, queued, max;
    int waiters; /* callers inside mon_scanner_run */
    int stop;
};

mon_scanner *mon_scanner_new(void)
{
    mon_scanner *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->done, NULL);
    pthread_cond_init(&s->idle, NULL);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    s->max = cpus < 1 ? 1 : cpus > SCAN_THREADS_MAX ? SCAN_THREADS_MAX : (int)cpus;
    return s;
}

/* SCHED_IDLE rather than nice 19: a waking task of normal policy always
 * preempts a SCHED_IDLE one (a nice 19 one only when the scheduler finds it
 * due), so a neighbour's exec never waits behind a scan; measured, what the
 * monitor adds to a neighbour's p99 was lowest so (1.05x against 1.09x with
 * nice 19 and 1.15x on the caller's thread, means of 15 runs each, within
 * the shared host's noise: docs/benchmarks.md, issue 29). The price: under
 * the fallback CPU share lis demotes CPU hogs to SCHED_IDLE too, and the
 * scans then share the idle class with them (cut sooner, stated). An
 * unprivileged thread may choose it but never leave it: so the scanner has
 * threads of its own, the job pool's cannot be lent. On Linux the policy is
 * the calling thread's alone. When refused, nice 19 (also per thread). */
static void lower_priority(void)
{
    struct sched_param p = {0};
    if (sched_setscheduler(0, SCHED_IDLE, &p) < 0 &&
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19) < 0) {
        /* neither: the scans run at the caller's priority, as without this thread */
    }
}

static void *scanner_main(void *arg)
{
    mon_scanner *s = arg;
    prctl(PR_SET_NAME, "lis-scan");
    lower_priority();
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->work, &s->mu);
        if (s->stop)
            break;
        scan_job *j = s->head;
        s->head = j->next;
        if (!s->head)
            s->tail = NULL;
        j->state = JOB_RUNNING;
        s->queued--;
        s->busy++;
        pthread_mutex_unlock(&s->mu);
        j->fn(j->arg);
        pthread_mutex_lock(&s->mu);
        s->busy--;
        j->state = JOB_DONE;
        pthread_cond_broadcast(&s->done);
    }
    /* stopping: what is queued goes back to its callers */
    for (scan_job *j = s->head; j; j = j->next)
        j->state = JOB_RETURNED;
    s->head = s->tail = NULL;
    s->queued = 0;
    pthread_cond_broadcast(&s->done);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Starts one more thread when each running one has a scan to do (s->mu
 * held): 0, or -1 when none runs at all. */
static int grow(mon_scanner *s)
{
    if (s->nthreads > s->busy + s->queued || s->nthreads >= s->max)
        return 0;
    /* a thread that takes no signals: they belong to the application */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread[s->nthreads], NULL, scanner_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        s->nthreads++;
    return s->nthreads ? 0 : -1;
}

void mon_scanner_run(mon_scanner *s, void (*fn)(void *), void *arg)
{
    if (!s) {
        fn(arg);
        return;
    }
    scan_job j = {fn, arg, JOB_QUEUED, NULL};
    pthread_mutex_lock(&s->mu);
    if (s->stop || grow(s) < 0) {
        pthread_mutex_unlock(&s->mu);
        fn(arg); /* no scanner thread: the caller's, as before */
        return;
    }
    if (s->tail)
        s->tail->next = &j;
    else
        s->head = &j;
    s->tail = &j;
    s->queued++;
    s->waiters++;
    pthread_cond_signal(&s->work);
    while (j.state == JOB_QUEUED || j.state == JOB_RUNNING)
        pthread_cond_wait(&s->done, &s->mu);
    if (--s->waiters == 0 && s->stop)
        pthread_cond_signal(&s->idle);
    pthread_mutex_unlock(&s->mu);
    if (j.state == JOB_RETURNED)
        fn(arg);
}

int mon_scanner_queued(mon_scanner *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->queued;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void mon_scanner_free(mon_scanner *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->nthreads; i++)
        pthread_join(s->thread[i], NULL);
    pthread_mutex_lock(&s->mu);
    while (s->waiters)
        pthread_cond_wait(&s->idle, &s->mu);
    pthread_mutex_unlock(&s->mu);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->done);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
