/* test_escape_proc.c - /proc and /sys: the paths Docker and podman mask or make
 * read-only, /proc/PID/root and cwd, leaked fds and working directories (runc
 * CVE-2024-21626), a chroot breakout, and the cgroup release_agent. */
#include "seclib.h"

#include <linux/keyctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static char *in_fresh(lis_ctx *ctx, const char *cmd)
{
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    char *out = sec_sh(sb, cmd, NULL);
    sec_destroy(sb);
    return out;
}

/* Each PATH must be missing, empty or an empty directory inside. */
static void masked(const char *const *paths)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    for (int i = 0; paths[i]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "/probe masked %s", paths[i]);
        char *out = sec_sh(sb, cmd, NULL);
        cr_expect(strncmp(out, "masked", 6) == 0, "%s is not masked: %s", paths[i], out);
        free(out);
    }
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

/* PATH (when it exists inside) is on a read-only mount and a write to FILE
 * under it fails; the host's FILE keeps its content. */
static void read_only(const char *path, const char *file, const char *data)
{
    lis_ctx *ctx = t_ctx();
    char *host_before = file ? sec_read(file) : NULL;
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "if [ -e %s ]; then /probe statvfs %s; else echo ro; fi", path, path);
    char *out = sec_sh(sb, cmd, NULL);
    cr_expect_str_eq(out, "ro\n", "%s is not read-only inside: %s", path, out);
    free(out);
    if (file) {
        snprintf(cmd, sizeof cmd, "/probe write %s '%s'", file, data);
        out = sec_sh(sb, cmd, NULL);
        cr_expect(!sec_won(out), "wrote %s from inside: %s", file, out);
        free(out);
        char *host_after = sec_read(file);
        cr_expect_str_eq(host_after, host_before, "the host's %s changed", file);
        free(host_after);
    }
    free(host_before);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

Test(escape, proc_keys_masked, .timeout = 60)
{
    /* a key of the host user, as a credential helper or ssh-agent leaves them */
    char desc[64];
    snprintf(desc, sizeof desc, "lis-escape-canary-%d", (int)getpid());
    long key = syscall(SYS_add_key, "user", desc, "host-secret", 11, KEY_SPEC_USER_KEYRING);
    cr_assert(key >= 0, "add_key on the host failed");
    lis_ctx *ctx = t_ctx();
    char *out = in_fresh(ctx, "cat /proc/keys; /probe masked /proc/keys");
    cr_expect(!strstr(out, desc), "the host user's keys are listed inside: %s", out);
    cr_expect(strstr(out, "masked"), "/proc/keys is not masked: %s", out);
    /* and the host's key is intact */
    char buf[64] = "";
    long n = syscall(SYS_keyctl, KEYCTL_READ, key, buf, sizeof buf - 1);
    cr_expect(n == 11 && strcmp(buf, "host-secret") == 0, "the host key changed");
    syscall(SYS_keyctl, KEYCTL_INVALIDATE, key);
    free(out);
    lis_ctx_free(ctx);
}

Test(escape, proc_kcore_masked, .timeout = 60)
{
    masked((const char *const[]){"/proc/kcore", NULL});
}

Test(escape, proc_timer_list_masked, .timeout = 60)
{
    masked((const char *const[]){"/proc/timer_list", NULL});
}

Test(escape, proc_sched_debug_latency_stats_masked, .timeout = 60)
{
    masked((const char *const[]){"/proc/sched_debug", "/proc/latency_stats", NULL});
}

Test(escape, proc_acpi_scsi_asound_masked, .timeout = 60)
{
    masked((const char *const[]){"/proc/acpi", "/proc/scsi", "/proc/asound", NULL});
}

Test(escape, sys_firmware_masked, .timeout = 60)
{
    masked((const char *const[]){"/sys/firmware", NULL});
}

Test(escape, proc_sysrq_trigger_read_only, .timeout = 60)
{
    /* 'h' only prints the help to the kernel log, should the write ever work */
    read_only("/proc/sysrq-trigger", "/proc/sysrq-trigger", "h");
}

Test(escape, proc_bus_read_only, .timeout = 60) { read_only("/proc/bus", NULL, NULL); }

Test(escape, proc_fs_read_only, .timeout = 60) { read_only("/proc/fs", NULL, NULL); }

Test(escape, proc_irq_read_only, .timeout = 60)
{
    read_only("/proc/irq", "/proc/irq/default_smp_affinity", "1");
}

Test(escape, proc_sys_core_pattern, .timeout = 60)
{
    /* a core_pattern pipe runs as root on the host at the next crash */
    read_only("/proc/sys", "/proc/sys/kernel/core_pattern", "|/tmp/lis-escape %p");
}

Test(escape, sysfs_writes, .timeout = 60) { read_only("/sys", "/sys/kernel/mm/ksm/run", "1"); }

/* A secret file in the test's own tmpdir: no /proc/PID/root of any process
 * visible inside may lead to it. */
Test(escape, proc_pid_root_reaches_no_host_file, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    char canary[4096];
    snprintf(canary, sizeof canary, "%s/canary", t_tmpdir());
    sec_write(canary, "HOST-SECRET\n");
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "for p in /proc/[0-9]* /proc/self /proc/thread-self; do "
             "cat $p/root%s $p/root/../../../..%s; done 2>/dev/null; echo scanned",
             canary, canary);
    char *out = in_fresh(ctx, cmd);
    cr_expect(strstr(out, "scanned"), "%s", out);
    cr_expect(!strstr(out, "HOST-SECRET"), "a host file was read through /proc/PID/root: %s", out);
    free(out);
    lis_ctx_free(ctx);
}

Test(escape, proc_pid_cwd_reaches_no_host_dir, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    /* the owner's cwd is a host directory holding a secret: nothing inside
     * may have inherited it */
    char canary[4096];
    snprintf(canary, sizeof canary, "%s/canary", t_tmpdir());
    sec_write(canary, "HOST-SECRET\n");
    cr_assert_eq(chdir(t_tmpdir()), 0);
    char *out = in_fresh(ctx, "for p in /proc/[0-9]*; do cat $p/cwd/canary $p/cwd/../canary; "
                              "done 2>/dev/null; echo scanned");
    cr_expect(strstr(out, "scanned"), "%s", out);
    cr_expect(!strstr(out, "HOST-SECRET"), "a host dir was reached through /proc/PID/cwd: %s", out);
    free(out);
    cr_assert_eq(chdir("/"), 0);
    lis_ctx_free(ctx);
}

Test(escape, chroot_breakout, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    char canary[4096], cmd[4200];
    snprintf(canary, sizeof canary, "%s/canary", t_tmpdir());
    sec_write(canary, "HOST-SECRET\n");
    snprintf(cmd, sizeof cmd, "/probe chroot-breakout %s", canary);
    char *out = in_fresh(ctx, cmd);
    cr_expect(!sec_won(out), "climbing out of a chroot reached the host: %s", out);
    free(out);
    lis_ctx_free(ctx);
}

/* No LIS_ESCAPED marker (the probe creates one in every directory it reaches
 * outside the sandbox) anywhere the sandbox's fds could have led. */
static void no_marker(void)
{
    int code;
    char *found = t_host(&code, "find '%s' '%s' /tmp -maxdepth 4 -name LIS_ESCAPED 2>/dev/null",
                         t_tmpdir(), t_busybox());
    cr_expect_str_eq(found, "", "the probe wrote on the host: %s", found);
    free(found);
}

Test(escape, cve_2024_21626_no_fd_leads_out, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    /* a background process too, and a command started while it runs */
    char *out = sec_sh(sb, "sleep 30 & /probe fdscan; kill $!", NULL);
    cr_expect(strncmp(out, "none", 4) == 0, "an fd, cwd or root leads out of the sandbox: %s", out);
    free(out);
    sec_destroy(sb);
    no_marker();
    lis_ctx_free(ctx);
}

Test(escape, cve_2024_21626_cwd_through_proc_fds, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    /* the working directory is entered by lis-init before exec, while its own
     * fds are still open: runc leaked a host cgroup dir that way */
    for (int i = 0; i < 28; i++) {
        char cwd[64];
        if (i < 14)
            snprintf(cwd, sizeof cwd, "/proc/self/fd/%d", i + 3);
        else if (i < 24)
            snprintf(cwd, sizeof cwd, "/proc/1/fd/%d", i - 14);
        else
            snprintf(cwd, sizeof cwd, "%s",
                     (const char *[]){"/proc/1/cwd", "/proc/1/root/..", "/proc/self/cwd/..",
                                      "/proc/thread-self/root"}[i - 24]);
        const char *argv[] = {"/probe", "cwdcheck", NULL};
        lis_exec_spec ex = {.argv = argv,
                            .cwd = cwd,
                            .out = LIS_STDIO_CAPTURE,
                            .err = LIS_STDIO_CAPTURE,
                            .timeout = 20};
        lis_result r;
        cr_assert_eq(sec_run(sb, &ex, &r, 30), 1);
        cr_expect(r.exec_failed || strcmp(r.out.data, "inside\n") == 0,
                  "cwd %s leads out of the sandbox: %s", cwd, r.out.data);
        lis_result_free(&r);
    }
    sec_destroy(sb);
    no_marker();
    lis_ctx_free(ctx);
}

Test(escape, cve_2024_21626_cwd_through_proc_fds_persistent, .timeout = 120)
{
    lis_ctx_free(t_ctx());
    int code;
    char *out = t_lis(&code, "sandbox create --rootfs %s --name fdcwd -v %s:/probe:ro", t_busybox(),
                      sec_probe());
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    for (int fd = 0; fd < 12; fd++) {
        out = t_lis(&code, "sandbox exec fdcwd -w /proc/self/fd/%d -- /probe cwdcheck", fd);
        cr_expect(code != 0 || strcmp(out, "inside\n") == 0,
                  "cwd /proc/self/fd/%d leads out of a persistent sandbox: %s", fd, out);
        free(out);
        out = t_lis(&code, "sandbox exec fdcwd -w /proc/1/fd/%d -- /probe cwdcheck", fd);
        cr_expect(code != 0 || strcmp(out, "inside\n") == 0,
                  "cwd /proc/1/fd/%d leads out of a persistent sandbox: %s", fd, out);
        free(out);
    }
    out = t_lis(&code, "sandbox rm fdcwd");
    free(out);
    no_marker();
}

/* The cgroup v1 release_agent runs as root in the host's namespaces when a
 * cgroup empties: a script of ours that would leave a mark. */
static char *agent_script(char *ran, size_t len)
{
    char *path = malloc(4096);
    snprintf(path, 4096, "%s/agent.sh", t_tmpdir());
    snprintf(ran, len, "%s/agent-ran", t_tmpdir());
    char body[8192];
    snprintf(body, sizeof body, "#!/bin/sh\ntouch %s\n", ran);
    sec_write(path, body);
    chmod(path, 0755);
    return path;
}

static char *host_release_agents(void)
{
    int code;
    return t_host(&code, "for f in /sys/fs/cgroup/*/release_agent /sys/fs/cgroup/release_agent "
                         "/sys/fs/cgroup/*/notify_on_release; do [ -r $f ] && "
                         "echo \"$f $(cat $f)\"; done 2>/dev/null; true");
}

Test(escape, cgroup_v1_release_agent_mount, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    char ran[4096], cmd[8192];
    char *agent = agent_script(ran, sizeof ran);
    char *before = host_release_agents();
    snprintf(cmd, sizeof cmd, "/probe cgroup-v1 %s", agent);
    char *out = in_fresh(ctx, cmd);
    cr_expect(!sec_won(out), "a cgroup v1 hierarchy with a release_agent was mounted: %s", out);
    char *after = host_release_agents();
    cr_expect_str_eq(after, before, "the host's release agents changed");
    cr_expect_neq(access(ran, F_OK), 0, "the release agent ran on the host");
    free(before);
    free(after);
    free(out);
    free(agent);
    lis_ctx_free(ctx);
}

Test(escape, cgroup_release_agent_and_notify_on_release_writes, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    char ran[4096], cmd[8192];
    char *agent = agent_script(ran, sizeof ran);
    char *before = host_release_agents();
    snprintf(cmd, sizeof cmd,
             "for f in /sys/fs/cgroup/release_agent $(find /sys/fs/cgroup -maxdepth 3 "
             "-name release_agent 2>/dev/null); do /probe write $f %s; done; "
             "for f in $(find /sys/fs/cgroup -maxdepth 3 -name notify_on_release 2>/dev/null); do "
             "/probe write $f 1; done; mkdir /sys/fs/cgroup/lis-x /sys/fs/cgroup/*/lis-x "
             "2>/dev/null && echo ok; echo tried",
             agent);
    char *out = in_fresh(ctx, cmd);
    cr_expect(strstr(out, "tried"), "%s", out);
    cr_expect(!sec_won(out), "a release_agent or notify_on_release was written: %s", out);
    char *after = host_release_agents();
    cr_expect_str_eq(after, before, "the host's release agents changed");
    cr_expect_neq(access(ran, F_OK), 0, "the release agent ran on the host");
    free(before);
    free(after);
    free(out);
    free(agent);
    lis_ctx_free(ctx);
}

Test(escape, cgroup_procs_move_to_the_host_root, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)lis_sandbox_pid(sb));
    char *before = sec_read(path);
    /* inside, the cgroup namespace root looks like the hierarchy's root */
    char *out = sec_sh(sb,
                       "for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs "
                       "/sys/fs/cgroup/*/tasks; do [ -e $f ] && /probe write $f 1; done; "
                       "echo tried",
                       NULL);
    cr_expect(!sec_won(out), "PID 1 was moved to another cgroup: %s", out);
    char *after = sec_read(path);
    cr_expect_str_eq(after, before, "the sandbox's cgroups on the host changed");
    free(before);
    free(after);
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}
