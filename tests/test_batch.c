/* test_batch.c - `lis batch` end to end, as the unprivileged test user, in
 * real sandboxes (busybox) against the scripted server (tests/fake_llm.py in
 * conversation mode: each row's replies are chosen by a marker in its
 * problem statement and by its step, whatever order requests come in). */
#include "testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* every test gets a fresh private run and data dir (t_tmpdir) */
static void setup(void) { lis_ctx_free(t_ctx()); }
TestSuite(batch, .init = setup);

static const cJSON *row_by_id(const cJSON *rows, const char *id, int attempt, int *count)
{
    const cJSON *r, *found = NULL;
    int n = 0;
    cJSON_ArrayForEach(r, rows)
    {
        const char *rid = cJSON_GetStringValue(cJSON_GetObjectItem(r, "id"));
        int a = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(r, "attempt"));
        if (rid && !strcmp(rid, id) && a == attempt) {
            found = r;
            n++;
        }
    }
    if (count)
        *count = n;
    return found;
}

static const char *str(const cJSON *row, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(row, k));
    return s ? s : "";
}

static double num(const cJSON *row, const char *k)
{
    return cJSON_GetNumberValue(cJSON_GetObjectItem(row, k));
}

/* A row writing ANSWER to the answer file, then submitting. Rows of --tasks
 * without --prompt-config get the original's general.yaml, whose answer file
 * is /testbed/output/answer.txt (a task folder's is /testbed/answer.txt). */
static void script_answer(FILE *s, const char *marker, const char *answer)
{
    fprintf(s,
            "\"%s\":[{\"calls\":[[\"execute_bash\",{\"command\":\"echo %s > "
            "/testbed/output/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]",
            marker, answer);
}

#define LIS_BATCH "batch --llm-name fake --llm-base-url %s --api-key k --rootfs %s --net none "

/* Polls (60 s at most) until the run under DIR/out has written `want` rows;
 * its directory in rdir ("" if none yet), the rows seen returned. */
static int wait_rows(const char *d, char *rdir, size_t len, int want)
{
    int n = 0;
    for (int t = 0; t < 600 && n < want; t++) {
        usleep(100000);
        if (!rdir[0])
            t_run_dir(d, rdir, len);
        if (rdir[0]) {
            cJSON *r = t_results_rows(rdir);
            n = cJSON_GetArraySize(r);
            cJSON_Delete(r);
        }
    }
    return n;
}

/* 64 rows at concurrency 64: every way an episode can end, each recorded
 * with its reason, in one run that no single row stops. */
Test(batch, mixed_outcomes_64_at_once, .timeout = 240)
{
    char *d = t_fresh_dir("batch", "mixed");
    char script[65536], tasks[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    FILE *tf = fopen(tasks, "w");
    cr_assert(tf);
    size_t len = 0;
    char *buf = NULL;
    FILE *s = open_memstream(&buf, &len);
    fputs("{\"rows\":{", s);
    for (int i = 0; i < 64; i++) {
        char id[32], marker[32], gt[32];
        snprintf(id, sizeof id, "r%02d", i);
        snprintf(marker, sizeof marker, "MARK%02d", i);
        snprintf(gt, sizeof gt, "ans%02d", i);
        const char *input = "";
        if (i)
            fputc(',', s);
        if (i < 40) { /* the right answer */
            script_answer(s, marker, gt);
        } else if (i < 44) { /* a wrong one */
            script_answer(s, marker, "wrong");
        } else if (i < 48) { /* never submits */
            fprintf(s,
                    "\"%s\":[{\"calls\":[[\"execute_bash\",{\"command\":\"true\"}]]},"
                    "{\"calls\":[[\"execute_bash\",{\"command\":\"true\"}]]},"
                    "{\"calls\":[[\"execute_bash\",{\"command\":\"true\"}]]}]",
                    marker);
        } else if (i < 52) { /* outlives --episode-timeout */
            fprintf(s, "\"%s\":[{\"calls\":[[\"execute_bash\",{\"command\":\"sleep 1000\"}]]}]",
                    marker);
        } else if (i < 56) { /* meets the OOM killer, then answers */
            fprintf(s,
                    "\"%s\":[{\"calls\":[[\"execute_bash\",{\"command\":\"for i in 1 2 3 4 5; do "
                    "((head -c 25000000 /dev/zero; sleep 5) | tail > /dev/null) & done; wait\"}]]},{\"calls\":[[\"execute_bash\",{\"command\":"
                    "\"echo %s > /testbed/output/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]",
                    marker, gt);
        } else if (i < 58) { /* two 500s, then fine */
            fprintf(s,
                    "\"%s\":[{\"fail\":2,\"calls\":[[\"execute_bash\",{\"command\":"
                    "\"echo %s > /testbed/output/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]",
                    marker, gt);
        } else if (i < 60) { /* always 500: the row's LLM error */
            fprintf(s, "\"%s\":[{\"fail\":100}]", marker);
        } else if (i < 62) { /* 429 with Retry-After, then fine */
            fprintf(s,
                    "\"%s\":[{\"fail\":2,\"fail_status\":429,\"fail_headers\":"
                    "{\"Retry-After\":\"1\"},\"calls\":[[\"execute_bash\",{\"command\":"
                    "\"echo %s > /testbed/output/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]",
                    marker, gt);
        } else { /* its sandbox cannot be set up: an input file under a file */
            script_answer(s, marker, gt);
            input = ",\"input_files\":{\"a.txt\":\"x\",\"a.txt/b.txt\":\"y\"}";
        }
        fprintf(tf,
                "{\"id\":\"%s\",\"problem_statement\":\"%s: do it\",\"ground_truth\":\"%s\"%s}\n",
                id, marker, gt, input);
    }
    fputs("}}", s);
    fclose(s);
    fclose(tf);
    snprintf(script, sizeof script, "%s", buf);
    free(buf);
    t_fake f;
    t_fake_start(&f, script);
    int code = 0;
    char *out = t_lis(&code,
                      LIS_BATCH "--tasks %s --scorer builtin:match --concurrency 64 "
                                "--max-steps 3 --episode-timeout 30 --memory 64M --disk 32M "
                                "--output-dir %s/out",
                      f.url, t_busybox(), tasks, d);
    cr_assert_eq(code, 0, "lis batch: %s", out);
    char rdir[1024];
    t_run_dir(d, rdir, sizeof rdir);
    cJSON *rows = t_results_rows(rdir);
    cr_assert_eq(cJSON_GetArraySize(rows), 64, "rows: %d\n%s", cJSON_GetArraySize(rows), out);
    for (int i = 0; i < 64; i++) {
        char id[32];
        snprintf(id, sizeof id, "r%02d", i);
        int n = 0;
        const cJSON *r = row_by_id(rows, id, 0, &n);
        cr_assert_eq(n, 1, "%s has %d rows", id, n);
        const char *reason = str(r, "reason");
        double score = num(r, "score");
        const char *want = i < 44 || (i >= 52 && i < 58) || (i >= 60 && i < 62) ? "submitted"
                           : i < 48                                             ? "max_steps"
                           : i < 52                                             ? "deadline"
                           : i < 60                                             ? "llm_error"
                                                                                : "sandbox_error";
        cr_expect_str_eq(reason, want, "%s: reason %s (%s)", id, reason, str(r, "error"));
        int right = i < 40 || (i >= 52 && i < 58) || (i >= 60 && i < 62);
        cr_expect_eq(score, right ? 1.0 : 0.0, "%s: score %g (%s)", id, score, reason);
        if (i >= 52 && i < 56)
            cr_expect_geq(num(r, "oom_kills"), 1, "%s: no OOM kill recorded", id);
        if (i >= 56 && i < 58)
            cr_expect_gt(num(r, "llm_seconds"), 0);
    }
    /* the original's files at the end */
    char *res = t_host(NULL, "cat %s/results.json", rdir);
    cJSON *rj = cJSON_Parse(res);
    cr_assert(rj, "results.json: %s", res);
    cr_expect_eq(num(rj, "total"), 64);
    cr_expect_float_eq(num(rj, "mean_score"), 48.0 / 64, 1e-9);
    char *traj = t_host(NULL,
                        "python3 -c \"import json;d=json.load(open('%s/trajectory.json'));"
                        "print(len(d), float(d['r00']['reward']), d['r00']['agent_answer'])\"",
                        rdir);
    cr_expect_str_eq(traj, "64 1.0 ans00\n");
    cr_expect(strstr(out, "mean score"), "no summary: %s", out);
    t_fake_stop(&f);
    cJSON_Delete(rj);
    cJSON_Delete(rows);
    free(res);
    free(traj);
    free(out);
}

/* kill -9 in the middle, then --resume: every id exactly once. */
Test(batch, kill9_then_resume_each_id_once, .timeout = 240)
{
    char *d = t_fresh_dir("batch", "resume");
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.json", d);
    FILE *tf = fopen(tasks, "w");
    fputs("[", tf);
    for (int i = 0; i < 24; i++)
        fprintf(tf, "%s{\"id\":%d,\"problem_statement\":\"row %d\",\"ground_truth\":\"ok\"}",
                i ? "," : "", i, i);
    fputs("]", tf);
    fclose(tf);
    t_fake f;
    t_fake_start(
        &f,
        "{\"rows\":{},\"default\":[{\"calls\":[[\"execute_bash\",{\"command\":"
        "\"sleep 1; echo ok > /testbed/output/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]}");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data exec %s batch "
             "--llm-name fake --llm-base-url %s --api-key k --rootfs %s --net none --tasks %s "
             "--scorer builtin:match --concurrency 6 --quiet --output-dir %s/out >%s/log 2>&1",
             t_tmpdir(), t_tmpdir(), t_lis_bin(), f.url, t_busybox(), tasks, d, d);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    char rdir[1024] = "";
    int lines = wait_rows(d, rdir, sizeof rdir, 7);
    cr_assert_geq(lines, 7, "no progress before the kill");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cJSON *before = t_results_rows(rdir);
    int nb = cJSON_GetArraySize(before);
    cr_assert_lt(nb, 24, "everything finished before the kill: nothing to resume");
    /* nothing of it survives: its sandboxes died with it */
    int code = 0;
    usleep(300000);
    char *gc = t_lis(&code, "sandbox gc");
    char *ls = t_lis(&code, "sandbox ls --json");
    cJSON *left = cJSON_Parse(ls);
    cr_expect(cJSON_IsArray(left) && cJSON_GetArraySize(left) == 0,
              "sandboxes outlived their kill -9'ed owner: %s", ls);
    cJSON_Delete(left);
    free(gc);
    free(ls);
    char *out = t_lis(&code,
                      LIS_BATCH "--tasks %s --scorer builtin:match --concurrency 6 "
                                "--resume %s",
                      f.url, t_busybox(), tasks, rdir);
    cr_assert_eq(code, 0, "resume: %s", out);
    cr_expect(strstr(out, "done before"), "%s", out);
    cJSON *rows = t_results_rows(rdir);
    cr_assert_eq(cJSON_GetArraySize(rows), 24, "rows after resume: %d (before %d)\n%s",
                 cJSON_GetArraySize(rows), nb, out);
    for (int i = 0; i < 24; i++) {
        char id[16];
        snprintf(id, sizeof id, "%d", i);
        int n = 0;
        const cJSON *r = row_by_id(rows, id, 0, &n);
        cr_expect_eq(n, 1, "id %s: %d rows", id, n);
        cr_expect_eq(num(r, "score"), 1.0, "id %s", id);
    }
    /* the original's number types: mean_score a float, as json.dump writes 1.0 */
    char *rj = t_host(NULL, "cat %s/results.json", rdir);
    cr_expect(strstr(rj, "\"mean_score\": 1.0,"), "%s", rj);
    cr_expect(strstr(rj, "\"status\": \"complete\""), "%s", rj);
    free(rj);
    /* resuming with another model is refused, and changes nothing */
    char *bad = t_lis(&code,
                      "batch --llm-name other --llm-base-url %s --api-key k --rootfs %s "
                      "--net none --tasks %s --scorer builtin:match --resume %s",
                      f.url, t_busybox(), tasks, rdir);
    cr_expect_neq(code, 0, "%s", bad);
    cr_expect(strstr(bad, "llm_name"), "the refusal does not name the difference: %s", bad);
    t_fake_stop(&f);
    cJSON_Delete(before);
    cJSON_Delete(rows);
    free(out);
    free(bad);
}

/* Runs a batch in the background and sends it SIGINT `sigs` times after
 * the first rows are running; returns its exit status and the run dir. */
static int interrupted_run(t_fake *f, const char *d, int sigs, char *rdir, size_t len)
{
    char tasks[600], cmd[4096];
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    FILE *tf = fopen(tasks, "w");
    for (int i = 0; i < 8; i++)
        fprintf(tf, "{\"id\":\"t%d\",\"problem_statement\":\"p\",\"ground_truth\":\"ok\"}\n", i);
    fclose(tf);
    snprintf(cmd, sizeof cmd,
             "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data exec %s batch "
             "--llm-name fake --llm-base-url %s --api-key k --rootfs %s --net none --tasks %s "
             "--scorer builtin:match --concurrency 4 --output-dir %s/out >%s/log 2>&1",
             t_tmpdir(), t_tmpdir(), t_lis_bin(), f->url, t_busybox(), tasks, d, d);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) { /* its own process group, which the Ctrl-C goes to as a terminal's does */
        setsid();
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    /* the four first episodes are in their 3 s command once 4 requests came */
    for (int t = 0; t < 300 && t_fake_count(f) < 4; t++)
        usleep(100000);
    usleep(500000);
    for (int i = 0; i < sigs; i++) {
        kill(-pid, SIGINT); /* the whole group: lis and whatever shares its terminal */
        usleep(200000);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    t_run_dir(d, rdir, len);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Test(batch, ctrl_c_drains_then_second_cancels, .timeout = 120)
{
    t_fake f;
    const char *script =
        "{\"rows\":{},\"default\":[{\"calls\":[[\"execute_bash\",{\"command\":"
        "\"sleep 3; echo ok > /testbed/output/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]}";
    t_fake_start(&f, script);
    char *d = t_fresh_dir("batch", "drain");
    char rdir[1024];
    int code = interrupted_run(&f, d, 1, rdir, sizeof rdir);
    cJSON *rows = t_results_rows(rdir);
    char *log = t_host(NULL, "cat %s/log", d);
    /* the running four finished and were written; nothing new started */
    cr_expect_eq(code, 1, "exit %d: %s", code, log);
    cr_expect_eq(cJSON_GetArraySize(rows), 4, "%d rows: %s", cJSON_GetArraySize(rows), log);
    cr_expect(strstr(log, "--resume"), "%s", log);
    char *res = t_host(NULL, "test -s %s/results.json && echo yes", rdir);
    cr_expect_str_eq(res, "yes\n", "results.json not written on Ctrl-C");
    cJSON_Delete(rows);
    free(log);
    free(res);
    t_fake_stop(&f);

    t_fake_start(&f, script);
    d = t_fresh_dir("batch", "cancel");
    code = interrupted_run(&f, d, 2, rdir, sizeof rdir);
    rows = t_results_rows(rdir);
    log = t_host(NULL, "cat %s/log", d);
    cr_expect_eq(code, 1, "exit %d: %s", code, log);
    cr_expect_eq(cJSON_GetArraySize(rows), 0, "cancelled episodes got rows: %s", log);
    cJSON_Delete(rows);
    free(log);
    t_fake_stop(&f);
}

/* A task folder in the original's layout, its reward.py run unchanged. */
Test(batch, original_task_folder_with_reward_py, .timeout = 120)
{
    char *d = t_fresh_dir("batch", "folder");
    char p[700];
    snprintf(p, sizeof p, "%s/mytask", d);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/mytask/config.yaml", d);
    t_write_file(p, "dataset: json\ndata_files: data.json\nsplit: test\n"
                    "system_prompt: |\n  You work in {working_dir}; files are in {input_dir}.\n"
                    "instance_prompt: |\n  {problem_statement}\n  Write {output_dir}/answer.txt.\n"
                    "input_dir: /testbed/input\n");
    snprintf(p, sizeof p, "%s/mytask/reward.py", d);
    t_write_file(p, "def compute_score(agent_answer, ground_truth, **kwargs):\n"
                    "    print('scoring', kwargs['id'])  # must not break the worker\n"
                    "    bonus = kwargs.get('weight', 1)\n"
                    "    return float(agent_answer.strip() == ground_truth) * bonus\n");
    snprintf(p, sizeof p, "%s/mytask/data.json", d);
    t_write_file(p,
                 "[{\"id\": \"q1\", \"problem_statement\": \"MARKA copy the file\", "
                 "\"ground_truth\": \"hello\", \"weight\": 2, "
                 "\"input_files\": \"{\\\"x.txt\\\": \\\"hello\\\"}\"},"
                 "{\"id\": \"q2\", \"problem_statement\": \"MARKB\", \"ground_truth\": \"no\"}]");
    t_fake f;
    t_fake_start(&f, "{\"rows\":{\"MARKA\":[{\"calls\":[[\"execute_bash\",{\"command\":"
                     "\"cp /testbed/input/x.txt /testbed/answer.txt\"}]]},{\"calls\":"
                     "[[\"submit\",{}]]}],\"MARKB\":[{\"calls\":[[\"execute_bash\",{\"command\":"
                     "\"echo yes > /testbed/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]}}");
    int code = 0;
    char *out = t_lis(&code, LIS_BATCH "--task %s/mytask --concurrency 2 --output-dir %s/out",
                      f.url, t_busybox(), d, d);
    cr_assert_eq(code, 0, "%s", out);
    char rdir[1024];
    t_run_dir(d, rdir, sizeof rdir);
    cr_expect(strstr(rdir, "_mytask"), "run dir %s", rdir);
    cJSON *rows = t_results_rows(rdir);
    const cJSON *q1 = row_by_id(rows, "q1", 0, NULL), *q2 = row_by_id(rows, "q2", 0, NULL);
    cr_assert(q1 && q2, "%s", out);
    cr_expect_eq(num(q1, "score"), 2.0, "reward.py with kwargs: %g (%s)", num(q1, "score"),
                 str(q1, "error"));
    cr_expect_eq(num(q2, "score"), 0.0);
    cr_expect(strstr(str(q1, "scorer"), "reward.py"), "scorer %s", str(q1, "scorer"));
    /* the prompts as the task wrote them, directories filled in */
    cJSON *req = t_fake_request(&f, 0);
    char *txt = cJSON_PrintUnformatted(req);
    cr_expect(strstr(txt, "files are in /testbed/input"), "%s", txt);
    char *log = t_host(NULL, "cat %s/logs/q1.txt", rdir);
    cr_expect(strstr(log, "Score: 2.0000"), "%s", log);
    free(log);
    free(txt);
    cJSON_Delete(req);
    cJSON_Delete(rows);
    free(out);
    t_fake_stop(&f);
}

Test(batch, stops_at_once_on_401_and_unreachable, .timeout = 60)
{
    char *d = t_fresh_dir("batch", "fatal");
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/t.jsonl", d);
    t_write_file(tasks, "{\"id\":1,\"problem_statement\":\"a\",\"ground_truth\":\"x\"}\n"
                        "{\"id\":2,\"problem_statement\":\"b\",\"ground_truth\":\"x\"}\n"
                        "{\"id\":3,\"problem_statement\":\"c\",\"ground_truth\":\"x\"}\n");
    t_fake f;
    t_fake_start(&f, "{\"rows\":{},\"default\":[{\"fail\":1000,\"fail_status\":401}]}");
    int code = 0;
    char *out = t_lis(&code,
                      LIS_BATCH "--tasks %s --scorer builtin:match --concurrency 1 "
                                "--output-dir %s/out",
                      f.url, t_busybox(), tasks, d);
    cr_expect_neq(code, 0, "%s", out);
    cr_expect(strstr(out, "401"), "%s", out);
    cr_expect_eq(t_fake_count(&f), 1, "kept asking after a 401: %d requests", t_fake_count(&f));
    t_fake_stop(&f);
    free(out);
    out = t_lis(&code, LIS_BATCH "--tasks %s --scorer builtin:match --output-dir %s/out",
                "http://127.0.0.1:9/v1", t_busybox(), tasks, d);
    cr_expect_neq(code, 0, "%s", out);
    cr_expect(strstr(out, "cannot reach the LLM"), "%s", out);
    free(out);
    /* bad input: one line, non-zero */
    out = t_lis(&code, "batch --llm-name x --llm-base-url http://h/v1 --api-key k --rootfs %s",
                t_busybox());
    cr_expect_neq(code, 0);
    cr_expect(strstr(out, "--task DIR"), "%s", out);
    free(out);
    out = t_lis(&code,
                "batch --tasks /nonexistent.jsonl --llm-name x --llm-base-url http://h/v1 "
                "--api-key k --rootfs %s --output-dir %s/out",
                t_busybox(), d);
    cr_expect_neq(code, 0);
    cr_expect(strstr(out, "nonexistent"), "%s", out);
    free(out);
}

Test(batch, repeat_and_mode_llm, .timeout = 120)
{
    char *d = t_fresh_dir("batch", "repeat");
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/t.jsonl", d);
    t_write_file(tasks, "{\"id\":\"a\",\"problem_statement\":\"MARKA\",\"ground_truth\":\"42\"}\n"
                        "{\"id\":\"b\",\"problem_statement\":\"MARKB\",\"ground_truth\":\"7\"}\n");
    t_fake f;
    t_fake_start(&f,
                 "{\"rows\":{\"MARKA\":[{\"content\":\"42\",\"calls\":[[\"execute_bash\","
                 "{\"command\":\"echo 42 > /testbed/output/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}],"
                 "\"MARKB\":[{\"content\":\"8\",\"calls\":[[\"execute_bash\",{\"command\":"
                 "\"echo 8 > /testbed/output/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]}}");
    int code = 0;
    char *out = t_lis(&code,
                      LIS_BATCH "--tasks %s --scorer builtin:match --repeat 3 "
                                "--concurrency 2 --output-dir %s/out",
                      f.url, t_busybox(), tasks, d);
    cr_assert_eq(code, 0, "%s", out);
    /* 6 episodes, 2 at a time: the later ones start in sandboxes made ahead */
    int used = 0, made = 0;
    const char *wp = strstr(out, "warm pool: ");
    cr_expect(wp && sscanf(wp, "warm pool: %d of the %d", &used, &made) == 2 && used > 0,
              "no sandbox of the warm pool was used: %s", out);
    char rdir[1024];
    t_run_dir(d, rdir, sizeof rdir);
    cJSON *rows = t_results_rows(rdir);
    cr_expect_eq(cJSON_GetArraySize(rows), 6);
    for (int k = 0; k < 3; k++) {
        int n = 0;
        const cJSON *a = row_by_id(rows, "a", k, &n);
        cr_expect_eq(n, 1);
        cr_expect_eq(num(a, "score"), 1.0);
        cr_expect_eq(num(row_by_id(rows, "b", k, NULL), "score"), 0.0);
    }
    cJSON_Delete(rows);
    free(out);
    /* the plain-LLM baseline: one call, its text is the answer */
    char *d2 = t_fresh_dir("batch", "llmmode");
    out = t_lis(&code,
                "batch --llm-name fake --llm-base-url %s --api-key k --mode llm --tasks %s "
                "--scorer builtin:match --output-dir %s/out",
                f.url, tasks, d2);
    cr_assert_eq(code, 0, "%s", out);
    t_run_dir(d2, rdir, sizeof rdir);
    rows = t_results_rows(rdir);
    cr_expect_eq(num(row_by_id(rows, "a", 0, NULL), "score"), 1.0, "%s", out);
    cr_expect_eq(num(row_by_id(rows, "b", 0, NULL), "score"), 0.0);
    cr_expect_str_eq(str(row_by_id(rows, "b", 0, NULL), "answer"), "8");
    cJSON_Delete(rows);
    free(out);
    t_fake_stop(&f);
}

/* --repeat 4 --fork-from-setup: a row's set-up (its input file) is made once
 * and its 4 attempts run on forks of it: the input file has the same
 * nanosecond mtime in each (without the flag each attempt writes its own),
 * the attempts do not see each other's writes, and no snapshot is left. */
static void fork_run(const char *name, const char *flag, cJSON **rows_out, char **out_text)
{
    char *d = t_fresh_dir("batch", name);
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/t.jsonl", d);
    t_write_file(tasks, "{\"id\":\"a\",\"problem_statement\":\"FORKROW\",\"ground_truth\":\"x\","
                        "\"input_files\":{\"in.txt\":\"row a\"}}\n"
                        "{\"id\":\"b\",\"problem_statement\":\"FORKROW\",\"ground_truth\":\"x\","
                        "\"input_files\":{\"in.txt\":\"row b\"}}\n");
    t_fake f;
    t_fake_start(&f, "{\"rows\":{\"FORKROW\":[{\"calls\":[[\"execute_bash\",{\"command\":"
                     "\"echo x >> /testbed/marker; echo $(wc -l < /testbed/marker) "
                     "$(cat /testbed/input/in.txt) $(stat -c %y /testbed/input/in.txt) > "
                     "/testbed/output/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]}}");
    int code = 0;
    char *out = t_lis(&code,
                      LIS_BATCH "--tasks %s --scorer builtin:match --repeat 4 %s "
                                "--concurrency 3 --output-dir %s/out",
                      f.url, t_busybox(), tasks, flag, d);
    cr_assert_eq(code, 0, "%s", out);
    char rdir[1024];
    t_run_dir(d, rdir, sizeof rdir);
    *rows_out = t_results_rows(rdir);
    *out_text = out;
    t_fake_stop(&f);
}

Test(batch, repeat_fork_from_setup, .timeout = 180)
{
    cJSON *rows;
    char *out;
    fork_run("fork", "--fork-from-setup", &rows, &out);
    cr_assert_eq(cJSON_GetArraySize(rows), 8, "%s", out);
    const char *ids[] = {"a", "b"};
    char first[2][200];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) {
            const cJSON *r = row_by_id(rows, ids[i], k, NULL);
            cr_assert_not_null(r, "%s/%d: %s", ids[i], k, out);
            const char *ans = str(r, "answer");
            char want[16];
            snprintf(want, sizeof want, "1 row %s ", ids[i]);
            /* its own input file, and only its own write to /testbed/marker */
            cr_expect_eq(strncmp(ans, want, strlen(want)), 0, "%s/%d: '%s'", ids[i], k, ans);
            if (k == 0)
                snprintf(first[i], sizeof first[i], "%s", ans);
            else /* the same file, made once: the same mtime to the nanosecond */
                cr_expect_str_eq(ans, first[i], "%s/%d was set up on its own", ids[i], k);
        }
    cr_expect_str_neq(first[0], first[1]);
    cJSON_Delete(rows);
    free(out);
    int code;
    out = t_lis(&code, "rootfs ls");
    cr_expect_null(strstr(out, "snapshot"), "a set-up snapshot was left: %s", out);
    free(out);
    /* without the flag, each attempt writes its own input file */
    fork_run("nofork", "", &rows, &out);
    const char *a0 = str(row_by_id(rows, "a", 0, NULL), "answer");
    int differ = 0;
    for (int k = 1; k < 4; k++)
        differ |= strcmp(a0, str(row_by_id(rows, "a", k, NULL), "answer")) != 0;
    cr_expect(differ, "the mtime check cannot tell a fork from a fresh set-up: %s", a0);
    cJSON_Delete(rows);
    free(out);
}

/* ---- issue 20: numbers a researcher can trust ---------------------------- */

/* The original's demo folder is its template for custom tasks: a copy named
 * demo whose reward.py was edited (to give half marks) is scored by that file,
 * and run.json, results.json, every row and the report say which file it was. */
Test(batch, edited_reward_py_in_a_folder_named_demo_is_the_scorer, .timeout = 120)
{
    char *d = t_fresh_dir("batch", "demo");
    char p[700];
    snprintf(p, sizeof p, "%s/demo", d);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/demo/config.yaml", d);
    t_write_file(p, "dataset: json\ndata_files: data.json\n");
    snprintf(p, sizeof p, "%s/demo/data.json", d);
    t_write_file(p,
                 "[{\"id\": \"demo_001\", \"problem_statement\": \"MARKA\", \"ground_truth\": \"5\"},"
                 "{\"id\": \"demo_002\", \"problem_statement\": \"MARKA\", \"ground_truth\": "
                 "\"5\"}]");
    snprintf(p, sizeof p, "%s/demo/reward.py", d);
    t_write_file(p, "def compute_score(agent_answer, ground_truth, **kwargs):\n"
                    "    return 0.5  # edited: half marks for anything\n");
    char *sha = t_host(NULL, "sha256sum %s | cut -c1-64 | tr -d '\\n'", p);
    t_fake f;
    t_fake_start(&f, "{\"rows\":{\"MARKA\":[{\"calls\":[[\"execute_bash\",{\"command\":"
                     "\"echo 5 > /testbed/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]}}");
    int code = 0;
    char *out = t_lis(&code, LIS_BATCH "--task %s/demo --concurrency 2 --output-dir %s/out", f.url,
                      t_busybox(), d, d);
    t_fake_stop(&f);
    cr_assert_eq(code, 0, "%s", out);
    char rdir[1024];
    t_run_dir(d, rdir, sizeof rdir);
    cJSON *rows = t_results_rows(rdir), *r;
    cr_assert_eq(cJSON_GetArraySize(rows), 2, "%s", out);
    cJSON_ArrayForEach(r, rows)
    {
        cr_expect_eq(num(r, "score"), 0.5, "%s: score %g", str(r, "id"), num(r, "score"));
        cr_expect_str_eq(str(r, "scorer"), "python:reward.py");
        cr_expect_str_eq(str(r, "scorer_sha256"), sha);
    }
    char *t = t_host(NULL, "cat %s/run.json", rdir);
    cJSON *run = cJSON_Parse(t);
    free(t);
    cr_expect_str_eq(str(run, "scorer"), "python:reward.py");
    cr_expect_str_eq(str(run, "scorer_sha256"), sha);
    t = t_host(NULL, "cat %s/results.json", rdir);
    cJSON *res = cJSON_Parse(t);
    cr_expect(strstr(t, "\"mean_score\": 0.5,"), "%s", t);
    free(t);
    cr_expect_str_eq(str(res, "scorer"), "python:reward.py");
    cr_expect_str_eq(str(res, "scorer_sha256"), sha);
    cr_expect_str_eq(str(res, "status"), "complete");
    /* the summary and the report */
    char want[200];
    snprintf(want, sizeof want, "python:reward.py (sha256 %s)", sha);
    cr_expect(strstr(out, want), "the summary does not name the scorer: %s", out);
    t = t_host(NULL, "grep -c '\"scorer_sha256\":\"%s\"' %s/report.html", sha, rdir);
    cr_expect_neq(atoi(t), 0, "the report does not carry the scorer's sha256");
    free(t);
    cJSON_Delete(run);
    cJSON_Delete(res);
    cJSON_Delete(rows);
    free(sha);
    free(out);
}

/* A run interrupted after some of its 40 rows, then `lis batch --resume DIR`
 * with no other flag: the task, the model, the endpoint and --concurrency 8
 * come from run.json (no API key is kept there: the server is local). */
Test(batch, resume_alone_finishes_40_rows_at_the_stored_concurrency, .timeout = 300)
{
    char *d = t_fresh_dir("batch", "alone");
    char tasks[600], cmd[4096];
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    FILE *tf = fopen(tasks, "w");
    for (int i = 0; i < 40; i++)
        fprintf(tf, "{\"id\":\"a%02d\",\"problem_statement\":\"p\",\"ground_truth\":\"ok\"}\n", i);
    fclose(tf);
    t_fake f;
    t_fake_start(&f, "{\"latency\":0.3,\"rows\":{},\"default\":[{\"calls\":[[\"execute_bash\","
                     "{\"command\":\"sleep 1; echo ok > /testbed/output/answer.txt\"}]]},"
                     "{\"calls\":[[\"submit\",{}]]}]}");
    snprintf(cmd, sizeof cmd,
             "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data exec %s batch --llm-name fake "
             "--llm-base-url %s --rootfs %s --net none --tasks %s --scorer builtin:match "
             "--concurrency 8 --output-dir %s/out >%s/log 2>&1",
             t_tmpdir(), t_tmpdir(), t_lis_bin(), f.url, t_busybox(), tasks, d, d);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        setsid();
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    char rdir[1024] = "";
    wait_rows(d, rdir, sizeof rdir, 8); /* asserted below, as nb */
    kill(-pid, SIGINT);
    usleep(200000);
    kill(-pid, SIGINT); /* twice: cancel what runs */
    waitpid(pid, NULL, 0);
    /* the cancelled run's last requests stay in the server's hands for their
     * latency (0.3 s): let them end, or the resume's "at once" counts them */
    sleep(1);
    cJSON *before = t_results_rows(rdir);
    int nb = cJSON_GetArraySize(before);
    cJSON_Delete(before);
    cr_assert(nb >= 8 && nb < 40, "%d rows before the resume", nb);
    int asked = t_fake_count(&f);
    double t0 = lis_now();
    int code = 0;
    char *out = t_host(&code,
                       "env -u OPENAI_API_KEY -u LLM_API_KEY XDG_RUNTIME_DIR=%s/run "
                       "XDG_DATA_HOME=%s/data %s batch --resume %s 2>&1",
                       t_tmpdir(), t_tmpdir(), t_lis_bin(), rdir);
    double secs = lis_now() - t0;
    cr_assert_eq(code, 0, "%s", out);
    cr_expect(strstr(out, "at most 8 at once"), "not at the run's concurrency: %s", out);
    cJSON *rows = t_results_rows(rdir);
    cr_expect_eq(cJSON_GetArraySize(rows), 40, "%s", out);
    for (int i = 0; i < 40; i++) {
        char id[8];
        snprintf(id, sizeof id, "a%02d", i);
        int c = 0;
        row_by_id(rows, id, 0, &c);
        cr_expect_eq(c, 1, "%s: %d rows", id, c);
    }
    /* the server saw the resume's requests overlap, as with 8 at once (not 1) */
    int most = 0;
    for (int i = asked; i < t_fake_count(&f); i++) {
        cJSON *q = t_fake_request(&f, i);
        int k = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(q, "inflight"));
        most = k > most ? k : most;
        cr_expect_null(cJSON_GetStringValue(cJSON_GetObjectItem(q, "auth")),
                       "an Authorization header to a local server without a key");
        cJSON_Delete(q);
    }
    cr_expect(most > 1 && most <= 8, "at most %d requests at once during the resume", most);
    fprintf(stderr, "test_batch: the resume of %d rows took %.1f s, %d requests at most at once\n",
            40 - nb, secs, most);
    cJSON_Delete(rows);
    /* a flag that would change the results is refused, naming it */
    char *bad = t_lis(&code, "batch --resume %s --temperature 0.2", rdir);
    cr_expect_neq(code, 0, "%s", bad);
    cr_expect(strstr(bad, "temperature differs (run.json: 1, this run: 0.2)"), "%s", bad);
    free(bad);
    free(out);
    t_fake_stop(&f);
}

/* A server on this host with no key configured: no Authorization header, and
 * the run works; a remote one without a key is one line. */
Test(batch, keyless_local_endpoint_works, .timeout = 120)
{
    t_fake f;
    t_fake_start(&f,
                 "{\"replies\":[{\"calls\":[[\"execute_bash\",{\"command\":"
                 "\"echo 42 > /testbed/output/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]}");
    int code = 0;
    char *out =
        t_host(&code,
               "env -u OPENAI_API_KEY -u LLM_API_KEY -u ANTHROPIC_API_KEY HOME=%s "
               "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data %s run --llm-name fake "
               "--llm-base-url %s --rootfs %s --net none --query q --output-dir %s/o 2>&1",
               t_tmpdir(), t_tmpdir(), t_tmpdir(), t_lis_bin(), f.url, t_busybox(), t_tmpdir());
    cr_expect_eq(code, 0, "%s", out);
    cr_expect(strstr(out, "42"), "%s", out);
    cr_assert_geq(t_fake_count(&f), 1);
    cJSON *q = t_fake_request(&f, 0);
    cr_expect(cJSON_IsNull(cJSON_GetObjectItem(q, "auth")), "sent an Authorization header");
    cJSON_Delete(q);
    free(out);
    t_fake_stop(&f);
    /* localhost by name too; a remote endpoint needs a key, in one line */
    const char *remote = "http://llm.example.invalid/v1";
    out = t_host(&code,
                 "env -u OPENAI_API_KEY -u LLM_API_KEY -u ANTHROPIC_API_KEY HOME=%s "
                 "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data %s run --llm-name fake "
                 "--llm-base-url %s --rootfs %s --query q 2>&1",
                 t_tmpdir(), t_tmpdir(), t_tmpdir(), t_lis_bin(), remote, t_busybox());
    cr_expect_eq(code, 2, "%s", out);
    cr_expect(strstr(out, "no API key for http://llm.example.invalid/v1"), "%s", out);
    cr_expect_eq(strchr(out, '\n'), out + strlen(out) - 1, "not one line: %s", out);
    free(out);
}

/* lis run against a port where nothing listens: the one line lis batch says
 * too, at once (no retry), exit 3, and no empty run directory. A timed
 * assertion is not allowed in a test, so the time is printed, not checked. */
Test(batch, lis_run_closed_port_fails_at_once_without_retry, .timeout = 60)
{
    char out_dir[600];
    snprintf(out_dir, sizeof out_dir, "%s/closed", t_tmpdir());
    double t0 = lis_now();
    int code = 0;
    char *out = t_lis(&code,
                      "run --llm-name fake --llm-base-url http://127.0.0.1:9/v1 --rootfs %s "
                      "--net none --query q --output-dir %s",
                      t_busybox(), out_dir);
    double secs = lis_now() - t0;
    fprintf(stderr, "test_batch: lis run against a closed port ended in %.2f s\n", secs);
    cr_expect_eq(code, 3, "%s", out);
    cr_expect(strstr(out, "lis: cannot reach the LLM at http://127.0.0.1:9/v1: Couldn't connect "
                          "to server (check --llm-base-url)\n"),
              "%s", out);
    cr_expect_null(strstr(out, "retry"), "it retried: %s", out);
    cr_expect_null(strstr(out, "trajectory"), "paths of an empty run: %s", out);
    cr_expect_null(strstr(out, "report"), "paths of an empty run: %s", out);
    char *ls = t_host(NULL, "ls -A %s 2>/dev/null | wc -l", out_dir);
    cr_expect_eq(atoi(ls), 0, "an empty run directory was left");
    free(ls);
    free(out);
}

/* lis batch --help: the defaults, an example, where scoring is explained. */
Test(batch, help_has_defaults_an_example_and_the_scoring_doc)
{
    int code = 0;
    char *out = t_lis(&code, "batch --help");
    cr_expect_eq(code, 0);
    cr_expect(strstr(out, "example:\n  lis batch --task "), "%s", out);
    cr_expect(strstr(out, "(default 1;") && strstr(out, "(default 1800)") &&
                  strstr(out, "(default runs)"),
              "%s", out);
    cr_expect(strstr(out, "docs/batch-scoring.md"), "%s", out);
    cr_expect(strstr(out, "--judge-api-key"), "%s", out);
    free(out);
    /* one spelling for the judge's key */
    out = t_lis(&code, "batch judge /nonexistent --judge-model m --judge-base-url "
                       "http://127.0.0.1:9/v1 --api-key k");
    cr_expect_eq(code, 2, "%s", out);
    cr_expect(strstr(out, "--judge-api-key"), "%s", out);
    free(out);
}

/* The set-up template (issue 24): the task's directories and `git init` are
 * made once per run, by the image's own git, and every sandbox starts on
 * them. The repository works in each (status, then a commit), each is its
 * own (one commit in each), and it is the same one made once: .git's files
 * carry the same nanosecond mtime in every sandbox. The image: the Debian
 * fixture with the host's git as a layer on top (Debian's git, the same
 * libraries); no template is left in the store after the run. */
Test(batch, template_git_status_and_commit, .timeout = 240)
{
    const char *deb = t_debian();
    if (access("/usr/bin/git", X_OK) < 0)
        cr_skip_test("no /usr/bin/git on the host to put into the image");
    char *d = t_fresh_dir("batch", "gittmpl");
    char *o = t_host(NULL,
                     "mkdir -p %s/git/usr/bin %s/git/usr/share/git-core && "
                     "cp /usr/bin/git %s/git/usr/bin/ && "
                     "{ [ ! -d /usr/share/git-core/templates ] || "
                     "cp -r /usr/share/git-core/templates %s/git/usr/share/git-core/; }",
                     d, d, d, d);
    free(o);
    char tasks[600], rootfs[2048];
    snprintf(tasks, sizeof tasks, "%s/t.jsonl", d);
    snprintf(rootfs, sizeof rootfs, "%s/git:%s", d, deb);
    t_write_file(tasks, "{\"id\":\"a\",\"problem_statement\":\"GITROW\",\"ground_truth\":\"x\"}\n"
                        "{\"id\":\"b\",\"problem_statement\":\"GITROW\",\"ground_truth\":\"x\"}\n"
                        "{\"id\":\"c\",\"problem_statement\":\"GITROW\",\"ground_truth\":\"x\"}\n");
    t_fake f;
    t_fake_start(&f, "{\"rows\":{\"GITROW\":[{\"calls\":[[\"execute_bash\",{\"command\":"
                     "\"cd /testbed && git status --porcelain -b > /tmp/st && echo hi > f.txt && "
                     "git add f.txt && git -c user.name=t -c user.email=t@t commit -q -m one && "
                     "echo $(git rev-list --count HEAD) $(tr ' ' _ < /tmp/st) "
                     "$(stat -c %y .git/description | tr ' ' _) > /testbed/output/answer.txt\"}]]},"
                     "{\"calls\":[[\"submit\",{}]]}]}}");
    int code = 0;
    char *out = t_lis(&code,
                      LIS_BATCH "--tasks %s --scorer builtin:match --concurrency 3 "
                                "--output-dir %s/out",
                      f.url, rootfs, tasks, d);
    cr_assert_eq(code, 0, "%s", out);
    cr_expect_null(strstr(out, "no set-up template"), "%s", out);
    char rdir[1024];
    t_run_dir(d, rdir, sizeof rdir);
    cJSON *rows = t_results_rows(rdir);
    cr_assert_eq(cJSON_GetArraySize(rows), 3, "%s", out);
    const char *first = NULL;
    for (int i = 0; i < 3; i++) {
        const char *id = (const char *[]){"a", "b", "c"}[i];
        const char *ans = str(row_by_id(rows, id, 0, NULL), "answer");
        /* a fresh repository: no commit before, exactly this sandbox's one after */
        cr_expect_eq(strncmp(ans, "1 ##_No_commits_yet_on_", 23), 0, "%s: '%s'", id, ans);
        const char *mtime = strrchr(ans, ' ');
        cr_assert_not_null(mtime, "%s: '%s'", id, ans);
        if (!first)
            first = mtime;
        else
            cr_expect_str_eq(mtime, first, "%s's repository was made on its own: '%s'", id, ans);
    }
    cJSON_Delete(rows);
    free(out);
    t_fake_stop(&f);
    out = t_lis(&code, "rootfs ls");
    cr_expect_null(strstr(out, "snapshot"), "the template was left in the store: %s", out);
    free(out);
}
