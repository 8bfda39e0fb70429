/* watch.c - the monitored sandbox of an episode (docs/monitoring.md): the
 * flags --effects, --no-effects, --policy, --allow-domain, --deny-domain and
 * --allow-host-network made into an agent_watch (the process's one monitor
 * hub, the policy, the proxy's rules), a sandbox created with its monitor
 * attached right away, lis's own set-up closed as step 0, and what a tool
 * call is to the monitor. Shared by `lis run` and `lis batch`. */
#include "agent_internal.h"
#include "lis_net.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int agent_watch_init(agent_watch *w, const agent_cli *c, lis_net_mode net, lis_error *err)
{
    memset(w, 0, sizeof *w);
    if ((c->nallow || c->ndeny || c->allow_host_network) && net != LIS_NET_PROXY)
        return lis_fail(err, EINVAL,
                        "--allow-domain, --deny-domain and --allow-host-network are rules of "
                        "the egress proxy: they need --net proxy");
    if (c->effects && c->no_effects)
        return lis_fail(err, EINVAL, "--effects and --no-effects contradict each other: give one");
    if (c->policy && c->no_effects)
        return lis_fail(err, EINVAL,
                        "--policy matches each step's effects: it cannot go with --no-effects");
    if (c->policy && !(w->policy = lis_policy_load(c->policy, err)))
        return -1;
    if (c->policy) {
        size_t len = 0;
        char *text = agent_read_host_file(c->policy, &len, err);
        if (!text) {
            agent_watch_release(w);
            return -1;
        }
        w->policy_hash = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < len; i++)
            w->policy_hash = (w->policy_hash ^ (unsigned char)text[i]) * 0x100000001b3ull;
        free(text);
        w->policy_path = c->policy;
    }
    const char *const *pd = lis_policy_deny_domains(w->policy);
    size_t npd = 0;
    while (pd[npd])
        npd++;
    if (npd && net == LIS_NET_HOST) {
        lis_policy_free(w->policy);
        w->policy = NULL;
        return lis_fail(err, EINVAL,
                        "--policy %s: its connect rules with action deny cannot hold with --net "
                        "host (lis sees no connection there): use --net proxy or none",
                        c->policy);
    }
    w->allow = calloc(c->nallow + 1, sizeof *w->allow);
    w->deny = calloc(c->ndeny + npd + 1, sizeof *w->deny);
    if (!w->allow || !w->deny) {
        agent_watch_release(w);
        return lis_oom(err);
    }
    memcpy(w->allow, c->allow_domains, c->nallow * sizeof *w->allow);
    memcpy(w->deny, c->deny_domains, c->ndeny * sizeof *w->deny);
    memcpy(w->deny + c->ndeny, pd, npd * sizeof *w->deny);
    w->net = (lis_net_rules){.allow_domains = c->nallow ? w->allow : NULL,
                             .deny_domains = c->ndeny + npd ? w->deny : NULL,
                             .allow_host_network = c->allow_host_network};
    w->have_rules = c->nallow || c->ndeny || npd || c->allow_host_network;
    /* On by default: their cost is in the noise (issue 23's goals, measured in
     * docs/benchmarks.md); --no-effects turns them off (not with a policy,
     * whose rules match them). */
    int effects = !c->no_effects;
    if (effects && !(w->hub = lis_monitor_hub_new(err))) {
        agent_watch_release(w);
        return lis_wrap(err, "starting the monitor (--no-effects runs without it)");
    }
    return 0;
}

void agent_watch_release(agent_watch *w)
{
    lis_monitor_hub_free(w->hub);
    lis_policy_free(w->policy);
    free(w->allow);
    free(w->deny);
    memset(w, 0, sizeof *w);
}

int agent_sandbox_create(lis_ctx *ctx, const lis_sandbox_spec *spec, const agent_watch *w,
                         lis_sandbox **sb, lis_monitor **mon, lis_error *err)
{
    *mon = NULL;
    lis_sandbox_spec s = *spec;
    const lis_net_rules *rules = w && s.net == LIS_NET_PROXY && w->have_rules ? &w->net : NULL;
    if (w && w->hub)
        s.monitor = lis_monitor_spec_flags(s.net);
    /* the exec and write allow-lists the kernel enforces where it can (the
     * monitor checks them anyway: docs/monitoring.md) */
    if (w && lis_policy_exec_allow(w->policy) && lis_landlock_abi())
        s.exec_allow = lis_policy_exec_allow(w->policy);
    if (w && lis_policy_write_allow(w->policy) && lis_landlock_abi())
        s.write_allow = lis_policy_write_allow(w->policy);
    if (lis_net_sandbox_create(ctx, &s, rules, sb, err) < 0)
        return -1;
    if (!w || !w->hub)
        return 0;
    /* the episode writes into its sandbox only inside steps (the editor's
     * step included): a step's begin skips the layer scan when nothing ran */
    lis_monitor_opts mo = {.policy = w->policy, .writes_in_steps = 1};
    if (lis_monitor_attach(w->hub, *sb, &mo, mon, err) < 0) {
        lis_error ign;
        lis_sandbox_destroy(*sb, &ign);
        *sb = NULL;
        return -1;
    }
    return 0;
}

void agent_watch_setup_done(lis_monitor *mon)
{
    if (!mon)
        return;
    lis_error ign;
    lis_monitor_call call = {"setup", ""};
    lis_effects *fx = NULL;
    if (lis_monitor_step_begin(mon, &call, &ign) == 0 &&
        lis_monitor_step_end(mon, NULL, &fx, &ign) == 0)
        lis_effects_free(fx);
}

void agent_watch_call(const char *name, const cJSON *params, char *buf, size_t len)
{
    char *printed = NULL;
    const char *cmd = agent_bash_command(name, params, &printed);
    if (cmd) {
        snprintf(buf, len, "%s", cmd);
    } else {
        /* the editor: its sub-command and path ("view /testbed/a.py") */
        const char *sub = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "command"));
        const char *path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "path"));
        snprintf(buf, len, "%s%s%s", sub ? sub : "", sub && path ? " " : "", path ? path : "");
    }
    free(printed);
}
