/* tools.c - the three tools (execute_bash, str_replace_editor, submit): their
 * schemas, their execution in the sandbox, and the exact observation texts
 * the model sees.
 * original: tools.py's schemas, observation.py's texts, byte for byte. */
#include "agent_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* original: observation.py's CONTINUE_MSG */
const char AGENT_CONTINUE_MSG[] = "\nYou forgot to use a function call in your response. \n"
                                  "YOU MUST USE A FUNCTION CALL IN EACH RESPONSE.\n"
                                  "\n"
                                  "IMPORTANT: YOU SHOULD NEVER ASK FOR HUMAN HELP.\n";

/* original: tools.py's descriptions, byte for byte */
static const char EDITOR_DESCRIPTION[] =
    "Custom editing tool for viewing, creating and editing files\n"
    "* State is persistent across command calls and discussions with the user\n"
    "* If `path` is a file, `view` displays the result of applying `cat -n`. If `path` is a "
    "directory, `view` lists non-hidden files and directories up to 2 levels deep\n"
    "* The `create` command cannot be used if the specified `path` already exists as a file\n"
    "* If a `command` generates a long output, it will be truncated and marked with "
    "`<response clipped>`\n"
    "\n"
    "Notes for using the `str_replace` command:\n"
    "* The `old_str` parameter should match EXACTLY one or more consecutive lines from the "
    "original file. Be mindful of whitespaces!\n"
    "* If the `old_str` parameter is not unique in the file, the replacement will not be "
    "performed. Make sure to include enough context in `old_str` to make it unique\n"
    "* The `new_str` parameter should contain the edited lines that should replace the "
    "`old_str`\n";

static const char BASH_DESCRIPTION[] =
    "\nExecute a bash command in the terminal.\n"
    "\n"
    "Parameters:\n"
    "  (1) command (string, required): The bash command to execute. For example: "
    "`python my_script.py`.\n";

static const char SUBMIT_DESCRIPTION[] =
    "\nA simple submit tool to finish tasks.\n"
    "\n"
    "This tool signals completion of a task or submission of results.\n"
    "No parameters required - simply call to indicate task completion.\n";

static cJSON *prop(cJSON *props, const char *name, const char *desc, const char *type)
{
    cJSON *p = cJSON_AddObjectToObject(props, name);
    cJSON_AddStringToObject(p, "description", desc);
    cJSON_AddStringToObject(p, "type", type);
    return p;
}

static cJSON *tool(cJSON *arr, const char *name, const char *desc, cJSON **props)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "type", "function");
    cJSON *f = cJSON_AddObjectToObject(t, "function");
    cJSON_AddStringToObject(f, "name", name);
    cJSON_AddStringToObject(f, "description", desc);
    cJSON *params = cJSON_AddObjectToObject(f, "parameters");
    cJSON_AddStringToObject(params, "type", "object");
    *props = cJSON_AddObjectToObject(params, "properties");
    cJSON_AddItemToArray(arr, t);
    return params;
}

cJSON *agent_tool_schemas(void)
{
    cJSON *arr = cJSON_CreateArray(), *props, *params;

    params = tool(arr, "str_replace_editor", EDITOR_DESCRIPTION, &props);
    cJSON *cmd = cJSON_AddObjectToObject(props, "command");
    cJSON_AddStringToObject(cmd, "description",
                            "The command to run. Allowed options are: "
                            "`view`, `create`, `str_replace`, `insert`.");
    const char *cmds[] = {"view", "create", "str_replace", "insert"};
    cJSON_AddItemToObject(cmd, "enum", cJSON_CreateStringArray(cmds, 4));
    cJSON_AddStringToObject(cmd, "type", "string");
    prop(props, "path",
         "Absolute path to file or directory, e.g. `/testbed/file.py` or "
         "`/testbed`.",
         "string");
    prop(props, "file_text",
         "Required for the `create` command, contains the content of the "
         "file to be created.",
         "string");
    prop(props, "old_str",
         "Required for the `str_replace` command, specifies the string in "
         "`path` to replace.",
         "string");
    prop(props, "new_str",
         "Optional for the `str_replace` command to specify the replacement "
         "string. Required for the `insert` command to specify the string to insert.",
         "string");
    prop(props, "insert_line",
         "Required for the `insert` command. The `new_str` will be "
         "inserted AFTER the line specified.",
         "integer");
    cJSON *vr = prop(props, "view_range",
                     "Optional for the `view` command when `path` points "
                     "to a file. Specifies the line range to view. E.g., [11, 12] shows lines 11 "
                     "and 12. Indexing starts at 1. Use [start_line, -1] to show all lines from "
                     "`start_line` to the end.",
                     "array");
    cJSON_AddObjectToObject(vr, "items");
    cJSON_AddStringToObject(cJSON_GetObjectItem(vr, "items"), "type", "integer");
    const char *req[] = {"command", "path"};
    cJSON_AddItemToObject(params, "required", cJSON_CreateStringArray(req, 2));

    params = tool(arr, "execute_bash", BASH_DESCRIPTION, &props);
    cJSON *c = cJSON_AddObjectToObject(props, "command");
    cJSON_AddStringToObject(c, "type", "string");
    cJSON_AddStringToObject(c, "description",
                            "The command (and optional arguments) to "
                            "execute. For example: 'python my_script.py'");
    const char *req2[] = {"command"};
    cJSON_AddItemToObject(params, "required", cJSON_CreateStringArray(req2, 1));

    params = tool(arr, "submit", SUBMIT_DESCRIPTION, &props);
    cJSON_AddItemToObject(params, "required", cJSON_CreateArray());
    return arr;
}

/* ---- output cleaning and observation text ------------------------------ */

/* Python's str.splitlines separators (after \r removal): length or 0.
 * original: its line cut splits with str.splitlines. */
static size_t line_sep(const char *p)
{
    unsigned char c = (unsigned char)*p;
    if (c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e)
        return 1;
    if (c == 0xC2 && (unsigned char)p[1] == 0x85)
        return 2;
    if (c == 0xE2 && (unsigned char)p[1] == 0x80 &&
        ((unsigned char)p[2] == 0xA8 || (unsigned char)p[2] == 0xA9))
        return 3;
    return 0;
}

char *agent_truncate_lines(const char *s, int num_lines)
{
    size_t n = strlen(s), nl = 0, cap = 64;
    size_t(*span)[2] = malloc(cap * sizeof *span);
    if (!span)
        return NULL;
    size_t start = 0, i = 0;
    while (i < n) {
        size_t l = line_sep(s + i);
        if (!l) {
            i++;
            continue;
        }
        if (nl == cap) {
            void *g = realloc(span, (cap *= 2) * sizeof *span);
            if (!g) {
                free(span);
                return NULL;
            }
            span = g;
        }
        span[nl][0] = start;
        span[nl++][1] = i;
        i += l;
        start = i;
    }
    if (start < n) {
        if (nl == cap) {
            void *g = realloc(span, (cap + 1) * sizeof *span);
            if (!g) {
                free(span);
                return NULL;
            }
            span = g;
        }
        span[nl][0] = start;
        span[nl++][1] = n;
    }
    if (nl <= (size_t)(2 * num_lines)) {
        free(span);
        return agent_strdup(s);
    }
    strbuf b = {0};
    for (size_t k = 0; k < (size_t)num_lines; k++) {
        if (k)
            strbuf_putc(&b, '\n');
        strbuf_putn(&b, s + span[k][0], span[k][1] - span[k][0]);
    }
    strbuf_puts(&b, "\n--------------------------------------------------\n"
                    "<Observation truncated in middle for saving context>\n"
                    "--------------------------------------------------\n");
    for (size_t k = nl - (size_t)num_lines; k < nl; k++) {
        if (k != nl - (size_t)num_lines)
            strbuf_putc(&b, '\n');
        strbuf_putn(&b, s + span[k][0], span[k][1] - span[k][0]);
    }
    free(span);
    return strbuf_take(&b);
}

/* original: no byte cap (docs/agent.md fix 3); the divider is its line cut's */
char *agent_cap_bytes(const char *s, size_t cap, uint64_t extra_dropped)
{
    size_t n = strlen(s);
    if (n <= cap && !extra_dropped)
        return agent_strdup(s);
    size_t head = n <= cap ? n : cap / 2, tail = n <= cap ? 0 : cap - cap / 2;
    /* cut on UTF-8 boundaries */
    while (head > 0 && head < n && ((unsigned char)s[head] & 0xC0) == 0x80)
        head--;
    size_t ts = n - tail;
    while (tail && ts < n && ((unsigned char)s[ts] & 0xC0) == 0x80)
        ts++;
    uint64_t omitted = (uint64_t)(ts - head) + extra_dropped;
    strbuf b = {0};
    strbuf_putn(&b, s, head);
    strbuf_printf(&b,
                  "\n--------------------------------------------------\n"
                  "<Observation truncated in middle for saving context: %llu bytes omitted>\n"
                  "--------------------------------------------------\n",
                  (unsigned long long)omitted);
    if (ts < n)
        strbuf_putn(&b, s + ts, n - ts);
    return strbuf_take(&b);
}

static int blank(const char *s)
{
    for (; *s; s++)
        if (!isspace((unsigned char)*s) && !(*s >= 0x1c && *s <= 0x1f))
            return 0;
    return 1;
}

/* original: observation.py's bash text; \[STDOUT] keeps its literal backslash,
 * \[STDERR] only when stderr is not blank */
char *agent_obs_bash(const char *exit_str, const char *out, const char *err)
{
    strbuf b = {0};
    strbuf_printf(&b, "Exit code: %s\nExecution output of \\[execute_bash]:\n", exit_str);
    strbuf_puts(&b, "\\[STDOUT]\n");
    if (!blank(out))
        strbuf_puts(&b, out);
    if (!blank(err)) {
        strbuf_puts(&b, "\n\\[STDERR]\n");
        strbuf_puts(&b, err);
    }
    return strbuf_take(&b);
}

/* One stream as the model sees it: cleaned, line-cut, byte-capped. */
static char *stream_text(const lis_buf *buf, size_t obs_cap)
{
    char *clean = agent_clean_output(buf->data ? buf->data : "", buf->data ? buf->len : 0);
    if (!clean)
        return NULL;
    char *cut = agent_truncate_lines(clean, AGENT_TRUNC_LINES);
    free(clean);
    if (!cut)
        return NULL;
    char *capped = agent_cap_bytes(cut, obs_cap, buf->dropped);
    free(cut);
    return capped;
}

/* original: the exec's environment, DOCKER_PATH and the PIP_* variables */
static const char *const BASH_ENV[] =
    {"PATH=/root/.local/bin:/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:"
     "/usr/bin:/sbin:/bin",
     "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_ROOT_USER_ACTION=ignore",
     "PIP_NO_WARN_SCRIPT_LOCATION=1", NULL};

void agent_bash_prepare(const agent_tool_env *env, const char *command, agent_bash *b)
{
    memset(b, 0, sizeof *b);
    b->argv[0] = env->shell ? env->shell : "bash";
    b->argv[1] = "-c";
    b->argv[2] = command;
    b->spec = (lis_exec_spec){.argv = b->argv,
                              .cwd = env->workdir,
                              .env = BASH_ENV,
                              .in = LIS_STDIO_NULL,
                              .out = LIS_STDIO_CAPTURE,
                              .err = LIS_STDIO_CAPTURE,
                              .out_cap = env->capture_cap ? env->capture_cap : AGENT_CAPTURE_CAP,
                              .timeout = env->timeout > 0 ? env->timeout : AGENT_CMD_TIMEOUT};
}

/* original: the exit texts "0", "Error: Exit code N", "-1" and the timeout's
 * message; a command's own exit 124 is no timeout here (docs/agent.md fix 5) */
void agent_bash_observe(const agent_tool_env *env, const agent_bash *b, int rc,
                        const lis_result *res, const lis_error *err, agent_tool_out *out)
{
    size_t cap = env->obs_cap ? env->obs_cap : AGENT_OBS_CAP;
    char code[64];
    if (rc < 0 || res->exec_failed) {
        char msg[800];
        snprintf(msg, sizeof msg, "Error: %s", rc < 0 ? err->msg : res->err_msg);
        out->exit_code = -1;
        out->obs = agent_obs_bash("-1", msg, "");
    } else if (res->timed_out) {
        char msg[128];
        snprintf(msg, sizeof msg, "The command took too long to execute (>%gs)", b->spec.timeout);
        out->exit_code = -1;
        out->obs = agent_obs_bash("-1", msg, "");
    } else {
        char *so = stream_text(&res->out, cap), *se = stream_text(&res->err, cap);
        out->exit_code = res->exit_code;
        if (res->exit_code == 0)
            snprintf(code, sizeof code, "0");
        else
            snprintf(code, sizeof code, "Error: Exit code %d", res->exit_code);
        out->obs = so && se ? agent_obs_bash(code, so, se) : NULL;
        free(so);
        free(se);
    }
    if (rc == 0) {
        out->oom_killed = res->oom_killed;
        out->memory_peak = res->memory_peak;
    }
}

const char *agent_bash_command(const char *name, const cJSON *params, char **printed)
{
    *printed = NULL;
    if (!name || strcmp(name, "execute_bash") || !cJSON_IsObject(params))
        return NULL;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(params, "command");
    const char *cmd = NULL;
    if (cJSON_IsString(c))
        cmd = c->valuestring;
    else if (c && !cJSON_IsNull(c) && !cJSON_IsFalse(c))
        cmd = *printed = cJSON_PrintUnformatted(c);
    return cmd && *cmd ? cmd : NULL;
}

static void run_bash(const agent_tool_env *env, const char *command, agent_tool_out *out)
{
    agent_bash b;
    agent_bash_prepare(env, command, &b);
    lis_result res = {0};
    lis_error err = {0};
    double t0 = lis_now();
    int rc = lis_exec(env->sb, &b.spec, &res, &err);
    out->exec_seconds = lis_now() - t0;
    agent_bash_observe(env, &b, rc, &res, &err, out);
    if (rc == 0)
        lis_result_free(&res);
}

/* original: _execute_action's texts: "Error: No command provided." and
 * "Unknown action: X" without a header, the editor's header, "<<< Finished >>>" */
void agent_tool_exec(const agent_tool_env *env, const char *name, const cJSON *params,
                     agent_tool_out *out)
{
    memset(out, 0, sizeof *out);
    if (!name || !*name || !cJSON_IsObject(params)) {
        out->obs = agent_strdup(AGENT_CONTINUE_MSG);
        return;
    }
    if (!strcmp(name, "execute_bash")) {
        char *printed = NULL;
        const char *cmd = agent_bash_command(name, params, &printed);
        if (!cmd)
            out->obs = agent_strdup("Error: No command provided.");
        else
            run_bash(env, cmd, out);
        free(printed);
    } else if (!strcmp(name, "str_replace_editor")) {
        ed_fs fs;
        agent_editor_sandbox_fs(&fs, env);
        double t0 = lis_now();
        char *r = agent_editor_run(&fs, env->workdir, params);
        out->exec_seconds = lis_now() - t0;
        if (r) {
            strbuf b = {0};
            strbuf_puts(&b, "Execution output of \\[str_replace_editor]:\n");
            strbuf_puts(&b, r);
            out->obs = strbuf_take(&b);
            free(r);
        }
    } else if (!strcmp(name, "submit")) {
        out->obs = agent_strdup("<<< Finished >>>");
        out->done = 1;
    } else {
        strbuf b = {0};
        strbuf_printf(&b, "Unknown action: %s", name);
        out->obs = strbuf_take(&b);
    }
    if (!out->obs)
        out->obs = agent_strdup("Error: out of memory while running the tool");
}
