/* http_head.c - strict parsing of the proxy's request heads and authorities.
 *
 * Hand-written on purpose: Debian ships no maintained HTTP/1 head parser
 * that is small and free of an event library (picohttpparser is only
 * bundled inside h2o, llhttp is not packaged, http-parser is unmaintained
 * upstream), and the proxy needs a narrow, strict subset anyway. It is
 * proven by fuzz/fuzz_http_head.c (with invariants checked on every input
 * it accepts) and by tests/test_http_head.c.
 *
 * Authorities follow RFC 3986 (host, port, IP-literal with an RFC 6874 zone
 * id), narrowed to what a DNS name can be; a host that ends in a number is
 * read as an IPv4 address the way URL parsers do (WHATWG URL "IPv4 parser":
 * 1 to 4 parts, decimal, 0x hex or 0 octal, the last part filling the
 * remaining bytes) so that 2130706433 or 0x7f.1 meet the address rules as
 * 127.0.0.1 and never reach a resolver. */
#include "http_head.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define METHOD_MAX 32
#define CONN_VALUES_MAX 512 /* bytes in all Connection values (each header line checks them) */
#define ZONE_MAX 15         /* IF_NAMESIZE - 1 */

static int fail(char *why, size_t wlen, const char *msg)
{
    snprintf(why, wlen, "%s", msg);
    return -1;
}

static int is_digit(int ch) { return ch >= '0' && ch <= '9'; }
static int is_alpha(int ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }
static int is_hex(int ch)
{
    return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}
static int lower(int ch) { return ch >= 'A' && ch <= 'Z' ? ch + 32 : ch; }

/* RFC 9110 token characters (method and header names). */
static int tchar(int ch)
{
    return is_alpha(ch) || is_digit(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* ---- IPv4 in the numeric forms URL parsers accept ---- */

/* One part: 0x hex (may be empty after the prefix), 0 octal, or decimal.
 * -1 when invalid; values above 2^32 are clamped to 2^32 (too big anyway). */
static int64_t v4_part(const char *s, size_t n)
{
    int base = 10;
    if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
        n -= 2;
    } else if (n >= 2 && s[0] == '0') {
        base = 8;
        s++;
        n--;
    }
    if (!n)
        return base == 16 ? 0 : -1; /* "0x" is 0; "" is not a number */
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        int ch = s[i], d;
        if (is_digit(ch))
            d = ch - '0';
        else if (base == 16 && is_hex(ch))
            d = lower(ch) - 'a' + 10;
        else
            return -1;
        if (d >= base)
            return -1;
        v = v * base + d;
        if (v > 0x100000000)
            v = 0x100000000;
    }
    return v;
}

/* Whether the last label makes the host an IPv4 address (or nothing). */
static int ends_in_number(const char *h, size_t n)
{
    const char *last = h;
    for (size_t i = 0; i < n; i++)
        if (h[i] == '.')
            last = h + i + 1;
    size_t ln = (size_t)(h + n - last);
    if (!ln)
        return 0;
    size_t i = 0;
    if (ln >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X')) {
        for (i = 2; i < ln && is_hex(last[i]); i++)
            ;
        return i == ln;
    }
    for (; i < ln && is_digit(last[i]); i++)
        ;
    return i == ln;
}

static int parse_v4(const char *h, size_t n, uint32_t *addr)
{
    int64_t part[4];
    int np = 0;
    const char *s = h;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && h[i] != '.')
            continue;
        if (np == 4)
            return -1;
        part[np] = v4_part(s, (size_t)(h + i - s));
        if (part[np] < 0)
            return -1;
        np++;
        s = h + i + 1;
    }
    uint64_t v = 0;
    for (int i = 0; i < np - 1; i++) {
        if (part[i] > 255)
            return -1;
        v |= (uint64_t)part[i] << (8 * (3 - i));
    }
    if ((uint64_t)part[np - 1] >= (uint64_t)1 << (8 * (5 - np)))
        return -1;
    *addr = (uint32_t)(v | (uint64_t)part[np - 1]);
    return 0;
}

/* ---- hosts ---- */

/* IP-literal: "[" IPv6address [ "%25" ZoneID ] "]" (IPvFuture refused). */
static int parse_ip_literal(const char *s, size_t n, http_authority *a, char *why, size_t wlen)
{
    if (n && (s[0] == 'v' || s[0] == 'V'))
        return fail(why, wlen, "IPvFuture addresses are not supported");
    const char *pct = memchr(s, '%', n);
    size_t alen = pct ? (size_t)(pct - s) : n;
    char txt[INET6_ADDRSTRLEN];
    if (!alen || alen >= sizeof txt)
        return fail(why, wlen, "malformed IPv6 address");
    for (size_t i = 0; i < alen; i++)
        if (!is_hex(s[i]) && s[i] != ':' && s[i] != '.')
            return fail(why, wlen, "malformed IPv6 address");
    memcpy(txt, s, alen);
    txt[alen] = 0;
    struct in6_addr in6;
    if (inet_pton(AF_INET6, txt, &in6) != 1 || !inet_ntop(AF_INET6, &in6, txt, sizeof txt))
        return fail(why, wlen, "malformed IPv6 address");
    size_t tl = strlen(txt);
    memcpy(a->host, txt, tl + 1);
    if (pct) {
        /* RFC 6874: the "%" of the zone is written "%25"; the zone is an
         * interface name, so unreserved characters only */
        const char *z = pct + 3, *end = s + n;
        if (end - pct < 4 || pct[1] != '2' || pct[2] != '5')
            return fail(why, wlen, "malformed IPv6 zone id (write it as %25zone)");
        size_t zl = (size_t)(end - z);
        if (zl > ZONE_MAX)
            return fail(why, wlen, "IPv6 zone id too long");
        for (size_t i = 0; i < zl; i++)
            if (!is_alpha(z[i]) && !is_digit(z[i]) && !(z[i] && strchr("-._~", z[i])))
                return fail(why, wlen, "malformed IPv6 zone id");
        a->host[tl] = '%';
        memcpy(a->host + tl + 1, z, zl);
        a->host[tl + 1 + zl] = 0;
    }
    a->kind = HTTP_HOST_IPV6;
    return 0;
}

/* reg-name narrowed to DNS: labels of letters, digits, '-' and '_', 1-63
 * bytes, not starting or ending with '-'; one trailing dot allowed. */
static int parse_name(const char *s, size_t n, http_authority *a, char *why, size_t wlen)
{
    if (n > 1 && s[n - 1] == '.')
        n--;
    if (!n)
        return fail(why, wlen, "empty host");
    if (n > HTTP_HOST_MAX)
        return fail(why, wlen, "host name too long");
    size_t lab = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            if (!lab)
                return fail(why, wlen, "empty label in the host name");
            if (lab > 63)
                return fail(why, wlen, "host name label longer than 63 bytes");
            if (s[i - 1] == '-' || s[i - lab] == '-')
                return fail(why, wlen, "host name label starts or ends with '-'");
            lab = 0;
            continue;
        }
        if (!is_alpha(s[i]) && !is_digit(s[i]) && s[i] != '-' && s[i] != '_')
            return fail(why, wlen, "malformed host name");
        lab++;
    }
    if (ends_in_number(s, n)) {
        uint32_t v;
        if (parse_v4(s, n, &v) < 0)
            return fail(why, wlen, "malformed IPv4 address");
        snprintf(a->host, sizeof a->host, "%u.%u.%u.%u", v >> 24, (v >> 16) & 255, (v >> 8) & 255,
                 v & 255);
        a->kind = HTTP_HOST_IPV4;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        a->host[i] = (char)lower(s[i]);
    a->host[n] = 0;
    a->kind = HTTP_HOST_NAME;
    return 0;
}

int http_parse_authority(const char *s, size_t n, const char *defport, http_authority *a, char *why,
                         size_t wlen)
{
    memset(a, 0, sizeof *a);
    if (memchr(s, '@', n))
        return fail(why, wlen, "user information in the authority is not supported");
    const char *port = NULL, *end = s + n;
    if (n && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb)
            return fail(why, wlen, "unterminated IPv6 literal");
        if (rb + 1 < end && rb[1] != ':')
            return fail(why, wlen, "junk after the IPv6 literal");
        if (rb + 1 < end)
            port = rb + 2;
        if (parse_ip_literal(s + 1, (size_t)(rb - s - 1), a, why, wlen) < 0)
            return -1;
    } else {
        /* neither a reg-name nor an IPv4 address has a ':', so the first
         * one ends the host and all the rest must be the port */
        const char *colon = memchr(s, ':', n);
        if (colon)
            port = colon + 1;
        if (parse_name(s, (size_t)((colon ? colon : end) - s), a, why, wlen) < 0)
            return -1;
    }
    size_t plen = port ? (size_t)(end - port) : 0;
    if (!plen) {
        if (!defport)
            return fail(why, wlen, "a port is required (host:port)");
        port = defport;
        plen = strlen(defport);
    }
    unsigned long pv = 0;
    for (size_t i = 0; i < plen; i++) {
        if (!is_digit(port[i]))
            return fail(why, wlen, "malformed port");
        pv = pv * 10 + (unsigned long)(port[i] - '0');
        if (pv > 65535)
            return fail(why, wlen, "port out of range (1-65535)");
    }
    if (pv == 0)
        return fail(why, wlen, "port out of range (1-65535)");
    snprintf(a->port, sizeof a->port, "%lu", pv);
    return 0;
}

/* ---- request heads ---- */

size_t http_head_len(const char *buf, size_t len)
{
    const char *e = memmem(buf, len, "\r\n\r\n", 4);
    return e ? (size_t)(e - buf) + 4 : 0;
}

static int bad(char *why, size_t wlen, const char *msg)
{
    snprintf(why, wlen, "%s", msg);
    return 400;
}

static int name_is(const char *h, http_span s, const char *want)
{
    return strlen(want) == s.len && strncasecmp(h + s.off, want, s.len) == 0;
}

int http_parse_request(const char *h, size_t hlen, http_request *rq, char *why, size_t wlen)
{
    memset(rq, 0, sizeof *rq);
    if (hlen < 4 || memcmp(h + hlen - 4, "\r\n\r\n", 4))
        return bad(why, wlen, "incomplete request head");
    /* CR only before LF, LF only after CR; no NUL or other control byte
     * except HTAB (in header values) */
    for (size_t i = 0; i < hlen; i++) {
        unsigned char ch = (unsigned char)h[i];
        if ((ch == '\n' && (!i || h[i - 1] != '\r')) || (ch == '\r' && h[i + 1] != '\n') || ch == 0)
            return bad(why, wlen, "malformed request head (bare CR/LF or NUL)");
        if ((ch < ' ' && ch != '\r' && ch != '\n' && ch != '\t') || ch == 0x7f)
            return bad(why, wlen, "malformed request head (control character)");
    }
    const char *eol = memmem(h, hlen, "\r\n", 2);
    size_t ll = (size_t)(eol - h);
    /* request line: METHOD SP target SP HTTP/1.x */
    const char *sp1 = memchr(h, ' ', ll);
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    if (!sp1 || !sp2 || sp1 == h || sp2 == sp1 + 1 || sp1 - h > METHOD_MAX)
        return bad(why, wlen, "malformed request line");
    for (const char *q = h; q < sp1; q++)
        if (!tchar(*q))
            return bad(why, wlen, "malformed method");
    for (const char *q = sp1 + 1; q < sp2; q++)
        if ((unsigned char)*q <= ' ' || *q == 0x7f)
            return bad(why, wlen, "malformed request target");
    rq->method = (http_span){0, (size_t)(sp1 - h)};
    rq->target = (http_span){(size_t)(sp1 + 1 - h), (size_t)(sp2 - sp1 - 1)};
    rq->version = (http_span){(size_t)(sp2 + 1 - h), (size_t)(eol - sp2 - 1)};
    if (rq->version.len != 8 || (memcmp(sp2 + 1, "HTTP/1.1", 8) && memcmp(sp2 + 1, "HTTP/1.0", 8)))
        return bad(why, wlen, "only HTTP/1.0 and HTTP/1.1 are served");
    /* headers: token ":" value; a line starting with SP/HTAB (folding) has
     * no valid name */
    rq->headers = ll + 2;
    const char *end = h + hlen - 2; /* the final empty line */
    size_t conn_bytes = 0;
    for (const char *l = h + rq->headers; l < end;) {
        const char *le = memmem(l, (size_t)(end + 2 - l), "\r\n", 2);
        const char *colon = memchr(l, ':', (size_t)(le - l));
        if (!colon || colon == l)
            return bad(why, wlen, "malformed header line");
        for (const char *q = l; q < colon; q++)
            if (!tchar(*q))
                return bad(why, wlen, "malformed header name");
        http_span name = {(size_t)(l - h), (size_t)(colon - l)};
        if (name_is(h, name, "connection")) {
            if (rq->nconn == HTTP_CONN_HDRS_MAX)
                return bad(why, wlen, "too many Connection headers");
            rq->conn[rq->nconn++] = (http_span){(size_t)(colon + 1 - h), (size_t)(le - colon - 1)};
            conn_bytes += (size_t)(le - colon - 1);
            if (conn_bytes > CONN_VALUES_MAX)
                return bad(why, wlen, "Connection headers too long");
        }
        l = le + 2;
    }
    const char *target = h + rq->target.off;
    size_t tlen = rq->target.len;
    if (rq->method.len == 7 && !memcmp(h, "CONNECT", 7)) {
        rq->is_connect = 1;
        char w[128];
        if (http_parse_authority(target, tlen, NULL, &rq->auth, w, sizeof w) < 0) {
            snprintf(why, wlen, "CONNECT needs host:port: %s", w);
            return 400;
        }
        return 0;
    }
    if (tlen >= 8 && !strncasecmp(target, "https://", 8))
        return bad(why, wlen, "https:// URLs go through CONNECT (set https_proxy)");
    if (tlen < 8 || strncasecmp(target, "http://", 7))
        return bad(why, wlen,
                   "this is an HTTP proxy: it serves absolute http:// URLs and "
                   "CONNECT; set http_proxy/https_proxy to http://127.0.0.1:3128");
    const char *auth = target + 7, *tend = target + tlen, *p = auth;
    while (p < tend && *p != '/' && *p != '?' && *p != '#')
        p++;
    if (memchr(p, '#', (size_t)(tend - p)))
        return bad(why, wlen, "a fragment (#) in the request target");
    rq->url_auth = (http_span){(size_t)(auth - h), (size_t)(p - auth)};
    rq->path = (http_span){(size_t)(p - h), (size_t)(tend - p)};
    char w[128];
    if (http_parse_authority(auth, (size_t)(p - auth), "80", &rq->auth, w, sizeof w) < 0) {
        snprintf(why, wlen, "malformed host in the URL: %s", w);
        return 400;
    }
    return 0;
}

/* Whether the header named h[name] is listed in a Connection header. */
static int conn_listed(const char *h, const http_request *rq, http_span name)
{
    for (size_t k = 0; k < rq->nconn; k++) {
        const char *t = h + rq->conn[k].off;
        size_t n = rq->conn[k].len;
        for (size_t i = 0; i < n;) {
            while (i < n && (t[i] == ' ' || t[i] == ',' || t[i] == '\t'))
                i++;
            size_t s = i;
            while (i < n && t[i] != ',' && t[i] != ' ' && t[i] != '\t')
                i++;
            if (i > s && i - s == name.len && !strncasecmp(h + name.off, t + s, name.len))
                return 1;
        }
    }
    return 0;
}

typedef struct obuf {
    char *p;
    size_t len, cap;
    int over;
} obuf;

static void put(obuf *o, const char *s, size_t n)
{
    if (o->over || n > o->cap - o->len) {
        o->over = 1;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void puts0(obuf *o, const char *s) { put(o, s, strlen(s)); }

size_t http_forward_head(const char *h, size_t hlen, const http_request *rq, char *out, size_t cap)
{
    static const char *const hop[] =
        {"host", "connection", "proxy-connection", "keep-alive", "proxy-authorization",
         "te",   "upgrade",    "trailer"};
    obuf o = {out, 0, cap, 0};
    put(&o, h, rq->method.len + 1);
    if (!rq->path.len || h[rq->path.off] != '/')
        puts0(&o, "/");
    put(&o, h + rq->path.off, rq->path.len);
    put(&o, h + rq->version.off - 1, rq->version.len + 3); /* " HTTP/1.x\r\n" */
    puts0(&o, "Host: ");
    put(&o, h + rq->url_auth.off, rq->url_auth.len);
    puts0(&o, "\r\n");
    const char *end = h + hlen - 2;
    for (const char *l = h + rq->headers; l < end;) {
        const char *le = memmem(l, (size_t)(end + 2 - l), "\r\n", 2);
        const char *colon = memchr(l, ':', (size_t)(le - l));
        http_span name = {(size_t)(l - h), (size_t)(colon - l)};
        int drop = conn_listed(h, rq, name);
        for (size_t i = 0; !drop && i < sizeof hop / sizeof hop[0]; i++)
            drop = name_is(h, name, hop[i]);
        if (!drop)
            put(&o, l, (size_t)(le + 2 - l));
        l = le + 2;
    }
    puts0(&o, "Connection: close\r\n\r\n");
    return o.over ? 0 : o.len;
}

/* ---- response heads ---- */

static int resp_drop(const char *l, size_t n)
{
    const char *colon = memchr(l, ':', n);
    if (!colon)
        return 0;
    http_span name = {0, (size_t)(colon - l)};
    return name_is(l, name, "connection") || name_is(l, name, "keep-alive") ||
           name_is(l, name, "proxy-connection");
}

int http_response_close(char *s, size_t *len, size_t cap, size_t max_head, int at_eof)
{
    static const char close_hdr[] = "Connection: close\r\n\r\n";
    size_t n = *len;
    size_t hlen = http_head_len(s, n);
    if (!hlen)
        return n >= max_head || at_eof; /* not a head we understand: passed on */
    if (hlen < 14 || memcmp(s, "HTTP/1.", 7) || s[9] == '1')
        return 1; /* an interim 1xx or no status line: left as it is */
    char *e = s + hlen - 4;
    char *eol = memmem(s, hlen, "\r\n", 2);
    /* first the size: the kept lines, then the new Connection line */
    size_t keep = (size_t)(eol - s) + 2;
    for (char *l = eol + 2; l < e + 2;) {
        char *le = memmem(l, (size_t)(e + 4 - l), "\r\n", 2);
        if (!resp_drop(l, (size_t)(le - l)))
            keep += (size_t)(le - l) + 2;
        l = le + 2;
    }
    size_t nh = keep + sizeof close_hdr - 1;
    if (nh > cap || n - hlen > cap - nh)
        return 1;
    /* then in place: lines only move left, and the body moves once */
    size_t o = (size_t)(eol - s) + 2;
    for (char *l = eol + 2; l < e + 2;) {
        char *le = memmem(l, (size_t)(e + 4 - l), "\r\n", 2);
        size_t ln = (size_t)(le - l) + 2;
        if (!resp_drop(l, ln - 2)) {
            memmove(s + o, l, ln);
            o += ln;
        }
        l = le + 2;
    }
    memmove(s + nh, s + hlen, n - hlen);
    memcpy(s + o, close_hdr, sizeof close_hdr - 1);
    *len = nh + (n - hlen);
    return 1;
}
