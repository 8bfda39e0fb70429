/* cmd_snapshot.c - `lis sandbox snapshot NAME` and `lis sandbox fork NAME
 * -n N` (issue 15; in liblis-rootfs.so, which has the store's writing side).
 * Parse, call rootfs.h, print. */
#include "cli_util.h"
#include "lis_net.h"
#include "rootfs.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lis_cli_snapshot_main(int argc, char **argv);

static const char snapshot_usage[] =
    "usage: lis sandbox snapshot NAME [--tag NAME[:TAG]] [--json]\n"
    "  Stores the files sandbox NAME wrote (its writable layer and /tmp) as an image\n"
    "  over the image it runs on; the sandbox is paused for the copy only. A snapshot\n"
    "  holds files, not processes: a sandbox made from it starts fresh on those files.\n"
    "  Use it with lis sandbox create|run --image T, lis run --image T, docker run T.\n";
static const char fork_usage[] =
    "usage: lis sandbox fork NAME -n N [--name PREFIX] [--tag NAME[:TAG]] [--json]\n"
    "  One snapshot of sandbox NAME, then N persistent sandboxes on it (PREFIX-1..N,\n"
    "  default NAME-fork-1..N), each independent of the others and of NAME. They get\n"
    "  NAME's environment, limits and network mode (not its --allow-domain rules, nor\n"
    "  its processes: a snapshot holds files only).\n";

static void print_snapshot(const lis_snapshot_result *r, cJSON *j)
{
    if (j) {
        cJSON_AddStringToObject(j, "id", r->digest);
        if (r->ref[0])
            cJSON_AddStringToObject(j, "tag", r->ref);
        else
            cJSON_AddNullToObject(j, "tag");
        cJSON_AddStringToObject(j, "parent", r->parent);
        cJSON_AddNumberToObject(j, "depth", r->depth);
        cJSON_AddNumberToObject(j, "files", (double)r->capture.files);
        cJSON_AddNumberToObject(j, "bytes", (double)r->capture.bytes);
        cJSON_AddNumberToObject(j, "paused_ms", r->capture.paused_ms);
        cJSON_AddBoolToObject(j, "existed", r->existed);
        return;
    }
    printf("%s%s%s\n", r->digest, r->ref[0] ? " " : "", r->ref);
    fprintf(stderr,
            "lis: snapshot of %llu files (%llu bytes) over %s, %d layers; paused "
            "%.1f ms%s; it holds files, not processes\n",
            (unsigned long long)r->capture.files, (unsigned long long)r->capture.bytes, r->parent,
            r->depth, r->capture.paused_ms,
            r->existed ? "; the same snapshot was in the store" : "");
}

static int emit_json(cJSON *j)
{
    char *s = lis_json_print(j, 1);
    cJSON_Delete(j);
    if (!s)
        return CLI_EXIT_LIS;
    puts(s);
    free(s);
    return 0;
}

/* Ctrl-C (or SIGTERM, SIGHUP, SIGQUIT) in the middle of the copy would
 * leave the sandbox paused, and in the middle of a fork half of the forks
 * behind: these signals are held from the start; the step in progress ends,
 * no fork begins after one arrived, what was made is removed, and then the
 * process dies of the signal as it would have (the shell sees 130 for ^C). */
static void hold_signals(sigset_t *set, sigset_t *old)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGQUIT);
    pthread_sigmask(SIG_BLOCK, set, old); /* before any thread: the fork threads inherit it */
}

static int interrupted(void *arg)
{
    const sigset_t *held = arg;
    sigset_t p;
    if (sigpending(&p) < 0)
        return 0;
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(held, sig) == 1 && sigismember(&p, sig) == 1)
            return 1;
    return 0;
}

/* Removes what an interrupted command made: forks (n of out) and, unless it
 * was in the store before, the snapshot; then lets the held signal in. */
static void undo_and_die(lis_ctx *ctx, const char *name, lis_sandbox **out, int n,
                         const lis_snapshot_result *snap, const sigset_t *old)
{
    int gone = 0;
    lis_error e = {0};
    for (int i = 0; i < n; i++)
        if (out[i]) {
            if (lis_sandbox_destroy(out[i], &e) == 0)
                gone++;
            out[i] = NULL;
        }
    int kept = snap->existed;
    if (!kept && lis_rootfs_rm(lis_ctx_data_dir(ctx), snap->digest, NULL, &e) < 0)
        kept = 1;
    char forks[64] = "";
    if (out)
        snprintf(forks, sizeof forks, "%d fork%s removed, ", gone, gone == 1 ? "" : "s");
    fprintf(stderr, "lis: interrupted: %sthe snapshot %s; sandbox %s runs on as before\n", forks,
            kept ? "kept (it was in the store already, or could not be removed)" : "removed", name);
    fflush(stdout);
    fflush(stderr);
    pthread_sigmask(SIG_SETMASK, old, NULL); /* the pending signal ends the process here */
}

/* Persistent forks; --net proxy ones through lis proxyd, as `lis sandbox create`. */
static int create_fork(void *arg, const lis_sandbox_spec *spec, int i, lis_sandbox **out,
                       lis_error *err)
{
    (void)i;
    return lis_net_sandbox_create(arg, spec, NULL, out, err);
}

/* The command line of `lis sandbox snapshot|fork`. */
typedef struct snap_args {
    int fork_mode, json, n;
    const char *usage, *tag, *prefix, *name;
} snap_args;

/* -1 to go on; else the exit code (--help, or a bad command line). */
static int parse_args(int argc, char **argv, snap_args *a)
{
    *a = (snap_args){.fork_mode = !strcmp(argv[0], "fork")};
    a->usage = a->fork_mode ? fork_usage : snapshot_usage;
    enum { O_TAG = 1, O_JSON, O_NAME };
    static const struct option opts[] = {{"tag", required_argument, 0, O_TAG},
                                         {"json", no_argument, 0, O_JSON},
                                         {"name", required_argument, 0, O_NAME},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, a->fork_mode ? "n:h" : "h", opts, NULL)) != -1;) {
        switch (c) {
        case O_TAG: a->tag = optarg; break;
        case O_JSON: a->json = 1; break;
        case O_NAME: a->prefix = optarg; break;
        case 'n': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 1024) {
                cli_error("sandbox fork: -n takes a number from 1 to 1024 (got '%s')", optarg);
                return 2;
            }
            a->n = (int)v;
            break;
        }
        case 'h': fputs(a->usage, stdout); return 0;
        default:
            cli_error("sandbox %s: unknown or incomplete option '%s' (lis sandbox %s --help)",
                      argv[0], argv[optind - 1], argv[0]);
            return 2;
        }
    }
    if (optind != argc - 1 || (a->fork_mode && !a->n) || (!a->fork_mode && a->prefix)) {
        fputs(a->usage, stderr);
        return 2;
    }
    a->name = argv[optind];
    return -1;
}

/* `lis sandbox snapshot NAME`. */
static int run_snapshot(lis_ctx *ctx, lis_sandbox *sb, const snap_args *a, sigset_t *held,
                        const sigset_t *old)
{
    lis_snapshot_result snap;
    lis_error err = {0};
    if (lis_rootfs_snapshot(lis_ctx_data_dir(ctx), sb, a->tag, &snap, &err) < 0)
        return cli_fail(&err);
    if (interrupted(held)) {
        undo_and_die(ctx, a->name, NULL, 0, &snap, old);
        return 130;
    }
    if (!a->json) {
        print_snapshot(&snap, NULL);
        return 0;
    }
    cJSON *j = cJSON_CreateObject();
    print_snapshot(&snap, j);
    return emit_json(j);
}

/* The snapshot and each fork's name (or error), as lines or JSON; releases
 * the forks. CLI_EXIT_LIS when a fork failed. */
static int print_forks(const snap_args *a, const lis_snapshot_result *snap, lis_sandbox **forks,
                       const lis_error *errs, char (*names)[80])
{
    int rc = 0;
    cJSON *j = a->json ? cJSON_CreateObject() : NULL;
    cJSON *arr = NULL;
    if (j) {
        print_snapshot(snap, cJSON_AddObjectToObject(j, "snapshot"));
        arr = cJSON_AddArrayToObject(j, "sandboxes");
    } else {
        print_snapshot(snap, NULL);
    }
    for (int i = 0; i < a->n; i++) {
        cJSON *e = arr ? cJSON_CreateObject() : NULL;
        if (forks[i]) {
            if (e)
                cJSON_AddStringToObject(e, "name", lis_sandbox_name(forks[i]));
            else
                printf("%s\n", lis_sandbox_name(forks[i]));
            lis_sandbox_release(forks[i]);
        } else {
            if (e)
                cJSON_AddStringToObject(e, "error", errs[i].msg);
            else
                fprintf(stderr, "lis: fork %d (%s): %s\n", i + 1, names[i], errs[i].msg);
            rc = CLI_EXIT_LIS;
        }
        if (e)
            cJSON_AddItemToArray(arr, e);
    }
    if (j) {
        int jr = emit_json(j);
        rc = rc ? rc : jr;
    }
    return rc;
}

/* `lis sandbox fork NAME -n N`: N persistent forks named PREFIX-fork-I (or
 * --name's PREFIXI) of one snapshot. */
static int run_fork(lis_ctx *ctx, lis_sandbox *sb, const snap_args *a, sigset_t *held,
                    const sigset_t *old)
{
    int n = a->n, rc;
    lis_sandbox **forks = calloc((size_t)n, sizeof *forks);
    lis_error *errs = calloc((size_t)n, sizeof *errs);
    char(*names)[80] = calloc((size_t)n, sizeof *names);
    const char **nv = calloc((size_t)n, sizeof *nv);
    if (!forks || !errs || !names || !nv) {
        cli_error("out of memory");
        rc = CLI_EXIT_LIS;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "%s-%s%d", a->prefix ? a->prefix : a->name,
                 a->prefix ? "" : "fork-", i + 1);
        nv[i] = names[i];
    }
    lis_sandbox_spec spec = {.env = lis_sandbox_env(sb),
                             .net = lis_sandbox_net(sb),
                             .limits = lis_sandbox_limits(sb),
                             .upper = LIS_UPPER_DISK,
                             .persist = 1};
    /* lis_net_sandbox_create may run on several threads at once (lis batch does) */
    lis_fork_opts fo = {.spec = &spec,
                        .names = nv,
                        .tag = a->tag,
                        .create = create_fork,
                        .create_arg = ctx,
                        .threads = 4,
                        .cancelled = interrupted,
                        .cancel_arg = held};
    lis_snapshot_result snap;
    lis_error err = {0};
    if (lis_sandbox_fork(ctx, sb, n, &fo, forks, errs, &snap, &err) < 0) {
        rc = cli_fail(&err);
    } else if (interrupted(held)) {
        undo_and_die(ctx, a->name, forks, n, &snap, old);
        rc = 130;
    } else {
        rc = print_forks(a, &snap, forks, errs, names);
    }
out:
    free(forks);
    free(errs);
    free(names);
    free(nv);
    return rc;
}

int lis_cli_snapshot_main(int argc, char **argv)
{
    snap_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    sigset_t held, old;
    hold_signals(&held, &old);
    lis_error err = {0};
    cli_warn_once wo = {.mu = PTHREAD_MUTEX_INITIALIZER, .scope = "of this fork"};
    lis_ctx_opts co = {.warn = cli_warn_once_fn, .warn_arg = &wo};
    lis_ctx *ctx = lis_ctx_new(&co, &err);
    lis_sandbox *sb = NULL;
    if (!ctx || lis_sandbox_open(ctx, a.name, &sb, &err) < 0)
        rc = cli_fail(&err);
    else
        rc = a.fork_mode ? run_fork(ctx, sb, &a, &held, &old)
                         : run_snapshot(ctx, sb, &a, &held, &old);
    if (sb)
        lis_sandbox_release(sb);
    lis_ctx_free(ctx);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
