/* index.c - the server's episodes and groups by id: open addressing over
 * FNV-1a of the id, grown at half full, deletions as tombstones. Every
 * request names one by id, and a long-poll is asked again at each change
 * of the server's state: a walk of the lists there would cost N per ask. */
#include "core.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOMB ((void *)1)

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot holding id, or NULL. */
static rl_slot *lookup(const rl_index *x, const char *id)
{
    for (size_t i = x->cap ? hash(id) & (x->cap - 1) : 0, n = 0; n < x->cap;
         i = (i + 1) & (x->cap - 1), n++) {
        rl_slot *s = &x->slots[i];
        if (!s->ptr)
            return NULL;
        if (s->ptr != TOMB && !strcmp(s->id, id))
            return s;
    }
    return NULL;
}

/* The first slot id may take: a tombstone or an empty one (the table is
 * never full: it grows at half). */
static rl_slot *free_slot(const rl_index *x, const char *id)
{
    size_t i = hash(id) & (x->cap - 1);
    while (x->slots[i].ptr && x->slots[i].ptr != TOMB)
        i = (i + 1) & (x->cap - 1);
    return &x->slots[i];
}

static int grow(rl_index *x)
{
    size_t cap = x->cap ? 2 * x->cap : 64;
    rl_slot *old = x->slots, *n = calloc(cap, sizeof *n);
    if (!n)
        return -1;
    size_t ocap = x->cap;
    x->slots = n;
    x->cap = cap;
    x->used = x->count = 0;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].ptr && old[i].ptr != TOMB)
            rl_index_put(x, old[i].id, old[i].ptr);
    free(old);
    return 0;
}

int rl_index_put(rl_index *x, const char *id, void *ptr)
{
    rl_slot *s = lookup(x, id);
    if (s) {
        s->ptr = ptr;
        return 0;
    }
    if (2 * (x->used + 1) > x->cap && grow(x) < 0)
        return -1;
    s = free_slot(x, id);
    if (!s->ptr)
        x->used++;
    x->count++;
    snprintf(s->id, sizeof s->id, "%s", id);
    s->ptr = ptr;
    return 0;
}

void *rl_index_get(const rl_index *x, const char *id)
{
    rl_slot *s = lookup(x, id);
    return s ? s->ptr : NULL;
}

void rl_index_del(rl_index *x, const char *id)
{
    rl_slot *s = lookup(x, id);
    if (s) {
        s->ptr = TOMB;
        x->count--;
    }
}

void rl_index_free(rl_index *x)
{
    free(x->slots);
    memset(x, 0, sizeof *x);
}
