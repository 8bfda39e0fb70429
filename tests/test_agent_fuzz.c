/* test_agent_fuzz.c - regressions for what the fuzzers (fuzz/) found in the
 * agent: JSON numbers cast to long without a check. A missing usage field
 * (cJSON gives NaN) or 1e300 made the cast undefined behaviour; now they read
 * as 0 and as +-2^53. The inputs themselves are in fuzz/regress/ too. */
#include "testlib.h"

#include "agent_internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#define MAX53 9007199254740992L

Test(agent_fuzz, openai_usage_with_missing_and_huge_fields)
{
    llm_reply r;
    memset(&r, 0, sizeof r);
    char why[600] = "";
    cr_assert_eq(llm_parse_response(LLM_API_OPENAI,
                                    "{\"choices\":[{\"message\":{\"content\":\"a\"}}],"
                                    "\"usage\":{\"prompt_tokens\":1e300,\"total_tokens\":null}}",
                                    &r, why, sizeof why),
                 0, "%s", why);
    cr_assert(r.usage.known);
    cr_assert_eq(r.usage.prompt_tokens, MAX53);
    cr_assert_eq(r.usage.completion_tokens, 0);
    cr_assert_eq(r.usage.total_tokens, 0);
    cr_assert_str_eq(r.content, "a");
    llm_reply_free(&r);
}

Test(agent_fuzz, anthropic_usage_sum_cannot_overflow)
{
    llm_reply r;
    memset(&r, 0, sizeof r);
    char why[600] = "";
    cr_assert_eq(llm_parse_response(LLM_API_ANTHROPIC,
                                    "{\"content\":[],\"usage\":{\"input_tokens\":1e300,"
                                    "\"output_tokens\":-1e300}}",
                                    &r, why, sizeof why),
                 0, "%s", why);
    cr_assert_eq(r.usage.prompt_tokens, MAX53);
    cr_assert_eq(r.usage.completion_tokens, -MAX53);
    cr_assert_eq(r.usage.total_tokens, 0);
    llm_reply_free(&r);
    memset(&r, 0, sizeof r);
    cr_assert_eq(llm_parse_response(LLM_API_ANTHROPIC,
                                    "{\"content\":[],\"usage\":"
                                    "{\"input_tokens\":5}}",
                                    &r, why, sizeof why),
                 0);
    cr_assert_eq(r.usage.prompt_tokens, 5);
    cr_assert_eq(r.usage.completion_tokens, 0);
    cr_assert_eq(r.usage.total_tokens, 5);
    llm_reply_free(&r);
}

Test(agent_fuzz, stream_usage_with_missing_fields)
{
    static const char body[] =
        "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],"
        "\"usage\":{\"prompt_tokens\":3}}\n\n"
        "data: [DONE]\n\n";
    sse_state s;
    sse_init(&s);
    sse_feed(&s, body, sizeof body - 1);
    llm_reply r;
    memset(&r, 0, sizeof r);
    char why[600] = "";
    cr_assert_eq(llm_parse_stream(&s, &r, why, sizeof why), 0, "%s", why);
    cr_assert_eq(r.usage.prompt_tokens, 3);
    cr_assert_eq(r.usage.completion_tokens, 0);
    cr_assert_eq(r.usage.total_tokens, 0);
    cr_assert_str_eq(r.content, "x");
    llm_reply_free(&r);
    sse_free(&s);
}

Test(agent_fuzz, json_long_clamps_and_ignores_non_numbers)
{
    cJSON *v = cJSON_Parse("[1e300, -1e300, 42.9, -7, \"12\", null, true]");
    cr_assert(v);
    long want[] = {MAX53, -MAX53, 42, -7, 0, 0, 0};
    for (int i = 0; i < 7; i++)
        cr_assert_eq(agent_json_long(cJSON_GetArrayItem(v, i)), want[i], "item %d", i);
    cr_assert_eq(agent_json_long(NULL), 0);
    cJSON_Delete(v);
}

/* The editor's view_range and insert_line come from the model. */
static int one_read(void *ctx, const char *path, size_t max, char **data, size_t *len,
                    lis_error *err)
{
    if (strcmp(path, "/testbed/f"))
        return lis_fail(err, ENOENT, "%s: no such file", path);
    *data = agent_strdup("a\nb\nc\n");
    *len = 6;
    return 0;
}

static int one_stat(void *ctx, const char *path, char *kind, uint64_t *size, lis_error *err)
{
    *kind = !strcmp(path, "/testbed/f") ? 'f' : 'd';
    if (size)
        *size = 6;
    return 0;
}

static char *one_resolve(void *ctx, const char *path, lis_error *err) { return agent_strdup(path); }

Test(agent_fuzz, editor_huge_view_range_and_insert_line)
{
    ed_fs fs = {NULL, one_read, NULL, one_stat, NULL, one_resolve};
    cJSON *p = cJSON_Parse("{\"command\":\"view\",\"path\":\"/testbed/f\","
                           "\"view_range\":[1e300,-1e300]}");
    char *r = agent_editor_run(&fs, "/testbed", p);
    cr_assert_str_eq(r, "Error: Invalid view_range [9007199254740992, -9007199254740992]: "
                        "start line must be in [1, 4]");
    free(r);
    cJSON_Delete(p);
    p = cJSON_Parse("{\"command\":\"insert\",\"path\":\"/testbed/f\",\"insert_line\":1e300,"
                    "\"new_str\":\"x\"}");
    r = agent_editor_run(&fs, "/testbed", p);
    cr_assert(strstr(r, "9007199254740992"), "%s", r);
    free(r);
    cJSON_Delete(p);
}

/* YAML aliases: a document that refers to itself, or doubles at every level,
 * ran for ever (or into gigabytes) in agent_yaml_load. */
Test(agent_fuzz, yaml_alias_expansion_is_bounded)
{
    static const char self[] = "a: &a [*a, *a]\n";
    lis_error err = {0};
    cJSON *j = agent_yaml_load(self, sizeof self - 1, &err);
    cr_assert_null(j);
    cr_assert(strstr(err.msg, "expands to more than"), "%s", err.msg);
    char laughs[2048] = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
    for (char c = 'b'; c <= 'h'; c++) {
        char line[128];
        snprintf(line, sizeof line, "%c: &%c [*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c]\n", c, c,
                 c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1);
        strcat(laughs, line);
    }
    err.msg[0] = 0;
    cr_assert_null(agent_yaml_load(laughs, strlen(laughs), &err));
    cr_assert(strstr(err.msg, "expands to more than"), "%s", err.msg);
    /* ordinary aliases still work */
    static const char ok[] = "base: &b {k: v}\nx: *b\ny: [*b, *b]\n";
    j = agent_yaml_load(ok, sizeof ok - 1, &err);
    cr_assert(j, "%s", err.msg);
    char *s = cJSON_PrintUnformatted(j);
    cr_assert_str_eq(s, "{\"base\":{\"k\":\"v\"},\"x\":{\"k\":\"v\"},\"y\":[{\"k\":\"v\"},"
                        "{\"k\":\"v\"}]}");
    free(s);
    cJSON_Delete(j);
}

/* A server's token-limit error with a count beyond long: strtol gives
 * LONG_MAX, and "max_context - input - 100" overflowed (found by fuzz_llm). */
Test(agent_fuzz, token_error_with_huge_counts)
{
    long maxc, in;
    const char *t = "token limit exceeded: maximum 5 tokens, 99999999999999999999 tokens in "
                    "the input";
    cr_assert_eq(llm_is_token_error(t, &maxc, &in), 1);
    cr_assert_eq(maxc, 5);
    cr_assert_eq(in, LONG_MAX);
    cr_assert_eq(llm_shrink_max_tokens(65536, maxc, in), -1);
    cr_assert_eq(llm_shrink_max_tokens(65536, LONG_MAX, 1), -1); /* nothing to shrink */
    cr_assert_eq(llm_shrink_max_tokens(65536, 40000, 20000), 19900);
}
