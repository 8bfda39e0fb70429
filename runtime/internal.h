/* internal.h - declarations shared inside runtime/ only.
 *
 * The layers of runtime/ (each file calls only files of lower rows) are the
 * generated tables of docs/architecture.md, checked by scripts/check-layers.py
 * in `make test`.
 * The runtime knows no proxy: --net proxy is net/ (net/lis_net.h) over the
 * listen_port hook and the ext slots.
 * lis-init (init/) is its own static program: it shares proto.h only. */
#ifndef LIS_INTERNAL_H
#define LIS_INTERNAL_H

#include "lis.h"
#include <limits.h>
#include <pthread.h>
#include <linux/filter.h>
#include <stdarg.h>

#define LIS_NAME_MAX 64

/* error.c (lis_fail and lis_wrap are in lis.h) */
/* Reports a warning through the context's sink (stderr by default). */
void lis_warn(const lis_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A subordinate id range from /etc/subuid or /etc/subgid. */
typedef struct lis_subid {
    unsigned long start, count;
} lis_subid;

struct lis_ctx {
    char run_dir[PATH_MAX];
    char data_dir[PATH_MAX];
    char init_path[PATH_MAX];
    int init_fd;          /* O_PATH fd of lis-init, exec'd in every sandbox */
    struct lis_seccomp {  /* seccomp.c: sealed memfds, compiled once */
        int main_fd;      /* loaded before lis-init: everything Docker denies */
        int cmd_fd;       /* loaded by each command: unshare too */
        int notify_fd[4]; /* by spec.monitor bits (1..3): loaded by PID 1 with a listener */
    } seccomp;
    uid_t uid;
    gid_t gid;
    char newuidmap[64], newgidmap[64]; /* empty when not installed */
    lis_subid subuid, subgid;          /* count 0 when none */
    /* A user namespace with the full subordinate map, made once (newuidmap
     * runs twice per context, not per sandbox); sandboxes nest under it. */
    pthread_mutex_t holder_lock;
    int holder_fd;
    /* What only sandbox creation needs (seccomp program, uid map tools),
     * made on first use so that `lis sandbox exec/ls` pay nothing for it. */
    pthread_mutex_t prep_lock;
    int warned_unmapped; /* sandbox.c: the unmapped-rootfs warning was given */
    int prepared;
    struct lis_cgroot *cgroot; /* cgroups.c: discovered on first use */
    struct lis_plan_cache {    /* mounts.c: the last mount plan, for the next sandbox */
        pthread_mutex_t mu;
        struct lis_mount_plan *plan;
    } plans;
    void *ext; /* ext.c: the slot of the layer above (net/) */
    void (*ext_release)(void *ext);
    void (*warn)(void *arg, const char *line);
    void *warn_arg;
};

/* The sandbox handle. */
struct lis_sandbox {
    lis_ctx *ctx;
    char name[LIS_NAME_MAX + 1];
    char state_dir[PATH_MAX]; /* <run_dir>/<name>, "" when none (tmpfs, ephemeral) */
    char layer_dir[PATH_MAX]; /* <data_dir>/sandboxes/<name>, "" when tmpfs upper */
    char ctl_path[PATH_MAX];  /* listening socket of a persistent sandbox */
    char rootfs[PATH_MAX];
    pid_t pid;
    int pidfd;
    int life_fd; /* ephemeral: our end of the lifeline, -1 otherwise */
    int root_fd; /* O_PATH of /proc/<pid>/root, opened lazily */
    int persist;
    int full_map;
    char **env;          /* default + spec env, NULL-terminated */
    double created;      /* CLOCK_REALTIME seconds */
    struct lis_cg *cg;   /* cgroups.c: its cgroup, NULL when no limits */
    int fallback_limits; /* no cgroup: rlimits and PID 1's memory watchdog */
    uint64_t disk_limit; /* the writable budget (LIS_UNLIMITED: none) */
    lis_limits limits;   /* as asked at create (0: default); a fork's default */
    int net;             /* lis_net_mode */
    int listener_fd;     /* spec.listen_port's, until taken; else -1 */
    int monitor_fd;      /* spec.monitor's seccomp listener, until taken; else -1 */
    int paused;          /* state.c: paused (also in meta.json when state_dir) */
    int scratch_fd;      /* lis-init's fd of the set-up tmpfs (capture.c), or -1 */
    void *ext;           /* ext.c: the slot of the layer above (net/) */
    void (*ext_release)(void *ext);
};

/* The writable budget of a sandbox in bytes, LIS_UNLIMITED for none. */
static inline uint64_t lis_disk_budget(const lis_limits *l)
{
    return l->disk_bytes ? l->disk_bytes : LIS_DEFAULT_DISK;
}

/* usage.c: bytes of the writable budget in use (the sandbox's tmpfs seen
 * through PID 1, plus a disk upper layer under layer_dir when not ""). */
uint64_t lis_disk_usage(pid_t pid1, const char *layer_dir);

/* copytree.c: copies the contents of directory sfd into directory dfd (both
 * O_RDONLY|O_DIRECTORY) as an overlay layer: whiteouts, fifos, modes, owners
 * (keep_owner), times, hard links, xattrs; nothing followed, no malloc (safe
 * in a raw clone3 child). 0 or -errno, where = the entry it failed on. */
typedef struct lis_tree_copy {
    int keep_owner;
    char *arena; /* LIS_COPY_ARENA bytes the caller mapped, PROT_NONE (a CLONE_VM child); NULL: mapped here */
    void (*hash)(void *arg, const void *data, size_t len); /* NULL: none */
    void *hash_arg;
    uint64_t max_bytes;               /* of data (holes not counted); 0: no bound */
    uint64_t files, bytes, reflinked; /* added to; bytes: file sizes */
    uint64_t data_bytes;              /* added to: bytes of data (not holes) */
    char where[256];
} lis_tree_copy;
int lis_copy_tree(int sfd, int dfd, lis_tree_copy *c);
#define LIS_COPY_ARENA (512ull << 20) /* reserved, not committed (MAP_NORESERVE) */

/* vmclone.c: clone3 with CLONE_VM on stacks of its own (spawn.c). Only on
 * x86-64 (the trampoline is assembly) and not under ASan, whose shadow of a
 * stack it did not see made is wrong in a child that never returns: there,
 * spawn.c forks the owner as before. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LIS_VM_CLONE 0
#endif
#endif
#ifndef LIS_VM_CLONE
#define LIS_VM_CLONE 1
#endif
#else
#define LIS_VM_CLONE 0
#endif
/* the sandbox child's stack: its code's frames and target()'s recursion */
#define LIS_VM_STACK (8u << 20)
#define LIS_VM_STACK_MID (64u << 10) /* the full-map path's transient child */
#define LIS_VM_GUARD (1u << 20)      /* PROT_NONE below each stack: larger than any frame */
typedef struct lis_vm_stacks {
    char *base, *arena, *stack[2]; /* stack[0]: the sandbox child's, [1]: the mid's */
    size_t len;
} lis_vm_stacks;
int lis_vm_stacks_map(lis_vm_stacks *st); /* 0 or an errno */
void lis_vm_stacks_unmap(lis_vm_stacks *st);
struct clone_args;
/* clone3(ca | CLONE_VM) on st->stack[which]; the child runs fn(arg) and never
 * returns into the caller's frame. The pid, or -1 with errno. */
long lis_vm_clone3(struct clone_args *ca, const lis_vm_stacks *st, int which, void (*fn)(void *),
                   void *arg);

/* util.c: the bottom helpers, no context */
/* /proc/<pid>/stat read into buf: a pointer to its state field (what follows
 * "(name) "), or NULL when the process is gone. */
char *lis_proc_stat(pid_t pid, char *buf, size_t len);
/* fn(pid, its stat from the state field on, arg) for every process in the
 * pid namespace of pid1 (pid1 included) until fn returns non-zero; that
 * value, 0, or -errno when pid1's namespace cannot be read. */
int lis_pidns_each(pid_t pid1, int (*fn)(pid_t pid, const char *stat, void *arg), void *arg);
int lis_mkdir_p(const char *path, unsigned mode, lis_error *err);
/* K=V lists: extra replaces base key by key; everything copied (NULL: out of memory). */
char **lis_env_merge(const char *const *base, const char *const *extra);
void lis_env_free(char **env);
int lis_valid_name(const char *name);
/* An absolute path without "..". */
int lis_path_check(const char *path, lis_error *err);
/* rmtree.c: rm -rf of a tree we own; no malloc (safe in raw clones of a
 * threaded owner), bounded stack and fds. 0 or -errno. */
int lis_rmtree_here(const char *path);
int lis_rmtree_at(int pdfd, const char *name);
/* The number in a file (a sysctl: proc_sys/name, proc_sys NULL: /proc/sys), else dflt. */
long lis_read_long(const char *path, long dflt);
long lis_read_sysctl(const char *proc_sys, const char *name, long dflt);
/* 1 when kernel.apparmor_restrict_unprivileged_userns=1 under proc_sys (NULL:
 * /proc/sys): a user namespace comes without capabilities unless a profile
 * allows it. For the set-up errors that a missing profile causes. */
int lis_apparmor_restricts_userns(const char *proc_sys);
#define LIS_APPARMOR_HINT                                                                          \
    " (AppArmor restricts unprivileged user namespaces on this host: install lis's profile with "  \
    "sudo scripts/apparmor/install.sh /path/to/lis; run `lis doctor`)"

/* context.c */
/* Compiles the seccomp program and finds newuidmap once; thread-safe. */
int lis_ctx_prepare_spawn(lis_ctx *ctx, lis_error *err);

/* seccomp.c */
/* Compiles the filters (struct lis_seccomp) into sealed memfds. */
int lis_seccomp_compile(struct lis_seccomp *out, lis_error *err);
void lis_seccomp_close(struct lis_seccomp *sc);

/* meta.c: a sandbox's meta.json (crun's status.c is the model: one struct
 * owns the on-disk record, written to a temporary file then renamed). */
typedef struct lis_meta {
    char name[LIS_NAME_MAX + 1];
    pid_t pid;
    unsigned long long starttime; /* of pid: with it, names one process forever */
    char rootfs[PATH_MAX];
    char layer_dir[PATH_MAX]; /* "" with a tmpfs upper layer */
    double created;           /* CLOCK_REALTIME seconds */
    int persist, full_map, paused;
    int net;             /* lis_net_mode */
    int cgroup;          /* limits by a cgroup (else the fallback) */
    int scratch_fd;      /* lis-init's fd of the set-up tmpfs, -1 when none */
    lis_limits asked;    /* as asked at create (0: default); a fork's default */
    uint64_t disk_limit; /* LIS_UNLIMITED: none */
    char **env;          /* NULL-terminated; owned when read */
} lis_meta;
/* Reads <state_dir>/meta.json into *m (lis_meta_release frees it): 0, or -1
 * with *err (ENOENT: none; EINVAL: not a record lis wrote). */
int lis_meta_read(const char *state_dir, lis_meta *m, lis_error *err);
void lis_meta_release(lis_meta *m);
/* Writes *m as <state_dir>/meta.json: a temporary file, then renamed. */
int lis_meta_write(const char *state_dir, const lis_meta *m, lis_error *err);
/* sb as its record (its PID 1's start time read now), written to its state_dir. */
int lis_meta_save(lis_sandbox *sb, lis_error *err);
/* Alive and the same process that the record names. */
int lis_meta_alive(const lis_meta *m);
/* Whether sb is paused right now: its meta.json says so (another process may
 * have paused it since sb was opened), or, without state, the handle does. */
int lis_meta_paused(lis_sandbox *sb);
/* fn(the state dir, its name, its record or NULL when it has none that can
 * be read, arg) for each sandbox directory in run_dir, until fn returns
 * non-zero: that value; 0; or -1 when run_dir cannot be read. */
typedef int (*lis_meta_fn)(const char *dir, const char *name, const lis_meta *m, void *arg);
int lis_meta_each(const char *run_dir, lis_meta_fn fn, void *arg, lis_error *err);

/* files.c, for copy.c */
/* openat2 of rel below the sandbox root rootfd (RESOLVE_IN_ROOT, no magic links). */
int lis_open_in(int rootfd, const char *rel, int flags);
/* The parent directory of a sandbox path as an O_PATH fd (made when mkdirs),
 * its last component in last. */
int lis_open_parent(lis_sandbox *sb, const char *path, int mkdirs, char *last, lis_error *err);
/* After an operation failed with *err: when that was EACCES/EPERM on a full
 * map, fn again as root of the mapped namespace (its result, res_len bytes
 * at res); else -1 with *err as it was. */
int lis_files_redo_mapped(lis_sandbox *sb, int (*fn)(void *, void *, lis_error *), void *arg,
                          void *res, size_t res_len, lis_error *err);

/* userns.c */
int lis_write_id_maps(lis_ctx *ctx, pid_t pid, int full, lis_error *err);
/* The fd of the context's fully mapped holder user namespace (lazily made). */
int lis_holder_userns(lis_ctx *ctx, lis_error *err);
/* Removes a directory tree; with full maps, inside a mapped user namespace. */
int lis_rmtree(lis_ctx *ctx, const char *path, int full_map, lis_error *err);

/* spawn.c: clone3 into new namespaces, set up the root, exec lis-init. */
typedef struct lis_spawn_req {
    const lis_sandbox_spec *spec;
    const char *name;
    const char *rootfs;
    const char *upper_dir, *work_dir; /* NULL with a tmpfs upper */
    int listen_fd;                    /* persistent: ctl.sock, else -1 */
    int full_map;
    const struct lis_cg *cg; /* cgroup to clone PID 1 into, or NULL */
    int *listener_fd;        /* spec.listen_port: set to it (init it to -1) */
    int *monitor_fd;         /* spec.monitor: set to PID 1's seccomp listener (init -1) */
    int *scratch_fd;         /* set to lis-init's fd of the set-up tmpfs */
    /* Fallback limits, when cg is NULL (0 = none): processes per sandbox
     * (RLIMIT_NPROC counts per user namespace), memory (PID 1's watchdog),
     * and nice 10 for everything in it. */
    uint64_t fb_pids, fb_memory;
    int fb_nice;
    uint64_t fsize; /* RLIMIT_FSIZE (disk upper layer), 0 = none */
} lis_spawn_req;
int lis_spawn(lis_ctx *ctx, const lis_spawn_req *req, pid_t *pid, int *pidfd, int *life_fd,
              lis_error *err);

/* landlock.c: in the clone child, after pivot_root and no_new_privs:
 * execute only beneath exec_allow (and init_fd), write only beneath
 * write_allow (and the harmless devices); NULL lists restrict nothing. 0 or
 * an errno. */
int lis_landlock_apply(const char *const *exec_allow, const char *const *write_allow, int init_fd);

/* sandbox.c */
int lis_sandbox_root_fd(lis_sandbox *sb, lis_error *err);
int lis_sandbox_connect(lis_sandbox *sb, lis_error *err);

/* cgroups.c */
#include "cgroups.h"

/* doctor.c: the user namespace check, split so that tests can feed it fake
 * sysctls (a directory laid out like /proc/sys) and fake probe results. */
typedef struct lis_userns_probe {
    int unshare_err; /* errno of unshare(CLONE_NEWUSER | CLONE_NEWNS), 0: it worked */
    int map_err;     /* then errno of writing uid_map/gid_map from inside, 0: it worked */
    int mount_err;   /* then errno of making / private in the new mount ns, 0: it worked */
} lis_userns_probe;
/* Tries the three steps in a child process, as this user, right now. */
void lis_userns_probe_run(lis_userns_probe *p);
/* The verdict and its fix; self is the lis binary a fix should name. */
void lis_doctor_userns(const char *proc_sys, const lis_userns_probe *p, const char *self,
                       lis_check *out);
#endif
