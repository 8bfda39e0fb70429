/* agent_image.c - the root filesystem of `lis run` and `lis batch`: --rootfs
 * DIR, or --image NAME[:TAG] from the store, building the default image on
 * first use. */
#include "agent_cli.h"
#include "cli_util.h"
#include "rootfs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_IMAGE "lis-agent:latest"

/* Runs scripts/make-rootfs.sh (next to the build, or installed under
 * share/lis) with its progress on stderr; 0 when it succeeded. */
static int build_default_image(void)
{
    char exe[PATH_MAX], script[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", exe);
    *strrchr(dir, '/') = 0;
    static const char *const rel[] = {"%s/../scripts/make-rootfs.sh",
                                      "%s/../share/lis/make-rootfs.sh"};
    script[0] = 0;
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(script, sizeof script, rel[i], dir);
        if (access(script, R_OK) == 0)
            break;
        script[0] = 0;
    }
    if (!script[0])
        return -1;
    cli_error("the default image %s is missing: building it now (first use, a few minutes)",
              DEFAULT_IMAGE);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(2, 1); /* stdout is for the answer */
        setenv("LIS", exe, 1);
        execl("/bin/bash", "bash", script, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int cli_agent_rootfs(lis_ctx *ctx, const char *image, const char *rootfs_dir, char *rootfs,
                     size_t len)
{
    lis_error err = {0};
    if (rootfs_dir) {
        snprintf(rootfs, len, "%s", rootfs_dir);
        return 0;
    }
    if (lis_store_resolve(lis_ctx_data_dir(ctx), image ? image : DEFAULT_IMAGE, rootfs, len,
                          &err) == 0)
        return 0;
    if (image) {
        cli_fail(&err);
        return -1;
    }
    /* first use: build the default image, then look again */
    if (build_default_image() < 0 ||
        lis_store_resolve(lis_ctx_data_dir(ctx), DEFAULT_IMAGE, rootfs, len, &err) < 0) {
        cli_error("the default image %s is not in the store: build it with "
                  "scripts/make-rootfs.sh, or pass --rootfs DIR",
                  DEFAULT_IMAGE);
        return -1;
    }
    return 0;
}
