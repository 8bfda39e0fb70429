/* util.c - the bottom of runtime/: small helpers that need no context and
 * use nothing of runtime/ but lis_fail (error.c): clocks, names, paths,
 * mkdir -p, sysctl reads, growing arrays, K=V lists (rm -rf is rmtree.c). */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double lis_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

double lis_wallclock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int lis_grow(void *arrp, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 16;
    while (nc < need && nc <= SIZE_MAX / 2)
        nc *= 2;
    if (nc < need || nc > SIZE_MAX / elem) {
        errno = ENOMEM;
        return -1;
    }
    void *old; /* arrp points at a T *: read and write it as bytes (no aliasing games) */
    memcpy(&old, arrp, sizeof old);
    void *grown = realloc(old, nc * elem);
    if (!grown) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(arrp, &grown, sizeof grown);
    *cap = nc;
    return 0;
}

char **lis_env_merge(const char *const *base, const char *const *extra)
{
    size_t nb = 0, ne = 0;
    while (base && base[nb])
        nb++;
    while (extra && extra[ne])
        ne++;
    char **out = calloc(nb + ne + 1, sizeof *out);
    if (!out)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < nb + ne; i++) {
        const char *kv = i < nb ? base[i] : extra[i - nb];
        const char *eq = strchr(kv, '=');
        if (!eq || eq == kv)
            continue;
        size_t klen = (size_t)(eq - kv) + 1;
        size_t j = 0;
        while (j < n && strncmp(out[j], kv, klen) != 0)
            j++;
        char *dup = strdup(kv);
        if (!dup) { /* nothing half-made */
            lis_env_free(out);
            return NULL;
        }
        if (j < n) {
            free(out[j]);
            out[j] = dup;
        } else {
            out[n++] = dup;
        }
    }
    return out;
}

void lis_env_free(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

int lis_valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > LIS_NAME_MAX || name[0] == '.' || name[0] == '-')
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '.' || *p == '-'))
            return 0;
    return 1;
}

int lis_mkdir_p(const char *path, unsigned mode, lis_error *err)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return lis_fail(err, ENAMETOOLONG, "path too long: %s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return lis_fail_errno(err, "mkdir %s", buf);
            *p = c;
            if (!c)
                break;
        }
    }
    return 0;
}

int lis_host_mkdir_p(const char *path, unsigned mode, lis_error *err)
{
    return lis_mkdir_p(path, mode, err);
}

int lis_path_check(const char *path, lis_error *err)
{
    if (!path || path[0] != '/')
        return lis_fail(err, EINVAL, "path '%s' must be absolute", path ? path : "");
    if (strlen(path) >= PATH_MAX)
        return lis_fail(err, ENAMETOOLONG, "path too long");
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        const char *e = strchrnul(p, '/');
        if (e - p == 2 && p[0] == '.' && p[1] == '.')
            return lis_fail(err, EPERM, "path '%s' may not contain '..'", path);
        p = e;
    }
    return 0;
}

long lis_read_long(const char *path, long dflt)
{
    FILE *f = fopen(path, "re");
    long v = dflt;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = dflt;
        fclose(f);
    }
    return v;
}

long lis_read_sysctl(const char *proc_sys, const char *name, long dflt)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", proc_sys ? proc_sys : "/proc/sys", name);
    return lis_read_long(path, dflt);
}

int lis_apparmor_restricts_userns(const char *proc_sys)
{
    return lis_read_sysctl(proc_sys, "kernel/apparmor_restrict_unprivileged_userns", 0) == 1;
}

int lis_host_cpu(uint64_t *busy, uint64_t *total)
{
    FILE *f = fopen("/proc/stat", "re");
    unsigned long long v[8] = {0};
    int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                       &v[4], &v[5], &v[6], &v[7])
              : 0;
    if (f)
        fclose(f);
    if (n < 5)
        return -1;
    /* user nice system idle iowait irq softirq steal: idle and iowait are idle */
    *total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
    *busy = *total - v[3] - v[4];
    return 0;
}

char *lis_proc_stat(pid_t pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the name may hold spaces and ')' */
    return p && p[1] == ' ' ? p + 2 : NULL;
}

/* Every process of the namespace by a scan of all of /proc: what a kernel
 * without /proc/PID/task/TID/children leaves (milliseconds on a host of
 * thousands of processes). */
static int pidns_scan(const char *want, int (*fn)(pid_t pid, const char *stat, void *arg),
                      void *arg)
{
    char link[64], path[64];
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/ns/pid", e->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        if (strcmp(link, want))
            continue;
        char buf[1024];
        pid_t pid = (pid_t)atoi(e->d_name);
        const char *st = lis_proc_stat(pid, buf, sizeof buf);
        if (st)
            rc = fn(pid, st, arg);
    }
    closedir(d);
    return rc;
}

#define PIDNS_MAX 65536 /* processes walked in one namespace */

/* Appends the children of every thread of pid to *v (n, cap). */
static int add_children(pid_t pid, pid_t **v, size_t *n, size_t *cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 0; /* gone meanwhile */
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char cp[96], small[4096], *buf = small;
        snprintf(cp, sizeof cp, "/proc/%d/task/%s/children", (int)pid, e->d_name);
        int fd = open(cp, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        /* the whole list, however long (a fork bomb's orphans are all init's) */
        size_t len = 0, bcap = sizeof small;
        ssize_t got;
        while ((got = read(fd, buf + len, bcap - 1 - len)) > 0) {
            len += (size_t)got;
            if (len + 1 < bcap || bcap >= (size_t)PIDNS_MAX * 8)
                continue;
            char *nb = malloc(2 * bcap);
            if (!nb)
                break;
            memcpy(nb, buf, len);
            if (buf != small)
                free(buf);
            buf = nb;
            bcap *= 2;
        }
        close(fd);
        buf[len] = 0;
        for (char *p = buf, *q; *p; p = q) {
            long c = strtol(p, &q, 10);
            if (q == p)
                break;
            if (c <= 0 || *n >= PIDNS_MAX)
                continue;
            if (*n == *cap) {
                size_t nc = *cap ? 2 * *cap : 64;
                pid_t *nv = realloc(*v, nc * sizeof *nv);
                if (!nv) {
                    if (buf != small)
                        free(buf);
                    closedir(d);
                    return -ENOMEM;
                }
                *v = nv;
                *cap = nc;
            }
            (*v)[(*n)++] = (pid_t)c;
        }
        if (buf != small)
            free(buf);
    }
    closedir(d);
    return 0;
}

int lis_pidns_each(pid_t pid1, int (*fn)(pid_t pid, const char *stat, void *arg), void *arg)
{
    char want[64], link[64], path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid1);
    ssize_t n = readlink(path, want, sizeof want - 1);
    if (n <= 0)
        return -errno;
    want[n] = 0;
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid1, (int)pid1);
    if (access(path, R_OK) != 0)
        return pidns_scan(want, fn, arg);
    /* down from pid1: the namespace's orphans are its init's children, so
     * every process of it is below pid1, and the walk costs what the sandbox
     * has, not what the host has */
    pid_t *v = malloc(64 * sizeof *v);
    size_t nv = 0, cap = 64;
    if (!v)
        return -ENOMEM;
    v[nv++] = pid1;
    int rc = 0;
    while (!rc && nv) {
        pid_t pid = v[--nv];
        snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
        n = readlink(path, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        if (strcmp(link, want)) /* a nested namespace: not this one's, nor its children */
            continue;
        char buf[1024];
        const char *st = lis_proc_stat(pid, buf, sizeof buf);
        if (st)
            rc = fn(pid, st, arg);
        if (!rc)
            rc = add_children(pid, &v, &nv, &cap);
    }
    free(v);
    return rc;
}
