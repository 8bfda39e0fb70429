/* test_runtime.c - the runtime core: isolation, hardening, commands. */
#include "testlib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The static probe, bound read-only into the sandbox at /probe. */
static lis_sandbox *probe_sandbox(lis_ctx *ctx)
{
    static char probe[4096];
    snprintf(probe, sizeof probe, "%s/../build/tests/sysprobe", t_src_dir());
    if (access(probe, X_OK) != 0) {
        const char *b = getenv("LIS_BIN");
        snprintf(probe, sizeof probe, "%.4000s", b ? b : "");
        char *s = strrchr(probe, '/');
        if (s)
            strcpy(s, "/tests/sysprobe");
    }
    cr_assert_eq(access(probe, X_OK), 0, "sysprobe missing at %s", probe);
    lis_bind b = {.host_path = probe, .path = "/probe", .read_only = 1};
    lis_sandbox_spec spec = {.rootfs = t_busybox(),
                             .upper = LIS_UPPER_TMPFS,
                             .binds = &b,
                             .nbinds = 1};
    lis_sandbox *sb;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "%s", err.msg);
    return sb;
}

static char *sh_out(lis_sandbox *sb, const char *cmd, int *code)
{
    lis_result r;
    t_sh(sb, cmd, &r);
    if (code)
        *code = r.exit_code;
    free(r.err.data);
    return r.out.data;
}

Test(runtime, uid0_inside_caller_outside)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    char *out = sh_out(sb, "id -u; id -g", NULL);
    cr_assert_str_eq(out, "0\n0\n");
    free(out);
    /* outside, PID 1 of the sandbox belongs to us */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", (int)lis_sandbox_pid(sb));
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_uid, getuid());
    lis_error err;
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);
}

Test(runtime, pid1_is_ours_and_host_pids_invisible)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    char *out =
        sh_out(sb, "tr '\\0' ' ' < /proc/1/cmdline; echo; ls /proc | grep -c '^[0-9]'", NULL);
    cr_assert(strncmp(out, "lis-init ", 9) == 0, "PID 1 is '%s'", out);
    /* PID 1, the command's session process, sh, ls, grep: nothing of the host */
    int n = atoi(strchr(out, '\n') + 1);
    cr_assert(n > 0 && n <= 6, "%d processes visible", n);
    free(out);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "test -e /proc/%d/status && echo seen", (int)getpid());
    out = sh_out(sb, cmd, NULL);
    cr_assert(getpid() <= 6 || strcmp(out, "seen\n") != 0);
    free(out);
    lis_error err;
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(runtime, hostname_is_set)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox_spec spec = {.rootfs = t_busybox(), .upper = LIS_UPPER_TMPFS, .hostname = "box-7"};
    lis_sandbox *sb;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "%s", err.msg);
    char *out = sh_out(sb, "hostname; grep box-7 /etc/hosts | wc -l", NULL);
    cr_assert_str_eq(out, "box-7\n1\n");
    free(out);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(runtime, writes_do_not_reach_the_lower_rootfs)
{
    lis_ctx *ctx = t_ctx();
    const char *root = t_busybox();
    for (int disk = 0; disk < 2; disk++) {
        lis_sandbox_spec spec = {.rootfs = root, .upper = disk ? LIS_UPPER_DISK : LIS_UPPER_TMPFS};
        lis_sandbox *sb;
        lis_error err = {0};
        cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "%s", err.msg);
        int code;
        char *out = sh_out(sb,
                           "echo new > /etc/new.txt && echo changed > /etc/lower.txt && "
                           "rm /bin/vi && cat /etc/lower.txt && ls /bin/vi 2>&1 | wc -l",
                           &code);
        cr_assert_eq(code, 0);
        cr_assert_str_eq(out, "changed\n1\n");
        free(out);
        char p[4096];
        snprintf(p, sizeof p, "%s/etc/new.txt", root);
        cr_assert_neq(access(p, F_OK), 0, "a new file reached the lower layer");
        snprintf(p, sizeof p, "%s/bin/vi", root);
        struct stat st;
        cr_assert_eq(lstat(p, &st), 0, "a deletion reached the lower layer");
        int hc;
        char *lower = t_host(&hc, "cat %s/etc/lower.txt", root);
        cr_assert_str_eq(lower, "lower file\n");
        free(lower);
        cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    }
    lis_ctx_free(ctx);
}

Test(runtime, only_loopback_in_the_netns)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    char *out = sh_out(sb, "ls /sys/class/net; ip -o link | wc -l", NULL);
    cr_assert_str_eq(out, "lo\n1\n");
    free(out);
    lis_error err;
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

static int connect_local(int s, unsigned short port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    return connect(s, (struct sockaddr *)&a, sizeof a);
}

/* lis_sandbox_socket: a socket of the sandbox's network, so connect() reaches
 * a listener that exists only on the sandbox's loopback (port forwarding). */
Test(runtime, socket_inside_the_sandbox_network)
{
    lis_ctx *ctx = t_ctx();
    const unsigned short port = 47813;
    int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int host_has_it = connect_local(probe, port) == 0;
    close(probe);
    lis_sandbox_spec spec = {.rootfs = t_busybox(), .upper = LIS_UPPER_TMPFS, .listen_port = port};
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "create: %s", err.msg);
    int lst = lis_sandbox_take_listener(sb); /* listens on the sandbox's 127.0.0.1 only */
    cr_assert_geq(lst, 0);
    if (!host_has_it) { /* the host's loopback does not have it */
        int h = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_neq(connect_local(h, port), 0, "the listener leaked to the host network");
        close(h);
    }
    int s = lis_sandbox_socket(sb, AF_INET, SOCK_STREAM, &err);
    cr_assert_geq(s, 0, "lis_sandbox_socket: %s", err.msg);
    cr_assert_eq(connect_local(s, port), 0, "connect inside: %s", strerror(errno));
    struct pollfd pf = {.fd = lst, .events = POLLIN};
    cr_assert_eq(poll(&pf, 1, 5000), 1, "the sandbox's listener saw no connection");
    int c = accept4(lst, NULL, NULL, SOCK_CLOEXEC);
    cr_assert_geq(c, 0);
    cr_assert_eq(write(s, "ping", 4), 4);
    char buf[8] = "";
    cr_assert_eq(read(c, buf, sizeof buf), 4);
    cr_assert_str_eq(buf, "ping");
    close(c);
    close(s);
    close(lst);
    /* a bad socket type fails with a message, not a crash */
    cr_assert_eq(lis_sandbox_socket(sb, AF_INET, 12345, &err), -1);
    cr_assert(strstr(err.msg, "network"), "%s", err.msg);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);
}

Test(runtime, proc_sys_is_read_only)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    int code;
    char *out = sh_out(sb,
                       "echo x > /proc/sys/kernel/hostname 2>/dev/null && echo wrote; "
                       "grep ' /proc/sys ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1",
                       &code);
    cr_assert_str_eq(out, "ro\n");
    free(out);
    lis_error err;
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(runtime, seccomp_denies_dangerous_syscalls)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = probe_sandbox(ctx);
    static const char *const denied[] = {"keyctl", "add_key",    "bpf",          "mount",
                                         "umount", "userns",     "clone-userns", "pivot_root",
                                         "perf",   "personality"};
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "/probe %s", denied[i]);
        char *out = sh_out(sb, cmd, NULL);
        cr_expect_str_eq(out, "EPERM\n", "%s: %s", denied[i], out);
        free(out);
    }
    char *out = sh_out(sb, "/probe getpid", NULL);
    cr_assert_str_eq(out, "ok\n");
    free(out);
    lis_error err;
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(runtime, capabilities_reduced_and_no_new_privs)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    char *out =
        sh_out(sb, "grep -E '^(CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status", NULL);
    /* Docker's default set: chown dac_override fowner fsetid kill setgid setuid setpcap
     * net_bind_service net_raw sys_chroot mknod audit_write setfcap */
    cr_assert(strstr(out, "CapBnd:\t00000000a80425fb"), "%s", out);
    cr_assert(strstr(out, "CapAmb:\t0000000000000000"), "%s", out);
    cr_assert(strstr(out, "NoNewPrivs:\t1"), "%s", out);
    cr_assert(strstr(out, "Seccomp:\t2"), "%s", out);
    free(out);
    lis_error err;
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(runtime, no_owner_fd_visible_inside)
{
    lis_ctx *ctx = t_ctx();
    /* an inheritable fd with a recognisable target */
    int leak = open("/etc/hostname", O_RDONLY);
    cr_assert(leak >= 0);
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    char *out = sh_out(sb,
                       "ls -l /proc/[0-9]*/fd/ 2>/dev/null | grep -c hostname; "
                       "ls /proc/1/fd | wc -l",
                       NULL);
    /* PID 1 keeps 0-2, its lifeline, its signalfd, the set-up tmpfs (for
     * snapshots, out of the commands' reach: test_rootfs_snapshot), and for
     * the running command the client connection and the session's control
     * socket */
    cr_assert(strncmp(out, "0\n", 2) == 0, "owner fd visible: %s", out);
    cr_assert(atoi(strchr(out, '\n') + 1) <= 9, "PID 1 has too many fds: %s", out);
    free(out);
    close(leak);
    lis_error err;
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(runtime, timeout_kills_backgrounded_grandchildren)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_exec_spec ex = {.shell = "sleep 1001 & setsid sleep 1002 & "
                                 "(sleep 1003 &) ; sleep 1004",
                        .out = LIS_STDIO_CAPTURE,
                        .err = LIS_STDIO_CAPTURE,
                        .timeout = 1};
    lis_result r;
    lis_error err = {0};
    cr_assert_eq(lis_exec(sb, &ex, &r, &err), 0, "%s", err.msg);
    cr_assert(r.timed_out);
    cr_assert_eq(r.exit_code, -1);
    cr_assert(r.wall_seconds >= 0.9 && r.wall_seconds < 20, "wall %f", r.wall_seconds);
    lis_result_free(&r);
    char *out = sh_out(sb, "ps -o args | grep -c '^sleep 100'", NULL);
    cr_assert_str_eq(out, "0\n", "survivors: %s", out);
    free(out);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(runtime, background_process_survives_a_finished_command)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    int code;
    char *out = sh_out(sb, "sleep 300 > /dev/null 2>&1 & echo started", &code);
    cr_assert_str_eq(out, "started\n");
    free(out);
    out =
        sh_out(sb,
               "for i in $(seq 50); do ps -o args | grep -q '^sleep 300' && break; sleep 0.1; done; "
               "ps -o args | grep -c '^sleep 300'",
               NULL);
    cr_assert_str_eq(out, "1\n");
    free(out);
    lis_error err;
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(runtime, exit_codes_signals_stdin_env_cwd)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_result r;
    t_sh(sb, "exit 42", &r);
    cr_assert_eq(r.exit_code, 42);
    lis_result_free(&r);
    t_sh(sb, "kill -TERM $$", &r);
    cr_assert_eq(r.signal, SIGTERM);
    cr_assert_eq(r.exit_code, 128 + SIGTERM);
    lis_result_free(&r);
    t_sh(sb, "echo out; echo err >&2", &r);
    cr_assert_str_eq(r.out.data, "out\n");
    cr_assert_str_eq(r.err.data, "err\n");
    lis_result_free(&r);

    const char *env[] = {"FOO=bar baz", "HOME=/tmp", NULL};
    const char *argv[] = {"sh", "-c", "echo \"$FOO|$HOME|$PATH|$(pwd)\"; cat", NULL};
    lis_exec_spec ex = {.argv = argv,
                        .env = env,
                        .cwd = "/etc",
                        .in = LIS_STDIO_DATA,
                        .in_data = "from stdin",
                        .in_len = 10,
                        .out = LIS_STDIO_CAPTURE,
                        .err = LIS_STDIO_CAPTURE};
    lis_error err = {0};
    cr_assert_eq(lis_exec(sb, &ex, &r, &err), 0, "%s", err.msg);
    cr_assert_str_eq(r.out.data, "bar baz|/tmp|/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                                 "/usr/bin:/sbin:/bin|/etc\nfrom stdin");
    lis_result_free(&r);

    const char *missing[] = {"/no/such/binary", NULL};
    lis_exec_spec ex2 = {.argv = missing, .out = LIS_STDIO_CAPTURE};
    cr_assert_eq(lis_exec(sb, &ex2, &r, &err), 0, "%s", err.msg);
    cr_assert(r.exec_failed);
    cr_assert_eq(r.exit_code, 127);
    cr_assert(strstr(r.err_msg, "/no/such/binary"), "%s", r.err_msg);
    lis_result_free(&r);
    lis_exec_spec ex3 = {.shell = "true", .cwd = "/nonexistent"};
    cr_assert_eq(lis_exec(sb, &ex3, &r, &err), 0, "%s", err.msg);
    cr_assert(r.exec_failed && strstr(r.err_msg, "chdir"), "%s", r.err_msg);
    lis_result_free(&r);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(runtime, output_cap_keeps_head_and_tail_without_growing)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    long before = t_rss_kib();
    lis_exec_spec ex = {.shell = "echo HEAD; head -c 100000000 /dev/zero | tr '\\0' x; echo; "
                                 "echo TAIL",
                        .out = LIS_STDIO_CAPTURE,
                        .err = LIS_STDIO_CAPTURE,
                        .out_cap = 1 << 20,
                        .timeout = 120};
    lis_result r;
    lis_error err = {0};
    cr_assert_eq(lis_exec(sb, &ex, &r, &err), 0, "%s", err.msg);
    long after = t_rss_kib();
    cr_assert_eq(r.exit_code, 0);
    cr_assert_eq(r.out.len, 1 << 20);
    cr_assert_eq(r.out.dropped, 100000000ull + 11 - (1 << 20));
    cr_assert(strncmp(r.out.data, "HEAD\nxxx", 8) == 0);
    cr_assert(strcmp(r.out.data + r.out.len - 9, "xxx\nTAIL\n") == 0);
    cr_assert(after - before < 16 * 1024, "owner RSS grew by %ld KiB", after - before);
    lis_result_free(&r);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(runtime, sixty_four_sandboxes_at_once, .timeout = 240)
{
    lis_ctx *ctx = t_ctx();
    enum { N = 64 };
    lis_sandbox *sb[N];
    for (int i = 0; i < N; i++)
        sb[i] = t_sandbox(ctx, t_busybox());
    lis_proc *p[N];
    lis_error err = {0};
    for (int i = 0; i < N; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "echo %d; hostname; tail -n 1 /etc/hosts", i);
        lis_exec_spec ex = {.shell = cmd, .out = LIS_STDIO_CAPTURE, .err = LIS_STDIO_CAPTURE};
        cr_assert_eq(lis_exec_start(sb[i], &ex, &p[i], &err), 0, "%s", err.msg);
    }
    for (int i = 0; i < N; i++) {
        lis_result r;
        cr_assert_eq(lis_proc_wait(p[i], &r, &err), 0, "%s", err.msg);
        /* one mount plan serves them all (mounts.c): each still has its own name */
        char want[256];
        snprintf(want, sizeof want, "%d\n%s\n127.0.1.1\t%s\n", i, lis_sandbox_name(sb[i]),
                 lis_sandbox_name(sb[i]));
        cr_assert_str_eq(r.out.data, want);
        lis_result_free(&r);
    }
    for (int i = 0; i < N; i++)
        cr_assert_eq(lis_sandbox_destroy(sb[i], &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);
}

/* Creators at once on one cached mount plan. The set-up child shares its
 * owner's memory until it execs lis-init (runtime/spawn.c): one that wrote
 * into the plan, the request or its creator's frame would give another
 * sandbox its name, its mounts, its /tmp or its limits. Each must show its
 * own name and exactly what a sandbox made alone shows. The image's /tmp is
 * not empty, so every child also copies it (copytree.c, in the arena its
 * creator mapped). Once with the full uid map (the transient child of
 * spawn.c), once with the single one. */
enum { CREATORS = 8, PER_CREATOR = 4 };
struct creator {
    lis_ctx *ctx;
    const lis_sandbox_spec *spec;
    lis_sandbox *sb[PER_CREATOR];
    char err[256];
};

static void *create_some(void *arg)
{
    struct creator *c = arg;
    for (int i = 0; i < PER_CREATOR; i++) {
        lis_error err = {0};
        if (lis_sandbox_create(c->ctx, c->spec, &c->sb[i], &err) < 0) {
            snprintf(c->err, sizeof c->err, "%s", err.msg);
            c->sb[i] = NULL;
        }
    }
    return NULL;
}

/* Its hostname and /etc/hosts' last line, then what must be the same in all. */
static char *sandbox_view(lis_sandbox *sb)
{
    int code = -1;
    char *out =
        sh_out(sb,
               "hostname; tail -n 1 /etc/hosts; cat /tmp/seed; ulimit -n; "
               "grep -E 'NoNewPrivs|Seccomp:|CapBnd' /proc/self/status; "
               "grep -E '^Max (processes|data size|file size|open files)' /proc/self/limits; "
               "cat /proc/self/uid_map; cut -d' ' -f5- /proc/self/mountinfo",
               &code);
    cr_assert_eq(code, 0, "%s", out);
    return out;
}

Test(runtime, creators_at_once_share_one_plan_and_keep_their_own, .timeout = 240)
{
    lis_ctx *ctx = t_ctx();
    char top[4096], seed[4200], chain[8400];
    snprintf(top, sizeof top, "%s/top", t_tmpdir());
    snprintf(seed, sizeof seed, "%s/tmp", top);
    cr_assert_eq(mkdir(top, 0755), 0);
    cr_assert_eq(mkdir(seed, 01777), 0);
    snprintf(seed, sizeof seed, "%s/tmp/seed", top);
    FILE *f = fopen(seed, "w");
    cr_assert(f);
    fputs("seeded /tmp\n", f);
    fclose(f);
    snprintf(chain, sizeof chain, "%s:%s", top, t_busybox());
    lis_rlimit nofile = {RLIMIT_NOFILE, 321, 654};
    for (int map = 0; map < 2; map++) {
        lis_sandbox_spec spec = {.rootfs = chain,
                                 .upper = LIS_UPPER_TMPFS,
                                 .uidmap = map ? LIS_UIDMAP_SINGLE : LIS_UIDMAP_AUTO,
                                 .limits = {.memory_bytes = 150 << 20, .pids = 300},
                                 .rlimits = &nofile,
                                 .nrlimits = 1};
        lis_error err = {0};
        lis_sandbox *alone;
        cr_assert_eq(lis_sandbox_create(ctx, &spec, &alone, &err), 0, "%s", err.msg);
        char *ref = sandbox_view(alone);
        char *ref_rest = strchr(strchr(ref, '\n') + 1, '\n') + 1;
        cr_assert(strstr(ref_rest, "seeded /tmp\n321\n"), "%s", ref);
        struct creator cr[CREATORS];
        pthread_t th[CREATORS];
        for (int i = 0; i < CREATORS; i++) {
            cr[i] = (struct creator){.ctx = ctx, .spec = &spec};
            cr_assert_eq(pthread_create(&th[i], NULL, create_some, &cr[i]), 0);
        }
        for (int i = 0; i < CREATORS; i++)
            pthread_join(th[i], NULL);
        for (int i = 0; i < CREATORS; i++) {
            cr_assert_str_empty(cr[i].err, "creator %d: %s", i, cr[i].err);
            for (int j = 0; j < PER_CREATOR; j++) {
                lis_sandbox *sb = cr[i].sb[j];
                char *v = sandbox_view(sb), want[256];
                snprintf(want, sizeof want, "%s\n127.0.1.1\t%s\n", lis_sandbox_name(sb),
                         lis_sandbox_name(sb));
                cr_assert_eq(strncmp(v, want, strlen(want)), 0, "%s: %s", want, v);
                cr_assert_str_eq(v + strlen(want), ref_rest, "map %d, sandbox %s", map,
                                 lis_sandbox_name(sb));
                free(v);
                cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
            }
        }
        free(ref);
        cr_assert_eq(lis_sandbox_destroy(alone, &err), 0, "%s", err.msg);
    }
    lis_ctx_free(ctx);
}

Test(runtime, owner_killed_takes_the_sandbox_along, .timeout = 60)
{
    const char *root = t_busybox();
    int pp[2];
    cr_assert_eq(pipe(pp), 0);
    pid_t owner = fork();
    if (owner == 0) {
        lis_ctx *ctx = t_ctx();
        lis_sandbox_spec spec = {.rootfs = root, .upper = LIS_UPPER_DISK};
        lis_sandbox *sb;
        lis_error err;
        if (lis_sandbox_create(ctx, &spec, &sb, &err) < 0)
            _exit(1);
        lis_result r;
        lis_exec_spec ex = {.shell = "sleep 1000 >/dev/null 2>&1 & echo ok"};
        lis_exec(sb, &ex, &r, &err);
        char msg[512];
        snprintf(msg, sizeof msg, "%d %s", (int)lis_sandbox_pid(sb), t_tmpdir());
        if (write(pp[1], msg, strlen(msg) + 1) < 0)
            _exit(1);
        pause();
        _exit(0);
    }
    close(pp[1]);
    char buf[512] = "";
    cr_assert(read(pp[0], buf, sizeof buf) > 0, "owner failed to create a sandbox");
    pid_t pid1 = atoi(buf);
    const char *owner_tmp = strchr(buf, ' ') + 1;
    char path[64], ns[64];
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid1);
    ssize_t n = readlink(path, ns, sizeof ns - 1);
    cr_assert(n > 0);
    ns[n] = 0;
    cr_assert(t_procs_in_ns(ns) >= 3, "PID 1, a session and sleep expected");
    int pidfd = (int)syscall(SYS_pidfd_open, pid1, 0);
    cr_assert(pidfd >= 0);
    kill(owner, SIGKILL);
    waitpid(owner, NULL, 0);
    struct pollfd pf = {.fd = pidfd, .events = POLLIN};
    cr_assert_eq(poll(&pf, 1, 10000), 1, "sandbox PID 1 outlived its owner");
    for (int i = 0; i < 100 && t_procs_in_ns(ns) > 0; i++)
        usleep(50000);
    cr_assert_eq(t_procs_in_ns(ns), 0, "processes left behind");
    /* no mount of it is visible anywhere on the host */
    int code;
    char *m = t_host(&code, "grep -c '%s' /proc/self/mountinfo", owner_tmp);
    cr_assert_str_eq(m, "0\n");
    free(m);
}

Test(runtime, bad_inputs_fail_cleanly)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    lis_sandbox_spec spec = {.rootfs = "/nonexistent/rootfs"};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), -1);
    cr_assert(strstr(err.msg, "/nonexistent/rootfs"), "%s", err.msg);
    spec.rootfs = "/etc/hostname";
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), -1);
    cr_assert(strstr(err.msg, "not a directory"), "%s", err.msg);
    spec.rootfs = t_busybox();
    spec.name = "../evil";
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), -1);
    cr_assert(strstr(err.msg, "invalid sandbox name"), "%s", err.msg);
    spec.name = NULL;
    lis_bind b = {.host_path = "/nonexistent", .path = "/x"};
    spec.binds = &b;
    spec.nbinds = 1;
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), -1);
    cr_assert(strstr(err.msg, "/nonexistent"), "%s", err.msg);
    /* nothing left behind in the run or data dir */
    int code;
    char *left = t_host(&code,
                        "ls -A %s/run | grep -v '^\\.mnt$' | wc -l; "
                        "ls -A %s/data/sandboxes 2>/dev/null | wc -l",
                        t_tmpdir(), t_tmpdir());
    cr_assert_str_eq(left, "0\n0\n");
    free(left);
    lis_ctx_free(ctx);
}

Test(runtime, debian_minbase_runs_bash_and_apt)
{
    const char *deb = t_debian();
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, deb);
    int code;
    char *out = sh_out(sb,
                       "bash -c 'echo $BASH_VERSION' | cut -c1; dpkg -s dash | grep -c Status; "
                       "touch /var/tmp/x && chown 100:100 /var/tmp/x && stat -c %u /var/tmp/x",
                       &code);
    cr_assert_eq(code, 0, "%s", out);
    cr_assert_str_eq(out, "5\n1\n100\n");
    free(out);
    lis_error err;
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

/* The job pool starts every thread or fails naming the one that could not
 * start (a smaller pool would silently serialise the work): here the user's
 * process limit stops the first. Root ignores RLIMIT_NPROC. */
Test(runtime, job_pool_names_the_thread_that_could_not_start)
{
    if (geteuid() == 0)
        cr_skip_test("root is not held by RLIMIT_NPROC");
    pid_t c = fork();
    cr_assert_geq(c, 0);
    if (c == 0) {
        struct rlimit rl = {1, 1};
        if (setrlimit(RLIMIT_NPROC, &rl) < 0)
            _exit(4);
        lis_error err = {0};
        lis_jobs *p = lis_jobs_new(4, &err);
        if (p)
            _exit(2);
        fprintf(stderr, "%s\n", err.msg);
        _exit(err.code == EAGAIN && strstr(err.msg, "starting worker thread 1 of 4") ? 0 : 3);
    }
    int status;
    cr_assert_eq(waitpid(c, &status, 0), c);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "lis_jobs_new with no thread to spare: status %#x (2: it succeeded, 3: another "
              "error)",
              status);
}
