/* bench_fork - fork, snapshot, pause and resume through the C API (used by
 * scripts/bench-fork.sh).
 *
 *   bench_fork ROOTFS MB N REPS
 *
 * A parent sandbox on ROOTFS with MB MiB written to its writable layer; then,
 * REPS times each: lis_sandbox_fork(N) (snapshot + N ephemeral tmpfs
 * sandboxes, until all are running), N fresh lis_sandbox_create on ROOTFS
 * by 4 threads as the fork makes its own (the floor a fork cannot beat), lis_sandbox_pause and lis_sandbox_resume
 * of the parent (which runs a sleeping process). Prints "key median_ms" lines. Forks and fresh sandboxes are
 * destroyed between repetitions (not timed). */
#include "lis.h"
#include "rootfs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static void die(const char *what, const lis_error *e)
{
    fprintf(stderr, "bench_fork: %s: %s\n", what, e->msg);
    exit(1);
}

/* n fresh sandboxes made by 4 threads, as lis_sandbox_fork makes its forks */
typedef struct fresh_job {
    lis_ctx *ctx;
    const lis_sandbox_spec *spec;
    lis_sandbox **out;
    int n, next, failed;
    pthread_mutex_t mu;
} fresh_job;

static void *fresh_worker(void *arg)
{
    fresh_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int i = j->next < j->n ? j->next++ : -1;
        pthread_mutex_unlock(&j->mu);
        if (i < 0)
            return NULL;
        lis_error err = {0};
        if (lis_sandbox_create(j->ctx, j->spec, &j->out[i], &err) < 0) {
            fprintf(stderr, "bench_fork: fresh: %s\n", err.msg);
            j->failed = 1;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_fork ROOTFS MB N REPS\n");
        return 2;
    }
    const char *rootfs = argv[1];
    int mb = atoi(argv[2]), n = atoi(argv[3]), reps = atoi(argv[4]);
    if (n < 1 || n > 256 || reps < 1 || reps > 1000 || mb < 0) {
        fprintf(stderr, "bench_fork: bad numbers\n");
        return 2;
    }
    lis_error err = {0};
    lis_ctx *ctx = lis_ctx_new(NULL, &err);
    if (!ctx)
        die("context", &err);
    lis_sandbox_spec spec = {.rootfs = rootfs, .upper = LIS_UPPER_TMPFS};
    lis_sandbox *parent;
    if (lis_sandbox_create(ctx, &spec, &parent, &err) < 0)
        die("parent", &err);
    char cmd[160];
    /* a process for pause to stop, as an agent's shell or server would be */
    snprintf(cmd, sizeof cmd,
             "mkdir -p /work && dd if=/dev/urandom of=/work/data bs=1M "
             "count=%d 2>/dev/null && { sleep 100000 >/dev/null 2>&1 </dev/null & }",
             mb);
    lis_exec_spec ex = {.shell = cmd};
    lis_result r;
    if (lis_exec(parent, &ex, &r, &err) < 0 || r.exit_code != 0)
        die("writing the layer", &err);
    lis_result_free(&r);
    lis_sandbox **sbs = calloc((size_t)n, sizeof *sbs);
    lis_error *errs = calloc((size_t)n, sizeof *errs);
    double *fork_ms = calloc((size_t)reps, sizeof(double)),
           *fresh_ms = calloc((size_t)reps, sizeof(double)),
           *pause_ms = calloc((size_t)reps, sizeof(double)),
           *resume_ms = calloc((size_t)reps, sizeof(double)),
           *stopped_ms = calloc((size_t)reps, sizeof(double));
    if (!sbs || !errs || !fork_ms || !fresh_ms || !pause_ms || !resume_ms || !stopped_ms)
        return 1;
    for (int k = 0; k < reps; k++) {
        /* fork: one snapshot + n sandboxes running on it */
        lis_snapshot_result snap;
        double t0 = now_ms();
        int made = lis_sandbox_fork(ctx, parent, n, NULL, sbs, errs, &snap, &err);
        fork_ms[k] = now_ms() - t0;
        if (made != n)
            die("fork", made < 0 ? &err : &errs[0]);
        stopped_ms[k] = snap.capture.paused_ms;
        for (int i = 0; i < n; i++)
            lis_sandbox_destroy(sbs[i], &err);
        /* fresh: n sandboxes on the image itself, made the same way */
        fresh_job fj = {.ctx = ctx, .spec = &spec, .out = sbs, .n = n};
        pthread_mutex_init(&fj.mu, NULL);
        pthread_t t[3];
        t0 = now_ms();
        for (int i = 0; i < 3; i++)
            pthread_create(&t[i], NULL, fresh_worker, &fj);
        fresh_worker(&fj);
        for (int i = 0; i < 3; i++)
            pthread_join(t[i], NULL);
        fresh_ms[k] = now_ms() - t0;
        pthread_mutex_destroy(&fj.mu);
        if (fj.failed)
            return 1;
        for (int i = 0; i < n; i++)
            lis_sandbox_destroy(sbs[i], &err);
        t0 = now_ms();
        if (lis_sandbox_pause(parent, &err) < 0)
            die("pause", &err);
        pause_ms[k] = now_ms() - t0;
        t0 = now_ms();
        if (lis_sandbox_resume(parent, &err) < 0)
            die("resume", &err);
        resume_ms[k] = now_ms() - t0;
    }
    printf("layer_mb %d\nforks %d\nreps %d\n", mb, n, reps);
    printf("fork_ms %.2f\n", median(fork_ms, reps));
    printf("fresh_ms %.2f\n", median(fresh_ms, reps));
    printf("snapshot_paused_ms %.2f\n", median(stopped_ms, reps));
    printf("pause_ms %.3f\n", median(pause_ms, reps));
    printf("resume_ms %.3f\n", median(resume_ms, reps));
    lis_sandbox_destroy(parent, &err);
    lis_ctx_free(ctx);
    return 0;
}
