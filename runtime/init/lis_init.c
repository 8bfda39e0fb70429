/* lis-init - PID 1 of every sandbox. Static, small, no libraries.
 *
 *   lis-init LIFELINE_FD LISTEN_FD PERSIST SECCOMP_FD MEMORY_LIMIT CPUWATCH SCRATCH_FD NOTIFY_FD
 *            UPPER_FD DISK_BUDGET CAP_DROP RLIMITS
 *
 * NOTIFY_FD is -1, or the monitor's seccomp program (spec.monitor): PID 1
 * loads it with a listener before serving anything and hands the listener
 * to the owner, so every command and everything it starts is under it.
 * MEMORY_LIMIT is 0, or the fallback limit in bytes that PID 1 enforces
 * itself when the sandbox has no cgroup (memwatch.c); CPUWATCH 1 moves CPU
 * hogs to SCHED_IDLE in that case (cpuwatch.c). SCRATCH_FD is the set-up
 * tmpfs (runtime/mounts.c), kept open for the owner's snapshots. UPPER_FD
 * is -1, or the host directory of a disk upper layer that PID 1 holds to
 * DISK_BUDGET bytes (diskwatch.c). CAP_DROP is the mask of capabilities no
 * command gets, RLIMITS every command's resource limits ("-": none), both
 * from lis_sandbox_spec (Docker's --cap-drop, --ulimit).
 *
 * PID 1 reaps orphans and forks one session process per command request
 * (from the lifeline or the listening socket); session.c runs the command.
 * PID 1 is the supervisor a command cannot reach (init.h): it keeps each
 * command's deadline and client connection, and when the deadline passes,
 * the client hangs up or the session dies before reporting, it kills every
 * process carrying the command's tag and tells the client. When the
 * lifeline closes and the sandbox does not persist, PID 1 exits and the
 * kernel kills everything left in the pid namespace. */
#include "init.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One command as PID 1 sees it. */
struct sess {
    pid_t spid; /* the session process */
    int ctl;    /* our end of its control socketpair, -1 once it closed */
    int conn;   /* the client's connection (the session has it too) */
    int reg;    /* SESS_REG received */
    uint64_t tag;
    int nsfd;         /* the command's UTS namespace, held so the tag stays unique */
    int64_t deadline; /* CLOCK_MONOTONIC ms, 0 = none */
    int oom;          /* the fallback memory limit killed one of its processes */
};

struct init_state {
    int life, listen_fd, sfd, persist;
    uint64_t mem_limit; /* fallback memory limit, 0 = none */
    int64_t mem_next;   /* CLOCK_MONOTONIC ms of the next memwatch check */
    int cpuwatch;       /* fallback CPU share on */
    int64_t cpu_next;
    struct cpu_sample *cpu;
    int ncpu;
    struct disk_watch disk; /* a disk upper layer's total bound */
    int64_t disk_next;
    /* PID 1 has no child, so the sandbox has no process but PID 1 (every
     * other is a descendant, an orphan comes back to PID 1): the watchers
     * have nothing to watch and PID 1 sleeps until a session or the owner
     * wakes it. Of 512 sandboxes waiting on the model, none wakes 4 times a
     * second to scan /proc. */
    int idle;
    struct sock_fprog prog;
    struct init_limits lim; /* every command's resource limits */
    struct sess *s;
    int n, cap;
};

static void drop(struct init_state *st, int i)
{
    if (st->s[i].ctl >= 0)
        close(st->s[i].ctl);
    if (st->s[i].nsfd >= 0)
        close(st->s[i].nsfd);
    close(st->s[i].conn);
    st->s[i] = st->s[--st->n];
}

/* Kills a command whatever state its session is in. */
static void kill_command(struct sess *s)
{
    kill(s->spid, SIGKILL);
    if (s->reg)
        init_kill_tag(s->tag);
}

/* Reads what the session said; returns -1 once the entry is gone. */
static int read_ctl(struct init_state *st, int i)
{
    struct sess *s = &st->s[i];
    for (;;) {
        struct sess_msg m;
        int fd;
        ssize_t n = lis_recv_fds(s->ctl, &m, sizeof m, &fd, 1, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (n != (ssize_t)sizeof m) {
            if (fd >= 0)
                close(fd);
            close(s->ctl); /* closed (or garbage): the reap decides */
            s->ctl = -1;
            return 0;
        }
        if (m.type == SESS_REG && !s->reg && fd >= 0) {
            s->nsfd = fd;
            fd = -1;
            s->reg = 1;
            s->tag = m.tag;
            s->deadline = m.timeout_ms > 0 ? now_ms() + m.timeout_ms : 0;
        } else if (m.type == SESS_EXIT) {
            init_send(s->conn, LIS_MSG_EXITED, m.status, s->oom ? 2 : 0, NULL);
            drop(st, i);
            return -1;
        }
        if (fd >= 0)
            close(fd);
    }
}

static void start_session(struct init_state *st, int conn)
{
    /* a layer left over the budget may have shrunk while no process ran:
     * measured before the command takes its limits from it */
    if (st->idle && st->disk.fd >= 0 && st->disk.frozen)
        st->disk_next = now_ms() + init_diskwatch(&st->disk, now_ms());
    st->idle = 0; /* the watchers' overdue ticks run at once */
    int sp[2];
    if (st->n == st->cap) {
        int cap = st->cap ? 2 * st->cap : 16;
        struct sess *ns = realloc(st->s, cap * sizeof *ns);
        if (!ns) {
            close(conn);
            return;
        }
        st->s = ns;
        st->cap = cap;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        init_send(conn, LIS_MSG_EXEC_ERR, errno, 0, "socketpair");
        close(conn);
        return;
    }
    pid_t p = fork();
    if (p == 0) {
        /* keep conn and our end only: as 3 and 4, everything above closed */
        int c = fcntl(conn, F_DUPFD_CLOEXEC, 10), k = fcntl(sp[1], F_DUPFD_CLOEXEC, 10);
        if (c < 0 || k < 0 || dup3(c, 3, O_CLOEXEC) < 0 || dup3(k, 4, O_CLOEXEC) < 0)
            _exit(1);
        syscall(SYS_close_range, 5, ~0u, 0);
        if (st->disk.frozen) { /* the disk upper layer is over its budget (diskwatch.c) */
            struct rlimit zero = {0, 0};
            setrlimit(RLIMIT_FSIZE, &zero);
        }
        init_session(3, 4, &st->prog, &st->lim); /* its limits cannot lift a freeze */
    }
    close(sp[1]);
    if (p < 0) {
        init_send(conn, LIS_MSG_EXEC_ERR, errno, 0, "fork");
        close(sp[0]);
        close(conn);
        return;
    }
    st->s[st->n++] = (struct sess){.spid = p, .ctl = sp[0], .conn = conn, .nsfd = -1};
}

/* A session died: normal after a registered command reported (the entry is
 * gone then), or before it registered (it answered the client itself). Any
 * other death means the command killed it. */
static void session_died(struct init_state *st, pid_t pid, int status)
{
    for (int i = 0; i < st->n; i++) {
        if (st->s[i].spid != pid)
            continue;
        if (st->s[i].ctl >= 0 && read_ctl(st, i) < 0)
            return; /* it reported just before dying */
        struct sess *s = &st->s[i];
        if (s->reg || WIFSIGNALED(status)) {
            kill_command(s);
            init_send(s->conn, LIS_MSG_EXEC_ERR, ECHILD, 0,
                      "the session supervising this command was killed (by the command "
                      "itself?); the command and everything it started were killed");
            init_send(s->conn, LIS_MSG_EXITED, SIGKILL, 0, NULL);
        }
        drop(st, i);
        return;
    }
}

/* PID 1's own end. Not exit_group: with a monitor (spec.monitor) that call is
 * under PID 1's own notify filter (runtime/seccomp.c records every exit), and a
 * listener nobody serves any more (its owner gone, the fd still held somewhere
 * in flight) would hold PID 1, and so the sandbox, forever. One thread, so
 * SYS_exit ends the process; the kernel then kills the pid namespace. */
static __attribute__((noreturn)) void pid1_exit(int code)
{
    for (;;)
        syscall(SYS_exit, code);
}

static void lifeline(struct init_state *st)
{
    struct lis_msg m;
    int fd;
    ssize_t n = lis_recv_fds(st->life, &m, sizeof m, &fd, 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        if (!st->persist)
            pid1_exit(0); /* the owner is gone: the kernel kills the rest */
        close(st->life);
        st->life = -1;
    } else if (m.type == LIS_MSG_CONN && fd >= 0) {
        start_session(st, fd);
    } else {
        if (m.type == LIS_MSG_PERSIST)
            st->persist = 1;
        if (fd >= 0)
            close(fd);
    }
}

/* The second seccomp program, for commands, handed over as a memfd. */
static int load_prog(struct init_state *st, int fd)
{
    enum { MAXI = 4096 };
    static struct sock_filter insns[MAXI];
    ssize_t n = pread(fd, insns, sizeof insns, 0);
    close(fd);
    if (n <= 0 || n % (ssize_t)sizeof insns[0])
        return -1;
    st->prog.len = (unsigned short)(n / (ssize_t)sizeof insns[0]);
    st->prog.filter = insns;
    return 0;
}

/* Every disposition back to SIG_DFL, with the raw syscall: libc refuses to
 * touch the two real-time signals it reserves for itself (32, 33), which an
 * owner may still have ignored. */
static void reset_signals(void)
{
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        uint64_t mask;
    } sa;
    memset(&sa, 0, sizeof sa); /* SIG_DFL is NULL */
    for (int sig = 1; sig <= 64; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            syscall(SYS_rt_sigaction, sig, &sa, NULL, sizeof sa.mask);
}

static int parse_limits(const char *s, struct init_limits *lim)
{
    lim->n = 0;
    if (!strcmp(s, "-"))
        return 0;
    while (*s) {
        char *end;
        if (lim->n == (int)(sizeof lim->r / sizeof lim->r[0]))
            return -1;
        lim->r[lim->n].resource = (int)strtol(s, &end, 10);
        if (*end != ':')
            return -1;
        lim->r[lim->n].soft = strtoull(end + 1, &end, 10);
        if (*end != ':')
            return -1;
        lim->r[lim->n].hard = strtoull(end + 1, &end, 10);
        lim->n++;
        if (*end && *end != ',')
            return -1;
        s = *end ? end + 1 : end;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* Before anything else: out of reach of ptrace, /proc/<pid>/mem and fd,
     * process_vm_writev and pidfd_getfd of every process in the sandbox. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    /* Out of the owner's session and process group: a Ctrl-C on the owner's
     * terminal goes to its foreground group, and must not kill the sessions
     * of the sandbox's running commands (lis batch drains on the first one;
     * as PID 1 we would drop it, the sessions would die of it). */
    setsid();
    if (argc != 13)
        return 2;
    /* argv[7]: the set-up tmpfs (tmpfs upper layer, /tmp), held open for the
     * owner's snapshots (runtime/capture.c); never used here, closed on every
     * exec. Its number goes to the owner with READY. */
    int scratch = atoi(argv[7]);
    fcntl(scratch, F_SETFD, FD_CLOEXEC);
    struct init_state st = {.life = atoi(argv[1]),
                            .listen_fd = atoi(argv[2]),
                            .persist = argv[3][0] == '1',
                            .mem_limit = strtoull(argv[5], NULL, 10),
                            .cpuwatch = argv[6][0] == '1',
                            .disk = {.fd = atoi(argv[9]), .budget = strtoull(argv[10], NULL, 10)}};
    /* argv[9]: the disk upper layer's host directory, for diskwatch.c only */
    if (st.disk.fd >= 0)
        fcntl(st.disk.fd, F_SETFD, FD_CLOEXEC);
    /* argv[11]: capabilities left out of every command's set; argv[12]: its
     * resource limits, "RESOURCE:SOFT:HARD,..." ("-": none) */
    if (load_prog(&st, atoi(argv[4])) < 0 || init_harden_self(strtoull(argv[11], NULL, 10)) != 0 ||
        parse_limits(argv[12], &st.lim) < 0)
        return 1;
    /* Whatever the owner ignored (SIGPIPE, even SIGCHLD) came through the
     * exec: every disposition back to default, for us and every command. */
    reset_signals();
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_SETMASK, &chld, NULL);
    st.sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (st.sfd < 0)
        return 1;
    int notify = atoi(argv[8]);
    if (notify >= 0) {
        int listener = init_load_notify(notify);
        if (listener < 0 ||
            lis_msg_send_flags(st.life, LIS_MSG_MONITOR_FD, 0, 0, NULL, listener, MSG_DONTWAIT) < 0)
            pid1_exit(1);
        close(listener);
    }
    if (init_send(st.life, LIS_MSG_READY, scratch, 0, NULL) < 0 && !st.persist)
        pid1_exit(1);
    struct pollfd *pf = NULL;
    int pfcap = 0;
    for (;;) {
        if (pfcap < 3 + 2 * st.n) {
            pfcap = 3 + 2 * st.cap + 32;
            struct pollfd *np = realloc(pf, pfcap * sizeof *np);
            if (!np)
                pid1_exit(1);
            pf = np;
        }
        pf[0] = (struct pollfd){st.sfd, POLLIN, 0};
        pf[1] = (struct pollfd){st.life, POLLIN, 0};
        pf[2] = (struct pollfd){st.listen_fd, POLLIN, 0};
        int64_t now = now_ms(), wait = -1;
        for (int i = 0; i < st.n; i++) {
            pf[3 + 2 * i] = (struct pollfd){st.s[i].ctl, POLLIN, 0};
            pf[4 + 2 * i] = (struct pollfd){st.s[i].conn, 0, 0}; /* hang-up only */
            if (st.s[i].deadline) {
                int64_t left = st.s[i].deadline - now;
                left = left < 0 ? 0 : left;
                wait = wait < 0 || left < wait ? left : wait;
            }
        }
        int64_t next_tick[3] = {st.mem_limit ? st.mem_next : -1, st.cpuwatch ? st.cpu_next : -1,
                                st.disk.fd >= 0 ? st.disk_next : -1};
        if (st.idle) /* the owner's writes into the layer are its own, bounded: the
                      * watchers see them at the next command's first tick */
            next_tick[0] = next_tick[1] = next_tick[2] = -1;
        for (int k = 0; k < 3; k++) {
            if (next_tick[k] < 0)
                continue;
            int64_t left = next_tick[k] - now;
            left = left < 0 ? 0 : left;
            wait = wait < 0 || left < wait ? left : wait;
        }
        int npf = 3 + 2 * st.n;
        if (poll(pf, npf, wait > 1000000 ? 1000000 : (int)wait) < 0 && errno != EINTR)
            pid1_exit(1);
        now = now_ms();
        if (!st.idle && st.mem_limit && now >= st.mem_next) {
            uint64_t tag;
            st.mem_next = now + init_memwatch(st.mem_limit, scratch, &tag);
            for (int i = 0; tag && i < st.n; i++)
                if (st.s[i].reg && st.s[i].tag == tag)
                    st.s[i].oom = 1;
        }
        if (!st.idle && st.disk.fd >= 0 && now >= st.disk_next)
            st.disk_next = now + init_diskwatch(&st.disk, now);
        if (!st.idle && st.cpuwatch && now >= st.cpu_next) {
            enum { CPU_INTERVAL_MS = 250 };
            init_cpuwatch(&st.cpu, &st.ncpu, now);
            st.cpu_next = now + CPU_INTERVAL_MS;
        }
        /* Sessions first (what they said before dying counts), last to first
         * so that dropping an entry (moved from the end) skips nothing. */
        for (int i = st.n - 1; i >= 0; i--) {
            if (pf[3 + 2 * i].revents && read_ctl(&st, i) < 0)
                continue;
            struct sess *s = &st.s[i];
            if (s->reg && (pf[4 + 2 * i].revents & (POLLHUP | POLLERR))) {
                kill_command(s); /* nobody wants this command any more */
                drop(&st, i);
            } else if (s->reg && s->deadline && now >= s->deadline) {
                kill_command(s);
                init_send(s->conn, LIS_MSG_EXITED, SIGKILL, 1, NULL);
                drop(&st, i);
            }
        }
        if (pf[0].revents) {
            struct signalfd_siginfo si;
            while (read(st.sfd, &si, sizeof si) > 0)
                ;
        }
        int status;
        pid_t w;
        while ((w = waitpid(-1, &status, WNOHANG)) > 0)
            session_died(&st, w, status);
        st.idle = w < 0 && errno == ECHILD;
        if (st.life >= 0 && pf[1].revents)
            lifeline(&st);
        if (st.listen_fd >= 0 && pf[2].revents) {
            int c = accept4(st.listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (c >= 0)
                start_session(&st, c);
        }
    }
}
