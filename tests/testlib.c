/* testlib.c - helpers shared by the criterion suites. */
#include "testlib.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];

/* LeakSanitizer (make test-asan) reads this hook at start-up: criterion's
 * runner keeps an allocation of its own until exit. Only in the runner: a
 * test worker (started with BXFI_MAP set) has criterion frames under every
 * allocation, so there the same suppression would hide lis's own leaks. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return getenv("BXFI_MAP") ? "" : "leak:libcriterion.so\n";
}

const char *t_busybox(void)
{
    const char *p = getenv("LIS_TEST_BUSYBOX");
    if (!p || access(p, F_OK) != 0)
        cr_skip_test("LIS_TEST_BUSYBOX not set (run through `make test`)");
    return p;
}

const char *t_debian(void)
{
    const char *p = getenv("LIS_TEST_DEBIAN");
    if (!p || access(p, F_OK) != 0)
        cr_skip_test("LIS_TEST_DEBIAN not set (the Debian minbase fixture needs root once)");
    return p;
}

const char *t_lis_bin(void)
{
    const char *p = getenv("LIS_BIN");
    if (!p || access(p, X_OK) != 0)
        cr_skip_test("LIS_BIN not set (run through `make test`)");
    return p;
}

const char *t_src_dir(void)
{
    const char *p = getenv("LIS_TEST_SRC");
    return p ? p : "tests";
}

const char *t_tmpdir(void) { return tmpdir; }

static void quiet_warn(void *arg, const char *line)
{
    (void)arg;
    (void)line;
}

lis_ctx *t_ctx(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/lis-t-XXXXXX", base ? base : "/tmp");
    cr_assert(mkdtemp(tmpdir), "mkdtemp");
    chmod(tmpdir, 0700);
    char run[300], data[300];
    snprintf(run, sizeof run, "%s/run", tmpdir);
    snprintf(data, sizeof data, "%s/data", tmpdir);
    /* the hosts these suites run on have no rootless cgroups: keep the
     * per-sandbox "no limits" warning out of the test logs */
    lis_ctx_opts o = {.run_dir = run, .data_dir = data, .warn = quiet_warn};
    lis_error err = {0};
    lis_ctx *ctx = lis_ctx_new(&o, &err);
    cr_assert(ctx, "lis_ctx_new: %s", err.msg);
    return ctx;
}

lis_sandbox *t_sandbox(lis_ctx *ctx, const char *rootfs)
{
    lis_sandbox_spec spec = {.rootfs = rootfs, .upper = LIS_UPPER_TMPFS};
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "create: %s", err.msg);
    return sb;
}

void t_sh(lis_sandbox *sb, const char *cmd, lis_result *r)
{
    lis_exec_spec ex = {.shell = cmd, .out = LIS_STDIO_CAPTURE, .err = LIS_STDIO_CAPTURE,
                        .timeout = 60};
    lis_error err = {0};
    cr_assert_eq(lis_exec(sb, &ex, r, &err), 0, "exec '%s': %s", cmd, err.msg);
}

char *t_host(int *code, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *f = popen(cmd, "r");
    cr_assert(f, "popen %s", cmd);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    int st = pclose(f);
    if (code)
        *code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return buf;
}

char *t_lis(int *code, const char *fmt, ...)
{
    char args[6144];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return t_host(code, "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data %s %s 2>&1", t_tmpdir(),
                  t_tmpdir(), t_lis_bin(), args);
}

const char *t_build_file(const char *rel)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s", t_lis_bin());
    char *s = strrchr(path, '/');
    snprintf(s ? s + 1 : path, sizeof path - (size_t)(s ? s + 1 - path : 0), "%s", rel);
    cr_assert_eq(access(path, F_OK), 0, "%s missing (make tests)", path);
    return path;
}

lis_sandbox *t_probe_sandbox(lis_ctx *ctx, const char *rootfs, lis_limits lim)
{
    lis_bind b = {.host_path = t_build_file("tests/sysprobe"), .path = "/probe", .read_only = 1};
    lis_sandbox_spec spec = {.rootfs = rootfs, .upper = LIS_UPPER_TMPFS, .limits = lim,
                             .binds = &b, .nbinds = 1};
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "create: %s", err.msg);
    return sb;
}

long t_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

int t_procs_in_ns(const char *ns)
{
    int code;
    char *out = t_host(&code, "for p in /proc/[0-9]*; do [ \"$(readlink $p/ns/pid 2>/dev/null)\" = "
                              "'%s' ] && echo $p; done | wc -l", ns);
    int n = atoi(out);
    free(out);
    return n;
}
