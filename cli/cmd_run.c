/* cmd_run.c - `lis run` / `lis batch` front end (liblis-agent.so). Placeholder
 * until the agent lands (issue: the agent). */
#include "cli_util.h"

int lis_cli_agent_main(int argc, char **argv);
int lis_cli_agent_main(int argc, char **argv)
{
    (void)argc;
    cli_error("%s: the agent is not part of this build yet", argv[0]);
    return 2;
}
