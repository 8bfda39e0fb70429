/* root_batch_live.c - as root (scripts/test.sh runs root_* as root), two
 * ordinary users: $LIS_TEST_USER runs `lis batch --live`, $LIS_TEST_USER-b,
 * another local user, tries the live view: with or without the token it gets
 * 403 (the view is its owner's alone; the owner without it 401), and its half-open
 * connections do not keep the owner out (connections are limited per client). */
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

/* A shell command as user u, with its own HOME and XDG dirs. */
static char *as(const char *u, int *code, const char *cmd)
{
    return t_host(code,
                  "runuser -u %s -- env HOME=%s/%s XDG_RUNTIME_DIR=%s/%s/run "
                  "XDG_DATA_HOME=%s/%s/data sh -c '%s' 2>&1",
                  u, dir, u, dir, u, dir, u, cmd);
}

/* The child of runuser (lis itself): runuser may not pass a signal on. */
static void stop_child(pid_t p, int sig)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)p, (int)p);
    FILE *f = fopen(path, "r");
    int child = 0;
    if (f && fscanf(f, "%d", &child) == 1 && child > 0)
        kill(child, sig);
    if (f)
        fclose(f);
    for (int i = 0; i < 400 && waitpid(p, NULL, WNOHANG) == 0; i++)
        usleep(50000);
    if (waitpid(p, NULL, WNOHANG) == 0) {
        if (child > 0)
            kill(child, SIGKILL);
        kill(p, SIGKILL);
        waitpid(p, NULL, 0);
    }
}

Test(root_batch_live, the_live_view_is_the_owners_alone, .timeout = 240)
{
    t_two_users(owner, other, dir, "live");
    int code;
    /* an endpoint that takes the request and never answers: the run stays up */
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    cr_assert(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 16) == 0 &&
              getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
    char cmd[4096];
    char *out = t_host(&code,
                       "echo '{\"id\":\"a\",\"problem_statement\":\"x\",\"ground_truth\":\"y\"}' "
                       ">%s/%s/tasks.jsonl && chown %s: %s/%s/tasks.jsonl",
                       dir, owner, owner, dir, owner);
    cr_assert_eq(code, 0, "the tasks: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd,
             "exec runuser -u %s -- env HOME=%s/%s XDG_RUNTIME_DIR=%s/%s/run "
             "XDG_DATA_HOME=%s/%s/data %s batch --llm-name fake --llm-base-url "
             "http://127.0.0.1:%d/v1 --api-key k --rootfs %s --tasks %s/%s/tasks.jsonl "
             "--scorer builtin:match --live --output-dir %s/%s/out >%s/%s/log 2>&1",
             owner, dir, owner, dir, owner, dir, owner, t_lis_bin(), ntohs(a.sin_port), t_busybox(),
             dir, owner, dir, owner, dir, owner);
    pid_t run = t_spawn_sh(cmd);
    char *url = NULL;
    for (int i = 0; i < 600; i++) {
        url = t_host(NULL,
                     "grep -o 'http://127.0.0.1:[0-9]*/?token=[0-9a-f]*' %s/%s/log 2>/dev/null | "
                     "head -1 | tr -d '\\n'",
                     dir, owner);
        if (url[0] || waitpid(run, NULL, WNOHANG) == run)
            break;
        free(url);
        url = NULL;
        usleep(100000);
    }
    cr_assert(url && url[0], "no live view URL: %s", t_host(NULL, "cat %s/%s/log", dir, owner));
    char base[64];
    snprintf(base, sizeof base, "%.*s", (int)(strchr(url, '?') - url), url);
    int port = atoi(strrchr(base, ':') + 1);

    /* the owner with the token is served */
    snprintf(cmd, sizeof cmd, "curl -s -o /dev/null -w %%{http_code} --max-time 10 \"%s\"", url);
    out = as(owner, &code, cmd);
    cr_expect_str_eq(out, "200", "the owner with the token: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "curl -s -o /dev/null -w %%{http_code} --max-time 10 %slive.json",
             base);
    out = as(other, &code, cmd);
    cr_expect_str_eq(out, "403", "the other user without the token: %s", out);
    free(out);
    /* the other user with a copy of the token: not its owner */
    snprintf(cmd, sizeof cmd, "curl -s -o /dev/null -w %%{http_code} --max-time 10 \"%s\"", url);
    out = as(other, &code, cmd);
    cr_expect_str_eq(out, "403", "the other user with the token: %s", out);
    free(out);
    /* 40 half-open connections of the other user; the owner still gets in */
    snprintf(cmd, sizeof cmd,
             "exec runuser -u %s -- python3 -c \"import socket,time\n"
             "ss=[]\n"
             "for i in range(40):\n"
             "  try:\n"
             "    s=socket.create_connection(('127.0.0.1',%d)); s.send(b'GET / HTTP/1.1\\r\\n'); "
             "ss.append(s)\n"
             "  except OSError: pass\n"
             "open('%s/%s/held','w').close()\n"
             "time.sleep(60)\" >/dev/null 2>&1",
             other, port, dir, other);
    pid_t hold = t_spawn_sh(cmd);
    char held[400];
    snprintf(held, sizeof held, "%s/%s/held", dir, other);
    for (int i = 0; i < 200 && access(held, F_OK) != 0; i++)
        usleep(50000);
    cr_expect_eq(access(held, F_OK), 0, "the other user's connections were not made");
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd,
                 "curl -s -o /dev/null -w %%{http_code} --max-time 10 \"%slive.json?%s\"", base,
                 strchr(url, '?') + 1);
        out = as(owner, &code, cmd);
        cr_expect_str_eq(out, "200", "the owner while another user holds half-open connections: %s",
                         out);
        free(out);
    }
    stop_child(hold, SIGKILL);
    free(url);
    stop_child(run, SIGTERM);
    close(lfd);
    free(t_host(&code, "rm -rf %s", dir));
}
