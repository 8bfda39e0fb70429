/* inspect.c - what GET /containers/{id}/json and GET /containers/json say
 * about containers: read-only views of containers.c's state (list filters
 * in both encodings: {"k":{"v":true}} from the CLI, {"k":["v"]} from docker-py). */
#include "serve.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the native API's view ------------------------------------------------------------------ */

static const char *net_name(lis_net_mode n)
{
    return n == LIS_NET_HOST ? "host" : n == LIS_NET_PROXY ? "proxy" : "none";
}

const char *sv_cstate_name(sv_cstate s)
{
    switch (s) {
    case SV_CREATED: return "created";
    case SV_RUNNING: return "running";
    case SV_EXITED: return "exited";
    case SV_REMOVING: return "removing";
    case SV_REMOVED: return "removed";
    }
    return "unknown";
}

const char *sv_sandbox_state(const sv_container *c)
{
    if (sv_removing(c))
        return "removing";
    return !c->sb ? "creating" : c->paused ? "paused" : "running";
}

/* Docker's State: "paused" while a running container is paused (native API or
 * docker pause), else the container's own state. */
static const char *docker_state(const sv_container *c)
{
    return c->paused && c->main ? "paused" : sv_cstate_name(c->state);
}

cJSON *sv_sandbox_json(sv_container *c)
{
    cJSON *o = cJSON_CreateObject();
    char t[64];
    cJSON_AddStringToObject(o, "id", c->id);
    cJSON_AddStringToObject(o, "name", c->name);
    cJSON_AddStringToObject(o, "image", c->image);
    cJSON_AddStringToObject(o, "state", sv_sandbox_state(c));
    sv_rfc3339(c->created, t, sizeof t);
    cJSON_AddStringToObject(o, "created", t);
    cJSON_AddNumberToObject(o, "memory", (double)c->limits.memory_bytes);
    cJSON_AddStringToObject(o, "net", net_name(c->net));
    cJSON_AddBoolToObject(o, "native", c->native);
    if (c->ends_at > 0) { /* the end of its timeout (E2B's end_at) */
        sv_rfc3339(c->ends_at, t, sizeof t);
        cJSON_AddStringToObject(o, "end_at", t);
    } else {
        cJSON_AddNullToObject(o, "end_at");
    }
    return o;
}

/* ---- inspect and list ------------------------------------------------------------------------- */

static cJSON *strv_json(char **v)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; v && v[i]; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

static cJSON *ports_json(sv_container *c)
{
    const cJSON *hc = cJSON_GetObjectItemCaseSensitive(c->config, "HostConfig");
    const cJSON *pb = cJSON_GetObjectItemCaseSensitive(hc, "PortBindings");
    return c->ports ? sv_ports_json(c->ports, pb) : cJSON_CreateObject();
}

/* The networks a container is on, as NetworkSettings.Networks. */
static cJSON *networks_json(const sv_container *c) { return sv_net_container_json(c); }

/* The list's Ports (dockerd's types.Port): each published port with its host
 * side, each exposed one (Config.ExposedPorts) without. */
static cJSON *ports_list(const sv_container *c)
{
    cJSON *a = cJSON_CreateArray();
    cJSON *bound = ports_json((sv_container *)c);
    const cJSON *exp = cJSON_GetObjectItemCaseSensitive(c->config, "ExposedPorts"), *k, *h;
    cJSON_ArrayForEach(k, bound)
    {
        cJSON_ArrayForEach(h, k)
        {
            cJSON *p = cJSON_CreateObject();
            const char *ip = sv_jstr(h, "HostIp"), *hp = sv_jstr(h, "HostPort");
            cJSON_AddStringToObject(p, "IP", ip ? ip : "0.0.0.0");
            cJSON_AddNumberToObject(p, "PrivatePort", atoi(k->string));
            cJSON_AddNumberToObject(p, "PublicPort", hp ? atoi(hp) : 0);
            const char *sl = strchr(k->string, '/');
            cJSON_AddStringToObject(p, "Type", sl ? sl + 1 : "tcp");
            cJSON_AddItemToArray(a, p);
        }
    }
    cJSON_ArrayForEach(k, exp)
    {
        if (cJSON_GetObjectItemCaseSensitive(bound, k->string))
            continue;
        cJSON *p = cJSON_CreateObject();
        cJSON_AddNumberToObject(p, "PrivatePort", atoi(k->string));
        const char *sl = strchr(k->string, '/');
        cJSON_AddStringToObject(p, "Type", sl ? sl + 1 : "tcp");
        cJSON_AddItemToArray(a, p);
    }
    cJSON_Delete(bound);
    return a;
}

cJSON *sv_container_inspect(sv_container *c)
{
    char ts[64], name[140];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "Id", c->id);
    sv_rfc3339(c->created, ts, sizeof ts);
    cJSON_AddStringToObject(o, "Created", ts);
    cJSON_AddStringToObject(o, "Path", c->cmd[0]);
    cJSON_AddItemToObject(o, "Args", strv_json(c->cmd + 1));
    cJSON *st = cJSON_AddObjectToObject(o, "State");
    cJSON_AddStringToObject(st, "Status", docker_state(c));
    int running = c->main != NULL;
    cJSON_AddBoolToObject(st, "Running", running);
    cJSON_AddBoolToObject(st, "Paused", c->paused && c->sb);
    cJSON_AddBoolToObject(st, "Restarting", 0);
    cJSON_AddBoolToObject(st, "OOMKilled", 0);
    cJSON_AddBoolToObject(st, "Dead", 0);
    cJSON_AddNumberToObject(st, "Pid", running && c->sb ? lis_sandbox_pid(c->sb) : 0);
    cJSON_AddNumberToObject(st, "ExitCode", c->exit_code);
    cJSON_AddStringToObject(st, "Error", "");
    sv_rfc3339(c->started_at, ts, sizeof ts);
    cJSON_AddStringToObject(st, "StartedAt", ts);
    sv_rfc3339(c->finished_at, ts, sizeof ts);
    cJSON_AddStringToObject(st, "FinishedAt", ts);
    cJSON_AddStringToObject(o, "Image", c->image_id);
    snprintf(name, sizeof name, "/%s", c->name);
    cJSON_AddStringToObject(o, "Name", name);
    cJSON_AddNumberToObject(o, "RestartCount", 0);
    cJSON_AddStringToObject(o, "Driver", "lis");
    cJSON_AddStringToObject(o, "Platform", "linux");
    cJSON *cf = cJSON_AddObjectToObject(o, "Config");
    char host[64];
    snprintf(host, sizeof host, "%.12s", c->id);
    cJSON_AddStringToObject(cf, "Hostname", c->copts.hostname[0] ? c->copts.hostname : host);
    cJSON_AddStringToObject(cf, "User", c->user);
    cJSON_AddBoolToObject(cf, "Tty", c->tty);
    cJSON_AddBoolToObject(cf, "OpenStdin", c->open_stdin);
    cJSON_AddItemToObject(cf, "Env", strv_json(c->env));
    cJSON_AddItemToObject(cf, "Cmd", strv_json(c->cmd));
    cJSON_AddStringToObject(cf, "Image", c->image);
    cJSON_AddStringToObject(cf, "WorkingDir", c->workdir);
    const cJSON *lab = cJSON_GetObjectItemCaseSensitive(c->config, "Labels");
    cJSON_AddItemToObject(cf, "Labels",
                          cJSON_IsObject(lab) ? cJSON_Duplicate(lab, 1) : cJSON_CreateObject());
    const cJSON *hc0 = cJSON_GetObjectItemCaseSensitive(c->config, "HostConfig");
    cJSON *hc = cJSON_AddObjectToObject(o, "HostConfig");
    cJSON_AddBoolToObject(hc, "AutoRemove", c->auto_remove);
    const char *mode = sv_jstr(hc0, "NetworkMode");
    cJSON_AddStringToObject(hc, "NetworkMode",
                            mode && sv_network_find(c->s, mode) ? mode
                            : c->net == LIS_NET_HOST            ? "host"
                            : c->net == LIS_NET_NONE            ? "none"
                                                                : "default");
    cJSON *lc = cJSON_AddObjectToObject(hc, "LogConfig");
    cJSON_AddStringToObject(lc, "Type", "json-file"); /* logs are kept (first 8 MiB) */
    cJSON_AddObjectToObject(lc, "Config");
    const cJSON *pb = cJSON_GetObjectItemCaseSensitive(hc0, "PortBindings");
    cJSON_AddItemToObject(hc, "PortBindings",
                          cJSON_IsObject(pb) ? cJSON_Duplicate(pb, 1) : cJSON_CreateObject());
    cJSON_AddNumberToObject(hc, "Memory",
                            c->limits.memory_bytes == LIS_UNLIMITED
                                ? 0
                                : (double)c->limits.memory_bytes);
    cJSON_AddNumberToObject(hc, "NanoCpus", (double)c->limits.cpu_millis * 1e6);
    /* the create options as given (each was honoured: options.c) */
    static const char *const kept[] = {"Binds",   "Mounts",    "Tmpfs",      "ReadonlyRootfs",
                                       "ShmSize", "Ulimits",   "CapDrop",    "CapAdd",
                                       "Init",    "PidsLimit", "SecurityOpt"};
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(hc0, kept[i]);
        if (v)
            cJSON_AddItemToObject(hc, kept[i], cJSON_Duplicate(v, 1));
    }
    cJSON *ns = cJSON_AddObjectToObject(o, "NetworkSettings");
    cJSON_AddItemToObject(ns, "Ports", ports_json(c));
    cJSON_AddItemToObject(ns, "Networks", networks_json(c));
    cJSON_AddStringToObject(ns, "IPAddress", "");
    cJSON_AddItemToObject(o, "Mounts", sv_options_mounts(&c->copts));
    return o;
}

static void status_text(sv_container *c, char *buf, size_t len)
{
    double now = lis_wallclock();
    if (c->main) {
        double up = now - c->started_at;
        if (up < 60)
            snprintf(buf, len, "Up %d seconds", (int)up < 1 ? 1 : (int)up);
        else
            snprintf(buf, len, "Up %d minutes", (int)(up / 60));
        if (c->paused) {
            size_t l = strlen(buf);
            snprintf(buf + l, len - l, " (Paused)");
        }
        return;
    }
    switch (c->state) {
    case SV_EXITED:
        snprintf(buf, len, "Exited (%d) %d seconds ago", c->exit_code, (int)(now - c->finished_at));
        return;
    case SV_CREATED: snprintf(buf, len, "Created"); return;
    case SV_RUNNING: snprintf(buf, len, "Up"); return; /* between start and the proc */
    case SV_REMOVING: snprintf(buf, len, "Removal In Progress"); return;
    case SV_REMOVED: snprintf(buf, len, "Dead"); return;
    }
}

/* ---- the list's filters (dockerd's daemon/list.go, every key it accepts) ---------------- */

static const char *const ps_filters[] = {"ancestor", "before", "exited",  "expose",
                                         "health",   "id",     "is-task", "isolation",
                                         "label",    "name",   "network", "publish",
                                         "since",    "status", "volume",  NULL};

/* What the filters of one list resolved to before the containers are walked. */
typedef struct ps_query {
    const cJSON *f;
    const sv_container *before, *since;
    int is_task, task_given;
} ps_query;

static int m_ancestor(const void *o, const char *v)
{
    const sv_container *c = o;
    char dir[4096], dg[80], a[600], b[600];
    sv_image_norm(v, a, sizeof a);
    sv_image_norm(c->image, b, sizeof b);
    if (!strcmp(a, b))
        return 1;
    return sv_image_resolve(c->s, v, dir, sizeof dir, dg, sizeof dg) == 0 &&
           !strcmp(dg, c->image_id);
}
static int m_name(const void *o, const char *v)
{
    const sv_container *c = o;
    char slash[140];
    snprintf(slash, sizeof slash, "/%s", c->name);
    return sv_filter_regex(v, slash) || sv_filter_regex(v, c->name);
}
static int m_id(const void *o, const char *v)
{
    return !strncmp(((const sv_container *)o)->id, v, strlen(v));
}
static int m_status(const void *o, const char *v) { return !strcmp(docker_state(o), v); }
static int m_exited(const void *o, const char *v)
{
    const sv_container *c = o;
    return !c->main && c->started_at > 0 && c->exit_code == atoi(v);
}
static int m_network(const void *o, const char *v)
{
    cJSON *nets = networks_json(o);
    const cJSON *n;
    int hit = 0;
    cJSON_ArrayForEach(n, nets)
    {
        const char *nid = sv_jstr(n, "NetworkID");
        if (!strcmp(n->string, v) || (nid && *v && !strncmp(nid, v, strlen(v))))
            hit = 1;
    }
    cJSON_Delete(nets);
    return hit;
}
static int m_volume(const void *o, const char *v)
{
    const sv_container *c = o;
    cJSON *ms = sv_options_mounts(&c->copts);
    const cJSON *m;
    int hit = 0;
    cJSON_ArrayForEach(m, ms)
    {
        const char *name = sv_jstr(m, "Name"), *dst = sv_jstr(m, "Destination");
        if ((name && !strcmp(name, v)) || (dst && !strcmp(dst, v)))
            hit = 1;
    }
    cJSON_Delete(ms);
    return hit;
}

/* "80", "80/udp", "8000-8010/tcp": the port range and protocol; -1 when malformed. */
static int port_spec(const char *v, unsigned *lo, unsigned *hi, char *proto, size_t plen)
{
    char num[32];
    const char *sl = strchr(v, '/');
    snprintf(num, sizeof num, "%.*s", sl ? (int)(sl - v) : (int)strlen(v), v);
    snprintf(proto, plen, "%s", sl ? sl + 1 : "tcp");
    char *end;
    unsigned long a = strtoul(num, &end, 10), b = a;
    if (*end == '-')
        b = strtoul(end + 1, &end, 10);
    if (!num[0] || *end || !a || a > 65535 || b < a || b > 65535)
        return -1;
    *lo = (unsigned)a;
    *hi = (unsigned)b;
    return 0;
}

/* One of the list's Ports (dockerd's types.Port) matches a publish or expose value. */
static int port_match(const sv_container *c, const char *v, const char *field)
{
    unsigned lo, hi;
    char proto[16];
    if (port_spec(v, &lo, &hi, proto, sizeof proto) < 0)
        return 0;
    cJSON *ports = ports_list(c);
    const cJSON *p;
    int hit = 0;
    cJSON_ArrayForEach(p, ports)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(p, field);
        const char *t = sv_jstr(p, "Type");
        if (cJSON_IsNumber(n) && n->valuedouble >= lo && n->valuedouble <= hi && t &&
            !strcmp(t, proto))
            hit = 1;
    }
    cJSON_Delete(ports);
    return hit;
}
static int m_publish(const void *o, const char *v) { return port_match(o, v, "PublicPort"); }
static int m_expose(const void *o, const char *v) { return port_match(o, v, "PrivatePort"); }

/* The values dockerd refuses before listing, with its words: 0, or the HTTP
 * status with msg set. */
static unsigned ps_check(sv_server *s, ps_query *pq, char *msg, size_t mlen)
{
    static const char *const states[] = {"created", "restarting", "running", "removing",
                                         "paused",  "exited",     "dead"};
    static const char *const health[] = {"starting", "healthy", "unhealthy", "none"};
    const cJSON *e;
    cJSON_ArrayForEach(e, sv_filter(pq->f, "status"))
    {
        int ok = 0;
        for (size_t i = 0; i < sizeof states / sizeof *states; i++)
            ok |= !strcmp(states[i], e->valuestring);
        if (!ok)
            return snprintf(msg, mlen, "Invalid filter 'status=%.200s'", e->valuestring), 400;
    }
    cJSON_ArrayForEach(e, sv_filter(pq->f, "health"))
    {
        int ok = 0;
        for (size_t i = 0; i < sizeof health / sizeof *health; i++)
            ok |= !strcmp(health[i], e->valuestring);
        if (!ok)
            return snprintf(msg, mlen, "Unrecognised filter value for health: %.200s",
                            e->valuestring),
                   400;
    }
    cJSON_ArrayForEach(e, sv_filter(pq->f, "exited"))
    {
        char *end;
        strtol(e->valuestring, &end, 10);
        if (!e->valuestring[0] || *end)
            return snprintf(msg, mlen, "strconv.Atoi: parsing \"%.200s\": invalid syntax",
                            e->valuestring),
                   400;
    }
    const char *pk[] = {"publish", "expose"};
    for (size_t i = 0; i < 2; i++)
        cJSON_ArrayForEach(e, sv_filter(pq->f, pk[i]))
        {
            unsigned lo, hi;
            char proto[16];
            if (strchr(e->valuestring, ':'))
                return snprintf(msg, mlen, "filter for '%s' should not contain ':': %.200s", pk[i],
                                e->valuestring),
                       400;
            if (port_spec(e->valuestring, &lo, &hi, proto, sizeof proto) < 0)
                return snprintf(msg, mlen, "invalid port '%.200s' in the '%s' filter",
                                e->valuestring, pk[i]),
                       400;
        }
    int r = sv_filter_bool(pq->f, "is-task", &pq->is_task, msg, mlen);
    if (r < 0)
        return 400;
    pq->task_given = r;
    const char *rk[] = {"before", "since"};
    const sv_container **ref[] = {&pq->before, &pq->since};
    for (size_t i = 0; i < 2; i++)
        cJSON_ArrayForEach(e, sv_filter(pq->f, rk[i]))
        {
            if (!(*ref[i] = sv_container_find(s, e->valuestring)))
                return snprintf(msg, mlen, "no such container %.200s", e->valuestring), 404;
        }
    return 0;
}

static int ps_match(const ps_query *pq, const sv_container *c)
{
    const cJSON *f = pq->f;
    if (pq->before && (c == pq->before || c->created >= pq->before->created))
        return 0;
    if (pq->since && (c == pq->since || c->created <= pq->since->created))
        return 0;
    if (pq->task_given && pq->is_task) /* a lis container is never a swarm task */
        return 0;
    if (sv_filter(f, "health") && !sv_filter_has_value(f, "health", "none"))
        return 0; /* lis runs no health checks (Healthcheck is refused): every one is "none" */
    /* isolation: accepted and without effect on Linux, as in dockerd */
    return sv_filter_labels(f, "label", cJSON_GetObjectItemCaseSensitive(c->config, "Labels")) &&
           sv_filter_any(f, "ancestor", m_ancestor, c) && sv_filter_any(f, "name", m_name, c) &&
           sv_filter_any(f, "id", m_id, c) && sv_filter_any(f, "status", m_status, c) &&
           sv_filter_any(f, "exited", m_exited, c) && sv_filter_any(f, "network", m_network, c) &&
           sv_filter_any(f, "volume", m_volume, c) &&
           (!sv_filter(f, "publish") && !sv_filter(f, "expose")
                ? 1
                : (sv_filter(f, "publish") && sv_filter_any(f, "publish", m_publish, c)) ||
                      (sv_filter(f, "expose") && sv_filter_any(f, "expose", m_expose, c)));
}

enum MHD_Result sv_containers_list(sv_req *q)
{
    int all = sv_arg_bool(q, "all");
    char msg[600];
    ps_query pq = {0};
    cJSON *f;
    if (sv_filters_parse(sv_arg(q, "filters"), ps_filters, &f, msg, sizeof msg) < 0)
        return sv_reply_error(q, 400, "%s", msg);
    pq.f = f;
    unsigned bad = ps_check(q->s, &pq, msg, sizeof msg);
    if (bad) {
        cJSON_Delete(f);
        return sv_reply_error(q, bad, "%s", msg);
    }
    cJSON *a = cJSON_CreateArray();
    for (sv_container *c = q->s->containers; c; c = c->next) {
        if (sv_removing(c) || (c->busy && !c->sb))
            continue;
        if (!all && !c->main && !sv_filter(f, "status"))
            continue; /* a status filter lists every state, as dockerd's */
        if (!ps_match(&pq, c))
            continue;
        cJSON *o = cJSON_CreateObject();
        char nm[140], st[80];
        cJSON_AddStringToObject(o, "Id", c->id);
        cJSON *names = cJSON_AddArrayToObject(o, "Names");
        snprintf(nm, sizeof nm, "/%s", c->name);
        cJSON_AddItemToArray(names, cJSON_CreateString(nm));
        cJSON_AddStringToObject(o, "Image", c->image);
        cJSON_AddStringToObject(o, "ImageID", c->image_id);
        char cmd[1024] = "";
        for (size_t i = 0; c->cmd[i]; i++) {
            size_t l = strlen(cmd);
            snprintf(cmd + l, sizeof cmd - l, "%s%s", i ? " " : "", c->cmd[i]);
        }
        cJSON_AddStringToObject(o, "Command", cmd);
        cJSON_AddNumberToObject(o, "Created", (double)(long)c->created);
        cJSON_AddStringToObject(o, "State", docker_state(c));
        status_text(c, st, sizeof st);
        cJSON_AddStringToObject(o, "Status", st);
        cJSON_AddItemToObject(o, "Ports", ports_list(c));
        const cJSON *lab = cJSON_GetObjectItemCaseSensitive(c->config, "Labels");
        cJSON_AddItemToObject(o, "Labels",
                              cJSON_IsObject(lab) ? cJSON_Duplicate(lab, 1) : cJSON_CreateObject());
        cJSON *hc = cJSON_AddObjectToObject(o, "HostConfig");
        const cJSON *hc0 = cJSON_GetObjectItemCaseSensitive(c->config, "HostConfig");
        const char *mode = sv_jstr(hc0, "NetworkMode");
        cJSON_AddStringToObject(hc, "NetworkMode", mode ? mode : "default");
        cJSON *ns = cJSON_AddObjectToObject(o, "NetworkSettings");
        cJSON_AddItemToObject(ns, "Networks", networks_json(c));
        cJSON_AddItemToObject(o, "Mounts", sv_options_mounts(&c->copts));
        cJSON_AddItemToArray(a, o);
    }
    cJSON_Delete(f);
    return sv_reply_json(q, 200, a);
}
