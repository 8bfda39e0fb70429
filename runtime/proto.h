/* proto.h - the wire protocol between the owner and a sandbox's lis-init.
 *
 * Lifeline (SOCK_SEQPACKET, owner <-> PID 1): set-up sync, READY, and one
 * CONN message per command carrying a fresh stream socket (ephemeral
 * sandboxes). EOF on it means the owner is gone: PID 1 kills the sandbox,
 * unless the sandbox persists.
 * Persistent sandboxes also listen on <run_dir>/<name>/ctl.sock; each
 * accepted connection is one command.
 *
 * On a command connection (SOCK_STREAM) the client sends one lis_req_hdr with
 * up to 3 fds (stdin, stdout, stderr) as SCM_RIGHTS, then payload_len bytes:
 * cwd\0 argv[0]\0 ... env[0]\0 ...; the sandbox answers with lis_msg records.
 */
#ifndef LIS_PROTO_H
#define LIS_PROTO_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define LIS_PROTO_MAGIC 0x3153494cu /* "LIS1" */
#define LIS_PAYLOAD_MAX (8u << 20)
#define LIS_ARGS_MAX 65536u

enum {
    LIS_REQ_PTY = 1u << 0,
    LIS_REQ_HAVE_STDIN = 1u << 1, /* fds present, in order, per flag */
    LIS_REQ_HAVE_STDOUT = 1u << 2,
    LIS_REQ_HAVE_STDERR = 1u << 3,
};

struct lis_req_hdr {
    uint32_t magic;
    uint32_t flags;
    uint32_t argc, envc;
    int64_t timeout_ms; /* 0: none */
    uint32_t payload_len;
    uint16_t rows, cols;
};

enum {
    /* owner -> init on the lifeline */
    LIS_MSG_GO = 1,  /* id maps written, continue set-up */
    LIS_MSG_CONN,    /* fd attached: a command connection */
    LIS_MSG_PERSIST, /* keep running when the lifeline closes */
    /* init -> owner on the lifeline */
    LIS_MSG_SETUP_ERR, /* a = errno, text = what failed */
    LIS_MSG_READY,     /* PID 1 is serving */
    /* sandbox -> client on a command connection */
    LIS_MSG_STARTED,  /* a = pid inside the sandbox */
    LIS_MSG_PTY,      /* fd attached: the pty master */
    LIS_MSG_EXEC_ERR, /* a = errno, text = stage */
    LIS_MSG_EXITED,   /* a = wait status, b = 1 when killed by the timeout */
    /* client -> sandbox on a command connection */
    LIS_MSG_SIGNAL, /* a = signal for the command's process group */
    /* set-up child -> owner on the lifeline, before READY (spec.listen_port) */
    LIS_MSG_LISTENER_FD, /* fd attached: the listener on 127.0.0.1:listen_port */
    /* PID 1 -> owner on the lifeline, right before READY (spec.monitor) */
    LIS_MSG_MONITOR_FD, /* fd attached: PID 1's seccomp user-notification listener */
};

struct lis_msg {
    uint32_t type;
    int32_t a;
    int64_t b;
    char text[240];
};

/* Sends one record of len bytes with up to 4 fds attached (SCM_RIGHTS);
 * flags are added to MSG_NOSIGNAL. Returns what sendmsg returned.
 * Allocates nothing. */
static inline ssize_t lis_send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds,
                                   int flags)
{
    struct iovec iov = {(void *)buf, len};
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 4) {
        errno = EINVAL;
        return -1;
    }
    if (nfds > 0) {
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    return sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
}

/* Sends one lis_msg (text truncated to fit), with fd attached when fd >= 0;
 * flags are added to MSG_NOSIGNAL (e.g. MSG_DONTWAIT). Allocates nothing, so
 * the clone child and lis-init use it too. Returns 0, or -1 with errno. */
static inline int lis_msg_send_flags(int sock, uint32_t type, int32_t a, int64_t b,
                                     const char *text, int fd, int flags)
{
    struct lis_msg m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.a = a;
    m.b = b;
    if (text)
        strncpy(m.text, text, sizeof m.text - 1);
    ssize_t n = lis_send_fds(sock, &m, sizeof m, &fd, fd >= 0 ? 1 : 0, flags);
    if (n >= 0 && n != (ssize_t)sizeof m)
        errno = EIO;
    return n == (ssize_t)sizeof m ? 0 : -1;
}

static inline int lis_msg_send(int sock, uint32_t type, int32_t a, int64_t b, const char *text,
                               int fd)
{
    return lis_msg_send_flags(sock, type, a, b, text, fd, 0);
}

/* Receives one record of len bytes and up to maxfds fds passed with it
 * (close-on-exec; unused slots -1, extra fds closed). Returns what recvmsg
 * returned. Allocates nothing. */
static inline ssize_t lis_recv_fds(int sock, void *buf, size_t len, int *fds, int maxfds, int flags)
{
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {buf, len};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = u.buf,
                        .msg_controllen = sizeof u.buf};
    for (int i = 0; i < maxfds; i++)
        fds[i] = -1;
    ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
    for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int got = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)), passed[4];
        memcpy(passed, CMSG_DATA(c), (size_t)got * sizeof(int));
        for (int i = 0; i < got; i++) {
            if (i < maxfds)
                fds[i] = passed[i];
            else
                close(passed[i]);
        }
    }
    return n;
}

#endif
