/* dns.c - the resolver pool: names are resolved on the host by at most
 * DNS_THREADS threads, started on demand; a finished lookup is handed back
 * to the event loop through an eventfd. The sandbox needs no DNS. */
#include "net.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
            struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                     .ai_socktype = SOCK_STREAM,
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

int net_dns_submit(lis_proxy *px, conn *c)
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
        net_start_thread(&px->dthreads[px->ndthreads], dns_main, px) == 0)
        px->ndthreads++;
    int ok = px->ndthreads > 0;
    pthread_cond_signal(&px->dcv);
    pthread_mutex_unlock(&px->dmu);
    c->job = j; /* without a thread it stays queued until net_reply() cancels it */
    return ok ? 0 : -1;
}

void net_dns_cancel(lis_proxy *px, dns_job *j)
{
    pthread_mutex_lock(&px->dmu);
    j->cancelled = 1;
    pthread_mutex_unlock(&px->dmu);
}
