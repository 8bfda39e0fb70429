/* test_batch_shard.c - `lis batch --shard K/N` and `lis batch merge`, as the
 * unprivileged test user, with real `lis batch` runs (busybox sandboxes, or
 * --mode llm where only the files matter) against tests/fake_llm.py in
 * conversation mode. No Slurm here: scripts/slurm/ci-test.sh runs the same
 * through a real single-node cluster. */
#include "testlib.h"
#include "lis_batch.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static void setup(void)
{
    lis_ctx_free(t_ctx());
    unsetenv("SLURM_ARRAY_TASK_ID");
    unsetenv("SLURM_ARRAY_TASK_MIN");
    unsetenv("SLURM_ARRAY_TASK_COUNT");
    unsetenv("SLURM_ARRAY_TASK_STEP");
    unsetenv("JOB_COMPLETION_INDEX");
}
TestSuite(shard, .init = setup);

/* ---- small helpers (as tests/test_batch.c's) ---------------------------- */

static char *dir_for(const char *name)
{
    static char d[512];
    snprintf(d, sizeof d, "%s/shard-%s-%ld", t_tmpdir(), name, (long)getpid());
    char *o = t_host(NULL, "rm -rf %s && mkdir -p %s", d, d);
    free(o);
    return d;
}

static cJSON *json_file(const char *dir, const char *name)
{
    char *t = t_host(NULL, "cat %s/%s", dir, name);
    cJSON *j = cJSON_Parse(t);
    cr_assert(j, "%s/%s: %s", dir, name, t);
    free(t);
    return j;
}

/* "id score reason" of every row, sorted: what a run decided */
static char *outcomes(const char *rdir)
{
    cJSON *rows = t_results_rows(rdir);
    char path[700];
    snprintf(path, sizeof path, "%s/outcomes.txt", t_tmpdir());
    FILE *f = fopen(path, "w");
    cr_assert(f);
    const cJSON *r;
    cJSON_ArrayForEach(r, rows)
        fprintf(f, "%s@%d %g %s\n", cJSON_GetStringValue(cJSON_GetObjectItem(r, "id")),
                (int)cJSON_GetNumberValue(cJSON_GetObjectItem(r, "attempt")),
                cJSON_GetNumberValue(cJSON_GetObjectItem(r, "score")),
                cJSON_GetStringValue(cJSON_GetObjectItem(r, "reason")));
    fclose(f);
    cJSON_Delete(rows);
    return t_host(NULL, "sort %s", path);
}

#define LIS_BATCH "batch --llm-name fake --llm-base-url %s --api-key k --rootfs %s --net none "
#define LIS_PLAIN "batch --llm-name fake --llm-base-url %s --api-key k --mode llm --quiet "

/* ---- which shard ------------------------------------------------------ */

static void want_shard(const char *flag, int shards, int k, int n)
{
    int gk = -9, gn = -9;
    lis_error err = {0};
    int rc = lis_batch_shard_resolve(flag, shards, getenv, &gk, &gn, &err);
    cr_assert_eq(rc, 0, "%s/%d: %s", flag ? flag : "-", shards, err.msg);
    cr_expect_eq(gk, k, "%s/%d: index %d, want %d", flag ? flag : "-", shards, gk, k);
    cr_expect_eq(gn, n, "%s/%d: count %d, want %d", flag ? flag : "-", shards, gn, n);
}

static void want_refusal(const char *flag, int shards, const char *words)
{
    int gk, gn;
    lis_error err = {0};
    cr_assert_eq(lis_batch_shard_resolve(flag, shards, getenv, &gk, &gn, &err), -1,
                 "%s/%d accepted", flag ? flag : "-", shards);
    cr_expect(strstr(err.msg, words), "%s/%d: '%s' does not say '%s'", flag ? flag : "-", shards,
              err.msg, words);
}

Test(shard, resolve_from_flags_and_env)
{
    want_shard(NULL, 0, 0, 0); /* not sharded */
    want_shard("0/1", 0, 0, 1);
    want_shard("3/4", 0, 3, 4);
    want_shard("3/4", 4, 3, 4);
    want_refusal("4/4", 0, "below N");
    want_refusal("1/0", 0, "not K/N");
    want_refusal("-1/4", 0, "not K/N");
    want_refusal("x", 0, "not K/N");
    want_refusal("1/4x", 0, "not K/N");
    want_refusal("1/4", 3, "disagree");
    want_refusal("auto", 0, "neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX");
    want_refusal(NULL, 4, "no shard number in the environment");
    /* a Slurm array numbered from 4: --shard auto counts from its first task */
    setenv("SLURM_ARRAY_TASK_ID", "5", 1);
    setenv("SLURM_ARRAY_TASK_MIN", "4", 1);
    setenv("SLURM_ARRAY_TASK_COUNT", "3", 1);
    want_shard("auto", 0, 1, 3);
    /* with a step: --array=0-6:2 is shards 0..3 */
    setenv("SLURM_ARRAY_TASK_ID", "4", 1);
    setenv("SLURM_ARRAY_TASK_MIN", "0", 1);
    setenv("SLURM_ARRAY_TASK_STEP", "2", 1);
    setenv("SLURM_ARRAY_TASK_COUNT", "4", 1);
    want_shard("auto", 0, 2, 4);
    setenv("SLURM_ARRAY_TASK_ID", "3", 1);
    want_refusal("auto", 0, "not in the array");
    unsetenv("SLURM_ARRAY_TASK_STEP");
    /* --shards N takes the array index as it is: a resubmitted --array=2 of an
     * array of 4 (MIN 2, COUNT 1) is still shard 2/4 */
    setenv("SLURM_ARRAY_TASK_ID", "2", 1);
    setenv("SLURM_ARRAY_TASK_MIN", "2", 1);
    setenv("SLURM_ARRAY_TASK_COUNT", "1", 1);
    want_shard(NULL, 4, 2, 4);
    want_shard("auto", 4, 2, 4);
    want_shard("auto", 0, 0, 1); /* what auto alone makes of it: hence --shards in scripts */
    setenv("SLURM_ARRAY_TASK_ID", "4", 1);
    want_refusal(NULL, 4, "not below --shards 4");
    setenv("SLURM_ARRAY_TASK_ID", "two", 1);
    want_refusal(NULL, 4, "SLURM_ARRAY_TASK_ID: 'two' is not a shard number");
    unsetenv("SLURM_ARRAY_TASK_ID");
    unsetenv("SLURM_ARRAY_TASK_MIN");
    unsetenv("SLURM_ARRAY_TASK_COUNT");
    /* a Kubernetes Indexed Job */
    setenv("JOB_COMPLETION_INDEX", "3", 1);
    want_shard(NULL, 4, 3, 4);
    want_shard("auto", 4, 3, 4);
    want_refusal("auto", 0, "needs --shards N");
    want_refusal(NULL, 3, "not below --shards 3");
}

Test(shard, cli_refuses_a_bad_shard_before_running)
{
    char *d = dir_for("cli");
    int code = 0;
    char *out = t_host(NULL, "echo '{\"id\":1,\"problem_statement\":\"x\"}' > %s/t.jsonl", d);
    free(out);
    out = t_lis(&code, LIS_PLAIN "--tasks %s/t.jsonl --shard 4/4 --output-dir %s/out",
                "http://127.0.0.1:9/v1", d, d);
    cr_expect_eq(code, 2, "exit %d: %s", code, out);
    cr_expect(strstr(out, "shard 4/4: K must be below N"), "%s", out);
    free(out);
    out = t_lis(&code, "batch merge %s/m", d);
    cr_expect_eq(code, 2, "merge without shards: exit %d: %s", code, out);
    cr_expect(strstr(out, "usage: lis batch merge OUT SHARD_DIR"), "%s", out);
    free(out);
}

/* ---- merge == one run ------------------------------------------------- */

/* 10 rows, a mix of outcomes, through real sandboxes: the 4 shards merged
 * give the same ids, scores, reasons, summary and files as one run. */
Test(shard, four_shards_merged_equal_one_run, .timeout = 400)
{
    char *d = dir_for("equal");
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    FILE *tf = fopen(tasks, "w");
    cr_assert(tf);
    char script[16384];
    size_t o = (size_t)snprintf(script, sizeof script, "{\"rows\":{");
    for (int i = 0; i < 10; i++) {
        const char *ans = i % 3 == 1 ? "wrong" : "ok";
        fprintf(tf,
                "{\"id\":\"r%d\",\"problem_statement\":\"MARK%02d: do it\",\"ground_truth\":"
                "\"ok\"}\n",
                i, i);
        if (i == 7) /* the LLM fails for good: an llm_error row */
            o += (size_t)snprintf(script + o, sizeof script - o, "%s\"MARK%02d\":[{\"fail\":100}]",
                                  i ? "," : "", i);
        else if (i == 8) /* never submits: max_steps */
            o += (size_t)snprintf(script + o, sizeof script - o,
                                  "%s\"MARK%02d\":[{\"calls\":"
                                  "[[\"execute_bash\",{\"command\":\"true\"}]]},{\"calls\":"
                                  "[[\"execute_bash\",{\"command\":\"true\"}]]}]",
                                  i ? "," : "", i);
        else
            o += (size_t)snprintf(script + o, sizeof script - o,
                                  "%s\"MARK%02d\":[{\"calls\":"
                                  "[[\"execute_bash\",{\"command\":\"echo %s > "
                                  "/testbed/output/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]",
                                  i ? "," : "", i, ans);
    }
    snprintf(script + o, sizeof script - o, "}}");
    fclose(tf);
    t_fake f;
    t_fake_start(&f, script);
    int code = 0;
    char *out = t_lis(&code,
                      LIS_BATCH "--tasks %s --scorer builtin:match --concurrency 4 "
                                "--max-steps 2 --quiet --output-dir %s/one",
                      f.url, t_busybox(), tasks, d);
    cr_assert_eq(code, 0, "the unsharded run: %s", out);
    free(out);
    for (int k = 0; k < 4; k++) {
        out = t_lis(&code,
                    LIS_BATCH "--tasks %s --scorer builtin:match --concurrency 3 "
                              "--max-steps 2 --quiet --shard %d/4 --output-dir %s/sh",
                    f.url, t_busybox(), tasks, k, d);
        cr_assert_eq(code, 0, "shard %d/4: %s", k, out);
        free(out);
        /* shard k holds exactly the rows i % 4 == k */
        char sdir[700];
        snprintf(sdir, sizeof sdir, "%s/sh/shard-%d-of-4", d, k);
        cJSON *rows = t_results_rows(sdir);
        int want = k < 2 ? 3 : 2;
        cr_expect_eq(cJSON_GetArraySize(rows), want, "shard %d: %d rows", k,
                     cJSON_GetArraySize(rows));
        const cJSON *r;
        cJSON_ArrayForEach(r, rows)
        {
            int id = atoi(cJSON_GetStringValue(cJSON_GetObjectItem(r, "id")) + 1);
            cr_expect_eq(id % 4, k, "row r%d in shard %d", id, k);
        }
        cJSON_Delete(rows);
        cJSON *cfg = json_file(sdir, "run.json");
        const cJSON *sh = cJSON_GetObjectItem(cfg, "shard");
        cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(sh, "index")), k);
        cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(sh, "count")), 4);
        cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(sh, "rows")), want);
        cJSON_Delete(cfg);
    }
    out = t_lis(&code,
                "batch merge %s/merged %s/sh/shard-3-of-4 %s/sh/shard-1-of-4 "
                "%s/sh/shard-0-of-4 %s/sh/shard-2-of-4",
                d, d, d, d, d);
    cr_assert_eq(code, 0, "merge: %s", out);
    cr_expect(strstr(out, "mean score"), "no summary: %s", out);
    free(out);
    char one[700], merged[700];
    char *ls = t_host(NULL, "ls -d %s/one/*/ | head -1 | tr -d '\\n'", d);
    snprintf(one, sizeof one, "%s", ls);
    free(ls);
    snprintf(merged, sizeof merged, "%s/merged", d);
    /* the rows: the same ids with the same scores and reasons */
    char *a = outcomes(one), *b = outcomes(merged);
    cr_expect_str_eq(b, a, "merged:\n%s\none run:\n%s", b, a);
    cr_expect(strstr(a, "r7@0 0 llm_error") && strstr(a, "r8@0 0 max_steps") &&
                  strstr(a, "r0@0 1 submitted") && strstr(a, "r1@0 0 submitted"),
              "%s", a);
    free(a);
    free(b);
    /* the summary */
    cJSON *ra = json_file(one, "results.json"), *rb = json_file(merged, "results.json");
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(ra, "config"), "settings");
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(rb, "config"), "settings");
    const char *keys[] = {"task", "total",    "mean_score",    "num_errors",        "by_reason",
                          "ids",  "attempts", "prompt_tokens", "completion_tokens", "config"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_expect(cJSON_Compare(cJSON_GetObjectItem(ra, keys[i]), cJSON_GetObjectItem(rb, keys[i]),
                                1),
                  "results.json: %s differs", keys[i]);
    cr_expect_float_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(rb, "mean_score")), 6.0 / 10, 1e-9);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(rb, "status")), "complete");
    cJSON_Delete(ra);
    cJSON_Delete(rb);
    /* run.json is the unsharded run's */
    cJSON *ca = json_file(one, "run.json"), *cb = json_file(merged, "run.json");
    /* what a run is; how it ran (settings) and how it stands (status) are its own */
    for (cJSON *e = ca->child, *next; e; e = next) {
        next = e->next;
        if (!strcmp(e->string, "settings") || !strncmp(e->string, "status", 6) ||
            !strncmp(e->string, "rows_", 5) || !strcmp(e->string, "finish_command") ||
            !strcmp(e->string, "lis") || !strcmp(e->string, "pid")) {
            char k[64];
            snprintf(k, sizeof k, "%s", e->string);
            cJSON_DeleteItemFromObject(cb, k);
            cJSON_DeleteItemFromObject(ca, k);
        }
    }
    char *ta = cJSON_PrintUnformatted(ca), *tb = cJSON_PrintUnformatted(cb);
    cr_expect(cJSON_Compare(ca, cb, 1), "run.json differs from the unsharded run's:\n%s\n%s", ta,
              tb);
    free(ta);
    free(tb);
    cJSON_Delete(ca);
    cJSON_Delete(cb);
    /* the files: the same names in logs/ and trajectories/, the same trajectory.json keys and
     * rewards */
    char *fa = t_host(NULL, "cd %s && ls logs trajectories", one);
    char *fb = t_host(NULL, "cd %s && ls logs trajectories", merged);
    cr_expect_str_eq(fb, fa);
    cr_expect(strstr(fa, "r9.txt") && strstr(fa, "r9.json"), "%s", fa);
    free(fa);
    free(fb);
    const char *py =
        "python3 -c \"import json,sys;d=json.load(open(sys.argv[1]+'/trajectory.json'));"
        "print(sorted((k,v['reward'],v['agent_answer'],len(v['trajectory'])) for k,v in "
        "d.items()))\" %s";
    fa = t_host(NULL, py, one);
    fb = t_host(NULL, py, merged);
    cr_expect_str_eq(fb, fa);
    free(fa);
    free(fb);
    /* the merge is a finished run: lis batch report works on it, --resume has nothing to do */
    out = t_lis(&code, "batch report %s", merged);
    cr_expect_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, LIS_BATCH "--tasks %s --scorer builtin:match --max-steps 2 --resume %s",
                f.url, t_busybox(), tasks, merged);
    cr_expect_eq(code, 0, "%s", out);
    cr_expect(strstr(out, "(10 done before)"), "%s", out);
    free(out);
    t_fake_stop(&f);
}

/* ---- what merge refuses ------------------------------------------------ */

static void merge_refused(const char *d, const char *dirs, const char *words)
{
    int code = 0;
    char *out = t_lis(&code, "batch merge %s/m %s", d, dirs);
    cr_expect_neq(code, 0, "merge of %s: exit 0: %s", dirs, out);
    cr_expect(strstr(out, words), "merge of %s: '%s' does not say '%s'", dirs, out, words);
    char m[700];
    snprintf(m, sizeof m, "%s/m", d);
    cr_expect_neq(access(m, F_OK), 0, "a refused merge created %s", m);
    free(out);
}

Test(shard, merge_refusals_then_resume_completes, .timeout = 200)
{
    char *d = dir_for("refuse");
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    FILE *tf = fopen(tasks, "w");
    cr_assert(tf);
    for (int i = 0; i < 8; i++)
        fprintf(tf, "{\"id\":\"r%d\",\"problem_statement\":\"row %d\",\"ground_truth\":\"ok\"}\n",
                i, i);
    fclose(tf);
    t_fake f;
    t_fake_start(&f, "{\"rows\":{},\"default\":[{\"content\":\"ok\"}]}");
    int code = 0;
    char *out;
    for (int k = 0; k < 4; k++) {
        /* shard 2 first meets an endpoint that is not there: it stops with no row */
        const char *url = k == 2 ? "http://127.0.0.1:9/v1" : f.url;
        out = t_lis(&code,
                    LIS_PLAIN "--tasks %s --scorer builtin:match --shard %d/4 "
                              "--output-dir %s/sh",
                    url, tasks, k, d);
        cr_assert_eq(code != 0, k == 2, "shard %d: exit %d: %s", k, code, out);
        free(out);
    }
    char all[4096], three[4096], twice[4096];
    snprintf(all, sizeof all,
             "%s/sh/shard-0-of-4 %s/sh/shard-1-of-4 %s/sh/shard-2-of-4 "
             "%s/sh/shard-3-of-4",
             d, d, d, d);
    snprintf(three, sizeof three, "%s/sh/shard-0-of-4 %s/sh/shard-2-of-4", d, d);
    snprintf(twice, sizeof twice, "%s %s/sh/shard-1-of-4", all, d);
    merge_refused(d, three, "shards 1/4, 3/4 missing");
    merge_refused(d, twice, "shard 1/4 is given twice");
    char want[1024];
    snprintf(want, sizeof want,
             "shard 2/4 (%s/sh/shard-2-of-4) is incomplete: 2 of 2 episodes "
             "have no row; finish it with ",
             d);
    merge_refused(d, all, want);
    /* the hint is the command run.json holds: the lis that ran, the shard's directory */
    char *hint = t_lis(&code, "batch merge %s/m %s", d, all);
    const char *cmd = strstr(hint, "finish it with ");
    cr_assert(cmd, "%s", hint);
    char wantcmd[1024];
    snprintf(wantcmd, sizeof wantcmd, " batch --resume %s/sh/shard-2-of-4, then merge again", d);
    cr_expect(strstr(cmd, wantcmd), "%s", hint);
    free(hint);
    /* a resume of another shard is refused */
    out = t_lis(&code,
                LIS_PLAIN "--tasks %s --scorer builtin:match --shard 1/4 --resume "
                          "%s/sh/shard-2-of-4",
                f.url, tasks, d);
    cr_expect_neq(code, 0, "%s", out);
    cr_expect(strstr(out, "shard.index differs (run.json: 2, this run: 1)"), "%s", out);
    free(out);
    /* the resume alone, with the endpoint that works (--llm-base-url may change): the
     * shard and every other flag come from its run.json */
    out = t_lis(&code, "batch --resume %s/sh/shard-2-of-4 --llm-base-url %s", d, f.url);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    /* a shard still running (its writer holds the lock) */
    char p[700];
    snprintf(p, sizeof p, "%s/sh/shard-3-of-4/results.jsonl", d);
    int lfd = open(p, O_RDONLY);
    cr_assert(lfd >= 0 && flock(lfd, LOCK_EX) == 0);
    merge_refused(d, all, "shard 3/4");
    merge_refused(d, all, "is still running");
    close(lfd);
    /* a shard of another configuration */
    out = t_lis(&code,
                LIS_PLAIN "--tasks %s --scorer builtin:match --temperature 0.5 --shard "
                          "1/4 --output-dir %s/hot",
                f.url, tasks, d);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    char mixed[4096];
    snprintf(mixed, sizeof mixed,
             "%s/sh/shard-0-of-4 %s/hot/shard-1-of-4 %s/sh/shard-2-of-4 "
             "%s/sh/shard-3-of-4",
             d, d, d, d);
    merge_refused(d, mixed, "are not shards of one run: temperature differs (1, 0.5)");
    /* a run that is not a shard */
    out = t_lis(&code, LIS_PLAIN "--tasks %s --scorer builtin:match --output-dir %s/plain", f.url,
                tasks, d);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    char notshard[4096];
    char *pl = t_host(NULL, "ls -d %s/plain/*/ | head -1 | tr -d '\\n'", d);
    snprintf(notshard, sizeof notshard, "%s %s", all, pl);
    free(pl);
    merge_refused(d, notshard, "is not a shard");
    snprintf(notshard, sizeof notshard, "%s %s/nowhere", all, d);
    merge_refused(d, notshard, "is not the directory of a lis batch run");
    /* the whole set merges */
    out = t_lis(&code, "batch merge %s/m %s", d, all);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    cJSON *res = json_file(d, "m/results.json");
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(res, "total")), 8);
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(res, "mean_score")), 1);
    cJSON_Delete(res);
    /* ...but not into a directory that holds something */
    out = t_lis(&code, "batch merge %s/m %s", d, all);
    cr_expect_neq(code, 0);
    cr_expect(strstr(out, "exists and is not empty"), "%s", out);
    free(out);
    /* an id in two shards (a shard run on other data): r0 appended to shard 1 */
    out = t_host(&code,
                 "rm -r %s/m && head -1 %s/sh/shard-0-of-4/results.jsonl >> "
                 "%s/sh/shard-1-of-4/results.jsonl",
                 d, d, d);
    free(out);
    merge_refused(d, all, "id \"r0\" attempt 0 is in shard 0/4");
    t_fake_stop(&f);
}

/* --shards N in a Slurm array task: the index comes from SLURM_ARRAY_TASK_ID. */
Test(shard, slurm_array_env_picks_the_rows, .timeout = 100)
{
    char *d = dir_for("env");
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    FILE *tf = fopen(tasks, "w");
    cr_assert(tf);
    for (int i = 0; i < 7; i++)
        fprintf(tf, "{\"id\":\"r%d\",\"problem_statement\":\"row %d\",\"ground_truth\":\"ok\"}\n",
                i, i);
    fclose(tf);
    t_fake f;
    t_fake_start(&f, "{\"rows\":{},\"default\":[{\"content\":\"ok\"}]}");
    setenv("SLURM_ARRAY_TASK_ID", "1", 1);
    setenv("SLURM_ARRAY_TASK_MIN", "0", 1);
    setenv("SLURM_ARRAY_TASK_COUNT", "3", 1);
    int code = 0;
    char *out = t_lis(&code,
                      LIS_PLAIN "--tasks %s --scorer builtin:match --shards 3 "
                                "--output-dir %s/sh",
                      f.url, tasks, d);
    cr_assert_eq(code, 0, "%s", out);
    cr_expect_null(strstr(out, "every array task runs every row"), "warned with --shards: %s", out);
    free(out);
    char sdir[700];
    snprintf(sdir, sizeof sdir, "%s/sh/shard-1-of-3", d);
    char *got = outcomes(sdir);
    cr_expect_str_eq(got, "r1@0 1 submitted\nr4@0 1 submitted\n");
    free(got);
    /* a shard says it is one: partial, the rows of the task it does not hold are the
     * other shards', and lis batch merge is the command that finishes the run */
    char *rj = t_host(NULL, "cat %s/run.json", sdir);
    cJSON *run = cJSON_Parse(rj);
    free(rj);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(run, "status")), "partial");
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(run, "status_reason")), "shard");
    const char *fin = cJSON_GetStringValue(cJSON_GetObjectItem(run, "finish_command"));
    cr_expect(fin && strstr(fin, " batch merge ") && strstr(fin, "/sh/shard-*-of-3"), "%s",
              fin ? fin : "(none)");
    cJSON_Delete(run);
    /* in a Slurm job array without --shard: one line says every task runs every row */
    out = t_lis(&code, LIS_PLAIN "--tasks %s --scorer builtin:match --output-dir %s/all", f.url,
                tasks, d);
    cr_expect_eq(code, 0, "%s", out);
    cr_expect(strstr(out, "lis: warning: this is task 1 of a Slurm job array, and without "
                          "--shard every array task runs every row; give --shard auto"),
              "%s", out);
    free(out);
    /* and from JOB_COMPLETION_INDEX (Kubernetes), --start-id applied first */
    unsetenv("SLURM_ARRAY_TASK_ID");
    setenv("JOB_COMPLETION_INDEX", "0", 1);
    out = t_lis(&code,
                LIS_PLAIN "--tasks %s --scorer builtin:match --shard auto --shards 2 "
                          "--start-id 2 --output-dir %s/k8s",
                f.url, tasks, d);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    snprintf(sdir, sizeof sdir, "%s/k8s/shard-0-of-2", d);
    got = outcomes(sdir);
    cr_expect_str_eq(got, "r2@0 1 submitted\nr4@0 1 submitted\nr6@0 1 submitted\n");
    free(got);
    t_fake_stop(&f);
}

/* --repeat inside shards: every attempt of a row stays in its shard, and merge
 * counts attempts; a torn last line (a kill -9 mid-append) is not a row. */
Test(shard, repeat_and_a_torn_last_line, .timeout = 100)
{
    char *d = dir_for("repeat");
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    FILE *tf = fopen(tasks, "w");
    cr_assert(tf);
    for (int i = 0; i < 5; i++)
        fprintf(tf, "{\"id\":\"r%d\",\"problem_statement\":\"row %d\",\"ground_truth\":\"ok\"}\n",
                i, i);
    fclose(tf);
    t_fake f;
    t_fake_start(&f, "{\"rows\":{},\"default\":[{\"content\":\"ok\"}]}");
    int code = 0;
    char *out;
    for (int k = 0; k < 2; k++) {
        out = t_lis(&code,
                    LIS_PLAIN "--tasks %s --scorer builtin:match --repeat 2 --shard %d/2 "
                              "--output-dir %s/sh",
                    f.url, tasks, k, d);
        cr_assert_eq(code, 0, "%s", out);
        free(out);
    }
    char sdir[700];
    snprintf(sdir, sizeof sdir, "%s/sh/shard-1-of-2", d);
    char *got = outcomes(sdir);
    cr_expect_str_eq(got, "r1@0 1 submitted\nr1@1 1 submitted\nr3@0 1 submitted\n"
                          "r3@1 1 submitted\n");
    free(got);
    out = t_host(NULL, "printf '{\"id\":\"r9\",\"attem' >> %s/results.jsonl", sdir);
    free(out);
    out = t_lis(&code, "batch merge %s/m %s/sh/shard-0-of-2 %s", d, d, sdir);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    cJSON *res = json_file(d, "m/results.json");
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(res, "total")), 10);
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(res, "ids")), 5);
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(res, "attempts")), 2);
    cJSON_Delete(res);
    char m[700];
    snprintf(m, sizeof m, "%s/m", d);
    got = outcomes(m);
    cr_expect(!strstr(got, "r9"), "the torn line became a row: %s", got);
    free(got);
    /* one attempt of shard 0 lost (its line deleted): incomplete, 1 of 6 */
    out = t_host(NULL, "sed -i 1d %s/sh/shard-0-of-2/results.jsonl", d);
    free(out);
    out = t_lis(&code, "batch merge %s/m2 %s/sh/shard-0-of-2 %s", d, d, sdir);
    cr_expect_neq(code, 0);
    cr_expect(strstr(out, "is incomplete: 1 of 6 episodes have no row"), "%s", out);
    free(out);
    t_fake_stop(&f);
}
