/* http_head.h - the egress proxy's parsing of HTTP/1.x heads and authorities.
 *
 * Pure functions on caller buffers: no I/O, no allocation, no global state and
 * nothing of the runtime, so the fuzzers (fuzz/) and the unit tests drive them
 * directly and the code can move with the proxy as it is. */
#ifndef LIS_HTTP_HEAD_H
#define LIS_HTTP_HEAD_H

#include <stddef.h>

#define HTTP_HOST_MAX 253    /* a DNS name; every literal is shorter */
#define HTTP_CONN_HDRS_MAX 8 /* Connection header lines per request */

enum http_host_kind { HTTP_HOST_NAME, HTTP_HOST_IPV4, HTTP_HOST_IPV6 };

/* A parsed authority. host is canonical, which is what the rules compare and
 * the resolver gets: a name in lower case without its trailing dot; an IPv4
 * address in dotted-quad form whatever numeric form it was written in
 * (2130706433, 0x7f.1, 017700000001 are 127.0.0.1); an IPv6 address as
 * inet_ntop writes it, without [], with "%zone" when it had "%25zone". */
typedef struct http_authority {
    int kind; /* enum http_host_kind */
    char host[HTTP_HOST_MAX + 1];
    char port[6]; /* decimal, 1..65535, no leading zeros */
} http_authority;

/* Parses an RFC 3986 authority "host[:port]" of n bytes (userinfo refused).
 * defport is used when there is no port or an empty one; NULL makes the port
 * required. Returns 0, or -1 with *why saying what is wrong. */
int http_parse_authority(const char *s, size_t n, const char *defport, http_authority *a, char *why,
                         size_t wlen);

typedef struct http_span {
    size_t off, len; /* into the head */
} http_span;

typedef struct http_request {
    int is_connect; /* CONNECT host:port; else an absolute http:// URL */
    http_authority auth;
    http_span method, target, version;
    http_span url_auth;                 /* the authority as written in the URL (plain HTTP) */
    http_span path;                     /* path and query (plain HTTP); may be empty */
    size_t headers;                     /* offset of the first header line */
    http_span conn[HTTP_CONN_HDRS_MAX]; /* values of the Connection headers */
    size_t nconn;
} http_request;

/* Length of the request or response head at the start of buf (through the
 * empty line), or 0 when buf holds no complete head yet. */
size_t http_head_len(const char *buf, size_t len);

/* Parses a request head of hlen bytes (http_head_len). Served: CONNECT
 * host:port and absolute http:// URLs, HTTP/1.0 and HTTP/1.1. Bare CR or LF,
 * NUL and other control bytes, obsolete line folding, malformed names and
 * authorities are refused. Returns 0, or an HTTP status (400) with *why. */
int http_parse_request(const char *head, size_t hlen, http_request *rq, char *why, size_t wlen);

/* Writes the head to send upstream for a plain-HTTP request that
 * http_parse_request accepted: "METHOD /path VERSION", Host from the URL, the
 * end-to-end headers, "Connection: close". Returns its length, or 0 when it
 * does not fit in cap bytes. */
size_t http_forward_head(const char *head, size_t hlen, const http_request *rq, char *out,
                         size_t cap);

/* The upstream's response, for a connection that closes after it: with a
 * complete final (not 1xx) HTTP/1.x head at the start of buf[0..*len), the
 * head is rewritten in place to say Connection: close (Connection,
 * Keep-Alive and Proxy-Connection dropped) and the bytes after it are kept.
 * Left as it is when it is not such a head or the result would exceed cap.
 * Returns 1 when done with the head (rewritten or passed on as it is), 0
 * when more bytes are needed: no complete head yet, below max_head bytes and
 * not at_eof. */
int http_response_close(char *buf, size_t *len, size_t cap, size_t max_head, int at_eof);

#endif
