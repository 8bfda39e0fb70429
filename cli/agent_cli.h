/* agent_cli.h - the front ends inside liblis-agent.so: `lis run`
 * (cmd_run.c), `lis batch` (cmd_batch.c), the image they share and `lis
 * image build` (agent_image.c) and the plugin's entry point (agent_main.c). */
#ifndef LIS_AGENT_CLI_H
#define LIS_AGENT_CLI_H

#include "lis.h"
#include <stddef.h>

#define DEFAULT_IMAGE "lis-agent:latest"

/* --rootfs DIR, or --image (default lis-agent:latest, built on first use)
 * resolved in the store; prints the error itself and returns -1. */
int cli_agent_rootfs(lis_ctx *ctx, const char *image, const char *rootfs_dir, char *rootfs,
                     size_t len);
int cmd_run_main(int argc, char **argv);
int cmd_batch_main(int argc, char **argv);
int cmd_report_main(int argc, char **argv);
/* `lis image build [--rebuild]`: the default image ahead of time. */
int cmd_image_main(int argc, char **argv);

#endif
