/* bench_api - runtime measurements through the C API (used by scripts/bench-runtime.sh).
 *
 *   bench_api cold ROOTFS N        create + exec /bin/true + destroy, N times: phase medians
 *   bench_api warm ROOTFS N        N execs of /bin/true in one sandbox: median and p90
 *   bench_api density ROOTFS N     N idle sandboxes: creation time, memory per sandbox
 *   bench_api pool ROOTFS N        take a sandbox from a pre-warmed pool of N: median
 *
 * Prints "key value" lines. */
#include "lis.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[(int)((n - 1) * p)];
}

static void die(const char *what, lis_error *e)
{
    fprintf(stderr, "bench_api: %s: %s\n", what, e->msg);
    exit(1);
}

static long meminfo(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long v = -1;
    size_t k = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && line[k] == ':')
            v = atol(line + k + 1);
    if (f)
        fclose(f);
    return v;
}

/* Sum of Pss (kB) of every process in the pid namespaces of the sandboxes. */
static long pss_of(lis_sandbox **sb, int n)
{
    long total = 0;
    char want[64], link[64], path[300];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)lis_sandbox_pid(sb[i]));
        ssize_t l = readlink(path, want, sizeof want - 1);
        if (l <= 0)
            continue;
        want[l] = 0;
        /* PID 1 and any process of the same namespace */
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] < '1' || e->d_name[0] > '9')
                continue;
            snprintf(path, sizeof path, "/proc/%s/ns/pid", e->d_name);
            l = readlink(path, link, sizeof link - 1);
            if (l <= 0)
                continue;
            link[l] = 0;
            if (strcmp(link, want))
                continue;
            snprintf(path, sizeof path, "/proc/%s/smaps_rollup", e->d_name);
            FILE *f = fopen(path, "r");
            char line[256];
            while (f && fgets(line, sizeof line, f))
                if (!strncmp(line, "Pss:", 4))
                    total += atol(line + 4);
            if (f)
                fclose(f);
        }
        if (d)
            closedir(d);
    }
    return total;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: bench_api cold|warm|density|pool ROOTFS N\n");
        return 2;
    }
    const char *mode = argv[1], *rootfs = argv[2];
    int n = atoi(argv[3]);
    lis_error err = {0};
    lis_ctx *ctx = lis_ctx_new(NULL, &err);
    if (!ctx)
        die("context", &err);
    lis_sandbox_spec spec = {.rootfs = rootfs, .upper = LIS_UPPER_TMPFS};
    const char *um = getenv("LIS_BENCH_UIDMAP");
    if (um && !strcmp(um, "single"))
        spec.uidmap = LIS_UIDMAP_SINGLE;
    const char *argv_true[] = {"/bin/true", NULL};
    lis_exec_spec ex = {.argv = argv_true};
    lis_result r;
    double *t = calloc((size_t)n, sizeof *t);

    if (!strcmp(mode, "cold")) {
        double *c = calloc((size_t)n, sizeof *c), *e = calloc((size_t)n, sizeof *e),
               *d = calloc((size_t)n, sizeof *d);
        for (int i = 0; i < n; i++) {
            lis_sandbox *sb;
            double t0 = now();
            if (lis_sandbox_create(ctx, &spec, &sb, &err) < 0)
                die("create", &err);
            double t1 = now();
            if (lis_exec(sb, &ex, &r, &err) < 0 || r.exit_code)
                die("exec", &err);
            double t2 = now();
            if (lis_sandbox_destroy(sb, &err) < 0)
                die("destroy", &err);
            double t3 = now();
            c[i] = t1 - t0, e[i] = t2 - t1, d[i] = t3 - t2, t[i] = t3 - t0;
        }
        printf("cold_total_ms %.3f\ncold_create_ms %.3f\ncold_exec_ms %.3f\ncold_destroy_ms %.3f\n",
               pct(t, n, .5) * 1e3, pct(c, n, .5) * 1e3, pct(e, n, .5) * 1e3, pct(d, n, .5) * 1e3);
    } else if (!strcmp(mode, "warm")) {
        lis_sandbox *sb;
        if (lis_sandbox_create(ctx, &spec, &sb, &err) < 0)
            die("create", &err);
        for (int i = 0; i < n; i++) {
            double t0 = now();
            if (lis_exec(sb, &ex, &r, &err) < 0 || r.exit_code)
                die("exec", &err);
            t[i] = now() - t0;
        }
        printf("warm_exec_median_ms %.3f\nwarm_exec_p90_ms %.3f\n", pct(t, n, .5) * 1e3,
               pct(t, n, .9) * 1e3);
        lis_sandbox_destroy(sb, &err);
    } else if (!strcmp(mode, "density")) {
        lis_sandbox **sb = calloc((size_t)n, sizeof *sb);
        sync();
        sleep(1);
        static const char *const keys[] = {"MemAvailable", "Slab",      "PageTables", "KernelStack",
                                           "Shmem",        "AnonPages", "Percpu"};
        long before[7];
        for (int k = 0; k < 7; k++)
            before[k] = meminfo(keys[k]);
        long avail0 = before[0];
        double t0 = now();
        int made = 0;
        for (; made < n; made++)
            if (lis_sandbox_create(ctx, &spec, &sb[made], &err) < 0) {
                fprintf(stderr, "bench_api: sandbox %d: %s\n", made, err.msg);
                break;
            }
        double dt = now() - t0;
        sleep(2);
        long avail1 = meminfo("MemAvailable");
        for (int k = 1; k < 7 && made; k++)
            printf("density_%s_kb_per_sandbox %.1f\n", keys[k],
                   (double)(meminfo(keys[k]) - before[k]) / made);
        long pss = pss_of(sb, made);
        printf("density_started %d\ndensity_wanted %d\ndensity_create_s %.3f\n"
               "density_memavailable_drop_mb_per_sandbox %.3f\ndensity_pss_mb_per_sandbox %.3f\n",
               made, n, dt, made ? (avail0 - avail1) / 1024.0 / made : 0,
               made ? pss / 1024.0 / made : 0);
        if (getenv("LIS_BENCH_HOLD"))
            sleep((unsigned)atoi(getenv("LIS_BENCH_HOLD")));
        double d0 = now();
        for (int i = 0; i < made; i++)
            lis_sandbox_destroy(sb[i], &err);
        printf("density_destroy_s %.3f\n", now() - d0);
    } else if (!strcmp(mode, "pool")) {
        lis_pool *pool = lis_pool_new(ctx, &spec, 4, &err);
        if (!pool)
            die("pool", &err);
        for (int i = 0; i < n; i++) {
            while (lis_pool_ready(pool) < 4)
                usleep(1000); /* measure a take from a warm pool */
            lis_sandbox *sb;
            double t0 = now();
            if (lis_pool_take(pool, &sb, &err) < 0)
                die("take", &err);
            t[i] = now() - t0;
            lis_sandbox_destroy(sb, &err);
        }
        printf("pool_take_median_ms %.4f\npool_take_p90_ms %.4f\n", pct(t, n, .5) * 1e3,
               pct(t, n, .9) * 1e3);
        lis_pool_free(pool);
    } else {
        fprintf(stderr, "bench_api: unknown mode %s\n", mode);
        return 2;
    }
    lis_ctx_free(ctx);
    return 0;
}
