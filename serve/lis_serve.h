/* lis_serve.h - the public API of serve/: `lis serve`, a Docker-Engine-API
 * compatible socket (docs/serve.md). Containers are lis sandboxes, images
 * the rootfs store's tags. Built on lis.h, lis_net.h and rootfs.h only. */
#ifndef LIS_SERVE_H
#define LIS_SERVE_H

#include "lis.h"

typedef struct lis_serve_opts {
    const char *socket_path;        /* NULL: <run_dir>/docker.sock */
    const char *tcp;                /* "127.0.0.1:PORT" for a TCP listener too; NULL: none */
    lis_net_mode net;               /* default network of a container (NetworkMode "default") */
    lis_limits limits;              /* default envelope of a container */
    int workers;                    /* threads for sandbox create/destroy and pulls; 0: 2 */
    int verbose;                    /* one log line per request on stderr */
    const char *run_dir, *data_dir; /* NULL: the lis defaults */
} lis_serve_opts;

/* Serves until SIGTERM or SIGINT; then stops every container not created to
 * persist and returns 0. -1 with err when it cannot start. */
int lis_serve_run(const lis_serve_opts *opts, lis_error *err);

#endif
