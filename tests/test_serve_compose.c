/* test_serve_compose.c - what Docker's own clients rely on beyond one container
 * (issue 33): every list filter dockerd accepts honoured or refused with its
 * words (tests/serve/filters.py: the docker CLI and docker-py; its
 * expectations are dockerd 20.10's answers, and it runs against a dockerd too
 * when LIS_TEST_DOCKERD names a socket this user may use), and Debian's
 * docker-compose 1.29 (tests/serve/compose.py): another project's
 * `down --remove-orphans` beside a bystander, and a default compose file whose
 * client reaches its server by service name and alias on the project network,
 * rootless, with nothing left after `down`. */
#include "testlib.h"

#include "serve/server.h"

#include <string.h>

static char *script(int *code, const char *fmt, const char *sock, pid_t pid, const char *arg)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, t_src_dir());
    return t_host(code, "cd %s && %s %s %d lis-test:v1 %s 2>&1", t_tmpdir(), cmd, sock, (int)pid,
                  arg);
}

static void need(const char *cmd)
{
    if (!ts_have(cmd) || !ts_have_docker_py())
        cr_skip_test("%s or python3-docker is missing (scripts/deps.sh --test)", cmd);
}

Test(serve_compose, list_filters_as_dockerd, .timeout = 300)
{
    need("docker");
    ts_server s;
    ts_start(&s, NULL);
    int code;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 %s/serve/filters.py %s lis-test:v1 2>&1", t_src_dir(),
             s.sock);
    char *out = t_host(&code, "%s", cmd);
    cr_assert(strstr(out, " 0 failed") && code == 0, "filters:\n%s", out);
    cr_assert(strstr(out, "ok ps -a --filter label=app=zzz -> []"), "%s", out);
    cr_assert(strstr(out, "ok docker ps -a --filter bogus=1 refused: Invalid filter 'bogus'"), "%s",
              out);
    cr_assert(strstr(out, "ok images --filter dangling=true -> not listed"), "%s", out);
    cr_assert(strstr(out, "ok docker network ls --filter bogus=1 refused"), "%s", out);
    free(out);
    const char *d = getenv("LIS_TEST_DOCKERD");
    if (d && access(d, W_OK) == 0) { /* the expectations are dockerd's: hold them to it */
        out = t_host(&code, "python3 %s/serve/filters.py %s lis-test:v1 2>&1", t_src_dir(), d);
        cr_assert(strstr(out, " 0 failed") && code == 0, "against dockerd %s:\n%s", d, out);
        free(out);
    } else {
        printf("note: LIS_TEST_DOCKERD unset or not usable: the dockerd half is skipped\n");
    }
    cr_assert_eq(ts_stop(&s), 0);
}

/* compose.py MODE against a fresh server; each of facts must be in its output. */
static void compose_case(const char *mode, const char *const *facts)
{
    need("docker-compose");
    ts_server s;
    ts_start(&s, NULL);
    int code;
    char *out = script(&code, "python3 %s/serve/compose.py", s.sock, s.pid, mode);
    printf("%s", out); /* what it measured ("info" lines) */
    cr_assert(strstr(out, " 0 failed") && code == 0, "compose %s:\n%s", mode, out);
    for (size_t i = 0; facts[i]; i++) /* named, so a check dropped from the script shows */
        cr_assert(strstr(out, facts[i]), "%s missing:\n%s", facts[i], out);
    free(out);
    cr_assert_eq(ts_stop(&s), 0);
}

Test(serve_compose, remove_orphans_spares_a_bystander, .timeout = 300)
{
    const char *facts[] = {"ok the bystander and the project survive", NULL};
    compose_case("bystander", facts);
}

Test(serve_compose, project_network_by_service_name, .timeout = 300)
{
    const char *facts[] = {"ok the client reaches the server by its service name",
                           "ok the client reaches the server by its alias",
                           "ok a container off the network reaches neither",
                           "ok down removed the project network", NULL};
    compose_case("network", facts);
}
