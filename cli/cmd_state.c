/* cmd_state.c - `lis sandbox pause|resume NAME...`: the state of a running
 * sandbox (issue 15). Parse, call lis.h, report. */
#include "cli_util.h"
#include "cmd.h"

#include <stdio.h>
#include <string.h>

/* pause (on 1) or resume each named sandbox; every failure is reported, the
 * exit code is that of the last one. */
int cmd_sandbox_state(int argc, char **argv, int on)
{
    const char *verb = on ? "pause" : "resume";
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        printf("usage: lis sandbox %s NAME...\n", verb);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-') {
            cli_error("sandbox %s: unknown option '%s' (usage: lis sandbox %s NAME...)", verb,
                      argv[i], verb);
            return 2;
        }
    lis_error err = {0};
    lis_ctx *ctx = lis_ctx_new(NULL, &err);
    if (!ctx)
        return cli_fail(&err);
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        lis_sandbox *sb;
        if (lis_sandbox_open(ctx, argv[i], &sb, &err) < 0) {
            rc = cli_fail(&err);
            continue;
        }
        if ((on ? lis_sandbox_pause(sb, &err) : lis_sandbox_resume(sb, &err)) < 0)
            rc = cli_fail(&err);
        lis_sandbox_release(sb);
    }
    lis_ctx_free(ctx);
    return rc;
}
