/* autosnap.c - the untagged snapshots lis serve makes for a fork, removed
 * from the store once nothing needs them: no sandbox of this server runs on
 * one (nor on a snapshot made on it), no tag names it (a client that tagged it
 * keeps it) and it was not handed out by a snapshot request. Without this an
 * RL loop forking every step fills the disk with layers nobody can name.
 *
 * Why the checks run on the loop thread: a snapshot may come out as an image
 * already in the store (the same files over the same parent). If a removal ran
 * on a worker beside such a snapshot, the new fork's sandboxes could start on
 * files being deleted. So a snapshot is passed over while a sandbox on its
 * parent is being snapshotted or forked, and it is taken out of the store (a
 * rename under the store's lock, not waited for) on the loop thread, before any
 * later snapshot can find it; only the rm -rf of the renamed tree runs on a
 * worker. */
#include "rootfs.h"
#include "serve.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sv_autosnap {
    char digest[80];
    char parent[80];        /* the image it was made over */
    int last;               /* what the last try did: LIS_UNSTORE_BUSY or _PARENT (kept for now) */
    unsigned long tried_at; /* s->images_removed then: a parent is tried again after a removal */
    struct sv_autosnap *next;
};

typedef struct trash_job {
    sv_server *s;
    char path[PATH_MAX + 64];
} trash_job;

static int in_list(sv_server *s, const char *digest)
{
    for (sv_autosnap *a = s->autosnaps; a; a = a->next)
        if (!strcmp(a->digest, digest))
            return 1;
    return 0;
}

void sv_autosnap_add(sv_server *s, const char *digest, const char *parent)
{
    if (in_list(s, digest))
        return;
    sv_autosnap *a = calloc(1, sizeof *a);
    if (!a)
        return; /* it stays in the store: lis rootfs gc takes it */
    snprintf(a->digest, sizeof a->digest, "%s", digest);
    snprintf(a->parent, sizeof a->parent, "%s", parent);
    a->next = s->autosnaps;
    s->autosnaps = a;
}

void sv_autosnap_forget(sv_server *s, const char *digest)
{
    for (sv_autosnap **p = &s->autosnaps; *p; p = &(*p)->next)
        if (!strcmp((*p)->digest, digest)) {
            sv_autosnap *a = *p;
            *p = a->next;
            free(a);
            return;
        }
}

static void trash_work(void *arg)
{
    trash_job *j = arg;
    lis_rootfs_trash_rm(j->path);
}

static void trash_done(void *arg, int status)
{
    trash_job *j = arg;
    j->s->trash_jobs--;
    free(j);
}

static void sweep(sv_server *s, int force);

static void retry(void *arg) { sweep(arg, 0); }

/* A sandbox runs on it, or a snapshot in flight may come out as it (one of a
 * sandbox on the same parent: the same files over the same parent are the same
 * image; see the top of this file). */
static int in_use(sv_server *s, const sv_autosnap *a)
{
    for (sv_container *c = s->containers; c; c = c->next)
        if (!strcmp(c->image_id, a->digest) ||
            (c->change != SV_CHANGE_NONE && !strcmp(c->image_id, a->parent)))
            return 1;
    return 0;
}

/* force: also those kept as a parent with no image removed since (at exit: an
 * image may have gone by another process's hand) */
static void sweep(sv_server *s, int force)
{
    if (!s->autosnaps)
        return;
    int again = 1, busy = 0;
    while (again) { /* a removal may free its parent (a fork of a fork) */
        again = 0;
        for (sv_autosnap *a = s->autosnaps, *next; a; a = next) {
            next = a->next;
            if (in_use(s, a))
                continue;
            /* a parent stays one until an image goes: no store scan per sandbox removal */
            if (!force && a->last == LIS_UNSTORE_PARENT && a->tried_at == s->images_removed)
                continue;
            char trash[PATH_MAX + 64];
            int what;
            lis_error err = {0};
            if (lis_rootfs_unstore_unused(s->data_dir, a->digest, trash, sizeof trash, &what,
                                          &err) < 0) {
                fprintf(stderr,
                        "lis serve: warning: fork snapshot %.19s stays in the store "
                        "(lis rootfs gc removes it): %s\n",
                        a->digest, err.msg);
                sv_autosnap_forget(s, a->digest);
                continue;
            }
            a->last = what;
            a->tried_at = s->images_removed;
            if (what == LIS_UNSTORE_BUSY || what == LIS_UNSTORE_PARENT) {
                busy |= what == LIS_UNSTORE_BUSY;
                continue;
            }
            if (what == LIS_UNSTORE_DONE) {
                s->images_removed++;
                trash_job *j = calloc(1, sizeof *j);
                if (j) {
                    j->s = s;
                    snprintf(j->path, sizeof j->path, "%s", trash);
                    if (sv_job(s->loop, trash_work, trash_done, j) == 0)
                        s->trash_jobs++;
                    else
                        free(j); /* the tree stays in rootfs/tmp: lis rootfs gc takes it */
                }
            }
            sv_autosnap_forget(s, a->digest); /* removed, tagged since, or gone */
            next = NULL;                      /* the list changed: start over */
            again = 1;
        }
    }
    if (busy) /* another process holds the store: again in a second */
        sv_timer_arm(s->loop, &s->autosnap_retry, 1.0, retry, s);
}

void sv_autosnap_sweep(sv_server *s) { sweep(s, 0); }

void sv_autosnap_shutdown(sv_server *s)
{
    /* the containers are gone: what is left goes, unless the store stays busy */
    for (int i = 0; s->autosnaps && i < 100; i++) {
        sv_timer_cancel(s->loop, &s->autosnap_retry);
        sweep(s, 1);
        int waiting = 0;
        for (sv_autosnap *a = s->autosnaps; a && !waiting; a = a->next)
            waiting = a->last == LIS_UNSTORE_BUSY || in_use(s, a);
        if (!waiting)
            break; /* only parents of images kept: they stay (lis rootfs gc) */
        sv_loop_run_once(s->loop, 50);
    }
    sv_timer_cancel(s->loop, &s->autosnap_retry);
    while (s->trash_jobs > 0)
        sv_loop_run_once(s->loop, 50);
    while (s->autosnaps)
        sv_autosnap_forget(s, s->autosnaps->digest);
}
