/* test_bounds.c - the data paths out of and into a sandbox stay bounded (issue 22):
 * exports of sparse files (a 1 TB hole, 8 x 1 GB) through `lis run` and `lis batch
 * --save-files` stay sparse and stop at their cap, listing what they left out; the
 * writable tmpfs counts as memory under the fallback limits; a disk upper layer is held
 * near its budget; `lis batch` refuses a run the host's memory cannot hold.
 *
 * The exports go into LIS_TEST_SMALLFS, a 256 MiB tmpfs scripts/test.sh mounts as root
 * (the tests are skipped without it): a regression that wrote the holes would fill that
 * tmpfs and fail here, never the machine's disk. */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* What a writable layer on a tmpfs of the budget may hold past it: nothing
 * (size= is the kernel's bound), but du counts whole blocks */
#define DISK_SLACK (1ull << 20)

static void setup(void) { lis_ctx_free(t_ctx()); }
TestSuite(bounds, .init = setup);

/* A fresh directory on the size-limited tmpfs. */
static const char *small_dir(const char *name)
{
    const char *fs = getenv("LIS_TEST_SMALLFS");
    if (!fs || !*fs)
        cr_skip_test("needs LIS_TEST_SMALLFS, the size-limited tmpfs scripts/test.sh mounts as "
                     "root");
    static char d[512];
    snprintf(d, sizeof d, "%s/%s-%ld", fs, name, (long)getpid());
    free(t_host(NULL, "rm -rf %s && mkdir -p %s", d, d));
    return d;
}

static uint64_t fs_used(const char *path)
{
    struct statvfs v;
    cr_assert_eq(statvfs(path, &v), 0);
    return (uint64_t)(v.f_blocks - v.f_bfree) * v.f_frsize;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char b[8192];
    size_t n;
    while ((n = fread(b, 1, sizeof b, f)) > 0)
        fwrite(b, 1, n, m);
    fclose(f);
    fclose(m);
    return buf;
}

/* The shell command of an episode: a 1 TB hole, 8 x 1 GB holes, 3 MiB of real
 * data, and the answer. */
#define SPARSE_CMD                                                                                 \
    "cd /testbed/output && truncate -s 1099511627776 big && "                                      \
    "for i in 1 2 3 4 5 6 7 8; do truncate -s 1G sp$i; done && "                                   \
    "head -c 3145728 /dev/urandom > data && echo 42 > answer.txt && ls -ls"

#define ONE_EPISODE                                                                                \
    "{\"replies\":[{\"calls\":[[\"execute_bash\",{\"command\":\"" SPARSE_CMD "\"}]]},"             \
    "{\"calls\":[[\"submit\",{}]]}]}"

/* Every file the episode left, checked in the export at files/: the holes
 * exported as holes (apparent size kept, next to no blocks). data_kept: the
 * 3 MiB file is there (else it must not be). */
static void check_export(const char *files, int data_kept)
{
    const struct {
        const char *name;
        off_t size;
    } want[] = {{"big", 1ll << 40}, {"sp1", 1 << 30}, {"sp2", 1 << 30}, {"sp3", 1 << 30},
                {"sp4", 1 << 30},   {"sp5", 1 << 30}, {"sp6", 1 << 30}, {"sp7", 1 << 30},
                {"sp8", 1 << 30},   {"answer.txt", 3}};
    uint64_t blocks = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char p[1024];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", files, want[i].name);
        cr_assert_eq(stat(p, &st), 0, "%s was not exported", p);
        cr_assert_eq(st.st_size, want[i].size, "%s: %lld bytes", p, (long long)st.st_size);
        blocks += (uint64_t)st.st_blocks * 512;
    }
    cr_assert_lt(blocks, 1u << 20, "the holes took %llu bytes on the host",
                 (unsigned long long)blocks);
    char p[1024];
    struct stat st;
    snprintf(p, sizeof p, "%s/data", files);
    if (data_kept)
        cr_assert(stat(p, &st) == 0 && st.st_size == 3145728, "data missing");
    else
        cr_assert_neq(stat(p, &st), 0, "data was exported past the cap");
}

/* metadata.export_skipped of a trajectory lists path (and nothing else). */
static void check_skipped(const char *traj_path, const char *path)
{
    char *text = slurp(traj_path);
    cr_assert(text, "%s", traj_path);
    cJSON *t = cJSON_Parse(text);
    free(text);
    cJSON *sk = cJSON_GetObjectItem(cJSON_GetObjectItem(t, "metadata"), "export_skipped");
    cr_assert(cJSON_IsArray(sk) && cJSON_GetArraySize(sk) == 1, "export_skipped: %s",
              sk ? cJSON_PrintUnformatted(sk) : "none");
    cJSON *e = cJSON_GetArrayItem(sk, 0);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e, "path")), path);
    cr_assert(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(e, "reason")), "cap"));
    cJSON_Delete(t);
}

#define LIS_RUN                                                                                    \
    "run --llm-name fake --llm-base-url %s --api-key k --rootfs %s --net none --query x "

/* lis run: a 1 TB hole and 8 x 1 GB holes come out as holes (--disk 2T lets the
 * sandbox make the 1 TB file at all: a disk upper layer's files are held to the
 * budget); the default cap (the budget) keeps the 3 MiB of data. */
Test(bounds, run_exports_holes_as_holes, .timeout = 120)
{
    const char *d = small_dir("run-sparse");
    uint64_t before = fs_used(d);
    t_fake f;
    t_fake_start(&f, ONE_EPISODE);
    int code;
    char *out = t_lis(&code, LIS_RUN "--disk 2T --output-dir %s", f.url, t_busybox(), d);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    char *files = t_host(NULL, "ls -d %s/*/files | head -1 | tr -d '\\n'", d);
    check_export(files, 1);
    uint64_t used = fs_used(d) - before;
    printf("lis run: 1 TB + 8 x 1 GB of holes + 3 MiB exported in %.1f MiB of the host\n",
           (double)used / (1 << 20));
    cr_assert_lt(used, 16u << 20);
    free(files);
    t_fake_stop(&f);
}

/* lis run --export-max 1M: the 3 MiB file is left out whole, the holes (no data)
 * and the answer are exported; the log and trajectory.json say what was left out. */
Test(bounds, run_export_stops_at_its_cap, .timeout = 120)
{
    const char *d = small_dir("run-cap");
    t_fake f;
    t_fake_start(&f, ONE_EPISODE);
    int code;
    char *out =
        t_lis(&code, LIS_RUN "--disk 2T --export-max 1M --output-dir %s", f.url, t_busybox(), d);
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "not exported: /testbed/output/data: 3145728 bytes of data would pass "
                          "the copy's cap of 1048576 bytes"),
              "%s", out);
    cr_assert(strstr(out, "1 files of /testbed/output (3145728 bytes of data) were left out"), "%s",
              out);
    free(out);
    char *run = t_host(NULL, "ls -d %s/*/ | head -1 | tr -d '\\n'", d);
    char p[1024];
    snprintf(p, sizeof p, "%sfiles", run);
    check_export(p, 0);
    snprintf(p, sizeof p, "%strajectory.json", run);
    check_skipped(p, "/testbed/output/data");
    free(run);
    t_fake_stop(&f);
}

#define LIS_BATCH "batch --llm-name fake --llm-base-url %s --api-key k --rootfs %s --net none "

/* lis batch --save-files: the same episode in a tmpfs upper layer (holes of any
 * size cost nothing there); exported sparse, capped by --export-max, what was
 * left out in the episode's log and trajectory. */
Test(bounds, batch_save_files_keeps_holes_and_its_cap, .timeout = 180)
{
    const char *d = small_dir("batch");
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.json", t_tmpdir());
    FILE *tf = fopen(tasks, "w");
    cr_assert(tf);
    fputs("[{\"id\": \"r1\", \"problem_statement\": \"go\", \"ground_truth\": \"42\"}]", tf);
    fclose(tf);
    t_fake f;
    t_fake_start(&f, ONE_EPISODE);
    int code;
    char *out = t_lis(&code,
                      LIS_BATCH "--tasks %s --scorer builtin:match --save-files --export-max 1M "
                                "--concurrency 1 --quiet --output-dir %s",
                      f.url, t_busybox(), tasks, d);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    char *run = t_host(NULL, "ls -d %s/*/ | head -1 | tr -d '\\n'", d);
    char p[1024];
    snprintf(p, sizeof p, "%sfiles/r1", run);
    check_export(p, 0);
    snprintf(p, sizeof p, "%strajectories/r1.json", run);
    check_skipped(p, "/testbed/output/data");
    snprintf(p, sizeof p, "%slogs/r1.txt", run);
    char *log = slurp(p);
    cr_assert(log && strstr(log, "not exported: /testbed/output/data: 3145728 bytes of data"), "%s",
              log ? log : p);
    free(log);
    free(run);
    t_fake_stop(&f);
}

/* concurrency x (memory + disk) past the host's memory: refused with the
 * numbers and the fix; --overcommit runs it. */
Test(bounds, batch_refuses_what_the_host_memory_cannot_hold, .timeout = 120)
{
    char tasks[600], d[600];
    snprintf(tasks, sizeof tasks, "%s/tasks.json", t_tmpdir());
    snprintf(d, sizeof d, "%s/out", t_tmpdir());
    FILE *tf = fopen(tasks, "w");
    cr_assert(tf);
    fputs("[{\"id\": \"a\", \"problem_statement\": \"go\", \"ground_truth\": \"1\"},"
          "{\"id\": \"b\", \"problem_statement\": \"go\", \"ground_truth\": \"1\"}]",
          tf);
    fclose(tf);
    t_fake f;
    t_fake_start(&f, "{\"rows\":{},\"default\":[{\"calls\":[[\"submit\",{}]]}]}");
    int code;
    char *out = t_lis(&code,
                      LIS_BATCH "--tasks %s --scorer builtin:match --concurrency 2 --warm 0 "
                                "--memory 64T --quiet --output-dir %s",
                      f.url, t_busybox(), tasks, d);
    cr_assert_neq(code, 0, "%s", out);
    cr_assert(strstr(out, "--concurrency 2 x (--memory 65536.00 GiB + --disk 1.00 GiB)"), "%s",
              out);
    cr_assert(strstr(out, "more than this host's available memory") && strstr(out, "--overcommit"),
              "%s", out);
    free(out);
    /* refused before any directory: no run directory left to be mistaken for a run */
    cr_assert_neq(access(d, F_OK), 0, "a refused run left %s", d);
    out = t_lis(&code,
                LIS_BATCH "--tasks %s --scorer builtin:match --concurrency 2 --warm 0 "
                          "--memory 64T --overcommit --quiet --output-dir %s",
                f.url, t_busybox(), tasks, d);
    cr_assert_eq(code, 0, "--overcommit: %s", out);
    free(out);
    t_fake_stop(&f);
}

/* --memory 100M --disk 3G: /dev/shm is the writable tmpfs, RAM; it counts toward
 * the memory limit (a cgroup charges it to memory.max; the fallback limits cap the
 * tmpfs at the memory limit and count it in PID 1's watch), so filling it stops near
 * 100 MiB, not at 2.5 GB. Measured from the owner's side (lis_sandbox_stats): inside,
 * a full budget leaves no room for another process. */
Test(bounds, dev_shm_counts_toward_memory, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox_spec spec = {.rootfs = t_busybox(),
                             .upper = LIS_UPPER_TMPFS,
                             .limits = {.memory_bytes = 100ull << 20, .disk_bytes = 3ull << 30}};
    lis_sandbox *sb;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "%s", err.msg);
    lis_result r;
    t_sh(sb, "dd if=/dev/zero of=/dev/shm/fill bs=1M count=2500", &r);
    lis_stats st;
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0, "%s", err.msg);
    printf("/dev/shm under --memory 100M --disk 3G (%s limits): dd exit %d, %.1f MiB kept\n",
           st.limits, r.exit_code, (double)st.disk_bytes / (1 << 20));
    cr_assert_neq(r.exit_code, 0, "2500 MiB fitted in /dev/shm");
    cr_assert_leq(st.disk_bytes, (100ull << 20) + (4ull << 20), "%llu bytes in the tmpfs",
                  (unsigned long long)st.disk_bytes);
    lis_result_free(&r);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

/* A disk upper layer (lis serve's containers', lis run's, lis sandbox create's) is
 * held near its budget: PID 1 measures it and, past it, no process can grow a
 * file; deleting brings a new command its writes back. An ephemeral sandbox: it
 * dies with the test whatever the test asserts. */
Test(bounds, disk_upper_layer_total_is_bounded, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox_spec spec = {.rootfs = t_busybox(),
                             .upper = LIS_UPPER_DISK,
                             .limits = {.disk_bytes = 64ull << 20}};
    lis_sandbox *sb;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "%s", err.msg);
    /* 4 x 40 MiB in 4 files, each under the per-file limit: 160 MiB asked */
    lis_result r;
    t_sh(sb,
         "for i in 1 2 3 4; do dd if=/dev/zero of=/f$i bs=1M count=40 2>/dev/null; "
         "echo dd$i=$?; sleep 0.5; done",
         &r);
    cr_assert(strstr(r.out.data, "dd4=153") || strstr(r.out.data, "dd4=1"),
              "the 4th file was written: %s", r.out.data);
    lis_result_free(&r);
    lis_stats st;
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0, "%s", err.msg);
    printf("disk upper layer, --disk 64M, 4 x 40 MiB written at full speed: %.1f MiB kept\n",
           (double)st.disk_bytes / (1 << 20));
    cr_assert_leq(st.disk_bytes, 2 * (64ull << 20), "the stated margin: docs/runtime.md");
    /* deleting frees it: a command started afterwards writes again */
    t_sh(sb, "rm -f /f1 /f2 /f3 /f4", &r);
    lis_result_free(&r);
    usleep(1500000);
    t_sh(sb, "dd if=/dev/zero of=/g bs=1M count=8 2>&1 | tail -1", &r);
    cr_assert(strstr(r.out.data, "8+0 records out"), "%s", r.out.data);
    lis_result_free(&r);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

/* Issue 29: parallel writers in a `lis serve --disk` container (6 x dd wrote
 * 2.0 GB with a 1 GB budget): its writable layer is a tmpfs of the budget, so
 * the kernel refuses what passes it, however many write at once. The server's
 * data (images, layers) is on the size-limited tmpfs, so a regression fills
 * that, not the machine's disk. Through the docker CLI. */
Test(bounds, serve_disk_budget_holds_against_parallel_writers, .timeout = 300)
{
    int code;
    free(t_host(&code, "command -v docker >/dev/null 2>&1"));
    if (code != 0)
        cr_skip_test("the docker CLI (docker.io) is not installed (scripts/deps.sh)");
    const char *dir = small_dir("serve-disk");
    char env[2048];
    snprintf(env, sizeof env, "XDG_DATA_HOME=%s/data XDG_RUNTIME_DIR=%s/run DOCKER_CONFIG=%s", dir,
             t_tmpdir(), t_tmpdir());
    char *out = t_host(&code,
                       "mkdir -p %s/run && tar -C %s -cf %s/bb.tar . && %s %s rootfs import "
                       "%s/bb.tar --name bb:1 -q 2>&1 && rm -f %s/bb.tar",
                       t_tmpdir(), t_busybox(), dir, env, t_lis_bin(), dir, dir);
    cr_assert_eq(code, 0, "import: %s", out);
    free(out);
    out = t_host(&code,
                 "%s setsid %s serve --socket %s/d.sock --disk 48M >%s/serve.log 2>&1 "
                 "</dev/null & echo $! >%s/serve.pid; "
                 "for i in $(seq 200); do [ -S %s/d.sock ] && break; sleep 0.05; done; "
                 "DOCKER_HOST=unix://%s/d.sock %s docker run --rm bb:1 sh -c "
                 "'for i in 1 2 3 4 5 6; do dd if=/dev/zero of=/f$i bs=64k count=480 "
                 "2>/dev/null & done; wait; du -sk /f1 /f2 /f3 /f4 /f5 /f6 | "
                 "awk \"{s+=\\$1} END {print \\\"total\\\", s}\"' 2>&1; "
                 "kill $(cat %s/serve.pid)",
                 env, t_lis_bin(), dir, dir, dir, dir, dir, env, dir);
    long kib = -1;
    char *t = strstr(out, "total ");
    if (t)
        kib = atol(t + 6);
    printf("lis serve --disk 48M, 6 parallel writers x 30 MiB in one container: %.1f MiB "
           "written\n",
           kib / 1024.0);
    cr_assert(kib > 0, "no total: %s", out);
    cr_assert_leq((uint64_t)kib << 10, (48ull << 20) + DISK_SLACK,
                  "%.1f MiB written past a 48 MiB budget: %s", kib / 1024.0, out);
    free(out);
}

struct reports {
    int n;
    char last_path[256], last_why[512];
};

static void note(void *arg, const char *path, const char *why)
{
    struct reports *r = arg;
    r->n++;
    snprintf(r->last_path, sizeof r->last_path, "%s", path);
    snprintf(r->last_why, sizeof r->last_why, "%s", why);
}

static int count_entry(void *arg, const lis_walk_entry *e, lis_error *err)
{
    (*(int *)arg)++;
    return 0;
}

/* The cap of a copy out (lis sandbox cp, docker cp's GET): whole files left out
 * past it, the holes free; the first 100 left out reported one by one, the rest
 * in one closing report, so the report is bounded too. The same for lis_walk. */
Test(bounds, copy_out_cap_reports_100_then_one_line, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = t_sandbox(ctx, t_busybox());
    lis_result r;
    t_sh(sb,
         "mkdir /o && i=0; while [ $i -lt 300 ]; do head -c 8192 /dev/urandom > /o/f$i; "
         "i=$((i+1)); done; truncate -s 1073741824 /o/hole",
         &r);
    cr_assert_eq(r.exit_code, 0, "%s", r.err.data);
    lis_result_free(&r);
    char dst[600];
    snprintf(dst, sizeof dst, "%s/copy", t_tmpdir());
    struct reports rep = {0};
    lis_copy_opts o = {.max_bytes = 1 << 20, .skipped = note, .arg = &rep};
    lis_error err = {0};
    cr_assert_eq(lis_copy_out_opts(sb, "/o", dst, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(o.bytes, 128 * 8192);
    cr_assert_eq(o.skipped_count, 172);
    cr_assert_eq(o.skipped_bytes, 172 * 8192);
    cr_assert_eq(rep.n, 101, "%d reports", rep.n);
    cr_assert_str_eq(rep.last_path, ".");
    cr_assert(strstr(rep.last_why, "72 more entries"), "%s", rep.last_why);
    char p[700];
    struct stat st;
    snprintf(p, sizeof p, "%s/hole", dst);
    cr_assert(stat(p, &st) == 0 && st.st_size == 1 << 30 && st.st_blocks < 16, "the hole");
    /* lis_walk: the same bounds, the same reports */
    int entries = 0;
    struct reports rep2 = {0};
    lis_copy_opts o2 = {.max_bytes = 1 << 20, .skipped = note, .arg = &rep2};
    cr_assert_eq(lis_walk(sb, "/o", &o2, count_entry, &entries, &err), 0, "%s", err.msg);
    cr_assert_eq(entries, 1 + 128 + 1, "%d entries handed out", entries); /* /o, files, hole */
    cr_assert_eq(o2.skipped_count, 172);
    cr_assert_eq(rep2.n, 101);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}
