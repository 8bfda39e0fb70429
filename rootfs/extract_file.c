/* extract_file.c - an archive file (a layer, a rootfs tarball) read into the
 * extractor (extract.c): its bytes hashed while they stream (the digest an
 * import checks against the manifest), the progress reported, and the file
 * read ahead (posix_fadvise) but never held whole in memory. */
#include "rf.h"

#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct rf_src {
    int fd;
    rf_sha *sha;
    rf_progress *pg;
    char *buf;
    size_t cap;
} rf_src;

static la_ssize_t src_read(struct archive *a, void *arg, const void **out)
{
    rf_src *s = arg;
    for (;;) {
        ssize_t r = read(s->fd, s->buf, s->cap);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            archive_set_error(a, errno, "read: %s", strerror(errno));
            return -1;
        }
        if (s->sha && r > 0)
            rf_sha_update(s->sha, s->buf, (size_t)r);
        if (s->pg && s->pg->fn && r > 0) {
            s->pg->done += (uint64_t)r;
            s->pg->fn(s->pg->arg, s->pg->phase, s->pg->done, s->pg->total);
        }
        *out = s->buf;
        return r;
    }
}

static int src_close(struct archive *a, void *arg)
{
    (void)a;
    rf_src *s = arg;
    if (s->sha) {
        ssize_t r;
        while ((r = read(s->fd, s->buf, s->cap)) > 0)
            rf_sha_update(s->sha, s->buf, (size_t)r);
    }
    close(s->fd);
    free(s->buf);
    free(s);
    return ARCHIVE_OK;
}

struct archive *rf_archive_open(const char *path, rf_sha *sha, rf_progress *pg, lis_error *err)
{
    rf_src *s = calloc(1, sizeof *s);
    if (!s) {
        lis_oom(err);
        return NULL;
    }
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (s->fd < 0) {
        lis_fail_errno(err, "cannot open %s", path);
        free(s);
        return NULL;
    }
    posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    s->cap = 1 << 20;
    s->buf = malloc(s->cap);
    s->sha = sha;
    s->pg = pg;
    struct archive *a = archive_read_new();
    if (!s->buf || !a) {
        close(s->fd);
        free(s->buf);
        free(s);
        if (a)
            archive_read_free(a);
        lis_oom(err);
        return NULL;
    }
    archive_read_support_filter_all(a);
    archive_read_support_format_tar(a);
    if (archive_read_open(a, s, NULL, src_read, src_close) != ARCHIVE_OK) {
        lis_fail(err, EIO,
                 "%s: %s (not a tar archive, or compressed in a format this "
                 "libarchive cannot read)",
                 path, archive_error_string(a));
        archive_read_free(a);
        return NULL;
    }
    return a;
}

void rf_archive_close(struct archive *a)
{
    if (a)
        archive_read_free(a);
}

int rf_extract_file(rf_extract *x, const char *path, int whiteouts, const char *what,
                    const char *want_hex, rf_progress *pg, lis_error *err)
{
    rf_sha *sha = want_hex ? rf_sha_new() : NULL;
    if (want_hex && !sha)
        return lis_oom(err);
    struct archive *a = rf_archive_open(path, sha, pg, err);
    if (!a) {
        rf_sha_free(sha);
        return -1;
    }
    int rc = rf_extract_layer(x, a, whiteouts, what, err);
    rf_archive_close(a);
    if (rc == 0 && sha) {
        char hex[65];
        rf_sha_hex(sha, hex);
        if (strcmp(hex, want_hex))
            rc = lis_fail(err, EBADMSG,
                          "%s: sha256 mismatch (expected %.12s, got %.12s): the "
                          "blob is corrupt; refusing it",
                          what, want_hex, hex);
    }
    rf_sha_free(sha);
    return rc;
}
