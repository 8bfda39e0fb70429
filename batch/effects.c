/* effects.c - the effects side of lis batch's episodes (docs/monitoring.md):
 * each one's monitor fd in the loop's set, the hold of a paused episode, what
 * the live view shows of it (its last step, command and effects in short, the
 * run's latest alerts), and the effects fields of its results row. */
#include "engine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#define ROW_ALERTS 64 /* alerts listed in a results row (all are counted) */

static size_t count(const char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

void bfx_watch(bep *e)
{
    brun *r = e->run;
    if (!e->env.mon || !e->ep)
        return;
    agent_ep_set_monitor(e->ep, e->env.mon);
    /* edge-triggered: one event per firing, none while the episode ends */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u64 = TAG(K_MON, e->index)};
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, lis_monitor_fd(e->env.mon), &ev) < 0 && e->log)
        fprintf(e->log,
                "lis: warning: cannot watch the monitor (epoll_ctl: %s): pause and stop rules "
                "act at the end of each step only\n",
                strerror(errno));
}

int bfx_held(bep *e)
{
    if (e->env.mon && e->ep && !e->paused) {
        /* a pause that fired at the end of the step just recorded: before
         * anything new starts (its fd event may come later in this round) */
        char rule[64];
        if (agent_ep_monitor_event(e->ep, rule, sizeof rule) == LIS_ACT_PAUSE) {
            e->paused = 1;
            e->run->pause_changes++;
            e->paused_at = lis_now();
            snprintf(e->pause_why, sizeof e->pause_why, "policy rule %s", rule);
        }
    }
    if (e->run->paused_all && !e->paused && !e->stopped) { /* lis batch ctl pause: all */
        e->paused = 1;
        e->run->pause_changes++;
        e->paused_at = lis_now();
        snprintf(e->pause_why, sizeof e->pause_why, "lis batch ctl pause");
    } /* (the sandbox is frozen by the sweep: ctl.c, bctl_tick) */
    if (e->paused)
        e->held = 1;
    return e->paused;
}

/* A step's effects in short for the live view: capability, counts, the
 * first programs and files, the alerts. */
static cJSON *brief(const cJSON *fx)
{
    cJSON *b = cJSON_CreateObject();
    if (!b)
        return NULL;
    cJSON_AddItemToObject(b, "capability",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(fx, "capability"), 1));
    cJSON_AddItemToObject(b, "resources",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(fx, "resources"), 1));
    cJSON_AddItemToObject(b, "alerts",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(fx, "alerts"), 1));
    cJSON *procs = cJSON_AddArrayToObject(b, "processes");
    const cJSON *p;
    int n = 0;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(fx, "processes"))
    {
        if (n++ >= 8)
            break;
        cJSON *q = cJSON_CreateObject();
        cJSON_AddItemToObject(q, "argv",
                              cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(p, "argv"), 1));
        cJSON_AddItemToObject(q, "state",
                              cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(p, "state"), 1));
        cJSON_AddItemToArray(procs, q);
    }
    cJSON *files = cJSON_AddArrayToObject(b, "files");
    n = 0;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(fx, "files"))
    {
        if (n++ >= 8)
            break;
        cJSON *q = cJSON_CreateObject();
        cJSON_AddItemToObject(q, "change",
                              cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(p, "change"), 1));
        cJSON_AddItemToObject(q, "path",
                              cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(p, "path"), 1));
        cJSON_AddItemToArray(files, q);
    }
    cJSON_AddNumberToObject(b, "nprocesses",
                            cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fx, "processes")));
    cJSON_AddNumberToObject(b, "nfiles",
                            cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fx, "files")));
    const cJSON *net = cJSON_GetObjectItemCaseSensitive(fx, "network");
    cJSON_AddNumberToObject(b, "nrequests",
                            cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(net, "requests")));
    return b;
}

static int cap_on(const cJSON *cap, const char *k)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cap, k));
}

void bfx_on_step(void *arg, const cJSON *step)
{
    bep *e = arg;
    bfx_live *l = &e->live;
    l->step++;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(step, "action");
    const char *fn = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(act, "function"));
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(act, "parameters");
    lis_utf8_copy(l->tool, sizeof l->tool, fn);
    char cmd[4096];
    agent_watch_call(fn ? fn : "", params, cmd, sizeof cmd);
    lis_utf8_copy(l->cmd, sizeof l->cmd, cmd);
    const cJSON *fx = cJSON_GetObjectItemCaseSensitive(step, "effects");
    cJSON_Delete(l->fx);
    l->fx = cJSON_IsObject(fx) ? brief(fx) : NULL;
    const cJSON *cap = cJSON_GetObjectItemCaseSensitive(fx, "capability");
    l->caps[0] += cap_on(cap, "external");
    l->caps[1] += cap_on(cap, "file");
    l->caps[2] += cap_on(cap, "computation");
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(fx, "alerts"))
    {
        l->alerts++;
        bfx_alert_push(e, l->step,
                       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "rule")),
                       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "action")),
                       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "what")));
    }
}

void bfx_alert_push(bep *e, int step, const char *rule, const char *action, const char *what)
{
    brun *r = e->run;
    if (!r->alerts && !(r->alerts = calloc(BFX_ALERTS, sizeof *r->alerts)))
        return;
    bfx_alert *x = &r->alerts[r->nalerts++ % BFX_ALERTS];
    if (e->attempt)
        snprintf(x->key, sizeof x->key, "%.100s@%d", e->row->id, e->attempt);
    else
        snprintf(x->key, sizeof x->key, "%.100s", e->row->id);
    x->step = step;
    lis_utf8_copy(x->rule, sizeof x->rule, rule);
    lis_utf8_copy(x->action, sizeof x->action, action);
    lis_utf8_copy(x->what, sizeof x->what, what);
    x->t = lis_wallclock();
}

void bfx_release(bep *e)
{
    cJSON_Delete(e->live.fx);
    e->live.fx = NULL;
}

void bfx_between(bep *e)
{
    if (!e->between_rule[0] || !e->traj)
        return;
    cJSON *md = cJSON_GetObjectItemCaseSensitive(e->traj, "metadata");
    if (!cJSON_IsObject(md))
        return;
    if (!cJSON_GetObjectItemCaseSensitive(md, "stop_rule"))
        cJSON_AddStringToObject(md, "stop_rule", e->between_rule);
    cJSON *b = cJSON_AddObjectToObject(md, "between_steps");
    cJSON_AddStringToObject(b, "stop_rule", e->between_rule);
    cJSON_AddNumberToObject(b, "charged_to_step", e->between_step);
    lis_error err = {0};
    lis_effects *fx = NULL;
    lis_monitor_call call = {.tool = "between steps", .command = ""};
    /* what the monitor kept since the last step ended, closed as a step */
    if (!e->env.mon || lis_monitor_step_begin(e->env.mon, &call, &err) < 0 ||
        lis_monitor_step_end(e->env.mon, NULL, &fx, &err) < 0) {
        cJSON_AddStringToObject(b, "effects_error", e->env.mon ? err.msg : "no monitor");
        return;
    }
    cJSON *j = lis_effects_json(fx);
    lis_effects_free(fx);
    if (j)
        cJSON_AddItemToObject(b, "effects", j);
}

/* The between-steps alerts into the row's list, the stop rule's among them
 * (the monitor listed it, or it is said here); their number. */
static int between_alerts(const cJSON *md, cJSON *list, int *alerts)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(md, "between_steps");
    if (!cJSON_IsObject(b))
        return 0;
    const char *rule = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "stop_rule"));
    double step = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(b, "charged_to_step"));
    const cJSON *fx = cJSON_GetObjectItemCaseSensitive(b, "effects"), *a;
    int seen = 0;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(fx, "alerts"))
    {
        const char *ar = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "rule"));
        seen |= rule && ar && !strcmp(ar, rule);
        if ((*alerts)++ >= ROW_ALERTS)
            continue;
        cJSON *c = cJSON_Duplicate(a, 1);
        cJSON_AddNumberToObject(c, "step", step == step ? step : 0);
        cJSON_AddBoolToObject(c, "between_steps", 1);
        cJSON_AddItemToArray(list, c);
    }
    if (!seen && rule && (*alerts)++ < ROW_ALERTS) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "rule", rule);
        cJSON_AddStringToObject(c, "action", "stop");
        cJSON_AddStringToObject(c, "what", "fired between steps (no effect listed by the monitor)");
        cJSON_AddNumberToObject(c, "step", step == step ? step : 0);
        cJSON_AddBoolToObject(c, "between_steps", 1);
        cJSON_AddItemToArray(list, c);
    }
    return 1;
}

void bfx_row(cJSON *row, const cJSON *task_row, const cJSON *traj)
{
    const cJSON *dom = cJSON_GetObjectItemCaseSensitive(task_row, "domain");
    if (cJSON_IsString(dom))
        cJSON_AddStringToObject(row, "domain", dom->valuestring);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(traj, "metadata");
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(md, "effects")))
        return; /* --no-effects, --mode llm, or no sandbox */
    int steps = 0, caps[3] = {0}, alerts = 0;
    cJSON *list = cJSON_CreateArray();
    const cJSON *st;
    cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(traj, "steps"))
    {
        const cJSON *fx = cJSON_GetObjectItemCaseSensitive(st, "effects");
        if (!cJSON_IsObject(fx))
            continue;
        steps++;
        const cJSON *cap = cJSON_GetObjectItemCaseSensitive(fx, "capability");
        caps[0] += cap_on(cap, "external");
        caps[1] += cap_on(cap, "file");
        caps[2] += cap_on(cap, "computation");
        const cJSON *a, *sn = cJSON_GetObjectItemCaseSensitive(fx, "step");
        cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(fx, "alerts"))
        {
            if (alerts++ >= ROW_ALERTS)
                continue;
            cJSON *c = cJSON_Duplicate(a, 1);
            if (c && cJSON_IsNumber(sn))
                cJSON_AddNumberToObject(c, "step", sn->valuedouble);
            cJSON_AddItemToArray(list, c);
        }
        /* what the monitor counted but did not list */
        double more = cJSON_GetNumberValue(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fx, "cut"),
                                             "alerts_not_listed"));
        if (more == more && more > 0)
            alerts += (int)more;
    }
    between_alerts(md, list, &alerts);
    cJSON *c = cJSON_AddObjectToObject(row, "capability");
    cJSON_AddNumberToObject(c, "steps", steps);
    cJSON_AddNumberToObject(c, "external", caps[0]);
    cJSON_AddNumberToObject(c, "file", caps[1]);
    cJSON_AddNumberToObject(c, "computation", caps[2]);
    cJSON_AddNumberToObject(row, "alerts", alerts);
    cJSON_AddItemToObject(row, "alert_list", list);
    if (alerts > ROW_ALERTS)
        cJSON_AddNumberToObject(row, "alerts_not_listed", alerts - ROW_ALERTS);
    const char *rule = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "stop_rule"));
    if (rule)
        cJSON_AddStringToObject(row, "stop_rule", rule);
}

void bfx_config(cJSON *c, const lis_batch_opts *o)
{
    const agent_watch *w = o->watch;
    if (!w || o->mode_llm)
        return;
    if (w->policy_path) { /* stop and deny rules change results: --resume compares them */
        char h[24];
        snprintf(h, sizeof h, "%016llx", (unsigned long long)w->policy_hash);
        cJSON *p = cJSON_AddObjectToObject(c, "policy");
        cJSON_AddStringToObject(p, "file", w->policy_path);
        cJSON_AddStringToObject(p, "fnv1a64", h);
    }
    if (w->net.allow_domains)
        cJSON_AddItemToObject(c, "allow_domains",
                              cJSON_CreateStringArray(w->net.allow_domains,
                                                      (int)count(w->net.allow_domains)));
    if (w->net.deny_domains)
        cJSON_AddItemToObject(c, "deny_domains",
                              cJSON_CreateStringArray(w->net.deny_domains,
                                                      (int)count(w->net.deny_domains)));
    if (w->net.allow_host_network)
        cJSON_AddBoolToObject(c, "allow_host_network", 1);
}
