/* test_batch_effects.c - what each step did (issue 23) through `lis batch` and
 * `lis run`, with hostile agents scripted by tests/fake_llm.py: every step's
 * effects compared exactly with what its command did, a fetch through the
 * proxy and a raw socket under --net none, 512 episodes at once whose steps
 * write unique markers (nothing lost, nothing attributed to another episode
 * or step), each rule action through lis batch (flag, deny of an exec and of
 * a connection, pause + lis batch ctl resume, stop), the live view and the
 * control socket, and the flags' errors. Sandboxes run the busybox fixture
 * with tests/monitor_probe at /mprobe. */
#include "testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void setup(void) { lis_ctx_free(t_ctx()); }
TestSuite(batch_effects, .init = setup);

/* effects are on by default (their cost is in the noise, docs/benchmarks.md):
 * these runs take the default; --effects is tested where it meets --no-effects */
#define LIS_BATCH_BASE "batch --llm-name fake --llm-base-url %s --api-key k --rootfs %s "
#define LIS_BATCH LIS_BATCH_BASE

/* The busybox fixture with the probe at /mprobe. */
static const char *probe_rootfs(void)
{
    static char r[700];
    snprintf(r, sizeof r, "%s/bbprobe", t_tmpdir());
    int code = 0;
    char *o = t_host(&code, "rm -rf %s && cp -a %s %s && cp %s %s/mprobe && chmod 755 %s/mprobe", r,
                     t_busybox(), r, t_build_file("tests/monitor_probe"), r, r);
    cr_assert_eq(code, 0, "%s", o);
    free(o);
    return r;
}

static char *dir_for(const char *name)
{
    static char d[512];
    snprintf(d, sizeof d, "%s/fx-%s", t_tmpdir(), name);
    free(t_host(NULL, "rm -rf %s && mkdir -p %s/out", d, d));
    return d;
}

static cJSON *read_json(const char *fmt, const char *a, const char *b)
{
    char path[2048];
    snprintf(path, sizeof path, fmt, a, b);
    char *t = t_host(NULL, "cat '%s' 2>/dev/null", path);
    cJSON *j = cJSON_Parse(t);
    cr_assert(j, "%s is not JSON: %.300s", path, t);
    free(t);
    return j;
}

static const char *str(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
    return s ? s : "";
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const cJSON *row_of(const cJSON *rows, const char *id)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, rows) if (!strcmp(str(r, "id"), id)) return r;
    return NULL;
}

/* ---- the scripted replies ------------------------------------------------ */

static cJSON *call(const char *tool, cJSON *params)
{
    cJSON *e = cJSON_CreateObject(), *calls = cJSON_AddArrayToObject(e, "calls");
    cJSON *c = cJSON_CreateArray();
    cJSON_AddItemToArray(c, cJSON_CreateString(tool));
    cJSON_AddItemToArray(c, params ? params : cJSON_CreateObject());
    cJSON_AddItemToArray(calls, c);
    return e;
}

static cJSON *bash(const char *cmd)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "command", cmd);
    return call("execute_bash", p);
}

static cJSON *submit(void) { return call("submit", NULL); }

static void fake_start(t_fake *f, cJSON *script)
{
    char *t = cJSON_PrintUnformatted(script);
    cJSON_Delete(script);
    t_fake_start(f, t);
    free(t);
}

/* ---- the effects of a step ---------------------------------------------- */

static const cJSON *step_fx(const cJSON *traj, int i)
{
    const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(traj, "steps"), i);
    const cJSON *fx = cJSON_GetObjectItem(s, "effects");
    char *t = cJSON_PrintUnformatted(s);
    cr_assert(cJSON_IsObject(fx), "step %d has no effects: %.2000s", i + 1, t);
    cr_assert_eq(num(fx, "step"), num(cJSON_GetObjectItem(s, "metadata"), "step"),
                 "the effects' step is not the trajectory's: %.2000s", t);
    free(t);
    return fx;
}

/* fx's file changes as "change path" lines, sorted, joined by '|' */
static char *changes(const cJSON *fx)
{
    char *v[64];
    int n = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(fx, "files"))
    {
        cr_assert_lt(n, 64);
        char line[600];
        snprintf(line, sizeof line, "%s %s", str(f, "change"), str(f, "path"));
        v[n++] = strdup(line);
    }
    for (int i = 0; i < n; i++) /* a few entries: insertion sort */
        for (int j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
            char *t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(v[i]) + 1;
    char *out = calloc(1, len);
    for (int i = 0; i < n; i++) {
        if (i)
            strcat(out, "|");
        strcat(out, v[i]);
        free(v[i]);
    }
    return out;
}

static void expect_changes(const cJSON *fx, const char *want, const char *what)
{
    char *got = changes(fx);
    cr_expect_str_eq(got, want, "%s: file changes", what);
    free(got);
}

static const cJSON *file_at(const cJSON *fx, const char *path)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(fx, "files")) if (!strcmp(str(f, "path"),
                                                                        path)) return f;
    return NULL;
}

/* The process whose argv joined by spaces is argv. */
static const cJSON *proc_argv(const cJSON *fx, const char *argv)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(fx, "processes"))
    {
        char joined[2048] = "";
        const cJSON *a;
        cJSON_ArrayForEach(a, cJSON_GetObjectItem(p, "argv"))
        {
            if (joined[0])
                strcat(joined, " ");
            strncat(joined, a->valuestring, sizeof joined - strlen(joined) - 2);
        }
        if (!strcmp(joined, argv))
            return p;
    }
    return NULL;
}

static int cap(const cJSON *fx, const char *k)
{
    return cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(fx, "capability"), k));
}

static const cJSON *alert_of(const cJSON *fx, const char *rule)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(fx, "alerts")) if (!strcmp(str(a, "rule"),
                                                                         rule)) return a;
    return NULL;
}

/* ---- tests ---------------------------------------------------------------- */

/* One agent that writes, renames, hard-links and deletes files, runs a
 * program with an exit code, uses the editor: each step's effects exactly. */
Test(batch_effects, each_step_exactly, .timeout = 180)
{
    const char *root = probe_rootfs();
    char *d = dir_for("exact"), tasks[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    FILE *tf = fopen(tasks, "w");
    fputs("{\"id\":\"x\",\"domain\":\"files\",\"problem_statement\":\"EXACT go\","
          "\"ground_truth\":\"ans\"}\n",
          tf);
    fclose(tf);
    cJSON *s = cJSON_CreateObject(), *rows = cJSON_AddObjectToObject(s, "rows");
    cJSON *x = cJSON_AddArrayToObject(rows, "EXACT");
    cJSON_AddItemToArray(x, bash("mkdir /testbed/d && echo one > /testbed/d/a.txt && echo two > "
                                 "/testbed/b.txt && mv /testbed/b.txt /testbed/c.txt && "
                                 "rm /testbed/d/a.txt && /mprobe exit 3; true"));
    cJSON_AddItemToArray(x, bash("mv /testbed/c.txt /testbed/e.txt && ln /testbed/e.txt "
                                 "/testbed/h.txt"));
    cJSON *ed = cJSON_CreateObject();
    cJSON_AddStringToObject(ed, "command", "create");
    cJSON_AddStringToObject(ed, "path", "/testbed/g.py");
    cJSON_AddStringToObject(ed, "file_text", "print(1)\n");
    cJSON_AddItemToArray(x, call("str_replace_editor", ed));
    cJSON_AddItemToArray(x, bash("rm /testbed/e.txt /testbed/h.txt; echo ans > "
                                 "/testbed/output/answer.txt"));
    cJSON_AddItemToArray(x, submit());
    t_fake f;
    fake_start(&f, s);
    int code = 0;
    char *out =
        t_lis(&code, LIS_BATCH "--net none --tasks %s --scorer builtin:match --output-dir %s/out",
              f.url, root, tasks, d);
    t_fake_stop(&f);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    char rdir[1024];
    t_run_dir(d, rdir, sizeof rdir);
    cJSON *traj = read_json("%s/trajectories/%s.json", rdir, "x");
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(traj, "steps")), 5);

    const cJSON *fx = step_fx(traj, 0);
    /* b.txt was made and renamed, a.txt made and deleted, within the step */
    expect_changes(fx, "created /testbed/c.txt|created /testbed/d", "step 1");
    const cJSON *p = proc_argv(fx, "/mprobe exit 3");
    cr_assert(p, "no /mprobe exit 3 among the processes");
    cr_expect_str_eq(str(p, "state"), "exited");
    cr_expect_eq(num(p, "exit_code"), 3);
    cr_expect_str_eq(str(p, "path"), "/mprobe");
    cr_expect(cap(fx, "file") && cap(fx, "computation"), "step 1's capability");
    cr_expect(!cap(fx, "external"));
    const cJSON *c = file_at(fx, "/testbed/c.txt");
    cr_expect_eq(num(c, "size"), 4);
    cr_expect(strstr(str(c, "diff"), "+two\n"), "no diff: %s", str(c, "diff"));

    fx = step_fx(traj, 1);
    expect_changes(fx, "linked /testbed/h.txt|renamed /testbed/e.txt", "step 2");
    cr_expect_str_eq(str(file_at(fx, "/testbed/e.txt"), "from"), "/testbed/c.txt");
    cr_expect_str_eq(str(file_at(fx, "/testbed/h.txt"), "link_of"), "/testbed/e.txt");

    fx = step_fx(traj, 2); /* the editor: no program, a file */
    expect_changes(fx, "created /testbed/g.py", "step 3 (the editor)");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(fx, "processes")), 0);
    cr_expect(strstr(str(file_at(fx, "/testbed/g.py"), "diff"), "+print(1)\n"));
    cr_expect(cap(fx, "file") && !cap(fx, "computation") && !cap(fx, "external"));

    fx = step_fx(traj, 3);
    expect_changes(fx,
                   "created /testbed/output/answer.txt|deleted /testbed/e.txt|deleted "
                   "/testbed/h.txt",
                   "step 4");
    fx = step_fx(traj, 4); /* submit: nothing happened */
    expect_changes(fx, "", "step 5 (submit)");
    cr_expect(!cap(fx, "file") && !cap(fx, "computation") && !cap(fx, "external"));

    /* the results row: the domain, the steps that used each capability */
    cJSON *rrows = t_results_rows(rdir);
    const cJSON *r = row_of(rrows, "x");
    cr_assert(r);
    cr_expect_str_eq(str(r, "domain"), "files");
    const cJSON *rc = cJSON_GetObjectItem(r, "capability");
    cr_expect_eq(num(rc, "steps"), 5);
    cr_expect_eq(num(rc, "file"), 4);
    cr_expect_eq(num(rc, "computation"), 1); /* step 1's /mprobe; busybox applets are files' */
    cr_expect_eq(num(r, "alerts"), 0);
    /* results.json: by task and domain */
    cJSON *res = read_json("%s/%s", rdir, "results.json");
    const cJSON *capj = cJSON_GetObjectItem(res, "capability");
    cr_expect_eq(num(capj, "steps"), 5);
    cr_expect_float_eq(num(capj, "file"), 0.8, 1e-9);
    cr_expect_eq(num(cJSON_GetObjectItem(cJSON_GetObjectItem(capj, "by_domain"), "files"),
                     "episodes"),
                 1);
    /* lis batch report --by domain prints it */
    out = t_lis(&code, "batch report %s --by domain", rdir);
    cr_expect_eq(code, 0, "%s", out);
    cr_expect(strstr(out, "Capability use by domain") && strstr(out, "files "), "%s", out);
    free(out);
    cJSON_Delete(res);
    cJSON_Delete(rrows);
    cJSON_Delete(traj);
}

/* A fetch through the egress proxy (with the domain rules of lis sandbox)
 * and a raw socket under --net none: both network effects. */
Test(batch_effects, proxy_fetch_and_raw_socket, .timeout = 180)
{
    const char *root = probe_rootfs();
    char *d = dir_for("net"), tasks[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    FILE *tf = fopen(tasks, "w");
    fputs("{\"id\":\"fetch\",\"problem_statement\":\"FETCH go\",\"ground_truth\":\"a\"}\n", tf);
    fclose(tf);
    /* a web server on the host's loopback (the proxy reaches it with --allow-host-network) */
    free(t_host(NULL, "echo hello-from-host > %s/page.txt", d));
    int p = t_web_start(d, 170), code = 0;
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "wget -q -O - http://127.0.0.1:%d/page.txt; wget -q -O - http://localhost:%d/x; "
             "echo a > /testbed/output/answer.txt",
             p, p);
    cJSON *s = cJSON_CreateObject(), *rows = cJSON_AddObjectToObject(s, "rows");
    cJSON *x = cJSON_AddArrayToObject(rows, "FETCH");
    cJSON_AddItemToArray(x, bash(cmd));
    cJSON_AddItemToArray(x, submit());
    t_fake f;
    fake_start(&f, s);
    char *out = t_lis(&code,
                      LIS_BATCH "--net proxy --allow-host-network --deny-domain localhost "
                                "--tasks %s --scorer builtin:match --output-dir %s/out",
                      f.url, root, tasks, d);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    t_web_stop(d);
    char rdir[1024];
    t_run_dir(d, rdir, sizeof rdir);
    cJSON *traj = read_json("%s/trajectories/%s.json", rdir, "fetch");
    const cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItem(traj, "steps"), 0);
    cr_expect(strstr(str(st, "observation"), "hello-from-host"), "the fetch failed: %s",
              str(st, "observation"));
    const cJSON *fx = step_fx(traj, 0);
    const cJSON *reqs = cJSON_GetObjectItem(cJSON_GetObjectItem(fx, "network"), "requests");
    cr_assert_eq(cJSON_GetArraySize(reqs), 2, "%s", cJSON_PrintUnformatted(reqs));
    const cJSON *ok = NULL, *no = NULL, *q;
    cJSON_ArrayForEach(q, reqs)
    {
        if (!strcmp(str(q, "host"), "127.0.0.1"))
            ok = q;
        if (!strcmp(str(q, "host"), "localhost"))
            no = q;
    }
    cr_assert(ok && no, "the requests: %s", cJSON_PrintUnformatted(reqs));
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(ok, "allowed")));
    cr_expect_eq(num(ok, "port"), p);
    cr_expect_str_eq(str(ok, "method"), "GET");
    cr_expect_geq(num(ok, "bytes_down"), 16, "the page's bytes");
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(no, "allowed")), "--deny-domain localhost");
    cr_expect(strstr(str(no, "reason"), "localhost"), "the refusal names its rule: %s",
              str(no, "reason"));
    cr_expect(cap(fx, "external"), "a fetch is an external resource");
    cr_expect_geq(num(cJSON_GetObjectItem(fx, "resources"), "bytes_fetched"), 16);
    cJSON_Delete(traj);
    /* run.json records the rules (they change results: --resume compares them) */
    cJSON *run = read_json("%s/%s", rdir, "run.json");
    char *rt = cJSON_PrintUnformatted(run);
    cr_expect(strstr(rt, "\"deny_domains\":[\"localhost\"]") && strstr(rt, "allow_host_network"),
              "%s", rt);
    free(rt);
    cJSON_Delete(run);

    /* --net none: a raw connection attempt, refused by the kernel, counted */
    d = dir_for("none");
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    tf = fopen(tasks, "w");
    fputs("{\"id\":\"raw\",\"problem_statement\":\"RAW go\",\"ground_truth\":\"a\"}\n", tf);
    fclose(tf);
    s = cJSON_CreateObject();
    rows = cJSON_AddObjectToObject(s, "rows");
    x = cJSON_AddArrayToObject(rows, "RAW");
    cJSON_AddItemToArray(x, bash("/mprobe connect 10.9.8.7 8080; echo a > "
                                 "/testbed/output/answer.txt"));
    cJSON_AddItemToArray(x, submit());
    t_fake_stop(&f);
    fake_start(&f, s);
    out = t_lis(&code, LIS_BATCH "--net none --tasks %s --scorer builtin:match --output-dir %s/out",
                f.url, root, tasks, d);
    t_fake_stop(&f);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    t_run_dir(d, rdir, sizeof rdir);
    traj = read_json("%s/trajectories/%s.json", rdir, "raw");
    fx = step_fx(traj, 0);
    const cJSON *net = cJSON_GetObjectItem(fx, "network");
    cr_expect_eq(num(net, "refused_connects"), 1);
    const cJSON *rf = cJSON_GetArrayItem(cJSON_GetObjectItem(net, "refused"), 0);
    cr_expect_str_eq(str(rf, "address"), "10.9.8.7");
    cr_expect_eq(num(rf, "port"), 8080);
    cr_expect(cap(fx, "external"), "a refused connection is an attempt at the network");
    cJSON_Delete(traj);
}

/* 512 episodes at once, each step writing a marker of its own episode and
 * step: every step has its effects, each with its own marker only. */
Test(batch_effects, five_hundred_twelve_at_once_each_its_own, .timeout = 900)
{
    enum { N = 512 };
    const char *root = probe_rootfs();
    char *d = dir_for("many"), tasks[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    FILE *tf = fopen(tasks, "w");
    cJSON *s = cJSON_CreateObject(), *rows = cJSON_AddObjectToObject(s, "rows");
    for (int i = 0; i < N; i++) {
        char mk[32], c1[300], c2[300];
        snprintf(mk, sizeof mk, "MK%03dX", i);
        fprintf(tf, "{\"id\":\"e%03d\",\"problem_statement\":\"%s go\",\"ground_truth\":\"a\"}\n",
                i, mk);
        snprintf(c1, sizeof c1, "echo %sA > /testbed/%s_1.txt && /mprobe exit %d", mk, mk, i % 200);
        snprintf(c2, sizeof c2,
                 "echo %sB > /testbed/%s_2.txt && echo a > /testbed/output/answer.txt", mk, mk);
        cJSON *x = cJSON_AddArrayToObject(rows, mk);
        cJSON_AddItemToArray(x, bash(c1));
        cJSON_AddItemToArray(x, bash(c2));
        cJSON_AddItemToArray(x, submit());
    }
    fclose(tf);
    t_fake f;
    fake_start(&f, s);
    int code = 0;
    char *out = t_lis(&code,
                      LIS_BATCH "--net none --tasks %s --scorer builtin:match --concurrency %d "
                                "--max-steps 4 --episode-timeout 600 --quiet --overcommit "
                                "--output-dir %s/out",
                      f.url, root, tasks, N, d);
    t_fake_stop(&f);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    char rdir[1024];
    t_run_dir(d, rdir, sizeof rdir);
    cJSON *rrows = t_results_rows(rdir);
    cr_assert_eq(cJSON_GetArraySize(rrows), N);
    int bad = 0;
    for (int i = 0; i < N && bad < 5; i++) {
        char id[16], mk[32], want[600], argv[64];
        snprintf(id, sizeof id, "e%03d", i);
        snprintf(mk, sizeof mk, "MK%03dX", i);
        const cJSON *r = row_of(rrows, id);
        if (!r || strcmp(str(r, "reason"), "submitted")) {
            cr_expect(0, "%s: %s", id, r ? str(r, "error") : "no row");
            bad++;
            continue;
        }
        cJSON *traj = read_json("%s/trajectories/%s.json", rdir, id);
        for (int st = 0; st < 2; st++) {
            const cJSON *fx = step_fx(traj, st);
            if (st == 0)
                snprintf(want, sizeof want, "created /testbed/%s_1.txt", mk);
            else
                snprintf(want, sizeof want,
                         "created /testbed/%s_2.txt|created /testbed/output/answer.txt", mk);
            char *got = changes(fx);
            if (strcmp(got, want)) {
                cr_expect(0, "%s step %d: %s, not %s", id, st + 1, got, want);
                bad++;
            }
            free(got);
            char line[64];
            snprintf(line, sizeof line, "+%s%c\n", mk, st ? 'B' : 'A');
            char path[300];
            snprintf(path, sizeof path, "/testbed/%s_%d.txt", mk, st + 1);
            if (!strstr(str(file_at(fx, path), "diff"), line)) {
                cr_expect(0, "%s step %d: the diff of %s lacks %s", id, st + 1, path, line);
                bad++;
            }
            /* no marker of another episode anywhere in the step's effects */
            char *t = cJSON_PrintUnformatted(fx);
            for (const char *m = strstr(t, "MK"); m; m = strstr(m + 2, "MK"))
                if (strncmp(m, mk, strlen(mk)) && strlen(m) > 6 && m[5] == 'X') {
                    cr_expect(0, "%s step %d holds another episode's marker: %.8s", id, st + 1, m);
                    bad++;
                    break;
                }
            free(t);
            if (st == 0) {
                snprintf(argv, sizeof argv, "/mprobe exit %d", i % 200);
                const cJSON *p = proc_argv(fx, argv);
                if (!p || num(p, "exit_code") != i % 200) {
                    cr_expect(0, "%s: no %s that exited %d", id, argv, i % 200);
                    bad++;
                }
            }
        }
        cJSON_Delete(traj);
    }
    cJSON_Delete(rrows);
}

/* lis batch ctl DIR CMD... */
static char *ctl(int *code, const char *rdir, const char *args)
{
    return t_lis(code, "batch ctl %s %s", rdir, args);
}

/* Each action of a policy, live, through lis batch: flag, deny of an exec and
 * of a connection, pause (then lis batch ctl resume), stop; the live view and
 * the control socket on the way. */
Test(batch_effects, every_rule_action_and_ctl, .timeout = 300)
{
    const char *root = probe_rootfs();
    char *d = dir_for("rules"), tasks[600], pol[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    snprintf(pol, sizeof pol, "%s/policy.yaml", d);
    FILE *pf = fopen(pol, "w");
    fputs("version: 1\nrules:\n"
          "  - name: flag-etc\n    on: write\n    path: \"/etc/*\"\n    action: flag\n"
          "  - name: deny-exec\n    on: exec\n    argv: \"*DENYME*\"\n    action: deny\n"
          "  - name: deny-host\n    on: connect\n    host: \"*.blocked.test\"\n    action: deny\n"
          "  - name: pause-me\n    on: exec\n    argv: \"*PAUSEME*\"\n    action: pause\n"
          "  - name: stop-me\n    on: exec\n    argv: \"*STOPME*\"\n    action: stop\n",
          pf);
    fclose(pf);
    FILE *tf = fopen(tasks, "w");
    const char *ids[] = {"flag", "deny", "conn", "pause", "stop"};
    const char *mks[] = {"RFLAG", "RDENY", "RCONN", "RPAUSE", "RSTOP"};
    for (int i = 0; i < 5; i++)
        fprintf(tf, "{\"id\":\"%s\",\"problem_statement\":\"%s go\",\"ground_truth\":\"a\"}\n",
                ids[i], mks[i]);
    fclose(tf);
    const char *first[] =
        {"echo x > /etc/flagged; echo a > /testbed/output/answer.txt",
         /* the shell's own argv must not match: the name is put together at run time */
         "X=DENY; /mprobe exit 0 ${X}ME; echo rc=$?; echo a > /testbed/output/answer.txt",
         "wget -q -O - http://www.blocked.test/; echo rc=$?; echo a > /testbed/output/answer.txt",
         "X=PAUSE; echo waiting; /mprobe exit 0 ${X}ME; echo a > /testbed/output/answer.txt",
         "/mprobe exit 0 STOPME; echo a > /testbed/output/answer.txt"};
    cJSON *s = cJSON_CreateObject(), *rows = cJSON_AddObjectToObject(s, "rows");
    for (int i = 0; i < 5; i++) {
        cJSON *x = cJSON_AddArrayToObject(rows, mks[i]);
        cJSON_AddItemToArray(x, bash(first[i]));
        cJSON_AddItemToArray(x, bash("echo next"));
        cJSON_AddItemToArray(x, submit());
    }
    t_fake f;
    fake_start(&f, s);
    char cmd[4096], log[700];
    snprintf(log, sizeof log, "%s/log", d);
    snprintf(cmd, sizeof cmd,
             "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data exec %s batch --llm-name fake "
             "--llm-base-url %s --api-key k --rootfs %s --net proxy --tasks %s --scorer "
             "builtin:match --concurrency 5 --policy %s --live --output-dir %s/out >%s 2>&1",
             t_tmpdir(), t_tmpdir(), t_lis_bin(), f.url, root, tasks, pol, d, log);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    /* the run's directory, its control socket, the pause */
    char rdir[1024] = "";
    int paused = 0, code = 0;
    for (int t = 0; t < 1200 && !paused; t++) {
        usleep(100000);
        if (!rdir[0])
            t_run_dir(d, rdir, sizeof rdir);
        char sock[1200];
        snprintf(sock, sizeof sock, "%s/ctl.sock", rdir);
        if (!rdir[0] || access(sock, F_OK) != 0)
            continue;
        char *st = ctl(&code, rdir, "status");
        paused = code == 0 && strstr(st, "paused by policy rule pause-me") != NULL;
        free(st);
    }
    cr_assert(paused, "the pause rule did not pause its episode: %s", t_host(NULL, "cat %s", log));
    struct stat sst;
    char sock[1200];
    snprintf(sock, sizeof sock, "%s/ctl.sock", rdir);
    cr_assert_eq(stat(sock, &sst), 0);
    cr_expect_eq(sst.st_mode & 0777, 0600, "ctl.sock's mode %o", sst.st_mode & 0777);
    /* the others end; the paused one waits (its row is not written) */
    for (int t = 0; t < 600; t++) {
        cJSON *r = t_results_rows(rdir);
        int n = cJSON_GetArraySize(r);
        cJSON_Delete(r);
        if (n >= 4)
            break;
        usleep(100000);
    }
    sleep(1);
    cJSON *rr = t_results_rows(rdir);
    cr_expect_eq(cJSON_GetArraySize(rr), 4, "the paused episode ended while paused");
    cr_expect(!row_of(rr, "pause"));
    cJSON_Delete(rr);
    /* the live view: the page, its index, read-only, for this listener's Host
     * only, and only with the run's token (printed, and in DIR/live.url, 0600) */
    char *url = t_host(NULL, "grep -o 'http://127.0.0.1:[0-9]*/' %s | head -1 | tr -d '\\n'", log);
    cr_assert(url[0], "no live view address printed: %s", t_host(NULL, "cat %s", log));
    char *tok = t_host(NULL, "grep -o 'token=[0-9a-f]*' %s | head -1 | tr -d '\\n'", log);
    cr_assert(strlen(tok) == 6 + 32, "no token in the printed URL: %s",
              t_host(NULL, "cat %s", log));
    char lurl[1300];
    snprintf(lurl, sizeof lurl, "%s/live.url", rdir);
    cr_assert_eq(stat(lurl, &sst), 0, "no live.url in the run directory");
    cr_expect_eq(sst.st_mode & 0777, 0600, "live.url's mode %o", sst.st_mode & 0777);
    char *kept = t_host(NULL, "cat %s", lurl);
    cr_expect(strstr(kept, url) && strstr(kept, tok), "live.url: %s", kept);
    free(kept);
    const char *probes[] = {"", "live.json", "report/ep-0.js",
                            "?token=0123456789abcdef0123456789abcdef"};
    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
        char *o = t_host(NULL, "curl -s -o /dev/null -w '%%{http_code}' --max-time 10 %s%s", url,
                         probes[i]);
        cr_expect_str_eq(o, "401", "%s%s without the token", url, probes[i]);
        free(o);
    }
    /* the page given the token sets the cookie its own requests carry */
    char *ck =
        t_host(&code,
               "curl -s -o /dev/null -c %s/jar --max-time 10 '%s?%s' && curl -s -o /dev/null "
               "-w '%%{http_code}' -b %s/jar --max-time 10 %slive.json",
               d, url, tok, d, url);
    cr_expect_str_eq(ck, "200", "live.json with the page's cookie");
    free(ck);
    char *live = t_host(&code, "curl -s --max-time 10 '%slive.json?%s'", url, tok);
    cJSON *lj = cJSON_Parse(live);
    cr_assert(lj, "live.json: %s", live);
    const cJSON *eps = cJSON_GetObjectItem(cJSON_GetObjectItem(lj, "status"), "episodes");
    cr_expect_eq(cJSON_GetArraySize(eps), 1, "%s", live);
    cr_expect_str_eq(str(cJSON_GetArrayItem(eps, 0), "key"), "pause");
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(eps, 0), "paused")));
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(lj, "rows")), 4);
    cJSON_Delete(lj);
    free(live);
    char *page = t_host(&code, "curl -s --max-time 10 '%s?%s'", url, tok);
    cr_expect(strstr(page, "\"live\":true") && strstr(page, "'self'"), "the page: %.300s", page);
    free(page);
    char *o = t_host(&code, "curl -s -o /dev/null -w '%%{http_code}' -H 'Host: evil.test' '%s?%s'",
                     url, tok);
    cr_expect_str_eq(o, "403", "another Host is refused (DNS rebinding)");
    free(o);
    o = t_host(&code, "curl -s -o /dev/null -w '%%{http_code}' -X POST -d x %slive.json", url);
    cr_expect_str_eq(o, "405", "the live view is read-only");
    free(o);
    free(url);
    free(tok);
    /* resume it: it finishes */
    char *rs = ctl(&code, rdir, "resume pause nosuch");
    cr_expect_eq(code, 0, "%s", rs);
    cr_expect(strstr(rs, "resume pause") && strstr(rs, "not running: nosuch"), "%s", rs);
    free(rs);
    int status = 0;
    waitpid(pid, &status, 0);
    t_fake_stop(&f);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "lis batch: %s",
              t_host(NULL, "cat %s", log));
    cr_expect_neq(access(sock, F_OK), 0, "ctl.sock outlived the run");
    cr_expect_neq(access(lurl, F_OK), 0, "live.url outlived the run");

    cJSON *rows2 = t_results_rows(rdir);
    cr_assert_eq(cJSON_GetArraySize(rows2), 5);
    /* flag: recorded, nothing more */
    const cJSON *r = row_of(rows2, "flag");
    cr_expect_str_eq(str(r, "reason"), "submitted");
    cr_expect_eq(num(r, "alerts"), 1);
    const cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "alert_list"), 0);
    cr_expect_str_eq(str(a, "rule"), "flag-etc");
    cr_expect_str_eq(str(a, "action"), "flag");
    cr_expect_eq(num(a, "step"), 1);
    cr_expect(strstr(str(a, "what"), "/etc/flagged"), "%s", str(a, "what"));
    /* deny of an exec: the program never ran, the model saw the failure */
    cJSON *traj = read_json("%s/trajectories/%s.json", rdir, "deny");
    const cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItem(traj, "steps"), 0);
    cr_expect(strstr(str(st, "observation"), "rc=126") ||
                  strstr(str(st, "observation"), "Operation not permitted"),
              "the denied exec did not fail: %s", str(st, "observation"));
    const cJSON *fx = step_fx(traj, 0);
    const cJSON *p = proc_argv(fx, "/mprobe exit 0 DENYME");
    cr_assert(p, "the denied exec is not listed");
    cr_expect_str_eq(str(p, "state"), "denied");
    cr_expect_str_eq(str(p, "denied_by"), "deny-exec");
    cr_expect(alert_of(fx, "deny-exec"));
    cr_expect_str_eq(str(row_of(rows2, "deny"), "reason"), "submitted");
    cJSON_Delete(traj);
    /* deny of a connection: refused by the proxy (403), named */
    traj = read_json("%s/trajectories/%s.json", rdir, "conn");
    fx = step_fx(traj, 0);
    const cJSON *q =
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(fx, "network"), "requests"), 0);
    cr_expect_str_eq(str(q, "host"), "www.blocked.test");
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(q, "allowed")));
    cr_expect(alert_of(fx, "deny-host"), "%s", cJSON_PrintUnformatted(fx));
    cJSON_Delete(traj);
    /* pause: resumed, it finished, its alert in its step */
    r = row_of(rows2, "pause");
    cr_expect_str_eq(str(r, "reason"), "submitted");
    cr_expect_geq(num(r, "alerts"), 1);
    traj = read_json("%s/trajectories/%s.json", rdir, "pause");
    cr_expect(alert_of(step_fx(traj, 0), "pause-me"));
    cJSON_Delete(traj);
    /* stop: the episode ended with reason policy and the rule */
    r = row_of(rows2, "stop");
    cr_expect_str_eq(str(r, "reason"), "policy");
    cr_expect_str_eq(str(r, "stop_rule"), "stop-me");
    cr_expect(strstr(str(r, "error"), "stop-me"), "%s", str(r, "error"));
    cr_expect_eq(num(r, "steps"), 1, "the stop ended the episode after its step");
    traj = read_json("%s/trajectories/%s.json", rdir, "stop");
    cr_expect(alert_of(step_fx(traj, 0), "stop-me"));
    cr_expect_str_eq(str(cJSON_GetObjectItem(traj, "metadata"), "stop_reason"), "policy");
    cJSON_Delete(traj);
    /* the report: every firing (the index names the stop; each episode its alerts) */
    char *html = t_host(NULL, "cat %s/report.html", rdir);
    cr_expect(strstr(html, "stop-me"), "the report's index lacks the stop rule");
    free(html);
    const char *rules[] = {"flag-etc", "deny-exec", "deny-host", "pause-me", "stop-me"};
    for (int i = 0; i < 5; i++) {
        char *hit = t_host(&code, "grep -l -- '\"rule\":\"%s\"' %s/report/ep-*.js", rules[i], rdir);
        cr_expect_eq(code, 0, "no episode of the report shows the alert %s", rules[i]);
        free(hit);
    }
    cJSON_Delete(rows2);
    /* after the run: nobody answers, and it says how the run ended */
    o = ctl(&code, rdir, "status");
    cr_expect_neq(code, 0, "%s", o);
    cr_expect(strstr(o, "no lis batch runs on") && strstr(o, "it has ended: complete"), "%s", o);
    free(o);
}

/* effects off with --no-effects; lis run's effects (on by default) and its
 * policy's stop rule; the flags' errors. */
Test(batch_effects, no_effects_lis_run_and_bad_flags, .timeout = 180)
{
    const char *root = probe_rootfs();
    char *d = dir_for("flags"), tasks[600], pol[600], bad[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    FILE *tf = fopen(tasks, "w");
    fputs("{\"id\":\"n\",\"problem_statement\":\"NOFX go\",\"ground_truth\":\"a\"}\n", tf);
    fclose(tf);
    cJSON *s = cJSON_CreateObject(), *rows = cJSON_AddObjectToObject(s, "rows");
    cJSON *x = cJSON_AddArrayToObject(rows, "NOFX");
    cJSON_AddItemToArray(x, bash("echo a > /testbed/output/answer.txt"));
    cJSON_AddItemToArray(x, submit());
    x = cJSON_AddArrayToObject(rows, "RUNSTOP");
    cJSON_AddItemToArray(x, bash("echo one > /testbed/one.txt"));
    cJSON_AddItemToArray(x, bash("/mprobe exit 0 STOPME"));
    cJSON_AddItemToArray(x, bash("echo never > /testbed/never.txt"));
    t_fake f;
    fake_start(&f, s);
    int code = 0;
    char *out = t_lis(&code,
                      LIS_BATCH_BASE "--net none --no-effects --tasks %s --scorer builtin:match "
                                     "--output-dir %s/out",
                      f.url, root, tasks, d);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    char rdir[1024];
    t_run_dir(d, rdir, sizeof rdir);
    cJSON *traj = read_json("%s/trajectories/%s.json", rdir, "n");
    const cJSON *st;
    cJSON_ArrayForEach(st, cJSON_GetObjectItem(traj, "steps"))
        cr_expect(!cJSON_GetObjectItem(st, "effects"), "effects recorded with --no-effects");
    cJSON_Delete(traj);
    cJSON *rr = t_results_rows(rdir);
    cr_expect(!cJSON_GetObjectItem(row_of(rr, "n"), "capability"));
    cJSON_Delete(rr);

    /* lis run: effects in trajectory.json, a stop rule ends it (exit 1, reason policy) */
    snprintf(pol, sizeof pol, "%s/policy.yaml", d);
    FILE *pf = fopen(pol, "w");
    fputs("rules:\n  - name: stop-me\n    on: exec\n    argv: \"*STOPME*\"\n    action: stop\n",
          pf);
    fclose(pf);
    out = t_lis(&code,
                "run --query 'RUNSTOP go' --llm-name fake --llm-base-url %s --api-key k --rootfs "
                "%s --net none --policy %s --output-dir %s/run",
                f.url, root, pol, d);
    cr_expect_eq(code, 1, "%s", out);
    cr_expect(strstr(out, "policy rule stop-me"), "%s", out);
    free(out);
    char *tp = t_host(NULL, "ls %s/run/*/trajectory.json | head -1 | tr -d '\\n'", d);
    traj = read_json("%s%s", tp, "");
    free(tp);
    const cJSON *md = cJSON_GetObjectItem(traj, "metadata");
    cr_expect_str_eq(str(md, "stop_reason"), "policy");
    cr_expect_str_eq(str(md, "stop_rule"), "stop-me");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(traj, "steps")), 2);
    expect_changes(step_fx(traj, 0), "created /testbed/one.txt", "lis run step 1");
    cr_expect(alert_of(step_fx(traj, 1), "stop-me"));
    cJSON_Delete(traj);
    t_fake_stop(&f);

    /* a bad policy, and flags that do not go together: one line, exit 2 */
    snprintf(bad, sizeof bad, "%s/bad.yaml", d);
    pf = fopen(bad, "w");
    fputs("rules:\n  - name: x\n    on: exec\n    argv: y\n    action: explode\n", pf);
    fclose(pf);
    char f0[800], f1[800];
    snprintf(f0, sizeof f0, "--net none --policy %s", bad);
    snprintf(f1, sizeof f1, "--net none --policy %s --no-effects", pol);
    const char *cases[][2] = {
        {f0, "bad.yaml:5:"},
        {f1, "--no-effects"},
        {"--net none --allow-domain example.com", "--net proxy"},
        {"--net host --deny-domain x", "--net proxy"},
        {"--net none --live 10.0.0.1:80", "127.0.0.1 only"},
        {"--net none --effects --no-effects", "contradict"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        out =
            t_lis(&code, LIS_BATCH_BASE "--tasks %s --scorer builtin:match --output-dir %s/out2 %s",
                  "http://127.0.0.1:9/v1", root, tasks, d, cases[i][0]);
        cr_expect_eq(code, 2, "%s: exit %d: %s", cases[i][0], code, out);
        cr_expect(strstr(out, cases[i][1]), "%s: %s", cases[i][0], out);
        cr_expect(!strchr(out, '\n') || strchr(out, '\n') == out + strlen(out) - 1,
                  "%s: not one line: %s", cases[i][0], out);
        free(out);
    }
    out = t_lis(&code,
                "run --query q --llm-name fake --llm-base-url http://127.0.0.1:9/v1 --api-key k "
                "--rootfs %s --policy %s",
                root, bad);
    cr_expect_eq(code, 2, "%s", out);
    cr_expect(strstr(out, "bad.yaml:5:"), "%s", out);
    free(out);
    out = t_lis(&code, "batch ctl %s status", d);
    cr_expect_neq(code, 0);
    cr_expect(strstr(out, "is not a lis batch run's directory"), "%s", out);
    free(out);
    out = t_lis(&code, "batch ctl %s explode", d);
    cr_expect_eq(code, 2, "%s", out);
    free(out);
}
