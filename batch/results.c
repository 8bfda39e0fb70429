/* results.c - the output directory of a batch run (layout in results.h).
 *
 * Durability: results.jsonl is the only record of "done". A row is one
 * write() of the whole line on an O_APPEND descriptor, then fdatasync, so
 * after kill -9 or a power cut the file ends in whole rows plus at most one
 * torn line, which batch_out_open cuts off (a row counts only with its
 * newline). Every other file is written to a temporary name, synced, renamed
 * and its directory synced, so it is either the old or the new one; an
 * episode's trajectory and log are in place before its row. The report is
 * results_report.c. */
#include "results_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct batch_out {
    pthread_mutex_t mu;
    char *dir;
    int dfd, tdfd, ldfd; /* DIR, trajectories/, logs/ */
    int fd;              /* results.jsonl, O_APPEND */
    off_t size;          /* its length: whole lines only */
    size_t lines;        /* lines in it */
    size_t done;         /* rows that count (not cancelled) */
    int broken;          /* a part-row could not be cut: no more appends */
    kset keys;
};

/* ---- small helpers ---------------------------------------------------- */

uint64_t bo_fnv(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

kslot *bo_kset_find(const kset *k, const char *key)
{
    if (!k->cap)
        return NULL;
    size_t h = (size_t)bo_fnv(key, 1469598103934665603ull) & (k->cap - 1);
    while (k->s[h].key) {
        if (!strcmp(k->s[h].key, key))
            return &k->s[h];
        h = (h + 1) & (k->cap - 1);
    }
    return &k->s[h];
}

/* The slot of key, inserted (state ST_FREE) when new; NULL when out of memory. */
kslot *bo_kset_get(kset *k, const char *key)
{
    if ((k->n + 1) * 2 > k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 256;
        kslot *t = calloc(cap, sizeof *t);
        if (!t)
            return NULL;
        kset nk = {t, cap, 0};
        for (size_t i = 0; i < k->cap; i++)
            if (k->s[i].key) {
                *bo_kset_find(&nk, k->s[i].key) = k->s[i];
                nk.n++;
            }
        free(k->s);
        *k = nk;
    }
    kslot *s = bo_kset_find(k, key);
    if (!s->key) {
        if (!(s->key = agent_strdup(key)))
            return NULL;
        s->state = ST_FREE;
        s->line = 0;
        k->n++;
    }
    return s;
}

void bo_kset_free(kset *k)
{
    for (size_t i = 0; i < k->cap; i++)
        free(k->s[i].key);
    free(k->s);
    memset(k, 0, sizeof *k);
}

int bo_read_jsonl_at(int dfd, const char *dir, const char *name, int must, row_fn cb, void *arg,
                     lis_error *err)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && !must)
            return 0;
        return lis_fail_errno(err, "cannot read %s", path);
    }
    int rc = bo_read_jsonl(fd, path, cb, arg, NULL, NULL, err);
    close(fd);
    return rc;
}

int bo_judged_add(void *arg, cJSON *row, size_t line, lis_error *err)
{
    bo_judged *j = arg;
    char id[BATCH_ID_MAX];
    int attempt;
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(row, "score");
    int ok = bo_row_ident(row, id, sizeof id, &attempt) == 0 && cJSON_IsNumber(sc) &&
             sc->valuedouble == sc->valuedouble;
    double score = ok ? sc->valuedouble : 0;
    cJSON_Delete(row);
    (void)line;
    if (!ok) /* a verdict without a score (the judge failed): the row's own score stays */
        return 0;
    char *k = bo_ident_key(id, attempt);
    kslot *s = k ? bo_kset_get(&j->keys, k) : NULL;
    free(k);
    if (!s)
        return lis_oom(err);
    if (s->state == ST_FREE) {
        if (LIS_GROW(j->score, j->cap, j->n + 1) < 0)
            return lis_oom(err);
        s->state = ST_DONE;
        s->line = j->n++;
    }
    j->score[s->line] = score; /* a later verdict wins */
    return 0;
}

int bo_judged_find(const bo_judged *j, const char *id, int attempt, double *score)
{
    char *k = bo_ident_key(id, attempt);
    const kslot *s = k ? bo_kset_find(&j->keys, k) : NULL;
    free(k);
    if (!s || !s->key || s->state != ST_DONE)
        return 0;
    *score = j->score[s->line];
    return 1;
}

void bo_judged_free(bo_judged *j)
{
    free(j->score);
    bo_kset_free(&j->keys);
    memset(j, 0, sizeof *j);
}

/* A row's id as text (a number as task.c prints it) and its attempt. */
int bo_row_ident(const cJSON *row, char *id, size_t idn, int *attempt)
{
    const cJSON *i = cJSON_GetObjectItemCaseSensitive(row, "id");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(row, "attempt");
    if (!cJSON_IsNumber(a) || a->valuedouble < 0 || a->valuedouble > 1e6 ||
        a->valuedouble != (double)(int)a->valuedouble)
        return -1;
    *attempt = (int)a->valuedouble;
    if (cJSON_IsString(i) && *i->valuestring) {
        if (strlen(i->valuestring) >= idn)
            return -1;
        snprintf(id, idn, "%s", i->valuestring);
        return 0;
    }
    if (cJSON_IsNumber(i) && i->valuedouble == i->valuedouble) {
        double v = i->valuedouble;
        if (v == (double)(long long)v && v > -1e15 && v < 1e15)
            snprintf(id, idn, "%lld", (long long)v);
        else
            snprintf(id, idn, "%.17g", v);
        return 0;
    }
    return -1;
}

char *bo_ident_key(const char *id, int attempt)
{
    strbuf b = {0};
    strbuf_printf(&b, "%d:%s", attempt, id);
    return strbuf_take(&b);
}

#define KEY_MAX 200

char *batch_out_key(const char *id, int attempt)
{
    strbuf b = {0};
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)id; *p; p++) {
        int keep = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                   (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p >= 0x80 ||
                   (*p == '.' && p != (const unsigned char *)id);
        if (keep) {
            strbuf_putc(&b, (char)*p);
        } else {
            char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            strbuf_putn(&b, e, 3);
        }
    }
    if (attempt > 0)
        strbuf_printf(&b, "@%d", attempt);
    if (!b.oom && b.len > KEY_MAX) {
        /* too long for a file name: a prefix, '~' (escaped everywhere else,
         * so never equal to a short key) and 128 bits of hash of the whole */
        char *full = strbuf_take(&b);
        if (!full)
            return NULL;
        size_t cut = 150;
        while (cut > 0 && (((unsigned char)full[cut] & 0xC0) == 0x80 || full[cut - 1] == '%' ||
                           (cut > 1 && full[cut - 2] == '%')))
            cut--;
        strbuf_putn(&b, full, cut);
        strbuf_printf(&b, "~%016llx%016llx",
                      (unsigned long long)bo_fnv(full, 1469598103934665603ull),
                      (unsigned long long)bo_fnv(full, 0x84222325cbf29ce4ull ^ 0x5bd1e995ull));
        free(full);
    }
    return strbuf_take(&b);
}

void bo_tmp_name(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, ".tmp-%.200s.%ld.%ld", name, (long)getpid(), (long)gettid());
}

int bo_fsync_dir(int dfd, const char *what, lis_error *err)
{
    if (fsync(dfd) < 0 && errno != EINVAL)
        return lis_fail_errno(err, "syncing %s", what);
    return 0;
}

/* Writes name in dfd via a temporary file, fsync, rename, fsync of the dir. */
int bo_write_atomic(int dfd, const char *dir, const char *name, const char *data, size_t len,
                    lis_error *err)
{
    char tmp[NAME_MAX + 1];
    bo_tmp_name(tmp, sizeof tmp, name);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return lis_fail_errno(err, "cannot write %s/%s", dir, name);
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            close(fd);
            unlinkat(dfd, tmp, 0);
            return lis_fail_errnum(err, e, "cannot write %s/%s", dir, name);
        }
        off += (size_t)n;
    }
    if (fdatasync(fd) < 0 || close(fd) < 0) {
        int e = errno;
        unlinkat(dfd, tmp, 0);
        return lis_fail_errnum(err, e, "cannot write %s/%s", dir, name);
    }
    if (renameat(dfd, tmp, dfd, name) < 0) {
        int e = errno;
        unlinkat(dfd, tmp, 0);
        return lis_fail_errnum(err, e, "cannot rename into %s/%s", dir, name);
    }
    return bo_fsync_dir(dfd, dir, err);
}

/* Reads a JSONL file of rows: cb gets each whole row; a last line without
 * its newline, or unparsable, is a torn write and ends the file (*good is
 * the length of the whole lines); a bad line before the last is an error. */
int bo_read_jsonl(int fd, const char *path, row_fn cb, void *arg, off_t *good, size_t *lines,
                  lis_error *err)
{
    int dfd = dup(fd);
    FILE *f = dfd < 0 ? NULL : fdopen(dfd, "r");
    if (!f) {
        if (dfd >= 0)
            close(dfd);
        return lis_fail_errno(err, "cannot read %s", path);
    }
    rewind(f);
    char *buf = NULL;
    size_t cap = 0, line = 0, whole = 0, bad_line = 0;
    off_t off = 0;
    ssize_t n;
    int rc = 0;
    while ((n = getline(&buf, &cap, f)) > 0) {
        line++;
        if (bad_line) { /* an unparsable line with more after it: no crash does that */
            rc = lis_fail(err, EINVAL,
                          "%s:%zu: not a JSON row (only the last line can be "
                          "torn by a crash); fix or delete that line",
                          path, bad_line);
            break;
        }
        if (buf[n - 1] != '\n')
            break; /* torn: no newline */
        cJSON *row = cJSON_ParseWithLength(buf, (size_t)n);
        if (!cJSON_IsObject(row)) {
            cJSON_Delete(row);
            bad_line = line; /* torn, when nothing follows */
            continue;
        }
        off += n;
        whole++;
        if (cb(arg, row, line, err) < 0) {
            rc = -1;
            break;
        }
    }
    if (rc == 0 && ferror(f))
        rc = lis_fail(err, EIO, "cannot read %s", path);
    free(buf);
    fclose(f);
    if (good)
        *good = off;
    if (lines)
        *lines = whole;
    return rc;
}

/* The first key where a (run.json) and b (this run) differ, as "k.sub". */
static int first_diff(const cJSON *a, const cJSON *b, char *path, size_t n, const cJSON **va,
                      const cJSON **vb)
{
    if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
        size_t base = strlen(path);
        for (int pass = 0; pass < 2; pass++)
            for (const cJSON *e = (pass ? a : b)->child; e; e = e->next) {
                const cJSON *o = cJSON_GetObjectItemCaseSensitive(pass ? b : a, e->string);
                if (pass && o)
                    continue;
                snprintf(path + base, n - base, "%s%s", base ? "." : "", e->string);
                if (!o) {
                    *va = pass ? e : NULL;
                    *vb = pass ? NULL : e;
                    return 1;
                }
                if (first_diff(o, e, path, n, va, vb))
                    return 1;
                path[base] = 0;
            }
        return 0;
    }
    if (cJSON_Compare(a, b, 1))
        return 0;
    *va = a;
    *vb = b;
    return 1;
}

static void short_json(const cJSON *j, char *buf, size_t n)
{
    char *s = j ? lis_json_print(j, 0) : NULL;
    snprintf(buf, n, "%s", j ? (s ? s : "?") : "(absent)");
    if (strlen(buf) >= n - 1 && n > 4)
        memcpy(buf + n - 4, "...", 4);
    free(s);
}

/* ---- opening ---------------------------------------------------------- */

typedef struct open_ctx {
    batch_out *o;
    const char *path;
} open_ctx;

static int index_row(void *arg, cJSON *row, size_t line, lis_error *err)
{
    open_ctx *c = arg;
    char id[BATCH_ID_MAX];
    int attempt;
    if (bo_row_ident(row, id, sizeof id, &attempt) < 0) {
        cJSON_Delete(row);
        return lis_fail(err, EINVAL,
                        "%s:%zu: a row without an id and attempt; fix or "
                        "delete that line",
                        c->path, line);
    }
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(row, "reason");
    int cancelled = cJSON_IsString(reason) && !strcmp(reason->valuestring, "cancelled");
    cJSON_Delete(row);
    char *k = bo_ident_key(id, attempt);
    kslot *s = k ? bo_kset_get(&c->o->keys, k) : NULL;
    free(k);
    if (!s)
        return lis_oom(err);
    if (s->state == ST_DONE)
        return lis_fail(err, EEXIST,
                        "%s:%zu: a second row for id \"%.100s\" attempt %d "
                        "(first at line %zu); delete one of them",
                        c->path, line, id, attempt, s->line);
    if (s->state == ST_FREE && !cancelled)
        c->o->done++;
    else if (s->state == ST_CANCELLED && !cancelled)
        c->o->done++;
    s->state = cancelled ? ST_CANCELLED : ST_DONE;
    s->line = line;
    return 0;
}

/* fsyncs the parents of the directories mkdir -p just made (from dir up to
 * the first one that existed before, existed_len bytes of dir). */
static void sync_new_parents(const char *dir, size_t existed_len)
{
    char *p = agent_strdup(dir);
    for (size_t n = p ? strlen(p) : 0; n > existed_len;) {
        while (n > 1 && p[n - 1] == '/')
            p[--n] = 0;
        char *slash = strrchr(p, '/');
        const char *parent = !slash ? "." : slash == p ? "/" : p;
        if (slash && slash != p)
            *slash = 0;
        int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            fsync(fd);
            close(fd);
        }
        if (!slash || slash == p)
            break;
        n = strlen(p);
    }
    free(p);
}

static int open_subdir(batch_out *o, const char *name, lis_error *err)
{
    if (mkdirat(o->dfd, name, 0755) < 0 && errno != EEXIST)
        return lis_fail_errno(err, "cannot create %s/%s", o->dir, name);
    int fd = openat(o->dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return lis_fail_errno(err, "cannot open %s/%s", o->dir, name);
    /* temporaries of a crashed run */
    int d2 = dup(fd);
    DIR *dp = d2 < 0 ? NULL : fdopendir(d2);
    if (dp) {
        struct dirent *e;
        while ((e = readdir(dp)))
            if (!strncmp(e->d_name, ".tmp-", 5))
                unlinkat(fd, e->d_name, 0);
        closedir(dp);
    } else if (d2 >= 0) {
        close(d2);
    }
    return fd;
}

void batch_out_close(batch_out *o)
{
    if (!o)
        return;
    if (o->fd >= 0)
        close(o->fd);
    if (o->tdfd >= 0)
        close(o->tdfd);
    if (o->ldfd >= 0)
        close(o->ldfd);
    if (o->dfd >= 0)
        close(o->dfd);
    bo_kset_free(&o->keys);
    pthread_mutex_destroy(&o->mu);
    free(o->dir);
    free(o);
}

static int check_config(batch_out *o, const cJSON *config, lis_error *err)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/run.json", o->dir);
    size_t len = 0;
    char *text = agent_read_host_file(path, &len, err);
    if (!text)
        return lis_fail(err, err->code,
                        "--resume %s: no run.json there (%s); give the "
                        "directory of an earlier lis batch run",
                        o->dir, strerror(err->code));
    cJSON *old = cJSON_ParseWithLength(text, len);
    free(text);
    if (!old)
        return lis_fail(err, EINVAL,
                        "%s: not valid JSON; restore it or start a new "
                        "--output-dir",
                        path);
    /* how the run stands and how to run it again are not what it is; keys
     * that an older lis did not write are not compared with it */
    static const char *const newer[] = {"scorer", "scorer_sha256", "prompt_sha256",
                                        "net",    "memory",        "disk"};
    cJSON *mine = cJSON_Duplicate(config, 1);
    for (const cJSON *e = old->child, *next; e; e = next) {
        next = e->next;
        if (bo_uncompared_key(e->string))
            cJSON_DeleteItemFromObjectCaseSensitive(old, e->string);
    }
    for (const cJSON *e = mine ? mine->child : NULL, *next; e; e = next) {
        next = e->next;
        if (bo_uncompared_key(e->string))
            cJSON_DeleteItemFromObjectCaseSensitive(mine, e->string);
    }
    for (size_t i = 0; mine && i < sizeof newer / sizeof *newer; i++)
        if (!cJSON_GetObjectItemCaseSensitive(old, newer[i]))
            cJSON_DeleteItemFromObjectCaseSensitive(mine, newer[i]);
    if (!mine) {
        cJSON_Delete(old);
        return lis_oom(err);
    }
    char key[256] = "";
    const cJSON *va = NULL, *vb = NULL;
    int rc = 0;
    if (first_diff(old, mine, key, sizeof key, &va, &vb)) {
        char a[96], b[96];
        short_json(va, a, sizeof a);
        short_json(vb, b, sizeof b);
        rc = lis_fail(err, EINVAL,
                      "--resume %s: %s differs (run.json: %s, this run: %s): that would "
                      "change the results; resume without that flag, or start a new run",
                      o->dir, *key ? key : "the configuration", a, b);
    }
    cJSON_Delete(old);
    cJSON_Delete(mine);
    return rc;
}

int batch_out_set_state(batch_out *o, const batch_state *st, lis_error *err)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/run.json", o->dir);
    size_t len = 0;
    char *text = agent_read_host_file(path, &len, err);
    if (!text)
        return -1;
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return lis_fail(err, EINVAL, "%s: not a JSON object", path);
    }
    batch_state_json(j, st);
    char *out = agent_json_pretty(j);
    cJSON_Delete(j);
    if (!out)
        return lis_oom(err);
    int rc = bo_write_atomic(o->dfd, o->dir, "run.json", out, strlen(out), err);
    free(out);
    return rc;
}

int batch_out_open(const char *dir, const cJSON *config, int resume, batch_out **out,
                   lis_error *err)
{
    *out = NULL;
    if (!dir || !*dir)
        return lis_fail(err, EINVAL, "no output directory given");
    batch_out *o = calloc(1, sizeof *o);
    if (!o || !(o->dir = agent_strdup(dir))) {
        free(o);
        return lis_oom(err);
    }
    o->dfd = o->tdfd = o->ldfd = o->fd = -1;
    pthread_mutex_init(&o->mu, NULL);
    char *cfg_text = NULL;
    if (!resume) {
        /* the deepest existing ancestor, to sync what mkdir -p creates */
        char *anc = agent_strdup(dir);
        size_t existed = 0;
        for (char *sl; anc && access(anc, F_OK) < 0 && (sl = strrchr(anc, '/'));)
            *sl = 0;
        existed = anc && access(anc, F_OK) == 0 ? strlen(anc) : 0;
        free(anc);
        if (lis_host_mkdir_p(dir, 0755, err) < 0) {
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err->msg);
            lis_fail(err, err->code, "cannot create the output directory %s: %s", dir, m);
            goto fail;
        }
        sync_new_parents(dir, existed);
    }
    o->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (o->dfd < 0) {
        lis_fail_errno(err,
                       resume ? "--resume %s (give the directory of an earlier "
                                "lis batch run)"
                              : "cannot open %s",
                       dir);
        goto fail;
    }
    /* before anything is created: a wrong --resume DIR stays untouched */
    if (resume && check_config(o, config, err) < 0)
        goto fail;
    o->fd = openat(o->dfd, "results.jsonl", O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (o->fd < 0) {
        lis_fail_errno(err, "cannot open %s/results.jsonl", dir);
        goto fail;
    }
    /* one writer per directory: a second batch on it would run (and count)
     * the same episodes again; the lock dies with its process, even by kill -9 */
    if (flock(o->fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK)
            lis_fail(err, EBUSY,
                     "%s is in use by another lis batch; wait for it to end "
                     "(or stop it) before resuming",
                     dir);
        else
            lis_fail_errno(err, "cannot lock %s", dir);
        goto fail;
    }
    if (!resume) {
        if (faccessat(o->dfd, "run.json", F_OK, 0) == 0) {
            strbuf cmd = {0};
            bo_lis_command(&cmd, "batch --resume", dir);
            char *c = strbuf_take(&cmd);
            lis_fail(err, EEXIST,
                     "%s already holds a run (run.json); continue it with %s, or choose another "
                     "--output-dir",
                     dir, c ? c : "lis batch --resume DIR");
            free(c);
            goto fail;
        }
        cfg_text = agent_json_pretty(config);
        if (!cfg_text) {
            lis_oom(err);
            goto fail;
        }
        if (bo_write_atomic(o->dfd, dir, "run.json", cfg_text, strlen(cfg_text), err) < 0)
            goto fail;
    }
    if ((o->tdfd = open_subdir(o, "trajectories", err)) < 0 ||
        (o->ldfd = open_subdir(o, "logs", err)) < 0 || bo_fsync_dir(o->dfd, dir, err) < 0)
        goto fail;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    open_ctx c = {o, path};
    struct stat st;
    if (bo_read_jsonl(o->fd, path, index_row, &c, &o->size, &o->lines, err) < 0 ||
        fstat(o->fd, &st) < 0)
        goto fail;
    if (st.st_size != o->size) { /* a torn last line: cut it off */
        if (ftruncate(o->fd, o->size) < 0 || fdatasync(o->fd) < 0) {
            lis_fail_errno(err, "cannot cut the torn last line of %s", path);
            goto fail;
        }
    }
    free(cfg_text);
    *out = o;
    return 0;
fail:
    free(cfg_text);
    batch_out_close(o);
    return -1;
}

/* ---- the episode's files and row -------------------------------------- */

const char *batch_out_dir(const batch_out *o) { return o->dir; }

size_t batch_out_count(const batch_out *o)
{
    pthread_mutex_t *mu = (pthread_mutex_t *)&o->mu;
    pthread_mutex_lock(mu);
    size_t n = o->done;
    pthread_mutex_unlock(mu);
    return n;
}

int batch_out_has(const batch_out *o, const char *id, int attempt)
{
    char *k = bo_ident_key(id, attempt);
    if (!k)
        return 0;
    pthread_mutex_t *mu = (pthread_mutex_t *)&o->mu;
    pthread_mutex_lock(mu);
    const kslot *s = bo_kset_find(&o->keys, k);
    int has = s && s->key && s->state == ST_DONE;
    pthread_mutex_unlock(mu);
    free(k);
    return has;
}

int batch_out_append(batch_out *o, const cJSON *row, const cJSON *trajectory, const char *log_text,
                     lis_error *err)
{
    char id[BATCH_ID_MAX];
    int attempt;
    if (bo_row_ident(row, id, sizeof id, &attempt) < 0)
        return lis_fail(err, EINVAL,
                        "a result row needs an id (text, under %d bytes) and "
                        "an attempt (0, 1, ...)",
                        BATCH_ID_MAX);
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(row, "reason");
    int cancelled = cJSON_IsString(reason) && !strcmp(reason->valuestring, "cancelled");
    char *k = bo_ident_key(id, attempt), *key = batch_out_key(id, attempt);
    char *line = lis_json_print(row, 0);
    char *traj = trajectory ? agent_json_pretty(trajectory) : NULL;
    int rc = -1, prev = ST_FREE;
    kslot *s = NULL;
    if (!k || !key || !line || (trajectory && !traj)) {
        lis_oom(err);
        goto out;
    }
    /* reserve (id, attempt): a second append of it is refused, also while
     * the first is still writing its files */
    pthread_mutex_lock(&o->mu);
    s = bo_kset_get(&o->keys, k);
    if (s && (s->state == ST_DONE || s->state == ST_PENDING)) {
        pthread_mutex_unlock(&o->mu);
        lis_fail(err, EEXIST,
                 "id \"%.100s\" attempt %d has a result row already; it is "
                 "never recorded twice",
                 id, attempt);
        s = NULL;
        goto out;
    }
    if (s) {
        prev = s->state;
        s->state = ST_PENDING;
    }
    pthread_mutex_unlock(&o->mu);
    if (!s) {
        lis_oom(err);
        goto out;
    }
    char name[NAME_MAX + 1], tdir[PATH_MAX], ldir[PATH_MAX];
    snprintf(tdir, sizeof tdir, "%s/trajectories", o->dir);
    snprintf(ldir, sizeof ldir, "%s/logs", o->dir);
    if (traj) {
        snprintf(name, sizeof name, "%s.json", key);
        if (bo_write_atomic(o->tdfd, tdir, name, traj, strlen(traj), err) < 0)
            goto undo;
    }
    if (log_text) {
        snprintf(name, sizeof name, "%s.txt", key);
        if (bo_write_atomic(o->ldfd, ldir, name, log_text, strlen(log_text), err) < 0)
            goto undo;
    }
    size_t len = strlen(line);
    line[len] = '\n'; /* cJSON's buffer: replace the NUL, write len + 1 */
    pthread_mutex_lock(&o->mu);
    s = bo_kset_find(&o->keys, k); /* the table may have grown meanwhile */
    ssize_t n = -1;
    errno = EIO;
    while (!o->broken && (n = write(o->fd, line, len + 1)) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)(len + 1)) {
        int e = n < 0 ? errno : ENOSPC;
        /* a part-row must not stay in front of the next row; when it cannot
         * be cut, the next open does it (a last line without a newline) */
        if (n > 0 && ftruncate(o->fd, o->size) < 0)
            o->broken = 1;
        s->state = prev;
        pthread_mutex_unlock(&o->mu);
        line[len] = 0;
        lis_fail_errnum(err, e, "cannot append to %s/results.jsonl", o->dir);
        goto out;
    }
    o->size += (off_t)(len + 1);
    o->lines++;
    s->line = o->lines;
    s->state = cancelled ? ST_CANCELLED : ST_DONE;
    if (!cancelled)
        o->done++;
    pthread_mutex_unlock(&o->mu);
    line[len] = 0;
    /* outside the lock: concurrent appends share the device flush */
    if (fdatasync(o->fd) < 0) {
        lis_fail_errno(err, "the row is in %s/results.jsonl but cannot be synced", o->dir);
        goto out;
    }
    rc = 0;
    goto out;
undo:
    pthread_mutex_lock(&o->mu);
    s = bo_kset_find(&o->keys, k);
    s->state = prev;
    pthread_mutex_unlock(&o->mu);
out:
    free(k);
    free(key);
    free(line);
    free(traj);
    return rc;
}
