/* store.c - finished episodes' results on disk: state_dir/episodes/<id>.json.
 *
 * A result is written whole or not at all: a temporary file of its own
 * (".tmp-<id>.XXXXXX" in the same directory), fsync, rename over the name,
 * fsync of the directory. A crash leaves at most such a temporary, which
 * rl_store_each never reads. Ids are checked so that no name leaves the
 * directory. */
#include "rl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RL_ID_MAX 64
#define RL_RESULT_MAX (256ull << 20) /* a result file, written or read */
#define RL_DIR "episodes"

/* [A-Za-z0-9_-]{1,64}: a file name that cannot leave the directory. */
static int id_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (!n || n > RL_ID_MAX)
        return 0;
    return strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

static int check_id(const char *id, lis_error *err)
{
    if (id_ok(id))
        return 0;
    char shown[72];
    lis_utf8_copy(shown, sizeof shown, id ? id : "(null)");
    for (char *p = shown; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = '?';
    return lis_fail(err, EINVAL, "episode id \"%s\" is not 1 to %d of A-Z, a-z, 0-9, '_' and '-'",
                    shown, RL_ID_MAX);
}

/* state_dir/episodes opened (made 0700, state_dir too, when missing unless
 * !make: then -1 with errno ENOENT). */
static int open_dir(const char *state_dir, int make, lis_error *err)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/" RL_DIR, state_dir) >= sizeof path)
        return lis_fail(err, ENAMETOOLONG, "state directory %.200s: name too long", state_dir);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 || errno != ENOENT || !make) {
        if (fd < 0 && (errno != ENOENT || make))
            lis_fail_errno(err, "opening %s", path);
        return fd;
    }
    if ((mkdir(state_dir, 0700) < 0 && errno != EEXIST) ||
        (mkdir(path, 0700) < 0 && errno != EEXIST))
        return lis_fail_errno(err, "making %s", path);
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        lis_fail_errno(err, "opening %s", path);
    return fd;
}

static int write_whole(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -1 : (errno = EIO, -1);
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

int rl_store_put(const char *state_dir, const char *id, const cJSON *result, lis_error *err)
{
    if (check_id(id, err) < 0)
        return -1;
    char *text = lis_json_print(result, 0); /* strict UTF-8 whatever the result holds */
    if (!text)
        return lis_oom(err);
    size_t n = strlen(text);
    if (n + 1 > RL_RESULT_MAX) {
        free(text);
        return lis_fail(err, EFBIG, "episode %s: its result is %zu bytes, over %llu", id, n,
                        RL_RESULT_MAX);
    }
    text[n] = '\n'; /* the NUL's place: one line, its end in the file */
    int dfd = open_dir(state_dir, 1, err);
    if (dfd < 0) {
        free(text);
        return -1;
    }
    char name[RL_ID_MAX + 8], path[4096 + RL_ID_MAX + 32];
    snprintf(name, sizeof name, "%s.json", id);
    snprintf(path, sizeof path, "%s/" RL_DIR "/.tmp-%s.XXXXXX", state_dir, id);
    int rc = -1, fd = mkostemp(path, O_CLOEXEC); /* a name of its own: writers never mix */
    if (fd < 0) {
        lis_fail_errno(err, "episode %s: creating a file in %s/" RL_DIR, id, state_dir);
        goto out;
    }
    int ok = write_whole(fd, text, n + 1) == 0 && fsync(fd) == 0;
    int e = errno;
    if (close(fd) < 0 && ok)
        ok = 0, e = errno;
    if (!ok || renameat(AT_FDCWD, path, dfd, name) < 0) {
        e = ok ? errno : e;
        unlink(path);
        lis_fail_errnum(err, e, "episode %s: %s %s", id, ok ? "renaming" : "writing", path);
        goto out;
    }
    if (fsync(dfd) < 0 && errno != EINVAL)
        lis_fail_errno(err, "episode %s: syncing %s/" RL_DIR, id, state_dir);
    else
        rc = 0;
out:
    close(dfd);
    free(text);
    return rc;
}

/* The directory of an existing result and its file's name: its fd, or -1
 * with err (ENOENT: none kept). */
static int open_result(const char *state_dir, const char *id, char name[RL_ID_MAX + 8],
                       lis_error *err)
{
    if (check_id(id, err) < 0)
        return -1;
    int dfd = open_dir(state_dir, 0, err);
    if (dfd < 0)
        return errno == ENOENT ? lis_fail(err, ENOENT, "episode %s: no result kept", id) : -1;
    snprintf(name, RL_ID_MAX + 8, "%s.json", id);
    return dfd;
}

int rl_store_del(const char *state_dir, const char *id, lis_error *err)
{
    char name[RL_ID_MAX + 8];
    int dfd = open_result(state_dir, id, name, err);
    if (dfd < 0)
        return -1;
    int rc = 0;
    if (unlinkat(dfd, name, 0) < 0)
        rc = errno == ENOENT ? lis_fail(err, ENOENT, "episode %s: no result kept", id)
                             : lis_fail_errno(err, "episode %s: removing its result", id);
    else if (fsync(dfd) < 0 && errno != EINVAL)
        rc = lis_fail_errno(err, "episode %s: syncing %s/" RL_DIR, id, state_dir);
    close(dfd);
    return rc;
}

/* The result in dfd's name: a JSON object, or NULL (not a regular file,
 * unreadable, over RL_RESULT_MAX, not JSON). O_NONBLOCK: a FIFO put there
 * cannot hang the open. */
static cJSON *load(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st = {0};
    char *buf = NULL;
    size_t got = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= RL_RESULT_MAX &&
        (buf = malloc((size_t)st.st_size + 1))) {
        while (got < (size_t)st.st_size) { /* a file that shrinks meanwhile ends early */
            ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
    }
    close(fd);
    cJSON *j = NULL;
    if (buf && got == (size_t)st.st_size) {
        buf[got] = 0;
        const char *end = NULL;
        j = cJSON_ParseWithLengthOpts(buf, got, &end, 0);
        while (j && end && (*end == '\n' || *end == ' ' || *end == '\t' || *end == '\r'))
            end++;
        if (j && (!cJSON_IsObject(j) || (end && end < buf + got))) {
            cJSON_Delete(j);
            j = NULL;
        }
    }
    free(buf);
    return j;
}

int rl_store_get(const char *state_dir, const char *id, cJSON **out, lis_error *err)
{
    *out = NULL;
    char name[RL_ID_MAX + 8];
    int dfd = open_result(state_dir, id, name, err);
    if (dfd < 0)
        return -1;
    *out = load(dfd, name);
    close(dfd);
    return *out ? 0 : lis_fail(err, ENOENT, "episode %s: no readable result kept", id);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int rl_store_each(const char *state_dir, int (*cb)(void *arg, const char *id, cJSON *result),
                  void *arg, size_t *bad, lis_error *err)
{
    if (bad)
        *bad = 0;
    int dfd = open_dir(state_dir, 0, err);
    if (dfd < 0)
        return errno == ENOENT ? 0 : -1; /* none kept yet */
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return lis_fail_errno(err, "reading %s/" RL_DIR, state_dir);
    }
    /* by name, so that a restart loads them in one order */
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') /* ".", "..", and the temporaries of writes */
            continue;
        if (LIS_GROW(names, cap, n + 1) < 0 || !(names[n] = strdup(e->d_name))) {
            rc = lis_oom(err);
            break;
        }
        n++;
    }
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *dot = strrchr(names[i], '.');
        cJSON *j = NULL;
        if (dot && !strcmp(dot, ".json")) {
            *dot = 0;
            if (id_ok(names[i])) {
                *dot = '.';
                j = load(dirfd(d), names[i]);
            }
            *dot = 0;
        }
        if (!j) {
            if (bad)
                (*bad)++;
            continue;
        }
        rc = cb(arg, names[i], j);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return rc;
}
