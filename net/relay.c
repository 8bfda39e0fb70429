/* relay.c - the connections of the proxy: accepting them on a sandbox's
 * listener, error replies, and moving bytes both ways once upstream is
 * connected (downloads by splice(2), no copy through this process). A plain
 * HTTP response head is rewritten to "Connection: close": one request per
 * connection. */
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Closes the upstream side of a connection and cancels its name lookup. */
void net_drop_upstream(lis_proxy *px, conn *c)
{
    if (c->ufd >= 0) {
        net_unwatch(px, c->ufd, &c->umask);
        close(c->ufd);
        c->ufd = -1;
    }
    if (c->job) {
        net_dns_cancel(px, c->job);
        c->job = NULL;
    }
}

void net_conn_close(lis_proxy *px, conn *c)
{
    if (c->dead)
        return;
    c->dead = 1;
    net_conn_event(c);
    if (c->cfd >= 0) {
        net_unwatch(px, c->cfd, &c->cmask);
        close(c->cfd);
        c->cfd = -1;
    }
    net_drop_upstream(px, c);
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
    net_port *p = c->port;
    p->nconns--;
    pthread_cond_broadcast(&px->ended);
    if (p->paused && !p->dead && p->nconns < PORT_MAX_CONNS)
        net_pause_listen(px, p, 0);
    c->grave = px->grave_c;
    px->grave_c = c;
}

void net_conn_mask(lis_proxy *px, conn *c, int upstream, uint32_t want)
{
    if (!c->dead && net_set_mask(px, upstream ? c->ufd : c->cfd, upstream ? &c->uref : &c->cref,
                                 upstream ? &c->umask : &c->cmask, want) < 0)
        net_conn_close(px, c);
}

/* An error response; the connection closes after it. */
void net_reply(lis_proxy *px, conn *c, int code, const char *reason, const char *fmt, ...)
{
    char body[1024];
    int n = snprintf(body, sizeof body, "lis proxy: %d %s: ", code, reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body + n, sizeof body - (size_t)n - 1, fmt, ap);
    va_end(ap);
    c->status = code;
    snprintf(c->why, sizeof c->why, "%s", body + n);
    strcat(body, "\n");
    net_drop_upstream(px, c);
    /* The proxy's own answer is final: told now, before the client can read
     * it, so that the step whose command got it (and exited on it) has it;
     * at the close it could come after that step's end. */
    net_conn_event(c);
    if (!c->down && !(c->down = malloc(BUF_SIZE + BUF_SLACK))) {
        net_conn_close(px, c);
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
    net_conn_mask(px, c, 0, EPOLLOUT);
}

void net_send_reply(lis_proxy *px, conn *c)
{
    while (c->down_off < c->down_len) {
        size_t want = c->down_len - c->down_off;
        net_count(&c->port->bytes_in, want);
        ssize_t n = send(c->cfd, c->down + c->down_off, want, MSG_NOSIGNAL);
        net_count_back(&c->port->bytes_in, want, n);
        c->n_in += n > 0 ? (uint64_t)n : 0;
        if (n > 0) {
            c->down_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        net_conn_close(px, c);
        return;
    }
    /* Let the client read the reply before the close (no RST on unread data). */
    shutdown(c->cfd, SHUT_WR);
    c->state = S_LINGER;
    c->deadline = lis_now() + LINGER_TIMEOUT;
    net_conn_mask(px, c, 0, EPOLLIN);
}

void net_linger_drain(lis_proxy *px, conn *c)
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
        net_conn_close(px, c);
        return;
    }
}

/* Moves bytes both ways until both sides would block. */
void net_relay(lis_proxy *px, conn *c)
{
    for (int round = 0; round < 64; round++) {
        int progress = 0;
        /* client -> upstream */
        if (!c->c_eof && c->up_len < BUF_SIZE) {
            ssize_t n = recv(c->cfd, c->up + c->up_len, BUF_SIZE - c->up_len, 0);
            if (n > 0) {
                c->up_len += (size_t)n;
                net_count(&c->port->bytes_out, (uint64_t)n);
                c->n_out += (uint64_t)n;
                progress = 1;
            } else if (n == 0) {
                c->c_eof = progress = 1;
            } else if (errno != EAGAIN && errno != EINTR) {
                net_conn_close(px, c);
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
                net_conn_close(px, c);
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
                    net_conn_close(px, c);
                    return;
                }
            }
            if (c->dpipe_n) {
                size_t want = c->dpipe_n;
                net_count(&c->port->bytes_in, want);
                ssize_t n = splice(c->dpipe[0], NULL, c->cfd, NULL, want,
                                   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                net_count_back(&c->port->bytes_in, want, n);
                c->n_in += n > 0 ? (uint64_t)n : 0;
                if (n > 0) {
                    c->dpipe_n -= (size_t)n;
                    progress = 1;
                } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                    net_conn_close(px, c);
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
                net_conn_close(px, c);
                return;
            }
        }
        /* plain HTTP: the response head says Connection: close (we close after it) */
        if (c->resp_head &&
            http_response_close(c->down, &c->down_len, BUF_SIZE + BUF_SLACK, HEAD_MAX, c->u_eof))
            c->resp_head = 0;
        if (!c->resp_head && c->down_off < c->down_len) {
            size_t want = c->down_len - c->down_off;
            net_count(&c->port->bytes_in, want);
            ssize_t n = send(c->cfd, c->down + c->down_off, want, MSG_NOSIGNAL);
            net_count_back(&c->port->bytes_in, want, n);
            c->n_in += n > 0 ? (uint64_t)n : 0;
            if (n > 0) {
                c->down_off += (size_t)n;
                if (c->down_off == c->down_len)
                    c->down_off = c->down_len = 0;
                progress = 1;
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                net_conn_close(px, c);
                return;
            }
        }
        if (c->u_eof && c->down_off == c->down_len && !c->dpipe_n && !c->c_shut) {
            if (!c->is_connect) { /* the response is complete: one request per connection */
                net_conn_close(px, c);
                return;
            }
            shutdown(c->cfd, SHUT_WR);
            c->c_shut = 1;
        }
        if (c->c_shut && c->u_shut) {
            net_conn_close(px, c);
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
    net_conn_mask(px, c, 0, cw);
    net_conn_mask(px, c, 1, uw);
}

void net_on_listen(lis_proxy *px, net_port *p)
{
    for (int i = 0; i < 64; i++) {
        if (p->nconns >= PORT_MAX_CONNS) {
            net_pause_listen(px, p, 1);
            return;
        }
        int fd = accept4(p->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                net_pause_listen(px, p, 1); /* the sweep retries in a second */
            return;
        }
        conn *c = calloc(1, sizeof *c);
        if (c && !(c->up = malloc(BUF_SIZE + BUF_SLACK))) {
            free(c);
            c = NULL;
        }
        if (!c) {
            close(fd);
            net_pause_listen(px, p, 1);
            return;
        }
        c->dpipe[0] = c->dpipe[1] = -1;
        c->cref = (ep_ref){R_CLIENT, c};
        c->uref = (ep_ref){R_UPSTREAM, c};
        c->port = p;
        c->cfd = fd;
        c->ufd = -1;
        c->state = S_HEAD;
        c->started = lis_now();
        c->deadline = c->started + HEAD_TIMEOUT;
        c->next = px->conns;
        if (px->conns)
            px->conns->prev = c;
        px->conns = c;
        px->nconns++;
        p->nconns++;
        net_timer_arm(px, 1);
        net_conn_mask(px, c, 0, EPOLLIN);
    }
}
