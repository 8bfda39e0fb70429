/* fuzz_llm.c - the LLM response parsers (agent/llm.c): an OpenAI chat
 * completion or an Anthropic Messages response as the server sent it, the
 * token-limit error texts, and the Anthropic request built from a history
 * (tool outputs in it come from the sandbox). The first byte picks the API. */
#include "fuzz.h"
#include "agent_internal.h"

#include <string.h>

static cJSON *tools;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"execute_bash\","
                        "\"description\":\"d\",\"parameters\":{\"type\":\"object\","
                        "\"properties\":{\"command\":{\"type\":\"string\"}},"
                        "\"required\":[\"command\"]}}}]");
    FUZZ_CHECK(tools);
    return 0;
}

static void check_reply(const llm_reply *r)
{
    FUZZ_CHECK(cJSON_IsObject(r->message));
    FUZZ_CHECK(r->content && r->reasoning);
    FUZZ_CHECK(memchr(r->finish_reason, 0, sizeof r->finish_reason));
    FUZZ_CHECK(!r->tool_calls ||
               (cJSON_IsArray(r->tool_calls) && cJSON_GetArraySize(r->tool_calls) > 0));
    /* the history keeps the message and sends it back */
    char *again = cJSON_PrintUnformatted(r->message);
    FUZZ_CHECK(again);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    llm_api api = data[0] & 1 ? LLM_API_ANTHROPIC : LLM_API_OPENAI;
    char *body = malloc(size);
    FUZZ_CHECK(body);
    memcpy(body, data + 1, size - 1);
    body[size - 1] = 0;

    llm_reply r;
    memset(&r, 0, sizeof r);
    char why[600] = "";
    int rc = llm_parse_response(api, body, &r, why, sizeof why);
    FUZZ_CHECK(rc == 0 || rc == -1 || rc == -2);
    if (rc == 0)
        check_reply(&r);
    else
        FUZZ_CHECK(memchr(why, 0, sizeof why) && !r.message);
    llm_reply_free(&r);

    long maxc = -1, in = -1;
    if (llm_is_token_error(body, &maxc, &in)) {
        FUZZ_CHECK(maxc >= 0 && in >= 0);
        long mt = llm_shrink_max_tokens(65536, maxc, in);
        FUZZ_CHECK(mt == -1 || (mt > 0 && mt <= 65536));
    }

    /* a history as the loop keeps it, converted for the Anthropic API */
    cJSON *msgs = cJSON_Parse(body);
    if (cJSON_IsArray(msgs)) {
        llm_config cfg = {.api = LLM_API_ANTHROPIC,
                          .model = "m",
                          .max_tokens = 100,
                          .send_temperature = 1};
        cJSON *req = llm_anthropic_request(msgs, tools, &cfg, 100);
        FUZZ_CHECK(cJSON_IsObject(req));
        FUZZ_CHECK(cJSON_IsArray(cJSON_GetObjectItem(req, "messages")));
        char *txt = cJSON_PrintUnformatted(req);
        FUZZ_CHECK(txt);
        free(txt);
        cJSON_Delete(req);
    }
    cJSON_Delete(msgs);
    free(body);
    return 0;
}
