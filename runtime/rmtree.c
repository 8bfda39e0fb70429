/* rmtree.c - rm -rf of a tree we own, with no malloc, no recursion and a
 * bounded number of fds.
 *
 * Why so careful: it runs in raw clone3 children of a possibly threaded
 * owner (lis serve, lis batch: see rmtree_mapped in userns.c), where another
 * thread may have held an allocator lock at the clone and malloc would hang
 * forever; and the tree is written by hostile code, which can nest
 * directories a million deep: recursion would overflow a thread's stack and
 * an fd a level would hit RLIMIT_NOFILE. So: getdents64 into one mmap'ed
 * buffer a level, at most RM_DEPTH levels open; a directory deeper than that
 * (or met when fds run out) is renamed (RENAME_NOREPLACE) to the top of the tree and removed from there
 * on another pass over the top. Nothing is followed: symlinks are unlinked,
 * directories opened O_NOFOLLOW. */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RM_DEPTH 32
#define RM_BUF 8192

struct rm_dirent {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

struct level {
    int fd;
    long pos, len;
    char *buf;
};

static int is_dot(const char *n) { return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])); }

/* ".lis-rm-<hex>" without snprintf (async-signal-safe, no locale) */
static void moved_name(char *out, unsigned long n)
{
    static const char hex[] = "0123456789abcdef";
    memcpy(out, ".lis-rm-", 8);
    int i = 8;
    do
        out[i++] = hex[n & 15];
    while ((n >>= 4) && i < 30);
    out[i] = 0;
}

/* Moves dir `name` of pfd to the top (tfd) under a fresh name. */
static int move_to_top(int pfd, const char *name, int tfd, unsigned long *seq)
{
    char to[32];
    for (int tries = 0; tries < 4096; tries++) {
        moved_name(to, (*seq)++);
        if (syscall(SYS_renameat2, pfd, name, tfd, to, 1 /* RENAME_NOREPLACE */) == 0)
            return 0;
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

/* One entry of level L (fd lfd): 1 = descend into it, 0 = done with it. */
static int remove_entry(struct level *lv, int d, const struct rm_dirent *e, int *rc,
                        unsigned long *seq, int *again)
{
    int lfd = lv[d].fd;
    if (e->type != DT_DIR) {
        if (unlinkat(lfd, e->name, 0) == 0 || errno == ENOENT)
            return 0;
        if (errno != EISDIR && errno != EPERM && errno != EACCES) {
            *rc = -errno;
            return 0;
        }
    }
    /* a directory (maybe mode 000, like overlay's work/work) */
    fchmodat(lfd, e->name, 0700, 0);
    if (unlinkat(lfd, e->name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return 0;
    if (errno != ENOTEMPTY && errno != EEXIST) {
        *rc = -errno;
        return 0;
    }
    int sub = d + 1 == RM_DEPTH
                  ? -1
                  : openat(lfd, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0 && d > 0 && (d + 1 == RM_DEPTH || errno == EMFILE || errno == ENFILE)) {
        /* too deep, or out of fds: on with it from the top */
        int r = move_to_top(lfd, e->name, lv[0].fd, seq);
        if (r == 0)
            *again = 1;
        else
            *rc = r;
        return 0;
    }
    if (sub < 0) {
        *rc = -errno;
        return 0;
    }
    lv[d + 1].fd = sub;
    lv[d + 1].pos = lv[d + 1].len = 0;
    return 1;
}

/* Removes the contents of dirfd (closed here). Returns 0 or -errno. */
static int rm_contents(int dirfd)
{
    char *mem = mmap(NULL, (size_t)RM_DEPTH * RM_BUF, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        int e = -errno;
        close(dirfd);
        return e;
    }
    struct level lv[RM_DEPTH];
    for (int i = 0; i < RM_DEPTH; i++)
        lv[i].buf = mem + (size_t)i * RM_BUF;
    lv[0].fd = dirfd;
    lv[0].pos = lv[0].len = 0;
    int d = 0, rc = 0, again = 0;
    unsigned long seq = 0;
    while (d >= 0) {
        struct level *L = &lv[d];
        if (L->pos < L->len) {
            struct rm_dirent *e = (struct rm_dirent *)(L->buf + L->pos);
            /* the entry stays current while we are below it: its name is
             * needed to remove it once it is empty */
            if (!is_dot(e->name) && remove_entry(lv, d, e, &rc, &seq, &again)) {
                d++;
                continue;
            }
            L->pos += e->reclen;
            continue;
        }
        long n = syscall(SYS_getdents64, L->fd, L->buf, RM_BUF);
        if (n > 0) {
            L->pos = 0;
            L->len = n;
            continue;
        }
        if (n < 0)
            rc = -errno;
        if (d == 0 && again && n == 0) {
            /* directories moved up may sit before the read position */
            again = 0;
            lseek(L->fd, 0, SEEK_SET);
            L->pos = L->len = 0;
            continue;
        }
        close(L->fd);
        if (--d < 0)
            break;
        struct level *P = &lv[d];
        struct rm_dirent *pe = (struct rm_dirent *)(P->buf + P->pos);
        if (unlinkat(P->fd, pe->name, AT_REMOVEDIR) < 0 && errno != ENOENT)
            rc = -errno;
        P->pos += pe->reclen;
    }
    munmap(mem, (size_t)RM_DEPTH * RM_BUF);
    return rc;
}

int lis_rmtree_at(int pdfd, const char *name)
{
    if (unlinkat(pdfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM && errno != EACCES)
        return -errno;
    int fd = openat(pdfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        if (errno == ENOTDIR || errno == ELOOP)
            return -errno;
        /* a directory without read/search permission for us: fix and retry */
        fchmodat(pdfd, name, 0700, 0);
        fd = openat(pdfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return -errno;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && (st.st_mode & 0700) != 0700)
        fchmod(fd, 0700);
    int rc = rm_contents(fd);
    if (unlinkat(pdfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return 0; /* gone: whatever failed on the way was retried and worked */
    return rc ? rc : -errno;
}

int lis_rmtree_here(const char *path) { return lis_rmtree_at(AT_FDCWD, path); }
