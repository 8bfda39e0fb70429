/* root_cgroup_v1.c - as root (scripts/test.sh runs root_* as root): the resource envelope on
 * this kind of host, where memory/pids/cpu live on cgroup v1 (the v1 fallback), or on cgroup
 * v2 when root's cgroup is usable. The same OOM answer as the VM suite. */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void cgroup_dirs(pid_t pid, char *mem, size_t len)
{
    char p[64], line[1024];
    snprintf(p, sizeof p, "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(p, "re");
    cr_assert(f);
    mem[0] = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c = strchr(line, ':');
        if (c && (!strncmp(c, ":memory:", 8) || !strncmp(c, "::", 2)) && strstr(c, "/lis-"))
            snprintf(mem, len, "%s", line);
    }
    fclose(f);
}

Test(root_cgroup, oom_is_an_answer, .timeout = 120)
{
    cr_assert_eq(getuid(), 0, "run as root");
    lis_ctx *ctx = t_ctx();
    /* the shared fixture belongs to the unprivileged test user, unmapped in root's sandboxes */
    char rootfs[512];
    snprintf(rootfs, sizeof rootfs, "%s/busybox", t_tmpdir());
    int code;
    free(t_host(&code, "cp -a '%s' '%s' && chown -R 0:0 '%s'", t_busybox(), rootfs, rootfs));
    cr_assert_eq(code, 0, "copying the fixture");
    lis_sandbox_spec spec = {.rootfs = rootfs, .upper = LIS_UPPER_TMPFS, .limits = {.require = 1}};
    lis_sandbox *sb = NULL, *neighbour = NULL;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "create: %s", err.msg);
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &neighbour, &err), 0, "create: %s", err.msg);
    char line[1024];
    cgroup_dirs(lis_sandbox_pid(sb), line, sizeof line);
    cr_assert(line[0], "PID 1 is in no lis cgroup");
    lis_result r;
    t_sh(sb, "echo kept > /tmp/kept", &r);
    lis_result_free(&r);
    t_sh(sb, "dd if=/dev/zero of=/dev/null bs=300M count=1", &r);
    printf("ROOT-OOM (%s): 300 MiB in a 200 MiB sandbox: exit=%d oom_killed=%d peak=%llu MiB "
           "err_msg='%s'\n",
           line, r.exit_code, r.oom_killed, (unsigned long long)(r.memory_peak >> 20), r.err_msg);
    cr_assert(r.oom_killed);
    cr_assert_eq(r.exit_code, 137);
    cr_assert_str_eq(r.err_msg, "killed: out of memory (limit 200 MiB)");
    cr_assert(r.memory_peak > 150ull << 20 && r.memory_peak <= 200ull << 20, "peak %llu",
              (unsigned long long)r.memory_peak);
    lis_result_free(&r);
    t_sh(sb, "cat /tmp/kept && echo alive", &r);
    cr_assert_str_eq(r.out.data, "kept\nalive\n");
    cr_assert(!r.oom_killed);
    lis_result_free(&r);
    lis_stats st;
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
    cr_assert(st.limits_enforced);
    cr_assert_eq(st.oom_kills, 1);
    cr_assert_eq(lis_sandbox_stats(neighbour, &st, &err), 0);
    cr_assert_eq(st.oom_kills, 0);
    t_sh(neighbour, "echo fine", &r);
    cr_assert_str_eq(r.out.data, "fine\n");
    lis_result_free(&r);
    /* teardown removes the cgroups */
    pid_t pid = lis_sandbox_pid(sb);
    char *slash = strstr(line, "/lis-");
    char name[256];
    snprintf(name, sizeof name, "%s", slash + 1);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_sandbox_destroy(neighbour, &err);
    char *left =
        t_host(&code, "find /sys/fs/cgroup -maxdepth 4 -type d -name '%s' 2>/dev/null", name);
    cr_assert_str_eq(left, "", "cgroups of pid %d left behind: %s", (int)pid, left);
    free(left);
    lis_ctx_free(ctx);
    free(t_host(&code, "rm -rf '%s'", t_tmpdir()));
}
