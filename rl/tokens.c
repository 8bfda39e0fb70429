/* tokens.c - an episode's flattened token block from its turns' own ids (docs/rl.md, Tokens).
 *
 * Turn t chains onto turn t-1 when its prompt ids start with turn t-1's
 * prompt ids followed by its completion ids: the rest of its prompt is what
 * came between the turns (the observation, the template's tokens), kept with
 * mask 0. A turn that does not chain starts a new segment; nothing is ever
 * spliced from ids the endpoint did not send, since lis has no tokenizer.
 * The top-level fields hold the first segment only: a trainer that needs the
 * others takes each turn's own ids. */
#include "rl.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ids in the block at most (prompt and response): each is a cJSON node of
 * about 64 bytes in three arrays, so this keeps one result under ~200 MB. */
#define RL_TOKENS_MAX (1u << 20)
#define RL_WHY_BYTES 600

typedef struct ids {
    int32_t *v;
    size_t n;
} ids;

/* One turn's arrays, checked. */
typedef struct turn {
    ids prompt, out;
    double *lp; /* out.n logprobs, or NULL: none usable */
    int usable; /* prompt and ids are arrays of token ids */
} turn;

typedef struct block {
    cJSON *prompt_ids, *ids, *mask, *lps, *segments;
    size_t count; /* ids in the block */
    char why[RL_WHY_BYTES];
    size_t notes; /* in why */
    int too_big;
} block;

static void note(block *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(block *b, const char *fmt, ...)
{
    size_t used = strlen(b->why);
    if (++b->notes > 8 || used + 4 >= sizeof b->why) {
        if (b->notes == 9 && used + 5 < sizeof b->why)
            strcat(b->why, "; ...");
        return;
    }
    if (used)
        used += (size_t)snprintf(b->why + used, sizeof b->why - used, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->why + used, sizeof b->why - used, fmt, ap);
    va_end(ap);
}

static void turn_release(turn *t)
{
    free(t->prompt.v);
    free(t->out.v);
    free(t->lp);
    memset(t, 0, sizeof *t);
}

/* a as token ids (integers 0..INT32_MAX); 0 when it is not such an array
 * (or out of memory). */
static int read_ids(const cJSON *a, ids *o)
{
    if (!cJSON_IsArray(a))
        return 0;
    size_t n = (size_t)cJSON_GetArraySize(a), i = 0;
    if (!(o->v = malloc((n ? n : 1) * sizeof *o->v)))
        return 0;
    for (const cJSON *c = a->child; c; c = c->next) {
        double d = cJSON_IsNumber(c) ? c->valuedouble : -1;
        if (!(d >= 0 && d <= INT32_MAX && d == floor(d)))
            return 0;
        o->v[i++] = (int32_t)d;
    }
    o->n = i;
    return 1;
}

/* Turn i's tokens read into t; what is missing or malformed is noted. */
static void read_turn(const cJSON *tok, size_t i, turn *t, block *b)
{
    memset(t, 0, sizeof *t);
    if (!cJSON_IsObject(tok) || !cJSON_GetObjectItemCaseSensitive(tok, "ids")) {
        note(b, "turn %zu has no token ids", i);
        return;
    }
    if (!cJSON_GetObjectItemCaseSensitive(tok, "prompt_ids")) {
        note(b, "turn %zu has no prompt ids", i);
        return;
    }
    if (!read_ids(cJSON_GetObjectItemCaseSensitive(tok, "prompt_ids"), &t->prompt) ||
        !read_ids(cJSON_GetObjectItemCaseSensitive(tok, "ids"), &t->out)) {
        note(b, "turn %zu's ids are not arrays of token ids", i);
        turn_release(t);
        return;
    }
    t->usable = 1;
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(tok, "logprobs");
    if (!lp) {
        note(b, "turn %zu has no logprobs (0.0 in their place)", i);
        return;
    }
    size_t n = cJSON_IsArray(lp) ? (size_t)cJSON_GetArraySize(lp) : 0;
    if (!cJSON_IsArray(lp) || n != t->out.n) {
        note(b, "turn %zu's logprobs (%zu) do not match its ids (%zu): 0.0 in their place", i, n,
             t->out.n);
        return;
    }
    if (!(t->lp = malloc((n ? n : 1) * sizeof *t->lp)))
        return;
    size_t k = 0;
    for (const cJSON *c = lp->child; c; c = c->next, k++) {
        if (!cJSON_IsNumber(c) || !isfinite(c->valuedouble)) {
            note(b, "turn %zu's logprob %zu is not a number: 0.0 in their place", i, k);
            free(t->lp);
            t->lp = NULL;
            return;
        }
        t->lp[k] = c->valuedouble;
    }
}

/* Whether cur's prompt starts with prev's prompt then prev's ids; else
 * *at is the first position that differs (or the length it falls short at). */
static int chains(const turn *prev, const turn *cur, size_t *at)
{
    size_t np = prev->prompt.n, no = prev->out.n;
    for (size_t k = 0; k < np + no; k++) {
        int32_t want = k < np ? prev->prompt.v[k] : prev->out.v[k - np];
        if (k >= cur->prompt.n || cur->prompt.v[k] != want) {
            *at = k;
            return 0;
        }
    }
    return 1;
}

/* ids[from..) appended: to prompt_ids when mask < 0, else to the response
 * with mask and logprobs (lp NULL: 0.0). 0 also once over RL_TOKENS_MAX (then
 * the block is left empty), -1 when out of memory. */
static int append(block *b, const ids *v, size_t from, int mask, const double *lp)
{
    if (b->too_big)
        return 0;
    if (v->n - from > RL_TOKENS_MAX - b->count) {
        b->too_big = 1;
        return 0;
    }
    for (size_t k = from; k < v->n; k++) {
        cJSON *id = cJSON_CreateNumber(v->v[k]);
        if (!id)
            return -1;
        if (mask < 0) {
            cJSON_AddItemToArray(b->prompt_ids, id);
            continue;
        }
        cJSON *m = cJSON_CreateNumber(mask);
        cJSON *l = cJSON_CreateNumber(lp ? lp[k - from] : 0.0);
        if (!m || !l) {
            cJSON_Delete(id);
            cJSON_Delete(m);
            cJSON_Delete(l);
            return -1;
        }
        cJSON_AddItemToArray(b->ids, id);
        cJSON_AddItemToArray(b->mask, m);
        cJSON_AddItemToArray(b->lps, l);
    }
    b->count += v->n - from;
    return 0;
}

static int add_segment(block *b, size_t first, size_t last)
{
    int pair[2] = {(int)first, (int)last};
    cJSON *s = cJSON_CreateIntArray(pair, 2);
    return s && cJSON_AddItemToArray(b->segments, s) ? 0 : (cJSON_Delete(s), -1);
}

/* The walk over the turns: segments, and the first one into the block.
 * -1 when out of memory. */
static int walk(const rl_turn_tokens *turns, size_t n, block *b, size_t *usable)
{
    turn prev = {0}, cur;
    long seg = -1; /* the open segment's first turn */
    int in_first = 0, first_done = 0, rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        read_turn(turns[i].tokens, i, &cur, b);
        size_t at = 0;
        if (!cur.usable) {
            if (seg >= 0)
                rc = add_segment(b, (size_t)seg, i - 1);
            first_done |= in_first;
            in_first = 0;
            seg = -1;
        } else if (seg >= 0 && chains(&prev, &cur, &at)) {
            if (in_first) /* the gap, then the turn's own ids */
                rc = append(b, &cur.prompt, prev.prompt.n + prev.out.n, 0, NULL) < 0 ||
                             append(b, &cur.out, 0, 1, cur.lp) < 0
                         ? -1
                         : 0;
        } else {
            if (seg >= 0) {
                note(b,
                     "turn %zu's prompt ids do not start with turn %zu's prompt and ids (they "
                     "differ at position %zu)",
                     i, i - 1, at);
                rc = add_segment(b, (size_t)seg, i - 1);
            }
            first_done |= in_first;
            in_first = !first_done;
            seg = (long)i;
            if (in_first)
                rc = rc < 0 || append(b, &cur.prompt, 0, -1, NULL) < 0 ||
                             append(b, &cur.out, 0, 1, cur.lp) < 0
                         ? -1
                         : 0;
        }
        *usable += cur.usable;
        turn_release(&prev);
        prev = cur;
    }
    turn_release(&prev);
    if (rc == 0 && seg >= 0)
        rc = add_segment(b, (size_t)seg, n - 1);
    return rc;
}

cJSON *rl_tokens_flatten(const rl_turn_tokens *turns, size_t n)
{
    block b = {0};
    cJSON *o = cJSON_CreateObject();
    b.prompt_ids = cJSON_AddArrayToObject(o, "prompt_ids");
    b.ids = cJSON_AddArrayToObject(o, "response_ids");
    b.mask = cJSON_AddArrayToObject(o, "response_mask");
    b.lps = cJSON_AddArrayToObject(o, "response_logprobs");
    b.segments = cJSON_CreateArray();
    if (!o || !b.prompt_ids || !b.ids || !b.mask || !b.lps || !b.segments) {
        cJSON_Delete(o);
        cJSON_Delete(b.segments);
        return NULL;
    }
    size_t usable = 0;
    if (walk(turns, n, &b, &usable) < 0) {
        cJSON_Delete(o);
        cJSON_Delete(b.segments);
        return NULL;
    }
    int nseg = cJSON_GetArraySize(b.segments);
    if (b.too_big) {
        for (cJSON *a = o->child; a; a = a->next) /* the four arrays: emptied */
            while (a->child)
                cJSON_DeleteItemFromArray(a, 0);
        char head[RL_WHY_BYTES];
        snprintf(head, sizeof head, "the block would hold over %u ids: left empty", RL_TOKENS_MAX);
        snprintf(head + strlen(head), sizeof head - strlen(head), "%s%s", *b.why ? "; " : "",
                 b.why);
        memcpy(b.why, head, sizeof b.why);
    }
    if (!n)
        note(&b, "the episode made no turn");
    else if (!usable)
        note(&b, "no turn has token ids: ask for them with inference.sampling's "
                 "\"return_token_ids\": true and \"logprobs\": true");
    else if (nseg > 1 || usable < n)
        note(&b,
             "the top-level ids hold segments[0] (turns %d to %d) only; each turn keeps its "
             "own",
             cJSON_GetArrayItem(cJSON_GetArrayItem(b.segments, 0), 0)->valueint,
             cJSON_GetArrayItem(cJSON_GetArrayItem(b.segments, 0), 1)->valueint);
    cJSON_AddBoolToObject(o, "consistent", n && usable == n && nseg == 1 && !b.too_big);
    cJSON_AddItemToObject(o, "segments", b.segments);
    if (*b.why)
        cJSON_AddStringToObject(o, "why", b.why);
    return o;
}
