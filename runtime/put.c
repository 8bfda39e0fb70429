/* put.c - entries written one by one below a directory of a sandbox (lis_put: serve's
 * archive PUT extracts each tar entry through it), each file whole or not at all.
 *
 * Every path resolves inside the sandbox's root below the directory (files.c's
 * lis_open_parent: openat2 RESOLVE_IN_ROOT, missing parents made), so a symlink can
 * send a write elsewhere in the sandbox, as dockerd's chrooted extraction does, and
 * never out of it. The last component is never followed: a file, symlink or hard link
 * is made under a temporary name beside it and renamed over it, so each file is the old
 * one or the whole new one. Hard links may only name a regular file this writer made
 * (checked by its inode), so an archive cannot link to what was there before. Directory
 * modes and times are set at the end (lis_put_finish), deepest first, so a read-only
 * directory still receives its files. lis_put_abort removes what the writer made that
 * was not there before, newest first; a file it replaced stays replaced. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct made {
    char *path; /* the full path inside the sandbox */
    int dir;
} made;

typedef struct file_rec {
    char *rel; /* normalised, relative to p->dir */
    dev_t dev;
    ino_t ino;
} file_rec;

typedef struct dir_rec {
    char *path;
    lis_put_attr a;
} dir_rec;

struct lis_put {
    lis_sandbox *sb;
    char dir[PATH_MAX];
    made *made;
    size_t nmade, made_cap;
    file_rec *files;
    size_t nfiles, files_cap;
    size_t *slots; /* open addressing over files: index + 1, 0 empty */
    size_t nslots;
    dir_rec *dirs;
    size_t ndirs, dirs_cap;
    /* the file being written */
    int pend_fd, pend_parent, pend_existed;
    char pend_tmp[32], pend_last[NAME_MAX + 1], pend_rel[PATH_MAX];
};

/* "a//b/./c/" -> "a/b/c"; -1 for ".." or an empty name. */
static int norm(const char *in, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = in; *p;) {
        while (*p == '/')
            p++;
        const char *e = strchrnul(p, '/');
        size_t n = (size_t)(e - p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return -1;
        if (n && !(n == 1 && p[0] == '.')) {
            if (o + (o ? 1 : 0) + n + 1 > len)
                return -1;
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p = e;
    }
    out[o] = 0;
    return o ? 0 : -1;
}

static int full_path(lis_put *p, const char *path, char *rel, char *full, lis_error *err)
{
    if (norm(path, rel, PATH_MAX) < 0)
        return lis_fail(err, EINVAL, "\"%s\": not a name below %s", path, p->dir);
    if ((size_t)snprintf(full, PATH_MAX, "%s/%s", strcmp(p->dir, "/") ? p->dir : "", rel) >=
        PATH_MAX)
        return lis_fail(err, ENAMETOOLONG, "%s/%s: path too long", p->dir, rel);
    return 0;
}

static int remember(lis_put *p, const char *full, int dir, lis_error *err)
{
    if (LIS_GROW(p->made, p->made_cap, p->nmade + 1) < 0)
        return lis_oom(err);
    if (!(p->made[p->nmade].path = strdup(full)))
        return lis_oom(err);
    p->made[p->nmade++].dir = dir;
    return 0;
}

static size_t hash(const char *s)
{
    size_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static file_rec *find_file(lis_put *p, const char *rel)
{
    if (!p->nslots)
        return NULL;
    for (size_t i = hash(rel) & (p->nslots - 1);; i = (i + 1) & (p->nslots - 1)) {
        if (!p->slots[i])
            return NULL;
        if (!strcmp(p->files[p->slots[i] - 1].rel, rel))
            return &p->files[p->slots[i] - 1];
    }
}

static void place(lis_put *p, size_t idx)
{
    size_t i = hash(p->files[idx].rel) & (p->nslots - 1);
    while (p->slots[i])
        i = (i + 1) & (p->nslots - 1);
    p->slots[i] = idx + 1;
}

/* Records (or updates) the regular file rel as made by this writer. */
static int add_file(lis_put *p, const char *rel, const struct stat *st, lis_error *err)
{
    file_rec *f = find_file(p, rel);
    if (f) {
        f->dev = st->st_dev;
        f->ino = st->st_ino;
        return 0;
    }
    if (2 * (p->nfiles + 1) > p->nslots) { /* grow and rehash: at most half full */
        size_t n = p->nslots ? 2 * p->nslots : 64;
        size_t *s = calloc(n, sizeof *s);
        if (!s)
            return lis_oom(err);
        free(p->slots);
        p->slots = s;
        p->nslots = n;
        for (size_t i = 0; i < p->nfiles; i++)
            place(p, i);
    }
    if (LIS_GROW(p->files, p->files_cap, p->nfiles + 1) < 0)
        return lis_oom(err);
    if (!(p->files[p->nfiles].rel = strdup(rel)))
        return lis_oom(err);
    p->files[p->nfiles].dev = st->st_dev;
    p->files[p->nfiles].ino = st->st_ino;
    place(p, p->nfiles++);
    return 0;
}

/* Owner (when the caller can give it), then the mode (a chown clears setuid
 * bits), then the time, on an open fd. */
static int set_attrs(int fd, const lis_put_attr *a)
{
    if (a->uid >= 0 && a->gid >= 0 && fchown(fd, (uid_t)a->uid, (gid_t)a->gid) < 0 &&
        errno != EPERM && errno != EINVAL)
        return errno; /* not mapped here, or not ours to give: root's */
    if (fchmod(fd, a->mode & 07777) < 0)
        return errno;
    struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, a->mtime};
    futimens(fd, ts);
    return 0;
}

lis_put *lis_put_new(lis_sandbox *sb, const char *dir, lis_error *err)
{
    if (lis_path_check(dir, err) < 0)
        return NULL;
    int root = lis_sandbox_root_fd(sb, err);
    if (root < 0)
        return NULL;
    int fd = lis_open_in(root, dir + 1, O_PATH | O_DIRECTORY);
    if (fd < 0) {
        lis_fail_errno(err, "%s", dir);
        return NULL;
    }
    close(fd);
    lis_put *p = calloc(1, sizeof *p);
    if (!p) {
        lis_oom(err);
        return NULL;
    }
    p->sb = sb;
    p->pend_fd = p->pend_parent = -1;
    snprintf(p->dir, sizeof p->dir, "%s", dir);
    size_t n = strlen(p->dir);
    while (n > 1 && p->dir[n - 1] == '/')
        p->dir[--n] = 0;
    return p;
}

/* The parent of path's full name (made when missing) and its last component;
 * what is there now (st_mode 0: nothing). */
static int open_parent(lis_put *p, const char *path, char *rel, char *last, struct stat *now,
                       lis_error *err)
{
    char full[PATH_MAX];
    if (full_path(p, path, rel, full, err) < 0)
        return -1;
    int parent = lis_open_parent(p->sb, full, 1, last, err); /* O_PATH: enough for *at() */
    if (parent < 0)
        return -1;
    if (fstatat(parent, last, now, AT_SYMLINK_NOFOLLOW) < 0)
        now->st_mode = 0;
    return parent;
}

static void tmp_name(char *out, size_t len)
{
    unsigned r = 0;
    if (getrandom(&r, sizeof r, 0) < 0)
        r = (unsigned)getpid() ^ (unsigned)(uintptr_t)out;
    snprintf(out, len, ".lis-put-%08x", r);
}

int lis_put_dir(lis_put *p, const char *path, const lis_put_attr *a, lis_error *err)
{
    char rel[PATH_MAX], last[NAME_MAX + 1], full[PATH_MAX];
    struct stat now;
    int parent = open_parent(p, path, rel, last, &now, err);
    if (parent < 0)
        return -1;
    full_path(p, path, rel, full, err);
    int rc = 0;
    if (now.st_mode && !S_ISDIR(now.st_mode))
        rc = lis_fail(err, EEXIST, "cannot overwrite non-directory %s with a directory", full);
    else if (!now.st_mode && mkdirat(parent, last, 0700) < 0)
        rc = lis_fail_errno(err, "mkdir %s", full);
    else if (!now.st_mode)
        rc = remember(p, full, 1, err);
    close(parent);
    if (rc < 0)
        return -1;
    if (LIS_GROW(p->dirs, p->dirs_cap, p->ndirs + 1) < 0 ||
        !(p->dirs[p->ndirs].path = strdup(full)))
        return lis_oom(err);
    p->dirs[p->ndirs++].a = *a; /* its mode and time at the end: lis_put_finish */
    return 0;
}

int lis_put_file(lis_put *p, const char *path, lis_error *err)
{
    if (p->pend_fd >= 0)
        return lis_fail(err, EBUSY, "lis_put_file: the previous file is not done");
    struct stat now;
    int parent = open_parent(p, path, p->pend_rel, p->pend_last, &now, err);
    if (parent < 0)
        return -1;
    if (S_ISDIR(now.st_mode)) {
        close(parent);
        return lis_fail(err, EISDIR, "cannot overwrite directory %s/%s with a file", p->dir,
                        p->pend_rel);
    }
    tmp_name(p->pend_tmp, sizeof p->pend_tmp);
    int fd =
        openat(parent, p->pend_tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        close(parent);
        return lis_fail_errnum(err, e, "%s/%s", p->dir, p->pend_rel);
    }
    p->pend_fd = fd;
    p->pend_parent = parent;
    p->pend_existed = now.st_mode != 0;
    return fd;
}

static void drop_pending(lis_put *p)
{
    if (p->pend_fd >= 0) {
        close(p->pend_fd);
        unlinkat(p->pend_parent, p->pend_tmp, 0);
        close(p->pend_parent);
    }
    p->pend_fd = p->pend_parent = -1;
}

int lis_put_file_done(lis_put *p, int fd, uint64_t size, const lis_put_attr *a, lis_error *err)
{
    if (fd != p->pend_fd || fd < 0)
        return lis_fail(err, EINVAL, "lis_put_file_done: not the file being written");
    int e = ftruncate(fd, (off_t)size) < 0 ? errno : set_attrs(fd, a);
    struct stat st;
    if (!e && fstat(fd, &st) < 0)
        e = errno;
    if (!e && renameat(p->pend_parent, p->pend_tmp, p->pend_parent, p->pend_last) < 0)
        e = errno;
    if (e) {
        drop_pending(p);
        return lis_fail_errnum(err, e, "writing %s/%s", p->dir, p->pend_rel);
    }
    close(p->pend_fd);
    close(p->pend_parent);
    p->pend_fd = p->pend_parent = -1;
    char full[PATH_MAX];
    snprintf(full, sizeof full, "%s/%s", strcmp(p->dir, "/") ? p->dir : "", p->pend_rel);
    if ((!p->pend_existed && remember(p, full, 0, err) < 0) ||
        add_file(p, p->pend_rel, &st, err) < 0)
        return -1;
    return 0;
}

/* Puts what make() made under a temporary name in place of path's last component. */
static int replace_with(lis_put *p, const char *path,
                        int (*make)(int dir, const char *tmp, const void *arg), const void *arg,
                        const lis_put_attr *a, lis_error *err)
{
    char rel[PATH_MAX], last[NAME_MAX + 1], full[PATH_MAX], tmp[32];
    struct stat now;
    int parent = open_parent(p, path, rel, last, &now, err);
    if (parent < 0)
        return -1;
    full_path(p, path, rel, full, err);
    if (S_ISDIR(now.st_mode)) {
        close(parent);
        return lis_fail(err, EISDIR, "cannot overwrite directory %s with a non-directory", full);
    }
    tmp_name(tmp, sizeof tmp);
    int e = make(parent, tmp, arg) < 0 ? errno : 0;
    if (!e && a) {
        if (a->uid >= 0 && a->gid >= 0)
            fchownat(parent, tmp, (uid_t)a->uid, (gid_t)a->gid, AT_SYMLINK_NOFOLLOW);
        struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, a->mtime};
        utimensat(parent, tmp, ts, AT_SYMLINK_NOFOLLOW);
    }
    if (!e && renameat(parent, tmp, parent, last) < 0) {
        e = errno;
        unlinkat(parent, tmp, 0);
    }
    close(parent);
    if (e)
        return lis_fail_errnum(err, e, "%s", full);
    return now.st_mode ? 0 : remember(p, full, 0, err);
}

static int make_symlink(int dir, const char *tmp, const void *target)
{
    return symlinkat(target, dir, tmp);
}

int lis_put_symlink(lis_put *p, const char *path, const char *target, const lis_put_attr *a,
                    lis_error *err)
{
    return replace_with(p, path, make_symlink, target, a, err);
}

struct link_src {
    int dir;
    const char *name;
};

static int make_link(int dir, const char *tmp, const void *arg)
{
    const struct link_src *s = arg;
    return linkat(s->dir, s->name, dir, tmp, 0);
}

int lis_put_hardlink(lis_put *p, const char *path, const char *target, lis_error *err)
{
    char trel[PATH_MAX], tfull[PATH_MAX], tlast[NAME_MAX + 1];
    if (full_path(p, target, trel, tfull, err) < 0)
        return -1;
    file_rec *f = find_file(p, trel);
    if (!f)
        return lis_fail(err, EINVAL, "hard link %s to %s: not a file of this archive", path,
                        target);
    int tdir = lis_open_parent(p->sb, tfull, 0, tlast, err);
    if (tdir < 0)
        return -1;
    struct stat st;
    if (fstatat(tdir, tlast, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
        st.st_dev != f->dev || st.st_ino != f->ino) {
        close(tdir);
        return lis_fail(err, ESTALE, "hard link %s to %s: it changed since it was written", path,
                        target);
    }
    struct link_src src = {tdir, tlast};
    int rc = replace_with(p, path, make_link, &src, NULL, err);
    close(tdir);
    char rel[PATH_MAX];
    if (rc == 0 && norm(path, rel, sizeof rel) == 0)
        rc = add_file(p, rel, &st, err);
    return rc;
}

int lis_put_finish(lis_put *p, lis_error *err)
{
    drop_pending(p);
    int rc = 0;
    for (size_t i = p->ndirs; i-- > 0;) { /* deepest (latest) first */
        char last[NAME_MAX + 1];
        int parent = lis_open_parent(p->sb, p->dirs[i].path, 0, last, err);
        if (parent < 0) {
            rc = -1;
            continue;
        }
        int fd = openat(parent, last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = fd < 0 ? errno : set_attrs(fd, &p->dirs[i].a);
        if (fd >= 0)
            close(fd);
        close(parent);
        if (e)
            rc = lis_fail_errnum(err, e, "%s", p->dirs[i].path);
    }
    return rc;
}

void lis_put_abort(lis_put *p)
{
    drop_pending(p);
    for (size_t i = p->nmade; i-- > 0;) {
        char last[NAME_MAX + 1];
        lis_error ignore;
        int parent = lis_open_parent(p->sb, p->made[i].path, 0, last, &ignore);
        if (parent < 0)
            continue;
        if (p->made[i].dir)
            lis_host_rmtree_at(parent, last); /* what the sandbox put in it meanwhile too */
        else
            unlinkat(parent, last, 0);
        close(parent);
    }
}

void lis_put_free(lis_put *p)
{
    if (!p)
        return;
    drop_pending(p);
    for (size_t i = 0; i < p->nmade; i++)
        free(p->made[i].path);
    for (size_t i = 0; i < p->nfiles; i++)
        free(p->files[i].rel);
    for (size_t i = 0; i < p->ndirs; i++)
        free(p->dirs[i].path);
    free(p->made);
    free(p->files);
    free(p->slots);
    free(p->dirs);
    free(p);
}
