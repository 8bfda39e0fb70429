/* fuzz_extract.c - the archive import (rootfs/extract.c): the input is a tar
 * archive extracted into a fresh directory, the way `lis rootfs import` and
 * the OCI layers go. The first byte picks the mode: bit 0 OCI whiteouts,
 * bit 1 the same archive applied twice (a second layer over the first).
 *
 * Layout, rebuilt for every input:
 *     <tmp>/outer/sentinel          a file that must stay as it is
 *     <tmp>/outer/d/root/           the tree the archive is extracted into
 * Invariants: outer holds exactly {sentinel, d} and d exactly {root} (nothing
 * was created or removed outside the tree, whatever the names, links and
 * whiteouts say); the sentinel keeps its inode, one link, mode and content
 * (no hard link to it, nothing written through a link); no descriptor is
 * leaked; the tree can be removed again. Run it as an unprivileged user. */
#include "fuzz.h"
#include "rf.h"

#include <archive.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[256], outer[300], sentinel[320], mid[320], root[340];
static const char SENTINEL[] = "outside the tree\n";

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    FUZZ_CHECK(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* The names in dir, sorted, joined by '/'. */
static void names(const char *dir, char *out, size_t len)
{
    struct dirent **v;
    int n = scandir(dir, &v, NULL, alphasort);
    FUZZ_CHECK(n >= 0);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(v[i]->d_name, ".") && strcmp(v[i]->d_name, "..")) {
            strncat(out, "/", len - strlen(out) - 1);
            strncat(out, v[i]->d_name, len - strlen(out) - 1);
        }
        free(v[i]);
    }
    free(v);
}

static void cleanup(void) { rf_rm_tree(base); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *t = getenv("TMPDIR");
    snprintf(base, sizeof base, "%s/lis-fuzz-extract-XXXXXX", t && *t ? t : "/tmp");
    FUZZ_CHECK(mkdtemp(base));
    atexit(cleanup);
    snprintf(outer, sizeof outer, "%s/outer", base);
    snprintf(sentinel, sizeof sentinel, "%s/sentinel", outer);
    snprintf(mid, sizeof mid, "%s/d", outer);
    snprintf(root, sizeof root, "%s/root", mid);
    FUZZ_CHECK(mkdir(outer, 0700) == 0 && mkdir(mid, 0700) == 0);
    int fd = open(sentinel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    FUZZ_CHECK(fd >= 0 && write(fd, SENTINEL, sizeof SENTINEL - 1) == sizeof SENTINEL - 1);
    close(fd);
    return 0;
}

static void extract(const uint8_t *data, size_t size, int whiteouts, rf_extract *x)
{
    struct archive *a = archive_read_new();
    FUZZ_CHECK(a);
    archive_read_support_format_tar(a);
    if (archive_read_open_memory(a, data, size) == ARCHIVE_OK) {
        lis_error err = {0};
        if (rf_extract_layer(x, a, whiteouts, "fuzz.tar", &err) < 0)
            FUZZ_CHECK(err.msg[0]);
    }
    archive_read_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    int mode = data[0];
    data++, size--;
    struct stat before;
    FUZZ_CHECK(lstat(sentinel, &before) == 0);
    int fds = count_fds();

    FUZZ_CHECK(mkdir(root, 0755) == 0);
    lis_error err = {0};
    rf_extract *x = rf_extract_new(root, &err);
    FUZZ_CHECK(x);
    extract(data, size, mode & 1, x);
    if (mode & 2)
        extract(data, size, mode & 1, x);
    rf_extract_finish(x, &err);
    rf_extract_free(x);

    char got[1024];
    names(outer, got, sizeof got);
    if (strcmp(got, "/d/sentinel")) {
        fprintf(stderr, "outer holds %s\n", got);
        FUZZ_CHECK(!"something was created outside the tree");
    }
    names(mid, got, sizeof got);
    if (strcmp(got, "/root")) {
        fprintf(stderr, "%s holds %s\n", mid, got);
        FUZZ_CHECK(!"something was created outside the tree");
    }
    struct stat after;
    FUZZ_CHECK(lstat(sentinel, &after) == 0);
    FUZZ_CHECK(after.st_ino == before.st_ino && after.st_nlink == 1 &&
               after.st_mode == before.st_mode && after.st_size == before.st_size);
    char buf[sizeof SENTINEL];
    int fd = open(sentinel, O_RDONLY | O_CLOEXEC);
    FUZZ_CHECK(fd >= 0 && read(fd, buf, sizeof buf) == sizeof SENTINEL - 1);
    close(fd);
    FUZZ_CHECK(!memcmp(buf, SENTINEL, sizeof SENTINEL - 1));
    FUZZ_CHECK(count_fds() == fds);

    /* the tree goes away again, whatever modes the archive gave it */
    FUZZ_CHECK(rf_rm_tree(root) == 0);
    FUZZ_CHECK(access(root, F_OK) < 0 && errno == ENOENT);
    return 0;
}
