/* dispatch.c - what the event loop runs: one round of epoll (each ready fd
 * to its handler in relay.c, request.c or dns.c; the daemon's control socket
 * through the handlers proxyd.c set), the once-a-second deadline sweep, and
 * taking ports and the whole proxy down. It sits above the files it calls,
 * so none of them calls back into it (docs/architecture.md). */
#include "net.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

void net_sweep(lis_proxy *px)
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
        case S_REPLY: net_conn_close(px, c); break;
        case S_RESOLVE:
            net_reply(px, c, 504, "Gateway Timeout", "resolving %s took longer than %.0f s",
                      c->host, RESOLVE_TIMEOUT);
            break;
        case S_CONNECT:
            if (c->next_addr < c->naddrs)
                net_try_connect(px, c);
            else
                net_reply(px, c, 504, "Gateway Timeout",
                          "connecting to %s port %s took longer "
                          "than %.0f s",
                          c->host, c->portstr, CONNECT_TIMEOUT);
            break;
        }
    }
    int paused = 0;
    for (net_port *p = px->ports; p; p = p->next) {
        if (p->paused && p->nconns < PORT_MAX_CONNS)
            net_pause_listen(px, p, 0);
        paused |= p->paused;
    }
    if (!px->nconns && !px->daemon && !paused) /* a paused listener is retried each tick */
        net_timer_arm(px, 0);
}

/* Caller holds px->mu. */
void net_port_kill(lis_proxy *px, net_port *p)
{
    if (p->dead)
        return;
    for (conn *c = px->conns, *next; c; c = next) {
        next = c->next;
        if (c->port == p)
            net_conn_close(px, c);
    }
    p->dead = 1;
    net_unwatch(px, p->listen_fd, &p->lmask);
    close(p->listen_fd);
    p->listen_fd = -1;
    if (p->pid_fd >= 0) {
        uint32_t polled = EPOLLIN;
        net_unwatch(px, p->pid_fd, &polled);
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

void net_dns_complete(lis_proxy *px)
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
            net_resolved(px, j->c, j->rc, j->res);
        }
        if (j->res)
            freeaddrinfo(j->res);
        free(j);
    }
}

void net_on_client(lis_proxy *px, conn *c, uint32_t ev)
{
    switch (c->state) {
    case S_HEAD: net_read_head(px, c); break;
    case S_RELAY: net_relay(px, c); break;
    case S_REPLY: net_send_reply(px, c); break;
    case S_LINGER: net_linger_drain(px, c); break;
    default:
        if (ev & (EPOLLERR | EPOLLHUP))
            net_conn_close(px, c);
    }
}

void net_on_upstream(lis_proxy *px, conn *c)
{
    if (c->state == S_CONNECT)
        net_connect_done(px, c);
    else if (c->state == S_RELAY)
        net_relay(px, c);
}

/* One round: waits up to timeout_ms, handles what is ready. */
int net_proxy_step(lis_proxy *px, int timeout_ms)
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
        case R_TIMER: net_sweep(px); break;
        case R_DNS: net_dns_complete(px); break;
        case R_LISTEN: {
            net_port *p = r->obj;
            if (!p->dead)
                net_on_listen(px, p);
            break;
        }
        case R_PID: {
            net_port *p = r->obj;
            if (!p->dead)
                net_port_kill(px, p); /* the sandbox is gone */
            break;
        }
        case R_CLIENT: {
            conn *c = r->obj;
            if (!c->dead)
                net_on_client(px, c, evs[i].events);
            break;
        }
        case R_UPSTREAM: {
            conn *c = r->obj;
            if (!c->dead)
                net_on_upstream(px, c);
            break;
        }
        /* the daemon's control socket: handlers set by proxyd.c (above us) */
        case R_CTL_LISTEN: px->on_ctl_accept(px); break;
        case R_CTL: px->on_ctl(px, r->obj); break;
        }
    }
    net_bury(px);
    pthread_mutex_unlock(&px->mu);
    return 0;
}

void *net_proxy_main(void *arg)
{
    lis_proxy *px = arg;
    while (!__atomic_load_n(&px->stop, __ATOMIC_ACQUIRE))
        net_proxy_step(px, -1);
    return NULL;
}

void net_proxy_free(lis_proxy *px)
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
        net_port_kill(px, px->ports);
    while (px->conns)
        net_conn_close(px, px->conns);
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
    net_bury(px);
    net_proxy_release(px);
}
