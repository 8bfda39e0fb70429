/* cmd_run.c - `lis run` front end (liblis-agent.so): parse the flags, pick
 * the root filesystem, run one episode, report. The work is in agent/. */
#include "agent.h"
#include "cli_util.h"
#include "agent_cli.h"
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
#include <limits.h>
#include <errno.h>
#include "rootfs.h"

#include <stdio.h>
#include <string.h>

#define EFFECT_PATHS 3 /* file paths (and alerts) named in a step's line */

static int arr_len(const cJSON *o, const char *k)
{
    return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, k));
}

static const char *plural(int n) { return n == 1 ? "" : "s"; }

/* agent_opts.on_step: one line of what the step did, under its step line
 * ("lis: step 2 did: 1 program, 1 file change (created /w/a.txt), 0 requests,
 * no alert"); the trajectory and the report have the whole of it. */
static void step_effects_line(void *arg, const cJSON *step)
{
    FILE *f = arg;
    const cJSON *fx = cJSON_GetObjectItemCaseSensitive(step, "effects");
    if (!cJSON_IsObject(fx)) {
        const char *why =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(step, "effects_error"));
        if (why)
            fprintf(f, "lis: step effects not recorded: %s\n", why);
        return;
    }
    int np = arr_len(fx, "processes"), nf = arr_len(fx, "files"), na = arr_len(fx, "alerts");
    int nr = arr_len(cJSON_GetObjectItemCaseSensitive(fx, "network"), "requests");
    fprintf(f, "lis: step %.0f did: %d program%s, %d file change%s",
            cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(fx, "step")), np, plural(np), nf,
            plural(nf));
    const cJSON *fc;
    int i = 0;
    cJSON_ArrayForEach(fc, cJSON_GetObjectItemCaseSensitive(fx, "files"))
    {
        const char *ch = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fc, "change"));
        const char *path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fc, "path"));
        if (i == EFFECT_PATHS) {
            fputs(", ...", f);
            break;
        }
        fprintf(f, "%s%s %.200s", i++ ? ", " : " (", ch ? ch : "?", path ? path : "?");
    }
    fprintf(f, "%s, %d request%s, ", i ? ")" : "", nr, plural(nr));
    if (!na) {
        fputs("no alert\n", f);
        return;
    }
    fprintf(f, "%d alert%s:", na, plural(na));
    const cJSON *a;
    int k = 0;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(fx, "alerts"))
    {
        if (k++ == EFFECT_PATHS) {
            fputs(" ...", f);
            break;
        }
        const char *rule = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "rule"));
        const char *act = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "action"));
        fprintf(f, " %s (%s)", rule ? rule : "?", act ? act : "?");
    }
    fputc('\n', f);
}

int cmd_run_main(int argc, char **argv)
{
    agent_cli c;
    lis_error err = {0};
    if (agent_cli_parse(argc, argv, &c, "run", &err) < 0) {
        cli_error("%s", err.msg);
        return 2;
    }
    if (c.help) {
        agent_cli_usage(stdout);
        return 0;
    }
    int rc = 2;
    lis_ctx *ctx = NULL;
    cJSON *extra = NULL;
    agent_prompts prompts = {0};
    llm_config llm;
    lis_net_mode net;
    agent_watch watch = {0};
    uint64_t mem = 200ull << 20;
    if (agent_cli_settings(&c, &err) < 0 || agent_cli_llm(&c, &llm, &extra, &err) < 0) {
        cli_error("%s", err.msg);
        goto out;
    }
    if (agent_parse_net(c.net, &net) < 0) {
        cli_error("--net: '%s' is not one of none, host, proxy", c.net);
        goto out;
    }
    if (c.memory && agent_parse_size(c.memory, &mem) < 0) {
        cli_error("--memory: '%s' is not a size (e.g. 200M, 2G, unlimited)", c.memory);
        goto out;
    }
    uint64_t disk = 0, export_max = 0;
    if (c.disk && agent_parse_size(c.disk, &disk) < 0) {
        cli_error("--disk: '%s' is not a size (e.g. 1G, 20G, unlimited)", c.disk);
        goto out;
    }
    if (c.export_max && agent_parse_size(c.export_max, &export_max) < 0) {
        cli_error("--export-max: '%s' is not a size (e.g. 100M, 1G, unlimited)", c.export_max);
        goto out;
    }
    if (c.prompt_config ? agent_prompts_load(&prompts, c.prompt_config, &err) < 0
                        : agent_prompts_default(&prompts) < 0) {
        cli_error("%s", err.msg);
        goto out;
    }
    if (agent_watch_init(&watch, &c, net, &err) < 0) { /* effects, --policy, domain rules */
        cli_error("%s", err.msg);
        goto out;
    }
    rc = CLI_EXIT_LIS;
    ctx = lis_ctx_new(NULL, &err);
    if (!ctx) {
        cli_fail(&err);
        goto out;
    }
    char rootfs[4096];
    if (cli_agent_rootfs(ctx, c.image, c.rootfs, rootfs, sizeof rootfs) < 0)
        goto out;
    agent_run r = {.opts = {.query = c.query,
                            .prompts = &prompts,
                            .max_steps = c.max_steps,
                            .max_token_limit = c.max_token_limit,
                            .llm = llm,
                            .llm_name = c.llm_name,
                            .progress = stderr,
                            .on_step = step_effects_line,
                            .on_step_arg = stderr},
                   .rootfs = rootfs,
                   .image = c.image    ? c.image
                            : c.rootfs ? c.rootfs
                                       : DEFAULT_IMAGE,
                   .input_dir = c.input_dir,
                   .output_dir = c.output_dir ? c.output_dir : "output",
                   .net = net,
                   .memory_bytes = mem,
                   .disk_bytes = disk,
                   .export_max = export_max,
                   .watch = &watch,
                   .out = stdout};
    agent_outcome res;
    if (agent_episode(ctx, &r, &res, NULL, 0, &err) < 0) {
        if (res.unreached) { /* as lis batch: the one line, and the LLM's exit status */
            cli_error("%s", err.msg);
            rc = 3;
            goto out;
        }
        cli_fail(&err);
        goto out;
    }
    /* 0 submitted, 1 ended without submit, 3 the LLM failed */
    rc = res.submitted ? 0 : res.stop == AGENT_STOP_LLM_ERROR ? 3 : 1;
out:
    lis_ctx_free(ctx);
    agent_watch_release(&watch); /* its monitors went with their sandboxes */
    agent_prompts_free(&prompts);
    cJSON_Delete(extra);
    agent_cli_free(&c);
    return rc;
}
