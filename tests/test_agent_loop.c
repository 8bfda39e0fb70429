/* test_agent_loop.c - the LLM client against tests/fake_llm.py on 127.0.0.1, and
 * the agent loop against it in real sandboxes (busybox where sh is enough,
 * the Debian fixture where python or bash is needed). */
#include "agent_internal.h"
#include "testlib.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static llm_config cfg_for(const t_fake *f)
{
    llm_config c = {.api = LLM_API_OPENAI,
                    .base_url = f->url,
                    .api_key = "sk-test",
                    .model = "fake-model",
                    .temperature = 0.7,
                    .send_temperature = 1,
                    .max_tokens = 65536,
                    .connect_timeout = 5,
                    .timeout = 20,
                    .max_retries = 5,
                    .backoff_base = 0.01,
                    .backoff_max = 10};
    return c;
}

static cJSON *two_messages(void)
{
    return cJSON_Parse("[{\"role\":\"system\",\"content\":\"sys\"},"
                       "{\"role\":\"user\",\"content\":\"do it\"}]");
}

static int chat(const llm_config *cfg, llm_reply *r, lis_error *err)
{
    llm_client *c = llm_new(cfg, err);
    cr_assert(c, "%s", err->msg);
    cJSON *m = two_messages(), *tools = agent_tool_schemas();
    int rc = llm_chat(c, m, tools, r, err);
    cJSON_Delete(m);
    cJSON_Delete(tools);
    llm_free(c);
    return rc;
}

/* ---- the client -------------------------------------------------------- */

Test(agent_llm, plain_request_and_reply)
{
    t_fake f;
    t_fake_start(&f, "{\"replies\":[{\"content\":\"thinking\",\"reasoning\":\"deep\",\"calls\":"
                     "[[\"execute_bash\",{\"command\":\"ls\"}]],\"usage\":[123,45]}]}");
    llm_config cfg = cfg_for(&f);
    cJSON *extra = cJSON_Parse("{\"chat_template_kwargs\":{\"thinking\":true},\"top_k\":20}");
    cfg.extra_body = extra;
    llm_reply r;
    lis_error err = {0};
    cr_assert_eq(chat(&cfg, &r, &err), 0, "%s", err.msg);
    cr_assert_str_eq(r.content, "thinking");
    cr_assert_str_eq(r.reasoning, "deep");
    cr_assert_eq(cJSON_GetArraySize(r.tool_calls), 1);
    cr_assert_eq(r.usage.prompt_tokens, 123);
    cr_assert_eq(r.usage.completion_tokens, 45);
    cr_assert_eq(r.attempts, 1);
    cJSON *req = t_fake_request(&f, 0);
    cJSON *body = cJSON_GetObjectItem(req, "body");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(req, "path")),
                     "/v1/chat/completions");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(req, "auth")), "Bearer sk-test");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(body, "model")), "fake-model");
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(body, "tools")), 3);
    cr_assert_null(cJSON_GetObjectItem(body, "tool_choice"));
    cr_assert_eq(cJSON_GetObjectItem(body, "max_tokens")->valueint, 65536);
    cr_assert_float_eq(cJSON_GetObjectItem(body, "temperature")->valuedouble, 0.7, 1e-9);
    cr_assert(cJSON_IsTrue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(body, "chat_template_kwargs"), "thinking")));
    cr_assert_eq(cJSON_GetObjectItem(body, "top_k")->valueint, 20);
    cr_assert_null(cJSON_GetObjectItem(body, "stream"));
    cJSON_Delete(req);
    cJSON_Delete(extra);
    llm_reply_free(&r);
    t_fake_stop(&f);
}

Test(agent_llm, streaming_assembles_tool_calls)
{
    t_fake f;
    t_fake_start(&f, "{\"replies\":[{\"stream\":true,\"content\":\"ok then\",\"reasoning\":\"why\","
                     "\"calls\":[[\"str_replace_editor\",{\"command\":\"create\",\"path\":"
                     "\"/testbed/a.py\",\"file_text\":\"print('hi')\\n\"}],[\"submit\",{}]],"
                     "\"usage\":[7,3]}]}");
    llm_config cfg = cfg_for(&f);
    cfg.stream = 1;
    llm_reply r;
    lis_error err = {0};
    cr_assert_eq(chat(&cfg, &r, &err), 0, "%s", err.msg);
    cr_assert_str_eq(r.content, "ok then");
    cr_assert_str_eq(r.reasoning, "why");
    cr_assert_eq(cJSON_GetArraySize(r.tool_calls), 2);
    cJSON *f0 = cJSON_GetObjectItem(cJSON_GetArrayItem(r.tool_calls, 0), "function");
    cJSON *args = cJSON_Parse(cJSON_GetStringValue(cJSON_GetObjectItem(f0, "arguments")));
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(args, "file_text")), "print('hi')\n");
    cJSON_Delete(args);
    cr_assert_eq(r.usage.total_tokens, 10);
    cJSON *req = t_fake_request(&f, 0);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(req, "body"), "stream")));
    cJSON_Delete(req);
    llm_reply_free(&r);
    t_fake_stop(&f);
}

Test(agent_llm, retry_after_is_honoured_on_429)
{
    t_fake f;
    t_fake_start(&f, "{\"replies\":[{\"status\":429,\"headers\":{\"Retry-After\":\"1\"},\"body\":"
                     "{\"error\":{\"message\":\"slow down\"}}},{\"content\":\"ok\"}]}");
    llm_config cfg = cfg_for(&f);
    llm_reply r;
    lis_error err = {0};
    double t0 = lis_now();
    cr_assert_eq(chat(&cfg, &r, &err), 0, "%s", err.msg);
    double dt = lis_now() - t0;
    cr_assert_eq(r.attempts, 2);
    cr_assert_geq(dt, 0.95, "waited only %.2fs", dt);
    cr_assert_lt(dt, 5);
    llm_reply_free(&r);
    t_fake_stop(&f);
}

Test(agent_llm, server_error_then_success)
{
    t_fake f;
    t_fake_start(&f, "{\"replies\":[{\"status\":500,\"body\":{\"error\":{\"message\":\"boom\"}}},"
                     "{\"status\":502,\"body\":{}},{\"content\":\"fine\"}]}");
    llm_config cfg = cfg_for(&f);
    llm_reply r;
    lis_error err = {0};
    cr_assert_eq(chat(&cfg, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.attempts, 3);
    cr_assert_str_eq(r.content, "fine");
    llm_reply_free(&r);
    t_fake_stop(&f);
}

Test(agent_llm, connection_reset_mid_stream_is_retried)
{
    t_fake f;
    t_fake_start(&f, "{\"replies\":[{\"stream\":true,\"reset_after\":3,\"content\":\"partial "
                     "content here\",\"calls\":[[\"execute_bash\",{\"command\":\"echo 1\"}]]},"
                     "{\"stream\":true,\"calls\":[[\"execute_bash\",{\"command\":\"echo 2\"}]]}]}");
    llm_config cfg = cfg_for(&f);
    cfg.stream = 1;
    llm_reply r;
    lis_error err = {0};
    cr_assert_eq(chat(&cfg, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.attempts, 2);
    cJSON *f0 = cJSON_GetObjectItem(cJSON_GetArrayItem(r.tool_calls, 0), "function");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(f0, "arguments")),
                     "{\"command\": \"echo 2\"}");
    llm_reply_free(&r);
    t_fake_stop(&f);
}

/* An endpoint that streams forever: each attempt stops at the 64 MiB cap of
 * a plain reply and fails as that attempt's error (not at the 1200 s
 * timeout, not with the process growing by the stream's rate). */
Test(agent_llm, an_endless_stream_stops_at_the_reply_cap, .timeout = 120)
{
    t_fake f;
    t_fake_start(&f, "{\"replies\":[{\"stream\":true,\"endless\":8192},"
                     "{\"stream\":true,\"endless\":8192}]}");
    llm_config cfg = cfg_for(&f);
    cfg.stream = 1;
    cfg.timeout = 100;
    cfg.max_retries = 2;
    llm_reply r;
    lis_error err = {0};
    double t0 = lis_now();
    cr_assert_eq(chat(&cfg, &r, &err), -1);
    printf("endless SSE stream: 2 attempts stopped at the cap in %.2f s\n", lis_now() - t0);
    cr_assert(strstr(err.msg, "after 2 attempts"), "%s", err.msg);
    cr_assert(strstr(err.msg, "larger than 64 MiB"), "%s", err.msg);
    t_fake_stop(&f);
}

/* 2 MB of tool-call arguments in 7-byte deltas (the fake server's split):
 * assembled exactly; the CPU it took is printed (quadratic assembly took
 * 66 s; docs/benchmarks.md). */
Test(agent_llm, streamed_arguments_of_2_mb_assemble_exactly, .timeout = 120)
{
    enum { N = 2 << 20 };
    char *script = malloc(N + 256);
    cr_assert(script);
    int k = snprintf(script, 256,
                     "{\"replies\":[{\"stream\":true,\"calls\":[[\"execute_bash\","
                     "{\"command\":\"echo ");
    for (int i = 0; i < N; i++)
        script[k + i] = "abcdefghijklmnopqrstuvwxyz0123456789"[i % 36];
    snprintf(script + k + N, 256, "\"}]]}]}");
    t_fake f;
    t_fake_start(&f, script);
    llm_config cfg = cfg_for(&f);
    cfg.stream = 1;
    cfg.timeout = 100;
    llm_reply r;
    lis_error err = {0};
    cr_assert_eq(chat(&cfg, &r, &err), 0, "%s", err.msg);
    cJSON *f0 = cJSON_GetObjectItem(cJSON_GetArrayItem(r.tool_calls, 0), "function");
    cJSON *args = cJSON_Parse(cJSON_GetStringValue(cJSON_GetObjectItem(f0, "arguments")));
    const char *cmd = cJSON_GetStringValue(cJSON_GetObjectItem(args, "command"));
    cr_assert(cmd);
    cr_assert_eq(strlen(cmd), (size_t)N + 5);
    cr_assert_eq(memcmp(cmd + 5, script + k, N), 0);
    cJSON_Delete(args);
    llm_reply_free(&r);
    free(script);
    t_fake_stop(&f);
}

Test(agent_llm, a_server_that_never_answers_times_out)
{
    t_fake f;
    t_fake_start(&f, "{\"replies\":[{\"hang\":60},{\"hang\":60}]}");
    llm_config cfg = cfg_for(&f);
    cfg.timeout = 1;
    cfg.max_retries = 2;
    llm_reply r;
    lis_error err = {0};
    double t0 = lis_now();
    cr_assert_eq(chat(&cfg, &r, &err), -1);
    cr_assert_lt(lis_now() - t0, 10);
    cr_assert(strstr(err.msg, "after 2 attempts"), "%s", err.msg);
    cr_assert(strstr(err.msg, "imeout") || strstr(err.msg, "timed out"), "%s", err.msg);
    t_fake_stop(&f);
}

/* Sets *flag after delay seconds (another thread: a driver's cancel). */
typedef struct later {
    volatile int *flag;
    double delay;
    pthread_t th;
} later;

static void *later_main(void *arg)
{
    later *l = arg;
    agent_sleep(l->delay);
    *l->flag = 1;
    return NULL;
}

static void later_start(later *l, volatile int *flag, double delay)
{
    l->flag = flag;
    l->delay = delay;
    cr_assert_eq(pthread_create(&l->th, NULL, later_main, l), 0);
}

/* A call whose abort flag another thread sets after delay seconds: it
 * fails "cancelled" (ECANCELED, no HTTP status) after one request; returns
 * how long it took. */
static double chat_aborted(const t_fake *f, llm_config *cfg, volatile int *flag, double delay)
{
    cfg->abort = flag;
    later l;
    later_start(&l, flag, delay);
    llm_reply r;
    lis_error err = {0};
    double t0 = lis_now();
    cr_assert_eq(chat(cfg, &r, &err), -1);
    double dt = lis_now() - t0;
    pthread_join(l.th, NULL);
    cr_assert_eq(err.code, ECANCELED, "%d: %s", err.code, err.msg);
    cr_assert_str_eq(err.msg, "cancelled");
    cr_assert_eq(err.http_status, 0);
    cr_assert_eq(t_fake_count(f), 1);
    return dt;
}

/* llm_config.abort set from another thread while the endpoint never answers
 * (hang 60 s, timeout 50 s): the request ends "cancelled", with no retry. */
Test(agent_llm, abort_ends_a_hanging_request_without_retry)
{
    t_fake f;
    t_fake_start(&f, "{\"replies\":[{\"hang\":60},{\"hang\":60},{\"content\":\"late\"}]}");
    llm_config cfg = cfg_for(&f);
    cfg.timeout = 50;
    volatile int flag = 0;
    printf("abort: a hanging request ended %.2f s after the start (flag set at 0.3 s)\n",
           chat_aborted(&f, &cfg, &flag, 0.3));
    t_fake_stop(&f);
}

/* An abort during the backoff after a 500 (60 s to wait) ends the call
 * without the second attempt; an abort already set sends nothing. */
Test(agent_llm, abort_stops_the_backoff_and_prevents_a_request)
{
    t_fake f;
    t_fake_start(&f, "{\"replies\":[{\"status\":500,\"body\":{\"error\":{\"message\":"
                     "\"busy\"}}},{\"content\":\"ok\"}]}");
    llm_config cfg = cfg_for(&f);
    cfg.backoff_base = cfg.backoff_max = 60;
    volatile int flag = 0;
    chat_aborted(&f, &cfg, &flag, 0.5);
    llm_reply r;
    lis_error err = {0};
    cr_assert_eq(chat(&cfg, &r, &err), -1);
    cr_assert_eq(err.code, ECANCELED);
    cr_assert_eq(t_fake_count(&f), 1);
    t_fake_stop(&f);
}

Test(agent_llm, auth_and_url_errors_are_not_retried)
{
    t_fake f;
    t_fake_start(&f,
                 "{\"replies\":[{\"status\":401,\"body\":{\"error\":{\"message\":\"bad key\"}}},"
                 "{\"status\":404,\"body\":{\"error\":{\"message\":\"no such model\"}}},"
                 "{\"status\":403,\"body\":{}}]}");
    llm_config cfg = cfg_for(&f);
    llm_reply r;
    lis_error err = {0};
    cr_assert_eq(chat(&cfg, &r, &err), -1);
    cr_assert_eq(err.http_status, 401);
    cr_assert(strstr(err.msg, "API key"), "%s", err.msg);
    cr_assert_eq(chat(&cfg, &r, &err), -1);
    cr_assert_eq(err.http_status, 404);
    cr_assert(strstr(err.msg, "--llm-base-url") && strstr(err.msg, "fake-model"), "%s", err.msg);
    cr_assert_eq(chat(&cfg, &r, &err), -1);
    cr_assert_eq(err.http_status, 403);
    cr_assert_eq(t_fake_count(&f), 3);
    t_fake_stop(&f);
}

Test(agent_llm, context_length_error_shrinks_max_tokens)
{
    t_fake f;
    t_fake_start(&f, "{\"replies\":[{\"status\":400,\"body\":{\"error\":{\"message\":\"This "
                     "model's maximum context length is 100000 tokens. However, you requested "
                     "145536 tokens (80000 tokens in the messages, 65536 in the completion).\"}}},"
                     "{\"content\":\"ok\"}]}");
    llm_config cfg = cfg_for(&f);
    llm_reply r;
    lis_error err = {0};
    cr_assert_eq(chat(&cfg, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.max_tokens_used, 100000 - 80000 - 100);
    cJSON *req = t_fake_request(&f, 1);
    cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(req, "body"), "max_tokens")->valueint,
                 19900);
    cJSON_Delete(req);
    llm_reply_free(&r);
    t_fake_stop(&f);
}

Test(agent_llm, anthropic_messages_api)
{
    t_fake f;
    t_fake_start(&f, "{\"mode\":\"anthropic\",\"replies\":[{\"content\":\"let me\",\"reasoning\":"
                     "\"hmm\",\"calls\":[[\"execute_bash\",{\"command\":\"pwd\"}]],"
                     "\"usage\":[50,5]}]}");
    llm_config cfg = cfg_for(&f);
    cfg.api = LLM_API_ANTHROPIC;
    char base[160];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", f.port);
    cfg.base_url = base;
    llm_reply r;
    lis_error err = {0};
    cr_assert_eq(chat(&cfg, &r, &err), 0, "%s", err.msg);
    cr_assert_str_eq(r.content, "let me");
    cr_assert_str_eq(r.reasoning, "hmm");
    cJSON *f0 = cJSON_GetObjectItem(cJSON_GetArrayItem(r.tool_calls, 0), "function");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(f0, "name")), "execute_bash");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(f0, "arguments")),
                     "{\"command\":\"pwd\"}");
    cr_assert_eq(r.usage.total_tokens, 55);
    cJSON *req = t_fake_request(&f, 0);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(req, "path")), "/v1/messages");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(req, "x_api_key")), "sk-test");
    cJSON *body = cJSON_GetObjectItem(req, "body");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(body, "system")), "sys");
    cr_assert(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(body, "tools"), 0),
                                  "input_schema"));
    cJSON_Delete(req);
    llm_reply_free(&r);
    t_fake_stop(&f);
}

/* ---- the loop in a sandbox --------------------------------------------- */

typedef struct world {
    t_fake f;
    lis_ctx *ctx;
    lis_sandbox *sb;
    agent_tool_env env;
    agent_prompts prompts;
    agent_opts o;
    agent_outcome out;
    cJSON *traj;
} world;

static void world_start(world *w, const char *rootfs, const char *script)
{
    memset(w, 0, sizeof *w);
    t_fake_start(&w->f, script);
    w->ctx = t_ctx();
    w->sb = t_sandbox(w->ctx, rootfs);
    cr_assert_eq(agent_prompts_default(&w->prompts), 0);
    lis_error err = {0};
    cr_assert_eq(agent_prepare_sandbox(w->sb, &w->prompts, &w->env, &err), 0, "%s", err.msg);
    w->o.query = "test task";
    w->o.prompts = &w->prompts;
    w->o.max_steps = 10;
    w->o.max_token_limit = 65536;
    w->o.llm = cfg_for(&w->f);
    w->o.llm_name = "fake-model";
}

static void world_run(world *w) { w->traj = agent_loop(&w->env, &w->o, &w->out); }

static void world_stop(world *w)
{
    cJSON_Delete(w->traj);
    lis_error err;
    lis_sandbox_destroy(w->sb, &err);
    lis_ctx_free(w->ctx);
    agent_prompts_free(&w->prompts);
    t_fake_stop(&w->f);
}

static const char *obs(const world *w, int step)
{
    cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(w->traj, "steps"), step);
    return cJSON_GetStringValue(cJSON_GetObjectItem(s, "observation"));
}

/* Messages of the n-th request the server saw. */
static cJSON *req_messages(const world *w, int n, cJSON **hold)
{
    *hold = t_fake_request(&w->f, n);
    cr_assert(*hold, "no request %d", n);
    return cJSON_GetObjectItem(cJSON_GetObjectItem(*hold, "body"), "messages");
}

static const char *field(const cJSON *msgs, int i, const char *key)
{
    if (i < 0)
        i += cJSON_GetArraySize(msgs);
    return cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, i), key));
}

Test(agent_loop, no_tool_call_malformed_unknown_and_steps_remaining)
{
    world w;
    world_start(&w, t_busybox(),
                "{\"replies\":["
                "{\"content\":\"I am just talking\"},"
                "{\"calls\":[[\"execute_bash\",\"{not json\"]]},"
                "{\"calls\":[[\"fly_away\",{}]]},"
                "{\"calls\":[[\"execute_bash\",{}]]},"
                "{\"calls\":[[\"submit\",{}]]}]}");
    world_run(&w);
    cr_assert_eq(w.out.stop, AGENT_STOP_SUBMIT, "%s", agent_stop_name(w.out.stop));
    cr_assert_eq(w.out.steps, 5);
    cr_assert_str_eq(obs(&w, 0), AGENT_CONTINUE_MSG);
    cr_assert_str_eq(obs(&w, 1), AGENT_CONTINUE_MSG);
    cr_assert_str_eq(obs(&w, 2), "Unknown action: fly_away");
    cr_assert_str_eq(obs(&w, 3), "Error: No command provided.");
    cr_assert_str_eq(obs(&w, 4), "<<< Finished >>>");
    cJSON *hold;
    cJSON *m = req_messages(&w, 0, &hold);
    cr_assert_eq(cJSON_GetArraySize(m), 2);
    cr_assert(strstr(field(m, 1, "content"), "</problem>"));
    const char *u = field(m, 1, "content");
    cr_assert_str_eq(u + strlen(u) - 20, "\nSteps Remaining: 10");
    cJSON_Delete(hold);
    /* no call: the continue message is a user turn */
    m = req_messages(&w, 1, &hold);
    cr_assert_str_eq(field(m, -1, "role"), "user");
    cr_assert(!strncmp(field(m, -1, "content"), AGENT_CONTINUE_MSG, strlen(AGENT_CONTINUE_MSG)));
    cr_assert(strstr(field(m, -1, "content"), "\nSteps Remaining: 9"));
    cJSON_Delete(hold);
    /* malformed arguments: the call is still answered, with the continue message */
    m = req_messages(&w, 2, &hold);
    cr_assert_str_eq(field(m, -1, "role"), "tool");
    cr_assert_str_eq(field(m, -1, "tool_call_id"), "call_1_0");
    cr_assert(!strncmp(field(m, -1, "content"), AGENT_CONTINUE_MSG, strlen(AGENT_CONTINUE_MSG)));
    cJSON_Delete(hold);
    cJSON *s1 = cJSON_GetArrayItem(cJSON_GetObjectItem(w.traj, "steps"), 1);
    cr_assert_str_eq(cJSON_GetStringValue(
                         cJSON_GetObjectItem(cJSON_GetObjectItem(s1, "action"), "function")),
                     "");
    world_stop(&w);
}

Test(agent_loop, text_tool_calls_hermes_and_qwen3_coder)
{
    world w;
    world_start(&w, t_busybox(),
                "{\"replies\":["
                "{\"content\":\"Running.\\n<tool_call>\\n{\\\"name\\\": \\\"execute_bash\\\", "
                "\\\"arguments\\\": {\\\"command\\\": \\\"echo hermes-ok\\\"}}\\n</tool_call>\"},"
                "{\"content\":\"<tool_call>\\n<function=execute_bash>\\n<parameter=command>\\n"
                "echo qwen-ok\\n</parameter>\\n</function>\\n</tool_call>\"},"
                "{\"content\":\"<tool_call>{\\\"name\\\":\\\"submit\\\",\\\"arguments\\\":{}}"
                "</tool_call>\"}]}");
    world_run(&w);
    cr_assert_eq(w.out.stop, AGENT_STOP_SUBMIT, "%s", agent_stop_name(w.out.stop));
    cr_assert_str_eq(obs(&w, 0), "Exit code: 0\nExecution output of \\[execute_bash]:\n"
                                 "\\[STDOUT]\nhermes-ok\n");
    cr_assert_str_eq(obs(&w, 1), "Exit code: 0\nExecution output of \\[execute_bash]:\n"
                                 "\\[STDOUT]\nqwen-ok\n");
    cJSON *hold;
    cJSON *m = req_messages(&w, 1, &hold);
    cJSON *asst = cJSON_GetArrayItem(m, cJSON_GetArraySize(m) - 2);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(asst, "content")), "Running.");
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(asst, "tool_calls")), 1);
    cr_assert_str_eq(field(m, -1, "role"), "tool");
    cJSON_Delete(hold);
    world_stop(&w);
}

Test(agent_loop, parallel_calls_run_the_first_and_answer_all)
{
    world w;
    world_start(&w, t_busybox(),
                "{\"replies\":["
                "{\"calls\":[[\"execute_bash\",{\"command\":\"echo one > /testbed/mark\"}],"
                "[\"execute_bash\",{\"command\":\"echo two > /testbed/mark2\"}]]}]}");
    world_run(&w);
    cJSON *hold;
    cJSON *m = req_messages(&w, 1, &hold);
    int n = cJSON_GetArraySize(m);
    cr_assert_str_eq(field(m, n - 2, "role"), "tool");
    cr_assert_str_eq(field(m, n - 2, "tool_call_id"), "call_0_0");
    cr_assert_str_eq(field(m, n - 1, "tool_call_id"), "call_0_1");
    cr_assert(strstr(field(m, n - 1, "content"), "only the first tool call"));
    cJSON_Delete(hold);
    char kind;
    lis_error err;
    cr_assert_eq(lis_file_stat(w.sb, "/testbed/mark", &kind, NULL, &err), 0);
    cr_assert_eq(lis_file_stat(w.sb, "/testbed/mark2", &kind, NULL, &err), -1);
    world_stop(&w);
}

Test(agent_loop, token_ceiling_and_max_steps)
{
    world w;
    world_start(&w, t_busybox(),
                "{\"replies\":[{\"calls\":[[\"execute_bash\",{\"command\":"
                "\"true\"}]],\"usage\":[70000,10]}]}");
    world_run(&w);
    cr_assert_eq(w.out.stop, AGENT_STOP_TOKEN_LIMIT, "%s", agent_stop_name(w.out.stop));
    cr_assert_eq(w.out.steps, 1);
    cr_assert(strstr(w.out.error, "> 65536"));
    cr_assert_eq(t_fake_count(&w.f), 1);
    world_stop(&w);

    world_start(&w, t_busybox(),
                "{\"replies\":["
                "{\"calls\":[[\"execute_bash\",{\"command\":\"true\"}]]},"
                "{\"calls\":[[\"execute_bash\",{\"command\":\"true\"}]]},"
                "{\"calls\":[[\"execute_bash\",{\"command\":\"true\"}]]}]}");
    w.o.max_steps = 3;
    world_run(&w);
    cr_assert_eq(w.out.stop, AGENT_STOP_MAX_STEPS, "%s", agent_stop_name(w.out.stop));
    cr_assert_eq(w.out.steps, 3);
    cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(w.traj, "metadata"), "total_steps")
                     ->valueint,
                 3);
    cJSON *hold;
    cJSON *m = req_messages(&w, 2, &hold);
    cr_assert(strstr(field(m, -1, "content"), "\nSteps Remaining: 1"));
    cr_assert(strstr(field(m, 1, "content"), "\nSteps Remaining: 3"));
    cJSON_Delete(hold);
    world_stop(&w);
}

Test(agent_loop, llm_failure_ends_the_episode)
{
    world w;
    world_start(&w, t_busybox(),
                "{\"replies\":[{\"calls\":[[\"execute_bash\",{\"command\":"
                "\"true\"}]]},{\"status\":401,\"body\":{\"error\":{\"message\":\"revoked\"}}}]}");
    world_run(&w);
    cr_assert_eq(w.out.stop, AGENT_STOP_LLM_ERROR, "%s", agent_stop_name(w.out.stop));
    cr_assert_eq(w.out.steps, 1);
    cr_assert(strstr(w.out.error, "revoked"));
    world_stop(&w);
}

/* ---- the hooked loop (rl/'s driver): stop_fd, llm, on_turn, branches --- */

typedef struct hooked {
    int efd, upfd;
    pthread_t th;
    llm_client *llm;
    int turns;
    cJSON *msgs[16];   /* on_turn's history after each turn */
    cJSON *tokens[16]; /* the llm hook's token ids of each turn */
    int calls;
} hooked;

static agent_stop stop_reason(void *arg, char *why, size_t len)
{
    snprintf(why, len, "deadline of the test");
    return AGENT_STOP_DEADLINE;
}

static void on_turn(void *arg, const cJSON *step, const cJSON *messages)
{
    hooked *k = arg;
    cr_assert(step);
    if (k->turns < 16)
        k->msgs[k->turns] = cJSON_Duplicate(messages, 1);
    k->turns++;
}

static int hook_llm(void *arg, const cJSON *messages, const cJSON *tools, llm_reply *r,
                    lis_error *err)
{
    hooked *k = arg;
    int rc = llm_chat(k->llm, messages, tools, r, err);
    if (rc == 0 && k->calls < 16) { /* kept: taken from the reply */
        k->tokens[k->calls] = r->tokens;
        r->tokens = NULL;
    }
    k->calls++;
    return rc;
}

static void hooked_free(hooked *k)
{
    for (int i = 0; i < 16; i++) {
        cJSON_Delete(k->msgs[i]);
        cJSON_Delete(k->tokens[i]);
    }
    llm_free(k->llm);
    memset(k, 0, sizeof *k);
}

/* Writes the eventfd once the command has made /testbed/started (seen in
 * the sandbox's upper layer from the host): a stop while it runs. */
static void *stop_when_started(void *arg)
{
    hooked *k = arg;
    for (int i = 0; i < 6000; i++) {
        if (faccessat(k->upfd, "testbed/started", F_OK, 0) == 0)
            break;
        agent_sleep(0.01);
    }
    uint64_t one = 1;
    cr_assert_eq(write(k->efd, &one, sizeof one), (ssize_t)sizeof one);
    return NULL;
}

Test(agent_loop, stop_fd_kills_the_running_command_and_keeps_its_step, .timeout = 120)
{
    world w;
    world_start(&w, t_busybox(),
                "{\"replies\":[{\"calls\":[[\"execute_bash\",{\"command\":\"echo partial-output; "
                "touch /testbed/started; sleep 100\"}]]},{\"calls\":[[\"submit\",{}]]}]}");
    hooked k = {0};
    k.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    cr_assert_geq(k.efd, 0);
    lis_error err = {0};
    k.upfd = lis_sandbox_upper_fd(w.sb, &err);
    cr_assert_geq(k.upfd, 0, "%s", err.msg);
    cr_assert_eq(pthread_create(&k.th, NULL, stop_when_started, &k), 0);
    agent_loop_hooks h = {.arg = &k,
                          .stop_fd = k.efd,
                          .stop_reason = stop_reason,
                          .on_turn = on_turn};
    double t0 = lis_now();
    w.traj = agent_loop_hooked(&w.env, NULL, &w.o, &h, &w.out);
    printf("stop_fd: the episode ended %.2f s after its start\n", lis_now() - t0);
    pthread_join(k.th, NULL);
    cr_assert_eq(w.out.stop, AGENT_STOP_DEADLINE, "%s", agent_stop_name(w.out.stop));
    cr_assert_str_eq(w.out.error, "deadline of the test");
    cr_assert_eq(w.out.steps, 1);
    cr_assert(strstr(obs(&w, 0), "partial-output"), "%s", obs(&w, 0));
    cr_assert(strstr(obs(&w, 0), "Exit code 137"), "%s", obs(&w, 0));
    cr_assert_eq(k.turns, 1);
    cr_assert_eq(t_fake_count(&w.f), 1); /* no model call after the stop */
    cJSON *md = cJSON_GetObjectItem(w.traj, "metadata");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(md, "stop_reason")), "deadline");
    /* the hooked loop's trajectory has the history (lis run's has not: below) */
    cJSON *msgs = cJSON_GetObjectItem(w.traj, "messages");
    cr_assert_eq(cJSON_GetArraySize(msgs), 4);
    cr_assert_str_eq(field(msgs, -1, "role"), "tool");
    lis_result r;
    t_sh(w.sb, "ps", &r); /* the command's processes are gone */
    cr_assert_null(strstr(r.out.data, "sleep"), "%s", r.out.data);
    lis_result_free(&r);

    /* a stop already there: no model call at all */
    agent_outcome out;
    cJSON *traj = agent_loop_hooked(&w.env, NULL, &w.o, &h, &out);
    cr_assert_eq(out.stop, AGENT_STOP_DEADLINE);
    cr_assert_eq(out.steps, 0);
    cr_assert_eq(t_fake_count(&w.f), 1);
    cJSON_Delete(traj);
    close(k.upfd);
    close(k.efd);
    hooked_free(&k);
    world_stop(&w);

    world_start(&w, t_busybox(), "{\"replies\":[{\"calls\":[[\"submit\",{}]]}]}");
    world_run(&w);
    cr_assert_null(cJSON_GetObjectItem(w.traj, "messages"));
    world_stop(&w);
}

/* ids: a's list starts with b's then c's (c may be NULL) */
static int starts_with(const cJSON *a, const cJSON *b, const cJSON *c)
{
    int na = cJSON_GetArraySize(a), nb = cJSON_GetArraySize(b), nc = c ? cJSON_GetArraySize(c) : 0;
    if (na < nb + nc || !nb)
        return 0;
    for (int i = 0; i < nb + nc; i++) {
        const cJSON *x = cJSON_GetArrayItem(a, i);
        const cJSON *y = i < nb ? cJSON_GetArrayItem(b, i) : cJSON_GetArrayItem(c, i - nb);
        if (!cJSON_IsNumber(x) || !cJSON_IsNumber(y) || x->valuedouble != y->valuedouble)
            return 0;
    }
    return 1;
}

static char *printed_item(const cJSON *arr, int i)
{
    return cJSON_PrintUnformatted(cJSON_GetArrayItem(arr, i));
}

/* A parent run through the fake endpoint in token mode, then a branch at
 * step 2 from what on_turn gave after turn 1: the branch's turns 0-1 are the
 * parent's byte for byte, its first model call sends the very messages the
 * parent's turn 2 sent, and its prompt ids continue the parent's. */
Test(agent_loop, a_branch_keeps_the_parents_turns_byte_for_byte, .timeout = 120)
{
    world w;
    world_start(&w, t_busybox(),
                "{\"replies\":["
                "{\"reasoning\":\"first think\",\"calls\":[[\"execute_bash\",{\"command\":"
                "\"echo one > /testbed/f0; echo one\"}]],\"usage\":[100,10]},"
                "{\"content\":\"second\",\"calls\":[[\"execute_bash\",{\"command\":\"echo "
                "two\"}]],\"usage\":[200,20]},"
                "{\"drift\":true,\"calls\":[[\"execute_bash\",{\"command\":\"echo three\"}]],"
                "\"usage\":[300,30]},"
                "{\"calls\":[[\"submit\",{}]],\"usage\":[400,40]},"
                "{\"calls\":[[\"execute_bash\",{\"command\":\"echo branch\"}]],"
                "\"usage\":[1000,1]},"
                "{\"calls\":[[\"submit\",{}]],\"usage\":[2000,2]}]}");
    cJSON *extra = cJSON_Parse("{\"return_token_ids\":true,\"logprobs\":true,\"seed\":7}");
    w.o.llm.extra_body = extra;
    lis_error err = {0};
    hooked k = {0};
    k.llm = llm_new(&w.o.llm, &err);
    cr_assert(k.llm, "%s", err.msg);
    agent_loop_hooks h = {.arg = &k, .stop_fd = -1, .llm = hook_llm, .on_turn = on_turn};
    w.traj = agent_loop_hooked(&w.env, NULL, &w.o, &h, &w.out);
    cr_assert_eq(w.out.stop, AGENT_STOP_SUBMIT, "%s %s", agent_stop_name(w.out.stop), w.out.error);
    cr_assert_eq(w.out.steps, 4);
    cr_assert_eq(k.turns, 4);
    cr_assert_eq(k.calls, 4);
    /* token mode: turn 1's prompt ids continue turn 0's prompt + completion;
     * turn 2's drifted prompt does not continue turn 1's */
    for (int t = 0; t < 4; t++) {
        cr_assert(k.tokens[t], "turn %d has no token ids", t);
        int n = cJSON_GetArraySize(cJSON_GetObjectItem(k.tokens[t], "ids"));
        cr_assert_gt(n, 0);
        cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(k.tokens[t], "logprobs")), n);
    }
    cr_assert(starts_with(cJSON_GetObjectItem(k.tokens[1], "prompt_ids"),
                          cJSON_GetObjectItem(k.tokens[0], "prompt_ids"),
                          cJSON_GetObjectItem(k.tokens[0], "ids")));
    cr_assert(!starts_with(cJSON_GetObjectItem(k.tokens[2], "prompt_ids"),
                           cJSON_GetObjectItem(k.tokens[1], "prompt_ids"),
                           cJSON_GetObjectItem(k.tokens[1], "ids")));
    cJSON *hold;
    req_messages(&w, 0, &hold);
    cr_assert_eq(cJSON_GetObjectItem(hold, "seed")->valueint, 7);
    cJSON_Delete(hold);
    /* on_turn's history ends with the turn's observation, no "Steps Remaining" yet */
    const char *last = field(k.msgs[1], -1, "content");
    cr_assert(strstr(last, "two") && !strstr(last, "Steps Remaining"), "%s", last);

    const cJSON *psteps = cJSON_GetObjectItem(w.traj, "steps");
    cr_assert_null(agent_ep_new_branch(&w.o, k.msgs[1], psteps, 5, &err));
    cr_assert(strstr(err.msg, "needs 5 turns"), "%s", err.msg);
    cr_assert_null(agent_ep_new_branch(&w.o, k.msgs[1], psteps, -1, &err));
    cr_assert_null(agent_ep_new_branch(&w.o, psteps, psteps, 2, &err));

    hooked b = {0};
    b.llm = llm_new(&w.o.llm, &err);
    agent_loop_hooks hb = {.arg = &b, .stop_fd = -1, .llm = hook_llm, .on_turn = on_turn};
    agent_ep *ep = agent_ep_new_branch(&w.o, k.msgs[1], psteps, 2, &err);
    cr_assert(ep, "%s", err.msg);
    agent_outcome bout;
    cJSON *btraj = agent_loop_hooked(&w.env, ep, &w.o, &hb, &bout);
    cr_assert_eq(bout.stop, AGENT_STOP_SUBMIT, "%s %s", agent_stop_name(bout.stop), bout.error);
    cr_assert_eq(bout.steps, 4);
    const cJSON *bsteps = cJSON_GetObjectItem(btraj, "steps");
    cr_assert_eq(cJSON_GetArraySize(bsteps), 4);
    for (int i = 0; i < 2; i++) {
        char *a = printed_item(psteps, i), *c = printed_item(bsteps, i);
        cr_assert_str_eq(c, a, "step %d differs", i);
        free(a);
        free(c);
    }
    cJSON *s2 = cJSON_GetArrayItem(bsteps, 2);
    cr_assert(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(s2, "observation")), "branch"));
    cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(s2, "metadata"), "step")->valueint, 3);
    cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(btraj, "metadata"), "total_steps")
                     ->valueint,
                 4);
    /* the outcome counts the parent's two turns and the branch's two */
    cr_assert_eq(bout.prompt_tokens, 100 + 200 + 1000 + 2000);
    cr_assert_eq(bout.completion_tokens, 10 + 20 + 1 + 2);
    /* the branch's first call sent exactly what the parent's turn 2 sent */
    cJSON *ph, *bh;
    cJSON *pm = req_messages(&w, 2, &ph), *bm = req_messages(&w, 4, &bh);
    char *pa = cJSON_PrintUnformatted(pm), *ba = cJSON_PrintUnformatted(bm);
    cr_assert_str_eq(ba, pa);
    cr_assert(strstr(field(bm, -1, "content"), "\nSteps Remaining: 8"));
    free(pa);
    free(ba);
    cJSON_Delete(ph);
    cJSON_Delete(bh);
    /* and its prompt ids continue the parent's turn 1 */
    cr_assert(starts_with(cJSON_GetObjectItem(b.tokens[0], "prompt_ids"),
                          cJSON_GetObjectItem(k.tokens[1], "prompt_ids"),
                          cJSON_GetObjectItem(k.tokens[1], "ids")));
    /* the branch's history starts with the parent's after turn 1 */
    const cJSON *bmsgs = cJSON_GetObjectItem(btraj, "messages");
    int n = cJSON_GetArraySize(k.msgs[1]);
    for (int i = 0; i < n - 1; i++) {
        char *a = printed_item(k.msgs[1], i), *c = printed_item(bmsgs, i);
        cr_assert_str_eq(c, a, "message %d differs", i);
        free(a);
        free(c);
    }
    /* the token estimate continues the parent's: the server's count after
     * turn 1 (220) plus what came after it, not the whole history by chars
     * (over 300 tokens for the prompts alone: a fresh episode stops) */
    agent_opts o2 = w.o;
    o2.max_token_limit = 300;
    agent_ep *fresh = agent_ep_new(&o2);
    cr_assert_eq(agent_ep_next(fresh), AGENT_EP_DONE);
    agent_outcome fout;
    cJSON_Delete(agent_ep_finish(fresh, &fout));
    cr_assert_eq(fout.stop, AGENT_STOP_TOKEN_LIMIT);
    ep = agent_ep_new_branch(&o2, k.msgs[1], psteps, 2, &err);
    cr_assert(ep, "%s", err.msg);
    cr_assert_eq(agent_ep_next(ep), AGENT_EP_LLM);
    cJSON_Delete(agent_ep_finish(ep, &fout));
    cJSON_Delete(btraj);
    hooked_free(&b);
    hooked_free(&k);
    cJSON_Delete(extra);
    world_stop(&w);
}

static void tool(world *w, const char *name, const char *json, agent_tool_out *o)
{
    cJSON *p = cJSON_Parse(json);
    cr_assert(p);
    agent_tool_exec(&w->env, name, p, o);
    cJSON_Delete(p);
}

Test(agent_tools, output_floods_are_capped)
{
    world w;
    world_start(&w, t_busybox(), "{\"replies\":[]}");
    agent_tool_out o;
    long rss0 = t_rss_kib();
    /* one 50 MB line */
    tool(&w, "execute_bash",
         "{\"command\":\"yes 0123456789 | tr -d '\\\\n' | head -c 50000000; "
         "echo; echo done >&2\"}",
         &o);
    cr_assert_lt(strlen(o.obs), 2 * AGENT_OBS_CAP, "observation of %zu bytes", strlen(o.obs));
    cr_assert(strstr(o.obs, "bytes omitted>"), "%.300s", o.obs);
    cr_assert(strstr(o.obs, "\\[STDERR]\ndone\n"));
    cr_assert_lt(t_rss_kib() - rss0, 40 * 1024, "owner memory grew too much");
    free(o.obs);
    /* many lines: the 40+40 cut */
    tool(&w, "execute_bash", "{\"command\":\"seq 1 100000\"}", &o);
    cr_assert(strstr(o.obs, "\\[STDOUT]\n1\n2\n"));
    cr_assert(strstr(o.obs, "\n40\n--------------------------------------------------\n"
                            "<Observation truncated in middle for saving context>\n"));
    cr_assert(strstr(o.obs, "\n99961\n"));
    cr_assert_str_eq(o.obs + strlen(o.obs) - 7, "\n100000");
    free(o.obs);
    /* exit codes and the timeout */
    tool(&w, "execute_bash", "{\"command\":\"echo err >&2; exit 3\"}", &o);
    cr_assert_str_eq(o.obs, "Exit code: Error: Exit code 3\nExecution output of "
                            "\\[execute_bash]:\n\\[STDOUT]\n\n\\[STDERR]\nerr\n");
    free(o.obs);
    agent_tool_env fast = w.env;
    fast.timeout = 1;
    cJSON *p = cJSON_Parse("{\"command\":\"sleep 5\"}");
    agent_tool_exec(&fast, "execute_bash", p, &o);
    cJSON_Delete(p);
    cr_assert_str_eq(o.obs, "Exit code: -1\nExecution output of \\[execute_bash]:\n\\[STDOUT]\n"
                            "The command took too long to execute (>1s)");
    free(o.obs);
    /* a fresh shell per call, in /testbed */
    tool(&w, "execute_bash", "{\"command\":\"cd /tmp; export X=1; pwd\"}", &o);
    free(o.obs);
    tool(&w, "execute_bash", "{\"command\":\"pwd; echo X=$X\"}", &o);
    cr_assert(strstr(o.obs, "\\[STDOUT]\n/testbed\nX=\n"), "%s", o.obs);
    free(o.obs);
    world_stop(&w);
}

Test(agent_tools, editor_in_the_sandbox)
{
    world w;
    world_start(&w, t_busybox(), "{\"replies\":[]}");
    agent_tool_out o;
    lis_result r;
    t_sh(w.sb,
         "printf 'a\\r\\nb\\r\\n' > /testbed/crlf.txt; printf '\\000\\001\\002' > "
         "/testbed/bin.dat; ln -s /etc/passwd /testbed/pw; mkdir -p /testbed/d; "
         "ln -s /testbed/d /testbed/dl",
         &r);
    lis_result_free(&r);
    tool(&w, "str_replace_editor",
         "{\"command\":\"str_replace\",\"path\":\"/testbed/crlf.txt\","
         "\"old_str\":\"b\",\"new_str\":\"c\\td\"}",
         &o);
    cr_assert(strstr(o.obs, "Execution output of \\[str_replace_editor]:\nThe file "
                            "/testbed/crlf.txt has been edited."),
              "%s", o.obs);
    free(o.obs);
    char *data;
    size_t len;
    lis_error err;
    cr_assert_eq(lis_file_read(w.sb, "/testbed/crlf.txt", 1000, &data, &len, &err), 0);
    cr_assert_eq(len, 8);
    cr_assert(!memcmp(data, "a\r\nc\td\r\n", 8));
    free(data);
    tool(&w, "str_replace_editor", "{\"command\":\"view\",\"path\":\"/testbed/bin.dat\"}", &o);
    cr_assert(strstr(o.obs, "is a binary file"), "%s", o.obs);
    free(o.obs);
    tool(&w, "str_replace_editor", "{\"command\":\"view\",\"path\":\"/testbed/pw\"}", &o);
    cr_assert(strstr(o.obs, "outside /testbed; refusing"), "%s", o.obs);
    free(o.obs);
    tool(&w, "str_replace_editor",
         "{\"command\":\"create\",\"path\":\"/testbed/pw\","
         "\"file_text\":\"pwned\"}",
         &o);
    cr_assert(strstr(o.obs, "refusing"), "%s", o.obs);
    free(o.obs);
    t_sh(w.sb, "head -c 5 /etc/passwd", &r);
    cr_assert_str_eq(r.out.data, "root:");
    lis_result_free(&r);
    /* through a symlinked dir inside /testbed */
    tool(&w, "str_replace_editor",
         "{\"command\":\"create\",\"path\":\"/testbed/dl/x.txt\","
         "\"file_text\":\"inside\"}",
         &o);
    cr_assert(strstr(o.obs, "File created at /testbed/dl/x.txt."), "%s", o.obs);
    free(o.obs);
    cr_assert_eq(lis_file_read(w.sb, "/testbed/d/x.txt", 100, &data, &len, &err), 0);
    free(data);
    /* a 1 MB file through create, then an edit at its end */
    strbuf big = {0};
    strbuf_puts(&big, "{\"command\":\"create\",\"path\":\"/testbed/big.txt\",\"file_text\":\"");
    for (int i = 0; i < 16384; i++)
        strbuf_printf(&big, "line %07d ......................................................\\n",
                      i);
    strbuf_puts(&big, "THE END\"}");
    char *json = strbuf_take(&big);
    tool(&w, "str_replace_editor", json, &o);
    free(json);
    cr_assert(strstr(o.obs, "<response clipped>"));
    free(o.obs);
    tool(&w, "str_replace_editor",
         "{\"command\":\"str_replace\",\"path\":\"/testbed/big.txt\","
         "\"old_str\":\"THE END\",\"new_str\":\"the end\"}",
         &o);
    cr_assert(strstr(o.obs, "16385\tthe end"), "%s", o.obs);
    free(o.obs);
    t_sh(w.sb, "wc -c < /testbed/big.txt; tail -c 7 /testbed/big.txt", &r);
    cr_assert(strstr(r.out.data, "the end"), "%s", r.out.data);
    cr_assert_eq(atol(r.out.data), 16384L * 68 + 7);
    lis_result_free(&r);
    tool(&w, "str_replace_editor", "{\"command\":\"view\",\"path\":\"/testbed\"}", &o);
    cr_assert(strstr(o.obs, "/testbed/big.txt\n"), "%s", o.obs);
    free(o.obs);
    world_stop(&w);
}

Test(agent_tools, input_dir_lands_in_an_existing_dir)
{
    world w;
    world_start(&w, t_busybox(), "{\"replies\":[]}");
    char in[600];
    snprintf(in, sizeof in, "%s/inputs", t_tmpdir());
    int code;
    free(t_host(&code, "mkdir -p %s/sub && echo one > %s/a.txt && echo two > %s/sub/b.txt", in, in,
                in));
    cr_assert_eq(code, 0);
    lis_error err = {0};
    /* /testbed/input exists (agent_prepare_sandbox made it) */
    cr_assert_eq(agent_copy_input(w.sb, in, "/testbed/input", &err), 0, "%s", err.msg);
    lis_result r;
    t_sh(w.sb, "cat /testbed/input/a.txt /testbed/input/sub/b.txt; ls -a /testbed", &r);
    cr_assert_str_eq(r.out.data, "one\ntwo\n.\n..\ninput\noutput\n");
    lis_result_free(&r);
    world_stop(&w);
}

/* ---- whole episodes ---------------------------------------------------- */

static char *slurp(const char *path)
{
    lis_error err;
    return agent_read_host_file(path, NULL, &err);
}

Test(agent_episode, editor_python_answer_submit, .timeout = 120)
{
    const char *deb = t_debian();
    t_fake f;
    t_fake_start(&f,
                 "{\"replies\":["
                 "{\"content\":\"I'll write code.\",\"calls\":[[\"str_replace_editor\",{\"command\":"
                 "\"create\",\"path\":\"/testbed/solve.py\",\"file_text\":\"data = open("
                 "'/testbed/input/n.txt').read().split()\\nprint(sum(int(x) for x in data))\\n\"}]]},"
                 "{\"calls\":[[\"execute_bash\",{\"command\":\"python3 solve.py\"}]]},"
                 "{\"calls\":[[\"execute_bash\",{\"command\":\"python3 solve.py > "
                 "/testbed/output/answer.txt\"}]]},"
                 "{\"calls\":[[\"submit\",{}]]}]}");
    lis_ctx *ctx = t_ctx();
    char in[512], outdir[512], cmd[1200];
    snprintf(in, sizeof in, "%s/in", t_tmpdir());
    snprintf(outdir, sizeof outdir, "%s/out", t_tmpdir());
    snprintf(cmd, sizeof cmd, "mkdir -p %s && printf '1 2 3 36\\n' > %s/n.txt", in, in);
    int code;
    free(t_host(&code, "%s", cmd));
    cr_assert_eq(code, 0);
    agent_prompts p;
    agent_prompts_default(&p);
    char ansfile[600];
    snprintf(ansfile, sizeof ansfile, "%s/printed", t_tmpdir());
    FILE *ans = fopen(ansfile, "w+");
    agent_run r = {.opts = {.query = "Sum the numbers in the input file.",
                            .prompts = &p,
                            .max_steps = 10,
                            .max_token_limit = 65536,
                            .llm = cfg_for(&f),
                            .llm_name = "fake-model",
                            .progress = stderr},
                   .rootfs = deb,
                   .input_dir = in,
                   .output_dir = outdir,
                   .out = ans};
    agent_outcome res;
    char run_dir[1024];
    lis_error err = {0};
    cr_assert_eq(agent_episode(ctx, &r, &res, run_dir, sizeof run_dir, &err), 0, "%s", err.msg);
    cr_assert_eq(res.stop, AGENT_STOP_SUBMIT, "%s", agent_stop_name(res.stop));
    cr_assert_eq(res.steps, 4);
    rewind(ans);
    char line[64] = "";
    cr_assert(fgets(line, sizeof line, ans));
    cr_assert_str_eq(line, "42\n");
    fclose(ans);
    char path[1200];
    snprintf(path, sizeof path, "%s/files/answer.txt", run_dir);
    char *a = slurp(path);
    cr_assert(a, "no %s", path);
    cr_assert_str_eq(a, "42\n");
    free(a);
    snprintf(path, sizeof path, "%s/trajectory.json", run_dir);
    char *t = slurp(path);
    cr_assert(t);
    cJSON *traj = cJSON_Parse(t);
    free(t);
    cr_assert(traj);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(traj, "problem_statement")),
                     "Sum the numbers in the input file.");
    cJSON *steps = cJSON_GetObjectItem(traj, "steps");
    cr_assert_eq(cJSON_GetArraySize(steps), 4);
    cJSON *s0 = cJSON_GetArrayItem(steps, 0), *s1 = cJSON_GetArrayItem(steps, 1);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(s0, "thought")), "I'll write code.");
    cr_assert_str_eq(cJSON_GetStringValue(
                         cJSON_GetObjectItem(cJSON_GetObjectItem(s0, "action"), "function")),
                     "str_replace_editor");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(s1, "observation")),
                     "Exit code: 0\nExecution output of \\[execute_bash]:\n\\[STDOUT]\n42\n");
    cJSON *md = cJSON_GetObjectItem(s1, "metadata");
    cr_assert_eq(cJSON_GetObjectItem(md, "step")->valueint, 2);
    cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(md, "exec_time")));
    cr_assert_gt(cJSON_GetObjectItem(md, "tool_exec_time")->valuedouble, 0);
    cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(md, "usage"), "prompt_tokens")->valueint,
                 100);
    cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(traj, "metadata"), "total_steps")->valueint,
                 4);
    cJSON_Delete(traj);
    agent_prompts_free(&p);
    lis_ctx_free(ctx);
    t_fake_stop(&f);
}

/* What the model leaves in /testbed/output that points at the host is not
 * exported (PEP 706's "data" filter); each is in the log and the trajectory. */
Test(agent_episode, export_leaves_out_links_out_fifos_and_sockets, .timeout = 120)
{
    const char *deb = t_debian();
    t_fake f;
    t_fake_start(&f,
                 "{\"replies\":["
                 "{\"calls\":[[\"execute_bash\",{\"command\":\"cd /testbed/output && "
                 "echo 42 > answer.txt && mkdir sub && echo s > sub/f && "
                 "ln -s /etc/shadow leak && ln -s ../../../etc/passwd up && mkfifo pipe && "
                 "ln -s answer.txt good && ln -s ../answer.txt sub/back && "
                 "python3 -c \\\"import socket; socket.socket(socket.AF_UNIX).bind('sock')\\\" && "
                 "ls -l\"}]]},"
                 "{\"calls\":[[\"submit\",{}]]}]}");
    lis_ctx *ctx = t_ctx();
    char outdir[512], logfile[600];
    snprintf(outdir, sizeof outdir, "%s/out", t_tmpdir());
    snprintf(logfile, sizeof logfile, "%s/progress", t_tmpdir());
    FILE *log = fopen(logfile, "w+");
    cr_assert(log);
    agent_prompts p;
    agent_prompts_default(&p);
    agent_run r = {.opts = {.query = "Leave some links.",
                            .prompts = &p,
                            .max_steps = 5,
                            .max_token_limit = 65536,
                            .llm = cfg_for(&f),
                            .llm_name = "fake-model",
                            .progress = log},
                   .rootfs = deb,
                   .output_dir = outdir};
    agent_outcome res;
    char run_dir[1024];
    lis_error err = {0};
    cr_assert_eq(agent_episode(ctx, &r, &res, run_dir, sizeof run_dir, &err), 0, "%s", err.msg);
    cr_assert_eq(res.stop, AGENT_STOP_SUBMIT, "%s: %s", agent_stop_name(res.stop), res.error);

    char path[1200], t[64];
    struct stat st;
    snprintf(path, sizeof path, "%s/files/answer.txt", run_dir);
    cr_assert_eq(stat(path, &st), 0);
    snprintf(path, sizeof path, "%s/files/good", run_dir);
    ssize_t n = readlink(path, t, sizeof t - 1);
    cr_assert_eq(n, 10, "the good relative link was not kept");
    snprintf(path, sizeof path, "%s/files/sub/back", run_dir);
    cr_assert_eq(lstat(path, &st), 0, "sub/back (../answer.txt, inside) was not kept");
    cr_assert(S_ISLNK(st.st_mode));
    const char *gone[] = {"leak", "up", "pipe", "sock"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/files/%s", run_dir, gone[i]);
        cr_assert_neq(lstat(path, &st), 0, "%s was exported", gone[i]);
    }

    /* the run log names each one */
    fflush(log);
    char *text = slurp(logfile);
    cr_assert(text);
    cr_assert(strstr(text, "lis: warning: not exported: /testbed/output/leak: absolute symlink "
                           "to /etc/shadow\n"),
              "%s", text);
    cr_assert(strstr(text, "not exported: /testbed/output/up: symlink to ../../../etc/passwd "
                           "leads outside the exported tree\n"),
              "%s", text);
    cr_assert(strstr(text, "not exported: /testbed/output/pipe: a fifo\n"), "%s", text);
    cr_assert(strstr(text, "not exported: /testbed/output/sock: a socket\n"), "%s", text);
    free(text);
    fclose(log);

    /* and trajectory.json lists exactly them */
    snprintf(path, sizeof path, "%s/trajectory.json", run_dir);
    text = slurp(path);
    cr_assert(text);
    cJSON *traj = cJSON_Parse(text);
    free(text);
    cJSON *sk = cJSON_GetObjectItem(cJSON_GetObjectItem(traj, "metadata"), "export_skipped");
    cr_assert(cJSON_IsArray(sk), "no metadata.export_skipped");
    cr_assert_eq(cJSON_GetArraySize(sk), 4);
    int seen = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, sk)
    {
        const char *ep = cJSON_GetStringValue(cJSON_GetObjectItem(e, "path"));
        cr_assert(ep && cJSON_GetStringValue(cJSON_GetObjectItem(e, "reason")));
        for (int i = 0; i < 4; i++) {
            char want[64];
            snprintf(want, sizeof want, "/testbed/output/%s", gone[i]);
            if (!strcmp(ep, want))
                seen |= 1 << i;
        }
    }
    cr_assert_eq(seen, 15, "trajectory lists the wrong entries");
    cJSON_Delete(traj);
    agent_prompts_free(&p);
    lis_ctx_free(ctx);
    t_fake_stop(&f);
}

/* A recorded trajectory of the original (tests/agent-data/replay.json):
 * the same calls replayed through lis give the same observations, except
 * where docs/agent.md documents a fix (then "lis_observation" is expected). */
Test(agent_episode, recorded_trajectory_replays, .timeout = 120)
{
    const char *deb = t_debian();
    char path[512];
    snprintf(path, sizeof path, "%s/agent-data/replay.json", t_src_dir());
    char *text = slurp(path);
    cr_assert(text, "no %s", path);
    cJSON *rec = cJSON_Parse(text);
    free(text);
    cr_assert(rec);
    cJSON *steps = cJSON_GetObjectItem(rec, "steps"), *s;
    /* the script: the recorded calls, in order */
    cJSON *script = cJSON_CreateObject(), *replies = cJSON_AddArrayToObject(script, "replies");
    cJSON_ArrayForEach(s, steps)
    {
        cJSON *e = cJSON_CreateObject();
        cJSON *act = cJSON_GetObjectItem(s, "action");
        cJSON_AddItemToObject(e, "content", cJSON_Duplicate(cJSON_GetObjectItem(s, "thought"), 1));
        cJSON *calls = cJSON_AddArrayToObject(e, "calls"), *c = cJSON_CreateArray();
        cJSON_AddItemToArray(c, cJSON_Duplicate(cJSON_GetObjectItem(act, "function"), 1));
        cJSON_AddItemToArray(c, cJSON_Duplicate(cJSON_GetObjectItem(act, "parameters"), 1));
        cJSON_AddItemToArray(calls, c);
        cJSON_AddItemToArray(replies, e);
    }
    char *sj = cJSON_PrintUnformatted(script);
    cJSON_Delete(script);
    world w;
    world_start(&w, deb, sj);
    free(sj);
    w.o.query = cJSON_GetStringValue(cJSON_GetObjectItem(rec, "problem_statement"));
    w.o.max_steps = 100;
    world_run(&w);
    int n = cJSON_GetArraySize(steps);
    cr_assert_eq(w.out.steps, n);
    for (int i = 0; i < n; i++) {
        cJSON *st = cJSON_GetArrayItem(steps, i);
        const char *want = cJSON_GetStringValue(cJSON_GetObjectItem(st, "lis_observation"));
        if (!want)
            want = cJSON_GetStringValue(cJSON_GetObjectItem(st, "observation"));
        cr_expect_str_eq(obs(&w, i), want, "step %d differs", i + 1);
    }
    /* the first request carries the original's prompts */
    cJSON *hold;
    cJSON *m = req_messages(&w, 0, &hold);
    cr_assert_str_eq(field(m, 1, "content"),
                     cJSON_GetStringValue(cJSON_GetObjectItem(rec, "first_user_message")));
    cJSON_Delete(hold);
    cJSON_Delete(rec);
    world_stop(&w);
}
