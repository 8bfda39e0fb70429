/* notify.c - the hub: one thread answering the seccomp user notifications
 * of every monitored sandbox of the process (execve, execveat, exit_group;
 * connect and sendto with --net none) and watching the pidfds of the
 * processes they started.
 *
 * For each notification it reads what it needs of the process's memory
 * (process_vm_readv of the pid the kernel gave: path, argv, capped), then checks with SECCOMP_IOCTL_NOTIF_ID_VALID that the
 * process still waits in that same syscall, so everything read is of that
 * process and no other that reused its pid; only then is it recorded and
 * answered: CONTINUE, or EPERM when a deny rule matched. It never opens,
 * stats or follows a path the process named (only /proc entries of the pid
 * the kernel gave), and it never waits on the caller: records go into the
 * monitor's bounded lists (past a bound they are counted, not kept), so a
 * slow caller never holds a sandbox's syscall.
 *
 * CONTINUE means the kernel runs the syscall with the arguments as they are
 * in memory then: a multithreaded process can rewrite them after the check
 * (the kernel's own caveat, seccomp_unotify(2)). So a deny is advisory
 * against such a process, and a recorded path or argv is what the process
 * showed at the check (docs/monitoring.md). */
#include "monitor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif

/* PIDFD_GET_INFO (Linux 6.15): the exit status of a process that is not our
 * child; older kernels answer ENOTTY and a death by signal stays unnamed. */
struct mon_pidfd_info {
    uint64_t mask, cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t exit_code;
    uint32_t coredump_mask, spare;
};
#define MON_PIDFD_GET_INFO _IOWR(0xFF, 11, struct mon_pidfd_info)
#define MON_PIDFD_INFO_EXIT (1ULL << 3)

enum ref_kind { REF_LISTENER, REF_PIDFD, REF_WAKE, REF_TIMER };

typedef struct hub_ref {
    enum ref_kind kind;
    lis_monitor *m;
    mon_proc *p;
} hub_ref;

struct lis_monitor_hub {
    int epfd, wakefd;
    hub_ref wake_ref;
    pthread_t thread;
    int started;
    pthread_mutex_t mu; /* held while events are handled; registrations */
    int stop;
    lis_monitor *grave; /* removed monitors, freed between rounds (next_dead) */
    struct seccomp_notif_sizes sizes;
    struct seccomp_notif *req;
    struct seccomp_notif_resp *resp;
    mon_exec_names *names; /* an exec's resolved names (one thread: one buffer) */
    mon_verify *verify;    /* checks of what runs after an exec let through */
    int timerfd;           /* the next of them */
    hub_ref timer_ref;
    double armed; /* the timer's time, 0 disarmed */
};

static void proc_unwatch(lis_monitor_hub *hub, lis_monitor *m, mon_proc *p)
{
    if (p->pidfd < 0)
        return;
    epoll_ctl(hub->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
    close(p->pidfd);
    p->pidfd = -1;
    free(p->ref);
    p->ref = NULL;
    m->live--;
}

static void proc_watch(lis_monitor_hub *hub, lis_monitor *m, mon_proc *p)
{
    if (m->live >= MON_LIVE_MAX)
        return;
    int fd = (int)syscall(SYS_pidfd_open, p->hpid, 0);
    hub_ref *r = fd >= 0 ? malloc(sizeof *r) : NULL;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = r};
    if (!r || epoll_ctl(hub->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        if (fd >= 0)
            close(fd);
        free(r);
        return;
    }
    *r = (hub_ref){REF_PIDFD, m, p};
    p->pidfd = fd;
    p->ref = r;
    m->live++;
}

/* The ids of a process that exec's again (a chain of execs, a PATH search)
 * from its record, without reading /proc: tid is a running record's pid and
 * that process has not ended (its pidfd is not readable; a pid is reused
 * only after the end). -1 when unknown, with *stale set when the record is
 * of an ended process whose pid tid now is. */
static int known_ids(lis_monitor *m, pid_t tid, mon_pstatus *st, pid_t *nsppid, int *stale)
{
    pthread_mutex_lock(&m->mu);
    mon_proc *prev = mon_running_proc(m, tid);
    int pidfd = prev ? prev->pidfd : -1;
    mon_pstatus known = {.tgid = tid, .nspid = prev ? prev->pid : 0};
    pid_t ppid = prev ? prev->ppid : 0;
    pthread_mutex_unlock(&m->mu);
    /* the pidfd is closed only by this thread, or under the hub's lock that
     * this thread holds now */
    struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
    if (pidfd < 0 || !known.nspid)
        return -1;
    if (poll(&pfd, 1, 0) != 0) {
        *stale = 1; /* that record's process ended: tid is another's now */
        return -1;
    }
    *st = known;
    *nsppid = ppid;
    return 0;
}

static int id_valid(int listener, uint64_t id)
{
    return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

static void respond(lis_monitor_hub *hub, int listener, uint64_t id, int error)
{
    memset(hub->resp, 0, hub->sizes.seccomp_notif_resp);
    hub->resp->id = id;
    if (error) {
        hub->resp->error = -error;
    } else {
        hub->resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    }
    /* ENOENT: the process went (killed) meanwhile; nothing to answer */
    ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, hub->resp);
}

static void join_argv(const char *argv, size_t argc, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < argc && o + 1 < cap; i++) {
        int n = snprintf(out + o, cap - o, "%s%s", i ? " " : "", argv);
        o += n > 0 ? (size_t)n : 0;
        argv += strlen(argv) + 1;
    }
    if (o >= cap)
        out[cap - 1] = 0;
}

static const mon_rule *first_exec_rule(const lis_policy *p)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (p->rules[i].kind == MR_EXEC)
            return &p->rules[i];
    return NULL;
}

static void on_exec(lis_monitor_hub *hub, lis_monitor *m, const struct seccomp_notif *req)
{
    mon_exec x;
    memset(&x, 0, sizeof x);
    mon_exec_read((pid_t)req->pid, &req->data, &x);
    /* what the exec will run, resolved inside the sandbox's root: only where
     * exec rules need it (it costs a lookup per component) */
    mon_exec_names *nm = m->exec_rules ? hub->names : NULL;
    if (nm && mon_exec_resolve((pid_t)req->pid, &x, nm) < 0 && !nm->why[0])
        snprintf(nm->why, sizeof nm->why, "not resolved");
    mon_pstatus st = {0};
    pid_t known_ppid = 0;
    int stale = 0;
    int have_st = known_ids(m, (pid_t)req->pid, &st, &known_ppid, &stale) == 0 ||
                  mon_read_status((pid_t)req->pid, &st) == 0;
    if (!id_valid(m->listener, req->id))
        return; /* it died meanwhile: what was read may be another process's */
    double now = lis_now();
    if (nm) /* its last exec is over: what it ran is checked before this one goes on */
        mon_verify_settle(hub->verify, m, have_st ? st.tgid : (pid_t)req->pid, now);
    char joined[MON_ARGV_BYTES + MON_ARGS_MAX];
    join_argv(x.argv, x.argc, joined, sizeof joined);
    /* the rules read only the policy (immutable) and the sandbox: no lock */
    int unknown = 0;
    const mon_rule *r = nm ? mon_rules_match_exec(m->policy, x.path, nm->why[0] ? NULL : nm, joined,
                                                  x.argv_cut || x.argc_total > x.argc, &unknown)
                           : NULL;
    const mon_rule *copy = nm && !r && !nm->why[0] && !nm->missing
                               ? mon_exec_copy_rule(m->policy, (pid_t)req->pid, nm)
                               : NULL;
    if (copy)
        r = copy;
    pthread_mutex_lock(&m->mu);
    int deny = r && (unknown ? m->policy->on_unknown == LIS_ACT_STOP : r->action == LIS_ACT_DENY);
    pid_t tgid = have_st ? st.tgid : (pid_t)req->pid;
    /* what runs is checked again after the exec, against the file as the
     * kernel maps it: the reference is taken before the answer */
    if (nm && !deny &&
        mon_verify_add(hub->verify, m, (pid_t)req->pid, tgid, now, x.path, nm->why[0] ? NULL : nm,
                       now) < 0)
        mon_alert_unknown(m, first_exec_rule(m->policy), now,
                          "exec %s not checked after it ran (checks pending over all sandboxes "
                          "at their bound)",
                          x.path);
    /* EACCES, as a file without the execute right: a PATH search goes on to
     * the next directory (EPERM ends execvp's); ENOENT where nothing is there */
    respond(hub, m->listener, req->id, !deny ? 0 : nm && nm->missing ? ENOENT : EACCES);
    if (r && unknown)
        mon_alert_unknown(m, r, now, "exec %s (%s): %s", x.path, joined,
                          nm->why[0] ? nm->why : "its argv was cut");
    else if (copy)
        mon_alert_add(m, r, now, "exec %s, a copy of %s (%s)", nm->name[0], r->path, joined);
    else if (r)
        mon_alert_add(m, r, now, "exec %s (%s)", nm && nm->n ? nm->name[nm->n - 1] : x.path,
                      joined);
    m->step_execs++;
    mon_exec_ids ids = {.tgid = tgid,
                        .nspid = have_st ? st.nspid : 0,
                        .ppid = known_ppid ? known_ppid
                                : have_st  ? mon_ns_pid_of(m, st.ppid)
                                           : 0,
                        .stale = stale && tgid == (pid_t)req->pid};
    mon_proc *prev = NULL;
    mon_proc *p = mon_exec_record(m, &x, &ids, deny ? r->name : NULL, now, &prev);
    if (!p) {
        pthread_mutex_unlock(&m->mu);
        return;
    }
    if (prev && !deny && prev->pidfd >= 0) {
        /* the same process goes on in the new program: its pidfd moves */
        p->pidfd = prev->pidfd;
        p->ref = prev->ref;
        ((hub_ref *)p->ref)->p = p;
        prev->pidfd = -1;
        prev->ref = NULL;
    }
    if (p->pidfd < 0 && !deny)
        proc_watch(hub, m, p);
    const mon_rule *t = mon_rules_over(m->policy, MR_PROCESSES, m->step_execs + m->unknown_exits);
    if (t && !m->fired[t - m->policy->rules]) {
        m->fired[t - m->policy->rules] = 1;
        mon_alert_add(m, t, now, "%zu processes in step %d (above %llu)",
                      m->step_execs + m->unknown_exits, m->step, (unsigned long long)t->above);
    }
    pthread_mutex_unlock(&m->mu);
}

static void on_exit_group(lis_monitor_hub *hub, lis_monitor *m, const struct seccomp_notif *req)
{
    mon_pstatus ex;
    if (m->exec_rules && mon_read_status((pid_t)req->pid, &ex) == 0)
        mon_verify_settle(hub->verify, m, ex.tgid, lis_now()); /* what it ran, before it goes */
    pthread_mutex_lock(&m->mu);
    mon_proc *p = mon_running_proc(m, (pid_t)req->pid);
    if (!p) {
        mon_pstatus st;
        if (mon_read_status((pid_t)req->pid, &st) == 0 && st.tgid != (pid_t)req->pid)
            p = mon_running_proc(m, st.tgid);
    }
    double cpu = -1;
    char state;
    if (p && mon_read_cpu(p->hpid, &cpu, &state) < 0)
        cpu = -1;
    int valid = id_valid(m->listener, req->id);
    respond(hub, m->listener, req->id, 0);
    if (!p) {
        m->unknown_exits++; /* a fork that never exec'd (or a session of lis-init) */
    } else if (valid) {
        p->state = MP_EXITED;
        p->exit_code = (int)(req->data.args[0] & 0xff);
        p->cpu = cpu;
        p->t_end = lis_now();
        /* its end is known: no wake-up for its pidfd's */
        proc_unwatch(hub, m, p);
    }
    pthread_mutex_unlock(&m->mu);
}

static int loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

static void on_connect(lis_monitor_hub *hub, lis_monitor *m, const struct seccomp_notif *req)
{
    int is_sendto = req->data.nr == SYS_sendto;
    uint64_t addr = is_sendto ? req->data.args[4] : req->data.args[1];
    uint64_t len = is_sendto ? req->data.args[5] : req->data.args[2];
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    ssize_t got =
        addr ? mon_read_mem((pid_t)req->pid, addr, &ss, len < sizeof ss ? (size_t)len : sizeof ss)
             : -1;
    int valid = id_valid(m->listener, req->id);
    if (!valid || got < (ssize_t)sizeof(sa_family_t) ||
        (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) ||
        (ss.ss_family == AF_INET && got < (ssize_t)sizeof(struct sockaddr_in)) ||
        (ss.ss_family == AF_INET6 && got < (ssize_t)sizeof(struct sockaddr_in6))) {
        respond(hub, m->listener, req->id, 0); /* not an internet address: not ours to count */
        return;
    }
    pthread_mutex_lock(&m->mu);
    if (loopback(&ss)) {
        m->conn_local++;
        pthread_mutex_unlock(&m->mu);
        respond(hub, m->listener, req->id, 0);
        return;
    }
    mon_connect c;
    memset(&c, 0, sizeof c);
    c.family = ss.ss_family;
    c.t = lis_now();
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, c.addr, sizeof c.addr);
        c.port = ntohs(a->sin_port);
    } else {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, c.addr, sizeof c.addr);
        c.port = ntohs(a->sin6_port);
    }
    const mon_rule *r = mon_rules_match(m->policy, MR_CONNECT, c.addr, NULL);
    int deny = r && r->action == LIS_ACT_DENY;
    respond(hub, m->listener, req->id, deny ? EPERM : 0);
    if (deny)
        snprintf(c.denied, sizeof c.denied, "%s", r->name);
    if (r)
        mon_alert_add(m, r, c.t, "%s to %s port %u", is_sendto ? "datagram" : "connection", c.addr,
                      c.port);
    m->conn_total++;
    if (m->nconns < MON_STEP_CONNECTS && LIS_GROW(m->conns, m->capconns, m->nconns + 1) == 0)
        m->conns[m->nconns++] = c;
    pthread_mutex_unlock(&m->mu);
}

static void on_listener(lis_monitor_hub *hub, lis_monitor *m, uint32_t events)
{
    if (events & (EPOLLHUP | EPOLLERR)) {
        /* no process of the sandbox is left under the filter */
        epoll_ctl(hub->epfd, EPOLL_CTL_DEL, m->listener, NULL);
        return;
    }
    pthread_mutex_lock(&m->mu);
    m->acts++; /* something of the sandbox ran (lis_monitor_step_begin's scan) */
    pthread_mutex_unlock(&m->mu);
    memset(hub->req, 0, hub->sizes.seccomp_notif);
    if (ioctl(m->listener, SECCOMP_IOCTL_NOTIF_RECV, hub->req) < 0)
        return; /* ENOENT: the process went before we could read it */
    const struct seccomp_notif *req = hub->req;
    long nr = req->data.nr;
    if (nr == SYS_execve || nr == SYS_execveat)
        on_exec(hub, m, req);
    else if (nr == SYS_exit_group)
        on_exit_group(hub, m, req);
    else if (nr == SYS_connect || nr == SYS_sendto)
        on_connect(hub, m, req);
    else
        respond(hub, m->listener, req->id, 0);
}

static void on_pidfd(lis_monitor_hub *hub, hub_ref *r)
{
    lis_monitor *m = r->m;
    mon_proc *p = r->p;
    pthread_mutex_lock(&m->mu);
    m->acts++;
    if (p->state == MP_RUNNING) {
        /* it ended without exit_group: a signal (or the last thread's exit) */
        struct mon_pidfd_info info = {.mask = MON_PIDFD_INFO_EXIT};
        p->state = MP_KILLED;
        p->t_end = lis_now();
        if (ioctl(p->pidfd, MON_PIDFD_GET_INFO, &info) == 0 && (info.mask & MON_PIDFD_INFO_EXIT)) {
            int ws = info.exit_code;
            if (WIFSIGNALED(ws))
                p->signal = WTERMSIG(ws);
            else if (WIFEXITED(ws)) {
                p->state = MP_EXITED;
                p->exit_code = WEXITSTATUS(ws);
            }
        }
    }
    proc_unwatch(hub, m, p);
    pthread_mutex_unlock(&m->mu);
}

void mon_monitor_destroy(lis_monitor *m)
{
    for (size_t i = 0; i < m->nprocs; i++)
        mon_proc_free(m->procs[i]);
    free(m->procs);
    free(m->net);
    free(m->conns);
    free(m->alerts);
    for (size_t i = 0; i < m->nfiles; i++)
        mon_file_release(&m->files[i]);
    free(m->files);
    mon_layer_release(&m->layer);
    if (m->listener >= 0)
        close(m->listener);
    if (m->evfd >= 0)
        close(m->evfd);
    free(m->ref);
    free(m->call_tool);
    free(m->call_cmd);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void bury(lis_monitor_hub *hub)
{
    while (hub->grave) {
        lis_monitor *m = hub->grave;
        hub->grave = m->next_dead;
        mon_monitor_destroy(m);
    }
}

/* Runs the checks after execs that are due and arms the timer for the
 * next one (hub->mu held). */
static void arm_checks(lis_monitor_hub *hub)
{
    double next = mon_verify_run(hub->verify, lis_now());
    if (next == hub->armed)
        return;
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (next > 0) {
        its.it_value.tv_sec = (time_t)next;
        its.it_value.tv_nsec = (long)((next - (double)(time_t)next) * 1e9);
        if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
            its.it_value.tv_nsec = 1;
    }
    if (timerfd_settime(hub->timerfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
        hub->armed = next;
}

static void *hub_main(void *arg)
{
    lis_monitor_hub *hub = arg;
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(hub->epfd, evs, 64, -1);
        if (n < 0 && errno != EINTR)
            break;
        pthread_mutex_lock(&hub->mu);
        for (int i = 0; i < n; i++) {
            hub_ref *r = evs[i].data.ptr;
            if (r->kind == REF_TIMER) {
                uint64_t v;
                if (read(hub->timerfd, &v, sizeof v) < 0) {
                    /* EAGAIN: not due yet */
                }
                continue;
            }
            if (r->kind == REF_WAKE) {
                uint64_t v;
                if (read(hub->wakefd, &v, sizeof v) < 0) {
                    /* EAGAIN: another round drained it */
                }
                continue;
            }
            if (r->m->dead)
                continue;
            if (r->kind == REF_LISTENER)
                on_listener(hub, r->m, evs[i].events);
            else
                on_pidfd(hub, r);
        }
        arm_checks(hub);
        bury(hub);
        int stop = hub->stop;
        pthread_mutex_unlock(&hub->mu);
        if (stop)
            break;
    }
    return NULL;
}

lis_monitor_hub *lis_monitor_hub_new(lis_error *err)
{
    lis_monitor_hub *hub = calloc(1, sizeof *hub);
    if (!hub) {
        lis_oom(err);
        return NULL;
    }
    hub->epfd = hub->wakefd = hub->timerfd = -1;
    pthread_mutex_init(&hub->mu, NULL);
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &hub->sizes) < 0) {
        lis_fail_errno(err, "seccomp user notifications are not available (Linux >= 5.5)");
        goto fail;
    }
    /* the kernel's sizes, never smaller than ours */
    if (hub->sizes.seccomp_notif < sizeof *hub->req)
        hub->sizes.seccomp_notif = sizeof *hub->req;
    if (hub->sizes.seccomp_notif_resp < sizeof *hub->resp)
        hub->sizes.seccomp_notif_resp = sizeof *hub->resp;
    hub->req = calloc(1, hub->sizes.seccomp_notif);
    hub->resp = calloc(1, hub->sizes.seccomp_notif_resp);
    hub->names = calloc(1, sizeof *hub->names);
    hub->verify = mon_verify_new();
    if (!hub->req || !hub->resp || !hub->names || !hub->verify) {
        lis_oom(err);
        goto fail;
    }
    hub->epfd = epoll_create1(EPOLL_CLOEXEC);
    hub->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    hub->wake_ref.kind = REF_WAKE;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &hub->wake_ref};
    hub->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    hub->timer_ref.kind = REF_TIMER;
    struct epoll_event tev = {.events = EPOLLIN, .data.ptr = &hub->timer_ref};
    if (hub->epfd < 0 || hub->wakefd < 0 || hub->timerfd < 0 ||
        epoll_ctl(hub->epfd, EPOLL_CTL_ADD, hub->wakefd, &ev) < 0 ||
        epoll_ctl(hub->epfd, EPOLL_CTL_ADD, hub->timerfd, &tev) < 0) {
        lis_fail_errno(err, "the monitor's epoll set");
        goto fail;
    }
    /* a thread that takes no signals: they belong to the application */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&hub->thread, NULL, hub_main, hub);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        lis_fail_errnum(err, rc, "starting the monitor's thread");
        goto fail;
    }
    hub->started = 1;
    return hub;
fail:
    lis_monitor_hub_free(hub);
    return NULL;
}

void lis_monitor_hub_free(lis_monitor_hub *hub)
{
    if (!hub)
        return;
    if (hub->started) {
        pthread_mutex_lock(&hub->mu);
        hub->stop = 1;
        pthread_mutex_unlock(&hub->mu);
        uint64_t one = 1;
        if (write(hub->wakefd, &one, sizeof one) < 0) {
            /* full: readable anyway */
        }
        pthread_join(hub->thread, NULL);
    }
    bury(hub);
    if (hub->epfd >= 0)
        close(hub->epfd);
    if (hub->wakefd >= 0)
        close(hub->wakefd);
    free(hub->req);
    free(hub->resp);
    free(hub->names);
    mon_verify_free(hub->verify);
    if (hub->timerfd >= 0)
        close(hub->timerfd);
    pthread_mutex_destroy(&hub->mu);
    free(hub);
}

int mon_hub_add(lis_monitor_hub *hub, lis_monitor *m, lis_error *err)
{
    hub_ref *r = malloc(sizeof *r);
    if (!r)
        return lis_oom(err);
    *r = (hub_ref){REF_LISTENER, m, NULL};
    m->ref = r;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = r};
    if (epoll_ctl(hub->epfd, EPOLL_CTL_ADD, m->listener, &ev) < 0)
        return lis_fail_errno(err, "watching the sandbox's seccomp listener");
    return 0;
}

void mon_hub_remove(lis_monitor_hub *hub, lis_monitor *m)
{
    pthread_mutex_lock(&hub->mu);
    m->dead = 1;
    mon_verify_drop(hub->verify, m);
    if (m->listener >= 0)
        epoll_ctl(hub->epfd, EPOLL_CTL_DEL, m->listener, NULL);
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->nprocs; i++)
        proc_unwatch(hub, m, m->procs[i]);
    pthread_mutex_unlock(&m->mu);
    /* an event of the round under way may still name it: freed after it */
    m->next_dead = hub->grave;
    hub->grave = m;
    pthread_mutex_unlock(&hub->mu);
    uint64_t one = 1;
    if (write(hub->wakefd, &one, sizeof one) < 0) {
        /* full: readable anyway */
    }
}
