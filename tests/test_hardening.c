/* What a sandbox hides and bounds (issue 10, items 3, 5, 6, 7): the /proc and
 * /sys paths Docker masks, host paths in mountinfo, a rootfs owned by someone
 * else, the writable budget, and the fallback limits where no cgroup can
 * enforce any. */
#include "testlib.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static lis_ctx *ctx_with(void (*warn)(void *, const char *), void *arg)
{
    const char *base = getenv("TMPDIR");
    static char dir[256];
    snprintf(dir, sizeof dir, "%s/lis-h-XXXXXX", base ? base : "/tmp");
    cr_assert(mkdtemp(dir));
    char run[300], data[300];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(data, sizeof data, "%s/data", dir);
    lis_ctx_opts o = {.run_dir = run, .data_dir = data, .warn = warn, .warn_arg = arg};
    lis_error err = {0};
    lis_ctx *ctx = lis_ctx_new(&o, &err);
    cr_assert(ctx, "%s", err.msg);
    return ctx;
}

static void quiet(void *arg, const char *line)
{
    (void)arg;
    (void)line;
}

static char *sh(lis_sandbox *sb, const char *cmd, lis_result *keep)
{
    lis_result r;
    lis_exec_spec ex = {.shell = cmd,
                        .out = LIS_STDIO_CAPTURE,
                        .err = LIS_STDIO_CAPTURE,
                        .timeout = 90};
    lis_error err = {0};
    cr_assert_eq(lis_exec(sb, &ex, &r, &err), 0, "exec '%s': %s", cmd, err.msg);
    char *out = strdup(r.out.data);
    if (keep)
        *keep = r;
    else
        lis_result_free(&r);
    return out;
}

static void finish(lis_ctx *ctx, lis_sandbox *sb)
{
    lis_error err;
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(hardening, docker_masked_and_read_only_paths)
{
    lis_ctx *ctx = ctx_with(quiet, NULL);
    lis_sandbox *sb = t_probe_sandbox(ctx, t_busybox(), (lis_limits){0});
    char *out =
        sh(sb,
           "for f in keys key-users timer_list sched_debug kcore latency_stats; do "
           "  [ -e /proc/$f ] && echo \"$f $(wc -c < /proc/$f)\"; done; "
           "for d in /proc/acpi /proc/scsi /proc/asound /sys/firmware; do "
           "  [ -d $d ] && echo \"$d $(ls -A $d | wc -l)\"; done; "
           "for w in /proc/sysrq-trigger /proc/sys/kernel/hostname; do "
           "  (echo x > $w) 2>/dev/null && echo \"$w writable\"; done; "
           "for r in /proc/bus /proc/fs /proc/irq /proc/sys; do "
           "  [ -e $r ] && grep -q \" $r ro,\" /proc/self/mountinfo || echo \"$r not ro\"; done; "
           "true",
           NULL);
    /* every masked file reads empty, every masked dir is empty */
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        cr_assert_null(strstr(line, "writable"), "%s", line);
        cr_assert_null(strstr(line, "not ro"), "%s", line);
        const char *n = strrchr(line, ' ');
        cr_assert(n && !strcmp(n, " 0"), "not masked: %s", line);
    }
    free(out);
    /* /proc/keys is masked by a mount (the host's keyrings would show there) */
    out = sh(sb, "grep -c ' /proc/keys ' /proc/self/mountinfo", NULL);
    cr_assert_str_eq(out, "1\n");
    free(out);
    finish(ctx, sb);
}

Test(hardening, mountinfo_and_proc_show_no_host_paths)
{
    lis_ctx *ctx = ctx_with(quiet, NULL);
    lis_sandbox *sb = t_probe_sandbox(ctx, t_busybox(), (lis_limits){0});
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "grep -c -e '%s' -e '%s' /proc/self/mountinfo; "
             "readlink /proc/1/exe; echo end",
             t_busybox(), t_tmpdir()[0] ? t_tmpdir() : "/x");
    char *out = sh(sb, cmd, NULL);
    cr_assert_str_eq(out, "0\nend\n", "host paths visible inside:\n%s", out);
    free(out);
    finish(ctx, sb);
}

static void count_unmapped(void *arg, const char *line)
{
    if (strstr(line, "not mapped"))
        ++*(int *)arg;
}

Test(hardening, rootfs_owned_by_someone_else_starts)
{
    const char *r = getenv("LIS_TEST_ROOTFS_ROOT");
    if (!r || !*r)
        cr_skip_test("no root-owned fixture (make test as root prepares it)");
    int warned = 0;
    lis_ctx *ctx = ctx_with(count_unmapped, &warned);
    lis_limits none = {0};
    lis_sandbox *a = t_probe_sandbox(ctx, r, none), *b = t_probe_sandbox(ctx, r, none);
    char *out = sh(a,
                   "grep -c localhost /etc/hosts; echo hi > /etc/mine && cat /etc/mine; "
                   "touch /tmp/t && echo tmp-ok; (echo no > /bin/x) 2>/dev/null || echo bin-ro",
                   NULL);
    cr_assert_str_eq(out, "2\nhi\ntmp-ok\nbin-ro\n", "%s", out);
    free(out);
    out = sh(b, "echo b-ok", NULL);
    cr_assert_str_eq(out, "b-ok\n");
    free(out);
    cr_assert_eq(warned, 1, "the unmapped owner was reported %d times, not once", warned);
    lis_error err;
    lis_sandbox_destroy(a, &err);
    finish(ctx, b);
}

Test(hardening, writable_budget_gives_enospc_and_spares_neighbours)
{
    lis_ctx *ctx = ctx_with(quiet, NULL);
    lis_limits small = {.disk_bytes = 16u << 20};
    lis_sandbox *sb = t_probe_sandbox(ctx, t_busybox(), small);
    lis_sandbox *nb = t_probe_sandbox(ctx, t_busybox(), small);
    char *out = sh(sb,
                   "dd if=/dev/zero of=/tmp/a bs=1M count=10 2>/dev/null; echo tmp=$?; "
                   "dd if=/dev/zero of=/b bs=1M count=10 2>/dev/null; echo root=$?; "
                   "dd if=/dev/zero of=/dev/shm/c bs=1M count=10 2>/dev/null; echo shm=$?; "
                   "rm -f /tmp/a /b /dev/shm/c; i=0; while [ $i -lt 40000 ]; do "
                   "true > /tmp/f$i 2>/dev/null || break; i=$((i+1)); done; echo files=$i",
                   NULL);
    /* 10 MiB fit; the next 10 MiB (anywhere: one budget) do not */
    cr_assert(strstr(out, "tmp=0\n"), "%s", out);
    cr_assert(strstr(out, "root=1\n"), "%s", out);
    cr_assert(strstr(out, "shm=1\n"), "%s", out);
    cr_assert(strstr(out, "files="), "%s", out);
    int files = atoi(strstr(out, "files=") + 6);
    cr_assert(files > 1000 && files < 40000, "inodes unbounded: %d files", files);
    free(out);
    out = sh(nb, "dd if=/dev/zero of=/tmp/a bs=1M count=10 2>/dev/null; echo nb=$?", NULL);
    cr_assert_str_eq(out, "nb=0\n", "the neighbour noticed: %s", out);
    free(out);
    lis_stats st;
    lis_error err;
    cr_assert_eq(lis_sandbox_stats(nb, &st, &err), 0);
    cr_assert_eq(st.disk_limit, 16u << 20);
    cr_assert(st.disk_bytes >= (10u << 20), "usage %llu", (unsigned long long)st.disk_bytes);
    lis_sandbox_destroy(nb, &err);
    finish(ctx, sb);
}

/* Only where no cgroup limits apply (these hosts for an ordinary user). */
static int fallback(lis_sandbox *sb)
{
    lis_stats st;
    lis_error err;
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
    return !strcmp(st.limits, "fallback");
}

/* A sandbox of 64 processes and 64 MiB under the fallback limits; the test
 * is skipped where cgroup limits apply instead (why: the reason given). */
static lis_sandbox *fallback_sandbox(lis_ctx *ctx, const char *why)
{
    lis_limits lim = {.pids = 64, .memory_bytes = 64u << 20};
    lis_sandbox *sb = t_probe_sandbox(ctx, t_busybox(), lim);
    if (!fallback(sb)) {
        finish(ctx, sb);
        cr_skip_test("cgroup limits apply here: %s", why);
    }
    return sb;
}

Test(hardening, fallback_limits_bound_a_fork_bomb_memory_and_priority, .timeout = 240)
{
    lis_ctx *ctx = ctx_with(quiet, NULL);
    lis_sandbox *sb = fallback_sandbox(ctx, "the cgroup suites cover them");
    /* a fork bomb: forks fail inside, the host (this process) still forks */
    lis_result r;
    /* (busybox sh gives up at the first fork that fails: the count goes to a
     * file, read back with builtins only, and the bomb's sleeps are killed by
     * builtins too) */
    char *out = sh(sb,
                   "(i=0; while [ $i -lt 500 ]; do sleep 2 & echo >> /tmp/n; "
                   "i=$((i+1)); done) 2>/dev/null; n=0; while read l; do n=$((n+1)); "
                   "done < /tmp/n; echo started=$n; for p in /proc/[0-9]*; do "
                   "read -r c < $p/comm 2>/dev/null; [ \"$c\" = sleep ] && kill -9 ${p#/proc/}; "
                   "done; "
                   /* until PID 1 has reaped them: their pids count against the limit, and
                    * the memory part below forks ten (a fork refused: sh exits 2) */
                   "for i in $(seq 100); do n=0; for p in /proc/[0-9]*; do "
                   "read -r c < $p/comm 2>/dev/null && [ \"$c\" = sleep ] && n=$((n+1)); done; "
                   "[ $n = 0 ] && break; sleep 0.1; done; true",
                   &r);
    cr_assert(strstr(out, "started="), "%s", out);
    int started = atoi(strstr(out, "started=") + 8);
    cr_assert(started > 10 && started < 64, "pids not bounded: %d started", started);
    free(out);
    lis_result_free(&r);
    pid_t c = fork();
    if (c == 0)
        _exit(0);
    cr_assert(c > 0, "the host could not fork while the bomb ran");
    waitpid(c, NULL, 0);
    /* memory: one process cannot take more than the limit (RLIMIT_DATA)... */
    out = sh(sb, "x=$(head -c 200000000 /dev/zero | tr '\\0' a) && echo ${#x}", &r);
    cr_assert_neq(r.exit_code, 0, "200 MB in a 64 MiB sandbox: %s", out);
    free(out);
    lis_result_free(&r);
    /* ...and ten that stay under it each but not together are cut by PID 1's
     * watchdog, reported as an OOM kill */
    out = sh(sb, "for i in 1 2 3 4 5 6 7 8 9 10; do /probe hold 12 5 & done; wait; echo done", &r);
    cr_assert(r.oom_killed, "exit %d: %s", r.exit_code, r.err_msg);
    cr_assert(strstr(r.err_msg, "out of memory"), "%s", r.err_msg);
    free(out);
    lis_result_free(&r);
    /* CPU: everything runs at nice 10; a hog and its autogroup go to nice 19
     * once it has wanted a CPU for 4 s, then the hog to SCHED_IDLE (policy 5,
     * field 41 of stat) at 30 s (runtime/init/cpuwatch.c); the shell that
     * waits stays as it was. Polled (20 s at most for the first step, 60 s for
     * the second) rather than read once after a fixed sleep: the host may be
     * loaded, and the kernel rate-limits autogroup changes host-wide. Where the
     * kernel has no autogroups their check prints what it expects. */
    out = sh(sb,
             "cut -d' ' -f19 /proc/self/stat; (while :; do :; done) & h=$!; i=0; "
             "while [ $i -lt 80 ]; do n=$(cut -d' ' -f19 /proc/$h/stat); "
             "g=1; [ -e /proc/$h/autogroup ] && g=$(grep -c 'nice 19' /proc/$h/autogroup); "
             "[ \"$n$g\" = 191 ] && break; sleep 0.25; i=$((i+1)); done; echo $n; echo $g; i=0; "
             "while [ $i -lt 240 ]; do p=$(cut -d' ' -f41 /proc/$h/stat); [ \"$p\" = 5 ] "
             "&& break; sleep 0.25; i=$((i+1)); done; echo $p; "
             "kill $h; cut -d' ' -f41 /proc/self/stat",
             NULL);
    cr_assert_str_eq(out, "10\n19\n1\n5\n0\n",
                     "nice, the hog's nice and its autogroup's nice 19 at 4 s, the hog's "
                     "policy at 30 s, the shell's policy: %s",
                     out);
    free(out);
    finish(ctx, sb);
}

Test(hardening, sandbox_ls_shows_disk_use_and_the_kind_of_limits)
{
    lis_ctx *ctx = t_ctx(); /* for t_tmpdir() */
    int code;
    char *out = t_lis(&code, "sandbox create --rootfs %s --name dl --disk 8M", t_busybox());
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox exec dl -- sh -c 'dd if=/dev/zero of=/tmp/x bs=1M count=3 "
                       "2>/dev/null; dd if=/dev/zero of=/y bs=1M count=2 2>/dev/null'");
    free(out);
    out = t_lis(&code, "sandbox ls --json");
    cr_assert_eq(code, 0, "%s", out);
    char *d = strstr(out, "\"disk_bytes\":");
    cr_assert(d, "%s", out);
    double used = atof(d + 13);
    cr_assert(used >= 5 * 1048576.0, "%s", out);
    cr_assert(strstr(out, "\"disk_limit\":\t8388608"), "%s", out);
    cr_assert(strstr(out, "\"limits\":\t\"fallback\"") || strstr(out, "\"limits\":\t\"cgroup\""),
              "%s", out);
    free(out);
    out = t_lis(&code, "sandbox ls");
    cr_assert(strstr(out, "/8.0M"), "%s", out);
    free(out);
    out = t_lis(&code, "sandbox rm dl");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    lis_ctx_free(ctx);
}

static long voluntary_switches(pid_t pid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strstr(buf, "\nvoluntary_ctxt_switches:");
    return p ? atol(p + strlen("\nvoluntary_ctxt_switches:")) : -1;
}

/* The fallback limits' watchers (memory, CPU share, disk) tick only while a
 * process but PID 1 lives in the sandbox: an idle sandbox (a batch's, waiting
 * on the model) does not wake. A command started afterwards is watched again
 * from its start: a hog is held as before. */
Test(hardening, an_idle_sandbox_does_not_wake, .timeout = 120)
{
    lis_ctx *ctx = ctx_with(quiet, NULL);
    lis_sandbox *sb = fallback_sandbox(ctx, "no watcher runs in PID 1");
    free(sh(sb, "true", NULL)); /* a command came and went */
    usleep(300000);
    pid_t pid1 = lis_sandbox_pid(sb);
    long before = voluntary_switches(pid1);
    cr_assert_geq(before, 0);
    usleep(2000000); /* the CPU watcher alone ticks 4 times a second */
    long after = voluntary_switches(pid1);
    cr_assert_leq(after - before, 1, "PID 1 woke %ld times in 2 s with no process", after - before);
    /* a command: the watchers run while it does (it sleeps, PID 1 ticks) */
    before = voluntary_switches(pid1);
    free(sh(sb, "sleep 1", NULL));
    after = voluntary_switches(pid1);
    cr_assert_geq(after - before, 3, "PID 1 woke %ld times during a 1 s command", after - before);
    finish(ctx, sb);
}
