/* workers.c - the fixed thread pool of workers.h. */
#include "workers.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef struct job {
    void (*run)(void *arg);
    void (*done)(void *arg);
    void *arg;
    struct job *next;
} job;

struct bw_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *queue, **queue_tail;
    job *finished;
    unsigned nthreads, busy;
    int stop, efd;
    pthread_t *threads;
};

static void *worker(void *arg)
{
    bw_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->queue && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (!p->queue)
            break;
        job *j = p->queue;
        p->queue = j->next;
        if (!p->queue)
            p->queue_tail = &p->queue;
        p->busy++;
        pthread_mutex_unlock(&p->mu);
        j->run(j->arg);
        pthread_mutex_lock(&p->mu);
        p->busy--;
        j->next = p->finished;
        p->finished = j;
        uint64_t one = 1;
        ssize_t w = write(p->efd, &one, sizeof one);
        (void)w;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

bw_pool *bw_pool_new(unsigned threads, lis_error *err)
{
    bw_pool *p = calloc(1, sizeof *p);
    if (!p) {
        lis_oom(err);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->queue_tail = &p->queue;
    p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    p->threads = calloc(threads ? threads : 1, sizeof *p->threads);
    if (p->efd < 0 || !p->threads) {
        lis_fail(err, errno ? errno : ENOMEM, "creating the worker pool: %s", strerror(errno));
        bw_pool_free(p);
        return NULL;
    }
    for (unsigned i = 0; i < (threads ? threads : 1); i++) {
        /* small stacks: the jobs are shallow, and 512 KiB x threads is RSS we need not pay */
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 1u << 20);
        int rc = pthread_create(&p->threads[i], &at, worker, p);
        pthread_attr_destroy(&at);
        if (rc) {
            lis_fail_errnum(err, rc, "starting a worker thread");
            bw_pool_free(p);
            return NULL;
        }
        p->nthreads++;
    }
    return p;
}

int bw_pool_fd(const bw_pool *p) { return p->efd; }

int bw_pool_submit(bw_pool *p, void (*run)(void *arg), void (*done)(void *arg), void *arg,
                   lis_error *err)
{
    job *j = calloc(1, sizeof *j);
    if (!j)
        return lis_oom(err);
    j->run = run;
    j->done = done;
    j->arg = arg;
    pthread_mutex_lock(&p->mu);
    *p->queue_tail = j;
    p->queue_tail = &j->next;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

int bw_pool_reap(bw_pool *p)
{
    uint64_t v;
    ssize_t r = read(p->efd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&p->mu);
    job *list = p->finished;
    p->finished = NULL;
    pthread_mutex_unlock(&p->mu);
    /* oldest first */
    job *rev = NULL;
    while (list) {
        job *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    int n = 0;
    while (rev) {
        job *next = rev->next;
        if (rev->done)
            rev->done(rev->arg);
        free(rev);
        rev = next;
        n++;
    }
    return n;
}

unsigned bw_pool_busy(const bw_pool *p)
{
    bw_pool *q = (bw_pool *)p;
    pthread_mutex_lock(&q->mu);
    unsigned n = q->busy;
    for (job *j = q->queue; j; j = j->next)
        n++;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void bw_pool_free(bw_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    for (job *j = p->finished; j;) {
        job *n = j->next;
        free(j);
        j = n;
    }
    if (p->efd >= 0)
        close(p->efd);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
