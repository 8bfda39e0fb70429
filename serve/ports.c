/* ports.c - -p HOSTPORT:PORT (HostConfig.PortBindings): a listener on the
 * owner's 127.0.0.1:HOSTPORT (another HostIp only when the binding names
 * one), and per accepted connection a socket made inside the sandbox's
 * network namespace (lis_sandbox_socket) connected to its 127.0.0.1:PORT,
 * relayed both ways on the loop. A half-close is passed on; each direction
 * buffers at most RELAY_BUF, so a slow side stalls only its own pair. */
#include "serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_BUF 65536

typedef struct side {
    int fd;
    sv_watch w;
    char buf[RELAY_BUF]; /* bytes read from this side, to write to the other */
    size_t len;
    int eof, shut; /* read EOF; we shut the other side's write */
} side;

typedef struct pair {
    sv_loop *loop;
    side a, b; /* a: the host client, b: inside the sandbox */
    int connecting, dead;
} pair;

typedef struct binding {
    sv_server *s;
    lis_sandbox *sb;
    int fd;
    sv_watch w;
    unsigned short port, host_port;
    char host_ip[64];
    char key[32]; /* "8000/tcp" */
} binding;

struct sv_ports {
    binding *b;
    size_t n;
};

static void pair_free(void *arg) { free(arg); }

static void pair_close(pair *p)
{
    if (p->dead)
        return;
    p->dead = 1;
    sv_loop_unwatch(p->loop, &p->a.w);
    sv_loop_unwatch(p->loop, &p->b.w);
    close(p->a.fd);
    close(p->b.fd);
    sv_loop_defer(p->loop, pair_free, p);
}

static void pair_update(pair *p)
{
    side *s[2] = {&p->a, &p->b};
    for (int i = 0; i < 2; i++) {
        side *me = s[i], *other = s[1 - i];
        uint32_t ev = 0;
        if (p->connecting && me == &p->b) {
            if (sv_loop_events(p->loop, &me->w, EPOLLOUT) < 0)
                goto fail;
            continue;
        }
        if (!me->eof && me->len < RELAY_BUF && !p->connecting)
            ev |= EPOLLIN;
        if (other->len > 0 && !p->connecting)
            ev |= EPOLLOUT;
        if (sv_loop_events(p->loop, &me->w, ev) < 0)
            goto fail;
    }
    /* both directions done: EOF read and everything passed on */
    if (p->a.eof && p->b.eof && !p->a.len && !p->b.len)
        pair_close(p);
    return;
fail: /* no events to wait for: the pair could stall forever, so it ends */
    pair_close(p);
}

/* Moves what `from` read into `to`. */
static int pump(side *from, side *to)
{
    while (from->len) {
        ssize_t n = send(to->fd, from->buf, from->len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        memmove(from->buf, from->buf + n, from->len - (size_t)n);
        from->len -= (size_t)n;
    }
    if (from->eof && !from->shut) {
        shutdown(to->fd, SHUT_WR);
        from->shut = 1;
    }
    return 0;
}

static int fill(side *me)
{
    while (!me->eof && me->len < RELAY_BUF) {
        ssize_t n = recv(me->fd, me->buf + me->len, RELAY_BUF - me->len, MSG_DONTWAIT);
        if (n > 0) {
            me->len += (size_t)n;
            continue;
        }
        if (n == 0) {
            me->eof = 1;
            break;
        }
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    }
    return 0;
}

static void side_ev(pair *p, side *me, side *other, uint32_t ev)
{
    if (p->dead)
        return;
    if (p->connecting && me == &p->b) {
        int e = 0;
        socklen_t l = sizeof e;
        getsockopt(me->fd, SOL_SOCKET, SO_ERROR, &e, &l);
        if (e) { /* nothing listens on the sandbox's port: the client sees a reset */
            pair_close(p);
            return;
        }
        p->connecting = 0;
    }
    if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && fill(me) < 0) {
        pair_close(p);
        return;
    }
    if (pump(me, other) < 0 || pump(other, me) < 0) {
        pair_close(p);
        return;
    }
    pair_update(p);
}

static void a_ev(void *arg, uint32_t ev)
{
    pair *p = arg;
    side_ev(p, &p->a, &p->b, ev);
}

static void b_ev(void *arg, uint32_t ev)
{
    pair *p = arg;
    side_ev(p, &p->b, &p->a, ev);
}

static void accept_ev(void *arg, uint32_t ev)
{
    binding *b = arg;
    for (;;) {
        int c = accept4(b->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0)
            return;
        lis_error err = {0};
        int in = lis_sandbox_socket(b->sb, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, &err);
        if (in < 0) {
            fprintf(stderr, "lis serve: forwarding port %u: %s\n", b->host_port, err.msg);
            close(c);
            continue;
        }
        sv_relay_start(b->s->loop, c, in, b->port);
    }
}

void sv_relay_start(sv_loop *l, int a, int b, unsigned short port)
{
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    pair *p = calloc(1, sizeof *p);
    if (!p || (connect(b, (struct sockaddr *)&to, sizeof to) < 0 && errno != EINPROGRESS)) {
        free(p);
        close(b);
        close(a);
        return;
    }
    p->loop = l;
    p->a.fd = a;
    p->b.fd = b;
    p->connecting = 1;
    if (sv_loop_watch(p->loop, &p->a.w, a, 0, a_ev, p) < 0 ||
        sv_loop_watch(p->loop, &p->b.w, b, EPOLLOUT, b_ev, p) < 0)
        pair_close(p); /* unwatches what was added, closes both */
}

static int listen_on(binding *b, lis_error *err)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(b->host_port)};
    if (inet_pton(AF_INET, b->host_ip, &a.sin_addr) != 1)
        return lis_fail(err, EINVAL, "HostIp '%s' is not an IPv4 address", b->host_ip);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 128) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return lis_fail_errnum(err, e, "listening on %s:%u", b->host_ip, b->host_port);
    }
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    b->host_port = ntohs(a.sin_port); /* HostPort "" or 0: the kernel's pick */
    b->fd = fd;
    return 0;
}

sv_ports *sv_ports_start(sv_server *s, lis_sandbox *sb, const cJSON *bindings, lis_error *err)
{
    size_t n = 0;
    const cJSON *e, *h;
    cJSON_ArrayForEach(e, bindings) cJSON_ArrayForEach(h, e) n++;
    if (!n) {
        lis_fail(err, EINVAL, "PortBindings has no host binding");
        return NULL;
    }
    sv_ports *p = calloc(1, sizeof *p);
    if (!p || !(p->b = calloc(n, sizeof *p->b))) {
        free(p);
        lis_oom(err);
        return NULL;
    }
    cJSON_ArrayForEach(e, bindings)
    {
        unsigned port = 0;
        char proto[8] = "tcp";
        if (!e->string || sscanf(e->string, "%u/%7s", &port, proto) < 1 || !port || port > 65535 ||
            strcmp(proto, "tcp")) {
            lis_fail(err, EINVAL, "port binding '%s': only PORT/tcp is supported",
                     e->string ? e->string : "");
            goto fail;
        }
        cJSON_ArrayForEach(h, e)
        {
            binding *b = &p->b[p->n];
            const char *ip = sv_jstr(h, "HostIp"), *hp = sv_jstr(h, "HostPort");
            b->s = s;
            b->sb = sb;
            b->port = (unsigned short)port;
            b->host_port = hp ? (unsigned short)atoi(hp) : 0;
            snprintf(b->host_ip, sizeof b->host_ip, "%s", ip ? ip : "127.0.0.1");
            snprintf(b->key, sizeof b->key, "%u/tcp", port);
            if (listen_on(b, err) < 0)
                goto fail;
            p->n++;
            if (sv_loop_watch(s->loop, &b->w, b->fd, EPOLLIN, accept_ev, b) < 0) {
                lis_fail_errno(err, "watching %s:%u", b->host_ip, b->host_port);
                goto fail;
            }
        }
    }
    return p;
fail:
    sv_ports_stop(p);
    return NULL;
}

cJSON *sv_ports_json(const sv_ports *p, const cJSON *bindings)
{
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; p && i < p->n; i++) {
        cJSON *a = cJSON_GetObjectItemCaseSensitive(o, p->b[i].key);
        if (!a)
            a = cJSON_AddArrayToObject(o, p->b[i].key);
        cJSON *h = cJSON_CreateObject();
        char port[8];
        snprintf(port, sizeof port, "%u", p->b[i].host_port);
        cJSON_AddStringToObject(h, "HostIp", p->b[i].host_ip);
        cJSON_AddStringToObject(h, "HostPort", port);
        cJSON_AddItemToArray(a, h);
    }
    return o;
}

/* Stops listening; connections already relayed run until either side ends
 * (the sandbox's side goes with the sandbox). */
void sv_ports_stop(sv_ports *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        sv_loop_unwatch(p->b[i].s->loop, &p->b[i].w);
        close(p->b[i].fd);
    }
    free(p->b);
    free(p);
}
