/* rules.h - the egress rules of the HTTP proxy: domain globs and the
 * address ranges a sandbox may not reach unless it opted in. */
#ifndef LIS_NETRULES_H
#define LIS_NETRULES_H

#include "lis.h"

#include <stddef.h>

#include <sys/socket.h>

typedef struct lis_netrules {
    char **allow; /* globs; none given: every domain is allowed */
    size_t nallow;
    char **deny; /* globs; deny wins over allow */
    size_t ndeny;
    int allow_host_network; /* loopback, private and link-local destinations allowed */
} lis_netrules;

/* Copies the lists (NULL-terminated, may be NULL) and validates the globs. */
int lis_netrules_init(lis_netrules *r, const char *const *allow, const char *const *deny,
                      int allow_host_network, lis_error *err);
void lis_netrules_free(lis_netrules *r);

/* Normalises a host name in place: lower case, no trailing dot, no [] around
 * an IPv6 literal. Returns -1 when it is not a plausible host name. */
int lis_host_normalize(char *host);

/* The domain rules, before resolution. 0: allowed; -1: refused, *why says
 * which rule. */
int lis_netrules_check_host(const lis_netrules *r, const char *host, char *why, size_t len);

/* The address rules, after resolution. 0: allowed; -1: refused with *why. */
int lis_netrules_check_addr(const lis_netrules *r, const struct sockaddr *sa, char *why,
                            size_t len);

/* The non-public range an address falls in ("loopback", "private", ...), or
 * NULL for a public address. */
const char *lis_addr_range(const struct sockaddr *sa);

#endif
