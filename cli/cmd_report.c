/* cmd_report.c - `lis report DIR` (liblis-agent.so): one static HTML page
 * over the output of a lis batch or a lis run (batch/report.c,
 * docs/report.md). Prints the page's path; open it from file://. */
#include "agent_cli.h"
#include "cli_util.h"
#include "lis_batch.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: lis report DIR\n"
          "  Writes DIR/report.html (and DIR/report/, one file per episode): a static page\n"
          "  of a lis batch output directory (the one holding results.jsonl) or of a lis\n"
          "  run directory (<output>/<timestamp>/, holding trajectory.json). Open it in a\n"
          "  browser from disk; it needs no server and makes no request.\n",
          f);
}

int cmd_report_main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    if (argc != 2 || argv[1][0] == '-') {
        if (argc == 2)
            cli_error("unknown option '%s' (lis report --help)", argv[1]);
        else
            cli_error("usage: lis report DIR (lis report --help)");
        return 2;
    }
    lis_error err = {0};
    char path[4200];
    if (lis_report_html(argv[1], path, sizeof path, &err) < 0)
        return cli_fail(&err);
    printf("%s\n", path);
    return 0;
}
