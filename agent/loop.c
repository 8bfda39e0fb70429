/* loop.c - `lis run`'s driver of the episode engine (react.c): each LLM call
 * and each tool in turn, blocking. lis batch drives the same engine from its
 * event loop. */
#include "agent_internal.h"

cJSON *agent_loop(const agent_tool_env *env, const agent_opts *o, agent_outcome *out)
{
    lis_error err = {0};
    agent_ep *ep = agent_ep_new(o);
    if (!ep)
        return NULL;
    llm_client *llm = llm_new(&o->llm, &err);
    if (!llm)
        agent_ep_llm_failed(ep, err.msg);
    for (;;) {
        int need = agent_ep_next(ep);
        if (need == AGENT_EP_DONE)
            break;
        if (need == AGENT_EP_LLM) {
            llm_reply reply;
            if (llm_chat(llm, agent_ep_messages(ep), agent_ep_tools(ep), &reply, &err) < 0)
                agent_ep_llm_failed(ep, err.msg);
            else
                agent_ep_llm_reply(ep, &reply);
        } else {
            const cJSON *params;
            const char *name = agent_ep_tool(ep, &params);
            agent_tool_out t;
            agent_tool_exec(env, *name ? name : NULL, params, &t);
            agent_ep_tool_done(ep, &t);
        }
    }
    llm_free(llm);
    return agent_ep_finish(ep, out);
}
