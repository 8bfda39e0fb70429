/* scan.c - what a step's file scan examines, and what it costs: the paths
 * the layer's events name (watch.c), directories new since the last scan,
 * and, when events were lost or there are none, every directory of the
 * layer and its tmpfs mounts (/tmp, /dev/shm). Each examined path is stat'ed
 * beneath its root (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, nothing
 * followed); the last scan's entries of those paths and what they are now
 * form the delta that layer.c compares. A scan stops at its deadline; what
 * it left (paths, directories and where in their listing) is examined first
 * by the next scan, so that every path is reached in a bounded number of
 * steps however large the layer, and the step says its scan was cut. */
#include "monitor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

int mon_open_beneath(int root, const char *path, int flags)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
    while (*path == '/')
        path++;
    return (int)syscall(SYS_openat2, root, *path ? path : ".", &how, sizeof how);
}

void mon_scan_release(mon_scan *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->e[i].path);
    free(s->e);
    memset(s, 0, sizeof *s);
}

/* The first entry of s->e[0, hi) whose path is >= key (sorted by path). */
static size_t lower_bound_in(const mon_scan *s, size_t hi, const char *key)
{
    size_t lo = 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(s->e[mid].path, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t lower_bound(const mon_scan *s, const char *key)
{
    return lower_bound_in(s, s->n, key);
}

const mon_entry *mon_find_path(const mon_scan *s, const char *path)
{
    size_t i = lower_bound(s, path);
    return i < s->n && !strcmp(s->e[i].path, path) ? &s->e[i] : NULL;
}

static int add_entry(mon_scan *s, const char *path, const struct stat *st, int opaque)
{
    if (s->n >= MON_SCAN_MAX) {
        s->cut = 1;
        return 0;
    }
    if (LIS_GROW(s->e, s->cap, s->n + 1) < 0)
        return -1;
    mon_entry *e = &s->e[s->n];
    if (!(e->path = strdup(path)))
        return -1;
    s->n++;
    e->dev = st->st_dev;
    e->ino = st->st_ino;
    e->size = (uint64_t)st->st_size;
    e->mtime = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    e->ctime = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
    e->mode = st->st_mode & 07777;
    e->nlink = (unsigned)st->st_nlink;
    e->opaque = opaque;
    e->kind = S_ISREG(st->st_mode)                       ? 'f'
              : S_ISDIR(st->st_mode)                     ? 'd'
              : S_ISLNK(st->st_mode)                     ? 'l'
              : S_ISCHR(st->st_mode) && st->st_rdev == 0 ? 'w'
                                                         : 'o';
    return 0;
}

static int is_opaque(int dfd)
{
    char v[4];
    ssize_t n = fgetxattr(dfd, "user.overlay.opaque", v, sizeof v);
    if (n < 0)
        n = fgetxattr(dfd, "trusted.overlay.opaque", v, sizeof v);
    return n == 1 && v[0] == 'y';
}

/* ---- a set of paths (open addressing) ---- */

static int pset_has(const mon_pset *p, const char *s)
{
    if (!p->cap)
        return 0;
    for (size_t h = mon_str_hash(s) & (p->cap - 1); p->slot[h]; h = (h + 1) & (p->cap - 1))
        if (!strcmp(p->slot[h], s))
            return 1;
    return 0;
}

/* 1 when added, 0 when there already, -1 out of memory */
static int pset_add(mon_pset *p, const char *s)
{
    if (pset_has(p, s))
        return 0;
    if (2 * (p->n + 1) > p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        char **slot = calloc(cap, sizeof *slot);
        if (!slot)
            return -1;
        for (size_t i = 0; i < p->cap; i++)
            if (p->slot[i]) {
                size_t h = mon_str_hash(p->slot[i]) & (cap - 1);
                while (slot[h])
                    h = (h + 1) & (cap - 1);
                slot[h] = p->slot[i];
            }
        free(p->slot);
        p->slot = slot;
        p->cap = cap;
    }
    char *c = strdup(s);
    if (!c)
        return -1;
    size_t h = mon_str_hash(s) & (p->cap - 1);
    while (p->slot[h])
        h = (h + 1) & (p->cap - 1);
    p->slot[h] = c;
    p->n++;
    return 1;
}

static void pset_free(mon_pset *p)
{
    for (size_t i = 0; i < p->cap; i++)
        free(p->slot[i]);
    free(p->slot);
    memset(p, 0, sizeof *p);
}

/* ---- the examination ---- */

typedef struct scanctx {
    mon_layer *l;
    mon_delta *d;
    mon_pset listed;
    mon_item *q; /* to examine, in order */
    size_t qh, qn, qcap;
    double deadline;
    int timed_out;
} scanctx;

const mon_root *mon_root_of(const mon_layer *l, const char *path, int self, const char **rel)
{
    const mon_root *best = &l->roots[0];
    size_t bl = 0;
    for (int i = 1; i < l->nroots; i++) {
        size_t n = strlen(l->roots[i].prefix);
        if (n > bl && !strncmp(path, l->roots[i].prefix, n) &&
            (path[n] == '/' || (self && !path[n]))) {
            best = &l->roots[i];
            bl = n;
        }
    }
    *rel = path + bl;
    return best;
}

static int push(scanctx *c, const char *path, int list, int full, long long off)
{
    if (LIS_GROW(c->q, c->qcap, c->qn + 1) < 0)
        return -1;
    char *p = strdup(path);
    if (!p)
        return -1;
    c->q[c->qn++] = (mon_item){p, off, (unsigned char)list, (unsigned char)full};
    return 0;
}

/* The last scan's entries below path (a directory gone or replaced):
 * examined too, as gone unless the scan finds them. */
static void mark_below(scanctx *c, const char *path)
{
    const mon_scan *last = &c->l->last;
    char key[4100];
    size_t n = (size_t)snprintf(key, sizeof key, "%s/", path);
    if (n >= sizeof key)
        return;
    for (size_t i = lower_bound(last, key); i < last->n && !strncmp(last->e[i].path, key, n); i++)
        c->d->oldbit[i] = 1;
}

static int depth_of(const char *path)
{
    int n = 0;
    for (; *path; path++)
        n += *path == '/';
    return n;
}

/* path as it is now (dirfd/name: its directory, open, and its name there;
 * else reached from its root): its entry in the delta, the last scan's
 * marked examined; a directory that is new (or, full, any) is listed. */
static int examine(scanctx *c, const char *path, int dirfd, const char *name, int full)
{
    int r = pset_add(&c->d->seen, path);
    if (r <= 0)
        return r;
    const mon_scan *last = &c->l->last;
    size_t oi = lower_bound(last, path);
    const mon_entry *o = oi < last->n && !strcmp(last->e[oi].path, path) ? &last->e[oi] : NULL;
    if (o)
        c->d->oldbit[oi] = 1;
    const char *rel;
    const mon_root *rt = mon_root_of(c->l, path, 0, &rel);
    struct stat st;
    int have;
    if (dirfd >= 0) {
        have = fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    } else {
        int fd = mon_open_beneath(rt->fd, rel, O_PATH); /* a symlink itself, not followed */
        have = fd >= 0 && fstat(fd, &st) == 0;
        if (fd >= 0)
            close(fd);
    }
    int isdir = have && S_ISDIR(st.st_mode);
    int same_dir = o && o->kind == 'd' && isdir && o->ino == st.st_ino && o->dev == st.st_dev;
    if (have) {
        int opaque = 0;
        int64_t ct = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
        if (isdir && rt->overlay && same_dir && o->ctime == ct) {
            opaque = o->opaque; /* setting the xattr changes the ctime */
        } else if (isdir && rt->overlay) {
            int fd = dirfd >= 0
                         ? openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                         : mon_open_beneath(rt->fd, rel, O_RDONLY | O_DIRECTORY);
            opaque = fd >= 0 && is_opaque(fd);
            if (fd >= 0)
                close(fd);
        }
        if (add_entry(&c->d->now, path, &st, opaque) < 0)
            return -1;
    }
    if (o && o->kind == 'd' && !same_dir)
        mark_below(c, path);
    if (isdir && (full || !same_dir))
        return push(c, path, 1, full, 0);
    return 0;
}

#define LIST_BUF 16384
#define LIST_CHECK 256 /* entries between two looks at the clock */

/* Lists the directory it->path: each entry examined; the last scan's
 * entries of it that are gone, examined too. Stops at the deadline, with
 * where it was kept for the next scan. */
static int list_dir(scanctx *c, const mon_item *it)
{
    if (!it->off) {
        int r = pset_add(&c->listed, it->path);
        if (r <= 0)
            return r;
    }
    if (depth_of(it->path) >= MON_SCAN_DEPTH) {
        c->d->cut = 1;
        snprintf(c->d->why, sizeof c->d->why, "directories deeper than %d not listed",
                 MON_SCAN_DEPTH);
        return 0;
    }
    const char *rel;
    const mon_root *rt = mon_root_of(c->l, it->path, 1, &rel);
    int fd = mon_open_beneath(rt->fd, rel, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return 0; /* gone (or replaced by a symlink) meanwhile: its examination says so */
    if (!it->off)
        mon_watch_add(&c->l->watch, fd, it->path); /* before the listing: no event falls between */
    else if (lseek(fd, (off_t)it->off, SEEK_SET) < 0) {
        close(fd);
        return 0;
    }
    char *buf = malloc(LIST_BUF);
    char path[4096];
    int rc = buf ? 0 : -1;
    size_t count = 0;
    ssize_t got;
    while (rc == 0 && (got = getdents64(fd, buf, LIST_BUF)) > 0) {
        for (ssize_t off = 0; off < got && rc == 0;) {
            struct dirent64 *de = (struct dirent64 *)(buf + off);
            off += de->d_reclen;
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            if ((size_t)snprintf(path, sizeof path, "%s/%s", it->path, de->d_name) >= sizeof path) {
                c->d->cut = 1;
                snprintf(c->d->why, sizeof c->d->why, "paths longer than 4 KiB not listed");
                continue;
            }
            rc = examine(c, path, fd, de->d_name, it->full);
            if (rc == 0 && ++count % LIST_CHECK == 0 && lis_now() > c->deadline) {
                /* the rest of this directory next time, from here */
                rc = push(c, it->path, 1, it->full, (long long)de->d_off);
                c->timed_out = 1;
                free(buf);
                close(fd);
                return rc;
            }
        }
    }
    free(buf);
    close(fd);
    if (rc < 0 || it->off)
        return rc; /* a listing resumed: its gone entries are those the events name */
    /* the last scan's entries directly in it that the listing did not find */
    const mon_scan *last = &c->l->last;
    size_t n = (size_t)snprintf(path, sizeof path, "%s/", it->path);
    if (n >= sizeof path)
        return 0;
    char key[4096];
    memcpy(key, path, n + 1);
    for (size_t i = lower_bound(last, key);
         rc == 0 && i < last->n && !strncmp(last->e[i].path, key, n); i++)
        if (!strchr(last->e[i].path + n, '/') && !pset_has(&c->d->seen, last->e[i].path))
            rc = examine(c, last->e[i].path, -1, NULL, 0);
    return rc;
}

/* An event's path: examined in this scan (first of all). */
static int on_event(void *arg, const char *path, int kind, int isdir)
{
    scanctx *c = arg;
    if (kind == MW_MOVED) /* a name made and renamed away: its new name is the creation */
        for (size_t i = c->d->nborn; i-- > 0;)
            if (!strcmp(c->d->born[i].path, path)) {
                free(c->d->born[i].path);
                c->d->born[i] = c->d->born[--c->d->nborn];
                break;
            }
    if (kind == MW_BORN && c->d->nborn < MON_STEP_FILES) {
        if (LIS_GROW(c->d->born, c->d->capborn, c->d->nborn + 1) < 0)
            return -1;
        char *p = strdup(path);
        if (!p)
            return -1;
        c->d->born[c->d->nborn++] = (mon_born){p, isdir ? 'd' : 'f', 0};
    }
    return push(c, path, 0, 0, 0);
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const mon_entry *)a)->path, ((const mon_entry *)b)->path);
}

int mon_scan_changes(mon_layer *l, double deadline, mon_delta *d)
{
    memset(d, 0, sizeof *d);
    scanctx c = {.l = l, .d = d, .deadline = deadline};
    d->oldbit = calloc(l->last.n + 1, 1);
    if (!d->oldbit)
        return -1;
    int rc = 0;
    mon_watch_drain(&l->watch, on_event, &c); /* before the look: later events come next time */
    int full_left = 0;
    for (size_t i = 0; i < l->npend; i++) { /* what the last scan left, then */
        full_left |= l->pend[i].full;
        if (LIS_GROW(c.q, c.qcap, c.qn + 1) < 0) {
            rc = -1;
            for (; i < l->npend; i++)
                free(l->pend[i].path);
            break;
        }
        c.q[c.qn++] = l->pend[i];
    }
    l->npend = 0;
    if (rc == 0 && (l->forgot || ((l->watch.lost || l->watch.capped) && !full_left))) {
        /* events lost or none: everything, listed from the roots */
        l->watch.lost = l->forgot = 0;
        for (int i = 0; i < l->nroots && rc == 0; i++)
            rc = push(&c, l->roots[i].prefix, 1, 1, 0);
    }
    while (rc == 0 && c.qh < c.qn) {
        if (c.timed_out || lis_now() > deadline) {
            c.timed_out = 1;
            break;
        }
        mon_item it = c.q[c.qh++];
        rc = it.list ? list_dir(&c, &it) : examine(&c, it.path, -1, NULL, it.full);
        free(it.path);
    }
    /* the rest goes first next time */
    for (; c.qh < c.qn; c.qh++) {
        if (rc == 0 && l->npend < MON_PEND_MAX &&
            LIS_GROW(l->pend, l->cappend, l->npend + 1) == 0) {
            l->pend[l->npend++] = c.q[c.qh];
        } else {
            free(c.q[c.qh].path);
            l->forgot = 1; /* forgotten: a full listing (a new one) will find it */
        }
    }
    free(c.q);
    pset_free(&c.listed);
    if (l->npend) {
        d->cut = 1;
        snprintf(d->why, sizeof d->why,
                 "the scan's time budget (%.0f ms): %zu paths or directories left for the next "
                 "scan",
                 MON_SCAN_BUDGET * 1000, l->npend);
    }
    if (d->now.cut) {
        d->cut = 1;
        snprintf(d->why, sizeof d->why, "more than %d entries in one scan", MON_SCAN_MAX);
    }
    for (size_t i = 0; i < d->nborn; i++)
        d->born[i].examined = pset_has(&d->seen, d->born[i].path);
    if (d->now.n)
        qsort(d->now.e, d->now.n, sizeof *d->now.e, by_path);
    /* the last scan's examined entries, in its (path) order: shallow copies */
    size_t nold = 0;
    for (size_t i = 0; i < l->last.n; i++)
        nold += d->oldbit[i];
    d->old.e = malloc((nold ? nold : 1) * sizeof *d->old.e);
    if (!d->old.e)
        return -1;
    for (size_t i = 0; i < l->last.n; i++)
        if (d->oldbit[i])
            d->old.e[d->old.n++] = l->last.e[i];
    return rc;
}

const mon_entry *mon_now_find(const mon_layer *l, const mon_delta *d, const char *path)
{
    const mon_entry *e = mon_find_path(&d->now, path);
    if (e)
        return e;
    size_t i = lower_bound(&l->last, path);
    if (i < l->last.n && !strcmp(l->last.e[i].path, path) && !d->oldbit[i])
        return &l->last.e[i]; /* not examined: as it was */
    return NULL;
}

/* The last scan becomes the layer as now seen, in place, at the cost of what
 * changed: an examined path still there is replaced where it is; the
 * examined paths gone are removed and the new ones inserted by moving the
 * runs between them (memmove, at memory speed: the entries after the first
 * change move, none is compared). A copy of the whole scan each step was most
 * of a step's scan at 200,000 entries. */
void mon_scan_commit(mon_layer *l, mon_delta *d)
{
    mon_scan *last = &l->last;
    /* room first: out of memory, the last scan stays as it was and the next
     * scan lists everything again */
    if (LIS_GROW(last->e, last->cap, last->n + d->now.n) < 0) {
        l->watch.lost = 1;
        return;
    }
    size_t nins = 0;
    for (size_t j = 0; j < d->now.n; j++) {
        size_t i = lower_bound(last, d->now.e[j].path);
        if (i < last->n && !strcmp(last->e[i].path, d->now.e[j].path)) {
            free(last->e[i].path); /* the same path: replaced where it is */
            last->e[i] = d->now.e[j];
            d->oldbit[i] = 0;
        } else {
            d->now.e[nins++] = d->now.e[j]; /* still in path order */
        }
    }
    d->now.n = nins;
    /* the examined paths gone: the runs after the first move down */
    unsigned char *gone = last->n ? memchr(d->oldbit, 1, last->n) : NULL;
    if (gone) {
        size_t w = (size_t)(gone - d->oldbit), r = w;
        while (r < last->n) {
            if (d->oldbit[r]) {
                free(last->e[r++].path);
                continue;
            }
            unsigned char *next = memchr(d->oldbit + r, 1, last->n - r);
            size_t end = next ? (size_t)(next - d->oldbit) : last->n;
            memmove(&last->e[w], &last->e[r], (end - r) * sizeof *last->e);
            w += end - r;
            r = end;
        }
        last->n = w;
    }
    size_t take = d->now.n;
    if (last->n + take > MON_SCAN_MAX) { /* past the bound: the last in path order are not kept */
        take = last->n < MON_SCAN_MAX ? MON_SCAN_MAX - last->n : 0;
        d->cut = 1;
        snprintf(d->why, sizeof d->why,
                 "more than %d entries in the layer: %zu not kept (found again as created)",
                 MON_SCAN_MAX, d->now.n - take);
    }
    for (size_t j = take; j < d->now.n; j++)
        free(d->now.e[j].path);
    /* the new paths, from the last: each run of the old entries after one
     * moves up by the number of new paths still to place before it */
    size_t hi = last->n;
    for (size_t j = take; j > 0; j--) {
        size_t pos = lower_bound_in(last, hi, d->now.e[j - 1].path);
        memmove(&last->e[pos + j], &last->e[pos], (hi - pos) * sizeof *last->e);
        last->e[pos + j - 1] = d->now.e[j - 1];
        hi = pos;
    }
    last->n += take;
    d->now.n = 0; /* its paths are the last scan's now */
}

void mon_delta_release(mon_delta *d)
{
    mon_scan_release(&d->now);
    free(d->old.e); /* shallow */
    free(d->oldbit);
    for (size_t i = 0; i < d->nborn; i++)
        free(d->born[i].path);
    free(d->born);
    pset_free(&d->seen);
    memset(d, 0, sizeof *d);
}
