/* agent_image.c - the root filesystem of `lis run` and `lis batch`: --rootfs
 * DIR, or --image NAME[:TAG] from the store, building the default image on
 * first use; and `lis image build`, which builds it ahead of time. */
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

/* The lis that runs, for the commands it prints. */
static void self_path(char *out, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    out[n > 0 ? n : 0] = 0;
    if (n <= 0)
        snprintf(out, len, "lis");
}

/* Runs scripts/make-rootfs.sh (next to the build, or installed under
 * share/lis) with its progress on stderr; 0 when it succeeded. */
static int build_default_image(int rebuild)
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
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(2, 1); /* stdout is for the answer */
        setenv("LIS", exe, 1);
        execl("/bin/bash", "bash", script, rebuild ? "--rebuild" : (char *)NULL, (char *)NULL);
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
    char self[PATH_MAX];
    self_path(self, sizeof self);
    cli_error("the default image %s is missing: building it now, once (about 5 minutes and "
              "1 GB; %s image build does this ahead of time)",
              DEFAULT_IMAGE, self);
    if (build_default_image(0) < 0 ||
        lis_store_resolve(lis_ctx_data_dir(ctx), DEFAULT_IMAGE, rootfs, len, &err) < 0) {
        cli_error("the default image %s is not in the store: build it with %s image build "
                  "(its output says what failed), or pass --rootfs DIR",
                  DEFAULT_IMAGE, self);
        return -1;
    }
    return 0;
}

static void image_usage(FILE *f)
{
    fputs("usage: lis image build [--rebuild]\n"
          "\n"
          "Builds the default image of lis run and lis batch, " DEFAULT_IMAGE ", ahead of time\n"
          "(python3, numpy, scipy, sympy, matplotlib, pip, gcc, git: 1.0 GB) with\n"
          "scripts/make-rootfs.sh: mmdebstrap in a user namespace, or debootstrap as root;\n"
          "its stages and progress go to stderr. It is skipped when the image is in the\n"
          "store already; --rebuild builds it anew (fetching every package again).\n"
          "`lis doctor` says whether it is there.\n",
          f);
}

int cmd_image_main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        image_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "build")) {
        cli_error("lis image: unknown command '%s' (lis image --help)", argv[1]);
        return 2;
    }
    int rebuild = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--rebuild")) {
            rebuild = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            image_usage(stdout);
            return 0;
        } else {
            cli_error("lis image build: unknown option '%s' (lis image --help)", argv[i]);
            return 2;
        }
    }
    lis_error err = {0};
    lis_ctx *ctx = lis_ctx_new(NULL, &err);
    if (!ctx)
        return cli_fail(&err);
    char dir[4096];
    int rc = 0;
    if (!rebuild &&
        lis_store_resolve(lis_ctx_data_dir(ctx), DEFAULT_IMAGE, dir, sizeof dir, &err) == 0) {
        printf("lis image: %s is in the store already (%s); --rebuild builds it anew\n",
               DEFAULT_IMAGE, dir);
    } else if (build_default_image(rebuild) < 0 ||
               lis_store_resolve(lis_ctx_data_dir(ctx), DEFAULT_IMAGE, dir, sizeof dir, &err) < 0) {
        cli_error("building %s failed (its output is above)", DEFAULT_IMAGE);
        rc = CLI_EXIT_LIS;
    } else {
        printf("lis image: %s is ready (%s)\n", DEFAULT_IMAGE, dir);
    }
    lis_ctx_free(ctx);
    return rc;
}
