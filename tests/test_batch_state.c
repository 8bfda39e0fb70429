/* test_batch_state.c - what a lis batch says about itself agrees with what
 * happened (issue 32), as the unprivileged test user, without a terminal:
 * episodes paused by lis batch ctl show as paused (by whom) on the terminal,
 * in ctl status and on the --live page; a run stopped by lis batch ctl stop
 * says so (not "Ctrl-C") on the terminal, in run.json and results.json; a
 * run whose every row's scorer failed says FAILED and exits non-zero. */
#include "testlib.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void setup(void) { lis_ctx_free(t_ctx()); }
TestSuite(batch_state, .init = setup);

static cJSON *read_json(const char *rdir, const char *name)
{
    char *t = t_host(NULL, "cat %s/%s", rdir, name);
    cJSON *j = cJSON_Parse(t);
    cr_assert(j, "%s/%s is not JSON: %.300s", rdir, name, t);
    free(t);
    return j;
}

static const char *str(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
    return s ? s : "";
}

/* Polls up to 60 s for the shell condition cond to hold. */
static int wait_for(const char *cond)
{
    char c[2048];
    snprintf(c, sizeof c, "%s >/dev/null 2>&1", cond);
    for (int i = 0; i < 600; i++) {
        if (system(c) == 0)
            return 1;
        usleep(100000);
    }
    return 0;
}

/* Two rows at concurrency 2 against an endpoint that never answers, with
 * --live, stderr to d/log (no terminal: the plain progress lines), up to
 * both episodes running; its pid, its directory in rdir, the endpoint in *lfd. */
static pid_t silent_batch(const char *d, char *rdir, size_t rlen, int *lfd)
{
    int port;
    *lfd = t_silent_endpoint(&port);
    char tasks[600], log[600], cmd[4096], c[2400];
    snprintf(tasks, sizeof tasks, "%s/t.jsonl", d);
    snprintf(log, sizeof log, "%s/log", d);
    FILE *f = fopen(tasks, "w");
    fputs("{\"id\":\"a\",\"problem_statement\":\"x\",\"ground_truth\":\"y\"}\n"
          "{\"id\":\"b\",\"problem_statement\":\"x\",\"ground_truth\":\"y\"}\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data exec %s batch --llm-name fake "
             "--llm-base-url http://127.0.0.1:%d/v1 --api-key k --rootfs %s --net none --tasks %s "
             "--scorer builtin:match --concurrency 2 --live --output-dir %s/out </dev/null >%s "
             "2>&1",
             t_tmpdir(), t_tmpdir(), t_lis_bin(), port, t_busybox(), tasks, d, log);
    pid_t pid = t_spawn_sh(cmd);
    snprintf(c, sizeof c, "test -S %s/out/*/ctl.sock", d);
    cr_assert(wait_for(c), "no control socket: %s", t_host(NULL, "cat %s", log));
    t_run_dir(d, rdir, rlen);
    cr_assert(rdir[0]);
    snprintf(c, sizeof c, "%s batch ctl %s status | grep -q '2 running'", t_lis_bin(), rdir);
    cr_assert(wait_for(c), "not running: %s", t_host(NULL, "cat %s", log));
    return pid;
}

Test(batch_state, ctl_pause_and_stop_are_said_everywhere, .timeout = 180)
{
    char *d = t_fresh_dir("state", "ctl");
    char log[600], rdir[1024] = "", c[2400];
    snprintf(log, sizeof log, "%s/log", d);
    int lfd;
    pid_t pid = silent_batch(d, rdir, sizeof rdir, &lfd);
    /* both episodes waiting on the model, then paused by lis batch ctl */
    char *o = t_lis(NULL, "batch ctl %s pause", rdir);
    free(o);
    /* the terminal (no tty) says it at once, with who paused them */
    snprintf(c, sizeof c, "grep -q '2 running (2 paused: lis batch ctl pause 2)' %s", log);
    cr_expect(wait_for(c), "the terminal does not say the pause: %s", t_host(NULL, "cat %s", log));
    char *out = t_host(NULL, "cat %s", log);
    cr_expect(strstr(out, "mean score -"), "a mean before any result: %s", out);
    cr_expect_null(strstr(out, "mean score 0.000"), "a mean before any result: %s", out);
    free(out);
    /* the live page's banner: paused, not unknown */
    char *url = t_host(NULL, "cat %s/live.url | sed 's|/?|/live.json?|' | tr -d '\\n'", rdir);
    char *live = t_host(NULL, "curl -s --max-time 10 '%s'", url);
    cJSON *lj = cJSON_Parse(live);
    cr_assert(lj, "live.json: %s", live);
    const cJSON *run = cJSON_GetObjectItem(lj, "run");
    cr_expect_str_eq(str(run, "status"), "paused", "%s", live);
    cr_expect(strstr(str(run, "status_message"), "lis batch ctl pause"), "%s", live);
    cJSON_Delete(lj);
    free(live);
    free(url);
    /* stop: draining, then cancelling; said as lis batch ctl stop */
    free(t_lis(NULL, "batch ctl %s stop", rdir));
    free(t_lis(NULL, "batch ctl %s stop", rdir));
    int status = 0;
    waitpid(pid, &status, 0);
    close(lfd);
    out = t_host(NULL, "cat %s", log);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) != 0, "%s", out);
    cr_expect(strstr(out, "lis batch ctl stop: starting nothing new"), "%s", out);
    cr_expect_null(strstr(out, "Ctrl-C"), "a ctl stop said as Ctrl-C: %s", out);
    cr_expect(strstr(out, "partial: lis batch ctl stop"), "the summary: %s", out);
    free(out);
    cJSON *rj = read_json(rdir, "run.json");
    cr_expect_str_eq(str(rj, "status"), "partial");
    cr_expect_str_eq(str(rj, "status_reason"), "ctl_stop");
    cr_expect(strstr(str(rj, "status_message"), "lis batch ctl stop"), "%s",
              str(rj, "status_message"));
    cJSON_Delete(rj);
    cJSON *res = read_json(rdir, "results.json");
    cr_expect_str_eq(str(res, "status_reason"), "ctl_stop");
    cJSON_Delete(res);
}

Test(batch_state, every_row_scorer_failed_is_a_failed_run, .timeout = 120)
{
    char *d = t_fresh_dir("state", "scorer");
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/t.jsonl", d);
    FILE *f = fopen(tasks, "w");
    fputs("{\"id\":\"a\",\"problem_statement\":\"x\",\"ground_truth\":\"y\"}\n"
          "{\"id\":\"b\",\"problem_statement\":\"x\",\"ground_truth\":\"y\"}\n",
          f);
    fclose(f);
    t_fake fk;
    t_fake_start(&fk, "{\"replies\":[]}"); /* every reply a submit */
    int code = 0;
    char *out = t_lis(&code,
                      "batch --llm-name fake --llm-base-url %s --api-key k --rootfs %s --net none "
                      "--tasks %s --scorer /bin/false --output-dir %s/out/",
                      fk.url, t_busybox(), tasks, d);
    t_fake_stop(&fk);
    cr_expect_null(strstr(out, "out//"), "--output-dir DIR/ printed as DIR//: %s", out);
    cr_expect_neq(code, 0, "every score failed, yet exit 0: %s", out);
    cr_expect(strstr(out, "FAILED: the scorer failed on every one of the 2 rows"), "%s", out);
    cr_expect_null(strstr(out, "status                 complete"), "%s", out);
    char rdir[1024] = "";
    t_run_dir(d, rdir, sizeof rdir);
    cr_assert(rdir[0], "%s", out);
    cJSON *rj = read_json(rdir, "run.json");
    cr_expect_str_eq(str(rj, "status"), "failed");
    cr_expect_str_eq(str(rj, "status_reason"), "scorer_failed");
    cJSON_Delete(rj);
    cJSON *res = read_json(rdir, "results.json");
    cr_expect_str_eq(str(res, "status"), "failed");
    cJSON_Delete(res);
    free(out);
    /* scored again by a scorer that works: the old scores kept beside */
    out = t_lis(&code, "batch rescore %s --scorer builtin:match", rdir);
    cr_expect_eq(code, 0, "%s", out);
    cr_expect(strstr(out, "2 rows scored by builtin:match"), "%s", out);
    free(out);
    cJSON *rows = t_results_rows(rdir);
    cr_assert_eq(cJSON_GetArraySize(rows), 2);
    const cJSON *row;
    cJSON_ArrayForEach(row, rows)
    {
        cr_expect_str_eq(str(row, "reason"), "submitted");
        cr_expect_str_eq(str(row, "scorer"), "builtin:match");
        const cJSON *prev = cJSON_GetArrayItem(cJSON_GetObjectItem(row, "previous_scores"), 0);
        cr_expect_str_eq(str(prev, "reason"), "scorer_error");
        cr_expect(strstr(str(prev, "scorer"), "false"), "the old scorer: %s", str(prev, "scorer"));
    }
    cJSON_Delete(rows);
    rj = read_json(rdir, "run.json");
    cr_expect_str_eq(str(rj, "status"), "complete");
    cr_expect_str_eq(str(rj, "scorer"), "builtin:match");
    const cJSON *resc = cJSON_GetArrayItem(cJSON_GetObjectItem(rj, "rescored"), 0);
    cr_expect_str_eq(str(resc, "scorer"), "builtin:match");
    cr_expect_eq(strlen(str(resc, "scorer_sha256")), 64);
    cJSON_Delete(rj);
    res = read_json(rdir, "results.json");
    cr_expect_str_eq(str(res, "status"), "complete");
    cJSON_Delete(res);
}

/* A stop rule fired by a process left running, while the model thinks
 * between steps: the row has reason policy, the rule, the exec that fired it
 * and the step it is charged to, as a stop within a step has them. */
Test(batch_state, a_stop_rule_between_steps_leaves_its_evidence, .timeout = 180)
{
    char *d = t_fresh_dir("state", "between");
    char tasks[600], pol[600];
    snprintf(tasks, sizeof tasks, "%s/t.jsonl", d);
    snprintf(pol, sizeof pol, "%s/policy.yaml", d);
    FILE *f = fopen(pol, "w");
    fputs("version: 1\nrules:\n"
          "  - name: stop-me\n    on: exec\n    argv: \"*STOPME*\"\n    action: stop\n",
          f);
    fclose(f);
    f = fopen(tasks, "w");
    fputs("{\"id\":\"late\",\"problem_statement\":\"BSTOP go\",\"ground_truth\":\"a\"}\n", f);
    fclose(f);
    t_fake fk;
    /* step 1 leaves a process that execs the marker a second later, while
     * the model takes 6 s to answer step 2 */
    t_fake_start(&fk, "{\"rows\":{\"BSTOP\":["
                      "{\"calls\":[[\"execute_bash\",{\"command\":\"X=STOP; (sleep 1; /bin/true "
                      "${X}ME) >/dev/null 2>&1 &\"}]]},"
                      "{\"latency\":6,\"calls\":[[\"execute_bash\",{\"command\":\"echo next\"}]]},"
                      "{\"calls\":[[\"submit\",{}]]}]}}");
    int code = 0;
    char *out = t_lis(&code,
                      "batch --llm-name fake --llm-base-url %s --api-key k --rootfs %s --net none "
                      "--tasks %s --scorer builtin:match --policy %s --output-dir %s/out",
                      fk.url, t_busybox(), tasks, pol, d);
    t_fake_stop(&fk);
    char rdir[1024] = "";
    t_run_dir(d, rdir, sizeof rdir);
    cr_assert(rdir[0], "%s", out);
    cJSON *rows = t_results_rows(rdir);
    const cJSON *row = cJSON_GetArrayItem(rows, 0);
    cr_assert(row, "no row: %s", out);
    cr_expect_str_eq(str(row, "reason"), "policy", "%s", out);
    cr_expect_str_eq(str(row, "stop_rule"), "stop-me");
    cr_expect_geq(cJSON_GetNumberValue(cJSON_GetObjectItem(row, "alerts")), 1);
    const cJSON *a, *hit = NULL;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(row, "alert_list")) if (!strcmp(str(a, "rule"),
                                                                              "stop-me")) hit = a;
    cr_assert(hit, "the stop is not in alert_list: %s", cJSON_PrintUnformatted(row));
    cr_expect_str_eq(str(hit, "action"), "stop");
    cr_expect(strstr(str(hit, "what"), "STOPME"), "the exec that fired it: %s", str(hit, "what"));
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(hit, "step")), 1,
                 "charged to the step that left the process");
    cJSON *traj = read_json(rdir, "trajectories/late.json");
    const cJSON *md = cJSON_GetObjectItem(traj, "metadata");
    cr_expect_str_eq(str(md, "stop_rule"), "stop-me");
    cr_expect(cJSON_IsObject(cJSON_GetObjectItem(md, "between_steps")), "no between_steps");
    cJSON_Delete(traj);
    cJSON_Delete(rows);
    free(out);
}

/* kill -9 of a running lis batch: the next lis batch ctl on its directory
 * finds it dead, says so, and repairs its files (partial, killed) and its
 * leftovers (ctl.sock, live.url, the set-up template image). */
Test(batch_state, a_killed_run_is_found_and_repaired_by_ctl, .timeout = 180)
{
    char *d = t_fresh_dir("state", "kill9");
    char rdir[1024] = "", c[2400];
    int lfd;
    pid_t pid = silent_batch(d, rdir, sizeof rdir, &lfd);
    char tpath[1200];
    snprintf(tpath, sizeof tpath, "%s/template.json", rdir);
    /* "2 running" can be said while the rows still wait for the set-up
     * template (slower under ASan): its note comes when it is made */
    snprintf(c, sizeof c, "test -s %s", tpath);
    wait_for(c);
    char *digest =
        t_host(NULL, "sed -n 's/.*\"digest\":\"\\([^\"]*\\)\".*/\\1/p' %s 2>/dev/null", tpath);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(lfd);
    int code = 0;
    char *out = t_lis(&code, "batch ctl %s status", rdir);
    cr_expect_neq(code, 0, "%s", out);
    cr_expect(strstr(out, "ended without a word") && strstr(out, "partial") &&
                  strstr(out, "finish it with:"),
              "%s", out);
    free(out);
    cJSON *rj = read_json(rdir, "run.json");
    cr_expect_str_eq(str(rj, "status"), "partial");
    cr_expect_str_eq(str(rj, "status_reason"), "killed");
    cJSON_Delete(rj);
    cJSON *res = read_json(rdir, "results.json");
    cr_expect_str_eq(str(res, "status"), "partial", "results.json is not this run's");
    cJSON_Delete(res);
    const char *gone[] = {"ctl.sock", "live.url", "template.json"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(c, sizeof c, "%s/%s", rdir, gone[i]);
        cr_expect_neq(access(c, F_OK), 0, "%s outlived the killed run", gone[i]);
    }
    cr_expect(digest[0], "no template.json while the run ran (busybox has a set-up template)");
    if (digest[0]) { /* the template image is gone too */
        char *ls = t_host(NULL, "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data %s rootfs ls 2>&1",
                          t_tmpdir(), t_tmpdir(), t_lis_bin());
        const char *hex = strncmp(digest, "sha256:", 7) ? digest : digest + 7;
        cr_expect_null(strstr(ls, hex), "the template image %s is left: %s", digest, ls);
        free(ls);
    }
    free(digest);
    /* a second look: it has ended (no repair again), and says how */
    out = t_lis(&code, "batch ctl %s status", rdir);
    cr_expect(strstr(out, "it has ended: partial"), "%s", out);
    free(out);
}

/* The smaller things a new user reads: lis --help names lis batch's real
 * usage; --tasks without a scorer lists the built-in scorers by name. */
Test(batch_state, help_and_scorer_hints_name_what_exists)
{
    int code = 0;
    char *out = t_lis(&code, "--help");
    cr_expect(strstr(out, "lis batch --task DIR | --tasks FILE"), "%s", out);
    cr_expect_null(strstr(out, "lis batch FILE"), "%s", out);
    free(out);
    char *d = t_fresh_dir("state", "hints");
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/t.jsonl", d);
    FILE *f = fopen(tasks, "w");
    fputs("{\"id\":\"a\",\"problem_statement\":\"x\",\"ground_truth\":\"y\"}\n", f);
    fclose(f);
    out = t_lis(&code,
                "batch --llm-name fake --llm-base-url http://127.0.0.1:9/v1 --api-key k --rootfs "
                "%s --net none --tasks %s --output-dir %s/out",
                t_busybox(), tasks, d);
    cr_expect_neq(code, 0, "%s", out);
    cr_expect(strstr(out, "builtin:match") && strstr(out, "builtin:letter") &&
                  strstr(out, "builtin:math"),
              "the built-in scorers are not named: %s", out);
    free(out);
}

/* The episodes cannot read the live view: through their own proxy with
 * --allow-host-network (the only way they reach the host's loopback), the
 * view answers 401, since they never have the token. */
Test(batch_state, an_episode_cannot_read_the_live_view, .timeout = 180)
{
    char *d = t_fresh_dir("state", "liveproxy");
    int lport, lfd = t_silent_endpoint(&lport); /* a free port, given to --live */
    close(lfd);
    char tasks[600], script[1200];
    snprintf(tasks, sizeof tasks, "%s/t.jsonl", d);
    FILE *f = fopen(tasks, "w");
    fputs("{\"id\":\"peek\",\"problem_statement\":\"x\",\"ground_truth\":\"y\"}\n", f);
    fclose(f);
    snprintf(script, sizeof script,
             "{\"replies\":[{\"calls\":[[\"execute_bash\",{\"command\":\"http_proxy=http://"
             "127.0.0.1:3128 no_proxy= wget -O - http://127.0.0.1:%d/live.json 2>&1; echo "
             "rc=$?\"}]]},{\"calls\":[[\"submit\",{}]]}]}",
             lport);
    t_fake fk;
    t_fake_start(&fk, script);
    int code = 0;
    char *out = t_lis(&code,
                      "batch --llm-name fake --llm-base-url %s --api-key k --rootfs %s --net proxy "
                      "--allow-host-network --tasks %s --scorer builtin:match --live 127.0.0.1:%d "
                      "--output-dir %s/out",
                      fk.url, t_busybox(), tasks, lport, d);
    t_fake_stop(&fk);
    char rdir[1024] = "";
    t_run_dir(d, rdir, sizeof rdir);
    cr_assert(rdir[0], "%s", out);
    cJSON *traj = read_json(rdir, "trajectories/peek.json");
    const char *obs = str(cJSON_GetArrayItem(cJSON_GetObjectItem(traj, "steps"), 0), "observation");
    cr_expect(strstr(obs, "401"), "the episode read the live view: %s", obs);
    cr_expect_null(strstr(obs, "\"rows\""), "the episode read the live view: %s", obs);
    cJSON_Delete(traj);
    free(out);
}
