/* settings.c - `lis run` flags, settings files and environment variables,
 * YAML loading (libyaml).
 * original: cli.py's flags and defaults (also in its --llm_name spelling),
 * its settings files in its search order, its environment variables. */
#include "agent_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* ---- YAML -------------------------------------------------------------- */

/* Aliases share nodes, so a small document can stand for an exponential (or,
 * with an alias inside its own anchor, endless) tree: the nodes converted
 * are counted, and past this many the document is refused. */
#define YAML_MAX_NODES 100000

static cJSON *yaml_node_json(yaml_document_t *doc, yaml_node_t *node, int depth, size_t *budget)
{
    if (!*budget)
        return NULL;
    --*budget;
    if (!node || depth > 64)
        return cJSON_CreateNull();
    switch (node->type) {
    case YAML_SCALAR_NODE: {
        const char *v = (const char *)node->data.scalar.value;
        size_t n = node->data.scalar.length;
        if (node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
            (n == 0 || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") ||
             !strcmp(v, "NULL")))
            return cJSON_CreateNull();
        char *s = agent_strndup(v, n);
        cJSON *j = cJSON_CreateString(s ? s : "");
        free(s);
        return j;
    }
    case YAML_SEQUENCE_NODE: {
        cJSON *a = cJSON_CreateArray();
        for (yaml_node_item_t *it = node->data.sequence.items.start;
             it < node->data.sequence.items.top; it++)
            cJSON_AddItemToArray(a, yaml_node_json(doc, yaml_document_get_node(doc, *it), depth + 1,
                                                   budget));
        return a;
    }
    case YAML_MAPPING_NODE: {
        cJSON *o = cJSON_CreateObject();
        for (yaml_node_pair_t *pr = node->data.mapping.pairs.start;
             pr < node->data.mapping.pairs.top; pr++) {
            yaml_node_t *k = yaml_document_get_node(doc, pr->key);
            if (!k || k->type != YAML_SCALAR_NODE)
                continue;
            char *key = agent_strndup((const char *)k->data.scalar.value, k->data.scalar.length);
            if (key) {
                cJSON_DeleteItemFromObjectCaseSensitive(o, key);
                cJSON_AddItemToObject(o, key,
                                      yaml_node_json(doc, yaml_document_get_node(doc, pr->value),
                                                     depth + 1, budget));
            }
            free(key);
        }
        return o;
    }
    default: return cJSON_CreateNull();
    }
}

cJSON *agent_yaml_load(const char *text, size_t len, lis_error *err)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        lis_fail(err, ENOMEM, "cannot initialise the YAML parser");
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        lis_fail(err, EINVAL, "YAML error at line %zu: %s", parser.problem_mark.line + 1,
                 parser.problem ? parser.problem : "?");
        yaml_parser_delete(&parser);
        return NULL;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    size_t budget = YAML_MAX_NODES;
    cJSON *j = root ? yaml_node_json(&doc, root, 0, &budget) : cJSON_CreateObject();
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (!budget) {
        cJSON_Delete(j);
        lis_fail(err, EINVAL,
                 "YAML error: the document expands to more than %d values "
                 "(aliases)",
                 YAML_MAX_NODES);
        return NULL;
    }
    return j;
}

/* ---- flags ------------------------------------------------------------- */

void agent_cli_usage(FILE *f)
{
    fputs("usage: lis run --query TEXT [options]\n"
          "\n"
          "Runs one LLM-in-Sandbox episode: the model works in a fresh sandbox until it calls\n"
          "submit; /testbed/output is saved to <output-dir>/<YYYYmmdd_HHMMSS>/files/ with\n"
          "trajectory.json next to it, and files/answer.txt is printed.\n"
          "\n"
          "  --query TEXT              the task (required)\n"
          "  --llm-name NAME           model; anthropic/NAME uses the Anthropic Messages API,\n"
          "                            openai/NAME or NAME an OpenAI-compatible endpoint\n"
          "  --llm-base-url URL        e.g. http://localhost:8000/v1 (env LLM_BASE_URL,\n"
          "                            OPENAI_BASE_URL)\n"
          "  --api-key KEY             (env OPENAI_API_KEY; ANTHROPIC_API_KEY for anthropic/)\n"
          "  --input-dir DIR           copied into /testbed/input\n"
          "  --output-dir DIR          default ./output\n"
          "  --image NAME[:TAG]        rootfs from the store (default lis-agent:latest)\n"
          "  --rootfs DIR              a root filesystem directory instead of --image\n"
          "  --max-steps N             default 100\n"
          "  --temperature T           default 1.0 (not sent for o3/o4 models)\n"
          "  --max-token-limit N       ceiling on the whole conversation, default 65536\n"
          "  --max-tokens-per-call N   max_tokens of each call, default 65536\n"
          "  --extra-body JSON         merged into each request, e.g.\n"
          "                            '{\"chat_template_kwargs\":{\"thinking\":true}}'\n"
          "  --prompt-config FILE      YAML with system_prompt, instance_prompt, *_dir\n"
          "  --settings FILE           YAML defaults (llm_name, llm_base_url, api_key,\n"
          "                            prompt_config); else $LLM_IN_SANDBOX_CONFIG,\n"
          "                            ./llm-in-sandbox.yaml, ./llm_in_sandbox.yaml,\n"
          "                            ~/.llm-in-sandbox/config.yaml, ~/.llm-in-sandbox.yaml\n"
          "  --memory SIZE             sandbox memory limit, default 200M\n"
          "  --disk SIZE               the sandbox's writable space, default 1G\n"
          "  --export-max SIZE         data the copy of /testbed/output writes to the host at\n"
          "                            most (sparse holes not counted), default --disk; files\n"
          "                            past it are left out and listed in the log and in\n"
          "                            trajectory.json's metadata.export_skipped\n"
          "  --net proxy|none|host     sandbox network, default proxy: HTTP(S) through lis's\n"
          "                            egress proxy, so pip/apt/curl work (the LLM is\n"
          "                            reached by lis itself, not from the sandbox)\n"
          "  --allow-domain GLOB       --net proxy: only hosts matching some GLOB (repeatable)\n"
          "  --deny-domain GLOB        --net proxy: never hosts matching GLOB (repeatable)\n"
          "  --allow-host-network      --net proxy: let the proxy reach loopback and private\n"
          "                            addresses\n"
          "  --policy FILE             rules over each step's effects: flag, deny, pause, stop\n"
          "                            (docs/monitoring.md; docs/monitoring-policy.yaml)\n"
          "  --effects                 record what each step did (files, processes, network,\n"
          "                            resources) in trajectory.json (the default)\n"
          "  --no-effects              do not record them (no monitor, no seccomp\n"
          "                            notification; not with --policy)\n"
          "  --stream                  use SSE streaming for OpenAI-compatible endpoints\n"
          "  --timeout SECONDS         per LLM request, default 1200\n"
          "  --connect-timeout SECONDS default 30\n"
          "The original's spellings (--llm_name, --input_dir, --docker_image, ...) work too.\n",
          f);
}

typedef enum { T_STR, T_INT, T_LONG, T_DBL, T_BOOL, T_ALLOW, T_DENY } opt_type;
typedef struct opt {
    const char *name;
    opt_type type;
    size_t off;
} opt;

#define O(n, t, f)                                                                                 \
    {                                                                                              \
        n, t, offsetof(agent_cli, f)                                                               \
    }
static const opt OPTS[] = {
    O("query", T_STR, query),
    O("llm-name", T_STR, llm_name),
    O("llm-base-url", T_STR, llm_base_url),
    O("api-key", T_STR, api_key),
    O("input-dir", T_STR, input_dir),
    O("output-dir", T_STR, output_dir),
    O("image", T_STR, image),
    O("docker-image", T_STR, image),
    O("rootfs", T_STR, rootfs),
    O("prompt-config", T_STR, prompt_config),
    O("settings", T_STR, settings),
    O("extra-body", T_STR, extra_body),
    O("net", T_STR, net),
    O("memory", T_STR, memory),
    O("disk", T_STR, disk),
    O("export-max", T_STR, export_max),
    O("max-steps", T_INT, max_steps),
    O("max-token-limit", T_LONG, max_token_limit),
    O("max-tokens-per-call", T_LONG, max_tokens_per_call),
    O("temperature", T_DBL, temperature),
    O("timeout", T_DBL, timeout),
    O("connect-timeout", T_DBL, connect_timeout),
    O("stream", T_BOOL, stream),
    O("effects", T_BOOL, effects),
    O("no-effects", T_BOOL, no_effects),
    O("policy", T_STR, policy),
    O("allow-domain", T_ALLOW, allow_domains),
    O("deny-domain", T_DENY, deny_domains),
    O("allow-host-network", T_BOOL, allow_host_network),
};

int agent_cli_parse(int argc, char **argv, agent_cli *c, const char *cmd, lis_error *err)
{
    memset(c, 0, sizeof *c);
    /* original: run_agent_query's defaults; model_query's 1200 s timeout */
    c->max_steps = 100;
    c->max_token_limit = 65536;
    c->max_tokens_per_call = 65536;
    c->temperature = 1.0;
    c->timeout = 1200;
    c->connect_timeout = 30;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            c->help = 1;
            return 0;
        }
        if (strncmp(a, "--", 2))
            return lis_fail(err, EINVAL, "unexpected argument '%s' (lis %s --help)", a, cmd);
        char name[64];
        const char *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (n >= sizeof name)
            return lis_fail(err, EINVAL, "unknown option '%s' (lis %s --help)", a, cmd);
        memcpy(name, a + 2, n);
        name[n] = 0;
        /* original: its spellings with '_' (--llm_name) */
        for (char *p = name; *p; p++)
            if (*p == '_')
                *p = '-';
        /* original: --save_litellm_response dumps litellm's raw replies; not done */
        if (!strcmp(name, "save-litellm-response")) {
            fprintf(stderr, "lis: --save_litellm_response is not supported; ignored\n");
            if (!eq && i + 1 < argc && strncmp(argv[i + 1], "--", 2))
                i++;
            continue;
        }
        const opt *o = NULL;
        for (size_t k = 0; k < sizeof OPTS / sizeof OPTS[0]; k++)
            if (!strcmp(OPTS[k].name, name))
                o = &OPTS[k];
        if (!o)
            return lis_fail(err, EINVAL, "unknown option '%s' (lis %s --help)", a, cmd);
        char *field = (char *)c + o->off;
        if (o->type == T_BOOL) {
            *(int *)field = !eq || !strcasecmp(eq + 1, "true") || !strcmp(eq + 1, "1");
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v)
            return lis_fail(err, EINVAL, "option --%s needs a value", name);
        char *end = NULL;
        errno = 0;
        switch (o->type) {
        case T_STR: *(const char **)field = v; break;
        case T_ALLOW:
        case T_DENY: {
            size_t *cnt = o->type == T_ALLOW ? &c->nallow : &c->ndeny;
            if (!*v)
                return lis_fail(err, EINVAL, "--%s needs a host pattern (e.g. *.example.com)",
                                name);
            if (*cnt >= AGENT_MAX_DOMAINS)
                return lis_fail(err, E2BIG, "--%s: at most %d patterns", name, AGENT_MAX_DOMAINS);
            ((const char **)field)[(*cnt)++] = v;
            break;
        }
        case T_INT:
        case T_LONG: {
            long x = strtol(v, &end, 10);
            if (!*v || *end || errno || x <= 0)
                return lis_fail(err, EINVAL, "--%s: '%s' is not a positive integer", name, v);
            if (o->type == T_INT)
                *(int *)field = (int)x;
            else
                *(long *)field = x;
            break;
        }
        case T_DBL: {
            double x = strtod(v, &end);
            if (!*v || *end || errno || x < 0)
                return lis_fail(err, EINVAL, "--%s: '%s' is not a number", name, v);
            *(double *)field = x;
            break;
        }
        case T_BOOL: break;
        }
    }
    int run = !strcmp(cmd, "run");
    if (run && (!c->query || !*c->query))
        return lis_fail(err, EINVAL, "--query TEXT is required (lis run --help)");
    if (!run && (c->query || c->input_dir))
        return lis_fail(err, EINVAL,
                        "--%s is a flag of lis run: lis %s takes the problems "
                        "and their input files from the task's rows",
                        c->query ? "query" : "input-dir", cmd);
    if (c->image && c->rootfs)
        return lis_fail(err, EINVAL, "--image and --rootfs exclude each other");
    return 0;
}

static int exists(const char *p)
{
    FILE *f = fopen(p, "r");
    if (f)
        fclose(f);
    return f != NULL;
}

static const char *keep(agent_cli *c, const cJSON *v)
{
    if (!cJSON_IsString(v) || !*v->valuestring)
        return NULL;
    for (size_t i = 0; i < sizeof c->owned / sizeof c->owned[0]; i++)
        if (!c->owned[i])
            return c->owned[i] = agent_strdup(v->valuestring);
    return NULL;
}

/* original: cli.py's settings files, in its order (--settings,
 * $LLM_IN_SANDBOX_CONFIG, ./, ~/), and its four keys. */
int agent_cli_settings(agent_cli *c, lis_error *err)
{
    char cand[6][1024];
    size_t n = 0;
    const char *home = getenv("HOME");
    if (c->settings) {
        if (!exists(c->settings))
            return lis_fail(err, ENOENT, "settings file %s not found", c->settings);
        snprintf(cand[n++], sizeof cand[0], "%s", c->settings);
    }
    const char *envp = getenv("LLM_IN_SANDBOX_CONFIG");
    if (envp && *envp)
        snprintf(cand[n++], sizeof cand[0], "%s", envp);
    snprintf(cand[n++], sizeof cand[0], "llm-in-sandbox.yaml");
    snprintf(cand[n++], sizeof cand[0], "llm_in_sandbox.yaml");
    if (home) {
        snprintf(cand[n++], sizeof cand[0], "%s/.llm-in-sandbox/config.yaml", home);
        snprintf(cand[n++], sizeof cand[0], "%s/.llm-in-sandbox.yaml", home);
    }
    for (size_t i = 0; i < n; i++) {
        if (cand[i][0] == '~' && home) {
            char t[1024];
            snprintf(t, sizeof t, "%s%s", home, cand[i] + 1);
            snprintf(cand[i], sizeof cand[i], "%s", t);
        }
        if (!exists(cand[i]))
            continue;
        size_t len = 0;
        char *text = agent_read_host_file(cand[i], &len, err);
        if (!text)
            return -1;
        cJSON *s = agent_yaml_load(text, len, err);
        free(text);
        if (!s)
            return lis_fail(err, EINVAL, "settings file %s: %s", cand[i], err->msg);
        if (cJSON_IsObject(s)) {
            if (!c->llm_name || !*c->llm_name)
                c->llm_name = keep(c, cJSON_GetObjectItem(s, "llm_name"));
            if (!c->llm_base_url || !*c->llm_base_url)
                c->llm_base_url = keep(c, cJSON_GetObjectItem(s, "llm_base_url"));
            if (!c->api_key || !*c->api_key)
                c->api_key = keep(c, cJSON_GetObjectItem(s, "api_key"));
            if (!c->prompt_config || !*c->prompt_config)
                c->prompt_config = keep(c, cJSON_GetObjectItem(s, "prompt_config"));
        }
        cJSON_Delete(s);
        snprintf(c->settings_path, sizeof c->settings_path, "%s", cand[i]);
        break;
    }
    /* original: the benchmark's LLM_NAME, LLM_API_KEY, LLM_BASE_URL (runner.py) */
    if (!c->llm_name || !*c->llm_name)
        c->llm_name = getenv("LLM_NAME");
    if ((!c->api_key || !*c->api_key) && getenv("LLM_API_KEY") && *getenv("LLM_API_KEY"))
        c->api_key = getenv("LLM_API_KEY");
    if (!c->llm_name || !*c->llm_name)
        return lis_fail(err, EINVAL,
                        "no model given: pass --llm-name NAME (or set llm_name "
                        "in a settings file, see lis run --help)");
    int anthropic = !strncmp(c->llm_name, "anthropic/", 10);
    /* original: http://localhost:8000/v1 and the key "dummy" when unset; here
     * a one-line error, and no key for a local server (docs/agent.md fix 18) */
    if (!c->llm_base_url || !*c->llm_base_url) {
        const char *e = getenv("LLM_BASE_URL");
        if (!e || !*e)
            e = getenv("OPENAI_BASE_URL");
        if (e && *e)
            c->llm_base_url = e;
        else if (anthropic)
            c->llm_base_url = "https://api.anthropic.com";
        else
            return lis_fail(err, EINVAL,
                            "no LLM endpoint: pass --llm-base-url URL (e.g. "
                            "http://localhost:8000/v1) or set LLM_BASE_URL");
    }
    if (llm_check_base_url(c->llm_base_url, err) < 0) /* before the key: it decides "local" */
        return -1;
    if (!c->api_key || !*c->api_key) {
        const char *e = anthropic ? getenv("ANTHROPIC_API_KEY") : NULL;
        if (!e || !*e)
            e = getenv("OPENAI_API_KEY");
        if (e && *e)
            c->api_key = e;
        else if (agent_url_is_local(c->llm_base_url))
            c->api_key = NULL; /* vLLM and SGLang on this host run keyless by default */
        else
            return lis_fail(err, EINVAL,
                            "no API key for %s: pass --api-key KEY or set %s (a server on "
                            "this host, localhost or a unix socket, needs none)",
                            c->llm_base_url, anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
    }
    return 0;
}

int agent_url_is_local(const char *url)
{
    if (!url)
        return 0;
    if (!strncasecmp(url, "http+unix://", 12) || !strncasecmp(url, "unix:", 5))
        return 1;
    const char *h = strstr(url, "://");
    if (!h)
        return 0;
    h += 3;
    size_t n = strcspn(h, "/?#");
    const char *at = memchr(h, '@', n); /* user:password@ */
    if (at) {
        n -= (size_t)(at + 1 - h);
        h = at + 1;
    }
    char host[256];
    if (*h == '[') { /* [::1]:8000 */
        const char *e = memchr(h, ']', n);
        if (!e || (size_t)(e - h - 1) >= sizeof host)
            return 0;
        snprintf(host, sizeof host, "%.*s", (int)(e - h - 1), h + 1);
    } else {
        size_t hl = strcspn(h, ":/?#");
        if (hl > n || hl >= sizeof host)
            return 0;
        snprintf(host, sizeof host, "%.*s", (int)hl, h);
    }
    return !strcasecmp(host, "localhost") || !strcasecmp(host, "localhost.") ||
           !strncmp(host, "127.", 4) || !strcmp(host, "::1") ||
           !strcasecmp(host, "0:0:0:0:0:0:0:1");
}

void agent_cli_free(agent_cli *c)
{
    for (size_t i = 0; i < sizeof c->owned / sizeof c->owned[0]; i++)
        free(c->owned[i]);
    memset(c->owned, 0, sizeof c->owned);
}

/* original: --extra_body's strings "true"/"false" become booleans. */
static void fix_bools(cJSON *j)
{
    cJSON *it;
    cJSON_ArrayForEach(it, j)
    {
        if (cJSON_IsString(it) &&
            (!strcasecmp(it->valuestring, "true") || !strcasecmp(it->valuestring, "false"))) {
            cJSON *b = cJSON_CreateBool(!strcasecmp(it->valuestring, "true"));
            if (it->string)
                cJSON_ReplaceItemInObjectCaseSensitive(j, it->string, b);
            else
                cJSON_ReplaceItemViaPointer(j, it, b);
            it = b;
        } else if (cJSON_IsObject(it) || cJSON_IsArray(it)) {
            fix_bools(it);
        }
    }
}

int agent_cli_llm(const agent_cli *c, llm_config *cfg, cJSON **extra, lis_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    *extra = NULL;
    const char *name = c->llm_name;
    /* original: litellm's routing by the name's prefix (anthropic/, openai/,
     * hosted_vllm/; any other name is openai/) */
    cfg->api = LLM_API_OPENAI;
    if (!strncmp(name, "anthropic/", 10)) {
        cfg->api = LLM_API_ANTHROPIC;
        cfg->model = name + 10;
    } else if (!strncmp(name, "openai/", 7)) {
        cfg->model = name + 7;
    } else if (!strncmp(name, "hosted_vllm/", 12)) {
        cfg->model = name + 12;
    } else {
        cfg->model = name;
    }
    cfg->base_url = c->llm_base_url;
    cfg->api_key = c->api_key;
    cfg->temperature = c->temperature;
    /* original: no temperature for o3/o4 models; 5 attempts (lis's backoff) */
    cfg->send_temperature = !strstr(name, "o3") && !strstr(name, "o4");
    cfg->max_tokens = c->max_tokens_per_call;
    cfg->stream = c->stream;
    cfg->timeout = c->timeout;
    cfg->connect_timeout = c->connect_timeout;
    cfg->max_retries = 5;
    cfg->backoff_base = 1.0;
    cfg->backoff_max = 120.0;
    cfg->log = stderr;
    if (c->extra_body && *c->extra_body) {
        cJSON *j = cJSON_Parse(c->extra_body);
        if (!cJSON_IsObject(j)) {
            cJSON_Delete(j);
            return lis_fail(err, EINVAL, "--extra-body: not a JSON object: %s", c->extra_body);
        }
        fix_bools(j);
        *extra = j;
        cfg->extra_body = j;
    }
    return 0;
}

int agent_parse_size(const char *s, uint64_t *out)
{
    if (!strcasecmp(s, "unlimited")) {
        *out = LIS_UNLIMITED;
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v <= 0)
        return -1;
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 't':
    case 'T':
        mul = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    case 0: break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'B' || *end == 'b')
        end += *end == 'i' ? 1 : 0;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}

int agent_parse_net(const char *s, lis_net_mode *out)
{
    if (!s || !strcmp(s, "proxy"))
        *out = LIS_NET_PROXY; /* original: its sandboxes had the internet */
    else if (!strcmp(s, "none"))
        *out = LIS_NET_NONE;
    else if (!strcmp(s, "host"))
        *out = LIS_NET_HOST;
    else
        return -1;
    return 0;
}
