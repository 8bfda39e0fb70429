/* root_serve_users.c - as root (scripts/test.sh runs root_* as root), two
 * ordinary users: $LIS_TEST_USER runs `lis serve --tcp --tls-dir` on
 * 127.0.0.1, and $LIS_TEST_USER-b, another local user, tries it. Without
 * the owner's client certificate it gets no answer (curl, the docker CLI);
 * with a copy of it, it is served. With --tcp-no-auth-insecure it reaches the
 * API (the flag's danger, documented) but NetworkMode host is refused. */
#include "testlib.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char owner[64], other[80], dir[256];

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

/* A shell command as user u (HOME and the XDG dirs of the owner's server). */
static char *as(const char *u, int *code, const char *cmd)
{
    return t_host(code,
                  "runuser -u %s -- env -u REQUESTS_CA_BUNDLE -u CURL_CA_BUNDLE HOME=%s/%s "
                  "XDG_RUNTIME_DIR=%s/%s/run XDG_DATA_HOME=%s/%s/data DOCKER_CONFIG=%s/%s "
                  "sh -c '%s' 2>&1",
                  u, dir, u, dir, u, dir, u, dir, u, cmd);
}

static void setup(void)
{
    t_two_users(owner, other, dir, "users");
    int code;
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s rootfs import %s/%s/bb.tar --name bb:1 -q && %s serve --tls-init %s/%s/tls",
             t_lis_bin(), dir, owner, t_lis_bin(), dir, owner);
    char *out = as(owner, &code, cmd);
    cr_assert_eq(code, 0, "the owner's image and certificates: %s", out);
    free(out);
}

/* The owner's server on 127.0.0.1:port with the extra flags; its pid. */
static pid_t serve(int port, const char *flags)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/%s/run && exec %s serve --socket %s/%s/run/docker.sock --tcp "
             "127.0.0.1:%d %s >%s/%s/serve.log 2>&1",
             dir, owner, t_lis_bin(), dir, owner, port, flags, dir, owner);
    pid_t p = fork();
    cr_assert_geq(p, 0);
    if (p == 0) {
        char full[4096];
        snprintf(full, sizeof full,
                 "exec runuser -u %s -- env HOME=%s/%s XDG_RUNTIME_DIR=%s/%s/run "
                 "XDG_DATA_HOME=%s/%s/data sh -c '%s'",
                 owner, dir, owner, dir, owner, dir, owner, cmd);
        execl("/bin/sh", "sh", "-c", full, (char *)NULL);
        _exit(127);
    }
    char probe[256];
    snprintf(probe, sizeof probe, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' 2>/dev/null", port);
    for (int i = 0; i < 200 && system(probe) != 0; i++)
        usleep(50000);
    return p;
}

/* SIGTERM to lis serve itself (runuser's child: runuser may not pass it on),
 * then runuser is reaped. */
static void unserve(pid_t p)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)p, (int)p);
    FILE *f = fopen(path, "r");
    int child = 0;
    if (f && fscanf(f, "%d", &child) == 1 && child > 0)
        kill(child, SIGTERM);
    if (f)
        fclose(f);
    for (int i = 0; i < 200 && waitpid(p, NULL, WNOHANG) == 0; i++)
        usleep(50000);
    if (waitpid(p, NULL, WNOHANG) == 0) { /* still there after 10 s */
        if (child > 0)
            kill(child, SIGKILL);
        kill(p, SIGKILL);
        waitpid(p, NULL, 0);
    }
}

static void teardown(void)
{
    int code;
    free(t_host(&code, "rm -rf %s", dir));
}

Test(root_serve_users, another_user_needs_the_owners_certificate, .timeout = 180)
{
    setup();
    int port = free_port(), code;
    char flags[512], cmd[2048];
    snprintf(flags, sizeof flags, "--tls-dir %s/%s/tls", dir, owner);
    pid_t srv = serve(port, flags);
    /* the owner itself, with its certificate */
    snprintf(cmd, sizeof cmd,
             "curl -sS --cacert %s/%s/tls/ca.pem --cert %s/%s/tls/cert.pem --key "
             "%s/%s/tls/key.pem https://127.0.0.1:%d/_ping",
             dir, owner, dir, owner, dir, owner, port);
    char *out = as(owner, &code, cmd);
    cr_assert(code == 0 && !strcmp(out, "OK"), "the owner with its certificate: %s", out);
    free(out);
    /* the other user: cannot read the owner's files, has no certificate */
    snprintf(cmd, sizeof cmd, "cat %s/%s/tls/key.pem", dir, owner);
    out = as(other, &code, cmd);
    cr_assert_neq(code, 0, "the other user read the owner's key: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "curl -sS -k https://127.0.0.1:%d/_ping", port);
    out = as(other, &code, cmd);
    cr_assert(code != 0 && !strstr(out, "OK"), "no certificate, yet answered: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "curl -sS http://127.0.0.1:%d/_ping", port);
    out = as(other, &code, cmd);
    cr_assert(code != 0 && !strstr(out, "OK"), "plain HTTP answered: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "DOCKER_HOST=tcp://127.0.0.1:%d docker ps", port);
    out = as(other, &code, cmd);
    cr_assert_neq(code, 0, "the docker CLI without a certificate: %s", out);
    free(out);
    /* a certificate of another CA (the other user's own --tls-init) is no better */
    snprintf(cmd, sizeof cmd,
             "%s serve --tls-init %s/%s/own >/dev/null && curl -sS --cacert %s/%s/tls/ca.pem "
             "--cert %s/%s/own/cert.pem --key %s/%s/own/key.pem https://127.0.0.1:%d/_ping",
             t_lis_bin(), dir, other, dir, owner, dir, other, dir, other, port);
    out = as(other, &code, cmd);
    cr_assert(code != 0 && !strstr(out, "OK"), "another CA's certificate answered: %s", out);
    free(out);
    /* the unix socket stays the owner's (0600) */
    snprintf(cmd, sizeof cmd, "curl -sS --unix-socket %s/%s/run/docker.sock http://x/_ping", dir,
             owner);
    out = as(other, &code, cmd);
    cr_assert(code != 0 && !strstr(out, "OK"), "the other user reached the unix socket: %s", out);
    free(out);
    /* given a copy of the owner's client files (as DOCKER_CERT_PATH), it is served */
    free(t_host(&code,
                "mkdir -p %s/%s/certs && cp %s/%s/tls/ca.pem %s/%s/tls/cert.pem %s/%s/tls/key.pem "
                "%s/%s/certs/ && chown -R %s: %s/%s/certs && chmod 600 %s/%s/certs/*",
                dir, other, dir, owner, dir, owner, dir, owner, dir, other, other, dir, other, dir,
                other));
    cr_assert_eq(code, 0);
    snprintf(cmd, sizeof cmd,
             "DOCKER_HOST=tcp://127.0.0.1:%d DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=%s/%s/certs "
             "docker run --rm --network host bb:1 echo served",
             port, dir, other);
    out = as(other, &code, cmd);
    cr_assert(code == 0 && strstr(out, "served"), "with the owner's certificate: %s", out);
    free(out);
    unserve(srv);
    teardown();
}

Test(root_serve_users, no_auth_tcp_reaches_the_api_but_not_the_hosts_network, .timeout = 180)
{
    setup();
    int port = free_port(), code;
    pid_t srv = serve(port, "--tcp-no-auth-insecure");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cat %s/%s/serve.log", dir, owner);
    char *out = as(owner, &code, cmd);
    cr_assert(strstr(out, "NO AUTHENTICATION"), "the server says so: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "curl -sS http://127.0.0.1:%d/_ping", port);
    out = as(other, &code, cmd);
    cr_assert(code == 0 && !strcmp(out, "OK"), "the flag's danger, as documented: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd,
             "curl -sS -o /dev/null -w %%{http_code} -XPOST -H Content-Type:application/json -d "
             "\"{\\\"Image\\\":\\\"bb:1\\\",\\\"Cmd\\\":[\\\"true\\\"],\\\"HostConfig\\\":{"
             "\\\"NetworkMode\\\":\\\"host\\\"}}\" http://127.0.0.1:%d/v1.41/containers/create",
             port);
    out = as(other, &code, cmd);
    cr_assert(!strcmp(out, "403"), "NetworkMode host over unauthenticated TCP: %s", out);
    free(out);
    unserve(srv);
    teardown();
}
