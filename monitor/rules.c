/* rules.c - the policy's rules matched against what happened, and the
 * alerts they raise (a step's list, the live action for pause and stop). */
#include "monitor.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mon_glob(const char *glob, const char *s) { return fnmatch(glob, s, 0) == 0; }

static int excepted(const mon_rule *r, const char *s, int host)
{
    for (size_t i = 0; i < r->nexcept; i++)
        if (host ? lis_net_host_match(r->except[i], s) : mon_glob(r->except[i], s))
            return 1;
    return 0;
}

const mon_rule *mon_rules_match(const lis_policy *p, mon_rule_kind k, const char *path,
                                const char *argv)
{
    if (!p)
        return NULL;
    for (size_t i = 0; i < p->n; i++) {
        const mon_rule *r = &p->rules[i];
        if (r->kind != k)
            continue;
        switch (k) {
        case MR_EXEC:
            if ((r->path && !mon_glob(r->path, path)) || (r->argv && !mon_glob(r->argv, argv)) ||
                excepted(r, path, 0))
                continue;
            return r;
        case MR_WRITE:
        case MR_DELETE:
        case MR_RENAME:
            if (!mon_glob(r->path, path) || excepted(r, path, 0))
                continue;
            return r;
        case MR_CONNECT:
            if (!lis_net_host_match(r->host, path) || excepted(r, path, 1))
                continue;
            return r;
        case MR_PROCESSES:
        case MR_BYTES_WRITTEN:
        case MR_BYTES_FETCHED:
        case MR_IDLE_STEPS: continue;
        }
    }
    return NULL;
}

static int exec_rule_matches(const mon_rule *r, const char *path, const mon_exec_names *nm,
                             const char *argv, int argv_cut, int *unknown)
{
    size_t n = nm ? nm->n : 0;
    int argv_hit = !r->argv || mon_glob(r->argv, argv);
    if (!argv_hit && !argv_cut)
        return 0;
    int hit = !r->path || mon_glob(r->path, path);
    for (size_t i = 0; !hit && i < n; i++)
        hit = mon_glob(r->path, nm->name[i]);
    if (!hit && !nm) {
        *unknown = 1; /* what runs is not known: the spelling alone proves nothing */
        return 1;
    }
    if (!hit)
        return 0;
    if (!argv_hit) {
        *unknown = 1; /* the cut part may hold what the glob looks for */
        return 1;
    }
    if (!r->nexcept)
        return 1;
    if (!n) {
        *unknown = 1; /* an except list needs what runs: not known */
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        if (!excepted(r, nm->name[i], 0))
            return 1;
    return 0;
}

const mon_rule *mon_rules_match_exec(const lis_policy *p, const char *path,
                                     const mon_exec_names *names, const char *argv, int argv_cut,
                                     int *unknown)
{
    *unknown = 0;
    for (size_t i = 0; p && i < p->n; i++) {
        const mon_rule *r = &p->rules[i];
        if (r->kind == MR_EXEC && exec_rule_matches(r, path, names, argv, argv_cut, unknown))
            return r;
    }
    return NULL;
}

const mon_rule *mon_rules_over(const lis_policy *p, mon_rule_kind k, uint64_t value)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (p->rules[i].kind == k && value > p->rules[i].above)
            return &p->rules[i];
    return NULL;
}

void mon_alert_unknown(lis_monitor *m, const mon_rule *r, double t, const char *fmt, ...)
{
    mon_rule u = *r; /* the rule's name, the policy's on_unknown action */
    u.action = m->policy ? m->policy->on_unknown : LIS_ACT_FLAG;
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    mon_alert_add(m, &u, t, "not evaluated: %s", what);
}

void mon_alert_add(lis_monitor *m, const mon_rule *r, double t, const char *fmt, ...)
{
    m->alert_total++;
    if (r->action == LIS_ACT_PAUSE || r->action == LIS_ACT_STOP) {
        if (r->action > m->pending) {
            m->pending = r->action;
            snprintf(m->pending_rule, sizeof m->pending_rule, "%s", r->name);
        }
        uint64_t one = 1;
        if (write(m->evfd, &one, sizeof one) < 0) {
            /* the counter is full: it is readable anyway */
        }
    }
    if (m->nalerts >= MON_STEP_ALERTS || LIS_GROW(m->alerts, m->capalerts, m->nalerts + 1) < 0)
        return; /* counted in alert_total; the cut is stated */
    mon_alert *a = &m->alerts[m->nalerts++];
    memset(a, 0, sizeof *a);
    snprintf(a->rule, sizeof a->rule, "%s", r->name);
    a->action = r->action;
    a->t = t;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(a->what, sizeof a->what, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof a->what) /* cut where no character is split */
        a->what[lis_utf8_cut(a->what, sizeof a->what - 1)] = 0;
}
