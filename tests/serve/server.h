/* server.h - `lis serve` for the serve suites (included by tests/test_serve*.c
 * after testlib.h): the Debian fixture imported into a private store, the
 * server on a private socket as this (unprivileged) user, its stderr in
 * t_tmpdir()/serve.log, and a stop that cannot hang the suite. */
#ifndef LIS_TEST_SERVE_SERVER_H
#define LIS_TEST_SERVE_SERVER_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct ts_server {
    pid_t pid;
    char sock[4200];
} ts_server;

static inline int ts_have(const char *cmd)
{
    int code;
    free(t_host(&code, "command -v %s >/dev/null 2>&1", cmd));
    return code == 0;
}

static inline int ts_have_docker_py(void)
{
    return ts_have("python3") && system("python3 -c 'import docker' 2>/dev/null") == 0;
}

/* Runs `lis` with argv (argv[0] "lis") as this user, its XDG dirs under
 * t_tmpdir() and its stderr in log; returns once sock exists. */
static inline pid_t ts_spawn(const char *sock, const char *log, const char *const *argv)
{
    char run[4200], data[4200];
    snprintf(run, sizeof run, "XDG_RUNTIME_DIR=%s/run", t_tmpdir());
    snprintf(data, sizeof data, "XDG_DATA_HOME=%s/data", t_tmpdir());
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        putenv(run);
        putenv(data);
        if (!freopen(log, "w", stderr))
            _exit(126);
        execv(t_lis_bin(), (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 400 && access(sock, F_OK) != 0; i++)
        usleep(25000);
    cr_assert_eq(access(sock, F_OK), 0, "lis serve did not create %s", sock);
    return pid;
}

/* The fixture as lis-test:v1 (a tmpdir of its own) and `lis serve --socket
 * SOCK` with the extra arguments (NULL-terminated, or NULL). */
static inline void ts_start_args(ts_server *s, const char *const *extra)
{
    if (!t_debian())
        cr_skip_test("no Debian fixture");
    lis_ctx_free(t_ctx()); /* for t_tmpdir() */
    t_import_debian("lis-test:v1");
    snprintf(s->sock, sizeof s->sock, "%s/run/docker.sock", t_tmpdir());
    char log[4200];
    snprintf(log, sizeof log, "%s/serve.log", t_tmpdir());
    const char *argv[16] = {"lis", "serve", "--socket", s->sock};
    for (int i = 0, n = 4; extra && extra[i] && n < 15; i++)
        argv[n++] = extra[i];
    s->pid = ts_spawn(s->sock, log, argv);
}

/* The same with `--net net` (NULL: the default). */
static inline void ts_start(ts_server *s, const char *net)
{
    const char *extra[] = {"--net", net, NULL};
    ts_start_args(s, net ? extra : NULL);
}

/* Reaps the server after SIGTERM (sent unless already gone): its wait status,
 * or -1 when it was still there 30 s later (then killed: a hung server). */
static inline int ts_stop(ts_server *s)
{
    int st = 0;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 300; i++) {
        if (waitpid(s->pid, &st, WNOHANG) == s->pid)
            return st;
        usleep(100000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &st, 0);
    return -1;
}

#endif
