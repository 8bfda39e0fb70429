/* agent_main.c - the entry point of liblis-agent.so: `lis run`, `lis batch`, `lis report` or
 * `lis image`. */
#include "agent_cli.h"

#include <string.h>

int lis_cli_agent_main(int argc, char **argv);

int lis_cli_agent_main(int argc, char **argv)
{
    if (!strcmp(argv[0], "batch"))
        return cmd_batch_main(argc, argv);
    if (!strcmp(argv[0], "report"))
        return cmd_report_main(argc, argv);
    if (!strcmp(argv[0], "image"))
        return cmd_image_main(argc, argv);
    return cmd_run_main(argc, argv);
}
