/* exec_read.c - what an exec notification names, read from the notifying
 * thread's memory (procmem.c): the path (made absolute from the text of the
 * process's own cwd or dirfd link) and argv, every part capped and every cut
 * stated. Nothing here opens a path the process chose. */
#include "monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

/* The arguments named by ptrs[0..n) (up to a NULL) appended to x->argv:
 * the first chunk of each in one read, and only an argument that runs past
 * its chunk (or that the read did not reach) read on its own. *end set at
 * the NULL. */
static void read_args(pid_t tid, const uint64_t *ptrs, size_t n, mon_exec *x, int *end)
{
    static const size_t chunk_cap = MON_ARG_MAX - 1;
    char chunks[MON_RANGES_MAX][MON_ARG_MAX];
    char *outs[MON_RANGES_MAX];
    size_t lens[MON_RANGES_MAX], k = 0;
    while (k < n && k < MON_RANGES_MAX && ptrs[k]) {
        outs[k] = chunks[k];
        lens[k] = mon_chunk_len(ptrs[k], chunk_cap);
        k++;
    }
    *end = k < n && k < MON_RANGES_MAX;
    /* past the caps an argument is only counted: its memory is not read (a
     * hostile argv of 65536 strings costs the hub its pointers only) */
    size_t room_args =
        x->argc < MON_ARGS_MAX && x->argv_len + 2 < sizeof x->argv ? MON_ARGS_MAX - x->argc : 0;
    size_t whole = mon_read_ranges(tid, ptrs, outs, lens, k < room_args ? k : room_args);
    for (size_t i = 0; i < k; i++) {
        x->argc_total++;
        if (x->argc >= MON_ARGS_MAX || x->argv_len + 2 >= sizeof x->argv) {
            x->argv_cut = 1;
            continue;
        }
        size_t room = sizeof x->argv - x->argv_len;
        if (room > MON_ARG_MAX)
            room = MON_ARG_MAX;
        int cut = 0;
        char *at = x->argv + x->argv_len;
        ssize_t len =
            mon_str_from_chunk(tid, ptrs[i], i < whole ? chunks[i] : NULL, lens[i], at, room, &cut);
        if (len < 0) {
            snprintf(at, room, "(unreadable)");
            len = (ssize_t)strlen(at);
        }
        x->argv_cut |= cut;
        x->argv_len += (size_t)len + 1;
        x->argc++;
    }
}

void mon_exec_read(pid_t tid, const struct seccomp_data *d, mon_exec *x)
{
    int at = d->nr == SYS_execveat;
    uint64_t path_addr = at ? d->args[1] : d->args[0];
    uint64_t argv_addr = at ? d->args[2] : d->args[1];
    int dirfd = at ? (int)d->args[0] : AT_FDCWD;
    int flags = at ? (int)d->args[4] : 0;
    snprintf(x->via, sizeof x->via, at ? "execveat" : "execve");
    /* the path's first chunk and argv's first pointers in one read */
    char path_chunk[MON_EXEC_PATH];
    uint64_t ptrs[MON_RANGES_MAX];
    uint64_t addrs[2] = {path_addr, argv_addr};
    char *outs[2] = {path_chunk, (char *)ptrs};
    size_t lens[2] = {mon_chunk_len(path_addr, MON_EXEC_PATH - 1), sizeof ptrs};
    size_t whole = path_addr && argv_addr ? mon_read_ranges(tid, addrs, outs, lens, 2) : 0;
    char raw[MON_EXEC_PATH];
    ssize_t n = path_addr ? mon_str_from_chunk(tid, path_addr, whole ? path_chunk : NULL, lens[0],
                                               raw, sizeof raw, &x->path_cut)
                          : (errno = EFAULT, -1);
    if (n < 0) {
        snprintf(x->unread, sizeof x->unread, "path unreadable: %s", strerror(errno));
        raw[0] = 0;
    }
    /* make it absolute from the process's own links (their text only) */
    char base[MON_EXEC_PATH] = "";
    if (n == 0 && at && (flags & AT_EMPTY_PATH)) {
        char what[32];
        snprintf(what, sizeof what, "fd/%d", dirfd);
        snprintf(x->via, sizeof x->via, "execveat(fd)");
        x->by_fd = 1;
        x->fd_nr = dirfd;
        if (mon_read_link(tid, what, base, sizeof base) < 0)
            snprintf(base, sizeof base, "fd %d", dirfd);
        snprintf(x->path, sizeof x->path, "%s", base);
    } else if (n > 0 && raw[0] != '/') {
        if (dirfd == AT_FDCWD) {
            if (mon_read_link(tid, "cwd", base, sizeof base) < 0)
                base[0] = 0;
        } else {
            char what[32];
            snprintf(what, sizeof what, "fd/%d", dirfd);
            if (mon_read_link(tid, what, base, sizeof base) < 0)
                snprintf(base, sizeof base, "fd %d", dirfd);
        }
        int len = snprintf(x->path, sizeof x->path, "%s%s%s", base,
                           base[0] && strcmp(base, "/") ? "/" : "", raw);
        if (len < 0 || (size_t)len >= sizeof x->path) {
            x->path_cut = 1; /* longer than any path the kernel takes */
            x->path[lis_utf8_cut(x->path, sizeof x->path - 1)] = 0;
        }
    } else {
        snprintf(x->path, sizeof x->path, "%s", raw);
    }
    /* argv: the pointers, then the strings, both capped */
    for (size_t base_i = 0; argv_addr && base_i < MON_ARGC_COUNT; base_i += MON_RANGES_MAX) {
        ssize_t got = base_i == 0 && whole == 2
                          ? MON_RANGES_MAX
                          : mon_read_words(tid, argv_addr + base_i * 8, ptrs, MON_RANGES_MAX);
        if (got <= 0) {
            if (!base_i)
                snprintf(x->unread, sizeof x->unread, "argv unreadable: %s", strerror(errno));
            break;
        }
        int end = 0;
        read_args(tid, ptrs, (size_t)got, x, &end);
        if (end || got < MON_RANGES_MAX)
            break;
    }
}
