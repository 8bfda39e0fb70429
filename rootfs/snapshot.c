/* snapshot.c - snapshots and forks (issue 15, docs/snapshots.md).
 *
 * A snapshot is an image of the store made of one layer - the files a
 * sandbox wrote, captured by lis_sandbox_capture - over its parent: the
 * image the sandbox runs on (itself maybe a snapshot), or the --rootfs
 * directory it was made from. Its digest is sha256 over the parent and the
 * layer (records and contents, in name order), so the same state captured
 * twice is stored once. lis_store_resolve gives its chain of layers, which
 * the runtime stacks as overlayfs lower layers: a fork costs a copy of what
 * the sandbox wrote, never of its image. */
#include "rf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The digest is computed in the copying child, which may not allocate: the
 * context is made here, before the fork, and only updated there. */
static void sha_update(void *arg, const void *data, size_t len)
{
    EVP_DigestUpdate((EVP_MD_CTX *)arg, data, len);
}

static void sha_end(void *arg, unsigned char out[64])
{
    unsigned int n = 0;
    EVP_DigestFinal_ex((EVP_MD_CTX *)arg, out, &n);
}

/* "sha256:<hex>" when dir is a blob of this store, else "" . */
static void store_digest_of(const char *data_dir, const char *dir, char *out, size_t len)
{
    char real[PATH_MAX], blobs[PATH_MAX + 32];
    out[0] = 0;
    if (!realpath(data_dir, real))
        return;
    snprintf(blobs, sizeof blobs, "%s/rootfs/blobs/sha256/", real);
    size_t n = strlen(blobs);
    if (!strncmp(dir, blobs, n) && rf_valid_hex(dir + n))
        snprintf(out, len, "sha256:%s", dir + n);
}

static int depth_of(const char *chain)
{
    int n = 1;
    for (; *chain; chain++)
        n += *chain == ':';
    return n;
}

int lis_rootfs_snapshot(const char *data_dir, lis_sandbox *sb, const char *ref,
                        lis_snapshot_result *res, lis_error *err)
{
    memset(res, 0, sizeof *res);
    char name[512], tag[128];
    if (ref && rf_parse_ref(ref, name, sizeof name, tag, sizeof tag, err) < 0)
        return -1;
    const char *chain = lis_sandbox_rootfs(sb);
    int depth = depth_of(chain) + 1;
    if (depth > LIS_MAX_LAYERS)
        return lis_fail(err, E2BIG,
                        "sandbox %s runs on a chain of %d layers: a snapshot of it "
                        "would pass the limit of %d (snapshot a sandbox made from an image "
                        "nearer the base)",
                        lis_sandbox_name(sb), depth - 1, LIS_MAX_LAYERS);
    /* the parent: the top layer's image when the chain comes from this store */
    char top[PATH_MAX];
    snprintf(top, sizeof top, "%.*s", (int)strcspn(chain, ":"), chain);
    char parent[80];
    store_digest_of(data_dir, top, parent, sizeof parent);
    snprintf(res->parent, sizeof res->parent, "%s", parent[0] ? parent : chain);
    int lock = rf_store_open(data_dir, 0, err);
    if (lock < 0)
        return -1;
    char tmp[PATH_MAX], layer[PATH_MAX + 16];
    int rc = -1;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    cJSON *meta = NULL;
    if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
        lis_fail(err, ENOMEM, "cannot set up sha256");
        goto out_lock;
    }
    char head[4200];
    int hl = snprintf(head, sizeof head, "lis-snapshot-v1\nparent %s\n", res->parent);
    EVP_DigestUpdate(md, head, (size_t)hl);
    if (rf_store_tmpdir(data_dir, "snap", tmp, sizeof tmp, err) < 0)
        goto out_lock;
    snprintf(layer, sizeof layer, "%s/layer", tmp);
    lis_capture_opts co = {.hash = sha_update, .hash_end = sha_end, .arg = md};
    if (lis_sandbox_capture(sb, layer, &co, &res->capture, err) < 0) {
        rf_rm_tree(tmp);
        goto out_lock;
    }
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", res->capture.digest[i]);
    snprintf(res->digest, sizeof res->digest, "sha256:%s", hex);
    lis_error ignore;
    if (rf_blob_exists(data_dir, hex)) {
        res->existed = 1;
        lis_host_rmtree(tmp, &ignore);
    } else {
        meta = cJSON_CreateObject();
        cJSON_AddStringToObject(meta, "kind", "snapshot");
        cJSON_AddStringToObject(meta, parent[0] ? "parent" : "parent_dir", res->parent);
        char src[160];
        snprintf(src, sizeof src, "sandbox %s", lis_sandbox_name(sb));
        cJSON_AddStringToObject(meta, "source", src);
        cJSON_AddStringToObject(meta, "format", "snapshot");
        cJSON_AddNumberToObject(meta, "size", (double)res->capture.bytes);
        cJSON_AddNumberToObject(meta, "files", (double)res->capture.files);
        cJSON_AddNumberToObject(meta, "depth", depth);
        cJSON_AddStringToObject(meta, "holds",
                                "files only: the sandbox's writable layer and "
                                "/tmp; no processes, memory, /dev/shm or connections");
        if (rf_store_commit(data_dir, layer, hex, meta, err) < 0) {
            lis_host_rmtree(tmp, &ignore);
            goto out_lock;
        }
        rmdir(tmp);
    }
    if (ref && rf_tag_write(data_dir, ref, hex, res->ref, sizeof res->ref, err) < 0)
        goto out_lock;
    if (lis_store_resolve(data_dir, res->digest, res->rootfs, sizeof res->rootfs, err) < 0)
        goto out_lock;
    res->depth = depth_of(res->rootfs);
    rc = 0;
out_lock:
    cJSON_Delete(meta);
    EVP_MD_CTX_free(md);
    close(lock);
    return rc;
}

int lis_rootfs_snapshot_setup(lis_ctx *ctx, const lis_sandbox_spec *spec, lis_setup_fn prepare,
                              void *arg, lis_snapshot_result *res, lis_setup_stage *stage,
                              lis_error *err)
{
    lis_sandbox *sb = NULL;
    memset(res, 0, sizeof *res);
    *stage = LIS_SETUP_CREATE;
    if (lis_sandbox_create(ctx, spec, &sb, err) < 0)
        return -1;
    int rc = 0;
    *stage = LIS_SETUP_PREPARE;
    if (prepare && prepare(arg, sb, err) < 0)
        rc = -1;
    if (rc == 0) {
        *stage = LIS_SETUP_SNAPSHOT;
        rc = lis_rootfs_snapshot(lis_ctx_data_dir(ctx), sb, NULL, res, err);
    }
    lis_error ignore;
    lis_sandbox_destroy(sb, &ignore);
    return rc;
}

/* The forks are made by a few threads at once: a sandbox's creation is
 * mostly waiting (clone3, mounts, lis-init's handshake), so 16 on 2 cores
 * take about half the time they take one after another. */
typedef struct fork_job {
    lis_ctx *ctx;
    const lis_fork_opts *o;
    const lis_sandbox_spec *spec;
    const char *parent;
    lis_sandbox **out;
    lis_error *errs;
    int n, next, made;
    pthread_mutex_t mu;
} fork_job;

static void *fork_worker(void *arg)
{
    fork_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int i = j->next < j->n ? j->next++ : -1;
        pthread_mutex_unlock(&j->mu);
        if (i < 0)
            return NULL;
        if (j->o && j->o->cancelled && j->o->cancelled(j->o->cancel_arg)) {
            if (j->errs)
                lis_fail(&j->errs[i], ECANCELED, "fork %d of sandbox %s: cancelled", i + 1,
                         j->parent);
            continue;
        }
        lis_sandbox_spec spec = *j->spec;
        spec.name = j->o && j->o->names ? j->o->names[i] : NULL;
        lis_error e = {0};
        int rc = j->o && j->o->create ? j->o->create(j->o->create_arg, &spec, i, &j->out[i], &e)
                                      : lis_sandbox_create(j->ctx, &spec, &j->out[i], &e);
        if (rc < 0 || !j->out[i]) {
            j->out[i] = NULL;
            if (!e.msg[0])
                snprintf(e.msg, sizeof e.msg, "fork %d of sandbox %s failed", i + 1, j->parent);
        } else {
            memset(&e, 0, sizeof e);
            pthread_mutex_lock(&j->mu);
            j->made++;
            pthread_mutex_unlock(&j->mu);
        }
        if (j->errs)
            j->errs[i] = e;
    }
}

int lis_sandbox_fork(lis_ctx *ctx, lis_sandbox *sb, int n, const lis_fork_opts *o,
                     lis_sandbox **out, lis_error *errs, lis_snapshot_result *snap, lis_error *err)
{
    lis_snapshot_result local, *s = snap ? snap : &local;
    if (n < 1)
        return lis_fail(err, EINVAL, "fork: the number of forks must be at least 1 (got %d)", n);
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    if (lis_rootfs_snapshot(lis_ctx_data_dir(ctx), sb, o ? o->tag : NULL, s, err) < 0)
        return -1;
    lis_sandbox_spec spec = {0};
    if (o && o->spec) {
        spec = *o->spec;
    } else {
        spec.env = lis_sandbox_env(sb);
        spec.net = lis_sandbox_net(sb);
        spec.limits = lis_sandbox_limits(sb);
        spec.upper = LIS_UPPER_TMPFS;
    }
    spec.rootfs = s->rootfs;
    fork_job j = {.ctx = ctx,
                  .o = o,
                  .spec = &spec,
                  .parent = lis_sandbox_name(sb),
                  .out = out,
                  .errs = errs,
                  .n = n};
    pthread_mutex_init(&j.mu, NULL);
    /* two per core: a creation is partly waiting (for the clone child, the kernel) */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = o && o->threads  ? o->threads
                  : o && o->create ? 1
                                   : 2 * (cores > 0 ? (int)cores : 1);
    if (threads > n)
        threads = n;
    if (threads > 16)
        threads = 16;
    pthread_t t[16];
    int started = 0;
    for (int i = 1; i < threads; i++) /* this thread is one of them */
        if (pthread_create(&t[started], NULL, fork_worker, &j) == 0)
            started++;
    fork_worker(&j);
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    pthread_mutex_destroy(&j.mu);
    return j.made;
}
