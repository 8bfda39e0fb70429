/* spawn.c - one clone3 into new user, mount, pid, uts, ipc, net and cgroup
 * namespaces; the child builds the root (mounts.c), hardens itself and execs
 * lis-init as PID 1.
 *
 * The child shares its owner's address space until the exec (CLONE_VM, on a
 * stack of its own: vmclone.c): a fork would copy the page tables of an
 * owner that may hold hundreds of episodes and make every owner thread fault
 * copy-on-write until the exec. So, in the child (child_main and what it
 * calls: mounts.c's child side, copytree.c, load_filter, apply_rlimits,
 * send_msg):
 *  - nothing is allocated and no lock is taken: everything it needs is
 *    prepared here, before the clone;
 *  - it writes no memory but its own stack and the arena its creator mapped
 *    for it: the plan, req, the seccomp fds, ctx and init_args are read only
 *    (a cached plan is read by other creators' children at the same time);
 *  - what it reads stays alive until it has exec'd (READY is sent by
 *    lis-init, after the exec) or been killed and reaped: lis_spawn returns,
 *    unmaps the stack and drops the plan only after one of these;
 *  - it runs with every signal blocked (set by the creator around the clone;
 *    lis-init sets its own mask), so no handler of the owner ever runs on
 *    the owner's memory from the child; SIGKILL still ends it;
 *  - it shares the creator thread's TLS (errno, glibc's cancellation word):
 *    before GO it only closes fds and clears FD_CLOEXEC on fds it holds
 *    (calls that do not fail, so no errno is written) while the creator
 *    writes the id maps; after GO the creator only sits in poll/recvmsg,
 *    and a failure of those (the only way it writes errno) kills the child.
 *    glibc's cancellation word is only changed with atomic operations that
 *    each side undoes, and lis never cancels a thread;
 *  - its fd table and fs struct are its own (no CLONE_FILES, no CLONE_FS);
 *    rlimits, nice, no_new_privs and the seccomp filter (no TSYNC) are set on
 *    the child's own task/process only.
 * Under ASan, and off x86-64, the child is a fork of the owner instead
 * (LIS_VM_CLONE 0, internal.h), with the same code. */
#include "internal.h"
#include "mounts.h"
#include "proto.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

static int send_msg(int fd, uint32_t type, int32_t a, const char *text)
{
    return lis_msg_send(fd, type, a, 0, text, -1);
}

/* Closes every fd except those in keep[] (n entries, any order). */
static void close_all_but(const int *keep, int n)
{
    int sorted[8], m = 0;
    for (int i = 0; i < n; i++)
        if (keep[i] >= 0)
            sorted[m++] = keep[i];
    for (int i = 1; i < m; i++)
        for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            int t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    unsigned lo = 0;
    for (int i = 0; i < m; i++) {
        if ((unsigned)sorted[i] > lo)
            syscall(SYS_close_range, lo, (unsigned)sorted[i] - 1, 0);
        lo = (unsigned)sorted[i] + 1;
    }
    syscall(SYS_close_range, lo, ~0u, 0);
}

static void itoa10(int v, char *buf)
{
    char tmp[16];
    int n = 0, neg = v < 0;
    unsigned u = neg ? -(unsigned)v : (unsigned)v;
    do
        tmp[n++] = '0' + u % 10;
    while ((u /= 10));
    if (neg)
        *buf++ = '-';
    while (n)
        *buf++ = tmp[--n];
    *buf = 0;
}

static void utoa10(uint64_t v, char *buf)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = '0' + v % 10;
    while ((v /= 10));
    while (n)
        *buf++ = tmp[--n];
    *buf = 0;
}

/* Loads a classic BPF program from a sealed memfd; no allocation (the
 * program is at most BPF_MAXINSNS instructions, read onto the stack). */
static int load_filter(int fd)
{
    struct sock_filter insns[BPF_MAXINSNS];
    ssize_t n = pread(fd, insns, sizeof insns, 0);
    close(fd);
    if (n <= 0 || n % (ssize_t)sizeof insns[0])
        return EINVAL;
    struct sock_fprog prog = {.len = (unsigned short)(n / (ssize_t)sizeof insns[0]),
                              .filter = insns};
    return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0 ? errno : 0;
}

/* Fallback limits and the per-file size cap, before lis-init. Hard limits
 * too: raising them back needs CAP_SYS_RESOURCE in the initial namespace. */
static int apply_rlimits(const lis_spawn_req *req)
{
    if (req->fb_pids) {
        struct rlimit rl = {req->fb_pids, req->fb_pids};
        if (setrlimit(RLIMIT_NPROC, &rl) < 0)
            return errno;
    }
    /* Each process's private writable memory is bounded synchronously (ENOMEM
     * at the limit, before it is touched); PID 1's watchdog bounds the sum. */
    if (req->fb_memory) {
        struct rlimit rl = {req->fb_memory, req->fb_memory};
        if (setrlimit(RLIMIT_DATA, &rl) < 0)
            return errno;
    }
    if (req->fsize) {
        struct rlimit rl = {req->fsize, req->fsize};
        if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
            return errno;
    }
    if (req->fb_nice && setpriority(PRIO_PROCESS, 0, req->fb_nice) < 0)
        return errno;
    return 0;
}

/* lis-init's argv[11] and [12]: the capabilities every command goes without, and
 * every command's resource limits (lis_sandbox_spec), made before the clone. */
struct init_args {
    char caps[24];
    char limits[LIS_MAX_RLIMITS * 64 + 2];
};

static int init_args_make(const lis_sandbox_spec *spec, struct init_args *a, lis_error *err)
{
    if (spec->nrlimits > LIS_MAX_RLIMITS)
        return lis_fail(err, EINVAL, "at most %d resource limits", LIS_MAX_RLIMITS);
    utoa10(spec->cap_drop, a->caps);
    size_t off = 0;
    for (size_t i = 0; i < spec->nrlimits; i++) {
        const lis_rlimit *r = &spec->rlimits[i];
        if (r->resource < 0 || r->resource >= RLIM_NLIMITS)
            return lis_fail(err, EINVAL, "resource limit %d is not one", r->resource);
        off += (size_t)snprintf(a->limits + off, sizeof a->limits - off, "%s%d:%llu:%llu",
                                i ? "," : "", r->resource, (unsigned long long)r->soft,
                                (unsigned long long)r->hard);
    }
    if (!off)
        strcpy(a->limits, "-");
    return 0;
}

/* What the sandbox child reads, on the creator's stack (read only). */
struct child_args {
    const lis_mount_plan *plan;
    int life, parent_end, listen_fd, init_fd;
    const struct lis_seccomp *sc;
    const lis_spawn_req *req;
    const struct init_args *ia;
    char *arena; /* copytree.c's, mapped by the creator; NULL in a fork */
};

/* The clone child: waits for GO, runs the mount plan, hardens itself and
 * execs lis-init as PID 1. Never returns (exits when a step fails, after
 * telling the owner on the lifeline). What it may do: see the top. */
static __attribute__((noreturn)) void child_main(void *arg)
{
    const struct child_args *c = arg;
    const lis_mount_plan *plan = c->plan;
    int life = c->life, listen_fd = c->listen_fd, init_fd = c->init_fd;
    const struct lis_seccomp *sc = c->sc;
    const lis_spawn_req *req = c->req;
    const struct init_args *ia = c->ia;
    int parent_end = c->parent_end;
    int persist = req->spec->persist;
    close(parent_end);
    int bpf_fd = sc->cmd_fd;
    /* spec.monitor: PID 1 loads this one itself, with a listener (lis_init.c) */
    int notify_fd = req->spec->monitor & 3 ? sc->notify_fd[req->spec->monitor & 3] : -1;
    int keep[] = {life, listen_fd, init_fd, sc->main_fd, bpf_fd, notify_fd};
    close_all_but(keep, 6);

    /* These survive the exec of lis-init. */
    fcntl(life, F_SETFD, 0);
    fcntl(bpf_fd, F_SETFD, 0);
    if (notify_fd >= 0)
        fcntl(notify_fd, F_SETFD, 0);
    if (listen_fd >= 0)
        fcntl(listen_fd, F_SETFD, 0);

    struct lis_msg go;
    ssize_t n = recv(life, &go, sizeof go, 0);
    if (n != (ssize_t)sizeof go || go.type != LIS_MSG_GO)
        _exit(1); /* the owner went away during set-up */

    /* A disk upper layer's host directory, for PID 1's bound of its total
     * (init/diskwatch.c): opened while host paths still resolve. */
    int upper = req->upper_dir && req->fsize && req->fsize != LIS_UNLIMITED
                    ? open(req->upper_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                    : -1;
    if (upper >= 0 && upper < 3) {
        int moved = fcntl(upper, F_DUPFD_CLOEXEC, 3);
        close(upper);
        upper = moved;
    }
    const char *stage = NULL;
    int held = -1;
    int e = lis_mount_plan_run(plan, req->name, c->arena, &stage, &held);
    if (e) {
        send_msg(life, LIS_MSG_SETUP_ERR, e, stage);
        _exit(1);
    }
    if (held >= 0 && held < 3) { /* 0-2 are closed: the plan's fd may be one of them */
        int moved = fcntl(held, F_DUPFD_CLOEXEC, 3);
        close(held);
        held = moved;
    }
    if ((e = lis_mount_plan_listener(plan, life, &stage))) {
        send_msg(life, LIS_MSG_SETUP_ERR, e, stage);
        _exit(1);
    }
    /* PID 1's stdio is /dev/null; fds 0-2 were closed above, so this is 0. */
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        for (int fd = 0; fd < 3; fd++)
            if (fd != null)
                dup2(null, fd);
        if (null > 2)
            close(null);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        send_msg(life, LIS_MSG_SETUP_ERR, errno, "setting no_new_privs");
        _exit(1);
    }
    /* the allow-lists, before the filter (which denies landlock_*) */
    if ((req->spec->exec_allow || req->spec->write_allow) &&
        (e = lis_landlock_apply(req->spec->exec_allow, req->spec->write_allow, init_fd))) {
        send_msg(life, LIS_MSG_SETUP_ERR, e, "applying the allow-lists (Landlock)");
        _exit(1);
    }
    /* lis-init and every command run under the main filter; lis-init keeps
     * the capabilities of the sandbox's user namespace (it cuts the bounding
     * set itself) and each command adds the second filter right before its
     * exec (runtime/init/), after unsharing its UTS namespace (its kill tag). */
    if ((e = load_filter(sc->main_fd))) {
        send_msg(life, LIS_MSG_SETUP_ERR, e, "loading the seccomp filter");
        _exit(1);
    }
    if ((e = apply_rlimits(req))) {
        send_msg(life, LIS_MSG_SETUP_ERR, e, "setting the fallback limits");
        _exit(1);
    }
    fcntl(held, F_SETFD, 0); /* lis-init keeps the set-up tmpfs (mounts.c) */
    if (upper >= 0)
        fcntl(upper, F_SETFD, 0);
    char a1[16], a2[16], a3[16], a4[24], a5[16], a6[16], a7[16], a8[24];
    itoa10(held, a5);
    itoa10(notify_fd, a6);
    itoa10(upper, a7);
    utoa10(req->fsize, a8);
    itoa10(life, a1);
    itoa10(listen_fd, a2);
    itoa10(bpf_fd, a3);
    utoa10(req->fb_memory, a4);
    char *argv[] = {"lis-init",
                    a1,
                    a2,
                    persist ? "1" : "0",
                    a3,
                    a4,
                    req->fb_nice ? "1" : "0",
                    a5,
                    a6,
                    a7,
                    a8,
                    (char *)ia->caps,
                    (char *)ia->limits,
                    NULL};
    char *envp[] = {NULL};
    syscall(SYS_execveat, init_fd, "", argv, envp, AT_EMPTY_PATH);
    send_msg(life, LIS_MSG_SETUP_ERR, errno, "executing lis-init");
    _exit(1);
}

/* Writes the identity map of the holder's ids to /proc/<pid>/<file>. One
 * extent per extent of the holder's map: the kernel maps each extent down
 * through exactly one extent of the parent. No allocation. */
static int write_identity_map(long pid, const char *file)
{
    char path[64] = "/proc/";
    itoa10((int)pid, path + 6);
    size_t n = strlen(path);
    path[n++] = '/';
    strcpy(path + n, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    static const char map[] = "0 0 1\n1 1 65535\n";
    int ok = write(fd, map, sizeof map - 1) == (ssize_t)(sizeof map - 1);
    close(fd);
    return ok ? 0 : -1;
}

struct nested_report {
    long pid;
    int err;
};

/* Clones the sandbox child: CLONE_VM on st's stack, or a fork. */
static long clone_child(struct clone_args *ca, const lis_vm_stacks *st, struct child_args *c)
{
#if LIS_VM_CLONE
    return lis_vm_clone3(ca, st, 0, child_main, c);
#else
    (void)st;
    long pid = syscall(SYS_clone3, ca, sizeof *ca);
    if (pid == 0)
        child_main(c);
    return pid;
#endif
}

/* What the full-map path's transient child reads (the creator's stack). */
struct nest_args {
    int holder, report; /* the holder user namespace; the pipe's write end */
    const struct clone_args *ca;
    const lis_vm_stacks *st;
    struct child_args *child;
};

/* The transient child: enters the holder user namespace, clones the sandbox
 * as its owner's child (CLONE_PARENT) and writes its identity map. With
 * CLONE_VM it runs on its own stack while the creator is suspended
 * (CLONE_VFORK), so the TLS they share is never used by both at once; the
 * kernel lets a task that shares an mm enter a user namespace as long as it
 * has no other thread and its own fs struct (userns_install). Its writes:
 * its stack, and the report into the pipe. */
static __attribute__((noreturn)) void mid_main(void *arg)
{
    const struct nest_args *n = arg;
    struct nested_report rep = {0, 0};
    if (setns(n->holder, CLONE_NEWUSER) < 0) {
        rep.err = errno;
    } else {
        struct clone_args c = *n->ca;
        c.flags = (c.flags & ~(uint64_t)CLONE_PIDFD) | CLONE_PARENT;
        c.pidfd = 0;
        long child = clone_child(&c, n->st, n->child);
        if (child < 0)
            rep.err = errno;
        rep.pid = child;
        if (child > 0 && (write_identity_map(child, "uid_map") < 0 ||
                          write_identity_map(child, "gid_map") < 0)) {
            rep.err = errno;
            kill((pid_t)child, SIGKILL);
        }
    }
    _exit(write(n->report, &rep, sizeof rep) == (ssize_t)sizeof rep ? 0 : 1);
}

/* The full-map path: a transient child enters the context's holder user
 * namespace (mapped once with newuidmap), clones the sandbox as a sibling
 * (CLONE_PARENT: the owner stays its parent) and writes an identity map,
 * which the holder turns into the caller's uid plus its subordinate range.
 * This saves two setuid execs of newuidmap/newgidmap per sandbox. */
static long clone_nested(int holder, const struct clone_args *ca, const lis_vm_stacks *st,
                         struct child_args *child, int *pidfd, int *clone_errno)
{
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0) {
        *clone_errno = errno;
        return -1;
    }
    struct nest_args n = {.holder = holder, .report = pp[1], .ca = ca, .st = st, .child = child};
    struct clone_args mid_args = {.exit_signal = 0};
#if LIS_VM_CLONE
    mid_args.flags = CLONE_VFORK;
    long mid = lis_vm_clone3(&mid_args, st, 1, mid_main, &n);
#else
    long mid = syscall(SYS_clone3, &mid_args, sizeof mid_args);
    if (mid == 0)
        mid_main(&n);
#endif
    int mid_errno = errno;
    close(pp[1]);
    if (mid < 0) {
        *clone_errno = mid_errno;
        close(pp[0]);
        return -1;
    }
    struct nested_report rep = {0, EIO};
    if (read(pp[0], &rep, sizeof rep) != (ssize_t)sizeof rep)
        rep.err = EIO;
    close(pp[0]);
    while (waitpid((pid_t)mid, NULL, __WALL) < 0 && errno == EINTR)
        ;
    if (rep.err) {
        if (rep.pid > 0) /* killed by the mid; reaped before its stack goes */
            waitpid((pid_t)rep.pid, NULL, __WALL);
        *clone_errno = rep.err;
        return -1;
    }
    *pidfd = (int)syscall(SYS_pidfd_open, (pid_t)rep.pid, 0);
    if (*pidfd < 0) {
        *clone_errno = errno;
        kill((pid_t)rep.pid, SIGKILL);
        waitpid((pid_t)rep.pid, NULL, __WALL);
        return -1;
    }
    return rep.pid;
}

/* The next set-up message; a listener sent first (spec.listen_port) is kept
 * in *listener_fd, PID 1's seccomp listener (spec.monitor) in *monitor_fd
 * (closed when the pointer is NULL). */
static ssize_t recv_setup(int fd, struct lis_msg *m, int *listener_fd, int *monitor_fd)
{
    for (;;) {
        int passed;
        ssize_t n = lis_recv_fds(fd, m, sizeof *m, &passed, 1, 0);
        int *keep = n != (ssize_t)sizeof *m          ? NULL
                    : m->type == LIS_MSG_LISTENER_FD ? listener_fd
                    : m->type == LIS_MSG_MONITOR_FD  ? monitor_fd
                                                     : NULL;
        if (n != (ssize_t)sizeof *m ||
            (m->type != LIS_MSG_LISTENER_FD && m->type != LIS_MSG_MONITOR_FD)) {
            if (passed >= 0)
                close(passed);
            return n;
        }
        if (keep && *keep < 0)
            *keep = passed;
        else if (passed >= 0)
            close(passed);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 60000) <= 0)
            return -1;
    }
}

/* Turns a set-up failure into one line with the cause and the fix. */
static int setup_error(int e, const char *stage, lis_error *err)
{
    const char *hint = "";
    if (e == EPERM && lis_apparmor_restricts_userns(NULL)) /* a userns without capabilities */
        hint = LIS_APPARMOR_HINT;
    else if (strstr(stage, "overlay")) {
        if (e == EINVAL)
            hint = " (the kernel refused overlayfs with userxattr in a user namespace: it needs "
                   "Linux >= 5.11 and a lower/upper filesystem that supports it; run `lis doctor`)";
        else if (e == EPERM)
            hint = " (unprivileged overlayfs is disabled on this host; run `lis doctor`)";
        else if (e == ENOENT || e == ENOTDIR)
            hint = " (is --rootfs a directory?)";
    } else if (e == EPERM && strstr(stage, "proc")) {
        hint = " (/proc is masked on this host, e.g. inside a Docker container; run `lis doctor`)";
    }
    return lis_fail(err, e, "sandbox set-up failed while %s: %s%s", stage, strerror(e), hint);
}

/* A failed clone as one line with the cause and the fix. */
static int clone_error(int e, const struct clone_args *ca, const lis_spawn_req *req, lis_error *err)
{
    if (e == ENOSYS)
        return lis_fail(err, e,
                        "clone3 is not available: lis needs Linux >= 5.12, "
                        "and inside a container its seccomp profile may hide clone3, as "
                        "Docker's default does (run `lis doctor`; docs/ci.md)");
    if (e == EAGAIN)
        return lis_fail(err, e,
                        "cannot start another process: the per-user "
                        "process limit (ulimit -u), kernel.pid_max or kernel.threads-max is "
                        "reached (run `lis doctor`)");
    if (e == ENOSPC || e == EUSERS)
        return lis_fail(err, e,
                        "too many namespaces: user.max_user_namespaces "
                        "(or another user.max_*_namespaces limit) is reached for this user; "
                        "raise it with sysctl (run `lis doctor`)");
    if (e == EPERM)
        return lis_fail(err, e,
                        "cannot create a user namespace: %s (unprivileged user namespaces "
                        "are disabled or exhausted here: check user.max_user_namespaces, "
                        "kernel.unprivileged_userns_clone and AppArmor; run `lis doctor`)",
                        strerror(e));
    if (ca->flags & CLONE_INTO_CGROUP)
        return lis_fail(err, e, "clone3 into cgroup %s: %s (run `lis doctor`)", req->cg->dir,
                        strerror(e));
    return lis_fail_errnum(err, e, "clone3");
}

int lis_spawn(lis_ctx *ctx, const lis_spawn_req *req, pid_t *pid_out, int *pidfd_out, int *life_out,
              lis_error *err)
{
    struct init_args ia;
    if (lis_ctx_prepare_spawn(ctx, err) < 0 || init_args_make(req->spec, &ia, err) < 0)
        return -1;
    int holder = req->full_map ? lis_holder_userns(ctx, err) : -1;
    if (req->full_map && holder < 0)
        return -1;
    lis_mount_plan *plan = lis_mount_plan_get(ctx, req, err);
    if (!plan)
        return -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        int e = errno;
        lis_mount_plan_put(ctx, plan);
        if (e == EMFILE || e == ENFILE)
            return lis_fail(err, e,
                            "out of file descriptors (each sandbox holds 2 in its owner): "
                            "raise the limit with ulimit -n (run `lis doctor`)");
        return lis_fail_errnum(err, e, "socketpair");
    }
    lis_vm_stacks st = {0};
#if LIS_VM_CLONE
    int me = lis_vm_stacks_map(&st);
    if (me) {
        close(sv[0]);
        close(sv[1]);
        lis_mount_plan_put(ctx, plan);
        return lis_fail_errnum(err, me, "mapping the sandbox set-up's stack");
    }
#endif
    uint64_t flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                     CLONE_NEWCGROUP | CLONE_PIDFD;
    if (req->spec->net != LIS_NET_HOST)
        flags |= CLONE_NEWNET;
    int pidfd = -1;
    struct clone_args ca = {
        .flags = flags,
        .pidfd = (uint64_t)(uintptr_t)&pidfd,
        .exit_signal = 0, /* no SIGCHLD into the owner; reaped through the pidfd */
    };
    if (req->cg && req->cg->fd >= 0) { /* v2: accounted from its first instruction */
        ca.flags |= CLONE_INTO_CGROUP;
        ca.cgroup = (uint64_t)req->cg->fd;
    }
    struct child_args child = {.plan = plan,
                               .life = sv[1],
                               .parent_end = sv[0],
                               .listen_fd = req->listen_fd,
                               .init_fd = ctx->init_fd,
                               .sc = &ctx->seccomp,
                               .req = req,
                               .ia = &ia,
                               .arena = st.arena};
    long pid;
    int clone_errno = 0;
#if LIS_VM_CLONE /* the child (and the mid) start with every signal blocked (see the top) */
    uint64_t all = ~0ull, saved = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &saved, sizeof all);
#endif
    if (req->full_map) {
        pid = clone_nested(holder, &ca, &st, &child, &pidfd, &clone_errno);
    } else {
        pid = clone_child(&ca, &st, &child);
        clone_errno = pid < 0 ? errno : 0;
    }
#if LIS_VM_CLONE
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &saved, NULL, sizeof saved);
#endif
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        lis_vm_stacks_unmap(&st);
        lis_mount_plan_put(ctx, plan);
        return clone_error(clone_errno, &ca, req, err);
    }

    int rc = lis_cg_attach(req->cg, (pid_t)pid, err); /* v1 only; the child waits for GO */
    if (rc == 0 && !req->full_map)                    /* the full map was written by clone_nested */
        rc = lis_write_id_maps(ctx, (pid_t)pid, 0, err);
    if (rc == 0 && send_msg(sv[0], LIS_MSG_GO, 0, NULL) < 0)
        rc = lis_fail_errno(err, "sandbox set-up");
    if (rc == 0) {
        struct pollfd p = {.fd = sv[0], .events = POLLIN};
        struct lis_msg m;
        int pr = poll(&p, 1, 60000);
        ssize_t n = pr > 0 ? recv_setup(sv[0], &m, req->listener_fd, req->monitor_fd) : -1;
        if (pr == 0)
            rc = lis_fail(err, ETIMEDOUT, "sandbox set-up did not finish in 60 s");
        else if (n != (ssize_t)sizeof m)
            rc = lis_fail(err, EIO, "sandbox set-up died without a word");
        else if (m.type == LIS_MSG_SETUP_ERR) {
            m.text[sizeof m.text - 1] = 0;
            rc = setup_error(m.a, m.text, err);
        } else if (m.type != LIS_MSG_READY) {
            rc = lis_fail(err, EPROTO, "sandbox set-up: unexpected message %u", m.type);
        } else if (req->scratch_fd) {
            *req->scratch_fd = m.a;
        }
    }
    if (rc < 0) {
        if (req->listener_fd && *req->listener_fd >= 0) {
            close(*req->listener_fd);
            *req->listener_fd = -1;
        }
        if (req->monitor_fd && *req->monitor_fd >= 0) {
            close(*req->monitor_fd);
            *req->monitor_fd = -1;
        }
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        siginfo_t si;
        waitid(P_PIDFD, pidfd, &si, WEXITED | __WALL);
        close(pidfd);
        close(sv[0]);
    }
    /* The child is reaped, or lis-init sent READY after its exec: nothing
     * reads the stack or the plan any more. */
    lis_vm_stacks_unmap(&st);
    lis_mount_plan_put(ctx, plan);
    if (rc < 0)
        return -1;
    *pid_out = (pid_t)pid;
    *pidfd_out = pidfd;
    *life_out = sv[0];
    return 0;
}
