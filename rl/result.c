/* result.c - what GET episodes/ID and a group's results say of an episode
 * (docs/rl.md, "An episode's result"): made from its state under rl->mu,
 * the whole result once it is done, kept on disk by the supervisor. */
#include "core.h"

#include <stdlib.h>
#include <string.h>

const char *rl_phase_name(rl_phase p)
{
    switch (p) {
    case RP_QUEUED: return "queued";
    case RP_SETUP: return "setup";
    case RP_RUNNING: return "running";
    case RP_SCORING: return "scoring";
    case RP_DONE: return "done";
    }
    return "?";
}

const char *rl_status_name(rl_status s)
{
    switch (s) {
    case RS_NONE: return "running";
    case RS_COMPLETED: return "completed";
    case RS_TRUNCATED: return "truncated";
    case RS_TIMEOUT: return "timeout";
    case RS_CANCELLED: return "cancelled";
    case RS_ENV_ERROR: return "env_error";
    case RS_MODEL_ERROR: return "model_error";
    }
    return "?";
}

const char *rl_stage_name(rl_stage s)
{
    switch (s) {
    case RST_NONE: return NULL;
    case RST_SETUP: return "setup";
    case RST_RUN: return "run";
    case RST_REWARD: return "reward";
    }
    return NULL;
}

static void add_str_or_null(cJSON *o, const char *key, const char *v)
{
    if (v && *v)
        cJSON_AddStringToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

cJSON *rl_turn_json(const rl_turn *t, size_t k)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "step", (double)k);
    const cJSON *m, *msg = NULL;
    cJSON_ArrayForEach(m, t->tail)
    {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
        if (role && !strcmp(role, "assistant"))
            msg = m;
    }
    cJSON_AddItemToObject(o, "message", msg ? cJSON_Duplicate(msg, 1) : cJSON_CreateNull());
    const cJSON *st = t->step;
    cJSON_AddItemToObject(o, "tool_call",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(st, "action"), 1));
    cJSON_AddItemToObject(o, "observation",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(st, "observation"), 1));
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(st, "metadata");
    cJSON_AddNumberToObject(o, "llm_s", t->llm_s);
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(md, "tool_exec_time");
    cJSON_AddNumberToObject(o, "tool_s", cJSON_IsNumber(ts) ? ts->valuedouble : 0);
    const cJSON *fx = cJSON_GetObjectItemCaseSensitive(st, "effects");
    cJSON_AddItemToObject(o, "effects", fx ? cJSON_Duplicate(fx, 1) : cJSON_CreateNull());
    const cJSON *cap = cJSON_GetObjectItemCaseSensitive(fx, "capability");
    cJSON_AddItemToObject(o, "capability", cap ? cJSON_Duplicate(cap, 1) : cJSON_CreateNull());
    add_str_or_null(o, "weight_version", t->weight_version);
    cJSON_AddItemToObject(o, "tokens",
                          t->tokens ? cJSON_Duplicate(t->tokens, 1) : cJSON_CreateNull());
    if (!t->tokens && t->tokens_why[0])
        cJSON_AddStringToObject(o, "tokens_why", t->tokens_why);
    const cJSON *se = cJSON_GetObjectItemCaseSensitive(st, "snapshot_error");
    if (se)
        cJSON_AddItemToObject(o, "snapshot_error", cJSON_Duplicate(se, 1));
    return o;
}

cJSON *rl_ep_brief(const rl_ep *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "episode_id", e->id);
    cJSON_AddStringToObject(o, "group_id", e->g->id);
    cJSON_AddNumberToObject(o, "index", e->index);
    cJSON_AddStringToObject(o, "status", rl_phase_name(e->phase));
    cJSON_AddNumberToObject(o, "turns_done", (double)e->nturns);
    return o;
}

static double span(double a, double b) { return a && b && b > a ? b - a : 0; }

/* The status of the result: an episode still going says its phase. */
static const char *status_text(const rl_ep *e)
{
    return e->phase == RP_DONE ? rl_status_name(e->status) : rl_phase_name(e->phase);
}

cJSON *rl_ep_result(const rl_ep *e)
{
    const rl_spec *s = e->g->spec;
    const rl_request *rq = &s->req;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "episode_id", e->id);
    cJSON_AddStringToObject(o, "group_id", e->g->id);
    cJSON_AddNumberToObject(o, "index", e->index);
    cJSON_AddStringToObject(o, "task_id", rq->task.id ? rq->task.id : "");
    cJSON_AddStringToObject(o, "status", status_text(e));
    add_str_or_null(o, "error_stage", rl_stage_name(e->stage));
    add_str_or_null(o, "error", e->error);
    /* not to be trained on: the environment or the model failed, never a wrong answer */
    int filter = e->status == RS_ENV_ERROR || e->status == RS_MODEL_ERROR ||
                 (e->stage == RST_REWARD && !strstr(e->error, "timed out"));
    cJSON_AddBoolToObject(o, "filter", filter);
    if (e->rewarded)
        cJSON_AddNumberToObject(o, "reward", e->reward);
    else
        cJSON_AddNullToObject(o, "reward");
    cJSON *ri = cJSON_AddObjectToObject(o, "reward_info");
    add_str_or_null(ri, "scorer", s->scorer ? batch_scorer_name(s->scorer) : NULL);
    add_str_or_null(ri, "answer", e->answer);
    if (e->stage == RST_REWARD)
        cJSON_AddStringToObject(ri, "error", e->error);
    cJSON_AddStringToObject(o, "stop_reason",
                            e->ran ? agent_stop_name(e->out.stop) : rl_status_name(e->status));
    cJSON_AddItemToObject(o, "messages",
                          e->messages ? cJSON_Duplicate(e->messages, 1) : cJSON_CreateArray());
    cJSON *turns = cJSON_AddArrayToObject(o, "turns");
    rl_turn_tokens *tt = calloc(e->nturns ? e->nturns : 1, sizeof *tt);
    cJSON *versions = cJSON_CreateArray();
    for (size_t i = 0; i < e->nturns; i++) {
        cJSON_AddItemToArray(turns, rl_turn_json(&e->turns[i], i));
        if (tt)
            tt[i].tokens = e->turns[i].tokens;
        const char *v = e->turns[i].weight_version;
        int seen = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, versions) seen |= !strcmp(x->valuestring, v);
        if (*v && !seen)
            cJSON_AddItemToArray(versions, cJSON_CreateString(v));
    }
    cJSON *tok = tt ? rl_tokens_flatten(tt, e->nturns) : NULL;
    free(tt);
    cJSON_AddItemToObject(o, "tokens", tok ? tok : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "weight_versions", versions);
    cJSON *caps = cJSON_AddObjectToObject(o, "capabilities");
    cJSON_AddNumberToObject(caps, "external", e->caps[0]);
    cJSON_AddNumberToObject(caps, "file", e->caps[1]);
    cJSON_AddNumberToObject(caps, "computation", e->caps[2]);
    cJSON_AddNumberToObject(o, "alerts", e->alerts);
    cJSON *tm = cJSON_AddObjectToObject(o, "timing");
    cJSON_AddNumberToObject(tm, "queue_s", span(e->t_submit, e->t_setup0));
    /* setup_s: the group's set-up (a branch: none) and the wait for a run thread;
     * fork_s: this episode's sandbox on the snapshot; run_s: its turns */
    cJSON_AddNumberToObject(tm, "setup_s", span(e->t_setup0, e->t_run0));
    cJSON_AddNumberToObject(tm, "fork_s", span(e->t_run0, e->t_ready));
    cJSON_AddNumberToObject(tm, "run_s", span(e->t_ready ? e->t_ready : e->t_run0, e->t_run1));
    cJSON_AddNumberToObject(tm, "reward_s", span(e->t_rew0, e->t_rew1));
    cJSON_AddItemToObject(o, "labels",
                          rq->labels ? cJSON_Duplicate(rq->labels, 1) : cJSON_CreateNull());
    if (e->at_step >= 0) {
        cJSON *b = cJSON_AddObjectToObject(o, "branch_of");
        cJSON_AddStringToObject(b, "episode_id", e->parent_id);
        cJSON_AddNumberToObject(b, "at_step", e->at_step);
    } else {
        cJSON_AddNullToObject(o, "branch_of");
    }
    cJSON *snaps = cJSON_AddArrayToObject(o, "snapshots");
    for (size_t k = 0; k < e->nsnaps; k++)
        if (e->snaps[k])
            cJSON_AddItemToArray(snaps, cJSON_CreateNumber((double)k));
    return o;
}
