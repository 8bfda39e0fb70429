/* test_cgroup.c - the resource envelope as the unprivileged test user on the host. Where limits
 * cannot be enforced (this machine: memory on cgroup v1), --require-limits refuses with a
 * pointer to `lis doctor`, and a plain sandbox still runs, reported as not enforced. The
 * enforcing paths are tested in the cgroup v2 VM (vm_cgroup.c) and as root (root_cgroup_v1.c). */
#include "testlib.h"

#include <string.h>

Test(cgroup, require_limits_or_enforced)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox_spec spec = {.rootfs = t_busybox(),
                             .upper = LIS_UPPER_TMPFS,
                             .limits = {.require = 1}};
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    lis_stats st;
    if (lis_sandbox_create(ctx, &spec, &sb, &err) == 0) {
        cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
        cr_assert(st.limits_enforced);
        lis_sandbox_destroy(sb, &err);
        lis_ctx_free(ctx);
        return;
    }
    cr_assert(strstr(err.msg, "lis doctor"), "no pointer to lis doctor: %s", err.msg);
    cr_assert(strstr(err.msg, "--require-limits"), "%s", err.msg);
    spec.limits.require = 0;
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "%s", err.msg);
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
    cr_assert_eq(st.limits_enforced, 0);
    lis_result r;
    t_sh(sb, "echo ok", &r);
    cr_assert_str_eq(r.out.data, "ok\n");
    cr_assert_eq(r.oom_killed, 0);
    lis_result_free(&r);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(cgroup, doctor_reports_cgroups_and_overlay)
{
    lis_ctx *ctx = t_ctx();
    lis_check c[64];
    size_t n = lis_doctor(ctx, c, 64);
    int cg = 0, deleg = 0, ov = 0, fb = 0;
    for (size_t i = 0; i < n; i++) {
        cg |= !strcmp(c[i].name, "cgroups");
        deleg |= !strcmp(c[i].name, "cgroup delegation");
        ov |= !strcmp(c[i].name, "overlay in userns");
        fb |= !strcmp(c[i].name, "fallback limits") && strstr(c[i].detail, "RLIMIT_NPROC");
    }
    cr_assert(cg && deleg && ov, "checks: cgroups %d delegation %d overlay %d", cg, deleg, ov);
    /* where sandboxes get no cgroup, the doctor says what bounds them instead */
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_stats st;
    lis_error err;
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
    cr_assert_eq(fb, !strcmp(st.limits, "fallback"), "limits %s, doctor fallback check %d",
                 st.limits, fb);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}
