/* lis_net.h - the public API of net/: the HTTP(S) egress proxy that gives
 * --net proxy sandboxes the internet without a network device of their own
 * (docs/network.md).
 *
 * net/ is built on the runtime's public API only (lis.h): the runtime makes
 * a loopback listener inside the sandbox's network namespace
 * (spec.listen_port) and hands it over (lis_sandbox_take_listener); net/
 * serves it from outside, with the rules below, in this process (ephemeral
 * sandboxes) or in `lis proxyd` (persistent ones). */
#ifndef LIS_NET_H
#define LIS_NET_H

#include "lis.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LIS_NET_PROXY_PORT 3128 /* the proxy's port on the sandbox's 127.0.0.1 */

/* The egress rules of a proxy sandbox. */
typedef struct lis_net_rules {
    /* globs as in *.example.com, NULL-terminated; deny wins; with any allow
     * pattern, hosts matching none are refused */
    const char *const *allow_domains;
    const char *const *deny_domains;
    int allow_host_network; /* let the proxy reach loopback/private/link-local */
} lis_net_rules;

/* lis_sandbox_create, and for spec->net == LIS_NET_PROXY the proxy: the
 * sandbox gets http_proxy & co. (spec->env may override them) and its
 * listener on 127.0.0.1:3128 is served by this context (ephemeral: by a
 * thread of ctx, started with its first proxy sandbox, unless
 * lis_net_manual) or by `lis proxyd` (persistent, spec->persist). rules may
 * be NULL; rules with another mode are an error. */
int lis_net_sandbox_create(lis_ctx *ctx, const lis_sandbox_spec *spec, const lis_net_rules *rules,
                           lis_sandbox **out, lis_error *err);

/* Requests (refused ones included), refused requests, and bytes the sandbox
 * received from / sent to the proxy. */
typedef struct lis_net_counters {
    uint64_t requests, denied, bytes_in, bytes_out;
} lis_net_counters;
/* The counters of a proxy sandbox so far: from this process when it serves
 * it, else from `lis proxyd` (persistent); zeros when nobody serves it. The
 * traffic of one command is the difference around it. */
void lis_net_sandbox_counters(lis_sandbox *sb, lis_net_counters *c);
/* A persistent sandbox of ctx's run dir by name, from `lis proxyd`. */
void lis_net_counters_by_name(lis_ctx *ctx, const char *name, lis_net_counters *c);

/* One request of a proxy sandbox, as the proxy saw it, told when it ends. */
typedef struct lis_net_event {
    const char *host;    /* as asked, normalised; "" when the head was unreadable */
    unsigned short port; /* 0 when unknown */
    const char *method;  /* "CONNECT" (a tunnel), "GET", ...; "" when unknown */
    const char *addr;    /* the address connected to, "" when none */
    int resolved;        /* the proxy looked the name up (DNS) for it */
    int allowed;         /* 0: refused by a rule, named in rule */
    int status;          /* the proxy's own error reply (403, 502, ...), 0 when relayed */
    const char *rule;    /* why it was refused or failed, "" otherwise */
    uint64_t bytes_up;   /* sandbox -> upstream (the request head included) */
    uint64_t bytes_down; /* upstream -> sandbox */
    double start, end;   /* lis_now() */
} lis_net_event;
typedef void (*lis_net_event_fn)(void *arg, const lis_net_event *ev);
/* From now on fn(arg, event) is called on the proxy's thread (with its lock
 * held: fn must not call net/) at the end of every request of sb, including
 * those cut when sb goes. fn NULL stops it: once that returns, fn is not
 * running and will not be called again. Only for ephemeral --net proxy
 * sandboxes served by this process (else -1, ENOTSUP). */
int lis_net_sandbox_watch(lis_sandbox *sb, lis_net_event_fn fn, void *arg, lis_error *err);
/* Waits until the proxy has ended every connection of sb (a client that
 * closed is seen on the proxy's thread, a moment after its process
 * exited), at most timeout seconds; 0 when none is open, 1 when some still
 * are. Not with sb's watch fn running on this thread, nor from the thread
 * that pumps a manual proxy (lis_net_step). */
int lis_net_sandbox_settle(lis_sandbox *sb, double timeout);
/* 1 when host matches glob as --allow-domain/--deny-domain match it. */
int lis_net_host_match(const char *glob, const char *host);

/* No proxy thread for ctx: the caller polls the returned fd and calls
 * lis_net_step whenever it is readable. Call it before the first proxy
 * sandbox of ctx (-1 with EBUSY after). */
int lis_net_manual(lis_ctx *ctx, lis_error *err);
/* One non-blocking round of ctx's proxy (manual only; else 0 at once). */
int lis_net_step(lis_ctx *ctx, lis_error *err);

/* The per-user proxy daemon that serves persistent --net proxy sandboxes
 * (`lis proxyd RUN_DIR`, started on demand): returns 0 at once when one
 * already serves run_dir, else forks the daemon (which exits when it has
 * served no sandbox for a few seconds) and returns 0 in the caller. */
int lis_proxyd_serve(const char *run_dir, lis_error *err);

#ifdef __cplusplus
}
#endif
#endif
