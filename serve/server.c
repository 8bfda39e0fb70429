/* server.c - `lis serve`: the request handler libmicrohttpd calls (each
 * request's connection phase and body caps), the main loop (libmicrohttpd on our own epoll loop: no thread of its
 * own, its epoll fd in the loop's set), SIGTERM/SIGINT through a signalfd,
 * --idle-timeout, and the clean shutdown: every container's sandbox is
 * destroyed before we exit. The listeners and the connections' bounds are
 * listen.c's. */
#include "serve.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

/* An answer before the body was read: the connection cannot carry another
 * request, so it closes (libmicrohttpd does not read what is left). */
static enum MHD_Result refuse_early(sv_req *q, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum MHD_Result refuse_early(sv_req *q, unsigned status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "message", msg);
    struct MHD_Response *r = sv_resp_json(o);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    return sv_reply(q, status, r);
}

/* The first call of a request: its headers are in. */
static enum MHD_Result request_start(sv_server *s, sv_req *q, const char *url)
{
    sv_conn_phase(q->cn, SV_CONN_BODY);
    q->body_max = sv_route_body_max(q->method, url);
    const char *cl = MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, "Content-Length");
    unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;
    if (len > q->body_max)
        return refuse_early(q, 413, "request body too large: %s %s takes at most %zu bytes",
                            q->method, url, q->body_max);
    if (len >
        SV_BODY_TOTAL_MAX - (s->body_bytes < SV_BODY_TOTAL_MAX ? s->body_bytes : SV_BODY_TOTAL_MAX))
        return refuse_early(q, 503,
                            "lis serve holds %zu bytes of request bodies already (at most %llu "
                            "at once): retry later",
                            s->body_bytes, (unsigned long long)SV_BODY_TOTAL_MAX);
    return MHD_YES;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *size, void **con_cls)
{
    sv_server *s = cls;
    sv_req *q = *con_cls;
    if (!q) {
        q = calloc(1, sizeof *q);
        if (!q)
            return MHD_NO;
        q->s = s;
        q->conn = conn;
        q->cn = sv_conn_of(conn);
        snprintf(q->method, sizeof q->method, "%s", method);
        *con_cls = q;
        if (s->opts.verbose)
            fprintf(stderr, "lis serve: %s %s\n", method, url);
        return request_start(s, q, url);
    }
    if (*size) {
        /* a chunked body past its cap (a declared one was refused at the
         * start): no answer can be queued mid-body, so the connection ends */
        if (q->len + *size > q->body_max || s->body_bytes + *size > SV_BODY_TOTAL_MAX)
            return MHD_NO;
        if (LIS_GROW(q->body, q->cap, q->len + *size + 1) < 0)
            return MHD_NO;
        memcpy(q->body + q->len, data, *size);
        q->len += *size;
        q->body[q->len] = 0;
        s->body_bytes += *size;
        *size = 0;
        sv_conn_phase(q->cn, SV_CONN_BODY); /* progress */
        return MHD_YES;
    }
    if (q->resp) { /* a deferred answer, after the resume */
        struct MHD_Response *r = q->resp;
        q->resp = NULL;
        return sv_reply(q, q->status, r);
    }
    if (q->suspended)
        return MHD_YES;
    sv_conn_phase(q->cn, SV_CONN_ACTIVE);
    enum MHD_Result rc = sv_route(q, url);
    if (!q->suspended && q->resp) {
        struct MHD_Response *r = q->resp;
        q->resp = NULL;
        return sv_reply(q, q->status, r);
    }
    return rc;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode why)
{
    sv_req *q = *con_cls;
    if (!q)
        return;
    if (q->on_complete)
        q->on_complete(q);
    if (q->suspended)
        for (sv_req **p = &q->s->suspended; *p; p = &(*p)->next_susp)
            if (*p == q) {
                *p = q->next_susp;
                break;
            }
    if (q->resp)
        MHD_destroy_response(q->resp);
    /* its connection's phase (the connection may be closing: the record is
     * there until libmicrohttpd's CLOSED notification) */
    sv_conn_phase(sv_conn_of(conn), q->upgraded ? SV_CONN_UPGRADED : SV_CONN_IDLE);
    q->s->body_bytes -= q->len < q->s->body_bytes ? q->len : q->s->body_bytes;
    free(q->body);
    free(q);
    *con_cls = NULL;
}

static const sv_http http = {.handler = handler, .completed = completed};

static void sig_ev(void *arg, uint32_t ev)
{
    sv_server *s = arg;
    struct signalfd_siginfo si;
    while (read(s->sigfd, &si, sizeof si) == (ssize_t)sizeof si)
        s->stop = 1;
}

/* Nothing to serve: no container (of any state), no connection, no job left
 * (image removals and their trash), no group of episodes queued or running. */
static int idle(sv_server *s)
{
    return !s->containers && !s->nconns && !s->suspended && !s->removing && !s->trash_jobs &&
           !sv_rl_busy(s);
}

static void sweep(void *arg)
{
    sv_server *s = arg;
    sv_conns_sweep(s);
    if (s->opts.idle_timeout > 0) {
        double now = lis_now();
        if (!idle(s))
            s->idle_since = 0;
        else if (!s->idle_since)
            s->idle_since = now;
        else if (now - s->idle_since >= s->opts.idle_timeout)
            s->stop = 2;
    }
    sv_timer_arm(s->loop, &s->sweep, 1.0, sweep, s);
}

/* The runtime's warnings (e.g. "runs with fallback limits") are the same for
 * every container: each distinct line is printed once (past WARN_KEYS distinct
 * ones, every line is). The runtime calls this from the worker threads that
 * create sandboxes, hence the lock. */
#define WARN_KEYS 8
typedef struct warn_once {
    pthread_mutex_t mu;
    char seen[WARN_KEYS][160];
} warn_once;

static void warn_once_cb(void *arg, const char *line)
{
    warn_once *w = arg;
    char key[160];
    snprintf(key, sizeof key, "%s", line);
    for (char *p = key; *p; p++) /* sandbox names differ: compare without them */
        if (p[0] == 'd' && p[1] == 'k' && p[2] == '-')
            memset(p, 'x', strnlen(p, 19) < 19 ? strnlen(p, 19) : 19);
    int print = 1;
    pthread_mutex_lock(&w->mu);
    for (int i = 0; i < WARN_KEYS; i++) {
        if (!strcmp(w->seen[i], key)) {
            print = 0;
            break;
        }
        if (!w->seen[i][0]) {
            snprintf(w->seen[i], sizeof w->seen[i], "%s", key);
            break;
        }
    }
    pthread_mutex_unlock(&w->mu);
    if (print)
        fprintf(stderr, "lis serve: warning: %s\n", line);
}

static void serve_loop(sv_server *s)
{
    int wait_ms = 1000;
    while (!s->stop) {
        if (sv_loop_run_once(s->loop, wait_ms) < 0)
            break;
        wait_ms = sv_listen_run(s, 1000);
    }
    if (s->stop == 2)
        fprintf(stderr,
                "lis serve: no container and no connection for %.0f s (--idle-timeout): "
                "exiting\n",
                s->opts.idle_timeout);
}

static void shutdown_all(sv_server *s)
{
    fprintf(stderr, "lis serve: stopping: removing %s containers\n", s->containers ? "the" : "no");
    sv_listen_quiesce(s);
    sv_rl_stop(s); /* its episodes' sandboxes first, while the hub is there */
    sv_containers_shutdown(s);
    while (s->networks) /* empty now: their members were the containers */
        sv_network_free(s, s->networks);
    sv_timer_cancel(s->loop, &s->net_scan);
    lis_monitor_hub_free(s->hub); /* after the monitors of its containers */
    s->hub = NULL;
    sv_autosnap_shutdown(s);
    while (s->suspended)
        sv_req_finish_error(s->suspended, 503, "lis serve is shutting down");
    sv_loop_close_all(s->loop); /* streams with bytes their client never read */
    sv_listen_run(s, 0);
}

int lis_serve_run(const lis_serve_opts *opts, lis_error *err)
{
    sv_server s0 = {.sigfd = -1, .http = &http}, *s = &s0;
    s->opts = *opts;
    warn_once warned = {.mu = PTHREAD_MUTEX_INITIALIZER};
    lis_ctx_opts co = {.run_dir = opts->run_dir,
                       .data_dir = opts->data_dir,
                       .warn = warn_once_cb,
                       .warn_arg = &warned};
    s->ctx = lis_ctx_new(&co, err);
    if (!s->ctx)
        return -1;
    s->data_dir = lis_ctx_data_dir(s->ctx);
    char sock[4096];
    snprintf(sock, sizeof sock, "%s", opts->socket_path ? opts->socket_path : "");
    if (!sock[0])
        snprintf(sock, sizeof sock, "%s/docker.sock", lis_ctx_run_dir(s->ctx));
    snprintf(s->tmp_dir, sizeof s->tmp_dir, "%s/serve-tmp-%d", s->data_dir, (int)getpid());
    int rc = -1;
    if (lis_host_mkdir_p(s->tmp_dir, 0700, err) < 0)
        goto out;
    signal(SIGPIPE, SIG_IGN);
    /* each container holds a few fds (lifeline, pidfd, pipes), each exec more,
     * and each connection one: past the usual soft limit of 1024 */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    s->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    s->loop = sv_loop_new(opts->workers, err);
    if (!s->loop)
        goto out;
    sv_watch sw = {0};
    if (s->sigfd < 0 || sv_loop_watch(s->loop, &sw, s->sigfd, EPOLLIN, sig_ev, s) < 0) {
        lis_fail_errno(err, "watching SIGTERM and SIGINT (signalfd)");
        goto out;
    }
    if (sv_rl_start(s, err) < 0 || sv_listen_start(s, sock, err) < 0)
        goto out;
    if (opts->tcp && opts->tcp_no_auth)
        fprintf(stderr,
                "lis serve: WARNING: tcp://%s has NO AUTHENTICATION: whoever reaches it runs "
                "code as you, reads and writes your sandboxes and images; only on a network "
                "where every host is trusted (--tls-dir is the way otherwise)\n",
                opts->tcp);
    if (opts->idle_timeout > 0)
        fprintf(stderr, "lis serve: exits after %.0f s with no container and no connection\n",
                opts->idle_timeout);
    sv_timer_arm(s->loop, &s->sweep, 1.0, sweep, s);
    serve_loop(s);
    shutdown_all(s);
    rc = 0;
out:
    sv_rl_stop(s); /* a start that failed after it opened */
    lis_monitor_hub_free(s->hub);
    s->hub = NULL;
    if (s->loop)
        sv_timer_cancel(s->loop, &s->sweep);
    sv_listen_stop(s); /* the socket file goes too, when it is still ours */
    sv_execs_free(s);
    sv_state_free(s);
    sv_loop_free(s->loop);
    lis_error e2 = {0};
    lis_host_rmtree(s->tmp_dir, &e2);
    if (s->sigfd >= 0)
        close(s->sigfd);
    lis_ctx_free(s->ctx);
    return rc;
}
