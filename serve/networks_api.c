/* networks_api.c - GET /networks (filters), GET /networks/{id}, POST
 * /networks/create, /networks/{id}/connect and /disconnect, DELETE
 * /networks/{id}, POST /networks/prune (networks.c holds them); and
 * /volumes, which lis does not have: listed empty, creation refused. Every
 * option lis cannot give is refused in one line, never ignored. */
#include "serve.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The built-in networks: the NetworkModes of lis (ids are constants). */
static const struct builtin {
    const char *name, *driver, *id;
} builtins[] = {
    {"bridge", "bridge", "6272696467650000000000000000000000000000000000000000000000000001"},
    {"host", "host", "686f737400000000000000000000000000000000000000000000000000000002"},
    {"none", "null", "6e6f6e6500000000000000000000000000000000000000000000000000000003"},
};
#define NBUILTIN (sizeof builtins / sizeof *builtins)

static const struct builtin *builtin_find(const char *ref)
{
    for (size_t i = 0; i < NBUILTIN; i++)
        if (!strcmp(builtins[i].name, ref) ||
            (strlen(ref) >= 3 && !strncmp(builtins[i].id, ref, strlen(ref))))
            return &builtins[i];
    return NULL;
}

static cJSON *builtin_json(const struct builtin *b)
{
    cJSON *o = cJSON_CreateObject();
    char t[64];
    cJSON_AddStringToObject(o, "Name", b->name);
    cJSON_AddStringToObject(o, "Id", b->id);
    sv_rfc3339(0, t, sizeof t);
    cJSON_AddStringToObject(o, "Created", t);
    cJSON_AddStringToObject(o, "Scope", "local");
    cJSON_AddStringToObject(o, "Driver", b->driver);
    cJSON_AddBoolToObject(o, "EnableIPv6", 0);
    cJSON *ipam = cJSON_AddObjectToObject(o, "IPAM");
    cJSON_AddStringToObject(ipam, "Driver", "default");
    cJSON_AddNullToObject(ipam, "Options");
    cJSON_AddArrayToObject(ipam, "Config");
    cJSON_AddBoolToObject(o, "Internal", 0);
    cJSON_AddBoolToObject(o, "Attachable", 0);
    cJSON_AddBoolToObject(o, "Ingress", 0);
    cJSON_AddObjectToObject(o, "Containers");
    cJSON_AddObjectToObject(o, "Options");
    cJSON_AddObjectToObject(o, "Labels");
    return o;
}

/* ---- list ------------------------------------------------------------------------------ */

static const char *const net_filters[] = {"dangling", "driver", "id",   "label",
                                          "name",     "scope",  "type", NULL};

/* What a listed network is, for the filters. */
typedef struct net_view {
    const char *name, *id, *driver;
    const cJSON *labels;
    int builtin, members;
} net_view;

static int m_name(const void *o, const char *v)
{
    return sv_filter_regex(v, ((net_view *)o)->name);
}
static int m_id(const void *o, const char *v) { return sv_filter_regex(v, ((net_view *)o)->id); }
static int m_driver(const void *o, const char *v) { return !strcmp(v, ((net_view *)o)->driver); }
static int m_scope(const void *o, const char *v) { return !strcmp(v, "local"); }
static int m_type(const void *o, const char *v)
{
    return !strcmp(v, ((net_view *)o)->builtin ? "builtin" : "custom");
}

static int net_match(const cJSON *f, const net_view *v, int dangling_given, int dangling)
{
    if (dangling_given && dangling != (!v->builtin && !v->members))
        return 0;
    return sv_filter_any(f, "name", m_name, v) && sv_filter_any(f, "id", m_id, v) &&
           sv_filter_any(f, "driver", m_driver, v) && sv_filter_any(f, "scope", m_scope, v) &&
           sv_filter_any(f, "type", m_type, v) && sv_filter_labels(f, "label", v->labels);
}

static enum MHD_Result list(sv_req *q)
{
    char msg[600];
    cJSON *f;
    int dangling,
        dg = sv_filters_dangling(sv_arg(q, "filters"), net_filters, &f, &dangling, msg, sizeof msg);
    if (dg < 0)
        return sv_reply_error(q, 400, "%s", msg);
    const cJSON *e;
    cJSON_ArrayForEach(e, sv_filter(f, "type"))
    {
        if (strcmp(e->valuestring, "custom") && strcmp(e->valuestring, "builtin")) {
            cJSON_Delete(f);
            return sv_reply_error(q, 400, "Invalid filter: 'type'='%.200s'", e->valuestring);
        }
    }
    cJSON *a = cJSON_CreateArray(), *empty = cJSON_CreateObject();
    for (size_t i = 0; i < NBUILTIN; i++) {
        net_view v = {builtins[i].name, builtins[i].id, builtins[i].driver, empty, 1, 0};
        if (net_match(f, &v, dg, dangling))
            cJSON_AddItemToArray(a, builtin_json(&builtins[i]));
    }
    for (sv_network *n = q->s->networks; n; n = n->next) {
        net_view v = {n->name, n->id, "bridge", n->labels, 0, n->members != NULL};
        if (net_match(f, &v, dg, dangling))
            cJSON_AddItemToArray(a, sv_network_json(n));
    }
    cJSON_Delete(empty);
    cJSON_Delete(f);
    return sv_reply_json(q, 200, a);
}

/* ---- create ------------------------------------------------------------------------------ */

static int valid_name(const char *n)
{
    if (!isalnum((unsigned char)n[0]) || strlen(n) >= sizeof((sv_network *)0)->name)
        return 0;
    for (const char *p = n; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.-", *p))
            return 0;
    return 1;
}

static int truthy(const cJSON *v)
{
    return v && !cJSON_IsNull(v) && !cJSON_IsFalse(v) &&
           !(cJSON_IsString(v) && !v->valuestring[0]) &&
           !((cJSON_IsObject(v) || cJSON_IsArray(v)) && !v->child);
}

/* What lis cannot give a network, refused: 0, or -1 with msg. */
static int create_refused(const cJSON *b, char *msg, size_t mlen)
{
    static const char *const known[] = {"Name",       "CheckDuplicate", "Driver", "Internal",
                                        "Attachable", "Ingress",        "IPAM",   "EnableIPv6",
                                        "Options",    "Labels",         "Scope",  "ConfigOnly",
                                        "ConfigFrom"};
    const cJSON *k;
    cJSON_ArrayForEach(k, b)
    {
        int ok = 0;
        for (size_t i = 0; i < sizeof known / sizeof *known; i++)
            ok |= !strcmp(known[i], k->string);
        if (!ok && truthy(k))
            return snprintf(msg, mlen, "%.100s is refused: lis serve does not know it", k->string),
                   -1;
    }
    const char *drv = sv_jstr(b, "Driver"), *scope = sv_jstr(b, "Scope");
    if (drv && strcmp(drv, "bridge"))
        return snprintf(msg, mlen,
                        "Driver %.100s is refused: a lis network is a relay between its members' "
                        "namespaces (driver bridge)",
                        drv),
               -1;
    if (scope && strcmp(scope, "local"))
        return snprintf(msg, mlen, "Scope %.100s is refused: lis networks are local", scope), -1;
    const char *why = NULL, *what = NULL;
    const cJSON *ipam = cJSON_GetObjectItemCaseSensitive(b, "IPAM");
    const char *ipd = sv_jstr(ipam, "Driver");
    if (truthy(cJSON_GetObjectItemCaseSensitive(b, "Options")))
        what = "Options", why = "the bridge driver's options do not apply to a relay";
    else if (truthy(cJSON_GetObjectItemCaseSensitive(ipam, "Config")) ||
             truthy(cJSON_GetObjectItemCaseSensitive(ipam, "Options")) ||
             (ipd && strcmp(ipd, "default")))
        what = "IPAM", why = "each member gets a loopback address of lis's choosing";
    else if (sv_jbool(b, "EnableIPv6"))
        what = "EnableIPv6", why = "the members' addresses are IPv4 loopback ones";
    else if (sv_jbool(b, "Internal"))
        what = "Internal", why = "a member's egress is its own network mode's (the server's --net)";
    else if (sv_jbool(b, "Ingress") || sv_jbool(b, "ConfigOnly") ||
             truthy(cJSON_GetObjectItemCaseSensitive(b, "ConfigFrom")))
        what = "Ingress, ConfigOnly and ConfigFrom", why = "they are swarm's";
    if (what)
        return snprintf(msg, mlen, "%s is refused: %s", what, why), -1;
    return 0;
}

/* What one server holds: each network is small, but a client makes them at will. */
#define NETWORKS_MAX 1000

static int count(const sv_server *s)
{
    int n = 0;
    for (const sv_network *k = s->networks; k; k = k->next)
        n++;
    return n;
}

static enum MHD_Result create(sv_req *q)
{
    cJSON *b = q->len ? cJSON_ParseWithLength(q->body, q->len) : NULL;
    char msg[600];
    const char *name = sv_jstr(b, "Name");
    enum MHD_Result r;
    if (!cJSON_IsObject(b))
        r = sv_reply_error(q, 400, "the body is not a JSON object");
    else if (!name || !valid_name(name))
        r = sv_reply_error(q, 400,
                           "invalid network name \"%.200s\": only [a-zA-Z0-9][a-zA-Z0-9_.-]",
                           name ? name : "");
    else if (builtin_find(name) && !strcmp(builtin_find(name)->name, name))
        r = sv_reply_error(q, 403, "%s is a pre-defined network and cannot be created", name);
    else if (sv_network_find(q->s, name) && !strcmp(sv_network_find(q->s, name)->name, name))
        r = sv_reply_error(q, 409, "network with name %s already exists", name);
    else if (count(q->s) >= NETWORKS_MAX)
        r = sv_reply_error(q, 403, "too many networks (at most %d): remove some first",
                           NETWORKS_MAX);
    else if (create_refused(b, msg, sizeof msg) < 0)
        r = sv_reply_error(q, 400, "%s", msg);
    else {
        sv_network *n = sv_network_new(q->s, name, cJSON_GetObjectItemCaseSensitive(b, "Labels"),
                                       cJSON_GetObjectItemCaseSensitive(b, "Options"), 0,
                                       sv_jbool(b, "Attachable"));
        if (!n)
            r = sv_reply_error(q, 500, "out of memory");
        else {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "Id", n->id);
            cJSON_AddStringToObject(o, "Warning", "");
            r = sv_reply_json(q, 201, o);
        }
    }
    cJSON_Delete(b);
    return r;
}

/* ---- connect, disconnect, remove, prune ------------------------------------------------------ */

static enum MHD_Result connect_op(sv_req *q, sv_network *n, int connect)
{
    cJSON *b = q->len ? cJSON_ParseWithLength(q->body, q->len) : NULL;
    const char *ref = sv_jstr(b, "Container");
    sv_container *c = ref ? sv_container_find(q->s, ref) : NULL;
    char msg[600];
    enum MHD_Result r;
    if (!c || sv_removing(c))
        r = sv_reply_error(q, 404, "No such container: %s", ref ? ref : "");
    else if (!connect) {
        int member = 0;
        for (sv_netmember *m = n->members; m; m = m->next)
            member |= m->c == c;
        if (member) {
            sv_net_leave(n, c);
            r = sv_reply_status(q, 200);
        } else
            r = sv_reply_error(q, 403, "container %s is not connected to network %s", c->id,
                               n->name);
    } else {
        /* the endpoint's config is checked as a create's EndpointsConfig */
        const cJSON *ep = cJSON_GetObjectItemCaseSensitive(b, "EndpointConfig");
        cJSON *fake = cJSON_CreateObject();
        cJSON_AddStringToObject(cJSON_AddObjectToObject(fake, "HostConfig"), "NetworkMode", n->id);
        cJSON_AddItemToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(fake,
                                                                              "NetworkingConfig"),
                                                      "EndpointsConfig"),
                              n->id, ep ? cJSON_Duplicate(ep, 1) : cJSON_CreateObject());
        if (sv_net_check_create(q->s, fake, msg, sizeof msg) < 0)
            r = sv_reply_error(q, 400, "%s", msg);
        else if (!c->sb)
            r = sv_reply_error(q, 409, "container %s is being created; try again", c->id);
        else if (sv_net_join(n, c, cJSON_GetObjectItemCaseSensitive(ep, "Aliases"), msg,
                             sizeof msg) < 0)
            r = sv_reply_error(q, 403, "%s", msg);
        else
            r = sv_reply_status(q, 200);
        cJSON_Delete(fake);
    }
    cJSON_Delete(b);
    return r;
}

static enum MHD_Result prune(sv_req *q)
{
    static const char *const accepted[] = {"label", NULL};
    char msg[600];
    cJSON *f;
    if (sv_filters_parse(sv_arg(q, "filters"), accepted, &f, msg, sizeof msg) < 0)
        return sv_reply_error(q, 400, "%s (lis prunes networks by label only)", msg);
    cJSON *o = cJSON_CreateObject(), *del = cJSON_AddArrayToObject(o, "NetworksDeleted");
    for (sv_network *n = q->s->networks, *next; n; n = next) {
        next = n->next;
        if (!n->members && sv_filter_labels(f, "label", n->labels)) {
            cJSON_AddItemToArray(del, cJSON_CreateString(n->name));
            sv_network_free(q->s, n);
        }
    }
    cJSON_Delete(f);
    return sv_reply_json(q, 200, o);
}

enum MHD_Result sv_networks_route(sv_req *q, const char *rest)
{
    const char *m = q->method;
    int get = !strcmp(m, "GET") || !strcmp(m, "HEAD"), post = !strcmp(m, "POST");
    if (!*rest && get)
        return list(q);
    if (!strcmp(rest, "/create") && post)
        return create(q);
    if (!strcmp(rest, "/prune") && post)
        return prune(q);
    if (rest[0] != '/' || !rest[1])
        return sv_reply_error(q, 404, "page not found");
    char ref[300];
    const char *op = strchr(rest + 1, '/');
    snprintf(ref, sizeof ref, "%.*s", op ? (int)(op - rest - 1) : (int)strlen(rest + 1), rest + 1);
    sv_network *n = sv_network_find(q->s, ref);
    const struct builtin *b = n ? NULL : builtin_find(ref);
    if (!n && !b)
        return sv_reply_error(q, 404, "network %s not found", ref);
    if (!op && get)
        return sv_reply_json(q, 200, n ? sv_network_json(n) : builtin_json(b));
    if (!op && !strcmp(m, "DELETE")) {
        if (b)
            return sv_reply_error(q, 403, "%s is a pre-defined network and cannot be removed",
                                  b->name);
        if (n->members)
            return sv_reply_error(q, 403,
                                  "error while removing network: network %s id %s has active "
                                  "endpoints",
                                  n->name, n->id);
        sv_network_free(q->s, n);
        return sv_reply_status(q, 204);
    }
    if (op && post && (!strcmp(op, "/connect") || !strcmp(op, "/disconnect"))) {
        if (b)
            return sv_reply_error(q, 400,
                                  "network %s is refused: a container is on a built-in network "
                                  "by its NetworkMode at create; connect it to a user-defined one",
                                  b->name);
        return connect_op(q, n, !strcmp(op, "/connect"));
    }
    return sv_reply_error(q, 404, "page not found");
}

/* ---- volumes: none -------------------------------------------------------------------------- */

enum MHD_Result sv_volumes_route(sv_req *q, const char *rest)
{
    static const char *const accepted[] = {"dangling", "driver", "label", "name", NULL};
    const char *m = q->method;
    char msg[600];
    if (!*rest && (!strcmp(m, "GET") || !strcmp(m, "HEAD"))) {
        cJSON *f;
        int dangling;
        if (sv_filters_dangling(sv_arg(q, "filters"), accepted, &f, &dangling, msg, sizeof msg) < 0)
            return sv_reply_error(q, 400, "%s", msg);
        cJSON_Delete(f); /* nothing to filter: there are no volumes */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddArrayToObject(o, "Volumes");
        cJSON_AddNullToObject(o, "Warnings");
        return sv_reply_json(q, 200, o);
    }
    if (!strcmp(rest, "/prune") && !strcmp(m, "POST")) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddArrayToObject(o, "VolumesDeleted");
        cJSON_AddNumberToObject(o, "SpaceReclaimed", 0);
        return sv_reply_json(q, 200, o);
    }
    if (!strcmp(rest, "/create") && !strcmp(m, "POST"))
        return sv_reply_error(q, 400,
                              "named volumes are refused: lis serve has none (bind a host "
                              "directory: -v /host/dir:/path, or a tmpfs)");
    if (rest[0] == '/' && rest[1])
        return sv_reply_error(q, 404, "get %.200s: no such volume", rest + 1);
    return sv_reply_error(q, 404, "page not found");
}
