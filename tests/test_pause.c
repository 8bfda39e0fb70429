/* test_pause.c - sandbox state (issue 15): pause and resume, through the C
 * API and the CLI. */
#include "testlib.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* CPU time (utime + stime, clock ticks) of every process but PID 1 in the pid
 * namespace of pid1, read from the host's /proc. */
static unsigned long long ns_cpu_ticks(pid_t pid1)
{
    char want[64] = "", link[64], path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid1);
    ssize_t n = readlink(path, want, sizeof want - 1);
    cr_assert(n > 0, "readlink %s", path);
    want[n] = 0;
    unsigned long long sum = 0;
    DIR *d = opendir("/proc");
    cr_assert(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/ns/pid", e->d_name);
        n = readlink(path, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        /* lis-init keeps running while paused without a freezer (its CPU and
         * memory watch, docs/runtime.md): the sandbox's work is the rest */
        if (strcmp(link, want) || atoi(e->d_name) == (int)pid1)
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "re");
        char buf[1024];
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = 0;
        char *p = strrchr(buf, ')');
        unsigned long long ut = 0, st = 0;
        /* after ')': state ppid pgrp session tty tpgid flags minflt cminflt
         * majflt cmajflt utime stime */
        if (p &&
            sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
            sum += ut + st;
    }
    closedir(d);
    return sum;
}

/* Waits (up to 20 s) until the sandbox's CPU time grows past `from`. */
static int cpu_grows(pid_t pid1, unsigned long long from)
{
    for (int i = 0; i < 200; i++) {
        if (ns_cpu_ticks(pid1) > from)
            return 1;
        nap_ms(100);
    }
    return 0;
}

static void start_busy_loop(lis_sandbox *sb)
{
    lis_result r;
    t_sh(sb, "sh -c 'while :; do :; done' >/dev/null 2>&1 </dev/null & echo ok", &r);
    cr_assert_eq(r.exit_code, 0, "%s", r.err.data);
    lis_result_free(&r);
}

Test(pause, api_pause_stops_cpu_refuses_exec_and_resume_goes_on, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_error err = {0};
    pid_t pid1 = lis_sandbox_pid(sb);
    start_busy_loop(sb);
    cr_assert(cpu_grows(pid1, ns_cpu_ticks(pid1)), "the busy loop never ran");

    cr_assert_eq(lis_sandbox_pause(sb, &err), 0, "pause: %s", err.msg);
    cr_assert(lis_sandbox_is_paused(sb));
    /* idempotent */
    cr_assert_eq(lis_sandbox_pause(sb, &err), 0, "second pause: %s", err.msg);
    lis_stats st;
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
    cr_assert_str_eq(st.state, "paused");

    /* A paused sandbox costs no CPU: its CPU time stops growing. */
    unsigned long long c0 = ns_cpu_ticks(pid1);
    nap_ms(700);
    unsigned long long c1 = ns_cpu_ticks(pid1);
    cr_assert_eq(c1, c0, "CPU time grew while paused: %llu -> %llu ticks", c0, c1);

    /* exec is refused with one line, before lis-init is asked */
    lis_exec_spec ex = {.shell = "echo hi", .out = LIS_STDIO_CAPTURE, .err = LIS_STDIO_CAPTURE};
    lis_result r;
    memset(&err, 0, sizeof err);
    cr_assert_eq(lis_exec(sb, &ex, &r, &err), -1);
    cr_assert_eq(err.code, EBUSY);
    char want[200];
    snprintf(want, sizeof want, "sandbox %s is paused (lis sandbox resume %s)",
             lis_sandbox_name(sb), lis_sandbox_name(sb));
    cr_assert_str_eq(err.msg, want);
    cr_assert_null(strchr(err.msg, '\n'));

    /* files are still reachable */
    cr_assert_eq(lis_file_write(sb, "/tmp/while-paused", "x", 1, 0644, &err), 0, "%s", err.msg);

    cr_assert_eq(lis_sandbox_resume(sb, &err), 0, "resume: %s", err.msg);
    cr_assert(!lis_sandbox_is_paused(sb));
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
    cr_assert_str_eq(st.state, "running");
    cr_assert(cpu_grows(pid1, c1), "the busy loop did not go on after resume");
    t_sh(sb, "cat /tmp/while-paused; echo", &r);
    cr_assert_str_eq(r.out.data, "x\n");
    lis_result_free(&r);
    cr_assert_eq(lis_sandbox_resume(sb, &err), 0, "resume of a running sandbox: %s", err.msg);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);
}

/* Is a process of pid1's namespace (PID 1 aside) in D state? */
static int ns_has_d_state(pid_t pid1)
{
    char want[64] = "", link[64], path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid1);
    ssize_t n = readlink(path, want, sizeof want - 1);
    cr_assert(n > 0, "readlink %s", path);
    want[n] = 0;
    int found = 0;
    DIR *d = opendir("/proc");
    cr_assert(d);
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        snprintf(path, sizeof path, "/proc/%s/ns/pid", e->d_name);
        n = readlink(path, link, sizeof link - 1);
        if (n <= 0 || atoi(e->d_name) == (int)pid1)
            continue;
        link[n] = 0;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "re");
        char buf[1024];
        if (!strcmp(link, want) && f) {
            size_t len = fread(buf, 1, sizeof buf - 1, f);
            buf[len] = 0;
            char *p = strrchr(buf, ')');
            found = p && p[1] == ' ' && p[2] == 'D';
        }
        if (f)
            fclose(f);
    }
    closedir(d);
    return found;
}

/* Issue 29: a vfork parent waits in D state for its child, where SIGSTOP does
 * not reach it. Without a freezer the pause used to count it as running for
 * 5 s, then fail and continue everything. Now it holds: the parent cannot
 * leave the kernel without stopping, nothing of the sandbox runs, and nothing
 * is killed for it. */
Test(pause, a_vfork_parent_in_d_state_does_not_defeat_the_pause, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_limits lim = {0};
    lis_sandbox *sb = t_probe_sandbox(ctx, t_busybox(), lim);
    lis_error err = {0};
    pid_t pid1 = lis_sandbox_pid(sb);
    lis_result r;
    t_sh(sb, "/probe vfork-spin >/dev/null 2>&1 </dev/null & echo ok", &r);
    cr_assert_eq(r.exit_code, 0, "%s", r.err.data);
    lis_result_free(&r);
    cr_assert(cpu_grows(pid1, ns_cpu_ticks(pid1)), "the vfork child never ran");
    int d = 0;
    for (int i = 0; i < 100 && !(d = ns_has_d_state(pid1)); i++)
        nap_ms(50);
    cr_assert(d, "no process of the sandbox waits in D state (the vfork parent)");
    char ns[64], path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid1);
    ssize_t n = readlink(path, ns, sizeof ns - 1);
    cr_assert(n > 0);
    ns[n] = 0;
    int before = t_procs_in_ns(ns);

    cr_assert_eq(lis_sandbox_pause(sb, &err), 0, "pause: %s", err.msg);
    unsigned long long c0 = ns_cpu_ticks(pid1);
    nap_ms(700);
    unsigned long long c1 = ns_cpu_ticks(pid1);
    cr_assert_eq(c1, c0, "CPU time grew while paused: %llu -> %llu ticks", c0, c1);
    cr_assert_eq(t_procs_in_ns(ns), before, "the pause killed a process it could hold");

    cr_assert_eq(lis_sandbox_resume(sb, &err), 0, "resume: %s", err.msg);
    cr_assert(cpu_grows(pid1, c1), "the vfork child did not go on after resume");
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);
}

Test(pause, a_paused_sandbox_can_be_destroyed, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_error err = {0};
    start_busy_loop(sb);
    char ns[64], path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)lis_sandbox_pid(sb));
    ssize_t n = readlink(path, ns, sizeof ns - 1);
    cr_assert(n > 0);
    ns[n] = 0;
    cr_assert_eq(lis_sandbox_pause(sb, &err), 0, "pause: %s", err.msg);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "destroy: %s", err.msg);
    for (int i = 0; i < 100 && t_procs_in_ns(ns) > 0; i++)
        nap_ms(50);
    cr_assert_eq(t_procs_in_ns(ns), 0, "processes of the paused sandbox outlived it");
    lis_ctx_free(ctx);
}

Test(pause, cli_pause_ls_exec_resume_rm, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_ctx_free(ctx);
    int code;
    char *out = t_lis(&code, "sandbox create --rootfs %s --name pbox", t_busybox());
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox exec pbox -- sh -c 'echo before > /root/f'");
    cr_assert_eq(code, 0, "%s", out);
    free(out);

    out = t_lis(&code, "sandbox pause pbox");
    cr_assert_eq(code, 0, "%s", out);
    cr_assert_str_eq(out, "");
    free(out);
    out = t_lis(&code, "sandbox ls");
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "pbox") && strstr(out, " paused "), "%s", out);
    free(out);
    out = t_lis(&code, "sandbox ls --json");
    cr_assert(strstr(out, "\"state\":\t\"paused\""), "%s", out);
    free(out);

    /* exec refused: one line, non-zero */
    out = t_lis(&code, "sandbox exec pbox -- cat /root/f");
    cr_assert_neq(code, 0);
    cr_assert(strstr(out, "sandbox pbox is paused (lis sandbox resume pbox)"), "%s", out);
    cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "more than one line: %s", out);
    free(out);

    /* bad input: clear one-line errors */
    out = t_lis(&code, "sandbox pause");
    cr_assert_eq(code, 2, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox pause nosuchbox");
    cr_assert_neq(code, 0);
    cr_assert(strstr(out, "no sandbox named 'nosuchbox'"), "%s", out);
    free(out);
    out = t_lis(&code, "sandbox resume --bogus");
    cr_assert_eq(code, 2, "%s", out);
    cr_assert(strstr(out, "unknown option '--bogus'"), "%s", out);
    free(out);

    out = t_lis(&code, "sandbox resume pbox");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox ls");
    cr_assert(strstr(out, " running "), "%s", out);
    free(out);
    out = t_lis(&code, "sandbox exec pbox -- cat /root/f");
    cr_assert_eq(code, 0, "%s", out);
    cr_assert_str_eq(out, "before\n");
    free(out);

    /* a paused sandbox is removed like any other */
    out = t_lis(&code, "sandbox pause pbox");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox rm pbox");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox ls");
    cr_assert_null(strstr(out, "pbox"), "%s", out);
    free(out);
    /* and by rm --all */
    out = t_lis(&code, "sandbox create --rootfs %s --name qbox", t_busybox());
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox pause qbox");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox rm --all");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox ls");
    cr_assert_null(strstr(out, "qbox"), "rm --all left a paused sandbox:\n%s", out);
    free(out);
}

/* lis_stats.cpu_seconds: what the sandbox's processes used, growing while a
 * loop runs, flat while paused. */
Test(pause, stats_cpu_seconds_grow_and_stop_while_paused, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_error err = {0};
    lis_stats st;
    start_busy_loop(sb);
    double c0 = 0;
    for (int i = 0; i < 200 && c0 < 0.2; i++) {
        nap_ms(100);
        cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
        c0 = st.cpu_seconds;
    }
    cr_assert(c0 >= 0.2, "cpu_seconds never grew: %f", c0);
    cr_assert_eq(lis_sandbox_pause(sb, &err), 0, "%s", err.msg);
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
    double p0 = st.cpu_seconds;
    nap_ms(700);
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
    cr_assert_float_eq(st.cpu_seconds, p0, 0.011, "grew while paused: %f -> %f", p0,
                       st.cpu_seconds);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0);
    lis_ctx_free(ctx);
}
