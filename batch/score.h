/* score.h - batch/ internal: scoring answers by the task's rules (original:
 * its reward.py's compute_score, its judge.py). Implemented in score_*.c
 * (built-in C scorers, the resident Python worker running the task's own
 * reward.py, --scorer CMD, the LLM judge). */
#ifndef LIS_BATCH_SCORE_H
#define LIS_BATCH_SCORE_H

#include "lis_batch.h"

/* batch_scorer, its options, open, score and name: lis_batch.h (rl/ scores with them) */
/* The sha256 (hex) of what defines the scorer: the task's reward.py (also
 * when a built-in stands in for it), the file of ORIGINALS a built-in
 * given by --scorer stands for, the --scorer command's text, the task's
 * judge.py; "" when there is none. */
const char *batch_scorer_sha256(const batch_scorer *s);
/* That file, in words: a path, or what a built-in is. */
const char *batch_scorer_source(const batch_scorer *s);
/* sha256 of a file (at most 16 MiB) or of a text, as 64 hex digits. */
int batch_sha256_file(const char *path, char out[65], lis_error *err);
void batch_sha256_text(const char *text, size_t len, char out[65]);
/* --mode llm: vanilla_llm_prompt.py's create_prompt(row) when the task has
 * it, else the problem statement (malloc'ed). Thread-safe. */
char *batch_scorer_prompt(batch_scorer *s, const cJSON *row, lis_error *err);

/* `lis batch judge DIR`: asks the judge model (original: judge.py's prompt,
 * CORRECT/INCORRECT parsing) about every row of DIR/results.jsonl that has
 * no line in DIR/judge.jsonl yet, at most `concurrency` at once, appending
 * {id, attempt, score, verdict} lines to judge.jsonl. */
int batch_judge_dir(const char *dir, const llm_config *judge, int concurrency, FILE *log,
                    lis_error *err);

/* ---- the built-in scorers (score_text.c, score_math.c): pure functions,
 * exposed for the tests. Each returns 1.0 or 0.0 (original: its reward.py). */

/* demo: empty answer or ground truth -> 0; else Python strip()+lower() equality. */
double score_match(const char *answer, const char *ground_truth);
/* chem/biomed: the letter the cascade extracts from text ("" when none) into
 * out (UTF-8, at most 4 bytes + NUL). */
void score_letter_extract(const char *text, char out[8]);
double score_letter(const char *answer, const char *ground_truth);
/* The content of the last \boxed{...} (balanced braces, stripped), or the
 * whole text stripped when there is none or it is unbalanced (malloc'ed). */
char *score_extract_boxed(const char *text);
/* math: the last \boxed{} of the answer against the ground truth, compared
 * as numbers (integers, decimals, fractions, percentages) or else as
 * normalised LaTeX text; see docs/batch-scoring.md for what it covers. */
double score_math(const char *answer, const char *ground_truth);
/* The normalised LaTeX text score_math compares when it is not a number (malloc'ed). */
char *score_math_normalize(const char *latex);

/* original: judge.py's prompt and verdict parsing (score_judge.c). */
char *score_judge_prompt(const char *question, const char *ground_truth, const char *answer);
/* "CORRECT", "INCORRECT" or "UNKNOWN": the last of CORRECT/INCORRECT in the reply. */
const char *score_judge_verdict(const char *reply);

#endif
