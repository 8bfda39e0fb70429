/* event.c - each finished request of a proxy sandbox told to its watcher
 * (lis_net_sandbox_watch; monitor/ records them as network effects). */
#include "net.h"

#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

void net_conn_event(conn *c)
{
    net_port *p = c->port;
    if (c->reported || !p || !p->on_event || (!c->host[0] && !c->status && !c->n_out))
        return; /* told already, nobody asks, or a connection that never said a word */
    c->reported = 1;
    lis_net_event ev = {
        .host = c->host,
        .port = (unsigned short)atoi(c->portstr),
        .method = c->method,
        .addr = c->addr,
        .resolved = c->resolved,
        .allowed = c->status != 403,
        .status = c->status,
        .rule = c->status ? c->why : "",
        .bytes_up = c->n_out,
        .bytes_down = c->n_in,
        .start = c->started,
        .end = lis_now(),
    };
    p->on_event(p->event_arg, &ev);
}

int lis_net_sandbox_settle(lis_sandbox *sb, double timeout)
{
    net_port *p = lis_sandbox_ext(sb); /* lives as long as sb's handle (attach.c) */
    if (!p)
        return 0;
    lis_proxy *px = p->px;
    double end = lis_now() + timeout;
    pthread_mutex_lock(&px->mu);
    while (p->nconns && !p->dead) {
        double left = end - lis_now();
        if (left <= 0)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)left;
        ts.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&px->ended, &px->mu, &ts);
    }
    int open = p->nconns > 0 && !p->dead;
    pthread_mutex_unlock(&px->mu);
    return open;
}

int lis_net_sandbox_watch(lis_sandbox *sb, lis_net_event_fn fn, void *arg, lis_error *err)
{
    net_port *p = lis_sandbox_ext(sb); /* attach.c: an ephemeral sandbox served here */
    if (!p)
        return lis_fail(err, ENOTSUP,
                        "sandbox %s has no proxy served by this process: its requests "
                        "cannot be watched",
                        lis_sandbox_name(sb));
    pthread_mutex_lock(&p->px->mu);
    p->on_event = fn;
    p->event_arg = fn ? arg : NULL;
    pthread_mutex_unlock(&p->px->mu);
    return 0;
}

int lis_net_host_match(const char *glob, const char *host)
{
    return fnmatch(glob, host, FNM_CASEFOLD) == 0;
}
