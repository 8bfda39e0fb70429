/* cli_util.h - small helpers shared by the CLI front ends. */
#ifndef LIS_CLI_UTIL_H
#define LIS_CLI_UTIL_H

#include "lis.h"
#include <pthread.h>
#include <stddef.h>

/* Exit codes, as docker/podman: 125 lis itself failed, 126 the command could
 * not be run, 127 it was not found; otherwise the command's own code. */
#define CLI_EXIT_LIS 125

void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "lis: <err->msg>" and returns CLI_EXIT_LIS. */
int cli_fail(const lis_error *err);
/* Parses "1.5", "200M", "2G", "unlimited"; returns -1 when malformed. */
int cli_parse_size(const char *s, uint64_t *out);
/* A growable NULL-terminated list of strings (argv/env style). */
typedef struct cli_list {
    const char **v;
    size_t n, cap;
} cli_list;
int cli_list_add(cli_list *l, const char *s);
void cli_list_free(cli_list *l);
/* A lis_ctx_opts.warn for commands that make many sandboxes (lis batch, lis
 * sandbox fork): the runtime warns once per sandbox (e.g. fallback limits);
 * each kind of warning is shown once, compared without the sandbox's name,
 * followed by "(shown once for all sandboxes <scope>)". */
typedef struct cli_warn_once {
    pthread_mutex_t mu; /* sandboxes are created on several threads */
    const char *scope;
    unsigned long seen[32];
    size_t n;
} cli_warn_once;
void cli_warn_once_fn(void *arg, const char *line);
/* Runs `main_name` from a plugin (liblis-agent.so, liblis-rootfs.so) found
 * next to the executable. */
int cli_run_plugin(const char *lib, const char *main_name, int argc, char **argv);
/* Resolves --image NAME:TAG through the rootfs store; writes the directory. */
int cli_resolve_image(lis_ctx *ctx, const char *ref, char *dir, size_t len);

/* Runs a command on the CLI's stdio without handing any fd of ours into the
 * sandbox: stdout/stderr (and stdin with `interactive`, else /dev/null) are
 * relayed through fresh pipes; with ex->pty the command has a pty of the
 * sandbox's own and our terminal is raw meanwhile, its exact modes restored
 * on every way out (SIGINT/SIGTERM/SIGHUP/SIGQUIT: restored, then lis dies
 * of the signal as before). Sets ex's stdio modes. 0 with res, or -1. */
int cli_run_command(lis_sandbox *sb, lis_exec_spec *ex, int interactive, lis_result *res,
                    lis_error *err);
/* Opens /dev/null on whichever of fds 0-2 is closed, so no fd made later
 * takes the place of a standard stream. Call first. */
void cli_stdio_guard(void);

#endif
