/* bench_monitor.c - the cost of monitor/ (scripts/bench-monitor.sh):
 *  1. one exec notification: a chain of N execs of a static program in one command
 *     (monitor_probe chain N: each exec replaces the last, no fork), in a sandbox with
 *     the monitor and in one without (the peer, same run, interleaved); the difference
 *     of the medians per exec; beside it, the machine's floor for that wall time: a
 *     pipe round trip to a process waiting on another CPU, 1 ms apart (a notification
 *     wakes the hub, then the hub wakes the exec'ing process: two such hand-overs);
 *  2. one step's file diff with 100 changed files: lis_monitor_step_end's time after a
 *     command that changed 100 small text files, against one after a command that
 *     changed none (the peer: the step's fixed cost).
 * Usage: bench_monitor ROOTFS PROBE [N] */
#include "lis_monitor.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* this process's CPU (its threads: the hub's answers; not the sandboxes') */
static double self_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median microseconds of a pipe round trip to a child pinned to another CPU
 * than ours, 1 ms apart (each wake-up finds that CPU idle, as the hub's and
 * the exec'ing process's are in the chain); -1 with one CPU. */
static double handover_floor_us(void)
{
    cpu_set_t set, one;
    if (sched_getaffinity(0, sizeof set, &set) < 0 || CPU_COUNT(&set) < 2)
        return -1;
    int cpus[2], k = 0;
    for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
        if (CPU_ISSET(c, &set))
            cpus[k++] = c;
    int to[2], back[2];
    if (pipe(to) < 0 || pipe(back) < 0)
        return -1;
    pid_t child = fork();
    if (child < 0)
        return -1;
    if (child == 0) {
        close(to[1]); /* else its read never sees the end */
        close(back[0]);
        CPU_ZERO(&one);
        CPU_SET(cpus[1], &one);
        sched_setaffinity(0, sizeof one, &one);
        char c;
        while (read(to[0], &c, 1) == 1 && write(back[1], &c, 1) == 1) {
        }
        _exit(0);
    }
    CPU_ZERO(&one);
    CPU_SET(cpus[0], &one);
    sched_setaffinity(0, sizeof one, &one);
    enum { TRIPS = 301 };
    double t[TRIPS];
    char c = 'x';
    for (int i = 0; i < TRIPS; i++) {
        struct timespec gap = {0, 1000000};
        nanosleep(&gap, NULL);
        double t0 = lis_now();
        if (write(to[1], &c, 1) != 1 || read(back[0], &c, 1) != 1)
            break;
        t[i] = lis_now() - t0;
    }
    close(to[1]);
    close(to[0]);
    close(back[0]);
    close(back[1]);
    waitpid(child, NULL, 0);
    sched_setaffinity(0, sizeof set, &set);
    qsort(t, TRIPS, sizeof *t, cmp);
    return t[TRIPS / 2] * 1e6;
}

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

/* this thread's CPU seconds (a step's scan runs on the caller's thread) */
static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double step_end_time(lis_monitor *m, lis_sandbox *sb, const char *cmd, double *cpu)
{
    lis_error err = {0};
    lis_monitor_step_begin(m, NULL, &err);
    run(sb, cmd);
    lis_effects *fx;
    double t0 = lis_now(), c0 = thread_cpu();
    if (lis_monitor_step_end(m, NULL, &fx, &err) < 0) {
        fprintf(stderr, "bench_monitor: %s\n", err.msg);
        exit(1);
    }
    double t = lis_now() - t0;
    if (cpu)
        *cpu = thread_cpu() - c0;
    lis_effects_free(fx);
    return t;
}

/* ---- one episode cannot slow another (issue 29) ---- */

struct attacker {
    lis_monitor *m;
    lis_sandbox *sb;
    volatile int stop, active;
    int steps;
    double scan_max, scan_sum, cpu_sum;
};

/* Steps that each make 2,000 more files, the step's begin and end scans
 * included, until told to stop. */
static void *attack(void *arg)
{
    struct attacker *a = arg;
    char cmd[128];
    while (!a->stop) {
        if (!a->active) {
            usleep(1000);
            continue;
        }
        snprintf(cmd, sizeof cmd, "/mprobe files 2000 /more%d", a->steps++);
        /* unmonitored (the peer): the same work with no scan at all */
        double cpu = 0, t = a->m ? step_end_time(a->m, a->sb, cmd, &cpu) : (run(a->sb, cmd), 0);
        if (t > a->scan_max)
            a->scan_max = t;
        a->scan_sum += t;
        a->cpu_sum += cpu;
        usleep(100000); /* paced: the same CPU whatever a scan costs */
    }
    return NULL;
}

/* p99 of n commands' wall time in the neighbour (each one exec and its
 * exit: two notifications of the shared hub) */
static double p99_ms(double *t, int n, double *median)
{
    qsort(t, (size_t)n, sizeof *t, cmp);
    double p = t[(size_t)n * 99 / 100] * 1e3;
    *median = t[n / 2] * 1e3;
    return p;
}

/* the tail of a sorted sample: where a p99 comes from */
static void tail(const char *what, const double *t, int n)
{
    printf("neighbour: %s: p50 %.2f p90 %.2f p95 %.2f p99 %.2f p99.9 %.2f max %.2f ms\n", what,
           t[n / 2] * 1e3, t[(size_t)n * 90 / 100] * 1e3, t[(size_t)n * 95 / 100] * 1e3,
           t[(size_t)n * 99 / 100] * 1e3, t[(size_t)n * 999 / 1000] * 1e3, t[n - 1] * 1e3);
}

static int neighbour(lis_ctx *ctx, lis_monitor_hub *hub, const char *rootfs, const char *probe,
                     int n)
{
    lis_error err = {0};
    lis_sandbox *nb = make(ctx, rootfs, probe, LIS_MONITOR_EXEC);
    lis_bind b = {.host_path = probe, .path = "/mprobe", .read_only = 1};
    lis_sandbox_spec spec = {.rootfs = rootfs,
                             .upper = LIS_UPPER_TMPFS,
                             .binds = &b,
                             .nbinds = 1,
                             .limits = {.disk_bytes = 3ull << 30, .memory_bytes = 2ull << 30},
                             .monitor = LIS_MONITOR_EXEC};
    lis_sandbox *att;
    lis_monitor *mn, *ma;
    if (lis_sandbox_create(ctx, &spec, &att, &err) < 0 ||
        lis_monitor_attach(hub, nb, NULL, &mn, &err) < 0 ||
        lis_monitor_attach(hub, att, NULL, &ma, &err) < 0) {
        fprintf(stderr, "bench_monitor: %s\n", err.msg);
        return 1;
    }
    double med0, med1;
    run(nb, "true");
    /* the attacker's layer: 200,000 files, made in one step (scanned at its end) */
    double t0 = lis_now();
    step_end_time(ma, att, "/mprobe files 200000 /h", NULL);
    printf("neighbour: the attacker's 200,000 files made and their step closed in %.1f s\n",
           lis_now() - t0);
    /* the peer: the same attacker in a sandbox no monitor watches (its own
     * CPU alone: what any runtime on these 2 cores would see) */
    spec.monitor = 0;
    lis_sandbox *bare;
    if (lis_sandbox_create(ctx, &spec, &bare, &err) < 0) {
        fprintf(stderr, "bench_monitor: %s\n", err.msg);
        return 1;
    }
    run(bare, "/mprobe files 200000 /h");
    struct attacker a = {.m = ma, .sb = att}, ab = {.sb = bare};
    pthread_t th, thb;
    pthread_create(&th, NULL, attack, &a);
    pthread_create(&thb, NULL, attack, &ab);
    /* quiet, attacked and peer-attacked blocks interleaved: the host's own
     * noise falls on all three */
    /* blocks of 100 commands (at least 10 of each kind): the more blocks,
     * the more the host's own bursts fall evenly on the three kinds */
    int blocks = n / 100 < 10 ? 10 : n / 100;
    double *tq = calloc((size_t)n, sizeof *tq), *tl = calloc((size_t)n, sizeof *tl),
           *tb = calloc((size_t)n, sizeof *tb);
    int nq = 0, nl = 0, nbare = 0;
    for (int blk = 0; blk < 3 * blocks; blk++) {
        int loud_blk = blk % 3 == 1, bare_blk = blk % 3 == 2;
        a.active = loud_blk;
        ab.active = bare_blk;
        lis_proc *bg = NULL;
        if (loud_blk || bare_blk) {
            lis_sandbox *who = loud_blk ? att : bare;
            /* a process of the attacker exec'ing all along: its notifications reach the
             * hub while the attacker's scans run */
            lis_exec_spec ex = {.shell = "while :; do /mprobe exit 0; sleep 0.02; done "
                                         ">/dev/null 2>&1",
                                .timeout = 600};
            if (lis_exec_start(who, &ex, &bg, &err) < 0)
                bg = NULL;
            usleep(50000); /* the attacker's steps under way */
        }
        for (int i = 0; i < n / blocks; i++) {
            double t = run(nb, "exec /mprobe exit 0");
            if (loud_blk)
                tl[nl++] = t;
            else if (bare_blk)
                tb[nbare++] = t;
            else
                tq[nq++] = t;
        }
        a.active = ab.active = 0;
        if (bg) {
            lis_result r;
            lis_proc_signal(bg, SIGKILL, &err);
            if (lis_proc_wait(bg, &r, &err) == 0)
                lis_result_free(&r);
        }
        usleep(300000); /* its step ends before the next quiet block */
    }
    double med2, quiet = p99_ms(tq, nq, &med0), loud = p99_ms(tl, nl, &med1),
                 peer = p99_ms(tb, nbare, &med2);
    tail("no attacker", tq, nq);
    tail("monitored attacker", tl, nl);
    tail("unmonitored attacker", tb, nbare);
    free(tq);
    free(tl);
    free(tb);
    a.stop = ab.stop = 1;
    pthread_join(th, NULL);
    pthread_join(thb, NULL);
    printf("neighbour: exec latency of a neighbour, %d commands each: p99 %.2f ms (median %.2f) "
           "with no attacker; p99 %.2f ms (median %.2f) while an episode holds 200,000 files and "
           "makes 2,000 more every step, a process of it exec'ing all along (%d steps, longest step end %.0f ms), in %d interleaved "
           "blocks each; ratio of p99 %.3f (goal <= 1.2)\n",
           n, quiet, med0, loud, med1, a.steps, a.scan_max * 1e3, blocks, loud / quiet);
    printf("neighbour: the attacker's step ends (its scans of 2,000 new files beside 200,000): "
           "mean %.1f ms, %.1f ms of CPU\n",
           a.steps ? a.scan_sum * 1e3 / a.steps : 0, a.steps ? a.cpu_sum * 1e3 / a.steps : 0);
    printf("neighbour: the peer, the same attacker in a sandbox with no monitor (its own work "
           "alone, no scan): p99 %.2f ms (median %.2f); the monitored attacker against it: "
           "ratio of p99 %.3f (what the monitor's scans add)\n",
           peer, med2, loud / peer);
    lis_sandbox_destroy(bare, &err);
    lis_sandbox_destroy(att, &err);
    lis_sandbox_destroy(nb, &err);
    lis_monitor_free(ma);
    lis_monitor_free(mn);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 4 && !strcmp(argv[4], "neighbour")) {
        lis_error e0 = {0};
        lis_ctx *c0 = lis_ctx_new(NULL, &e0);
        lis_monitor_hub *h0 = c0 ? lis_monitor_hub_new(&e0) : NULL;
        if (!h0) {
            fprintf(stderr, "bench_monitor: %s\n", e0.msg);
            return 1;
        }
        int rc = neighbour(c0, h0, argv[1], argv[2], argc > 3 ? atoi(argv[3]) : 300);
        lis_monitor_hub_free(h0);
        lis_ctx_free(c0);
        return rc;
    }
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
    /* one exec notification: a chain of N execs of a static program in one
     * command (no fork, no shell between them), with the monitor and without,
     * interleaved REPS times; the per-exec difference of the medians (and of
     * the best runs) is the notification's cost */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "/mprobe chain %d", n);
    enum { REPS = 15 };
    double on_t[REPS], off_t[REPS], cpu_on = 0, cpu_off = 0;
    for (int rep = 0; rep < REPS; rep++) {
        double c0 = self_cpu();
        off_t[rep] = run(off, cmd);
        double c1 = self_cpu();
        lis_monitor_step_begin(m, NULL, &err);
        double c2 = self_cpu();
        on_t[rep] = run(on, cmd);
        double c3 = self_cpu();
        cpu_off += c1 - c0;
        cpu_on += c3 - c2;
        lis_effects *fx;
        lis_monitor_step_end(m, NULL, &fx, &err);
        lis_effects_summary sum;
        lis_effects_summarize(fx, &sum);
        if (rep == 0 && sum.processes < (size_t)n) /* the chain's execs were all seen */
            fprintf(stderr, "bench_monitor: only %zu of %d execs recorded\n", sum.processes, n);
        lis_effects_free(fx);
    }
    qsort(on_t, REPS, sizeof *on_t, cmp);
    qsort(off_t, REPS, sizeof *off_t, cmp);
    printf("exec: a chain of %d execs in one command, %d runs each, interleaved: median %.1f us/exec "
           "without the monitor (peer), %.1f us with; the notification's wall cost %.1f us/exec "
           "(median), %.1f us/exec (best runs), its floor below; ratio %.3f\n",
           n, REPS, off_t[REPS / 2] / n * 1e6, on_t[REPS / 2] / n * 1e6,
           (on_t[REPS / 2] - off_t[REPS / 2]) / n * 1e6, (on_t[0] - off_t[0]) / n * 1e6,
           on_t[REPS / 2] / off_t[REPS / 2]);
    printf("exec: lis's own CPU (the hub answering) %.1f us per exec notification (goal <= 50)\n",
           (cpu_on - cpu_off) / REPS / n * 1e6);
    /* the same chain under a policy with an exec rule: each exec is resolved
     * in the sandbox's root and checked again after it (exec_canon.c,
     * exec_verify.c) */
    static const char yaml[] = "rules:\n"
                               "  - {name: no-curl, on: exec, path: /usr/bin/curl, action: deny}\n";
    lis_policy *pol = lis_policy_parse(yaml, sizeof yaml - 1, "bench.yaml", &err);
    lis_sandbox *ruled = make(ctx, argv[1], argv[2], LIS_MONITOR_EXEC);
    lis_monitor *mr;
    lis_monitor_opts mo = {.policy = pol};
    if (!pol || lis_monitor_attach(hub, ruled, &mo, &mr, &err) < 0) {
        fprintf(stderr, "bench_monitor: %s\n", err.msg);
        return 1;
    }
    double cpu_rules = 0, cpu_plain = 0;
    for (int rep = 0; rep < REPS; rep++) {
        /* as above: each step's begin (its scan) outside what is counted */
        lis_monitor_step_begin(m, NULL, &err);
        double c0 = self_cpu();
        run(on, cmd);
        double c1 = self_cpu();
        lis_monitor_step_begin(mr, NULL, &err);
        double c2 = self_cpu();
        run(ruled, cmd);
        double c3 = self_cpu();
        cpu_plain += c1 - c0;
        cpu_rules += c3 - c2;
        lis_effects *fx;
        lis_monitor_step_end(m, NULL, &fx, &err);
        lis_effects_free(fx);
        lis_monitor_step_end(mr, NULL, &fx, &err);
        lis_effects_free(fx);
    }
    printf("exec: with an exec rule (each exec resolved in the sandbox's root and checked after "
           "it), lis's own CPU %.1f us per exec against %.1f us without rules, same run\n",
           (cpu_rules - cpu_off) / REPS / n * 1e6, (cpu_plain - cpu_off) / REPS / n * 1e6);
    lis_monitor_free(mr);
    lis_sandbox_destroy(ruled, &err);
    lis_policy_free(pol);
    double floor_us = handover_floor_us();
    if (floor_us > 0)
        printf("exec: the machine's floor for the wall time: a pipe round trip to a process on "
               "another CPU, 1 ms apart, %.1f us (median of 301); the notification's wall cost "
               "is %.2fx that\n",
               floor_us, (on_t[REPS / 2] - off_t[REPS / 2]) / n * 1e6 / floor_us);
    /* the file diff: 100 small text files changed in one step */
    run(on, "mkdir -p /testbed/bench");
    enum { DREPS = 15 };
    double with[DREPS], without[DREPS];
    for (int rep = 0; rep < DREPS; rep++) {
        snprintf(cmd, sizeof cmd,
                 "i=0; while [ $i -lt 100 ]; do echo line $i run %d > /testbed/bench/f$i.txt; "
                 "i=$((i+1)); done",
                 rep);
        with[rep] = step_end_time(m, on, cmd, NULL);
        without[rep] = step_end_time(m, on, "true", NULL);
    }
    qsort(with, DREPS, sizeof *with, cmp);
    qsort(without, DREPS, sizeof *without, cmp);
    printf("diff: step end with 100 changed files: median %.3f ms; with none (peer): %.3f ms; "
           "the diff of 100 files %.3f ms (median), %.3f ms (best) (goal <= 1)\n",
           with[DREPS / 2] * 1e3, without[DREPS / 2] * 1e3,
           (with[DREPS / 2] - without[DREPS / 2]) * 1e3, (with[0] - without[0]) * 1e3);
    lis_sandbox_destroy(off, &err);
    lis_sandbox_destroy(on, &err);
    lis_monitor_free(m);
    lis_monitor_hub_free(hub);
    lis_ctx_free(ctx);
    return 0;
}
