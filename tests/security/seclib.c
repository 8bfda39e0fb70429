/* seclib.c - helpers of the escape suites. */
#include "seclib.h"
#include "lis_net.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* These suites live one directory below the others (build/tests/security),
 * where the runtime's search for lis-init next to the executable fails:
 * point it at the lis-init next to the lis binary. */
__attribute__((constructor)) static void find_init(void)
{
    const char *bin = getenv("LIS_BIN");
    if (getenv("LIS_INIT") || !bin)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s", bin);
    char *s = strrchr(path, '/');
    if (!s)
        return;
    snprintf(s + 1, sizeof path - (size_t)(s + 1 - path), "lis-init");
    setenv("LIS_INIT", path, 0);
}

const char *sec_probe(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s", t_build_file("tests/security/escape_probe"));
    return path;
}

const char *sec_init_bin(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s", t_build_file("lis-init"));
    return path;
}

/* Every ephemeral sandbox of the escape suites runs with the monitor on (the
 * seccomp notification answered by this process, docs/monitoring.md): the
 * notification path must not open a way out. One hub per test process. */
#define SEC_MONITORS 64
static lis_monitor_hub *sec_hub;
static struct {
    lis_sandbox *sb;
    lis_monitor *m;
} sec_mon[SEC_MONITORS];

static void sec_monitor(lis_sandbox *sb)
{
    lis_error err = {0};
    if (!sec_hub)
        sec_hub = lis_monitor_hub_new(&err);
    cr_assert(sec_hub, "monitor hub: %s", err.msg);
    for (int i = 0; i < SEC_MONITORS; i++)
        if (!sec_mon[i].sb) {
            cr_assert_eq(lis_monitor_attach(sec_hub, sb, NULL, &sec_mon[i].m, &err), 0,
                         "monitor: %s", err.msg);
            sec_mon[i].sb = sb;
            return;
        }
    cr_assert_fail("more than %d monitored sandboxes in one test", SEC_MONITORS);
}

int sec_try_sandbox(lis_ctx *ctx, const sec_opts *o, lis_sandbox **sb, lis_error *err)
{
    static const sec_opts none;
    if (!o)
        o = &none;
    lis_bind binds[16] = {{.host_path = sec_probe(), .path = "/probe", .read_only = 1}};
    cr_assert(o->nbinds < 15);
    for (size_t i = 0; i < o->nbinds; i++)
        binds[i + 1] = o->binds[i];
    lis_sandbox_spec spec = {.rootfs = o->rootfs ? o->rootfs : t_busybox(),
                             .name = o->name,
                             .upper = o->persist ? LIS_UPPER_DISK : LIS_UPPER_TMPFS,
                             .binds = binds,
                             .nbinds = o->nbinds + 1,
                             .net = o->net,
                             .persist = o->persist,
                             .limits = o->limits,
                             .monitor = o->persist ? 0 : lis_monitor_spec_flags(o->net)};
    if (lis_net_sandbox_create(ctx, &spec, NULL, sb, err) < 0) /* net/ for --net proxy */
        return -1;
    if (!o->persist)
        sec_monitor(*sb);
    return 0;
}

lis_sandbox *sec_sandbox(lis_ctx *ctx, const sec_opts *o)
{
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    cr_assert_eq(sec_try_sandbox(ctx, o, &sb, &err), 0, "create: %s", err.msg);
    return sb;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int sec_run(lis_sandbox *sb, const lis_exec_spec *ex, lis_result *r, double max_wait)
{
    lis_proc *p;
    lis_error err = {0};
    cr_assert_eq(lis_exec_start(sb, ex, &p, &err), 0, "exec: %s", err.msg);
    double end = now() + max_wait;
    for (;;) {
        int rc = lis_proc_step(p, &err);
        if (rc < 0) {
            cr_log_warn("exec: %s", err.msg);
            memset(r, 0, sizeof *r);
            if (lis_proc_wait(p, r, &err) == 0)
                lis_result_free(r);
            memset(r, 0, sizeof *r);
            return -1;
        }
        if (rc == 1)
            break;
        if (now() > end)
            return 0; /* the handle is leaked with the sandbox on purpose */
        struct pollfd pf = {.fd = lis_proc_fd(p), .events = POLLIN};
        poll(&pf, 1, 200);
    }
    cr_assert_eq(lis_proc_wait(p, r, &err), 0, "wait: %s", err.msg);
    return 1;
}

char *sec_sh(lis_sandbox *sb, const char *cmd, int *code)
{
    char *full = malloc(strlen(cmd) + 32);
    sprintf(full, "exec 2>&1; %s", cmd);
    lis_exec_spec ex = {.shell = full,
                        .out = LIS_STDIO_CAPTURE,
                        .err = LIS_STDIO_CAPTURE,
                        .timeout = 60};
    lis_result r;
    cr_assert_eq(sec_run(sb, &ex, &r, 90), 1, "'%s' ran past its timeout or failed", cmd);
    free(full);
    if (code)
        *code = r.exit_code;
    free(r.err.data);
    return r.out.data;
}

int sec_alive(lis_sandbox *sb)
{
    lis_exec_spec ex = {.shell = "echo alive", .out = LIS_STDIO_CAPTURE, .timeout = 20};
    lis_result r;
    if (sec_run(sb, &ex, &r, 30) != 1)
        return 0;
    int ok = r.out.data && strcmp(r.out.data, "alive\n") == 0;
    lis_result_free(&r);
    return ok;
}

void sec_destroy(lis_sandbox *sb)
{
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "destroy: %s", err.msg);
    for (int i = 0; i < SEC_MONITORS; i++)
        if (sec_mon[i].sb == sb) {
            lis_monitor_free(sec_mon[i].m);
            sec_mon[i].sb = NULL;
        }
}

int sec_won(const char *out)
{
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, "ok", 2) && (p[2] == '\n' || p[2] == 0))
            return 1;
    return 0;
}

char *sec_dir(const char *name)
{
    char *p = malloc(strlen(t_tmpdir()) + strlen(name) + 2);
    sprintf(p, "%s/%s", t_tmpdir(), name);
    cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s", p);
    return p;
}

void sec_write(const char *path, const char *content)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "fopen %s", path);
    fputs(content, f);
    fclose(f);
}

char *sec_digest(const char *path)
{
    int code;
    return t_host(&code,
                  "cd '%s' 2>/dev/null && { find . -printf '%%p %%y %%s %%m %%T@ %%l\\n' | "
                  "sort; find . -type f -exec sha256sum {} + | sort; } || "
                  "{ ls -ld --time-style=full-iso '%s' 2>&1; sha256sum '%s' 2>&1; }",
                  path, path, path);
}

char *sec_read(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 1 << 16);
    if (f) {
        size_t n = fread(buf, 1, (1 << 16) - 1, f);
        buf[n] = 0;
        fclose(f);
    }
    return buf;
}

char *sec_status(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    size_t k = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && line[k] == ':') {
            fclose(f);
            char *v = line + k + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = 0;
            return strdup(v);
        }
    if (f)
        fclose(f);
    return strdup("");
}

void sec_term_start(sec_term *t, const char *const *args)
{
    memset(t, 0, sizeof *t);
    struct winsize ws = {.ws_row = 24, .ws_col = 80};
    cr_assert_eq(openpty(&t->master, &t->slave, NULL, NULL, &ws), 0);
    t->pid = fork();
    cr_assert(t->pid >= 0);
    if (t->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(t->master);
        setsid();
        ioctl(t->slave, TIOCSCTTY, 0);
        dup2(t->slave, 0);
        dup2(t->slave, 1);
        dup2(t->slave, 2);
        if (t->slave > 2)
            close(t->slave);
        char run[600], data[600];
        snprintf(run, sizeof run, "XDG_RUNTIME_DIR=%s/run", t_tmpdir());
        snprintf(data, sizeof data, "XDG_DATA_HOME=%s/data", t_tmpdir());
        putenv(run);
        putenv(data);
        const char *argv[32] = {t_lis_bin()};
        for (int i = 0; args[i] && i < 30; i++)
            argv[i + 1] = args[i];
        execv(argv[0], (char **)argv);
        _exit(127);
    }
}

int sec_term_wait(sec_term *t, double max_wait)
{
    double end = now() + max_wait;
    int st, code = -1;
    for (;;) {
        struct pollfd p = {.fd = t->master, .events = POLLIN};
        if (poll(&p, 1, 100) > 0 && t->len < sizeof t->out - 1) {
            ssize_t n = read(t->master, t->out + t->len, sizeof t->out - 1 - t->len);
            if (n > 0)
                t->len += (size_t)n;
        }
        t->out[t->len] = 0;
        if (t->pid > 0 && waitpid(t->pid, &st, WNOHANG) == t->pid) {
            code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            t->pid = 0;
        }
        if (t->pid == 0 && poll(&p, 1, 50) <= 0)
            return code;
        if (now() > end) {
            if (t->pid > 0) {
                kill(t->pid, SIGKILL);
                waitpid(t->pid, NULL, 0);
                t->pid = 0;
            }
            return -1;
        }
    }
}

char *sec_term_queued(sec_term *t)
{
    /* non-canonical: a partial line typed into the queue becomes readable */
    struct termios tio;
    tcgetattr(t->slave, &tio);
    tio.c_lflag &= ~(tcflag_t)ICANON;
    tio.c_cc[VMIN] = 0;
    tio.c_cc[VTIME] = 0;
    tcsetattr(t->slave, TCSANOW, &tio);
    char *buf = calloc(1, 4096);
    ssize_t n = read(t->slave, buf, 4095);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

void sec_term_close(sec_term *t)
{
    if (t->pid > 0) {
        kill(t->pid, SIGKILL);
        waitpid(t->pid, NULL, 0);
    }
    close(t->master);
    close(t->slave);
}
