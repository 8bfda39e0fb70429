/* llm.c - the LLM client: OpenAI chat completions (plain or SSE streaming)
 * and the Anthropic Messages API, over libcurl, with a context-length
 * back-off plus retries with exponential backoff, jitter and Retry-After.
 * original: model_query's context-length back-off; its retries were immediate,
 * 60 s after a rate limit (docs/agent.md fix 15). */
#include "agent_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_BODY (64u << 20)
#define MIN_COMPLETION_TOKENS 8192

struct llm_client {
    llm_config cfg;
    CURL *curl;
    CURLM *multi; /* llm_chat's transfers when cfg.abort is set (made on first use) */
    unsigned seed;
    int replied; /* some request got an HTTP reply: the endpoint exists */
    char url[4096];
    char unix_path[108]; /* http+unix://: the socket (sun_path's size) */
};

/* http+unix://%2Frun%2Fvllm.sock/v1 (requests-unixsocket's form): the socket
 * path percent-encoded as the host. Fills path and the http://localhost URL
 * that goes over it; 0, or -1 when base is another scheme, -2 when bad. */
static int unix_url(const char *base, size_t n, char *path, size_t pl, char *rest, size_t rl)
{
    static const char scheme[] = "http+unix://";
    if (n < sizeof scheme - 1 || strncasecmp(base, scheme, sizeof scheme - 1))
        return -1;
    const char *h = base + sizeof scheme - 1, *end = base + n;
    const char *slash = memchr(h, '/', (size_t)(end - h));
    const char *hend = slash ? slash : end;
    size_t o = 0;
    for (const char *p = h; p < hend; p++) {
        char c = *p;
        if (c == '%' && hend - p >= 3) {
            char hex[3] = {p[1], p[2], 0};
            char *e;
            long v = strtol(hex, &e, 16);
            if (*e || v <= 0)
                return -2;
            c = (char)v;
            p += 2;
        }
        if (o + 1 >= pl)
            return -2;
        path[o++] = c;
    }
    path[o] = 0;
    if (!o || path[0] != '/')
        return -2;
    snprintf(rest, rl, "http://localhost%.*s", (int)(end - hend), hend);
    return 0;
}

llm_client *llm_new(const llm_config *cfg, lis_error *err)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        lis_fail(err, EIO, "cannot initialise libcurl");
        return NULL;
    }
    llm_client *c = calloc(1, sizeof *c);
    if (!c) {
        lis_oom(err);
        return NULL;
    }
    c->cfg = *cfg;
    if (c->cfg.max_retries <= 0)
        c->cfg.max_retries = 5;
    if (c->cfg.timeout <= 0)
        c->cfg.timeout = 1200;
    if (c->cfg.connect_timeout <= 0)
        c->cfg.connect_timeout = 30;
    if (c->cfg.backoff_max <= 0)
        c->cfg.backoff_max = 120;
    c->seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)c;
    c->curl = curl_easy_init();
    if (!c->curl) {
        free(c);
        lis_fail(err, EIO, "cannot create a libcurl handle");
        return NULL;
    }
    const char *base = cfg->base_url ? cfg->base_url : "";
    if (llm_check_base_url(base, err) < 0) {
        llm_free(c);
        return NULL;
    }
    size_t n = strlen(base);
    while (n && base[n - 1] == '/')
        n--;
    char over_unix[4096];
    int u = unix_url(base, n, c->unix_path, sizeof c->unix_path, over_unix, sizeof over_unix);
    if (u == -2) {
        llm_free(c);
        lis_fail(err, EINVAL,
                 "%s: a unix socket endpoint is http+unix://%%2Fpath%%2Fto.sock/v1 (the "
                 "socket's absolute path, percent-encoded, under %zu bytes)",
                 base, sizeof c->unix_path);
        return NULL;
    }
    if (u == 0) {
        base = over_unix;
        n = strlen(base);
    }
    if (cfg->api == LLM_API_ANTHROPIC) {
        int has_v1 = n >= 3 && !strncmp(base + n - 3, "/v1", 3);
        snprintf(c->url, sizeof c->url, "%.*s%s", (int)n, base,
                 has_v1 ? "/messages" : "/v1/messages");
    } else {
        snprintf(c->url, sizeof c->url, "%.*s/chat/completions", (int)n, base);
    }
    return c;
}

void llm_free(llm_client *c)
{
    if (!c)
        return;
    if (c->multi)
        curl_multi_cleanup(c->multi);
    curl_easy_cleanup(c->curl);
    free(c);
}

void llm_reply_free(llm_reply *r)
{
    cJSON_Delete(r->message);
    cJSON_Delete(r->tokens);
    memset(r, 0, sizeof *r);
}

/* ---- context-length handling (original: model_query's) ----------------- */

static long match_num(const char *text, const char *re, int group)
{
    regex_t rx;
    regmatch_t m[8];
    long v = 0;
    if (regcomp(&rx, re, REG_EXTENDED | REG_ICASE) != 0)
        return 0;
    if (regexec(&rx, text, 8, m, 0) == 0 && m[group].rm_so >= 0)
        v = strtol(text + m[group].rm_so, NULL, 10);
    regfree(&rx);
    return v;
}

int llm_is_token_error(const char *text, long *max_context, long *input_tokens)
{
    *max_context = *input_tokens = 0;
    char *low = agent_strdup(text ? text : "");
    if (!low)
        return 0;
    for (char *p = low; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    int is = strstr(low, "token") &&
             (strstr(low, "exceed") || strstr(low, "limit") || strstr(low, "maximum"));
    free(low);
    if (!is)
        return 0;
    *max_context = match_num(text, "(maximum|context)[^0-9]*([0-9]+)[[:space:]]*tokens", 2);
    *input_tokens = match_num(text,
                              "([0-9]+)[[:space:]]*tokens?[[:space:]]*(from[[:space:]]*"
                              "(the[[:space:]]*)?(input|messages?)|in[[:space:]]*"
                              "(the[[:space:]]*)?(input|prompt|messages?))",
                              1);
    return 1;
}

long llm_shrink_max_tokens(long max_tokens, long max_context, long input_tokens)
{
    if (max_context && input_tokens) {
        /* both are counts read from digits (>= 0, LONG_MAX at most), so only
         * the difference is safe: "- 100" first could overflow */
        long avail = max_context - input_tokens;
        if (avail >= MIN_COMPLETION_TOKENS + 100) {
            avail -= 100;
            long nt = avail < max_tokens ? avail : max_tokens;
            if (nt < max_tokens)
                return nt;
        }
        return -1;
    }
    if (max_tokens > MIN_COMPLETION_TOKENS) {
        long nt = max_tokens / 2;
        return nt > MIN_COMPLETION_TOKENS ? nt : MIN_COMPLETION_TOKENS;
    }
    return -1;
}

/* ---- request bodies ---------------------------------------------------- */

static cJSON *openai_request(const llm_client *c, const cJSON *messages, const cJSON *tools,
                             long max_tokens)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "model", c->cfg.model ? c->cfg.model : "");
    cJSON_AddItemReferenceToObject(b, "messages", (cJSON *)messages);
    if (tools)
        cJSON_AddItemReferenceToObject(b, "tools", (cJSON *)tools);
    cJSON_AddNumberToObject(b, "max_tokens", (double)max_tokens);
    if (c->cfg.send_temperature)
        cJSON_AddNumberToObject(b, "temperature", c->cfg.temperature);
    if (c->cfg.stream) {
        cJSON_AddTrueToObject(b, "stream");
        cJSON_AddObjectToObject(b, "stream_options");
        cJSON_AddTrueToObject(cJSON_GetObjectItem(b, "stream_options"), "include_usage");
    }
    agent_json_merge(b, c->cfg.extra_body);
    return b;
}

/* ---- HTTP -------------------------------------------------------------- */

typedef struct xfer {
    strbuf body;
    int is_sse;
    int too_big;
    size_t received; /* body bytes of this response, streamed or not (MAX_BODY) */
    sse_state *sse;
    double retry_after; /* seconds, -1 when absent */
    long status;
} xfer;

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t len = size * n;
    char line[1024];
    size_t l = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, p, l);
    line[l] = 0;
    line[strcspn(line, "\r\n")] = 0;
    if (!strncmp(line, "HTTP/", 5)) { /* a new response (redirect, 100-continue) */
        x->is_sse = 0;
        x->retry_after = -1;
    } else if (!strncasecmp(line, "content-type:", 13)) {
        x->is_sse = strstr(line, "event-stream") != NULL;
    } else if (!strncasecmp(line, "retry-after:", 12)) {
        const char *v = line + 12;
        while (*v == ' ' || *v == '\t')
            v++;
        char *end;
        double s = strtod(v, &end);
        if (end != v && *end == 0)
            x->retry_after = s;
        else {
            time_t t = curl_getdate(v, NULL);
            if (t > 0)
                x->retry_after = difftime(t, time(NULL)) > 0 ? difftime(t, time(NULL)) : 0;
        }
    }
    return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t len = size * n;
    /* a streamed reply is bounded as a plain one: an endpoint that streams
     * forever ends this attempt with "larger than 64 MiB" (CURLE_WRITE_ERROR) */
    if (x->received + len > MAX_BODY) {
        x->too_big = 1;
        return 0;
    }
    x->received += len;
    if (x->is_sse && x->sse) {
        sse_feed(x->sse, p, len);
        if (x->body.len < 65536)
            strbuf_putn(&x->body, p, len);
        return len;
    }
    strbuf_putn(&x->body, p, len);
    return x->body.oom ? 0 : len;
}

/* The server's error text: error.message when JSON, else the body start. */
static void error_text(const char *body, char *out, size_t len)
{
    cJSON *j = cJSON_Parse(body ? body : "");
    const cJSON *e = cJSON_GetObjectItem(j, "error");
    const char *m = cJSON_GetStringValue(cJSON_GetObjectItem(e, "message"));
    if (!m)
        m = cJSON_GetStringValue(e);
    if (!m)
        m = cJSON_GetStringValue(cJSON_GetObjectItem(j, "message"));
    if (!m)
        m = cJSON_GetStringValue(cJSON_GetObjectItem(j, "detail"));
    snprintf(out, len, "%.400s", m ? m : body ? body : "");
    out[strcspn(out, "\n")] = 0;
    cJSON_Delete(j);
}

/* Removes nulls. original: the assistant message as model_dump(exclude_none=True). */
static void drop_nulls(cJSON *o)
{
    cJSON *it = o ? o->child : NULL;
    while (it) {
        cJSON *next = it->next;
        if (cJSON_IsNull(it))
            cJSON_Delete(cJSON_DetachItemViaPointer(o, it));
        else if (cJSON_IsObject(it))
            drop_nulls(it);
        it = next;
    }
}

static void finish_reply(llm_reply *out)
{
    cJSON *m = out->message;
    const char *c = cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"));
    out->content = c ? c : "";
    const char *r = cJSON_GetStringValue(cJSON_GetObjectItem(m, "reasoning_content"));
    if (!r)
        r = cJSON_GetStringValue(cJSON_GetObjectItem(m, "reasoning"));
    if (!r)
        r = cJSON_GetStringValue(
            cJSON_GetObjectItem(cJSON_GetObjectItem(m, "provider_specific_fields"),
                                "reasoning_content"));
    out->reasoning = r ? r : "";
    cJSON *tc = cJSON_GetObjectItem(m, "tool_calls");
    out->tool_calls = cJSON_IsArray(tc) && cJSON_GetArraySize(tc) ? tc : NULL;
}

/* choices[0].message (or a trainer's assistant message) into out: as the
 * history keeps it, nulls dropped, the role "assistant" when missing. */
static void take_message(const cJSON *m, llm_reply *out)
{
    out->message = cJSON_Duplicate(m, 1);
    drop_nulls(out->message);
    if (out->message && !cJSON_GetObjectItem(out->message, "role"))
        cJSON_AddStringToObject(out->message, "role", "assistant");
}

int llm_reply_from_message(const cJSON *action, llm_reply *out, lis_error *err)
{
    memset(out, 0, sizeof *out);
    cJSON *text = NULL;
    if (cJSON_IsString(action)) { /* raw text: the engine parses text tool calls in it */
        text = cJSON_CreateObject();
        cJSON_AddStringToObject(text, "role", "assistant");
        cJSON_AddStringToObject(text, "content", action->valuestring);
        action = text;
    } else if (!cJSON_IsObject(action)) {
        return lis_fail(err, EINVAL, "the action must be an assistant message or a string");
    }
    const cJSON *role = cJSON_GetObjectItem(action, "role");
    const cJSON *content = cJSON_GetObjectItem(action, "content");
    const cJSON *calls = cJSON_GetObjectItem(action, "tool_calls");
    if (role && !(cJSON_IsString(role) && !strcmp(role->valuestring, "assistant")))
        return lis_fail(err, EINVAL, "the action's role must be \"assistant\"");
    if (content && !cJSON_IsString(content) && !cJSON_IsNull(content))
        return lis_fail(err, EINVAL, "the action's content must be a string or null");
    if (calls && !cJSON_IsArray(calls) && !cJSON_IsNull(calls))
        return lis_fail(err, EINVAL, "the action's tool_calls must be an array");
    for (const cJSON *c = cJSON_IsArray(calls) ? calls->child : NULL; c; c = c->next)
        if (!cJSON_IsObject(c) || !cJSON_IsObject(cJSON_GetObjectItem(c, "function")))
            return lis_fail(err, EINVAL,
                            "each tool call of the action must be {\"id\", \"type\", "
                            "\"function\": {\"name\", \"arguments\"}}");
    take_message(action, out);
    cJSON_Delete(text);
    if (!out->message)
        return lis_fail(err, ENOMEM, "the action");
    snprintf(out->finish_reason, sizeof out->finish_reason, "%s",
             cJSON_GetArraySize(calls) ? "tool_calls" : "stop");
    snprintf(out->tokens_why, sizeof out->tokens_why, "the trainer's action carries no token ids");
    finish_reply(out);
    return 0;
}

int llm_parse_stream(sse_state *s, llm_reply *out, char *why, size_t wl)
{
    sse_finish(s);
    if (s->error) {
        char *e = cJSON_PrintUnformatted(s->error);
        error_text(e, why, wl);
        free(e);
        return -2;
    }
    if (!s->done && !s->finish_reason[0]) {
        snprintf(why, wl, "the stream ended before the reply was complete");
        return -1;
    }
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "assistant");
    int ntc = cJSON_GetArraySize(s->tool_calls);
    if (s->content.len || !ntc)
        cJSON_AddStringToObject(m, "content", s->content.s ? s->content.s : "");
    if (s->reasoning.len)
        cJSON_AddStringToObject(m, "reasoning_content", s->reasoning.s);
    if (ntc) {
        cJSON_AddItemToObject(m, "tool_calls", s->tool_calls);
        s->tool_calls = cJSON_CreateArray();
    }
    out->message = m;
    out->usage = s->usage;
    snprintf(out->finish_reason, sizeof out->finish_reason, "%s", s->finish_reason);
    snprintf(out->tokens_why, sizeof out->tokens_why, "a streamed reply carries no token ids");
    finish_reply(out);
    return 0;
}

int llm_parse_response(llm_api api, const char *body, llm_reply *out, char *why, size_t wl)
{
    cJSON *j = cJSON_Parse(body);
    if (!j) {
        snprintf(why, wl, "the reply is not JSON: %.200s", body);
        return -1;
    }
    if (api == LLM_API_ANTHROPIC) {
        if (!cJSON_IsArray(cJSON_GetObjectItem(j, "content"))) {
            error_text(body, why, wl);
            cJSON_Delete(j);
            return -1;
        }
        out->message =
            llm_anthropic_message(j, &out->usage, out->finish_reason, sizeof out->finish_reason);
        snprintf(out->tokens_why, sizeof out->tokens_why,
                 "the Anthropic Messages API sends no token ids");
    } else {
        cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
        cJSON *m = cJSON_GetObjectItem(ch, "message");
        if (!cJSON_IsObject(m)) {
            if (cJSON_GetObjectItem(j, "error")) {
                error_text(body, why, wl);
                cJSON_Delete(j);
                return -2;
            }
            snprintf(why, wl, "the reply has no choices[0].message");
            cJSON_Delete(j);
            return -1;
        }
        take_message(m, out);
        const char *fr = cJSON_GetStringValue(cJSON_GetObjectItem(ch, "finish_reason"));
        snprintf(out->finish_reason, sizeof out->finish_reason, "%s", fr ? fr : "");
        const cJSON *u = cJSON_GetObjectItem(j, "usage");
        if (cJSON_IsObject(u)) {
            out->usage.prompt_tokens = agent_json_long(cJSON_GetObjectItem(u, "prompt_tokens"));
            out->usage.completion_tokens =
                agent_json_long(cJSON_GetObjectItem(u, "completion_tokens"));
            out->usage.total_tokens = agent_json_long(cJSON_GetObjectItem(u, "total_tokens"));
            out->usage.known = 1;
        }
        llm_take_tokens(j, ch, out);
    }
    cJSON_Delete(j);
    finish_reply(out);
    return 0;
}

/* ---- one call: attempts, retries, context shrinking -------------------- */

/* A reply body that is a JSON object (what every API answers, errors too). */
static int json_object(const char *body)
{
    cJSON *j = body ? cJSON_Parse(body) : NULL;
    int ok = cJSON_IsObject(j);
    cJSON_Delete(j);
    return ok;
}

/* The start of a body on one line, for a message: `<!DOCTYPE HTML> <html>...`. */
static void body_head(const char *body, char *out, size_t len)
{
    size_t n = 0;
    int space = 0;
    for (const char *p = body ? body : ""; *p && n + 4 < len; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch <= ' ') {
            space = n > 0;
            continue;
        }
        if (space)
            out[n++] = ' ';
        space = 0;
        out[n++] = ch < 0x7f ? (char)ch : '?';
    }
    if (body && strlen(body) > n && n + 4 <= len && n > 0) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = 0;
}

int llm_check_base_url(const char *url, lis_error *err)
{
    if (!url || !*url || strstr(url, "://") || !strncasecmp(url, "unix:", 5))
        return 0;
    /* host:port/v1 reads as a scheme "host" to curl, or as no URL at all */
    return lis_fail(err, EINVAL, "--llm-base-url %s has no scheme: did you mean http://%s?", url,
                    url);
}

struct llm_call {
    llm_client *c;
    const cJSON *messages, *tools;
    CURL *h;
    int own_handle;
    struct curl_slist *hd;
    char *body;
    xfer x;
    sse_state sse;
    long max_tokens;
    int attempt;
    double t0;
    FILE *log; /* retries are reported here */
};

llm_call *llm_call_new(llm_client *c, const cJSON *messages, const cJSON *tools, int own_handle,
                       lis_error *err)
{
    llm_call *k = calloc(1, sizeof *k);
    if (!k) {
        lis_oom(err);
        return NULL;
    }
    k->c = c;
    k->messages = messages;
    k->tools = tools;
    k->own_handle = own_handle;
    k->max_tokens = c->cfg.max_tokens > 0 ? c->cfg.max_tokens : 65536;
    k->t0 = lis_now();
    k->log = c->cfg.log;
    sse_init(&k->sse);
    return k;
}

static void attempt_free(llm_call *k)
{
    curl_slist_free_all(k->hd);
    k->hd = NULL;
    free(k->body);
    k->body = NULL;
    strbuf_release(&k->x.body);
    sse_free(&k->sse);
    sse_init(&k->sse);
}

void llm_call_free(llm_call *k)
{
    if (!k)
        return;
    attempt_free(k);
    sse_free(&k->sse); /* attempt_free left it ready for another attempt */
    if (k->own_handle && k->h)
        curl_easy_cleanup(k->h);
    free(k);
}

void llm_call_set_log(llm_call *k, FILE *log) { k->log = log; }

CURL *llm_call_handle(const llm_call *k) { return k->h; }

/* curl's progress callback: a non-zero abort flag ends the transfer
 * (CURLE_ABORTED_BY_CALLBACK); libcurl calls it often while data flows and
 * about once a second while the endpoint is silent. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    const volatile int *abort_flag = ud;
    return *abort_flag != 0;
}

static int aborted(const llm_client *c) { return c->cfg.abort && *c->cfg.abort; }

CURL *llm_call_attempt(llm_call *k, lis_error *err)
{
    llm_client *c = k->c;
    attempt_free(k);
    cJSON *body = c->cfg.api == LLM_API_ANTHROPIC
                      ? llm_anthropic_request(k->messages, k->tools, &c->cfg, k->max_tokens)
                      : openai_request(c, k->messages, k->tools, k->max_tokens);
    k->body = body ? cJSON_PrintUnformatted(body) : NULL;
    cJSON_Delete(body);
    if (!k->body) {
        lis_fail(err, ENOMEM, "out of memory building the LLM request");
        return NULL;
    }
    memset(&k->x, 0, sizeof k->x);
    k->x.retry_after = -1;
    k->x.sse = c->cfg.api == LLM_API_OPENAI ? &k->sse : NULL;
    if (!k->h)
        k->h = k->own_handle ? curl_easy_init() : c->curl;
    if (!k->h) {
        lis_fail(err, EIO, "cannot create a libcurl handle");
        return NULL;
    }
    CURL *h = k->h;
    curl_easy_reset(h);
    char auth[4200];
    k->hd = curl_slist_append(k->hd, "Content-Type: application/json");
    /* no key (a local endpoint): no credential header at all */
    if (c->cfg.api == LLM_API_ANTHROPIC) {
        if (c->cfg.api_key && *c->cfg.api_key) {
            snprintf(auth, sizeof auth, "x-api-key: %s", c->cfg.api_key);
            k->hd = curl_slist_append(k->hd, auth);
        }
        k->hd = curl_slist_append(k->hd, "anthropic-version: 2023-06-01");
    } else if (c->cfg.api_key && *c->cfg.api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->cfg.api_key);
        k->hd = curl_slist_append(k->hd, auth);
    }
    if (c->cfg.stream)
        k->hd = curl_slist_append(k->hd, "Accept: text/event-stream");
    curl_easy_setopt(h, CURLOPT_URL, c->url);
    if (c->unix_path[0])
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, k->hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, k->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(k->body));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->cfg.connect_timeout * 1000));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->cfg.timeout * 1000));
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &k->x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &k->x);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "lis-agent/0.1");
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_PRIVATE, k);
    if (c->cfg.abort) {
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)c->cfg.abort);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    return h;
}

/* A transport error that means the endpoint is not there (refused, no such
 * host, TLS that cannot be set up, a URL curl cannot use), as opposed to one
 * that may pass (a timeout, a reset connection). */
static int unreachable(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT: return 1;
    default: return 0;
    }
}

int llm_call_result(llm_call *k, CURLcode rc, llm_reply *out, double *wait, lis_error *err)
{
    llm_client *c = k->c;
    memset(out, 0, sizeof *out);
    *wait = 0;
    char why[600] = "";
    xfer *x = &k->x;
    if (rc != CURLE_OK) {
        if (x->too_big)
            snprintf(why, sizeof why, "the reply is larger than %u MiB", MAX_BODY >> 20);
        else
            snprintf(why, sizeof why, "%s", curl_easy_strerror(rc));
    }
    curl_easy_getinfo(k->h, CURLINFO_RESPONSE_CODE, &x->status);
    out->attempts = ++k->attempt;
    if (aborted(c)) { /* whatever the transfer gave: the caller no longer wants it */
        attempt_free(k);
        return lis_fail(err, ECANCELED, "cancelled"), LLM_CALL_FAILED;
    }
    long status = rc == CURLE_OK ? x->status : 0;
    if (x->status > 0)
        c->replied = 1;
    if (!c->replied && unreachable(rc)) {
        /* nothing has ever answered there: a retry would only wait longer
         * for the same refusal (lis run and lis batch say the same) */
        attempt_free(k);
        lis_fail(err, EHOSTUNREACH, "cannot reach the LLM at %s: %s (check --llm-base-url)",
                 c->cfg.base_url ? c->cfg.base_url : c->url, curl_easy_strerror(rc));
        return LLM_CALL_FAILED;
    }
    if (rc == CURLE_OK && status >= 200 && status < 300) {
        int prc = x->is_sse && x->sse ? llm_parse_stream(x->sse, out, why, sizeof why)
                                      : llm_parse_response(c->cfg.api, x->body.s ? x->body.s : "",
                                                           out, why, sizeof why);
        if (prc == 0) {
            out->attempts = k->attempt;
            out->seconds = lis_now() - k->t0;
            out->max_tokens_used = k->max_tokens;
            attempt_free(k);
            return LLM_CALL_DONE;
        }
        llm_reply_free(out);
        out->attempts = k->attempt;
        if (prc == -2)
            status = 400; /* an error object inside a 200 reply */
    } else if (rc == CURLE_OK) {
        if (x->is_sse)
            sse_finish(&k->sse);
        error_text(x->body.s, why, sizeof why);
    }
    double retry_after = x->retry_after;
    /* a web page, a text or a method the server does not have: no retry can
     * make it an API (a gateway's 502/503 page is retried: it may pass) */
    int not_json = rc == CURLE_OK && !x->is_sse && !json_object(x->body.s);
    if (rc == CURLE_OK && ((not_json && ((status >= 200 && status < 300) || status == 404)) ||
                           status == 405 || status == 501)) {
        char *ctype = NULL, head[100];
        curl_easy_getinfo(k->h, CURLINFO_CONTENT_TYPE, &ctype);
        body_head(x->body.s, head, sizeof head);
        lis_fail(err, EPROTO,
                 "not an %s endpoint at %s (HTTP %ld, %s: %s); check --llm-base-url "
                 "(OpenAI-compatible servers usually end in /v1)",
                 c->cfg.api == LLM_API_ANTHROPIC ? "Anthropic Messages API" : "OpenAI-compatible",
                 c->url, status, ctype && *ctype ? ctype : "no content type",
                 head[0] ? head : "an empty body");
        err->http_status = status >= 400 ? (int)status : 0;
        attempt_free(k);
        return LLM_CALL_FAILED;
    }
    attempt_free(k);
    long mc, it;
    if (status >= 400 && llm_is_token_error(why, &mc, &it)) {
        long nt = llm_shrink_max_tokens(k->max_tokens, mc, it);
        if (nt > 0) {
            if (k->log)
                fprintf(k->log, "lis: context length exceeded; max_tokens %ld -> %ld\n",
                        k->max_tokens, nt);
            k->max_tokens = nt;
            k->attempt--; /* original: not counted as a retry */
            return LLM_CALL_RETRY;
        }
        lis_fail(err, E2BIG,
                 "the conversation no longer fits the model's "
                 "context (HTTP %ld): %s",
                 status, why);
        err->http_status = (int)status;
        return LLM_CALL_FAILED;
    }
    /* original: every error retried; these cannot succeed again (docs/agent.md fix 15) */
    const char *model = c->cfg.model ? c->cfg.model : "";
    if (status == 401) {
        lis_fail(err, EACCES,
                 "the API key was rejected (HTTP 401) by %s: %s; check "
                 "--api-key / OPENAI_API_KEY",
                 c->url, why);
        err->http_status = 401;
        return LLM_CALL_FAILED;
    }
    if (status == 403) {
        lis_fail(err, EACCES,
                 "access denied (HTTP 403) by %s: %s; the key may "
                 "not have access to model '%s'",
                 c->url, why, model);
        err->http_status = 403;
        return LLM_CALL_FAILED;
    }
    if (status == 404) {
        lis_fail(err, ENOENT,
                 "no model '%s' or not an OpenAI-compatible endpoint at %s (HTTP 404: %s); check "
                 "the model name and --llm-base-url (OpenAI-compatible servers usually end in /v1)",
                 model, c->url, why);
        err->http_status = 404;
        return LLM_CALL_FAILED;
    }
    if (status == 400 || status == 422) {
        lis_fail(err, EINVAL,
                 "the LLM server rejected the request (HTTP "
                 "%ld): %s",
                 status, why);
        err->http_status = (int)status;
        return LLM_CALL_FAILED;
    }
    if (k->attempt >= c->cfg.max_retries) {
        if (status) {
            lis_fail(err, EAGAIN,
                     "LLM request failed after %d attempts "
                     "(HTTP %ld from %s): %s",
                     k->attempt, status, c->url, why);
            err->http_status = (int)status;
        } else {
            /* no HTTP reply at all: the endpoint is down, unknown or refuses us */
            lis_fail(err, EHOSTUNREACH, "LLM request failed after %d attempts (%s): %s", k->attempt,
                     c->url, why);
        }
        return LLM_CALL_FAILED;
    }
    double w;
    if ((status == 429 || status == 503) && retry_after >= 0)
        w = retry_after;
    else
        w = c->cfg.backoff_base * (double)(1L << (k->attempt - 1 < 20 ? k->attempt - 1 : 20)) +
            c->cfg.backoff_base * ((double)rand_r(&c->seed) / RAND_MAX);
    if (w > c->cfg.backoff_max)
        w = c->cfg.backoff_max;
    if (k->log) {
        if (status)
            fprintf(k->log,
                    "lis: LLM request failed (HTTP %ld: %.200s); retry %d/%d "
                    "in %.1fs\n",
                    status, why, k->attempt, c->cfg.max_retries - 1, w);
        else
            fprintf(k->log, "lis: LLM request failed (%.200s); retry %d/%d in %.1fs\n", why,
                    k->attempt, c->cfg.max_retries - 1, w);
    }
    *wait = w;
    return LLM_CALL_RETRY;
}

const char *llm_client_url(const llm_client *c) { return c->url; }

/* curl_easy_perform that an abort ends within 50 ms, also while the
 * endpoint is silent (curl's progress callback may wait a second then): the
 * transfer on the client's multi handle, polled in slices. */
static CURLcode perform(llm_client *c, CURL *h)
{
    if (!c->cfg.abort)
        return curl_easy_perform(h);
    if (!c->multi && !(c->multi = curl_multi_init()))
        return CURLE_OUT_OF_MEMORY;
    if (curl_multi_add_handle(c->multi, h) != CURLM_OK)
        return CURLE_FAILED_INIT;
    int running = 1;
    while (curl_multi_perform(c->multi, &running) == CURLM_OK && running && !aborted(c))
        curl_multi_poll(c->multi, NULL, 0, 50, NULL);
    /* unfinished: aborted (llm_call_result says "cancelled"), or the multi
     * handle failed (an error that may pass: retried) */
    CURLcode rc = aborted(c) ? CURLE_ABORTED_BY_CALLBACK : CURLE_RECV_ERROR;
    int left;
    CURLMsg *m;
    while ((m = curl_multi_info_read(c->multi, &left)))
        if (m->msg == CURLMSG_DONE && m->easy_handle == h)
            rc = m->data.result;
    curl_multi_remove_handle(c->multi, h);
    return rc;
}

/* The blocking driver of a call (lis run): the same attempts in a loop. */
int llm_chat(llm_client *c, const cJSON *messages, const cJSON *tools, llm_reply *out,
             lis_error *err)
{
    memset(out, 0, sizeof *out);
    llm_call *k = llm_call_new(c, messages, tools, 0, err);
    if (!k)
        return -1;
    for (;;) {
        if (aborted(c)) {
            llm_call_free(k);
            return lis_fail(err, ECANCELED, "cancelled");
        }
        CURL *h = llm_call_attempt(k, err);
        if (!h) {
            llm_call_free(k);
            return -1;
        }
        CURLcode rc = perform(c, h);
        double wait = 0;
        int r = llm_call_result(k, rc, out, &wait, err);
        if (r == LLM_CALL_DONE || r == LLM_CALL_FAILED) {
            llm_call_free(k);
            return r == LLM_CALL_DONE ? 0 : -1;
        }
        /* in slices, so that an abort does not wait for the backoff */
        for (double t0 = lis_now(); wait > 0 && !aborted(c) && lis_now() - t0 < wait;)
            agent_sleep(wait - (lis_now() - t0) < 0.05 ? wait - (lis_now() - t0) : 0.05);
    }
}
