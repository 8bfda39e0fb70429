/* results_io.h - batch/ internal to results.c, results_report.c, report.c and shard.c:
 * the pieces the writer of the output directory, the report and merge use. */
#ifndef LIS_BATCH_RESULTS_IO_H
#define LIS_BATCH_RESULTS_IO_H

#include "results.h"
#include "task.h" /* BATCH_ID_MAX */

#include <stdint.h>
#include <sys/types.h>

enum { ST_FREE = 0, ST_PENDING, ST_DONE, ST_CANCELLED };

/* (id, attempt) -> state, open addressing; keys are "ATTEMPT:ID". */
typedef struct kslot {
    char *key;
    int state;
    size_t line; /* in results.jsonl (messages); 0 while pending */
} kslot;

typedef struct kset {
    kslot *s;
    size_t cap, n;
} kset;

uint64_t bo_fnv(const char *s, uint64_t h);
kslot *bo_kset_find(const kset *k, const char *key);
/* The slot of key, inserted (state ST_FREE) when new; NULL when out of memory. */
kslot *bo_kset_get(kset *k, const char *key);
void bo_kset_free(kset *k);

/* A row's id as text (a number as task.c prints it) and its attempt; -1
 * when either is missing or malformed. */
int bo_row_ident(const cJSON *row, char *id, size_t idn, int *attempt);
/* "ATTEMPT:ID", the key of kset. */
char *bo_ident_key(const char *id, int attempt);

/* judge.jsonl read as scores by (id, attempt): a later verdict wins; one
 * without a score (the judge failed) leaves the row's own score. */
typedef struct bo_judged {
    kset keys; /* "ATTEMPT:ID" -> index in score */
    double *score;
    size_t n, cap;
} bo_judged;
/* A row_fn over judge.jsonl (arg: a bo_judged); takes row. */
int bo_judged_add(void *arg, cJSON *row, size_t line, lis_error *err);
/* 1 with *score when (id, attempt) has a verdict, else 0. */
int bo_judged_find(const bo_judged *j, const char *id, int attempt, double *score);
void bo_judged_free(bo_judged *j);

int bo_fsync_dir(int dfd, const char *what, lis_error *err);
/* ".tmp-NAME.PID.TID": a temporary of its own for every writer. */
void bo_tmp_name(char *buf, size_t n, const char *name);
/* Writes name in dfd via a temporary file, fsync, rename, fsync of the dir. */
int bo_write_atomic(int dfd, const char *dir, const char *name, const char *data, size_t len,
                    lis_error *err);

/* Reads a JSONL file of rows (from its start; fd's offset is not used): cb
 * gets each whole row (owns it); a last line without its newline, or
 * unparsable, is a torn write and ends the file (*good: the length of the
 * whole lines, *lines: their number); a bad line before the last is an error. */
typedef int (*row_fn)(void *arg, cJSON *row, size_t line, lis_error *err);
int bo_read_jsonl(int fd, const char *path, row_fn cb, void *arg, off_t *good, size_t *lines,
                  lis_error *err);
/* bo_read_jsonl of dir's file name (dfd: dir opened); a missing file is
 * empty unless must. */
int bo_read_jsonl_at(int dfd, const char *dir, const char *name, int must, row_fn cb, void *arg,
                     lis_error *err);

/* status.c: run.json's keys that say how the run stands (status, rows,
 * finish_command, pid...) and, with "settings" (how to run it again), what
 * --resume and merge do not compare. */
int bo_state_key(const char *key);
int bo_uncompared_key(const char *key);
void bo_strip_state(cJSON *obj);
/* s as one shell word (quoted when it needs it), appended to b. */
void bo_shell_word(strbuf *b, const char *s);
/* The lis that runs (/proc/self/exe; "lis" when unknown). */
void bo_self_path(char *out, size_t len);
/* "<that lis> SUB DIR" (e.g. "batch --resume"), each word quoted as the shell needs. */
void bo_lis_command(strbuf *b, const char *sub, const char *dir);
/* v as Python's repr(float) writes it (1.0, 0.25, 1e-05): json.dump's text. */
void bo_py_float(double v, char *out, size_t n);
/* The numbers of obj's keys (NULL-terminated; arrays too) as raw Python floats. */
void bo_json_floats(cJSON *obj, const char *const *keys);

#endif
