/* test_escape_images.c - hostile images and hostile sandbox contents:
 * mount targets that are symlinks to host paths (absolute, or climbing out
 * with ../), a rootfs owned by someone else, and `lis sandbox cp` / the file
 * API racing a sandbox that swaps a directory for a symlink to the host. */
#include "seclib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A host directory the test user can write (so a followed symlink would
 * succeed), holding files named like the targets lis writes. */
static char *victim(void)
{
    char *v = sec_dir("victim");
    static const char *const names[] = {"hosts", "resolv.conf", "secret", NULL};
    for (int i = 0; names[i]; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", v, names[i]);
        sec_write(p, "HOST-SECRET\n");
    }
    return v;
}

/* A copy of the busybox fixture where each "PATH=TARGET" of links (PATH
 * relative to the rootfs) is replaced by a symlink; "@" in TARGET stands for
 * the victim's absolute path, "^" for enough "../" to climb out of the rootfs. */
static char *hostile_rootfs(const char *const *links, const char *vic)
{
    char *root = malloc(4096);
    snprintf(root, 4096, "%s/evil", t_tmpdir());
    int code;
    free(t_host(&code, "cp -a '%s' '%s'", t_busybox(), root));
    cr_assert_eq(code, 0);
    for (int i = 0; links[i]; i++) {
        char path[256], target[4096] = "";
        const char *eq = strchr(links[i], '=');
        snprintf(path, sizeof path, "%.*s", (int)(eq - links[i]), links[i]);
        for (const char *t = eq + 1; *t; t++) {
            if (*t == '@')
                strncat(target, vic, sizeof target - strlen(target) - 1);
            else if (*t == '^')
                strncat(target, "../../../../../../../../../../../../../../..",
                        sizeof target - strlen(target) - 1);
            else
                strncat(target, (char[]){*t, 0}, sizeof target - strlen(target) - 1);
        }
        free(t_host(&code, "rm -rf '%s/%s' && ln -s '%s' '%s/%s'", root, path, target, root, path));
        cr_assert_eq(code, 0, "planting %s", links[i]);
    }
    return root;
}

/* The sandbox starts (and works) or fails with one line; either way the
 * victim directory is untouched and no mount on the host leads to it. */
static void hostile(const char *const *links, const lis_bind *binds, size_t nbinds, const char *cwd)
{
    lis_ctx *ctx = t_ctx();
    char *vic = victim();
    char *root = hostile_rootfs(links, vic);
    char *before = sec_digest(vic);
    sec_opts o = {.rootfs = root, .binds = binds, .nbinds = nbinds};
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    if (sec_try_sandbox(ctx, &o, &sb, &err) == 0) {
        const char *cmd = "cat /etc/hosts /etc/resolv.conf; ls /proc/1 /dev /sys /tmp >/dev/null; "
                          "for d in /etc /proc /dev /sys /tmp /data /data/sub .; do "
                          "echo pwned > $d/hosts; echo pwned > $d/secret; echo pwned > $d/new; "
                          "done 2>/dev/null; echo ran";
        lis_exec_spec ex = {.shell = cmd,
                            .cwd = cwd,
                            .out = LIS_STDIO_CAPTURE,
                            .err = LIS_STDIO_CAPTURE,
                            .timeout = 30};
        lis_result r;
        cr_assert_eq(sec_run(sb, &ex, &r, 40), 1);
        cr_expect(r.exec_failed || strstr(r.out.data, "ran"), "%s", r.out.data);
        cr_expect(!strstr(r.out.data, "HOST-SECRET"), "a host file was read: %s", r.out.data);
        lis_result_free(&r);
        sec_destroy(sb);
    } else {
        cr_expect(err.msg[0] && !strchr(err.msg, '\n'), "no one-line error: '%s'", err.msg);
    }
    char *after = sec_digest(vic);
    cr_expect_str_eq(after, before, "the host directory behind a planted symlink changed");
    int code;
    char *m = t_host(&code, "grep -c '%s' /proc/self/mountinfo", vic);
    cr_expect_str_eq(m, "0\n", "a mount on the host leads to the victim directory");
    free(m);
    free(before);
    free(after);
    free(root);
    free(vic);
    lis_ctx_free(ctx);
}

Test(escape, hostile_image_etc_hosts_symlink, .timeout = 90)
{
    hostile((const char *const[]){"etc/hosts=@/hosts", NULL}, NULL, 0, NULL);
}

Test(escape, hostile_image_resolv_conf_relative_symlink, .timeout = 90)
{
    hostile((const char *const[]){"etc/resolv.conf=^@/resolv.conf", NULL}, NULL, 0, NULL);
}

Test(escape, hostile_image_etc_is_a_symlink, .timeout = 90)
{
    hostile((const char *const[]){"etc=@", NULL}, NULL, 0, NULL);
}

Test(escape, hostile_image_proc_symlink, .timeout = 90)
{
    hostile((const char *const[]){"proc=@", NULL}, NULL, 0, NULL);
}

Test(escape, hostile_image_dev_symlink, .timeout = 90)
{
    /* lis makes device binds, devpts and links under /dev */
    hostile((const char *const[]){"dev=^@", NULL}, NULL, 0, NULL);
}

Test(escape, hostile_image_sys_symlink, .timeout = 90)
{
    hostile((const char *const[]){"sys=@", NULL}, NULL, 0, NULL);
}

Test(escape, hostile_image_tmp_symlink, .timeout = 90)
{
    hostile((const char *const[]){"tmp=^@", NULL}, NULL, 0, NULL);
}

Test(escape, hostile_image_tmp_to_host_tmp, .timeout = 90)
{
    /* ../../../../tmp from the rootfs: the host's /tmp itself */
    char mark[64];
    snprintf(mark, sizeof mark, "/tmp/lis-escape-tmp-%d", (int)getpid());
    lis_ctx *ctx = t_ctx();
    char *root = hostile_rootfs((const char *const[]){"tmp=^/tmp", NULL}, "");
    sec_opts o = {.rootfs = root};
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    if (sec_try_sandbox(ctx, &o, &sb, &err) == 0) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "echo pwned > %s; echo ran", mark);
        free(sec_sh(sb, cmd, NULL));
        sec_destroy(sb);
    }
    cr_expect_neq(access(mark, F_OK), 0, "the sandbox wrote into the host's /tmp");
    unlink(mark);
    free(root);
    lis_ctx_free(ctx);
}

Test(escape, hostile_image_bind_target_symlink, .timeout = 90)
{
    char *src = NULL;
    lis_ctx_free(t_ctx());
    src = sec_dir("src");
    lis_bind b[] = {{.host_path = src, .path = "/data/sub"}, {.host_path = src, .path = "/data2"}};
    hostile((const char *const[]){"data=@", "data2=^@", NULL}, b, 2, NULL);
    free(src);
}

Test(escape, hostile_image_workdir_symlink, .timeout = 90)
{
    hostile((const char *const[]){"testbed=@", NULL}, NULL, 0, "/testbed");
}

/* A rootfs made by root (sudo debootstrap) and without /etc/hosts: it starts
 * for an ordinary user, and nothing in it is written. */
Test(escape, foreign_owned_rootfs_untouched, .timeout = 60)
{
    const char *root = getenv("LIS_TEST_ROOTFS_ROOT");
    if (!root || access(root, F_OK) != 0)
        cr_skip_test("LIS_TEST_ROOTFS_ROOT not set (scripts/test.sh makes it as root)");
    char *before = sec_digest(root);
    lis_ctx *ctx = t_ctx();
    sec_opts o = {.rootfs = root};
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    cr_expect_eq(sec_try_sandbox(ctx, &o, &sb, &err), 0, "a root-owned rootfs does not start: %s",
                 err.msg);
    if (sb) {
        char *out = sec_sh(sb,
                           "grep -q localhost /etc/hosts && echo hosts; "
                           "echo x > /tmp/new && echo wrote",
                           NULL);
        cr_expect_str_eq(out, "hosts\nwrote\n", "%s", out);
        free(out);
        sec_destroy(sb);
    }
    char *after = sec_digest(root);
    cr_expect_str_eq(after, before, "the root-owned rootfs changed");
    free(before);
    free(after);
    lis_ctx_free(ctx);
}

/* ---- copies racing a sandbox that swaps /root/x between a directory and
 * symlinks to the host's victim directory ---- */

static void race_start(const char *name, const char *vic)
{
    int code;
    char *out = t_lis(&code, "sandbox create --rootfs %s --name %s", t_busybox(), name);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    /* a bounded loop (it stops by itself), in the background of the sandbox */
    out = t_lis(&code,
                "sandbox exec %s -- sh -c 'mkdir -p /root/t; (i=0; while [ $i -lt 20000 ]; "
                "do i=$((i+1)); rm -rf /root/x /root/t/sub; ln -s %s /root/x; "
                "ln -s ../../../../../../../..%s /root/t/sub; rm -f /root/x /root/t/sub; "
                "mkdir /root/x /root/t/sub; echo inside > /root/x/secret; "
                "echo inside > /root/t/sub/secret; done) >/dev/null 2>&1 &'",
                name, vic, vic);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
}

static void race_stop(const char *name)
{
    int code;
    free(t_lis(&code, "sandbox rm %s", name));
}

Test(escape, cp_out_file_symlink_race, .timeout = 120)
{
    lis_ctx_free(t_ctx());
    char *vic = victim(), *dst = sec_dir("dst");
    race_start("race1", vic);
    for (int i = 0; i < 40; i++) {
        int code;
        free(t_lis(&code, "sandbox cp race1:/root/x/secret %s/f%d", dst, i));
    }
    race_stop("race1");
    int code;
    char *leak = t_host(&code, "grep -rl HOST-SECRET '%s'", dst);
    cr_expect_str_eq(leak, "", "sandbox cp read a host file through a swapped symlink: %s", leak);
    free(leak);
    free(vic);
    free(dst);
}

Test(escape, cp_out_tree_symlink_race, .timeout = 120)
{
    lis_ctx_free(t_ctx());
    char *vic = victim(), *dst = sec_dir("dst");
    race_start("race2", vic);
    for (int i = 0; i < 30; i++) {
        int code;
        free(t_lis(&code, "sandbox cp race2:/root/t %s/t%d", dst, i));
    }
    race_stop("race2");
    int code;
    char *leak = t_host(&code, "grep -rl HOST-SECRET '%s'", dst);
    cr_expect_str_eq(leak, "", "sandbox cp read a host file through a swapped symlink: %s", leak);
    free(leak);
    free(vic);
    free(dst);
}

Test(escape, cp_in_file_symlink_race, .timeout = 120)
{
    lis_ctx_free(t_ctx());
    char *vic = victim(), *src = sec_dir("src");
    char f[4200];
    snprintf(f, sizeof f, "%s/secret", src);
    sec_write(f, "pwned\n");
    char *before = sec_digest(vic);
    race_start("race3", vic);
    for (int i = 0; i < 40; i++) {
        int code;
        free(t_lis(&code, "sandbox cp %s race3:/root/x/secret", f));
        free(t_lis(&code, "sandbox cp %s race3:/root/x/", f));
    }
    race_stop("race3");
    char *after = sec_digest(vic);
    cr_expect_str_eq(after, before, "sandbox cp wrote through a swapped symlink onto the host");
    free(before);
    free(after);
    free(vic);
    free(src);
}

Test(escape, cp_in_tree_symlink_race, .timeout = 120)
{
    lis_ctx_free(t_ctx());
    char *vic = victim(), *src = sec_dir("src");
    int code;
    free(t_host(&code,
                "mkdir -p %s/sub/deeper && echo pwned > %s/sub/secret && "
                "echo pwned > %s/sub/deeper/new",
                src, src, src));
    char *before = sec_digest(vic);
    race_start("race4", vic);
    for (int i = 0; i < 30; i++) {
        free(t_lis(&code, "sandbox cp %s/sub race4:/root/t/", src));
        free(t_lis(&code, "sandbox cp %s/sub race4:/root/t/sub/", src));
    }
    race_stop("race4");
    char *after = sec_digest(vic);
    cr_expect_str_eq(after, before, "sandbox cp wrote through a swapped symlink onto the host");
    free(before);
    free(after);
    free(vic);
    free(src);
}

Test(escape, file_api_symlink_race, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    char *vic = victim();
    char *before = sec_digest(vic);
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); rm -rf /root/x; "
             "ln -s %s /root/x; rm -f /root/x; mkdir /root/x; "
             "echo inside > /root/x/secret; done",
             vic);
    lis_exec_spec ex = {.shell = cmd, .timeout = 60};
    lis_proc *p;
    lis_error err = {0};
    cr_assert_eq(lis_exec_start(sb, &ex, &p, &err), 0, "%s", err.msg);
    for (int i = 0; i < 300; i++) {
        char *data = NULL;
        size_t len = 0;
        if (lis_file_read(sb, "/root/x/secret", 4096, &data, &len, &err) == 0) {
            cr_expect(!strstr(data, "HOST-SECRET"), "lis_file_read read a host file");
            free(data);
        }
        lis_file_write(sb, "/root/x/secret", "pwned\n", 6, 0644, &err);
        lis_file_write(sb, "/root/x/new", "pwned\n", 6, 0644, &err);
    }
    lis_proc_signal(p, 9, &err);
    lis_result r;
    lis_proc_wait(p, &r, &err);
    lis_result_free(&r);
    sec_destroy(sb);
    char *after = sec_digest(vic);
    cr_expect_str_eq(after, before, "the file API wrote through a swapped symlink onto the host");
    free(before);
    free(after);
    free(vic);
    lis_ctx_free(ctx);
}
