/* test_serve_security.c - `lis serve` under attack (issue 22): --tcp only with
 * mutual TLS (the docker CLI, docker-py and the Python client over it,
 * unchanged), every create option honoured or refused (through the docker
 * CLI and docker-py), HTTP bounded (hostile clients beside a legitimate one
 * whose latency is printed), --idle-timeout. The second user's side of TCP
 * is tests/root_serve_users.c (it needs root to be two users). */
#include "testlib.h"

#include "serve/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct server {
    pid_t pid;
    int port;
    char sock[4200], tls[4200], log[4200];
} server;

static int have_docker_py(void) { return system("python3 -c 'import docker' 2>/dev/null") == 0; }

static int have_docker_cli(void)
{
    int code;
    free(t_host(&code, "command -v docker >/dev/null 2>&1"));
    return code == 0;
}

/* A TCP port free now on 127.0.0.1. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &l) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* The Debian fixture as lis-test:v1 in a private store; TLS files in s->tls. */
static void prepare(server *s)
{
    if (!t_debian())
        cr_skip_test("no Debian fixture");
    lis_ctx_free(t_ctx()); /* for t_tmpdir() */
    int code;
    t_import_debian("lis-test:v1");
    char *out = NULL;
    snprintf(s->sock, sizeof s->sock, "%s/run/docker.sock", t_tmpdir());
    snprintf(s->tls, sizeof s->tls, "%s/tls", t_tmpdir());
    snprintf(s->log, sizeof s->log, "%s/serve.log", t_tmpdir());
    out = t_lis(&code, "serve --tls-init %s", s->tls);
    cr_assert_eq(code, 0, "--tls-init: %s", out);
    free(out);
}

/* lis serve on s->sock and (tls) 127.0.0.1:PORT with mutual TLS, plus extra. */
static void start(server *s, int tls, const char *const *extra)
{
    char tcp[64];
    s->port = tls ? free_port() : 0;
    snprintf(tcp, sizeof tcp, "127.0.0.1:%d", s->port);
    const char *argv[32] = {"lis", "serve", "--socket", s->sock};
    int n = 4;
    if (tls) {
        argv[n++] = "--tcp";
        argv[n++] = tcp;
        argv[n++] = "--tls-dir";
        argv[n++] = s->tls;
    }
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    s->pid = ts_spawn(s->sock, s->log, argv);
}

static int stop(server *s)
{
    int st = 0;
    kill(s->pid, SIGTERM);
    waitpid(s->pid, &st, 0);
    return st;
}

static char *script(int *code, const char *env, const char *cmd)
{
    return t_host(code, "%s %s 2>&1", env, cmd);
}

Test(serve_sec, tcp_needs_mutual_tls, .timeout = 120)
{
    lis_ctx_free(t_ctx());
    int code;
    char *out =
        t_lis(&code, "serve --tcp 127.0.0.1:%d --socket %s/x.sock", free_port(), t_tmpdir());
    cr_assert_neq(code, 0, "--tcp without TLS started: %s", out);
    cr_assert(strstr(out, "--tcp needs mutual TLS: --tls-dir DIR"), "%s", out);
    cr_assert(strstr(out, "--tcp-no-auth-insecure"), "the way out is named: %s", out);
    free(out);
    out = t_lis(&code, "serve --tls-init %s/tls", t_tmpdir());
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "127.0.0.1") && strstr(out, "localhost"), "its names: %s", out);
    free(out);
    const char *files[] = {"ca.pem", "server-cert.pem", "server-key.pem", "cert.pem", "key.pem"};
    for (int i = 0; i < 5; i++) {
        char p[4300];
        struct stat st;
        snprintf(p, sizeof p, "%s/tls/%s", t_tmpdir(), files[i]);
        cr_assert_eq(stat(p, &st), 0, "%s missing", p);
        cr_assert_eq(st.st_mode & 0777, 0600, "%s mode %o", p, st.st_mode & 0777);
    }
    out = t_host(&code,
                 "openssl verify -CAfile %s/tls/ca.pem %s/tls/server-cert.pem "
                 "%s/tls/cert.pem 2>&1",
                 t_tmpdir(), t_tmpdir(), t_tmpdir());
    cr_assert_eq(code, 0, "the certificates chain to the CA: %s", out);
    free(out);
    out = t_host(&code, "openssl x509 -in %s/tls/cert.pem -noout -text 2>&1", t_tmpdir());
    cr_assert(strstr(out, "TLS Web Client Authentication") && !strstr(out, "Server Auth"),
              "the client certificate is for clients only: %s", out);
    free(out);
    out = t_lis(&code, "serve --tls-init %s/tls", t_tmpdir());
    cr_assert_neq(code, 0, "--tls-init overwrote: %s", out);
    cr_assert(strstr(out, "never overwrites"), "%s", out);
    free(out);
    /* a private key others can read is refused, with the fix */
    char key[4300];
    snprintf(key, sizeof key, "%s/tls/server-key.pem", t_tmpdir());
    chmod(key, 0644);
    out = t_lis(&code, "serve --tcp 127.0.0.1:%d --tls-dir %s/tls --socket %s/y.sock", free_port(),
                t_tmpdir(), t_tmpdir());
    cr_assert_neq(code, 0, "%s", out);
    cr_assert(strstr(out, "others can read") && strstr(out, "chmod 600"), "%s", out);
    free(out);
    out = t_lis(&code, "serve --tls-dir %s/tls --socket %s/z.sock", t_tmpdir(), t_tmpdir());
    cr_assert_neq(code, 0, "--tls-dir without --tcp: %s", out);
    free(out);
}

/* The docker CLI over mutual TLS (DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) unchanged:
 * run, exec -i with its half-close, cp, -p, commit, pause... */
Test(serve_sec, docker_cli_over_mutual_tls, .timeout = 400)
{
    if (!have_docker_cli())
        cr_skip_test("the docker CLI (docker.io) is not installed (scripts/deps.sh)");
    server s;
    prepare(&s);
    start(&s, 1, NULL);
    char env[9000], cmd[4300];
    snprintf(env, sizeof env, "DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=%s", s.tls);
    snprintf(cmd, sizeof cmd, "bash %s/serve/docker_cli.sh tcp://127.0.0.1:%d lis-test:v1",
             t_src_dir(), s.port);
    int code;
    char *out = script(&code, env, cmd);
    cr_assert(strstr(out, " 0 failed") && code == 0, "docker CLI over TLS:\n%s", out);
    cr_assert(strstr(out, "ok exec -i stdin, half-close"), "%s", out);
    cr_assert(strstr(out, "ok cp host -> container"), "%s", out);
    free(out);
    /* without the certificate: no answer (the CLI fails, the server stays up) */
    snprintf(env, sizeof env, "DOCKER_CONFIG=%s DOCKER_HOST=tcp://127.0.0.1:%d", t_tmpdir(),
             s.port);
    out = script(&code, env, "docker ps");
    cr_assert_neq(code, 0, "docker ps without a certificate worked: %s", out);
    free(out);
    cr_assert_eq(stop(&s), 0);
}

/* Mutual TLS asks for the client-auth extended key usage (issue 29): a client
 * certificate of the CA without the extension, or for serverAuth only, gets no
 * answer (tests/serve/tls_eku.sh makes its own CA with openssl). */
Test(serve_sec, mutual_tls_needs_client_auth_key_usage, .timeout = 120)
{
    lis_ctx_free(t_ctx()); /* for t_tmpdir() */
    server s;
    snprintf(s.sock, sizeof s.sock, "%s/run/docker.sock", t_tmpdir());
    snprintf(s.tls, sizeof s.tls, "%s/eku", t_tmpdir());
    snprintf(s.log, sizeof s.log, "%s/serve.log", t_tmpdir());
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "bash %s/serve/tls_eku.sh make %s", t_src_dir(), s.tls);
    int code;
    char *out = script(&code, "", cmd);
    cr_assert_eq(code, 0, "making the certificates: %s", out);
    free(out);
    start(&s, 1, NULL);
    snprintf(cmd, sizeof cmd, "bash %s/serve/tls_eku.sh check %s %d", t_src_dir(), s.tls, s.port);
    out = script(&code, "", cmd);
    cr_assert(strstr(out, "\n0 failed") && code == 0, "client key usage:\n%s", out);
    cr_assert(strstr(out, "ok refused: a client certificate without extended key usage"), "%s",
              out);
    free(out);
    cr_assert_eq(stop(&s), 0);
}

/* docker-py's TLSConfig and the Python client (LIS_SOCKET=tcp://, LIS_CERT_PATH). */
Test(serve_sec, docker_py_and_python_client_over_mutual_tls, .timeout = 400)
{
    if (!have_docker_py())
        cr_skip_test("python3-docker is not installed (scripts/deps.sh)");
    server s;
    prepare(&s);
    start(&s, 1, NULL);
    char env[9000], cmd[4300];
    snprintf(env, sizeof env, "DOCKER_CERT_PATH=%s", s.tls);
    snprintf(cmd, sizeof cmd, "python3 %s/serve/docker_py.py tcp://127.0.0.1:%d lis-test:v1",
             t_src_dir(), s.port);
    int code;
    char *out = script(&code, env, cmd);
    cr_assert(strstr(out, " 0 failed") && code == 0, "docker-py over TLS:\n%s", out);
    cr_assert(strstr(out, "ok 101 header alone in the first recv"), "%s", out);
    cr_assert(strstr(out, "ok [strict] slow client still gets exec output"), "%s", out);
    free(out);
    snprintf(env, sizeof env,
             "PYTHONPATH=%s/python LIS_SOCKET=tcp://127.0.0.1:%d LIS_CERT_PATH=%s LIS_BIN=%s",
             t_src_dir(), s.port, s.tls, t_lis_bin());
    snprintf(cmd, sizeof cmd,
             "python3 %s/serve/lis_client.py -v ClientTest.test_commands_run "
             "ClientTest.test_files ClientTest.test_errors_and_kill ClientTest.test_async_sandbox",
             t_src_dir());
    out = script(&code, env, cmd);
    cr_assert(code == 0 && strstr(out, "Ran 4 tests") && strstr(out, "\nOK"),
              "the Python client over TLS:\n%s", out);
    free(out);
    cr_assert_eq(stop(&s), 0);
}

Test(serve_sec, create_options_honoured_or_refused, .timeout = 400)
{
    if (!have_docker_cli() || !have_docker_py())
        cr_skip_test("the docker CLI or docker-py is not installed (scripts/deps.sh)");
    server s;
    prepare(&s);
    start(&s, 0, NULL);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "bash %s/serve/create_options.sh %s lis-test:v1", t_src_dir(),
             s.sock);
    int code;
    char *out = script(&code, "", cmd);
    cr_assert(strstr(out, " 0 failed") && code == 0, "create options (docker CLI):\n%s", out);
    /* the key facts, named, so a check dropped from the script shows here */
    const char *named[] = {"ok -v ro: a write fails",
                           "ok -v rw: the write reached the host",
                           "ok bind: a relative symlink resolves inside the container",
                           "ok refused: a container path with ..",
                           "ok refused: a host path the owner cannot read",
                           "ok --read-only: / and /tmp refuse writes, /dev/shm takes them",
                           "ok --tmpfs size",
                           "ok --shm-size",
                           "ok --ulimit nofile",
                           "ok --cap-drop CHOWN: chown refused",
                           "ok refused: --privileged",
                           "ok refused: --cap-add SYS_ADMIN",
                           "ok refused: --device",
                           "ok refused: --pid host",
                           "ok refused: --ipc host",
                           "ok refused: --uts host",
                           "ok refused: --userns host",
                           "ok refused: --security-opt seccomp=unconfined",
                           "ok refused: --security-opt systempaths=unconfined",
                           "ok refused: --sysctl",
                           "ok refused: --cgroup-parent",
                           "ok refused: --volumes-from",
                           "ok --init (lis-init is PID 1)"};
    for (size_t i = 0; i < sizeof named / sizeof *named; i++)
        cr_assert(strstr(out, named[i]), "missing [%s]:\n%s", named[i], out);
    free(out);
    snprintf(cmd, sizeof cmd, "python3 %s/serve/docker_py.py %s lis-test:v1 options", t_src_dir(),
             s.sock);
    out = script(&code, "", cmd);
    cr_assert(strstr(out, " 0 failed") && code == 0, "create options (docker-py):\n%s", out);
    cr_assert(strstr(out, "ok refused: privileged") && strstr(out, "ok volumes= ro"), "%s", out);
    cr_assert(strstr(out, "ok refused: MaskedPaths []"), "%s", out);
    free(out);
    cr_assert_eq(stop(&s), 0);
}

/* Hostile HTTP (tests/serve/http_attacks.py): the latencies are printed in the
 * log of this test (criterion --verbose, or the "info" lines on failure). */
Test(serve_sec, http_bounded_under_attack, .timeout = 400)
{
    server s;
    prepare(&s);
    const char *extra[] = {"--conn-timeout", "3", NULL};
    start(&s, 1, extra);
    char env[9000], cmd[4300];
    snprintf(env, sizeof env, "LIS_CERT_PATH=%s", s.tls);
    snprintf(cmd, sizeof cmd, "python3 %s/serve/http_attacks.py %s %d %d", t_src_dir(), s.sock,
             s.port, (int)s.pid);
    int code;
    char *out = script(&code, env, cmd);
    cr_assert(strstr(out, " 0 failed") && code == 0, "HTTP attacks:\n%s", out);
    cr_assert(strstr(out, "ok held chunk extensions: closed by the stall detection"), "%s", out);
    /* the measured latencies, for the record (tests/README.md: how to see them) */
    for (char *l = out; (l = strstr(l, "info ")); l++) {
        char *e = strchr(l, '\n');
        fprintf(stderr, "%.*s\n", e ? (int)(e - l) : (int)strlen(l), l);
    }
    free(out);
    cr_assert_eq(stop(&s), 0);
}

Test(serve_sec, idle_timeout_exits_only_when_idle, .timeout = 300)
{
    if (!have_docker_cli())
        cr_skip_test("the docker CLI (docker.io) is not installed (scripts/deps.sh)");
    server s;
    prepare(&s);
    const char *extra[] = {"--idle-timeout", "2", NULL};
    start(&s, 0, extra);
    int code;
    char *out = t_host(&code, "DOCKER_HOST=unix://%s docker run -d lis-test:v1 sleep infinity 2>&1",
                       s.sock);
    cr_assert_eq(code, 0, "%s", out);
    char id[80];
    snprintf(id, sizeof id, "%.64s", out);
    free(out);
    sleep(5); /* past its idle time: a container keeps it */
    cr_assert_eq(waitpid(s.pid, NULL, WNOHANG), 0, "it exited with a container left");
    out = t_host(&code, "DOCKER_HOST=unix://%s docker rm -f %s 2>&1", s.sock, id);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    int st = -1;
    for (int i = 0; i < 300 && waitpid(s.pid, &st, WNOHANG) == 0; i++)
        usleep(100000);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "it did not exit (0) when idle: %d", st);
    cr_assert_neq(access(s.sock, F_OK), 0, "its socket stayed");
    out = t_host(&code, "cat %s", s.log);
    cr_assert(strstr(out, "--idle-timeout"), "it said why: %s", out);
    free(out);
    /* without --idle-timeout it stays */
    start(&s, 0, NULL);
    sleep(4);
    cr_assert_eq(waitpid(s.pid, NULL, WNOHANG), 0, "a server without --idle-timeout exited");
    cr_assert_eq(stop(&s), 0);
}
