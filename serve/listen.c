/* listen.c - the listeners of `lis serve` and every connection on them.
 *
 * We accept, not libmicrohttpd: each listener's daemon runs without a socket
 * of its own (MHD_USE_NO_LISTEN_SOCKET) and is handed the connections we
 * admit (MHD_add_connection). So the caps are ours: at most max_conns open
 * connections, and on TCP at most max_conns_per_client from one address; a
 * new connection over a cap takes the place of the one that has been idle
 * longest (of that address, for the per-address cap), and is refused only
 * when none is idle. Each connection is tracked from libmicrohttpd's
 * accept to its close, with its phase (server.c sets it) and the deadline of
 * that phase:
 *   idle (no request, headers still coming, or a TLS handshake):
 *     --conn-timeout (SV_CONN_TIMEOUT), counted
 *     from the end of the last request, so trickled headers do not extend it;
 *   body (headers in, body coming): as long without a byte;
 *   active or upgraded: none (a wait, a followed log, an exec stream).
 * A connection is dropped by shutting its socket down: libmicrohttpd sees the
 * hang-up on its next round and closes it as any other (one still in its TLS
 * handshake is closed at once: libmicrohttpd has not seen it).
 *
 * The stall: libmicrohttpd 0.9.75 (Debian 12) parses a chunk's size line in
 * its connection buffer; a line longer than the buffer (a huge chunk
 * extension) fills it, the connection stops reading yet stays on the daemon's
 * ready list, so MHD_get_timeout says 0 for ever: 100 % CPU and a leaked
 * connection. Upstream's rework of buffer exhaustion (1.0.0, commit 6ee7fa38,
 * "Rewritten handling of exhaustion of memory pool when receiving") answers
 * such a line with an error; here, a body whose socket has bytes waiting (or
 * an end) that nothing read for SV_CONN_STUCK seconds is such a stall, and is
 * dropped. It is seen sooner by its own sign: while the daemon says it has
 * work at once (timeout 0, the spin), every SV_STALL_PROBE the bodies are
 * looked at, and one whose bytes still wait, no fewer than at the last look,
 * with no byte of it taken in between (libmicrohttpd ran meanwhile), is
 * dropped then: a stall costs ~0.1 s of a core, not 3 s of spinning that
 * slows every other client (issue 29). */
#include "serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* The kernel's queue of connections not yet accepted: a flood of connects must
 * not make a legitimate client's connect fail (EAGAIN on a full unix socket
 * queue) while the loop catches up (the kernel caps it at somaxconn). */
#define SV_BACKLOG 4096

typedef struct sv_listener {
    sv_server *s;
    int fd;
    int tcp;         /* per-address caps apply */
    sv_tls_ctx *tls; /* mutual TLS (tls.c): only verified clients reach the daemon */
    int no_auth;     /* --tcp without TLS: nobody is known to be the owner */
    struct MHD_Daemon *d;
    sv_conn *adding; /* the record MHD_add_connection's notification takes */
    sv_watch w_accept, w_mhd;
    sv_timer retry;  /* accept paused (out of fds, nothing to drop) */
    double probe_at; /* the next look for stalled bodies while the daemon spins */
    char name[300];
    char path[108]; /* the unix socket's file, "" for TCP */
    dev_t dev;      /* ... and its identity, to remove only ours */
    ino_t ino;
    struct sv_listener *next;
} sv_listener;

struct sv_conn {
    sv_listener *l;
    int fd;                      /* libmicrohttpd's socket (on TLS the plaintext end); -1 before */
    char addr[INET6_ADDRSTRLEN]; /* the client's address on TCP; "" on the unix socket */
    sv_conn_state state;
    double since;       /* when it entered its phase, or a body's last byte */
    int dropping;       /* shut down by us: libmicrohttpd closes it next */
    int probed;         /* probe_stalls saw bytes wait unread: */
    int probe_unread;   /* how many, */
    double probe_since; /* and the phase's since then */
    int in_mhd;         /* between libmicrohttpd's STARTED and CLOSED notifications */
    sv_tlsconn *relay;  /* its TLS (tls.c), until that ends */
    struct sockaddr_storage sa;
    socklen_t salen;
    sv_conn *prev, *next;
};

/* ---- the connections ---------------------------------------------------------------- */

sv_conn *sv_conn_of(struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void sv_conn_phase(sv_conn *c, sv_conn_state st)
{
    if (!c)
        return;
    c->state = st;
    c->since = lis_now();
}

int sv_conn_owner(const sv_conn *c) { return c && !c->l->no_auth; }

int sv_conn_gone(const sv_conn *c)
{
    char b;
    if (!c || c->fd < 0)
        return 0;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static sv_conn *conn_new(sv_listener *l, const struct sockaddr_storage *sa, socklen_t salen,
                         const char *addr)
{
    sv_server *s = l->s;
    sv_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    *c = (sv_conn){.l = l, .fd = -1, .state = SV_CONN_IDLE, .since = lis_now(), .salen = salen};
    memcpy(&c->sa, sa, salen <= sizeof c->sa ? salen : sizeof c->sa);
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    /* appended: the list stays in the order of arrival */
    sv_conn **tail = &s->conns, *prev = NULL;
    while (*tail) {
        prev = *tail;
        tail = &(*tail)->next;
    }
    c->prev = prev;
    *tail = c;
    s->nconns++;
    return c;
}

/* Gone from both libmicrohttpd and its relay: the record goes. */
static void conn_free_if_done(sv_conn *c)
{
    if (c->in_mhd || c->relay)
        return;
    sv_server *s = c->l->s;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    free(c);
}

static void drop(sv_conn *c, const char *why)
{
    if (c->dropping)
        return;
    c->dropping = 1;
    if (c->l->s->opts.verbose)
        fprintf(stderr, "lis serve: closing a connection%s%s: %s\n", c->addr[0] ? " from " : "",
                c->addr, why);
    if (c->in_mhd)
        shutdown(c->fd, SHUT_RDWR);
    else if (c->relay)
        sv_tlsconn_close(c->relay); /* its gone callback may free c */
}

static void notify(void *cls, struct MHD_Connection *mc, void **ctx,
                   enum MHD_ConnectionNotificationCode code)
{
    sv_listener *l = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        sv_conn *c = *ctx;
        *ctx = NULL;
        if (c) {
            c->in_mhd = 0;
            conn_free_if_done(c);
        }
        return;
    }
    sv_conn *c = l->adding; /* MHD_add_connection notifies before it returns */
    l->adding = NULL;
    if (!c) { /* not one of ours: untracked means unbounded, so it goes at once */
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (fd)
            shutdown(fd->connect_fd, SHUT_RDWR);
        return;
    }
    c->in_mhd = 1;
    *ctx = c;
}

/* fd (the client's socket, or the plaintext end of its TLS) to libmicrohttpd. */
static void to_mhd(sv_conn *c, int fd)
{
    c->fd = fd;
    c->l->adding = c;
    /* on failure libmicrohttpd has closed fd (and notified nothing) */
    (void)MHD_add_connection(c->l->d, fd, (struct sockaddr *)&c->sa, c->salen);
    c->l->adding = NULL;
    sv_conn_phase(c, SV_CONN_IDLE); /* the idle deadline starts with HTTP */
    conn_free_if_done(c);
}

static void tls_ready(void *arg, int fd) { to_mhd(arg, fd); }

static void tls_gone(void *arg)
{
    sv_conn *c = arg;
    c->relay = NULL;
    conn_free_if_done(c);
}

/* The connection idle longest (of addr when it is not NULL), or NULL. */
static sv_conn *oldest_idle(sv_server *s, const char *addr)
{
    sv_conn *best = NULL;
    for (sv_conn *c = s->conns; c; c = c->next)
        if (!c->dropping && c->state == SV_CONN_IDLE && (!addr || !strcmp(c->addr, addr)) &&
            (!best || c->since < best->since))
            best = c;
    return best;
}

/* Whether a new connection from addr ("" off TCP) may come in, after dropping
 * the idle one whose place it takes. */
static int admit(sv_listener *l, const char *addr)
{
    sv_server *s = l->s;
    unsigned live = 0, mine = 0;
    unsigned max = s->opts.max_conns ? s->opts.max_conns : SV_CONNS_MAX;
    unsigned per =
        s->opts.max_conns_per_client ? s->opts.max_conns_per_client : SV_CONNS_PER_CLIENT;
    for (sv_conn *c = s->conns; c; c = c->next)
        if (!c->dropping) {
            live++;
            mine += l->tcp && c->l->tcp && !strcmp(c->addr, addr);
        }
    if (l->tcp && mine >= per) {
        sv_conn *v = oldest_idle(s, addr);
        if (!v)
            return 0;
        drop(v, "its client is at --max-conns-per-client: the oldest idle one goes");
        live--;
    }
    if (live >= max) {
        sv_conn *v = oldest_idle(s, NULL);
        if (!v)
            return 0;
        drop(v, "at --max-conns: the oldest idle connection goes");
    }
    return 1;
}

static void accept_resume(void *arg)
{
    sv_listener *l = arg;
    if (sv_loop_events(l->s->loop, &l->w_accept, EPOLLIN) < 0) /* never deaf: try again */
        sv_timer_arm(l->s->loop, &l->retry, 1.0, accept_resume, l);
}

static void accept_ev(void *arg, uint32_t ev)
{
    sv_listener *l = arg;
    for (int i = 0; i < 256; i++) { /* a flood cannot keep the loop here */
        struct sockaddr_storage a;
        socklen_t alen = sizeof a;
        int fd = accept4(l->fd, (struct sockaddr *)&a, &alen, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of fds: an idle connection makes room, else accepting
                 * waits a second (the listener would wake us at once) */
                sv_conn *v = oldest_idle(l->s, NULL);
                if (v) {
                    drop(v, "out of file descriptors: the oldest idle connection goes");
                } else if (sv_loop_events(l->s->loop, &l->w_accept, 0) == 0) {
                    sv_timer_arm(l->s->loop, &l->retry, 1.0, accept_resume, l);
                }
            }
            return;
        }
        char addr[INET6_ADDRSTRLEN] = "";
        if (a.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&a)->sin_addr, addr, sizeof addr);
        else if (a.ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&a)->sin6_addr, addr, sizeof addr);
        sv_conn *c = l->s->stop || !admit(l, addr) ? NULL : conn_new(l, &a, alen, addr);
        if (!c) {
            close(fd);
            continue;
        }
        if (!l->tls) {
            to_mhd(c, fd);
            continue;
        }
        c->relay = sv_tlsconn_new(l->s->loop, l->tls, fd, tls_ready, tls_gone, c);
        conn_free_if_done(c); /* without memory for its TLS it is closed */
    }
}

static void mhd_ev(void *arg, uint32_t ev)
{
    sv_listener *l = arg;
    MHD_run(l->d);
}

void sv_conns_sweep(sv_server *s)
{
    double now = lis_now(),
           limit = s->opts.conn_timeout > 0 ? s->opts.conn_timeout : SV_CONN_TIMEOUT;
    for (sv_conn *c = s->conns, *next; c; c = next) {
        next = c->next; /* a drop may free c */
        if (c->dropping)
            continue;
        switch (c->state) {
        case SV_CONN_IDLE:
            if (now - c->since > limit)
                drop(c, "idle too long");
            break;
        case SV_CONN_BODY:
            if (now - c->since > limit) {
                drop(c, "no byte of the request body for too long");
            } else if (now - c->since > SV_CONN_STUCK) {
                int unread = 0;
                char b;
                if (c->fd >= 0 && ((ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0) ||
                                   recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0))
                    drop(c, "a request line libmicrohttpd cannot read (a chunk extension past "
                            "its buffer)");
            }
            break;
        case SV_CONN_ACTIVE:
        case SV_CONN_UPGRADED: break;
        }
    }
}

#define SV_STALL_PROBE 0.05 /* seconds between looks at the bodies while the daemon spins */

/* Bytes waiting unread in c's socket (1 for an end alone), 0 for none. */
static int bytes_waiting(const sv_conn *c)
{
    int unread = 0;
    char b;
    if (ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0)
        return unread;
    return recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* The daemon of l asks to run again at once: a stalled body (the top) keeps it
 * so. Called after MHD_run, so between two looks libmicrohttpd has run. */
static void probe_stalls(sv_listener *l)
{
    double now = lis_now();
    if (now < l->probe_at)
        return;
    l->probe_at = now + SV_STALL_PROBE;
    for (sv_conn *c = l->s->conns, *next; c; c = next) {
        next = c->next; /* a drop may free c */
        if (c->l != l || c->dropping || c->state != SV_CONN_BODY || c->fd < 0)
            continue;
        int waiting = now - c->since >= SV_STALL_PROBE ? bytes_waiting(c) : 0;
        if (waiting && c->probed && c->probe_since == c->since && waiting >= c->probe_unread) {
            drop(c, "a request line libmicrohttpd cannot read (a chunk extension past its "
                    "buffer; it spins on it)");
            continue;
        }
        c->probed = waiting > 0;
        c->probe_unread = waiting;
        c->probe_since = c->since;
    }
}

/* ---- the listeners ---------------------------------------------------------------- */

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
    if (rc < 0 || chmod(path, 0600) < 0 || listen(fd, SV_BACKLOG) < 0) {
        int e = errno;
        close(fd);
        return lis_fail_errnum(err, e, "listening on %s", path);
    }
    return fd;
}

/* HOST:PORT or [V6]:PORT, numeric: 127.0.0.1:2376, 0.0.0.0:2376, [::]:2376. */
static int tcp_listener(const char *spec, lis_error *err)
{
    char host[64];
    const char *colon = strrchr(spec, ':'), *h = spec;
    size_t hl = colon ? (size_t)(colon - spec) : 0;
    if (hl >= 2 && spec[0] == '[' && spec[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (!colon || !hl || hl >= sizeof host)
        return lis_fail(err, EINVAL, "--tcp wants HOST:PORT (e.g. 127.0.0.1:2376), got '%s'", spec);
    snprintf(host, sizeof host, "%.*s", (int)hl, h);
    char *end;
    long port = strtol(colon + 1, &end, 10);
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM},
                    *res = NULL;
    if (*end || port <= 0 || port > 65535 || getaddrinfo(host, colon + 1, &hints, &res) != 0 ||
        !res)
        return lis_fail(err, EINVAL,
                        "--tcp wants a numeric HOST:PORT (an IPv4 or [IPv6] address), got '%s'",
                        spec);
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    int rc = fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
             bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, SV_BACKLOG) < 0;
    int e = errno;
    freeaddrinfo(res);
    if (rc) {
        if (fd >= 0)
            close(fd);
        return lis_fail_errnum(err, e, "listening on %s", spec);
    }
    return fd;
}

/* A listener on fd: the unix socket at path, or TCP (path NULL). */
static sv_listener *listener_new(sv_server *s, int fd, const char *name, const char *path,
                                 const sv_tls *tls, lis_error *err);

int sv_listen_start(sv_server *s, const char *unix_path, lis_error *err)
{
    sv_tls tls = {0};
    const lis_serve_opts *o = &s->opts;
    if (o->tcp && !o->tls_dir && !o->tcp_no_auth)
        return lis_fail(err, EINVAL,
                        "--tcp needs mutual TLS: --tls-dir DIR (make DIR once with lis serve "
                        "--tls-init DIR); plain TCP without authentication only with "
                        "--tcp-no-auth-insecure, on a network where every host is trusted");
    if (o->tcp && o->tls_dir && o->tcp_no_auth)
        return lis_fail(err, EINVAL, "--tls-dir and --tcp-no-auth-insecure exclude each other");
    if (o->tls_dir && !o->tcp)
        return lis_fail(err, EINVAL,
                        "--tls-dir is for --tcp (the unix socket is the owner's alone)");
    if (o->tls_dir && sv_tls_load(o->tls_dir, &tls, err) < 0)
        return -1;
    char name[300];
    snprintf(name, sizeof name, "unix://%s", unix_path);
    int fd = unix_listener(unix_path, err);
    int rc = fd < 0 || !listener_new(s, fd, name, unix_path, NULL, err) ? -1 : 0;
    if (rc == 0 && o->tcp) {
        snprintf(name, sizeof name, "tcp://%s%s", o->tcp,
                 o->tls_dir ? " (mutual TLS)" : " (NO AUTHENTICATION)");
        fd = tcp_listener(o->tcp, err);
        rc = fd < 0 || !listener_new(s, fd, name, NULL, o->tls_dir ? &tls : NULL, err) ? -1 : 0;
    }
    sv_tls_release(&tls); /* GnuTLS has made its credentials from it */
    return rc;
}

static sv_listener *listener_new(sv_server *s, int fd, const char *name, const char *path,
                                 const sv_tls *tls, lis_error *err)
{
    sv_listener *l = calloc(1, sizeof *l);
    struct stat st;
    if (!l) {
        close(fd);
        if (path)
            unlink(path);
        lis_oom(err);
        return NULL;
    }
    *l = (sv_listener){.s = s, .fd = fd, .tcp = !path, .no_auth = !path && !tls};
    snprintf(l->name, sizeof l->name, "%s", name);
    if (path && stat(path, &st) == 0) {
        snprintf(l->path, sizeof l->path, "%s", path);
        l->dev = st.st_dev;
        l->ino = st.st_ino;
    }
    l->next = s->listeners;
    s->listeners = l; /* sv_listen_stop closes fd from now on */
    if (tls && !(l->tls = sv_tls_ctx_new(tls, err)))
        return NULL;
    unsigned limit = (s->opts.max_conns ? s->opts.max_conns : SV_CONNS_MAX) + 256;
    l->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE |
                                MHD_USE_NO_LISTEN_SOCKET,
                            0, NULL, NULL, s->http->handler, s, MHD_OPTION_NOTIFY_COMPLETED,
                            s->http->completed, s, MHD_OPTION_NOTIFY_CONNECTION, notify, l,
                            MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)0, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SV_CONN_MEMORY,
                            MHD_OPTION_END);
    const union MHD_DaemonInfo *inf =
        l->d ? MHD_get_daemon_info(l->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (!l->d) {
        lis_fail(err, EIO, "libmicrohttpd could not start for %s", name);
        return NULL;
    }
    if (!inf || sv_loop_watch(s->loop, &l->w_mhd, inf->epoll_fd, EPOLLIN, mhd_ev, l) < 0 ||
        sv_loop_watch(s->loop, &l->w_accept, fd, EPOLLIN, accept_ev, l) < 0) {
        lis_fail_errno(err, "watching %s", name);
        return NULL;
    }
    fprintf(stderr, "lis serve: listening on %s (API " SV_API_VERSION ")\n", name);
    return l;
}

int sv_listen_run(sv_server *s, int max_ms)
{
    int wait_ms = max_ms;
    for (sv_listener *l = s->listeners; l; l = l->next) {
        if (!l->d)
            continue;
        /* resumed connections and work that no fd announces (the rest of a
         * resumed response, the end of a stream, buffered upload data): its
         * timeout says so (0: at once) */
        MHD_run(l->d);
        MHD_UNSIGNED_LONG_LONG to;
        if (MHD_get_timeout(l->d, &to) == MHD_YES) {
            if (to < (MHD_UNSIGNED_LONG_LONG)wait_ms)
                wait_ms = (int)to;
            if (to == 0)
                probe_stalls(l);
        }
    }
    return wait_ms;
}

void sv_listen_quiesce(sv_server *s)
{
    for (sv_listener *l = s->listeners; l; l = l->next) {
        struct stat st;
        if (l->path[0] && stat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
            unlink(l->path);
        l->path[0] = 0;
        sv_loop_unwatch(s->loop, &l->w_accept);
        sv_timer_cancel(s->loop, &l->retry);
        if (l->fd >= 0)
            close(l->fd);
        l->fd = -1;
    }
}

void sv_listen_stop(sv_server *s)
{
    sv_listen_quiesce(s);
    for (sv_conn *c = s->conns, *next; c; c = next) { /* the TLS relays (they free c) */
        next = c->next;
        if (c->relay)
            sv_tlsconn_close(c->relay);
    }
    while (s->listeners) {
        sv_listener *l = s->listeners;
        s->listeners = l->next;
        sv_loop_unwatch(s->loop, &l->w_mhd);
        if (l->d)
            MHD_stop_daemon(l->d); /* CLOSED for each of its connections: their records go */
        sv_tls_ctx_free(l->tls);
        free(l);
    }
    while (s->conns) { /* none is left in practice; never a leak */
        sv_conn *c = s->conns;
        s->conns = c->next;
        free(c);
    }
    s->nconns = 0;
}
