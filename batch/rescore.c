/* rescore.c - `lis batch rescore DIR [--scorer S]`: the saved answers of a
 * finished run scored again (a reward.py that raised on every row, or a
 * better scorer), without running an episode. Every row that reached the
 * scorer (submitted, max_steps, token_limit, scorer_error) gets the new
 * score; its old score, scorer, hash, reason and error are kept beside it in
 * previous_scores; run.json names the new scorer and lists each rescoring in
 * "rescored"; results.json and the report are written again. The row given
 * to the scorer is the results row (id, ground_truth, problem_statement,
 * domain), the task's own other fields are not saved there. */
#include "engine.h"
#include "results_io.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RESCORE_KEPT 16 /* previous scores a row keeps (the oldest go) */

typedef struct rs_rows {
    cJSON *rows; /* an array */
} rs_rows;

static int collect(void *arg, cJSON *row, size_t line, lis_error *err)
{
    (void)line;
    (void)err;
    cJSON_AddItemToArray(((rs_rows *)arg)->rows, row);
    return 0;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

static int reached_scorer(const char *reason)
{
    return !strcmp(reason, "submitted") || !strcmp(reason, "max_steps") ||
           !strcmp(reason, "token_limit") || !strcmp(reason, "scorer_error");
}

/* The reason a scorer_error row had before scoring: its trajectory's. */
static const char *agent_reason(int dfd, const cJSON *row, char *buf, size_t len)
{
    char id[BATCH_ID_MAX];
    int attempt;
    snprintf(buf, len, "submitted");
    if (bo_row_ident(row, id, sizeof id, &attempt) < 0)
        return buf;
    char *key = batch_out_key(id, attempt);
    char name[4400];
    snprintf(name, sizeof name, "trajectories/%s.json", key ? key : "");
    free(key);
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return buf;
    strbuf b = {0};
    char chunk[65536];
    ssize_t n;
    while (b.len < (64u << 20) && (n = read(fd, chunk, sizeof chunk)) > 0)
        strbuf_putn(&b, chunk, (size_t)n);
    close(fd);
    cJSON *t = b.s ? cJSON_ParseWithLength(b.s, b.len) : NULL;
    strbuf_release(&b);
    const char *r = jstr(cJSON_GetObjectItemCaseSensitive(t, "metadata"), "stop_reason");
    if (!strcmp(r, "max_steps") || !strcmp(r, "token_limit"))
        snprintf(buf, len, "%s", r);
    cJSON_Delete(t);
    return buf;
}

/* What scores now: --scorer as given, or the run's own (run.json). The
 * task's folder (reward.py) is where the run's scorer file was. */
static int open_scorer(const cJSON *config, const char *spec, batch_scorer **out, lis_error *err)
{
    const char *name = jstr(config, "scorer"), *file = jstr(config, "scorer_file");
    char dirbuf[PATH_MAX] = ".", own[4200] = "";
    if (file[0] == '/') {
        snprintf(dirbuf, sizeof dirbuf, "%s", file);
        snprintf(dirbuf, sizeof dirbuf, "%s", dirname(dirbuf));
    }
    if (!spec) {
        if (!strncmp(name, "builtin:", 8))
            snprintf(own, sizeof own, "%s", name);
        else if (!strncmp(name, "python:", 7))
            snprintf(own, sizeof own, "python");
        else if (!strncmp(name, "cmd:", 4))
            snprintf(own, sizeof own, "%s", name + 4);
        else
            return lis_fail(err, EINVAL,
                            "the run's scorer %s cannot be run again here: give --scorer "
                            "(builtin:NAME, python, a command; an LLM judge: lis batch judge)",
                            *name ? name : "(none)");
        spec = own;
    }
    batch_scorer_opts so = {.task_name = jstr(config, "task"), .task_dir = dirbuf, .scorer = spec};
    return batch_scorer_open(&so, out, err);
}

/* The row scored again; its old score kept in previous_scores. 1: scored,
 * 0: the scorer failed, -1: not a row the scorer saw. */
static int rescore_row(int dfd, cJSON *row, batch_scorer *sc, const char *when)
{
    const char *reason = jstr(row, "reason");
    if (!reached_scorer(reason))
        return -1;
    cJSON *prev = cJSON_CreateObject();
    cJSON_AddItemToObject(prev, "score",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(row, "score"), 1));
    cJSON_AddStringToObject(prev, "scorer", jstr(row, "scorer"));
    cJSON_AddStringToObject(prev, "scorer_sha256", jstr(row, "scorer_sha256"));
    cJSON_AddStringToObject(prev, "reason", reason);
    cJSON_AddItemToObject(prev, "error",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(row, "error"), 1));
    cJSON_AddStringToObject(prev, "replaced", when);
    cJSON *list = cJSON_GetObjectItemCaseSensitive(row, "previous_scores");
    if (!cJSON_IsArray(list)) {
        cJSON_DeleteItemFromObjectCaseSensitive(row, "previous_scores");
        list = cJSON_AddArrayToObject(row, "previous_scores");
    }
    cJSON_AddItemToArray(list, prev);
    while (cJSON_GetArraySize(list) > RESCORE_KEPT)
        cJSON_DeleteItemFromArray(list, 0);
    char was[32];
    if (!strcmp(reason, "scorer_error"))
        agent_reason(dfd, row, was, sizeof was);
    else
        snprintf(was, sizeof was, "%s", reason);
    double s = 0;
    lis_error err = {0};
    int ok = batch_scorer_score(sc, jstr(row, "answer"), row, &s, &err) == 0;
    cJSON_ReplaceItemInObjectCaseSensitive(row, "score", cJSON_CreateNumber(ok ? s : 0));
    cJSON_ReplaceItemInObjectCaseSensitive(row, "reason",
                                           cJSON_CreateString(ok ? was : "scorer_error"));
    cJSON_ReplaceItemInObjectCaseSensitive(row, "error",
                                           ok ? cJSON_CreateNull() : cJSON_CreateString(err.msg));
    cJSON_ReplaceItemInObjectCaseSensitive(row, "scorer",
                                           cJSON_CreateString(batch_scorer_name(sc)));
    cJSON_ReplaceItemInObjectCaseSensitive(row, "scorer_sha256",
                                           cJSON_CreateString(batch_scorer_sha256(sc)));
    return ok;
}

/* run.json: the scorer of every score now, this rescoring listed, and a
 * run that had failed for its scorer is complete once a row is scored. */
static int update_run_json(int dfd, const char *dir, cJSON *config, batch_scorer *sc,
                           const char *when, size_t scored, size_t failed, lis_error *err)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "scorer", batch_scorer_name(sc));
    cJSON_AddStringToObject(r, "scorer_sha256", batch_scorer_sha256(sc));
    cJSON_AddStringToObject(r, "scorer_file", batch_scorer_source(sc));
    cJSON_AddStringToObject(r, "time", when);
    cJSON_AddNumberToObject(r, "scored", (double)scored);
    cJSON_AddNumberToObject(r, "scorer_errors", (double)failed);
    cJSON *list = cJSON_GetObjectItemCaseSensitive(config, "rescored");
    if (!cJSON_IsArray(list))
        list = cJSON_AddArrayToObject(config, "rescored");
    cJSON_AddItemToArray(list, r);
    cJSON_ReplaceItemInObjectCaseSensitive(config, "scorer",
                                           cJSON_CreateString(batch_scorer_name(sc)));
    cJSON_ReplaceItemInObjectCaseSensitive(config, "scorer_sha256",
                                           cJSON_CreateString(batch_scorer_sha256(sc)));
    cJSON_ReplaceItemInObjectCaseSensitive(config, "scorer_file",
                                           cJSON_CreateString(batch_scorer_source(sc)));
    const char *st = jstr(config, "status");
    if (!strcmp(st, "failed") && scored) {
        cJSON_ReplaceItemInObjectCaseSensitive(config, "status", cJSON_CreateString("complete"));
        cJSON_ReplaceItemInObjectCaseSensitive(config, "status_reason", cJSON_CreateString(""));
        cJSON_ReplaceItemInObjectCaseSensitive(config, "status_message", cJSON_CreateString(""));
    } else if (!strcmp(st, "complete") && !scored && failed) {
        char msg[200];
        snprintf(msg, sizeof msg, "the scorer failed on every one of the %zu rows", failed);
        cJSON_ReplaceItemInObjectCaseSensitive(config, "status", cJSON_CreateString("failed"));
        cJSON_ReplaceItemInObjectCaseSensitive(config, "status_reason",
                                               cJSON_CreateString("scorer_failed"));
        cJSON_ReplaceItemInObjectCaseSensitive(config, "status_message", cJSON_CreateString(msg));
    }
    char *text = agent_json_pretty(config);
    int rc = text ? bo_write_atomic(dfd, dir, "run.json", text, strlen(text), err) : lis_oom(err);
    free(text);
    return rc;
}

int lis_batch_rescore(const char *dir, const char *scorer, FILE *out, lis_error *err)
{
    if (batch_repair_if_dead(dir, err) < 0)
        return -1;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return lis_fail_errno(err, "lis batch rescore %s", dir);
    int rc = -1;
    batch_scorer *sc = NULL;
    rs_rows R = {cJSON_CreateArray()};
    strbuf text = {0};
    size_t len = 0;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/run.json", dir);
    char *raw = agent_read_host_file(path, &len, err);
    cJSON *config = raw ? cJSON_ParseWithLength(raw, len) : NULL;
    free(raw);
    if (!cJSON_IsObject(config)) {
        lis_fail(err, EINVAL, "%s is not a lis batch run's directory (no run.json)", dir);
        goto out;
    }
    if (!strcmp(jstr(config, "status"), "running")) {
        lis_fail(err, EBUSY, "the run on %s is still running: rescore it once it has ended", dir);
        goto out;
    }
    if (open_scorer(config, scorer, &sc, err) < 0 ||
        bo_read_jsonl_at(dfd, dir, "results.jsonl", 1, collect, &R, err) < 0)
        goto out;
    char when[40];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    size_t scored = 0, failed = 0;
    cJSON *row;
    cJSON_ArrayForEach(row, R.rows)
    {
        int s = rescore_row(dfd, row, sc, when);
        scored += s == 1;
        failed += s == 0;
        char *line = lis_json_print(row, 0); /* strict UTF-8, as every file lis writes */
        if (!line) {
            lis_oom(err);
            goto out;
        }
        strbuf_puts(&text, line);
        strbuf_putc(&text, '\n');
        free(line);
    }
    if (text.oom) {
        lis_oom(err);
        goto out;
    }
    if (bo_write_atomic(dfd, dir, "results.jsonl", text.s ? text.s : "", text.len, err) < 0 ||
        update_run_json(dfd, dir, config, sc, when, scored, failed, err) < 0)
        goto out;
    cJSON *summary = NULL;
    if (batch_report_write(dir, -1, &summary, err) < 0)
        goto out;
    fprintf(out, "lis batch rescore: %zu rows scored by %s (sha256 %s), %zu failed\n", scored,
            batch_scorer_name(sc), batch_scorer_sha256(sc), failed);
    bprog_summary(out, summary);
    cJSON_Delete(summary);
    lis_error rerr = {0};
    if (lis_report_html(dir, NULL, 0, &rerr) < 0)
        fprintf(out, "lis: warning: writing the report: %s\n", rerr.msg);
    if (failed && !scored) {
        lis_fail(err, EIO, "FAILED: the scorer failed on every one of the %zu rows", failed);
        goto out;
    }
    rc = 0;
out:
    batch_scorer_close(sc);
    cJSON_Delete(R.rows);
    cJSON_Delete(config);
    strbuf_release(&text);
    close(dfd);
    return rc;
}
