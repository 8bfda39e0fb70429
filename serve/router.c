/* router.c - method + path to a handler: the /vX.Y prefix (1.24-1.41) or
 * none, then routing by prefix and suffix so names may hold '/' and ':'
 * (/images/127.0.0.1:5000/x:v1/json). Unknown routes get moby's JSON 404. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#ifndef LIS_VERSION
#define LIS_VERSION "0.1.0"
#endif

static enum MHD_Result ping(sv_req *q)
{
    struct MHD_Response *r =
        sv_resp_text(strcmp(q->method, "HEAD") ? "OK" : "", "text/plain; charset=utf-8");
    MHD_add_response_header(r, "Cache-Control", "no-cache, no-store, must-revalidate");
    MHD_add_response_header(r, "Pragma", "no-cache");
    MHD_add_response_header(r, "Builder-Version", "1");
    return sv_reply(q, 200, r);
}

static enum MHD_Result version(sv_req *q)
{
    struct utsname u;
    uname(&u);
    /* Go's names, as dockerd says them (the docker CLI prints Details' Os/Arch) */
    const char *arch = !strcmp(u.machine, "x86_64")    ? "amd64"
                       : !strcmp(u.machine, "aarch64") ? "arm64"
                                                       : u.machine;
    cJSON *o = cJSON_CreateObject();
    cJSON *comps = cJSON_AddArrayToObject(o, "Components");
    cJSON *eng = cJSON_CreateObject();
    cJSON_AddStringToObject(eng, "Name", "Engine");
    cJSON_AddStringToObject(eng, "Version", LIS_VERSION);
    cJSON *d = cJSON_AddObjectToObject(eng, "Details");
    cJSON_AddStringToObject(d, "ApiVersion", SV_API_VERSION);
    cJSON_AddStringToObject(d, "MinAPIVersion", SV_API_MIN);
    cJSON_AddStringToObject(d, "Os", "linux");
    cJSON_AddStringToObject(d, "Arch", arch);
    cJSON_AddItemToArray(comps, eng);
    cJSON_AddStringToObject(o, "Version", LIS_VERSION);
    cJSON_AddStringToObject(o, "ApiVersion", SV_API_VERSION);
    cJSON_AddStringToObject(o, "MinAPIVersion", SV_API_MIN);
    cJSON_AddStringToObject(o, "GitCommit", "lis");
    cJSON_AddStringToObject(o, "GoVersion", "");
    cJSON_AddStringToObject(o, "Os", "linux");
    cJSON_AddStringToObject(o, "Arch", arch);
    cJSON_AddStringToObject(o, "KernelVersion", u.release);
    cJSON_AddStringToObject(o, "BuildTime", "");
    return sv_reply_json(q, 200, o);
}

static enum MHD_Result info(sv_req *q)
{
    int n = 0, running = 0;
    for (sv_container *c = q->s->containers; c; c = c->next) {
        n++;
        running += c->main != NULL;
    }
    struct utsname u;
    uname(&u);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "ID", "lis");
    cJSON_AddStringToObject(o, "Name", u.nodename);
    cJSON_AddNumberToObject(o, "Containers", n);
    cJSON_AddNumberToObject(o, "ContainersRunning", running);
    cJSON_AddNumberToObject(o, "ContainersPaused", 0);
    cJSON_AddNumberToObject(o, "ContainersStopped", n - running);
    cJSON_AddNumberToObject(o, "Images", 0);
    cJSON_AddStringToObject(o, "Driver", "lis");
    cJSON_AddStringToObject(o, "OSType", "linux");
    cJSON_AddStringToObject(o, "OperatingSystem", "lis");
    cJSON_AddStringToObject(o, "Architecture", "x86_64");
    cJSON_AddNumberToObject(o, "NCPU", (double)sysconf(_SC_NPROCESSORS_ONLN));
    cJSON_AddNumberToObject(o, "MemTotal",
                            (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE));
    cJSON_AddStringToObject(o, "ServerVersion", LIS_VERSION);
    cJSON_AddStringToObject(o, "KernelVersion", u.release);
    cJSON_AddStringToObject(o, "IndexServerAddress", "https://index.docker.io/v1/");
    cJSON_AddStringToObject(o, "CgroupDriver", "none");
    cJSON_AddBoolToObject(o, "Debug", 0);
    return sv_reply_json(q, 200, o);
}

/* Strips /vX.Y; returns 0, or answers 400 for a version out of range. */
static int versioned(sv_req *q, const char *url, const char **rest, enum MHD_Result *rc)
{
    *rest = url;
    if (url[0] != '/' || url[1] != 'v' || !(url[2] >= '0' && url[2] <= '9'))
        return 0;
    const char *p = url + 2;
    unsigned maj = 0, min = 0;
    while (*p >= '0' && *p <= '9')
        maj = maj * 10 + (unsigned)(*p++ - '0');
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9';)
            min = min * 10 + (unsigned)(*p++ - '0');
    if (*p && *p != '/')
        return 0; /* not a version: leave the path as it is (404 later) */
    unsigned v = maj * 1000 + min;
    if (v > 1041) {
        *rc = sv_reply_error(q, 400,
                             "client version %u.%u is too new. Maximum supported API "
                             "version is " SV_API_VERSION,
                             maj, min);
        return -1;
    }
    if (v < 1024) {
        *rc = sv_reply_error(q, 400,
                             "client version %u.%u is too old. Minimum supported API "
                             "version is " SV_API_MIN ", please upgrade your client to a newer "
                             "version",
                             maj, min);
        return -1;
    }
    *rest = *p ? p : "/";
    return 0;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

size_t sv_route_body_max(const char *method, const char *url)
{
    int put = !strcmp(method, "PUT"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/lis/v1/groups") && post) /* a task's files come inline (docs/rl.md) */
        return SV_BODY_RL_GROUP_MAX;
    if (!strncmp(url, "/lis/v1/sandboxes/", 18))
        return (put || post) && ends_with(url, "/files") ? SV_BODY_FILE_MAX : SV_BODY_JSON_MAX;
    if (put && ends_with(url, "/archive") && strstr(url, "/containers/"))
        return SV_BODY_ARCHIVE_MAX;
    return SV_BODY_JSON_MAX;
}

enum MHD_Result sv_route(sv_req *q, const char *url)
{
    const char *p;
    enum MHD_Result rc = MHD_NO;
    if (!strncmp(url, "/lis/", 5)) {
        if (!strncmp(url, "/lis/v1/", 8))
            return sv_api_route(q, url + 8);
        return sv_reply_error(q, 404,
                              "unknown native API version in %s (this server speaks /lis/v1/)",
                              url);
    }
    if (versioned(q, url, &p, &rc) < 0)
        return rc;
    const char *m = q->method;
    int get = !strcmp(m, "GET") || !strcmp(m, "HEAD");
    if (!strcmp(p, "/_ping") && get)
        return ping(q);
    if (!strcmp(p, "/version") && get)
        return version(q);
    if (!strcmp(p, "/info") && get)
        return info(q);
    if (!strncmp(p, "/containers/", 12)) {
        const char *rest = p + 12;
        /* the container's ops that live above containers.c: exec, pause, unpause */
        const char *op = strrchr(rest, '/');
        if (!strcmp(m, "POST") && op && op > rest &&
            (!strcmp(op, "/exec") || !strcmp(op, "/pause") || !strcmp(op, "/unpause"))) {
            char ref[1024];
            snprintf(ref, sizeof ref, "%.*s", (int)(op - rest), rest);
            sv_container *c = sv_container_find(q->s, ref);
            if (!c)
                return sv_reply_error(q, 404, "No such container: %s", ref);
            if (!strcmp(op, "/exec"))
                return sv_exec_create(q, c);
            if (sv_removing(c))
                return sv_reply_error(q, 409, "removal of container %s is already in progress",
                                      c->id);
            return sv_state_docker_pause(q, c, !strcmp(op, "/pause"));
        }
        return sv_containers_route(q, rest);
    }
    if (!strcmp(p, "/networks") || !strncmp(p, "/networks/", 10))
        return sv_networks_route(q, p + 9);
    if (!strcmp(p, "/volumes") || !strncmp(p, "/volumes/", 9))
        return sv_volumes_route(q, p + 8);
    if (!strncmp(p, "/exec/", 6))
        return sv_exec_route(q, p + 6);
    if (!strncmp(p, "/images/", 8))
        return sv_images_route(q, p + 8);
    if (!strcmp(p, "/commit") && !strcmp(m, "POST"))
        return sv_commit(q);
    if (!strcmp(p, "/build"))
        return sv_reply_error(q, 501,
                              "lis serve does not build images (import a rootfs with "
                              "lis rootfs import, then lis rootfs tag)");
    return sv_reply_error(q, 404, "page not found");
}
