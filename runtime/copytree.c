/* copytree.c - copying an overlay layer exactly: the writable layer of a
 * sandbox into a snapshot (capture.c), and a layer's /tmp into a new
 * sandbox's scratch /tmp (mounts.c).
 *
 * It runs in children of a possibly multi-threaded owner made with a raw
 * clone3 (no atfork handlers), so it never calls malloc: directories are
 * read with getdents64 into an mmap'ed arena used as a stack, names sorted
 * there with a heapsort (the order of a digest must not depend on the
 * filesystem's). Nothing is followed: every path is relative to a
 * directory fd, opened O_NOFOLLOW. What is kept: types (whiteouts are
 * 0/0 character devices, fifos), modes, owners (keep_owner), times, hard
 * links (within the copy), xattrs (user.*, security.capability, overlay's
 * opaque/whiteout markers; origin/impure are dropped: they name inodes
 * of the old layer). */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#define ARENA_SIZE LIS_COPY_ARENA
#define MAX_DEPTH 200
#define MAX_LINKS 4096

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

struct hardlink {
    dev_t dev;
    ino_t ino;
    char path[PATH_MAX]; /* relative to the destination's top */
};

typedef struct copier {
    lis_tree_copy *c;
    char *arena;
    size_t used;
    struct hardlink *links; /* in the arena's last part */
    size_t nlinks;
    char path[PATH_MAX]; /* relative path of the entry being copied */
    int dest_root;       /* for linkat of hard links */
} copier;

static void hash(copier *k, const void *p, size_t n)
{
    if (k->c->hash)
        k->c->hash(k->c->hash_arg, p, n);
}

static int fail(copier *k, int e)
{
    if (!k->c->where[0])
        snprintf(k->c->where, sizeof k->c->where, "%s", k->path[0] ? k->path : ".");
    return -e;
}

static void *arena_take(copier *k, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (k->used + n > ARENA_SIZE - MAX_LINKS * sizeof(struct hardlink))
        return NULL;
    void *p = k->arena + k->used;
    k->used += n;
    return p;
}

static void sift(char **a, size_t start, size_t end)
{
    size_t root = start;
    while (2 * root + 1 < end) {
        size_t child = 2 * root + 1;
        if (child + 1 < end && strcmp(a[child], a[child + 1]) < 0)
            child++;
        if (strcmp(a[root], a[child]) >= 0)
            return;
        char *t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}

static void heapsort_names(char **a, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift(a, i, n);
    for (size_t end = n; end-- > 1;) {
        char *t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift(a, 0, end);
    }
}

/* The names in directory fd (without . and ..), sorted, in the arena. */
static int list_dir(copier *k, int fd, char ***names, size_t *n)
{
    size_t cap = 64, count = 0;
    char **v = arena_take(k, cap * sizeof *v);
    char buf[8192];
    if (!v)
        return -ENOMEM;
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (got < 0)
            return -errno;
        if (got == 0)
            break;
        for (long off = 0; off < got;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            off += d->d_reclen;
            const char *nm = d->d_name;
            if (nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2])))
                continue;
            if (count == cap) { /* grow: copy the pointers to a bigger block */
                char **nv = arena_take(k, 2 * cap * sizeof *nv);
                if (!nv)
                    return -ENOMEM;
                memcpy(nv, v, count * sizeof *v);
                v = nv;
                cap *= 2;
            }
            size_t len = strlen(nm) + 1;
            char *s = arena_take(k, len);
            if (!s)
                return -ENOMEM;
            memcpy(s, nm, len);
            v[count++] = s;
        }
    }
    heapsort_names(v, count);
    *names = v;
    *n = count;
    return 0;
}

static int proc_path(int dirfd, const char *name, char *out, size_t len)
{
    return snprintf(out, len, "/proc/self/fd/%d/%s", dirfd, name) >= (int)len ? -1 : 0;
}

static int xattr_wanted(const char *name)
{
    if (!strncmp(name, "user.overlay.", 13))
        return !strcmp(name + 13, "opaque") || !strcmp(name + 13, "whiteout") ||
               !strcmp(name + 13, "redirect");
    return !strncmp(name, "user.", 5) || !strcmp(name, "security.capability");
}

/* Copies the wanted xattrs of sdir/name to ddir/name (no symlinks: Linux
 * allows user.* on regular files and directories only). */
static __attribute__((noinline)) int copy_xattrs(copier *k, int sdir, int ddir, const char *name)
{
    char sp[PATH_MAX + 64], dp[PATH_MAX + 64], list[4096], val[4096];
    if (proc_path(sdir, name, sp, sizeof sp) < 0 || proc_path(ddir, name, dp, sizeof dp) < 0)
        return -ENAMETOOLONG;
    ssize_t n = llistxattr(sp, list, sizeof list);
    if (n < 0)
        return errno == ENOTSUP || errno == ENODATA ? 0 : -errno;
    for (ssize_t off = 0; off < n; off += (ssize_t)strlen(list + off) + 1) {
        const char *x = list + off;
        if (!xattr_wanted(x))
            continue;
        ssize_t v = lgetxattr(sp, x, val, sizeof val);
        if (v < 0)
            continue;
        hash(k, x, strlen(x) + 1);
        hash(k, val, (size_t)v);
        if (lsetxattr(dp, x, val, (size_t)v, 0) < 0 && !strncmp(x, "user.overlay.", 13))
            return -errno; /* without it the layer means something else */
    }
    return 0;
}

/* The data of in, extent by extent (SEEK_DATA/SEEK_HOLE: a sparse file stays
 * sparse, and a hostile 1 TB hole costs nothing), each extent hashed as its
 * offset, length and bytes; written to out unless it was cloned. Every byte
 * of data counts toward the budget. Out of line (as copy_xattrs and
 * copy_symlink): the recursion's frames stay small. */
static __attribute__((noinline)) int copy_data(copier *k, int in, int out, uint64_t size)
{
    int cloned = ioctl(out, FICLONE, in) == 0;
    if (cloned)
        k->c->reflinked++;
    if (cloned && !k->c->hash)
        return 0;
    char buf[65536];
    off_t pos = 0;
    while ((uint64_t)pos < size) {
        off_t data = lseek(in, pos, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            break; /* only a hole is left */
        if (data < 0)
            data = pos; /* no SEEK_DATA here: all of it is data */
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0 || (uint64_t)hole > size)
            hole = (off_t)size;
        uint64_t ext[2] = {(uint64_t)data, (uint64_t)(hole - data)};
        hash(k, ext, sizeof ext);
        k->c->data_bytes += ext[1];
        if (k->c->max_bytes && k->c->data_bytes > k->c->max_bytes)
            return -EFBIG;
        for (off_t at = data; at < hole;) {
            size_t want = (size_t)(hole - at) < sizeof buf ? (size_t)(hole - at) : sizeof buf;
            ssize_t r = pread(in, buf, want, at);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return -errno;
            if (r == 0)
                break; /* it shrank: the sandbox is paused, so never in practice */
            hash(k, buf, (size_t)r);
            for (ssize_t w = 0; !cloned && w < r;) {
                ssize_t m = pwrite(out, buf + w, (size_t)(r - w), at + w);
                if (m < 0 && errno == EINTR)
                    continue;
                if (m < 0)
                    return -errno;
                w += m;
            }
            at += r;
        }
        pos = hole;
    }
    if (!cloned && ftruncate(out, (off_t)size) < 0) /* a hole at the end */
        return -errno;
    return 0;
}

static struct hardlink *find_link(copier *k, const struct stat *st)
{
    for (size_t i = 0; i < k->nlinks; i++)
        if (k->links[i].dev == st->st_dev && k->links[i].ino == st->st_ino)
            return &k->links[i];
    return NULL;
}

static int copy_dir_contents(copier *k, int sfd, int dfd, int depth);

/* Owner, then xattrs (a chown drops security.capability), then the mode (a
 * chown drops setuid bits; a read-only mode would refuse the xattrs), then
 * the times, on the open destination fd of a file or directory. */
static int set_attrs(copier *k, int sdir, int ddir, const char *name, int fd, const struct stat *st)
{
    if (k->c->keep_owner && fchown(fd, st->st_uid, st->st_gid) < 0)
        return fail(k, errno);
    int rc = copy_xattrs(k, sdir, ddir, name);
    if (rc)
        return fail(k, -rc);
    if (fchmod(fd, st->st_mode & 07777) < 0)
        return fail(k, errno);
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    futimens(fd, ts);
    return 0;
}

/* A symlink sdir/name -> ddir/name. Out of line: its PATH_MAX buffer would
 * otherwise sit in each of copy_entry's MAX_DEPTH nested frames, on the
 * stack of the job thread whose clone child copies (runtime/jobs.c). */
static __attribute__((noinline)) int copy_symlink(copier *k, int sdir, int ddir, const char *name,
                                                  const struct stat *st)
{
    char target[PATH_MAX];
    ssize_t n = readlinkat(sdir, name, target, sizeof target - 1);
    if (n < 0)
        return fail(k, errno);
    target[n] = 0;
    hash(k, target, (size_t)n + 1);
    if (symlinkat(target, ddir, name) < 0)
        return fail(k, errno);
    if (k->c->keep_owner && fchownat(ddir, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0)
        return fail(k, errno);
    return 0;
}

/* One entry: sdir/name -> ddir/name. */
static int copy_entry(copier *k, int sdir, int ddir, const char *name, int depth)
{
    struct stat st;
    if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return fail(k, errno);
    struct {
        uint32_t mode, uid, gid, rdev;
        uint64_t size;
    } rec = {st.st_mode, st.st_uid, st.st_gid, (uint32_t)st.st_rdev,
             S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0};
    if (!k->c->keep_owner)
        rec.uid = rec.gid = 0;
    hash(k, k->path, strlen(k->path) + 1);
    hash(k, &rec, sizeof rec);
    k->c->files++;
    int rc = 0;
    if (S_ISDIR(st.st_mode)) {
        if (depth >= MAX_DEPTH)
            return fail(k, ELOOP);
        if (mkdirat(ddir, name, 0700) < 0 && errno != EEXIST)
            return fail(k, errno);
        int s = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int d = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s < 0 || d < 0) {
            rc = fail(k, errno);
        } else {
            rc = copy_dir_contents(k, s, d, depth + 1);
            if (!rc)
                rc = set_attrs(k, sdir, ddir, name, d, &st);
        }
        if (s >= 0)
            close(s);
        if (d >= 0)
            close(d);
    } else if (S_ISREG(st.st_mode)) {
        struct hardlink *h = st.st_nlink > 1 ? find_link(k, &st) : NULL;
        if (h) {
            hash(k, h->path, strlen(h->path) + 1);
            return linkat(k->dest_root, h->path, ddir, name, 0) < 0 ? fail(k, errno) : 0;
        }
        int in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (in < 0)
            return fail(k, errno);
        int out = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0) {
            rc = fail(k, errno);
            close(in);
            return rc;
        }
        rc = copy_data(k, in, out, (uint64_t)st.st_size);
        if (rc)
            rc = fail(k, -rc);
        k->c->bytes += (uint64_t)st.st_size;
        if (!rc)
            rc = set_attrs(k, sdir, ddir, name, out, &st);
        close(in);
        close(out);
        if (!rc && st.st_nlink > 1 && k->nlinks < MAX_LINKS) {
            struct hardlink *nh = &k->links[k->nlinks++];
            nh->dev = st.st_dev;
            nh->ino = st.st_ino;
            snprintf(nh->path, sizeof nh->path, "%s", k->path);
        }
    } else if (S_ISLNK(st.st_mode)) {
        if ((rc = copy_symlink(k, sdir, ddir, name, &st)))
            return rc;
    } else if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
        /* whiteouts (0/0) and fifos; a sandbox cannot make real devices */
        if (S_ISCHR(st.st_mode) && st.st_rdev != makedev(0, 0))
            return 0;
        if (mknodat(ddir, name, st.st_mode & (S_IFMT | 07777), st.st_rdev) < 0)
            return fail(k, errno);
        if (k->c->keep_owner && fchownat(ddir, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
            return fail(k, errno);
    } else {
        return 0; /* sockets and block devices mean nothing in a layer */
    }
    if (!rc && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        struct timespec ts[2] = {st.st_atim, st.st_mtim};
        utimensat(ddir, name, ts, AT_SYMLINK_NOFOLLOW);
    }
    return rc < 0 ? fail(k, -rc) : 0;
}

static int copy_dir_contents(copier *k, int sfd, int dfd, int depth)
{
    size_t mark = k->used;
    char **names;
    size_t n;
    int rc = list_dir(k, sfd, &names, &n);
    if (rc)
        return fail(k, -rc);
    size_t plen = strlen(k->path);
    for (size_t i = 0; i < n && !rc; i++) {
        int w = snprintf(k->path + plen, sizeof k->path - plen, "%s%s", plen ? "/" : "", names[i]);
        if (w < 0 || (size_t)w >= sizeof k->path - plen)
            rc = fail(k, ENAMETOOLONG);
        else
            rc = copy_entry(k, sfd, dfd, names[i], depth);
        if (!rc)
            k->path[plen] = 0;
    }
    k->used = mark;
    return rc;
}

int lis_copy_tree(int sfd, int dfd, lis_tree_copy *c)
{
    copier k = {.c = c};
    c->where[0] = 0;
    /* A CLONE_VM child copies into its creator's mapping (vmclone.c): one
     * it mapped itself would stay in the owner were it killed mid-copy. */
    k.arena = c->arena ? c->arena
                       : mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (k.arena == MAP_FAILED ||
        (c->arena && mprotect(c->arena, ARENA_SIZE, PROT_READ | PROT_WRITE) < 0))
        return -errno;
    k.links = (struct hardlink *)(k.arena + ARENA_SIZE - MAX_LINKS * sizeof(struct hardlink));
    k.dest_root = dfd;
    int rc = copy_dir_contents(&k, sfd, dfd, 0);
    if (!c->arena)
        munmap(k.arena, ARENA_SIZE);
    return rc;
}
