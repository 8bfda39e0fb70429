/* containers.c - Docker containers as lis sandboxes: create (a sandbox, on a
 * worker), start (the main command as an async lis_proc), stop, kill, wait,
 * attach, delete (on a worker), inspect, list. The sandbox lives from create
 * to delete, so archives work on created and exited containers. */
#include "lis_net.h"
#include "serve.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

enum { W_NOT_RUNNING, W_NEXT_EXIT, W_REMOVED };

typedef struct sv_waiter {
    sv_req *q;
    sv_container *c;
    int cond, done;
    char body[256];
    size_t len;
    struct sv_waiter *next;
} sv_waiter;

typedef struct sv_attach {
    sv_stream *st;
    sv_container *c;
    struct sv_attach *next;
} sv_attach;

typedef struct sv_pending { /* a stop, kill, followed logs or delete waiting for an end */
    sv_req *q;
    int kind;     /* P_EXIT (204 at exit), P_LOGS, P_REMOVED (204 when gone) */
    int out, err; /* logs: which streams */
    struct sv_pending *next;
} sv_pending;
enum { P_EXIT, P_LOGS, P_REMOVED };

/* ---- lookup ---------------------------------------------------------------------- */

void sv_container_add_child(sv_container *c, sv_child *ch)
{
    ch->next = c->children;
    c->children = ch;
}

void sv_container_del_child(sv_container *c, sv_child *ch)
{
    for (sv_child **p = &c->children; *p; p = &(*p)->next)
        if (*p == ch) {
            *p = ch->next;
            return;
        }
}

/* ---- waiters and attach streams ------------------------------------------------------ */

static void waiter_complete(sv_waiter *w, int code, const char *error)
{
    if (w->done)
        return;
    w->done = 1;
    if (error)
        w->len =
            (size_t)snprintf(w->body, sizeof w->body,
                             "{\"StatusCode\":%d,\"Error\":{\"Message\":\"%s\"}}\n", code, error);
    else
        w->len =
            (size_t)snprintf(w->body, sizeof w->body, "{\"StatusCode\":%d,\"Error\":null}\n", code);
    if (w->q)
        sv_req_resume(w->q);
}

static void waiters_fire(sv_container *c, int removed)
{
    for (sv_waiter *w = c->waiters; w; w = w->next)
        if (!w->done && (removed || w->cond != W_REMOVED))
            waiter_complete(w, c->exit_code, NULL);
}

static void attach_gone(void *owner)
{
    sv_attach *a = owner;
    if (a->c)
        for (sv_attach **p = &a->c->attaches; *p; p = &(*p)->next)
            if (*p == a) {
                *p = a->next;
                break;
            }
    if (a->c && a->c->main) /* it may have been what held the command back */
        sv_proc_read_on(a->c->main);
    sv_stream_end(a->st);
    free(a);
}

static void attach_drained(void *owner)
{
    sv_attach *a = owner;
    if (a->c && a->c->main)
        sv_proc_read_on(a->c->main);
}

static const sv_stream_ops attach_ops = {.gone = attach_gone, .drained = attach_drained};

static void attaches_write(sv_container *c, int type, const char *buf, size_t n)
{
    for (sv_attach *a = c->attaches, *next; a; a = next) {
        next = a->next; /* a write that finds the client gone frees a (attach_gone) */
        sv_stream_write(a->st, type, buf, n);
    }
}

static void attaches_end(sv_container *c)
{
    while (c->attaches) {
        sv_attach *a = c->attaches;
        c->attaches = a->next;
        sv_stream_end(a->st);
        free(a);
    }
}

/* ---- the main process ---------------------------------------------------------------- */

static void container_remove(sv_container *c, sv_req *q);

#define SV_LOG_MAX (8u << 20)

/* What GET …/logs returns (docker-py's attached containers.run reads it). */
static void log_add(sv_container *c, int type, const char *buf, size_t n)
{
    if (c->loglen + n + 8 > SV_LOG_MAX)
        return;
    char *b = realloc(c->log, c->loglen + n + 8);
    if (!b)
        return;
    c->log = b;
    unsigned char h[8] = {(unsigned char)type,
                          0,
                          0,
                          0,
                          (unsigned char)(n >> 24),
                          (unsigned char)(n >> 16),
                          (unsigned char)(n >> 8),
                          (unsigned char)n};
    memcpy(c->log + c->loglen, h, 8);
    memcpy(c->log + c->loglen + 8, buf, n);
    c->loglen += n + 8;
}

static struct MHD_Response *logs_resp(sv_container *c, int want_out, int want_err)
{
    size_t cap = c->loglen + 1, len = 0;
    char *out = malloc(cap);
    for (size_t off = 0; out && off + 8 <= c->loglen;) {
        const unsigned char *h = (const unsigned char *)c->log + off;
        size_t n = (size_t)h[4] << 24 | (size_t)h[5] << 16 | (size_t)h[6] << 8 | h[7];
        if ((h[0] == 1 && want_out) || (h[0] == 2 && want_err)) {
            size_t skip = c->tty ? 8 : 0; /* raw when tty */
            memcpy(out + len, c->log + off + skip, n + 8 - skip);
            len += n + 8 - skip;
        }
        off += n + 8;
    }
    if (!out)
        return NULL;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, out, MHD_RESPMEM_MUST_FREE);
    sv_resp_headers(r);
    MHD_add_response_header(r, "Content-Type",
                            c->tty ? "application/vnd.docker.raw-stream"
                                   : "application/vnd.docker.multiplexed-stream");
    return r;
}

/* Suspends q until the container's end (or removal, kind); 500 without memory. */
static enum MHD_Result park(sv_container *c, sv_req *q, int kind)
{
    sv_pending *p = calloc(1, sizeof *p);
    if (!p)
        return sv_reply_error(q, 500, "out of memory");
    p->q = q;
    p->kind = kind;
    p->out = sv_arg_bool(q, "stdout");
    p->err = sv_arg_bool(q, "stderr");
    p->next = c->pending;
    c->pending = p;
    sv_req_suspend(q);
    return MHD_YES;
}

/* Finishes the parked requests: all of them when removed, else all but those
 * waiting for the removal (P_REMOVED). */
static void unpark(sv_container *c, int removed)
{
    for (sv_pending **pp = &c->pending; *pp;) {
        sv_pending *p = *pp;
        if (p->kind == P_REMOVED && !removed) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        if (p->kind == P_LOGS)
            sv_req_finish(p->q, 200, logs_resp(c, p->out, p->err));
        else
            sv_req_finish(p->q, 204, NULL);
        free(p);
    }
}

/* Followed logs are answered whole when the main command ends (no incremental stream). */
static enum MHD_Result logs(sv_req *q, sv_container *c)
{
    if (sv_arg_bool(q, "follow") && c->main)
        return park(c, q, P_LOGS);
    struct MHD_Response *r = logs_resp(c, sv_arg_bool(q, "stdout"), sv_arg_bool(q, "stderr"));
    return r ? sv_reply(q, 200, r) : sv_reply_error(q, 500, "out of memory");
}

static int main_output(void *owner, int type, const char *buf, size_t n)
{
    sv_container *c = owner;
    attaches_write(c, type, buf, n);
    log_add(c, type, buf, n); /* capped */
    /* a slow attached client holds the command back (its pipe fills), as an
     * exec's does, rather than the server's memory growing */
    for (sv_attach *a = c->attaches; a; a = a->next)
        if (sv_stream_backlog(a->st) >= SV_STREAM_HIGH)
            return 0;
    return 1;
}

static void main_exited(void *owner, const lis_result *r, const lis_error *err)
{
    sv_container *c = owner;
    c->main = NULL;
    sv_timer_cancel(c->s->loop, &c->stop_timer);
    c->exit_code = r->exit_code < 0 ? 137 : r->exit_code;
    if (r->exec_failed) {
        char m[400];
        int k = snprintf(m, sizeof m, "lis: starting the container's command failed: %s\r\n",
                         r->err_msg);
        attaches_write(c, 2, m, (size_t)k);
        c->exit_code = 127;
    }
    c->state = SV_EXITED;
    c->finished_at = lis_wallclock();
    attaches_end(c);
    waiters_fire(c, 0);
    unpark(c, 0);
    if (c->auto_remove)
        container_remove(c, NULL);
}

static const sv_proc_ops main_ops = {.output = main_output, .exited = main_exited};

static int main_start(sv_container *c, lis_error *err)
{
    lis_exec_spec e = {.argv = (const char *const *)c->cmd,
                       .cwd = c->workdir[0] ? c->workdir : "/",
                       .env = (const char *const *)c->env,
                       .in = LIS_STDIO_NULL,
                       .out = LIS_STDIO_PIPE,
                       .err = LIS_STDIO_PIPE,
                       .pty = c->tty,
                       .rows = c->copts.rows ? c->copts.rows : 24,
                       .cols = c->copts.cols ? c->copts.cols : 80};
    if (c->tty)
        e.out = e.err = LIS_STDIO_NULL;
    if (!(c->main = sv_proc_start(c->s->loop, c->sb, &e, &main_ops, c, err)))
        return -1;
    c->state = SV_RUNNING;
    c->started_at = lis_wallclock();
    c->finished_at = 0;
    c->exit_code = 0;
    c->s->started_total++;
    return 0;
}

/* ---- create ---------------------------------------------------------------------------- */

typedef struct create_job {
    sv_req *q;
    sv_container *c;
    lis_error err;
    int rc;
    lis_sandbox *sb;  /* made on the worker, handed to c on the loop thread */
    lis_monitor *mon; /* its monitor (the native API's effects), the same way */
    sv_created_cb cb; /* the native API's answer; NULL: Docker's */
} create_job;

static void container_free(sv_container *c)
{
    sv_timer_cancel(c->s->loop, &c->life);
    for (sv_container **p = &c->s->containers; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    for (sv_waiter *w = c->waiters; w; w = w->next)
        w->c = NULL;
    sv_net_leave_all(c);
    lis_monitor_free(c->mon); /* its sandbox is gone (or was never made) */
    lis_policy_free(c->policy);
    cJSON_Delete(c->config);
    sv_options_release(&c->copts);
    sv_strv_free(c->cmd);
    sv_strv_free(c->env);
    free(c->log);
    free(c);
}

void sv_container_spec(const sv_container *c, lis_sandbox_spec *spec, char name[32], char host[16])
{
    snprintf(name, 32, "dk-%.16s", c->id);
    snprintf(host, 16, "%.12s", c->id);
    *spec = (lis_sandbox_spec){.rootfs = c->rootfs,
                               .name = name,
                               .hostname = host,
                               .limits = c->limits,
                               .net = c->net,
                               .workdir = c->workdir[0] ? c->workdir : NULL};
    sv_options_spec(&c->copts, spec);
}

int sv_container_sandbox(const sv_container *c, const lis_sandbox_spec *spec, lis_monitor **mon,
                         lis_sandbox **out, lis_error *err)
{
    lis_sandbox_spec sp = *spec;
    int watched = mon && c->effects && c->s->hub;
    lis_net_rules rules = {.deny_domains = lis_policy_deny_domains(c->policy)};
    if (watched) /* the native API's effects: the monitor attached before any exec */
        sp.monitor = lis_monitor_spec_flags(sp.net);
    int rc = c->net == LIS_NET_PROXY
                 ? lis_net_sandbox_create(c->s->ctx, &sp, watched ? &rules : NULL, out, err)
                 : lis_sandbox_create(c->s->ctx, &sp, out, err);
    lis_monitor_opts mo = {.policy = c->policy};
    if (rc == 0 && watched && lis_monitor_attach(c->s->hub, *out, &mo, mon, err) < 0) {
        lis_error ign;
        lis_sandbox_destroy(*out, &ign);
        *out = NULL;
        rc = -1;
    }
    /* Docker makes WorkingDir: the runtime does at set-up (spec.workdir) */
    return rc;
}

static void create_work(void *arg)
{
    create_job *j = arg;
    char name[32], host[16];
    lis_sandbox_spec spec;
    sv_container_spec(j->c, &spec, name, host);
    j->rc = sv_container_sandbox(j->c, &spec, &j->mon, &j->sb, &j->err);
}

static void create_done(void *arg, int status)
{
    create_job *j = arg;
    sv_container *c = j->c;
    c->busy--;
    c->sb = j->sb;
    c->mon = j->mon;
    if (j->rc < 0) {
        if (j->cb)
            j->cb(j->q, NULL, j->err.msg);
        else
            sv_req_finish_error(j->q, 500, "creating the sandbox: %s", j->err.msg);
        container_free(c);
    } else if (j->cb) {
        j->cb(j->q, c, NULL);
    } else {
        if (c->config) {
            const cJSON *hc = cJSON_GetObjectItemCaseSensitive(c->config, "HostConfig");
            const cJSON *pb = cJSON_GetObjectItemCaseSensitive(hc, "PortBindings");
            lis_error e = {0};
            if (cJSON_IsObject(pb) && pb->child) {
                c->ports = sv_ports_start(c->s, c->sb, pb, &e);
                if (!c->ports) {
                    sv_req_finish_error(j->q, 500, "port forwarding: %s", e.msg);
                    container_remove(c, NULL);
                    free(j);
                    return;
                }
            }
        }
        char msg[600];
        if (sv_net_join_created(c, msg, sizeof msg) < 0) { /* its network went meanwhile */
            sv_req_finish_error(j->q, 404, "%s", msg);
            container_remove(c, NULL);
            free(j);
            return;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "Id", c->id);
        cJSON_AddArrayToObject(o, "Warnings");
        sv_req_finish(j->q, 201, sv_resp_json(o));
    }
    free(j);
}

static enum MHD_Result create(sv_req *q)
{
    cJSON *cfg = q->len ? cJSON_ParseWithLength(q->body, q->len) : NULL;
    if (!cJSON_IsObject(cfg)) {
        cJSON_Delete(cfg);
        return sv_reply_error(q, 400, "invalid JSON body for containers/create");
    }
    return sv_container_create(q, cfg, sv_arg(q, "name"), NULL, NULL);
}

void sv_container_discard(sv_container *c) { container_free(c); }

enum MHD_Result sv_container_create(sv_req *q, cJSON *cfg, const char *name, const char *idem,
                                    sv_created_cb cb)
{
    unsigned status;
    char msg[512];
    sv_container *c = sv_container_new(q->s, cfg, name, idem, cb != NULL, sv_conn_owner(q->cn),
                                       NULL, &status, msg, sizeof msg);
    if (!c) /* the native API says how to get a missing image (Docker's clients
             * match "No such image" and keep their own words) */
        return sv_reply_error(q, status, "%s%s", msg,
                              cb && status == 404 ? " (get it with lis rootfs pull IMAGE, or lis "
                                                    "rootfs import ROOTFS.tar --name IMAGE)"
                                                  : "");
    create_job *j = calloc(1, sizeof *j);
    if (j)
        *j = (create_job){.q = q, .c = c, .cb = cb};
    sv_req_suspend(q);
    if (!j || sv_job(q->s->loop, create_work, create_done, j) < 0) {
        free(j);
        c->busy--;
        container_free(c);
        sv_req_finish_error(q, 500, "out of memory");
    }
    return MHD_YES;
}

/* ---- delete ---------------------------------------------------------------------------- */

typedef struct rm_job {
    sv_req *q;
    sv_container *c;
    lis_proc **procs; /* to kill and reap on the worker */
    size_t nprocs;
    lis_sandbox *sb;
    int on_stack; /* no memory for a job: container_remove's own, run in place */
} rm_job;

static void kill_reap(lis_proc *p)
{
    lis_error err = {0};
    lis_result r;
    lis_proc_signal(p, SIGKILL, &err);
    lis_proc_wait(p, &r, &err);
    lis_result_free(&r);
}

/* Queues p for the worker, or (no memory for the list) kills and reaps it now. */
static void kill_or_keep(rm_job *j, lis_proc *p)
{
    if (j->procs)
        j->procs[j->nprocs++] = p;
    else
        kill_reap(p);
}

static void rm_work(void *arg)
{
    rm_job *j = arg;
    lis_error err = {0};
    for (size_t i = 0; i < j->nprocs; i++)
        kill_reap(j->procs[i]);
    if (j->sb && lis_sandbox_destroy(j->sb, &err) < 0)
        fprintf(stderr, "lis serve: %s\n", err.msg);
}

static void rm_done(void *arg, int status)
{
    rm_job *j = arg;
    sv_container *c = j->c;
    c->state = SV_REMOVED;
    waiters_fire(c, 1);
    for (sv_waiter *w = c->waiters; w; w = w->next)
        w->c = NULL;
    c->waiters = NULL;
    if (j->q)
        sv_req_finish(j->q, 204, NULL);
    unpark(c, 1);
    free(j->procs);
    if (!j->on_stack)
        free(j);
    sv_server *s = c->s;
    container_free(c);
    sv_autosnap_sweep(s); /* the fork snapshot it ran on may be unused now */
}

/* ---- a native sandbox's timeout (E2B's): the end of a leaked one -------------------------- */

static void expire(void *arg)
{
    sv_container *c = arg;
    if (sv_removing(c))
        return;
    if (c->busy || !c->sb) { /* a job on it: it goes once that is done */
        sv_timer_arm(c->s->loop, &c->life, 0.5, expire, c);
        return;
    }
    container_remove(c, NULL);
}

void sv_container_set_timeout(sv_container *c, double seconds)
{
    sv_timer_cancel(c->s->loop, &c->life);
    c->ends_at = seconds > 0 ? lis_wallclock() + seconds : 0;
    if (seconds > 0)
        sv_timer_arm(c->s->loop, &c->life, seconds, expire, c);
}

double sv_body_timeout(const cJSON *b)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "timeout");
    if (!t || cJSON_IsNull(t))
        return 0;
    if (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble > SV_TIMEOUT_MAX)
        return -1;
    return t->valuedouble;
}

void sv_container_remove(sv_container *c, sv_req *q) { container_remove(c, q); }

/* Kills what runs in c, answers what waits on it, and destroys its sandbox on a
 * worker; q (if any) is answered 204 when it is gone. Without memory for the
 * job the removal happens here, on the loop thread (slow, but it happens). */
static void container_remove(sv_container *c, sv_req *q)
{
    size_t n = 1;
    for (sv_child *ch = c->children; ch; ch = ch->next)
        n++;
    rm_job one = {.on_stack = 1}, *j = calloc(1, sizeof *j);
    lis_proc **procs = j ? calloc(n, sizeof *procs) : NULL;
    if (!procs) {
        free(j);
        j = &one; /* the procs are killed and reaped one by one below */
    }
    j->q = q;
    j->c = c;
    j->procs = procs;
    if (c->main) {
        lis_proc *p = sv_proc_detach(c->main);
        c->main = NULL;
        sv_timer_cancel(c->s->loop, &c->stop_timer);
        kill_or_keep(j, p);
        c->exit_code = 137;
        c->finished_at = lis_wallclock();
    }
    while (c->children) {
        sv_child *ch = c->children;
        c->children = ch->next;
        kill_or_keep(j, ch->proc);
        ch->detach(ch->owner);
    }
    attaches_end(c);
    unpark(c, 0);
    waiters_fire(c, 0);
    c->state = SV_REMOVING;
    sv_timer_cancel(c->s->loop, &c->life);
    c->ends_at = 0;
    if (c->ports) {
        sv_ports_stop(c->ports);
        c->ports = NULL;
    }
    sv_net_leave_all(c); /* its listeners in the others' namespaces go before its sandbox */
    j->sb = c->sb;
    c->sb = NULL;
    c->busy++;
    if (q)
        sv_req_suspend(q);
    if (j->on_stack || sv_job(c->s->loop, rm_work, rm_done, j) < 0) {
        rm_work(j);
        rm_done(j, 0);
    }
}

/* ---- signals ----------------------------------------------------------------------------- */

static int parse_signal(const char *s)
{
    if (!s || !*s)
        return SIGKILL;
    if (isdigit((unsigned char)s[0]))
        return atoi(s);
    if (!strncasecmp(s, "SIG", 3))
        s += 3;
    static const struct {
        const char *n;
        int v;
    } t[] = {{"KILL", SIGKILL}, {"TERM", SIGTERM},   {"INT", SIGINT},   {"HUP", SIGHUP},
             {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},   {"USR2", SIGUSR2}, {"STOP", SIGSTOP},
             {"CONT", SIGCONT}, {"WINCH", SIGWINCH}, {"ALRM", SIGALRM}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcasecmp(s, t[i].n))
            return t[i].v;
    return -1;
}

static void stop_timeout(void *arg)
{
    sv_container *c = arg;
    lis_error err = {0};
    if (c->main)
        lis_proc_signal(sv_proc_lis(c->main), SIGKILL, &err);
}

static enum MHD_Result stop(sv_req *q, sv_container *c)
{
    if (!c->main)
        return sv_reply_status(q, 304);
    const char *t = sv_arg(q, "t");
    double secs = t && *t ? atof(t) : c->copts.stop_timeout >= 0 ? c->copts.stop_timeout : 10;
    int sig = c->copts.stop_signal[0] ? parse_signal(c->copts.stop_signal) : SIGTERM;
    lis_error err = {0};
    /* The main command is not the namespace's PID 1 (lis-init is), so a
     * SIGTERM it does not handle kills it at once: no full-timeout wait. */
    lis_proc_signal(sv_proc_lis(c->main), secs <= 0 || sig <= 0 ? SIGKILL : sig, &err);
    if (secs > 0)
        sv_timer_arm(c->s->loop, &c->stop_timer, secs, stop_timeout, c);
    return park(c, q, P_EXIT);
}

static enum MHD_Result kill_(sv_req *q, sv_container *c)
{
    int sig = parse_signal(sv_arg(q, "signal"));
    if (sig <= 0 || sig >= 65)
        return sv_reply_error(q, 400, "Invalid signal: %s", sv_arg(q, "signal"));
    if (!c->main)
        return sv_reply_error(q, 409, "Cannot kill container: %s: Container %s is not running",
                              c->id, c->id);
    lis_error err = {0};
    if (lis_proc_signal(sv_proc_lis(c->main), sig, &err) < 0)
        return sv_reply_error(q, 500, "%s", err.msg);
    if (sig == SIGKILL) /* as dockerd: answered once the container is down */
        return park(c, q, P_EXIT);
    return sv_reply_status(q, 204);
}

/* ---- wait ----------------------------------------------------------------------------------- */

static ssize_t wait_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    sv_waiter *w = cls;
    if (!w->done) {
        if (w->q)
            sv_req_suspend(w->q);
        return 0;
    }
    if (pos >= w->len)
        return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = w->len - (size_t)pos < max ? w->len - (size_t)pos : max;
    memcpy(buf, w->body + pos, n);
    return (ssize_t)n;
}

static void wait_free(void *cls)
{
    sv_waiter *w = cls;
    if (w->c)
        for (sv_waiter **p = &w->c->waiters; *p; p = &(*p)->next)
            if (*p == w) {
                *p = w->next;
                break;
            }
    free(w);
}

static void wait_req_done(sv_req *q)
{
    sv_waiter *w = q->owner;
    if (w)
        w->q = NULL;
}

static enum MHD_Result wait_(sv_req *q, sv_container *c)
{
    const char *cond = sv_arg(q, "condition");
    sv_waiter *w = calloc(1, sizeof *w);
    if (!w)
        return sv_reply_error(q, 500, "out of memory");
    w->q = q;
    w->c = c;
    w->cond = cond && !strcmp(cond, "next-exit") ? W_NEXT_EXIT
              : cond && !strcmp(cond, "removed") ? W_REMOVED
                                                 : W_NOT_RUNNING;
    w->next = c->waiters;
    c->waiters = w;
    q->owner = w;
    q->on_complete = wait_req_done;
    if (w->cond == W_NOT_RUNNING && !c->main && c->state != SV_CREATED)
        waiter_complete(w, c->exit_code, NULL);
    /* the headers go out at once (the CLI waits for them before start); the
     * body when the condition holds */
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256, wait_read, w, wait_free);
    if (!r) {
        wait_free(w);
        q->owner = NULL;
        return MHD_NO;
    }
    sv_resp_headers(r);
    MHD_add_response_header(r, "Content-Type", "application/json");
    return sv_reply(q, 200, r);
}

/* ---- attach ----------------------------------------------------------------------------------- */

static void attach_upgraded(void *cls, struct MHD_Connection *conn, void *con_cls,
                            const char *extra, size_t nextra, MHD_socket sock,
                            struct MHD_UpgradeResponseHandle *urh)
{
    sv_req *q = con_cls;
    char *id = cls;
    sv_container *c = sv_container_find(q->s, id);
    free(id);
    sv_attach *a = calloc(1, sizeof *a);
    if (!a) {
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        return;
    }
    a->st = sv_stream_new(q->s->loop, sock, urh, c ? !c->tty : 1, NULL, 0, &attach_ops, a);
    if (!a->st) {
        free(a);
        return;
    }
    if (!c || (!c->main && c->state != SV_CREATED)) {
        sv_stream_end(a->st);
        free(a);
        return;
    }
    a->c = c;
    a->next = c->attaches;
    c->attaches = a;
}

static enum MHD_Result attach(sv_req *q, sv_container *c)
{
    char *id = strdup(c->id);
    struct MHD_Response *r = id ? MHD_create_response_for_upgrade(attach_upgraded, id) : NULL;
    if (!r) {
        free(id);
        return sv_reply_error(q, 500, "out of memory");
    }
    sv_resp_headers(r);
    MHD_add_response_header(r, "Content-Type", "application/vnd.docker.raw-stream");
    MHD_add_response_header(r, "Upgrade", "tcp");
    return sv_reply(q, 101, r);
}

/* ---- routing ---------------------------------------------------------------------------------- */

static enum MHD_Result on_container(sv_req *q, sv_container *c, const char *op)
{
    const char *m = q->method;
    int post = !strcmp(m, "POST");
    if (!strcmp(op, "json") && !strcmp(m, "GET"))
        return sv_reply_json(q, 200, sv_container_inspect(c));
    if (post && !strcmp(op, "wait"))
        return wait_(q, c);
    if (!strcmp(op, "logs") && !strcmp(m, "GET"))
        return logs(q, c);
    if (sv_removing(c))
        return sv_reply_error(q, 409, "removal of container %s is already in progress", c->id);
    if (!c->sb)
        return sv_reply_error(q, 409, "container %s is being created", c->id);
    if (post && !strcmp(op, "start")) {
        if (c->main)
            return sv_reply_status(q, 304);
        lis_error err = {0};
        if (main_start(c, &err) < 0)
            return sv_reply_error(q, 500, "starting the container: %s", err.msg);
        return sv_reply_status(q, 204);
    }
    if (post && !strcmp(op, "stop"))
        return stop(q, c);
    if (post && !strcmp(op, "restart")) {
        if (c->main)
            return stop(q, c);
        lis_error err = {0};
        return main_start(c, &err) < 0 ? sv_reply_error(q, 500, "%s", err.msg)
                                       : sv_reply_status(q, 204);
    }
    if (post && !strcmp(op, "kill"))
        return kill_(q, c);
    if (post && !strcmp(op, "attach"))
        return attach(q, c);
    if (post && !strcmp(op, "resize"))
        return sv_reply_status(q, 200);
    if (post && !strcmp(op, "exec"))
        return sv_reply_error(q, 500, "internal: exec routed to containers");
    if (!strcmp(op, "archive")) {
        if (!strcmp(m, "HEAD") || !strcmp(m, "GET"))
            return sv_archive_head_get(q, c->sb, c->name, !strcmp(m, "HEAD"), &c->busy);
        if (!strcmp(m, "PUT"))
            return sv_archive_put(q, c->sb, c->name, &c->busy);
    }
    return sv_reply_error(q, 404, "page not found");
}

/* rest: "create", "json", "ID" (DELETE), "ID/op" */
enum MHD_Result sv_containers_route(sv_req *q, const char *rest)
{
    if (!strcmp(rest, "create") && !strcmp(q->method, "POST"))
        return create(q);
    if (!strcmp(rest, "json") && !strcmp(q->method, "GET"))
        return sv_containers_list(q);
    char ref[1024];
    const char *op = strrchr(rest, '/');
    if (!strcmp(q->method, "DELETE")) {
        sv_container *c = sv_container_find(q->s, rest);
        if (!c)
            return sv_reply_error(q, 404, "No such container: %s", rest);
        if (c->main && !sv_arg_bool(q, "force"))
            return sv_reply_error(q, 409,
                                  "You cannot remove a running container %s. Stop the "
                                  "container before attempting removal or force remove",
                                  c->id);
        if (sv_removing(c)) /* e.g. --rm after stop: answer when it is gone */
            return park(c, q, P_REMOVED);
        if (c->busy)
            return sv_reply_error(q, 409,
                                  "container %s is busy (being created or copied); try "
                                  "again",
                                  c->id);
        container_remove(c, q);
        return MHD_YES;
    }
    if (!op)
        return sv_reply_error(q, 404, "page not found");
    snprintf(ref, sizeof ref, "%.*s", (int)(op - rest), rest);
    sv_container *c = sv_container_find(q->s, ref);
    if (!c)
        return sv_reply_error(q, 404, "No such container: %s", ref);
    return on_container(q, c, op + 1);
}

void sv_containers_shutdown(sv_server *s)
{
    while (s->containers) {
        sv_container *c = s->containers;
        lis_error err = {0};
        if (c->busy) { /* a job (create, copy, snapshot...) still runs on it: let it finish */
            sv_loop_run_once(s->loop, 50);
            continue;
        }
        if (sv_removing(c)) {
            sv_loop_run_once(s->loop, 50);
            continue;
        }
        c->auto_remove = 0;
        container_remove(c, NULL);
        (void)err;
    }
}
