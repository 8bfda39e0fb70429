/* fuzz_textcalls.c - tool calls written in the reply text (agent/textcalls.c):
 * hermes <tool_call>{json}</tool_call> and qwen3_coder <function=N>
 * <parameter=P>V</parameter></function>. Invariants: at most max calls, each
 * with a name and an arguments text; when the arguments came from parameters
 * (qwen3_coder) they are a JSON object; the rest is never longer than the
 * content; the loop's use (cJSON strings) works on every result. */
#include "fuzz.h"
#include "agent_internal.h"

#include <string.h>

/* The agent's three tools plus one with every parameter type the
 * qwen3_coder conversion knows. */
static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"str_replace_editor\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"},\"path\":{\"type\":"
    "\"string\"},\"file_text\":{\"type\":\"string\"},\"old_str\":{\"type\":\"string\"},"
    "\"new_str\":{\"type\":\"string\"},\"insert_line\":{\"type\":\"integer\"},\"view_range\":"
    "{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"execute_bash\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"command\":{\"type\":\"string\"}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"submit\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"t\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"i\":{\"type\":\"integer\"},\"n\":{\"type\":\"number\"},\"b\":{\"type\":"
    "\"boolean\"},\"o\":{\"type\":\"object\"},\"a\":{\"type\":\"array\"},\"s\":{\"type\":"
    "\"string\"},\"x\":{}}}}}]";

static cJSON *tools;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    tools = cJSON_Parse(TOOLS);
    FUZZ_CHECK(cJSON_IsArray(tools));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *content = malloc(size + 1);
    FUZZ_CHECK(content);
    memcpy(content, data, size);
    content[size] = 0; /* the reply's content is a C string */
    size_t len = strlen(content);
    /* max 16 as in the loop, and 1 for the overflow path */
    for (size_t max = 1; max <= 16; max += 15) {
        text_call calls[16];
        char *rest = NULL;
        size_t n = agent_parse_text_calls(content, tools, calls, max, &rest);
        FUZZ_CHECK(n <= max);
        FUZZ_CHECK(rest && strlen(rest) <= len);
        for (size_t i = 0; i < n; i++) {
            FUZZ_CHECK(calls[i].name && calls[i].arguments);
            /* what loop.c does with them */
            cJSON *f = cJSON_CreateObject();
            FUZZ_CHECK(cJSON_AddStringToObject(f, "name", calls[i].name));
            FUZZ_CHECK(cJSON_AddStringToObject(f, "arguments", calls[i].arguments));
            cJSON_Delete(f);
            cJSON *args = cJSON_Parse(calls[i].arguments);
            /* hermes may carry the arguments as a string of any text; a
             * qwen3_coder call's (all of them, without <tool_call>) are an object */
            if (!strstr(content, "<tool_call>"))
                FUZZ_CHECK(cJSON_IsObject(args));
            cJSON_Delete(args);
        }
        agent_text_calls_free(calls, n);
        free(rest);
    }
    free(content);
    return 0;
}
