/* group.c - a group of the episodes API: its task and scorer (rl_spec,
 * shared with the branches of its episodes), its n episodes, and its set-up:
 * a sandbox of the task's image in which the files are written, the task's
 * directories made (agent_prepare_sandbox, as `lis run` and `lis batch` do)
 * and the set-up commands run once, then snapshot for the n forks. */
#include "core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static void prompts_free(agent_prompts *p)
{
    agent_prompts_free(p);
    memset(p, 0, sizeof *p);
}

/* task.prompts over the original's config/general.yaml. */
static int prompts_from(const rl_task *t, agent_prompts *p, lis_error *err)
{
    if (agent_prompts_default(p) < 0)
        return lis_fail(err, ENOMEM, "the default prompts");
    static const char *keys[] = {"system_prompt", "instance_prompt", "working_dir", "input_dir",
                                 "output_dir"};
    char **slots[] = {&p->system_prompt, &p->instance_prompt, &p->working_dir, &p->input_dir,
                      &p->output_dir};
    for (size_t i = 0; i < 5; i++) {
        const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t->prompts, keys[i]));
        if (!v)
            continue;
        char *d = strdup(v);
        if (!d) {
            prompts_free(p);
            return lis_fail(err, ENOMEM, "the task's prompts");
        }
        free(*slots[i]);
        *slots[i] = d;
    }
    return 0;
}

rl_spec *rl_spec_new(rl_request *req, lis_error *err)
{
    rl_spec *s = calloc(1, sizeof *s);
    if (!s) {
        rl_request_free(req);
        lis_fail(err, ENOMEM, "a group");
        return NULL;
    }
    s->refs = 1;
    s->req = *req;
    memset(req, 0, sizeof *req);
    if (prompts_from(&s->req.task, &s->prompts, err) < 0) {
        rl_spec_unref(s);
        return NULL;
    }
    /* a built-in or a command opens at once (a bad name is the trainer's 4xx);
     * a reward.py starts its Python worker: on the set-up's thread */
    const char *sc = s->req.task.scorer;
    if (sc && strncmp(sc, "python:", 7) && rl_spec_open_scorer(s, err) < 0) {
        err->http_status = 422; /* the trainer's to fix */
        rl_spec_unref(s);
        return NULL;
    }
    return s;
}

int rl_spec_open_scorer(rl_spec *s, lis_error *err)
{
    const char *sc = s->req.task.scorer;
    if (!sc || s->scorer)
        return 0;
    batch_scorer_opts so = {.scorer = sc, .timeout = s->req.task.reward_timeout};
    char dir[4096] = "";
    if (!strncmp(sc, "python:", 7)) { /* a task folder's reward.py */
        snprintf(dir, sizeof dir, "%s", sc + 7);
        char *slash = strrchr(dir, '/');
        if (slash && !strcmp(slash, "/reward.py"))
            *slash = 0;
        so.task_dir = dir;
        so.scorer = "python";
    } else if (!strncmp(sc, "cmd:", 4)) { /* as results rows name it; --scorer takes the command */
        so.scorer = sc + 4;
    }
    if (batch_scorer_open(&so, &s->scorer, err) < 0)
        return lis_wrap(err, "task.reward.scorer %s", sc);
    return 0;
}

void rl_spec_unref(rl_spec *s)
{
    if (!s || --s->refs > 0)
        return;
    if (s->scorer)
        batch_scorer_close(s->scorer);
    prompts_free(&s->prompts);
    rl_request_free(&s->req);
    free(s);
}

void rl_id_make(lis_rl *rl, char prefix, char out[RL_ID_LEN])
{
    unsigned char r[8] = {0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) { /* the sequence keeps it unique */
    }
    snprintf(out, RL_ID_LEN, "%c-%02x%02x%02x%02x%02x%02x%02x%02x%04lx", prefix, r[0], r[1], r[2],
             r[3], r[4], r[5], r[6], r[7], ++rl->seq & 0xffff);
}

/* What an episode holds besides its struct (a deleted one keeps only that). */
void rl_ep_drop(rl_ep *e)
{
    for (size_t i = 0; i < e->nturns; i++) {
        cJSON_Delete(e->turns[i].step);
        cJSON_Delete(e->turns[i].tokens);
        cJSON_Delete(e->turns[i].tail);
    }
    free(e->turns);
    e->turns = NULL;
    e->nturns = e->capturns = 0;
    for (size_t i = 0; i < e->nevents; i++)
        cJSON_Delete(e->events[i].data);
    free(e->events);
    e->events = NULL;
    e->nevents = 0;
    cJSON_Delete(e->messages);
    cJSON_Delete(e->result);
    cJSON_Delete(e->sampling);
    cJSON_Delete(e->start_messages);
    cJSON_Delete(e->env_obs);
    cJSON_Delete(e->env_action);
    e->messages = e->result = e->sampling = e->start_messages = NULL;
    e->env_obs = e->env_action = NULL;
    free(e->answer);
    e->answer = NULL;
}

static void ep_free(rl_ep *e)
{
    rl_ep_drop(e);
    free(e->snaps);
    pthread_cond_destroy(&e->cv);
    free(e);
}

void rl_group_free(rl_group *g)
{
    for (size_t i = 0; i < g->n; i++)
        ep_free(g->eps[i]);
    free(g->eps);
    rl_spec_unref(g->spec);
    pthread_cond_destroy(&g->cv);
    free(g);
}

rl_group *rl_group_new(lis_rl *rl, rl_spec *spec, int n, lis_error *err)
{
    rl_group *g = calloc(1, sizeof *g);
    rl_ep **eps = calloc((size_t)n, sizeof *eps);
    if (!g || !eps) {
        free(g);
        free(eps);
        lis_fail(err, ENOMEM, "a group of %d", n);
        return NULL;
    }
    g->rl = rl;
    pthread_cond_init(&g->cv, NULL);
    g->spec = spec;
    spec->refs++;
    g->eps = eps;
    g->deadline_s = spec->req.deadline_s;
    g->t_submit = lis_now();
    rl_id_make(rl, 'g', g->id);
    for (int i = 0; i < n; i++) {
        rl_ep *e = calloc(1, sizeof *e);
        if (!e) {
            lis_fail(err, ENOMEM, "a group of %d", n);
            break;
        }
        e->rl = rl;
        e->g = g;
        e->index = i;
        e->at_step = -1;
        e->stop_efd = -1;
        pthread_cond_init(&e->cv, NULL);
        e->t_submit = g->t_submit;
        e->nsnaps = (size_t)spec->req.max_steps + 1;
        e->snaps = calloc(e->nsnaps, sizeof *e->snaps);
        if (!e->snaps) {
            pthread_cond_destroy(&e->cv);
            free(e);
            lis_fail(err, ENOMEM, "a group of %d", n);
            break;
        }
        rl_id_make(rl, 'e', e->id);
        if (spec->req.seeds && i < spec->req.n) { /* a branch's own seeds come later */
            e->seed = spec->req.seeds[i];
            e->has_seed = 1;
        }
        eps[g->n++] = e;
    }
    if (g->n < (size_t)n) {
        for (size_t i = 0; i < g->n; i++) {
            free(eps[i]->snaps);
            pthread_cond_destroy(&eps[i]->cv);
            free(eps[i]);
        }
        free(eps);
        rl_spec_unref(spec);
        pthread_cond_destroy(&g->cv);
        free(g);
        return NULL;
    }
    return g;
}

/* One file of the task: parents made by lis_file_write. */
static int write_files(lis_sandbox *sb, const rl_task *t, lis_error *err)
{
    for (size_t i = 0; i < t->nfiles; i++)
        if (lis_file_write(sb, t->files[i].path, t->files[i].data, t->files[i].len, 0644, err) < 0)
            return lis_wrap(err, "writing task.files %s", t->files[i].path);
    return 0;
}

/* The set-up commands, in order, in working_dir; the first that fails ends
 * the set-up with its status and the tail of what it printed. */
static int run_setup(lis_sandbox *sb, const rl_group *g, lis_error *err)
{
    const rl_spec *s = g->spec;
    const rl_task *t = &s->req.task;
    for (size_t i = 0; i < t->nsetup; i++) {
        double limit = t->setup_timeout > 0 ? t->setup_timeout : 600;
        if (g->deadline_s > 0) { /* the deadline counts the set-up too */
            double left = g->t_setup0 + g->deadline_s - lis_now();
            if (left <= 0)
                return lis_fail(err, ETIMEDOUT, "the deadline passed during the set-up");
            if (left < limit)
                limit = left;
        }
        lis_exec_spec x = {.shell = t->setup[i],
                           .cwd = s->prompts.working_dir,
                           .out = LIS_STDIO_CAPTURE,
                           .err = LIS_STDIO_CAPTURE,
                           .out_cap = 4096,
                           .timeout = limit};
        lis_result r = {0};
        if (lis_exec(sb, &x, &r, err) < 0)
            return lis_wrap(err, "task.setup[%zu]", i);
        int code = r.exit_code;
        char tail[300];
        const lis_buf *b = r.err.len ? &r.err : &r.out;
        size_t from = b->len > 200 ? b->len - 200 : 0;
        char *clean = agent_clean_output(b->data ? b->data + from : "", b->len - from);
        snprintf(tail, sizeof tail, "%s", clean ? clean : "");
        free(clean);
        for (char *p = tail; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
        int timed_out = r.timed_out;
        lis_result_free(&r);
        if (timed_out)
            return lis_fail(err, ETIMEDOUT, "task.setup[%zu] did not end in %.0f s (killed)", i,
                            x.timeout);
        if (code != 0)
            return lis_fail(err, EIO, "task.setup[%zu] exited with status %d: %s", i, code, tail);
    }
    return 0;
}

static int setup_prepare(void *arg, lis_sandbox *sb, lis_error *err)
{
    rl_group *g = arg;
    agent_tool_env env;
    if (agent_prepare_sandbox(sb, &g->spec->prompts, &env, err) < 0)
        return -1;
    if (write_files(sb, &g->spec->req.task, err) < 0)
        return -1;
    return run_setup(sb, g, err);
}

/* The spec of a sandbox of this server's episodes on rootfs. */
void rl_sandbox_spec(const lis_rl *rl, const char *rootfs, lis_sandbox_spec *spec)
{
    *spec = (lis_sandbox_spec){.rootfs = rootfs,
                               .net = rl->o.net,
                               .upper = LIS_UPPER_TMPFS,
                               .limits = rl->o.limits};
}

/* A setup-pool job: the group's set-up made and snapshot. */
void rl_group_setup_job(void *arg)
{
    rl_group *g = arg;
    lis_rl *rl = g->rl;
    lis_error serr = {0};
    if (rl_spec_open_scorer(g->spec, &serr) < 0) {
        snprintf(g->error, sizeof g->error, "%s", serr.msg);
        return;
    }
    const char *image = g->spec->req.task.image ? g->spec->req.task.image : rl->default_image;
    char rootfs[4096];
    lis_error err = {0};
    if (lis_store_resolve(rl->data_dir, image, rootfs, sizeof rootfs, &err) < 0) {
        snprintf(g->error, sizeof g->error, "task.image %s: %s", image, err.msg);
        return;
    }
    lis_sandbox_spec spec;
    rl_sandbox_spec(rl, rootfs, &spec);
    lis_snapshot_result res;
    lis_setup_stage stage;
    if (lis_rootfs_snapshot_setup(rl->o.ctx, &spec, setup_prepare, g, &res, &stage, &err) < 0) {
        snprintf(g->error, sizeof g->error, "%s%s",
                 stage == LIS_SETUP_CREATE ? "the sandbox: " : "", err.msg);
        return;
    }
    rl_snap *s = calloc(1, sizeof *s);
    pthread_mutex_lock(&rl->mu);
    if (s) {
        snprintf(s->digest, sizeof s->digest, "%s", res.digest);
        snprintf(s->chain, sizeof s->chain, "%s", res.rootfs);
        s->refs = 1; /* the group's, until its last episode ends */
        s->next = rl->snaps;
        rl->snaps = s;
        g->setup = s;
    } else {
        snprintf(g->error, sizeof g->error, "out of memory");
    }
    pthread_mutex_unlock(&rl->mu);
    if (!s) {
        lis_error ign;
        lis_rootfs_rm(rl->data_dir, res.digest, NULL, &ign);
    }
}
