/* error.c - filling lis_error with one line of context. */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int lis_fail(lis_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return -1;
}

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
