/* main.c - the lis command: dispatch to the sub-commands. */
#include "cli_util.h"
#include "cmd.h"
#include "lis_net.h"

#include <stdio.h>
#include <string.h>

#ifndef LIS_VERSION
#define LIS_VERSION "0.1.0"
#endif

static void usage(FILE *f)
{
    fputs("lis " LIS_VERSION " - LLM-in-Sandbox, native: rootless Linux sandboxes and the agent\n"
          "\n"
          "usage:\n"
          "  lis run --query TEXT [options]        run an agent episode (lis run --help)\n"
          "  lis batch --task DIR | --tasks FILE   run many episodes (lis batch --help)\n"
          "  lis report DIR                        a static HTML report of a run or batch\n"
          "  lis image build [--rebuild]           build the default agent image ahead of time\n"
          "  lis sandbox run [opts] -- CMD...      run CMD in a fresh sandbox, then discard it\n"
          "  lis sandbox create [opts]             start a persistent sandbox, print its name\n"
          "  lis sandbox exec NAME [opts] -- CMD   run CMD in a running sandbox\n"
          "  lis sandbox cp SRC DST                copy files in or out (NAME:/path)\n"
          "  lis sandbox ls [--json]               list sandboxes\n"
          "  lis sandbox rm NAME... | --all        kill and delete sandboxes\n"
          "  lis sandbox gc                        clean up sandboxes whose PID 1 died\n"
          "  lis sandbox pause|resume NAME...      stop a sandbox's processes (no CPU), go on\n"
          "  lis sandbox snapshot NAME [--tag T]   its files as an image (not its processes)\n"
          "  lis sandbox fork NAME -n N            one snapshot + N independent sandboxes on it\n"
          "  lis rootfs import|pull|ls|inspect|tag|rm|gc   manage root filesystems\n"
          "  lis serve [--socket PATH] [--tcp ADDR]  a Docker-compatible API socket (lis serve --help)\n"
          "  lis doctor [--json]                   check this host\n"
          "  lis version\n",
          f);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help")) {
        usage(stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        puts("lis " LIS_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "sandbox"))
        return cmd_sandbox(argc - 1, argv + 1);
    if (!strcmp(cmd, "doctor"))
        return cmd_doctor(argc - 1, argv + 1);
    if (!strcmp(cmd, "run") || !strcmp(cmd, "batch") || !strcmp(cmd, "report") ||
        !strcmp(cmd, "image"))
        return cli_run_plugin("liblis-agent.so", "lis_cli_agent_main", argc - 1, argv + 1);
    if (!strcmp(cmd, "proxyd")) { /* hidden: started on demand by --net proxy sandboxes */
        if (argc != 3) {
            cli_error("usage: lis proxyd RUN_DIR");
            return 2;
        }
        lis_error err = {0};
        return lis_proxyd_serve(argv[2], &err) < 0 ? cli_fail(&err) : 0;
    }
    if (!strcmp(cmd, "serve"))
        return cli_run_plugin("liblis-serve.so", "lis_cli_serve_main", argc - 1, argv + 1);
    if (!strcmp(cmd, "rootfs"))
        return cli_run_plugin("liblis-rootfs.so", "lis_cli_rootfs_main", argc - 1, argv + 1);
    cli_error("unknown command '%s' (lis --help)", cmd);
    return 2;
}
