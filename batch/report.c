/* report.c - `lis report DIR` (lis_report_html in lis_batch.h): the output
 * directory of a lis batch (results.jsonl, trajectories/, logs/, files/) or
 * of one lis run (trajectory.json, files/) turned into DIR/report.html, the
 * page with the index of episodes inline, and DIR/report/ep-N.js, one file
 * per episode that the page loads when it is opened. Everything taken from
 * the run goes into JSON made safe for <script> (rp_json_script); the page
 * puts it in the DOM as text only (report_page.html, docs/report.md). The
 * directory's own files are only read. */
#include "engine.h" /* bfx_row */
#include "lis_batch.h"
#include "report.h"
#include "results_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define JSON_MAX (256u << 20) /* a trajectory or row file larger than this is not read */
#define LOG_MAX (256u << 10)

typedef struct rp_ep {
    cJSON *row;
    char *id;
    int attempt;
    int skip; /* replaced by a later row of the same episode (a cancelled one, resumed) */
} rp_ep;

typedef struct rp_rows {
    rp_ep *e;
    size_t n, cap;
    kset keys;        /* "ATTEMPT:ID" -> index in e */
    bo_judged judged; /* judge.jsonl */
} rp_rows;

static int collect_row(void *arg, cJSON *row, size_t line, lis_error *err)
{
    rp_rows *R = arg;
    char id[BATCH_ID_MAX];
    int attempt;
    (void)line;
    if (bo_row_ident(row, id, sizeof id, &attempt) < 0) { /* not an episode: left out */
        cJSON_Delete(row);
        return 0;
    }
    if (LIS_GROW(R->e, R->cap, R->n + 1) < 0) {
        cJSON_Delete(row);
        return lis_oom(err);
    }
    char *k = bo_ident_key(id, attempt), *idc = agent_strdup(id);
    kslot *s = k ? bo_kset_get(&R->keys, k) : NULL;
    free(k);
    if (!s || !idc) {
        free(idc);
        cJSON_Delete(row);
        return lis_oom(err);
    }
    if (s->state != ST_FREE) /* the later row of an episode is the one that counts */
        R->e[s->line].skip = 1;
    s->state = ST_DONE;
    s->line = R->n;
    R->e[R->n++] = (rp_ep){row, idc, attempt, 0};
    return 0;
}

static void rows_free(rp_rows *R)
{
    for (size_t i = 0; i < R->n; i++) {
        cJSON_Delete(R->e[i].row);
        free(R->e[i].id);
    }
    free(R->e);
    bo_kset_free(&R->keys);
    bo_judged_free(&R->judged);
}

/* A file of dfd, up to max bytes (*cut when longer); NULL with errno. */
static char *read_at(int dfd, const char *name, size_t max, size_t *len, int *cut)
{
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    size_t want = (size_t)st.st_size < max ? (size_t)st.st_size : max, got = 0;
    char *buf = malloc(want + 1);
    while (buf && got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf) {
        errno = ENOMEM;
        return NULL;
    }
    buf[got] = 0;
    if (len)
        *len = got;
    if (cut)
        *cut = (size_t)st.st_size > got;
    return buf;
}

static cJSON *read_json(int dfd, const char *name, cJSON *problems, const char *shown)
{
    int cut = 0;
    char *text = read_at(dfd, name, JSON_MAX, NULL, &cut);
    cJSON *j = text && !cut ? cJSON_Parse(text) : NULL;
    if (!j && problems) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s: %s", shown,
                 !text ? strerror(errno)
                 : cut ? "too large to show"
                       : "not JSON");
        cJSON_AddItemToArray(problems, cJSON_CreateString(msg));
    }
    free(text);
    return j;
}

/* from[key] cut to at most max characters, for the index (the episode file has all). */
static void add_cut(cJSON *to, const char *key, const cJSON *from, size_t max)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(from, key));
    if (!s)
        return;
    size_t n = strlen(s), k = agent_utf8_prefix(s, n, max);
    strbuf b = {0};
    strbuf_putn(&b, s, k);
    if (k < n)
        strbuf_puts(&b, "\xe2\x80\xa6"); /* an ellipsis: the episode has the rest */
    char *c = strbuf_take(&b);
    if (c)
        cJSON_AddStringToObject(to, key, c);
    free(c);
}

cJSON *rp_index_row(const cJSON *row, size_t ep, size_t nfiles)
{
    static const char *const NUM[] = {"attempt",
                                      "score",
                                      "steps",
                                      "prompt_tokens",
                                      "completion_tokens",
                                      "llm_seconds",
                                      "tool_seconds",
                                      "wall_seconds",
                                      "memory_peak",
                                      "oom_kills",
                                      "proxy_bytes",
                                      "alerts",
                                      NULL};
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "ep", (double)ep);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(row, "id");
    if (id)
        cJSON_AddItemToObject(r, "id", cJSON_Duplicate(id, 0));
    for (int i = 0; NUM[i]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, NUM[i]);
        if (cJSON_IsNumber(v))
            cJSON_AddNumberToObject(r, NUM[i], v->valuedouble);
    }
    add_cut(r, "reason", row, 40);
    add_cut(r, "scorer", row, 60);
    add_cut(r, "error", row, 300);
    add_cut(r, "answer", row, 200);
    add_cut(r, "domain", row, 60);
    add_cut(r, "stop_rule", row, 64);
    const cJSON *cap = cJSON_GetObjectItemCaseSensitive(row, "capability");
    if (cJSON_IsObject(cap)) /* steps that used each of the three (docs/monitoring.md) */
        cJSON_AddItemToObject(r, "capability", cJSON_Duplicate(cap, 1));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "judged")))
        cJSON_AddBoolToObject(r, "judged", 1);
    cJSON_AddNumberToObject(r, "nfiles", (double)nfiles);
    return r;
}

/* name, written via a temporary and a rename, so an open page never reads
 * half a file (no fsync: the report can always be made again). */
static int write_at(int dfd, const char *dir, const char *name, const char *a, const char *b,
                    const char *c, lis_error *err)
{
    char tmp[NAME_MAX + 1];
    bo_tmp_name(tmp, sizeof tmp, name);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return lis_fail_errno(err, "cannot write %s/%s", dir, name);
    const char *parts[] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        size_t n = parts[i] ? strlen(parts[i]) : 0, off = 0;
        while (off < n) {
            ssize_t w = write(fd, parts[i] + off, n - off);
            if (w < 0) {
                int e = errno;
                close(fd);
                unlinkat(dfd, tmp, 0);
                return lis_fail_errnum(err, e, "cannot write %s/%s", dir, name);
            }
            off += (size_t)w;
        }
    }
    if (close(fd) < 0 || renameat(dfd, tmp, dfd, name) < 0) {
        int e = errno;
        unlinkat(dfd, tmp, 0);
        return lis_fail_errnum(err, e, "cannot write %s/%s", dir, name);
    }
    return 0;
}

/* Where the episode's files are: files/KEY; lis batch --save-files of
 * before the KEY used the raw id (with "@K"), taken only when it is one
 * plain path component. */
static int files_dir(int dfd, const char *id, int attempt, const char *key, char *rel, size_t len)
{
    snprintf(rel, len, *key ? "files/%s" : "files", key);
    int fd = openat(dfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 || !id)
        return fd;
    if (!*id || strchr(id, '/') || !strcmp(id, ".") || !strcmp(id, ".."))
        return -1;
    if (attempt)
        snprintf(rel, len, "files/%s@%d", id, attempt);
    else
        snprintf(rel, len, "files/%s", id);
    return openat(dfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

typedef struct rp_out {
    int dfd, rdfd; /* DIR, DIR/report */
    const char *dir;
    char rdir[PATH_MAX];
} rp_out;

cJSON *rp_episode(int dfd, size_t n, const cJSON *row, const char *id, int attempt,
                  const char *traj_name, const char *log_name, const char *key, size_t *nfiles)
{
    rp_out ro = {.dfd = dfd}, *o = &ro;
    cJSON *ep = cJSON_CreateObject(), *problems = cJSON_CreateArray();
    if (!ep || !problems) {
        cJSON_Delete(ep);
        cJSON_Delete(problems);
        return NULL;
    }
    cJSON_AddNumberToObject(ep, "ep", (double)n);
    if (row)
        cJSON_AddItemToObject(ep, "row", cJSON_Duplicate(row, 1));
    cJSON *traj = read_json(o->dfd, traj_name, problems, traj_name);
    cJSON_AddItemToObject(ep, "trajectory", traj ? traj : cJSON_CreateNull());
    if (log_name) {
        int cut = 0;
        char *log = read_at(o->dfd, log_name, LOG_MAX, NULL, &cut);
        if (log) {
            cJSON_AddStringToObject(ep, "log", log);
            if (cut)
                cJSON_AddBoolToObject(ep, "log_cut", 1);
        }
        free(log);
    }
    char rel[PATH_MAX];
    int fdd = files_dir(o->dfd, id, attempt, key, rel, sizeof rel);
    *nfiles = 0;
    if (fdd >= 0) {
        size_t budget = RP_TEXT_EPISODE_MAX;
        cJSON *files = rp_files(fdd, &budget);
        *nfiles = (size_t)cJSON_GetArraySize(files);
        cJSON_AddStringToObject(ep, "files_base", rel);
        cJSON_AddItemToObject(ep, "files", files ? files : cJSON_CreateArray());
    }
    cJSON_AddItemToObject(ep, "problems", problems);
    return ep;
}

/* The episode's file report/ep-N.js; *nfiles gets the number of its files. */
static int write_episode(rp_out *o, size_t n, const cJSON *row, const char *id, int attempt,
                         const char *traj_name, const char *log_name, const char *key,
                         size_t *nfiles, lis_error *err)
{
    cJSON *ep = rp_episode(o->dfd, n, row, id, attempt, traj_name, log_name, key, nfiles);
    if (!ep)
        return lis_oom(err);
    char *json = rp_json_script(ep), name[64], head[64];
    cJSON_Delete(ep);
    if (!json)
        return lis_oom(err);
    snprintf(name, sizeof name, "ep-%zu.js", n);
    snprintf(head, sizeof head, "lisEpisode(%zu,", n);
    int rc = write_at(o->rdfd, o->rdir, name, head, json, ");\n", err);
    free(json);
    return rc;
}

/* Removes the report/ep-N.js of a previous report with more episodes. */
static void drop_stale(rp_out *o, size_t n)
{
    int fd = dup(o->rdfd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t k;
        char tail[8];
        if (sscanf(de->d_name, "ep-%zu.j%7s", &k, tail) == 2 && !strcmp(tail, "s") && k >= n)
            unlinkat(o->rdfd, de->d_name, 0);
    }
    closedir(d);
}

static int batch_index(rp_out *o, cJSON *index, lis_error *err)
{
    rp_rows R = {0};
    int rc = -1;
    if (bo_read_jsonl_at(o->dfd, o->dir, "results.jsonl", 1, collect_row, &R, err) < 0 ||
        bo_read_jsonl_at(o->dfd, o->dir, "judge.jsonl", 0, bo_judged_add, &R.judged, err) < 0)
        goto out;
    cJSON *config = read_json(o->dfd, "run.json", NULL, NULL);
    cJSON_AddItemToObject(index, "config", config ? config : cJSON_CreateObject());
    cJSON *results = read_json(o->dfd, "results.json", NULL, NULL);
    const cJSON *el = cJSON_GetObjectItemCaseSensitive(results, "elapsed_time_seconds");
    if (cJSON_IsNumber(el))
        cJSON_AddNumberToObject(index, "elapsed_seconds", el->valuedouble);
    /* what the run is (results.json, made just before): status, rows, the
     * command that finishes it, the scorer; the page shows it on top */
    static const char *const run_keys[] = {"status",         "status_reason", "status_message",
                                           "rows_asked",     "rows_done",     "rows_not_run",
                                           "finish_command", "pid",           "scorer",
                                           "scorer_sha256"};
    cJSON *run = cJSON_AddObjectToObject(index, "run");
    for (size_t i = 0; run && i < sizeof run_keys / sizeof *run_keys; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(results, run_keys[i]);
        if (v)
            cJSON_AddItemToObject(run, run_keys[i], cJSON_Duplicate(v, 1));
    }
    cJSON_Delete(results);
    cJSON *rows = cJSON_AddArrayToObject(index, "rows");
    size_t n = 0;
    for (size_t i = 0; i < R.n; i++) {
        rp_ep *e = &R.e[i];
        if (e->skip)
            continue;
        char *key = batch_out_key(e->id, e->attempt);
        double js;
        int judged = bo_judged_find(&R.judged, e->id, e->attempt, &js);
        if (!key || !rows) {
            free(key);
            lis_oom(err);
            goto out;
        }
        if (judged) {
            cJSON_DeleteItemFromObjectCaseSensitive(e->row, "score");
            cJSON_AddNumberToObject(e->row, "score", js);
            cJSON_AddBoolToObject(e->row, "judged", 1);
        }
        char tname[PATH_MAX], lname[PATH_MAX];
        snprintf(tname, sizeof tname, "trajectories/%s.json", key);
        snprintf(lname, sizeof lname, "logs/%s.txt", key);
        size_t nfiles = 0;
        int w = write_episode(o, n, e->row, e->id, e->attempt, tname, lname, key, &nfiles, err);
        free(key);
        if (w < 0)
            goto out;
        cJSON_AddItemToArray(rows, rp_index_row(e->row, n, nfiles));
        n++;
        cJSON_Delete(e->row); /* the index has what it needs */
        e->row = NULL;
    }
    drop_stale(o, n);
    rc = 0;
out:
    rows_free(&R);
    return rc;
}

static double sum_steps(const cJSON *steps, const char *key)
{
    double s = 0;
    const cJSON *st;
    cJSON_ArrayForEach(st, steps)
    {
        const cJSON *v =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(st, "metadata"), key);
        if (cJSON_IsNumber(v))
            s += v->valuedouble;
    }
    return s;
}

/* One lis run: its row made from the trajectory's metadata. */
static int run_index(rp_out *o, cJSON *index, lis_error *err)
{
    cJSON *traj = read_json(o->dfd, "trajectory.json", NULL, NULL);
    if (!traj)
        return lis_fail(err, EINVAL,
                        "%s/trajectory.json is not JSON; give the output "
                        "directory of a lis run (<output>/<timestamp>/)",
                        o->dir);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(traj, "metadata");
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(traj, "steps");
    const char *base = strrchr(o->dir, '/');
    base = base && base[1] ? base + 1 : o->dir;
    cJSON *row = cJSON_CreateObject();
    cJSON_AddStringToObject(row, "id", base);
    cJSON_AddNumberToObject(row, "attempt", 0);
    const char *reason = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "stop_reason"));
    const char *error = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "error"));
    /* the agent's "submit" is a batch row's "submitted" (the page's colours) */
    cJSON_AddStringToObject(row, "reason",
                            !reason                     ? ""
                            : !strcmp(reason, "submit") ? "submitted"
                                                        : reason);
    cJSON_AddStringToObject(row, "error", error ? error : "");
    const char *ps =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(traj, "problem_statement"));
    cJSON_AddStringToObject(row, "problem_statement", ps ? ps : "");
    cJSON_AddNumberToObject(row, "steps", cJSON_GetArraySize(steps));
    static const char *const TOK[] = {"prompt_tokens", "completion_tokens", NULL};
    for (int i = 0; TOK[i]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(md, TOK[i]);
        if (cJSON_IsNumber(v))
            cJSON_AddNumberToObject(row, TOK[i], v->valuedouble);
    }
    cJSON_AddNumberToObject(row, "llm_seconds", sum_steps(steps, "exec_time"));
    cJSON_AddNumberToObject(row, "tool_seconds", sum_steps(steps, "tool_exec_time"));
    char *answer = read_at(o->dfd, "files/answer.txt", 1u << 20, NULL, NULL);
    if (answer)
        cJSON_AddStringToObject(row, "answer", answer);
    free(answer);
    bfx_row(row, NULL, traj); /* capability, alerts, stop_rule: the cards a batch row has */
    const char *llm = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "llm_name"));
    const char *image = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "docker_image"));
    cJSON *config = cJSON_AddObjectToObject(index, "config");
    if (llm)
        cJSON_AddStringToObject(config, "llm_name", llm);
    if (image) /* the page's subtitle names the image, as a batch's does */
        cJSON_AddStringToObject(config, "docker_image", image);
    cJSON_Delete(traj);
    size_t nfiles = 0;
    int rc = write_episode(o, 0, row, NULL, 0, "trajectory.json", NULL, "", &nfiles, err);
    if (rc == 0) {
        cJSON *rows = cJSON_AddArrayToObject(index, "rows");
        cJSON_AddItemToArray(rows, rp_index_row(row, 0, nfiles));
        drop_stale(o, 1);
    }
    cJSON_Delete(row);
    return rc;
}

/* 128 random bits in hex: the nonce of the page's script (its CSP). */
static int make_nonce(char *out, size_t len, lis_error *err)
{
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return lis_fail_errno(err, "getrandom");
    for (size_t i = 0; i < sizeof r && 2 * i + 2 < len; i++)
        snprintf(out + 2 * i, 3, "%02x", r[i]);
    return 0;
}

/* The page with the index JSON at its mark and the nonce at each of its. */
static char *fill_page(const char *page, const char *json, const char *nonce)
{
    strbuf b = {0};
    size_t lm = strlen(RP_PAGE_MARK), ln = strlen(RP_NONCE_MARK);
    for (const char *p = page; *p;) {
        if (!strncmp(p, RP_PAGE_MARK, lm)) {
            strbuf_puts(&b, json);
            p += lm;
        } else if (!strncmp(p, RP_NONCE_MARK, ln)) {
            strbuf_puts(&b, nonce);
            p += ln;
        } else {
            const char *q = p + 1;
            while (*q && *q != RP_PAGE_MARK[0] && *q != RP_NONCE_MARK[0])
                q++;
            strbuf_putn(&b, p, (size_t)(q - p));
            p = q;
        }
    }
    return strbuf_take(&b);
}

int lis_report_html(const char *dir, char *path, size_t len, lis_error *err)
{
    rp_out o = {.dfd = -1, .rdfd = -1, .dir = dir};
    o.dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (o.dfd < 0)
        return lis_fail(err, errno,
                        "%s: %s; give the output directory of a lis batch or a "
                        "lis run",
                        dir, strerror(errno));
    int batch = faccessat(o.dfd, "results.jsonl", F_OK, 0) == 0;
    if (!batch && faccessat(o.dfd, "trajectory.json", F_OK, 0) != 0) {
        close(o.dfd);
        return lis_fail(err, EINVAL,
                        "%s holds neither results.jsonl (a lis batch output) "
                        "nor trajectory.json (a lis run output: <output>/<timestamp>/)",
                        dir);
    }
    snprintf(o.rdir, sizeof o.rdir, "%s/report", dir);
    if (mkdirat(o.dfd, "report", 0755) < 0 && errno != EEXIST) {
        int e = errno;
        close(o.dfd);
        return lis_fail_errnum(err, e, "cannot create %s", o.rdir);
    }
    o.rdfd = openat(o.dfd, "report", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    cJSON *index = cJSON_CreateObject();
    char *json = NULL, *html = NULL;
    int rc = -1;
    if (o.rdfd < 0) {
        lis_fail_errno(err, "cannot open %s", o.rdir);
        goto out;
    }
    if (!index) {
        lis_oom(err);
        goto out;
    }
    cJSON_AddStringToObject(index, "kind", batch ? "batch" : "run");
    cJSON_AddStringToObject(index, "dir", dir);
    char when[40];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&now, &tm));
    cJSON_AddStringToObject(index, "generated", when);
    if ((batch ? batch_index(&o, index, err) : run_index(&o, index, err)) < 0)
        goto out;
    char nonce[40];
    if (make_nonce(nonce, sizeof nonce, err) < 0)
        goto out;
    if (!(json = rp_json_script(index)) || !(html = fill_page(rp_page(), json, nonce))) {
        lis_oom(err);
        goto out;
    }
    rc = write_at(o.dfd, dir, "report.html", html, NULL, NULL, err);
    if (rc == 0 && path)
        snprintf(path, len, "%s/report.html", dir);
out:
    free(json);
    free(html);
    cJSON_Delete(index);
    if (o.rdfd >= 0)
        close(o.rdfd);
    close(o.dfd);
    return rc;
}
