/* proxyd.c - `lis proxyd RUN_DIR`, the per-user daemon that serves the
 * proxy of persistent sandboxes (they outlive their creator), and its
 * control protocol on <run_dir>/proxyd.sock (SOCK_SEQPACKET, one request and
 * one answer per connection; struct pxd_msg in net.h): REGISTER hands over a
 * sandbox's listener, the pidfd of its PID 1 and its rules, STATS reads its
 * counters. The creator starts the daemon on demand; it drops a sandbox when
 * its pidfd fires and exits once it has served none for PROXYD_IDLE seconds. */
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- the client side: the creator and the readers of counters ---- */

static void sock_path(const char *run_dir, const char *file, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", run_dir, file);
}

static int net_pxd_connect(const char *run_dir)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    char path[PATH_MAX];
    sock_path(run_dir, "proxyd.sock", path, sizeof path);
    if (strlen(path) >= sizeof a.sun_path)
        return -ENAMETOOLONG;
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* One request, one answer. */
static int net_pxd_call(int fd, const struct pxd_msg *m, const char *payload, const int *fds,
                        int nfds, struct pxd_msg *ans)
{
    struct iovec iov[2] = {{(void *)m, sizeof *m}, {(void *)payload, m->len}};
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = m->len ? 2 : 1};
    if (nfds) {
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    if (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0)
        return -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 5000) <= 0)
        return -1;
    ssize_t n = recv(fd, ans, sizeof *ans, 0);
    return n == (ssize_t)sizeof *ans && ans->magic == PXD_MAGIC ? 0 : -1;
}

int net_proxyd_stats(const char *run_dir, const char *name, lis_net_counters *c)
{
    int fd = net_pxd_connect(run_dir);
    if (fd < 0)
        return -1;
    struct pxd_msg m = {.magic = PXD_MAGIC, .type = PXD_STATS}, ans;
    snprintf(m.name, sizeof m.name, "%s", name);
    int rc = -1;
    if (net_pxd_call(fd, &m, NULL, NULL, 0, &ans) == 0 && ans.type == PXD_OK) {
        c->requests = ans.requests;
        c->denied = ans.denied;
        c->bytes_in = ans.bytes_in;
        c->bytes_out = ans.bytes_out;
        rc = 0;
    }
    close(fd);
    return rc;
}

/* The lis binary that serves `lis proxyd`. */
static int proxyd_exe(lis_ctx *ctx, char *out, size_t len)
{
    const char *env = getenv("LIS_PROXYD_EXE");
    if (env && *env && access(env, X_OK) == 0) {
        snprintf(out, len, "%s", env);
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        const char *base = strrchr(self, '/');
        if (base && !strcmp(base + 1, "lis")) {
            snprintf(out, len, "%s", self);
            return 0;
        }
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", lis_ctx_init_path(ctx));
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    static const char *const rel[] = {"lis", "../lis", "../bin/lis", "../../bin/lis"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char cand[2 * PATH_MAX];
        snprintf(cand, sizeof cand, "%s/%s", slash ? dir : ".", rel[i]);
        if (access(cand, X_OK) == 0 && strlen(cand) < len) {
            snprintf(out, len, "%s", cand);
            return 0;
        }
    }
    return -1;
}

static int spawn_proxyd(lis_ctx *ctx, lis_error *err)
{
    char exe[PATH_MAX];
    if (proxyd_exe(ctx, exe, sizeof exe) < 0)
        return lis_fail(err, ENOENT,
                        "persistent --net proxy sandboxes are served by `lis proxyd`, "
                        "but the lis binary was not found next to %s (set LIS_PROXYD_EXE)",
                        lis_ctx_init_path(ctx));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    for (int fd = 0; fd < 3; fd++)
        posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", O_RDWR, 0);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char run_dir[PATH_MAX];
    snprintf(run_dir, sizeof run_dir, "%s", lis_ctx_run_dir(ctx));
    char *argv[] = {"lis", "proxyd", run_dir, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, exe, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc)
        return lis_fail_errnum(err, rc, "starting %s proxyd", exe);
    /* It forks the daemon once it listens, then exits. */
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return 0;
}

int net_proxyd_register(lis_ctx *ctx, lis_sandbox *sb, const lis_net_rules *spec, int listen_fd,
                        lis_error *err)
{
    lis_netrules check;
    if (lis_netrules_init(&check, spec->allow_domains, spec->deny_domains, 0, err) < 0)
        return -1;
    lis_netrules_free(&check);
    struct pxd_msg m = {.magic = PXD_MAGIC, .type = PXD_REGISTER};
    snprintf(m.name, sizeof m.name, "%s", lis_sandbox_name(sb));
    if (spec->allow_host_network)
        m.flags |= PXD_ALLOW_HOST_NETWORK;
    char *payload = malloc(PXD_PAYLOAD_MAX), *o = payload;
    if (!payload)
        return lis_oom(err);
    const char *const *lists[2] = {spec->allow_domains, spec->deny_domains};
    uint32_t *counts[2] = {&m.nallow, &m.ndeny};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; lists[k] && lists[k][i]; i++) {
            size_t n = strlen(lists[k][i]) + 1;
            if ((size_t)(o - payload) + n > PXD_PAYLOAD_MAX) {
                free(payload);
                return lis_fail(err, E2BIG, "too many --allow-domain/--deny-domain rules");
            }
            memcpy(o, lists[k][i], n);
            o += n;
            (*counts[k])++;
        }
    m.len = (uint32_t)(o - payload);
    int fds[2] = {listen_fd, lis_sandbox_pidfd(sb)};
    for (int attempt = 0; attempt < 150; attempt++) {
        int fd = net_pxd_connect(lis_ctx_run_dir(ctx));
        if (fd >= 0) {
            struct pxd_msg ans;
            int rc = net_pxd_call(fd, &m, payload, fds, 2, &ans);
            close(fd);
            if (rc == 0) {
                free(payload);
                if (ans.type == PXD_OK)
                    return 0;
                ans.text[sizeof ans.text - 1] = 0;
                return lis_fail(err, EPROTO, "the proxy daemon refused sandbox %s: %s",
                                lis_sandbox_name(sb), ans.text);
            }
            /* a daemon on its way out: start another */
        }
        /* None listening (or one exiting, which still holds the lock for a
         * moment): start one, at most every 100 ms. */
        if (attempt % 5 == 0 && spawn_proxyd(ctx, err) < 0) {
            free(payload);
            return -1;
        }
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    free(payload);
    return lis_fail(err, ETIMEDOUT, "cannot reach the proxy daemon at %s/proxyd.sock",
                    lis_ctx_run_dir(ctx));
}

/* ---- the daemon ---- */

static void ctl_handle_any(lis_proxy *px, void *cc);

void net_ctl_accept(lis_proxy *px)
{
    for (;;) {
        int fd = accept4(px->ctl_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        ctl_client *cc = calloc(1, sizeof *cc);
        if (!cc) {
            close(fd);
            return;
        }
        cc->ref = (ep_ref){R_CTL, cc};
        cc->fd = fd;
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &cc->ref};
        if (epoll_ctl(px->epfd, EPOLL_CTL_ADD, fd, &e) < 0) { /* the client sees EOF */
            close(fd);
            free(cc);
            return;
        }
    }
}

void net_ctl_handle(lis_proxy *px, ctl_client *cc)
{
    struct {
        struct pxd_msg m;
        char payload[PXD_PAYLOAD_MAX + 1];
    } *in = malloc(sizeof *in);
    int fds[2] = {-1, -1}, nfds = 0;
    ssize_t n = -1;
    if (in) {
        union {
            char buf[CMSG_SPACE(2 * sizeof(int))];
            struct cmsghdr align;
        } u;
        struct iovec iov = {in, sizeof in->m + PXD_PAYLOAD_MAX};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = u.buf,
                            .msg_controllen = sizeof u.buf};
        n = recvmsg(cc->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                if (nfds > 2) {
                    for (int i = 2; i < nfds; i++) {
                        int extra;
                        memcpy(&extra, CMSG_DATA(c) + i * sizeof(int), sizeof extra);
                        close(extra);
                    }
                    nfds = 2;
                }
                memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
            }
    }
    if (n < 0 && errno == EAGAIN) {
        free(in);
        return; /* not there yet */
    }
    struct pxd_msg ans = {.magic = PXD_MAGIC, .type = PXD_ERR};
    if (n >= (ssize_t)sizeof in->m && in->m.magic == PXD_MAGIC &&
        in->m.len <= (size_t)n - sizeof in->m) {
        in->m.name[sizeof in->m.name - 1] = 0;
        if (in->m.type == PXD_REGISTER && nfds == 2) {
            /* allow..., deny... as NUL-terminated strings */
            size_t total = in->m.nallow + in->m.ndeny;
            const char **list = calloc(total + 2, sizeof *list);
            char *p = in->payload, *end = in->payload + in->m.len;
            *end = 0;
            size_t k = 0;
            while (list && k < total && p < end) {
                list[k++] = p;
                p += strlen(p) + 1;
            }
            lis_netrules rules;
            lis_error e = {0};
            if (!list || k != total) {
                snprintf(ans.text, sizeof ans.text, "malformed registration");
            } else {
                const char **allow = list, **deny = list + in->m.nallow + 1;
                memmove(deny, list + in->m.nallow, in->m.ndeny * sizeof *list);
                allow[in->m.nallow] = NULL;
                deny[in->m.ndeny] = NULL;
                if (lis_netrules_init(&rules, allow, deny,
                                      (in->m.flags & PXD_ALLOW_HOST_NETWORK) != 0, &e) < 0) {
                    snprintf(ans.text, sizeof ans.text, "%s", e.msg);
                } else {
                    net_port *port = net_port_new(in->m.name, &rules, fds[0], fds[1]);
                    if (!port) {
                        lis_netrules_free(&rules);
                        snprintf(ans.text, sizeof ans.text, "out of memory");
                    } else if (net_port_add(px, port) < 0) {
                        lis_fail_errno(&e, "cannot poll the sandbox's listener");
                        snprintf(ans.text, sizeof ans.text, "%s", e.msg);
                        lis_netrules_free(&port->rules);
                        free(port);
                    } else {
                        fds[0] = fds[1] = -1;
                        ans.type = PXD_OK;
                    }
                }
            }
            free(list);
        } else if (in->m.type == PXD_STATS) {
            for (net_port *p = px->ports; p; p = p->next)
                if (!strcmp(p->name, in->m.name)) {
                    ans.type = PXD_OK;
                    ans.requests = net_load(&p->requests);
                    ans.denied = net_load(&p->denied);
                    ans.bytes_in = net_load(&p->bytes_in);
                    ans.bytes_out = net_load(&p->bytes_out);
                    break;
                }
            if (ans.type != PXD_OK)
                snprintf(ans.text, sizeof ans.text, "no sandbox named %s", in->m.name);
        } else {
            snprintf(ans.text, sizeof ans.text, "bad request");
        }
        send(cc->fd, &ans, sizeof ans, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(in);
    uint32_t polled = EPOLLIN;
    net_unwatch(px, cc->fd, &polled);
    close(cc->fd);
    free(cc); /* one fd, so no other event of this round refers to it */
}

int lis_proxyd_serve(const char *run_dir, lis_error *err)
{
    char lock[PATH_MAX], path[PATH_MAX];
    sock_path(run_dir, "proxyd.lock", lock, sizeof lock);
    sock_path(run_dir, "proxyd.sock", path, sizeof path);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return lis_fail(err, ENAMETOOLONG, "socket path too long: %s", path);
    strcpy(a.sun_path, path);
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lfd < 0)
        return lis_fail_errno(err, "open %s", lock);
    if (flock(lfd, LOCK_EX | LOCK_NB) < 0) {
        close(lfd);
        return 0; /* another daemon serves this run dir */
    }
    int sfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sfd < 0) {
        close(lfd);
        return lis_fail_errno(err, "socket");
    }
    unlink(path);
    mode_t old = umask(077);
    int brc = bind(sfd, (struct sockaddr *)&a, sizeof a);
    umask(old);
    if (brc < 0 || listen(sfd, 256) < 0) {
        int e = errno;
        close(sfd);
        close(lfd);
        return lis_fail_errnum(err, e, "listening on %s", path);
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        unlink(path);
        close(sfd);
        close(lfd);
        return lis_fail_errnum(err, e, "fork");
    }
    if (pid > 0)
        _exit(0); /* the starter waits for this; the daemon is reparented */
    setsid();
    if (ftruncate(lfd, 0) == 0)
        dprintf(lfd, "%d\n", (int)getpid()); /* for ps and the benchmark */
    if (chdir("/") < 0) {
        /* stays in the run dir's parent; harmless */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    lis_proxy *px = net_proxy_new(1, err);
    if (!px) {
        unlink(path);
        _exit(1);
    }
    px->ctl_fd = sfd;
    px->on_ctl_accept = net_ctl_accept;
    px->on_ctl = ctl_handle_any;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &px->ctl_ref};
    if (epoll_ctl(px->epfd, EPOLL_CTL_ADD, sfd, &e) < 0) { /* the starter sees no daemon */
        unlink(path);
        _exit(1);
    }
    for (;;) {
        net_proxy_step(px, 1000);
        if (!px->nports && !px->nconns && lis_now() - px->idle_since > PROXYD_IDLE)
            break;
    }
    /* New clients now fail to connect and start a fresh daemon, which waits
     * for our lock only as long as the exit below takes. */
    unlink(path);
    net_proxy_free(px);
    _exit(0);
}

static void ctl_handle_any(lis_proxy *px, void *cc) { net_ctl_handle(px, cc); }
