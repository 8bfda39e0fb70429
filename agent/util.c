/* util.c - strings, errors, time, JSON printing and output cleaning for the
 * agent: the bottom of agent/, it uses nothing else of it. */
#include "agent_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void strbuf_grow(strbuf *b, size_t extra)
{
    if (b->oom)
        return;
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return;
    }
    b->s = s;
    b->cap = cap;
}

void strbuf_putn(strbuf *b, const char *p, size_t n)
{
    strbuf_grow(b, n);
    if (b->oom)
        return;
    if (n)
        memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = 0;
}

void strbuf_puts(strbuf *b, const char *s) { strbuf_putn(b, s, strlen(s)); }
void strbuf_putc(strbuf *b, char c) { strbuf_putn(b, &c, 1); }

void strbuf_printf(strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    strbuf_grow(b, (size_t)n);
    if (b->oom)
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *strbuf_take(strbuf *b)
{
    if (b->oom) {
        strbuf_release(b);
        return NULL;
    }
    if (!b->s)
        strbuf_grow(b, 0);
    if (b->oom)
        return NULL;
    b->s[b->len] = 0;
    char *s = b->s;
    memset(b, 0, sizeof *b);
    return s;
}

void strbuf_release(strbuf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

char *agent_strndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

char *agent_strdup(const char *s) { return agent_strndup(s, strlen(s)); }

void agent_sleep(double seconds)
{
    if (seconds <= 0)
        return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

char *agent_read_host_file(const char *path, size_t *len, lis_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        lis_fail_errno(err, "cannot read %s", path);
        return NULL;
    }
    strbuf b = {0};
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        strbuf_putn(&b, buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        strbuf_release(&b);
        lis_fail(err, EIO, "error reading %s", path);
        return NULL;
    }
    if (len)
        *len = b.len;
    char *s = strbuf_take(&b);
    if (!s)
        lis_fail(err, ENOMEM, "out of memory reading %s", path);
    return s;
}

/* cJSON_Print indents with tabs and separates with ":\t"; raw tabs never
 * occur inside its strings (they are escaped), so rewriting them gives the
 * layout of Python's json.dump(indent=2). */
char *agent_json_pretty(const cJSON *j)
{
    char *raw = lis_json_print(j, 1);
    if (!raw)
        return NULL;
    strbuf b = {0};
    int line_start = 1;
    for (const char *p = raw; *p; p++) {
        if (*p == '\t') {
            if (line_start)
                strbuf_puts(&b, "  ");
            else
                strbuf_putc(&b, ' ');
            continue;
        }
        line_start = *p == '\n';
        strbuf_putc(&b, *p);
    }
    free(raw);
    return strbuf_take(&b);
}

size_t agent_utf8_prefix(const char *s, size_t n, size_t max_chars)
{
    size_t i = 0, chars = 0;
    while (i < n && chars < max_chars) {
        unsigned char c = (unsigned char)s[i++];
        if (c >= 0xC0)
            while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
                i++;
        chars++;
    }
    return i;
}

long agent_json_long(const cJSON *item)
{
    if (!cJSON_IsNumber(item) || item->valuedouble != item->valuedouble)
        return 0;
    const double max = 9007199254740992.0; /* 2^53: beyond it a double is no integer */
    double v = item->valuedouble;
    return v >= max ? (long)max : v <= -max ? -(long)max : (long)v;
}

char *agent_clean_output(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    strbuf b = {0};
    strbuf_putn(&b, "", 0);
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c == '\r' || c == 0) {
            i++;
            continue;
        }
        if (c == 0x1b && i + 1 < n && p[i + 1] == '[') { /* CSI: ESC [ params inter final */
            size_t j = i + 2;
            while (j < n && p[j] >= 0x30 && p[j] <= 0x3F)
                j++;
            while (j < n && p[j] >= 0x20 && p[j] <= 0x2F)
                j++;
            if (j < n && p[j] >= 0x40 && p[j] <= 0x7E) {
                i = j + 1;
                continue;
            }
        }
        size_t l = lis_utf8_seq(s + i, n - i);
        if (!l) {
            strbuf_puts(&b, "\xEF\xBF\xBD");
            i++;
            continue;
        }
        strbuf_putn(&b, s + i, l);
        i += l;
    }
    return strbuf_take(&b);
}

void agent_json_merge(cJSON *body, const cJSON *extra)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, extra)
    {
        cJSON_DeleteItemFromObjectCaseSensitive(body, it->string);
        cJSON_AddItemToObject(body, it->string, cJSON_Duplicate(it, 1));
    }
}
