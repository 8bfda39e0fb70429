/* test_agent_unit.c - the agent's pure parts, without a sandbox or a server:
 * tool schemas, observation texts, the 40+40 cut, the byte cap, the editor
 * on an in-memory file system, text tool calls, SSE assembly, the
 * context-length rule, prompts, YAML and flags. */
#include "agent_internal.h"
#include "testlib.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- schemas and observations ------------------------------------------ */

Test(agent_unit, tool_schemas_match_the_original)
{
    cJSON *t = agent_tool_schemas();
    cr_assert_eq(cJSON_GetArraySize(t), 3);
    const char *names[] = {"str_replace_editor", "execute_bash", "submit"};
    for (int i = 0; i < 3; i++) {
        cJSON *f = cJSON_GetObjectItem(cJSON_GetArrayItem(t, i), "function");
        cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(f, "name")), names[i]);
    }
    cJSON *ed = cJSON_GetObjectItem(cJSON_GetArrayItem(t, 0), "function");
    cJSON *props = cJSON_GetObjectItem(cJSON_GetObjectItem(ed, "parameters"), "properties");
    char *enm =
        cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(props, "command"), "enum"));
    cr_assert_str_eq(enm, "[\"view\",\"create\",\"str_replace\",\"insert\"]");
    free(enm);
    char *req = cJSON_PrintUnformatted(
        cJSON_GetObjectItem(cJSON_GetObjectItem(ed, "parameters"), "required"));
    cr_assert_str_eq(req, "[\"command\",\"path\"]");
    free(req);
    cr_assert(!cJSON_GetObjectItem(props, "undo_edit"));
    cJSON *bash = cJSON_GetObjectItem(cJSON_GetArrayItem(t, 1), "function");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(bash, "description")),
                     "\nExecute a bash command in the terminal.\n\nParameters:\n  (1) command "
                     "(string, required): The bash command to execute. For example: "
                     "`python my_script.py`.\n");
    cJSON *sub = cJSON_GetObjectItem(cJSON_GetArrayItem(t, 2), "function");
    char *sp = cJSON_PrintUnformatted(cJSON_GetObjectItem(sub, "parameters"));
    cr_assert_str_eq(sp, "{\"type\":\"object\",\"properties\":{},\"required\":[]}");
    free(sp);
    cJSON_Delete(t);
}

Test(agent_unit, bash_observation_text)
{
    char *o = agent_obs_bash("0", "hi\n", "");
    cr_assert_str_eq(o, "Exit code: 0\nExecution output of \\[execute_bash]:\n\\[STDOUT]\nhi\n");
    free(o);
    o = agent_obs_bash("Error: Exit code 2", "", "ls: x: No such file\n");
    cr_assert_str_eq(o, "Exit code: Error: Exit code 2\nExecution output of \\[execute_bash]:\n"
                        "\\[STDOUT]\n\n\\[STDERR]\nls: x: No such file\n");
    free(o);
    o = agent_obs_bash("0", "  \n", " ");
    cr_assert_str_eq(o, "Exit code: 0\nExecution output of \\[execute_bash]:\n\\[STDOUT]\n");
    free(o);
    cr_assert_str_eq(AGENT_CONTINUE_MSG,
                     "\nYou forgot to use a function call in your response. "
                     "\nYOU MUST USE A FUNCTION CALL IN EACH RESPONSE.\n\nIMPORTANT: YOU SHOULD "
                     "NEVER ASK FOR HUMAN HELP.\n");
}

Test(agent_unit, forty_plus_forty_cut)
{
    strbuf b = {0};
    for (int i = 1; i <= 100; i++)
        strbuf_printf(&b, "line %d\n", i);
    char *in = strbuf_take(&b), *out = agent_truncate_lines(in, 40);
    strbuf e = {0};
    for (int i = 1; i <= 40; i++)
        strbuf_printf(&e, "%sline %d", i > 1 ? "\n" : "", i);
    strbuf_puts(&e,
                "\n--------------------------------------------------\n<Observation truncated in "
                "middle for saving context>\n--------------------------------------------------\n");
    for (int i = 61; i <= 100; i++)
        strbuf_printf(&e, "%sline %d", i > 61 ? "\n" : "", i);
    char *exp = strbuf_take(&e);
    cr_assert_str_eq(out, exp);
    free(out);
    free(exp);
    free(in);
    /* 80 lines are kept whole, trailing newline included */
    strbuf c = {0};
    for (int i = 1; i <= 80; i++)
        strbuf_printf(&c, "x%d\n", i);
    in = strbuf_take(&c);
    out = agent_truncate_lines(in, 40);
    cr_assert_str_eq(out, in);
    free(out);
    free(in);
}

Test(agent_unit, clean_output_strips_ansi_cr_and_fixes_utf8)
{
    const char in[] = "\x1b[1;31mred\x1b[0m\r\nok\x1b[2K\xff\xc3\xa9\0z";
    char *o = agent_clean_output(in, sizeof in - 1);
    cr_assert_str_eq(o, "red\nok\xef\xbf\xbd\xc3\xa9z");
    free(o);
}

Test(agent_unit, byte_cap_keeps_head_and_tail)
{
    size_t n = 5u << 20;
    char *big = malloc(n + 1);
    memset(big, 'a', n);
    big[0] = 'H';
    big[n - 1] = 'T';
    big[n] = 0;
    char *o = agent_cap_bytes(big, AGENT_OBS_CAP, 0);
    cr_assert_lt(strlen(o), AGENT_OBS_CAP + 300);
    cr_assert_eq(o[0], 'H');
    cr_assert_eq(o[strlen(o) - 1], 'T');
    cr_assert(strstr(o, "bytes omitted>"));
    free(o);
    free(big);
    o = agent_cap_bytes("short", 100, 0);
    cr_assert_str_eq(o, "short");
    free(o);
    o = agent_cap_bytes("short", 100, 12345);
    cr_assert(strstr(o, "12345 bytes omitted"));
    free(o);
}

/* ---- the editor on an in-memory file system ---------------------------- */

typedef struct mfile {
    char path[128];
    char kind;
    char *data;
    size_t len;
    char target[128];
} mfile;
typedef struct mfs {
    mfile f[16];
    int n;
} mfs;

static mfile *mfind(mfs *m, const char *path)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->f[i].path, path))
            return &m->f[i];
    return NULL;
}

static mfile *madd(mfs *m, const char *path, char kind, const char *data, size_t len)
{
    mfile *f = mfind(m, path);
    if (!f)
        f = &m->f[m->n++];
    snprintf(f->path, sizeof f->path, "%s", path);
    f->kind = kind;
    free(f->data);
    f->data = NULL;
    f->len = len;
    if (data) {
        f->data = malloc(len + 1);
        memcpy(f->data, data, len);
        f->data[len] = 0;
    }
    return f;
}

static int m_read(void *ctx, const char *path, size_t max, char **data, size_t *len, lis_error *err)
{
    mfile *f = mfind(ctx, path);
    if (!f || f->kind != 'f')
        return lis_fail(err, ENOENT, "%s: no such file", path);
    if (f->len > max)
        return lis_fail(err, EFBIG, "too big");
    *data = malloc(f->len + 1);
    memcpy(*data, f->data, f->len);
    (*data)[f->len] = 0;
    *len = f->len;
    return 0;
}

static int m_write(void *ctx, const char *path, const char *data, size_t len, lis_error *err)
{
    mfile *f = mfind(ctx, path);
    if (f && f->kind != 'f')
        return lis_fail(err, EISDIR, "%s is not a file", path);
    madd(ctx, path, 'f', data, len);
    return 0;
}

static int m_stat(void *ctx, const char *path, char *kind, uint64_t *size, lis_error *err)
{
    mfile *f = mfind(ctx, path);
    if (!f) {
        if (!strcmp(path, "/"))
            return *kind = 'd', 0;
        return lis_fail(err, ENOENT, "missing");
    }
    *kind = f->kind;
    if (size)
        *size = f->len;
    return 0;
}

static char *m_list(void *ctx, const char *path, lis_error *err)
{
    mfs *m = ctx;
    strbuf b = {0};
    for (int i = 0; i < m->n; i++)
        if (!strncmp(m->f[i].path, path, strlen(path)))
            strbuf_printf(&b, "%s\n", m->f[i].path);
    return strbuf_take(&b);
}

static char *m_resolve(void *ctx, const char *path, lis_error *err)
{
    mfile *f = mfind(ctx, path);
    if (f && f->kind == 'l')
        return agent_strdup(f->target);
    return agent_strdup(path);
}

static ed_fs fs_of(mfs *m)
{
    ed_fs fs = {m, m_read, m_write, m_stat, m_list, m_resolve};
    madd(m, "/testbed", 'd', NULL, 0);
    return fs;
}

static void mfree(mfs *m)
{
    for (int i = 0; i < m->n; i++)
        free(m->f[i].data);
}

static char *ed(const ed_fs *fs, const char *json)
{
    cJSON *p = cJSON_Parse(json);
    cr_assert(p, "bad test json %s", json);
    char *r = agent_editor_run(fs, "/testbed", p);
    cJSON_Delete(p);
    return r;
}

Test(agent_unit, editor_create_keeps_every_byte)
{
    mfs m = {0};
    ed_fs fs = fs_of(&m);
    char *r = ed(&fs, "{\"command\":\"create\",\"path\":\"/testbed/a.txt\","
                      "\"file_text\":\"x\\ty\\r\\nno newline\"}");
    cr_assert_str_eq(r, "File created at /testbed/a.txt. Here's the result of running `cat -n` on "
                        "/testbed/a.txt:\n     1\tx       y\n     2\tno newline\nReview the file "
                        "and make sure that it is as expected. Edit the file if necessary.");
    free(r);
    mfile *f = mfind(&m, "/testbed/a.txt");
    cr_assert_eq(f->len, 15);
    cr_assert(!memcmp(f->data, "x\ty\r\nno newline", 15));
    /* relative paths are under /testbed */
    r = ed(&fs, "{\"command\":\"create\",\"path\":\"sub/b.py\",\"file_text\":\"\"}");
    cr_assert(mfind(&m, "/testbed/sub/b.py"));
    free(r);
    mfree(&m);
}

Test(agent_unit, editor_view_any_text_file_and_range)
{
    mfs m = {0};
    ed_fs fs = fs_of(&m);
    madd(&m, "/testbed/n.json", 'f', "a\nb\nc\n", 6);
    char *r = ed(&fs, "{\"command\":\"view\",\"path\":\"/testbed/n.json\"}");
    cr_assert_str_eq(r, "Here's the result of running `cat -n` on /testbed/n.json:\n     1\ta\n"
                        "     2\tb\n     3\tc\n     4\t");
    free(r);
    r = ed(&fs, "{\"command\":\"view\",\"path\":\"/testbed/n.json\",\"view_range\":[2,3]}");
    cr_assert_str_eq(r, "Here's the result of running `cat -n` on /testbed/n.json:\n     2\tb\n"
                        "     3\tc");
    free(r);
    r = ed(&fs, "{\"command\":\"view\",\"path\":\"/testbed/n.json\",\"view_range\":[9,-1]}");
    cr_assert_str_eq(r, "Error: Invalid view_range [9, -1]: start line must be in [1, 4]");
    free(r);
    r = ed(&fs, "{\"command\":\"view\",\"path\":\"/testbed/nope\"}");
    cr_assert_str_eq(r, "Error: Path not found: /testbed/nope");
    free(r);
    r = ed(&fs, "{\"command\":\"view\",\"path\":\"/testbed\"}");
    const char *dh = "Here's the files and directories up to 2 levels deep in /testbed, "
                     "excluding hidden:\n/testbed\n";
    cr_assert(!strncmp(r, dh, strlen(dh)), "%s", r);
    free(r);
    r = ed(&fs, "{\"command\":\"undo_edit\",\"path\":\"/testbed\"}");
    cr_assert_str_eq(r, "Unknown command: undo_edit");
    free(r);
    r = ed(&fs, "{\"command\":\"view\"}");
    cr_assert_str_eq(r, "Error: command and path are required.");
    free(r);
    mfree(&m);
}

Test(agent_unit, editor_str_replace_errors)
{
    mfs m = {0};
    ed_fs fs = fs_of(&m);
    madd(&m, "/testbed/f.py", 'f', "x = 1\nx = 1\n", 12);
    char *r = ed(&fs, "{\"command\":\"str_replace\",\"path\":\"/testbed/f.py\",\"old_str\":\"y\"}");
    cr_assert_str_eq(r, "Error: No occurrences of old_str found in /testbed/f.py for replacement.");
    free(r);
    r = ed(&fs, "{\"command\":\"str_replace\",\"path\":\"/testbed/f.py\",\"old_str\":\"x = 1\","
                "\"new_str\":\"z\"}");
    cr_assert_str_eq(r, "Error: Multiple occurrences (2) of old_str found in /testbed/f.py. Please "
                        "ensure it is unique before using str_replace.");
    free(r);
    r = ed(&fs, "{\"command\":\"str_replace\",\"path\":\"/testbed/f.py\"}");
    cr_assert_str_eq(r, "Error: old_str is required for str_replace.");
    free(r);
    cr_assert_eq(mfind(&m, "/testbed/f.py")->len, 12);
    mfree(&m);
}

Test(agent_unit, editor_str_replace_snippet_and_crlf)
{
    mfs m = {0};
    ed_fs fs = fs_of(&m);
    const char *crlf = "l1\r\nl2\r\nl3\r\nl4\r\nl5\r\nl6\r\nl7\r\nl8\r\nl9\r\nl10";
    madd(&m, "/testbed/w.txt", 'f', crlf, strlen(crlf));
    /* what `view` shows has no \r: the match still works, CRLF is kept */
    char *r = ed(&fs, "{\"command\":\"str_replace\",\"path\":\"/testbed/w.txt\",\"old_str\":"
                      "\"l5\\nl6\",\"new_str\":\"five\\nsix\\nsix.5\"}");
    cr_assert_str_eq(r,
                     "The file /testbed/w.txt has been edited. Here's the result of running "
                     "`cat -n` on a snippet of /testbed/w.txt:\n     1\tl1\n     2\tl2\n     3\t"
                     "l3\n     4\tl4\n     5\tfive\n     6\tsix\n     7\tsix.5\n     8\tl7\n     "
                     "9\tl8\n    10\tl9\n    11\tl10\nReview the changes and make sure they are "
                     "as expected. Edit the file again if necessary.");
    free(r);
    mfile *f = mfind(&m, "/testbed/w.txt");
    cr_assert_str_eq(f->data, "l1\r\nl2\r\nl3\r\nl4\r\nfive\r\nsix\r\nsix.5\r\nl7\r\nl8\r\nl9\r\n"
                              "l10");
    mfree(&m);
}

Test(agent_unit, editor_tabs_are_kept)
{
    mfs m = {0};
    ed_fs fs = fs_of(&m);
    const char *src = "def f():\n\tif x:\n\t\treturn 1\n\treturn 2\n";
    madd(&m, "/testbed/t.py", 'f', src, strlen(src));
    /* exact match with a tab */
    char *r = ed(&fs, "{\"command\":\"str_replace\",\"path\":\"/testbed/t.py\",\"old_str\":"
                      "\"\\treturn 2\",\"new_str\":\"\\treturn 3\"}");
    cr_assert(strstr(r, "has been edited"), "%s", r);
    free(r);
    cr_assert_str_eq(mfind(&m, "/testbed/t.py")->data,
                     "def f():\n\tif x:\n\t\treturn 1\n\treturn 3\n");
    /* as shown by view (tabs expanded to 8 columns): the other tabs survive */
    r = ed(&fs, "{\"command\":\"str_replace\",\"path\":\"/testbed/t.py\",\"old_str\":"
                "\"                return 1\",\"new_str\":\"\\t\\treturn 10\"}");
    cr_assert(strstr(r, "has been edited"), "%s", r);
    free(r);
    cr_assert_str_eq(mfind(&m, "/testbed/t.py")->data,
                     "def f():\n\tif x:\n\t\treturn 10\n\treturn 3\n");
    mfree(&m);
}

Test(agent_unit, editor_insert)
{
    mfs m = {0};
    ed_fs fs = fs_of(&m);
    madd(&m, "/testbed/i.txt", 'f', "a\nb", 3);
    char *r = ed(&fs, "{\"command\":\"insert\",\"path\":\"/testbed/i.txt\",\"insert_line\":0,"
                      "\"new_str\":\"top\"}");
    cr_assert_str_eq(r, "The file /testbed/i.txt has been edited. Here's the result of running "
                        "`cat -n` on a snippet of the edited file:\n     1\ttop\n     2\ta\n     "
                        "3\tb\nReview the changes and make sure they are as expected (correct "
                        "indentation, no duplicate lines, etc). Edit the file again if necessary.");
    free(r);
    cr_assert_str_eq(mfind(&m, "/testbed/i.txt")->data, "top\na\nb");
    r = ed(&fs, "{\"command\":\"insert\",\"path\":\"/testbed/i.txt\",\"insert_line\":3,"
                "\"new_str\":\"end\"}");
    free(r);
    cr_assert_str_eq(mfind(&m, "/testbed/i.txt")->data, "top\na\nb\nend");
    r = ed(&fs, "{\"command\":\"insert\",\"path\":\"/testbed/i.txt\",\"insert_line\":9,"
                "\"new_str\":\"x\"}");
    cr_assert_str_eq(r, "Error: Invalid insert_line 9. Must be in [0, 4].");
    free(r);
    r = ed(&fs, "{\"command\":\"insert\",\"path\":\"/testbed/i.txt\",\"insert_line\":1}");
    cr_assert_str_eq(r, "Error: new_str is required for insert.");
    free(r);
    mfree(&m);
}

Test(agent_unit, editor_big_binary_and_symlink)
{
    mfs m = {0};
    ed_fs fs = fs_of(&m);
    /* 1 MB: viewing is clipped, editing works on the whole file */
    size_t n = 1u << 20;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (i % 64 == 63) ? '\n' : 'a' + (char)(i % 26);
    memcpy(big + n / 2, "NEEDLE", 6);
    madd(&m, "/testbed/big.txt", 'f', big, n);
    char *r = ed(&fs, "{\"command\":\"view\",\"path\":\"/testbed/big.txt\"}");
    cr_assert(strstr(r, "<response clipped><NOTE>"));
    cr_assert_lt(strlen(r), 10500);
    free(r);
    r = ed(&fs, "{\"command\":\"str_replace\",\"path\":\"/testbed/big.txt\",\"old_str\":"
                "\"NEEDLE\",\"new_str\":\"pin\"}");
    cr_assert(strstr(r, "has been edited"), "%s", r);
    free(r);
    mfile *f = mfind(&m, "/testbed/big.txt");
    cr_assert_eq(f->len, n - 3);
    cr_assert(!memcmp(f->data + n / 2, "pin", 3));
    cr_assert(!memcmp(f->data, big, n / 2));
    free(big);
    /* binary */
    madd(&m, "/testbed/b.bin", 'f',
         "\x7f"
         "ELF\0\0\x01",
         7);
    r = ed(&fs, "{\"command\":\"view\",\"path\":\"/testbed/b.bin\"}");
    cr_assert(strstr(r, "is a binary file"), "%s", r);
    free(r);
    r = ed(&fs, "{\"command\":\"str_replace\",\"path\":\"/testbed/b.bin\",\"old_str\":\"ELF\"}");
    cr_assert(strstr(r, "is a binary file"), "%s", r);
    free(r);
    cr_assert_eq(mfind(&m, "/testbed/b.bin")->len, 7);
    /* a symlink out of /testbed */
    mfile *l = madd(&m, "/testbed/link", 'l', NULL, 0);
    snprintf(l->target, sizeof l->target, "/etc/passwd");
    madd(&m, "/etc/passwd", 'f', "root:x:0:0\n", 11);
    r = ed(&fs, "{\"command\":\"view\",\"path\":\"/testbed/link\"}");
    cr_assert_str_eq(r, "Error: /testbed/link is a symlink to /etc/passwd, outside /testbed; "
                        "refusing to follow it.");
    free(r);
    r = ed(&fs, "{\"command\":\"create\",\"path\":\"/testbed/link\",\"file_text\":\"x\"}");
    cr_assert(strstr(r, "refusing to follow it"), "%s", r);
    free(r);
    cr_assert_eq(mfind(&m, "/etc/passwd")->len, 11);
    /* inside /testbed is fine */
    l = madd(&m, "/testbed/in", 'l', NULL, 0);
    snprintf(l->target, sizeof l->target, "/testbed/big.txt");
    r = ed(&fs, "{\"command\":\"view\",\"path\":\"/testbed/in\",\"view_range\":[1,1]}");
    cr_assert(strstr(r, "     1\tabcdef"), "%s", r);
    free(r);
    mfree(&m);
}

Test(agent_unit, ed_replace_and_insert_buffers)
{
    char *out;
    size_t ol, count, line;
    cr_assert_eq(ed_replace("a\tb\n", 4, "a\tb", "c", &out, &ol, &count, &line), 0);
    cr_assert_str_eq(out, "c\n");
    free(out);
    cr_assert_eq(ed_replace("aXa", 3, "a", "b", &out, &ol, &count, &line), -1);
    cr_assert_eq(count, 2);
    long nl;
    cr_assert_eq(ed_insert("x\r\ny\r\n", 6, 1, "z", &out, &ol, &nl), 0);
    cr_assert_str_eq(out, "x\r\nz\r\ny\r\n");
    free(out);
    cr_assert_eq(ed_insert("", 0, 0, "only", &out, &ol, &nl), 0);
    cr_assert_str_eq(out, "only\n");
    free(out);
}

/* ---- text tool calls --------------------------------------------------- */

Test(agent_unit, hermes_calls)
{
    cJSON *tools = agent_tool_schemas();
    text_call c[4];
    char *rest = NULL;
    size_t n = agent_parse_text_calls(
        "I will list.\n<tool_call>\n{\"name\": \"execute_bash\", \"arguments\": {\"command\": "
        "\"ls -la\"}}\n</tool_call>\n<tool_call>{\"name\":\"submit\",\"arguments\":{}}"
        "</tool_call>",
        tools, c, 4, &rest);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(c[0].name, "execute_bash");
    cr_assert_str_eq(c[0].arguments, "{\"command\":\"ls -la\"}");
    cr_assert_str_eq(c[1].name, "submit");
    cr_assert_str_eq(rest, "I will list.");
    agent_text_calls_free(c, n);
    free(rest);
    n = agent_parse_text_calls("no calls here", tools, c, 4, &rest);
    cr_assert_eq(n, 0);
    cr_assert_str_eq(rest, "no calls here");
    free(rest);
    n = agent_parse_text_calls("<tool_call>{not json}</tool_call>", tools, c, 4, NULL);
    cr_assert_eq(n, 0);
    cJSON_Delete(tools);
}

Test(agent_unit, qwen3_coder_calls)
{
    cJSON *tools = agent_tool_schemas();
    text_call c[4];
    char *rest = NULL;
    size_t n = agent_parse_text_calls(
        "Let me edit.\n<tool_call>\n<function=str_replace_editor>\n<parameter=command>\ninsert\n"
        "</parameter>\n<parameter=path>\n/testbed/a.py\n</parameter>\n<parameter=insert_line>\n"
        "3\n</parameter>\n<parameter=new_str>\n    x = 1\n    y = 2\n</parameter>\n"
        "<parameter=view_range>\n[1, -1]\n</parameter>\n</function>\n</tool_call>",
        tools, c, 4, &rest);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(c[0].name, "str_replace_editor");
    cJSON *a = cJSON_Parse(c[0].arguments);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(a, "command")), "insert");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(a, "path")), "/testbed/a.py");
    cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(a, "insert_line")));
    cr_assert_eq(cJSON_GetObjectItem(a, "insert_line")->valueint, 3);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(a, "new_str")),
                     "    x = 1\n    y = 2");
    cr_assert(cJSON_IsArray(cJSON_GetObjectItem(a, "view_range")));
    cJSON_Delete(a);
    cr_assert_str_eq(rest, "Let me edit.");
    agent_text_calls_free(c, n);
    free(rest);
    /* bare <function=...> without <tool_call>, value kept as a string */
    n = agent_parse_text_calls("<function=execute_bash><parameter=command>echo 1 && echo 2"
                               "</parameter></function>",
                               tools, c, 4, NULL);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(c[0].arguments, "{\"command\":\"echo 1 && echo 2\"}");
    agent_text_calls_free(c, n);
    cJSON_Delete(tools);
}

/* ---- SSE --------------------------------------------------------------- */

Test(agent_unit, sse_assembles_tool_call_deltas)
{
    const char *stream =
        ": keep-alive\n\n"
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"hm\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"Run\"}}]}\r\n\r\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":"
        "\"function\",\"function\":{\"name\":\"execute_bash\",\"arguments\":\"\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
        "\"{\\\"comm\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
        "\"and\\\": \\\"ls\\\"}\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"c2\",\"function\":"
        "{\"name\":\"submit\",\"arguments\":\"{}\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,"
        "\"total_tokens\":8}}\n\n"
        "data: [DONE]\n\n";
    /* fed in awkward pieces */
    for (size_t step = 1; step <= 13; step += 4) {
        sse_state s;
        sse_init(&s);
        for (size_t i = 0; i < strlen(stream); i += step)
            sse_feed(&s, stream + i, strlen(stream + i) < step ? strlen(stream + i) : step);
        sse_finish(&s);
        cr_assert(s.done);
        cr_assert_str_eq(s.content.s, "Run");
        cr_assert_str_eq(s.reasoning.s, "hm");
        cr_assert_str_eq(s.finish_reason, "tool_calls");
        cr_assert_eq(s.usage.total_tokens, 8);
        char *tc = cJSON_PrintUnformatted(s.tool_calls);
        cr_assert_str_eq(tc, "[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":"
                             "\"execute_bash\",\"arguments\":\"{\\\"command\\\": \\\"ls\\\"}\"}},"
                             "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":"
                             "\"submit\",\"arguments\":\"{}\"}}]");
        free(tc);
        sse_free(&s);
    }
}

/* 2 MB of arguments in 7-byte deltas, fed straight to the parser: linear
 * (cJSON strings re-copied at every delta took 66 s); its CPU is printed. */
Test(agent_unit, sse_assembles_2_mb_of_7_byte_deltas, .timeout = 60)
{
    enum { N = 2 << 20 };
    sse_state s;
    sse_init(&s);
    const char *head = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\","
                       "\"function\":{\"name\":\"execute_bash\",\"arguments\":\"\"}}]}}]}\n\n";
    sse_feed(&s, head, strlen(head));
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    for (int i = 0; i < N; i += 7) {
        char ev[256];
        int n = snprintf(ev, sizeof ev,
                         "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,"
                         "\"function\":{\"arguments\":\"%.*s\"}}]}}]}\n\n",
                         N - i < 7 ? N - i : 7, "aaaaaaa");
        sse_feed(&s, ev, (size_t)n);
    }
    const char *tail = "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
                       "data: [DONE]\n\n";
    sse_feed(&s, tail, strlen(tail));
    sse_finish(&s);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    printf("2 MiB of 7-byte argument deltas assembled in %.3f s of CPU\n",
           (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
    cJSON *f0 = cJSON_GetObjectItem(cJSON_GetArrayItem(s.tool_calls, 0), "function");
    const char *args = cJSON_GetStringValue(cJSON_GetObjectItem(f0, "arguments"));
    cr_assert(args);
    cr_assert_eq(strlen(args), (size_t)N);
    cr_assert_eq(strspn(args, "a"), (size_t)N);
    sse_free(&s);
}

/* More tool calls than SSE_MAX_CALLS in one stream: the first ones are kept,
 * the rest dropped and said so (calls_dropped). */
Test(agent_unit, sse_tool_calls_are_bounded)
{
    sse_state s;
    sse_init(&s);
    for (int i = 0; i < SSE_MAX_CALLS + 10; i++) {
        char ev[256];
        int n = snprintf(ev, sizeof ev,
                         "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":%d,"
                         "\"id\":\"c%d\",\"function\":{\"name\":\"submit\",\"arguments\":\"{}\"}}]"
                         "}}]}\n\n",
                         i, i);
        sse_feed(&s, ev, (size_t)n);
    }
    sse_finish(&s);
    cr_assert_eq(cJSON_GetArraySize(s.tool_calls), SSE_MAX_CALLS);
    cr_assert(s.calls_dropped);
    sse_free(&s);
}

/* ---- the context-length rule ------------------------------------------- */

Test(agent_unit, token_error_shrinks_like_the_original)
{
    long mc, it;
    const char *e = "This model's maximum context length of 163840 tokens. You requested a total "
                    "of 179069 tokens: 113533 tokens from the input messages and 65536 tokens "
                    "for the completion";
    cr_assert(llm_is_token_error(e, &mc, &it));
    cr_assert_eq(mc, 163840);
    cr_assert_eq(it, 113533);
    cr_assert_eq(llm_shrink_max_tokens(65536, mc, it), 163840 - 113533 - 100);
    cr_assert_eq(llm_shrink_max_tokens(65536, 120000, 113533), -1); /* below the floor */
    cr_assert(llm_is_token_error("Token limit exceeded", &mc, &it));
    cr_assert_eq(mc, 0);
    cr_assert_eq(llm_shrink_max_tokens(65536, 0, 0), 32768);
    cr_assert_eq(llm_shrink_max_tokens(12000, 0, 0), 8192);
    cr_assert_eq(llm_shrink_max_tokens(8192, 0, 0), -1);
    cr_assert(!llm_is_token_error("Internal server error", &mc, &it));
}

/* ---- prompts, YAML, flags, Anthropic conversion ------------------------ */

Test(agent_unit, default_prompts_filled_as_the_original)
{
    agent_prompts p;
    cr_assert_eq(agent_prompts_default(&p), 0);
    cr_assert_str_eq(p.working_dir, "/testbed");
    cr_assert_str_eq(p.input_dir, "/testbed/input");
    cr_assert_str_eq(p.output_dir, "/testbed/output");
    char *s = agent_prompt_system(&p);
    const char *head = "You are an expert specializing in solving complex problems using "
                       "code.\n\n<TASK>\n";
    cr_assert(!strncmp(s, head, strlen(head)));
    cr_assert(strstr(s, "- Input directory: /testbed/input  <-- User-provided input files/assets "
                        "are here\n"));
    cr_assert(!strchr(s, '{'));
    cr_assert(strstr(s, "programmatic analysis of the problem data.\n</ANTI_HARDCODING>"));
    cr_assert_eq(s[strlen(s) - 1], '>');
    free(s);
    char *u = agent_prompt_instance(&p, "What is {x} + 1?");
    const char *uh = "<problem>\nWhat is {x} + 1?\n</problem>\n\nPlease solve this problem. "
                     "\n\n<OUTPUT_INSTRUCTIONS>\n";
    cr_assert(!strncmp(u, uh, strlen(uh)), "%s", u);
    cr_assert(strstr(u, "write the final answer to /testbed/output/answer.txt (plain text"));
    cr_assert(strstr(u, "\nOutput directory: /testbed/output"));
    cr_assert_eq(u[strlen(u) - 1], 't');
    free(u);
    agent_prompts_free(&p);
}

Test(agent_unit, yaml_and_flags)
{
    lis_error err = {0};
    const char *y = "llm_name: qwen\napi_key: 'k1'\nnested:\n  - a\n  - 2\nnothing: ~\n";
    cJSON *j = agent_yaml_load(y, strlen(y), &err);
    cr_assert(j, "%s", err.msg);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "llm_name")), "qwen");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "api_key")), "k1");
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "nested")), 2);
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(j, "nothing")));
    cJSON_Delete(j);
    cr_assert_null(agent_yaml_load("a: [", 4, &err));

    char *argv[] = {"run",      "--query",     "q",   "--llm_name=openai/m", "--max_steps",
                    "7",        "--input-dir", "/in", "--extra_body",        "{\"a\":\"true\"}",
                    "--stream", NULL};
    agent_cli c;
    cr_assert_eq(agent_cli_parse(11, argv, &c, "run", &err), 0, "%s", err.msg);
    cr_assert_str_eq(c.llm_name, "openai/m");
    cr_assert_eq(c.max_steps, 7);
    cr_assert_str_eq(c.input_dir, "/in");
    cr_assert(c.stream);
    c.llm_base_url = "http://x/v1";
    c.api_key = "k";
    llm_config cfg;
    cJSON *extra = NULL;
    cr_assert_eq(agent_cli_llm(&c, &cfg, &extra, &err), 0);
    cr_assert_str_eq(cfg.model, "m");
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(extra, "a")));
    cr_assert(cfg.send_temperature);
    cJSON_Delete(extra);
    char *bad[] = {"run", "--query", "q", "--bogus", NULL};
    cr_assert_eq(agent_cli_parse(4, bad, &c, "run", &err), -1);
    cr_assert(strstr(err.msg, "--bogus"));
    uint64_t sz;
    cr_assert_eq(agent_parse_size("200M", &sz), 0);
    cr_assert_eq(sz, 200ull << 20);
}

Test(agent_unit, anthropic_conversion)
{
    const char *h =
        "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"U\"},"
        "{\"role\":\"assistant\",\"content\":\"t\",\"tool_calls\":[{\"id\":\"a1\",\"type\":"
        "\"function\",\"function\":{\"name\":\"execute_bash\",\"arguments\":\"{\\\"command\\\":"
        "\\\"ls\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"a1\",\"content\":\"out\"},"
        "{\"role\":\"user\",\"content\":\"more\"}]";
    cJSON *msgs = cJSON_Parse(h), *tools = agent_tool_schemas();
    llm_config cfg = {.model = "claude", .send_temperature = 1, .temperature = 0.5};
    cJSON *req = llm_anthropic_request(msgs, tools, &cfg, 1000);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(req, "system")), "S");
    cJSON *m = cJSON_GetObjectItem(req, "messages");
    cr_assert_eq(cJSON_GetArraySize(m), 3);
    cJSON *last = cJSON_GetArrayItem(m, 2);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(last, "role")), "user");
    cJSON *blocks = cJSON_GetObjectItem(last, "content");
    cr_assert_eq(cJSON_GetArraySize(blocks), 2);
    cr_assert_str_eq(cJSON_GetStringValue(
                         cJSON_GetObjectItem(cJSON_GetArrayItem(blocks, 0), "type")),
                     "tool_result");
    cJSON *use = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(m, 1), "content"), 1);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(use, "type")), "tool_use");
    cr_assert_str_eq(cJSON_GetStringValue(
                         cJSON_GetObjectItem(cJSON_GetObjectItem(use, "input"), "command")),
                     "ls");
    cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(req, "tools"), 0);
    cr_assert(cJSON_GetObjectItem(t0, "input_schema"));
    cJSON_Delete(req);
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
}

/* ---- token ids passed through (issue 30) ------------------------------- */

static int parse(const char *body, llm_reply *r)
{
    char why[300] = "";
    memset(r, 0, sizeof *r);
    return llm_parse_response(LLM_API_OPENAI, body, r, why, sizeof why);
}

#define MSG "\"message\":{\"role\":\"assistant\",\"content\":\"hi\"}"

Test(agent_unit, token_ids_and_logprobs_are_passed_through)
{
    llm_reply r;
    cr_assert_eq(parse("{\"prompt_token_ids\":[1,2,3],\"choices\":[{" MSG
                       ",\"token_ids\":[7,8],\"logprobs\":{\"content\":[{\"token\":\"a\","
                       "\"logprob\":-0.5},{\"token\":\"b\",\"logprob\":-1.25}]}}]}",
                       &r),
                 0);
    cr_assert_str_eq(r.content, "hi");
    char *t = cJSON_PrintUnformatted(r.tokens);
    cr_assert_str_eq(t, "{\"prompt_ids\":[1,2,3],\"ids\":[7,8],\"logprobs\":[-0.5,-1.25]}");
    free(t);
    llm_reply_free(&r);
    cr_assert_null(r.tokens);

    /* ids without logprobs; agent-lightning's response_token_ids (one list per choice) */
    cr_assert_eq(parse("{\"prompt_token_ids\":[5],\"response_token_ids\":[[6,0]],\"choices\":[{" MSG
                       ",\"logprobs\":null}]}",
                       &r),
                 0);
    t = cJSON_PrintUnformatted(r.tokens);
    cr_assert_str_eq(t, "{\"prompt_ids\":[5],\"ids\":[6,0]}");
    free(t);
    llm_reply_free(&r);
    cr_assert_eq(parse("{\"choices\":[{" MSG ",\"response_token_ids\":[9]}]}", &r), 0);
    t = cJSON_PrintUnformatted(r.tokens);
    cr_assert_str_eq(t, "{\"ids\":[9]}");
    free(t);
    llm_reply_free(&r);
}

Test(agent_unit, token_ids_absent_or_malformed_say_why)
{
    static const struct {
        const char *body, *why;
    } cases[] = {
        {"{\"choices\":[{" MSG "}]}", "the endpoint sent no token ids"},
        {"{\"choices\":[{" MSG ",\"logprobs\":{\"content\":[{\"logprob\":-1}]}}]}",
         "the endpoint sent no token ids"},
        {"{\"prompt_token_ids\":[1,2.5],\"choices\":[{" MSG "}]}",
         "prompt_token_ids[1] is not an integer token id"},
        {"{\"choices\":[{" MSG ",\"token_ids\":[1,\"2\"]}]}",
         "choices[0].token_ids[1] is not an integer token id"},
        {"{\"choices\":[{" MSG ",\"token_ids\":[-3]}]}",
         "choices[0].token_ids[0] is not an integer token id"},
        {"{\"choices\":[{" MSG ",\"token_ids\":[1e300]}]}",
         "choices[0].token_ids[0] is not an integer token id"},
        {"{\"choices\":[{" MSG ",\"token_ids\":{\"a\":1}}]}",
         "choices[0].token_ids is not a list of token ids"},
        {"{\"choices\":[{" MSG ",\"token_ids\":[1],\"logprobs\":{\"content\":[{\"logprob\":"
         "\"x\"}]}}]}",
         "choices[0].logprobs.content[0].logprob is not a number"},
        {"{\"choices\":[{" MSG ",\"token_ids\":[1],\"logprobs\":{\"content\":7}}]}",
         "choices[0].logprobs.content is not a list"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        llm_reply r;
        cr_assert_eq(parse(cases[i].body, &r), 0, "%s", cases[i].body);
        cr_assert_null(r.tokens, "%s", cases[i].body);
        cr_assert_str_eq(r.tokens_why, cases[i].why, "%s", cases[i].body);
        cr_assert_str_eq(r.content, "hi"); /* the reply itself is fine */
        llm_reply_free(&r);
    }
}

/* A reply with more than 2^20 ids keeps none (bounded), and says so. */
Test(agent_unit, token_ids_are_bounded)
{
    enum { N = (1 << 20) + 1 };
    strbuf b = {0};
    strbuf_puts(&b, "{\"choices\":[{" MSG ",\"token_ids\":[");
    for (int i = 0; i < N; i++)
        strbuf_puts(&b, i ? ",1" : "1");
    strbuf_puts(&b, "]}]}");
    char *body = strbuf_take(&b);
    cr_assert(body);
    llm_reply r;
    cr_assert_eq(parse(body, &r), 0);
    cr_assert_null(r.tokens);
    cr_assert_str_eq(r.tokens_why, "choices[0].token_ids holds more than 1048576 token ids");
    llm_reply_free(&r);
    free(body);
}

Test(agent_unit, a_streamed_reply_has_no_token_ids)
{
    const char *stream = "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"token_ids\":[1]}],"
                         "\"prompt_token_ids\":[2]}\n\n"
                         "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                         "data: [DONE]\n\n";
    sse_state s;
    sse_init(&s);
    sse_feed(&s, stream, strlen(stream));
    llm_reply r;
    memset(&r, 0, sizeof r);
    char why[200] = "";
    cr_assert_eq(llm_parse_stream(&s, &r, why, sizeof why), 0, "%s", why);
    cr_assert_str_eq(r.content, "ok");
    cr_assert_null(r.tokens);
    cr_assert_str_eq(r.tokens_why, "a streamed reply carries no token ids");
    llm_reply_free(&r);
    sse_free(&s);
}

/* ---- the conversation to start from (agent_opts.messages) -------------- */

Test(agent_unit, an_episode_starts_from_the_given_messages)
{
    agent_prompts p;
    cr_assert_eq(agent_prompts_default(&p), 0);
    cJSON *msgs = cJSON_Parse("[{\"role\":\"system\",\"content\":\"be brief\"},"
                              "{\"role\":\"user\",\"content\":\"add 2 and 2\"}]");
    agent_opts o = {.query = "ignored", .prompts = &p, .max_steps = 5, .messages = msgs};
    agent_ep *ep = agent_ep_new(&o);
    cr_assert(ep);
    cr_assert_eq(agent_ep_next(ep), AGENT_EP_LLM);
    char *got = cJSON_PrintUnformatted(agent_ep_messages(ep));
    cr_assert_str_eq(got, "[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\","
                          "\"content\":\"add 2 and 2\\nSteps Remaining: 5\"}]");
    free(got);
    /* a copy: the caller's list is as it was */
    got = cJSON_PrintUnformatted(msgs);
    cr_assert_str_eq(got, "[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\","
                          "\"content\":\"add 2 and 2\"}]");
    free(got);
    agent_outcome out;
    cJSON_Delete(agent_ep_finish(ep, &out));
    cJSON_Delete(msgs);

    static const char *bad[][2] = {
        {"{\"role\":\"user\",\"content\":\"x\"}",
         "the conversation to start from is not a non-empty list of messages"},
        {"[]", "the conversation to start from is not a non-empty list of messages"},
        {"[{\"role\":\"user\",\"content\":\"x\"},7]",
         "message 1 of the conversation has no string role"},
        {"[{\"content\":\"x\"}]", "message 0 of the conversation has no string role"},
        {"[{\"role\":\"user\",\"content\":[1]}]",
         "message 0 of the conversation has no string content"},
        {"[{\"role\":\"user\"}]", "message 0 of the conversation has no string content"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *m = cJSON_Parse(bad[i][0]);
        cr_assert(m, "%s", bad[i][0]);
        o.messages = m;
        ep = agent_ep_new(&o);
        cr_assert(ep);
        cr_assert_eq(agent_ep_next(ep), AGENT_EP_DONE, "%s", bad[i][0]);
        cJSON *traj = agent_ep_finish(ep, &out);
        cr_assert_eq(out.stop, AGENT_STOP_LLM_ERROR);
        cr_assert_str_eq(out.error, bad[i][1]);
        cr_assert_eq(out.steps, 0);
        cJSON_Delete(traj);
        cJSON_Delete(m);
    }
    agent_prompts_free(&p);
}

/* The engine takes a reply with its token ids and frees them with the step
 * (ASan: no leak, no double free), also when the episode is stopped with
 * the reply pending. */
Test(agent_unit, the_engine_frees_a_reply_with_token_ids)
{
    agent_prompts p;
    cr_assert_eq(agent_prompts_default(&p), 0);
    agent_opts o = {.query = "q", .prompts = &p, .max_steps = 5};
    for (int pending = 0; pending < 2; pending++) {
        agent_ep *ep = agent_ep_new(&o);
        cr_assert_eq(agent_ep_next(ep), AGENT_EP_LLM);
        llm_reply r;
        cr_assert_eq(parse("{\"prompt_token_ids\":[1],\"choices\":[{\"message\":{\"role\":"
                           "\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
                           "\"function\":{\"name\":\"submit\",\"arguments\":\"{}\"}}]},"
                           "\"token_ids\":[2]}]}",
                           &r),
                     0);
        cr_assert(r.tokens);
        agent_ep_llm_reply(ep, &r);
        cr_assert_null(r.tokens); /* taken */
        if (pending) {
            agent_ep_stop(ep, AGENT_STOP_CANCELLED, "test");
        } else {
            cr_assert_eq(agent_ep_next(ep), AGENT_EP_TOOL);
            agent_tool_out t = {.obs = agent_strdup("<<< Finished >>>"), .done = 1};
            agent_ep_tool_done(ep, &t);
        }
        agent_outcome out;
        cJSON_Delete(agent_ep_finish(ep, &out));
        cr_assert_eq(out.stop, pending ? AGENT_STOP_CANCELLED : AGENT_STOP_SUBMIT);
    }
    agent_prompts_free(&p);
}
