/* server.c - `lis serve`: libmicrohttpd on our own epoll loop (no thread of
 * its own: MHD's epoll fd sits in the loop's set and MHD_run does one
 * non-blocking round), the unix socket (0600, in the user's runtime dir),
 * an optional TCP listener, SIGTERM/SIGINT through a signalfd, and the
 * clean shutdown: every container's sandbox is destroyed before we exit. */
#include "serve.h"

#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define SV_BODY_MAX (1ull << 30) /* request bodies (archives) are held in memory */

typedef struct daemon_ref {
    struct MHD_Daemon *d;
    sv_watch w;
} daemon_ref;

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
        snprintf(q->method, sizeof q->method, "%s", method);
        *con_cls = q;
        if (s->opts.verbose)
            fprintf(stderr, "lis serve: %s %s\n", method, url);
        return MHD_YES;
    }
    if (*size) {
        if (!q->too_big && q->len + *size > SV_BODY_MAX)
            q->too_big = 1;
        if (!q->too_big) {
            if (LIS_GROW(q->body, q->cap, q->len + *size + 1) < 0)
                return MHD_NO;
            memcpy(q->body + q->len, data, *size);
            q->len += *size;
            q->body[q->len] = 0;
        }
        *size = 0;
        return MHD_YES;
    }
    if (q->resp) { /* a deferred answer, after the resume */
        struct MHD_Response *r = q->resp;
        q->resp = NULL;
        return sv_reply(q, q->status, r);
    }
    if (q->suspended)
        return MHD_YES;
    if (q->too_big)
        return sv_reply_error(q, 413, "request body too large (at most 1 GiB)");
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
    free(q->body);
    free(q);
    *con_cls = NULL;
}

static void mhd_ev(void *arg, uint32_t ev)
{
    daemon_ref *d = arg;
    MHD_run(d->d);
}

static int unix_listener(const char *path, lis_error *err)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return lis_fail(err, ENAMETOOLONG, "socket path too long: %s", path);
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return lis_fail_errno(err, "socket");
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0 && connect(probe, (struct sockaddr *)&a, sizeof a) == 0) {
        close(probe);
        close(fd);
        return lis_fail(err, EADDRINUSE, "another server listens on %s (stop it, or use --socket)",
                        path);
    }
    if (probe >= 0)
        close(probe);
    unlink(path); /* a stale socket of a server that died */
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    umask(old);
    if (rc < 0 || chmod(path, 0600) < 0 || listen(fd, 512) < 0) {
        int e = errno;
        close(fd);
        return lis_fail_errnum(err, e, "listening on %s", path);
    }
    return fd;
}

static int tcp_listener(const char *spec, lis_error *err)
{
    char host[64];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof host)
        return lis_fail(err, EINVAL, "--tcp wants HOST:PORT (e.g. 127.0.0.1:2375), got '%s'", spec);
    snprintf(host, sizeof host, "%.*s", (int)(colon - spec), spec);
    char *end;
    long port = strtol(colon + 1, &end, 10);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (*end || port <= 0 || port > 65535 || inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return lis_fail(err, EINVAL, "--tcp wants an IPv4 HOST:PORT, got '%s'", spec);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 512) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return lis_fail_errnum(err, e, "listening on %s", spec);
    }
    return fd;
}

static struct MHD_Daemon *start_mhd(sv_server *s, int fd, lis_error *err)
{
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE, 0, NULL,
                         NULL, handler, s, MHD_OPTION_LISTEN_SOCKET, fd,
                         MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_CONNECTION_LIMIT,
                         (unsigned)4000, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)0,
                         MHD_OPTION_END);
    if (!d)
        lis_fail(err, EIO, "libmicrohttpd could not start on the listener");
    return d;
}

static void sig_ev(void *arg, uint32_t ev)
{
    int *stop = arg;
    struct signalfd_siginfo si;
    int fd = stop[1];
    while (read(fd, &si, sizeof si) == (ssize_t)sizeof si)
        stop[0] = 1;
}

/* The runtime's warnings (e.g. "runs with fallback limits") are the same for
 * every container: print each distinct line once. */
static void warn_once(void *arg, const char *line)
{
    char(*seen)[160] = arg;
    char key[160];
    snprintf(key, sizeof key, "%s", line);
    for (char *p = key; *p; p++) /* sandbox names differ: compare without them */
        if (p[0] == 'd' && p[1] == 'k' && p[2] == '-')
            memset(p, 'x', strnlen(p, 19) < 19 ? strnlen(p, 19) : 19);
    for (int i = 0; i < 8; i++) {
        if (!strcmp(seen[i], key))
            return;
        if (!seen[i][0]) {
            snprintf(seen[i], sizeof seen[i], "%s", key);
            fprintf(stderr, "lis serve: warning: %s\n", line);
            return;
        }
    }
}

int lis_serve_run(const lis_serve_opts *opts, lis_error *err)
{
    sv_server s0 = {0}, *s = &s0;
    s->opts = *opts;
    static char seen[8][160];
    lis_ctx_opts co = {.run_dir = opts->run_dir,
                       .data_dir = opts->data_dir,
                       .warn = warn_once,
                       .warn_arg = seen};
    s->ctx = lis_ctx_new(&co, err);
    if (!s->ctx)
        return -1;
    s->data_dir = lis_ctx_data_dir(s->ctx);
    char sock[4096];
    snprintf(sock, sizeof sock, "%s", opts->socket_path ? opts->socket_path : "");
    if (!sock[0])
        snprintf(sock, sizeof sock, "%s/docker.sock", lis_ctx_run_dir(s->ctx));
    snprintf(s->tmp_dir, sizeof s->tmp_dir, "%s/serve-tmp-%d", s->data_dir, (int)getpid());
    lis_host_mkdir_p(s->tmp_dir, 0700, err);
    signal(SIGPIPE, SIG_IGN);
    /* each container holds a few fds (lifeline, pidfd, pipes) and each exec
     * more: 64 containers x parallel execs pass the usual soft limit of 1024 */
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
    int stop[2] = {0, signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)};
    daemon_ref dr[2] = {{0}};
    int nd = 0, rc = -1, ufd = -1, tfd = -1;
    s->loop = sv_loop_new(opts->workers, err);
    if (!s->loop)
        goto out;
    if ((ufd = unix_listener(sock, err)) < 0)
        goto out;
    if (opts->tcp && (tfd = tcp_listener(opts->tcp, err)) < 0)
        goto out;
    int fds[2] = {ufd, tfd};
    for (int i = 0; i < 2; i++) {
        if (fds[i] < 0)
            continue;
        dr[nd].d = start_mhd(s, fds[i], err);
        if (!dr[nd].d)
            goto out;
        const union MHD_DaemonInfo *inf = MHD_get_daemon_info(dr[nd].d, MHD_DAEMON_INFO_EPOLL_FD);
        sv_loop_watch(s->loop, &dr[nd].w, inf->epoll_fd, EPOLLIN, mhd_ev, &dr[nd]);
        nd++;
    }
    sv_watch sw;
    sv_loop_watch(s->loop, &sw, stop[1], EPOLLIN, sig_ev, stop);
    fprintf(stderr, "lis serve: listening on unix://%s%s%s (API " SV_API_VERSION ")\n", sock,
            opts->tcp ? " and tcp://" : "", opts->tcp ? opts->tcp : "");
    int wait_ms = 1000;
    while (!stop[0]) {
        if (sv_loop_run_once(s->loop, wait_ms) < 0)
            break;
        wait_ms = 1000;
        for (int i = 0; i < nd; i++) { /* resumed connections and MHD's own timeouts */
            MHD_run(dr[i].d);
            /* MHD may have work left that no fd will announce (the rest of a
             * resumed response, the end of a stream, buffered upload data):
             * its timeout says so (0: at once) */
            MHD_UNSIGNED_LONG_LONG to;
            if (MHD_get_timeout(dr[i].d, &to) == MHD_YES && to < (MHD_UNSIGNED_LONG_LONG)wait_ms)
                wait_ms = (int)to;
        }
    }
    fprintf(stderr, "lis serve: stopping: removing %s containers\n", s->containers ? "the" : "no");
    for (int i = 0; i < nd; i++)
        MHD_quiesce_daemon(dr[i].d);
    sv_containers_shutdown(s);
    lis_monitor_hub_free(s->hub); /* after the monitors of its containers */
    s->hub = NULL;
    sv_autosnap_shutdown(s);
    while (s->suspended)
        sv_req_finish_error(s->suspended, 503, "lis serve is shutting down");
    for (int i = 0; i < nd; i++)
        MHD_run(dr[i].d);
    rc = 0;
out:
    for (int i = 0; i < nd; i++) {
        sv_loop_unwatch(s->loop, &dr[i].w);
        MHD_quiesce_daemon(dr[i].d); /* the listeners stay ours to close */
        MHD_stop_daemon(dr[i].d);
    }
    if (ufd >= 0) {
        close(ufd);
        unlink(sock);
    }
    if (tfd >= 0)
        close(tfd);
    sv_execs_free(s);
    sv_state_free(s);
    sv_loop_free(s->loop);
    lis_error e2 = {0};
    lis_host_rmtree(s->tmp_dir, &e2);
    if (stop[1] >= 0)
        close(stop[1]);
    lis_ctx_free(s->ctx);
    return rc;
}
