/* test_batch_results.c - lis batch's data out: the crash-safe output
 * directory (batch/results.c) and the original's report files
 * (batch/results_report.c): resume, torn lines, kills, threads, reports. */
#include "testlib.h"
#include "results.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers ---------------------------------------------------------- */

static char tmp_root[256];

static void mk_tmp(void) { t_mkdtemp(tmp_root, sizeof tmp_root, "lis-br"); }
static void rm_tmp(void) { t_rmtree(tmp_root); }

TestSuite(batch_results, .init = mk_tmp, .fini = rm_tmp);

static const char *tpath(const char *name) { return t_under(tmp_root, name); }

static int one_line(const char *s) { return *s && !strchr(s, '\n'); }

/* ---- the output directory --------------------------------------------- */

static cJSON *config_of(const char *model)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "mode", "llm-in-sandbox");
    cJSON_AddStringToObject(c, "task", "demo");
    cJSON *llm = cJSON_AddObjectToObject(c, "llm");
    cJSON_AddStringToObject(llm, "model", model);
    cJSON_AddNumberToObject(llm, "temperature", 0.7);
    cJSON_AddNumberToObject(c, "max_steps", 100);
    return c;
}

static cJSON *row_of(const char *id, int attempt, double score, const char *reason)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", id);
    cJSON_AddNumberToObject(r, "attempt", attempt);
    cJSON_AddNumberToObject(r, "score", score);
    cJSON_AddStringToObject(r, "answer", "42");
    cJSON_AddStringToObject(r, "ground_truth", "42");
    cJSON_AddStringToObject(r, "problem_statement", "What?");
    cJSON_AddStringToObject(r, "reason", reason);
    cJSON_AddStringToObject(r, "error", strstr(reason, "error") ? "boom" : "");
    cJSON_AddNumberToObject(r, "steps", 3);
    cJSON_AddNumberToObject(r, "prompt_tokens", 100);
    cJSON_AddNumberToObject(r, "completion_tokens", 10);
    cJSON_AddNumberToObject(r, "llm_seconds", 1.5);
    cJSON_AddNumberToObject(r, "tool_seconds", 0.5);
    cJSON_AddNumberToObject(r, "wall_seconds", 2.5);
    return r;
}

static cJSON *traj_of(const char *tag)
{
    cJSON *t = cJSON_CreateObject();
    cJSON *steps = cJSON_AddArrayToObject(t, "steps");
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "tag", tag);
    cJSON_AddItemToArray(steps, s);
    cJSON_AddObjectToObject(t, "metadata");
    return t;
}

static batch_out *open_out(const char *dir, const char *model, int resume)
{
    cJSON *c = config_of(model);
    batch_out *o = NULL;
    lis_error err = {0};
    int rc = batch_out_open(dir, c, resume, &o, &err);
    cJSON_Delete(c);
    cr_assert_eq(rc, 0, "%s", err.msg);
    return o;
}

static int append(batch_out *o, const char *id, int attempt, double score, const char *reason,
                  lis_error *err)
{
    cJSON *r = row_of(id, attempt, score, reason), *t = traj_of(id);
    char log[128];
    snprintf(log, sizeof log, "log of %s@%d\n", id, attempt);
    int rc = batch_out_append(o, r, t, log, err);
    cJSON_Delete(r);
    cJSON_Delete(t);
    return rc;
}

static void append_ok(batch_out *o, const char *id, int attempt, double score, const char *reason)
{
    lis_error err = {0};
    cr_assert_eq(append(o, id, attempt, score, reason, &err), 0, "%s", err.msg);
}

/* Every line of results.jsonl is a whole row; returns how many. */
static size_t whole_rows(const char *dir)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/results.jsonl", dir);
    char *s = t_slurp(p);
    size_t n = 0, len = strlen(s);
    cr_assert(len == 0 || s[len - 1] == '\n', "ends with a newline");
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        cr_assert(cJSON_IsObject(j), "a whole row: %.100s", line);
        cJSON_Delete(j);
        n++;
    }
    free(s);
    return n;
}

Test(batch_results, append_reopen_resume)
{
    const char *dir = tpath("runs/one");
    batch_out *o = open_out(dir, "m", 0);
    cr_assert_str_eq(batch_out_dir(o), dir);
    cr_assert_eq(batch_out_count(o), 0);
    append_ok(o, "a", 0, 1, "submitted");
    append_ok(o, "b", 0, 0, "max_steps");
    append_ok(o, "a", 1, 1, "submitted");
    cr_assert(batch_out_has(o, "a", 0));
    cr_assert(batch_out_has(o, "a", 1));
    cr_assert_not(batch_out_has(o, "b", 1));
    cr_assert_eq(batch_out_count(o), 3);
    batch_out_close(o);

    cJSON *run = t_slurp_json(tpath("runs/one/run.json"));
    cr_assert_str_eq(cJSON_GetStringValue(
                         cJSON_GetObjectItem(cJSON_GetObjectItem(run, "llm"), "model")),
                     "m");
    cJSON_Delete(run);
    cJSON *tj = t_slurp_json(tpath("runs/one/trajectories/a@1.json"));
    cr_assert_str_eq(cJSON_GetStringValue(
                         cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(tj, "steps"), 0),
                                             "tag")),
                     "a");
    cJSON_Delete(tj);
    char *log = t_slurp(tpath("runs/one/logs/b.txt"));
    cr_assert_str_eq(log, "log of b@0\n");
    free(log);

    o = open_out(dir, "m", 1);
    cr_assert_eq(batch_out_count(o), 3);
    cr_assert(batch_out_has(o, "b", 0));
    cr_assert_not(batch_out_has(o, "c", 0));
    append_ok(o, "c", 0, 1, "submitted");
    lis_error err = {0};
    cr_assert_eq(append(o, "b", 0, 1, "submitted", &err), -1, "a second row is refused");
    cr_assert(strstr(err.msg, "\"b\" attempt 0") && one_line(err.msg), "%s", err.msg);
    cr_assert_eq(batch_out_count(o), 4);
    batch_out_close(o);
    cr_assert_eq(whole_rows(dir), 4);

    /* a row needs an id and an attempt */
    o = open_out(dir, "m", 1);
    cJSON *bad = cJSON_CreateObject();
    cJSON_AddStringToObject(bad, "id", "z");
    cr_assert_eq(batch_out_append(o, bad, NULL, NULL, &err), -1);
    cr_assert(strstr(err.msg, "attempt"), "%s", err.msg);
    cJSON_Delete(bad);
    batch_out_close(o);

    /* a new run does not reuse a directory */
    cJSON *c = config_of("m");
    cr_assert_eq(batch_out_open(dir, c, 0, &o, &err), -1);
    cr_assert(strstr(err.msg, "--resume") && one_line(err.msg), "%s", err.msg);
    cr_assert_eq(batch_out_open(tpath("nothere"), c, 1, &o, &err), -1);
    cr_assert(strstr(err.msg, "--resume") && one_line(err.msg), "%s", err.msg);
    cJSON_Delete(c);
}

Test(batch_results, one_writer_per_directory)
{
    const char *dir = tpath("lock");
    batch_out *o = open_out(dir, "m", 0);
    cJSON *c = config_of("m");
    batch_out *o2 = NULL;
    lis_error err = {0};
    cr_assert_eq(batch_out_open(dir, c, 1, &o2, &err), -1, "a second writer is refused");
    cr_assert(strstr(err.msg, "in use by another lis batch") && one_line(err.msg), "%s", err.msg);
    batch_out_close(o);
    cr_assert_eq(batch_out_open(dir, c, 1, &o2, &err), 0, "%s", err.msg);
    batch_out_close(o2);
    /* a wrong --resume DIR (no run.json) is left untouched */
    mkdir(tpath("notarun"), 0755);
    cr_assert_eq(batch_out_open(tpath("notarun"), c, 1, &o2, &err), -1);
    cr_assert(strstr(err.msg, "no run.json"), "%s", err.msg);
    cr_assert_neq(access(tpath("notarun/results.jsonl"), F_OK), 0);
    cr_assert_neq(access(tpath("notarun/logs"), F_OK), 0);
    cJSON_Delete(c);
}

Test(batch_results, resume_with_other_config_names_the_key)
{
    const char *dir = tpath("r");
    batch_out_close(open_out(dir, "model-a", 0));
    cJSON *c = config_of("model-b");
    batch_out *o = NULL;
    lis_error err = {0};
    cr_assert_eq(batch_out_open(dir, c, 1, &o, &err), -1);
    cr_assert(strstr(err.msg, "llm.model differs"), "%s", err.msg);
    cr_assert(strstr(err.msg, "\"model-a\"") && strstr(err.msg, "\"model-b\""), "%s", err.msg);
    cr_assert(one_line(err.msg));
    cJSON_Delete(c);
    /* a key only in this run, and one only in run.json */
    c = config_of("model-a");
    cJSON_AddNumberToObject(c, "repeat", 4);
    cr_assert_eq(batch_out_open(dir, c, 1, &o, &err), -1);
    cr_assert(strstr(err.msg, "repeat differs (run.json: (absent), this run: 4)"), "%s", err.msg);
    cJSON_Delete(c);
    c = config_of("model-a");
    cJSON_DeleteItemFromObject(c, "max_steps");
    cr_assert_eq(batch_out_open(dir, c, 1, &o, &err), -1);
    cr_assert(strstr(err.msg, "max_steps differs (run.json: 100, this run: (absent))"), "%s",
              err.msg);
    cJSON_Delete(c);
}

/* Appends len bytes of junk to results.jsonl (path p) of dir: a resume cuts
 * them as a torn last line and keeps the rows rows. */
static void tail_is_cut(const char *dir, const char *p, const char *junk, size_t len, size_t rows)
{
    FILE *f = fopen(p, "a");
    cr_assert_not_null(f, "%s: %s", p, strerror(errno));
    cr_assert_eq(fwrite(junk, 1, len, f), len);
    fclose(f);
    batch_out *o = open_out(dir, "m", 1);
    cr_assert_eq(batch_out_count(o), rows);
    batch_out_close(o);
    cr_assert_eq(whole_rows(dir), rows);
}

Test(batch_results, torn_last_line_is_cut)
{
    const char *dir = tpath("t");
    batch_out *o = open_out(dir, "m", 0);
    append_ok(o, "a", 0, 1, "submitted");
    append_ok(o, "b", 0, 1, "submitted");
    batch_out_close(o);
    char p[1024];
    snprintf(p, sizeof p, "%s/results.jsonl", dir);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    off_t whole = st.st_size;
    /* a crash in the middle of a write: no newline */
    FILE *f = fopen(p, "a");
    fputs("{\"id\":\"c\",\"attempt\":0,\"sco", f);
    fclose(f);
    /* the report (read-only) skips it and leaves it */
    lis_error err = {0};
    cJSON *sum = NULL;
    cr_assert_eq(batch_report_write(dir, 1, &sum, &err), 0, "%s", err.msg);
    cr_assert_eq(cJSON_GetObjectItem(sum, "total")->valuedouble, 2);
    cJSON_Delete(sum);
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_gt(st.st_size, whole);
    o = open_out(dir, "m", 1);
    cr_assert_eq(batch_out_count(o), 2);
    cr_assert_not(batch_out_has(o, "c", 0));
    append_ok(o, "c", 0, 1, "submitted");
    batch_out_close(o);
    cr_assert_eq(whole_rows(dir), 3);

    /* zeros after a power cut: a last line with no newline either; an
     * unparsable last line (with its newline) is torn too */
    static const char zeros[8] = {0}, torn[] = "{\"id\":\"d\",\"attem\n";
    tail_is_cut(dir, p, zeros, sizeof zeros, 3);
    tail_is_cut(dir, p, torn, sizeof torn - 1, 3);

    /* but a bad line with rows after it is no crash: refused, named */
    f = fopen(p, "a");
    fputs("garbage\n{\"id\":\"e\",\"attempt\":0}\n", f);
    fclose(f);
    cJSON *c = config_of("m");
    cr_assert_eq(batch_out_open(dir, c, 1, &o, &err), -1);
    cr_assert(strstr(err.msg, "results.jsonl:4:") && one_line(err.msg), "%s", err.msg);
    cJSON_Delete(c);
}

/* A short write (here: the file size limit, as a full disk would) leaves no
 * part-row behind and no "done" mark: the same episode can be appended later. */
Test(batch_results, a_failed_append_leaves_nothing)
{
    const char *dir = tpath("full");
    batch_out *o = open_out(dir, "m", 0);
    append_ok(o, "a", 0, 1, "submitted");
    char p[1024];
    snprintf(p, sizeof p, "%s/results.jsonl", dir);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    off_t before = st.st_size;
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = (rlim_t)before + 40; /* the row stops after 40 bytes */
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    cJSON *r = row_of("b", 0, 1, "submitted");
    lis_error err = {0};
    cr_assert_eq(batch_out_append(o, r, NULL, NULL, &err), -1);
    cr_assert(strstr(err.msg, "cannot append"), "%s", err.msg);
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_size, before, "the part-row is cut off");
    cr_assert_not(batch_out_has(o, "b", 0));
    /* a trajectory that cannot be written fails the append before its row */
    lim.rlim_cur = 10;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    cJSON *t = traj_of("b");
    cr_assert_eq(batch_out_append(o, r, t, NULL, &err), -1);
    cr_assert(strstr(err.msg, "trajectories"), "%s", err.msg);
    cr_assert_not(batch_out_has(o, "b", 0));
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    cr_assert_eq(batch_out_append(o, r, t, NULL, &err), 0, "%s", err.msg);
    cr_assert(batch_out_has(o, "b", 0));
    cJSON_Delete(r);
    cJSON_Delete(t);
    batch_out_close(o);
    cr_assert_eq(whole_rows(dir), 2);
}

Test(batch_results, keys_are_injective_file_names)
{
    static const char *const ids[] = {"a/b", "a_b", "a%2Fb", "a@1",  "a",   ".hidden", "%2Ehidden",
                                      "..",  "a b", "über",  "a\\b", "a:b", "A"};
    char *keys[sizeof ids / sizeof *ids + 1];
    size_t n = sizeof ids / sizeof *ids;
    for (size_t i = 0; i < n; i++) {
        keys[i] = batch_out_key(ids[i], 0);
        cr_assert_not_null(keys[i]);
        cr_assert_null(strchr(keys[i], '/'), "%s", keys[i]);
        cr_assert_neq(keys[i][0], '.', "%s", keys[i]);
    }
    keys[n] = batch_out_key("a", 1);
    cr_assert_str_eq(keys[n], "a@1");
    for (size_t i = 0; i <= n; i++)
        for (size_t j = i + 1; j <= n; j++)
            cr_assert_str_neq(keys[i], keys[j], "%zu %zu", i, j);
    cr_assert_str_eq(keys[1], "a_b", "plain ids stay as they are (the original's logs/<id>.txt)");
    cr_assert_str_eq(keys[9], "über");
    for (size_t i = 0; i <= n; i++)
        free(keys[i]);
    /* long ids: still distinct and short enough for a file name */
    char a[1200], b[1200];
    memset(a, 'x', sizeof a - 1), a[sizeof a - 1] = 0;
    memcpy(b, a, sizeof b);
    b[sizeof b - 2] = 'y';
    char *ka = batch_out_key(a, 0), *kb = batch_out_key(b, 0), *ka1 = batch_out_key(a, 1);
    cr_assert_lt(strlen(ka), 240);
    cr_assert_str_neq(ka, kb);
    cr_assert_str_neq(ka, ka1);
    free(ka), free(kb), free(ka1);

    /* and on disk: two ids, two files */
    batch_out *o = open_out(tpath("k"), "m", 0);
    append_ok(o, "a/b", 0, 1, "submitted");
    append_ok(o, "a_b", 0, 0, "submitted");
    append_ok(o, a, 0, 0, "submitted");
    batch_out_close(o);
    char *l1 = t_slurp(tpath("k/logs/a%2Fb.txt")), *l2 = t_slurp(tpath("k/logs/a_b.txt"));
    cr_assert_str_eq(l1, "log of a/b@0\n");
    cr_assert_str_eq(l2, "log of a_b@0\n");
    free(l1), free(l2);
    lis_error err = {0};
    cr_assert_eq(batch_report_write(tpath("k"), 1, NULL, &err), 0, "%s", err.msg);
    cJSON *tj = t_slurp_json(tpath("k/trajectory.json"));
    cr_assert_eq(cJSON_GetArraySize(tj), 3);
    const cJSON *e = cJSON_GetObjectItem(tj, a);
    cr_assert_str_eq(cJSON_GetStringValue(
                         cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(e, "trajectory"),
                                                                0),
                                             "tag")),
                     a);
    cJSON_Delete(tj);
}

/* A writer that appends until it is killed (resuming what is there). */
static void writer(const char *dir, int round)
{
    cJSON *c = config_of("m");
    batch_out *o = NULL;
    lis_error err = {0};
    if (batch_out_open(dir, c, 1, &o, &err) < 0)
        _exit(3);
    cJSON_Delete(c);
    for (int i = 0; i < 100000; i++) {
        char id[32];
        snprintf(id, sizeof id, "w%d", i);
        if (batch_out_has(o, id, 0))
            continue;
        cJSON *r = row_of(id, 0, 1, "submitted"), *t = traj_of(id);
        /* a larger row, so a kill can land inside its write */
        char pad[2048];
        memset(pad, 'p', sizeof pad - 1), pad[sizeof pad - 1] = 0;
        cJSON_AddStringToObject(r, "pad", pad);
        cJSON_AddNumberToObject(r, "round", round);
        if (batch_out_append(o, r, t, "log\n", &err) < 0)
            _exit(4);
        cJSON_Delete(r);
        cJSON_Delete(t);
    }
    _exit(0);
}

Test(batch_results, kill_9_mid_append_loses_no_whole_row_and_doubles_none)
{
    const char *dir = tpath("kill");
    batch_out_close(open_out(dir, "m", 0));
    char p[1024];
    snprintf(p, sizeof p, "%s/results.jsonl", dir);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    size_t before = 0;
    for (int round = 0; round < 4; round++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0)
            writer(dir, round);
        /* until it has written a few rows, then a random moment more */
        struct stat st;
        for (int i = 0; i < 2000; i++) {
            if (stat(p, &st) == 0 && (size_t)st.st_size > (before + 3) * 2048)
                break;
            usleep(2000);
        }
        usleep((useconds_t)(rand() % 20000));
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        cr_assert(WIFSIGNALED(status), "the writer was killed, not exited (%d)", status);
        /* reopen: whole rows only, each once, and each row's files in place */
        batch_out *o = open_out(dir, "m", 1);
        size_t n = batch_out_count(o);
        batch_out_close(o);
        cr_assert_geq(n, before, "rows are never lost once written");
        cr_assert_eq(whole_rows(dir), n);
        before = n;
    }
    cr_assert_gt(before, 0);
    char *s = t_slurp(p);
    int *seen = calloc(100000, sizeof *seen);
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(j, "id"));
        cr_assert(id && id[0] == 'w');
        int k = atoi(id + 1);
        cr_assert_eq(seen[k]++, 0, "%s twice", id);
        char tp[1200];
        snprintf(tp, sizeof tp, "%s/trajectories/%s.json", dir, id);
        cr_assert_eq(access(tp, F_OK), 0, "%s: the trajectory is written before the row", id);
        cJSON_Delete(j);
    }
    free(s);
    free(seen);
    /* no temporaries survive a reopen */
    int code;
    char *left =
        t_host(&code, "ls -A '%s/trajectories' '%s/logs' | grep -c '^\\.tmp-' || true", dir, dir);
    cr_assert_eq(atoi(left), 0, "%s", left);
    free(left);
}

typedef struct thr_arg {
    batch_out *o;
    int k;
    int dup_ok;
    int fails;
} thr_arg;

static void *thr_main(void *p)
{
    thr_arg *a = p;
    lis_error err;
    for (int i = 0; i < 40; i++) {
        char id[32];
        snprintf(id, sizeof id, "t%d-%d", a->k, i);
        if (append(a->o, id, 0, 1, "submitted", &err) < 0)
            a->fails++;
        if (i == 20)
            a->dup_ok = append(a->o, "shared", 0, 1, "submitted", &err) == 0;
    }
    return NULL;
}

Test(batch_results, sixteen_threads_append_concurrently)
{
    const char *dir = tpath("thr");
    batch_out *o = open_out(dir, "m", 0);
    pthread_t th[16];
    thr_arg args[16];
    for (int i = 0; i < 16; i++) {
        args[i] = (thr_arg){o, i, 0, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
    }
    int dups = 0;
    for (int i = 0; i < 16; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(args[i].fails, 0);
        dups += args[i].dup_ok;
    }
    cr_assert_eq(dups, 1, "exactly one of the 16 appends of one episode wins");
    cr_assert_eq(batch_out_count(o), 16 * 40 + 1);
    batch_out_close(o);
    cr_assert_eq(whole_rows(dir), 16 * 40 + 1);
    o = open_out(dir, "m", 1);
    cr_assert_eq(batch_out_count(o), 16 * 40 + 1);
    batch_out_close(o);
}

Test(batch_results, cancelled_rows_run_again_and_count_once)
{
    const char *dir = tpath("c");
    batch_out *o = open_out(dir, "m", 0);
    append_ok(o, "a", 0, 0, "cancelled");
    cr_assert_not(batch_out_has(o, "a", 0), "a cancelled episode is not done");
    cr_assert_eq(batch_out_count(o), 0);
    batch_out_close(o);
    o = open_out(dir, "m", 1);
    cr_assert_not(batch_out_has(o, "a", 0));
    append_ok(o, "a", 0, 1, "submitted");
    cr_assert(batch_out_has(o, "a", 0));
    lis_error err = {0};
    cr_assert_eq(append(o, "a", 0, 1, "submitted", &err), -1);
    batch_out_close(o);
    cJSON *sum = NULL;
    cr_assert_eq(batch_report_write(dir, 2, &sum, &err), 0, "%s", err.msg);
    cr_assert_eq(cJSON_GetObjectItem(sum, "total")->valuedouble, 1);
    cr_assert_eq(cJSON_GetObjectItem(sum, "mean_score")->valuedouble, 1);
    cr_assert_eq(cJSON_GetObjectItem(sum, "num_errors")->valuedouble, 0);
    cJSON_Delete(sum);
    o = open_out(dir, "m", 1);
    cr_assert_eq(batch_out_count(o), 1);
    batch_out_close(o);
}

Test(batch_results, report_files_as_the_original_plus_lis_counts)
{
    const char *dir = tpath("rep");
    batch_out *o = open_out(dir, "m", 0);
    append_ok(o, "x", 0, 1, "submitted");
    append_ok(o, "x", 1, 0, "max_steps");
    append_ok(o, "y", 0, 0, "llm_error");
    append_ok(o, "y", 1, 1, "submitted");
    append_ok(o, "z", 0, 0, "deadline");
    append_ok(o, "z", 1, 0, "token_limit");
    batch_out_close(o);
    lis_error err = {0};
    cJSON *sum = NULL;
    cr_assert_eq(batch_report_write(dir, 12.5, &sum, &err), 0, "%s", err.msg);
    cJSON *res = t_slurp_json(tpath("rep/results.json"));
    cr_assert(cJSON_Compare(sum, res, 1), "the summary is results.json");
    cJSON_Delete(sum);
    /* the original's keys first, in its order */
    static const char *const order[] = {"config",     "task",       "total",
                                        "mean_score", "num_errors", "elapsed_time_seconds"};
    const cJSON *it = res->child;
    for (size_t i = 0; i < 6; i++, it = it->next)
        cr_assert_str_eq(it->string, order[i]);
    cr_assert_str_eq(cJSON_GetStringValue(
                         cJSON_GetObjectItem(cJSON_GetObjectItem(res, "config"), "mode")),
                     "llm-in-sandbox");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(res, "task")), "demo");
    cr_assert_eq(cJSON_GetObjectItem(res, "total")->valuedouble, 6);
    cr_assert_float_eq(cJSON_GetObjectItem(res, "mean_score")->valuedouble, 2.0 / 6, 1e-9);
    cr_assert_eq(cJSON_GetObjectItem(res, "num_errors")->valuedouble, 2, "llm_error, deadline");
    cr_assert_eq(cJSON_GetObjectItem(res, "elapsed_time_seconds")->valuedouble, 12.5);
    const cJSON *br = cJSON_GetObjectItem(res, "by_reason");
    cr_assert_eq(cJSON_GetObjectItem(br, "submitted")->valuedouble, 2);
    cr_assert_eq(cJSON_GetObjectItem(br, "deadline")->valuedouble, 1);
    cr_assert_eq(cJSON_GetObjectItem(res, "prompt_tokens")->valuedouble, 600);
    cr_assert_eq(cJSON_GetObjectItem(res, "completion_tokens")->valuedouble, 60);
    cr_assert_float_eq(cJSON_GetObjectItem(res, "wall_seconds")->valuedouble, 15, 1e-9);
    cr_assert_eq(cJSON_GetObjectItem(res, "attempts")->valuedouble, 2);
    cr_assert_eq(cJSON_GetObjectItem(res, "ids")->valuedouble, 3);
    const cJSON *by = cJSON_GetObjectItem(res, "mean_score_by_attempt");
    cr_assert_eq(cJSON_GetArraySize(by), 2);
    cr_assert_float_eq(cJSON_GetArrayItem(by, 0)->valuedouble, 1.0 / 3, 1e-9);
    cr_assert_float_eq(cJSON_GetArrayItem(by, 1)->valuedouble, 1.0 / 3, 1e-9);
    cr_assert_float_eq(cJSON_GetObjectItem(res, "pass_at_k")->valuedouble, 2.0 / 3, 1e-9);
    cr_assert_null(cJSON_GetObjectItem(res, "judged"));
    cJSON_Delete(res);

    cJSON *tj = t_slurp_json(tpath("rep/trajectory.json"));
    cr_assert_eq(cJSON_GetArraySize(tj), 6);
    const cJSON *x1 = cJSON_GetObjectItem(tj, "x@1");
    cr_assert_not_null(x1, "attempt 1's key is ID@1");
    static const char *const fields[] = {"problem_statement", "trajectory", "reward",
                                         "agent_answer", "ground_truth"};
    it = x1->child;
    for (size_t i = 0; i < 5; i++, it = it->next)
        cr_assert_str_eq(it->string, fields[i]);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(x1, "agent_answer")), "42");
    cr_assert_eq(cJSON_GetObjectItem(x1, "reward")->valuedouble, 0);
    const cJSON *steps = cJSON_GetObjectItem(x1, "trajectory");
    cr_assert(cJSON_IsArray(steps), "the steps array, as the original's trajectory.steps");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(steps, 0), "tag")),
                     "x");
    cJSON_Delete(tj);
    char *text = t_slurp(tpath("rep/trajectory.json"));
    cr_assert(!strncmp(text, "{\n  \"x\": {\n    \"problem_statement\": \"What?\",\n", 45),
              "json.dump(indent=2) layout: %.80s", text);
    free(text);

    /* judge.jsonl's score replaces the row's; a later verdict wins; a torn
     * last line is skipped */
    char jp[1024];
    snprintf(jp, sizeof jp, "%s/judge.jsonl", dir);
    t_put(jp, "{\"id\":\"z\",\"attempt\":0,\"score\":0,\"verdict\":\"INCORRECT\"}\n"
              "{\"id\":\"x\",\"attempt\":1,\"score\":1,\"verdict\":\"CORRECT\"}\n"
              "{\"id\":\"z\",\"attempt\":0,\"score\":1,\"verdict\":\"CORRECT\"}\n"
              "{\"id\":\"y\",\"attempt\":0,\"score\":null,\"verdict\":\"?\"}\n"
              "{\"id\":\"y\",\"attempt\":1,\"score\":0,\"verd");
    cr_assert_eq(batch_report_write(dir, -1, &sum, &err), 0, "%s", err.msg);
    cr_assert_float_eq(cJSON_GetObjectItem(sum, "mean_score")->valuedouble, 4.0 / 6, 1e-9);
    cr_assert_eq(cJSON_GetObjectItem(sum, "judged")->valuedouble, 2);
    cr_assert_eq(cJSON_GetObjectItem(sum, "elapsed_time_seconds")->valuedouble, 12.5,
                 "a report without the time keeps the run's");
    cr_assert_float_eq(cJSON_GetObjectItem(sum, "pass_at_k")->valuedouble, 1, 1e-9);
    cJSON_Delete(sum);
    tj = t_slurp_json(tpath("rep/trajectory.json"));
    cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(tj, "x@1"), "reward")->valuedouble, 1);
    cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(tj, "y"), "reward")->valuedouble, 0);
    cJSON_Delete(tj);

    /* no run there */
    cr_assert_eq(batch_report_write(tmp_root, 1, NULL, &err), -1);
    cr_assert(strstr(err.msg, "run.json") && one_line(err.msg), "%s", err.msg);
}

Test(batch_results, empty_run_report)
{
    const char *dir = tpath("empty");
    batch_out_close(open_out(dir, "m", 0));
    lis_error err = {0};
    cJSON *sum = NULL;
    cr_assert_eq(batch_report_write(dir, 0, &sum, &err), 0, "%s", err.msg);
    cr_assert_eq(cJSON_GetObjectItem(sum, "total")->valuedouble, 0);
    cr_assert_eq(cJSON_GetObjectItem(sum, "mean_score")->valuedouble, 0);
    cJSON_Delete(sum);
    char *t = t_slurp(tpath("empty/trajectory.json"));
    cr_assert_str_eq(t, "{}");
    free(t);
}
