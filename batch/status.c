/* status.c - what a run says about itself (docs/batch-files.md): its status
 * (running, complete, partial, stopped) with the reason, the rows asked for
 * and done, and the command that finishes it, as run.json and results.json
 * carry them; the keys of run.json that --resume and merge do not compare;
 * and what those files and the hints need: a shell word, a float as Python
 * writes it, the path of the lis that runs. */
#include "results_io.h"

#include <math.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

const char *batch_status_name(batch_status s)
{
    switch (s) {
    case BS_RUNNING: return "running";
    case BS_COMPLETE: return "complete";
    case BS_PARTIAL: return "partial";
    case BS_STOPPED: return "stopped";
    case BS_FAILED: return "failed";
    }
    return "?";
}

/* How the run stands, not what it is: written by the run as it goes. */
static const char *const STATE_KEYS[] = {
    "status",         "status_reason", "status_message", "rows_asked", "rows_done", "rows_not_run",
    "finish_command", "pid",           "host",           "lis",
};

int bo_state_key(const char *key)
{
    for (size_t i = 0; i < sizeof STATE_KEYS / sizeof *STATE_KEYS; i++)
        if (!strcmp(key, STATE_KEYS[i]))
            return 1;
    return 0;
}

/* settings: how to run it again (the CLI's); scorer_file: where the scorer's
 * file was (its sha256 is compared) */
int bo_uncompared_key(const char *key)
{
    return bo_state_key(key) || !strcmp(key, "settings") || !strcmp(key, "scorer_file");
}

void bo_strip_state(cJSON *obj)
{
    for (size_t i = 0; i < sizeof STATE_KEYS / sizeof *STATE_KEYS; i++)
        cJSON_DeleteItemFromObjectCaseSensitive(obj, STATE_KEYS[i]);
}

void batch_state_json(cJSON *obj, const batch_state *st)
{
    bo_strip_state(obj);
    cJSON_AddStringToObject(obj, "status", batch_status_name(st->status));
    cJSON_AddStringToObject(obj, "status_reason", st->reason ? st->reason : "");
    cJSON_AddStringToObject(obj, "status_message", st->message ? st->message : "");
    cJSON_AddNumberToObject(obj, "rows_asked", (double)st->rows_asked);
    cJSON_AddNumberToObject(obj, "rows_done", (double)st->rows_done);
    cJSON_AddNumberToObject(obj, "rows_not_run",
                            st->rows_asked > st->rows_done
                                ? (double)(st->rows_asked - st->rows_done)
                                : 0.0);
    if (st->finish && *st->finish)
        cJSON_AddStringToObject(obj, "finish_command", st->finish);
    else
        cJSON_AddNullToObject(obj, "finish_command");
    if (st->status == BS_RUNNING && st->pid > 0) {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        cJSON_AddNumberToObject(obj, "pid", (double)st->pid);
        cJSON_AddStringToObject(obj, "host", host); /* the lock test means something there only */
    }
    if (st->lis && *st->lis)
        cJSON_AddStringToObject(obj, "lis", st->lis);
}

void bo_shell_word(strbuf *b, const char *s)
{
    int plain = *s != 0;
    for (const char *p = s; *p && plain; p++)
        plain = strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_/.,:@%+=-",
                       *p) != NULL;
    if (plain) {
        strbuf_puts(b, s);
        return;
    }
    strbuf_putc(b, '\'');
    for (const char *p = s; *p; p++) {
        if (*p == '\'')
            strbuf_puts(b, "'\\''");
        else
            strbuf_putc(b, *p);
    }
    strbuf_putc(b, '\'');
}

void bo_py_float(double v, char *out, size_t n)
{
    if (v != v) {
        snprintf(out, n, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(out, n, v < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (v == 0) {
        snprintf(out, n, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    /* repr(float): the shortest digits that read back as v, in fixed notation
     * for exponents -4..15 (with ".0" when whole), else as 1.5e-05 */
    char e[48];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        if (strtod(e, NULL) == v)
            break;
    }
    char dg[24];
    int nd = 0, neg = e[0] == '-';
    const char *q = e + neg;
    for (; *q && *q != 'e' && nd < (int)sizeof dg - 1; q++)
        if (*q >= '0' && *q <= '9')
            dg[nd++] = *q;
    int ex = *q == 'e' ? atoi(q + 1) : 0;
    while (nd > 1 && dg[nd - 1] == '0')
        nd--;
    strbuf b = {0};
    if (neg)
        strbuf_putc(&b, '-');
    if (ex >= -4 && ex < 16) {
        if (ex < 0) {
            strbuf_puts(&b, "0.");
            for (int i = 0; i < -ex - 1; i++)
                strbuf_putc(&b, '0');
            strbuf_putn(&b, dg, (size_t)nd);
        } else {
            for (int i = 0; i <= ex; i++)
                strbuf_putc(&b, i < nd ? dg[i] : '0');
            strbuf_putc(&b, '.');
            if (nd > ex + 1)
                strbuf_putn(&b, dg + ex + 1, (size_t)(nd - ex - 1));
            else
                strbuf_putc(&b, '0');
        }
    } else {
        strbuf_putc(&b, dg[0]);
        if (nd > 1) {
            strbuf_putc(&b, '.');
            strbuf_putn(&b, dg + 1, (size_t)(nd - 1));
        }
        strbuf_printf(&b, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
    char *t = strbuf_take(&b);
    snprintf(out, n, "%s", t ? t : "0.0");
    free(t);
}

void bo_json_floats(cJSON *obj, const char *const *keys)
{
    for (; *keys; keys++) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, *keys);
        if (cJSON_IsNumber(v)) {
            char t[48];
            bo_py_float(v->valuedouble, t, sizeof t);
            cJSON_ReplaceItemInObjectCaseSensitive(obj, *keys, cJSON_CreateRaw(t));
        } else if (cJSON_IsArray(v)) {
            cJSON *it;
            cJSON_ArrayForEach(it, v) if (cJSON_IsNumber(it))
            {
                char t[48];
                bo_py_float(it->valuedouble, t, sizeof t);
                cJSON *raw = cJSON_CreateRaw(t);
                cJSON_ReplaceItemViaPointer(v, it, raw);
                it = raw;
            }
        }
    }
}

void bo_self_path(char *out, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    out[n > 0 ? n : 0] = 0;
    if (n <= 0)
        snprintf(out, len, "lis");
}

void bo_lis_command(strbuf *b, const char *sub, const char *dir)
{
    char self[4096];
    bo_self_path(self, sizeof self);
    bo_shell_word(b, self);
    strbuf_printf(b, " %s ", sub);
    bo_shell_word(b, dir);
}
