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
    int step; /* step mode (POST envs): no "inference" (refused), "idle_timeout_s" taken */
} rl_limits;

typedef enum { RL_SNAP_NONE = 0, RL_SNAP_EVERY, RL_SNAP_LIST } rl_snap_mode;

typedef struct rl_file {
    char *path; /* absolute in the sandbox: a relative name is put under the
                 * prompts' input_dir, as lis batch writes a row's input_files */
    char *data;
    size_t len;
} rl_file;

typedef struct rl_task {
    char *id;       /* task.id, or "" */
    char *image;    /* a store ref, NULL: the server's default */
    rl_file *files; /* sorted by path, each path once */
    size_t nfiles;
    char **setup; /* shell commands run once for the group (sh -c, in working_dir) */
    size_t nsetup;
    double setup_timeout;  /* task.setup_timeout_s: per set-up command (default 600) */
    char *prompt;          /* the problem statement (framed by the prompts), or NULL */
    cJSON *messages;       /* or the conversation to start from (owned), NULL; exactly
                            * one of prompt and messages is set */
    cJSON *prompts;        /* {system_prompt, instance_prompt, working_dir, input_dir,
                            * output_dir} as a --prompt-config holds them (the dirs
                            * absolute and normalised); never NULL: output_dir is
                            * /testbed when not given (original: the RL configs',
                            * where answer_file is), the others not given: the
                            * original's config/general.yaml */
    char *answer_file;     /* always set, absolute, normalised: task.answer_file,
                            * else {output_dir}/answer.txt (/testbed/answer.txt) */
    char *scorer;          /* "builtin:NAME", "cmd:COMMAND", "python:PATH/reward.py";
                            * NULL: the task has no reward */
    cJSON *reward_row;     /* the row the scorer gets: reward.args + "ground_truth"
                            * (null when not given) (owned); NULL without a scorer */
    double reward_timeout; /* seconds (default 60); past it: reward 0, said so */
} rl_task;

typedef struct rl_request {
    rl_task task;
    int n;
    /* inference */
    char *base_url, *model, *api_key;
    cJSON *sampling;      /* sent in every request's body unchanged (owned), or NULL */
    long long *seeds;     /* n seeds (sent as "seed"; within +-2^53), or NULL */
    int max_steps;        /* default 100 (original) */
    long max_token_limit; /* default 65536 (original) */
    double deadline_s;    /* set-up + run + reward, no queue time; 0: none */
    double tool_timeout;  /* per command, default 120 (original) */
    char *request_id;     /* idempotency, or NULL */
    cJSON *labels;        /* returned as given (owned), or NULL */
    rl_snap_mode snaps;
    int *snap_steps; /* RL_SNAP_LIST: steps k (after turn k-1), sorted */
    size_t nsnap_steps;
    int effects;         /* "effects": true (default) */
    int step;            /* step mode: the trainer calls the model (rl_limits.step) */
    double idle_timeout; /* step mode: idle_timeout_s (default 600) */
} rl_request;

/* Parses and checks a group's body (docs/rl.md, "A group's body"). Every key
 * is known (an unknown one is refused with its name and where it is:
 * "unknown key task.fles"; only inference.sampling, task.reward's
 * ground_truth and args and labels are free-form, within a byte budget),
 * every type and bound checked. lim NULL or its members 0: 512 episodes,
 * 64 MiB of files. -1 with err (one line; err->code and err->http_status the
 * HTTP status: 400 malformed, 413 over a byte budget, 422 a count or a range
 * such as n over max_n; out of memory: code ENOMEM, http_status 500) and
 * *out left zeroed; 0 with *out to rl_request_free. */
int rl_request_parse(const cJSON *body, const rl_limits *lim, rl_request *out, lis_error *err);
void rl_request_free(rl_request *r);
/* v is an integer number in lo..hi (checked before any cast): 0 and *out, else -1. */
int rl_json_int(const cJSON *v, long long lo, long long hi, long long *out);

/* ---- tokens.c: an episode's flattened token block (docs/rl.md) --------- */

/* One turn's ids as the endpoint sent them (llm_reply.tokens) or NULL. */
typedef struct rl_turn_tokens {
    const cJSON *tokens; /* {"prompt_ids", "ids", "logprobs"} or NULL */
} rl_turn_tokens;

/* The "tokens" object of a result from its turns: prompt_ids (turn 0's
 * prompt), response_ids, response_mask (1: the model's, 0: between turns),
 * response_logprobs (0.0 between turns and where a turn has no logprobs, or
 * logprobs not as many as its ids; always as long as response_ids),
 * consistent, segments ([[first, last]...] turn ranges that flatten cleanly,
 * each from its first turn's prompt; a turn without ids or prompt ids is in
 * none), and "why" (one line) when empty, inconsistent or a turn's logprobs
 * are missing. Built only while each turn's prompt starts with the previous
 * turn's prompt + ids; never an id that was not received. When the prefix
 * breaks (consistent false), the top-level ids hold segments[0] only (the
 * first turn that has ids onwards): the others are in the turns' own ids.
 * Over 1M ids in the block: empty, and why says so. NULL: out of memory. */
cJSON *rl_tokens_flatten(const rl_turn_tokens *turns, size_t n);

/* ---- store.c: finished results on disk ---------------------------------- */

/* state_dir/episodes/<id>.json (both made 0700 when missing), written whole
 * (a temporary of its own in the same directory, fsync, rename, fsync of the
 * directory), strict UTF-8 (lis_json_print), at most 256 MiB. id: 1 to 64 of
 * [A-Za-z0-9_-], else -1 with EINVAL (no name can leave the directory). */
int rl_store_put(const char *state_dir, const char *id, const cJSON *result, lis_error *err);
/* -1 with err->code ENOENT when no result of id is kept. */
int rl_store_del(const char *state_dir, const char *id, lis_error *err);
/* Each kept result, by id's order: cb owns result (keeps or frees it); its
 * non-zero return stops the walk and is returned. Files that are not a
 * valid id's ".json", not regular, over 256 MiB or not one JSON object are
 * skipped and counted in *bad (may be NULL); the temporaries a crash left
 * (".tmp-*") are skipped silently. No directory yet: 0, nothing. -1 with
 * err when the directory cannot be read. */
/* One kept result (the caller frees it); -1 with err (ENOENT: none, or not
 * readable as a result). */
int rl_store_get(const char *state_dir, const char *id, cJSON **out, lis_error *err);
int rl_store_each(const char *state_dir, int (*cb)(void *arg, const char *id, cJSON *result),
                  void *arg, size_t *bad, lis_error *err);

/* ---- index.c: episodes and groups by id (open addressing) -------------- */

#define RL_INDEX_ID 40 /* an id's bytes at most, NUL included (core.h: RL_ID_LEN) */
/* index.c: episodes and groups by id */
typedef struct rl_slot {
    char id[RL_INDEX_ID];
    void *ptr; /* NULL: empty; (void *)1: deleted */
} rl_slot;
typedef struct rl_index {
    rl_slot *slots;
    size_t cap, used, count; /* used: slots not empty (tombstones too) */
} rl_index;
int rl_index_put(rl_index *x, const char *id, void *ptr); /* -1: out of memory */
void *rl_index_get(const rl_index *x, const char *id);
void rl_index_del(rl_index *x, const char *id);
void rl_index_free(rl_index *x);

#endif
