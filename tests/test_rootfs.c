/* test_rootfs.c - the rootfs store: every import format built from the busybox
 * fixture with real tools and then run in a sandbox, malicious archives,
 * pulls from a real registry on 127.0.0.1, dedupe, rm and gc. */
#include "rootfs.h"
#include "testlib.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int have(const char *tool)
{
    int code = 0;
    free(t_host(&code, "command -v %s >/dev/null 2>&1", tool));
    return code == 0;
}

static void need(const char *tool)
{
    if (!have(tool))
        cr_skip_test("%s is not installed (scripts/deps.sh)", tool);
}

/* Builds a fixture with tests/rootfs-fixtures.sh; returns its path (malloc'ed). */
static char *fixture(const char *kind)
{
    char *p = malloc(512);
    snprintf(p, 512, "%s/fx-%s", t_tmpdir(), kind);
    int code = 0;
    char *out =
        t_host(&code, "sh %s/rootfs-fixtures.sh %s %s %s 2>&1", t_src_dir(), kind, t_busybox(), p);
    cr_assert_eq(code, 0, "building the %s fixture failed: %s", kind, out);
    free(out);
    return p;
}

static char *evil(const char *kind, const char *outside)
{
    char *p = malloc(512);
    snprintf(p, 512, "%s/evil-%s.tar", t_tmpdir(), kind);
    int code = 0;
    char *out =
        t_host(&code, "python3 %s/rootfs-evil.py %s %s %s 2>&1", t_src_dir(), kind, outside, p);
    cr_assert_eq(code, 0, "rootfs-evil.py %s: %s", kind, out);
    free(out);
    return p;
}

static size_t count_dir(const char *path)
{
    DIR *d = opendir(path);
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    if (d)
        closedir(d);
    return n;
}

static size_t nblobs(lis_ctx *ctx)
{
    char p[600];
    snprintf(p, sizeof p, "%s/rootfs/blobs/sha256", lis_ctx_data_dir(ctx));
    return count_dir(p);
}

static size_t ntmp(lis_ctx *ctx)
{
    char p[600];
    snprintf(p, sizeof p, "%s/rootfs/tmp", lis_ctx_data_dir(ctx));
    return count_dir(p);
}

static void import_ok(lis_ctx *ctx, const char *path, const char *name, lis_rootfs_result *r)
{
    lis_rootfs_opts o = {.name = name};
    lis_error err = {0};
    cr_assert_eq(lis_rootfs_import(lis_ctx_data_dir(ctx), path, &o, r, &err), 0, "import %s: %s",
                 path, err.msg);
}

/* Runs cmd in a sandbox on the image ref; returns its stdout (malloc'ed). */
static char *run_on(lis_ctx *ctx, const char *ref, const char *cmd)
{
    char dir[1024];
    lis_error err = {0};
    cr_assert_eq(lis_store_resolve(lis_ctx_data_dir(ctx), ref, dir, sizeof dir, &err), 0,
                 "resolve %s: %s", ref, err.msg);
    lis_sandbox *sb = t_sandbox(ctx, dir);
    lis_result r = {0};
    t_sh(sb, cmd, &r);
    cr_assert_eq(r.exit_code, 0, "'%s' on %s: exit %d: %s", cmd, ref, r.exit_code, r.err.data);
    char *out = strdup(r.out.data);
    lis_result_free(&r);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "destroy: %s", err.msg);
    return out;
}

static void check_busybox_image(lis_ctx *ctx, const char *ref)
{
    char *out = run_on(ctx, ref,
                       "cat /etc/lower.txt; readlink /bin/sh; stat -c %a /tmp; "
                       "echo hi | sha256sum | cut -c1-8");
    cr_assert_str_eq(out, "lower file\nbusybox\n1777\n98ea6e4f\n", "got: %s", out);
    free(out);
}

/* ---- each format imported and run -------------------------------------------- */

static void tarball_case(const char *kind, const char *tool)
{
    t_busybox();
    if (tool)
        need(tool);
    lis_ctx *ctx = t_ctx();
    char *p = fixture(kind);
    lis_rootfs_result r;
    char name[64];
    snprintf(name, sizeof name, "bb-%s:1", kind);
    import_ok(ctx, p, name, &r);
    cr_assert_str_eq(r.format, "tarball");
    cr_assert_str_eq(r.ref, name);
    cr_assert_eq(r.existed, 0);
    cr_assert(r.files > 100, "files %llu", (unsigned long long)r.files);
    /* the key is the sha256 of the archive */
    char *sum = t_host(NULL, "sha256sum %s | cut -c1-64", p);
    cr_assert(!strncmp(r.digest + 7, sum, 64), "digest %s vs %s", r.digest, sum);
    free(sum);
    check_busybox_image(ctx, name);
    /* the same archive again: a no-op (just a tag) */
    lis_rootfs_result r2;
    import_ok(ctx, p, "again:2", &r2);
    cr_assert_eq(r2.existed, 1);
    cr_assert_str_eq(r2.digest, r.digest);
    cr_assert_eq(nblobs(ctx), 1);
    cr_assert_eq(ntmp(ctx), 0);
    check_busybox_image(ctx, "again:2");
    free(p);
    lis_ctx_free(ctx);
}

Test(rootfs, import_tar) { tarball_case("tar", NULL); }
Test(rootfs, import_tar_gz) { tarball_case("gz", "gzip"); }
Test(rootfs, import_tar_xz) { tarball_case("xz", "xz"); }
Test(rootfs, import_tar_zst) { tarball_case("zst", "zstd"); }

static void check_layered(lis_ctx *ctx, const char *ref)
{
    /* layer 2: /opq opaque (old gone, new there), /etc/gone whited out, /etc/added */
    char *out = run_on(ctx, ref,
                       "ls /opq; test -e /etc/gone && echo BAD; cat /etc/added; "
                       "cat /etc/lower.txt; /bin/busybox true && echo ran");
    cr_assert_str_eq(out, "new\nadded\nlower file\nran\n", "got: %s", out);
    free(out);
}

Test(rootfs, import_oci_layout_two_layers_whiteouts)
{
    t_busybox();
    need("umoci");
    lis_ctx *ctx = t_ctx();
    char *p = fixture("oci");
    lis_rootfs_result r;
    import_ok(ctx, p, "layered:1", &r);
    cr_assert_str_eq(r.format, "oci-layout");
    /* keyed by the manifest digest */
    char *idx = t_host(NULL, "cat %s/index.json", p);
    cr_assert(strstr(idx, r.digest), "%s not in %s", r.digest, idx);
    free(idx);
    check_layered(ctx, "layered:1");
    /* without --name: the directory name and the layout's tag */
    lis_rootfs_result r2;
    import_ok(ctx, p, NULL, &r2);
    cr_assert_eq(r2.existed, 1);
    cr_assert_str_eq(r2.ref, "fx-oci:latest");
    free(p);
    lis_ctx_free(ctx);
}

Test(rootfs, import_oci_archive)
{
    t_busybox();
    need("umoci");
    need("skopeo");
    lis_ctx *ctx = t_ctx();
    char *p = fixture("oci-archive");
    lis_rootfs_result r;
    import_ok(ctx, p, NULL, &r);
    cr_assert_str_eq(r.format, "oci-archive");
    cr_assert_str_eq(r.ref, "fx-oci-archive:latest");
    check_layered(ctx, r.ref);
    cr_assert_eq(ntmp(ctx), 0);
    free(p);
    lis_ctx_free(ctx);
}

Test(rootfs, import_docker_archive)
{
    t_busybox();
    need("umoci");
    need("skopeo");
    lis_ctx *ctx = t_ctx();
    char *p = fixture("docker-archive");
    lis_rootfs_result r;
    import_ok(ctx, p, NULL, &r);
    cr_assert_str_eq(r.format, "docker-archive");
    cr_assert_str_eq(r.ref, "lis-test/da:v1"); /* from RepoTags */
    check_layered(ctx, "lis-test/da:v1");
    lis_rootfs_result r2;
    import_ok(ctx, p, NULL, &r2);
    cr_assert_eq(r2.existed, 1);
    free(p);
    lis_ctx_free(ctx);
}

Test(rootfs, import_oci_index_picks_platform)
{
    t_busybox();
    need("umoci");
    lis_ctx *ctx = t_ctx();
    char *p = fixture("multi");
    char sel[600];
    snprintf(sel, sizeof sel, "%s:multi", p);
    lis_rootfs_result r;
    import_ok(ctx, sel, "multi:host", &r);
    char *arch = run_on(ctx, "multi:host", "cat /etc/arch");
    cr_assert_str_neq(arch, "s390x\n");
    free(arch);
    lis_rootfs_opts o = {.name = "multi:s390x", .platform = "linux/s390x"};
    lis_error err = {0};
    cr_assert_eq(lis_rootfs_import(lis_ctx_data_dir(ctx), sel, &o, &r, &err), 0, "%s", err.msg);
    arch = run_on(ctx, "multi:s390x", "cat /etc/arch");
    cr_assert_str_eq(arch, "s390x\n");
    free(arch);
    o.platform = "linux/mips";
    cr_assert_eq(lis_rootfs_import(lis_ctx_data_dir(ctx), sel, &o, &r, &err), -1);
    cr_assert(strstr(err.msg, "--platform"), "%s", err.msg);
    /* several tags and none chosen: a clear error */
    cr_assert_eq(lis_rootfs_import(lis_ctx_data_dir(ctx), p, NULL, &r, &err), -1);
    cr_assert(strstr(err.msg, "PATH:TAG"), "%s", err.msg);
    free(p);
    lis_ctx_free(ctx);
}

Test(rootfs, import_keeps_modes_links_fifos_skips_devices)
{
    lis_ctx *ctx = t_ctx();
    char outside[600];
    snprintf(outside, sizeof outside, "%s/outside", t_tmpdir());
    mkdir(outside, 0755);
    char *p = evil("devices", outside);
    lis_rootfs_result r;
    import_ok(ctx, p, "dev:1", &r);
    cr_assert_eq(r.skipped, 1);
    char dir[1024];
    lis_error err = {0};
    cr_assert_eq(lis_store_resolve(lis_ctx_data_dir(ctx), "dev:1", dir, sizeof dir, &err), 0);
    char *out = t_host(NULL,
                       "cd %s && stat -c '%%n %%a %%F %%h' etc/ro etc/ro/file bin/suid "
                       "dev/fifo etc/hard && test ! -e dev/null && echo nodev",
                       dir);
    cr_assert_str_eq(out,
                     "etc/ro 555 directory 2\netc/ro/file 400 regular file 1\n"
                     "bin/suid 4755 regular file 1\ndev/fifo 600 fifo 1\n"
                     "etc/hard 644 regular file 2\nnodev\n",
                     "got: %s", out);
    free(out);
    /* a read-only tree is still removable */
    int gone = 0;
    cr_assert_eq(lis_rootfs_rm(lis_ctx_data_dir(ctx), "dev:1", &gone, &err), 0, "%s", err.msg);
    cr_assert_eq(gone, 1);
    cr_assert_eq(nblobs(ctx), 0);
    free(p);
    lis_ctx_free(ctx);
}

/* An opaque whiteout over a tree its own layer nested 1,500 deep, imported on
 * a job pool thread (1 MiB of stack, as lis serve's pulls): each level of the
 * clean-up's recursion once held 8 KiB of path buffers (12 MB here). */
struct import_job {
    const char *data_dir, *path;
    int rc;
    lis_error err;
};

static void import_job_run(void *arg)
{
    struct import_job *j = arg;
    lis_rootfs_result r;
    lis_rootfs_opts o = {.name = "deep:1"};
    j->rc = lis_rootfs_import(j->data_dir, j->path, &o, &r, &j->err);
}

static void import_job_done(void *arg, int status) { (void)arg, (void)status; }

Test(rootfs, opaque_whiteout_over_a_deep_tree_on_a_job_thread, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    char outside[600];
    snprintf(outside, sizeof outside, "%s/outside", t_tmpdir());
    mkdir(outside, 0755);
    char *p = evil("opaque-deep", outside);
    struct import_job j = {.data_dir = lis_ctx_data_dir(ctx), .path = p, .rc = -2};
    lis_error err = {0};
    lis_jobs *pool = lis_jobs_new(1, &err);
    cr_assert_not_null(pool, "%s", err.msg);
    cr_assert_not_null(lis_jobs_submit(pool, import_job_run, import_job_done, &j, &err), "%s",
                       err.msg);
    lis_jobs_stop(pool); /* runs the job and joins: a stack overflow kills the test */
    lis_jobs_free(pool);
    cr_assert_eq(j.rc, 0, "%s", j.err.msg);
    char dir[1024];
    cr_assert_eq(lis_store_resolve(lis_ctx_data_dir(ctx), "deep:1", dir, sizeof dir, &err), 0, "%s",
                 err.msg);
    /* the layer's own tree stays: opaque hides only what lies below it */
    char *out = t_host(NULL, "cd %s && find d -name f | wc -l && cat etc/ok", dir);
    cr_assert_str_eq(out, "1\nok\n");
    free(out);
    free(p);
    lis_ctx_free(ctx);
}

/* With a subordinate id range the image keeps its owners: inside a sandbox
 * with the full map they are the archive's ids again. */
Test(rootfs, import_keeps_ownership_with_a_subuid_range)
{
    lis_ctx *ctx = t_ctx();
    const char *dd = lis_ctx_data_dir(ctx);
    char tgz[1024];
    snprintf(tgz, sizeof tgz, "%s/owned.tar.gz", t_tmpdir());
    int code;
    /* bin owned by 0, srv and home by 100:200, and srv/f a second time (the
     * later entry replaces the earlier one, as tar does) */
    char *o = t_host(&code,
                     "cd %s && mkdir -p own/srv own/home/u && echo x > own/srv/f && "
                     "echo y > own/home/u/g && cp -a %s/bin own/ && "
                     "tar --numeric-owner --owner=0 --group=0 -cf base.tar -C own bin && "
                     "tar --numeric-owner --owner=100 --group=200 -rf base.tar -C own srv home && "
                     "echo z > own/srv/f && "
                     "tar --numeric-owner --owner=100 --group=200 -rf base.tar -C own srv/f && "
                     "gzip -c base.tar > %s",
                     t_tmpdir(), t_busybox(), tgz);
    cr_assert_eq(code, 0, "%s", o);
    free(o);
    lis_rootfs_result r;
    import_ok(ctx, tgz, "owned:1", &r);
    char dir[1024];
    lis_error err = {0};
    cr_assert_eq(lis_store_resolve(dd, "owned:1", dir, sizeof dir, &err), 0, "%s", err.msg);
    char f[1200];
    snprintf(f, sizeof f, "%s/srv/f", dir);
    struct stat st;
    cr_assert_eq(lstat(f, &st), 0);
    char *sub =
        t_host(&code, "grep -E \"^($(id -un)|$(id -u)):\" /etc/subuid | head -n1 | cut -d: -f2");
    long start = atol(sub);
    free(sub);
    if (start > 0 && getuid() != 0) {
        /* inside id 100 is the 100th subordinate id */
        cr_assert_eq((long)st.st_uid, start + 99, "owner %u", (unsigned)st.st_uid);
        lis_sandbox_spec spec = {.rootfs = dir, .upper = LIS_UPPER_TMPFS};
        lis_sandbox *sb;
        cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "%s", err.msg);
        lis_result res;
        t_sh(sb, "stat -c %u:%g /srv/f /home/u/g /bin; cat /srv/f", &res);
        cr_assert_str_eq(res.out.data, "100:200\n100:200\n0:0\nz\n");
        lis_result_free(&res);
        lis_sandbox_destroy(sb, &err);
    } else if (getuid() != 0) {
        cr_assert_eq(st.st_uid, getuid(), "without a range every file is the caller's");
    }
    /* and the whole image goes away again, subordinate-owned files included */
    int gone = 0;
    cr_assert_eq(lis_rootfs_rm(dd, "owned:1", &gone, &err), 0, "%s", err.msg);
    cr_assert_eq(gone, 1);
    cr_assert_eq(nblobs(ctx), 0);
    cr_assert_eq(ntmp(ctx), 0);
    lis_ctx_free(ctx);
}

Test(rootfs, import_keeps_user_xattrs)
{
    lis_ctx *ctx = t_ctx();
    char tarp[1024];
    snprintf(tarp, sizeof tarp, "%s/x.tar", t_tmpdir());
    int code;
    char *o =
        t_host(&code,
               "cd %s && mkdir -p xa/d && echo data > xa/d/f && "
               "python3 -c 'import os; os.setxattr(\"xa/d/f\", \"user.lis.note\", b\"kept\"); "
               "os.setxattr(\"xa/d\", \"user.lis.dir\", b\"too\")' && "
               "tar --xattrs --xattrs-include='user.*' -cf %s -C xa . 2>&1",
               t_tmpdir(), tarp);
    if (code != 0)
        cr_skip_test("this file system keeps no user xattrs: %s", o);
    free(o);
    lis_rootfs_result r;
    import_ok(ctx, tarp, "xattrs:1", &r);
    char dir[1024], p[1200], v[64] = "";
    lis_error err = {0};
    cr_assert_eq(lis_store_resolve(lis_ctx_data_dir(ctx), "xattrs:1", dir, sizeof dir, &err), 0);
    snprintf(p, sizeof p, "%s/d/f", dir);
    cr_assert_eq(getxattr(p, "user.lis.note", v, sizeof v), 4, "xattr lost");
    cr_assert_eq(memcmp(v, "kept", 4), 0);
    snprintf(p, sizeof p, "%s/d", dir);
    cr_assert_eq(getxattr(p, "user.lis.dir", v, sizeof v), 3, "directory xattr lost");
    lis_ctx_free(ctx);
}

Test(rootfs, import_keeps_mtimes)
{
    t_busybox();
    lis_ctx *ctx = t_ctx();
    char src[600], tarp[700];
    snprintf(src, sizeof src, "%s/src", t_tmpdir());
    snprintf(tarp, sizeof tarp, "%s/m.tar.gz", t_tmpdir());
    free(t_host(NULL,
                "mkdir -p %s/d && echo x > %s/d/f && touch -d @1000000000 %s/d/f %s/d && "
                "tar -C %s -czf %s .",
                src, src, src, src, src, tarp));
    lis_rootfs_result r;
    import_ok(ctx, tarp, "m:1", &r);
    char dir[1024];
    lis_error err = {0};
    lis_store_resolve(lis_ctx_data_dir(ctx), "m:1", dir, sizeof dir, &err);
    char *out = t_host(NULL, "stat -c %%Y %s/d %s/d/f", dir, dir);
    cr_assert_str_eq(out, "1000000000\n1000000000\n");
    free(out);
    lis_ctx_free(ctx);
}

/* ---- malicious and broken archives --------------------------------------------- */

static void refused(const char *kind, const char *want)
{
    lis_ctx *ctx = t_ctx();
    char outside[600];
    snprintf(outside, sizeof outside, "%s/outside", t_tmpdir());
    mkdir(outside, 0755);
    free(t_host(NULL, "echo secret > %s/secret && tar -C %s -cf %s/layer.tar secret", outside,
                outside, outside));
    char *before =
        t_host(NULL, "cd %s && ls -lA --time-style=+%%s . && stat -c %%Y . && cat secret", outside);
    char *p = evil(kind, outside);
    lis_rootfs_result r;
    lis_error err = {0};
    cr_assert_eq(lis_rootfs_import(lis_ctx_data_dir(ctx), p, NULL, &r, &err), -1, "%s was imported",
                 kind);
    cr_assert(strstr(err.msg, want), "%s: '%s' lacks '%s'", kind, err.msg, want);
    cr_assert(!strchr(err.msg, '\n'));
    char *after =
        t_host(NULL, "cd %s && ls -lA --time-style=+%%s . && stat -c %%Y . && cat secret", outside);
    cr_assert_str_eq(before, after, "%s changed the outside directory", kind);
    cr_assert_eq(nblobs(ctx), 0, "%s left an image", kind);
    cr_assert_eq(ntmp(ctx), 0, "%s left a temporary tree", kind);
    char *found = t_host(NULL, "find %s /tmp -name pwned 2>/dev/null | head -1", t_tmpdir());
    cr_assert_str_eq(found, "");
    free(found);
    free(before);
    free(after);
    free(p);
    lis_ctx_free(ctx);
}

Test(rootfs_evil, absolute_path) { refused("abs", "absolute path"); }
Test(rootfs_evil, dotdot) { refused("dotdot", "'..'"); }
Test(rootfs_evil, symlinked_parent) { refused("symlink-parent", "symlink"); }
Test(rootfs_evil, symlinked_parent_relative) { refused("symlink-parent-rel", "symlink"); }
Test(rootfs_evil, hardlink_absolute) { refused("hardlink-abs", "absolute path"); }
Test(rootfs_evil, hardlink_dotdot) { refused("hardlink-dotdot", "'..'"); }
Test(rootfs_evil, hardlink_through_symlink) { refused("hardlink-via-symlink", "symlink"); }
Test(rootfs_evil, write_through_symlink) { refused("write-through", "symlink"); }
Test(rootfs_evil, write_through_hardlinked_symlink)
{
    refused("write-through-hardlinked-symlink", "symlink");
}
Test(rootfs_evil, docker_layer_outside) { refused("docker-escape", "outside the image"); }
Test(rootfs_evil, docker_layer_symlink_outside) { refused("docker-symlink", "outside the image"); }

Test(rootfs_evil, truncated_and_corrupt_archives)
{
    t_busybox();
    lis_ctx *ctx = t_ctx();
    char *p = fixture("gz");
    char cut[600], junk[600], empty[600];
    snprintf(cut, sizeof cut, "%s/cut.tar.gz", t_tmpdir());
    snprintf(junk, sizeof junk, "%s/junk.tar", t_tmpdir());
    snprintf(empty, sizeof empty, "%s/empty.tar", t_tmpdir());
    free(t_host(NULL, "head -c 500000 %s > %s; head -c 100000 /dev/urandom > %s; : > %s", p, cut,
                junk, empty));
    const char *bad[] = {cut, junk, empty, "/nonexistent/x.tar", t_tmpdir()};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lis_rootfs_result r;
        lis_error err = {0};
        cr_assert_eq(lis_rootfs_import(lis_ctx_data_dir(ctx), bad[i], NULL, &r, &err), -1,
                     "%s imported", bad[i]);
        cr_assert(err.msg[0] && !strchr(err.msg, '\n'), "%s: '%s'", bad[i], err.msg);
        cr_assert_eq(nblobs(ctx), 0, "%s left an image", bad[i]);
        cr_assert_eq(ntmp(ctx), 0, "%s left a temporary tree", bad[i]);
    }
    /* corrupt OCI layer blob: digest mismatch */
    if (have("umoci")) {
        char *oci = fixture("oci");
        free(t_host(NULL,
                    "f=$(ls -S %s/blobs/sha256/* | head -1); chmod u+w $f; "
                    "printf XXXX | dd of=$f bs=1 seek=100 conv=notrunc 2>/dev/null",
                    oci));
        lis_rootfs_result r;
        lis_error err = {0};
        cr_assert_eq(lis_rootfs_import(lis_ctx_data_dir(ctx), oci, NULL, &r, &err), -1);
        cr_assert(strstr(err.msg, "sha256") || strstr(err.msg, "corrupt"), "%s", err.msg);
        cr_assert_eq(nblobs(ctx), 0);
        cr_assert_eq(ntmp(ctx), 0);
        free(oci);
    }
    free(p);
    lis_ctx_free(ctx);
}

/* ---- store: dedupe, tags, rm, gc -------------------------------------------------- */

Test(rootfs_store, dedupe_tags_rm_gc)
{
    t_busybox();
    lis_ctx *ctx = t_ctx();
    const char *dd = lis_ctx_data_dir(ctx);
    char *gz = fixture("gz"), *tar = fixture("tar");
    lis_rootfs_result a, b, c;
    import_ok(ctx, gz, "one:1", &a);
    import_ok(ctx, gz, "two:2", &b);
    import_ok(ctx, tar, "three", &c);
    cr_assert_str_eq(a.digest, b.digest);
    cr_assert_str_eq(c.ref, "three:latest");
    cr_assert_eq(nblobs(ctx), 2);
    lis_rootfs_image *v = NULL;
    size_t n = 0;
    lis_error err = {0};
    cr_assert_eq(lis_rootfs_list(dd, &v, &n, &err), 0);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(v[0].ref, "one:1");
    cr_assert_str_eq(v[0].format, "tarball");
    cr_assert(v[0].size > 1000000);
    free(v);
    char *json = NULL;
    cr_assert_eq(lis_rootfs_inspect(dd, "two:2", &json, &err), 0, "%s", err.msg);
    cr_assert(strstr(json, "\"one:1\"") && strstr(json, a.digest), "%s", json);
    free(json);
    /* a digest prefix works too */
    char pre[20];
    snprintf(pre, sizeof pre, "%.12s", a.digest + 7);
    cr_assert_eq(lis_rootfs_inspect(dd, pre, &json, &err), 0, "%s", err.msg);
    free(json);
    cr_assert_eq(lis_rootfs_tag(dd, "three", "four:4", &err), 0, "%s", err.msg);
    int gone = -1;
    cr_assert_eq(lis_rootfs_rm(dd, "one:1", &gone, &err), 0);
    cr_assert_eq(gone, 0); /* two:2 still names it */
    cr_assert_eq(lis_rootfs_rm(dd, "two:2", &gone, &err), 0);
    cr_assert_eq(gone, 1);
    cr_assert_eq(nblobs(ctx), 1);
    cr_assert_eq(lis_rootfs_rm(dd, "nope:1", &gone, &err), -1);
    cr_assert(strstr(err.msg, "no image 'nope:1'"), "%s", err.msg);
    cr_assert_eq(lis_rootfs_rm(dd, "../x", &gone, &err), -1);
    /* removing by digest drops every tag */
    cr_assert_eq(lis_rootfs_rm(dd, c.digest, &gone, &err), 0, "%s", err.msg);
    cr_assert_eq(gone, 1);
    cr_assert_eq(lis_store_resolve(dd, "four:4", (char[512]){0}, 512, &err), -1);
    /* gc: untagged images and leftovers go, images in use stay */
    import_ok(ctx, gz, "keep:1", &a);
    import_ok(ctx, tar, "drop:1", &c);
    char p[1024], keepdir[1024];
    snprintf(p, sizeof p, "%s/rootfs/tags/drop/1", dd);
    unlink(p);
    snprintf(p, sizeof p, "%s/rootfs/tmp/999999-img-XXXXXX", dd);
    mkdir(p, 0700);
    int removed = 0;
    uint64_t freed = 0;
    cr_assert_eq(lis_rootfs_gc(dd, NULL, &removed, &freed, &err), 0, "%s", err.msg);
    cr_assert_eq(removed, 1);
    cr_assert(freed > 1000000);
    cr_assert_eq(nblobs(ctx), 1);
    cr_assert_eq(ntmp(ctx), 0);
    /* an untagged image still used by a sandbox is kept when listed in keep */
    lis_store_resolve(dd, "keep:1", keepdir, sizeof keepdir, &err);
    snprintf(p, sizeof p, "%s/rootfs/tags/keep/1", dd);
    unlink(p);
    const char *keep[] = {keepdir, NULL};
    cr_assert_eq(lis_rootfs_gc(dd, keep, &removed, &freed, &err), 0);
    cr_assert_eq(removed, 0);
    cr_assert_eq(nblobs(ctx), 1);
    free(gz);
    free(tar);
    lis_ctx_free(ctx);
}

Test(rootfs_store, bad_names_refused)
{
    t_busybox();
    lis_ctx *ctx = t_ctx();
    char *gz = fixture("gz");
    const char *bad[] = {"",       "../x", "a//b", "a/../b",  "x:",
                         "x:../y", "/abs", "a b",  ".hidden", "x:.t"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lis_rootfs_opts o = {.name = bad[i]};
        lis_rootfs_result r;
        lis_error err = {0};
        cr_assert_eq(lis_rootfs_import(lis_ctx_data_dir(ctx), gz, &o, &r, &err), -1,
                     "name '%s' accepted", bad[i]);
        cr_assert(strstr(err.msg, "invalid image name"), "%s", err.msg);
    }
    cr_assert_eq(nblobs(ctx), 0);
    free(gz);
    lis_ctx_free(ctx);
}

/* ---- the CLI ------------------------------------------------------------------------ */

Test(rootfs_cli, import_ls_run_rm_gc)
{
    t_busybox();
    const char *lis = t_lis_bin();
    lis_ctx *ctx = t_ctx();
    char *gz = fixture("gz");
    char env[700];
    snprintf(env, sizeof env, "XDG_DATA_HOME=%s/xdg", t_tmpdir());
    int code = 0;
    char *out = t_host(&code, "%s %s rootfs import %s --name cli:1 2>&1", env, lis, gz);
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "cli:1 sha256:"), "%s", out);
    free(out);
    out = t_host(&code, "%s %s sandbox run --image cli:1 -- cat /etc/lower.txt 2>/dev/null", env,
                 lis);
    cr_assert_eq(code, 0, "%s", out);
    cr_assert_str_eq(out, "lower file\n");
    free(out);
    out = t_host(&code, "%s %s rootfs ls --json", env, lis);
    cr_assert(strstr(out, "\"ref\":\"cli:1\""), "%s", out);
    free(out);
    out = t_host(&code, "%s %s rootfs inspect cli:1", env, lis);
    cr_assert_eq(code, 0);
    cr_assert(strstr(out, "\"format\":\t\"tarball\""), "%s", out);
    free(out);
    const char *bad[] = {"rootfs import /nonexistent.tar",
                         "rootfs import",
                         "rootfs frob",
                         "rootfs inspect nope:1",
                         "rootfs rm nope",
                         "rootfs pull UPPER/x",
                         "rootfs import --name ../x /etc/hostname"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = t_host(&code, "%s %s %s 2>&1", env, lis, bad[i]);
        cr_assert_neq(code, 0, "'%s' succeeded", bad[i]);
        cr_assert(code != 139 && code != 134, "'%s' crashed", bad[i]);
        cr_assert(!strncmp(out, "lis: ", 5) && strchr(out, '\n') == out + strlen(out) - 1,
                  "'%s' printed: %s", bad[i], out);
        free(out);
    }
    out = t_host(&code, "%s %s rootfs rm cli:1 && %s %s rootfs gc", env, lis, env, lis);
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "deleted cli:1"), "%s", out);
    free(out);
    free(gz);
    lis_ctx_free(ctx);
}

/* ---- pulls from a real registry on 127.0.0.1 ------------------------------------------ */

typedef struct registry {
    pid_t pid;
    int port;
    char root[600];
} registry;

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    cr_assert(bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
              getsockname(s, (struct sockaddr *)&a, &l) == 0);
    close(s);
    return ntohs(a.sin_port);
}

static void registry_start(registry *r)
{
    need("docker-registry");
    need("skopeo");
    need("umoci");
    snprintf(r->root, sizeof r->root, "%s/registry", t_tmpdir());
    mkdir(r->root, 0700);
    char cfg[700];
    snprintf(cfg, sizeof cfg, "%s/config.yml", r->root);
    for (int attempt = 0; attempt < 5; attempt++) {
        r->port = free_port();
        FILE *f = fopen(cfg, "w");
        cr_assert(f);
        fprintf(f,
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
                "    rootdirectory: %s/data\n  delete:\n    enabled: true\n"
                "http:\n  addr: 127.0.0.1:%d\n",
                r->root, r->port);
        fclose(f);
        pid_t ppid = getpid();
        r->pid = fork();
        cr_assert(r->pid >= 0);
        if (r->pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the test */
            if (getppid() != ppid)
                _exit(1);
            char logp[700];
            snprintf(logp, sizeof logp, "%s/log", r->root);
            FILE *lf = freopen(logp, "w", stderr);
            (void)lf;
            dup2(2, 1);
            execlp("docker-registry", "docker-registry", "serve", cfg, (char *)NULL);
            _exit(127);
        }
        for (int i = 0; i < 100; i++) {
            int code = 1;
            free(t_host(&code, "curl -sf --noproxy '*' -o /dev/null http://127.0.0.1:%d/v2/",
                        r->port));
            if (code == 0)
                return;
            if (waitpid(r->pid, NULL, WNOHANG) == r->pid)
                break; /* died (port taken?): try another port */
            usleep(100000);
        }
        kill(r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
    }
    cr_assert_fail("the registry did not start (see %s/log)", r->root);
}

static void registry_stop(registry *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGTERM);
        waitpid(r->pid, NULL, 0);
        r->pid = 0;
    }
}

static void push(registry *r, const char *src, const char *dst, int all)
{
    int code = 0;
    char *out = t_host(&code,
                       "NO_PROXY='*' no_proxy='*' sh %s/rootfs-fixtures.sh push %s "
                       "127.0.0.1:%d/%s %s 2>&1",
                       t_src_dir(), src, r->port, dst, all ? "--all" : "");
    cr_assert_eq(code, 0, "push %s: %s", src, out);
    free(out);
}

Test(rootfs_pull, pull_run_dedupe_multiplatform_and_bad_digest, .timeout = 240)
{
    t_busybox();
    lis_ctx *ctx = t_ctx();
    registry reg = {0};
    registry_start(&reg);
    const char *dd = lis_ctx_data_dir(ctx);
    char *oci = fixture("oci"), *multi = fixture("multi");
    char src[700], ref[200];
    snprintf(src, sizeof src, "%s:latest", oci);
    push(&reg, src, "lis/bb:v1", 0);
    snprintf(src, sizeof src, "%s:multi", multi);
    push(&reg, src, "lis/multi:1", 1);

    /* a 2-layer image with whiteouts, pulled and run */
    snprintf(ref, sizeof ref, "127.0.0.1:%d/lis/bb:v1", reg.port);
    lis_rootfs_result r;
    lis_error err = {0};
    cr_assert_eq(lis_rootfs_pull(dd, ref, NULL, &r, &err), 0, "pull %s: %s", ref, err.msg);
    cr_assert_str_eq(r.ref, ref);
    cr_assert_str_eq(r.format, "registry");
    check_layered(ctx, ref);
    lis_rootfs_result r2;
    cr_assert_eq(lis_rootfs_pull(dd, ref, NULL, &r2, &err), 0, "%s", err.msg);
    cr_assert_eq(r2.existed, 1);
    cr_assert_str_eq(r2.digest, r.digest);
    /* by digest */
    char bydg[300];
    snprintf(bydg, sizeof bydg, "127.0.0.1:%d/lis/bb@%s", reg.port, r.digest);
    lis_rootfs_opts on = {.name = "bydigest:1"};
    cr_assert_eq(lis_rootfs_pull(dd, bydg, &on, &r2, &err), 0, "%s", err.msg);
    cr_assert_eq(r2.existed, 1);

    /* a multi-platform index: the host's platform is picked */
    snprintf(ref, sizeof ref, "127.0.0.1:%d/lis/multi:1", reg.port);
    cr_assert_eq(lis_rootfs_pull(dd, ref, NULL, &r, &err), 0, "pull %s: %s", ref, err.msg);
    char *arch = run_on(ctx, ref, "cat /etc/arch");
    cr_assert_str_neq(arch, "s390x\n");
    free(arch);
    lis_rootfs_opts op = {.platform = "linux/s390x", .name = "multi:s390x"};
    cr_assert_eq(lis_rootfs_pull(dd, ref, &op, &r, &err), 0, "%s", err.msg);
    arch = run_on(ctx, "multi:s390x", "cat /etc/arch");
    cr_assert_str_eq(arch, "s390x\n");
    free(arch);
    op.platform = "linux/mips";
    cr_assert_eq(lis_rootfs_pull(dd, ref, &op, &r, &err), -1);
    cr_assert(strstr(err.msg, "s390x"), "%s", err.msg);

    /* missing image / tag */
    snprintf(ref, sizeof ref, "127.0.0.1:%d/lis/nope:1", reg.port);
    cr_assert_eq(lis_rootfs_pull(dd, ref, NULL, &r, &err), -1);
    cr_assert(strstr(err.msg, "not found"), "%s", err.msg);

    /* a blob whose content does not match its digest: refused, nothing stored */
    lis_ctx *ctx2 = t_ctx();
    const char *dd2 = lis_ctx_data_dir(ctx2);
    snprintf(src, sizeof src, "%s:latest", oci);
    push(&reg, src, "lis/corrupt:1", 0);
    int code = 0;
    char *o = t_host(&code,
                     "for f in $(find %s/data -path '*/blobs/sha256/*/data' -size +100k); do"
                     " printf XXXXXXXX | dd of=$f bs=1 seek=1000 conv=notrunc 2>&1 || exit 1;"
                     " done",
                     reg.root);
    cr_assert_eq(code, 0, "%s", o);
    free(o);
    snprintf(ref, sizeof ref, "127.0.0.1:%d/lis/corrupt:1", reg.port);
    cr_assert_eq(lis_rootfs_pull(dd2, ref, NULL, &r, &err), -1, "corrupt blob accepted");
    cr_assert(strstr(err.msg, "does not match its digest"), "%s", err.msg);
    cr_assert_eq(nblobs(ctx2), 0);
    cr_assert_eq(ntmp(ctx2), 0);
    cr_assert_eq(lis_store_resolve(dd2, ref, (char[512]){0}, 512, &err), -1);
    lis_ctx_free(ctx2);

    /* nothing listens: a clean error after retries */
    snprintf(ref, sizeof ref, "127.0.0.1:%d/lis/bb:v1", free_port());
    lis_rootfs_opts orr = {.retries = 2};
    cr_assert_eq(lis_rootfs_pull(dd, ref, &orr, &r, &err), -1);
    cr_assert(strstr(err.msg, "cannot reach"), "%s", err.msg);

    registry_stop(&reg);
    free(oci);
    free(multi);
    lis_ctx_free(ctx);
}

/* Anonymous bearer-token auth: the registry behind a front that challenges
 * every request and hands out a token per repository scope. */
Test(rootfs_pull, pull_with_anonymous_bearer_token, .timeout = 180)
{
    t_busybox();
    lis_ctx *ctx = t_ctx();
    registry reg = {0};
    registry_start(&reg);
    char *oci = fixture("oci");
    char src[700], ref[200], script[700];
    snprintf(src, sizeof src, "%s:latest", oci);
    push(&reg, src, "lis/private:1", 0);
    int pp[2];
    cr_assert_eq(pipe(pp), 0);
    snprintf(script, sizeof script, "%s/rootfs-authproxy.py", t_src_dir());
    pid_t front = fork();
    if (front == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char logp[700];
        snprintf(logp, sizeof logp, "%s/authproxy.log", t_tmpdir());
        int log = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(log, 2);
        dup2(pp[1], 1);
        close(pp[0]);
        char up[16];
        snprintf(up, sizeof up, "%d", reg.port);
        execlp("python3", "python3", script, up, (char *)NULL);
        _exit(127);
    }
    close(pp[1]);
    char buf[32] = "";
    size_t got = 0;
    while (got < sizeof buf - 1 && !strchr(buf, '\n')) {
        ssize_t n = read(pp[0], buf + got, sizeof buf - 1 - got);
        cr_assert(n > 0, "the auth front did not start");
        got += (size_t)n;
    }
    close(pp[0]);
    int port = atoi(buf);
    snprintf(ref, sizeof ref, "127.0.0.1:%d/lis/private:1", port);
    lis_rootfs_result r;
    lis_error err = {0};
    cr_assert_eq(lis_rootfs_pull(lis_ctx_data_dir(ctx), ref, NULL, &r, &err), 0, "pull %s: %s", ref,
                 err.msg);
    check_layered(ctx, ref);
    int code;
    char *stats = t_host(&code, "curl -sf --noproxy '*' http://127.0.0.1:%d/stats", port);
    cr_assert(strstr(stats, "\"tokens\": 1") || strstr(stats, "\"tokens\": 2"), "%s", stats);
    cr_assert(!strstr(stats, "\"forwarded\": 0"), "%s", stats);
    free(stats);
    kill(front, SIGKILL);
    waitpid(front, NULL, 0);
    registry_stop(&reg);
    free(oci);
    lis_ctx_free(ctx);
}
