/* test_net.c - network modes and the --net proxy egress proxy.
 * All traffic goes to an HTTP server the test starts on 127.0.0.1
 * (tests/net-data/serve.py), reached with allow_host_network. */
#include "lis_net.h"
#include "testlib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t server_pid;
static int server_port;
static char server_dir[512];

/* Starts serve.py on 127.0.0.1 in a fresh directory; sets server_port. */
static void start_server(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(server_dir, sizeof server_dir, "%s/lis-www-XXXXXX", base ? base : "/tmp");
    cr_assert(mkdtemp(server_dir));
    char script[600];
    snprintf(script, sizeof script, "%s/net-data/serve.py", t_src_dir());
    int pp[2];
    cr_assert_eq(pipe(pp), 0);
    server_pid = fork();
    cr_assert(server_pid >= 0);
    if (server_pid == 0) {
        /* dies with this test's process, whatever ends it, and holds no
         * pipe of the runner's: a leaked server must not hang `make test` */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        dup2(pp[1], 1);
        close(pp[0]);
        close(pp[1]);
        execl("/usr/bin/python3", "python3", script, server_dir, (char *)NULL);
        _exit(127);
    }
    close(pp[1]);
    char buf[32] = "";
    size_t got = 0;
    while (got < sizeof buf - 1 && !strchr(buf, '\n')) {
        struct pollfd p = {.fd = pp[0], .events = POLLIN};
        ssize_t n = poll(&p, 1, 20000) > 0 ? read(pp[0], buf + got, sizeof buf - 1 - got) : -1;
        cr_assert(n > 0, "serve.py did not start");
        got += (size_t)n;
        buf[got] = 0;
    }
    close(pp[0]);
    server_port = atoi(buf);
    cr_assert(server_port > 0);
}

static void stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", server_dir);
        free(t_host(NULL, "%s", cmd));
    }
}

static lis_sandbox *net_sandbox(lis_ctx *ctx, const char *rootfs, lis_net_mode net, int allow_host,
                                const char *const *allow, const char *const *deny)
{
    lis_sandbox_spec spec = {.rootfs = rootfs, .upper = LIS_UPPER_TMPFS, .net = net};
    lis_net_rules rules = {.allow_host_network = allow_host,
                           .allow_domains = allow,
                           .deny_domains = deny};
    lis_sandbox *sb = NULL;
    lis_error err = {0};
    cr_assert_eq(lis_net_sandbox_create(ctx, &spec, &rules, &sb, &err), 0, "create: %s", err.msg);
    return sb;
}

static void sh(lis_sandbox *sb, lis_result *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void sh(lis_sandbox *sb, lis_result *r, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    t_sh(sb, cmd, r);
}

/* A raw request to the proxy from inside the sandbox (busybox nc). */
static void raw(lis_sandbox *sb, lis_result *r, const char *request)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "printf '%s' | nc 127.0.0.1 3128", request);
    t_sh(sb, cmd, r);
}

TestSuite(net, .fini = stop_server, .timeout = 180);

Test(net, busybox_wget_through_proxy_with_env_and_accounting)
{
    start_server();
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 1, NULL, NULL);
    lis_error merr = {0};
    cr_assert_eq(lis_net_manual(ctx, &merr), -1, "the context's proxy thread runs already");
    cr_assert_eq(merr.code, EBUSY, "%s", merr.msg);
    lis_result r;
    t_sh(sb, "echo $http_proxy $https_proxy $HTTP_PROXY $HTTPS_PROXY; echo $no_proxy", &r);
    cr_assert_str_eq(r.out.data, "http://127.0.0.1:3128 http://127.0.0.1:3128 "
                                 "http://127.0.0.1:3128 http://127.0.0.1:3128\n"
                                 "localhost,127.0.0.1,::1\n");
    lis_result_free(&r);
    /* the traffic of one command: the counters' difference around it */
    lis_net_counters n0, n1;
    lis_net_sandbox_counters(sb, &n0);
    sh(sb, &r, "wget -q -O - http://127.0.0.1:%d/hello.txt", server_port);
    lis_net_sandbox_counters(sb, &n1);
    cr_assert_eq(r.exit_code, 0, "wget: %s", r.err.data);
    cr_assert_str_eq(r.out.data, "hello through the lis proxy\n");
    cr_assert_eq(n1.requests - n0.requests, 1);
    cr_assert_gt(n1.bytes_in - n0.bytes_in, 28);
    cr_assert_gt(n1.bytes_out - n0.bytes_out, 20);
    lis_result_free(&r);
    /* 1 MiB, checked end to end */
    lis_net_sandbox_counters(sb, &n0);
    sh(sb, &r, "wget -q -O /tmp/one.bin http://127.0.0.1:%d/one.bin && wc -c < /tmp/one.bin",
       server_port);
    lis_net_sandbox_counters(sb, &n1);
    cr_assert_eq(r.exit_code, 0, "wget: %s", r.err.data);
    cr_assert_str_eq(r.out.data, "1048576\n");
    cr_assert_gt(n1.bytes_in - n0.bytes_in, 1048576);
    lis_result_free(&r);
    int code;
    char *want = t_host(&code, "md5sum < %s/one.bin", server_dir);
    char *md5 = NULL;
    sh(sb, &r, "md5sum < /tmp/one.bin");
    md5 = r.out.data;
    cr_assert_str_eq(md5, want);
    free(want);
    lis_result_free(&r);
    lis_stats st;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
    cr_assert_eq(st.net, LIS_NET_PROXY);
    lis_net_counters nc;
    lis_net_sandbox_counters(sb, &nc);
    cr_assert_eq(nc.requests, 2);
    cr_assert_eq(nc.denied, 0);
    cr_assert_gt(nc.bytes_in, 1048576);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(net, denied_domain_gets_403_naming_the_rule)
{
    lis_ctx *ctx = t_ctx();
    const char *deny[] = {"*.example.com", NULL};
    lis_sandbox *sb = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 0, NULL, deny);
    lis_result r;
    t_sh(sb, "wget -q -O - http://www.example.com/ 2>&1; echo rc=$?", &r);
    cr_assert(strstr(r.out.data, "403"), "%s", r.out.data);
    cr_assert(strstr(r.out.data, "rc=1"), "%s", r.out.data);
    lis_result_free(&r);
    raw(sb, &r, "GET http://WWW.Example.COM./x HTTP/1.1\\r\\nHost: a\\r\\n\\r\\n");
    cr_assert(strstr(r.out.data, "HTTP/1.1 403 Forbidden"), "%s", r.out.data);
    cr_assert(strstr(r.out.data, "www.example.com is denied by --deny-domain '*.example.com'"),
              "%s", r.out.data);
    lis_result_free(&r);
    raw(sb, &r, "CONNECT api.example.com:443 HTTP/1.1\\r\\nHost: api.example.com:443\\r\\n\\r\\n");
    cr_assert(strstr(r.out.data, "403 Forbidden"), "%s", r.out.data);
    cr_assert(strstr(r.out.data, "--deny-domain"), "%s", r.out.data);
    lis_result_free(&r);
    lis_stats st;
    lis_error err = {0};
    lis_sandbox_stats(sb, &st, &err);
    lis_net_counters nc;
    lis_net_sandbox_counters(sb, &nc);
    cr_assert_eq(nc.denied, 3);
    lis_sandbox_destroy(sb, &err);

    /* an allow list refuses everything else, before any resolution */
    const char *allow[] = {"pypi.org", "*.pythonhosted.org", NULL};
    sb = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 0, allow, NULL);
    raw(sb, &r, "GET http://evil.test/ HTTP/1.1\\r\\n\\r\\n");
    cr_assert(strstr(r.out.data, "403 Forbidden"), "%s", r.out.data);
    cr_assert(strstr(r.out.data, "evil.test matches no --allow-domain pattern"), "%s", r.out.data);
    lis_result_free(&r);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(net, private_and_loopback_refused_without_opt_in)
{
    start_server();
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 0, NULL, NULL);
    lis_result r;
    char req[256];
    snprintf(req, sizeof req, "GET http://127.0.0.1:%d/hello.txt HTTP/1.1\\r\\n\\r\\n",
             server_port);
    raw(sb, &r, req);
    cr_assert(strstr(r.out.data, "403 Forbidden"), "%s", r.out.data);
    cr_assert(strstr(r.out.data, "destination 127.0.0.1 is in a loopback (127.0.0.0/8) range"),
              "%s", r.out.data);
    cr_assert(strstr(r.out.data, "--allow-host-network"), "%s", r.out.data);
    cr_assert_null(strstr(r.out.data, "hello through"));
    lis_result_free(&r);
    /* a name resolved on the host (resolver threads) is checked after resolution */
    snprintf(req, sizeof req, "GET http://localhost:%d/hello.txt HTTP/1.1\\r\\n\\r\\n",
             server_port);
    raw(sb, &r, req);
    cr_assert(strstr(r.out.data, "403 Forbidden"), "%s", r.out.data);
    cr_assert(strstr(r.out.data, "loopback"), "%s", r.out.data);
    lis_result_free(&r);
    static const char *const refused[][2] = {
        {"10.1.2.3", "private (10.0.0.0/8)"},
        {"172.20.0.1", "private (172.16.0.0/12)"},
        {"192.168.1.1", "private (192.168.0.0/16)"},
        {"169.254.169.254", "link-local (169.254.0.0/16)"},
        {"0.0.0.0", "this-network"},
        {"[::1]", "loopback (::1)"},
        {"[::ffff:127.0.0.1]", "loopback (127.0.0.0/8)"},
        {"[fd00::1]", "unique local (fc00::/7)"},
        {"[fe80::1]", "link-local (fe80::/10)"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(req, sizeof req, "CONNECT %s:443 HTTP/1.1\\r\\n\\r\\n", refused[i][0]);
        raw(sb, &r, req);
        cr_assert(strstr(r.out.data, "403 Forbidden"), "%s: %s", refused[i][0], r.out.data);
        cr_assert(strstr(r.out.data, refused[i][1]), "%s: %s", refused[i][0], r.out.data);
        lis_result_free(&r);
    }
    lis_error err = {0};
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(net, malformed_requests_get_400)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 0, NULL, NULL);
    static const char *const bad[] = {
        "GARBAGE\\r\\n\\r\\n",
        "GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n", /* not a proxy request */
        "GET http://a.test/ HTTP/2.0\\r\\n\\r\\n",
        "CONNECT a.test HTTP/1.1\\r\\n\\r\\n", /* no port */
        "CONNECT a.test:99999 HTTP/1.1\\r\\n\\r\\n",
        "GET http://u:p@a.test/ HTTP/1.1\\r\\n\\r\\n",
        "GET http://a.test/ HTTP/1.1\\r\\n folded\\r\\n\\r\\n",
        "GET http://a.test/ HTTP/1.1\\nHost: x\\r\\n\\r\\n", /* bare LF */
        "GET https://a.test/ HTTP/1.1\\r\\n\\r\\n",
    };
    lis_result r;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        raw(sb, &r, bad[i]);
        cr_assert(strstr(r.out.data, "HTTP/1.1 400 Bad Request"), "%s: %s", bad[i], r.out.data);
        lis_result_free(&r);
    }
    /* an oversized head */
    t_sh(sb,
         "(printf 'GET http://a.test/ HTTP/1.1\\r\\n'; i=0; while [ $i -lt 700 ]; do "
         "printf 'X-Pad-%04d: %060d\\r\\n' $i 0; i=$((i+1)); done; printf '\\r\\n') | "
         "nc 127.0.0.1 3128 | head -1",
         &r);
    cr_assert(strstr(r.out.data, "431"), "%s", r.out.data);
    lis_result_free(&r);
    lis_error err = {0};
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

/* Issue 10: "http://127.0.0.1:P:P/" handed "127.0.0.1:P" to the resolver
 * (a 502 after a lookup). Even with every destination allowed, malformed
 * authorities now get a 400 and nothing is looked up or connected to. */
Test(net, malformed_authorities_get_400_before_any_lookup)
{
    start_server();
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 1, NULL, NULL);
    int p = server_port;
    char bad[8][200];
    snprintf(bad[0], sizeof bad[0], "GET http://127.0.0.1:%d:%d/hello.txt HTTP/1.1\\r\\n\\r\\n", p,
             p);
    snprintf(bad[1], sizeof bad[1], "CONNECT 127.0.0.1:%d:%d HTTP/1.1\\r\\n\\r\\n", p, p);
    snprintf(bad[2], sizeof bad[2], "GET http://localhost:%d:/hello.txt HTTP/1.1\\r\\n\\r\\n", p);
    snprintf(bad[3], sizeof bad[3], "GET http://[::1:%d/hello.txt HTTP/1.1\\r\\n\\r\\n", p);
    snprintf(bad[4], sizeof bad[4], "GET http://127.0.0.256:%d/hello.txt HTTP/1.1\\r\\n\\r\\n", p);
    snprintf(bad[5], sizeof bad[5], "GET http://a..test:%d/ HTTP/1.1\\r\\n\\r\\n", p);
    snprintf(bad[6], sizeof bad[6], "CONNECT [fe80::1%%%%eth0]:%d HTTP/1.1\\r\\n\\r\\n", p);
    /* well formed, but a zone the host does not have: never to the resolver */
    snprintf(bad[7], sizeof bad[7], "GET http://[fe80::1%%%%25nosuchif9]:%d/ HTTP/1.1\\r\\n\\r\\n",
             p);
    lis_result r;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        raw(sb, &r, bad[i]);
        cr_assert(strstr(r.out.data, "HTTP/1.1 400 Bad Request"), "%s: %s", bad[i], r.out.data);
        cr_assert_null(strstr(r.out.data, "hello through"), "%s", bad[i]);
        cr_assert_null(strstr(r.out.data, "resolve"), "%s: %s", bad[i], r.out.data);
        lis_result_free(&r);
    }
    raw(sb, &r, bad[0]);
    cr_assert(strstr(r.out.data, "malformed host in the URL: malformed port"), "%s", r.out.data);
    lis_result_free(&r);
    raw(sb, &r, bad[7]);
    cr_assert(strstr(r.out.data, "cannot use the address fe80::1%nosuchif9"), "%s", r.out.data);
    lis_result_free(&r);
    /* the same server, asked properly, answers */
    char good[200];
    snprintf(good, sizeof good, "GET http://127.0.0.1:%d/hello.txt HTTP/1.0\\r\\n\\r\\n", p);
    raw(sb, &r, good);
    cr_assert(strstr(r.out.data, "hello through the lis proxy"), "%s", r.out.data);
    lis_result_free(&r);
    lis_stats st;
    lis_error err = {0};
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
    lis_net_counters nc;
    lis_net_sandbox_counters(sb, &nc);
    cr_assert_eq(nc.requests, 11);
    cr_assert_eq(nc.denied, 0);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

/* 2130706433, 0x7f.1 and 017700000001 are 127.0.0.1: the address rule and
 * the domain rules see them as that. */
Test(net, numeric_ipv4_forms_meet_the_address_and_domain_rules)
{
    start_server();
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 0, NULL, NULL);
    static const char *const forms[] = {"2130706433", "0x7f.1", "017700000001", "127.1"};
    lis_result r;
    char req[256];
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        snprintf(req, sizeof req, "GET http://%s:%d/hello.txt HTTP/1.0\\r\\n\\r\\n", forms[i],
                 server_port);
        raw(sb, &r, req);
        cr_assert(strstr(r.out.data, "403 Forbidden"), "%s: %s", forms[i], r.out.data);
        cr_assert(strstr(r.out.data, "request to 127.0.0.1 refused: destination 127.0.0.1 is "
                                     "in a loopback (127.0.0.0/8) range"),
                  "%s: %s", forms[i], r.out.data);
        lis_result_free(&r);
    }
    lis_error err = {0};
    lis_sandbox_destroy(sb, &err);
    /* allowed to the host, but 127.0.0.1 denied by name */
    const char *deny[] = {"127.0.0.1", NULL};
    sb = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 1, NULL, deny);
    snprintf(req, sizeof req, "GET http://0x7f.1:%d/hello.txt HTTP/1.0\\r\\n\\r\\n", server_port);
    raw(sb, &r, req);
    cr_assert(strstr(r.out.data, "127.0.0.1 is denied by --deny-domain '127.0.0.1'"), "%s",
              r.out.data);
    lis_result_free(&r);
    lis_sandbox_destroy(sb, &err);
    /* and with nothing in the way, the numeric form reaches 127.0.0.1 */
    sb = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 1, NULL, NULL);
    snprintf(req, sizeof req, "GET http://2130706433:%d/hello.txt HTTP/1.0\\r\\n\\r\\n",
             server_port);
    raw(sb, &r, req);
    cr_assert(strstr(r.out.data, "hello through the lis proxy"), "%s", r.out.data);
    lis_result_free(&r);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(net, none_reaches_nothing)
{
    start_server();
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = net_sandbox(ctx, t_busybox(), LIS_NET_NONE, 0, NULL, NULL);
    lis_result r;
    /* (busybox wget crashes on a refused connection, so nc) */
    sh(sb, &r,
       "echo proxy=$http_proxy; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ';"
       "printf 'GET /hello.txt HTTP/1.0\\r\\n\\r\\n' | nc -w 2 127.0.0.1 %d; echo rc=$?;"
       "printf 'GET http://127.0.0.1:%d/hello.txt HTTP/1.0\\r\\n\\r\\n' | "
       "nc -w 2 127.0.0.1 3128; echo nc=$?",
       server_port, server_port);
    cr_assert(strstr(r.out.data, "proxy=\nlo\nrc=1\nnc=1\n"), "%s", r.out.data);
    lis_result_free(&r);
    lis_error err = {0};
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

/* The runtime's hook under net/: a listener inside the sandbox's own network
 * namespace, handed to the caller, which accepts the sandbox's connections
 * from outside; nothing else (no proxy, no http_proxy) comes with it. */
Test(net, runtime_listener_hook_without_the_proxy)
{
    lis_ctx *ctx = t_ctx();
    lis_error err = {0};
    lis_sandbox *sb = NULL;
    lis_sandbox_spec spec = {.rootfs = t_busybox(),
                             .upper = LIS_UPPER_TMPFS,
                             .net = LIS_NET_NONE,
                             .listen_port = 8088};
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "%s", err.msg);
    int lfd = lis_sandbox_take_listener(sb);
    cr_assert_geq(lfd, 0);
    cr_assert_eq(lis_sandbox_take_listener(sb), -1, "the listener is taken once");
    lis_exec_spec ex = {.shell = "echo proxy=$http_proxy; echo hi | nc -w 5 127.0.0.1 8088; "
                                 "echo rc=$?",
                        .out = LIS_STDIO_CAPTURE,
                        .err = LIS_STDIO_CAPTURE,
                        .timeout = 30};
    lis_proc *p;
    cr_assert_eq(lis_exec_start(sb, &ex, &p, &err), 0, "%s", err.msg);
    struct pollfd pf = {lfd, POLLIN, 0};
    cr_assert_eq(poll(&pf, 1, 20000), 1, "no connection from inside the sandbox");
    int c = accept(lfd, NULL, NULL);
    cr_assert_geq(c, 0, "accept: %s", strerror(errno));
    char buf[16] = {0};
    struct pollfd cf = {c, POLLIN, 0};
    cr_assert_eq(poll(&cf, 1, 20000), 1);
    cr_assert_eq(read(c, buf, sizeof buf - 1), 3);
    cr_assert_str_eq(buf, "hi\n");
    close(c);
    lis_result r;
    cr_assert_eq(lis_proc_wait(p, &r, &err), 0, "%s", err.msg);
    cr_assert_str_eq(r.out.data, "proxy=\nrc=0\n", "%s", r.err.data);
    lis_result_free(&r);
    close(lfd);
    lis_sandbox_destroy(sb, &err);

    /* a listener needs a namespace of its own; --net proxy needs its listener */
    spec.net = LIS_NET_HOST;
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), -1);
    cr_assert(strstr(err.msg, "listen_port"), "%s", err.msg);
    spec.net = LIS_NET_PROXY;
    spec.listen_port = 0;
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), -1);
    cr_assert(strstr(err.msg, "lis_net_sandbox_create"), "%s", err.msg);
    /* and net/ refuses proxy rules for another mode */
    spec.net = LIS_NET_NONE;
    const char *deny[] = {"x.test", NULL};
    lis_net_rules rules = {.deny_domains = deny};
    cr_assert_eq(lis_net_sandbox_create(ctx, &spec, &rules, &sb, &err), -1);
    cr_assert(strstr(err.msg, "apply to --net proxy"), "%s", err.msg);
    lis_ctx_free(ctx);
}

Test(net, sandboxes_cannot_reach_each_others_ports)
{
    lis_ctx *ctx = t_ctx();
    lis_sandbox *a = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 1, NULL, NULL);
    lis_sandbox *b = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 1, NULL, NULL);
    /* a port nobody on the host listens on */
    int code;
    char *port = t_host(&code, "python3 -c 'import socket; s=socket.socket(); "
                               "s.bind((\"127.0.0.1\",0)); print(s.getsockname()[1])'");
    int p = atoi(port);
    free(port);
    cr_assert(p > 0);
    lis_result r;
    sh(b, &r,
       "(echo secret | nc -l -p %d >/dev/null 2>&1 &) ; sleep 0.3; "
       "nc -w 2 127.0.0.1 %d </dev/null",
       p, p);
    cr_assert_str_eq(r.out.data, "secret\n", "b's own listener works: %s", r.err.data);
    lis_result_free(&r);
    sh(b, &r, "(echo secret | nc -l -p %d >/dev/null 2>&1 &) ; echo started", p);
    lis_result_free(&r);
    /* directly: a's loopback is its own */
    sh(a, &r, "nc -w 2 127.0.0.1 %d </dev/null; echo rc=$?", p);
    cr_assert_null(strstr(r.out.data, "secret"), "%s", r.out.data);
    lis_result_free(&r);
    /* through the proxy, even with host access: the proxy is on the host's loopback */
    char req[128];
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n", p);
    raw(a, &r, req);
    cr_assert(strstr(r.out.data, "502 Bad Gateway"), "%s", r.out.data);
    cr_assert_null(strstr(r.out.data, "secret"), "%s", r.out.data);
    lis_result_free(&r);
    lis_error err = {0};
    lis_sandbox_destroy(a, &err);
    lis_sandbox_destroy(b, &err);
    lis_ctx_free(ctx);
}

Test(net, hundred_sandboxes_download_at_once, .timeout = 300)
{
    start_server();
    /* The owner holds ~10 fds per sandbox here (pidfd, lifeline, listener,
     * a command's connection, epoll and pipes, a relayed connection). */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    lis_ctx *ctx = t_ctx();
    enum { N = 100 };
    lis_sandbox *sb[N];
    lis_proc *p[N];
    for (int i = 0; i < N; i++)
        sb[i] = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 1, NULL, NULL);
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "wget -q -O /tmp/one.bin http://127.0.0.1:%d/one.bin && "
             "wc -c < /tmp/one.bin",
             server_port);
    for (int i = 0; i < N; i++) {
        lis_exec_spec ex = {.shell = cmd,
                            .out = LIS_STDIO_CAPTURE,
                            .err = LIS_STDIO_CAPTURE,
                            .timeout = 120};
        lis_error err = {0};
        cr_assert_eq(lis_exec_start(sb[i], &ex, &p[i], &err), 0, "%s", err.msg);
    }
    int ok = 0;
    uint64_t total = 0;
    for (int i = 0; i < N; i++) {
        lis_result r;
        lis_error err = {0};
        cr_assert_eq(lis_proc_wait(p[i], &r, &err), 0, "%s", err.msg);
        if (r.exit_code == 0 && !strcmp(r.out.data, "1048576\n"))
            ok++;
        else
            cr_log_error("sandbox %d: %d %s %s", i, r.exit_code, r.out.data, r.err.data);
        lis_result_free(&r);
        lis_stats st;
        lis_sandbox_stats(sb[i], &st, &err);
        lis_net_counters nc;
        lis_net_sandbox_counters(sb[i], &nc);
        total += nc.bytes_in;
    }
    cr_assert_eq(ok, N);
    cr_assert_geq(total, (uint64_t)N << 20);
    for (int i = 0; i < N; i++) {
        lis_error err = {0};
        lis_sandbox_destroy(sb[i], &err);
    }
    lis_ctx_free(ctx);
}

Test(net, manual_pumping_without_a_thread)
{
    start_server();
    const char *base = getenv("TMPDIR");
    char dir[300], run[350], data[350];
    snprintf(dir, sizeof dir, "%s/lis-t-XXXXXX", base ? base : "/tmp");
    cr_assert(mkdtemp(dir));
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(data, sizeof data, "%s/data", dir);
    lis_ctx_opts o = {.run_dir = run, .data_dir = data};
    lis_error err = {0};
    lis_ctx *ctx = lis_ctx_new(&o, &err);
    cr_assert(ctx, "%s", err.msg);
    int pfd = lis_net_manual(ctx, &err);
    cr_assert_geq(pfd, 0, "%s", err.msg);
    lis_sandbox *sb = net_sandbox(ctx, t_busybox(), LIS_NET_PROXY, 1, NULL, NULL);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "wget -q -O - http://127.0.0.1:%d/hello.txt", server_port);
    lis_exec_spec ex = {.shell = cmd,
                        .out = LIS_STDIO_CAPTURE,
                        .err = LIS_STDIO_CAPTURE,
                        .timeout = 60};
    lis_proc *p;
    cr_assert_eq(lis_exec_start(sb, &ex, &p, &err), 0, "%s", err.msg);
    int done = 0;
    while (!done) {
        struct pollfd pf[2] = {{lis_proc_fd(p), POLLIN, 0}, {pfd, POLLIN, 0}};
        poll(pf, 2, 1000);
        cr_assert_eq(lis_net_step(ctx, &err), 0, "%s", err.msg);
        done = lis_proc_step(p, &err);
        cr_assert_geq(done, 0, "%s", err.msg);
    }
    lis_result r;
    cr_assert_eq(lis_proc_wait(p, &r, &err), 0);
    cr_assert_str_eq(r.out.data, "hello through the lis proxy\n", "%s", r.err.data);
    lis_result_free(&r);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(net, persistent_sandbox_is_served_by_the_daemon)
{
    start_server();
    lis_ctx *ctx = t_ctx();
    lis_sandbox_spec spec = {.rootfs = t_busybox(),
                             .name = "pnet",
                             .persist = 1,
                             .net = LIS_NET_PROXY};
    lis_net_rules rules = {.allow_host_network = 1};
    lis_sandbox *sb;
    lis_error err = {0};
    cr_assert_eq(lis_net_sandbox_create(ctx, &spec, &rules, &sb, &err), 0, "%s", err.msg);
    lis_sandbox_release(sb);
    /* the creator's context is gone; the sandbox still has its proxy */
    lis_ctx_free(ctx);
    char run[400];
    snprintf(run, sizeof run, "%s/run", t_tmpdir());
    lis_ctx_opts o = {.run_dir = run};
    char data[400];
    snprintf(data, sizeof data, "%s/data", t_tmpdir());
    o.data_dir = data;
    ctx = lis_ctx_new(&o, &err);
    cr_assert(ctx, "%s", err.msg);
    cr_assert_eq(lis_sandbox_open(ctx, "pnet", &sb, &err), 0, "%s", err.msg);
    lis_result r;
    sh(sb, &r, "wget -q -O - http://127.0.0.1:%d/hello.txt", server_port);
    cr_assert_str_eq(r.out.data, "hello through the lis proxy\n", "%s", r.err.data);
    lis_result_free(&r);
    lis_stats st;
    cr_assert_eq(lis_sandbox_stats(sb, &st, &err), 0);
    cr_assert_eq(st.net, LIS_NET_PROXY);
    lis_net_counters nc;
    lis_net_sandbox_counters(sb, &nc);
    cr_assert_eq(nc.requests, 1);
    cr_assert_gt(nc.bytes_in, 28);
    lis_stats *all;
    size_t n;
    cr_assert_eq(lis_sandbox_list(ctx, &all, &n, &err), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(all[0].net, LIS_NET_PROXY);
    lis_net_counters_by_name(ctx, all[0].name, &nc);
    cr_assert_eq(nc.requests, 1);
    free(all);
    cr_assert_eq(lis_sandbox_destroy(sb, &err), 0, "%s", err.msg);
    /* with no sandbox left the daemon goes away */
    char sock[450];
    snprintf(sock, sizeof sock, "%s/proxyd.sock", run);
    int gone = 0;
    for (int i = 0; i < 150 && !gone; i++) {
        gone = access(sock, F_OK) != 0;
        usleep(100000);
    }
    cr_assert(gone, "proxyd did not exit");
    lis_ctx_free(ctx);
}

/* ---- the Debian fixture: curl, wget, python, apt, pip ---- */

/* Clients skip the proxy for no_proxy hosts (127.0.0.1); the test server is
 * on the host's 127.0.0.1, so these commands clear no_proxy. */
#define NOPX "export no_proxy= NO_PROXY=; "

Test(net, debian_curl_wget_python_through_proxy)
{
    const char *deb = t_debian();
    start_server();
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = net_sandbox(ctx, deb, LIS_NET_PROXY, 1, NULL, NULL);
    lis_result r;
    sh(sb, &r,
       NOPX "command -v curl >/dev/null || { echo no-curl; exit 0; };"
            "curl -sS http://127.0.0.1:%d/hello.txt",
       server_port);
    if (strcmp(r.out.data, "no-curl\n") == 0)
        cr_log_warn("curl is not in the Debian fixture (scripts/make-test-rootfs.sh)");
    else
        cr_assert_str_eq(r.out.data, "hello through the lis proxy\n", "%s", r.err.data);
    lis_result_free(&r);
    sh(sb, &r,
       NOPX "command -v curl >/dev/null || { echo no-curl; exit 0; };"
            "curl -sS -p http://127.0.0.1:%d/hello.txt",
       server_port); /* through CONNECT */
    if (strcmp(r.out.data, "no-curl\n"))
        cr_assert_str_eq(r.out.data, "hello through the lis proxy\n", "%s", r.err.data);
    lis_result_free(&r);
    sh(sb, &r,
       NOPX "command -v wget >/dev/null || { echo no-wget; exit 0; };"
            "wget -q -O - http://127.0.0.1:%d/hello.txt",
       server_port);
    if (strcmp(r.out.data, "no-wget\n"))
        cr_assert_str_eq(r.out.data, "hello through the lis proxy\n", "%s", r.err.data);
    lis_result_free(&r);
    sh(sb, &r,
       NOPX "python3 -c 'import urllib.request as u; "
            "print(u.urlopen(\"http://127.0.0.1:%d/hello.txt\").read().decode(), end=\"\")'",
       server_port);
    cr_assert_str_eq(r.out.data, "hello through the lis proxy\n", "%s", r.err.data);
    lis_result_free(&r);
    lis_error err = {0};
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(net, debian_apt_get_update_from_a_local_repository)
{
    const char *deb = t_debian();
    start_server();
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = net_sandbox(ctx, deb, LIS_NET_PROXY, 1, NULL, NULL);
    lis_result r;
    /* apt drops to the _apt user to download, which a single-uid map cannot do */
    sh(sb, &r,
       NOPX
       "echo 'deb [trusted=yes] http://127.0.0.1:%d/apt ./' > /tmp/lis.list; "
       "O='-o Dir::Etc::sourcelist=/tmp/lis.list -o Dir::Etc::sourceparts=-'; "
       "id _apt >/dev/null 2>&1 && [ \"$(cat /proc/self/uid_map | awk '{print $3}')\" = 1 ] && "
       "O=\"$O -o APT::Sandbox::User=root\"; "
       "apt-get $O update && cd /tmp && apt-get $O download lis-demo && ls /tmp/*.deb",
       server_port);
    cr_assert_eq(r.exit_code, 0, "%s\n%s", r.out.data, r.err.data);
    cr_assert(strstr(r.out.data, "/tmp/lis-demo_1.0_all.deb"), "%s", r.out.data);
    lis_result_free(&r);
    lis_error err = {0};
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}

Test(net, debian_pip_download_from_a_local_index)
{
    const char *deb = t_debian();
    start_server();
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = net_sandbox(ctx, deb, LIS_NET_PROXY, 1, NULL, NULL);
    lis_result r;
    t_sh(sb, "python3 -m pip --version >/dev/null 2>&1 && echo yes || echo no", &r);
    int have = !strcmp(r.out.data, "yes\n");
    lis_result_free(&r);
    if (!have) {
        lis_error err = {0};
        lis_sandbox_destroy(sb, &err);
        lis_ctx_free(ctx);
        cr_skip_test("pip is not in the Debian fixture (python3-pip in make-test-rootfs.sh)");
    }
    sh(sb, &r,
       NOPX "python3 -m pip download --no-deps --disable-pip-version-check -d /tmp/w "
            "--index-url http://127.0.0.1:%d/simple/ lisdemo && ls /tmp/w",
       server_port);
    cr_assert_eq(r.exit_code, 0, "%s\n%s", r.out.data, r.err.data);
    cr_assert(strstr(r.out.data, "lisdemo-1.0-py3-none-any.whl"), "%s", r.out.data);
    lis_result_free(&r);
    lis_error err = {0};
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
}
