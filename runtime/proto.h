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

#define LIS_PROTO_MAGIC 0x3153494cu /* "LIS1" */
#define LIS_PAYLOAD_MAX (8u << 20)
#define LIS_ARGS_MAX 65536u

enum {
    LIS_REQ_PTY = 1u << 0,
    LIS_REQ_HAVE_STDIN = 1u << 1,  /* fds present, in order, per flag */
    LIS_REQ_HAVE_STDOUT = 1u << 2,
    LIS_REQ_HAVE_STDERR = 1u << 3,
};

struct lis_req_hdr {
    uint32_t magic;
    uint32_t flags;
    uint32_t argc, envc;
    int64_t timeout_ms;  /* 0: none */
    uint32_t payload_len;
    uint16_t rows, cols;
};

enum {
    /* owner -> init on the lifeline */
    LIS_MSG_GO = 1,      /* id maps written, continue set-up */
    LIS_MSG_CONN,        /* fd attached: a command connection */
    LIS_MSG_PERSIST,     /* keep running when the lifeline closes */
    /* init -> owner on the lifeline */
    LIS_MSG_SETUP_ERR,   /* a = errno, text = what failed */
    LIS_MSG_READY,       /* PID 1 is serving */
    /* sandbox -> client on a command connection */
    LIS_MSG_STARTED,     /* a = pid inside the sandbox */
    LIS_MSG_PTY,         /* fd attached: the pty master */
    LIS_MSG_EXEC_ERR,    /* a = errno, text = stage */
    LIS_MSG_EXITED,      /* a = wait status, b = 1 when killed by the timeout */
    /* client -> sandbox on a command connection */
    LIS_MSG_SIGNAL,      /* a = signal for the command's process group */
    /* set-up child -> owner on the lifeline, before READY (--net proxy) */
    LIS_MSG_PROXY_FD,    /* fd attached: the listener on 127.0.0.1:LIS_PROXY_PORT */
};

#define LIS_PROXY_PORT 3128

struct lis_msg {
    uint32_t type;
    int32_t a;
    int64_t b;
    char text[240];
};

/* Sends one lis_msg (text truncated to fit), with fd attached when fd >= 0.
 * Allocates nothing, so the clone child and lis-init use it too.
 * Returns 0, or -1 with errno. */
static inline int lis_msg_send(int sock, uint32_t type, int32_t a, int64_t b, const char *text,
                               int fd)
{
    struct lis_msg m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.a = a;
    m.b = b;
    if (text)
        strncpy(m.text, text, sizeof m.text - 1);
    struct iovec iov = {&m, sizeof m};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof u.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
    if (n >= 0 && n != (ssize_t)sizeof m)
        errno = EIO;
    return n == (ssize_t)sizeof m ? 0 : -1;
}

#endif
