/* monitorlib.c - what the monitor suites share (monitorlib.h). */
#include "monitorlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *probe(void) { return t_build_file("tests/monitor_probe"); }

lis_sandbox *msb_rules(lis_ctx *ctx, lis_net_mode net, const lis_net_rules *rules,
                       lis_limits limits)
{
    lis_bind b = {.host_path = probe(), .path = "/mprobe", .read_only = 1};
    lis_sandbox_spec spec = {.rootfs = t_busybox(),
                             .upper = LIS_UPPER_TMPFS,
                             .binds = &b,
                             .nbinds = 1,
                             .net = net,
                             .limits = limits,
                             .monitor = lis_monitor_spec_flags(net)};
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    cr_assert_eq(lis_net_sandbox_create(ctx, &spec, net == LIS_NET_PROXY ? rules : NULL, &sb, &err),
                 0, "create: %s", err.msg);
    return sb;
}

lis_sandbox *msb_limits(lis_ctx *ctx, const lis_policy *pol, lis_net_mode net, lis_limits limits)
{
    lis_net_rules rules = {.deny_domains = lis_policy_deny_domains(pol)};
    return msb_rules(ctx, net, &rules, limits);
}

lis_sandbox *msb(lis_ctx *ctx, const lis_policy *pol, lis_net_mode net)
{
    return msb_limits(ctx, pol, net, (lis_limits){0});
}

lis_monitor *mon(lis_monitor_hub *hub, lis_sandbox *sb, const lis_policy *pol)
{
    lis_monitor *m = NULL;
    lis_error err = {0};
    lis_monitor_opts o = {.policy = pol};
    cr_assert_eq(lis_monitor_attach(hub, sb, &o, &m, &err), 0, "attach: %s", err.msg);
    return m;
}

mfix mfix_open(void)
{
    mfix f = {.ctx = t_ctx()};
    lis_error err = {0};
    f.hub = lis_monitor_hub_new(&err);
    cr_assert(f.hub, "%s", err.msg);
    f.sb = msb(f.ctx, NULL, LIS_NET_NONE);
    f.m = mon(f.hub, f.sb, NULL);
    return f;
}

void mfix_close(mfix *f)
{
    lis_error err = {0};
    lis_sandbox_destroy(f->sb, &err);
    lis_monitor_free(f->m);
    lis_monitor_hub_free(f->hub);
    lis_ctx_free(f->ctx);
}

/* One step: sh -c cmd between begin and end; its effects as JSON. */
cJSON *step(lis_monitor *m, lis_sandbox *sb, const char *cmd, lis_result *out)
{
    lis_error err = {0};
    lis_monitor_call call = {"execute_bash", cmd};
    cr_assert_eq(lis_monitor_step_begin(m, &call, &err), 0, "begin: %s", err.msg);
    lis_result r;
    t_sh(sb, cmd, &r);
    lis_effects *fx = NULL;
    cr_assert_eq(lis_monitor_step_end(m, &r, &fx, &err), 0, "end: %s", err.msg);
    cJSON *j = lis_effects_json(fx);
    cr_assert(j);
    lis_effects_free(fx);
    if (out)
        *out = r;
    else
        lis_result_free(&r);
    return j;
}

const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

double num(const cJSON *o, const char *k, double dflt)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* The file change of path in fx, NULL when none. */
const cJSON *file_at(const cJSON *fx, const char *path)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(fx, "files")) if (!strcmp(str(f, "path"),
                                                                        path)) return f;
    return NULL;
}

void expect_file(const cJSON *fx, const char *path, const char *change)
{
    const cJSON *f = file_at(fx, path);
    char *txt = cJSON_Print(cJSON_GetObjectItem(fx, "files"));
    cr_assert(f, "no change of %s in %s", path, txt);
    cr_assert_str_eq(str(f, "change"), change, "%s: %s", path, txt);
    free(txt);
}

/* The process whose argv joined by spaces is argv (several: the n-th). */
const cJSON *proc_argv(const cJSON *fx, const char *argv)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(fx, "processes"))
    {
        char joined[1024] = "";
        const cJSON *a;
        cJSON_ArrayForEach(a, cJSON_GetObjectItem(p, "argv"))
        {
            if (joined[0])
                strcat(joined, " ");
            strncat(joined, a->valuestring, sizeof joined - strlen(joined) - 2);
        }
        if (!strcmp(joined, argv))
            return p;
    }
    return NULL;
}

const cJSON *expect_proc(const cJSON *fx, const char *argv, const char *state)
{
    const cJSON *p = proc_argv(fx, argv);
    char *txt = cJSON_Print(cJSON_GetObjectItem(fx, "processes"));
    cr_assert(p, "no process '%s' in %s", argv, txt);
    cr_assert_str_eq(str(p, "state"), state, "'%s': %s", argv, txt);
    free(txt);
    return p;
}

size_t count(const cJSON *fx, const char *key)
{
    return (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(fx, key));
}

/* A monitored sandbox under a policy given as YAML (f->pol owned). */
mfix mfix_policy(const char *yaml, lis_policy **pol)
{
    lis_error err = {0};
    *pol = lis_policy_parse(yaml, strlen(yaml), "p.yaml", &err);
    cr_assert(*pol, "%s", err.msg);
    mfix f = {.ctx = t_ctx()};
    f.hub = lis_monitor_hub_new(&err);
    cr_assert(f.hub, "%s", err.msg);
    f.sb = msb(f.ctx, *pol, LIS_NET_NONE);
    f.m = mon(f.hub, f.sb, *pol);
    return f;
}

size_t count_denied(const cJSON *fx, const char *rule)
{
    size_t n = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(fx, "processes"))
    {
        const char *d = str(p, "denied_by");
        n += d && !strcmp(d, rule);
    }
    return n;
}
