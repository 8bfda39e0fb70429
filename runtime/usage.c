/* usage.c - how much of its writable budget a sandbox uses, for stats.
 * The tmpfs budget (tmpfs upper layer, /tmp, /dev/shm: one filesystem) is
 * read with statvfs through PID 1's root; a disk upper layer is walked. */
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Bytes allocated under fd (which it closes); depth-bounded. */
static uint64_t walk(int fd, int depth)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return 0;
    }
    uint64_t sum = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        sum += (uint64_t)st.st_blocks * 512;
        if (S_ISDIR(st.st_mode) && depth < 256) {
            int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                sum += walk(sub, depth + 1);
        }
    }
    closedir(d);
    return sum;
}

uint64_t lis_disk_usage(pid_t pid1, const char *layer_dir)
{
    uint64_t used = 0;
    char path[PATH_MAX + 32];
    struct statvfs vfs;
    snprintf(path, sizeof path, "/proc/%d/root/tmp", (int)pid1);
    if (pid1 > 0 && statvfs(path, &vfs) == 0)
        used += (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
    if (layer_dir && layer_dir[0]) {
        snprintf(path, sizeof path, "%s/upper", layer_dir);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0)
            used += walk(fd, 0);
    }
    return used;
}
