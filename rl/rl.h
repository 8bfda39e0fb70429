/* rl.h - rl/ internal: what the files of the episodes API share. The
 * request of a group parsed and checked (request.c), the token block of an
 * episode flattened from its turns (tokens.c), finished results kept on
 * disk (store.c); the groups, episodes and their threads (group.c,
 * episode.c) and the API's routes (api.c) on top. */
#ifndef LIS_RL_INTERNAL_H
#define LIS_RL_INTERNAL_H

#include "lis_rl.h"

#include <stddef.h>
#include <stdint.h>

/* ---- request.c: POST /lis/v1/groups (and the task of POST envs) --------- */

typedef struct rl_limits {
    int max_n;
    uint64_t max_files_bytes;
} rl_limits;

typedef enum { RL_SNAP_NONE = 0, RL_SNAP_EVERY, RL_SNAP_LIST } rl_snap_mode;

typedef struct rl_file {
    char *path; /* absolute in the sandbox: a relative name is put under the
                 * prompts' input_dir, as lis batch writes a row's input_files */
    char *data;
    size_t len;
} rl_file;

typedef struct rl_task {
    char *id;    /* task.id, or "" */
    char *image; /* a store ref, NULL: the server's default */
    rl_file *files;
    size_t nfiles;
    char **setup; /* shell commands run once for the group (sh -c, in working_dir) */
    size_t nsetup;
    double setup_timeout;  /* seconds per set-up command (default 600) */
    char *prompt;          /* the problem statement (framed by the prompts) */
    cJSON *messages;       /* or the conversation to start from (owned), NULL */
    cJSON *prompts;        /* {system_prompt, instance_prompt, working_dir, input_dir,
                           * output_dir} as a --prompt-config holds them, or NULL:
                           * the original's config/general.yaml */
    char *answer_file;     /* NULL: {output_dir}/answer.txt */
    char *scorer;          /* "builtin:NAME", "cmd:COMMAND", "python:PATH/reward.py" */
    cJSON *reward_row;     /* the row the scorer gets: reward.args + ground_truth (owned) */
    double reward_timeout; /* seconds (default 60); past it: reward 0, said so */
} rl_task;

typedef struct rl_request {
    rl_task task;
    int n;
    /* inference */
    char *base_url, *model, *api_key;
    cJSON *sampling;      /* sent in every request's body unchanged (owned), or NULL */
    long long *seeds;     /* n seeds (sent as "seed"), or NULL */
    int max_steps;        /* default 100 (original) */
    long max_token_limit; /* default 65536 (original) */
    double deadline_s;    /* set-up + run + reward, no queue time; 0: none */
    double tool_timeout;  /* per command, default 120 (original) */
    char *request_id;     /* idempotency, or NULL */
    cJSON *labels;        /* returned as given (owned), or NULL */
    rl_snap_mode snaps;
    int *snap_steps; /* RL_SNAP_LIST: the steps (after turn k-1: "k") */
    size_t nsnap_steps;
    int effects; /* "effects": true (default) */
} rl_request;

/* Parses and checks a group's body. Every key is known (an unknown one is
 * refused with its name and where it is: "unknown key task.fles"), every
 * type and bound checked. -1 with err (one line; err->code the HTTP status:
 * 400 malformed, 413 too large, 422 a bound such as n over max_n). */
int rl_request_parse(const cJSON *body, const rl_limits *lim, rl_request *out, lis_error *err);
void rl_request_free(rl_request *r);

/* ---- tokens.c: an episode's flattened token block (docs/rl.md) --------- */

/* One turn's ids as the endpoint sent them (llm_reply.tokens) or NULL. */
typedef struct rl_turn_tokens {
    const cJSON *tokens; /* {"prompt_ids", "ids", "logprobs"} or NULL */
} rl_turn_tokens;

/* The "tokens" object of a result from its turns: prompt_ids (turn 0's
 * prompt), response_ids, response_mask (1: the model's, 0: between turns),
 * response_logprobs (0.0 between turns and where a turn has no logprobs;
 * as long as response_ids), consistent, segments ([[first, last]...] turn
 * ranges that flatten cleanly), and "why" when empty or inconsistent.
 * Built only while each turn's prompt starts with the previous turn's
 * prompt + ids; never an id that was not received. */
cJSON *rl_tokens_flatten(const rl_turn_tokens *turns, size_t n);

/* ---- store.c: finished results on disk ---------------------------------- */

/* state_dir/episodes/<id>.json, written whole (temp file, fsync, rename),
 * strict UTF-8 (lis_json_print). */
int rl_store_put(const char *state_dir, const char *id, const cJSON *result, lis_error *err);
int rl_store_del(const char *state_dir, const char *id, lis_error *err);
/* Each kept result (cb's return != 0 stops); unreadable files are skipped
 * and counted in *bad. */
int rl_store_each(const char *state_dir, int (*cb)(void *arg, const char *id, cJSON *result),
                  void *arg, size_t *bad, lis_error *err);

#endif
