/* lis-init - PID 1 of every sandbox. Static, small, no libraries.
 *
 *   lis-init LIFELINE_FD LISTEN_FD PERSIST
 *
 * PID 1 reaps orphans and forks one "session" process per command request
 * (from the lifeline or the listening socket). The session reads the request,
 * becomes a child subreaper, forks the command into its own session and
 * process group, reports STARTED/EXITED, enforces the timeout, and on timeout
 * or client disconnect kills every process the command started (all of them
 * reparent to the session, so none escapes by double-forking or setsid).
 * When the lifeline closes and the sandbox does not persist, PID 1 exits and
 * the kernel kills everything left in the pid namespace. */
#include "proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

extern char **environ;

static int send_msg(int fd, uint32_t type, int32_t a, int64_t b, const char *text, int passfd)
{
    return lis_msg_send(fd, type, a, b, text, passfd);
}

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

/* ---- killing a command's whole tree ---- */

static pid_t parent_of(const char *pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *rp = strrchr(buf, ')');
    if (!rp)
        return -1;
    char state;
    int ppid;
    if (sscanf(rp + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    return ppid;
}

/* SIGKILLs every live descendant of this process; returns how many. */
static int kill_descendants(void)
{
    enum { MAXP = 4096 };
    static pid_t pids[MAXP], ppids[MAXP];
    static char mark[MAXP];
    int n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAXP) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        pid_t pp = parent_of(e->d_name);
        if (pp < 0)
            continue;
        pids[n] = atoi(e->d_name);
        ppids[n] = pp;
        mark[n] = 0;
        n++;
    }
    closedir(d);
    pid_t self = getpid();
    int changed = 1, killed = 0;
    while (changed) {
        changed = 0;
        for (int i = 0; i < n; i++) {
            if (mark[i])
                continue;
            int desc = ppids[i] == self;
            for (int j = 0; j < n && !desc; j++)
                desc = mark[j] && pids[j] == ppids[i];
            if (desc) {
                mark[i] = 1;
                changed = 1;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (mark[i] && kill(pids[i], SIGKILL) == 0)
            killed++;
    return killed;
}

static void kill_tree(pid_t cmd, int *cstatus, int *have_status)
{
    for (;;) {
        kill(-cmd, SIGKILL);
        kill_descendants();
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0)
            if (p == cmd) {
                *cstatus = st;
                *have_status = 1;
            }
        if (p < 0 && errno == ECHILD)
            return;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* ---- one command ---- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void session(int conn)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    struct lis_req_hdr h;
    int fds[3] = {-1, -1, -1}, nfds = 0;
    union {
        char buf[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {&h, sizeof h};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                        .msg_controllen = sizeof u.buf};
    ssize_t got = recvmsg(conn, &mh, MSG_CMSG_CLOEXEC);
    if (got <= 0)
        _exit(1);
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            if (nfds > 3)
                nfds = 3;
            memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
        }
    if ((size_t)got < sizeof h && read_full(conn, (char *)&h + got, sizeof h - got) < 0)
        _exit(1);
    if (h.magic != LIS_PROTO_MAGIC || h.payload_len > LIS_PAYLOAD_MAX || h.argc < 1 ||
        h.argc > LIS_ARGS_MAX || h.envc > LIS_ARGS_MAX) {
        send_msg(conn, LIS_MSG_EXEC_ERR, EPROTO, 0, "bad request", -1);
        _exit(1);
    }
    char *payload = malloc(h.payload_len + 1);
    char **argv = calloc(h.argc + 1, sizeof *argv);
    char **envp = calloc(h.envc + 1, sizeof *envp);
    if (!payload || !argv || !envp || read_full(conn, payload, h.payload_len) < 0)
        _exit(1);
    payload[h.payload_len] = 0;
    /* cwd, argv..., env... each NUL-terminated */
    char *p = payload, *end = payload + h.payload_len;
    char *cwd = p;
    uint32_t total = 1 + h.argc + h.envc, seen = 0;
    for (char *q = p; q < end; q++)
        seen += *q == 0;
    if (seen != total) {
        send_msg(conn, LIS_MSG_EXEC_ERR, EPROTO, 0, "malformed request", -1);
        _exit(1);
    }
    p += strlen(p) + 1;
    for (uint32_t i = 0; i < h.argc; i++, p += strlen(p) + 1)
        argv[i] = p;
    for (uint32_t i = 0; i < h.envc; i++, p += strlen(p) + 1)
        envp[i] = p;

    int in = -1, out = -1, errfd = -1, k = 0;
    if ((h.flags & LIS_REQ_HAVE_STDIN) && k < nfds)
        in = fds[k++];
    if ((h.flags & LIS_REQ_HAVE_STDOUT) && k < nfds)
        out = fds[k++];
    if ((h.flags & LIS_REQ_HAVE_STDERR) && k < nfds)
        errfd = fds[k++];

    int slave = -1;
    if (h.flags & LIS_REQ_PTY) {
        int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        int zero = 0;
        if (master < 0 || ioctl(master, TIOCSPTLCK, &zero) < 0 ||
            (slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY)) < 0) {
            send_msg(conn, LIS_MSG_EXEC_ERR, errno, 0, "opening a pseudo-terminal", -1);
            send_msg(conn, LIS_MSG_EXITED, 127 << 8, 0, NULL, -1);
            _exit(1);
        }
        struct winsize ws = {.ws_row = h.rows ? h.rows : 24, .ws_col = h.cols ? h.cols : 80};
        ioctl(master, TIOCSWINSZ, &ws);
        send_msg(conn, LIS_MSG_PTY, 0, 0, NULL, master);
        close(master);
    }

    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    int status_pipe[2];
    if (pipe2(status_pipe, O_CLOEXEC) < 0)
        _exit(1);
    pid_t cmd = fork();
    if (cmd == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        setsid();
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
        struct { int err; char stage; } st = {0, 0};
        if (cwd[0] && chdir(cwd) < 0) {
            st.err = errno;
            st.stage = 'c';
        } else {
            environ = envp;
            execvp(argv[0], argv);
            st.err = errno;
            st.stage = 'e';
        }
        if (write(status_pipe[1], &st, sizeof st) < 0)
            _exit(127);
        _exit(st.err == ENOENT ? 127 : 126);
    }
    close(status_pipe[1]);
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    if (slave >= 0)
        close(slave);
    if (cmd < 0) {
        send_msg(conn, LIS_MSG_EXEC_ERR, errno, 0, "fork", -1);
        send_msg(conn, LIS_MSG_EXITED, 126 << 8, 0, NULL, -1);
        _exit(1);
    }
    struct { int err; char stage; } st = {0, 0};
    if (read(status_pipe[0], &st, sizeof st) == (ssize_t)sizeof st) {
        char text[200];
        snprintf(text, sizeof text, "%s %s: %s", st.stage == 'c' ? "chdir" : "exec",
                 st.stage == 'c' ? cwd : argv[0], strerror(st.err));
        send_msg(conn, LIS_MSG_EXEC_ERR, st.err, 0, text, -1);
    } else {
        send_msg(conn, LIS_MSG_STARTED, cmd, 0, NULL, -1);
    }
    close(status_pipe[0]);

    int64_t deadline = h.timeout_ms > 0 ? now_ms() + h.timeout_ms : 0;
    int cstatus = 0, have = 0, timed_out = 0;
    while (!have) {
        struct pollfd pf[2] = {{conn, POLLIN, 0}, {sfd, POLLIN, 0}};
        int wait = -1;
        if (deadline) {
            int64_t left = deadline - now_ms();
            wait = left > 0 ? (int)(left > 1000000 ? 1000000 : left) : 0;
        }
        int pr = poll(pf, 2, wait);
        if (pr == 0 && deadline && now_ms() >= deadline) {
            timed_out = 1;
            kill_tree(cmd, &cstatus, &have);
            break;
        }
        if (pf[0].revents) {
            struct lis_msg m;
            ssize_t r = recv(conn, &m, sizeof m, MSG_WAITALL);
            if (r == (ssize_t)sizeof m && m.type == LIS_MSG_SIGNAL) {
                if (kill(-cmd, m.a) < 0)
                    kill(cmd, m.a);
            } else if (r <= 0 || (pf[0].revents & (POLLHUP | POLLERR))) {
                /* the client is gone: nobody wants this command any more */
                kill_tree(cmd, &cstatus, &have);
                _exit(0);
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
    send_msg(conn, LIS_MSG_EXITED, cstatus, timed_out, NULL, -1);
    close(conn);
    /* Background processes the command left behind stay ours to reap. */
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
        ;
    _exit(0);
}

/* ---- PID 1 ---- */

static void start_session(int conn, int life, int listen_fd, int sfd)
{
    pid_t p = fork();
    if (p == 0) {
        if (life >= 0)
            close(life);
        if (listen_fd >= 0)
            close(listen_fd);
        close(sfd);
        session(conn);
    }
    close(conn);
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int life = atoi(argv[1]), listen_fd = atoi(argv[2]), persist = argv[3][0] == '1';
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        return 1;
    if (send_msg(life, LIS_MSG_READY, 0, 0, NULL, -1) < 0 && !persist)
        return 1;
    for (;;) {
        struct pollfd pf[3] = {{sfd, POLLIN, 0}, {life, POLLIN, 0}, {listen_fd, POLLIN, 0}};
        if (poll(pf, 3, -1) < 0 && errno != EINTR)
            return 1;
        if (pf[0].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) > 0)
                ;
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
        }
        if (life >= 0 && pf[1].revents) {
            struct lis_msg m;
            int fd = -1;
            union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
            } u;
            struct iovec iov = {&m, sizeof m};
            struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                                .msg_controllen = sizeof u.buf};
            ssize_t n = recvmsg(life, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n > 0 && c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                    memcpy(&fd, CMSG_DATA(c), sizeof fd);
            if (n <= 0) {
                if (!persist)
                    _exit(0); /* the owner is gone: the kernel kills the rest */
                close(life);
                life = -1;
            } else if (m.type == LIS_MSG_CONN && fd >= 0) {
                start_session(fd, life, listen_fd, sfd);
            } else {
                if (m.type == LIS_MSG_PERSIST)
                    persist = 1;
                if (fd >= 0)
                    close(fd);
            }
        }
        if (listen_fd >= 0 && pf[2].revents) {
            int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (c >= 0)
                start_session(c, life, listen_fd, sfd);
        }
    }
}
