/* error.c - the one way every area reports a failure: lis_error filled with
 * one line of context (git's usage.c is the model: error_errno adds strerror). */
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void fill(lis_error *err, int code, const char *suffix, const char *fmt, va_list ap)
{
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    if (suffix) {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, ": %s", suffix);
    }
    /* one line, whatever the pieces held (a server's error text, a path) */
    for (char *p = err->msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    err->code = code ? code : EINVAL;
    err->http_status = 0;
}

int lis_fail(lis_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        fill(err, code, NULL, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int lis_fail_errnum(lis_error *err, int errnum, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        fill(err, errnum, strerror(errnum), fmt, ap);
        va_end(ap);
    }
    return -1;
}

int lis_fail_errno(lis_error *err, const char *fmt, ...)
{
    int saved = errno; /* vsnprintf may change it */
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        fill(err, saved, strerror(saved), fmt, ap);
        va_end(ap);
    }
    errno = saved;
    return -1;
}

int lis_oom(lis_error *err) { return lis_fail(err, ENOMEM, "out of memory"); }

int lis_wrap(lis_error *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char prefix[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    return -1;
}

void lis_warn(const lis_ctx *ctx, const char *fmt, ...)
{
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (ctx && ctx->warn) {
        ctx->warn(ctx->warn_arg, line);
        return;
    }
    char out[800];
    int n = snprintf(out, sizeof out, "lis: warning: %s\n", line);
    if (n > (int)sizeof out - 1)
        n = (int)sizeof out - 1;
    if (write(2, out, (size_t)n) < 0) {
        /* standard error is gone: nothing else to tell */
    }
}
