/* rf.h - internals of the liblis-rootfs plugin (not part of the public API). */
#ifndef LIS_RF_H
#define LIS_RF_H

#include "rootfs.h"

#include <stdint.h>
#include <stdio.h>

struct archive;
typedef struct cJSON cJSON;

/* ---- util.c ------------------------------------------------------------- */

/* Reads a whole (small) file; *len set; NUL-terminated. NULL on failure (errno). */
char *rf_read_file(const char *path, size_t max, size_t *len);
/* Writes data to path atomically (temp file + rename). */
int rf_write_atomic(const char *path, const void *data, size_t len, lis_error *err);
int rf_mkdirs(const char *path, mode_t mode);
/* Removes a tree without following symlinks, fixing permissions on the way. */
int rf_rm_tree_at(int dirfd, const char *name);
int rf_rm_tree(const char *path);
/* Total bytes of regular files under path. */
uint64_t rf_tree_size(const char *path);

/* sha256 (OpenSSL EVP). */
typedef struct rf_sha rf_sha;
rf_sha *rf_sha_new(void);
void rf_sha_update(rf_sha *s, const void *data, size_t len);
void rf_sha_hex(rf_sha *s, char hex[65]); /* finishes; s stays allocated */
void rf_sha_free(rf_sha *s);
void rf_sha256_mem(const void *data, size_t len, char hex[65]);
int rf_sha256_file(const char *path, char hex[65], lis_error *err);
int rf_valid_hex(const char *s);
/* "sha256:<hex>" -> hex pointer into s, or NULL. */
const char *rf_digest_hex(const char *s);

/* ---- store (util.c) ------------------------------------------------------ */

/* Creates <data_dir>/rootfs/{blobs/sha256,meta,tags,tmp}; returns a lock fd
 * (flock shared or exclusive) to close when done, -1 on error. */
#define RF_LOCK_TRY 2 /* exclusive, without waiting: EWOULDBLOCK when another holds it */
int rf_store_open(const char *data_dir, int exclusive, lis_error *err);
/* A fresh directory under <data_dir>/rootfs/tmp. */
int rf_store_tmpdir(const char *data_dir, const char *what, char *out, size_t len, lis_error *err);
void rf_blob_path(const char *data_dir, const char *hex, char *out, size_t len);
void rf_meta_path(const char *data_dir, const char *hex, char *out, size_t len);
int rf_blob_exists(const char *data_dir, const char *hex);
/* Moves tmp (an extracted tree) to blobs/sha256/<hex> and writes its metadata. */
int rf_store_commit(const char *data_dir, const char *tmp, const char *hex, cJSON *meta,
                    lis_error *err);
/* Splits and checks NAME[:TAG]; writes the canonical "name:tag". */
int rf_parse_ref(const char *ref, char *name, size_t nlen, char *tag, size_t tlen, lis_error *err);
int rf_tag_write(const char *data_dir, const char *ref, const char *hex, char *canon, size_t clen,
                 lis_error *err);
/* Derives an image name from a file name: "ubuntu-base-24.04.tar.gz" -> "ubuntu-base-24.04". */
void rf_name_from_path(const char *path, char *out, size_t len);

/* ---- extract.c ------------------------------------------------------------ */

typedef struct rf_extract rf_extract;
/* root: an existing empty directory the tree is built in. */
rf_extract *rf_extract_new(const char *root, lis_error *err);
/* Applies one archive (a layer or a whole rootfs). whiteouts: interpret
 * .wh.NAME / .wh..wh..opq (OCI layers). what names the archive in errors. */
int rf_extract_layer(rf_extract *x, struct archive *a, int whiteouts, const char *what,
                     lis_error *err);
/* Applies deferred directory modes and times. */
int rf_extract_finish(rf_extract *x, lis_error *err);
void rf_extract_stats(const rf_extract *x, uint64_t *files, uint64_t *bytes, uint64_t *skipped);
void rf_extract_free(rf_extract *x);
/* Keep the archive's owners (only meaningful as root of a mapped namespace). */
void rf_extract_keep_owner(rf_extract *x, int on);

/* ---- reading archives with hashing and progress (extract.c) --------------- */

typedef struct rf_progress {
    lis_rootfs_progress fn;
    void *arg;
    const char *phase;
    uint64_t done, total;
} rf_progress;

/* Opens the file at path for reading by libarchive (all formats and filters);
 * when sha is non-NULL, every byte read is hashed into it. */
struct archive *rf_archive_open(const char *path, rf_sha *sha, rf_progress *pg, lis_error *err);
/* Closes; also reads the rest of the file into sha so the digest is complete. */
void rf_archive_close(struct archive *a);
/* Extracts path into x; when want_hex is set the file's sha256 must match. */
int rf_extract_file(rf_extract *x, const char *path, int whiteouts, const char *what,
                    const char *want_hex, rf_progress *pg, lis_error *err);

/* ---- oci.c ---------------------------------------------------------------- */

/* The host platform as OCI names it: "amd64", "arm64" ... */
const char *rf_host_arch(void);
/* Picks a manifest descriptor from an image index for platform ("os/arch[/variant]"
 * or NULL for the host); returns the descriptor (owned by index) or NULL. */
cJSON *rf_pick_manifest(cJSON *index, const char *platform, lis_error *err);
int rf_is_index_type(const char *media_type);
/* Adds the interesting parts of an image config to meta. */
void rf_meta_add_config(cJSON *meta, const char *config_json);
/* Imports an OCI layout directory / docker-archive directory. */
/* refsel: the org.opencontainers.image.ref.name to import (PATH:TAG), or NULL. */
int rf_import_oci_dir(const char *data_dir, const char *dir, const char *format, const char *source,
                      const char *refsel, const lis_rootfs_opts *o, lis_rootfs_result *res,
                      lis_error *err);
int rf_import_docker_dir(const char *data_dir, const char *dir, const char *archive_hex,
                         const char *source, const lis_rootfs_opts *o, lis_rootfs_result *res,
                         lis_error *err);

/* ---- image.c -------------------------------------------------------------- */

/* Shared tail of every import: layers (files) in order into a new image. */
int rf_build_image(const char *data_dir, const char *hex, const char *const *layers,
                   const char *const *layer_hex, size_t nlayers, int whiteouts, cJSON *meta,
                   const lis_rootfs_opts *o, lis_rootfs_result *res, lis_error *err);
/* Tags (ref or the default name) and fills res->ref. */
int rf_finish_tag(const char *data_dir, const char *hex, const char *ref, lis_rootfs_result *res,
                  lis_error *err);

#endif
