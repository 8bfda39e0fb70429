/* testlib.c - helpers shared by the criterion suites. */
#include "testlib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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

void t_import_debian(const char *name)
{
    int code;
    char *out = t_host(&code, "tar -C %s -cf %s/img.tar . 2>&1", t_debian(), t_tmpdir());
    cr_assert_eq(code, 0, "tar: %s", out);
    free(out);
    out = t_lis(&code, "rootfs import %s/img.tar --name %s -q", t_tmpdir(), name);
    cr_assert_eq(code, 0, "import: %s", out);
    free(out);
}

void t_run_dir(const char *dir, char *out, size_t len)
{
    char *o = t_host(NULL, "ls -d %s/out/*/ 2>/dev/null | head -1 | tr -d '\\n'", dir);
    snprintf(out, len, "%s", o);
    free(o);
    size_t n = strlen(out);
    if (n && out[n - 1] == '/')
        out[n - 1] = 0;
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
    lis_exec_spec ex = {.shell = cmd,
                        .out = LIS_STDIO_CAPTURE,
                        .err = LIS_STDIO_CAPTURE,
                        .timeout = 60};
    lis_error err = {0};
    cr_assert_eq(lis_exec(sb, &ex, r, &err), 0, "exec '%s': %s", cmd, err.msg);
}

int t_web_start(const char *dir, int seconds)
{
    char *port =
        t_host(NULL,
               "cd %s && (setsid timeout %d python3 -c 'import http.server,os,socketserver\n"
               "h=http.server.SimpleHTTPRequestHandler\n"
               "s=socketserver.ThreadingTCPServer((\"127.0.0.1\",0),h)\n"
               "open(\"pid\",\"w\").write(str(os.getpid()))\n"
               "print(s.server_address[1],flush=True)\n"
               "s.serve_forever()' >port 2>/dev/null &) ; "
               "for i in $(seq 50); do [ -s port ] && break; sleep 0.1; done; cat port",
               dir, seconds);
    int p = atoi(port);
    free(port);
    cr_assert_gt(p, 0, "no web server in %s", dir);
    return p;
}

void t_web_stop(const char *dir)
{
    free(t_host(NULL, "kill $(cat %s/pid 2>/dev/null) 2>/dev/null", dir));
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
    lis_sandbox_spec spec = {.rootfs = rootfs,
                             .upper = LIS_UPPER_TMPFS,
                             .limits = lim,
                             .binds = &b,
                             .nbinds = 1};
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

void t_mkdtemp(char *dir, size_t len, const char *prefix)
{
    snprintf(dir, len, "/tmp/%s-XXXXXX", prefix);
    cr_assert_not_null(mkdtemp(dir), "mkdtemp %s: %s", dir, strerror(errno));
}

void t_rmtree(char *dir)
{
    if (!dir[0])
        return;
    int code;
    free(t_host(&code, "rm -rf '%s'", dir));
    dir[0] = 0;
}

const char *t_under(const char *dir, const char *name)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

void t_put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    cr_assert_eq(fclose(f), 0, "%s: %s", path, strerror(errno));
}

#define T_SLURP_MAX (64u << 20)

char *t_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    size_t len = 0, cap = 4096;
    char *s = malloc(cap);
    cr_assert_not_null(s);
    for (size_t n; (n = fread(s + len, 1, cap - len - 1, f)) > 0;) {
        len += n;
        if (cap - len - 1 > 0)
            continue;
        cr_assert_lt(cap, T_SLURP_MAX, "%s is over %u bytes", path, T_SLURP_MAX);
        cap *= 2;
        s = realloc(s, cap);
        cr_assert_not_null(s);
    }
    cr_assert(!ferror(f), "%s: %s", path, strerror(errno));
    fclose(f);
    s[len] = 0;
    return s;
}

cJSON *t_slurp_json(const char *path)
{
    char *s = t_slurp(path);
    cJSON *j = cJSON_Parse(s);
    cr_assert_not_null(j, "%s is not JSON: %.200s", path, s);
    free(s);
    return j;
}

int t_procs_in_ns(const char *ns)
{
    int code;
    char *out = t_host(&code,
                       "for p in /proc/[0-9]*; do [ \"$(readlink $p/ns/pid 2>/dev/null)\" = "
                       "'%s' ] && echo $p; done | wc -l",
                       ns);
    int n = atoi(out);
    free(out);
    return n;
}

/* ---- the scripted LLM server (tests/fake_llm.py) ---------------------- */

void t_fake_stop(t_fake *f)
{
    if (f->pid > 0) {
        kill(f->pid, SIGKILL);
        waitpid(f->pid, NULL, 0);
        close(f->out_fd);
        f->pid = 0;
    }
}

void t_fake_start(t_fake *f, const char *script)
{
    memset(f, 0, sizeof *f);
    const char *base = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/lis-fake-XXXXXX", base ? base : "/tmp");
    cr_assert(mkdtemp(f->dir));
    snprintf(f->script, sizeof f->script, "%s/script.json", f->dir);
    snprintf(f->log, sizeof f->log, "%s/requests.jsonl", f->dir);
    FILE *s = fopen(f->script, "w");
    cr_assert(s);
    fputs(script, s);
    fclose(s);
    char py[512];
    snprintf(py, sizeof py, "%s/fake_llm.py", t_src_dir());
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    f->pid = fork();
    cr_assert_geq(f->pid, 0);
    if (f->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        /* the system python first: a pyenv shim would fork behind our back */
        if (access("/usr/bin/python3", X_OK) == 0)
            execl("/usr/bin/python3", "python3", py, f->script, f->log, (char *)NULL);
        execlp("python3", "python3", py, f->script, f->log, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[32] = "";
    size_t n = 0;
    while (n < sizeof buf - 1 && !strchr(buf, '\n')) {
        ssize_t r = read(fd[0], buf + n, sizeof buf - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        buf[n] = 0;
    }
    f->out_fd = fd[0]; /* kept open: the server must never see a broken pipe */
    cr_assert_gt(n, 0, "the fake server did not start");
    f->port = atoi(buf);
    cr_assert_gt(f->port, 0);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d/v1", f->port);
}

/* The n-th logged request body (0-based); NULL when absent. */
cJSON *t_fake_request(const t_fake *f, int n)
{
    FILE *l = fopen(f->log, "r");
    if (!l)
        return NULL;
    char *line = NULL;
    size_t cap = 0;
    cJSON *j = NULL;
    for (int i = 0; getline(&line, &cap, l) > 0; i++)
        if (i == n) {
            j = cJSON_Parse(line);
            break;
        }
    free(line);
    fclose(l);
    return j;
}

int t_fake_count(const t_fake *f)
{
    FILE *l = fopen(f->log, "r");
    int n = 0, c;
    if (!l)
        return 0;
    while ((c = fgetc(l)) != EOF)
        n += c == '\n';
    fclose(l);
    return n;
}

cJSON *t_results_rows(const char *rdir)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/results.jsonl", rdir);
    FILE *f = fopen(p, "r");
    cJSON *a = cJSON_CreateArray();
    if (!f)
        return a;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        cr_assert(j, "a torn row in results.jsonl: %s", line);
        cJSON_AddItemToArray(a, j);
    }
    free(line);
    fclose(f);
    return a;
}

void t_two_users(char *owner, char *other, char *dir, const char *tag)
{
    cr_assert_eq(getuid(), 0, "run as root");
    const char *u = getenv("LIS_TEST_USER");
    if (!u || !getpwnam(u))
        cr_skip_test("LIS_TEST_USER is not set (scripts/test.sh sets it)");
    snprintf(owner, 64, "%s", u);
    snprintf(other, 80, "%s-b", u);
    if (!getpwnam(other))
        cr_skip_test("no second test user %s", other);
    if (!t_busybox())
        cr_skip_test("no busybox fixture");
    snprintf(dir, 256, "/tmp/lis-%s-XXXXXX", tag);
    cr_assert(mkdtemp(dir));
    int code;
    free(t_host(&code,
                "chmod 755 %s && mkdir -p %s/%s %s/%s && chown %s: %s/%s && chown %s: %s/%s && "
                "chmod 700 %s/%s %s/%s && tar -C %s -cf %s/%s/bb.tar . && chown %s: %s/%s/bb.tar",
                dir, dir, owner, dir, other, owner, dir, owner, other, dir, other, dir, owner, dir,
                other, t_busybox(), dir, owner, owner, dir, owner));
    cr_assert_eq(code, 0, "setting up %s", dir);
}

void t_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

char *t_fresh_dir(const char *prefix, const char *name)
{
    static char d[512];
    snprintf(d, sizeof d, "%s/%s-%s-%ld", t_tmpdir(), prefix, name, (long)getpid());
    free(t_host(NULL, "rm -rf %s && mkdir -p %s/out", d, d));
    return d;
}

pid_t t_spawn_sh(const char *cmd)
{
    pid_t p = fork();
    cr_assert_geq(p, 0);
    if (p == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return p;
}

int t_silent_endpoint(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 64) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &l) == 0);
    *port = ntohs(a.sin_port);
    return fd;
}
