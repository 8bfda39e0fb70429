/* env.c - step mode of the episodes API (docs/rl.md, "Step mode"): for
 * trainers that call the model themselves. An env is an episode (rl_ep)
 * run by the same run job (episode.c) whose model call publishes the
 * messages the model would see and waits for the trainer's action (g->cv
 * under rl->mu); POST envs/ID/step hands the action over and long-polls
 * until the env waits again or ended. Reward and branch work on the live
 * sandbox of an env that waits, on the reward pool (its run waits for them
 * before it goes on). The supervisor ends an env idle past its timeout. */
#include "core.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(cJSON **reply, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(cJSON **reply, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rl_vfail(reply, status, fmt, ap);
    va_end(ap);
    return status;
}

/* messages[from..] copied. */
static cJSON *tail_of(const cJSON *messages, int from)
{
    cJSON *a = cJSON_CreateArray();
    int n = cJSON_GetArraySize(messages);
    for (int i = from < 0 ? 0 : from; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_Duplicate(cJSON_GetArrayItem(messages, i), 1));
    return a;
}

int rl_env_llm(rl_ep *e, const cJSON *messages, llm_reply *r, lis_error *err)
{
    lis_rl *rl = e->rl;
    /* what is new since the action: the tool replies, "Steps Remaining" included */
    cJSON *obs = tail_of(messages, e->env_seen ? e->env_seen + 1 : 0);
    pthread_mutex_lock(&rl->mu);
    cJSON_Delete(e->env_obs);
    e->env_obs = obs;
    e->env_seen = cJSON_GetArraySize(messages);
    e->env_waiting = 1;
    e->env_touch = lis_now();
    rl->generation++;
    rl_wake(rl); /* its idle timeout starts now */
    pthread_mutex_unlock(&rl->mu);
    rl_notify(rl);
    pthread_mutex_lock(&rl->mu);
    while (!e->abort && (!e->env_action || e->sb_users))
        pthread_cond_wait(&e->g->cv, &rl->mu);
    cJSON *act = e->env_action;
    e->env_action = NULL;
    e->env_waiting = 0;
    if (act && !e->abort)
        e->env_taken++;
    if (e->abort) {
        cJSON_Delete(act);
        act = NULL;
    }
    cJSON_Delete(e->env_obs); /* the turn's own (rl_env_turn) replaces it */
    e->env_obs = NULL;
    pthread_mutex_unlock(&rl->mu);
    if (!act)
        return lis_fail(err, ECANCELED, "the env was stopped while it waited for an action");
    int rc = llm_reply_from_message(act, r, err);
    cJSON_Delete(act);
    return rc;
}

void rl_env_turn(rl_ep *e, const cJSON *messages)
{
    cJSON_Delete(e->env_obs);
    e->env_obs = tail_of(messages, e->env_seen + 1);
}

void rl_env_idle(lis_rl *rl, rl_ep *e, double now, double *next)
{
    double idle = e->g->spec->req.idle_timeout;
    if (!e->g->spec->req.step || !e->env_waiting || e->cancel_asked || idle <= 0)
        return;
    double at = e->env_touch + idle;
    if (at > now) {
        if (!*next || at < *next)
            *next = at;
        return;
    }
    char why[64];
    snprintf(why, sizeof why, "idle for %g s", idle);
    e->cancel_asked = 1;
    rl_ep_stop(e, AGENT_STOP_CANCELLED, why);
    rl->generation++;
}

/* ---- reward and branch: a job on the live sandbox ---------------------- */

typedef struct env_job {
    rl_ep *e;
    int branch; /* a snapshot of the files, else the reward */
    int ran;
} env_job;

/* The snapshot of the files after turn k-1 into e->snaps[k] (one the
 * group kept already stays). Under mu. */
static void keep_snap(lis_rl *rl, rl_ep *e, size_t k, rl_snap *s)
{
    s->next = rl->snaps;
    rl->snaps = s;
    if (k < e->nsnaps && !e->snaps[k])
        e->snaps[k] = s; /* the episode's ref, until it is deleted */
    else
        s->refs = 0; /* the next sweep removes it */
}

static void env_job_run(void *arg)
{
    env_job *j = arg;
    rl_ep *e = j->e;
    lis_rl *rl = e->rl;
    const rl_spec *s = e->g->spec;
    pthread_mutex_lock(&rl->mu);
    lis_sandbox *sb = e->sb; /* kept alive by sb_users */
    size_t k = e->nturns;
    pthread_mutex_unlock(&rl->mu);
    lis_error err = {0};
    double score = 0;
    int rc;
    rl_snap *snap = NULL;
    if (j->branch) {
        lis_snapshot_result res;
        snap = calloc(1, sizeof *snap);
        rc = snap ? lis_rootfs_snapshot(rl->data_dir, sb, NULL, &res, &err)
                  : lis_fail(&err, ENOMEM, "out of memory");
        if (rc == 0) {
            snprintf(snap->digest, sizeof snap->digest, "%s", res.digest);
            snprintf(snap->chain, sizeof snap->chain, "%s", res.rootfs);
            snap->refs = 1;
        }
    } else { /* as the run reads it at its end: a missing file scores "" */
        char *data = NULL, *answer = NULL;
        size_t len = 0;
        lis_error aerr = {0};
        if (lis_file_read(sb, s->req.task.answer_file, 1u << 20, &data, &len, &aerr) == 0)
            answer = agent_clean_output(data, len);
        free(data);
        rc = batch_scorer_score(s->scorer, answer ? answer : "", s->req.task.reward_row, &score,
                                &err);
        free(answer);
    }
    pthread_mutex_lock(&rl->mu);
    if (snap && rc == 0)
        keep_snap(rl, e, k, snap);
    else
        free(snap);
    e->env_reward = rc == 0 ? score : 0;
    snprintf(e->env_job_error, sizeof e->env_job_error, "%s", rc < 0 ? err.msg : "");
    e->env_jobs_done++;
    e->sb_users--;
    j->ran = 1;
    rl->generation++;
    pthread_cond_broadcast(&e->g->cv); /* its run goes on */
    pthread_mutex_unlock(&rl->mu);
    rl_notify(rl);
}

/* Reaped by the supervisor, under mu. */
static void env_job_done(void *arg, int status)
{
    (void)status;
    env_job *j = arg;
    rl_ep *e = j->e;
    if (!j->ran) { /* cancelled before it started: the server stops */
        snprintf(e->env_job_error, sizeof e->env_job_error, "server stopped");
        e->env_jobs_done++;
        e->sb_users--;
        pthread_cond_broadcast(&e->g->cv);
    }
    e->rl->scoring--;
    e->rl->generation++;
    free(j);
}

/* A job on e's sandbox, or a failure status. Under mu. */
static int job_start(lis_rl *rl, rl_ep *e, int branch, char *memo, cJSON **reply)
{
    if (!e->env_waiting || e->env_action || !e->sb)
        return fail(reply, 409, "env %s does not wait for an action (it is %s)", e->id,
                    rl_phase_name(e->phase));
    if (e->env_jobs != e->env_jobs_done)
        return fail(reply, 409, "env %s is being scored or branched already", e->id);
    env_job *j = calloc(1, sizeof *j);
    if (!j)
        return fail(reply, 500, "out of memory");
    j->e = e;
    j->branch = branch;
    lis_error err = {0};
    if (!lis_jobs_submit(rl->reward_pool, env_job_run, env_job_done, j, &err)) {
        free(j);
        return fail(reply, 503, "%s", err.msg);
    }
    e->sb_users++;
    rl->scoring++; /* the supervisor reaps it before it stops */
    snprintf(memo, LIS_RL_MEMO, "%ld", ++e->env_jobs);
    return 0;
}

/* ---- the routes -------------------------------------------------------- */

static cJSON *env_ids(const rl_group *g)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "group_id", g->id);
    cJSON *a = cJSON_AddArrayToObject(o, "env_ids");
    for (size_t i = 0; i < g->n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(g->eps[i]->id));
    return o;
}

static int env_ready(const rl_ep *e) { return e->env_waiting || e->env_over || e->phase == RP_DONE; }

/* POST envs, and POST envs/ID/branch's new envs: the ids at once, or with
 * a wait the first observation once every env waits for its first action. */
static int envs_made(rl_group *g, const lis_rl_req *q, int st, cJSON **reply)
{
    int ready = 1;
    double now = lis_now();
    for (size_t i = 0; i < g->n; i++) {
        ready &= env_ready(g->eps[i]);
        g->eps[i]->env_touch = now;
    }
    if (q->wait > 0 && q->memo && !ready && !q->final)
        return 0;
    *reply = env_ids(g);
    if (q->wait <= 0 || !q->memo || !ready)
        return st;
    const cJSON *obs = g->n ? g->eps[0]->env_obs : NULL;
    cJSON_AddItemToObject(*reply, "observation",
                          obs ? cJSON_Duplicate(obs, 1) : cJSON_CreateArray());
    return 200;
}

static int post_envs(lis_rl *rl, const lis_rl_req *q, cJSON **reply)
{
    rl_group *g = NULL;
    int st = 202;
    if (q->memo && q->memo[0]) { /* a later call of the same long-poll */
        rl_ep *e = rl_find_ep(rl, q->memo);
        if (!e)
            return fail(reply, 410, "the envs of this request are gone");
        g = e->g;
    } else {
        st = rl_post_group(rl, q->body, 1, &g, reply);
        if (!g)
            return st;
        cJSON_Delete(*reply);
        *reply = NULL;
        if (q->memo)
            snprintf(q->memo, LIS_RL_MEMO, "%s", g->eps[0]->id);
    }
    return envs_made(g, q, st, reply);
}

static cJSON *step_info(const rl_ep *e, int done)
{
    cJSON *info = cJSON_CreateObject();
    cJSON *t = e->nturns ? rl_turn_json(&e->turns[e->nturns - 1], e->nturns - 1) : NULL;
    static const char *keys[] = {"step", "effects", "capability", "tool_s"};
    for (size_t i = 0; t && i < sizeof keys / sizeof keys[0]; i++)
        cJSON_AddItemToObject(info, keys[i],
                              cJSON_DetachItemFromObjectCaseSensitive(t, keys[i]));
    cJSON_Delete(t);
    if (done)
        cJSON_AddStringToObject(info, "stop_reason",
                                e->ran ? agent_stop_name(e->out.stop) : rl_status_name(e->status));
    return info;
}

static int env_step(lis_rl *rl, rl_ep *e, const lis_rl_req *q, cJSON **reply)
{
    if (!q->memo)
        return fail(reply, 400, "a step needs a long-poll (lis serve gives it one)");
    if (!q->memo[0]) {
        const cJSON *it, *action = cJSON_GetObjectItemCaseSensitive(q->body, "action");
        if (!cJSON_IsObject(q->body) || !action)
            return fail(reply, 400, "the body must be {\"action\": an assistant message or text}");
        cJSON_ArrayForEach(it, q->body) if (strcmp(it->string, "action")) return fail(
            reply, 400, "unknown key %s (action)", it->string);
        if (!e->env_waiting || e->env_action || e->env_over)
            return fail(reply, 409, "env %s does not wait for an action (it is %s)", e->id,
                        e->env_over ? "done" : rl_phase_name(e->phase));
        llm_reply check;
        lis_error err = {0};
        if (llm_reply_from_message(action, &check, &err) < 0)
            return fail(reply, err.code == ENOMEM ? 500 : 400, "%s", err.msg);
        llm_reply_free(&check);
        if (!(e->env_action = cJSON_Duplicate(action, 1)))
            return fail(reply, 500, "out of memory");
        snprintf(q->memo, LIS_RL_MEMO, "%ld", ++e->env_given);
        e->env_touch = lis_now();
        pthread_cond_broadcast(&e->g->cv);
    }
    long want = strtol(q->memo, NULL, 10);
    int done = e->env_over || e->phase == RP_DONE;
    if (!done && !(e->env_waiting && e->env_taken >= want) && !q->final)
        return 0;
    e->env_touch = lis_now();
    *reply = cJSON_CreateObject();
    const cJSON *obs = e->env_obs;
    cJSON_AddItemToObject(*reply, "observations",
                          obs ? cJSON_Duplicate(obs, 1) : cJSON_CreateArray());
    cJSON_AddBoolToObject(*reply, "done", done);
    cJSON_AddItemToObject(*reply, "info", step_info(e, done));
    return 200;
}

static int env_reward(lis_rl *rl, rl_ep *e, const lis_rl_req *q, cJSON **reply)
{
    if (!q->memo)
        return fail(reply, 400, "a reward needs a long-poll (lis serve gives it one)");
    if (!e->g->spec->scorer)
        return fail(reply, 409, "env %s: its task has no reward (task.reward)", e->id);
    if (!q->memo[0]) {
        int st = job_start(rl, e, 0, q->memo, reply);
        if (st)
            return st;
    }
    if (e->env_jobs_done < strtol(q->memo, NULL, 10))
        return q->final ? fail(reply, 504, "env %s: the reward is not done yet", e->id) : 0;
    e->env_touch = lis_now();
    *reply = cJSON_CreateObject();
    cJSON_AddNumberToObject(*reply, "reward", e->env_reward);
    cJSON *ri = cJSON_AddObjectToObject(*reply, "reward_info");
    cJSON_AddStringToObject(ri, "scorer", batch_scorer_name(e->g->spec->scorer));
    if (e->env_job_error[0])
        cJSON_AddStringToObject(ri, "error", e->env_job_error);
    return 200;
}

static int env_branch(lis_rl *rl, rl_ep *e, const lis_rl_req *q, cJSON **reply)
{
    const cJSON *it, *n = cJSON_GetObjectItemCaseSensitive(q->body, "n");
    if (!q->memo)
        return fail(reply, 400, "a branch needs a long-poll (lis serve gives it one)");
    if (!q->memo[0]) {
        if (q->body && !cJSON_IsObject(q->body))
            return fail(reply, 400, "the body must be {\"n\": envs}");
        cJSON_ArrayForEach(it, q->body) if (strcmp(it->string, "n")) return fail(
            reply, 400, "unknown key %s (n)", it->string);
        int st = job_start(rl, e, 1, q->memo, reply);
        if (st)
            return st;
    }
    if (e->env_jobs_done < strtol(q->memo, NULL, 10))
        return q->final ? fail(reply, 504, "env %s: the snapshot is not done yet", e->id) : 0;
    if (e->env_job_error[0])
        return fail(reply, 500, "env %s: its files: %s", e->id, e->env_job_error);
    e->env_touch = lis_now();
    /* ep_branch's checks and copies, at the turn it waits after */
    cJSON *body = cJSON_CreateObject();
    cJSON_AddNumberToObject(body, "at_step", (double)e->nturns);
    cJSON_AddItemToObject(body, "n", n ? cJSON_Duplicate(n, 1) : cJSON_CreateNumber(1));
    rl_group *g = NULL;
    int st = rl_ep_branch(rl, e, body, &g, reply);
    cJSON_Delete(body);
    if (!g)
        return st;
    cJSON_Delete(*reply);
    *reply = env_ids(g);
    return st;
}

static cJSON *env_state(const rl_ep *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "env_id", e->id);
    cJSON_AddStringToObject(o, "group_id", e->g->id);
    cJSON_AddStringToObject(o, "phase", rl_phase_name(e->phase));
    cJSON_AddBoolToObject(o, "waiting", e->env_waiting && !e->env_action);
    cJSON_AddBoolToObject(o, "done", e->env_over || e->phase == RP_DONE);
    cJSON_AddNumberToObject(o, "steps", (double)e->nturns);
    if (e->phase == RP_DONE)
        cJSON_AddStringToObject(o, "status", rl_status_name(e->status));
    if (e->env_waiting && !e->env_action && e->env_obs) /* a branch's first observation */
        cJSON_AddItemToObject(o, "observation", cJSON_Duplicate(e->env_obs, 1));
    return o;
}

int rl_env_route(lis_rl *rl, const lis_rl_req *q, cJSON **reply)
{
    const char *m = q->method, *p = q->path;
    if (!strcmp(p, "envs"))
        return !strcmp(m, "POST") ? post_envs(rl, q, reply)
                                  : fail(reply, 405, "%s /lis/v1/envs: only POST", m);
    char id[RL_ID_LEN];
    const char *rest = p + 5, *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    const char *op = slash ? slash + 1 : "";
    if (!n || n >= sizeof id || strchr(op, '/'))
        return fail(reply, 404, "no such step mode route: %s %s", m, p);
    memcpy(id, rest, n);
    id[n] = 0;
    rl_ep *e = rl_find_ep(rl, id);
    if (!e || !e->g->spec->req.step)
        return fail(reply, 404, "no such env: %s", id);
    e->env_touch = lis_now();
    if (!*op && !strcmp(m, "GET")) {
        *reply = env_state(e);
        return 200;
    }
    if (!*op && !strcmp(m, "DELETE")) {
        rl_cancel_ep(rl, e);
        *reply = env_state(e);
        return 200;
    }
    if (!strcmp(m, "POST") && !strcmp(op, "step"))
        return env_step(rl, e, q, reply);
    if (!strcmp(m, "POST") && !strcmp(op, "reward"))
        return env_reward(rl, e, q, reply);
    if (!strcmp(m, "POST") && !strcmp(op, "branch"))
        return env_branch(rl, e, q, reply);
    return fail(reply, 404, "no such step mode route: %s %s", m, p);
}
