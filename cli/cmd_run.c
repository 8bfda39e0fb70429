/* cmd_run.c - `lis run` front end (liblis-agent.so): parse the flags, pick
 * the root filesystem, run one episode, report. The work is in agent/. */
#include "agent.h"
#include "cli_util.h"
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
#include <limits.h>
#include <errno.h>
#include "rootfs.h"

#include <stdio.h>
#include <string.h>

#define DEFAULT_IMAGE "lis-agent:latest"

/* Runs scripts/make-rootfs.sh (next to the build, or installed under
 * share/lis) with its progress on stderr; 0 when it succeeded. */
static int build_default_image(void)
{
    char exe[PATH_MAX], script[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", exe);
    *strrchr(dir, '/') = 0;
    static const char *const rel[] = {"%s/../scripts/make-rootfs.sh", "%s/../share/lis/make-rootfs.sh"};
    script[0] = 0;
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(script, sizeof script, rel[i], dir);
        if (access(script, R_OK) == 0)
            break;
        script[0] = 0;
    }
    if (!script[0])
        return -1;
    cli_error("the default image %s is missing: building it now (first use, a few minutes)",
              DEFAULT_IMAGE);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(2, 1); /* stdout is for the answer */
        setenv("LIS", exe, 1);
        execl("/bin/bash", "bash", script, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int lis_cli_agent_main(int argc, char **argv);

static int run(int argc, char **argv)
{
    agent_cli c;
    lis_error err = {0};
    if (agent_cli_parse(argc, argv, &c, &err) < 0) {
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
    if (c.prompt_config ? agent_prompts_load(&prompts, c.prompt_config, &err) < 0
                        : agent_prompts_default(&prompts) < 0) {
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
    if (c.rootfs) {
        snprintf(rootfs, sizeof rootfs, "%s", c.rootfs);
    } else if (lis_store_resolve(lis_ctx_data_dir(ctx), c.image ? c.image : DEFAULT_IMAGE,
                                 rootfs, sizeof rootfs, &err) < 0) {
        if (c.image) {
            cli_fail(&err);
            goto out;
        }
        /* first use: build the default image, then look again */
        if (build_default_image() < 0 ||
            lis_store_resolve(lis_ctx_data_dir(ctx), DEFAULT_IMAGE, rootfs, sizeof rootfs,
                              &err) < 0) {
            cli_error("the default image %s is not in the store: build it with "
                      "scripts/make-rootfs.sh, or pass --rootfs DIR", DEFAULT_IMAGE);
            goto out;
        }
    }
    agent_run r = {
        .opts = {.query = c.query, .prompts = &prompts, .max_steps = c.max_steps,
                 .max_token_limit = c.max_token_limit, .llm = llm, .llm_name = c.llm_name,
                 .progress = stderr},
        .rootfs = rootfs, .input_dir = c.input_dir,
        .output_dir = c.output_dir ? c.output_dir : "output", .net = net, .memory_bytes = mem,
        .out = stdout};
    agent_outcome res;
    if (agent_episode(ctx, &r, &res, NULL, 0, &err) < 0) {
        cli_fail(&err);
        goto out;
    }
    /* 0 submitted, 1 ended without submit, 3 the LLM failed */
    rc = res.submitted ? 0 : !strcmp(res.stop_reason, "llm_error") ? 3 : 1;
out:
    lis_ctx_free(ctx);
    agent_prompts_free(&prompts);
    cJSON_Delete(extra);
    agent_cli_free(&c);
    return rc;
}

int lis_cli_agent_main(int argc, char **argv)
{
    if (!strcmp(argv[0], "batch")) {
        cli_error("batch: not implemented yet; run episodes one by one with `lis run`");
        return 2;
    }
    return run(argc, argv);
}
