/* udiff.c - a unified diff of two small texts (3 lines of context), bounded:
 * common head and tail lines are trimmed, the middle is compared line by
 * line (LCS) when it is small enough, else shown as replaced whole; the
 * output stops at its cap and says so. */
#include "monitor.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LCS_CELLS (1u << 20) /* the middle compared line by line up to this many pairs */
#define CONTEXT 3

typedef struct line {
    const char *s;
    size_t n; /* without the newline */
} line;

static size_t split(const char *t, size_t len, line **out)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += t[i] == '\n';
    n += len && t[len - 1] != '\n';
    line *v = n ? calloc(n, sizeof *v) : NULL;
    if (n && !v) {
        *out = NULL;
        return (size_t)-1;
    }
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= len && k < n; i++)
        if (i == len || t[i] == '\n') {
            v[k].s = t + start;
            v[k++].n = i - start;
            start = i + 1;
        }
    *out = v;
    return n;
}

static int same(const line *a, const line *b) { return a->n == b->n && !memcmp(a->s, b->s, a->n); }

struct out {
    char *buf;
    size_t len, cap;
    int cut;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->cut)
        return;
    if (o->len + n + 1 > o->cap) {
        o->cut = 1;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = 0;
}

static void put_line(struct out *o, char tag, const line *l)
{
    char t[1] = {tag};
    put(o, t, 1);
    put(o, l->s, l->n);
    put(o, "\n", 1);
}

/* ops: 0 equal, 1 delete (a), 2 add (b) */
static int edit_script(const line *a, size_t na, const line *b, size_t nb, unsigned char **ops,
                       size_t *nops)
{
    size_t pre = 0, suf = 0;
    while (pre < na && pre < nb && same(&a[pre], &b[pre]))
        pre++;
    while (suf < na - pre && suf < nb - pre && same(&a[na - 1 - suf], &b[nb - 1 - suf]))
        suf++;
    size_t ma = na - pre - suf, mb = nb - pre - suf;
    unsigned char *v = malloc(na + nb + 1);
    if (!v)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < pre; i++)
        v[k++] = 0;
    if (ma && mb && (uint64_t)(ma + 1) * (mb + 1) <= LCS_CELLS) {
        /* LCS lengths from the end, 32-bit cells */
        uint32_t *t = calloc((ma + 1) * (mb + 1), sizeof *t);
        if (!t) {
            free(v);
            return -1;
        }
#define T(i, j) t[(i) * (mb + 1) + (j)]
        for (size_t i = ma; i-- > 0;)
            for (size_t j = mb; j-- > 0;)
                T(i, j) = same(&a[pre + i], &b[pre + j])
                              ? T(i + 1, j + 1) + 1
                              : (T(i + 1, j) >= T(i, j + 1) ? T(i + 1, j) : T(i, j + 1));
        size_t i = 0, j = 0;
        while (i < ma || j < mb) {
            if (i < ma && j < mb && same(&a[pre + i], &b[pre + j])) {
                v[k++] = 0;
                i++;
                j++;
            } else if (j >= mb || (i < ma && T(i + 1, j) >= T(i, j + 1))) {
                v[k++] = 1;
                i++;
            } else {
                v[k++] = 2;
                j++;
            }
        }
#undef T
        free(t);
    } else {
        for (size_t i = 0; i < ma; i++)
            v[k++] = 1;
        for (size_t j = 0; j < mb; j++)
            v[k++] = 2;
    }
    for (size_t i = 0; i < suf; i++)
        v[k++] = 0;
    *ops = v;
    *nops = k;
    return 0;
}

size_t mon_udiff(const char *a, size_t alen, const char *b, size_t blen, const char *path,
                 char *out, size_t cap, int *cut)
{
    struct out o = {out, 0, cap, 0};
    out[0] = 0;
    *cut = 0;
    line *la = NULL, *lb = NULL;
    unsigned char *ops = NULL;
    size_t na = split(a, alen, &la), nb = split(b, blen, &lb), nops = 0;
    if (na == (size_t)-1 || nb == (size_t)-1 || edit_script(la, na, lb, nb, &ops, &nops) < 0) {
        free(la);
        free(lb);
        *cut = 1;
        return 0;
    }
    char head[2 * MON_PATH_MAX + 64];
    int hn = snprintf(head, sizeof head, "--- a%s\n+++ b%s\n", path, path);
    put(&o, head, (size_t)hn < sizeof head ? (size_t)hn : lis_utf8_cut(head, sizeof head - 1));
    size_t i = 0; /* position in ops */
    size_t ai = 0, bi = 0;
    while (i < nops) {
        if (ops[i] == 0) {
            i++;
            ai++;
            bi++;
            continue;
        }
        /* a hunk: from CONTEXT lines before this change to CONTEXT after the
         * last change no more than 2*CONTEXT equal lines apart */
        size_t back = 0;
        while (back < CONTEXT && back < i && ops[i - 1 - back] == 0)
            back++;
        size_t start = i - back, end = i, eq = 0;
        for (size_t j = i; j < nops; j++) {
            if (ops[j])
                end = j + 1, eq = 0;
            else if (++eq > 2 * CONTEXT)
                break;
        }
        size_t stop = end;
        for (size_t c = 0; c < CONTEXT && stop < nops && ops[stop] == 0; c++)
            stop++;
        size_t as = ai - back, bs = bi - back, ac = 0, bc = 0;
        for (size_t j = start; j < stop; j++) {
            ac += ops[j] != 2;
            bc += ops[j] != 1;
        }
        char h[96];
        int n = snprintf(h, sizeof h, "@@ -%zu,%zu +%zu,%zu @@\n", ac ? as + 1 : as, ac,
                         bc ? bs + 1 : bs, bc);
        put(&o, h, (size_t)n);
        size_t x = as, y = bs;
        for (size_t j = start; j < stop; j++) {
            if (ops[j] == 0) {
                put_line(&o, ' ', &la[x++]);
                y++;
            } else if (ops[j] == 1) {
                put_line(&o, '-', &la[x++]);
            } else {
                put_line(&o, '+', &lb[y++]);
            }
        }
        ai = x;
        bi = y;
        i = stop;
        if (o.cut)
            break;
    }
    free(ops);
    free(la);
    free(lb);
    *cut = o.cut;
    return o.len;
}

int mon_is_text(const char *data, size_t len)
{
    size_t odd = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)data[i];
        if (!c)
            return 0;
        odd += c < 0x20 && c != '\n' && c != '\t' && c != '\r' && c != '\f' && c != 0x1b;
    }
    /* a few control bytes; text that is not UTF-8 (Latin-1...) is binary, so
     * every diff lis writes is UTF-8 and cut between whole lines */
    return odd * 100 <= len && lis_utf8_valid(data, len);
}
