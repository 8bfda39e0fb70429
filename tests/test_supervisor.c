/* The supervisor inside a sandbox (lis-init: PID 1 and each command's
 * session) is out of reach of the commands it runs, and a command's timeout
 * holds whatever the command does to its supervisor (issue 10, item 1;
 * runc CVE-2016-9962 class). */
#include "testlib.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static lis_sandbox *probe_sandbox(lis_ctx *ctx)
{
    return t_probe_sandbox(ctx, t_busybox(), (lis_limits){0});
}

static void run(lis_sandbox *sb, const char *cmd, double timeout, lis_result *r)
{
    lis_exec_spec ex = {.shell = cmd,
                        .out = LIS_STDIO_CAPTURE,
                        .err = LIS_STDIO_CAPTURE,
                        .timeout = timeout};
    lis_error err = {0};
    cr_assert_eq(lis_exec(sb, &ex, r, &err), 0, "exec '%s': %s", cmd, err.msg);
}

/* How many processes other than lis-init and this probe are alive; what
 * they are goes to *what. */
static int others(lis_sandbox *sb, char *what, size_t len)
{
    lis_result r;
    run(sb, "ps -o stat,comm,args | grep -vE ' (lis-init|ps|grep|sh|exe) |^STAT'", 10, &r);
    int n = 0;
    for (char *p = r.out.data; (p = strchr(p, '\n')); p++)
        n++;
    snprintf(what, len, "%s", r.out.data);
    lis_result_free(&r);
    return n;
}

static void done(lis_ctx *ctx, lis_sandbox *sb)
{
    lis_error err;
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(supervisor, pid1_and_session_out_of_reach)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = probe_sandbox(ctx);
    lis_result r;
    /* $PPID of the shell is its session; PID 1 holds the lifeline (fd 3+) */
    run(sb,
        "for t in 1 $PPID; do for a in ptrace seize memopen vmwrite; do "
        "echo \"$a $t $(/probe $a $t)\"; done; "
        "for fd in 0 1 2 3 4 5 6 7 8 9; do echo \"getfd $t/$fd $(/probe getfd $t $fd)\"; done; "
        "cat /proc/$t/environ >/dev/null 2>&1 && echo \"environ $t ok\"; "
        "readlink /proc/$t/exe && echo \"exe $t ok\"; "
        "readlink /proc/$t/fd/3 && echo \"fdlink $t ok\"; done; true",
        30, &r);
    cr_assert_eq(r.exit_code, 0, "%s%s", r.out.data, r.err.data);
    /* 2 targets x (4 + 10) probes, every one refused */
    int lines = 0;
    for (char *p = r.out.data; (p = strchr(p, '\n')); p++)
        lines++;
    cr_assert_eq(lines, 28, "%s", r.out.data);
    cr_assert_null(strstr(r.out.data, " ok"), "a supervisor process was reachable:\n%s",
                   r.out.data);
    lis_result_free(&r);
    done(ctx, sb);
}

Test(supervisor, timeout_holds_when_the_session_is_stopped)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_result r;
    run(sb, "kill -STOP $PPID; sleep 40; echo survived", 2, &r);
    cr_assert(r.timed_out, "the timeout did not fire (exit %d, %.1f s)", r.exit_code,
              r.wall_seconds);
    cr_assert_null(strstr(r.out.data, "survived"));
    cr_assert_lt(r.wall_seconds, 30);
    lis_result_free(&r);
    char what[4096];
    cr_assert_eq(others(sb, what, sizeof what), 0,
                 "processes of the timed-out command are left:\n%s", what);
    done(ctx, sb);
}

Test(supervisor, killing_the_session_kills_the_command_tree)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_result r;
    run(sb,
        "setsid sh -c 'sleep 301' & (sleep 302 &); sleep 0.2; kill -9 $PPID; sleep 40; "
        "echo survived",
        0, &r);
    cr_assert_eq(r.signal, 9, "exit %d signal %d", r.exit_code, r.signal);
    cr_assert(strstr(r.err_msg, "supervising"), "%s", r.err_msg);
    cr_assert_null(strstr(r.out.data, "survived"));
    lis_result_free(&r);
    char what[4096];
    cr_assert_eq(others(sb, what, sizeof what), 0,
                 "escaped processes survived their supervisor's death:\n%s", what);
    done(ctx, sb);
}

Test(supervisor, kill_minus_one_leaves_pid1_serving)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_result r;
    run(sb, "sleep 303 >/dev/null 2>&1 & kill -9 -1; sleep 40; echo survived", 0, &r);
    cr_assert_null(strstr(r.out.data, "survived"));
    cr_assert_eq(r.signal, 9, "exit %d signal %d", r.exit_code, r.signal);
    lis_result_free(&r);
    run(sb, "echo still-here", 10, &r);
    cr_assert_str_eq(r.out.data, "still-here\n");
    lis_result_free(&r);
    char what[4096];
    cr_assert_eq(others(sb, what, sizeof what), 0, "%s", what);
    done(ctx, sb);
}

Test(supervisor, timeout_kills_escapees_that_hide_from_ptrace)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = probe_sandbox(ctx);
    lis_result r;
    run(sb, "/probe hide-and-sleep; setsid sleep 304 & (sleep 305 &); sleep 40", 1, &r);
    cr_assert(r.timed_out);
    lis_result_free(&r);
    char what[4096];
    cr_assert_eq(others(sb, what, sizeof what), 0,
                 "a double-forked, setsid or non-dumpable escapee survived:\n%s", what);
    done(ctx, sb);
}

Test(supervisor, background_processes_outlive_a_normal_exit)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_result r;
    run(sb, "sleep 306 >/dev/null 2>&1 &", 10, &r);
    cr_assert_eq(r.exit_code, 0);
    lis_result_free(&r);
    run(sb,
        "for i in $(seq 50); do ps -o args | grep -q '^sleep 306' && break; sleep 0.1; done; "
        "ps -o args | grep -c '^sleep 306'",
        10, &r);
    cr_assert_str_eq(r.out.data, "1\n");
    lis_result_free(&r);
    /* each command has a UTS namespace of its own (its kill tag), with the
     * sandbox's hostname: compare with the live background process's */
    run(sb,
        "hostname; readlink /proc/self/ns/uts; "
        "readlink /proc/$(pidof sleep)/ns/uts; cat /proc/sys/kernel/hostname",
        10, &r);
    char host[128], mine[64], its[64], khost[128];
    cr_assert_eq(sscanf(r.out.data, "%127s %63s %63s %127s", host, mine, its, khost), 4, "%s",
                 r.out.data);
    cr_assert_str_eq(host, khost);
    cr_assert_str_eq(host, lis_sandbox_name(sb));
    cr_assert_str_neq(mine, its, "two commands share a tag: %s", r.out.data);
    lis_result_free(&r);
    done(ctx, sb);
}

Test(supervisor, commands_start_with_default_signal_dispositions)
{
    /* an owner that ignores SIGPIPE and SIGCHLD must not hand that down */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGCHLD, SIG_IGN);
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_result r;
    run(sb, "grep -E '^Sig(Ign|Blk)' /proc/self/status; yes | head -1", 10, &r);
    cr_assert_str_eq(r.out.data, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\ny\n", "%s",
                     r.out.data);
    lis_result_free(&r);
    done(ctx, sb);
}
