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
    if (!force && now - r->last_progress < every)
        return;
    r->last_progress = now;
    double el = now - r->t0;
    size_t done = r->already + r->done;
    double mean = r->done ? r->score_sum / (double)r->done : 0;
    double rate = el > 0 ? (double)r->done / el : 0;
    double eta = rate > 0 ? (double)(r->total - done) / rate : -1;
    char errs[256], etas[32], els[32], tps[32], slow[160] = "";
    fmt_errors(r, errs, sizeof errs);
    fmt_duration(els, sizeof els, el);
    if (eta >= 0)
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
                "lis batch %s: %zu/%zu done, %zu running, mean score %.3f, errors: %s, "
                "%s tokens/s, %.1f replies/s, elapsed %s, ETA %s%s%s\n",
                task, done, r->total, r->live, mean, errs, tps,
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
    fprintf(o->err, "lis batch %s  [%s] %zu/%zu done  %zu running  %zu creating%s\n", task, bar,
            done, r->total, r->live, r->creating,
            r->draining ? (r->cancelling ? "  (cancelling)" : "  (draining: Ctrl-C cancels)") : "");
    fprintf(o->err, "  mean score %.3f   errors: %s\n", mean, errs);
    fprintf(o->err,
            "  %s tokens/s   %.1f replies/s   %zu LLM in flight   %zu commands   "
            "elapsed %s   ETA %s\n",
            tps, el > 0 ? (double)r->replies / el : 0, r->llm_inflight, r->commands, els, etas);
    fprintf(o->err, "  slowest running: %s\n", s ? slow : "-");
    fflush(o->err);
    r->progress_lines = 4;
}

void bprog_summary(FILE *f, const cJSON *res)
{
    const char *task = cJSON_GetStringValue(cJSON_GetObjectItem(res, "task"));
    double total = cJSON_GetNumberValue(cJSON_GetObjectItem(res, "total"));
    double mean = cJSON_GetNumberValue(cJSON_GetObjectItem(res, "mean_score"));
    double errs = cJSON_GetNumberValue(cJSON_GetObjectItem(res, "num_errors"));
    double el = cJSON_GetNumberValue(cJSON_GetObjectItem(res, "elapsed_time_seconds"));
    char els[32];
    fmt_duration(els, sizeof els, el == el ? el : 0);
    fprintf(f, "Results: %s\n", task ? task : "?");
    fprintf(f, "  %-22s %.0f\n", "episodes", total == total ? total : 0);
    fprintf(f, "  %-22s %.4f\n", "mean score", mean == mean ? mean : 0);
    fprintf(f, "  %-22s %.0f\n", "errors", errs == errs ? errs : 0);
    const cJSON *by = cJSON_GetObjectItem(res, "by_reason"), *it;
    if (cJSON_IsObject(by)) {
        fprintf(f, "  by reason:\n");
        cJSON_ArrayForEach(it, by) if (cJSON_IsNumber(it) && it->valuedouble > 0)
            fprintf(f, "    %-20s %.0f\n", it->string, it->valuedouble);
    }
    /* the other figures results.json has (tokens, time split, attempts) */
    cJSON_ArrayForEach(it, res)
    {
        if (!cJSON_IsNumber(it) || !strcmp(it->string, "total") ||
            !strcmp(it->string, "mean_score") || !strcmp(it->string, "num_errors") ||
            !strcmp(it->string, "elapsed_time_seconds"))
            continue;
        fprintf(f, "  %-22s %g\n", it->string, it->valuedouble);
    }
    fprintf(f, "  %-22s %s\n", "elapsed", els);
}
