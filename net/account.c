/* account.c - what the proxy counts per sandbox: requests (refused ones
 * included), refused requests, bytes to and from the sandbox. The loop adds
 * with relaxed atomics (net_count in net.h) while any thread reads. */
#include "net.h"

#include <string.h>

void net_port_counters(const net_port *p, lis_net_counters *c)
{
    c->requests = net_load(&p->requests);
    c->denied = net_load(&p->denied);
    c->bytes_in = net_load(&p->bytes_in);
    c->bytes_out = net_load(&p->bytes_out);
}

void lis_net_sandbox_counters(lis_sandbox *sb, lis_net_counters *c)
{
    memset(c, 0, sizeof *c);
    const net_port *p = lis_sandbox_ext(sb); /* attach.c: served by this process */
    if (p) {
        net_port_counters(p, c);
        return;
    }
    net_proxyd_stats(lis_ctx_run_dir(lis_sandbox_ctx(sb)), lis_sandbox_name(sb), c);
}

void lis_net_counters_by_name(lis_ctx *ctx, const char *name, lis_net_counters *c)
{
    memset(c, 0, sizeof *c);
    net_proxyd_stats(lis_ctx_run_dir(ctx), name, c);
}
