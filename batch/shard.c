/* shard.c - one benchmark over many machines: which shard this process runs
 * (--shard K/N, a Slurm job array, a Kubernetes Indexed Job) and `lis batch
 * merge OUT DIR...`, which joins the shards' directories into the files of
 * one unsharded run. docs/scale-out.md is the user's side.
 *
 * A shard is index based: row i of the task (0-based, after --start-id /
 * --end-id) belongs to shard i % N. That needs no hash, spreads a sorted
 * data file evenly, and gives every shard a known number of rows, which
 * run.json records ("shard": {index, count, rows}) so that merge can tell a
 * finished shard from one that stopped early, and --resume refuses another
 * shard (the config differs). */
#include "engine.h"
#include "results_io.h"
#include "shard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- which shard -------------------------------------------------------- */

/* A non-negative decimal integer that fits an int; -1 when s is not one. */
static long parse_index(const char *s)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < 0 || v > 1000000 || *s == '-' || *s == '+' || *s == ' ')
        return -1;
    return v;
}

static int env_index(lis_batch_getenv get, const char *name, long *v, lis_error *err)
{
    const char *s = get(name);
    *v = parse_index(s);
    if (*v < 0)
        return lis_fail(err, EINVAL, "%s: '%s' is not a shard number (0, 1, ...)", name,
                        s ? s : "");
    return 0;
}

int lis_batch_shard_resolve(const char *flag, int shards, lis_batch_getenv get, int *index,
                            int *count, lis_error *err)
{
    *index = *count = 0;
    if (!get)
        get = getenv;
    if (!flag && shards <= 0)
        return 0;
    /* with N given, K is the index as it is, also for auto: a resubmitted --array=2
     * (MIN 2, COUNT 1) must stay shard 2, not become 0 */
    if (flag && !strcmp(flag, "auto") && shards > 0)
        flag = NULL;
    long k = -1, n = shards;
    if (flag && strcmp(flag, "auto")) { /* K/N */
        const char *slash = strchr(flag, '/');
        char kb[16];
        if (!slash || (size_t)(slash - flag) >= sizeof kb)
            return lis_fail(err, EINVAL,
                            "--shard: '%s' is not K/N (0-based, e.g. 0/4) or "
                            "auto",
                            flag);
        memcpy(kb, flag, (size_t)(slash - flag));
        kb[slash - flag] = 0;
        k = parse_index(kb);
        long fn = parse_index(slash + 1);
        if (k < 0 || fn < 1)
            return lis_fail(err, EINVAL,
                            "--shard: '%s' is not K/N (0-based, e.g. 0/4) or "
                            "auto",
                            flag);
        if (shards > 0 && fn != shards)
            return lis_fail(err, EINVAL,
                            "--shard %s and --shards %d disagree; give one of "
                            "them",
                            flag, shards);
        n = fn;
    } else if (flag) { /* auto: all from a Slurm array, or k8s with --shards */
        if (get("SLURM_ARRAY_TASK_ID")) {
            long id, min = 0, step = 1, cnt;
            if (env_index(get, "SLURM_ARRAY_TASK_ID", &id, err) < 0)
                return -1;
            if (get("SLURM_ARRAY_TASK_MIN") &&
                env_index(get, "SLURM_ARRAY_TASK_MIN", &min, err) < 0)
                return -1;
            if (get("SLURM_ARRAY_TASK_STEP") &&
                env_index(get, "SLURM_ARRAY_TASK_STEP", &step, err) < 0)
                return -1;
            if (step < 1)
                return lis_fail(err, EINVAL, "SLURM_ARRAY_TASK_STEP: 0 is not a step");
            if (id < min || (id - min) % step)
                return lis_fail(err, EINVAL,
                                "SLURM_ARRAY_TASK_ID %ld is not in the array "
                                "%ld, %ld, ...; --shard auto needs a plain range "
                                "(--array=0-N)",
                                id, min, min + step);
            k = (id - min) / step;
            if (n <= 0) {
                if (!get("SLURM_ARRAY_TASK_COUNT"))
                    return lis_fail(err, EINVAL,
                                    "--shard auto: SLURM_ARRAY_TASK_COUNT is "
                                    "not set; give --shards N");
                if (env_index(get, "SLURM_ARRAY_TASK_COUNT", &cnt, err) < 0)
                    return -1;
                n = cnt;
            }
        } else if (get("JOB_COMPLETION_INDEX")) {
            return lis_fail(err, EINVAL,
                            "--shard auto in a Kubernetes Indexed Job needs "
                            "--shards N (the Job's completions)");
        } else {
            return lis_fail(err, EINVAL,
                            "--shard auto: neither SLURM_ARRAY_TASK_ID nor "
                            "JOB_COMPLETION_INDEX is set; give --shard K/N");
        }
    } else { /* --shards N: K is the array index as it is (resubmitting --array=2 keeps 2) */
        const char *name = get("SLURM_ARRAY_TASK_ID")    ? "SLURM_ARRAY_TASK_ID"
                           : get("JOB_COMPLETION_INDEX") ? "JOB_COMPLETION_INDEX"
                                                         : NULL;
        if (!name)
            return lis_fail(err, EINVAL,
                            "--shards %d: no shard number in the environment "
                            "(SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX); give --shard K/%d",
                            shards, shards);
        if (env_index(get, name, &k, err) < 0)
            return -1;
        if (k >= n)
            return lis_fail(err, EINVAL,
                            "%s is %ld, not below --shards %ld; number the "
                            "shards from 0 (sbatch --array=0-%ld)",
                            name, k, n, n - 1);
    }
    if (n < 1 || n > 100000)
        return lis_fail(err, EINVAL, "shard count %ld: give 1 to 100000 shards", n);
    if (k >= n)
        return lis_fail(err, EINVAL,
                        "shard %ld/%ld: K must be below N (0-based: 0/%ld to "
                        "%ld/%ld)",
                        k, n, n, n - 1, n);
    *index = (int)k;
    *count = (int)n;
    return 0;
}

size_t batch_shard_rows(size_t nrows, int index, int count)
{
    if (count <= 0)
        return nrows;
    if ((size_t)index >= nrows)
        return 0;
    return (nrows - (size_t)index + (size_t)count - 1) / (size_t)count;
}

int batch_shard_has(size_t row, int index, int count)
{
    return count <= 0 || row % (size_t)count == (size_t)index;
}

void batch_shard_config(cJSON *config, int index, int count, size_t rows)
{
    if (count <= 0)
        return;
    cJSON *s = cJSON_AddObjectToObject(config, "shard");
    cJSON_AddNumberToObject(s, "index", index);
    cJSON_AddNumberToObject(s, "count", count);
    cJSON_AddNumberToObject(s, "rows", (double)rows);
}

/* ---- merge: reading and checking the shards --------------------------- */

typedef struct shard_in {
    const char *dir;
    cJSON *cfg; /* run.json */
    int k, n;
    long rows;
    int lockfd;  /* results.jsonl, flock'ed shared while merging */
    size_t done; /* episodes with a row */
} shard_in;

typedef struct merge {
    shard_in *s;
    size_t n;
    size_t cur; /* the shard being read */
    kset keys;  /* "ATTEMPT:ID" -> state; line = shard << 40 | line in it */
    const char *path;
} merge;

#define LINE_BITS 40

static cJSON *read_json(const char *dir, const char *name, lis_error *err)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t len = 0;
    char *text = agent_read_host_file(path, &len, err);
    if (!text)
        return NULL;
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!j)
        lis_fail(err, EINVAL, "%s: not valid JSON", path);
    return j;
}

static int load_shard(shard_in *s, lis_error *err)
{
    lis_error e = {0};
    if (!(s->cfg = read_json(s->dir, "run.json", &e)))
        return lis_fail(err, e.code ? e.code : EINVAL,
                        "%s is not the directory of a lis "
                        "batch run (%s)",
                        s->dir, e.msg);
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(s->cfg, "shard");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(sh, "index");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(sh, "count");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(sh, "rows");
    if (!sh)
        return lis_fail(err, EINVAL,
                        "%s is not a shard (its run.json has no \"shard\"); "
                        "merge joins the directories of lis batch --shard K/N",
                        s->dir);
    if (!cJSON_IsNumber(k) || !cJSON_IsNumber(n) || !cJSON_IsNumber(r) || n->valuedouble < 1 ||
        k->valuedouble < 0 || k->valuedouble >= n->valuedouble || r->valuedouble < 0 ||
        n->valuedouble > 100000 || r->valuedouble > 1e12)
        return lis_fail(err, EINVAL, "%s/run.json: a bad \"shard\" (index, count, rows)", s->dir);
    s->k = (int)k->valuedouble;
    s->n = (int)n->valuedouble;
    s->rows = (long)r->valuedouble;
    return 0;
}

/* The first top-level key (the shard left out) where a and b differ. */
static const char *config_diff(const cJSON *a, const cJSON *b)
{
    for (int pass = 0; pass < 2; pass++)
        for (const cJSON *e = (pass ? b : a)->child; e; e = e->next) {
            if (!strcmp(e->string, "shard") || bo_uncompared_key(e->string))
                continue; /* what a shard is, how it stands, how it ran */
            const cJSON *o = cJSON_GetObjectItemCaseSensitive(pass ? a : b, e->string);
            if (!o || !cJSON_Compare(e, o, 1))
                return e->string;
        }
    return NULL;
}

static void short_value(const cJSON *j, char *buf, size_t n)
{
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    snprintf(buf, n, "%s", t ? t : "(absent)");
    if (strlen(buf) >= n - 1 && n > 4)
        memcpy(buf + n - 4, "...", 4);
    free(t);
}

static int check_set(merge *m, lis_error *err)
{
    const shard_in *a = &m->s[0];
    for (size_t i = 1; i < m->n; i++) {
        const shard_in *b = &m->s[i];
        const char *key = config_diff(a->cfg, b->cfg);
        if (key) {
            char va[80], vb[80];
            short_value(cJSON_GetObjectItemCaseSensitive(a->cfg, key), va, sizeof va);
            short_value(cJSON_GetObjectItemCaseSensitive(b->cfg, key), vb, sizeof vb);
            return lis_fail(err, EINVAL,
                            "%s and %s are not shards of one run: %s differs "
                            "(%s, %s)",
                            a->dir, b->dir, key, va, vb);
        }
        if (b->n != a->n)
            return lis_fail(err, EINVAL,
                            "%s is shard %d/%d but %s is shard %d/%d: shards "
                            "of one run have one N",
                            a->dir, a->k, a->n, b->dir, b->k, b->n);
    }
    int n = a->n;
    size_t *seen = calloc((size_t)n, sizeof *seen); /* 1 + the index in s */
    if (!seen)
        return lis_oom(err);
    int rc = 0;
    for (size_t i = 0; i < m->n && !rc; i++) {
        if (seen[m->s[i].k])
            rc = lis_fail(err, EINVAL, "shard %d/%d is given twice (%s and %s)", m->s[i].k, n,
                          m->s[seen[m->s[i].k] - 1].dir, m->s[i].dir);
        seen[m->s[i].k] = i + 1;
    }
    if (!rc) {
        strbuf b = {0};
        int missing = 0;
        for (int k = 0; k < n; k++)
            if (!seen[k]) {
                if (missing < 8)
                    strbuf_printf(&b, "%s%d/%d", missing ? ", " : "", k, n);
                missing++;
            }
        if (missing) {
            char *t = strbuf_take(&b);
            rc = lis_fail(err, ENOENT,
                          "shard%s %s%s missing; give every shard's directory "
                          "(a shard that never ran is run first, with --shard K/%d and the "
                          "run's flags)",
                          missing > 1 ? "s" : "", t ? t : "?", missing > 8 ? ", ..." : "", n);
            free(t);
        } else {
            strbuf_release(&b);
        }
    }
    free(seen);
    return rc;
}

static int lock_shard(shard_in *s, lis_error *err)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/results.jsonl", s->dir);
    s->lockfd = open(path, O_RDONLY | O_CLOEXEC);
    if (s->lockfd < 0) {
        if (errno == ENOENT)
            return 0; /* no row at all: counted as incomplete below */
        return lis_fail_errno(err, "cannot read %s", path);
    }
    /* the writer holds LOCK_EX while it runs */
    if (flock(s->lockfd, LOCK_SH | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK)
            return lis_fail(err, errno,
                            "shard %d/%d (%s) is still running; merge when it "
                            "has ended",
                            s->k, s->n, s->dir);
        return lis_fail_errno(err, "cannot lock %s", path);
    }
    return 0;
}

static int count_row(void *arg, cJSON *row, size_t line, lis_error *err)
{
    merge *m = arg;
    char id[BATCH_ID_MAX];
    int attempt;
    int ok = bo_row_ident(row, id, sizeof id, &attempt) == 0;
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(row, "reason");
    int cancelled = cJSON_IsString(reason) && !strcmp(reason->valuestring, "cancelled");
    cJSON_Delete(row);
    if (!ok)
        return lis_fail(err, EINVAL, "%s:%zu: a row without an id and attempt", m->path, line);
    char *k = bo_ident_key(id, attempt);
    kslot *s = k ? bo_kset_get(&m->keys, k) : NULL;
    free(k);
    if (!s)
        return lis_oom(err);
    size_t here = m->cur << LINE_BITS | line;
    if (s->state != ST_FREE) {
        size_t other = s->line >> LINE_BITS;
        if (other != m->cur) {
            const shard_in *a = &m->s[other], *b = &m->s[m->cur];
            return lis_fail(err, EEXIST,
                            "id \"%.80s\" attempt %d is in shard %d/%d (%s) and "
                            "in shard %d/%d (%s); were they run on different data?",
                            id, attempt, a->k, a->n, a->dir, b->k, b->n, b->dir);
        }
        if (s->state == ST_DONE)
            return lis_fail(err, EEXIST, "%s:%zu: a second row for id \"%.80s\" attempt %d",
                            m->path, line, id, attempt);
    }
    if (!cancelled)
        m->s[m->cur].done++;
    s->state = cancelled ? ST_CANCELLED : ST_DONE;
    s->line = here;
    return 0;
}

static int read_rows(merge *m, size_t i, row_fn cb, void *arg, lis_error *err)
{
    shard_in *s = &m->s[i];
    if (s->lockfd < 0)
        return 0;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/results.jsonl", s->dir);
    m->cur = i;
    m->path = path;
    int rc = bo_read_jsonl(s->lockfd, path, cb, arg, NULL, NULL, err);
    m->path = NULL;
    return rc;
}

static int check_rows(merge *m, lis_error *err)
{
    for (size_t i = 0; i < m->n; i++)
        if (read_rows(m, i, count_row, m, err) < 0)
            return -1;
    int repeat = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(m->s[0].cfg, "repeat"));
    if (repeat < 1)
        repeat = 1;
    size_t bad = 0;
    const shard_in *first = NULL;
    for (size_t i = 0; i < m->n; i++) {
        const shard_in *s = &m->s[i];
        size_t want = (size_t)s->rows * (size_t)repeat;
        if (s->done > want)
            return lis_fail(err, EINVAL,
                            "shard %d/%d (%s) has %zu episodes but its run.json "
                            "says %zu; was its data changed?",
                            s->k, s->n, s->dir, s->done, want);
        if (s->done < want && !bad++)
            first = s;
    }
    if (first) {
        size_t want = (size_t)first->rows * (size_t)repeat;
        char more[64] = "";
        if (bad > 1)
            snprintf(more, sizeof more, " (and %zu more shard%s)", bad - 1, bad > 2 ? "s" : "");
        /* the command as run.json has it (the lis that ran the shard, its
         * absolute directory), else one made here */
        const char *fin =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(first->cfg, "finish_command"));
        strbuf cmd = {0};
        if (fin && strstr(fin, " batch --resume ")) {
            strbuf_puts(&cmd, fin);
        } else {
            bo_lis_command(&cmd, "batch --resume", first->dir);
        }
        char *c = strbuf_take(&cmd);
        lis_fail(err, EINVAL,
                 "shard %d/%d (%s) is incomplete: %zu of %zu episodes have no row%s; finish it "
                 "with %s, then merge again",
                 first->k, first->n, first->dir, want - first->done, want, more, c ? c : "");
        free(c);
        return -1;
    }
    return 0;
}

/* ---- merge: writing OUT --------------------------------------------------- */

typedef struct writer {
    merge *m;
    FILE *f;
} writer;

static int write_row(void *arg, cJSON *row, size_t line, lis_error *err)
{
    writer *w = arg;
    char id[BATCH_ID_MAX];
    int attempt;
    char *k = bo_row_ident(row, id, sizeof id, &attempt) == 0 ? bo_ident_key(id, attempt) : NULL;
    const kslot *s = k ? bo_kset_find(&w->m->keys, k) : NULL;
    free(k);
    int rc = 0;
    /* only each episode's last row (a cancelled row a later one replaced is left out) */
    if (s && s->key && s->state == ST_DONE && s->line == (w->m->cur << LINE_BITS | line)) {
        char *t = lis_json_print(row, 0);
        if (!t || fputs(t, w->f) < 0 || fputc('\n', w->f) < 0)
            rc = t ? lis_fail_errno(err, "writing results.jsonl") : lis_oom(err);
        free(t);
    }
    cJSON_Delete(row);
    return rc;
}

static int copy_fd(int in, int out)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return (int)n;
        for (ssize_t o = 0; o < n;) {
            ssize_t w = write(out, buf + o, (size_t)(n - o));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return -1;
            o += w;
        }
    }
}

/* Copies the tree src (relative to sdfd) into ddfd, refusing to replace a
 * file: ids are unique over the shards, so two shards never own one name. */
static int copy_tree(int sdfd, int ddfd, const char *what, lis_error *err)
{
    int fd = dup(sdfd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return lis_fail_errno(err, "cannot read %s", what);
    }
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strncmp(e->d_name, ".tmp-", 5))
            continue;
        struct stat st;
        if (fstatat(sdfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = lis_fail_errno(err, "%s/%s", what, e->d_name);
            break;
        }
        char sub[PATH_MAX];
        snprintf(sub, sizeof sub, "%s/%s", what, e->d_name);
        if (S_ISDIR(st.st_mode)) {
            if (mkdirat(ddfd, e->d_name, 0755) < 0 && errno != EEXIST) {
                rc = lis_fail_errno(err, "cannot create %s", sub);
                break;
            }
            int s2 = openat(sdfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int d2 = openat(ddfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = s2 < 0 || d2 < 0 ? lis_fail_errno(err, "cannot open %s", sub)
                                  : copy_tree(s2, d2, sub, err);
            if (s2 >= 0)
                close(s2);
            if (d2 >= 0)
                close(d2);
        } else if (S_ISREG(st.st_mode)) {
            int in = openat(sdfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            int out = in < 0 ? -1
                             : openat(ddfd, e->d_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                                      st.st_mode & 0777);
            if (in < 0 || out < 0)
                rc = errno == EEXIST ? lis_fail(err, EEXIST,
                                                "%s is in two shards; merge shards of one run", sub)
                                     : lis_fail_errno(err, "cannot copy %s", sub);
            else if (copy_fd(in, out) < 0)
                rc = lis_fail_errno(err, "cannot copy %s", sub);
            if (in >= 0)
                close(in);
            if (out >= 0 && close(out) < 0 && !rc)
                rc = lis_fail_errno(err, "cannot copy %s", sub);
        } /* anything else (a symlink, a fifo) is not the batch's and stays behind */
    }
    closedir(d);
    return rc;
}

static int copy_sub(const shard_in *s, int odfd, const char *name, lis_error *err)
{
    char src[PATH_MAX];
    snprintf(src, sizeof src, "%s/%s", s->dir, name);
    int sfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sfd < 0)
        return errno == ENOENT ? 0 : lis_fail_errno(err, "cannot read %s", src);
    int rc = -1;
    if (mkdirat(odfd, name, 0755) < 0 && errno != EEXIST) {
        lis_fail_errno(err, "cannot create %s in the merge", name);
    } else {
        int dfd = openat(odfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        rc = dfd < 0 ? lis_fail_errno(err, "cannot open %s", name) : copy_tree(sfd, dfd, src, err);
        if (dfd >= 0)
            close(dfd);
    }
    close(sfd);
    return rc;
}

/* judge.jsonl: the shards' verdicts one after the other (only whole lines). */
static int append_judge(const shard_in *s, FILE *out, lis_error *err)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/judge.jsonl", s->dir);
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? 0 : lis_fail_errno(err, "cannot read %s", path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    while ((n = getline(&line, &cap, f)) > 0)
        if (line[n - 1] == '\n' && fwrite(line, 1, (size_t)n, out) != (size_t)n) {
            rc = lis_fail(err, EIO, "writing judge.jsonl");
            break;
        }
    free(line);
    fclose(f);
    return rc;
}

/* OUT must be new or empty: a merge never mixes with another run. */
static int open_out(const char *out, merge *m, lis_error *err)
{
    char real[PATH_MAX];
    for (size_t i = 0; i < m->n; i++) {
        char rs[PATH_MAX];
        if (realpath(out, real) && realpath(m->s[i].dir, rs) && !strcmp(real, rs))
            return lis_fail(err, EINVAL,
                            "the merge cannot go into shard %s itself; give a "
                            "new directory",
                            m->s[i].dir);
    }
    DIR *d = opendir(out);
    if (d) {
        struct dirent *e;
        int empty = 1;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                empty = 0;
        closedir(d);
        if (!empty)
            return lis_fail(err, EEXIST,
                            "%s exists and is not empty; merge into a new "
                            "directory",
                            out);
    } else if (lis_host_mkdir_p(out, 0755, err) < 0) {
        return -1;
    }
    int fd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return lis_fail_errno(err, "cannot open %s", out);
    return fd;
}

static int write_out(merge *m, const char *out, double *elapsed, lis_error *err)
{
    int odfd = open_out(out, m, err);
    if (odfd < 0)
        return -1;
    int rc = -1;
    FILE *f = NULL, *jf = NULL;
    char tmp[NAME_MAX + 1], jtmp[NAME_MAX + 1];
    bo_tmp_name(tmp, sizeof tmp, "results.jsonl");
    bo_tmp_name(jtmp, sizeof jtmp, "judge.jsonl");
    int fd = openat(odfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || !(f = fdopen(fd, "w"))) {
        lis_fail_errno(err, "cannot write %s/results.jsonl", out);
        if (fd >= 0)
            close(fd);
        goto done;
    }
    int jfd = openat(odfd, jtmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (jfd < 0 || !(jf = fdopen(jfd, "w"))) {
        lis_fail_errno(err, "cannot write %s/judge.jsonl", out);
        if (jfd >= 0)
            close(jfd);
        goto done;
    }
    *elapsed = -1;
    for (size_t i = 0; i < m->n; i++) {
        writer w = {m, f};
        if (read_rows(m, i, write_row, &w, err) < 0 ||
            copy_sub(&m->s[i], odfd, "trajectories", err) < 0 ||
            copy_sub(&m->s[i], odfd, "logs", err) < 0 ||
            copy_sub(&m->s[i], odfd, "files", err) < 0 || append_judge(&m->s[i], jf, err) < 0)
            goto done;
        /* the shards ran side by side: the run took as long as the slowest */
        lis_error ig = {0};
        cJSON *res = read_json(m->s[i].dir, "results.json", &ig);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(res, "elapsed_time_seconds");
        if (cJSON_IsNumber(t) && t->valuedouble > *elapsed)
            *elapsed = t->valuedouble;
        cJSON_Delete(res);
    }
    int jempty = ftell(jf) == 0;
    if (fflush(f) || fdatasync(fileno(f)) || fflush(jf) || fdatasync(fileno(jf))) {
        lis_fail_errno(err, "cannot write %s", out);
        goto done;
    }
    if (renameat(odfd, tmp, odfd, "results.jsonl") < 0 ||
        (jempty ? unlinkat(odfd, jtmp, 0) : renameat(odfd, jtmp, odfd, "judge.jsonl")) < 0) {
        lis_fail_errno(err, "cannot rename into %s", out);
        goto done;
    }
    tmp[0] = jtmp[0] = 0;
    /* run.json last: the merge is a run like any other only once it is whole */
    cJSON *cfg = cJSON_Duplicate(m->s[0].cfg, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "shard");
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(cfg, "settings"),
                                            "shard");
    size_t all = 0;
    for (size_t i = 0; i < m->n; i++)
        all += m->s[i].done;
    /* every shard was whole (checked before): so is the merge */
    batch_state st = {.status = BS_COMPLETE, .rows_asked = all, .rows_done = all};
    if (cfg)
        batch_state_json(cfg, &st);
    char *text = cfg ? agent_json_pretty(cfg) : NULL;
    cJSON_Delete(cfg);
    if (!text) {
        lis_oom(err);
        goto done;
    }
    rc = bo_write_atomic(odfd, out, "run.json", text, strlen(text), err);
    free(text);
done:
    if (f)
        fclose(f);
    if (jf)
        fclose(jf);
    if (tmp[0])
        unlinkat(odfd, tmp, 0);
    if (jtmp[0])
        unlinkat(odfd, jtmp, 0);
    close(odfd);
    return rc;
}

static int by_index(const void *a, const void *b)
{
    return ((const shard_in *)a)->k - ((const shard_in *)b)->k;
}

int lis_batch_merge(const char *out_dir, const char *const *dirs, size_t n, FILE *out,
                    lis_error *err)
{
    if (!out_dir || !*out_dir || n == 0)
        return lis_fail(err, EINVAL, "usage: lis batch merge OUT SHARD_DIR...");
    merge m = {.n = n};
    if (!(m.s = calloc(n, sizeof *m.s)))
        return lis_oom(err);
    for (size_t i = 0; i < n; i++) {
        m.s[i].dir = dirs[i];
        m.s[i].lockfd = -1;
    }
    int rc = -1;
    for (size_t i = 0; i < n; i++)
        if (load_shard(&m.s[i], err) < 0)
            goto out;
    if (check_set(&m, err) < 0)
        goto out;
    /* shard 0 first, whatever the order of the arguments: the same merge every time */
    qsort(m.s, n, sizeof *m.s, by_index);
    for (size_t i = 0; i < n; i++)
        if (lock_shard(&m.s[i], err) < 0)
            goto out;
    if (check_rows(&m, err) < 0)
        goto out;
    double elapsed = -1;
    if (write_out(&m, out_dir, &elapsed, err) < 0)
        goto out;
    cJSON *summary = NULL;
    if (batch_report_write(out_dir, elapsed, &summary, err) < 0)
        goto out;
    if (out) {
        bprog_summary(out, summary);
        fprintf(out, "  %-22s %s (%zu shards)\n", "output", out_dir, n);
    }
    cJSON_Delete(summary);
    lis_error rerr = {0};
    if (lis_report_html(out_dir, NULL, 0, &rerr) < 0 && out)
        fprintf(out, "lis: warning: writing the report: %s\n", rerr.msg);
    else if (out)
        fprintf(out, "  %-22s %s/report.html\n", "report", out_dir);
    rc = 0;
out:
    for (size_t i = 0; i < n; i++) {
        cJSON_Delete(m.s[i].cfg);
        if (m.s[i].lockfd >= 0)
            close(m.s[i].lockfd);
    }
    bo_kset_free(&m.keys);
    free(m.s);
    return rc;
}
