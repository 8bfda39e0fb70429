/* session.c - one command: read the request, fork the command into its own
 * UTS namespace (its tag), register it with PID 1, let it exec, relay
 * signals, report its exit to PID 1, then reap what it left behind.
 *
 * The session is a child subreaper, so the command's orphans stay its
 * children while it lives. It holds no deadline: a command can SIGSTOP or
 * SIGKILL its session (same credentials), so PID 1 enforces the timeout and
 * writes EXITED to the client (init.h). */
#include "init.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

extern char **environ;

static int read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

struct request {
    struct lis_req_hdr h;
    char *cwd, **argv, **envp;
    int in, out, err;
};

/* Reads the header, up to 3 fds and the payload; exits on a bad request. */
static void read_request(int conn, struct request *rq)
{
    struct lis_req_hdr *h = &rq->h;
    int fds[3];
    ssize_t got = lis_recv_fds(conn, h, sizeof *h, fds, 3, 0);
    if (got <= 0)
        _exit(1);
    if ((size_t)got < sizeof *h && read_full(conn, (char *)h + got, sizeof *h - got) < 0)
        _exit(1);
    if (h->magic != LIS_PROTO_MAGIC || h->payload_len > LIS_PAYLOAD_MAX || h->argc < 1 ||
        h->argc > LIS_ARGS_MAX || h->envc > LIS_ARGS_MAX) {
        init_send(conn, LIS_MSG_EXEC_ERR, EPROTO, 0, "bad request");
        _exit(1);
    }
    char *payload = malloc(h->payload_len + 1);
    rq->argv = calloc(h->argc + 1, sizeof *rq->argv);
    rq->envp = calloc(h->envc + 1, sizeof *rq->envp);
    if (!payload || !rq->argv || !rq->envp || read_full(conn, payload, h->payload_len) < 0)
        _exit(1);
    payload[h->payload_len] = 0;
    /* cwd, argv..., env... each NUL-terminated */
    char *p = payload, *end = payload + h->payload_len;
    uint32_t total = 1 + h->argc + h->envc, seen = 0;
    for (char *q = p; q < end; q++)
        seen += *q == 0;
    if (seen != total) {
        init_send(conn, LIS_MSG_EXEC_ERR, EPROTO, 0, "malformed request");
        _exit(1);
    }
    rq->cwd = p;
    p += strlen(p) + 1;
    for (uint32_t i = 0; i < h->argc; i++, p += strlen(p) + 1)
        rq->argv[i] = p;
    for (uint32_t i = 0; i < h->envc; i++, p += strlen(p) + 1)
        rq->envp[i] = p;
    /* the fds come in the order of the flags that announce them */
    int k = 0;
    int *slot[3] = {&rq->in, &rq->out, &rq->err};
    static const uint32_t flag[3] = {LIS_REQ_HAVE_STDIN, LIS_REQ_HAVE_STDOUT, LIS_REQ_HAVE_STDERR};
    for (int i = 0; i < 3; i++)
        *slot[i] = (h->flags & flag[i]) ? fds[k++] : -1;
    for (; k < 3; k++)
        if (fds[k] >= 0)
            close(fds[k]);
}

/* child -> session, on the status pipe */
struct child_report {
    uint64_t tag; /* first record: the command's tag (0: unshare failed) */
    int err;      /* second record, only on failure */
    char stage;   /* 'n' namespace, 'c' chdir, 'h' hardening, 'e' exec */
};

static void child(const struct request *rq, int slave, int status_w, int go_r,
                  const struct sock_fprog *prog, const struct init_limits *lim)
{
    struct child_report r = {0, 0, 0};
    if (unshare(CLONE_NEWUTS) < 0) {
        r.err = errno;
        r.stage = 'n';
    } else {
        r.tag = init_ns_tag("self");
    }
    if (write(status_w, &r, sizeof r) != (ssize_t)sizeof r || !r.tag)
        _exit(126);
    char go;
    if (read(go_r, &go, 1) != 1)
        _exit(126); /* the session died before it registered us */
    close(go_r);
    /* Dispositions are inherited across exec; the command starts clean
     * (PID 1 already reset them; its SIGCHLD mask is undone here). */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setsid(); /* also its own autogroup: CPU is shared fairly per command */
    int in = rq->in, out = rq->out, errfd = rq->err;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (slave >= 0) {
        ioctl(slave, TIOCSCTTY, 0);
        in = out = errfd = slave;
    }
    /* Lift every source above 2 first, so no dup2 clobbers another. */
    int *srcs[] = {&in, &out, &errfd, &null};
    for (int i = 0; i < 4; i++)
        if (*srcs[i] >= 0 && *srcs[i] <= 2)
            *srcs[i] = fcntl(*srcs[i], F_DUPFD_CLOEXEC, 3);
    dup2(in >= 0 ? in : null, 0);
    dup2(out >= 0 ? out : null, 1);
    dup2(errfd >= 0 ? errfd : null, 2);
    syscall(SYS_close_range, 3, ~0u, 4 /* CLOSE_RANGE_CLOEXEC */);
    if ((r.err = init_apply_limits(lim))) {
        r.stage = 'l';
    } else if ((r.err = init_drop_ptrace())) {
        r.stage = 'h';
    } else if (rq->cwd[0] && chdir(rq->cwd) < 0) {
        r.err = errno;
        r.stage = 'c';
    } else if ((r.err = init_harden(prog))) {
        r.stage = 'h';
    } else {
        environ = rq->envp;
        execvp(rq->argv[0], rq->argv);
        r.err = errno;
        r.stage = 'e';
    }
    if (write(status_w, &r, sizeof r) < 0)
        _exit(127);
    _exit(r.err == ENOENT && r.stage == 'e' ? 127 : 126);
}

static void report_start_error(int conn, const struct request *rq, const struct child_report *r)
{
    static const struct {
        char stage;
        const char *what;
    } names[] = {{'n', "unsharing the command's UTS namespace"},
                 {'c', "chdir"},
                 {'h', "dropping privileges"},
                 {'l', "setting its resource limits (ulimits)"},
                 {'e', "exec"}};
    const char *what = "starting";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].stage == r->stage)
            what = names[i].what;
    char text[200];
    const char *obj = r->stage == 'c' ? rq->cwd : r->stage == 'e' ? rq->argv[0] : NULL;
    if (obj)
        snprintf(text, sizeof text, "%s %s: %s", what, obj, strerror(r->err));
    else
        snprintf(text, sizeof text, "%s: %s", what, strerror(r->err));
    init_send(conn, LIS_MSG_EXEC_ERR, r->err, 0, text);
}

/* SESS_REG with the command's namespace attached: PID 1 holding it keeps
 * the namespace, and so the tag, from being freed and reused by a later
 * command while PID 1 may still kill by it. */
static int register_command(int ctl, pid_t cmd, int64_t timeout_ms, uint64_t tag)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/uts", (int)cmd);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (nsfd < 0 || fstat(nsfd, &st) < 0 || (uint64_t)st.st_ino != tag) {
        if (nsfd >= 0)
            close(nsfd);
        return -1;
    }
    struct sess_msg m = {.type = SESS_REG, .pid = cmd, .timeout_ms = timeout_ms, .tag = tag};
    ssize_t n = lis_send_fds(ctl, &m, sizeof m, &nsfd, 1, 0);
    close(nsfd);
    return n == (ssize_t)sizeof m ? 0 : -1;
}

void init_session(int conn, int ctl, const struct sock_fprog *prog, const struct init_limits *lim)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    struct request rq;
    memset(&rq, 0, sizeof rq);
    read_request(conn, &rq);

    int slave = -1;
    if (rq.h.flags & LIS_REQ_PTY) {
        int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        int zero = 0;
        if (master < 0 || ioctl(master, TIOCSPTLCK, &zero) < 0 ||
            (slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY)) < 0) {
            init_send(conn, LIS_MSG_EXEC_ERR, errno, 0, "opening a pseudo-terminal");
            init_send(conn, LIS_MSG_EXITED, 127 << 8, 0, NULL);
            _exit(1);
        }
        struct winsize ws = {.ws_row = rq.h.rows ? rq.h.rows : 24,
                             .ws_col = rq.h.cols ? rq.h.cols : 80};
        ioctl(master, TIOCSWINSZ, &ws);
        lis_msg_send(conn, LIS_MSG_PTY, 0, 0, NULL, master);
        close(master);
    }

    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    int st_pipe[2], go_pipe[2];
    if (sfd < 0 || pipe2(st_pipe, O_CLOEXEC) < 0 || pipe2(go_pipe, O_CLOEXEC) < 0)
        _exit(1);
    pid_t cmd = fork();
    if (cmd == 0) {
        close(st_pipe[0]);
        close(go_pipe[1]);
        close(conn);
        close(ctl);
        child(&rq, slave, st_pipe[1], go_pipe[0], prog, lim);
    }
    close(st_pipe[1]);
    close(go_pipe[0]);
    if (rq.in >= 0)
        close(rq.in);
    if (rq.out >= 0)
        close(rq.out);
    if (rq.err >= 0)
        close(rq.err);
    if (slave >= 0)
        close(slave);
    if (cmd < 0) {
        init_send(conn, LIS_MSG_EXEC_ERR, errno, 0, "fork");
        init_send(conn, LIS_MSG_EXITED, 126 << 8, 0, NULL);
        _exit(1);
    }
    /* Register the command before it runs a single instruction of its own:
     * from here on PID 1 can kill all of it whatever it does to us. */
    struct child_report r = {0, 0, 0};
    int got_tag = read_full(st_pipe[0], &r, sizeof r) == 0 && r.tag;
    if (got_tag)
        got_tag = register_command(ctl, cmd, rq.h.timeout_ms, r.tag) == 0;
    if (!got_tag) {
        if (r.stage)
            report_start_error(conn, &rq, &r);
        else
            init_send(conn, LIS_MSG_EXEC_ERR, EIO, 0, "starting the command");
        kill(cmd, SIGKILL);
    } else if (write(go_pipe[1], "g", 1) != 1) {
        kill(cmd, SIGKILL);
    }
    close(go_pipe[1]);
    struct child_report fail = {0, 0, 0};
    if (got_tag && read(st_pipe[0], &fail, sizeof fail) == (ssize_t)sizeof fail)
        report_start_error(conn, &rq, &fail);
    else if (got_tag)
        init_send(conn, LIS_MSG_STARTED, cmd, 0, NULL);
    close(st_pipe[0]);

    int cstatus = 0, have = 0, conn_open = 1;
    while (!have) {
        struct pollfd pf[2] = {{conn_open ? conn : -1, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[0].revents) {
            struct lis_msg m;
            ssize_t n = recv(conn, &m, sizeof m, MSG_WAITALL);
            if (n == (ssize_t)sizeof m && m.type == LIS_MSG_SIGNAL) {
                if (kill(-cmd, m.a) < 0)
                    kill(cmd, m.a);
            } else if (n <= 0) {
                conn_open = 0; /* the client is gone: PID 1 kills the command */
            }
        }
        if (pf[1].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) > 0)
                ;
        }
        int s;
        pid_t w;
        while ((w = waitpid(-1, &s, WNOHANG)) > 0)
            if (w == cmd) {
                cstatus = s;
                have = 1;
            }
    }
    if (!got_tag) {
        /* never registered: PID 1 does not know the command, say it here */
        init_send(conn, LIS_MSG_EXITED, cstatus, 0, NULL);
    } else {
        struct sess_msg m = {.type = SESS_EXIT, .status = cstatus};
        send(ctl, &m, sizeof m, MSG_NOSIGNAL);
    }
    close(ctl);
    close(conn);
    /* Background processes the command left behind stay ours to reap. */
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
        ;
    _exit(0);
}
