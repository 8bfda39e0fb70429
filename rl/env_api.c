/* env_api.c - step mode's requests (docs/rl.md, "Step mode"): POST envs
 * (a group whose episodes are envs), envs/ID/step (the action handed over,
 * long-polled until the env waits again or ended), reward, branch, GET and
 * DELETE; and lis_rl_handle, which routes each request under rl->mu to
 * them or to the episodes API's (api.c). Nothing here blocks. */
#include "core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the routes -------------------------------------------------------- */

/* 400 naming a key of body other than key; else 0. */
static int only_key(const cJSON *body, const char *key, cJSON **reply)
{
    for (const cJSON *it = cJSON_IsObject(body) ? body->child : NULL; it; it = it->next)
        if (strcmp(it->string, key))
            return rl_fail(reply, 400, "unknown key %s (%s)", it->string, key);
    return 0;
}

static cJSON *env_ids(const rl_group *g)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "group_id", g->id);
    cJSON *a = cJSON_AddArrayToObject(o, "env_ids");
    for (size_t i = 0; i < g->n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(g->eps[i]->id));
    return o;
}

static int env_ready(const rl_ep *e)
{
    return e->env_waiting || e->env_over || e->phase == RP_DONE;
}

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
            return rl_fail(reply, 410, "the envs of this request are gone");
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
        cJSON_AddItemToObject(info, keys[i], cJSON_DetachItemFromObjectCaseSensitive(t, keys[i]));
    cJSON_Delete(t);
    if (done)
        cJSON_AddStringToObject(info, "stop_reason",
                                e->ran ? agent_stop_name(e->out.stop) : rl_status_name(e->status));
    return info;
}

static int env_step(lis_rl *rl, rl_ep *e, const lis_rl_req *q, cJSON **reply)
{
    if (!q->memo)
        return rl_fail(reply, 400, "a step needs a long-poll (lis serve gives it one)");
    if (!q->memo[0]) {
        const cJSON *action = cJSON_GetObjectItemCaseSensitive(q->body, "action");
        if (!cJSON_IsObject(q->body) || !action)
            return rl_fail(reply, 400,
                           "the body must be {\"action\": an assistant message or text}");
        if (only_key(q->body, "action", reply))
            return 400;
        if (!e->env_waiting || e->env_action || e->env_over || e->cancel_asked)
            return rl_fail(reply, 409, "env %s does not wait for an action (it is %s)", e->id,
                           e->env_over ? "done" : rl_phase_name(e->phase));
        llm_reply check;
        lis_error err = {0};
        if (llm_reply_from_message(action, &check, &err) < 0)
            return rl_fail(reply, err.code == ENOMEM ? 500 : 400, "%s", err.msg);
        llm_reply_free(&check);
        if (!(e->env_action = cJSON_Duplicate(action, 1)))
            return rl_fail(reply, 500, "out of memory");
        snprintf(q->memo, LIS_RL_MEMO, "%ld", ++e->env_given);
        e->env_touch = lis_now();
        pthread_cond_broadcast(&e->cv);
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
        return rl_fail(reply, 400, "a reward needs a long-poll (lis serve gives it one)");
    if (!e->g->spec->scorer)
        return rl_fail(reply, 409, "env %s: its task has no reward (task.reward)", e->id);
    lis_error err = {0};
    if (!q->memo[0] && rl_env_job_start(rl, e, 0, q->memo, &err) < 0)
        return rl_fail(reply, err.http_status, "%s", err.msg);
    if (e->env_jobs_done < strtol(q->memo, NULL, 10))
        return q->final ? rl_fail(reply, 504, "env %s: the reward is not done yet", e->id) : 0;
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
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(q->body, "n");
    if (!q->memo)
        return rl_fail(reply, 400, "a branch needs a long-poll (lis serve gives it one)");
    if (!q->memo[0]) {
        if (q->body && !cJSON_IsObject(q->body))
            return rl_fail(reply, 400, "the body must be {\"n\": envs}");
        if (only_key(q->body, "n", reply))
            return 400;
        long long nv;
        if (n && rl_json_int(n, 1, rl->o.max_n, &nv) < 0)
            return rl_fail(reply, 422, "n must be an integer 1..%d (the server's cap)",
                           rl->o.max_n);
        lis_error err = {0};
        if (rl_env_job_start(rl, e, 1, q->memo, &err) < 0)
            return rl_fail(reply, err.http_status, "%s", err.msg);
        size_t used = strlen(q->memo); /* the turn the snapshot is after */
        snprintf(q->memo + used, LIS_RL_MEMO - used, " %zu", e->nturns);
    }
    long job = 0, k = 0;
    if (sscanf(q->memo, "%ld %ld", &job, &k) != 2)
        return rl_fail(reply, 500, "env %s: the branch lost its way", e->id);
    if (e->env_jobs_done < job)
        return q->final ? rl_fail(reply, 504, "env %s: the snapshot is not done yet", e->id) : 0;
    if (e->env_job_error[0])
        return rl_fail(reply, 500, "env %s: its files: %s", e->id, e->env_job_error);
    e->env_touch = lis_now();
    /* ep_branch's checks and copies, at the turn it waits after */
    cJSON *body = cJSON_CreateObject();
    cJSON_AddNumberToObject(body, "at_step", (double)k);
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

static int env_route(lis_rl *rl, const lis_rl_req *q, cJSON **reply)
{
    const char *m = q->method, *p = q->path;
    if (!strcmp(p, "envs"))
        return !strcmp(m, "POST") ? post_envs(rl, q, reply)
                                  : rl_fail(reply, 405, "%s /lis/v1/envs: only POST", m);
    char id[RL_ID_LEN];
    const char *rest = p + 5, *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    const char *op = slash ? slash + 1 : "";
    if (!n || n >= sizeof id || strchr(op, '/'))
        return rl_fail(reply, 404, "no such step mode route: %s %s", m, p);
    memcpy(id, rest, n);
    id[n] = 0;
    rl_ep *e = rl_find_ep(rl, id);
    if (!e || !e->g->spec->req.step)
        return rl_fail(reply, 404, "no such env: %s", id);
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
    return rl_fail(reply, 404, "no such step mode route: %s %s", m, p);
}

int lis_rl_handle(lis_rl *rl, const lis_rl_req *q, cJSON **reply)
{
    *reply = NULL;
    pthread_mutex_lock(&rl->mu);
    const char *p = q->path;
    int st = !strncmp(p, "envs", 4) && (!p[4] || p[4] == '/') ? env_route(rl, q, reply)
                                                              : rl_api_route(rl, q, reply);
    pthread_mutex_unlock(&rl->mu);
    if (st && !*reply)
        st = rl_fail(reply, 500, "out of memory");
    return st;
}
