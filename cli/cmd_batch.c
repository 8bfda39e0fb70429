/* cmd_batch.c - `lis batch` front end (liblis-agent.so): the batch flags
 * here, the model and sandbox flags through agent_cli_parse (the same as
 * `lis run`, both spellings), then lis_batch_run; `lis batch report DIR` and
 * `lis batch judge DIR`. The work is in batch/. */
#include "agent_cli.h"
#include "batch_settings.h"
#include "cli_util.h"
#include "lis_batch.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fputs("usage: lis batch --task DIR | --tasks FILE [options]\n"
          "       lis batch --resume DIR [options]   finish a run with the flags it ran with\n"
          "       lis batch report DIR [--by domain]  rewrite results.json/trajectory.json, print\n"
          "                                     them (--by domain: capability use by domain)\n"
          "       lis batch ctl DIR status|pause|resume|stop [ID...]  steer a running batch\n"
          "       lis batch judge DIR --judge-model M --judge-base-url URL [--judge-api-key K]\n"
          "       lis batch rescore DIR [--scorer S]  score the saved answers again\n"
          "       lis batch merge OUT SHARD_DIR...  join the shards of one run into OUT\n"
          "\n"
          "Runs every row of a benchmark task from one process, at most --concurrency at once,\n"
          "scores each answer as the original does, and writes each result as soon as its\n"
          "episode ends (results.jsonl), so Ctrl-C, kill -9 or a reboot lose at most what was\n"
          "running; `lis batch --resume DIR` finishes the rest.\n"
          "\n"
          "example:\n"
          "  lis batch --task llm_in_sandbox/benchmark/math --llm-name Qwen/Qwen3-Coder \\\n"
          "      --llm-base-url http://localhost:8000/v1 --concurrency 64 --output-dir runs\n"
          "\n"
          "rows:\n"
          "  --task DIR                the original's benchmark/<task>/ (config.yaml, data,\n"
          "                            reward.py, vanilla_llm_prompt.py)\n"
          "  --tasks FILE              a JSON array or JSONL of rows (id, problem_statement,\n"
          "                            ground_truth, input_files, ...)\n"
          "  --prompt-config FILE      system_prompt, instance_prompt, *_dir (with --tasks)\n"
          "  --start-id N --end-id M   rows [N, M) as the original (default: all)\n"
          "  --repeat K                K attempts per row (pass@k, RL groups; default 1)\n"
          "  --fork-from-setup         with --repeat: a row's set-up (directories, git init, its\n"
          "                            input files) runs once; its K attempts fork from a snapshot\n"
          "                            of it (files only; docs/snapshots.md)\n"
          "  --shard K/N               only rows i with i % N == K (0-based, after --start-id/\n"
          "                            --end-id); writes OUTPUT_DIR/shard-K-of-N/\n"
          "  --shard auto              K and N from a Slurm array (SLURM_ARRAY_TASK_ID - _MIN,\n"
          "                            SLURM_ARRAY_TASK_COUNT)\n"
          "  --shards N                N shards, K = SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX\n"
          "                            (docs/scale-out.md)\n"
          "results:\n"
          "  --output-dir DIR          a new DIR/<YYYYmmdd_HHMMSS>_<task>/ (default runs)\n"
          "  --resume DIR              run only the episodes DIR has no row for, with the flags\n"
          "                            of DIR/run.json; --concurrency, --max-*, the timeouts,\n"
          "                            --quiet, --save-files, --export-max, --overcommit,\n"
          "                            --llm-base-url may be given anew,\n"
          "                            a flag that changes results is refused\n"
          "  --save-files              keep each episode's output dir in DIR/files/ID/ (off;\n"
          "                            holes stay holes; at most --export-max of data)\n"
          "at once:\n"
          "  --concurrency N           live episodes (default 1; env LLM_NUM_WORKERS;\n"
          "                            --num-workers)\n"
          "  --max-creating N          sandboxes being created at once (default: one per core,\n"
          "                            more while cores sit idle, at most four per core)\n"
          "  --max-commands N          commands running at once (default: concurrency)\n"
          "  --max-llm N               LLM requests in flight (default: concurrency)\n"
          "  --warm N                  sandboxes made ahead for rows still waiting (default:\n"
          "                            a quarter of the concurrency, at least the creators'\n"
          "                            bound, at most 64; 0: none)\n"
          "  --episode-timeout S       per episode (default 1800)\n"
          "  --cmd-timeout S           per command (default 120)\n"
          "  --drain-timeout S         after Ctrl-C, cancel what still runs after S seconds\n"
          "                            (default: wait for it)\n"
          "  --overcommit              start even when concurrency x (--memory + --disk) is more\n"
          "                            than the host's memory (the writable space is RAM)\n"
          "mode and scoring:\n"
          "  --mode llm-in-sandbox|llm llm: the original's no-sandbox baseline (default\n"
          "                            llm-in-sandbox)\n"
          "  --max-response-len N      max_tokens in --mode llm (default 65536)\n"
          "  --scorer auto|python|builtin:NAME|CMD   how answers are scored (default auto: the\n"
          "                            task's reward.py; the built-in only for a reward.py that\n"
          "                            is the original's own; docs/batch-scoring.md)\n"
          "  --judge-model M --judge-base-url URL [--judge-api-key K]   LLM judge (judge.py tasks)\n"
          "  --quiet                   no progress, no summary\n"
          "  --live [ADDR]             serve the report page live on 127.0.0.1 (a free port\n"
          "                            by default; or PORT, 127.0.0.1:PORT), yours alone: its\n"
          "                            URL, printed, carries a secret token (also DIR/live.url)\n"
          "effects and rules (docs/monitoring.md): every step's files, processes, network and\n"
          "resources go into the trajectory (--no-effects: not recorded); --policy FILE,\n"
          "--allow-domain, --deny-domain,\n"
          "--allow-host-network as for lis run; lis batch ctl DIR ... pauses,\n"
          "resumes, stops episodes and shows their state.\n"
          "model and sandbox: every flag of lis run but --query and --input-dir (lis run --help):\n"
          "  --llm-name --llm-base-url --api-key --temperature (1.0) --max-steps (100)\n"
          "  --max-token-limit (65536) --max-tokens-per-call (65536) --extra-body --image\n"
          "  (lis-agent:latest) --rootfs --memory (200M) --disk --export-max --net (proxy)\n"
          "  --stream --timeout (1200) --connect-timeout (30) --settings; env LLM_NAME, LLM_BASE_URL, LLM_API_KEY,\n"
          "  LLM_TEMPERATURE as the original. A local endpoint (localhost, 127.0.0.1, ::1, a unix\n"
          "  socket) needs no API key.\n",
          f);
}

typedef enum { F_STR, F_INT, F_LONG, F_DBL, F_BOOL } ftype;
typedef struct bopt {
    const char *name;
    ftype type;
    size_t off;
} bopt;
#define B(n, t, f)                                                                                 \
    {                                                                                              \
        n, t, offsetof(bflags, f)                                                                  \
    }
static const bopt BOPTS[] = {
    B("task", F_STR, task),
    B("tasks", F_STR, tasks),
    B("prompt-config", F_STR, prompt_config),
    B("output-dir", F_STR, output_dir),
    B("resume", F_STR, resume),
    B("mode", F_STR, mode),
    B("scorer", F_STR, scorer),
    B("judge-model", F_STR, judge_model),
    B("judge-base-url", F_STR, judge_url),
    B("judge-api-key", F_STR, judge_key),
    B("start-id", F_LONG, start_id),
    B("end-id", F_LONG, end_id),
    B("max-response-len", F_LONG, max_response_len),
    B("repeat", F_INT, repeat),
    B("shard", F_STR, shard),
    B("shards", F_INT, shards),
    B("concurrency", F_INT, concurrency),
    B("num-workers", F_INT, concurrency),
    B("max-creating", F_INT, max_creating),
    B("max-commands", F_INT, max_commands),
    B("max-llm", F_INT, max_llm),
    B("warm", F_INT, warm),
    B("episode-timeout", F_DBL, episode_timeout),
    B("drain-timeout", F_DBL, drain_timeout),
    B("cmd-timeout", F_DBL, cmd_timeout),
    B("quiet", F_BOOL, quiet),
    B("save-files", F_BOOL, save_files),
    B("fork-from-setup", F_BOOL, fork_from_setup),
    B("overcommit", F_BOOL, overcommit),
    B("by", F_STR, by),
};

static int parse_number(const char *name, ftype t, const char *v, void *field)
{
    char *end;
    errno = 0;
    if (t == F_DBL) {
        double x = strtod(v, &end);
        if (!*v || *end || errno || x < 0) {
            cli_error("--%s: '%s' is not a number", name, v);
            return -1;
        }
        *(double *)field = x;
        return 0;
    }
    long x = strtol(v, &end, 10);
    int signed_ok = !strcmp(name, "start-id") || !strcmp(name, "end-id");
    if (!*v || *end || errno || (!signed_ok && x <= 0)) {
        cli_error("--%s: '%s' is not a %s integer", name, v, signed_ok ? "an" : "positive");
        return -1;
    }
    if (t == F_INT)
        *(int *)field = (int)x;
    else
        *(long *)field = x;
    return 0;
}

/* What --live takes as its ADDR: PORT or HOST:PORT (else the next argument
 * is not its: --live's value is optional). */
static int is_live_addr(const char *a)
{
    const char *c = strrchr(a, ':'), *p = c ? c + 1 : a;
    return *p && strspn(p, "0123456789") == strlen(p) &&
           (!c || !strncmp(a, "127.0.0.1:", 10) || !strncmp(a, "localhost:", 10) ||
            strspn(a, "0123456789.:") == strlen(a));
}

/* Takes the batch flags out of argv; what is left goes to agent_cli_parse. */
static int split_flags(int argc, char **argv, bflags *b, cli_list *rest)
{
    cli_list_add(rest, argv[0]);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2)) {
            /* `lis batch FILE|DIR` as the main usage line says */
            struct stat st;
            if (!b->task && !b->tasks && stat(a, &st) == 0) {
                if (S_ISDIR(st.st_mode))
                    b->task = a;
                else
                    b->tasks = a;
                continue;
            }
            cli_error("unexpected argument '%s' (lis batch --help)", a);
            return -1;
        }
        char name[64];
        const char *eq = strchr(a, '=');
        if (batch_flag_name(a, name, sizeof name) < 0) {
            cli_error("unknown option '%s' (lis batch --help)", a);
            return -1;
        }
        if (!strcmp(name, "temperature"))
            b->have_temperature = 1;
        const bopt *o = NULL;
        for (size_t k = 0; k < sizeof BOPTS / sizeof BOPTS[0]; k++)
            if (!strcmp(BOPTS[k].name, name))
                o = &BOPTS[k];
        if (!strcmp(name, "live")) { /* --live [ADDR]: the value is optional */
            b->live_set = 1;
            b->live = eq ? eq + 1 : "";
            if (!eq && i + 1 < argc && is_live_addr(argv[i + 1]))
                b->live = argv[++i];
            continue;
        }
        if (!o) { /* a model or sandbox flag: agent_cli_parse's, value and all */
            cli_list_add(rest, a);
            if (!eq && i + 1 < argc && strncmp(argv[i + 1], "--", 2) && strcmp(name, "stream") &&
                strcmp(name, "no-effects") && strcmp(name, "effects") &&
                strcmp(name, "allow-host-network"))
                cli_list_add(rest, argv[++i]);
            continue;
        }
        char *field = (char *)b + o->off;
        if (o->type == F_BOOL) {
            *(int *)field = !eq || !strcmp(eq + 1, "1") || !strcmp(eq + 1, "true");
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) {
            cli_error("option --%s needs a value", name);
            return -1;
        }
        if (!strcmp(name, "concurrency") || !strcmp(name, "num-workers"))
            b->concurrency_set = 1;
        if (!strcmp(name, "warm")) { /* 0 is a valid count here */
            b->warm_set = 1;
            b->warm = atoi(v);
            if (b->warm < 0 || strspn(v, "0123456789") != strlen(v) || !*v) {
                cli_error("--warm: '%s' is not a count", v);
                return -1;
            }
            continue;
        }
        if (o->type == F_STR)
            *(const char **)field = v;
        else if (parse_number(name, o->type, v, field) < 0)
            return -1;
    }
    return 0;
}

static int judge_config(const bflags *b, const agent_cli *c, llm_config *j)
{
    memset(j, 0, sizeof *j);
    j->api = LLM_API_OPENAI;
    j->model = b->judge_model;
    j->base_url = b->judge_url ? b->judge_url : c ? c->llm_base_url : NULL;
    j->api_key = b->judge_key ? b->judge_key : c && c->api_key ? c->api_key : NULL;
    j->temperature = 0.7; /* original: judge.py's */
    j->send_temperature = 1;
    j->max_tokens = 16384; /* original: judge.py's */
    j->timeout = 600;
    j->connect_timeout = 30;
    j->max_retries = 5;
    j->backoff_base = 1.0;
    j->backoff_max = 120;
    if (!j->base_url || !*j->base_url) {
        cli_error("--judge-model needs --judge-base-url URL");
        return -1;
    }
    if (!j->api_key) {
        const char *e = getenv("OPENAI_API_KEY");
        j->api_key = e && *e ? e : NULL;
    }
    if (!j->api_key && !agent_url_is_local(j->base_url)) {
        cli_error("no API key for the judge at %s: pass --judge-api-key KEY or set "
                  "OPENAI_API_KEY (a server on this host needs none)",
                  j->base_url);
        return -1;
    }
    return 0;
}

static int sub_report_or_judge(int argc, char **argv)
{
    int judge = !strcmp(argv[1], "judge");
    bflags b = {0};
    cli_list rest = {0};
    if (argc < 3 || split_flags(argc - 2, argv + 2, &b, &rest) < 0 || rest.n > 1) {
        if (argc >= 3 && rest.n > 1 && judge && !strncmp(rest.v[1], "--api-key", 9))
            cli_error("lis batch %s: the judge's key is --judge-api-key K (one spelling with "
                      "lis batch --judge-model)",
                      argv[1]);
        else if (argc >= 3 && rest.n > 1)
            cli_error("unknown option '%s' (lis batch --help)", rest.v[1]);
        else if (argc < 3)
            cli_error("usage: lis batch %s DIR%s", argv[1],
                      judge ? " --judge-model M --judge-base-url URL [--judge-api-key K]" : "");
        cli_list_free(&rest);
        return 2;
    }
    cli_list_free(&rest);
    const char *dir = argv[2];
    lis_error err = {0};
    if (!judge)
        return lis_batch_report(dir, b.by, stdout, &err) < 0 ? cli_fail(&err) : 0;
    if (!b.judge_model) {
        cli_error("lis batch judge needs --judge-model M and --judge-base-url URL");
        return 2;
    }
    llm_config j;
    if (judge_config(&b, NULL, &j) < 0)
        return 2;
    return lis_batch_judge(dir, &j, b.concurrency > 0 ? b.concurrency : 8, stderr, stdout, &err) < 0
               ? cli_fail(&err)
               : 0;
}

/* `lis batch rescore DIR [--scorer S]` */
static int sub_rescore(int argc, char **argv)
{
    const char *dir = NULL, *scorer = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs("usage: lis batch rescore DIR [--scorer auto|python|builtin:NAME|CMD]\n"
                  "Scores the saved answers of a finished run again (the run's own scorer, or\n"
                  "--scorer); each row keeps its old scores in previous_scores, run.json names\n"
                  "the new scorer; results.json and the report are written again.\n",
                  stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--scorer") && i + 1 < argc)
            scorer = argv[++i];
        else if (!strncmp(argv[i], "--scorer=", 9))
            scorer = argv[i] + 9;
        else if (argv[i][0] == '-' || dir) {
            cli_error("lis batch rescore: unknown argument '%s' (lis batch rescore --help)",
                      argv[i]);
            return 2;
        } else
            dir = argv[i];
    }
    if (!dir) {
        cli_error("usage: lis batch rescore DIR [--scorer S]");
        return 2;
    }
    lis_error err = {0};
    return lis_batch_rescore(dir, scorer, stdout, &err) < 0 ? cli_fail(&err) : 0;
}

/* `lis batch merge OUT SHARD_DIR...` */
static int sub_merge(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            puts(
                "usage: lis batch merge OUT SHARD_DIR...\n"
                "Joins the directories of the N shards of one run (lis batch --shard K/N)\n"
                "into OUT, the files of one unsharded run; refuses shards of different runs,\n"
                "missing, incomplete or running shards and ids in two shards (docs/scale-out.md).");
            return 0;
        }
        if (!strncmp(argv[i], "-", 1)) {
            cli_error("lis batch merge: unknown option '%s' (usage: lis batch merge OUT "
                      "SHARD_DIR...)",
                      argv[i]);
            return 2;
        }
    }
    if (argc < 4) {
        cli_error("usage: lis batch merge OUT SHARD_DIR... (the directories of lis batch "
                  "--shard K/N)");
        return 2;
    }
    lis_error err = {0};
    return lis_batch_merge(argv[2], (const char *const *)argv + 3, (size_t)(argc - 3), stdout,
                           &err) < 0
               ? cli_fail(&err)
               : 0;
}

/* `lis batch ctl DIR status|pause|resume|stop [ID...]` */
static int sub_ctl(int argc, char **argv)
{
    static const char USAGE[] =
        "usage: lis batch ctl DIR status|pause|resume|stop [ID...]\n"
        "Steers the lis batch running on DIR through DIR/ctl.sock: status shows its running\n"
        "episodes (step, command, effects, alerts); pause freezes their sandboxes and holds\n"
        "their LLM calls (all, or the episodes ID / ID@K); resume continues them; stop without\n"
        "ids drains the run as Ctrl-C does (again: cancels), stop ID... cancels those episodes\n"
        "(--resume runs them again). docs/monitoring.md";
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            puts(USAGE);
            return 0;
        }
    if (argc < 4) {
        cli_error("usage: lis batch ctl DIR status|pause|resume|stop [ID...]");
        return 2;
    }
    const char *verb = argv[3];
    if (strcmp(verb, "status") && strcmp(verb, "pause") && strcmp(verb, "resume") &&
        strcmp(verb, "stop")) {
        cli_error("lis batch ctl: '%s' is not status, pause, resume or stop", verb);
        return 2;
    }
    if (!strcmp(verb, "status") && argc > 4) {
        cli_error("lis batch ctl DIR status takes no ids");
        return 2;
    }
    lis_error err = {0};
    return lis_batch_ctl(argv[2], verb, (const char *const *)argv + 4, (size_t)(argc - 4), stdout,
                         &err) < 0
               ? cli_fail(&err)
               : 0;
}

/* One `lis batch` run from its flags to its end: what cmd_batch_main's phases
 * share. It stays where cmd_batch_main put it: o points into it (judge, watch,
 * rootfs) and the watch keeps c. */
typedef struct batch_cmd {
    bflags b;
    cli_list rest, args, owned; /* owned: the strings of a --resume's stored flags */
    agent_cli c;
    llm_config llm, judge;
    cJSON *extra, *settings;
    agent_watch watch;
    lis_batch_opts o;
    const char *resume;
    char shard[48];
    char rootfs[4096], rootfs_abs[PATH_MAX];
    lis_ctx *ctx;
} batch_cmd;

/* Phase 1: the flags (with --resume DIR alone, the run's own flags first: its
 * run.json "settings"), then the agent's flags. */
static int parse_flags(batch_cmd *bc, int argc, char **argv)
{
    bflags *b = &bc->b;
    lis_error err = {0};
    char name[64];
    for (int i = 1; i < argc; i++)
        if (batch_flag_name(argv[i], name, sizeof name) == 0 && !strcmp(name, "resume"))
            bc->resume = strchr(argv[i], '=') ? strchr(argv[i], '=') + 1
                         : i + 1 < argc       ? argv[i + 1]
                                              : NULL;
    int stored = bc->resume ? batch_resume_argv(bc->resume, argc, argv, &bc->args, &bc->owned) : 0;
    if (stored < 0)
        return -1;
    int nargs = stored ? (int)bc->args.n : argc;
    char **av = stored ? (char **)bc->args.v : argv;
    if (split_flags(nargs, av, b, &bc->rest) < 0)
        return -1;
    if (b->resume && b->output_dir) {
        cli_error("--output-dir has no use with --resume %s: the run's directory is that one",
                  b->resume);
        return -1;
    }
    if (agent_cli_parse((int)bc->rest.n, (char **)bc->rest.v, &bc->c, "batch", &err) < 0 ||
        agent_cli_settings(&bc->c, &err) < 0 ||
        agent_cli_llm(&bc->c, &bc->llm, &bc->extra, &err) < 0) {
        cli_error("%s", err.msg);
        return -1;
    }
    if (b->mode && strcmp(b->mode, "llm") && strcmp(b->mode, "llm-in-sandbox")) {
        cli_error("--mode: '%s' is not llm-in-sandbox or llm", b->mode);
        return -1;
    }
    return 0;
}

/* Phase 2: the environment a flag did not override, and the judge. */
static int read_env(batch_cmd *bc)
{
    bflags *b = &bc->b;
    /* original: the benchmark's LLM_TEMPERATURE and LLM_NUM_WORKERS */
    const char *et = getenv("LLM_TEMPERATURE"), *ew = getenv("LLM_NUM_WORKERS");
    if (!b->have_temperature && et && *et) {
        char *end;
        double t = strtod(et, &end);
        if (*end || t < 0) {
            cli_error("LLM_TEMPERATURE: '%s' is not a number", et);
            return -1;
        }
        bc->llm.temperature = t;
    }
    if (!b->concurrency_set && ew && *ew) {
        char *end;
        long w = strtol(ew, &end, 10);
        if (*end || w <= 0) {
            cli_error("LLM_NUM_WORKERS: '%s' is not a positive integer", ew);
            return -1;
        }
        b->concurrency = (int)w;
    }
    if (b->judge_model && judge_config(b, &bc->c, &bc->judge) < 0)
        return -1;
    return 0;
}

/* Phase 3: the rows first: a typo must not cost a first-use image build. */
static int check_rows(const bflags *b)
{
    const char *rows = b->task ? b->task : b->tasks;
    struct stat rst;
    if (!b->task == !b->tasks) {
        cli_error("give the rows: --task DIR (a benchmark folder) or --tasks FILE (JSON or "
                  "JSONL), not %s",
                  b->task ? "both" : "neither");
        return -1;
    }
    int st_rc = stat(rows, &rst);
    if (st_rc < 0 || (b->task && !S_ISDIR(rst.st_mode))) {
        cli_error("%s %s: %s", b->task ? "--task" : "--tasks", rows,
                  st_rc < 0 ? strerror(errno)
                            : "not a directory (a task folder holds "
                              "config.yaml; a file of rows is --tasks FILE)");
        return -1;
    }
    return 0;
}

/* Phase 4: the run's options from the flags: which rows, the shard, the
 * limits and the LLM. */
static int fill_opts(batch_cmd *bc)
{
    const bflags *b = &bc->b;
    const agent_cli *c = &bc->c;
    lis_batch_opts *o = &bc->o;
    lis_error err = {0};
    o->task_dir = b->task;
    o->tasks_file = b->tasks;
    o->prompt_config = b->prompt_config ? b->prompt_config : c->prompt_config;
    o->start_set = b->start_id != LONG_MIN;
    o->end_set = b->end_id != LONG_MIN;
    o->start_id = o->start_set ? b->start_id : 0;
    o->end_id = o->end_set ? b->end_id : 0;
    o->repeat = b->repeat > 0 ? b->repeat : 1;
    if (lis_batch_shard_resolve(b->shard, b->shards, getenv, &o->shard_index, &o->shard_count,
                                &err) < 0) {
        cli_error("%s", err.msg);
        return -1;
    }
    const char *array = getenv("SLURM_ARRAY_TASK_ID");
    if (array && *array && !o->shard_count && !bc->resume)
        fprintf(stderr,
                "lis: warning: this is task %s of a Slurm job array, and without --shard every "
                "array task runs every row; give --shard auto to split the rows between them\n",
                array);
    if (o->shard_count)
        snprintf(bc->shard, sizeof bc->shard, "%d/%d", o->shard_index, o->shard_count);
    if (b->output_dir)
        o->output_dir = b->output_dir;
    o->resume_dir = b->resume;
    o->save_files = b->save_files;
    o->fork_from_setup = b->fork_from_setup;
    o->concurrency = b->concurrency > 0 ? b->concurrency : 1;
    o->max_creating = b->max_creating > 0 ? b->max_creating : 0; /* 0: following the machine */
    o->max_commands = b->max_commands > 0 ? b->max_commands : o->concurrency;
    o->max_llm = b->max_llm > 0 ? b->max_llm : o->concurrency;
    if (b->warm_set)
        o->warm = b->warm;
    if (b->episode_timeout > 0)
        o->episode_timeout = b->episode_timeout;
    if (b->cmd_timeout > 0)
        o->cmd_timeout = b->cmd_timeout;
    o->drain_timeout = b->drain_timeout;
    o->mode_llm = b->mode && !strcmp(b->mode, "llm");
    if (b->max_response_len > 0)
        o->max_response_len = b->max_response_len;
    o->max_steps = c->max_steps;
    o->max_token_limit = c->max_token_limit;
    o->llm = bc->llm;
    o->llm_name = c->llm_name;
    o->scorer = b->scorer;
    o->judge = b->judge_model ? &bc->judge : NULL;
    o->quiet = b->quiet;
    o->tty = isatty(2);
    o->overcommit = b->overcommit;
    return 0;
}

/* Phase 5: the sandboxes' options: network, sizes, rules and the live view. */
static int fill_sandbox_opts(batch_cmd *bc)
{
    const bflags *b = &bc->b;
    agent_cli *c = &bc->c;
    lis_batch_opts *o = &bc->o;
    lis_error err = {0};
    if (agent_parse_net(c->net, &o->net) < 0) {
        cli_error("--net: '%s' is not one of none, host, proxy", c->net);
        return -1;
    }
    if (c->memory && agent_parse_size(c->memory, &o->memory_bytes) < 0) {
        cli_error("--memory: '%s' is not a size (e.g. 200M, 2G, unlimited)", c->memory);
        return -1;
    }
    if (c->disk && agent_parse_size(c->disk, &o->disk_bytes) < 0) {
        cli_error("--disk: '%s' is not a size (e.g. 1G, 20G, unlimited)", c->disk);
        return -1;
    }
    if (c->export_max && agent_parse_size(c->export_max, &o->export_max) < 0) {
        cli_error("--export-max: '%s' is not a size (e.g. 100M, 1G, unlimited)", c->export_max);
        return -1;
    }
    if (b->by) {
        cli_error("--by is a flag of lis batch report DIR");
        return -1;
    }
    if (o->mode_llm && (c->policy || c->nallow || c->ndeny || c->allow_host_network)) {
        cli_error("--policy and the domain rules act on sandboxes: --mode llm has none");
        return -1;
    }
    if (!o->mode_llm && agent_watch_init(&bc->watch, c, o->net, &err) < 0) {
        cli_error("%s", err.msg);
        return -1;
    }
    o->watch = o->mode_llm ? NULL : &bc->watch;
    o->live = b->live_set ? b->live : NULL;
    if (o->live && strchr(o->live, ':') && strncmp(o->live, "127.0.0.1:", 10) &&
        strncmp(o->live, "localhost:", 10)) {
        cli_error("--live %s: the live view listens on 127.0.0.1 only (reach it from elsewhere "
                  "with ssh -L)",
                  o->live);
        return -1;
    }
    return 0;
}

/* Phase 6: the context, the image (built on first use) and run.json's settings. */
static int prepare(batch_cmd *bc, cli_warn_once *wo)
{
    const agent_cli *c = &bc->c;
    lis_batch_opts *o = &bc->o;
    lis_error err = {0};
    lis_ctx_opts co = {.warn = cli_warn_once_fn, .warn_arg = wo};
    bc->ctx = lis_ctx_new(&co, &err);
    if (!bc->ctx) {
        cli_fail(&err);
        return -1;
    }
    if (!o->mode_llm) {
        if (cli_agent_rootfs(bc->ctx, c->image, c->rootfs, bc->rootfs, sizeof bc->rootfs) < 0)
            return -1;
        o->rootfs = bc->rootfs;
        /* run.json's docker_image: a --rootfs as an absolute path, so that a
         * resume from another directory is the same image */
        o->image = c->image    ? c->image
                   : c->rootfs ? (realpath(c->rootfs, bc->rootfs_abs) ? bc->rootfs_abs : c->rootfs)
                               : DEFAULT_IMAGE;
    }
    if (!(bc->settings = batch_run_settings(&bc->b, c, o, bc->shard[0] ? bc->shard : NULL))) {
        cli_error("out of memory");
        return -1;
    }
    o->settings = bc->settings;
    return 0;
}

/* Phase 7: the run and its report. 0 every episode has its row; 1 some were
 * cancelled (sum.finish runs them); CLI_EXIT_LIS the run failed. */
static int run(batch_cmd *bc)
{
    lis_error err = {0};
    lis_batch_summary sum;
    int r = lis_batch_run(bc->ctx, &bc->o, &sum, &err);
    if (r < 0) {
        int rc = cli_fail(&err);
        if (sum.finish[0]) /* the run had started: how it goes on once the cause is fixed */
            fprintf(stderr, "lis: %s: %s\n",
                    sum.done ? "the run stopped; finish it with"
                             : "no row was run; once that is fixed, run",
                    sum.finish);
        return rc;
    }
    if (!bc->o.quiet)
        printf("  %-22s %s\n", "output", sum.dir);
    return r;
}

static void batch_cmd_release(batch_cmd *bc)
{
    lis_ctx_free(bc->ctx);
    agent_watch_release(&bc->watch); /* its monitors went with their sandboxes */
    cJSON_Delete(bc->extra);
    cJSON_Delete(bc->settings);
    agent_cli_free(&bc->c);
    cli_list_free(&bc->rest);
    cli_list_free(&bc->args);
    for (size_t i = 0; i < bc->owned.n; i++)
        free((char *)bc->owned.v[i]);
    cli_list_free(&bc->owned);
}

int cmd_batch_main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "merge"))
        return sub_merge(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "ctl"))
        return sub_ctl(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "rescore"))
        return sub_rescore(argc, argv);
    if (argc >= 2 && (!strcmp(argv[1], "report") || !strcmp(argv[1], "judge")))
        return sub_report_or_judge(argc, argv);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
    batch_cmd bc;
    memset(&bc, 0, sizeof bc);
    bc.b.start_id = bc.b.end_id = LONG_MIN;
    lis_batch_opts_default(&bc.o);
    cli_warn_once wo = {.mu = PTHREAD_MUTEX_INITIALIZER, .scope = "of this run"};
    int rc = 2; /* a bad flag or row source */
    if (parse_flags(&bc, argc, argv) == 0 && read_env(&bc) == 0 && check_rows(&bc.b) == 0 &&
        fill_opts(&bc) == 0 && fill_sandbox_opts(&bc) == 0)
        rc = prepare(&bc, &wo) < 0 ? CLI_EXIT_LIS : run(&bc);
    batch_cmd_release(&bc);
    return rc;
}
