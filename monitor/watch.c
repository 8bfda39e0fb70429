/* watch.c - the event source of the file scans: inotify on every directory
 * of a sandbox's writable layer and its tmpfs mounts (rootless: an inode
 * watch needs only read access, and overlayfs's writes to the upper layer
 * raise the upper inodes' events). A step's scan then examines the paths
 * named by events, not the whole layer (layer.c). Events can be lost (the
 * queue overflows, a watch cannot be added): `lost` then asks for a full
 * scan, and past MON_WATCH_MAX directories every scan is a full one. */
#include "monitor.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#define WATCH_MASK                                                                                 \
    (IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR |    \
     IN_EXCL_UNLINK)

void mon_watch_open(mon_watch *w)
{
    memset(w, 0, sizeof *w);
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) {
        /* EMFILE: the owner's inotify instances (fs.inotify.max_user_instances) */
        snprintf(w->why, sizeof w->why, "no inotify instance (%s): full scans", strerror(errno));
        w->capped = 1;
    }
    w->lost = 1; /* the first scan lists everything */
}

void mon_watch_release(mon_watch *w)
{
    if (w->fd >= 0)
        close(w->fd);
    for (size_t i = 0; i < w->nw; i++)
        free(w->w[i].path);
    free(w->w);
    memset(w, 0, sizeof *w);
    w->fd = -1;
}

static size_t wd_pos(const mon_watch *w, int wd, int *found)
{
    size_t lo = 0, hi = w->nw;
    *found = 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (w->w[mid].wd == wd) {
            *found = 1;
            return mid;
        }
        if (w->w[mid].wd < wd)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void mon_watch_add(mon_watch *w, int dirfd, const char *path)
{
    if (w->capped)
        return;
    if (w->nw >= MON_WATCH_MAX) {
        snprintf(w->why, sizeof w->why, "more than %d directories: full scans", MON_WATCH_MAX);
        w->capped = 1;
        return;
    }
    /* the directory itself, through its fd (opened beneath the layer's root:
     * nothing of the path is resolved again) */
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", dirfd);
    int wd = inotify_add_watch(w->fd, self, WATCH_MASK);
    if (wd < 0) {
        /* ENOSPC: the owner's watches (fs.inotify.max_user_watches) */
        snprintf(w->why, sizeof w->why, "inotify watch: %s: full scans", strerror(errno));
        w->capped = 1;
        return;
    }
    int found;
    size_t i = wd_pos(w, wd, &found);
    char *p = strdup(path);
    if (!p) {
        w->lost = 1;
        return;
    }
    if (found) { /* the same directory under a new name (renamed) */
        free(w->w[i].path);
        w->w[i].path = p;
        return;
    }
    if (LIS_GROW(w->w, w->capw, w->nw + 1) < 0) {
        free(p);
        inotify_rm_watch(w->fd, wd);
        w->lost = 1;
        return;
    }
    memmove(&w->w[i + 1], &w->w[i], (w->nw - i) * sizeof *w->w);
    w->w[i] = (mon_wd){wd, p};
    w->nw++;
}

static void wd_drop(mon_watch *w, int wd)
{
    int found;
    size_t i = wd_pos(w, wd, &found);
    if (!found)
        return;
    free(w->w[i].path);
    memmove(&w->w[i], &w->w[i + 1], (w->nw - i - 1) * sizeof *w->w);
    w->nw--;
}

void mon_watch_drain(mon_watch *w, mon_watch_fn fn, void *arg)
{
    if (w->fd < 0)
        return;
    /* aligned as struct inotify_event; one event with the longest name fits */
    union {
        struct inotify_event ev;
        char buf[65536];
    } u;
    char path[4096];
    ssize_t got;
    while ((got = read(w->fd, u.buf, sizeof u.buf)) > 0) {
        for (ssize_t off = 0; off < got;) {
            const struct inotify_event *ev = (const struct inotify_event *)(u.buf + off);
            off += (ssize_t)(sizeof *ev + ev->len);
            if (ev->mask & IN_Q_OVERFLOW) {
                w->lost = 1;
                continue;
            }
            if (ev->mask & IN_IGNORED) { /* the directory is gone: its watch too */
                wd_drop(w, ev->wd);
                continue;
            }
            if (!ev->len || !ev->name[0])
                continue; /* the watched directory's own: its parent names it */
            int found;
            size_t i = wd_pos(w, ev->wd, &found);
            if (!found)
                continue;
            if (snprintf(path, sizeof path, "%s/%s", w->w[i].path, ev->name) >= (int)sizeof path) {
                w->lost = 1; /* a name past PATH_MAX: only a full scan says what it is */
                continue;
            }
            int kind = ev->mask & (IN_CREATE | IN_MOVED_TO) ? MW_BORN
                       : ev->mask & IN_MOVED_FROM           ? MW_MOVED
                       : ev->mask & IN_DELETE               ? MW_GONE
                                                            : MW_CHANGED;
            if (fn(arg, path, kind, (ev->mask & IN_ISDIR) != 0) < 0)
                w->lost = 1;
        }
    }
}
