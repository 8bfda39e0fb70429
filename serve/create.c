/* create.c - a Docker create body (or the native API's, translated into
 * one) made into a container object: the name checked, the image resolved
 * in the store, Cmd, Env (with PATH, HOSTNAME and HOME as Docker adds them),
 * WorkingDir, User, the limits and the network mode. containers.c then makes
 * its sandbox on a worker. */
#include "serve.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int valid_name(const char *n)
{
    if (!isalnum((unsigned char)n[0]))
        return 0;
    for (const char *p = n; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.-", *p))
            return 0;
    return strlen(n) < sizeof((sv_container *)0)->name;
}

/* a then b, copied; NULL without memory. */
static char **concat(char **a, char **b)
{
    size_t na = sv_strv_len(a), nb = sv_strv_len(b);
    char **r = calloc(na + nb + 1, sizeof *r);
    for (size_t i = 0; r && i < na + nb; i++)
        if (!(r[i] = strdup(i < na ? a[i] : b[i - na]))) {
            sv_strv_free(r);
            return NULL;
        }
    return r;
}

static int env_has(char **env, const char *key)
{
    size_t k = strlen(key);
    for (size_t i = 0; env && env[i]; i++)
        if (!strncmp(env[i], key, k) && env[i][k] == '=')
            return 1;
    return 0;
}

/* The writable budget (--disk, else the runtime's 1 GiB default): what a
 * tmpfs or /dev/shm of the container may take at most. */
static uint64_t disk_budget(const lis_limits *l)
{
    return l->disk_bytes ? l->disk_bytes : 1ull << 30;
}

/* Memory, PidsLimit, NanoCpus (or CpuQuota/CpuPeriod) over the server's
 * defaults, and the network mode; NetworkMode host only for the owner. */
static int limits_and_net(sv_container *c, const cJSON *cfg, int owner, unsigned *status, char *msg,
                          size_t mlen)
{
    const cJSON *hc = cJSON_GetObjectItemCaseSensitive(cfg, "HostConfig");
    sv_server *s = c->s;
    c->limits = s->opts.limits;
    double mem = sv_jnum(hc, "Memory"), pids = sv_jnum(hc, "PidsLimit"),
           ncpu = sv_jnum(hc, "NanoCpus"), quota = sv_jnum(hc, "CpuQuota"),
           period = sv_jnum(hc, "CpuPeriod");
    *status = 400;
    if (mem < 0 || ncpu < 0 || quota < -1 || period < 0) {
        snprintf(msg, mlen, "Memory, NanoCpus, CpuQuota and CpuPeriod cannot be negative");
        return -1;
    }
    if (ncpu > 0 && (quota > 0 || period > 0)) {
        snprintf(msg, mlen, "Conflicting options: Nano CPUs and CPU Period cannot both be set");
        return -1;
    }
    if (mem > 0)
        c->limits.memory_bytes = (uint64_t)mem;
    if (pids > 0)
        c->limits.pids = (uint64_t)pids;
    else if (pids == -1) /* Docker's "unlimited" */
        c->limits.pids = LIS_UNLIMITED;
    if (ncpu > 0)
        c->limits.cpu_millis = (uint64_t)(ncpu / 1e6);
    else if (quota > 0)
        c->limits.cpu_millis = (uint64_t)(quota * 1000 / (period > 0 ? period : 100000));
    c->net = s->opts.net;
    const char *nm = sv_jstr(hc, "NetworkMode");
    int user = sv_net_check_create(s, cfg, msg, mlen); /* networks.c */
    if (user < 0) /* 400 even for a missing network: the docker CLI pulls the image on a 404 */
        return -1;
    /* a user network keeps the server's mode; networks.c adds its members */
    if (!user && nm && !strcmp(nm, "none"))
        c->net = LIS_NET_NONE;
    else if (!user && nm && !strcmp(nm, "host"))
        c->net = LIS_NET_HOST;
    else if (!user && nm && !strcmp(nm, "proxy")) /* lis's own mode (the native API's net) */
        c->net = LIS_NET_PROXY;
    else if (!user && nm && strcmp(nm, "default") && strcmp(nm, "bridge")) {
        snprintf(msg, mlen,
                 "NetworkMode %s is refused: lis serve has none, proxy, host, default (the "
                 "server's --net) and user-defined networks",
                 nm);
        return -1;
    }
    if (sv_jbool(cfg, "NetworkDisabled"))
        c->net = LIS_NET_NONE;
    if (c->net == LIS_NET_HOST && !owner) {
        *status = 403;
        snprintf(msg, mlen,
                 "NetworkMode host shares the owner's network identity and is only for a client "
                 "known to be the owner (the unix socket, or --tcp with --tls-dir); this "
                 "connection is not authenticated");
        return -1;
    }
    return 0;
}

/* (here, below containers.c and inspect.c, which both look containers up) */
sv_container *sv_container_find(sv_server *s, const char *ref)
{
    if (!ref || !*ref)
        return NULL;
    const char *n = ref[0] == '/' ? ref + 1 : ref;
    for (sv_container *c = s->containers; c; c = c->next)
        if (!strcmp(c->id, ref) || !strcmp(c->name, n))
            return c;
    size_t len = strlen(ref);
    sv_container *hit = NULL;
    for (sv_container *c = s->containers; c; c = c->next)
        if (!strncmp(c->id, ref, len)) {
            if (hit)
                return NULL; /* ambiguous */
            hit = c;
        }
    return hit;
}

sv_container *sv_container_new(sv_server *s, cJSON *cfg, const char *name, const char *idem,
                               int native, int owner, const char *rootfs, unsigned *status,
                               char *msg, size_t mlen)
{
    *status = 400;
    if (name && name[0] == '/')
        name++;
    if (name && *name && !valid_name(name)) {
        snprintf(msg, mlen,
                 "Invalid container name (%s), only [a-zA-Z0-9][a-zA-Z0-9_.-] are "
                 "allowed",
                 name);
        cJSON_Delete(cfg);
        return NULL;
    }
    if (name && *name) {
        for (sv_container *o = s->containers; o; o = o->next)
            if (!strcmp(o->name, name)) {
                *status = 409;
                snprintf(msg, mlen,
                         "Conflict. The container name \"/%s\" is already in use by "
                         "container \"%s\". You have to remove (or rename) that container to be "
                         "able to reuse that name.",
                         name, o->id);
                cJSON_Delete(cfg);
                return NULL;
            }
    }
    const char *image = sv_jstr(cfg, "Image");
    if (!image && !rootfs) {
        snprintf(msg, mlen, "Config.Image is required");
        cJSON_Delete(cfg);
        return NULL;
    }
    sv_container *c = calloc(1, sizeof *c);
    if (!c) {
        *status = 500;
        snprintf(msg, mlen, "out of memory");
        cJSON_Delete(cfg);
        return NULL;
    }
    c->s = s;
    if (rootfs) {
        snprintf(c->rootfs, sizeof c->rootfs, "%s", rootfs);
    } else if (sv_image_resolve(s, image, c->rootfs, sizeof c->rootfs, c->image_id,
                                sizeof c->image_id) < 0) {
        free(c);
        *status = 404;
        snprintf(msg, mlen, "No such image: %s", image);
        cJSON_Delete(cfg); /* after: image points into it */
        return NULL;
    }
    char **ep = sv_jstrv(cfg, "Entrypoint"), **cmd = sv_jstrv(cfg, "Cmd");
    c->cmd = concat(ep, cmd);
    sv_strv_free(ep);
    sv_strv_free(cmd);
    if (!c->cmd || !c->cmd[0]) {
        if (!c->cmd)
            *status = 500;
        sv_strv_free(c->cmd);
        free(c);
        snprintf(msg, mlen, "%s", *status == 500 ? "out of memory" : "No command specified");
        cJSON_Delete(cfg);
        return NULL;
    }
    sv_hexid(c->id);
    c->native = native;
    snprintf(c->idem, sizeof c->idem, "%s", idem ? idem : "");
    snprintf(c->image, sizeof c->image, "%s", image ? image : "");
    if (name && *name)
        snprintf(c->name, sizeof c->name, "%s", name);
    else
        snprintf(c->name, sizeof c->name, "lis_%.8s", c->id);
    snprintf(c->workdir, sizeof c->workdir, "%s",
             sv_jstr(cfg, "WorkingDir") ? sv_jstr(cfg, "WorkingDir") : "");
    snprintf(c->user, sizeof c->user, "%s", sv_jstr(cfg, "User") ? sv_jstr(cfg, "User") : "");
    c->tty = sv_jbool(cfg, "Tty");
    c->open_stdin = sv_jbool(cfg, "OpenStdin");
    char **env = sv_jstrv(cfg, "Env");
    char *base[4] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL,
                     NULL, NULL};
    char hostname[80], *extra[3] = {NULL, NULL, NULL};
    const char *hn = sv_jstr(cfg, "Hostname"); /* checked with the options below */
    snprintf(hostname, sizeof hostname, "HOSTNAME=%.*s", hn ? 63 : 12, hn ? hn : c->id);
    int ne = 0;
    extra[ne++] = hostname;
    if (!env_has(env, "HOME"))
        extra[ne++] = "HOME=/root";
    char **e1 = concat(env_has(env, "PATH") ? NULL : base, env);
    c->env = e1 ? concat(e1, extra) : NULL;
    sv_strv_free(e1);
    sv_strv_free(env);
    if (!c->env) {
        sv_strv_free(c->cmd);
        free(c);
        *status = 500;
        snprintf(msg, mlen, "out of memory");
        cJSON_Delete(cfg);
        return NULL;
    }
    const cJSON *hc = cJSON_GetObjectItemCaseSensitive(cfg, "HostConfig");
    c->auto_remove = sv_jbool(hc, "AutoRemove");
    if (limits_and_net(c, cfg, owner, status, msg, mlen) < 0 ||
        sv_options_parse(&c->copts, cfg, disk_budget(&c->limits), msg, mlen) < 0 ||
        (native && sv_effects_setup(s, c, cfg, status, msg, mlen) < 0)) { /* api_effects.c */
        sv_options_release(&c->copts);
        lis_policy_free(c->policy);
        sv_strv_free(c->cmd);
        sv_strv_free(c->env);
        free(c);
        cJSON_Delete(cfg);
        return NULL;
    }
    c->config = cfg;
    c->created = lis_wallclock();
    c->state = SV_CREATED;
    c->busy = 1;
    c->next = s->containers;
    s->containers = c;
    return c;
}
