/* texts.c - the old text of an episode's small text files, by path: what a
 * step's diff is made against. A chained hash table, so that keeping or
 * dropping one text costs the same whatever the episode holds (a sorted
 * array moved every entry after the path: at 200,000 files that was most
 * of a step's scan). Its bytes are bounded by MON_CACHE_BYTES; a text that
 * does not fit is not kept, and the table says so (full). */
#include "monitor.h"

#include <stdlib.h>
#include <string.h>

size_t mon_str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

static mon_text **slot_of(const mon_texts *c, const char *path)
{
    mon_text **p = &c->bucket[mon_str_hash(path) & (c->nbucket - 1)];
    while (*p && strcmp((*p)->path, path))
        p = &(*p)->next;
    return p;
}

const mon_text *mon_texts_find(const mon_texts *c, const char *path)
{
    return c->nbucket ? *slot_of(c, path) : NULL;
}

static mon_text *unlink_text(mon_texts *c, const char *path)
{
    if (!c->nbucket)
        return NULL;
    mon_text **p = slot_of(c, path), *t = *p;
    if (t) {
        *p = t->next;
        c->n--;
        c->bytes -= t->len;
    }
    return t;
}

void mon_texts_drop(mon_texts *c, const char *path)
{
    mon_text *t = unlink_text(c, path);
    if (t) {
        free(t->path);
        free(t->text);
        free(t);
    }
}

/* Doubles the buckets; 0, or -1 out of memory (the table stays as it was). */
static int grow(mon_texts *c)
{
    size_t nb = c->nbucket ? 2 * c->nbucket : 256;
    mon_text **b = calloc(nb, sizeof *b);
    if (!b)
        return -1;
    for (size_t i = 0; i < c->nbucket; i++)
        for (mon_text *t = c->bucket[i], *next; t; t = next) {
            next = t->next;
            mon_text **h = &b[mon_str_hash(t->path) & (nb - 1)];
            t->next = *h;
            *h = t;
        }
    free(c->bucket);
    c->bucket = b;
    c->nbucket = nb;
    return 0;
}

static void insert(mon_texts *c, mon_text *t)
{
    mon_text **h = &c->bucket[mon_str_hash(t->path) & (c->nbucket - 1)];
    t->next = *h;
    *h = t;
    c->n++;
    c->bytes += t->len;
}

void mon_texts_put(mon_texts *c, const char *path, char *text, size_t len)
{
    mon_texts_drop(c, path);
    if (c->n >= c->nbucket && grow(c) < 0) {
        /* no more buckets: longer chains, unless there are none */
    }
    mon_text *t = NULL;
    if (c->bytes + len > MON_CACHE_BYTES || !c->nbucket || !(t = calloc(1, sizeof *t)) ||
        !(t->path = strdup(path))) {
        c->full = 1;
        free(t);
        free(text);
        return;
    }
    t->text = text;
    t->len = len;
    insert(c, t);
}

void mon_texts_rename(mon_texts *c, const char *from, const char *to)
{
    mon_text *t = unlink_text(c, from);
    if (!t)
        return;
    mon_texts_drop(c, to);
    char *p = strdup(to);
    if (!p) {
        c->full = 1;
        free(t->path);
        free(t->text);
        free(t);
        return;
    }
    free(t->path);
    t->path = p;
    insert(c, t);
}

void mon_texts_release(mon_texts *c)
{
    for (size_t i = 0; i < c->nbucket; i++)
        for (mon_text *t = c->bucket[i], *next; t; t = next) {
            next = t->next;
            free(t->path);
            free(t->text);
            free(t);
        }
    free(c->bucket);
    memset(c, 0, sizeof *c);
}
