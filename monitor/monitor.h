/* monitor.h - inside monitor/ only: the policy, the records of a step, the
 * writable-layer scans, the hub. Built on lis.h and lis_net.h.
 *
 * The layers of monitor/, bottom-up (docs/architecture.md has the rows
 * the build computes):
 *   monitor.c            attach, steps, the public entry points
 *   notify.c             the hub thread answering notifications
 *   exec_verify.c        what runs after an exec let through, checked
 *   exec_canon.c         what an exec will run, resolved in the sandbox's root
 *   effects.c layer.c    a step's capability and its JSON; the writable layer
 *                        and the tmpfs mounts compared
 *   scan.c               what a step's file scan examines, within its budget
 *   records.c rules.c    process records made, taken, freed; rules matched
 *   watch.c              inotify on the layer's directories
 *   exec_read.c procmem.c policy.c udiff.c texts.c
 *                        an exec read from memory; a process's memory and
 *                        /proc; the policy file; unified diffs; old texts
 *
 * Bounds (each cut is stated in the step's "cut" object):
 *   MON_PATH_MAX / MON_ARG_MAX / MON_ARGS_MAX / MON_ARGV_BYTES  per exec
 *   MON_STEP_PROCS, MON_STEP_NET, MON_STEP_CONNECTS, MON_STEP_ALERTS  per step
 *   MON_LIVE_MAX  processes followed at once (their pidfds)
 *   MON_SCAN_MAX  entries of one scan of the writable layer
 *   MON_DIFF_FILE / MON_DIFF_STEP  diff text per file and per step
 *   MON_CACHE_BYTES  text kept per episode to diff the next change against
 */
#ifndef LIS_MONITOR_INTERNAL_H
#define LIS_MONITOR_INTERNAL_H

#include "lis_monitor.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#define MON_PATH_MAX 1024 /* bytes of an exec's path kept in its record */
/* bytes of an exec's path read and matched (PATH_MAX: the kernel refuses a
 * longer one, so no exec that runs is cut) */
#define MON_EXEC_PATH 4096
#define MON_ARG_MAX 512      /* bytes of one argument kept */
#define MON_ARGS_MAX 64      /* arguments kept */
#define MON_ARGV_BYTES 4096  /* bytes of all kept arguments */
#define MON_ARGC_COUNT 65536 /* arguments counted at most */
#define MON_STEP_PROCS 1024  /* process records per step */
#define MON_STEP_NET 512     /* proxy requests per step */
#define MON_STEP_CONNECTS 64 /* refused connection attempts listed per step (all counted) */
#define MON_STEP_ALERTS 128  /* alerts per step (all counted) */
#define MON_LIVE_MAX 4096    /* processes followed at once */
#define MON_SCAN_MAX 200000  /* entries of one writable-layer scan */
#define MON_SCAN_DEPTH 128   /* directory depth scanned */
#define MON_SCAN_BUDGET 0.1  /* seconds of scanning per scan; the rest goes on next time */
#define MON_NET_SETTLE 0.1   /* seconds a step's end waits for the proxy to end its connections */
#define MON_WATCH_MAX 8192   /* directories watched per sandbox (inotify) */
#define MON_PEND_MAX 65536   /* paths a cut scan leaves (past it: a full listing next) */
#define MON_ROOTS_MAX 3      /* the upper layer, /tmp, /dev/shm */
#define MON_STEP_FILES 2000  /* file changes listed per step (all counted) */
#define MON_TEXT_MAX 65536   /* a text file larger than this gets no diff */
#define MON_DIFF_FILE 8192   /* diff bytes per file */
#define MON_DIFF_STEP 65536  /* diff bytes per step */
#define MON_CACHE_BYTES (8u << 20) /* old text kept per episode */

/* ---- policy.c ---- */

typedef enum mon_rule_kind {
    MR_EXEC,          /* path and/or argv glob */
    MR_WRITE,         /* created, modified, renamed to, linked: path glob */
    MR_DELETE,        /* deleted: path glob */
    MR_RENAME,        /* renamed (from or to): path glob */
    MR_CONNECT,       /* host glob (a proxy request's host, a refused connect's address) */
    MR_PROCESSES,     /* per step, above N */
    MR_BYTES_WRITTEN, /* per step, above N */
    MR_BYTES_FETCHED, /* per step, above N */
    MR_IDLE_STEPS,    /* consecutive steps without a file change, above N */
} mon_rule_kind;
const char *mon_rule_kind_name(mon_rule_kind k);

typedef struct mon_rule {
    char name[64];
    mon_rule_kind kind;
    char *path, *argv, *host; /* globs, NULL when not given */
    char **except;            /* globs that exempt a path or host */
    size_t nexcept;
    uint64_t above;
    lis_policy_action action;
    int line;
} mon_rule;

struct lis_policy {
    char *file;
    mon_rule *rules;
    size_t n;
    char **deny_domains;          /* NULL-terminated */
    lis_policy_action on_unknown; /* LIS_ACT_FLAG (alert, the default) or LIS_ACT_STOP */
    char **exec_allow;            /* lis_policy_exec_allow, NULL-terminated, or NULL */
    char *exec_allow_text;        /* their text */
    char **write_allow;           /* lis_policy_write_allow, the same for writes */
    char *write_allow_text;
};

/* ---- procmem.c: a notifying process, read from outside ---- */

/* What /proc/TID/status says of a thread: its process (host and sandbox
 * pids) and the parent. 0, or -1 when gone. */
typedef struct mon_pstatus {
    pid_t tgid, nspid, ppid, nsppid_hint;
} mon_pstatus;
int mon_read_status(pid_t tid, mon_pstatus *st);
/* /proc/PID/stat: user+system CPU seconds and the state letter; -1 when gone. */
int mon_read_cpu(pid_t pid, double *cpu, char *state);
/* A NUL-terminated string at addr of thread tid's memory (process_vm_readv:
 * the same ptrace access check as /proc/TID/mem, without an open per
 * notification), at most max-1 bytes (a longer one is cut where no UTF-8
 * character is split): its length, -1 with errno (EFAULT, ESRCH, EPERM...)
 * when unreadable; *cut set when it was longer. */
ssize_t mon_read_str(pid_t tid, uint64_t addr, char *buf, size_t max, int *cut);
/* Up to MON_RANGES_MAX ranges in one process_vm_readv: lens[i] bytes at
 * addrs[i] into outs[i]. How many ranges, from the first, were read whole
 * (the kernel stops at the first range it cannot read). */
#define MON_RANGES_MAX 64
size_t mon_read_ranges(pid_t tid, const uint64_t *addrs, char *const *outs, const size_t *lens,
                       size_t n);
/* The first chunk of a string at addr that one read may ask for: to the end
 * of addr's page (the next may be unmapped), at most cap bytes. */
size_t mon_chunk_len(uint64_t addr, size_t cap);
/* mon_read_str's result from a first chunk of clen bytes already read at
 * addr (chunk NULL: none was): the chunk alone when it holds the string or
 * max-1 bytes of it, else the string read again from addr. */
ssize_t mon_str_from_chunk(pid_t tid, uint64_t addr, const char *chunk, size_t clen, char *buf,
                           size_t max, int *cut);
/* Up to n 8-byte words at addr: how many were read, -1 when none. */
ssize_t mon_read_words(pid_t tid, uint64_t addr, uint64_t *out, size_t n);
/* Up to len bytes at addr: how many were read, -1 with errno when none. */
ssize_t mon_read_mem(pid_t tid, uint64_t addr, void *out, size_t len);
/* The packets and connections the network namespace of pid refused for
 * want of a route (IPv4 OutNoRoutes + IPv6 Ip6OutNoRoutes, the kernel's
 * count: connect, sendto, sendmsg, sendmmsg, raw sockets alike); -1 when
 * unreadable. */
long long mon_read_noroutes(pid_t pid);
/* readlink of /proc/TID/<what> ("cwd", "fd/3"): the link text, not followed. */
int mon_read_link(pid_t tid, const char *what, char *buf, size_t len);

/* ---- exec_read.c: what an exec notification names ---- */

/* An exec as its notification named it, read from the caller's memory: kept
 * in a record (cut to the record's caps), or why it could not be read. argv
 * holds argc NUL-terminated strings in argv_len bytes. */
typedef struct mon_exec {
    char path[MON_EXEC_PATH + 64]; /* as given, made absolute from the link texts */
    int path_cut;
    char argv[MON_ARGV_BYTES];
    size_t argv_len, argc, argc_total;
    int argv_cut;
    char unread[96];
    char via[24];
    int by_fd; /* execveat(fd, "", AT_EMPTY_PATH): fd_nr names the file */
    int fd_nr;
} mon_exec;
/* Reads what the exec notification d of thread tid names into x (zeroed
 * first by the caller). */
struct seccomp_data;
void mon_exec_read(pid_t tid, const struct seccomp_data *d, mon_exec *x);

/* ---- exec_canon.c: what an exec will run ---- */

#define MON_EXEC_NAMES 6 /* the file, up to 4 interpreters, what ld.so loads */
/* The names an exec is matched by: name[0] the file its path resolves to
 * inside the sandbox's root, then each shebang's interpreter, then the
 * program ld.so is asked to load, each resolved the same way. */
typedef struct mon_exec_names {
    char name[MON_EXEC_NAMES][MON_EXEC_PATH];
    size_t n;
    int missing;   /* the path names nothing (the exec fails with ENOENT) */
    char why[160]; /* why not all could be resolved */
} mon_exec_names;
/* 0, or -1 with out->why when some name could not be resolved (out->n
 * says how many were). */
int mon_exec_resolve(pid_t tid, const mon_exec *x, mon_exec_names *out);
/* 1 when file (a resolved name) is a copy of of (a plain path), both inside
 * tid's root: the same inode, or regular files of one size whose first 256
 * KiB are the same bytes. */
int mon_exec_copy_of(pid_t tid, const char *file, const char *of);
/* The exec deny rule naming by a plain path a program of which one of nm's
 * names is a copy (mon_exec_copy_of); NULL when none. */
const mon_rule *mon_exec_copy_rule(const lis_policy *p, pid_t tid, const mon_exec_names *nm);

/* ---- exec_verify.c: what runs after an exec let through ---- */

typedef struct mon_verify mon_verify;
mon_verify *mon_verify_new(void);
void mon_verify_free(mon_verify *v);
/* Queues a check of what tgid runs once thread tid's exec is done (called
 * before the exec is answered: the file running then is the reference);
 * nm: what the exec resolved to. -1 when it cannot be queued (full). */
int mon_verify_add(mon_verify *v, lis_monitor *m, pid_t tid, pid_t tgid, double t_exec,
                   const char *spelled, const mon_exec_names *nm, double now);
/* Runs the checks due at now (takes each monitor's mu); the next one's
 * time, 0 when none is left. */
double mon_verify_run(mon_verify *v, double now);
/* Settles the checks of tgid's execs now: it is stopped in its next exec or
 * its exit_group (the hub calls it before answering either). */
void mon_verify_settle(mon_verify *v, const lis_monitor *m, pid_t tgid, double now);
/* Drops the checks of m (NULL: all). */
void mon_verify_drop(mon_verify *v, const lis_monitor *m);

/* ---- udiff.c ---- */

/* A unified diff (3 lines of context) of a -> b into out (at most cap bytes,
 * NUL-terminated); returns its length, with *cut set when it was cut. Text
 * of at most MON_TEXT_MAX bytes each. */
size_t mon_udiff(const char *a, size_t alen, const char *b, size_t blen, const char *path,
                 char *out, size_t cap, int *cut);
/* 1 when data is text: valid UTF-8, no NUL, few control bytes (anything
 * else is a binary file: "binary": true and no diff in its effects). */
int mon_is_text(const char *data, size_t len);

/* ---- the records of a step ---- */

typedef enum mon_pstate {
    MP_RUNNING, /* exec'd, not yet ended */
    MP_EXITED,  /* exit_group seen: exit_code */
    MP_KILLED,  /* ended without exit_group: a signal (signal, when known) */
    MP_REPLACED /* it exec'd again: the next record continues it */
} mon_pstate;
const char *mon_pstate_name(mon_pstate s);

typedef struct mon_proc {
    pid_t hpid;       /* host pid (of the thread group) */
    pid_t pid, ppid;  /* inside the sandbox; 0 when unknown */
    char *path;       /* as given, made absolute when known; "" unread; what ran
                      * when the check after the exec found another file */
    char *decoy;      /* the path shown at the check, when another file ran */
    int killed_after; /* killed by that check (denied names the rule) */
    char *argv;       /* argc strings, each NUL-terminated, in argv_len bytes */
    size_t argv_len, argc, argc_total;
    int argv_cut;
    char unread[96]; /* why path/argv could not be read ("" when read) */
    char via[24];    /* "execve", "execveat", "execveat(fd)" */
    char denied[64]; /* the rule that denied it */
    double t_exec, t_end;
    mon_pstate state;
    int exit_code, signal;
    double cpu;       /* seconds, -1 when unknown */
    int step;         /* the step it was exec'd in */
    int between;      /* exec'd between steps (reported with the next one) */
    int reported_end; /* its end was reported */
    int pidfd;
    void *ref; /* the hub's epoll reference */
} mon_proc;

typedef struct mon_net {
    char host[256], method[16], addr[48], rule[200];
    unsigned short port;
    int resolved, allowed, status;
    uint64_t up, down;
    double start, end;
    int between;
    char alert[64]; /* the connect rule that matched */
} mon_net;

typedef struct mon_connect {
    char addr[64];
    unsigned short port;
    int family;
    double t;
    char denied[64];
} mon_connect;

typedef struct mon_alert {
    char rule[64];
    lis_policy_action action;
    char what[320];
    double t;
} mon_alert;

/* ---- layer.c: the writable layer ---- */

typedef enum mon_fchange {
    MF_CREATED,
    MF_MODIFIED,
    MF_DELETED,
    MF_RENAMED,
    MF_LINKED,
} mon_fchange;
const char *mon_fchange_name(mon_fchange c);

typedef struct mon_file {
    mon_fchange change;
    char *path, *from; /* from: a rename's old path, a link's other path */
    char kind;         /* 'f' file, 'd' directory, 'l' symlink, 'o' other */
    unsigned mode;
    uint64_t size;
    int64_t size_delta;
    char *diff;            /* NULL when none; see diff_none */
    const char *diff_none; /* why there is no diff (binary, too large, ...) */
    int binary;            /* its contents are not UTF-8 text (mon_is_text) */
    int diff_cut;
    int between; /* found at the start of the step: happened since the last one */
    int removed; /* created and removed again before the scan (seen by its events) */
} mon_file;

typedef struct mon_entry {
    char *path; /* relative to the layer's root */
    uint64_t dev, ino, size;
    int64_t mtime, ctime; /* ns */
    unsigned mode, nlink;
    char kind; /* 'f' 'd' 'l' 'o', 'w' whiteout */
    int opaque;
} mon_entry;

typedef struct mon_scan {
    mon_entry *e;
    size_t n, cap;
    int cut;
} mon_scan;

/* ---- texts.c: the old text of small text files, by path ---- */

typedef struct mon_text {
    char *path, *text;
    size_t len;
    struct mon_text *next;
} mon_text;

typedef struct mon_texts {
    mon_text **bucket; /* a power of two of them */
    size_t nbucket, n, bytes;
    int full; /* a text was not kept (MON_CACHE_BYTES, or out of memory) */
} mon_texts;

size_t mon_str_hash(const char *s);
const mon_text *mon_texts_find(const mon_texts *c, const char *path);
/* Keeps text (taken over, freed when it does not fit) as path's. */
void mon_texts_put(mon_texts *c, const char *path, char *text, size_t len);
void mon_texts_drop(mon_texts *c, const char *path);
void mon_texts_rename(mon_texts *c, const char *from, const char *to);
void mon_texts_release(mon_texts *c);

/* ---- watch.c: inotify on the scanned directories ---- */

typedef struct mon_wd {
    int wd;
    char *path; /* the directory's path as the scan names it ("" the upper's root) */
} mon_wd;

typedef struct mon_watch {
    int fd;    /* inotify, non-blocking; -1: none */
    mon_wd *w; /* sorted by wd */
    size_t nw, capw;
    int lost;     /* events were lost: the next scan lists everything */
    int capped;   /* no event source (no instance, too many directories): full scans */
    char why[96]; /* why capped */
} mon_watch;

enum { MW_CHANGED, MW_BORN, MW_GONE, MW_MOVED /* renamed away */ };
/* An event's path (the directory's + "/" + name), its kind (MW_*), whether a
 * directory; -1 when it could not be kept (lost is set). */
typedef int (*mon_watch_fn)(void *arg, const char *path, int kind, int isdir);
void mon_watch_open(mon_watch *w);
void mon_watch_release(mon_watch *w);
/* Watches the directory dirfd, named path (an fd opened beneath the root). */
void mon_watch_add(mon_watch *w, int dirfd, const char *path);
/* Hands every queued event to fn. */
void mon_watch_drain(mon_watch *w, mon_watch_fn fn, void *arg);

/* ---- layer.c: the writable layer ---- */

/* A tree scanned: the overlay's upper layer (prefix ""), or a tmpfs of the
 * sandbox mounted at prefix ("/tmp", "/dev/shm"). */
typedef struct mon_root {
    int fd;
    const char *prefix;
    int overlay;
} mon_root;

/* What a scan has still to examine: a path, or a directory to list (from
 * offset off: a listing cut by the time budget goes on from there). */
typedef struct mon_item {
    char *path;
    long long off;
    unsigned char list, full; /* full: list its subdirectories too, changed or not */
} mon_item;

typedef struct mon_layer {
    int upper_fd;
    mon_root roots[MON_ROOTS_MAX];
    int nroots;
    mon_watch watch;
    mon_item *pend; /* left by the last scan's time budget */
    size_t npend, cappend;
    int forgot;                   /* a path left was not kept: a new full listing is due */
    int opened;                   /* mon_layer_open ran: what it opened is released */
    const lis_policy *policy;     /* its file rules: changes they match are listed past the bound */
    int lower_fd[LIS_MAX_LAYERS]; /* O_PATH roots of the lower layers, top first */
    int nlower;
    mon_scan last;   /* the layer as last seen */
    mon_texts cache; /* old text of small text files */
} mon_layer;

/* ---- scan.c: what a scan examines ---- */

typedef struct mon_pset {
    char **slot;
    size_t cap, n;
} mon_pset;

typedef struct mon_born {
    char *path; /* a name created (or renamed to) since the last scan */
    char kind;  /* 'd' or 'f' (anything else) */
    int examined;
} mon_born;

/* One scan's finding: the last scan's entries of the paths it examined
 * (old: shallow copies, sorted) and what those paths are now (now, sorted). */
typedef struct mon_delta {
    mon_scan old, now;
    unsigned char *oldbit; /* by index of the last scan: examined */
    mon_pset seen;         /* paths examined */
    mon_born *born;
    size_t nborn, capborn;
    int cut;
    char why[160];
} mon_delta;

int mon_open_beneath(int root, const char *path, int flags);
/* The root path lies in: the tmpfs mount it is below (or is, with self:
 * to list it), else the upper layer; *rel: the path within it. */
const mon_root *mon_root_of(const mon_layer *l, const char *path, int self, const char **rel);
const mon_entry *mon_find_path(const mon_scan *s, const char *path);
void mon_scan_release(mon_scan *s);
/* Examines what changed in l until deadline (lis_now's clock); -1 when out
 * of memory. */
int mon_scan_changes(mon_layer *l, double deadline, mon_delta *d);
/* The entry of path now: the delta's when examined, else the last scan's. */
const mon_entry *mon_now_find(const mon_layer *l, const mon_delta *d, const char *path);
/* The delta's findings become the last scan (after its comparison). */
void mon_scan_commit(mon_layer *l, mon_delta *d);
void mon_delta_release(mon_delta *d);

/* Opens the layers of sb. */
int mon_layer_open(mon_layer *l, lis_sandbox *sb, lis_error *err);
void mon_layer_release(mon_layer *l);
/* Scans what changed in the layer (the paths its events name, or all of it
 * when events were lost), for at most MON_SCAN_BUDGET seconds (between < 0,
 * the baseline: no time bound); compares with the last scan; appends the
 * changes to *files (*n of them, *cap allocated; at most max listed, all
 * counted in *total) with between set as given. Diffs take at most
 * *diff_budget bytes (decremented). A cut scan sets *scan_cut and says why
 * in why (what it left is examined by the next scan). Called without the
 * monitor's lock: the layer is its caller's alone. */
int mon_layer_diff(mon_layer *l, mon_file **files, size_t *n, size_t *cap, size_t *total,
                   size_t max, int between, size_t *diff_budget, int *scan_cut, char *why,
                   size_t whylen, lis_error *err);
void mon_file_release(mon_file *f);

/* ---- rules.c ---- */

/* Whether glob matches s (fnmatch, '*' crosses '/'). */
int mon_glob(const char *glob, const char *s);
/* The first rule of kind k matching; NULL when none. For MR_EXEC: path and
 * argv (joined by spaces); for files: path (absolute); for MR_CONNECT: host. */
const mon_rule *mon_rules_match(const lis_policy *p, mon_rule_kind k, const char *path,
                                const char *argv);
/* The first exec rule matching an exec spelled path, resolved to names (NULL
 * or n == 0: unresolved), with argv joined: a rule's path glob may match the
 * spelling or any name, and its except list exempts the exec only when every
 * resolved name is excepted (a spelling never exempts). *unknown set when a
 * rule could not be evaluated (no name resolved for an except list, an argv
 * glob against a cut argv that its kept part does not match): that rule is
 * returned, for the policy's on_unknown. */
const mon_rule *mon_rules_match_exec(const lis_policy *p, const char *path,
                                     const mon_exec_names *names, const char *argv, int argv_cut,
                                     int *unknown);
/* The first threshold rule of kind k whose limit value exceeds. */
const mon_rule *mon_rules_over(const lis_policy *p, mon_rule_kind k, uint64_t value);

/* ---- the monitor (monitor.c; the hub's thread fills it under mu) ---- */

struct lis_monitor {
    lis_monitor_hub *hub;
    lis_sandbox *sb;
    const lis_policy *policy;
    int listener; /* the seccomp listener */
    int evfd;     /* eventfd: a pause/stop fired */
    int net_watched;
    void *ref; /* the hub's epoll reference of the listener */
    int dead;  /* lis_monitor_free'd: the hub frees it */
    lis_monitor *next_dead;

    pthread_mutex_t mu; /* everything below */
    int step;           /* the current or next step, 0-based */
    int in_step;
    double step_t0;
    mon_proc **procs; /* exec'd and not yet reported as ended, in exec order */
    size_t nprocs, capprocs;
    size_t step_execs, step_procs_dropped, exec_retries, unknown_exits;
    size_t live; /* records with a pidfd */
    mon_net *net;
    size_t nnet, capnet, net_total;
    mon_connect *conns;
    size_t nconns, capconns, conn_total, conn_local;
    mon_alert *alerts;
    size_t nalerts, capalerts, alert_total;
    unsigned char fired[256]; /* threshold rules fired this step (by index) */
    lis_policy_action pending;
    char pending_rule[64];
    /* the step's files found at its begin (happened between steps) */
    mon_file *files;
    size_t nfiles, capfiles, files_total;
    size_t diff_budget;
    int scan_cut;
    char scan_why[160];
    int idle_steps;
    mon_layer layer;
    lis_monitor_call call;
    char *call_tool, *call_cmd;
    double cpu0; /* lis_stats at the begin: the last step's end's */
    uint64_t disk0;
    int have0;               /* cpu0, disk0 are set */
    pid_t pid1;              /* the sandbox's PID 1 (lis_sandbox_pid) */
    int exec_rules;          /* the policy has exec rules: execs are resolved */
    long long noroutes0;     /* mon_read_noroutes at the last step's end, -1 unknown */
    int writes_in_steps;     /* lis_monitor_opts.writes_in_steps */
    int quiet_end;           /* the last step ended with PID 1 alone in the sandbox */
    uint64_t acts, acts_end; /* notifications handled: all, and before the last end */
};

/* An alert of rule r (m->mu held); wakes the caller for pause and stop. */
void mon_alert_add(lis_monitor *m, const mon_rule *r, double t, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* An alert of rule r that could not be evaluated: the policy's on_unknown
 * action, never a silent pass (m->mu held). */
void mon_alert_unknown(lis_monitor *m, const mon_rule *r, double t, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- notify.c: the hub ---- */

/* Registers m's listener with the hub (its thread answers from now on). */
int mon_hub_add(lis_monitor_hub *hub, lis_monitor *m, lis_error *err);
/* Unregisters m; the hub's thread frees it (and its records) when it is
 * not in use. */
void mon_hub_remove(lis_monitor_hub *hub, lis_monitor *m);
/* Frees a monitor's records and itself (the hub's thread, or hub_free). */
void mon_monitor_destroy(lis_monitor *m);

/* ---- records.c (m->mu held for each) ---- */

void mon_proc_free(mon_proc *p);
/* The pid inside the sandbox of a host pid: from a record, else /proc. */
pid_t mon_ns_pid_of(lis_monitor *m, pid_t host);
/* The running record of host process tgid, NULL when none. */
mon_proc *mon_running_proc(lis_monitor *m, pid_t tgid);
/* What the hub knows of an exec's process. */
typedef struct mon_exec_ids {
    pid_t tgid;        /* host */
    pid_t nspid, ppid; /* in the sandbox, 0 when unknown */
    int stale;         /* a running record of tgid is of an ended process */
} mon_exec_ids;
/* Records exec x: a new running record (denied: one that never ran, the
 * rule named), the running record of the same process it continues replaced
 * (*prevp: it, to move its pidfd) or dropped as a PATH search's earlier try.
 * NULL when past the bound or out of memory (counted). */
mon_proc *mon_exec_record(lis_monitor *m, const mon_exec *x, const mon_exec_ids *ids,
                          const char *denied, double now, mon_proc **prevp);
/* The step's process records copied into e (ended ones no longer needed
 * freed); -1 out of memory. */
int mon_records_take(lis_monitor *m, lis_effects *e);

/* ---- effects.c ---- */

struct lis_effects {
    int step;
    double t0, t1;
    char *tool, *command;
    mon_proc *procs; /* copies: argv and path owned here */
    size_t nprocs, procs_total, exec_retries, unknown_exits;
    mon_file *files;
    size_t nfiles, files_total;
    int scan_cut, diff_cut;
    char scan_why[160];
    mon_net *net;
    size_t nnet, net_total;
    mon_connect *conns;
    size_t nconns, conn_total, conn_local;
    size_t unrouted; /* the kernel's count of refused attempts (no route) */
    mon_alert *alerts;
    size_t nalerts, alert_total;
    /* resources */
    double cpu, wall;
    uint64_t mem_peak, bytes_written, disk_delta, nprocs_now;
    int have_stats;
    unsigned capability;
    char cap_why[3][96];
};
/* The capability bits of e (and their reasons). */
void mon_classify(lis_effects *e);

#endif
