/* proc.c - the one process watcher of serve/: a command started in a sandbox
 * (lis_exec_start) watched on the loop, its output pipes (or pty) read into
 * its owner's callback, its end reaped and handed over once. The container's
 * main command (containers.c), Docker's exec (exec.c) and the native API's
 * exec (api_exec.c) are all one of these.
 *
 * Why the end reads everything: when lis_proc_step says the command is done,
 * its pipes hold all it wrote (lis.h), so the rest is read at once and the
 * pipes closed; a background child that keeps a pipe open cannot hold the
 * command's stream open. */
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

struct sv_proc {
    sv_loop *loop;
    lis_proc *proc;
    sv_watch w_end, w_out, w_err;
    sv_watch w_in; /* stdin (or our dup of the pty: one fd cannot be in a set twice) */
    int in_fd, in_dup;
    const sv_proc_ops *ops;
    void *owner;
    int stopped; /* the owner asked for no more output until sv_proc_read_on */
    int reading; /* in read_pipe: a read_on from an output callback only re-arms */
};

static void pipes_events(sv_proc *p)
{
    uint32_t ev = p->stopped ? 0 : EPOLLIN;
    if (sv_loop_events(p->loop, &p->w_out, ev) < 0 || sv_loop_events(p->loop, &p->w_err, ev) < 0) {
        /* the pipes' events are not what they must be: the command would spin
         * the loop or block on a full pipe forever, so it ends now (its end
         * is reported as usual) */
        lis_error err;
        lis_proc_signal(p->proc, SIGKILL, &err);
    }
}

/* At most this much is read from one pipe per call: a command that never
 * stops printing (or a background child that keeps the pipe after the end)
 * would otherwise keep the loop here for ever; the level-triggered watch
 * brings the rest on the next turn of the loop. */
#define READ_TURN (256u << 10)
/* At the end: more than a pipe holds (pipe-max-size is 1 MiB), so all the
 * command wrote, and no more of what a background child keeps writing. */
#define READ_END (2u << 20)

/* Reads w until EAGAIN or EOF (or READ_TURN bytes), or until the owner stops
 * it (unless all). */
static void read_pipe(sv_proc *p, sv_watch *w, int type, int all)
{
    char buf[65536];
    if (p->reading)
        return;
    p->reading = 1;
    for (size_t got = 0; w->added && (all || !p->stopped) && got < (all ? READ_END : READ_TURN);) {
        ssize_t n = read(w->fd, buf, sizeof buf);
        if (n > 0) {
            got += (size_t)n;
            if (!p->ops->output(p->owner, type, buf, (size_t)n) && !all && !p->stopped) {
                p->stopped = 1;
                pipes_events(p);
            }
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 || errno != EAGAIN)
            sv_loop_unwatch(p->loop, w);
        break;
    }
    p->reading = 0;
}

static void out_ev(void *arg, uint32_t ev)
{
    sv_proc *p = arg;
    read_pipe(p, &p->w_out, 1, 0);
}

static void err_ev(void *arg, uint32_t ev)
{
    sv_proc *p = arg;
    read_pipe(p, &p->w_err, 2, 0);
}

/* Before the lis_proc (which owns the fds) is reaped or handed over. */
static void unwatch_all(sv_proc *p)
{
    sv_loop_unwatch(p->loop, &p->w_end);
    sv_loop_unwatch(p->loop, &p->w_out);
    sv_loop_unwatch(p->loop, &p->w_err);
    sv_loop_unwatch(p->loop, &p->w_in);
    if (p->in_dup)
        close(p->in_fd);
    p->in_dup = 0;
    p->in_fd = -1;
}

static void in_ev(void *arg, uint32_t ev)
{
    sv_proc *p = arg;
    if (p->ops->stdin_room)
        p->ops->stdin_room(p->owner);
}

static void end_ev(void *arg, uint32_t ev)
{
    sv_proc *p = arg;
    lis_error err = {0};
    int rc = lis_proc_step(p->proc, &err);
    if (rc == 0)
        return;
    read_pipe(p, &p->w_out, 1, 1);
    read_pipe(p, &p->w_err, 2, 1);
    unwatch_all(p);
    lis_result r; /* filled, and p->proc freed, whatever wait returns */
    lis_error werr = {0};
    if (lis_proc_wait(p->proc, &r, &werr) < 0 && rc > 0) {
        err = werr;
        rc = -1;
    }
    p->proc = NULL;
    p->ops->exited(p->owner, &r, rc < 0 ? &err : NULL);
    lis_result_free(&r);
    sv_loop_defer(p->loop, free, p); /* an event of this batch may still name its watches */
}

sv_proc *sv_proc_start(sv_loop *l, lis_sandbox *sb, const lis_exec_spec *spec,
                       const sv_proc_ops *ops, void *owner, lis_error *err)
{
    sv_proc *p = calloc(1, sizeof *p);
    if (!p) {
        lis_oom(err);
        return NULL;
    }
    *p = (sv_proc){.loop = l, .ops = ops, .owner = owner, .in_fd = -1};
    if (lis_exec_start(sb, spec, &p->proc, err) < 0) {
        free(p);
        return NULL;
    }
    if (spec->pty && spec->in == LIS_STDIO_PIPE) {
        p->in_fd = fcntl(lis_proc_pty_fd(p->proc), F_DUPFD_CLOEXEC, 3);
        p->in_dup = p->in_fd >= 0;
    } else if (spec->in == LIS_STDIO_PIPE) {
        p->in_fd = lis_proc_stdio_fd(p->proc, 0);
    }
    int out = spec->pty ? lis_proc_pty_fd(p->proc) : lis_proc_stdio_fd(p->proc, 1);
    int er = spec->pty ? -1 : lis_proc_stdio_fd(p->proc, 2);
    if (sv_loop_watch(l, &p->w_end, lis_proc_fd(p->proc), EPOLLIN, end_ev, p) < 0 ||
        (out >= 0 && sv_loop_watch(l, &p->w_out, out, EPOLLIN, out_ev, p) < 0) ||
        (er >= 0 && sv_loop_watch(l, &p->w_err, er, EPOLLIN, err_ev, p) < 0) ||
        (spec->in == LIS_STDIO_PIPE &&
         (p->in_fd < 0 || sv_loop_watch(l, &p->w_in, p->in_fd, 0, in_ev, p) < 0))) {
        int e = errno;
        lis_proc *proc = sv_proc_detach(p);
        lis_error ignore;
        lis_result r;
        lis_proc_signal(proc, SIGKILL, &ignore);
        if (lis_proc_wait(proc, &r, &ignore) == 0)
            lis_result_free(&r);
        lis_fail_errnum(err, e, "watching the command's pipes");
        return NULL;
    }
    return p;
}

lis_proc *sv_proc_lis(const sv_proc *p) { return p->proc; }

void sv_proc_read_on(sv_proc *p)
{
    if (!p->stopped)
        return;
    p->stopped = 0;
    pipes_events(p);
    read_pipe(p, &p->w_out, 1, 0);
    read_pipe(p, &p->w_err, 2, 0);
}

int sv_proc_stdin(const sv_proc *p) { return p->w_in.added ? p->in_fd : -1; }

int sv_proc_stdin_want_room(sv_proc *p, int want)
{
    return sv_loop_events(p->loop, &p->w_in, want ? EPOLLOUT : 0);
}

void sv_proc_stdin_close(sv_proc *p)
{
    if (!p->w_in.added)
        return;
    sv_loop_unwatch(p->loop, &p->w_in);
    if (p->in_dup) /* a pty has no end of input to give: only our dup goes */
        close(p->in_fd);
    else
        lis_proc_close_stdio(p->proc, 0);
    p->in_dup = 0;
    p->in_fd = -1;
}

lis_proc *sv_proc_detach(sv_proc *p)
{
    lis_proc *proc = p->proc;
    unwatch_all(p);
    sv_loop_defer(p->loop, free, p); /* as in end_ev */
    return proc;
}
