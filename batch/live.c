/* live.c - a running lis batch seen and steered from outside, over HTTP
 * (libmicrohttpd) on the batch's own event loop: no thread of its own, each
 * daemon's epoll fd sits in the loop's set and MHD_run does one non-blocking
 * round. Two daemons:
 *  - the control socket DIR/ctl.sock (`lis batch ctl`, ctl.c): a unix socket
 *    of mode 0600 whose connections lis accepts itself and hands to
 *    libmicrohttpd only when the peer is the run's own user (SO_PEERCRED);
 *    GET /status, POST /pause|/resume|/stop with {"ids": [...]};
 *  - with --live, the report page on 127.0.0.1 (a free port by default),
 *    the owner's alone: every request carries the run's secret token (in the
 *    printed URL, in DIR/live.url of mode 0600, then in a cookie the page
 *    keeps), else 401; a connection from another local user is answered 403
 *    (its uid read from /proc/net/tcp). Read-only (GET and HEAD), connections
 *    limited per client uid (LIVE_CONNS for the owner, LIVE_CONNS_OTHER for
 *    each other user, so that another user's half-open connections cannot
 *    keep the owner out), LIVE_CONN_MEM bytes each, a Host header naming the
 *    listener (no DNS rebinding), serving the page (report_page.html in live
 *    mode), the index
 *    it polls (/live.json: the rows of results.jsonl so far, read
 *    incrementally, the running episodes with their last step, command and
 *    effects, the latest alerts) and each finished episode (/report/ep-N.js).
 * Without --live nothing listens on the network. The episodes' own proxy
 * refuses loopback unless --allow-host-network; with it, the token keeps
 * them out (they never see it: it is in the run directory and on stderr). */
#include "engine.h"
#include "report.h"
#include "results_io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CTL_BODY_MAX (64u << 10)  /* a ctl request's body */
#define CTL_CONNS 8               /* ctl connections at once */
#define LIVE_CONNS 16             /* the owner's live view connections at once */
#define LIVE_CONNS_OTHER 2        /* each other client's (each is answered 403) */
#define LIVE_CONNS_ALL 64         /* all clients' together */
#define LIVE_TOKEN_HEX 32         /* the secret: 16 random bytes */
#define NET_TCP_LINES 1000000     /* /proc/net/tcp lines read to find a peer */
#define LIVE_CONN_MEM (32u << 10) /* libmicrohttpd's memory per connection */
#define ROWS_LINE_MAX (16u << 20) /* a results.jsonl line the live view reads */
#define LIVE_ROWS_MAX 100000      /* rows the live view keeps in its index */

enum { W_CTL_LISTEN = 0, W_CTL_MHD, W_WEB_MHD, W_WEB_LISTEN };

typedef struct live_conn {
    int fd;
    uid_t uid; /* the peer's, (uid_t)-1 when not found */
} live_conn;

typedef struct live_row {
    off_t off; /* the line in results.jsonl */
    size_t len;
} live_row;

typedef struct blive {
    brun *r;
    int dfd;    /* the run directory */
    int ctl_fd; /* the listening control socket */
    struct MHD_Daemon *ctl, *web;
    int web_fd; /* the live view's listener, accepted here */
    unsigned short port;
    char token[LIVE_TOKEN_HEX + 1];
    char cookie[32]; /* lis_live_PORT: one per port (cookies ignore ports) */
    char url[128];
    live_conn conns[LIVE_CONNS_ALL];
    size_t nconns;
    /* results.jsonl read so far */
    int rfd;
    off_t roff;
    strbuf part;  /* a last line not yet whole */
    cJSON *index; /* the finished rows' index entries */
    live_row *rows;
    size_t nrows, caprows;
} blive;

typedef struct ctl_req {
    strbuf body;
    int too_big;
} ctl_req;

/* ---- replies ------------------------------------------------------------ */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             char *body)
{
    if (!body)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, cJSON *j)
{
    char *t = j ? lis_json_print(j, 0) : NULL;
    cJSON_Delete(j);
    return reply(c, status, "application/json", t);
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "error", msg);
    return reply_json(c, status, j);
}

/* ---- the control socket ----------------------------------------------- */

static enum MHD_Result ctl_handler(void *cls, struct MHD_Connection *c, const char *url,
                                   const char *method, const char *version, const char *upload,
                                   size_t *upload_size, void **con_cls)
{
    blive *L = cls;
    ctl_req *q = *con_cls;
    if (!q) {
        if (!(q = calloc(1, sizeof *q)))
            return MHD_NO;
        *con_cls = q;
        return MHD_YES;
    }
    if (*upload_size) {
        if (q->body.len + *upload_size > CTL_BODY_MAX)
            q->too_big = 1;
        else
            strbuf_putn(&q->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (q->too_big)
        return reply_error(c, 413, "the request body is larger than 64 KiB");
    if (!strcmp(url, "/status")) {
        if (strcmp(method, "GET"))
            return reply_error(c, 405, "GET /status");
        return reply_json(c, 200, bctl_status(L->r));
    }
    const char *verb = url[0] == '/' ? url + 1 : url;
    if (strcmp(verb, "pause") && strcmp(verb, "resume") && strcmp(verb, "stop"))
        return reply_error(c, 404, "unknown command: GET /status, POST /pause|/resume|/stop");
    if (strcmp(method, "POST"))
        return reply_error(c, 405, "POST /pause|/resume|/stop with {\"ids\": [...]}");
    cJSON *b = q->body.len ? cJSON_ParseWithLength(q->body.s, q->body.len) : cJSON_CreateObject();
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(b, "ids");
    int ok = cJSON_IsObject(b) && (!ids || cJSON_IsArray(ids));
    const cJSON *id;
    cJSON_ArrayForEach(id, ids) ok &= cJSON_IsString(id);
    enum MHD_Result rc = ok ? reply_json(c, 200, bctl_command(L->r, verb, ids))
                            : reply_error(c, 400, "the body must be {\"ids\": [\"ID\", ...]}");
    cJSON_Delete(b);
    return rc;
}

static void req_done(void *cls, struct MHD_Connection *c, void **con_cls,
                     enum MHD_RequestTerminationCode why)
{
    ctl_req *q = *con_cls;
    if (q) {
        strbuf_release(&q->body);
        free(q);
    }
    *con_cls = NULL;
}

/* The run directory's DIR/ctl.sock, whatever the length of DIR: bound
 * through /proc/self/fd/N (sun_path holds 108 bytes), made under a
 * temporary name, given mode 0600, then renamed into place. */
static int ctl_listen(blive *L, lis_error *err)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".ctl.sock.%d", (int)getpid());
    unlinkat(L->dfd, tmp, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "/proc/self/fd/%d/%s", L->dfd, tmp);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return lis_fail_errno(err, "the control socket");
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || fchmodat(L->dfd, tmp, 0600, 0) < 0 ||
        listen(fd, CTL_CONNS) < 0 || renameat(L->dfd, tmp, L->dfd, "ctl.sock") < 0) {
        int e = errno;
        close(fd);
        unlinkat(L->dfd, tmp, 0);
        return lis_fail_errnum(err, e, "the control socket %s/ctl.sock", batch_out_dir(L->r->out));
    }
    L->ctl_fd = fd;
    return 0;
}

/* A connection to the control socket: the run's own user only. */
static void ctl_accept(blive *L)
{
    for (;;) {
        int c = accept4(L->ctl_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0)
            return;
        struct ucred cr;
        socklen_t n = sizeof cr;
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &n) < 0 || cr.uid != geteuid()) {
            close(c);
            continue;
        }
        /* MHD_add_connection closes the socket itself when it fails */
        MHD_add_connection(L->ctl, c, (struct sockaddr *)&a, sizeof(sa_family_t));
    }
}

/* ---- the live view ------------------------------------------------------ */

/* The uid owning the other end of a loopback TCP connection: the line of
 * /proc/net/tcp (this network namespace's) whose local address is the
 * peer's and remote address ours; (uid_t)-1 when not found. */
static uid_t peer_uid(int fd)
{
    struct sockaddr_in me, peer;
    socklen_t l1 = sizeof me, l2 = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&me, &l1) < 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &l2) < 0 || peer.sin_family != AF_INET)
        return (uid_t)-1;
    char want_l[32], want_r[32], line[512];
    /* the kernel prints the address as the raw 32-bit value in hex */
    snprintf(want_l, sizeof want_l, "%08X:%04X", (unsigned)peer.sin_addr.s_addr,
             ntohs(peer.sin_port));
    snprintf(want_r, sizeof want_r, "%08X:%04X", (unsigned)me.sin_addr.s_addr, ntohs(me.sin_port));
    FILE *f = fopen("/proc/net/tcp", "re");
    if (!f)
        return (uid_t)-1;
    uid_t uid = (uid_t)-1;
    for (long i = 0; i < NET_TCP_LINES && fgets(line, sizeof line, f); i++) {
        char la[64], ra[64];
        unsigned st, u;
        if (sscanf(line, " %*u: %63s %63s %x %*s %*s %*s %u", la, ra, &st, &u) == 4 &&
            !strcmp(la, want_l) && !strcmp(ra, want_r)) {
            uid = (uid_t)u;
            break;
        }
    }
    fclose(f);
    return uid;
}

static size_t conns_of(const blive *L, uid_t uid)
{
    size_t n = 0;
    for (size_t i = 0; i < L->nconns; i++)
        n += L->conns[i].uid == uid;
    return n;
}

static live_conn *conn_find(blive *L, int fd)
{
    for (size_t i = 0; i < L->nconns; i++)
        if (L->conns[i].fd == fd)
            return &L->conns[i];
    return NULL;
}

static void conn_drop(blive *L, int fd)
{
    live_conn *c = conn_find(L, fd);
    if (c)
        *c = L->conns[--L->nconns];
}

/* A connection to the live view: counted against its client's own share. */
static void live_accept(blive *L)
{
    for (;;) {
        struct sockaddr_in a;
        socklen_t al = sizeof a;
        int c = accept4(L->web_fd, (struct sockaddr *)&a, &al, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0)
            return;
        uid_t uid = peer_uid(c);
        size_t cap = uid == geteuid() ? LIVE_CONNS : LIVE_CONNS_OTHER;
        if (L->nconns >= LIVE_CONNS_ALL || conns_of(L, uid) >= cap) {
            close(c);
            continue;
        }
        L->conns[L->nconns++] = (live_conn){c, uid};
        if (MHD_add_connection(L->web, c, (struct sockaddr *)&a, al) != MHD_YES)
            conn_drop(L, c); /* closed by libmicrohttpd */
    }
}

static void live_conn_note(void *cls, struct MHD_Connection *c, void **socket_context,
                           enum MHD_ConnectionNotificationCode toe)
{
    blive *L = cls;
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED && i)
        conn_drop(L, i->connect_fd);
}

/* Equal without a timing that tells how much of the token matched. */
static int token_eq(const char *a, const char *b)
{
    if (!a || strlen(a) != LIVE_TOKEN_HEX)
        return 0;
    unsigned char d = 0;
    for (size_t i = 0; i < LIVE_TOKEN_HEX; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

/* 0: the owner with the token; else the status to answer (401, 403). */
static unsigned live_auth(blive *L, struct MHD_Connection *c, int *from_url)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const live_conn *lc = i ? conn_find(L, i->connect_fd) : NULL;
    if (!lc || (lc->uid != geteuid() && lc->uid != (uid_t)-1))
        return 403;
    *from_url = token_eq(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token"), L->token);
    if (*from_url || token_eq(MHD_lookup_connection_value(c, MHD_COOKIE_KIND, L->cookie), L->token))
        return 0;
    return 401;
}

/* What results.jsonl gained since the last look: whole lines only. */
static void rows_update(blive *L)
{
    if (L->rfd < 0)
        L->rfd = openat(L->dfd, "results.jsonl", O_RDONLY | O_CLOEXEC);
    if (L->rfd < 0)
        return;
    char buf[65536];
    ssize_t n;
    while ((n = pread(L->rfd, buf, sizeof buf, L->roff + (off_t)L->part.len)) > 0) {
        strbuf_putn(&L->part, buf, (size_t)n);
        if (L->part.len > ROWS_LINE_MAX) { /* not a row of ours: skip it */
            L->roff += (off_t)L->part.len;
            strbuf_release(&L->part);
        }
    }
    char *p = L->part.s, *end = p ? p + L->part.len : NULL, *nl;
    while (p && (nl = memchr(p, '\n', (size_t)(end - p)))) {
        size_t len = (size_t)(nl - p);
        cJSON *row = cJSON_ParseWithLength(p, len);
        if (cJSON_IsObject(row) && L->nrows < LIVE_ROWS_MAX &&
            LIS_GROW(L->rows, L->caprows, L->nrows + 1) == 0) {
            cJSON *ix = rp_index_row(row, L->nrows, 0);
            if (ix) {
                cJSON_AddItemToArray(L->index, ix);
                L->rows[L->nrows++] = (live_row){L->roff, len};
            }
        }
        cJSON_Delete(row);
        L->roff += (off_t)(len + 1);
        p = nl + 1;
    }
    if (p && p != L->part.s) { /* keep the partial tail */
        size_t rest = (size_t)(end - p);
        memmove(L->part.s, p, rest);
        L->part.len = rest;
    }
}

static cJSON *live_index(blive *L)
{
    rows_update(L);
    brun *r = L->r;
    cJSON *ix = cJSON_CreateObject();
    cJSON_AddStringToObject(ix, "kind", "batch");
    cJSON_AddBoolToObject(ix, "live", 1);
    cJSON_AddStringToObject(ix, "dir", batch_out_dir(r->out));
    char when[40];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&now, &tm));
    cJSON_AddStringToObject(ix, "generated", when);
    cJSON *cfg = cJSON_AddObjectToObject(ix, "config");
    cJSON_AddStringToObject(cfg, "task", r->task->name ? r->task->name : "");
    cJSON_AddStringToObject(cfg, "llm_name", r->o->llm_name ? r->o->llm_name : "");
    cJSON_AddItemToObject(ix, "rows", cJSON_Duplicate(L->index, 1));
    /* the page's banner: what the run is now, as the terminal says it */
    char paused[320], msg[400];
    size_t np;
    bprog_paused(r, paused, sizeof paused, &np);
    cJSON *run = cJSON_AddObjectToObject(ix, "run");
    int all_paused = np && np == r->live;
    cJSON_AddStringToObject(run, "status", all_paused ? "paused" : "running");
    cJSON_AddNumberToObject(run, "pid", (double)getpid());
    cJSON_AddNumberToObject(run, "rows_asked", (double)r->total);
    cJSON_AddNumberToObject(run, "rows_done", (double)(r->already + r->done));
    snprintf(msg, sizeof msg, "%zu running%s, %zu alert%s%s", r->live, paused, r->nalerts,
             r->nalerts == 1 ? "" : "s",
             r->draining ? (r->cancelling ? ", cancelling" : ", draining") : "");
    cJSON_AddStringToObject(run, "status_message", msg);
    cJSON_AddItemToObject(ix, "status", bctl_status(r));
    return ix;
}

static const char LIVE_CSP_FROM[] = "script-src 'nonce-LIS-NONCE' file:";
static const char LIVE_CSP_TO[] = "script-src 'nonce-LIS-NONCE' 'self'; connect-src 'self'";

/* The report page with the live index and a fresh nonce. */
static char *live_page(blive *L)
{
    cJSON *ix = live_index(L);
    char *json = ix ? rp_json_script(ix) : NULL;
    cJSON_Delete(ix);
    unsigned char rnd[16];
    char nonce[40] = "";
    if (!json || getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        free(json);
        return NULL;
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(nonce + 2 * i, 3, "%02x", rnd[i]);
    strbuf b = {0};
    size_t lm = strlen(RP_PAGE_MARK), ln = strlen(RP_NONCE_MARK), lc = strlen(LIVE_CSP_FROM);
    for (const char *p = rp_page(); *p;) {
        if (!strncmp(p, LIVE_CSP_FROM, lc)) {
            for (const char *q = LIVE_CSP_TO; *q;) { /* with the nonce in it */
                if (!strncmp(q, RP_NONCE_MARK, ln)) {
                    strbuf_puts(&b, nonce);
                    q += ln;
                } else {
                    strbuf_putc(&b, *q++);
                }
            }
            p += lc;
        } else if (!strncmp(p, RP_PAGE_MARK, lm)) {
            strbuf_puts(&b, json);
            p += lm;
        } else if (!strncmp(p, RP_NONCE_MARK, ln)) {
            strbuf_puts(&b, nonce);
            p += ln;
        } else {
            strbuf_putc(&b, *p++);
        }
    }
    free(json);
    return strbuf_take(&b);
}

/* report/ep-N.js of a finished episode, from its files. */
static char *live_episode(blive *L, size_t n)
{
    rows_update(L);
    if (n >= L->nrows)
        return NULL;
    char *line = malloc(L->rows[n].len + 1);
    if (!line || pread(L->rfd, line, L->rows[n].len, L->rows[n].off) != (ssize_t)L->rows[n].len) {
        free(line);
        return NULL;
    }
    cJSON *row = cJSON_ParseWithLength(line, L->rows[n].len);
    free(line);
    char id[BATCH_ID_MAX];
    int attempt;
    if (bo_row_ident(row, id, sizeof id, &attempt) < 0) {
        cJSON_Delete(row);
        return NULL;
    }
    char *key = batch_out_key(id, attempt);
    char tname[4400], lname[4400];
    snprintf(tname, sizeof tname, "trajectories/%s.json", key ? key : "");
    snprintf(lname, sizeof lname, "logs/%s.txt", key ? key : "");
    size_t nfiles;
    cJSON *ep = key ? rp_episode(L->dfd, n, row, id, attempt, tname, lname, key, &nfiles) : NULL;
    free(key);
    cJSON_Delete(row);
    char *json = ep ? rp_json_script(ep) : NULL;
    cJSON_Delete(ep);
    if (!json)
        return NULL;
    strbuf b = {0};
    strbuf_printf(&b, "lisEpisode(%zu,", n);
    strbuf_puts(&b, json);
    strbuf_puts(&b, ");\n");
    free(json);
    return strbuf_take(&b);
}

/* The Host a browser sends for this listener (anything else: DNS rebinding). */
static int host_ok(const blive *L, struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    char a[64], b[64];
    snprintf(a, sizeof a, "127.0.0.1:%u", L->port);
    snprintf(b, sizeof b, "localhost:%u", L->port);
    return h && (!strcmp(h, a) || !strcmp(h, b));
}

static enum MHD_Result web_handler(void *cls, struct MHD_Connection *c, const char *url,
                                   const char *method, const char *version, const char *upload,
                                   size_t *upload_size, void **con_cls)
{
    blive *L = cls;
    if (!*con_cls) { /* the head: refuse what is not a plain read before any body */
        *con_cls = L;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
        if ((strcmp(method, "GET") && strcmp(method, "HEAD")) || (cl && strcmp(cl, "0")) || te)
            return reply_error(c, 405, "the live view is read-only: GET only");
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (!host_ok(L, c))
        return reply_error(c, 403, "the Host header must name this listener");
    int from_url = 0;
    unsigned denied = live_auth(L, c, &from_url);
    if (denied == 403)
        return reply_error(c, 403, "the live view is its owner's alone");
    if (denied)
        return reply_error(c, 401,
                           "the live view needs its token: open the URL lis batch printed "
                           "(also in the run directory's live.url)");
    size_t n;
    char tail[8];
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) {
        char *page = live_page(L);
        struct MHD_Response *r =
            page ? MHD_create_response_from_buffer(strlen(page), page, MHD_RESPMEM_MUST_FREE)
                 : NULL;
        if (!r) {
            free(page);
            return MHD_NO;
        }
        char ck[128];
        /* the page's own requests (live.json, report/ep-N.js) carry it */
        snprintf(ck, sizeof ck, "%s=%s; Path=/; HttpOnly; SameSite=Strict", L->cookie, L->token);
        MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
        MHD_add_response_header(r, "Cache-Control", "no-store");
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
        MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
        if (from_url)
            MHD_add_response_header(r, "Set-Cookie", ck);
        enum MHD_Result rc = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return rc;
    }
    if (!strcmp(url, "/live.json"))
        return reply_json(c, 200, live_index(L));
    if (sscanf(url, "/report/ep-%zu.j%7s", &n, tail) == 2 && !strcmp(tail, "s")) {
        char *js = live_episode(L, n);
        return js ? reply(c, 200, "text/javascript; charset=utf-8", js)
                  : reply_error(c, 404, "no such finished episode");
    }
    return reply_error(c, 404, "not found: /, /live.json, /report/ep-N.js");
}

/* [127.0.0.1:]PORT, or "" for a free port; only loopback. */
static int live_addr(const char *spec, struct sockaddr_in *sa, lis_error *err)
{
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const char *port = spec;
    const char *colon = strrchr(spec, ':');
    if (colon) {
        char host[64];
        snprintf(host, sizeof host, "%.*s", (int)(colon - spec), spec);
        if (strcmp(host, "127.0.0.1") && strcmp(host, "localhost"))
            return lis_fail(err, EINVAL,
                            "--live %s: the live view listens on 127.0.0.1 only (reach it from "
                            "elsewhere with ssh -L)",
                            spec);
        port = colon + 1;
    }
    char *end;
    long p = *port ? strtol(port, &end, 10) : 0;
    if (*port && (*end || p < 0 || p > 65535))
        return lis_fail(err, EINVAL,
                        "--live %s: not a port (0-65535, 0: a free one) or 127.0.0.1:PORT", spec);
    sa->sin_port = htons((unsigned short)p);
    return 0;
}

int blive_check(const char *spec, lis_error *err)
{
    struct sockaddr_in sa;
    return live_addr(spec, &sa, err);
}

static int loop_add(brun *r, int fd, uint64_t which, lis_error *err)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG(K_HTTP, which)};
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return lis_fail_errno(err, "setting up the control socket (epoll_ctl)");
    return 0;
}

static int mhd_fd(struct MHD_Daemon *d)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
    return i ? i->epoll_fd : -1;
}

/* The token, the URL that carries it and DIR/live.url (0600) that keeps it. */
static int live_secret(blive *L, lis_error *err)
{
    unsigned char rnd[LIVE_TOKEN_HEX / 2];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return lis_fail_errno(err, "--live: the token (getrandom)");
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(L->token + 2 * i, 3, "%02x", rnd[i]);
    snprintf(L->cookie, sizeof L->cookie, "lis_live_%u", L->port);
    snprintf(L->url, sizeof L->url, "http://127.0.0.1:%u/?token=%s", L->port, L->token);
    int fd =
        openat(L->dfd, "live.url", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    int ok = fd >= 0 && fchmod(fd, 0600) == 0 && dprintf(fd, "%s\n", L->url) > 0;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (!ok)
        return lis_fail_errnum(err, e, "--live: writing %s/live.url", batch_out_dir(L->r->out));
    return 0;
}

int blive_open(brun *r, lis_error *err)
{
    blive *L = calloc(1, sizeof *L);
    if (!L)
        return lis_oom(err);
    L->r = r;
    L->ctl_fd = L->rfd = L->web_fd = -1;
    r->web = L;
    L->index = cJSON_CreateArray();
    L->dfd = open(batch_out_dir(r->out), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (L->dfd < 0 || !L->index)
        return lis_fail_errno(err, "opening %s", batch_out_dir(r->out));
    if (ctl_listen(L, err) < 0)
        return -1;
    L->ctl =
        MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, ctl_handler, L,
                         MHD_OPTION_NOTIFY_COMPLETED, req_done, L, MHD_OPTION_CONNECTION_LIMIT,
                         (unsigned)CTL_CONNS, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                         MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)LIVE_CONN_MEM, MHD_OPTION_END);
    if (!L->ctl || loop_add(r, L->ctl_fd, W_CTL_LISTEN, err) < 0 ||
        loop_add(r, mhd_fd(L->ctl), W_CTL_MHD, err) < 0)
        return L->ctl ? -1 : lis_fail(err, EIO, "starting the control socket's server");
    if (!r->o->live)
        return 0;
    struct sockaddr_in sa;
    if (live_addr(r->o->live, &sa, err) < 0)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t sl = sizeof sa;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, LIVE_CONNS) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return lis_fail_errnum(err, e, "--live: cannot listen on 127.0.0.1:%u", ntohs(sa.sin_port));
    }
    L->port = ntohs(sa.sin_port);
    L->web_fd = fd;
    L->web =
        MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, web_handler, L,
                         MHD_OPTION_NOTIFY_CONNECTION, live_conn_note, L,
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)LIVE_CONNS_ALL,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                         MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)LIVE_CONN_MEM, MHD_OPTION_END);
    if (!L->web)
        return lis_fail(err, EIO, "--live: cannot start the live view's server");
    if (live_secret(L, err) < 0 || loop_add(r, fd, W_WEB_LISTEN, err) < 0 ||
        loop_add(r, mhd_fd(L->web), W_WEB_MHD, err) < 0)
        return -1;
    fprintf(r->o->err, "lis batch: live view: %s\n", L->url); /* asked for: also with --quiet */
    fflush(r->o->err);
    return 0;
}

void blive_event(brun *r, uint64_t which)
{
    blive *L = r->web;
    if (!L)
        return;
    if (which == W_CTL_LISTEN)
        ctl_accept(L);
    if (L->ctl)
        MHD_run(L->ctl);
    if (which == W_WEB_LISTEN && L->web)
        live_accept(L);
    if ((which == W_WEB_MHD || which == W_WEB_LISTEN) && L->web)
        MHD_run(L->web);
}

void blive_tick(brun *r)
{
    blive *L = r->web;
    if (L && L->ctl)
        MHD_run(L->ctl);
    if (L && L->web)
        MHD_run(L->web);
}

void blive_close(brun *r)
{
    blive *L = r->web;
    if (!L)
        return;
    if (L->web)
        MHD_stop_daemon(L->web);
    if (L->web_fd >= 0) {
        close(L->web_fd);
        unlinkat(L->dfd, "live.url", 0);
    }
    if (L->ctl)
        MHD_stop_daemon(L->ctl);
    if (L->ctl_fd >= 0) {
        close(L->ctl_fd);
        unlinkat(L->dfd, "ctl.sock", 0);
    }
    if (L->rfd >= 0)
        close(L->rfd);
    if (L->dfd >= 0)
        close(L->dfd);
    strbuf_release(&L->part);
    cJSON_Delete(L->index);
    free(L->rows);
    free(L);
    r->web = NULL;
}
