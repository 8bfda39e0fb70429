/* test_persist.c - persistent sandboxes, the CLI, warm exec, copies, cleanup. */
#include "testlib.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs the lis CLI with private state dirs under the test's tmpdir. */
static char *lis(int *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *lis(int *code, const char *fmt, ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return t_host(code, "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data %s %s 2>&1", t_tmpdir(),
                  t_tmpdir(), t_lis_bin(), args);
}

static void cli_setup(void)
{
    lis_ctx *ctx = t_ctx(); /* makes t_tmpdir() and its run/ and data/ */
    lis_ctx_free(ctx);
}

static int count_lines(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

Test(persist, cli_create_exec_cp_ls_rm_round_trip, .timeout = 60)
{
    cli_setup();
    int code;
    char *out = lis(&code, "sandbox create --rootfs %s --name box1 -e GREETING=hello", t_busybox());
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "box1\n"), "%s", out);
    free(out);
    out = lis(&code, "sandbox create --rootfs %s --name box1", t_busybox());
    cr_assert_neq(code, 0);
    cr_assert(strstr(out, "already exists"), "%s", out);
    free(out);

    out =
        lis(&code, "sandbox exec box1 -- sh -c 'echo $GREETING; echo state > /root/keep; exit 7'");
    cr_assert_eq(code, 7, "%s", out);
    cr_assert_str_eq(out, "hello\n");
    free(out);
    /* the file system persists between commands */
    out = lis(&code, "sandbox exec box1 -e X=1 -w /root -- sh -c 'cat keep; echo $X; pwd'");
    cr_assert_eq(code, 0, "%s", out);
    cr_assert_str_eq(out, "state\n1\n/root\n");
    free(out);

    /* cp in and out */
    char src[512], dst[512];
    snprintf(src, sizeof src, "%s/hostfile", t_tmpdir());
    FILE *f = fopen(src, "w");
    fputs("from the host\n", f);
    fclose(f);
    out = lis(&code, "sandbox cp %s box1:/root/", src);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = lis(&code, "sandbox exec box1 -- cat /root/hostfile");
    cr_assert_str_eq(out, "from the host\n");
    free(out);
    out = lis(&code, "sandbox exec box1 -- sh -c 'mkdir -p /root/d/e && echo deep > /root/d/e/f'");
    free(out);
    snprintf(dst, sizeof dst, "%s/out", t_tmpdir());
    out = lis(&code, "sandbox cp box1:/root/d %s", dst);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    char *c = t_host(&code, "cat %s/e/f", dst);
    cr_assert_str_eq(c, "deep\n");
    free(c);

    out = lis(&code, "sandbox ls");
    cr_assert(strstr(out, "box1") && strstr(out, "running"), "%s", out);
    free(out);
    out = lis(&code, "sandbox ls --json");
    cr_assert(strstr(out, "\"name\":\t\"box1\"") || strstr(out, "\"name\": \"box1\""), "%s", out);
    free(out);

    out = lis(&code, "sandbox rm box1");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = lis(&code, "sandbox ls");
    cr_assert(!strstr(out, "box1"), "%s", out);
    free(out);
    out = lis(&code, "sandbox exec box1 -- true");
    cr_assert_neq(code, 0);
    cr_assert(strstr(out, "no sandbox named 'box1'"), "%s", out);
    free(out);
    char *left =
        t_host(&code,
               "ls -A %s/run/lis | grep -v '^.mnt$' | wc -l; ls -A %s/data/lis/sandboxes | wc -l",
               t_tmpdir(), t_tmpdir());
    cr_assert_str_eq(left, "0\n0\n");
    free(left);
}

Test(persist, cli_bad_input_one_line_errors)
{
    cli_setup();
    int code;
    char *out = lis(&code, "sandbox exec");
    cr_assert_eq(code, 2);
    free(out);
    out = lis(&code, "sandbox run --rootfs /nonexistent -- true");
    cr_assert_eq(code, 125);
    cr_assert(strstr(out, "/nonexistent"), "%s", out);
    cr_assert_eq(count_lines(out, "\n"), 1, "%s", out);
    free(out);
    out = lis(&code, "sandbox run --rootfs %s --memory lots -- true", t_busybox());
    cr_assert_eq(code, 2);
    free(out);
    out = lis(&code, "sandbox run --rootfs %s -- /no/such/thing", t_busybox());
    cr_assert_eq(code, 127, "%s", out);
    cr_assert(strstr(out, "/no/such/thing"), "%s", out);
    free(out);
    out = lis(&code, "sandbox run --rootfs %s --timeout 0.5 -- sleep 30", t_busybox());
    cr_assert_eq(code, 124, "%s", out);
    free(out);
    out = lis(&code, "frobnicate");
    cr_assert_eq(code, 2);
    free(out);
}

Test(persist, thousand_commands_in_one_sandbox, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_error err = {0};
    for (int i = 0; i < 1000; i++) {
        char n[16];
        snprintf(n, sizeof n, "%d", i);
        const char *argv[] = {"echo", n, NULL};
        lis_exec_spec ex = {.argv = argv, .out = LIS_STDIO_CAPTURE};
        lis_result r;
        cr_assert_eq(lis_exec(sb, &ex, &r, &err), 0, "exec %d: %s", i, err.msg);
        cr_assert_eq(r.exit_code, 0);
        cr_assert_eq(atoi(r.out.data), i);
        lis_result_free(&r);
    }
    /* nothing piles up: PID 1 and the session of this very command (the last
     * echo's session reports its exit before it is gone itself: a moment) */
    lis_result r;
    int nproc = 0;
    for (int tries = 0; tries < 20; tries++) {
        t_sh(sb, "ls /proc | grep -c '^[0-9]'", &r);
        nproc = atoi(r.out.data);
        lis_result_free(&r);
        if (nproc <= 5)
            break;
        usleep(100000);
    }
    cr_assert(nproc <= 5, "%d processes", nproc);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(persist, two_hundred_concurrent_execs_over_fifty_sandboxes_one_thread, .timeout = 180)
{
    lis_ctx *ctx = t_ctx();
    enum { S = 50, P = 200 };
    lis_sandbox *sb[S];
    for (int i = 0; i < S; i++)
        sb[i] = t_sandbox(ctx, t_busybox());
    int ep = epoll_create1(EPOLL_CLOEXEC);
    lis_proc *p[P];
    int done[P] = {0}, left = P;
    lis_error err = {0};
    for (int i = 0; i < P; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "sleep 0.$((%d %% 3)); echo %d", i, i);
        lis_exec_spec ex = {.shell = cmd, .out = LIS_STDIO_CAPTURE, .err = LIS_STDIO_CAPTURE};
        cr_assert_eq(lis_exec_start(sb[i % S], &ex, &p[i], &err), 0, "%d: %s", i, err.msg);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        cr_assert_eq(epoll_ctl(ep, EPOLL_CTL_ADD, lis_proc_fd(p[i]), &ev), 0);
    }
    while (left) {
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, 30000);
        cr_assert(n > 0, "stalled with %d commands left", left);
        for (int k = 0; k < n; k++) {
            int i = (int)evs[k].data.u32;
            if (done[i])
                continue;
            int r = lis_proc_step(p[i], &err);
            cr_assert(r >= 0, "%s", err.msg);
            if (r == 1) {
                epoll_ctl(ep, EPOLL_CTL_DEL, lis_proc_fd(p[i]), NULL);
                lis_result res;
                cr_assert_eq(lis_proc_wait(p[i], &res, &err), 0, "%s", err.msg);
                cr_assert_eq(res.exit_code, 0);
                cr_assert_eq(atoi(res.out.data), i);
                lis_result_free(&res);
                done[i] = 1;
                left--;
            }
        }
    }
    close(ep);
    for (int i = 0; i < S; i++)
        lis_sandbox_destroy(sb[i], &err);
    lis_ctx_free(ctx);
}

Test(persist, copies_never_follow_planted_symlinks)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    char target[512];
    snprintf(target, sizeof target, "%s/host-target", t_tmpdir());
    cr_assert_eq(mkdir(target, 0700), 0);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ln -s /etc/passwd /tmp/pw && ln -s %s /tmp/d && ln -s / /tmp/up",
             target);
    lis_result r;
    t_sh(sb, cmd, &r);
    cr_assert_eq(r.exit_code, 0);
    lis_result_free(&r);
    lis_error err = {0};

    /* out: the symlink itself arrives, never the host's /etc/passwd */
    char dst[512];
    snprintf(dst, sizeof dst, "%s/pw-copy", t_tmpdir());
    cr_assert_eq(lis_copy_out(sb, "/tmp/pw", dst, &err), 0, "%s", err.msg);
    struct stat st;
    cr_assert_eq(lstat(dst, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "a planted symlink was followed on copy out");

    /* in: writing through a planted symlink is refused */
    char src[512];
    snprintf(src, sizeof src, "%s/evil", t_tmpdir());
    FILE *f = fopen(src, "w");
    fputs("evil\n", f);
    fclose(f);
    cr_assert_eq(lis_file_write(sb, "/tmp/pw", "x", 1, 0, &err), -1);
    cr_assert(strstr(err.msg, "symlink"), "%s", err.msg);
    /* a symlinked directory resolves inside the sandbox, never on the host */
    lis_file_write(sb, "/tmp/d/x", "x", 1, 0, &err);
    char hostx[600];
    snprintf(hostx, sizeof hostx, "%s/x", target);
    cr_assert_neq(access(hostx, F_OK), 0, "wrote through a symlink onto the host");
    lis_copy_in(sb, src, "/tmp/d/", &err); /* refused or kept inside: never on the host */
    snprintf(hostx, sizeof hostx, "%s/evil", target);
    cr_assert_neq(access(hostx, F_OK), 0, "copied through a symlink onto the host");
    /* ".." is refused outright */
    cr_assert_eq(lis_copy_out(sb, "/../../etc/passwd", dst, &err), -1);
    cr_assert(strstr(err.msg, ".."), "%s", err.msg);
    cr_assert_eq(lis_copy_in(sb, src, "/tmp/../../x", &err), -1);
    /* reading follows links only inside the sandbox root */
    char *data;
    size_t len;
    cr_assert_eq(lis_file_read(sb, "/tmp/up/etc/passwd", 1 << 20, &data, &len, &err), 0, "%s",
                 err.msg);
    cr_assert(strstr(data, "root:x:0:0:root:/root:/bin/sh"), "%s", data);
    cr_assert(!strstr(data, "lis-test"), "read the host's passwd");
    free(data);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

/* lis_copy_out_data's skip reports, one "path: why" line each */
typedef struct skips {
    char text[8192];
    int n;
} skips;

static void note_skip(void *arg, const char *path, const char *why)
{
    skips *k = arg;
    size_t l = strlen(k->text);
    snprintf(k->text + l, sizeof k->text - l, "%s: %s\n", path, why);
    k->n++;
}

static int is_link_to(const char *path, const char *want)
{
    char t[512];
    ssize_t n = readlink(path, t, sizeof t - 1);
    if (n < 0)
        return 0;
    t[n] = 0;
    return !strcmp(t, want);
}

/* The agent's export (PEP 706's "data" filter): only links that stay inside
 * the exported tree, no fifos, no setuid or world-writable modes. */
Test(persist, copy_out_data_exports_only_what_stays_inside)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_result r;
    t_sh(sb,
         "mkdir -p /tmp/out/sub/deep && cd /tmp/out && echo 42 > answer.txt && "
         "echo f > sub/deep/f && chmod 4777 sub/deep/f && chmod 0777 sub && "
         "ln -s /etc/shadow leak && ln -s ../../.. up && mkfifo pipe && "
         "ln -s deep/f sub/good && ln -s ../answer.txt sub/back && ln -s . self && "
         "ln -s self/../x sneaky && ln -s sub/../self/../../y sneaky2 && "
         "ln -s loop2 loop1 && ln -s loop1 loop2 && ln -s /tmp/out /tmp/rootlink",
         &r);
    cr_assert_eq(r.exit_code, 0, "%s", r.err.data);
    lis_result_free(&r);
    lis_error err = {0};
    skips k = {0};
    char dst[512], p[700];
    snprintf(dst, sizeof dst, "%s/export", t_tmpdir());
    cr_assert_eq(lis_copy_out_data(sb, "/tmp/out", dst, note_skip, &k, &err), 0, "%s", err.msg);

    /* kept: files, and links that resolve inside */
    struct stat st;
    snprintf(p, sizeof p, "%s/answer.txt", dst);
    cr_assert_eq(lstat(p, &st), 0);
    snprintf(p, sizeof p, "%s/sub/good", dst);
    cr_assert(is_link_to(p, "deep/f"), "sub/good was not kept");
    snprintf(p, sizeof p, "%s/sub/back", dst);
    cr_assert(is_link_to(p, "../answer.txt"), "sub/back was not kept");
    snprintf(p, sizeof p, "%s/self", dst);
    cr_assert(is_link_to(p, "."), "self was not kept");
    /* modes: no setuid, no group/other write */
    snprintf(p, sizeof p, "%s/sub/deep/f", dst);
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0755, "mode %o", st.st_mode & 07777);
    snprintf(p, sizeof p, "%s/sub", dst);
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0755, "mode %o", st.st_mode & 07777);

    /* left out, each reported once with its reason */
    const char *gone[] = {"leak", "up", "pipe", "sneaky", "sneaky2"};
    for (size_t i = 0; i < sizeof gone / sizeof *gone; i++) {
        snprintf(p, sizeof p, "%s/%s", dst, gone[i]);
        cr_assert_neq(lstat(p, &st), 0, "%s was exported", gone[i]);
        char line[64];
        snprintf(line, sizeof line, "\n%s: ", gone[i]);
        char *all = NULL;
        cr_assert(asprintf(&all, "\n%s", k.text) > 0);
        cr_assert(strstr(all, line), "%s not reported in:\n%s", gone[i], k.text);
        free(all);
    }
    cr_assert_eq(k.n, 5, "%s", k.text);
    cr_assert(strstr(k.text, "leak: absolute symlink to /etc/shadow\n"), "%s", k.text);
    cr_assert(strstr(k.text, "up: symlink to ../../.. leads outside the exported tree\n"), "%s",
              k.text);
    cr_assert(strstr(k.text, "pipe: a fifo\n"), "%s", k.text);
    cr_assert(strstr(k.text, "sneaky: symlink to self/../x: it leads outside"), "%s", k.text);
    /* a loop inside the tree never resolves, so never reaches the host: kept */
    snprintf(p, sizeof p, "%s/loop1", dst);
    cr_assert(is_link_to(p, "loop2"), "loop1 was not kept");

    /* the exported tree itself a link: nothing is exported, "." is reported */
    skips k2 = {0};
    snprintf(dst, sizeof dst, "%s/export2", t_tmpdir());
    cr_assert_eq(lis_copy_out_data(sb, "/tmp/rootlink", dst, note_skip, &k2, &err), 0, "%s",
                 err.msg);
    cr_assert_neq(lstat(dst, &st), 0, "the root link was exported");
    cr_assert_str_eq(k2.text, ".: absolute symlink to /tmp/out\n");
    /* the plain copy (lis sandbox cp) still copies links as they are */
    snprintf(dst, sizeof dst, "%s/export3", t_tmpdir());
    cr_assert_eq(lis_copy_out(sb, "/tmp/out", dst, &err), 0, "%s", err.msg);
    snprintf(p, sizeof p, "%s/leak", dst);
    cr_assert(is_link_to(p, "/etc/shadow"));
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

/* A tree nested deeper than any path (3000 levels overflowed the stack of the
 * recursive copy): a clear error, not a crash. */
Test(persist, copy_out_of_a_very_deep_tree_fails_cleanly)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_result r;
    /* three mkdir -p of 1000 levels each, not 3000 mkdir processes (which took
     * over a minute on a loaded host under ASan) */
    t_sh(sb,
         "p=$(printf 'a/%.0s' $(seq 1000)); mkdir /tmp/deep && cd /tmp/deep && "
         "for i in 1 2 3; do mkdir -p $p && cd -P $p || exit 1; done; echo x > f",
         &r);
    cr_assert_eq(r.exit_code, 0, "%s", r.err.data);
    lis_result_free(&r);
    lis_error err = {0};
    char dst[512];
    snprintf(dst, sizeof dst, "%s/deep-copy", t_tmpdir());
    cr_assert_eq(lis_copy_out(sb, "/tmp/deep", dst, &err), -1);
    cr_assert(strstr(err.msg, "more than 512 nested directories"), "%s", err.msg);
    skips k = {0};
    snprintf(dst, sizeof dst, "%s/deep-copy2", t_tmpdir());
    cr_assert_eq(lis_copy_out_data(sb, "/tmp/deep", dst, note_skip, &k, &err), -1);
    cr_assert(strstr(err.msg, "nested directories"), "%s", err.msg);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(persist, file_write_read_keep_every_byte)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_error err = {0};
    size_t n = 3 << 20;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)(i * 7 + (i >> 9));
    cr_assert_eq(lis_file_write(sb, "/work/new/dir/blob.bin", big, n, 0600, &err), 0, "%s",
                 err.msg);
    char *back;
    size_t len;
    cr_assert_eq(lis_file_read(sb, "/work/new/dir/blob.bin", n, &back, &len, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(len, n);
    cr_assert_eq(memcmp(back, big, n), 0);
    free(back);
    cr_assert_eq(lis_file_read(sb, "/work/new/dir/blob.bin", n - 1, &back, &len, &err), -1);
    lis_result r;
    t_sh(sb, "stat -c '%a %s' /work/new/dir/blob.bin", &r);
    cr_assert_str_eq(r.out.data, "600 3145728\n");
    lis_result_free(&r);
    char kind;
    uint64_t size;
    cr_assert_eq(lis_file_stat(sb, "/work/new/dir", &kind, &size, &err), 0);
    cr_assert_eq(kind, 'd');
    cr_assert_eq(lis_file_stat(sb, "/missing", &kind, &size, &err), -1);
    cr_assert_eq(err.code, ENOENT);
    free(big);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

/* As root inside (and Docker's archive calls) do: files and directories of
 * another uid inside, mode 0600/0700, are read, written, stat'ed and copied
 * in and out (with a
 * full map they belong to subordinate ids the owner itself cannot touch). */
Test(persist, file_ops_reach_files_of_other_users_inside)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_error err = {0};
    lis_result r;
    t_sh(sb, "[ $(wc -l < /proc/self/uid_map) -gt 1 ] && echo 1 || echo 0", &r);
    int full = r.out.data[0] == '1';
    lis_result_free(&r);
    if (!full) { /* a single map: every file inside is the owner's anyway */
        lis_sandbox_destroy(sb, &err);
        lis_ctx_free(ctx);
        cr_skip_test("no subordinate id range for this user: a single-uid map");
    }
    t_sh(sb,
         "mkdir -p /home/u/priv && echo secret > /home/u/priv/s && chmod 600 /home/u/priv/s "
         "&& chmod 700 /home/u/priv /home/u && chown -R 1000:1000 /home/u",
         &r);
    cr_assert_eq(r.exit_code, 0, "%s", r.err.data);
    lis_result_free(&r);
    char *data;
    size_t len;
    cr_assert_eq(lis_file_read(sb, "/home/u/priv/s", 1 << 20, &data, &len, &err), 0, "%s", err.msg);
    cr_assert_eq(len, 7);
    cr_assert_str_eq(data, "secret\n");
    free(data);
    cr_assert_eq(lis_file_write(sb, "/home/u/priv/s", "changed\n", 8, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(lis_file_write(sb, "/home/u/priv/new/deeper/f", "n", 1, 0640, &err), 0, "%s",
                 err.msg);
    char kind;
    uint64_t size;
    cr_assert_eq(lis_file_stat(sb, "/home/u/priv/s", &kind, &size, &err), 0, "%s", err.msg);
    cr_assert(kind == 'f' && size == 8);
    t_sh(sb, "cat /home/u/priv/s; stat -c '%a %u' /home/u/priv/s /home/u/priv/new/deeper/f", &r);
    cr_assert_str_eq(r.out.data, "changed\n600 1000\n640 0\n", "%s", r.out.data);
    lis_result_free(&r);
    /* a copy into that directory too (docker cp, put_archive) */
    char host[600];
    snprintf(host, sizeof host, "%s/in.txt", t_tmpdir());
    FILE *f = fopen(host, "w");
    cr_assert(f);
    fputs("copied\n", f);
    fclose(f);
    cr_assert_eq(lis_copy_in(sb, host, "/home/u/priv", &err), 0, "%s", err.msg);
    t_sh(sb, "cat /home/u/priv/in.txt", &r);
    cr_assert_str_eq(r.out.data, "copied\n");
    lis_result_free(&r);
    /* and out of it (docker cp out, get_archive) */
    char back[600];
    snprintf(back, sizeof back, "%s/out", t_tmpdir());
    cr_assert_eq(lis_copy_out(sb, "/home/u/priv", back, &err), 0, "%s", err.msg);
    char hp[700];
    snprintf(hp, sizeof hp, "%s/s", back);
    f = fopen(hp, "r");
    cr_assert(f, "%s was not copied out", hp);
    char line[32] = "";
    cr_assert(fgets(line, sizeof line, f));
    fclose(f);
    cr_assert_str_eq(line, "changed\n");
    /* still confined: a symlink planted inside is not written through */
    t_sh(sb, "ln -s /etc/passwd /home/u/priv/link", &r);
    lis_result_free(&r);
    cr_assert_eq(lis_file_write(sb, "/home/u/priv/link", "x", 1, 0, &err), -1);
    cr_assert_eq(err.code, ELOOP, "%s", err.msg);
    cr_assert_eq(lis_file_read(sb, "/home/u/missing", 10, &data, &len, &err), -1);
    cr_assert_eq(err.code, ENOENT, "%s", err.msg);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

/* The pid-namespace inode of a process, or "" when gone. */
static void ns_of(pid_t pid, char *out, size_t len)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/ns/pid", (int)pid);
    ssize_t n = readlink(p, out, len - 1);
    out[n > 0 ? n : 0] = 0;
}

Test(persist, killed_client_and_killed_init_leave_nothing, .timeout = 90)
{
    cli_setup();
    int code;
    char *out = lis(&code, "sandbox create --rootfs %s --name k1", t_busybox());
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    /* a client killed mid-command takes its command tree along */
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data exec %s sandbox exec k1 "
             "-- sh -c 'sleep 1001 & sleep 1002'",
             t_tmpdir(), t_tmpdir(), t_lis_bin());
    pid_t client = fork();
    if (client == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 1);
        execl("/bin/sh", "sh", "-c", cmd, NULL);
        _exit(127);
    }
    for (int i = 0; i < 100; i++) {
        out = lis(&code, "sandbox exec k1 -- sh -c 'ps -o args | grep -c ^sleep.100'");
        int n = atoi(out);
        free(out);
        if (n == 2)
            break;
        usleep(50000);
    }
    kill(client, SIGKILL);
    waitpid(client, NULL, 0);
    int n = -1;
    for (int i = 0; i < 100 && n != 0; i++) {
        out = lis(&code, "sandbox exec k1 -- sh -c 'ps -o args | grep -c ^sleep.100'");
        n = atoi(out);
        free(out);
        usleep(50000);
    }
    cr_assert_eq(n, 0, "the killed client's command tree survived");

    /* kill -9 of the sandbox's PID 1, then rm */
    out = lis(&code, "sandbox ls --json");
    char *pidp = strstr(out, "\"pid\":");
    cr_assert(pidp, "%s", out);
    pid_t pid1 = atoi(pidp + 6);
    free(out);
    char ns[64];
    ns_of(pid1, ns, sizeof ns);
    cr_assert(ns[0]);
    out = lis(&code, "sandbox exec k1 -- sh -c 'sleep 1000 >/dev/null 2>&1 &'");
    free(out);
    cr_assert_eq(kill(pid1, SIGKILL), 0);
    for (int i = 0; i < 100 && t_procs_in_ns(ns) > 0; i++)
        usleep(50000);
    cr_assert_eq(t_procs_in_ns(ns), 0);
    out = lis(&code, "sandbox ls");
    cr_assert(strstr(out, "dead"), "%s", out);
    free(out);
    out = lis(&code, "sandbox rm k1");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    char *left =
        t_host(&code,
               "ls -A %s/run/lis | grep -v '^.mnt$' | wc -l; ls -A %s/data/lis/sandboxes | wc -l; "
               "grep -c '%s' /proc/self/mountinfo",
               t_tmpdir(), t_tmpdir(), t_tmpdir());
    cr_assert_str_eq(left, "0\n0\n0\n");
    free(left);
}

Test(persist, another_users_sandbox_is_out_of_reach)
{
    const char *foreign = getenv("LIS_TEST_FOREIGN");
    if (!foreign || !*foreign)
        cr_skip_test("needs a second user's sandbox (scripts/test.sh as root makes one)");
    /* its state dir cannot be listed, its socket cannot be reached */
    char parent[512];
    snprintf(parent, sizeof parent, "%s", foreign);
    *strrchr(parent, '/') = 0;
    cr_assert_null(opendir(parent));
    cr_assert_eq(errno, EACCES);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s/ctl.sock", foreign);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_eq(connect(s, (struct sockaddr *)&a, sizeof a), -1);
    cr_assert_eq(errno, EACCES);
    close(s);
    /* and through lis it does not exist for us */
    cli_setup();
    int code;
    const char *name = strrchr(foreign, '/') + 1;
    char *out = lis(&code, "sandbox exec %s -- true", name);
    cr_assert_neq(code, 0);
    free(out);
    out = lis(&code, "sandbox ls");
    cr_assert(!strstr(out, name), "%s", out);
    free(out);
}

Test(persist, pool_hands_out_ready_sandboxes, .timeout = 60)
{
    lis_ctx *ctx = t_ctx();
    lis_error err = {0};
    const char *env[] = {"POOLED=yes", NULL};
    lis_sandbox_spec spec = {.rootfs = t_busybox(), .upper = LIS_UPPER_TMPFS, .env = env};
    lis_pool *pool = lis_pool_new(ctx, &spec, 3, &err);
    cr_assert(pool, "%s", err.msg);
    lis_sandbox *sb[5];
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(lis_pool_take(pool, &sb[i], &err), 0, "%s", err.msg);
        lis_result r;
        t_sh(sb[i], "echo $POOLED", &r);
        cr_assert_str_eq(r.out.data, "yes\n");
        lis_result_free(&r);
    }
    for (int i = 0; i < 50 && lis_pool_ready(pool) < 3; i++)
        usleep(100000);
    cr_assert_eq(lis_pool_ready(pool), 3, "the pool did not refill");
    for (int i = 0; i < 5; i++)
        cr_assert_eq(lis_sandbox_destroy(sb[i], &err), 0, "%s", err.msg);
    lis_pool_free(pool);
    /* a pool that cannot create sandboxes says why */
    lis_sandbox_spec bad = {.rootfs = "/nonexistent"};
    pool = lis_pool_new(ctx, &bad, 2, &err);
    cr_assert(pool);
    lis_sandbox *x;
    cr_assert_eq(lis_pool_take(pool, &x, &err), -1);
    cr_assert(strstr(err.msg, "/nonexistent"), "%s", err.msg);
    lis_pool_free(pool);
    lis_ctx_free(ctx);
}

Test(persist, cli_pool_claims_a_warm_spare, .timeout = 60)
{
    cli_setup();
    int code;
    char *out = lis(&code, "sandbox create --rootfs %s --pool 2 --name first", t_busybox());
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    int spares = 0;
    for (int i = 0; i < 100 && spares < 2; i++) {
        usleep(100000);
        out = lis(&code, "sandbox ls");
        spares = count_lines(out, "lispool-");
        free(out);
    }
    cr_assert_eq(spares, 2, "the pool was not filled");
    out = lis(&code, "sandbox create --rootfs %s --pool 2 --name second", t_busybox());
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "second"), "%s", out);
    free(out);
    out = lis(&code, "sandbox exec second -- hostname");
    cr_assert_str_eq(out, "sandbox\n", "not taken from the pool: %s", out);
    free(out);
    out = lis(&code, "sandbox create --rootfs %s --pool 2 --name second", t_busybox());
    cr_assert_neq(code, 0, "%s", out);
    free(out);
    usleep(500000);
    out = lis(&code, "sandbox rm --all");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = lis(&code, "sandbox ls");
    cr_assert(!strstr(out, "running"), "%s", out);
    free(out);
}

/* A second process (here: a second context on the same run dir) reuses the
 * holder user namespace of a live full-map sandbox instead of making its own
 * with newuidmap/newgidmap. */
#include "internal.h"
#include <linux/nsfs.h>
#include <sys/ioctl.h>

Test(persist, holder_namespace_is_reused_from_a_live_sandbox)
{
    lis_ctx *ctx = t_ctx();
    lis_error err = {0};
    lis_sandbox_spec spec = {.rootfs = t_busybox(), .persist = 1, .uidmap = LIS_UIDMAP_FULL};
    lis_sandbox *sb;
    if (lis_sandbox_create(ctx, &spec, &sb, &err) < 0) {
        lis_ctx_free(ctx);
        cr_skip_test("no full uid map here: %s", err.msg);
    }
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/ns/user", (int)lis_sandbox_pid(sb));
    int ns = open(p, O_RDONLY | O_CLOEXEC);
    int parent = ioctl(ns, NS_GET_PARENT);
    cr_assert(parent >= 0);
    struct stat want, got;
    cr_assert_eq(fstat(parent, &want), 0);

    lis_ctx_opts o = {.run_dir = lis_ctx_run_dir(ctx), .data_dir = lis_ctx_data_dir(ctx)};
    lis_ctx *second = lis_ctx_new(&o, &err);
    cr_assert(second, "%s", err.msg);
    int h = lis_holder_userns(second, &err);
    cr_assert(h >= 0, "%s", err.msg);
    cr_assert_eq(fstat(h, &got), 0);
    cr_assert_eq(got.st_ino, want.st_ino, "a new holder was made instead of reusing the live one");
    /* and sandboxes made through it work, with the full map */
    lis_sandbox_spec eph = {.rootfs = t_busybox(),
                            .upper = LIS_UPPER_TMPFS,
                            .uidmap = LIS_UIDMAP_FULL};
    lis_sandbox *sb2;
    cr_assert_eq(lis_sandbox_create(second, &eph, &sb2, &err), 0, "%s", err.msg);
    lis_result r;
    t_sh(sb2, "touch /tmp/x && chown 123:456 /tmp/x && stat -c %u:%g /tmp/x", &r);
    cr_assert_str_eq(r.out.data, "123:456\n");
    lis_result_free(&r);
    lis_sandbox_destroy(sb2, &err);
    close(parent);
    close(ns);
    lis_ctx_free(second);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    lis_ctx_free(ctx);
}
