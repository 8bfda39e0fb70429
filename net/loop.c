/* loop.c - the proxy object, its epoll set, timer and ports: the bottom of
 * the event loop (one loop serves every sandbox of a process: a thread of the
 * context, the caller's pumping, or `lis proxyd`). What runs on events is in
 * dispatch.c, above everything it calls. */
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
    int rc = net_set_mask(px, p->listen_fd, &p->lref, &p->lmask, paused || p->dead ? 0 : EPOLLIN);
    /* a listener that cannot be polled again stays paused: the sweep, which
     * the timer runs while a port is paused, tries again each second */
    p->paused = paused || rc < 0;
    if (p->paused)
        net_timer_arm(px, 1);
}

/* ---- ports (one per sandbox) ---- */

net_port *net_port_new(const char *name, const lis_netrules *rules, int listen_fd, int pid_fd)
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
int net_port_add(lis_proxy *px, net_port *p)
{
    fcntl(p->listen_fd, F_SETFL, O_NONBLOCK | fcntl(p->listen_fd, F_GETFL));
    if (net_set_mask(px, p->listen_fd, &p->lref, &p->lmask, EPOLLIN) < 0)
        return -1;
    if (p->pid_fd >= 0) {
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &p->pref};
        if (epoll_ctl(px->epfd, EPOLL_CTL_ADD, p->pid_fd, &e) < 0) {
            int saved = errno;
            net_unwatch(px, p->listen_fd, &p->lmask);
            errno = saved;
            return -1;
        }
    }
    p->px = px;
    p->next = px->ports;
    if (px->ports)
        px->ports->prev = p;
    px->ports = p;
    px->nports++;
    return 0;
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

void net_proxy_release(lis_proxy *px)
{
    int fds[] = {px->epfd, px->wakefd, px->dnsfd, px->timerfd, px->ctl_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    pthread_mutex_destroy(&px->mu);
    pthread_cond_destroy(&px->ended);
    pthread_mutex_destroy(&px->dmu);
    pthread_cond_destroy(&px->dcv);
    free(px);
}

lis_proxy *net_proxy_new(int daemon, lis_error *err)
{
    lis_proxy *px = calloc(1, sizeof *px);
    if (!px) {
        lis_oom(err);
        return NULL;
    }
    px->daemon = daemon;
    px->ctl_fd = -1;
    pthread_mutex_init(&px->mu, NULL);
    pthread_condattr_t ca; /* waited on with lis_now's clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&px->ended, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&px->dmu, NULL);
    pthread_cond_init(&px->dcv, NULL);
    px->epfd = epoll_create1(EPOLL_CLOEXEC);
    px->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    px->dnsfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    px->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (px->epfd < 0 || px->wakefd < 0 || px->dnsfd < 0 || px->timerfd < 0) {
        lis_fail_errno(err, "creating the proxy's event loop");
        net_proxy_release(px);
        return NULL;
    }
    px->wake_ref = (ep_ref){R_WAKE, px};
    px->timer_ref = (ep_ref){R_TIMER, px};
    px->dns_ref = (ep_ref){R_DNS, px};
    px->ctl_ref = (ep_ref){R_CTL_LISTEN, px};
    const int fds[] = {px->wakefd, px->timerfd, px->dnsfd};
    ep_ref *refs[] = {&px->wake_ref, &px->timer_ref, &px->dns_ref};
    for (int i = 0; i < 3; i++) {
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = refs[i]};
        if (epoll_ctl(px->epfd, EPOLL_CTL_ADD, fds[i], &e) < 0) {
            lis_fail_errno(err, "creating the proxy's event loop");
            net_proxy_release(px);
            return NULL;
        }
    }
    px->idle_since = lis_now();
    if (daemon)
        net_timer_arm(px, 1);
    return px;
}
