/* test_serve_api.c - lis serve's native API (/lis/v1/, docs/api.md), driven
 * over the unix socket by Python's http.client (tests/serve/lis_api.py) and by
 * the stdlib client python/lis (tests/serve/lis_client.py), against the Debian
 * fixture imported as an image into a private store. */
#include "testlib.h"

#include "serve/server.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

typedef ts_server server;

static void serve_start(server *s)
{
    if (system("command -v python3 >/dev/null 2>&1") != 0)
        cr_skip_test("no python3");
    const char *extra[] = {"--memory", "512m", NULL};
    ts_start_args(s, extra);
}

static int serve_stop(server *s) { return ts_stop(s); }

Test(serve_api, native_endpoints, .timeout = 240)
{
    server s;
    serve_start(&s);
    int code;
    char *out =
        t_host(&code, "python3 %s/serve/lis_api.py %s lis-test:v1 2>&1", t_src_dir(), s.sock);
    cr_assert(strstr(out, " 0 failed") && code == 0, "native API checks failed:\n%s", out);
    /* the key facts, named, so a check dropped from the script shows here */
    cr_assert(strstr(out,
                     "ok a retried create with the same Idempotency-Key returns the same sandbox"),
              "%s", out);
    cr_assert(strstr(out, "ok exec streams stdout and stderr and ends with the exit code"), "%s",
              out);
    cr_assert(strstr(out, "ok exec: 3 MB of stdout arrive whole"), "%s", out);
    cr_assert(strstr(out, "ok files list"), "%s", out);
    cr_assert(strstr(out, "ok delete ends a running exec's stream with an exit event"), "%s", out);
    cr_assert(strstr(out, "ok paused: the CPU time does not grow (busy loop stopped)"), "%s", out);
    cr_assert(strstr(out, "ok exec into a paused sandbox -> 409 with the runtime's one line"), "%s",
              out);
    cr_assert(strstr(out, "ok resumed: the busy loop runs again"), "%s", out);
    cr_assert(strstr(out, "ok create from the snapshot (tag) sees its files, /tmp and deletions"),
              "%s", out);
    cr_assert(strstr(out, "ok create from the snapshot (id) sees its files, /tmp and deletions"),
              "%s", out);
    cr_assert(strstr(out, "ok fork count 4 -> 201: one snapshot, 4 sandboxes on it"), "%s", out);
    cr_assert(strstr(out, "ok forks are independent: a write in one is seen by no other fork nor "
                          "the parent"),
              "%s", out);
    cr_assert(strstr(out,
                     "ok a retried fork with the same Idempotency-Key returns the same set and "
                     "makes none"),
              "%s", out);
    cr_assert(strstr(out, "ok fork with count 0 -> 400"), "%s", out);
    cr_assert(strstr(out, "ok fork of a missing sandbox -> 404"), "%s", out);
    cr_assert(strstr(out, "ok an untagged fork snapshot is removed with its last sandbox"), "%s",
              out);
    cr_assert(strstr(out, "ok a fork snapshot stays while a fork of its fork runs"), "%s", out);
    cr_assert(strstr(out, "ok a second fork of an unchanged sandbox is on the same snapshot"), "%s",
              out);
    cr_assert(strstr(out, "ok ... which stays while the second fork's sandbox runs"), "%s", out);
    /* a fork was left running on two fork snapshots: the server's exit removes both */
    char a[80] = "", b[80] = "";
    const char *left = strstr(out, "info leftover fork snapshots ");
    cr_assert(left && sscanf(left, "info leftover fork snapshots %79s %79s", a, b) == 2, "%s", out);
    free(out);
    cr_assert_eq(serve_stop(&s), 0);
    const char *digests[] = {a, b};
    for (int i = 0; i < 2; i++) {
        out = t_lis(&code, "rootfs inspect %s 2>&1", digests[i]);
        cr_assert_neq(code, 0, "fork snapshot %s outlived lis serve: %s", digests[i], out);
        free(out);
    }
    out = t_lis(&code, "rootfs inspect api-fork:v1 2>&1"); /* a tagged one stays */
    cr_assert_eq(code, 0, "%s", out);
    free(out);
}

/* The Python client against a running server, then starting one on demand. */
Test(serve_api, python_client, .timeout = 240)
{
    server s;
    serve_start(&s);
    int code;
    /* the package imported from the checkout (test.sh copies python/ to src-tests/python) */
    char *out = t_host(&code,
                       "PYTHONPATH=%s/python LIS_SOCKET=%s LIS_BIN=%s XDG_DATA_HOME=%s/data "
                       "XDG_RUNTIME_DIR=%s/run python3 %s/serve/lis_client.py -v 2>&1",
                       t_src_dir(), s.sock, t_lis_bin(), t_tmpdir(), t_tmpdir(), t_src_dir());
    cr_assert(code == 0 && strstr(out, "\nOK"), "python client tests failed:\n%s", out);
    /* every test ran: one dropped from the script shows here */
    cr_assert(strstr(out, "Ran 7 tests"), "%s", out);
    cr_assert(strstr(out, "info auto-started server exited"), "%s", out);
    free(out);
    cr_assert_eq(serve_stop(&s), 0);
}
