/* test_score.c - scoring as the original scores (batch/score*.c): the
 * built-in scorers on tables of the original's own results, the resident
 * Python worker on a task folder in the original's layout, --scorer CMD,
 * and the LLM judge against tests/fake_llm.py. */
#include "score.h"
#include "score_worker.h"
#include "testlib.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *slurp(const char *path)
{
    lis_error err = {0};
    size_t len;
    char *s = agent_read_host_file(path, &len, &err);
    cr_assert(s, "%s", err.msg);
    return s;
}

static cJSON *data_json(const char *rel)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/score-data/%s", t_src_dir(), rel);
    char *s = slurp(p);
    cJSON *j = cJSON_Parse(s);
    free(s);
    cr_assert(j, "%s is not JSON", p);
    return j;
}

static const char *task_dir(const char *name)
{
    static char p[4096];
    snprintf(p, sizeof p, "%s/score-data/%s", t_src_dir(), name);
    return p;
}

/* the system python first: a pyenv shim in PATH may not be the test user's */
static const char *py(void)
{
    return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : NULL;
}

/* ---- built-in scorers ---------------------------------------------------- */

/* tests/score-data/{match,letter}_cases.json were made once by running the
 * original's demo/reward.py and chem/reward.py (biomed's is the same code)
 * on the inputs listed there (python3, the upstream files read-only); each
 * entry holds the original's compute_score result (and the extracted letter). */
Test(score_builtin, demo_match_equals_the_original)
{
    cJSON *cases = data_json("match_cases.json"), *c;
    int n = 0;
    cJSON_ArrayForEach(c, cases)
    {
        const char *a = cJSON_GetObjectItem(c, "answer")->valuestring;
        const char *g = cJSON_GetObjectItem(c, "ground_truth")->valuestring;
        double want = cJSON_GetObjectItem(c, "score")->valuedouble;
        cr_expect_eq(score_match(a, g), want, "match(%s, %s): want %g", a, g, want);
        n++;
    }
    cr_assert_geq(n, 10);
    cJSON_Delete(cases);
}

Test(score_builtin, letter_cascade_equals_the_original)
{
    cJSON *cases = data_json("letter_cases.json"), *c;
    int n = 0;
    cJSON_ArrayForEach(c, cases)
    {
        const char *a = cJSON_GetObjectItem(c, "answer")->valuestring;
        const char *g = cJSON_GetObjectItem(c, "ground_truth")->valuestring;
        const char *want_letter = cJSON_GetObjectItem(c, "letter")->valuestring;
        double want = cJSON_GetObjectItem(c, "score")->valuedouble;
        char got[8];
        score_letter_extract(a, got);
        cr_expect_str_eq(got, want_letter, "letter of [%s]: got [%s], want [%s]", a, got,
                         want_letter);
        cr_expect_eq(score_letter(a, g), want, "letter(%s, %s): want %g", a, g, want);
        n++;
    }
    cr_assert_geq(n, 50);
    cJSON_Delete(cases);
}

Test(score_builtin, extract_boxed_as_the_original)
{
    struct {
        const char *in, *out;
    } t[] = {
        {"x \\boxed{5} y", "5"},
        {"\\boxed{1} then \\boxed{ \\frac{1}{2} }", "\\frac{1}{2}"},
        {"\\boxed{a{b}c}", "a{b}c"},
        {"  no box  ", "no box"},
        {"\\boxed{open", "\\boxed{open"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        char *s = score_extract_boxed(t[i].in);
        cr_expect_str_eq(s, t[i].out, "[%s]", t[i].in);
        free(s);
    }
}

/* Expected scores derived by reading the original's math/reward.py and
 * math-verify (gold = \boxed{gt}, prediction = \boxed{last boxed of the
 * answer}; normalize_latex; sympy equality: exact for integers and
 * fractions, rounded to 6 decimals when either is a decimal number). */
Test(score_builtin, math_numbers_as_math_verify)
{
    struct {
        const char *gt, *answer;
        double want;
    } t[] = {
        {"5", "\\boxed{5}", 1},
        {"5", "So the answer is $\\boxed{5}$.", 1},
        {"5", "\\boxed{6}", 0},
        {"5", "5", 1}, /* no \boxed: the whole answer */
        {"5", "", 0},
        {"5", "\\boxed{5.0}", 1}, /* a decimal: rounded to 6 places */
        {"-3", "\\boxed{-3}", 1},
        {"-3", "\\boxed{3}", 0},
        {"\\frac{1}{2}", "\\boxed{0.5}", 1},
        {"\\frac{1}{2}", "\\boxed{\\dfrac{1}{2}}", 1},
        {"\\frac{1}{2}", "\\boxed{\\tfrac12}", 1},
        {"\\frac{1}{2}", "\\boxed{1/2}", 1},
        {"\\frac{1}{2}", "\\boxed{2/4}", 1}, /* same rational */
        {"\\frac{-1}{2}", "\\boxed{-\\frac{1}{2}}", 1},
        {"\\frac{1}{3}", "\\boxed{0.333333}", 1},
        {"\\frac{1}{3}", "\\boxed{0.3333}", 0},
        {"\\frac{2}{3}", "\\boxed{0.666667}", 1},
        {"1.5", "\\boxed{\\frac{3}{2}}", 1},
        {"\\frac{1}{3}", "\\boxed{\\frac{333333}{1000000}}", 0}, /* both exact: no rounding */
        {"3", "\\boxed{3.0000001}", 1}, /* a decimal: 3.000000 after rounding */
        {"3.14", "\\boxed{3.14159}", 0},
        {"2", "\\boxed{\\frac{4}{2}}", 1},
        {"300000", "\\boxed{3\\times10^{5}}", 1},
        {"1000", "\\boxed{10^{3}}", 1},
        {"5", "\\boxed{x = 5}", 1},         /* an equation: its right-hand side */
        {"x=5", "\\boxed{5}", 1},           /* an assignment as gold */
        {"5", "\\boxed{5 \\text{ cm}}", 1}, /* a trailing \text{} is a unit */
        {"12", "\\boxed{12\\text{ apples}}", 1},
        {"5", "\\boxed{\\$5}", 1},
        {"10", "\\boxed{\\left( 10 \\right)}", 1},
        {"\\sqrt{2}", "\\boxed{\\sqrt2}", 1},
        {"\\frac{\\sqrt{3}}{2}", "\\boxed{\\dfrac{\\sqrt{3}}{2}}", 1},
        {"(3,4)", "\\boxed{\\left(3, 4\\right)}", 1},
        {"7", "\\boxed{7} and later \\boxed{8}", 0}, /* the last one counts */
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        cr_expect_eq(score_math(t[i].answer, t[i].gt), t[i].want, "math(%s | gt %s): want %g",
                     t[i].answer, t[i].gt, t[i].want);
}

/* What lis's math scorer does where it is not math-verify (docs/batch-scoring.md):
 * no symbolic algebra, so these are compared as normalised text. */
Test(score_builtin, math_limits_are_as_documented)
{
    cr_expect_eq(score_math("\\boxed{x+1}", "x+1"), 1.0);
    cr_expect_eq(score_math("\\boxed{1+x}", "x+1"), 0.0); /* math-verify: 1 */
    cr_expect_eq(score_math("\\boxed{50\\%}", "\\frac{1}{2}"), 1.0);
    cr_expect_eq(score_math("\\boxed{1,000}", "1000"), 1.0);
    cr_expect_eq(score_math("\\boxed{12,345,678}", "12345678"), 1.0);
    cr_expect_eq(score_math("\\boxed{1,00}", "100"), 0.0); /* not thousands: text */
    char *n = score_math_normalize("\\left( \\dfrac{1}{2} \\right)\\!");
    cr_expect_str_eq(n, "(\\frac{1}{2})");
    free(n);
}

/* ---- selection ----------------------------------------------------------- */

static char *open_name(const char *task, const char *dir, const char *scorer,
                       const llm_config *judge, char *logline, size_t ll, lis_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *log = open_memstream(&buf, &len);
    batch_scorer_opts o = {.task_name = task,
                           .task_dir = dir,
                           .scorer = scorer,
                           .python = py(),
                           .judge = judge,
                           .log = log};
    batch_scorer *s = NULL;
    int rc = batch_scorer_open(&o, &s, err);
    fclose(log);
    snprintf(logline, ll, "%s", buf ? buf : "");
    free(buf);
    char *name = rc ? NULL : agent_strdup(batch_scorer_name(s));
    batch_scorer_close(s);
    return name;
}

Test(score_select, which_scorer_when)
{
    lis_error err = {0};
    char log[1024];
    llm_config judge = {.model = "judge-m", .base_url = "http://127.0.0.1:9/v1"};
    struct {
        const char *task, *dir, *scorer;
        const llm_config *judge;
        const char *want;
    } t[] = {
        {"kwtask", task_dir("kwtask"), NULL, NULL, "python:reward.py"},
        {"kwtask", task_dir("kwtask"), "builtin:demo", NULL, "builtin:match"},
        {"kwtask", task_dir("kwtask"), "builtin:chem", NULL, "builtin:letter"},
        {"demo", task_dir("kwtask"), "python", NULL, "python:reward.py"},
        /* a folder's name never picks a scorer: its reward.py runs */
        {"demo", task_dir("kwtask"), NULL, NULL, "python:reward.py"},
        {"math", task_dir("kwtask"), "auto", NULL, "python:reward.py"},
        {"physics", task_dir("physics"), NULL, &judge, "judge:judge-m"},
        {"physics", task_dir("physics"), NULL, NULL, "python:reward.py"},
        {"x", NULL, "./my-scorer --strict", NULL, "cmd:./my-scorer --strict"},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        char *name = open_name(t[i].task, t[i].dir, t[i].scorer, t[i].judge, log, sizeof log, &err);
        cr_assert(name, "%s: %s", t[i].task, err.msg);
        cr_expect_str_eq(name, t[i].want, "task %s scorer %s", t[i].task, t[i].scorer);
        cr_expect(strstr(log, t[i].want) && strchr(log, '\n') == strrchr(log, '\n'),
                  "one log line naming the scorer: [%s]", log);
        if (strcmp(t[i].task, "physics") == 0 && !t[i].judge)
            cr_expect(strstr(log, "judge"), "a note about the placeholder: [%s]", log);
        free(name);
    }
}

Test(score_select, bad_choices_are_one_line_errors)
{
    lis_error err = {0};
    char log[256];
    cr_expect_null(open_name("demo", NULL, "builtin:nope", NULL, log, sizeof log, &err));
    cr_expect(strstr(err.msg, "builtin:nope") && strstr(err.msg, "builtin:math"), "%s", err.msg);
    cr_expect_null(open_name("demo", NULL, "python", NULL, log, sizeof log, &err));
    cr_expect(strstr(err.msg, "no reward.py"), "%s", err.msg);
    cr_expect_null(open_name("other", task_dir("physics/none"), NULL, NULL, log, sizeof log, &err));
    cr_expect(strstr(err.msg, "no scorer"), "%s", err.msg);
    /* no reward.py in a folder named demo: no guess either; the hint names the built-in */
    cr_expect_null(open_name("demo", NULL, NULL, NULL, log, sizeof log, &err));
    cr_expect(strstr(err.msg, "no scorer for task demo") &&
                  strstr(err.msg, "--scorer builtin:match"),
              "%s", err.msg);
    cr_expect_null(strchr(err.msg, '\n'));
}

/* A task folder named NAME under a fresh directory, its reward.py TEXT. */
static const char *make_task(const char *name, const char *text)
{
    static char dir[512];
    lis_ctx_free(t_ctx());
    snprintf(dir, sizeof dir, "%s/%s", t_tmpdir(), name);
    mkdir(dir, 0755);
    char p[600];
    snprintf(p, sizeof p, "%s/reward.py", dir);
    FILE *f = fopen(p, "w");
    cr_assert(f, "%s", p);
    fputs(text, f);
    fclose(f);
    return dir;
}

/* issue 20: the built-in stands in for a task's reward.py only when the file
 * is one of the original's, byte for byte (its sha256 in score.c's table;
 * here a table of this test's own file, so no upstream text is copied): the
 * same file gives the built-in, a one-byte edit gives the file itself, and
 * both record the sha256 of the file that defined the score. */
Test(score_select, builtin_only_for_the_originals_own_reward_py)
{
    const char *orig = "def compute_score(agent_answer, ground_truth, **kwargs):\n"
                       "    return 1.0 if agent_answer.strip().lower() == "
                       "ground_truth.strip().lower() else 0.0\n";
    const char *dir = make_task("demo", orig);
    char p[600], sha[65];
    snprintf(p, sizeof p, "%s/reward.py", dir);
    lis_error err = {0};
    cr_assert_eq(batch_sha256_file(p, sha, &err), 0, "%s", err.msg);
    /* the sha256 of a known text, as sha256sum prints it */
    char abc[65];
    batch_sha256_text("abc", 3, abc);
    cr_expect_str_eq(abc, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    batch_original table[] = {{"demo", "match", sha}};
    batch_scorer_opts o = {.task_name = "demo",
                           .task_dir = dir,
                           .python = py(),
                           .originals = table,
                           .noriginals = 1};
    batch_scorer *s = NULL;
    cr_assert_eq(batch_scorer_open(&o, &s, &err), 0, "%s", err.msg);
    cr_expect_str_eq(batch_scorer_name(s), "builtin:match");
    cr_expect_str_eq(batch_scorer_sha256(s), sha);
    cr_expect(strstr(batch_scorer_source(s), "reward.py"), "%s", batch_scorer_source(s));
    batch_scorer_close(s);
    /* edited to give half marks: the task's file is the scorer, and scores 0.5 */
    dir = make_task("demo", "def compute_score(agent_answer, ground_truth, **kwargs):\n"
                            "    return 0.5\n");
    cr_assert_eq(batch_scorer_open(&o, &s, &err), 0, "%s", err.msg);
    cr_expect_str_eq(batch_scorer_name(s), "python:reward.py");
    cr_expect_str_neq(batch_scorer_sha256(s), sha);
    cr_expect_eq(strlen(batch_scorer_sha256(s)), 64);
    cJSON *row = cJSON_Parse("{\"id\":1,\"ground_truth\":\"x\"}");
    double x = -1;
    cr_assert_eq(batch_scorer_score(s, "x", row, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 0.5);
    cJSON_Delete(row);
    batch_scorer_close(s);
    /* the real table knows the original's four rule-based files, and nothing else */
    o.originals = NULL;
    o.noriginals = 0;
    dir = make_task("demo", orig);
    cr_assert_eq(batch_scorer_open(&o, &s, &err), 0, "%s", err.msg);
    cr_expect_str_eq(batch_scorer_name(s), "python:reward.py");
    batch_scorer_close(s);
}

/* An edited math/reward.py that cannot be imported (math-verify missing, as
 * the original's raises it): one line naming the import, and the built-in. */
Test(score_select, failed_import_names_the_module_and_the_builtin)
{
    const char *dir =
        make_task("math", "try:\n"
                          "    from lis_test_no_such_module.metric import math_metric\n"
                          "except ImportError:\n"
                          "    raise ImportError('math-verify is required. Install with: pip "
                          "install math-verify')\n"
                          "def compute_score(agent_answer, ground_truth, **kwargs):\n"
                          "    return 1.0\n");
    lis_error err = {0};
    batch_scorer_opts o = {.task_name = "math", .task_dir = dir, .python = py()};
    batch_scorer *s = NULL;
    cr_assert_eq(batch_scorer_open(&o, &s, &err), -1);
    cr_expect(strstr(err.msg, "No module named 'lis_test_no_such_module'"), "%s", err.msg);
    cr_expect(strstr(err.msg, "math-verify is required"), "%s", err.msg);
    cr_expect(strstr(err.msg, "--scorer builtin:math"), "%s", err.msg);
    cr_expect_null(strchr(err.msg, '\n'));
    /* and accepting the built-in works, recorded as such */
    o.scorer = "builtin:math";
    cr_assert_eq(batch_scorer_open(&o, &s, &err), 0, "%s", err.msg);
    cr_expect_str_eq(batch_scorer_name(s), "builtin:math");
    cr_expect_str_eq(batch_scorer_sha256(s),
                     "b1b89399b68268c6d6025f062190a079a481647f438fbfab10f2fb4e0ccf3af9");
    batch_scorer_close(s);
}

Test(score_select, builtin_reads_a_number_ground_truth_as_python_str)
{
    lis_error err = {0};
    batch_scorer_opts o = {.task_name = "demo", .scorer = "builtin:demo"};
    batch_scorer *s;
    cr_assert_eq(batch_scorer_open(&o, &s, &err), 0, "%s", err.msg);
    cJSON *row = cJSON_Parse("{\"id\":1,\"ground_truth\":\"Paris\"}");
    double x = -1;
    cr_assert_eq(batch_scorer_score(s, " paris ", row, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 1.0);
    /* a number as Python's str() prints it: 5 -> "5", 0.25 -> "0.25", true -> "True" */
    cJSON_ReplaceItemInObject(row, "ground_truth", cJSON_CreateNumber(5));
    cr_assert_eq(batch_scorer_score(s, "5", row, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 1.0);
    cr_assert_eq(batch_scorer_score(s, "5.0", row, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 0.0);
    cJSON_ReplaceItemInObject(row, "ground_truth", cJSON_CreateNumber(0.25));
    cr_assert_eq(batch_scorer_score(s, "0.25", row, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 1.0);
    cJSON_ReplaceItemInObject(row, "ground_truth", cJSON_CreateTrue());
    cr_assert_eq(batch_scorer_score(s, "true", row, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 1.0);
    /* an object or a list is that row's error */
    cJSON_ReplaceItemInObject(row, "ground_truth", cJSON_CreateArray());
    cr_expect_eq(batch_scorer_score(s, "5", row, &x, &err), -1);
    cr_expect(strstr(err.msg, "ground_truth"), "%s", err.msg);
    /* --mode llm without vanilla_llm_prompt.py: the problem statement */
    cJSON_AddStringToObject(row, "problem_statement", "What?");
    char *p = batch_scorer_prompt(s, row, &err);
    cr_expect_str_eq(p, "What?");
    free(p);
    cJSON_Delete(row);
    batch_scorer_close(s);
}

Test(score_select, prompts_come_from_vanilla_llm_prompt_py_whatever_scores)
{
    lis_error err = {0};
    batch_scorer_opts o = {.task_name = "demo",
                           .task_dir = task_dir("kwtask"),
                           .python = py(),
                           .scorer = "builtin:match"};
    batch_scorer *s;
    cr_assert_eq(batch_scorer_open(&o, &s, &err), 0, "%s", err.msg);
    cr_expect_str_eq(batch_scorer_name(s), "builtin:match");
    cJSON *row = cJSON_Parse(
        "{\"id\":1,\"domain\":\"d\",\"problem_statement\":\"Q\",\"ground_truth\":\"x\"}");
    char *p = batch_scorer_prompt(s, row, &err);
    cr_assert(p, "%s", err.msg);
    cr_expect_str_eq(p, "[d] Q\nPut the answer in \\boxed{}.");
    free(p);
    /* create_prompt raising (no "domain") is that row's error */
    cJSON_DeleteItemFromObject(row, "domain");
    cr_expect_null(batch_scorer_prompt(s, row, &err));
    cr_expect(strstr(err.msg, "KeyError"), "%s", err.msg);
    cJSON_Delete(row);
    batch_scorer_close(s);
}

/* ---- the Python worker --------------------------------------------------- */

static batch_scorer *open_kwtask(void)
{
    lis_error err = {0};
    batch_scorer_opts o = {.task_name = "kwtask", .task_dir = task_dir("kwtask"), .python = py()};
    batch_scorer *s = NULL;
    cr_assert_eq(batch_scorer_open(&o, &s, &err), 0, "%s", err.msg);
    return s;
}

static cJSON *row_of(int i)
{
    cJSON *rows = data_json("kwtask/data.json");
    cJSON *r = cJSON_DetachItemFromArray(rows, i);
    cJSON_Delete(rows);
    return r;
}

Test(score_worker, reward_py_runs_unchanged_with_the_rows_fields)
{
    batch_scorer *s = open_kwtask();
    lis_error err = {0};
    double x = -1;
    cJSON *r0 = row_of(0), *r1 = row_of(1);
    /* domain arith + tolerance 0.5 (kwargs) */
    cr_assert_eq(batch_scorer_score(s, "5.4", r0, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 1.0);
    cr_assert_eq(batch_scorer_score(s, "5.6", r0, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 0.0);
    /* through a helper module next to reward.py; the prints went to stderr */
    cr_assert_eq(batch_scorer_score(s, " PARIS", r1, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 1.0);
    /* resident: module state from the earlier calls is still there */
    cJSON_ReplaceItemInObject(r1, "ground_truth", cJSON_CreateString("calls"));
    cr_assert_eq(batch_scorer_score(s, "", r1, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 4.0, "imported once: 4 calls so far, got %g", x);
    /* create_prompt(row) */
    char *p = batch_scorer_prompt(s, r0, &err);
    cr_assert(p, "%s", err.msg);
    cr_expect_str_eq(p, "[arith] What is 2 + 3?\nPut the answer in \\boxed{}.");
    free(p);
    cJSON_Delete(r0);
    cJSON_Delete(r1);
    batch_scorer_close(s);
}

Test(score_worker, exceptions_and_crashes_fail_only_their_row)
{
    batch_scorer *s = open_kwtask();
    lis_error err = {0};
    double x = -1;
    cJSON *ok = row_of(0), *bad = row_of(2), *crash = row_of(3);
    cr_expect_eq(batch_scorer_score(s, "1", bad, &x, &err), -1);
    cr_expect(strstr(err.msg, "ValueError: cannot score row kw_003"), "%s", err.msg);
    cr_assert_eq(batch_scorer_score(s, "5", ok, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 1.0);
    /* a non-number */
    cJSON *txt = row_of(1);
    cJSON_ReplaceItemInObject(txt, "ground_truth", cJSON_CreateString("text"));
    cr_expect_eq(batch_scorer_score(s, "x", txt, &x, &err), -1);
    cr_expect(strstr(err.msg, "not a number"), "%s", err.msg);
    /* the worker dies: that row fails with its last words, the next row restarts it */
    cr_expect_eq(batch_scorer_score(s, "1", crash, &x, &err), -1);
    cr_expect(strstr(err.msg, "died (exit 3)") && strstr(err.msg, "about to crash hard"), "%s",
              err.msg);
    x = -1;
    cr_assert_eq(batch_scorer_score(s, "5", ok, &x, &err), 0, "after the restart: %s", err.msg);
    cr_expect_eq(x, 1.0);
    cJSON_ReplaceItemInObject(txt, "ground_truth", cJSON_CreateString("calls"));
    cr_assert_eq(batch_scorer_score(s, "", txt, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 2.0, "a fresh worker after the crash: %g", x);
    cJSON_Delete(ok);
    cJSON_Delete(bad);
    cJSON_Delete(crash);
    cJSON_Delete(txt);
    batch_scorer_close(s);
}

typedef struct par {
    batch_scorer *s;
    int bad;
} par;

static void *par_thread(void *arg)
{
    par *p = arg;
    cJSON *r0 = row_of(0), *r1 = row_of(1);
    for (int i = 0; i < 20; i++) {
        lis_error err = {0};
        double x = -1;
        const cJSON *r = i % 2 ? r1 : r0;
        if (batch_scorer_score(p->s, i % 2 ? "paris" : "5", r, &x, &err) || x != 1.0)
            p->bad++;
    }
    cJSON_Delete(r0);
    cJSON_Delete(r1);
    return NULL;
}

Test(score_worker, thread_safe)
{
    par p[4];
    pthread_t th[4];
    batch_scorer *s = open_kwtask();
    for (int i = 0; i < 4; i++) {
        p[i] = (par){s, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, par_thread, &p[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(p[i].bad, 0, "thread %d: %d wrong scores", i, p[i].bad);
    }
    batch_scorer_close(s);
}

Test(score_worker, import_errors_and_missing_python_are_one_line)
{
    lis_error err = {0};
    batch_scorer_opts o = {.task_name = "badimport",
                           .task_dir = task_dir("badimport"),
                           .python = py()};
    batch_scorer *s = NULL;
    cr_expect_eq(batch_scorer_open(&o, &s, &err), -1);
    cr_expect(strstr(err.msg, "ModuleNotFoundError") &&
                  strstr(err.msg, "module_that_does_not_exist"),
              "%s", err.msg);
    o.task_dir = task_dir("kwtask");
    o.python = "/nonexistent/python3";
    cr_expect_eq(batch_scorer_open(&o, &s, &err), -1);
    cr_expect(strstr(err.msg, "reward.py needs python3 on the host: apt-get install python3, or "
                              "--scorer builtin:NAME"),
              "%s", err.msg);
    cr_expect_null(strchr(err.msg, '\n'));
}

Test(score_worker, embedded_script_is_the_source_file)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/../batch/reward_worker.py", t_src_dir());
    if (access(p, R_OK) != 0)
        snprintf(p, sizeof p, "batch/reward_worker.py");
    if (access(p, R_OK) != 0)
        cr_skip_test("batch/reward_worker.py is not next to the tests");
    char *s = slurp(p);
    cr_expect_str_eq(score_worker_script(), s);
    free(s);
}

/* ---- --scorer CMD ---------------------------------------------------------- */

static int cmd_score(const char *mode, const char *answer, double *x, lis_error *err)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "sh '%s/score-data/cmd_scorer.sh' %s", t_src_dir(), mode);
    batch_scorer_opts o = {.task_name = "kwtask", .scorer = cmd};
    batch_scorer *s;
    cr_assert_eq(batch_scorer_open(&o, &s, err), 0, "%s", err->msg);
    cJSON *r = row_of(1);
    int rc = batch_scorer_score(s, answer, r, x, err);
    cJSON_Delete(r);
    batch_scorer_close(s);
    return rc;
}

Test(score_cmd, contract)
{
    lis_error err = {0};
    double x = -1;
    cr_assert_eq(cmd_score("good", "Paris", &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 1.0, "the JSON row reached the command: %g", x);
    cr_assert_eq(cmd_score("good", "Lyon", &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 0.25);
    cr_assert_eq(cmd_score("nostdin", "Paris", &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 0.5);
    cr_expect_eq(cmd_score("bad", "Paris", &x, &err), -1);
    cr_expect(strstr(err.msg, "\"looks good to me\", not a number"), "%s", err.msg);
    cr_expect_eq(cmd_score("fail", "Paris", &x, &err), -1);
    cr_expect(strstr(err.msg, "exit 4") && strstr(err.msg, "scorer exploded"), "%s", err.msg);
    cr_expect_null(strchr(err.msg, '\n'));
}

/* ---- the judge --------------------------------------------------------------- */

Test(score_judge, prompt_and_verdict_as_judge_py)
{
    char *p = score_judge_prompt("Q?", "42", "<think>hmm 41</think>\n 42 ");
    cr_expect_str_eq(
        p,
        "Assess whether the following CANDIDATE ANSWER is CORRECT or INCORRECT.\n"
        "For the CANDIDATE ANSWER to be correct, it must be consistent with the OFFICIAL ANSWER.\n\n"
        "The question, for reference only: Q?\nThe OFFICIAL ANSWER: 42\n"
        "CANDIDATE ANSWER TO ASSESS: 42\n\nReply only with CORRECT or INCORRECT.");
    free(p);
    cr_expect_str_eq(score_judge_verdict("CORRECT"), "CORRECT");
    cr_expect_str_eq(score_judge_verdict("incorrect."), "INCORRECT");
    cr_expect_str_eq(score_judge_verdict("Not INCORRECT, it is correct"), "CORRECT");
    cr_expect_str_eq(score_judge_verdict("correct? no: INCORRECT"), "INCORRECT");
    cr_expect_str_eq(score_judge_verdict("no idea"), "UNKNOWN");
    cr_expect_str_eq(score_judge_verdict(""), "UNKNOWN");
}

static llm_config judge_cfg(const t_fake *f)
{
    llm_config c = {.api = LLM_API_OPENAI,
                    .base_url = f->url,
                    .api_key = "sk-test",
                    .model = "judge-model",
                    .temperature = 0.7,
                    .send_temperature = 1,
                    .max_tokens = 16384,
                    .connect_timeout = 5,
                    .timeout = 20,
                    .max_retries = 2,
                    .backoff_base = 0.01,
                    .backoff_max = 1};
    return c;
}

Test(score_judge, per_row_through_the_llm_client)
{
    t_fake f;
    t_fake_start(
        &f,
        "{\"replies\":[{\"content\":\"CORRECT\"},{\"content\":\"The answer is INCORRECT.\"},"
        "{\"content\":\"hmm, unsure\"},{\"status\":400,\"body\":{\"error\":{\"message\":\"nope\"}}}]}");
    llm_config cfg = judge_cfg(&f);
    batch_scorer_opts o = {.task_name = "physics",
                           .task_dir = task_dir("physics"),
                           .judge = &cfg,
                           .python = py()};
    batch_scorer *s;
    lis_error err = {0};
    cr_assert_eq(batch_scorer_open(&o, &s, &err), 0, "%s", err.msg);
    cr_expect_str_eq(batch_scorer_name(s), "judge:judge-model");
    cJSON *row = cJSON_Parse("{\"id\":\"p1\",\"problem_statement\":\"Speed of light?\","
                             "\"ground_truth\":\"3e8 m/s\"}");
    double x = -1;
    cr_assert_eq(batch_scorer_score(s, "\\boxed{3\\times10^8 m/s}", row, &x, &err), 0, "%s",
                 err.msg);
    cr_expect_eq(x, 1.0);
    cr_assert_eq(batch_scorer_score(s, "1", row, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 0.0);
    x = -1;
    cr_assert_eq(batch_scorer_score(s, "2", row, &x, &err), 0, "%s", err.msg);
    cr_expect_eq(x, 0.0, "garbage is UNKNOWN, scored 0");
    cr_expect_eq(batch_scorer_score(s, "3", row, &x, &err), -1);
    cr_expect(strstr(err.msg, "judge"), "%s", err.msg);
    /* the first request carried the original's prompt, without tools */
    FILE *l = fopen(f.log, "r");
    char *line = NULL;
    size_t cap = 0;
    cr_assert(l && getline(&line, &cap, l) > 0);
    fclose(l);
    cJSON *logged = cJSON_Parse(line);
    free(line);
    cJSON *req = cJSON_GetObjectItem(logged, "body");
    cr_assert(req);
    const char *content = cJSON_GetStringValue(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(req, "messages"), 0),
                            "content"));
    cr_assert(content);
    cr_expect(strstr(content, "The OFFICIAL ANSWER: 3e8 m/s\n") &&
                  strstr(content, "The question, for reference only: Speed of light?"),
              "%s", content);
    cr_expect_null(cJSON_GetObjectItem(req, "tools"));
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(req, "model")), "judge-model");
    cJSON_Delete(logged);
    cJSON_Delete(row);
    batch_scorer_close(s);
    t_fake_stop(&f);
}

Test(score_judge, judge_dir_appends_and_resumes)
{
    t_fake f;
    /* replies are consumed in request order; the verdicts are checked as a multiset */
    t_fake_start(&f, "{\"replies\":[{\"content\":\"CORRECT\"},{\"content\":\"INCORRECT\"},"
                     "{\"content\":\"garbage\"}]}");
    llm_config cfg = judge_cfg(&f);
    char dir[300], p[400];
    snprintf(dir, sizeof dir, "%s/run", f.dir);
    cr_assert_eq(mkdir(dir, 0755), 0);
    snprintf(p, sizeof p, "%s/results.jsonl", dir);
    t_write_file(
        p,
        "{\"id\":\"a\",\"attempt\":0,\"answer\":\"1\",\"ground_truth\":\"1\",\"problem_statement\":\"q\"}\n"
        "{\"id\":\"b\",\"attempt\":0,\"answer\":\"2\",\"ground_truth\":\"1\",\"problem_statement\":\"q\"}\n"
        "{\"id\":\"b\",\"attempt\":1,\"answer\":\"x\",\"ground_truth\":\"1\",\"problem_statement\":\"q\"}\n"
        "{\"id\":7,\"attempt\":0,\"answer\":\"3\",\"ground_truth\":[1,2],\"problem_statement\":\"q\"}\n"
        "{\"id\":\"torn\",\"att");
    snprintf(p, sizeof p, "%s/judge.jsonl", dir);
    t_write_file(
        p, "{\"id\":\"a\",\"attempt\":0,\"score\":1,\"verdict\":\"CORRECT\"}\n{\"id\":\"b\",\"att");
    lis_error err = {0};
    cr_assert_eq(batch_judge_dir(dir, &cfg, 2, NULL, &err), 0, "%s", err.msg);
    cr_expect_eq(t_fake_count(&f), 3, "a was judged already: 3 requests");
    cJSON *lines = cJSON_CreateArray();
    char *text = slurp(p), *save = NULL;
    int verdicts[3] = {0};
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        if (!j)
            continue;
        const char *v = cJSON_GetObjectItem(j, "verdict")->valuestring;
        double sc = cJSON_GetObjectItem(j, "score")->valuedouble;
        verdicts[0] += strcmp(v, "CORRECT") == 0 && sc == 1.0;
        verdicts[1] += strcmp(v, "INCORRECT") == 0 && sc == 0.0;
        verdicts[2] += strcmp(v, "UNKNOWN") == 0 && sc == 0.0;
        cJSON_AddItemToArray(lines, j);
    }
    free(text);
    cr_expect_eq(cJSON_GetArraySize(lines), 4, "the old line plus 3 new ones");
    cr_expect_eq(verdicts[0], 2);
    cr_expect_eq(verdicts[1], 1);
    cr_expect_eq(verdicts[2], 1);
    cJSON_Delete(lines);
    /* again: nothing left to judge, no request */
    cr_assert_eq(batch_judge_dir(dir, &cfg, 2, NULL, &err), 0, "%s", err.msg);
    cr_expect_eq(t_fake_count(&f), 3);
    t_fake_stop(&f);
}

Test(score_judge, judge_dir_failures_are_retried_later)
{
    t_fake f;
    t_fake_start(&f, "{\"replies\":[{\"status\":400,\"body\":{\"error\":{\"message\":\"bad\"}}},"
                     "{\"content\":\"CORRECT\"}]}");
    llm_config cfg = judge_cfg(&f);
    char dir[300], p[400];
    snprintf(dir, sizeof dir, "%s/run", f.dir);
    cr_assert_eq(mkdir(dir, 0755), 0);
    snprintf(p, sizeof p, "%s/results.jsonl", dir);
    t_write_file(p, "{\"id\":\"a\",\"attempt\":0,\"answer\":\"1\",\"ground_truth\":\"1\"}\n");
    lis_error err = {0};
    cr_expect_eq(batch_judge_dir(dir, &cfg, 1, NULL, &err), -1);
    cr_expect(strstr(err.msg, "1 of 1 episodes could not be judged"), "%s", err.msg);
    cr_assert_eq(batch_judge_dir(dir, &cfg, 1, NULL, &err), 0, "%s", err.msg);
    snprintf(p, sizeof p, "%s/judge.jsonl", dir);
    char *text = slurp(p);
    cr_expect(strstr(text, "\"verdict\":\"CORRECT\""), "%s", text);
    free(text);
    snprintf(p, sizeof p, "%s/nope", f.dir);
    cr_expect_eq(batch_judge_dir(p, &cfg, 1, NULL, &err), -1);
    cr_expect(strstr(err.msg, "results.jsonl"), "%s", err.msg);
    t_fake_stop(&f);
}
