/* memwatch.c - the memory limit where no cgroup can enforce one (cgroup v1
 * hosts, undelegated v2): PID 1 sums the anonymous memory (RssAnon + VmSwap)
 * of every process in the sandbox and what is written in its tmpfs (the
 * writable budget: a tmpfs upper layer, /tmp, /dev/shm; RAM, which a cgroup
 * would charge to memory.max) and, above the limit, SIGKILLs the largest
 * process, as the kernel's OOM killer would inside a cgroup. The tmpfs
 * itself is at most the limit under the fallback limits (runtime/mounts.c),
 * so a writer there meets ENOSPC and the sum stays within the limit plus
 * what the processes allocate between two checks. It checks every second
 * while far below the limit and every 100 ms near it, so a fast allocator
 * can overshoot by what it allocates in that window (SECURITY.md says so);
 * each process alone is held to the limit by RLIMIT_DATA. File pages are
 * not counted. */
#include "init.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* kB of anonymous memory of one process, 0 when gone or a kernel thread */
static uint64_t anon_kb(int dirfd, const char *pid)
{
    char buf[4096];
    if (init_proc_read(dirfd, pid, "status", buf, sizeof buf) < 0)
        return 0;
    uint64_t kb = 0;
    static const char *const keys[] = {"\nRssAnon:", "\nVmSwap:"};
    for (int i = 0; i < 2; i++) {
        char *p = strstr(buf, keys[i]);
        if (p)
            kb += strtoull(p + strlen(keys[i]), NULL, 10);
    }
    return kb;
}

int init_memwatch(uint64_t limit, int scratch_fd, uint64_t *killed_tag)
{
    *killed_tag = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 1000;
    uint64_t total = 0, biggest = 0;
    char victim[32] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9' || !strcmp(e->d_name, "1"))
            continue;
        uint64_t kb = anon_kb(dirfd(d), e->d_name);
        total += kb;
        if (kb > biggest) {
            biggest = kb;
            snprintf(victim, sizeof victim, "%s", e->d_name);
        }
    }
    closedir(d);
    total *= 1024;
    struct statvfs vfs;
    if (scratch_fd >= 0 && fstatvfs(scratch_fd, &vfs) == 0)
        total += (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
    if (total > limit && victim[0]) {
        *killed_tag = init_ns_tag(victim);
        kill(atoi(victim), SIGKILL);
        return 100;
    }
    return total < limit / 4 ? 1000 : total < limit / 2 ? 250 : 100;
}
