/* files.c - reading, writing and stat'ing files of a sandbox from the owner
 * (trees: copy.c).
 *
 * Every sandbox path is resolved with openat2(RESOLVE_IN_ROOT) against the
 * sandbox's root (/proc/<pid1>/root), so absolute symlinks and ".." planted
 * by the sandbox stay inside it; the last component is never followed when
 * writing, and trees are walked with O_NOFOLLOW directory fds on both sides,
 * so a symlink can never make lis read or write a host file.
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

int lis_open_in(int rootfd, const char *rel, int flags)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, rootfd, *rel ? rel : ".", &how, sizeof how);
}

/* Splits "/a/b/c" into the parent's dir fd (created when mkdirs) and "c". */
int lis_open_parent(lis_sandbox *sb, const char *path, int mkdirs, char *last, lis_error *err)
{
    if (lis_path_check(path, err) < 0)
        return -1;
    int root = lis_sandbox_root_fd(sb, err);
    if (root < 0)
        return -1;
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = 0;
    char *slash = strrchr(buf, '/');
    if (!slash[1])
        return lis_fail(err, EINVAL, "'%s' names the sandbox root, not a file", path);
    snprintf(last, NAME_MAX + 1, "%s", slash + 1);
    *slash = 0;
    const char *rel = buf;
    while (*rel == '/')
        rel++;
    int fd = lis_open_in(root, rel, O_PATH | O_DIRECTORY);
    if (fd >= 0 || errno != ENOENT || !mkdirs) {
        if (fd < 0)
            return lis_fail_errno(err, "%s", path);
        return fd;
    }
    /* create the missing directories one component at a time */
    fd = lis_open_in(root, "", O_PATH | O_DIRECTORY);
    for (char *p = (char *)rel; fd >= 0 && *p;) {
        char *e = strchrnul(p, '/');
        char save = *e;
        *e = 0;
        if (*p && mkdirat(fd, p, 0755) < 0 && errno != EEXIST) {
            int er = errno;
            close(fd);
            return lis_fail_errnum(err, er, "mkdir %s in the sandbox", p);
        }
        int next = *p ? openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : dup(fd);
        int er = errno;
        close(fd);
        fd = next;
        if (fd < 0)
            return lis_fail(err, er, "%s: %s", path,
                            er == ENOTDIR || er == ELOOP
                                ? "a parent is not a directory (symlinks are not followed here)"
                                : strerror(er));
        *e = save;
        p = save ? e + 1 : e;
    }
    return fd;
}

static int do_read(lis_sandbox *sb, const char *path, size_t max, char **data, size_t *len,
                   lis_error *err)
{
    *data = NULL;
    *len = 0;
    if (lis_path_check(path, err) < 0)
        return -1;
    int root = lis_sandbox_root_fd(sb, err);
    if (root < 0)
        return -1;
    int fd = lis_open_in(root, path + 1, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return lis_fail_errno(err, "%s", path);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return lis_fail(err, S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "%s is not a regular file",
                        path);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return lis_fail(err, EFBIG, "%s is %lld bytes, more than the %zu allowed", path,
                        (long long)st.st_size, max);
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == cap) { /* grew while we read */
            if (n > max)
                break;
            char *g = realloc(buf, (cap *= 2) + 1);
            if (!g) {
                free(buf);
                buf = NULL;
            }
            buf = g;
        }
    }
    close(fd);
    if (!buf)
        return lis_fail(err, ENOMEM, "out of memory reading %s", path);
    if (n > max) {
        free(buf);
        return lis_fail(err, EFBIG, "%s grew beyond %zu bytes", path, max);
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return 0;
}

static int do_write(lis_sandbox *sb, const char *path, const void *data, size_t len, unsigned mode,
                    lis_error *err)
{
    char last[NAME_MAX + 1];
    int dir = lis_open_parent(sb, path, 1, last, err);
    if (dir < 0)
        return -1;
    struct stat st;
    int existed = fstatat(dir, last, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (existed) {
        if (S_ISLNK(st.st_mode)) {
            close(dir);
            return lis_fail(err, ELOOP, "%s is a symlink; refusing to write through it", path);
        }
        if (!S_ISREG(st.st_mode)) {
            close(dir);
            return lis_fail(err, EISDIR, "%s exists and is not a regular file", path);
        }
        if (!mode)
            mode = st.st_mode & 07777;
    }
    if (!mode)
        mode = 0644;
    /* Write a temporary file and rename it: the old content survives any failure. */
    char tmp[NAME_MAX + 1];
    unsigned r = 0;
    getrandom(&r, sizeof r, 0);
    snprintf(tmp, sizeof tmp, ".lis-%08x.tmp", r);
    int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        close(dir);
        return lis_fail_errnum(err, e, "writing %s", path);
    }
    const char *p = data;
    size_t left = len;
    int e = 0;
    while (left && !e) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            e = n < 0 ? errno : EIO;
        else {
            p += n;
            left -= (size_t)n;
        }
    }
    /* a rewritten file keeps its owner (another uid inside: only as root of
     * the mapped namespace, so EPERM here sends the write there) */
    struct stat tst;
    if (!e && existed && fstat(fd, &tst) == 0 &&
        (tst.st_uid != st.st_uid || tst.st_gid != st.st_gid) &&
        fchown(fd, st.st_uid, st.st_gid) < 0)
        e = errno;
    if (!e && fchmod(fd, mode) < 0)
        e = errno;
    if (close(fd) < 0 && !e)
        e = errno;
    if (!e && renameat(dir, tmp, dir, last) < 0)
        e = errno;
    if (e)
        unlinkat(dir, tmp, 0);
    close(dir);
    if (e)
        return lis_fail_errnum(err, e, "writing %s", path);
    return 0;
}

static int do_stat(lis_sandbox *sb, const char *path, char *kind, uint64_t *size, lis_error *err)
{
    char last[NAME_MAX + 1];
    int dir;
    struct stat st;
    if (!strcmp(path, "/")) {
        int root = lis_sandbox_root_fd(sb, err);
        if (root < 0)
            return -1;
        if (fstat(root, &st) < 0)
            return lis_fail_errno(err, "/");
    } else {
        if ((dir = lis_open_parent(sb, path, 0, last, err)) < 0)
            return -1;
        int rc = fstatat(dir, last, &st, AT_SYMLINK_NOFOLLOW);
        int e = errno;
        close(dir);
        if (rc < 0)
            return lis_fail_errnum(err, e, "%s", path);
    }
    *kind = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : 'o';
    if (size)
        *size = (uint64_t)st.st_size;
    return 0;
}

/* ---- the same as root of the mapped user namespace ------------------------------
 *
 * The owner reaches a sandbox's files as itself: with a full map, a file
 * or directory that belongs to another uid inside (a user of the image, a
 * mode 0600 file) is out of its reach, while root inside the sandbox, as
 * Docker's put/get archive, reads and writes it. On EACCES/EPERM the
 * operation is done again by a child that is root of the holder namespace
 * (the sandbox's map, so the same power over these files as the sandbox's
 * own root); paths are still resolved inside the sandbox's root. */

static int denied(const lis_sandbox *sb, const lis_error *err)
{
    return sb->full_map && (err->code == EACCES || err->code == EPERM);
}

struct mapped_op {
    lis_sandbox *sb;
    const char *path;
    const void *data; /* write */
    size_t len, max;
    unsigned mode;
    char *shared; /* read: max + 1 bytes shared with the child */
};

struct mapped_res {
    size_t len;
    char kind;
    uint64_t size;
};

static int mapped_read(void *arg, void *result, lis_error *err)
{
    struct mapped_op *op = arg;
    struct mapped_res *r = result;
    char *data;
    if (do_read(op->sb, op->path, op->max, &data, &r->len, err) < 0)
        return -1;
    memcpy(op->shared, data, r->len);
    free(data);
    return 0;
}

static int mapped_write(void *arg, void *result, lis_error *err)
{
    struct mapped_op *op = arg;
    (void)result;
    return do_write(op->sb, op->path, op->data, op->len, op->mode, err);
}

static int mapped_stat(void *arg, void *result, lis_error *err)
{
    struct mapped_op *op = arg;
    struct mapped_res *r = result;
    return do_stat(op->sb, op->path, &r->kind, &r->size, err);
}

int lis_files_redo_mapped(lis_sandbox *sb, int (*fn)(void *, void *, lis_error *), void *arg,
                          void *res, size_t res_len, lis_error *err)
{
    if (!denied(sb, err))
        return -1;
    lis_error e2 = {0};
    int rc = lis_run_mapped(sb->ctx, fn, arg, res, res_len, &e2);
    if (rc < 0 && e2.code != ENOTSUP) /* ENOTSUP: no subordinate ids; the first error stays */
        *err = e2;
    return rc;
}

int lis_file_read(lis_sandbox *sb, const char *path, size_t max, char **data, size_t *len,
                  lis_error *err)
{
    if (do_read(sb, path, max, data, len, err) == 0)
        return 0;
    if (max >= SIZE_MAX / 2)
        return -1;
    struct mapped_op op = {.sb = sb, .path = path, .max = max};
    op.shared = mmap(NULL, max + 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (op.shared == MAP_FAILED)
        return -1;
    struct mapped_res res = {0};
    int rc = lis_files_redo_mapped(sb, mapped_read, &op, &res, sizeof res, err);
    if (rc == 0 && !(*data = malloc(res.len + 1)))
        rc = lis_fail(err, ENOMEM, "out of memory reading %s", path);
    if (rc == 0) {
        memcpy(*data, op.shared, res.len);
        (*data)[res.len] = 0;
        *len = res.len;
    }
    munmap(op.shared, max + 1);
    return rc;
}

int lis_file_write(lis_sandbox *sb, const char *path, const void *data, size_t len, unsigned mode,
                   lis_error *err)
{
    if (do_write(sb, path, data, len, mode, err) == 0)
        return 0;
    struct mapped_op op = {.sb = sb, .path = path, .data = data, .len = len, .mode = mode};
    return lis_files_redo_mapped(sb, mapped_write, &op, NULL, 0, err);
}

int lis_file_stat(lis_sandbox *sb, const char *path, char *kind, uint64_t *size, lis_error *err)
{
    if (do_stat(sb, path, kind, size, err) == 0)
        return 0;
    struct mapped_op op = {.sb = sb, .path = path};
    struct mapped_res res = {0};
    if (lis_files_redo_mapped(sb, mapped_stat, &op, &res, sizeof res, err) < 0)
        return -1;
    *kind = res.kind;
    if (size)
        *size = res.size;
    return 0;
}

struct as_root {
    int (*fn)(void *arg, void *result, lis_error *err);
    void *arg;
    const int *keep;
    size_t nkeep;
    int root_fd;
};

/* In the forked child: every fd of the caller's but stdio, the sandbox's root and
 * keep goes first, so a long copy holds no client connection or listener open. */
static int as_root_child(void *arg, void *result, lis_error *err)
{
    struct as_root *a = arg;
    unsigned lo = 3; /* the gaps between the kept fds, in order, with close_range */
    for (;;) {
        unsigned next = ~0u;
        if ((unsigned)a->root_fd >= lo)
            next = (unsigned)a->root_fd;
        for (size_t i = 0; i < a->nkeep; i++)
            if (a->keep[i] >= 0 && (unsigned)a->keep[i] >= lo && (unsigned)a->keep[i] < next)
                next = (unsigned)a->keep[i];
        if (next == ~0u) {
            syscall(SYS_close_range, lo, ~0u, 0);
            break;
        }
        if (next > lo)
            syscall(SYS_close_range, lo, next - 1, 0);
        lo = next + 1;
    }
    return a->fn(a->arg, result, err);
}

int lis_sandbox_as_root(lis_sandbox *sb, int (*fn)(void *arg, void *result, lis_error *err),
                        void *arg, void *result, size_t result_len, const int *keep, size_t nkeep,
                        lis_error *err)
{
    if (!sb->full_map)
        return fn(arg, result, err);
    struct as_root a = {fn, arg, keep, nkeep, lis_sandbox_root_fd(sb, err)};
    if (a.root_fd < 0)
        return -1;
    return lis_run_mapped(sb->ctx, as_root_child, &a, result, result_len, err);
}

static int do_lstat(lis_sandbox *sb, const char *path, struct stat *st, char *link, size_t len,
                    lis_error *err)
{
    char last[NAME_MAX + 1];
    if (link && len)
        link[0] = 0;
    if (!strcmp(path, "/")) {
        int root = lis_sandbox_root_fd(sb, err);
        if (root < 0)
            return -1;
        return fstat(root, st) < 0 ? lis_fail_errno(err, "/") : 0;
    }
    int dir = lis_open_parent(sb, path, 0, last, err);
    if (dir < 0)
        return -1;
    int rc = fstatat(dir, last, st, AT_SYMLINK_NOFOLLOW), e = errno;
    if (rc == 0 && S_ISLNK(st->st_mode) && link && len) {
        ssize_t n = readlinkat(dir, last, link, len - 1);
        link[n > 0 ? n : 0] = 0;
    }
    close(dir);
    return rc < 0 ? lis_fail_errnum(err, e, "%s", path) : 0;
}

struct mapped_lstat {
    lis_sandbox *sb;
    const char *path;
};

static int mapped_lstat(void *arg, void *result, lis_error *err)
{
    struct mapped_lstat *m = arg;
    struct {
        struct stat st;
        char link[PATH_MAX];
    } *r = result;
    return do_lstat(m->sb, m->path, &r->st, r->link, sizeof r->link, err);
}

int lis_file_lstat(lis_sandbox *sb, const char *path, struct stat *st, char *link, size_t len,
                   lis_error *err)
{
    if (do_lstat(sb, path, st, link, len, err) == 0)
        return 0;
    struct mapped_lstat m = {sb, path};
    struct {
        struct stat st;
        char link[PATH_MAX];
    } r;
    memset(&r, 0, sizeof r);
    if (lis_files_redo_mapped(sb, mapped_lstat, &m, &r, sizeof r, err) < 0)
        return -1;
    *st = r.st;
    if (link && len)
        snprintf(link, len, "%s", r.link);
    return 0;
}
