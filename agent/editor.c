/* editor.c - str_replace_editor, done in C on the sandbox's files.
 *
 * original: the messages are agent.py's; the file handling is not: files are read
 * and written whole through lis_file_read/lis_file_write (no shell, no argv
 * size limit, no quoting), every byte outside the edited region is kept
 * (tabs, CRLF, a missing final newline, non-UTF-8 bytes), and a path under
 * the working directory that goes through a symlink pointing outside it is
 * refused. See docs/agent.md for the list of differences. */
#include "agent_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* original: the note after the 10,000-character clip */
static const char TRUNCATED_MESSAGE[] =
    "<response clipped><NOTE>To save on context only part of this file has been shown to you. "
    "You should retry this tool after you have searched inside the file with `grep -n` in "
    "order to find the line numbers of what you are looking for.</NOTE>";

/* ---- text helpers ------------------------------------------------------ */

/* Python's str.expandtabs(8); columns count code points, reset at \n. */
static char *expand_tabs(const char *s)
{
    strbuf b = {0};
    strbuf_putn(&b, "", 0);
    size_t col = 0;
    for (const char *p = s; *p; p++) {
        if (*p == '\t') {
            size_t n = 8 - col % 8;
            for (size_t i = 0; i < n; i++)
                strbuf_putc(&b, ' ');
            col += n;
            continue;
        }
        strbuf_putc(&b, *p);
        if (*p == '\n' || *p == '\r')
            col = 0;
        else if (((unsigned char)*p & 0xC0) != 0x80)
            col++;
    }
    return strbuf_take(&b);
}

static char *maybe_truncate(const char *s)
{
    size_t n = strlen(s), cut = agent_utf8_prefix(s, n, ED_MAX_RESPONSE);
    if (cut >= n)
        return agent_strdup(s);
    strbuf b = {0};
    strbuf_putn(&b, s, cut);
    strbuf_puts(&b, TRUNCATED_MESSAGE);
    return strbuf_take(&b);
}

/* Appends lines [from, to) of text (split on \n) numbered like cat -n. */
static void numbered(strbuf *b, const char *text, long from, long to, long first_no)
{
    long line = 0, k = 0;
    const char *p = text;
    for (;;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (line >= from && (to < 0 || line < to)) {
            if (k++)
                strbuf_putc(b, '\n');
            strbuf_printf(b, "%6ld\t", first_no + line - from);
            strbuf_putn(b, p, len);
        }
        line++;
        if (!e || (to >= 0 && line >= to))
            break;
        p = e + 1;
    }
}

static long count_lines_split(const char *s)
{
    long n = 1;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* original: make_output: clip, expand tabs, number like cat -n. */
static void make_output(strbuf *b, const char *content, const char *desc, long init_line)
{
    char *clipped = maybe_truncate(content);
    char *exp = clipped ? expand_tabs(clipped) : NULL;
    strbuf_printf(b, "Here's the result of running `cat -n` on %s:\n", desc);
    if (exp)
        numbered(b, exp, 0, -1, init_line);
    strbuf_putc(b, '\n');
    free(clipped);
    free(exp);
}

/* Lines [from, to) of s joined with \n (Python's "\n".join(lines[from:to])). */
static char *slice_lines(const char *s, long from, long to)
{
    strbuf b = {0};
    strbuf_putn(&b, "", 0);
    long line = 0;
    int first = 1;
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (line >= from && line < to) {
            if (!first)
                strbuf_putc(&b, '\n');
            first = 0;
            strbuf_putn(&b, p, len);
        }
        line++;
        if (!e || line >= to)
            break;
        p = e + 1;
    }
    return strbuf_take(&b);
}

/* ---- pure edit operations ---------------------------------------------- */

size_t ed_count(const char *hay, size_t hn, const char *needle, size_t nn, size_t *first)
{
    size_t c = 0;
    if (!nn || nn > hn)
        return 0;
    const char *p = hay, *end = hay + hn;
    while ((size_t)(end - p) >= nn) {
        const char *m = memmem(p, (size_t)(end - p), needle, nn);
        if (!m)
            break;
        if (!c && first)
            *first = (size_t)(m - hay);
        c++;
        p = m + nn;
    }
    return c;
}

/* Tabs expanded, \r dropped; map[i] = offset in s of the byte that produced
 * output byte i (map may be NULL). */
static char *normalize(const char *s, size_t n, size_t **map, size_t *out_n)
{
    strbuf b = {0};
    size_t cap = 0, *m = NULL, col = 0;
    strbuf_putn(&b, "", 0);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\r')
            continue;
        size_t reps = c == '\t' ? 8 - col % 8 : 1;
        for (size_t r = 0; r < reps; r++) {
            if (map) {
                if (LIS_GROW(m, cap, b.len + 1) < 0) {
                    free(m);
                    strbuf_release(&b);
                    return NULL;
                }
                m[b.len] = i;
            }
            strbuf_putc(&b, c == '\t' ? ' ' : c);
        }
        if (c == '\t')
            col += reps;
        else if (c == '\n')
            col = 0;
        else if (((unsigned char)c & 0xC0) != 0x80)
            col++;
    }
    *out_n = b.len;
    if (map)
        *map = m;
    char *r = strbuf_take(&b);
    if (!r && map) {
        free(m);
        *map = NULL;
    }
    return r;
}

/* \n not preceded by \r becomes \r\n */
static char *to_crlf(const char *s)
{
    strbuf b = {0};
    strbuf_putn(&b, "", 0);
    for (const char *p = s; *p; p++) {
        if (*p == '\n' && (p == s || p[-1] != '\r'))
            strbuf_putc(&b, '\r');
        strbuf_putc(&b, *p);
    }
    return strbuf_take(&b);
}

static size_t count_nl(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += s[i] == '\n';
    return c;
}

int ed_replace(const char *data, size_t len, const char *old_s, const char *new_s, char **out,
               size_t *out_len, size_t *count, size_t *line)
{
    size_t on = strlen(old_s), first = 0, start = 0, end = 0;
    char *repl = NULL;
    *out = NULL;
    *count = ed_count(data, len, old_s, on, &first);
    if (*count == 1) {
        start = first;
        end = first + on;
    } else if (*count == 0 && (memchr(data, '\t', len) || memchr(data, '\r', len)) &&
               len <= (16u << 20)) {
        /* the model copied what `view` showed: tabs expanded, no \r */
        size_t *map = NULL, nn = 0, non = 0, pos = 0;
        char *norm = normalize(data, len, &map, &nn);
        char *nold = normalize(old_s, on, NULL, &non);
        if (norm && nold)
            *count = ed_count(norm, nn, nold, non, &pos);
        if (*count == 1) {
            start = map[pos];
            end = map[pos + non - 1] + 1;
        }
        free(norm);
        free(nold);
        free(map);
        if (*count != 1)
            return -1;
        if (memmem(data + start, end - start, "\r\n", 2))
            repl = to_crlf(new_s);
    } else {
        return -1;
    }
    const char *r = repl ? repl : new_s;
    size_t rn = strlen(r);
    char *o = malloc(len - (end - start) + rn + 1);
    if (!o) {
        free(repl);
        return -1;
    }
    memcpy(o, data, start);
    memcpy(o + start, r, rn);
    memcpy(o + start + rn, data + end, len - end);
    *out_len = len - (end - start) + rn;
    o[*out_len] = 0;
    *out = o;
    if (line)
        *line = count_nl(data, start);
    free(repl);
    return 0;
}

int ed_insert(const char *data, size_t len, long line, const char *text, char **out,
              size_t *out_len, long *nlines)
{
    long nl = (long)count_nl(data, len) + (len && data[len - 1] != '\n' ? 1 : 0);
    *nlines = nl;
    *out = NULL;
    if (line < 0 || line > nl)
        return -1;
    const char *first_nl = memchr(data, '\n', len);
    int crlf = first_nl && first_nl > data && first_nl[-1] == '\r';
    const char *eol = crlf ? "\r\n" : "\n";
    char *conv = crlf ? to_crlf(text) : NULL;
    const char *t = conv ? conv : text;
    size_t tn = strlen(t), off = 0;
    for (long k = 0; k < line; k++) {
        const char *e = memchr(data + off, '\n', len - off);
        off = e ? (size_t)(e - data) + 1 : len;
    }
    strbuf b = {0};
    strbuf_putn(&b, data, off);
    if (line == nl && len && data[len - 1] != '\n') {
        strbuf_puts(&b, eol);
        strbuf_putn(&b, t, tn);
    } else {
        strbuf_putn(&b, t, tn);
        if (!tn || t[tn - 1] != '\n')
            strbuf_puts(&b, eol);
    }
    strbuf_putn(&b, data + off, len - off);
    free(conv);
    *out_len = b.len;
    *out = strbuf_take(&b);
    return *out ? 0 : -1;
}

/* ---- paths ------------------------------------------------------------- */

/* Absolute, lexically normalized ("." and ".." folded, no trailing /). */
static char *norm_path(const char *workdir, const char *p)
{
    strbuf in = {0};
    if (p[0] != '/') {
        strbuf_puts(&in, workdir);
        strbuf_putc(&in, '/');
    }
    strbuf_puts(&in, p);
    char *s = strbuf_take(&in);
    if (!s)
        return NULL;
    strbuf b = {0};
    char *save = NULL;
    for (char *t = strtok_r(s, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (!strcmp(t, "."))
            continue;
        if (!strcmp(t, "..")) {
            char *slash = b.s ? strrchr(b.s, '/') : NULL;
            if (slash)
                b.len = (size_t)(slash - b.s), b.s[b.len] = 0;
            continue;
        }
        strbuf_putc(&b, '/');
        strbuf_puts(&b, t);
    }
    free(s);
    if (!b.len)
        strbuf_putc(&b, '/');
    return strbuf_take(&b);
}

static int under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    if (n == 1 && dir[0] == '/')
        return 1;
    return !strncmp(path, dir, n) && (path[n] == 0 || path[n] == '/');
}

/* Resolves symlinks on the way (inside the sandbox); refuses a path under
 * workdir that leaves it. Returns the path to use, or NULL with *msg set. */
static char *safe_path(const ed_fs *fs, const char *workdir, const char *abs, const char *shown,
                       char **msg)
{
    size_t n = strlen(abs);
    int link = 0;
    for (size_t i = 1; i <= n && !link; i++) {
        if (i < n && abs[i] != '/')
            continue;
        char *prefix = agent_strndup(abs, i);
        char kind = 0;
        lis_error err = {0};
        int rc = prefix ? fs->stat(fs->ctx, prefix, &kind, NULL, &err) : -1;
        free(prefix);
        if (rc < 0)
            break;
        if (kind == 'l')
            link = 1;
    }
    if (!link)
        return agent_strdup(abs);
    lis_error err = {0};
    char *real = fs->resolve(fs->ctx, abs, &err);
    strbuf b = {0};
    if (!real) {
        strbuf_printf(&b, "Error: cannot resolve the symlink in %s: %s", shown, err.msg);
    } else if (under(abs, workdir) && !under(real, workdir)) {
        strbuf_printf(&b, "Error: %s is a symlink to %s, outside %s; refusing to follow it.", shown,
                      real, workdir);
    } else {
        return real;
    }
    free(real);
    *msg = strbuf_take(&b);
    return NULL;
}

static int is_binary(const char *data, size_t len) { return memchr(data, 0, len) != NULL; }

static char *binary_msg(const char *shown)
{
    strbuf b = {0};
    strbuf_printf(&b,
                  "Error: %s is a binary file; str_replace_editor only handles text files. Use "
                  "execute_bash to inspect or change it.",
                  shown);
    return strbuf_take(&b);
}

static char *str_param(const cJSON *params, const char *name, char **owned)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, name);
    *owned = NULL;
    if (cJSON_IsString(v))
        return v->valuestring;
    if (!v || cJSON_IsNull(v))
        return NULL;
    return *owned = cJSON_PrintUnformatted(v);
}

/* ---- the commands ------------------------------------------------------ */

/* original: view's texts and view_range errors; every text file, not only .py
 * and .rst, every entry of a directory (docs/agent.md fix 7) */
static char *view(const ed_fs *fs, const char *path, const char *shown, const cJSON *params)
{
    strbuf b = {0};
    char kind = 0;
    uint64_t size = 0;
    lis_error err = {0};
    if (fs->stat(fs->ctx, path, &kind, &size, &err) < 0 || (kind != 'd' && kind != 'f')) {
        strbuf_printf(&b, "Error: Path not found: %s", shown);
        return strbuf_take(&b);
    }
    if (kind == 'd') {
        char *list = fs->list(fs->ctx, path, &err);
        if (!list)
            strbuf_printf(&b, "Error: cannot list %s: %s", shown, err.msg);
        else if (!*list)
            strbuf_printf(&b, "(empty directory: %s)", shown);
        else {
            char *clean = agent_clean_output(list, strlen(list));
            strbuf_printf(&b,
                          "Here's the files and directories up to 2 levels deep in %s, "
                          "excluding hidden:\n%s",
                          shown, clean ? clean : "");
            free(clean);
        }
        free(list);
        return strbuf_take(&b);
    }
    char *data = NULL;
    size_t len = 0;
    if (fs->read(fs->ctx, path, ED_MAX_FILE, &data, &len, &err) < 0) {
        if (err.code == EFBIG)
            strbuf_printf(&b,
                          "Error: %s is too large for the editor (%llu bytes, the limit is %u "
                          "MiB); use execute_bash (head, sed -n, grep -n) to read parts of it.",
                          shown, (unsigned long long)size, ED_MAX_FILE >> 20);
        else
            strbuf_printf(&b, "Error: Could not read file %s: %s", shown, err.msg);
        return strbuf_take(&b);
    }
    if (is_binary(data, len)) {
        free(data);
        return binary_msg(shown);
    }
    if (!len) {
        free(data);
        strbuf_printf(&b, "(empty file: %s)", shown);
        return strbuf_take(&b);
    }
    char *clean = agent_clean_output(data, len);
    free(data);
    char *exp = clean ? expand_tabs(clean) : NULL;
    free(clean);
    if (!exp)
        return NULL;
    long total = count_lines_split(exp);
    const cJSON *vr = cJSON_GetObjectItemCaseSensitive(params, "view_range");
    strbuf r = {0};
    strbuf_printf(&r, "Here's the result of running `cat -n` on %s:\n", shown);
    if (cJSON_IsArray(vr) && cJSON_GetArraySize(vr) == 2) {
        long start = agent_json_long(cJSON_GetArrayItem(vr, 0));
        long end = agent_json_long(cJSON_GetArrayItem(vr, 1));
        if (!(1 <= start && start <= total)) {
            strbuf_printf(&b,
                          "Error: Invalid view_range [%ld, %ld]: start line must be in [1, %ld]",
                          start, end, total);
            goto range_err;
        }
        if (end != -1 && (end < start || end > total)) {
            strbuf_printf(&b,
                          "Error: Invalid view_range [%ld, %ld]: end must be >= start and <= "
                          "%ld, or -1 to view until end.",
                          start, end, total);
            goto range_err;
        }
        numbered(&r, exp, start - 1, end == -1 ? -1 : end, start);
    } else {
        numbered(&r, exp, 0, -1, 1);
    }
    free(exp);
    char *res = strbuf_take(&r);
    char *out = res ? maybe_truncate(res) : NULL;
    free(res);
    return out;
range_err:
    free(exp);
    strbuf_release(&r);
    return strbuf_take(&b);
}

/* original: create's texts; it still overwrites a file (docs/agent.md
 * fix 13), but writes file_text exactly, with no newline added (fix 8) */
static char *create(const ed_fs *fs, const char *path, const char *shown, const cJSON *params)
{
    char *owned;
    const char *text = str_param(params, "file_text", &owned);
    if (!text)
        text = "";
    strbuf b = {0};
    lis_error err = {0};
    if (fs->write(fs->ctx, path, text, strlen(text), &err) < 0) {
        strbuf_printf(&b, "Error creating file: %s", err.msg);
    } else {
        char *clean = agent_clean_output(text, strlen(text));
        strbuf_printf(&b, "File created at %s. ", shown);
        make_output(&b, clean ? clean : "", shown, 1);
        strbuf_puts(&b, "Review the file and make sure that it is as expected. Edit the file if "
                        "necessary.");
        free(clean);
    }
    free(owned);
    return strbuf_take(&b);
}

/* Reads a text file for an edit; returns NULL with *msg set on failure. */
static char *read_text(const ed_fs *fs, const char *path, const char *shown, size_t *len,
                       char **msg)
{
    char *data = NULL;
    lis_error err = {0};
    strbuf b = {0};
    if (fs->read(fs->ctx, path, ED_MAX_FILE, &data, len, &err) < 0) {
        if (err.code == EFBIG)
            strbuf_printf(&b, "Error: %s is too large for the editor (the limit is %u MiB)", shown,
                          ED_MAX_FILE >> 20);
        else
            strbuf_printf(&b, "Error: Could not read file %s", shown);
        *msg = strbuf_take(&b);
        return NULL;
    }
    if (is_binary(data, *len)) {
        free(data);
        *msg = binary_msg(shown);
        return NULL;
    }
    return data;
}

/* original: str_replace's texts and its 4-line snippet; the bytes around the
 * edit are kept, and a match may ignore tabs and \r (docs/agent.md fixes 8, 9) */
static char *str_replace(const ed_fs *fs, const char *path, const char *shown, const cJSON *params)
{
    char *own_old, *own_new, *msg = NULL;
    const char *old_s = str_param(params, "old_str", &own_old);
    const char *new_s = str_param(params, "new_str", &own_new);
    strbuf b = {0};
    if (!old_s || !*old_s) {
        strbuf_puts(&b, "Error: old_str is required for str_replace.");
        goto out;
    }
    if (!new_s)
        new_s = "";
    size_t len = 0;
    char *data = read_text(fs, path, shown, &len, &msg);
    if (!data) {
        strbuf_puts(&b, msg ? msg : "Error: out of memory");
        goto out;
    }
    char *edited = NULL;
    size_t elen = 0, count = 0, line = 0;
    int rc = ed_replace(data, len, old_s, new_s, &edited, &elen, &count, &line);
    free(data);
    if (rc < 0) {
        if (count == 0)
            strbuf_printf(&b, "Error: No occurrences of old_str found in %s for replacement.",
                          shown);
        else if (count > 1)
            strbuf_printf(&b,
                          "Error: Multiple occurrences (%zu) of old_str found in %s. Please "
                          "ensure it is unique before using str_replace.",
                          count, shown);
        else
            strbuf_puts(&b, "Error: out of memory");
        goto out;
    }
    lis_error err = {0};
    if (fs->write(fs->ctx, path, edited, elen, &err) < 0) {
        free(edited);
        strbuf_printf(&b, "Error writing file: %s", shown);
        goto out;
    }
    char *clean = agent_clean_output(edited, elen);
    free(edited);
    long start = (long)line - ED_SNIPPET_LINES;
    if (start < 0)
        start = 0;
    long end = (long)line + ED_SNIPPET_LINES + (long)count_nl(new_s, strlen(new_s));
    char *snippet = clean ? slice_lines(clean, start, end + 1) : NULL;
    char desc[4200];
    snprintf(desc, sizeof desc, "a snippet of %s", shown);
    strbuf_printf(&b, "The file %s has been edited. ", shown);
    make_output(&b, snippet ? snippet : "", desc, start + 1);
    strbuf_puts(&b, "Review the changes and make sure they are as expected. Edit the file again if "
                    "necessary.");
    free(snippet);
    free(clean);
out:
    free(msg);
    free(own_old);
    free(own_new);
    return strbuf_take(&b);
}

/* original: insert's texts and [0, nlines] range; a final newline opens no
 * extra line (docs/agent.md fix 10) */
static char *insert(const ed_fs *fs, const char *path, const char *shown, const cJSON *params)
{
    char *own_new, *msg = NULL;
    const char *new_s = str_param(params, "new_str", &own_new);
    const cJSON *il = cJSON_GetObjectItemCaseSensitive(params, "insert_line");
    long k = 0;
    if (cJSON_IsNumber(il))
        k = agent_json_long(il);
    else if (cJSON_IsString(il))
        k = strtol(il->valuestring, NULL, 10);
    strbuf b = {0};
    if (!new_s || !*new_s) {
        strbuf_puts(&b, "Error: new_str is required for insert.");
        goto out;
    }
    size_t len = 0;
    char *data = read_text(fs, path, shown, &len, &msg);
    if (!data) {
        strbuf_puts(&b, msg ? msg : "Error: out of memory");
        goto out;
    }
    char *edited = NULL;
    size_t elen = 0;
    long nlines = 0;
    int rc = ed_insert(data, len, k, new_s, &edited, &elen, &nlines);
    free(data);
    if (rc < 0) {
        strbuf_printf(&b, "Error: Invalid insert_line %ld. Must be in [0, %ld].", k, nlines);
        goto out;
    }
    lis_error err = {0};
    if (fs->write(fs->ctx, path, edited, elen, &err) < 0) {
        free(edited);
        strbuf_printf(&b, "Error writing file: %s", shown);
        goto out;
    }
    char *clean = agent_clean_output(edited, elen);
    free(edited);
    size_t nn = strlen(new_s);
    long m = (long)count_nl(new_s, nn) + 1 - (nn && new_s[nn - 1] == '\n' ? 1 : 0);
    long from = k - ED_SNIPPET_LINES < 0 ? 0 : k - ED_SNIPPET_LINES;
    char *snippet = clean ? slice_lines(clean, from, k + m + ED_SNIPPET_LINES) : NULL;
    strbuf_printf(&b, "The file %s has been edited. ", shown);
    make_output(&b, snippet ? snippet : "", "a snippet of the edited file",
                k - ED_SNIPPET_LINES + 1 > 1 ? k - ED_SNIPPET_LINES + 1 : 1);
    strbuf_puts(&b,
                "Review the changes and make sure they are as expected (correct indentation, no "
                "duplicate lines, etc). Edit the file again if necessary.");
    free(snippet);
    free(clean);
out:
    free(msg);
    free(own_new);
    return strbuf_take(&b);
}

char *agent_editor_run(const ed_fs *fs, const char *workdir, const cJSON *params)
{
    char *own_cmd, *own_path;
    const char *command = str_param(params, "command", &own_cmd);
    const char *shown = str_param(params, "path", &own_path);
    char *res = NULL, *abs = NULL, *path = NULL;
    if (!command || !*command || !shown || !*shown) {
        res = agent_strdup("Error: command and path are required.");
        goto out;
    }
    if (strcmp(command, "view") && strcmp(command, "create") && strcmp(command, "str_replace") &&
        strcmp(command, "insert")) {
        strbuf b = {0};
        strbuf_printf(&b, "Unknown command: %s", command);
        res = strbuf_take(&b);
        goto out;
    }
    abs = norm_path(workdir, shown);
    if (!abs)
        goto out;
    path = safe_path(fs, workdir, abs, shown, &res);
    if (!path)
        goto out;
    if (!strcmp(command, "view"))
        res = view(fs, path, shown, params);
    else if (!strcmp(command, "create"))
        res = create(fs, path, shown, params);
    else if (!strcmp(command, "str_replace"))
        res = str_replace(fs, path, shown, params);
    else
        res = insert(fs, path, shown, params);
out:
    free(abs);
    free(path);
    free(own_cmd);
    free(own_path);
    return res;
}

/* ---- the sandbox file system ------------------------------------------- */

static int sandbox_fs_read(void *ctx, const char *path, size_t max, char **data, size_t *len,
                           lis_error *err)
{
    return lis_file_read(((const agent_tool_env *)ctx)->sb, path, max, data, len, err);
}

static int sandbox_fs_write(void *ctx, const char *path, const char *data, size_t len,
                            lis_error *err)
{
    return lis_file_write(((const agent_tool_env *)ctx)->sb, path, data, len, 0, err);
}

static int sandbox_fs_stat(void *ctx, const char *path, char *kind, uint64_t *size, lis_error *err)
{
    return lis_file_stat(((const agent_tool_env *)ctx)->sb, path, kind, size, err);
}

static char *run_capture(const agent_tool_env *env, const char *const *argv, lis_error *err)
{
    lis_exec_spec spec = {.argv = argv,
                          .cwd = env->workdir,
                          .out = LIS_STDIO_CAPTURE,
                          .err = LIS_STDIO_CAPTURE,
                          .out_cap = 1u << 20,
                          .timeout = 60};
    lis_result res = {0};
    if (lis_exec(env->sb, &spec, &res, err) < 0)
        return NULL;
    char *out = NULL;
    if (res.exec_failed)
        lis_fail(err, ENOENT, "%s", res.err_msg);
    else if (res.exit_code != 0)
        lis_fail(err, EIO, "%s failed: %.300s", argv[0], res.err.data ? res.err.data : "");
    else
        out = agent_strndup(res.out.data ? res.out.data : "", res.out.len);
    lis_result_free(&res);
    return out;
}

static char *sandbox_fs_list(void *ctx, const char *path, lis_error *err)
{
    const char *argv[] = {"find", path, "-maxdepth", "2", "!", "-path", "*/.*", NULL};
    char *out = run_capture(ctx, argv, err);
    if (!out)
        return NULL;
    /* head -100 (original: its find | head -100) */
    char *p = out;
    for (int n = 0; p && *p && n < 100; n++) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    if (p && *p)
        *p = 0;
    return out;
}

static char *sandbox_fs_resolve(void *ctx, const char *path, lis_error *err)
{
    const char *argv[] = {"readlink", "-f", path, NULL};
    char *out = run_capture(ctx, argv, err);
    if (out) {
        out[strcspn(out, "\n")] = 0;
        if (out[0] != '/') {
            free(out);
            lis_fail(err, EINVAL, "readlink -f gave no absolute path");
            return NULL;
        }
    }
    return out;
}

void agent_editor_sandbox_fs(ed_fs *fs, const agent_tool_env *env)
{
    fs->ctx = (void *)env;
    fs->read = sandbox_fs_read;
    fs->write = sandbox_fs_write;
    fs->stat = sandbox_fs_stat;
    fs->list = sandbox_fs_list;
    fs->resolve = sandbox_fs_resolve;
}
