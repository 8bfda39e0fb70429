/* jobs.c - the one job pool: a fixed set of worker threads for what blocks
 * (creating and destroying sandboxes, copying files, pulling, scoring), with
 * each job's completion handed back to the loop thread that owns the pool
 * (libuv's threadpool is the model: uv_queue_work and its after_work_cb). */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Each worker's stack: 1 MiB (batch/workers.c's before the one pool), about
 * three times what the deepest job needs. Measured with gcc
 * -fcallgraph-info=su over runtime/ net/ rootfs/ agent/ batch/ serve/ (lis's
 * own frames at -O2, recursions at their bound):
 * - a sandbox's set-up (batch/jobs.c:bjob_setup, serve's fork_work) ~190 KB,
 *   with the clone child that runs the mount plan on a copy of this stack
 *   (lis_copy_tree: 200 levels x 368 B and a 64 KiB copy buffer);
 * - an episode's end (bjob_finish: the copy out, 512 x 432 B, 64 KiB buffer)
 *   ~320 KB;
 * - serve's archive GET (lis_walk, 512 x 304 B) ~180 KB;
 * - an image pull's opaque whiteout (rootfs/extract.c:opaque_clean, a level
 *   per 2 characters of path: 2,048 x 128 B) ~330 KB.
 * Libraries add less than 150 KB: cJSON's parse nests at most 1000 deep
 * (~100 B a level); libcurl, libarchive and OpenSSL keep their buffers on the
 * heap. A recursion whose level holds a PATH_MAX buffer breaks this (512 x
 * 4 KiB = 2 MiB): such buffers live in out-of-line leaves (walk.c:walk_link,
 * copytree.c:copy_symlink, extract.c:open_opaque), and tests/test_bombs.c and
 * test_rootfs.c run those walks at their bound on a pool thread. ASan's
 * redzones about double a frame: its builds get twice the size. The size is
 * address space; only the pages a job touches are memory. */
#if defined(__SANITIZE_ADDRESS__)
#define JOB_STACK (2u << 20)
#else
#define JOB_STACK (1u << 20)
#endif

typedef enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_FINISHED, JOB_CANCELLED } job_state;

struct lis_job {
    void (*run)(void *arg);
    void (*done)(void *arg, int status);
    void *arg;
    job_state state;
    struct lis_job *next;
};

struct lis_jobs {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lis_job *queue, **queue_tail; /* waiting, oldest first */
    lis_job *finished;            /* run or cancelled, newest first */
    unsigned nthreads, running, queued;
    int stop, efd;
    pthread_t *threads;
};

static void finish_locked(lis_jobs *p, lis_job *j, job_state st)
{
    j->state = st;
    j->next = p->finished;
    p->finished = j;
    uint64_t one = 1;
    if (write(p->efd, &one, sizeof one) < 0) {
        /* the counter cannot overflow here; reap reads the list, not the count */
    }
}

static void *worker(void *arg)
{
    lis_jobs *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->queue && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (!p->queue)
            break;
        lis_job *j = p->queue;
        p->queue = j->next;
        if (!p->queue)
            p->queue_tail = &p->queue;
        p->queued--;
        p->running++;
        j->state = JOB_RUNNING;
        pthread_mutex_unlock(&p->mu);
        j->run(j->arg);
        pthread_mutex_lock(&p->mu);
        p->running--;
        finish_locked(p, j, JOB_FINISHED);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

lis_jobs *lis_jobs_new(unsigned threads, lis_error *err)
{
    lis_jobs *p = calloc(1, sizeof *p);
    if (!p) {
        lis_oom(err);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->queue_tail = &p->queue;
    p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (p->efd < 0) {
        lis_fail_errno(err, "creating the job pool's eventfd");
        lis_jobs_free(p);
        return NULL;
    }
    threads = threads ? threads : 1;
    if (!(p->threads = calloc(threads, sizeof *p->threads))) {
        lis_oom(err);
        lis_jobs_free(p);
        return NULL;
    }
    pthread_attr_t at;
    int arc = pthread_attr_init(&at);
    if (arc == 0 && (arc = pthread_attr_setstacksize(&at, JOB_STACK)) != 0)
        pthread_attr_destroy(&at);
    if (arc) {
        lis_fail_errnum(err, arc, "setting the job pool's %u KiB thread stack", JOB_STACK >> 10);
        lis_jobs_free(p);
        return NULL;
    }
    for (unsigned i = 0; i < threads; i++) {
        int rc = pthread_create(&p->threads[i], &at, worker, p);
        if (rc) {
            /* a pool smaller than asked would silently serialise the work */
            lis_fail_errnum(err, rc,
                            "starting worker thread %u of %u (ulimit -u, "
                            "kernel.threads-max)",
                            i + 1, threads);
            pthread_attr_destroy(&at);
            lis_jobs_free(p);
            return NULL;
        }
        p->nthreads++;
    }
    pthread_attr_destroy(&at);
    return p;
}

int lis_jobs_fd(const lis_jobs *p) { return p->efd; }

lis_job *lis_jobs_submit(lis_jobs *p, void (*run)(void *arg), void (*done)(void *arg, int status),
                         void *arg, lis_error *err)
{
    lis_job *j = calloc(1, sizeof *j);
    if (!j) {
        lis_oom(err);
        return NULL;
    }
    j->run = run;
    j->done = done;
    j->arg = arg;
    j->state = JOB_QUEUED;
    pthread_mutex_lock(&p->mu);
    *p->queue_tail = j;
    p->queue_tail = &j->next;
    p->queued++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return j;
}

int lis_jobs_cancel(lis_jobs *p, lis_job *j)
{
    int rc = -1;
    pthread_mutex_lock(&p->mu);
    if (j->state == JOB_QUEUED) {
        for (lis_job **q = &p->queue; *q; q = &(*q)->next)
            if (*q == j) {
                *q = j->next;
                if (!*q)
                    p->queue_tail = q;
                break;
            }
        p->queued--;
        finish_locked(p, j, JOB_CANCELLED);
        rc = 0;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int lis_jobs_reap(lis_jobs *p)
{
    uint64_t v;
    if (read(p->efd, &v, sizeof v) < 0) {
        /* EAGAIN: nothing new since the last reap; the list says so too */
    }
    pthread_mutex_lock(&p->mu);
    lis_job *list = p->finished;
    p->finished = NULL;
    pthread_mutex_unlock(&p->mu);
    lis_job *rev = NULL; /* oldest first */
    while (list) {
        lis_job *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    int n = 0;
    while (rev) {
        lis_job *next = rev->next;
        if (rev->done)
            rev->done(rev->arg, rev->state == JOB_CANCELLED ? ECANCELED : 0);
        free(rev);
        rev = next;
        n++;
    }
    return n;
}

unsigned lis_jobs_pending(const lis_jobs *p)
{
    lis_jobs *q = (lis_jobs *)p; /* the lock, not the pool, changes */
    pthread_mutex_lock(&q->mu);
    unsigned n = q->running + q->queued;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void lis_jobs_stop(lis_jobs *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    /* the workers run what is queued, then end */
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    p->nthreads = 0;
}

void lis_jobs_free(lis_jobs *p)
{
    if (!p)
        return;
    lis_jobs_stop(p);
    while (p->finished) { /* not reaped: their done callbacks are not called */
        lis_job *n = p->finished->next;
        free(p->finished);
        p->finished = n;
    }
    if (p->efd >= 0)
        close(p->efd);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
