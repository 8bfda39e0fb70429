/* textcalls.c - tool calls written into the reply text, for models served
 * without a tool-call parser: hermes (<tool_call>{"name":..,"arguments":..}
 * </tool_call>) and qwen3_coder (<function=NAME><parameter=P>V</parameter>
 * </function>, optionally inside <tool_call>). */
#include "agent_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char *param_type(const cJSON *tools, const char *fn, const char *param)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *f = cJSON_GetObjectItem(t, "function");
        const cJSON *n = cJSON_GetObjectItem(f, "name");
        if (!cJSON_IsString(n) || strcmp(n->valuestring, fn))
            continue;
        const cJSON *p =
            cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(f, "parameters"),
                                                    "properties"),
                                param);
        const cJSON *ty = cJSON_GetObjectItem(p, "type");
        return cJSON_IsString(ty) ? ty->valuestring : NULL;
    }
    return NULL;
}

static char *trim_dup(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    return agent_strndup(s, n);
}

/* A typed value for a qwen3_coder parameter, as vLLM's parser converts it. */
static cJSON *typed_value(const char *type, const char *v)
{
    if (type && strcmp(type, "string")) {
        char *t = trim_dup(v, strlen(v));
        cJSON *j = NULL;
        if (t) {
            if (!strcmp(type, "integer")) {
                char *end;
                long x = strtol(t, &end, 10);
                if (*t && !*end)
                    j = cJSON_CreateNumber((double)x);
            } else if (!strcmp(type, "number")) {
                char *end;
                double x = strtod(t, &end);
                if (*t && !*end)
                    j = cJSON_CreateNumber(x);
            } else if (!strcmp(type, "boolean")) {
                if (!strcasecmp(t, "true") || !strcasecmp(t, "false"))
                    j = cJSON_CreateBool(!strcasecmp(t, "true"));
            } else {
                j = cJSON_Parse(t);
            }
        }
        free(t);
        if (j)
            return j;
    }
    return cJSON_CreateString(v);
}

/* Parses one <function=...>...</function> body at s (after "<function=").
 * Returns the call, or 0 when malformed. */
static int parse_qwen(const char *s, const char *end, const cJSON *tools, text_call *call)
{
    const char *gt = memchr(s, '>', (size_t)(end - s));
    if (!gt)
        return 0;
    char *name = trim_dup(s, (size_t)(gt - s));
    if (!name || !*name) {
        free(name);
        return 0;
    }
    cJSON *args = cJSON_CreateObject();
    const char *p = gt + 1;
    for (;;) {
        const char *ps = strstr(p, "<parameter=");
        if (!ps || ps >= end)
            break;
        ps += 11;
        const char *pg = strchr(ps, '>');
        if (!pg || pg >= end)
            break;
        char *pname = trim_dup(ps, (size_t)(pg - ps));
        const char *vs = pg + 1;
        const char *ve = strstr(vs, "</parameter>");
        const char *next = strstr(vs, "<parameter=");
        if (!ve || ve > end || (next && next < ve))
            ve = next && next < end ? next : end;
        size_t vn = (size_t)(ve - vs);
        if (vn && *vs == '\n')
            vs++, vn--;
        if (vn && vs[vn - 1] == '\n')
            vn--;
        char *val = agent_strndup(vs, vn);
        if (pname && val)
            cJSON_AddItemToObject(args, pname, typed_value(param_type(tools, name, pname), val));
        free(pname);
        free(val);
        p = ve;
        if (!strncmp(p, "</parameter>", 12))
            p += 12;
    }
    call->name = name;
    call->arguments = cJSON_PrintUnformatted(args);
    cJSON_Delete(args);
    return call->arguments != NULL;
}

/* Parses a hermes JSON body. */
static int parse_hermes(const char *s, size_t n, text_call *call)
{
    char *body = trim_dup(s, n);
    cJSON *j = body ? cJSON_Parse(body) : NULL;
    free(body);
    const cJSON *name = cJSON_GetObjectItem(j, "name");
    const cJSON *args = cJSON_GetObjectItem(j, "arguments");
    if (!args)
        args = cJSON_GetObjectItem(j, "parameters");
    int ok = 0;
    if (cJSON_IsObject(j) && cJSON_IsString(name)) {
        call->name = agent_strdup(name->valuestring);
        if (cJSON_IsString(args))
            call->arguments = agent_strdup(args->valuestring);
        else if (args)
            call->arguments = cJSON_PrintUnformatted(args);
        else
            call->arguments = agent_strdup("{}");
        ok = call->name && call->arguments;
    }
    cJSON_Delete(j);
    return ok;
}

size_t agent_parse_text_calls(const char *content, const cJSON *tools, text_call *calls, size_t max,
                              char **rest)
{
    size_t n = 0;
    strbuf r = {0};
    strbuf_putn(&r, "", 0);
    const char *p = content ? content : "";
    for (;;) {
        const char *tc = strstr(p, "<tool_call>");
        const char *fn = strstr(p, "<function=");
        const char *at = tc && (!fn || tc < fn) ? tc : fn;
        if (!at)
            break;
        strbuf_putn(&r, p, (size_t)(at - p));
        text_call call = {0};
        int ok = 0;
        if (at == tc) {
            const char *body = tc + 11;
            const char *close = strstr(body, "</tool_call>");
            const char *end = close ? close : body + strlen(body);
            const char *inner_fn = strstr(body, "<function=");
            if (inner_fn && inner_fn < end)
                ok = parse_qwen(inner_fn + 10, end, tools, &call);
            else
                ok = parse_hermes(body, (size_t)(end - body), &call);
            p = close ? close + 12 : end;
        } else {
            const char *body = fn + 10;
            const char *close = strstr(body, "</function>");
            const char *end = close ? close : body + strlen(body);
            ok = parse_qwen(body, end, tools, &call);
            p = close ? close + 11 : end;
        }
        if (ok && n < max)
            calls[n++] = call;
        else {
            free(call.name);
            free(call.arguments);
        }
    }
    strbuf_puts(&r, p);
    if (rest) {
        char *all = strbuf_take(&r);
        *rest = all ? trim_dup(all, strlen(all)) : NULL;
        free(all);
    } else {
        strbuf_release(&r);
    }
    return n;
}

void agent_text_calls_free(text_call *calls, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
        calls[i].name = calls[i].arguments = NULL;
    }
}
