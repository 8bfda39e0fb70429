/* relay.c - stdio of a command run by the CLI: fresh pipes (LIS_STDIO_PIPE)
 * relayed from and to the CLI's own fds, never the fds themselves (SECURITY.md:
 * the owner's terminal is never inside a sandbox). */
#include "cli_util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

/* src -> buffer -> dst; src_stream/dst_stream name the command's pipe (0-2)
 * an end is, so ending it closes that pipe (EOF or EPIPE for the command). */
typedef struct pump {
    int src, dst;
    int src_stream, dst_stream;
    int discard; /* dst broken: keep reading src and drop (a pty must not fill) */
    size_t len, off;
    char buf[65536];
} pump;

typedef struct relay {
    lis_proc *p;
    int tty_fd;           /* our terminal in raw mode, or -1 */
    struct termios saved; /* its modes before */
    int master;           /* -t: the pty master, else -1 */
    pump in, out, err;
} relay;

static void pump_init(pump *u, int src, int src_stream, int dst, int dst_stream)
{
    u->src = src;
    u->dst = dst;
    u->src_stream = src_stream;
    u->dst_stream = dst_stream;
    u->discard = 0;
    u->len = u->off = 0;
}

static void end_src(relay *r, pump *u)
{
    if (u->src_stream >= 0)
        lis_proc_close_stdio(r->p, u->src_stream);
    u->src = -1;
}

static void end_dst(relay *r, pump *u)
{
    if (u->dst_stream >= 0)
        lis_proc_close_stdio(r->p, u->dst_stream);
    u->dst = -1;
    u->len = u->off = 0;
}

static void pump_read(relay *r, pump *u)
{
    ssize_t n = read(u->src, u->buf, sizeof u->buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) { /* EOF, or EIO of a pty nobody holds any more */
        end_src(r, u);
        if (u->dst >= 0)
            end_dst(r, u); /* stdin: the command reads EOF */
        return;
    }
    if (u->dst < 0)
        return; /* discarding */
    u->len = (size_t)n;
    u->off = 0;
}

static void pump_write(relay *r, pump *u)
{
    ssize_t n = write(u->dst, u->buf + u->off, u->len - u->off);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n < 0) { /* the reader went away */
        end_dst(r, u);
        if (!u->discard)
            end_src(r, u);
        return;
    }
    u->off += (size_t)n;
    if (u->off == u->len)
        u->len = u->off = 0;
}

/* Writes everything, waiting when dst is non-blocking; -1 when it is broken. */
static int write_all(int fd, const char *b, size_t n)
{
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EAGAIN) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            poll(&pf, 1, -1);
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* After the command exited: what it wrote is in the pipe now (FIONREAD),
 * whatever a background process it left writes later is not waited for. A
 * pty moves output to the master asynchronously, so there it is read until
 * EIO (every holder of the slave gone) or a moment of silence. */
static void flush_output(relay *r, pump *u)
{
    if (u->dst >= 0 && u->len > u->off && write_all(u->dst, u->buf + u->off, u->len - u->off) < 0)
        u->dst = -1;
    u->len = u->off = 0;
    if (u->src < 0)
        return;
    int avail = 0;
    size_t left = 4u << 20, total = 0;
    if (r->master < 0) {
        if (ioctl(u->src, FIONREAD, &avail) < 0 || avail <= 0)
            return;
        left = (size_t)avail;
    }
    while (total < left) {
        if (r->master >= 0) {
            struct pollfd pf = {.fd = u->src, .events = POLLIN};
            if (poll(&pf, 1, 200) <= 0)
                break;
        }
        size_t want = left - total < sizeof u->buf ? left - total : sizeof u->buf;
        ssize_t n = read(u->src, u->buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        total += (size_t)n;
        if (u->dst >= 0 && write_all(u->dst, u->buf, (size_t)n) < 0)
            u->dst = -1;
    }
}

static void tty_restore(relay *r)
{
    if (r->tty_fd >= 0)
        while (tcsetattr(r->tty_fd, TCSANOW, &r->saved) < 0 && errno == EINTR)
            ;
}

static void tty_raw(relay *r)
{
    if (r->tty_fd < 0)
        return;
    struct termios raw = r->saved;
    cfmakeraw(&raw);
    while (tcsetattr(r->tty_fd, TCSANOW, &raw) < 0 && errno == EINTR)
        ;
}

static void copy_winsize(relay *r)
{
    struct winsize ws;
    if (r->master >= 0 && (ioctl(0, TIOCGWINSZ, &ws) == 0 || ioctl(1, TIOCGWINSZ, &ws) == 0))
        ioctl(r->master, TIOCSWINSZ, &ws);
}

/* Window changes, stop/continue, and terminating signals: lis dies of those
 * as it did without a handler, only with the terminal's modes put back. */
static void handle_signals(relay *r, int sfd)
{
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        int sig = (int)si.ssi_signo;
        switch (sig) {
        case SIGWINCH: copy_winsize(r); break;
        case SIGTSTP: /* stop with the terminal as it was; raw again on SIGCONT */
            tty_restore(r);
            raise(SIGSTOP);
            break;
        case SIGCONT:
            tty_raw(r);
            copy_winsize(r);
            break;
        case SIGTTOU: /* blocked only so that restoring the modes always works */ break;
        default: { /* SIGINT, SIGTERM, SIGHUP, SIGQUIT: die of it, as before */
            tty_restore(r);
            signal(sig, SIG_DFL);
            raise(sig);
            sigset_t one;
            sigemptyset(&one);
            sigaddset(&one, sig);
            sigprocmask(SIG_UNBLOCK, &one, NULL);
            _exit(128 + sig);
        }
        }
    }
}

static void add_pump(struct pollfd *pf, pump **map, int *n, pump *u)
{
    if (u->len == 0 && u->src >= 0)
        pf[*n] = (struct pollfd){.fd = u->src, .events = POLLIN};
    else if (u->len > 0 && u->dst >= 0)
        pf[*n] = (struct pollfd){.fd = u->dst, .events = POLLOUT};
    else
        return;
    map[(*n)++] = u;
}

int cli_run_command(lis_sandbox *sb, lis_exec_spec *ex, int interactive, lis_result *res,
                    lis_error *err)
{
    memset(res, 0, sizeof *res);
    if (!ex->pty) {
        ex->in = interactive ? LIS_STDIO_PIPE : LIS_STDIO_NULL;
        ex->out = ex->err = LIS_STDIO_PIPE;
    }
    relay *r = calloc(1, sizeof *r);
    if (!r) {
        err->code = ENOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return -1;
    }
    if (lis_exec_start(sb, ex, &r->p, err) < 0) {
        free(r);
        return -1;
    }
    r->tty_fd = -1;
    r->master = lis_proc_pty_fd(r->p);
    if (r->master >= 0) {
        fcntl(r->master, F_SETFL, fcntl(r->master, F_GETFL) | O_NONBLOCK);
        pump_init(&r->in, 0, -1, r->master, -1);
        pump_init(&r->out, r->master, -1, 1, -1);
        r->out.discard = 1;
        pump_init(&r->err, -1, -1, -1, -1);
        if (isatty(0) && tcgetattr(0, &r->saved) == 0)
            r->tty_fd = 0;
    } else {
        int in = lis_proc_stdio_fd(r->p, 0);
        pump_init(&r->in, in >= 0 ? 0 : -1, -1, in, 0);
        pump_init(&r->out, lis_proc_stdio_fd(r->p, 1), 1, 1, -1);
        pump_init(&r->err, lis_proc_stdio_fd(r->p, 2), 2, 2, -1);
    }
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
    if (r->master >= 0)
        sigaddset(&set, SIGWINCH);
    if (r->tty_fd >= 0) {
        sigaddset(&set, SIGTTOU);
        sigaddset(&set, SIGTSTP);
        sigaddset(&set, SIGCONT);
    }
    sigprocmask(SIG_BLOCK, &set, &old);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) /* never blocked without being read: lis stays killable */
        sigprocmask(SIG_SETMASK, &old, NULL);
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN); /* a gone reader is EPIPE */
    tty_raw(r);

    int rc = 0;
    while (rc == 0) {
        struct pollfd pf[5] = {{lis_proc_fd(r->p), POLLIN, 0}, {sfd, POLLIN, 0}};
        pump *map[5];
        int n = 2;
        add_pump(pf, map, &n, &r->in);
        add_pump(pf, map, &n, &r->out);
        add_pump(pf, map, &n, &r->err);
        if (poll(pf, (nfds_t)n, -1) < 0 && errno != EINTR) {
            err->code = errno;
            snprintf(err->msg, sizeof err->msg, "poll: %s", strerror(errno));
            rc = -1;
            break;
        }
        if (sfd >= 0 && pf[1].revents)
            handle_signals(r, sfd);
        for (int i = 2; i < n; i++)
            if (pf[i].revents)
                (map[i]->len ? pump_write : pump_read)(r, map[i]);
        rc = lis_proc_step(r->p, err);
    }
    if (rc > 0) {
        /* unread input goes nowhere; a leftover background process reads EOF
         * and its writes fail: our ends close before we return */
        lis_proc_close_stdio(r->p, 0);
        flush_output(r, &r->out);
        flush_output(r, &r->err);
        for (int i = 0; i < 3; i++)
            lis_proc_close_stdio(r->p, i);
    }
    tty_restore(r);
    if (sfd >= 0)
        close(sfd);
    signal(SIGPIPE, old_pipe);
    sigprocmask(SIG_SETMASK, &old, NULL);
    lis_error werr = {0};
    int wrc = lis_proc_wait(r->p, res, rc < 0 ? &werr : err);
    free(r);
    return rc < 0 || wrc < 0 ? -1 : 0;
}
