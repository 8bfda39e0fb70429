/* monitor.c - the public entry points: a sandbox attached to the hub, its
 * steps opened and closed, their effects handed out, file and threshold
 * rules evaluated at a step's end. */
#include "monitor.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

unsigned lis_monitor_spec_flags(lis_net_mode net)
{
    return LIS_MONITOR_EXEC | (net == LIS_NET_NONE ? LIS_MONITOR_CONNECT : 0);
}

/* The proxy's thread: one finished request of the sandbox. */
static void on_request(void *arg, const lis_net_event *ev)
{
    lis_monitor *m = arg;
    pthread_mutex_lock(&m->mu);
    m->net_total++;
    const mon_rule *r = mon_rules_match(m->policy, MR_CONNECT, ev->host, NULL);
    if (r)
        mon_alert_add(m, r, ev->end, "%s %s port %u (%s)", ev->method[0] ? ev->method : "request",
                      ev->host, ev->port, ev->allowed ? "allowed" : "refused");
    if (m->nnet < MON_STEP_NET && LIS_GROW(m->net, m->capnet, m->nnet + 1) == 0) {
        mon_net *n = &m->net[m->nnet++];
        memset(n, 0, sizeof *n);
        lis_utf8_copy(n->host, sizeof n->host, ev->host);
        snprintf(n->method, sizeof n->method, "%s", ev->method);
        snprintf(n->addr, sizeof n->addr, "%s", ev->addr);
        lis_utf8_copy(n->rule, sizeof n->rule, ev->rule);
        if (r)
            snprintf(n->alert, sizeof n->alert, "%s", r->name);
        n->port = ev->port;
        n->resolved = ev->resolved;
        n->allowed = ev->allowed;
        n->status = ev->status;
        n->up = ev->bytes_up;
        n->down = ev->bytes_down;
        n->start = ev->start;
        n->end = ev->end;
        n->between = !m->in_step;
    }
    pthread_mutex_unlock(&m->mu);
}

int lis_monitor_attach(lis_monitor_hub *hub, lis_sandbox *sb, const lis_monitor_opts *opts,
                       lis_monitor **out, lis_error *err)
{
    *out = NULL;
    lis_monitor *m = calloc(1, sizeof *m);
    if (!m)
        return lis_oom(err);
    pthread_mutex_init(&m->mu, NULL);
    m->hub = hub;
    m->sb = sb;
    m->pid1 = lis_sandbox_pid(sb);
    m->policy = opts ? opts->policy : NULL;
    m->writes_in_steps = opts ? opts->writes_in_steps : 0;
    m->noroutes0 = lis_sandbox_net(sb) == LIS_NET_HOST ? -1 : mon_read_noroutes(m->pid1);
    for (size_t i = 0; m->policy && i < m->policy->n; i++)
        m->exec_rules += m->policy->rules[i].kind == MR_EXEC;
    m->layer.upper_fd = -1;
    m->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    m->listener = lis_sandbox_take_monitor(sb);
    m->diff_budget = MON_DIFF_STEP;
    if (m->policy && m->policy->n > sizeof m->fired) {
        mon_monitor_destroy(m);
        return lis_fail(err, E2BIG, "a policy of more than %zu rules", sizeof m->fired);
    }
    if (m->evfd < 0) {
        lis_fail_errno(err, "eventfd");
        mon_monitor_destroy(m);
        return -1;
    }
    if (m->listener < 0) {
        mon_monitor_destroy(m);
        return lis_fail(err, EINVAL,
                        "sandbox %s has no seccomp listener: create it with spec.monitor = "
                        "lis_monitor_spec_flags() (and only one monitor per sandbox)",
                        lis_sandbox_name(sb));
    }
    size_t none = 0, total = 0;
    int cut = 0;
    int opened = mon_layer_open(&m->layer, sb, err) == 0;
    m->layer.policy = m->policy; /* its file rules: what they match is listed past the bound */
    if (!opened || mon_layer_diff(&m->layer, &m->files, &m->nfiles, &m->capfiles, &total, 0, -1,
                                  &none, &cut, NULL, 0, err) < 0) {
        mon_monitor_destroy(m);
        return lis_wrap(err, "monitoring sandbox %s", lis_sandbox_name(sb));
    }
    if (lis_sandbox_net(sb) == LIS_NET_PROXY) {
        if (lis_net_sandbox_watch(sb, on_request, m, err) < 0) {
            mon_monitor_destroy(m);
            return -1;
        }
        m->net_watched = 1;
    }
    if (mon_hub_add(hub, m, err) < 0) {
        if (m->net_watched)
            lis_net_sandbox_watch(sb, NULL, NULL, NULL);
        mon_monitor_destroy(m);
        return -1;
    }
    *out = m;
    return 0;
}

void lis_monitor_free(lis_monitor *m)
{
    if (m)
        mon_hub_remove(m->hub, m);
}

int lis_monitor_fd(const lis_monitor *m) { return m->evfd; }

lis_policy_action lis_monitor_take_action(lis_monitor *m, char *rule, size_t len)
{
    uint64_t v;
    if (read(m->evfd, &v, sizeof v) < 0) {
        /* EAGAIN: nothing new */
    }
    pthread_mutex_lock(&m->mu);
    lis_policy_action a = m->pending;
    if (rule && len)
        snprintf(rule, len, "%s", a ? m->pending_rule : "");
    m->pending = LIS_ACT_NONE;
    m->pending_rule[0] = 0;
    pthread_mutex_unlock(&m->mu);
    return a;
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

int lis_monitor_step_begin(lis_monitor *m, const lis_monitor_call *call, lis_error *err)
{
    if (m->in_step)
        return lis_fail(err, EBUSY, "step %d is still open (lis_monitor_step_end)", m->step);
    free(m->call_tool);
    free(m->call_cmd);
    m->call_tool = dup_or_empty(call ? call->tool : NULL);
    m->call_cmd = dup_or_empty(call ? call->command : NULL);
    if (!m->call_tool || !m->call_cmd)
        return lis_oom(err);
    /* the figures at the begin are the last step's end's (what ran between
     * two steps counts in the next, as its other effects): one walk of the
     * sandbox's processes per step, not two */
    lis_stats st;
    lis_error ignore;
    if (!m->have0 && lis_sandbox_stats(m->sb, &st, &ignore) == 0) {
        m->cpu0 = st.cpu_seconds;
        m->disk0 = st.disk_bytes;
        m->have0 = 1;
    }
    /* what changed since the last step ended: a daemon's writes; nothing can
     * have when nothing ran since (PID 1 alone at the end, no notification
     * since) and the caller writes only inside steps */
    pthread_mutex_lock(&m->mu);
    int quiet = m->writes_in_steps && m->quiet_end && m->acts == m->acts_end;
    pthread_mutex_unlock(&m->mu);
    /* the scan without the lock: the hub never waits on it (the layer and the
     * step's files are this thread's alone) */
    int rc = 0;
    if (!quiet)
        rc = mon_layer_diff(&m->layer, &m->files, &m->nfiles, &m->capfiles, &m->files_total,
                            MON_STEP_FILES, 1, &m->diff_budget, &m->scan_cut, m->scan_why,
                            sizeof m->scan_why, err);
    pthread_mutex_lock(&m->mu);
    m->in_step = 1;
    m->step_t0 = lis_now();
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* File and threshold rules, at the end of the step (m->mu held). */
static void step_rules(lis_monitor *m, lis_effects *e, uint64_t fetched, double now)
{
    for (size_t i = 0; m->policy && i < e->nfiles; i++) {
        const mon_file *f = &e->files[i];
        const mon_rule *r = NULL;
        if (f->change == MF_DELETED)
            r = mon_rules_match(m->policy, MR_DELETE, f->path, NULL);
        else if (f->change == MF_RENAMED)
            r = mon_rules_match(m->policy, MR_RENAME, f->path, NULL);
        if (!r && f->change == MF_RENAMED)
            r = mon_rules_match(m->policy, MR_RENAME, f->from, NULL);
        if (!r && f->change != MF_DELETED)
            r = mon_rules_match(m->policy, MR_WRITE, f->path, NULL);
        if (r)
            mon_alert_add(m, r, now, "%s %s", mon_fchange_name(f->change), f->path);
    }
    /* a cut scan: each file rule did not see every change, an alert with the
     * policy's on_unknown action (never a silent pass) */
    for (size_t i = 0; e->scan_cut && m->policy && i < m->policy->n; i++) {
        const mon_rule *r = &m->policy->rules[i];
        if (r->kind == MR_WRITE || r->kind == MR_DELETE || r->kind == MR_RENAME)
            mon_alert_unknown(m, r, now, "the step's file scan was cut (%s)", e->scan_why);
    }
    struct {
        mon_rule_kind k;
        uint64_t v;
    } th[] = {{MR_PROCESSES, m->step_execs + m->unknown_exits},
              {MR_BYTES_WRITTEN, e->bytes_written},
              {MR_BYTES_FETCHED, fetched},
              {MR_IDLE_STEPS, (uint64_t)m->idle_steps}};
    for (size_t k = 0; k < sizeof th / sizeof th[0]; k++) {
        const mon_rule *r = mon_rules_over(m->policy, th[k].k, th[k].v);
        if (r && !m->fired[r - m->policy->rules]) {
            m->fired[r - m->policy->rules] = 1;
            mon_alert_add(m, r, now, "%s %llu in step %d (above %llu)", mon_rule_kind_name(th[k].k),
                          (unsigned long long)th[k].v, m->step, (unsigned long long)r->above);
        }
    }
}

int lis_monitor_step_end(lis_monitor *m, const lis_result *res, lis_effects **out, lis_error *err)
{
    *out = NULL;
    if (!m->in_step)
        return lis_fail(err, EINVAL, "no step is open (lis_monitor_step_begin)");
    lis_effects *e = calloc(1, sizeof *e);
    if (!e)
        return lis_oom(err);
    /* a request is told when the proxy ends its connection, on the proxy's
     * thread: a client that exited just before this end is seen a moment
     * later, and its request belongs to this step (not the lock: the
     * proxy's thread takes it to record them) */
    if (m->net_watched)
        lis_net_sandbox_settle(m->sb, MON_NET_SETTLE);
    pthread_mutex_lock(&m->mu);
    uint64_t acts = m->acts; /* before the walk: a later notification means a scan at the begin */
    pthread_mutex_unlock(&m->mu);
    lis_stats st;
    lis_error ignore;
    int have = lis_sandbox_stats(m->sb, &st, &ignore) == 0;
    /* the scan without the lock (as at the begin) */
    int rc = mon_layer_diff(&m->layer, &m->files, &m->nfiles, &m->capfiles, &m->files_total,
                            MON_STEP_FILES, 0, &m->diff_budget, &m->scan_cut, m->scan_why,
                            sizeof m->scan_why, err);
    pthread_mutex_lock(&m->mu);
    m->acts_end = acts;
    m->quiet_end = have && st.nprocs <= 1;
    double now = lis_now();
    e->step = m->step;
    e->t0 = m->step_t0;
    e->t1 = now;
    e->wall = now - m->step_t0;
    e->tool = m->call_tool;
    e->command = m->call_cmd;
    m->call_tool = m->call_cmd = NULL;
    e->files = m->files;
    e->nfiles = m->nfiles;
    e->files_total = m->files_total;
    e->scan_cut = m->scan_cut;
    snprintf(e->scan_why, sizeof e->scan_why, "%s", m->scan_why);
    e->diff_cut = m->diff_budget == 0;
    m->files = NULL;
    m->nfiles = m->capfiles = m->files_total = 0;
    for (size_t i = 0; i < e->nfiles; i++)
        if (e->files[i].kind == 'f' &&
            (e->files[i].change == MF_CREATED || e->files[i].change == MF_MODIFIED))
            e->bytes_written += e->files[i].size;
    uint64_t fetched = 0;
    for (size_t i = 0; i < m->nnet; i++)
        fetched += m->net[i].down;
    int changed = 0;
    for (size_t i = 0; i < e->nfiles; i++)
        changed |= !e->files[i].between;
    m->idle_steps = changed ? 0 : m->idle_steps + 1;
    step_rules(m, e, fetched, now);
    if (rc == 0 && mon_records_take(m, e) < 0)
        rc = lis_oom(err);
    e->exec_retries = m->exec_retries;
    e->unknown_exits = m->unknown_exits;
    e->procs_total += m->step_procs_dropped;
    e->net = m->net;
    e->nnet = m->nnet;
    e->net_total = m->net_total;
    e->conns = m->conns;
    e->nconns = m->nconns;
    e->conn_total = m->conn_total;
    e->conn_local = m->conn_local;
    /* the kernel's count of what it refused for want of a route: a sendmsg
     * (its address inside its header, never shown to the hub) is in it */
    long long nr = lis_sandbox_net(m->sb) == LIS_NET_HOST ? -1 : mon_read_noroutes(m->pid1);
    if (nr >= 0 && m->noroutes0 >= 0 && nr >= m->noroutes0) {
        e->unrouted = (size_t)(nr - m->noroutes0);
        if (e->unrouted > e->conn_total)
            e->conn_total = e->unrouted;
    }
    m->noroutes0 = nr;
    e->alerts = m->alerts;
    e->nalerts = m->nalerts;
    e->alert_total = m->alert_total;
    m->net = NULL;
    m->conns = NULL;
    m->alerts = NULL;
    m->nnet = m->capnet = m->net_total = 0;
    m->nconns = m->capconns = m->conn_total = m->conn_local = 0;
    m->nalerts = m->capalerts = m->alert_total = 0;
    m->step_execs = m->step_procs_dropped = m->exec_retries = m->unknown_exits = 0;
    memset(m->fired, 0, sizeof m->fired);
    m->diff_budget = MON_DIFF_STEP;
    m->scan_cut = 0;
    m->scan_why[0] = 0;
    m->in_step = 0;
    m->step++;
    pthread_mutex_unlock(&m->mu);
    if (have) {
        e->have_stats = 1;
        e->cpu = st.cpu_seconds - m->cpu0;
        e->disk_delta = st.disk_bytes - m->disk0;
        e->nprocs_now = st.nprocs;
        e->mem_peak = st.memory_peak;
        m->cpu0 = st.cpu_seconds;
        m->disk0 = st.disk_bytes;
        m->have0 = 1;
    } else {
        m->have0 = 0;
    }
    if (res && res->memory_peak)
        e->mem_peak = res->memory_peak;
    mon_classify(e);
    if (rc < 0) {
        lis_effects_free(e);
        return -1;
    }
    *out = e;
    return 0;
}
