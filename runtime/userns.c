/* userns.c - uid/gid maps of a sandbox's user namespace, and removing trees
 * whose files may belong to subordinate ids. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <linux/sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int write_file(pid_t pid, const char *what, const char *text, lis_error *err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, what);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return lis_fail_errno(err, "open %s", path);
    ssize_t n = write(fd, text, strlen(text));
    int e = errno;
    close(fd);
    if (n != (ssize_t)strlen(text))
        return lis_fail(err, e, "write %s: %s%s", path, strerror(e),
                        e == EPERM && lis_apparmor_restricts_userns(NULL) ? LIS_APPARMOR_HINT : "");
    return 0;
}

static int spawn_map_tool(const char *tool, pid_t pid, unsigned long id, const lis_subid *sub,
                          pid_t *child)
{
    char spid[16], sid[16], sstart[24], scount[24];
    snprintf(spid, sizeof spid, "%d", (int)pid);
    snprintf(sid, sizeof sid, "%lu", id);
    snprintf(sstart, sizeof sstart, "%lu", sub->start);
    snprintf(scount, sizeof scount, "%lu", 65535ul);
    char *argv[] = {(char *)tool, spid, "0", sid, "1", "1", sstart, scount, NULL};
    return posix_spawn(child, tool, NULL, NULL, argv, environ);
}

int lis_write_id_maps(lis_ctx *ctx, pid_t pid, int full, lis_error *err)
{
    if (full && ctx->uid == 0) {
        /* root needs no helper: ids 0-65535 map to themselves, so a rootfs
         * owned by any ordinary user stays usable (the rootful fallback) */
        if (write_file(pid, "uid_map", "0 0 65536\n", err) < 0)
            return -1;
        return write_file(pid, "gid_map", "0 0 65536\n", err);
    }
    if (!full) {
        char map[64];
        if (write_file(pid, "setgroups", "deny", err) < 0)
            return -1;
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)ctx->uid);
        if (write_file(pid, "uid_map", map, err) < 0)
            return -1;
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)ctx->gid);
        return write_file(pid, "gid_map", map, err);
    }
    /* newuidmap and newgidmap are independent: run them side by side. */
    pid_t u = -1, g = -1;
    int rc = spawn_map_tool(ctx->newuidmap, pid, ctx->uid, &ctx->subuid, &u);
    if (rc == 0)
        rc = spawn_map_tool(ctx->newgidmap, pid, ctx->gid, &ctx->subgid, &g);
    int su = 0, sg = 0;
    if (u > 0)
        waitpid(u, &su, 0);
    if (g > 0)
        waitpid(g, &sg, 0);
    if (rc)
        return lis_fail_errnum(err, rc, "running newuidmap/newgidmap");
    if (!WIFEXITED(su) || WEXITSTATUS(su) || !WIFEXITED(sg) || WEXITSTATUS(sg))
        return lis_fail(err, EPERM,
                        "newuidmap/newgidmap refused the subordinate range of uid %u "
                        "(check /etc/subuid and /etc/subgid, or use --uidmap single)",
                        (unsigned)ctx->uid);
    return 0;
}

/* fork() without SIGCHLD to the owner (which may have its own handler). */
static pid_t quiet_fork(void)
{
    struct clone_args ca = {.exit_signal = 0};
    return (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
}

static void reap(pid_t pid, int *status)
{
    int st = 0;
    while (waitpid(pid, &st, __WALL) < 0 && errno == EINTR)
        ;
    if (status)
        *status = st;
}

struct holder_search {
    struct stat self;
    uid_t uid;
    int found; /* the holder's fd, -1 until found */
};

/* The parent user namespace of a live full-map sandbox, when it is a holder
 * of ours: kept in h->found, and 1 stops the search. */
static int holder_of(const char *dir, const char *name, const lis_meta *m, void *arg)
{
    struct holder_search *h = arg;
    if (!m || !m->full_map || !lis_meta_alive(m))
        return 0;
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/ns/user", (int)m->pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    int parent = fd >= 0 ? ioctl(fd, NS_GET_PARENT) : -1;
    if (fd >= 0)
        close(fd);
    struct stat st;
    uid_t owner = (uid_t)-1;
    /* ours, and not our own namespace (a sandbox made without a holder) */
    if (parent >= 0 && fstat(parent, &st) == 0 &&
        (st.st_ino != h->self.st_ino || st.st_dev != h->self.st_dev) &&
        ioctl(parent, NS_GET_OWNER_UID, &owner) == 0 && owner == h->uid) {
        h->found = parent;
        return 1;
    }
    if (parent >= 0)
        close(parent);
    return 0;
}

/* The holder user namespace another lis process made lives on as the parent
 * of the user namespace of each full-map sandbox it created: a new process
 * can reuse it (NS_GET_PARENT) instead of running newuidmap/newgidmap again. */
static int find_holder(lis_ctx *ctx)
{
    struct holder_search h = {.uid = ctx->uid, .found = -1};
    lis_error ignore;
    if (stat("/proc/self/ns/user", &h.self) < 0)
        return -1;
    lis_meta_each(ctx->run_dir, holder_of, &h, &ignore);
    return h.found;
}

int lis_holder_userns(lis_ctx *ctx, lis_error *err)
{
    if (lis_ctx_prepare_spawn(ctx, err) < 0)
        return -1;
    pthread_mutex_lock(&ctx->holder_lock);
    if (ctx->holder_fd < 0 && ctx->uid != 0)
        ctx->holder_fd = find_holder(ctx);
    if (ctx->holder_fd >= 0) {
        pthread_mutex_unlock(&ctx->holder_lock);
        return ctx->holder_fd;
    }
    int rc = -1, ready[2], hold[2];
    if (pipe2(ready, O_CLOEXEC) < 0) {
        pthread_mutex_unlock(&ctx->holder_lock);
        return lis_fail_errno(err, "pipe");
    }
    if (pipe2(hold, O_CLOEXEC) < 0) {
        close(ready[0]);
        close(ready[1]);
        pthread_mutex_unlock(&ctx->holder_lock);
        return lis_fail_errno(err, "pipe");
    }
    pid_t pid = quiet_fork();
    if (pid == 0) {
        /* No allocation here: the owner may be multi-threaded. */
        close(ready[0]);
        close(hold[1]);
        char ok = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        char c;
        while (read(hold[0], &c, 1) > 0)
            ;
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    char ok = 'n';
    if (pid < 0)
        lis_fail_errno(err, "fork");
    else if (read(ready[0], &ok, 1) != 1 || ok != 'y')
        lis_fail(err, EPERM, "cannot create a user namespace (run `lis doctor`)");
    else if (lis_write_id_maps(ctx, pid, 1, err) == 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
        ctx->holder_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (ctx->holder_fd < 0)
            lis_fail_errno(err, "open %s", path);
        else
            rc = ctx->holder_fd;
    }
    close(hold[1]);
    close(ready[0]);
    if (pid > 0)
        reap(pid, NULL);
    pthread_mutex_unlock(&ctx->holder_lock);
    return rc;
}

/* Files created inside a sandbox with a full map may belong to subordinate
 * ids that the owner cannot touch; delete them as root of the holder user
 * namespace, which has the same map. */
static int rmtree_mapped(lis_ctx *ctx, const char *path, lis_error *err)
{
    int holder = lis_holder_userns(ctx, err);
    if (holder < 0)
        return -1;
    pid_t pid = quiet_fork();
    if (pid < 0)
        return lis_fail_errno(err, "fork");
    if (pid == 0)
        _exit(setns(holder, CLONE_NEWUSER) == 0 && lis_rmtree_here(path) == 0 ? 0 : 1);
    int st;
    reap(pid, &st);
    if (!WIFEXITED(st) || WEXITSTATUS(st))
        return lis_fail(err, EIO, "could not remove %s inside a mapped user namespace", path);
    return 0;
}

int lis_rmtree(lis_ctx *ctx, const char *path, int full_map, lis_error *err)
{
    int rc = lis_rmtree_here(path);
    if (rc == 0)
        return 0;
    /* EACCES/EPERM deep inside come back as ENOTEMPTY of a parent: any failure
     * is worth one try as root of the mapped namespace */
    lis_error ignore;
    if (full_map && lis_ctx_prepare_spawn(ctx, &ignore) == 0 &&
        (ctx->uid == 0 || (ctx->newuidmap[0] && ctx->subuid.count)))
        return rmtree_mapped(ctx, path, err);
    return lis_fail_errnum(err, -rc, "removing %s", path);
}

int lis_run_mapped(lis_ctx *ctx, int (*fn)(void *arg, void *result, lis_error *err), void *arg,
                   void *result, size_t result_len, lis_error *err)
{
    if (lis_ctx_prepare_spawn(ctx, err) < 0)
        return -1;
    if (ctx->uid != 0 && !(ctx->newuidmap[0] && ctx->subuid.count && ctx->subgid.count))
        return lis_fail(err, ENOTSUP,
                        "uid %u has no subordinate id range (newuidmap and "
                        "/etc/subuid, /etc/subgid)",
                        (unsigned)ctx->uid);
    int holder = lis_holder_userns(ctx, err);
    if (holder < 0)
        return -1;
    struct shared {
        int rc;
        lis_error err;
        /* the caller's struct comes back here: aligned for any type (it holds
         * uint64_t; lis_error's size alone would leave it 4-aligned) */
        _Alignas(max_align_t) unsigned char result[];
    } * sh;
    size_t len = sizeof *sh + result_len;
    sh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return lis_fail_errno(err, "mmap");
    sh->rc = -1;
    lis_fail(&sh->err, EIO, "the mapped child died");
    if (result_len)
        memcpy(sh->result, result, result_len);
    /* fork(), not quiet_fork(): fn may allocate (libarchive extracting an
     * image), and only glibc's fork makes malloc usable in the child of a
     * threaded owner (it holds the arena locks across the fork). The status
     * is not needed: the result comes back through sh. */
    pid_t pid = fork();
    if (pid < 0) {
        munmap(sh, len);
        return lis_fail_errno(err, "fork");
    }
    if (pid == 0) {
        if (setns(holder, CLONE_NEWUSER) < 0) {
            lis_fail_errno(&sh->err, "entering the mapped user namespace");
            _exit(1);
        }
        memset(&sh->err, 0, sizeof sh->err);
        sh->rc = fn(arg, result_len ? (void *)sh->result : NULL, &sh->err);
        _exit(0);
    }
    reap(pid, NULL);
    int rc = sh->rc;
    if (rc < 0 && err)
        *err = sh->err;
    if (result_len)
        memcpy(result, sh->result, result_len);
    munmap(sh, len);
    return rc;
}
