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

enum ref_kind { REF_LISTENER, REF_PIDFD, REF_WAKE };

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

/* The pid inside the sandbox of a host pid: from a record, else /proc. */
static pid_t ns_pid_of(lis_monitor *m, pid_t host)
{
    if (host == m->pid1) /* lis-init, the parent of every command's first program */
        return 1;
    for (size_t i = m->nprocs; i-- > 0;)
        if (m->procs[i]->hpid == host)
            return m->procs[i]->pid;
    mon_pstatus st;
    return host > 0 && mon_read_status(host, &st) == 0 ? st.nspid : 0;
}

static mon_proc *running_proc(lis_monitor *m, pid_t tgid)
{
    for (size_t i = m->nprocs; i-- > 0;)
        if (m->procs[i]->hpid == tgid && m->procs[i]->state == MP_RUNNING)
            return m->procs[i];
    return NULL;
}

/* The ids of a process that exec's again (a chain of execs, a PATH search)
 * from its record, without reading /proc: tid is a running record's pid and
 * that process has not ended (its pidfd is not readable; a pid is reused
 * only after the end). -1 when unknown, with *stale set when the record is
 * of an ended process whose pid tid now is. */
static int known_ids(lis_monitor *m, pid_t tid, mon_pstatus *st, pid_t *nsppid, int *stale)
{
    pthread_mutex_lock(&m->mu);
    mon_proc *prev = running_proc(m, tid);
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

/* What an exec read: kept in a record, or why it could not be read. */
struct exec_read {
    char path[MON_PATH_MAX + 64];
    int path_cut;
    char argv[MON_ARGV_BYTES];
    size_t argv_len, argc, argc_total;
    int argv_cut;
    char unread[96];
    char via[24];
};

/* The arguments named by ptrs[0..n) (up to a NULL) appended to x->argv:
 * the first chunk of each in one read, and only an argument that runs past
 * its chunk (or that the read did not reach) read on its own. *end set at
 * the NULL. */
static void read_args(pid_t tid, const uint64_t *ptrs, size_t n, struct exec_read *x, int *end)
{
    static const size_t chunk_cap = MON_ARG_MAX - 1;
    char chunks[MON_RANGES_MAX][MON_ARG_MAX];
    char *outs[MON_RANGES_MAX];
    size_t lens[MON_RANGES_MAX], k = 0;
    while (k < n && k < MON_RANGES_MAX && ptrs[k]) {
        outs[k] = chunks[k];
        lens[k] = mon_chunk_len(ptrs[k], chunk_cap);
        k++;
    }
    *end = k < n && k < MON_RANGES_MAX;
    /* past the caps an argument is only counted: its memory is not read (a
     * hostile argv of 65536 strings costs the hub its pointers only) */
    size_t room_args =
        x->argc < MON_ARGS_MAX && x->argv_len + 2 < sizeof x->argv ? MON_ARGS_MAX - x->argc : 0;
    size_t whole = mon_read_ranges(tid, ptrs, outs, lens, k < room_args ? k : room_args);
    for (size_t i = 0; i < k; i++) {
        x->argc_total++;
        if (x->argc >= MON_ARGS_MAX || x->argv_len + 2 >= sizeof x->argv) {
            x->argv_cut = 1;
            continue;
        }
        size_t room = sizeof x->argv - x->argv_len;
        if (room > MON_ARG_MAX)
            room = MON_ARG_MAX;
        int cut = 0;
        char *at = x->argv + x->argv_len;
        ssize_t len =
            mon_str_from_chunk(tid, ptrs[i], i < whole ? chunks[i] : NULL, lens[i], at, room, &cut);
        if (len < 0) {
            snprintf(at, room, "(unreadable)");
            len = (ssize_t)strlen(at);
        }
        x->argv_cut |= cut;
        x->argv_len += (size_t)len + 1;
        x->argc++;
    }
}

static void read_exec(pid_t tid, const struct seccomp_data *d, struct exec_read *x)
{
    int at = d->nr == SYS_execveat;
    uint64_t path_addr = at ? d->args[1] : d->args[0];
    uint64_t argv_addr = at ? d->args[2] : d->args[1];
    int dirfd = at ? (int)d->args[0] : AT_FDCWD;
    int flags = at ? (int)d->args[4] : 0;
    snprintf(x->via, sizeof x->via, at ? "execveat" : "execve");
    /* the path's first chunk and argv's first pointers in one read */
    char path_chunk[MON_PATH_MAX];
    uint64_t ptrs[MON_RANGES_MAX];
    uint64_t addrs[2] = {path_addr, argv_addr};
    char *outs[2] = {path_chunk, (char *)ptrs};
    size_t lens[2] = {mon_chunk_len(path_addr, MON_PATH_MAX - 1), sizeof ptrs};
    size_t whole = path_addr && argv_addr ? mon_read_ranges(tid, addrs, outs, lens, 2) : 0;
    char raw[MON_PATH_MAX];
    ssize_t n = path_addr ? mon_str_from_chunk(tid, path_addr, whole ? path_chunk : NULL, lens[0],
                                               raw, sizeof raw, &x->path_cut)
                          : (errno = EFAULT, -1);
    if (n < 0) {
        snprintf(x->unread, sizeof x->unread, "path unreadable: %s", strerror(errno));
        raw[0] = 0;
    }
    /* make it absolute from the process's own links (their text only) */
    char base[512] = "";
    if (n == 0 && at && (flags & AT_EMPTY_PATH)) {
        char what[32];
        snprintf(what, sizeof what, "fd/%d", dirfd);
        snprintf(x->via, sizeof x->via, "execveat(fd)");
        if (mon_read_link(tid, what, base, sizeof base) < 0)
            snprintf(base, sizeof base, "fd %d", dirfd);
        snprintf(x->path, sizeof x->path, "%s", base);
    } else if (n > 0 && raw[0] != '/') {
        if (dirfd == AT_FDCWD) {
            if (mon_read_link(tid, "cwd", base, sizeof base) < 0)
                base[0] = 0;
        } else {
            char what[32];
            snprintf(what, sizeof what, "fd/%d", dirfd);
            if (mon_read_link(tid, what, base, sizeof base) < 0)
                snprintf(base, sizeof base, "fd %d", dirfd);
        }
        snprintf(x->path, sizeof x->path, "%s%s%s", base, base[0] && strcmp(base, "/") ? "/" : "",
                 raw);
    } else {
        snprintf(x->path, sizeof x->path, "%s", raw);
    }
    /* argv: the pointers, then the strings, both capped */
    for (size_t base_i = 0; argv_addr && base_i < MON_ARGC_COUNT; base_i += MON_RANGES_MAX) {
        ssize_t got = base_i == 0 && whole == 2
                          ? MON_RANGES_MAX
                          : mon_read_words(tid, argv_addr + base_i * 8, ptrs, MON_RANGES_MAX);
        if (got <= 0) {
            if (!base_i)
                snprintf(x->unread, sizeof x->unread, "argv unreadable: %s", strerror(errno));
            break;
        }
        int end = 0;
        read_args(tid, ptrs, (size_t)got, x, &end);
        if (end || got < MON_RANGES_MAX)
            break;
    }
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

static const char *basename_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void on_exec(lis_monitor_hub *hub, lis_monitor *m, const struct seccomp_notif *req)
{
    struct exec_read x;
    memset(&x, 0, sizeof x);
    read_exec((pid_t)req->pid, &req->data, &x);
    mon_pstatus st = {0};
    pid_t known_ppid = 0;
    int stale = 0;
    int have_st = known_ids(m, (pid_t)req->pid, &st, &known_ppid, &stale) == 0 ||
                  mon_read_status((pid_t)req->pid, &st) == 0;
    if (!id_valid(m->listener, req->id))
        return; /* it died meanwhile: what was read may be another process's */
    double now = lis_now();
    char joined[MON_ARGV_BYTES + MON_ARGS_MAX];
    join_argv(x.argv, x.argc, joined, sizeof joined);
    pthread_mutex_lock(&m->mu);
    const mon_rule *r = mon_rules_match(m->policy, MR_EXEC, x.path, joined);
    int deny = r && r->action == LIS_ACT_DENY;
    respond(hub, m->listener, req->id, deny ? EPERM : 0);
    if (r)
        mon_alert_add(m, r, now, "exec %s (%s)", x.path, joined);
    m->step_execs++;
    pid_t tgid = have_st ? st.tgid : (pid_t)req->pid;
    mon_proc *prev = stale && tgid == (pid_t)req->pid ? NULL : running_proc(m, tgid);
    /* a PATH search (execvp) tries each directory with the same argv: only
     * the last try is kept */
    int retry = prev && !deny && !prev->denied[0] && prev->step == m->step &&
                prev->argc == x.argc && prev->argv && x.argv_len &&
                !memcmp(prev->argv, x.argv, x.argv_len) &&
                !strcmp(basename_of(prev->path), basename_of(x.path));
    mon_proc *p = calloc(1, sizeof *p);
    if (p &&
        (m->nprocs >= 2 * MON_STEP_PROCS || LIS_GROW(m->procs, m->capprocs, m->nprocs + 1) < 0)) {
        free(p);
        p = NULL;
    }
    if (p) {
        p->path = strdup(x.path);
        p->argv = malloc(x.argv_len ? x.argv_len : 1);
    }
    if (!p || !p->path || !p->argv) {
        mon_proc_free(p);
        m->step_procs_dropped++;
        pthread_mutex_unlock(&m->mu);
        return;
    }
    memcpy(p->argv, x.argv, x.argv_len);
    p->argc = x.argc;
    p->argc_total = x.argc_total;
    p->argv_cut = x.argv_cut || x.path_cut;
    snprintf(p->unread, sizeof p->unread, "%s", x.unread);
    snprintf(p->via, sizeof p->via, "%s", x.via);
    if (deny)
        snprintf(p->denied, sizeof p->denied, "%s", r->name);
    p->hpid = tgid;
    p->pid = have_st ? st.nspid : 0;
    p->ppid = known_ppid ? known_ppid : have_st ? ns_pid_of(m, st.ppid) : 0;
    p->t_exec = now;
    p->state = MP_RUNNING;
    p->cpu = -1;
    p->step = m->step;
    p->between = !m->in_step;
    p->pidfd = -1;
    if (prev && !deny) {
        /* the same process goes on in the new program: its pidfd moves */
        if (prev->pidfd >= 0) {
            p->pidfd = prev->pidfd;
            p->ref = prev->ref;
            ((hub_ref *)p->ref)->p = p;
            prev->pidfd = -1;
            prev->ref = NULL;
        }
        prev->state = MP_REPLACED;
        prev->t_end = now;
        if (retry) {
            m->exec_retries++;
            prev->reported_end = 1;
            prev->state = MP_REPLACED;
            prev->argc = 0; /* dropped at the step's end, not listed */
            prev->step = -1;
        }
    }
    if (p->pidfd < 0 && !deny)
        proc_watch(hub, m, p);
    if (deny)
        p->state = MP_EXITED, p->exit_code = -1, p->t_end = now; /* it never ran */
    m->procs[m->nprocs++] = p;
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
    pthread_mutex_lock(&m->mu);
    mon_proc *p = running_proc(m, (pid_t)req->pid);
    if (!p) {
        mon_pstatus st;
        if (mon_read_status((pid_t)req->pid, &st) == 0 && st.tgid != (pid_t)req->pid)
            p = running_proc(m, st.tgid);
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
    hub->epfd = hub->wakefd = -1;
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
    if (!hub->req || !hub->resp) {
        lis_oom(err);
        goto fail;
    }
    hub->epfd = epoll_create1(EPOLL_CLOEXEC);
    hub->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    hub->wake_ref.kind = REF_WAKE;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &hub->wake_ref};
    if (hub->epfd < 0 || hub->wakefd < 0 ||
        epoll_ctl(hub->epfd, EPOLL_CTL_ADD, hub->wakefd, &ev) < 0) {
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
