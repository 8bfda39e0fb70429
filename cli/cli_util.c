/* cli_util.c - small helpers shared by the CLI front ends. */
#include "cli_util.h"
#include "rootfs.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

void cli_warn_once_fn(void *arg, const char *line)
{
    cli_warn_once *w = arg;
    unsigned long h = 5381;
    for (const char *p = line; *p; p++) {
        if (!strncmp(p, "sandbox ", 8)) { /* the name that follows differs */
            h = h * 33 + 's';
            p += 8;
            while (p[0] && p[0] != ' ' && !(p[0] == ':' && (!p[1] || p[1] == ' ')) &&
                   !(p[0] == ',' && p[1] == ' '))
                p++;
            if (!*p)
                break;
        }
        h = h * 33 + (unsigned char)*p;
    }
    pthread_mutex_lock(&w->mu);
    int seen = 0;
    for (size_t i = 0; i < w->n; i++)
        seen |= w->seen[i] == h;
    if (!seen && w->n < sizeof w->seen / sizeof w->seen[0])
        w->seen[w->n++] = h;
    pthread_mutex_unlock(&w->mu);
    if (!seen)
        fprintf(stderr, "lis: warning: %s (shown once for all sandboxes %s)\n", line,
                w->scope ? w->scope : "of this command");
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("lis: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_fail(const lis_error *err)
{
    cli_error("%s", err->msg[0] ? err->msg : "unknown error");
    return CLI_EXIT_LIS;
}

int cli_parse_size(const char *s, uint64_t *out)
{
    if (!strcmp(s, "unlimited") || !strcmp(s, "max")) {
        *out = LIS_UNLIMITED;
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mul = 1;
    switch (*end) {
    case 0: break;
    case 'k':
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024.0 * 1024 * 1024;
        end++;
        break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'B' || *end == 'b')
        end++;
    if (*end == 'B')
        end++;
    if (*end)
        return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}

int cli_list_add(cli_list *l, const char *s)
{
    if (LIS_GROW(l->v, l->cap, l->n + 2) < 0)
        return -1;
    l->v[l->n++] = s;
    l->v[l->n] = NULL;
    return 0;
}

void cli_list_free(cli_list *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}

int cli_run_plugin(const char *lib, const char *main_name, int argc, char **argv)
{
    char exe[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) {
        cli_error("cannot find the lis executable: %s", strerror(errno));
        return CLI_EXIT_LIS;
    }
    exe[n] = 0;
    *strrchr(exe, '/') = 0;
    static const char *const rel[] = {"%s/%s", "%s/../lib/lis/%s"};
    void *h = NULL;
    char why[512] = "";
    for (size_t i = 0; i < sizeof rel / sizeof rel[0] && !h; i++) {
        snprintf(path, sizeof path, rel[i], exe, lib);
        if (access(path, R_OK) != 0)
            continue;
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            snprintf(why, sizeof why, "%s", dlerror());
    }
    if (!h) {
        cli_error("cannot load %s next to %s%s%s (reinstall lis)", lib, exe, *why ? ": " : "", why);
        return CLI_EXIT_LIS;
    }
    int (*fn)(int, char **) = (int (*)(int, char **))dlsym(h, main_name);
    if (!fn) {
        cli_error("%s has no %s", lib, main_name);
        return CLI_EXIT_LIS;
    }
    return fn(argc, argv);
}

int cli_resolve_image(lis_ctx *ctx, const char *ref, char *dir, size_t len)
{
    lis_error err = {0};
    if (lis_store_resolve(lis_ctx_data_dir(ctx), ref, dir, len, &err) < 0)
        return cli_fail(&err);
    return 0;
}

/* ---- running a command on the CLI's own stdio ----
 *
 * No fd of the CLI ever goes into the sandbox: a terminal there could be read
 * after lis returned (by a background process a command left behind) and have
 * its modes changed. Plain stdio is relayed through pipes the runtime makes
 * for the command (LIS_STDIO_PIPE); with -t the command gets a pty of the
 * sandbox's own and this terminal is put in raw mode only for as long as the
 * relay runs. Signals are read through a signalfd, not a handler, so the
 * saved modes need no global and are restored on every way out. */

void cli_stdio_guard(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int null = open("/dev/null", O_RDWR);
            if (null >= 0 && null != fd) {
                dup2(null, fd);
                close(null);
            }
        }
}
