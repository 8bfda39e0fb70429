/* Bombs contained (issue 10, item 12): memory, fork, disk, output flood, CPU
 * hog, 100,000 files to copy out, a directory nest thousands deep, a process that ignores SIGTERM and one that
 * closes stdout but keeps running. Each runs in one sandbox while a neighbour
 * sandbox keeps answering; the neighbour's exec latency during the bomb is
 * printed against its idle latency (a ratio, never asserted: these machines
 * are shared; scripts/bench-bombs.sh collects the lines). The same binary runs
 * on the host (fallback limits, no cgroup) and in the cgroup v2 VM (real
 * limits). */
#include "testlib.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static lis_sandbox *make(lis_ctx *ctx, lis_limits lim)
{
    return t_probe_sandbox(ctx, t_busybox(), lim);
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

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Median wall time of n `true` execs in the neighbour; each must succeed. */
static double neighbour_ms(lis_sandbox *nb, int n)
{
    double t[32];
    for (int i = 0; i < n && i < 32; i++) {
        lis_result r;
        double t0 = now();
        run(nb, "echo ok", 30, &r);
        t[i] = (now() - t0) * 1000;
        cr_assert_str_eq(r.out.data, "ok\n", "the neighbour stopped answering");
        lis_result_free(&r);
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[n / 2];
}

struct bomb {
    lis_sandbox *sb;
    const char *cmd;
    double timeout;
    lis_result r;
};

static void *bomb_thread(void *arg)
{
    struct bomb *b = arg;
    lis_exec_spec ex = {.shell = b->cmd,
                        .out = LIS_STDIO_CAPTURE,
                        .err = LIS_STDIO_CAPTURE,
                        .timeout = b->timeout};
    lis_error err = {0};
    if (lis_exec(b->sb, &ex, &b->r, &err) < 0)
        b->r.exit_code = -1000;
    return NULL;
}

/* Runs cmd in a fresh sandbox with lim while the neighbour answers; returns
 * the bomb's result in *r. */
static void contain(const char *what, lis_limits lim, const char *cmd, double timeout,
                    lis_result *r)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *nb = make(ctx, (lis_limits){0});
    double idle = neighbour_ms(nb, 9);
    struct bomb b = {.sb = make(ctx, lim), .cmd = cmd, .timeout = timeout};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, bomb_thread, &b), 0);
    /* measured 1 s into the bomb: without cgroups the CPU watch of lis-init
     * holds a hog back only once it has wanted a CPU for 4 s (docs/runtime.md),
     * so this is the neighbour beside a bomb at nice 10, printed, not asserted */
    usleep(1000000);
    double busy = neighbour_ms(nb, 9);
    pthread_join(th, NULL);
    cr_assert_neq(b.r.exit_code, -1000, "the bomb's exec failed");
    cr_log_info("bomb %s: neighbour exec %.2f ms idle, %.2f ms during the bomb, ratio %.2f\n", what,
                idle, busy, busy / idle);
    printf("bomb %s: neighbour exec %.2f ms idle, %.2f ms during the bomb, ratio %.2f\n", what,
           idle, busy, busy / idle);
    /* the host still forks */
    pid_t c = fork();
    if (c == 0)
        _exit(0);
    cr_assert(c > 0, "the host could not fork after the %s bomb", what);
    waitpid(c, NULL, 0);
    *r = b.r;
    lis_error err;
    lis_sandbox_destroy(b.sb, &err);
    lis_sandbox_destroy(nb, &err);
    lis_ctx_free(ctx);
}

Test(bombs, memory, .timeout = 120)
{
    lis_result r;
    /* one process asking for more than the limit, then several that stay
     * under it each but not together */
    contain("memory", (lis_limits){.memory_bytes = 64u << 20},
            "(x=$(head -c 400000000 /dev/zero | tr '\\0' a) && echo one=${#x}); "
            "for i in 1 2 3 4 5 6 7 8 9 10; do /probe hold 12 5 & done; wait; echo done",
            60, &r);
    cr_assert_null(strstr(r.out.data, "one="), "400 MB in a 64 MiB sandbox: %s", r.out.data);
    cr_assert(r.oom_killed, "not OOM-killed: exit %d %s", r.exit_code, r.err_msg);
    lis_result_free(&r);
}

Test(bombs, fork, .timeout = 120)
{
    lis_result r;
    /* the classic bomb, stopped by the timeout; it must never get past --pids */
    contain("fork", (lis_limits){.pids = 64}, "b() { b | b & }; b; sleep 4; ps | wc -l", 3, &r);
    cr_assert(r.timed_out || r.exit_code != 0);
    lis_result_free(&r);
}

Test(bombs, disk, .timeout = 120)
{
    lis_result r;
    contain("disk", (lis_limits){.disk_bytes = 32u << 20},
            "dd if=/dev/zero of=/tmp/a bs=1M count=100 2>/dev/null; "
            "dd if=/dev/zero of=/b bs=1M count=100 2>/dev/null; echo root=$?; "
            "i=0; while [ $i -lt 100000 ]; do true > /f$i 2>/dev/null || break; i=$((i+1)); "
            "done; echo files=$i",
            60, &r);
    cr_assert(strstr(r.out.data, "root=1"), "%s", r.out.data);
    lis_result_free(&r);
}

Test(bombs, output_flood, .timeout = 120)
{
    long rss0 = t_rss_kib();
    lis_result r;
    contain("output", (lis_limits){0}, "cat /dev/zero", 3, &r);
    cr_assert(r.timed_out);
    /* head and tail kept (1 MiB per stream), the rest only counted */
    cr_assert_leq(r.out.len, 1u << 20);
    cr_assert_gt(r.out.dropped, 10u << 20, "dropped %llu", (unsigned long long)r.out.dropped);
    cr_assert_lt(t_rss_kib() - rss0, 64 * 1024, "the caller's memory grew with the flood");
    lis_result_free(&r);
}

Test(bombs, cpu_hog, .timeout = 120)
{
    lis_result r;
    contain("cpu", (lis_limits){.cpu_millis = 500},
            "for i in 1 2 3 4; do (while :; do :; done) & done; sleep 100", 3, &r);
    cr_assert(r.timed_out);
    lis_result_free(&r);
}

Test(bombs, ignores_sigterm_and_closes_stdout, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = make(ctx, (lis_limits){0});
    lis_result r;
    double t0 = now();
    run(sb, "trap '' TERM INT HUP; sleep 100", 1, &r);
    cr_assert(r.timed_out);
    cr_assert_lt(now() - t0, 30);
    lis_result_free(&r);
    /* closes stdout and stderr, keeps running: the result comes when it exits */
    t0 = now();
    run(sb, "exec >&- 2>&-; sleep 1; exit 3", 30, &r);
    cr_assert_eq(r.exit_code, 3);
    cr_assert_geq(now() - t0, 0.9);
    lis_result_free(&r);
    /* a background job that keeps stdout open does not hold the caller */
    t0 = now();
    run(sb, "sleep 100 & echo started", 30, &r);
    cr_assert_str_eq(r.out.data, "started\n");
    cr_assert_lt(now() - t0, 30);
    lis_result_free(&r);
    /* destroying a sandbox whose processes ignore SIGTERM works at once */
    run(sb, "trap '' TERM; (trap '' TERM; sleep 300) & echo", 10, &r);
    lis_result_free(&r);
    lis_error err;
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);
}

Test(bombs, hundred_thousand_files_copied_out, .timeout = 600)
{
    /* 100,000 by default; the emulated VM sets fewer (LIS_TEST_FILES) */
    const char *env = getenv("LIS_TEST_FILES");
    int nfiles = env && atoi(env) > 0 ? atoi(env) : 100000;
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = make(ctx, (lis_limits){0});
    lis_result r;
    char cmd[256], want[32];
    snprintf(cmd, sizeof cmd,
             "mkdir -p /out && cd /out && i=0; while [ $i -lt %d ]; do "
             "true > f$i || break; i=$((i+1)); done; ls | wc -l",
             nfiles);
    snprintf(want, sizeof want, "%d\n", nfiles);
    run(sb, cmd, 500, &r);
    cr_assert_str_eq(r.out.data, want, "%s", r.err.data);
    lis_result_free(&r);
    char dst[512];
    snprintf(dst, sizeof dst, "%s/out-copy", t_tmpdir());
    long rss0 = t_rss_kib();
    lis_error err = {0};
    cr_assert_eq(lis_copy_out(sb, "/out", dst, &err), 0, "%s", err.msg);
    cr_assert_lt(t_rss_kib() - rss0, 64 * 1024, "copying 100k files grew the caller by MBs");
    int code;
    char *n = t_host(&code, "ls %s | wc -l", dst);
    cr_assert_str_eq(n, want);
    free(n);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

/* Removal runs on a small thread stack, like a worker of lis serve's. */
struct destroyer {
    lis_sandbox *sb;
    int rc;
    lis_error err;
};

static void *destroy_thread(void *arg)
{
    struct destroyer *d = arg;
    d->rc = lis_sandbox_destroy(d->sb, &d->err);
    return NULL;
}

/* Hostile code nests directories 10,000 deep, some mode 000, the deepest
 * owned by a subordinate id (so only root of the mapped namespace removes it).
 * Removing the sandbox must neither overflow a 256 KiB thread stack nor run
 * out of fds, and must leave nothing behind. */
Test(bombs, directory_nest_is_removed_with_a_small_stack, .timeout = 300)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox_spec spec = {.rootfs = t_busybox(), .upper = LIS_UPPER_DISK};
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "create: %s", err.msg);
    char upper[600];
    snprintf(upper, sizeof upper, "%s/data/sandboxes/%s", t_tmpdir(), lis_sandbox_name(sb));
    lis_result r;
    /* chains of 100 moved under each other: a shell cannot cd that deep */
    run(sb,
        "mkdir /nest && cd /nest && p=d; i=1; while [ $i -lt 100 ]; do p=$p/d; i=$((i+1)); done; "
        "mkdir -p n/$p/x && touch n/$p/x/f && chown -R 1000:1000 n/$p/x && "
        "i=0; while [ $i -lt 100 ]; do mkdir -p m/$p && mv n m/$p/ && mv m n || exit 9; "
        "[ $((i % 17)) = 3 ] && chmod 000 n/d/d; i=$((i+1)); done; echo built",
        240, &r);
    cr_assert_str_eq(r.out.data, "built\n", "exit %d: %s", r.exit_code, r.err.data);
    lis_result_free(&r);
    struct stat st;
    cr_assert_eq(stat(upper, &st), 0, "no writable layer at %s", upper);

    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 256 << 10);
    struct destroyer d = {.sb = sb};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, &a, destroy_thread, &d), 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&a);
    cr_assert_eq(d.rc, 0, "destroy: %s", d.err.msg);
    cr_assert(stat(upper, &st) < 0 && errno == ENOENT, "%s is still there", upper);
    lis_ctx_free(ctx);
}

/* The same removal with 24 fds to spare, and a symlink out of the tree that
 * must be removed, not followed. */
Test(bombs, directory_nest_removed_with_few_fds_and_links_not_followed, .timeout = 120)
{
    char top[400], keep[420];
    snprintf(top, sizeof top, "%s/nest-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert(mkdtemp(top));
    snprintf(keep, sizeof keep, "%s.keep", top);
    cr_assert_eq(mkdir(keep, 0700), 0);
    int fd = open(top, O_RDONLY | O_DIRECTORY);
    for (int i = 0; i < 20000 && fd >= 0; i++) {
        cr_assert_eq(mkdirat(fd, "d", 0700), 0, "mkdir at depth %d", i);
        if (i % 1000 == 3)
            cr_assert_eq(symlinkat(keep, fd, "out"), 0);
        int sub = openat(fd, "d", O_RDONLY | O_DIRECTORY);
        close(fd);
        fd = sub;
    }
    cr_assert(fd >= 0);
    close(fd);
    pid_t c = fork();
    if (c == 0) {
        struct rlimit rl = {24, 24};
        setrlimit(RLIMIT_NOFILE, &rl);
        _exit(lis_host_rmtree_at(AT_FDCWD, top) == 0 ? 0 : 10 + errno);
    }
    int status;
    cr_assert_eq(waitpid(c, &status, 0), c);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rm failed: status %#x", status);
    struct stat st;
    cr_assert(stat(top, &st) < 0 && errno == ENOENT, "%s is still there", top);
    cr_assert_eq(stat(keep, &st), 0, "the symlink's target was removed");
    rmdir(keep);
}

/* A nest at the walk's and the copy out's depth bound (512), walked (serve's
 * archive GET) and copied out (an episode's --save-files) on a worker of the
 * job pool, whose stack is 1 MiB (runtime/jobs.c): each level's frame must
 * stay small (a PATH_MAX buffer in walk_entry made it 2.2 MB at 500). */
struct nest_job {
    lis_sandbox *sb;
    char dst[512];
    int walk_rc, copy_rc, entries, links, done;
    lis_error walk_err, copy_err;
};

static int count_entry(void *arg, const lis_walk_entry *e, lis_error *err)
{
    struct nest_job *j = arg;
    j->entries++;
    j->links += e->link && !strcmp(e->link, "../up");
    return 0;
}

static void nest_job_run(void *arg)
{
    struct nest_job *j = arg;
    lis_copy_opts o = {0};
    j->walk_rc = lis_walk(j->sb, "/nest", &o, count_entry, j, &j->walk_err);
    lis_copy_opts c = {0};
    j->copy_rc = lis_copy_out_opts(j->sb, "/nest", j->dst, &c, &j->copy_err);
}

static void nest_job_done(void *arg, int status)
{
    struct nest_job *j = arg;
    j->done = status == 0 ? 1 : -1;
}

Test(bombs, nest_at_the_depth_bound_walked_and_copied_out_on_a_job_thread, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = make(ctx, (lis_limits){0});
    lis_result r;
    /* 500 directories below /nest, a file and a link at the bottom */
    run(sb,
        "p=/nest; i=0; while [ $i -lt 500 ]; do p=$p/d; i=$((i+1)); done; "
        "mkdir -p $p && echo deep > $p/f && ln -s ../up $p/l && echo built",
        60, &r);
    cr_assert_str_eq(r.out.data, "built\n", "exit %d: %s", r.exit_code, r.err.data);
    lis_result_free(&r);
    struct nest_job j = {.sb = sb};
    snprintf(j.dst, sizeof j.dst, "%s/nest-copy", t_tmpdir());
    lis_error err = {0};
    lis_jobs *p = lis_jobs_new(1, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_not_null(lis_jobs_submit(p, nest_job_run, nest_job_done, &j, &err), "%s", err.msg);
    lis_jobs_stop(p); /* runs the job and joins: a stack overflow kills the test */
    cr_assert_eq(lis_jobs_reap(p), 1);
    lis_jobs_free(p);
    cr_assert_eq(j.done, 1);
    cr_assert_eq(j.walk_rc, 0, "walk: %s", j.walk_err.msg);
    cr_assert_eq(j.entries, 1 + 500 + 2, "every directory, the file and the link");
    cr_assert_eq(j.links, 1);
    cr_assert_eq(j.copy_rc, 0, "copy out: %s", j.copy_err.msg);
    int code;
    char *depth =
        t_host(&code, "cd %s && find . -name f -exec cat {} + && find . -type d | wc -l", j.dst);
    cr_assert_str_eq(depth, "deep\n501\n");
    free(depth);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);
}
