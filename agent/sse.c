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

static void calls_release(sse_state *s)
{
    for (size_t i = 0; i < s->ncalls; i++) {
        strbuf_release(&s->calls[i].id);
        strbuf_release(&s->calls[i].name);
        strbuf_release(&s->calls[i].args);
    }
    free(s->calls);
    s->calls = NULL;
    s->ncalls = s->calls_cap = 0;
}

void sse_free(sse_state *s)
{
    strbuf_release(&s->line);
    strbuf_release(&s->data);
    strbuf_release(&s->content);
    strbuf_release(&s->reasoning);
    calls_release(s);
    cJSON_Delete(s->tool_calls);
    cJSON_Delete(s->error);
    free(s->bad);
    memset(s, 0, sizeof *s);
}

/* The call a delta continues: by "index", else by "id", else the last one;
 * a new one when none matches. Searched from the end: deltas continue the
 * latest call, so the usual lookup is one comparison. NULL past
 * SSE_MAX_CALLS or out of memory. */
static sse_call *find_call(sse_state *s, const cJSON *idx, const cJSON *id)
{
    for (size_t i = s->ncalls; i-- > 0;) {
        sse_call *c = &s->calls[i];
        if (cJSON_IsNumber(idx)
                ? c->index == (long)idx->valuedouble
                : cJSON_IsString(id) && c->id.s && !strcmp(c->id.s, id->valuestring))
            return c;
    }
    if (!cJSON_IsNumber(idx) && !cJSON_IsString(id) && s->ncalls)
        return &s->calls[s->ncalls - 1];
    if (s->ncalls >= SSE_MAX_CALLS || LIS_GROW(s->calls, s->calls_cap, s->ncalls + 1) < 0) {
        s->calls_dropped = 1;
        return NULL;
    }
    sse_call *c = &s->calls[s->ncalls];
    memset(c, 0, sizeof *c);
    c->index = cJSON_IsNumber(idx) ? (long)idx->valuedouble : (long)s->ncalls;
    s->ncalls++;
    return c;
}

static void tool_delta(sse_state *s, const cJSON *d)
{
    const cJSON *id = cJSON_GetObjectItem(d, "id");
    sse_call *c = find_call(s, cJSON_GetObjectItem(d, "index"), id);
    if (!c)
        return;
    if (cJSON_IsString(id) && *id->valuestring) {
        c->id.len = 0;
        strbuf_puts(&c->id, id->valuestring);
    }
    const cJSON *f = cJSON_GetObjectItem(d, "function");
    const cJSON *name = cJSON_GetObjectItem(f, "name");
    const cJSON *args = cJSON_GetObjectItem(f, "arguments");
    if (cJSON_IsString(name))
        strbuf_puts(&c->name, name->valuestring);
    if (cJSON_IsString(args))
        strbuf_puts(&c->args, args->valuestring);
}

/* calls as the message's tool_calls array (once, at the end) */
static void build_calls(sse_state *s)
{
    for (size_t i = 0; i < s->ncalls; i++) {
        sse_call *c = &s->calls[i];
        cJSON *tc = cJSON_CreateObject();
        cJSON_AddStringToObject(tc, "id", c->id.s ? c->id.s : "");
        cJSON_AddStringToObject(tc, "type", "function");
        cJSON *f = cJSON_AddObjectToObject(tc, "function");
        cJSON_AddStringToObject(f, "name", c->name.s ? c->name.s : "");
        cJSON_AddStringToObject(f, "arguments", c->args.s ? c->args.s : "");
        cJSON_AddItemToArray(s->tool_calls, tc);
    }
    calls_release(s);
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
    while (n) {
        const char *nl = memchr(p, '\n', n);
        size_t k = nl ? (size_t)(nl - p) : n;
        strbuf_putn(&s->line, p, k); /* the whole line's part in this piece at once */
        if (!nl)
            return;
        line(s, s->line.s ? s->line.s : "", s->line.len);
        s->line.len = 0;
        if (s->line.s)
            s->line.s[0] = 0;
        p += k + 1;
        n -= k + 1;
    }
}

void sse_finish(sse_state *s)
{
    if (s->line.len) {
        line(s, s->line.s, s->line.len);
        s->line.len = 0;
    }
    dispatch(s);
    build_calls(s);
}
