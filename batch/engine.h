/* engine.h - batch/ internal: one batch run and its episodes, shared by the
 * files of the event loop (sched.c), the blocking jobs (jobs.c), the status
 * display (progress.c) and the front (run.c).
 *
 * Design: one thread runs an epoll loop that owns every episode. It holds
 * one curl multi handle for all LLM requests (their sockets are in the same
 * epoll set), one pollable fd per running command (lis_exec_start), a
 * signalfd, and the eventfds of two small fixed thread pools: `setup`
 * (creating sandboxes: clone3, mounts, the input files) and `misc` (the
 * editor, reading the answer, scoring, destroying, writing the row). So N
 * episodes cost N small structs, not N threads, and nothing that can block
 * runs on the loop's thread. The episode logic itself is agent/'s engine
 * (agent_ep), the same one `lis run` drives. */
#ifndef LIS_BATCH_ENGINE_H
#define LIS_BATCH_ENGINE_H

#include "lis_batch.h"
#include "results.h"
#include "score.h"
#include "task.h"

#include <pthread.h>

typedef enum { EP_QUEUED = 0, EP_LIVE, EP_FINISHING, EP_DONE } bep_phase;
typedef enum { SB_NONE = 0, SB_CREATING, SB_READY, SB_FAILED } bep_sandbox;
typedef enum { LQ_NONE = 0, LQ_WAITING, LQ_FLIGHT, LQ_RETRY } bep_llm;

/* A row's reason: the agent's stop reasons (agent.h: agent_stop, the same
 * numbers, so an episode's reason is carried over without a string), then
 * what only lis batch can say. */
typedef enum batch_reason {
    R_SUBMITTED = AGENT_STOP_SUBMIT,
    R_MAX_STEPS = AGENT_STOP_MAX_STEPS,
    R_TOKEN_LIMIT = AGENT_STOP_TOKEN_LIMIT,
    R_DEADLINE = AGENT_STOP_DEADLINE,
    R_LLM_ERROR = AGENT_STOP_LLM_ERROR,
    R_SANDBOX_ERROR = AGENT_STOP_SANDBOX_ERROR,
    R_CANCELLED = AGENT_STOP_CANCELLED,
    R_POLICY = AGENT_STOP_POLICY,
    R_PAUSE_FAILED = AGENT_STOP_PAUSE_FAILED,
    R_SCORER_ERROR = AGENT_STOPS,
    R_INPUT_ERROR,
    R_OTHER,
} batch_reason;
#define BATCH_REASONS (R_OTHER + 1)
/* As results.jsonl's "reason" writes it: "submitted", "max_steps", ... */
const char *batch_reason_name(batch_reason r);

/* What becomes of an episode's row. */
typedef enum bep_row {
    ROW_WRITE,        /* written to results.jsonl */
    ROW_CANCELLED,    /* cancelled: no row, --resume runs it again */
    ROW_WRITE_FAILED, /* the append failed: the run stops */
} bep_row;

/* --fork-from-setup: the state of a row's shared set-up. */
typedef enum bgroup_state {
    G_NOT_MADE,
    G_MADE,   /* the snapshot exists */
    G_FAILED, /* its error is in bgroup.error */
    G_GONE,   /* removed after the last repeat */
} bgroup_state;

struct brun;

/* What the live view shows of a running episode (effects.c, on the loop's
 * thread): its last step, the command, that step's effects in short. */
typedef struct bfx_live {
    int step;      /* steps recorded */
    char tool[32]; /* the last step's tool */
    char cmd[256]; /* its command (cut) */
    cJSON *fx;     /* its effects in short (effects.c: bfx_brief), owned */
    int alerts;    /* alerts so far */
    int caps[3];   /* steps that used external, file, computation */
} bfx_live;

/* The run's latest alerts for the live view: a ring of BFX_ALERTS. */
#define BFX_ALERTS 256
typedef struct bfx_alert {
    char key[128]; /* the episode (ID or ID@K, cut) */
    int step;
    char rule[64], action[8], what[200];
    double t; /* lis_wallclock */
} bfx_alert;

/* --fork-from-setup: the repeats of one row share one set-up. The first of
 * them to be set up makes a sandbox, prepares it (directories, git init,
 * the row's input files) and snapshots it; every repeat then runs on a
 * sandbox of that snapshot. The snapshot image goes when the last repeat of
 * this run ends. */
typedef struct bgroup {
    pthread_mutex_t mu;
    bgroup_state state;
    char chain[4096]; /* the snapshot's chain of layers (lis_store_resolve) */
    char digest[72];
    char error[512];
    size_t pending; /* episodes of this run still to end */
} bgroup;

/* The run's set-up template (docs/batch.md): the task's directories and
 * `git init`, made once by the image's own tools in a sandbox and snapshot;
 * every sandbox of the run starts on it, so none execs anything to be
 * ready. Made by the first set-up job that needs it (the others wait on
 * mu); its own image (its /etc/hosts names the sandbox it was made in), so
 * removing it at the end of the run touches no other run. */
typedef enum {
    TMPL_NONE = 0, /* not made yet */
    TMPL_MADE,     /* chain: start on it */
    TMPL_FAILED,   /* the task's set-up fails in this image: every row's error */
    TMPL_UNUSED    /* it could not be snapshot: each sandbox runs the set-up itself */
} btemplate_state;

typedef struct btemplate {
    pthread_mutex_t mu;
    btemplate_state state;
    char chain[4096]; /* TMPL_MADE: the rootfs to start on */
    char digest[72];
    char error[512]; /* TMPL_FAILED: the rows' error; TMPL_UNUSED: why */
    double seconds;  /* what making it took */
} btemplate;

typedef struct bep {
    struct brun *run;
    size_t index;
    const batch_row *row;
    int attempt;
    bgroup *group; /* --fork-from-setup, else NULL */
    bep_phase phase;
    double t0, deadline;
    agent_opts opts; /* the run's, with this row's query and log */
    FILE *log;       /* memstream: the episode's console, for logs/KEY.txt */
    char *log_buf;
    size_t log_len;
    agent_ep *ep; /* NULL in --mode llm */
    /* the sandbox */
    bep_sandbox sbs;
    lis_sandbox *sb;
    agent_tool_env env;
    char setup_error[512];
    int wants_tool; /* a tool call waits for the sandbox */
    /* the LLM call */
    bep_llm lq;
    llm_call *call;
    double retry_at;
    cJSON *plain_msgs; /* --mode llm: the one user message */
    /* the command or job in flight */
    lis_proc *proc;
    lis_proc *reaping; /* a killed command the loop could not watch (bjob_reap) */
    lis_error cmd_err; /* why */
    agent_bash bash;
    char *bash_printed;
    double cmd_t0, kill_at;
    int in_job;
    int wants_cmd;
    agent_tool_out tout;
    /* stopping early */
    int stopped;
    agent_stop stop_reason;
    char stop_error[256];
    /* the result */
    char *answer;
    cJSON *traj;
    agent_outcome out;
    int decided; /* reason is set (by the loop or the end of the episode) */
    batch_reason reason;
    char error[600];
    double score;
    bep_row row_fate;
    uint64_t memory_peak, oom_kills, proxy_bytes;
    struct bep *next_wait; /* in one of the run's wait lists */
    /* effects (effects.c, ctl.c): the monitor is env.mon; a pause rule or
     * lis batch ctl froze the sandbox: nothing new starts until resumed */
    int paused, held, pausing; /* held: drive() waited; pausing: a (un)freeze job in flight */
    int frozen_asked;          /* its freeze was started (ctl.c) */
    double paused_at;
    char pause_why[96];
    char freeze_err[256]; /* a pause that failed: its job writes it, freeze_done reads it */
    bfx_live live;
    /* a stop rule that fired between steps (ctl.c): the rule and the step it
     * is charged to (the last one, 0: the set-up); the finish job lists the
     * effects that fired it (effects.c: bfx_between) */
    char between_rule[64];
    int between_step;
} bep;

/* A sandbox made ahead for the next row to be admitted (the warm pool). */
typedef struct bspare {
    struct brun *run;
    lis_sandbox *sb;
    agent_tool_env env;
    char error[512];
} bspare;

typedef struct bep_list {
    bep *head, *tail;
} bep_list;

typedef struct brun {
    const lis_batch_opts *o;
    lis_ctx *ctx;
    batch_task *task;
    batch_out *out;
    batch_scorer *scorer;
    llm_client *llm;
    lis_jobs *setup, *misc;
    CURLM *multi;
    int epfd, sigfd;
    double curl_due; /* when curl wants its timeout action, -1: never */
    lis_sandbox_spec spec;
    agent_opts base;
    bep *eps;       /* the episodes still to run (no row yet) */
    bgroup *groups; /* --fork-from-setup: one per row of the task */
    btemplate tmpl; /* the set-up every sandbox starts on */
    size_t neps, next;
    size_t rows, total, already; /* rows of the task, episodes in all, done before (resume) */
    /* in flight */
    size_t live, creating, commands, llm_inflight, retrying;
    /* set-ups at once (sched.c: creators_adjust): one per core to start with,
     * more while set-ups wait and the host's cores sit idle, never above
     * creators_max (the setup pool's threads); fixed by --max-creating */
    size_t creators, creators_max, cores;
    int creators_auto;
    uint64_t cpu_busy, cpu_total; /* the host's CPU at the last adjustment */
    /* the warm pool: sandboxes made ahead while rows wait for admission */
    bspare *spares[64];
    size_t nspares, spares_creating, warm, spares_made, spares_used;
    bep_list llm_wait, cmd_wait, setup_wait;
    /* done so far (this process) */
    size_t done, errors, scored;
    size_t by_reason[BATCH_REASONS];
    double score_sum;
    long tokens_in, tokens_out, replies;
    double llm_seconds, tool_seconds;
    /* stopping */
    int draining, cancelling, fatal, signals, first_signal;
    /* lis batch ctl stop asked: the SIGINT it sends itself is that, not Ctrl-C;
     * first_by_ctl: the run's first stop came from it */
    int ctl_stops, first_by_ctl;
    double drain_deadline;
    char fatal_reason[32]; /* run.json's status_reason: http_404, unreachable, ... */
    char fatal_msg[512];
    char scorer_error[256]; /* the first row's scorer error (run.c: every row failed?) */
    int llm_ok;             /* some request has succeeded */
    char write_error[512];
    double t0, last_sweep, last_progress;
    int progress_lines;                /* lines of the live block on the terminal */
    size_t pause_changes;              /* pauses and resumes so far (ctl.c) */
    size_t shown_pauses, shown_alerts; /* as last shown (progress.c) */
    /* the commands lis prints to finish the run (run.c) */
    char lis[4096];
    char resume_cmd[8400], merge_cmd[8400];
    /* effects: the latest alerts (a ring), the live view and the control socket (live.c) */
    bfx_alert *alerts;
    size_t nalerts;    /* alerts seen in all; the ring holds the last BFX_ALERTS */
    int paused_all;    /* lis batch ctl pause without ids: episodes admitted later pause too */
    struct blive *web; /* live.c */
} brun;

/* jobs.c: the blocking halves, run on a worker thread. */
void bjob_setup(void *arg);  /* bep: create + prepare the sandbox (unless it has a spare),
                                  * write the row's input files */
void bjob_spare(void *arg);  /* bspare: create + prepare a sandbox for a row to come */
void bjob_tool(void *arg);   /* bep: a tool other than a command */
void bjob_prompt(void *arg); /* bep: --mode llm prompt */
void bjob_finish(void *arg); /* bep: answer, stats, destroy, score, row */
void bjob_fx_end(void *arg); /* bep: a command's step closed (its file scan) */
void bjob_reap(void *arg);   /* bep: waits for a killed command the loop could not watch */

/* capacity.c: RLIMIT_NOFILE raised, host limits checked for n episodes */
int batch_capacity_check(int n, int sandboxes, FILE *warn, lis_error *err);
/* n sandboxes of memory + disk bytes each (LIS_UNLIMITED: unbounded) against
 * the host's available memory and swap: -1 with the numbers and the fix when
 * they do not fit, unless overcommit (then a warning). */
int batch_memory_check(int n, uint64_t memory, uint64_t disk, int overcommit, FILE *warn,
                       lis_error *err);

/* progress.c */
void bprog_tick(brun *r, int force);
void bprog_clear(brun *r);
/* " (N paused: WHO COUNT, ...)" or "" (nothing paused); N in *np */
void bprog_paused(const brun *r, char *b, size_t n, size_t *np);
void bprog_summary(FILE *f, const cJSON *results);

/* epoll tags of the loop's set: a kind in the top byte, a value (an fd, an
 * episode's index) below */
enum { K_SIG = 1, K_SETUP, K_MISC, K_CURL, K_PROC, K_MON, K_HTTP };
#define TAG(k, v) (((uint64_t)(k) << 56) | (uint64_t)(v))
#define TAG_KIND(t) ((int)((t) >> 56))
#define TAG_VAL(t) ((t) & ((1ull << 56) - 1))

/* sched.c: what the loop does with each event, on the loop's thread */
void bsched_admit(brun *r);           /* starts episodes while the bounds allow */
void bsched_creators_adjust(brun *r); /* once a tick: set-ups at once follow the host's idle CPU */
void bsched_llm_start(bep *e);
void bsched_llm_reap(brun *r); /* curl's finished transfers */
void bsched_cmd_event(brun *r, bep *e);
void bsched_stop(bep *e, agent_stop reason, const char *error);
void bsched_cancel_all(brun *r, agent_stop reason, const char *error);
void bsched_forget(brun *r, int fd); /* out of the epoll set */
void bsched_drive(bep *e);           /* the engine's next need (a resumed episode) */
void bsched_try_finish(bep *e);      /* ends it once nothing of it is in flight */

/* effects.c: the effects side of an episode (on the loop's thread unless said) */
void bfx_watch(bep *e);                         /* its monitor's fd into the loop's set */
int bfx_held(bep *e);                           /* paused: drive() waits (then resume drives) */
void bfx_on_step(void *arg, const cJSON *step); /* agent_opts.on_step: the live view */
void bfx_release(bep *e);                       /* what the live view kept */
/* One alert into the run's latest (the live view, lis batch ctl status). */
void bfx_alert_push(bep *e, int step, const char *rule, const char *action, const char *what);
/* The results row's effects fields from the trajectory (any thread): domain,
 * capability, alerts, alert_list, stop_rule (docs/batch-files.md). */
void bfx_row(cJSON *row, const cJSON *task_row, const cJSON *traj);
/* On the finish job, before the sandbox goes: what happened since the last
 * step (the exec that fired a between-steps stop rule) into the trajectory's
 * metadata.between_steps, the rule into metadata.stop_rule. */
void bfx_between(bep *e);
/* run.json's keys of the policy and the domain rules (they change results) */
void bfx_config(cJSON *c, const lis_batch_opts *o);
/* ctl.c: live actions and lis batch ctl's commands (on the loop's thread) */
void bctl_monitor_event(brun *r, bep *e);
void bctl_pause(bep *e, const char *why);
void bctl_resume(bep *e);
void bctl_tick(brun *r); /* the sweep: freezes the pauses that fired at a step's end */
cJSON *bctl_status(brun *r);
/* verb: pause, resume or stop; ids: a JSON array of ID or ID@K (empty: all) */
cJSON *bctl_command(brun *r, const char *verb, const cJSON *ids);
/* live.c: the control socket DIR/ctl.sock and the --live view, on the loop */
int blive_check(const char *live, lis_error *err); /* --live's ADDR, before anything starts */
int blive_open(brun *r, lis_error *err);
void blive_event(brun *r, uint64_t which); /* a K_HTTP fd is ready */
void blive_tick(brun *r);                  /* libmicrohttpd's timeouts */
void blive_close(brun *r);

/* loop.c: the loop itself. Signals are blocked (and read from a signalfd)
 * before any thread starts, so that no worker or proxy thread takes a Ctrl-C */
#include <signal.h>
void bsched_block_signals(sigset_t *old);
void bsched_restore_signals(const sigset_t *old);
int bsched_run(brun *r, lis_error *err);

#endif
