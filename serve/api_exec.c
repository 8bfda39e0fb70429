/* api_exec.c - POST /lis/v1/sandboxes/{id}/exec: a command whose output
 * streams back as server-sent events (docs/api.md):
 *
 *   event: stdout            event: stderr            event: exit
 *   data: {"data":"<b64>"}   data: {"data":"<b64>"}   data: {"exit_code":0,"timed_out":false}
 *
 * As exec.c: an sv_proc (proc.c), registered as a child of the container so a
 * delete kills it. Its events go out through sse.c; while their backlog is
 * at SV_STREAM_HIGH the pipes are not read (a slow client back-pressures only
 * its own command). The object lives until the command, the response and the
 * request are all done. A client that goes away leaves the command running to its end (or its
 * timeout), as Docker does; its output is dropped. */
#include "serve.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

typedef struct api_exec {
    sv_server *s;
    char cid[65];
    sv_sse sse; /* its events (sse.c); sse.q NULL once the request is over */
    sv_proc *proc;
    sv_child child;
    sv_timer timer;
    int timed_out, refs;
    int fx;        /* a step of the sandbox's monitor is open for it (api_effects.c) */
    cJSON *fx_out; /* its effects, for the exit event */
    /* the step closed on a job (its file scan off the loop), then the exit event */
    sv_container *fx_c;
    lis_result fx_res; /* its memory peak only */
    int fx_code;
    char fx_msg[400];
} api_exec;

static void unref(api_exec *x)
{
    if (--x->refs == 0) {
        free(x->sse.buf);
        free(x);
    }
}

static void response_free(void *owner) { unref(owner); }

/* The client read the backlog down: the pipes are read again. */
static void room(void *owner)
{
    api_exec *x = owner;
    if (x->proc)
        sv_proc_read_on(x->proc);
}

/* A chunk of output as an event; 0 (stop reading) while the events wait above
 * SV_STREAM_HIGH for the client. */
static int proc_output(void *owner, int type, const char *raw, size_t n)
{
    api_exec *x = owner;
    if (x->sse.q) {
        char head[64], b64[65540];
        for (size_t off = 0; off < n; off += 49152) { /* 48 KiB -> 64 KiB of base64 */
            size_t m = n - off < 49152 ? n - off : 49152;
            int k = snprintf(head, sizeof head, "event: %s\ndata: {\"data\":\"",
                             type == 2 ? "stderr" : "stdout");
            sv_base64((const unsigned char *)raw + off, m, b64, sizeof b64);
            sv_sse_queue(&x->sse, head, (size_t)k);
            sv_sse_queue(&x->sse, b64, strlen(b64));
            sv_sse_queue(&x->sse, "\"}\n\n", 4);
        }
    }
    return !sv_sse_full(&x->sse);
}

static void finish(api_exec *x, int code, const char *error)
{
    sv_timer_cancel(x->s->loop, &x->timer);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "exit_code", code);
    cJSON_AddBoolToObject(o, "timed_out", x->timed_out);
    if (error)
        cJSON_AddStringToObject(o, "error", error);
    if (x->fx_out) /* "effects": true: what the command did (docs/monitoring.md) */
        cJSON_AddItemToObject(o, "effects", x->fx_out);
    x->fx_out = NULL;
    sv_sse_event(&x->sse, -1, "exit", o);
    sv_sse_end(&x->sse);
    unref(x); /* the command's reference */
}

static void fx_work(void *arg)
{
    api_exec *x = arg;
    x->fx_out = sv_effects_close(x->fx_c->mon, &x->fx_res);
}

static void fx_done(void *arg, int status)
{
    api_exec *x = arg;
    x->fx_c->busy--;
    x->fx_c->fx_step_open = 0;
    finish(x, x->fx_code, x->fx_msg[0] ? x->fx_msg : NULL);
}

static void proc_exited(void *owner, const lis_result *r, const lis_error *err)
{
    api_exec *x = owner;
    x->proc = NULL;
    sv_container *c = sv_container_find(x->s, x->cid);
    if (c)
        sv_container_del_child(c, &x->child);
    char msg[400] = "";
    int code = r->exit_code < 0 ? 137 : r->exit_code;
    if (r->exec_failed) {
        snprintf(msg, sizeof msg, "the command could not be started: %s", r->err_msg);
        code = 127;
    } else if (err) {
        snprintf(msg, sizeof msg, "%s", err->msg);
    }
    if (x->fx && c && c->mon && c->fx_step_open) { /* the step's end on a worker, off the loop */
        x->fx_c = c;
        x->fx_res.memory_peak = r->memory_peak;
        x->fx_code = code;
        snprintf(x->fx_msg, sizeof x->fx_msg, "%s", msg);
        c->busy++; /* the container stays until the job is done */
        if (sv_job(x->s->loop, fx_work, fx_done, x) == 0)
            return;
        c->busy--;
    }
    if (x->fx)
        x->fx_out = sv_effects_end(c, r);
    finish(x, code, msg[0] ? msg : NULL);
}

static const sv_proc_ops api_proc_ops = {.output = proc_output, .exited = proc_exited};

/* The sandbox is being deleted: containers.c kills and reaps the proc. */
static void child_detach(void *owner)
{
    api_exec *x = owner;
    sv_proc_detach(x->proc);
    x->proc = NULL;
    finish(x, 137, "the sandbox was deleted");
}

static void on_timeout(void *arg)
{
    api_exec *x = arg;
    lis_error err = {0};
    x->timed_out = 1;
    if (x->proc)
        lis_proc_signal(sv_proc_lis(x->proc), SIGKILL, &err);
}

static void req_done(sv_req *q)
{
    api_exec *x = q->owner;
    sv_sse_req_done(&x->sse); /* a paused command drains its pipes into nothing */
    unref(x);                 /* the request's reference */
}

/* The container's Env with the request's env on top. */
static char **exec_env(char **base, const cJSON *env)
{
    size_t nb = sv_strv_len(base), ne = cJSON_GetArraySize(env), n = 0;
    char **r = calloc(nb + ne + 1, sizeof *r);
    if (!r)
        return NULL;
    for (const cJSON *e = env ? env->child : NULL; e; e = e->next) {
        size_t k = strlen(e->string) + strlen(e->valuestring) + 2;
        if (!(r[n] = malloc(k)))
            goto oom;
        snprintf(r[n++], k, "%s=%s", e->string, e->valuestring);
    }
    for (size_t i = 0; i < nb; i++) {
        size_t k = strcspn(base[i], "=");
        int over = 0;
        for (const cJSON *e = env ? env->child : NULL; e; e = e->next)
            over |= strlen(e->string) == k && !strncmp(e->string, base[i], k);
        if (!over && !(r[n++] = strdup(base[i])))
            goto oom;
    }
    return r;
oom:
    sv_strv_free(r);
    return NULL;
}

enum MHD_Result sv_api_exec(sv_req *q, sv_container *c)
{
    cJSON *b = q->len ? cJSON_ParseWithLength(q->body, q->len) : NULL;
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(b, "cmd");
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(b, "env");
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(b, "timeout");
    const char *cwd = sv_jstr(b, "cwd");
    const cJSON *want_fx = cJSON_GetObjectItemCaseSensitive(b, "effects");
    char **argv = cJSON_IsArray(cmd) ? sv_jstrv(b, "cmd") : NULL;
    const char *bad =
        !cJSON_IsObject(b) ? "the body must be a JSON object with \"cmd\""
        : !(cJSON_IsString(cmd) && *cmd->valuestring) &&
                !(argv && argv[0] && sv_strv_len(argv) == (size_t)cJSON_GetArraySize(cmd))
            ? "\"cmd\" must be a shell command string or a non-empty array of strings"
        : to && !cJSON_IsNull(to) && !(cJSON_IsNumber(to) && to->valuedouble >= 0)
            ? "\"timeout\" must be seconds (0: none)"
        : cwd && cwd[0] != '/' ? "\"cwd\" must be an absolute path"
        : want_fx && !cJSON_IsBool(want_fx) && !cJSON_IsNull(want_fx)
            ? "\"effects\" must be true or false"
            : NULL;
    for (const cJSON *e = cJSON_IsObject(env) ? env->child : NULL; !bad && e; e = e->next)
        if (!cJSON_IsString(e) || !*e->string || strchr(e->string, '='))
            bad = "\"env\" must map names (without '=') to strings";
    if (!bad && env && !cJSON_IsObject(env) && !cJSON_IsNull(env))
        bad = "\"env\" must map names (without '=') to strings";
    if (bad) {
        sv_strv_free(argv);
        cJSON_Delete(b);
        return sv_reply_error(q, 400, "%s", bad);
    }
    if (c->change == SV_CHANGE_SNAP) { /* the capture stops its processes for a moment */
        sv_strv_free(argv);
        cJSON_Delete(b);
        return sv_reply_error(q, 409,
                              "sandbox %s is being snapshotted; retry when the snapshot "
                              "is done",
                              c->id);
    }
    char **envv = exec_env(c->env, cJSON_IsObject(env) ? env : NULL);
    lis_exec_spec sp = {.argv = (const char *const *)argv,
                        .shell = argv ? NULL : cmd->valuestring,
                        .cwd = cwd             ? cwd
                               : c->workdir[0] ? c->workdir
                                               : "/",
                        .env = (const char *const *)envv,
                        .in = LIS_STDIO_NULL,
                        .out = LIS_STDIO_PIPE,
                        .err = LIS_STDIO_PIPE};
    api_exec *x = calloc(1, sizeof *x);
    lis_error err = {0};
    if (x && cJSON_IsTrue(want_fx)) { /* the command is one step of the sandbox's monitor */
        unsigned st;
        char msg[400];
        char *text = argv ? NULL : cmd->valuestring;
        char *joined = argv ? cJSON_PrintUnformatted(cmd) : NULL;
        if (sv_effects_begin(c, text ? text : joined ? joined : "", &st, msg, sizeof msg) < 0) {
            free(joined);
            free(x);
            sv_strv_free(argv);
            sv_strv_free(envv);
            cJSON_Delete(b);
            return sv_reply_error(q, st, "%s", msg);
        }
        free(joined);
        x->fx = 1;
    }
    if (x) {
        x->s = q->s;
        snprintf(x->cid, sizeof x->cid, "%s", c->id);
        x->sse = (sv_sse){.q = q, .room = room, .freed = response_free, .owner = x};
        x->refs = 3; /* the command, the response and the request (either may end first) */
    }
    if (!envv || !x)
        lis_oom(&err);
    else
        x->proc = sv_proc_start(q->s->loop, c->sb, &sp, &api_proc_ops, x, &err);
    sv_strv_free(argv);
    sv_strv_free(envv);
    double timeout = cJSON_IsNumber(to) ? to->valuedouble : 0;
    cJSON_Delete(b);
    if (!x || !x->proc) {
        if (x && x->fx)
            cJSON_Delete(sv_effects_end(c, NULL)); /* the step of a command that never ran */
        free(x);
        if (err.code == EBUSY) /* paused: the runtime's line says so */
            return sv_reply_error(q, 409, "%s", err.msg);
        return sv_reply_error(q, 500, "starting the command: %s", err.msg);
    }
    x->child = (sv_child){.proc = sv_proc_lis(x->proc), .detach = child_detach, .owner = x};
    sv_container_add_child(c, &x->child);
    if (timeout > 0)
        sv_timer_arm(q->s->loop, &x->timer, timeout, on_timeout, x);
    q->owner = x;
    q->on_complete = req_done;
    return sv_sse_reply(&x->sse, q); /* the command runs on if it fails (req_done) */
}
