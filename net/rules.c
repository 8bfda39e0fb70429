/* rules.c - domain globs and non-public address ranges for the proxy.
 *
 * Order of the checks, as in Anthropic's sandbox-runtime and Codex's proxy:
 *   1. --deny-domain globs (deny wins),
 *   2. --allow-domain globs (when any is given, everything else is refused),
 *   3. after resolution, each address: loopback, private, link-local and the
 *      other non-public ranges are refused unless allow_host_network is set.
 * The address check runs on the address the proxy actually connects to, so
 * a name that resolves to 127.0.0.1 (DNS rebinding) is refused too. */
#include "net.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int valid_glob(const char *g)
{
    if (!*g || strlen(g) > 253)
        return 0;
    for (const char *p = g; *p; p++)
        if (!(isalnum((unsigned char)*p) || strchr(".-_*?[]:", *p)))
            return 0;
    return 1;
}

static int copy_list(const char *const *in, char ***out, size_t *n, const char *what,
                     lis_error *err)
{
    *out = NULL;
    *n = 0;
    size_t cnt = 0;
    while (in && in[cnt])
        cnt++;
    if (!cnt)
        return 0;
    char **v = calloc(cnt, sizeof *v);
    if (!v)
        return lis_oom(err);
    for (size_t i = 0; i < cnt; i++) {
        if (!valid_glob(in[i])) {
            free_list(v, i);
            return lis_fail(err, EINVAL,
                            "--%s '%s': expected a host name or a glob such as "
                            "*.example.com (letters, digits, . - _ * ? [ ] :)",
                            what, in[i]);
        }
        v[i] = strdup(in[i]);
        if (!v[i]) {
            free_list(v, i);
            return lis_oom(err);
        }
        lis_host_normalize(v[i]);
    }
    *out = v;
    *n = cnt;
    return 0;
}

int lis_netrules_init(lis_netrules *r, const char *const *allow, const char *const *deny,
                      int allow_host_network, lis_error *err)
{
    memset(r, 0, sizeof *r);
    r->allow_host_network = allow_host_network;
    if (copy_list(allow, &r->allow, &r->nallow, "allow-domain", err) < 0)
        return -1;
    if (copy_list(deny, &r->deny, &r->ndeny, "deny-domain", err) < 0) {
        lis_netrules_free(r);
        return -1;
    }
    return 0;
}

void lis_netrules_free(lis_netrules *r)
{
    free_list(r->allow, r->nallow);
    free_list(r->deny, r->ndeny);
    memset(r, 0, sizeof *r);
}

int lis_host_normalize(char *host)
{
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n -= 2] = 0;
    }
    if (n > 1 && host[n - 1] == '.')
        host[--n] = 0;
    if (n == 0 || n > 253)
        return -1;
    for (char *p = host; *p; p++) {
        *p = (char)tolower((unsigned char)*p);
        if (!(isalnum((unsigned char)*p) || strchr(".-_:%", *p)))
            return -1;
    }
    return 0;
}

int lis_netrules_check_host(const lis_netrules *r, const char *host, char *why, size_t len)
{
    for (size_t i = 0; i < r->ndeny; i++)
        if (fnmatch(r->deny[i], host, FNM_CASEFOLD) == 0) {
            snprintf(why, len, "%s is denied by --deny-domain '%s'", host, r->deny[i]);
            return -1;
        }
    if (!r->nallow)
        return 0;
    for (size_t i = 0; i < r->nallow; i++)
        if (fnmatch(r->allow[i], host, FNM_CASEFOLD) == 0)
            return 0;
    snprintf(why, len, "%s matches no --allow-domain pattern (allowed: %s%s)", host, r->allow[0],
             r->nallow > 1 ? ", ..." : "");
    return -1;
}

static const char *v4_range(uint32_t a)
{
    static const struct {
        uint32_t net, mask;
        const char *name;
    } r[] = {
        {0x00000000, 0xff000000, "this-network (0.0.0.0/8)"},
        {0x7f000000, 0xff000000, "loopback (127.0.0.0/8)"},
        {0x0a000000, 0xff000000, "private (10.0.0.0/8)"},
        {0xac100000, 0xfff00000, "private (172.16.0.0/12)"},
        {0xc0a80000, 0xffff0000, "private (192.168.0.0/16)"},
        {0xa9fe0000, 0xffff0000, "link-local (169.254.0.0/16)"},
        {0x64400000, 0xffc00000, "shared address space (100.64.0.0/10)"},
        {0xc0000000, 0xffffff00, "IETF protocol assignments (192.0.0.0/24)"},
        {0xc6120000, 0xfffe0000, "benchmarking (198.18.0.0/15)"},
        {0xe0000000, 0xf0000000, "multicast (224.0.0.0/4)"},
        {0xf0000000, 0xf0000000, "reserved (240.0.0.0/4)"},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        if ((a & r[i].mask) == r[i].net)
            return r[i].name;
    return NULL;
}

const char *lis_addr_range(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        return v4_range(ntohl(s4->sin_addr.s_addr));
    }
    if (sa->sa_family != AF_INET6)
        return "not an internet address";
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
    const uint8_t *b = s6->sin6_addr.s6_addr;
    static const uint8_t zero[16];
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
    if (!memcmp(b, zero, 15) && b[15] == 1)
        return "loopback (::1)";
    if (!memcmp(b, zero, 16))
        return "unspecified (::)";
    /* IPv4-mapped, IPv4-compatible and NAT64 forms carry an IPv4 address. */
    if (!memcmp(b, mapped, 12) || !memcmp(b, zero, 12) || !memcmp(b, nat64, 12)) {
        uint32_t a = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
        const char *r = v4_range(a);
        if (r)
            return r;
        if (!memcmp(b, zero, 12))
            return "IPv4-compatible (::/96)";
        return NULL;
    }
    if ((b[0] & 0xfe) == 0xfc)
        return "unique local (fc00::/7)";
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
        return "link-local (fe80::/10)";
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
        return "site-local (fec0::/10)";
    if (b[0] == 0xff)
        return "multicast (ff00::/8)";
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8)
        return "documentation (2001:db8::/32)";
    return NULL;
}

int lis_netrules_check_addr(const lis_netrules *r, const struct sockaddr *sa, char *why, size_t len)
{
    const char *range = lis_addr_range(sa);
    if (!range || (r->allow_host_network && sa->sa_family != AF_UNSPEC &&
                   (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)))
        return 0;
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof ip);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof ip);
    snprintf(why, len,
             "destination %s is in a %s range, refused by the non-public address "
             "rule (allow it with --allow-host-network)",
             ip, range);
    return -1;
}
