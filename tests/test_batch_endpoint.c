/* test_batch_endpoint.c - a wrong endpoint named at once (issue 32): a web
 * page where the API was expected (200, 404, 501) is "not an
 * OpenAI-compatible endpoint" after one request, and a URL without a scheme
 * gets "did you mean http://...?", through lis run and lis batch. */
#include "testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* every test gets a fresh private run and data dir (t_tmpdir) */
static void setup(void) { lis_ctx_free(t_ctx()); }
TestSuite(batch_endpoint, .init = setup);

#define LIS_BATCH "batch --llm-name fake --llm-base-url %s --api-key k --rootfs %s --net none "

/* A server on 127.0.0.1 that answers every request with STATUS and an HTML
 * page (a web server where the API was expected); its port. */
static int html_server(pid_t *pid, int status, const char *dir)
{
    char py[600], portf[600];
    snprintf(py, sizeof py, "%s/webpage_server.py", dir);
    snprintf(portf, sizeof portf, "%s/html.port", dir);
    FILE *f = fopen(py, "w");
    cr_assert(f);
    fprintf(f,
            "import http.server, sys\n"
            "class H(http.server.BaseHTTPRequestHandler):\n"
            "    def answer(self):\n"
            "        n = int(self.headers.get('Content-Length') or 0)\n"
            "        self.rfile.read(n)\n"
            "        b = b'<!DOCTYPE HTML>\\n<html><body>It works</body></html>\\n'\n"
            "        self.send_response(%d)\n"
            "        self.send_header('Content-Type', 'text/html')\n"
            "        self.send_header('Content-Length', str(len(b)))\n"
            "        self.end_headers()\n"
            "        self.wfile.write(b)\n"
            "        open(sys.argv[1] + '.n', 'a').write('x')\n"
            "    do_GET = do_POST = answer\n"
            "    def log_message(self, *a): pass\n"
            "s = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
            "open(sys.argv[1] + '.tmp', 'w').write(str(s.server_port))\n"
            "import os; os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
            "s.serve_forever()\n",
            status);
    fclose(f);
    unlink(portf);
    *pid = fork();
    cr_assert_geq(*pid, 0);
    if (*pid == 0) {
        char errf[700];
        snprintf(errf, sizeof errf, "%s.err", portf);
        freopen(errf, "w", stderr);
        execl("/usr/bin/python3", "python3", py, portf, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200 && access(portf, F_OK) != 0; i++)
        usleep(50000);
    char *p = t_host(NULL, "cat %s", portf);
    int port = atoi(p);
    free(p);
    cr_assert_gt(port, 0, "the HTML server did not start: %s", t_host(NULL, "cat %s.err", portf));
    return port;
}

/* A URL that answers with a web page, 200 or 404/405/501: named at once as
 * not an OpenAI-compatible endpoint, one request, no retry; lis batch stops
 * the run. A URL without a scheme: "did you mean http://...?", not a
 * missing API key. */
Test(batch_endpoint, a_web_page_is_not_an_api_and_no_scheme_is_named, .timeout = 120)
{
    char *d = t_fresh_dir("batch", "notapi");
    int statuses[] = {200, 404, 501};
    for (size_t i = 0; i < 3; i++) {
        pid_t srv;
        int port = html_server(&srv, statuses[i], d);
        int code = 0;
        char *out = t_lis(&code,
                          "run --llm-name fake --llm-base-url http://127.0.0.1:%d/v1 --api-key k "
                          "--rootfs %s --net none --query q --output-dir %s/run%zu",
                          port, t_busybox(), d, i);
        char want[200];
        snprintf(want, sizeof want,
                 "not an OpenAI-compatible endpoint at http://127.0.0.1:%d/v1/chat/completions "
                 "(HTTP %d, text/html: <!DOCTYPE HTML> <html>",
                 port, statuses[i]);
        cr_expect_neq(code, 0, "%s", out);
        cr_expect(strstr(out, want), "HTTP %d: %s", statuses[i], out);
        cr_expect_null(strstr(out, "retry"), "it retried: %s", out);
        char *n = t_host(NULL, "cat %s/html.port.n", d);
        cr_expect_str_eq(n, "x", "HTTP %d: more than one request", statuses[i]);
        free(n);
        free(out);
        if (statuses[i] == 200) { /* lis batch: the run stops at once, saying why */
            char tasks[600];
            snprintf(tasks, sizeof tasks, "%s/t.jsonl", d);
            t_write_file(tasks, "{\"id\":1,\"problem_statement\":\"a\",\"ground_truth\":\"x\"}\n"
                                "{\"id\":2,\"problem_statement\":\"b\",\"ground_truth\":\"x\"}\n");
            char url[100];
            snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port);
            out = t_lis(&code, LIS_BATCH "--tasks %s --scorer builtin:match --output-dir %s/out",
                        url, t_busybox(), tasks, d);
            cr_expect_neq(code, 0, "%s", out);
            cr_expect(strstr(out, "not an OpenAI-compatible endpoint"), "%s", out);
            n = t_host(NULL, "cat %s/html.port.n", d);
            cr_expect_str_eq(n, "xx", "lis batch asked more than once");
            free(n);
            free(out);
        }
        kill(srv, SIGTERM);
        waitpid(srv, NULL, 0);
        free(t_host(NULL, "rm -f %s/html.port.n", d));
    }
    int code = 0;
    char *out = t_host(&code,
                       "env -u OPENAI_API_KEY -u LLM_API_KEY -u ANTHROPIC_API_KEY HOME=%s "
                       "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data %s run --llm-name fake "
                       "--llm-base-url localhost:8000/v1 --rootfs %s --net none --query q 2>&1",
                       t_tmpdir(), t_tmpdir(), t_tmpdir(), t_lis_bin(), t_busybox());
    cr_expect_eq(code, 2, "%s", out);
    cr_expect(strstr(out, "did you mean http://localhost:8000/v1?"), "%s", out);
    cr_expect_null(strstr(out, "API key"), "%s", out);
    free(out);
}
