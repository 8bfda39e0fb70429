/* api.c - the episodes API's requests (docs/rl.md): groups submitted,
 * looked at, long-polled and cancelled; episodes looked at, cancelled,
 * branched, deleted and followed as events; the server's counts; the
 * inference endpoints swapped between training steps. Everything under
 * rl->mu, nothing blocking: the work is the supervisor's (sup.c). */
#include "core.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int rl_fail(cJSON **reply, int status, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    *reply = cJSON_CreateObject();
    cJSON_AddStringToObject(*reply, "message", msg);
    return status;
}

int lis_rl_owns(const char *path)
{
    static const char *roots[] = {"groups", "episodes", "envs", "rl"};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        size_t n = strlen(roots[i]);
        if (!strncmp(path, roots[i], n) && (path[n] == 0 || path[n] == '/' || path[n] == '?'))
            return 1;
    }
    return 0;
}

rl_ep *rl_find_ep(lis_rl *rl, const char *id)
{
    rl_ep *e = id[0] == 'e' ? rl_index_get(&rl->by_id, id) : NULL;
    if (!e && rl->index_short) /* an entry the index could not take: the list */
        for (e = rl->eps; e && strcmp(e->id, id); e = e->next) {
        }
    return e && !e->deleted ? e : NULL;
}

static rl_group *find_group(lis_rl *rl, const char *id)
{
    rl_group *g = id[0] == 'g' ? rl_index_get(&rl->by_id, id) : NULL;
    if (!g && rl->index_short)
        for (g = rl->groups; g && strcmp(g->id, id); g = g->next) {
        }
    return g;
}

static cJSON *ids_of(const rl_group *g)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < g->n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(g->eps[i]->id));
    return a;
}

static cJSON *submitted(const rl_group *g)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "group_id", g->id);
    cJSON_AddItemToObject(o, "episode_ids", ids_of(g));
    return o;
}

/* A new group (or a branch's) into the lists and the queue. */
static void enqueue(lis_rl *rl, rl_group *g)
{
    g->next = rl->groups;
    rl->groups = g;
    if (rl_index_put(&rl->by_id, g->id, g) < 0)
        rl->index_short = 1;
    for (size_t i = 0; i < g->n; i++) {
        g->eps[i]->next = rl->eps;
        rl->eps = g->eps[i];
        rl->neps++;
        if (rl_index_put(&rl->by_id, g->eps[i]->id, g->eps[i]) < 0)
            rl->index_short = 1;
    }
    if (rl->queue_tail)
        rl->queue_tail->qnext = g;
    else
        rl->queue_head = g;
    rl->queue_tail = g;
    rl->queued++;
    rl->generation++;
    rl_wake(rl);
}

int rl_post_group(lis_rl *rl, const cJSON *body, int step, rl_group **made, cJSON **reply)
{
    *made = NULL;
    const char *rid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "request_id"));
    if (rid) { /* a retry: the same group */
        const char *gid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rl->requests, rid));
        rl_group *g = gid ? find_group(rl, gid) : NULL;
        if (g && g->spec->req.step == step) {
            *made = g;
            *reply = submitted(g);
            return 200;
        }
    }
    lis_error serr = {0};
    if (!rl->sup_started && rl_sup_start(rl, &serr) < 0) /* the pools start at first need */
        return rl_fail(reply, 503, "%s", serr.msg);
    if (rl->queued >= (size_t)rl->o.max_queued)
        return rl_fail(reply, 429, "%zu groups wait already (the server's bound): retry later",
                       rl->queued);
    rl_limits lim = {.max_n = rl->o.max_n, .max_files_bytes = rl->o.max_files_bytes, .step = step};
    rl_request req;
    lis_error err = {0};
    if (rl_request_parse(body, &lim, &req, &err) < 0)
        return rl_fail(reply,
                       err.http_status >= 400 && err.http_status < 500 ? err.http_status : 400,
                       "%s", err.msg);
    int n = req.n;
    rl_spec *spec = rl_spec_new(&req, &err);
    rl_group *g = spec ? rl_group_new(rl, spec, n, &err) : NULL;
    rl_spec_unref(spec); /* the group holds it */
    if (!g)
        return rl_fail(reply,
                       err.http_status >= 400 && err.http_status < 500 ? err.http_status : 500,
                       "%s", err.msg);
    enqueue(rl, g);
    if (rid)
        cJSON_AddStringToObject(rl->requests, rid, g->id);
    *made = g;
    *reply = submitted(g);
    return 202;
}

static int all_done(const rl_group *g)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->eps[i]->phase != RP_DONE)
            return 0;
    return 1;
}

static cJSON *ep_json(const rl_ep *e)
{
    if (e->deleted)
        return NULL;
    if (e->phase == RP_DONE && e->result)
        return cJSON_Duplicate(e->result, 1);
    return e->phase == RP_DONE ? rl_ep_result(e) : rl_ep_brief(e);
}

static int by_index(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    double i = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(x, "index"));
    double j = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(y, "index"));
    return (i > j) - (i < j);
}

/* A group's results in index order (state_dir's are in id order). */
static void sort_by_index(cJSON *arr)
{
    int n = cJSON_GetArraySize(arr);
    cJSON **v = n > 1 ? malloc((size_t)n * sizeof *v) : NULL;
    if (!v)
        return;
    for (int i = n - 1; i >= 0; i--)
        v[i] = cJSON_DetachItemFromArray(arr, i);
    qsort(v, (size_t)n, sizeof *v, by_index);
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, v[i]);
    free(v);
}

/* The finished results of a group known only from state_dir (a restart). */
static int kept_group(lis_rl *rl, const char *id, cJSON **reply)
{
    cJSON *eps = cJSON_CreateArray();
    const cJSON *r;
    cJSON_ArrayForEach(r, rl->kept)
    {
        cJSON *res = NULL;
        lis_error err = {0};
        if (cJSON_IsString(r) && !strcmp(r->valuestring, id) &&
            rl_store_get(rl->state_dir, r->string, &res, &err) == 0)
            cJSON_AddItemToArray(eps, res);
    }
    sort_by_index(eps);
    if (!cJSON_GetArraySize(eps)) {
        cJSON_Delete(eps);
        return rl_fail(reply, 404, "no such group: %s", id);
    }
    *reply = cJSON_CreateObject();
    cJSON_AddStringToObject(*reply, "group_id", id);
    cJSON_AddBoolToObject(*reply, "done", 1);
    cJSON_AddItemToObject(*reply, "episodes", eps);
    return 200;
}

static int group_results(lis_rl *rl, const char *id, const lis_rl_req *q, cJSON **reply)
{
    rl_group *g = find_group(rl, id);
    if (!g)
        return kept_group(rl, id, reply);
    int done = all_done(g);
    if (!done && q->wait > 0 && !q->final)
        return 0;
    *reply = cJSON_CreateObject();
    cJSON_AddStringToObject(*reply, "group_id", g->id);
    cJSON_AddBoolToObject(*reply, "done", done);
    cJSON *eps = cJSON_AddArrayToObject(*reply, "episodes");
    for (size_t i = 0; i < g->n; i++) {
        cJSON *j = ep_json(g->eps[i]);
        if (j)
            cJSON_AddItemToArray(eps, j);
    }
    return 200;
}

static int group_get(lis_rl *rl, const char *id, cJSON **reply)
{
    rl_group *g = find_group(rl, id);
    if (!g)
        return rl_fail(reply, 404, "no such group: %s", id);
    *reply = cJSON_CreateObject();
    cJSON_AddStringToObject(*reply, "group_id", g->id);
    cJSON_AddStringToObject(*reply, "status", rl_phase_name(g->phase));
    cJSON_AddItemToObject(*reply, "episode_ids", ids_of(g));
    const cJSON *labels = g->spec->req.labels;
    cJSON_AddItemToObject(*reply, "labels",
                          labels ? cJSON_Duplicate(labels, 1) : cJSON_CreateNull());
    if (g->branch_of[0])
        cJSON_AddStringToObject(*reply, "branch_of", g->branch_of);
    cJSON *c = cJSON_AddObjectToObject(*reply, "counts");
    size_t by[RP_DONE + 1] = {0};
    for (size_t i = 0; i < g->n; i++)
        by[g->eps[i]->phase]++;
    for (int p = RP_QUEUED; p <= RP_DONE; p++)
        cJSON_AddNumberToObject(c, rl_phase_name((rl_phase)p), (double)by[p]);
    return 200;
}

/* Ends an episode not done (idempotent): one still queued ends at once. */
void rl_cancel_ep(lis_rl *rl, rl_ep *e)
{
    if (e->phase == RP_DONE || e->cancel_asked)
        return;
    e->cancel_asked = 1;
    rl_ep_stop(e, AGENT_STOP_CANCELLED, "cancelled");
    if (e->phase == RP_QUEUED) { /* nothing of it exists yet: it ends now */
        e->status = RS_CANCELLED;
        e->stage = RST_SETUP;
        snprintf(e->error, sizeof e->error, "cancelled");
        rl_ep_finish(e);
    }
    rl->generation++;
    rl_wake(rl);
}

static int group_cancel(lis_rl *rl, const char *id, cJSON **reply)
{
    rl_group *g = find_group(rl, id);
    if (!g)
        return rl_fail(reply, 404, "no such group: %s", id);
    g->cancel_asked = 1;
    for (size_t i = 0; i < g->n; i++)
        rl_cancel_ep(rl, g->eps[i]);
    return group_get(rl, id, reply);
}

static int ep_get(lis_rl *rl, const char *id, const lis_rl_req *q, cJSON **reply)
{
    rl_ep *e = rl_find_ep(rl, id);
    if (!e) {
        lis_error err = {0};
        if (!cJSON_GetObjectItemCaseSensitive(rl->kept, id) ||
            rl_store_get(rl->state_dir, id, reply, &err) < 0)
            return rl_fail(reply, 404, "no such episode: %s", id);
        return 200;
    }
    if (e->phase != RP_DONE && q->wait > 0 && !q->final)
        return 0;
    *reply = e->phase == RP_DONE && e->result ? cJSON_Duplicate(e->result, 1) : rl_ep_result(e);
    return 200;
}

static int ep_events(lis_rl *rl, const char *id, const lis_rl_req *q, cJSON **reply)
{
    rl_ep *e = rl_find_ep(rl, id);
    if (!e) {
        cJSON *k = NULL;
        lis_error err = {0};
        if (!cJSON_GetObjectItemCaseSensitive(rl->kept, id) ||
            rl_store_get(rl->state_dir, id, &k, &err) < 0)
            return rl_fail(reply, 404, "no such episode: %s", id);
        /* known from state_dir: its one event is the result */
        *reply = cJSON_CreateObject();
        cJSON *evs = cJSON_AddArrayToObject(*reply, "events");
        if (q->last_event_id < 1) {
            cJSON *v = cJSON_CreateObject();
            cJSON_AddNumberToObject(v, "id", 1);
            cJSON_AddStringToObject(v, "event", "final");
            cJSON_AddItemToObject(v, "data", k);
            k = NULL;
            cJSON_AddItemToArray(evs, v);
        }
        cJSON_Delete(k);
        cJSON_AddBoolToObject(*reply, "final", 1);
        return 200;
    }
    size_t i = 0;
    while (i < e->nevents && e->events[i].id <= q->last_event_id)
        i++;
    int done = e->phase == RP_DONE;
    if (i == e->nevents && !done && !q->final)
        return 0;
    *reply = cJSON_CreateObject();
    cJSON *evs = cJSON_AddArrayToObject(*reply, "events");
    for (size_t n = 0; i < e->nevents && n < 64; i++, n++) {
        cJSON_AddItemToArray(evs, rl_event_json(e, &e->events[i]));
    }
    /* the final event is an episode's last (rl_ep_finish adds it as it ends) */
    cJSON_AddBoolToObject(*reply, "final", done && i == e->nevents);
    return 200;
}

/* A branch's history after turn k-1: each turn's tail replaces the message
 * the history ended with before it and adds what the turn added. */
static cJSON *history_after(const rl_ep *e, int k)
{
    cJSON *h = cJSON_CreateArray();
    for (int t = 0; h && t < k; t++) {
        if (t > 0 && cJSON_GetArraySize(h) > 0)
            cJSON_DeleteItemFromArray(h, cJSON_GetArraySize(h) - 1);
        const cJSON *m;
        cJSON_ArrayForEach(m, e->turns[t].tail) cJSON_AddItemToArray(h, cJSON_Duplicate(m, 1));
    }
    return h;
}

static int branch_check(const lis_rl *rl, const rl_ep *e, const cJSON *body, int *k, int *n,
                        cJSON **reply)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, body)
    {
        if (strcmp(it->string, "at_step") && strcmp(it->string, "n") &&
            strcmp(it->string, "sampling") && strcmp(it->string, "seeds") &&
            strcmp(it->string, "request_id"))
            return rl_fail(reply, 400, "unknown key %s (at_step, n, sampling, seeds, request_id)",
                           it->string);
    }
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(body, "at_step");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(body, "n");
    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(body, "sampling");
    const cJSON *sd = cJSON_GetObjectItemCaseSensitive(body, "seeds");
    long long kv, nv = 1;
    if (rl_json_int(ks, 0, 1000000, &kv) < 0)
        return rl_fail(reply, 400, "at_step must be an integer >= 0 (turns counted from 0)");
    if (ns && rl_json_int(ns, -(1ll << 53), 1ll << 53, &nv) < 0)
        return rl_fail(reply, 400, "n must be an integer");
    if (nv < 1 || nv > rl->o.max_n)
        return rl_fail(reply, 422, "n must be 1..%d (the server's cap), not %lld", rl->o.max_n, nv);
    *k = (int)kv;
    *n = (int)nv;
    if (sm && !cJSON_IsObject(sm))
        return rl_fail(reply, 400, "sampling must be an object");
    if (sd && (!cJSON_IsArray(sd) || cJSON_GetArraySize(sd) != *n))
        return rl_fail(reply, 400, "seeds must be an array of n integers");
    long long seed;
    cJSON_ArrayForEach(it, sd) if (rl_json_int(it, -(1ll << 53), 1ll << 53, &seed) <
                                   0) return rl_fail(reply, 400,
                                                     "seeds must be integers within 2^53");
    if ((size_t)*k > e->nturns)
        return rl_fail(reply, 409,
                       "episode %s has made %zu turns: a branch at step %d needs turns 0..%d",
                       e->id, e->nturns, *k, *k - 1);
    if ((size_t)*k >= e->nsnaps || !e->snaps[*k])
        return rl_fail(reply, 409,
                       "episode %s kept no snapshot of its files after turn %d: submit its group with "
                       "keep_snapshots \"every_step\" or [%d]",
                       e->id, *k - 1, *k);
    return 0;
}

static int ep_branch(lis_rl *rl, const char *id, const cJSON *body, cJSON **reply)
{
    rl_ep *e = rl_find_ep(rl, id);
    rl_group *made;
    if (!e)
        return rl_fail(reply, 404, "no such episode: %s", id);
    return rl_ep_branch(rl, e, body, &made, reply);
}

int rl_ep_branch(lis_rl *rl, rl_ep *e, const cJSON *body, rl_group **made, cJSON **reply)
{
    *made = NULL;
    if (!cJSON_IsObject(body))
        return rl_fail(reply, 400, "the body must be a JSON object {\"at_step\", \"n\", ...}");
    /* a retry of the same branch (its request_id): the same episodes */
    const char *rid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "request_id"));
    char key[300] = "";
    if (rid) {
        if (strlen(rid) > 200)
            return rl_fail(reply, 400, "request_id: at most 200 bytes");
        snprintf(key, sizeof key, "branch:%s", rid);
        const char *gid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rl->requests, key));
        rl_group *prev = gid ? find_group(rl, gid) : NULL;
        if (prev) {
            *made = prev;
            *reply = submitted(prev);
            return 200;
        }
    }
    int k = 0, n = 0;
    int st = branch_check(rl, e, body, &k, &n, reply);
    if (st)
        return st;
    lis_error err = {0};
    rl_group *g = rl_group_new(rl, e->g->spec, n, &err);
    if (!g)
        return rl_fail(reply, 500, "%s", err.msg);
    snprintf(g->branch_of, sizeof g->branch_of, "%s", e->id);
    g->deadline_s = e->g->deadline_s;
    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(body, "sampling");
    const cJSON *sd = cJSON_GetObjectItemCaseSensitive(body, "seeds");
    for (size_t i = 0; i < g->n; i++) {
        rl_ep *c = g->eps[i];
        c->at_step = k;
        snprintf(c->parent_id, sizeof c->parent_id, "%s", e->id);
        c->start_messages = history_after(e, k);
        c->turns = calloc(k ? (size_t)k : 1, sizeof *c->turns);
        c->capturns = k ? (size_t)k : 1;
        for (int t = 0; c->turns && t < k; t++) { /* turns 0..k-1 as the parent made them */
            rl_turn *d = &c->turns[t], *s = &e->turns[t];
            *d = *s;
            d->step = cJSON_Duplicate(s->step, 1);
            d->tokens = s->tokens ? cJSON_Duplicate(s->tokens, 1) : NULL;
            d->tail = cJSON_Duplicate(s->tail, 1);
            c->nturns++;
        }
        c->nmsg = (size_t)cJSON_GetArraySize(c->start_messages);
        for (int s = 0; s <= k && (size_t)s < c->nsnaps && (size_t)s < e->nsnaps; s++)
            if ((c->snaps[s] = e->snaps[s]))
                c->snaps[s]->refs++; /* the child's, until it is deleted */
        c->sampling = sm ? cJSON_Duplicate(sm, 1) : NULL;
        c->has_seed = sd != NULL || e->has_seed;
        c->seed = sd ? (long long)cJSON_GetArrayItem(sd, (int)i)->valuedouble : e->seed;
        for (int t = 0; t < k && c->turns; t++) /* what turns 0..k-1 used */
            rl_ep_count_caps(c, c->turns[t].step);
    }
    enqueue(rl, g);
    if (key[0])
        cJSON_AddStringToObject(rl->requests, key, g->id);
    *made = g;
    *reply = submitted(g);
    return 202;
}

/* What an episode holds of the store, let go (its snapshots). Under mu. */
static void release_snaps(rl_ep *e)
{
    for (size_t k = 0; k < e->nsnaps; k++)
        if (e->snaps[k]) {
            int own = !(k == 0 && e->at_step < 0 && e->g->spec->req.snaps == RL_SNAP_NONE);
            if (own)
                e->snaps[k]->refs--;
            e->snaps[k] = NULL;
        }
}

static int ep_delete(lis_rl *rl, const char *id, cJSON **reply)
{
    rl_ep *e = rl_find_ep(rl, id);
    lis_error err = {0};
    if (!e) {
        if (!cJSON_GetObjectItemCaseSensitive(rl->kept, id))
            return rl_fail(reply, 404, "no such episode: %s", id);
        cJSON_DeleteItemFromObjectCaseSensitive(rl->kept, id);
    } else {
        if (e->phase != RP_DONE)
            return rl_fail(reply, 409, "episode %s is %s: cancel it first", id,
                           rl_phase_name(e->phase));
        release_snaps(e);
        rl_ep_drop(e);
        e->deleted = 1;
        rl_wake(rl); /* the sweep removes what nothing wants now */
    }
    if (rl_store_del(rl->state_dir, id, &err) < 0 && err.code != ENOENT)
        return rl_fail(reply, 500, "%s", err.msg);
    rl->generation++;
    *reply = cJSON_CreateObject();
    cJSON_AddStringToObject(*reply, "episode_id", id);
    cJSON_AddBoolToObject(*reply, "deleted", 1);
    return 200;
}

static int status(lis_rl *rl, cJSON **reply)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *g = cJSON_AddObjectToObject(o, "groups");
    size_t by[RP_DONE + 1] = {0};
    for (rl_group *x = rl->groups; x; x = x->next)
        by[x->phase]++;
    for (int p = RP_QUEUED; p <= RP_DONE; p++)
        cJSON_AddNumberToObject(g, rl_phase_name((rl_phase)p), (double)by[p]);
    cJSON *ep = cJSON_AddObjectToObject(o, "episodes");
    memset(by, 0, sizeof by);
    for (rl_ep *e = rl->eps; e; e = e->next)
        by[e->phase] += !e->deleted;
    for (int p = RP_QUEUED; p <= RP_DONE; p++)
        cJSON_AddNumberToObject(ep, rl_phase_name((rl_phase)p), (double)by[p]);
    cJSON_AddNumberToObject(o, "sandboxes", (double)rl->live);
    cJSON_AddNumberToObject(o, "max_live", rl->o.max_live);
    cJSON_AddNumberToObject(o, "free",
                            rl->live < (size_t)rl->o.max_live
                                ? (double)((size_t)rl->o.max_live - rl->live)
                                : 0);
    /* the host's memory in use (MemTotal - MemAvailable: lis, its sandboxes and the rest),
     * what is available, and what the live sandboxes may use at most */
    unsigned long long total = 0, avail = rl_mem_available(&total);
    cJSON_AddNumberToObject(o, "memory_bytes", total > avail ? (double)(total - avail) : 0);
    cJSON_AddNumberToObject(o, "memory_available_bytes", (double)avail);
    cJSON_AddNumberToObject(o, "memory_limit_bytes",
                            (double)rl->live * (double)rl->o.limits.memory_bytes);
    cJSON_AddNumberToObject(o, "admit_bytes_per_sandbox", (double)rl->o.admit_bytes);
    size_t snaps = 0;
    for (rl_snap *s = rl->snaps; s; s = s->next)
        snaps++;
    cJSON_AddNumberToObject(o, "snapshots", (double)snaps);
    cJSON_AddStringToObject(o, "weight_version", rl->weight_version);
    cJSON *eps = cJSON_AddArrayToObject(o, "endpoints");
    for (size_t i = 0; i < rl->nendpoints; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "base_url", rl->endpoints[i].base_url);
        cJSON_AddNumberToObject(x, "outstanding", (double)rl->endpoints[i].outstanding);
        cJSON_AddItemToArray(eps, x);
    }
    *reply = o;
    return 200;
}

static void endpoints_free(rl_endpoint *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].base_url);
        free(v[i].model);
        free(v[i].api_key);
    }
    free(v);
}

static int put_inference(lis_rl *rl, const cJSON *body, cJSON **reply)
{
    const cJSON *it, *eps = cJSON_GetObjectItemCaseSensitive(body, "endpoints");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(body, "weight_version");
    if (!cJSON_IsObject(body))
        return rl_fail(reply, 400,
                       "the body must be {\"endpoints\": [...], \"weight_version\": ...}");
    cJSON_ArrayForEach(it, body) if (
        strcmp(it->string, "endpoints") &&
        strcmp(it->string,
               "weight_version")) return rl_fail(reply, 400,
                                                 "unknown key %s (endpoints, weight_version)",
                                                 it->string);
    if (eps && !cJSON_IsArray(eps))
        return rl_fail(reply, 400,
                       "endpoints must be an array of {\"base_url\", \"model\", \"api_key\"}");
    if (ver && (!cJSON_IsString(ver) || strlen(ver->valuestring) >= sizeof rl->weight_version))
        return rl_fail(reply, 400, "weight_version must be a string of at most %zu bytes",
                       sizeof rl->weight_version - 1);
    size_t n = (size_t)cJSON_GetArraySize(eps);
    if (n > 256)
        return rl_fail(reply, 422, "at most 256 endpoints");
    rl_endpoint *v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return rl_fail(reply, 500, "out of memory");
    size_t i = 0;
    cJSON_ArrayForEach(it, eps)
    {
        const char *u = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "base_url"));
        const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "model"));
        const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "api_key"));
        const cJSON *f;
        cJSON_ArrayForEach(f, it) if (strcmp(f->string, "base_url") && strcmp(f->string, "model") &&
                                      strcmp(f->string, "api_key"))
        {
            endpoints_free(v, i);
            return rl_fail(reply, 400, "unknown key endpoints[%zu].%s", i, f->string);
        }
        if (!u || (strncmp(u, "http://", 7) && strncmp(u, "https://", 8)) || strlen(u) > 2000) {
            endpoints_free(v, i);
            return rl_fail(reply, 400, "endpoints[%zu].base_url must be an http(s) URL", i);
        }
        v[i].base_url = strdup(u);
        v[i].model = m ? strdup(m) : NULL;
        v[i].api_key = k ? strdup(k) : NULL;
        i++;
    }
    if (eps) { /* a turn in flight finishes where it started: its count is dropped with it */
        endpoints_free(rl->endpoints, rl->nendpoints);
        rl->endpoints = v;
        rl->nendpoints = n;
        rl->endpoints_epoch++;
    } else {
        free(v);
    }
    if (ver)
        snprintf(rl->weight_version, sizeof rl->weight_version, "%s", ver->valuestring);
    rl->generation++;
    return status(rl, reply);
}

/* "episodes/ID/op" into id and op ("" when none); -1 when malformed. */
static int split(const char *rest, char *id, size_t len, const char **op)
{
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (!n || n >= len)
        return -1;
    memcpy(id, rest, n);
    id[n] = 0;
    *op = slash ? slash + 1 : "";
    return strchr(*op, '/') ? -1 : 0;
}

int rl_api_route(lis_rl *rl, const lis_rl_req *q, cJSON **reply)
{
    const char *m = q->method, *p = q->path, *op;
    char id[RL_ID_LEN + 8];
    int get = !strcmp(m, "GET"), post = !strcmp(m, "POST");
    rl_group *made;
    if (!strcmp(p, "groups") && post)
        return rl_post_group(rl, q->body, 0, &made, reply);
    if (!strcmp(p, "rl/status") && get)
        return status(rl, reply);
    if (!strcmp(p, "rl/inference") && !strcmp(m, "PUT"))
        return put_inference(rl, q->body, reply);
    if (!strncmp(p, "groups/", 7) && split(p + 7, id, sizeof id, &op) == 0) {
        if (!*op && get)
            return group_get(rl, id, reply);
        if (!strcmp(op, "results") && get)
            return group_results(rl, id, q, reply);
        if (!strcmp(op, "cancel") && post)
            return group_cancel(rl, id, reply);
    }
    if (!strncmp(p, "episodes/", 9) && split(p + 9, id, sizeof id, &op) == 0) {
        if (!*op && get)
            return ep_get(rl, id, q, reply);
        if (!*op && !strcmp(m, "DELETE"))
            return ep_delete(rl, id, reply);
        if (!strcmp(op, "events") && get)
            return ep_events(rl, id, q, reply);
        if (!strcmp(op, "cancel") && post) {
            rl_ep *e = rl_find_ep(rl, id);
            if (!e)
                return rl_fail(reply, 404, "no such episode: %s", id);
            rl_cancel_ep(rl, e);
            *reply = rl_ep_brief(e);
            return 200;
        }
        if (!strcmp(op, "branch") && post)
            return ep_branch(rl, id, q->body, reply);
    }
    return rl_fail(reply, 404, "no such episodes API route: %s %s", m, p);
}

/* The index of what state_dir keeps: id -> its group's id (the results
 * stay on disk until asked for). */
static int load_kept(void *arg, const char *id, cJSON *result)
{
    lis_rl *rl = arg;
    const char *gid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(result, "group_id"));
    cJSON_AddStringToObject(rl->kept, id, gid ? gid : "");
    cJSON_Delete(result);
    return 0;
}

int lis_rl_open(const lis_rl_opts *o, lis_rl **out, lis_error *err)
{
    *out = NULL;
    lis_rl *rl = calloc(1, sizeof *rl);
    if (!rl)
        return lis_fail(err, ENOMEM, "the episodes API");
    rl->o = *o;
    rl->o.max_n = o->max_n > 0 ? o->max_n : 512;
    rl->o.max_live = o->max_live > 0 ? o->max_live : 512;
    rl->o.max_queued = o->max_queued > 0 ? o->max_queued : 4096;
    rl->o.results_mem = o->results_mem > 0 ? o->results_mem : 4096;
    rl->o.max_files_bytes = o->max_files_bytes ? o->max_files_bytes : 64u << 20;
    rl->o.admit_bytes = o->admit_bytes ? o->admit_bytes : 32u << 20;
    rl->wake_efd = rl->epfd = -1;
    pthread_mutex_init(&rl->mu, NULL);
    rl->state_dir = strdup(o->state_dir ? o->state_dir : "");
    rl->data_dir = strdup(o->data_dir ? o->data_dir : "");
    rl->default_image = strdup(o->default_image ? o->default_image : "lis-agent:latest");
    rl->kept = cJSON_CreateObject();
    rl->requests = cJSON_CreateObject();
    size_t bad = 0;
    if (!rl->state_dir || !rl->data_dir || !rl->default_image || !rl->kept || !rl->requests) {
        lis_fail(err, ENOMEM, "the episodes API");
        goto fail;
    }
    if (rl_store_each(rl->state_dir, load_kept, rl, &bad, err) < 0 && err->code != ENOENT) {
        lis_wrap(err, "the episodes API's results in %s", rl->state_dir);
        goto fail;
    }
    if (bad && o->log)
        fprintf(o->log, "lis serve: %zu unreadable results in %s/episodes left as they are\n", bad,
                rl->state_dir);
    *out = rl;
    return 0;
fail:
    lis_rl_close(rl);
    return -1;
}

void lis_rl_close(lis_rl *rl)
{
    if (!rl)
        return;
    rl_sup_stop(rl);
    for (rl_group *g = rl->groups, *next; g; g = next) {
        next = g->next;
        rl_group_free(g);
    }
    endpoints_free(rl->endpoints, rl->nendpoints);
    while (rl->snaps) { /* what the last sweep could not remove */
        rl_snap *s = rl->snaps;
        rl->snaps = s->next;
        free(s);
    }
    if (rl->wake_efd >= 0)
        close(rl->wake_efd);
    if (rl->epfd >= 0)
        close(rl->epfd);
    cJSON_Delete(rl->kept);
    cJSON_Delete(rl->requests);
    rl_index_free(&rl->by_id);
    free(rl->state_dir);
    free(rl->data_dir);
    free(rl->default_image);
    pthread_mutex_destroy(&rl->mu);
    free(rl);
}
