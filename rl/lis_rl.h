/* lis_rl.h - the public API of rl/: episodes for RL trainers (docs/rl.md).
 * Groups of n episodes of one task, set up once and forked, run against the
 * trainer's own OpenAI-compatible endpoint by agent/'s episode engine (the
 * one `lis run` and `lis batch` drive), scored by batch/'s scorers, with
 * token ids passed through, branches of a running episode with its files,
 * cancel, deadlines and results kept on disk. rl/ is above agent/ and
 * batch/; serve/ exposes it under /lis/v1/ (groups, episodes, rl/). */
#ifndef LIS_RL_H
#define LIS_RL_H

#include "lis.h"
#include "lis_monitor.h"

#include <cjson/cJSON.h>
#include <stdio.h>

typedef struct lis_rl lis_rl;

typedef struct lis_rl_opts {
    lis_ctx *ctx;
    const char *data_dir;      /* the rootfs store (snapshots of set-ups and steps) */
    const char *state_dir;     /* finished results, one JSON file each (made 0700) */
    const char *default_image; /* a task without "image": this store ref (NULL: lis run's) */
    lis_limits limits;         /* each sandbox's envelope */
    lis_net_mode net;          /* each sandbox's network */
    int max_n;                 /* episodes per group or branch at most (0: 512) */
    int max_live;              /* sandboxes alive at once at most (0: 512) */
    int results_mem;           /* finished episodes kept in memory at most (0: 4096); the
                                * oldest whose results are on disk and that keep no snapshot
                                * leave it, and GET reads them back */
    int max_queued;            /* groups waiting at most (0: 4096); more: 429 */
    /* memory admission: a group waits while its n sandboxes at admit_bytes
     * each do not fit the host's available memory less 512 MiB (0: 32 MiB,
     * an idle episode's sandbox and its share of lis; see docs/rl.md) */
    uint64_t admit_bytes;
    uint64_t max_files_bytes; /* a task's files in all (0: 64 MiB) */
    int setup_threads;        /* group set-ups at once (0: one per core) */
    int reward_threads;       /* scorers at once (0: one per core) */
    /* effects (docs/monitoring.md): hub NULL: episodes are not monitored */
    lis_monitor_hub *hub;
    lis_policy *policy;
    /* Called (from any thread, never under a lock of the caller's) each time
     * an episode, group or the server's counts change: serve/ re-runs the
     * requests that wait (lis_rl_handle returned 0). NULL: none. */
    void (*notify)(void *arg);
    void *notify_arg;
    FILE *log; /* what the operator should know (a result that could not be kept); NULL: none */
} lis_rl_opts;

/* Loads the finished results kept in state_dir; -1 with err. */
int lis_rl_open(const lis_rl_opts *o, lis_rl **out, lis_error *err);
/* Ends every episode still queued or running (status cancelled, error
 * "server stopped"), waits for their threads, removes every sandbox and
 * snapshot of theirs; finished results stay in state_dir. NULL is fine. */
void lis_rl_close(lis_rl *rl);

/* One request of the episodes API. */
typedef struct lis_rl_req {
    const char *method; /* "GET", "POST", "PUT", "DELETE" */
    const char *path;   /* after "/lis/v1/": "groups", "episodes/ID/branch", "rl/status" */
    const cJSON *body;  /* the JSON body (NULL: none) */
    double wait;        /* ?wait=S (long-poll), 0: none */
    int final;          /* the last call of a long-poll: answer with what there is */
    long last_event_id; /* events: Last-Event-ID (or ?after=), -1: from the start */
    /* LIS_RL_MEMO bytes the caller keeps between the calls of one long-poll,
     * zeroed before the first (what a POST that waits did already: step
     * mode's), or NULL: such a POST answers at once */
    char *memo;
} lis_rl_req;

#define LIS_RL_MEMO 64

/* Answers q: the HTTP status, *reply (the caller frees it; errors are
 * {"message": one line}). 0: not yet (q->wait > 0 and what it waits for is
 * not done): call again after notify, or with final = 1 once wait has
 * passed; *reply is NULL then. Never blocks. Thread-safe.
 * events (GET episodes/ID/events): *reply is {"events": [{"id", "event",
 * "data"}...], "final": bool} with the events after q->last_event_id (at
 * most 64 per call); 0 when there is none yet and the episode runs. */
int lis_rl_handle(lis_rl *rl, const lis_rl_req *q, cJSON **reply);

/* Whether path (after "/lis/v1/") belongs to the episodes API: "groups",
 * "episodes", "envs", "rl" and below. */
int lis_rl_owns(const char *path);

#endif
