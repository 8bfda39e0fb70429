/* pool.c - pre-warmed sandboxes: a background thread keeps `size` ready. */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct lis_pool {
    lis_ctx *ctx;
    lis_sandbox_spec spec;
    /* deep copies of what spec points to */
    char *rootfs, *hostname, **env, **strs; /* strs: 2 per bind */
    lis_bind *binds;
    unsigned size, n;
    lis_sandbox **ready;
    pthread_mutex_t mu;
    pthread_cond_t need, have;
    pthread_t thread;
    int stop, failed;
    lis_error last;
};

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static char **dup_list(const char *const *v)
{
    if (!v)
        return NULL;
    size_t n = 0;
    while (v[n])
        n++;
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        out[i] = strdup(v[i]);
    return out;
}

static void free_strs(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static void free_list(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* Frees the pool and its copies of the spec. */
static void free_copies(lis_pool *p)
{
    free(p->ready);
    free(p->binds);
    free_strs(p->strs, 2 * p->spec.nbinds);
    free_list(p->env);
    free(p->rootfs);
    free(p->hostname);
    free(p);
}

static void *refill(void *arg)
{
    lis_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        if (p->n >= p->size || p->failed) {
            pthread_cond_wait(&p->need, &p->mu);
            continue;
        }
        pthread_mutex_unlock(&p->mu);
        lis_sandbox *sb = NULL;
        lis_error err = {0};
        int rc = lis_sandbox_create(p->ctx, &p->spec, &sb, &err);
        pthread_mutex_lock(&p->mu);
        if (rc < 0) {
            /* one failure stops refilling until someone takes (and sees it) */
            p->last = err;
            p->failed = 1;
        } else if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            lis_sandbox_destroy(sb, &err);
            pthread_mutex_lock(&p->mu);
        } else {
            p->ready[p->n++] = sb;
        }
        pthread_cond_broadcast(&p->have);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

lis_pool *lis_pool_new(lis_ctx *ctx, const lis_sandbox_spec *spec, unsigned size, lis_error *err)
{
    if (spec->name) {
        lis_fail(err, EINVAL, "pooled sandboxes get generated names: leave spec.name NULL");
        return NULL;
    }
    if (size == 0 || size > 4096) {
        lis_fail(err, EINVAL, "pool size %u: use 1 to 4096", size);
        return NULL;
    }
    lis_pool *p = calloc(1, sizeof *p);
    if (!p) {
        lis_oom(err);
        return NULL;
    }
    p->ctx = ctx;
    p->spec = *spec;
    p->size = size;
    p->rootfs = dup_or_null(spec->rootfs);
    p->hostname = dup_or_null(spec->hostname);
    p->env = dup_list(spec->env);
    p->ready = calloc(size, sizeof *p->ready);
    p->binds = spec->nbinds ? calloc(spec->nbinds, sizeof *p->binds) : NULL;
    p->strs = calloc(2 * spec->nbinds + 1, sizeof *p->strs);
    for (size_t i = 0; p->binds && i < spec->nbinds; i++) {
        p->binds[i] = spec->binds[i];
        p->binds[i].host_path = p->strs[2 * i] = dup_or_null(spec->binds[i].host_path);
        p->binds[i].path = p->strs[2 * i + 1] = dup_or_null(spec->binds[i].path);
    }
    p->spec.rootfs = p->rootfs;
    p->spec.hostname = p->hostname;
    p->spec.env = (const char *const *)p->env;
    p->spec.binds = p->binds;
    p->spec.persist = 0; /* pooled sandboxes die with their owner */
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->need, NULL);
    pthread_cond_init(&p->have, NULL);
    if (!p->ready || !p->strs || (spec->rootfs && !p->rootfs) ||
        pthread_create(&p->thread, NULL, refill, p) != 0) {
        lis_fail(err, ENOMEM, "starting the pool failed");
        free_copies(p);
        return NULL;
    }
    return p;
}

int lis_pool_take(lis_pool *p, lis_sandbox **out, lis_error *err)
{
    *out = NULL;
    pthread_mutex_lock(&p->mu);
    while (p->n == 0 && !p->failed)
        pthread_cond_wait(&p->have, &p->mu);
    int rc = 0;
    if (p->n > 0) {
        *out = p->ready[--p->n];
    } else {
        if (err)
            *err = p->last;
        lis_wrap(err, "pool");
        p->failed = 0; /* let the thread try again */
        rc = -1;
    }
    pthread_cond_signal(&p->need);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

unsigned lis_pool_ready(lis_pool *p)
{
    pthread_mutex_lock(&p->mu);
    unsigned n = p->n;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void lis_pool_free(lis_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->need);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    lis_error ignore;
    for (unsigned i = 0; i < p->n; i++)
        lis_sandbox_destroy(p->ready[i], &ignore);
    pthread_cond_destroy(&p->need);
    pthread_cond_destroy(&p->have);
    pthread_mutex_destroy(&p->mu);
    free_copies(p);
}
