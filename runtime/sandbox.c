/* sandbox.c - sandbox lifecycle: create, open, destroy, list, gc, stats.
 *
 * State of a sandbox that has any (persistent, or with a disk upper layer):
 *   <run_dir>/<name>/meta.json   who it is (pid + start time guard pid reuse)
 *   <run_dir>/<name>/ctl.sock    persistent only: command connections
 *   <data_dir>/sandboxes/<name>/{upper,work}   the copy-on-write layer */
#include "internal.h"
#include "proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const default_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=/root",
    "TERM=xterm",
    "LANG=C.UTF-8",
    NULL,
};

static void sandbox_free(lis_sandbox *sb)
{
    if (!sb)
        return;
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    if (sb->life_fd >= 0)
        close(sb->life_fd);
    if (sb->root_fd >= 0)
        close(sb->root_fd);
    if (sb->ext_release) /* the layer above first (net/: stops serving it) */
        sb->ext_release(sb->ext);
    if (sb->listener_fd >= 0)
        close(sb->listener_fd);
    if (sb->monitor_fd >= 0)
        close(sb->monitor_fd);
    lis_cg_free(sb->cg);
    lis_env_free(sb->env);
    free(sb);
}

static lis_sandbox *sandbox_alloc(lis_ctx *ctx)
{
    lis_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb)
        return NULL;
    sb->ctx = ctx;
    sb->pidfd = sb->life_fd = sb->root_fd = sb->listener_fd = sb->scratch_fd = -1;
    sb->monitor_fd = -1;
    return sb;
}

static int listen_socket(const char *path, lis_error *err)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return lis_fail(err, ENAMETOOLONG,
                        "socket path too long: %s (use a shorter "
                        "XDG_RUNTIME_DIR)",
                        path);
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return lis_fail_errno(err, "socket");
    unlink(path);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 256) < 0) {
        int e = errno;
        close(fd);
        return lis_fail_errnum(err, e, "listening on %s", path);
    }
    return fd;
}

static void random_name(char *out, size_t len)
{
    unsigned char r[5];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        memset(r, 0, sizeof r);
    snprintf(out, len, "lis-%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4]);
}

static int remove_state(lis_ctx *ctx, const char *state_dir, const char *layer_dir, int full_map,
                        lis_error *err)
{
    int rc = 0;
    if (layer_dir && *layer_dir && lis_rmtree(ctx, layer_dir, full_map, err) < 0)
        rc = -1;
    if (state_dir && *state_dir) {
        lis_error e2;
        if (lis_rmtree(ctx, state_dir, 0, rc ? &e2 : err) < 0)
            rc = -1;
    }
    return rc;
}

/* A lower layer owned by ids this sandbox does not map (a root-owned
 * debootstrap run by an ordinary user) starts, but writes into its
 * directories fail inside: say so once per context, with the fix. */
static void warn_unmapped_owner(lis_ctx *ctx, const char *rootfs, int full_map)
{
    struct stat st;
    if (ctx->uid == 0 || stat(rootfs, &st) < 0)
        return;
    int mapped = st.st_uid == ctx->uid || (full_map && st.st_uid >= ctx->subuid.start &&
                                           st.st_uid - ctx->subuid.start < ctx->subuid.count);
    if (mapped || __atomic_exchange_n(&ctx->warned_unmapped, 1, __ATOMIC_RELAXED))
        return;
    lis_warn(ctx,
             "rootfs %s is owned by uid %u, which is not mapped in the sandbox: lis starts "
             "it, but writes into its directories (apt, pip into /usr) fail inside; make it yours "
             "with `lis rootfs import` of a tarball of it (sudo tar -C DIR -czf img.tgz .) or "
             "give your user a subordinate id range in /etc/subuid and /etc/subgid",
             rootfs, (unsigned)st.st_uid);
}

/* spec.rootfs, a directory or a chain "top:...:base", with each directory
 * made absolute and checked. */
static int resolve_chain(const char *in, char *out, size_t len, lis_error *err)
{
    size_t used = 0;
    int n = 0;
    out[0] = 0;
    for (const char *s = in;;) {
        const char *colon = strchr(s, ':');
        size_t l = colon ? (size_t)(colon - s) : strlen(s);
        char one[PATH_MAX], real[PATH_MAX];
        if (!l || l >= sizeof one)
            return lis_fail(err, EINVAL, "rootfs '%s': an empty or too long layer", in);
        if (++n > LIS_MAX_LAYERS)
            return lis_fail(err, E2BIG, "rootfs '%s': more than %d layers", in, LIS_MAX_LAYERS);
        memcpy(one, s, l);
        one[l] = 0;
        struct stat st;
        if (!realpath(one, real) || stat(real, &st) < 0)
            return lis_fail_errno(err, "rootfs %s", one);
        if (!S_ISDIR(st.st_mode))
            return lis_fail(err, ENOTDIR, "rootfs %s is not a directory", one);
        if (strpbrk(real, ":,\\"))
            return lis_fail(err, EINVAL,
                            "rootfs %s: overlayfs cannot take a path with ':', ',' "
                            "or '\\'",
                            real);
        size_t rl = strlen(real);
        if (used + rl + 2 > len)
            return lis_fail(err, ENAMETOOLONG, "rootfs '%s': the chain is too long", in);
        if (used)
            out[used++] = ':';
        memcpy(out + used, real, rl + 1);
        used += rl;
        if (!colon)
            return 0;
        s = colon + 1;
    }
}

/* The spec checked before anything is made: the root chain resolved into
 * rootfs, the name, the uid map (*full_map: whether this sandbox gets the
 * full one), and the options that exclude each other. */
static int spec_check(lis_ctx *ctx, const lis_sandbox_spec *spec, char *rootfs, size_t len,
                      int *full_map, lis_error *err)
{
    if (!spec->rootfs || !*spec->rootfs)
        return lis_fail(err, EINVAL, "no root filesystem given (--rootfs DIR or --image NAME)");
    if (resolve_chain(spec->rootfs, rootfs, len, err) < 0)
        return -1;
    if (spec->name && !lis_valid_name(spec->name))
        return lis_fail(err, EINVAL,
                        "invalid sandbox name '%s': use 1-64 of [A-Za-z0-9_.-], "
                        "not starting with '.' or '-'",
                        spec->name);
    if (lis_ctx_prepare_spawn(ctx, err) < 0)
        return -1;
    int can_full = ctx->uid == 0 || (ctx->newuidmap[0] && ctx->subuid.count && ctx->subgid.count);
    if (spec->uidmap == LIS_UIDMAP_FULL && !can_full)
        return lis_fail(err, ENOENT,
                        "a full uid map needs newuidmap/newgidmap (package uidmap) "
                        "and ranges for uid %u in /etc/subuid and /etc/subgid",
                        (unsigned)ctx->uid);
    *full_map = spec->uidmap != LIS_UIDMAP_SINGLE && can_full;
    if (spec->persist && spec->upper == LIS_UPPER_TMPFS)
        return lis_fail(err, EINVAL,
                        "a persistent sandbox keeps its files on disk: do not ask "
                        "for a tmpfs upper layer");
    if (spec->monitor > (LIS_MONITOR_EXEC | LIS_MONITOR_CONNECT))
        return lis_fail(err, EINVAL, "unknown monitor bits %#x", spec->monitor);
    if (spec->monitor && spec->persist)
        return lis_fail(err, EINVAL,
                        "a monitored sandbox cannot persist: its seccomp listener dies with "
                        "its owner (docs/monitoring.md)");
    if ((spec->exec_allow || spec->write_allow) && !lis_landlock_abi())
        return lis_fail(err, EOPNOTSUPP,
                        "an exec or write allow-list needs Landlock (Linux 5.13+, enabled in the "
                        "LSM list): this kernel has none (lis doctor)");
    if (spec->listen_port && spec->net == LIS_NET_HOST)
        return lis_fail(err, EINVAL,
                        "a listener inside the sandbox (listen_port) needs a network "
                        "namespace of its own: not with the host network");
    if (spec->net == LIS_NET_PROXY && !spec->listen_port)
        return lis_fail(err, EINVAL,
                        "--net proxy: the sandbox needs the proxy's listener "
                        "(listen_port); create it with lis_net_sandbox_create (net/lis_net.h)");
    return 0;
}

/* What a sandbox keeps outside: its state dir <run_dir>/<name> (persistent,
 * or with a disk upper layer: it is the claim on the name), the disk layer
 * <data_dir>/sandboxes/<name>/{upper,work}, and a persistent one's control
 * socket (*listen_fd). On failure what was made is left to the caller. */
static int state_make(lis_sandbox *sb, const lis_sandbox_spec *spec, int *listen_fd, lis_error *err)
{
    lis_ctx *ctx = sb->ctx;
    if (spec->persist || spec->upper == LIS_UPPER_DISK) {
        snprintf(sb->state_dir, sizeof sb->state_dir, "%s/%s", ctx->run_dir, sb->name);
        if (mkdir(sb->state_dir, 0700) < 0) {
            int e = errno;
            sb->state_dir[0] = 0;
            if (e == EEXIST)
                return lis_fail(err, e, "a sandbox named '%s' already exists (lis sandbox rm %s)",
                                spec->name ? spec->name : "", spec->name ? spec->name : "");
            return lis_fail_errnum(err, e, "mkdir %s/%s", ctx->run_dir, sb->name);
        }
    }
    if (spec->upper == LIS_UPPER_DISK) {
        char upper[PATH_MAX + 16], work[PATH_MAX + 16];
        snprintf(sb->layer_dir, sizeof sb->layer_dir, "%s/sandboxes/%s", ctx->data_dir, sb->name);
        snprintf(upper, sizeof upper, "%s/upper", sb->layer_dir);
        snprintf(work, sizeof work, "%s/work", sb->layer_dir);
        lis_error ignore;
        lis_rmtree(ctx, sb->layer_dir, 1, &ignore); /* a leftover of a crashed sandbox */
        if (lis_mkdir_p(upper, 0755, err) < 0 || lis_mkdir_p(work, 0700, err) < 0)
            return -1;
    }
    if (spec->persist) {
        snprintf(sb->ctl_path, sizeof sb->ctl_path, "%s/ctl.sock", sb->state_dir);
        if ((*listen_fd = listen_socket(sb->ctl_path, err)) < 0)
            return -1;
    }
    return 0;
}

/* Starts PID 1 (spawn.c) in sb's cgroup, with the fallback limits when it
 * has none (docs/cgroups.md). */
static int sandbox_spawn(lis_sandbox *sb, const lis_sandbox_spec *spec, int listen_fd,
                         lis_error *err)
{
    char upper[PATH_MAX + 16], work[PATH_MAX + 16];
    int disk = spec->upper == LIS_UPPER_DISK;
    snprintf(upper, sizeof upper, "%s/upper", sb->layer_dir);
    snprintf(work, sizeof work, "%s/work", sb->layer_dir);
    lis_spawn_req req = {
        .spec = spec,
        .name = sb->name,
        .rootfs = sb->rootfs,
        .upper_dir = disk ? upper : NULL,
        .work_dir = disk ? work : NULL,
        .listen_fd = listen_fd,
        .full_map = sb->full_map,
        .cg = sb->cg,
        .listener_fd = &sb->listener_fd,
        .monitor_fd = &sb->monitor_fd,
        .scratch_fd = &sb->scratch_fd,
        .fsize = disk ? lis_disk_budget(&spec->limits) : 0,
    };
    if (!sb->cg) { /* no cgroup: the fallback limits (docs/cgroups.md) */
        uint64_t pids = spec->limits.pids ? spec->limits.pids : LIS_DEFAULT_PIDS;
        uint64_t mem = spec->limits.memory_bytes ? spec->limits.memory_bytes : LIS_DEFAULT_MEMORY;
        req.fb_pids = pids == LIS_UNLIMITED ? 0 : pids;
        req.fb_memory = mem == LIS_UNLIMITED ? 0 : mem;
        req.fb_nice = 10;
        sb->fallback_limits = 1;
    }
    return lis_spawn(sb->ctx, &req, &sb->pid, &sb->pidfd, &sb->life_fd, err);
}

int lis_sandbox_create(lis_ctx *ctx, const lis_sandbox_spec *spec, lis_sandbox **out,
                       lis_error *err)
{
    *out = NULL;
    char rootfs[PATH_MAX];
    int full_map = 0;
    if (spec_check(ctx, spec, rootfs, sizeof rootfs, &full_map, err) < 0)
        return -1;
    const char *base = strrchr(rootfs, ':'); /* the image at the bottom of a chain */
    warn_unmapped_owner(ctx, base ? base + 1 : rootfs, full_map);
    lis_sandbox *sb = sandbox_alloc(ctx);
    if (!sb)
        return lis_oom(err);
    snprintf(sb->rootfs, sizeof sb->rootfs, "%s", rootfs);
    if (spec->name)
        snprintf(sb->name, sizeof sb->name, "%s", spec->name);
    else
        random_name(sb->name, sizeof sb->name);
    sb->full_map = full_map;
    sb->persist = spec->persist;
    sb->created = lis_wallclock();
    sb->net = spec->net;
    sb->disk_limit = lis_disk_budget(&spec->limits);
    sb->limits = spec->limits;
    int listen_fd = -1, spawned = 0;
    int rc = (sb->env = lis_env_merge(default_env, spec->env)) ? 0 : lis_oom(err);
    if (rc == 0)
        rc = state_make(sb, spec, &listen_fd, err);
    if (rc == 0)
        rc = lis_cg_create(ctx, sb->name, &spec->limits, &sb->cg, err);
    if (rc == 0)
        rc = sandbox_spawn(sb, spec, listen_fd, err);
    spawned = rc == 0;
    if (listen_fd >= 0)
        close(listen_fd);
    if (rc == 0 && sb->state_dir[0] && lis_meta_save(sb, err) < 0)
        rc = lis_wrap(err, "creating sandbox %s", spec->name ? spec->name : "");
    if (rc < 0) {
        lis_error ignore;
        if (spawned) {
            lis_sandbox_destroy(sb, &ignore);
            return -1;
        }
        lis_cg_remove(sb->cg, NULL);
        sb->cg = NULL;
        remove_state(ctx, sb->state_dir, sb->layer_dir, sb->full_map, &ignore);
        sandbox_free(sb);
        return -1;
    }
    if (spec->persist) {
        /* PID 1 now lives on its own; the lifeline is not needed. */
        close(sb->life_fd);
        sb->life_fd = -1;
    }
    *out = sb;
    return 0;
}

/* The handle from the record: everything but what only its creator knows
 * (the lifeline, the listener); env moved out of m. */
static void apply_meta(lis_sandbox *sb, lis_meta *m)
{
    snprintf(sb->rootfs, sizeof sb->rootfs, "%s", m->rootfs);
    snprintf(sb->layer_dir, sizeof sb->layer_dir, "%s", m->layer_dir);
    sb->persist = m->persist;
    sb->full_map = m->full_map;
    sb->net = m->net;
    sb->created = m->created;
    sb->paused = m->paused;
    sb->limits = m->asked;
    sb->scratch_fd = m->scratch_fd;
    sb->disk_limit = m->disk_limit; /* kept when the record is written again (rename, pause) */
    sb->env = m->env;
    m->env = NULL;
    sb->pid = m->pid;
}

int lis_sandbox_open(lis_ctx *ctx, const char *name, lis_sandbox **out, lis_error *err)
{
    *out = NULL;
    if (!lis_valid_name(name))
        return lis_fail(err, EINVAL, "invalid sandbox name '%s'", name);
    lis_sandbox *sb = sandbox_alloc(ctx);
    if (!sb)
        return lis_oom(err);
    snprintf(sb->name, sizeof sb->name, "%s", name);
    snprintf(sb->state_dir, sizeof sb->state_dir, "%s/%s", ctx->run_dir, name);
    lis_meta m;
    lis_error ignore;
    if (lis_meta_read(sb->state_dir, &m, &ignore) < 0) {
        sandbox_free(sb);
        return lis_fail(err, ENOENT, "no sandbox named '%s' (lis sandbox ls)", name);
    }
    int alive = lis_meta_alive(&m);
    apply_meta(sb, &m);
    lis_meta_release(&m);
    if (!alive) {
        sandbox_free(sb);
        return lis_fail(err, ESRCH, "sandbox '%s' is dead (lis sandbox gc cleans it up)", name);
    }
    sb->pidfd = (int)syscall(SYS_pidfd_open, sb->pid, 0);
    if (sb->pidfd < 0) {
        int e = errno;
        sandbox_free(sb);
        return lis_fail_errnum(err, e, "sandbox '%s': pidfd_open", name);
    }
    sb->cg = lis_cg_of_pid(ctx, sb->pid);
    snprintf(sb->ctl_path, sizeof sb->ctl_path, "%s/ctl.sock", sb->state_dir);
    if (!sb->persist)
        sb->ctl_path[0] = 0;
    *out = sb;
    return 0;
}

/* Waits until PID 1 is gone; reaps it when it is our child. */
static void kill_and_wait(lis_sandbox *sb)
{
    if (sb->pidfd < 0)
        return;
    syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    siginfo_t si;
    if (waitid(P_PIDFD, sb->pidfd, &si, WEXITED | __WALL) < 0) {
        /* not our child: the pidfd turns readable when it exits */
        struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
        while (poll(&p, 1, -1) < 0 && errno == EINTR)
            ;
    }
}

int lis_sandbox_destroy(lis_sandbox *sb, lis_error *err)
{
    if (!sb)
        return 0;
    lis_cg_kill(sb->cg);
    kill_and_wait(sb);
    lis_cg_remove(sb->cg, NULL);
    sb->cg = NULL;
    int rc = remove_state(sb->ctx, sb->state_dir, sb->layer_dir, sb->full_map, err);
    sandbox_free(sb);
    return rc;
}

void lis_sandbox_release(lis_sandbox *sb)
{
    if (!sb)
        return;
    if (!sb->persist && sb->life_fd >= 0) {
        lis_error ignore;
        lis_sandbox_destroy(sb, &ignore);
        return;
    }
    sandbox_free(sb);
}

const char *lis_sandbox_name(const lis_sandbox *sb) { return sb->name; }
pid_t lis_sandbox_pid(const lis_sandbox *sb) { return sb->pid; }

int lis_sandbox_socket(lis_sandbox *sb, int domain, int type, lis_error *err)
{
    if (sb->net == LIS_NET_HOST) {
        int s = socket(domain, type | SOCK_CLOEXEC, 0);
        return s >= 0 ? s : lis_fail_errno(err, "socket");
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return lis_fail_errno(err, "socketpair");
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        return lis_fail_errnum(err, e, "fork");
    }
    if (pid == 0) { /* single-threaded here, as setns(CLONE_NEWUSER) wants; syscalls only */
        int s = -1, e = 0;
        if (setns(sb->pidfd, CLONE_NEWUSER | CLONE_NEWNET) < 0 ||
            (s = socket(domain, type | SOCK_CLOEXEC, 0)) < 0)
            e = errno;
        lis_send_fds(sv[1], &e, sizeof e, &s, s >= 0 ? 1 : 0, 0);
        _exit(0);
    }
    close(sv[1]);
    int e = EIO, fd = -1;
    ssize_t n = lis_recv_fds(sv[0], &e, sizeof e, &fd, 1, 0);
    close(sv[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    if (n != (ssize_t)sizeof e || fd < 0) {
        if (fd >= 0)
            close(fd);
        if (n != (ssize_t)sizeof e || !e)
            e = EIO;
        return lis_fail_errnum(err, e, "a socket in sandbox %s's network", sb->name);
    }
    return fd;
}

int lis_sandbox_connect(lis_sandbox *sb, lis_error *err)
{
    if (sb->life_fd >= 0) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
            return lis_fail_errno(err, "socketpair");
        int sent = lis_msg_send(sb->life_fd, LIS_MSG_CONN, 0, 0, NULL, sv[1]);
        int e = errno;
        close(sv[1]);
        if (sent < 0) {
            close(sv[0]);
            return lis_fail_errnum(err, e, "sandbox %s is gone", sb->name);
        }
        return sv[0];
    }
    if (!sb->ctl_path[0])
        return lis_fail(err, EPERM, "sandbox %s is not persistent and belongs to another process",
                        sb->name);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sb->ctl_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return lis_fail_errno(err, "socket");
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        close(fd);
        return lis_fail_errnum(err, e, "connecting to sandbox %s", sb->name);
    }
    return fd;
}

int lis_sandbox_root_fd(lis_sandbox *sb, lis_error *err)
{
    if (sb->root_fd >= 0)
        return sb->root_fd;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/root", (int)sb->pid);
    int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return lis_fail_errno(err, "opening the root of sandbox %s", sb->name);
    /* The pid could have been reused between our check and the open. */
    struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
    if (sb->pidfd >= 0 && poll(&p, 1, 0) > 0) {
        close(fd);
        return lis_fail(err, ESRCH, "sandbox %s is gone", sb->name);
    }
    return sb->root_fd = fd;
}

struct usage {
    pid_t pid1;
    uint64_t nprocs, rss;
    unsigned long long ticks;
};

static int add_usage(pid_t pid, const char *stat, void *arg)
{
    struct usage *u = arg;
    u->nprocs++;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    FILE *f = fopen(path, "re");
    unsigned long size, res;
    if (f && fscanf(f, "%lu %lu", &size, &res) == 2)
        u->rss += (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
    if (f)
        fclose(f);
    unsigned long long ut, st, cut, cst;
    if (sscanf(stat, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &ut, &st,
               &cut, &cst) == 4)
        /* lis-init's own time is lis's bookkeeping (the CPU and memory
         * watch of the fallback limits, which goes on while paused): only
         * what it reaped is the sandbox's */
        u->ticks += (pid == u->pid1 ? 0 : ut + st) + cut + cst;
    return 0;
}

/* Processes whose pid namespace is the sandbox's; RSS and CPU time summed
 * (with the time of the children each reaped: lis-init reaps them all;
 * lis-init's own CPU time left out). */
static void proc_usage(pid_t pid, uint64_t *nprocs, uint64_t *rss, double *cpu)
{
    struct usage u = {.pid1 = pid};
    lis_pidns_each(pid, add_usage, &u);
    long hz = sysconf(_SC_CLK_TCK);
    *nprocs = u.nprocs;
    *rss = u.rss;
    *cpu = (double)u.ticks / (double)(hz > 0 ? hz : 100);
}

static void fill_stats(lis_stats *st, const char *name, pid_t pid, int alive, const char *rootfs,
                       double created, int persist)
{
    memset(st, 0, sizeof *st);
    snprintf(st->name, sizeof st->name, "%s", name);
    snprintf(st->state, sizeof st->state, "%s", alive ? "running" : "dead");
    snprintf(st->rootfs, sizeof st->rootfs, "%s", rootfs);
    st->pid = pid;
    st->persist = persist;
    st->age_seconds = created > 0 ? lis_wallclock() - created : 0;
    if (alive)
        proc_usage(pid, &st->nprocs, &st->memory_bytes, &st->cpu_seconds);
}

int lis_sandbox_stats(lis_sandbox *sb, lis_stats *st, lis_error *err)
{
    struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
    int alive = sb->pidfd >= 0 && poll(&p, 1, 0) == 0;
    fill_stats(st, sb->name, sb->pid, alive, sb->rootfs, sb->created, sb->persist);
    snprintf(st->limits, sizeof st->limits, "%s", sb->cg ? "cgroup" : "fallback");
    st->disk_limit = sb->disk_limit;
    st->disk_bytes = lis_disk_usage(alive ? sb->pid : 0, sb->layer_dir);
    st->net = (lis_net_mode)sb->net;
    if (alive && lis_meta_paused(sb))
        snprintf(st->state, sizeof st->state, "paused");
    if (alive)
        lis_cg_stats(sb->cg, st);
    return 0;
}

struct list_acc {
    lis_ctx *ctx;
    lis_stats *st;
    size_t n, cap;
    lis_error *err;
};

static int list_one(const char *dir, const char *name, const lis_meta *m, void *arg)
{
    struct list_acc *a = arg;
    if (!m)
        return 0;
    if (LIS_GROW(a->st, a->cap, a->n + 1) < 0)
        return lis_oom(a->err);
    lis_stats *st = &a->st[a->n++];
    int alive = lis_meta_alive(m);
    fill_stats(st, name, m->pid, alive, m->rootfs, m->created, m->persist);
    if (alive)
        lis_cg_pid_stats(a->ctx, m->pid, st);
    if (alive && m->paused)
        snprintf(st->state, sizeof st->state, "paused");
    snprintf(st->limits, sizeof st->limits, "%s", m->cgroup ? "cgroup" : "fallback");
    st->disk_limit = m->disk_limit;
    st->disk_bytes = lis_disk_usage(alive ? m->pid : 0, m->layer_dir);
    st->net = (lis_net_mode)m->net;
    return 0;
}

int lis_sandbox_list(lis_ctx *ctx, lis_stats **out, size_t *n, lis_error *err)
{
    struct list_acc a = {.ctx = ctx, .err = err};
    *out = NULL;
    *n = 0;
    if (lis_meta_each(ctx->run_dir, list_one, &a, err) < 0) {
        free(a.st);
        return -1;
    }
    *out = a.st;
    *n = a.n;
    return 0;
}

struct gc_acc {
    lis_ctx *ctx;
    int removed, failed;
    lis_error *err;
};

static int gc_one(const char *dir, const char *name, const lis_meta *m, void *arg)
{
    struct gc_acc *a = arg;
    if (!m) {
        /* being created right now, or a crash before the metadata was written */
        struct stat st;
        if (stat(dir, &st) == 0 && lis_wallclock() - st.st_mtime > 60) {
            lis_error ignore;
            lis_rmtree(a->ctx, dir, 0, &ignore);
        }
        return 0;
    }
    if (lis_meta_alive(m))
        return 0;
    if (remove_state(a->ctx, dir, m->layer_dir, m->full_map, a->err) < 0)
        a->failed = 1;
    else
        a->removed++;
    return 0;
}

int lis_sandbox_gc(lis_ctx *ctx, int *removed, lis_error *err)
{
    *removed = 0;
    struct gc_acc a = {.ctx = ctx, .err = err};
    if (lis_meta_each(ctx->run_dir, gc_one, &a, err) < 0)
        return -1;
    int rc = a.failed ? -1 : 0;
    *removed = a.removed;
    /* Layers whose state directory is gone. */
    char layers[PATH_MAX + 16];
    snprintf(layers, sizeof layers, "%s/sandboxes", ctx->data_dir);
    DIR *d = opendir(layers);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char st_dir[PATH_MAX + 80], l_dir[PATH_MAX + 80];
        snprintf(st_dir, sizeof st_dir, "%s/%s", ctx->run_dir, e->d_name);
        snprintf(l_dir, sizeof l_dir, "%s/%s", layers, e->d_name);
        struct stat st;
        if (stat(st_dir, &st) < 0 && errno == ENOENT && stat(l_dir, &st) == 0 &&
            lis_wallclock() - st.st_mtime > 60) {
            if (lis_rmtree(ctx, l_dir, 1, err) < 0)
                rc = -1;
            else
                (*removed)++;
        }
    }
    if (d)
        closedir(d);
    int cgs; /* cgroups of sandboxes whose owner was killed */
    lis_cg_gc(ctx, &cgs);
    return rc;
}

int lis_sandbox_rename(lis_ctx *ctx, const char *old_name, const char *new_name, lis_error *err)
{
    if (!lis_valid_name(old_name) || !lis_valid_name(new_name))
        return lis_fail(err, EINVAL, "invalid sandbox name '%s'",
                        lis_valid_name(old_name) ? new_name : old_name);
    char from[PATH_MAX + 80], to[PATH_MAX + 80];
    snprintf(from, sizeof from, "%s/%s", ctx->run_dir, old_name);
    snprintf(to, sizeof to, "%s/%s", ctx->run_dir, new_name);
    lis_meta m;
    lis_error ignore;
    if (lis_meta_read(from, &m, &ignore) < 0)
        return lis_fail(err, ENOENT, "no sandbox named '%s'", old_name);
    int persist = m.persist;
    lis_meta_release(&m);
    if (!persist)
        return lis_fail(err, EPERM, "sandbox '%s' is not persistent", old_name);
    /* The state dir is the claim: exactly one renamer wins. */
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) < 0)
        return errno == EEXIST
                   ? lis_fail(err, EEXIST, "a sandbox named '%s' already exists", new_name)
                   : lis_fail_errno(err, "renaming sandbox '%s'", old_name);
    lis_sandbox *sb;
    if (lis_sandbox_open(ctx, new_name, &sb, err) < 0)
        return -1;
    char layers[PATH_MAX + 80];
    snprintf(layers, sizeof layers, "%s/sandboxes/%s", ctx->data_dir, new_name);
    if (sb->layer_dir[0] && strcmp(sb->layer_dir, layers) && rename(sb->layer_dir, layers) == 0)
        snprintf(sb->layer_dir, sizeof sb->layer_dir, "%s", layers);
    snprintf(sb->ctl_path, sizeof sb->ctl_path, "%s/ctl.sock", sb->state_dir);
    int rc = lis_meta_save(sb, err);
    sandbox_free(sb);
    return rc;
}
