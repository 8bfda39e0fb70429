/* run.c - lis_batch_run: the task, the output directory (new or resumed),
 * the scorer, the episodes still without a row, the host's capacity, the
 * pools; then the event loop (sched.c) and, at the end, results.json and
 * trajectory.json (original: its benchmark's files). */
#include "engine.h"
#include "results_io.h"
#include "rootfs.h"
#include "shard.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void lis_batch_opts_default(lis_batch_opts *o)
{
    memset(o, 0, sizeof *o);
    o->start_id = o->end_id = 0;
    o->repeat = 1;
    o->output_dir = "runs";
    o->concurrency = 1;
    o->warm = -1;
    /* original: the benchmark's 1800 s per problem, max_response_len, max_steps,
     * max_token_limit; run's 120 s per command */
    o->episode_timeout = 1800;
    o->max_response_len = 65536;
    o->max_steps = 100;
    o->max_token_limit = 65536;
    o->net = LIS_NET_PROXY;
    o->cmd_timeout = AGENT_CMD_TIMEOUT;
    o->out = stdout;
    o->err = stderr;
}

/* What makes two runs the same run: resuming with another model, task or
 * setting that changes the results is refused (results.c compares it). The
 * endpoint is left out: the same model may be served from elsewhere. */
static cJSON *run_config(const lis_batch_opts *o, const batch_task *t, const batch_scorer *sc)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "mode", o->mode_llm ? "llm" : "llm-in-sandbox");
    cJSON_AddStringToObject(c, "task", t->name ? t->name : "");
    char data[PATH_MAX]; /* absolute: a resume from elsewhere names the same file */
    cJSON_AddStringToObject(c, "data",
                            !t->data_path                  ? ""
                            : realpath(t->data_path, data) ? data
                                                           : t->data_path);
    cJSON_AddStringToObject(c, "llm_name", o->llm_name ? o->llm_name : "");
    cJSON_AddNumberToObject(c, "temperature", o->llm.temperature);
    cJSON_AddNumberToObject(c, "repeat", o->repeat);
    if (o->start_set)
        cJSON_AddNumberToObject(c, "start_id", (double)o->start_id);
    if (o->end_set)
        cJSON_AddNumberToObject(c, "end_id", (double)o->end_id);
    if (o->llm.extra_body)
        cJSON_AddItemToObject(c, "extra_body", cJSON_Duplicate(o->llm.extra_body, 1));
    if (o->mode_llm) {
        cJSON_AddNumberToObject(c, "max_response_len", (double)o->max_response_len);
    } else {
        cJSON_AddStringToObject(c, "docker_image", o->image ? o->image : o->rootfs);
        cJSON_AddNumberToObject(c, "max_steps", o->max_steps);
        cJSON_AddNumberToObject(c, "max_token_limit", (double)o->max_token_limit);
        cJSON_AddNumberToObject(c, "max_tokens_per_call", (double)o->llm.max_tokens);
        cJSON_AddStringToObject(c, "working_dir", t->prompts.working_dir);
        cJSON_AddStringToObject(c, "input_dir", t->prompts.input_dir);
        cJSON_AddStringToObject(c, "output_dir", t->prompts.output_dir);
        /* the prompt templates as the task and --prompt-config made them */
        strbuf p = {0};
        strbuf_puts(&p, t->prompts.system_prompt ? t->prompts.system_prompt : "");
        strbuf_putc(&p, 0);
        strbuf_puts(&p, t->prompts.instance_prompt ? t->prompts.instance_prompt : "");
        char sha[65] = "";
        if (!p.oom)
            batch_sha256_text(p.s ? p.s : "", p.len, sha);
        strbuf_release(&p);
        cJSON_AddStringToObject(c, "prompt_sha256", sha);
        cJSON_AddStringToObject(c, "net",
                                o->net == LIS_NET_NONE   ? "none"
                                : o->net == LIS_NET_HOST ? "host"
                                                         : "proxy");
        cJSON_AddNumberToObject(c, "memory",
                                (double)(o->memory_bytes ? o->memory_bytes : LIS_DEFAULT_MEMORY));
        cJSON_AddNumberToObject(c, "disk",
                                (double)(o->disk_bytes ? o->disk_bytes : LIS_DEFAULT_DISK));
    }
    /* the scorer of every score, and the file that defines it */
    cJSON_AddStringToObject(c, "scorer", batch_scorer_name(sc));
    cJSON_AddStringToObject(c, "scorer_sha256", batch_scorer_sha256(sc));
    cJSON_AddStringToObject(c, "scorer_file", batch_scorer_source(sc));
    bfx_config(c, o); /* --policy, --allow-domain, --deny-domain, --allow-host-network */
    batch_shard_config(c, o->shard_index, o->shard_count,
                       batch_shard_rows(t->nrows, o->shard_index, o->shard_count));
    return c;
}

static int make_dir(const lis_batch_opts *o, const batch_task *t, char *dir, size_t len,
                    lis_error *err)
{
    if (o->resume_dir) {
        if (access(o->resume_dir, F_OK) != 0)
            return lis_fail(err, ENOENT, "--resume %s: no such directory", o->resume_dir);
        snprintf(dir, len, "%s", o->resume_dir);
        /* a run killed without a word: its files say so, its leftovers go */
        lis_error rerr = {0};
        if (batch_repair_if_dead(dir, &rerr) < 0 && !o->quiet)
            fprintf(o->err, "lis: warning: --resume %s: %s\n", dir, rerr.msg);
        return 0;
    }
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y%m%d_%H%M%S", &tm);
    /* runs/ and runs name one directory: no runs//... in what lis prints */
    int ol = (int)strlen(o->output_dir);
    while (ol > 1 && o->output_dir[ol - 1] == '/')
        ol--;
    const char *od = o->output_dir;
    if (o->shard_count) { /* a fixed name: the array's shards and merge find each other */
        snprintf(dir, len, "%.*s/shard-%d-of-%d", ol, od, o->shard_index, o->shard_count);
        return 0;
    }
    snprintf(dir, len, "%.*s/%s_%s", ol, od, ts, t->name ? t->name : "batch");
    for (int i = 2; access(dir, F_OK) == 0 && i < 1000; i++) /* two runs in one second */
        snprintf(dir, len, "%.*s/%s_%s_%d", ol, od, ts, t->name ? t->name : "batch", i);
    return 0;
}

static int check_opts(const lis_batch_opts *o, lis_error *err)
{
    if (!o->task_dir == !o->tasks_file)
        return lis_fail(err, EINVAL,
                        "give the rows: --task DIR (a benchmark folder) or --tasks "
                        "FILE (JSON or JSONL)");
    if (o->concurrency < 1 || o->max_creating < 0 || o->max_commands < 1 || o->max_llm < 1 ||
        o->repeat < 1)
        return lis_fail(err, EINVAL,
                        "--concurrency, --repeat and the --max-* bounds must be "
                        "at least 1");
    if (o->max_creating > LIS_BATCH_MAX_CREATING)
        return lis_fail(err, EINVAL, "--max-creating: at most %d", LIS_BATCH_MAX_CREATING);
    if (!o->mode_llm && !o->rootfs)
        return lis_fail(err, EINVAL, "no root filesystem for the sandboxes");
    if (o->live && blive_check(o->live, err) < 0)
        return -1;
    if (o->shard_count < 0 ||
        (o->shard_count && (o->shard_index < 0 || o->shard_index >= o->shard_count)))
        return lis_fail(err, EINVAL, "shard %d/%d: K must be below N", o->shard_index,
                        o->shard_count);
    return 0;
}

static void free_run(brun *r)
{
    if (r->misc)
        lis_jobs_free(r->misc);
    if (r->setup)
        lis_jobs_free(r->setup);
    llm_free(r->llm);
    batch_scorer_close(r->scorer);
    if (r->out && r->tmpl.state == TMPL_MADE)
        bleft_template_done(batch_out_dir(r->out)); /* removed below */
    batch_out_close(r->out);
    free(r->eps);
    free(r->alerts);
    /* --fork-from-setup: a snapshot whose repeats did not all run (Ctrl-C, a
     * fatal error) goes too; every sandbox is gone by now */
    for (size_t i = 0; r->groups && i < r->task->nrows; i++) {
        if (r->groups[i].state == G_MADE) {
            lis_error ign;
            lis_rootfs_rm(lis_ctx_data_dir(r->ctx), r->groups[i].digest, NULL, &ign);
        }
        pthread_mutex_destroy(&r->groups[i].mu);
    }
    free(r->groups);
    /* the template, after the group snapshots made on it */
    if (r->tmpl.state == TMPL_MADE) {
        lis_error ign;
        lis_rootfs_rm(lis_ctx_data_dir(r->ctx), r->tmpl.digest, NULL, &ign);
    }
    pthread_mutex_destroy(&r->tmpl.mu);
}

/* The commands that finish a run: the rest of its rows, or, for a shard
 * whose rows are all done, the merge of the array's shards. */
static void finish_commands(brun *r, const char *dir)
{
    char abs[PATH_MAX];
    if (!realpath(dir, abs))
        snprintf(abs, sizeof abs, "%s", dir);
    strbuf b = {0};
    bo_shell_word(&b, r->lis);
    strbuf_puts(&b, " batch --resume ");
    bo_shell_word(&b, abs);
    char *t = strbuf_take(&b);
    snprintf(r->resume_cmd, sizeof r->resume_cmd, "%s", t ? t : "");
    free(t);
    if (!r->o->shard_count)
        return;
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", abs);
    char *sl = strrchr(parent, '/');
    if (sl)
        *sl = 0;
    char merged[PATH_MAX + 16], glob[64];
    snprintf(merged, sizeof merged, "%s/merged", parent);
    snprintf(glob, sizeof glob, "/shard-*-of-%d", r->o->shard_count);
    bo_shell_word(&b, r->lis);
    strbuf_puts(&b, " batch merge ");
    bo_shell_word(&b, merged);
    strbuf_putc(&b, ' ');
    bo_shell_word(&b, parent);
    strbuf_puts(&b, glob); /* unquoted: the shell finds the shards */
    t = strbuf_take(&b);
    snprintf(r->merge_cmd, sizeof r->merge_cmd, "%s", t ? t : "");
    free(t);
}

/* Rows were given to the scorer and not one came back with a score. */
static int scorer_failed_all(const brun *r)
{
    return r->by_reason[R_SCORER_ERROR] > 0 && !r->by_reason[R_SUBMITTED] &&
           !r->by_reason[R_MAX_STEPS] && !r->by_reason[R_TOKEN_LIMIT];
}

/* What the run is now: running, or how it ended (docs/batch-files.md). */
static batch_status end_state(brun *r, size_t done, batch_state *st, char *msg, size_t ml)
{
    *st = (batch_state){.rows_asked = r->total,
                        .rows_done = done,
                        .lis = r->lis,
                        .finish = r->resume_cmd};
    size_t left = r->total > done ? r->total - done : 0;
    if (r->fatal) {
        st->status = BS_STOPPED;
        st->reason = r->fatal_reason;
        snprintf(msg, ml, "%s", r->fatal_msg);
    } else if (left) {
        st->status = BS_PARTIAL;
        int sig = r->first_signal;
        st->reason = !r->signals       ? "unfinished"
                     : r->first_by_ctl ? "ctl_stop"
                     : sig == SIGINT   ? "interrupted"
                     : sig == SIGTERM  ? "terminated"
                                       : "hangup";
        snprintf(msg, ml, "%s: %zu of %zu rows done, %zu not run",
                 !r->signals       ? "stopped early"
                 : r->first_by_ctl ? "lis batch ctl stop"
                 : sig == SIGINT   ? "Ctrl-C"
                 : sig == SIGTERM  ? "SIGTERM (a scheduler's time limit, or kill)"
                                   : "SIGHUP (the terminal went away)",
                 done, r->total, left);
    } else if (r->o->shard_count) {
        /* every row of the shard is done; the task's other rows are other shards' */
        st->status = BS_PARTIAL;
        st->reason = "shard";
        snprintf(msg, ml,
                 "shard %d/%d: %zu of the task's %zu rows (x%d); when every shard is done, "
                 "lis batch merge joins them",
                 r->o->shard_index, r->o->shard_count, r->rows, r->task->nrows, r->o->repeat);
        st->finish = r->merge_cmd;
    } else if (scorer_failed_all(r)) {
        st->status = BS_FAILED;
        st->reason = "scorer_failed";
        snprintf(msg, ml,
                 "the scorer failed on every one of the %zu rows it was given, so no score means "
                 "anything (first error: %.200s); fix it, then: lis batch rescore %s",
                 r->by_reason[R_SCORER_ERROR], r->scorer_error, batch_out_dir(r->out));
        st->finish = NULL;
    } else {
        st->status = BS_COMPLETE;
        st->reason = "";
        msg[0] = 0;
        st->finish = NULL;
    }
    st->message = msg;
    return st->status;
}

/* The sandboxes alive at once (the episodes, and the spares made ahead for
 * rows still waiting: --warm or its default, below) against the host's
 * memory (batch/capacity.c), for neps episodes to run. */
static int memory_fits(const lis_batch_opts *o, size_t neps, int forking, lis_error *err)
{
    if (o->mode_llm)
        return 0;
    int n = o->concurrency < (int)neps ? o->concurrency : (int)neps;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int creators = o->max_creating ? o->max_creating : 4 * (int)(ncpu > 0 ? ncpu : 1);
    int spares = forking                         ? 0
                 : o->warm >= 0                  ? o->warm
                 : o->concurrency / 4 > creators ? o->concurrency / 4
                                                 : creators;
    int waiting = (int)neps - n;
    spares = spares < 64 ? spares : 64;
    spares = spares < waiting ? spares : waiting > 0 ? waiting : 0;
    return batch_memory_check(n ? n + spares : 0,
                              o->memory_bytes ? o->memory_bytes : LIS_DEFAULT_MEMORY,
                              o->disk_bytes ? o->disk_bytes : LIS_DEFAULT_DISK, o->overcommit,
                              o->quiet ? NULL : o->err, err);
}

/* Phase 1, before any directory: the scorer (its sha256 is part of what the
 * run is, and a reward.py that cannot be imported stops the run here) and, for
 * a new run, the memory of every episode of its shard. Then the directory, new
 * or resumed, with what makes the run the same run. */
static int open_run(brun *r, int forking, lis_batch_summary *sum, lis_error *err)
{
    const lis_batch_opts *o = r->o;
    const batch_task *task = r->task;
    batch_scorer_opts so = {.task_name = task->name,
                            .task_dir = task->dir,
                            .scorer = o->scorer,
                            .judge = o->judge,
                            .log = o->quiet ? NULL : o->err};
    if (batch_scorer_open(&so, &r->scorer, err) < 0)
        return -1;
    size_t neps = batch_shard_rows(task->nrows, o->shard_index, o->shard_count) * (size_t)o->repeat;
    if (!o->resume_dir && memory_fits(o, neps, forking, err) < 0)
        return -1;
    cJSON *config = run_config(o, task, r->scorer);
    if (o->settings)
        cJSON_AddItemToObject(config, "settings", cJSON_Duplicate(o->settings, 1));
    int rc = make_dir(o, task, sum->dir, sizeof sum->dir, err) < 0 ||
                     batch_out_open(sum->dir, config, o->resume_dir != NULL, &r->out, err) < 0
                 ? -1
                 : 0;
    cJSON_Delete(config);
    if (rc == 0)
        finish_commands(r, sum->dir);
    return rc;
}

/* Phase 2: the episodes without a row (all of them, or what a resumed run
 * left), then whether the host holds them: its capacity, and a resumed run's
 * memory for what is left. */
static int list_episodes(brun *r, int forking, lis_error *err)
{
    const lis_batch_opts *o = r->o;
    batch_task *task = r->task;
    r->rows = batch_shard_rows(task->nrows, o->shard_index, o->shard_count);
    r->total = r->rows * (size_t)o->repeat;
    r->eps = calloc(r->total ? r->total : 1, sizeof *r->eps);
    if (!r->eps)
        return lis_fail(err, ENOMEM, "out of memory for %zu episodes", r->total);
    if (forking && !(r->groups = calloc(task->nrows ? task->nrows : 1, sizeof *r->groups)))
        return lis_fail(err, ENOMEM, "out of memory for %zu rows", task->nrows);
    for (size_t i = 0; forking && i < task->nrows; i++)
        pthread_mutex_init(&r->groups[i].mu, NULL);
    for (size_t i = 0; i < task->nrows; i++)
        for (int k = 0; k < o->repeat && batch_shard_has(i, o->shard_index, o->shard_count); k++) {
            if (batch_out_has(r->out, task->rows[i].id, k)) {
                r->already++;
                continue;
            }
            bep *e = &r->eps[r->neps];
            e->run = r;
            e->index = r->neps++;
            e->row = &task->rows[i];
            e->attempt = k;
            if (forking) {
                e->group = &r->groups[i];
                e->group->pending++;
            }
        }
    int n = o->concurrency < (int)r->neps ? o->concurrency : (int)r->neps;
    if (batch_capacity_check(n ? n : 1, !o->mode_llm, o->quiet ? NULL : o->err, err) < 0)
        return -1;
    if (o->resume_dir && memory_fits(o, r->neps, forking, err) < 0) /* what is left */
        return -1;
    return 0;
}

/* Phase 3: the LLM client, the episodes' common options and sandbox spec, the
 * set-ups at once, the warm spares, and the pools. */
static int prepare_pools(brun *r, int forking, lis_error *err)
{
    const lis_batch_opts *o = r->o;
    llm_config cfg = o->llm;
    cfg.log = NULL; /* each call reports to its episode's log */
    if (o->mode_llm)
        cfg.max_tokens = o->max_response_len;
    if (!(r->llm = llm_new(&cfg, err)))
        return -1;
    r->base = (agent_opts){.prompts = &r->task->prompts,
                           .max_steps = o->max_steps,
                           .max_token_limit = o->max_token_limit,
                           .llm = cfg,
                           .llm_name = o->llm_name,
                           .on_step = bfx_on_step}; /* the live view; its arg is the episode */
    r->spec = (lis_sandbox_spec){.rootfs = o->rootfs, .net = o->net, .upper = LIS_UPPER_TMPFS};
    /* the set-ups at once: --max-creating, or following the machine (sched.c:
     * creators_adjust) from one per core up to four per core */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    r->cores = cores > 0 ? (size_t)cores : 1;
    r->creators_auto = o->max_creating == 0;
    r->creators_max = o->max_creating ? (size_t)o->max_creating : 4 * r->cores;
    if (r->creators_max > LIS_BATCH_MAX_CREATING)
        r->creators_max = LIS_BATCH_MAX_CREATING;
    r->creators = r->creators_auto ? r->cores : r->creators_max;
    /* spares are sandboxes of the image: of no use to the forks of a set-up;
     * by default enough for a quarter of the live episodes to start at once */
    size_t warm = o->warm >= 0                                   ? (size_t)o->warm
                  : (size_t)o->concurrency / 4 > r->creators_max ? (size_t)o->concurrency / 4
                                                                 : r->creators_max;
    r->warm = o->mode_llm || forking ? 0 : warm;
    if (r->warm > sizeof r->spares / sizeof r->spares[0])
        r->warm = sizeof r->spares / sizeof r->spares[0];
    r->spec.limits.memory_bytes = o->memory_bytes ? o->memory_bytes : LIS_DEFAULT_MEMORY;
    r->spec.limits.disk_bytes = o->disk_bytes;
    if (!(r->setup = lis_jobs_new(o->mode_llm ? 1 : (unsigned)r->creators_max, err)))
        return -1;
    if (!(r->misc = lis_jobs_new(o->mode_llm ? 2 : 4, err)))
        return -1;
    return 0;
}

/* The run's one line on stderr before the first episode. */
static void announce(const brun *r, const char *dir)
{
    const lis_batch_opts *o = r->o;
    char shard[48] = "";
    if (o->quiet)
        return;
    if (o->shard_count)
        snprintf(shard, sizeof shard, " (shard %d/%d of %zu)", o->shard_index, o->shard_count,
                 r->task->nrows);
    fprintf(o->err,
            "lis batch: %s, %zu rows%s x %d = %zu episodes (%zu done before), at "
            "most %d at once; %s; results in %s\n",
            r->task->name ? r->task->name : "?", r->rows, shard, o->repeat, r->total, r->already,
            o->concurrency, o->mode_llm ? "plain LLM (no sandbox)" : "LLM-in-Sandbox", dir);
}

/* Phase 5, once every episode has ended: the notes on the template and the
 * spares, the summary, run.json's end state, results.json and the report. */
static void report_run(brun *r, double seconds, batch_state *st, lis_batch_summary *sum)
{
    const lis_batch_opts *o = r->o;
    bprog_clear(r);
    if (!o->quiet && r->tmpl.state == TMPL_UNUSED)
        fprintf(o->err,
                "lis batch: note: no set-up template (%s): each sandbox ran the set-up "
                "itself\n",
                r->tmpl.error);
    if (!o->quiet && r->spares_made)
        fprintf(o->err,
                "lis batch: warm pool: %zu of the %zu sandboxes made ahead were taken by "
                "a row\n",
                r->spares_used, r->spares_made);
    lis_jobs_free(r->misc); /* every job has ended: the rows are on disk */
    r->misc = NULL;
    sum->rows = r->rows;
    sum->total = r->total;
    sum->done = r->already + r->done;
    sum->errors = r->errors;
    sum->cancelled = r->neps - r->done;
    sum->interrupted = r->signals > 0;
    sum->reached = r->llm_ok;
    char msg[700];
    batch_status bs = end_state(r, sum->done, st, msg, sizeof msg);
    snprintf(sum->status, sizeof sum->status, "%s", batch_status_name(bs));
    snprintf(sum->finish, sizeof sum->finish, "%s", st->finish ? st->finish : "");
    lis_error rerr = {0};
    if (batch_out_set_state(r->out, st, &rerr) < 0 && !o->quiet)
        fprintf(o->err, "lis: warning: writing the run's status to run.json: %s\n", rerr.msg);
    /* a run that never reached the model has nothing to show: the one line
     * (with the command that finishes it) is all */
    int empty = r->fatal && !strcmp(r->fatal_reason, "unreachable") && sum->done == 0;
    cJSON *summary = NULL;
    if (batch_report_write(sum->dir, seconds, &summary, &rerr) < 0) {
        if (!o->quiet)
            fprintf(o->err, "lis: warning: writing results.json: %s\n", rerr.msg);
    } else {
        const cJSON *m = cJSON_GetObjectItem(summary, "mean_score");
        sum->has_mean = cJSON_IsNumber(m);
        sum->mean_score = sum->has_mean ? m->valuedouble : 0;
        if (!o->quiet && !empty)
            bprog_summary(o->out, summary);
        if (empty)
            ; /* no report of an empty run */
        else if (lis_report_html(sum->dir, NULL, 0, &rerr) < 0 && !o->quiet)
            fprintf(o->err, "lis: warning: writing the report: %s\n", rerr.msg);
        else if (!o->quiet)
            fprintf(o->err, "lis: report: %s/report.html\n", sum->dir);
    }
    cJSON_Delete(summary);
}

/* Phase 4: the event loop (sched.c) from run.json's "running" to its end
 * state; 0 every episode has its row, 1 some were cancelled, -1 the run failed. */
static int run_episodes(brun *r, int forking, lis_batch_summary *sum, lis_error *err)
{
    const lis_batch_opts *o = r->o;
    batch_state st = {.status = BS_RUNNING,
                      .reason = "",
                      .message = "",
                      .rows_asked = r->total,
                      .rows_done = r->already,
                      .finish = r->resume_cmd,
                      .lis = r->lis,
                      .pid = (long)getpid()};
    if (batch_out_set_state(r->out, &st, err) < 0 || prepare_pools(r, forking, err) < 0)
        return -1;
    announce(r, sum->dir);
    double t0 = lis_now();
    if (bsched_run(r, err) < 0)
        return -1;
    report_run(r, lis_now() - t0, &st, sum);
    if (r->fatal) /* the one line; sum->finish is the command that goes on */
        return lis_fail(err, EIO, "%s", r->fatal_msg);
    if (!sum->cancelled && !o->shard_count && scorer_failed_all(r)) /* loud, last, non-zero */
        return lis_fail(err, EIO,
                        "FAILED: the scorer failed on every one of the %zu rows (first error: "
                        "%.300s); no score of this run means anything: fix the scorer, then "
                        "score the saved answers again with lis batch rescore %s [--scorer S]",
                        r->by_reason[R_SCORER_ERROR], r->scorer_error, batch_out_dir(r->out));
    if (sum->cancelled && !o->quiet)
        fprintf(o->err, "lis: %zu episodes did not finish; finish them with: %s\n", sum->cancelled,
                r->resume_cmd);
    return sum->cancelled ? 1 : 0;
}

int lis_batch_run(lis_ctx *ctx, const lis_batch_opts *o, lis_batch_summary *sum, lis_error *err)
{
    memset(sum, 0, sizeof *sum);
    if (check_opts(o, err) < 0)
        return -1;
    batch_task task = {0};
    batch_task_opts to = {.task_dir = o->task_dir,
                          .tasks_file = o->tasks_file,
                          .prompt_config = o->prompt_config,
                          .start_id = o->start_id,
                          .end_id = o->end_id,
                          .start_set = o->start_set,
                          .end_set = o->end_set};
    if (batch_task_load(&to, &task, err) < 0)
        return -1;
    brun r = {.o = o, .ctx = ctx, .task = &task, .epfd = -1, .sigfd = -1};
    bo_self_path(r.lis, sizeof r.lis);
    pthread_mutex_init(&r.tmpl.mu, NULL);
    sigset_t old;
    bsched_block_signals(&old);
    int forking = o->fork_from_setup && o->repeat > 1 && !o->mode_llm;
    int rc = -1;
    if (open_run(&r, forking, sum, err) == 0 && list_episodes(&r, forking, err) == 0)
        rc = run_episodes(&r, forking, sum, err);
    free_run(&r);
    batch_task_free(&task);
    bsched_restore_signals(&old);
    return rc;
}

int lis_batch_report(const char *dir, const char *by, FILE *out, lis_error *err)
{
    cJSON *summary = NULL;
    if (by && strcmp(by, "domain"))
        return lis_fail(err, EINVAL, "--by %s: only --by domain is known", by);
    if (batch_report_write(dir, -1, &summary, err) < 0)
        return -1;
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(summary, "status"));
    if (st && !strcmp(st, "running"))
        fprintf(out,
                "lis batch report: %s is a run in progress (pid %.0f): results.json and the "
                "report are of the rows written so far\n",
                dir, cJSON_GetNumberValue(cJSON_GetObjectItem(summary, "pid")));
    if (by)
        bcap_print(out, summary); /* capability use by the rows' domain */
    else
        bprog_summary(out, summary);
    cJSON_Delete(summary);
    lis_error rerr = {0};
    if (lis_report_html(dir, NULL, 0, &rerr) < 0)
        fprintf(out, "lis: warning: writing the report: %s\n", rerr.msg);
    else
        fprintf(out, "  %-22s %s/report.html\n", "report", dir);
    return 0;
}

int lis_batch_judge(const char *dir, const llm_config *judge, int concurrency, FILE *log, FILE *out,
                    lis_error *err)
{
    if (batch_judge_dir(dir, judge, concurrency, log, err) < 0)
        return -1;
    return lis_batch_report(dir, NULL, out, err);
}
