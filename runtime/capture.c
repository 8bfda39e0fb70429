/* capture.c - a sandbox's writable layer copied out, for snapshots (issue
 * 15; the store's side is rootfs/snapshot.c).
 *
 * Where the layer is: a disk upper layer is <layer_dir>/upper on the host; a
 * tmpfs upper layer and /tmp live in the set-up tmpfs, which after
 * pivot_root only lis-init holds (its fd scratch_fd, mounts.c). The owner
 * opens it as /proc/<pid>/fd/N: allowed to the owner of the sandbox's user
 * namespace, never to the sandbox's own processes (lis-init is not dumpable
 * and commands lack CAP_SYS_PTRACE). Both are opened before the sandbox is
 * paused, so it is stopped only for the copy itself.
 *
 * The copy runs as root of the holder user namespace (lis_run_mapped) when
 * the sandbox has a full id map, so files of every id keep their owner and
 * unreadable modes are no obstacle; else as the owner, who owns them all. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <poll.h>
#include <sys/statfs.h>
#include <unistd.h>

const char *const *lis_sandbox_env(const lis_sandbox *sb) { return (const char *const *)sb->env; }

lis_net_mode lis_sandbox_net(const lis_sandbox *sb) { return (lis_net_mode)sb->net; }

lis_limits lis_sandbox_limits(const lis_sandbox *sb) { return sb->limits; }

const char *lis_sandbox_rootfs(const lis_sandbox *sb) { return sb->rootfs; }

struct capture_job {
    int upper, tmp, dest; /* tmp may be -1 */
    int keep_owner;
    uint64_t max_bytes; /* the sandbox's disk budget: what a snapshot may hold */
    const lis_capture_opts *opts;
};

struct capture_out {
    lis_tree_copy c;
    unsigned char digest[64];
};

/* In the copying child (mapped or not): no allocation. */
static int copy_layer(void *arg, void *result, lis_error *err)
{
    struct capture_job *j = arg;
    struct capture_out *o = result;
    o->c.keep_owner = j->keep_owner;
    o->c.max_bytes = j->max_bytes;
    if (j->opts && j->opts->hash) {
        o->c.hash = j->opts->hash;
        o->c.hash_arg = j->opts->arg;
    }
    int rc = lis_copy_tree(j->upper, j->dest, &o->c);
    if (rc == -EFBIG)
        return lis_fail(err, EFBIG, "its files hold more than its disk budget of %llu bytes",
                        (unsigned long long)j->max_bytes);
    if (rc)
        return lis_fail_errnum(err, -rc, "copying the writable layer (at %s)", o->c.where);
    if (j->tmp >= 0) {
        if (o->c.hash)
            o->c.hash(o->c.hash_arg, "\0/tmp\0", 6); /* the second tree starts */
        if (mkdirat(j->dest, "tmp", 01777) < 0 && errno != EEXIST)
            return lis_fail_errno(err, "creating tmp/ in the snapshot");
        int d = openat(j->dest, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d < 0)
            return lis_fail_errno(err, "opening tmp/ in the snapshot");
        rc = lis_copy_tree(j->tmp, d, &o->c);
        close(d);
        if (rc == -EFBIG)
            return lis_fail(err, EFBIG,
                            "its files hold more than its disk budget of %llu "
                            "bytes",
                            (unsigned long long)j->max_bytes);
        if (rc)
            return lis_fail_errnum(err, -rc, "copying /tmp (at %s)", o->c.where);
    }
    if (j->opts && j->opts->hash_end)
        j->opts->hash_end(j->opts->arg, o->digest);
    return 0;
}

/* Its PID 1 has not exited (a zombie not yet reaped counts as gone). */
static int sandbox_alive(const lis_sandbox *sb)
{
    struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
    return sb->pidfd >= 0 && poll(&p, 1, 0) == 0;
}

/* The set-up tmpfs of sb as lis-init holds it, O_RDONLY; -1 (err) if none. */
static int open_scratch(lis_sandbox *sb, lis_error *err)
{
    if (sb->scratch_fd < 0)
        return lis_fail(err, ENOTSUP,
                        "sandbox %s was made by an older lis that keeps no handle "
                        "on its writable layer: it cannot be snapshotted (recreate it)",
                        sb->name);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)sb->pid, sb->scratch_fd);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return lis_fail_errno(err, "sandbox %s: opening its writable layer (%s)", sb->name, path);
    struct statfs fs;
    if (fstatfs(fd, &fs) < 0 || fs.f_type != TMPFS_MAGIC) {
        close(fd);
        return lis_fail(err, EIO, "sandbox %s: %s is not its set-up tmpfs", sb->name, path);
    }
    return fd;
}

int lis_sandbox_upper_fd(lis_sandbox *sb, lis_error *err)
{
    int fd;
    if (sb->layer_dir[0]) {
        char up[PATH_MAX + 16];
        snprintf(up, sizeof up, "%s/upper", sb->layer_dir);
        fd = open(up, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    } else {
        int scratch = open_scratch(sb, err);
        if (scratch < 0)
            return -1;
        fd = openat(scratch, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(scratch);
    }
    if (fd < 0)
        return lis_fail_errno(err, "sandbox %s: opening its upper layer", sb->name);
    return fd;
}

int lis_sandbox_scratch_dir_fd(lis_sandbox *sb, const char *name, lis_error *err)
{
    if (strcmp(name, "tmp") && strcmp(name, "shm"))
        return lis_fail(err, EINVAL, "no scratch directory %s (tmp or shm)", name);
    int scratch = open_scratch(sb, err);
    if (scratch < 0)
        return -1;
    int fd = openat(scratch, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(scratch);
    if (fd < 0)
        return lis_fail_errno(err, "sandbox %s: opening its %s", sb->name, name);
    return fd;
}

int lis_sandbox_capture(lis_sandbox *sb, const char *dest, const lis_capture_opts *opts,
                        lis_capture_info *info, lis_error *err)
{
    memset(info, 0, sizeof *info);
    if (!sandbox_alive(sb))
        return lis_fail(err, ESRCH, "sandbox %s is not running", sb->name);
    struct capture_job j = {.upper = -1,
                            .tmp = -1,
                            .dest = -1,
                            .keep_owner = sb->full_map,
                            .max_bytes = sb->disk_limit == LIS_UNLIMITED ? 0 : sb->disk_limit,
                            .opts = opts};
    int scratch = open_scratch(sb, err);
    if (scratch < 0)
        return -1;
    int rc = -1, made = 0;
    if (sb->layer_dir[0]) {
        char up[PATH_MAX + 16];
        snprintf(up, sizeof up, "%s/upper", sb->layer_dir);
        j.upper = open(up, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    } else {
        j.upper = openat(scratch, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (j.upper < 0) {
        lis_fail_errno(err, "sandbox %s: opening its upper layer", sb->name);
        goto out;
    }
    j.tmp = openat(scratch, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (mkdir(dest, 0700) < 0) {
        lis_fail_errno(err, "creating %s", dest);
        goto out;
    }
    made = 1;
    j.dest = open(dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (j.dest < 0) {
        lis_fail_errno(err, "opening %s", dest);
        goto out;
    }
    int was_paused = lis_sandbox_is_paused(sb);
    double t0 = lis_now();
    if (!was_paused && lis_sandbox_pause(sb, err) < 0)
        goto out;
    struct capture_out res = {0};
    if (sb->full_map)
        rc = lis_run_mapped(sb->ctx, copy_layer, &j, &res, sizeof res, err);
    else
        rc = copy_layer(&j, &res, err);
    lis_error rerr = {0};
    if (!was_paused && lis_sandbox_resume(sb, &rerr) < 0 && rc == 0) {
        *err = rerr;
        rc = -1;
    }
    info->paused_ms = (lis_now() - t0) * 1000;
    info->files = res.c.files;
    info->bytes = res.c.bytes;
    info->reflinked = res.c.reflinked;
    memcpy(info->digest, res.digest, sizeof info->digest);
    if (rc < 0)
        lis_wrap(err, "snapshot of sandbox %s", sb->name);
out:
    if (rc < 0 && made) {
        lis_error ignore;
        lis_rmtree(sb->ctx, dest, sb->full_map, &ignore);
    }
    if (j.upper >= 0)
        close(j.upper);
    if (j.tmp >= 0)
        close(j.tmp);
    if (j.dest >= 0)
        close(j.dest);
    close(scratch);
    return rc;
}
