/* test_monitor_scan.c - the pure parts of a step's scan, without a sandbox:
 * the last scan brought up to date in place (scan.c's commit) against a
 * plain merge of the same sets, and the old texts kept by path (texts.c). */
#include "monitor.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_path(const void *a, const void *b)
{
    return strcmp(((const mon_entry *)a)->path, ((const mon_entry *)b)->path);
}

static mon_entry entry(const char *path, uint64_t ino)
{
    mon_entry e = {.path = strdup(path), .ino = ino, .kind = 'f'};
    cr_assert(e.path);
    return e;
}

/* A scan of n distinct paths under a few directories, sorted, inos 1..n. */
static void make_last(mon_scan *s, size_t n, unsigned *seed)
{
    memset(s, 0, sizeof *s);
    s->e = calloc(n + 1, sizeof *s->e);
    cr_assert(s->e);
    char path[64];
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "d%u/f%zu", (unsigned)(rand_r(seed) % 7), i);
        s->e[s->n++] = entry(path, i + 1);
    }
    qsort(s->e, s->n, sizeof *s->e, by_path);
}

/* What the commit must give: the last scan without what was examined or is
 * in now, with now's entries, in path order (a copy). */
static mon_scan expected(const mon_scan *last, const unsigned char *oldbit, const mon_scan *now)
{
    mon_scan x = {.e = calloc(last->n + now->n + 1, sizeof(mon_entry))};
    cr_assert(x.e);
    for (size_t i = 0; i < last->n; i++) {
        mon_entry key = last->e[i];
        if (!oldbit[i] && !bsearch(&key, now->e, now->n, sizeof *now->e, by_path))
            x.e[x.n++] = last->e[i];
    }
    for (size_t j = 0; j < now->n; j++)
        x.e[x.n++] = now->e[j];
    qsort(x.e, x.n, sizeof *x.e, by_path);
    return x;
}

static void check_commit(size_t nlast, unsigned seed)
{
    mon_layer l;
    memset(&l, 0, sizeof l);
    make_last(&l.last, nlast, &seed);
    mon_delta d;
    memset(&d, 0, sizeof d);
    d.oldbit = calloc(nlast + 1, 1);
    d.now.e = calloc(2 * nlast + 64, sizeof(mon_entry));
    cr_assert(d.oldbit && d.now.e);
    char path[64];
    for (size_t i = 0; i < nlast; i++) {
        int r = rand_r(&seed) % 10;
        if (r < 3) { /* examined: still there (a new ino), or gone */
            d.oldbit[i] = 1;
            if (r < 2)
                d.now.e[d.now.n++] = entry(l.last.e[i].path, 1000000 + i);
        }
    }
    size_t born = (size_t)rand_r(&seed) % (nlast + 30);
    for (size_t k = 0; k < born; k++) { /* new paths among the old, before and after them */
        const char *dir[] = {"a", "d3", "d3/f1x", "z", "d0"};
        snprintf(path, sizeof path, "%s/n%zu", dir[rand_r(&seed) % 5], k);
        d.now.e[d.now.n++] = entry(path, 2000000 + k);
    }
    qsort(d.now.e, d.now.n, sizeof *d.now.e, by_path);
    mon_scan want = expected(&l.last, d.oldbit, &d.now);
    char **want_paths = calloc(want.n + 1, sizeof *want_paths);
    uint64_t *want_ino = calloc(want.n + 1, sizeof *want_ino);
    cr_assert(want_paths && want_ino);
    for (size_t i = 0; i < want.n; i++) {
        want_paths[i] = strdup(want.e[i].path);
        want_ino[i] = want.e[i].ino;
    }
    free(want.e); /* shallow */
    mon_scan_commit(&l, &d);
    cr_assert_eq(d.cut, 0);
    cr_assert_eq(l.last.n, want.n, "seed %u: %zu entries, want %zu", seed, l.last.n, want.n);
    for (size_t i = 0; i < want.n; i++) {
        cr_assert_str_eq(l.last.e[i].path, want_paths[i], "seed %u, entry %zu", seed, i);
        cr_assert_eq(l.last.e[i].ino, want_ino[i], "seed %u, %s", seed, want_paths[i]);
        free(want_paths[i]);
    }
    free(want_paths);
    free(want_ino);
    mon_delta_release(&d);
    mon_scan_release(&l.last);
}

Test(monitor_scan, commit_in_place_equals_a_plain_merge)
{
    check_commit(0, 1);
    check_commit(1, 2);
    for (unsigned seed = 3; seed < 203; seed++)
        check_commit((size_t)(seed * 7919u) % 2000, seed);
}

Test(monitor_scan, commit_past_the_bound_keeps_the_old_and_states_the_cut, .timeout = 60)
{
    mon_layer l;
    memset(&l, 0, sizeof l);
    unsigned seed = 7;
    make_last(&l.last, MON_SCAN_MAX - 5, &seed);
    mon_delta d;
    memset(&d, 0, sizeof d);
    d.oldbit = calloc(l.last.n + 1, 1);
    d.now.e = calloc(20, sizeof(mon_entry));
    cr_assert(d.oldbit && d.now.e);
    char path[32];
    for (int k = 0; k < 20; k++) {
        snprintf(path, sizeof path, "new/%02d", k);
        d.now.e[d.now.n++] = entry(path, 5000000 + (uint64_t)k);
    }
    mon_scan_commit(&l, &d);
    cr_assert_eq(l.last.n, MON_SCAN_MAX);
    cr_assert_eq(d.cut, 1);
    cr_assert(strstr(d.why, "15 not kept"), "%s", d.why);
    /* the first five in path order were kept, every old entry too */
    cr_assert(mon_find_path(&l.last, "new/04"));
    cr_assert_null(mon_find_path(&l.last, "new/05"));
    for (size_t i = 1; i < l.last.n; i++)
        cr_assert_lt(strcmp(l.last.e[i - 1].path, l.last.e[i].path), 0);
    mon_delta_release(&d);
    mon_scan_release(&l.last);
}

Test(monitor_scan, texts_by_path_bounded)
{
    mon_texts c;
    memset(&c, 0, sizeof c);
    char path[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(path, sizeof path, "f%d", i);
        mon_texts_put(&c, path, strdup(path), strlen(path));
    }
    cr_assert_eq(c.n, 5000);
    cr_assert_eq(c.full, 0);
    const mon_text *t = mon_texts_find(&c, "f4321");
    cr_assert(t);
    cr_assert_str_eq(t->text, "f4321");
    mon_texts_put(&c, "f4321", strdup("again"), 5); /* replaced, not doubled */
    cr_assert_eq(c.n, 5000);
    cr_assert_str_eq(mon_texts_find(&c, "f4321")->text, "again");
    mon_texts_rename(&c, "f4321", "f1"); /* onto a kept path: that one goes */
    cr_assert_null(mon_texts_find(&c, "f4321"));
    cr_assert_str_eq(mon_texts_find(&c, "f1")->text, "again");
    cr_assert_eq(c.n, 4999);
    mon_texts_rename(&c, "nothing", "f2"); /* nothing kept to move: f2 stays */
    cr_assert_str_eq(mon_texts_find(&c, "f2")->text, "f2");
    size_t bytes = c.bytes;
    mon_texts_drop(&c, "f2");
    cr_assert_eq(c.bytes, bytes - 2);
    cr_assert_null(mon_texts_find(&c, "f2"));
    /* past MON_CACHE_BYTES a text is not kept, and that is said */
    char *big = malloc(MON_CACHE_BYTES);
    cr_assert(big);
    memset(big, 'x', MON_CACHE_BYTES);
    mon_texts_put(&c, "big", big, MON_CACHE_BYTES);
    cr_assert_null(mon_texts_find(&c, "big"));
    cr_assert_eq(c.full, 1);
    cr_assert_lt(c.bytes, (size_t)MON_CACHE_BYTES);
    mon_texts_release(&c);
    cr_assert_eq(c.n, 0);
}
