/* test_rootfs_snapshot.c - snapshots and forks (issue 15): the writable layer
 * captured exactly, stored as an image over its parent, forks independent of
 * each other and of the parent, gc keeping what is in use; C API and CLI. */
#include "rootfs.h"
#include "testlib.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void sh_ok(lis_sandbox *sb, const char *cmd, const char *want_out)
{
    lis_result r;
    t_sh(sb, cmd, &r);
    cr_assert_eq(r.exit_code, 0, "`%s` exited %d: %s%s", cmd, r.exit_code, r.out.data, r.err.data);
    if (want_out)
        cr_assert_str_eq(r.out.data, want_out, "`%s`", cmd);
    lis_result_free(&r);
}

static lis_sandbox *from_chain(lis_ctx *ctx, const char *chain)
{
    lis_sandbox_spec spec = {.rootfs = chain, .upper = LIS_UPPER_TMPFS};
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "create on %s: %s", chain, err.msg);
    return sb;
}

Test(snapshot, captures_files_deletions_owners_links_and_tmp, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_error err = {0};
    /* written, changed, deleted (whiteout), a lower dir replaced (opaque),
     * another owner with mode 0600, a symlink, a hard link, a fifo, /tmp */
    sh_ok(sb,
          "mkdir -p /work/sub && echo hello > /work/a && echo changed > /etc/hostname && "
          "rm /bin/ls && rm -rf /usr && mkdir -p /usr/new && echo n > /usr/new/f && "
          "echo secret > /work/s && chown 1000:1000 /work/s && chmod 600 /work/s && "
          "ln -s ../a /work/sub/link && ln /work/a /work/hard && mkfifo /work/fifo && "
          "echo t > /tmp/in-tmp && chmod 4755 /work/a",
          NULL);
    lis_snapshot_result snap;
    cr_assert_eq(lis_rootfs_snapshot(lis_ctx_data_dir(ctx), sb, "snaps:one", &snap, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(strncmp(snap.digest, "sha256:", 7), 0, "%s", snap.digest);
    cr_assert_str_eq(snap.ref, "snaps:one");
    cr_assert_str_eq(snap.parent, t_busybox(), "a --rootfs parent is named by its directory");
    cr_assert_eq(snap.depth, 2);
    cr_assert(snap.capture.files >= 8, "%llu", (unsigned long long)snap.capture.files);
    /* the sandbox goes on, unpaused */
    cr_assert(!lis_sandbox_is_paused(sb));
    sh_ok(sb, "cat /work/a", "hello\n");

    /* resolvable by tag and by digest, to the same chain */
    char chain[4096], chain2[4096];
    cr_assert_eq(lis_store_resolve(lis_ctx_data_dir(ctx), "snaps:one", chain, sizeof chain, &err),
                 0, "%s", err.msg);
    cr_assert_eq(lis_store_resolve(lis_ctx_data_dir(ctx), snap.digest, chain2, sizeof chain2, &err),
                 0, "%s", err.msg);
    cr_assert_str_eq(chain, chain2);
    cr_assert_str_eq(chain, snap.rootfs);
    cr_assert_not_null(strchr(chain, ':'), "a snapshot is a chain of layers: %s", chain);

    lis_sandbox *c = from_chain(ctx, chain);
    sh_ok(c, "cat /work/a /etc/hostname /usr/new/f /tmp/in-tmp", "hello\nchanged\nn\nt\n");
    sh_ok(c, "test ! -e /bin/ls && echo gone", "gone\n");
    sh_ok(c, "ls /usr", "new\n"); /* the opaque dir hides the old /usr entirely */
    sh_ok(c, "stat -c '%u:%g %a' /work/s", "1000:1000 600\n");
    sh_ok(c, "stat -c '%a' /work/a", "4755\n");
    sh_ok(c, "readlink /work/sub/link; cat /work/sub/link", "../a\nhello\n");
    sh_ok(c, "test \"$(stat -c %i /work/a)\" = \"$(stat -c %i /work/hard)\" && echo linked",
          "linked\n");
    sh_ok(c, "test -p /work/fifo && echo fifo", "fifo\n");
    sh_ok(c, "stat -c '%a' /tmp", "1777\n");

    /* the same state again is the same image */
    lis_snapshot_result again;
    cr_assert_eq(lis_rootfs_snapshot(lis_ctx_data_dir(ctx), sb, NULL, &again, &err), 0, "%s",
                 err.msg);
    cr_assert_str_eq(again.digest, snap.digest);
    cr_assert(again.existed);

    /* a snapshot of the snapshot's sandbox: a chain of three */
    sh_ok(c, "echo deeper > /work/b", NULL);
    lis_snapshot_result s2;
    cr_assert_eq(lis_rootfs_snapshot(lis_ctx_data_dir(ctx), c, "snaps:two", &s2, &err), 0, "%s",
                 err.msg);
    cr_assert_str_eq(s2.parent, snap.digest);
    cr_assert_eq(s2.depth, 3);
    lis_sandbox *d = from_chain(ctx, s2.rootfs);
    sh_ok(d, "cat /work/a /work/b", "hello\ndeeper\n");
    lis_rootfs_image *imgs = NULL;
    size_t n = 0;
    cr_assert_eq(lis_rootfs_list(lis_ctx_data_dir(ctx), &imgs, &n, &err), 0);
    int seen = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(imgs[i].ref, "snaps:two")) {
            seen = 1;
            cr_assert_str_eq(imgs[i].parent, snap.digest);
            cr_assert_str_eq(imgs[i].format, "snapshot");
        }
    free(imgs);
    cr_assert(seen);
    cr_assert_eq(lis_sandbox_destroy(d, &err), 0);
    cr_assert_eq(lis_sandbox_destroy(c, &err), 0);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0);
    lis_ctx_free(ctx);
}

Test(snapshot, sixteen_forks_diverge_independently, .timeout = 180)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_error err = {0};
    sh_ok(sb, "mkdir /work && echo parent > /work/who && echo shared > /work/common", NULL);
    lis_sandbox *forks[16];
    lis_error errs[16];
    lis_snapshot_result snap;
    int made = lis_sandbox_fork(ctx, sb, 16, NULL, forks, errs, &snap, &err);
    cr_assert_eq(made, 16, "%d made: %s / %s", made, err.msg, errs[0].msg);
    for (int i = 0; i < 16; i++) {
        char cmd[160];
        snprintf(cmd, sizeof cmd, "echo fork%d > /work/who && echo only%d > /work/own%d%s", i, i, i,
                 i == 3 ? " && rm /work/common" : "");
        sh_ok(forks[i], cmd, NULL);
    }
    for (int i = 0; i < 16; i++) {
        char want[64], cmd[64];
        snprintf(want, sizeof want, "fork%d\n", i);
        sh_ok(forks[i], "cat /work/who", want);
        /* no other fork's file is here */
        sh_ok(forks[i], "ls /work | grep -c own", "1\n");
        snprintf(cmd, sizeof cmd, "test -e /work/common && echo yes || echo no");
        sh_ok(forks[i], cmd, i == 3 ? "no\n" : "yes\n");
    }
    /* the parent saw none of it, and its own later writes reach no fork */
    sh_ok(sb, "cat /work/who; ls /work", "parent\ncommon\nwho\n");
    sh_ok(sb, "echo late > /work/late", NULL);
    sh_ok(forks[0], "test -e /work/late && echo yes || echo no", "no\n");
    for (int i = 0; i < 16; i++)
        cr_assert_eq(lis_sandbox_destroy(forks[i], &err), 0, "%s", err.msg);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0);
    lis_ctx_free(ctx);
}

/* A fork whose create fails is that fork's failure alone. */
static int create_some(void *arg, const lis_sandbox_spec *spec, int i, lis_sandbox **out,
                       lis_error *err)
{
    if (i == 1) {
        err->code = EAGAIN;
        snprintf(err->msg, sizeof err->msg, "refused on purpose");
        return -1;
    }
    return lis_sandbox_create(arg, spec, out, err);
}

Test(snapshot, each_fork_fails_on_its_own_and_bad_input_is_refused, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_error err = {0};
    lis_sandbox *forks[3];
    lis_error errs[3];
    lis_fork_opts o = {.create = create_some, .create_arg = ctx};
    cr_assert_eq(lis_sandbox_fork(ctx, sb, 3, &o, forks, errs, NULL, &err), 2, "%s", err.msg);
    cr_assert_not_null(forks[0]);
    cr_assert_null(forks[1]);
    cr_assert_str_eq(errs[1].msg, "refused on purpose");
    cr_assert_not_null(forks[2]);
    lis_sandbox_destroy(forks[0], &err);
    lis_sandbox_destroy(forks[2], &err);
    cr_assert_eq(lis_sandbox_fork(ctx, sb, 0, NULL, forks, errs, NULL, &err), -1);
    cr_assert(strstr(err.msg, "at least 1"), "%s", err.msg);
    lis_snapshot_result snap;
    cr_assert_eq(lis_rootfs_snapshot(lis_ctx_data_dir(ctx), sb, "bad tag!", &snap, &err), -1);
    cr_assert_null(strchr(err.msg, '\n'));
    /* a dead sandbox cannot be snapshotted: one line */
    pid_t pid = lis_sandbox_pid(sb);
    kill(pid, SIGKILL);
    for (int i = 0; i < 100 && kill(pid, 0) == 0; i++)
        usleep(20000);
    cr_assert_eq(lis_rootfs_snapshot(lis_ctx_data_dir(ctx), sb, NULL, &snap, &err), -1);
    cr_assert(strstr(err.msg, "not running"), "%s", err.msg);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(snapshot, fork_of_a_100mb_writable_layer, .timeout = 300)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_error err = {0};
    sh_ok(sb, "dd if=/dev/urandom of=/big bs=1M count=100 2>/dev/null && md5sum /big > /sum", NULL);
    lis_sandbox *forks[2];
    lis_error errs[2];
    lis_snapshot_result snap;
    cr_assert_eq(lis_sandbox_fork(ctx, sb, 2, NULL, forks, errs, &snap, &err), 2, "%s %s", err.msg,
                 errs[0].msg);
    cr_assert(snap.capture.bytes >= 100ull << 20, "%llu", (unsigned long long)snap.capture.bytes);
    for (int i = 0; i < 2; i++) {
        sh_ok(forks[i], "md5sum -c /sum >/dev/null && stat -c %s /big", "104857600\n");
        lis_sandbox_destroy(forks[i], &err);
    }
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

static int blob_exists(lis_ctx *ctx, const char *digest)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/rootfs/blobs/sha256/%s", lis_ctx_data_dir(ctx), digest + 7);
    struct stat st;
    return stat(p, &st) == 0;
}

Test(snapshot, gc_never_removes_a_layer_in_use, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    const char *dd = lis_ctx_data_dir(ctx);
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_error err = {0};
    sh_ok(sb, "echo 1 > /one", NULL);
    lis_snapshot_result s1, s2;
    cr_assert_eq(lis_rootfs_snapshot(dd, sb, NULL, &s1, &err), 0, "%s", err.msg); /* untagged */
    lis_sandbox *on1 = from_chain(ctx, s1.rootfs);
    sh_ok(on1, "echo 2 > /two", NULL);
    cr_assert_eq(lis_rootfs_snapshot(dd, on1, "keep:me", &s2, &err), 0, "%s", err.msg);
    int removed = 0;
    uint64_t freed = 0;
    /* s1 is untagged, but a live sandbox runs on it and the tagged s2 is on it */
    const char *keep[] = {lis_sandbox_rootfs(on1), NULL};
    cr_assert_eq(lis_rootfs_gc(dd, keep, &removed, &freed, &err), 0, "%s", err.msg);
    cr_assert(blob_exists(ctx, s1.digest) && blob_exists(ctx, s2.digest));
    lis_sandbox_destroy(on1, &err);
    cr_assert_eq(lis_rootfs_gc(dd, NULL, &removed, &freed, &err), 0, "%s", err.msg);
    cr_assert(blob_exists(ctx, s1.digest), "the parent of a tagged snapshot was removed");
    /* by digest, a parent is refused while its snapshot exists */
    int gone = 0;
    cr_assert_eq(lis_rootfs_rm(dd, s1.digest, &gone, &err), -1);
    cr_assert(strstr(err.msg, "parent of snapshot"), "%s", err.msg);
    /* untag the child: both go at the next gc */
    cr_assert_eq(lis_rootfs_rm(dd, "keep:me", &gone, &err), 0, "%s", err.msg);
    cr_assert(gone);
    cr_assert_eq(lis_rootfs_gc(dd, NULL, &removed, &freed, &err), 0, "%s", err.msg);
    cr_assert(!blob_exists(ctx, s1.digest) && !blob_exists(ctx, s2.digest));
    char chain[4096];
    cr_assert_eq(lis_store_resolve(dd, s2.digest, chain, sizeof chain, &err), -1);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(snapshot, cli_snapshot_fork_ls_and_errors, .timeout = 180)
{
    lis_ctx *ctx = t_ctx();
    lis_ctx_free(ctx);
    int code;
    char *out = t_lis(&code, "sandbox create --rootfs %s --name sbox", t_busybox());
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox exec sbox -- sh -c 'echo state > /root/f'");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox snapshot sbox --tag cli:snap");
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "sha256:") && strstr(out, "cli:snap") && strstr(out, "not processes"),
              "%s", out);
    free(out);
    out = t_lis(&code, "rootfs ls");
    cr_assert(strstr(out, "cli:snap") && strstr(out, "snapshot") && strstr(out, t_busybox()),
              "the chain is shown: %s", out);
    free(out);
    out = t_lis(&code, "sandbox fork sbox -n 3 --json");
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "sbox-fork-1") && strstr(out, "sbox-fork-3"), "%s", out);
    /* a warning about each fork (fallback limits here) is shown once */
    const char *w = strstr(out, "lis: warning: ");
    cr_assert(!w || !strstr(w + 1, "lis: warning: "), "a warning repeated per fork:\n%s", out);
    free(out);
    out = t_lis(&code, "sandbox exec sbox-fork-2 -- sh -c 'cat /root/f; echo mine > /root/f'");
    cr_assert_eq(code, 0, "%s", out);
    cr_assert_str_eq(out, "state\n");
    free(out);
    out = t_lis(&code, "sandbox exec sbox-fork-3 -- cat /root/f");
    cr_assert_str_eq(out, "state\n");
    free(out);
    out = t_lis(&code, "sandbox run --image cli:snap -- cat /root/f");
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "state\n"), "%s", out);
    free(out);
    /* errors: one line, non-zero */
    static const char *const bad[] = {"sandbox fork sbox", "sandbox fork sbox -n 0",
                                      "sandbox snapshot", "sandbox snapshot nosuch",
                                      "sandbox snapshot sbox --bogus"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = t_lis(&code, "%s", bad[i]);
        cr_assert_neq(code, 0, "%s: %s", bad[i], out);
        free(out);
    }
    out = t_lis(&code, "sandbox snapshot nosuch");
    cr_assert(strstr(out, "no sandbox named 'nosuch'"), "%s", out);
    free(out);
    out = t_lis(&code, "sandbox rm sbox sbox-fork-1 sbox-fork-2 sbox-fork-3");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
}

/* SIGTERM (or Ctrl-C) halfway through `lis sandbox fork -n 1024`: the forks
 * already made and the snapshot are removed, the parent runs on (not left
 * paused), and the process dies of the signal. */
Test(snapshot, cli_fork_interrupted_leaves_nothing_behind, .timeout = 180)
{
    lis_ctx *ctx = t_ctx();
    lis_ctx_free(ctx);
    int code;
    char *out = t_lis(&code, "sandbox create --rootfs %s --name ibox", t_busybox());
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_lis(&code, "sandbox exec ibox -- sh -c 'head -c 4000000 /dev/urandom > /root/f'");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    const char *d = t_tmpdir();
    out = t_host(&code,
                 "cd %s && export XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data; "
                 "%s sandbox fork ibox -n 1024 >out 2>err & p=$!; i=0; "
                 "until %s sandbox ls | grep -q ibox-fork-; do sleep 0.05; i=$((i+1)); "
                 "[ $i -lt 600 ] || break; done; kill -TERM $p; wait $p; echo \"rc=$?\"; "
                 "grep -v warning: err",
                 d, d, d, t_lis_bin(), t_lis_bin());
    cr_assert(strstr(out, "rc=143\n"), "not ended by its SIGTERM: %s", out);
    cr_assert(strstr(out, "lis: interrupted: ") && strstr(out, " removed, the snapshot removed; "
                                                               "sandbox ibox runs on as before"),
              "%s", out);
    free(out);
    out = t_lis(&code, "sandbox ls --json");
    cr_assert_eq(code, 0, "%s", out);
    cr_assert_null(strstr(out, "ibox-fork-"), "forks left behind: %s", out);
    cr_assert(strstr(out, "\"running\""), "the parent is not running: %s", out);
    free(out);
    out = t_lis(&code, "rootfs ls");
    cr_assert_null(strstr(out, "snapshot"), "the snapshot was left behind: %s", out);
    free(out);
    out = t_lis(&code, "sandbox exec ibox -- wc -c /root/f");
    cr_assert(strstr(out, "4000000"), "%s", out);
    free(out);
    out = t_lis(&code, "sandbox rm ibox");
    cr_assert_eq(code, 0, "%s", out);
    free(out);
}

/* A sparse file stays sparse (a hostile 1 TB hole neither fills the host's
 * disk nor takes time), and the set-up tmpfs lis-init holds for snapshots is
 * out of the sandbox's reach. */
Test(snapshot, sparse_files_and_the_held_tmpfs_out_of_reach, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_error err = {0};
    sh_ok(sb, "truncate -s 1099511627776 /hole && echo tail >> /hole", NULL);
    /* lis-init's fds (their numbers can be listed) can be neither read nor
     * opened from inside, as root */
    sh_ok(sb,
          "n=0; for i in $(seq 0 64); do ls /proc/1/fd/$i/ >/dev/null 2>&1 && n=$((n+1)); "
          "readlink /proc/1/fd/$i >/dev/null 2>&1 && n=$((n+1)); "
          "cat /proc/1/fd/$i/upper/etc/hosts >/dev/null 2>&1 && n=$((n+1)); done; echo $n",
          "0\n");
    sh_ok(sb, "ls /proc/1/fd | wc -l | grep -qv '^0$' && echo some", "some\n");
    lis_snapshot_result snap;
    cr_assert_eq(lis_rootfs_snapshot(lis_ctx_data_dir(ctx), sb, NULL, &snap, &err), 0, "%s",
                 err.msg);
    char blob[4200];
    snprintf(blob, sizeof blob, "%s/rootfs/blobs/sha256/%s/hole", lis_ctx_data_dir(ctx),
             snap.digest + 7);
    struct stat st;
    cr_assert_eq(stat(blob, &st), 0, "%s", blob);
    cr_assert_eq(st.st_size, (1ll << 40) + 5);
    cr_assert(st.st_blocks * 512 < (1 << 20), "the hole was written: %lld blocks",
              (long long)st.st_blocks);
    lis_sandbox *c = from_chain(ctx, snap.rootfs);
    sh_ok(c, "stat -c %s /hole; tail -c 5 /hole", "1099511627781\ntail\n");
    lis_sandbox_destroy(c, &err);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

static int setup_writes(void *arg, lis_sandbox *sb, lis_error *err)
{
    lis_result r;
    lis_exec_spec s = {.shell = (const char *)arg,
                       .out = LIS_STDIO_CAPTURE,
                       .err = LIS_STDIO_CAPTURE,
                       .timeout = 60};
    if (lis_exec(sb, &s, &r, err) < 0)
        return -1;
    int rc = r.exit_code ? lis_fail(err, EIO, "set-up exited %d", r.exit_code) : 0;
    lis_result_free(&r);
    return rc;
}

/* lis_rootfs_snapshot_setup (issue 24: lis batch's template): a set-up run
 * once in a sandbox of a chain of --rootfs directories, snapshot; sandboxes
 * on it each see the set-up and only their own writes; a failing set-up is
 * reported as such, with the sandbox gone. */
Test(snapshot, setup_snapshot_once_for_many, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    char layer[600], chain[2048];
    snprintf(layer, sizeof layer, "%s/extra-%ld", t_tmpdir(), (long)getpid());
    char *o = t_host(NULL, "mkdir -p %s/opt && echo from-layer > %s/opt/l", layer, layer);
    free(o);
    snprintf(chain, sizeof chain, "%s:%s", layer, t_busybox());
    lis_sandbox_spec spec = {.rootfs = chain, .upper = LIS_UPPER_TMPFS, .hostname = "tmpl"};
    lis_snapshot_result snap;
    lis_setup_stage stage;
    lis_error err = {0};
    cr_assert_eq(lis_rootfs_snapshot_setup(ctx, &spec, setup_writes,
                                           "mkdir -p /testbed/in && echo made > /testbed/in/f",
                                           &snap, &stage, &err),
                 0, "stage %d: %s", (int)stage, err.msg);
    cr_assert_str_eq(snap.parent, chain, "the parent of a chain of directories is the chain");
    cr_assert_eq(snap.depth, 3);
    lis_sandbox *a = from_chain(ctx, snap.rootfs), *b = from_chain(ctx, snap.rootfs);
    sh_ok(a, "cat /testbed/in/f /opt/l", "made\nfrom-layer\n");
    sh_ok(a, "echo mine > /testbed/in/f", NULL);
    sh_ok(b, "cat /testbed/in/f", "made\n");
    lis_sandbox_destroy(a, &err);
    lis_sandbox_destroy(b, &err);
    cr_assert_eq(lis_rootfs_rm(lis_ctx_data_dir(ctx), snap.digest, NULL, &err), 0, "%s", err.msg);
    /* a set-up that fails is the prepare stage's error (its sandbox is destroyed:
     * scripts/test.sh fails a suite that leaves a process behind) */
    cr_assert_eq(lis_rootfs_snapshot_setup(ctx, &spec, setup_writes, "exit 3", &snap, &stage, &err),
                 -1);
    cr_assert_eq(stage, LIS_SETUP_PREPARE);
    cr_assert(strstr(err.msg, "set-up exited 3"), "%s", err.msg);
    /* and a spec that cannot start is the create stage's */
    spec.rootfs = "/nonexistent-lis-rootfs";
    cr_assert_eq(lis_rootfs_snapshot_setup(ctx, &spec, setup_writes, "true", &snap, &stage, &err),
                 -1);
    cr_assert_eq(stage, LIS_SETUP_CREATE);
    lis_ctx_free(ctx);
}
