/* score_worker.c - the resident Python worker that runs a task's own
 * reward.py (and vanilla_llm_prompt.py) unchanged: started once per scorer,
 * one JSON line per request over a pipe (protocol in reward_worker.py and
 * docs/batch-scoring.md), serialised by a mutex.
 *
 * The worker script is embedded in liblis-agent.so at build time (.incbin
 * of batch/reward_worker.py) and run with python3 -c: nothing to install or
 * look up next to the binary, and the script can never be out of step with
 * the C side that speaks its protocol. */
#include "score_worker.h"
#include "score_proc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__asm__(".section .rodata\n"
        ".global lis_reward_worker_py\n"
        ".hidden lis_reward_worker_py\n"
        "lis_reward_worker_py:\n"
        ".incbin \"batch/reward_worker.py\"\n"
        ".byte 0\n"
        ".previous\n");
extern const char lis_reward_worker_py[];

#define WORKER_START_TIMEOUT 120.0 /* importing reward.py (math-verify pulls in sympy) */
#define WORKER_CALL_TIMEOUT 300.0

struct score_worker {
    pthread_mutex_t mu;
    char *python, *task_dir;
    sproc p;
    int alive;
    int has_score, has_prompt;
    int broken; /* a restart failed: every later call fails with why */
    char why[400];
    strbuf errtail;
    double call_timeout; /* seconds per call: WORKER_CALL_TIMEOUT, or the caller's */
};

const char *score_worker_script(void) { return lis_reward_worker_py; }

static int start(score_worker *w, lis_error *err)
{
    char *argv[] = {w->python, "-c", (char *)lis_reward_worker_py, w->task_dir, NULL};
    w->errtail.len = 0;
    if (sproc_spawn(argv, 1, &w->p, err))
        return -1;
    strbuf out = {0};
    sproc_rc rc = sproc_talk(&w->p, NULL, 0, 1, &out, &w->errtail, WORKER_START_TIMEOUT);
    cJSON *j = rc == SP_OK ? cJSON_Parse(out.s) : NULL;
    strbuf_release(&out);
    if (j && cJSON_IsTrue(cJSON_GetObjectItem(j, "ready"))) {
        w->has_score = cJSON_IsTrue(cJSON_GetObjectItem(j, "score"));
        w->has_prompt = cJSON_IsTrue(cJSON_GetObjectItem(j, "prompt"));
        cJSON_Delete(j);
        w->alive = 1;
        return 0;
    }
    const char *e = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "error")) : NULL;
    char line[320];
    sproc_last_line(&w->errtail, line, sizeof line);
    if (e)
        lis_fail(err, EINVAL, "loading %s/reward.py: %s", w->task_dir, e);
    else if (rc == SP_TIMEOUT)
        lis_fail(err, ETIMEDOUT, "loading %s/reward.py: no answer in %.0f s", w->task_dir,
                 WORKER_START_TIMEOUT);
    cJSON_Delete(j);
    int st = sproc_end(&w->p, 1);
    if (!e && rc != SP_TIMEOUT) {
        char sts[64];
        sproc_status_text(st, sts, sizeof sts);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && !*line)
            lis_fail(err, ENOENT,
                     "reward.py needs python3 on the host: apt-get install python3, "
                     "or --scorer builtin:NAME");
        else
            lis_fail(err, EIO, "the reward.py worker (%s) ended at start (%s)%s%s", w->python, sts,
                     *line ? ": " : "", line);
    }
    return -1;
}

int score_worker_open(const char *python, const char *task_dir, score_worker **out, lis_error *err)
{
    *out = NULL;
    score_worker *w = calloc(1, sizeof *w);
    if (!w)
        return lis_oom(err);
    pthread_mutex_init(&w->mu, NULL);
    w->python = agent_strdup(python && *python ? python : "python3");
    w->call_timeout = WORKER_CALL_TIMEOUT;
    w->task_dir = agent_strdup(task_dir);
    w->p.pid = -1;
    if (!w->python || !w->task_dir) {
        score_worker_close(w);
        return lis_oom(err);
    }
    if (start(w, err)) {
        score_worker_close(w);
        return -1;
    }
    *out = w;
    return 0;
}

void score_worker_set_timeout(score_worker *w, double seconds)
{
    if (w && seconds > 0)
        w->call_timeout = seconds;
}

int score_worker_has(const score_worker *w, const char *what)
{
    return strcmp(what, "prompt") == 0 ? w->has_prompt : w->has_score;
}

/* One request; *reply is the parsed reply line. Called with the lock held. */
static int call(score_worker *w, const cJSON *req, cJSON **reply, lis_error *err)
{
    *reply = NULL;
    if (w->broken)
        return lis_fail(err, EIO, "%s", w->why);
    if (!w->alive) {
        /* the last one died: one restart, and if that fails the scorer stays broken */
        lis_error e2 = {0};
        if (start(w, &e2)) {
            w->broken = 1;
            snprintf(w->why, sizeof w->why, "the reward.py worker could not be restarted: %s",
                     e2.msg);
            return lis_fail(err, EIO, "%s", w->why);
        }
    }
    char *line = lis_json_print(req, 0);
    if (!line)
        return lis_oom(err);
    strbuf msg = {0};
    strbuf_puts(&msg, line);
    strbuf_putc(&msg, '\n');
    free(line);
    strbuf out = {0};
    w->errtail.len = 0;
    if (w->errtail.s)
        w->errtail.s[0] = 0;
    sproc_rc rc = msg.oom
                      ? SP_IOERR
                      : sproc_talk(&w->p, msg.s, msg.len, 1, &out, &w->errtail, w->call_timeout);
    strbuf_release(&msg);
    if (rc == SP_OK) {
        *reply = cJSON_Parse(out.s);
        strbuf_release(&out);
        if (*reply)
            return 0;
        rc = SP_IOERR;
    }
    strbuf_release(&out);
    /* dead, hung or garbled: this row fails with the worker's last words */
    int st = sproc_end(&w->p, 1);
    w->alive = 0;
    char sts[64], last[320];
    sproc_status_text(st, sts, sizeof sts);
    sproc_last_line(&w->errtail, last, sizeof last);
    if (rc == SP_TIMEOUT)
        return lis_fail(err, ETIMEDOUT, "reward.py gave no answer in %.0f s (worker killed)%s%s",
                        w->call_timeout, *last ? ": " : "", last);
    return lis_fail(err, EIO, "the reward.py worker died (%s)%s%s", sts, *last ? ": " : "", last);
}

int score_worker_score(score_worker *w, const char *answer, const cJSON *row, double *score,
                       lis_error *err)
{
    cJSON *req = cJSON_CreateObject();
    cJSON *r = cJSON_IsObject(row) ? cJSON_Duplicate(row, 1) : cJSON_CreateObject();
    const cJSON *gt = cJSON_GetObjectItem(row, "ground_truth");
    cJSON *g = gt ? cJSON_Duplicate(gt, 1) : cJSON_CreateNull();
    if (!req || !r || !g) {
        cJSON_Delete(req), cJSON_Delete(r), cJSON_Delete(g);
        return lis_oom(err);
    }
    cJSON_DeleteItemFromObject(r, "ground_truth");
    cJSON_AddStringToObject(req, "op", "score");
    cJSON_AddStringToObject(req, "answer", answer ? answer : "");
    cJSON_AddItemToObject(req, "ground_truth", g);
    cJSON_AddItemToObject(req, "row", r);
    pthread_mutex_lock(&w->mu);
    cJSON *reply;
    int rc = call(w, req, &reply, err);
    pthread_mutex_unlock(&w->mu);
    cJSON_Delete(req);
    if (rc)
        return -1;
    const cJSON *s = cJSON_GetObjectItem(reply, "score");
    const char *e = cJSON_GetStringValue(cJSON_GetObjectItem(reply, "error"));
    if (cJSON_IsNumber(s)) {
        *score = s->valuedouble;
        rc = 0;
    } else {
        rc = lis_fail(err, EINVAL, "reward.py: %s", e ? e : "malformed reply from the worker");
    }
    cJSON_Delete(reply);
    return rc;
}

char *score_worker_prompt(score_worker *w, const cJSON *row, lis_error *err)
{
    cJSON *req = cJSON_CreateObject();
    cJSON *r = cJSON_IsObject(row) ? cJSON_Duplicate(row, 1) : cJSON_CreateObject();
    if (!req || !r) {
        cJSON_Delete(req), cJSON_Delete(r);
        lis_oom(err);
        return NULL;
    }
    cJSON_AddStringToObject(req, "op", "prompt");
    cJSON_AddItemToObject(req, "row", r);
    pthread_mutex_lock(&w->mu);
    cJSON *reply;
    int rc = call(w, req, &reply, err);
    pthread_mutex_unlock(&w->mu);
    cJSON_Delete(req);
    if (rc)
        return NULL;
    const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(reply, "prompt"));
    const char *e = cJSON_GetStringValue(cJSON_GetObjectItem(reply, "error"));
    char *out = p ? agent_strdup(p) : NULL;
    if (!p)
        lis_fail(err, EINVAL, "vanilla_llm_prompt.py: %s",
                 e ? e : "malformed reply from the worker");
    cJSON_Delete(reply);
    return out;
}

void score_worker_close(score_worker *w)
{
    if (!w)
        return;
    if (w->p.pid > 0) {
        /* EOF on its stdin ends it; then the group is reaped */
        if (w->p.in >= 0) {
            close(w->p.in);
            w->p.in = -1;
        }
        strbuf o = {0};
        sproc_talk(&w->p, NULL, 0, 1, &o, &w->errtail, 5.0);
        strbuf_release(&o);
        sproc_end(&w->p, 1);
    }
    strbuf_release(&w->errtail);
    free(w->python);
    free(w->task_dir);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
