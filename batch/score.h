/* score.h - batch/ internal: scoring answers as the original does.
 * Implemented in score_*.c (built-in C scorers, the resident Python worker
 * running the task's own reward.py, --scorer CMD, the LLM judge). */
#ifndef LIS_BATCH_SCORE_H
#define LIS_BATCH_SCORE_H

#include "agent.h"

typedef struct batch_scorer batch_scorer;

typedef struct batch_scorer_opts {
    const char *task_name;     /* demo | chem | biomed | math pick a built-in scorer */
    const char *task_dir;      /* reward.py, judge.py, vanilla_llm_prompt.py live here */
    const char *scorer;        /* --scorer: NULL/"auto", "python", "builtin:NAME", or a
                                * command (a JSON row on stdin, a number on stdout) */
    const char *python;        /* NULL: python3 from PATH */
    const llm_config *judge;   /* --judge-model/--judge-base-url; NULL: no judge */
    FILE *log;                 /* one line saying which scorer is used; NULL: silent */
} batch_scorer_opts;

int batch_scorer_open(const batch_scorer_opts *o, batch_scorer **out, lis_error *err);
/* Thread-safe. row is the task row (ground_truth and every other field are
 * passed on as the original's compute_score(agent_answer, ground_truth, **row)). */
int batch_scorer_score(batch_scorer *s, const char *answer, const cJSON *row, double *score,
                       lis_error *err);
/* "builtin:letter", "python:reward.py", "cmd:...", "judge:MODEL" */
const char *batch_scorer_name(const batch_scorer *s);
/* --mode llm: vanilla_llm_prompt.py's create_prompt(row) when the task has
 * it, else the problem statement (malloc'ed). Thread-safe. */
char *batch_scorer_prompt(batch_scorer *s, const cJSON *row, lis_error *err);
void batch_scorer_close(batch_scorer *s);

/* `lis batch judge DIR`: asks the judge model (the original's judge prompt,
 * CORRECT/INCORRECT parsing) about every row of DIR/results.jsonl that has
 * no line in DIR/judge.jsonl yet, at most `concurrency` at once, appending
 * {id, attempt, score, verdict} lines to judge.jsonl. */
int batch_judge_dir(const char *dir, const llm_config *judge, int concurrency, FILE *log,
                    lis_error *err);

#endif
