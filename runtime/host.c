/* host.c - the top of runtime/: helpers of the public API for callers that
 * hold no context (rootfs/ removing a store entry). They make a short-lived
 * one; no file below this one creates a context. */
#include "internal.h"

#include <errno.h>

int lis_host_rmtree(const char *path, lis_error *err)
{
    int rc = lis_rmtree_here(path);
    if (rc == 0)
        return 0;
    /* files of subordinate ids: remove them as root of the mapped namespace */
    lis_ctx *ctx = lis_ctx_new(NULL, err);
    if (!ctx)
        return -1;
    int r = lis_rmtree(ctx, path, 1, err);
    lis_ctx_free(ctx);
    return r;
}

int lis_host_rmtree_at(int pdfd, const char *name)
{
    int rc = lis_rmtree_at(pdfd, name);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    return 0;
}
