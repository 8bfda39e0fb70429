/* cgroups.c - per-sandbox resource limits on cgroup v2 (delegated, rootless)
 * or, as root on a cgroup v1 host, on v1; accounting and teardown.
 *
 * Layout (v2), under the cgroup we were started in, once it is ours:
 *   <base>/                    cgroup.subtree_control: +memory +pids +cpu
 *   <base>/lis.owner/          the processes that lived in <base> (no internal
 *                              processes allowed once controllers are on)
 *   <base>/lis-<sandbox>/      one per sandbox; PID 1 is cloned into it
 * A process already in .../lis.owner uses its parent as <base>.
 * v1 (root): <own cgroup of each hierarchy>/lis-<sandbox>. */
#include "internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define OWNER_LEAF "lis.owner"
#define SANDBOX_CPU_WEIGHT "10" /* cpu.weight of a sandbox's cgroup; its owner's is 100 */
#define PREFIX "lis-"
#define DEFAULT_MEMORY LIS_DEFAULT_MEMORY
#define DEFAULT_PIDS ((uint64_t)LIS_DEFAULT_PIDS)
#define CPU_PERIOD 100000ull

struct lis_cgroot {
    pthread_mutex_t lock;
    int ready; /* v2: controllers enabled in base */
    lis_cg_info info;
    char v1_mem[PATH_MAX], v1_pids[PATH_MAX], v1_cpu[PATH_MAX]; /* v1: our cgroups */
};

/* ---- small file helpers ---- */

static int wr(const char *dir, const char *file, const char *val)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, val, strlen(val));
    int e = n < 0 ? -errno : 0;
    close(fd);
    return e;
}

static int rd(const char *dir, const char *file, char *buf, size_t len)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, len - 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return -e;
    buf[n] = 0;
    return (int)n;
}

/* A number file ("max" reads as UINT64_MAX); 0 when unreadable. */
static uint64_t rd_u64(const char *dir, const char *file)
{
    char b[64];
    if (rd(dir, file, b, sizeof b) <= 0)
        return 0;
    if (!strncmp(b, "max", 3))
        return UINT64_MAX;
    return strtoull(b, NULL, 10);
}

/* "key value" lines; 0 when absent. */
static uint64_t rd_key(const char *dir, const char *file, const char *key)
{
    char b[4096];
    if (rd(dir, file, b, sizeof b) <= 0)
        return 0;
    size_t kl = strlen(key);
    for (char *l = b; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, key, kl) && l[kl] == ' ')
            return strtoull(l + kl + 1, NULL, 10);
    return 0;
}

static void put_u64(char *buf, size_t len, uint64_t v)
{
    if (v == LIS_UNLIMITED)
        snprintf(buf, len, "max");
    else
        snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* ---- discovery ---- */

/* Mount point of a cgroup hierarchy: cgroup2 (ctrl NULL) or the v1 one
 * carrying controller ctrl. Also returns the mount's root within the
 * hierarchy (for cgroup namespaces). */
static int find_mount(const char *ctrl, char *mnt, size_t mlen, char *mroot, size_t rlen)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char line[4096];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        char root[PATH_MAX], point[PATH_MAX];
        if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2)
            continue;
        char *dash = strstr(line, " - ");
        if (!dash)
            continue;
        char fstype[32], src[256], opts[1024] = "";
        if (sscanf(dash + 3, "%31s %255s %1023s", fstype, src, opts) < 2)
            continue;
        if (ctrl ? strcmp(fstype, "cgroup") : strcmp(fstype, "cgroup2"))
            continue;
        if (ctrl) {
            int has = 0;
            char *save = NULL; /* strtok_r: contexts may probe on several threads at once */
            for (char *t = strtok_r(opts, ",", &save); t && !has; t = strtok_r(NULL, ",", &save))
                has = !strcmp(t, ctrl);
            if (!has)
                continue;
        }
        snprintf(mnt, mlen, "%s", point);
        snprintf(mroot, rlen, "%s", root);
        found = 0;
    }
    fclose(f);
    return found;
}

/* Our cgroup in hierarchy ctrl ("" for v2) from /proc/<pid>/cgroup. */
static int own_cgroup(pid_t pid, const char *ctrl, char *out, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[4096];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = 0;
        const char *list = c1 + 1;
        int match = 0;
        if (!*ctrl) {
            match = !strcmp(line, "0") && !*list;
        } else {
            char tmp[256];
            snprintf(tmp, sizeof tmp, "%s", list);
            char *save = NULL;
            for (char *t = strtok_r(tmp, ",", &save); t && !match; t = strtok_r(NULL, ",", &save))
                match = !strcmp(t, ctrl);
        }
        if (match) {
            snprintf(out, len, "%s", c2 + 1);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* mount point + cgroup path, minus the mount's own root. */
static void join(char *out, size_t len, const char *mnt, const char *mroot, const char *cg)
{
    size_t rl = strlen(mroot);
    if (rl > 1 && !strncmp(cg, mroot, rl) && (cg[rl] == '/' || !cg[rl]))
        cg += rl;
    if (!strcmp(cg, "/"))
        cg = "";
    snprintf(out, len, "%s%s", mnt, cg);
}

static int has_word(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; (p = strstr(p, w)); p += n)
        if ((p == list || p[-1] == ' ') && (!p[n] || isspace((unsigned char)p[n])))
            return 1;
    return 0;
}

static void v1_dir(pid_t pid, const char *ctrl, char *out, size_t len)
{
    char mnt[PATH_MAX], mroot[PATH_MAX], cg[PATH_MAX];
    out[0] = 0;
    if (find_mount(ctrl, mnt, sizeof mnt, mroot, sizeof mroot) == 0 &&
        own_cgroup(pid, ctrl, cg, sizeof cg) == 0)
        join(out, len, mnt, mroot, cg);
}

static void probe(lis_ctx *ctx, lis_cg_info *in, struct lis_cgroot *r)
{
    memset(in, 0, sizeof *in);
    char mnt[PATH_MAX], mroot[PATH_MAX], cg[PATH_MAX], dir[PATH_MAX + 8];
    if (find_mount(NULL, mnt, sizeof mnt, mroot, sizeof mroot) == 0 &&
        own_cgroup(getpid(), "", cg, sizeof cg) == 0) {
        in->unified = 1;
        join(dir, sizeof dir, mnt, mroot, cg);
        const char *slash = strrchr(dir, '/');
        if (slash && !strcmp(slash + 1, OWNER_LEAF))
            dir[slash - dir] = 0;
        snprintf(in->base, sizeof in->base, "%s", dir);
        char b[256] = "";
        rd(in->base, "cgroup.controllers", b, sizeof b);
        b[strcspn(b, "\n")] = 0;
        snprintf(in->controllers, sizeof in->controllers, "%s", b);
        char p1[PATH_MAX + 32], p2[PATH_MAX + 32];
        snprintf(p1, sizeof p1, "%s/cgroup.subtree_control", in->base);
        snprintf(p2, sizeof p2, "%s/cgroup.procs", in->base);
        in->delegated =
            access(in->base, W_OK) == 0 && access(p1, W_OK) == 0 && access(p2, W_OK) == 0;
    }
    char v1mem[PATH_MAX];
    v1_dir(getpid(), "memory", v1mem, sizeof v1mem);
    in->hybrid = v1mem[0] != 0;
    if (in->unified && in->delegated && has_word(in->controllers, "memory") &&
        has_word(in->controllers, "pids")) {
        in->kind = LIS_CG_V2;
        return;
    }
    if (ctx->uid == 0 && v1mem[0] && access(v1mem, W_OK) == 0) {
        in->kind = LIS_CG_V1;
        if (r) {
            snprintf(r->v1_mem, sizeof r->v1_mem, "%s", v1mem);
            v1_dir(getpid(), "pids", r->v1_pids, sizeof r->v1_pids);
            v1_dir(getpid(), "cpu", r->v1_cpu, sizeof r->v1_cpu);
        }
        snprintf(in->base, sizeof in->base, "%s", v1mem);
        return;
    }
    in->kind = LIS_CG_NONE;
    if (!in->unified && !in->hybrid)
        snprintf(in->reason, sizeof in->reason, "no cgroup hierarchy is mounted");
    else if (in->hybrid && !has_word(in->controllers, "memory"))
        snprintf(in->reason, sizeof in->reason,
                 "the memory controller is on cgroup v1 here, which only root can use");
    else if (!in->delegated)
        snprintf(in->reason, sizeof in->reason, "cgroup %s is not delegated to uid %u", in->base,
                 (unsigned)ctx->uid);
    else
        snprintf(in->reason, sizeof in->reason,
                 "the memory/pids controllers are not delegated to %s (it has: %s)", in->base,
                 in->controllers[0] ? in->controllers : "none");
}

void lis_cg_probe(lis_ctx *ctx, lis_cg_info *info) { probe(ctx, info, NULL); }

static struct lis_cgroot *root_get(lis_ctx *ctx)
{
    struct lis_cgroot *r = __atomic_load_n(&ctx->cgroot, __ATOMIC_ACQUIRE);
    if (r)
        return r;
    r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->lock, NULL);
    probe(ctx, &r->info, r);
    struct lis_cgroot *expected = NULL;
    if (!__atomic_compare_exchange_n(&ctx->cgroot, &expected, r, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        pthread_mutex_destroy(&r->lock);
        free(r);
        r = expected;
    }
    return r;
}

void lis_cg_ctx_free(lis_ctx *ctx)
{
    if (ctx && ctx->cgroot) {
        pthread_mutex_destroy(&ctx->cgroot->lock);
        free(ctx->cgroot);
        ctx->cgroot = NULL;
    }
}

/* Moves every process of base into base/lis.owner. */
static int move_to_leaf(const char *base)
{
    char leaf[PATH_MAX + 16];
    snprintf(leaf, sizeof leaf, "%s/%s", base, OWNER_LEAF);
    if (mkdir(leaf, 0755) < 0 && errno != EEXIST)
        return -errno;
    for (int round = 0; round < 20; round++) {
        char buf[65536];
        int n = rd(base, "cgroup.procs", buf, sizeof buf);
        if (n < 0)
            return n;
        if (n == 0)
            return 0;
        for (char *l = buf; *l;) {
            char *nl = strchr(l, '\n');
            if (nl)
                *nl = 0;
            if (*l) {
                int e = wr(leaf, "cgroup.procs", l);
                if (e && e != -ESRCH)
                    return e;
            }
            if (!nl)
                break;
            l = nl + 1;
        }
    }
    return -EBUSY;
}

/* v2: controllers on in base, the owner in a leaf. Under r->lock. */
static int v2_ready(struct lis_cgroot *r, char *why, size_t wlen)
{
    if (r->ready)
        return 0;
    const char *base = r->info.base;
    static const char *const ctl[] = {"memory", "pids", "cpu"};
    for (int pass = 0; pass < 2; pass++) {
        int busy = 0, e = 0;
        for (int i = 0; i < 3; i++) {
            if (!has_word(r->info.controllers, ctl[i]))
                continue;
            char v[16];
            snprintf(v, sizeof v, "+%s", ctl[i]);
            e = wr(base, "cgroup.subtree_control", v);
            if (e == -EBUSY)
                busy = 1;
            else if (e && i < 2) {
                snprintf(why, wlen, "enabling %s in %s/cgroup.subtree_control: %s", ctl[i], base,
                         strerror(-e));
                return -1;
            }
            if (busy)
                break;
        }
        if (!busy) {
            r->ready = 1;
            return 0;
        }
        if (pass == 0 && (e = move_to_leaf(base)) < 0) {
            snprintf(why, wlen, "moving the processes of %s into %s/%s: %s", base, base, OWNER_LEAF,
                     strerror(-e));
            return -1;
        }
    }
    snprintf(why, wlen, "%s keeps processes of its own (cgroup.subtree_control: EBUSY)", base);
    return -1;
}

static void human_limit(uint64_t b, char *out, size_t len)
{
    if (b % (1ull << 30) == 0)
        snprintf(out, len, "%llu GiB", (unsigned long long)(b >> 30));
    else if (b % (1ull << 20) == 0)
        snprintf(out, len, "%llu MiB", (unsigned long long)(b >> 20));
    else
        snprintf(out, len, "%.1f MiB", b / 1048576.0);
}

static int no_limits(const lis_ctx *ctx, const char *name, const lis_limits *lim, const char *why,
                     lis_error *err)
{
    if (lim->require)
        return lis_fail(err, EPERM,
                        "cannot enforce resource limits for sandbox %s: %s (--require-limits "
                        "was given; run `lis doctor` for the fix)",
                        name, why);
    lis_warn(ctx,
             "sandbox %s runs with fallback limits, not cgroups (%s): processes and memory "
             "are bounded by lis itself, CPU only by priority (run `lis doctor`)",
             name, why);
    return 0;
}

void lis_cg_free(lis_cg *cg)
{
    if (!cg)
        return;
    if (cg->fd >= 0)
        close(cg->fd);
    free(cg);
}

static uint64_t pick(uint64_t v, uint64_t dflt) { return v == 0 ? dflt : v; }

int lis_cg_create(lis_ctx *ctx, const char *name, const lis_limits *lim, lis_cg **out,
                  lis_error *err)
{
    *out = NULL;
    struct lis_cgroot *r = root_get(ctx);
    if (!r)
        return lis_oom(err);
    uint64_t mem = pick(lim->memory_bytes, DEFAULT_MEMORY);
    uint64_t pids = pick(lim->pids, DEFAULT_PIDS);
    uint64_t cpu = pick(lim->cpu_millis, LIS_UNLIMITED);
    if (r->info.kind == LIS_CG_NONE)
        return no_limits(ctx, name, lim, r->info.reason, err);
    char why[512] = "";
    if (r->info.kind == LIS_CG_V2) {
        pthread_mutex_lock(&r->lock);
        int rc = v2_ready(r, why, sizeof why);
        pthread_mutex_unlock(&r->lock);
        if (rc < 0)
            return no_limits(ctx, name, lim, why, err);
    }
    lis_cg *cg = calloc(1, sizeof *cg);
    if (!cg)
        return lis_oom(err);
    cg->kind = r->info.kind;
    cg->fd = -1;
    char leaf[LIS_NAME_MAX + 8];
    snprintf(leaf, sizeof leaf, PREFIX "%s", name);
    char v[64];
    const char *missing = NULL;
    if (cg->kind == LIS_CG_V2) {
        snprintf(cg->dir, sizeof cg->dir, "%s/%s", r->info.base, leaf);
        if (mkdir(cg->dir, 0755) < 0 && errno == EEXIST) {
            /* a leftover of a crashed owner: reuse it only when empty */
            if (rd_key(cg->dir, "cgroup.events", "populated") == 0)
                rmdir(cg->dir);
            if (mkdir(cg->dir, 0755) < 0 && errno == EEXIST) {
                lis_fail(err, EEXIST, "cgroup %s is in use by another sandbox named %s", cg->dir,
                         name);
                free(cg);
                return -1;
            }
        }
        cg->fd = open(cg->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cg->fd < 0) {
            int e = errno;
            rmdir(cg->dir);
            free(cg);
            return no_limits(ctx, name, lim, strerror(e), err);
        }
        int e = 0;
        if (mem != LIS_UNLIMITED) {
            put_u64(v, sizeof v, mem - (mem / 64 > (1u << 20) ? mem / 64 : mem / 16));
            wr(cg->dir, "memory.high", v);
            put_u64(v, sizeof v, mem);
            e = wr(cg->dir, "memory.max", v);
            if (!e)
                cg->mem_max = mem;
        }
        wr(cg->dir, "memory.swap.max", "0"); /* absent without swap accounting */
        if (!e && pids != LIS_UNLIMITED) {
            put_u64(v, sizeof v, pids);
            e = wr(cg->dir, "pids.max", v);
        }
        /* The share of a sandbox when CPUs are contended: a tenth of its owner's
         * (lis.owner keeps 100), as the fallback's nice 10 does, so hog sandboxes
         * never starve the owner's loop; sandboxes share equally among themselves
         * (absent without the cpu controller: only --cpus then says so). */
        wr(cg->dir, "cpu.weight", SANDBOX_CPU_WEIGHT);
        if (!e && cpu != LIS_UNLIMITED) {
            snprintf(v, sizeof v, "%llu %llu", (unsigned long long)(cpu * CPU_PERIOD / 1000),
                     (unsigned long long)CPU_PERIOD);
            int ce = wr(cg->dir, "cpu.max", v);
            if (ce == -ENOENT)
                missing = "cpu";
            else
                e = ce;
        }
        if (e) {
            snprintf(why, sizeof why, "writing the limits of %s: %s", cg->dir, strerror(-e));
            lis_cg_remove(cg, NULL);
            return no_limits(ctx, name, lim, why, err);
        }
    } else {
        const char *parents[3] = {r->v1_mem, r->v1_pids, r->v1_cpu};
        char *dirs[3] = {cg->dir, cg->pids_dir, cg->cpu_dir};
        for (int i = 0; i < 3; i++) {
            if (!parents[i][0])
                continue;
            snprintf(dirs[i], PATH_MAX, "%s/%s", parents[i], leaf);
            if (mkdir(dirs[i], 0755) < 0 && errno != EEXIST) {
                snprintf(why, sizeof why, "mkdir %s: %s", dirs[i], strerror(errno));
                dirs[i][0] = 0;
                lis_cg_remove(cg, NULL);
                return no_limits(ctx, name, lim, why, err);
            }
        }
        int e = 0;
        if (mem != LIS_UNLIMITED) {
            put_u64(v, sizeof v, mem);
            /* memsw >= mem: raise memsw first when shrinking, set both */
            wr(cg->dir, "memory.memsw.limit_in_bytes", "-1");
            e = wr(cg->dir, "memory.limit_in_bytes", v);
            wr(cg->dir, "memory.memsw.limit_in_bytes", v);
            if (!e)
                cg->mem_max = mem;
        }
        if (!e && pids != LIS_UNLIMITED) {
            if (!cg->pids_dir[0])
                missing = "pids";
            else {
                put_u64(v, sizeof v, pids);
                e = wr(cg->pids_dir, "pids.max", v);
            }
        }
        if (!e && cpu != LIS_UNLIMITED) {
            if (!cg->cpu_dir[0])
                missing = "cpu";
            else {
                wr(cg->cpu_dir, "cpu.cfs_period_us", "100000");
                snprintf(v, sizeof v, "%llu", (unsigned long long)(cpu * CPU_PERIOD / 1000));
                e = wr(cg->cpu_dir, "cpu.cfs_quota_us", v);
            }
        }
        if (e) {
            snprintf(why, sizeof why, "writing the cgroup v1 limits of %s: %s", leaf, strerror(-e));
            lis_cg_remove(cg, NULL);
            return no_limits(ctx, name, lim, why, err);
        }
    }
    if (missing) {
        snprintf(why, sizeof why,
                 "the %s controller is not available to lis here, so the "
                 "%s limit is not enforced",
                 missing, missing);
        if (lim->require) {
            lis_cg_remove(cg, NULL);
            return no_limits(ctx, name, lim, why, err);
        }
        lis_warn(ctx, "sandbox %s: %s (run `lis doctor`)", name, why);
    }
    *out = cg;
    return 0;
}

int lis_cg_attach(const lis_cg *cg, pid_t pid, lis_error *err)
{
    if (!cg || cg->kind != LIS_CG_V1)
        return 0;
    char v[32];
    snprintf(v, sizeof v, "%d", (int)pid);
    const char *dirs[3] = {cg->dir, cg->pids_dir, cg->cpu_dir};
    for (int i = 0; i < 3; i++) {
        if (!dirs[i][0])
            continue;
        int e = wr(dirs[i], "cgroup.procs", v);
        if (e)
            return lis_fail_errnum(err, -e, "moving sandbox PID 1 into cgroup %s", dirs[i]);
    }
    return 0;
}

static int basename_is_ours(const char *dir)
{
    const char *s = strrchr(dir, '/');
    return s && !strncmp(s + 1, PREFIX, strlen(PREFIX));
}

lis_cg *lis_cg_of_pid(lis_ctx *ctx, pid_t pid)
{
    struct lis_cgroot *r = root_get(ctx);
    if (!r || r->info.kind == LIS_CG_NONE)
        return NULL;
    lis_cg *cg = calloc(1, sizeof *cg);
    if (!cg)
        return NULL;
    cg->kind = r->info.kind;
    cg->fd = -1;
    if (cg->kind == LIS_CG_V2) {
        char mnt[PATH_MAX], mroot[PATH_MAX], path[PATH_MAX];
        if (find_mount(NULL, mnt, sizeof mnt, mroot, sizeof mroot) == 0 &&
            own_cgroup(pid, "", path, sizeof path) == 0)
            join(cg->dir, sizeof cg->dir, mnt, mroot, path);
        if (cg->dir[0] && basename_is_ours(cg->dir)) {
            uint64_t m = rd_u64(cg->dir, "memory.max");
            cg->mem_max = m == UINT64_MAX ? 0 : m;
            return cg;
        }
    } else {
        v1_dir(pid, "memory", cg->dir, sizeof cg->dir);
        v1_dir(pid, "pids", cg->pids_dir, sizeof cg->pids_dir);
        v1_dir(pid, "cpu", cg->cpu_dir, sizeof cg->cpu_dir);
        if (!basename_is_ours(cg->pids_dir))
            cg->pids_dir[0] = 0;
        if (!basename_is_ours(cg->cpu_dir))
            cg->cpu_dir[0] = 0;
        if (cg->dir[0] && basename_is_ours(cg->dir)) {
            uint64_t m = rd_u64(cg->dir, "memory.limit_in_bytes");
            cg->mem_max = m >= (1ull << 62) ? 0 : m;
            return cg;
        }
    }
    free(cg);
    return NULL;
}

static void kill_tasks(const char *dir)
{
    char buf[65536];
    if (rd(dir, "cgroup.procs", buf, sizeof buf) <= 0)
        return;
    char *save = NULL;
    for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        kill((pid_t)atoi(l), SIGKILL);
}

void lis_cg_kill(const lis_cg *cg)
{
    if (!cg)
        return;
    if (cg->kind == LIS_CG_V2 && wr(cg->dir, "cgroup.kill", "1") == 0)
        return;
    /* v1, or v2 before Linux 5.14 */
    kill_tasks(cg->dir);
    if (cg->kind == LIS_CG_V1)
        kill_tasks(cg->pids_dir);
}

static int empty(const char *dir, int v2)
{
    char b[64];
    if (v2) {
        char ev[256];
        if (rd(dir, "cgroup.events", ev, sizeof ev) < 0)
            return 1;
        return strstr(ev, "populated 0") != NULL;
    }
    return rd(dir, "cgroup.procs", b, sizeof b) <= 0;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int rm_cgroup(const char *dir, int v2)
{
    if (!dir[0])
        return 0;
    /* the tasks of a dying pid namespace leave within milliseconds */
    for (int i = 0; i < 500 && !empty(dir, v2); i++)
        nap_ms(i < 50 ? 1 : 10);
    for (int i = 0; i < 50; i++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY)
            break;
        nap_ms(10);
    }
    return -errno;
}

void lis_cg_stats(const lis_cg *cg, lis_stats *st)
{
    if (!cg)
        return;
    st->limits_enforced = 1;
    if (cg->kind == LIS_CG_V2) {
        st->memory_bytes = rd_u64(cg->dir, "memory.current");
        st->memory_peak = rd_u64(cg->dir, "memory.peak");
        st->oom_kills = rd_key(cg->dir, "memory.events", "oom_kill");
        uint64_t us = rd_key(cg->dir, "cpu.stat", "usage_usec");
        if (us)
            st->cpu_seconds = (double)us / 1e6;
        uint64_t n = rd_u64(cg->dir, "pids.current");
        if (n)
            st->nprocs = n;
    } else {
        st->memory_bytes = rd_u64(cg->dir, "memory.usage_in_bytes");
        st->memory_peak = rd_u64(cg->dir, "memory.max_usage_in_bytes");
        st->oom_kills = rd_key(cg->dir, "memory.oom_control", "oom_kill");
        if (cg->pids_dir[0]) {
            uint64_t n = rd_u64(cg->pids_dir, "pids.current");
            if (n)
                st->nprocs = n;
        }
    }
}

int lis_cg_remove(lis_cg *cg, lis_stats *st)
{
    if (!cg)
        return 0;
    if (cg->fd >= 0) {
        close(cg->fd);
        cg->fd = -1;
    }
    int v2 = cg->kind == LIS_CG_V2;
    /* the counters are gone with the directory: read them first */
    if (!empty(cg->dir, v2))
        lis_cg_kill(cg);
    if (st)
        lis_cg_stats(cg, st);
    int e = rm_cgroup(cg->dir, v2);
    if (!v2) {
        int e2 = rm_cgroup(cg->pids_dir, 0), e3 = rm_cgroup(cg->cpu_dir, 0);
        e = e ? e : e2 ? e2 : e3;
    }
    lis_cg_free(cg);
    return e;
}

void lis_cg_pid_stats(lis_ctx *ctx, pid_t pid, lis_stats *st)
{
    lis_cg *cg = lis_cg_of_pid(ctx, pid);
    if (cg) {
        lis_cg_stats(cg, st);
        lis_cg_free(cg);
    }
}

/* Empty lis-* cgroups under parent, older than 2 s (younger ones may be
 * sandboxes being created right now). */
static int gc_dir(const char *parent, int v2)
{
    if (!parent[0])
        return 0;
    DIR *d = opendir(parent);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    time_t now = time(NULL);
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, PREFIX, strlen(PREFIX)) || e->d_type != DT_DIR)
            continue;
        char dir[PATH_MAX + 300];
        snprintf(dir, sizeof dir, "%s/%s", parent, e->d_name);
        struct stat st;
        if (stat(dir, &st) < 0 || now - st.st_ctime < 2 || !empty(dir, v2))
            continue;
        if (rmdir(dir) == 0)
            n++;
    }
    closedir(d);
    return n;
}

int lis_cg_gc(lis_ctx *ctx, int *removed)
{
    *removed = 0;
    struct lis_cgroot *r = root_get(ctx);
    if (!r)
        return 0;
    if (r->info.kind == LIS_CG_V2)
        *removed = gc_dir(r->info.base, 1);
    else if (r->info.kind == LIS_CG_V1)
        *removed = gc_dir(r->v1_mem, 0) + gc_dir(r->v1_pids, 0) + gc_dir(r->v1_cpu, 0);
    return 0;
}

/* ---- per command ---- */

void lis_cg_cmd_begin(const lis_cg *cg, lis_cg_mark *m)
{
    memset(m, 0, sizeof *m);
    m->peak_fd = -1;
    if (!cg)
        return;
    if (cg->kind == LIS_CG_V2) {
        m->oom0 = rd_key(cg->dir, "memory.events", "oom_kill");
        /* Linux >= 6.12: a write resets the peak seen through this fd */
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, "%s/memory.peak", cg->dir);
        int fd = open(p, O_RDWR | O_CLOEXEC);
        if (fd >= 0 && write(fd, "reset", 5) == 5)
            m->peak_fd = fd;
        else if (fd >= 0)
            close(fd);
        if (m->peak_fd < 0)
            m->peak0 = rd_u64(cg->dir, "memory.peak");
    } else {
        m->oom0 = rd_key(cg->dir, "memory.oom_control", "oom_kill");
        wr(cg->dir, "memory.max_usage_in_bytes", "0"); /* v1: resettable */
    }
}

void lis_cg_cmd_end(const lis_cg *cg, lis_cg_mark *m, lis_result *res)
{
    if (!cg) {
        if (m->peak_fd >= 0)
            close(m->peak_fd);
        m->peak_fd = -1;
        return;
    }
    uint64_t oom;
    if (cg->kind == LIS_CG_V2) {
        oom = rd_key(cg->dir, "memory.events", "oom_kill");
        if (m->peak_fd >= 0) {
            char b[64];
            ssize_t n = pread(m->peak_fd, b, sizeof b - 1, 0);
            b[n > 0 ? n : 0] = 0;
            res->memory_peak = strtoull(b, NULL, 10);
            close(m->peak_fd);
            m->peak_fd = -1;
        } else {
            /* before 6.12 the peak cannot be reset: the sandbox's peak so far */
            res->memory_peak = rd_u64(cg->dir, "memory.peak");
        }
    } else {
        oom = rd_key(cg->dir, "memory.oom_control", "oom_kill");
        res->memory_peak = rd_u64(cg->dir, "memory.max_usage_in_bytes");
    }
    res->oom_killed = oom > m->oom0;
    if (res->oom_killed && !res->timed_out && !res->exec_failed &&
        (res->signal == SIGKILL || res->exit_code != 0)) {
        char lim[32] = "?";
        if (cg->mem_max)
            human_limit(cg->mem_max, lim, sizeof lim);
        snprintf(res->err_msg, sizeof res->err_msg, "killed: out of memory (limit %s)", lim);
    }
}

/* cgroup v2 freezer: write cgroup.freeze, then wait for cgroup.events to
 * say "frozen 1" (the kernel stops the tasks asynchronously). */
int lis_cg_freeze(const lis_cg *cg, int on, lis_error *err)
{
    if (!cg || cg->kind != LIS_CG_V2 || !cg->dir[0])
        return 0;
    int e = wr(cg->dir, "cgroup.freeze", on ? "1" : "0");
    if (e)
        return lis_fail_errnum(err, -e, "writing %s/cgroup.freeze", cg->dir);
    if (!on) /* thawing takes effect at once; nothing to wait for */
        return 1;
    /* usually frozen at once: look first, then at growing intervals (0.1 ms
     * doubling to 5 ms), at most ~5 s in all */
    long wait_us = 100, total_us = 0;
    while (total_us < 5000000) {
        char ev[256];
        if (rd(cg->dir, "cgroup.events", ev, sizeof ev) < 0)
            break;
        if (strstr(ev, "frozen 1"))
            return 1;
        struct timespec ts = {0, wait_us * 1000};
        nanosleep(&ts, NULL);
        total_us += wait_us;
        wait_us = wait_us < 5000 ? wait_us * 2 : 5000;
    }
    wr(cg->dir, "cgroup.freeze", "0");
    return lis_fail(err, ETIMEDOUT, "cgroup %s did not freeze within 5 s (thawed again)", cg->dir);
}
