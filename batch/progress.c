/* progress.c - what a person watching lis batch sees: on a terminal a live
 * status block redrawn every second, otherwise one plain line every 10 s
 * (CI logs, nohup), nothing with --quiet; and the summary at the end. */
#include "engine.h"

#include <string.h>

static void fmt_duration(char *b, size_t n, double s)
{
    if (s < 0)
        s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(b, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60)
        snprintf(b, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(b, n, "%lds", t);
}

static void fmt_count(char *b, size_t n, double v)
{
    if (v >= 1e6)
        snprintf(b, n, "%.1fM", v / 1e6);
    else if (v >= 1e4)
        snprintf(b, n, "%.1fk", v / 1e3);
    else
        snprintf(b, n, "%.0f", v);
}

/* "llm_error 2, deadline 1" or "none" */
static void fmt_errors(const brun *r, char *b, size_t n)
{
    size_t off = 0;
    b[0] = 0;
    static const batch_reason shown[] = {R_DEADLINE,     R_LLM_ERROR,   R_SANDBOX_ERROR,
                                         R_SCORER_ERROR, R_INPUT_ERROR, R_CANCELLED,
                                         R_OTHER};
    for (size_t i = 0; i < sizeof shown / sizeof *shown; i++) {
        if (!r->by_reason[shown[i]] || off >= n)
            continue;
        off += (size_t)snprintf(b + off, n - off, "%s%s %zu", off ? ", " : "",
                                batch_reason_name(shown[i]), r->by_reason[shown[i]]);
    }
    if (!b[0])
        snprintf(b, n, "none");
}

/* the live episode that has run longest */
static const bep *slowest(const brun *r)
{
    const bep *s = NULL;
    for (size_t i = 0; i < r->next; i++) {
        const bep *e = &r->eps[i];
        if (e->phase == EP_LIVE && (!s || e->t0 < s->t0))
            s = e;
    }
    return s;
}

/* " (2 paused: policy rule hold 1, lis batch ctl pause 1)" or "": who paused
 * the running episodes; their number in *np. */
void bprog_paused(const brun *r, char *b, size_t n, size_t *np)
{
    const char *who[3] = {0};
    size_t cnt[3] = {0}, nw = 0, paused = 0, other = 0;
    for (size_t i = 0; i < r->next; i++) {
        const bep *e = &r->eps[i];
        if (e->phase != EP_LIVE || !e->paused)
            continue;
        paused++;
        size_t k = 0;
        while (k < nw && strcmp(who[k], e->pause_why))
            k++;
        if (k == nw && nw < 3)
            who[nw++] = e->pause_why;
        if (k < nw)
            cnt[k]++;
        else
            other++;
    }
    *np = paused;
    b[0] = 0;
    if (!paused)
        return;
    size_t off = (size_t)snprintf(b, n, " (%zu paused:", paused);
    for (size_t k = 0; k < nw && off < n; k++)
        off += (size_t)snprintf(b + off, n - off, "%s %s %zu", k ? "," : "",
                                who[k][0] ? who[k] : "?", cnt[k]);
    if (other && off < n)
        off += (size_t)snprintf(b + off, n - off, ", others %zu", other);
    if (off < n)
        snprintf(b + off, n - off, ")");
}

void bprog_clear(brun *r)
{
    if (r->o->tty && r->progress_lines) {
        for (int i = 0; i < r->progress_lines; i++)
            fputs("\033[F", r->o->err);
        fputs("\033[J", r->o->err);
        r->progress_lines = 0;
    }
}

void bprog_tick(brun *r, int force)
{
    const lis_batch_opts *o = r->o;
    if (o->quiet)
        return;
    double now = lis_now();
    double every = o->tty ? 1.0 : 10.0;
    char paused[320], means[32];
    size_t npaused;
    /* without a terminal, a pause, a resume or a new alert is a line at once */
    int changed = r->pause_changes != r->shown_pauses || r->nalerts != r->shown_alerts;
    if (!force && now - r->last_progress < every && !(changed && !o->tty))
        return;
    r->last_progress = now;
    r->shown_pauses = r->pause_changes;
    r->shown_alerts = r->nalerts;
    bprog_paused(r, paused, sizeof paused, &npaused);
    double el = now - r->t0;
    size_t done = r->already + r->done;
    if (r->done)
        snprintf(means, sizeof means, "%.3f", r->score_sum / (double)r->done);
    else
        snprintf(means, sizeof means, "-"); /* no result yet: not a mean of 0 */
    double rate = el > 0 ? (double)r->done / el : 0;
    double eta = rate > 0 ? (double)(r->total - done) / rate : -1;
    char errs[256], etas[32], els[32], tps[32], slow[160] = "", alerts[48] = "";
    if (r->nalerts)
        snprintf(alerts, sizeof alerts, ", %zu alert%s", r->nalerts, r->nalerts == 1 ? "" : "s");
    fmt_errors(r, errs, sizeof errs);
    fmt_duration(els, sizeof els, el);
    if (npaused && npaused == r->live)
        snprintf(etas, sizeof etas, "- (every running episode is paused)");
    else if (eta >= 0)
        fmt_duration(etas, sizeof etas, eta);
    else
        snprintf(etas, sizeof etas, "?");
    fmt_count(tps, sizeof tps, el > 0 ? (double)(r->tokens_in + r->tokens_out) / el : 0);
    const bep *s = slowest(r);
    if (s) {
        char d[32];
        fmt_duration(d, sizeof d, now - s->t0);
        char id[128];
        if (s->attempt)
            snprintf(id, sizeof id, "%.100s@%d", s->row->id, s->attempt);
        else
            snprintf(id, sizeof id, "%.100s", s->row->id);
        snprintf(slow, sizeof slow, "%s (%s, step %d)", id, d,
                 s->ep ? agent_ep_steps(s->ep) + 1 : 1);
    }
    const char *task = r->task->name ? r->task->name : "batch";
    if (!o->tty) {
        fprintf(o->err,
                "lis batch %s: %zu/%zu done, %zu running%s%s, mean score %s, errors: %s, "
                "%s tokens/s, %.1f replies/s, elapsed %s, ETA %s%s%s\n",
                task, done, r->total, r->live, paused, alerts, means, errs, tps,
                el > 0 ? (double)r->replies / el : 0, els, etas, s ? ", slowest " : "", slow);
        fflush(o->err);
        return;
    }
    bprog_clear(r);
    int width = 24, fill = r->total ? (int)((double)done * width / (double)r->total) : 0;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '-';
    bar[width] = 0;
    fprintf(o->err, "lis batch %s  [%s] %zu/%zu done  %zu running%s  %zu creating%s\n", task, bar,
            done, r->total, r->live, paused, r->creating,
            r->draining ? (r->cancelling ? "  (cancelling)" : "  (draining: Ctrl-C cancels)") : "");
    fprintf(o->err, "  mean score %s   errors: %s%s\n", means, errs, alerts);
    fprintf(o->err,
            "  %s tokens/s   %.1f replies/s   %zu LLM in flight   %zu commands   "
            "elapsed %s   ETA %s\n",
            tps, el > 0 ? (double)r->replies / el : 0, r->llm_inflight, r->commands, els, etas);
    fprintf(o->err, "  slowest running: %s\n", s ? slow : "-");
    fflush(o->err);
    r->progress_lines = 4;
}

/* The status block of results.json: what the run is, its rows, the command
 * that finishes it, its scorer. */
static void status_lines(FILE *f, const cJSON *res)
{
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(res, "status"));
    const char *msg = cJSON_GetStringValue(cJSON_GetObjectItem(res, "status_message"));
    const cJSON *asked = cJSON_GetObjectItem(res, "rows_asked");
    const cJSON *pid = cJSON_GetObjectItem(res, "pid");
    double done = cJSON_GetNumberValue(cJSON_GetObjectItem(res, "rows_done"));
    if (!st)
        st = "unknown";
    if (!strcmp(st, "running"))
        fprintf(f, "  %-22s running (pid %.0f): the figures below are of the rows so far\n",
                "status", cJSON_IsNumber(pid) ? pid->valuedouble : 0.0);
    else
        fprintf(f, "  %-22s %s%s%s\n", "status", st, msg && *msg ? ": " : "", msg ? msg : "");
    if (cJSON_IsNumber(asked))
        fprintf(f, "  %-22s %.0f of %.0f done, %.0f not run\n", "rows", done, asked->valuedouble,
                asked->valuedouble > done ? asked->valuedouble - done : 0);
    const char *fin = cJSON_GetStringValue(cJSON_GetObjectItem(res, "finish_command"));
    if (fin && *fin && strcmp(st, "complete"))
        fprintf(f, "  %-22s %s\n", strcmp(st, "running") ? "finish with" : "if it stops", fin);
    const char *sc = cJSON_GetStringValue(cJSON_GetObjectItem(res, "scorer"));
    const char *sha = cJSON_GetStringValue(cJSON_GetObjectItem(res, "scorer_sha256"));
    if (sc)
        fprintf(f, "  %-22s %s%s%s%s\n", "scorer", sc, sha && *sha ? " (sha256 " : "",
                sha && *sha ? sha : "", sha && *sha ? ")" : "");
}

void bprog_summary(FILE *f, const cJSON *res)
{
    const char *task = cJSON_GetStringValue(cJSON_GetObjectItem(res, "task"));
    double total = cJSON_GetNumberValue(cJSON_GetObjectItem(res, "total"));
    const cJSON *mean = cJSON_GetObjectItem(res, "mean_score");
    double errs = cJSON_GetNumberValue(cJSON_GetObjectItem(res, "num_errors"));
    double el = cJSON_GetNumberValue(cJSON_GetObjectItem(res, "elapsed_time_seconds"));
    char els[32];
    fmt_duration(els, sizeof els, el == el ? el : 0);
    fprintf(f, "Results: %s\n", task ? task : "?");
    status_lines(f, res);
    fprintf(f, "  %-22s %.0f\n", "episodes", total == total ? total : 0);
    if (cJSON_IsNumber(mean))
        fprintf(f, "  %-22s %.4f (over the %.0f finished rows)\n", "mean score", mean->valuedouble,
                total);
    else
        fprintf(f, "  %-22s none (no row finished)\n", "mean score");
    fprintf(f, "  %-22s %.0f\n", "errors", errs == errs ? errs : 0);
    const cJSON *by = cJSON_GetObjectItem(res, "by_reason"), *it;
    if (cJSON_IsObject(by)) {
        fprintf(f, "  by reason:\n");
        cJSON_ArrayForEach(it, by) if (cJSON_IsNumber(it) && it->valuedouble > 0)
            fprintf(f, "    %-20s %.0f\n", it->string, it->valuedouble);
    }
    /* the other figures results.json has (tokens, time split, attempts) */
    static const char *const shown[] = {"total",        "mean_score",
                                        "num_errors",   "elapsed_time_seconds",
                                        "rows_asked",   "rows_done",
                                        "rows_not_run", "pid"};
    cJSON_ArrayForEach(it, res)
    {
        int skip = !cJSON_IsNumber(it);
        for (size_t i = 0; !skip && i < sizeof shown / sizeof *shown; i++)
            skip = !strcmp(it->string, shown[i]);
        if (skip)
            continue;
        if (!strcmp(it->string, "memory_peak_max")) /* bytes: a unit, not 6.88128e+06 */
            fprintf(f, "  %-22s %.1f MiB\n", it->string, it->valuedouble / (1 << 20));
        else if (it->valuedouble == (double)(long long)it->valuedouble)
            fprintf(f, "  %-22s %lld\n", it->string, (long long)it->valuedouble);
        else
            fprintf(f, "  %-22s %.3f\n", it->string, it->valuedouble);
    }
    fprintf(f, "  %-22s %s\n", "elapsed", els);
}
