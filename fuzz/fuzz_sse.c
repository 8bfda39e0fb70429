/* fuzz_sse.c - OpenAI streaming (text/event-stream) framing and delta
 * assembly (agent/sse.c). The input is fed whole, byte by byte and in
 * chunks whose sizes come from the input: the result must not depend on
 * how the network split the stream. */
#include "fuzz.h"
#include "agent_internal.h"

#include <string.h>

typedef struct outcome {
    char *content, *reasoning, *tools, *error, *bad;
    char finish[32];
    int done, events;
    llm_usage usage;
} outcome;

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static void run(const uint8_t *data, size_t size, size_t chunk, outcome *o)
{
    sse_state s;
    sse_init(&s);
    for (size_t i = 0; i < size;) {
        size_t n = chunk ? chunk : 1 + (size_t)(data[i] & 31); /* 0: sizes from the data */
        if (n > size - i)
            n = size - i;
        sse_feed(&s, (const char *)data + i, n);
        i += n;
    }
    sse_finish(&s);
    FUZZ_CHECK(memchr(s.finish_reason, 0, sizeof s.finish_reason));
    FUZZ_CHECK(cJSON_IsArray(s.tool_calls));
    const cJSON *t;
    cJSON_ArrayForEach(t, s.tool_calls)
    {
        const cJSON *f = cJSON_GetObjectItem(t, "function");
        FUZZ_CHECK(cJSON_IsString(cJSON_GetObjectItem(t, "id")));
        FUZZ_CHECK(cJSON_IsString(cJSON_GetObjectItem(f, "name")));
        FUZZ_CHECK(cJSON_IsString(cJSON_GetObjectItem(f, "arguments")));
        FUZZ_CHECK(!cJSON_GetObjectItem(t, "index")); /* removed by sse_finish */
    }
    memset(o, 0, sizeof *o);
    o->content = dup_or_null(s.content.s);
    o->reasoning = dup_or_null(s.reasoning.s);
    o->tools = cJSON_PrintUnformatted(s.tool_calls);
    o->error = s.error ? cJSON_PrintUnformatted(s.error) : NULL;
    o->bad = dup_or_null(s.bad);
    memcpy(o->finish, s.finish_reason, sizeof o->finish);
    o->done = s.done;
    o->events = s.events;
    o->usage = s.usage;
    sse_free(&s);
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b)) || (!a && !*b) || (!b && !*a);
}

static void same(const outcome *a, const outcome *b)
{
    FUZZ_CHECK(same_str(a->content, b->content));
    FUZZ_CHECK(same_str(a->reasoning, b->reasoning));
    FUZZ_CHECK(same_str(a->tools, b->tools));
    FUZZ_CHECK(same_str(a->error, b->error));
    FUZZ_CHECK(same_str(a->bad, b->bad));
    FUZZ_CHECK(!strcmp(a->finish, b->finish));
    FUZZ_CHECK(a->done == b->done && a->events == b->events);
    FUZZ_CHECK(!memcmp(&a->usage, &b->usage, sizeof a->usage));
}

static void drop(outcome *o)
{
    free(o->content);
    free(o->reasoning);
    free(o->tools);
    free(o->error);
    free(o->bad);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    outcome whole, bytes, chunks;
    run(data, size, size ? size : 1, &whole);
    run(data, size, 1, &bytes);
    run(data, size, 0, &chunks);
    same(&whole, &bytes);
    same(&whole, &chunks);
    drop(&whole);
    drop(&bytes);
    drop(&chunks);
    /* and what llm.c makes of the stream */
    sse_state s;
    sse_init(&s);
    sse_feed(&s, (const char *)data, size);
    llm_reply r;
    memset(&r, 0, sizeof r);
    char why[600];
    int rc = llm_parse_stream(&s, &r, why, sizeof why);
    FUZZ_CHECK(rc == 0 || rc == -1 || rc == -2);
    if (rc == 0) {
        FUZZ_CHECK(cJSON_IsObject(r.message) && r.content && r.reasoning);
        FUZZ_CHECK(!r.tool_calls || cJSON_GetArraySize(r.tool_calls) > 0);
    }
    llm_reply_free(&r);
    sse_free(&s);
    return 0;
}
