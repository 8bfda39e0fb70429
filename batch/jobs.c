/* jobs.c - what an episode does that may block, run on a worker thread of
 * the run's pools (lis_jobs) while the event loop (sched.c) goes on: creating
 * and preparing its sandbox, the editor, the --mode llm prompt, and the end: the answer,
 * the sandbox's figures, destroying it, scoring, the row. Each job touches
 * only its own episode; the run's shared parts it uses (the output
 * directory, the scorer) are thread-safe. */
#include "engine.h"
#include "lis_net.h"
#include "rootfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *batch_reason_name(batch_reason r)
{
    switch (r) {
    case R_SUBMITTED: return "submitted";
    case R_MAX_STEPS: return "max_steps";
    case R_TOKEN_LIMIT: return "token_limit";
    case R_DEADLINE: return "deadline";
    case R_LLM_ERROR: return "llm_error";
    case R_SANDBOX_ERROR: return "sandbox_error";
    case R_CANCELLED: return "cancelled";
    case R_POLICY: return "policy";
    case R_PAUSE_FAILED: return "pause_failed";
    case R_SCORER_ERROR: return "scorer_error";
    case R_INPUT_ERROR: return "input_error";
    case R_OTHER: return "other";
    }
    return "other";
}

/* Input files land in input_dir: one file per entry, null contents skipped.
 * original: written to a temporary directory, then copy_dir_to_container. */
static int write_inputs(bep *e, lis_sandbox *sb, lis_error *err)
{
    const cJSON *f;
    const char *dir = e->run->task->prompts.input_dir;
    cJSON_ArrayForEach(f, e->row->input_files)
    {
        if (cJSON_IsNull(f))
            continue;
        char *printed = NULL;
        const char *text = cJSON_IsString(f) ? f->valuestring : (printed = lis_json_print(f, 1));
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, f->string);
        int rc = text ? lis_file_write(sb, path, text, strlen(text), 0644, err) : -1;
        free(printed);
        if (rc < 0)
            return lis_wrap(err, "writing input file %s", path);
    }
    return 0;
}

/* The template's set-up, in the image (agent_prepare_sandbox: the task's
 * directories, `git init` when the image has git). original: setup_env. */
static int template_prepare(void *arg, lis_sandbox *sb, lis_error *err)
{
    brun *r = arg;
    agent_tool_env env;
    return agent_prepare_sandbox(sb, &r->task->prompts, &env, err);
}

/* The run's template (engine.h), made by the first set-up to ask. */
static btemplate_state template_state(brun *r)
{
    btemplate *t = &r->tmpl;
    pthread_mutex_lock(&t->mu);
    if (t->state == TMPL_NONE) {
        lis_sandbox_spec spec = r->spec;
        spec.net = LIS_NET_NONE; /* the set-up reaches no network */
        spec.listen_port = 0;
        lis_snapshot_result snap;
        lis_setup_stage stage;
        lis_error err = {0};
        double t0 = lis_now();
        if (lis_rootfs_snapshot_setup(r->ctx, &spec, template_prepare, r, &snap, &stage, &err) ==
            0) {
            snprintf(t->chain, sizeof t->chain, "%s", snap.rootfs);
            snprintf(t->digest, sizeof t->digest, "%s", snap.digest);
            t->state = TMPL_MADE;
            /* a kill -9 leaves it: the next lis batch command on DIR removes it */
            bleft_template_note(batch_out_dir(r->out), lis_ctx_data_dir(r->ctx), t->digest);
        } else if (stage == LIS_SETUP_PREPARE) { /* what each row's own set-up would say */
            snprintf(t->error, sizeof t->error, "preparing the sandbox: %s", err.msg);
            t->state = TMPL_FAILED;
        } else { /* a snapshot is not possible here: each sandbox as before */
            snprintf(t->error, sizeof t->error, "%s", err.msg);
            t->state = TMPL_UNUSED;
        }
        t->seconds = lis_now() - t0;
    }
    btemplate_state st = t->state;
    pthread_mutex_unlock(&t->mu);
    return st;
}

/* A sandbox ready for any row of the task: created on the template (or,
 * without one, created and its directories made and `git init` run in it). */
static int make_sandbox(brun *r, lis_sandbox **sb, agent_tool_env *env, char *why, size_t wl)
{
    lis_error err = {0};
    *sb = NULL;
    btemplate_state ts = template_state(r);
    if (ts == TMPL_FAILED) {
        snprintf(why, wl, "%s", r->tmpl.error);
        return -1;
    }
    lis_sandbox_spec spec = r->spec;
    if (ts == TMPL_MADE)
        spec.rootfs = r->tmpl.chain;
    lis_monitor *mon = NULL;
    /* with effects, the monitor is attached at once (env->mon; watch.c) */
    if (agent_sandbox_create(r->ctx, &spec, env ? r->o->watch : NULL, sb, &mon, &err) < 0) {
        snprintf(why, wl, "starting the sandbox: %s", err.msg);
        *sb = NULL;
        return -1;
    }
    agent_tool_env tmp, *te = env ? env : &tmp;
    if (ts == TMPL_MADE) {
        agent_tool_env_init(*sb, &r->task->prompts, te);
    } else if (agent_prepare_sandbox(*sb, &r->task->prompts, te, &err) < 0) {
        snprintf(why, wl, "preparing the sandbox: %s", err.msg);
        lis_error ign;
        lis_sandbox_destroy(*sb, &ign);
        lis_monitor_free(mon);
        *sb = NULL;
        return -1;
    }
    if (env) {
        env->mon = mon;
        env->timeout = r->o->cmd_timeout > 0 ? r->o->cmd_timeout : AGENT_CMD_TIMEOUT;
    }
    return 0;
}

void bjob_spare(void *arg)
{
    bspare *s = arg;
    make_sandbox(s->run, &s->sb, &s->env, s->error, sizeof s->error);
}

/* --fork-from-setup: the group's snapshot, made by the first repeat to get
 * here (the others wait for it on the group's lock). */
static int group_snapshot(bep *e)
{
    bgroup *g = e->group;
    brun *r = e->run;
    pthread_mutex_lock(&g->mu);
    if (g->state == G_NOT_MADE) {
        lis_sandbox *t = NULL;
        lis_error err = {0};
        g->state = G_FAILED;
        if (make_sandbox(r, &t, NULL, g->error, sizeof g->error) == 0) { /* not watched */
            lis_snapshot_result snap;
            if (write_inputs(e, t, &err) < 0)
                snprintf(g->error, sizeof g->error, "preparing the sandbox: %s", err.msg);
            else if (lis_rootfs_snapshot(lis_ctx_data_dir(r->ctx), t, NULL, &snap, &err) < 0)
                snprintf(g->error, sizeof g->error, "snapshot of the set-up: %s", err.msg);
            else {
                snprintf(g->chain, sizeof g->chain, "%s", snap.rootfs);
                snprintf(g->digest, sizeof g->digest, "%s", snap.digest);
                g->state = G_MADE;
            }
            lis_error ign;
            lis_sandbox_destroy(t, &ign);
        }
    }
    int ok = g->state == G_MADE;
    if (!ok)
        snprintf(e->setup_error, sizeof e->setup_error, "%s", g->error);
    pthread_mutex_unlock(&g->mu);
    return ok ? 0 : -1;
}

/* One repeat's sandbox: a fork of its row's set-up. */
static void setup_from_group(bep *e)
{
    brun *r = e->run;
    if (group_snapshot(e) < 0)
        return;
    lis_sandbox_spec spec = r->spec;
    spec.rootfs = e->group->chain;
    lis_error err = {0};
    lis_monitor *mon = NULL;
    if (agent_sandbox_create(r->ctx, &spec, r->o->watch, &e->sb, &mon, &err) < 0) {
        snprintf(e->setup_error, sizeof e->setup_error, "starting the forked sandbox: %s", err.msg);
        e->sb = NULL;
        return;
    }
    agent_tool_env_init(e->sb, &r->task->prompts, &e->env);
    e->env.mon = mon;
    e->env.timeout = r->o->cmd_timeout > 0 ? r->o->cmd_timeout : AGENT_CMD_TIMEOUT;
    agent_watch_setup_done(mon); /* the model's first step is step 1 */
}

/* The end of one repeat: the last one of the run removes the snapshot. */
static void group_done(bep *e)
{
    bgroup *g = e->group;
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    if (g->pending && --g->pending == 0 && g->state == G_MADE) {
        lis_error ign;
        lis_rootfs_rm(lis_ctx_data_dir(e->run->ctx), g->digest, NULL, &ign);
        g->state = G_GONE;
    }
    pthread_mutex_unlock(&g->mu);
}

void bjob_setup(void *arg)
{
    bep *e = arg;
    lis_error err = {0};
    if (e->group && !e->sb) {
        setup_from_group(e);
        return;
    }
    if (!e->sb && make_sandbox(e->run, &e->sb, &e->env, e->setup_error, sizeof e->setup_error) < 0)
        return;
    if (write_inputs(e, e->sb, &err) < 0) { /* the row's own files, also into a spare */
        snprintf(e->setup_error, sizeof e->setup_error, "preparing the sandbox: %s", err.msg);
        lis_error ign;
        lis_sandbox_destroy(e->sb, &ign);
        lis_monitor_free(e->env.mon);
        e->env.mon = NULL;
        e->sb = NULL;
        return;
    }
    agent_watch_setup_done(e->env.mon); /* the model's first step is step 1 */
}

void bjob_tool(void *arg)
{
    bep *e = arg;
    const cJSON *params;
    const char *name = agent_ep_tool(e->ep, &params);
    agent_ep_tool_begin(e->ep); /* the step's effects, read here off the loop */
    agent_tool_exec(&e->env, *name ? name : NULL, params, &e->tout);
    agent_ep_tool_end(e->ep, &e->tout);
}

void bjob_fx_end(void *arg)
{
    bep *e = arg;
    agent_ep_tool_end(e->ep, &e->tout); /* the step's file scan, here off the loop */
}

void bjob_reap(void *arg)
{
    bep *e = arg;
    lis_result res = {0};
    lis_error ign;
    if (lis_proc_wait(e->reaping, &res, &ign) == 0)
        lis_result_free(&res);
    e->reaping = NULL;
}

void bjob_prompt(void *arg)
{
    bep *e = arg;
    lis_error err = {0};
    char *p = batch_scorer_prompt(e->run->scorer, e->row->json, &err);
    if (!p) {
        e->reason = R_INPUT_ERROR;
        e->decided = 1;
        snprintf(e->error, sizeof e->error, "vanilla_llm_prompt.py: %s", err.msg);
        return;
    }
    e->plain_msgs = cJSON_CreateArray();
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", p);
    cJSON_AddItemToArray(e->plain_msgs, m);
    if (e->log)
        fprintf(e->log, "Query:\n%s\n\n", p);
    free(p);
}

/* The sandbox's last figures and its end. */
static void close_sandbox(bep *e)
{
    brun *r = e->run;
    lis_error err = {0};
    if (!e->sb)
        return;
    char path[4200];
    snprintf(path, sizeof path, "%s/answer.txt", r->task->prompts.output_dir);
    char *data = NULL;
    size_t len = 0;
    if (!e->answer && lis_file_read(e->sb, path, 1u << 20, &data, &len, &err) == 0) {
        e->answer = agent_strndup(data, len);
        free(data);
    }
    if (r->o->save_files && e->row_fate == ROW_WRITE) {
        /* files/KEY (batch_out_key: the same escaped name as trajectories/ and logs/),
         * made by the copy itself so the output dir's contents land right in it */
        char *key = batch_out_key(e->row->id, e->attempt);
        char dst[4600], parent[4200];
        snprintf(parent, sizeof parent, "%s/files", batch_out_dir(r->out));
        snprintf(dst, sizeof dst, "%s/%s", parent, key ? key : "_");
        free(key);
        /* what the filter or the cap leaves out: in the episode's log and its
         * trajectory's metadata.export_skipped, as lis run's export */
        agent_export_log x = {.log = e->log,
                              .root = r->task->prompts.output_dir,
                              .skipped = cJSON_CreateArray()};
        if (lis_host_mkdir_p(parent, 0755, &err) < 0 ||
            agent_export(e->sb, r->task->prompts.output_dir, dst, r->o->export_max, &x, &err) < 0) {
            if (e->log)
                fprintf(e->log, "lis: warning: could not save %s: %s\n",
                        r->task->prompts.output_dir, err.msg);
        }
        cJSON *md = cJSON_GetObjectItem(e->traj, "metadata");
        if (md && cJSON_GetArraySize(x.skipped))
            cJSON_AddItemToObject(md, "export_skipped", x.skipped);
        else
            cJSON_Delete(x.skipped);
    }
    lis_stats st;
    if (lis_sandbox_stats(e->sb, &st, &err) == 0) {
        e->memory_peak = st.memory_peak ? st.memory_peak : st.memory_bytes;
        e->oom_kills = st.oom_kills;
    }
    if (e->out.memory_peak > e->memory_peak)
        e->memory_peak = e->out.memory_peak;
    if ((uint64_t)e->out.oom_kills > e->oom_kills)
        e->oom_kills = (uint64_t)e->out.oom_kills;
    if (r->spec.net == LIS_NET_PROXY) {
        lis_net_counters c;
        lis_net_sandbox_counters(e->sb, &c);
        e->proxy_bytes = c.bytes_in + c.bytes_out;
    }
    lis_sandbox_destroy(e->sb, &err);
    lis_monitor_free(e->env.mon); /* after its sandbox */
    e->env.mon = NULL;
    e->sb = NULL;
}

static char *trim(const char *s)
{
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    return agent_strndup(s, n);
}

static cJSON *make_row(bep *e, double wall)
{
    brun *r = e->run;
    cJSON *row = cJSON_CreateObject();
    cJSON_AddStringToObject(row, "id", e->row->id);
    cJSON_AddNumberToObject(row, "attempt", e->attempt);
    cJSON_AddNumberToObject(row, "score", e->score);
    cJSON_AddStringToObject(row, "answer", e->answer ? e->answer : "");
    cJSON_AddItemToObject(row, "ground_truth",
                          e->row->ground_truth ? cJSON_Duplicate(e->row->ground_truth, 1)
                                               : cJSON_CreateNull());
    cJSON_AddStringToObject(row, "problem_statement", e->row->problem_statement);
    cJSON_AddStringToObject(row, "reason", batch_reason_name(e->reason));
    if (e->error[0])
        cJSON_AddStringToObject(row, "error", e->error);
    else
        cJSON_AddNullToObject(row, "error");
    cJSON_AddNumberToObject(row, "steps", e->out.steps);
    cJSON_AddNumberToObject(row, "prompt_tokens", (double)e->out.prompt_tokens);
    cJSON_AddNumberToObject(row, "completion_tokens", (double)e->out.completion_tokens);
    cJSON_AddNumberToObject(row, "llm_seconds", e->out.llm_seconds);
    cJSON_AddNumberToObject(row, "tool_seconds", e->out.tool_seconds);
    cJSON_AddNumberToObject(row, "wall_seconds", wall);
    cJSON_AddNumberToObject(row, "memory_peak", (double)e->memory_peak);
    cJSON_AddNumberToObject(row, "oom_kills", (double)e->oom_kills);
    cJSON_AddNumberToObject(row, "proxy_bytes", (double)e->proxy_bytes);
    cJSON_AddStringToObject(row, "scorer", r->scorer ? batch_scorer_name(r->scorer) : "");
    cJSON_AddStringToObject(row, "scorer_sha256", r->scorer ? batch_scorer_sha256(r->scorer) : "");
    bfx_row(row, e->row->json, e->traj); /* domain, capability, alerts (effects.c) */
    return row;
}

void bjob_finish(void *arg)
{
    bep *e = arg;
    brun *r = e->run;
    lis_error err = {0};
    if (e->ep) {
        e->traj = agent_ep_finish(e->ep, &e->out);
        e->ep = NULL;
        if (!e->decided) { /* not decided by the loop: the engine's reason */
            e->reason = (batch_reason)e->out.stop;
            e->decided = 1;
            snprintf(e->error, sizeof e->error, "%s", e->out.error);
        }
    }
    if (!e->decided) {
        e->reason = R_OTHER;
        e->decided = 1;
    }
    bfx_between(e); /* before the sandbox and its monitor go */
    close_sandbox(e);
    group_done(e);
    if (e->row_fate != ROW_WRITE)
        return;
    if (e->answer) { /* original: the runner strips it; and valid UTF-8 for the row */
        char *c = agent_clean_output(e->answer, strlen(e->answer));
        char *t = trim(c ? c : "");
        free(c);
        free(e->answer);
        e->answer = t;
    }
    /* original: a finished agent (submitted, out of steps or tokens) gets its
     * answer scored; an exception or a timeout scores 0 */
    e->score = 0;
    if (e->reason == R_SUBMITTED || e->reason == R_MAX_STEPS || e->reason == R_TOKEN_LIMIT) {
        double s = 0;
        if (batch_scorer_score(r->scorer, e->answer ? e->answer : "", e->row->json, &s, &err) < 0) {
            e->reason = R_SCORER_ERROR;
            snprintf(e->error, sizeof e->error, "%s", err.msg);
        } else {
            e->score = s;
        }
    }
    double wall = lis_now() - e->t0;
    if (e->log) {
        fprintf(e->log, "\n%s\n### Result ###\nProblem ID: %s\nAgent Answer: %s\n",
                "================================================================================",
                e->row->id, e->answer ? e->answer : "");
        char *gt = e->row->ground_truth ? (cJSON_IsString(e->row->ground_truth)
                                               ? agent_strdup(e->row->ground_truth->valuestring)
                                               : lis_json_print(e->row->ground_truth, 0))
                                        : agent_strdup("");
        fprintf(e->log, "Ground Truth: %s\nScore: %.4f\nReason: %s%s%s\n%s\n", gt ? gt : "",
                e->score, batch_reason_name(e->reason), e->error[0] ? ": " : "", e->error,
                "================================================================================");
        free(gt);
        fflush(e->log);
    }
    cJSON *row = make_row(e, wall);
    if (batch_out_append(r->out, row, e->traj, e->log_buf, &err) < 0) {
        /* the loop stops the run: results that cannot be kept are worth nothing */
        snprintf(e->error, sizeof e->error, "writing the result: %s", err.msg);
        e->row_fate = ROW_WRITE_FAILED;
    }
    cJSON_Delete(row);
}
