/* attach.c - net/ on top of the runtime: a --net proxy sandbox is an
 * ordinary sandbox (lis_sandbox_create) with a listener inside its network
 * namespace (spec.listen_port) and http_proxy & co. in its environment; the
 * listener is then served by the context's proxy (ephemeral sandboxes) or
 * handed to `lis proxyd` (persistent ones, proxyd.c).
 *
 * The context's proxy lives in the context's ext slot (made with the first
 * proxy sandbox, freed first thing by lis_ctx_free); an ephemeral sandbox's
 * port in its handle's ext slot (killed when the handle goes). */
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const proxy_env[] = {
    "http_proxy=http://127.0.0.1:3128",
    "https_proxy=http://127.0.0.1:3128",
    "HTTP_PROXY=http://127.0.0.1:3128",
    "HTTPS_PROXY=http://127.0.0.1:3128",
    "no_proxy=localhost,127.0.0.1,::1",
    "NO_PROXY=localhost,127.0.0.1,::1",
    NULL,
};

static void ctx_release(void *data) { net_proxy_free(data); }

/* The context's proxy, created on first use; with its thread unless manual. */
static lis_proxy *ctx_proxy(lis_ctx *ctx, int manual, lis_error *err)
{
    lis_proxy *px = lis_ctx_ext(ctx);
    if (px)
        return px;
    px = net_proxy_new(0, err);
    if (!px)
        return NULL;
    px->manual = manual;
    if (lis_ctx_set_ext(ctx, px, ctx_release) < 0) {
        net_proxy_free(px); /* another thread was first */
        return lis_ctx_ext(ctx);
    }
    if (!manual) {
        int rc = net_start_thread(&px->thread, net_proxy_main, px);
        if (rc) {
            lis_fail_errnum(err, rc, "starting the proxy thread");
            return NULL;
        }
        px->has_thread = 1;
    }
    return px;
}

int lis_net_manual(lis_ctx *ctx, lis_error *err)
{
    lis_proxy *px = ctx_proxy(ctx, 1, err);
    if (!px)
        return -1;
    if (!px->manual)
        return lis_fail(err, EBUSY,
                        "the context's proxy already runs in its own thread: ask for "
                        "manual pumping before the first --net proxy sandbox");
    return px->epfd;
}

int lis_net_step(lis_ctx *ctx, lis_error *err)
{
    lis_proxy *px = lis_ctx_ext(ctx);
    if (!px || !px->manual)
        return 0;
    if (net_proxy_step(px, 0) < 0)
        return lis_fail_errno(err, "proxy: epoll_wait");
    return 0;
}

/* The sandbox handle is going: stop serving its listener. */
static void port_release(void *data)
{
    net_port *p = data;
    lis_proxy *px = p->px;
    pthread_mutex_lock(&px->mu);
    net_port_kill(px, p);
    pthread_mutex_unlock(&px->mu);
}

/* Ephemeral sandbox: this process serves its listener (dup'ed). */
static int attach(lis_ctx *ctx, lis_sandbox *sb, const lis_net_rules *r, int listen_fd,
                  lis_error *err)
{
    lis_proxy *px = ctx_proxy(ctx, 0, err);
    if (!px)
        return -1;
    lis_netrules rules;
    if (lis_netrules_init(&rules, r->allow_domains, r->deny_domains, r->allow_host_network, err) <
        0)
        return -1;
    int fd = fcntl(listen_fd, F_DUPFD_CLOEXEC, 3);
    net_port *p = fd >= 0 ? net_port_new(lis_sandbox_name(sb), &rules, fd, -1) : NULL;
    if (!p) {
        if (fd >= 0)
            close(fd);
        lis_netrules_free(&rules);
        return lis_fail_errnum(err, errno ? errno : ENOMEM, "attaching the proxy");
    }
    pthread_mutex_lock(&px->mu);
    int rc = net_port_add(px, p);
    int e = errno;
    pthread_mutex_unlock(&px->mu);
    if (rc < 0) {
        close(fd);
        lis_netrules_free(&p->rules);
        free(p);
        return lis_fail_errnum(err, e, "attaching the proxy: polling the sandbox's listener");
    }
    lis_sandbox_set_ext(sb, p, port_release);
    return 0;
}

int lis_net_sandbox_create(lis_ctx *ctx, const lis_sandbox_spec *spec, const lis_net_rules *rules,
                           lis_sandbox **out, lis_error *err)
{
    static const lis_net_rules none = {0};
    if (!rules)
        rules = &none;
    if (spec->net != LIS_NET_PROXY) {
        *out = NULL;
        if ((rules->allow_domains && rules->allow_domains[0]) ||
            (rules->deny_domains && rules->deny_domains[0]) || rules->allow_host_network)
            return lis_fail(err, EINVAL,
                            "--allow-domain, --deny-domain and --allow-host-network "
                            "apply to --net proxy");
        return lis_sandbox_create(ctx, spec, out, err);
    }
    /* http_proxy & co. first: spec->env may override them */
    size_t n = 0;
    while (spec->env && spec->env[n])
        n++;
    size_t np = sizeof proxy_env / sizeof proxy_env[0] - 1;
    const char **env = calloc(np + n + 1, sizeof *env);
    if (!env) {
        *out = NULL;
        return lis_oom(err);
    }
    memcpy(env, proxy_env, np * sizeof *env);
    for (size_t i = 0; i < n; i++)
        env[np + i] = spec->env[i];
    lis_sandbox_spec s = *spec;
    s.env = env;
    s.listen_port = LIS_NET_PROXY_PORT;
    int rc = lis_sandbox_create(ctx, &s, out, err);
    free(env);
    if (rc < 0)
        return -1;
    lis_sandbox *sb = *out;
    /* An ephemeral sandbox is served by this process, a persistent one by
     * the per-user daemon (proxyd.c). */
    int fd = lis_sandbox_take_listener(sb);
    int prc = fd < 0          ? lis_fail(err, EIO, "the sandbox has no proxy listener")
              : spec->persist ? net_proxyd_register(ctx, sb, rules, fd, err)
                              : attach(ctx, sb, rules, fd, err);
    if (fd >= 0)
        close(fd);
    if (prc < 0) {
        *out = NULL;
        lis_error ignore;
        lis_sandbox_destroy(sb, &ignore);
        return lis_wrap(err, "creating sandbox %s", spec->name ? spec->name : "");
    }
    return 0;
}
