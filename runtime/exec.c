/* exec.c - running commands in a sandbox (client side).
 *
 * A command is one connection to the sandbox's PID 1, which forks a session
 * process for it (see init/lis_init.c). Output is captured through pipes
 * into head+tail buffers with a byte cap, so a flood never grows the owner;
 * or (LIS_STDIO_PIPE) the caller gets its ends of fresh pipes to relay, so
 * none of its own fds (a terminal) has to go into the sandbox.
 * Each running command has one pollable fd (an epoll set of its connection
 * and capture pipes). */
#include "internal.h"
#include "proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- head + tail capture ---- */

typedef struct capbuf {
    char *head, *ring;
    size_t head_cap, head_len, ring_cap, ring_start, ring_len;
    uint64_t total;
} capbuf;

static int cap_init(capbuf *c, size_t cap)
{
    memset(c, 0, sizeof *c);
    c->head_cap = cap / 2;
    c->ring_cap = cap - c->head_cap;
    c->head = malloc(c->head_cap + 1);
    c->ring = malloc(c->ring_cap + 1);
    return c->head && c->ring ? 0 : -1;
}

static void cap_add(capbuf *c, const char *p, size_t n)
{
    c->total += n;
    size_t h = c->head_cap - c->head_len;
    if (h > n)
        h = n;
    memcpy(c->head + c->head_len, p, h);
    c->head_len += h;
    p += h;
    n -= h;
    if (!n || !c->ring_cap)
        return;
    if (n >= c->ring_cap) {
        memcpy(c->ring, p + n - c->ring_cap, c->ring_cap);
        c->ring_start = 0;
        c->ring_len = c->ring_cap;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        size_t pos = (c->ring_start + c->ring_len) % c->ring_cap;
        c->ring[pos] = p[i];
        if (c->ring_len < c->ring_cap)
            c->ring_len++;
        else
            c->ring_start = (c->ring_start + 1) % c->ring_cap;
    }
}

static void cap_finish(capbuf *c, lis_buf *out)
{
    size_t n = c->head_len + c->ring_len;
    out->data = malloc(n + 1);
    out->len = 0;
    out->dropped = c->total - n;
    if (out->data) {
        memcpy(out->data, c->head, c->head_len);
        for (size_t i = 0; i < c->ring_len; i++)
            out->data[c->head_len + i] = c->ring[(c->ring_start + i) % c->ring_cap];
        out->data[n] = 0;
        out->len = n;
    }
    free(c->head);
    free(c->ring);
    memset(c, 0, sizeof *c);
}

/* ---- the running command ---- */

struct lis_proc {
    lis_sandbox *sb;
    int conn, epfd, out_rd, err_rd, in_wr, pty_fd;
    int pipe_fd[3]; /* LIS_STDIO_PIPE: the caller's ends */
    char *in_data;
    size_t in_len, in_off;
    capbuf out, err;
    int capture_out, capture_err;
    pid_t pid;
    int exited, status, timed_out, exec_failed, lost, fallback_oom;
    char err_msg[256];
    double t0, wall;
    char msgbuf[sizeof(struct lis_msg)];
    size_t msglen;
    lis_cg_mark cgm; /* cgroups.c: counters at the start */
};

void lis_result_free(lis_result *r)
{
    if (!r)
        return;
    free(r->out.data);
    free(r->err.data);
    r->out.data = r->err.data = NULL;
}

static void proc_free(lis_proc *p)
{
    int fds[] = {p->conn,   p->epfd,       p->out_rd,     p->err_rd,    p->in_wr,
                 p->pty_fd, p->pipe_fd[0], p->pipe_fd[1], p->pipe_fd[2]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(p->in_data);
    if (p->cgm.peak_fd >= 0)
        close(p->cgm.peak_fd);
    if (p->capture_out) {
        free(p->out.head);
        free(p->out.ring);
    }
    if (p->capture_err) {
        free(p->err.head);
        free(p->err.ring);
    }
    free(p);
}

static int send_request(int conn, const struct lis_req_hdr *h, const int *fds, int nfds,
                        const char *payload, size_t len)
{
    if (lis_send_fds(conn, h, sizeof *h, fds, nfds, 0) != (ssize_t)sizeof *h)
        return -1;
    while (len) {
        ssize_t n = send(conn, payload, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        payload += n;
        len -= (size_t)n;
    }
    return 0;
}

static char *build_payload(const char *cwd, const char *const *argv, char **env, size_t *len,
                           uint32_t *argc, uint32_t *envc)
{
    size_t n = strlen(cwd) + 1;
    *argc = *envc = 0;
    for (const char *const *a = argv; *a; a++, (*argc)++)
        n += strlen(*a) + 1;
    for (char **e = env; e && *e; e++, (*envc)++)
        n += strlen(*e) + 1;
    char *buf = malloc(n), *p = buf;
    if (!buf)
        return NULL;
    p = stpcpy(p, cwd) + 1;
    for (const char *const *a = argv; *a; a++)
        p = stpcpy(p, *a) + 1;
    for (char **e = env; e && *e; e++)
        p = stpcpy(p, *e) + 1;
    *len = n;
    return buf;
}

static int watch(int epfd, int fd, uint32_t ev)
{
    struct epoll_event e = {.events = ev, .data.fd = fd};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e);
}

/* *fd out of the command's epoll set, closed, -1. The DEL comes first: a
 * fork elsewhere in the owner may hold a copy of the fd for a moment, and
 * close alone would then leave it in the set. Its result needs no action: a
 * DEL fails only for an fd that is not in the set, the state wanted. */
static void unwatch(lis_proc *p, int *fd)
{
    (void)epoll_ctl(p->epfd, EPOLL_CTL_DEL, *fd, NULL);
    close(*fd);
    *fd = -1;
}

static int recv_msg(lis_proc *p, struct lis_msg *m, int *passed_fd, int block)
{
    *passed_fd = -1;
    while (p->msglen < sizeof *m) {
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } u;
        struct iovec iov = {p->msgbuf + p->msglen, sizeof *m - p->msglen};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = u.buf,
                            .msg_controllen = sizeof u.buf};
        ssize_t n = recvmsg(p->conn, &mh, MSG_CMSG_CLOEXEC | (block ? 0 : MSG_DONTWAIT));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? 0 : -1;
        if (n == 0)
            return -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                memcpy(passed_fd, CMSG_DATA(c), sizeof(int));
        p->msglen += (size_t)n;
    }
    memcpy(m, p->msgbuf, sizeof *m);
    p->msglen = 0;
    return 1;
}

static int handle_msg(lis_proc *p, const struct lis_msg *m, int fd)
{
    switch (m->type) {
    case LIS_MSG_STARTED: p->pid = m->a; break;
    case LIS_MSG_PTY:
        if (p->pty_fd >= 0)
            close(p->pty_fd);
        p->pty_fd = fd;
        fd = -1;
        break;
    case LIS_MSG_EXEC_ERR:
        p->exec_failed = 1;
        memcpy(p->err_msg, m->text, sizeof m->text); /* text (240) < err_msg (256) */
        p->err_msg[sizeof m->text - 1] = 0;
        break;
    case LIS_MSG_EXITED:
        p->exited = 1;
        p->status = m->a;
        p->timed_out = m->b == 1;
        p->fallback_oom = m->b == 2; /* lis-init's memory watchdog killed part of it */
        p->wall = lis_now() - p->t0;
        break;
    }
    if (fd >= 0)
        close(fd);
    return 0;
}

/* What goes to lis-init with a request: the header, the fds passed with it,
 * and our copies of the child's ends (closed once sent). */
typedef struct exec_req {
    struct lis_req_hdr h;
    int send_fds[3], nfds;
    int child_ends[3];
} exec_req;

static lis_proc *proc_new(lis_sandbox *sb)
{
    lis_proc *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->sb = sb;
    p->conn = p->epfd = p->out_rd = p->err_rd = p->in_wr = p->pty_fd = -1;
    p->pipe_fd[0] = p->pipe_fd[1] = p->pipe_fd[2] = -1;
    p->t0 = lis_now();
    lis_cg_cmd_begin(sb->cg, &p->cgm);
    return p;
}

/* A pipe whose end `ours` (0 read, 1 write) is non-blocking. */
static int pipe_for(int pp[2], int ours, lis_error *err)
{
    if (pipe2(pp, O_CLOEXEC) < 0)
        return lis_fail_errno(err, "pipe");
    fcntl(pp[ours], F_SETFL, O_NONBLOCK);
    return 0;
}

/* stdin: the caller's fd, a pipe the caller writes, or the given bytes. */
static int stdin_setup(lis_proc *p, const lis_exec_spec *spec, exec_req *rq, lis_error *err)
{
    int pp[2];
    switch (spec->in) {
    case LIS_STDIO_NULL:
    case LIS_STDIO_CAPTURE: return 0;
    case LIS_STDIO_FD: rq->send_fds[rq->nfds++] = spec->in_fd; break;
    case LIS_STDIO_PIPE:
        if (pipe_for(pp, 1, err) < 0)
            return -1;
        rq->child_ends[0] = pp[0];
        p->pipe_fd[0] = pp[1];
        rq->send_fds[rq->nfds++] = pp[0];
        break;
    case LIS_STDIO_DATA:
        if (pipe_for(pp, 1, err) < 0)
            return -1;
        rq->child_ends[0] = pp[0];
        p->in_wr = pp[1];
        p->in_data = malloc(spec->in_len ? spec->in_len : 1);
        if (!p->in_data)
            return lis_oom(err);
        memcpy(p->in_data, spec->in_data, spec->in_len);
        p->in_len = spec->in_len;
        rq->send_fds[rq->nfds++] = pp[0];
        break;
    }
    rq->h.flags |= LIS_REQ_HAVE_STDIN;
    return 0;
}

/* stdout (i 0) or stderr (i 1): the caller's fd, a pipe the caller reads, or
 * captured here into head + tail buffers of cap bytes. */
static int output_setup(lis_proc *p, int i, lis_stdio mode, int given, size_t cap, exec_req *rq,
                        lis_error *err)
{
    int pp[2];
    switch (mode) {
    case LIS_STDIO_NULL:
    case LIS_STDIO_DATA: return 0;
    case LIS_STDIO_FD: rq->send_fds[rq->nfds++] = given; break;
    case LIS_STDIO_PIPE:
        if (pipe_for(pp, 0, err) < 0)
            return -1;
        rq->child_ends[1 + i] = pp[1];
        p->pipe_fd[1 + i] = pp[0];
        rq->send_fds[rq->nfds++] = pp[1];
        break;
    case LIS_STDIO_CAPTURE:
        if (pipe_for(pp, 0, err) < 0)
            return -1;
        rq->child_ends[1 + i] = pp[1];
        rq->send_fds[rq->nfds++] = pp[1];
        if (cap_init(i ? &p->err : &p->out, cap) < 0) {
            close(pp[0]);
            return lis_oom(err);
        }
        *(i ? &p->err_rd : &p->out_rd) = pp[0];
        *(i ? &p->capture_err : &p->capture_out) = 1;
        break;
    }
    rq->h.flags |= i ? LIS_REQ_HAVE_STDERR : LIS_REQ_HAVE_STDOUT;
    return 0;
}

/* The request's payload (cwd, argv, the sandbox's env with the command's on
 * top), bounded by LIS_PAYLOAD_MAX. */
static char *payload_new(lis_sandbox *sb, const lis_exec_spec *spec, const char *const *argv,
                         exec_req *rq, size_t *len, lis_error *err)
{
    char **env = lis_env_merge((const char *const *)sb->env, spec->env); /* command wins */
    uint32_t argc, envc;
    char *payload =
        env ? build_payload(spec->cwd ? spec->cwd : "/", argv, env, len, &argc, &envc) : NULL;
    lis_env_free(env);
    if (!payload) {
        lis_oom(err);
        return NULL;
    }
    if (*len > LIS_PAYLOAD_MAX) {
        free(payload);
        lis_fail(err, E2BIG, "command and environment too large (%zu bytes, max %u)", *len,
                 LIS_PAYLOAD_MAX);
        return NULL;
    }
    rq->h.argc = argc;
    rq->h.envc = envc;
    rq->h.payload_len = (uint32_t)*len;
    return payload;
}

/* The request sent on a new connection to PID 1; the child's ends closed. */
static int request_send(lis_proc *p, exec_req *rq, const char *payload, size_t len, lis_error *err)
{
    p->conn = lis_sandbox_connect(p->sb, err);
    if (p->conn < 0)
        return -1;
    if (send_request(p->conn, &rq->h, rq->send_fds, rq->nfds, payload, len) < 0)
        return lis_fail_errno(err, "sandbox %s did not take the command", p->sb->name);
    for (int i = 0; i < 3; i++)
        if (rq->child_ends[i] >= 0) {
            close(rq->child_ends[i]);
            rq->child_ends[i] = -1;
        }
    return 0;
}

/* With a pty, the master comes first (or an error): handed over ready to use. */
static int pty_wait(lis_proc *p, lis_error *err)
{
    while (p->pty_fd < 0 && !p->exited) {
        struct lis_msg m;
        int fd;
        if (recv_msg(p, &m, &fd, 1) <= 0)
            return lis_fail(err, EIO, "sandbox %s closed the connection", p->sb->name);
        handle_msg(p, &m, fd);
    }
    return 0;
}

/* The one pollable fd of the command: its connection and our pipe ends. */
static int epoll_setup(lis_proc *p, lis_error *err)
{
    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (p->epfd < 0 || watch(p->epfd, p->conn, EPOLLIN) < 0 ||
        (p->out_rd >= 0 && watch(p->epfd, p->out_rd, EPOLLIN) < 0) ||
        (p->err_rd >= 0 && watch(p->epfd, p->err_rd, EPOLLIN) < 0) ||
        (p->in_wr >= 0 && watch(p->epfd, p->in_wr, EPOLLOUT) < 0))
        return lis_fail_errno(err, "epoll");
    return 0;
}

int lis_exec_start(lis_sandbox *sb, const lis_exec_spec *spec, lis_proc **out, lis_error *err)
{
    *out = NULL;
    const char *shell_argv[] = {"/bin/sh", "-c", spec->shell, NULL};
    const char *const *argv = spec->argv;
    if (!argv || !argv[0]) {
        if (!spec->shell)
            return lis_fail(err, EINVAL, "no command given");
        argv = shell_argv;
    }
    /* A paused sandbox runs nothing: refused here, before lis-init is asked. */
    if (lis_meta_paused(sb))
        return lis_fail(err, EBUSY, "sandbox %s is paused (lis sandbox resume %s)", sb->name,
                        sb->name);
    lis_proc *p = proc_new(sb);
    if (!p)
        return lis_oom(err);
    exec_req rq = {.h = {.magic = LIS_PROTO_MAGIC,
                         .timeout_ms = spec->timeout > 0 ? (int64_t)(spec->timeout * 1000) : 0,
                         .rows = spec->rows,
                         .cols = spec->cols},
                   .child_ends = {-1, -1, -1}};
    size_t cap = spec->out_cap ? spec->out_cap : 1u << 20, len = 0;
    char *payload = NULL;
    int rc = 0;
    if (spec->pty)
        rq.h.flags |= LIS_REQ_PTY;
    else if (stdin_setup(p, spec, &rq, err) < 0 ||
             output_setup(p, 0, spec->out, spec->out_fd, cap, &rq, err) < 0 ||
             output_setup(p, 1, spec->err, spec->err_fd, cap, &rq, err) < 0)
        rc = -1;
    if (rc == 0 && !(payload = payload_new(sb, spec, argv, &rq, &len, err)))
        rc = -1;
    if (rc == 0)
        rc = request_send(p, &rq, payload, len, err);
    if (rc == 0 && spec->pty)
        rc = pty_wait(p, err);
    if (rc == 0)
        rc = epoll_setup(p, err);
    for (int i = 0; i < 3; i++)
        if (rq.child_ends[i] >= 0)
            close(rq.child_ends[i]);
    free(payload);
    if (rc < 0) {
        proc_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

int lis_proc_fd(const lis_proc *p) { return p->epfd; }
int lis_proc_pty_fd(const lis_proc *p) { return p->pty_fd; }
pid_t lis_proc_pid(const lis_proc *p) { return p->pid; }
int lis_proc_stdio_fd(const lis_proc *p, int n) { return n >= 0 && n < 3 ? p->pipe_fd[n] : -1; }

void lis_proc_close_stdio(lis_proc *p, int n)
{
    if (n >= 0 && n < 3 && p->pipe_fd[n] >= 0) {
        close(p->pipe_fd[n]);
        p->pipe_fd[n] = -1;
    }
}

static void drain(lis_proc *p, int *fd, capbuf *c)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(*fd, buf, sizeof buf);
        if (n > 0) {
            cap_add(c, buf, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 || (n < 0 && errno != EAGAIN))
            unwatch(p, fd);
        return;
    }
}

static void feed_stdin(lis_proc *p)
{
    while (p->in_wr >= 0 && p->in_off < p->in_len) {
        ssize_t n = write(p->in_wr, p->in_data + p->in_off, p->in_len - p->in_off);
        if (n > 0) {
            p->in_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        break; /* EPIPE: the command does not read its input */
    }
    if (p->in_wr >= 0)
        unwatch(p, &p->in_wr);
}

int lis_proc_step(lis_proc *p, lis_error *err)
{
    if (p->exited && p->out_rd < 0 && p->err_rd < 0)
        return 1;
    struct epoll_event evs[8];
    epoll_wait(p->epfd, evs, 8, 0); /* clears level-triggered readiness only */
    while (!p->exited && !p->lost) {
        struct lis_msg m;
        int fd;
        int r = recv_msg(p, &m, &fd, 0);
        if (r == 0)
            break;
        if (r < 0) {
            p->lost = 1;
            p->exited = 1;
            p->status = SIGKILL;
            p->wall = lis_now() - p->t0;
            break;
        }
        handle_msg(p, &m, fd);
    }
    if (p->in_wr >= 0)
        feed_stdin(p);
    if (p->out_rd >= 0)
        drain(p, &p->out_rd, &p->out);
    if (p->err_rd >= 0)
        drain(p, &p->err_rd, &p->err);
    if (!p->exited)
        return 0;
    /* Everything the command wrote is in the pipes by now; background
     * processes that still hold them do not keep the command alive. */
    if (p->out_rd >= 0) {
        drain(p, &p->out_rd, &p->out);
        if (p->out_rd >= 0)
            unwatch(p, &p->out_rd);
    }
    if (p->err_rd >= 0) {
        drain(p, &p->err_rd, &p->err);
        if (p->err_rd >= 0)
            unwatch(p, &p->err_rd);
    }
    if (p->lost)
        return lis_fail(err, EIO, "sandbox %s died while running the command", p->sb->name);
    return 1;
}

int lis_proc_signal(lis_proc *p, int sig, lis_error *err)
{
    struct lis_msg m = {.type = LIS_MSG_SIGNAL, .a = sig};
    if (send(p->conn, &m, sizeof m, MSG_NOSIGNAL) != (ssize_t)sizeof m)
        return lis_fail_errno(err, "signalling the command");
    return 0;
}

int lis_proc_wait(lis_proc *p, lis_result *res, lis_error *err)
{
    memset(res, 0, sizeof *res);
    int rc;
    while ((rc = lis_proc_step(p, err)) == 0) {
        struct pollfd pf = {.fd = p->epfd, .events = POLLIN};
        if (poll(&pf, 1, -1) < 0 && errno != EINTR) {
            rc = lis_fail_errno(err, "poll");
            break;
        }
    }
    res->wall_seconds = p->wall;
    res->timed_out = p->timed_out;
    res->exec_failed = p->exec_failed;
    memcpy(res->err_msg, p->err_msg, sizeof res->err_msg);
    if (WIFSIGNALED(p->status)) {
        res->signal = WTERMSIG(p->status);
        res->exit_code = 128 + res->signal;
    } else {
        res->exit_code = WEXITSTATUS(p->status);
    }
    if (p->timed_out)
        res->exit_code = -1;
    lis_cg_cmd_end(p->sb->cg, &p->cgm, res);
    if (p->fallback_oom) {
        res->oom_killed = 1;
        snprintf(res->err_msg, sizeof res->err_msg,
                 "killed: out of memory (the sandbox went "
                 "over its memory limit; fallback watchdog, no cgroup here)");
    }
    if (p->capture_out) {
        cap_finish(&p->out, &res->out);
        p->capture_out = 0;
    }
    if (p->capture_err) {
        cap_finish(&p->err, &res->err);
        p->capture_err = 0;
    }
    proc_free(p);
    return rc < 0 ? -1 : 0;
}

int lis_exec(lis_sandbox *sb, const lis_exec_spec *spec, lis_result *res, lis_error *err)
{
    lis_proc *p;
    memset(res, 0, sizeof *res);
    /* nobody would read or write the caller's ends */
    if (!spec->pty &&
        (spec->in == LIS_STDIO_PIPE || spec->out == LIS_STDIO_PIPE || spec->err == LIS_STDIO_PIPE))
        return lis_fail(err, EINVAL, "LIS_STDIO_PIPE needs lis_exec_start");
    if (lis_exec_start(sb, spec, &p, err) < 0)
        return -1;
    return lis_proc_wait(p, res, err);
}
