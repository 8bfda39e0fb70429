/* netrelay.c - reachability on a user-defined network, rootless: every
 * member M has an address A(M) in 127.80.0.0/16, named in the other members'
 * /etc/hosts (networks.c). For each TCP port M listens on (its network
 * namespace's /proc/PID/net/tcp and tcp6, read once a second), each other
 * member P gets a listener on A(M):port made inside P's namespace
 * (lis_sandbox_socket: a process may keep a socket of another namespace);
 * what it accepts is relayed (ports.c) to a socket made inside M's
 * namespace, connected to its 127.0.0.1:port. Nothing else reaches M: a
 * container not on the network has no such listener, and no route exists
 * between namespaces. Egress is untouched (the proxy rules of each member).
 *
 * Why a scan rather than declared ports: compose files rarely declare
 * `expose`, and a server's port is only known once it listens. A client that
 * connects before the next scan gets "connection refused" and retries, as it
 * would against a server still starting. */
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

#define SCAN_EVERY 1.0
#define PORTS_MAX 64 /* listening ports followed per member */

typedef struct sv_netlisten {
    sv_server *s;
    const sv_container *peer, *target; /* listens in peer's namespace for target */
    unsigned short port;
    uint32_t ip;
    int fd, seen;
    sv_watch w;
    struct sv_netlisten *next;
} netlisten;

static void nl_free(void *arg) { free(arg); }

static void nl_close(sv_server *s, netlisten **pp)
{
    netlisten *l = *pp;
    *pp = l->next;
    sv_loop_unwatch(s->loop, &l->w);
    close(l->fd);
    sv_loop_defer(s->loop, nl_free, l); /* an event of this batch may name it */
}

/* The target of a listener, if it is still on a network with the peer. */
static const sv_container *live_target(const netlisten *l)
{
    for (sv_network *n = l->s->networks; n; n = n->next)
        for (sv_netmember *m = n->members; m; m = m->next)
            if (m->c == l->target && m->c->sb && m->ip == l->ip)
                return m->c;
    return NULL;
}

static void accept_ev(void *arg, uint32_t ev)
{
    netlisten *l = arg;
    for (;;) {
        int a = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (a < 0)
            return;
        const sv_container *t = live_target(l);
        lis_error err = {0};
        int b = t ? lis_sandbox_socket(t->sb, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, &err) : -1;
        if (b < 0) {
            close(a);
            continue;
        }
        sv_relay_start(l->s->loop, a, b, l->port);
    }
}

/* The TCP ports pid's network namespace listens on (on any or a loopback
 * address): how many, at most max. */
static size_t listening_ports(pid_t pid, unsigned short *ports, size_t max)
{
    size_t n = 0;
    const char *files[] = {"tcp", "tcp6"};
    for (size_t f = 0; f < 2; f++) {
        char path[64], line[512];
        snprintf(path, sizeof path, "/proc/%d/net/%s", (int)pid, files[f]);
        FILE *fp = fopen(path, "re");
        if (!fp)
            continue;
        for (int i = 0; i < 4096 && fgets(line, sizeof line, fp); i++) {
            char local[80];
            unsigned st;
            if (sscanf(line, " %*u: %79s %*s %x", local, &st) != 2 || st != 0x0A)
                continue;
            const char *colon = strrchr(local, ':');
            unsigned port = colon ? (unsigned)strtoul(colon + 1, NULL, 16) : 0;
            int dup = 0;
            for (size_t k = 0; k < n; k++)
                dup |= ports[k] == port;
            if (port && !dup && n < max)
                ports[n++] = (unsigned short)port;
        }
        fclose(fp);
    }
    return n;
}

static netlisten *find(sv_server *s, const sv_container *peer, const sv_container *target,
                       uint32_t ip, unsigned short port)
{
    for (netlisten *l = s->net_listens; l; l = l->next)
        if (l->peer == peer && l->target == target && l->ip == ip && l->port == port)
            return l;
    return NULL;
}

/* A listener on ip:port inside peer's namespace; NULL when it cannot be made
 * (the port is in use there: the peer's own server has it). */
static netlisten *open_listener(sv_server *s, const sv_container *peer, const sv_container *target,
                                uint32_t ip, unsigned short port)
{
    lis_error err = {0};
    int fd = lis_sandbox_socket(peer->sb, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, &err);
    if (fd < 0)
        return NULL;
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(ip)};
    netlisten *l = calloc(1, sizeof *l);
    if (!l || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 128) < 0) {
        free(l);
        close(fd);
        return NULL;
    }
    *l = (netlisten){.s = s, .peer = peer, .target = target, .port = port, .ip = ip, .fd = fd};
    if (sv_loop_watch(s->loop, &l->w, fd, EPOLLIN, accept_ev, l) < 0) {
        close(fd);
        free(l);
        return NULL;
    }
    l->next = s->net_listens;
    s->net_listens = l;
    return l;
}

/* One network: each running member's ports, in each other member. */
static int scan_network(sv_server *s, sv_network *n)
{
    int members = 0;
    for (sv_netmember *t = n->members; t; t = t->next) {
        if (!t->c->sb)
            continue;
        members++;
        unsigned short ports[PORTS_MAX];
        size_t np = t->c->main || t->c->children
                        ? listening_ports(lis_sandbox_pid(t->c->sb), ports, PORTS_MAX)
                        : 0;
        for (sv_netmember *p = n->members; p; p = p->next) {
            if (p == t || !p->c->sb)
                continue;
            for (size_t i = 0; i < np; i++) {
                netlisten *l = find(s, p->c, t->c, t->ip, ports[i]);
                if (!l)
                    l = open_listener(s, p->c, t->c, t->ip, ports[i]);
                if (l)
                    l->seen = 1;
            }
        }
    }
    return members;
}

static void scan(void *arg)
{
    sv_server *s = arg;
    int busy = 0;
    for (netlisten *l = s->net_listens; l; l = l->next)
        l->seen = 0;
    for (sv_network *n = s->networks; n; n = n->next)
        busy |= scan_network(s, n) >= 2;
    /* a port no longer listened on (or a member gone) loses its listeners */
    for (netlisten **pp = &s->net_listens; *pp;)
        if (!(*pp)->seen)
            nl_close(s, pp);
        else
            pp = &(*pp)->next;
    if (busy)
        sv_timer_arm(s->loop, &s->net_scan, SCAN_EVERY, scan, s);
}

void sv_netrelay_kick(sv_server *s)
{
    if (!s->net_scan.when)
        sv_timer_arm(s->loop, &s->net_scan, 0, scan, s);
}

void sv_netrelay_forget(sv_server *s, const sv_container *c)
{
    for (netlisten **pp = &s->net_listens; *pp;)
        if ((*pp)->peer == c || (*pp)->target == c)
            nl_close(s, pp);
        else
            pp = &(*pp)->next;
}
