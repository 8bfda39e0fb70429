/* walk.c - a sandbox tree handed out entry by entry (lis_walk: serve's archive GET writes
 * each one into the tar it streams), never following a link, bounded as every copy out.
 *
 * Paths resolve as files.c's (openat2 RESOLVE_IN_ROOT on the sandbox's root); below
 * the top every directory is opened O_NOFOLLOW relative to its parent. Each regular
 * file comes with its data extents (SEEK_DATA/SEEK_HOLE, at most WALK_MAX_EXTENTS: the
 * rest counts as one), so a sparse file can be written sparse and a 1 TB hole costs
 * nothing. The bounds are lis_copy_opts's: a file whose data would pass max_bytes, or
 * an entry past one per 4 KiB of it, is left out and reported (the first 100 one by
 * one, then one closing report). */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WALK_MAX_DEPTH 512 /* as copy.c's: a sandbox can nest far deeper than PATH_MAX */
#define WALK_MAX_EXTENTS 4096
#define WALK_SKIP_LIST 100

typedef struct walker {
    lis_walk_fn fn;
    void *arg;
    lis_copy_opts *o;
    uint64_t max_bytes, max_entries, entries, skips, reported;
    lis_extent *ext;
    char rel[PATH_MAX];
} walker;

static void skip(walker *w, uint64_t data, int bound, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void skip(walker *w, uint64_t data, int bound, const char *fmt, ...)
{
    if (bound) {
        w->o->skipped_count++;
        w->o->skipped_bytes += data;
    }
    w->skips++;
    if (w->reported >= WALK_SKIP_LIST || !w->o->skipped)
        return;
    w->reported++;
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    w->o->skipped(w->o->arg, w->rel[0] ? w->rel : ".", why);
}

/* The data extents of fd's first size bytes into w->ext; their total. */
static uint64_t extents(walker *w, int fd, uint64_t size, size_t *n)
{
    uint64_t data = 0;
    *n = 0;
    for (off_t pos = 0; (uint64_t)pos < size;) {
        off_t d = lseek(fd, pos, SEEK_DATA);
        if (d < 0 && errno == ENXIO)
            break;
        if (d < 0)
            d = pos; /* no SEEK_DATA here: the rest is data */
        if ((uint64_t)d >= size)
            break;
        off_t h = lseek(fd, d, SEEK_HOLE);
        if (h < 0 || (uint64_t)h > size)
            h = (off_t)size;
        if (*n == WALK_MAX_EXTENTS - 1)
            h = (off_t)size; /* the rest as one extent, holes and all */
        w->ext[(*n)++] = (lis_extent){(uint64_t)d, (uint64_t)(h - d)};
        data += (uint64_t)(h - d);
        pos = h;
    }
    return data;
}

static int walk_entry(walker *w, int dir, const char *name, int depth, lis_error *err);

static int walk_dir(walker *w, int dir, const char *name, int depth, lis_error *err)
{
    int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return lis_fail_errno(err, "%s", w->rel[0] ? w->rel : name);
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return lis_oom(err);
    }
    size_t rlen = strlen(w->rel);
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (rlen + 1 + strlen(e->d_name) >= sizeof w->rel) {
            rc = lis_fail(err, ENAMETOOLONG, "%s/%s: path too long", w->rel, e->d_name);
            break;
        }
        snprintf(w->rel + rlen, sizeof w->rel - rlen, "%s%s", rlen ? "/" : "", e->d_name);
        rc = walk_entry(w, dirfd(d), e->d_name, depth + 1, err);
        w->rel[rlen] = 0;
    }
    closedir(d);
    return rc;
}

/* A symlink entry, its target read. Out of line: its PATH_MAX buffer would
 * otherwise sit in each of walk_entry's WALK_MAX_DEPTH nested frames (4.4 KB
 * each, 2.2 MB at the bound: past a job thread's stack, runtime/jobs.c). */
static __attribute__((noinline)) int walk_link(walker *w, int dir, const char *name,
                                               lis_walk_entry *e, lis_error *err)
{
    char target[PATH_MAX];
    ssize_t n = readlinkat(dir, name, target, sizeof target - 1);
    if (n < 0)
        return lis_fail_errno(err, "readlink %s", w->rel);
    target[n] = 0;
    e->link = target;
    return w->fn(w->arg, e, err);
}

static int walk_entry(walker *w, int dir, const char *name, int depth, lis_error *err)
{
    lis_walk_entry e = {.path = w->rel, .fd = -1};
    if (fstatat(dir, name, &e.st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT && depth ? 0 : lis_fail_errno(err, "%s", w->rel[0] ? w->rel : name);
    if (!S_ISDIR(e.st.st_mode) && !S_ISREG(e.st.st_mode) && !S_ISLNK(e.st.st_mode)) {
        skip(w, 0, 0, "not a regular file, directory or symlink");
        return 0;
    }
    if (++w->entries > w->max_entries) {
        skip(w, 0, 1, "more than %llu entries: the copy's entry bound",
             (unsigned long long)w->max_entries);
        return 0;
    }
    if (S_ISDIR(e.st.st_mode)) {
        if (depth >= WALK_MAX_DEPTH)
            return lis_fail(err, ELOOP, "%s: more than %d nested directories", w->rel,
                            WALK_MAX_DEPTH);
        if (w->fn(w->arg, &e, err) < 0)
            return -1;
        return walk_dir(w, dir, name, depth, err);
    }
    if (S_ISLNK(e.st.st_mode))
        return walk_link(w, dir, name, &e, err);
    e.fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (e.fd < 0)
        return lis_fail_errno(err, "%s", w->rel);
    if (fstat(e.fd, &e.st) < 0 || !S_ISREG(e.st.st_mode)) { /* swapped since the fstatat */
        close(e.fd);
        return 0;
    }
    e.data = extents(w, e.fd, (uint64_t)e.st.st_size, &e.next);
    e.ext = w->ext;
    int rc = 0;
    if (w->max_bytes != LIS_UNLIMITED && e.data > w->max_bytes - w->o->bytes)
        skip(w, e.data, 1,
             "%llu bytes of data would pass the copy's cap of %llu bytes (%llu copied before it)",
             (unsigned long long)e.data, (unsigned long long)w->max_bytes,
             (unsigned long long)w->o->bytes);
    else if ((rc = w->fn(w->arg, &e, err)) == 0)
        w->o->bytes += e.data;
    close(e.fd);
    return rc;
}

int lis_walk(lis_sandbox *sb, const char *path, lis_copy_opts *o, lis_walk_fn fn, void *arg,
             lis_error *err)
{
    walker *w = calloc(1, sizeof *w);
    lis_extent *ext = calloc(WALK_MAX_EXTENTS, sizeof *ext);
    if (!w || !ext) {
        free(w);
        free(ext);
        return lis_oom(err);
    }
    *w = (walker){.fn = fn, .arg = arg, .o = o, .ext = ext};
    o->bytes = o->skipped_count = o->skipped_bytes = 0;
    w->max_bytes = o->max_bytes ? o->max_bytes : sb->disk_limit;
    w->max_entries = w->max_bytes == LIS_UNLIMITED ? UINT64_MAX : w->max_bytes / 4096;
    if (w->max_entries < 16384)
        w->max_entries = 16384;
    char last[NAME_MAX + 1];
    int rc = -1, dir;
    if (!strcmp(path, "/")) { /* the root itself: walked from its own fd */
        int root = lis_sandbox_root_fd(sb, err);
        dir = root < 0 ? -1 : openat(root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        snprintf(last, sizeof last, ".");
    } else {
        dir = lis_open_parent(sb, path, 0, last, err);
    }
    if (dir >= 0) {
        rc = walk_entry(w, dir, last, 0, err);
        close(dir);
    }
    if (w->skips > w->reported && o->skipped) {
        char why[256];
        snprintf(why, sizeof why,
                 "%llu more entries left out, not listed one by one (%llu bytes of data left out "
                 "by the copy's cap in all)",
                 (unsigned long long)(w->skips - w->reported),
                 (unsigned long long)o->skipped_bytes);
        o->skipped(o->arg, ".", why);
    }
    free(ext);
    free(w);
    return rc;
}
