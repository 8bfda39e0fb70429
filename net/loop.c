/* loop.c - the proxy object and its event loop (epoll): one loop serves every
 * sandbox of a process (a thread of the context, the caller's pumping, or
 * `lis proxyd`), with no thread or process per sandbox or connection. Ports
 * are the sandboxes' listeners; a once-a-second sweep enforces deadlines. */
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

void net_timer_arm(lis_proxy *px, int on)
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

void net_pause_listen(lis_proxy *px, net_port *p, int paused)
{
    p->paused = paused;
    net_set_mask(px, p->listen_fd, &p->lref, &p->lmask, paused || p->dead ? 0 : EPOLLIN);
}

void net_sweep(lis_proxy *px)
{
    uint64_t v;
    if (read(px->timerfd, &v, sizeof v) < 0) {
        /* spurious */
    }
    double now = net_now();
    for (conn *c = px->conns, *next; c; c = next) {
        next = c->next;
        if (!c->deadline || now < c->deadline)
            continue;
        switch (c->state) {
        case S_HEAD:
        case S_LINGER:
        case S_REPLY: net_conn_close(px, c); break;
        case S_RESOLVE:
            net_reply(px, c, 504, "Gateway Timeout", "resolving %s took longer than %.0f s", c->host,
                  RESOLVE_TIMEOUT);
            break;
        case S_CONNECT:
            if (c->next_addr < c->naddrs)
                net_try_connect(px, c);
            else
                net_reply(px, c, 504, "Gateway Timeout", "connecting to %s port %s took longer "
                      "than %.0f s", c->host, c->portstr, CONNECT_TIMEOUT);
            break;
        }
    }
    for (net_port *p = px->ports; p; p = p->next)
        if (p->paused && p->nconns < PORT_MAX_CONNS)
            net_pause_listen(px, p, 0);
    if (!px->nconns && !px->daemon)
        net_timer_arm(px, 0);
}

/* ---- ports (one per sandbox) ---- */

net_port *net_port_new(const char *name, const lis_netrules *rules, int listen_fd,
                              int pid_fd)
{
    net_port *p = calloc(1, sizeof *p);
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
void net_port_add(lis_proxy *px, net_port *p)
{
    p->px = px;
    p->next = px->ports;
    if (px->ports)
        px->ports->prev = p;
    px->ports = p;
    px->nports++;
    fcntl(p->listen_fd, F_SETFL, O_NONBLOCK | fcntl(p->listen_fd, F_GETFL));
    net_set_mask(px, p->listen_fd, &p->lref, &p->lmask, EPOLLIN);
    if (p->pid_fd >= 0) {
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &p->pref};
        epoll_ctl(px->epfd, EPOLL_CTL_ADD, p->pid_fd, &e);
    }
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
    net_set_mask(px, p->listen_fd, &p->lref, &p->lmask, 0);
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
        px->idle_since = net_now();
    p->grave = px->grave_p;
    px->grave_p = p;
}

void net_bury(lis_proxy *px)
{
    while (px->grave_c) {
        conn *c = px->grave_c;
        px->grave_c = c->grave;
        free(c);
    }
    while (px->grave_p) {
        net_port *p = px->grave_p;
        px->grave_p = p->grave;
        lis_netrules_free(&p->rules);
        free(p);
    }
}

/* ---- the proxy object and its loop ---- */


lis_proxy *net_proxy_new(int daemon, lis_error *err)
{
    lis_proxy *px = calloc(1, sizeof *px);
    if (!px) {
        net_fail(err, ENOMEM, "out of memory");
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
        net_fail(err, errno, "creating the proxy's event loop: %s", strerror(errno));
        net_proxy_free(px);
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
    px->idle_since = net_now();
    if (daemon)
        net_timer_arm(px, 1);
    return px;
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
        case R_CTL_LISTEN: net_ctl_accept(px); break;
        case R_CTL: net_ctl_handle(px, r->obj); break;
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
    int fds[] = {px->epfd, px->wakefd, px->dnsfd, px->timerfd, px->ctl_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    pthread_mutex_destroy(&px->mu);
    pthread_mutex_destroy(&px->dmu);
    pthread_cond_destroy(&px->dcv);
    free(px);
}
