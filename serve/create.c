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

static char **concat(char **a, char **b)
{
    size_t na = sv_strv_len(a), nb = sv_strv_len(b);
    char **r = calloc(na + nb + 1, sizeof *r);
    for (size_t i = 0; i < na; i++)
        r[i] = strdup(a[i]);
    for (size_t i = 0; i < nb; i++)
        r[na + i] = strdup(b[i]);
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

sv_container *sv_container_new(sv_server *s, cJSON *cfg, const char *name, const char *idem,
                               int native, const char *rootfs, unsigned *status, char *msg,
                               size_t mlen)
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
    if (!c->cmd[0]) {
        sv_strv_free(c->cmd);
        free(c);
        snprintf(msg, mlen, "No command specified");
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
    char hostname[32], *extra[3] = {NULL, NULL, NULL};
    snprintf(hostname, sizeof hostname, "HOSTNAME=%.12s", c->id);
    int ne = 0;
    extra[ne++] = hostname;
    if (!env_has(env, "HOME"))
        extra[ne++] = "HOME=/root";
    char **e1 = concat(env_has(env, "PATH") ? NULL : base, env);
    c->env = concat(e1, extra);
    sv_strv_free(e1);
    sv_strv_free(env);
    const cJSON *hc = cJSON_GetObjectItemCaseSensitive(cfg, "HostConfig");
    c->auto_remove = sv_jbool(hc, "AutoRemove");
    c->limits = s->opts.limits;
    double mem = sv_jnum(hc, "Memory"), pids = sv_jnum(hc, "PidsLimit"),
           ncpu = sv_jnum(hc, "NanoCpus");
    if (mem > 0)
        c->limits.memory_bytes = (uint64_t)mem;
    if (pids > 0)
        c->limits.pids = (uint64_t)pids;
    if (ncpu > 0)
        c->limits.cpu_millis = (uint64_t)(ncpu / 1e6);
    c->net = s->opts.net;
    const char *nm = sv_jstr(hc, "NetworkMode");
    if (nm && !strcmp(nm, "none"))
        c->net = LIS_NET_NONE;
    else if (nm && !strcmp(nm, "host"))
        c->net = LIS_NET_HOST;
    else if (nm && !strcmp(nm, "proxy")) /* lis's own mode (the native API's net) */
        c->net = LIS_NET_PROXY;
    if (sv_jbool(cfg, "NetworkDisabled"))
        c->net = LIS_NET_NONE;
    if (native && sv_effects_setup(s, c, cfg, status, msg, mlen) < 0) { /* api_effects.c */
        sv_strv_free(c->cmd);
        sv_strv_free(c->env);
        free(c);
        cJSON_Delete(cfg);
        return NULL;
    }
    c->config = cfg;
    c->created = lis_wallclock();
    snprintf(c->status, sizeof c->status, "created");
    c->busy = 1;
    c->next = s->containers;
    s->containers = c;
    return c;
}
