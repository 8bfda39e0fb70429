/* score.c - which scorer a task gets, and the one entry point the batch
 * engine calls per row (batch_scorer_score), whatever the scorer is.
 *
 * Choice (batch_scorer_open; the rule is documented in docs/batch-scoring.md):
 *   --scorer builtin:NAME   a built-in (match|letter|math; demo|chem|biomed)
 *   --scorer python         the task's reward.py through the worker
 *   --scorer CMD            anything else is a shell command
 *   auto: a judge when the task has judge.py and --judge-model is set;
 *         else the built-in when reward.py is byte for byte one of
 *         ORIGINALS (sha256, below); else reward.py through the worker;
 *         else an error. A scorer is never chosen by the folder's name
 *         (original: its demo folder is the template for custom tasks, and
 *         copies keep the name).
 * Every scorer has a sha256 of what defines it, recorded with each score. */
#include "score.h"
#include "score_judge.h"
#include "score_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum skind { SK_BUILTIN, SK_PYTHON, SK_CMD, SK_JUDGE } skind;

struct batch_scorer {
    skind kind;
    double (*builtin)(const char *, const char *);
    char name[300];
    char sha256[65]; /* of the file (or command text) that defines the scorer */
    char source[600];
    char *cmd;
    score_worker *worker; /* also for prompts, when the task has vanilla_llm_prompt.py */
    int prompt_py;        /* it has: the worker is started on the first prompt */
    char *python, *task_dir;
    double timeout;       /* batch_scorer_opts.timeout (0: each kind's default) */
    char prompt_err[400]; /* that start failed: every prompt fails with this */
    llm_config judge;
    char *judge_model, *judge_url, *judge_key;
    pthread_mutex_t mu; /* the idle judge clients */
    llm_client **idle;
    size_t nidle, capidle;
};

static const struct {
    const char *name, *alias;
    double (*fn)(const char *, const char *);
} builtins[] = {
    {"match", "demo", score_match},
    {"letter", "chem", score_letter},
    {"letter", "biomed", score_letter},
    {"math", "math", score_math},
};

/* original: the rule-based tasks' reward.py of llm-in-sandbox 0.2.0
 * (llm_in_sandbox/benchmark/<task>/reward.py at the v0.2.0 tag, commit
 * bf93b89; none changed since it was added). The built-ins are C versions of
 * exactly these files (docs/batch-scoring.md, tests/score-data), so a
 * built-in replaces a task's reward.py only when the file is one of them,
 * byte for byte: an edited copy runs as written. chem's and biomed's differ
 * only in their docstring. */
static const batch_original ORIGINALS[] = {
    {"demo", "match", "ad469b87b7723faba5d07d831ba373c89ac9900c7be42bfe262fdab58191321e"},
    {"chem", "letter", "63ea80ed38a21e9fa0aa3477e0e68e8c6bd60e6cf7bc3b5f5659473be0efeb23"},
    {"biomed", "letter", "242dd6f66cc0dc46e7fa13831784f968d1863b69259c3b84d9036539061b263f"},
    {"math", "math", "b1b89399b68268c6d6025f062190a079a481647f438fbfab10f2fb4e0ccf3af9"},
};

static int find_builtin(const char *n)
{
    for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
        if (strcmp(n, builtins[i].name) == 0 || strcmp(n, builtins[i].alias) == 0)
            return (int)i;
    return -1;
}

static int has_file(const char *dir, const char *f)
{
    if (!dir)
        return 0;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, f);
    return access(p, R_OK) == 0;
}

static void hex(const unsigned char *d, unsigned n, char out[65])
{
    for (unsigned i = 0; i < n && i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

void batch_sha256_text(const char *text, size_t len, char out[65])
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    out[0] = 0;
    if (EVP_Digest(text, len, d, &n, EVP_sha256(), NULL) == 1)
        hex(d, n, out);
}

#define SCORER_FILE_MAX (16u << 20) /* a reward.py larger than this is refused */

int batch_sha256_file(const char *path, char out[65], lis_error *err)
{
    out[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lis_fail_errno(err, "cannot read %s", path);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int rc = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 ? 0 : lis_oom(err);
    char buf[65536];
    size_t total = 0;
    ssize_t n;
    while (rc == 0 && (n = read(fd, buf, sizeof buf)) > 0) {
        total += (size_t)n;
        if (total > SCORER_FILE_MAX)
            rc = lis_fail(err, EFBIG, "%s is larger than %u MiB", path, SCORER_FILE_MAX >> 20);
        else
            EVP_DigestUpdate(md, buf, (size_t)n);
    }
    if (rc == 0 && n < 0)
        rc = lis_fail_errno(err, "cannot read %s", path);
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    if (rc == 0 && EVP_DigestFinal_ex(md, d, &dl) == 1)
        hex(d, dl, out);
    EVP_MD_CTX_free(md);
    close(fd);
    return rc;
}

/* The entry of ORIGINALS a reward.py is, by its hash; NULL when none. */
static const batch_original *original_of(const batch_scorer_opts *o, const char *sha)
{
    const batch_original *t = o->originals ? o->originals : ORIGINALS;
    size_t n = o->originals ? o->noriginals : sizeof ORIGINALS / sizeof *ORIGINALS;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].sha256, sha))
            return &t[i];
    return NULL;
}

/* The entry of ORIGINALS a built-in stands for, by task name first (chem or biomed). */
static const batch_original *original_for_builtin(const batch_scorer_opts *o, const char *name)
{
    const batch_original *t = o->originals ? o->originals : ORIGINALS;
    size_t n = o->originals ? o->noriginals : sizeof ORIGINALS / sizeof *ORIGINALS;
    const batch_original *any = NULL;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(t[i].builtin, name))
            continue;
        if (o->task_name && !strcmp(t[i].task, o->task_name))
            return &t[i];
        if (!any)
            any = &t[i];
    }
    return any;
}

static void set_builtin(batch_scorer *s, int b)
{
    s->kind = SK_BUILTIN;
    s->builtin = builtins[b].fn;
    snprintf(s->name, sizeof s->name, "builtin:%s", builtins[b].name);
}

/* Opens the worker on the task's reward.py; an import that fails is one
 * line naming it and the built-in of the task's name (original: that task's
 * reward.py, in C). */
static int open_worker(batch_scorer *s, const batch_scorer_opts *o, lis_error *err)
{
    if (score_worker_open(o->python, o->task_dir, &s->worker, err) == 0) {
        score_worker_set_timeout(s->worker, o->timeout);
        return 0;
    }
    if (err->code != EINVAL) /* no python, a worker that died: its own message */
        return -1;
    int b = find_builtin(o->task_name ? o->task_name : "");
    char m[sizeof err->msg];
    snprintf(m, sizeof m, "%s", err->msg);
    return lis_fail(err, EINVAL, "%s; make it importable on this host%s%s (docs/batch-scoring.md)",
                    m,
                    b >= 0
                        ? ", or accept lis's built-in version of the original's with "
                          "--scorer builtin:"
                        : ", or choose a built-in scorer with --scorer builtin:match, builtin:letter or "
                          "builtin:math",
                    b >= 0 ? builtins[b].name : "");
}

int batch_scorer_open(const batch_scorer_opts *o, batch_scorer **out, lis_error *err)
{
    *out = NULL;
    batch_scorer *s = calloc(1, sizeof *s);
    if (!s)
        return lis_oom(err);
    s->timeout = o->timeout;
    pthread_mutex_init(&s->mu, NULL);
    const char *sc = o->scorer && *o->scorer && strcmp(o->scorer, "auto") != 0 ? o->scorer : NULL;
    const char *task = o->task_name ? o->task_name : "";
    int reward = has_file(o->task_dir, "reward.py"), judge_py = has_file(o->task_dir, "judge.py");
    int prompt_py = has_file(o->task_dir, "vanilla_llm_prompt.py");
    char reward_path[4200] = "", reward_sha[65] = "";
    const char *note = "";
    int rc = 0;
    if (reward) {
        snprintf(reward_path, sizeof reward_path, "%s/reward.py", o->task_dir);
        if (batch_sha256_file(reward_path, reward_sha, err) < 0) {
            rc = -1;
            goto fail;
        }
    }
    const batch_original *orig = reward ? original_of(o, reward_sha) : NULL;

    if (sc && strncmp(sc, "builtin:", 8) == 0) {
        int b = find_builtin(sc + 8);
        if (b < 0) {
            rc = lis_fail(err, EINVAL,
                          "--scorer %s: no such built-in scorer (builtin:match, "
                          "builtin:letter, builtin:math; or demo, chem, biomed)",
                          sc);
            goto fail;
        }
        set_builtin(s, b);
        const batch_original *of = original_for_builtin(o, builtins[b].name);
        snprintf(s->sha256, sizeof s->sha256, "%s", of ? of->sha256 : "");
        snprintf(s->source, sizeof s->source,
                 "built in: lis's version of the original's %s/reward.py (llm-in-sandbox 0.2.0)",
                 of ? of->task : builtins[b].alias);
        if (reward && orig != of)
            note = " (chosen by --scorer: the task's own reward.py is not used)";
    } else if (sc && strcmp(sc, "python") == 0) {
        if (!reward) {
            rc = lis_fail(err, ENOENT, "--scorer python: %s has no reward.py",
                          o->task_dir ? o->task_dir : "the task (--tasks FILE)");
            goto fail;
        }
        s->kind = SK_PYTHON;
        snprintf(s->name, sizeof s->name, "python:reward.py");
    } else if (sc) {
        s->kind = SK_CMD;
        s->cmd = agent_strdup(sc);
        snprintf(s->name, sizeof s->name, "cmd:%s", sc);
        batch_sha256_text(sc, strlen(sc), s->sha256);
        snprintf(s->source, sizeof s->source, "the --scorer command");
    } else if (judge_py && o->judge) {
        s->kind = SK_JUDGE;
        snprintf(s->name, sizeof s->name, "judge:%s", o->judge->model ? o->judge->model : "?");
        char jp[4200];
        snprintf(jp, sizeof jp, "%s/judge.py", o->task_dir);
        if (batch_sha256_file(jp, s->sha256, err) < 0) {
            rc = -1;
            goto fail;
        }
        snprintf(s->source, sizeof s->source, "%s (the judge's prompt, asked of %s)", jp,
                 o->judge->model ? o->judge->model : "?");
    } else if (orig) {
        set_builtin(s, find_builtin(orig->builtin));
        if (!strcmp(orig->builtin, "math"))
            note = " (math-verify is not packaged in Debian; --scorer python runs the task's "
                   "reward.py where it is installed)";
    } else if (reward) {
        s->kind = SK_PYTHON;
        snprintf(s->name, sizeof s->name, "python:reward.py");
        if (judge_py)
            note = " (the task has judge.py: its reward.py is the original's placeholder; "
                   "--judge-model scores it, or lis batch judge on the run's directory afterwards)";
    } else {
        int b = find_builtin(task);
        if (b >= 0)
            rc = lis_fail(err, ENOENT,
                          "no scorer for task %s: it has no reward.py; give --scorer "
                          "builtin:%s for lis's version of the original's %s/reward.py, "
                          "--scorer CMD or --judge-model",
                          task, builtins[b].name, builtins[b].alias);
        else
            rc = lis_fail(err, ENOENT,
                          "no scorer for task %s: it has no reward.py (use --scorer "
                          "builtin:match (the answer equals ground_truth, case and spaces "
                          "aside), builtin:letter (a multiple-choice letter), builtin:math (a "
                          "\\boxed{} answer), --scorer CMD or --judge-model)",
                          *task ? task : "?");
        goto fail;
    }
    if (s->kind == SK_PYTHON || (s->kind == SK_BUILTIN && orig && !s->sha256[0])) {
        snprintf(s->sha256, sizeof s->sha256, "%s", reward_sha);
        if (s->kind == SK_PYTHON)
            snprintf(s->source, sizeof s->source, "%s", reward_path);
        else
            snprintf(s->source, sizeof s->source,
                     "%s: the original's %s/reward.py (llm-in-sandbox 0.2.0), scored by lis's "
                     "built-in version of it",
                     reward_path, orig->task);
    }
    if (s->kind == SK_JUDGE) {
        s->judge = *o->judge;
        s->judge_model = o->judge->model ? agent_strdup(o->judge->model) : NULL;
        s->judge_url = o->judge->base_url ? agent_strdup(o->judge->base_url) : NULL;
        s->judge_key = o->judge->api_key ? agent_strdup(o->judge->api_key) : NULL;
        s->judge.model = s->judge_model;
        s->judge.base_url = s->judge_url;
        s->judge.api_key = s->judge_key;
        s->judge.extra_body = NULL; /* the caller's, not ours to keep */
        s->judge.log = NULL;
    }
    /* the worker: now for reward.py; for create_prompt alone only when --mode
     * llm asks for a prompt (a sandbox run with a built-in needs no python) */
    if (s->kind == SK_PYTHON && open_worker(s, o, err))
        goto fail;
    if (prompt_py && o->task_dir) {
        s->prompt_py = 1;
        s->python = o->python ? agent_strdup(o->python) : NULL;
        s->task_dir = agent_strdup(o->task_dir);
    }
    if (o->log)
        fprintf(o->log, "scorer: %s%s%.12s%s%s\n", s->name, s->sha256[0] ? " (sha256 " : "",
                s->sha256, s->sha256[0] ? "...)" : "", note);
    *out = s;
    return 0;
fail:
    batch_scorer_close(s);
    return rc ? rc : -1;
}

const char *batch_scorer_name(const batch_scorer *s) { return s->name; }

const char *batch_scorer_sha256(const batch_scorer *s) { return s->sha256; }

const char *batch_scorer_source(const batch_scorer *s) { return s->source; }

static llm_client *take_client(batch_scorer *s, lis_error *err)
{
    pthread_mutex_lock(&s->mu);
    llm_client *c = s->nidle ? s->idle[--s->nidle] : NULL;
    pthread_mutex_unlock(&s->mu);
    return c ? c : llm_new(&s->judge, err);
}

static void give_client(batch_scorer *s, llm_client *c)
{
    pthread_mutex_lock(&s->mu);
    if (LIS_GROW(s->idle, s->capidle, s->nidle + 1) < 0) {
        pthread_mutex_unlock(&s->mu);
        llm_free(c);
        return;
    }
    s->idle[s->nidle++] = c;
    pthread_mutex_unlock(&s->mu);
}

/* Python's str() of a JSON scalar (original: how its reward functions see a
 * ground truth loaded by json): 2 -> "2", 0.5 -> "0.5", true -> "True". */
static int py_str(const cJSON *v, char *out, size_t len)
{
    if (cJSON_IsBool(v)) {
        snprintf(out, len, "%s", cJSON_IsTrue(v) ? "True" : "False");
        return 0;
    }
    if (!cJSON_IsNumber(v))
        return -1;
    double d = v->valuedouble;
    if (d == (double)(long long)d && d > -9007199254740992.0 && d < 9007199254740992.0) {
        snprintf(out, len, "%lld", (long long)d); /* an integer in the JSON text */
        return 0;
    }
    for (int prec = 1; prec <= 17; prec++) { /* the shortest text that reads back as d */
        snprintf(out, len, "%.*g", prec, d);
        if (strtod(out, NULL) == d)
            break;
    }
    return 0;
}

int batch_scorer_score(batch_scorer *s, const char *answer, const cJSON *row, double *score,
                       lis_error *err)
{
    const cJSON *gt = cJSON_GetObjectItem(row, "ground_truth");
    switch (s->kind) {
    case SK_BUILTIN: {
        char num[64];
        if (!cJSON_IsString(gt) && py_str(gt, num, sizeof num) < 0)
            return lis_fail(err, EINVAL, "%s: ground_truth is %s, not a string or a number",
                            s->name, gt ? "an object, array or null" : "missing");
        *score = s->builtin(answer ? answer : "", cJSON_IsString(gt) ? gt->valuestring : num);
        return 0;
    }
    case SK_PYTHON: return score_worker_score(s->worker, answer, row, score, err);
    case SK_CMD:
        return score_cmd_run(s->cmd, answer, row, s->timeout > 0 ? s->timeout : SCORE_CMD_TIMEOUT,
                             score, err);
    case SK_JUDGE: {
        llm_client *c = take_client(s, err);
        if (!c)
            return lis_wrap(err, "judge");
        const char *q = cJSON_GetStringValue(cJSON_GetObjectItem(row, "problem_statement"));
        char verdict[16];
        int rc = score_judge_ask(c, q ? q : "", gt, answer, score, verdict, err);
        give_client(s, c);
        return rc;
    }
    }
    return lis_fail(err, EINVAL, "unknown scorer");
}

char *batch_scorer_prompt(batch_scorer *s, const cJSON *row, lis_error *err)
{
    if (s->prompt_py) {
        pthread_mutex_lock(&s->mu);
        if (!s->worker && !s->prompt_err[0]) {
            lis_error e = {0};
            if (score_worker_open(s->python, s->task_dir, &s->worker, &e))
                snprintf(s->prompt_err, sizeof s->prompt_err, "%s", e.msg);
        }
        pthread_mutex_unlock(&s->mu);
        if (s->prompt_err[0]) {
            lis_fail(err, EIO, "%s", s->prompt_err);
            return NULL;
        }
        if (score_worker_has(s->worker, "prompt"))
            return score_worker_prompt(s->worker, row, err);
    }
    const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(row, "problem_statement"));
    if (!p) {
        lis_fail(err, EINVAL, "the row has no problem_statement");
        return NULL;
    }
    char *out = agent_strdup(p);
    if (!out)
        lis_oom(err);
    return out;
}

void batch_scorer_close(batch_scorer *s)
{
    if (!s)
        return;
    score_worker_close(s->worker);
    for (size_t i = 0; i < s->nidle; i++)
        llm_free(s->idle[i]);
    free(s->idle);
    free(s->cmd);
    free(s->python);
    free(s->task_dir);
    free(s->judge_model);
    free(s->judge_url);
    free(s->judge_key);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
