/* test_escape_tty.c - the owner's terminal must stay out of reach: the CLI runs
 * on a pseudo-terminal of the test, the command tries to type into it
 * (TIOCSTI through the ia32 entry and with high command bits, TIOCLINUX) or to
 * change its modes, and the test checks the terminal's input queue and
 * settings afterwards. (tests/test_tty.c covers the plain TIOCSTI case.) */
#include "seclib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/* lis sandbox run -i with the probe, on a terminal of ours. */
static void run_on_term(sec_term *t, const char *const *cmd)
{
    static char bind[4200];
    snprintf(bind, sizeof bind, "%s:/probe:ro", sec_probe());
    const char *args[32] = {"sandbox", "run", "-i", "--rootfs", t_busybox(), "-v", bind, "--"};
    int n = 8;
    for (int i = 0; cmd[i] && n < 31; i++)
        args[n++] = cmd[i];
    args[n] = NULL;
    lis_ctx_free(t_ctx()); /* a private tmpdir for the CLI's state */
    sec_term_start(t, args);
}

static void nothing_typed(sec_term *t)
{
    char *q = sec_term_queued(t);
    cr_expect_str_eq(q, "", "the command typed into the owner's terminal: '%s'", q);
    free(q);
}

Test(escape, stdio_is_not_the_host_terminal, .timeout = 60)
{
    const char *cmd[] = {"/bin/sh", "-c",
                         "for f in 0 1 2; do [ -t $f ] && echo TTY$f; done; echo checked", NULL};
    sec_term t;
    run_on_term(&t, cmd);
    int code = sec_term_wait(&t, 30);
    cr_expect_eq(code, 0, "exit %d: %s", code, t.out);
    cr_expect(strstr(t.out, "checked"), "%s", t.out);
    cr_expect(!strstr(t.out, "TTY"), "a host terminal was handed into the sandbox: %s", t.out);
    nothing_typed(&t);
    sec_term_close(&t);
}

Test(escape, tiocsti_through_the_ia32_entry, .timeout = 60)
{
    const char *cmd[] = {"/probe", "ia32", "tiocsti", "echo LIS-ESCAPE\n", NULL};
    sec_term t;
    run_on_term(&t, cmd);
    sec_term_wait(&t, 30);
    cr_expect(!sec_won(t.out), "TIOCSTI through int 0x80 worked: %s", t.out);
    nothing_typed(&t);
    sec_term_close(&t);
}

Test(escape, tiocsti_with_high_command_bits, .timeout = 60)
{
    const char *cmd[] = {"/probe", "tiocsti", "echo LIS-ESCAPE\n", "1", NULL};
    sec_term t;
    run_on_term(&t, cmd);
    sec_term_wait(&t, 30);
    cr_expect(!sec_won(t.out), "TIOCSTI with bits above 32 set worked: %s", t.out);
    nothing_typed(&t);
    sec_term_close(&t);
}

Test(escape, tioclinux_paste_selection, .timeout = 60)
{
    const char *cmd[] = {"/probe", "tioclinux", NULL};
    sec_term t;
    run_on_term(&t, cmd);
    sec_term_wait(&t, 30);
    cr_expect(!sec_won(t.out), "TIOCLINUX worked: %s", t.out);
    nothing_typed(&t);
    sec_term_close(&t);
}

Test(escape, host_terminal_settings_unchanged, .timeout = 60)
{
    /* turn echo off, shrink the window and flush the input of whatever
     * terminal the command's fds lead to */
    const char *cmd[] = {"/bin/sh", "-c",
                         "for f in 0 1 2; do stty -echo -icanon cols 7 rows 3 <&$f; done "
                         "2>/dev/null; echo tried",
                         NULL};
    sec_term t;
    run_on_term(&t, cmd);
    int code = sec_term_wait(&t, 30);
    cr_expect(strstr(t.out, "tried"), "exit %d: %s", code, t.out);
    struct termios after;
    struct winsize ws;
    cr_assert_eq(tcgetattr(t.slave, &after), 0);
    cr_assert_eq(ioctl(t.slave, TIOCGWINSZ, &ws), 0);
    /* a fresh pty echoes and is canonical; lis -i without -t changes neither */
    cr_expect_eq(after.c_lflag & (ECHO | ICANON), (tcflag_t)(ECHO | ICANON),
                 "the command changed the owner's terminal modes");
    cr_expect(ws.ws_col == 80 && ws.ws_row == 24,
              "the command resized the owner's terminal "
              "to %dx%d",
              ws.ws_col, ws.ws_row);
    sec_term_close(&t);
}
