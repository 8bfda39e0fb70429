/* env.c - step mode's envs (docs/rl.md, "Step mode"), the run's side: an
 * env is an episode (rl_ep) run by the same run job (episode.c) whose
 * model call publishes the messages the model would see and waits for the
 * trainer's action (e->cv under rl->mu; env_api.c hands it over). Its
 * reward and the snapshot of a branch are jobs on the reward pool that use
 * the live sandbox of an env that waits (its run waits for them before it
 * goes on); the supervisor asks whether an env is idle past its timeout. */
#include "core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* messages[from..] copied. */
static cJSON *tail_of(const cJSON *messages, int from)
{
    cJSON *a = cJSON_CreateArray();
    int n = cJSON_GetArraySize(messages);
    for (int i = from < 0 ? 0 : from; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_Duplicate(cJSON_GetArrayItem(messages, i), 1));
    return a;
}

int rl_env_llm(rl_ep *e, const cJSON *messages, llm_reply *r, lis_error *err)
{
    lis_rl *rl = e->rl;
    /* what is new since the action: the tool replies, "Steps Remaining" included */
    cJSON *obs = tail_of(messages, e->env_seen ? e->env_seen + 1 : 0);
    pthread_mutex_lock(&rl->mu);
    cJSON_Delete(e->env_obs);
    e->env_obs = obs;
    e->env_seen = cJSON_GetArraySize(messages);
    e->env_waiting = 1;
    e->env_touch = lis_now();
    rl->generation++;
    rl_wake(rl); /* its idle timeout starts now */
    pthread_mutex_unlock(&rl->mu);
    rl_notify(rl);
    pthread_mutex_lock(&rl->mu);
    while (!e->abort && (!e->env_action || e->sb_users))
        pthread_cond_wait(&e->cv, &rl->mu);
    cJSON *act = e->env_action;
    e->env_action = NULL;
    e->env_waiting = 0;
    if (act && !e->abort)
        e->env_taken++;
    if (e->abort) {
        cJSON_Delete(act);
        act = NULL;
    }
    cJSON_Delete(e->env_obs); /* the turn's own (rl_env_turn) replaces it */
    e->env_obs = NULL;
    pthread_mutex_unlock(&rl->mu);
    if (!act)
        return lis_fail(err, ECANCELED, "the env was stopped while it waited for an action");
    int rc = llm_reply_from_message(act, r, err);
    cJSON_Delete(act);
    return rc;
}

void rl_env_turn(rl_ep *e, const cJSON *messages)
{
    cJSON_Delete(e->env_obs);
    e->env_obs = tail_of(messages, e->env_seen + 1);
}

int rl_env_idle(const rl_ep *e, double now, double *next)
{
    double idle = e->g->spec->req.idle_timeout;
    if (!e->g->spec->req.step || !e->env_waiting || e->env_action || e->sb_users ||
        e->cancel_asked || idle <= 0)
        return 0; /* not idle: its action is being taken, or a reward or branch runs */
    double at = e->env_touch + idle;
    if (at <= now)
        return 1;
    if (!*next || at < *next)
        *next = at;
    return 0;
}

/* ---- reward and branch: a job on the live sandbox ---------------------- */

typedef struct env_job {
    rl_ep *e;
    int branch; /* a snapshot of the files, else the reward */
    int ran;
} env_job;

/* The snapshot of the files after turn k-1 into e->snaps[k] (one the
 * group kept already stays). Under mu. */
static void keep_snap(lis_rl *rl, rl_ep *e, size_t k, rl_snap *s)
{
    s->next = rl->snaps;
    rl->snaps = s;
    if (k < e->nsnaps && !e->snaps[k])
        e->snaps[k] = s; /* the episode's ref, until it is deleted */
    else
        s->refs = 0; /* the next sweep removes it */
}

static void env_job_run(void *arg)
{
    env_job *j = arg;
    rl_ep *e = j->e;
    lis_rl *rl = e->rl;
    const rl_spec *s = e->g->spec;
    pthread_mutex_lock(&rl->mu);
    lis_sandbox *sb = e->sb; /* kept alive by sb_users */
    size_t k = e->nturns;
    pthread_mutex_unlock(&rl->mu);
    lis_error err = {0};
    double score = 0;
    int rc;
    rl_snap *snap = NULL;
    if (j->branch) {
        lis_snapshot_result res;
        snap = calloc(1, sizeof *snap);
        rc = snap ? lis_rootfs_snapshot(rl->data_dir, sb, NULL, &res, &err)
                  : lis_fail(&err, ENOMEM, "out of memory");
        if (rc == 0) {
            snprintf(snap->digest, sizeof snap->digest, "%s", res.digest);
            snprintf(snap->chain, sizeof snap->chain, "%s", res.rootfs);
            snap->refs = 1;
        }
    } else { /* as the run reads it at its end: a missing file scores "" */
        char *data = NULL, *answer = NULL;
        size_t len = 0;
        lis_error aerr = {0};
        if (lis_file_read(sb, s->req.task.answer_file, 1u << 20, &data, &len, &aerr) == 0)
            answer = agent_clean_output(data, len);
        free(data);
        rc = batch_scorer_score(s->scorer, answer ? answer : "", s->req.task.reward_row, &score,
                                &err);
        free(answer);
    }
    pthread_mutex_lock(&rl->mu);
    if (snap && rc == 0)
        keep_snap(rl, e, k, snap);
    else
        free(snap);
    e->env_reward = rc == 0 ? score : 0;
    snprintf(e->env_job_error, sizeof e->env_job_error, "%s", rc < 0 ? err.msg : "");
    e->env_jobs_done++;
    e->sb_users--;
    e->env_touch = lis_now(); /* its idle time starts again */
    rl_wake(rl);
    j->ran = 1;
    rl->generation++;
    pthread_cond_broadcast(&e->cv); /* its run goes on */
    pthread_mutex_unlock(&rl->mu);
    rl_notify(rl);
}

/* Reaped by the supervisor, under mu. */
static void env_job_done(void *arg, int status)
{
    (void)status;
    env_job *j = arg;
    rl_ep *e = j->e;
    if (!j->ran) { /* cancelled before it started: the server stops */
        snprintf(e->env_job_error, sizeof e->env_job_error, "server stopped");
        e->env_jobs_done++;
        e->sb_users--;
        pthread_cond_broadcast(&e->cv);
    }
    e->rl->scoring--;
    e->rl->generation++;
    free(j);
}

/* A job on e's sandbox (its number in memo), or -1 with err (its
 * http_status). Under mu. */
int rl_env_job_start(lis_rl *rl, rl_ep *e, int branch, char *memo, lis_error *err)
{
    if (!e->env_waiting || e->env_action || !e->sb || e->cancel_asked) {
        lis_fail(err, EBUSY, "env %s does not wait for an action (it is %s)", e->id,
                 rl_phase_name(e->phase));
        err->http_status = 409;
        return -1;
    }
    if (e->env_jobs != e->env_jobs_done) {
        lis_fail(err, EBUSY, "env %s is being scored or branched already", e->id);
        err->http_status = 409;
        return -1;
    }
    env_job *j = calloc(1, sizeof *j);
    if (!j) {
        lis_fail(err, ENOMEM, "out of memory");
        err->http_status = 500;
        return -1;
    }
    j->e = e;
    j->branch = branch;
    if (!lis_jobs_submit(rl->reward_pool, env_job_run, env_job_done, j, err)) {
        free(j);
        err->http_status = 503;
        return -1;
    }
    e->sb_users++;
    rl->scoring++; /* the supervisor reaps it before it stops */
    snprintf(memo, LIS_RL_MEMO, "%ld", ++e->env_jobs);
    return 0;
}
