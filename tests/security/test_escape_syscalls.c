/* test_escape_syscalls.c - raw system-call routes around the filter and the
 * mount set-up: the new mount API (fsopen/fsmount/move_mount, open_tree,
 * mount_setattr, fspick), the ia32 (int 0x80) and x32 entries, Shocker's
 * open_by_handle_at, io_uring, userfaultfd, the parent user namespace,
 * clone3 and the kernel keyrings shared with the host user. */
#include "seclib.h"

#include <errno.h>
#include <linux/keyctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Runs CMD; it must not win, the sandbox's own mount table must be the
 * same before and after, and no mount on the host may mention our tmpdir. */
static void no_new_mounts(const char *cmd)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    char *before = sec_sh(sb, "cut -d' ' -f4- /proc/self/mountinfo", NULL);
    char *out = sec_sh(sb, cmd, NULL);
    cr_expect(!sec_won(out), "'%s' worked: %s", cmd, out);
    char *after = sec_sh(sb, "cut -d' ' -f4- /proc/self/mountinfo", NULL);
    cr_expect_str_eq(after, before, "'%s' changed the sandbox's mounts", cmd);
    sec_destroy(sb);
    int code;
    char *host = t_host(&code, "grep -c '%s' /proc/self/mountinfo", t_tmpdir());
    cr_expect_str_eq(host, "0\n", "a mount of the sandbox is visible on the host");
    free(host);
    free(before);
    free(after);
    free(out);
    lis_ctx_free(ctx);
}

/* Runs CMD in a fresh sandbox, expects it not to win, returns the output. */
static void refused(const char *cmd)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    char *out = sec_sh(sb, cmd, NULL);
    cr_expect(!sec_won(out), "'%s' worked: %s", cmd, out);
    cr_expect(sec_alive(sb));
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

Test(escape, new_mount_api_fsopen_tmpfs, .timeout = 60)
{
    no_new_mounts("/probe fsopen tmpfs /tmp; /probe fsopen proc /tmp");
}

Test(escape, new_mount_api_open_tree_clone, .timeout = 60)
{
    no_new_mounts("/probe open-tree / /tmp/tree; /probe open-tree /proc /tmp/p2");
}

Test(escape, new_mount_api_mount_setattr_proc_sys_rw, .timeout = 60)
{
    no_new_mounts("/probe setattr-rw /proc/sys; /probe setattr-rw /sys; "
                  "[ \"$(/probe statvfs /proc/sys)\" = ro ] || echo ok");
}

Test(escape, new_mount_api_fspick_remount_rw, .timeout = 60)
{
    no_new_mounts("/probe fspick-rw /sys; /probe fspick-rw /proc/sys; "
                  "[ \"$(/probe statvfs /sys)\" = ro ] || echo ok");
}

Test(escape, new_mount_api_cgroup_release_agent, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    char ran[4096], agent[4096], body[8300], cmd[4200];
    snprintf(ran, sizeof ran, "%s/agent-ran", t_tmpdir());
    snprintf(agent, sizeof agent, "%s/agent.sh", t_tmpdir());
    snprintf(body, sizeof body, "#!/bin/sh\ntouch %s\n", ran);
    sec_write(agent, body);
    chmod(agent, 0755);
    snprintf(cmd, sizeof cmd, "/probe fsopen-cgroup %s", agent);
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    char *out = sec_sh(sb, cmd, NULL);
    cr_expect(!sec_won(out), "a cgroup v1 context with a release_agent was created: %s", out);
    cr_expect_neq(access(ran, F_OK), 0, "the release agent ran on the host");
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

/* A key "user"/desc must be in neither keyring the host test process has. */
static void no_host_key(const char *desc)
{
    errno = 0;
    long k = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, "user", desc, 0);
    if (k < 0)
        k = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, "user", desc, 0);
    if (k >= 0)
        syscall(SYS_keyctl, KEYCTL_INVALIDATE, k);
    cr_expect(k < 0, "the sandbox added key '%s' to the host user's keyrings", desc);
}

static void key_attempt(const char *entry)
{
    char desc[64], cmd[256];
    snprintf(desc, sizeof desc, "lis-escape-%s-%d", entry, (int)getpid());
    snprintf(cmd, sizeof cmd, "/probe %s add_key %s", entry, desc);
    refused(cmd);
    no_host_key(desc);
}

Test(escape, ia32_add_key_to_the_host_keyring, .timeout = 60) { key_attempt("ia32"); }

Test(escape, x32_add_key_to_the_host_keyring, .timeout = 60) { key_attempt("x32"); }

Test(escape, ia32_unshare_user_namespace, .timeout = 60) { refused("/probe ia32 unshare -"); }

Test(escape, x32_unshare_user_namespace, .timeout = 60) { refused("/probe x32 unshare -"); }

Test(escape, ia32_mount_over_tmp, .timeout = 60) { no_new_mounts("/probe ia32 mount /tmp"); }

Test(escape, ia32_ptrace_pid1, .timeout = 60)
{
    refused("/probe ia32 ptrace 1; /probe ia32 ptrace $PPID");
}

Test(escape, keyctl_search_host_keyring, .timeout = 60)
{
    char desc[64], cmd[256];
    snprintf(desc, sizeof desc, "lis-escape-native-%d", (int)getpid());
    long key = syscall(SYS_add_key, "user", desc, "host-secret", 11, KEY_SPEC_USER_KEYRING);
    cr_assert(key >= 0, "add_key on the host failed");
    snprintf(cmd, sizeof cmd, "/probe keyctl %s", desc);
    refused(cmd);
    char buf[32] = "";
    cr_expect_eq(syscall(SYS_keyctl, KEYCTL_READ, key, buf, sizeof buf - 1), 11);
    syscall(SYS_keyctl, KEYCTL_INVALIDATE, key);
}

Test(escape, shocker_open_by_handle_at, .timeout = 60) { refused("/probe shocker"); }

Test(escape, io_uring_setup, .timeout = 60) { refused("/probe io_uring"); }

Test(escape, userfaultfd, .timeout = 60) { refused("/probe userfaultfd"); }

Test(escape, setns_into_the_parent_user_namespace, .timeout = 60) { refused("/probe nsparent"); }

Test(escape, clone3_new_user_namespace, .timeout = 60) { refused("/probe clone3"); }
