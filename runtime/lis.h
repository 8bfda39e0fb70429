/* lis.h - the public C API of the lis sandbox runtime.
 *
 * This is the only runtime header that agent/ and cli/ may include.
 * Nothing here is global: every call works on a context (lis_ctx) or a
 * sandbox handle, and every fallible call fills a caller-owned lis_error.
 *
 * Threading: a lis_ctx may be shared by threads; a lis_sandbox or lis_proc
 * handle must be used by one thread at a time.
 */
#ifndef LIS_H
#define LIS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ------------------------------------------------------------ */

typedef struct lis_error {
    int code;        /* the errno-style cause (never 0 once filled: EINVAL by default) */
    int http_status; /* the HTTP status of the reply that failed (agent/'s LLM client), else 0 */
    char msg[512];   /* one line: what failed, why, and the fix when known */
} lis_error;

/* The one error constructor, for every area (git's usage.c is the model).
 * lis_fail fills err (when not NULL) with code (0: EINVAL) and a formatted line,
 * newlines folded to spaces, and returns -1. lis_fail_errno does the same with
 * code = errno and ": strerror(errno)" appended (as git's error_errno);
 * lis_fail_errnum with a cause saved earlier (an errno, a -rc of a syscall
 * wrapper). Never print strerror by hand in a message. */
int lis_fail(lis_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int lis_fail_errno(lis_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int lis_fail_errnum(lis_error *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* lis_fail(err, ENOMEM, "out of memory"): the one out-of-memory failure. */
int lis_oom(lis_error *err);
/* Prefixes err->msg with context ("creating sandbox x: ..."); returns -1. */
int lis_wrap(lis_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- the clock ------------------------------------------------------- */

/* The one clock pair of every area: lis_now for durations and deadlines
 * (CLOCK_MONOTONIC), lis_wallclock for what is shown or stored as a date
 * (CLOCK_REALTIME), both in seconds. */
double lis_now(void);
double lis_wallclock(void);

/* ---- growing arrays ---------------------------------------------------- */

/* Makes the array at *arrp (elements of elem bytes, *cap of them) hold at least
 * need elements: doubles the capacity, from 16. 0; or -1 with errno ENOMEM and
 * the array and *cap unchanged. LIS_GROW(a, cap, need) is the call (git's
 * ALLOC_GROW): `if (LIS_GROW(v, cap, n + 1) < 0) return lis_oom(err); v[n++] = x;` */
int lis_grow(void *arrp, size_t *cap, size_t need, size_t elem);
#define LIS_GROW(arr, cap, need) lis_grow(&(arr), &(cap), (need), sizeof *(arr))

/* ---- strict UTF-8 in what lis writes (runtime/utf8.c) ------------------ */

/* Every JSON text lis writes (files, answers, its own workers' pipes) is
 * printed by lis_json_print, so it is strict UTF-8 whatever bytes a sandbox,
 * a model or a task file put in it. The one stated form (docs/monitoring.md,
 * "Bytes that are not UTF-8"): a string that is not valid UTF-8 is written
 * with each byte that starts no valid sequence replaced by U+FFFD, and its
 * original bytes, base64 (RFC 4648, padded), in a sibling member of the same
 * object: "<key>_b64" (a string), or for strings inside an array member,
 * "<key>_b64" an object from each such element's index ("3"; "2.0" in a
 * nested array) to its base64. A key that is not UTF-8 is replaced the same
 * way and kept in the object's "_b64_keys" (replaced key -> base64). Only
 * strings directly in a root array (or a root string) keep no bytes. */
struct cJSON;
/* Length of the valid UTF-8 sequence at s (n bytes left, n >= 1), 0 when
 * invalid (overlongs, surrogates and code points past U+10FFFF are). */
size_t lis_utf8_seq(const char *s, size_t n);
int lis_utf8_valid(const char *s, size_t n);
/* s[0..n) is a cut of a longer text: where to cut instead so that no
 * character is split (n, or fewer by an incomplete last sequence). */
size_t lis_utf8_cut(const char *s, size_t n);
/* src (NULL: "") into dst[len] (len >= 1), NUL-terminated, cut by
 * lis_utf8_cut when longer: a bounded copy that splits no character. */
void lis_utf8_copy(char *dst, size_t len, const char *src);
/* A malloc'ed copy of s[0..n) with each NUL and each byte that starts no
 * valid sequence replaced by U+FFFD; NULL when out of memory. */
char *lis_utf8_replace(const char *s, size_t n);
/* A malloc'ed base64 of data[0..n); NULL when out of memory. */
char *lis_base64(const void *data, size_t n);
/* cJSON_Print (formatted) or cJSON_PrintUnformatted of j in the stated form
 * (j is not changed); free() the result; NULL when out of memory. */
char *lis_json_print(const struct cJSON *j, int formatted);
/* s[0..n) (any bytes) added to obj at key in the stated form: 0, -1 when
 * out of memory. */
int lis_json_add_bytes(struct cJSON *obj, const char *key, const char *s, size_t n);

/* ---- context ----------------------------------------------------------- */

typedef struct lis_ctx lis_ctx;

typedef struct lis_ctx_opts {
    const char *run_dir;   /* sockets + metadata; NULL: $XDG_RUNTIME_DIR/lis or /tmp/lis-$UID */
    const char *data_dir;  /* sandbox layers; NULL: $XDG_DATA_HOME/lis or ~/.local/share/lis */
    const char *init_path; /* the lis-init helper; NULL: next to the running executable */
    /* Where warnings go (one line, no newline), e.g. "sandbox X runs without
     * limits". NULL: standard error, prefixed with "lis: warning: ". */
    void (*warn)(void *arg, const char *line);
    void *warn_arg;
} lis_ctx_opts;

/* Creates a context: finds the helper, compiles the seccomp filter once. */
lis_ctx *lis_ctx_new(const lis_ctx_opts *opts, lis_error *err);
void lis_ctx_free(lis_ctx *ctx);
const char *lis_ctx_run_dir(const lis_ctx *ctx);
const char *lis_ctx_data_dir(const lis_ctx *ctx);

/* ---- sandboxes --------------------------------------------------------- */

typedef struct lis_sandbox lis_sandbox;

typedef struct lis_bind {
    const char *host_path; /* existing host file or directory */
    const char *path;      /* absolute path inside the sandbox */
    int read_only;
} lis_bind;

/* A tmpfs at path inside the sandbox (Docker's --tmpfs). It is RAM that the
 * memory limit does not see: its size bounds it. */
typedef struct lis_tmpfs {
    const char *path; /* absolute, inside the sandbox */
    uint64_t size;    /* bytes; 0: LIS_TMPFS_DEFAULT */
    unsigned mode;    /* of its root; 0: 01777 */
    int read_only, noexec;
} lis_tmpfs;
#define LIS_TMPFS_DEFAULT (64ull << 20)

/* A resource limit of every command (Docker's --ulimit): set right before its
 * exec, so lis-init itself is not bound by it. A hard limit above the owner's
 * own cannot be raised (that needs CAP_SYS_RESOURCE outside): it is lowered
 * to it, and the soft one with it. */
typedef struct lis_rlimit {
    int resource;        /* RLIMIT_NOFILE, RLIMIT_NPROC, ... */
    uint64_t soft, hard; /* LIS_UNLIMITED: RLIM_INFINITY */
} lis_rlimit;
#define LIS_MAX_RLIMITS 16

typedef enum lis_net_mode {
    LIS_NET_NONE = 0, /* a private network namespace with loopback only */
    LIS_NET_HOST,     /* share the owner's network (explicit opt-in) */
    LIS_NET_PROXY,    /* loopback only, as NONE, plus a listener (listen_port) that the
                        * caller serves: net/'s HTTP egress proxy (net/lis_net.h,
                        * docs/network.md); refused without listen_port */
} lis_net_mode;

typedef enum lis_uidmap_mode {
    LIS_UIDMAP_AUTO = 0, /* full 65536 range via newuidmap when available, else single */
    LIS_UIDMAP_SINGLE,   /* 0 inside = caller outside, nothing else mapped */
    LIS_UIDMAP_FULL,     /* require newuidmap/newgidmap and a subordinate range */
} lis_uidmap_mode;

typedef enum lis_upper_mode {
    LIS_UPPER_DISK = 0, /* writes go to <data_dir>/sandboxes/<name>/upper */
    LIS_UPPER_TMPFS,    /* writes go to a tmpfs private to the sandbox (nothing on disk) */
} lis_upper_mode;

/* Resource envelope. 0 keeps the default, LIS_UNLIMITED disables a limit. */
#define LIS_UNLIMITED UINT64_MAX
#define LIS_DEFAULT_DISK (1ull << 30)
#define LIS_DEFAULT_MEMORY (200ull << 20)
#define LIS_DEFAULT_PIDS 1024
typedef struct lis_limits {
    uint64_t memory_bytes; /* default 200 MiB */
    uint64_t pids;         /* default 1024 */
    uint64_t cpu_millis;   /* 1500 = 1.5 CPUs; default unlimited */
    /* writable space: the tmpfs upper layer, /tmp and /dev/shm share it (a
     * writer gets ENOSPC); a disk upper layer is bounded per file and
     * measured (docs/runtime.md). Default 1 GiB. */
    uint64_t disk_bytes;
    int require; /* refuse to start when limits cannot be enforced */
} lis_limits;

typedef struct lis_sandbox_spec {
    /* The read-only lower layer: a directory, or a chain of them top first,
     * "snap2:snap1:base" as overlayfs writes it (what lis_store_resolve gives
     * for a snapshot image; at most LIS_MAX_LAYERS, no ':' in a directory). */
    const char *rootfs;
    const char *name;       /* NULL: generated; [A-Za-z0-9_.-], max 64 */
    const char *hostname;   /* NULL: the name */
    const char *const *env; /* NULL-terminated K=V added to every command */
    const lis_bind *binds;
    size_t nbinds;
    lis_limits limits;
    lis_net_mode net;
    lis_uidmap_mode uidmap;
    lis_upper_mode upper;
    int persist; /* keep running after the owner process exits */
    /* Not 0: a TCP listener on 127.0.0.1:listen_port inside the sandbox's own
     * network namespace (not with LIS_NET_HOST), made during set-up; take it
     * with lis_sandbox_take_listener. Connections to it come from the
     * sandbox; whoever accepts them lives outside it. */
    unsigned short listen_port;
    /* What Docker's create options ask of a container (serve/), each optional: */
    const lis_tmpfs *tmpfs; /* tmpfs mounts, after the binds */
    size_t ntmpfs;
    /* / read-only, and /tmp with it, as Docker's --read-only (/dev/shm, binds
     * and tmpfs mounts keep their own mode) */
    int read_only_root;
    const char *workdir; /* made (mkdir -p inside the root) during set-up; NULL: none */
    uint64_t shm_bytes;  /* 0: /dev/shm is in the writable budget; else a tmpfs of this size */
    const lis_rlimit *rlimits; /* at most LIS_MAX_RLIMITS */
    size_t nrlimits;
    /* capabilities (1ull << CAP_*) left out of the default set of every command */
    uint64_t cap_drop;
    /* LIS_MONITOR_* bits, 0 for none: PID 1 installs a seccomp filter that
     * turns those syscalls of every process of the sandbox into user
     * notifications (SECCOMP_RET_USER_NOTIF) and hands its listener fd to the
     * owner (lis_sandbox_take_monitor). Until someone answers them, those
     * syscalls wait: monitor/ (monitor/lis_monitor.h) does. Not with persist
     * (the listener dies with its owner). */
    unsigned monitor;
    /* NULL-terminated paths inside the sandbox (directories or files), NULL
     * for none: the sandbox may execute only files beneath them, enforced by
     * the kernel (Landlock). lis_sandbox_create fails where the kernel has no
     * Landlock: check lis_landlock_abi() first. */
    const char *const *exec_allow;
    /* The same for writes: creating, writing, truncating, removing and
     * renaming files only beneath these paths (and /dev/null, /dev/zero,
     * /dev/full, /dev/tty, /dev/random, /dev/urandom, the pty), enforced by
     * Landlock. */
    const char *const *write_allow;
} lis_sandbox_spec;

/* The Landlock ABI version this kernel offers, 0 when none (Linux < 5.13 or
 * not enabled). */
int lis_landlock_abi(void);

#define LIS_MONITOR_EXEC 1u    /* execve, execveat and exit_group */
#define LIS_MONITOR_CONNECT 2u /* connect, and sendto with an address */

int lis_sandbox_create(lis_ctx *ctx, const lis_sandbox_spec *spec, lis_sandbox **out,
                       lis_error *err);
/* Attaches to a running persistent sandbox by name. */
int lis_sandbox_open(lis_ctx *ctx, const char *name, lis_sandbox **out, lis_error *err);
/* Kills every process of the sandbox, unmounts, deletes its state; frees sb. */
int lis_sandbox_destroy(lis_sandbox *sb, lis_error *err);
/* Frees the handle only. An ephemeral sandbox dies with its owner process
 * anyway; a persistent one keeps running. */
void lis_sandbox_release(lis_sandbox *sb);

const char *lis_sandbox_name(const lis_sandbox *sb);
pid_t lis_sandbox_pid(const lis_sandbox *sb); /* PID 1 of the sandbox, as seen by the owner */

typedef struct lis_stats {
    char name[80];
    char state[16];    /* "running", "paused" or "dead" */
    char rootfs[4096]; /* the lower layer(s), as lis_sandbox_spec.rootfs */
    pid_t pid;
    double age_seconds;
    uint64_t memory_bytes; /* current memory (cgroup), or summed RSS when no cgroup */
    uint64_t memory_peak;  /* 0 when unknown */
    uint64_t nprocs;
    uint64_t oom_kills;
    double cpu_seconds; /* CPU time used, exited processes included (cgroup v2's
                             * cpu.stat, else its processes' and their reaped children's,
                             * lis-init's own bookkeeping left out) */
    int persist;
    int limits_enforced;
    /* "cgroup" (enforced by the kernel), "fallback" (no cgroup: rlimits and
     * lis-init's memory watchdog, docs/cgroups.md) or "" when unknown */
    char limits[16];
    uint64_t disk_bytes; /* writable budget in use (tmpfs + disk upper layer) */
    uint64_t disk_limit; /* the budget (--disk), LIS_UNLIMITED for none */
    lis_net_mode net;
} lis_stats;

int lis_sandbox_stats(lis_sandbox *sb, lis_stats *st, lis_error *err);

/* Pause and resume (runtime/state.c, docs/runtime.md): a paused sandbox's
 * processes are stopped (cgroup v2 freezer; else SIGSTOP of all but its
 * PID 1) and cost no CPU; their memory stays. lis_exec and lis_exec_start
 * refuse while it is paused ("sandbox X is paused ...", err->code EBUSY);
 * files can still be read and written. Both are no-ops when already in the
 * state asked for. The state is recorded in the sandbox's metadata, so
 * another process (lis sandbox resume) sees it. */
int lis_sandbox_pause(lis_sandbox *sb, lis_error *err);
int lis_sandbox_resume(lis_sandbox *sb, lis_error *err);
/* 1 when alive and paused. */
int lis_sandbox_is_paused(lis_sandbox *sb);

/* ---- snapshots: the writable layer copied out (runtime/capture.c) ------- */

#define LIS_MAX_LAYERS 32 /* lower layers of one sandbox: a snapshot chain's depth */

typedef struct lis_capture_info {
    uint64_t files;           /* entries captured (whiteouts and directories included) */
    uint64_t bytes;           /* bytes of regular files */
    uint64_t reflinked;       /* of those files, how many were cloned (FICLONE), not copied */
    double paused_ms;         /* how long the sandbox's processes were stopped for it */
    unsigned char digest[64]; /* what opts->hash_end wrote */
} lis_capture_info;

typedef struct lis_capture_opts {
    /* Fed every entry's record (path, type, mode, owner, size, link target,
     * kept xattrs) and every byte of its contents, in name order; called in
     * the copying child process, which is a raw clone of the caller: it must
     * not allocate. NULL: no digest. */
    void (*hash)(void *arg, const void *data, size_t len);
    void (*hash_end)(void *arg, unsigned char out[64]); /* at the end, in the child */
    void *arg;
} lis_capture_opts;

/* Captures what sb wrote: pauses it (unless paused already), copies its
 * writable layer - files written or changed, whiteouts of deleted ones,
 * opaque directories, owners, modes, times, xattrs - and what is in its /tmp
 * (as the layer's tmp/) into dest (created; must not exist), then resumes
 * it. Only files: processes, memory, /dev/shm and open connections are not
 * captured. Files are reflinked where the filesystem allows, else copied;
 * dest never shares an inode with the live upper layer. opts may be NULL. */
int lis_sandbox_capture(lis_sandbox *sb, const char *dest, const lis_capture_opts *opts,
                        lis_capture_info *info, lis_error *err);
/* What a fork of sb inherits by default: its env (NULL-terminated, owned by
 * sb), its network mode and the limits it was created with. */
const char *const *lis_sandbox_env(const lis_sandbox *sb);
lis_net_mode lis_sandbox_net(const lis_sandbox *sb);
lis_limits lis_sandbox_limits(const lis_sandbox *sb);
const char *lis_sandbox_rootfs(const lis_sandbox *sb);

/* Lists sandboxes of this user (persistent ones and live ephemeral ones with
 * state on disk). *out is malloc'ed; free() it. */
int lis_sandbox_list(lis_ctx *ctx, lis_stats **out, size_t *n, lis_error *err);
/* Renames a persistent sandbox (atomically; fails if new_name exists). Its
 * hostname stays what it was at creation. */
int lis_sandbox_rename(lis_ctx *ctx, const char *old_name, const char *new_name, lis_error *err);
/* Removes the state of sandboxes whose PID 1 is gone; returns how many. */
int lis_sandbox_gc(lis_ctx *ctx, int *removed, lis_error *err);

/* ---- hooks for layers built on the runtime (net/) ---------------------- */

/* The listener spec.listen_port asked for: from now on the caller's to
 * close; -1 when there is none or it was taken already. */
int lis_sandbox_take_listener(lis_sandbox *sb);
/* The seccomp listener spec.monitor asked for (SECCOMP_FILTER_FLAG_NEW_LISTENER
 * in PID 1, before the first command): from now on the caller's to close; -1
 * when there is none or it was taken already. */
int lis_sandbox_take_monitor(lis_sandbox *sb);
/* The sandbox's writable (overlay upper) layer, O_RDONLY|O_DIRECTORY, the
 * caller's to close: a disk layer on the host, or the tmpfs one through PID
 * 1's fd of the set-up tmpfs. Only the owner of the sandbox's user namespace
 * can open the latter; never the sandbox itself. */
int lis_sandbox_upper_fd(lis_sandbox *sb, lis_error *err);
/* The sandbox's /tmp ("tmp") or /dev/shm ("shm") as they live in its set-up
 * tmpfs, O_RDONLY|O_DIRECTORY, the caller's to close (reached as
 * lis_sandbox_upper_fd's tmpfs layer is). A /dev/shm of its own size
 * (spec.shm_bytes) is another tmpfs, not reached here. */
int lis_sandbox_scratch_dir_fd(lis_sandbox *sb, const char *name, lis_error *err);
/* A fresh socket(domain, type, 0) made inside the sandbox's network
 * namespace (a forked helper joins the sandbox's user and network
 * namespaces and hands it back): connect() on it reaches the sandbox's own
 * 127.0.0.1, e.g. to forward a host port into the sandbox. With
 * LIS_NET_HOST it is a plain socket of the host's network. Returns the fd
 * (the caller's to close) or -1. */
int lis_sandbox_socket(lis_sandbox *sb, int domain, int type, lis_error *err);
/* A pidfd of the sandbox's PID 1, the handle's (do not close; dup it). */
int lis_sandbox_pidfd(const lis_sandbox *sb);
lis_ctx *lis_sandbox_ctx(const lis_sandbox *sb);
const char *lis_ctx_init_path(const lis_ctx *ctx);
/* One slot per sandbox handle for the layer above: release(data) runs when
 * the handle goes (lis_sandbox_destroy, after its processes are killed, or
 * lis_sandbox_release). Setting it again replaces it without a release. */
void lis_sandbox_set_ext(lis_sandbox *sb, void *data, void (*release)(void *data));
void *lis_sandbox_ext(const lis_sandbox *sb);
/* The same per context, set once (thread-safe): 0, or -1 when one is set
 * already (data stays the caller's). lis_ctx_free calls release(data) before
 * anything else goes. */
int lis_ctx_set_ext(lis_ctx *ctx, void *data, void (*release)(void *data));
void *lis_ctx_ext(lis_ctx *ctx);

/* ---- the job pool ------------------------------------------------------ */

/* The one pool of worker threads for what blocks an event loop (creating and
 * destroying sandboxes, copying files, pulling, scoring): batch/ and serve/
 * use it (libuv's uv_queue_work is the model).
 * - lis_jobs_submit queues run(arg) for a worker; once it has run, the pool's
 *   fd (an eventfd) becomes readable and lis_jobs_reap, called by the owner's
 *   loop thread, calls done(arg, 0) there, oldest first. A job cancelled
 *   before it started gets done(arg, ECANCELED) and run is never called.
 * - Creating the pool starts every thread or fails naming the one that could
 *   not start (a smaller pool would silently serialise the work); each has a
 *   1 MiB stack (jobs.c says why that is enough): a job must not recurse with
 *   large frames.
 * - The threads live as long as the pool: a sandbox created on a worker has
 *   its set-up child tied to that thread (PR_SET_PDEATHSIG is per thread), so
 *   a pool must outlive the sandboxes its jobs made.
 * - lis_jobs_stop runs what is queued and joins the threads (then a last
 *   reap calls the done callbacks); lis_jobs_free stops, drops what was not
 *   reaped without calling done, and frees. */
typedef struct lis_jobs lis_jobs;
typedef struct lis_job lis_job;
lis_jobs *lis_jobs_new(unsigned threads, lis_error *err);
int lis_jobs_fd(const lis_jobs *p);
lis_job *lis_jobs_submit(lis_jobs *p, void (*run)(void *arg), void (*done)(void *arg, int status),
                         void *arg, lis_error *err);
/* 0 when j had not started (its done gets ECANCELED at the next reap); -1 when
 * it runs or ran. j is valid until its done callback has returned. */
int lis_jobs_cancel(lis_jobs *p, lis_job *j);
int lis_jobs_reap(lis_jobs *p);               /* calls the done callbacks ready; returns how many */
unsigned lis_jobs_pending(const lis_jobs *p); /* queued + running */
void lis_jobs_stop(lis_jobs *p);
void lis_jobs_free(lis_jobs *p);

/* ---- pre-warmed pools -------------------------------------------------- */

/* Keeps `size` ephemeral sandboxes of one spec ready: a background thread
 * creates them and tops the pool up after every take, so taking one costs a
 * mutex and a pointer. spec is copied (its name must be NULL). */
typedef struct lis_pool lis_pool;
lis_pool *lis_pool_new(lis_ctx *ctx, const lis_sandbox_spec *spec, unsigned size, lis_error *err);
/* Takes a ready sandbox, waiting for one when the pool is empty; it is the
 * caller's to destroy. Fails when the pool cannot create sandboxes. */
int lis_pool_take(lis_pool *pool, lis_sandbox **out, lis_error *err);
unsigned lis_pool_ready(lis_pool *pool);
/* Stops the thread and destroys the sandboxes nobody took. */
void lis_pool_free(lis_pool *pool);

/* ---- commands ---------------------------------------------------------- */

/* How a standard stream of a command is connected. */
typedef enum lis_stdio {
    LIS_STDIO_NULL = 0, /* /dev/null */
    LIS_STDIO_CAPTURE,  /* stdout/stderr: captured into lis_result (head+tail cap) */
    LIS_STDIO_FD,       /* the given file descriptor of the caller, itself: a terminal
                         * passed this way can be read and reconfigured from inside
                         * (use LIS_STDIO_PIPE and relay instead) */
    LIS_STDIO_DATA,     /* stdin only: the given bytes */
    LIS_STDIO_PIPE,     /* a fresh pipe; the caller's end is lis_proc_stdio_fd() (only
                         * with lis_exec_start) */
} lis_stdio;

typedef struct lis_exec_spec {
    const char *const *argv; /* argv[0] looked up in PATH; or NULL with shell */
    const char *shell;       /* run as: /bin/sh -c SHELL */
    const char *cwd;         /* NULL: / */
    const char *const *env;  /* NULL-terminated K=V, added on top of the defaults */
    lis_stdio in, out, err;
    int in_fd, out_fd, err_fd; /* for LIS_STDIO_FD */
    const void *in_data;       /* for LIS_STDIO_DATA */
    size_t in_len;
    size_t out_cap;            /* capture cap per stream in bytes; 0: 1 MiB */
    double timeout;            /* seconds; 0: none */
    int pty;                   /* run on a new pseudo-terminal (see lis_proc_pty_fd) */
    unsigned short rows, cols; /* initial window size for pty */
} lis_exec_spec;

typedef struct lis_buf {
    char *data; /* NUL-terminated; may contain NUL bytes */
    size_t len;
    uint64_t dropped; /* bytes dropped from the middle (head and tail kept) */
} lis_buf;

typedef struct lis_result {
    int exit_code; /* 0-255, 128+sig when killed, 127 when exec failed, -1 on timeout */
    int signal;    /* terminating signal, 0 if it exited */
    int timed_out;
    int exec_failed; /* the command could not be started (see err_msg) */
    char err_msg[256];
    double wall_seconds;
    lis_buf out, err;
    uint64_t memory_peak; /* sandbox memory peak during the command, when known */
    int oom_killed;       /* the OOM killer fired during the command */
} lis_result;

void lis_result_free(lis_result *r);

/* Runs a command to completion. */
int lis_exec(lis_sandbox *sb, const lis_exec_spec *spec, lis_result *res, lis_error *err);

/* Asynchronous commands: one pollable fd per running command, so one thread
 * can drive many sandboxes with poll/epoll. */
typedef struct lis_proc lis_proc;
int lis_exec_start(lis_sandbox *sb, const lis_exec_spec *spec, lis_proc **out, lis_error *err);
int lis_proc_fd(const lis_proc *p);     /* readable when lis_proc_step has work */
int lis_proc_pty_fd(const lis_proc *p); /* pty master (pty mode), else -1 */
pid_t lis_proc_pid(const lis_proc *p);  /* pid inside the sandbox */
/* Does the pending work without blocking; returns 1 when the command is done,
 * 0 when still running, -1 on error. */
int lis_proc_step(lis_proc *p, lis_error *err);
int lis_proc_signal(lis_proc *p, int sig, lis_error *err);
/* LIS_STDIO_PIPE: the caller's end of stream n (0 stdin: the write end; 1
 * stdout, 2 stderr: read ends), non-blocking and close-on-exec; -1 for other
 * modes or once closed. The fd stays p's (lis_proc_wait closes it). Once
 * lis_proc_step has returned 1, everything the command itself wrote is in the
 * pipes: read what is there (FIONREAD) rather than waiting for EOF, which a
 * background process holding the pipe can delay forever. */
int lis_proc_stdio_fd(const lis_proc *p, int n);
/* Closes the caller's end of stream n early: on stdin the command reads EOF;
 * on stdout/stderr its next write fails with EPIPE. */
void lis_proc_close_stdio(lis_proc *p, int n);
/* Blocks until done (if not already) and moves the result out; frees p. */
int lis_proc_wait(lis_proc *p, lis_result *res, lis_error *err);

/* ---- files (paths resolved inside the sandbox root, never outside) ------ */
/* They act as root inside does: a file or directory of another uid inside
 * (with a full map, a subordinate id the owner cannot touch) is reached by
 * doing the operation again as root of the mapped user namespace. */

/* Reads a regular file. Fails if it is larger than max bytes. */
int lis_file_read(lis_sandbox *sb, const char *path, size_t max, char **data, size_t *len,
                  lis_error *err);
/* Creates or replaces a regular file (parents created). Refuses to write
 * through a symlink at the final component. A replaced file keeps its owner
 * and, with mode 0, its mode. */
int lis_file_write(lis_sandbox *sb, const char *path, const void *data, size_t len, unsigned mode,
                   lis_error *err);
/* kind: 'f' file, 'd' dir, 'l' symlink, 'o' other; returns -1 with
 * err->code ENOENT when missing. */
int lis_file_stat(lis_sandbox *sb, const char *path, char *kind, uint64_t *size, lis_error *err);
/* Copies a host file/dir into the sandbox, or out of it, recursively.
 * Symlinks are copied as symlinks, never followed; sparse files stay sparse
 * (only their data extents are read and written). lis_copy_out is
 * lis_copy_out_opts with the default bounds, what it leaves out a warning
 * through the context. */
int lis_copy_in(lis_sandbox *sb, const char *host_src, const char *path, lis_error *err);
int lis_copy_out(lis_sandbox *sb, const char *path, const char *host_dst, lis_error *err);
/* Called once per entry a copy out leaves out: its path inside the copied
 * tree ("." for the tree itself) and why. */
typedef void (*lis_skip_fn)(void *arg, const char *path, const char *why);
/* A copy out of a sandbox and its bounds. A file whose data would pass
 * max_bytes, and every entry past one per 4 KiB of max_bytes (at least
 * 16384), is left out whole and reported; the first 100 entries left out are
 * reported one by one, the rest in one closing report (path "."). */
typedef struct lis_copy_opts {
    /* data bytes written at most (holes are not counted); 0: the sandbox's
     * writable budget (--disk); LIS_UNLIMITED: no bound */
    uint64_t max_bytes;
    int data_filter;     /* Python tarfile's "data" filter, as lis_copy_out_data */
    lis_skip_fn skipped; /* NULL: each one a warning through the context */
    void *arg;
    /* filled in */
    uint64_t bytes;         /* data bytes written */
    uint64_t skipped_count; /* entries left out by the bounds */
    uint64_t skipped_bytes; /* their data bytes */
} lis_copy_opts;
int lis_copy_out_opts(lis_sandbox *sb, const char *path, const char *host_dst, lis_copy_opts *o,
                      lis_error *err);
/* lis_copy_out with Python tarfile's "data" filter (PEP 706): symlinks that
 * are absolute or lead outside the exported tree (also through other links
 * of the tree), device nodes, fifos and sockets are not exported, each one
 * reported to skipped (NULL: a warning); setuid/setgid/sticky bits and
 * group/other write bits are cleared. Hard links come out as plain copies
 * (each counted against the bounds). */
int lis_copy_out_data(lis_sandbox *sb, const char *path, const char *host_dst, lis_skip_fn skipped,
                      void *arg, lis_error *err);

/* lstat of path (its last component not followed), and a symlink's target
 * into link (len bytes; may be NULL): done again as root of the mapped
 * namespace when the owner cannot see it. */
int lis_file_lstat(lis_sandbox *sb, const char *path, struct stat *st, char *link, size_t len,
                   lis_error *err);

/* ---- trees entry by entry (serve/'s archives) --------------------------- */

/* Runs fn(arg, result, err) with the power of the sandbox's root over its
 * files: when sb has a full id map, in a forked child that is root of the
 * user namespace mapping the sandbox's ids (lis_run_mapped: result,
 * result_len bytes, is shared; the child may allocate; what fn changes in
 * the caller's memory stays in the child; of the caller's fds only stdio,
 * the sandbox's own and keep stay open there), else as the caller, in the
 * calling thread. fn's result. */
int lis_sandbox_as_root(lis_sandbox *sb, int (*fn)(void *arg, void *result, lis_error *err),
                        void *arg, void *result, size_t result_len, const int *keep, size_t nkeep,
                        lis_error *err);

/* A regular file's data: [off, off + len), holes between extents. */
typedef struct lis_extent {
    uint64_t off, len;
} lis_extent;

typedef struct lis_walk_entry {
    const char *path; /* below the walked path: "" for itself, "d", "d/f" */
    struct stat st;   /* lstat (ids as the caller sees them) */
    const char *link; /* a symlink's target */
    int fd;           /* a regular file, open for reading; -1 for the others */
    const lis_extent *ext;
    size_t next;   /* its data extents, in order (the last may cover holes) */
    uint64_t data; /* their total */
} lis_walk_entry;
typedef int (*lis_walk_fn)(void *arg, const lis_walk_entry *e, lis_error *err);
/* Hands fn every directory (before what is in it), regular file and
 * symlink of path inside sb, never following a link (path's last component
 * neither); devices, fifos and sockets are left out. Bounded as a copy out
 * (o: max_bytes of data, one entry per 4 KiB of it; what they leave out is
 * reported to o->skipped and counted in o; o->bytes gets the data handed
 * out). fn returning -1 (with err) stops the walk. 0 or -1. */
int lis_walk(lis_sandbox *sb, const char *path, lis_copy_opts *o, lis_walk_fn fn, void *arg,
             lis_error *err);

/* Writing entries one by one below a directory of a sandbox (serve's archive
 * PUT). Each path is resolved inside the sandbox's root below dir (missing
 * parents made; symlinks followed inside the root, as dockerd's chrooted
 * extraction; the last component never: it is replaced). A file is written
 * to a temporary name beside it and renamed over the old one when done, so
 * each file is either the old one or the whole new one. What the writer made
 * that was not there before is removed again by lis_put_abort. */
typedef struct lis_put lis_put;
typedef struct lis_put_attr {
    unsigned mode;         /* permission bits (07777) */
    long long uid, gid;    /* inside the sandbox; -1, or an id the caller cannot give: root */
    struct timespec mtime; /* tv_nsec UTIME_OMIT: now */
} lis_put_attr;
lis_put *lis_put_new(lis_sandbox *sb, const char *dir, lis_error *err);
int lis_put_dir(lis_put *p, const char *path, const lis_put_attr *a, lis_error *err);
/* A new regular file: returns an fd to write its data into (pwrite at
 * offsets: what is not written stays a hole), then lis_put_file_done with its
 * size. */
int lis_put_file(lis_put *p, const char *path, lis_error *err);
int lis_put_file_done(lis_put *p, int fd, uint64_t size, const lis_put_attr *a, lis_error *err);
int lis_put_symlink(lis_put *p, const char *path, const char *target, const lis_put_attr *a,
                    lis_error *err);
/* A hard link to target, a regular file this writer made before (nothing
 * else: links stay within what was written). */
int lis_put_hardlink(lis_put *p, const char *path, const char *target, lis_error *err);
/* Sets the directories' modes and times (deepest first: a read-only one
 * received its entries before). */
int lis_put_finish(lis_put *p, lis_error *err);
/* Removes what the writer made that was not there (newest first). */
void lis_put_abort(lis_put *p);
void lis_put_free(lis_put *p);

/* Runs fn in a child process that is root of a user namespace mapping the
 * caller's uid and its 65535 subordinate ids (as root: ids 0-65535), so it can
 * chown files to those ids (e.g. extracting an image with its ownership).
 * result (result_len bytes) is shared with the child. Returns fn's result;
 * -1 with err->code ENOTSUP when the caller has no subordinate range. */
int lis_run_mapped(lis_ctx *ctx, int (*fn)(void *arg, void *result, lis_error *err), void *arg,
                   void *result, size_t result_len, lis_error *err);
/* rm -rf on the host; trees holding files of subordinate ids are removed
 * inside the mapped user namespace. */
int lis_host_rmtree(const char *path, lis_error *err);
/* rm -rf of name in directory pdfd as the caller only (no mapped retry):
 * no malloc, so a raw clone of a threaded process may call it; bounded stack
 * and fds however deep the tree. 0, or -1 with errno set. */
int lis_host_rmtree_at(int pdfd, const char *name);
/* mkdir -p on the host (for exporting results next to the caller). */
int lis_host_mkdir_p(const char *path, unsigned mode, lis_error *err);
/* The host's CPU time so far, summed over its CPUs (/proc/stat, in clock
 * ticks): *busy of *total. Two samples tell how much of the machine sat idle
 * in between (lis batch sizes its set-up by it). 0, or -1 when unreadable. */
int lis_host_cpu(uint64_t *busy, uint64_t *total);

/* ---- host checks ------------------------------------------------------- */

typedef enum { LIS_CHECK_OK, LIS_CHECK_WARN, LIS_CHECK_FAIL } lis_check_level;
typedef struct lis_check {
    char name[48];
    lis_check_level level;
    char detail[256];
    char fix[512];
} lis_check;
/* Fills up to max checks, returns how many. */
size_t lis_doctor(lis_ctx *ctx, lis_check *checks, size_t max);

#ifdef __cplusplus
}
#endif
#endif
