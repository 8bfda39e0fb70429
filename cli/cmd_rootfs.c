/* cmd_rootfs.c - `lis rootfs import|pull|ls|inspect|tag|rm|gc` (liblis-rootfs.so). */
#include "cli_util.h"
#include "rootfs.h"

#include <cjson/cJSON.h>

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int lis_cli_rootfs_main(int argc, char **argv);

static const char usage_text[] =
    "usage:\n"
    "  lis rootfs import PATH [--name|--tag NAME[:TAG]] [--platform OS/ARCH] [-q]\n"
    "      PATH: a rootfs tarball (.tar, .tar.gz, .tar.xz, .tar.zst), an OCI image layout\n"
    "      directory or tar (skopeo copy ... oci:DIR / oci-archive:FILE), or a docker-archive\n"
    "      tar (docker save, skopeo copy ... docker-archive:FILE)\n"
    "  lis rootfs pull REF [--name NAME[:TAG]] [--platform OS/ARCH] [--tls-verify=false] [-q]\n"
    "      REF: ubuntu:24.04, docker.io/library/python:3.11-slim, ghcr.io/o/r:t,\n"
    "      HOST:PORT/NAME:TAG, NAME@sha256:DIGEST\n"
    "  lis rootfs ls [--json]           list images\n"
    "  lis rootfs inspect REF           show an image's metadata (JSON)\n"
    "  lis rootfs tag REF NAME[:TAG]    add a name to an image\n"
    "  lis rootfs rm REF... [--force]   remove names; an image goes with its last name\n"
    "  lis rootfs gc                    delete untagged images and leftovers\n"
    "Images live in $XDG_DATA_HOME/lis/rootfs (default ~/.local/share/lis/rootfs);\n"
    "use one with `lis sandbox run --image NAME[:TAG]`.\n";

/* ---- progress bar ----------------------------------------------------------- */

typedef struct bar {
    int on;
    double last;
    char phase[24];
    int drawn;
} bar;

static void human(uint64_t b, char *out, size_t len)
{
    if (b >= (1ull << 30))
        snprintf(out, len, "%.2f GB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(out, len, "%.1f MB", (double)b / (1ull << 20));
    else if (b >= 1024)
        snprintf(out, len, "%.1f KB", (double)b / 1024);
    else
        snprintf(out, len, "%llu B", (unsigned long long)b);
}

static void bar_draw(void *arg, const char *phase, uint64_t done, uint64_t total)
{
    bar *b = arg;
    double t = lis_now();
    int same = !strcmp(b->phase, phase);
    if (same && t - b->last < 0.1 && done < total)
        return;
    b->last = t;
    if (!same && b->drawn)
        fputc('\n', stderr);
    snprintf(b->phase, sizeof b->phase, "%s", phase);
    char d[32], tt[32];
    human(done, d, sizeof d);
    if (total) {
        int w = 30, fill = (int)((double)w * (double)(done > total ? total : done) / (double)total);
        human(total, tt, sizeof tt);
        fprintf(stderr, "\r%-9s [%.*s%*s] %3d%%  %s / %s   ", phase, fill,
                "##############################", w - fill, "",
                (int)(100.0 * (double)(done > total ? total : done) / (double)total), d, tt);
    } else {
        fprintf(stderr, "\r%-9s %s   ", phase, d);
    }
    b->drawn = 1;
}

static void bar_end(bar *b)
{
    if (b->drawn)
        fputc('\n', stderr);
    b->drawn = 0;
}

static lis_ctx *open_ctx(void)
{
    lis_error err = {0};
    lis_ctx *ctx = lis_ctx_new(NULL, &err);
    if (!ctx)
        cli_fail(&err);
    return ctx;
}

static void print_result(const lis_rootfs_result *r, double secs)
{
    char sz[32];
    human(r->size, sz, sizeof sz);
    if (r->existed)
        printf("%s %s (already in the store)\n", r->ref, r->digest);
    else
        printf("%s %s (%s, %llu files, %s, %.1fs%s)\n", r->ref, r->digest, r->format,
               (unsigned long long)r->files, sz, secs, r->skipped ? ", device nodes skipped" : "");
}

enum { O_NAME = 256, O_PLATFORM, O_TLS, O_INSECURE, O_JSON, O_FORCE };

static int cmd_get(int argc, char **argv, int pull)
{
    static const struct option lo[] = {{"name", required_argument, 0, O_NAME},
                                       {"platform", required_argument, 0, O_PLATFORM},
                                       {"tag", required_argument, 0,
                                        O_NAME}, /* as lis sandbox snapshot --tag, docker build -t */
                                       {"tls-verify", required_argument, 0, O_TLS},
                                       {"insecure", no_argument, 0, O_INSECURE},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    lis_rootfs_opts o = {0};
    int quiet = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", lo, NULL)) != -1) {
        switch (c) {
        case O_NAME: o.name = optarg; break;
        case O_PLATFORM: o.platform = optarg; break;
        case O_TLS:
            if (strcmp(optarg, "false") && strcmp(optarg, "true")) {
                cli_error("--tls-verify takes true or false");
                return 2;
            }
            o.insecure = !strcmp(optarg, "false");
            break;
        case O_INSECURE: o.insecure = 1; break;
        case 'q': quiet = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        cli_error("%s takes exactly one %s (lis rootfs --help)", argv[0], pull ? "REF" : "PATH");
        return 2;
    }
    lis_ctx *ctx = open_ctx();
    if (!ctx)
        return CLI_EXIT_LIS;
    bar b = {.on = !quiet && isatty(2)};
    if (b.on) {
        o.progress = bar_draw;
        o.progress_arg = &b;
    }
    lis_rootfs_result r;
    lis_error err = {0};
    double t0 = lis_now();
    int rc = pull ? lis_rootfs_pull(lis_ctx_data_dir(ctx), argv[optind], &o, &r, &err)
                  : lis_rootfs_import(lis_ctx_data_dir(ctx), argv[optind], &o, &r, &err);
    bar_end(&b);
    lis_ctx_free(ctx);
    if (rc < 0)
        return cli_fail(&err);
    print_result(&r, lis_now() - t0);
    return 0;
}

static int cmd_ls(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_text, stdout);
            return 0;
        } else {
            cli_error("ls: unknown argument '%s' (lis rootfs ls [--json])", argv[i]);
            return 2;
        }
    }
    lis_ctx *ctx = open_ctx();
    if (!ctx)
        return CLI_EXIT_LIS;
    lis_rootfs_image *v = NULL;
    size_t n = 0;
    lis_error err = {0};
    int rc = lis_rootfs_list(lis_ctx_data_dir(ctx), &v, &n, &err);
    lis_ctx_free(ctx);
    if (rc < 0)
        return cli_fail(&err);
    if (json) {
        cJSON *arr = cJSON_CreateArray();
        for (size_t i = 0; arr && i < n; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToArray(arr, o);
            cJSON_AddStringToObject(o, "ref", v[i].ref);
            cJSON_AddStringToObject(o, "digest", v[i].digest);
            cJSON_AddStringToObject(o, "format", v[i].format);
            cJSON_AddStringToObject(o, "source", v[i].source);
            cJSON_AddNumberToObject(o, "size", (double)v[i].size);
            cJSON_AddNumberToObject(o, "created", (double)(long long)v[i].created);
            if (v[i].parent[0])
                cJSON_AddStringToObject(o, "parent", v[i].parent);
            else
                cJSON_AddNullToObject(o, "parent");
        }
        char *text = lis_json_print(arr, 0); /* strict UTF-8, the stated form */
        cJSON_Delete(arr);
        if (!text) {
            free(v);
            cli_error("ls: out of memory");
            return CLI_EXIT_LIS;
        }
        puts(text);
        free(text);
    } else {
        printf("%-40s %-19s %-10s %-16s %-16s %s\n", "NAME:TAG", "DIGEST", "SIZE", "FORMAT",
               "CREATED", "PARENT");
        for (size_t i = 0; i < n; i++) {
            char sz[32], when[32] = "-";
            human(v[i].size, sz, sizeof sz);
            time_t t = (time_t)v[i].created;
            struct tm tm;
            if (t && localtime_r(&t, &tm))
                strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
            /* a snapshot's chain: its parent's digest (or directory), each a layer below */
            printf("%-40s %-19.19s %-10s %-16s %-16s %.*s\n", v[i].ref[0] ? v[i].ref : "<none>",
                   v[i].digest, sz, v[i].format[0] ? v[i].format : "-", when,
                   !strncmp(v[i].parent, "sha256:", 7) ? 19 : 4096,
                   v[i].parent[0] ? v[i].parent : "-");
        }
    }
    free(v);
    return 0;
}

/* The image directories live sandboxes run on (realpaths), NULL-terminated. */
static char **in_use(lis_ctx *ctx)
{
    lis_stats *st = NULL;
    size_t n = 0;
    lis_error err = {0};
    if (lis_sandbox_list(ctx, &st, &n, &err) < 0)
        n = 0;
    char **v = calloc(n + 1, sizeof *v);
    for (size_t i = 0, k = 0; v && i < n; i++)
        if (strcmp(st[i].state, "dead")) /* running or paused: every layer of its chain */
            v[k++] = strdup(st[i].rootfs);
    free(st);
    return v;
}

static void free_list(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

static int cmd_rm(int argc, char **argv)
{
    int force = 0, nrefs = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f"))
            force = 1;
        else if (argv[i][0] == '-') {
            cli_error("rm: unknown option '%s' (lis rootfs rm REF... [--force])", argv[i]);
            return 2;
        } else
            nrefs++;
    }
    if (!nrefs) {
        cli_error("rm: give an image (lis rootfs rm NAME[:TAG]|sha256:DIGEST)");
        return 2;
    }
    lis_ctx *ctx = open_ctx();
    if (!ctx)
        return CLI_EXIT_LIS;
    const char *dd = lis_ctx_data_dir(ctx);
    char **used = force ? NULL : in_use(ctx);
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        lis_error err = {0};
        char dir[PATH_MAX], rp[PATH_MAX];
        int busy = 0;
        /* busy: the image's own layer (the top of its chain) is a layer of a live one's */
        if (used && lis_store_resolve(dd, argv[i], dir, sizeof dir, &err) == 0) {
            dir[strcspn(dir, ":")] = 0;
            if (!realpath(dir, rp))
                snprintf(rp, sizeof rp, "%s", dir);
            for (size_t k = 0; used[k] && !busy; k++)
                for (const char *c = used[k]; *c && !busy;) {
                    size_t l = strcspn(c, ":");
                    busy = l == strlen(rp) && !strncmp(c, rp, l);
                    c += l + (c[l] == ':');
                }
        }
        if (busy) {
            cli_error("image '%s' is in use by a running sandbox (lis sandbox ls; remove the "
                      "sandbox first, or use --force)",
                      argv[i]);
            rc = CLI_EXIT_LIS;
            continue;
        }
        int gone = 0;
        if (lis_rootfs_rm(dd, argv[i], &gone, &err) < 0) {
            rc = cli_fail(&err);
            continue;
        }
        printf("%s %s\n", gone ? "deleted" : "untagged", argv[i]);
    }
    free_list(used);
    lis_ctx_free(ctx);
    return rc;
}

static int cmd_gc(int argc, char **argv)
{
    if (argc > 1) {
        cli_error("gc takes no arguments");
        return 2;
    }
    (void)argv;
    lis_ctx *ctx = open_ctx();
    if (!ctx)
        return CLI_EXIT_LIS;
    char **used = in_use(ctx);
    int removed = 0;
    uint64_t freed = 0;
    lis_error err = {0};
    int rc =
        lis_rootfs_gc(lis_ctx_data_dir(ctx), (const char *const *)used, &removed, &freed, &err);
    free_list(used);
    lis_ctx_free(ctx);
    if (rc < 0)
        return cli_fail(&err);
    char sz[32];
    human(freed, sz, sizeof sz);
    printf("removed %d image%s, freed %s\n", removed, removed == 1 ? "" : "s", sz);
    return 0;
}

int lis_cli_rootfs_main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help")) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    argc--;
    argv++;
    if (!strcmp(sub, "import"))
        return cmd_get(argc, argv, 0);
    if (!strcmp(sub, "pull"))
        return cmd_get(argc, argv, 1);
    if (!strcmp(sub, "ls") || !strcmp(sub, "list"))
        return cmd_ls(argc, argv);
    if (!strcmp(sub, "rm"))
        return cmd_rm(argc, argv);
    if (!strcmp(sub, "gc"))
        return cmd_gc(argc, argv);
    lis_ctx *ctx = NULL;
    if (!strcmp(sub, "inspect") || !strcmp(sub, "tag")) {
        int want = !strcmp(sub, "tag") ? 3 : 2;
        if (argc != want) {
            cli_error("usage: lis rootfs %s", want == 3 ? "tag REF NAME[:TAG]" : "inspect REF");
            return 2;
        }
        if (!(ctx = open_ctx()))
            return CLI_EXIT_LIS;
        lis_error err = {0};
        int rc;
        if (want == 2) {
            char *json = NULL;
            rc = lis_rootfs_inspect(lis_ctx_data_dir(ctx), argv[1], &json, &err);
            if (rc == 0)
                puts(json);
            free(json);
        } else {
            rc = lis_rootfs_tag(lis_ctx_data_dir(ctx), argv[1], argv[2], &err);
        }
        lis_ctx_free(ctx);
        return rc < 0 ? cli_fail(&err) : 0;
    }
    cli_error("rootfs: unknown command '%s' (lis rootfs --help)", sub);
    return 2;
}
