/* anthropic.c - the Anthropic Messages API for the LLM client (llm.c): the
 * OpenAI-style history as a Messages request (system apart, tool results as
 * user blocks, thinking blocks kept), and a Messages reply as an OpenAI-style
 * assistant message. */
#include "agent_internal.h"

#include <stdlib.h>
#include <string.h>

static cJSON *text_block(const char *text)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "type", "text");
    cJSON_AddStringToObject(t, "text", text);
    return t;
}

/* Appends blocks to the last message when it has the same role. */
static void push(cJSON *msgs, const char *role, cJSON *blocks)
{
    cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    const cJSON *lr = cJSON_GetObjectItem(last, "role");
    if (cJSON_IsString(lr) && !strcmp(lr->valuestring, role)) {
        cJSON *content = cJSON_GetObjectItem(last, "content");
        while (cJSON_GetArraySize(blocks))
            cJSON_AddItemToArray(content, cJSON_DetachItemFromArray(blocks, 0));
        cJSON_Delete(blocks);
        return;
    }
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddItemToObject(m, "content", blocks);
    cJSON_AddItemToArray(msgs, m);
}

cJSON *llm_anthropic_request(const cJSON *messages, const cJSON *tools, const llm_config *cfg,
                             long max_tokens)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "model", cfg->model ? cfg->model : "");
    cJSON_AddNumberToObject(b, "max_tokens", (double)max_tokens);
    strbuf system = {0};
    cJSON *msgs = cJSON_CreateArray();
    const cJSON *m;
    cJSON_ArrayForEach(m, messages)
    {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(m, "role"));
        const char *content = cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"));
        if (!role)
            continue;
        if (!strcmp(role, "system")) {
            if (system.len)
                strbuf_puts(&system, "\n\n");
            strbuf_puts(&system, content ? content : "");
        } else if (!strcmp(role, "user")) {
            cJSON *blocks = cJSON_CreateArray();
            cJSON_AddItemToArray(blocks, text_block(content ? content : ""));
            push(msgs, "user", blocks);
        } else if (!strcmp(role, "tool")) {
            cJSON *blocks = cJSON_CreateArray(), *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "type", "tool_result");
            const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(m, "tool_call_id"));
            cJSON_AddStringToObject(r, "tool_use_id", id ? id : "");
            cJSON_AddStringToObject(r, "content", content ? content : "");
            cJSON_AddItemToArray(blocks, r);
            push(msgs, "user", blocks);
        } else if (!strcmp(role, "assistant")) {
            cJSON *blocks = cJSON_CreateArray();
            const cJSON *tb = cJSON_GetObjectItem(m, "thinking_blocks"), *x;
            cJSON_ArrayForEach(x, tb) cJSON_AddItemToArray(blocks, cJSON_Duplicate(x, 1));
            if (content && *content)
                cJSON_AddItemToArray(blocks, text_block(content));
            const cJSON *tc;
            cJSON_ArrayForEach(tc, cJSON_GetObjectItem(m, "tool_calls"))
            {
                const cJSON *f = cJSON_GetObjectItem(tc, "function");
                const char *args = cJSON_GetStringValue(cJSON_GetObjectItem(f, "arguments"));
                cJSON *input = args ? cJSON_Parse(args) : NULL;
                if (!cJSON_IsObject(input)) {
                    cJSON_Delete(input);
                    input = cJSON_CreateObject();
                }
                cJSON *u = cJSON_CreateObject();
                cJSON_AddStringToObject(u, "type", "tool_use");
                const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(tc, "id"));
                const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(f, "name"));
                cJSON_AddStringToObject(u, "id", id ? id : "");
                cJSON_AddStringToObject(u, "name", name ? name : "");
                cJSON_AddItemToObject(u, "input", input);
                cJSON_AddItemToArray(blocks, u);
            }
            if (!cJSON_GetArraySize(blocks))
                cJSON_AddItemToArray(blocks, text_block("(no content)"));
            push(msgs, "assistant", blocks);
        }
    }
    if (system.len)
        cJSON_AddStringToObject(b, "system", system.s);
    strbuf_release(&system);
    cJSON_AddItemToObject(b, "messages", msgs);
    if (tools) {
        cJSON *at = cJSON_AddArrayToObject(b, "tools");
        const cJSON *t;
        cJSON_ArrayForEach(t, tools)
        {
            const cJSON *f = cJSON_GetObjectItem(t, "function");
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToObject(o, "name", cJSON_Duplicate(cJSON_GetObjectItem(f, "name"), 1));
            cJSON_AddItemToObject(o, "description",
                                  cJSON_Duplicate(cJSON_GetObjectItem(f, "description"), 1));
            cJSON_AddItemToObject(o, "input_schema",
                                  cJSON_Duplicate(cJSON_GetObjectItem(f, "parameters"), 1));
            cJSON_AddItemToArray(at, o);
        }
    }
    if (cfg->send_temperature)
        cJSON_AddNumberToObject(b, "temperature", cfg->temperature);
    agent_json_merge(b, cfg->extra_body);
    return b;
}

cJSON *llm_anthropic_message(const cJSON *resp, llm_usage *usage, char *finish, size_t flen)
{
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "role", "assistant");
    strbuf text = {0}, thinking = {0};
    cJSON *calls = cJSON_CreateArray(), *blocks = cJSON_CreateArray();
    const cJSON *b;
    cJSON_ArrayForEach(b, cJSON_GetObjectItem(resp, "content"))
    {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(b, "type"));
        if (!type)
            continue;
        if (!strcmp(type, "text")) {
            const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(b, "text"));
            strbuf_puts(&text, t ? t : "");
        } else if (!strcmp(type, "thinking") || !strcmp(type, "redacted_thinking")) {
            const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(b, "thinking"));
            if (t)
                strbuf_puts(&thinking, t);
            cJSON_AddItemToArray(blocks, cJSON_Duplicate(b, 1));
        } else if (!strcmp(type, "tool_use")) {
            cJSON *tc = cJSON_CreateObject();
            const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(b, "id"));
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(b, "name"));
            cJSON_AddStringToObject(tc, "id", id ? id : "");
            cJSON_AddStringToObject(tc, "type", "function");
            cJSON *f = cJSON_AddObjectToObject(tc, "function");
            cJSON_AddStringToObject(f, "name", name ? name : "");
            char *args = cJSON_PrintUnformatted(cJSON_GetObjectItem(b, "input"));
            cJSON_AddStringToObject(f, "arguments", args ? args : "{}");
            free(args);
            cJSON_AddItemToArray(calls, tc);
        }
    }
    cJSON_AddStringToObject(msg, "content", text.s ? text.s : "");
    if (cJSON_GetArraySize(calls))
        cJSON_AddItemToObject(msg, "tool_calls", calls);
    else
        cJSON_Delete(calls);
    if (thinking.len)
        cJSON_AddStringToObject(msg, "reasoning_content", thinking.s);
    if (cJSON_GetArraySize(blocks))
        cJSON_AddItemToObject(msg, "thinking_blocks", blocks);
    else
        cJSON_Delete(blocks);
    strbuf_release(&text);
    strbuf_release(&thinking);
    const cJSON *u = cJSON_GetObjectItem(resp, "usage");
    if (cJSON_IsObject(u) && usage) {
        usage->prompt_tokens = agent_json_long(cJSON_GetObjectItem(u, "input_tokens"));
        usage->completion_tokens = agent_json_long(cJSON_GetObjectItem(u, "output_tokens"));
        usage->total_tokens = usage->prompt_tokens + usage->completion_tokens;
        usage->known = 1;
    }
    const char *sr = cJSON_GetStringValue(cJSON_GetObjectItem(resp, "stop_reason"));
    if (finish && sr)
        snprintf(finish, flen, "%s", sr);
    return msg;
}
