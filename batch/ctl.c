/* ctl.c - acting on a running lis batch (docs/monitoring.md): the live
 * actions of the episodes' monitors (a stop rule ends the episode, a pause
 * rule freezes its sandbox), and the commands of `lis batch ctl` (status,
 * pause, resume, stop; live.c carries them over the run's control socket).
 * A paused episode starts nothing new (effects.c: bfx_held) and its sandbox
 * is frozen by a job on the misc pool (lis_sandbox_pause may scan /proc for
 * a while), thawed the same way; its --episode-timeout does not run while it
 * is paused. Everything here runs on the loop's thread. */
#include "engine.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { FREEZE_NONE = 0, FREEZE_ON, FREEZE_OFF }; /* bep.pausing: the job in flight */

static void freeze_job(void *arg)
{
    bep *e = arg;
    lis_error err = {0};
    int rc =
        e->pausing == FREEZE_ON ? lis_sandbox_pause(e->sb, &err) : lis_sandbox_resume(e->sb, &err);
    if (rc < 0 && e->log) /* the log is the episode's: only this job writes it now */
        fprintf(e->log, "lis: warning: %s the sandbox: %s\n",
                e->pausing == FREEZE_ON ? "pausing" : "resuming", err.msg);
    if (rc < 0 && e->pausing == FREEZE_ON) /* freeze_done ends the episode: pause_failed */
        snprintf(e->freeze_err, sizeof e->freeze_err, "%s", err.msg);
}

static void freeze_start(bep *e, int what);

static void unheld(bep *e)
{
    if (e->paused_at > 0 && e->deadline > 0) /* the pause does not count */
        e->deadline += lis_now() - e->paused_at;
    e->paused_at = 0;
    if (e->held) {
        e->held = 0;
        bsched_drive(e);
    }
}

static void freeze_done(void *arg, int status)
{
    bep *e = arg;
    int was = e->pausing;
    e->pausing = FREEZE_NONE;
    if (was == FREEZE_ON && e->freeze_err[0]) /* never goes on as if paused (issue 29) */
        bsched_stop(e, AGENT_STOP_PAUSE_FAILED, e->freeze_err);
    if (e->stopped) {
        bsched_try_finish(e);
        return;
    }
    if (e->paused && was == FREEZE_OFF)
        freeze_start(e, FREEZE_ON); /* paused again meanwhile */
    else if (!e->paused && was == FREEZE_ON)
        freeze_start(e, FREEZE_OFF); /* resumed meanwhile */
    else if (!e->paused)
        unheld(e);
}

static void freeze_start(bep *e, int what)
{
    lis_error err = {0};
    if (e->pausing || !e->sb || e->phase != EP_LIVE)
        return;
    e->pausing = what;
    if (!lis_jobs_submit(e->run->misc, freeze_job, freeze_done, e, &err)) {
        e->pausing = FREEZE_NONE;
        if (e->log)
            fprintf(e->log, "lis: warning: cannot %s the sandbox: %s\n",
                    what == FREEZE_ON ? "pause" : "resume", err.msg);
        if (what == FREEZE_OFF)
            unheld(e);
    }
}

void bctl_pause(bep *e, const char *why)
{
    if (e->phase != EP_LIVE || e->stopped)
        return;
    e->frozen_asked = 1;
    if (!e->paused) {
        e->paused = 1;
        e->run->pause_changes++;
        e->paused_at = lis_now();
        snprintf(e->pause_why, sizeof e->pause_why, "%s", why);
        if (e->log)
            fprintf(e->log, "lis: paused: %s\n", why);
    }
    freeze_start(e, FREEZE_ON);
}

void bctl_resume(bep *e)
{
    if (e->phase != EP_LIVE || !e->paused)
        return;
    e->paused = 0;
    e->run->pause_changes++;
    e->frozen_asked = 0;
    e->pause_why[0] = 0;
    if (e->log)
        fprintf(e->log, "lis: resumed\n");
    if (e->pausing)
        return; /* freeze_done thaws it */
    if (e->sb)
        freeze_start(e, FREEZE_OFF);
    else
        unheld(e);
}

void bctl_monitor_event(brun *r, bep *e)
{
    if (e->phase != EP_LIVE || !e->ep || e->stopped)
        return;
    char rule[64], why[96];
    lis_policy_action a = agent_ep_monitor_event(e->ep, rule, sizeof rule);
    int between = !e->proc && !e->in_job;        /* no step runs: charged to the last one */
    if (a == LIS_ACT_STOP || a == LIS_ACT_PAUSE) /* as it fires; the step lists it at its end */
        bfx_alert_push(e, between ? e->live.step : e->live.step + 1, rule,
                       lis_policy_action_name(a),
                       between ? "fired between steps" : "fired while the step runs");
    switch (a) {
    case LIS_ACT_STOP:
        if (e->proc) { /* the step ends, is recorded, then the engine stops */
            lis_error ign;
            lis_proc_signal(e->proc, SIGKILL, &ign);
            e->kill_at = lis_now() + 5;
        } else if (!e->in_job) { /* between steps: a process left running fired it */
            char msg[160];
            snprintf(msg, sizeof msg, "policy rule %s: fired between steps (after step %d)", rule,
                     e->live.step);
            snprintf(e->between_rule, sizeof e->between_rule, "%s", rule);
            e->between_step = e->live.step;
            bsched_stop(e, AGENT_STOP_POLICY, msg);
        } /* else the tool's job ends and the engine stops after it */
        break;
    case LIS_ACT_PAUSE:
        snprintf(why, sizeof why, "policy rule %s", rule);
        bctl_pause(e, why);
        break;
    case LIS_ACT_NONE:
    case LIS_ACT_FLAG:
    case LIS_ACT_DENY: break;
    }
    (void)r;
}

void bctl_tick(brun *r)
{
    /* pauses that fired at a step's end (bfx_held) wait here for their freeze */
    for (size_t i = 0; i < r->next; i++) {
        bep *e = &r->eps[i];
        if (e->phase == EP_LIVE && e->paused && !e->pausing && e->sb && !e->frozen_asked)
            bctl_pause(e, e->pause_why);
        if (r->paused_all && e->phase == EP_LIVE && !e->paused && !e->stopped)
            bctl_pause(e, "lis batch ctl pause");
    }
}

/* ---- lis batch ctl ------------------------------------------------------ */

static void key_of(const bep *e, char *out, size_t len)
{
    if (e->attempt)
        snprintf(out, len, "%s@%d", e->row->id, e->attempt);
    else
        snprintf(out, len, "%s", e->row->id);
}

/* Does the episode match one of ids ("ID": every attempt; "ID@K": that one)? */
static int matches(const bep *e, const cJSON *ids, cJSON *seen)
{
    char key[BATCH_ID_MAX + 16];
    key_of(e, key, sizeof key);
    int i = 0, hit = 0;
    const cJSON *id;
    cJSON_ArrayForEach(id, ids)
    {
        const char *s = cJSON_GetStringValue(id);
        if (s && (!strcmp(s, key) || !strcmp(s, e->row->id))) {
            cJSON_ReplaceItemInArray(seen, i, cJSON_CreateTrue());
            hit = 1;
        }
        i++;
    }
    return hit;
}

static const char *phase_name(bep_phase p)
{
    switch (p) {
    case EP_QUEUED: return "queued";
    case EP_LIVE: return "running";
    case EP_FINISHING: return "finishing";
    case EP_DONE: return "done";
    }
    return "?";
}

static cJSON *episode_json(const bep *e)
{
    char key[BATCH_ID_MAX + 16];
    key_of(e, key, sizeof key);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", key);
    cJSON_AddStringToObject(o, "id", e->row->id);
    cJSON_AddNumberToObject(o, "attempt", e->attempt);
    cJSON_AddStringToObject(o, "state", phase_name(e->phase));
    cJSON_AddNumberToObject(o, "step", e->live.step);
    cJSON_AddBoolToObject(o, "paused", e->paused);
    if (e->paused)
        cJSON_AddStringToObject(o, "paused_by", e->pause_why);
    cJSON_AddStringToObject(o, "doing",
                            e->proc                 ? "command"
                            : e->in_job             ? "tool"
                            : e->lq != LQ_NONE      ? "llm"
                            : e->sbs == SB_CREATING ? "set-up"
                                                    : "waiting");
    cJSON_AddStringToObject(o, "tool", e->live.tool);
    cJSON_AddStringToObject(o, "command", e->live.cmd);
    if (e->ep && e->phase == EP_LIVE && !e->in_job && (e->proc || e->wants_cmd)) {
        const cJSON *params;
        const char *name = agent_ep_tool(e->ep, &params);
        char cmd[4096];
        agent_watch_call(name, params, cmd, sizeof cmd);
        cJSON_AddStringToObject(o, "running", cmd); /* the command of the step in progress */
    }
    cJSON_AddNumberToObject(o, "alerts", e->live.alerts);
    cJSON_AddNumberToObject(o, "seconds", lis_now() - e->t0);
    if (e->live.fx)
        cJSON_AddItemToObject(o, "effects", cJSON_Duplicate(e->live.fx, 1));
    return o;
}

cJSON *bctl_status(brun *r)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "dir", batch_out_dir(r->out));
    cJSON_AddStringToObject(s, "task", r->task->name ? r->task->name : "");
    cJSON_AddNumberToObject(s, "total", (double)r->total);
    cJSON_AddNumberToObject(s, "done", (double)(r->already + r->done));
    cJSON_AddNumberToObject(s, "running", (double)r->live);
    cJSON_AddNumberToObject(s, "queued", (double)(r->neps - r->next));
    cJSON_AddNumberToObject(s, "errors", (double)r->errors);
    cJSON_AddNumberToObject(s, "alerts", (double)r->nalerts);
    cJSON_AddNumberToObject(s, "elapsed_seconds", lis_now() - r->t0);
    cJSON_AddBoolToObject(s, "draining", r->draining);
    cJSON_AddBoolToObject(s, "paused_all", r->paused_all);
    size_t paused = 0;
    cJSON *eps = cJSON_AddArrayToObject(s, "episodes");
    for (size_t i = 0; i < r->next; i++) {
        const bep *e = &r->eps[i];
        if (e->phase != EP_LIVE && e->phase != EP_FINISHING)
            continue;
        paused += e->paused;
        cJSON_AddItemToArray(eps, episode_json(e));
    }
    cJSON_AddNumberToObject(s, "paused", (double)paused);
    cJSON *al = cJSON_AddArrayToObject(s, "latest_alerts");
    size_t n = r->nalerts < BFX_ALERTS ? r->nalerts : BFX_ALERTS;
    for (size_t k = 0; r->alerts && k < n; k++) {
        const bfx_alert *x = &r->alerts[(r->nalerts - n + k) % BFX_ALERTS];
        cJSON *a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "key", x->key);
        cJSON_AddNumberToObject(a, "step", x->step);
        cJSON_AddStringToObject(a, "rule", x->rule);
        cJSON_AddStringToObject(a, "action", x->action);
        cJSON_AddStringToObject(a, "what", x->what);
        cJSON_AddNumberToObject(a, "time", x->t);
        cJSON_AddItemToArray(al, a);
    }
    return s;
}

cJSON *bctl_command(brun *r, const char *verb, const cJSON *ids)
{
    int all = cJSON_GetArraySize(ids) == 0;
    cJSON *res = cJSON_CreateObject();
    if (!strcmp(verb, "stop") && all) {
        /* as Ctrl-C: the loop's signalfd takes it (a second stop cancels),
         * recorded as lis batch ctl stop (loop.c) */
        r->ctl_stops++;
        kill(getpid(), SIGINT);
        cJSON_AddStringToObject(res, "done",
                                r->draining ? "cancelling the running episodes"
                                            : "draining: starting nothing new, waiting for the "
                                              "running episodes");
        return res;
    }
    if (all && !strcmp(verb, "pause"))
        r->paused_all = 1;
    if (all && !strcmp(verb, "resume"))
        r->paused_all = 0;
    cJSON *seen = cJSON_CreateArray(), *acted = cJSON_AddArrayToObject(res, "episodes");
    for (int i = 0; i < cJSON_GetArraySize(ids); i++)
        cJSON_AddItemToArray(seen, cJSON_CreateFalse());
    for (size_t i = 0; i < r->next; i++) {
        bep *e = &r->eps[i];
        if (e->phase != EP_LIVE || (!all && !matches(e, ids, seen)))
            continue;
        char key[BATCH_ID_MAX + 16];
        key_of(e, key, sizeof key);
        if (!strcmp(verb, "pause"))
            bctl_pause(e, "lis batch ctl pause");
        else if (!strcmp(verb, "resume"))
            bctl_resume(e);
        else /* stop ID...: cancelled as by a second Ctrl-C (no row: --resume runs it) */
            bsched_stop(e, AGENT_STOP_CANCELLED, "stopped by lis batch ctl");
        cJSON_AddItemToArray(acted, cJSON_CreateString(key));
    }
    cJSON *unknown = cJSON_AddArrayToObject(res, "not_running");
    for (int i = 0; i < cJSON_GetArraySize(ids); i++)
        if (!cJSON_IsTrue(cJSON_GetArrayItem(seen, i)))
            cJSON_AddItemToArray(unknown, cJSON_Duplicate(cJSON_GetArrayItem(ids, i), 0));
    cJSON_Delete(seen);
    return res;
}
