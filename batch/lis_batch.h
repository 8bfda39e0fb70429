/* lis_batch.h - `lis batch`: many episodes of a benchmark task from one
 * process, each answer scored, with results that survive Ctrl-C, kill -9 and
 * a reboot, and --resume. The public header of batch/ (for cli/);
 * docs/batch.md says how it works.
 * original: `llm-in-sandbox benchmark`, scored as it scores (docs/batch-scoring.md). */
#ifndef LIS_BATCH_H
#define LIS_BATCH_H

#include "agent.h"

/* --max-creating's bound (also of the set-up pool that follows the machine) */
#define LIS_BATCH_MAX_CREATING 64

typedef struct lis_batch_opts {
    /* the rows */
    const char *task_dir;         /* --task DIR (original: benchmark/<task>/) */
    const char *tasks_file;       /* --tasks FILE (JSON array or JSONL) */
    const char *prompt_config;    /* --prompt-config YAML */
    long start_id, end_id;        /* rows [start, end) as Python slicing */
    int start_set, end_set;       /* the flags were given */
    int repeat;                   /* attempts per row (>= 1) */
    int fork_from_setup;          /* --fork-from-setup: a row's set-up runs once, its
                                  * repeats fork from a snapshot of it */
    int shard_index, shard_count; /* --shard K/N: the rows i (after start/end) with
                                   * i % N == K; count 0: every row (docs/scale-out.md) */
    /* where results go */
    const char *output_dir; /* a new <output_dir>/<YYYYmmdd_HHMMSS>_<task>/ */
    const char *resume_dir; /* or finish this one */
    int save_files;         /* export each episode's output dir to files/KEY/ */
    /* how much at once */
    int concurrency;        /* live episodes */
    int max_creating;       /* sandboxes being created at once; 0: following the machine
                             * (one per core, more while cores sit idle; run.c) */
    int max_commands;       /* commands running at once */
    int max_llm;            /* LLM requests in flight at once */
    int warm;               /* sandboxes made ahead for rows still waiting; -1: the larger of
                             * the creators' bound and a quarter of the concurrency (<= 64) */
    double episode_timeout; /* seconds per episode (original: 1800) */
    double drain_timeout;   /* after the first Ctrl-C; <= 0: until they finish */
    /* the episode */
    int mode_llm;          /* --mode llm: one plain call, no sandbox */
    long max_response_len; /* --mode llm: max_tokens (65536) */
    int max_steps;
    long max_token_limit;
    llm_config llm;
    const char *llm_name;
    const char *rootfs; /* resolved image directory */
    const char *image;  /* its name, for run.json */
    lis_net_mode net;
    uint64_t memory_bytes;
    uint64_t disk_bytes; /* --disk: each sandbox's writable budget (0: LIS_DEFAULT_DISK) */
    uint64_t export_max; /* --export-max: data --save-files writes per episode (0: disk_bytes) */
    int overcommit;      /* --overcommit: start although concurrency x (memory + disk)
                          * does not fit the host's memory (batch/capacity.c) */
    double cmd_timeout;  /* per command (120) */
    /* effects and rules (docs/monitoring.md): the monitor hub (NULL: --no-effects),
     * --policy, the proxy's domain rules */
    const agent_watch *watch;
    /* the live view (--live [ADDR]): NULL: nothing listens; "" : 127.0.0.1 on a
     * free port; else [127.0.0.1:]PORT */
    const char *live;
    /* scoring */
    const char *scorer;      /* --scorer (NULL: auto) */
    const llm_config *judge; /* --judge-model */
    /* how to run it again: the CLI's resolved flags (no secrets), kept in
     * run.json's "settings" for `lis batch --resume DIR` alone; may be NULL */
    const cJSON *settings;
    /* output */
    int quiet;
    int tty;   /* live status block instead of a line every 10 s */
    FILE *out; /* the summary (stdout) */
    FILE *err; /* progress and warnings (stderr) */
} lis_batch_opts;

void lis_batch_opts_default(lis_batch_opts *o);

typedef struct lis_batch_summary {
    char dir[4096]; /* the run's directory */
    size_t rows, total, done, errors, cancelled;
    double mean_score;
    int has_mean;      /* some row finished: mean_score is its mean */
    int interrupted;   /* stopped by Ctrl-C / SIGTERM */
    int reached;       /* some LLM request got its reply */
    char status[16];   /* complete, partial or stopped (run.json's status) */
    char finish[8400]; /* the command that finishes the run; "" when complete */
} lis_batch_summary;

/* Runs the batch. Returns 0 when every episode got a row, 1 when some were
 * cancelled (Ctrl-C: sum->finish finishes them), -1 with err when the run
 * could not start or stopped at once (a bad task, 401, an unreachable
 * endpoint...; sum->finish set when it started). run.json and results.json
 * say which (docs/batch-files.md). */
int lis_batch_run(lis_ctx *ctx, const lis_batch_opts *o, lis_batch_summary *sum, lis_error *err);

/* `lis batch report DIR`: (re)writes results.json and trajectory.json and
 * prints the summary table to out; by "domain": the capability use of the
 * episodes by the rows' domain instead (docs/monitoring.md), NULL: none. */
int lis_batch_report(const char *dir, const char *by, FILE *out, lis_error *err);

/* `lis batch ctl DIR status|pause|resume|stop [ID...]`: asks the batch
 * running on DIR through its control socket (DIR/ctl.sock, mode 0600) and
 * prints the answer to out. ids: the episodes (ID or ID@K), none: all
 * (stop without ids drains the run as Ctrl-C does). */
int lis_batch_ctl(const char *dir, const char *verb, const char *const *ids, size_t n, FILE *out,
                  lis_error *err);

/* `lis batch rescore DIR [--scorer S]`: the saved answers scored again by S
 * (NULL: the run's own scorer), the old scores kept beside (rescore.c);
 * -1 also when every row's scorer failed. */
int lis_batch_rescore(const char *dir, const char *scorer, FILE *out, lis_error *err);

/* `lis batch judge DIR`: LLM-judges the rows of DIR, then rewrites the report. */
int lis_batch_judge(const char *dir, const llm_config *judge, int concurrency, FILE *log, FILE *out,
                    lis_error *err);

/* Sharding (batch/shard.c, docs/scale-out.md). The shard of this process from
 * --shard K/N (flag "K/N"), --shard auto without --shards (flag "auto": K and N
 * from a Slurm job array, K = SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN, over
 * the step, N = SLURM_ARRAY_TASK_COUNT) or --shards N, with or without auto
 * (shards > 0: K is SLURM_ARRAY_TASK_ID as it is, or Kubernetes'
 * JOB_COMPLETION_INDEX); flag NULL and shards 0: no sharding (*count = 0). get
 * is getenv, or a stand-in for tests. */
typedef char *(*lis_batch_getenv)(const char *name);
int lis_batch_shard_resolve(const char *flag, int shards, lis_batch_getenv get, int *index,
                            int *count, lis_error *err);

/* `lis batch merge OUT DIR...`: joins the directories of the N shards of one
 * run into OUT, the files of one unsharded run (run.json without the shard,
 * results.jsonl, trajectories/, logs/, files/, judge.jsonl, then results.json
 * and trajectory.json), and prints the summary to out. Refuses shards of
 * different runs, a shard given twice, missing shards (named), incomplete or
 * running shards and an id in two shards, before OUT is touched. */
int lis_batch_merge(const char *out_dir, const char *const *dirs, size_t n, FILE *out,
                    lis_error *err);

/* `lis report DIR`: writes DIR/report.html and DIR/report/ (one static page,
 * docs/report.md) for the output directory of a lis batch (results.jsonl)
 * or of one lis run (trajectory.json); path (may be NULL) gets the page's. */
int lis_report_html(const char *dir, char *path, size_t len, lis_error *err);

/* ---- scorers (score.c): the answers of lis batch's rows, and rl/'s rewards ---- */

typedef struct batch_scorer batch_scorer;

/* original: one of its reward.py files, which a built-in scorer stands for. */
typedef struct batch_original {
    const char *task, *builtin, *sha256;
} batch_original;

typedef struct batch_scorer_opts {
    const char *task_name;   /* names the built-in in hints (demo, chem, biomed, math) */
    const char *task_dir;    /* reward.py, judge.py, vanilla_llm_prompt.py live here */
    const char *scorer;      /* --scorer: NULL/"auto", "python", "builtin:NAME", or a
                                * command (a JSON row on stdin, a number on stdout) */
    const char *python;      /* NULL: python3 from PATH */
    const llm_config *judge; /* --judge-model/--judge-base-url; NULL: no judge */
    double timeout;          /* seconds a command or reward.py may take per answer (0: 60
                              * and 300); past it the answer scores 0 with the error */
    FILE *log;               /* one line saying which scorer is used; NULL: silent */
    /* the files a reward.py is matched against (tests); NULL: score.c's
     * ORIGINALS, the four rule-based tasks */
    const batch_original *originals;
    size_t noriginals;
} batch_scorer_opts;

int batch_scorer_open(const batch_scorer_opts *o, batch_scorer **out, lis_error *err);
/* Thread-safe. row is the task row (ground_truth and every other field are
 * passed on; original: compute_score(agent_answer, ground_truth, **row)). */
int batch_scorer_score(batch_scorer *s, const char *answer, const cJSON *row, double *score,
                       lis_error *err);
/* "builtin:letter", "python:reward.py", "cmd:...", "judge:MODEL" */
const char *batch_scorer_name(const batch_scorer *s);
void batch_scorer_close(batch_scorer *s);

#endif
