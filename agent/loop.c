/* loop.c - `lis run`'s driver of the episode engine (react.c): each LLM call
 * and each tool in turn, blocking. lis batch drives the same engine from its
 * event loop. With a monitor, a command runs watched: a stop rule kills it,
 * a pause rule freezes the sandbox until `lis sandbox resume` thaws it. */
#include "agent_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A pause rule fired: the sandbox frozen until someone resumes it (lis
 * sandbox resume NAME, which records it in the sandbox's state) or it ends.
 * A pause that cannot hold leaves why in failed: the episode ends with reason
 * pause_failed, never goes on as if paused (issue 29). */
static void pause_wait(const agent_opts *o, lis_sandbox *sb, const char *rule, char *failed,
                       size_t len)
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
    while (lis_sandbox_is_paused(sb))
        poll(NULL, 0, 250);
    if (o->progress)
        fprintf(o->progress, "lis: resumed\n");
}

/* The monitor's live action, if any: stop kills the command (p, may be NULL)
 * and ends the episode after this step; pause waits. A failed pause kills the
 * command too and leaves why in failed (PAUSE_ERR_MAX) for the caller. */
enum { PAUSE_ERR_MAX = 400 };
static void on_action(agent_ep *ep, const agent_tool_env *env, const agent_opts *o, lis_proc *p,
                      char *failed)
{
    char rule[64];
    lis_policy_action a = agent_ep_monitor_event(ep, rule, sizeof rule);
    lis_error ign;
    if (a == LIS_ACT_PAUSE)
        pause_wait(o, env->sb, rule, failed, PAUSE_ERR_MAX);
    if ((a == LIS_ACT_STOP || failed[0]) && p)
        lis_proc_signal(p, SIGKILL, &ign);
}

/* execute_bash with the monitor's fd watched beside the command's. */
static void run_watched(agent_ep *ep, const agent_tool_env *env, const agent_opts *o,
                        const char *cmd, agent_tool_out *t, char *pause_failed)
{
    agent_bash b;
    agent_bash_prepare(env, cmd, &b);
    lis_error err = {0};
    lis_result res = {0};
    lis_proc *p = NULL;
    double t0 = lis_now();
    int rc = lis_exec_start(env->sb, &b.spec, &p, &err);
    while (rc == 0) {
        struct pollfd pf[2] = {{.fd = lis_proc_fd(p), .events = POLLIN},
                               {.fd = lis_monitor_fd(env->mon), .events = POLLIN}};
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            on_action(ep, env, o, p, pause_failed);
        if (pf[0].revents && (rc = lis_proc_step(p, &err)) != 0)
            break;
    }
    int wrc = p ? lis_proc_wait(p, &res, &err) : -1;
    t->exec_seconds = lis_now() - t0;
    agent_bash_observe(env, &b, rc < 0 ? -1 : wrc, &res, &err, t);
    if (wrc == 0)
        lis_result_free(&res);
}

cJSON *agent_loop(const agent_tool_env *env, const agent_opts *o, agent_outcome *out)
{
    lis_error err = {0};
    int unreached = 0;
    agent_ep *ep = agent_ep_new(o);
    if (!ep)
        return NULL;
    char pause_failed[PAUSE_ERR_MAX] = "";
    agent_ep_set_monitor(ep, env->mon);
    llm_client *llm = llm_new(&o->llm, &err);
    if (!llm)
        agent_ep_llm_failed(ep, err.msg);
    for (;;) {
        if (env->mon) { /* what fired between the steps (a daemon's exec) */
            struct pollfd pf = {.fd = lis_monitor_fd(env->mon), .events = POLLIN};
            if (poll(&pf, 1, 0) > 0)
                on_action(ep, env, o, NULL, pause_failed);
        }
        if (pause_failed[0])
            agent_ep_stop(ep, AGENT_STOP_PAUSE_FAILED, pause_failed);
        int need = agent_ep_next(ep);
        if (need == AGENT_EP_DONE)
            break;
        if (need == AGENT_EP_LLM) {
            llm_reply reply;
            if (llm_chat(llm, agent_ep_messages(ep), agent_ep_tools(ep), &reply, &err) == 0) {
                agent_ep_llm_reply(ep, &reply);
            } else if (err.code == EHOSTUNREACH && agent_ep_steps(ep) == 0) {
                unreached = 1; /* nothing ran: the caller says so in one line */
                break;
            } else {
                agent_ep_llm_failed(ep, err.msg);
            }
        } else {
            const cJSON *params;
            const char *name = agent_ep_tool(ep, &params);
            agent_tool_out t;
            memset(&t, 0, sizeof t);
            char *printed = NULL;
            const char *cmd = env->mon ? agent_bash_command(name, params, &printed) : NULL;
            agent_ep_tool_begin(ep);
            if (cmd)
                run_watched(ep, env, o, cmd, &t, pause_failed);
            else
                agent_tool_exec(env, *name ? name : NULL, params, &t);
            free(printed);
            agent_ep_tool_end(ep, &t);
            agent_ep_tool_done(ep, &t);
        }
    }
    llm_free(llm);
    cJSON *traj = agent_ep_finish(ep, out);
    if (unreached) {
        out->stop = AGENT_STOP_LLM_ERROR;
        out->unreached = 1;
        snprintf(out->error, sizeof out->error, "%s", err.msg);
    }
    return traj;
}
