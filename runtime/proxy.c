/* proxy.c - the HTTP egress proxy of --net proxy sandboxes.
 *
 * Each proxy-mode sandbox keeps a private network namespace with only
 * loopback. At set-up its clone child (still holding its capabilities, lo
 * already up) creates a TCP listener on 127.0.0.1:3128 inside that namespace
 * and hands it to the owner over the lifeline (spawn.c). The owner accepts
 * on it directly: the client socket lives in the sandbox's namespace, the
 * upstream socket in the owner's, and no byte passes through a process of
 * the sandbox.
 *
 * One event loop (epoll, non-blocking sockets) serves every sandbox of a
 * process: no thread or process per sandbox or per connection. Names are
 * resolved on the host by a small pool of resolver threads (at most
 * DNS_THREADS), so the sandbox needs no DNS.
 *
 * Who runs the loop:
 *  - ephemeral sandboxes: the owning process, in one proxy thread per
 *    lis_ctx started with the first proxy sandbox; or, with
 *    lis_ctx_opts.proxy_manual, the caller pumps lis_ctx_proxy_fd/_step;
 *  - persistent sandboxes (they outlive their creator): one detached daemon
 *    per user and run dir, `lis proxyd RUN_DIR`, started on demand. The
 *    creator passes it the listener and a pidfd of the sandbox's PID 1 over
 *    <run_dir>/proxyd.sock; the daemon drops a sandbox when its pidfd fires
 *    and exits when it has served none for a few seconds.
 *
 * Requests: CONNECT host:port (tunnels, for https) and absolute-URI requests
 * (http://host/path, any method). Only the request head is parsed (bounded,
 * strict: anything malformed gets 400). A plain-HTTP request is forwarded in
 * origin form with "Connection: close" and the connection closes after the
 * response; the response head is rewritten to say so, so pipelining clients
 * (apt) retry on a new connection. Rules (netrules.c) are checked on the
 * host name and then on every resolved address; a refusal gets a 403 whose
 * body names the rule. */
#include "http_head.h"
#include "netrules.h"
#include "proto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define BUF_SIZE (64 * 1024)      /* per direction of a relayed connection */
#define BUF_SLACK 1024            /* room for rewritten heads */
#define HEAD_MAX (32 * 1024)      /* request/response head limit */
#define HEAD_TIMEOUT 30.0         /* seconds to send a complete request head */
#define RESOLVE_TIMEOUT 30.0
#define CONNECT_TIMEOUT 30.0
#define LINGER_TIMEOUT 2.0        /* after an error reply, before the close */
#define PORT_MAX_CONNS 512        /* concurrent connections per sandbox */
#define MAX_ADDRS 8               /* resolved candidates tried in order */
#define DNS_THREADS 4
#define PROXYD_IDLE 5.0           /* the daemon exits after this long with no sandbox */

enum ref_kind { R_WAKE, R_TIMER, R_DNS, R_LISTEN, R_PID, R_CLIENT, R_UPSTREAM, R_CTL_LISTEN,
                R_CTL };

typedef struct ep_ref {
    int kind;
    void *obj;
} ep_ref;

typedef struct conn conn;
typedef struct dns_job dns_job;

struct lis_net_port {
    ep_ref lref, pref;
    int listen_fd, pid_fd;
    uint32_t lmask;
    int dead, paused;
    unsigned nconns;
    char name[LIS_NAME_MAX + 1];
    lis_netrules rules;
    uint64_t requests, denied, bytes_in, bytes_out; /* atomics */
    lis_net_port *next, *prev, *grave;
};

enum { S_HEAD, S_RESOLVE, S_CONNECT, S_RELAY, S_REPLY, S_LINGER };

struct conn {
    ep_ref cref, uref;
    lis_net_port *port;
    int cfd, ufd;
    uint32_t cmask, umask;
    int state, dead;
    int is_connect, resp_head;
    int host_kind;                /* enum http_host_kind */
    int c_eof, u_eof, c_shut, u_shut;
    double deadline;
    char host[256];
    char portstr[8];
    char *up, *down;              /* client->upstream (also the head), upstream->client */
    size_t up_len, up_off, down_len, down_off;
    int dpipe[2];                 /* upstream->client by splice(2), once past the head */
    size_t dpipe_n, dpipe_cap;
    struct sockaddr_storage addrs[MAX_ADDRS];
    socklen_t addrlens[MAX_ADDRS];
    int naddrs, next_addr;
    dns_job *job;
    conn *next, *prev, *grave;
};

struct dns_job {
    conn *c;
    int cancelled;
    char host[256], port[8];
    struct addrinfo *res;
    int rc;
    dns_job *next;
};

typedef struct ctl_client {
    ep_ref ref;
    int fd;
} ctl_client;

struct lis_proxy {
    int epfd, wakefd, timerfd, dnsfd, ctl_fd;
    ep_ref wake_ref, timer_ref, dns_ref, ctl_ref;
    int timer_on, daemon;
    pthread_mutex_t mu;           /* everything below, while an event is handled */
    pthread_t thread;
    int has_thread, stop;
    lis_net_port *ports;
    unsigned nports;
    conn *conns;
    unsigned nconns;
    conn *grave_c;
    lis_net_port *grave_p;
    double idle_since;
    /* the resolver pool */
    pthread_mutex_t dmu;
    pthread_cond_t dcv;
    dns_job *dq_head, *dq_tail, *dns_done;
    pthread_t dthreads[DNS_THREADS];
    int ndthreads, dbusy, dqueued, dstop;
};

/* ---- proxyd wire format (SOCK_SEQPACKET on <run_dir>/proxyd.sock) ---- */

#define PXD_MAGIC 0x4450584cu /* "LXPD" */
#define PXD_PAYLOAD_MAX (60 * 1024)
enum { PXD_REGISTER = 1, PXD_STATS, PXD_OK, PXD_ERR };
struct pxd_msg {
    uint32_t magic, type, flags, nallow, ndeny, len;
    char name[LIS_NAME_MAX + 8];
    uint64_t requests, denied, bytes_in, bytes_out;
    char text[256];
};
enum { PXD_ALLOW_HOST_NETWORK = 1 };

/* ---- small helpers ---- */

static void set_mask(lis_proxy *px, int fd, ep_ref *ref, uint32_t *cur, uint32_t want)
{
    if (fd < 0 || want == *cur)
        return;
    struct epoll_event e = {.events = want, .data.ptr = ref};
    if (!want)
        epoll_ctl(px->epfd, EPOLL_CTL_DEL, fd, NULL);
    else
        epoll_ctl(px->epfd, *cur ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &e);
    *cur = want;
}

static void count(uint64_t *v, uint64_t n) { __atomic_fetch_add(v, n, __ATOMIC_RELAXED); }
static uint64_t load(const uint64_t *v) { return __atomic_load_n(v, __ATOMIC_RELAXED); }

static void timer_arm(lis_proxy *px, int on)
{
    if (px->timer_on == on)
        return;
    struct itimerspec its = {0};
    if (on) {
        its.it_value.tv_sec = 1;
        its.it_interval.tv_sec = 1;
    }
    timerfd_settime(px->timerfd, 0, &its, NULL);
    px->timer_on = on;
}

static void pause_listen(lis_proxy *px, lis_net_port *p, int paused)
{
    p->paused = paused;
    set_mask(px, p->listen_fd, &p->lref, &p->lmask, paused || p->dead ? 0 : EPOLLIN);
}

/* ---- the resolver pool ---- */

static void *dns_main(void *arg)
{
    lis_proxy *px = arg;
    pthread_mutex_lock(&px->dmu);
    for (;;) {
        while (!px->dstop && !px->dq_head)
            pthread_cond_wait(&px->dcv, &px->dmu);
        if (px->dstop)
            break;
        dns_job *j = px->dq_head;
        px->dq_head = j->next;
        if (!px->dq_head)
            px->dq_tail = NULL;
        px->dqueued--;
        px->dbusy++;
        int skip = j->cancelled;
        pthread_mutex_unlock(&px->dmu);
        if (!skip) {
            struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                     .ai_flags = AI_NUMERICSERV};
            j->rc = getaddrinfo(j->host, j->port, &hints, &j->res);
        }
        pthread_mutex_lock(&px->dmu);
        px->dbusy--;
        j->next = px->dns_done;
        px->dns_done = j;
        uint64_t one = 1;
        if (write(px->dnsfd, &one, sizeof one) < 0) {
            /* the counter cannot overflow in practice */
        }
    }
    pthread_mutex_unlock(&px->dmu);
    return NULL;
}

static int start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
    /* Helper threads take no signals: they belong to the application. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static int dns_submit(lis_proxy *px, conn *c)
{
    dns_job *j = calloc(1, sizeof *j);
    if (!j)
        return -1;
    j->c = c;
    snprintf(j->host, sizeof j->host, "%s", c->host);
    snprintf(j->port, sizeof j->port, "%s", c->portstr);
    pthread_mutex_lock(&px->dmu);
    if (px->dq_tail)
        px->dq_tail->next = j;
    else
        px->dq_head = j;
    px->dq_tail = j;
    px->dqueued++;
    if (px->ndthreads < DNS_THREADS && px->dbusy + px->dqueued > px->ndthreads &&
        start_thread(&px->dthreads[px->ndthreads], dns_main, px) == 0)
        px->ndthreads++;
    int ok = px->ndthreads > 0;
    pthread_cond_signal(&px->dcv);
    pthread_mutex_unlock(&px->dmu);
    c->job = j; /* without a thread it stays queued until reply() cancels it */
    return ok ? 0 : -1;
}

static void dns_cancel(lis_proxy *px, dns_job *j)
{
    pthread_mutex_lock(&px->dmu);
    j->cancelled = 1;
    pthread_mutex_unlock(&px->dmu);
}

/* ---- connections ---- */

/* Closes the upstream side of a connection and cancels its name lookup. */
static void drop_upstream(lis_proxy *px, conn *c)
{
    if (c->ufd >= 0) {
        set_mask(px, c->ufd, &c->uref, &c->umask, 0);
        close(c->ufd);
        c->ufd = -1;
    }
    if (c->job) {
        dns_cancel(px, c->job);
        c->job = NULL;
    }
}

static void conn_close(lis_proxy *px, conn *c)
{
    if (c->dead)
        return;
    c->dead = 1;
    if (c->cfd >= 0) {
        set_mask(px, c->cfd, &c->cref, &c->cmask, 0);
        close(c->cfd);
        c->cfd = -1;
    }
    drop_upstream(px, c);
    free(c->up);
    free(c->down);
    c->up = c->down = NULL;
    for (int i = 0; i < 2; i++)
        if (c->dpipe[i] >= 0) {
            close(c->dpipe[i]);
            c->dpipe[i] = -1;
        }
    if (c->prev)
        c->prev->next = c->next;
    else
        px->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    px->nconns--;
    lis_net_port *p = c->port;
    p->nconns--;
    if (p->paused && !p->dead && p->nconns < PORT_MAX_CONNS)
        pause_listen(px, p, 0);
    c->grave = px->grave_c;
    px->grave_c = c;
}

static void relay(lis_proxy *px, conn *c);

/* An error response; the connection closes after it. */
static void reply(lis_proxy *px, conn *c, int code, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void reply(lis_proxy *px, conn *c, int code, const char *reason, const char *fmt, ...)
{
    char body[1024];
    int n = snprintf(body, sizeof body, "lis proxy: %d %s: ", code, reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body + n, sizeof body - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(body, "\n");
    drop_upstream(px, c);
    if (!c->down && !(c->down = malloc(BUF_SIZE + BUF_SLACK))) {
        conn_close(px, c);
        return;
    }
    c->down_off = 0;
    c->down_len = (size_t)snprintf(c->down, BUF_SIZE,
                                   "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
                                   "Content-Length: %zu\r\nConnection: close\r\n"
                                   "Proxy-Agent: lis\r\n\r\n%s",
                                   code, reason, strlen(body), body);
    c->state = S_REPLY;
    c->deadline = lis_now() + HEAD_TIMEOUT;
    set_mask(px, c->cfd, &c->cref, &c->cmask, EPOLLOUT);
}

static void send_reply(lis_proxy *px, conn *c)
{
    while (c->down_off < c->down_len) {
        ssize_t n = send(c->cfd, c->down + c->down_off, c->down_len - c->down_off,
                         MSG_NOSIGNAL);
        if (n > 0) {
            c->down_off += (size_t)n;
            count(&c->port->bytes_in, (uint64_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        conn_close(px, c);
        return;
    }
    /* Let the client read the reply before the close (no RST on unread data). */
    shutdown(c->cfd, SHUT_WR);
    c->state = S_LINGER;
    c->deadline = lis_now() + LINGER_TIMEOUT;
    set_mask(px, c->cfd, &c->cref, &c->cmask, EPOLLIN);
}

static void linger_drain(lis_proxy *px, conn *c)
{
    char buf[4096];
    for (;;) {
        ssize_t n = recv(c->cfd, buf, sizeof buf, 0);
        if (n > 0)
            continue;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        conn_close(px, c);
        return;
    }
}

static void try_connect(lis_proxy *px, conn *c);

static void connected(lis_proxy *px, conn *c)
{
    int one = 1;
    setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(c->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!c->down && !(c->down = malloc(BUF_SIZE + BUF_SLACK))) {
        conn_close(px, c);
        return;
    }
    c->down_off = 0;
    c->down_len = 0;
    if (c->is_connect) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\nProxy-Agent: lis\r\n\r\n";
        memcpy(c->down, ok, sizeof ok - 1);
        c->down_len = sizeof ok - 1;
    } else {
        c->resp_head = 1;
    }
    /* Downloads move by splice(2): pages go from the upstream socket to the
     * client socket without a copy through this process. Without a pipe (fd
     * limit), the buffer does it. */
    if (pipe2(c->dpipe, O_NONBLOCK | O_CLOEXEC) == 0) {
        fcntl(c->dpipe[1], F_SETPIPE_SZ, 256 * 1024);
        int cap = fcntl(c->dpipe[1], F_GETPIPE_SZ);
        c->dpipe_cap = cap > 0 ? (size_t)cap : 65536;
    } else {
        c->dpipe[0] = c->dpipe[1] = -1;
    }
    c->state = S_RELAY;
    c->deadline = 0;
    set_mask(px, c->ufd, &c->uref, &c->umask, 0);
    relay(px, c);
}

static void try_connect(lis_proxy *px, conn *c)
{
    int last = 0;
    while (c->next_addr < c->naddrs) {
        int i = c->next_addr++;
        const struct sockaddr *sa = (const struct sockaddr *)&c->addrs[i];
        if (c->ufd >= 0) {
            set_mask(px, c->ufd, &c->uref, &c->umask, 0);
            close(c->ufd);
        }
        c->ufd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->ufd < 0) {
            last = errno;
            continue;
        }
        if (connect(c->ufd, sa, c->addrlens[i]) == 0) {
            connected(px, c);
            return;
        }
        if (errno == EINPROGRESS) {
            c->state = S_CONNECT;
            c->deadline = lis_now() + CONNECT_TIMEOUT;
            set_mask(px, c->ufd, &c->uref, &c->umask, EPOLLOUT);
            return;
        }
        last = errno;
    }
    char ip[INET6_ADDRSTRLEN] = "?";
    const struct sockaddr *sa = (const struct sockaddr *)&c->addrs[c->naddrs - 1];
    inet_ntop(sa->sa_family,
              sa->sa_family == AF_INET ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                                       : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr,
              ip, sizeof ip);
    reply(px, c, 502, "Bad Gateway", "cannot connect to %s (%s port %s): %s", c->host, ip,
          c->portstr, strerror(last ? last : ECONNREFUSED));
}

static void connect_done(lis_proxy *px, conn *c)
{
    int e = 0;
    socklen_t len = sizeof e;
    if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
        e = errno;
    if (e == 0) {
        connected(px, c);
        return;
    }
    if (c->next_addr < c->naddrs) {
        try_connect(px, c);
        return;
    }
    c->next_addr--; /* name the address that failed last */
    char ip[INET6_ADDRSTRLEN] = "?";
    const struct sockaddr *sa = (const struct sockaddr *)&c->addrs[c->next_addr];
    inet_ntop(sa->sa_family,
              sa->sa_family == AF_INET ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                                       : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr,
              ip, sizeof ip);
    reply(px, c, 502, "Bad Gateway", "cannot connect to %s (%s port %s): %s", c->host, ip,
          c->portstr, strerror(e));
}

/* Filters the resolved addresses through the rules and starts connecting. */
static void resolved(lis_proxy *px, conn *c, int rc, struct addrinfo *res)
{
    if (rc) {
        reply(px, c, 502, "Bad Gateway", "cannot resolve %s: %s", c->host,
              rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return;
    }
    char why[512] = "";
    c->naddrs = c->next_addr = 0;
    for (struct addrinfo *a = res; a && c->naddrs < MAX_ADDRS; a = a->ai_next) {
        if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
            a->ai_addrlen > sizeof c->addrs[0])
            continue;
        char w[512];
        if (lis_netrules_check_addr(&c->port->rules, a->ai_addr, w, sizeof w) < 0) {
            if (!why[0])
                memcpy(why, w, sizeof why);
            continue;
        }
        memcpy(&c->addrs[c->naddrs], a->ai_addr, a->ai_addrlen);
        c->addrlens[c->naddrs++] = a->ai_addrlen;
    }
    if (!c->naddrs) {
        count(&c->port->denied, 1);
        if (why[0])
            reply(px, c, 403, "Forbidden", "request to %s refused: %s", c->host, why);
        else
            reply(px, c, 502, "Bad Gateway", "%s has no internet address", c->host);
        return;
    }
    try_connect(px, c);
}

static void dns_complete(lis_proxy *px)
{
    uint64_t v;
    if (read(px->dnsfd, &v, sizeof v) < 0) {
        /* nothing pending */
    }
    pthread_mutex_lock(&px->dmu);
    dns_job *done = px->dns_done;
    px->dns_done = NULL;
    pthread_mutex_unlock(&px->dmu);
    while (done) {
        dns_job *j = done;
        done = j->next;
        /* cancelled is only set by this thread (under px->mu), so no lock */
        if (!j->cancelled && !j->c->dead) {
            j->c->job = NULL;
            resolved(px, j->c, j->rc, j->res);
        }
        if (j->res)
            freeaddrinfo(j->res);
        free(j);
    }
}

/* ---- the request head (parsed by http_head.c) ---- */

/* http_head.c's 400 for origin-form requests names the port */
_Static_assert(LIS_PROXY_PORT == 3128, "update http_parse_request's message");

/* Parses the head in c->up[0..hlen) and, for plain HTTP, rewrites it in
 * place into the request sent upstream. Returns 0, or an HTTP status with
 * *why filled. */
static int parse_head(conn *c, size_t hlen, char *why, size_t wlen)
{
    http_request rq;
    int code = http_parse_request(c->up, hlen, &rq, why, wlen);
    if (code)
        return code;
    snprintf(c->host, sizeof c->host, "%s", rq.auth.host);
    snprintf(c->portstr, sizeof c->portstr, "%s", rq.auth.port);
    c->host_kind = rq.auth.kind;
    c->is_connect = rq.is_connect;
    size_t extra = c->up_len - hlen;
    if (rq.is_connect) {
        /* Anything after the head (an early TLS hello) is tunnelled as is. */
        memmove(c->up, c->up + hlen, extra);
        c->up_len = extra;
        c->up_off = 0;
        return 0;
    }
    /* the new head, then whatever followed the old one */
    char *out = malloc(BUF_SIZE + BUF_SLACK);
    if (!out) {
        snprintf(why, wlen, "out of memory");
        return 503;
    }
    size_t n = http_forward_head(c->up, hlen, &rq, out, BUF_SIZE + BUF_SLACK - extra);
    if (!n) {
        free(out);
        snprintf(why, wlen, "request head too large");
        return 431;
    }
    memcpy(out + n, c->up + hlen, extra);
    memcpy(c->up, out, n + extra);
    free(out);
    c->up_len = n + extra;
    c->up_off = 0;
    return 0;
}

static void read_head(lis_proxy *px, conn *c)
{
    for (;;) {
        if (c->up_len >= HEAD_MAX) {
            count(&c->port->requests, 1);
            reply(px, c, 431, "Request Header Fields Too Large", "the request head exceeds %d "
                  "bytes", HEAD_MAX);
            return;
        }
        ssize_t n = recv(c->cfd, c->up + c->up_len, BUF_SIZE - c->up_len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            conn_close(px, c);
            return;
        }
        count(&c->port->bytes_out, (uint64_t)n);
        c->up_len += (size_t)n;
        if (memmem(c->up, c->up_len, "\r\n\r\n", 4))
            break;
    }
    size_t hlen = http_head_len(c->up, c->up_len);
    if (!hlen)
        return;
    if (hlen > HEAD_MAX) {
        count(&c->port->requests, 1);
        reply(px, c, 431, "Request Header Fields Too Large", "the request head exceeds %d bytes",
              HEAD_MAX);
        return;
    }
    count(&c->port->requests, 1);
    char why[512];
    int code = parse_head(c, hlen, why, sizeof why);
    if (code) {
        reply(px, c, code, code == 400 ? "Bad Request" : code == 431
              ? "Request Header Fields Too Large" : "Service Unavailable", "%s", why);
        return;
    }
    if (lis_netrules_check_host(&c->port->rules, c->host, why, sizeof why) < 0) {
        count(&c->port->denied, 1);
        reply(px, c, 403, "Forbidden", "request to %s refused: %s", c->host, why);
        return;
    }
    /* The client may send its body meanwhile; it is read during the relay. */
    set_mask(px, c->cfd, &c->cref, &c->cmask, 0);
    c->state = S_RESOLVE;
    c->deadline = lis_now() + RESOLVE_TIMEOUT;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    if (getaddrinfo(c->host, c->portstr, &hints, &res) == 0) {
        resolved(px, c, 0, res);
        freeaddrinfo(res);
        return;
    }
    /* Only names reach the resolver threads (and DNS); a literal that the
     * libc will not take (an unknown IPv6 zone) is the client's error. */
    if (c->host_kind != HTTP_HOST_NAME) {
        reply(px, c, 400, "Bad Request", "cannot use the address %s", c->host);
        return;
    }
    if (dns_submit(px, c) < 0)
        reply(px, c, 503, "Service Unavailable", "cannot start a resolver thread");
}

/* Moves bytes both ways until both sides would block. */
static void relay(lis_proxy *px, conn *c)
{
    for (int round = 0; round < 64; round++) {
        int progress = 0;
        /* client -> upstream */
        if (!c->c_eof && c->up_len < BUF_SIZE) {
            ssize_t n = recv(c->cfd, c->up + c->up_len, BUF_SIZE - c->up_len, 0);
            if (n > 0) {
                c->up_len += (size_t)n;
                count(&c->port->bytes_out, (uint64_t)n);
                progress = 1;
            } else if (n == 0) {
                c->c_eof = progress = 1;
            } else if (errno != EAGAIN && errno != EINTR) {
                conn_close(px, c);
                return;
            }
        }
        if (c->up_off < c->up_len) {
            ssize_t n = send(c->ufd, c->up + c->up_off, c->up_len - c->up_off, MSG_NOSIGNAL);
            if (n > 0) {
                c->up_off += (size_t)n;
                if (c->up_off == c->up_len)
                    c->up_off = c->up_len = 0;
                progress = 1;
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                conn_close(px, c);
                return;
            }
        }
        if (c->c_eof && c->up_off == c->up_len && !c->u_shut) {
            shutdown(c->ufd, SHUT_WR);
            c->u_shut = 1;
        }
        /* upstream -> client */
        int spliced = c->dpipe[0] >= 0 && !c->resp_head && c->down_off == c->down_len;
        if (spliced) {
            if (!c->u_eof && c->dpipe_n < c->dpipe_cap) {
                ssize_t n = splice(c->ufd, NULL, c->dpipe[1], NULL, c->dpipe_cap - c->dpipe_n,
                                   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                if (n > 0) {
                    c->dpipe_n += (size_t)n;
                    progress = 1;
                } else if (n == 0) {
                    c->u_eof = progress = 1;
                } else if (errno != EAGAIN && errno != EINTR) {
                    conn_close(px, c);
                    return;
                }
            }
            if (c->dpipe_n) {
                ssize_t n = splice(c->dpipe[0], NULL, c->cfd, NULL, c->dpipe_n,
                                   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                if (n > 0) {
                    c->dpipe_n -= (size_t)n;
                    count(&c->port->bytes_in, (uint64_t)n);
                    progress = 1;
                } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                    conn_close(px, c);
                    return;
                }
            }
        }
        if (!spliced && !c->u_eof && c->down_len < BUF_SIZE) {
            ssize_t n = recv(c->ufd, c->down + c->down_len, BUF_SIZE - c->down_len, 0);
            if (n > 0) {
                c->down_len += (size_t)n;
                progress = 1;
            } else if (n == 0) {
                c->u_eof = progress = 1;
            } else if (errno != EAGAIN && errno != EINTR) {
                conn_close(px, c);
                return;
            }
        }
        /* plain HTTP: the response head says Connection: close (we close after it) */
        if (c->resp_head && http_response_close(c->down, &c->down_len, BUF_SIZE + BUF_SLACK,
                                                HEAD_MAX, c->u_eof))
            c->resp_head = 0;
        if (!c->resp_head && c->down_off < c->down_len) {
            ssize_t n = send(c->cfd, c->down + c->down_off, c->down_len - c->down_off,
                             MSG_NOSIGNAL);
            if (n > 0) {
                c->down_off += (size_t)n;
                count(&c->port->bytes_in, (uint64_t)n);
                if (c->down_off == c->down_len)
                    c->down_off = c->down_len = 0;
                progress = 1;
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                conn_close(px, c);
                return;
            }
        }
        if (c->u_eof && c->down_off == c->down_len && !c->dpipe_n && !c->c_shut) {
            if (!c->is_connect) { /* the response is complete: one request per connection */
                conn_close(px, c);
                return;
            }
            shutdown(c->cfd, SHUT_WR);
            c->c_shut = 1;
        }
        if (c->c_shut && c->u_shut) {
            conn_close(px, c);
            return;
        }
        if (!progress)
            break;
    }
    uint32_t cw = 0, uw = 0;
    int spliced = c->dpipe[0] >= 0 && !c->resp_head && c->down_off == c->down_len;
    if (!c->c_eof && c->up_len < BUF_SIZE)
        cw |= EPOLLIN;
    if ((!c->resp_head && c->down_off < c->down_len) || c->dpipe_n)
        cw |= EPOLLOUT;
    if (!c->u_eof && (spliced ? c->dpipe_n < c->dpipe_cap : c->down_len < BUF_SIZE))
        uw |= EPOLLIN;
    if (c->up_off < c->up_len)
        uw |= EPOLLOUT;
    set_mask(px, c->cfd, &c->cref, &c->cmask, cw);
    set_mask(px, c->ufd, &c->uref, &c->umask, uw);
}

static void on_client(lis_proxy *px, conn *c, uint32_t ev)
{
    switch (c->state) {
    case S_HEAD: read_head(px, c); break;
    case S_RELAY: relay(px, c); break;
    case S_REPLY: send_reply(px, c); break;
    case S_LINGER: linger_drain(px, c); break;
    default:
        if (ev & (EPOLLERR | EPOLLHUP))
            conn_close(px, c);
    }
}

static void on_upstream(lis_proxy *px, conn *c)
{
    if (c->state == S_CONNECT)
        connect_done(px, c);
    else if (c->state == S_RELAY)
        relay(px, c);
}

static void on_listen(lis_proxy *px, lis_net_port *p)
{
    for (int i = 0; i < 64; i++) {
        if (p->nconns >= PORT_MAX_CONNS) {
            pause_listen(px, p, 1);
            return;
        }
        int fd = accept4(p->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                pause_listen(px, p, 1); /* the sweep retries in a second */
            return;
        }
        conn *c = calloc(1, sizeof *c);
        if (c && !(c->up = malloc(BUF_SIZE + BUF_SLACK))) {
            free(c);
            c = NULL;
        }
        if (!c) {
            close(fd);
            pause_listen(px, p, 1);
            return;
        }
        c->dpipe[0] = c->dpipe[1] = -1;
        c->cref = (ep_ref){R_CLIENT, c};
        c->uref = (ep_ref){R_UPSTREAM, c};
        c->port = p;
        c->cfd = fd;
        c->ufd = -1;
        c->state = S_HEAD;
        c->deadline = lis_now() + HEAD_TIMEOUT;
        c->next = px->conns;
        if (px->conns)
            px->conns->prev = c;
        px->conns = c;
        px->nconns++;
        p->nconns++;
        timer_arm(px, 1);
        set_mask(px, fd, &c->cref, &c->cmask, EPOLLIN);
    }
}

static void sweep(lis_proxy *px)
{
    uint64_t v;
    if (read(px->timerfd, &v, sizeof v) < 0) {
        /* spurious */
    }
    double now = lis_now();
    for (conn *c = px->conns, *next; c; c = next) {
        next = c->next;
        if (!c->deadline || now < c->deadline)
            continue;
        switch (c->state) {
        case S_HEAD:
        case S_LINGER:
        case S_REPLY: conn_close(px, c); break;
        case S_RESOLVE:
            reply(px, c, 504, "Gateway Timeout", "resolving %s took longer than %.0f s", c->host,
                  RESOLVE_TIMEOUT);
            break;
        case S_CONNECT:
            if (c->next_addr < c->naddrs)
                try_connect(px, c);
            else
                reply(px, c, 504, "Gateway Timeout", "connecting to %s port %s took longer "
                      "than %.0f s", c->host, c->portstr, CONNECT_TIMEOUT);
            break;
        }
    }
    for (lis_net_port *p = px->ports; p; p = p->next)
        if (p->paused && p->nconns < PORT_MAX_CONNS)
            pause_listen(px, p, 0);
    if (!px->nconns && !px->daemon)
        timer_arm(px, 0);
}

/* ---- ports (one per sandbox) ---- */

static lis_net_port *port_new(const char *name, const lis_netrules *rules, int listen_fd,
                              int pid_fd)
{
    lis_net_port *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->lref = (ep_ref){R_LISTEN, p};
    p->pref = (ep_ref){R_PID, p};
    p->listen_fd = listen_fd;
    p->pid_fd = pid_fd;
    snprintf(p->name, sizeof p->name, "%s", name);
    p->rules = *rules;
    return p;
}

/* Caller holds px->mu. */
static void port_add(lis_proxy *px, lis_net_port *p)
{
    p->next = px->ports;
    if (px->ports)
        px->ports->prev = p;
    px->ports = p;
    px->nports++;
    fcntl(p->listen_fd, F_SETFL, O_NONBLOCK | fcntl(p->listen_fd, F_GETFL));
    set_mask(px, p->listen_fd, &p->lref, &p->lmask, EPOLLIN);
    if (p->pid_fd >= 0) {
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &p->pref};
        epoll_ctl(px->epfd, EPOLL_CTL_ADD, p->pid_fd, &e);
    }
}

/* Caller holds px->mu. */
static void port_kill(lis_proxy *px, lis_net_port *p)
{
    if (p->dead)
        return;
    for (conn *c = px->conns, *next; c; c = next) {
        next = c->next;
        if (c->port == p)
            conn_close(px, c);
    }
    p->dead = 1;
    set_mask(px, p->listen_fd, &p->lref, &p->lmask, 0);
    close(p->listen_fd);
    p->listen_fd = -1;
    if (p->pid_fd >= 0) {
        epoll_ctl(px->epfd, EPOLL_CTL_DEL, p->pid_fd, NULL);
        close(p->pid_fd);
        p->pid_fd = -1;
    }
    if (p->prev)
        p->prev->next = p->next;
    else
        px->ports = p->next;
    if (p->next)
        p->next->prev = p->prev;
    px->nports--;
    if (!px->nports)
        px->idle_since = lis_now();
    p->grave = px->grave_p;
    px->grave_p = p;
}

static void bury(lis_proxy *px)
{
    while (px->grave_c) {
        conn *c = px->grave_c;
        px->grave_c = c->grave;
        free(c);
    }
    while (px->grave_p) {
        lis_net_port *p = px->grave_p;
        px->grave_p = p->grave;
        lis_netrules_free(&p->rules);
        free(p);
    }
}

/* ---- the proxy object and its loop ---- */

static void proxy_free(lis_proxy *px);

static lis_proxy *proxy_new(int daemon, lis_error *err)
{
    lis_proxy *px = calloc(1, sizeof *px);
    if (!px) {
        lis_fail(err, ENOMEM, "out of memory");
        return NULL;
    }
    px->daemon = daemon;
    px->ctl_fd = -1;
    pthread_mutex_init(&px->mu, NULL);
    pthread_mutex_init(&px->dmu, NULL);
    pthread_cond_init(&px->dcv, NULL);
    px->epfd = epoll_create1(EPOLL_CLOEXEC);
    px->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    px->dnsfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    px->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (px->epfd < 0 || px->wakefd < 0 || px->dnsfd < 0 || px->timerfd < 0) {
        lis_fail(err, errno, "creating the proxy's event loop: %s", strerror(errno));
        proxy_free(px);
        return NULL;
    }
    px->wake_ref = (ep_ref){R_WAKE, px};
    px->timer_ref = (ep_ref){R_TIMER, px};
    px->dns_ref = (ep_ref){R_DNS, px};
    px->ctl_ref = (ep_ref){R_CTL_LISTEN, px};
    struct epoll_event e = {.events = EPOLLIN};
    e.data.ptr = &px->wake_ref;
    epoll_ctl(px->epfd, EPOLL_CTL_ADD, px->wakefd, &e);
    e.data.ptr = &px->timer_ref;
    epoll_ctl(px->epfd, EPOLL_CTL_ADD, px->timerfd, &e);
    e.data.ptr = &px->dns_ref;
    epoll_ctl(px->epfd, EPOLL_CTL_ADD, px->dnsfd, &e);
    px->idle_since = lis_now();
    if (daemon)
        timer_arm(px, 1);
    return px;
}

static void ctl_accept(lis_proxy *px);
static void ctl_handle(lis_proxy *px, ctl_client *cc);

/* One round: waits up to timeout_ms, handles what is ready. */
static int proxy_step(lis_proxy *px, int timeout_ms)
{
    struct epoll_event evs[128];
    int n = epoll_wait(px->epfd, evs, 128, timeout_ms);
    if (n < 0)
        return errno == EINTR ? 0 : -1;
    pthread_mutex_lock(&px->mu);
    for (int i = 0; i < n; i++) {
        ep_ref *r = evs[i].data.ptr;
        switch (r->kind) {
        case R_WAKE: {
            uint64_t v;
            if (read(px->wakefd, &v, sizeof v) < 0) {
                /* spurious */
            }
            break;
        }
        case R_TIMER: sweep(px); break;
        case R_DNS: dns_complete(px); break;
        case R_LISTEN: {
            lis_net_port *p = r->obj;
            if (!p->dead)
                on_listen(px, p);
            break;
        }
        case R_PID: {
            lis_net_port *p = r->obj;
            if (!p->dead)
                port_kill(px, p); /* the sandbox is gone */
            break;
        }
        case R_CLIENT: {
            conn *c = r->obj;
            if (!c->dead)
                on_client(px, c, evs[i].events);
            break;
        }
        case R_UPSTREAM: {
            conn *c = r->obj;
            if (!c->dead)
                on_upstream(px, c);
            break;
        }
        case R_CTL_LISTEN: ctl_accept(px); break;
        case R_CTL: ctl_handle(px, r->obj); break;
        }
    }
    bury(px);
    pthread_mutex_unlock(&px->mu);
    return 0;
}

static void *proxy_main(void *arg)
{
    lis_proxy *px = arg;
    while (!__atomic_load_n(&px->stop, __ATOMIC_ACQUIRE))
        proxy_step(px, -1);
    return NULL;
}

static void proxy_free(lis_proxy *px)
{
    if (!px)
        return;
    if (px->has_thread) {
        __atomic_store_n(&px->stop, 1, __ATOMIC_RELEASE);
        uint64_t one = 1;
        if (write(px->wakefd, &one, sizeof one) < 0) {
            /* cannot fail on a fresh eventfd */
        }
        pthread_join(px->thread, NULL);
    }
    pthread_mutex_lock(&px->mu);
    while (px->ports)
        port_kill(px, px->ports);
    while (px->conns)
        conn_close(px, px->conns);
    pthread_mutex_unlock(&px->mu);
    pthread_mutex_lock(&px->dmu);
    px->dstop = 1;
    pthread_cond_broadcast(&px->dcv);
    pthread_mutex_unlock(&px->dmu);
    for (int i = 0; i < px->ndthreads; i++)
        pthread_join(px->dthreads[i], NULL);
    dns_job *lists[2] = {px->dq_head, px->dns_done};
    for (int k = 0; k < 2; k++)
        while (lists[k]) {
            dns_job *j = lists[k];
            lists[k] = j->next;
            if (j->res)
                freeaddrinfo(j->res);
            free(j);
        }
    bury(px);
    int fds[] = {px->epfd, px->wakefd, px->dnsfd, px->timerfd, px->ctl_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    pthread_mutex_destroy(&px->mu);
    pthread_mutex_destroy(&px->dmu);
    pthread_cond_destroy(&px->dcv);
    free(px);
}

/* The context's proxy, created on first use; its thread unless manual. */
static lis_proxy *ctx_proxy(lis_ctx *ctx, lis_error *err)
{
    lis_proxy *px = __atomic_load_n(&ctx->proxy, __ATOMIC_ACQUIRE);
    if (px)
        return px;
    px = proxy_new(0, err);
    if (!px)
        return NULL;
    lis_proxy *expected = NULL;
    if (!__atomic_compare_exchange_n(&ctx->proxy, &expected, px, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        proxy_free(px);
        return expected;
    }
    if (!ctx->proxy_manual) {
        int rc = start_thread(&px->thread, proxy_main, px);
        if (rc) {
            lis_fail(err, rc, "starting the proxy thread: %s", strerror(rc));
            return NULL;
        }
        px->has_thread = 1;
    }
    return px;
}

void lis_proxy_ctx_free(lis_ctx *ctx)
{
    proxy_free(ctx->proxy);
    ctx->proxy = NULL;
}

int lis_ctx_proxy_fd(lis_ctx *ctx)
{
    if (!ctx->proxy_manual)
        return -1;
    lis_error ignore;
    lis_proxy *px = ctx_proxy(ctx, &ignore);
    return px ? px->epfd : -1;
}

int lis_ctx_proxy_step(lis_ctx *ctx, lis_error *err)
{
    if (!ctx->proxy_manual)
        return 0;
    lis_proxy *px = ctx_proxy(ctx, err);
    if (!px)
        return -1;
    if (proxy_step(px, 0) < 0)
        return lis_fail(err, errno, "proxy: epoll_wait: %s", strerror(errno));
    return 0;
}

/* ---- sandbox hooks ---- */

static const char *const proxy_env[] = {
    "http_proxy=http://127.0.0.1:3128",
    "https_proxy=http://127.0.0.1:3128",
    "HTTP_PROXY=http://127.0.0.1:3128",
    "HTTPS_PROXY=http://127.0.0.1:3128",
    "no_proxy=localhost,127.0.0.1,::1",
    "NO_PROXY=localhost,127.0.0.1,::1",
    NULL,
};

const char *const *lis_proxy_env(void) { return proxy_env; }

int lis_proxy_attach(lis_sandbox *sb, const lis_sandbox_spec *spec, int listen_fd,
                     lis_error *err)
{
    lis_proxy *px = ctx_proxy(sb->ctx, err);
    if (!px)
        return -1;
    lis_netrules rules;
    if (lis_netrules_init(&rules, spec->allow_domains, spec->deny_domains,
                          spec->allow_host_network, err) < 0)
        return -1;
    int fd = fcntl(listen_fd, F_DUPFD_CLOEXEC, 3);
    lis_net_port *p = fd >= 0 ? port_new(sb->name, &rules, fd, -1) : NULL;
    if (!p) {
        if (fd >= 0)
            close(fd);
        lis_netrules_free(&rules);
        return lis_fail(err, errno ? errno : ENOMEM, "attaching the proxy: %s",
                        strerror(errno ? errno : ENOMEM));
    }
    pthread_mutex_lock(&px->mu);
    port_add(px, p);
    pthread_mutex_unlock(&px->mu);
    sb->net_port = p;
    return 0;
}

void lis_proxy_detach(lis_sandbox *sb)
{
    lis_proxy *px = sb->ctx ? __atomic_load_n(&sb->ctx->proxy, __ATOMIC_ACQUIRE) : NULL;
    if (!sb->net_port || !px)
        return;
    pthread_mutex_lock(&px->mu);
    port_kill(px, sb->net_port);
    pthread_mutex_unlock(&px->mu);
    sb->net_port = NULL;
}

void lis_net_counters(lis_sandbox *sb, uint64_t c[3])
{
    lis_net_port *p = sb->net_port;
    c[0] = p ? load(&p->requests) : 0;
    c[1] = p ? load(&p->bytes_in) : 0;
    c[2] = p ? load(&p->bytes_out) : 0;
}

/* ---- the per-user daemon for persistent sandboxes ---- */

static void sock_path(const char *run_dir, const char *file, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", run_dir, file);
}

static int pxd_connect(const char *run_dir)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    char path[PATH_MAX];
    sock_path(run_dir, "proxyd.sock", path, sizeof path);
    if (strlen(path) >= sizeof a.sun_path)
        return -ENAMETOOLONG;
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* One request, one answer. */
static int pxd_call(int fd, const struct pxd_msg *m, const char *payload, const int *fds, int nfds,
                    struct pxd_msg *ans)
{
    struct iovec iov[2] = {{(void *)m, sizeof *m}, {(void *)payload, m->len}};
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = m->len ? 2 : 1};
    if (nfds) {
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    if (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0)
        return -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 5000) <= 0)
        return -1;
    ssize_t n = recv(fd, ans, sizeof *ans, 0);
    return n == (ssize_t)sizeof *ans && ans->magic == PXD_MAGIC ? 0 : -1;
}

/* The lis binary that serves `lis proxyd`. */
static int proxyd_exe(lis_ctx *ctx, char *out, size_t len)
{
    const char *env = getenv("LIS_PROXYD_EXE");
    if (env && *env && access(env, X_OK) == 0) {
        snprintf(out, len, "%s", env);
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        const char *base = strrchr(self, '/');
        if (base && !strcmp(base + 1, "lis")) {
            snprintf(out, len, "%s", self);
            return 0;
        }
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", ctx->init_path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    static const char *const rel[] = {"lis", "../lis", "../bin/lis", "../../bin/lis"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char cand[2 * PATH_MAX];
        snprintf(cand, sizeof cand, "%s/%s", slash ? dir : ".", rel[i]);
        if (access(cand, X_OK) == 0 && strlen(cand) < len) {
            snprintf(out, len, "%s", cand);
            return 0;
        }
    }
    return -1;
}

static int spawn_proxyd(lis_ctx *ctx, lis_error *err)
{
    char exe[PATH_MAX];
    if (proxyd_exe(ctx, exe, sizeof exe) < 0)
        return lis_fail(err, ENOENT, "persistent --net proxy sandboxes are served by `lis proxyd`, "
                        "but the lis binary was not found next to %s (set LIS_PROXYD_EXE)",
                        ctx->init_path);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    for (int fd = 0; fd < 3; fd++)
        posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", O_RDWR, 0);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char *argv[] = {"lis", "proxyd", ctx->run_dir, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, exe, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc)
        return lis_fail(err, rc, "starting %s proxyd: %s", exe, strerror(rc));
    /* It forks the daemon once it listens, then exits. */
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return 0;
}

int lis_proxyd_register(lis_sandbox *sb, const lis_sandbox_spec *spec, int listen_fd,
                        lis_error *err)
{
    lis_netrules check;
    if (lis_netrules_init(&check, spec->allow_domains, spec->deny_domains, 0, err) < 0)
        return -1;
    lis_netrules_free(&check);
    struct pxd_msg m = {.magic = PXD_MAGIC, .type = PXD_REGISTER};
    snprintf(m.name, sizeof m.name, "%s", sb->name);
    if (spec->allow_host_network)
        m.flags |= PXD_ALLOW_HOST_NETWORK;
    char *payload = malloc(PXD_PAYLOAD_MAX), *o = payload;
    if (!payload)
        return lis_fail(err, ENOMEM, "out of memory");
    const char *const *lists[2] = {spec->allow_domains, spec->deny_domains};
    uint32_t *counts[2] = {&m.nallow, &m.ndeny};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; lists[k] && lists[k][i]; i++) {
            size_t n = strlen(lists[k][i]) + 1;
            if ((size_t)(o - payload) + n > PXD_PAYLOAD_MAX) {
                free(payload);
                return lis_fail(err, E2BIG, "too many --allow-domain/--deny-domain rules");
            }
            memcpy(o, lists[k][i], n);
            o += n;
            (*counts[k])++;
        }
    m.len = (uint32_t)(o - payload);
    int fds[2] = {listen_fd, sb->pidfd};
    for (int attempt = 0; attempt < 150; attempt++) {
        int fd = pxd_connect(sb->ctx->run_dir);
        if (fd >= 0) {
            struct pxd_msg ans;
            int rc = pxd_call(fd, &m, payload, fds, 2, &ans);
            close(fd);
            if (rc == 0) {
                free(payload);
                if (ans.type == PXD_OK)
                    return 0;
                ans.text[sizeof ans.text - 1] = 0;
                return lis_fail(err, EPROTO, "the proxy daemon refused sandbox %s: %s", sb->name,
                                ans.text);
            }
            /* a daemon on its way out: start another */
        }
        /* None listening (or one exiting, which still holds the lock for a
         * moment): start one, at most every 100 ms. */
        if (attempt % 5 == 0 && spawn_proxyd(sb->ctx, err) < 0) {
            free(payload);
            return -1;
        }
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    free(payload);
    return lis_fail(err, ETIMEDOUT, "cannot reach the proxy daemon at %s/proxyd.sock",
                    sb->ctx->run_dir);
}

void lis_net_stats(lis_sandbox *sb, lis_stats *st)
{
    st->net = (lis_net_mode)sb->net;
    if (sb->net_port) {
        st->net_requests = load(&sb->net_port->requests);
        st->net_denied = load(&sb->net_port->denied);
        st->net_bytes_in = load(&sb->net_port->bytes_in);
        st->net_bytes_out = load(&sb->net_port->bytes_out);
        return;
    }
    if (sb->net == LIS_NET_PROXY && sb->persist)
        lis_net_stats_by_name(sb->ctx, sb->name, st);
}

void lis_net_stats_by_name(lis_ctx *ctx, const char *name, lis_stats *st)
{
    st->net = LIS_NET_PROXY;
    int fd = pxd_connect(ctx->run_dir);
    if (fd < 0)
        return;
    struct pxd_msg m = {.magic = PXD_MAGIC, .type = PXD_STATS}, ans;
    snprintf(m.name, sizeof m.name, "%s", name);
    if (pxd_call(fd, &m, NULL, NULL, 0, &ans) == 0 && ans.type == PXD_OK) {
        st->net_requests = ans.requests;
        st->net_denied = ans.denied;
        st->net_bytes_in = ans.bytes_in;
        st->net_bytes_out = ans.bytes_out;
    }
    close(fd);
}

static void ctl_accept(lis_proxy *px)
{
    for (;;) {
        int fd = accept4(px->ctl_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        ctl_client *cc = calloc(1, sizeof *cc);
        if (!cc) {
            close(fd);
            return;
        }
        cc->ref = (ep_ref){R_CTL, cc};
        cc->fd = fd;
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &cc->ref};
        epoll_ctl(px->epfd, EPOLL_CTL_ADD, fd, &e);
    }
}

static void ctl_handle(lis_proxy *px, ctl_client *cc)
{
    struct {
        struct pxd_msg m;
        char payload[PXD_PAYLOAD_MAX + 1];
    } *in = malloc(sizeof *in);
    int fds[2] = {-1, -1}, nfds = 0;
    ssize_t n = -1;
    if (in) {
        union {
            char buf[CMSG_SPACE(2 * sizeof(int))];
            struct cmsghdr align;
        } u;
        struct iovec iov = {in, sizeof in->m + PXD_PAYLOAD_MAX};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                            .msg_controllen = sizeof u.buf};
        n = recvmsg(cc->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                if (nfds > 2) {
                    for (int i = 2; i < nfds; i++) {
                        int extra;
                        memcpy(&extra, CMSG_DATA(c) + i * sizeof(int), sizeof extra);
                        close(extra);
                    }
                    nfds = 2;
                }
                memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
            }
    }
    if (n < 0 && errno == EAGAIN) {
        free(in);
        return; /* not there yet */
    }
    struct pxd_msg ans = {.magic = PXD_MAGIC, .type = PXD_ERR};
    if (n >= (ssize_t)sizeof in->m && in->m.magic == PXD_MAGIC &&
        in->m.len <= (size_t)n - sizeof in->m) {
        in->m.name[sizeof in->m.name - 1] = 0;
        if (in->m.type == PXD_REGISTER && nfds == 2) {
            /* allow..., deny... as NUL-terminated strings */
            size_t total = in->m.nallow + in->m.ndeny;
            const char **list = calloc(total + 2, sizeof *list);
            char *p = in->payload, *end = in->payload + in->m.len;
            *end = 0;
            size_t k = 0;
            while (list && k < total && p < end) {
                list[k++] = p;
                p += strlen(p) + 1;
            }
            lis_netrules rules;
            lis_error e = {0};
            if (!list || k != total) {
                snprintf(ans.text, sizeof ans.text, "malformed registration");
            } else {
                const char **allow = list, **deny = list + in->m.nallow + 1;
                memmove(deny, list + in->m.nallow, in->m.ndeny * sizeof *list);
                allow[in->m.nallow] = NULL;
                deny[in->m.ndeny] = NULL;
                if (lis_netrules_init(&rules, allow, deny,
                                      (in->m.flags & PXD_ALLOW_HOST_NETWORK) != 0, &e) < 0) {
                    snprintf(ans.text, sizeof ans.text, "%s", e.msg);
                } else {
                    lis_net_port *port = port_new(in->m.name, &rules, fds[0], fds[1]);
                    if (!port) {
                        lis_netrules_free(&rules);
                        snprintf(ans.text, sizeof ans.text, "out of memory");
                    } else {
                        port_add(px, port);
                        fds[0] = fds[1] = -1;
                        ans.type = PXD_OK;
                    }
                }
            }
            free(list);
        } else if (in->m.type == PXD_STATS) {
            for (lis_net_port *p = px->ports; p; p = p->next)
                if (!strcmp(p->name, in->m.name)) {
                    ans.type = PXD_OK;
                    ans.requests = load(&p->requests);
                    ans.denied = load(&p->denied);
                    ans.bytes_in = load(&p->bytes_in);
                    ans.bytes_out = load(&p->bytes_out);
                    break;
                }
            if (ans.type != PXD_OK)
                snprintf(ans.text, sizeof ans.text, "no sandbox named %s", in->m.name);
        } else {
            snprintf(ans.text, sizeof ans.text, "bad request");
        }
        send(cc->fd, &ans, sizeof ans, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(in);
    epoll_ctl(px->epfd, EPOLL_CTL_DEL, cc->fd, NULL);
    close(cc->fd);
    free(cc); /* one fd, so no other event of this round refers to it */
}

int lis_proxyd_serve(const char *run_dir, lis_error *err)
{
    char lock[PATH_MAX], path[PATH_MAX];
    sock_path(run_dir, "proxyd.lock", lock, sizeof lock);
    sock_path(run_dir, "proxyd.sock", path, sizeof path);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return lis_fail(err, ENAMETOOLONG, "socket path too long: %s", path);
    strcpy(a.sun_path, path);
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lfd < 0)
        return lis_fail(err, errno, "open %s: %s", lock, strerror(errno));
    if (flock(lfd, LOCK_EX | LOCK_NB) < 0) {
        close(lfd);
        return 0; /* another daemon serves this run dir */
    }
    int sfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sfd < 0) {
        close(lfd);
        return lis_fail(err, errno, "socket: %s", strerror(errno));
    }
    unlink(path);
    mode_t old = umask(077);
    int brc = bind(sfd, (struct sockaddr *)&a, sizeof a);
    umask(old);
    if (brc < 0 || listen(sfd, 256) < 0) {
        int e = errno;
        close(sfd);
        close(lfd);
        return lis_fail(err, e, "listening on %s: %s", path, strerror(e));
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        unlink(path);
        close(sfd);
        close(lfd);
        return lis_fail(err, e, "fork: %s", strerror(e));
    }
    if (pid > 0)
        _exit(0); /* the starter waits for this; the daemon is reparented */
    setsid();
    if (ftruncate(lfd, 0) == 0)
        dprintf(lfd, "%d\n", (int)getpid()); /* for ps and the benchmark */
    if (chdir("/") < 0) {
        /* stays in the run dir's parent; harmless */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    lis_proxy *px = proxy_new(1, err);
    if (!px) {
        unlink(path);
        _exit(1);
    }
    px->ctl_fd = sfd;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &px->ctl_ref};
    epoll_ctl(px->epfd, EPOLL_CTL_ADD, sfd, &e);
    for (;;) {
        proxy_step(px, 1000);
        if (!px->nports && !px->nconns && lis_now() - px->idle_since > PROXYD_IDLE)
            break;
    }
    /* New clients now fail to connect and start a fresh daemon, which waits
     * for our lock only as long as the exit below takes. */
    unlink(path);
    proxy_free(px);
    _exit(0);
}
