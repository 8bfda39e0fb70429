/* episode.c - one episode of the episodes API on a run-pool thread: its
 * sandbox (a fork of its group's set-up, or of the snapshot a branch starts
 * on), `lis run`'s blocking driver of agent/'s engine with hooks (the model
 * call on the endpoint of the moment, each turn recorded with the
 * endpoint's token ids, the snapshots asked for, a cancel or a deadline
 * through an eventfd), the answer file read, the sandbox destroyed. Then
 * its reward on a reward-pool thread. */
#include "core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void event_add(rl_ep *e, const char *name, cJSON *data, long turn)
{
    if (e->nevents >= RL_EVENTS_MAX && strcmp(name, "final")) {
        cJSON_Delete(data); /* the stream's bound: later steps are in the result */
        return;
    }
    rl_event *n = realloc(e->events, (e->nevents + 1) * sizeof *n);
    if (!n) {
        cJSON_Delete(data);
        return;
    }
    e->events = n;
    rl_event *v = &n[e->nevents++];
    v->id = ++e->next_event;
    snprintf(v->name, sizeof v->name, "%s", name);
    v->data = data || turn >= 0 ? data : cJSON_CreateObject();
    v->turn = turn;
    e->rl->generation++;
}

void rl_ep_event(rl_ep *e, const char *name, cJSON *data) { event_add(e, name, data, -1); }

void rl_ep_event_step(rl_ep *e, long turn)
{
    event_add(e, turn == -2 ? "final" : "step", NULL, turn);
}

cJSON *rl_event_json(const rl_ep *e, const rl_event *v)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)v->id);
    cJSON_AddStringToObject(o, "event", v->name);
    cJSON *data = NULL;
    if (v->turn >= 0 && (size_t)v->turn < e->nturns) {
        data = cJSON_CreateObject();
        cJSON_AddNumberToObject(data, "step", (double)v->turn);
        cJSON_AddItemToObject(data, "turn", rl_turn_json(&e->turns[v->turn], (size_t)v->turn));
    } else if (v->turn == -2 && e->result) {
        data = cJSON_Duplicate(e->result, 1);
    } else {
        data = v->data ? cJSON_Duplicate(v->data, 1) : cJSON_CreateObject();
    }
    cJSON_AddItemToObject(o, "data", data);
    return o;
}

void rl_ep_stop(rl_ep *e, agent_stop why, const char *msg)
{
    e->stop_reason = why;
    snprintf(e->stop_why, sizeof e->stop_why, "%s", msg);
    e->abort = 1;
    pthread_cond_broadcast(&e->g->cv); /* a run waiting for its set-up */
    pthread_cond_broadcast(&e->cv);    /* an env's run waiting for an action */
    if (e->stop_efd >= 0) {
        uint64_t one = 1;
        if (write(e->stop_efd, &one, sizeof one) < 0) { /* a stop is pending already */
        }
    }
}

/* What the hooks of one run share (its thread only). */
typedef struct run_ctx {
    rl_ep *e;
    lis_sandbox *sb;
    llm_config cfg; /* the episode's: sampling, seed, abort */
    llm_client *llm;
    char url[2048], model[512], key[1024]; /* the endpoint llm talks to */
    rl_endpoint *ept;                      /* counted in its outstanding, or NULL */
    unsigned long ept_epoch;               /* of rl->endpoints when it was picked */
    /* the last model call, for the turn it makes */
    cJSON *tokens;
    char tokens_why[160];
    double llm_s;
    char version[64];
    /* the first model call, made while the set-up and the fork are */
    pthread_t pf;
    int pf_started, pf_ready, pf_rc;
    const cJSON *pf_messages, *pf_tools;
    llm_reply pf_reply;
    lis_error pf_err;
} run_ctx;

static agent_stop hook_stop_reason(void *arg, char *why, size_t len)
{
    run_ctx *c = arg;
    pthread_mutex_lock(&c->e->rl->mu);
    agent_stop s = c->e->stop_reason;
    snprintf(why, len, "%s", c->e->stop_why);
    pthread_mutex_unlock(&c->e->rl->mu);
    return s;
}

/* The endpoint of this call: PUT rl/inference's with the fewest requests in
 * flight, else the group's own. Under mu. */
static void pick_endpoint(run_ctx *c, char *url, char *model, char *key)
{
    lis_rl *rl = c->e->rl;
    const rl_request *rq = &c->e->g->spec->req;
    rl_endpoint *best = NULL;
    /* the fewest in flight; among equals, in turn from where the last pick was */
    for (size_t j = 0; j < rl->nendpoints; j++) {
        rl_endpoint *x = &rl->endpoints[(rl->endpoints_next + j) % rl->nendpoints];
        if (!best || x->outstanding < best->outstanding)
            best = x;
    }
    if (best)
        rl->endpoints_next = (size_t)(best - rl->endpoints) + 1;
    snprintf(url, 2048, "%s", best ? best->base_url : rq->base_url);
    snprintf(model, 512, "%s", best && best->model ? best->model : rq->model);
    const char *k = best ? best->api_key : rq->api_key;
    snprintf(key, 1024, "%s", k ? k : "");
    if (best)
        best->outstanding++;
    c->ept = best;
    c->ept_epoch = rl->endpoints_epoch;
    snprintf(c->version, sizeof c->version, "%s", rl->weight_version);
}

static int hook_llm(void *arg, const cJSON *messages, const cJSON *tools, llm_reply *r,
                    lis_error *err)
{
    run_ctx *c = arg;
    lis_rl *rl = c->e->rl;
    char url[2048], model[512], key[1024];
    pthread_mutex_lock(&rl->mu);
    pick_endpoint(c, url, model, key);
    pthread_mutex_unlock(&rl->mu);
    if (!c->llm || strcmp(url, c->url) || strcmp(model, c->model) || strcmp(key, c->key)) {
        llm_free(c->llm);
        snprintf(c->url, sizeof c->url, "%s", url);
        snprintf(c->model, sizeof c->model, "%s", model);
        snprintf(c->key, sizeof c->key, "%s", key);
        c->cfg.base_url = c->url;
        c->cfg.model = c->model;
        c->cfg.api_key = c->key[0] ? c->key : NULL;
        c->llm = llm_new(&c->cfg, err);
    }
    double t0 = lis_now();
    int rc = c->llm ? llm_chat(c->llm, messages, tools, r, err) : -1;
    c->llm_s = lis_now() - t0;
    pthread_mutex_lock(&rl->mu);
    /* a swap of endpoints in the meantime freed the one it went to */
    if (c->ept && c->ept_epoch == rl->endpoints_epoch && c->ept->outstanding > 0)
        c->ept->outstanding--;
    pthread_mutex_unlock(&rl->mu);
    cJSON_Delete(c->tokens);
    c->tokens = NULL;
    c->tokens_why[0] = 0;
    if (rc == 0) {
        c->tokens = r->tokens; /* the endpoint's own ids, kept with the turn */
        r->tokens = NULL;
        snprintf(c->tokens_why, sizeof c->tokens_why, "%s", r->tokens_why);
    }
    return rc;
}

/* Step mode: the trainer's action instead of a model call (env.c). */
static int hook_env(void *arg, const cJSON *messages, const cJSON *tools, llm_reply *r,
                    lis_error *err)
{
    (void)tools;
    run_ctx *c = arg;
    cJSON_Delete(c->tokens);
    c->tokens = NULL;
    snprintf(c->tokens_why, sizeof c->tokens_why, "step mode: the trainer called the model");
    double t0 = lis_now();
    int rc = rl_env_llm(c->e, messages, r, err);
    c->llm_s = lis_now() - t0;
    return rc;
}

/* Whether the files after turn k-1 are to be kept (keep_snapshots). */
static int snap_wanted(const rl_request *rq, size_t k)
{
    if (rq->snaps == RL_SNAP_EVERY)
        return 1;
    for (size_t i = 0; rq->snaps == RL_SNAP_LIST && i < rq->nsnap_steps; i++)
        if ((size_t)rq->snap_steps[i] == k)
            return 1;
    return 0;
}

void rl_ep_count_caps(rl_ep *e, const cJSON *step)
{
    const cJSON *fx = cJSON_GetObjectItemCaseSensitive(step, "effects");
    const cJSON *cap = cJSON_GetObjectItemCaseSensitive(fx, "capability");
    static const char *names[3] = {"external", "file", "computation"};
    for (int i = 0; i < 3; i++)
        e->caps[i] += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cap, names[i]));
    e->alerts += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fx, "alerts"));
}

/* Each turn: recorded with its ids, its "step" event, and the snapshot of
 * the files after it when asked (outside mu: it copies the layer). */
static void hook_turn(void *arg, const cJSON *step, const cJSON *messages)
{
    run_ctx *c = arg;
    rl_ep *e = c->e;
    lis_rl *rl = e->rl;
    pthread_mutex_lock(&rl->mu);
    if (e->nturns == e->capturns) {
        size_t cap = e->capturns ? 2 * e->capturns : 8;
        rl_turn *n = realloc(e->turns, cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&rl->mu);
            return;
        }
        e->turns = n;
        e->capturns = cap;
    }
    rl_turn *t = &e->turns[e->nturns];
    memset(t, 0, sizeof *t);
    t->step = cJSON_Duplicate(step, 1);
    t->tokens = c->tokens;
    c->tokens = NULL;
    snprintf(t->tokens_why, sizeof t->tokens_why, "%s", c->tokens_why);
    t->llm_s = c->llm_s;
    snprintf(t->weight_version, sizeof t->weight_version, "%s", c->version);
    /* the history's change since the last turn: the message the last turn
     * ended with (its "Steps Remaining" line came after) and what is new */
    t->tail = cJSON_CreateArray();
    int from = e->nmsg ? (int)e->nmsg - 1 : 0, total = cJSON_GetArraySize(messages);
    for (int i = from; i < total; i++)
        cJSON_AddItemToArray(t->tail, cJSON_Duplicate(cJSON_GetArrayItem(messages, i), 1));
    e->nmsg = (size_t)total;
    size_t k = ++e->nturns;
    rl_ep_count_caps(e, step);
    rl_ep_event_step(e, (long)(k - 1));
    if (e->g->spec->req.step)
        rl_env_turn(e, messages);
    int snap = snap_wanted(&e->g->spec->req, k) && k < e->nsnaps && !e->snaps[k];
    int step_mode = e->g->spec->req.step;
    pthread_mutex_unlock(&rl->mu);
    /* An env's run goes straight on to its model call, which publishes the
     * observation and notifies (rl_env_llm), or to its end, which does too:
     * one wake-up of the serve loop per step instead of two, the first of
     * which found the trainer's step not answerable yet and only took mu
     * from the run. A snapshot to make first is not quick: notify now. */
    if (!step_mode || snap)
        rl_notify(rl);
    if (!snap)
        return;
    lis_snapshot_result res;
    lis_error err = {0};
    rl_snap *s = calloc(1, sizeof *s);
    if (!s || lis_rootfs_snapshot(rl->data_dir, c->sb, NULL, &res, &err) < 0) {
        free(s);
        pthread_mutex_lock(&rl->mu);
        cJSON_AddStringToObject(t->step, "snapshot_error", err.msg[0] ? err.msg : "out of memory");
        pthread_mutex_unlock(&rl->mu);
        return;
    }
    snprintf(s->digest, sizeof s->digest, "%s", res.digest);
    snprintf(s->chain, sizeof s->chain, "%s", res.rootfs);
    s->refs = 1; /* the episode's, until it is deleted */
    pthread_mutex_lock(&rl->mu);
    s->next = rl->snaps;
    rl->snaps = s;
    e->snaps[k] = s;
    pthread_mutex_unlock(&rl->mu);
}

/* The episode's model settings: the group's (or the branch's) sampling
 * sent as it is, its seed, max_tokens kept by the client (its context
 * back-off shrinks it), the abort flag. */
static cJSON *llm_settings(rl_ep *e, llm_config *cfg)
{
    const rl_request *rq = &e->g->spec->req;
    const cJSON *sampling = e->sampling ? e->sampling : rq->sampling;
    cJSON *extra = sampling ? cJSON_Duplicate(sampling, 1) : cJSON_CreateObject();
    if (!extra)
        return NULL;
    cJSON *mt = cJSON_DetachItemFromObjectCaseSensitive(extra, "max_tokens");
    long long max_tokens = 0; /* not an integer in range: the client's default */
    if (mt && rl_json_int(mt, 1, 1ll << 30, &max_tokens) < 0)
        max_tokens = 0;
    if (e->has_seed) {
        cJSON_DeleteItemFromObjectCaseSensitive(extra, "seed");
        cJSON_AddNumberToObject(extra, "seed", (double)e->seed);
    }
    *cfg = (llm_config){.api = LLM_API_OPENAI,
                        .max_tokens = max_tokens,
                        .extra_body = extra,
                        .connect_timeout = 10,
                        .timeout = 3600,
                        .max_retries = 3,
                        .backoff_base = 1,
                        .backoff_max = 30,
                        .abort = &e->abort};
    cJSON_Delete(mt);
    return extra;
}

static rl_status status_of(const agent_outcome *o)
{
    switch (o->stop) {
    case AGENT_STOP_SUBMIT: return RS_COMPLETED;
    case AGENT_STOP_MAX_STEPS:
    case AGENT_STOP_TOKEN_LIMIT:
    case AGENT_STOP_POLICY: return RS_TRUNCATED;
    case AGENT_STOP_DEADLINE: return RS_TIMEOUT;
    case AGENT_STOP_CANCELLED: return RS_CANCELLED;
    case AGENT_STOP_LLM_ERROR: return RS_MODEL_ERROR;
    case AGENT_STOP_SANDBOX_ERROR:
    case AGENT_STOP_PAUSE_FAILED: return RS_ENV_ERROR;
    }
    return RS_ENV_ERROR;
}

/* The steps a branch starts with: its copied turns'. */
static cJSON *branch_steps(const rl_ep *e)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < e->nturns; i++)
        cJSON_AddItemToArray(a, cJSON_Duplicate(e->turns[i].step, 1));
    return a;
}

/* The first model call needs no sandbox: it goes out on a thread of its
 * own while the group's set-up and this episode's fork are made. */
static void *prefetch_main(void *arg)
{
    run_ctx *c = arg;
    c->pf_rc = hook_llm(c, c->pf_messages, c->pf_tools, &c->pf_reply, &c->pf_err);
    return NULL;
}

static void prefetch_start(run_ctx *c, agent_ep *ep)
{
    if (!ep || agent_ep_next(ep) != AGENT_EP_LLM)
        return;
    c->pf_messages = agent_ep_messages(ep); /* ep is not touched until the join */
    c->pf_tools = agent_ep_tools(ep);
    pthread_attr_t at;
    if (pthread_attr_init(&at) == 0) {
        pthread_attr_setstacksize(&at, 512u << 10);
        c->pf_started = pthread_create(&c->pf, &at, prefetch_main, c) == 0;
        pthread_attr_destroy(&at);
    }
}

static void prefetch_join(run_ctx *c)
{
    if (!c->pf_started)
        return;
    pthread_join(c->pf, NULL);
    c->pf_started = 0;
    c->pf_ready = 1;
}

/* The loop's model call: the prefetched one first. */
static int hook_llm_first(void *arg, const cJSON *messages, const cJSON *tools, llm_reply *r,
                          lis_error *err)
{
    run_ctx *c = arg;
    if (!c->pf_ready)
        return hook_llm(arg, messages, tools, r, err);
    c->pf_ready = 0;
    *r = c->pf_reply;
    memset(&c->pf_reply, 0, sizeof c->pf_reply);
    if (c->pf_rc < 0)
        *err = c->pf_err;
    return c->pf_rc;
}

/* The sandbox on chain, the loop to its end, the answer read, the sandbox gone. */
static void run(run_ctx *c, const char *chain, agent_ep *ep, const agent_opts *o)
{
    rl_ep *e = c->e;
    lis_rl *rl = e->rl;
    rl_spec *s = e->g->spec;
    const rl_request *rq = &s->req;
    lis_error err = {0};
    lis_sandbox_spec spec;
    rl_sandbox_spec(rl, chain, &spec);
    agent_watch w = {.hub = rl->o.hub, .policy = rl->o.policy};
    lis_monitor *mon = NULL;
    if (agent_sandbox_create(rl->o.ctx, &spec, rl->o.hub ? &w : NULL, &c->sb, &mon, &err) < 0) {
        prefetch_join(c);
        agent_outcome ign;
        cJSON_Delete(agent_ep_finish(ep, &ign));
        pthread_mutex_lock(&rl->mu);
        e->status = RS_ENV_ERROR;
        e->stage = RST_RUN;
        snprintf(e->error, sizeof e->error, "starting the sandbox: %s", err.msg);
        pthread_mutex_unlock(&rl->mu);
        return;
    }
    pthread_mutex_lock(&rl->mu);
    e->t_ready = lis_now();
    e->sb = c->sb; /* step mode's reward and branch use it while the env waits */
    pthread_mutex_unlock(&rl->mu);
    agent_tool_env env;
    agent_tool_env_init(c->sb, &s->prompts, &env);
    env.mon = mon;
    env.timeout = rq->tool_timeout > 0 ? rq->tool_timeout : AGENT_CMD_TIMEOUT;
    agent_watch_setup_done(mon);
    prefetch_join(c);
    agent_loop_hooks h = {.arg = c,
                          .stop_fd = e->stop_efd,
                          .stop_reason = hook_stop_reason,
                          .llm = rq->step ? hook_env : hook_llm_first,
                          .on_turn = hook_turn};
    agent_outcome out = {0};
    cJSON *traj = agent_loop_hooked(&env, ep, o, &h, &out);
    /* the answer, before the sandbox goes */
    char *answer = NULL;
    size_t alen = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s", rq->task.answer_file ? rq->task.answer_file : "");
    if (!path[0])
        snprintf(path, sizeof path, "%s/answer.txt", s->prompts.output_dir);
    lis_error aerr = {0};
    char *data = NULL;
    if (traj && lis_file_read(c->sb, path, 1u << 20, &data, &alen, &aerr) == 0) {
        answer = agent_clean_output(data, alen);
        free(data);
    }
    pthread_mutex_lock(&rl->mu);
    while (e->sb_users) /* a reward or a branch of an env reads it */
        pthread_cond_wait(&e->cv, &rl->mu);
    e->sb = NULL;
    pthread_mutex_unlock(&rl->mu);
    lis_error ign;
    lis_sandbox_destroy(c->sb, &ign);
    c->sb = NULL;
    lis_monitor_free(mon);
    pthread_mutex_lock(&rl->mu);
    e->t_run1 = lis_now();
    e->answer = answer;
    if (!traj) {
        e->status = RS_ENV_ERROR;
        e->stage = RST_RUN;
        snprintf(e->error, sizeof e->error, "out of memory");
    } else {
        e->out = out;
        e->status = status_of(&out);
        if (e->status != RS_COMPLETED && e->status != RS_TRUNCATED) {
            e->stage = RST_RUN;
            snprintf(e->error, sizeof e->error, "%s", out.error[0] ? out.error : e->stop_why);
        }
        cJSON *msgs = cJSON_DetachItemFromObjectCaseSensitive(traj, "messages");
        cJSON_Delete(e->messages);
        e->messages = msgs;
        e->ran = 1;
        cJSON_Delete(traj); /* its steps are the turns' */
    }
    pthread_mutex_unlock(&rl->mu);
}

/* Waits (under mu) for the group's set-up, a stop, or the server's end;
 * returns the snapshot to start on (its ref taken), or NULL with the
 * episode's end set. */
static rl_snap *wait_setup(rl_ep *e)
{
    rl_group *g = e->g;
    while (g->setup_state == RL_SETUP_PENDING && !e->cancel_asked)
        pthread_cond_wait(&g->cv, &e->rl->mu);
    rl_snap *on = NULL;
    if (!e->cancel_asked && g->setup_state == RL_SETUP_READY)
        on = e->at_step >= 0 ? e->snaps[e->at_step] : g->setup;
    if (on) {
        on->refs++; /* not removed while the sandbox runs on it */
        e->phase = RP_RUNNING;
        e->t_run0 = lis_now();
        return on;
    }
    e->stage = RST_SETUP;
    e->status = !e->cancel_asked                        ? RS_ENV_ERROR
                : e->stop_reason == AGENT_STOP_DEADLINE ? RS_TIMEOUT
                                                        : RS_CANCELLED;
    snprintf(e->error, sizeof e->error, "%s",
             e->cancel_asked                     ? e->stop_why
             : g->setup_state == RL_SETUP_FAILED ? g->error
                                                 : "its snapshot is gone");
    e->abort = 1; /* the first model call, if it still runs */
    return NULL;
}

void rl_ep_run_job(void *arg)
{
    run_ctx c = {.e = arg};
    rl_ep *e = c.e;
    lis_rl *rl = e->rl;
    rl_spec *s = e->g->spec;
    const rl_request *rq = &s->req;
    lis_error err = {0};
    pthread_mutex_lock(&rl->mu);
    if (!e->cancel_asked)
        e->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_unlock(&rl->mu);
    cJSON *extra = llm_settings(e, &c.cfg);
    agent_opts o = {.query = rq->task.prompt,
                    .prompts = &s->prompts,
                    .max_steps = rq->max_steps,
                    .max_token_limit = rq->max_token_limit,
                    .llm = c.cfg,
                    .llm_name = rq->model,
                    .messages = rq->task.messages};
    agent_ep *ep = NULL;
    if (e->at_step >= 0) {
        pthread_mutex_lock(&rl->mu);
        cJSON *steps = branch_steps(e);
        pthread_mutex_unlock(&rl->mu);
        ep = agent_ep_new_branch(&o, e->start_messages, steps, e->at_step, &err);
        cJSON_Delete(steps);
    } else {
        ep = agent_ep_new(&o);
    }
    if (e->stop_efd >= 0 && !rq->step)
        prefetch_start(&c, ep);
    pthread_mutex_lock(&rl->mu);
    rl_snap *on = NULL;
    if (!ep || e->stop_efd < 0) {
        e->status = e->cancel_asked ? RS_CANCELLED : RS_ENV_ERROR;
        e->stage = e->cancel_asked ? RST_SETUP : RST_RUN;
        snprintf(e->error, sizeof e->error, "%s",
                 e->cancel_asked ? e->stop_why
                 : err.msg[0]    ? err.msg
                                 : "out of memory");
    } else {
        on = wait_setup(e);
    }
    char chain[4096] = "";
    if (on)
        snprintf(chain, sizeof chain, "%s", on->chain);
    pthread_mutex_unlock(&rl->mu);
    if (on) {
        run(&c, chain, ep, &o);
    } else {
        prefetch_join(&c);
        agent_outcome ign;
        if (ep)
            cJSON_Delete(agent_ep_finish(ep, &ign));
    }
    if (c.pf_ready && c.pf_rc == 0)
        llm_reply_free(&c.pf_reply); /* a stop came before the loop took it */
    llm_free(c.llm);
    cJSON_Delete(c.tokens);
    cJSON_Delete(extra);
    pthread_mutex_lock(&rl->mu);
    if (on)
        on->refs--;
    if (e->stop_efd >= 0)
        close(e->stop_efd);
    e->stop_efd = -1;
    e->env_over = 1; /* a step waiting for it answers */
    rl->generation++;
    pthread_mutex_unlock(&rl->mu);
}

void rl_ep_reward_job(void *arg)
{
    rl_ep *e = arg;
    lis_rl *rl = e->rl;
    rl_spec *s = e->g->spec;
    double score = 0;
    lis_error err = {0};
    int rc = batch_scorer_score(s->scorer, e->answer ? e->answer : "", s->req.task.reward_row,
                                &score, &err);
    pthread_mutex_lock(&rl->mu);
    e->rewarded = 1;
    e->reward = rc == 0 ? score : 0;
    if (rc < 0) {
        e->stage = RST_REWARD;
        snprintf(e->error, sizeof e->error, "%s%s",
                 err.code == ETIMEDOUT ? "the reward timed out (reward 0): " : "", err.msg);
    }
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddNumberToObject(ev, "reward", e->reward);
    if (rc < 0)
        cJSON_AddStringToObject(ev, "error", e->error);
    rl_ep_event(e, "reward", ev);
    e->t_rew1 = lis_now();
    pthread_mutex_unlock(&rl->mu);
}
