/* sched.c - the event loop of lis batch (engine.h says the design): admits
 * episodes under the run's bounds, drives each one's engine (agent_ep) from
 * the LLM replies, command completions and finished jobs, and applies the
 * deadlines, Ctrl-C and fatal errors. Everything here runs on one thread and
 * never blocks but in epoll_wait. */
#include "engine.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

/* epoll tags: a kind in the top byte, a value (an fd, an episode) below */
enum { K_SIG = 1, K_SETUP, K_MISC, K_CURL, K_PROC };
#define TAG(k, v) (((uint64_t)(k) << 56) | (uint64_t)(v))
#define TAG_KIND(t) ((int)((t) >> 56))
#define TAG_VAL(t) ((t) & ((1ull << 56) - 1))

static void drive(bep *e);
static void try_finish(bep *e);

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

static int on_socket(CURL *h, curl_socket_t s, int what, void *userp, void *socketp)
{
    brun *r = userp;
    (void)h;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(r->epfd, EPOLL_CTL_DEL, s, NULL);
        curl_multi_assign(r->multi, s, NULL);
        return 0;
    }
    struct epoll_event ev = {.data.u64 = TAG(K_CURL, (uint64_t)s)};
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
    if (!socketp) {
        if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, s, &ev) < 0 && errno == EEXIST)
            epoll_ctl(r->epfd, EPOLL_CTL_MOD, s, &ev);
        curl_multi_assign(r->multi, s, r);
    } else {
        epoll_ctl(r->epfd, EPOLL_CTL_MOD, s, &ev);
    }
    return 0;
}

static int on_timer(CURLM *m, long timeout_ms, void *userp)
{
    (void)m;
    brun *r = userp;
    r->curl_due = timeout_ms < 0 ? -1 : lis_now() + (double)timeout_ms / 1000.0;
    return 0;
}

static void llm_start(bep *e)
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
            llm_start(w);
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

static void run_fatal(brun *r, const char *msg);

/* What would fail every row: stop the run rather than burn through it. */
static int is_fatal(const brun *r, const lis_error *err)
{
    if (err->http_status == 401 || err->http_status == 403 || err->http_status == 404)
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
    if (res == LLM_CALL_RETRY && !r->llm_ok &&
        (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)) {
        /* nothing has worked yet and nothing listens there: every row would fail */
        char msg[700];
        snprintf(msg, sizeof msg, "cannot reach the LLM at %s: %s (check --llm-base-url)",
                 llm_client_url(r->llm), curl_easy_strerror(rc));
        llm_call_free(e->call);
        e->call = NULL;
        e->lq = LQ_NONE;
        run_fatal(r, msg);
        try_finish(e);
        return;
    }
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
            if (e->log)
                fprintf(e->log, "Response:\n%s\n", reply.content);
            llm_reply_free(&reply);
            try_finish(e);
        }
        return;
    }
    if (is_fatal(r, &err)) {
        run_fatal(r, err.msg);
        return;
    }
    if (e->ep) {
        agent_ep_llm_failed(e->ep, err.msg);
        drive(e);
    } else {
        e->reason = R_LLM_ERROR;
        snprintf(e->error, sizeof e->error, "%s", err.msg);
        try_finish(e);
    }
}

static void llm_reap(brun *r)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(r->multi, &left)))
        if (m->msg == CURLMSG_DONE)
            llm_done(r, m->easy_handle, m->data.result);
    llm_slot_freed(r);
}

/* ---- commands ---------------------------------------------------------- */

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
    epoll_ctl(r->epfd, EPOLL_CTL_ADD, lis_proc_fd(e->proc), &ev);
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

static void cmd_event(brun *r, bep *e)
{
    lis_error err = {0};
    if (!e->proc)
        return;
    int rc = lis_proc_step(e->proc, &err);
    if (rc == 0)
        return;
    epoll_ctl(r->epfd, EPOLL_CTL_DEL, lis_proc_fd(e->proc), NULL);
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
        agent_ep_tool_done(e->ep, &t);
        drive(e);
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
    } else {
        e->sbs = SB_FAILED;
        if (!e->stopped) {
            /* nothing can run without it: no more LLM calls for this row */
            llm_cancel(e);
            e->stopped = 1;
            snprintf(e->stop_reason, sizeof e->stop_reason, "sandbox_error");
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
        llm_start(e);
}

static void admit(brun *r);

static void finish_done(void *arg, int status)
{
    bep *e = arg;
    brun *r = e->run;
    e->phase = EP_DONE;
    r->live--;
    if (e->discard == 2 && !r->fatal) {
        snprintf(r->write_error, sizeof r->write_error, "%s", e->error);
        run_fatal(r, e->error);
    }
    if (!e->discard) {
        r->done++;
        r->by_reason[e->reason]++;
        if (e->reason != R_SUBMITTED && e->reason != R_MAX_STEPS && e->reason != R_TOKEN_LIMIT)
            r->errors++;
        r->score_sum += e->score;
    } else if (e->discard == 1) {
        r->by_reason[R_CANCELLED]++;
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
    admit(r);
}

/* Ends the episode once nothing of it is in flight. */
static void try_finish(bep *e)
{
    brun *r = e->run;
    if (e->phase != EP_LIVE || e->proc || e->in_job || e->lq == LQ_FLIGHT)
        return;
    if (e->lq != LQ_NONE)
        llm_cancel(e);
    if (e->stopped) {
        if (e->ep)
            agent_ep_stop(e->ep, e->stop_reason, e->stop_error);
        if (!strcmp(e->stop_reason, "cancelled"))
            e->discard = 1;
        else if (e->reason < 0) {
            e->reason = batch_reason_index(e->stop_reason);
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
static void stop(bep *e, const char *reason, const char *error)
{
    if (e->phase != EP_LIVE || e->stopped)
        return;
    e->stopped = 1;
    snprintf(e->stop_reason, sizeof e->stop_reason, "%s", reason);
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

static void drive(bep *e)
{
    brun *r = e->run;
    if (e->phase != EP_LIVE || e->stopped)
        return;
    switch (agent_ep_next(e->ep)) {
    case AGENT_EP_LLM: llm_start(e); break;
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
            stop(e, "sandbox_error", err.msg);
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
    e->reason = -1;
    e->t0 = lis_now();
    e->deadline = r->o->episode_timeout > 0 ? e->t0 + r->o->episode_timeout : 0;
    r->live++;
    e->log = open_memstream(&e->log_buf, &e->log_len);
    e->opts = r->base;
    e->opts.query = e->row->problem_statement;
    e->opts.progress = e->log;
    if (e->row->error[0]) {
        e->reason = R_INPUT_ERROR;
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
            snprintf(e->error, sizeof e->error, "%s", err.msg);
            try_finish(e);
        }
        return;
    }
    e->ep = agent_ep_new(&e->opts);
    if (!e->ep) {
        e->reason = R_OTHER;
        snprintf(e->error, sizeof e->error, "out of memory");
        try_finish(e);
        return;
    }
    setup_start(e);
    drive(e); /* the first request needs only the prompt: it does not wait for the sandbox */
}

static void admit(brun *r)
{
    while (!r->draining && !r->fatal && r->live < (size_t)r->o->concurrency && r->next < r->neps)
        start(&r->eps[r->next++]);
    spare_top_up(r);
}

static void cancel_all(brun *r, const char *reason, const char *error)
{
    for (size_t i = 0; i < r->next; i++)
        stop(&r->eps[i], reason, error);
}

static void run_fatal(brun *r, const char *msg)
{
    if (r->fatal)
        return;
    r->fatal = 1;
    snprintf(r->fatal_msg, sizeof r->fatal_msg, "%s", msg);
    cancel_all(r, "cancelled", msg);
}

static void on_signal(brun *r)
{
    struct signalfd_siginfo si;
    while (read(r->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        r->signals++;
        if (r->signals == 1 && si.ssi_signo == SIGINT) {
            r->draining = 1;
            if (r->o->drain_timeout > 0)
                r->drain_deadline = lis_now() + r->o->drain_timeout;
            bprog_clear(r);
            fprintf(r->o->err,
                    "lis: Ctrl-C: starting nothing new, waiting for the %zu running "
                    "episodes (Ctrl-C again cancels them)\n",
                    r->live);
        } else {
            r->draining = r->cancelling = 1;
            bprog_clear(r);
            fprintf(r->o->err,
                    "lis: cancelling the %zu running episodes (--resume runs them "
                    "again)\n",
                    r->live);
            cancel_all(r, "cancelled", "interrupted");
        }
    }
}

/* --max-creating unset: the set-ups at once follow the machine. A set-up is
 * partly CPU (namespaces, mounts, lis-init's start) and partly waiting for
 * the clone child and the kernel; one per core to start with, one more
 * each tick (0.1 s) in which set-ups queued and the host had at least half
 * a core idle, one fewer (never below the cores) in a tick with no idle
 * CPU at all: the extra ones would only queue for it. */
static void creators_adjust(brun *r)
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

/* Deadlines, retries whose wait is over, stuck kills: once per tick. */
static void sweep(brun *r, double now)
{
    if (r->drain_deadline > 0 && now >= r->drain_deadline && !r->cancelling) {
        r->cancelling = 1;
        bprog_clear(r);
        fprintf(r->o->err,
                "lis: --drain-timeout reached: cancelling the %zu running "
                "episodes\n",
                r->live);
        cancel_all(r, "cancelled", "drain timeout");
    }
    for (size_t i = 0; i < r->next; i++) {
        bep *e = &r->eps[i];
        if (e->phase != EP_LIVE)
            continue;
        if (!e->stopped && e->deadline > 0 && now >= e->deadline) {
            char msg[128];
            snprintf(msg, sizeof msg, "the episode ran longer than --episode-timeout %gs",
                     r->o->episode_timeout);
            stop(e, "deadline", msg);
            continue;
        }
        if (e->lq == LQ_RETRY && now >= e->retry_at && !e->stopped) {
            r->retrying--;
            e->lq = LQ_NONE;
            llm_start(e);
        }
        if (e->proc && e->kill_at > 0 && now >= e->kill_at && e->sb) {
            /* the command outlived SIGKILL (a stuck exit): end the whole sandbox,
             * which ends its connection and so the command */
            syscall(SYS_pidfd_send_signal, lis_sandbox_pidfd(e->sb), SIGKILL, NULL, 0);
            e->kill_at = 0;
        }
    }
}

static void batch_sigset(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
}

void bsched_block_signals(sigset_t *old)
{
    sigset_t set;
    batch_sigset(&set);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

void bsched_restore_signals(const sigset_t *old)
{
    /* a signal that arrived while blocked stays pending: drop it rather than
     * have it kill the process on unblock before the report is written */
    struct timespec zero = {0, 0};
    sigset_t set;
    batch_sigset(&set);
    while (sigtimedwait(&set, NULL, &zero) > 0)
        ;
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

static int setup_loop(brun *r, lis_error *err)
{
    sigset_t set;
    batch_sigset(&set);
    r->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    r->multi = curl_multi_init();
    if (r->sigfd < 0 || r->epfd < 0 || !r->multi)
        return lis_fail_errno(err, "setting up the event loop");
    curl_multi_setopt(r->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(r->multi, CURLMOPT_SOCKETDATA, r);
    curl_multi_setopt(r->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(r->multi, CURLMOPT_TIMERDATA, r);
    curl_multi_setopt(r->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)r->o->max_llm);
    curl_multi_setopt(r->multi, CURLMOPT_MAXCONNECTS, (long)r->o->max_llm);
    r->curl_due = -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG(K_SIG, 0)};
    epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->sigfd, &ev);
    ev.data.u64 = TAG(K_SETUP, 0);
    epoll_ctl(r->epfd, EPOLL_CTL_ADD, lis_jobs_fd(r->setup), &ev);
    ev.data.u64 = TAG(K_MISC, 0);
    epoll_ctl(r->epfd, EPOLL_CTL_ADD, lis_jobs_fd(r->misc), &ev);
    return 0;
}

int bsched_run(brun *r, lis_error *err)
{
    int rc = setup_loop(r, err);
    r->t0 = r->last_sweep = r->last_progress = lis_now();
    if (rc == 0)
        admit(r);
    struct epoll_event evs[64];
    while (rc == 0 && (r->live > 0 || r->spares_creating > 0 ||
                       (!r->draining && !r->fatal && r->next < r->neps))) {
        int timeout = 100; /* the sweep's tick */
        if (r->curl_due >= 0) {
            double ms = (r->curl_due - lis_now()) * 1000.0;
            if (ms < timeout)
                timeout = ms <= 0 ? 0 : (int)ms + 1;
        }
        int n = epoll_wait(r->epfd, evs, 64, timeout);
        if (n < 0 && errno != EINTR) {
            rc = lis_fail_errno(err, "epoll_wait");
            break;
        }
        int running;
        for (int i = 0; i < n; i++) {
            uint64_t t = evs[i].data.u64;
            switch (TAG_KIND(t)) {
            case K_SIG: on_signal(r); break;
            case K_SETUP: lis_jobs_reap(r->setup); break;
            case K_MISC: lis_jobs_reap(r->misc); break;
            case K_CURL: {
                int mask = ((evs[i].events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                           ((evs[i].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                           ((evs[i].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
                curl_multi_socket_action(r->multi, (curl_socket_t)TAG_VAL(t), mask, &running);
                llm_reap(r);
                break;
            }
            case K_PROC: cmd_event(r, &r->eps[TAG_VAL(t)]); break;
            }
        }
        double now = lis_now();
        if (r->curl_due >= 0 && now >= r->curl_due) {
            r->curl_due = -1;
            curl_multi_socket_action(r->multi, CURL_SOCKET_TIMEOUT, 0, &running);
            llm_reap(r);
        }
        if (now - r->last_sweep >= 0.1) {
            r->last_sweep = now;
            sweep(r, now);
            creators_adjust(r);
            bprog_tick(r, 0);
        }
    }
    if (r->setup)
        lis_jobs_reap(r->setup);
    while (r->nspares) { /* made ahead, never needed */
        bspare *sp = r->spares[--r->nspares];
        lis_error ign;
        lis_sandbox_destroy(sp->sb, &ign);
        free(sp);
    }
    if (r->multi)
        curl_multi_cleanup(r->multi);
    r->multi = NULL;
    if (r->epfd >= 0)
        close(r->epfd);
    if (r->sigfd >= 0)
        close(r->sigfd);
    return rc;
}
