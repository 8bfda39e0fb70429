/* agent_internal.h - agent/'s own interface between its files (not for the areas
 * above, which use agent.h): the tools' schemas and observation texts, the
 * editor, tool calls written as text, the SSE parser, the LLM client's
 * request and response helpers, the blocking loop of `lis run`. The tests and
 * fuzz targets include it too. */
#ifndef LIS_AGENT_INTERNAL_H
#define LIS_AGENT_INTERNAL_H

#include "agent.h"

/* ---- small helpers (util.c) -------------------------------------------- */

void agent_sleep(double seconds);
/* Sets each member of extra on body (replacing one of the same name): the
 * request body's --extra-body. */
void agent_json_merge(cJSON *body, const cJSON *extra);

/* ---- tools (tools.c): schemas, observation text ------------------------ */

/* The message sent as a user turn when a reply holds no usable tool call. */
extern const char AGENT_CONTINUE_MSG[];
#define AGENT_TRUNC_LINES 40
#define AGENT_OBS_CAP 32768          /* bytes per stream in a bash observation */
#define AGENT_CAPTURE_CAP (1u << 20) /* bytes per stream kept by the runtime */

/* The three tools. original: tools.py's schemas, in its order, byte for byte. */
cJSON *agent_tool_schemas(void);

/* original: observation.py's 40+40 line cut (str.splitlines semantics). */
char *agent_truncate_lines(const char *s, int num_lines);
/* Keeps head and tail of s within cap bytes (UTF-8 safe); extra_dropped
 * counts bytes already dropped by the runtime. Returns a copy. */
char *agent_cap_bytes(const char *s, size_t cap, uint64_t extra_dropped);
/* "Exit code: ...\nExecution output of \[execute_bash]:\n\[STDOUT]\n..." */
char *agent_obs_bash(const char *exit_str, const char *out, const char *err);

/* ---- the editor (editor.c) --------------------------------------------- */

/* The file system the editor works on: a sandbox, or a test double. */
typedef struct ed_fs {
    void *ctx;
    int (*read)(void *ctx, const char *path, size_t max, char **data, size_t *len, lis_error *err);
    int (*write)(void *ctx, const char *path, const char *data, size_t len, lis_error *err);
    int (*stat)(void *ctx, const char *path, char *kind, uint64_t *size, lis_error *err);
    /* find PATH -maxdepth 2, non-hidden, one entry a line; malloc'ed */
    char *(*list)(void *ctx, const char *path, lis_error *err);
    /* readlink -f PATH; malloc'ed */
    char *(*resolve)(void *ctx, const char *path, lis_error *err);
} ed_fs;

#define ED_MAX_FILE (64u << 20)
#define ED_MAX_RESPONSE 10000
#define ED_SNIPPET_LINES 4

/* Runs a str_replace_editor call; returns the result text (without the
 * "Execution output of" header), malloc'ed. */
char *agent_editor_run(const ed_fs *fs, const char *workdir, const cJSON *params);
/* The sandbox implementation of ed_fs (ctx is an agent_tool_env). */
void agent_editor_sandbox_fs(ed_fs *fs, const agent_tool_env *env);

/* Pure edit operations on buffers (exposed for tests). */
/* Number of non-overlapping occurrences of needle in hay. */
size_t ed_count(const char *hay, size_t hn, const char *needle, size_t nn, size_t *first);
/* Replaces the unique occurrence of old_s (exact, or else with tabs expanded
 * and \r ignored). Returns 0 and sets *out; -1 with *count 0 or >1. */
int ed_replace(const char *data, size_t len, const char *old_s, const char *new_s, char **out,
               size_t *out_len, size_t *count, size_t *line);
/* Inserts text after line `line` (0 = top). Returns -1 when line is out of
 * range and sets *nlines. */
int ed_insert(const char *data, size_t len, long line, const char *text, char **out,
              size_t *out_len, long *nlines);

/* ---- tool calls written as text (textcalls.c) -------------------------- */

typedef struct text_call {
    char *name;
    char *arguments; /* JSON text of the arguments object */
} text_call;

/* Parses hermes <tool_call>{...}</tool_call> and qwen3_coder
 * <function=N><parameter=P>V</parameter></function> blocks out of content.
 * Returns how many calls were found (up to max); *rest gets the content with
 * the blocks removed (malloc'ed). tools (the schemas) give parameter types. */
size_t agent_parse_text_calls(const char *content, const cJSON *tools, text_call *calls, size_t max,
                              char **rest);
void agent_text_calls_free(text_call *calls, size_t n);

/* ---- prompts (prompts.c) ---------------------------------------------- */

/* The final texts. original: str.replace for the dirs, then str.format. */
char *agent_prompt_system(const agent_prompts *p);
char *agent_prompt_instance(const agent_prompts *p, const char *problem_statement);

/* ---- the LLM client (llm.c, sse.c) ------------------------------------- */

/* Parses a text/event-stream body chunk by chunk (sse.c). */
/* One streamed tool call being assembled: its deltas are appended to
 * strbufs (amortised linear; cJSON strings would be copied whole at every
 * delta: quadratic), made into JSON once, by sse_finish. */
typedef struct sse_call {
    long index; /* the deltas' "index" */
    strbuf id, name, args;
} sse_call;
#define SSE_MAX_CALLS 1024 /* tool calls in one streamed reply; the rest are dropped */

typedef struct sse_state {
    strbuf line; /* the current partial line */
    strbuf data; /* data: lines of the current event */
    int done;    /* [DONE] seen */
    int events;
    /* the assembled reply */
    strbuf content, reasoning;
    sse_call *calls; /* the tool calls, in order of appearance */
    size_t ncalls, calls_cap;
    int calls_dropped;
    cJSON *tool_calls; /* made by sse_finish from calls: [{id, type, function}] */
    cJSON *error;      /* an error object sent in the stream */
    char finish_reason[32];
    llm_usage usage;
    char *bad; /* first unparsable event, for the error text */
} sse_state;

void sse_init(sse_state *s);
void sse_feed(sse_state *s, const char *p, size_t n);
void sse_finish(sse_state *s);
void sse_free(sse_state *s);

/* Helpers shared by llm.c and the tests. */
/* Context-length error: fills *max_context / *input_tokens (0 when absent);
 * returns 1 when the text is a token-limit error. */
int llm_is_token_error(const char *text, long *max_context, long *input_tokens);
/* New max_tokens after a token-limit error, or -1 to give up. original:
 * model_query's rule, max_context - input - 100, else half, never below 8192. */
long llm_shrink_max_tokens(long max_tokens, long max_context, long input_tokens);
/* Anthropic request/response conversion (anthropic.c). */
cJSON *llm_anthropic_request(const cJSON *messages, const cJSON *tools, const llm_config *cfg,
                             long max_tokens);
cJSON *llm_anthropic_message(const cJSON *resp, llm_usage *usage, char *finish, size_t flen);
/* A successful response body (JSON) of api into out (released with
 * llm_reply_free); a stream once all of it went through sse_feed. 0, -1 with
 * *why, or -2 when the server sent an error object (*why is its message). */
int llm_parse_response(llm_api api, const char *body, llm_reply *out, char *why, size_t wl);
int llm_parse_stream(sse_state *s, llm_reply *out, char *why, size_t wl);
/* The token ids of a parsed OpenAI reply j (choice ch: choices[0]) moved
 * into out->tokens, or why there are none in out->tokens_why (llm_tokens.c). */
void llm_take_tokens(cJSON *j, cJSON *ch, llm_reply *out);

/* ---- the episode (loop.c, episode.c) ----------------------------------- */

/* Runs the ReAct loop (agent_loop_hooked without hooks nor "messages").
 * Returns the trajectory; NULL only when out of memory.
 * original: trajectory.json's format, plus per-step usage and tool time. */
cJSON *agent_loop(const agent_tool_env *env, const agent_opts *o, agent_outcome *out);

/* Copies a host directory so that its contents land in dst, also when the
 * image already has dst. */
int agent_copy_input(lis_sandbox *sb, const char *host, const char *dst, lis_error *err);

#endif
