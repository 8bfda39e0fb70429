/* task.c - a benchmark task: a benchmark/<task>/ folder (config.yaml, its
 * data files, reward.py, judge.py, vanilla_llm_prompt.py) or a --tasks FILE,
 * loaded into rows.
 * original: the folder layout of its llm_in_sandbox/benchmark/<task>/.
 *
 * Data files are JSON arrays or JSONL, told apart by their first byte. JSONL
 * is streamed a line at a time and an array is walked one element at a time
 * with cJSON (each element parsed on its own, so every row knows its line).
 * A file that cannot be read as rows fails the load; a row that cannot run
 * (bad input_files, no problem_statement) only gets batch_row.error. */
#include "task.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILE_MAX 32 /* data_files entries */

/* Where a row came from, for messages: file index and line. */
typedef struct row_src {
    uint32_t file;
    uint32_t line;
} row_src;

typedef struct id_slot {
    const char *id; /* borrowed from the row */
    size_t row;
} id_slot;

typedef struct loader {
    const char *files[FILE_MAX];
    size_t nfiles;
    batch_row *rows;
    row_src *src;
    size_t n, cap;
    id_slot *ids; /* open addressing, for duplicate ids */
    size_t ids_cap;
    const char *hint; /* where the file names come from, for messages */
} loader;

/* ---- small helpers ---------------------------------------------------- */

static int exists(const char *path) { return access(path, F_OK) == 0; }

static char *path_join(const char *dir, const char *name)
{
    if (!dir || !*dir || name[0] == '/')
        return agent_strdup(name);
    strbuf b = {0};
    strbuf_puts(&b, dir);
    if (b.len && b.s[b.len - 1] != '/')
        strbuf_putc(&b, '/');
    strbuf_puts(&b, name);
    return strbuf_take(&b);
}

/* The last path component without trailing slashes; ext_strip also drops
 * the last ".ext". */
static char *base_name(const char *path, int ext_strip)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t s = n;
    while (s > 0 && path[s - 1] != '/')
        s--;
    char *b = agent_strndup(path + s, n - s);
    if (b && ext_strip) {
        char *dot = strrchr(b, '.');
        if (dot && dot != b)
            *dot = 0;
    }
    return b;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static const char *where(const loader *L, size_t row, char *buf, size_t n)
{
    snprintf(buf, n, "%s:%u", L->files[L->src[row].file], (unsigned)L->src[row].line);
    return buf;
}

/* ---- prompts ---------------------------------------------------------- */

static int take_str(char **dst, const cJSON *cfg, const char *key, const char *file, lis_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v))
        return lis_fail(err, EINVAL, "%s: %s must be text (a YAML string or block)", file, key);
    char *s = agent_strdup(v->valuestring);
    if (!s)
        return lis_oom(err);
    free(*dst);
    *dst = s;
    return 0;
}

/* One layer of prompt settings: a system_prompt brings its instance_prompt
 * ("" when absent; original: config.get("instance_prompt", "")). */
static int apply_layer(agent_prompts *p, const cJSON *cfg, const char *file, lis_error *err)
{
    if (cJSON_GetObjectItemCaseSensitive(cfg, "system_prompt")) {
        char *empty = agent_strdup("");
        if (!empty)
            return lis_oom(err);
        free(p->instance_prompt);
        p->instance_prompt = empty;
        if (take_str(&p->system_prompt, cfg, "system_prompt", file, err) < 0)
            return -1;
    }
    if (take_str(&p->instance_prompt, cfg, "instance_prompt", file, err) < 0 ||
        take_str(&p->working_dir, cfg, "working_dir", file, err) < 0 ||
        take_str(&p->input_dir, cfg, "input_dir", file, err) < 0 ||
        take_str(&p->output_dir, cfg, "output_dir", file, err) < 0)
        return -1;
    return 0;
}

static cJSON *load_yaml_map(const char *path, const char *what, lis_error *err)
{
    size_t len = 0;
    char *text = agent_read_host_file(path, &len, err);
    if (!text) {
        lis_fail_errnum(err, err->code, "%s %s cannot be read", what, path);
        return NULL;
    }
    lis_error e2 = {0};
    cJSON *j = agent_yaml_load(text, len, &e2);
    free(text);
    if (!j) {
        lis_fail(err, EINVAL, "%s: %s; fix the YAML", path, e2.msg);
        return NULL;
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        lis_fail(err, EINVAL, "%s: expected a YAML mapping (key: value lines)", path);
        return NULL;
    }
    return j;
}

static int set_dirs(agent_prompts *p, const char *w, const char *in, const char *out,
                    lis_error *err)
{
    char *a = agent_strdup(w), *b = agent_strdup(in), *c = agent_strdup(out);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return lis_oom(err);
    }
    free(p->working_dir), free(p->input_dir), free(p->output_dir);
    p->working_dir = a, p->input_dir = b, p->output_dir = c;
    return 0;
}

/* ---- rows ------------------------------------------------------------- */

/* A number id as Python's str() would print it for an int, else the
 * shortest text that reads back as the same double. */
static void number_text(double v, char *buf, size_t n)
{
    if (v == (double)(long long)v && v > -1e15 && v < 1e15) {
        snprintf(buf, n, "%lld", (long long)v);
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static int ids_insert(loader *L, size_t row, size_t *dup)
{
    if (L->ids_cap == 0 || (L->n + 1) * 2 > L->ids_cap) {
        size_t cap = L->ids_cap ? L->ids_cap * 2 : 1024;
        id_slot *t = calloc(cap, sizeof *t);
        if (!t)
            return -1;
        for (size_t i = 0; i < L->ids_cap; i++) {
            if (!L->ids[i].id)
                continue;
            size_t h = (size_t)hash_str(L->ids[i].id) & (cap - 1);
            while (t[h].id)
                h = (h + 1) & (cap - 1);
            t[h] = L->ids[i];
        }
        free(L->ids);
        L->ids = t;
        L->ids_cap = cap;
    }
    const char *id = L->rows[row].id;
    size_t h = (size_t)hash_str(id) & (L->ids_cap - 1);
    while (L->ids[h].id) {
        if (!strcmp(L->ids[h].id, id)) {
            *dup = L->ids[h].row;
            return 1;
        }
        h = (h + 1) & (L->ids_cap - 1);
    }
    L->ids[h].id = id;
    L->ids[h].row = row;
    return 0;
}

/* Takes obj (a parsed row) into the loader: its id, and the duplicate check. */
static int add_row(loader *L, cJSON *obj, uint32_t file, uint32_t line, lis_error *err)
{
    const char *fname = L->files[file];
    if (!cJSON_IsObject(obj)) {
        cJSON_Delete(obj);
        return lis_fail(err, EINVAL,
                        "%s:%u: a row must be a JSON object with id, "
                        "problem_statement and ground_truth",
                        fname, (unsigned)line);
    }
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        batch_row *r = realloc(L->rows, cap * sizeof *r);
        if (!r) {
            cJSON_Delete(obj);
            return lis_oom(err);
        }
        L->rows = r;
        row_src *s = realloc(L->src, cap * sizeof *s);
        if (!s) {
            cJSON_Delete(obj);
            return lis_oom(err);
        }
        L->src = s;
        L->cap = cap;
    }
    batch_row *r = &L->rows[L->n];
    memset(r, 0, sizeof *r);
    r->json = obj;
    L->src[L->n] = (row_src){file, line};
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(obj, "id");
    char num[64];
    if (!id || cJSON_IsNull(id)) {
        /* no id: the row's 0-based position in the data (the --start-id index) */
        snprintf(num, sizeof num, "%zu", L->n);
        r->id = agent_strdup(num);
    } else if (cJSON_IsString(id) && *id->valuestring) {
        r->id = agent_strdup(id->valuestring);
    } else if (cJSON_IsNumber(id) && id->valuedouble == id->valuedouble) {
        number_text(id->valuedouble, num, sizeof num);
        r->id = agent_strdup(num);
    } else {
        cJSON_Delete(obj);
        return lis_fail(err, EINVAL, "%s:%u: id must be a non-empty string or a number", fname,
                        (unsigned)line);
    }
    if (!r->id) {
        cJSON_Delete(obj);
        return lis_oom(err);
    }
    L->n++; /* the row is the loader's from here on */
    if (strlen(r->id) >= BATCH_ID_MAX)
        return lis_fail(err, EINVAL, "%s:%u: id longer than %d bytes; shorten it", fname,
                        (unsigned)line, BATCH_ID_MAX - 1);
    /* the results (written as UTF-8, docs/monitoring.md) and --resume key on it */
    if (!lis_utf8_valid(r->id, strlen(r->id)))
        return lis_fail(err, EINVAL, "%s:%u: id is not valid UTF-8; give it a UTF-8 id", fname,
                        (unsigned)line);
    size_t dup = 0;
    int d = ids_insert(L, L->n - 1, &dup);
    if (d < 0)
        return lis_oom(err);
    if (d > 0) {
        char a[PATH_MAX + 16];
        return lis_fail(err, EINVAL,
                        "%s:%u: duplicate id \"%.100s\" (first at %s); give "
                        "every row its own id (results and --resume key on it)",
                        fname, (unsigned)line, r->id, where(L, dup, a, sizeof a));
    }
    return 0;
}

static int is_ws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Where a cJSON parse stopped, as "line N" context for a message. */
static void parse_fail(lis_error *err, const char *fname, unsigned line, const char *what)
{
    lis_fail(err, EINVAL,
             "%s:%u: %s; a data file is a JSON array of row objects or JSONL "
             "(one row object per line)",
             fname, line, what);
}

/* The rest of a JSON array after its '['. */
static int load_array(loader *L, uint32_t file, const char *text, size_t len, unsigned line,
                      lis_error *err)
{
    const char *fname = L->files[file];
    const char *p = text, *end = text + len;
    int first = 1;
    for (;;) {
        while (p < end && is_ws(*p))
            line += *p++ == '\n';
        if (p == end) {
            parse_fail(err, fname, line, "the JSON array is not closed (no ']')");
            return -1;
        }
        if (*p == ']') {
            p++;
            break;
        }
        if (!first) {
            if (*p != ',') {
                parse_fail(err, fname, line, "expected ',' or ']' between rows");
                return -1;
            }
            p++;
            while (p < end && is_ws(*p))
                line += *p++ == '\n';
        }
        first = 0;
        const char *stop = NULL;
        cJSON *obj = cJSON_ParseWithLengthOpts(p, (size_t)(end - p), &stop, 0);
        if (!obj) {
            unsigned l = line;
            for (const char *q = p; stop && q < stop && q < end; q++)
                l += *q == '\n';
            parse_fail(err, fname, l, "not valid JSON");
            return -1;
        }
        if (add_row(L, obj, file, line, err) < 0)
            return -1;
        for (; p < stop; p++)
            line += *p == '\n';
    }
    while (p < end && is_ws(*p))
        line += *p++ == '\n';
    if (p != end) {
        parse_fail(err, fname, line, "text after the closing ']'");
        return -1;
    }
    return 0;
}

static int load_jsonl(loader *L, uint32_t file, FILE *f, int first, unsigned line, lis_error *err)
{
    const char *fname = L->files[file];
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    ungetc(first, f);
    while ((n = getline(&buf, &cap, f)) >= 0) {
        const char *p = buf, *end = buf + n;
        while (p < end && is_ws(*p))
            p++;
        if (p == end) {
            line++;
            continue;
        }
        const char *stop = NULL;
        cJSON *obj = cJSON_ParseWithLengthOpts(p, (size_t)(end - p), &stop, 0);
        const char *bad = obj ? NULL : "not valid JSON (or a row split over lines)";
        while (obj && stop < end && is_ws(*stop))
            stop++;
        if (obj && stop != end) {
            cJSON_Delete(obj);
            bad = "more than one JSON value on the line";
        }
        if (bad) {
            free(buf);
            parse_fail(err, fname, line, bad);
            return -1;
        }
        if (add_row(L, obj, file, line, err) < 0) {
            free(buf);
            return -1;
        }
        line++;
    }
    free(buf);
    if (ferror(f))
        return lis_fail(err, EIO, "%s: read error", fname);
    return 0;
}

static int load_file(loader *L, uint32_t file, lis_error *err)
{
    const char *fname = L->files[file];
    FILE *f = fopen(fname, "rb");
    if (!f)
        return lis_fail(err, errno, "%s: %s; check %s", fname, strerror(errno), L->hint);
    unsigned line = 1;
    int c = getc(f);
    if (c == 0xEF) { /* a UTF-8 byte order mark */
        if (getc(f) != 0xBB || getc(f) != 0xBF) {
            fclose(f);
            parse_fail(err, fname, 1, "not valid JSON");
            return -1;
        }
        c = getc(f);
    }
    while (c != EOF && is_ws(c)) {
        line += c == '\n';
        c = getc(f);
    }
    int rc = 0;
    if (c == EOF) {
        rc = 0; /* an empty file holds no rows */
    } else if (c == '[') {
        strbuf b = {0};
        char chunk[65536];
        size_t k;
        while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
            strbuf_putn(&b, chunk, k);
        if (ferror(f))
            rc = lis_fail(err, EIO, "%s: read error", fname);
        else if (b.oom)
            rc = lis_oom(err);
        else
            rc = load_array(L, file, b.s ? b.s : "", b.len, line, err);
        strbuf_release(&b);
    } else {
        rc = load_jsonl(L, file, f, c, line, err);
    }
    fclose(f);
    return rc;
}

/* ---- per-row checks (only for the selected rows) ---------------------- */

/* A name from input_files stays inside the input dir: relative, no "..". */
static int safe_name(const char *s)
{
    if (!*s || s[0] == '/' || !strcmp(s, "."))
        return 0;
    for (const char *p = s; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return 0;
        p += n;
        if (*p == '/')
            p++;
    }
    return 1;
}

static void check_row(batch_row *r, const char *at)
{
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(r->json, "problem_statement");
    r->problem_statement = cJSON_IsString(ps) ? ps->valuestring : "";
    r->ground_truth = cJSON_GetObjectItemCaseSensitive(r->json, "ground_truth");
    if (!cJSON_IsString(ps)) {
        snprintf(r->error, sizeof r->error, "%s: the row has no problem_statement (text)", at);
        return;
    }
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(r->json, "input_files");
    if (!in || cJSON_IsNull(in))
        return;
    cJSON *files = NULL;
    if (cJSON_IsString(in)) {
        const char *s = in->valuestring;
        while (is_ws(*s))
            s++;
        if (!*s) /* "" means none; original: `json.loads(x) if x else {}` */
            return;
        files = cJSON_ParseWithOpts(s, NULL, 1); /* no trailing text, as json.loads */
        if (!files) {
            snprintf(r->error, sizeof r->error,
                     "%s: input_files is a string but not valid "
                     "JSON; make it an object of name: content",
                     at);
            return;
        }
    } else if (cJSON_IsObject(in)) {
        /* borrows the row's object: no copy of (maybe large) documents */
        files = cJSON_CreateObjectReference(in->child);
        if (!files) {
            snprintf(r->error, sizeof r->error, "%s: out of memory", at);
            return;
        }
    } else {
        snprintf(r->error, sizeof r->error,
                 "%s: input_files must be an object of name: "
                 "content (or a JSON string of one)",
                 at);
        return;
    }
    if (!cJSON_IsObject(files)) {
        cJSON_Delete(files);
        snprintf(r->error, sizeof r->error,
                 "%s: input_files must be an object of name: "
                 "content",
                 at);
        return;
    }
    for (const cJSON *e = files->child; e; e = e->next) {
        if (!safe_name(e->string)) {
            snprintf(r->error, sizeof r->error,
                     "%s: input_files name \"%.80s\" leaves the "
                     "input directory; use a relative name without \"..\"",
                     at, e->string);
            cJSON_Delete(files);
            return;
        }
        if (!cJSON_IsString(e) && !cJSON_IsNull(e)) {
            snprintf(r->error, sizeof r->error,
                     "%s: input_files \"%.80s\" must be text "
                     "(the file's content)",
                     at, e->string);
            cJSON_Delete(files);
            return;
        }
    }
    if (!files->child) {
        cJSON_Delete(files);
        return;
    }
    r->input_files = files;
}

/* ---- the task --------------------------------------------------------- */

static void row_free(batch_row *r)
{
    free(r->id);
    cJSON_Delete(r->input_files);
    cJSON_Delete(r->json);
    memset(r, 0, sizeof *r);
}

/* Python's problems[start:end]. original: a 0 or unset end is len(problems)
 * (`end_id or len(problems)`). */
static void slice(const batch_task_opts *o, size_t n, size_t *lo, size_t *hi)
{
    long len = (long)n;
    int sset = o->start_set || o->start_id != -1, eset = o->end_set || o->end_id != -1;
    long start = sset ? o->start_id : 0, end = eset ? o->end_id : 0;
    if (start < 0)
        start += len;
    if (end == 0)
        end = len;
    else if (end < 0)
        end += len;
    if (start < 0)
        start = 0;
    if (start > len)
        start = len;
    if (end < 0)
        end = 0;
    if (end > len)
        end = len;
    *lo = (size_t)start;
    *hi = end < start ? (size_t)start : (size_t)end;
}

/* The HuggingFace export hint (original: loads these online). */
static int refuse_hf(const char *cfg_path, const char *dir, const cJSON *cfg, const char *name,
                     lis_error *err)
{
    const cJSON *conf = cJSON_GetObjectItemCaseSensitive(cfg, "config");
    const cJSON *split = cJSON_GetObjectItemCaseSensitive(cfg, "split");
    char c[160] = "";
    if (cJSON_IsString(conf))
        snprintf(c, sizeof c, "'%.120s', ", conf->valuestring);
    return lis_fail(err, EINVAL,
                    "%s: dataset %.120s is a HuggingFace dataset, which lis "
                    "cannot fetch offline; export it once with python3 -c \"from datasets "
                    "import load_dataset; load_dataset('%.120s', %ssplit='%.40s')"
                    ".to_json('%.100s/data.jsonl')\" and set dataset: json, data_files: "
                    "data.jsonl",
                    cfg_path, name, name, c, cJSON_IsString(split) ? split->valuestring : "test",
                    dir);
}

/* data_files relative to the task folder, then to the folder's parent
 * (original: resolved against benchmark/). */
static int add_data_file(loader *L, const char *dir, const char *name, const char *cfg_path,
                         lis_error *err)
{
    if (L->nfiles == FILE_MAX)
        return lis_fail(err, EINVAL, "%s: more than %d data_files", cfg_path, FILE_MAX);
    char *p = path_join(dir, name);
    if (p && !exists(p) && name[0] != '/') {
        char *parent = agent_strdup(dir);
        char *slash = parent ? strrchr(parent, '/') : NULL;
        char *alt = NULL;
        if (parent) {
            while (slash && slash > parent && slash[1] == 0) { /* trailing slashes */
                *slash = 0;
                slash = strrchr(parent, '/');
            }
            if (slash)
                *slash = 0;
            alt = path_join(slash ? (*parent ? parent : "/") : ".", name);
        }
        free(parent);
        if (alt && exists(alt)) {
            free(p);
            p = alt;
        } else {
            free(alt);
        }
    }
    if (!p)
        return lis_oom(err);
    L->files[L->nfiles++] = p;
    return 0;
}

static int task_config(const batch_task_opts *o, batch_task *t, loader *L, lis_error *err)
{
    char *cfg_path = path_join(o->task_dir, "config.yaml");
    if (!cfg_path)
        return lis_oom(err);
    int rc = -1;
    cJSON *cfg = NULL, *legacy = NULL;
    char *legacy_path = NULL;
    if (!exists(cfg_path)) {
        lis_fail(err, ENOENT,
                 "%s: no config.yaml; a task folder holds config.yaml "
                 "(dataset: json, data_files: data.jsonl, system_prompt, instance_prompt)",
                 o->task_dir);
        goto out;
    }
    if (!(cfg = load_yaml_map(cfg_path, "task config", err)))
        goto out;
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(cfg, "dataset");
    const cJSON *df = cJSON_GetObjectItemCaseSensitive(cfg, "data_files");
    if (cJSON_IsString(ds) && strcmp(ds->valuestring, "json")) {
        refuse_hf(cfg_path, o->task_dir, cfg, ds->valuestring, err);
        goto out;
    }
    if (ds && !cJSON_IsString(ds)) {
        lis_fail(err, EINVAL, "%s: dataset must be json (or a HuggingFace name)", cfg_path);
        goto out;
    }
    if (cJSON_IsObject(df)) /* HuggingFace's {split: files}; original: "train" */
        df = cJSON_GetObjectItemCaseSensitive(df, "train");
    if (cJSON_IsString(df)) {
        if (add_data_file(L, o->task_dir, df->valuestring, cfg_path, err) < 0)
            goto out;
    } else if (cJSON_IsArray(df) && cJSON_GetArraySize(df) > 0) {
        for (const cJSON *e = df->child; e; e = e->next) {
            if (!cJSON_IsString(e)) {
                lis_fail(err, EINVAL, "%s: data_files entries must be file names", cfg_path);
                goto out;
            }
            if (add_data_file(L, o->task_dir, e->valuestring, cfg_path, err) < 0)
                goto out;
        }
    } else {
        lis_fail(err, EINVAL,
                 "%s: no data_files; add dataset: json and data_files: "
                 "data.jsonl (a file, or a list of files, relative to the folder)",
                 cfg_path);
        goto out;
    }
    /* prompts: general.yaml's texts and the task folder's default dirs, then
     * the legacy prompt_config file, then config.yaml itself. original: the
     * same defaults, but runner.py ignores config.yaml's *_dir keys */
    if (agent_prompts_default(&t->prompts) < 0 ||
        set_dirs(&t->prompts, "/testbed", "/testbed/documents", "/testbed", err) < 0) {
        lis_oom(err);
        goto out;
    }
    const cJSON *pc = cJSON_GetObjectItemCaseSensitive(cfg, "prompt_config");
    if (!cJSON_GetObjectItemCaseSensitive(cfg, "system_prompt") && cJSON_IsString(pc)) {
        legacy_path = path_join(o->task_dir, pc->valuestring);
        if (legacy_path && !exists(legacy_path) && exists(pc->valuestring)) {
            free(legacy_path); /* original: opened relative to the current dir */
            legacy_path = agent_strdup(pc->valuestring);
        }
        if (!legacy_path) {
            lis_oom(err);
            goto out;
        }
        if (!(legacy = load_yaml_map(legacy_path, "prompt_config", err)) ||
            apply_layer(&t->prompts, legacy, legacy_path, err) < 0)
            goto out;
    }
    if (apply_layer(&t->prompts, cfg, cfg_path, err) < 0)
        goto out;
    rc = 0;
out:
    cJSON_Delete(cfg);
    cJSON_Delete(legacy);
    free(legacy_path);
    free(cfg_path);
    return rc;
}

static char *optional_file(const char *dir, const char *name)
{
    char *p = path_join(dir, name);
    if (p && !exists(p)) {
        free(p);
        p = NULL;
    }
    return p;
}

int batch_task_load(const batch_task_opts *o, batch_task *t, lis_error *err)
{
    memset(t, 0, sizeof *t);
    int has_dir = o->task_dir && *o->task_dir, has_file = o->tasks_file && *o->tasks_file;
    if (has_dir == has_file)
        return lis_fail(err, EINVAL,
                        has_dir ? "give --task DIR or --tasks FILE, not both"
                                : "no task: give --task DIR (a benchmark "
                                  "folder) or --tasks FILE (JSON or JSONL)");
    loader L = {0};
    L.hint =
        has_dir ? "data_files in config.yaml (relative to the task folder)" : "the --tasks path";
    int rc = -1;
    if (has_dir) {
        t->dir = agent_strdup(o->task_dir);
        t->name = base_name(o->task_dir, 0);
        if (!t->dir || !t->name) {
            lis_oom(err);
            goto out;
        }
        if (task_config(o, t, &L, err) < 0)
            goto out;
        t->reward_py = optional_file(t->dir, "reward.py");
        t->judge_py = optional_file(t->dir, "judge.py");
        t->vanilla_prompt_py = optional_file(t->dir, "vanilla_llm_prompt.py");
    } else {
        t->name = base_name(o->tasks_file, 1);
        L.files[L.nfiles++] = agent_strdup(o->tasks_file);
        if (!t->name || !L.files[0] || agent_prompts_default(&t->prompts) < 0) {
            lis_oom(err);
            goto out;
        }
    }
    if (o->prompt_config && *o->prompt_config) {
        cJSON *pcfg = load_yaml_map(o->prompt_config, "--prompt-config", err);
        int bad = !pcfg || apply_layer(&t->prompts, pcfg, o->prompt_config, err) < 0;
        cJSON_Delete(pcfg);
        if (bad)
            goto out;
    }
    for (size_t i = 0; i < L.nfiles; i++)
        if (load_file(&L, (uint32_t)i, err) < 0)
            goto out;
    if (L.n == 0) {
        lis_fail(err, EINVAL,
                 "%s holds no rows; a data file is a JSON array of row objects "
                 "or JSONL (one per line)",
                 L.files[0]);
        goto out;
    }
    strbuf paths = {0};
    for (size_t i = 0; i < L.nfiles; i++)
        strbuf_printf(&paths, "%s%s", i ? ", " : "", L.files[i]);
    if (!(t->data_path = strbuf_take(&paths))) {
        lis_oom(err);
        goto out;
    }
    size_t lo, hi;
    slice(o, L.n, &lo, &hi);
    t->total_rows = L.n;
    for (size_t i = 0; i < L.n; i++) {
        if (i < lo || i >= hi) {
            row_free(&L.rows[i]);
            continue;
        }
        char at[PATH_MAX + 16];
        check_row(&L.rows[i], where(&L, i, at, sizeof at));
        t->nrows++;
    }
    if (lo > 0 && t->nrows)
        memmove(L.rows, L.rows + lo, t->nrows * sizeof *L.rows);
    t->rows = L.rows;
    L.rows = NULL;
    L.n = 0;
    rc = 0;
out:
    for (size_t i = 0; i < L.n; i++)
        row_free(&L.rows[i]);
    free(L.rows);
    free(L.src);
    free(L.ids);
    for (size_t i = 0; i < L.nfiles; i++)
        free((char *)L.files[i]);
    if (rc < 0)
        batch_task_free(t);
    return rc;
}

void batch_task_free(batch_task *t)
{
    for (size_t i = 0; i < t->nrows; i++)
        row_free(&t->rows[i]);
    free(t->rows);
    free(t->name);
    free(t->dir);
    free(t->data_path);
    free(t->reward_py);
    free(t->judge_py);
    free(t->vanilla_prompt_py);
    agent_prompts_free(&t->prompts);
    memset(t, 0, sizeof *t);
}
