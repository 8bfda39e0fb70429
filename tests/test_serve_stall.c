/* test_serve_stall.c - no client of `lis serve` stalls another (issue 33):
 * a tty container that prints then waits, containers that print without
 * end, an attached `docker exec -t` and `docker run -t`, a client that reads
 * nothing of its stream and clients that leave in mid-stream; in each state
 * `docker ps` from another client answers (a 5 s bound means "hung", the
 * figure is printed) and SIGTERM ends the server (tests/serve/stall.py). */
#include "testlib.h"

#include "serve/server.h"

#include <string.h>

static void stall_case(const char *name)
{
    if (!ts_have("docker") || !ts_have("python3"))
        cr_skip_test("the docker CLI (docker.io) or python3 is missing (scripts/deps.sh)");
    ts_server s;
    ts_start(&s, NULL);
    int code;
    char *out = t_host(&code, "python3 %s/serve/stall.py %s %d lis-test:v1 %s 2>&1", t_src_dir(),
                       s.sock, (int)s.pid, name);
    printf("%s", out); /* the latencies measured ("info" lines) */
    int st = ts_stop(&s);
    cr_assert(strstr(out, " 0 failed") && code == 0, "%s:\n%s", name, out);
    cr_assert(strstr(out, "ok docker ps answers while"), "%s", out);
    cr_assert(strstr(out, "ok SIGTERM ends the server while"), "%s", out);
    free(out);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "lis serve's exit: %d", st);
}

Test(serve_stall, tty_container_prints_then_waits, .timeout = 120) { stall_case("tty_prints"); }
Test(serve_stall, containers_print_without_end, .timeout = 120) { stall_case("tty_never_stops"); }
Test(serve_stall, docker_exec_t_attached, .timeout = 120) { stall_case("exec_tty_attached"); }
Test(serve_stall, docker_run_t_attached, .timeout = 120) { stall_case("run_tty_attached"); }
Test(serve_stall, client_never_reads, .timeout = 120) { stall_case("never_reads"); }
Test(serve_stall, clients_leave_mid_stream, .timeout = 120) { stall_case("disconnects"); }
