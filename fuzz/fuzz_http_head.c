/* fuzz_http_head.c - the proxy's request-head and authority parsing
 * (net/http_head.c). The input is tried as an authority, as a request
 * head and as a response head; what is accepted must keep the invariants the
 * proxy relies on:
 *  - a host is canonical: a lower-case DNS name that no libc would read as
 *    an IPv4 address, a dotted quad equal to what inet_aton makes of the text,
 *    or an IPv6 address that inet_pton/inet_ntop round-trip;
 *  - a port is 1-65535 in plain decimal;
 *  - a forwarded head is one well-formed head in origin form with one Host,
 *    no hop-by-hop header and "Connection: close", or nothing at all;
 *  - a rewritten response head keeps its status line and body bytes. */
#include "fuzz.h"
#include "http_head.h"

#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

static void check_port(const char *p)
{
    size_t n = strlen(p);
    FUZZ_CHECK(n >= 1 && n <= 5 && p[0] != '0');
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(p[i] >= '0' && p[i] <= '9');
        v = v * 10 + (p[i] - '0');
    }
    FUZZ_CHECK(v >= 1 && v <= 65535);
}

/* text: the host as written (without brackets), for the libc comparison */
static void check_authority(const http_authority *a, const char *text, size_t tn)
{
    size_t n = strlen(a->host);
    FUZZ_CHECK(n >= 1 && n <= HTTP_HOST_MAX);
    check_port(a->port);
    char t[300];
    if (tn >= sizeof t)
        tn = sizeof t - 1;
    memcpy(t, text, tn);
    t[tn] = 0;
    if (tn > 1 && t[tn - 1] == '.')
        t[tn - 1] = 0;
    struct in_addr v4;
    struct in6_addr v6;
    switch (a->kind) {
    case HTTP_HOST_NAME:
        for (size_t i = 0; i < n; i++) {
            char ch = a->host[i];
            FUZZ_CHECK((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
                       ch == '_' || ch == '.');
        }
        FUZZ_CHECK(a->host[n - 1] != '.' && a->host[0] != '.' && !strstr(a->host, ".."));
        /* getaddrinfo would take these as addresses: they must not pass as names */
        FUZZ_CHECK(inet_aton(a->host, &v4) == 0);
        FUZZ_CHECK(inet_pton(AF_INET6, a->host, &v6) != 1);
        break;
    case HTTP_HOST_IPV4: {
        FUZZ_CHECK(inet_pton(AF_INET, a->host, &v4) == 1);
        /* the same address glibc's inet_aton reads from the text, when it
         * reads one (it takes no empty "0x" part) */
        struct in_addr libc;
        if (inet_aton(t, &libc))
            FUZZ_CHECK(libc.s_addr == v4.s_addr);
        char back[INET_ADDRSTRLEN];
        FUZZ_CHECK(inet_ntop(AF_INET, &v4, back, sizeof back) && !strcmp(back, a->host));
        break;
    }
    case HTTP_HOST_IPV6: {
        char addr[HTTP_HOST_MAX + 1], back[INET6_ADDRSTRLEN];
        snprintf(addr, sizeof addr, "%s", a->host);
        char *pct = strchr(addr, '%');
        if (pct) {
            FUZZ_CHECK(pct[1] != 0 && strlen(pct + 1) <= 15 && !strchr(pct + 1, '%'));
            *pct = 0;
        }
        FUZZ_CHECK(inet_pton(AF_INET6, addr, &v6) == 1);
        FUZZ_CHECK(inet_ntop(AF_INET6, &v6, back, sizeof back) && !strcmp(back, addr));
        break;
    }
    default: FUZZ_CHECK(0);
    }
}

/* The host part of an accepted authority as written (for check_authority). */
static void host_text(const char *s, size_t n, const char **h, size_t *hn)
{
    if (n && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        const char *pct = memchr(s, '%', n);
        *h = s + 1;
        *hn = (size_t)((pct && pct < rb ? pct : rb) - s - 1);
        return;
    }
    const char *colon = memchr(s, ':', n);
    *h = s;
    *hn = colon ? (size_t)(colon - s) : n;
}

static int has_header(const char *out, size_t n, const char *name)
{
    size_t nl = strlen(name);
    for (const char *l = memmem(out, n, "\r\n", 2) + 2; l < out + n - 2;) {
        const char *le = memmem(l, (size_t)(out + n - l), "\r\n", 2);
        if ((size_t)(le - l) > nl && l[nl] == ':' && !strncasecmp(l, name, nl))
            return 1;
        l = le + 2;
    }
    return 0;
}

static void check_forward(const char *h, size_t hlen, const http_request *rq)
{
    size_t cap = hlen + 64;
    char *out = malloc(cap);
    FUZZ_CHECK(out);
    size_t n = http_forward_head(h, hlen, rq, out, cap);
    /* it only shrinks the head, except for Host, "/" and Connection: close */
    FUZZ_CHECK(n > 0);
    FUZZ_CHECK(n <= cap);
    FUZZ_CHECK(http_head_len(out, n) == n);
    FUZZ_CHECK(!memcmp(out, h, rq->method.len) && out[rq->method.len] == ' ' &&
               out[rq->method.len + 1] == '/');
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(out[i] != 0);
        if (out[i] == '\n')
            FUZZ_CHECK(i && out[i - 1] == '\r');
        if (out[i] == '\r')
            FUZZ_CHECK(i + 1 < n && out[i + 1] == '\n');
    }
    /* the result parses as a head again (an origin-form one: it is refused
     * as a proxy request, but only for its target) */
    http_request again;
    char why[256];
    int code = http_parse_request(out, n, &again, why, sizeof why);
    FUZZ_CHECK(code == 400 && strstr(why, "absolute http:// URLs"));
    const char *eol = memmem(out, n, "\r\n", 2);
    FUZZ_CHECK(!strncmp(eol + 2, "Host: ", 6));
    FUZZ_CHECK(n >= 23 && !memcmp(out + n - 23, "\r\nConnection: close\r\n\r\n", 23));
    static const char *const hop[] = {"proxy-connection", "keep-alive", "proxy-authorization", "te",
                                      "upgrade",          "trailer"};
    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
        FUZZ_CHECK(!has_header(out, n, hop[i]));
    /* never a partial head */
    FUZZ_CHECK(http_forward_head(h, hlen, rq, out, n - 1) == 0);
    FUZZ_CHECK(http_forward_head(h, hlen, rq, out, n) == n);
    free(out);
}

static void check_response(const uint8_t *data, size_t size)
{
    size_t cap = size + 32;
    char *buf = malloc(cap);
    FUZZ_CHECK(buf);
    memcpy(buf, data, size);
    size_t len = size;
    int done = http_response_close(buf, &len, cap, 4096, size & 1);
    FUZZ_CHECK(len <= cap);
    if (!done) {
        FUZZ_CHECK(len == size && !memcmp(buf, data, size));
    } else if (len != size || memcmp(buf, data, size)) {
        size_t ohl = http_head_len((const char *)data, size), nhl = http_head_len(buf, len);
        FUZZ_CHECK(ohl && nhl);
        const char *eol = memmem(data, size, "\r\n", 2);
        FUZZ_CHECK(!memcmp(buf, data, (size_t)(eol - (const char *)data) + 2));
        FUZZ_CHECK(!memcmp(buf + nhl - 23, "\r\nConnection: close\r\n\r\n", 23));
        FUZZ_CHECK(len - nhl == size - ohl && !memcmp(buf + nhl, data + ohl, size - ohl));
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    char why[256];
    /* as an authority, with and without a default port */
    for (int k = 0; k < 2; k++) {
        http_authority a;
        if (http_parse_authority(s, size, k ? "80" : NULL, &a, why, sizeof why) == 0) {
            const char *h;
            size_t hn;
            host_text(s, size, &h, &hn);
            check_authority(&a, h, hn);
        } else {
            FUZZ_CHECK(why[0]);
        }
    }
    /* as a request head (the proxy passes the head it found) */
    size_t hlen = http_head_len(s, size);
    if (hlen) {
        http_request rq;
        int code = http_parse_request(s, hlen, &rq, why, sizeof why);
        FUZZ_CHECK(code == 0 || code == 400);
        if (code == 0) {
            FUZZ_CHECK(rq.method.len >= 1 && rq.target.off + rq.target.len <= hlen);
            FUZZ_CHECK(rq.headers <= hlen - 2 && rq.nconn <= HTTP_CONN_HDRS_MAX);
            if (rq.is_connect) {
                const char *h;
                size_t hn;
                host_text(s + rq.target.off, rq.target.len, &h, &hn);
                check_authority(&rq.auth, h, hn);
            } else {
                const char *h;
                size_t hn;
                host_text(s + rq.url_auth.off, rq.url_auth.len, &h, &hn);
                check_authority(&rq.auth, h, hn);
                FUZZ_CHECK(rq.path.off + rq.path.len == rq.target.off + rq.target.len);
                check_forward(s, hlen, &rq);
            }
        }
    }
    check_response(data, size);
    return 0;
}
