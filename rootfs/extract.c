/* extract.c - the safe, unprivileged extractor every import goes through.
 *
 * Every entry is resolved component by component from the root directory with
 * O_NOFOLLOW, so no entry can reach outside the tree: absolute names and ".."
 * are refused, a symlink in a parent position is refused, hard links may only
 * point at files already inside the tree, and nothing is ever written through a
 * symlink (files are created with O_EXCL|O_NOFOLLOW). Ownership collapses to
 * the caller, device nodes are skipped (the runtime provides /dev), modes,
 * symlinks, hard links, FIFOs and times are kept. Directory modes and times are
 * applied at the end, deepest first, so read-only directories can be filled. */
#include "rf.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

/* ---- a small string -> int hash map ---------------------------------------- */

typedef struct smap {
    char **keys;
    int *vals;
    size_t cap, n;
} smap;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int *smap_get(smap *m, const char *k)
{
    if (!m->cap)
        return NULL;
    for (size_t i = hash_str(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i])
            return NULL;
        if (!strcmp(m->keys[i], k))
            return &m->vals[i];
    }
}

static int smap_put(smap *m, const char *k, int v)
{
    int *p = smap_get(m, k);
    if (p) {
        *p = v;
        return 0;
    }
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 1024;
        char **nk = calloc(ncap, sizeof *nk);
        int *nv = calloc(ncap, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i])
                continue;
            size_t j = hash_str(m->keys[i]) & (ncap - 1);
            while (nk[j])
                j = (j + 1) & (ncap - 1);
            nk[j] = m->keys[i];
            nv[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = ncap;
    }
    size_t i = hash_str(k) & (m->cap - 1);
    while (m->keys[i])
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = strdup(k);
    if (!m->keys[i])
        return -1;
    m->vals[i] = v;
    m->n++;
    return 0;
}

static void smap_clear(smap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- the extractor ------------------------------------------------------------ */

typedef struct dmeta {
    char *path;
    mode_t mode;
    struct timespec mtime;
} dmeta;

struct rf_extract {
    char root[PATH_MAX];
    int root_fd; /* O_PATH directory */
    mode_t umask;
    /* the last parent directory resolved, kept open */
    char cpath[PATH_MAX];
    int cfd;
    /* deferred directory metadata */
    dmeta *dirs;
    size_t ndirs, capdirs;
    smap dirmap;
    int have_root_meta;
    /* paths created by the current layer (for opaque whiteouts) */
    smap layer;
    int track;
    uint64_t files, bytes, skipped;
    char *buf;
    int keep_owner; /* chown entries to the archive's ids (in a mapped namespace) */
};

static mode_t read_umask(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    unsigned m = 022;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Umask: %o", &m) == 1)
            break;
    if (f)
        fclose(f);
    return (mode_t)m;
}

rf_extract *rf_extract_new(const char *root, lis_error *err)
{
    rf_extract *x = calloc(1, sizeof *x);
    if (!x) {
        lis_oom(err);
        return NULL;
    }
    snprintf(x->root, sizeof x->root, "%s", root);
    x->root_fd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (x->root_fd < 0) {
        lis_fail_errno(err, "cannot open %s", root);
        free(x);
        return NULL;
    }
    x->cfd = -1;
    x->umask = read_umask();
    return x;
}

void rf_extract_stats(const rf_extract *x, uint64_t *files, uint64_t *bytes, uint64_t *skipped)
{
    if (files)
        *files = x->files;
    if (bytes)
        *bytes = x->bytes;
    if (skipped)
        *skipped = x->skipped;
}

void rf_extract_free(rf_extract *x)
{
    if (!x)
        return;
    if (x->cfd >= 0)
        close(x->cfd);
    close(x->root_fd);
    for (size_t i = 0; i < x->ndirs; i++)
        free(x->dirs[i].path);
    free(x->dirs);
    smap_clear(&x->dirmap);
    smap_clear(&x->layer);
    free(x->buf);
    free(x);
}

static void uncache(rf_extract *x)
{
    if (x->cfd >= 0)
        close(x->cfd);
    x->cfd = -1;
    x->cpath[0] = 0;
}

/* Normalizes an entry name: strips "./" and duplicate slashes; refuses
 * absolute names and "..". "" is the root itself. */
static int normalize(const char *in, char *out, size_t len, const char **why)
{
    if (!in) {
        *why = "has no name";
        return -1;
    }
    if (in[0] == '/') {
        *why = "is an absolute path";
        return -1;
    }
    size_t o = 0;
    const char *p = in;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        size_t n = (size_t)(p - s);
        if (n == 1 && s[0] == '.')
            continue;
        if (n == 2 && s[0] == '.' && s[1] == '.') {
            *why = "contains '..'";
            return -1;
        }
        if (o + n + 2 > len) {
            *why = "is too long";
            return -1;
        }
        if (o)
            out[o++] = '/';
        memcpy(out + o, s, n);
        o += n;
    }
    out[o] = 0;
    return 0;
}

static int track(rf_extract *x, const char *path)
{
    return x->track ? smap_put(&x->layer, path, 1) : 0;
}

/* Opens (creating when asked) the directory dir (normalized, "" = root),
 * refusing symlinks anywhere. Returns a descriptor owned by the cache. */
static int open_dir(rf_extract *x, const char *dir, int create, const char *entry, lis_error *err)
{
    if (!*dir)
        return x->root_fd;
    if (x->cfd >= 0 && !strcmp(dir, x->cpath))
        return x->cfd;
    int fd = x->root_fd;
    const char *p = dir;
    size_t cl = strlen(x->cpath);
    if (x->cfd >= 0 && cl && !strncmp(dir, x->cpath, cl) && dir[cl] == '/') {
        fd = x->cfd;
        p = dir + cl + 1;
    }
    char comp[NAME_MAX + 1];
    while (*p) {
        const char *s = p;
        while (*p && *p != '/')
            p++;
        size_t n = (size_t)(p - s);
        if (n > NAME_MAX) {
            if (fd != x->root_fd && fd != x->cfd)
                close(fd);
            return lis_fail(err, ENAMETOOLONG, "entry '%s': a name is too long", entry);
        }
        memcpy(comp, s, n);
        comp[n] = 0;
        if (*p == '/')
            p++;
        int nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT && create) {
            if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST) {
                int e = errno;
                if (fd != x->root_fd && fd != x->cfd)
                    close(fd);
                return lis_fail_errnum(err, e, "cannot create directory for '%s'", entry);
            }
            char sub[PATH_MAX];
            snprintf(sub, sizeof sub, "%.*s", (int)(s - dir + (ptrdiff_t)n), dir);
            track(x, sub);
            nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (nfd < 0) {
            int e = errno;
            struct stat st;
            int islink = fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
            if (fd != x->root_fd && fd != x->cfd)
                close(fd);
            if (islink)
                return lis_fail(err, ELOOP,
                                "entry '%s' goes through the symlink '%.*s'; "
                                "refusing to write through symlinks (unsafe archive)",
                                entry, (int)(s - dir + (ptrdiff_t)n), dir);
            if (e == ENOENT)
                return lis_fail(err, ENOENT, "entry '%s': '%.*s' does not exist in the tree", entry,
                                (int)(s - dir + (ptrdiff_t)n), dir);
            return lis_fail_errnum(err, e, "entry '%s': cannot open '%.*s'", entry,
                                   (int)(s - dir + (ptrdiff_t)n), dir);
        }
        if (fd != x->root_fd && fd != x->cfd)
            close(fd);
        fd = nfd;
    }
    if (x->cfd >= 0 && x->cfd != fd)
        close(x->cfd);
    x->cfd = fd;
    snprintf(x->cpath, sizeof x->cpath, "%s", dir);
    return fd;
}

/* Splits "a/b/c" into dir "a/b" and leaf "c" (in place copy). */
static const char *split(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        dir[0] = 0;
        return path;
    }
    snprintf(dir, len, "%.*s", (int)(slash - path), path);
    return slash + 1;
}

static int remove_existing(rf_extract *x, int pfd, const char *leaf)
{
    /* pfd may be the cached parent that uncache() closes: keep a copy */
    int fd = dup(pfd);
    uncache(x);
    int rc = fd < 0 ? -1 : rf_rm_tree_at(fd, leaf);
    int e = errno;
    if (fd >= 0)
        close(fd);
    errno = e;
    if (rc < 0 && errno != ENOENT)
        return -1;
    return 0;
}

void rf_extract_keep_owner(rf_extract *x, int on) { x->keep_owner = on; }

/* The archive's owner, where the namespace maps it (ids 0-65535). Before any
 * chmod: chown clears set-id bits. */
static void own(const rf_extract *x, int dfd, const char *leaf, struct archive_entry *e, int fd)
{
    if (!x->keep_owner)
        return;
    la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
    if (uid < 0 || uid > 65535 || gid < 0 || gid > 65535)
        return;
    if (fd >= 0)
        (void)!fchown(fd, (uid_t)uid, (gid_t)gid);
    else
        (void)!fchownat(dfd, leaf, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW);
}

/* Extended attributes where the kernel lets us set them: user.* always;
 * security.capability and trusted.* only as root of the mapped namespace.
 * The rest is silently left out, as tar does without privileges. */
static void set_xattrs(int fd, struct archive_entry *e)
{
    const char *name;
    const void *value;
    size_t size;
    if (archive_entry_xattr_reset(e) == 0)
        return;
    while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK)
        if (name && strncmp(name, "system.", 7) != 0)
            (void)!fsetxattr(fd, name, value, size, 0);
}

static void set_times(int dfd, const char *leaf, struct archive_entry *e, int nofollow, int fd)
{
    struct timespec ts[2];
    ts[1].tv_sec = archive_entry_mtime(e);
    ts[1].tv_nsec = archive_entry_mtime_nsec(e);
    if (archive_entry_atime_is_set(e)) {
        ts[0].tv_sec = archive_entry_atime(e);
        ts[0].tv_nsec = archive_entry_atime_nsec(e);
    } else {
        ts[0] = ts[1];
    }
    if (fd >= 0)
        futimens(fd, ts);
    else
        utimensat(dfd, leaf, ts, nofollow ? AT_SYMLINK_NOFOLLOW : 0);
}

static int record_dir(rf_extract *x, const char *path, struct archive_entry *e)
{
    int *idx = smap_get(&x->dirmap, path);
    dmeta *d;
    if (idx) {
        d = &x->dirs[*idx];
    } else {
        if (LIS_GROW(x->dirs, x->capdirs, x->ndirs + 1) < 0)
            return -1;
        d = &x->dirs[x->ndirs];
        d->path = strdup(path);
        if (!d->path || smap_put(&x->dirmap, path, (int)x->ndirs) < 0)
            return -1;
        x->ndirs++;
    }
    d->mode = archive_entry_perm(e) & 07777;
    d->mtime.tv_sec = archive_entry_mtime(e);
    d->mtime.tv_nsec = archive_entry_mtime_nsec(e);
    return 0;
}

static int write_data(rf_extract *x, struct archive *a, int fd, const char *entry, int64_t size,
                      lis_error *err)
{
    const void *buf;
    size_t len;
    la_int64_t off;
    int64_t pos = 0;
    for (;;) {
        int r = archive_read_data_block(a, &buf, &len, &off);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN)
            return lis_fail(err, EIO, "entry '%s': %s (the archive is truncated or corrupt)", entry,
                            archive_error_string(a));
        if (off != pos && lseek(fd, off, SEEK_SET) < 0)
            return lis_fail_errno(err, "entry '%s': seek", entry);
        pos = off;
        const char *p = buf;
        while (len) {
            ssize_t w = write(fd, p, len);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                return lis_fail_errno(err, "cannot write '%s'", entry);
            }
            p += w;
            len -= (size_t)w;
            pos += w;
        }
    }
    if (size > pos && ftruncate(fd, size) < 0)
        return lis_fail_errno(err, "cannot write '%s'", entry);
    x->bytes += (uint64_t)(size > pos ? size : pos);
    return 0;
}

/* The directory path of the tree, open in *fd (-1: not there, nothing
 * below). Out of line, as is_dir_at: opaque_clean recurses once a level of
 * path (up to PATH_MAX / 2 levels), so its own frame holds no buffer. */
static __attribute__((noinline)) int open_opaque(rf_extract *x, const char *path, int *fd,
                                                 lis_error *err)
{
    char dir[PATH_MAX];
    const char *leaf = split(path, dir, sizeof dir);
    int pfd = *path ? open_dir(x, dir, 0, path, err) : x->root_fd;
    if (pfd < 0)
        return -1;
    *fd = *path ? openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                : openat(x->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return 0;
}

static __attribute__((noinline)) int is_dir_at(int dfd, const char *name)
{
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Removes everything under the directory path that the current layer did not create. */
static int opaque_clean(rf_extract *x, const char *path, lis_error *err)
{
    int fd;
    if (open_opaque(x, path, &fd, err) < 0)
        return -1;
    if (fd < 0)
        return 0; /* nothing below */
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return lis_fail_errno(err, "opaque directory '%s'", path);
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (LIS_GROW(names, cap, n + 1) < 0)
            break;
        names[n++] = strdup(de->d_name);
    }
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (!names[i])
            continue;
        char *full = NULL; /* on the heap: a level's frame stays small */
        if (asprintf(&full, "%s%s%s", path, *path ? "/" : "", names[i]) < 0) {
            full = NULL;
            if (rc == 0)
                rc = lis_oom(err);
        } else if (smap_get(&x->layer, full)) {
            if (rc == 0 && is_dir_at(dirfd(d), names[i]))
                rc = opaque_clean(x, full, err);
        } else {
            uncache(x);
            rf_rm_tree_at(dirfd(d), names[i]);
        }
        free(full);
        free(names[i]);
    }
    free(names);
    closedir(d);
    return rc;
}

/* One entry of a layer: its name as the archive has it, normalised, split. */
typedef struct ent {
    struct archive_entry *e;
    const char *raw, *path, *dir, *leaf;
} ent;

/* A whiteout .wh.NAME removes NAME of the layers below; .wh..wh..opq all
 * that the current layer did not create. */
static int apply_whiteout(rf_extract *x, const ent *t, lis_error *err)
{
    int pfd = open_dir(x, t->dir, 0, t->path, err);
    if (pfd < 0)
        return err->code == ENOENT ? 0 : -1;
    if (!strcmp(t->leaf, ".wh..wh..opq"))
        return opaque_clean(x, t->dir, err);
    if (!strncmp(t->leaf, ".wh..wh.", 8))
        return 0; /* aufs metadata */
    const char *victim = t->leaf + 4;
    if (!*victim || !strcmp(victim, ".") || !strcmp(victim, ".."))
        return lis_fail(err, EPERM, "entry '%s' is an invalid whiteout (unsafe archive)", t->raw);
    uncache(x);
    pfd = open_dir(x, t->dir, 0, t->path, err);
    if (pfd < 0)
        return -1;
    rf_rm_tree_at(pfd, victim);
    uncache(x);
    return 0;
}

/* A hard link to hl, a file extracted before (never a directory, never
 * outside the tree). */
static int make_hardlink(rf_extract *x, const ent *t, const char *hl, lis_error *err)
{
    char tpath[PATH_MAX], tdir[PATH_MAX];
    const char *why = NULL;
    if (normalize(hl, tpath, sizeof tpath, &why) < 0 || !*tpath)
        return lis_fail(err, EPERM,
                        "hard link '%s' -> '%s': the target %s; refusing it "
                        "(unsafe archive)",
                        t->raw, hl, why ? why : "is the root");
    const char *tleaf = split(tpath, tdir, sizeof tdir);
    int tfd = open_dir(x, tdir, 0, t->path, err);
    if (tfd < 0)
        return -1;
    tfd = fcntl(tfd, F_DUPFD_CLOEXEC, 0);
    struct stat st;
    if (tfd < 0 || fstatat(tfd, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode)) {
        if (tfd >= 0)
            close(tfd);
        return lis_fail(err, EPERM,
                        "hard link '%s' -> '%s': the target is not a file "
                        "in the archive; refusing it (unsafe archive)",
                        t->raw, hl);
    }
    int pfd = open_dir(x, t->dir, 1, t->path, err);
    if (pfd < 0) {
        close(tfd);
        return -1;
    }
    int lr = linkat(tfd, tleaf, pfd, t->leaf, 0);
    if (lr < 0 && errno == EEXIST) {
        struct stat ls;
        if (fstatat(pfd, t->leaf, &ls, AT_SYMLINK_NOFOLLOW) == 0 && ls.st_ino == st.st_ino &&
            ls.st_dev == st.st_dev) {
            close(tfd);
            return 0;
        }
        remove_existing(x, pfd, t->leaf);
        pfd = open_dir(x, t->dir, 1, t->path, err);
        if (pfd < 0) {
            close(tfd);
            return -1;
        }
        lr = linkat(tfd, tleaf, pfd, t->leaf, 0);
    }
    int e2 = errno;
    close(tfd);
    if (lr < 0)
        return lis_fail_errnum(err, e2, "hard link '%s' -> '%s'", t->raw, hl);
    return 0;
}

static int make_dir(rf_extract *x, int pfd, const ent *t, lis_error *err)
{
    if (mkdirat(pfd, t->leaf, 0700) < 0) {
        if (errno != EEXIST)
            return lis_fail_errno(err, "cannot create directory '%s'", t->path);
        struct stat st;
        if (fstatat(pfd, t->leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
            uncache(x);
            if (unlinkat(pfd, t->leaf, 0) < 0 || mkdirat(pfd, t->leaf, 0700) < 0)
                return lis_fail_errno(err, "cannot replace '%s' by a directory", t->path);
        } else if (!(st.st_mode & S_IWUSR) || !(st.st_mode & S_IXUSR)) {
            fchmodat(pfd, t->leaf, 0700, 0);
        }
    }
    own(x, pfd, t->leaf, t->e, -1);
    if (archive_entry_xattr_count(t->e) > 0) {
        int dfd = openat(pfd, t->leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd >= 0) {
            set_xattrs(dfd, t->e);
            close(dfd);
        }
    }
    if (record_dir(x, t->path, t->e) < 0)
        return lis_oom(err);
    return 0;
}

static int make_file(rf_extract *x, struct archive *a, int pfd, const ent *t, int whiteouts,
                     lis_error *err)
{
    mode_t mode = archive_entry_perm(t->e) & 07777;
    int fd =
        openat(pfd, t->leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0777);
    if (fd < 0 && errno == EEXIST) {
        struct stat st;
        if (!whiteouts && fstatat(pfd, t->leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode))
            return lis_fail(err, ELOOP,
                            "entry '%s' would write through the symlink of "
                            "the same name; refusing it (unsafe archive)",
                            t->raw);
        if (remove_existing(x, pfd, t->leaf) < 0)
            return lis_fail_errno(err, "cannot replace '%s'", t->path);
        pfd = open_dir(x, t->dir, 1, t->path, err);
        if (pfd < 0)
            return -1;
        fd =
            openat(pfd, t->leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0777);
    }
    if (fd < 0)
        return lis_fail_errno(err, "cannot create '%s'", t->path);
    int rc = write_data(x, a, fd, t->path, archive_entry_size(t->e), err);
    if (rc == 0)
        own(x, pfd, t->leaf, t->e, fd);
    if (rc == 0 && ((mode & 07000) || (mode & x->umask)))
        fchmod(fd, mode);
    if (rc == 0)
        set_xattrs(fd, t->e); /* after chown, which drops security.capability */
    if (rc == 0)
        set_times(pfd, t->leaf, t->e, 0, fd);
    close(fd);
    return rc;
}

static int make_symlink(rf_extract *x, int pfd, const ent *t, lis_error *err)
{
    const char *target = archive_entry_symlink(t->e);
    if (!target)
        target = "";
    if (symlinkat(target, pfd, t->leaf) < 0) {
        if (errno != EEXIST)
            return lis_fail_errno(err, "cannot create symlink '%s'", t->path);
        if (remove_existing(x, pfd, t->leaf) < 0)
            return lis_fail_errno(err, "cannot replace '%s'", t->path);
        pfd = open_dir(x, t->dir, 1, t->path, err);
        if (pfd < 0)
            return -1;
        if (symlinkat(target, pfd, t->leaf) < 0)
            return lis_fail_errno(err, "cannot create symlink '%s'", t->path);
    }
    own(x, pfd, t->leaf, t->e, -1);
    set_times(pfd, t->leaf, t->e, 1, -1);
    return 0;
}

static int make_fifo(rf_extract *x, int pfd, const ent *t, lis_error *err)
{
    mode_t perm = archive_entry_perm(t->e) & 0777;
    if (mkfifoat(pfd, t->leaf, perm) < 0) {
        if (errno != EEXIST || remove_existing(x, pfd, t->leaf) < 0 ||
            (pfd = open_dir(x, t->dir, 1, t->path, err)) < 0 || mkfifoat(pfd, t->leaf, perm) < 0)
            return lis_fail_errno(err, "cannot create fifo '%s'", t->path);
    }
    own(x, pfd, t->leaf, t->e, -1);
    set_times(pfd, t->leaf, t->e, 1, -1);
    return 0;
}

/* One entry: its name checked and split, then one function a kind. */
static int extract_entry(rf_extract *x, struct archive *a, struct archive_entry *e, int whiteouts,
                         lis_error *err)
{
    char path[PATH_MAX], dir[PATH_MAX];
    const char *raw = archive_entry_pathname(e);
    const char *why = NULL;
    if (normalize(raw, path, sizeof path, &why) < 0)
        return lis_fail(err, EPERM, "entry '%s' %s; refusing it (unsafe archive)", raw ? raw : "?",
                        why);
    mode_t type = archive_entry_filetype(e);
    const char *hl = archive_entry_hardlink(e);
    if (!*path) {
        if (type == AE_IFDIR) {
            x->have_root_meta = 1;
            return record_dir(x, "", e);
        }
        return lis_fail(err, EPERM,
                        "entry '%s' would replace the root directory; refusing "
                        "it (unsafe archive)",
                        raw);
    }
    ent t = {.e = e, .raw = raw, .path = path, .dir = dir};
    t.leaf = split(path, dir, sizeof dir);
    if (whiteouts && !strncmp(t.leaf, ".wh.", 4))
        return apply_whiteout(x, &t, err);
    if (!hl && (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK)) {
        x->skipped++;
        return 0;
    }
    int pfd = open_dir(x, dir, 1, path, err);
    if (pfd < 0)
        return -1;
    if (track(x, path) < 0)
        return lis_oom(err);
    x->files++;
    if (hl)
        return make_hardlink(x, &t, hl, err);
    switch (type) {
    case AE_IFDIR: return make_dir(x, pfd, &t, err);
    case AE_IFREG: return make_file(x, a, pfd, &t, whiteouts, err);
    case AE_IFLNK: return make_symlink(x, pfd, &t, err);
    case AE_IFIFO: return make_fifo(x, pfd, &t, err);
    default:
        x->files--;
        x->skipped++;
        return 0;
    }
}

int rf_extract_layer(rf_extract *x, struct archive *a, int whiteouts, const char *what,
                     lis_error *err)
{
    smap_clear(&x->layer);
    x->track = whiteouts;
    struct archive_entry *e;
    uint64_t n = 0;
    for (;;) {
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN) {
            const char *m = archive_error_string(a);
            return lis_fail(err, EIO, "%s: %s (not a valid or complete tar archive)", what,
                            m ? m : "read error");
        }
        if (extract_entry(x, a, e, whiteouts, err) < 0) {
            char tmp[sizeof err->msg];
            snprintf(tmp, sizeof tmp, "%s", err->msg);
            snprintf(err->msg, sizeof err->msg, "%s: %s", what, tmp);
            return -1;
        }
        n++;
    }
    if (n == 0 && !whiteouts)
        return lis_fail(err, EINVAL, "%s: the archive has no entries", what);
    return 0;
}

static int depth(const char *p)
{
    if (!*p)
        return 0;
    int d = 1;
    for (; *p; p++)
        d += *p == '/';
    return d;
}

static int by_depth_desc(const void *a, const void *b)
{
    const dmeta *x = a, *y = b;
    return depth(y->path) - depth(x->path);
}

int rf_extract_finish(rf_extract *x, lis_error *err)
{
    if (x->ndirs) /* dirs is NULL when there are none, which qsort may not get */
        qsort(x->dirs, x->ndirs, sizeof *x->dirs, by_depth_desc);
    smap_clear(&x->dirmap); /* indices are stale now */
    uncache(x);
    for (size_t i = 0; i < x->ndirs; i++) {
        dmeta *d = &x->dirs[i];
        char dir[PATH_MAX];
        int fd;
        if (!*d->path) {
            fd = openat(x->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        } else {
            const char *leaf = split(d->path, dir, sizeof dir);
            lis_error ig = {0};
            int pfd = open_dir(x, dir, 0, d->path, &ig);
            if (pfd < 0)
                continue; /* removed by a later layer */
            fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (fd < 0)
            continue;
        fchmod(fd, d->mode);
        struct timespec ts[2] = {d->mtime, d->mtime};
        futimens(fd, ts);
        close(fd);
    }
    if (!x->have_root_meta) {
        int fd = openat(x->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            fchmod(fd, 0755);
            close(fd);
        }
    }
    uncache(x);
    (void)err;
    return 0;
}
