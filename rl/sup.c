/* sup.c - the supervisor of the episodes API (core.h says the design): one
 * thread that admits queued groups while their sandboxes fit, hands each
 * stage to its pool, ends what passed its deadline, and removes the
 * snapshots nothing wants any more. */
#include "core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Removes, newest first, every snapshot nothing wants; one that another
 * image is made on stays until that one goes (the next sweep). Under mu. */
void rl_snaps_sweep(lis_rl *rl)
{
    for (rl_snap **p = &rl->snaps; *p;) {
        rl_snap *s = *p;
        lis_error err = {0};
        if (s->refs <= 0 &&
            (lis_rootfs_rm(rl->data_dir, s->digest, NULL, &err) == 0 || err.code == ENOENT)) {
            *p = s->next;
            free(s);
            continue;
        }
        p = &s->next;
    }
}

static void ep_run_done(void *arg, int status);

/* A group's episodes to the run pool as soon as it is admitted: each one's
 * first model call goes out while the set-up is made (rl_ep_run_job waits
 * for it before its sandbox). */
static void start_runs(lis_rl *rl, rl_group *g)
{
    for (size_t i = 0; i < g->n; i++) {
        rl_ep *e = g->eps[i];
        if (e->phase != RP_SETUP && e->phase != RP_QUEUED)
            continue; /* cancelled while it waited */
        lis_error err = {0};
        e->job = lis_jobs_submit(rl->run_pool, rl_ep_run_job, ep_run_done, e, &err);
        if (!e->job) {
            e->status = RS_ENV_ERROR;
            e->stage = RST_RUN;
            snprintf(e->error, sizeof e->error, "%s", err.msg);
            ep_run_done(e, ECANCELED);
        }
    }
}

static void reward_done(void *arg, int status)
{
    rl_ep *e = arg;
    e->rl->scoring--;
    rl_ep_finish(e);
}

/* The run ended (its sandbox is gone): the reward, or the end. */
static void ep_run_done(void *arg, int status)
{
    rl_ep *e = arg;
    lis_rl *rl = e->rl;
    e->job = NULL;
    if (rl->live)
        rl->live--;
    if (status == ECANCELED && !e->status) { /* never ran: the server stops */
        e->status = RS_CANCELLED;
        e->stage = RST_RUN;
        snprintf(e->error, sizeof e->error, "server stopped");
    }
    int scored = e->g->spec->scorer && (e->status == RS_COMPLETED || e->status == RS_TRUNCATED) &&
                 !rl->stopping;
    if (!scored) {
        rl_ep_finish(e);
        return;
    }
    e->phase = RP_SCORING;
    e->t_rew0 = lis_now();
    rl->scoring++;
    lis_error err = {0};
    if (!lis_jobs_submit(rl->reward_pool, rl_ep_reward_job, reward_done, e, &err)) {
        rl->scoring--;
        e->status = RS_ENV_ERROR;
        e->stage = RST_REWARD;
        snprintf(e->error, sizeof e->error, "%s", err.msg);
        rl_ep_finish(e);
    }
}

/* The end of an episode: its result made, kept on disk, its final event.
 * Under mu (the supervisor's thread, or a cancel of one still queued). */
void rl_ep_finish(rl_ep *e)
{
    lis_rl *rl = e->rl;
    if (!e->status) {
        e->status = RS_ENV_ERROR;
        e->stage = RST_RUN;
    }
    e->phase = RP_DONE;
    rl->ndone++;
    if (!e->t_run1 && e->t_run0)
        e->t_run1 = lis_now();
    if (e->t_rew0 && !e->t_rew1)
        e->t_rew1 = lis_now();
    cJSON_Delete(e->result);
    e->result = rl_ep_result(e);
    if (e->result) { /* the result holds the history now: one copy of it */
        cJSON_Delete(e->messages);
        e->messages = NULL;
    }
    /* kept on disk by the supervisor once it lets go of mu (an fsync each) */
    rl_pending *w = e->result ? malloc(sizeof *w) : NULL;
    if (w) {
        w->e = e;
        snprintf(w->id, sizeof w->id, "%s", e->id);
        w->result = cJSON_Duplicate(e->result, 1);
        w->next = rl->to_store;
        rl->to_store = w;
    }
    rl_ep_event_step(e, -2); /* the final event: the result, made when read */
    rl_group *g = e->g;
    size_t open = 0;
    for (size_t i = 0; i < g->n; i++)
        open += g->eps[i]->phase != RP_DONE;
    if (!open) {
        g->phase = RP_DONE;
        /* nothing asked to keep snapshots: the set-up's goes with its group */
        if (g->setup && !g->setup_released) {
            g->setup->refs--; /* the group's own; episodes that keep snapshots hold theirs */
            g->setup_released = 1;
        }
    }
    rl->generation++;
}

/* The set-up job ended: the runs waiting for it go on (on its snapshot) or
 * end with its error (rl_ep_run_job). */
static void setup_done(void *arg, int status)
{
    rl_group *g = arg;
    lis_rl *rl = g->rl;
    rl->setting_up--;
    g->t_setup1 = lis_now();
    if (g->setup && !g->error[0]) {
        for (size_t i = 0; i < g->n; i++) {
            g->eps[i]->snaps[0] = g->setup; /* a branch at step 0 starts on it */
            if (g->spec->req.snaps != RL_SNAP_NONE)
                g->setup->refs++;
        }
        g->setup_state = RL_SETUP_READY;
    } else {
        if (!g->error[0])
            snprintf(g->error, sizeof g->error, "the set-up was not made");
        g->setup_state = RL_SETUP_FAILED;
    }
    g->phase = RP_RUNNING;
    pthread_cond_broadcast(&g->cv);
    rl->generation++;
}

/* The host's available memory (MemAvailable) and, when total is not NULL,
 * its MemTotal; 0 when unknown. */
unsigned long long rl_mem_available(unsigned long long *total)
{
    FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    unsigned long long kb = 0, tkb = 0, v;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %llu kB", &v) == 1)
            tkb = v;
        else if (sscanf(line, "MemAvailable: %llu kB", &v) == 1)
            kb = v;
    }
    if (f)
        fclose(f);
    if (total)
        *total = tkb * 1024;
    return kb * 1024;
}

/* Groups leave the queue, oldest first, while their sandboxes fit: under
 * max_live, and in the host's available memory less a reserve, at
 * admit_bytes per sandbox (an estimate of what an episode's sandbox uses,
 * not its limit: lis_rl_opts). One group is always let in when nothing
 * runs, so a large group cannot wait for ever. */
static void admit(lis_rl *rl)
{
    size_t max_live = (size_t)rl->o.max_live;
    unsigned long long avail = rl->queue_head ? rl_mem_available(NULL) : 0;
    unsigned long long room = avail > RL_HOST_RESERVE ? avail - RL_HOST_RESERVE : 0;
    while (rl->queue_head && !rl->stopping) {
        rl_group *g = rl->queue_head;
        size_t need = 0;
        for (size_t i = 0; i < g->n; i++)
            need += g->eps[i]->phase != RP_DONE; /* a cancel ended the others */
        if (need && rl->live &&
            (rl->live + need > max_live || (avail && need * rl->o.admit_bytes > room)))
            break;
        room = room > need * rl->o.admit_bytes ? room - need * rl->o.admit_bytes : 0;
        rl->queue_head = g->qnext;
        if (!rl->queue_head)
            rl->queue_tail = NULL;
        g->qnext = NULL;
        rl->queued--;
        if (!need) {
            g->phase = RP_DONE;
            continue;
        }
        rl->live += need;
        double now = lis_now();
        g->t_setup0 = now;
        for (size_t i = 0; i < g->n; i++) {
            rl_ep *e = g->eps[i];
            if (e->phase == RP_DONE)
                continue;
            e->t_setup0 = now;
            if (g->deadline_s > 0)
                e->deadline = now + g->deadline_s; /* never the time spent queued */
            e->phase = RP_SETUP;
        }
        if (g->branch_of[0]) { /* a branch starts on its parent's snapshot */
            g->setup_state = RL_SETUP_READY;
            g->phase = RP_RUNNING;
        } else {
            g->phase = RP_SETUP;
            rl->setting_up++;
            lis_error err = {0};
            if (!lis_jobs_submit(rl->setup_pool, rl_group_setup_job, setup_done, g, &err)) {
                snprintf(g->error, sizeof g->error, "%s", err.msg);
                setup_done(g, ECANCELED);
            }
        }
        start_runs(rl, g);
    }
}

/* Ends what passed its deadline; returns ms to the next deadline (-1: none). */
static int deadlines(lis_rl *rl)
{
    double now = lis_now(), next = 0;
    for (rl_ep *e = rl->eps; e; e = e->next) {
        if (e->phase == RP_DONE)
            continue;
        if (rl_env_idle(e, now, &next)) { /* an env no one touched for its idle timeout */
            char why[64];
            snprintf(why, sizeof why, "idle for %g s", e->g->spec->req.idle_timeout);
            e->cancel_asked = 1;
            rl_ep_stop(e, AGENT_STOP_CANCELLED, why);
            rl->generation++;
            continue;
        }
        if (!e->deadline)
            continue;
        if (e->deadline <= now) {
            if (!e->cancel_asked) {
                e->cancel_asked = 1;
                rl_ep_stop(e, AGENT_STOP_DEADLINE, "the deadline passed");
            }
            continue;
        }
        if (!next || e->deadline < next)
            next = e->deadline;
    }
    if (!next)
        return -1;
    double ms = (next - now) * 1000 + 1;
    return ms > 60000 ? 60000 : (int)ms;
}

/* Finished results to state_dir, outside mu. A result that cannot be kept
 * stays in memory (GET still answers it) and the failure is logged once. */
static void store_all(lis_rl *rl, rl_pending *w)
{
    for (rl_pending *p = w; p; p = p->next) {
        lis_error err = {0};
        p->e = p->result && rl_store_put(rl->state_dir, p->id, p->result, &err) == 0 ? p->e : NULL;
        if (!p->e && rl->o.log)
            fprintf(rl->o.log, "lis serve: keeping the result of %s: %s\n", p->id, err.msg);
    }
    if (w)
        pthread_mutex_lock(&rl->mu);
    for (rl_pending *p = w; p; p = p->next)
        if (p->e)
            p->e->stored = 1;
    if (w)
        pthread_mutex_unlock(&rl->mu);
    while (w) {
        rl_pending *next = w->next;
        cJSON_Delete(w->result);
        free(w);
        w = next;
    }
}

/* Whether an episode holds a snapshot of its own (kept for branches). */
static int holds_snaps(const rl_ep *e)
{
    for (size_t k = 0; k < e->nsnaps; k++)
        if (e->snaps[k] && !(k == 0 && e->at_step < 0 && e->g->spec->req.snaps == RL_SNAP_NONE))
            return 1;
    return 0;
}

static int evictable(const rl_group *g)
{
    if (g->phase != RP_DONE)
        return 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->eps[i]->phase != RP_DONE || (!g->eps[i]->stored && !g->eps[i]->deleted) ||
            holds_snaps(g->eps[i]))
            return 0;
    return 1;
}

/* Past results_mem finished episodes in memory, the oldest groups whose
 * results are all on disk leave it: their ids go to rl->kept, and GET reads
 * them back from state_dir. Under mu. */
static void evict(lis_rl *rl)
{
    if (rl->ndone <= (size_t)rl->o.results_mem)
        return;
    size_t n = 0;
    for (rl_group *g = rl->groups; g; g = g->next)
        n++;
    rl_group **v = malloc(n * sizeof *v);
    if (!v)
        return;
    n = 0;
    for (rl_group *g = rl->groups; g; g = g->next)
        v[n++] = g; /* newest first */
    for (size_t i = n; i-- > 0 && rl->ndone > (size_t)rl->o.results_mem;) {
        rl_group *g = v[i];
        if (!evictable(g))
            continue;
        for (size_t k = 0; k < g->n; k++) {
            rl_ep *e = g->eps[k];
            if (!e->deleted)
                cJSON_AddStringToObject(rl->kept, e->id, g->id);
            for (rl_ep **p = &rl->eps; *p; p = &(*p)->next)
                if (*p == e) {
                    *p = e->next;
                    break;
                }
            rl->neps--;
            rl->ndone--;
            rl_index_del(&rl->by_id, e->id);
        }
        rl_index_del(&rl->by_id, g->id);
        const char *rid = g->spec->req.request_id;
        const char *mapped =
            rid ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rl->requests, rid)) : NULL;
        if (mapped && !strcmp(mapped, g->id))
            cJSON_DeleteItemFromObjectCaseSensitive(rl->requests, rid);
        for (rl_group **p = &rl->groups; *p; p = &(*p)->next)
            if (*p == g) {
                *p = g->next;
                break;
            }
        rl_group_free(g);
    }
    free(v);
}

static void *sup_main(void *arg)
{
    lis_rl *rl = arg;
    for (;;) {
        pthread_mutex_lock(&rl->mu);
        int stopping = rl->stopping;
        uint64_t gen = rl->generation;
        lis_jobs_reap(rl->setup_pool);
        lis_jobs_reap(rl->run_pool);
        lis_jobs_reap(rl->reward_pool);
        admit(rl);
        int timeout = deadlines(rl);
        rl_snaps_sweep(rl);
        evict(rl);
        int idle = !rl->setting_up && !rl->scoring && !lis_jobs_pending(rl->run_pool);
        int changed = rl->generation != gen;
        rl_pending *w = rl->to_store;
        rl->to_store = NULL;
        pthread_mutex_unlock(&rl->mu);
        store_all(rl, w);
        if (changed)
            rl_notify(rl);
        if (stopping && idle)
            break;
        struct epoll_event ev[4];
        int n = epoll_wait(rl->epfd, ev, 4, timeout);
        for (int i = 0; i < n; i++)
            if (ev[i].data.fd == rl->wake_efd) {
                uint64_t v;
                if (read(rl->wake_efd, &v, sizeof v) < 0) { /* EAGAIN: already read */
                }
            }
    }
    return NULL;
}

int rl_sup_start(lis_rl *rl, lis_error *err)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned setup =
        rl->o.setup_threads > 0 ? (unsigned)rl->o.setup_threads : (unsigned)(cores > 0 ? cores : 1);
    unsigned reward = rl->o.reward_threads > 0 ? (unsigned)rl->o.reward_threads
                                               : (unsigned)(cores > 0 ? cores : 1);
    /* a start that failed half way is taken up where it stopped */
    if (rl->wake_efd < 0)
        rl->wake_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (rl->epfd < 0)
        rl->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (rl->wake_efd < 0 || rl->epfd < 0)
        return lis_fail_errno(err, "the episodes API's supervisor");
    if ((!rl->setup_pool && !(rl->setup_pool = lis_jobs_new(setup, err))) ||
        (!rl->run_pool && !(rl->run_pool = lis_jobs_new((unsigned)rl->o.max_live, err))) ||
        (!rl->reward_pool && !(rl->reward_pool = lis_jobs_new(reward, err))))
        return lis_wrap(err, "the episodes API's pools");
    int fds[4] = {rl->wake_efd, lis_jobs_fd(rl->setup_pool), lis_jobs_fd(rl->run_pool),
                  lis_jobs_fd(rl->reward_pool)};
    for (int i = 0; i < 4; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(rl->epfd, EPOLL_CTL_ADD, fds[i], &ev) < 0 && errno != EEXIST)
            return lis_fail_errno(err, "the episodes API's supervisor");
    }
    int rc = pthread_create(&rl->sup, NULL, sup_main, rl);
    if (rc)
        return lis_fail_errnum(err, rc, "starting the episodes API's supervisor");
    rl->sup_started = 1;
    return 0;
}

/* Everything still queued or running ends (cancelled: "server stopped"),
 * the pools drain, every snapshot goes. */
void rl_sup_stop(lis_rl *rl)
{
    pthread_mutex_lock(&rl->mu);
    rl->stopping = 1;
    while (rl->queue_head) {
        rl_group *g = rl->queue_head;
        rl->queue_head = g->qnext;
        rl->queued--;
        for (size_t i = 0; i < g->n; i++)
            if (g->eps[i]->phase != RP_DONE) {
                g->eps[i]->status = RS_CANCELLED;
                g->eps[i]->stage = RST_SETUP;
                snprintf(g->eps[i]->error, sizeof g->eps[i]->error, "server stopped");
                rl_ep_finish(g->eps[i]);
            }
    }
    rl->queue_tail = NULL;
    for (rl_ep *e = rl->eps; e; e = e->next)
        if ((e->phase == RP_RUNNING || e->phase == RP_SETUP) && !e->cancel_asked) {
            e->cancel_asked = 1;
            rl_ep_stop(e, AGENT_STOP_CANCELLED, "server stopped");
        }
    pthread_mutex_unlock(&rl->mu);
    if (rl->sup_started) {
        rl_wake(rl);
        pthread_join(rl->sup, NULL);
    }
    if (rl->setup_pool)
        lis_jobs_stop(rl->setup_pool);
    if (rl->run_pool)
        lis_jobs_stop(rl->run_pool);
    if (rl->reward_pool)
        lis_jobs_stop(rl->reward_pool);
    pthread_mutex_lock(&rl->mu);
    if (rl->setup_pool)
        lis_jobs_reap(rl->setup_pool);
    if (rl->run_pool)
        lis_jobs_reap(rl->run_pool);
    if (rl->reward_pool)
        lis_jobs_reap(rl->reward_pool);
    for (rl_snap *s = rl->snaps; s; s = s->next)
        s->refs = 0;
    rl_snaps_sweep(rl);
    rl_pending *w = rl->to_store;
    rl->to_store = NULL;
    pthread_mutex_unlock(&rl->mu);
    store_all(rl, w);
    lis_jobs_free(rl->setup_pool);
    lis_jobs_free(rl->run_pool);
    lis_jobs_free(rl->reward_pool);
    rl->setup_pool = rl->run_pool = rl->reward_pool = NULL;
}
