/* results.h - batch/ internal: the output directory of a batch run, written
 * so that it survives Ctrl-C, kill -9 and a reboot. Implemented in results.c.
 *
 * Layout of DIR:
 *   run.json            what the run is (task, model, flags that change results);
 *                       --resume refuses a different one
 *   results.jsonl       one row per finished episode, appended + fsync'ed once;
 *                       the only source of truth for "done"
 *   trajectories/KEY.json   each episode's trajectory (written before its row)
 *   logs/KEY.txt        per-problem log, original: logs/<id>.txt (written before its row)
 *   results.json, trajectory.json   original: its files, made from the above at the
 *                       end and by `lis batch report DIR`
 * KEY is the row id for attempt 0 and "ID@K" for attempt K > 0 (--repeat),
 * made safe for a file name.
 *
 * A row of results.jsonl (written by batch/run.c): id, attempt, score,
 * answer, ground_truth, problem_statement, reason (submitted | max_steps |
 * token_limit | deadline | llm_error | sandbox_error | scorer_error |
 * input_error | cancelled), error, steps, prompt_tokens, completion_tokens,
 * llm_seconds, tool_seconds, wall_seconds, memory_peak, oom_kills,
 * proxy_bytes, scorer. judge.jsonl (from `lis batch judge DIR`) holds id,
 * attempt, score, verdict per judged episode: its score replaces the row's in
 * the files made from the rows. */
#ifndef LIS_BATCH_RESULTS_H
#define LIS_BATCH_RESULTS_H

#include "agent.h"

typedef struct batch_out batch_out;

/* Creates DIR (or, with resume, opens it: run.json must equal config, else a
 * one-line refusal naming the first differing key), loads the rows already
 * in results.jsonl (a torn last line from a crash is cut off). config is
 * compared whole, so it holds only what changes results (no start time, no
 * --concurrency). A new run refuses a DIR that holds a run.json. DIR is
 * locked (flock) while open: a second batch on it is refused; the lock goes
 * with the process, also on kill -9.
 * A row whose reason is "cancelled" does not count as done: has() is false
 * for it, count() leaves it out, a later append of its (id, attempt) is
 * accepted and replaces it in the report. */
int batch_out_open(const char *dir, const cJSON *config, int resume, batch_out **out,
                   lis_error *err);
/* The episode (id, attempt) already has a row. */
int batch_out_has(const batch_out *o, const char *id, int attempt);
size_t batch_out_count(const batch_out *o);
/* Thread-safe. Writes trajectory (may be NULL) and log_text (may be NULL)
 * first, then appends row as one line and fsyncs; a row for an (id,
 * attempt) that has one already is refused (never double-counted). row must
 * hold "id" and "attempt"; the other fields are the caller's. */
int batch_out_append(batch_out *o, const cJSON *row, const cJSON *trajectory, const char *log_text,
                     lis_error *err);
const char *batch_out_dir(const batch_out *o);

/* leftovers.c: the set-up template noted in DIR/template.json while it
 * exists; what a dead run left (ctl.sock, live.url, the template) removed */
void bleft_template_note(const char *dir, const char *data_dir, const char *digest);
void bleft_template_done(const char *dir);
void bleft_remove(int dfd);
/* The KEY of (id, attempt): the id with every byte but [A-Za-z0-9_.-] and
 * UTF-8 (and a leading '.') escaped as %XX, then "@K" for K > 0, so two
 * episodes never share a file; a KEY over 200 bytes becomes a prefix, '~'
 * and 128 bits of hash. malloc'ed (NULL when out of memory). */
char *batch_out_key(const char *id, int attempt);
void batch_out_close(batch_out *o);

/* What a run says about itself, in run.json (as it goes) and results.json:
 * complete (every row asked for has its row), partial (some rows not run:
 * Ctrl-C, SIGTERM, a kill, a shard of the task), stopped (the run stopped
 * at once: 401/403/404, an unreachable endpoint, a write that failed), or
 * running. status.c. */
typedef enum batch_status {
    BS_RUNNING,
    BS_COMPLETE,
    BS_PARTIAL,
    BS_STOPPED,
    BS_FAILED /* every row ran, none could be scored */
} batch_status;
const char *batch_status_name(batch_status s);
typedef struct batch_state {
    batch_status status;
    const char *reason;  /* a word: interrupted, terminated, killed, shard, http_404,
                          * unreachable, write_failed...; "" when complete */
    const char *message; /* one line for a person */
    size_t rows_asked;   /* the episodes this run (or shard) was asked for */
    size_t rows_done;    /* those with a row */
    const char *finish;  /* the command that finishes the run; NULL when complete */
    const char *lis;     /* the lis that ran it */
    long pid;            /* while running */
} batch_state;
/* Puts st's keys into obj (run.json or results.json), replacing old ones. */
void batch_state_json(cJSON *obj, const batch_state *st);
/* Rewrites DIR/run.json with st (write then rename). */
int batch_out_set_state(batch_out *o, const batch_state *st, lis_error *err);

/* Writes results.json + trajectory.json from DIR's run.json, results.jsonl
 * and trajectories/; elapsed (seconds, <0: unknown) goes to
 * elapsed_time_seconds. summary (may be NULL) receives the results.json
 * object (the caller's to cJSON_Delete). */
int batch_report_write(const char *dir, double elapsed, cJSON **summary, lis_error *err);
/* A run whose run.json says "running" on this host but whose process is gone
 * (kill -9, a crash): its files repaired as batch_report_write does (partial,
 * killed) and its leftovers removed. 1: repaired, 0: nothing to do (it ended
 * properly, or runs), -1: err. */
int batch_repair_if_dead(const char *dir, lis_error *err);

/* capability.c: the steps that used each meta-capability, and the alerts,
 * summed over rows: bcap_add each row that counts to bcap_new's object, then
 * bcap_finish puts it into results.json's object as "capability" (with
 * "by_domain"), or drops it when no row had effects. bcap_print prints it
 * (`lis batch report --by domain`). */
cJSON *bcap_new(void);
void bcap_add(cJSON *acc, const cJSON *row);
void bcap_finish(cJSON *results, cJSON *acc);
void bcap_print(FILE *f, const cJSON *results);

#endif
