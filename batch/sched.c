/* sched.c - what the event loop of lis batch (loop.c; engine.h says the
 * design) does with each event: admits episodes under the run's bounds,
 * drives each one's engine (agent_ep) from the LLM replies, command
 * completions and finished jobs, and stops episodes (deadlines, Ctrl-C, fatal
 * errors). Everything here runs on the loop's thread and never blocks. */
#include "engine.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

static void drive(bep *e);
static void try_finish(bep *e);
static void fx_done(void *arg, int status);

/* ---- wait lists (lazy: an entry no longer waiting is skipped) --------- */

static void list_push(bep_list *l, bep *e)
{
    e->next_wait = NULL;
    if (l->tail)
        l->tail->next_wait = e;
    else
        l->head = e;
    l->tail = e;
}

static bep *list_pop(bep_list *l)
{
    bep *e = l->head;
    if (e) {
        l->head = e->next_wait;
        if (!l->head)
            l->tail = NULL;
        e->next_wait = NULL;
    }
    return e;
}

/* ---- LLM requests on the multi handle --------------------------------- */

/* Removes fd from the loop's set. ENOENT and EBADF mean it is gone already
 * (curl may close a socket before it says so); anything else is a bug worth
 * a line, though closing the fd removes it from the set anyway. */
void bsched_forget(brun *r, int fd)
{
    if (epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL) < 0 && errno != ENOENT && errno != EBADF)
        fprintf(r->o->err, "lis: warning: epoll_ctl(DEL, %d): %s\n", fd, strerror(errno));
}

void bsched_llm_start(bep *e)
{
    brun *r = e->run;
    if (r->llm_inflight >= (size_t)r->o->max_llm) {
        e->lq = LQ_WAITING;
        list_push(&r->llm_wait, e);
        return;
    }
    lis_error err = {0};
    if (!e->call) {
        const cJSON *msgs = e->ep ? agent_ep_messages(e->ep) : e->plain_msgs;
        const cJSON *tools = e->ep ? agent_ep_tools(e->ep) : NULL;
        e->call = llm_call_new(r->llm, msgs, tools, 1, &err);
        if (e->call)
            llm_call_set_log(e->call, e->log);
    }
    CURL *h = e->call ? llm_call_attempt(e->call, &err) : NULL;
    if (!h || curl_multi_add_handle(r->multi, h) != CURLM_OK) {
        llm_call_free(e->call);
        e->call = NULL;
        e->lq = LQ_NONE;
        if (!err.msg[0])
            snprintf(err.msg, sizeof err.msg, "cannot start the LLM request");
        if (e->ep) {
            agent_ep_llm_failed(e->ep, err.msg);
            drive(e);
        } else {
            e->reason = R_LLM_ERROR;
            e->decided = 1;
            snprintf(e->error, sizeof e->error, "%s", err.msg);
            try_finish(e);
        }
        return;
    }
    curl_easy_setopt(h, CURLOPT_PRIVATE, e);
    e->lq = LQ_FLIGHT;
    r->llm_inflight++;
}

static void llm_slot_freed(brun *r)
{
    while (r->llm_inflight < (size_t)r->o->max_llm) {
        bep *w = list_pop(&r->llm_wait);
        if (!w)
            break;
        if (w->lq == LQ_WAITING && w->phase == EP_LIVE && !w->stopped)
            bsched_llm_start(w);
    }
}

static void llm_cancel(bep *e)
{
    brun *r = e->run;
    if (e->lq == LQ_FLIGHT) {
        curl_multi_remove_handle(r->multi, llm_call_handle(e->call));
        r->llm_inflight--;
    }
    if (e->lq == LQ_RETRY)
        r->retrying--;
    llm_call_free(e->call);
    e->call = NULL;
    e->lq = LQ_NONE;
}

static void run_fatal(brun *r, const char *reason, const char *msg);
/* What would fail every row: stop the run rather than burn through it. */
static int is_fatal(const brun *r, const lis_error *err)
{
    if (err->http_status == 401 || err->http_status == 403 || err->http_status == 404 ||
        err->code == EPROTO) /* EPROTO: not an API endpoint at all (llm.c) */
        return 1;
    return err->code == EHOSTUNREACH && !r->llm_ok; /* unreachable before anything worked */
}

static void llm_done(brun *r, CURL *h, CURLcode rc)
{
    bep *e = NULL;
    curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&e);
    curl_multi_remove_handle(r->multi, h);
    r->llm_inflight--;
    llm_reply reply;
    double wait = 0;
    lis_error err = {0};
    int res = llm_call_result(e->call, rc, &reply, &wait, &err);
    if (res == LLM_CALL_RETRY) {
        e->lq = LQ_RETRY;
        e->retry_at = lis_now() + wait;
        r->retrying++;
        return;
    }
    llm_call_free(e->call);
    e->call = NULL;
    e->lq = LQ_NONE;
    if (res == LLM_CALL_DONE) {
        r->llm_ok = 1;
        r->replies++;
        if (reply.usage.known) {
            r->tokens_in += reply.usage.prompt_tokens;
            r->tokens_out += reply.usage.completion_tokens;
        }
        r->llm_seconds += reply.seconds;
        if (e->ep) {
            agent_ep_llm_reply(e->ep, &reply);
            drive(e);
        } else { /* --mode llm: the reply is the answer */
            e->answer = agent_strdup(reply.content);
            e->out.steps = 1;
            e->out.llm_seconds = reply.seconds;
            e->out.prompt_tokens = reply.usage.prompt_tokens;
            e->out.completion_tokens = reply.usage.completion_tokens;
            e->reason = R_SUBMITTED;
            e->decided = 1;
            if (e->log)
                fprintf(e->log, "Response:\n%s\n", reply.content);
            llm_reply_free(&reply);
            try_finish(e);
        }
        return;
    }
    if (is_fatal(r, &err)) {
        char why[32];
        if (err.code == EPROTO)
            snprintf(why, sizeof why, "not_an_api");
        else if (err.http_status)
            snprintf(why, sizeof why, "http_%d", err.http_status);
        else
            snprintf(why, sizeof why, "unreachable");
        run_fatal(r, why, err.msg);
        return;
    }
    if (e->ep) {
        agent_ep_llm_failed(e->ep, err.msg);
        drive(e);
    } else {
        e->reason = R_LLM_ERROR;
        e->decided = 1;
        snprintf(e->error, sizeof e->error, "%s", err.msg);
        try_finish(e);
    }
}

void bsched_llm_reap(brun *r)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(r->multi, &left)))
        if (m->msg == CURLMSG_DONE)
            llm_done(r, m->easy_handle, m->data.result);
    llm_slot_freed(r);
}

/* ---- commands ---------------------------------------------------------- */

/* A command whose fd the loop could not watch, reaped by bjob_reap. */
static void reap_done(void *arg, int status)
{
    bep *e = arg;
    e->in_job = 0;
    free(e->bash_printed);
    e->bash_printed = NULL;
    if (e->stopped) {
        try_finish(e);
        return;
    }
    lis_result res = {0};
    agent_tool_out t = {0};
    agent_bash_observe(&e->env, &e->bash, -1, &res, &e->cmd_err, &t);
    agent_ep_tool_done(e->ep, &t);
    drive(e);
}

static void cmd_start(bep *e, const char *cmd)
{
    brun *r = e->run;
    if (r->commands >= (size_t)r->o->max_commands) {
        e->wants_cmd = 1;
        list_push(&r->cmd_wait, e);
        return;
    }
    e->wants_cmd = 0;
    agent_bash_prepare(&e->env, cmd, &e->bash);
    lis_error err = {0};
    agent_ep_tool_begin(e->ep); /* the step's effects start here (agent_ep_tool_done ends it) */
    e->cmd_t0 = lis_now();
    if (lis_exec_start(e->sb, &e->bash.spec, &e->proc, &err) < 0) {
        lis_result res = {0};
        agent_tool_out t = {0};
        agent_bash_observe(&e->env, &e->bash, -1, &res, &err, &t);
        free(e->bash_printed);
        e->bash_printed = NULL;
        agent_ep_tool_done(e->ep, &t);
        drive(e);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG(K_PROC, e->index)};
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, lis_proc_fd(e->proc), &ev) < 0) {
        /* unwatched, it would never end and nor would the run: kill it and
         * reap it on a worker; the model sees the command fail */
        lis_fail_errno(&e->cmd_err, "cannot watch the command (epoll_ctl)");
        lis_proc_signal(e->proc, SIGKILL, &err);
        e->reaping = e->proc; /* the job's alone from here */
        e->proc = NULL;
        e->in_job = 1;
        if (!lis_jobs_submit(r->misc, bjob_reap, reap_done, e, &err)) {
            bjob_reap(e); /* out of memory for a job: the command is killed, this is short */
            reap_done(e, 0);
        }
        return;
    }
    r->commands++;
}

static void cmd_slot_freed(brun *r)
{
    while (r->commands < (size_t)r->o->max_commands) {
        bep *w = list_pop(&r->cmd_wait);
        if (!w)
            break;
        if (w->wants_cmd && w->phase == EP_LIVE && !w->stopped) {
            const cJSON *params;
            const char *name = agent_ep_tool(w->ep, &params);
            free(w->bash_printed);
            const char *cmd = agent_bash_command(name, params, &w->bash_printed);
            cmd_start(w, cmd ? cmd : "true");
        }
    }
}

void bsched_cmd_event(brun *r, bep *e)
{
    lis_error err = {0};
    if (!e->proc)
        return;
    int rc = lis_proc_step(e->proc, &err);
    if (rc == 0)
        return;
    bsched_forget(r, lis_proc_fd(e->proc));
    lis_result res = {0};
    int wrc = lis_proc_wait(e->proc, &res, &err);
    e->proc = NULL;
    r->commands--;
    double secs = lis_now() - e->cmd_t0;
    r->tool_seconds += secs;
    if (e->stopped) {
        if (wrc == 0)
            lis_result_free(&res);
        free(e->bash_printed);
        e->bash_printed = NULL;
        try_finish(e);
    } else {
        agent_tool_out t = {0};
        t.exec_seconds = secs;
        agent_bash_observe(&e->env, &e->bash, rc < 0 ? -1 : wrc, &res, &err, &t);
        if (wrc == 0)
            lis_result_free(&res);
        free(e->bash_printed);
        e->bash_printed = NULL;
        /* the step's end (its file scan) on a worker, off the loop */
        e->tout = t;
        e->in_job = 1;
        if (!lis_jobs_submit(r->misc, bjob_fx_end, fx_done, e, &err)) {
            e->in_job = 0;
            agent_ep_tool_done(e->ep, &e->tout);
            drive(e);
        }
    }
    cmd_slot_freed(r);
}

/* ---- jobs on the pools -------------------------------------------------- */

static void setup_start(bep *e);

static void spare_done(void *arg, int status)
{
    bspare *s = arg;
    brun *r = s->run;
    r->spares_creating--;
    r->creating--;
    if (!s->sb || r->nspares >= sizeof r->spares / sizeof r->spares[0] || r->draining || r->fatal) {
        if (s->sb) {
            lis_error ign;
            lis_sandbox_destroy(s->sb, &ign);
            lis_monitor_free(s->env.mon);
        }
        free(s); /* a failed spare is no row's error: the row makes its own */
        return;
    }
    r->spares[r->nspares++] = s;
    r->spares_made++;
    /* a row may be waiting for a set-up slot: it takes the spare now */
    bep *w;
    while (r->nspares && (w = list_pop(&r->setup_wait)))
        if (w->sbs == SB_NONE && w->phase == EP_LIVE && !w->stopped)
            setup_start(w);
}

/* Keeps up to r->warm sandboxes ready while rows wait for admission, with
 * set-up slots left over by the live episodes. */
static void spare_top_up(brun *r)
{
    while (r->warm && !r->draining && !r->fatal && !r->setup_wait.head &&
           r->nspares + r->spares_creating < r->warm &&
           r->next + r->nspares + r->spares_creating < r->neps && r->creating < r->creators) {
        bspare *s = calloc(1, sizeof *s);
        lis_error err = {0};
        if (!s)
            return;
        s->run = r;
        if (!lis_jobs_submit(r->setup, bjob_spare, spare_done, s, &err)) {
            free(s);
            return;
        }
        r->spares_creating++;
        r->creating++;
    }
}

static void setup_done(void *arg, int status)
{
    bep *e = arg;
    brun *r = e->run;
    e->in_job = 0;
    r->creating--;
    if (e->sb) {
        e->sbs = SB_READY;
        bfx_watch(e); /* its monitor's live actions */
    } else {
        e->sbs = SB_FAILED;
        if (!e->stopped) {
            /* nothing can run without it: no more LLM calls for this row */
            llm_cancel(e);
            e->stopped = 1;
            e->stop_reason = AGENT_STOP_SANDBOX_ERROR;
            snprintf(e->stop_error, sizeof e->stop_error, "%s", e->setup_error);
        }
    }
    if (e->stopped)
        try_finish(e);
    else if (e->wants_tool) {
        e->wants_tool = 0;
        drive(e);
    }
    while (r->creating < r->creators) {
        bep *w = list_pop(&r->setup_wait);
        if (!w)
            break;
        if (w->sbs == SB_NONE && w->phase == EP_LIVE && !w->stopped)
            setup_start(w);
    }
}

static void spare_top_up(brun *r);

static void setup_start(bep *e)
{
    brun *r = e->run;
    if (r->nspares) { /* the warm pool: only the row's files are left to write */
        bspare *s = r->spares[--r->nspares];
        r->spares_used++;
        e->sb = s->sb;
        e->env = s->env;
        free(s);
        lis_error err = {0};
        e->sbs = SB_CREATING;
        e->in_job = 1;
        r->creating++;
        if (!lis_jobs_submit(r->setup, bjob_setup, setup_done, e, &err)) {
            lis_sandbox_destroy(e->sb, &err);
            e->sb = NULL;
            snprintf(e->setup_error, sizeof e->setup_error, "out of memory");
            setup_done(e, 0);
        }
        spare_top_up(r);
        return;
    }
    if (r->creating >= r->creators) {
        list_push(&r->setup_wait, e);
        return;
    }
    lis_error err = {0};
    e->sbs = SB_CREATING;
    e->in_job = 1;
    r->creating++;
    if (!lis_jobs_submit(r->setup, bjob_setup, setup_done, e, &err)) {
        snprintf(e->setup_error, sizeof e->setup_error, "%s", err.msg);
        setup_done(e, 0);
    }
}

/* A command's step closed by bjob_fx_end: recorded, the episode goes on. */
static void fx_done(void *arg, int status)
{
    bep *e = arg;
    e->in_job = 0;
    agent_ep_tool_done(e->ep, &e->tout);
    if (e->stopped)
        try_finish(e);
    else
        drive(e);
}

static void tool_done(void *arg, int status)
{
    bep *e = arg;
    e->in_job = 0;
    e->run->tool_seconds += e->tout.exec_seconds;
    agent_ep_tool_done(e->ep, &e->tout);
    if (e->stopped)
        try_finish(e);
    else
        drive(e);
}

static void prompt_done(void *arg, int status)
{
    bep *e = arg;
    e->in_job = 0;
    if (e->stopped || !e->plain_msgs)
        try_finish(e);
    else
        bsched_llm_start(e);
}

static void finish_done(void *arg, int status)
{
    bep *e = arg;
    brun *r = e->run;
    e->phase = EP_DONE;
    r->live--;
    if (e->row_fate == ROW_WRITE_FAILED && !r->fatal) {
        snprintf(r->write_error, sizeof r->write_error, "%s", e->error);
        run_fatal(r, "write_failed", e->error);
    }
    switch (e->row_fate) {
    case ROW_WRITE:
        r->done++;
        r->by_reason[e->reason]++;
        if (e->reason != R_SUBMITTED && e->reason != R_MAX_STEPS && e->reason != R_TOKEN_LIMIT)
            r->errors++;
        r->score_sum += e->score;
        if (e->reason == R_SCORER_ERROR && !r->scorer_error[0])
            snprintf(r->scorer_error, sizeof r->scorer_error, "%s", e->error);
        break;
    case ROW_CANCELLED: r->by_reason[R_CANCELLED]++; break;
    case ROW_WRITE_FAILED: break;
    }
    if (e->log)
        fclose(e->log);
    free(e->log_buf);
    e->log = NULL;
    e->log_buf = NULL;
    cJSON_Delete(e->traj);
    e->traj = NULL;
    free(e->answer);
    e->answer = NULL;
    cJSON_Delete(e->plain_msgs);
    e->plain_msgs = NULL;
    bfx_release(e);
    bsched_admit(r);
}

/* Ends the episode once nothing of it is in flight. */
static void try_finish(bep *e)
{
    brun *r = e->run;
    if (e->phase != EP_LIVE || e->proc || e->in_job || e->pausing || e->lq == LQ_FLIGHT)
        return;
    if (e->lq != LQ_NONE)
        llm_cancel(e);
    if (e->stopped) {
        if (e->ep)
            agent_ep_stop(e->ep, e->stop_reason, e->stop_error);
        if (e->stop_reason == AGENT_STOP_CANCELLED) {
            e->row_fate = ROW_CANCELLED;
        } else if (!e->decided) {
            e->reason = (batch_reason)e->stop_reason;
            e->decided = 1;
            snprintf(e->error, sizeof e->error, "%s", e->stop_error);
        }
    }
    e->phase = EP_FINISHING;
    e->in_job = 1;
    lis_error err = {0};
    if (!lis_jobs_submit(r->misc, bjob_finish, finish_done, e, &err)) {
        bjob_finish(e); /* out of memory for a job: do it here, once */
        finish_done(e, 0);
    }
}

/* Stops a live episode early: deadline, Ctrl-C, a fatal error. */
void bsched_stop(bep *e, agent_stop reason, const char *error)
{
    if (e->phase != EP_LIVE || e->stopped)
        return;
    e->stopped = 1;
    e->stop_reason = reason;
    snprintf(e->stop_error, sizeof e->stop_error, "%s", error);
    if (e->lq != LQ_NONE)
        llm_cancel(e);
    e->wants_cmd = e->wants_tool = 0;
    if (e->proc) {
        lis_error ign;
        lis_proc_signal(e->proc, SIGKILL, &ign);
        e->kill_at = lis_now() + 5;
    }
    try_finish(e);
}

void bsched_try_finish(bep *e) { try_finish(e); }

void bsched_drive(bep *e) { drive(e); }

static void drive(bep *e)
{
    brun *r = e->run;
    if (e->phase != EP_LIVE || e->stopped || bfx_held(e)) /* paused: resuming drives it */
        return;
    switch (agent_ep_next(e->ep)) {
    case AGENT_EP_LLM: bsched_llm_start(e); break;
    case AGENT_EP_TOOL: {
        if (e->sbs == SB_NONE || e->sbs == SB_CREATING) {
            e->wants_tool = 1;
            break;
        }
        const cJSON *params;
        const char *name = agent_ep_tool(e->ep, &params);
        free(e->bash_printed);
        const char *cmd = agent_bash_command(name, params, &e->bash_printed);
        if (cmd) {
            cmd_start(e, cmd);
            break;
        }
        lis_error err = {0};
        memset(&e->tout, 0, sizeof e->tout);
        e->in_job = 1;
        if (!lis_jobs_submit(r->misc, bjob_tool, tool_done, e, &err)) {
            e->in_job = 0;
            bsched_stop(e, AGENT_STOP_SANDBOX_ERROR, err.msg);
        }
        break;
    }
    default: try_finish(e); break;
    }
}

/* ---- admission, timers, signals ----------------------------------------- */

static void start(bep *e)
{
    brun *r = e->run;
    e->phase = EP_LIVE;
    e->decided = 0;
    e->t0 = lis_now();
    e->deadline = r->o->episode_timeout > 0 ? e->t0 + r->o->episode_timeout : 0;
    r->live++;
    e->log = open_memstream(&e->log_buf, &e->log_len);
    e->opts = r->base;
    e->opts.query = e->row->problem_statement;
    e->opts.progress = e->log;
    e->opts.on_step_arg = e; /* bfx_on_step: the live view */
    if (e->row->error[0]) {
        e->reason = R_INPUT_ERROR;
        e->decided = 1;
        snprintf(e->error, sizeof e->error, "%s", e->row->error);
        try_finish(e);
        return;
    }
    if (r->o->mode_llm) {
        lis_error err = {0};
        e->in_job = 1;
        if (!lis_jobs_submit(r->misc, bjob_prompt, prompt_done, e, &err)) {
            e->in_job = 0;
            e->reason = R_INPUT_ERROR;
            e->decided = 1;
            snprintf(e->error, sizeof e->error, "%s", err.msg);
            try_finish(e);
        }
        return;
    }
    e->ep = agent_ep_new(&e->opts);
    if (!e->ep) {
        e->reason = R_OTHER;
        e->decided = 1;
        snprintf(e->error, sizeof e->error, "out of memory");
        try_finish(e);
        return;
    }
    setup_start(e);
    drive(e); /* the first request needs only the prompt: it does not wait for the sandbox */
}

void bsched_admit(brun *r)
{
    while (!r->draining && !r->fatal && r->live < (size_t)r->o->concurrency && r->next < r->neps)
        start(&r->eps[r->next++]);
    spare_top_up(r);
}

void bsched_cancel_all(brun *r, agent_stop reason, const char *error)
{
    for (size_t i = 0; i < r->next; i++)
        bsched_stop(&r->eps[i], reason, error);
}

static void run_fatal(brun *r, const char *reason, const char *msg)
{
    if (r->fatal)
        return;
    r->fatal = 1;
    snprintf(r->fatal_reason, sizeof r->fatal_reason, "%s", reason);
    snprintf(r->fatal_msg, sizeof r->fatal_msg, "%s", msg);
    bsched_cancel_all(r, AGENT_STOP_CANCELLED, msg);
}

/* --max-creating unset: the set-ups at once follow the machine. A set-up is
 * partly CPU (namespaces, mounts, lis-init's start) and partly waiting for
 * the clone child and the kernel; one per core to start with, one more
 * each tick (0.1 s) in which set-ups queued and the host had at least half
 * a core idle, one fewer (never below the cores) in a tick with no idle
 * CPU at all: the extra ones would only queue for it. */
void bsched_creators_adjust(brun *r)
{
    uint64_t busy, total;
    if (!r->creators_auto || lis_host_cpu(&busy, &total) < 0)
        return;
    uint64_t db = busy - r->cpu_busy, dt = total - r->cpu_total;
    int first = !r->cpu_total;
    r->cpu_busy = busy;
    r->cpu_total = total;
    if (first || !dt || !r->setup_wait.head)
        return;
    double idle_cores = (double)(dt - db) / (double)dt * (double)r->cores;
    if (idle_cores >= 0.5 && r->creators < r->creators_max) {
        r->creators++;
        bep *w; /* a slot more: the next waiting row starts now */
        while (r->creating < r->creators && (w = list_pop(&r->setup_wait)))
            if (w->sbs == SB_NONE && w->phase == EP_LIVE && !w->stopped)
                setup_start(w);
    } else if (idle_cores < 0.05 && r->creators > r->cores) {
        r->creators--;
    }
}
