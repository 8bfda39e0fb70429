/* exec_verify.c - after an exec was let through under exec rules, what
 * really runs is checked: the file the kernel mapped (/proc/PID/exe, as
 * the kernel names it) against the same rules. A process rewriting its
 * path between the check and the kernel's copy (seccomp_unotify(2): the
 * notification's pointers are not the kernel's) is killed when what ran
 * matches a deny rule or misses an except list, and its record names what
 * ran, the spelling it showed kept as the decoy.
 *
 * The hub thread runs the checks from a timer: the first at 200 us after
 * the answer, then backing off (x2, at most 50 ms apart; 1 s apart after
 * the first second) until the file changes or the process ends; the
 * process's next exec or its exit_group settles it at once (it is stopped
 * there, so the file it runs is the one the last exec left). So a denied
 * program may run for the time between its exec and the next check
 * (docs/monitoring.md states it as "checked after"). */
#include "monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define VERIFY_MAX 1024      /* checks pending at once, over all sandboxes */
#define VERIFY_FIRST 200e-6  /* s after the answer */
#define VERIFY_GAP_MAX 50e-3 /* s between two checks */

typedef struct pending {
    lis_monitor *m;
    pid_t tid, tgid;
    int pidfd;
    dev_t dev;
    ino_t ino;
    double t_exec, next, gap;
    char *spelled; /* the spelling shown at the check */
    char *names;   /* what it resolved to then, one a line ("" unresolved) */
} pending;

struct mon_verify {
    pending *p;
    size_t n;
};

mon_verify *mon_verify_new(void)
{
    mon_verify *v = calloc(1, sizeof *v);
    if (v && !(v->p = calloc(VERIFY_MAX, sizeof *v->p))) {
        free(v);
        return NULL;
    }
    return v;
}

static void drop_at(mon_verify *v, size_t i)
{
    close(v->p[i].pidfd);
    free(v->p[i].spelled);
    free(v->p[i].names);
    v->p[i] = v->p[--v->n];
}

void mon_verify_drop(mon_verify *v, const lis_monitor *m)
{
    for (size_t i = v->n; v && i-- > 0;)
        if (!m || v->p[i].m == m)
            drop_at(v, i);
}

void mon_verify_free(mon_verify *v)
{
    if (!v)
        return;
    mon_verify_drop(v, NULL);
    free(v->p);
    free(v);
}

static int exe_id(pid_t tgid, dev_t *dev, ino_t *ino)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/exe", (int)tgid);
    if (stat(path, &st) < 0)
        return -1;
    *dev = st.st_dev;
    *ino = st.st_ino;
    return 0;
}

int mon_verify_add(mon_verify *v, lis_monitor *m, pid_t tid, pid_t tgid, double t_exec,
                   const char *spelled, const mon_exec_names *nm, double now)
{
    if (v->n >= VERIFY_MAX)
        return -1;
    pending *e = &v->p[v->n];
    memset(e, 0, sizeof *e);
    e->pidfd = (int)syscall(SYS_pidfd_open, tgid, 0);
    size_t len = 1;
    for (size_t i = 0; nm && i < nm->n; i++)
        len += strlen(nm->name[i]) + 1;
    if (e->pidfd < 0 || exe_id(tgid, &e->dev, &e->ino) < 0 || !(e->spelled = strdup(spelled)) ||
        !(e->names = calloc(1, len))) {
        if (e->pidfd >= 0)
            close(e->pidfd);
        free(e->spelled);
        return -1;
    }
    for (size_t i = 0; nm && i < nm->n; i++) {
        strcat(e->names, nm->name[i]);
        strcat(e->names, "\n");
    }
    e->m = m;
    e->tid = tid;
    e->tgid = tgid;
    e->t_exec = t_exec;
    e->gap = VERIFY_FIRST;
    e->next = now + e->gap;
    v->n++;
    return 0;
}

static int among(const char *names, const char *s)
{
    size_t n = strlen(s);
    for (const char *l = names; *l; l = strchr(l, '\n') + 1)
        if (!strncmp(l, s, n) && l[n] == '\n')
            return 1;
    return 0;
}

/* What ran, judged as an exec of that file would be: a deny match is
 * killed; a file other than the check resolved is recorded as what ran,
 * the spelling kept as the decoy (m->mu held). */
static void judge(pending *e, const char *ran, double now)
{
    lis_monitor *m = e->m;
    if (among(e->names, ran))
        return; /* what the check saw runs (a script: its interpreter) */
    mon_exec_names nm = {.n = 1};
    snprintf(nm.name[0], sizeof nm.name[0], "%s", ran);
    int unknown = 0;
    const mon_rule *r = mon_rules_match_exec(m->policy, ran, &nm, "", 0, &unknown);
    if (!r)
        r = mon_exec_copy_rule(m->policy, e->tgid, &nm);
    int kill_it = r && !unknown && r->action == LIS_ACT_DENY;
    if (kill_it)
        syscall(SYS_pidfd_send_signal, e->pidfd, SIGKILL, NULL, 0);
    for (size_t i = m->nprocs; i-- > 0;) {
        mon_proc *p = m->procs[i];
        if (p->hpid != e->tgid || p->t_exec != e->t_exec)
            continue;
        char *path = strndup(ran, MON_PATH_MAX - 1);
        if (path) {
            free(p->decoy);
            p->decoy = p->path; /* what it showed at the check */
            p->path = path;
        }
        if (kill_it) {
            snprintf(p->denied, sizeof p->denied, "%s", r->name);
            p->killed_after = 1;
        }
        break;
    }
    if (kill_it)
        mon_alert_add(m, r, now, "exec %s killed after it ran (the check saw %s)", ran, e->spelled);
    else if (r)
        mon_alert_add(m, r, now, "exec %s (the check saw %s)", ran, e->spelled);
}

/* One check of e: 1 when done with it, 0 to check again. final: the
 * process is stopped in its next exec or its exit_group, so the exec e was
 * made for is over (run, or failed when the file did not change). */
static int check(pending *e, double now, int final)
{
    struct pollfd pfd = {.fd = e->pidfd, .events = POLLIN};
    if (poll(&pfd, 1, 0) != 0)
        return 1; /* it ended: nothing runs any more */
    dev_t dev;
    ino_t ino;
    if (exe_id(e->tgid, &dev, &ino) < 0)
        return 1;
    if (dev == e->dev && ino == e->ino) {
        if (final)
            return 1;
        /* not yet (or it failed: then its next exec or its end settles it) */
        double since = now - e->t_exec;
        e->gap = since > 1.0 ? 1.0 : e->gap * 2 <= VERIFY_GAP_MAX ? e->gap * 2 : VERIFY_GAP_MAX;
        e->next = now + e->gap;
        return 0;
    }
    char text[MON_EXEC_PATH];
    if (mon_read_link(e->tgid, "exe", text, sizeof text) < 0)
        return 1;
    /* as exec_canon.c names them: a memfd as "memfd:NAME" */
    size_t tl = strlen(text), dl = strlen(" (deleted)");
    const char *ran = text;
    if (!strncmp(text, "/memfd:", 7)) {
        ran = text + 1;
        if (tl > dl && !strcmp(text + tl - dl, " (deleted)"))
            text[tl - dl] = 0;
    }
    pthread_mutex_lock(&e->m->mu);
    judge(e, ran, now);
    pthread_mutex_unlock(&e->m->mu);
    return 1;
}

void mon_verify_settle(mon_verify *v, const lis_monitor *m, pid_t tgid, double now)
{
    for (size_t i = v->n; i-- > 0;)
        if (v->p[i].m == m && v->p[i].tgid == tgid) {
            check(&v->p[i], now, 1);
            drop_at(v, i);
        }
}

double mon_verify_run(mon_verify *v, double now)
{
    double next = 0;
    for (size_t i = v->n; i-- > 0;) {
        pending *e = &v->p[i];
        if (e->next <= now && check(e, now, 0)) {
            drop_at(v, i);
            continue;
        }
        if (!next || e->next < next)
            next = e->next;
    }
    return next;
}
