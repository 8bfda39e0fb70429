/* cmd_serve.c - `lis serve` (liblis-serve.so): flags to lis_serve_opts, and
 * `lis serve --tls-init DIR`. */
#include "cli_util.h"
#include "lis_serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lis_cli_serve_main(int argc, char **argv);

static const char usage_text[] =
    "usage: lis serve [options]\n"
    "       lis serve --tls-init DIR [--tls-san NAME]...\n"
    "  A Docker-Engine-API compatible socket (API 1.41): docker-py and the docker CLI\n"
    "  drive lis sandboxes through it (docs/serve.md).\n"
    "  --socket PATH       the unix socket (default $XDG_RUNTIME_DIR/lis/docker.sock), mode 0600\n"
    "  --tcp HOST:PORT     also listen on TCP, with mutual TLS (--tls-dir), as dockerd's\n"
    "                      --tlsverify (0.0.0.0:2376 for other nodes)\n"
    "  --tls-dir DIR       ca.pem, server-cert.pem, server-key.pem for --tcp; clients use\n"
    "                      DIR's ca.pem, cert.pem, key.pem (DOCKER_CERT_PATH=DIR)\n"
    "  --tls-init DIR      make DIR's CA, server and client certificates (0600), then exit;\n"
    "                      --tls-san NAME adds a name or address the server is reached by\n"
    "  --tcp-no-auth-insecure\n"
    "                      --tcp without TLS and WITHOUT AUTHENTICATION: whoever reaches the\n"
    "                      port runs code as you; only where every host is trusted\n"
    "  --net MODE          default network of containers: none (default), proxy, host\n"
    "  --memory SIZE       default memory limit per container (default 200M; 'unlimited')\n"
    "  --pids N            default process limit (default 1024)\n"
    "  --cpus N            default CPU limit (e.g. 1.5; default unlimited)\n"
    "  --disk SIZE         default writable space (default 1G)\n"
    "  --workers N         threads for sandbox create/remove, copies and pulls (default 2)\n"
    "  --idle-timeout SEC  exit after SEC seconds with no container and no connection\n"
    "                      (default: never)\n"
    "  --max-conns N       open connections at most (default 4096; the oldest idle one\n"
    "                      makes room for a new one)\n"
    "  --max-conns-per-client N\n"
    "                      connections from one TCP address at most (default 1024)\n"
    "  --conn-timeout SEC  a connection with no request (or a request body with no byte)\n"
    "                      for SEC seconds is closed (default 60)\n"
    "  --rl-max-live N     the episodes API (docs/rl.md): sandboxes alive at once at most\n"
    "                      (default 512)\n"
    "  --rl-max-n N        episodes per group or branch at most (default 512)\n"
    "  --rl-results-mem N  finished episodes kept in memory at most; older ones are read\n"
    "                      back from disk when asked for (default 4096)\n"
    "  -v, --verbose       log each request on stderr\n"
    "then: export DOCKER_HOST=unix://$XDG_RUNTIME_DIR/lis/docker.sock\n";

#define MAX_SANS 32

static int tls_init(const char *dir, const char *const *sans, size_t nsans)
{
    lis_error err = {0};
    char names[4096] = "";
    if (lis_serve_tls_init(dir, sans, nsans, names, sizeof names, &err) < 0)
        return cli_fail(&err);
    printf("%s: ca.pem, server-cert.pem, server-key.pem (for lis serve --tcp ADDR --tls-dir %s)\n"
           "  and cert.pem, key.pem for clients (copy ca.pem, cert.pem, key.pem to them;\n"
           "  DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=DIR). The server answers to: %s\n",
           dir, dir, names);
    return 0;
}

static int number(const char *flag, const char *v, long max, long *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || !*v || x <= 0 || x > max) {
        cli_error("serve: %s wants a positive number up to %ld, got '%s'", flag, max, v);
        return -1;
    }
    *out = x;
    return 0;
}

int lis_cli_serve_main(int argc, char **argv)
{
    lis_serve_opts o = {0};
    const char *tls_init_dir = NULL, *sans[MAX_SANS];
    size_t nsans = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
        long x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            return 0;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            o.verbose = 1;
            continue;
        } else if (!strcmp(a, "--tcp-no-auth-insecure")) {
            o.tcp_no_auth = 1;
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
        } else if (!strcmp(a, "--tls-dir")) {
            o.tls_dir = v;
        } else if (!strcmp(a, "--tls-init")) {
            tls_init_dir = v;
        } else if (!strcmp(a, "--tls-san")) {
            if (nsans == MAX_SANS) {
                cli_error("serve: at most %d --tls-san", MAX_SANS);
                return 2;
            }
            sans[nsans++] = v;
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
        } else if (!strcmp(a, "--pids")) {
            if (number(a, v, 1000000, &x) < 0)
                return 2;
            o.limits.pids = (uint64_t)x;
        } else if (!strcmp(a, "--workers")) {
            if (number(a, v, 1000000, &x) < 0)
                return 2;
            o.workers = (int)(x > 64 ? 64 : x);
        } else if (!strcmp(a, "--idle-timeout")) {
            if (number(a, v, 30L * 86400, &x) < 0)
                return 2;
            o.idle_timeout = (double)x;
        } else if (!strcmp(a, "--conn-timeout")) {
            if (number(a, v, 86400, &x) < 0)
                return 2;
            o.conn_timeout = (double)x;
        } else if (!strcmp(a, "--max-conns") || !strcmp(a, "--max-conns-per-client")) {
            if (number(a, v, 1000000, &x) < 0)
                return 2;
            *(!strcmp(a, "--max-conns") ? &o.max_conns : &o.max_conns_per_client) = (unsigned)x;
        } else if (!strcmp(a, "--rl-max-live") || !strcmp(a, "--rl-max-n")) {
            if (number(a, v, 65536, &x) < 0)
                return 2;
            *(!strcmp(a, "--rl-max-live") ? &o.rl_max_live : &o.rl_max_n) = (int)x;
        } else if (!strcmp(a, "--rl-results-mem")) {
            if (number(a, v, 10000000, &x) < 0)
                return 2;
            o.rl_results_mem = (int)x;
        } else if (!strcmp(a, "--cpus")) {
            char *end;
            double c = strtod(v, &end);
            if (*end || c <= 0) {
                cli_error("serve: --cpus wants a positive number, got '%s'", v);
                return 2;
            }
            o.limits.cpu_millis = (uint64_t)(c * 1000);
        } else {
            cli_error("serve: unknown option %s (lis serve --help)", a);
            return 2;
        }
        i++;
    }
    if (nsans && !tls_init_dir) {
        cli_error("serve: --tls-san goes with --tls-init DIR");
        return 2;
    }
    if (tls_init_dir)
        return tls_init(tls_init_dir, sans, nsans);
    lis_error err = {0};
    if (lis_serve_run(&o, &err) < 0)
        return cli_fail(&err);
    return 0;
}
