/* batch_settings.c - a `lis batch` run's settings: the flags it resolved to,
 * kept in run.json, and the argv that `lis batch --resume DIR` alone rebuilds
 * from them (cmd_batch.c parses it like any other). */
#include "batch_settings.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The resolved flags of a run (no secrets) are kept in run.json's
 * "settings", named as the flags are; a resume gets them back as flags put
 * before the ones given now, so a given flag wins. A flag that changes
 * results and differs from the run's is then refused by the comparison with
 * run.json (batch/results.c), naming the key; the others (--concurrency, the
 * --max-* bounds, timeouts, --quiet, --save-files, --llm-base-url) override. */

/* The flag name of argv[i] ("--max_steps=3" -> "max-steps"), its aliases folded. */
int batch_flag_name(const char *a, char *name, size_t len)
{
    if (strncmp(a, "--", 2))
        return -1;
    const char *eq = strchr(a, '=');
    size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
    if (n >= len)
        return -1;
    memcpy(name, a + 2, n);
    name[n] = 0;
    for (char *p = name; *p; p++)
        if (*p == '_')
            *p = '-';
    if (!strcmp(name, "num-workers"))
        snprintf(name, len, "concurrency");
    if (!strcmp(name, "docker-image"))
        snprintf(name, len, "image");
    return 0;
}

/* Flags that stand for one another: giving one drops the run's other. */
static const char *const GROUPS[][2] = {{"image", "rootfs"}, {"task", "tasks"}};

static int given(int argc, char **argv, const char *key)
{
    char name[64];
    for (int i = 1; i < argc; i++) {
        if (batch_flag_name(argv[i], name, sizeof name) < 0)
            continue;
        if (!strcmp(name, key))
            return 1;
        for (size_t g = 0; g < sizeof GROUPS / sizeof *GROUPS; g++)
            if ((!strcmp(key, GROUPS[g][0]) && !strcmp(name, GROUPS[g][1])) ||
                (!strcmp(key, GROUPS[g][1]) && !strcmp(name, GROUPS[g][0])))
                return 1;
    }
    return 0;
}

static const char *own(cli_list *owned, const char *s)
{
    char *d = strdup(s);
    if (d && cli_list_add(owned, d) < 0) {
        free(d);
        return NULL;
    }
    return d;
}

/* argv[0], the run's flags that argv does not give, then argv's own. */
int batch_resume_argv(const char *dir, int argc, char **argv, cli_list *out, cli_list *owned)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/run.json", dir);
    lis_error err = {0};
    size_t len = 0;
    char *text = agent_read_host_file(path, &len, &err);
    cJSON *run = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(run, "settings");
    int has_rows = given(argc, argv, "task");
    if (!cJSON_IsObject(set)) {
        cJSON_Delete(run);
        if (has_rows) /* the whole command given again, as before */
            return 0;
        cli_error("--resume %s: %s", dir,
                  !text && err.code == ENOENT
                      ? "no run.json there; give the directory of a lis batch run"
                  : !run ? "run.json is not valid JSON"
                         : "run.json holds no settings (it was written by an older lis): give "
                           "the command of the run again, with --resume DIR");
        return -1;
    }
    out->n = 0;
    cli_list_add(out, argv[0]);
    for (const cJSON *e = set->child; e; e = e->next) {
        if (given(argc, argv, e->string) || cJSON_IsNull(e) || cJSON_IsFalse(e))
            continue;
        char flag[96], num[64];
        snprintf(flag, sizeof flag, "--%s", e->string);
        const char *f = own(owned, flag), *v = NULL;
        if (cJSON_IsArray(e)) { /* a repeated flag: once per value */
            for (const cJSON *x = e->child; x; x = x->next)
                if (cJSON_IsString(x) && (!f || cli_list_add(out, f) < 0 ||
                                          cli_list_add(out, own(owned, x->valuestring)) < 0)) {
                    cJSON_Delete(run);
                    cli_error("out of memory");
                    return -1;
                }
            continue;
        }
        if (cJSON_IsString(e)) {
            v = own(owned, e->valuestring);
        } else if (cJSON_IsNumber(e)) {
            snprintf(num, sizeof num, "%.17g", e->valuedouble);
            v = own(owned, num);
        } else if (!cJSON_IsTrue(e)) {
            continue; /* not a flag's value: left out */
        }
        if (!f || (!cJSON_IsTrue(e) && !v) || cli_list_add(out, f) < 0 ||
            (v && cli_list_add(out, v) < 0)) {
            cJSON_Delete(run);
            cli_error("out of memory");
            return -1;
        }
    }
    for (int i = 1; i < argc; i++)
        cli_list_add(out, argv[i]);
    cJSON_Delete(run);
    return 1;
}

/* A path as it will still mean the same from another directory. */
static void add_path(cJSON *s, const char *key, const char *p)
{
    if (!p)
        return;
    char abs[PATH_MAX];
    cJSON_AddStringToObject(s, key, realpath(p, abs) ? abs : p);
}

/* An endpoint without the user:password@ a URL may carry: run.json holds
 * no secret. */
static void add_url(cJSON *s, const char *key, const char *url)
{
    if (!url)
        return;
    const char *host = strstr(url, "://");
    host = host ? host + 3 : url;
    const char *end = host + strcspn(host, "/?#"), *at = memchr(host, '@', (size_t)(end - host));
    if (!at) {
        cJSON_AddStringToObject(s, key, url);
        return;
    }
    char buf[4096];
    snprintf(buf, sizeof buf, "%.*s%s", (int)(host - url), url, at + 1);
    cJSON_AddStringToObject(s, key, buf);
}

/* The flags this run resolved to (settings file and environment included),
 * named as flags: what `--resume DIR` alone runs with. No API key. */
cJSON *batch_run_settings(const bflags *b, const agent_cli *c, const lis_batch_opts *o,
                          const char *shard)
{
    cJSON *s = cJSON_CreateObject();
    if (!s)
        return NULL;
    add_path(s, "task", b->task);
    add_path(s, "tasks", b->tasks);
    add_path(s, "prompt-config", o->prompt_config);
    if (o->start_set)
        cJSON_AddNumberToObject(s, "start-id", (double)o->start_id);
    if (o->end_set)
        cJSON_AddNumberToObject(s, "end-id", (double)o->end_id);
    cJSON_AddNumberToObject(s, "repeat", o->repeat);
    cJSON_AddBoolToObject(s, "fork-from-setup", o->fork_from_setup);
    if (shard)
        cJSON_AddStringToObject(s, "shard", shard);
    cJSON_AddStringToObject(s, "mode", o->mode_llm ? "llm" : "llm-in-sandbox");
    if (o->mode_llm)
        cJSON_AddNumberToObject(s, "max-response-len", (double)o->max_response_len);
    cJSON_AddStringToObject(s, "llm-name", c->llm_name);
    add_url(s, "llm-base-url", c->llm_base_url);
    cJSON_AddNumberToObject(s, "temperature", o->llm.temperature);
    cJSON_AddNumberToObject(s, "max-steps", c->max_steps);
    cJSON_AddNumberToObject(s, "max-token-limit", (double)c->max_token_limit);
    cJSON_AddNumberToObject(s, "max-tokens-per-call", (double)c->max_tokens_per_call);
    if (c->extra_body)
        cJSON_AddStringToObject(s, "extra-body", c->extra_body);
    if (c->image)
        cJSON_AddStringToObject(s, "image", c->image);
    add_path(s, "rootfs", c->rootfs);
    add_path(s, "settings", c->settings_path[0] ? c->settings_path : NULL);
    if (c->memory)
        cJSON_AddStringToObject(s, "memory", c->memory);
    if (c->disk)
        cJSON_AddStringToObject(s, "disk", c->disk);
    if (c->export_max)
        cJSON_AddStringToObject(s, "export-max", c->export_max);
    cJSON_AddStringToObject(s, "net", c->net ? c->net : "proxy");
    cJSON_AddBoolToObject(s, "stream", c->stream);
    cJSON_AddNumberToObject(s, "timeout", c->timeout);
    cJSON_AddNumberToObject(s, "connect-timeout", c->connect_timeout);
    if (b->scorer)
        cJSON_AddStringToObject(s, "scorer", b->scorer);
    if (b->judge_model) {
        cJSON_AddStringToObject(s, "judge-model", b->judge_model);
        add_url(s, "judge-base-url", o->judge ? o->judge->base_url : NULL);
    }
    cJSON_AddNumberToObject(s, "concurrency", o->concurrency);
    if (o->max_creating) /* 0: following the machine, the flag not given */
        cJSON_AddNumberToObject(s, "max-creating", o->max_creating);
    cJSON_AddNumberToObject(s, "max-commands", o->max_commands);
    cJSON_AddNumberToObject(s, "max-llm", o->max_llm);
    if (b->warm_set)
        cJSON_AddNumberToObject(s, "warm", o->warm);
    cJSON_AddNumberToObject(s, "episode-timeout", o->episode_timeout);
    if (o->drain_timeout > 0)
        cJSON_AddNumberToObject(s, "drain-timeout", o->drain_timeout);
    cJSON_AddNumberToObject(s, "cmd-timeout", o->cmd_timeout);
    cJSON_AddBoolToObject(s, "save-files", o->save_files);
    cJSON_AddBoolToObject(s, "overcommit", o->overcommit);
    /* effects and rules */
    /* the resolved state: a resume gets --effects back, or nothing (off) */
    cJSON_AddBoolToObject(s, "effects", !c->no_effects);
    add_path(s, "policy", c->policy);
    cJSON *allow = cJSON_AddArrayToObject(s, "allow-domain");
    for (size_t i = 0; allow && i < c->nallow; i++)
        cJSON_AddItemToArray(allow, cJSON_CreateString(c->allow_domains[i]));
    cJSON *deny = cJSON_AddArrayToObject(s, "deny-domain");
    for (size_t i = 0; deny && i < c->ndeny; i++)
        cJSON_AddItemToArray(deny, cJSON_CreateString(c->deny_domains[i]));
    cJSON_AddBoolToObject(s, "allow-host-network", c->allow_host_network);
    /* not --quiet: it is about the terminal of the command, not the run */
    return s;
}
