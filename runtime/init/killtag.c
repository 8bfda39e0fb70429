/* killtag.c - find and kill every process of one command by its tag, the
 * inode of the UTS namespace the command was started in. Processes cannot
 * leave that namespace (setns and unshare are denied to commands), so the tag
 * survives setsid, double forks and the death of the command's session. */
#include "init.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

uint64_t init_ns_tag(const char *pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/ns/uts", pid);
    struct stat st;
    /* stat follows the ns link: it needs ptrace-read access, which PID 1 and
     * the sessions have through CAP_SYS_PTRACE even when the target made
     * itself non-dumpable. A zombie has no namespaces left: 0. */
    return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* One pass over /proc; returns how many tagged processes were signalled. */
static int kill_pass(uint64_t tag)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        /* The /proc/<pid> directory fd pins the process: the signal cannot
         * reach a newer process that reused the pid after the tag check. */
        int dfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
            continue;
        struct stat st;
        if (fstatat(dfd, "ns/uts", &st, 0) == 0 && (uint64_t)st.st_ino == tag &&
            syscall(SYS_pidfd_send_signal, dfd, SIGKILL, NULL, 0) == 0)
            n++;
        close(dfd);
    }
    closedir(d);
    return n;
}

int init_kill_tag(uint64_t tag)
{
    if (!tag)
        return 0;
    int total = 0;
    /* A fork bomb may add children between two passes; a killed process can
     * fork no more, so the passes converge. Bounded so PID 1 never hangs. */
    for (int round = 0; round < 2000; round++) {
        int n = kill_pass(tag);
        total += n;
        if (!n)
            break;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return total;
}
