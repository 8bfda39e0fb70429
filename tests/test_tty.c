/* test_tty.c - `lis sandbox run/exec` on a real pseudo-terminal and on pipes:
 * -t/-i work, and the owner's terminal never goes into a sandbox. */
#include "testlib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

typedef struct term {
    int master, slave;     /* the test keeps the slave: its modes and input queue are checked */
    struct termios modes0; /* the terminal's modes before lis started */
    pid_t pid;
    char buf[65536];
    size_t len;
} term;

/* Starts `lis ARGS...` with a pty of rows x cols as its controlling terminal. */
static void term_start(term *t, const char *const *args)
{
    memset(t, 0, sizeof *t);
    struct winsize ws = {.ws_row = 33, .ws_col = 101};
    int slave;
    cr_assert_eq(openpty(&t->master, &slave, NULL, NULL, &ws), 0);
    fcntl(t->master, F_SETFD, FD_CLOEXEC);
    fcntl(slave, F_SETFD, FD_CLOEXEC);
    t->slave = slave;
    cr_assert_eq(tcgetattr(slave, &t->modes0), 0);
    if (!t_tmpdir()[0]) {
        lis_ctx *ctx = t_ctx();
        lis_ctx_free(ctx);
    }
    t->pid = fork();
    if (t->pid == 0) {
        /* lis must not outlive the test, nor keep the master open itself */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(t->master);
        setsid();
        ioctl(slave, TIOCSCTTY, 0);
        dup2(slave, 0);
        dup2(slave, 1);
        dup2(slave, 2);
        char run[600], data[600];
        snprintf(run, sizeof run, "XDG_RUNTIME_DIR=%s/run", t_tmpdir());
        snprintf(data, sizeof data, "XDG_DATA_HOME=%s/data", t_tmpdir());
        putenv(run);
        putenv(data);
        putenv("TERM=xterm");
        const char *argv[32] = {t_lis_bin()};
        for (int i = 0; args[i] && i < 30; i++)
            argv[i + 1] = args[i];
        execv(argv[0], (char **)argv);
        _exit(127);
    }
}

static void term_close(term *t)
{
    close(t->master);
    close(t->slave);
}

/* Reads until `want` shows up (after what was seen so far) or timeout. */
static int term_expect(term *t, const char *want, int ms)
{
    size_t from = t->len;
    for (int waited = 0; waited < ms;) {
        t->buf[t->len] = 0;
        if (strstr(t->buf + (from > 200 ? from - 200 : 0), want))
            return 1;
        struct pollfd p = {.fd = t->master, .events = POLLIN};
        if (poll(&p, 1, 100) > 0) {
            ssize_t n = read(t->master, t->buf + t->len, sizeof t->buf - 1 - t->len);
            if (n <= 0)
                break;
            t->len += (size_t)n;
        } else {
            waited += 100;
        }
    }
    t->buf[t->len] = 0;
    return strstr(t->buf + (from > 200 ? from - 200 : 0), want) != NULL;
}

static void term_send(term *t, const char *s)
{
    cr_assert_eq(write(t->master, s, strlen(s)), (ssize_t)strlen(s));
}

static int term_wait(term *t)
{
    int st = 0;
    for (int i = 0; i < 100; i++) {
        if (waitpid(t->pid, &st, WNOHANG) == t->pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        char drain[4096];
        struct pollfd p = {.fd = t->master, .events = POLLIN};
        if (poll(&p, 1, 100) > 0 && read(t->master, drain, sizeof drain) <= 0)
            usleep(10000);
    }
    kill(t->pid, SIGKILL);
    waitpid(t->pid, &st, 0);
    return -1;
}

static void remove_boxes(void);
TestSuite(tty, .fini = remove_boxes);

Test(tty, interactive_shell_window_size_ctrl_c_job_control, .timeout = 60)
{
    const char *args[] = {"sandbox", "run", "-t", "--rootfs", t_busybox(), "--", "/bin/sh", NULL};
    term t;
    term_start(&t, args);
    term_send(&t, "stty size; tty\n");
    cr_assert(term_expect(&t, "33 101", 10000), "window size not passed: %s", t.buf);
    cr_assert(term_expect(&t, "/dev/pts/", 5000), "no pty: %s", t.buf);
    /* Ctrl-C interrupts the foreground job, not the shell */
    term_send(&t, "sleep 100\n");
    usleep(300000);
    term_send(&t, "\003");
    term_send(&t, "echo alive-$((40+2))\n");
    cr_assert(term_expect(&t, "alive-42", 10000), "Ctrl-C killed more than the job: %s", t.buf);
    /* job control: a background job is listed */
    term_send(&t, "sleep 50 &\n");
    term_send(&t, "jobs; echo jobs-done\n");
    cr_assert(term_expect(&t, "jobs-done", 10000), "%s", t.buf);
    cr_assert(strstr(t.buf, "sleep 50"), "no job listed: %s", t.buf);
    term_send(&t, "exit 5\n");
    cr_assert_eq(term_wait(&t), 5, "%s", t.buf);
    term_close(&t);
}

Test(tty, no_typing_into_the_owners_terminal, .timeout = 60)
{
    char probe[4096];
    const char *b = t_lis_bin();
    snprintf(probe, sizeof probe, "%s", b);
    strcpy(strrchr(probe, '/'), "/tests/sysprobe:/probe:ro");
    const char *args[] = {"sandbox", "run", "-i",     "--rootfs", t_busybox(), "-v",
                          probe,     "--",  "/probe", "tiocsti",  NULL};
    term t;
    term_start(&t, args);
    cr_assert(term_expect(&t, "EPERM", 10000), "TIOCSTI was not refused: %s", t.buf);
    int code = term_wait(&t);
    cr_assert_eq(code, 1, "%s", t.buf);
    /* nothing was pushed into the terminal's input queue */
    int queued = -1;
    cr_assert_eq(ioctl(t.master, FIONREAD, &queued), 0);
    term_close(&t);
    /* inside its own pty it is refused too */
    const char *args2[] = {"sandbox", "run", "-t",     "--rootfs", t_busybox(), "-v",
                           probe,     "--",  "/probe", "tiocsti",  NULL};
    term_start(&t, args2);
    cr_assert(term_expect(&t, "EPERM", 10000), "TIOCSTI was not refused: %s", t.buf);
    term_wait(&t);
    term_close(&t);
}

/* ---- the owner's terminal stays out of the sandbox ---- */

/* The lis CLI with the state dirs of term_start, output captured. */
static char *lis_cli(int *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *lis_cli(int *code, const char *fmt, ...)
{
    if (!t_tmpdir()[0]) {
        lis_ctx *ctx = t_ctx();
        lis_ctx_free(ctx);
    }
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return t_host(code, "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data %s %s 2>&1 </dev/null",
                  t_tmpdir(), t_tmpdir(), t_lis_bin(), args);
}

static void make_box(const char *name)
{
    int code;
    char *out = lis_cli(&code, "sandbox create --rootfs %s --name %s", t_busybox(), name);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
}

/* After each test, failed ones included: no persistent sandbox outlives it. */
static void remove_boxes(void)
{
    if (t_tmpdir()[0]) {
        int code;
        free(lis_cli(&code, "sandbox rm --all"));
    }
}

/* argv of `lis sandbox run --rootfs BUSYBOX [FLAGS] -- sh -c CMD`, or of
 * `lis sandbox exec BOX [FLAGS] -- sh -c CMD` when box is given. */
static void cmd_args(const char **a, const char *box, const char *flags, const char *cmd)
{
    int k = 0;
    a[k++] = "sandbox";
    if (box) {
        a[k++] = "exec";
        a[k++] = box;
    } else {
        a[k++] = "run";
        a[k++] = "--rootfs";
        a[k++] = t_busybox();
    }
    if (flags && *flags)
        a[k++] = flags;
    a[k++] = "--";
    a[k++] = "sh";
    a[k++] = "-c";
    a[k++] = cmd;
    a[k] = NULL;
}

static int same_modes(const struct termios *a, const struct termios *b)
{
    return a->c_iflag == b->c_iflag && a->c_oflag == b->c_oflag && a->c_cflag == b->c_cflag &&
           a->c_lflag == b->c_lflag && !memcmp(a->c_cc, b->c_cc, sizeof a->c_cc) &&
           cfgetispeed(a) == cfgetispeed(b) && cfgetospeed(a) == cfgetospeed(b);
}

static void assert_modes_kept(const term *t, const char *what)
{
    struct termios now;
    cr_assert_eq(tcgetattr(t->slave, &now), 0);
    cr_assert(same_modes(&t->modes0, &now),
              "%s: the owner's terminal was left changed (lflag %o -> %o, iflag %o -> %o)", what,
              t->modes0.c_lflag, now.c_lflag, t->modes0.c_iflag, now.c_iflag);
}

static const char fd_probe[] =
    "for i in 0 1 2; do echo fd$i=$(readlink /proc/$$/fd/$i); done; "
    "for i in 0 1 2; do test -t $i && echo tty-on-$i; done; "
    "echo ttyfds=$(ls -l /proc/[0-9]*/fd/ 2>/dev/null | grep -c 'pts\\|tty'); echo @END@";

Test(tty, no_host_terminal_inside_run_or_exec, .timeout = 90)
{
    make_box("fdbox");
    for (int exec = 0; exec < 2; exec++)
        for (int in = 0; in < 2; in++) {
            const char *args[16];
            cmd_args(args, exec ? "fdbox" : NULL, in ? "-i" : NULL, fd_probe);
            term t;
            term_start(&t, args);
            term_expect(&t, "@END@", 20000);
            int code = term_wait(&t);
            const char *b = t.buf;
            cr_assert_eq(code, 0, "exec=%d -i=%d: %s", exec, in, b);
            cr_assert_null(strstr(b, "tty-on-"), "a terminal inside the sandbox: %s", b);
            cr_assert(strstr(b, "ttyfds=0"), "a process in the sandbox holds a terminal: %s", b);
            cr_assert(strstr(b, in ? "fd0=pipe:[" : "fd0=/dev/null"), "stdin: %s", b);
            cr_assert(strstr(b, "fd1=pipe:["), "stdout is no pipe: %s", b);
            cr_assert(strstr(b, "fd2=pipe:["), "stderr is no pipe: %s", b);
            term_close(&t);
        }
}

Test(tty, command_cannot_change_the_terminal_modes, .timeout = 90)
{
    make_box("sttybox");
    /* every way a command could reach the terminal: its stdin, stdout, stderr */
    const char *cmd =
        "for i in 0 1 2; do stty -echo -icanon raw <&$i 2>/dev/null; done; echo @END@";
    for (int exec = 0; exec < 2; exec++)
        for (int in = 0; in < 2; in++) {
            const char *args[16];
            cmd_args(args, exec ? "sttybox" : NULL, in ? "-i" : NULL, cmd);
            term t;
            term_start(&t, args);
            term_expect(&t, "@END@", 20000);
            cr_assert_eq(term_wait(&t), 0, "exec=%d -i=%d: %s", exec, in, t.buf);
            char what[64];
            snprintf(what, sizeof what, "exec=%d -i=%d", exec, in);
            assert_modes_kept(&t, what);
            term_close(&t);
        }
}

/* `sandbox exec` leaves a process behind that tries to read the terminal
 * through each of its stdio fds after exec returned; what the test then
 * types must stay in the terminal's input queue. */
Test(tty, process_left_behind_by_exec_cannot_read_the_terminal, .timeout = 120)
{
    make_box("bgbox");
    for (int in = 0; in < 2; in++) {
        int code;
        free(lis_cli(&code, "sandbox exec bgbox -- rm -f /tmp/got /tmp/done"));
        const char *args[16];
        cmd_args(args, "bgbox", in ? "-i" : NULL,
                 "(sleep 1; for i in 0 1 2; do read -t 5 -r x <&$i; echo \"fd$i:$x\" >> /tmp/got;"
                 " done; touch /tmp/done) & echo @END@");
        term t;
        term_start(&t, args);
        cr_assert(term_expect(&t, "@END@", 20000), "%s", t.buf);
        cr_assert_eq(term_wait(&t), 0, "%s", t.buf);
        /* exec returned; now the owner types into the same terminal */
        const char typed[] = "secret1\nsecret2\nsecret3\n";
        term_send(&t, typed);
        char *out = NULL;
        for (int i = 0; i < 200; i++) {
            free(out);
            out = lis_cli(&code, "sandbox exec bgbox -- sh -c 'test -e /tmp/done && cat /tmp/got'");
            if (code == 0)
                break;
            usleep(100000);
        }
        cr_assert_eq(code, 0, "the process left behind never finished: %s", out);
        cr_assert(strstr(out, "fd2:"), "%s", out);
        cr_assert_null(strstr(out, "secret"),
                       "-i=%d: a process left behind read the owner's "
                       "typing: %s",
                       in, out);
        free(out);
        int queued = -1;
        cr_assert_eq(ioctl(t.slave, FIONREAD, &queued), 0);
        cr_assert_eq(queued, (int)strlen(typed), "-i=%d: typed input was consumed", in);
        term_close(&t);
    }
}

Test(tty, raw_mode_restored_on_every_exit, .timeout = 120)
{
    /* the command's own exit code, and its failure to start */
    const char *ok[] = {"sandbox",  "run",       "-t",
                        "--rootfs", t_busybox(), "--",
                        "sh",       "-c",        "stty -echo; echo @END@; exit 3",
                        NULL};
    term t;
    term_start(&t, ok);
    term_expect(&t, "@END@", 20000);
    cr_assert_eq(term_wait(&t), 3, "%s", t.buf);
    assert_modes_kept(&t, "exit 3");
    term_close(&t);
    const char *bad[] = {"sandbox", "run", "-t", "--rootfs", t_busybox(), "--", "/no/such", NULL};
    term_start(&t, bad);
    cr_assert_eq(term_wait(&t), 127, "%s", t.buf);
    assert_modes_kept(&t, "command not found");
    term_close(&t);
    /* stopped: the modes of before while stopped, raw again when continued */
    const char *sh[] = {"sandbox", "run", "-t", "--rootfs", t_busybox(), "--", "sh", NULL};
    term_start(&t, sh);
    term_send(&t, "echo ready-$((2+2))\n");
    cr_assert(term_expect(&t, "ready-4", 20000), "%s", t.buf);
    cr_assert_eq(kill(t.pid, SIGTSTP), 0);
    int st;
    cr_assert_eq(waitpid(t.pid, &st, WUNTRACED), t.pid);
    cr_assert(WIFSTOPPED(st));
    assert_modes_kept(&t, "stopped");
    cr_assert_eq(kill(t.pid, SIGCONT), 0);
    struct termios now;
    for (int i = 0; i < 200; i++) {
        cr_assert_eq(tcgetattr(t.slave, &now), 0);
        if (!(now.c_lflag & ECHO))
            break;
        usleep(50000);
    }
    cr_assert_eq(now.c_lflag & (ECHO | ICANON), 0, "not raw again after SIGCONT");
    term_send(&t, "exit 6\n");
    cr_assert_eq(term_wait(&t), 6, "%s", t.buf);
    assert_modes_kept(&t, "exit after a stop");
    term_close(&t);
    /* a window change reaches the command; then lis is killed mid-command */
    make_box("rawbox");
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        const char *args[] =
            {"sandbox",       i ? "exec" : "run", i ? "rawbox" : "--rootfs", i ? "-t" : t_busybox(),
             i ? "--" : "-t", i ? "sh" : "--",    i ? NULL : "sh",           NULL};
        term_start(&t, args);
        term_send(&t, "echo ready-$((1+1))\n");
        cr_assert(term_expect(&t, "ready-2", 20000), "%s", t.buf);
        cr_assert_eq(tcgetattr(t.slave, &now), 0);
        cr_assert_eq(now.c_lflag & (ECHO | ICANON), 0, "-t did not make the terminal raw");
        struct winsize ws = {.ws_row = 41, .ws_col = 117};
        cr_assert_eq(ioctl(t.master, TIOCSWINSZ, &ws), 0);
        term_send(&t, "stty size\n");
        cr_assert(term_expect(&t, "41 117", 20000), "window change not passed: %s", t.buf);
        term_send(&t, "sleep 100\n");
        usleep(200000);
        cr_assert_eq(kill(t.pid, sigs[i]), 0);
        cr_assert_eq(term_wait(&t), 128 + sigs[i], "%s", t.buf);
        assert_modes_kept(&t, strsignal(sigs[i]));
        term_close(&t);
    }
}

/* ---- -i and output through pipes: nothing lost, nothing shared ---- */

typedef struct piped {
    char *out, *err;
    size_t out_len, err_len;
    int code;
    ino_t ino[3]; /* the test's own pipes: they must not be the command's */
} piped;

static void append(char **b, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *b = realloc(*b, *cap);
        cr_assert(*b);
    }
    memcpy(*b + *len, p, n);
    *len += n;
    (*b)[*len] = 0;
}

/* `lis ARGS` with stdin, stdout and stderr pipes of the test: writes in (then
 * closes it), reads both outputs to EOF; writing stops when lis stops reading. */
static void run_piped(const char *const *args, const char *in, size_t in_len, piped *r)
{
    memset(r, 0, sizeof *r);
    if (!t_tmpdir()[0]) {
        lis_ctx *ctx = t_ctx();
        lis_ctx_free(ctx);
    }
    int pin[2], pout[2], perr[2];
    cr_assert_eq(pipe2(pin, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(pout, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(perr, O_CLOEXEC), 0);
    struct stat st;
    fstat(pin[0], &st);
    r->ino[0] = st.st_ino;
    fstat(pout[0], &st);
    r->ino[1] = st.st_ino;
    fstat(perr[0], &st);
    r->ino[2] = st.st_ino;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGPIPE, SIG_DFL); /* an ignored SIGPIPE would reach the commands */
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
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
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    signal(SIGPIPE, SIG_IGN);
    fcntl(pin[1], F_SETFL, O_NONBLOCK);
    int wfd = pin[1];
    size_t off = 0, ocap = 0, ecap = 0;
    int fds[2] = {pout[0], perr[0]};
    char buf[65536];
    for (int waited = 0; (fds[0] >= 0 || fds[1] >= 0) && waited < 60000;) {
        if (wfd >= 0 && off == in_len) {
            close(wfd);
            wfd = -1;
        }
        struct pollfd pf[3] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}, {wfd, POLLOUT, 0}};
        int pr = poll(pf, 3, 100);
        if (pr == 0)
            waited += 100;
        if (pf[2].revents) {
            ssize_t n = write(wfd, in + off, in_len - off);
            if (n > 0)
                off += (size_t)n;
            else if (n < 0 && errno != EAGAIN) { /* EPIPE: lis stopped reading */
                close(wfd);
                wfd = -1;
            }
        }
        for (int i = 0; i < 2; i++) {
            if (!pf[i].revents)
                continue;
            ssize_t n = read(fds[i], buf, sizeof buf);
            if (n <= 0) {
                close(fds[i]);
                fds[i] = -1;
            } else if (i == 0) {
                append(&r->out, &r->out_len, &ocap, buf, (size_t)n);
            } else {
                append(&r->err, &r->err_len, &ecap, buf, (size_t)n);
            }
        }
    }
    if (wfd >= 0)
        close(wfd);
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0) {
            kill(pid, SIGKILL);
            close(fds[i]);
        }
    int status;
    waitpid(pid, &status, 0);
    r->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (!r->out)
        append(&r->out, &r->out_len, &ocap, "", 0);
    if (!r->err)
        append(&r->err, &r->err_len, &ecap, "", 0);
}

static void piped_free(piped *r)
{
    free(r->out);
    free(r->err);
}

static void assert_not_our_pipes(const piped *r)
{
    for (int i = 0; i < 3; i++) {
        char link[64];
        snprintf(link, sizeof link, "pipe:[%lu]", (unsigned long)r->ino[i]);
        cr_assert_null(strstr(r->err, link), "the caller's own pipe %d is inside: %s", i, r->err);
    }
}

/* the links of the shell's fds 0-2, printed on stderr */
static const char fd_links[] =
    "l=$(for i in 0 1 2; do readlink /proc/$$/fd/$i; done); echo \"$l\" >&2; ";

Test(tty, stdin_passed_and_output_relayed_intact, .timeout = 120)
{
    /* 1 MiB of stdin through sha256sum, in run and in exec */
    size_t n = 1u << 20;
    char *payload = malloc(n);
    cr_assert(payload);
    for (size_t i = 0; i < n; i++)
        payload[i] = (char)((i * 2654435761u) >> 13);
    char path[600];
    if (!t_tmpdir()[0]) {
        lis_ctx *ctx = t_ctx();
        lis_ctx_free(ctx);
    }
    snprintf(path, sizeof path, "%s/payload", t_tmpdir());
    FILE *f = fopen(path, "w");
    cr_assert(f && fwrite(payload, 1, n, f) == n);
    fclose(f);
    int code;
    char *want = t_host(&code, "sha256sum < %s", path);
    cr_assert_eq(code, 0);
    *strchr(want, ' ') = 0;
    make_box("pipebox");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%ssha256sum; exit 3", fd_links);
    for (int exec = 0; exec < 2; exec++) {
        const char *args[16];
        cmd_args(args, exec ? "pipebox" : NULL, "-i", cmd);
        piped r;
        run_piped(args, payload, n, &r);
        cr_assert_eq(r.code, 3, "exec=%d: %s", exec, r.err);
        cr_assert(strstr(r.out, want), "exec=%d: stdin changed on the way: %s vs %s", exec, r.out,
                  want);
        assert_not_our_pipes(&r);
        piped_free(&r);
    }
    /* 4 MiB on stdout and 1 MiB on stderr at once */
    const char *big[16];
    snprintf(cmd, sizeof cmd,
             "%s(yes 0123456789abcdef | head -c 4194304) & "
             "yes err | head -c 1048576 >&2; wait; exit 7",
             fd_links);
    cmd_args(big, NULL, NULL, cmd);
    piped r;
    run_piped(big, NULL, 0, &r);
    cr_assert_eq(r.code, 7, "%s", r.err);
    cr_assert_eq(r.out_len, 4194304u);
    size_t same = 0;
    while (same < r.out_len && r.out[same] == "0123456789abcdef\n"[same % 17])
        same++;
    cr_assert_eq(same, r.out_len, "stdout differs at byte %zu", same);
    const char *e = strstr(r.err, "err\n");
    cr_assert(e, "%s", r.err);
    size_t run = 0;
    while (e + run < r.err + r.err_len && e[run] == "err\n"[run % 4])
        run++;
    cr_assert_eq(run, 1048576u, "stderr lost bytes");
    assert_not_our_pipes(&r);
    piped_free(&r);
    /* a command that never reads its stdin neither blocks nor loses output */
    const char *deaf[16];
    snprintf(cmd, sizeof cmd, "%secho a; sleep 0.3; echo b; exit 4", fd_links);
    cmd_args(deaf, "pipebox", "-i", cmd);
    run_piped(deaf, payload, n, &r);
    cr_assert_eq(r.code, 4, "%s", r.err);
    cr_assert_str_eq(r.out, "a\nb\n");
    assert_not_our_pipes(&r);
    piped_free(&r);
    /* the end of stdin is passed on */
    const char *eof[16];
    snprintf(cmd, sizeof cmd, "%scat > /dev/null; echo eof-seen", fd_links);
    cmd_args(eof, NULL, "-i", cmd);
    run_piped(eof, payload, n, &r);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "eof-seen\n");
    assert_not_our_pipes(&r);
    piped_free(&r);
    free(want);
    free(payload);
}
