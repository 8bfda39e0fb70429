/* records.c - the process records of a step: made from an exec (a new
 * record, the one it continues replaced, a PATH search's earlier tries
 * dropped), looked up, taken into the step's effects, named and freed.
 * Every record is compared and copied by its stored lengths, never by a
 * walk of its strings (a same-argc record of another length once made the
 * hub read past the older record's end). */
#include "monitor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mon_pstate_name(mon_pstate s)
{
    switch (s) {
    case MP_RUNNING: return "running";
    case MP_EXITED: return "exited";
    case MP_KILLED: return "killed";
    case MP_REPLACED: return "exec";
    }
    return "?";
}

void mon_proc_free(mon_proc *p)
{
    if (!p)
        return;
    free(p->path);
    free(p->decoy);
    free(p->argv);
    free(p->ref);
    free(p);
}

pid_t mon_ns_pid_of(lis_monitor *m, pid_t host)
{
    if (host == m->pid1) /* lis-init, the parent of every command's first program */
        return 1;
    for (size_t i = m->nprocs; i-- > 0;)
        if (m->procs[i]->hpid == host)
            return m->procs[i]->pid;
    mon_pstatus st;
    return host > 0 && mon_read_status(host, &st) == 0 ? st.nspid : 0;
}

mon_proc *mon_running_proc(lis_monitor *m, pid_t tgid)
{
    for (size_t i = m->nprocs; i-- > 0;)
        if (m->procs[i]->hpid == tgid && m->procs[i]->state == MP_RUNNING)
            return m->procs[i];
    return NULL;
}

static const char *basename_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Whether x is the next try of prev's PATH search (execvp tries each
 * directory with the same argv): the same argv by length and bytes, the same
 * program name. */
static int same_try(const mon_proc *prev, const mon_exec *x)
{
    return prev->argc == x->argc && prev->argv && x->argv_len && prev->argv_len == x->argv_len &&
           !memcmp(prev->argv, x->argv, x->argv_len) &&
           !strcmp(basename_of(prev->path), basename_of(x->path));
}

mon_proc *mon_exec_record(lis_monitor *m, const mon_exec *x, const mon_exec_ids *ids,
                          const char *denied, double now, mon_proc **prevp)
{
    mon_proc *prev = ids->stale ? NULL : mon_running_proc(m, ids->tgid);
    *prevp = NULL;
    int retry = prev && !denied && !prev->denied[0] && prev->step == m->step && same_try(prev, x);
    mon_proc *p = calloc(1, sizeof *p);
    if (p &&
        (m->nprocs >= 2 * MON_STEP_PROCS || LIS_GROW(m->procs, m->capprocs, m->nprocs + 1) < 0)) {
        free(p);
        p = NULL;
    }
    if (p) {
        /* matched whole, kept capped (on a character's boundary) */
        p->path = strndup(x->path, lis_utf8_cut(x->path, MON_PATH_MAX - 1));
        p->argv = malloc(x->argv_len ? x->argv_len : 1);
    }
    if (!p || !p->path || !p->argv) {
        mon_proc_free(p);
        m->step_procs_dropped++;
        return NULL;
    }
    memcpy(p->argv, x->argv, x->argv_len);
    p->argv_len = x->argv_len;
    p->argc = x->argc;
    p->argc_total = x->argc_total;
    p->argv_cut = x->argv_cut || x->path_cut || strlen(x->path) >= MON_PATH_MAX;
    snprintf(p->unread, sizeof p->unread, "%s", x->unread);
    snprintf(p->via, sizeof p->via, "%s", x->via);
    if (denied)
        snprintf(p->denied, sizeof p->denied, "%s", denied);
    p->hpid = ids->tgid;
    p->pid = ids->nspid;
    p->ppid = ids->ppid;
    p->t_exec = now;
    p->state = MP_RUNNING;
    p->cpu = -1;
    p->step = m->step;
    p->between = !m->in_step;
    p->pidfd = -1;
    if (prev && !denied) {
        *prevp = prev;
        prev->state = MP_REPLACED;
        prev->t_end = now;
        if (retry) {
            m->exec_retries++;
            prev->reported_end = 1;
            prev->argc = 0; /* dropped at the step's end, not listed */
            prev->argv_len = 0;
            prev->step = -1;
        }
    }
    if (denied)
        p->state = MP_EXITED, p->exit_code = -1, p->t_end = now; /* it never ran */
    m->procs[m->nprocs++] = p;
    return p;
}

/* The step's process records copied out; ended ones no longer needed go. */
int mon_records_take(lis_monitor *m, lis_effects *e)
{
    size_t want = 0;
    for (size_t i = 0; i < m->nprocs; i++) {
        const mon_proc *p = m->procs[i];
        want += p->step == m->step || (p->step >= 0 && p->state != MP_RUNNING && !p->reported_end);
    }
    e->procs = want ? calloc(want, sizeof *e->procs) : NULL;
    if (want && !e->procs)
        return -1;
    size_t keep = 0;
    for (size_t i = 0; i < m->nprocs; i++) {
        mon_proc *p = m->procs[i];
        int listed =
            p->step == m->step || (p->step >= 0 && p->state != MP_RUNNING && !p->reported_end);
        if (listed && e->nprocs < MON_STEP_PROCS) {
            mon_proc *c = &e->procs[e->nprocs];
            *c = *p;
            c->path = strdup(p->path);
            c->decoy = p->decoy ? strdup(p->decoy) : NULL;
            size_t alen = p->argv_len; /* its stored length, never a walk */
            c->argv = malloc(alen ? alen : 1);
            if (!c->path || !c->argv || (p->decoy && !c->decoy)) {
                free(c->path);
                free(c->decoy);
                free(c->argv);
                return -1;
            }
            memcpy(c->argv, p->argv, alen);
            c->ref = NULL;
            c->pidfd = -1;
            e->nprocs++;
        }
        if (listed)
            e->procs_total++;
        if (p->state != MP_RUNNING)
            p->reported_end = 1;
        if (p->state != MP_RUNNING && p->pidfd < 0)
            mon_proc_free(p); /* ended and no longer watched */
        else
            m->procs[keep++] = p;
    }
    m->nprocs = keep;
    return 0;
}
