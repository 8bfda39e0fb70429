/* results_report.c - results.json and trajectory.json (original: its
 * benchmark's files), made from an output directory's run.json,
 * results.jsonl, judge.jsonl and trajectories/ (batch_report_write in
 * results.h). It only reads those, so `lis batch report DIR` may run beside
 * a live batch: a torn last line is skipped, not cut. */
#include "results_io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

typedef struct rep_row {
    cJSON *row;
    char *id;
    int attempt;
    int skip; /* a cancelled row that a later row replaced */
} rep_row;

typedef struct report {
    const char *path;
    rep_row *r;
    size_t n, cap;
    kset keys;        /* "ATTEMPT:ID" -> index in r (kslot.line) */
    bo_judged judged; /* judge.jsonl */
} report;

static int collect_row(void *arg, cJSON *row, size_t line, lis_error *err)
{
    report *R = arg;
    char id[BATCH_ID_MAX];
    int attempt;
    if (bo_row_ident(row, id, sizeof id, &attempt) < 0) {
        cJSON_Delete(row);
        return lis_fail(err, EINVAL,
                        "%s:%zu: a row without an id and attempt; fix or "
                        "delete that line",
                        R->path, line);
    }
    if (LIS_GROW(R->r, R->cap, R->n + 1) < 0) {
        cJSON_Delete(row);
        return lis_oom(err);
    }
    char *k = bo_ident_key(id, attempt);
    kslot *s = k ? bo_kset_get(&R->keys, k) : NULL;
    free(k);
    char *idc = agent_strdup(id);
    if (!s || !idc) {
        free(idc);
        cJSON_Delete(row);
        return lis_oom(err);
    }
    if (s->state == ST_DONE) {
        free(idc);
        cJSON_Delete(row);
        return lis_fail(err, EEXIST,
                        "%s:%zu: a second row for id \"%.100s\" attempt %d; "
                        "delete one of them",
                        R->path, line, id, attempt);
    }
    if (s->state == ST_CANCELLED)
        R->r[s->line].skip = 1;
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(row, "reason");
    s->state = cJSON_IsString(reason) && !strcmp(reason->valuestring, "cancelled") ? ST_CANCELLED
                                                                                   : ST_DONE;
    s->line = R->n;
    R->r[R->n++] = (rep_row){row, idc, attempt, 0};
    return 0;
}

/* The steps of an episode's trajectory file ([] when it has none). */
static cJSON *read_steps(int tdfd, const rep_row *r)
{
    char *key = batch_out_key(r->id, r->attempt);
    char name[NAME_MAX + 1];
    snprintf(name, sizeof name, "%s.json", key ? key : "");
    free(key);
    int fd = key ? openat(tdfd, name, O_RDONLY | O_CLOEXEC) : -1;
    cJSON *steps = NULL;
    if (fd >= 0) {
        strbuf b = {0};
        char chunk[65536];
        ssize_t n;
        while ((n = read(fd, chunk, sizeof chunk)) > 0)
            strbuf_putn(&b, chunk, (size_t)n);
        close(fd);
        cJSON *j = b.s ? cJSON_ParseWithLength(b.s, b.len) : NULL;
        strbuf_release(&b);
        cJSON *st = cJSON_IsObject(j) ? cJSON_DetachItemFromObjectCaseSensitive(j, "steps") : NULL;
        if (cJSON_IsArray(st))
            steps = st;
        else if (cJSON_IsArray(j))
            steps = j, j = NULL;
        else
            cJSON_Delete(st);
        cJSON_Delete(j);
    }
    return steps ? steps : cJSON_CreateArray();
}

static int is_error_reason(const cJSON *row)
{
    static const char *const errs[] = {"llm_error", "sandbox_error", "scorer_error", "input_error",
                                       "deadline",  "cancelled",     "policy"};
    static const char *const fine[] = {"submitted", "max_steps", "token_limit"};
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(row, "reason");
    if (cJSON_IsString(r)) {
        for (size_t i = 0; i < sizeof errs / sizeof *errs; i++)
            if (!strcmp(r->valuestring, errs[i]))
                return 1;
        for (size_t i = 0; i < sizeof fine / sizeof *fine; i++)
            if (!strcmp(r->valuestring, fine[i]))
                return 0;
    }
    /* an unknown reason: an error when the row says so (original:
     * `if result.error`) */
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(row, "error");
    return cJSON_IsString(e) && *e->valuestring;
}

static double num(const cJSON *row, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);
    return cJSON_IsNumber(v) && v->valuedouble == v->valuedouble ? v->valuedouble : 0;
}

static double row_score(const report *R, const rep_row *r, int *judged)
{
    double js;
    *judged = bo_judged_find(&R->judged, r->id, r->attempt, &js);
    return *judged ? js : num(r->row, "score");
}

static cJSON *json_copy(const cJSON *row, const char *key, const char *def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);
    if (v)
        return cJSON_Duplicate(v, 1);
    return def ? cJSON_CreateString(def) : cJSON_CreateNull();
}

/* trajectory.json, one episode at a time (json.dump(indent=2) layout: the
 * entry's pretty text shifted by two spaces). */
static int write_trajectories(int dfd, const char *dir, const report *R, lis_error *err)
{
    int tdfd = openat(dfd, "trajectories", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char tmp[NAME_MAX + 1];
    bo_tmp_name(tmp, sizeof tmp, "trajectory.json");
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (tdfd >= 0)
            close(tdfd);
        return lis_fail_errnum(err, e, "cannot write %s/trajectory.json", dir);
    }
    int rc = 0, first = 1;
    fputc('{', f);
    for (size_t i = 0; i < R->n && rc == 0; i++) {
        const rep_row *r = &R->r[i];
        if (r->skip)
            continue;
        int judged;
        strbuf key = {0};
        strbuf_puts(&key, r->id);
        if (r->attempt > 0)
            strbuf_printf(&key, "@%d", r->attempt);
        char *ks = strbuf_take(&key);
        cJSON *kj = ks ? cJSON_CreateString(ks) : NULL;
        char *kt = kj ? lis_json_print(kj, 0) : NULL;
        cJSON *e = cJSON_CreateObject();
        if (e) {
            cJSON_AddItemToObject(e, "problem_statement",
                                  json_copy(r->row, "problem_statement", ""));
            cJSON_AddItemToObject(e, "trajectory",
                                  tdfd >= 0 ? read_steps(tdfd, r) : cJSON_CreateArray());
            char rw[48];
            /* original: the reward as compute_score's float (json.dump: 1.0) */
            bo_py_float(row_score(R, r, &judged), rw, sizeof rw);
            cJSON_AddRawToObject(e, "reward", rw);
            cJSON_AddItemToObject(e, "agent_answer", json_copy(r->row, "answer", ""));
            cJSON_AddItemToObject(e, "ground_truth", json_copy(r->row, "ground_truth", NULL));
        }
        char *et = e ? agent_json_pretty(e) : NULL;
        if (!kt || !et) {
            rc = lis_oom(err);
        } else {
            fputs(first ? "\n  " : ",\n  ", f);
            fputs(kt, f);
            fputs(": ", f);
            for (const char *p = et; *p; p++) {
                fputc(*p, f);
                if (*p == '\n') /* raw newlines occur only between tokens */
                    fputs("  ", f);
            }
            first = 0;
        }
        free(ks), free(kt), free(et);
        cJSON_Delete(kj);
        cJSON_Delete(e);
    }
    fputs(first ? "}" : "\n}", f);
    if (tdfd >= 0)
        close(tdfd);
    if (fflush(f) != 0 || ferror(f) || fdatasync(fileno(f)) < 0) {
        if (rc == 0)
            rc = lis_fail_errno(err, "cannot write %s/trajectory.json", dir);
    }
    if (fclose(f) != 0 && rc == 0)
        rc = lis_fail_errno(err, "cannot write %s/trajectory.json", dir);
    if (rc == 0 && renameat(dfd, tmp, dfd, "trajectory.json") < 0)
        rc = lis_fail_errno(err, "cannot rename into %s/trajectory.json", dir);
    if (rc < 0)
        unlinkat(dfd, tmp, 0);
    return rc == 0 ? bo_fsync_dir(dfd, dir, err) : rc;
}

static cJSON *read_json_at(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    strbuf b = {0};
    char chunk[65536];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0)
        strbuf_putn(&b, chunk, (size_t)n);
    close(fd);
    cJSON *j = b.s ? cJSON_ParseWithLength(b.s, b.len) : NULL;
    strbuf_release(&b);
    return j;
}

/* What summarize counts over the rows that count. */
typedef struct tally {
    size_t total, errors, judged, nids, na; /* na: attempts (the largest + 1) */
    double sum, pt, ct, llm, tool, wall, oomk, mem, alerts;
    double *asum, *best; /* per attempt; per id, its best score */
    size_t *acnt;
    cJSON *by_reason, *caps;
} tally;

static void tally_release(tally *t)
{
    free(t->asum);
    free(t->acnt);
    free(t->best);
    cJSON_Delete(t->caps);
    cJSON_Delete(t->by_reason);
}

/* Counts every row that counts into t; -1 out of memory. */
static int tally_rows(const report *R, tally *t)
{
    int max_attempt = -1;
    for (size_t i = 0; i < R->n; i++)
        if (!R->r[i].skip && R->r[i].attempt > max_attempt)
            max_attempt = R->r[i].attempt;
    t->na = (size_t)(max_attempt + 1);
    t->asum = calloc(t->na ? t->na : 1, sizeof *t->asum);
    t->acnt = calloc(t->na ? t->na : 1, sizeof *t->acnt);
    t->best = calloc(R->n ? R->n : 1, sizeof *t->best);
    t->by_reason = cJSON_CreateObject();
    t->caps = bcap_new();
    if (!t->asum || !t->acnt || !t->best || !t->by_reason)
        return -1;
    kset ids = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < R->n; i++) {
        const rep_row *r = &R->r[i];
        if (r->skip)
            continue;
        int judged;
        double sc = row_score(R, r, &judged);
        t->total++;
        t->sum += sc;
        t->judged += (size_t)judged;
        t->errors += (size_t)is_error_reason(r->row);
        bcap_add(t->caps, r->row);
        const cJSON *rs = cJSON_GetObjectItemCaseSensitive(r->row, "reason");
        const char *reason = cJSON_IsString(rs) ? rs->valuestring : "unknown";
        cJSON *c = cJSON_GetObjectItemCaseSensitive(t->by_reason, reason);
        if (c)
            cJSON_SetNumberValue(c, c->valuedouble + 1);
        else
            cJSON_AddNumberToObject(t->by_reason, reason, 1);
        t->pt += num(r->row, "prompt_tokens");
        t->ct += num(r->row, "completion_tokens");
        t->llm += num(r->row, "llm_seconds");
        t->tool += num(r->row, "tool_seconds");
        t->wall += num(r->row, "wall_seconds");
        t->oomk += num(r->row, "oom_kills");
        t->alerts += num(r->row, "alerts");
        if (num(r->row, "memory_peak") > t->mem)
            t->mem = num(r->row, "memory_peak");
        t->asum[r->attempt] += sc;
        t->acnt[r->attempt]++;
        kslot *s = bo_kset_get(&ids, r->id);
        if (!s) {
            rc = -1;
        } else if (s->state == ST_FREE) {
            s->state = ST_DONE;
            s->line = t->nids;
            t->best[t->nids++] = sc;
        } else if (sc > t->best[s->line]) {
            t->best[s->line] = sc;
        }
    }
    bo_kset_free(&ids);
    return rc;
}

/* elapsed_time_seconds: the run's, or (elapsed < 0: `lis batch report`) what
 * the run itself wrote. */
static void add_elapsed(cJSON *res, double elapsed, int dfd)
{
    if (elapsed >= 0) {
        cJSON_AddNumberToObject(res, "elapsed_time_seconds", elapsed);
        return;
    }
    cJSON *old = read_json_at(dfd, "results.json");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(old, "elapsed_time_seconds");
    cJSON_AddItemToObject(res, "elapsed_time_seconds",
                          cJSON_IsNumber(e) ? cJSON_CreateNumber(e->valuedouble)
                                            : cJSON_CreateNull());
    cJSON_Delete(old);
}

/* What the run is: its status (run.json's keys; the row counts from the
 * rows), and the scorer of every score. */
static void add_state(cJSON *res, const report *R, const cJSON *state, size_t total)
{
    const cJSON *rows_asked = cJSON_GetObjectItemCaseSensitive(state, "rows_asked");
    for (cJSON *e = state ? state->child : NULL; e; e = e->next) {
        if (!strcmp(e->string, "rows_done") || !strcmp(e->string, "rows_not_run"))
            continue; /* counted from the rows below */
        cJSON_AddItemToObject(res, e->string, cJSON_Duplicate(e, 1));
    }
    if (!cJSON_GetObjectItemCaseSensitive(res, "status"))
        cJSON_AddStringToObject(res, "status", "unknown"); /* run.json of an older lis */
    cJSON_AddNumberToObject(res, "rows_done", (double)total);
    if (cJSON_IsNumber(rows_asked))
        cJSON_AddNumberToObject(res, "rows_not_run",
                                rows_asked->valuedouble > (double)total
                                    ? rows_asked->valuedouble - (double)total
                                    : 0.0);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(res, "config");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(cfg, "scorer");
    const cJSON *ss = cJSON_GetObjectItemCaseSensitive(cfg, "scorer_sha256");
    for (size_t i = 0; !cJSON_IsString(sc) && i < R->n; i++) /* run.json of an older lis */
        if (!R->r[i].skip)
            sc = cJSON_GetObjectItemCaseSensitive(R->r[i].row, "scorer"),
            ss = cJSON_GetObjectItemCaseSensitive(R->r[i].row, "scorer_sha256");
    cJSON_AddItemToObject(res, "scorer",
                          cJSON_IsString(sc) ? cJSON_Duplicate(sc, 0) : cJSON_CreateNull());
    cJSON_AddItemToObject(res, "scorer_sha256",
                          cJSON_IsString(ss) ? cJSON_Duplicate(ss, 0) : cJSON_CreateNull());
}

/* lis's counts after the original's keys: by reason, tokens, seconds,
 * memory, ids and attempts, the mean by attempt and pass@k. Takes
 * t->by_reason. */
static void add_counts(cJSON *res, const report *R, tally *t)
{
    cJSON_AddItemToObject(res, "by_reason", t->by_reason);
    t->by_reason = NULL;
    cJSON_AddNumberToObject(res, "prompt_tokens", t->pt);
    cJSON_AddNumberToObject(res, "completion_tokens", t->ct);
    cJSON_AddNumberToObject(res, "total_tokens", t->pt + t->ct);
    cJSON_AddNumberToObject(res, "llm_seconds", t->llm);
    cJSON_AddNumberToObject(res, "tool_seconds", t->tool);
    cJSON_AddNumberToObject(res, "wall_seconds", t->wall);
    cJSON_AddNumberToObject(res, "memory_peak_max", t->mem);
    cJSON_AddNumberToObject(res, "oom_kills", t->oomk);
    cJSON_AddNumberToObject(res, "alerts", t->alerts); /* the rows' policy alerts */
    cJSON_AddNumberToObject(res, "ids", (double)t->nids);
    cJSON_AddNumberToObject(res, "attempts", (double)t->na);
    if (R->judged.n)
        cJSON_AddNumberToObject(res, "judged", (double)t->judged);
    if (t->na <= 1)
        return;
    cJSON *by = cJSON_AddArrayToObject(res, "mean_score_by_attempt");
    for (size_t a = 0; by && a < t->na; a++)
        cJSON_AddItemToArray(by, t->acnt[a] ? cJSON_CreateNumber(t->asum[a] / (double)t->acnt[a])
                                            : cJSON_CreateNull());
    double bs = 0;
    for (size_t i = 0; i < t->nids; i++)
        bs += t->best[i];
    if (t->nids)
        cJSON_AddNumberToObject(res, "pass_at_k", bs / (double)t->nids);
    else
        cJSON_AddNullToObject(res, "pass_at_k");
}

/* The counts of results.json over the rows that count; state (run.json's
 * status keys, taken) goes after the original's keys (original: config,
 * total, mean_score, num_errors, elapsed_time_seconds). */
static cJSON *summarize(const report *R, cJSON *config, cJSON *state, const char *dir,
                        double elapsed, int dfd)
{
    tally t = {0};
    cJSON *res = cJSON_CreateObject();
    if (!res || tally_rows(R, &t) < 0) {
        tally_release(&t);
        cJSON_Delete(res);
        cJSON_Delete(config);
        return NULL;
    }
    cJSON_AddItemToObject(res, "config", config);
    const cJSON *task = cJSON_GetObjectItemCaseSensitive(config, "task");
    if (cJSON_IsString(task)) {
        cJSON_AddStringToObject(res, "task", task->valuestring);
    } else {
        const char *b = strrchr(dir, '/');
        cJSON_AddStringToObject(res, "task", b && b[1] ? b + 1 : dir);
    }
    cJSON_AddNumberToObject(res, "total", (double)t.total);
    /* over the rows that finished (original: an error row scores 0); a run
     * with none has no mean, not a 0 */
    if (t.total)
        cJSON_AddNumberToObject(res, "mean_score", t.sum / (double)t.total);
    else
        cJSON_AddNullToObject(res, "mean_score");
    cJSON_AddNumberToObject(res, "num_errors", (double)t.errors);
    add_elapsed(res, elapsed, dfd);
    add_state(res, R, state, t.total);
    add_counts(res, R, &t);
    bcap_finish(res, t.caps); /* "capability": by task and domain (capability.c) */
    t.caps = NULL;
    tally_release(&t);
    return res;
}

/* A run that says "running": is its process still there? Its lis batch holds
 * results.jsonl locked (flock, results.c) until it ends, kill -9 included.
 * Returns 1 (live), or 0 with *lockfd holding a shared lock (-1 if none). */
static int run_is_live(int dfd, int *lockfd)
{
    *lockfd = openat(dfd, "results.jsonl", O_RDONLY | O_CLOEXEC);
    if (*lockfd < 0)
        return 0;
    if (flock(*lockfd, LOCK_SH | LOCK_NB) == 0)
        return 0;
    int live = errno == EWOULDBLOCK;
    close(*lockfd);
    *lockfd = -1;
    return live;
}

/* run.json's state keys, detached from config into a new object. */
static cJSON *take_state(cJSON *config)
{
    cJSON *state = cJSON_CreateObject();
    for (cJSON *e = config->child, *next; state && e; e = next) {
        next = e->next;
        if (bo_state_key(e->string))
            cJSON_AddItemToObject(state, e->string, cJSON_DetachItemViaPointer(config, e));
    }
    return state;
}

/* A run that says "running" but whose process is gone (kill -9, a crash, the
 * OOM killer, a reboot) is partial: run.json says so from now on. */
static cJSON *killed_state(int dfd, const char *dir, const cJSON *config, cJSON *state, size_t done,
                           lis_error *err)
{
    const cJSON *asked = cJSON_GetObjectItemCaseSensitive(state, "rows_asked");
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(state, "pid");
    size_t n = cJSON_IsNumber(asked) ? (size_t)asked->valuedouble : done;
    char msg[400];
    snprintf(msg, sizeof msg,
             "the run's process (pid %.0f) ended before it finished (kill -9, a crash, the OOM "
             "killer or a reboot): %zu of %zu rows done",
             cJSON_IsNumber(pid) ? pid->valuedouble : 0.0, done, n);
    batch_state st = {
        .status = done >= n ? BS_COMPLETE : BS_PARTIAL,
        .reason = done >= n ? "" : "killed",
        .message = done >= n ? "" : msg,
        .rows_asked = n,
        .rows_done = done,
        .finish = done >= n ? NULL
                            : cJSON_GetStringValue(
                                  cJSON_GetObjectItemCaseSensitive(state, "finish_command")),
        .lis = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(state, "lis")),
    };
    cJSON *full = cJSON_Duplicate(config, 1), *fresh = cJSON_CreateObject();
    if (!full || !fresh) {
        cJSON_Delete(full);
        cJSON_Delete(fresh);
        lis_oom(err);
        return NULL;
    }
    batch_state_json(full, &st);
    batch_state_json(fresh, &st);
    char *text = agent_json_pretty(full);
    cJSON_Delete(full);
    int rc = text ? bo_write_atomic(dfd, dir, "run.json", text, strlen(text), err) : lis_oom(err);
    free(text);
    if (rc < 0) {
        cJSON_Delete(fresh);
        return NULL;
    }
    return fresh;
}

/* Python writes these as floats (original: json.dump of a float, 1.0, not 1). */
static const char *const FLOAT_KEYS[] = {"mean_score",   "elapsed_time_seconds",
                                         "pass_at_k",    "mean_score_by_attempt",
                                         "llm_seconds",  "tool_seconds",
                                         "wall_seconds", NULL};
static const char *const CONFIG_FLOAT_KEYS[] = {"temperature", NULL};

int batch_repair_if_dead(const char *dir, lis_error *err)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return lis_fail_errno(err, "%s", dir);
    cJSON *config = read_json_at(dfd, "run.json");
    const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(config, "status"));
    const char *host = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(config, "host"));
    char here[256] = "";
    gethostname(here, sizeof here - 1);
    int lockfd = -1;
    int dead = status && !strcmp(status, "running") && (!host || !strcmp(host, here)) &&
               !run_is_live(dfd, &lockfd);
    cJSON_Delete(config);
    if (lockfd >= 0)
        close(lockfd);
    close(dfd);
    if (!dead)
        return 0;
    return batch_report_write(dir, -1, NULL, err) < 0 ? -1 : 1;
}

int batch_report_write(const char *dir, double elapsed, cJSON **summary, lis_error *err)
{
    if (summary)
        *summary = NULL;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return lis_fail(err, errno, "%s: %s; give the output directory of a lis batch run", dir,
                        strerror(errno));
    report R = {0};
    int rc = -1, lockfd = -1;
    char *text = NULL;
    cJSON *res = NULL, *state = NULL, *printed = NULL, *config = read_json_at(dfd, "run.json");
    if (!config) {
        lis_fail(err, EINVAL,
                 "%s/run.json is missing or not JSON; give the output "
                 "directory of a lis batch run",
                 dir);
        goto out;
    }
    char rpath[PATH_MAX + 32]; /* for collect_row's messages */
    snprintf(rpath, sizeof rpath, "%s/results.jsonl", dir);
    R.path = rpath;
    int rrc = bo_read_jsonl_at(dfd, dir, "results.jsonl", 1, collect_row, &R, err);
    R.path = NULL;
    if (rrc < 0 || bo_read_jsonl_at(dfd, dir, "judge.jsonl", 0, bo_judged_add, &R.judged, err) < 0)
        goto out;
    if (!(state = take_state(config))) {
        lis_oom(err);
        goto out;
    }
    const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(state, "status"));
    const char *host = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(state, "host"));
    char here[256] = "";
    gethostname(here, sizeof here - 1);
    /* only on the run's own host does a free lock mean its process is gone (a
     * shared filesystem's locks may not reach across hosts) */
    if (status && !strcmp(status, "running") && (!host || !strcmp(host, here)) &&
        !run_is_live(dfd, &lockfd)) {
        size_t done = 0;
        for (size_t i = 0; i < R.n; i++)
            done += !R.r[i].skip;
        cJSON *k = killed_state(dfd, dir, config, state, done, err);
        if (!k)
            goto out;
        bleft_remove(dfd); /* its socket, live.url, its template image */
        cJSON_Delete(state);
        state = k;
    }
    res = summarize(&R, config, state, dir, elapsed, dfd);
    config = NULL;
    printed = res ? cJSON_Duplicate(res, 1) : NULL;
    if (printed) {
        bo_json_floats(printed, FLOAT_KEYS);
        bo_json_floats(cJSON_GetObjectItemCaseSensitive(printed, "config"), CONFIG_FLOAT_KEYS);
    }
    if (!printed || !(text = agent_json_pretty(printed))) {
        lis_oom(err);
        goto out;
    }
    if (write_trajectories(dfd, dir, &R, err) < 0 ||
        bo_write_atomic(dfd, dir, "results.json", text, strlen(text), err) < 0)
        goto out;
    rc = 0;
    if (summary) {
        *summary = res;
        res = NULL;
    }
out:
    for (size_t i = 0; i < R.n; i++) {
        cJSON_Delete(R.r[i].row);
        free(R.r[i].id);
    }
    free(R.r);
    bo_kset_free(&R.keys);
    bo_judged_free(&R.judged);
    cJSON_Delete(config);
    cJSON_Delete(state);
    cJSON_Delete(res);
    cJSON_Delete(printed);
    free(text);
    if (lockfd >= 0)
        close(lockfd);
    close(dfd);
    return rc;
}
