/* net.h - inside net/, the HTTP egress proxy of --net proxy sandboxes:
 * the proxy object, its ports (one per sandbox), connections and resolver
 * jobs, shared by the files of net/ and by nothing else. Built on lis.h only.
 *
 * Each proxy-mode sandbox keeps a private network namespace with only
 * loopback. At set-up its clone child (still holding its capabilities, lo
 * already up) creates a TCP listener on 127.0.0.1:3128 inside that namespace
 * (spec.listen_port) and hands it to the owner over the lifeline; net/ takes
 * it (lis_sandbox_take_listener) and accepts on it directly: the client
 * socket lives in the sandbox's namespace, the upstream socket in the
 * owner's, and no byte passes through a process of the sandbox.
 *
 * One event loop (epoll, non-blocking sockets) serves every sandbox of a
 * process: no thread or process per sandbox or per connection. Names are
 * resolved on the host by a small pool of resolver threads (at most
 * DNS_THREADS), so the sandbox needs no DNS.
 *
 * Who runs the loop:
 *  - ephemeral sandboxes: the owning process, in one proxy thread per
 *    lis_ctx started with the first proxy sandbox; or, after lis_net_manual,
 *    the caller pumps lis_net_step;
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
 * (apt) retry on a new connection. Rules (rules.c) are checked on the host
 * name and then on every resolved address; a refusal gets a 403 whose body
 * names the rule.
 *
 *   attach.c   the glue with the runtime: lis_net_sandbox_create & co.
 *   loop.c     the proxy object, its epoll loop, ports, the deadline sweep
 *   relay.c    connections: accept, error replies, the two-way relay
 *   request.c  a request: head, rules, resolution, connecting upstream
 *   dns.c      the resolver thread pool
 *   account.c  the per-sandbox counters and reading them
 *   event.c    each finished request told to the sandbox's watcher (monitor/)
 *   proxyd.c   `lis proxyd` and its control protocol
 *   rules.c, http_head.c   the rules and the strict head parser (pure)
 */
#ifndef LIS_NET_INTERNAL_H
#define LIS_NET_INTERNAL_H

#include "http_head.h"
#include "lis_net.h"
#include "rules.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#define NET_NAME_MAX 64      /* a sandbox name (lis.h) */
#define BUF_SIZE (64 * 1024) /* per direction of a relayed connection */
#define BUF_SLACK 1024       /* room for rewritten heads */
#define HEAD_MAX (32 * 1024) /* request/response head limit */
#define HEAD_TIMEOUT 30.0    /* seconds to send a complete request head */
#define RESOLVE_TIMEOUT 30.0
#define CONNECT_TIMEOUT 30.0
#define LINGER_TIMEOUT 2.0 /* after an error reply, before the close */
#define PORT_MAX_CONNS 512 /* concurrent connections per sandbox */
#define MAX_ADDRS 8        /* resolved candidates tried in order */
#define DNS_THREADS 4
#define PROXYD_IDLE 5.0 /* the daemon exits after this long with no sandbox */

typedef struct lis_proxy lis_proxy;
typedef struct net_port net_port;

enum ref_kind {
    R_WAKE,
    R_TIMER,
    R_DNS,
    R_LISTEN,
    R_PID,
    R_CLIENT,
    R_UPSTREAM,
    R_CTL_LISTEN,
    R_CTL
};

typedef struct ep_ref {
    int kind;
    void *obj;
} ep_ref;

typedef struct conn conn;
typedef struct dns_job dns_job;

struct net_port {
    lis_proxy *px; /* the loop that serves it */
    ep_ref lref, pref;
    int listen_fd, pid_fd;
    uint32_t lmask;
    int dead, paused;
    unsigned nconns;
    char name[NET_NAME_MAX + 1];
    lis_netrules rules;
    uint64_t requests, denied, bytes_in, bytes_out; /* atomics (account.c) */
    lis_net_event_fn on_event;                      /* lis_net_sandbox_watch: called under px->mu */
    void *event_arg;
    net_port *next, *prev, *grave;
};

enum { S_HEAD, S_RESOLVE, S_CONNECT, S_RELAY, S_REPLY, S_LINGER };

struct conn {
    ep_ref cref, uref;
    net_port *port;
    int cfd, ufd;
    uint32_t cmask, umask;
    int state, dead;
    int reported; /* its event was told (net_conn_event): once */
    int is_connect, resp_head;
    int host_kind; /* enum http_host_kind */
    int c_eof, u_eof, c_shut, u_shut;
    double deadline;
    char host[256];
    char portstr[8];
    char *up, *down; /* client->upstream (also the head), upstream->client */
    size_t up_len, up_off, down_len, down_off;
    int dpipe[2]; /* upstream->client by splice(2), once past the head */
    size_t dpipe_n, dpipe_cap;
    struct sockaddr_storage addrs[MAX_ADDRS];
    socklen_t addrlens[MAX_ADDRS];
    int naddrs, next_addr;
    dns_job *job;
    /* what the port's watcher is told when the connection ends (event.c) */
    char method[16];
    int status, resolved; /* the proxy's own reply (403, 502, ...); a lookup was made */
    char why[200];        /* the reply's reason */
    char addr[48];        /* the address connected to */
    uint64_t n_in, n_out; /* bytes to / from the sandbox */
    double started;
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
    /* `lis proxyd`: its control socket's handlers (proxyd.c) */
    void (*on_ctl_accept)(lis_proxy *px);
    void (*on_ctl)(lis_proxy *px, void *client);
    ep_ref wake_ref, timer_ref, dns_ref, ctl_ref;
    int timer_on, daemon, manual;
    pthread_mutex_t mu;   /* everything below, while an event is handled */
    pthread_cond_t ended; /* a connection ended (lis_net_sandbox_settle; CLOCK_MONOTONIC) */
    pthread_t thread;
    int has_thread, stop;
    net_port *ports;
    unsigned nports;
    conn *conns;
    unsigned nconns;
    conn *grave_c;
    net_port *grave_p;
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
    char name[NET_NAME_MAX + 8];
    uint64_t requests, denied, bytes_in, bytes_out;
    char text[256];
};
enum { PXD_ALLOW_HOST_NETWORK = 1 };

/* util.c */
/* A helper thread that takes no signals (they belong to the application). */
int net_start_thread(pthread_t *t, void *(*fn)(void *), void *arg);

/* account.c: the counters of a port (relaxed atomics: read while served) */
static inline void net_count(uint64_t *v, uint64_t n)
{
    __atomic_fetch_add(v, n, __ATOMIC_RELAXED);
}
/* Bytes toward the sandbox are counted before they are sent and the unsent
 * rest taken back after (n: what the send returned), so that whoever reads
 * the counters once the command that received them has ended sees them all. */
static inline void net_count_back(uint64_t *v, size_t tried, ssize_t n)
{
    if (n < (ssize_t)tried)
        __atomic_fetch_sub(v, (uint64_t)(tried - (size_t)(n > 0 ? n : 0)), __ATOMIC_RELAXED);
}
static inline uint64_t net_load(const uint64_t *v) { return __atomic_load_n(v, __ATOMIC_RELAXED); }
void net_port_counters(const net_port *p, lis_net_counters *c);

/* What fd is polled for; inline: the relay calls it on every round. 0, or
 * -1 with errno when the kernel refused an ADD or MOD (ENOMEM, ENOSPC at
 * fs.epoll.max_user_watches): fd is then polled as before (not at all after
 * a failed ADD) and its owner must not wait for it (net_conn_mask closes a
 * connection). Taking fd out (want 0) fails only when fd is not in the set
 * (ENOENT), which is the state wanted. */
static inline int net_set_mask(lis_proxy *px, int fd, ep_ref *ref, uint32_t *cur, uint32_t want)
{
    if (fd < 0 || want == *cur)
        return 0;
    struct epoll_event e = {.events = want, .data.ptr = ref};
    int rc = want ? epoll_ctl(px->epfd, *cur ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &e)
                  : epoll_ctl(px->epfd, EPOLL_CTL_DEL, fd, NULL);
    if (rc < 0 && (want || errno != ENOENT))
        return -1;
    *cur = want;
    return 0;
}

/* fd out of the set, right before it is closed (the DEL is needed: a fork
 * elsewhere in the process may hold a copy of fd for a moment, and close
 * alone would then leave it in the set). Its failure leaves nothing to
 * undo: a DEL fails only for an fd that is not in the set. */
static inline void net_unwatch(lis_proxy *px, int fd, uint32_t *cur)
{
    if (net_set_mask(px, fd, NULL, cur, 0) < 0)
        *cur = 0;
}

/* event.c: a finished request told to the port's watcher (px->mu held) */
void net_conn_event(conn *c);

/* loop.c; the caller of the port and step functions holds px->mu */
lis_proxy *net_proxy_new(int daemon, lis_error *err);
void net_proxy_free(lis_proxy *px);
/* loop.c: the fds, locks and memory of a proxy with nothing left in it */
void net_proxy_release(lis_proxy *px);
/* relay.c: what one side of a connection (upstream: its ufd, else its cfd)
 * is polled for; a connection whose fd cannot be polled is closed (it would
 * wait forever). */
void net_conn_mask(lis_proxy *px, conn *c, int upstream, uint32_t want);
/* relay.c: writing a queued reply, and draining a client after it */
void net_send_reply(lis_proxy *px, conn *c);
void net_linger_drain(lis_proxy *px, conn *c);
int net_proxy_step(lis_proxy *px, int timeout_ms); /* one round: waits up to timeout_ms */
void *net_proxy_main(void *arg);                   /* the loop's thread */
void net_timer_arm(lis_proxy *px, int on);
void net_pause_listen(lis_proxy *px, net_port *p, int paused);
void net_sweep(lis_proxy *px);
/* rules are moved into the port; listen_fd and pid_fd (-1: none) are its */
net_port *net_port_new(const char *name, const lis_netrules *rules, int listen_fd, int pid_fd);
/* 0, or -1 with errno when its fds cannot be polled (the port is not added). */
int net_port_add(lis_proxy *px, net_port *p);
void net_port_kill(lis_proxy *px, net_port *p);
void net_bury(lis_proxy *px); /* frees what was closed during the round */

/* relay.c */
void net_on_listen(lis_proxy *px, net_port *p);
void net_on_client(lis_proxy *px, conn *c, uint32_t ev);
void net_on_upstream(lis_proxy *px, conn *c);
void net_relay(lis_proxy *px, conn *c);
void net_drop_upstream(lis_proxy *px, conn *c);
void net_conn_close(lis_proxy *px, conn *c);
/* An error response; the connection closes after it. */
void net_reply(lis_proxy *px, conn *c, int code, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* request.c */
void net_read_head(lis_proxy *px, conn *c);
void net_resolved(lis_proxy *px, conn *c, int rc, struct addrinfo *res);
void net_try_connect(lis_proxy *px, conn *c);
void net_connect_done(lis_proxy *px, conn *c);

/* dns.c */
int net_dns_submit(lis_proxy *px, conn *c);
void net_dns_cancel(lis_proxy *px, dns_job *j);
void net_dns_complete(lis_proxy *px);

/* proxyd.c: the client side, for attach.c and account.c */
int net_proxyd_register(lis_ctx *ctx, lis_sandbox *sb, const lis_net_rules *rules, int listen_fd,
                        lis_error *err);
int net_proxyd_stats(const char *run_dir, const char *name, lis_net_counters *c);
/* a ctl client of the daemon's loop */
void net_ctl_accept(lis_proxy *px);
void net_ctl_handle(lis_proxy *px, ctl_client *cc);

#endif
