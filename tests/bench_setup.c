/* bench_setup - where the set-up of a sandbox goes (used by scripts/bench-setup.sh).
 *
 *   bench_setup ROOTFS N [none|proxy]
 *
 * Sets up N sandboxes the way `lis batch` does (batch/jobs.c: the sandbox,
 * the task's directories and `git init`, the tool environment, one input
 * file; --net proxy by default, as lis batch), by K creator threads for K in
 * $CREATORS (default "1 2 4 8"), in two ways:
 *   exec      each sandbox runs `mkdir -p` and `git init` itself (lis before issue 24)
 *   template  both run once, in a template snapshot every sandbox starts on (now)
 * Per stage: the wall time and the CPU per sandbox spent by the creator
 * thread (create: also the sandbox side, its PID 1 until ready; the execs'
 * sandbox side: what PID 1 reaped, read before the destroy); per round: the
 * time until the last of the N is ready, sandboxes ready per second, and the
 * CPU of the whole round per sandbox (this process and its reaped children,
 * destroy included). Beside them, in the same run: bwrap making N bare
 * sandboxes (/bin/true, on the base of a ROOTFS chain) with K at once, and this machine's fork+exec of
 * /bin/true, so that runs on different machines can be compared.
 *
 * Env: CREATORS (default "1 2 4 8"), MODES (default "exec template bwrap": the
 * rounds to run), UIDMAP=single (a one-id map instead of the full one).
 * Prints "key value" lines and a table. */
#include "lis.h"
#include "lis_net.h"
#include "rootfs.h"

#include <errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { ST_CREATE, ST_DIRS, ST_GIT, ST_FILES, ST_N };
static const char *const stage_names[ST_N] = {"create", "dirs", "git", "files"};

#define WORKDIR "/testbed"
#define INPUT_DIR "/testbed/input"
#define OUTPUT_DIR "/testbed/output"

typedef struct round {
    lis_ctx *ctx;
    lis_sandbox_spec spec;
    int exec_mode; /* 1: mkdir and git init exec'd in each sandbox */
    int n, next, failed;
    lis_sandbox **sb;
    double t0, last_ready;
    double wall[ST_N], cpu[ST_N], child_cpu[ST_N]; /* sums over the sandboxes */
    char doc[8192];
    char error[512];
    pthread_mutex_t mu;
} round_t;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double process_cpu(void)
{
    struct rusage s, c;
    getrusage(RUSAGE_SELF, &s);
    getrusage(RUSAGE_CHILDREN, &c);
    return s.ru_utime.tv_sec + s.ru_utime.tv_usec / 1e6 + s.ru_stime.tv_sec +
           s.ru_stime.tv_usec / 1e6 + c.ru_utime.tv_sec + c.ru_utime.tv_usec / 1e6 +
           c.ru_stime.tv_sec + c.ru_stime.tv_usec / 1e6;
}

/* CPU seconds of a sandbox's PID 1 and of the children it reaped. */
static double pid1_cpu(lis_sandbox *sb)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)lis_sandbox_pid(sb));
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long long ut, st, cut, cst;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &ut,
                     &st, &cut, &cst) != 4)
        return 0;
    return (double)(ut + st + cut + cst) / (double)sysconf(_SC_CLK_TCK);
}

/* batch/jobs.c's set-up before the template: what agent_prepare_sandbox runs. */
static int exec_dirs(lis_sandbox *sb, lis_error *err)
{
    const char *mk[] = {"mkdir", "-p", WORKDIR, INPUT_DIR, OUTPUT_DIR, NULL};
    lis_exec_spec s = {.argv = mk,
                       .out = LIS_STDIO_CAPTURE,
                       .err = LIS_STDIO_CAPTURE,
                       .timeout = 60};
    lis_result r = {0};
    if (lis_exec(sb, &s, &r, err) < 0)
        return -1;
    int bad = r.exit_code != 0;
    lis_result_free(&r);
    return bad ? lis_fail(err, EIO, "mkdir -p failed in the sandbox") : 0;
}

static int exec_git(lis_sandbox *sb, lis_error *err)
{
    const char *gi[] = {"git", "init", "-q", NULL};
    lis_exec_spec g = {.argv = gi,
                       .cwd = WORKDIR,
                       .out = LIS_STDIO_NULL,
                       .err = LIS_STDIO_NULL,
                       .timeout = 60};
    lis_result r = {0};
    lis_error ignore;
    if (lis_exec(sb, &g, &r, &ignore) == 0)
        lis_result_free(&r);
    return 0;
}

static int prepare(void *arg, lis_sandbox *sb, lis_error *err)
{
    (void)arg;
    return exec_dirs(sb, err) < 0 ? -1 : exec_git(sb, err);
}

/* The tool environment (agent_tool_env_init: which shell) and the row's input file. */
static int files(round_t *r, lis_sandbox *sb, lis_error *err)
{
    char kind = 0;
    lis_error ignore;
    if (lis_file_stat(sb, "/bin/bash", &kind, NULL, &ignore) < 0)
        lis_file_stat(sb, "/usr/bin/bash", &kind, NULL, &ignore);
    return lis_file_write(sb, INPUT_DIR "/notes.txt", r->doc, strlen(r->doc), 0644, err);
}

static void stage_add(round_t *r, int st, double w0, double c0, double sandbox_cpu)
{
    double w = now() - w0, c = thread_cpu() - c0;
    pthread_mutex_lock(&r->mu);
    r->wall[st] += w;
    r->cpu[st] += c;
    r->child_cpu[st] += sandbox_cpu;
    pthread_mutex_unlock(&r->mu);
}

static void *creator(void *arg)
{
    round_t *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        int i = r->next < r->n ? r->next++ : -1;
        pthread_mutex_unlock(&r->mu);
        if (i < 0)
            return NULL;
        lis_error err = {0};
        lis_sandbox *sb = NULL;
        double w0 = now(), c0 = thread_cpu();
        int rc = lis_net_sandbox_create(r->ctx, &r->spec, NULL, &sb, &err);
        /* the sandbox side: the clone child's set-up and lis-init's start */
        stage_add(r, ST_CREATE, w0, c0, rc == 0 ? pid1_cpu(sb) : 0);
        if (rc == 0 && r->exec_mode) {
            w0 = now(), c0 = thread_cpu();
            rc = exec_dirs(sb, &err);
            stage_add(r, ST_DIRS, w0, c0, 0);
            w0 = now(), c0 = thread_cpu();
            if (rc == 0)
                rc = exec_git(sb, &err);
            stage_add(r, ST_GIT, w0, c0, 0);
        }
        if (rc == 0) {
            w0 = now(), c0 = thread_cpu();
            rc = files(r, sb, &err);
            stage_add(r, ST_FILES, w0, c0, 0);
        }
        pthread_mutex_lock(&r->mu);
        r->sb[i] = sb;
        if (rc < 0) {
            r->failed++;
            snprintf(r->error, sizeof r->error, "%s", err.msg);
        }
        double t = now() - r->t0;
        if (t > r->last_ready)
            r->last_ready = t;
        pthread_mutex_unlock(&r->mu);
    }
}

static void *destroyer(void *arg)
{
    round_t *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        int i = r->next < r->n ? r->next++ : -1;
        pthread_mutex_unlock(&r->mu);
        if (i < 0)
            return NULL;
        lis_error ignore;
        if (r->sb[i])
            lis_sandbox_destroy(r->sb[i], &ignore);
        r->sb[i] = NULL;
    }
}

static void run_threads(round_t *r, int k, void *(*fn)(void *))
{
    pthread_t t[64];
    int started = 0;
    r->next = 0;
    for (int i = 0; i < k && i < 64; i++)
        if (pthread_create(&t[started], NULL, fn, r) == 0)
            started++;
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
}

static void one_round(round_t *r, const char *mode, int k)
{
    memset(r->wall, 0, sizeof r->wall);
    memset(r->cpu, 0, sizeof r->cpu);
    memset(r->child_cpu, 0, sizeof r->child_cpu);
    r->failed = 0;
    r->last_ready = 0;
    r->error[0] = 0;
    double cpu0 = process_cpu();
    r->t0 = now();
    run_threads(r, k, creator);
    double ready = r->last_ready, execs_cpu = 0;
    usleep(100000); /* PID 1 reaps the sessions of the last commands */
    for (int i = 0; i < r->n; i++)
        if (r->sb[i])
            execs_cpu += pid1_cpu(r->sb[i]);
    execs_cpu -= r->child_cpu[ST_CREATE];
    double d0 = now();
    run_threads(r, k, destroyer);
    double destroy = now() - d0;
    double cpu = process_cpu() - cpu0;
    printf("%s k=%d ready_all_s %.3f sandboxes_per_s %.1f cpu_ms_per_sandbox %.2f "
           "destroy_ms_per_sandbox %.2f failed %d\n",
           mode, k, ready, r->n / ready, 1000 * cpu / r->n, 1000 * destroy / r->n, r->failed);
    for (int s = 0; s < ST_N; s++) {
        if (r->wall[s] <= 0)
            continue;
        printf("%s k=%d stage %-6s wall_ms %.2f own_cpu_ms %.2f", mode, k, stage_names[s],
               1000 * r->wall[s] / r->n, 1000 * r->cpu[s] / r->n);
        if (s == ST_CREATE)
            printf(" sandbox_cpu_ms %.2f", 1000 * r->child_cpu[s] / r->n);
        if (s == ST_GIT)
            printf(" dirs+git_sandbox_cpu_ms %.2f", 1000 * execs_cpu / r->n);
        printf("\n");
    }
    if (r->failed)
        printf("%s k=%d error %s\n", mode, k, r->error);
    fflush(stdout);
}

/* ---- the peers: bwrap, and fork+exec ---- */

typedef struct bw_round {
    const char *rootfs;
    int n, next, failed;
    pthread_mutex_t mu;
} bw_round;

static int spawn_wait(char *const argv[])
{
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
        return -1;
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void *bw_worker(void *arg)
{
    bw_round *b = arg;
    char *argv[] = {"/usr/bin/bwrap", "--unshare-all",   "--dev", "/dev",      "--proc", "/proc",
                    "--bind",         (char *)b->rootfs, "/",     "/bin/true", NULL};
    for (;;) {
        pthread_mutex_lock(&b->mu);
        int i = b->next < b->n ? b->next++ : -1;
        pthread_mutex_unlock(&b->mu);
        if (i < 0)
            return NULL;
        if (spawn_wait(argv) < 0) {
            pthread_mutex_lock(&b->mu);
            b->failed++;
            pthread_mutex_unlock(&b->mu);
        }
    }
}

static void bwrap_round(const char *rootfs, int n, int k)
{
    if (access("/usr/bin/bwrap", X_OK) < 0) {
        printf("bwrap k=%d missing\n", k);
        return;
    }
    bw_round b = {.rootfs = rootfs, .n = n};
    pthread_mutex_init(&b.mu, NULL);
    pthread_t t[64];
    int started = 0;
    double cpu0 = process_cpu(), t0 = now();
    for (int i = 0; i < k && i < 64; i++)
        if (pthread_create(&t[started], NULL, bw_worker, &b) == 0)
            started++;
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    double wall = now() - t0, cpu = process_cpu() - cpu0;
    printf("bwrap k=%d ready_all_s %.3f sandboxes_per_s %.1f cpu_ms_per_sandbox %.2f failed %d\n",
           k, wall, n / wall, 1000 * cpu / n, b.failed);
    fflush(stdout);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void fork_exec(void)
{
    double t[200];
    char *argv[] = {"/bin/true", NULL};
    for (int i = 0; i < 200; i++) {
        double t0 = now();
        pid_t pid = fork();
        if (pid == 0) {
            execv(argv[0], argv);
            _exit(127);
        }
        waitpid(pid, NULL, 0);
        t[i] = now() - t0;
    }
    qsort(t, 200, sizeof t[0], cmp);
    printf("fork_exec_true_ms %.3f\n", 1000 * t[100]);
}

static void warn_once(void *arg, const char *line)
{
    int *warned = arg;
    if (!__atomic_exchange_n(warned, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "bench_setup: warning (once): %s\n", line);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_setup ROOTFS N [none|proxy]\n");
        return 2;
    }
    const char *rootfs = argv[1];
    int n = atoi(argv[2]);
    lis_net_mode net = argc > 3 && !strcmp(argv[3], "none") ? LIS_NET_NONE : LIS_NET_PROXY;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    lis_error err = {0};
    int warned = 0;
    lis_ctx_opts co = {.warn = warn_once, .warn_arg = &warned};
    lis_ctx *ctx = lis_ctx_new(&co, &err);
    if (!ctx) {
        fprintf(stderr, "bench_setup: %s\n", err.msg);
        return 1;
    }
    const char *ks = getenv("CREATORS") ? getenv("CREATORS") : "1 2 4 8";
    fork_exec();
    round_t r = {.ctx = ctx, .n = n};
    pthread_mutex_init(&r.mu, NULL);
    r.sb = calloc((size_t)n, sizeof *r.sb);
    for (int i = 0; i < 200; i++) /* the input document of scripts/bench-batch.sh */
        snprintf(r.doc + strlen(r.doc), sizeof r.doc - strlen(r.doc), "line %d of the notes\n", i);
    strncat(r.doc, "the needle is here\n", sizeof r.doc - strlen(r.doc) - 1);
    lis_sandbox_spec base = {.rootfs = rootfs, .net = net, .upper = LIS_UPPER_TMPFS};
    const char *modes = getenv("MODES") ? getenv("MODES") : "exec template bwrap";
    if (getenv("UIDMAP") && !strcmp(getenv("UIDMAP"), "single"))
        base.uidmap = LIS_UIDMAP_SINGLE;
    base.limits.memory_bytes = LIS_DEFAULT_MEMORY;

    /* the template: made once per run (its time is the run's, not a sandbox's) */
    lis_sandbox_spec ts = base;
    ts.net = LIS_NET_NONE;
    ts.hostname = "lis-template";
    lis_snapshot_result snap;
    lis_setup_stage stage;
    double t0 = now();
    if (lis_rootfs_snapshot_setup(ctx, &ts, prepare, NULL, &snap, &stage, &err) < 0) {
        fprintf(stderr, "bench_setup: the template (stage %d): %s\n", (int)stage, err.msg);
        return 1;
    }
    printf("template_once_ms %.2f (existed %d)\n", 1000 * (now() - t0), snap.existed);

    for (const char *k = ks; *k;) {
        char *end;
        long kk = strtol(k, &end, 10);
        if (end == k)
            break;
        k = end;
        r.spec = base;
        r.exec_mode = 1;
        if (strstr(modes, "exec"))
            one_round(&r, "exec", (int)kk);
        r.spec.rootfs = snap.rootfs;
        r.exec_mode = 0;
        if (strstr(modes, "template"))
            one_round(&r, "template", (int)kk);
        const char *bottom = strrchr(rootfs, ':'); /* bwrap gets the chain's base */
        if (strstr(modes, "bwrap"))
            bwrap_round(bottom ? bottom + 1 : rootfs, n, (int)kk);
    }
    lis_rootfs_rm(lis_ctx_data_dir(ctx), snap.digest, NULL, &err);
    free(r.sb);
    lis_ctx_free(ctx);
    return 0;
}
