/* fuzz_settings.c - the files and texts `lis run` reads (agent/settings.c,
 * agent/prompts.c): a settings file, a prompt config (YAML through libyaml),
 * the task text filled into the instance prompt, --extra-body JSON and the
 * --memory / --net values. The input is all of these at once. */
#include "fuzz.h"
#include "agent_internal.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static char dir[256], path[300];

static void cleanup(void)
{
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/lis-fuzz-settings-XXXXXX", t && *t ? t : "/tmp");
    FUZZ_CHECK(mkdtemp(dir));
    atexit(cleanup);
    snprintf(path, sizeof path, "%s/settings.yaml", dir);
    /* only the file given is read: no home or environment settings */
    char home[300];
    snprintf(home, sizeof home, "%s/no-home", dir);
    setenv("HOME", home, 1);
    static const char *const unset[] = {"LLM_IN_SANDBOX_CONFIG", "LLM_BASE_URL", "OPENAI_BASE_URL",
                                        "OPENAI_API_KEY", "ANTHROPIC_API_KEY"};
    for (size_t i = 0; i < sizeof unset / sizeof unset[0]; i++)
        unsetenv(unset[i]);
    return 0;
}

static void write_input(const uint8_t *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(write(fd, data, size) == (ssize_t)size);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    FUZZ_CHECK(text);
    memcpy(text, data, size);
    text[size] = 0;
    lis_error err = {0};

    cJSON *y = agent_yaml_load(text, size, &err);
    if (y) {
        char *s = cJSON_PrintUnformatted(y);
        FUZZ_CHECK(s);
        free(s);
        cJSON_Delete(y);
    } else {
        FUZZ_CHECK(err.msg[0]);
    }

    write_input(data, size);
    /* as a settings file */
    agent_cli c;
    memset(&c, 0, sizeof c);
    c.settings = path;
    if (agent_cli_settings(&c, &err) == 0) {
        FUZZ_CHECK(c.llm_name && *c.llm_name && c.llm_base_url && *c.llm_base_url);
        FUZZ_CHECK(c.api_key && *c.api_key);
        llm_config cfg;
        cJSON *extra = NULL;
        if (agent_cli_llm(&c, &cfg, &extra, &err) == 0)
            FUZZ_CHECK(cfg.model);
        cJSON_Delete(extra);
    } else {
        FUZZ_CHECK(err.msg[0]);
    }
    agent_cli_free(&c);
    /* as --extra-body */
    memset(&c, 0, sizeof c);
    c.llm_name = "openai/m";
    c.extra_body = text;
    llm_config cfg;
    cJSON *extra = NULL;
    if (agent_cli_llm(&c, &cfg, &extra, &err) == 0 && *text)
        FUZZ_CHECK(cJSON_IsObject(extra) && cfg.extra_body == extra);
    cJSON_Delete(extra);

    /* as a prompt config, and as the task filled into the default one */
    agent_prompts p;
    if (agent_prompts_load(&p, path, &err) == 0) {
        char *sys = agent_prompt_system(&p), *inst = agent_prompt_instance(&p, text);
        FUZZ_CHECK(sys && inst);
        free(sys);
        free(inst);
        agent_prompts_free(&p);
    } else {
        FUZZ_CHECK(err.msg[0]);
    }
    FUZZ_CHECK(agent_prompts_default(&p) == 0);
    char *inst = agent_prompt_instance(&p, text);
    FUZZ_CHECK(inst && strstr(inst, text));
    free(inst);
    agent_prompts_free(&p);

    uint64_t sz;
    lis_net_mode net;
    (void)agent_parse_size(text, &sz);
    (void)agent_parse_net(text, &net);
    free(text);
    return 0;
}
