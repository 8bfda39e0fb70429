/* cmd_serve.c - `lis serve` (liblis-serve.so): flags to lis_serve_opts. */
#include "cli_util.h"
#include "lis_serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lis_cli_serve_main(int argc, char **argv);

static const char usage_text[] =
    "usage: lis serve [options]\n"
    "  A Docker-Engine-API compatible socket (API 1.41): docker-py and the docker CLI\n"
    "  drive lis sandboxes through it (docs/serve.md).\n"
    "  --socket PATH     the unix socket (default $XDG_RUNTIME_DIR/lis/docker.sock), mode 0600\n"
    "  --tcp HOST:PORT   also listen on TCP (no authentication: keep it on 127.0.0.1)\n"
    "  --net MODE        default network of containers: none (default), proxy, host\n"
    "  --memory SIZE     default memory limit per container (default 200M; 'unlimited')\n"
    "  --pids N          default process limit (default 1024)\n"
    "  --cpus N          default CPU limit (e.g. 1.5; default unlimited)\n"
    "  --disk SIZE       default writable space (default 1G)\n"
    "  --workers N       threads for sandbox create/remove, copies and pulls (default 2)\n"
    "  -v, --verbose     log each request on stderr\n"
    "then: export DOCKER_HOST=unix://$XDG_RUNTIME_DIR/lis/docker.sock\n";

int lis_cli_serve_main(int argc, char **argv)
{
    lis_serve_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            return 0;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            o.verbose = 1;
            continue;
        }
        if (!v) {
            cli_error("serve: unknown option or missing value: %s (lis serve --help)", a);
            return 2;
        }
        if (!strcmp(a, "--socket")) {
            o.socket_path = v;
        } else if (!strcmp(a, "--tcp")) {
            o.tcp = v;
        } else if (!strcmp(a, "--net")) {
            if (!strcmp(v, "none"))
                o.net = LIS_NET_NONE;
            else if (!strcmp(v, "proxy"))
                o.net = LIS_NET_PROXY;
            else if (!strcmp(v, "host"))
                o.net = LIS_NET_HOST;
            else {
                cli_error("serve: --net wants none, proxy or host, got '%s'", v);
                return 2;
            }
        } else if (!strcmp(a, "--memory") || !strcmp(a, "--disk")) {
            if (cli_parse_size(v, &n) < 0) {
                cli_error("serve: %s wants a size like 512M, 2G or unlimited, got '%s'", a, v);
                return 2;
            }
            *(!strcmp(a, "--memory") ? &o.limits.memory_bytes : &o.limits.disk_bytes) = n;
        } else if (!strcmp(a, "--pids") || !strcmp(a, "--workers")) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || x <= 0 || x > 1000000) {
                cli_error("serve: %s wants a positive number, got '%s'", a, v);
                return 2;
            }
            if (!strcmp(a, "--pids"))
                o.limits.pids = (uint64_t)x;
            else
                o.workers = (int)(x > 64 ? 64 : x);
        } else if (!strcmp(a, "--cpus")) {
            char *end;
            double x = strtod(v, &end);
            if (*end || x <= 0) {
                cli_error("serve: --cpus wants a positive number, got '%s'", v);
                return 2;
            }
            o.limits.cpu_millis = (uint64_t)(x * 1000);
        } else {
            cli_error("serve: unknown option %s (lis serve --help)", a);
            return 2;
        }
        i++;
    }
    lis_error err = {0};
    if (lis_serve_run(&o, &err) < 0)
        return cli_fail(&err);
    return 0;
}
