/* networks.c - Docker's user-defined networks on lis (what a compose file's
 * default network needs), rootless: a network is a set of members, each
 * with an address on the other members' loopback (127.80.0.0/16) and its
 * names (container name, aliases, short id) in their /etc/hosts; netrelay.c
 * carries the connections. A member keeps its own network mode (the
 * server's --net: none, or proxy with its egress rules): a network adds
 * reachability between its members and nothing else.
 *
 * The built-in networks (bridge, host, none) are the NetworkModes lis has
 * always had; they are listed, and are not user networks. */
#include "serve.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NET_BASE 0x7F500002u /* 127.80.0.2 */
#define NET_LAST 0x7F50FFFEu
#define HOSTS_MAX (64u << 10)

sv_network *sv_network_find(sv_server *s, const char *ref)
{
    if (!ref || !*ref)
        return NULL;
    for (sv_network *n = s->networks; n; n = n->next)
        if (!strcmp(n->id, ref) || !strcmp(n->name, ref))
            return n;
    sv_network *hit = NULL;
    size_t len = strlen(ref);
    for (sv_network *n = s->networks; n; n = n->next)
        if (!strncmp(n->id, ref, len)) {
            if (hit)
                return NULL; /* ambiguous */
            hit = n;
        }
    return hit;
}

sv_network *sv_network_new(sv_server *s, const char *name, const cJSON *labels,
                           const cJSON *options, int internal, int attachable)
{
    sv_network *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    sv_hexid(n->id);
    snprintf(n->name, sizeof n->name, "%s", name);
    n->labels = cJSON_IsObject(labels) ? cJSON_Duplicate(labels, 1) : cJSON_CreateObject();
    n->options = cJSON_IsObject(options) ? cJSON_Duplicate(options, 1) : cJSON_CreateObject();
    n->internal = internal;
    n->attachable = attachable;
    n->created = lis_wallclock();
    n->next = s->networks;
    s->networks = n;
    return n;
}

static void member_free(sv_netmember *m)
{
    sv_strv_free(m->aliases);
    free(m);
}

void sv_network_free(sv_server *s, sv_network *n)
{
    for (sv_network **pp = &s->networks; *pp; pp = &(*pp)->next)
        if (*pp == n) {
            *pp = n->next;
            break;
        }
    while (n->members) {
        sv_netmember *m = n->members;
        n->members = m->next;
        sv_netrelay_forget(s, m->c);
        member_free(m);
    }
    cJSON_Delete(n->labels);
    cJSON_Delete(n->options);
    free(n);
}

static sv_netmember *member_of(const sv_network *n, const sv_container *c)
{
    for (sv_netmember *m = n->members; m; m = m->next)
        if (m->c == c)
            return m;
    return NULL;
}

static void ipstr(uint32_t ip, char *out, size_t len)
{
    struct in_addr a = {.s_addr = htonl(ip)};
    if (!inet_ntop(AF_INET, &a, out, (socklen_t)len))
        snprintf(out, len, "127.0.0.1");
}

static void host_of(const sv_container *c, char *out, size_t len)
{
    snprintf(out, len, "%.63s", c->copts.hostname[0] ? c->copts.hostname : c->id);
    if (!c->copts.hostname[0])
        out[len > 12 ? 12 : len - 1] = 0;
}

/* Appends one hosts line: ip, then the member's names. */
static void hosts_line(char *buf, size_t *len, const char *ip, const sv_container *c,
                       const sv_netmember *m)
{
    char host[64];
    host_of(c, host, sizeof host);
    *len += (size_t)snprintf(buf + *len, *len < HOSTS_MAX ? HOSTS_MAX - *len : 0, "%s\t%s %s %.12s",
                             ip, c->name, host, c->id);
    for (size_t i = 0; m && m->aliases && m->aliases[i] && *len < HOSTS_MAX; i++)
        *len += (size_t)snprintf(buf + *len, HOSTS_MAX - *len, " %s", m->aliases[i]);
    if (*len < HOSTS_MAX)
        *len += (size_t)snprintf(buf + *len, HOSTS_MAX - *len, "\n");
}

/* c's /etc/hosts: itself on 127.0.0.1, each member of its networks on its
 * address. A small write into the sandbox's upper layer, on the loop thread
 * (no process, no wait on anything but the local disk). */
static void hosts_write(sv_container *c)
{
    if (!c->sb)
        return;
    char *buf = malloc(HOSTS_MAX + 1);
    if (!buf)
        return;
    size_t len = (size_t)snprintf(buf, HOSTS_MAX,
                                  "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost "
                                  "ip6-loopback\n");
    for (sv_network *n = c->s->networks; n; n = n->next) {
        sv_netmember *me = member_of(n, c);
        if (!me)
            continue;
        hosts_line(buf, &len, "127.0.0.1", c, me);
        for (sv_netmember *m = n->members; m; m = m->next) {
            char ip[32];
            ipstr(m->ip, ip, sizeof ip);
            if (m != me)
                hosts_line(buf, &len, ip, m->c, m);
        }
    }
    lis_error err = {0};
    if (len < HOSTS_MAX && lis_file_write(c->sb, "/etc/hosts", buf, len, 0644, &err) < 0)
        fprintf(stderr, "lis serve: writing %s's /etc/hosts: %s\n", c->name, err.msg);
    free(buf);
}

static void hosts_refresh(sv_network *n)
{
    for (sv_netmember *m = n->members; m; m = m->next)
        hosts_write(m->c);
}

int sv_net_join(sv_network *n, sv_container *c, const cJSON *aliases, char *msg, size_t mlen)
{
    if (member_of(n, c)) {
        snprintf(msg, mlen, "endpoint with name %s already exists in network %s", c->name, n->name);
        return -1;
    }
    sv_netmember *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(msg, mlen, "out of memory");
        return -1;
    }
    m->c = c;
    /* names a hosts line can carry: no blanks, no comment */
    size_t k = 0, na = cJSON_IsArray(aliases) ? (size_t)cJSON_GetArraySize(aliases) : 0;
    m->aliases = calloc(na + 1, sizeof *m->aliases);
    const cJSON *a, *list = na ? aliases : NULL;
    cJSON_ArrayForEach(a, list)
    {
        char *d = m->aliases && cJSON_IsString(a) && a->valuestring[0] &&
                          strlen(a->valuestring) < 256 && !strpbrk(a->valuestring, " \t\r\n#")
                      ? strdup(a->valuestring)
                      : NULL;
        if (d)
            m->aliases[k++] = d;
    }
    sv_server *s = c->s;
    m->ip = s->net_next_ip < NET_BASE || s->net_next_ip > NET_LAST ? NET_BASE : s->net_next_ip;
    s->net_next_ip = m->ip + 1;
    sv_hexid(m->endpoint);
    m->next = n->members;
    n->members = m;
    hosts_refresh(n);
    sv_netrelay_kick(s);
    return 0;
}

void sv_net_leave(sv_network *n, sv_container *c)
{
    for (sv_netmember **pp = &n->members; *pp; pp = &(*pp)->next)
        if ((*pp)->c == c) {
            sv_netmember *m = *pp;
            *pp = m->next;
            member_free(m);
            sv_netrelay_forget(c->s, c);
            return;
        }
}

void sv_net_leave_all(sv_container *c)
{
    for (sv_network *n = c->s->networks; n; n = n->next)
        sv_net_leave(n, c);
    sv_netrelay_forget(c->s, c);
}

/* The user network a create body names (NetworkMode), or NULL. */
static const char *create_network(const cJSON *cfg)
{
    const cJSON *hc = cJSON_GetObjectItemCaseSensitive(cfg, "HostConfig");
    const char *nm = sv_jstr(hc, "NetworkMode");
    static const char *const builtin[] = {"default", "bridge", "none", "host", "proxy"};
    if (!nm || strchr(nm, ':')) /* container:ID and the like: refused by create.c */
        return NULL;
    for (size_t i = 0; i < sizeof builtin / sizeof *builtin; i++)
        if (!strcmp(nm, builtin[i]))
            return NULL;
    return nm;
}

/* Nothing set: null, false, 0, "", or a list or object of such (what the
 * docker CLI sends for every endpoint field it does not use). */
static int blank(const cJSON *v)
{
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v) || (cJSON_IsNumber(v) && v->valuedouble == 0) ||
        (cJSON_IsString(v) && !v->valuestring[0]))
        return 1;
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v))
        return 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
    {
        if (!blank(e))
            return 0;
    }
    return 1;
}

int sv_net_check_create(sv_server *s, const cJSON *cfg, char *msg, size_t mlen)
{
    const char *nm = create_network(cfg);
    const cJSON *nc = cJSON_GetObjectItemCaseSensitive(cfg, "NetworkingConfig");
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(nc, "EndpointsConfig"), *e, *k;
    sv_network *n = nm ? sv_network_find(s, nm) : NULL;
    if (nm && !n) {
        snprintf(msg, mlen, "network %.200s not found", nm);
        return -1;
    }
    cJSON_ArrayForEach(e, eps)
    {
        if (blank(e)) /* the CLI's endpoint of the default network, with nothing in it */
            continue;
        if (!n || sv_network_find(s, e->string) != n) {
            snprintf(msg, mlen,
                     "NetworkingConfig.EndpointsConfig %.200s is refused: a container joins one "
                     "user-defined network at create, the one of its NetworkMode (%s); connect "
                     "it to others",
                     e->string, nm ? nm : "none given");
            return -1;
        }
        cJSON_ArrayForEach(k, e)
        {
            if (strcmp(k->string, "Aliases") && !blank(k)) {
                snprintf(msg, mlen,
                         "EndpointsConfig.%s is refused: a lis network gives each container a "
                         "loopback address of its own choosing",
                         k->string);
                return -1;
            }
        }
    }
    return n != NULL;
}

int sv_net_join_created(sv_container *c, char *msg, size_t mlen)
{
    const char *nm = create_network(c->config);
    sv_network *n = nm ? sv_network_find(c->s, nm) : NULL;
    if (!nm)
        return 0;
    if (!n) { /* removed while the sandbox was made */
        snprintf(msg, mlen, "network %.200s not found", nm);
        return -1;
    }
    const cJSON *nc = cJSON_GetObjectItemCaseSensitive(c->config, "NetworkingConfig");
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(nc, "EndpointsConfig"), *e, *aliases = NULL;
    cJSON_ArrayForEach(e, eps)
    {
        if (sv_network_find(c->s, e->string) == n)
            aliases = cJSON_GetObjectItemCaseSensitive(e, "Aliases");
    }
    return sv_net_join(n, c, aliases, msg, mlen);
}

static cJSON *endpoint_json(const sv_network *n, const sv_netmember *m)
{
    cJSON *o = cJSON_CreateObject();
    char ip[32];
    ipstr(m->ip, ip, sizeof ip);
    cJSON_AddNullToObject(o, "IPAMConfig");
    cJSON_AddNullToObject(o, "Links");
    cJSON *al = cJSON_AddArrayToObject(o, "Aliases");
    for (size_t i = 0; m->aliases && m->aliases[i]; i++)
        cJSON_AddItemToArray(al, cJSON_CreateString(m->aliases[i]));
    char shortid[13];
    snprintf(shortid, sizeof shortid, "%.12s", m->c->id);
    cJSON_AddItemToArray(al, cJSON_CreateString(shortid)); /* as dockerd (compose checks it) */
    cJSON_AddStringToObject(o, "NetworkID", n->id);
    cJSON_AddStringToObject(o, "EndpointID", m->endpoint);
    cJSON_AddStringToObject(o, "Gateway", "");
    cJSON_AddStringToObject(o, "IPAddress", ip);
    cJSON_AddNumberToObject(o, "IPPrefixLen", 16);
    cJSON_AddStringToObject(o, "MacAddress", "");
    return o;
}

cJSON *sv_net_container_json(const sv_container *c)
{
    cJSON *o = cJSON_CreateObject();
    for (const sv_network *n = c->s->networks; n; n = n->next) {
        const sv_netmember *m = member_of(n, c);
        if (m)
            cJSON_AddItemToObject(o, n->name, endpoint_json(n, m));
    }
    if (o->child)
        return o;
    /* no user network: the built-in one of its NetworkMode ("bridge" for the
     * default, whatever the server's --net gives it), as dockerd names it */
    const cJSON *hc = cJSON_GetObjectItemCaseSensitive(c->config, "HostConfig");
    const char *nm = sv_jstr(hc, "NetworkMode");
    if (sv_jbool(c->config, "NetworkDisabled"))
        nm = "none";
    cJSON *e = cJSON_AddObjectToObject(o, !nm || !strcmp(nm, "default") ? "bridge" : nm);
    cJSON_AddNullToObject(e, "Aliases");
    cJSON_AddStringToObject(e, "NetworkID", "");
    cJSON_AddStringToObject(e, "EndpointID", "");
    cJSON_AddStringToObject(e, "IPAddress", "");
    return o;
}

cJSON *sv_network_json(const sv_network *n)
{
    cJSON *o = cJSON_CreateObject();
    char t[64];
    cJSON_AddStringToObject(o, "Name", n->name);
    cJSON_AddStringToObject(o, "Id", n->id);
    sv_rfc3339(n->created, t, sizeof t);
    cJSON_AddStringToObject(o, "Created", t);
    cJSON_AddStringToObject(o, "Scope", "local");
    cJSON_AddStringToObject(o, "Driver", "bridge");
    cJSON_AddBoolToObject(o, "EnableIPv6", 0);
    cJSON *ipam = cJSON_AddObjectToObject(o, "IPAM");
    cJSON_AddStringToObject(ipam, "Driver", "default");
    cJSON_AddNullToObject(ipam, "Options");
    cJSON *cf = cJSON_AddArrayToObject(ipam, "Config");
    cJSON *sub = cJSON_CreateObject();
    cJSON_AddStringToObject(sub, "Subnet", "127.80.0.0/16");
    cJSON_AddItemToArray(cf, sub);
    cJSON_AddBoolToObject(o, "Internal", n->internal);
    cJSON_AddBoolToObject(o, "Attachable", n->attachable);
    cJSON_AddBoolToObject(o, "Ingress", 0);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "ConfigFrom"), "Network", "");
    cJSON_AddBoolToObject(o, "ConfigOnly", 0);
    cJSON *cs = cJSON_AddObjectToObject(o, "Containers");
    for (const sv_netmember *m = n->members; m; m = m->next) {
        cJSON *e = cJSON_AddObjectToObject(cs, m->c->id);
        char ip[40];
        ipstr(m->ip, ip, sizeof ip - 3);
        strcat(ip, "/16");
        cJSON_AddStringToObject(e, "Name", m->c->name);
        cJSON_AddStringToObject(e, "EndpointID", m->endpoint);
        cJSON_AddStringToObject(e, "MacAddress", "");
        cJSON_AddStringToObject(e, "IPv4Address", ip);
        cJSON_AddStringToObject(e, "IPv6Address", "");
    }
    cJSON_AddItemToObject(o, "Options", cJSON_Duplicate(n->options, 1));
    cJSON_AddItemToObject(o, "Labels", cJSON_Duplicate(n->labels, 1));
    return o;
}
