/* loop.c - `lis run`'s driver of the episode engine (react.c): each LLM call
 * and each tool in turn, blocking. lis batch drives the same engine from its
 * event loop. With a monitor, a command runs watched: a stop rule kills it,
 * a pause rule freezes the sandbox until `lis sandbox resume` thaws it.
 * Drivers other than `lis run` (rl/: one thread per episode) run it with
 * hooks: their own model call, each turn reported, a stop fd. */
#include "agent_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A driver's stop (agent_loop_hooks.stop_fd) is readable; none: -1 or 0. */
static int stop_fired(const agent_loop_hooks *h)
{
    if (!h || h->stop_fd <= 0)
        return 0;
    struct pollfd pf = {.fd = h->stop_fd, .events = POLLIN};
    return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLIN | POLLERR | POLLHUP));
}

/* Ends the episode with the driver's reason (stop_reason's, else cancelled). */
static void stop_now(agent_ep *ep, const agent_loop_hooks *h)
{
    char why[256] = "";
    agent_stop r = h->stop_reason ? h->stop_reason(h->arg, why, sizeof why) : AGENT_STOP_CANCELLED;
    agent_ep_stop(ep, r, why[0] ? why : agent_stop_name(r));
}

/* A pause rule fired: the sandbox frozen until someone resumes it (lis
 * sandbox resume NAME, which records it in the sandbox's state), the driver
 * stops the episode (then it is thawed, for the kill) or it ends.
 * A pause that cannot hold leaves why in failed: the episode ends with reason
 * pause_failed, never goes on as if paused (issue 29). */
static void pause_wait(const agent_opts *o, lis_sandbox *sb, const agent_loop_hooks *h,
                       const char *rule, char *failed, size_t len)
{
    lis_error err = {0};
    if (lis_sandbox_pause(sb, &err) < 0) {
        snprintf(failed, len, "policy rule %s asked for a pause: %s", rule, err.msg);
        return;
    }
    if (o->progress)
        fprintf(o->progress,
                "lis: paused by policy rule %s: `lis sandbox resume %s` continues the "
                "episode\n",
                rule, lis_sandbox_name(sb));
    while (lis_sandbox_is_paused(sb)) {
        struct pollfd pf = {.fd = h && h->stop_fd > 0 ? h->stop_fd : -1, .events = POLLIN};
        if (poll(&pf, 1, 250) > 0) {
            lis_sandbox_resume(sb, &err);
            return;
        }
    }
    if (o->progress)
        fprintf(o->progress, "lis: resumed\n");
}

/* The monitor's live action, if any: stop kills the command (p, may be NULL)
 * and ends the episode after this step; pause waits. A failed pause kills the
 * command too and leaves why in failed (PAUSE_ERR_MAX) for the caller. */
enum { PAUSE_ERR_MAX = 400 };
static void on_action(agent_ep *ep, const agent_tool_env *env, const agent_opts *o,
                      const agent_loop_hooks *h, lis_proc *p, char *failed)
{
    char rule[64];
    lis_policy_action a = agent_ep_monitor_event(ep, rule, sizeof rule);
    lis_error ign;
    if (a == LIS_ACT_PAUSE)
        pause_wait(o, env->sb, h, rule, failed, PAUSE_ERR_MAX);
    if ((a == LIS_ACT_STOP || failed[0] || stop_fired(h)) && p)
        lis_proc_signal(p, SIGKILL, &ign);
}

/* execute_bash with the monitor's fd and the driver's stop_fd watched beside
 * the command's: a stop kills the command, whose step keeps what it printed
 * (*stopped set). */
static void run_watched(agent_ep *ep, const agent_tool_env *env, const agent_opts *o,
                        const agent_loop_hooks *h, const char *cmd, agent_tool_out *t,
                        char *pause_failed, int *stopped)
{
    agent_bash b;
    agent_bash_prepare(env, cmd, &b);
    lis_error err = {0};
    lis_result res = {0};
    lis_proc *p = NULL;
    double t0 = lis_now();
    int rc = lis_exec_start(env->sb, &b.spec, &p, &err);
    int stop_fd = h && h->stop_fd > 0 ? h->stop_fd : -1;
    while (rc == 0) {
        struct pollfd pf[3] = {{.fd = lis_proc_fd(p), .events = POLLIN},
                               {.fd = env->mon ? lis_monitor_fd(env->mon) : -1, .events = POLLIN},
                               {.fd = stop_fd, .events = POLLIN}};
        if (poll(pf, 3, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            on_action(ep, env, o, h, p, pause_failed);
        if (pf[2].revents) { /* once: a poll set without it until the command ends */
            lis_error ign;
            lis_proc_signal(p, SIGKILL, &ign);
            *stopped = 1;
            stop_fd = -1;
        }
        if (pf[0].revents && (rc = lis_proc_step(p, &err)) != 0)
            break;
    }
    int wrc = p ? lis_proc_wait(p, &res, &err) : -1;
    t->exec_seconds = lis_now() - t0;
    agent_bash_observe(env, &b, rc < 0 ? -1 : wrc, &res, &err, t);
    if (wrc == 0)
        lis_result_free(&res);
}

/* One tool call of the episode, watched when there is a monitor or a stop. */
static void run_tool(agent_ep *ep, const agent_tool_env *env, const agent_opts *o,
                     const agent_loop_hooks *h, char *pause_failed, int *stopped)
{
    const cJSON *params;
    const char *name = agent_ep_tool(ep, &params);
    agent_tool_out t;
    memset(&t, 0, sizeof t);
    char *printed = NULL;
    int watch = env->mon || (h && h->stop_fd > 0);
    const char *cmd = watch ? agent_bash_command(name, params, &printed) : NULL;
    agent_ep_tool_begin(ep);
    if (cmd)
        run_watched(ep, env, o, h, cmd, &t, pause_failed, stopped);
    else
        agent_tool_exec(env, *name ? name : NULL, params, &t);
    free(printed);
    agent_ep_tool_end(ep, &t);
    agent_ep_tool_done(ep, &t);
    if (h && h->on_turn)
        h->on_turn(h->arg, agent_ep_last_step(ep), agent_ep_messages(ep));
}

/* The loop of both entry points; h NULL: lis run's, no hooks. */
static cJSON *drive(const agent_tool_env *env, agent_ep *ep, const agent_opts *o,
                    const agent_loop_hooks *h, agent_outcome *out, cJSON **messages)
{
    lis_error err = {0};
    int unreached = 0;
    if (!ep)
        ep = agent_ep_new(o);
    if (!ep)
        return NULL;
    char pause_failed[PAUSE_ERR_MAX] = "";
    agent_ep_set_monitor(ep, env->mon);
    llm_client *llm = NULL;
    if (!h || !h->llm) {
        llm = llm_new(&o->llm, &err);
        if (!llm)
            agent_ep_llm_failed(ep, err.msg);
    }
    for (;;) {
        int stopped = 0;
        if (env->mon) { /* what fired between the steps (a daemon's exec) */
            struct pollfd pf = {.fd = lis_monitor_fd(env->mon), .events = POLLIN};
            if (poll(&pf, 1, 0) > 0)
                on_action(ep, env, o, h, NULL, pause_failed);
        }
        if (pause_failed[0])
            agent_ep_stop(ep, AGENT_STOP_PAUSE_FAILED, pause_failed);
        if (stop_fired(h)) /* before each model call and each tool */
            stop_now(ep, h);
        int need = agent_ep_next(ep);
        if (need == AGENT_EP_DONE)
            break;
        if (need == AGENT_EP_LLM) {
            llm_reply reply;
            int rc = h && h->llm
                         ? h->llm(h->arg, agent_ep_messages(ep), agent_ep_tools(ep), &reply, &err)
                         : llm_chat(llm, agent_ep_messages(ep), agent_ep_tools(ep), &reply, &err);
            if (rc == 0) {
                agent_ep_llm_reply(ep, &reply);
            } else if (stop_fired(h)) { /* the request was dropped for the stop */
                stop_now(ep, h);
            } else if (err.code == EHOSTUNREACH && agent_ep_steps(ep) == 0) {
                unreached = 1; /* nothing ran: the caller says so in one line */
                break;
            } else {
                agent_ep_llm_failed(ep, err.msg);
            }
        } else {
            run_tool(ep, env, o, h, pause_failed, &stopped);
            if (stopped) /* the step is recorded with what the command printed */
                stop_now(ep, h);
        }
    }
    llm_free(llm);
    if (messages)
        *messages = cJSON_Duplicate(agent_ep_messages(ep), 1);
    cJSON *traj = agent_ep_finish(ep, out);
    if (unreached) {
        out->stop = AGENT_STOP_LLM_ERROR;
        out->unreached = 1;
        snprintf(out->error, sizeof out->error, "%s", err.msg);
    }
    return traj;
}

cJSON *agent_loop(const agent_tool_env *env, const agent_opts *o, agent_outcome *out)
{
    return drive(env, NULL, o, NULL, out, NULL);
}

cJSON *agent_loop_hooked(const agent_tool_env *env, agent_ep *ep, const agent_opts *o,
                         const agent_loop_hooks *h, agent_outcome *out)
{
    cJSON *messages = NULL;
    cJSON *traj = drive(env, ep, o, h, out, &messages);
    if (traj && messages)
        cJSON_AddItemToObject(traj, "messages", messages);
    else
        cJSON_Delete(messages);
    return traj;
}
