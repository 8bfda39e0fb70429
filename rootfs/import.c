/* import.c - `lis rootfs import`: format detection and rootfs tarballs; OCI
 * layouts and docker archives go on to oci.c, every image ends in image.c. */
#include "rf.h"

#include <archive.h>
#include <archive_entry.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Does the first entry of the archive look like an image archive (OCI or docker)? */
static int peek_image_archive(const char *path, int *is_image, lis_error *err)
{
    struct archive *a = rf_archive_open(path, NULL, NULL, err);
    if (!a)
        return -1;
    struct archive_entry *e;
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) {
        rf_archive_close(a);
        return lis_fail(err, EINVAL, "%s: the archive is empty", path);
    }
    if (r < ARCHIVE_WARN) {
        lis_fail(err, EIO, "%s: %s (not a tar archive, or truncated)", path,
                 archive_error_string(a));
        rf_archive_close(a);
        return -1;
    }
    const char *n = archive_entry_pathname(e);
    while (n && n[0] == '.' && n[1] == '/')
        n += 2;
    char first[80] = "";
    if (n)
        snprintf(first, sizeof first, "%.*s", (int)strcspn(n, "/"), n);
    static const char *const known[] = {"blobs", "oci-layout", "index.json", "manifest.json",
                                        "repositories"};
    *is_image = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(first, known[i]))
            *is_image = 1;
    char hex[65];
    snprintf(hex, sizeof hex, "%.64s", first);
    if (strlen(first) >= 64 && rf_valid_hex(hex))
        *is_image = 1;
    rf_archive_close(a);
    return 0;
}

static int import_image_archive(const char *data_dir, const char *path, const char *source,
                                const char *refsel, const lis_rootfs_opts *o,
                                lis_rootfs_result *res, lis_error *err)
{
    char tmp[4096];
    if (rf_store_tmpdir(data_dir, "unpack", tmp, sizeof tmp, err) < 0)
        return -1;
    int rc = -1;
    rf_sha *sha = rf_sha_new();
    rf_extract *x = rf_extract_new(tmp, err);
    rf_progress pg = {.fn = o ? o->progress : NULL,
                      .arg = o ? o->progress_arg : NULL,
                      .phase = "unpack"};
    struct stat st;
    if (stat(path, &st) == 0)
        pg.total = (uint64_t)st.st_size;
    struct archive *a = x && sha ? rf_archive_open(path, sha, &pg, err) : NULL;
    if (a) {
        const char *b = strrchr(path, '/');
        rc = rf_extract_layer(x, a, 0, b ? b + 1 : path, err);
        rf_archive_close(a);
    }
    if (rc == 0) {
        char hex[65], p[4200];
        rf_sha_hex(sha, hex);
        snprintf(p, sizeof p, "%s/oci-layout", tmp);
        if (access(p, F_OK) == 0) {
            rc = rf_import_oci_dir(data_dir, tmp, "oci-archive", source, refsel, o, res, err);
        } else {
            snprintf(p, sizeof p, "%s/manifest.json", tmp);
            if (access(p, F_OK) == 0)
                rc = rf_import_docker_dir(data_dir, tmp, hex, source, o, res, err);
            else
                rc = lis_fail(err, EINVAL,
                              "%s looks like an image archive but has neither "
                              "oci-layout nor manifest.json (is it complete?)",
                              path);
        }
    }
    rf_extract_free(x);
    rf_sha_free(sha);
    rf_rm_tree(tmp);
    return rc;
}

int lis_rootfs_import(const char *data_dir, const char *path, const lis_rootfs_opts *o,
                      lis_rootfs_result *res, lis_error *err)
{
    lis_rootfs_result dummy;
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof *res);
    if (!data_dir || !path || !*path)
        return lis_fail(err, EINVAL, "import: no file given (lis rootfs import PATH)");
    char name[512], tag[160];
    if (o && o->name && rf_parse_ref(o->name, name, sizeof name, tag, sizeof tag, err) < 0)
        return -1;
    /* PATH:TAG selects one image of an OCI layout (as skopeo's oci:PATH:TAG) */
    char pbuf[PATH_MAX];
    const char *refsel = NULL;
    struct stat st;
    if (stat(path, &st) < 0) {
        int e = errno;
        snprintf(pbuf, sizeof pbuf, "%s", path);
        char *colon = strrchr(pbuf, ':');
        if (!colon || strchr(colon, '/') || !colon[1] || stat((*colon = 0, pbuf), &st) < 0)
            return lis_fail_errnum(err, e, "cannot import %s", path);
        refsel = colon + 1;
        path = pbuf;
    }
    char source[PATH_MAX];
    if (!realpath(path, source))
        snprintf(source, sizeof source, "%s", path);
    int lock = rf_store_open(data_dir, 0, err);
    if (lock < 0)
        return -1;
    int rc;
    if (S_ISDIR(st.st_mode)) {
        char p[4200];
        snprintf(p, sizeof p, "%s/oci-layout", path);
        if (access(p, F_OK) != 0)
            rc = lis_fail(err, EINVAL,
                          "%s is a directory but not an OCI image layout (no "
                          "oci-layout file); import a tarball of a root tree instead "
                          "(tar -C DIR -czf root.tar.gz .)",
                          path);
        else
            rc = rf_import_oci_dir(data_dir, path, "oci-layout", source, refsel, o, res, err);
    } else if (!S_ISREG(st.st_mode)) {
        rc = lis_fail(err, EINVAL, "cannot import %s: not a regular file or directory", path);
    } else {
        int is_image = 0;
        rc = peek_image_archive(path, &is_image, err);
        if (rc == 0 && is_image) {
            rc = import_image_archive(data_dir, path, source, refsel, o, res, err);
        } else if (rc == 0 && refsel) {
            rc = lis_fail(err, EINVAL,
                          "%s is a plain rootfs tarball: ':%s' (an image tag) only "
                          "applies to OCI layouts",
                          path, refsel);
        } else if (rc == 0) {
            char hex[65];
            snprintf(res->format, sizeof res->format, "tarball");
            rc = rf_sha256_file(path, hex, err);
            char ref[600];
            if (o && o->name) {
                snprintf(ref, sizeof ref, "%s", o->name);
            } else {
                rf_name_from_path(path, name, sizeof name);
                snprintf(ref, sizeof ref, "%s:latest", name);
            }
            if (rc == 0 && rf_blob_exists(data_dir, hex)) {
                res->existed = 1;
            } else if (rc == 0) {
                cJSON *meta = cJSON_CreateObject();
                cJSON_AddStringToObject(meta, "source", source);
                cJSON_AddStringToObject(meta, "format", "tarball");
                const char *layers[] = {path};
                rc = rf_build_image(data_dir, hex, layers, NULL, 1, 0, meta, o, res, err);
                cJSON_Delete(meta);
            }
            if (rc == 0)
                rc = rf_finish_tag(data_dir, hex, ref, res, err);
        }
    }
    close(lock);
    return rc;
}
