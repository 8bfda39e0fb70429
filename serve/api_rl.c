/* api_rl.c - the episodes API (docs/rl.md) on the native API: rl/ (lis_rl.h)
 * is opened when the server starts and closed when it stops, before the
 * containers go; every /lis/v1/ path it owns (lis_rl_owns) goes to
 * lis_rl_handle with the method, the JSON body, ?wait=S and the event id to
 * resume after (Last-Event-ID or ?after=).
 *
 * lis_rl_handle never blocks: 0 means "not yet". Such a request (a long-poll)
 * is suspended and kept as a waiter; rl's notify callback (any thread) writes
 * to an eventfd the loop watches, and each wake-up re-runs every waiter; when
 * its wait ends it runs once more with final = 1 (rl answers with what there
 * is). GET episodes/{id}/events is a server-sent events stream (sse.c) fed
 * from rl's {"events": [...], "final": bool} replies, pulled only while the
 * client keeps up (the backlog under SV_STREAM_HIGH), ending after the final
 * event. Long-polls and streams are both waiters, RL_WAITERS_MAX at most.
 * libmicrohttpd does not look at a suspended connection, so a client that
 * hangs up is found by a look at its socket once a second (sv_conn_gone; a
 * client that half-closes its side counts as gone). */
#include "lis_rl.h"
#include "serve.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define RL_WAIT_MAX 600.0    /* ?wait=S: seconds at most */
#define RL_WAITERS_MAX 1024  /* long-polls and event streams at once */
#define RL_STREAM_WAIT 600.0 /* what an events stream's calls say they wait */

typedef struct rl_waiter rl_waiter;

struct sv_rl {
    sv_server *s;
    lis_rl *rl;
    int efd; /* rl's notify: written from any thread, read on the loop */
    sv_watch w;
    sv_timer look;      /* once a second while anyone waits: clients that hung up */
    rl_waiter *waiters; /* long-polls and streams rl may answer more to */
    unsigned nwaiters;
};

struct rl_waiter {
    sv_rl *r;
    sv_req *q; /* NULL once the request is over */
    lis_rl_req rq;
    char method[8];
    char *path;     /* rq.path */
    cJSON *body;    /* rq.body */
    sv_timer timer; /* a long-poll's wait */
    int stream;     /* an events stream (else a long-poll) */
    int listed;     /* in r->waiters */
    int refs;       /* a stream: its response and its request */
    sv_sse sse;     /* a stream's events */
    rl_waiter *next;
    char memo[LIS_RL_MEMO]; /* rq.memo: what its first call did (step mode) */
};

static void list_add(rl_waiter *w);
static void pull(rl_waiter *w);

static void notify(void *arg)
{
    sv_rl *r = arg;
    uint64_t one = 1;
    /* EAGAIN: the counter is full, a wake-up is pending anyway */
    if (write(r->efd, &one, sizeof one) < 0 && errno != EAGAIN) {
    }
}

static void waiter_free(rl_waiter *w)
{
    free(w->path);
    cJSON_Delete(w->body);
    free(w->sse.buf);
    free(w);
}

static void unlist(rl_waiter *w)
{
    if (!w->listed)
        return;
    for (rl_waiter **p = &w->r->waiters; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    w->listed = 0;
    w->r->nwaiters--;
    sv_timer_cancel(w->r->s->loop, &w->timer);
}

/* ---- long-polls ------------------------------------------------------------------------- */

/* The answer of a long-poll (reply taken); w is freed. */
static void poll_finish(rl_waiter *w, unsigned status, cJSON *reply)
{
    unlist(w);
    sv_req *q = w->q;
    q->on_complete = NULL;
    q->owner = NULL;
    if (status)
        sv_req_finish(q, status, sv_resp_json(reply));
    else {
        cJSON_Delete(reply);
        sv_req_finish_error(q, 500, "the episodes API gave no answer to %s /lis/v1/%s", w->method,
                            w->path);
    }
    waiter_free(w);
}

/* Asks rl again; answers unless it is still "not yet" (and not final). */
static void poll_again(rl_waiter *w, int final)
{
    cJSON *reply = NULL;
    w->rq.final = final;
    int st = lis_rl_handle(w->r->rl, &w->rq, &reply);
    if (st == 0 && !final)
        return;
    poll_finish(w, (unsigned)st, reply);
}

static void poll_expired(void *arg) { poll_again(arg, 1); }

/* The request ended without its answer (the client went, the server stops). */
static void poll_req_done(sv_req *q)
{
    rl_waiter *w = q->owner;
    unlist(w);
    waiter_free(w);
}

/* ---- events streams ----------------------------------------------------------------------- */

static void stream_unref(rl_waiter *w)
{
    if (--w->refs == 0)
        waiter_free(w);
}

static void stream_end(rl_waiter *w)
{
    unlist(w);
    sv_sse_end(&w->sse);
}

static void stream_response_freed(void *owner) { stream_unref(owner); }

static void stream_req_done(sv_req *q)
{
    rl_waiter *w = q->owner;
    unlist(w);
    w->q = NULL;
    sv_sse_req_done(&w->sse);
    stream_unref(w);
}

static void stream_room(void *owner)
{
    rl_waiter *w = owner;
    if (w->sse.q)
        pull(w);
}

/* One of rl's answers into the stream (reply taken): 1 to ask for more now,
 * 0 to wait (for notify, or room) or because the stream ended. */
static int stream_apply(rl_waiter *w, int st, cJSON *reply)
{
    if (st == 0)
        return 0;
    if (st != 200) { /* the episode went (a DELETE): the error as the last event */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "status", st);
        const char *m = sv_jstr(reply, "message");
        cJSON_AddStringToObject(o, "message", m ? m : "the episodes API failed");
        cJSON_Delete(reply);
        sv_sse_event(&w->sse, -1, "error", o);
        stream_end(w);
        return 0;
    }
    cJSON *evs = cJSON_GetObjectItemCaseSensitive(reply, "events"), *ev;
    int n = 0, final = sv_jbool(reply, "final");
    if (!cJSON_IsArray(evs))
        evs = NULL;
    cJSON_ArrayForEach(ev, evs)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(ev, "id");
        const char *name = sv_jstr(ev, "event");
        cJSON *data = cJSON_DetachItemFromObjectCaseSensitive(ev, "data");
        /* ids only grow (a resume relies on it); a name is one line */
        if (!cJSON_IsNumber(id) || id->valuedouble <= (double)w->rq.last_event_id || !name ||
            strpbrk(name, "\r\n")) {
            cJSON_Delete(data);
            continue;
        }
        w->rq.last_event_id = (long)id->valuedouble;
        sv_sse_event(&w->sse, w->rq.last_event_id, name, data ? data : cJSON_CreateNull());
        n++;
    }
    cJSON_Delete(reply);
    if (final) {
        stream_end(w);
        return 0;
    }
    return n > 0 && !sv_sse_full(&w->sse);
}

/* Events while the client keeps up and rl has them. */
static void pull(rl_waiter *w)
{
    for (int more = 1; more && w->listed && w->sse.q && !w->sse.paused;) {
        cJSON *reply = NULL;
        int st = lis_rl_handle(w->r->rl, &w->rq, &reply);
        more = stream_apply(w, st, reply);
    }
}

/* ---- the waiters ----------------------------------------------------------------------------- */

static void on_notify(void *arg, uint32_t ev)
{
    sv_rl *r = arg;
    uint64_t n;
    while (read(r->efd, &n, sizeof n) == (ssize_t)sizeof n)
        ;
    for (rl_waiter *w = r->waiters, *next; w; w = next) {
        next = w->next; /* w may go; no other does */
        if (w->stream)
            pull(w);
        else
            poll_again(w, 0);
    }
}

/* Once a second while anyone waits: a waiter whose client hung up goes. */
static void look(void *arg)
{
    sv_rl *r = arg;
    for (rl_waiter *w = r->waiters, *next; w; w = next) {
        next = w->next;
        if (!w->q || !w->q->suspended || !sv_conn_gone(w->q->cn))
            continue;
        if (w->stream)
            stream_end(w); /* resumed: libmicrohttpd sees the hang-up and ends it */
        else
            poll_finish(w, 400, NULL);
    }
    if (r->waiters)
        sv_timer_arm(r->s->loop, &r->look, 1.0, look, r);
}

static void list_add(rl_waiter *w)
{
    sv_rl *r = w->r;
    w->next = r->waiters;
    r->waiters = w;
    w->listed = 1;
    if (!r->nwaiters++)
        sv_timer_arm(r->s->loop, &r->look, 1.0, look, r);
}

/* ---- open, close ------------------------------------------------------------------------------ */

int sv_rl_owns(const char *rest) { return lis_rl_owns(rest); }

int sv_rl_start(sv_server *s, lis_error *err)
{
    sv_rl *r = calloc(1, sizeof *r);
    if (!r)
        return lis_oom(err);
    r->s = s;
    r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->efd < 0 || sv_loop_watch(s->loop, &r->w, r->efd, EPOLLIN, on_notify, r) < 0) {
        lis_fail_errno(err, "the episodes API's wake-up (eventfd)");
        goto fail;
    }
    /* the episodes' effects: the hub the native API's sandboxes share; without
     * seccomp notifications the episodes are not monitored (one warning) */
    lis_error herr = {0};
    if (!s->hub && !(s->hub = lis_monitor_hub_new(&herr)))
        fprintf(stderr, "lis serve: warning: episodes record no effects: %s\n", herr.msg);
    char state[4200];
    /* beside the store, not in the run dir (a tmpfs): results outlive a reboot */
    snprintf(state, sizeof state, "%s/rl", s->data_dir);
    lis_rl_opts o = {.ctx = s->ctx,
                     .data_dir = s->data_dir,
                     .state_dir = state,
                     .limits = s->opts.limits,
                     .net = s->opts.net,
                     .max_n = s->opts.rl_max_n,
                     .max_live = s->opts.rl_max_live,
                     .results_mem = s->opts.rl_results_mem,
                     .hub = s->hub,
                     .notify = notify,
                     .notify_arg = r};
    if (lis_host_mkdir_p(state, 0700, err) < 0 || lis_rl_open(&o, &r->rl, err) < 0) {
        lis_wrap(err, "the episodes API (%s)", state);
        goto fail;
    }
    s->rl = r;
    return 0;
fail:
    sv_loop_unwatch(s->loop, &r->w);
    if (r->efd >= 0)
        close(r->efd);
    free(r);
    return -1;
}

void sv_rl_stop(sv_server *s)
{
    sv_rl *r = s->rl;
    if (!r)
        return;
    while (r->waiters) {
        rl_waiter *w = r->waiters;
        if (w->stream) {
            /* best effort: the connection closes soon after */
            sv_sse_event(&w->sse, -1, "error",
                         cJSON_Parse(
                             "{\"status\":503,\"message\":\"lis serve is shutting down\"}"));
            stream_end(w);
        } else {
            unlist(w);
            w->q->on_complete = NULL;
            sv_req_finish_error(w->q, 503, "lis serve is shutting down");
            waiter_free(w);
        }
    }
    sv_timer_cancel(s->loop, &r->look);
    /* every episode ends and its sandboxes go; notify may still be called */
    lis_rl_close(r->rl);
    r->rl = NULL;
    sv_loop_unwatch(s->loop, &r->w);
    close(r->efd);
    free(r);
    s->rl = NULL;
}

int sv_rl_busy(sv_server *s)
{
    if (!s->rl)
        return 0;
    lis_rl_req q = {.method = "GET", .path = "rl/status", .last_event_id = -1};
    cJSON *reply = NULL, *g;
    int busy = lis_rl_handle(s->rl->rl, &q, &reply) != 200; /* in doubt, busy */
    cJSON *groups = cJSON_GetObjectItemCaseSensitive(reply, "groups");
    if (!cJSON_IsObject(groups))
        groups = NULL;
    cJSON_ArrayForEach(g, groups) { busy |= cJSON_IsNumber(g) && g->valuedouble > 0; }
    cJSON_Delete(reply);
    return busy;
}

/* ---- requests --------------------------------------------------------------------------------- */

/* An event id (Last-Event-ID, ?after=): 0.. ; -1 when malformed. */
static long event_id(const char *v)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    return !*v || *end || errno || x < 0 ? -1 : x;
}

/* rl's answer now (reply taken; none: an empty body, as for a 204). */
static enum MHD_Result answer(sv_req *q, int st, cJSON *reply)
{
    return reply ? sv_reply_json(q, (unsigned)st, reply) : sv_reply_status(q, (unsigned)st);
}

static enum MHD_Result stream_start(sv_req *q, rl_waiter *w, int st, cJSON *reply)
{
    if (st != 0 && st != 200) { /* no such episode...: a plain error */
        waiter_free(w);
        return answer(q, st, reply);
    }
    if (!(st == 200 && sv_jbool(reply, "final")) && w->r->nwaiters >= RL_WAITERS_MAX) {
        cJSON_Delete(reply);
        waiter_free(w);
        return sv_reply_error(q, 503, "%d requests wait on the episodes API already: retry later",
                              RL_WAITERS_MAX);
    }
    w->stream = 1;
    w->q = q;
    w->refs = 2; /* the response and the request */
    w->sse = (sv_sse){.q = q, .room = stream_room, .freed = stream_response_freed, .owner = w};
    q->owner = w;
    q->on_complete = stream_req_done;
    list_add(w);
    if (stream_apply(w, st, reply))
        pull(w);
    return sv_sse_reply(&w->sse, q);
}

enum MHD_Result sv_rl_route(sv_req *q, const char *rest)
{
    sv_rl *r = q->s->rl;
    if (!r)
        return sv_reply_error(q, 503, "the episodes API is not open");
    const char *wait_s = sv_arg(q, "wait"), *after = sv_arg(q, "after");
    const char *leid = MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, "Last-Event-ID");
    char *end = NULL;
    double wait = wait_s ? strtod(wait_s, &end) : 0;
    if (wait_s && (!*wait_s || *end || !isfinite(wait) || wait < 0 || wait > RL_WAIT_MAX))
        return sv_reply_error(q, 400, "?wait= must be seconds from 0 to %.0f, got '%.64s'",
                              RL_WAIT_MAX, wait_s);
    const char *ids = leid ? leid : after;
    long last = ids ? event_id(ids) : -1;
    if (ids && last < 0)
        return sv_reply_error(q, 400, "%s must be an event id (0 or more), got '%.64s'",
                              leid ? "Last-Event-ID" : "?after=", ids);
    cJSON *body = NULL;
    if (q->len && !(body = cJSON_ParseWithLength(q->body, q->len)))
        return sv_reply_error(q, 400, "the body of %s /lis/v1/%s must be JSON", q->method, rest);
    rl_waiter *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(rest))) {
        free(w);
        cJSON_Delete(body);
        return sv_reply_error(q, 500, "out of memory");
    }
    w->r = r;
    w->body = body;
    snprintf(w->method, sizeof w->method, "%s", q->method);
    w->rq = (lis_rl_req){.method = w->method,
                         .path = w->path,
                         .body = body,
                         .wait = wait,
                         .last_event_id = last};
    size_t n = strlen(rest);
    int events = !strcmp(q->method, "GET") && !strncmp(rest, "episodes/", 9) && n > 16 &&
                 !strcmp(rest + n - 7, "/events");
    w->rq.memo = w->memo;
    /* step mode's step, reward and branch answer once done: a long-poll of their own */
    if (wait <= 0 && !strcmp(q->method, "POST") && !strncmp(rest, "envs/", 5) &&
        strchr(rest + 5, '/'))
        w->rq.wait = wait = RL_WAIT_MAX;
    if (events)
        w->rq.wait = RL_STREAM_WAIT; /* rl says "not yet" until an event comes */
    cJSON *reply = NULL;
    int st = lis_rl_handle(r->rl, &w->rq, &reply);
    if (events)
        return stream_start(q, w, st, reply);
    if (st != 0) {
        waiter_free(w);
        return answer(q, st, reply);
    }
    if (wait <= 0 || r->nwaiters >= RL_WAITERS_MAX) { /* rl waits only when asked to */
        waiter_free(w);
        if (wait <= 0)
            return sv_reply_error(q, 500, "the episodes API gave no answer to %s /lis/v1/%s",
                                  q->method, rest);
        return sv_reply_error(q, 503, "%d requests wait on the episodes API already: retry later",
                              RL_WAITERS_MAX);
    }
    w->q = q;
    q->owner = w;
    q->on_complete = poll_req_done;
    list_add(w);
    sv_timer_arm(q->s->loop, &w->timer, wait, poll_expired, w);
    sv_req_suspend(q);
    return MHD_YES;
}
