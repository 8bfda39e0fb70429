/* prompts.c - the system and instance prompts: config/general.yaml
 * (embedded verbatim and parsed like any --prompt-config), and the placeholder
 * filling (str.replace for the directories, then str.format for
 * {problem_statement}, {command_docs} and {demo}).
 * original: its general.yaml, and the way it fills the placeholders. */
#include "agent_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* original: llm_in_sandbox/config/general.yaml, byte for byte. */
static const char GENERAL_YAML[] =
    "system_prompt: |-\n"
    "  You are an expert specializing in solving complex problems using code.\n"
    "\n"
    "  <TASK>\n"
    "  You need to complete the given task by following the instructions precisely.\n"
    "  </TASK>\n"
    "\n"
    "  <DIRECTORIES>\n"
    "  - Working directory: {working_dir}\n"
    "  - Input directory: {input_dir}  <-- User-provided input files/assets are here\n"
    "  - Output directory: {output_dir}  <-- Put ALL your outputs here\n"
    "  </DIRECTORIES>\n"
    "\n"
    "  <WORKFLOW>\n"
    "  1. Read the problem carefully\n"
    "  2. Check {input_dir} for any input files if the task mentions them\n"
    "  3. Analyze the problem and determine the solution approach\n"
    "  4. **MUST write code to a file and execute it** - DO NOT just think about the answer, use print statements directly, or hardcode answers\n"
    "  5. Save all outputs to {output_dir} directory\n"
    "  </WORKFLOW>\n"
    "\n"
    "  <IMPORTANT_NOTES>\n"
    "  - Use execute_bash to run scripts or commands\n"
    "  - Use str_replace_editor to view, create and edit files\n"
    "  - Use submit to finish once you have completed the task\n"
    "  </IMPORTANT_NOTES>\n"
    "\n"
    "  <ENCOURAGED_APPROACHES>\n"
    "  - You have full access to this isolated environment - feel free to install packages, create files, run experiments, etc.\n"
    "  - Explore diverse problem-solving approaches: use libraries, tools, external data, computations, simulations, or any method that helps\n"
    "  - The environment is sandboxed for your use - be creative and try different computational strategies\n"
    "  - The more comprehensive and computational your approach, the better\n"
    "  </ENCOURAGED_APPROACHES>\n"
    "\n"
    "  <ANTI_HARDCODING>\n"
    "  STRICTLY PROHIBITED: Do not use large comment blocks or print statements for natural language thinking (e.g., `# Let me think step by step...` or `print(\"First, I need to consider...\")`). Do not hardcode answers like `answer = \"A\"` or `return 'A'`. You must derive the final result through actual computational logic, mathematical operations, and programmatic analysis of the problem data.\n"
    "  </ANTI_HARDCODING>\n"
    "\n"
    "instance_prompt: |-\n"
    "  <problem>\n"
    "  {problem_statement}\n"
    "  </problem>\n"
    "\n"
    "  Please solve this problem. \n"
    "  \n"
    "  <OUTPUT_INSTRUCTIONS>\n"
    "  - If the task requires a specific answer (e.g., a number, text, or computation result): write the final answer to {output_dir}/answer.txt (plain text, answer only, no explanations)\n"
    "  - If the task requires creating a project, code, or multiple files: save all files directly to {output_dir}/\n"
    "  </OUTPUT_INSTRUCTIONS>\n"
    "\n"
    "  Working directory: {working_dir}\n"
    "  Input files (if any): {input_dir}\n"
    "  Output directory: {output_dir}\n"
    "\n"
    "# Container paths for input/output (NOTE that these are paths within the sandbox container, NOT your local machine)\n"
    "working_dir: \"/testbed\"\n"
    "input_dir: \"/testbed/input\"\n"
    "output_dir: \"/testbed/output\"";

static char *get_str(const cJSON *cfg, const char *key, const char *def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsString(v))
        return agent_strdup(v->valuestring);
    return def ? agent_strdup(def) : NULL;
}

static int from_yaml(agent_prompts *p, const char *text, size_t len, const char *what,
                     lis_error *err)
{
    memset(p, 0, sizeof *p);
    cJSON *cfg = agent_yaml_load(text, len, err);
    if (!cfg)
        return -1;
    if (!cJSON_IsObject(cfg)) {
        cJSON_Delete(cfg);
        return lis_fail(err, EINVAL,
                        "%s: expected a mapping with system_prompt and "
                        "instance_prompt",
                        what);
    }
    p->system_prompt = get_str(cfg, "system_prompt", "");
    p->instance_prompt = get_str(cfg, "instance_prompt", "");
    p->working_dir = get_str(cfg, "working_dir", "/testbed");
    p->input_dir = get_str(cfg, "input_dir", "/testbed/input");
    p->output_dir = get_str(cfg, "output_dir", "/testbed/output");
    cJSON_Delete(cfg);
    if (!p->system_prompt || !p->instance_prompt || !p->working_dir || !p->input_dir ||
        !p->output_dir) {
        agent_prompts_free(p);
        return lis_oom(err);
    }
    return 0;
}

int agent_prompts_default(agent_prompts *p)
{
    lis_error err;
    return from_yaml(p, GENERAL_YAML, sizeof GENERAL_YAML - 1, "general.yaml", &err);
}

int agent_prompts_load(agent_prompts *p, const char *path, lis_error *err)
{
    size_t len = 0;
    char *text = agent_read_host_file(path, &len, err);
    if (!text)
        return lis_fail(err, err->code, "prompt config not found: %s", path);
    int rc = from_yaml(p, text, len, path, err);
    free(text);
    return rc;
}

void agent_prompts_free(agent_prompts *p)
{
    free(p->system_prompt);
    free(p->instance_prompt);
    free(p->working_dir);
    free(p->input_dir);
    free(p->output_dir);
    memset(p, 0, sizeof *p);
}

static char *replace_all(const char *s, const char *from, const char *to)
{
    strbuf b = {0};
    strbuf_putn(&b, "", 0);
    size_t fn = strlen(from);
    for (const char *p = s;;) {
        const char *m = strstr(p, from);
        if (!m) {
            strbuf_puts(&b, p);
            break;
        }
        strbuf_putn(&b, p, (size_t)(m - p));
        strbuf_puts(&b, to);
        p = m + fn;
    }
    return strbuf_take(&b);
}

static char *fill_dirs(const agent_prompts *p, const char *tmpl)
{
    char *a = replace_all(tmpl, "{input_dir}", p->input_dir);
    char *b = a ? replace_all(a, "{output_dir}", p->output_dir) : NULL;
    char *c = b ? replace_all(b, "{working_dir}", p->working_dir) : NULL;
    free(a);
    free(b);
    return c;
}

/* str.format with the given fields; unknown fields are left as they are. */
static char *format(const char *t, const char *const *keys, const char *const *vals, size_t n)
{
    strbuf b = {0};
    strbuf_putn(&b, "", 0);
    for (const char *p = t; *p;) {
        if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
            strbuf_putc(&b, p[0]);
            p += 2;
            continue;
        }
        if (*p == '{') {
            size_t i;
            for (i = 0; i < n; i++) {
                size_t kl = strlen(keys[i]);
                if (!strncmp(p + 1, keys[i], kl) && p[1 + kl] == '}')
                    break;
            }
            if (i < n) {
                strbuf_puts(&b, vals[i]);
                p += strlen(keys[i]) + 2;
                continue;
            }
        }
        strbuf_putc(&b, *p++);
    }
    return strbuf_take(&b);
}

char *agent_prompt_system(const agent_prompts *p)
{
    char *s = fill_dirs(p, p->system_prompt);
    static const char *const keys[] = {"command_docs", "demo"};
    static const char *const vals[] = {"", ""};
    char *r = s ? format(s, keys, vals, 2) : NULL;
    free(s);
    return r;
}

char *agent_prompt_instance(const agent_prompts *p, const char *problem_statement)
{
    if (!p->instance_prompt || !*p->instance_prompt)
        return agent_strdup(problem_statement);
    char *s = fill_dirs(p, p->instance_prompt);
    const char *keys[] = {"problem_statement"};
    const char *vals[] = {problem_statement};
    char *r = s ? format(s, keys, vals, 1) : NULL;
    free(s);
    return r;
}
