/* task.h - batch/ internal: a benchmark task (a benchmark/<task>/ folder, or
 * --tasks FILE) and its rows. Implemented in task.c.
 * original: the folder's layout, llm_in_sandbox/benchmark/<task>/. */
#ifndef LIS_BATCH_TASK_H
#define LIS_BATCH_TASK_H

#include "agent.h"

/* Row ids are shorter than this (bytes); longer ones are refused at load. */
#define BATCH_ID_MAX 4096

typedef struct batch_row {
    char *id;                      /* the row's id as text (a number id is printed as %g;
                               * precisely: an integer as Python's str(), else the
                               * shortest %.17g that reads back; no id: the row's
                               * 0-based position in the data, as text) */
    const char *problem_statement; /* borrowed from json ("" when absent) */
    const cJSON *ground_truth;     /* borrowed from json (NULL when absent) */
    cJSON *json;                   /* the whole row (owned); every field goes to the scorer */
    cJSON *input_files;            /* name -> content object (owned; parsed when the row has a
                               * JSON string), NULL when the row has none. For an object
                               * row it is a cJSON reference to json's own (no copy of the
                               * documents): valid while json is. Names are relative, may
                               * hold subdirectories ("notes/a.txt"), never "..". A null
                               * content means: skip the file (original: skipped) */
    char error[256];               /* not "": the row cannot run (recorded as input_error) */
} batch_row;

typedef struct batch_task {
    char *name;              /* the folder's basename, or the file name without extension */
    char *dir;               /* the task folder; NULL with --tasks */
    char *data_path;         /* the data file rows were read from */
    agent_prompts prompts;   /* system/instance prompt, working/input/output dirs */
    char *reward_py;         /* <dir>/reward.py when it exists, else NULL */
    char *judge_py;          /* <dir>/judge.py when it exists, else NULL */
    char *vanilla_prompt_py; /* <dir>/vanilla_llm_prompt.py when it exists, else NULL */
    batch_row *rows;
    size_t nrows;      /* after --start-id/--end-id */
    size_t total_rows; /* in the data file */
} batch_task;

typedef struct batch_task_opts {
    const char *task_dir;      /* --task DIR */
    const char *tasks_file;    /* --tasks FILE (JSON array or JSONL) */
    const char *prompt_config; /* --prompt-config YAML (overrides the folder's prompts) */
    long start_id, end_id;     /* original: 0-based [start, end); -1 when unset */
    /* Nonzero: start_id / end_id were given, also when -1 (a negative value
     * counts from the end, as Python's problems[start:end]; an end of 0 means
     * the end; original: `end_id or len(problems)`). */
    int start_set, end_set;
} batch_task_opts;

/* Loads the task; every failure is one line naming the file and the fix. */
int batch_task_load(const batch_task_opts *o, batch_task *t, lis_error *err);
void batch_task_free(batch_task *t);

#endif
