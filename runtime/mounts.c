/* mounts.c - overlay root, /proc, a minimal /dev, /sys, /tmp, /etc/hosts,
 * binds, hostname, loopback, pivot_root.
 *
 * Ordering constraints:
 *  - /proc is mounted before the old root is detached: the kernel only lets a
 *    user namespace mount procfs while a fully visible procfs exists in the
 *    mount namespace.
 *  - Targets inside the new root are opened with openat2(RESOLVE_IN_ROOT) and
 *    mounted through /proc/self/fd/N, so a symlink in an untrusted image can
 *    never redirect a mount outside the sandbox root. */
#include "mounts.h"
#include "proto.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

enum op_kind {
    OP_MOUNT,
    OP_OVERLAY,
    OP_BIND,
    OP_MKDIR,
    OP_OPENROOT,
    OP_SYMLINK,
    OP_WRITE,
    OP_HOSTNAME,
    OP_LO_UP,
    OP_PIVOT,
    OP_HOLD,
    OP_FILLTMP,
    OP_RDONLY /* the new root's own mount read-only (not its sub-mounts) */
};

typedef struct mount_op {
    enum op_kind kind;
    const char *src, *dst, *fstype, *data;
    const char *upper, *work; /* OP_OVERLAY: src is the lower layer(s), "top:...:base" */
    unsigned long flags;
    unsigned mode;      /* OP_MKDIR: chmod to this after mkdir (0: 0755, umask applies) */
    int in_root;        /* dst is relative to the new root (OP_MKDIR: mkdir -p there) */
    int in_upper;       /* OP_MKDIR/OP_WRITE: dst is relative to the upper dir, no symlinks */
    int is_dir;         /* create dst as a directory (else a file) when missing */
    int read_only;      /* OP_BIND: make the bind read-only (recursively) */
    int optional;       /* a failure is ignored */
    int volatile_upper; /* OP_OVERLAY: the upper layer goes with the sandbox: no syncs */
    const char *stage;
} mount_op;

#define MAX_OPS 128
struct lis_mount_plan {
    mount_op ops[MAX_OPS];
    int n;
    char *arena;
    size_t used, cap;
    int listen_port;          /* spec.listen_port: open the listener after the plan */
    const char *listen_stage; /* its error stage, made by the owner */
};

static const char *keep(lis_mount_plan *p, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    if (p->used + n > p->cap)
        return NULL;
    char *d = p->arena + p->used;
    memcpy(d, s, n);
    p->used += n;
    return d;
}

static mount_op *add(lis_mount_plan *p, enum op_kind k, const char *stage)
{
    if (p->n >= MAX_OPS)
        return NULL;
    mount_op *o = &p->ops[p->n++];
    memset(o, 0, sizeof *o);
    o->kind = k;
    o->stage = keep(p, stage);
    return o;
}

static int bad_overlay_path(const char *s) { return strpbrk(s, ",:\\") != NULL; }

/* A chain of lower layers "top:...:base": no empty one, none with ',' or '\\',
 * at most LIS_MAX_LAYERS. */
static int bad_lower_chain(const char *s)
{
    int n = 1;
    if (!*s || strpbrk(s, ",\\") || s[0] == ':' || s[strlen(s) - 1] == ':' || strstr(s, "::"))
        return 1;
    for (; *s; s++)
        n += *s == ':';
    return n > LIS_MAX_LAYERS;
}

/* What a container asked for (spec: tmpfs mounts, its working directory, a
 * read-only root), after every other mount of the root; -1 with err. */
static int plan_options(lis_mount_plan *p, const lis_sandbox_spec *spec, lis_error *err)
{
    char data[128], stage[PATH_MAX + 64];
    mount_op *o;
    for (size_t i = 0; i < spec->ntmpfs; i++) {
        const lis_tmpfs *t = &spec->tmpfs[i];
        if (!t->path || t->path[0] != '/' || !t->path[1])
            return lis_fail(err, EINVAL, "tmpfs %zu: needs an absolute path other than /", i);
        if (lis_path_check(t->path, err) < 0)
            return lis_wrap(err, "tmpfs %s", t->path);
        uint64_t size = t->size ? t->size : LIS_TMPFS_DEFAULT;
        uint64_t inodes = size / 4096 < 1024 ? 1024 : size / 4096;
        snprintf(data, sizeof data, "mode=%o,size=%llu,nr_inodes=%llu", t->mode ? t->mode : 01777,
                 (unsigned long long)size, (unsigned long long)inodes);
        snprintf(stage, sizeof stage, "mounting a tmpfs at %s", t->path);
        if (!(o = add(p, OP_MOUNT, stage)))
            return lis_fail(err, E2BIG, "too many mounts or paths for one sandbox");
        o->src = o->fstype = "tmpfs";
        o->dst = keep(p, t->path + 1);
        o->data = keep(p, data);
        o->in_root = o->is_dir = 1;
        if (!o->dst || !o->data)
            return lis_fail(err, E2BIG, "too many mounts or paths for one sandbox");
        o->flags =
            MS_NOSUID | MS_NODEV | (t->noexec ? MS_NOEXEC : 0) | (t->read_only ? MS_RDONLY : 0);
    }
    if (spec->workdir && spec->workdir[0] == '/' && spec->workdir[1]) {
        if (lis_path_check(spec->workdir, err) < 0)
            return lis_wrap(err, "working directory");
        snprintf(stage, sizeof stage, "making the working directory %s", spec->workdir);
        if (!(o = add(p, OP_MKDIR, stage)))
            return lis_fail(err, E2BIG, "too many mounts or paths for one sandbox");
        o->dst = keep(p, spec->workdir + 1);
        o->in_root = 1;
        if (!o->dst)
            return lis_fail(err, E2BIG, "too many mounts or paths for one sandbox");
    }
    if (spec->read_only_root && !add(p, OP_RDONLY, "making / read-only"))
        return lis_fail(err, E2BIG, "too many mounts or paths for one sandbox");
    return 0;
}

/* An empty read-only tmpfs over each dir (NULL-terminated; absent ones are
 * skipped at run time). */
static int mask_dirs(lis_mount_plan *p, const char *const *dirs, const char *stage)
{
    for (size_t i = 0; dirs[i]; i++) {
        mount_op *o = add(p, OP_MOUNT, stage);
        if (!o)
            return -1;
        o->src = o->fstype = "tmpfs";
        o->dst = dirs[i];
        o->in_root = o->is_dir = o->optional = 1;
        o->flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
        o->data = "mode=0555,size=4k";
    }
    return 0;
}

lis_mount_plan *lis_mount_plan_new(lis_ctx *ctx, const lis_spawn_req *req, lis_error *err)
{
    const lis_sandbox_spec *spec = req->spec;
    lis_mount_plan *p = calloc(1, sizeof *p);
    if (!p || !(p->arena = malloc(p->cap = 64 * 1024))) {
        free(p);
        lis_oom(err);
        return NULL;
    }
    char buf[3 * PATH_MAX + 128], root[PATH_MAX + 16], stage[PATH_MAX + 64];
    char base[PATH_MAX];
    snprintf(base, sizeof base, "%s/.mnt", ctx->run_dir);
    snprintf(root, sizeof root, "%s/root", base);
    const char *upper = req->upper_dir, *work = req->work_dir;
    char tup[PATH_MAX + 16], twk[PATH_MAX + 16];
    if (!upper) {
        snprintf(tup, sizeof tup, "%s/upper", base);
        snprintf(twk, sizeof twk, "%s/work", base);
        upper = tup;
        work = twk;
    }
    if (bad_lower_chain(req->rootfs) || bad_overlay_path(upper) || bad_overlay_path(base)) {
        lis_mount_plan_free(p);
        lis_fail(err, EINVAL,
                 "paths used by overlayfs may not contain ',', ':' or '\\', and "
                 "a chain has at most %d layers (%s)",
                 LIS_MAX_LAYERS, bad_lower_chain(req->rootfs) ? req->rootfs : upper);
        return NULL;
    }
    mount_op *o;
#define ADD(kind, st)                                                                              \
    if (!(o = add(p, kind, st)))                                                                   \
    goto full
    ADD(OP_MOUNT, "making the mount namespace private");
    o->dst = keep(p, "/");
    o->flags = MS_REC | MS_PRIVATE;
    /* A scratch tmpfs over the run dir, only in this mount namespace. It is
     * the sandbox's writable budget: the tmpfs upper layer, /tmp and
     * /dev/shm all live in it, so a writer gets ENOSPC at --disk and the
     * host never notices. Inodes are bounded too (each costs kernel memory
     * that size= does not count): one per 4 KiB of budget. */
    uint64_t disk = lis_disk_budget(&spec->limits);
    char tmpfs_opts[96] = "mode=0755";
    if (disk != LIS_UNLIMITED) {
        uint64_t inodes = disk / 4096 < 16384 ? 16384 : disk / 4096;
        snprintf(tmpfs_opts, sizeof tmpfs_opts, "mode=0755,size=%llu,nr_inodes=%llu",
                 (unsigned long long)disk, (unsigned long long)inodes);
    }
    ADD(OP_MOUNT, "mounting the set-up tmpfs");
    o->src = "tmpfs";
    o->fstype = "tmpfs";
    o->dst = keep(p, base);
    o->flags = MS_NOSUID | MS_NODEV;
    o->data = keep(p, tmpfs_opts);
    /* lis-init keeps this tmpfs open: after pivot_root it is reachable only
     * through that fd, which the owner opens as /proc/<pid>/fd/N to capture
     * the tmpfs upper layer and /tmp (capture.c). Nothing in the sandbox
     * can: lis-init is not dumpable and commands have no CAP_SYS_PTRACE. */
    ADD(OP_HOLD, "opening the set-up tmpfs");
    o->dst = keep(p, base);
    ADD(OP_MKDIR, "creating the root mount point");
    o->dst = keep(p, root);
    static const char *const scratch_dirs[] = {"tmp", "shm"};
    for (int i = 0; i < 2; i++) {
        snprintf(buf, sizeof buf, "%s/%s", base, scratch_dirs[i]);
        ADD(OP_MKDIR, "creating /tmp and /dev/shm");
        o->dst = keep(p, buf);
        o->mode = 01777;
    }
    if (!req->upper_dir) {
        ADD(OP_MKDIR, "creating the tmpfs upper layer");
        o->dst = keep(p, upper);
        ADD(OP_MKDIR, "creating the tmpfs work dir");
        o->dst = keep(p, work);
    }
    /* lis's own mount points and /etc files go into the upper layer before
     * the overlay is mounted, so a lower layer we cannot write (a root-owned
     * debootstrap, ids not mapped here) still starts; the merged /, /etc
     * and these dirs are then the sandbox's own. */
    static const char *const upper_dirs[] = {"etc", "proc", "dev", "sys", "tmp"};
    for (size_t i = 0; i < sizeof upper_dirs / sizeof upper_dirs[0]; i++) {
        ADD(OP_MKDIR, "creating mount points in the upper layer");
        o->dst = upper_dirs[i];
        o->upper = keep(p, upper);
        o->in_upper = 1;
    }
    const char *hostname = spec->hostname ? spec->hostname : req->name;
    char hosts[512];
    snprintf(hosts, sizeof hosts,
             "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%s\n",
             hostname);
    char resolv[4096] = "# lis: this sandbox has no DNS of its own\n";
    if (spec->net == LIS_NET_HOST) {
        int fd = open("/etc/resolv.conf", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t n = read(fd, resolv, sizeof resolv - 1);
            resolv[n > 0 ? n : 0] = 0;
            close(fd);
        }
    } else if (spec->net == LIS_NET_PROXY) {
        snprintf(resolv, sizeof resolv,
                 "# lis: names are resolved by the HTTP proxy "
                 "(http_proxy); there is no DNS server here\n");
    }
    static const char *const etc[] = {"hosts", "resolv.conf"};
    const char *content[] = {hosts, resolv};
    for (int i = 0; i < 2; i++) {
        snprintf(buf, sizeof buf, "etc/%s", etc[i]);
        ADD(OP_WRITE, "writing /etc/hosts and /etc/resolv.conf into the upper layer");
        o->dst = keep(p, buf);
        o->data = keep(p, content[i]);
        o->upper = keep(p, upper);
        o->in_upper = 1;
    }
    snprintf(stage, sizeof stage, "mounting the overlay root (lower %s)", req->rootfs);
    ADD(OP_OVERLAY, stage);
    o->src = keep(p, req->rootfs);
    o->upper = keep(p, upper);
    o->work = keep(p, work);
    o->dst = keep(p, root);
    /* A disk upper layer that is deleted with the sandbox needs no sync: without
     * `volatile` the unmount at PID 1's exit waits for the writeback of the
     * host filesystem (seconds when it is busy), and so does every destroy. */
    o->volatile_upper = req->upper_dir && !spec->persist;
    if (!o->src || !o->upper || !o->work)
        goto full;
    ADD(OP_OPENROOT, "opening the new root");
    o->dst = keep(p, root);

    ADD(OP_MOUNT, "mounting /proc");
    o->src = o->fstype = "proc";
    o->dst = "proc";
    o->in_root = o->is_dir = 1;
    o->flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
    /* What Docker and podman mask or make read-only in /proc (SECURITY.md):
     * /proc/keys and key-users list the host user's keyrings (keyrings are
     * per uid, not per namespace); the rest shows host kernel state. Paths
     * this kernel lacks are skipped. */
    static const char *const masked_files[] = {"proc/kcore",        "proc/keys",
                                               "proc/key-users",    "proc/timer_list",
                                               "proc/timer_stats",  "proc/sched_debug",
                                               "proc/latency_stats"};
    for (size_t i = 0; i < sizeof masked_files / sizeof masked_files[0]; i++) {
        ADD(OP_BIND, "masking /proc files");
        o->src = "/dev/null";
        o->dst = masked_files[i];
        o->in_root = o->optional = 1;
        o->read_only = 1;
    }
    static const char *const masked_dirs[] = {"proc/acpi", "proc/scsi", "proc/asound", NULL};
    if (mask_dirs(p, masked_dirs, "masking /proc directories") < 0)
        goto full;
    static const char *const ro_proc[] = {"proc/sys", "proc/bus", "proc/fs", "proc/irq",
                                          "proc/sysrq-trigger"};
    for (size_t i = 0; i < sizeof ro_proc / sizeof ro_proc[0]; i++) {
        ADD(OP_BIND, "making /proc/sys, bus, fs, irq and sysrq-trigger read-only");
        o->dst = ro_proc[i];
        o->in_root = o->read_only = 1;
        o->is_dir = i < 4;
        o->optional = i > 0; /* /proc/sys always exists */
    }

    ADD(OP_MOUNT, "mounting /dev");
    o->src = o->fstype = "tmpfs";
    o->dst = "dev";
    o->in_root = o->is_dir = 1;
    o->flags = MS_NOSUID | MS_NOEXEC;
    o->data = "mode=0755,size=1m";
    static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        snprintf(buf, sizeof buf, "/dev/%s", nodes[i]);
        snprintf(stage, sizeof stage, "binding /dev/%s", nodes[i]);
        ADD(OP_BIND, stage);
        o->src = keep(p, buf);
        o->dst = o->src + 1;
        o->in_root = 1;
    }
    ADD(OP_MOUNT, "mounting /dev/pts");
    o->src = o->fstype = "devpts";
    o->dst = "dev/pts";
    o->in_root = o->is_dir = 1;
    o->flags = MS_NOSUID | MS_NOEXEC;
    o->data = req->full_map ? "newinstance,ptmxmode=0666,mode=0620,gid=5"
                            : "newinstance,ptmxmode=0666,mode=0620";
    static const char *const links[][2] = {{"pts/ptmx", "dev/ptmx"},
                                           {"/proc/self/fd", "dev/fd"},
                                           {"/proc/self/fd/0", "dev/stdin"},
                                           {"/proc/self/fd/1", "dev/stdout"},
                                           {"/proc/self/fd/2", "dev/stderr"}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        ADD(OP_SYMLINK, "creating /dev links");
        o->src = links[i][0];
        o->dst = links[i][1];
        o->in_root = 1;
    }
    if (spec->shm_bytes) { /* a size of its own (Docker's --shm-size), beside the budget */
        uint64_t inodes = spec->shm_bytes / 4096 < 1024 ? 1024 : spec->shm_bytes / 4096;
        snprintf(buf, sizeof buf, "mode=1777,size=%llu,nr_inodes=%llu",
                 (unsigned long long)spec->shm_bytes, (unsigned long long)inodes);
        ADD(OP_MOUNT, "mounting /dev/shm");
        o->src = o->fstype = "tmpfs";
        o->data = keep(p, buf);
        o->flags = MS_NOSUID | MS_NODEV;
    } else {
        snprintf(buf, sizeof buf, "%s/shm", base);
        ADD(OP_BIND, "mounting /dev/shm");
        o->src = keep(p, buf);
    }
    o->dst = "dev/shm";
    o->in_root = o->is_dir = 1;
    if (spec->net != LIS_NET_HOST) {
        /* sysfs needs a network namespace owned by our user namespace. */
        ADD(OP_MOUNT, "mounting /sys");
        o->src = o->fstype = "sysfs";
        o->dst = "sys";
        o->in_root = o->is_dir = 1;
        o->flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
        o->optional = 1;
        static const char *const masked_sys[] = {"sys/firmware", "sys/devices/virtual/powercap",
                                                 NULL};
        if (mask_dirs(p, masked_sys, "masking /sys/firmware") < 0)
            goto full;
    }
    snprintf(buf, sizeof buf, "%s/tmp", base);
    /* What a snapshot layer holds in /tmp, into this sandbox's own /tmp. */
    ADD(OP_FILLTMP, "copying the image's /tmp into the sandbox's /tmp");
    o->src = keep(p, buf);
    o->in_root = 1;
    ADD(OP_BIND, "mounting /tmp");
    o->src = keep(p, buf);
    o->dst = "tmp";
    o->in_root = o->is_dir = 1;
    o->read_only = spec->read_only_root; /* Docker's --read-only: /tmp is the root's */

    for (size_t i = 0; i < spec->nbinds; i++) {
        const lis_bind *b = &spec->binds[i];
        struct stat st;
        if (!b->host_path || !b->path || b->path[0] != '/') {
            lis_mount_plan_free(p);
            lis_fail(err, EINVAL, "bind %zu: needs a host path and an absolute sandbox path", i);
            return NULL;
        }
        if (stat(b->host_path, &st) < 0) {
            lis_fail_errno(err, "bind source %s", b->host_path);
            lis_mount_plan_free(p);
            return NULL;
        }
        if (lis_path_check(b->path, err) < 0) {
            lis_wrap(err, "bind target");
            lis_mount_plan_free(p);
            return NULL;
        }
        snprintf(stage, sizeof stage, "binding %s at %s", b->host_path, b->path);
        ADD(OP_BIND, stage);
        o->src = keep(p, b->host_path);
        const char *rel = b->path;
        while (*rel == '/')
            rel++;
        o->dst = keep(p, *rel ? rel : ".");
        o->in_root = 1;
        o->is_dir = S_ISDIR(st.st_mode);
        o->read_only = b->read_only;
    }
    if (spec->net != LIS_NET_HOST && spec->listen_port) {
        p->listen_port = spec->listen_port;
        snprintf(buf, sizeof buf, "opening the listener on 127.0.0.1:%u", spec->listen_port);
        p->listen_stage = keep(p, buf);
    }
    if (plan_options(p, spec, err) < 0) {
        lis_mount_plan_free(p);
        return NULL;
    }
    ADD(OP_HOSTNAME, "setting the hostname");
    o->data = keep(p, hostname);
    if (spec->net != LIS_NET_HOST) {
        ADD(OP_LO_UP, "bringing up loopback");
    }
    ADD(OP_PIVOT, "pivoting into the new root");
#undef ADD
    for (int i = 0; i < p->n; i++)
        if (!p->ops[i].stage)
            goto full;
    return p;
full:
    lis_mount_plan_free(p);
    lis_fail(err, E2BIG, "too many mounts or paths for one sandbox");
    return NULL;
}

void lis_mount_plan_free(lis_mount_plan *p)
{
    if (p) {
        free(p->arena);
        free(p);
    }
}

/* ---- child side: no allocation below this line ---- */

static void fd_path(int fd, char *buf)
{
    static const char pre[] = "/proc/self/fd/";
    memcpy(buf, pre, sizeof pre - 1);
    char tmp[12];
    int n = 0;
    do
        tmp[n++] = '0' + fd % 10;
    while ((fd /= 10));
    char *q = buf + sizeof pre - 1;
    while (n)
        *q++ = tmp[--n];
    *q = 0;
}

static int open_in_root(int rootfd, const char *rel, int flags)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof how);
}

/* Opens (creating when missing) a mount target inside the root; O_PATH fd or -errno. */
static int target(int rootfd, const char *rel, int is_dir)
{
    int fd = open_in_root(rootfd, rel, O_PATH);
    if (fd >= 0 || errno != ENOENT)
        return fd >= 0 ? fd : -errno;
    char parent[PATH_MAX];
    size_t n = strlen(rel);
    if (n >= sizeof parent)
        return -ENAMETOOLONG;
    memcpy(parent, rel, n + 1);
    char *slash = strrchr(parent, '/');
    const char *last = rel;
    int pfd;
    if (slash) {
        *slash = 0;
        last = rel + (slash - parent) + 1;
        pfd = target(rootfd, parent, 1);
        if (pfd < 0)
            return pfd;
    } else {
        pfd = dup(rootfd);
    }
    int rc = 0;
    if (is_dir) {
        if (mkdirat(pfd, last, 0755) < 0 && errno != EEXIST)
            rc = -errno;
    } else {
        int f = openat(pfd, last, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (f < 0)
            rc = -errno;
        else
            close(f);
    }
    if (rc == 0) {
        fd = openat(pfd, last, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        rc = fd < 0 ? -errno : fd;
    }
    close(pfd);
    return rc;
}

static int make_read_only(int rootfd, const char *rel)
{
    int fd = open_in_root(rootfd, rel, O_PATH); /* now the new mount on top */
    if (fd < 0)
        return errno;
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
    int rc =
        (int)syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr);
    int e = errno;
    close(fd);
    return rc < 0 ? e : 0;
}

static int lo_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int rc = ioctl(s, SIOCGIFFLAGS, &ifr);
    if (rc == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        rc = ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    int e = errno;
    close(s);
    return rc < 0 ? e : 0;
}

/* The upper dir may hold what a persistent sandbox wrote last time: a
 * symlink planted at etc/ or etc/hosts must never send our writes to the
 * host, so paths below the upper dir are resolved without symlinks. */
static int open_upper(const mount_op *o, const char *rel, int flags, unsigned mode)
{
    int ufd = open(o->upper, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (ufd < 0)
        return -errno;
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                           .mode = mode,
                           .resolve =
                               RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, ufd, rel, &how, sizeof how);
    int e = errno;
    close(ufd);
    return fd >= 0 ? fd : -e;
}

static int make_dir(const mount_op *o)
{
    if (o->in_upper) {
        int ufd = open_upper(o, ".", O_PATH | O_DIRECTORY, 0);
        if (ufd < 0)
            return -ufd;
        int rc = mkdirat(ufd, o->dst, 0755) < 0 && errno != EEXIST ? errno : 0;
        close(ufd);
        return rc;
    }
    if (mkdir(o->dst, 0755) < 0 && errno != EEXIST)
        return errno;
    return o->mode && chmod(o->dst, o->mode) < 0 ? errno : 0;
}

static int write_upper_file(const mount_op *o)
{
    int fd = open_upper(o, o->dst, O_CREAT | O_WRONLY | O_TRUNC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -fd;
    size_t n = strlen(o->data);
    int rc = write(fd, o->data, n) == (ssize_t)n ? 0 : EIO;
    close(fd);
    return rc;
}

/* The layers are given as /proc/self/fd/N: mountinfo inside the sandbox then
 * shows those, not the host paths of the image(s) and the upper dir. */
static int mount_overlay(const mount_op *o)
{
    int fds[LIS_MAX_LAYERS + 2], n = 0, rc = 0;
    char data[64 * (LIS_MAX_LAYERS + 4)], *q = data;
    q += sprintf(q, "lowerdir=");
    for (const char *s = o->src; *s && !rc;) {
        const char *colon = strchr(s, ':');
        size_t len = colon ? (size_t)(colon - s) : strlen(s);
        char dir[PATH_MAX];
        if (len >= sizeof dir || n >= LIS_MAX_LAYERS) {
            rc = ENAMETOOLONG;
            break;
        }
        memcpy(dir, s, len);
        dir[len] = 0;
        fds[n] = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fds[n] < 0) {
            rc = errno;
            break;
        }
        if (n)
            *q++ = ':';
        fd_path(fds[n++], q);
        q += strlen(q);
        s += len + (colon ? 1 : 0);
    }
    const char *rw[2] = {o->upper, o->work};
    static const char *const keys[] = {",upperdir=", ",workdir="};
    for (int i = 0; i < 2 && !rc; i++) {
        fds[n] = open(rw[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fds[n] < 0) {
            rc = errno;
            break;
        }
        q += sprintf(q, "%s", keys[i]);
        fd_path(fds[n++], q);
        q += strlen(q);
    }
    if (!rc) {
        q += sprintf(q, ",userxattr%s", o->volatile_upper ? ",volatile" : "");
        rc = mount("overlay", o->dst, "overlay", 0, data) < 0 ? errno : 0;
    }
    for (int i = 0; i < n; i++)
        close(fds[i]);
    return rc;
}

/* Copies the merged root's /tmp (what an image or a snapshot layer holds
 * there) into the scratch /tmp about to be mounted over it. */
static int fill_tmp(const mount_op *o, int rootfd)
{
    int src = open_in_root(rootfd, "tmp", O_RDONLY | O_DIRECTORY);
    if (src < 0)
        return errno == ENOENT || errno == ENOTDIR ? 0 : errno;
    char probe[512];
    long got = syscall(SYS_getdents64, src, probe, sizeof probe);
    int rc = 0;
    if (got > 48) { /* more than "." and ".." (24 bytes each) */
        lseek(src, 0, SEEK_SET);
        int dst = open(o->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        lis_tree_copy c = {.keep_owner = 1};
        rc = dst < 0 ? errno : -lis_copy_tree(src, dst, &c);
        if (dst >= 0)
            close(dst);
    }
    close(src);
    return rc;
}

static int run_op(const mount_op *o, int *rootfd, int *held)
{
    char fdp[32];
    int tfd = -1, rc = 0;
    const char *dst = o->dst;
    if (o->in_root && (o->kind == OP_MOUNT || o->kind == OP_BIND)) {
        tfd = target(*rootfd, o->dst, o->is_dir);
        if (tfd < 0)
            return -tfd;
        fd_path(tfd, fdp);
        dst = fdp;
    }
    switch (o->kind) {
    case OP_MOUNT: rc = mount(o->src, dst, o->fstype, o->flags, o->data) < 0 ? errno : 0; break;
    case OP_BIND:
        rc = mount(o->src ? o->src : dst, dst, NULL, MS_BIND | MS_REC, NULL) < 0 ? errno : 0;
        if (!rc && o->read_only)
            rc = make_read_only(*rootfd, o->dst);
        break;
    case OP_MKDIR:
        if (o->in_root) { /* mkdir -p inside the root, never through a symlink out */
            int fd = target(*rootfd, o->dst, 1);
            rc = fd < 0 ? -fd : 0;
            if (fd >= 0)
                close(fd);
        } else {
            rc = make_dir(o);
        }
        break;
    case OP_RDONLY: {
        struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
        rc = syscall(SYS_mount_setattr, *rootfd, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0 ? errno
                                                                                            : 0;
        break;
    }
    case OP_OPENROOT:
        *rootfd = open(dst, O_PATH | O_DIRECTORY | O_CLOEXEC);
        rc = *rootfd < 0 ? errno : 0;
        break;
    case OP_SYMLINK: {
        const char *slash = strrchr(o->dst, '/');
        char parent[PATH_MAX];
        size_t n = slash ? (size_t)(slash - o->dst) : 0;
        memcpy(parent, o->dst, n);
        parent[n] = 0;
        int pfd = n ? target(*rootfd, parent, 1) : dup(*rootfd);
        if (pfd < 0)
            return -pfd;
        rc = symlinkat(o->src, pfd, slash ? slash + 1 : o->dst) < 0 && errno != EEXIST ? errno : 0;
        close(pfd);
        break;
    }
    case OP_WRITE: rc = write_upper_file(o); break;
    case OP_OVERLAY: rc = mount_overlay(o); break;
    case OP_HOSTNAME: rc = sethostname(o->data, strlen(o->data)) < 0 ? errno : 0; break;
    case OP_LO_UP: rc = lo_up(); break;
    case OP_HOLD:
        *held = open(o->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        rc = *held < 0 ? errno : 0;
        break;
    case OP_FILLTMP: rc = fill_tmp(o, *rootfd); break;
    case OP_PIVOT:
        if (fchdir(*rootfd) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
            umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
            rc = errno;
        break;
    }
    if (tfd >= 0)
        close(tfd);
    return rc;
}

int lis_mount_plan_listener(const lis_mount_plan *plan, int life, const char **stage)
{
    if (!plan->listen_port)
        return 0;
    *stage = plan->listen_stage;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return errno;
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)plan->listen_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 1024) < 0) {
        int e = errno;
        close(s);
        return e;
    }
    int rc = lis_msg_send(life, LIS_MSG_LISTENER_FD, 0, 0, NULL, s) == 0 ? 0 : errno;
    close(s); /* the owner holds it now; nothing in the sandbox does */
    return rc;
}

int lis_mount_plan_run(const lis_mount_plan *plan, const char **stage, int *held)
{
    int rootfd = -1;
    *held = -1;
    for (int i = 0; i < plan->n; i++) {
        int rc = run_op(&plan->ops[i], &rootfd, held);
        if (rc && !plan->ops[i].optional) {
            *stage = plan->ops[i].stage;
            return rc;
        }
    }
    if (rootfd >= 0)
        close(rootfd);
    return 0;
}
