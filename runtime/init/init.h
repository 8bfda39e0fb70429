/* init.h - shared by the files of lis-init, PID 1 of every sandbox.
 *
 * Who is out of reach of whom (docs/runtime.md, SECURITY.md):
 *  - every lis-init process (PID 1 and the per-command sessions) is
 *    non-dumpable, so a command can neither ptrace it nor open its
 *    /proc/<pid>/{mem,fd,environ} nor take its fds with pidfd_getfd;
 *  - PID 1 ignores every signal sent from inside its pid namespace, so it is
 *    the one process a command cannot stop or kill: it holds each command's
 *    deadline, watches the client's connection and writes the final EXITED;
 *  - each command runs in a UTS namespace of its own (unshared before its
 *    exec, never left: setns/unshare are denied to commands). Its inode tags
 *    every process the command ever starts, so PID 1 can kill them all even
 *    after the command killed or stopped its session (or setsid +
 *    double-forked away from it). */
#ifndef LIS_INIT_H
#define LIS_INIT_H

#include "proto.h"

#include <linux/filter.h>
#include <stdint.h>
#include <sys/types.h>

/* session -> PID 1, on the per-session control socketpair (SOCK_SEQPACKET) */
enum { SESS_REG = 1, SESS_EXIT };

struct sess_msg {
    uint32_t type;
    int32_t pid;        /* SESS_REG: the command */
    int64_t timeout_ms; /* SESS_REG: 0 = none */
    uint64_t tag;       /* SESS_REG: inode of the command's UTS namespace */
    int32_t status;     /* SESS_EXIT: wait status of the command */
    int32_t pad;
};

/* The commands' resource limits (lis_sandbox_spec.rlimits), from argv[12]. */
struct init_limits {
    int n;
    struct {
        int resource;
        uint64_t soft, hard; /* UINT64_MAX: RLIM_INFINITY */
    } r[16];
};

/* session.c: serves one command connection; never returns. conn and ctl are
 * the only fds it keeps. */
void init_session(int conn, int ctl, const struct sock_fprog *prog, const struct init_limits *lim)
    __attribute__((noreturn));

/* killtag.c: the UTS namespace inode of a process ("self" or a pid), 0 when
 * it is gone. */
uint64_t init_ns_tag(const char *pid);
/* SIGKILLs every process whose UTS namespace is `tag` until none is left
 * (bounded); returns how many signals were sent. */
int init_kill_tag(uint64_t tag);

/* memwatch.c: one check of the fallback memory limit (bytes): the
 * processes' anonymous memory plus what is written in the sandbox's tmpfs
 * (scratch_fd: the set-up tmpfs; -1: none); kills the largest process when
 * the sandbox is over it and gives its tag. Returns the ms until the next
 * check. */
int init_memwatch(uint64_t limit, int scratch_fd, uint64_t *killed_tag);

/* diskwatch.c: the total bound of a disk upper layer (fd: its host directory,
 * -1: none). One check: returns the ms until the next, -1 when there is
 * nothing to watch. */
struct disk_watch {
    int fd;
    uint64_t budget;         /* bytes */
    uint64_t usage, host_at; /* the last measurement; the host filesystem's use then */
    uint64_t written_at;     /* what the sandbox's processes had written then */
    int64_t measured_at;     /* CLOCK_MONOTONIC ms, 0: never */
    int64_t interval, gap;   /* the backstop's period; the least time between two */
    int frozen;              /* over the budget: RLIMIT_FSIZE 0 everywhere */
    int races;               /* walks spoilt in a row by directories moved under them */
    unsigned measurements, freezes;
};
int init_diskwatch(struct disk_watch *w, int64_t now);

/* procfs.c: /proc/PID/FILE of the sandbox's /proc (procfd) into buf, NUL
 * terminated; its length, -1 when gone, unreadable or empty. */
ssize_t init_proc_read(int procfd, const char *pid, const char *file, char *buf, size_t len);

/* cpuwatch.c: one check of the fallback CPU share (every 250 ms): a process
 * that wanted a CPU for 3/4 of the last 4 s goes to nice 19, of the last
 * 30 s to SCHED_IDLE. *tab holds each process's window (replaced). */
struct cpu_sample {
    pid_t pid;
    long long since_ns; /* ns it had run or waited to run (schedstat) at the window's start */
    int64_t since_ms;   /* the window's start, PID 1's clock */
    long long est;      /* ns wanted by the last check: schedstat, or more if it lags */
    int64_t at_ms;      /* the last check */
};
void init_cpuwatch(struct cpu_sample **tab, int *n, int64_t now_ms);

/* harden.c: once in lis-init: the capability bounding set cut to Docker's
 * default set less cap_drop (lis_sandbox_spec.cap_drop), no ambient or
 * inheritable capabilities (what every exec inherits). In a command's child right before exec: the second seccomp
 * filter (unshare denied; the main one is inherited from the set-up).
 * 0 or an errno. */
int init_harden_self(uint64_t cap_drop);
/* In a command's child: its resource limits, each hard one lowered to what
 * can be set (no CAP_SYS_RESOURCE outside). 0 or an errno. */
int init_apply_limits(const struct init_limits *lim);
int init_harden(const struct sock_fprog *prog);
/* PID 1, spec.monitor: loads the monitor's program (a sealed memfd, closed)
 * with SECCOMP_FILTER_FLAG_NEW_LISTENER; the listener fd, or -1. */
int init_load_notify(int fd);
/* A command child, before its chdir: CAP_SYS_PTRACE dropped (0 or errno). */
int init_drop_ptrace(void);

/* One lis_msg to a client connection, never blocking PID 1. Inline: PID 1
 * (lis_init.c) and the sessions (session.c) both send, and neither file may
 * call into the other's (lis_init.c starts session.c's init_session). */
static inline int init_send(int fd, uint32_t type, int32_t a, int64_t b, const char *text)
{
    return lis_msg_send_flags(fd, type, a, b, text, -1, MSG_DONTWAIT);
}

#endif
