/* cmd_rootfs.c - `lis rootfs` front end (liblis-rootfs.so). Placeholder until
 * the rootfs store lands (issue: rootfs store). */
#include "cli_util.h"

int lis_cli_rootfs_main(int argc, char **argv);
int lis_cli_rootfs_main(int argc, char **argv)
{
    (void)argc;
    cli_error("%s: the rootfs store is not part of this build yet", argv[0]);
    return 2;
}
