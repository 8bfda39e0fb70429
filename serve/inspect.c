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
    cJSON_AddStringToObject(hc, "NetworkMode",
                            c->net == LIS_NET_HOST   ? "host"
                            : c->net == LIS_NET_NONE ? "none"
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
    cJSON_AddObjectToObject(ns, "Networks");
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

/* Both encodings: {"k":{"v":true}} (CLI) and {"k":["v"]} (docker-py). */
static int filter_ok(const cJSON *f, const char *key, int (*match)(sv_container *, const char *),
                     sv_container *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(f, key);
    if (!v)
        return 1;
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
    {
        const char *want = cJSON_IsString(e) ? e->valuestring : e->string;
        if (want && match(c, want))
            return 1;
    }
    return 0;
}

static int m_ancestor(sv_container *c, const char *v)
{
    char dir[4096], dg[80], a[600], b[600];
    sv_image_norm(v, a, sizeof a);
    sv_image_norm(c->image, b, sizeof b);
    if (!strcmp(a, b))
        return 1;
    return sv_image_resolve(c->s, v, dir, sizeof dir, dg, sizeof dg) == 0 &&
           !strcmp(dg, c->image_id);
}
static int m_name(sv_container *c, const char *v)
{
    return strstr(c->name, v[0] == '/' ? v + 1 : v) != NULL;
}
static int m_id(sv_container *c, const char *v) { return !strncmp(c->id, v, strlen(v)); }
static int m_status(sv_container *c, const char *v) { return !strcmp(docker_state(c), v); }

enum MHD_Result sv_containers_list(sv_req *q)
{
    int all = sv_arg_bool(q, "all");
    const char *fs = sv_arg(q, "filters");
    cJSON *f = fs ? cJSON_Parse(fs) : NULL;
    if (fs && !cJSON_IsObject(f)) {
        cJSON_Delete(f);
        return sv_reply_error(q, 400, "invalid filters: %s", fs);
    }
    cJSON *a = cJSON_CreateArray();
    for (sv_container *c = q->s->containers; c; c = c->next) {
        if (sv_removing(c) || (c->busy && !c->sb))
            continue;
        if (!all && !c->main && !cJSON_GetObjectItemCaseSensitive(f, "status"))
            continue;
        if (!filter_ok(f, "ancestor", m_ancestor, c) || !filter_ok(f, "name", m_name, c) ||
            !filter_ok(f, "id", m_id, c) || !filter_ok(f, "status", m_status, c))
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
        cJSON_AddArrayToObject(o, "Ports");
        const cJSON *lab = cJSON_GetObjectItemCaseSensitive(c->config, "Labels");
        cJSON_AddItemToObject(o, "Labels",
                              cJSON_IsObject(lab) ? cJSON_Duplicate(lab, 1) : cJSON_CreateObject());
        cJSON *hc = cJSON_AddObjectToObject(o, "HostConfig");
        cJSON_AddStringToObject(hc, "NetworkMode", "default");
        cJSON_AddObjectToObject(o, "NetworkSettings");
        cJSON_AddArrayToObject(o, "Mounts");
        cJSON_AddItemToArray(a, o);
    }
    cJSON_Delete(f);
    return sv_reply_json(q, 200, a);
}
