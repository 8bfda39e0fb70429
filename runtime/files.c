/* files.c - reading, writing and copying files of a sandbox from the owner.
 *
 * Every sandbox path is resolved with openat2(RESOLVE_IN_ROOT) against the
 * sandbox's root (/proc/<pid1>/root), so absolute symlinks and ".." planted
 * by the sandbox stay inside it; the last component is never followed when
 * writing, and trees are walked with O_NOFOLLOW directory fds on both sides,
 * so a symlink can never make lis read or write a host file. */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int lis_path_check(const char *path, lis_error *err)
{
    if (!path || path[0] != '/')
        return lis_fail(err, EINVAL, "path '%s' must be absolute", path ? path : "");
    if (strlen(path) >= PATH_MAX)
        return lis_fail(err, ENAMETOOLONG, "path too long");
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        const char *e = strchrnul(p, '/');
        if (e - p == 2 && p[0] == '.' && p[1] == '.')
            return lis_fail(err, EPERM, "path '%s' may not contain '..'", path);
        p = e;
    }
    return 0;
}

static int open_in(int rootfd, const char *rel, int flags)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, rootfd, *rel ? rel : ".", &how, sizeof how);
}

/* Splits "/a/b/c" into the parent's dir fd (created when mkdirs) and "c". */
static int open_parent(lis_sandbox *sb, const char *path, int mkdirs, char *last, lis_error *err)
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
    int fd = open_in(root, rel, O_PATH | O_DIRECTORY);
    if (fd >= 0 || errno != ENOENT || !mkdirs) {
        if (fd < 0)
            return lis_fail(err, errno, "%s: %s", path, strerror(errno));
        return fd;
    }
    /* create the missing directories one component at a time */
    fd = open_in(root, "", O_PATH | O_DIRECTORY);
    for (char *p = (char *)rel; fd >= 0 && *p;) {
        char *e = strchrnul(p, '/');
        char save = *e;
        *e = 0;
        if (*p && mkdirat(fd, p, 0755) < 0 && errno != EEXIST) {
            int er = errno;
            close(fd);
            return lis_fail(err, er, "mkdir %s in the sandbox: %s", p, strerror(er));
        }
        int next = *p ? openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : dup(fd);
        int er = errno;
        close(fd);
        fd = next;
        if (fd < 0)
            return lis_fail(err, er, "%s: %s", path, er == ENOTDIR || er == ELOOP
                            ? "a parent is not a directory (symlinks are not followed here)"
                            : strerror(er));
        *e = save;
        p = save ? e + 1 : e;
    }
    return fd;
}

int lis_file_read(lis_sandbox *sb, const char *path, size_t max, char **data, size_t *len,
                  lis_error *err)
{
    *data = NULL;
    *len = 0;
    if (lis_path_check(path, err) < 0)
        return -1;
    int root = lis_sandbox_root_fd(sb, err);
    if (root < 0)
        return -1;
    int fd = open_in(root, path + 1, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return lis_fail(err, errno, "%s: %s", path, strerror(errno));
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

int lis_file_write(lis_sandbox *sb, const char *path, const void *data, size_t len,
                   unsigned mode, lis_error *err)
{
    char last[NAME_MAX + 1];
    int dir = open_parent(sb, path, 1, last, err);
    if (dir < 0)
        return -1;
    struct stat st;
    if (fstatat(dir, last, &st, AT_SYMLINK_NOFOLLOW) == 0) {
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
        return lis_fail(err, e, "writing %s: %s", path, strerror(e));
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
        return lis_fail(err, e, "writing %s: %s", path, strerror(e));
    return 0;
}

int lis_file_stat(lis_sandbox *sb, const char *path, char *kind, uint64_t *size, lis_error *err)
{
    char last[NAME_MAX + 1];
    int dir;
    struct stat st;
    if (!strcmp(path, "/")) {
        int root = lis_sandbox_root_fd(sb, err);
        if (root < 0)
            return -1;
        if (fstat(root, &st) < 0)
            return lis_fail(err, errno, "/: %s", strerror(errno));
    } else {
        if ((dir = open_parent(sb, path, 0, last, err)) < 0)
            return -1;
        int rc = fstatat(dir, last, &st, AT_SYMLINK_NOFOLLOW);
        int e = errno;
        close(dir);
        if (rc < 0)
            return lis_fail(err, e, "%s: %s", path, strerror(e));
    }
    *kind = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : 'o';
    if (size)
        *size = (uint64_t)st.st_size;
    return 0;
}

/* ---- recursive copies between two directory fds, never following links ---- */

static int copy_entry(int sdir, const char *sname, int ddir, const char *dname, lis_error *err);

static int copy_file_fd(int in, int out)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return 0;
        for (char *p = buf; n > 0;) {
            ssize_t w = write(out, p, (size_t)n);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return w < 0 ? errno : EIO;
            p += w;
            n -= w;
        }
    }
}

static int copy_dir(int sdir, const char *sname, int ddir, const char *dname, mode_t mode,
                    lis_error *err)
{
    if (mkdirat(ddir, dname, 0700) < 0 && errno != EEXIST)
        return lis_fail(err, errno, "mkdir %s: %s", dname, strerror(errno));
    int s = openat(sdir, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s < 0)
        return lis_fail(err, errno, "%s: %s", sname, strerror(errno));
    int d = openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0) {
        int e = errno;
        close(s);
        return lis_fail(err, e, "%s: %s", dname, e == ENOTDIR || e == ELOOP
                        ? "exists and is not a directory (symlinks are not followed)"
                        : strerror(e));
    }
    DIR *it = fdopendir(s);
    int rc = 0;
    struct dirent *e;
    while (it && rc == 0 && (e = readdir(it)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            rc = copy_entry(dirfd(it), e->d_name, d, e->d_name, err);
    fchmod(d, mode & 07777);
    if (it)
        closedir(it);
    else
        close(s);
    close(d);
    return rc;
}

static int copy_entry(int sdir, const char *sname, int ddir, const char *dname, lis_error *err)
{
    struct stat st;
    if (fstatat(sdir, sname, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return lis_fail(err, errno, "%s: %s", sname, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return copy_dir(sdir, sname, ddir, dname, st.st_mode, err);
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(sdir, sname, target, sizeof target - 1);
        if (n < 0)
            return lis_fail(err, errno, "readlink %s: %s", sname, strerror(errno));
        target[n] = 0;
        unlinkat(ddir, dname, 0);
        if (symlinkat(target, ddir, dname) < 0)
            return lis_fail(err, errno, "symlink %s: %s", dname, strerror(errno));
        return 0;
    }
    if (!S_ISREG(st.st_mode))
        return 0; /* devices, fifos and sockets are not copied */
    int in = openat(sdir, sname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (in < 0)
        return lis_fail(err, errno, "%s: %s", sname, strerror(errno));
    int out = openat(ddir, dname, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                     st.st_mode & 0777);
    if (out < 0) {
        int e = errno;
        close(in);
        return lis_fail(err, e, "%s: %s", dname, e == ELOOP
                        ? "is a symlink; refusing to write through it" : strerror(e));
    }
    int e = copy_file_fd(in, out);
    fchmod(out, st.st_mode & 07777);
    close(in);
    if (close(out) < 0 && !e)
        e = errno;
    if (e)
        return lis_fail(err, e, "copying %s: %s", sname, strerror(e));
    return 0;
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

int lis_copy_in(lis_sandbox *sb, const char *host_src, const char *path, lis_error *err)
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
        return lis_fail(err, errno, "%s: %s", host_src, strerror(errno));
    /* cp semantics: into an existing directory, or as the given name */
    char kind;
    lis_error ignore;
    char target[PATH_MAX + NAME_MAX + 2];
    if (lis_file_stat(sb, path, &kind, NULL, &ignore) == 0 && kind == 'd')
        snprintf(target, sizeof target, "%s/%s", strcmp(path, "/") ? path : "", hname);
    else
        snprintf(target, sizeof target, "%s", path);
    char last[NAME_MAX + 1];
    int ddir = open_parent(sb, target, 1, last, err);
    if (ddir < 0) {
        close(sdir);
        return -1;
    }
    int dd = openat(ddir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(ddir);
    int rc = dd < 0 ? lis_fail(err, errno, "%s: %s", target, strerror(errno))
                    : copy_entry(sdir, hname, dd, last, err);
    if (dd >= 0)
        close(dd);
    close(sdir);
    return rc;
}

int lis_copy_out(lis_sandbox *sb, const char *path, const char *host_dst, lis_error *err)
{
    char last[NAME_MAX + 1];
    int sp = open_parent(sb, path, 0, last, err);
    if (sp < 0)
        return -1;
    int sdir = openat(sp, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(sp);
    if (sdir < 0)
        return lis_fail(err, errno, "%s: %s", path, strerror(errno));
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
        return lis_fail(err, e, "%s: %s", tdir, strerror(e));
    }
    int rc = copy_entry(sdir, last, ddir, tname, err);
    close(sdir);
    close(ddir);
    return rc;
}
