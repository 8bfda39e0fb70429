/* test_escape_supervisor.c - escape attempts against lis-init (PID 1 and the
 * per-command session processes) and its binary: ptrace, /proc/PID/mem,
 * process_vm_writev, pidfd_getfd, signals that would stop a timeout, and
 * runc CVE-2019-5736 (overwriting the runtime's binary through /proc/PID/exe).
 * Every process of lis inside a sandbox must be out of reach of the commands
 * it runs, and a timeout must hold whatever the command does. */
#include "seclib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs one probe command line in a fresh sandbox and returns its output. */
static char *attempt(lis_ctx *ctx, lis_sandbox **keep, const char *cmd)
{
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    char *out = sec_sh(sb, cmd, NULL);
    if (keep)
        *keep = sb;
    else
        sec_destroy(sb);
    return out;
}

/* PID 1 is untraced, still serves commands and still runs lis-init. */
static void pid1_intact(lis_sandbox *sb)
{
    char *tr = sec_status(lis_sandbox_pid(sb), "TracerPid");
    cr_expect_str_eq(tr, "0", "PID 1 is traced by %s", tr);
    free(tr);
    char *state = sec_status(lis_sandbox_pid(sb), "State");
    cr_expect(state[0] == 'S' || state[0] == 'R', "PID 1 is in state %s", state);
    free(state);
    cr_expect(sec_alive(sb), "the sandbox no longer runs commands");
}

Test(escape, ptrace_attach_pid1, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb;
    char *out = attempt(ctx, &sb, "/probe ptrace 1");
    cr_expect(!sec_won(out), "PID 1 (lis-init) was ptrace-attached from inside: %s", out);
    pid1_intact(sb);
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

Test(escape, ptrace_attach_own_session, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb;
    /* $PPID of the shell is the session process that enforces its timeout */
    char *out = attempt(ctx, &sb, "/probe ptrace $PPID");
    cr_expect(!sec_won(out), "the command's session (lis-init) was ptrace-attached: %s", out);
    pid1_intact(sb);
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

Test(escape, proc_pid1_mem_write, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb;
    char *out = attempt(ctx, &sb, "/probe memwrite 1; /probe memwrite $PPID");
    cr_expect(!sec_won(out), "lis-init memory was written through /proc/PID/mem: %s", out);
    pid1_intact(sb);
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

Test(escape, process_vm_writev_pid1, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb;
    char *out = attempt(ctx, &sb, "/probe vmwrite 1; /probe vmwrite $PPID");
    cr_expect(!sec_won(out), "process_vm_writev reached lis-init: %s", out);
    pid1_intact(sb);
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

Test(escape, pidfd_getfd_pid1_lifeline, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb;
    char *out = attempt(ctx, &sb, "/probe getfd 1 64");
    cr_expect(strncmp(out, "got=0 ", 6) == 0 || strstr(out, "pidfd_open:"),
              "fds of PID 1 (its lifeline to the owner) were copied out: %s", out);
    pid1_intact(sb);
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

Test(escape, pidfd_getfd_own_session, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb;
    char *out = attempt(ctx, &sb, "/probe getfd $PPID 64");
    cr_expect(strncmp(out, "got=0 ", 6) == 0 || strstr(out, "pidfd_open:"),
              "fds of the session (its connection to the owner) were copied out: %s", out);
    pid1_intact(sb);
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

Test(escape, pidfd_getfd_persistent_ctl_socket, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    sec_opts o = {.persist = 1, .name = "persist-getfd"};
    lis_sandbox *sb = sec_sandbox(ctx, &o);
    /* PID 1 of a persistent sandbox holds the listening ctl.sock: with a copy a
     * command could accept (and answer) the owner's next commands */
    char *out = sec_sh(sb, "/probe getfd 1 64", NULL);
    cr_expect(strncmp(out, "got=0 ", 6) == 0 || strstr(out, "pidfd_open:"),
              "fds of a persistent sandbox's PID 1 were copied out: %s", out);
    free(out);
    pid1_intact(sb);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

Test(escape, proc_pid1_fd_links_hidden, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb;
    char *out = attempt(ctx, &sb, "/probe fdlinks 1; /probe fdlinks $PPID");
    cr_expect(!strstr(out, "links=") || strcmp(out, "links=0\nlinks=0\n") == 0,
              "the fds of lis-init are readable from inside: %s", out);
    pid1_intact(sb);
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

Test(escape, signal_pid1_from_inside, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb;
    char *out = attempt(ctx, &sb,
                        "for s in STOP SEGV TERM INT HUP KILL; do kill -$s 1; done; "
                        "echo sent");
    cr_expect(strstr(out, "sent"), "%s", out);
    pid1_intact(sb);
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

/* A command under --timeout 2 that attacks its supervisor, then sleeps past
 * the timeout and writes into a host directory: the timeout must kill it
 * (and everything it started) anyway, so the late write never happens. */
static void timeout_holds(const char *attack)
{
    lis_ctx *ctx = t_ctx();
    char *out_dir = sec_dir("out");
    lis_bind b = {.host_path = out_dir, .path = "/out"};
    sec_opts o = {.binds = &b, .nbinds = 1};
    lis_sandbox *sb = sec_sandbox(ctx, &o);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s; sleep 6; echo late > /out/late; echo finished", attack);
    lis_exec_spec ex = {.shell = cmd,
                        .out = LIS_STDIO_CAPTURE,
                        .err = LIS_STDIO_CAPTURE,
                        .timeout = 2};
    double t0 = mono();
    lis_result r;
    int done = sec_run(sb, &ex, &r, 40);
    cr_expect(done != 0, "'%s': still running 40 s after its 2 s timeout", attack);
    cr_expect(done >= 0, "'%s': lis lost the command instead of timing it out", attack);
    if (done == 1) {
        /* timed out, or killed at once because it killed its supervisor */
        cr_expect(r.timed_out || (r.signal == 9 && strstr(r.err_msg, "supervising")),
                  "'%s': neither timed out nor killed (exit %d, signal %d, out '%s')", attack,
                  r.exit_code, r.signal, r.out.data);
        cr_expect(!strstr(r.out.data, "finished"), "'%s' ran to its end: %s", attack, r.out.data);
        lis_result_free(&r);
    }
    /* give a surviving process the time to do its late write */
    while (mono() - t0 < 9)
        usleep(200000);
    char late[4096];
    snprintf(late, sizeof late, "%s/late", out_dir);
    cr_expect_neq(access(late, F_OK), 0,
                  "'%s': a process of the command outlived its timeout "
                  "and wrote on the host",
                  attack);
    sec_destroy(sb);
    free(out_dir);
    lis_ctx_free(ctx);
}

Test(escape, timeout_holds_sigstop_of_session, .timeout = 80) { timeout_holds("kill -STOP $PPID"); }

Test(escape, timeout_holds_sigkill_of_session, .timeout = 80) { timeout_holds("kill -KILL $PPID"); }

Test(escape, timeout_holds_kill_all, .timeout = 80) { timeout_holds("kill -9 -1"); }

Test(escape, timeout_holds_ptrace_stop_of_session, .timeout = 80)
{
    /* the tracer stays alive (in the background) and keeps the session stopped */
    timeout_holds("/probe ptrace-stop $PPID 10 & sleep 1");
}

Test(escape, timeout_holds_setsid_double_fork, .timeout = 80)
{
    timeout_holds("(setsid sh -c 'sleep 6; echo late > /out/late' > /dev/null 2>&1 &); "
                  "(nohup setsid sh -c 'trap \"\" HUP TERM; sleep 6; echo late > /out/late' "
                  "> /dev/null 2>&1 &)");
}

/* runc CVE-2019-5736: the runtime's own binary reachable as /proc/PID/exe
 * from inside and overwritten for the next run on the host. */
Test(escape, cve_2019_5736_overwrite_lis_init, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    char *before = sec_digest(sec_init_bin());
    lis_sandbox *sb;
    char *out = attempt(ctx, &sb,
                        "/probe exe-write /proc/1/exe; /probe exe-write /proc/$PPID/exe; "
                        "cat /proc/1/exe > /tmp/init.copy 2>/dev/null; "
                        "/probe exe-write /proc/1/exe");
    cr_expect(!sec_won(out), "lis-init was opened for writing through /proc/PID/exe: %s", out);
    pid1_intact(sb);
    sec_destroy(sb);
    char *after = sec_digest(sec_init_bin());
    cr_expect_str_eq(after, before, "the host's lis-init changed");
    free(before);
    free(after);
    free(out);
    lis_ctx_free(ctx);
}

Test(escape, cve_2019_5736_overwrite_bound_exe, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    char *before = sec_digest(sec_probe());
    /* /probe is a host binary bound read-only: its own /proc/self/exe */
    char *out = attempt(ctx, NULL, "/probe exe-write /proc/self/exe; /probe exe-write /probe");
    cr_expect(!sec_won(out), "a read-only bound host binary was opened for writing: %s", out);
    char *after = sec_digest(sec_probe());
    cr_expect_str_eq(after, before, "the host's probe binary changed");
    free(before);
    free(after);
    free(out);
    lis_ctx_free(ctx);
}

Test(escape, cve_2019_5736_overwrite_rootfs_exe, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    char bb[4096];
    snprintf(bb, sizeof bb, "%s/bin/busybox", t_busybox());
    char *before = sec_digest(bb);
    /* the running shell's exe is the image's busybox (the shared lower layer) */
    char *out = attempt(ctx, NULL,
                        "/probe exe-write /proc/$$/exe; sleep 30 & "
                        "/probe exe-write /proc/$!/exe; kill $!; "
                        "echo x >> /bin/busybox; echo done");
    char *after = sec_digest(bb);
    cr_expect_str_eq(after, before, "the image's /bin/busybox on the host changed: %s", out);
    free(before);
    free(after);
    free(out);
    lis_ctx_free(ctx);
}
