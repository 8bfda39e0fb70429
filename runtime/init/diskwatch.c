/* diskwatch.c - the total bound of a disk upper layer (lis sandbox create, lis serve's
 * containers, lis run): an unprivileged user has no quota, so PID 1 measures the layer
 * itself, through an fd of its host directory the set-up handed it, and holds it near the
 * writable budget (docs/runtime.md, "The disk upper layer's bound"):
 *
 *  - a measurement walks the layer (st_blocks of every entry, directories included; never
 *    following a link; any depth with two fds), at most one entry per 4 KiB of the budget;
 *    a walk the sandbox spoils by moving directories under it is done again, and after
 *    DW_MAX_RACES spoilt ones in a row the layer counts as over the budget;
 *  - it runs at least every DW_MAX_MS (more rarely on a huge layer: 50 x its own time, so
 *    the backstop costs at most 2 % of a CPU), and every DW_MIN_MS (or 4 x its own time) as
 *    soon as the sandbox's processes wrote (/proc/PID/io write_bytes, which a reaped
 *    child adds to its parent's, so the live processes' sum is all they ever wrote) or
 *    the host filesystem's used blocks grew (fallocate writes nothing) by half of what
 *    the budget has left since the last one: a writer near the budget is measured four
 *    times a second. PID 1 does nothing else while it walks (a layer at the entry bound,
 *    262144 entries for 1 GiB, takes a few hundred ms);
 *  - over the budget, every process's RLIMIT_FSIZE (soft and hard) goes to 0, and so does
 *    each new command's while the layer stays over it (lis_init.c's start_session): a write
 *    that extends a file fails (EFBIG, SIGXFSZ), while reading, deleting and overwriting in
 *    place go on. A hard limit cannot be raised again in a user namespace (that takes
 *    CAP_SYS_RESOURCE of the host's), so the processes that ran then stay so; commands
 *    started once deleting brought the layer back under the budget write again;
 *  - more entries than that cannot be measured within the bound: the layer counts as over
 *    the budget and every process but PID 1's own is killed.
 *
 * So the layer passes the budget by at most what the sandbox writes between two
 * measurements (docs/runtime.md has the figure measured). */
#include "init.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#define DW_MIN_MS 250
#define DW_MAX_MS 5000
#define DW_MAX_RACES 5 /* walks in a row spoilt by directories moved under them */

struct walk {
    uint64_t bytes, entries, max_entries;
    int too_big; /* more entries than the bound */
};

/* One level of the walk: a directory's identity and where its listing was. */
struct level {
    dev_t dev;
    ino_t ino;
    long pos;
};

/* Sums the tree below top. Any depth with two fds and a stack of 24 bytes a level:
 * down through openat(name, O_NOFOLLOW), back up through "..", whose identity must be
 * the directory left (else the sandbox moved it meanwhile: -1, the walk is spoilt). */
static int measure(int top, struct walk *w)
{
    struct level *stk = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    DIR *d = fdopendir(top);
    if (!d) {
        close(top);
        return -1;
    }
    for (;;) {
        struct dirent *e = readdir(d);
        if (!e) {
            if (!n)
                break;
            int up = openat(dirfd(d), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            closedir(d);
            d = NULL;
            struct stat st;
            n--;
            if (up < 0 || fstat(up, &st) < 0 || st.st_dev != stk[n].dev ||
                st.st_ino != stk[n].ino || !(d = fdopendir(up))) {
                if (up >= 0 && !d)
                    close(up);
                rc = -1;
                break;
            }
            seekdir(d, stk[n].pos);
            continue;
        }
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* removed meanwhile */
        w->bytes += (uint64_t)st.st_blocks * 512;
        if (++w->entries > w->max_entries) {
            w->too_big = 1;
            break;
        }
        if (!S_ISDIR(st.st_mode))
            continue;
        struct stat here;
        long pos = telldir(d);
        int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat sst;
        if (sub < 0 || fstat(dirfd(d), &here) < 0 || fstat(sub, &sst) < 0 ||
            sst.st_ino != st.st_ino || sst.st_dev != st.st_dev) {
            if (sub >= 0)
                close(sub);
            continue; /* gone or swapped since the fstatat */
        }
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            struct level *g = realloc(stk, nc * sizeof *g);
            if (!g) {
                close(sub);
                rc = -1;
                break;
            }
            stk = g;
            cap = nc;
        }
        stk[n++] = (struct level){here.st_dev, here.st_ino, pos};
        closedir(d);
        if (!(d = fdopendir(sub))) {
            close(sub);
            rc = -1;
            break;
        }
    }
    if (d)
        closedir(d);
    free(stk);
    return rc;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* RLIMIT_FSIZE 0 for every process of the sandbox but PID 1, or SIGKILL to
 * them. */
static void each_process(int kill_them)
{
    struct rlimit zero = {0, 0};
    DIR *d = opendir("/proc");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] < '1' || e->d_name[0] > '9' || !strcmp(e->d_name, "1"))
                continue;
            pid_t p = atoi(e->d_name);
            if (kill_them)
                kill(p, SIGKILL);
            else
                prlimit(p, RLIMIT_FSIZE, &zero, NULL);
        }
        closedir(d);
    }
}

/* What the sandbox's processes wrote, all they ever wrote: /proc/PID/io's
 * write_bytes (counted when a page is dirtied) of each, a reaped child's
 * added to its parent's, PID 1's too. */
static uint64_t written(void)
{
    uint64_t sum = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char buf[512];
        if (init_proc_read(dirfd(d), e->d_name, "io", buf, sizeof buf) < 0)
            continue;
        char *p = strstr(buf, "\nwrite_bytes:");
        if (p)
            sum += strtoull(p + 13, NULL, 10);
    }
    closedir(d);
    return sum;
}

static uint64_t host_used(int fd)
{
    struct statfs s;
    if (fstatfs(fd, &s) < 0)
        return 0;
    return (uint64_t)(s.f_blocks - s.f_bfree) * (uint64_t)s.f_bsize;
}

int init_diskwatch(struct disk_watch *w, int64_t now)
{
    if (w->fd < 0)
        return -1;
    uint64_t host = host_used(w->fd), wrote = written();
    uint64_t left = w->usage < w->budget ? w->budget - w->usage : 0;
    int64_t since = now - w->measured_at;
    /* the backstop (also catches growth hidden by deletions elsewhere on the
     * host filesystem), or sooner when the host's usage says the budget may be
     * near, or to see a frozen layer shrink; never more often than gap */
    int due = !w->measured_at || since >= w->interval ||
              (since >= w->gap &&
               (host >= w->host_at + left / 2 || wrote >= w->written_at + left / 2 || w->frozen));
    if (!due)
        return DW_MIN_MS;
    int top = openat(w->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        return DW_MAX_MS;
    struct walk k = {.max_entries = w->budget / 4096 < 16384 ? 16384 : w->budget / 4096};
    int64_t t0 = mono_ms();
    int spoilt = measure(top, &k) < 0 && !k.too_big;
    int64_t cost = mono_ms() - t0;
    if (spoilt && ++w->races < DW_MAX_RACES)
        return DW_MIN_MS; /* directories moved under the walk: again soon */
    w->usage = k.bytes;
    w->host_at = host;
    w->written_at = wrote;
    w->measured_at = now;
    w->interval = 50 * cost > DW_MAX_MS ? 50 * cost : DW_MAX_MS; /* at most 2 % of a CPU */
    w->gap = 4 * cost > DW_MIN_MS ? 4 * cost : DW_MIN_MS;        /* near the budget: 20 % */
    w->measurements++;
    /* a tree moved under every walk cannot be measured: as if over the budget */
    int over = k.too_big || k.bytes > w->budget || spoilt;
    w->races = 0;
    if (over && !w->frozen) {
        each_process(0);
        w->freezes++;
    }
    w->frozen = over;
    if (k.too_big)
        each_process(1);
    return DW_MIN_MS;
}
