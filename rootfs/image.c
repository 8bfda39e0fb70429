/* image.c - the shared tail of import (import.c, oci.c) and pull (pull.c):
 * layers -> extracted tree -> one rename into the store, then the tag. */
#include "rf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int rf_finish_tag(const char *data_dir, const char *hex, const char *ref, lis_rootfs_result *res,
                  lis_error *err)
{
    snprintf(res->digest, sizeof res->digest, "sha256:%s", hex);
    if (!ref)
        return 0;
    return rf_tag_write(data_dir, ref, hex, res->ref, sizeof res->ref, err);
}

/* Applies the layers in order, then the deferred directory metadata. */
struct apply_job {
    rf_extract *x;
    const char *const *layers, *const *layer_hex;
    size_t nlayers;
    int whiteouts;
    rf_progress *pg;
};

struct apply_result {
    uint64_t files, size, skipped;
};

static int apply_layers(void *arg, void *result, lis_error *err)
{
    struct apply_job *j = arg;
    int rc = 0;
    for (size_t i = 0; i < j->nlayers && rc == 0; i++) {
        char what[160];
        if (j->nlayers == 1 && !j->whiteouts)
            snprintf(what, sizeof what, "%s",
                     strrchr(j->layers[i], '/') ? strrchr(j->layers[i], '/') + 1 : j->layers[i]);
        else if (j->layer_hex && j->layer_hex[i])
            snprintf(what, sizeof what, "layer %zu/%zu (sha256:%.12s)", i + 1, j->nlayers,
                     j->layer_hex[i]);
        else
            snprintf(what, sizeof what, "layer %zu/%zu", i + 1, j->nlayers);
        rc = rf_extract_file(j->x, j->layers[i], j->whiteouts, what,
                             j->layer_hex ? j->layer_hex[i] : NULL, j->pg, err);
    }
    if (rc == 0)
        rc = rf_extract_finish(j->x, err);
    if (rc == 0 && result) {
        struct apply_result *r = result;
        rf_extract_stats(j->x, &r->files, &r->size, &r->skipped);
    }
    return rc;
}

int rf_build_image(const char *data_dir, const char *hex, const char *const *layers,
                   const char *const *layer_hex, size_t nlayers, int whiteouts, cJSON *meta,
                   const lis_rootfs_opts *o, lis_rootfs_result *res, lis_error *err)
{
    char tmp[4096];
    if (rf_store_tmpdir(data_dir, "img", tmp, sizeof tmp, err) < 0)
        return -1;
    rf_extract *x = rf_extract_new(tmp, err);
    if (!x) {
        rf_rm_tree(tmp);
        return -1;
    }
    rf_progress pg = {.fn = o ? o->progress : NULL,
                      .arg = o ? o->progress_arg : NULL,
                      .phase = "extract"};
    for (size_t i = 0; i < nlayers; i++) {
        struct stat st;
        if (stat(layers[i], &st) == 0)
            pg.total += (uint64_t)st.st_size;
    }
    struct apply_job job = {x, layers, layer_hex, nlayers, whiteouts, &pg};
    struct apply_result ar = {0};
    /* With a subordinate id range, extract as root of a namespace that maps
     * it, so files keep their owners (apt/dpkg inside the sandbox need them);
     * otherwise every file belongs to the caller. */
    lis_error perr = {0};
    lis_ctx_opts copts = {.data_dir = data_dir};
    lis_ctx *ctx = lis_ctx_new(&copts, &perr);
    int rc = -1, mapped = 0;
    if (ctx) {
        rf_extract_keep_owner(x, 1);
        rc = lis_run_mapped(ctx, apply_layers, &job, &ar, sizeof ar, err);
        mapped = !(rc < 0 && err->code == ENOTSUP);
        lis_ctx_free(ctx);
    }
    if (!mapped) {
        rf_extract_keep_owner(x, 0);
        rc = apply_layers(&job, &ar, err);
    }
    cJSON_AddBoolToObject(meta, "ownership_kept", mapped && rc == 0);
    if (rc == 0) {
        res->files = ar.files;
        res->size = ar.size;
        res->skipped = ar.skipped;
        cJSON_AddNumberToObject(meta, "size", (double)res->size);
        cJSON_AddNumberToObject(meta, "files", (double)res->files);
        cJSON_AddNumberToObject(meta, "skipped_devices", (double)res->skipped);
        rc = rf_store_commit(data_dir, tmp, hex, meta, err);
    }
    rf_extract_free(x);
    if (rc < 0)
        rf_rm_tree(tmp);
    return rc;
}
