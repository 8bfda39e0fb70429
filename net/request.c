/* request.c - one request through the proxy, from its head to a connected
 * upstream: the head is parsed (http_head.c) and, for plain HTTP, rewritten;
 * the rules (rules.c) are checked on the host name, the name resolved (dns.c),
 * the rules checked again on every address, then the addresses are tried in
 * order. Every refusal or failure is an error reply (relay.c) naming why. */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the request head (parsed by http_head.c) ---- */

/* http_head.c's 400 for origin-form requests names the port */
_Static_assert(LIS_NET_PROXY_PORT == 3128, "update http_parse_request's message");

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
    snprintf(c->method, sizeof c->method, "%.*s", (int)rq.method.len, c->up + rq.method.off);
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

void net_read_head(lis_proxy *px, conn *c)
{
    for (;;) {
        if (c->up_len >= HEAD_MAX) {
            net_count(&c->port->requests, 1);
            net_reply(px, c, 431, "Request Header Fields Too Large",
                      "the request head exceeds %d "
                      "bytes",
                      HEAD_MAX);
            return;
        }
        ssize_t n = recv(c->cfd, c->up + c->up_len, BUF_SIZE - c->up_len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            net_conn_close(px, c);
            return;
        }
        net_count(&c->port->bytes_out, (uint64_t)n);
        c->n_out += (uint64_t)n;
        c->up_len += (size_t)n;
        if (memmem(c->up, c->up_len, "\r\n\r\n", 4))
            break;
    }
    size_t hlen = http_head_len(c->up, c->up_len);
    if (!hlen)
        return;
    if (hlen > HEAD_MAX) {
        net_count(&c->port->requests, 1);
        net_reply(px, c, 431, "Request Header Fields Too Large",
                  "the request head exceeds %d bytes", HEAD_MAX);
        return;
    }
    net_count(&c->port->requests, 1);
    char why[512];
    int code = parse_head(c, hlen, why, sizeof why);
    if (code) {
        net_reply(px, c, code,
                  code == 400   ? "Bad Request"
                  : code == 431 ? "Request Header Fields Too Large"
                                : "Service Unavailable",
                  "%s", why);
        return;
    }
    if (lis_netrules_check_host(&c->port->rules, c->host, why, sizeof why) < 0) {
        net_count(&c->port->denied, 1);
        net_reply(px, c, 403, "Forbidden", "request to %s refused: %s", c->host, why);
        return;
    }
    /* The client may send its body meanwhile; it is read during the relay. */
    net_set_mask(px, c->cfd, &c->cref, &c->cmask, 0);
    c->state = S_RESOLVE;
    c->deadline = lis_now() + RESOLVE_TIMEOUT;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    if (getaddrinfo(c->host, c->portstr, &hints, &res) == 0) {
        net_resolved(px, c, 0, res);
        freeaddrinfo(res);
        return;
    }
    /* Only names reach the resolver threads (and DNS); a literal that the
     * libc will not take (an unknown IPv6 zone) is the client's error. */
    if (c->host_kind != HTTP_HOST_NAME) {
        net_reply(px, c, 400, "Bad Request", "cannot use the address %s", c->host);
        return;
    }
    c->resolved = 1;
    if (net_dns_submit(px, c) < 0)
        net_reply(px, c, 503, "Service Unavailable", "cannot start a resolver thread");
}

static void connected(lis_proxy *px, conn *c)
{
    const struct sockaddr *sa = (const struct sockaddr *)&c->addrs[c->next_addr - 1];
    inet_ntop(sa->sa_family,
              sa->sa_family == AF_INET
                  ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                  : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr,
              c->addr, sizeof c->addr);
    int one = 1;
    setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(c->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!c->down && !(c->down = malloc(BUF_SIZE + BUF_SLACK))) {
        net_conn_close(px, c);
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
    net_set_mask(px, c->ufd, &c->uref, &c->umask, 0);
    net_relay(px, c);
}

void net_try_connect(lis_proxy *px, conn *c)
{
    int last = 0;
    while (c->next_addr < c->naddrs) {
        int i = c->next_addr++;
        const struct sockaddr *sa = (const struct sockaddr *)&c->addrs[i];
        if (c->ufd >= 0) {
            net_set_mask(px, c->ufd, &c->uref, &c->umask, 0);
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
            net_set_mask(px, c->ufd, &c->uref, &c->umask, EPOLLOUT);
            return;
        }
        last = errno;
    }
    char ip[INET6_ADDRSTRLEN] = "?";
    const struct sockaddr *sa = (const struct sockaddr *)&c->addrs[c->naddrs - 1];
    inet_ntop(sa->sa_family,
              sa->sa_family == AF_INET
                  ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                  : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr,
              ip, sizeof ip);
    net_reply(px, c, 502, "Bad Gateway", "cannot connect to %s (%s port %s): %s", c->host, ip,
              c->portstr, strerror(last ? last : ECONNREFUSED));
}

void net_connect_done(lis_proxy *px, conn *c)
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
        net_try_connect(px, c);
        return;
    }
    c->next_addr--; /* name the address that failed last */
    char ip[INET6_ADDRSTRLEN] = "?";
    const struct sockaddr *sa = (const struct sockaddr *)&c->addrs[c->next_addr];
    inet_ntop(sa->sa_family,
              sa->sa_family == AF_INET
                  ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                  : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr,
              ip, sizeof ip);
    net_reply(px, c, 502, "Bad Gateway", "cannot connect to %s (%s port %s): %s", c->host, ip,
              c->portstr, strerror(e));
}

/* Filters the resolved addresses through the rules and starts connecting. */
void net_resolved(lis_proxy *px, conn *c, int rc, struct addrinfo *res)
{
    if (rc) {
        net_reply(px, c, 502, "Bad Gateway", "cannot resolve %s: %s", c->host,
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
        net_count(&c->port->denied, 1);
        if (why[0])
            net_reply(px, c, 403, "Forbidden", "request to %s refused: %s", c->host, why);
        else
            net_reply(px, c, 502, "Bad Gateway", "%s has no internet address", c->host);
        return;
    }
    net_try_connect(px, c);
}
