/* ext.c - what the runtime offers the layers built on it (net/): the
 * listener a spec asked for, a few accessors, and one slot per context and
 * per sandbox handle for their own state. The runtime does not look inside. */
#include "internal.h"

int lis_sandbox_take_listener(lis_sandbox *sb)
{
    int fd = sb->listener_fd;
    sb->listener_fd = -1;
    return fd;
}

int lis_sandbox_take_monitor(lis_sandbox *sb)
{
    int fd = sb->monitor_fd;
    sb->monitor_fd = -1;
    return fd;
}

int lis_sandbox_pidfd(const lis_sandbox *sb) { return sb->pidfd; }
lis_ctx *lis_sandbox_ctx(const lis_sandbox *sb) { return sb->ctx; }
const char *lis_ctx_init_path(const lis_ctx *ctx) { return ctx->init_path; }

void lis_sandbox_set_ext(lis_sandbox *sb, void *data, void (*release)(void *data))
{
    sb->ext = data;
    sb->ext_release = release;
}

void *lis_sandbox_ext(const lis_sandbox *sb) { return sb->ext; }

int lis_ctx_set_ext(lis_ctx *ctx, void *data, void (*release)(void *data))
{
    void *expected = NULL;
    if (!__atomic_compare_exchange_n(&ctx->ext, &expected, data, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return -1;
    ctx->ext_release = release; /* read only by lis_ctx_free */
    return 0;
}

void *lis_ctx_ext(lis_ctx *ctx) { return __atomic_load_n(&ctx->ext, __ATOMIC_ACQUIRE); }
