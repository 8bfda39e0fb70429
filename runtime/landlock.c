/* landlock.c - an exec allow-list the kernel enforces (Landlock, Linux
 * 5.13+, rootless): a sandbox whose spec names exec_allow may execute only
 * files beneath those paths (and lis-init). Applied by the sandbox's first
 * process after pivot_root and no_new_privs, before the seccomp filter and
 * lis-init's exec, so lis-init and every command inherit it and none can
 * lift it. Landlock does not see files of internal mounts: a memfd stays
 * executable to it (vm.memfd_noexec cannot be set without real root), so
 * the monitor's hub checks those (docs/monitoring.md). Runs in the clone child that may share its owner's memory
 * (vmclone.c): no allocation, stack only. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int lis_landlock_abi(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v > 0 ? (int)v : 0;
}

static int add_exec(int ruleset, int fd)
{
    struct landlock_path_beneath_attr pb = {.allowed_access = LANDLOCK_ACCESS_FS_EXECUTE,
                                            .parent_fd = fd};
    return syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0 ? errno
                                                                                           : 0;
}

int lis_landlock_exec_allow(const char *const *paths, int init_fd)
{
    struct landlock_ruleset_attr attr = {.handled_access_fs = LANDLOCK_ACCESS_FS_EXECUTE};
    int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (rs < 0)
        return errno;
    int e = add_exec(rs, init_fd);
    for (size_t i = 0; !e && paths[i]; i++) {
        /* a path the image does not have allows nothing (and is no error) */
        int fd = open(paths[i], O_PATH | O_CLOEXEC);
        if (fd < 0)
            continue;
        e = add_exec(rs, fd);
        close(fd);
    }
    if (!e && syscall(SYS_landlock_restrict_self, rs, 0) < 0)
        e = errno;
    close(rs);
    return e;
}
