/* test_tty.c - `lis sandbox run -t/-i` on a real pseudo-terminal. */
#include "testlib.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

typedef struct term {
    int master;
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
    lis_ctx *ctx = t_ctx();
    lis_ctx_free(ctx);
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
    close(slave);
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
    close(t.master);
}

Test(tty, no_typing_into_the_owners_terminal, .timeout = 60)
{
    char probe[4096];
    const char *b = t_lis_bin();
    snprintf(probe, sizeof probe, "%s", b);
    strcpy(strrchr(probe, '/'), "/tests/sysprobe:/probe:ro");
    const char *args[] = {"sandbox", "run", "-i", "--rootfs", t_busybox(), "-v", probe,
                          "--", "/probe", "tiocsti", NULL};
    term t;
    term_start(&t, args);
    cr_assert(term_expect(&t, "EPERM", 10000), "TIOCSTI was not refused: %s", t.buf);
    int code = term_wait(&t);
    cr_assert_eq(code, 1, "%s", t.buf);
    /* nothing was pushed into the terminal's input queue */
    int queued = -1;
    cr_assert_eq(ioctl(t.master, FIONREAD, &queued), 0);
    close(t.master);
    /* inside its own pty it is refused too */
    const char *args2[] = {"sandbox", "run", "-t", "--rootfs", t_busybox(), "-v", probe,
                           "--", "/probe", "tiocsti", NULL};
    term_start(&t, args2);
    cr_assert(term_expect(&t, "EPERM", 10000), "TIOCSTI was not refused: %s", t.buf);
    term_wait(&t);
    close(t.master);
}
