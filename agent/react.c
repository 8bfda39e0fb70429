/* react.c - the episode engine: the ReAct loop as a state machine that
 * performs no I/O itself. original: agent.py::Agent.run's loop:
 * system and instance prompt, "Steps Remaining" appended to the last
 * message, one LLM call per step, the first tool call executed, the continue
 * message when there is none, stop on submit / max steps / token ceiling /
 * LLM failure. Whoever drives it does the LLM calls and the tools: `lis run`
 * one at a time and blocking (loop.c), `lis batch` hundreds at once from one
 * event loop (batch/). Both get the same steps, history and trajectory. */
#include "agent_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* original: further calls left unanswered (docs/agent.md fix 2) */
static const char IGNORED_CALL_MSG[] =
    "Error: only the first tool call of a response is executed; this call was ignored. "
    "Call it again in your next response if it is still needed.";

#define MAX_CALLS 16

typedef enum { S_ASK, S_WAIT_LLM, S_TOOL, S_END } ep_state;

struct agent_ep {
    const agent_opts *o;
    cJSON *tools, *history, *steps;
    int max_steps;
    long limit, known_tokens;
    int known_upto, step, done;
    ep_state state;
    agent_outcome out;
    /* the step in progress: the model's reply and the call it makes */
    llm_reply reply;
    char *thought;
    const char *name;
    cJSON *params;
    int ncalls;
    /* effects: the monitor, the step open on it, its effects once closed */
    lis_monitor *mon;
    int mon_open;
    lis_effects *fx;
    char fx_error[256];
    /* a stop rule fired (agent_ep_monitor_event): the episode ends at the next step */
    int policy_stop;
    char policy_rule[64];
    char policy_what[200];
};

static cJSON *msg(const char *role, const char *content)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    return m;
}

static void append_content(cJSON *m, const char *suffix)
{
    const char *c = cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"));
    strbuf b = {0};
    strbuf_puts(&b, c ? c : "");
    strbuf_puts(&b, suffix);
    char *s = strbuf_take(&b);
    if (!s)
        return;
    if (cJSON_GetObjectItem(m, "content"))
        cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateString(s));
    else
        cJSON_AddStringToObject(m, "content", s);
    free(s);
}

static size_t msg_chars(const cJSON *m)
{
    size_t n = 0;
    const char *c = cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"));
    if (c)
        n += strlen(c);
    const cJSON *tc;
    cJSON_ArrayForEach(tc, cJSON_GetObjectItem(m, "tool_calls"))
    {
        const char *a = cJSON_GetStringValue(
            cJSON_GetObjectItem(cJSON_GetObjectItem(tc, "function"), "arguments"));
        n += a ? strlen(a) : 0;
    }
    return n;
}

static void drop_pending(agent_ep *ep);

/* Ends the episode with reason policy and the rule's name. */
static void policy_end(agent_ep *ep, const char *what)
{
    drop_pending(ep);
    ep->out.stop = AGENT_STOP_POLICY;
    snprintf(ep->out.stop_rule, sizeof ep->out.stop_rule, "%s", ep->policy_rule);
    snprintf(ep->out.error, sizeof ep->out.error, "policy rule %s: %s", ep->policy_rule, what);
    if (ep->o->progress)
        fprintf(ep->o->progress, "lis: stopped: policy rule %s (%s)\n", ep->policy_rule, what);
    ep->state = S_END;
}

/* Tokens in the conversation: the server's count up to its last reply plus
 * chars/4 for what came after. original: litellm.token_counter, whose
 * fallback is chars/4 (docs/agent.md fix 16). */
static long estimate_tokens(const cJSON *history, long known, int known_upto)
{
    size_t chars = 0;
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, history)
    {
        if (i++ >= known_upto)
            chars += msg_chars(m);
    }
    return known + (long)(chars / 4);
}

static void short_args(char *out, size_t len, const char *name, const cJSON *p)
{
    const char *cmd = cJSON_GetStringValue(cJSON_GetObjectItem(p, "command"));
    const char *path = cJSON_GetStringValue(cJSON_GetObjectItem(p, "path"));
    if (!strcmp(name, "str_replace_editor"))
        snprintf(out, len, "%s %s", cmd ? cmd : "?", path ? path : "?");
    else
        snprintf(out, len, "%s", cmd ? cmd : "");
    for (char *c = out; *c; c++)
        if (*c == '\n' || *c == '\t' || *c == '\r')
            *c = ' ';
    if (strlen(out) > 72)
        strcpy(out + 69, "...");
}

const char *agent_stop_name(agent_stop s)
{
    switch (s) {
    case AGENT_STOP_SUBMIT: return "submit";
    case AGENT_STOP_MAX_STEPS: return "max_steps";
    case AGENT_STOP_TOKEN_LIMIT: return "token_limit";
    case AGENT_STOP_LLM_ERROR: return "llm_error";
    case AGENT_STOP_DEADLINE: return "deadline";
    case AGENT_STOP_SANDBOX_ERROR: return "sandbox_error";
    case AGENT_STOP_CANCELLED: return "cancelled";
    case AGENT_STOP_POLICY: return "policy";
    case AGENT_STOP_PAUSE_FAILED: return "pause_failed";
    }
    return "?";
}

/* A conversation to start from: a non-empty list of objects, each with a
 * string role and a string content (an assistant message's may be absent:
 * a reply that was only tool calls). 0, or -1 with why. */
static int check_messages(const cJSON *msgs, char *why, size_t wl)
{
    if (!cJSON_IsArray(msgs) || !cJSON_GetArraySize(msgs)) {
        snprintf(why, wl, "the conversation to start from is not a non-empty list of messages");
        return -1;
    }
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs)
    {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsObject(m) || !role) {
            snprintf(why, wl, "message %d of the conversation has no string role", i);
            return -1;
        }
        if (!cJSON_IsString(c) && !((!c || cJSON_IsNull(c)) && !strcmp(role, "assistant"))) {
            snprintf(why, wl, "message %d of the conversation has no string content", i);
            return -1;
        }
        i++;
    }
    return 0;
}

/* An episode with no history yet (the callers give it one). */
static agent_ep *ep_alloc(const agent_opts *o)
{
    agent_ep *ep = calloc(1, sizeof *ep);
    if (!ep)
        return NULL;
    ep->o = o;
    ep->tools = agent_tool_schemas();
    ep->steps = cJSON_CreateArray();
    /* original: max_steps 100, max_token_limit 65536 */
    ep->max_steps = o->max_steps > 0 ? o->max_steps : 100;
    ep->limit = o->max_token_limit > 0 ? o->max_token_limit : 65536;
    ep->out.stop = AGENT_STOP_MAX_STEPS;
    return ep;
}

/* Out of memory or a bad conversation: the episode ends before it starts. */
static void ep_check(agent_ep *ep)
{
    if (ep->state == S_END)
        return;
    if (!ep->history) {
        ep->history = cJSON_CreateArray();
        snprintf(ep->out.error, sizeof ep->out.error, "out of memory");
    }
    if (!ep->tools || !ep->history || !ep->steps || ep->out.error[0]) {
        ep->out.stop = AGENT_STOP_LLM_ERROR;
        if (!ep->out.error[0])
            snprintf(ep->out.error, sizeof ep->out.error, "out of memory");
        ep->state = S_END;
    }
}

agent_ep *agent_ep_new(const agent_opts *o)
{
    agent_ep *ep = ep_alloc(o);
    if (!ep)
        return NULL;
    if (o->messages) { /* a copy: the caller's list stays as it is */
        if (check_messages(o->messages, ep->out.error, sizeof ep->out.error) == 0)
            ep->history = cJSON_Duplicate(o->messages, 1);
        else
            ep->history = cJSON_CreateArray();
    } else {
        ep->history = cJSON_CreateArray();
        char *sys = agent_prompt_system(o->prompts);
        char *user = agent_prompt_instance(o->prompts, o->query);
        cJSON_AddItemToArray(ep->history, msg("system", sys ? sys : ""));
        cJSON_AddItemToArray(ep->history, msg("user", user ? user : ""));
        free(sys);
        free(user);
    }
    ep_check(ep);
    return ep;
}

/* The sums of the outcome over steps 0..k-1 of another trajectory, as if
 * this episode had made them. */
static void branch_sums(agent_ep *ep, const cJSON *steps, int k)
{
    for (int i = 0; i < k; i++) {
        const cJSON *st = cJSON_GetArrayItem(steps, i);
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(st, "metadata");
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(md, "usage");
        ep->out.prompt_tokens +=
            agent_json_long(cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens"));
        ep->out.completion_tokens +=
            agent_json_long(cJSON_GetObjectItemCaseSensitive(u, "completion_tokens"));
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(md, "exec_time");
        ep->out.llm_seconds += cJSON_IsNumber(t) ? t->valuedouble : 0;
        t = cJSON_GetObjectItemCaseSensitive(md, "tool_exec_time");
        ep->out.tool_seconds += cJSON_IsNumber(t) ? t->valuedouble : 0;
        const cJSON *fx = cJSON_GetObjectItemCaseSensitive(st, "effects");
        if (cJSON_IsObject(fx)) {
            ep->out.effects++;
            ep->out.alerts += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fx, "alerts"));
        }
    }
}

/* The token estimate where the parent had it: the server's count of the
 * last turn before k that reported one, up to that turn's assistant message
 * (the r-th assistant message from the end is turn k-1-r's). */
static void branch_known_tokens(agent_ep *ep, const cJSON *steps, int k)
{
    for (int j = k - 1; j >= 0; j--) {
        const cJSON *md =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(steps, j), "metadata");
        long total = agent_json_long(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(md, "usage"),
                                             "total_tokens"));
        if (total <= 0)
            continue;
        int rank = k - 1 - j, n = cJSON_GetArraySize(ep->history);
        for (int i = n - 1; i >= 0; i--) {
            const char *role = cJSON_GetStringValue(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ep->history, i), "role"));
            if (role && !strcmp(role, "assistant") && rank-- == 0) {
                ep->known_tokens = total;
                ep->known_upto = i + 1;
                return;
            }
        }
        return;
    }
}

agent_ep *agent_ep_new_branch(const agent_opts *o, const cJSON *messages, const cJSON *steps, int k,
                              lis_error *err)
{
    char why[256];
    if (k < 0)
        return lis_fail(err, EINVAL, "a branch at step %d: steps count from 0", k), NULL;
    if (check_messages(messages, why, sizeof why) < 0)
        return lis_fail(err, EINVAL, "a branch at step %d: %s", k, why), NULL;
    int nsteps = cJSON_IsArray(steps) ? cJSON_GetArraySize(steps) : -1, nasst = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages)
    {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
        nasst += !strcmp(role, "assistant");
    }
    if (nsteps < k || nasst < k)
        return lis_fail(err, EINVAL,
                        "a branch at step %d needs %d turns before it: the trajectory has %d, "
                        "the conversation %d",
                        k, k, nsteps < 0 ? 0 : nsteps, nasst),
               NULL;
    for (int i = 0; i < k; i++)
        if (!cJSON_IsObject(cJSON_GetArrayItem(steps, i)))
            return lis_fail(err, EINVAL, "a branch at step %d: step %d is not an object", k, i),
                   NULL;
    agent_ep *ep = ep_alloc(o);
    if (!ep)
        return lis_oom(err), NULL;
    ep->history = cJSON_Duplicate(messages, 1);
    for (int i = 0; i < k && ep->steps; i++)
        cJSON_AddItemToArray(ep->steps, cJSON_Duplicate(cJSON_GetArrayItem(steps, i), 1));
    ep->step = k;
    branch_sums(ep, steps, k);
    if (ep->history)
        branch_known_tokens(ep, steps, k);
    /* the parent submitted in turn k-1: so has the branch */
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(steps, k - 1), "action");
    const char *fn = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(act, "function"));
    ep->done = k > 0 && fn && !strcmp(fn, "submit");
    ep_check(ep);
    return ep;
}

const cJSON *agent_ep_messages(const agent_ep *ep) { return ep->history; }

const cJSON *agent_ep_tools(const agent_ep *ep) { return ep->tools; }

int agent_ep_steps(const agent_ep *ep) { return ep->step; }

int agent_ep_next(agent_ep *ep)
{
    FILE *log = ep->o->progress;
    if (ep->state == S_WAIT_LLM)
        return AGENT_EP_LLM;
    if (ep->policy_stop && ep->state != S_END) /* after the step that was in progress */
        policy_end(ep, ep->policy_what);
    if (ep->state == S_TOOL)
        return AGENT_EP_TOOL;
    if (ep->state == S_END || ep->done || ep->step >= ep->max_steps) {
        ep->state = S_END;
        return AGENT_EP_DONE;
    }
    int remaining = ep->max_steps - ep->step;
    /* original: appended to the last message, and kept in the history */
    char suffix[128];
    snprintf(suffix, sizeof suffix, "\nSteps Remaining: %d", remaining);
    append_content(cJSON_GetArrayItem(ep->history, cJSON_GetArraySize(ep->history) - 1), suffix);
    long tokens = estimate_tokens(ep->history, ep->known_tokens, ep->known_upto);
    if (tokens > ep->limit) { /* original: the ValueError "Total tokens: N > LIMIT" */
        ep->out.stop = AGENT_STOP_TOKEN_LIMIT;
        snprintf(ep->out.error, sizeof ep->out.error, "Total tokens: %ld > %ld", tokens, ep->limit);
        if (log)
            fprintf(log,
                    "lis: stopping: the conversation has about %ld tokens, more than "
                    "--max-token-limit %ld\n",
                    tokens, ep->limit);
        ep->state = S_END;
        return AGENT_EP_DONE;
    }
    if (log)
        fprintf(log, "lis: step %d/%d: asking %s (about %ld tokens so far)\n", ep->step + 1,
                ep->max_steps, ep->o->llm_name ? ep->o->llm_name : "the model", tokens);
    ep->state = S_WAIT_LLM;
    return AGENT_EP_LLM;
}

void agent_ep_llm_failed(agent_ep *ep, const char *why)
{
    ep->out.stop = AGENT_STOP_LLM_ERROR;
    snprintf(ep->out.error, sizeof ep->out.error, "%s", why);
    if (ep->o->progress)
        fprintf(ep->o->progress, "lis: LLM error: %s\n", why);
    ep->state = S_END;
}

void agent_ep_llm_reply(agent_ep *ep, llm_reply *r)
{
    ep->reply = *r;
    memset(r, 0, sizeof *r);
    llm_reply *reply = &ep->reply;
    ep->out.llm_seconds += reply->seconds;
    if (reply->usage.known) {
        ep->out.prompt_tokens += reply->usage.prompt_tokens;
        ep->out.completion_tokens += reply->usage.completion_tokens;
    }
    /* the calls: native, or written in the text (original: native only,
     * docs/agent.md fix 1); only the first runs (original: tool_calls[0]) */
    cJSON *m = reply->message;
    text_call tcs[MAX_CALLS];
    ep->thought = agent_strdup(reply->content);
    if (!reply->tool_calls && *reply->content) {
        char *rest = NULL;
        size_t ntext = agent_parse_text_calls(reply->content, ep->tools, tcs, MAX_CALLS, &rest);
        if (ntext) {
            cJSON *arr = cJSON_CreateArray();
            for (size_t i = 0; i < ntext; i++) {
                cJSON *tc = cJSON_CreateObject();
                char id[64];
                snprintf(id, sizeof id, "call_%d_%zu", ep->step + 1, i);
                cJSON_AddStringToObject(tc, "id", id);
                cJSON_AddStringToObject(tc, "type", "function");
                cJSON *f = cJSON_AddObjectToObject(tc, "function");
                cJSON_AddStringToObject(f, "name", tcs[i].name);
                cJSON_AddStringToObject(f, "arguments", tcs[i].arguments);
                cJSON_AddItemToArray(arr, tc);
            }
            cJSON_ReplaceItemInObjectCaseSensitive(m, "content",
                                                   cJSON_CreateString(rest ? rest : ""));
            cJSON_AddItemToObject(m, "tool_calls", arr);
            reply->tool_calls = arr;
            free(ep->thought);
            ep->thought = agent_strdup(rest ? rest : "");
            agent_text_calls_free(tcs, ntext);
        }
        free(rest);
    }
    /* every call needs an id for the replies */
    ep->ncalls = reply->tool_calls ? cJSON_GetArraySize(reply->tool_calls) : 0;
    for (int i = 0; i < ep->ncalls; i++) {
        cJSON *tc = cJSON_GetArrayItem(reply->tool_calls, i);
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(tc, "id"));
        if (!id || !*id) {
            char nid[64];
            snprintf(nid, sizeof nid, "call_%d_%d", ep->step + 1, i);
            cJSON_DeleteItemFromObjectCaseSensitive(tc, "id");
            cJSON_AddStringToObject(tc, "id", nid);
        }
    }
    ep->name = "";
    ep->params = NULL;
    if (ep->ncalls) {
        const cJSON *f = cJSON_GetObjectItem(cJSON_GetArrayItem(reply->tool_calls, 0), "function");
        const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(f, "name"));
        const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(f, "arguments"));
        ep->params = a ? cJSON_Parse(a) : NULL;
        if (n && cJSON_IsObject(ep->params))
            ep->name = n;
    }
    if (!*ep->name) {
        cJSON_Delete(ep->params);
        ep->params = NULL;
    }
    ep->state = S_TOOL;
}

const char *agent_ep_tool(const agent_ep *ep, const cJSON **params)
{
    *params = ep->params;
    return ep->state == S_TOOL ? ep->name : "";
}

static void drop_pending(agent_ep *ep)
{
    if (ep->mon_open) { /* a step the driver began and never ran: closed, its effects dropped */
        lis_error ign;
        lis_effects *fx = NULL;
        if (lis_monitor_step_end(ep->mon, NULL, &fx, &ign) == 0)
            lis_effects_free(fx);
        ep->mon_open = 0;
    }
    lis_effects_free(ep->fx);
    ep->fx = NULL;
    ep->fx_error[0] = 0;
    free(ep->thought);
    ep->thought = NULL;
    cJSON_Delete(ep->params);
    ep->params = NULL;
    llm_reply_free(&ep->reply);
    ep->name = "";
    ep->ncalls = 0;
}

void agent_ep_set_monitor(agent_ep *ep, lis_monitor *mon) { ep->mon = mon; }

void agent_ep_tool_begin(agent_ep *ep)
{
    if (!ep->mon || ep->mon_open || ep->state != S_TOOL)
        return;
    char cmd[4096];
    agent_watch_call(ep->name, ep->params, cmd, sizeof cmd);
    lis_monitor_call call = {ep->name, cmd};
    lis_error err = {0};
    lis_effects_free(ep->fx);
    ep->fx = NULL;
    ep->fx_error[0] = 0;
    if (lis_monitor_step_begin(ep->mon, &call, &err) < 0)
        snprintf(ep->fx_error, sizeof ep->fx_error, "%s", err.msg);
    else
        ep->mon_open = 1;
}

void agent_ep_tool_end(agent_ep *ep, const agent_tool_out *out)
{
    if (!ep->mon_open)
        return;
    ep->mon_open = 0;
    lis_result r;
    memset(&r, 0, sizeof r);
    r.memory_peak = out ? out->memory_peak : 0;
    lis_error err = {0};
    if (lis_monitor_step_end(ep->mon, &r, &ep->fx, &err) < 0)
        snprintf(ep->fx_error, sizeof ep->fx_error, "%s", err.msg);
}

lis_policy_action agent_ep_monitor_event(agent_ep *ep, char *rule, size_t len)
{
    char r[64] = "";
    lis_policy_action a = ep->mon ? lis_monitor_take_action(ep->mon, r, sizeof r) : LIS_ACT_NONE;
    if (a == LIS_ACT_STOP && !ep->policy_stop) {
        ep->policy_stop = 1;
        snprintf(ep->policy_rule, sizeof ep->policy_rule, "%s", r);
        snprintf(ep->policy_what, sizeof ep->policy_what, "it fired during step %d", ep->step + 1);
    }
    if (rule && len)
        snprintf(rule, len, "%s", r);
    return a;
}

const cJSON *agent_ep_last_step(const agent_ep *ep)
{
    return cJSON_GetArrayItem(ep->steps, cJSON_GetArraySize(ep->steps) - 1);
}

/* The step's effects (or why it has none) into its trajectory object; its
 * alerts into the log; a stop rule's firing remembered. */
static void step_effects(agent_ep *ep, cJSON *st)
{
    FILE *log = ep->o->progress;
    if (!ep->fx) {
        cJSON_AddNullToObject(st, "effects");
        cJSON_AddStringToObject(st, "effects_error", ep->fx_error);
        return;
    }
    cJSON *j = lis_effects_json(ep->fx);
    if (!j) {
        cJSON_AddNullToObject(st, "effects");
        cJSON_AddStringToObject(st, "effects_error", "out of memory");
        return;
    }
    cJSON_AddItemToObject(st, "effects", j);
    lis_effects_summary sum;
    lis_effects_summarize(ep->fx, &sum);
    ep->out.effects++;
    ep->out.alerts += (int)sum.alerts;
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(j, "alerts"))
    {
        const char *rule = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "rule"));
        const char *act = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "action"));
        const char *what = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "what"));
        if (log)
            fprintf(log, "lis: step %d: policy rule %s (%s): %s\n", ep->step + 1, rule ? rule : "?",
                    act ? act : "?", what ? what : "");
        if (sum.action == LIS_ACT_STOP && act && !strcmp(act, "stop") && rule &&
            !strcmp(rule, sum.action_rule)) {
            ep->policy_stop = 1;
            snprintf(ep->policy_rule, sizeof ep->policy_rule, "%s", rule);
            snprintf(ep->policy_what, sizeof ep->policy_what, "%s", what ? what : "");
        }
    }
}

void agent_ep_tool_done(agent_ep *ep, agent_tool_out *tout)
{
    FILE *log = ep->o->progress;
    const char *name = ep->name ? ep->name : "";
    const cJSON *params = ep->params;
    llm_reply *reply = &ep->reply;
    ep->done = tout->done;
    ep->out.tool_seconds += tout->exec_seconds;
    ep->out.oom_kills += tout->oom_killed;
    if (tout->memory_peak > ep->out.memory_peak)
        ep->out.memory_peak = tout->memory_peak;
    const char *obs = tout->obs ? tout->obs : "";

    /* the trajectory step; original: TrajectoryStep, plus usage and tool time */
    cJSON *st = cJSON_CreateObject();
    cJSON_AddStringToObject(st, "thought", ep->thought ? ep->thought : "");
    cJSON_AddStringToObject(st, "reasoning_content", reply->reasoning ? reply->reasoning : "");
    cJSON *act = cJSON_AddObjectToObject(st, "action");
    cJSON_AddStringToObject(act, "function", name);
    cJSON_AddItemToObject(act, "parameters",
                          params ? cJSON_Duplicate(params, 1) : cJSON_CreateObject());
    cJSON_AddStringToObject(st, "observation", obs);
    cJSON *md = cJSON_AddObjectToObject(st, "metadata");
    cJSON_AddNumberToObject(md, "step", ep->step + 1);
    cJSON_AddNumberToObject(md, "exec_time", reply->seconds); /* original: the LLM's time */
    cJSON_AddNumberToObject(md, "tool_exec_time", tout->exec_seconds);
    if (reply->usage.known) {
        cJSON *u = cJSON_AddObjectToObject(md, "usage");
        cJSON_AddNumberToObject(u, "prompt_tokens", (double)reply->usage.prompt_tokens);
        cJSON_AddNumberToObject(u, "completion_tokens", (double)reply->usage.completion_tokens);
        cJSON_AddNumberToObject(u, "total_tokens", (double)reply->usage.total_tokens);
    }
    cJSON_AddNumberToObject(md, "llm_attempts", reply->attempts);
    if (ep->ncalls > 1)
        cJSON_AddNumberToObject(md, "tool_calls_ignored", ep->ncalls - 1);
    if (reply->finish_reason[0])
        cJSON_AddStringToObject(md, "finish_reason", reply->finish_reason);
    if (ep->mon_open) /* the driver did not close the step: closed here */
        agent_ep_tool_end(ep, tout);
    if (ep->fx || ep->fx_error[0])
        step_effects(ep, st);
    cJSON_AddItemToArray(ep->steps, st);

    if (log) {
        char args[80] = "";
        if (*name)
            short_args(args, sizeof args, name, params);
        if (!strcmp(name, "execute_bash"))
            fprintf(log, "lis: step %d: execute_bash %s -> exit %d (%.2fs; llm %.1fs)\n",
                    ep->step + 1, args, tout->exit_code, tout->exec_seconds, reply->seconds);
        else if (*name)
            fprintf(log, "lis: step %d: %s %s (%.2fs; llm %.1fs)\n", ep->step + 1, name, args,
                    tout->exec_seconds, reply->seconds);
        else
            fprintf(log,
                    "lis: step %d: no usable tool call; sent the continue message "
                    "(llm %.1fs)\n",
                    ep->step + 1, reply->seconds);
    }

    /* the history: the assistant message as the server sent it, then answers */
    cJSON_AddItemToArray(ep->history, reply->message);
    reply->message = NULL;
    if (reply->usage.known && reply->usage.total_tokens > 0) {
        ep->known_tokens = reply->usage.total_tokens;
        ep->known_upto = cJSON_GetArraySize(ep->history);
    }
    if (ep->ncalls) {
        cJSON *calls = cJSON_GetObjectItem(cJSON_GetArrayItem(ep->history,
                                                              cJSON_GetArraySize(ep->history) - 1),
                                           "tool_calls");
        for (int i = 0; i < ep->ncalls; i++) {
            const char *id =
                cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(calls, i), "id"));
            cJSON *t = msg("tool", i == 0 ? obs : IGNORED_CALL_MSG);
            cJSON_AddStringToObject(t, "tool_call_id", id ? id : "");
            cJSON_AddItemToArray(ep->history, t);
        }
    } else { /* original: the continue message as a user message */
        cJSON_AddItemToArray(ep->history, msg("user", obs));
    }
    free(tout->obs);
    tout->obs = NULL;
    drop_pending(ep);
    ep->step++;
    ep->state = S_ASK;
    if (ep->o->on_step)
        ep->o->on_step(ep->o->on_step_arg, st);
    if (ep->policy_stop)
        policy_end(ep, ep->policy_what);
}

void agent_ep_stop(agent_ep *ep, agent_stop reason, const char *error)
{
    if (ep->state == S_END)
        return;
    drop_pending(ep);
    ep->out.stop = reason;
    snprintf(ep->out.error, sizeof ep->out.error, "%s", error ? error : "");
    if (ep->o->progress)
        fprintf(ep->o->progress, "lis: stopped: %s%s%s\n", agent_stop_name(reason),
                error && *error ? ": " : "", error ? error : "");
    ep->state = S_END;
}

cJSON *agent_ep_finish(agent_ep *ep, agent_outcome *out)
{
    drop_pending(ep);
    if (ep->done && ep->out.stop != AGENT_STOP_POLICY)
        ep->out.stop = AGENT_STOP_SUBMIT;
    ep->out.submitted = ep->done;
    ep->out.steps = ep->step;
    *out = ep->out;
    const agent_opts *o = ep->o;
    cJSON *traj = cJSON_CreateObject();
    cJSON_AddStringToObject(traj, "problem_statement", o->query ? o->query : "");
    cJSON_AddItemToObject(traj, "steps", ep->steps);
    cJSON *md = cJSON_AddObjectToObject(traj, "metadata");
    cJSON_AddNumberToObject(md, "total_steps", ep->step);
    cJSON_AddStringToObject(md, "stop_reason", agent_stop_name(out->stop));
    if (out->error[0])
        cJSON_AddStringToObject(md, "error", out->error);
    if (out->stop_rule[0])
        cJSON_AddStringToObject(md, "stop_rule", out->stop_rule);
    if (ep->mon) {
        cJSON_AddBoolToObject(md, "effects", 1);
        cJSON_AddNumberToObject(md, "alerts", out->alerts);
    }
    if (o->llm_name)
        cJSON_AddStringToObject(md, "llm_name", o->llm_name);
    cJSON_AddNumberToObject(md, "prompt_tokens", (double)out->prompt_tokens);
    cJSON_AddNumberToObject(md, "completion_tokens", (double)out->completion_tokens);
    cJSON_Delete(ep->history);
    cJSON_Delete(ep->tools);
    free(ep);
    return traj;
}
