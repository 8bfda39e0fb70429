/* score_judge.h - batch/ internal: one judge question (score_judge.c) and
 * --scorer CMD (score_cmd.c), for score.c. */
#ifndef LIS_BATCH_SCORE_JUDGE_H
#define LIS_BATCH_SCORE_JUDGE_H

#include "score.h"

/* Asks the judge about one answer: score 1.0 for CORRECT, else 0.0. */
int score_judge_ask(llm_client *c, const char *question, const cJSON *ground_truth,
                    const char *answer, double *score, char verdict[16], lis_error *err);
/* A JSON value as text for a prompt (a string as is), malloc'ed. */
char *score_judge_text(const cJSON *v);

#define SCORE_CMD_TIMEOUT 60.0
int score_cmd_run(const char *cmd, const char *answer, const cJSON *row, double timeout,
                  double *score, lis_error *err);

#endif
