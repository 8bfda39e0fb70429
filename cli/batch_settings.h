/* batch_settings.h - cli/'s `lis batch` flags as parsed (cmd_batch.c), and a
 * run's settings in run.json: what `lis batch --resume DIR` alone runs with
 * (batch_settings.c). */
#ifndef LIS_CLI_BATCH_SETTINGS_H
#define LIS_CLI_BATCH_SETTINGS_H

#include "agent_cli.h"
#include "cli_util.h"
#include "lis_batch.h"

typedef struct bflags {
    const char *task, *tasks, *prompt_config, *output_dir, *resume, *mode, *scorer;
    const char *judge_model, *judge_url, *judge_key, *shard, *by, *live;
    long start_id, end_id, max_response_len;
    int shards, repeat, concurrency, max_creating, max_commands, max_llm, quiet, save_files, warm;
    int fork_from_setup, overcommit;
    double episode_timeout, drain_timeout, cmd_timeout;
    int have_temperature, concurrency_set, warm_set, live_set;
} bflags;

/* The flag name of an argument ("--max_steps=3" -> "max-steps"), aliases
 * folded (--num-workers is concurrency, --docker-image image); -1 when it is
 * not a --flag or the name does not fit. */
int batch_flag_name(const char *a, char *name, size_t len);

/* With --resume DIR: argv[0], the flags of DIR/run.json's "settings" that
 * argv does not give, then argv's own, into out (strings made here go to
 * owned). 1 done, 0 the run has no settings but argv gives the rows (the
 * whole command given again), -1 after printing the error. */
int batch_resume_argv(const char *dir, int argc, char **argv, cli_list *out, cli_list *owned);

/* The flags this run resolved to, named as flags, for run.json; NULL when
 * out of memory. */
cJSON *batch_run_settings(const bflags *b, const agent_cli *c, const lis_batch_opts *o,
                          const char *shard);

#endif
