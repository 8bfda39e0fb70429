/* layer.c - what changed in a sandbox's writable layer (the overlay's upper
 * directory: only what the episode changed is there) and its tmpfs mounts
 * (/tmp, /dev/shm): the paths a scan examined (scan.c) compared with the
 * last scan by path and inode: whiteouts are deletions, an inode seen
 * under a new path is a rename or a hard link, a path that the image (lower
 * layers) has is a modification, else a creation. Small text files get a
 * unified diff against the text kept from their last change (or the
 * image's). A name created and removed between two scans is listed as
 * created, "removed" (its events say so). Every open is beneath the layer's
 * root without following any symlink (openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS). */
#include "monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *mon_fchange_name(mon_fchange c)
{
    switch (c) {
    case MF_CREATED: return "created";
    case MF_MODIFIED: return "modified";
    case MF_DELETED: return "deleted";
    case MF_RENAMED: return "renamed";
    case MF_LINKED: return "linked";
    }
    return "?";
}

int mon_layer_open(mon_layer *l, lis_sandbox *sb, lis_error *err)
{
    memset(l, 0, sizeof *l);
    for (int i = 0; i < LIS_MAX_LAYERS; i++)
        l->lower_fd[i] = -1;
    l->watch.fd = -1;
    l->opened = 1;
    l->upper_fd = lis_sandbox_upper_fd(sb, err);
    if (l->upper_fd < 0)
        return -1;
    l->roots[l->nroots++] = (mon_root){l->upper_fd, "", 1};
    /* /tmp and /dev/shm: tmpfs mounts of their own, outside the overlay */
    static const char *const scratch[][2] = {{"tmp", "/tmp"}, {"shm", "/dev/shm"}};
    for (int i = 0; i < 2; i++) {
        lis_error ignore;
        int fd = lis_sandbox_scratch_dir_fd(sb, scratch[i][0], &ignore);
        if (fd >= 0)
            l->roots[l->nroots++] = (mon_root){fd, scratch[i][1], 0};
    }
    mon_watch_open(&l->watch);
    const char *chain = lis_sandbox_rootfs(sb);
    while (chain && *chain && l->nlower < LIS_MAX_LAYERS) {
        const char *colon = strchr(chain, ':');
        size_t n = colon ? (size_t)(colon - chain) : strlen(chain);
        char dir[4096];
        if (n < sizeof dir) {
            memcpy(dir, chain, n);
            dir[n] = 0;
            int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (fd >= 0)
                l->lower_fd[l->nlower++] = fd;
        }
        chain = colon ? colon + 1 : NULL;
    }
    return 0;
}

void mon_layer_release(mon_layer *l)
{
    if (!l->opened) {
        l->upper_fd = -1;
        return;
    }
    if (l->upper_fd >= 0)
        close(l->upper_fd);
    for (int i = 1; i < l->nroots; i++)
        close(l->roots[i].fd);
    for (int i = 0; i < l->nlower; i++)
        close(l->lower_fd[i]);
    mon_watch_release(&l->watch);
    for (size_t i = 0; i < l->npend; i++)
        free(l->pend[i].path);
    free(l->pend);
    mon_scan_release(&l->last);
    mon_texts_release(&l->cache);
    memset(l, 0, sizeof *l);
    l->upper_fd = -1;
}

void mon_file_release(mon_file *f)
{
    free(f->path);
    free(f->from);
    free(f->diff);
}

/* inode -> entry, open addressing */
typedef struct ino_map {
    const mon_entry **slot;
    size_t cap;
} ino_map;

static int map_build(ino_map *m, const mon_scan *s)
{
    m->cap = 16;
    while (m->cap < 2 * s->n + 16)
        m->cap *= 2;
    if (!(m->slot = calloc(m->cap, sizeof *m->slot)))
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        const mon_entry *e = &s->e[i];
        if (e->kind == 'w')
            continue;
        size_t h = (size_t)((e->ino * 0x9E3779B97F4A7C15ull) ^ e->dev) & (m->cap - 1);
        while (m->slot[h])
            h = (h + 1) & (m->cap - 1);
        m->slot[h] = e;
    }
    return 0;
}

/* The entries of one inode: calls fn for each until it returns non-zero. */
static const mon_entry *map_find(const ino_map *m, const mon_entry *like,
                                 int (*fn)(const mon_entry *, const void *), const void *arg)
{
    size_t h = (size_t)((like->ino * 0x9E3779B97F4A7C15ull) ^ like->dev) & (m->cap - 1);
    for (; m->slot[h]; h = (h + 1) & (m->cap - 1)) {
        const mon_entry *e = m->slot[h];
        if (e->ino == like->ino && e->dev == like->dev && e != like && fn(e, arg))
            return e;
    }
    return NULL;
}

/* The kind of path in the image ('f', 'd', 'l', 'o'), 0 when absent. A
 * path below a directory the image lacks is absent without a lookup (absent:
 * the last such directory seen, the caller's; the scan is sorted by path). */
static char lower_kind(const mon_layer *l, const char *path, char *absent)
{
    size_t an = absent ? strlen(absent) : 0;
    if (an && !strncmp(path, absent, an) && path[an] == '/')
        return 0;
    const char *rel;
    if (!mon_root_of(l, path, 0, &rel)->overlay)
        return 0; /* a tmpfs mount's: the image has nothing there */
    for (int i = 0; i < l->nlower; i++) {
        int fd = mon_open_beneath(l->lower_fd[i], path, O_PATH);
        if (fd < 0)
            continue;
        struct stat st;
        int ok = fstat(fd, &st) == 0;
        close(fd);
        if (!ok)
            continue;
        if (S_ISCHR(st.st_mode) && st.st_rdev == 0)
            return 0; /* a whiteout of a snapshot layer */
        return S_ISREG(st.st_mode)   ? 'f'
               : S_ISDIR(st.st_mode) ? 'd'
               : S_ISLNK(st.st_mode) ? 'l'
                                     : 'o';
    }
    if (absent && strlen(path) < 4096)
        strcpy(absent, path); /* its children are absent too */
    return 0;
}

/* A regular file of at most MON_TEXT_MAX bytes beneath root; NULL with
 * *why when not read. hint: its size by the scan (UINT64_MAX: unknown): a
 * larger file is not opened, a smaller one is read without an fstat (a file
 * swapped for something else meanwhile reads as an error: O_NONBLOCK, no
 * symlink followed); one that grew is read again the long way. */
static char *read_small(int root, const char *path, uint64_t hint, size_t *len, const char **why,
                        int dirfd)
{
    if (hint != UINT64_MAX && hint > MON_TEXT_MAX) {
        *why = "larger than 64 KiB";
        return NULL;
    }
    /* dirfd: path's directory, opened beneath root: one name, not followed */
    const char *base = strrchr(path, '/');
    int fd = dirfd >= 0 ? openat(dirfd, base ? base + 1 : path,
                                 O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
                        : mon_open_beneath(root, path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        *why = "unreadable";
        return NULL;
    }
    if (hint != UINT64_MAX) {
        char *b = malloc((size_t)hint + 2);
        ssize_t n = b ? pread(fd, b, (size_t)hint + 1, 0) : -1;
        if (n >= 0 && (uint64_t)n <= hint) {
            close(fd);
            b[n] = 0;
            *len = (size_t)n;
            return b;
        }
        free(b);
        if (n < 0) {
            close(fd);
            *why = b ? "unreadable" : "out of memory";
            return NULL;
        }
    }
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        *why = "not a regular file";
    else if (st.st_size > MON_TEXT_MAX)
        *why = "larger than 64 KiB";
    else if (!(buf = malloc((size_t)st.st_size + 1)))
        *why = "out of memory";
    if (buf) {
        ssize_t n = pread(fd, buf, (size_t)st.st_size, 0);
        if (n < 0) {
            free(buf);
            buf = NULL;
            *why = "unreadable";
        } else {
            buf[n] = 0;
            *len = (size_t)n;
        }
    }
    close(fd);
    return buf;
}

/* ---- the comparison ---- */

struct diffctx {
    mon_layer *l;
    mon_file **files;
    size_t *n, *cap, *total, max;
    int between;
    size_t *budget;
    const mon_delta *dl; /* what the scan examined */
    ino_map lastmap;     /* the last scan's inodes, made when a hard link needs them */
    /* the directory of the last file read (the scan is sorted: files of one
     * directory come together): one openat2 per directory, not per file */
    char dir[4096];
    int dirfd, dirroot;
    char *scratch; /* MON_DIFF_FILE + 1: each diff is made here, then kept at its size */
};

/* The directory of path, opened beneath its root (cached). */
static int dir_of(struct diffctx *d, const char *path)
{
    const char *rel;
    const mon_root *rt = mon_root_of(d->l, path, 0, &rel);
    path = rel;
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (n >= sizeof d->dir)
        return -1;
    if (d->dirfd >= 0 && d->dirroot == rt->fd && strlen(d->dir) == n && !strncmp(d->dir, path, n))
        return d->dirfd;
    if (d->dirfd >= 0)
        close(d->dirfd);
    memcpy(d->dir, path, n);
    d->dir[n] = 0;
    d->dirfd = mon_open_beneath(rt->fd, d->dir, O_PATH | O_DIRECTORY);
    d->dirroot = rt->fd;
    return d->dirfd;
}

/* Whether a change matches a file rule of the policy (kept past the list's bound). */
static int ruled(const mon_layer *l, mon_fchange c, const char *path, const char *from)
{
    const lis_policy *p = l->policy;
    if (!p)
        return 0;
    if (c == MF_DELETED)
        return mon_rules_match(p, MR_DELETE, path, NULL) != NULL;
    if (c == MF_RENAMED &&
        (mon_rules_match(p, MR_RENAME, path, NULL) || mon_rules_match(p, MR_RENAME, from, NULL)))
        return 1;
    return mon_rules_match(p, MR_WRITE, path, NULL) != NULL;
}

static int emit(struct diffctx *d, mon_fchange c, const mon_entry *e, const char *from, char kind,
                int64_t delta)
{
    (*d->total)++;
    /* past the list's bound only what a rule matches (so that it fires), a
     * few more */
    if (*d->n >= d->max &&
        (*d->n >= d->max + MON_STEP_ALERTS || !ruled(d->l, c, e ? e->path : from, from)))
        return 0;
    if (LIS_GROW(*d->files, *d->cap, *d->n + 1) < 0)
        return -1;
    mon_file *f = &(*d->files)[*d->n];
    memset(f, 0, sizeof *f);
    f->change = c;
    f->kind = kind;
    f->between = d->between;
    f->size = e && e->kind != 'w' ? e->size : 0;
    f->mode = e && e->kind != 'w' ? e->mode : 0;
    f->size_delta = delta;
    f->path = strdup(e ? e->path : from);
    f->from = from && e ? strdup(from) : NULL;
    if (!f->path || (from && e && !f->from)) {
        mon_file_release(f);
        return -1;
    }
    (*d->n)++;
    return 0;
}

/* The diff of the file just emitted (created or modified, regular). */
static void add_diff(struct diffctx *d, const mon_entry *e, int created)
{
    if (*d->n == 0)
        return;
    mon_file *f = &(*d->files)[*d->n - 1];
    if (strcmp(f->path, e->path))
        return; /* not listed (the step's list is full): nothing to attach to */
    size_t nlen = 0, olen = 0;
    const char *why = NULL;
    const char *rel;
    int root = mon_root_of(d->l, e->path, 0, &rel)->fd;
    char *now = read_small(root, rel, e->size, &nlen, &why, dir_of(d, e->path));
    if (!now) {
        f->diff_none = why;
        mon_texts_drop(&d->l->cache, e->path);
        return;
    }
    if (!mon_is_text(now, nlen)) {
        f->diff_none = "binary";
        f->binary = 1;
        free(now);
        mon_texts_drop(&d->l->cache, e->path);
        return;
    }
    char *old = NULL;
    const mon_text *kept = mon_texts_find(&d->l->cache, e->path);
    int found = kept != NULL;
    if (found) {
        old = kept->text;
        olen = kept->len;
    } else if (!created) {
        for (int i = 0; i < d->l->nlower && !old; i++) {
            const char *w;
            char *t = read_small(d->l->lower_fd[i], e->path, UINT64_MAX, &olen, &w, -1);
            if (t && mon_is_text(t, olen))
                old = t;
            else
                free(t);
        }
        if (!old)
            f->diff_none = d->l->cache.full ? "the earlier text was not kept (cache full)"
                                            : "the earlier text is not text or not kept";
    } else {
        old = "";
    }
    if (old && !*d->budget) {
        f->diff_none = "the step's diff budget is used up";
        f->diff_cut = 1;
    } else if (old) {
        size_t cap = *d->budget < MON_DIFF_FILE ? *d->budget : MON_DIFF_FILE;
        if (!d->scratch)
            d->scratch = malloc(MON_DIFF_FILE + 1);
        if (d->scratch) { /* 8 KiB a file would grow (and fault in) the heap for nothing */
            size_t n = mon_udiff(old, olen, now, nlen, e->path, d->scratch, cap + 1, &f->diff_cut);
            f->diff = malloc(n + 1);
            if (f->diff)
                memcpy(f->diff, d->scratch, n + 1);
            *d->budget -= n < *d->budget ? n : *d->budget;
        }
    }
    if (old && !found && !created)
        free(old);
    mon_texts_put(&d->l->cache, e->path, now, nlen);
}

/* e is the same file as arg (a rename keeps the kind and the mtime; an
 * inode number reused by a new file has a new mtime) */
static int same_file(const mon_entry *e, const void *arg)
{
    const mon_entry *o = arg;
    return e->kind == o->kind && (e->kind == 'd' || e->mtime == o->mtime);
}

static int path_gone(const mon_entry *e, const void *arg)
{
    const struct diffctx *d = arg;
    const mon_entry *x = mon_now_find(d->l, d->dl, e->path);
    return !x || x->ino != e->ino || x->dev != e->dev;
}

static int path_kept(const mon_entry *e, const void *arg)
{
    const struct diffctx *d = arg;
    const mon_entry *x = mon_now_find(d->l, d->dl, e->path);
    return x && x->ino == e->ino && x->dev == e->dev;
}

static int under_renamed_dir(const struct diffctx *d, const mon_scan *old, const mon_scan *now,
                             const char *from, const char *to)
{
    /* a child moved with its directory: the parents were renamed alike */
    const char *sf = strrchr(from, '/'), *st = strrchr(to, '/');
    if (!sf || !st || sf == from || st == to || strcmp(sf, st))
        return 0;
    char pf[4096], pt[4096];
    snprintf(pf, sizeof pf, "%.*s", (int)(sf - from), from);
    snprintf(pt, sizeof pt, "%.*s", (int)(st - to), to);
    const mon_entry *a = mon_find_path(old, pf), *b = mon_find_path(now, pt);
    return a && b && a->ino == b->ino && a->dev == b->dev && !mon_now_find(d->l, d->dl, pf);
}

static int compare(struct diffctx *d, const mon_scan *old, const mon_scan *now)
{
    ino_map om = {0}, nm = {0};
    char absent[4096] = ""; /* lower_kind's: the last directory the image lacks */
    /* an old entry renamed in this step: the new entry that took it (index + 1),
     * so that a second new name of it is a hard link, not a second rename */
    size_t *claimed = calloc(old->n ? old->n : 1, sizeof *claimed);
    if (!claimed || map_build(&om, old) < 0 || map_build(&nm, now) < 0) {
        free(claimed);
        free(om.slot);
        free(nm.slot);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < now->n && rc == 0; i++) {
        const mon_entry *e = &now->e[i];
        const mon_entry *o = mon_find_path(old, e->path);
        if (e->kind == 'w') {
            if (o && o->kind == 'w')
                continue;
            if (o && map_find(&nm, o, same_file, o))
                continue; /* renamed away (reported at its new path) */
            char k = o ? o->kind : lower_kind(d->l, e->path, absent);
            rc = emit(d, MF_DELETED, NULL, e->path, k ? k : 'o', o ? -(int64_t)o->size : 0);
            mon_texts_drop(&d->l->cache, e->path);
            continue;
        }
        if (o && o->kind == e->kind && o->ino == e->ino && o->dev == e->dev) {
            int changed = o->size != e->size || o->mtime != e->mtime || o->mode != e->mode ||
                          (o->ctime != e->ctime && o->nlink == e->nlink);
            if (e->kind == 'd') {
                if (e->opaque && !o->opaque && lower_kind(d->l, e->path, absent) == 'd')
                    rc = emit(d, MF_MODIFIED, e, NULL, 'd', 0);
                continue;
            }
            if (!changed)
                continue;
            rc = emit(d, MF_MODIFIED, e, NULL, e->kind, (int64_t)e->size - (int64_t)o->size);
            if (rc == 0 && e->kind == 'f')
                add_diff(d, e, 0);
            continue;
        }
        /* a new path, or a new inode at an old path */
        const mon_entry *from = map_find(&om, e, path_gone, d);
        if (from && !same_file(e, from))
            from = NULL;
        if (from && claimed[from - old->e]) { /* renamed to an earlier path: this is a link */
            rc = emit(d, MF_LINKED, e, now->e[claimed[from - old->e] - 1].path, e->kind, 0);
            continue;
        }
        if (from) {
            claimed[from - old->e] = i + 1;
            if (under_renamed_dir(d, old, now, from->path, e->path))
                continue;
            rc = emit(d, MF_RENAMED, e, from->path, e->kind, 0);
            if (rc == 0)
                mon_texts_rename(&d->l->cache, from->path, e->path);
            continue;
        }
        const mon_entry *twin =
            e->kind != 'd' && e->nlink > 1 ? map_find(&om, e, path_kept, d) : NULL;
        if (!twin && e->kind != 'd' && e->nlink > 1) {
            /* a new name of a file the scan did not examine: the last scan's inodes */
            if (!d->lastmap.slot && map_build(&d->lastmap, &d->l->last) < 0) {
                rc = -1;
                break;
            }
            twin = map_find(&d->lastmap, e, path_kept, d);
        }
        if (!twin && e->kind != 'd' && e->nlink > 1) {
            /* two new names of a new file: the first is the creation */
            for (size_t j = 0; j < i && !twin; j++)
                if (now->e[j].ino == e->ino && now->e[j].dev == e->dev &&
                    !mon_find_path(old, now->e[j].path))
                    twin = &now->e[j];
        }
        if (twin) {
            rc = emit(d, MF_LINKED, e, twin->path, e->kind, 0);
            continue;
        }
        char lk = o && o->kind != 'w' ? o->kind : lower_kind(d->l, e->path, absent);
        if (e->kind == 'd' && (lk == 'd' || (o && o->kind == 'd')) && !e->opaque)
            continue; /* a directory copied up for a child: not a change */
        int modified = o ? o->kind != 'w' : lk != 0;
        rc = emit(d, modified ? MF_MODIFIED : MF_CREATED, e, NULL, e->kind,
                  (int64_t)e->size - (o && o->kind != 'w' ? (int64_t)o->size : 0));
        if (rc == 0 && e->kind == 'f')
            add_diff(d, e, !modified);
    }
    /* old paths now absent without a whiteout: files of this episode removed */
    for (size_t i = 0; i < old->n && rc == 0; i++) {
        const mon_entry *o = &old->e[i];
        if (o->kind == 'w' || mon_find_path(now, o->path))
            continue;
        if (map_find(&nm, o, same_file, o)) /* it lives on at a new path */
            continue;
        const char *slash = strrchr(o->path, '/');
        if (slash && slash != o->path) { /* inside a directory that went too: that one's enough */
            char parent[4096];
            snprintf(parent, sizeof parent, "%.*s", (int)(slash - o->path), o->path);
            const mon_entry *pe = mon_now_find(d->l, d->dl, parent);
            const char *rel;
            const mon_root *pr = mon_root_of(d->l, parent, 1, &rel);
            int mount = pr->prefix[0] && !*rel; /* a tmpfs mount's root: there */
            if (!mount && (!pe || pe->kind == 'w')) {
                mon_texts_drop(&d->l->cache, o->path);
                continue;
            }
        }
        rc = emit(d, MF_DELETED, NULL, o->path, o->kind, -(int64_t)o->size);
        mon_texts_drop(&d->l->cache, o->path);
    }
    free(claimed);
    free(om.slot);
    free(nm.slot);
    return rc;
}

/* Names created and removed again between two scans: their events say so. */
static int transients(struct diffctx *d)
{
    int rc = 0;
    for (size_t i = 0; i < d->dl->nborn && rc == 0; i++) {
        const mon_born *b = &d->dl->born[i];
        if (!b->examined || mon_find_path(&d->dl->now, b->path) ||
            mon_find_path(&d->dl->old, b->path))
            continue;
        mon_entry e = {.path = b->path, .kind = b->kind};
        size_t before = *d->n;
        rc = emit(d, MF_CREATED, &e, NULL, b->kind, 0);
        if (rc == 0 && *d->n > before)
            (*d->files)[before].removed = 1;
    }
    return rc;
}

int mon_layer_diff(mon_layer *l, mon_file **files, size_t *n, size_t *cap, size_t *total,
                   size_t max, int between, size_t *diff_budget, int *scan_cut, char *why,
                   size_t whylen, lis_error *err)
{
    mon_delta dl;
    double deadline = between < 0 ? INFINITY : lis_now() + MON_SCAN_BUDGET;
    int rc = mon_scan_changes(l, deadline, &dl);
    struct diffctx d = {.l = l,
                        .files = files,
                        .n = n,
                        .cap = cap,
                        .total = total,
                        .max = max,
                        .between = between,
                        .budget = diff_budget,
                        .dl = &dl,
                        .dirfd = -1};
    if (rc == 0 && between >= 0) /* the first scan is the baseline */
        rc = compare(&d, &dl.old, &dl.now);
    if (rc == 0 && between >= 0)
        rc = transients(&d);
    if (rc == 0)
        mon_scan_commit(l, &dl);
    if (d.dirfd >= 0)
        close(d.dirfd);
    free(d.scratch);
    free(d.lastmap.slot);
    if (dl.cut) {
        *scan_cut = 1;
        if (why && whylen && !*why)
            snprintf(why, whylen, "%s", dl.why);
    }
    mon_delta_release(&dl);
    if (rc < 0) {
        l->watch.lost = 1; /* what was examined is not in the last scan: look again */
        return lis_oom(err);
    }
    return 0;
}
