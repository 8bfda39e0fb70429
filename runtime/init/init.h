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

/* The commands' resource limits (lis_sandbox_spec.rlimits), from argv[9]. */
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

/* memwatch.c: one check of the fallback memory limit (bytes); kills the
 * largest process when the sandbox is over it and gives its tag. Returns the
 * ms until the next check. */
int init_memwatch(uint64_t limit, uint64_t *killed_tag);

/* cpuwatch.c: one check of the fallback CPU share, every interval_ms: a
 * process busy for 3/4 of the interval goes to SCHED_IDLE. *tab holds the
 * previous samples (replaced). */
struct cpu_sample {
    pid_t pid;
    long long ticks;
};
void init_cpuwatch(struct cpu_sample **tab, int *n, int64_t interval_ms);

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

/* one lis_msg to a client connection, never blocking PID 1 */
int init_send(int fd, uint32_t type, int32_t a, int64_t b, const char *text);

#endif
