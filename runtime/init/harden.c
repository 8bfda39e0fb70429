/* harden.c - what commands never get. lis-init keeps the capabilities of the
 * sandbox's user namespace (it must unshare a UTS namespace per command and
 * see non-dumpable processes in /proc) and runs under the main seccomp filter,
 * which allows unshare(CLONE_NEWUTS) alone; its bounding set is cut at start,
 * and each command loads the second filter (no unshare at all) right before
 * its exec. */
#include "init.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Docker's default capabilities. Everything else leaves the bounding set, so
 * no process of the command can ever regain it (uid 0 inside included). */
static const int keep[] = {
    CAP_CHOWN,   CAP_DAC_OVERRIDE, CAP_FSETID,           CAP_FOWNER,
    CAP_MKNOD,   CAP_NET_RAW,      CAP_SETGID,           CAP_SETUID,
    CAP_SETFCAP, CAP_SETPCAP,      CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
    CAP_KILL,    CAP_AUDIT_WRITE,
};

int init_harden_self(uint64_t cap_drop)
{
    /* The bounding set limits what an exec can give, not what lis-init holds:
     * cut once here, it still has CAP_SYS_ADMIN (unshare) and CAP_SYS_PTRACE
     * (reading non-dumpable commands' namespaces) while every command it
     * execs gets Docker's default set at most. */
    for (int c = 0; c < 64; c++) {
        int kept = 0;
        for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
            kept |= keep[i] == c && !(cap_drop & (1ull << c));
        if (!kept && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
            return errno;
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return errno;
    /* No inheritable capabilities; permitted and effective shrink to the
     * bounding set at exec (no_new_privs caps them at the old permitted). */
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        return errno;
    d[0].inheritable = d[1].inheritable = 0;
    if (syscall(SYS_capset, &h, d) < 0)
        return errno;
    return 0;
}

int init_apply_limits(const struct init_limits *lim)
{
    for (int i = 0; i < lim->n; i++) {
        struct rlimit cur, rl;
        if (getrlimit(lim->r[i].resource, &cur) < 0)
            return errno;
        rl.rlim_max = lim->r[i].hard == UINT64_MAX ? RLIM_INFINITY : (rlim_t)lim->r[i].hard;
        rl.rlim_cur = lim->r[i].soft == UINT64_MAX ? RLIM_INFINITY : (rlim_t)lim->r[i].soft;
        if (cur.rlim_max != RLIM_INFINITY &&
            (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > cur.rlim_max))
            rl.rlim_max = cur.rlim_max;
        if (rl.rlim_max != RLIM_INFINITY &&
            (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > rl.rlim_max))
            rl.rlim_cur = rl.rlim_max;
        if (setrlimit(lim->r[i].resource, &rl) < 0)
            return errno;
    }
    return 0;
}

int init_drop_ptrace(void)
{
    /* Our own CAP_SYS_PTRACE is what lets a process reach PID 1's fds
     * (/proc/1/fd/N: PID 1 is not dumpable). A command child drops it before
     * it enters the asked working directory, so `-w /proc/1/fd/N` cannot
     * hand a command the set-up tmpfs PID 1 holds (CVE-2024-21626's class). */
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        return errno;
    d[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
    d[CAP_SYS_PTRACE / 32].permitted &= ~(1u << (CAP_SYS_PTRACE % 32));
    if (syscall(SYS_capset, &h, d) < 0)
        return errno;
    return 0;
}

int init_harden(const struct sock_fprog *prog)
{
    if (!prog->len)
        return EINVAL; /* never a command without the second filter */
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) < 0)
        return errno;
    return 0;
}

int init_load_notify(int fd)
{
    enum { MAXI = 256 }; /* a handful of rules (runtime/seccomp.c) */
    struct sock_filter insns[MAXI];
    ssize_t n = pread(fd, insns, sizeof insns, 0);
    close(fd);
    if (n <= 0 || n % (ssize_t)sizeof insns[0] || n == (ssize_t)sizeof insns)
        return -1;
    struct sock_fprog prog = {.len = (unsigned short)(n / (ssize_t)sizeof insns[0]),
                              .filter = insns};
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                        &prog);
}
