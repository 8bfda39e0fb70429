/* agent.h - the LLM-in-Sandbox agent: the public header of agent/ for the
 * areas above it (batch/, cli/): the episode engine and `lis run`'s episode,
 * the LLM client, the tools' two halves, prompts, flags and settings, and the
 * small helpers batch/ shares. What only agent/'s own files use is in
 * agent/internal.h.
 *
 * Layering: agent/ talks to sandboxes only through lis.h, to the LLM through
 * libcurl, and reads JSON/YAML through cJSON/libyaml. No global mutable state:
 * everything lives in the structures below and is passed explicitly. */
#ifndef LIS_AGENT_H
#define LIS_AGENT_H

#include "lis.h"
#include "lis_monitor.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- small helpers (util.c) -------------------------------------------- */

typedef struct strbuf {
    char *s;
    size_t len, cap;
    int oom;
} strbuf;

void strbuf_putn(strbuf *b, const char *p, size_t n);
void strbuf_puts(strbuf *b, const char *s);
void strbuf_putc(strbuf *b, char c);
void strbuf_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Returns the malloc'ed NUL-terminated string (never NULL unless out of memory). */
char *strbuf_take(strbuf *b);
void strbuf_release(strbuf *b);

char *agent_strdup(const char *s);
char *agent_strndup(const char *s, size_t n);
/* Reads a whole host file (settings, prompt configs); NULL on error. */
char *agent_read_host_file(const char *path, size_t *len, lis_error *err);
/* Prints JSON the way Python's json.dump(indent=2, ensure_ascii=False) does
 * (original: how it writes trajectory.json and results.json). */
char *agent_json_pretty(const cJSON *j);
/* Length in bytes of the longest prefix of s (len n) that holds at most
 * max_chars UTF-8 code points. */
size_t agent_utf8_prefix(const char *s, size_t n, size_t max_chars);
/* A JSON number as a long: 0 when item is not a number (or NaN), clamped to
 * +-2^53 (a plain cast of NaN or 1e300 is undefined behaviour, and sums of
 * such counts must not overflow). */
long agent_json_long(const cJSON *item);
/* Strips (for the tools and the editor) ANSI CSI sequences, every \r and NUL, and replaces invalid UTF-8
 * by U+FFFD, so the text is valid for a JSON string. */
char *agent_clean_output(const char *p, size_t n);

/* ---- tools (tools.c): execution -------------------------------------- */

#define AGENT_CMD_TIMEOUT 120 /* seconds per command; original: CMD_TIMEOUT */

typedef struct agent_tool_env {
    lis_sandbox *sb;
    const char *workdir; /* /testbed */
    const char *shell;   /* "bash", or "sh" when the image has no bash */
    double timeout;      /* AGENT_CMD_TIMEOUT */
    size_t capture_cap;  /* per stream, kept by the runtime (head + tail) */
    size_t obs_cap;      /* per stream, in the observation */
    lis_monitor *mon;    /* the sandbox's monitor (agent_sandbox_create), NULL: none */
} agent_tool_env;

typedef struct agent_tool_out {
    char *obs;            /* the observation text (malloc'ed) */
    int done;             /* submit was called */
    int exit_code;        /* execute_bash: the command's exit code, else 0 */
    double exec_seconds;  /* time spent executing the tool */
    int oom_killed;       /* execute_bash: the OOM killer fired during the command */
    uint64_t memory_peak; /* execute_bash: the sandbox's memory peak, when known */
} agent_tool_out;

/* Runs one tool call; params may be NULL or a non-object (then the continue
 * message is the observation; original: parse_response's CONTINUE_MSG). */
void agent_tool_exec(const agent_tool_env *env, const char *name, const cJSON *params,
                     agent_tool_out *out);

/* execute_bash in two halves, so that one thread can run many commands
 * (lis batch starts b->spec with lis_exec_start; agent_tool_exec runs it with
 * lis_exec). The command text of an execute_bash call, NULL when the call
 * is not one or has no command (then agent_tool_exec answers it); *printed
 * is the caller's to free. */
const char *agent_bash_command(const char *name, const cJSON *params, char **printed);
typedef struct agent_bash {
    const char *argv[4];
    lis_exec_spec spec; /* points into argv and at command: keep both alive */
} agent_bash;
void agent_bash_prepare(const agent_tool_env *env, const char *command, agent_bash *b);
/* The observation of a finished command (rc and err from running it). */
void agent_bash_observe(const agent_tool_env *env, const agent_bash *b, int rc,
                        const lis_result *res, const lis_error *err, agent_tool_out *out);

/* ---- prompts (prompts.c) ---------------------------------------------- */

typedef struct agent_prompts {
    char *system_prompt; /* templates, placeholders still in */
    char *instance_prompt;
    char *working_dir, *input_dir, *output_dir;
} agent_prompts;

/* original: config/general.yaml. */
int agent_prompts_default(agent_prompts *p);
/* Loads a YAML prompt config (system_prompt, instance_prompt, working_dir,
 * input_dir, output_dir). original: missing dirs default as general.yaml's. */
int agent_prompts_load(agent_prompts *p, const char *path, lis_error *err);
void agent_prompts_free(agent_prompts *p);

/* ---- the LLM client (llm.c) -------------------------------------------- */

typedef enum llm_api { LLM_API_OPENAI = 0, LLM_API_ANTHROPIC } llm_api;

typedef struct llm_config {
    llm_api api;
    const char *base_url; /* e.g. http://host:8000/v1 (OpenAI) */
    const char *api_key;  /* may be NULL or "dummy" */
    const char *model;    /* sent as "model" (routing prefix removed) */
    double temperature;
    int send_temperature;
    long max_tokens;
    const cJSON *extra_body; /* merged into the request body */
    int stream;              /* SSE streaming (OpenAI API) */
    double connect_timeout;  /* seconds */
    double timeout;          /* seconds, whole request */
    int max_retries;         /* attempts in all; 5 */
    double backoff_base;     /* first backoff, seconds (doubles, plus jitter) */
    double backoff_max;      /* cap on one sleep, Retry-After included */
    FILE *log;               /* retries are reported here (NULL: silent) */
    /* Non-zero (set from another thread): llm_chat's request in flight
     * ends within 50 ms (its transfer is polled in slices), so does a
     * backoff sleep, and no retry starts: llm_chat fails with err->code
     * ECANCELED, "cancelled". Attempts driven by their caller (llm_call)
     * end through curl's progress callback (within about a second while the
     * endpoint is silent). NULL: never. */
    const volatile int *abort;
} llm_config;

typedef struct llm_usage {
    long prompt_tokens, completion_tokens, total_tokens;
    int known;
} llm_usage;

typedef struct llm_reply {
    cJSON *message;        /* OpenAI-style assistant message for the history */
    const char *content;   /* borrowed from message ("" when none) */
    const char *reasoning; /* reasoning_content / thinking ("" when none) */
    cJSON *tool_calls;     /* borrowed from message; NULL when none */
    char finish_reason[32];
    llm_usage usage;
    double seconds; /* wall time including retries */
    int attempts;
    long max_tokens_used; /* after context-length shrinking */
    /* The endpoint's own token ids and logprobs of this reply (vLLM's chat
     * completions with return_token_ids and logprobs: top-level
     * prompt_token_ids, choices[0].token_ids, choices[0].logprobs.content[].logprob;
     * agent-lightning's response_token_ids too): {"prompt_ids": [int...],
     * "ids": [int...], "logprobs": [number...]}, a key absent when the reply
     * had none; NULL when it had neither ids, and tokens_why says why in one
     * line ("the endpoint sent no token ids", "a streamed reply carries no
     * token ids", "choices[0].token_ids[3] is not an integer token id": a
     * list that is not all integers 0..2^31-1, or longer than 2^20, or a
     * logprob that is not a number, keeps none). Never made up: lis has no
     * tokenizer. llm_reply_free frees it, and so does the engine with the
     * reply it took (agent_ep_llm_reply): whoever keeps them takes them
     * (r->tokens = NULL) before. */
    cJSON *tokens;
    char tokens_why[160];
} llm_reply;

typedef struct llm_client llm_client;

llm_client *llm_new(const llm_config *cfg, lis_error *err);
/* -1 with "did you mean http://URL?" when url has no scheme. */
int llm_check_base_url(const char *url, lis_error *err);
void llm_free(llm_client *c);
/* One chat completion with tools; retries per the config. On failure err
 * names the cause; err->http_status is the HTTP status (0: no reply, then
 * err->code is EHOSTUNREACH). */
int llm_chat(llm_client *c, const cJSON *messages, const cJSON *tools, llm_reply *out,
             lis_error *err);
void llm_reply_free(llm_reply *r);
/* The reply of a model called by someone else (step mode: the trainer's
 * action): an OpenAI assistant message (content, tool_calls, reasoning
 * taken as a reply's choices[0].message is) or raw text (content only:
 * the engine parses hermes / qwen3-coder tool calls in it). -1 with err
 * (EINVAL, one line) when it is neither, or a member has the wrong type. */
int llm_reply_from_message(const cJSON *action, llm_reply *out, lis_error *err);
const char *llm_client_url(const llm_client *c);

/* One chat completion as a sequence of attempts, for callers that perform the
 * transfers themselves (lis batch: one curl multi handle for every episode).
 * llm_chat is this driven with curl_easy_perform and a sleep between
 * attempts. messages and tools must stay unchanged until the call is freed. */
typedef struct llm_call llm_call;
enum { LLM_CALL_DONE = 0, LLM_CALL_RETRY = 1, LLM_CALL_FAILED = -1 };
/* own_handle: the call gets an easy handle of its own (for a multi handle);
 * else it uses the client's (one call at a time). */
llm_call *llm_call_new(llm_client *c, const cJSON *messages, const cJSON *tools, int own_handle,
                       lis_error *err);
/* Sets up the next attempt; returns its easy handle (CURLOPT_PRIVATE = the
 * call), ready for curl_easy_perform or curl_multi_add_handle. */
CURL *llm_call_attempt(llm_call *k, lis_error *err);
CURL *llm_call_handle(const llm_call *k);
/* Where this call reports retries (default: the client's cfg.log). */
void llm_call_set_log(llm_call *k, FILE *log);
/* The transfer of the attempt ended with rc: LLM_CALL_DONE (out filled),
 * LLM_CALL_RETRY (start the next attempt after *wait seconds) or
 * LLM_CALL_FAILED (err says why; err->http_status the HTTP status, 0 transport). */
int llm_call_result(llm_call *k, CURLcode rc, llm_reply *out, double *wait, lis_error *err);
void llm_call_free(llm_call *k);

/* ---- the episode (loop.c, episode.c) ----------------------------------- */

typedef struct agent_opts {
    const char *query;
    const agent_prompts *prompts;
    int max_steps;        /* 100 */
    long max_token_limit; /* 65536: ceiling on the whole conversation */
    llm_config llm;
    const char *llm_name; /* as given, for logs and the trajectory */
    FILE *progress;       /* live progress (stderr); NULL: silent */
    /* Called by agent_ep_tool_done with each step just recorded (its
     * trajectory object, effects included), on the thread that calls it;
     * NULL: none. lis batch's live view follows the episodes with it. */
    void (*on_step)(void *arg, const cJSON *step);
    void *on_step_arg;
    /* The conversation to start from instead of the system and instance
     * prompts (the episodes API's task "messages"): copied, each a
     * {"role", "content"} object (an assistant's content may be absent);
     * NULL: the prompts. Anything else ends the episode before its first
     * call, with reason llm_error and the bad message named. */
    const cJSON *messages;
} agent_opts;

/* Why an episode ended: the engine's own reasons, then the ones a driver
 * gives agent_ep_stop (lis batch: a deadline, Ctrl-C, a sandbox that could
 * not start). lis batch numbers its row reasons after these (batch/engine.h:
 * batch_reason), so a reason is never a string until it is printed. */
typedef enum agent_stop {
    AGENT_STOP_SUBMIT,
    AGENT_STOP_MAX_STEPS,
    AGENT_STOP_TOKEN_LIMIT,
    AGENT_STOP_DEADLINE,
    AGENT_STOP_LLM_ERROR,
    AGENT_STOP_SANDBOX_ERROR,
    AGENT_STOP_CANCELLED,
    AGENT_STOP_POLICY,       /* a policy rule with action stop fired (docs/monitoring.md) */
    AGENT_STOP_PAUSE_FAILED, /* a pause (rule or lis batch ctl) could not hold (issue 29) */
} agent_stop;
#define AGENT_STOPS (AGENT_STOP_PAUSE_FAILED + 1)
/* As trajectory.json's metadata.stop_reason writes it: "submit", "max_steps",
 * "token_limit", "deadline", "llm_error", "sandbox_error", "cancelled",
 * "policy", "pause_failed". */
const char *agent_stop_name(agent_stop s);

typedef struct agent_outcome {
    int steps;
    int submitted;
    int unreached; /* the first LLM request found no endpoint (agent_loop): nothing ran */
    agent_stop stop;
    char error[512];
    long prompt_tokens, completion_tokens;
    double llm_seconds, tool_seconds; /* summed over the steps */
    int oom_kills;                    /* commands that met the OOM killer */
    uint64_t memory_peak;             /* the sandbox's peak seen by the commands */
    int effects;                      /* steps that have their effects (a monitor) */
    int alerts;                       /* policy alerts, summed over the steps */
    char stop_rule[64];               /* AGENT_STOP_POLICY: the rule */
} agent_outcome;

/* The episode engine (react.c): the ReAct loop as a state machine doing no
 * I/O. agent_ep_next says what it needs: an LLM call (agent_ep_messages +
 * agent_ep_tools, answered with agent_ep_llm_reply or agent_ep_llm_failed),
 * a tool (agent_ep_tool, answered with agent_ep_tool_done), or nothing more
 * (then agent_ep_finish). o must outlive the episode. */
typedef struct agent_ep agent_ep;
enum { AGENT_EP_DONE = 0, AGENT_EP_LLM, AGENT_EP_TOOL };
agent_ep *agent_ep_new(const agent_opts *o);
int agent_ep_next(agent_ep *ep);
const cJSON *agent_ep_messages(const agent_ep *ep);
const cJSON *agent_ep_tools(const agent_ep *ep);
int agent_ep_steps(const agent_ep *ep);
/* Takes the reply (r is emptied). */
void agent_ep_llm_reply(agent_ep *ep, llm_reply *r);
void agent_ep_llm_failed(agent_ep *ep, const char *why);
/* The call to run: its name ("" when the reply had no usable call: run
 * agent_tool_exec with NULL for the continue message) and parameters. */
const char *agent_ep_tool(const agent_ep *ep, const cJSON **params);
/* Takes out->obs. */
void agent_ep_tool_done(agent_ep *ep, agent_tool_out *out);
/* Ends the episode now with reason (deadline, cancelled, sandbox_error). */
void agent_ep_stop(agent_ep *ep, agent_stop reason, const char *error);

/* Effects (docs/monitoring.md): the episode's monitor (agent_sandbox_create
 * gives it; NULL: none). Each tool call is one step of it, bracketed here in
 * the engine for every driver: agent_ep_tool_begin right before the tool
 * runs, agent_ep_tool_end right after, on the thread that runs it (both read
 * the sandbox's writable layer); agent_ep_tool_done closes a step still open
 * and puts its effects into the trajectory step ("effects"), its alerts into
 * the log, and ends the episode with AGENT_STOP_POLICY when a stop rule
 * fired in it. */
void agent_ep_set_monitor(agent_ep *ep, lis_monitor *mon);
void agent_ep_tool_begin(agent_ep *ep);
void agent_ep_tool_end(agent_ep *ep, const agent_tool_out *out);
/* The monitor's fd turned readable: takes the live action (lis_monitor_take_action)
 * and its rule. LIS_ACT_STOP: the engine ends the episode with reason policy
 * at its next agent_ep_next (after the step in progress is recorded): the
 * driver kills the running command, if any. LIS_ACT_PAUSE: the driver freezes
 * the sandbox and holds the episode until it is resumed. */
lis_policy_action agent_ep_monitor_event(agent_ep *ep, char *rule, size_t len);
/* The step being recorded last (its trajectory object), NULL before the
 * first; valid until the next call into ep. */
const cJSON *agent_ep_last_step(const agent_ep *ep);
/* The trajectory; frees ep. original: trajectory.json, plus usage and tool time. */
cJSON *agent_ep_finish(agent_ep *ep, agent_outcome *out);

/* A branch (the episodes API, docs/rl.md): an episode that starts where
 * another was after its turn k-1, turns counted from 0. messages: the
 * other's history as agent_loop_hooks.on_turn gave it after its turn k-1
 * (then it ends with turn k-1's observation); steps: its trajectory's steps
 * 0..k-1 (the rest are ignored). The branch's turn k is made anew; its
 * steps, history, step count and token estimate continue the parent's, so
 * turns 0..k-1 of both trajectories are byte for byte the same. NULL with
 * err when messages or steps do not hold k turns. */
agent_ep *agent_ep_new_branch(const agent_opts *o, const cJSON *messages, const cJSON *steps, int k,
                              lis_error *err);

/* What a driver other than `lis run` asks of its blocking loop (the
 * episodes API, rl/: one thread per episode); every member may be 0/NULL. */
typedef struct agent_loop_hooks {
    void *arg;
    /* Readable (an eventfd the hook's owner writes): the episode ends now
     * with the reason stop_reason gives (a deadline, a cancel): a command
     * running is killed (its step is recorded with what it printed), an LLM
     * request in flight is dropped (the owner sets llm_config.abort too).
     * Polled, never read. -1 or 0: none (a zeroed struct watches no fd). */
    int stop_fd;
    agent_stop (*stop_reason)(void *arg, char *why, size_t len);
    /* Each turn's model call instead of llm_chat on a client of o->llm
     * (the owner picks the endpoint, keeps r->tokens, stamps the weight
     * version): fills *r as llm_chat does and returns 0, or -1 with err. */
    int (*llm)(void *arg, const cJSON *messages, const cJSON *tools, llm_reply *r, lis_error *err);
    /* Each turn once recorded: its trajectory step (effects included) and
     * the history as the next model call will be sent it, minus that call's
     * "Steps Remaining" line (what agent_ep_new_branch takes). */
    void (*on_turn)(void *arg, const cJSON *step, const cJSON *messages);
} agent_loop_hooks;

/* `lis run`'s blocking driver of the engine (loop.c), for drivers with
 * hooks: runs ep (NULL: a new one of o; taken, freed) to its end on env's
 * sandbox and returns the trajectory (agent_ep_finish) with "messages"
 * added: the whole history, as the original's trajectory keeps it (lis
 * run's own agent_loop, the same code without hooks, adds none: its
 * trajectory.json is unchanged). */
cJSON *agent_loop_hooked(const agent_tool_env *env, agent_ep *ep, const agent_opts *o,
                         const agent_loop_hooks *h, agent_outcome *out);

/* The tool environment of a sandbox that is prepared already (a fork of a
 * prepared one): bash or sh, the caps; no command runs. */
void agent_tool_env_init(lis_sandbox *sb, const agent_prompts *p, agent_tool_env *env);
/* Prepares the sandbox (mkdir -p of the working, input and output dirs; git
 * init when git exists) and fills env (bash or sh). original: setup_env,
 * without its pip mirror. */
int agent_prepare_sandbox(lis_sandbox *sb, const agent_prompts *p, agent_tool_env *env,
                          lis_error *err);

/* What an export left out: one line in the log (may be NULL) each, one
 * {path, reason} entry in skipped (the trajectory's metadata.export_skipped). */
typedef struct agent_export_log {
    FILE *log;
    const char *root; /* the exported directory, as shown */
    cJSON *skipped;
} agent_export_log;
/* Copies the sandbox's directory path to host_dst through the export filter
 * (lis_copy_out_data) and at most max_bytes of data (0: the sandbox's
 * writable budget); what it leaves out goes to x. lis run's and lis batch
 * --save-files' export. */
int agent_export(lis_sandbox *sb, const char *path, const char *host_dst, uint64_t max_bytes,
                 agent_export_log *x, lis_error *err);
/* ---- effects: the monitored sandbox of an episode (watch.c) ----------- */

/* How the sandboxes of `lis run` and `lis batch` are watched: the monitor
 * hub (NULL: --no-effects), the policy (--policy), and the egress proxy's
 * domain rules (--allow-domain, --deny-domain with the policy's connect deny
 * rules added, --allow-host-network; for --net proxy). */
typedef struct agent_watch {
    lis_monitor_hub *hub;
    lis_policy *policy;
    lis_net_rules net;
    const char **allow, **deny; /* owned arrays (of argv's and the policy's strings) */
    int have_rules;             /* some domain rule was given */
    const char *policy_path;    /* --policy FILE */
    uint64_t policy_hash;       /* FNV-1a of its text (lis batch --resume compares it) */
} agent_watch;

struct agent_cli;
/* From the parsed flags (--no-effects, --policy, the domain rules) for a run
 * with network mode net: the policy loaded and checked, the hub started.
 * One line in err for a bad policy or a rule that does not fit the mode. */
int agent_watch_init(agent_watch *w, const struct agent_cli *c, lis_net_mode net, lis_error *err);
/* After the last monitor is freed. */
void agent_watch_release(agent_watch *w);
/* lis_net_sandbox_create(spec) watched as w says: with effects on the
 * sandbox is made with spec->monitor = lis_monitor_spec_flags() and the
 * monitor attached right after (a monitored sandbox waits at its first exec
 * until then), *mon its monitor; else *mon NULL. w NULL: neither. On error
 * nothing is left. Free *mon after lis_sandbox_destroy. */
int agent_sandbox_create(lis_ctx *ctx, const lis_sandbox_spec *spec, const agent_watch *w,
                         lis_sandbox **sb, lis_monitor **mon, lis_error *err);
/* Ends lis's own set-up of the sandbox (directories, git init, input files)
 * as the monitor's step 0, whose effects are dropped: the model's first tool
 * call is step 1, as in the trajectory (metadata.step). NULL is fine. */
void agent_watch_setup_done(lis_monitor *mon);
/* What a tool call is to the monitor (and the live view): the command of an
 * execute_bash, the editor's sub-command and path ("view /testbed/a.py"),
 * cut to len. */
void agent_watch_call(const char *name, const cJSON *params, char *buf, size_t len);

typedef struct agent_run {
    agent_opts opts;
    const char *rootfs;
    const char *image;      /* what the user named it (an image, a --rootfs path): the log
                        * and the trajectory's metadata.docker_image; NULL: rootfs */
    const char *input_dir;  /* host directory copied into prompts->input_dir */
    const char *output_dir; /* host; the run goes to <output_dir>/<timestamp>/ */
    lis_net_mode net;
    uint64_t memory_bytes;
    uint64_t disk_bytes;      /* the writable budget; 0: LIS_DEFAULT_DISK */
    uint64_t export_max;      /* data bytes the export of output_dir writes; 0: disk_bytes */
    const agent_watch *watch; /* effects, policy, domain rules; NULL: none */
    FILE *out;                /* answer and paths (stdout) */
} agent_run;

/* A whole episode: sandbox, input copy, loop, export, trajectory.json,
 * answer. run_dir (optional) receives the directory of this run. When the
 * LLM was never reached (res->unreached) nothing is kept: -1 with err, the
 * one line "cannot reach the LLM at URL: reason (check --llm-base-url)". */
int agent_episode(lis_ctx *ctx, const agent_run *r, agent_outcome *res, char *run_dir,
                  size_t run_dir_len, lis_error *err);

/* ---- flags and settings (settings.c) ---------------------------------- */

/* Loads one YAML document (libyaml) as JSON: mappings, sequences, and
 * scalars as strings (plain null/~ as null). */
cJSON *agent_yaml_load(const char *text, size_t len, lis_error *err);

#define AGENT_MAX_DOMAINS 256 /* --allow-domain / --deny-domain patterns each */

typedef struct agent_cli {
    const char *query;
    const char *llm_name, *llm_base_url, *api_key;
    const char *input_dir, *output_dir;
    const char *image, *rootfs;
    const char *prompt_config, *settings;
    const char *extra_body;
    const char *net;
    const char *memory;
    const char *disk;       /* --disk: the sandbox's writable budget */
    const char *export_max; /* --export-max: data an episode's export writes at most */
    int max_steps;
    long max_token_limit, max_tokens_per_call;
    double temperature;
    double timeout, connect_timeout;
    int stream;
    int help;
    /* effects and rules (docs/monitoring.md) */
    int effects, no_effects; /* --effects (or --policy) turns them on; off by default */
    const char *policy;
    const char *allow_domains[AGENT_MAX_DOMAINS + 1], *deny_domains[AGENT_MAX_DOMAINS + 1];
    size_t nallow, ndeny;
    int allow_host_network;
    /* owned strings read from the settings file */
    char *owned[8];
    char settings_path[1024];
} agent_cli;

/* Parses the model and sandbox flags of `lis run` (cmd "run": --query is
 * required) or `lis batch` (cmd "batch": the rows give the queries), both
 * --llm-name and --llm_name spellings. */
int agent_cli_parse(int argc, char **argv, agent_cli *c, const char *cmd, lis_error *err);
/* Fills unset values from the settings file and the environment. An API key
 * is required unless the endpoint is local (agent_url_is_local): then none
 * is sent. */
int agent_cli_settings(agent_cli *c, lis_error *err);
/* The endpoint is on this host: localhost, 127.0.0.0/8, ::1, or a unix
 * socket (http+unix://%2Fpath%2Fto.sock/v1). */
int agent_url_is_local(const char *url);
void agent_cli_free(agent_cli *c);
void agent_cli_usage(FILE *f);
/* Builds llm_config / prompts from the parsed flags. extra (owned by the
 * caller, cJSON_Delete) receives the parsed --extra-body. */
int agent_cli_llm(const agent_cli *c, llm_config *cfg, cJSON **extra, lis_error *err);
int agent_parse_size(const char *s, uint64_t *out);
int agent_parse_net(const char *s, lis_net_mode *out);

#endif
