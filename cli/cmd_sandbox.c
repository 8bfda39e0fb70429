/* cmd_sandbox.c - `lis sandbox ...` and `lis doctor`: parse, call lis.h, print. */
#include "cli_util.h"
#include "cmd.h"
#include "lis_net.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct opts {
    const char *rootfs, *image, *name, *hostname, *cwd;
    cli_list env;
    lis_bind binds[64];
    size_t nbinds;
    lis_limits limits;
    lis_net_mode net;
    lis_uidmap_mode uidmap;
    double timeout;
    int interactive, tty, json, all, upper; /* upper: 0 default, 1 disk, 2 tmpfs */
    unsigned pool;
    cli_list allow_domains, deny_domains; /* --net proxy rules */
    int allow_host_network;
} opts;

enum {
    O_ROOTFS = 256,
    O_IMAGE,
    O_NAME,
    O_HOSTNAME,
    O_NET,
    O_UIDMAP,
    O_MEMORY,
    O_PIDS,
    O_CPUS,
    O_TIMEOUT,
    O_CWD,
    O_JSON,
    O_ALL,
    O_DISK,
    O_UPPER,
    O_REQUIRE_LIMITS,
    O_POOL,
    O_ALLOW_DOMAIN,
    O_DENY_DOMAIN,
    O_ALLOW_HOST_NET
};

static const struct option long_opts[] = {
    {"rootfs", required_argument, 0, O_ROOTFS},
    {"image", required_argument, 0, O_IMAGE},
    {"name", required_argument, 0, O_NAME},
    {"hostname", required_argument, 0, O_HOSTNAME},
    {"volume", required_argument, 0, 'v'},
    {"env", required_argument, 0, 'e'},
    {"net", required_argument, 0, O_NET},
    {"uidmap", required_argument, 0, O_UIDMAP},
    {"memory", required_argument, 0, O_MEMORY},
    {"pids", required_argument, 0, O_PIDS},
    {"cpus", required_argument, 0, O_CPUS},
    {"timeout", required_argument, 0, O_TIMEOUT},
    {"cwd", required_argument, 0, O_CWD},
    {"workdir", required_argument, 0, 'w'},
    {"interactive", no_argument, 0, 'i'},
    {"tty", no_argument, 0, 't'},
    {"json", no_argument, 0, O_JSON},
    {"all", no_argument, 0, O_ALL},
    {"disk", required_argument, 0, O_DISK},
    {"require-limits", no_argument, 0, O_REQUIRE_LIMITS},
    {"upper", required_argument, 0, O_UPPER},
    {"pool", required_argument, 0, O_POOL},
    {"allow-domain", required_argument, 0, O_ALLOW_DOMAIN},
    {"deny-domain", required_argument, 0, O_DENY_DOMAIN},
    {"allow-host-network", no_argument, 0, O_ALLOW_HOST_NET},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

static int parse_bind(opts *o, char *arg)
{
    if (o->nbinds >= sizeof o->binds / sizeof o->binds[0]) {
        cli_error("too many -v binds");
        return -1;
    }
    char *c1 = strchr(arg, ':');
    if (!c1 || c1 == arg || c1[1] != '/') {
        cli_error("-v %s: expected HOST:/PATH[:ro]", arg);
        return -1;
    }
    *c1 = 0;
    char *c2 = strchr(c1 + 1, ':');
    lis_bind *b = &o->binds[o->nbinds++];
    b->host_path = arg;
    b->path = c1 + 1;
    b->read_only = 0;
    if (c2) {
        *c2 = 0;
        if (!strcmp(c2 + 1, "ro"))
            b->read_only = 1;
        else if (strcmp(c2 + 1, "rw")) {
            cli_error("-v: unknown mode '%s' (ro or rw)", c2 + 1);
            return -1;
        }
    }
    return 0;
}

/* Returns the index of the first non-option argument, or -1 on error. */
static int parse(int argc, char **argv, opts *o, const char *usage)
{
    memset(o, 0, sizeof *o);
    o->uidmap = LIS_UIDMAP_AUTO;
    o->net = LIS_NET_NONE;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+v:e:w:ith", long_opts, NULL)) != -1) {
        uint64_t v;
        switch (c) {
        case O_ROOTFS: o->rootfs = optarg; break;
        case O_IMAGE: o->image = optarg; break;
        case O_NAME: o->name = optarg; break;
        case O_HOSTNAME: o->hostname = optarg; break;
        case 'v':
            if (parse_bind(o, optarg) < 0)
                return -1;
            break;
        case 'e':
            if (!strchr(optarg, '=')) {
                cli_error("-e %s: expected KEY=VALUE", optarg);
                return -1;
            }
            cli_list_add(&o->env, optarg);
            break;
        case O_NET:
            if (!strcmp(optarg, "none"))
                o->net = LIS_NET_NONE;
            else if (!strcmp(optarg, "host"))
                o->net = LIS_NET_HOST;
            else if (!strcmp(optarg, "proxy"))
                o->net = LIS_NET_PROXY;
            else {
                cli_error("--net %s: expected none, host or proxy", optarg);
                return -1;
            }
            break;
        case O_ALLOW_DOMAIN: cli_list_add(&o->allow_domains, optarg); break;
        case O_DENY_DOMAIN: cli_list_add(&o->deny_domains, optarg); break;
        case O_ALLOW_HOST_NET: o->allow_host_network = 1; break;
        case O_UIDMAP:
            if (!strcmp(optarg, "auto"))
                o->uidmap = LIS_UIDMAP_AUTO;
            else if (!strcmp(optarg, "single"))
                o->uidmap = LIS_UIDMAP_SINGLE;
            else if (!strcmp(optarg, "full"))
                o->uidmap = LIS_UIDMAP_FULL;
            else {
                cli_error("--uidmap %s: expected auto, single or full", optarg);
                return -1;
            }
            break;
        case O_MEMORY:
            if (cli_parse_size(optarg, &v) < 0) {
                cli_error("--memory %s: expected e.g. 200M", optarg);
                return -1;
            }
            o->limits.memory_bytes = v ? v : LIS_UNLIMITED;
            break;
        case O_PIDS:
            if (cli_parse_size(optarg, &v) < 0) {
                cli_error("--pids %s: expected a number", optarg);
                return -1;
            }
            o->limits.pids = v ? v : LIS_UNLIMITED;
            break;
        case O_CPUS: {
            char *end;
            double d = strtod(optarg, &end);
            if (!strcmp(optarg, "unlimited"))
                o->limits.cpu_millis = LIS_UNLIMITED;
            else if (*end || d < 0) {
                cli_error("--cpus %s: expected e.g. 1.5", optarg);
                return -1;
            } else
                o->limits.cpu_millis = d > 0 ? (uint64_t)(d * 1000) : LIS_UNLIMITED;
            break;
        }
        case O_REQUIRE_LIMITS: o->limits.require = 1; break;
        case O_POOL: {
            char *end;
            unsigned long k = strtoul(optarg, &end, 10);
            if (*end || k < 1 || k > 256) {
                cli_error("--pool %s: expected 1 to 256", optarg);
                return -1;
            }
            o->pool = (unsigned)k;
            break;
        }
        case O_TIMEOUT: {
            char *end;
            o->timeout = strtod(optarg, &end);
            if (*end || o->timeout < 0) {
                cli_error("--timeout %s: expected seconds", optarg);
                return -1;
            }
            break;
        }
        case O_CWD:
        case 'w': o->cwd = optarg; break;
        case 'i': o->interactive = 1; break;
        case 't': o->tty = 1; break;
        case O_JSON: o->json = 1; break;
        case O_ALL: o->all = 1; break;
        case O_DISK:
            if (cli_parse_size(optarg, &v) < 0) {
                cli_error("--disk %s: expected a size such as 1G or unlimited (the upper layer "
                          "on disk is --upper disk)",
                          optarg);
                return -1;
            }
            o->limits.disk_bytes = v ? v : LIS_UNLIMITED;
            break;
        case O_UPPER:
            if (!strcmp(optarg, "disk"))
                o->upper = 1;
            else if (!strcmp(optarg, "tmpfs"))
                o->upper = 2;
            else {
                cli_error("--upper %s: expected disk or tmpfs", optarg);
                return -1;
            }
            break;
        case 'h': fputs(usage, stdout); exit(0);
        default:
            cli_error("%s: unknown or incomplete option '%s'\n%s", argv[0], argv[optind - 1],
                      usage);
            return -1;
        }
    }
    return optind;
}

static lis_ctx *open_ctx(void)
{
    lis_error err = {0};
    lis_ctx *ctx = lis_ctx_new(NULL, &err);
    if (!ctx)
        cli_fail(&err);
    return ctx;
}

static int fill_spec(lis_ctx *ctx, opts *o, lis_sandbox_spec *spec, char *imgdir, size_t len)
{
    memset(spec, 0, sizeof *spec);
    if (o->image && o->rootfs) {
        cli_error("give either --rootfs or --image, not both");
        return -1;
    }
    if (o->image) {
        if (cli_resolve_image(ctx, o->image, imgdir, len))
            return -1;
        spec->rootfs = imgdir;
    } else {
        spec->rootfs = o->rootfs;
    }
    if (!spec->rootfs) {
        cli_error("no root filesystem: give --rootfs DIR or --image NAME:TAG");
        return -1;
    }
    spec->name = o->name;
    spec->hostname = o->hostname;
    spec->env = o->env.v;
    spec->binds = o->binds;
    spec->nbinds = o->nbinds;
    spec->limits = o->limits;
    spec->net = o->net;
    spec->uidmap = o->uidmap;
    if (o->net == LIS_NET_HOST)
        cli_error("warning: --net host shares this host's network with the sandbox");
    if ((o->allow_domains.n || o->deny_domains.n || o->allow_host_network) &&
        o->net != LIS_NET_PROXY) {
        cli_error("--allow-domain, --deny-domain and --allow-host-network apply to --net proxy");
        return -1;
    }
    return 0;
}

/* The --net proxy rules of the options. */
static lis_net_rules rules_of(const opts *o)
{
    return (lis_net_rules){.allow_domains = o->allow_domains.v,
                           .deny_domains = o->deny_domains.v,
                           .allow_host_network = o->allow_host_network};
}

/* A context and the spec of the options; NULL with the exit code in *rc. */
static lis_ctx *ctx_and_spec(opts *o, lis_sandbox_spec *spec, char *img, size_t len, int *rc)
{
    lis_ctx *ctx = open_ctx();
    *rc = CLI_EXIT_LIS;
    if (ctx && fill_spec(ctx, o, spec, img, len) < 0) {
        lis_ctx_free(ctx);
        *rc = 2;
        return NULL;
    }
    return ctx;
}

/* ---- running a command ---- */

static int exit_status(const lis_result *res)
{
    if (res->exec_failed) {
        cli_error("%s", res->err_msg);
        return res->exit_code ? res->exit_code : 127;
    }
    if (res->timed_out) {
        cli_error("command timed out; it and every process it started were killed");
        return 124;
    }
    if (res->oom_killed && res->err_msg[0])
        cli_error("%s", res->err_msg); /* "killed: out of memory (limit 200 MiB)" */
    return res->exit_code;
}

static int run_command(lis_sandbox *sb, opts *o, char **cmd)
{
    lis_exec_spec ex = {0};
    ex.argv = (const char *const *)cmd;
    ex.cwd = o->cwd;
    ex.timeout = o->timeout;
    ex.pty = o->tty;
    struct winsize ws;
    if (o->tty && ioctl(0, TIOCGWINSZ, &ws) == 0) {
        ex.rows = ws.ws_row;
        ex.cols = ws.ws_col;
    }
    /* a terminal session gets the owner's TERM */
    static char term[128];
    const char *t = getenv("TERM");
    if (o->tty && t && strlen(t) < sizeof term - 6) {
        snprintf(term, sizeof term, "TERM=%s", t);
        cli_list_add(&o->env, term);
    }
    ex.env = o->env.v;
    /* never our own fds: pipes (or the sandbox's pty) relayed by the CLI */
    lis_error err = {0};
    lis_result res;
    if (cli_run_command(sb, &ex, o->interactive, &res, &err) < 0) {
        lis_result_free(&res);
        return cli_fail(&err);
    }
    int code = exit_status(&res);
    lis_result_free(&res);
    return code;
}

/* ---- sub-commands ---- */

static const char run_usage[] =
    "usage: lis sandbox run (--rootfs DIR | --image NAME[:TAG]) [options] -- CMD [ARG...]\n"
    "  --name N  --hostname H  -v HOST:/PATH[:ro]  -e K=V  -w/--cwd DIR  --timeout SEC\n"
    "  --net none|host|proxy  --uidmap auto|single|full  --memory 200M --pids N --cpus 1.5\n"
    "  --allow-domain GLOB  --deny-domain GLOB  --allow-host-network   (--net proxy rules)\n"
    "  -i (pass stdin)  -t (pseudo-terminal)  --disk 1G (writable space)\n"
    "  --upper tmpfs|disk (where writes go; run: tmpfs, create: disk)\n";

static int cmd_sandbox_run(int argc, char **argv)
{
    opts o;
    int first = parse(argc, argv, &o, run_usage);
    if (first < 0)
        return 2;
    if (first >= argc) {
        cli_error("sandbox run: no command given\n%s", run_usage);
        return 2;
    }
    char img[PATH_MAX];
    lis_sandbox_spec spec;
    int rc;
    lis_ctx *ctx = ctx_and_spec(&o, &spec, img, sizeof img, &rc);
    if (!ctx)
        return rc;
    spec.upper = o.upper == 1 ? LIS_UPPER_DISK : LIS_UPPER_TMPFS;
    lis_error err = {0};
    lis_sandbox *sb;
    lis_net_rules rules = rules_of(&o);
    if (lis_net_sandbox_create(ctx, &spec, &rules, &sb, &err) < 0) {
        lis_ctx_free(ctx);
        return cli_fail(&err);
    }
    int code = run_command(sb, &o, argv + first);
    if (lis_sandbox_destroy(sb, &err) < 0)
        code = cli_fail(&err);
    lis_ctx_free(ctx);
    cli_list_free(&o.env);
    return code;
}

static const char create_usage[] =
    "usage: lis sandbox create (--rootfs DIR | --image NAME[:TAG]) [--name N] [-v HOST:/PATH[:ro]]\n"
    "                          [-e K=V] [--net none|host|proxy] [--uidmap auto|single|full]\n"
    "                          [--memory 200M] [--pids N] [--cpus 1.5]\n"
    "                          [--allow-domain GLOB] [--deny-domain GLOB] [--allow-host-network]\n";

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (h ^ '|') * 1099511628211ull;
}

static uint64_t fnv_num(uint64_t h, unsigned long long v)
{
    char b[32];
    snprintf(b, sizeof b, "%llu", v);
    return fnv(h, b);
}

/* The pool of a spec: spare persistent sandboxes named lispool-<hash>-<rand>;
 * everything that makes two sandboxes differ goes into the hash. */
static void pool_prefix(const lis_sandbox_spec *spec, const lis_net_rules *rules, char *out,
                        size_t len)
{
    uint64_t h = 1469598103934665603ull;
    h = fnv(h, spec->rootfs);
    h = fnv_num(fnv_num(fnv_num(h, spec->uidmap), spec->net), rules->allow_host_network);
    h = fnv_num(fnv_num(fnv_num(h, spec->limits.memory_bytes), spec->limits.pids),
                spec->limits.cpu_millis);
    h = fnv_num(fnv_num(h, spec->limits.disk_bytes), (uint64_t)spec->upper);
    for (const char *const *e = spec->env; e && *e; e++)
        h = fnv(h, *e);
    for (size_t i = 0; i < spec->nbinds; i++)
        h = fnv_num(fnv(fnv(h, spec->binds[i].host_path), spec->binds[i].path),
                    spec->binds[i].read_only);
    for (const char *const *d = rules->allow_domains; d && *d; d++)
        h = fnv(fnv(h, "+"), *d);
    for (const char *const *d = rules->deny_domains; d && *d; d++)
        h = fnv(fnv(h, "-"), *d);
    snprintf(out, len, "lispool-%08x-", (unsigned)(h ^ (h >> 32)));
}

static void random_suffix(char *out, size_t len, const char *prefix)
{
    unsigned r = 0;
    FILE *f = fopen("/dev/urandom", "re");
    if (f) {
        if (fread(&r, sizeof r, 1, f) != 1)
            r = (unsigned)getpid();
        fclose(f);
    }
    snprintf(out, len, "%s%08x", prefix, r);
}

/* Tops the pool up to k spares in a detached process, so the caller returns now. */
static void pool_top_up(lis_ctx *ctx, lis_sandbox_spec spec, const lis_net_rules *rules,
                        const char *prefix, unsigned spares, unsigned k)
{
    if (spares >= k)
        return;
    pid_t p = fork();
    if (p != 0) {
        if (p > 0)
            waitpid(p, NULL, 0);
        return;
    }
    setsid();
    if (fork() != 0)
        _exit(0);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    spec.hostname = "sandbox";
    for (unsigned i = spares; i < k; i++) {
        char name[80];
        random_suffix(name, sizeof name, prefix);
        spec.name = name;
        lis_error err;
        lis_sandbox *sb;
        if (lis_net_sandbox_create(ctx, &spec, rules, &sb, &err) < 0)
            _exit(1);
        lis_sandbox_release(sb);
    }
    _exit(0);
}

/* Claims a spare of the pool under `want` (or a fresh name); 1 when claimed. */
static int pool_claim(lis_ctx *ctx, const char *prefix, const char *want, char *got, size_t len,
                      unsigned *spares)
{
    lis_error err = {0};
    lis_stats *st;
    size_t n;
    *spares = 0;
    if (lis_sandbox_list(ctx, &st, &n, &err) < 0)
        return 0;
    int claimed = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(st[i].name, prefix, strlen(prefix)) || strcmp(st[i].state, "running"))
            continue;
        if (claimed) {
            (*spares)++;
            continue;
        }
        if (want)
            snprintf(got, len, "%s", want);
        else
            random_suffix(got, len, "lis-");
        if (lis_sandbox_rename(ctx, st[i].name, got, &err) == 0)
            claimed = 1;
        else if (err.code == EEXIST) {
            cli_fail(&err);
            claimed = -1;
            break;
        }
    }
    free(st);
    return claimed;
}

static int cmd_sandbox_create(int argc, char **argv)
{
    opts o;
    int first = parse(argc, argv, &o, create_usage);
    if (first < 0)
        return 2;
    if (first < argc) {
        cli_error("sandbox create: unexpected argument '%s'\n%s", argv[first], create_usage);
        return 2;
    }
    char img[PATH_MAX];
    lis_sandbox_spec spec;
    int rc;
    lis_ctx *ctx = ctx_and_spec(&o, &spec, img, sizeof img, &rc);
    if (!ctx)
        return rc;
    spec.persist = 1;
    spec.upper = o.upper == 2 ? LIS_UPPER_TMPFS : LIS_UPPER_DISK;
    lis_net_rules rules = rules_of(&o);
    lis_error err = {0};
    rc = 0;
    char prefix[64], got[80];
    unsigned spares = 0;
    int claimed = 0;
    char real[PATH_MAX];
    if (o.pool) {
        if (realpath(spec.rootfs, real))
            spec.rootfs = real;
        pool_prefix(&spec, &rules, prefix, sizeof prefix);
        claimed = pool_claim(ctx, prefix, o.name, got, sizeof got, &spares);
        if (claimed < 0)
            rc = CLI_EXIT_LIS;
        else if (claimed)
            puts(got);
        fflush(stdout);
    }
    if (!claimed) {
        lis_sandbox *sb;
        if (lis_net_sandbox_create(ctx, &spec, &rules, &sb, &err) < 0) {
            rc = cli_fail(&err);
        } else {
            puts(lis_sandbox_name(sb));
            fflush(stdout);
            lis_sandbox_release(sb);
        }
    }
    if (o.pool && rc == 0) {
        spec.name = NULL;
        pool_top_up(ctx, spec, &rules, prefix, spares, o.pool);
    }
    lis_ctx_free(ctx);
    cli_list_free(&o.env);
    return rc;
}

static const char exec_usage[] =
    "usage: lis sandbox exec NAME [--timeout SEC] [-w/--cwd DIR] [-e K=V] [-i] [-t] -- CMD [ARG...]\n";

static int cmd_sandbox_exec(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            fputs(exec_usage, stdout);
            return 0;
        }
        cli_error("sandbox exec: no sandbox name given\n%s", exec_usage);
        return 2;
    }
    const char *name = argv[1];
    opts o;
    int first = parse(argc - 1, argv + 1, &o, exec_usage);
    if (first < 0)
        return 2;
    first += 1;
    if (first >= argc) {
        cli_error("sandbox exec: no command given\n%s", exec_usage);
        return 2;
    }
    lis_ctx *ctx = open_ctx();
    if (!ctx)
        return CLI_EXIT_LIS;
    lis_error err = {0};
    lis_sandbox *sb;
    if (lis_sandbox_open(ctx, name, &sb, &err) < 0) {
        lis_ctx_free(ctx);
        return cli_fail(&err);
    }
    int code = run_command(sb, &o, argv + first);
    lis_sandbox_release(sb);
    lis_ctx_free(ctx);
    cli_list_free(&o.env);
    return code;
}

/* NAME:/path -> name and path; else a host path. */
static int split_ref(char *s, char **name, char **path)
{
    char *c = strchr(s, ':');
    if (c && c != s && c[1] == '/' && !memchr(s, '/', (size_t)(c - s))) {
        *c = 0;
        *name = s;
        *path = c + 1;
        return 1;
    }
    *name = NULL;
    *path = s;
    return 0;
}

static int cmd_sandbox_cp(int argc, char **argv)
{
    if (argc != 3) {
        cli_error("usage: lis sandbox cp SRC DST   (one of them NAME:/path)");
        return 2;
    }
    char *sn, *sp, *dn, *dp;
    int sin = split_ref(argv[1], &sn, &sp), din = split_ref(argv[2], &dn, &dp);
    if (sin == din) {
        cli_error("sandbox cp: exactly one side must be NAME:/path");
        return 2;
    }
    lis_ctx *ctx = open_ctx();
    if (!ctx)
        return CLI_EXIT_LIS;
    lis_error err = {0};
    lis_sandbox *sb;
    int rc = 0;
    if (lis_sandbox_open(ctx, sin ? sn : dn, &sb, &err) < 0) {
        rc = cli_fail(&err);
    } else {
        if ((sin ? lis_copy_out(sb, sp, dp, &err) : lis_copy_in(sb, sp, dp, &err)) < 0)
            rc = cli_fail(&err);
        lis_sandbox_release(sb);
    }
    lis_ctx_free(ctx);
    return rc;
}

static void human(uint64_t b, char *out, size_t len)
{
    if (b >= 1u << 30)
        snprintf(out, len, "%.1fG", b / 1073741824.0);
    else if (b >= 1u << 20)
        snprintf(out, len, "%.1fM", b / 1048576.0);
    else
        snprintf(out, len, "%.0fK", b / 1024.0);
}

/* A snapshot's chain "<store>/blobs/sha256/HEX:...:base" shown as
 * "sha256:HEX12 (+N layers)"; anything else as it is. */
static const char *short_rootfs(const char *rootfs, char *buf, size_t len)
{
    const char *colon = strchr(rootfs, ':');
    if (!colon)
        return rootfs;
    int below = 0;
    for (const char *p = colon; *p; p++)
        below += *p == ':';
    const char *hex = strstr(rootfs, "/blobs/sha256/");
    if (!hex || hex > colon || colon - (hex + 14) != 64)
        return rootfs;
    snprintf(buf, len, "sha256:%.12s (+%d layer%s)", hex + 14, below, below == 1 ? "" : "s");
    return buf;
}

static int cmd_sandbox_ls(int argc, char **argv)
{
    opts o;
    if (parse(argc, argv, &o, "usage: lis sandbox ls [--json]\n") < 0)
        return 2;
    lis_ctx *ctx = open_ctx();
    if (!ctx)
        return CLI_EXIT_LIS;
    lis_error err = {0};
    lis_stats *st;
    size_t n;
    if (lis_sandbox_list(ctx, &st, &n, &err) < 0) {
        lis_ctx_free(ctx);
        return cli_fail(&err);
    }
    if (o.json) {
        cJSON *arr = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "name", st[i].name);
            cJSON_AddStringToObject(j, "state", st[i].state);
            cJSON_AddNumberToObject(j, "age_seconds", st[i].age_seconds);
            cJSON_AddStringToObject(j, "rootfs", st[i].rootfs);
            cJSON_AddNumberToObject(j, "memory_bytes", (double)st[i].memory_bytes);
            cJSON_AddNumberToObject(j, "processes", (double)st[i].nprocs);
            cJSON_AddNumberToObject(j, "cpu_seconds", st[i].cpu_seconds);
            cJSON_AddNumberToObject(j, "pid", st[i].pid);
            cJSON_AddBoolToObject(j, "persistent", st[i].persist);
            cJSON_AddStringToObject(j, "limits", st[i].limits);
            cJSON_AddNumberToObject(j, "disk_bytes", (double)st[i].disk_bytes);
            if (st[i].disk_limit && st[i].disk_limit != LIS_UNLIMITED)
                cJSON_AddNumberToObject(j, "disk_limit", (double)st[i].disk_limit);
            static const char *const nets[] = {"none", "host", "proxy"};
            cJSON_AddStringToObject(j, "net", (unsigned)st[i].net < 3 ? nets[st[i].net] : "?");
            if (st[i].net == LIS_NET_PROXY) {
                /* persistent ones are served by `lis proxyd`, which counts */
                lis_net_counters nc = {0};
                if (st[i].persist && strcmp(st[i].state, "dead"))
                    lis_net_counters_by_name(ctx, st[i].name, &nc);
                cJSON_AddNumberToObject(j, "net_requests", (double)nc.requests);
                cJSON_AddNumberToObject(j, "net_denied", (double)nc.denied);
                cJSON_AddNumberToObject(j, "net_bytes_in", (double)nc.bytes_in);
                cJSON_AddNumberToObject(j, "net_bytes_out", (double)nc.bytes_out);
            }
            cJSON_AddItemToArray(arr, j);
        }
        char *s = lis_json_print(arr, 1);
        puts(s ? s : "[]");
        free(s);
        cJSON_Delete(arr);
    } else {
        printf("%-24s %-8s %6s %8s %6s %13s %-8s  %s\n", "NAME", "STATE", "AGE", "MEMORY", "PROCS",
               "DISK", "LIMITS", "ROOTFS");
        for (size_t i = 0; i < n; i++) {
            char mem[32], age[32], used[32], lim[32] = "-", disk[72], root[160];
            human(st[i].memory_bytes, mem, sizeof mem);
            human(st[i].disk_bytes, used, sizeof used);
            if (st[i].disk_limit && st[i].disk_limit != LIS_UNLIMITED)
                human(st[i].disk_limit, lim, sizeof lim);
            snprintf(disk, sizeof disk, "%s/%s", used, lim);
            double a = st[i].age_seconds;
            if (a < 120)
                snprintf(age, sizeof age, "%.0fs", a);
            else if (a < 7200)
                snprintf(age, sizeof age, "%.0fm", a / 60);
            else
                snprintf(age, sizeof age, "%.0fh", a / 3600);
            printf("%-24s %-8s %6s %8s %6llu %13s %-8s  %s\n", st[i].name, st[i].state, age, mem,
                   (unsigned long long)st[i].nprocs, disk, st[i].limits[0] ? st[i].limits : "-",
                   short_rootfs(st[i].rootfs, root, sizeof root));
        }
    }
    free(st);
    lis_ctx_free(ctx);
    return 0;
}

static int cmd_sandbox_rm(int argc, char **argv)
{
    opts o;
    int first = parse(argc, argv, &o, "usage: lis sandbox rm NAME... | --all\n");
    if (first < 0)
        return 2;
    if (!o.all && first >= argc) {
        cli_error("sandbox rm: name a sandbox, or --all");
        return 2;
    }
    lis_ctx *ctx = open_ctx();
    if (!ctx)
        return CLI_EXIT_LIS;
    lis_error err = {0};
    int rc = 0, removed;
    cli_list names = {0};
    lis_stats *st = NULL;
    size_t n = 0;
    if (o.all) {
        if (lis_sandbox_list(ctx, &st, &n, &err) < 0)
            rc = cli_fail(&err);
        for (size_t i = 0; i < n; i++)
            if (strcmp(st[i].state, "dead")) /* running or paused */
                cli_list_add(&names, st[i].name);
    }
    for (int i = first; i < argc; i++)
        cli_list_add(&names, argv[i]);
    int dead = 0;
    for (size_t i = 0; i < names.n; i++) {
        lis_sandbox *sb;
        if (lis_sandbox_open(ctx, names.v[i], &sb, &err) < 0) {
            if (err.code == ESRCH) {
                dead = 1; /* its state is removed by the gc below */
                continue;
            }
            rc = cli_fail(&err);
            continue;
        }
        if (lis_sandbox_destroy(sb, &err) < 0)
            rc = cli_fail(&err);
    }
    if ((o.all || dead) && lis_sandbox_gc(ctx, &removed, &err) < 0)
        rc = cli_fail(&err);
    cli_list_free(&names);
    free(st);
    lis_ctx_free(ctx);
    return rc;
}

static int cmd_sandbox_gc(int argc, char **argv)
{
    lis_ctx *ctx = open_ctx();
    if (!ctx)
        return CLI_EXIT_LIS;
    lis_error err = {0};
    int removed = 0, rc = 0;
    if (lis_sandbox_gc(ctx, &removed, &err) < 0)
        rc = cli_fail(&err);
    else
        printf("removed %d dead sandbox%s\n", removed, removed == 1 ? "" : "es");
    lis_ctx_free(ctx);
    return rc;
}

static void sandbox_usage(FILE *f)
{
    fputs("usage: lis sandbox COMMAND [options] (each command takes --help)\n"
          "  run  (--rootfs DIR | --image NAME[:TAG]) [options] -- CMD [ARG...]\n"
          "                                 run CMD in a fresh sandbox, then discard it\n"
          "  create [--name N] (--rootfs DIR | --image REF) [options] [--pool K]\n"
          "                                 start a persistent sandbox, print its name\n"
          "  exec NAME [--timeout S] [-w DIR] [-e K=V] [-i] [-t] -- CMD [ARG...]\n"
          "  cp SRC DST                     NAME:/path on one side\n"
          "  ls [--json]                    list sandboxes\n"
          "  rm NAME... | --all             kill and delete sandboxes\n"
          "  gc                             clean up sandboxes whose PID 1 died\n"
          "  pause|resume NAME...           stop every process (no CPU), go on\n"
          "  snapshot NAME [--tag T]        its files as an image (not its processes)\n"
          "  fork NAME -n N                 one snapshot + N independent sandboxes on it\n"
          "The options of run and create are in the README (\"What a sandbox is\") and\n"
          "`lis sandbox run --help`.\n",
          f);
}

int cmd_sandbox(int argc, char **argv)
{
    cli_stdio_guard();
    if (argc < 2) {
        sandbox_usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        sandbox_usage(stdout);
        return 0;
    }
    const char *sub = argv[1];
    argc--;
    argv++;
    if (!strcmp(sub, "run"))
        return cmd_sandbox_run(argc, argv);
    if (!strcmp(sub, "create"))
        return cmd_sandbox_create(argc, argv);
    if (!strcmp(sub, "exec"))
        return cmd_sandbox_exec(argc, argv);
    if (!strcmp(sub, "cp"))
        return cmd_sandbox_cp(argc, argv);
    if (!strcmp(sub, "ls") || !strcmp(sub, "list"))
        return cmd_sandbox_ls(argc, argv);
    if (!strcmp(sub, "rm"))
        return cmd_sandbox_rm(argc, argv);
    if (!strcmp(sub, "gc"))
        return cmd_sandbox_gc(argc, argv);
    if (!strcmp(sub, "snapshot") || !strcmp(sub, "fork"))
        return cli_run_plugin("liblis-rootfs.so", "lis_cli_snapshot_main", argc, argv);
    if (!strcmp(sub, "pause"))
        return cmd_sandbox_state(argc, argv, 1);
    if (!strcmp(sub, "resume"))
        return cmd_sandbox_state(argc, argv, 0);
    cli_error("unknown sandbox command '%s' (run, create, exec, cp, ls, rm, gc, pause, resume, "
              "snapshot, fork)",
              sub);
    return 2;
}
