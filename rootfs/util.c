/* util.c - errors, files, sha256 and the store's directories for the rootfs plugin. */
#include "rf.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

char *rf_read_file(const char *path, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max) {
        close(fd);
        errno = EFBIG;
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = 0;
    while (buf && n < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    if (!buf)
        return NULL;
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

int rf_write_atomic(const char *path, const void *data, size_t len, lis_error *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return lis_fail_errno(err, "cannot write %s", tmp);
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            unlink(tmp);
            return lis_fail_errnum(err, e, "cannot write %s", tmp);
        }
        p += w;
        left -= (size_t)w;
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return lis_fail_errnum(err, e, "cannot rename %s", tmp);
    }
    return 0;
}

int rf_mkdirs(const char *path, mode_t mode)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(buf, &st) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int rf_rm_tree_at(int pdfd, const char *name) { return lis_host_rmtree_at(pdfd, name); }

int rf_rm_tree(const char *path)
{
    if (rf_rm_tree_at(AT_FDCWD, path) == 0)
        return 0;
    struct stat st;
    if (lstat(path, &st) < 0 && errno == ENOENT)
        return 0;
    /* an image extracted with its ownership holds files of subordinate ids
     * that only root of the mapped namespace may remove */
    lis_error err;
    return lis_host_rmtree(path, &err);
}

static uint64_t tree_size_at(int dfd)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return 0;
    }
    uint64_t sum = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISREG(st.st_mode))
            sum += (uint64_t)st.st_size;
        else if (S_ISDIR(st.st_mode)) {
            int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0)
                sum += tree_size_at(fd);
        }
    }
    closedir(d);
    return sum;
}

uint64_t rf_tree_size(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? 0 : tree_size_at(fd);
}

/* ---- sha256 ------------------------------------------------------------- */

struct rf_sha {
    EVP_MD_CTX *md;
};

rf_sha *rf_sha_new(void)
{
    rf_sha *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->md = EVP_MD_CTX_new();
    if (!s->md || EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(s->md);
        free(s);
        return NULL;
    }
    return s;
}

void rf_sha_update(rf_sha *s, const void *data, size_t len) { EVP_DigestUpdate(s->md, data, len); }

void rf_sha_hex(rf_sha *s, char hex[65])
{
    unsigned char d[32];
    unsigned int n = 0;
    EVP_DigestFinal_ex(s->md, d, &n);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    hex[64] = 0;
}

void rf_sha_free(rf_sha *s)
{
    if (s) {
        EVP_MD_CTX_free(s->md);
        free(s);
    }
}

void rf_sha256_mem(const void *data, size_t len, char hex[65])
{
    rf_sha *s = rf_sha_new();
    if (!s) {
        hex[0] = 0;
        return;
    }
    rf_sha_update(s, data, len);
    rf_sha_hex(s, hex);
    rf_sha_free(s);
}

int rf_sha256_file(const char *path, char hex[65], lis_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lis_fail_errno(err, "cannot open %s", path);
    rf_sha *s = rf_sha_new();
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    if (!s || !buf) {
        close(fd);
        free(buf);
        rf_sha_free(s);
        return lis_fail(err, ENOMEM, "out of memory hashing %s", path);
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    ssize_t r;
    while ((r = read(fd, buf, cap)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            free(buf);
            rf_sha_free(s);
            return lis_fail_errnum(err, e, "cannot read %s", path);
        }
        rf_sha_update(s, buf, (size_t)r);
    }
    close(fd);
    free(buf);
    rf_sha_hex(s, hex);
    rf_sha_free(s);
    return 0;
}

int rf_valid_hex(const char *s)
{
    if (!s || strlen(s) != 64)
        return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return 0;
    return 1;
}

const char *rf_digest_hex(const char *s)
{
    if (!s || strncmp(s, "sha256:", 7) || !rf_valid_hex(s + 7))
        return NULL;
    return s + 7;
}

/* ---- store ---------------------------------------------------------------- */

int rf_store_open(const char *data_dir, int exclusive, lis_error *err)
{
    static const char *const sub[] = {"blobs/sha256", "meta/sha256", "tags", "tmp"};
    char p[4096];
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
        snprintf(p, sizeof p, "%s/rootfs/%s", data_dir, sub[i]);
        if (rf_mkdirs(p, 0700) < 0)
            return lis_fail(err, errno,
                            "cannot create the image store %s: %s (check "
                            "the data directory's permissions)",
                            p, strerror(errno));
    }
    snprintf(p, sizeof p, "%s/rootfs/lock", data_dir);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return lis_fail_errno(err, "cannot open %s", p);
    int how = exclusive == RF_LOCK_TRY ? LOCK_EX | LOCK_NB : exclusive ? LOCK_EX : LOCK_SH;
    if (flock(fd, how) < 0) {
        int e = errno;
        close(fd);
        return lis_fail_errnum(err, e, "cannot lock %s", p);
    }
    return fd;
}

int rf_store_tmpdir(const char *data_dir, const char *what, char *out, size_t len, lis_error *err)
{
    snprintf(out, len, "%s/rootfs/tmp/%d-%s-XXXXXX", data_dir, (int)getpid(), what);
    if (!mkdtemp(out))
        return lis_fail_errno(err, "cannot create a temporary directory in %s/rootfs/tmp",
                              data_dir);
    return 0;
}

void rf_blob_path(const char *data_dir, const char *hex, char *out, size_t len)
{
    snprintf(out, len, "%s/rootfs/blobs/sha256/%s", data_dir, hex);
}

void rf_meta_path(const char *data_dir, const char *hex, char *out, size_t len)
{
    snprintf(out, len, "%s/rootfs/meta/sha256/%s.json", data_dir, hex);
}

int rf_blob_exists(const char *data_dir, const char *hex)
{
    char p[4096];
    rf_blob_path(data_dir, hex, p, sizeof p);
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int rf_store_commit(const char *data_dir, const char *tmp, const char *hex, cJSON *meta,
                    lis_error *err)
{
    char blob[4096], mp[4096];
    rf_blob_path(data_dir, hex, blob, sizeof blob);
    rf_meta_path(data_dir, hex, mp, sizeof mp);
    if (meta) {
        cJSON_AddStringToObject(meta, "digest", "");
        char d[80];
        snprintf(d, sizeof d, "sha256:%s", hex);
        cJSON_ReplaceItemInObject(meta, "digest", cJSON_CreateString(d));
        cJSON_AddNumberToObject(meta, "created", (double)time(NULL));
        char *s = lis_json_print(meta, 1);
        if (!s)
            return lis_fail(err, ENOMEM, "out of memory writing image metadata");
        int rc = rf_write_atomic(mp, s, strlen(s), err);
        free(s);
        if (rc < 0)
            return -1;
    }
    if (rename(tmp, blob) < 0) {
        int e = errno;
        if ((e == EEXIST || e == ENOTEMPTY) && rf_blob_exists(data_dir, hex)) {
            rf_rm_tree(tmp); /* a concurrent import of the same image won */
            return 0;
        }
        return lis_fail_errnum(err, e, "cannot move the image into %s", blob);
    }
    return 0;
}

static int valid_component(const char *s, size_t n, int allow_colon)
{
    if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return 0;
    if (s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || (allow_colon && c == ':')))
            return 0;
    }
    return 1;
}

int rf_parse_ref(const char *ref, char *name, size_t nlen, char *tag, size_t tlen, lis_error *err)
{
    char buf[512];
    if (!ref || !*ref || strlen(ref) >= sizeof buf - 1)
        return lis_fail(err, EINVAL,
                        "invalid image name '%s' (use NAME[:TAG], e.g. "
                        "myimage:1.0)",
                        ref ? ref : "");
    snprintf(buf, sizeof buf, "%s", ref);
    const char *t = "latest";
    char *colon = strrchr(buf, ':');
    if (colon && !strchr(colon, '/')) {
        *colon = 0;
        t = colon + 1;
    }
    /* name: components separated by '/', the first may be host:port */
    int ok = *buf != 0;
    const char *p = buf;
    int first = 1;
    while (ok && *p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        ok = valid_component(p, n, first && slash != NULL);
        const char *pc = ok ? memchr(p, ':', n) : NULL;
        if (pc) { /* host:port - the port is digits */
            size_t pl = n - (size_t)(pc - p) - 1;
            ok = pl > 0 && pl <= 5 && pc > p;
            for (size_t i = 1; ok && i <= pl; i++)
                ok = pc[i] >= '0' && pc[i] <= '9';
        }
        first = 0;
        p += n;
        if (*p == '/') {
            p++;
            if (!*p)
                ok = 0;
        }
    }
    size_t tl = strlen(t);
    if (!ok || tl == 0 || tl > 128 || !valid_component(t, tl, 0))
        return lis_fail(err, EINVAL,
                        "invalid image name '%s' (use NAME[:TAG] with letters, "
                        "digits, '.', '_', '-' and '/', e.g. myimage:1.0)",
                        ref);
    snprintf(name, nlen, "%s", buf);
    snprintf(tag, tlen, "%s", t);
    return 0;
}

int rf_tag_write(const char *data_dir, const char *ref, const char *hex, char *canon, size_t clen,
                 lis_error *err)
{
    char name[512], tag[160], dir[4096], path[4300];
    if (rf_parse_ref(ref, name, sizeof name, tag, sizeof tag, err) < 0)
        return -1;
    snprintf(dir, sizeof dir, "%s/rootfs/tags/%s", data_dir, name);
    if (rf_mkdirs(dir, 0700) < 0)
        return lis_fail(err, errno,
                        "cannot tag '%s:%s': %s (another image name is a prefix "
                        "of this one? choose another name)",
                        name, tag, strerror(errno));
    snprintf(path, sizeof path, "%s/%s", dir, tag);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return lis_fail(err, EEXIST,
                        "cannot tag '%s:%s': an image name '%s/%s' exists "
                        "(choose another tag)",
                        name, tag, name, tag);
    char line[100];
    int n = snprintf(line, sizeof line, "sha256:%s\n", hex);
    if (rf_write_atomic(path, line, (size_t)n, err) < 0)
        return -1;
    if (canon)
        snprintf(canon, clen, "%s:%s", name, tag);
    return 0;
}

void rf_name_from_path(const char *path, char *out, size_t len)
{
    char buf[512];
    const char *b = strrchr(path, '/');
    snprintf(buf, sizeof buf, "%s", b ? b + 1 : path);
    size_t n = strlen(buf);
    while (n && buf[n - 1] == '/')
        buf[--n] = 0;
    static const char *const ext[] = {".tar.gz", ".tar.xz", ".tar.zst", ".tar.bz2", ".tar",
                                      ".tgz",    ".txz",    ".tzst",    ".tbz2",    ".oci",
                                      ".gz",     ".xz",     ".zst"};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t el = strlen(ext[i]);
        if (n > el && !strcasecmp(buf + n - el, ext[i])) {
            buf[n - el] = 0;
            break;
        }
    }
    size_t o = 0;
    for (const char *p = buf; *p && o + 1 < len && o < 100; p++) {
        char c = *p;
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            c = '-';
        if (o == 0 && (c == '.' || c == '-' || c == '_'))
            continue;
        out[o++] = c;
    }
    out[o] = 0;
    if (!o)
        snprintf(out, len, "image");
}
