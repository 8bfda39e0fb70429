/* bench_monitor.c - the cost of monitor/ (scripts/bench-monitor.sh):
 *  1. one exec notification: N execs of a static program in one command, in a sandbox
 *     with the monitor and in one without (the peer, same run); the difference per exec;
 *  2. one step's file diff with 100 changed files: lis_monitor_step_end's time after a
 *     command that changed 100 small text files, against one after a command that
 *     changed none (the peer: the step's fixed cost).
 * Usage: bench_monitor ROOTFS PROBE [N] */
#include "lis_monitor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lis_sandbox *make(lis_ctx *ctx, const char *rootfs, const char *probe, unsigned mon)
{
    lis_bind b = {.host_path = probe, .path = "/mprobe", .read_only = 1};
    lis_sandbox_spec spec = {.rootfs = rootfs,
                             .upper = LIS_UPPER_TMPFS,
                             .binds = &b,
                             .nbinds = 1,
                             .monitor = mon};
    lis_sandbox *sb;
    lis_error err = {0};
    if (lis_sandbox_create(ctx, &spec, &sb, &err) < 0) {
        fprintf(stderr, "bench_monitor: %s\n", err.msg);
        exit(1);
    }
    return sb;
}

static double run(lis_sandbox *sb, const char *cmd)
{
    lis_exec_spec ex = {.shell = cmd, .timeout = 600};
    lis_result r;
    lis_error err = {0};
    double t0 = lis_now();
    if (lis_exec(sb, &ex, &r, &err) < 0 || r.exit_code != 0) {
        fprintf(stderr, "bench_monitor: %s failed: %s\n", cmd, err.msg);
        exit(1);
    }
    lis_result_free(&r);
    return lis_now() - t0;
}

static double step_end_time(lis_monitor *m, lis_sandbox *sb, const char *cmd)
{
    lis_error err = {0};
    lis_monitor_step_begin(m, NULL, &err);
    run(sb, cmd);
    lis_effects *fx;
    double t0 = lis_now();
    if (lis_monitor_step_end(m, NULL, &fx, &err) < 0) {
        fprintf(stderr, "bench_monitor: %s\n", err.msg);
        exit(1);
    }
    double t = lis_now() - t0;
    lis_effects_free(fx);
    return t;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int n = argc > 3 ? atoi(argv[3]) : 500;
    lis_error err = {0};
    lis_ctx *ctx = lis_ctx_new(NULL, &err);
    lis_monitor_hub *hub = ctx ? lis_monitor_hub_new(&err) : NULL;
    if (!hub) {
        fprintf(stderr, "bench_monitor: %s\n", err.msg);
        return 1;
    }
    lis_sandbox *off = make(ctx, argv[1], argv[2], 0);
    lis_sandbox *on = make(ctx, argv[1], argv[2], LIS_MONITOR_EXEC);
    lis_monitor *m;
    if (lis_monitor_attach(hub, on, NULL, &m, &err) < 0) {
        fprintf(stderr, "bench_monitor: %s\n", err.msg);
        return 1;
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "i=0; while [ $i -lt %d ]; do /mprobe exit 0; i=$((i+1)); done", n);
    double best_on = 1e9, best_off = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double a = run(off, cmd), b;
        lis_monitor_step_begin(m, NULL, &err);
        b = run(on, cmd);
        lis_effects *fx;
        lis_monitor_step_end(m, NULL, &fx, &err);
        lis_effects_free(fx);
        best_off = a < best_off ? a : best_off;
        best_on = b < best_on ? b : best_on;
    }
    printf("exec: %d execs, best of 5: %.1f us/exec without the monitor (peer), %.1f us with; "
           "notification cost %.1f us/exec (goal <= 50), ratio %.3f\n",
           n, best_off / n * 1e6, best_on / n * 1e6, (best_on - best_off) / n * 1e6,
           best_on / best_off);
    /* the file diff: 100 small text files changed in one step */
    run(on, "mkdir -p /testbed/bench");
    double with[7], without[7];
    for (int rep = 0; rep < 7; rep++) {
        snprintf(cmd, sizeof cmd,
                 "i=0; while [ $i -lt 100 ]; do echo line $i run %d > /testbed/bench/f$i.txt; "
                 "i=$((i+1)); done",
                 rep);
        with[rep] = step_end_time(m, on, cmd);
        without[rep] = step_end_time(m, on, "true");
    }
    qsort(with, 7, sizeof *with, cmp);
    qsort(without, 7, sizeof *without, cmp);
    printf("diff: step end with 100 changed files: median %.3f ms; with none (peer): %.3f ms; "
           "the diff of 100 files %.3f ms (goal <= 1)\n",
           with[3] * 1e3, without[3] * 1e3, (with[3] - without[3]) * 1e3);
    lis_sandbox_destroy(off, &err);
    lis_sandbox_destroy(on, &err);
    lis_monitor_free(m);
    lis_monitor_hub_free(hub);
    lis_ctx_free(ctx);
    return 0;
}
