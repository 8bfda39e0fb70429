/* score_proc.c - one child process of a scorer: spawn, talk over pipes with
 * a deadline, end. The parent may be multi-threaded, so the child does only
 * async-signal-safe calls before exec, and every parent-side fd is close-on-
 * exec (sandboxes started meanwhile must not keep a worker's stdin open). */
#include "score_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define ERRTAIL_KEEP 4096

int sproc_spawn(char *const argv[], int worker, sproc *p, lis_error *err)
{
    p->pid = -1;
    p->in = p->out = p->err = -1;
    int sin[2], sout[2], serr[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sin))
        return lis_fail_errno(err, "socketpair");
    if (pipe2(sout, O_CLOEXEC)) {
        close(sin[0]);
        close(sin[1]);
        return lis_fail_errno(err, "pipe");
    }
    if (pipe2(serr, O_CLOEXEC)) {
        close(sin[0]);
        close(sin[1]);
        close(sout[0]);
        close(sout[1]);
        return lis_fail_errno(err, "pipe");
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sin[0]), close(sin[1]), close(sout[0]), close(sout[1]), close(serr[0]),
            close(serr[1]);
        return lis_fail_errnum(err, e, "fork");
    }
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGPIPE, SIG_DFL);
        /* lis batch blocks SIGINT/SIGTERM/SIGHUP (it reads them from a signalfd):
         * a scorer starts with none blocked */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* move the child's ends above 3 first, so the dup2s cannot clobber them */
        int a = fcntl(sin[1], F_DUPFD, 10), b = fcntl(sout[1], F_DUPFD, 10),
            c = fcntl(serr[1], F_DUPFD, 10);
        if (a < 0 || b < 0 || c < 0)
            _exit(127);
        dup2(a, 0);
        if (worker) {
            dup2(c, 1);
            dup2(c, 2);
            dup2(b, 3);
        } else {
            dup2(b, 1);
            dup2(c, 2);
        }
        close_range(worker ? 4 : 3, ~0U, 0);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(sin[1]);
    close(sout[1]);
    close(serr[1]);
    p->pid = pid;
    p->in = sin[0];
    p->out = sout[0];
    p->err = serr[0];
    return 0;
}

static void keep_tail(strbuf *t)
{
    if (t->len > 2 * ERRTAIL_KEEP) {
        memmove(t->s, t->s + t->len - ERRTAIL_KEEP, ERRTAIL_KEEP);
        t->len = ERRTAIL_KEEP;
        t->s[t->len] = 0;
    }
}

sproc_rc sproc_talk(sproc *p, const char *in, size_t n, int line_mode, strbuf *out, strbuf *errtail,
                    double timeout)
{
    double deadline = lis_now() + timeout;
    size_t off = 0;
    int out_open = p->out >= 0, err_open = p->err >= 0;
    if (!in && !line_mode && p->in >= 0) {
        close(p->in);
        p->in = -1;
    }
    for (;;) {
        if (line_mode && out->len && memchr(out->s, '\n', out->len))
            return SP_OK;
        if (!line_mode && !out_open && !err_open)
            return SP_OK;
        if (line_mode && !out_open)
            return SP_EOF;
        double left = deadline - lis_now();
        if (left <= 0)
            return SP_TIMEOUT;
        struct pollfd fds[3];
        int nf = 0, iw = -1, io = -1, ie = -1;
        if (in && off < n && p->in >= 0) {
            fds[nf] = (struct pollfd){.fd = p->in, .events = POLLOUT};
            iw = nf++;
        }
        if (out_open) {
            fds[nf] = (struct pollfd){.fd = p->out, .events = POLLIN};
            io = nf++;
        }
        if (err_open) {
            fds[nf] = (struct pollfd){.fd = p->err, .events = POLLIN};
            ie = nf++;
        }
        int ms = left > 1000 ? 1000 : (int)(left * 1000) + 1;
        int r = poll(fds, (nfds_t)nf, ms);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return SP_IOERR;
        }
        if (iw >= 0 && fds[iw].revents) {
            ssize_t w = send(p->in, in + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                off += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR)
                off = n; /* the child closed its stdin: read what it says */
            if (off == n && !line_mode) {
                close(p->in);
                p->in = -1;
            }
        }
        char buf[8192];
        if (io >= 0 && fds[io].revents) {
            ssize_t k = read(p->out, buf, sizeof buf);
            if (k > 0)
                strbuf_putn(out, buf, (size_t)k);
            else if (k == 0 || (errno != EINTR && errno != EAGAIN))
                out_open = 0;
            if (!line_mode && out->len > (1u << 20))
                return SP_IOERR; /* a number was asked for, not a megabyte */
        }
        if (ie >= 0 && fds[ie].revents) {
            ssize_t k = read(p->err, buf, sizeof buf);
            if (k > 0) {
                strbuf_putn(errtail, buf, (size_t)k);
                keep_tail(errtail);
            } else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
                err_open = 0;
            }
        }
    }
}

int sproc_end(sproc *p, int kill_it)
{
    int status = -1;
    if (p->in >= 0)
        close(p->in);
    if (p->out >= 0)
        close(p->out);
    if (p->err >= 0)
        close(p->err);
    p->in = p->out = p->err = -1;
    if (p->pid > 0) {
        if (kill_it)
            kill(-p->pid, SIGKILL);
        while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (!kill_it)
            kill(-p->pid, SIGKILL); /* what it left behind in its group */
    }
    p->pid = -1;
    return status;
}

void sproc_status_text(int status, char *buf, size_t len)
{
    if (status == -1)
        snprintf(buf, len, "unknown status");
    else if (WIFEXITED(status))
        snprintf(buf, len, "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "status %d", status);
}

void sproc_last_line(const strbuf *t, char *buf, size_t len)
{
    buf[0] = 0;
    if (!t->s)
        return;
    size_t e = t->len;
    while (e > 0 && (t->s[e - 1] == '\n' || t->s[e - 1] == '\r' || t->s[e - 1] == ' '))
        e--;
    size_t b = e;
    while (b > 0 && t->s[b - 1] != '\n')
        b--;
    size_t n = e - b;
    if (n > 300)
        n = 300;
    if (n >= len)
        n = len - 1;
    memcpy(buf, t->s + b, n);
    buf[n] = 0;
}
