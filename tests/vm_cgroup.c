/* vm_cgroup.c - the cgroup v2 suite. Runs inside the test VM (tests/vm/run-suite.sh) as an
 * unprivileged uid with a delegated cgroup v2 subtree, never on the host (the name does not
 * start with test_). Needs LIS_TEST_BUSYBOX and LIS_BIN. */
#include "testlib.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int rdfile(const char *dir, const char *name, char *buf, size_t len)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = 0;
    fclose(f);
    return (int)n;
}

static unsigned long long key(const char *dir, const char *file, const char *k)
{
    char b[4096];
    if (rdfile(dir, file, b, sizeof b) < 0)
        return 0;
    size_t kl = strlen(k);
    for (char *l = b; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, k, kl) && l[kl] == ' ')
            return strtoull(l + kl + 1, NULL, 10);
    return 0;
}

/* The cgroup v2 directory of a process. */
static void cg_of(pid_t pid, char *out, size_t len)
{
    char p[64], line[1024] = "";
    snprintf(p, sizeof p, "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(p, "re");
    cr_assert(f);
    cr_assert(fgets(line, sizeof line, f));
    fclose(f);
    line[strcspn(line, "\n")] = 0;
    cr_assert(!strncmp(line, "0::", 3), "not cgroup v2: %s", line);
    snprintf(out, len, "/sys/fs/cgroup%s", line + 3);
}

/* Where lis puts sandbox cgroups: the parent of our lis.owner leaf. */
static void cg_base(char *out, size_t len)
{
    cg_of(getpid(), out, len);
    char *s = strrchr(out, '/');
    if (s && !strcmp(s + 1, "lis.owner"))
        *s = 0;
}

static int count_sandbox_cgroups(void)
{
    char base[1024];
    cg_base(base, sizeof base);
    DIR *d = opendir(base);
    cr_assert(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += !strncmp(e->d_name, "lis-", 4);
    closedir(d);
    return n;
}

static lis_sandbox *mk(lis_ctx *ctx, uint64_t mem, uint64_t pids, uint64_t cpu)
{
    lis_sandbox_spec spec =
        {.rootfs = t_busybox(),
         .upper = LIS_UPPER_TMPFS,
         .limits = {.memory_bytes = mem, .pids = pids, .cpu_millis = cpu, .require = 1}};
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "create: %s", err.msg);
    return sb;
}

static int run_host(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TestSuite(vm_cgroup, .timeout = 300);

Test(vm_cgroup, limits_applied_at_clone_time)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = mk(ctx, 0, 0, 1500);
    char dir[1024], b[256];
    cg_of(lis_sandbox_pid(sb), dir, sizeof dir);
    cr_log_info("sandbox cgroup %s", dir);
    cr_assert(strstr(dir, "/lis-"), "PID 1 is in %s", dir);
    rdfile(dir, "memory.max", b, sizeof b);
    cr_assert_eq(strtoull(b, NULL, 10), 200ull << 20, "memory.max %s", b);
    rdfile(dir, "memory.high", b, sizeof b);
    unsigned long long high = strtoull(b, NULL, 10);
    cr_assert(high < 200ull << 20 && high > 180ull << 20, "memory.high %s", b);
    rdfile(dir, "pids.max", b, sizeof b);
    cr_assert_eq(atoi(b), 1024, "pids.max %s", b);
    rdfile(dir, "cpu.max", b, sizeof b);
    cr_assert(!strncmp(b, "150000 100000", 13), "cpu.max %s", b);
    rdfile(dir, "cpu.weight", b, sizeof b); /* a tenth of its owner's share (cgroups.c) */
    cr_assert_eq(atoi(b), 10, "cpu.weight %s", b);
    if (rdfile(dir, "memory.swap.max", b, sizeof b) > 0)
        cr_assert_eq(atoi(b), 0, "memory.swap.max %s", b);
    char self[1024];
    cg_of(getpid(), self, sizeof self);
    cr_assert(strstr(self, "/lis.owner"), "owner not in a leaf: %s", self);
    /* inside: its own cgroup namespace rooted at the sandbox cgroup */
    lis_result r;
    t_sh(sb, "cat /proc/self/cgroup", &r);
    cr_assert_str_eq(r.out.data, "0::/\n");
    lis_result_free(&r);
    lis_stats st;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
    cr_assert(st.limits_enforced);
    cr_assert(st.memory_bytes > 0 && st.memory_peak >= st.memory_bytes);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    cr_assert_eq(access(dir, F_OK), -1, "cgroup %s left behind", dir);
    lis_ctx_free(ctx);
}

Test(vm_cgroup, oom_is_an_answer)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = mk(ctx, 0, 0, 0), *neighbour = mk(ctx, 0, 0, 0);
    lis_result r;
    t_sh(sb, "echo kept > /tmp/kept", &r);
    lis_result_free(&r);
    double t0 = now();
    /* busybox dd allocates its 300 MiB block and fills it */
    t_sh(sb, "dd if=/dev/zero of=/dev/null bs=300M count=1", &r);
    double dt = now() - t0;
    cr_log_info("oom: exit %d signal %d oom_killed %d peak %llu MiB in %.1fs: %s", r.exit_code,
                r.signal, r.oom_killed, (unsigned long long)(r.memory_peak >> 20), dt, r.err_msg);
    printf("VM-OOM: 300 MiB in a 200 MiB sandbox: exit=%d oom_killed=%d peak=%llu MiB "
           "err_msg='%s' (%.1f s)\n",
           r.exit_code, r.oom_killed, (unsigned long long)(r.memory_peak >> 20), r.err_msg, dt);
    cr_assert(r.oom_killed);
    cr_assert_eq(r.exit_code, 137);
    cr_assert_str_eq(r.err_msg, "killed: out of memory (limit 200 MiB)");
    cr_assert(r.memory_peak > 150ull << 20 && r.memory_peak <= 200ull << 20, "peak %llu",
              (unsigned long long)r.memory_peak);
    lis_result_free(&r);
    /* PID 1 and the files survive */
    t_sh(sb, "cat /tmp/kept && echo alive", &r);
    cr_assert_str_eq(r.out.data, "kept\nalive\n");
    cr_assert(!r.oom_killed);
    cr_assert_str_eq(r.err_msg, "");
    lis_result_free(&r);
    lis_stats st;
    lis_error err = {0};
    lis_sandbox_stats(sb, &st, &err);
    cr_assert_eq(st.oom_kills, 1);
    cr_assert_eq(st.state[0], 'r');
    /* the neighbour did not notice */
    t_sh(neighbour, "echo fine", &r);
    cr_assert_str_eq(r.out.data, "fine\n");
    lis_result_free(&r);
    lis_sandbox_stats(neighbour, &st, &err);
    cr_assert_eq(st.oom_kills, 0);
    lis_sandbox_destroy(neighbour, &err);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(vm_cgroup, fork_bomb_stops_at_pids_max)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = mk(ctx, 0, 64, 0);
    char dir[1024];
    cg_of(lis_sandbox_pid(sb), dir, sizeof dir);
    lis_exec_spec ex = {.shell = "f() { f | f & }; f; sleep 30",
                        .out = LIS_STDIO_NULL,
                        .err = LIS_STDIO_NULL,
                        .timeout = 20};
    lis_proc *p;
    lis_error err = {0};
    cr_assert_eq(lis_exec_start(sb, &ex, &p, &err), 0, "%s", err.msg);
    sleep(3);
    unsigned long long cur = 0;
    char b[64];
    if (rdfile(dir, "pids.current", b, sizeof b) > 0)
        cur = strtoull(b, NULL, 10);
    unsigned long long maxev = key(dir, "pids.events", "max");
    /* the owner (and the host) stay responsive */
    double t0 = now();
    cr_assert_eq(run_host("/bin/true"), 0);
    double dt = now() - t0;
    printf("VM-PIDS: fork bomb in pids.max=64: pids.current=%llu pids.events max=%llu, "
           "host fork+exec took %.3f s\n",
           cur, maxev, dt);
    cr_assert(cur <= 64, "pids.current %llu", cur);
    cr_assert(maxev >= 1);
    cr_assert(dt < 5);
    lis_proc_signal(p, SIGKILL, &err);
    lis_result r;
    lis_proc_wait(p, &r, &err);
    lis_result_free(&r);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    cr_assert_eq(access(dir, F_OK), -1, "cgroup %s left behind", dir);
    lis_ctx_free(ctx);
}

Test(vm_cgroup, cpu_max_throttles)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = mk(ctx, 0, 0, 200); /* --cpus 0.2 */
    char dir[1024];
    cg_of(lis_sandbox_pid(sb), dir, sizeof dir);
    unsigned long long u0 = key(dir, "cpu.stat", "usage_usec");
    lis_result r;
    double t0 = now();
    t_sh(sb, "timeout 2 sh -c 'while :; do :; done'; true", &r);
    double wall = now() - t0;
    lis_result_free(&r);
    unsigned long long used = key(dir, "cpu.stat", "usage_usec") - u0;
    unsigned long long thr = key(dir, "cpu.stat", "nr_throttled");
    double share = used / 1e6 / wall;
    printf("VM-CPU: --cpus 0.2, busy loop for %.1f s: cpu %.2f s (%.0f%%), nr_throttled=%llu\n",
           wall, used / 1e6, share * 100, thr);
    cr_assert(thr >= 1, "nr_throttled %llu", thr);
    cr_assert(share < 0.4, "share %.2f", share);
    lis_error err = {0};
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(vm_cgroup, sixty_four_sandboxes_rm_all)
{
    const char *lis = t_lis_bin(), *bb = t_busybox();
    /* not under /tmp: the VM's /tmp is an overlay, no upper layer can live on it */
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s/lis-vm-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert(mkdtemp(tmp));
    int before = count_sandbox_cgroups();
    char cmd[2048];
    double t0 = now();
    snprintf(cmd, sizeof cmd,
             "export XDG_RUNTIME_DIR=%s XDG_DATA_HOME=%s/data; for i in $(seq 1 64); do "
             "%s sandbox create --rootfs %s --name s$i --require-limits >/dev/null || exit 1; done",
             tmp, tmp, lis, bb);
    cr_assert_eq(run_host(cmd), 0);
    int during = count_sandbox_cgroups();
    double tc = now() - t0;
    snprintf(cmd, sizeof cmd, "XDG_RUNTIME_DIR=%s XDG_DATA_HOME=%s/data %s sandbox rm --all", tmp,
             tmp, lis);
    t0 = now();
    cr_assert_eq(run_host(cmd), 0);
    int after = count_sandbox_cgroups();
    printf("VM-64: %d sandbox cgroups after 64 creates (%.1f s), %d after rm --all (%.1f s)\n",
           during - before, tc, after - before, now() - t0);
    cr_assert_eq(during - before, 64);
    cr_assert_eq(after, before);
}

Test(vm_cgroup, owner_kill9_then_gc)
{
    const char *bb = t_busybox(), *lis = t_lis_bin();
    lis_ctx *ctx = t_ctx();
    int pp[2];
    cr_assert_eq(pipe(pp), 0);
    pid_t owner = fork();
    if (owner == 0) {
        close(pp[0]);
        lis_sandbox_spec spec = {.rootfs = bb, .upper = LIS_UPPER_DISK, .limits = {.require = 1}};
        lis_sandbox *sb;
        lis_error err = {0};
        if (lis_sandbox_create(ctx, &spec, &sb, &err) < 0)
            _exit(1);
        char dir[1024];
        cg_of(lis_sandbox_pid(sb), dir, sizeof dir);
        dprintf(pp[1], "%s\n", dir);
        pause();
        _exit(0);
    }
    close(pp[1]);
    char dir[1024] = "";
    FILE *f = fdopen(pp[0], "r");
    cr_assert(fgets(dir, sizeof dir, f), "owner did not create a sandbox");
    fclose(f);
    dir[strcspn(dir, "\n")] = 0;
    cr_assert_eq(access(dir, F_OK), 0);
    kill(owner, SIGKILL);
    waitpid(owner, NULL, 0);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s sandbox gc >/dev/null", lis);
    int gone = 0;
    double t0 = now();
    for (int i = 0; i < 20 && !gone; i++) {
        /* lis sandbox gc with the dead sandbox's run dir */
        char full[4096];
        snprintf(full, sizeof full, "XDG_RUNTIME_DIR= %s", cmd);
        lis_error err = {0};
        int removed = 0;
        lis_sandbox_gc(ctx, &removed, &err);
        run_host(full);
        gone = access(dir, F_OK) != 0;
        if (!gone)
            usleep(500000);
    }
    printf("VM-GC: owner killed with -9: cgroup %s after gc (%.1f s)\n",
           gone ? "removed" : "LEFT BEHIND", now() - t0);
    cr_assert(gone, "cgroup %s left behind", dir);
    lis_ctx_free(ctx);
}

static unsigned long long usage_usec(const char *dir) { return key(dir, "cpu.stat", "usage_usec"); }

/* With a cgroup v2, pause is the kernel's freezer: the whole cgroup (lis-init
 * too) is frozen, its CPU time stops, exec is refused; a snapshot of the
 * frozen sandbox works and leaves it frozen; resume thaws it. Through the C
 * API and, for a persistent sandbox, through the CLI (another process). */
Test(vm_cgroup, pause_is_the_freezer_and_snapshots_work_frozen)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = mk(ctx, 0, 0, 0);
    char dir[1024], b[256];
    cg_of(lis_sandbox_pid(sb), dir, sizeof dir);
    lis_result r;
    t_sh(sb, "sh -c 'while :; do :; done' >/dev/null 2>&1 </dev/null & echo ok", &r);
    lis_result_free(&r);
    lis_error err = {0};
    double t0 = now();
    cr_assert_eq(lis_sandbox_pause(sb, &err), 0, "%s", err.msg);
    printf("VM-PAUSE: freezer pause %.2f ms\n", (now() - t0) * 1000);
    rdfile(dir, "cgroup.freeze", b, sizeof b);
    cr_assert_eq(atoi(b), 1, "cgroup.freeze %s", b);
    rdfile(dir, "cgroup.events", b, sizeof b);
    cr_assert(strstr(b, "frozen 1"), "cgroup.events %s", b);
    unsigned long long u0 = usage_usec(dir);
    usleep(600000);
    unsigned long long u1 = usage_usec(dir);
    cr_assert(u1 - u0 < 20000, "CPU time grew by %llu us while frozen", u1 - u0);
    lis_exec_spec ex = {.shell = "true"};
    cr_assert_eq(lis_exec(sb, &ex, &r, &err), -1);
    cr_assert(strstr(err.msg, "is paused"), "%s", err.msg);
    t0 = now();
    cr_assert_eq(lis_sandbox_resume(sb, &err), 0, "%s", err.msg);
    printf("VM-PAUSE: freezer resume %.2f ms\n", (now() - t0) * 1000);
    rdfile(dir, "cgroup.freeze", b, sizeof b);
    cr_assert_eq(atoi(b), 0, "cgroup.freeze %s", b);
    for (int i = 0; i < 50 && usage_usec(dir) - u1 < 50000; i++)
        usleep(100000);
    cr_assert(usage_usec(dir) - u1 >= 50000, "the busy loop did not go on after resume");
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);

    /* the CLI, on a persistent sandbox: pause from one process, snapshot it
     * frozen, a sandbox of the snapshot sees the file, resume from another */
    int code;
    char *out = t_lis(&code, "sandbox create --rootfs %s --name frz", t_busybox());
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox exec frz -- sh -c 'echo kept > /root/f'");
    free(out);
    out = t_lis(&code, "sandbox pause frz");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox ls");
    cr_assert(strstr(out, " paused "), "%s", out);
    free(out);
    out = t_lis(&code, "sandbox snapshot frz --tag frz:snap");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox ls");
    cr_assert(strstr(out, " paused "), "the snapshot resumed a paused sandbox: %s", out);
    free(out);
    out = t_lis(&code, "sandbox run --image frz:snap -- cat /root/f");
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "kept"), "%s", out);
    free(out);
    out = t_lis(&code, "sandbox resume frz");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox exec frz -- cat /root/f");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox rm frz");
    free(out);
}
