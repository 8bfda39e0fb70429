/* lis_serve.h - the public API of serve/: `lis serve`, a Docker-Engine-API
 * compatible socket (docs/serve.md). Containers are lis sandboxes, images
 * the rootfs store's tags. Built on lis.h, lis_net.h and rootfs.h only. */
#ifndef LIS_SERVE_H
#define LIS_SERVE_H

#include "lis.h"

typedef struct lis_serve_opts {
    const char *socket_path; /* NULL: <run_dir>/docker.sock */
    /* "HOST:PORT" ([V6]:PORT) for a TCP listener too; NULL: none. It needs
     * tls_dir (mutual TLS, as dockerd's --tlsverify), unless tcp_no_auth. */
    const char *tcp;
    const char *tls_dir; /* ca.pem, server-cert.pem, server-key.pem (lis_serve_tls_init) */
    int tcp_no_auth;     /* plain TCP, no authentication: a trusted private network only */
    lis_net_mode net;    /* default network of a container (NetworkMode "default") */
    lis_limits limits;   /* default envelope of a container */
    int workers;         /* threads for sandbox create/destroy and pulls; 0: 2 */
    int verbose;         /* one log line per request on stderr */
    const char *run_dir, *data_dir; /* NULL: the lis defaults */
    /* Seconds with no container and no connection after which the server exits
     * (as podman's system service --time); 0: never. */
    double idle_timeout;
    unsigned max_conns;            /* open connections at most; 0: 4096 */
    double conn_timeout;           /* seconds a connection may idle, or a body stall; 0: 60 */
    unsigned max_conns_per_client; /* from one TCP client address; 0: 1024 */
    /* the episodes API (docs/rl.md): sandboxes alive at once, episodes per
     * group or branch; 0: 512 */
    int rl_max_live, rl_max_n;
    int rl_results_mem; /* finished episodes kept in memory (0: 4096; the rest on disk) */
} lis_serve_opts;

/* Serves until SIGTERM or SIGINT (or idle_timeout); then stops every container
 * and returns 0. -1 with err when it cannot start. */
int lis_serve_run(const lis_serve_opts *opts, lis_error *err);

/* `lis serve --tls-init DIR`: a CA, a server certificate (for this host's
 * names and addresses and extra_names) and a client certificate, as
 * DIR/ca.pem, server-cert.pem, server-key.pem, cert.pem, key.pem (0600; DIR
 * 0700, made when missing; nothing is overwritten). The server's names, ", "
 * separated, go into names_out. */
int lis_serve_tls_init(const char *dir, const char *const *extra_names, size_t nextra,
                       char *names_out, size_t names_len, lis_error *err);

#endif
