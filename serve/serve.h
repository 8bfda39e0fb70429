/* serve.h - serve/'s internal header (only the serve/ sources include it).
 *
 * Its layers (a file calls only files of lower rows) are the generated tables
 * of docs/architecture.md, checked by scripts/check-layers.py in `make test`.
 * Everything runs on the one loop thread except the jobs (loop.c), which do
 * only the slow runtime calls and hand their result back to the loop. */
#ifndef LIS_SERVE_INTERNAL_H
#define LIS_SERVE_INTERNAL_H

#include "lis.h"
#include "lis_monitor.h"
#include "lis_serve.h"

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#define SV_API_VERSION "1.41"
#define SV_API_MIN "1.24"

/* ---- loop.c ---------------------------------------------------------------- */

typedef struct sv_loop sv_loop;
typedef void (*sv_fd_cb)(void *arg, uint32_t events);
typedef struct sv_watch {
    int fd;
    sv_fd_cb cb;
    void *arg;
    int added;
} sv_watch;
typedef struct sv_timer {
    double when; /* monotonic seconds; 0: not armed */
    void (*cb)(void *arg);
    void *arg;
    struct sv_timer *next;
} sv_timer;

/* What must be closed when the server stops even if nobody ends it (a
 * stream whose client never reads its last bytes): sv_loop_close_all. */
typedef struct sv_closer {
    void (*fn)(void *arg);
    void *arg;
    struct sv_closer *next;
} sv_closer;

sv_loop *sv_loop_new(int workers, lis_error *err);
void sv_loop_free(sv_loop *l);
int sv_loop_watch(sv_loop *l, sv_watch *w, int fd, uint32_t events, sv_fd_cb cb, void *arg);
/* Changes a watched fd's events: 0, or -1 with errno from epoll_ctl. */
int sv_loop_events(sv_loop *l, sv_watch *w, uint32_t events);
void sv_loop_unwatch(sv_loop *l, sv_watch *w);
void sv_timer_arm(sv_loop *l, sv_timer *t, double delay, void (*cb)(void *), void *arg);
void sv_timer_cancel(sv_loop *l, sv_timer *t);
/* Runs fn(arg) after the current batch of events (frees objects safely). */
void sv_loop_defer(sv_loop *l, void (*fn)(void *), void *arg);
/* work(arg) runs on a worker thread, then done(arg, 0) on the loop thread
 * (lis_jobs_submit). */
int sv_job(sv_loop *l, void (*work)(void *), void (*done)(void *, int status), void *arg);
void sv_loop_closer_add(sv_loop *l, sv_closer *c, void (*fn)(void *), void *arg);
void sv_loop_closer_del(sv_loop *l, sv_closer *c);
/* Runs (and forgets) every closer: at shutdown, before the HTTP server stops. */
void sv_loop_close_all(sv_loop *l);
/* One round: waits up to max_ms (-1: timers only) and dispatches. */
int sv_loop_run_once(sv_loop *l, int max_ms);

/* ---- tls.c, certs.c: mutual TLS ------------------------------------------------ */

typedef struct sv_tls {
    char *ca, *cert, *key; /* PEM */
} sv_tls;
/* Reads dir/ca.pem, server-cert.pem, server-key.pem (0600) and checks them. */
int sv_tls_load(const char *dir, sv_tls *t, lis_error *err);
void sv_tls_release(sv_tls *t);
/* GnuTLS credentials (the server's, and the CA its clients must chain to). */
typedef struct sv_tls_ctx sv_tls_ctx;
sv_tls_ctx *sv_tls_ctx_new(const sv_tls *pem, lis_error *err);
void sv_tls_ctx_free(sv_tls_ctx *x);
/* One TCP connection's TLS (takes fd): once the handshake is done and the
 * client's certificate checked, ready(arg, fd2) hands over the plaintext end
 * of the relay; gone(arg) is called when it ends (with or without ready),
 * also from sv_tlsconn_close. NULL (fd closed) without memory. */
typedef struct sv_tlsconn sv_tlsconn;
sv_tlsconn *sv_tlsconn_new(sv_loop *l, sv_tls_ctx *x, int fd, void (*ready)(void *, int),
                           void (*gone)(void *), void *arg);
void sv_tlsconn_close(sv_tlsconn *t);

/* ---- json.c: requests and replies -------------------------------------------- */

typedef struct sv_server sv_server;
typedef struct sv_conn sv_conn;

/* One HTTP request (libmicrohttpd's con_cls). A handler either answers at
 * once (sv_reply*), or suspends the connection and answers later with
 * sv_req_finish from the loop thread. */
typedef struct sv_req {
    sv_server *s;
    struct MHD_Connection *conn;
    char method[8];
    char *path; /* without the /vX.Y prefix */
    char *body;
    size_t len, cap;
    int too_big;
    int suspended;
    struct MHD_Response *resp; /* the deferred answer */
    unsigned status;
    int upgrade;                           /* the request asked for Connection: Upgrade */
    int upgraded;                          /* answered 101: the connection is hijacked */
    size_t body_max;                       /* its route's cap (router.c) */
    sv_conn *cn;                           /* its connection (listen.c); NULL if untracked */
    struct sv_req *next_susp;              /* s->suspended list */
    void (*on_complete)(struct sv_req *q); /* the request is over (freed next) */
    void *owner;
} sv_req;

struct MHD_Response *sv_resp_json(cJSON *doc); /* takes doc */
struct MHD_Response *sv_resp_text(const char *text, const char *ctype);
struct MHD_Response *sv_resp_empty(void);
void sv_resp_headers(struct MHD_Response *r);
/* Queue an answer now; return MHD_YES/NO for the access handler. */
enum MHD_Result sv_reply(sv_req *q, unsigned status, struct MHD_Response *r);
enum MHD_Result sv_reply_json(sv_req *q, unsigned status, cJSON *doc);
enum MHD_Result sv_reply_error(sv_req *q, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
enum MHD_Result sv_reply_status(sv_req *q, unsigned status); /* 204, 304, 200 empty */
/* Deferred answers. */
void sv_req_suspend(sv_req *q);
void sv_req_resume(sv_req *q);
void sv_req_finish(sv_req *q, unsigned status, struct MHD_Response *r);
void sv_req_finish_error(sv_req *q, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *sv_arg(sv_req *q, const char *key);
int sv_arg_bool(sv_req *q, const char *key);          /* moby's BoolValue */
const char *sv_jstr(const cJSON *o, const char *key); /* NULL for missing/null/"" */
int sv_jbool(const cJSON *o, const char *key);
double sv_jnum(const cJSON *o, const char *key);
/* A size: bytes, or "512m", "1g", "64k" (an optional b/ib after the unit);
 * 0 for absent or null, -1 when malformed. */
double sv_jsize(const cJSON *v);
/* {"NAME": "value"} as "NAME=value" strings appended to arr: 0, or -1 (arr
 * unchanged past the bad entry) when v is not such an object (null is fine). */
int sv_env_append(cJSON *arr, const cJSON *v);
/* NULL-terminated string array from a JSON array (or a lone string); NULL if absent. */
char **sv_jstrv(const cJSON *o, const char *key);
char **sv_strv_dup(char *const *v);
size_t sv_strv_len(char *const *v);
void sv_strv_free(char **v);
void sv_rfc3339(double t, char *buf, size_t len);
void sv_hexid(char out[65]);

/* ---- the server ---------------------------------------------------------------- */

typedef struct sv_container sv_container;
typedef struct sv_exec sv_exec;

/* A container's life, in Docker's words (sv_cstate_name, inspect.c). Docker's
 * "paused" is not one of them: it is a running container whose sandbox is
 * paused (sv_container.paused). */
typedef enum sv_cstate {
    SV_CREATED,  /* its sandbox is being made, or made; the main command not started */
    SV_RUNNING,  /* the main command runs */
    SV_EXITED,   /* the main command ended; the sandbox stays until removal */
    SV_REMOVING, /* its sandbox is being destroyed on a worker */
    SV_REMOVED,  /* destroyed: the waiters are answered and the object goes */
} sv_cstate;
const char *sv_cstate_name(sv_cstate s);

/* The one state change a container may undergo at a time (state.c). */
typedef enum sv_change {
    SV_CHANGE_NONE,
    SV_CHANGE_SNAP,  /* a snapshot, fork or commit of it runs */
    SV_CHANGE_PAUSE, /* a pause or resume runs */
} sv_change;

struct sv_server {
    lis_serve_opts opts;
    struct sv_listener *listeners; /* listen.c */
    sv_conn *conns;                /* every open connection, oldest first */
    unsigned nconns;
    size_t body_bytes;          /* request bodies held in memory now, all connections */
    double idle_since;          /* --idle-timeout: when the server last became idle; 0: busy */
    int stop;                   /* 1: SIGTERM/SIGINT, 2: --idle-timeout: the main loop ends */
    int sigfd;                  /* SIGTERM, SIGINT */
    sv_timer sweep;             /* once a second: connection deadlines, idle exit */
    const struct sv_http *http; /* the request handler (server.c), for listen.c */
    lis_ctx *ctx;
    sv_loop *loop;
    const char *data_dir;
    char tmp_dir[4096]; /* scratch for archives */
    sv_container *containers;
    sv_exec *execs;
    sv_req *suspended;
    unsigned long started_total;
    struct sv_fork *forks;            /* forks by Idempotency-Key (state.c) */
    struct sv_rm_job *removing;       /* images being removed by a worker (images.c) */
    struct sv_autosnap *autosnaps;    /* fork snapshots to remove when unused (autosnap.c) */
    int trash_jobs;                   /* their rm -rf on workers */
    unsigned long images_removed;     /* by this server: a kept parent may be free now */
    sv_timer autosnap_retry;          /* the store was locked: sweep again */
    lis_monitor_hub *hub;             /* the native API's effects (made at first need) */
    struct sv_network *networks;      /* user-defined networks (networks.c) */
    uint32_t net_next_ip;             /* the next member's loopback address */
    struct sv_netlisten *net_listens; /* netrelay.c: listeners in members' namespaces */
    sv_timer net_scan;                /* netrelay.c: the members' listening ports */
    struct sv_rl *rl;                 /* the episodes API (api_rl.c) */
};

/* ---- stream.c: an upgraded connection ------------------------------------------ */

typedef struct sv_stream sv_stream;
typedef struct sv_stream_ops {
    void (*input)(void *owner, const char *buf, size_t n); /* n == 0: the client half-closed */
    void (*drained)(void *owner); /* the backlog fell below SV_STREAM_HIGH */
    void (*gone)(void *owner);    /* the client hung up or errored */
} sv_stream_ops;
#define SV_STREAM_HIGH (1u << 20)

/* Takes sock (and urh) from libmicrohttpd's upgrade handler; the first byte
 * goes out only once the client has read the 101 header (SIOCOUTQ 0). */
sv_stream *sv_stream_new(sv_loop *l, int sock, struct MHD_UpgradeResponseHandle *urh, int framed,
                         const char *extra, size_t nextra, const sv_stream_ops *ops, void *owner);
/* Queues n bytes of stream type (1 stdout, 2 stderr) as one frame (or raw). */
void sv_stream_write(sv_stream *st, int type, const char *buf, size_t n);
size_t sv_stream_backlog(const sv_stream *st);
/* Flushes the backlog, then shuts down and closes; frees st (later). */
void sv_stream_end(sv_stream *st);
/* Detaches the owner: no more callbacks. */
void sv_stream_orphan(sv_stream *st);

/* ---- sse.c: a server-sent events response (api_exec.c, api_rl.c) ------------- */

/* Queued events, drained by libmicrohttpd's content reader; the producer
 * stops while the backlog is at SV_STREAM_HIGH (sv_sse_full says so) and is
 * called back by room once the client has read it down to half. */
typedef struct sv_sse {
    sv_req *q; /* NULL once the request is over: events are dropped */
    char *buf; /* the owner frees it */
    size_t len, off, cap;
    int done;                   /* the last event is queued: the stream ends once it is read */
    int paused;                 /* the producer waits for room */
    void (*room)(void *owner);  /* the backlog fell to half (or nobody reads any more) */
    void (*freed)(void *owner); /* the response is gone (its reference) */
    void *owner;
} sv_sse;
void sv_sse_queue(sv_sse *e, const char *txt, size_t n);
/* "id: ID\n" (id >= 0), "event: NAME\ndata: JSON\n\n"; takes doc. */
void sv_sse_event(sv_sse *e, long id, const char *name, cJSON *doc);
/* Whether the backlog is at SV_STREAM_HIGH (paused until room). */
int sv_sse_full(sv_sse *e);
/* The last event is queued. */
void sv_sse_end(sv_sse *e);
/* The request is over (its on_complete): the backlog goes, a paused producer is let go. */
void sv_sse_req_done(sv_sse *e);
/* Answers q 200 with the stream; freed is called when the response goes (also
 * when it could not be made). */
enum MHD_Result sv_sse_reply(sv_sse *e, sv_req *q);

/* ---- proc.c: the one process watcher -------------------------------------------- */

typedef struct sv_proc sv_proc;
typedef struct sv_proc_ops {
    /* n bytes the command wrote on stream type (1: stdout, or the pty; 2:
     * stderr). Return 0 to stop reading both pipes until sv_proc_read_on
     * (back-pressure); its end is read whole anyway. */
    int (*output)(void *owner, int type, const char *buf, size_t n);
    /* The command ended: r is its result (exit code, signal, exec failure),
     * err set when the runtime failed to follow it. The sv_proc is freed
     * when this returns: forget it. */
    void (*exited)(void *owner, const lis_result *r, const lis_error *err);
    /* stdin (spec.in LIS_STDIO_PIPE) has room again, after sv_proc_stdin_want_room */
    void (*stdin_room)(void *owner);
} sv_proc_ops;

/* Starts spec in sb (lis_exec_start) and watches it on l; NULL with err. */
sv_proc *sv_proc_start(sv_loop *l, lis_sandbox *sb, const lis_exec_spec *spec,
                       const sv_proc_ops *ops, void *owner, lis_error *err);
lis_proc *sv_proc_lis(const sv_proc *p);
/* Reads again after output returned 0. */
void sv_proc_read_on(sv_proc *p);
/* The command's stdin (or pty) to write to, non-blocking; -1 when there is none
 * or it was closed. */
int sv_proc_stdin(const sv_proc *p);
/* want 1: call stdin_room when it can take more; 0: stop. -1 with errno. */
int sv_proc_stdin_want_room(sv_proc *p, int want);
/* The command reads EOF on its stdin (a pty gets nothing: it has no EOF). */
void sv_proc_stdin_close(sv_proc *p);
/* Stops watching and frees p, without a callback; returns its lis_proc,
 * which the caller must signal and reap (lis_proc_wait). */
lis_proc *sv_proc_detach(sv_proc *p);

/* ---- filters.c: the filters of Docker's lists ------------------------------------ */

/* Parses a list's `filters` (both encodings) into {"key":["value",...]} (*out,
 * NULL when there is none): 0, or -1 with dockerd's message in msg (a key
 * not in the NULL-terminated accepted: "Invalid filter 'KEY'"). */
int sv_filters_parse(const char *text, const char *const *accepted, cJSON **out, char *msg,
                     size_t mlen);
/* The values of key (NULL when none). */
const cJSON *sv_filter(const cJSON *f, const char *key);
int sv_filter_has_value(const cJSON *f, const char *key, const char *v);
/* 1 when key is not given or match(obj, v) holds for one of its values. */
int sv_filter_any(const cJSON *f, const char *key, int (*match)(const void *, const char *),
                  const void *obj);
/* 1 when every "k" / "k=v" of key holds in labels (a JSON object of strings). */
int sv_filter_labels(const cJSON *f, const char *key, const cJSON *labels);
int sv_filter_regex(const char *pattern, const char *s); /* dockerd's Match */
int sv_filter_glob(const char *pattern, const char *s);  /* Go's path.Match */
/* A true/false filter: 0 not given, 1 given (*value set), -1 neither (msg). */
int sv_filter_bool(const cJSON *f, const char *key, int *value, char *msg, size_t mlen);
/* sv_filters_parse, then the "dangling" key's true/false: -1 (msg, *out NULL),
 * 0 not given, 1 given (*dangling set). */
int sv_filters_dangling(const char *text, const char *const *accepted, cJSON **out, int *dangling,
                        char *msg, size_t mlen);

/* ---- images.c ------------------------------------------------------------------- */

/* Normalises a Docker reference (docker.io/library/x -> x:latest) into out. */
void sv_image_norm(const char *ref, char *out, size_t len);
/* Resolves to the store directory and the digest; -1 when missing. */
int sv_image_resolve(sv_server *s, const char *ref, char *dir, size_t dlen, char *digest,
                     size_t glen);
/* The store's metadata of an image (parsed), NULL when there is none. */
cJSON *sv_image_meta(sv_server *s, const char *digest);
/* Removes target (a tag, or a digest: the image) from the store on a worker
 * and answers q: Docker's list of Untagged/Deleted, or with native the API's
 * {"deleted": digest}. An image removed by digest resolves as missing from
 * now on (nothing new can start on it meanwhile). Answers 409 when it is the
 * parent of a snapshot. */
enum MHD_Result sv_image_remove(sv_req *q, const char *target, const char *digest, int native);
enum MHD_Result sv_images_route(sv_req *q, const char *rest);

/* ---- autosnap.c: a fork's untagged snapshot, removed when nothing needs it -------- */

typedef struct sv_autosnap sv_autosnap;
/* A fork made digest over parent for its sandboxes alone (untagged, new in the store). */
void sv_autosnap_add(sv_server *s, const char *digest, const char *parent);
/* A client was handed digest (a snapshot request): it is no longer ours to remove. */
void sv_autosnap_forget(sv_server *s, const char *digest);
/* Removes those no sandbox of the server runs on, that are no image's parent and
 * have no tag; not one a snapshot in flight may come out as (call it again after
 * that). Runs on the loop thread; the rm -rf goes to a worker. */
void sv_autosnap_sweep(sv_server *s);
/* At exit, after the containers: the rest, and waits for the rm -rf jobs. */
void sv_autosnap_shutdown(sv_server *s);

/* ---- archive.c ------------------------------------------------------------------ */

/* Run on a worker; *busy counts the jobs on the sandbox (it must not go meanwhile). */
enum MHD_Result sv_archive_head_get(sv_req *q, lis_sandbox *sb, const char *cname, int head,
                                    int *busy);
enum MHD_Result sv_archive_put(sv_req *q, lis_sandbox *sb, const char *cname, int *busy);

/* Base64 of in[0..n) into out (NUL-terminated; stops when len is short). */
void sv_base64(const unsigned char *in, size_t n, char *out, size_t len);

/* ---- options.c: a create body's options, honoured or refused ------------------- */

#define SV_MAX_BINDS 32
#define SV_MAX_TMPFS 16
typedef struct sv_copts {
    lis_bind binds[SV_MAX_BINDS]; /* host paths resolved (realpath), strings owned */
    size_t nbinds;
    lis_tmpfs tmpfs[SV_MAX_TMPFS];
    size_t ntmpfs;
    int read_only_root;
    uint64_t shm_bytes;
    lis_rlimit rlimits[LIS_MAX_RLIMITS];
    size_t nrlimits;
    uint64_t cap_drop;
    char hostname[64];         /* "": the id's first 12 */
    char stop_signal[16];      /* "": SIGTERM */
    double stop_timeout;       /* -1: 10 s */
    unsigned short rows, cols; /* ConsoleSize; 0: 24x80 */
} sv_copts;
/* cfg's options into o (0), or a one-line reason (-1: answer 400). budget
 * bounds a tmpfs or /dev/shm (the container's writable budget). */
int sv_options_parse(sv_copts *o, const cJSON *cfg, uint64_t budget, char *msg, size_t mlen);
void sv_options_release(sv_copts *o);
/* Into a sandbox's spec (pointers into o). */
void sv_options_spec(const sv_copts *o, lis_sandbox_spec *spec);
/* Docker's inspect Mounts. */
cJSON *sv_options_mounts(const sv_copts *o);

/* ---- ports.c -------------------------------------------------------------------- */

typedef struct sv_ports sv_ports;
/* Forwards 127.0.0.1:hostport (each binding) into sb's port; NULL when bindings is empty. */
sv_ports *sv_ports_start(sv_server *s, lis_sandbox *sb, const cJSON *bindings, lis_error *err);
cJSON *sv_ports_json(const sv_ports *p, const cJSON *bindings);
void sv_ports_stop(sv_ports *p);
/* Relays a (an accepted connection) and b (a socket of a sandbox's network,
 * not yet connected) once b is connected to its 127.0.0.1:port; takes both
 * (closed on failure). */
void sv_relay_start(sv_loop *l, int a, int b, unsigned short port);

/* ---- networks.c, netrelay.c, networks_api.c: user-defined networks ----------------- */

/* A container on a network: its names there, and its address on the other
 * members' loopback (127.80.0.0/16), where netrelay.c listens for it. */
typedef struct sv_netmember {
    sv_container *c;
    char **aliases; /* EndpointsConfig.Aliases (and connect's) */
    uint32_t ip;    /* host order */
    char endpoint[65];
    struct sv_netmember *next;
} sv_netmember;

typedef struct sv_network {
    char id[65], name[256];
    cJSON *labels, *options; /* as created (compose compares them) */
    int internal, attachable;
    double created;
    sv_netmember *members;
    struct sv_network *next;
} sv_network;

/* networks.c. By full id, unique id prefix or name; NULL if none. */
sv_network *sv_network_find(sv_server *s, const char *ref);
/* A create body's NetworkMode / NetworkingConfig: 1 a user network (c->net
 * stays the server's), 0 not one, -1 refused (msg). */
int sv_net_check_create(sv_server *s, const cJSON *cfg, char *msg, size_t mlen);
/* Joins c (its sandbox made) to the user network of its create body. */
int sv_net_join_created(sv_container *c, char *msg, size_t mlen);
int sv_net_join(sv_network *n, sv_container *c, const cJSON *aliases, char *msg, size_t mlen);
void sv_net_leave(sv_network *n, sv_container *c);
/* Takes c off every network (its removal). */
void sv_net_leave_all(sv_container *c);
/* NetworkSettings.Networks of c: its user networks, else its NetworkMode's. */
cJSON *sv_net_container_json(const sv_container *c);
cJSON *sv_network_json(const sv_network *n);
sv_network *sv_network_new(sv_server *s, const char *name, const cJSON *labels,
                           const cJSON *options, int internal, int attachable);
void sv_network_free(sv_server *s, sv_network *n);
/* netrelay.c: listeners follow the members' listening ports (a scan each
 * second while a network has two members); forget closes those of c. */
void sv_netrelay_kick(sv_server *s);
void sv_netrelay_forget(sv_server *s, const sv_container *c);
/* networks_api.c: /networks and /volumes. */
enum MHD_Result sv_networks_route(sv_req *q, const char *rest);
enum MHD_Result sv_volumes_route(sv_req *q, const char *rest);

/* ---- containers.c --------------------------------------------------------------- */

struct sv_container {
    char id[65];
    char name[128];
    char image[512]; /* as given */
    char image_id[80];
    char rootfs[4096];
    cJSON *config; /* the create body (owned) */
    char **cmd;    /* Entrypoint + Cmd */
    char **env;    /* container Env + HOSTNAME, HOME */
    char workdir[1024];
    char user[64];
    int tty, open_stdin, auto_remove;
    lis_net_mode net;
    lis_limits limits;
    sv_copts copts; /* the create options that reach the sandbox (options.c) */
    double created, started_at, finished_at;
    sv_cstate state;
    int exit_code;
    int busy;         /* a job runs on it */
    int paused;       /* its sandbox is paused (state.c; either API) */
    sv_change change; /* the state change in flight (state.c: one at a time) */
    lis_sandbox *sb;
    sv_proc *main; /* the main command while it runs */
    sv_timer stop_timer;
    sv_timer life;  /* the native API's timeout: removed when it fires (api.c) */
    double ends_at; /* wall clock of that; 0: none */
    struct sv_waiter *waiters;
    struct sv_attach *attaches;
    struct sv_pending *pending; /* requests parked until the job ends */
    sv_ports *ports;
    char *log; /* the main command's output, framed (unless tty), first 8 MiB */
    size_t loglen;
    unsigned restarts;
    int native;                /* made by the native API (/lis/v1/): no main command */
    char idem[128];            /* its Idempotency-Key, "" for none */
    struct sv_child *children; /* running execs (exec.c registers them) */
    /* the native API's effects (docs/api.md): made with a monitor ("effects",
     * default on), its policy ("policy"); an exec asking for effects is a step */
    int effects, fx_step_open;
    lis_policy *policy;
    lis_monitor *mon;
    sv_server *s;
    sv_container *next;
};

/* Being removed, or removed: nothing new may start on it. */
static inline int sv_removing(const sv_container *c)
{
    return c->state == SV_REMOVING || c->state == SV_REMOVED;
}

/* inspect.c */
cJSON *sv_container_inspect(sv_container *c);
/* The native API's view of a container (docs/api.md): id, name, image, state... */
cJSON *sv_sandbox_json(sv_container *c);
/* "creating", "running", "paused" or "removing". */
const char *sv_sandbox_state(const sv_container *c);
enum MHD_Result sv_containers_list(sv_req *q);

/* Finds by full id, unique id prefix, or name (with or without '/'). */
sv_container *sv_container_find(sv_server *s, const char *ref);
enum MHD_Result sv_containers_route(sv_req *q, const char *rest);
/* Kills everything, waits for the jobs: used at shutdown. */
void sv_containers_shutdown(sv_server *s);
/* Creates a container from a Docker create body (takes cfg); cb (NULL: the
 * Docker reply) answers q when the sandbox is made (c NULL and err on failure).
 * The native API passes a Cmd it never starts: its sandboxes run only execs. */
typedef void (*sv_created_cb)(sv_req *q, sv_container *c, const char *err);
enum MHD_Result sv_container_create(sv_req *q, cJSON *cfg, const char *name, const char *idem,
                                    sv_created_cb cb);
/* create.c: the first half of a create, on the loop thread: the container (in s's list,
 * busy, "created", no sandbox yet) from a Docker create body (taken). rootfs
 * NULL: cfg's Image is resolved in the store; else rootfs is used as it is
 * (the caller sets image and image_id). NULL with *status and msg on failure. */
sv_container *sv_container_new(sv_server *s, cJSON *cfg, const char *name, const char *idem,
                               int native, int owner, const char *rootfs, unsigned *status,
                               char *msg, size_t mlen);
/* Its sandbox's spec (name and host are the spec's buffers). */
void sv_container_spec(const sv_container *c, lis_sandbox_spec *spec, char name[32], char host[16]);
/* Makes a sandbox of c from spec, on a worker: through net/ for the proxy
 * mode, then its WorkingDir. The caller hands *out to c->sb on the loop.
 * mon non-NULL and c->effects: made with its monitor, attached at once (its
 * policy's connect deny rules to the proxy), *mon for c->mon. */
int sv_container_sandbox(const sv_container *c, const lis_sandbox_spec *spec, lis_monitor **mon,
                         lis_sandbox **out, lis_error *err);
/* Forgets a container from sv_container_new whose sandbox was never made. */
void sv_container_discard(sv_container *c);
/* Kills its processes and destroys the sandbox on a worker; answers q 204. */
void sv_container_remove(sv_container *c, sv_req *q);
/* The native API's timeout: the sandbox is removed `seconds` from now (0:
 * never; a job on it delays that until it ends). */
#define SV_TIMEOUT_MAX (30.0 * 86400)
void sv_container_set_timeout(sv_container *c, double seconds);
/* A body's "timeout": 0 when absent or null, -1 unless 0..SV_TIMEOUT_MAX. */
double sv_body_timeout(const cJSON *b);
/* A running exec of c: on removal, containers.c calls detach(owner), which
 * must stop watching proc and forget c; then it kills and reaps proc. */
typedef struct sv_child {
    lis_proc *proc;
    void (*detach)(void *owner);
    void *owner;
    struct sv_child *next;
} sv_child;
void sv_container_add_child(sv_container *c, sv_child *ch);
void sv_container_del_child(sv_container *c, sv_child *ch);

/* ---- exec.c --------------------------------------------------------------------- */

enum MHD_Result sv_exec_create(sv_req *q, sv_container *c);
enum MHD_Result sv_exec_route(sv_req *q, const char *rest);
/* ---- api.c, api_exec.c, state.c: the native API under /lis/v1/ ------------- */

enum MHD_Result sv_api_route(sv_req *q, const char *rest);
/* POST /lis/v1/sandboxes/{id}/exec: server-sent events. */
enum MHD_Result sv_api_exec(sv_req *q, sv_container *c);
/* state.c: POST .../pause, .../resume, .../snapshot, .../fork, GET .../stats. */
enum MHD_Result sv_state_route(sv_req *q, sv_container *c, const char *op);
/* Docker's POST /containers/{id}/pause (pause 1) and /unpause (0). */
enum MHD_Result sv_state_docker_pause(sv_req *q, sv_container *c, int pause);
/* GET /lis/v1/snapshots[/{ref}]: rest is "" or the ref. */
enum MHD_Result sv_snapshots(sv_req *q, const char *ref);
/* DELETE /lis/v1/snapshots/{ref}: a snapshot image and all its tags (409 while a sandbox
 * runs on it or another snapshot is made on it). */
enum MHD_Result sv_snapshot_delete(sv_req *q, const char *ref);
/* Docker's POST /commit?container=&repo=&tag=: a snapshot tagged repo:tag. */
enum MHD_Result sv_commit(sv_req *q);
/* At exit: the fork records. */
void sv_state_free(sv_server *s);

/* ---- router.c ---- */
enum MHD_Result sv_route(sv_req *q, const char *url);
/* The largest request body a route takes (json: SV_BODY_JSON_MAX). */
size_t sv_route_body_max(const char *method, const char *url);
#define SV_BODY_JSON_MAX (1u << 20)      /* create, exec, fork ... bodies */
#define SV_BODY_RL_GROUP_MAX (80u << 20) /* POST /lis/v1/groups: a task's files inline */
#define SV_BODY_FILE_MAX (64u << 20)     /* a file written whole (native API) */
#define SV_BODY_ARCHIVE_MAX (1ull << 30) /* PUT .../archive: a tar, held in memory */
#define SV_BODY_TOTAL_MAX (2ull << 30)   /* all bodies held at once */

/* ---- listen.c: listeners and connections ---- */

/* A connection's phase, for its deadline and whether it may be dropped. */
typedef enum sv_conn_state {
    SV_CONN_IDLE,     /* no request, or one whose headers have not all come */
    SV_CONN_BODY,     /* headers in, the body coming */
    SV_CONN_ACTIVE,   /* a request being answered (suspended, streaming...) */
    SV_CONN_UPGRADED, /* hijacked (exec, attach): the stream owns it */
} sv_conn_state;

#define SV_CONN_TIMEOUT                                                                            \
    60.0                           /* default --conn-timeout: seconds a connection may stay idle
                              * (headers included), or a body go without a byte */
#define SV_CONN_STUCK 3.0          /* seconds bytes may wait unread mid-body (MHD's stall) */
#define SV_CONN_MEMORY (64u << 10) /* per-connection buffer: request line + headers */
#define SV_CONNS_MAX 4096          /* default --max-conns */
#define SV_CONNS_PER_CLIENT 1024   /* default --max-conns-per-client (TCP) */

/* libmicrohttpd's callbacks for each listener's daemon (server.c's). */
typedef struct sv_http {
    MHD_AccessHandlerCallback handler;
    MHD_RequestCompletedCallback completed;
} sv_http;
/* Listens on the unix socket and --tcp; 0, or -1 with err. */
int sv_listen_start(sv_server *s, const char *unix_path, lis_error *err);
/* Runs libmicrohttpd's work pending on each listener; the ms until it wants to
 * run again (at most max_ms). */
int sv_listen_run(sv_server *s, int max_ms);
/* Stops accepting (SIGTERM, idle exit): the unix socket's file goes first
 * (when it is still ours: a new server may have taken the path), so a client
 * starts a new server rather than reaching one that is leaving. */
void sv_listen_quiesce(sv_server *s);
void sv_listen_stop(sv_server *s);
/* The connection's record, its phase, and whether its client is the owner (the
 * unix socket, or TLS with a verified client certificate: NetworkMode host). */
sv_conn *sv_conn_of(struct MHD_Connection *mc);
void sv_conn_phase(sv_conn *c, sv_conn_state st);
int sv_conn_owner(const sv_conn *c);
/* Whether the client closed or reset c (a look at its socket: libmicrohttpd
 * does not watch a suspended connection). */
int sv_conn_gone(const sv_conn *c);
/* Deadlines and drops (once a second). */
void sv_conns_sweep(sv_server *s);

/* At exit, after sv_containers_shutdown. */
void sv_execs_free(sv_server *s);

/* ---- api_rl.c: the episodes API (docs/rl.md) ---------------------------------------- */

typedef struct sv_rl sv_rl;
/* Opens rl/ (lis_rl_open) with the server's store, <run dir>/rl for its
 * results, the default limits, network and --rl-* bounds, the monitor hub
 * (made here); -1 with err. */
int sv_rl_start(sv_server *s, lis_error *err);
/* Answers the requests waiting on it (503), then lis_rl_close: every episode
 * ends and its sandboxes go. Before the containers go; NULL-safe (twice too). */
void sv_rl_stop(sv_server *s);
/* Whether a group is queued, set up, run or scored (GET rl/status): --idle-timeout waits. */
int sv_rl_busy(sv_server *s);
/* Whether rest (after /lis/v1/) is the episodes API's (lis_rl_owns). */
int sv_rl_owns(const char *rest);
/* A path under /lis/v1/ that lis_rl_owns (rest: after /lis/v1/). */
enum MHD_Result sv_rl_route(sv_req *q, const char *rest);

/* ---- api_effects.c: the native API's effects ---------------------------------------- */

/* The create body's "effects" (default true) and "policy" (YAML text,
 * checked) into cfg as LisEffects, LisPolicy; -1 with a 400 message. */
int sv_effects_body(const cJSON *body, cJSON *cfg, char *msg, size_t mlen);
/* sv_container_new of a native sandbox: c->effects, c->policy from cfg, the
 * server's hub made at first need; -1 with *status and msg. */
int sv_effects_setup(sv_server *s, sv_container *c, const cJSON *cfg, unsigned *status, char *msg,
                     size_t mlen);
/* An exec asking for effects opens a step of c's monitor (one at a time);
 * -1 with *status (409: none, or one open) and msg. */
int sv_effects_begin(sv_container *c, const char *command, unsigned *status, char *msg,
                     size_t mlen);
/* Closes the step: its effects (lis_effects_json), {"error"} when they could
 * not be read, NULL when no step was open or c is gone. */
cJSON *sv_effects_end(sv_container *c, const lis_result *res);
/* The same for a step of mon the caller marked closed: only the monitor is
 * touched, so a job may run it off the loop (its file scan). */
cJSON *sv_effects_close(lis_monitor *mon, const lis_result *res);

#endif
