/* landlock.c - allow-lists the kernel enforces (Landlock, Linux 5.13+,
 * rootless): a sandbox whose spec names exec_allow may execute only files
 * beneath those paths (and lis-init); one that names write_allow may create,
 * write, truncate, remove and rename only beneath those paths (and the
 * harmless devices every tool writes to: /dev/null, /dev/tty, the pty).
 * Applied by the sandbox's first process after pivot_root and no_new_privs,
 * before the seccomp filter and lis-init's exec, so lis-init and every
 * command inherit it and none can lift it. Landlock does not see files of
 * internal mounts: a memfd stays executable and a pipe writable to it
 * (vm.memfd_noexec cannot be set without real root), so the monitor's hub
 * checks memfd execs (docs/monitoring.md). Runs in the clone child that may
 * share its owner's memory (vmclone.c): no allocation, stack only. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE /* ABI 3 (Linux 6.2); Debian 12's headers are 6.1's */
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

int lis_landlock_abi(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v > 0 ? (int)v : 0;
}

/* What writing means to Landlock at this ABI: REFER (2+) is handled too,
 * else a rename across directories would always fail; TRUNCATE from 3. */
static __u64 write_rights(int abi)
{
    __u64 w = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
              LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
              LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
              LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
              LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
    if (abi >= 2)
        w |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        w |= LANDLOCK_ACCESS_FS_TRUNCATE;
    return w;
}

/* The rights of access that apply to fd: a file takes only the rights a
 * file can have (Landlock refuses directory rights on it). */
static int add_rule(int ruleset, int fd, __u64 access)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
        access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                  LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE;
    if (!access)
        return 0;
    struct landlock_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
    return syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0 ? errno
                                                                                           : 0;
}

static int add_paths(int ruleset, const char *const *paths, __u64 access)
{
    int e = 0;
    for (size_t i = 0; !e && paths && paths[i]; i++) {
        /* a path the image does not have allows nothing (and is no error) */
        int fd = open(paths[i], O_PATH | O_CLOEXEC);
        if (fd < 0)
            continue;
        e = add_rule(ruleset, fd, access);
        close(fd);
    }
    return e;
}

int lis_landlock_apply(const char *const *exec_allow, const char *const *write_allow, int init_fd)
{
    static const char *const devices[] = {"/dev/null", "/dev/zero",   "/dev/full",
                                          "/dev/tty",  "/dev/random", "/dev/urandom",
                                          "/dev/ptmx", "/dev/pts",    NULL};
    int abi = lis_landlock_abi();
    __u64 w = write_allow ? write_rights(abi) : 0;
    struct landlock_ruleset_attr attr = {.handled_access_fs =
                                             (exec_allow ? LANDLOCK_ACCESS_FS_EXECUTE : 0) | w};
    int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (rs < 0)
        return errno;
    int e = exec_allow ? add_rule(rs, init_fd, LANDLOCK_ACCESS_FS_EXECUTE) : 0;
    if (!e && exec_allow)
        e = add_paths(rs, exec_allow, LANDLOCK_ACCESS_FS_EXECUTE);
    if (!e && write_allow)
        e = add_paths(rs, write_allow, w);
    if (!e && write_allow)
        e = add_paths(rs, devices, LANDLOCK_ACCESS_FS_WRITE_FILE);
    if (!e && syscall(SYS_landlock_restrict_self, rs, 0) < 0)
        e = errno;
    close(rs);
    return e;
}
