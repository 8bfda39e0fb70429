/* seccomp.c - the sandbox syscall filters, compiled once per context.
 *
 * Default allow, with an explicit deny list covering everything Docker's
 * default profile denies that matters on x86-64/arm64 (kernel keyrings, bpf,
 * perf, module and kexec loading, io_uring, userfaultfd, clock setting,
 * swap, accounting, quotas, syslog, raw port I/O, new namespaces, mounts and
 * pivot_root after set-up, TIOCSTI). libseccomp compiles it to classic BPF
 * once; each sandbox then loads the raw program with seccomp(2), which costs
 * microseconds instead of the ~1.4 ms a per-sandbox compile would. The
 * monitor's programs (user notifications, spec.monitor) are compiled here too. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const denied[] = {
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "open_by_handle_at",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "reboot",
    "swapon",
    "swapoff",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "stime",
    "acct",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "iopl",
    "ioperm",
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "setns",
    "lookup_dcookie",
    "nfsservctl",
    "uselib",
    "_sysctl",
    "ustat",
    "sysfs",
    "vm86",
    "vm86old",
    "vhangup",
    "sethostname",
    "setdomainname",
    "fanotify_init",
    "mbind",
    "set_mempolicy",
    "migrate_pages",
    "move_pages",
    "pciconfig_read",
    "pciconfig_write",
    "pciconfig_iobase",
    "kcmp",
    "name_to_handle_at",
    "process_madvise",
    "landlock_restrict_self",
};

/* The main filter: loaded before lis-init's exec, so lis-init and every
 * command run under it. It allows unshare(CLONE_NEWUTS) alone, which lis-init
 * needs per command (the kill tag, runtime/init/init.h); the second filter,
 * loaded by each command right before its exec, takes that away. */
static int add_main_rules(scmp_filter_ctx sc, lis_error *err)
{
    int rc = 0;
    const char *what = "";
    for (size_t i = 0; i < sizeof denied / sizeof denied[0] && rc == 0; i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR || nr < 0)
            continue; /* not on this architecture */
        what = denied[i];
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), nr, 0);
    }
    /* clone3 hides its flags in memory: ENOSYS makes libc fall back to clone. */
    if (!rc) {
        what = "clone3";
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    }
    /* clone: deny any namespace flag. libseccomp allows one comparison per
     * argument in a rule, so one rule per flag bit. */
    static const unsigned long ns_bits[] = {CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
                                            CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
                                            CLONE_NEWCGROUP};
    what = "clone";
    for (size_t i = 0; i < sizeof ns_bits / sizeof ns_bits[0] && !rc; i++)
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, ns_bits[i], ns_bits[i]));
    /* personality: like Docker, only 0, PER_LINUX32 (0x8), UNAME26 (0x20000),
     * both, and the query 0xffffffff. With one comparison per rule:
     * bit 31 clear and a bit other than 3 and 17 set -> deny;
     * bit 31 set and any of bits 0..30 clear (so not the query) -> deny;
     * anything above 32 bits -> deny. */
    what = "personality";
    for (int b = 0; b < 31 && !rc; b++) {
        uint64_t bit = 1ull << b;
        if (b != 3 && b != 17)
            rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, 0x80000000ull | bit, bit));
        if (!rc)
            rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, 0x80000000ull | bit, 0x80000000ull));
    }
    if (!rc)
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                              SCMP_A0(SCMP_CMP_GT, 0xffffffffull));
    /* TIOCSTI/TIOCLINUX: no typing into a terminal (CVE-2017-5226 class). */
    if (!rc) {
        what = "ioctl";
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
    }
    if (!rc)
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
    /* AF_ALG (38) and AF_VSOCK (40) sockets, as Docker. */
    if (!rc) {
        what = "socket";
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_EQ, 38));
    }
    if (!rc)
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_EQ, 40));
    if (!rc) {
        what = "unshare";
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                              SCMP_A0(SCMP_CMP_NE, CLONE_NEWUTS));
    }
    if (rc)
        return lis_fail_errnum(err, -rc, "seccomp rule for %s", what);
    return 0;
}

/* Exports a filter as classic BPF into a sealed memfd. */
static int export(scmp_filter_ctx sc, int *fd_out, lis_error *err)
{
    int fd = memfd_create("lis-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return lis_fail_errno(err, "memfd_create");
    int rc = seccomp_export_bpf(sc, fd);
    struct stat st;
    if (rc < 0 || fstat(fd, &st) < 0 || st.st_size <= 0 ||
        st.st_size % sizeof(struct sock_filter) != 0 ||
        st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0) {
        close(fd);
        return lis_fail(err, rc < 0 ? -rc : EINVAL, "exporting the seccomp filter failed");
    }
    *fd_out = fd;
    return 0;
}

/* The monitor's program (spec.monitor, monitor/): default allow; the
 * syscalls asked for become user notifications that the owner answers. It
 * only adds a wait: the main filter's denials take precedence (ERRNO over
 * USER_NOTIF), and the owner's answer is CONTINUE or an error. */
static int compile_notify(unsigned bits, int *fd_out, lis_error *err)
{
    scmp_filter_ctx sc = seccomp_init(SCMP_ACT_ALLOW);
    if (!sc)
        return lis_fail(err, ENOMEM, "seccomp_init failed");
    seccomp_attr_set(sc, SCMP_FLTATR_CTL_NNP, 0);
    int rc = 0;
    if (bits & LIS_MONITOR_EXEC) {
        rc = seccomp_rule_add(sc, SCMP_ACT_NOTIFY, SCMP_SYS(execve), 0);
        if (!rc)
            rc = seccomp_rule_add(sc, SCMP_ACT_NOTIFY, SCMP_SYS(execveat), 0);
        if (!rc)
            rc = seccomp_rule_add(sc, SCMP_ACT_NOTIFY, SCMP_SYS(exit_group), 0);
    }
    if (!rc && (bits & LIS_MONITOR_CONNECT)) {
        rc = seccomp_rule_add(sc, SCMP_ACT_NOTIFY, SCMP_SYS(connect), 0);
        if (!rc) /* a datagram with its address: sendto(fd, buf, len, flags, addr != NULL, ..) */
            rc =
                seccomp_rule_add(sc, SCMP_ACT_NOTIFY, SCMP_SYS(sendto), 1, SCMP_A4(SCMP_CMP_NE, 0));
    }
    if (rc)
        rc = lis_fail_errnum(err, -rc, "seccomp rule of the monitor");
    else
        rc = export(sc, fd_out, err);
    seccomp_release(sc);
    return rc;
}

void lis_seccomp_close(struct lis_seccomp *sc)
{
    int *fds[] = {&sc->main_fd, &sc->cmd_fd, &sc->notify_fd[1], &sc->notify_fd[2],
                  &sc->notify_fd[3]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
}

int lis_seccomp_compile(struct lis_seccomp *out, lis_error *err)
{
    out->main_fd = out->cmd_fd = -1;
    for (int i = 0; i < 4; i++)
        out->notify_fd[i] = -1;
    for (unsigned bits = 1; bits < 4; bits++)
        if (compile_notify(bits, &out->notify_fd[bits], err) < 0) {
            lis_seccomp_close(out);
            return -1;
        }
    scmp_filter_ctx sc = seccomp_init(SCMP_ACT_ALLOW);
    if (!sc)
        return lis_fail(err, ENOMEM, "seccomp_init failed");
    /* no_new_privs is set by the sandbox set-up itself, before loading. */
    seccomp_attr_set(sc, SCMP_FLTATR_CTL_NNP, 0);
    int rc = add_main_rules(sc, err);
    if (rc == 0)
        rc = export(sc, &out->main_fd, err);
    seccomp_release(sc);
    if (rc < 0) {
        lis_seccomp_close(out);
        return -1;
    }
    sc = seccomp_init(SCMP_ACT_ALLOW);
    if (!sc) {
        lis_seccomp_close(out);
        return lis_fail(err, ENOMEM, "seccomp_init failed");
    }
    seccomp_attr_set(sc, SCMP_FLTATR_CTL_NNP, 0);
    rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 0);
    if (rc)
        rc = lis_fail_errnum(err, -rc, "seccomp rule for unshare");
    else
        rc = export(sc, &out->cmd_fd, err);
    seccomp_release(sc);
    if (rc < 0) {
        lis_seccomp_close(out);
        return -1;
    }
    return 0;
}
