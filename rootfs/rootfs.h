/* rootfs.h - the content-addressed rootfs store, as used by the runtime and
 * the CLI. Import and pull live in the liblis-rootfs plugin (rootfs/import.c,
 * rootfs/pull.c); only the lookup is linked into the lis binary. */
#ifndef LIS_ROOTFS_H
#define LIS_ROOTFS_H

#include "lis.h"
#include <stddef.h>

/* Store layout under <data_dir>/rootfs/:
 *   blobs/sha256/<hex>/        one extracted root filesystem per digest, or
 *                              one snapshot layer (the files a sandbox wrote)
 *   meta/sha256/<hex>.json     its metadata; a snapshot's names its "parent"
 *                              ("sha256:<hex>", or "parent_dir" for a sandbox
 *                              made from a --rootfs directory)
 *   tags/<name>/<tag>          a file holding "sha256:<hex>\n"
 * Resolves "NAME[:TAG]" (TAG defaults to latest) or "sha256:<hex>" to the
 * extracted directory, or for a snapshot to its chain of layers, top first
 * ("snap:parent:...:base", as lis_sandbox_spec.rootfs takes it). */
int lis_store_resolve(const char *data_dir, const char *ref, char *dir, size_t len, lis_error *err);

/* ---- the liblis-rootfs plugin (all rootfs sources but store.c) ---------------- */

#include <stdint.h>

/* Progress of a long operation: phase ("import", "download", "extract"),
 * bytes done of total (total 0 when unknown). Called often; keep it cheap. */
typedef void (*lis_rootfs_progress)(void *arg, const char *phase, uint64_t done, uint64_t total);

typedef struct lis_rootfs_opts {
    const char *name;             /* NAME[:TAG] to tag the image with; NULL: derived */
    lis_rootfs_progress progress; /* NULL: silent */
    void *progress_arg;
    /* pull only */
    int insecure;         /* allow plain HTTP / unverified TLS for any registry
                                      (localhost and 127.0.0.0/8 always use HTTP) */
    const char *platform; /* "os/arch[/variant]"; NULL: the host's */
    int retries;          /* per request; 0: 3 */
} lis_rootfs_opts;

/* What an import or pull produced. */
typedef struct lis_rootfs_result {
    char digest[72];  /* "sha256:<hex>" - the store key */
    char ref[512];    /* the NAME:TAG it was tagged as */
    char format[24];  /* "tarball", "oci-layout", "oci-archive", "docker-archive", "registry" */
    int existed;      /* it was already in the store: nothing was extracted */
    uint64_t size;    /* bytes of regular files in the tree */
    uint64_t files;   /* entries extracted */
    uint64_t skipped; /* device nodes and sockets skipped */
} lis_rootfs_result;

/* Imports a rootfs tarball (.tar, .tar.gz, .tar.xz, .tar.zst, ...), an OCI
 * image layout directory or tar, or a docker-archive tar into the store. */
int lis_rootfs_import(const char *data_dir, const char *path, const lis_rootfs_opts *opts,
                      lis_rootfs_result *res, lis_error *err);

/* Pulls REF ([HOST[:PORT]/]NAME[:TAG|@sha256:DIGEST]) from a registry over the
 * OCI distribution API into the store. */
int lis_rootfs_pull(const char *data_dir, const char *ref, const lis_rootfs_opts *opts,
                    lis_rootfs_result *res, lis_error *err);

typedef struct lis_rootfs_image {
    char ref[512]; /* NAME:TAG, or "" for an untagged image */
    char digest[72];
    char source[512]; /* the file or registry reference it came from */
    char format[24];
    uint64_t size;
    double created;    /* unix time of the import */
    char parent[4096]; /* a snapshot's parent: "sha256:<hex>" or a directory; else "" */
} lis_rootfs_image;

/* Lists tagged images (one row per tag) and untagged ones (ref ""). *out is
 * malloc'ed; free() it. */
int lis_rootfs_list(const char *data_dir, lis_rootfs_image **out, size_t *n, lis_error *err);
/* The stored metadata of an image as a JSON document (malloc'ed). */
int lis_rootfs_inspect(const char *data_dir, const char *ref, char **json, lis_error *err);
/* Tags an image already in the store: lis_rootfs_tag(d, "sha256:..." or "a:b", "c:d"). */
int lis_rootfs_tag(const char *data_dir, const char *ref, const char *new_ref, lis_error *err);
/* Removes a tag, and the image when no tag is left and no snapshot is made
 * on it (then gc removes it after its last snapshot); a digest removes the
 * image and every tag pointing to it, refused while a snapshot is made on it.
 * *removed_image tells whether files were deleted. */
int lis_rootfs_rm(const char *data_dir, const char *ref, int *removed_image, lis_error *err);
/* What lis_rootfs_unstore_unused did. */
enum {
    LIS_UNSTORE_DONE,   /* its files were moved to trash: lis_rootfs_trash_rm(trash) */
    LIS_UNSTORE_GONE,   /* not in the store */
    LIS_UNSTORE_TAGGED, /* kept: a tag names it */
    LIS_UNSTORE_PARENT, /* kept: another image is made on it (try again when that is gone) */
    LIS_UNSTORE_BUSY,   /* the store's lock is held: try again later */
};
/* Takes an image made for one's own use (lis serve's fork snapshots) out of the
 * store when nothing needs it: no tag names it and it is no image's parent. It
 * does not wait for the store's lock (the caller is an event loop): BUSY then.
 * The files move to trash (PATH_MAX + 64 bytes) at once, so nothing starts on
 * them; deleting them is lis_rootfs_trash_rm's (slow for a big image). Whether a
 * sandbox runs on the image is the caller's to know. */
int lis_rootfs_unstore_unused(const char *data_dir, const char *digest, char *trash, size_t tlen,
                              int *what, lis_error *err);
int lis_rootfs_trash_rm(const char *trash);
/* Deletes untagged images (except those in keep, NULL-terminated directory
 * paths or chains "a:b:c" still in use, and the parents of every image kept)
 * and leftovers of interrupted imports. */
int lis_rootfs_gc(const char *data_dir, const char *const *keep, int *removed, uint64_t *freed,
                  lis_error *err);

/* ---- snapshots and forks (rootfs/snapshot.c, docs/snapshots.md) ----------------- */

typedef struct lis_snapshot_result {
    char digest[72];          /* "sha256:<hex>" of the snapshot image */
    char ref[512];            /* the NAME:TAG it was tagged as, or "" */
    char parent[4096];        /* "sha256:<hex>" of its parent image, or the parent directory */
    char rootfs[4096];        /* its chain, for lis_sandbox_spec.rootfs */
    int depth;                /* layers in that chain, the base included */
    int existed;              /* the same layer over the same parent was in the store */
    lis_capture_info capture; /* what was captured and how long the sandbox was paused */
} lis_snapshot_result;

/* Snapshots sb into the store: lis_sandbox_capture into the store's scratch
 * space, then one content-addressed image (digest over the parent and the
 * layer) recording its parent; tagged ref (NAME[:TAG]) when not NULL. A
 * snapshot holds files only, never processes. */
int lis_rootfs_snapshot(const char *data_dir, lis_sandbox *sb, const char *ref,
                        lis_snapshot_result *res, lis_error *err);

/* A set-up made once and snapshot, for many sandboxes to start on (lis
 * batch's template: the task's directories and `git init`, made by the
 * image's own tools; --fork-from-setup: a row's set-up): a sandbox made from
 * spec (lis_sandbox_create; give it a fixed hostname for the same files, so
 * the same digest, every time), prepare(arg, sb) run in it, its files
 * snapshot (untagged: `lis rootfs gc` removes it once nothing runs on it),
 * the sandbox destroyed. res->rootfs is the chain to start on. 0, or -1 with
 * *err and *stage saying what failed. */
typedef enum lis_setup_stage {
    LIS_SETUP_CREATE,  /* making the sandbox */
    LIS_SETUP_PREPARE, /* prepare failed: its error */
    LIS_SETUP_SNAPSHOT /* the snapshot */
} lis_setup_stage;
typedef int (*lis_setup_fn)(void *arg, lis_sandbox *sb, lis_error *err);
int lis_rootfs_snapshot_setup(lis_ctx *ctx, const lis_sandbox_spec *spec, lis_setup_fn prepare,
                              void *arg, lis_snapshot_result *res, lis_setup_stage *stage,
                              lis_error *err);

/* Makes fork i (0-based) from spec (its rootfs is the snapshot's chain, its
 * name NULL or the one asked for). Default: lis_sandbox_create. */
typedef int (*lis_fork_create_fn)(void *arg, const lis_sandbox_spec *spec, int i, lis_sandbox **out,
                                  lis_error *err);
typedef struct lis_fork_opts {
    /* Template of the forks: limits, net, env, upper, persist... (rootfs is
     * replaced by the snapshot's chain). NULL: a default spec with sb's env
     * and network mode, tmpfs upper. */
    const lis_sandbox_spec *spec;
    const char *const *names;  /* n names, or NULL: generated */
    const char *tag;           /* tag the snapshot with this NAME[:TAG]; NULL: untagged */
    lis_fork_create_fn create; /* NULL: lis_sandbox_create */
    void *create_arg;
    /* Forks made at once, by that many threads (max 16). 0: two per core with the
     * default create, 1 with a create of the caller's (set more only when
     * it may be called from several threads at once). */
    int threads;
    /* Asked before each fork (from the fork threads): non-zero stops there;
     * the forks not begun are not made (errs[i]: "cancelled"). NULL: never. */
    int (*cancelled)(void *arg);
    void *cancel_arg;
} lis_fork_opts;

/* One snapshot of sb, then n sandboxes on it, each independent of the others
 * and of sb (each its own upper layer over the snapshot). Each fork succeeds
 * or fails on its own: out[i] is NULL and errs[i] says why when fork i
 * failed. Returns how many were made; -1 (err) when the snapshot failed,
 * then no fork is made. snap (may be NULL) receives the snapshot. */
int lis_sandbox_fork(lis_ctx *ctx, lis_sandbox *sb, int n, const lis_fork_opts *o,
                     lis_sandbox **out, lis_error *errs, lis_snapshot_result *snap, lis_error *err);

#endif
