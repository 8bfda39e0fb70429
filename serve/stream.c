/* stream.c - a hijacked connection (exec start, attach) after the 101.
 *
 * Output is framed ([type,0,0,0,size BE32] + data) unless tty, buffered
 * without bound here (the owner stops reading its pipes above
 * SV_STREAM_HIGH, so a slow client slows only its own command), and written
 * non-blocking from the loop. Nothing goes out before the client has read
 * the 101 header: docker-py reads the header through a buffered reader and
 * the frames from the raw socket, so bytes that arrive with the header are
 * lost. SIOCOUTQ tells how many bytes the peer
 * has not read yet; we wait for 0 (at most 1 s). A client half-close
 * (shutdown(SHUT_WR), the Go CLI does it at once) is only the end of its
 * stdin, never a hang-up. */
#include "serve.h"

#include <errno.h>
#include <linux/sockios.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

struct sv_stream {
    sv_loop *loop;
    int sock;
    struct MHD_UpgradeResponseHandle *urh;
    sv_watch w;
    sv_timer t;
    sv_closer closer; /* the server stops: closed whatever is left unsent */
    int framed, ready, in_eof, gone, ending, closed;
    double ready_deadline;
    char *buf;
    size_t off, len, cap;
    const sv_stream_ops *ops;
    void *owner;
};

static void st_update(sv_stream *st);
static void st_gone(sv_stream *st);

static void st_free(void *arg)
{
    sv_stream *st = arg;
    free(st->buf);
    free(st);
}

static void st_close(sv_stream *st)
{
    if (st->closed)
        return;
    st->closed = 1;
    sv_loop_closer_del(st->loop, &st->closer);
    sv_loop_unwatch(st->loop, &st->w);
    sv_timer_cancel(st->loop, &st->t);
    shutdown(st->sock, SHUT_WR);
    /* what the client sent and nobody read (a TLS close, a last byte of
     * stdin): a close with unread input is a reset, which the client can get
     * before the output it was still reading (bounded: one buffer's worth) */
    char drain[4096];
    for (int i = 0; i < 16 && recv(st->sock, drain, sizeof drain, MSG_DONTWAIT) > 0; i++) {
    }
    MHD_upgrade_action(st->urh, MHD_UPGRADE_ACTION_CLOSE);
    sv_loop_defer(st->loop, st_free, st);
}

/* The server stops: the owner is told (it forgets the stream), then it closes. */
static void st_stop(void *arg)
{
    sv_stream *st = arg;
    st->ending = 1;
    st_gone(st);
    st_close(st);
}

static void st_gone(sv_stream *st)
{
    if (st->gone)
        return;
    st->gone = 1;
    st->off = st->len = 0;
    sv_loop_unwatch(st->loop, &st->w);
    if (st->ops && st->ops->gone)
        st->ops->gone(st->owner);
    if (st->ending)
        st_close(st);
    else
        st_update(st);
}

static void st_flush(sv_stream *st)
{
    while (st->ready && !st->gone && st->off < st->len) {
        ssize_t n =
            send(st->sock, st->buf + st->off, st->len - st->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno == EINTR)
                continue;
            st_gone(st);
            return;
        }
        st->off += (size_t)n;
    }
    if (st->off == st->len)
        st->off = st->len = 0;
    else if (st->off > (1u << 20)) {
        memmove(st->buf, st->buf + st->off, st->len - st->off);
        st->len -= st->off;
        st->off = 0;
    }
}

static void st_update(sv_stream *st)
{
    if (st->closed)
        return;
    if (st->ending && (st->gone || (st->ready && st->len == 0))) {
        st_close(st);
        return;
    }
    uint32_t ev = 0;
    if (!st->in_eof && !st->gone)
        ev |= EPOLLIN | EPOLLRDHUP;
    if (st->ready && st->len > 0 && !st->gone)
        ev |= EPOLLOUT;
    if (sv_loop_events(st->loop, &st->w, ev) < 0 && !st->gone)
        st_gone(st); /* without its events the stream would stall: cut it */
}

static void st_event(void *arg, uint32_t events)
{
    sv_stream *st = arg;
    if ((events & (EPOLLIN | EPOLLRDHUP)) && !st->in_eof) {
        char b[65536];
        for (;;) {
            ssize_t n = recv(st->sock, b, sizeof b, MSG_DONTWAIT);
            if (n > 0) {
                if (st->ops && st->ops->input)
                    st->ops->input(st->owner, b, (size_t)n);
                continue;
            }
            if (n == 0) {
                st->in_eof = 1;
                if (st->ops && st->ops->input)
                    st->ops->input(st->owner, b, 0);
            } else if (errno == EINTR) {
                continue;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
                st_gone(st);
                return;
            }
            break;
        }
    }
    /* EPOLLHUP/ERR: the peer closed both ways (a half-close is only RDHUP) */
    if (events & (EPOLLHUP | EPOLLERR)) {
        st_gone(st);
        return;
    }
    if (events & EPOLLOUT) {
        size_t before = st->len - st->off;
        st_flush(st);
        if (!st->gone && before >= SV_STREAM_HIGH && st->len - st->off < SV_STREAM_HIGH &&
            st->ops && st->ops->drained)
            st->ops->drained(st->owner);
    }
    if (!st->closed)
        st_update(st);
}

static void st_ready_check(void *arg)
{
    sv_stream *st = arg;
    int unread = 0;
    if (ioctl(st->sock, SIOCOUTQ, &unread) < 0 || unread <= 0 || lis_now() >= st->ready_deadline) {
        st->ready = 1;
        st_flush(st);
        st_update(st);
        return;
    }
    sv_timer_arm(st->loop, &st->t, 0.0005, st_ready_check, st);
}

sv_stream *sv_stream_new(sv_loop *l, int sock, struct MHD_UpgradeResponseHandle *urh, int framed,
                         const char *extra, size_t nextra, const sv_stream_ops *ops, void *owner)
{
    sv_stream *st = calloc(1, sizeof *st);
    if (!st) {
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        return NULL;
    }
    st->loop = l;
    st->sock = sock;
    st->urh = urh;
    st->framed = framed;
    st->ops = ops;
    st->owner = owner;
    st->ready_deadline = lis_now() + 1.0;
    if (sv_loop_watch(l, &st->w, sock, EPOLLIN | EPOLLRDHUP, st_event, st) < 0) {
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        free(st);
        return NULL;
    }
    sv_loop_closer_add(l, &st->closer, st_stop, st);
    if (nextra && ops && ops->input)
        ops->input(owner, extra, nextra);
    st_ready_check(st);
    return st;
}

static int st_reserve(sv_stream *st, size_t more)
{
    return LIS_GROW(st->buf, st->cap, st->len + more);
}

void sv_stream_write(sv_stream *st, int type, const char *buf, size_t n)
{
    if (!st || st->gone || st->closed || n == 0)
        return;
    if (st_reserve(st, n + 8) < 0) {
        st_gone(st);
        return;
    }
    if (st->framed) {
        unsigned char h[8] = {(unsigned char)type,
                              0,
                              0,
                              0,
                              (unsigned char)(n >> 24),
                              (unsigned char)(n >> 16),
                              (unsigned char)(n >> 8),
                              (unsigned char)n};
        memcpy(st->buf + st->len, h, 8);
        st->len += 8;
    }
    memcpy(st->buf + st->len, buf, n);
    st->len += n;
    st_flush(st);
    st_update(st);
}

size_t sv_stream_backlog(const sv_stream *st) { return st && !st->gone ? st->len - st->off : 0; }

void sv_stream_end(sv_stream *st)
{
    if (!st)
        return;
    st->ops = NULL;
    st->ending = 1;
    st_update(st);
}

void sv_stream_orphan(sv_stream *st)
{
    if (st)
        st->ops = NULL;
}
