/* sse.c - OpenAI streaming responses (text/event-stream): events are parsed
 * as they arrive and content, reasoning and tool_call deltas assembled. */
#include "agent_internal.h"

#include <stdlib.h>
#include <string.h>

void sse_init(sse_state *s)
{
    memset(s, 0, sizeof *s);
    s->tool_calls = cJSON_CreateArray();
}

void sse_free(sse_state *s)
{
    strbuf_release(&s->line);
    strbuf_release(&s->data);
    strbuf_release(&s->content);
    strbuf_release(&s->reasoning);
    cJSON_Delete(s->tool_calls);
    cJSON_Delete(s->error);
    free(s->bad);
    memset(s, 0, sizeof *s);
}

static void append_str(cJSON *obj, const char *key, const char *add)
{
    cJSON *cur = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(cur)) {
        cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
        cJSON_AddStringToObject(obj, key, add);
        return;
    }
    strbuf b = {0};
    strbuf_puts(&b, cur->valuestring);
    strbuf_puts(&b, add);
    char *s = strbuf_take(&b);
    if (s) {
        cJSON_ReplaceItemInObjectCaseSensitive(obj, key, cJSON_CreateString(s));
        free(s);
    }
}

static void tool_delta(sse_state *s, const cJSON *d)
{
    const cJSON *idx = cJSON_GetObjectItem(d, "index");
    const cJSON *id = cJSON_GetObjectItem(d, "id");
    cJSON *tc = NULL, *it;
    cJSON_ArrayForEach(it, s->tool_calls)
    {
        const cJSON *i2 = cJSON_GetObjectItem(it, "index");
        if (cJSON_IsNumber(idx)
                ? (cJSON_IsNumber(i2) && i2->valueint == idx->valueint)
                : (cJSON_IsString(id) && cJSON_IsString(cJSON_GetObjectItem(it, "id")) &&
                   !strcmp(cJSON_GetObjectItem(it, "id")->valuestring, id->valuestring)))
            tc = it;
    }
    if (!tc) {
        if (!cJSON_IsNumber(idx) && !cJSON_IsString(id) && cJSON_GetArraySize(s->tool_calls))
            tc = cJSON_GetArrayItem(s->tool_calls, cJSON_GetArraySize(s->tool_calls) - 1);
        else {
            tc = cJSON_CreateObject();
            cJSON_AddNumberToObject(tc, "index",
                                    cJSON_IsNumber(idx) ? idx->valueint
                                                        : cJSON_GetArraySize(s->tool_calls));
            cJSON_AddStringToObject(tc, "id", "");
            cJSON_AddStringToObject(tc, "type", "function");
            cJSON *f = cJSON_AddObjectToObject(tc, "function");
            cJSON_AddStringToObject(f, "name", "");
            cJSON_AddStringToObject(f, "arguments", "");
            cJSON_AddItemToArray(s->tool_calls, tc);
        }
    }
    if (cJSON_IsString(id) && *id->valuestring)
        cJSON_ReplaceItemInObjectCaseSensitive(tc, "id", cJSON_CreateString(id->valuestring));
    const cJSON *f = cJSON_GetObjectItem(d, "function");
    const cJSON *name = cJSON_GetObjectItem(f, "name");
    const cJSON *args = cJSON_GetObjectItem(f, "arguments");
    cJSON *tf = cJSON_GetObjectItem(tc, "function");
    if (cJSON_IsString(name))
        append_str(tf, "name", name->valuestring);
    if (cJSON_IsString(args))
        append_str(tf, "arguments", args->valuestring);
}

static void dispatch(sse_state *s)
{
    if (!s->data.len && !s->data.s)
        return;
    char *data = strbuf_take(&s->data);
    if (!data)
        return;
    s->events++;
    if (!strcmp(data, "[DONE]")) {
        s->done = 1;
        free(data);
        return;
    }
    cJSON *j = cJSON_Parse(data);
    if (!j) {
        if (!s->bad)
            s->bad = agent_strndup(data, strlen(data) > 300 ? 300 : strlen(data));
        free(data);
        return;
    }
    free(data);
    cJSON *e = cJSON_GetObjectItem(j, "error");
    if (e && !cJSON_IsNull(e) && !s->error)
        s->error = cJSON_Duplicate(e, 1);
    const cJSON *usage = cJSON_GetObjectItem(j, "usage");
    if (cJSON_IsObject(usage)) {
        s->usage.prompt_tokens = agent_json_long(cJSON_GetObjectItem(usage, "prompt_tokens"));
        s->usage.completion_tokens =
            agent_json_long(cJSON_GetObjectItem(usage, "completion_tokens"));
        s->usage.total_tokens = agent_json_long(cJSON_GetObjectItem(usage, "total_tokens"));
        s->usage.known = 1;
    }
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    const cJSON *d = cJSON_GetObjectItem(ch, "delta");
    if (!d)
        d = cJSON_GetObjectItem(ch, "message");
    const cJSON *c = cJSON_GetObjectItem(d, "content");
    if (cJSON_IsString(c))
        strbuf_puts(&s->content, c->valuestring);
    const cJSON *r = cJSON_GetObjectItem(d, "reasoning_content");
    if (!cJSON_IsString(r))
        r = cJSON_GetObjectItem(d, "reasoning");
    if (cJSON_IsString(r))
        strbuf_puts(&s->reasoning, r->valuestring);
    const cJSON *tcs = cJSON_GetObjectItem(d, "tool_calls"), *t;
    cJSON_ArrayForEach(t, tcs) tool_delta(s, t);
    const cJSON *fr = cJSON_GetObjectItem(ch, "finish_reason");
    if (cJSON_IsString(fr))
        snprintf(s->finish_reason, sizeof s->finish_reason, "%s", fr->valuestring);
    cJSON_Delete(j);
}

static void line(sse_state *s, const char *l, size_t n)
{
    if (n && l[n - 1] == '\r')
        n--;
    if (!n) {
        dispatch(s);
        return;
    }
    if (l[0] == ':')
        return;
    if (n >= 5 && !strncmp(l, "data:", 5)) {
        const char *v = l + 5;
        size_t vn = n - 5;
        if (vn && *v == ' ')
            v++, vn--;
        if (s->data.s)
            strbuf_putc(&s->data, '\n');
        strbuf_putn(&s->data, v, vn);
    }
}

void sse_feed(sse_state *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            line(s, s->line.s ? s->line.s : "", s->line.len);
            s->line.len = 0;
            if (s->line.s)
                s->line.s[0] = 0;
        } else {
            strbuf_putc(&s->line, p[i]);
        }
    }
}

void sse_finish(sse_state *s)
{
    if (s->line.len) {
        line(s, s->line.s, s->line.len);
        s->line.len = 0;
    }
    dispatch(s);
    cJSON *t;
    cJSON_ArrayForEach(t, s->tool_calls) cJSON_DeleteItemFromObjectCaseSensitive(t, "index");
}
