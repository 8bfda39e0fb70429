/* test_spec_options.c - the lis_sandbox_spec options Docker's create options map
 * onto (serve/create.c): tmpfs mounts, a read-only root, a /dev/shm of its own
 * size, resource limits and dropped capabilities of every command, the
 * working directory made at set-up. Real sandboxes of the busybox fixture. */
#include "testlib.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static lis_sandbox *make(lis_ctx *ctx, lis_sandbox_spec *spec)
{
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    spec->rootfs = t_busybox();
    spec->upper = LIS_UPPER_TMPFS;
    cr_assert_eq(lis_sandbox_create(ctx, spec, &sb, &err), 0, "create: %s", err.msg);
    return sb;
}

static void sh(lis_sandbox *sb, const char *cmd, int want, const char *want_out)
{
    lis_result r;
    t_sh(sb, cmd, &r);
    cr_assert_eq(r.exit_code, want, "%s: exit %d, out [%s] err [%s]", cmd, r.exit_code,
                 r.out.data ? r.out.data : "", r.err.data ? r.err.data : "");
    if (want_out)
        cr_assert(r.out.data && strstr(r.out.data, want_out), "%s: [%s] has no [%s]", cmd,
                  r.out.data ? r.out.data : "", want_out);
    lis_result_free(&r);
}

Test(spec_options, tmpfs_sized_noexec_readonly, .timeout = 60)
{
    t_busybox();
    lis_ctx *ctx = t_ctx();
    lis_tmpfs t[2] = {{.path = "/scratch", .size = 4 << 20, .noexec = 1},
                      {.path = "/ro/deep", .read_only = 1, .mode = 0755}};
    lis_sandbox_spec spec = {.tmpfs = t, .ntmpfs = 2};
    lis_sandbox *sb = make(ctx, &spec);
    sh(sb, "grep ' /scratch tmpfs' /proc/mounts", 0, "noexec");
    /* its size bounds it: 8 MiB into a 4 MiB tmpfs fails with ENOSPC */
    sh(sb, "dd if=/dev/zero of=/scratch/f bs=1M count=8 2>&1; ls -l /scratch/f", 0, "4194304");
    sh(sb, "rm /scratch/f; cp /bin/busybox /scratch/bb && /scratch/bb true", 126, NULL);
    sh(sb, "touch /ro/deep/x", 1, NULL);
    sh(sb, "stat -c %a /ro/deep", 0, "755");
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    /* a tmpfs path that climbs out, or is /, is refused before anything is made */
    lis_tmpfs bad[] = {{.path = "/a/../../etc"}, {.path = "/"}, {.path = "rel"}};
    for (int i = 0; i < 3; i++) {
        lis_sandbox_spec s2 = {.rootfs = t_busybox(), .tmpfs = &bad[i], .ntmpfs = 1};
        lis_sandbox *x = NULL;
        cr_assert_eq(lis_sandbox_create(ctx, &s2, &x, &err), -1, "tmpfs %s accepted", bad[i].path);
        cr_assert(err.code == EINVAL || err.code == EPERM, "%s: %s", bad[i].path, err.msg);
    }
    lis_ctx_free(ctx);
}

Test(spec_options, read_only_root_keeps_its_own_mounts, .timeout = 60)
{
    t_busybox();
    lis_ctx *ctx = t_ctx();
    lis_tmpfs t = {.path = "/run/app"};
    lis_sandbox_spec spec = {.read_only_root = 1, .workdir = "/work/dir", .tmpfs = &t, .ntmpfs = 1};
    lis_sandbox *sb = make(ctx, &spec);
    sh(sb, "touch /newfile", 1, NULL);
    sh(sb, "echo x >> /etc/hosts", 1, NULL);
    sh(sb, "touch /tmp/x", 1, NULL); /* as Docker's --read-only: /tmp is the root's */
    sh(sb, "touch /dev/shm/x && touch /run/app/x && echo ok", 0, "ok");
    sh(sb, "cd /work/dir && pwd", 0, "/work/dir"); /* made before / went read-only */
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);
}

Test(spec_options, shm_of_its_own_size, .timeout = 60)
{
    t_busybox();
    lis_ctx *ctx = t_ctx();
    lis_sandbox_spec spec = {.shm_bytes = 2 << 20};
    lis_sandbox *sb = make(ctx, &spec);
    sh(sb, "grep ' /dev/shm tmpfs' /proc/mounts", 0, "size=2048k");
    sh(sb, "dd if=/dev/zero of=/dev/shm/f bs=1M count=4 2>/dev/null; ls -l /dev/shm/f", 0,
       "2097152");
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);
}

Test(spec_options, rlimits_of_every_command, .timeout = 60)
{
    t_busybox();
    lis_ctx *ctx = t_ctx();
    struct rlimit own;
    getrlimit(RLIMIT_NOFILE, &own);
    lis_rlimit rl[] = {{.resource = RLIMIT_NOFILE, .soft = 64, .hard = 128},
                       {.resource = RLIMIT_CORE, .soft = 0, .hard = 0},
                       /* above the owner's hard limit: lowered to it */
                       {.resource = RLIMIT_STACK, .soft = LIS_UNLIMITED, .hard = LIS_UNLIMITED}};
    lis_sandbox_spec spec = {.rlimits = rl, .nrlimits = 3};
    lis_sandbox *sb = make(ctx, &spec);
    sh(sb, "ulimit -n", 0, "64");
    sh(sb, "ulimit -Hn", 0, "128");
    sh(sb, "ulimit -c", 0, "0");
    sh(sb, "ulimit -n 200", 1, NULL); /* past the hard limit: refused inside */
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);
}

Test(spec_options, cap_drop_from_every_command, .timeout = 60)
{
    t_busybox();
    lis_ctx *ctx = t_ctx();
    lis_sandbox_spec plain = {0};
    lis_sandbox *sb = make(ctx, &plain);
    lis_result r;
    t_sh(sb, "grep CapBnd /proc/self/status", &r);
    unsigned long long before = 0;
    cr_assert(r.out.data && sscanf(strstr(r.out.data, "CapBnd:") + 7, "%llx", &before) == 1);
    lis_result_free(&r);
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    cr_assert(before & (1ull << CAP_CHOWN), "CAP_CHOWN is in Docker's default set: %llx", before);
    lis_sandbox_spec spec = {.cap_drop = (1ull << CAP_CHOWN) | (1ull << CAP_NET_RAW)};
    sb = make(ctx, &spec);
    t_sh(sb, "grep -E 'Cap(Bnd|Eff)' /proc/self/status", &r);
    unsigned long long after = 0, eff = 0;
    cr_assert(r.out.data && sscanf(strstr(r.out.data, "CapBnd:") + 7, "%llx", &after) == 1 &&
              sscanf(strstr(r.out.data, "CapEff:") + 7, "%llx", &eff) == 1);
    cr_assert_eq(after, before & ~spec.cap_drop, "bounding set %llx, want %llx", after,
                 before & ~spec.cap_drop);
    cr_assert_eq(eff & spec.cap_drop, 0, "a dropped capability is effective: %llx", eff);
    lis_result_free(&r);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);
}
