/* loop.c - the ReAct loop of the original (agent.py::Agent.run): system and
 * instance prompt, "Steps Remaining" appended to the last message, one LLM
 * call per step, the first tool call executed, the continue message when
 * there is none, stop on submit / max steps / token ceiling / LLM failure. */
#include "agent.h"

#include <stdlib.h>
#include <string.h>

static const char IGNORED_CALL_MSG[] =
    "Error: only the first tool call of a response is executed; this call was ignored. "
    "Call it again in your next response if it is still needed.";

#define MAX_CALLS 16

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
    sbuf b = {0};
    sb_puts(&b, c ? c : "");
    sb_puts(&b, suffix);
    char *s = sb_take(&b);
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
        const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(tc,
                                             "function"), "arguments"));
        n += a ? strlen(a) : 0;
    }
    return n;
}

/* Tokens in the conversation: the server's count up to its last reply plus
 * chars/4 for what came after (the original's fallback estimate). */
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

cJSON *agent_loop(const agent_tool_env *env, const agent_opts *o, agent_outcome *out)
{
    memset(out, 0, sizeof *out);
    FILE *log = o->progress;
    cJSON *tools = agent_tool_schemas();
    cJSON *history = cJSON_CreateArray();
    cJSON *steps = cJSON_CreateArray();
    char *sys = agent_prompt_system(o->prompts);
    char *user = agent_prompt_instance(o->prompts, o->query);
    cJSON_AddItemToArray(history, msg("system", sys ? sys : ""));
    cJSON_AddItemToArray(history, msg("user", user ? user : ""));
    free(sys);
    free(user);
    lis_error err = {0};
    llm_client *llm = llm_new(&o->llm, &err);
    int max_steps = o->max_steps > 0 ? o->max_steps : 100;
    long limit = o->max_token_limit > 0 ? o->max_token_limit : 65536;
    long known_tokens = 0;
    int known_upto = 0, step = 0, done = 0;
    snprintf(out->stop_reason, sizeof out->stop_reason, "max_steps");
    if (!llm) {
        snprintf(out->stop_reason, sizeof out->stop_reason, "llm_error");
        snprintf(out->error, sizeof out->error, "%s", err.msg);
    }
    while (llm && !done && step < max_steps) {
        int remaining = max_steps - step;
        char suffix[128];
        if (remaining > 0)
            snprintf(suffix, sizeof suffix, "\nSteps Remaining: %d", remaining);
        else
            snprintf(suffix, sizeof suffix, "\nYou have reached the maximum number of steps. "
                     "Please submit your answer NOW.");
        append_content(cJSON_GetArrayItem(history, cJSON_GetArraySize(history) - 1), suffix);

        long tokens = estimate_tokens(history, known_tokens, known_upto);
        if (tokens > limit) {
            snprintf(out->stop_reason, sizeof out->stop_reason, "token_limit");
            snprintf(out->error, sizeof out->error, "Total tokens: %ld > %ld", tokens, limit);
            if (log)
                fprintf(log, "lis: stopping: the conversation has about %ld tokens, more than "
                        "--max-token-limit %ld\n", tokens, limit);
            break;
        }
        if (log)
            fprintf(log, "lis: step %d/%d: asking %s (about %ld tokens so far)\n", step + 1,
                    max_steps, o->llm_name ? o->llm_name : "the model", tokens);
        llm_reply reply;
        if (llm_chat(llm, history, tools, &reply, &err) < 0) {
            snprintf(out->stop_reason, sizeof out->stop_reason, "llm_error");
            snprintf(out->error, sizeof out->error, "%s", err.msg);
            if (log)
                fprintf(log, "lis: LLM error: %s\n", err.msg);
            break;
        }
        if (reply.usage.known) {
            out->prompt_tokens += reply.usage.prompt_tokens;
            out->completion_tokens += reply.usage.completion_tokens;
        }

        /* the calls: native, or written in the text */
        cJSON *m = reply.message;
        text_call tcs[MAX_CALLS];
        size_t ntext = 0;
        char *thought = agent_strdup(reply.content);
        if (!reply.tool_calls && *reply.content) {
            char *rest = NULL;
            ntext = agent_parse_text_calls(reply.content, tools, tcs, MAX_CALLS, &rest);
            if (ntext) {
                cJSON *arr = cJSON_CreateArray();
                for (size_t i = 0; i < ntext; i++) {
                    cJSON *tc = cJSON_CreateObject();
                    char id[64];
                    snprintf(id, sizeof id, "call_%d_%zu", step + 1, i);
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
                reply.tool_calls = arr;
                free(thought);
                thought = agent_strdup(rest ? rest : "");
                agent_text_calls_free(tcs, ntext);
            }
            free(rest);
        }
        /* every call needs an id for the replies */
        int ncalls = reply.tool_calls ? cJSON_GetArraySize(reply.tool_calls) : 0;
        for (int i = 0; i < ncalls; i++) {
            cJSON *tc = cJSON_GetArrayItem(reply.tool_calls, i);
            const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(tc, "id"));
            if (!id || !*id) {
                char nid[64];
                snprintf(nid, sizeof nid, "call_%d_%d", step + 1, i);
                cJSON_DeleteItemFromObjectCaseSensitive(tc, "id");
                cJSON_AddStringToObject(tc, "id", nid);
            }
        }

        const char *name = "";
        cJSON *params = NULL;
        if (ncalls) {
            const cJSON *f = cJSON_GetObjectItem(cJSON_GetArrayItem(reply.tool_calls, 0),
                                                 "function");
            const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(f, "name"));
            const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(f, "arguments"));
            params = a ? cJSON_Parse(a) : NULL;
            if (n && cJSON_IsObject(params))
                name = n;
        }
        agent_tool_out tout;
        agent_tool_exec(env, *name ? name : NULL, params, &tout);
        if (!*name) {
            cJSON_Delete(params);
            params = NULL;
        }
        done = tout.done;

        /* the trajectory step, in the original's shape plus usage and tool time */
        cJSON *st = cJSON_CreateObject();
        cJSON_AddStringToObject(st, "thought", thought ? thought : "");
        cJSON_AddStringToObject(st, "reasoning_content", reply.reasoning);
        cJSON *act = cJSON_AddObjectToObject(st, "action");
        cJSON_AddStringToObject(act, "function", name);
        cJSON_AddItemToObject(act, "parameters", params ? cJSON_Duplicate(params, 1)
                                                        : cJSON_CreateObject());
        cJSON_AddStringToObject(st, "observation", tout.obs);
        cJSON *md = cJSON_AddObjectToObject(st, "metadata");
        cJSON_AddNumberToObject(md, "step", step + 1);
        cJSON_AddNumberToObject(md, "exec_time", reply.seconds);
        cJSON_AddNumberToObject(md, "tool_exec_time", tout.exec_seconds);
        if (reply.usage.known) {
            cJSON *u = cJSON_AddObjectToObject(md, "usage");
            cJSON_AddNumberToObject(u, "prompt_tokens", (double)reply.usage.prompt_tokens);
            cJSON_AddNumberToObject(u, "completion_tokens",
                                    (double)reply.usage.completion_tokens);
            cJSON_AddNumberToObject(u, "total_tokens", (double)reply.usage.total_tokens);
        }
        cJSON_AddNumberToObject(md, "llm_attempts", reply.attempts);
        if (ncalls > 1)
            cJSON_AddNumberToObject(md, "tool_calls_ignored", ncalls - 1);
        if (reply.finish_reason[0])
            cJSON_AddStringToObject(md, "finish_reason", reply.finish_reason);
        cJSON_AddItemToArray(steps, st);
        free(thought);

        if (log) {
            char args[80] = "";
            if (*name)
                short_args(args, sizeof args, name, params);
            if (!strcmp(name, "execute_bash"))
                fprintf(log, "lis: step %d: execute_bash %s -> exit %d (%.2fs; llm %.1fs)\n",
                        step + 1, args, tout.exit_code, tout.exec_seconds, reply.seconds);
            else if (*name)
                fprintf(log, "lis: step %d: %s %s (%.2fs; llm %.1fs)\n", step + 1, name, args,
                        tout.exec_seconds, reply.seconds);
            else
                fprintf(log, "lis: step %d: no usable tool call; sent the continue message "
                        "(llm %.1fs)\n", step + 1, reply.seconds);
        }

        /* the history: the assistant message as the server sent it, then answers */
        cJSON_AddItemToArray(history, reply.message);
        reply.message = NULL;
        if (reply.usage.known && reply.usage.total_tokens > 0) {
            known_tokens = reply.usage.total_tokens;
            known_upto = cJSON_GetArraySize(history);
        }
        if (ncalls) {
            cJSON *calls = cJSON_GetObjectItem(cJSON_GetArrayItem(history,
                                               cJSON_GetArraySize(history) - 1), "tool_calls");
            for (int i = 0; i < ncalls; i++) {
                const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(
                    cJSON_GetArrayItem(calls, i), "id"));
                cJSON *t = msg("tool", i == 0 ? tout.obs : IGNORED_CALL_MSG);
                cJSON_AddStringToObject(t, "tool_call_id", id ? id : "");
                cJSON_AddItemToArray(history, t);
            }
        } else {
            cJSON_AddItemToArray(history, msg("user", tout.obs));
        }
        free(tout.obs);
        cJSON_Delete(params);
        llm_reply_free(&reply);
        step++;
    }
    if (done)
        snprintf(out->stop_reason, sizeof out->stop_reason, "submit");
    out->submitted = done;
    out->steps = step;
    llm_free(llm);

    cJSON *traj = cJSON_CreateObject();
    cJSON_AddStringToObject(traj, "problem_statement", o->query ? o->query : "");
    cJSON_AddItemToObject(traj, "steps", steps);
    cJSON *md = cJSON_AddObjectToObject(traj, "metadata");
    cJSON_AddNumberToObject(md, "total_steps", step);
    cJSON_AddStringToObject(md, "stop_reason", out->stop_reason);
    if (out->error[0])
        cJSON_AddStringToObject(md, "error", out->error);
    if (o->llm_name)
        cJSON_AddStringToObject(md, "llm_name", o->llm_name);
    cJSON_AddNumberToObject(md, "prompt_tokens", (double)out->prompt_tokens);
    cJSON_AddNumberToObject(md, "completion_tokens", (double)out->completion_tokens);
    cJSON_Delete(history);
    cJSON_Delete(tools);
    return traj;
}
