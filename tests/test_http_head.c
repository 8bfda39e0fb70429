/* test_http_head.c - the proxy's request-head and authority parser
 * (net/http_head.c), without sockets: what it accepts, in which
 * canonical form, and what it refuses. The end-to-end 400s are in test_net.c. */
#include "testlib.h"

#include "http_head.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int auth(const char *s, const char *defport, http_authority *a, char *why, size_t wl)
{
    return http_parse_authority(s, strlen(s), defport, a, why, wl);
}

Test(http_head, accepted_authorities_in_canonical_form)
{
    static const struct {
        const char *in, *defport, *host, *port;
        int kind;
    } ok[] = {
        {"example.com:443", NULL, "example.com", "443", HTTP_HOST_NAME},
        {"WWW.Example.COM.:80", NULL, "www.example.com", "80", HTTP_HOST_NAME},
        {"a-b_c.d9.test", "80", "a-b_c.d9.test", "80", HTTP_HOST_NAME},
        {"pypi.org:", "80", "pypi.org", "80", HTTP_HOST_NAME}, /* empty port: the default */
        {"host:00080", NULL, "host", "80", HTTP_HOST_NAME},
        {"1e100.net", "80", "1e100.net", "80", HTTP_HOST_NAME},
        {"123.example.com", "80", "123.example.com", "80", HTTP_HOST_NAME},
        {"127.0.0.1:3128", NULL, "127.0.0.1", "3128", HTTP_HOST_IPV4},
        {"127.0.0.1.:1", NULL, "127.0.0.1", "1", HTTP_HOST_IPV4},
        /* the numeric forms of IPv4 that URL parsers and inet_aton take */
        {"2130706433:80", NULL, "127.0.0.1", "80", HTTP_HOST_IPV4},
        {"0x7f.1:80", NULL, "127.0.0.1", "80", HTTP_HOST_IPV4},
        {"017700000001:80", NULL, "127.0.0.1", "80", HTTP_HOST_IPV4},
        {"0x7F000001", "80", "127.0.0.1", "80", HTTP_HOST_IPV4},
        {"127.1", "80", "127.0.0.1", "80", HTTP_HOST_IPV4},
        {"10.0x10.1", "80", "10.16.0.1", "80", HTTP_HOST_IPV4},
        {"0177.0.0.01", "80", "127.0.0.1", "80", HTTP_HOST_IPV4},
        {"0x", "80", "0.0.0.0", "80", HTTP_HOST_IPV4},
        {"0", "80", "0.0.0.0", "80", HTTP_HOST_IPV4},
        {"255.255.255.255:65535", NULL, "255.255.255.255", "65535", HTTP_HOST_IPV4},
        /* IPv6 literals, written back as inet_ntop does */
        {"[::1]:80", NULL, "::1", "80", HTTP_HOST_IPV6},
        {"[0:0:0:0:0:0:0:1]:443", NULL, "::1", "443", HTTP_HOST_IPV6},
        {"[2001:DB8::A]", "80", "2001:db8::a", "80", HTTP_HOST_IPV6},
        {"[::ffff:127.0.0.1]:443", NULL, "::ffff:127.0.0.1", "443", HTTP_HOST_IPV6},
        {"[::1]:", "80", "::1", "80", HTTP_HOST_IPV6},
        /* RFC 6874 zone ids: %25 in the URI, % for the resolver */
        {"[fe80::1%25eth0]:80", NULL, "fe80::1%eth0", "80", HTTP_HOST_IPV6},
        {"[fe80::1%25Wlan-0.1_x~]", "80", "fe80::1%Wlan-0.1_x~", "80", HTTP_HOST_IPV6},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        http_authority a;
        char why[128] = "";
        cr_assert_eq(auth(ok[i].in, ok[i].defport, &a, why, sizeof why), 0, "%s: %s", ok[i].in,
                     why);
        cr_assert_str_eq(a.host, ok[i].host, "%s", ok[i].in);
        cr_assert_str_eq(a.port, ok[i].port, "%s", ok[i].in);
        cr_assert_eq(a.kind, ok[i].kind, "%s", ok[i].in);
    }
}

Test(http_head, refused_authorities)
{
    static const struct {
        const char *in, *defport, *why;
    } bad[] = {
        /* issue 10: the last colon was taken as the port and "127.0.0.1:P"
         * went to the resolver */
        {"127.0.0.1:8080:8080", NULL, "malformed port"},
        {"127.0.0.1:8080:8080", "80", "malformed port"},
        {"a.test:80:", NULL, "malformed port"},
        {"::1:80", NULL, "empty host"},
        {"a.test", NULL, "a port is required"},
        {"a.test:", NULL, "a port is required"},
        {"a.test:0", NULL, "out of range"},
        {"a.test:65536", NULL, "out of range"},
        {"a.test:99999999999999999999", NULL, "out of range"},
        {"a.test:+80", NULL, "malformed port"},
        {"a.test: 80", NULL, "malformed port"},
        {"a.test:8o", NULL, "malformed port"},
        {":80", NULL, "empty host"},
        {"", "80", "empty host"},
        {".", "80", "empty label"},
        {"a..b:80", NULL, "empty label"},
        {".a:80", NULL, "empty label"},
        {"a.b..:80", NULL, "empty label"},
        {"-a.test:80", NULL, "'-'"},
        {"a-.test:80", NULL, "'-'"},
        {"u@a.test:80", NULL, "user information"},
        {"u:p@a.test", "80", "user information"},
        {"a%2ftest:80", NULL, "malformed host name"},
        {"a!b:80", NULL, "malformed host name"},
        {"a~b:80", NULL, "malformed host name"},
        {"caf\xc3\xa9.test:80", NULL, "malformed host name"},
        /* ends in a number, so IPv4 or nothing */
        {"256.0.0.1:80", NULL, "malformed IPv4"},
        {"1.2.3.4.5:80", NULL, "malformed IPv4"},
        {"1.2.3.256:80", NULL, "malformed IPv4"},
        {"1.2.65536:80", NULL, "malformed IPv4"},
        {"4294967296:80", NULL, "malformed IPv4"},
        {"0x100000000:80", NULL, "malformed IPv4"},
        {"09:80", NULL, "malformed IPv4"},
        {"0x7g.1:80", NULL, "malformed"},
        {"foo.123:80", NULL, "malformed IPv4"},
        {"foo.0x1:80", NULL, "malformed IPv4"},
        {"99999999999999999999999:80", NULL, "malformed IPv4"},
        /* IP literals */
        {"[::1", "80", "unterminated"},
        {"[::1]x", "80", "junk after"},
        {"[::1]]:80", NULL, "junk after"},
        {"[]:80", NULL, "malformed IPv6"},
        {"[127.0.0.1]:80", NULL, "malformed IPv6"},
        {"[::g]:80", NULL, "malformed IPv6"},
        {"[1:2:3:4:5:6:7:8:9]:80", NULL, "malformed IPv6"},
        {"[v1.fe]:80", NULL, "IPvFuture"},
        {"[fe80::1%eth0]:80", NULL, "%25"},
        {"[fe80::1%25]:80", NULL, "%25"},
        {"[fe80::1%25eth0%25x]:80", NULL, "zone id"},
        {"[fe80::1%25eth/0]:80", NULL, "zone id"},
        {"[fe80::1%25abcdefghijklmnop]:80", NULL, "too long"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http_authority a;
        char why[128] = "";
        cr_assert_eq(auth(bad[i].in, bad[i].defport, &a, why, sizeof why), -1,
                     "%s accepted as "
                     "%s port %s",
                     bad[i].in, a.host, a.port);
        cr_assert(strstr(why, bad[i].why), "%s: %s", bad[i].in, why);
    }
    /* found by fuzz_http_head (fuzz/regress/http_head/zone-nul): strchr()
     * matched the NUL of a zone id, so "fe80::1%" passed with an empty zone */
    static const char nulzone[] = "[fe80::1%25\0]:443";
    http_authority z;
    char zwhy[128] = "";
    cr_assert_eq(http_parse_authority(nulzone, sizeof nulzone - 1, NULL, &z, zwhy, sizeof zwhy), -1,
                 "accepted as %s", z.host);
    cr_assert(strstr(zwhy, "zone id"), "%s", zwhy);
    static const char nulname[] = "a\0b.test:80";
    cr_assert_eq(http_parse_authority(nulname, sizeof nulname - 1, NULL, &z, zwhy, sizeof zwhy),
                 -1);
    /* a name of 254 bytes; 253 with the trailing dot removed is fine */
    char name[300];
    memset(name, 'a', sizeof name);
    for (int i = 60; i < 254; i += 61)
        name[i] = '.';
    name[253] = 0;
    http_authority a;
    char why[128];
    cr_assert_eq(auth(name, "80", &a, why, sizeof why), 0, "%s", why);
    name[253] = '.';
    name[254] = 0;
    cr_assert_eq(auth(name, "80", &a, why, sizeof why), 0, "%s", why);
    name[253] = 'a';
    cr_assert_eq(auth(name, "80", &a, why, sizeof why), -1);
    cr_assert(strstr(why, "too long"), "%s", why);
    memset(name, 'b', 64);
    strcpy(name + 64, ".test");
    cr_assert_eq(auth(name, "80", &a, why, sizeof why), -1);
    cr_assert(strstr(why, "63"), "%s", why);
}

static int req(const char *head, http_request *rq, char *why, size_t wl)
{
    size_t n = strlen(head);
    cr_assert_eq(http_head_len(head, n), n, "not one complete head: %s", head);
    return http_parse_request(head, n, rq, why, wl);
}

Test(http_head, request_heads_accepted)
{
    http_request rq;
    char why[256] = "";
    const char *h = "CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n";
    cr_assert_eq(req(h, &rq, why, sizeof why), 0, "%s", why);
    cr_assert(rq.is_connect);
    cr_assert_str_eq(rq.auth.host, "::1");
    cr_assert_str_eq(rq.auth.port, "443");

    h = "GET http://0x7f.1:8080/a/b?c=d HTTP/1.0\r\nUser-Agent: x\tz\xff\r\n\r\n";
    cr_assert_eq(req(h, &rq, why, sizeof why), 0, "%s", why);
    cr_assert_not(rq.is_connect);
    cr_assert_str_eq(rq.auth.host, "127.0.0.1");
    cr_assert_eq(rq.auth.kind, HTTP_HOST_IPV4);
    cr_assert_str_eq(rq.auth.port, "8080");
    cr_assert_eq(rq.path.len, strlen("/a/b?c=d"));
    cr_assert_eq(memcmp(h + rq.path.off, "/a/b?c=d", rq.path.len), 0);

    h = "PROPFIND HTTP://Files.Test?x HTTP/1.1\r\n\r\n";
    cr_assert_eq(req(h, &rq, why, sizeof why), 0, "%s", why);
    cr_assert_str_eq(rq.auth.host, "files.test");
    cr_assert_str_eq(rq.auth.port, "80");
}

Test(http_head, request_heads_refused)
{
    static const struct {
        const char *head, *why;
    } bad[] = {
        {"GET http://127.0.0.1:8080:8080/ HTTP/1.1\r\n\r\n", "malformed host in the URL"},
        {"CONNECT 127.0.0.1:443:443 HTTP/1.1\r\n\r\n", "CONNECT needs host:port"},
        {"CONNECT a.test HTTP/1.1\r\n\r\n", "CONNECT needs host:port"},
        {"CONNECT http://a.test:443/ HTTP/1.1\r\n\r\n", "CONNECT needs host:port"},
        {"GET http://2130706433.1/ HTTP/1.1\r\n\r\n", "malformed IPv4"},
        {"GET http:///x HTTP/1.1\r\n\r\n", "empty host"},
        {"GET http://a.test/#frag HTTP/1.1\r\n\r\n", "fragment"},
        {"GET http://a.test#frag HTTP/1.1\r\n\r\n", "fragment"},
        {"GET http://u:p@a.test/ HTTP/1.1\r\n\r\n", "user information"},
        {"GET https://a.test/ HTTP/1.1\r\n\r\n", "CONNECT"},
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", "absolute http:// URLs"},
        {"GET ftp://a.test/ HTTP/1.1\r\n\r\n", "absolute http:// URLs"},
        {"GET http://a.test/ HTTP/2.0\r\n\r\n", "HTTP/1.0 and HTTP/1.1"},
        {"GET http://a.test/ http/1.1\r\n\r\n", "HTTP/1.0 and HTTP/1.1"},
        {"GET  http://a.test/ HTTP/1.1\r\n\r\n", "request line"},
        {"GET http://a.test/ HTTP/1.1 \r\n\r\n", "HTTP/1.0 and HTTP/1.1"},
        {"GET\thttp://a.test/ HTTP/1.1\r\n\r\n", "request line"},
        {"G(T http://a.test/ HTTP/1.1\r\n\r\n", "method"},
        {"GARBAGE\r\n\r\n", "request line"},
        {"GET http://a.test/ HTTP/1.1\r\n folded: x\r\n\r\n", "header name"},
        {"GET http://a.test/ HTTP/1.1\r\nA: b\r\n\tfolded\r\n\r\n", "header line"},
        {"GET http://a.test/ HTTP/1.1\r\nNo colon\r\n\r\n", "header line"},
        {"GET http://a.test/ HTTP/1.1\r\n: empty name\r\n\r\n", "header line"},
        {"GET http://a.test/ HTTP/1.1\r\nBad Name: x\r\n\r\n", "header name"},
        {"GET http://a.test/ HTTP/1.1\r\nX: a\rb\r\n\r\n", "bare CR/LF"},
        {"GET http://a.test/ HTTP/1.1\nX: a\r\n\r\n", "bare CR/LF"},
        {"GET http://a.test/ HTTP/1.1\r\nX: \x01\r\n\r\n", "control character"},
        {"GET http://a.test/ HTTP/1.1\r\nX: \x7f\r\n\r\n", "control character"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http_request rq;
        char why[256] = "";
        cr_assert_eq(req(bad[i].head, &rq, why, sizeof why), 400, "accepted: %s", bad[i].head);
        cr_assert(strstr(why, bad[i].why), "%s: %s", bad[i].head, why);
    }
    /* NUL (strlen cannot carry it) */
    static const char nul[] = "GET http://a.test/ HTTP/1.1\r\nX: a\0b\r\n\r\n";
    http_request rq;
    char why[256];
    cr_assert_eq(http_parse_request(nul, sizeof nul - 1, &rq, why, sizeof why), 400);
    cr_assert(strstr(why, "NUL"), "%s", why);
    /* an incomplete head */
    cr_assert_eq(http_head_len("GET http://a/ HTTP/1.1\r\n", 24), 0);
    cr_assert_eq(http_parse_request("GET http://a/ HTTP/1.1\r\n", 24, &rq, why, sizeof why), 400);
    /* more Connection headers than are kept, or too long ones */
    char big[4096] = "GET http://a.test/ HTTP/1.1\r\n";
    for (int i = 0; i <= HTTP_CONN_HDRS_MAX; i++)
        strcat(big, "Connection: x\r\n");
    strcat(big, "\r\n");
    cr_assert_eq(req(big, &rq, why, sizeof why), 400);
    cr_assert(strstr(why, "Connection"), "%s", why);
    char *p = big + sprintf(big, "GET http://a.test/ HTTP/1.1\r\nConnection: ");
    memset(p, 'a', 600);
    strcpy(p + 600, "\r\n\r\n");
    cr_assert_eq(req(big, &rq, why, sizeof why), 400);
    cr_assert(strstr(why, "Connection headers too long"), "%s", why);
}

Test(http_head, forwarded_head_is_origin_form_without_hop_by_hop_headers)
{
    const char *h = "POST http://Api.Test:8080?q=1 HTTP/1.1\r\n"
                    "Host: evil.test\r\n"
                    "Proxy-Authorization: Basic eA==\r\n"
                    "Connection: keep-alive, X-Secret\r\n"
                    "connection: X-Other\r\n"
                    "X-Secret: 1\r\n"
                    "X-Other: 2\r\n"
                    "Keep-Alive: timeout=5\r\n"
                    "TE: trailers\r\nUpgrade: h2c\r\nTrailer: X\r\nProxy-Connection: close\r\n"
                    "Content-Length: 3\r\n"
                    "X-Keep: yes\r\n\r\n";
    http_request rq;
    char why[256] = "";
    cr_assert_eq(req(h, &rq, why, sizeof why), 0, "%s", why);
    char out[4096];
    size_t n = http_forward_head(h, strlen(h), &rq, out, sizeof out);
    cr_assert_gt(n, 0);
    out[n] = 0;
    cr_assert_str_eq(out, "POST /?q=1 HTTP/1.1\r\n"
                          "Host: Api.Test:8080\r\n"
                          "Content-Length: 3\r\n"
                          "X-Keep: yes\r\n"
                          "Connection: close\r\n\r\n");
    /* too small a buffer: 0, never a partial head */
    for (size_t cap = 0; cap < n; cap++)
        cr_assert_eq(http_forward_head(h, strlen(h), &rq, out, cap), 0, "cap %zu", cap);
    cr_assert_eq(http_forward_head(h, strlen(h), &rq, out, n), n);
}

static char *close_resp(const char *in, size_t cap, int at_eof, int *done)
{
    char *buf = malloc(cap + 1);
    size_t len = strlen(in);
    memcpy(buf, in, len);
    *done = http_response_close(buf, &len, cap, 64, at_eof);
    buf[len] = 0;
    return buf;
}

Test(http_head, response_head_says_connection_close)
{
    int done;
    char *s = close_resp("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: 5\r\n"
                         "Content-Length: 4\r\nproxy-connection: x\r\n\r\nbody",
                         256, 0, &done);
    cr_assert_eq(done, 1);
    cr_assert_str_eq(s, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody");
    free(s);
    s = close_resp("HTTP/1.0 404 Not Found\r\n\r\n", 256, 0, &done);
    cr_assert_str_eq(s, "HTTP/1.0 404 Not Found\r\nConnection: close\r\n\r\n");
    free(s);
    /* interim responses and non-HTTP bytes are passed on as they are */
    s = close_resp("HTTP/1.1 100 Continue\r\n\r\n", 256, 0, &done);
    cr_assert_eq(done, 1);
    cr_assert_str_eq(s, "HTTP/1.1 100 Continue\r\n\r\n");
    free(s);
    s = close_resp("SSH-2.0-x\r\n\r\n", 256, 0, &done);
    cr_assert_str_eq(s, "SSH-2.0-x\r\n\r\n");
    free(s);
    /* no complete head: wait, unless at EOF or past max_head (64 here) */
    s = close_resp("HTTP/1.1 200 OK\r\n", 256, 0, &done);
    cr_assert_eq(done, 0);
    free(s);
    s = close_resp("HTTP/1.1 200 OK\r\n", 256, 1, &done);
    cr_assert_eq(done, 1);
    cr_assert_str_eq(s, "HTTP/1.1 200 OK\r\n");
    free(s);
    /* no room for the rewrite: passed on unchanged */
    const char *in = "HTTP/1.1 200 OK\r\nA: b\r\n\r\nxyz";
    s = close_resp(in, strlen(in) + 5, 0, &done);
    cr_assert_eq(done, 1);
    cr_assert_str_eq(s, in);
    free(s);
}
