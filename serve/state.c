/* state.c - sandbox state through lis serve (docs/api.md): pause, resume and
 * stats of a sandbox, snapshots (the store's images made from what a sandbox
 * wrote), forks (one snapshot, then N new sandboxes on it), the snapshot
 * list, and Docker's POST /commit, which is a snapshot tagged repo:tag.
 *
 * A snapshot holds files only (the writable layer and /tmp), never
 * processes, memory, /dev/shm or connections (lis_sandbox_capture).
 * Everything slow runs as a worker job; the container is busy meanwhile (no
 * delete) and, for a snapshot, fork or commit, its change is SV_CHANGE_SNAP: no pause, resume,
 * exec or second snapshot until it is done (and no snapshot while a pause or
 * resume runs: one state change at a time). The forks are containers of the
 * server like those of POST /lis/v1/sandboxes: made on the loop thread by
 * containers.c (sv_container_new), their sandboxes by lis_sandbox_fork's
 * create callback on the worker (sv_container_sandbox: limits, net proxy). */
#include "rootfs.h"
#include "serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FORK_MAX 64

/* A fork made with an Idempotency-Key: what a retry gets back. */
typedef struct sv_fork {
    char key[128];
    int done;        /* 0 while it runs */
    cJSON *snapshot; /* the snapshot's JSON */
    int n;
    char ids[FORK_MAX][65]; /* fork i's container, "" when it failed */
    char *errs[FORK_MAX];   /* fork i's error, NULL when it was made */
    struct sv_fork *next;
} sv_fork;

static void fork_rec_free(sv_fork *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->errs[i]);
    cJSON_Delete(f->snapshot);
    free(f);
}

static void fork_rec_drop(sv_server *s, sv_fork *f)
{
    for (sv_fork **p = &s->forks; *p; p = &(*p)->next)
        if (*p == f) {
            *p = f->next;
            break;
        }
    fork_rec_free(f);
}

void sv_state_free(sv_server *s)
{
    while (s->forks) {
        sv_fork *f = s->forks;
        s->forks = f->next;
        fork_rec_free(f);
    }
}

static sv_container *live(sv_server *s, const char *id)
{
    sv_container *c = *id ? sv_container_find(s, id) : NULL;
    return c && !sv_removing(c) && !strcmp(c->id, id) ? c : NULL;
}

/* A key is forgotten once none of its sandboxes is left. */
static void forks_gc(sv_server *s)
{
    for (sv_fork *f = s->forks, *next; f; f = next) {
        next = f->next;
        int any = !f->done;
        for (int i = 0; !any && i < f->n; i++)
            any = live(s, f->ids[i]) != NULL;
        if (!any)
            fork_rec_drop(s, f);
    }
}

static unsigned err_status(const lis_error *e)
{
    return e->code == EINVAL || e->code == ENAMETOOLONG                ? 400
           : e->code == ENOENT                                         ? 404
           : e->code == EBUSY || e->code == ESRCH || e->code == EEXIST ? 409
                                                                       : 500;
}

/* One state change at a time (pause, resume, snapshot, fork, commit). */
static enum MHD_Result refuse_busy(sv_req *q, const sv_container *c)
{
    const char *what = "changed";
    switch (c->change) {
    case SV_CHANGE_SNAP: what = "snapshotted"; break;
    case SV_CHANGE_PAUSE: what = "paused or resumed"; break;
    case SV_CHANGE_NONE: break;
    }
    return sv_reply_error(q, 409, "sandbox %s is being %s; retry when that is done", c->id, what);
}

/* ---- pause, resume, stats ----------------------------------------------------------------------- */

enum { OP_PAUSE, OP_RESUME, OP_STATS };

typedef struct state_job {
    sv_req *q;
    sv_container *c;
    lis_sandbox *sb;
    int op, rc;
    int docker; /* Docker's pause/unpause: 204 and no body */
    lis_error err;
    lis_stats st;
} state_job;

static void state_work(void *arg)
{
    state_job *j = arg;
    if (j->op == OP_PAUSE) {
        j->rc = lis_sandbox_pause(j->sb, &j->err);
    } else if (j->op == OP_RESUME) {
        j->rc = lis_sandbox_resume(j->sb, &j->err);
    } else {
        j->rc = lis_sandbox_stats(j->sb, &j->st, &j->err);
    }
}

static void add_u64(cJSON *o, const char *k, uint64_t v)
{
    if (v == LIS_UNLIMITED)
        cJSON_AddNullToObject(o, k);
    else
        cJSON_AddNumberToObject(o, k, (double)v);
}

static cJSON *stats_json(state_job *j)
{
    const lis_stats *st = &j->st;
    sv_container *c = j->c;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", c->id);
    cJSON_AddStringToObject(o, "name", c->name);
    cJSON_AddStringToObject(o, "state", st->state);
    cJSON_AddNumberToObject(o, "pid", st->pid);
    cJSON_AddNumberToObject(o, "age_seconds", st->age_seconds);
    cJSON_AddNumberToObject(o, "cpu_seconds", st->cpu_seconds);
    cJSON_AddNumberToObject(o, "memory_bytes", (double)st->memory_bytes);
    cJSON_AddNumberToObject(o, "memory_peak_bytes", (double)st->memory_peak);
    uint64_t ml = c->limits.memory_bytes ? c->limits.memory_bytes : LIS_DEFAULT_MEMORY;
    add_u64(o, "memory_limit_bytes", ml);
    cJSON_AddNumberToObject(o, "pids", (double)st->nprocs);
    cJSON_AddNumberToObject(o, "oom_kills", (double)st->oom_kills);
    cJSON_AddNumberToObject(o, "disk_bytes", (double)st->disk_bytes);
    add_u64(o, "disk_limit_bytes", st->disk_limit);
    cJSON_AddStringToObject(o, "limits", st->limits);
    cJSON_AddStringToObject(o, "rootfs", st->rootfs);
    return o;
}

static void state_done(void *arg, int status)
{
    state_job *j = arg;
    sv_container *c = j->c;
    c->busy--;
    if (j->op != OP_STATS)
        c->change = SV_CHANGE_NONE;
    if (j->rc < 0) {
        sv_req_finish_error(j->q, err_status(&j->err), "%s", j->err.msg);
    } else if (j->op == OP_STATS) {
        c->paused =
            !strcmp(j->st.state, "paused"); /* also a pause from outside (lis sandbox pause) */
        sv_req_finish(j->q, 200, sv_resp_json(stats_json(j)));
    } else {
        c->paused = j->op == OP_PAUSE;
        sv_req_finish(j->q, j->docker ? 204 : 200,
                      j->docker ? NULL : sv_resp_json(sv_sandbox_json(c)));
    }
    if (j->op != OP_STATS)
        sv_autosnap_sweep(c->s); /* none ran while this was in flight */
    free(j);
}

static enum MHD_Result state_op(sv_req *q, sv_container *c, int op, int docker)
{
    if (op != OP_STATS && c->change != SV_CHANGE_NONE)
        return refuse_busy(q, c);
    state_job *j = calloc(1, sizeof *j);
    if (!j)
        return sv_reply_error(q, 500, "out of memory");
    *j = (state_job){.q = q, .c = c, .sb = c->sb, .op = op, .docker = docker};
    c->busy++;
    if (op != OP_STATS)
        c->change = SV_CHANGE_PAUSE;
    sv_req_suspend(q);
    if (sv_job(q->s->loop, state_work, state_done, j) < 0) {
        c->busy--;
        if (op != OP_STATS)
            c->change = SV_CHANGE_NONE;
        free(j);
        sv_req_finish_error(q, 500, "out of memory");
    }
    return MHD_YES;
}

/* Docker's POST /containers/{id}/pause and /unpause: the same state change, with
 * dockerd's answers (204; 409 when not running, already paused, or not paused). */
enum MHD_Result sv_state_docker_pause(sv_req *q, sv_container *c, int pause)
{
    if (!c->main)
        return sv_reply_error(q, 409, "Container %s is not running", c->id);
    if (pause && c->paused)
        return sv_reply_error(q, 409, "Container %s is already paused", c->id);
    if (!pause && !c->paused)
        return sv_reply_error(q, 409, "Container %s is not paused", c->id);
    return state_op(q, c, pause ? OP_PAUSE : OP_RESUME, 1);
}

/* ---- snapshot and commit --------------------------------------------------------------------------- */

static cJSON *snapshot_json(const lis_snapshot_result *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", r->digest);
    if (r->ref[0])
        cJSON_AddStringToObject(o, "tag", r->ref);
    else
        cJSON_AddNullToObject(o, "tag");
    if (r->parent[0])
        cJSON_AddStringToObject(o, "parent", r->parent);
    else
        cJSON_AddNullToObject(o, "parent");
    cJSON_AddNumberToObject(o, "depth", r->depth);
    cJSON_AddNumberToObject(o, "files", (double)r->capture.files);
    cJSON_AddNumberToObject(o, "bytes", (double)r->capture.bytes);
    cJSON_AddNumberToObject(o, "reflinked", (double)r->capture.reflinked);
    cJSON_AddNumberToObject(o, "paused_ms", r->capture.paused_ms);
    cJSON_AddBoolToObject(o, "existed", r->existed);
    return o;
}

typedef struct snap_job {
    sv_req *q;
    sv_container *c;
    lis_sandbox *sb;
    int docker;    /* POST /commit: Docker's answer */
    char ref[700]; /* "" for none */
    lis_snapshot_result res;
    lis_error err;
    int rc;
} snap_job;

static void snap_work(void *arg)
{
    snap_job *j = arg;
    j->rc =
        lis_rootfs_snapshot(j->q->s->data_dir, j->sb, j->ref[0] ? j->ref : NULL, &j->res, &j->err);
}

static void snap_done(void *arg, int status)
{
    snap_job *j = arg;
    j->c->busy--;
    j->c->change = SV_CHANGE_NONE;
    if (j->rc < 0) {
        sv_req_finish_error(j->q, err_status(&j->err), "%s%s",
                            j->docker ? "" : "snapshot: ", j->err.msg);
    } else if (j->docker) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "Id", j->res.digest);
        sv_req_finish(j->q, 201, sv_resp_json(o));
    } else {
        sv_req_finish(j->q, 201, sv_resp_json(snapshot_json(&j->res)));
    }
    if (j->rc == 0) /* the client holds it now, even when a fork made the same one */
        sv_autosnap_forget(j->c->s, j->res.digest);
    sv_autosnap_sweep(j->c->s); /* none ran while this was in flight */
    free(j);
}

static enum MHD_Result snapshot_start(sv_req *q, sv_container *c, const char *ref, int docker)
{
    if (c->change != SV_CHANGE_NONE)
        return refuse_busy(q, c);
    snap_job *j = calloc(1, sizeof *j);
    if (!j)
        return sv_reply_error(q, 500, "out of memory");
    *j = (snap_job){.q = q, .c = c, .sb = c->sb, .docker = docker};
    if (ref)
        sv_image_norm(ref, j->ref, sizeof j->ref);
    c->busy++;
    c->change = SV_CHANGE_SNAP;
    sv_req_suspend(q);
    if (sv_job(q->s->loop, snap_work, snap_done, j) < 0) {
        c->busy--;
        c->change = SV_CHANGE_NONE;
        free(j);
        sv_req_finish_error(q, 500, "out of memory");
    }
    return MHD_YES;
}

/* The optional JSON object body of snapshot and fork: NULL with *bad set when malformed. */
static cJSON *body_object(sv_req *q, const char **bad)
{
    *bad = NULL;
    if (!q->len)
        return cJSON_CreateObject();
    cJSON *b = cJSON_ParseWithLength(q->body, q->len);
    if (!cJSON_IsObject(b)) {
        cJSON_Delete(b);
        *bad = "the body must be a JSON object";
        return NULL;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "tag");
    if (t && !cJSON_IsNull(t) && !(cJSON_IsString(t) && *t->valuestring)) {
        cJSON_Delete(b);
        *bad = "\"tag\" must be a NAME[:TAG] string";
        return NULL;
    }
    return b;
}

static enum MHD_Result snapshot(sv_req *q, sv_container *c)
{
    const char *bad;
    cJSON *b = body_object(q, &bad);
    if (!b)
        return sv_reply_error(q, 400, "%s", bad);
    enum MHD_Result r = snapshot_start(q, c, sv_jstr(b, "tag"), 0);
    cJSON_Delete(b);
    return r;
}

enum MHD_Result sv_commit(sv_req *q)
{
    const char *id = sv_arg(q, "container"), *repo = sv_arg(q, "repo"), *tag = sv_arg(q, "tag");
    sv_container *c = id ? sv_container_find(q->s, id) : NULL;
    if (!c)
        return sv_reply_error(q, 404, "No such container: %s", id ? id : "");
    if (sv_removing(c))
        return sv_reply_error(q, 409, "removal of container %s is already in progress", c->id);
    if (!c->sb)
        return sv_reply_error(q, 409, "container %s is being created", c->id);
    char ref[700];
    if (repo && *repo)
        snprintf(ref, sizeof ref, "%s%s%s", repo, tag && *tag ? ":" : "", tag && *tag ? tag : "");
    else if (tag && *tag)
        return sv_reply_error(q, 400, "invalid reference format: a tag needs a repository");
    return snapshot_start(q, c, repo && *repo ? ref : NULL, 1);
}

/* ---- fork --------------------------------------------------------------------------------------------- */

typedef struct fork_job {
    sv_req *q;
    sv_container *parent;
    lis_sandbox *sb;
    sv_fork *rec; /* the outcome; in s->forks with an Idempotency-Key */
    int keyed;
    int n, rc;
    char tag[700];
    sv_container *kids[FORK_MAX];
    lis_sandbox *out[FORK_MAX];
    lis_monitor *mons[FORK_MAX]; /* each watched kid's monitor (its effects) */
    lis_error errs[FORK_MAX];
    char names[FORK_MAX][32];
    const char *namev[FORK_MAX];
    lis_sandbox_spec spec; /* the template: kid 0's */
    char host[16];
    lis_snapshot_result snap;
    lis_error err;
    double timeout; /* each fork's (sv_container_set_timeout), 0: none */
} fork_job;

/* lis_sandbox_fork's create callback, on the worker: fork i is kids[i]'s sandbox. */
static int fork_create(void *arg, const lis_sandbox_spec *spec, int i, lis_sandbox **out,
                       lis_error *err)
{
    fork_job *j = arg;
    if (i < 0 || i >= j->n)
        return lis_fail(err, EINVAL, "fork %d of %d", i, j->n);
    char name[32], host[16];
    lis_sandbox_spec sp;
    sv_container_spec(j->kids[i], &sp, name, host);
    sp.rootfs = spec->rootfs; /* the snapshot's chain */
    return sv_container_sandbox(j->kids[i], &sp, &j->mons[i], out, err);
}

static void fork_work(void *arg)
{
    fork_job *j = arg;
    lis_fork_opts o = {.spec = &j->spec,
                       .names = j->namev,
                       .tag = j->tag[0] ? j->tag : NULL,
                       .create = fork_create,
                       .create_arg = j};
    j->rc = lis_sandbox_fork(j->q->s->ctx, j->sb, j->n, &o, j->out, j->errs, &j->snap, &j->err);
}

static cJSON *fork_reply(sv_server *s, const sv_fork *f, cJSON *snap)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "snapshot", snap);
    cJSON *a = cJSON_AddArrayToObject(o, "sandboxes");
    for (int i = 0; i < f->n; i++) {
        sv_container *c = f->errs[i] ? NULL : live(s, f->ids[i]);
        cJSON *e = c ? sv_sandbox_json(c) : cJSON_CreateObject();
        if (!c && f->errs[i]) {
            cJSON_AddStringToObject(e, "error", f->errs[i]);
        } else if (!c) {
            char m[128];
            snprintf(m, sizeof m, "sandbox %s was deleted since", f->ids[i]);
            cJSON_AddStringToObject(e, "id", f->ids[i]);
            cJSON_AddStringToObject(e, "error", m);
        }
        cJSON_AddItemToArray(a, e);
    }
    return o;
}

static void fork_done(void *arg, int status)
{
    fork_job *j = arg;
    sv_server *s = j->q->s;
    sv_fork *f = j->rec;
    j->parent->busy--;
    j->parent->change = SV_CHANGE_NONE;
    for (int i = 0; i < j->n; i++) /* freed with its container when it goes */
        j->kids[i]->mon = j->mons[i];
    if (j->rc < 0) {
        for (int i = 0; i < j->n; i++)
            sv_container_discard(j->kids[i]);
        sv_req_finish_error(j->q, err_status(&j->err), "fork: %s", j->err.msg);
        if (j->keyed)
            fork_rec_drop(s, f); /* nothing was made: a retry may try again */
        else
            fork_rec_free(f);
        free(j);
        return;
    }
    for (int i = 0; i < j->n; i++) {
        sv_container *c = j->kids[i];
        if (j->out[i]) {
            c->sb = j->out[i];
            c->busy--;
            snprintf(c->rootfs, sizeof c->rootfs, "%s", j->snap.rootfs);
            snprintf(c->image, sizeof c->image, "%s", j->snap.digest);
            snprintf(c->image_id, sizeof c->image_id, "%s", j->snap.digest);
            snprintf(f->ids[i], sizeof f->ids[i], "%s", c->id);
            sv_container_set_timeout(c, j->timeout);
        } else {
            f->errs[i] = strdup(j->errs[i].msg[0] ? j->errs[i].msg : "the fork failed");
            sv_container_discard(c);
        }
    }
    f->snapshot = snapshot_json(&j->snap);
    f->done = 1;
    sv_req_finish(j->q, 201, sv_resp_json(fork_reply(s, f, cJSON_Duplicate(f->snapshot, 1))));
    if (!j->keyed)
        fork_rec_free(f);
    /* an untagged snapshot made for these forks goes with the last of them
     * (autosnap.c); one that was in the store already is not ours */
    if (!j->tag[0] && !j->snap.existed)
        sv_autosnap_add(s, j->snap.digest, j->snap.parent);
    sv_autosnap_sweep(s);
    free(j);
}

/* A kid's create body: the parent's Env (with env's names over it), WorkingDir,
 * User, and its effects and policy (effects: 1 on, 0 off, -1 as the parent). */
static cJSON *kid_config(const sv_container *p, const cJSON *env, int effects)
{
    cJSON *cfg = cJSON_CreateObject();
    int on = effects < 0 ? p->effects : effects;
    cJSON_AddBoolToObject(cfg, "LisEffects", on);
    const char *pol = sv_jstr(p->config, "LisPolicy");
    if (on && pol)
        cJSON_AddStringToObject(cfg, "LisPolicy", pol);
    cJSON_AddStringToObject(cfg, "LisForkOf", p->id);
    cJSON *cmd = cJSON_AddArrayToObject(cfg, "Cmd");
    cJSON_AddItemToArray(cmd, cJSON_CreateString("sleep"));
    cJSON_AddItemToArray(cmd, cJSON_CreateString("infinity"));
    cJSON *ev = cJSON_AddArrayToObject(cfg, "Env");
    const cJSON *pe = cJSON_GetObjectItemCaseSensitive(p->config, "Env"), *e;
    cJSON_ArrayForEach(e, pe)
    {
        if (!cJSON_IsString(e))
            continue;
        size_t k = strcspn(e->valuestring, "=");
        int over = 0;
        for (const cJSON *o = cJSON_IsObject(env) ? env->child : NULL; o; o = o->next)
            over |= strlen(o->string) == k && !strncmp(o->string, e->valuestring, k);
        if (!over)
            cJSON_AddItemToArray(ev, cJSON_CreateString(e->valuestring));
    }
    sv_env_append(ev, env); /* checked by the caller */
    if (p->workdir[0])
        cJSON_AddStringToObject(cfg, "WorkingDir", p->workdir);
    if (p->user[0])
        cJSON_AddStringToObject(cfg, "User", p->user);
    return cfg;
}

static enum MHD_Result fork_(sv_req *q, sv_container *c)
{
    sv_server *s = q->s;
    const char *bad;
    cJSON *b = body_object(q, &bad);
    if (!b)
        return sv_reply_error(q, 400, "%s", bad);
    const cJSON *cnt = cJSON_GetObjectItemCaseSensitive(b, "count");
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(b, "env");
    const char *net = sv_jstr(b, "net"), *tag = sv_jstr(b, "tag");
    const cJSON *fx = cJSON_GetObjectItemCaseSensitive(b, "effects");
    int effects = cJSON_IsBool(fx) ? cJSON_IsTrue(fx) : -1; /* -1: as the parent */
    double mem = sv_jsize(cJSON_GetObjectItemCaseSensitive(b, "memory"));
    double life = sv_body_timeout(b);
    int n = !cnt || cJSON_IsNull(cnt) ? 1 : cJSON_IsNumber(cnt) ? (int)cnt->valuedouble : 0;
    if (cJSON_IsNumber(cnt) && cnt->valuedouble != (double)n)
        n = 0;
    cJSON *probe = cJSON_CreateArray();
    bad = n < 1 || n > FORK_MAX ? "\"count\" must be an integer from 1 to 64"
          : mem < 0             ? "\"memory\" must be bytes or a size such as \"512m\""
          : net && strcmp(net, "none") && strcmp(net, "proxy") && strcmp(net, "host")
              ? "\"net\" must be none, proxy or host"
          : sv_env_append(probe, env) < 0 ? "\"env\" must map names (without '=') to strings"
          : life < 0 ? "\"timeout\" must be seconds, 0 to 2592000 (30 days); 0 or null for none"
          : fx && !cJSON_IsBool(fx) && !cJSON_IsNull(fx) ? "\"effects\" must be true or false"
                                                         : NULL;
    cJSON_Delete(probe);
    const char *key = MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, "Idempotency-Key");
    if (!bad && key && (!*key || strlen(key) >= sizeof((sv_fork *)0)->key))
        bad = "Idempotency-Key must be 1 to 127 characters";
    if (bad) {
        cJSON_Delete(b);
        return sv_reply_error(q, 400, "%s", bad);
    }
    forks_gc(s);
    for (sv_fork *f = key ? s->forks : NULL; f; f = f->next)
        if (!strcmp(f->key, key)) {
            cJSON_Delete(b);
            if (!f->done)
                return sv_reply_error(q, 409,
                                      "a fork with Idempotency-Key %s is in progress; "
                                      "retry it",
                                      key);
            struct MHD_Response *r =
                sv_resp_json(fork_reply(s, f, cJSON_Duplicate(f->snapshot, 1)));
            MHD_add_response_header(r, "Idempotent-Replayed", "true");
            return sv_reply(q, 200, r);
        }
    if (c->change != SV_CHANGE_NONE) {
        cJSON_Delete(b);
        return refuse_busy(q, c);
    }
    if ((net ? !strcmp(net, "host") : c->net == LIS_NET_HOST) && !sv_conn_owner(q->cn)) {
        cJSON_Delete(b);
        return sv_reply_error(q, 403,
                              "fork: net host shares the owner's network identity and is only "
                              "for a client known to be the owner; this connection is not "
                              "authenticated");
    }
    fork_job *j = calloc(1, sizeof *j);
    sv_fork *f = j ? calloc(1, sizeof *f) : NULL;
    if (!f) {
        free(j);
        cJSON_Delete(b);
        return sv_reply_error(q, 500, "out of memory");
    }
    *j = (fork_job){.q = q,
                    .parent = c,
                    .sb = c->sb,
                    .n = n,
                    .rec = f,
                    .keyed = key != NULL,
                    .timeout = life};
    f->n = n;
    if (tag)
        sv_image_norm(tag, j->tag, sizeof j->tag);
    for (int i = 0; i < n; i++) {
        unsigned st;
        char msg[512];
        sv_container *k = sv_container_new(s, kid_config(c, env, effects), NULL, NULL, 1, 1, "",
                                           &st, msg, sizeof msg);
        if (!k) {
            for (int m = 0; m < i; m++)
                sv_container_discard(j->kids[m]);
            free(f);
            free(j);
            cJSON_Delete(b);
            return sv_reply_error(q, st, "fork: %s", msg);
        }
        k->limits = c->limits;
        if (mem > 0)
            k->limits.memory_bytes = (uint64_t)mem;
        k->net = !net                    ? c->net
                 : !strcmp(net, "host")  ? LIS_NET_HOST
                 : !strcmp(net, "proxy") ? LIS_NET_PROXY
                                         : LIS_NET_NONE;
        j->kids[i] = k;
        lis_sandbox_spec sp;
        char host[16];
        sv_container_spec(k, &sp, j->names[i], host);
        j->namev[i] = j->names[i];
    }
    /* the template the runtime is given (fork_create makes each from its kid) */
    sv_container_spec(j->kids[0], &j->spec, j->names[0], j->host);
    cJSON_Delete(b);
    if (key) {
        snprintf(f->key, sizeof f->key, "%s", key);
        f->next = s->forks;
        s->forks = f;
    }
    c->busy++;
    c->change = SV_CHANGE_SNAP;
    sv_req_suspend(q);
    if (sv_job(s->loop, fork_work, fork_done, j) < 0) {
        j->rc = lis_oom(&j->err);
        fork_done(j, 0); /* drops the busy and change just taken */
    }
    return MHD_YES;
}

/* ---- the snapshot list ------------------------------------------------------------------------------ */

/* One snapshot image of the store, or NULL when digest is not a snapshot. */
static cJSON *snapshot_entry(sv_server *s, const lis_rootfs_image *imgs, size_t n, size_t i)
{
    cJSON *m = sv_image_meta(s, imgs[i].digest);
    const char *kind = sv_jstr(m, "kind");
    if (!kind || strcmp(kind, "snapshot")) {
        cJSON_Delete(m);
        return NULL;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", imgs[i].digest);
    cJSON *tags = cJSON_AddArrayToObject(o, "tags");
    for (size_t k = 0; k < n; k++)
        if (!strcmp(imgs[k].digest, imgs[i].digest) && imgs[k].ref[0])
            cJSON_AddItemToArray(tags, cJSON_CreateString(imgs[k].ref));
    const char *p = sv_jstr(m, "parent") ? sv_jstr(m, "parent") : sv_jstr(m, "parent_dir");
    if (p)
        cJSON_AddStringToObject(o, "parent", p);
    else
        cJSON_AddNullToObject(o, "parent");
    char t[64];
    sv_rfc3339(imgs[i].created, t, sizeof t);
    cJSON_AddStringToObject(o, "created", t);
    cJSON_AddNumberToObject(o, "size", (double)imgs[i].size);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "depth");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(m, "files");
    if (cJSON_IsNumber(d))
        cJSON_AddNumberToObject(o, "depth", d->valuedouble);
    if (cJSON_IsNumber(f))
        cJSON_AddNumberToObject(o, "files", f->valuedouble);
    const char *src = sv_jstr(m, "source");
    if (src)
        cJSON_AddStringToObject(o, "source", src);
    cJSON_Delete(m);
    return o;
}

enum MHD_Result sv_snapshots(sv_req *q, const char *ref)
{
    lis_rootfs_image *imgs = NULL;
    size_t n = 0;
    lis_error err = {0};
    if (lis_rootfs_list(q->s->data_dir, &imgs, &n, &err) < 0)
        return sv_reply_error(q, 500, "%s", err.msg);
    char dir[4096], want[80] = "";
    if (*ref && sv_image_resolve(q->s, ref, dir, sizeof dir, want, sizeof want) < 0) {
        free(imgs);
        return sv_reply_error(q, 404, "no such snapshot: %s", ref);
    }
    cJSON *a = cJSON_CreateArray(), *one = NULL;
    for (size_t i = 0; i < n; i++) {
        int first = 1;
        for (size_t k = 0; k < i; k++)
            first &= strcmp(imgs[k].digest, imgs[i].digest) != 0;
        if (!first || (*want && strcmp(imgs[i].digest, want)))
            continue;
        cJSON *e = snapshot_entry(q->s, imgs, n, i);
        if (e && *ref)
            one = e;
        else if (e)
            cJSON_AddItemToArray(a, e);
    }
    free(imgs);
    if (!*ref)
        return sv_reply_json(q, 200, a);
    cJSON_Delete(a);
    if (!one)
        return sv_reply_error(q, 404, "no such snapshot: %s", ref);
    return sv_reply_json(q, 200, one);
}

enum MHD_Result sv_snapshot_delete(sv_req *q, const char *ref)
{
    char dir[4096], digest[80];
    if (sv_image_resolve(q->s, ref, dir, sizeof dir, digest, sizeof digest) < 0)
        return sv_reply_error(q, 404, "no such snapshot: %s", ref);
    cJSON *m = sv_image_meta(q->s, digest);
    const char *kind = sv_jstr(m, "kind");
    int is_snap = kind && !strcmp(kind, "snapshot");
    cJSON_Delete(m);
    if (!is_snap) /* base images go through the Docker side or lis rootfs rm */
        return sv_reply_error(q, 404, "no such snapshot: %s (an image, not a snapshot)", ref);
    for (sv_container *c = q->s->containers; c; c = c->next)
        if (!strcmp(c->image_id, digest) && !sv_removing(c))
            return sv_reply_error(q, 409,
                                  "snapshot %s is in use by sandbox %.12s: delete that "
                                  "first",
                                  ref, c->id);
    return sv_image_remove(q, digest, digest, 1);
}

/* ---- routing ------------------------------------------------------------------------------------------ */

enum MHD_Result sv_state_route(sv_req *q, sv_container *c, const char *op)
{
    int post = !strcmp(q->method, "POST");
    if (!strcmp(op, "stats"))
        return !strcmp(q->method, "GET") ? state_op(q, c, OP_STATS, 0)
                                         : sv_reply_error(q, 405, "stats wants GET");
    if (!post)
        return sv_reply_error(q, 405, "%s wants POST", op);
    if (!strcmp(op, "pause"))
        return state_op(q, c, OP_PAUSE, 0);
    if (!strcmp(op, "resume"))
        return state_op(q, c, OP_RESUME, 0);
    if (!strcmp(op, "snapshot"))
        return snapshot(q, c);
    return fork_(q, c);
}
