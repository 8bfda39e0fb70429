/* procfs.c - one file of a process of the sandbox, read by PID 1's watches
 * (memwatch.c, cpuwatch.c, diskwatch.c) through the sandbox's /proc. */
#include "init.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

ssize_t init_proc_read(int procfd, const char *pid, const char *file, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "%s/%s", pid, file);
    int fd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    return n;
}
