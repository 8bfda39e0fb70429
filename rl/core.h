/* core.h - rl/ internal: the server's groups and episodes (docs/rl.md).
 *
 * Design: one supervisor thread (sup.c) owns every state change. It holds
 * three job pools (runtime's lis_jobs), one per stage as ProRL's server has
 * them: `setup` (a group's sandbox set up once and snapshot), `run` (one
 * episode: its fork of the set-up, `lis run`'s blocking driver of agent/'s
 * engine with hooks, the answer read, the sandbox destroyed) and `reward`
 * (batch/'s scorers). A group waits in a queue until its n sandboxes fit
 * (max_live); its deadline starts when its set-up does. The API (api.c)
 * reads and changes state under rl->mu and wakes the supervisor through an
 * eventfd; nothing it does blocks. */
#ifndef LIS_RL_CORE_H
#define LIS_RL_CORE_H

#include "agent.h"
#include "lis_batch.h"
#include "rl.h"
#include "rootfs.h"

#include <pthread.h>

#define RL_ID_LEN RL_INDEX_ID
#define RL_HOST_RESERVE (512ull << 20) /* memory admission leaves the host this much */
#define RL_EVENTS_MAX 4096
/* finished episodes kept in memory at most: past it the oldest groups whose
 * results are on disk and that hold no snapshot leave it (GET reads them back) */
#define RL_RESULTS_MEM 4096 /* events kept per episode (a step each, then reward, final) */

typedef enum { RP_QUEUED = 0, RP_SETUP, RP_RUNNING, RP_SCORING, RP_DONE } rl_phase;
typedef enum {
    RS_NONE = 0,
    RS_COMPLETED,
    RS_TRUNCATED,
    RS_TIMEOUT,
    RS_CANCELLED,
    RS_ENV_ERROR,
    RS_MODEL_ERROR
} rl_status;
typedef enum { RST_NONE = 0, RST_SETUP, RST_RUN, RST_REWARD } rl_stage;

const char *rl_phase_name(rl_phase p);
const char *rl_status_name(rl_status s);
const char *rl_stage_name(rl_stage s);

/* A task and what scores it, shared by a group and the branches of its
 * episodes (refcounted under rl->mu). */
typedef struct rl_spec {
    int refs;
    rl_request req;
    agent_prompts prompts;
    batch_scorer *scorer; /* NULL: no reward asked */
    char scorer_error[512];
} rl_spec;

/* One turn as the episode made it. */
typedef struct rl_turn {
    cJSON *step;   /* its trajectory step (effects included) */
    cJSON *tokens; /* the endpoint's {"prompt_ids", "ids", "logprobs"}, or NULL */
    char tokens_why[160];
    cJSON *tail; /* the history's change: from the message before this turn to the end */
    double llm_s;
    char weight_version[64];
} rl_turn;

typedef struct rl_event {
    long id;
    char name[8]; /* step, reward, final */
    cJSON *data;  /* NULL for a step: made from its turn when read (one copy of a turn) */
    long turn;    /* a step's turn; -2: the final event (the result); else -1 */
} rl_event;

/* A snapshot rl/ made (a group's set-up, an episode's files after a step):
 * removed once nothing wants it, children first (sup.c: rl_snaps_sweep). */
typedef struct rl_snap {
    char digest[72];
    char chain[4096];
    int refs;             /* its owner (a group, an episode), each sandbox on it, each
                           * branch that copied it; 0: removed at the next sweep */
    struct rl_snap *next; /* newest first */
} rl_snap;

struct rl_group;

typedef struct rl_ep {
    struct lis_rl *rl;
    char id[RL_ID_LEN];
    struct rl_group *g;
    int index;
    rl_phase phase;
    rl_status status;
    rl_stage stage;
    char error[600];
    int deleted;
    int stored; /* its result is in state_dir: it may leave memory (sup.c: evict) */
    /* times (lis_now), 0: not reached */
    double t_submit, t_setup0, t_run0, t_ready, t_run1, t_rew0, t_rew1;
    double deadline; /* absolute, 0: none */
    /* the run (its thread writes, under rl->mu) */
    rl_turn *turns;
    size_t nturns, capturns;
    size_t nmsg;     /* the history's length after the last turn */
    cJSON *messages; /* the whole history once it ran (freed once the result has it) */
    int ran;         /* the loop ran: out holds its outcome */
    agent_outcome out;
    char *answer;
    double reward;
    int rewarded;
    char reward_detail[512];
    /* control: stop_efd wakes the running loop; abort drops an LLM call */
    int stop_efd;
    volatile int abort;
    agent_stop stop_reason;
    char stop_why[256];
    int cancel_asked;
    /* its own sampling (a branch's) and seed */
    cJSON *sampling;
    long long seed;
    int has_seed;
    /* a branch: its parent's turns 0..at-1 copied in, its files the parent's snapshot */
    char parent_id[RL_ID_LEN];
    int at_step; /* -1: not a branch */
    cJSON *start_messages;
    rl_snap **snaps; /* snaps[k]: the files after turn k-1 (0: the set-up), or NULL */
    size_t nsnaps;
    /* events */
    rl_event *events;
    size_t nevents;
    long next_event;
    cJSON *result; /* once done */
    /* effects */
    int caps[3], alerts;
    lis_job *job;
    /* step mode (env.c): an env's run waits in its model call for the
     * trainer's action (cv, with rl->mu; an action, a stop, a job on its
     * sandbox done wake it). Its own, not the group's: a step of one env of a
     * group of 512 must not wake the other 511 (they would all take mu). */
    pthread_cond_t cv;
    lis_sandbox *sb;              /* its sandbox while the run has it, else NULL */
    int sb_users;                 /* reward and branch jobs on sb: the run waits for them */
    int env_waiting;              /* the run waits for an action */
    cJSON *env_action;            /* handed over, not yet taken */
    cJSON *env_obs;               /* the latest observation (messages) */
    int env_seen;                 /* the history's length at the last model call */
    long env_given, env_taken;    /* actions handed over, taken by the run */
    int env_over;                 /* the run ended */
    double env_touch;             /* the trainer's last call on it (lis_now) */
    long env_jobs, env_jobs_done; /* reward / branch jobs asked, finished */
    double env_reward;            /* the last POST reward's */
    char env_job_error[600];      /* the last job's error, "" when none */
    struct rl_ep *next;           /* all episodes, newest first */
} rl_ep;

typedef enum { RL_SETUP_PENDING = 0, RL_SETUP_READY, RL_SETUP_FAILED } rl_setup_state;

typedef struct rl_group {
    struct lis_rl *rl;
    rl_setup_state setup_state;
    pthread_cond_t cv; /* its runs wait on it for the set-up (with rl->mu) */
    char id[RL_ID_LEN];
    rl_spec *spec;
    rl_ep **eps;
    size_t n;
    rl_phase phase;
    rl_snap *setup;     /* the set-up's snapshot (NULL until made) */
    int setup_released; /* the group's own ref on it is dropped */
    char error[600];
    int cancel_asked;
    double t_submit, t_setup0, t_setup1;
    double deadline_s;
    char branch_of[RL_ID_LEN]; /* the parent episode's id for a branch's group, else "" */
    struct rl_group *next, *qnext;
} rl_group;

/* A finished result waiting to be written to state_dir. */
typedef struct rl_pending {
    struct rl_ep *e; /* marked stored once written */
    char id[RL_ID_LEN];
    cJSON *result;
    struct rl_pending *next;
} rl_pending;

typedef struct rl_endpoint {
    char *base_url, *model, *api_key;
    long outstanding;
} rl_endpoint;

struct lis_rl {
    lis_rl_opts o;
    char *state_dir, *data_dir, *default_image;
    pthread_mutex_t mu;
    rl_group *groups;
    rl_group *queue_head, *queue_tail;
    rl_ep *eps;
    size_t neps;
    cJSON *kept;  /* results only in state_dir (a restart, an eviction): id -> group id */
    size_t ndone; /* finished episodes in memory */
    /* counts */
    size_t queued, setting_up, live, scoring;
    /* inference: PUT rl/inference */
    rl_endpoint *endpoints;
    size_t nendpoints;
    unsigned long endpoints_epoch; /* changes with each swap */
    size_t endpoints_next;         /* where the next pick among equals starts */
    char weight_version[64];
    /* snapshots */
    rl_snap *snaps;
    /* the supervisor */
    lis_jobs *setup_pool, *run_pool, *reward_pool;
    int wake_efd, epfd;
    pthread_t sup;
    int sup_started, stopping;
    unsigned long seq;
    /* idempotency: request_id -> group id */
    cJSON *requests;
    uint64_t generation;
    rl_pending *to_store;
    rl_index by_id;  /* episodes (e-...) and groups (g-...) in memory */
    int index_short; /* a put failed (out of memory): lookups fall back to the lists */
};

/* sup.c */
int rl_sup_start(struct lis_rl *rl, lis_error *err);
void rl_sup_stop(struct lis_rl *rl);
void rl_wake(struct lis_rl *rl);   /* the supervisor looks again (any thread) */
void rl_notify(struct lis_rl *rl); /* serve/'s waiters look again (call without mu) */
void rl_snaps_sweep(struct lis_rl *rl);
unsigned long long rl_mem_available(unsigned long long *total); /* bytes, 0: unknown */
void rl_ep_finish(rl_ep *e); /* its result made and kept, its final event; under mu */
/* group.c: the set-up (a setup-pool job) and the group's queue */
void rl_group_setup_job(void *arg);
rl_group *rl_group_new(struct lis_rl *rl, rl_spec *spec, int n, lis_error *err);
void rl_spec_unref(rl_spec *s);
void rl_group_free(rl_group *g); /* and its episodes */
void rl_ep_drop(rl_ep *e);       /* its turns, events, result: a deleted episode's, under mu */
rl_spec *rl_spec_new(rl_request *req, lis_error *err);                /* takes req */
void rl_id_make(struct lis_rl *rl, char prefix, char out[RL_ID_LEN]); /* under mu */
void rl_sandbox_spec(const struct lis_rl *rl, const char *rootfs, lis_sandbox_spec *spec);
/* episode.c: the run job and what it records */
void rl_ep_run_job(void *arg);
void rl_ep_reward_job(void *arg);
void rl_ep_event(rl_ep *e, const char *name, cJSON *data); /* under mu; takes data */
void rl_ep_event_step(rl_ep *e, long turn);                /* under mu */
/* under mu: {"id", "event", "data"}; a step's data made from its turn, the
 * final's from the result (no copy of either is kept in the events) */
cJSON *rl_event_json(const rl_ep *e, const rl_event *v);
void rl_ep_stop(rl_ep *e, agent_stop why, const char *msg); /* under mu */
void rl_ep_count_caps(rl_ep *e, const cJSON *step);         /* a step's capability use, under mu */
int rl_spec_open_scorer(rl_spec *s, lis_error *err);        /* a python: scorer, on a pool thread */
/* api.c: the episodes API's routes, and what env_api.c shares of them (under mu) */
int rl_api_route(lis_rl *rl, const lis_rl_req *q, cJSON **reply);
/* {"message": one line} into *reply; returns status */
int rl_fail(cJSON **reply, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
rl_ep *rl_find_ep(lis_rl *rl, const char *id);
void rl_cancel_ep(lis_rl *rl, rl_ep *e);
/* POST groups (step 0) or envs (step 1): the group made (*made) or a failure */
int rl_post_group(lis_rl *rl, const cJSON *body, int step, rl_group **made, cJSON **reply);
int rl_ep_branch(lis_rl *rl, rl_ep *e, const cJSON *body, rl_group **made, cJSON **reply);
/* env.c: step mode's envs, the run's side */
/* the run's model call of an env: publishes messages, waits for the action */
int rl_env_llm(rl_ep *e, const cJSON *messages, llm_reply *r, lis_error *err);
void rl_env_turn(rl_ep *e, const cJSON *messages); /* under mu: the last observation */
/* under mu: 1 when e waits, untouched for its idle timeout; else *next lowered to it */
int rl_env_idle(const rl_ep *e, double now, double *next);
/* under mu: a reward (branch 0) or a snapshot of its files into e->snaps[nturns] on
 * the live sandbox of an env that waits; its number in memo (env_jobs_done reaches
 * it when done); -1 with err and its http_status */
int rl_env_job_start(lis_rl *rl, rl_ep *e, int branch, char *memo, lis_error *err);
/* result.c */
cJSON *rl_ep_result(const rl_ep *e); /* under mu: the result (full when done) */
cJSON *rl_ep_brief(const rl_ep *e);  /* {"episode_id", "status"} of one not done */
cJSON *rl_turn_json(const rl_turn *t, size_t k);

#endif
