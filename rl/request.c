/* request.c - a group's body (POST /lis/v1/groups, docs/rl.md) parsed and checked strictly.
 *
 * Every key is known or refused with its dotted name, every type and bound is
 * checked, and nothing is kept from a body that fails: the status says which
 * rule (400 malformed, 413 a byte budget, 422 a count or a range). Free-form
 * values (inference.sampling, task.reward.ground_truth and args, labels) are
 * passed on unchanged but must have their shape and stay under a budget. */
#include "rl.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RL_DEF_MAX_N 512
#define RL_DEF_FILES_BYTES (64ull << 20)
#define RL_MAX_FILES 10000        /* task.files entries */
#define RL_MAX_SETUP 64           /* task.setup commands */
#define RL_SETUP_BYTES (64 << 10) /* one set-up command */
#define RL_TEXT_BYTES (8u << 20)  /* task.prompt, or all of task.messages' contents */
#define RL_MAX_MESSAGES 1024
#define RL_PROMPT_BYTES (1u << 20) /* each text of task.prompts */
#define RL_SMALL_JSON (64u << 10)  /* labels, inference.sampling (as JSON text) */
#define RL_ROW_BYTES (4u << 20)    /* task.reward's ground_truth and args (as JSON text) */
#define RL_JSON_DEPTH 256          /* nesting of a free-form value */
#define RL_ID_CHARS 200            /* request_id, task.id */
#define RL_NAME_CHARS 512          /* task.image, inference.model */
#define RL_URL_CHARS 2048
#define RL_KEY_CHARS 4096 /* inference.api_key, task.reward.scorer */
#define RL_PATH_CHARS 4095
#define RL_MAX_STEPS 1000
#define RL_MAX_TOKEN_LIMIT (1L << 24)
#define RL_MAX_SECONDS (7 * 86400.0)   /* deadline_s, tool_timeout_s, setup_timeout_s */
#define RL_SEED_MAX 9007199254740992.0 /* 2^53: a seed a double holds exactly */

/* A failed check: err->code and err->http_status the HTTP status (rl/'s
 * convention, rl.h: the API answers with it). */
static int bad(lis_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(lis_error *err, int status, const char *fmt, ...)
{
    char line[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    lis_fail(err, status, "%s", line);
    if (err)
        err->http_status = status;
    return -1;
}

/* s as shown in a message (buf: at least 72 bytes): its first 64 bytes (no
 * character split), control bytes as '?', "..." when cut: a hostile key
 * cannot make the one line long or break it. */
static const char *shown(const char *s, char *buf, size_t len)
{
    s = s ? s : "";
    lis_utf8_copy(buf, len < 65 ? len : 65, s);
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    if (strlen(buf) < strlen(s) && len >= 72)
        strcat(buf, "...");
    return buf;
}

/* "where.key", or "key" at the top. */
static void dotted(char *out, size_t len, const char *where, const char *key)
{
    snprintf(out, len, "%s%s%s", where, *where ? "." : "", key);
}

/* Every key of obj is one of keys (NULL-terminated) and appears once. */
static int known_keys(const cJSON *obj, const char *where, const char *const *keys, lis_error *err)
{
    unsigned long seen = 0; /* a bit per key: no list has more than 32 */
    char k[72], at[300];
    for (const cJSON *c = obj->child; c; c = c->next) {
        size_t i = 0;
        while (keys[i] && (!c->string || strcmp(keys[i], c->string)))
            i++;
        dotted(at, sizeof at, where, shown(c->string, k, sizeof k));
        if (!keys[i])
            return bad(err, 400, "unknown key %s", at);
        if (seen & (1ul << i))
            return bad(err, 400, "duplicate key %s", at);
        seen |= 1ul << i;
    }
    return 0;
}

static cJSON_bool any(const cJSON *const v) { return v != NULL; }

/* obj's member key in *m: 1 when it is there and is() holds, 0 when absent,
 * -1 (400 "where.key must be what") when of another type. */
static int member(const cJSON *obj, const char *where, const char *key,
                  cJSON_bool (*is)(const cJSON *const), const char *what, const cJSON **m,
                  lis_error *err)
{
    char at[300];
    dotted(at, sizeof at, where, key);
    *m = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!*m)
        return 0;
    return is(*m) ? 1 : bad(err, 400, "%s must be %s", at, what);
}

/* An object member whose keys are all in keys: member()'s 1, 0 (absent,
 * refused when required) or -1. */
static int section(const cJSON *obj, const char *where, const char *key, const char *const *keys,
                   int required, const cJSON **m, lis_error *err)
{
    char at[300];
    dotted(at, sizeof at, where, key);
    int rc = member(obj, where, key, cJSON_IsObject, "an object", m, err);
    if (rc == 0 && required)
        return bad(err, 400, "%s is missing", at);
    return rc <= 0 ? rc : known_keys(*m, at, keys, err) < 0 ? -1 : 1;
}

/* Valid UTF-8; a name (!text: an id, a path, a key, a URL) also without
 * control characters (a header or a log line cannot be split by one). */
static int text_ok(const char *s, int text)
{
    size_t n = strlen(s);
    if (!lis_utf8_valid(s, n))
        return 0;
    for (size_t i = 0; i < n && !text; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

/* A string member: absent -> *out NULL (refused when required); a copy
 * otherwise. max: bytes at most (over it: status over); text: free text
 * (else a name, see text_ok); every string must be UTF-8. */
typedef struct str_rule {
    int required, text, nonempty, over;
    size_t max;
} str_rule;

static int get_str(const cJSON *obj, const char *where, const char *key, str_rule r, char **out,
                   lis_error *err)
{
    char at[300];
    dotted(at, sizeof at, where, key);
    *out = NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return r.required ? bad(err, 400, "%s is missing", at) : 0;
    if (!cJSON_IsString(v) || !v->valuestring)
        return bad(err, 400, "%s must be a string", at);
    size_t n = strlen(v->valuestring);
    if (r.nonempty && !n)
        return bad(err, 400, "%s must not be empty", at);
    if (n > r.max)
        return bad(err, r.over, "%s is %zu bytes, at most %zu", at, n, r.max);
    if (!text_ok(v->valuestring, r.text))
        return bad(err, 400, "%s must be UTF-8%s", at,
                   r.text ? " text" : " without control characters");
    if (!(*out = strdup(v->valuestring)))
        return lis_oom(err);
    return 0;
}

/* A number member in [lo, hi] (lo excluded when open), integral when
 * integer; absent: def. */
typedef struct num_rule {
    double lo, hi, def;
    int open, integer;
} num_rule;

static int get_num(const cJSON *obj, const char *where, const char *key, num_rule r, double *out,
                   lis_error *err)
{
    char at[300];
    dotted(at, sizeof at, where, key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = r.def;
    if (!v)
        return 0;
    const char *what = r.integer ? "an integer" : "a number";
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return bad(err, 400, "%s must be %s", at, what);
    double d = v->valuedouble;
    if (r.integer && d != floor(d))
        return bad(err, 400, "%s must be %s", at, what);
    if (d > r.hi || d < r.lo || (r.open && d <= r.lo)) {
        char hi[48] = "";
        if (!isinf(r.hi))
            snprintf(hi, sizeof hi, " and at most %g", r.hi);
        return bad(err, 422, "%s must be %s %s %g%s (got %g)", at, what,
                   r.open ? "over" : "at least", r.lo, hi, d);
    }
    *out = d;
    return 0;
}

/* Bytes of v as JSON text at most (strings unescaped: close enough for a
 * budget), or TOO_BIG once over cap, TOO_DEEP past RL_JSON_DEPTH levels. */
#define TOO_DEEP SIZE_MAX
#define TOO_BIG (SIZE_MAX - 1)
static size_t json_bytes(const cJSON *v, int depth, size_t cap)
{
    if (depth > RL_JSON_DEPTH)
        return TOO_DEEP;
    size_t n = v->string ? strlen(v->string) + 3 : 0;
    if (cJSON_IsString(v))
        n += (v->valuestring ? strlen(v->valuestring) : 0) + 2;
    else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        n += 2;
        for (const cJSON *c = v->child; c && n <= cap; c = c->next) {
            size_t m = json_bytes(c, depth + 1, cap);
            if (m >= TOO_BIG)
                return m;
            n += m + 1;
        }
    } else
        n += 24;
    return n > cap ? TOO_BIG : n;
}

/* A free-form member (any JSON, or an object when object): a copy in *out
 * (NULL when absent), under cap bytes and RL_JSON_DEPTH levels. */
static int get_free(const cJSON *obj, const char *where, const char *key, int object, size_t cap,
                    cJSON **out, lis_error *err)
{
    char at[300];
    dotted(at, sizeof at, where, key);
    *out = NULL;
    const cJSON *v;
    int rc = member(obj, where, key, object ? cJSON_IsObject : any, "an object", &v, err);
    if (rc <= 0)
        return rc;
    size_t n = json_bytes(v, 0, cap);
    if (n == TOO_DEEP)
        return bad(err, 422, "%s is nested over %d levels", at, RL_JSON_DEPTH);
    if (n == TOO_BIG)
        return bad(err, 413, "%s is over %zu bytes as JSON", at, cap);
    if (!(*out = cJSON_Duplicate(v, 1)))
        return lis_oom(err);
    return 0;
}

/* ---- paths in the sandbox --------------------------------------------- */

/* name made absolute (under base when relative; base absolute, normalised,
 * "" for "/"), "." and empty components dropped; NULL with *why when it has
 * a ".." or control characters, names no file (unless root_ok: "/"), or is
 * too long. */
static char *norm_path(const char *base, const char *name, int root_ok, const char **why,
                       lis_error *err)
{
    *why = NULL;
    if (!*name)
        return *why = "is empty", NULL;
    if (!text_ok(name, 0))
        return *why = "must be UTF-8 without control characters", NULL;
    size_t blen = name[0] == '/' ? 0 : strlen(base), nlen = strlen(name);
    if (blen + nlen + 2 > RL_PATH_CHARS + 1)
        return *why = "is too long", NULL;
    char *out = malloc(blen + nlen + 2);
    if (!out)
        return lis_oom(err), NULL;
    memcpy(out, base, blen);
    size_t o = blen;
    for (const char *p = name; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            free(out);
            return *why = "has a \"..\" component", NULL;
        }
        if (n > 255) {
            free(out);
            return *why = "has a component over 255 bytes", NULL;
        }
        if (n && !(n == 1 && p[0] == '.')) {
            out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n + (p[n] == '/');
    }
    if (o == blen && !(root_ok && !blen)) {
        free(out);
        return *why = "names no file", NULL;
    }
    if (!o)
        out[o++] = '/';
    out[o] = 0;
    return out;
}

/* ---- the task ---------------------------------------------------------- */

static const char *const PROMPTS_KEYS[] = {"system_prompt", "instance_prompt", "working_dir",
                                           "input_dir",     "output_dir",      NULL};

/* task.prompts: a copy with its directories absolute and normalised, and
 * output_dir /testbed when not given. original: the RL and benchmark configs
 * put the answer in /testbed/answer.txt, not general.yaml's /testbed/output:
 * the prompt the model reads and the answer file the scorer reads agree. */
static int parse_prompts(const cJSON *task, rl_task *t, lis_error *err)
{
    const cJSON *p;
    int rc = section(task, "task", "prompts", PROMPTS_KEYS, 0, &p, err);
    if (rc < 0)
        return -1;
    int own_out = rc && cJSON_GetObjectItemCaseSensitive(p, "output_dir");
    if (!(t->prompts = cJSON_CreateObject()) ||
        (!own_out && !cJSON_AddStringToObject(t->prompts, "output_dir", "/testbed")))
        return lis_oom(err);
    if (!rc)
        return 0;
    for (int i = 0; PROMPTS_KEYS[i]; i++) {
        char *s;
        int dir = i >= 2;
        str_rule r = {.text = !dir,
                      .nonempty = dir,
                      .over = dir ? 422 : 413,
                      .max = dir ? RL_PATH_CHARS : RL_PROMPT_BYTES};
        if (get_str(p, "task.prompts", PROMPTS_KEYS[i], r, &s, err) < 0)
            return -1;
        if (!s)
            continue;
        if (dir) {
            const char *why = "must be an absolute path";
            char *v = s[0] == '/' ? norm_path("", s, 1, &why, err) : NULL;
            free(s);
            if (!v)
                return why ? bad(err, 400, "task.prompts.%s %s", PROMPTS_KEYS[i], why) : -1;
            s = v;
        }
        cJSON *sv = cJSON_CreateString(s);
        free(s);
        if (!sv || !cJSON_AddItemToObject(t->prompts, PROMPTS_KEYS[i], sv)) {
            cJSON_Delete(sv);
            return lis_oom(err);
        }
    }
    return 0;
}

/* A prompts directory: task.prompts' or the default. */
static const char *prompts_dir(const rl_task *t, const char *key, const char *def)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t->prompts, key));
    return s ? s : def;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const rl_file *)a)->path, ((const rl_file *)b)->path);
}

/* task.files: name -> text, each put at its absolute path, unique. */
static int parse_files(const cJSON *task, const rl_limits *lim, rl_task *t, lis_error *err)
{
    const cJSON *f;
    int rc = member(task, "task", "files", cJSON_IsObject, "an object of name: text", &f, err);
    if (rc <= 0)
        return rc;
    uint64_t cap = lim && lim->max_files_bytes ? lim->max_files_bytes : RL_DEF_FILES_BYTES;
    uint64_t total = 0;
    size_t count = 0;
    char k[72];
    for (const cJSON *e = f->child; e; e = e->next) {
        if (++count > RL_MAX_FILES)
            return bad(err, 422, "task.files has more than %d files", RL_MAX_FILES);
        if (!cJSON_IsString(e) || !e->valuestring)
            return bad(err, 400, "task.files[\"%s\"] must be a string (the file's text)",
                       shown(e->string, k, sizeof k));
        total += strlen(e->valuestring);
    }
    if (total > cap)
        return bad(err, 413, "task.files hold %llu bytes, more than the %llu this server takes",
                   (unsigned long long)total, (unsigned long long)cap);
    if (!count)
        return 0;
    if (!(t->files = calloc(count, sizeof *t->files)))
        return lis_oom(err);
    const char *in = prompts_dir(t, "input_dir", "/testbed/input");
    const char *base = strcmp(in, "/") ? in : "";
    for (const cJSON *e = f->child; e; e = e->next) {
        rl_file *o = &t->files[t->nfiles];
        const char *why;
        if (!(o->path = norm_path(base, e->string ? e->string : "", 0, &why, err)))
            return why ? bad(err, 400, "task.files name \"%s\" %s", shown(e->string, k, sizeof k),
                             why)
                       : -1;
        t->nfiles++;
        o->len = strlen(e->valuestring);
        if (!lis_utf8_valid(e->valuestring, o->len))
            return bad(err, 400, "task.files[\"%s\"] is not UTF-8 text",
                       shown(e->string, k, sizeof k));
        if (!(o->data = malloc(o->len + 1)))
            return lis_oom(err);
        memcpy(o->data, e->valuestring, o->len + 1);
    }
    qsort(t->files, t->nfiles, sizeof *t->files, by_path);
    for (size_t i = 1; i < t->nfiles; i++)
        if (!strcmp(t->files[i - 1].path, t->files[i].path))
            return bad(err, 400, "task.files names %s twice", shown(t->files[i].path, k, sizeof k));
    return 0;
}

static int parse_setup(const cJSON *task, rl_task *t, lis_error *err)
{
    const cJSON *s;
    int rc = member(task, "task", "setup", cJSON_IsArray, "an array of shell commands", &s, err);
    if (rc <= 0)
        return rc;
    int n = cJSON_GetArraySize(s);
    if (n > RL_MAX_SETUP)
        return bad(err, 422, "task.setup has %d commands, at most %d", n, RL_MAX_SETUP);
    if (n && !(t->setup = calloc((size_t)n, sizeof *t->setup)))
        return lis_oom(err);
    for (const cJSON *c = s->child; c; c = c->next) {
        char at[32];
        snprintf(at, sizeof at, "task.setup[%zu]", t->nsetup);
        if (!cJSON_IsString(c) || !c->valuestring)
            return bad(err, 400, "%s must be a string", at);
        size_t len = strlen(c->valuestring);
        if (!len)
            return bad(err, 400, "%s must not be empty", at);
        if (len > RL_SETUP_BYTES)
            return bad(err, 413, "%s is %zu bytes, at most %d", at, len, RL_SETUP_BYTES);
        if (!text_ok(c->valuestring, 1))
            return bad(err, 400, "%s must be UTF-8 text", at);
        if (!(t->setup[t->nsetup] = strdup(c->valuestring)))
            return lis_oom(err);
        t->nsetup++;
    }
    return 0;
}

static const char *const MESSAGE_KEYS[] = {"role", "content", NULL};

/* task.messages: [{role: system|user|assistant, content: text}...]. */
static int parse_messages(const cJSON *m, rl_task *t, lis_error *err)
{
    if (!cJSON_IsArray(m))
        return bad(err, 400, "task.messages must be an array of {\"role\", \"content\"}");
    int n = cJSON_GetArraySize(m);
    if (!n)
        return bad(err, 400, "task.messages must not be empty");
    if (n > RL_MAX_MESSAGES)
        return bad(err, 422, "task.messages has %d messages, at most %d", n, RL_MAX_MESSAGES);
    size_t total = 0, i = 0;
    for (const cJSON *e = m->child; e; e = e->next, i++) {
        char at[40];
        snprintf(at, sizeof at, "task.messages[%zu]", i);
        if (!cJSON_IsObject(e))
            return bad(err, 400, "%s must be an object {\"role\", \"content\"}", at);
        if (known_keys(e, at, MESSAGE_KEYS, err) < 0)
            return -1;
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "role"));
        if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant")))
            return bad(err, 400, "%s.role must be \"system\", \"user\" or \"assistant\"", at);
        const char *c = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "content"));
        if (!c)
            return bad(err, 400, "%s.content must be a string", at);
        total += strlen(c);
        if (total > RL_TEXT_BYTES)
            return bad(err, 413, "task.messages' contents are over %u bytes", RL_TEXT_BYTES);
        if (!text_ok(c, 1))
            return bad(err, 400, "%s.content must be UTF-8 text", at);
    }
    if (!(t->messages = cJSON_Duplicate(m, 1)))
        return lis_oom(err);
    return 0;
}

static const char *const REWARD_KEYS[] = {"scorer", "ground_truth", "args", "timeout_s", NULL};

/* task.reward: the scorer, and the row it gets: args + ground_truth. */
static int parse_reward(const cJSON *task, rl_task *t, lis_error *err)
{
    const cJSON *r;
    t->reward_timeout = 60;
    int rc = section(task, "task", "reward", REWARD_KEYS, 0, &r, err);
    if (rc <= 0)
        return rc;
    str_rule sr = {.required = 1, .nonempty = 1, .text = 1, .over = 422, .max = RL_KEY_CHARS};
    if (get_str(r, "task.reward", "scorer", sr, &t->scorer, err) < 0)
        return -1;
    static const char *const kinds[] = {"builtin:", "cmd:", "python:"};
    size_t k = 0;
    while (k < 3 && strncmp(t->scorer, kinds[k], strlen(kinds[k])))
        k++;
    if (k == 3 || !t->scorer[strlen(kinds[k])])
        return bad(err, 400,
                   "task.reward.scorer must be builtin:NAME, cmd:COMMAND or python:PATH/reward.py");
    num_rule tr = {.lo = 0, .open = 1, .hi = 3600, .def = 60};
    if (get_num(r, "task.reward", "timeout_s", tr, &t->reward_timeout, err) < 0)
        return -1;
    cJSON *args, *gt;
    if (get_free(r, "task.reward", "args", 1, RL_ROW_BYTES, &args, err) < 0)
        return -1;
    if (get_free(r, "task.reward", "ground_truth", 0, RL_ROW_BYTES, &gt, err) < 0) {
        cJSON_Delete(args);
        return -1;
    }
    t->reward_row = args ? args : cJSON_CreateObject();
    if (!t->reward_row) {
        cJSON_Delete(gt);
        return lis_oom(err);
    }
    if (cJSON_GetObjectItemCaseSensitive(t->reward_row, "ground_truth")) {
        cJSON_Delete(gt);
        if (!gt)
            return 0;
        return bad(err, 400,
                   "task.reward.args.ground_truth and task.reward.ground_truth: give it once");
    }
    if (!gt && !(gt = cJSON_CreateNull()))
        return lis_oom(err);
    if (!cJSON_AddItemToObject(t->reward_row, "ground_truth", gt)) {
        cJSON_Delete(gt);
        return lis_oom(err);
    }
    if (json_bytes(t->reward_row, 0, RL_ROW_BYTES) >= TOO_BIG)
        return bad(err, 413, "task.reward's args and ground_truth are over %u bytes as JSON",
                   RL_ROW_BYTES);
    return 0;
}

static const char *const TASK_KEYS[] = {"id",     "image",           "files",   "setup",
                                        "prompt", "messages",        "prompts", "answer_file",
                                        "reward", "setup_timeout_s", NULL};

static int parse_task(const cJSON *body, const rl_limits *lim, rl_task *t, lis_error *err)
{
    const cJSON *task;
    if (section(body, "", "task", TASK_KEYS, 1, &task, err) < 0)
        return -1;
    str_rule id = {.over = 422, .max = RL_ID_CHARS};
    str_rule image = {.nonempty = 1, .over = 422, .max = RL_NAME_CHARS};
    if (get_str(task, "task", "id", id, &t->id, err) < 0 ||
        get_str(task, "task", "image", image, &t->image, err) < 0)
        return -1;
    if (!t->id && !(t->id = strdup("")))
        return lis_oom(err);
    num_rule st = {.lo = 0, .open = 1, .hi = RL_MAX_SECONDS, .def = 600};
    if (get_num(task, "task", "setup_timeout_s", st, &t->setup_timeout, err) < 0 ||
        parse_prompts(task, t, err) < 0 || parse_files(task, lim, t, err) < 0 ||
        parse_setup(task, t, err) < 0 || parse_reward(task, t, err) < 0)
        return -1;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(task, "messages");
    str_rule pr = {.nonempty = 1, .text = 1, .over = 413, .max = RL_TEXT_BYTES};
    if (get_str(task, "task", "prompt", pr, &t->prompt, err) < 0)
        return -1;
    if (!t->prompt == !m)
        return bad(err, 400, "task needs exactly one of prompt and messages");
    if (m && parse_messages(m, t, err) < 0)
        return -1;
    /* original: {output_dir}/answer.txt */
    str_rule af = {.nonempty = 1, .over = 422, .max = RL_PATH_CHARS};
    char *a;
    if (get_str(task, "task", "answer_file", af, &a, err) < 0)
        return -1;
    const char *why = NULL;
    if (a && a[0] != '/')
        why = "must be an absolute path";
    else if (a)
        t->answer_file = norm_path("", a, 0, &why, err);
    else {
        const char *out = prompts_dir(t, "output_dir", "/testbed"); /* always there */
        t->answer_file = norm_path(strcmp(out, "/") ? out : "", "answer.txt", 0, &why, err);
    }
    free(a);
    if (!t->answer_file)
        return why ? bad(err, 400, "task.answer_file %s", why) : -1;
    return 0;
}

/* ---- the rest of the body ---------------------------------------------- */

static const char *const INFERENCE_KEYS[] = {"base_url", "model", "api_key",
                                             "sampling", "seeds", NULL};
/* What lis itself puts in each request's body: sampling may not replace it. */
static const char *const LIS_OWN[] = {"model",  "messages",       "tools",
                                      "stream", "stream_options", NULL};

static int parse_seeds(const cJSON *inf, rl_request *r, lis_error *err)
{
    const cJSON *s;
    int rc = member(inf, "inference", "seeds", cJSON_IsArray,
                    "an array of integers, one per episode", &s, err);
    if (rc <= 0)
        return rc;
    int n = cJSON_GetArraySize(s);
    if (n != r->n)
        return bad(err, 422, "inference.seeds has %d seeds for n = %d episodes", n, r->n);
    if (cJSON_GetObjectItemCaseSensitive(r->sampling, "seed"))
        return bad(err, 400, "inference.sampling.seed and inference.seeds: give one");
    if (!(r->seeds = calloc((size_t)n, sizeof *r->seeds)))
        return lis_oom(err);
    int i = 0;
    for (const cJSON *c = s->child; c; c = c->next, i++) {
        double d = cJSON_IsNumber(c) ? c->valuedouble : NAN;
        if (!isfinite(d) || d != floor(d))
            return bad(err, 400, "inference.seeds[%d] must be an integer", i);
        if (fabs(d) > RL_SEED_MAX)
            return bad(err, 422, "inference.seeds[%d] must be within +-2^53", i);
        r->seeds[i] = (long long)d;
    }
    return 0;
}

static int parse_inference(const cJSON *body, rl_request *r, lis_error *err)
{
    const cJSON *inf;
    if (section(body, "", "inference", INFERENCE_KEYS, 1, &inf, err) < 0)
        return -1;
    str_rule url = {.required = 1, .nonempty = 1, .over = 422, .max = RL_URL_CHARS};
    str_rule model = {.required = 1, .nonempty = 1, .over = 422, .max = RL_NAME_CHARS};
    str_rule key = {.over = 422, .max = RL_KEY_CHARS};
    if (get_str(inf, "inference", "base_url", url, &r->base_url, err) < 0)
        return -1;
    const char *host = !strncmp(r->base_url, "http://", 7)    ? r->base_url + 7
                       : !strncmp(r->base_url, "https://", 8) ? r->base_url + 8
                                                              : NULL;
    if (!host || !*host || *host == '/' || strpbrk(r->base_url, " "))
        return bad(err, 400, "inference.base_url must be an http:// or https:// URL");
    if (get_str(inf, "inference", "model", model, &r->model, err) < 0 ||
        get_str(inf, "inference", "api_key", key, &r->api_key, err) < 0 ||
        get_free(inf, "inference", "sampling", 1, RL_SMALL_JSON, &r->sampling, err) < 0)
        return -1;
    for (int i = 0; r->sampling && LIS_OWN[i]; i++)
        if (cJSON_GetObjectItemCaseSensitive(r->sampling, LIS_OWN[i]))
            return bad(err, 400, "inference.sampling.%s is lis's to send; leave it out",
                       LIS_OWN[i]);
    /* the one sampling key lis reads: its LLM client sends it and shrinks it when the
     * context runs out (original: the max_tokens back-off) */
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(r->sampling, "max_tokens");
    long long v;
    if (mt && rl_json_int(mt, 1, 1ll << 30, &v) < 0)
        return bad(err, 400, "inference.sampling.max_tokens must be an integer 1..2^30");
    return parse_seeds(inf, r, err);
}

/* keep_snapshots: "none", "every_step" or steps k in 1..max_steps (sorted, once each). */
static int parse_snaps(const cJSON *body, rl_request *r, lis_error *err)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(body, "keep_snapshots");
    const char *s = cJSON_GetStringValue(k);
    if (!k || (s && !strcmp(s, "none")))
        return 0;
    if (s && !strcmp(s, "every_step")) {
        r->snaps = RL_SNAP_EVERY;
        return 0;
    }
    if (!cJSON_IsArray(k))
        return bad(err, 400, "keep_snapshots must be \"none\", \"every_step\" or a list of steps");
    int n = cJSON_GetArraySize(k);
    if (n > r->max_steps)
        return bad(err, 422, "keep_snapshots lists %d steps, more than max_steps (%d)", n,
                   r->max_steps);
    char *want = calloc((size_t)r->max_steps + 1, 1);
    if (!want || (n && !(r->snap_steps = calloc((size_t)n, sizeof *r->snap_steps)))) {
        free(want);
        return lis_oom(err);
    }
    int i = 0;
    for (const cJSON *c = k->child; c; c = c->next, i++) {
        double d = cJSON_IsNumber(c) ? c->valuedouble : NAN;
        if (!isfinite(d) || d != floor(d)) {
            free(want);
            return bad(err, 400, "keep_snapshots[%d] must be an integer step", i);
        }
        if (d < 1 || d > r->max_steps) {
            free(want);
            return bad(err, 422, "keep_snapshots[%d] must be a step in 1..max_steps (%d)", i,
                       r->max_steps);
        }
        want[(int)d] = 1;
    }
    for (int st = 1; st <= r->max_steps; st++)
        if (want[st])
            r->snap_steps[r->nsnap_steps++] = st;
    free(want);
    r->snaps = RL_SNAP_LIST;
    return 0;
}

static const char *const BODY_KEYS[] = {"request_id", "task",
                                        "n",          "inference",
                                        "max_steps",  "max_token_limit",
                                        "deadline_s", "tool_timeout_s",
                                        "labels",     "keep_snapshots",
                                        "effects",    "idle_timeout_s",
                                        NULL};

static int parse_body(const cJSON *body, const rl_limits *lim, rl_request *r, lis_error *err)
{
    if (!cJSON_IsObject(body))
        return bad(err, 400, "the body must be a JSON object (docs/rl.md)");
    if (known_keys(body, "", BODY_KEYS, err) < 0)
        return -1;
    int max_n = lim && lim->max_n > 0 ? lim->max_n : RL_DEF_MAX_N;
    double n, steps, tokens;
    if (get_num(body, "", "n", (num_rule){.lo = 1, .hi = HUGE_VAL, .def = 1, .integer = 1}, &n,
                err) < 0)
        return -1;
    if (n > max_n)
        return bad(err, 422, "n is %g, over this server's cap of %d episodes a group", n, max_n);
    r->n = (int)n;
    num_rule ms = {.lo = 1, .hi = RL_MAX_STEPS, .def = 100, .integer = 1};
    num_rule mt = {.lo = 1, .hi = RL_MAX_TOKEN_LIMIT, .def = 65536, .integer = 1};
    num_rule dl = {.lo = 0, .hi = RL_MAX_SECONDS, .def = 0};
    num_rule tt = {.lo = 0, .open = 1, .hi = RL_MAX_SECONDS, .def = 120};
    str_rule rid = {.nonempty = 1, .over = 422, .max = RL_ID_CHARS};
    if (get_num(body, "", "max_steps", ms, &steps, err) < 0 ||
        get_num(body, "", "max_token_limit", mt, &tokens, err) < 0 ||
        get_num(body, "", "deadline_s", dl, &r->deadline_s, err) < 0 ||
        get_num(body, "", "tool_timeout_s", tt, &r->tool_timeout, err) < 0 ||
        get_str(body, "", "request_id", rid, &r->request_id, err) < 0)
        return -1;
    r->max_steps = (int)steps;
    r->max_token_limit = (long)tokens;
    const cJSON *eff = cJSON_GetObjectItemCaseSensitive(body, "effects");
    if (eff && !cJSON_IsBool(eff))
        return bad(err, 400, "effects must be true or false");
    r->effects = !eff || cJSON_IsTrue(eff);
    /* step mode (POST envs): no endpoint, an idle timeout instead */
    r->step = lim && lim->step;
    num_rule it = {.lo = 0, .open = 1, .hi = RL_MAX_SECONDS, .def = 600};
    if (!r->step && cJSON_GetObjectItemCaseSensitive(body, "idle_timeout_s"))
        return bad(err, 400, "idle_timeout_s is step mode's (POST /lis/v1/envs)");
    if (r->step && cJSON_GetObjectItemCaseSensitive(body, "inference"))
        return bad(err, 400, "step mode: the trainer calls the model");
    if (r->step && get_num(body, "", "idle_timeout_s", it, &r->idle_timeout, err) < 0)
        return -1;
    return get_free(body, "", "labels", 1, RL_SMALL_JSON, &r->labels, err) < 0 ||
                   parse_task(body, lim, &r->task, err) < 0 ||
                   (!r->step && parse_inference(body, r, err) < 0) || parse_snaps(body, r, err) < 0
               ? -1
               : 0;
}

int rl_request_parse(const cJSON *body, const rl_limits *lim, rl_request *out, lis_error *err)
{
    memset(out, 0, sizeof *out);
    if (parse_body(body, lim, out, err) < 0) {
        if (err && !err->http_status) /* out of memory: the code stays ENOMEM */
            err->http_status = 500;
        rl_request_free(out);
        return -1;
    }
    return 0;
}

void rl_request_free(rl_request *r)
{
    if (!r)
        return;
    rl_task *t = &r->task;
    free(t->id);
    free(t->image);
    for (size_t i = 0; i < t->nfiles; i++) {
        free(t->files[i].path);
        free(t->files[i].data);
    }
    free(t->files);
    for (size_t i = 0; i < t->nsetup; i++)
        free(t->setup[i]);
    free(t->setup);
    free(t->prompt);
    cJSON_Delete(t->messages);
    cJSON_Delete(t->prompts);
    free(t->answer_file);
    free(t->scorer);
    cJSON_Delete(t->reward_row);
    free(r->base_url);
    free(r->model);
    free(r->api_key);
    cJSON_Delete(r->sampling);
    free(r->seeds);
    free(r->request_id);
    cJSON_Delete(r->labels);
    free(r->snap_steps);
    memset(r, 0, sizeof *r);
}

int rl_json_int(const cJSON *v, long long lo, long long hi, long long *out)
{
    /* range first: a double out of range cast to an integer is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= (double)lo && v->valuedouble <= (double)hi) ||
        v->valuedouble != floor(v->valuedouble))
        return -1;
    *out = (long long)v->valuedouble;
    return 0;
}
