/* score_worker.h - batch/ internal: the resident Python worker running a
 * task's reward.py / vanilla_llm_prompt.py (score_worker.c). Thread-safe. */
#ifndef LIS_BATCH_SCORE_WORKER_H
#define LIS_BATCH_SCORE_WORKER_H

#include "score.h"

typedef struct score_worker score_worker;

/* Starts python (NULL: python3 from PATH) on task_dir and waits until it has
 * imported the task's modules; an import error is returned here. */
int score_worker_open(const char *python, const char *task_dir, score_worker **out, lis_error *err);
/* Each call's deadline (default 300 s); past it the worker is killed and the call fails. */
void score_worker_set_timeout(score_worker *w, double seconds);
/* "score": the task has compute_score; "prompt": it has create_prompt */
int score_worker_has(const score_worker *w, const char *what);
/* compute_score(answer, row.ground_truth, **row_without_ground_truth). An
 * exception there, a dead or hung worker: -1 with the reason (the worker
 * is restarted for the next call). */
int score_worker_score(score_worker *w, const char *answer, const cJSON *row, double *score,
                       lis_error *err);
/* create_prompt(row), or row.problem_statement (malloc'ed). */
char *score_worker_prompt(score_worker *w, const cJSON *row, lis_error *err);
void score_worker_close(score_worker *w);
/* The embedded worker script (for tests and docs). */
const char *score_worker_script(void);

#endif
