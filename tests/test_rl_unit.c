/* test_rl_unit.c - the episodes API's pure parts (rl/), without a sandbox or a
 * server: a group's body checked strictly (request.c), the token block
 * flattened from the turns' own ids (tokens.c), results kept on disk
 * (store.c). */
#include "rl.h"
#include "testlib.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- request.c --------------------------------------------------------- */

#define MINIMAL                                                                                    \
    "{\"task\": {\"prompt\": \"How many lines?\"},"                                                \
    " \"inference\": {\"base_url\": \"http://127.0.0.1:8000/v1\", \"model\": \"policy\"}}"

/* The body of docs/rl.md's "A group's body". */
#define DOCS_BODY                                                                                  \
    "{\"request_id\": \"step12-task881\","                                                         \
    " \"task\": {\"id\": \"task881\", \"image\": \"debian:12\","                                   \
    "  \"files\": {\"a.txt\": \"1\\n2\\n\", \"/testbed/data/b.csv\": \"x,y\\n\"},"                 \
    "  \"setup\": [\"python3 -m venv /opt/v\"],"                                                   \
    "  \"prompt\": \"How many lines does a.txt have?\","                                           \
    "  \"answer_file\": \"/testbed/answer.txt\","                                                  \
    "  \"reward\": {\"scorer\": \"builtin:match\", \"ground_truth\": \"42\", \"args\": {},"        \
    "   \"timeout_s\": 60}},"                                                                      \
    " \"n\": 8,"                                                                                   \
    " \"inference\": {\"base_url\": \"http://10.0.0.5:8000/v1\", \"model\": \"policy\","           \
    "  \"api_key\": \"x\", \"sampling\": {\"temperature\": 1.0, \"max_tokens\": 4096,"             \
    "  \"logprobs\": true, \"return_token_ids\": true}, \"seeds\": [0, 1, 2, 3, 4, 5, 6, 7]},"     \
    " \"max_steps\": 40, \"deadline_s\": 900, \"tool_timeout_s\": 120,"                            \
    " \"keep_snapshots\": \"none\", \"labels\": {\"global_step\": 12}, \"effects\": true}"

static const rl_limits LIM = {.max_n = 512, .max_files_bytes = 64u << 20};

static cJSON *parse_text(const char *text)
{
    cJSON *j = cJSON_Parse(text);
    cr_assert_not_null(j, "test body is not JSON: %.200s", text);
    return j;
}

/* The value at a dotted path of j ("task.reward.scorer") replaced by the
 * JSON text value (NULL: removed); objects on the way are made. */
static void set_at(cJSON *j, const char *path, const char *value)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *key = buf;
    for (char *dot; (dot = strchr(key, '.'));) {
        *dot = 0;
        cJSON *next = cJSON_GetObjectItemCaseSensitive(j, key);
        if (!next)
            next = cJSON_AddObjectToObject(j, key);
        j = next;
        key = dot + 1;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(j, key);
    if (value)
        cJSON_AddItemToObject(j, key, parse_text(value));
}

static int is_zero(const rl_request *r)
{
    static const rl_request zero;
    return !memcmp(r, &zero, sizeof zero);
}

/* body refused with status and a message holding needle; nothing kept. */
static void refused_with(const cJSON *body, const rl_limits *lim, int status, const char *needle)
{
    rl_request r;
    lis_error err = {0};
    cr_assert_eq(rl_request_parse(body, lim, &r, &err), -1, "accepted; wanted %d %s", status,
                 needle);
    cr_assert_eq(err.http_status, status, "status %d (%s), wanted %d", err.http_status, err.msg,
                 status);
    cr_assert_eq(err.code, status, "the status is rl/'s err->code too");
    cr_assert(strstr(err.msg, needle), "\"%s\" does not say \"%s\"", err.msg, needle);
    cr_assert(!strchr(err.msg, '\n'), "not one line: %s", err.msg);
    cr_assert(is_zero(&r), "a refused body left something in the request");
}

/* MINIMAL with path set to value, refused with status naming needle. */
static void minimal_refused(const char *path, const char *value, int status, const char *needle)
{
    cJSON *b = parse_text(MINIMAL);
    set_at(b, path, value);
    refused_with(b, &LIM, status, needle);
    cJSON_Delete(b);
}

/* A table of MINIMAL with one change each, every one refused. */
typedef struct refusal {
    const char *path, *value;
    int status;
    const char *needle;
} refusal;

static void all_refused(const refusal *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        minimal_refused(r[i].path, r[i].value, r[i].status, r[i].needle);
}
#define ALL_REFUSED(table) all_refused(table, sizeof table / sizeof *table)

static void parsed(const cJSON *body, const rl_limits *lim, rl_request *r)
{
    lis_error err = {0};
    cr_assert_eq(rl_request_parse(body, lim, r, &err), 0, "refused: %d %s", err.http_status,
                 err.msg);
}

Test(rl_request, a_minimal_body_gets_the_originals_defaults)
{
    cJSON *b = parse_text(MINIMAL);
    rl_request r;
    parsed(b, &LIM, &r);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.max_steps, 100);
    cr_assert_eq(r.max_token_limit, 65536);
    cr_assert_eq(r.tool_timeout, 120);
    cr_assert_eq(r.deadline_s, 0);
    cr_assert_eq(r.task.reward_timeout, 60);
    cr_assert_eq(r.task.setup_timeout, 600);
    cr_assert_str_eq(r.task.answer_file, "/testbed/answer.txt");
    /* the prompt says the answer goes where the scorer reads it */
    char *pr = cJSON_PrintUnformatted(r.task.prompts);
    cr_assert_str_eq(pr, "{\"output_dir\":\"/testbed\"}");
    free(pr);
    cr_assert_str_eq(r.task.id, "");
    cr_assert_str_eq(r.task.prompt, "How many lines?");
    cr_assert_null(r.task.image);
    cr_assert_null(r.task.scorer);
    cr_assert_null(r.task.messages);
    cr_assert_null(r.seeds);
    cr_assert_null(r.sampling);
    cr_assert_eq(r.snaps, RL_SNAP_NONE);
    cr_assert_eq(r.effects, 1);
    cr_assert_str_eq(r.base_url, "http://127.0.0.1:8000/v1");
    cr_assert_str_eq(r.model, "policy");
    rl_request_free(&r);
    cr_assert(is_zero(&r));
    cJSON_Delete(b);
}

Test(rl_request, the_docs_body_is_taken_whole)
{
    cJSON *b = parse_text(DOCS_BODY);
    rl_request r;
    parsed(b, &LIM, &r);
    cr_assert_eq(r.n, 8);
    cr_assert_str_eq(r.request_id, "step12-task881");
    cr_assert_str_eq(r.task.id, "task881");
    cr_assert_str_eq(r.task.image, "debian:12");
    cr_assert_eq(r.task.nfiles, 2);
    /* sorted by path; a relative name under the default input_dir */
    cr_assert_str_eq(r.task.files[0].path, "/testbed/data/b.csv");
    cr_assert_str_eq(r.task.files[1].path, "/testbed/input/a.txt");
    cr_assert_eq(r.task.files[1].len, 4);
    cr_assert_str_eq(r.task.files[1].data, "1\n2\n");
    cr_assert_eq(r.task.nsetup, 1);
    cr_assert_str_eq(r.task.setup[0], "python3 -m venv /opt/v");
    cr_assert_str_eq(r.task.scorer, "builtin:match");
    char *row = cJSON_PrintUnformatted(r.task.reward_row);
    cr_assert_str_eq(row, "{\"ground_truth\":\"42\"}");
    free(row);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(r.seeds[i], i);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(r.sampling, "return_token_ids")));
    cr_assert_eq(cJSON_GetObjectItem(r.labels, "global_step")->valueint, 12);
    cr_assert_eq(r.max_steps, 40);
    cr_assert_eq(r.deadline_s, 900);
    cr_assert_str_eq(r.api_key, "x");
    rl_request_free(&r);
    cJSON_Delete(b);
}

Test(rl_request, unknown_keys_are_refused_with_their_dotted_name)
{
    static const refusal cases[] = {
        {"tsk", "{}", 400, "unknown key tsk"},
        {"task.fles", "{}", 400, "unknown key task.fles"},
        {"task.reward", "{\"scorer\": \"builtin:match\", \"scorr\": 1}", 400,
         "unknown key task.reward.scorr"},
        {"inference.modle", "\"m\"", 400, "unknown key inference.modle"},
        {"task.prompts", "{\"inputdir\": \"/x\"}", 400, "unknown key task.prompts.inputdir"},
    };
    ALL_REFUSED(cases);
    cJSON *b = parse_text(MINIMAL);
    set_at(b, "task.prompt", NULL);
    set_at(b, "task.messages", "[{\"role\": \"user\", \"content\": \"hi\", \"name\": \"x\"}]");
    refused_with(b, &LIM, 400, "unknown key task.messages[0].name");
    cJSON_Delete(b);
    /* sampling is the endpoint's: any key passes */
    b = parse_text(MINIMAL);
    set_at(b, "inference.sampling", "{\"top_k\": 20, \"chat_template_kwargs\": {\"x\": [1]}}");
    rl_request r;
    parsed(b, &LIM, &r);
    cr_assert_eq(cJSON_GetObjectItem(r.sampling, "top_k")->valueint, 20);
    rl_request_free(&r);
    cJSON_Delete(b);
}

Test(rl_request, hostile_keys_and_duplicates_give_one_short_line)
{
    char *big = malloc(20000);
    strcpy(big, "{\"task\": {\"prompt\": \"p\", \"");
    size_t off = strlen(big);
    memset(big + off, 'k', 10000);
    strcpy(big + off + 10000, "\": 1}}");
    cJSON *b = parse_text(big);
    rl_request r;
    lis_error err = {0};
    cr_assert_eq(rl_request_parse(b, &LIM, &r, &err), -1);
    cr_assert_eq(err.http_status, 400);
    cr_assert(strstr(err.msg, "unknown key task.kkkk"), "%s", err.msg);
    cr_assert_lt(strlen(err.msg), 120, "%s", err.msg);
    cJSON_Delete(b);
    free(big);
    b = parse_text("{\"task\": {\"prompt\": \"p\", \"a\\nb\\u0001\": 1}}");
    refused_with(b, &LIM, 400, "unknown key task.a?b?");
    cJSON_Delete(b);
    b = parse_text("{\"n\": 1, \"n\": 2, \"task\": {\"prompt\": \"p\"}}");
    refused_with(b, &LIM, 400, "duplicate key n");
    cJSON_Delete(b);
}

Test(rl_request, a_body_that_is_not_an_object_is_400)
{
    const char *bodies[] = {"[]", "\"x\"", "3", "null", "[{\"task\": {}}]"};
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        cJSON *b = parse_text(bodies[i]);
        refused_with(b, &LIM, 400, "the body must be a JSON object");
        cJSON_Delete(b);
    }
    refused_with(NULL, &LIM, 400, "the body must be a JSON object");
    static const refusal cases[] = {
        {"task", NULL, 400, "task is missing"},
        {"task", "[]", 400, "task must be an object"},
        {"inference", NULL, 400, "inference is missing"},
    };
    ALL_REFUSED(cases);
}

Test(rl_request, every_type_is_checked)
{
    static const refusal cases[] = {
        {"n", "\"8\"", 400, "n must be an integer"},
        {"n", "1.5", 400, "n must be an integer"},
        {"max_steps", "true", 400, "max_steps must be an integer"},
        {"deadline_s", "\"900\"", 400, "deadline_s must be a number"},
        {"effects", "\"yes\"", 400, "effects must be true or false"},
        {"labels", "[1]", 400, "labels must be an object"},
        {"request_id", "7", 400, "request_id must be a string"},
        {"task.prompt", "[\"x\"]", 400, "task.prompt must be a string"},
        {"task.image", "{}", 400, "task.image must be a string"},
        {"task.setup", "\"make\"", 400, "task.setup must be an array"},
        {"task.setup", "[\"ok\", 1]", 400, "task.setup[1] must be a string"},
        {"task.files", "[\"a\"]", 400, "task.files must be an object"},
        {"task.files", "{\"a\": 1}", 400, "task.files[\"a\"] must be a string"},
        {"task.files", "{\"a\": null}", 400, "task.files[\"a\"] must be a string"},
        {"task.prompts", "{\"input_dir\": 3}", 400, "task.prompts.input_dir must be a string"},
        {"task.reward", "\"builtin:match\"", 400, "task.reward must be an object"},
        {"task.reward", "{\"scorer\": \"builtin:m\", \"args\": [1]}", 400,
         "task.reward.args must be an object"},
        {"inference.sampling", "[]", 400, "inference.sampling must be an object"},
        {"inference.model", "1", 400, "inference.model must be a string"},
        {"inference.seeds", "{}", 400, "inference.seeds must be an array"},
        {"keep_snapshots", "\"all\"", 400, "keep_snapshots must be"},
        {"keep_snapshots", "[1.5]", 400, "keep_snapshots[0] must be an integer"},
    };
    ALL_REFUSED(cases);
}

Test(rl_request, n_is_bounded_by_the_servers_cap)
{
    static const refusal cases[] = {
        {"n", "0", 422, "n must be an integer at least 1"},
        {"n", "-3", 422, "n must be"},
        {"n", "513", 422, "cap of 512"},
        {"n", "1e300", 422, "cap of 512"},
    };
    ALL_REFUSED(cases);
    cJSON *b = parse_text(MINIMAL);
    set_at(b, "n", "5");
    rl_limits small = {.max_n = 4};
    refused_with(b, &small, 422, "cap of 4");
    set_at(b, "n", "4");
    rl_request r;
    parsed(b, &small, &r);
    cr_assert_eq(r.n, 4);
    rl_request_free(&r);
    cJSON_Delete(b);
}

Test(rl_request, seeds_are_one_integer_per_episode)
{
    cJSON *b = parse_text(MINIMAL);
    set_at(b, "n", "3");
    set_at(b, "inference.seeds", "[1, 2]");
    refused_with(b, &LIM, 422, "3 episodes");
    set_at(b, "inference.seeds", "[1, 2, \"3\"]");
    refused_with(b, &LIM, 400, "inference.seeds[2] must be an integer");
    set_at(b, "inference.seeds", "[1, 2.5, 3]");
    refused_with(b, &LIM, 400, "inference.seeds[1] must be an integer");
    set_at(b, "inference.seeds", "[1, 2, 1e300]");
    refused_with(b, &LIM, 422, "inference.seeds[2]");
    set_at(b, "inference.seeds", "[1, 2, -9007199254740992]");
    set_at(b, "inference.sampling", "{\"seed\": 4}");
    refused_with(b, &LIM, 400, "give one");
    set_at(b, "inference.sampling", NULL);
    rl_request r;
    parsed(b, &LIM, &r);
    cr_assert_eq(r.seeds[2], -9007199254740992LL);
    rl_request_free(&r);
    cJSON_Delete(b);
}

Test(rl_request, file_names_stay_where_they_say)
{
    static const refusal cases[] = {
        {"task.files", "{\"../x\": \"\"}", 400, "has a \"..\" component"},
        {"task.files", "{\"a/../../etc/passwd\": \"\"}", 400, "\"..\""},
        {"task.files", "{\"/testbed/../etc/passwd\": \"\"}", 400, "\"..\""},
        {"task.files", "{\"\": \"\"}", 400, "is empty"},
        {"task.files", "{\"/\": \"\"}", 400, "names no file"},
        {"task.files", "{\"./\": \"\"}", 400, "names no file"},
        {"task.files", "{\"a\\nb\": \"\"}", 400, "control characters"},
        {"task.files", "{\"a.txt\": \"1\", \"/testbed/input/./a.txt\": \"2\"}", 400,
         "names /testbed/input/a.txt twice"},
    };
    ALL_REFUSED(cases);
    cJSON *b = parse_text(MINIMAL);
    set_at(b, "task.prompts", "{\"input_dir\": \"/data//in/\"}");
    set_at(b, "task.files", "{\"./a.txt\": \"A\", \"x//y/./z\": \"Z\", \"/abs/b\": \"B\"}");
    rl_request r;
    parsed(b, &LIM, &r);
    cr_assert_eq(r.task.nfiles, 3);
    cr_assert_str_eq(r.task.files[0].path, "/abs/b");
    cr_assert_str_eq(r.task.files[1].path, "/data/in/a.txt");
    cr_assert_str_eq(r.task.files[2].path, "/data/in/x/y/z");
    cr_assert_str_eq(cJSON_GetObjectItem(r.task.prompts, "input_dir")->valuestring, "/data/in");
    rl_request_free(&r);
    set_at(b, "task.prompts", "{\"input_dir\": \"data\"}");
    refused_with(b, &LIM, 400, "task.prompts.input_dir must be an absolute path");
    set_at(b, "task.prompts", "{\"output_dir\": \"/a/../b\"}");
    refused_with(b, &LIM, 400, "task.prompts.output_dir has a \"..\"");
    cJSON_Delete(b);
}

Test(rl_request, files_over_their_budget_are_413_with_sizes)
{
    cJSON *b = parse_text(MINIMAL);
    char *big = malloc(702);
    big[0] = '"';
    memset(big + 1, 'x', 600);
    strcpy(big + 601, "\"");
    set_at(b, "task.files.a", big);
    set_at(b, "task.files.b", big);
    rl_limits lim = {.max_n = 8, .max_files_bytes = 1000};
    refused_with(b, &lim, 413, "1200 bytes, more than the 1000");
    lim.max_files_bytes = 1200;
    rl_request r;
    parsed(b, &lim, &r);
    cr_assert_eq(r.task.files[0].len + r.task.files[1].len, 1200);
    rl_request_free(&r);
    free(big);
    cJSON_Delete(b);
}

Test(rl_request, file_content_must_be_utf8_text)
{
    /* raw bytes in the body's text: cJSON takes them as they are */
    cJSON *b = parse_text("{\"task\": {\"prompt\": \"p\", \"files\": {\"a\": \"x\xff\xfey\"}},"
                          " \"inference\": {\"base_url\": \"http://h/v1\", \"model\": \"m\"}}");
    refused_with(b, &LIM, 400, "task.files[\"a\"] is not UTF-8 text");
    cJSON_Delete(b);
    b = parse_text("{\"task\": {\"prompt\": \"p\xc0\xaf\"},"
                   " \"inference\": {\"base_url\": \"http://h/v1\", \"model\": \"m\"}}");
    refused_with(b, &LIM, 400, "task.prompt must be UTF-8 text");
    cJSON_Delete(b);
}

Test(rl_request, setup_is_bounded)
{
    cJSON *b = parse_text(MINIMAL);
    cJSON *s = cJSON_CreateArray();
    for (int i = 0; i < 65; i++)
        cJSON_AddItemToArray(s, cJSON_CreateString("true"));
    cJSON_AddItemToObject(cJSON_GetObjectItem(b, "task"), "setup", s);
    refused_with(b, &LIM, 422, "65 commands, at most 64");
    cJSON_DeleteItemFromArray(s, 0);
    rl_request r;
    parsed(b, &LIM, &r);
    cr_assert_eq(r.task.nsetup, 64);
    rl_request_free(&r);
    char *huge = malloc((70 << 10) + 1);
    memset(huge, 'x', 70 << 10);
    huge[70 << 10] = 0;
    cJSON_ReplaceItemInArray(s, 0, cJSON_CreateString(huge));
    refused_with(b, &LIM, 413, "task.setup[0] is 71680 bytes");
    free(huge);
    minimal_refused("task.setup", "[\"\"]", 400, "task.setup[0] must not be empty");
    cJSON_Delete(b);
}

Test(rl_request, prompt_xor_messages)
{
    static const refusal cases[] = {
        {"task.messages", "[{\"role\": \"user\", \"content\": \"x\"}]", 400,
         "exactly one of prompt and messages"},
        {"task.prompt", NULL, 400, "exactly one of prompt and messages"},
        {"task.prompt", "\"\"", 400, "task.prompt must not be empty"},
    };
    ALL_REFUSED(cases);
    cJSON *b = parse_text(MINIMAL);
    set_at(b, "task.prompt", NULL);
    set_at(b, "task.messages", "[]");
    refused_with(b, &LIM, 400, "task.messages must not be empty");
    set_at(b, "task.messages", "[{\"role\": \"tool\", \"content\": \"x\"}]");
    refused_with(b, &LIM, 400, "task.messages[0].role must be");
    set_at(b, "task.messages", "[{\"role\": \"user\", \"content\": \"x\"}, \"hi\"]");
    refused_with(b, &LIM, 400, "task.messages[1] must be an object");
    set_at(b, "task.messages", "[{\"role\": \"user\", \"content\": [1]}]");
    refused_with(b, &LIM, 400, "task.messages[0].content must be a string");
    set_at(b, "task.messages",
           "[{\"role\": \"system\", \"content\": \"s\"},"
           " {\"role\": \"user\", \"content\": \"u\"},"
           " {\"role\": \"assistant\", \"content\": \"a\"}]");
    rl_request r;
    parsed(b, &LIM, &r);
    cr_assert_null(r.task.prompt);
    cr_assert_eq(cJSON_GetArraySize(r.task.messages), 3);
    rl_request_free(&r);
    /* free text may hold any character: a dataset's form feed, an ANSI colour */
    set_at(b, "task.messages", "[{\"role\": \"user\", \"content\": \"a\\f\\u001b[1mb\\r\\n\"}]");
    set_at(b, "task.setup", "[\"printf 'x\\ty'\\nls\"]");
    parsed(b, &LIM, &r);
    cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(r.task.messages, 0), "content")
                         ->valuestring,
                     "a\f\x1b[1mb\r\n");
    cr_assert_str_eq(r.task.setup[0], "printf 'x\ty'\nls");
    rl_request_free(&r);
    cJSON_Delete(b);
}

Test(rl_request, answer_file_follows_output_dir)
{
    cJSON *b = parse_text(MINIMAL);
    set_at(b, "task.prompts", "{\"output_dir\": \"/out/\"}");
    rl_request r;
    parsed(b, &LIM, &r);
    cr_assert_str_eq(r.task.answer_file, "/out/answer.txt");
    rl_request_free(&r);
    set_at(b, "task.answer_file", "\"/x//y/./ans.txt\"");
    parsed(b, &LIM, &r);
    cr_assert_str_eq(r.task.answer_file, "/x/y/ans.txt");
    rl_request_free(&r);
    set_at(b, "task.answer_file", "\"answer.txt\"");
    refused_with(b, &LIM, 400, "task.answer_file must be an absolute path");
    set_at(b, "task.answer_file", "\"/testbed/../etc/passwd\"");
    refused_with(b, &LIM, 400, "task.answer_file has a \"..\"");
    cJSON_Delete(b);
}

Test(rl_request, the_reward_is_checked_and_its_row_merged)
{
    static const refusal cases[] = {
        {"task.reward", "{\"ground_truth\": \"4\"}", 400, "task.reward.scorer is missing"},
        {"task.reward", "{\"scorer\": \"match\"}", 400,
         "builtin:NAME, cmd:COMMAND or python:PATH/reward.py"},
        {"task.reward", "{\"scorer\": \"cmd:\"}", 400, "builtin:NAME"},
        {"task.reward", "{\"scorer\": \"builtin:m\", \"timeout_s\": 0}", 422,
         "task.reward.timeout_s must be a number over 0"},
        {"task.reward", "{\"scorer\": \"builtin:m\", \"timeout_s\": 3601}", 422, "at most 3600"},
        {"task.reward",
         "{\"scorer\": \"builtin:m\", \"ground_truth\": 1,"
         " \"args\": {\"ground_truth\": 2}}",
         400, "give it once"},
    };
    ALL_REFUSED(cases);
    cJSON *b = parse_text(MINIMAL);
    set_at(b, "task.reward",
           "{\"scorer\": \"cmd:python3 s.py\", \"ground_truth\": {\"a\": [1, 2]},"
           " \"args\": {\"tol\": 0.5}, \"timeout_s\": 2.5}");
    rl_request r;
    parsed(b, &LIM, &r);
    cr_assert_str_eq(r.task.scorer, "cmd:python3 s.py");
    cr_assert_eq(r.task.reward_timeout, 2.5);
    char *row = cJSON_PrintUnformatted(r.task.reward_row);
    cr_assert_str_eq(row, "{\"tol\":0.5,\"ground_truth\":{\"a\":[1,2]}}");
    free(row);
    rl_request_free(&r);
    cJSON_Delete(b);
}

Test(rl_request, inference_is_checked)
{
    static const refusal cases[] = {
        {"inference.base_url", NULL, 400, "inference.base_url is missing"},
        {"inference.base_url", "\"ftp://h/v1\"", 400, "http:// or https://"},
        {"inference.base_url", "\"http://\"", 400, "http:// or https://"},
        {"inference.base_url", "\"http://h /v1\"", 400, "http:// or https://"},
        {"inference.model", NULL, 400, "inference.model is missing"},
        {"inference.api_key", "\"k\\r\\nX-Evil: 1\"", 400,
         "inference.api_key must be UTF-8 without control characters"},
        {"inference.sampling", "{\"messages\": []}", 400,
         "inference.sampling.messages is lis's to send"},
        {"inference.sampling", "{\"stream\": true}", 400, "inference.sampling.stream"},
        /* the one key lis reads: no cast of 1e300 to an integer */
        {"inference.sampling", "{\"max_tokens\": 1e300}", 400, "inference.sampling.max_tokens"},
        {"inference.sampling", "{\"max_tokens\": 0.5}", 400, "inference.sampling.max_tokens"},
    };
    ALL_REFUSED(cases);
    cJSON *b = parse_text(MINIMAL);
    char *big = malloc(70000);
    memset(big, 'x', 69999);
    big[69999] = 0;
    cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_GetObjectItem(b, "inference"),
                                                    "sampling"),
                            "stop", big);
    refused_with(b, &LIM, 413, "inference.sampling is over 65536 bytes");
    set_at(b, "inference.sampling", NULL);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(b, "labels"), "x", big);
    refused_with(b, &LIM, 413, "labels is over 65536 bytes");
    free(big);
    cJSON_Delete(b);
}

Test(rl_request, numbers_and_names_are_bounded)
{
    static const refusal cases[] = {
        {"max_steps", "0", 422, "max_steps must be an integer at least 1"},
        {"max_steps", "1001", 422, "at most 1000"},
        {"max_token_limit", "0", 422, "max_token_limit"},
        {"deadline_s", "-1", 422, "deadline_s must be a number at least 0"},
        {"tool_timeout_s", "0", 422, "tool_timeout_s must be a number over 0"},
        {"task.setup_timeout_s", "0", 422, "task.setup_timeout_s"},
        {"request_id", "\"\"", 400, "request_id must not be empty"},
        {"request_id", "\"a\\u0007b\"", 400, "request_id must be UTF-8 without control characters"},
    };
    ALL_REFUSED(cases);
    char id[260] = "\"";
    memset(id + 1, 'r', 201);
    strcpy(id + 202, "\"");
    minimal_refused("request_id", id, 422, "request_id is 201 bytes, at most 200");
    minimal_refused("task.id", id, 422, "task.id is 201 bytes");
    cJSON *b = parse_text(MINIMAL);
    set_at(b, "deadline_s", "0.5");
    set_at(b, "max_steps", "1000");
    set_at(b, "request_id", "\"r-1\"");
    rl_request r;
    parsed(b, &LIM, &r);
    cr_assert_eq(r.deadline_s, 0.5);
    cr_assert_eq(r.max_steps, 1000);
    cr_assert_str_eq(r.request_id, "r-1");
    rl_request_free(&r);
    cJSON_Delete(b);
}

Test(rl_request, keep_snapshots_forms)
{
    cJSON *b = parse_text(MINIMAL);
    set_at(b, "keep_snapshots", "\"every_step\"");
    rl_request r;
    parsed(b, &LIM, &r);
    cr_assert_eq(r.snaps, RL_SNAP_EVERY);
    rl_request_free(&r);
    set_at(b, "keep_snapshots", "[3, 1, 3]");
    parsed(b, &LIM, &r);
    cr_assert_eq(r.snaps, RL_SNAP_LIST);
    cr_assert_eq(r.nsnap_steps, 2);
    cr_assert_eq(r.snap_steps[0], 1);
    cr_assert_eq(r.snap_steps[1], 3);
    rl_request_free(&r);
    set_at(b, "keep_snapshots", "[0]");
    refused_with(b, &LIM, 422, "keep_snapshots[0] must be a step in 1..max_steps (100)");
    set_at(b, "max_steps", "5");
    set_at(b, "keep_snapshots", "[5, 6]");
    refused_with(b, &LIM, 422, "keep_snapshots[1] must be a step in 1..max_steps (5)");
    set_at(b, "keep_snapshots", "[1, 1, 1, 1, 1, 1]");
    refused_with(b, &LIM, 422, "more than max_steps");
    cJSON_Delete(b);
}

Test(rl_request, hostile_values_never_crash)
{
    /* nesting as deep as cJSON parses, in a free-form value */
    size_t depth = 900;
    char *deep = malloc(2 * depth + 1);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = 0;
    cJSON *b = parse_text(MINIMAL);
    set_at(b, "task.reward", "{\"scorer\": \"builtin:m\"}");
    set_at(b, "task.reward.ground_truth", deep);
    refused_with(b, &LIM, 422, "task.reward.ground_truth is nested over 256 levels");
    free(deep);
    cJSON_Delete(b);
    /* numbers cJSON makes that JSON cannot hold */
    const char *keys[] = {"n", "deadline_s", "max_steps", "tool_timeout_s"};
    for (size_t i = 0; i < 4; i++) {
        b = parse_text(MINIMAL);
        cJSON_AddItemToObject(b, keys[i], cJSON_CreateNumber(NAN));
        refused_with(b, &LIM, 400, keys[i]);
        cJSON_ReplaceItemInObject(b, keys[i], cJSON_CreateNumber(INFINITY));
        refused_with(b, &LIM, 400, keys[i]);
        cJSON_Delete(b);
    }
    b = parse_text(MINIMAL);
    set_at(b, "inference.seeds", "[0]");
    cJSON_ReplaceItemInArray(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "inference"), "seeds"), 0,
                             cJSON_CreateNumber(NAN));
    refused_with(b, &LIM, 400, "inference.seeds[0] must be an integer");
    cJSON_Delete(b);
    b = parse_text("{\"deadline_s\": 1e999, \"task\": {\"prompt\": \"p\"}}");
    refused_with(b, &LIM, 400, "deadline_s must be a number");
    cJSON_Delete(b);
    /* a string member cJSON left without its text */
    b = parse_text(MINIMAL);
    cJSON *p = cJSON_GetObjectItem(cJSON_GetObjectItem(b, "task"), "prompt");
    free(p->valuestring);
    p->valuestring = NULL;
    refused_with(b, &LIM, 400, "task.prompt must be a string");
    cJSON_Delete(b);
}

/* ---- tokens.c ----------------------------------------------------------- */

/* One turn's tokens from JSON text ("null": none). */
static cJSON *tok(const char *json) { return cJSON_Parse(json); }

static cJSON *flatten(cJSON **t, size_t n)
{
    rl_turn_tokens turns[16];
    for (size_t i = 0; i < n; i++)
        turns[i].tokens = cJSON_IsNull(t[i]) ? NULL : t[i];
    cJSON *o = rl_tokens_flatten(turns, n);
    cr_assert_not_null(o);
    /* the one invariant every trainer relies on */
    int len = cJSON_GetArraySize(cJSON_GetObjectItem(o, "response_ids"));
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "response_mask")), len);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "response_logprobs")), len);
    cr_assert(cJSON_IsBool(cJSON_GetObjectItem(o, "consistent")));
    cr_assert(cJSON_IsArray(cJSON_GetObjectItem(o, "segments")));
    return o;
}

static void field_is(const cJSON *o, const char *key, const char *json)
{
    char *s = cJSON_PrintUnformatted(cJSON_GetObjectItem(o, key));
    cr_assert_str_eq(s, json, "%s: %s, wanted %s", key, s, json);
    free(s);
}

static const char *why(const cJSON *o)
{
    const char *w = cJSON_GetStringValue(cJSON_GetObjectItem(o, "why"));
    return w ? w : "";
}

static void free_turns(cJSON **t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cJSON_Delete(t[i]);
}

#define T0 "{\"prompt_ids\": [1, 2, 3], \"ids\": [10, 11], \"logprobs\": [-0.5, -0.25]}"
#define T1 "{\"prompt_ids\": [1, 2, 3, 10, 11, 20, 21], \"ids\": [12], \"logprobs\": [-1.5]}"
#define T2                                                                                         \
    "{\"prompt_ids\": [1, 2, 3, 10, 11, 20, 21, 12, 22], \"ids\": [13, 14],"                       \
    " \"logprobs\": [-0.125, -2]}"

Test(rl_tokens, a_clean_episode_round_trips_with_masks)
{
    cJSON *t[] = {tok(T0), tok(T1), tok(T2)};
    cJSON *o = flatten(t, 3);
    field_is(o, "prompt_ids", "[1,2,3]");
    field_is(o, "response_ids", "[10,11,20,21,12,22,13,14]");
    field_is(o, "response_mask", "[1,1,0,0,1,0,1,1]");
    field_is(o, "response_logprobs", "[-0.5,-0.25,0,0,-1.5,0,-0.125,-2]");
    field_is(o, "consistent", "true");
    field_is(o, "segments", "[[0,2]]");
    cr_assert_null(cJSON_GetObjectItem(o, "why"), "why: %s", why(o));
    cJSON_Delete(o);
    free_turns(t, 3);
}

Test(rl_tokens, a_drifted_prefix_is_reported_never_spliced)
{
    /* turn 2's prompt re-tokenized turn 1's completion (12 -> 99) */
    cJSON *t[] = {tok(T0), tok(T1),
                  tok("{\"prompt_ids\": [1, 2, 3, 10, 11, 20, 21, 99, 22], \"ids\": [13, 14],"
                      " \"logprobs\": [-0.125, -2]}"),
                  tok("{\"prompt_ids\": [1, 2, 3, 10, 11, 20, 21, 99, 22, 13, 14, 30],"
                      " \"ids\": [15], \"logprobs\": [-1]}")};
    char *before[4];
    for (int i = 0; i < 4; i++)
        before[i] = cJSON_PrintUnformatted(t[i]);
    cJSON *o = flatten(t, 4);
    field_is(o, "consistent", "false");
    field_is(o, "segments", "[[0,1],[2,3]]");
    /* the first segment only: nothing of turns 2 and 3 in it */
    field_is(o, "prompt_ids", "[1,2,3]");
    field_is(o, "response_ids", "[10,11,20,21,12]");
    field_is(o, "response_mask", "[1,1,0,0,1]");
    cr_assert(strstr(why(o), "turn 2's prompt ids do not start with turn 1's prompt and ids"), "%s",
              why(o));
    cr_assert(strstr(why(o), "position 7"), "%s", why(o));
    for (int i = 0; i < 4; i++) {
        char *after = cJSON_PrintUnformatted(t[i]);
        cr_assert_str_eq(after, before[i], "turn %d's own ids changed", i);
        free(after);
        free(before[i]);
    }
    cJSON_Delete(o);
    /* a prompt shorter than the previous turn's prompt + ids breaks too */
    cJSON_Delete(t[2]);
    t[2] = tok("{\"prompt_ids\": [1, 2, 3, 10, 11, 20, 21], \"ids\": [5]}");
    o = flatten(t, 3);
    field_is(o, "segments", "[[0,1],[2,2]]");
    field_is(o, "response_ids", "[10,11,20,21,12]");
    cJSON_Delete(o);
    free_turns(t, 4);
}

Test(rl_tokens, missing_or_mismatched_logprobs_are_zero_and_said)
{
    cJSON *t[] = {tok(T0), tok("{\"prompt_ids\": [1, 2, 3, 10, 11, 20, 21], \"ids\": [12]}"),
                  tok("{\"prompt_ids\": [1, 2, 3, 10, 11, 20, 21, 12, 22], \"ids\": [13, 14],"
                      " \"logprobs\": [-0.125]}")};
    cJSON *o = flatten(t, 3);
    field_is(o, "consistent", "true");
    field_is(o, "response_ids", "[10,11,20,21,12,22,13,14]");
    field_is(o, "response_logprobs", "[-0.5,-0.25,0,0,0,0,0,0]");
    cr_assert(strstr(why(o), "turn 1 has no logprobs"), "%s", why(o));
    cr_assert(strstr(why(o), "turn 2's logprobs (1) do not match its ids (2)"), "%s", why(o));
    cJSON_Delete(o);
    cJSON_Delete(t[2]);
    t[2] = tok("{\"prompt_ids\": [1, 2, 3, 10, 11, 20, 21, 12, 22], \"ids\": [13, 14],"
               " \"logprobs\": [-0.125, \"x\"]}");
    o = flatten(t, 3);
    field_is(o, "response_logprobs", "[-0.5,-0.25,0,0,0,0,0,0]");
    cr_assert(strstr(why(o), "turn 2's logprob 1 is not a number"), "%s", why(o));
    cJSON_Delete(o);
    free_turns(t, 3);
}

Test(rl_tokens, a_turn_without_ids_breaks_the_block)
{
    cJSON *t[] = {tok(T0), tok("null"), tok(T2)};
    cJSON *o = flatten(t, 3);
    field_is(o, "consistent", "false");
    field_is(o, "segments", "[[0,0],[2,2]]");
    field_is(o, "prompt_ids", "[1,2,3]");
    field_is(o, "response_ids", "[10,11]");
    cr_assert(strstr(why(o), "turn 1 has no token ids"), "%s", why(o));
    cJSON_Delete(o);
    /* ids without the prompt's are no use either */
    cJSON_Delete(t[1]);
    t[1] = tok("{\"ids\": [12], \"logprobs\": [-1.5]}");
    o = flatten(t, 3);
    field_is(o, "segments", "[[0,0],[2,2]]");
    cr_assert(strstr(why(o), "turn 1 has no prompt ids"), "%s", why(o));
    cJSON_Delete(o);
    /* the first turn without: the block starts at the first that has them */
    cJSON *u[] = {tok("{}"), tok(T1), tok(T2)};
    o = flatten(u, 3);
    field_is(o, "consistent", "false");
    field_is(o, "segments", "[[1,2]]");
    field_is(o, "prompt_ids", "[1,2,3,10,11,20,21]");
    field_is(o, "response_ids", "[12,22,13,14]");
    field_is(o, "response_mask", "[1,0,1,1]");
    cJSON_Delete(o);
    free_turns(u, 3);
    free_turns(t, 3);
}

Test(rl_tokens, no_ids_at_all_leaves_it_empty_and_says_why)
{
    cJSON *t[] = {tok("null"), tok("null")};
    cJSON *o = flatten(t, 2);
    field_is(o, "prompt_ids", "[]");
    field_is(o, "response_ids", "[]");
    field_is(o, "consistent", "false");
    field_is(o, "segments", "[]");
    cr_assert(strstr(why(o), "return_token_ids"), "%s", why(o));
    cJSON_Delete(o);
    free_turns(t, 2);
    o = rl_tokens_flatten(NULL, 0);
    cr_assert_not_null(o);
    field_is(o, "response_ids", "[]");
    field_is(o, "consistent", "false");
    cr_assert(strstr(why(o), "no turn"), "%s", why(o));
    cJSON_Delete(o);
}

Test(rl_tokens, hostile_ids_are_never_taken)
{
    const char *bad[] = {
        "{\"prompt_ids\": [1, \"2\"], \"ids\": [3]}",
        "{\"prompt_ids\": [1], \"ids\": [-3]}",
        "{\"prompt_ids\": [1], \"ids\": [3.5]}",
        "{\"prompt_ids\": [1], \"ids\": [1e300]}",
        "{\"prompt_ids\": {\"a\": 1}, \"ids\": [3]}",
        "{\"prompt_ids\": [1], \"ids\": \"3\"}",
        "[1, 2, 3]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cJSON *t[] = {tok(bad[i])};
        cJSON *o = flatten(t, 1);
        field_is(o, "response_ids", "[]");
        field_is(o, "prompt_ids", "[]");
        field_is(o, "consistent", "false");
        cr_assert(strstr(why(o), "turn 0"), "%s: %s", bad[i], why(o));
        cJSON_Delete(o);
        free_turns(t, 1);
    }
}

Test(rl_tokens, a_block_over_its_cap_is_left_empty)
{
    cJSON *t0 = cJSON_CreateObject();
    cJSON *p = cJSON_AddArrayToObject(t0, "prompt_ids");
    for (int i = 0; i < (1 << 20) + 1; i++)
        cJSON_AddItemToArray(p, cJSON_CreateNumber(i & 1023));
    cJSON_AddItemToObject(t0, "ids", cJSON_CreateIntArray((int[]){7}, 1));
    cJSON *t[] = {t0};
    cJSON *o = flatten(t, 1);
    field_is(o, "prompt_ids", "[]");
    field_is(o, "response_ids", "[]");
    field_is(o, "consistent", "false");
    cr_assert(strstr(why(o), "over 1048576 ids"), "%s", why(o));
    cJSON_Delete(o);
    cJSON_Delete(t0);
}

/* ---- store.c ------------------------------------------------------------ */

typedef struct seen {
    char ids[8][80];
    cJSON *res[8];
    int n, stop_after;
} seen;

static int collect(void *arg, const char *id, cJSON *result)
{
    seen *s = arg;
    cr_assert_lt(s->n, 8);
    snprintf(s->ids[s->n], sizeof s->ids[0], "%s", id);
    s->res[s->n++] = result; /* each hands its result over */
    return s->stop_after && s->n == s->stop_after ? 7 : 0;
}

static void seen_free(seen *s)
{
    for (int i = 0; i < s->n; i++)
        cJSON_Delete(s->res[i]);
}

Test(rl_store, results_round_trip_through_the_directory)
{
    char dir[256];
    t_mkdtemp(dir, sizeof dir, "rl-store");
    char state[300];
    snprintf(state, sizeof state, "%s/state", dir); /* made when missing */
    lis_error err = {0};
    cJSON *a = parse_text("{\"episode_id\": \"e-b\", \"reward\": 1.0, \"turns\": [1, 2]}");
    cJSON *b = parse_text("{\"episode_id\": \"e-a\", \"status\": \"completed\"}");
    cr_assert_eq(rl_store_put(state, "e-b", a, &err), 0, "%s", err.msg);
    cr_assert_eq(rl_store_put(state, "e-a", b, &err), 0, "%s", err.msg);
    struct stat st;
    cr_assert_eq(stat(t_under(state, "episodes"), &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700);
    cr_assert_eq(stat(t_under(state, "episodes/e-a.json"), &st), 0);
    cr_assert_eq(st.st_mode & 0077, 0, "a result is the owner's only");
    seen s = {0};
    size_t bad = 99;
    cr_assert_eq(rl_store_each(state, collect, &s, &bad, &err), 0, "%s", err.msg);
    cr_assert_eq(bad, 0);
    cr_assert_eq(s.n, 2);
    cr_assert_str_eq(s.ids[0], "e-a");
    cr_assert_str_eq(s.ids[1], "e-b");
    cr_assert(cJSON_Compare(s.res[0], b, 1));
    cr_assert(cJSON_Compare(s.res[1], a, 1));
    seen_free(&s);
    /* a second put replaces the first */
    cJSON_ReplaceItemInObject(a, "reward", cJSON_CreateNumber(0));
    cr_assert_eq(rl_store_put(state, "e-b", a, &err), 0, "%s", err.msg);
    seen s2 = {.stop_after = 1};
    cr_assert_eq(rl_store_each(state, collect, &s2, &bad, &err), 7, "cb's return ends the walk");
    cr_assert_eq(s2.n, 1);
    seen_free(&s2);
    cr_assert_eq(rl_store_del(state, "e-a", &err), 0, "%s", err.msg);
    cr_assert_eq(rl_store_del(state, "e-a", &err), -1);
    cr_assert_eq(err.code, ENOENT);
    seen s3 = {0};
    cr_assert_eq(rl_store_each(state, collect, &s3, &bad, &err), 0);
    cr_assert_eq(s3.n, 1);
    cr_assert_str_eq(s3.ids[0], "e-b");
    cr_assert_eq(cJSON_GetObjectItem(s3.res[0], "reward")->valuedouble, 0);
    seen_free(&s3);
    /* a directory never made holds nothing */
    seen s4 = {0};
    cr_assert_eq(rl_store_each(t_under(dir, "none"), collect, &s4, &bad, &err), 0);
    cr_assert_eq(s4.n + (int)bad, 0);
    cJSON_Delete(a);
    cJSON_Delete(b);
    t_rmtree(dir);
}

Test(rl_store, crash_leftovers_and_junk_are_skipped)
{
    char dir[256];
    t_mkdtemp(dir, sizeof dir, "rl-store");
    lis_error err = {0};
    cJSON *a = parse_text("{\"episode_id\": \"e1\"}");
    cr_assert_eq(rl_store_put(dir, "e1", a, &err), 0, "%s", err.msg);
    /* what a crash between write and rename leaves, and what else may be there */
    t_put(t_under(dir, "episodes/.tmp-e2.Ab12Cd"), "{\"episode_id\": \"e2\", \"tur");
    t_put(t_under(dir, "episodes/e3.json"), "{\"episode_id\": ");
    t_put(t_under(dir, "episodes/e4.json"), "[1, 2]");
    t_put(t_under(dir, "episodes/e5.json"), "{} {}");
    t_put(t_under(dir, "episodes/notes.txt"), "{}");
    t_put(t_under(dir, "episodes/a b.json"), "{}");
    cr_assert_eq(mkfifo(t_under(dir, "episodes/e6.json"), 0600), 0); /* never opened blocking */
    cr_assert_eq(symlink("e1.json", t_under(dir, "episodes/e7.json")), 0);
    seen s = {0};
    size_t bad = 0;
    cr_assert_eq(rl_store_each(dir, collect, &s, &bad, &err), 0, "%s", err.msg);
    cr_assert_eq(s.n, 1);
    cr_assert_str_eq(s.ids[0], "e1");
    cr_assert_eq(bad, 7, "bad: %zu", bad);
    seen_free(&s);
    cJSON_Delete(a);
    t_rmtree(dir);
}

Test(rl_store, an_id_cannot_leave_the_directory)
{
    char dir[256];
    t_mkdtemp(dir, sizeof dir, "rl-store");
    cJSON *a = parse_text("{}");
    char long_id[80];
    memset(long_id, 'a', 65);
    long_id[65] = 0;
    const char *ids[] = {"../x", "a/b", "", ".", "..", "x.json", "a\nb", long_id, NULL};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        lis_error err = {0};
        cr_assert_eq(rl_store_put(dir, ids[i], a, &err), -1, "id %zu taken", i);
        cr_assert_eq(err.code, EINVAL);
        cr_assert(strstr(err.msg, "episode id"), "%s", err.msg);
        cr_assert_eq(rl_store_del(dir, ids[i], &err), -1);
        cr_assert_eq(err.code, EINVAL);
    }
    cr_assert_neq(access(t_under(dir, "x.json"), F_OK), 0);
    cr_assert_neq(access(t_under(dir, "episodes"), F_OK), 0, "nothing made for a bad id");
    lis_error err = {0};
    long_id[64] = 0;
    cr_assert_eq(rl_store_put(dir, long_id, a, &err), 0, "%s", err.msg);
    cJSON_Delete(a);
    t_rmtree(dir);
}

Test(rl_store, what_is_written_is_strict_utf8)
{
    char dir[256];
    t_mkdtemp(dir, sizeof dir, "rl-store");
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "observation", "ok \xff\xfe end");
    lis_error err = {0};
    cr_assert_eq(rl_store_put(dir, "e1", a, &err), 0, "%s", err.msg);
    char *text = t_slurp(t_under(dir, "episodes/e1.json"));
    cr_assert(lis_utf8_valid(text, strlen(text)), "not UTF-8: %s", text);
    cJSON *back = parse_text(text);
    cr_assert_str_eq(cJSON_GetObjectItem(back, "observation")->valuestring,
                     "ok \xef\xbf\xbd\xef\xbf\xbd end");
    cr_assert_str_eq(cJSON_GetObjectItem(back, "observation_b64")->valuestring, "b2sg//4gZW5k");
    cJSON_Delete(back);
    free(text);
    cJSON_Delete(a);
    t_rmtree(dir);
}

/* ---- index.c: episodes and groups by id ---------------------------------------------------- */

Test(rl_index, put_get_delete_and_grow_past_tombstones)
{
    rl_index x = {0};
    static char ids[5000][RL_INDEX_ID];
    for (int i = 0; i < 5000; i++) {
        snprintf(ids[i], RL_INDEX_ID, "e-%016x%04x", (unsigned)(i * 2654435761u), i & 0xffff);
        cr_assert_eq(rl_index_put(&x, ids[i], ids[i]), 0);
    }
    cr_assert_eq(x.count, 5000);
    for (int i = 0; i < 5000; i++)
        cr_assert_eq(rl_index_get(&x, ids[i]), ids[i], "%s", ids[i]);
    cr_assert_null(rl_index_get(&x, "e-nope"));
    /* half deleted: the others still found past their tombstones; a put again reuses one */
    for (int i = 0; i < 5000; i += 2)
        rl_index_del(&x, ids[i]);
    cr_assert_eq(x.count, 2500);
    for (int i = 0; i < 5000; i++)
        cr_assert_eq(rl_index_get(&x, ids[i]), i % 2 ? ids[i] : NULL, "%s", ids[i]);
    cr_assert_eq(rl_index_put(&x, ids[0], ids[1]), 0);
    cr_assert_eq(rl_index_get(&x, ids[0]), ids[1]);
    cr_assert_eq(rl_index_put(&x, ids[0], ids[0]), 0); /* replaced, not added */
    cr_assert_eq(x.count, 2501);
    /* many more puts and deletes than slots: tombstones never fill the table */
    for (int round = 0; round < 20; round++)
        for (int i = 1; i < 5000; i += 2) {
            rl_index_del(&x, ids[i]);
            cr_assert_eq(rl_index_put(&x, ids[i], ids[i]), 0);
        }
    cr_assert_eq(x.count, 2501);
    cr_assert(x.used <= x.cap / 2 + 1, "used %zu of %zu", x.used, x.cap);
    for (int i = 1; i < 5000; i += 2)
        cr_assert_eq(rl_index_get(&x, ids[i]), ids[i]);
    rl_index_free(&x);
    cr_assert_null(rl_index_get(&x, ids[1]));
}
