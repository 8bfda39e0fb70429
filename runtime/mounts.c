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
#include <sys/uio.h>
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
    int named;          /* OP_WRITE: data, the sandbox's name, "\n"; OP_HOSTNAME: the name */
    const char *stage;
} mount_op;

#define MAX_OPS 128
struct lis_mount_plan {
    mount_op ops[MAX_OPS];
    int n;
    int full;       /* an op or a string did not fit: the plan is refused (E2BIG) */
    mount_op spill; /* what add() hands out once the plan is full */
    char *arena;
    size_t used, cap;
    int listen_port;          /* spec.listen_port: open the listener after the plan */
    const char *listen_stage; /* its error stage, made by the owner */
    /* The plan holds no sandbox's name (it is given to lis_mount_plan_run),
     * so one plan serves every sandbox of a spec: the context keeps the last
     * one made (lis_mount_plan_get), refs counting its holders. */
    int refs;
    char key[2 * PATH_MAX + 128]; /* what it was made from; "" when it is no one else's */
};

/* The directories of a plan: the set-up tmpfs (base), the new root's mount
 * point, and the writable layer (in the tmpfs, or req's disk layer). */
typedef struct plan_dirs {
    char base[PATH_MAX], root[PATH_MAX + 16];
    const char *upper, *work;
    char tup[PATH_MAX + 16], twk[PATH_MAX + 16];
} plan_dirs;

/* A copy of s in the plan's arena (NULL stays NULL); a string that does not
 * fit marks the plan full. */
static const char *keep(lis_mount_plan *p, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    if (p->used + n > p->cap) {
        p->full = 1;
        return NULL;
    }
    char *d = p->arena + p->used;
    memcpy(d, s, n);
    p->used += n;
    return d;
}

/* The next op, cleared. Never NULL: past MAX_OPS the plan is marked full and
 * the op written is a spill slot that nothing runs, so the phases below fill
 * their ops without a check each and lis_mount_plan_new refuses the plan once,
 * at the end. */
static mount_op *add(lis_mount_plan *p, enum op_kind k, const char *stage)
{
    mount_op *o = &p->spill;
    if (p->n < MAX_OPS)
        o = &p->ops[p->n++];
    else
        p->full = 1;
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
static void mask_dirs(lis_mount_plan *p, const char *const *dirs, const char *stage)
{
    for (size_t i = 0; dirs[i]; i++) {
        mount_op *o = add(p, OP_MOUNT, stage);
        o->src = o->fstype = "tmpfs";
        o->dst = dirs[i];
        o->in_root = o->is_dir = o->optional = 1;
        o->flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
        o->data = "mode=0555,size=4k";
    }
}

/* The paths of the plan, checked for what overlayfs cannot take. */
static int plan_dirs_init(plan_dirs *d, lis_ctx *ctx, const lis_spawn_req *req, lis_error *err)
{
    snprintf(d->base, sizeof d->base, "%s/.mnt", ctx->run_dir);
    snprintf(d->root, sizeof d->root, "%s/root", d->base);
    d->upper = req->upper_dir;
    d->work = req->work_dir;
    if (!d->upper) {
        snprintf(d->tup, sizeof d->tup, "%s/upper", d->base);
        snprintf(d->twk, sizeof d->twk, "%s/work", d->base);
        d->upper = d->tup;
        d->work = d->twk;
    }
    if (bad_lower_chain(req->rootfs) || bad_overlay_path(d->upper) || bad_overlay_path(d->base))
        return lis_fail(err, EINVAL,
                        "paths used by overlayfs may not contain ',', ':' or '\\', and "
                        "a chain has at most %d layers (%s)",
                        LIS_MAX_LAYERS, bad_lower_chain(req->rootfs) ? req->rootfs : d->upper);
    return 0;
}

/* Phase 1: a private mount namespace and the set-up tmpfs, with the mount
 * point of the root, /tmp, /dev/shm and (tmpfs upper) the writable layer in it. */
static void plan_scratch(lis_mount_plan *p, const plan_dirs *d, const lis_spawn_req *req)
{
    mount_op *o = add(p, OP_MOUNT, "making the mount namespace private");
    o->dst = keep(p, "/");
    o->flags = MS_REC | MS_PRIVATE;
    /* A scratch tmpfs over the run dir, only in this mount namespace. It is
     * the sandbox's writable budget: the tmpfs upper layer, /tmp and
     * /dev/shm all live in it, so a writer gets ENOSPC at --disk and the
     * host never notices. Inodes are bounded too (each costs kernel memory
     * that size= does not count): one per 4 KiB of budget. */
    uint64_t budget = lis_disk_budget(&req->spec->limits), disk = budget;
    /* Under the fallback limits its size is also at most the memory limit: it
     * is RAM (a cgroup charges its pages to memory.max), and PID 1's watch
     * counts it with the processes' memory (init/memwatch.c). */
    if (req->fb_memory && req->fb_memory < disk)
        disk = req->fb_memory;
    char tmpfs_opts[96] = "mode=0755";
    if (disk != LIS_UNLIMITED) {
        /* inodes by the budget asked: files there are small more often than not */
        uint64_t asked = budget == LIS_UNLIMITED ? disk : budget;
        uint64_t inodes = asked / 4096 < 16384 ? 16384 : asked / 4096;
        snprintf(tmpfs_opts, sizeof tmpfs_opts, "mode=0755,size=%llu,nr_inodes=%llu",
                 (unsigned long long)disk, (unsigned long long)inodes);
    }
    o = add(p, OP_MOUNT, "mounting the set-up tmpfs");
    o->src = "tmpfs";
    o->fstype = "tmpfs";
    o->dst = keep(p, d->base);
    o->flags = MS_NOSUID | MS_NODEV;
    o->data = keep(p, tmpfs_opts);
    /* lis-init keeps this tmpfs open: after pivot_root it is reachable only
     * through that fd, which the owner opens as /proc/<pid>/fd/N to capture
     * the tmpfs upper layer and /tmp (capture.c). Nothing in the sandbox
     * can: lis-init is not dumpable and commands have no CAP_SYS_PTRACE. */
    o = add(p, OP_HOLD, "opening the set-up tmpfs");
    o->dst = keep(p, d->base);
    o = add(p, OP_MKDIR, "creating the root mount point");
    o->dst = keep(p, d->root);
    static const char *const scratch_dirs[] = {"tmp", "shm"};
    for (int i = 0; i < 2; i++) {
        char buf[PATH_MAX + 16];
        snprintf(buf, sizeof buf, "%s/%s", d->base, scratch_dirs[i]);
        o = add(p, OP_MKDIR, "creating /tmp and /dev/shm");
        o->dst = keep(p, buf);
        o->mode = 01777;
    }
    if (!req->upper_dir) {
        o = add(p, OP_MKDIR, "creating the tmpfs upper layer");
        o->dst = keep(p, d->upper);
        o = add(p, OP_MKDIR, "creating the tmpfs work dir");
        o->dst = keep(p, d->work);
    }
}

/* Phase 2: lis's own mount points and /etc files go into the upper layer
 * before the overlay is mounted, so a lower layer we cannot write (a
 * root-owned debootstrap, ids not mapped here) still starts; the merged /,
 * /etc and these dirs are then the sandbox's own. */
static void plan_upper(lis_mount_plan *p, const plan_dirs *d, const lis_spawn_req *req)
{
    const lis_sandbox_spec *spec = req->spec;
    static const char *const upper_dirs[] = {"etc", "proc", "dev", "sys", "tmp"};
    for (size_t i = 0; i < sizeof upper_dirs / sizeof upper_dirs[0]; i++) {
        mount_op *o = add(p, OP_MKDIR, "creating mount points in the upper layer");
        o->dst = upper_dirs[i];
        o->upper = keep(p, d->upper);
        o->in_upper = 1;
    }
    /* the last line names the host: spec.hostname, or the sandbox's name at run time */
    char hosts[512];
    snprintf(hosts, sizeof hosts,
             "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%s%s",
             spec->hostname ? spec->hostname : "", spec->hostname ? "\n" : "");
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
        char buf[64];
        snprintf(buf, sizeof buf, "etc/%s", etc[i]);
        mount_op *o =
            add(p, OP_WRITE, "writing /etc/hosts and /etc/resolv.conf into the upper layer");
        o->dst = keep(p, buf);
        o->data = keep(p, content[i]);
        o->named = i == 0 && !spec->hostname; /* /etc/hosts ends with the name */
        o->upper = keep(p, d->upper);
        o->in_upper = 1;
    }
}

/* Phase 3: the overlay root, opened for the phases that mount inside it. */
static void plan_overlay(lis_mount_plan *p, const plan_dirs *d, const lis_spawn_req *req)
{
    char stage[PATH_MAX + 64];
    snprintf(stage, sizeof stage, "mounting the overlay root (lower %s)", req->rootfs);
    mount_op *o = add(p, OP_OVERLAY, stage);
    o->src = keep(p, req->rootfs);
    o->upper = keep(p, d->upper);
    o->work = keep(p, d->work);
    o->dst = keep(p, d->root);
    /* A disk upper layer that is deleted with the sandbox needs no sync: without
     * `volatile` the unmount at PID 1's exit waits for the writeback of the
     * host filesystem (seconds when it is busy), and so does every destroy. */
    o->volatile_upper = req->upper_dir && !req->spec->persist;
    o = add(p, OP_OPENROOT, "opening the new root");
    o->dst = keep(p, d->root);
}

/* Phase 4: /proc, with what Docker and podman mask or make read-only in it
 * (SECURITY.md): /proc/keys and key-users list the host user's keyrings
 * (keyrings are per uid, not per namespace); the rest shows host kernel
 * state. Paths this kernel lacks are skipped. */
static void plan_proc(lis_mount_plan *p)
{
    mount_op *o = add(p, OP_MOUNT, "mounting /proc");
    o->src = o->fstype = "proc";
    o->dst = "proc";
    o->in_root = o->is_dir = 1;
    o->flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
    static const char *const masked_files[] = {"proc/kcore",        "proc/keys",
                                               "proc/key-users",    "proc/timer_list",
                                               "proc/timer_stats",  "proc/sched_debug",
                                               "proc/latency_stats"};
    for (size_t i = 0; i < sizeof masked_files / sizeof masked_files[0]; i++) {
        o = add(p, OP_BIND, "masking /proc files");
        o->src = "/dev/null";
        o->dst = masked_files[i];
        o->in_root = o->optional = 1;
        o->read_only = 1;
    }
    static const char *const masked_dirs[] = {"proc/acpi", "proc/scsi", "proc/asound", NULL};
    mask_dirs(p, masked_dirs, "masking /proc directories");
    static const char *const ro_proc[] = {"proc/sys", "proc/bus", "proc/fs", "proc/irq",
                                          "proc/sysrq-trigger"};
    for (size_t i = 0; i < sizeof ro_proc / sizeof ro_proc[0]; i++) {
        o = add(p, OP_BIND, "making /proc/sys, bus, fs, irq and sysrq-trigger read-only");
        o->dst = ro_proc[i];
        o->in_root = o->read_only = 1;
        o->is_dir = i < 4;
        o->optional = i > 0; /* /proc/sys always exists */
    }
}

/* Phase 5: a minimal /dev: a tmpfs with six host nodes bound in, a private
 * devpts, the usual links, and /dev/shm from the set-up tmpfs. */
static void plan_dev(lis_mount_plan *p, const plan_dirs *d, const lis_spawn_req *req)
{
    mount_op *o = add(p, OP_MOUNT, "mounting /dev");
    o->src = o->fstype = "tmpfs";
    o->dst = "dev";
    o->in_root = o->is_dir = 1;
    o->flags = MS_NOSUID | MS_NOEXEC;
    o->data = "mode=0755,size=1m";
    static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        char buf[64], stage[64];
        snprintf(buf, sizeof buf, "/dev/%s", nodes[i]);
        snprintf(stage, sizeof stage, "binding /dev/%s", nodes[i]);
        o = add(p, OP_BIND, stage);
        o->src = keep(p, buf);
        o->dst = o->src ? o->src + 1 : NULL;
        o->in_root = 1;
    }
    o = add(p, OP_MOUNT, "mounting /dev/pts");
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
        o = add(p, OP_SYMLINK, "creating /dev links");
        o->src = links[i][0];
        o->dst = links[i][1];
        o->in_root = 1;
    }
    if (req->spec->shm_bytes) { /* a size of its own (Docker's --shm-size), beside the budget */
        uint64_t shm_bytes = req->spec->shm_bytes;
        uint64_t inodes = shm_bytes / 4096 < 1024 ? 1024 : shm_bytes / 4096;
        char data[96];
        snprintf(data, sizeof data, "mode=1777,size=%llu,nr_inodes=%llu",
                 (unsigned long long)shm_bytes, (unsigned long long)inodes);
        o = add(p, OP_MOUNT, "mounting /dev/shm");
        o->src = o->fstype = "tmpfs";
        o->data = keep(p, data);
        o->flags = MS_NOSUID | MS_NODEV;
    } else {
        char shm[PATH_MAX + 16];
        snprintf(shm, sizeof shm, "%s/shm", d->base);
        o = add(p, OP_BIND, "mounting /dev/shm");
        o->src = keep(p, shm);
    }
    o->dst = "dev/shm";
    o->in_root = o->is_dir = 1;
}

/* Phase 6: a read-only /sys (sysfs needs a network namespace owned by our
 * user namespace: not with the host network), firmware and powercap masked. */
static void plan_sys(lis_mount_plan *p, const lis_spawn_req *req)
{
    if (req->spec->net == LIS_NET_HOST)
        return;
    mount_op *o = add(p, OP_MOUNT, "mounting /sys");
    o->src = o->fstype = "sysfs";
    o->dst = "sys";
    o->in_root = o->is_dir = 1;
    o->flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
    o->optional = 1;
    static const char *const masked_sys[] = {"sys/firmware", "sys/devices/virtual/powercap", NULL};
    mask_dirs(p, masked_sys, "masking /sys/firmware");
}

/* Phase 7: /tmp from the set-up tmpfs, with what the image (a snapshot
 * layer) holds in its /tmp copied in first. */
static void plan_tmp(lis_mount_plan *p, const plan_dirs *d, const lis_spawn_req *req)
{
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s/tmp", d->base);
    mount_op *o = add(p, OP_FILLTMP, "copying the image's /tmp into the sandbox's /tmp");
    o->src = keep(p, tmp);
    o->in_root = 1;
    o = add(p, OP_BIND, "mounting /tmp");
    o->src = keep(p, tmp);
    o->dst = "tmp";
    o->in_root = o->is_dir = 1;
    o->read_only = req->spec->read_only_root; /* Docker's --read-only: /tmp is the root's */
}

/* Phase 8: the caller's binds, each checked here (a bad one fails the plan). */
static int plan_binds(lis_mount_plan *p, const lis_sandbox_spec *spec, lis_error *err)
{
    for (size_t i = 0; i < spec->nbinds; i++) {
        const lis_bind *b = &spec->binds[i];
        struct stat st;
        if (!b->host_path || !b->path || b->path[0] != '/')
            return lis_fail(err, EINVAL, "bind %zu: needs a host path and an absolute sandbox path",
                            i);
        if (stat(b->host_path, &st) < 0)
            return lis_fail_errno(err, "bind source %s", b->host_path);
        if (lis_path_check(b->path, err) < 0)
            return lis_wrap(err, "bind target");
        char stage[2 * PATH_MAX + 32];
        snprintf(stage, sizeof stage, "binding %s at %s", b->host_path, b->path);
        mount_op *o = add(p, OP_BIND, stage);
        o->src = keep(p, b->host_path);
        const char *rel = b->path;
        while (*rel == '/')
            rel++;
        o->dst = keep(p, *rel ? rel : ".");
        o->in_root = 1;
        o->is_dir = S_ISDIR(st.st_mode);
        o->read_only = b->read_only;
    }
    return 0;
}

/* Phase 9: the listener (opened after the plan, lis_mount_plan_listener),
 * the hostname, loopback, and pivot_root into the new root. */
static void plan_finish(lis_mount_plan *p, const lis_spawn_req *req)
{
    const lis_sandbox_spec *spec = req->spec;
    if (spec->net != LIS_NET_HOST && spec->listen_port) {
        char buf[64];
        p->listen_port = spec->listen_port;
        snprintf(buf, sizeof buf, "opening the listener on 127.0.0.1:%u", spec->listen_port);
        p->listen_stage = keep(p, buf);
    }
    mount_op *o = add(p, OP_HOSTNAME, "setting the hostname");
    o->data = keep(p, spec->hostname); /* NULL: the sandbox's name, at run time */
    o->named = !spec->hostname;
    if (spec->net != LIS_NET_HOST)
        add(p, OP_LO_UP, "bringing up loopback");
    add(p, OP_PIVOT, "pivoting into the new root");
}

lis_mount_plan *lis_mount_plan_new(lis_ctx *ctx, const lis_spawn_req *req, lis_error *err)
{
    plan_dirs d;
    if (plan_dirs_init(&d, ctx, req, err) < 0)
        return NULL;
    lis_mount_plan *p = calloc(1, sizeof *p);
    if (!p || !(p->arena = malloc(p->cap = 64 * 1024))) {
        free(p);
        lis_oom(err);
        return NULL;
    }
    p->refs = 1;
    plan_scratch(p, &d, req);
    plan_upper(p, &d, req);
    plan_overlay(p, &d, req);
    plan_proc(p);
    plan_dev(p, &d, req);
    plan_sys(p, req);
    plan_tmp(p, &d, req);
    int rc = plan_binds(p, req->spec, err);
    if (rc == 0) /* what a container asked for, over every other mount of the root */
        rc = plan_options(p, req->spec, err);
    plan_finish(p, req);
    if (rc == 0 && p->full)
        rc = lis_fail(err, E2BIG, "too many mounts or paths for one sandbox");
    if (rc < 0) {
        lis_mount_plan_free(p);
        return NULL;
    }
    return p;
}

void lis_mount_plan_free(lis_mount_plan *p)
{
    if (p) {
        free(p->arena);
        free(p);
    }
}

/* What a plan is made from, but the sandbox's name, in key: 1 when another
 * sandbox of the same spec can use it. A disk upper layer (its paths), binds
 * (their sources are stat'ed) and the host's network (its resolv.conf is
 * read) are made for one sandbox each. */
static int plan_key(const lis_ctx *ctx, const lis_spawn_req *req, char *key, size_t len)
{
    const lis_sandbox_spec *spec = req->spec;
    if (req->upper_dir || spec->nbinds || spec->net == LIS_NET_HOST || spec->ntmpfs ||
        spec->workdir || spec->read_only_root || spec->shm_bytes)
        return 0;
    int n =
        snprintf(key, len, "%s|%s|%llu|%llu|%d|%u|%d|%s%s", ctx->run_dir, req->rootfs,
                 (unsigned long long)lis_disk_budget(&spec->limits),
                 (unsigned long long)req->fb_memory, (int)spec->net, spec->listen_port,
                 req->full_map, spec->hostname ? "h=" : "", spec->hostname ? spec->hostname : "");
    return n > 0 && (size_t)n < len;
}

lis_mount_plan *lis_mount_plan_get(lis_ctx *ctx, const lis_spawn_req *req, lis_error *err)
{
    struct lis_plan_cache *c = &ctx->plans;
    char key[sizeof((lis_mount_plan *)0)->key];
    int shared = plan_key(ctx, req, key, sizeof key);
    if (shared) {
        pthread_mutex_lock(&c->mu);
        lis_mount_plan *p = c->plan;
        if (p && !strcmp(p->key, key))
            p->refs++;
        else
            p = NULL;
        pthread_mutex_unlock(&c->mu);
        if (p)
            return p;
    }
    lis_mount_plan *p = lis_mount_plan_new(ctx, req, err);
    if (!p || !shared)
        return p;
    memcpy(p->key, key, sizeof key);
    pthread_mutex_lock(&c->mu);
    lis_mount_plan *old = c->plan;
    c->plan = p;
    p->refs++; /* the context's */
    pthread_mutex_unlock(&c->mu);
    lis_mount_plan_put(ctx, old);
    return p;
}

void lis_mount_plan_put(lis_ctx *ctx, lis_mount_plan *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&ctx->plans.mu);
    int last = --p->refs == 0;
    pthread_mutex_unlock(&ctx->plans.mu);
    if (last)
        lis_mount_plan_free(p);
}

void lis_mount_plan_cache_free(lis_ctx *ctx)
{
    lis_mount_plan_put(ctx, ctx->plans.plan);
    ctx->plans.plan = NULL;
}

/* ---- child side: no allocation below this line ----
 * The child may run in its owner's address space (spawn.c, CLONE_VM): the
 * plan is read only (another creator may be using it at the same time), and
 * everything written is on the child's stack, in *stage / *held (the
 * child's locals) or in the arena its creator mapped for it. */

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

static int write_upper_file(const mount_op *o, const char *name)
{
    int fd = open_upper(o, o->dst, O_CREAT | O_WRONLY | O_TRUNC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -fd;
    struct iovec v[3] = {{(void *)o->data, strlen(o->data)},
                         {(void *)name, o->named ? strlen(name) : 0},
                         {"\n", o->named ? 1 : 0}};
    ssize_t want = (ssize_t)(v[0].iov_len + v[1].iov_len + v[2].iov_len);
    int rc = writev(fd, v, 3) == want ? 0 : EIO;
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
static int fill_tmp(const mount_op *o, int rootfd, char *arena)
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
        lis_tree_copy c = {.keep_owner = 1, .arena = arena};
        rc = dst < 0 ? errno : -lis_copy_tree(src, dst, &c);
        if (dst >= 0)
            close(dst);
    }
    close(src);
    return rc;
}

static int run_op(const mount_op *o, const char *name, char *arena, int *rootfd, int *held)
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
    case OP_WRITE: rc = write_upper_file(o, name); break;
    case OP_OVERLAY: rc = mount_overlay(o); break;
    case OP_HOSTNAME: {
        const char *h = o->named ? name : o->data;
        rc = sethostname(h, strlen(h)) < 0 ? errno : 0;
        break;
    }
    case OP_LO_UP: rc = lo_up(); break;
    case OP_HOLD:
        *held = open(o->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        rc = *held < 0 ? errno : 0;
        break;
    case OP_FILLTMP: rc = fill_tmp(o, *rootfd, arena); break;
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

int lis_mount_plan_run(const lis_mount_plan *plan, const char *name, char *arena,
                       const char **stage, int *held)
{
    int rootfd = -1;
    *held = -1;
    for (int i = 0; i < plan->n; i++) {
        int rc = run_op(&plan->ops[i], name, arena, &rootfd, held);
        if (rc && !plan->ops[i].optional) {
            *stage = plan->ops[i].stage;
            return rc;
        }
    }
    if (rootfd >= 0)
        close(rootfd);
    return 0;
}
