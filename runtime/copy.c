/* copy.c - copying trees between the host and a sandbox (lis_copy_in,
 * lis_copy_out, the agent's export lis_copy_out_data), never following a
 * link on either side.
 *
 * Sandbox paths are resolved as files.c does (openat2 RESOLVE_IN_ROOT on the
 * sandbox's root); trees are walked with O_NOFOLLOW directory fds. Files are
 * copied extent by extent (SEEK_DATA/SEEK_HOLE): a sparse file stays sparse,
 * and a 1 TB hole costs nothing on either side.
 *
 * A copy out is bounded (lis_copy_opts): at most max_bytes of data (holes
 * not counted; default the sandbox's writable budget) and one entry per
 * 4 KiB of that (as the budget tmpfs's inodes); what would pass either is
 * left out whole and reported, the first COPY_SKIP_LIST entries one by one,
 * the rest in one closing line, so the report is bounded too.
 *
 * lis_copy_out_data (the agent's export) also keeps the sandbox from leaving
 * anything in the copy that points at the host: Python tarfile's "data"
 * filter (PEP 706). Links are checked twice: while copying, an absolute
 * target or one whose ".." climb above the tree is not copied; on the
 * finished copy, every remaining link is resolved through the copy's own
 * links (which the sandbox can no longer change) and dropped if it escapes. */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- recursive copies between two directory fds, never following links ---- */

/* One copy's state: the bounds (copies out only), the export filter of
 * lis_copy_out_data (Python tarfile's "data" filter, PEP 706) and the
 * reports of what was left out. rel is the entry's path inside the copied
 * tree, depth the number of directories between it and the tree's top. */
typedef struct copy_job {
    int filter;  /* the data filter is on */
    int bounded; /* a copy out: max_bytes and max_entries apply */
    uint64_t max_bytes, max_entries;
    uint64_t bytes, entries;         /* so far */
    uint64_t skipped, skipped_bytes; /* left out by the bounds */
    uint64_t skips, reported;        /* every entry left out; those reported one by one */
    lis_skip_fn on_skip;
    void *arg;
    char rel[PATH_MAX];
    int depth;
} copy_job;

/* Nesting limit of every copy: the walk recurses, and a sandbox can nest
 * directories far deeper than PATH_MAX by creating them from inside. */
#define COPY_MAX_DEPTH 512
/* Skipped entries reported one by one; the rest are summed in one report. */
#define COPY_SKIP_LIST 100
/* One entry per this many bytes of max_bytes (the budget tmpfs's nr_inodes rule). */
#define COPY_BYTES_PER_ENTRY 4096
#define COPY_MIN_ENTRIES 16384

static int copy_entry(int sdir, const char *sname, int ddir, const char *dname, int depth,
                      copy_job *f, lis_error *err);

static void skip(copy_job *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void skip(copy_job *f, const char *fmt, ...)
{
    char why[PATH_MAX + 128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    f->skips++;
    if (f->reported >= COPY_SKIP_LIST)
        return; /* counted; summed up at the end (skip_summary) */
    f->reported++;
    if (f->on_skip)
        f->on_skip(f->arg, f->rel[0] ? f->rel : ".", why);
}

/* An entry the bounds leave out (with its data bytes when known). */
static void skip_bound(copy_job *f, uint64_t data, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void skip_bound(copy_job *f, uint64_t data, const char *fmt, ...)
{
    f->skipped++;
    f->skipped_bytes += data;
    if (f->reported >= COPY_SKIP_LIST) {
        f->skips++;
        return;
    }
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    skip(f, "%s", why);
}

/* Does a relative link target climb above the exported tree, read as plain
 * names from a link depth directories down? (Symlinks inside the target are
 * resolved afterwards, on the finished copy: see drop_escaping_links.) */
static int lexically_escapes(const char *target, int depth)
{
    for (const char *p = target; *p;) {
        while (*p == '/')
            p++;
        const char *e = strchrnul(p, '/');
        if (e - p == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return 1;
        } else if (e > p && !(e - p == 1 && p[0] == '.')) {
            depth++;
        }
        p = e;
    }
    return 0;
}

/* The data filter's modes: no setuid/setgid/sticky, no group/other write,
 * and the owner can always read and write (and enter directories). */
static mode_t filter_mode(const copy_job *f, mode_t mode, int dir)
{
    if (!f->filter)
        return mode & 07777;
    return (mode & 0755) | (dir ? 0700 : 0600);
}

/* The bytes of data (not holes) in fd's first size bytes. */
static void data_bytes(int fd, uint64_t size, uint64_t *data)
{
    *data = 0;
    for (off_t pos = 0; (uint64_t)pos < size;) {
        off_t d = lseek(fd, pos, SEEK_DATA);
        if (d < 0 && errno == ENXIO)
            break;   /* only a hole is left */
        if (d < 0) { /* no SEEK_DATA here: all of it is data */
            *data += size - (uint64_t)pos;
            break;
        }
        if ((uint64_t)d >= size)
            break;
        off_t h = lseek(fd, d, SEEK_HOLE);
        if (h < 0 || (uint64_t)h > size)
            h = (off_t)size;
        *data += (uint64_t)(h - d);
        pos = h;
    }
}

/* Copies the data extents of in's first size bytes to the same offsets of
 * out (holes stay holes; out ends at size), writing at most max bytes of
 * data: EFBIG past it (the file grew data while copied). errno-style 0 or
 * error; *wrote gets the data bytes written. Out of line: the recursion's
 * frames stay small. */
static __attribute__((noinline)) int copy_file_sparse(int in, int out, uint64_t size, uint64_t max,
                                                      uint64_t *wrote)
{
    char buf[65536];
    *wrote = 0;
    for (off_t pos = 0; (uint64_t)pos < size;) {
        off_t d = lseek(in, pos, SEEK_DATA);
        if (d < 0 && errno == ENXIO)
            break;
        if (d < 0)
            d = pos;
        if ((uint64_t)d >= size)
            break;
        off_t h = lseek(in, d, SEEK_HOLE);
        if (h < 0 || (uint64_t)h > size)
            h = (off_t)size;
        for (off_t at = d; at < h;) {
            size_t want = (size_t)(h - at) < sizeof buf ? (size_t)(h - at) : sizeof buf;
            if (*wrote + want > max)
                return EFBIG;
            ssize_t n = pread(in, buf, want, at);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return errno;
            if (n == 0) { /* it shrank meanwhile */
                h = at;
                size = (uint64_t)at;
                break;
            }
            for (ssize_t w = 0; w < n;) {
                ssize_t m = pwrite(out, buf + w, (size_t)(n - w), at + w);
                if (m < 0 && errno == EINTR)
                    continue;
                if (m <= 0)
                    return m < 0 ? errno : EIO;
                w += m;
            }
            *wrote += (uint64_t)n;
            at += n;
        }
        pos = h;
    }
    return ftruncate(out, (off_t)size) < 0 ? errno : 0; /* a hole at the end */
}

static int copy_dir(int sdir, const char *sname, int ddir, const char *dname, mode_t mode,
                    int depth, copy_job *f, lis_error *err)
{
    if (depth >= COPY_MAX_DEPTH)
        return lis_fail(err, ELOOP, "%s: more than %d nested directories", sname, COPY_MAX_DEPTH);
    if (mkdirat(ddir, dname, 0700) < 0 && errno != EEXIST)
        return lis_fail_errno(err, "mkdir %s", dname);
    int s = openat(sdir, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s < 0)
        return lis_fail_errno(err, "%s", sname);
    int d = openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0) {
        int e = errno;
        close(s);
        return lis_fail(err, e, "%s: %s", dname,
                        e == ENOTDIR || e == ELOOP
                            ? "exists and is not a directory (symlinks are not followed)"
                            : strerror(e));
    }
    DIR *it = fdopendir(s);
    int rc = 0;
    struct dirent *e;
    size_t rlen = strlen(f->rel);
    f->depth++;
    while (it && rc == 0 && (e = readdir(it))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (rlen + 1 + strlen(e->d_name) >= sizeof f->rel) {
            rc = lis_fail(err, ENAMETOOLONG, "%s/%s: path too long", f->rel, e->d_name);
            break;
        }
        snprintf(f->rel + rlen, sizeof f->rel - rlen, "%s%s", rlen ? "/" : "", e->d_name);
        rc = copy_entry(dirfd(it), e->d_name, d, e->d_name, depth + 1, f, err);
        f->rel[rlen] = 0;
    }
    f->depth--;
    fchmod(d, filter_mode(f, mode, 1));
    if (it)
        closedir(it);
    else
        close(s);
    close(d);
    return rc;
}

/* Out of line, as copy_file_fd: the recursion's frames stay small. */
static __attribute__((noinline)) int copy_link(int sdir, const char *sname, int ddir,
                                               const char *dname, copy_job *f, lis_error *err)
{
    char target[PATH_MAX];
    ssize_t n = readlinkat(sdir, sname, target, sizeof target - 1);
    if (n < 0)
        return lis_fail_errno(err, "readlink %s", sname);
    target[n] = 0;
    /* the target read once is the one checked and the one written */
    if (f->filter && target[0] == '/') {
        skip(f, "absolute symlink to %s", target);
        return 0;
    }
    if (f->filter && (f->depth == 0 || lexically_escapes(target, f->depth - 1))) {
        skip(f, "symlink to %s leads outside the exported tree", target);
        return 0;
    }
    unlinkat(ddir, dname, 0);
    if (symlinkat(target, ddir, dname) < 0)
        return lis_fail_errno(err, "symlink %s", dname);
    return 0;
}

static const char *kind_name(mode_t m)
{
    return S_ISCHR(m)    ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a fifo"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

/* A copy out past its entry bound leaves the rest out. */
static int over_entries(copy_job *f)
{
    if (!f->bounded || ++f->entries <= f->max_entries)
        return 0;
    skip_bound(f, 0, "more than %llu entries: the copy's entry bound",
               (unsigned long long)f->max_entries);
    return 1;
}

static int copy_file(int sdir, const char *sname, int ddir, const char *dname, copy_job *f,
                     lis_error *err)
{
    int in = openat(sdir, sname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (in < 0)
        return lis_fail_errno(err, "%s", sname);
    struct stat st;
    if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) { /* swapped since the fstatat */
        close(in);
        if (f->filter)
            skip(f, "%s", kind_name(st.st_mode));
        return 0;
    }
    uint64_t size = (uint64_t)st.st_size, data = 0, wrote = 0;
    uint64_t left = f->bounded ? f->max_bytes - f->bytes : UINT64_MAX;
    if (f->bounded) {
        data_bytes(in, size, &data);
        if (data > left) {
            close(in);
            skip_bound(f, data,
                       "%llu bytes of data would pass the copy's cap of %llu bytes "
                       "(%llu copied before it)",
                       (unsigned long long)data, (unsigned long long)f->max_bytes,
                       (unsigned long long)f->bytes);
            return 0;
        }
    }
    int out = openat(ddir, dname, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                     st.st_mode & 0777 & (f->filter ? 0755 : 0777));
    if (out < 0) {
        int e = errno;
        close(in);
        return lis_fail(err, e, "%s: %s", dname,
                        e == ELOOP ? "is a symlink; refusing to write through it" : strerror(e));
    }
    int e = copy_file_sparse(in, out, size, left, &wrote);
    fchmod(out, filter_mode(f, st.st_mode, 0));
    close(in);
    if (close(out) < 0 && !e)
        e = errno;
    if (e == EFBIG && f->bounded) { /* grew past the cap while copied: left out whole */
        unlinkat(ddir, dname, 0);
        skip_bound(f, wrote, "it grew past the copy's cap of %llu bytes while it was copied",
                   (unsigned long long)f->max_bytes);
        return 0;
    }
    f->bytes += wrote;
    if (e)
        return lis_fail_errnum(err, e, "copying %s", sname);
    return 0;
}

static int copy_entry(int sdir, const char *sname, int ddir, const char *dname, int depth,
                      copy_job *f, lis_error *err)
{
    struct stat st;
    if (fstatat(sdir, sname, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return lis_fail_errno(err, "%s", sname);
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) {
        if (f->filter) /* devices, fifos and sockets are not copied */
            skip(f, "%s", kind_name(st.st_mode));
        return 0;
    }
    if (over_entries(f))
        return 0;
    if (S_ISDIR(st.st_mode))
        return copy_dir(sdir, sname, ddir, dname, st.st_mode, depth, f, err);
    if (S_ISLNK(st.st_mode))
        return copy_link(sdir, sname, ddir, dname, f, err);
    return copy_file(sdir, sname, ddir, dname, f, err);
}

static const char *base_name(const char *path, char *buf, size_t len)
{
    snprintf(buf, len, "%s", path);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = 0;
    char *s = strrchr(buf, '/');
    return s ? s + 1 : buf;
}

static int do_copy_in(lis_sandbox *sb, const char *host_src, const char *path, lis_error *err)
{
    char hb[PATH_MAX], hdir[PATH_MAX];
    const char *hname = base_name(host_src, hb, sizeof hb);
    snprintf(hdir, sizeof hdir, "%s", host_src);
    char *s = strrchr(hdir, '/');
    if (s)
        *(s == hdir ? s + 1 : s) = 0;
    else
        strcpy(hdir, ".");
    int sdir = open(hdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sdir < 0)
        return lis_fail_errno(err, "%s", host_src);
    /* cp semantics: into an existing directory, or as the given name */
    char kind;
    lis_error ignore;
    char target[PATH_MAX + NAME_MAX + 2];
    if (lis_file_stat(sb, path, &kind, NULL, &ignore) == 0 && kind == 'd')
        snprintf(target, sizeof target, "%s/%s", strcmp(path, "/") ? path : "", hname);
    else
        snprintf(target, sizeof target, "%s", path);
    char last[NAME_MAX + 1];
    int ddir = lis_open_parent(sb, target, 1, last, err);
    if (ddir < 0) {
        close(sdir);
        return -1;
    }
    int dd = openat(ddir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(ddir);
    copy_job *f =
        dd < 0 ? NULL : calloc(1, sizeof *f); /* unbounded: the sandbox's budget bounds it */
    int rc = dd < 0 ? lis_fail_errno(err, "%s", target)
             : !f   ? lis_oom(err)
                    : copy_entry(sdir, hname, dd, last, 0, f, err);
    free(f);
    if (dd >= 0)
        close(dd);
    close(sdir);
    return rc;
}

struct copy_in_job {
    lis_sandbox *sb;
    const char *host_src, *path;
};

static int mapped_copy_in(void *arg, void *result, lis_error *err)
{
    struct copy_in_job *j = arg;
    (void)result;
    return do_copy_in(j->sb, j->host_src, j->path, err);
}

/* A copy into a directory of another uid inside is done again, whole, as
 * root of the mapped namespace (cp semantics: what the first try copied is
 * replaced). */
int lis_copy_in(lis_sandbox *sb, const char *host_src, const char *path, lis_error *err)
{
    if (do_copy_in(sb, host_src, path, err) == 0)
        return 0;
    struct copy_in_job j = {sb, host_src, path};
    return lis_files_redo_mapped(sb, mapped_copy_in, &j, NULL, 0, err);
}

/* ---- the second half of the export filter, on the finished host copy ---- */

/* Resolves a relative symlink target found in directory dir (a path below the
 * tree's top, "" for the top) the way the kernel would inside the exported
 * tree, following the tree's own symlinks. Returns NULL when it stays inside,
 * else why not. Every directory name pushed on the way was seen not to be a
 * symlink, so the fstatat of a longer path never follows one either. */
static const char *link_escapes(int top, const char *dir, const char *target)
{
    char at[PATH_MAX], todo[2 * PATH_MAX];
    snprintf(at, sizeof at, "%s", dir);
    if ((size_t)snprintf(todo, sizeof todo, "%s", target) >= sizeof todo)
        return "its target is too long to check";
    int hops = 0;
    char *p = todo;
    while (*p) {
        while (*p == '/')
            p++;
        char *e = strchrnul(p, '/');
        size_t len = (size_t)(e - p);
        if (!len || (len == 1 && p[0] == '.')) {
            p = e;
            continue;
        }
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            if (!at[0])
                return "it leads outside the exported tree";
            char *s = strrchr(at, '/');
            *(s ? s : at) = 0;
            p = e;
            continue;
        }
        size_t alen = strlen(at);
        if (alen + 1 + len >= sizeof at)
            return "its target is too long to check";
        snprintf(at + alen, sizeof at - alen, "%s%.*s", alen ? "/" : "", (int)len, p);
        struct stat st;
        if (fstatat(top, at, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode)) {
            p = e; /* a directory, a file or nothing: a name like any other */
            continue;
        }
        /* a symlink: its target replaces the name, relative to where we are */
        char t[PATH_MAX];
        ssize_t n = readlinkat(top, at, t, sizeof t - 1);
        at[alen] = 0;
        if (n < 0)
            return "one of its symlinks cannot be read";
        t[n] = 0;
        if (t[0] == '/')
            return "it goes through an absolute symlink";
        if (++hops > 40) /* a loop never resolves, so never reaches outside */
            return NULL;
        char rest[2 * PATH_MAX];
        if ((size_t)snprintf(rest, sizeof rest, "%s/%s", t, e) >= sizeof todo)
            return "its target is too long to check";
        memcpy(todo, rest, strlen(rest) + 1);
        p = todo;
    }
    return NULL;
}

/* Checks one symlink of the copy (rel: its path, dlen: the length of its
 * directory's part) and removes it when it escapes. Out of line: the
 * recursion of drop_pass keeps small frames. */
static __attribute__((noinline)) int drop_if_escaping(int top, int dfd, const char *name,
                                                      size_t dlen, copy_job *f)
{
    char t[PATH_MAX], dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", (int)dlen, f->rel);
    ssize_t n = readlinkat(dfd, name, t, sizeof t - 1);
    const char *why = "it cannot be read";
    if (n >= 0) {
        t[n] = 0;
        why = t[0] == '/' ? "it is absolute" : link_escapes(top, dir, t);
    }
    if (!why || unlinkat(dfd, name, 0) < 0)
        return 0;
    skip(f, "symlink to %s: %s", n >= 0 ? t : "?", why);
    return 1;
}

/* One pass over the tree below top: removes each symlink whose target
 * escapes (reported to f). Returns how many were removed. */
static int drop_pass(int top, int dfd, int depth, copy_job *f)
{
    int dup_fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *it = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!it) {
        if (dup_fd >= 0)
            close(dup_fd);
        return 0;
    }
    int dropped = 0;
    size_t rlen = strlen(f->rel);
    struct dirent *e;
    while ((e = readdir(it))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (rlen + 1 + strlen(e->d_name) >= sizeof f->rel)
            continue; /* cannot happen: the copy refused such paths */
        snprintf(f->rel + rlen, sizeof f->rel - rlen, "%s%s", rlen ? "/" : "", e->d_name);
        if (S_ISDIR(st.st_mode) && depth < COPY_MAX_DEPTH) {
            int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                dropped += drop_pass(top, sub, depth + 1, f);
                close(sub);
            }
        } else if (S_ISLNK(st.st_mode)) {
            dropped += drop_if_escaping(top, dfd, e->d_name, rlen, f);
        }
        f->rel[rlen] = 0;
    }
    closedir(it);
    return dropped;
}

/* Removing a link can only make paths through it dangle, never escape, but
 * another pass costs little and makes that argument unnecessary. */
static void drop_escaping_links(int ddir, const char *tname, copy_job *f)
{
    struct stat st;
    if (fstatat(ddir, tname, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
        return;
    int top = openat(ddir, tname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (top < 0)
        return;
    for (int pass = 0; pass < 8; pass++) {
        f->rel[0] = 0;
        if (!drop_pass(top, top, 0, f))
            break;
    }
    close(top);
}

static int copy_out(lis_sandbox *sb, const char *path, const char *host_dst, copy_job *f,
                    lis_error *err)
{
    char last[NAME_MAX + 1];
    int sp = lis_open_parent(sb, path, 0, last, err);
    if (sp < 0)
        return -1;
    int sdir = openat(sp, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(sp);
    if (sdir < 0)
        return lis_fail_errno(err, "%s", path);
    struct stat st;
    char target[PATH_MAX + NAME_MAX + 2];
    if (stat(host_dst, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(target, sizeof target, "%s/%s", host_dst, last);
    else
        snprintf(target, sizeof target, "%s", host_dst);
    char tb[PATH_MAX + NAME_MAX + 2], tdir[PATH_MAX + NAME_MAX + 2];
    const char *tname = base_name(target, tb, sizeof tb);
    snprintf(tdir, sizeof tdir, "%s", target);
    char *s = strrchr(tdir, '/');
    if (s)
        *(s == tdir ? s + 1 : s) = 0;
    else
        strcpy(tdir, ".");
    int ddir = open(tdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ddir < 0) {
        int e = errno;
        close(sdir);
        return lis_fail_errnum(err, e, "%s", tdir);
    }
    int rc = copy_entry(sdir, last, ddir, tname, 0, f, err);
    if (f->filter) /* also after a failed copy: what did land must be safe too */
        drop_escaping_links(ddir, tname, f);
    close(sdir);
    close(ddir);
    return rc;
}

/* What a copy done again in the mapped child hands back. */
struct copy_counts {
    uint64_t bytes, skipped, skipped_bytes, skips, reported;
};

static int mapped_copy_out(void *arg, void *result, lis_error *err)
{
    void **a = arg;
    copy_job *f = a[3];
    int rc = copy_out(a[0], a[1], a[2], f, err);
    struct copy_counts *c = result;
    *c = (struct copy_counts){f->bytes, f->skipped, f->skipped_bytes, f->skips, f->reported};
    return rc;
}

/* Without a caller's skip callback, what a copy leaves out is a warning. */
static void warn_skip(void *arg, const char *path, const char *why)
{
    void **a = arg;
    lis_warn(a[0], "%s: %s%s%s: not copied: %s", lis_sandbox_name(a[1]), (const char *)a[2],
             strcmp(path, ".") ? "/" : "", strcmp(path, ".") ? path : "", why);
}

int lis_copy_out_opts(lis_sandbox *sb, const char *path, const char *host_dst, lis_copy_opts *o,
                      lis_error *err)
{
    copy_job *f = calloc(1, sizeof *f);
    if (!f)
        return lis_oom(err);
    void *warn_arg[3] = {sb->ctx, sb, (void *)path};
    f->filter = o->data_filter;
    f->on_skip = o->skipped ? o->skipped : warn_skip;
    f->arg = o->skipped ? o->arg : warn_arg;
    f->max_bytes = o->max_bytes ? o->max_bytes : sb->disk_limit;
    f->bounded = f->max_bytes != LIS_UNLIMITED;
    f->max_entries = f->max_bytes / COPY_BYTES_PER_ENTRY;
    if (f->max_entries < COPY_MIN_ENTRIES)
        f->max_entries = COPY_MIN_ENTRIES;
    int rc = copy_out(sb, path, host_dst, f, err);
    /* Out of a directory of another uid inside: again, whole, as root of the
     * mapped namespace (what it makes on the host belongs to the caller, that
     * namespace's root). Not with a caller's callback: it would run in the
     * child, on a copy of the caller's memory. */
    if (rc < 0 && !o->skipped) {
        f->bytes = f->entries = f->skipped = f->skipped_bytes = f->skips = f->reported = 0;
        struct copy_counts c = {0};
        void *a[4] = {sb, (void *)path, (void *)host_dst, f};
        rc = lis_files_redo_mapped(sb, mapped_copy_out, a, &c, sizeof c, err);
        f->bytes = c.bytes;
        f->skipped = c.skipped;
        f->skipped_bytes = c.skipped_bytes;
        f->skips = c.skips;
        f->reported = c.reported;
    }
    if (f->skips > f->reported) { /* the rest in one line: the report stays bounded */
        char why[256];
        snprintf(why, sizeof why,
                 "%llu more entries left out, not listed one by one (%llu bytes of data "
                 "left out by the copy's cap in all)",
                 (unsigned long long)(f->skips - f->reported),
                 (unsigned long long)f->skipped_bytes);
        f->rel[0] = 0;
        f->on_skip(f->arg, ".", why);
    }
    o->bytes = f->bytes;
    o->skipped_count = f->skipped;
    o->skipped_bytes = f->skipped_bytes;
    free(f);
    return rc;
}

int lis_copy_out(lis_sandbox *sb, const char *path, const char *host_dst, lis_error *err)
{
    lis_copy_opts o = {0};
    return lis_copy_out_opts(sb, path, host_dst, &o, err);
}

int lis_copy_out_data(lis_sandbox *sb, const char *path, const char *host_dst, lis_skip_fn skipped,
                      void *arg, lis_error *err)
{
    lis_copy_opts o = {.data_filter = 1, .skipped = skipped, .arg = arg};
    return lis_copy_out_opts(sb, path, host_dst, &o, err);
}
