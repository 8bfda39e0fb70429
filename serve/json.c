/* json.c - replies (with the headers moby's middleware adds to each), the
 * deferred answers of suspended requests, query and JSON helpers. */
#include "serve.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#ifndef LIS_VERSION
#define LIS_VERSION "0.1.0"
#endif

void sv_resp_headers(struct MHD_Response *r)
{
    MHD_add_response_header(r, "Api-Version", SV_API_VERSION);
    MHD_add_response_header(r, "Server", "lis/" LIS_VERSION " (linux)");
    MHD_add_response_header(r, "Ostype", "linux");
    MHD_add_response_header(r, "Docker-Experimental", "false");
}

struct MHD_Response *sv_resp_text(const char *text, const char *ctype)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return NULL;
    sv_resp_headers(r);
    if (ctype)
        MHD_add_response_header(r, "Content-Type", ctype);
    return r;
}

struct MHD_Response *sv_resp_json(cJSON *doc)
{
    char *txt = doc ? lis_json_print(doc, 0) : NULL;
    cJSON_Delete(doc);
    if (!txt)
        return NULL;
    size_t n = strlen(txt);
    char *grown = realloc(txt, n + 2);
    if (!grown) {
        free(txt);
        return NULL;
    }
    txt = grown;
    txt[n] = '\n';
    txt[n + 1] = 0;
    struct MHD_Response *r = MHD_create_response_from_buffer(n + 1, txt, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(txt);
        return NULL;
    }
    sv_resp_headers(r);
    MHD_add_response_header(r, "Content-Type", "application/json");
    return r;
}

struct MHD_Response *sv_resp_empty(void)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (r)
        sv_resp_headers(r);
    return r;
}

enum MHD_Result sv_reply(sv_req *q, unsigned status, struct MHD_Response *r)
{
    if (!r)
        return MHD_NO;
    enum MHD_Result rc = MHD_queue_response(q->conn, status, r);
    if (rc == MHD_YES && status == 101)
        q->upgraded = 1; /* its connection is the stream's from now (listen.c) */
    MHD_destroy_response(r);
    return rc;
}

enum MHD_Result sv_reply_json(sv_req *q, unsigned status, cJSON *doc)
{
    return sv_reply(q, status, sv_resp_json(doc));
}

static cJSON *error_doc(const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "message", msg);
    return o;
}

enum MHD_Result sv_reply_error(sv_req *q, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cJSON *o = error_doc(fmt, ap);
    va_end(ap);
    return sv_reply_json(q, status, o);
}

enum MHD_Result sv_reply_status(sv_req *q, unsigned status)
{
    return sv_reply(q, status, sv_resp_empty());
}

void sv_req_suspend(sv_req *q)
{
    if (q->suspended)
        return;
    MHD_suspend_connection(q->conn);
    q->suspended = 1;
    q->next_susp = q->s->suspended;
    q->s->suspended = q;
}

void sv_req_resume(sv_req *q)
{
    if (q->suspended) {
        for (sv_req **p = &q->s->suspended; *p; p = &(*p)->next_susp)
            if (*p == q) {
                *p = q->next_susp;
                break;
            }
        q->suspended = 0;
        MHD_resume_connection(q->conn);
    }
}

void sv_req_finish(sv_req *q, unsigned status, struct MHD_Response *r)
{
    if (q->resp)
        MHD_destroy_response(q->resp);
    q->resp = r ? r : sv_resp_empty();
    q->status = status;
    sv_req_resume(q);
}

void sv_req_finish_error(sv_req *q, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cJSON *o = error_doc(fmt, ap);
    va_end(ap);
    sv_req_finish(q, status, sv_resp_json(o));
}

const char *sv_arg(sv_req *q, const char *key)
{
    return MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, key);
}

int sv_arg_bool(sv_req *q, const char *key)
{
    const char *v = sv_arg(q, key);
    if (!v || !*v)
        return 0;
    static const char *no[] = {"0", "no", "false", "none"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        if (!strcasecmp(v, no[i]))
            return 0;
    return 1;
}

const char *sv_jstr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

int sv_jbool(const cJSON *o, const char *key)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key));
}

double sv_jnum(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

double sv_jsize(const cJSON *v)
{
    if (!v || cJSON_IsNull(v))
        return 0;
    if (cJSON_IsNumber(v))
        return v->valuedouble >= 0 ? v->valuedouble : -1;
    if (!cJSON_IsString(v))
        return -1;
    char *end;
    double n = strtod(v->valuestring, &end);
    if (end == v->valuestring || n < 0)
        return -1;
    double mul = 1;
    switch (*end ? (end[0] | 0x20) : 0) {
    case 0: break;
    case 'k': mul = 1024.0; break;
    case 'm': mul = 1024.0 * 1024; break;
    case 'g': mul = 1024.0 * 1024 * 1024; break;
    default: return -1;
    }
    if (*end && end[1] && strcasecmp(end + 1, "b") && strcasecmp(end + 1, "ib"))
        return -1;
    return n * mul;
}

int sv_env_append(cJSON *arr, const cJSON *v)
{
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsObject(v))
        return -1;
    for (const cJSON *e = v->child; e; e = e->next) {
        if (!cJSON_IsString(e) || strchr(e->string, '=') || !*e->string)
            return -1;
        size_t n = strlen(e->string) + strlen(e->valuestring) + 2;
        char *kv = malloc(n);
        if (!kv)
            return -1;
        snprintf(kv, n, "%s=%s", e->string, e->valuestring);
        cJSON_AddItemToArray(arr, cJSON_CreateString(kv));
        free(kv);
    }
    return 0;
}

char **sv_jstrv(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(v)) {
        char **r = calloc(2, sizeof *r);
        if (r && !(r[0] = strdup(v->valuestring))) {
            free(r);
            return NULL;
        }
        return r;
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
        return NULL;
    size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
    char **r = calloc(n + 1, sizeof *r);
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
    {
        if (r && cJSON_IsString(e) && !(r[i++] = strdup(e->valuestring))) {
            sv_strv_free(r); /* all or nothing */
            return NULL;
        }
    }
    return r;
}

size_t sv_strv_len(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

char **sv_strv_dup(char *const *v)
{
    size_t n = sv_strv_len(v);
    char **r = calloc(n + 1, sizeof *r);
    for (size_t i = 0; r && i < n; i++)
        if (!(r[i] = strdup(v[i]))) {
            sv_strv_free(r);
            return NULL;
        }
    return r;
}

void sv_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

void sv_rfc3339(double t, char *buf, size_t len)
{
    if (t <= 0) {
        snprintf(buf, len, "0001-01-01T00:00:00Z");
        return;
    }
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    char b[32];
    strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%09ldZ", b, (long)((t - (double)s) * 1e9));
}

void sv_hexid(char out[65])
{
    unsigned char r[32] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, r, sizeof r) != (ssize_t)sizeof r) {
            /* fall back to the clock below */
        }
        close(fd);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r[0] ^= (unsigned char)ts.tv_nsec;
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", r[i]);
}
