/* images.c - Docker image references on the rootfs store's tags: inspect,
 * list, tag, delete, and images/create answered by lis's registry pull. A
 * snapshot (docker commit, state.c) is an image whose Parent is named. */
#include "rootfs.h"
#include "serve.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void sv_image_norm(const char *ref, char *out, size_t len)
{
    const char *r = ref;
    if (!strncmp(r, "docker.io/", 10))
        r += 10;
    else if (!strncmp(r, "index.docker.io/", 16))
        r += 16;
    if (!strncmp(r, "library/", 8))
        r += 8;
    if (!strncmp(r, "sha256:", 7)) {
        snprintf(out, len, "%s", r);
        return;
    }
    const char *colon = strrchr(r, ':');
    if (strchr(r, '@') || (colon && !strchr(colon, '/')))
        snprintf(out, len, "%s", r);
    else
        snprintf(out, len, "%s:latest", r);
}

static int is_hex(const char *s, size_t min)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!isxdigit((unsigned char)s[n]) || isupper((unsigned char)s[n]))
            return 0;
    return n >= min && n <= 64;
}

/* A unique prefix of an image id ("sha256:abc…" or "abc…", 4+ hex). */
static int resolve_prefix(sv_server *s, const char *ref, char *digest, size_t glen)
{
    const char *h = !strncmp(ref, "sha256:", 7) ? ref + 7 : ref;
    if (!is_hex(h, 4))
        return -1;
    lis_rootfs_image *imgs = NULL;
    size_t n = 0;
    lis_error err = {0};
    if (lis_rootfs_list(s->data_dir, &imgs, &n, &err) < 0)
        return -1;
    int found = 0;
    for (size_t i = 0; i < n; i++)
        if (!strncmp(imgs[i].digest + 7, h, strlen(h))) {
            if (found && strcmp(digest, imgs[i].digest)) {
                found = 2;
                break;
            }
            snprintf(digest, glen, "%s", imgs[i].digest);
            found = 1;
        }
    free(imgs);
    return found == 1 ? 0 : -1;
}

/* An image removed by digest on a worker (sv_image_remove, below). */
typedef struct sv_rm_job {
    sv_req *q;
    char target[700], digest[80];
    int native, gone, rc;
    lis_error err;
    struct sv_rm_job *next; /* in s->removing when removed by digest */
} rm_job;

static int being_removed(sv_server *s, const char *digest)
{
    for (rm_job *j = s->removing; j; j = j->next)
        if (!strcmp(j->digest, digest))
            return 1;
    return 0;
}

int sv_image_resolve(sv_server *s, const char *ref, char *dir, size_t dlen, char *digest,
                     size_t glen)
{
    char norm[600], dg[80] = "";
    lis_error err = {0};
    if (!*ref)
        return -1;
    sv_image_norm(ref, norm, sizeof norm);
    if (lis_store_resolve(s->data_dir, norm, dir, dlen, &err) < 0) {
        if (resolve_prefix(s, ref, dg, sizeof dg) < 0 ||
            lis_store_resolve(s->data_dir, dg, dir, dlen, &err) < 0)
            return -1;
    }
    /* the store's directory, or a snapshot's chain: its top layer */
    size_t top = strcspn(dir, ":");
    const char *b = memrchr(dir, '/', top);
    snprintf(dg, sizeof dg, "sha256:%.*s", (int)(b ? top - (size_t)(b + 1 - dir) : top),
             b ? b + 1 : dir);
    if (being_removed(s, dg))
        return -1;
    if (digest)
        snprintf(digest, glen, "%s", dg);
    return 0;
}

cJSON *sv_image_meta(sv_server *s, const char *digest)
{
    char *txt = NULL;
    lis_error err = {0};
    if (lis_rootfs_inspect(s->data_dir, digest, &txt, &err) < 0)
        return NULL;
    cJSON *m = cJSON_Parse(txt);
    free(txt);
    if (!cJSON_IsObject(m)) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

/* Docker's Parent: the parent image of a snapshot ("" for the rest). */
static void parent_of(sv_server *s, const char *digest, char *out, size_t len)
{
    cJSON *m = sv_image_meta(s, digest);
    const char *p = sv_jstr(m, "parent");
    snprintf(out, len, "%s", p && !strncmp(p, "sha256:", 7) ? p : "");
    cJSON_Delete(m);
}

static int ref_matches(const cJSON *filters, const char *ref);

/* The image's tags (those matching filters, when given). */
static cJSON *tags_of(lis_rootfs_image *imgs, size_t n, const char *digest, const cJSON *filters)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        if (!strcmp(imgs[i].digest, digest) && imgs[i].ref[0] && ref_matches(filters, imgs[i].ref))
            cJSON_AddItemToArray(a, cJSON_CreateString(imgs[i].ref));
    return a;
}

static cJSON *image_config(void)
{
    cJSON *c = cJSON_CreateObject();
    cJSON *env = cJSON_AddArrayToObject(c, "Env");
    cJSON_AddItemToArray(env,
                         cJSON_CreateString(
                             "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
    cJSON_AddNullToObject(c, "Cmd");
    cJSON_AddNullToObject(c, "Entrypoint");
    cJSON_AddStringToObject(c, "WorkingDir", "");
    cJSON_AddStringToObject(c, "User", "");
    cJSON_AddObjectToObject(c, "Labels");
    return c;
}

static enum MHD_Result inspect(sv_req *q, const char *name)
{
    char dir[4096], digest[80];
    if (sv_image_resolve(q->s, name, dir, sizeof dir, digest, sizeof digest) < 0)
        return sv_reply_error(q, 404, "no such image: %s: No such image: %s", name, name);
    lis_rootfs_image *imgs = NULL;
    size_t n = 0;
    lis_error err = {0};
    lis_rootfs_list(q->s->data_dir, &imgs, &n, &err);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "Id", digest);
    cJSON_AddItemToObject(o, "RepoTags", tags_of(imgs, n, digest, NULL));
    cJSON_AddArrayToObject(o, "RepoDigests");
    double created = 0;
    uint64_t size = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(imgs[i].digest, digest)) {
            created = imgs[i].created;
            size = imgs[i].size;
        }
    free(imgs);
    char ts[64];
    sv_rfc3339(created, ts, sizeof ts);
    cJSON_AddStringToObject(o, "Created", ts);
    cJSON_AddNumberToObject(o, "Size", (double)size);
    cJSON_AddNumberToObject(o, "VirtualSize", (double)size);
    cJSON_AddStringToObject(o, "Os", "linux");
    cJSON_AddStringToObject(o, "Architecture", "amd64");
    cJSON_AddItemToObject(o, "Config", image_config());
    char parent[128];
    parent_of(q->s, digest, parent, sizeof parent);
    cJSON_AddStringToObject(o, "Parent", parent);
    cJSON *rootfs = cJSON_AddObjectToObject(o, "RootFS");
    cJSON_AddStringToObject(rootfs, "Type", "layers");
    return sv_reply_json(q, 200, o);
}

/* dockerd's reference filter (FamiliarMatch): a glob on NAME:TAG or on NAME. */
static int m_reference(const void *o, const char *pattern)
{
    const char *ref = o, *colon = strrchr(ref, ':');
    char name[512];
    snprintf(name, sizeof name, "%.*s",
             colon && !strchr(colon, '/') ? (int)(colon - ref) : (int)strlen(ref), ref);
    return sv_filter_glob(pattern, ref) || sv_filter_glob(pattern, name);
}

static int ref_matches(const cJSON *filters, const char *ref)
{
    return sv_filter_any(filters, "reference", m_reference, ref);
}

static const char *const image_filters[] = {"before",    "dangling", "label",
                                            "reference", "since",    NULL};

/* The created time of each before and since image (0 when not
 * given): 0, or 404 with msg. */
static unsigned image_bounds(sv_req *q, const cJSON *f, lis_rootfs_image *imgs, size_t n,
                             double *before, double *since, char *msg, size_t mlen)
{
    const char *keys[] = {"before", "since"};
    double *out[] = {before, since};
    for (size_t k = 0; k < 2; k++) {
        *out[k] = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, sv_filter(f, keys[k]))
        {
            char dir[4096], dg[80];
            if (sv_image_resolve(q->s, e->valuestring, dir, sizeof dir, dg, sizeof dg) < 0) {
                char norm[700];
                sv_image_norm(e->valuestring, norm, sizeof norm);
                return snprintf(msg, mlen, "No such image: %s", norm), 404;
            }
            for (size_t i = 0; i < n; i++)
                if (!strcmp(imgs[i].digest, dg))
                    *out[k] = imgs[i].created;
        }
    }
    return 0;
}

static enum MHD_Result list(sv_req *q)
{
    char msg[800];
    cJSON *f;
    int dangling, dangling_given = sv_filters_dangling(sv_arg(q, "filters"), image_filters, &f,
                                                       &dangling, msg, sizeof msg);
    if (dangling_given < 0)
        return sv_reply_error(q, 400, "%s", msg);
    lis_rootfs_image *imgs = NULL;
    size_t n = 0;
    lis_error err = {0};
    if (lis_rootfs_list(q->s->data_dir, &imgs, &n, &err) < 0) {
        cJSON_Delete(f);
        return sv_reply_error(q, 500, "%s", err.msg);
    }
    double before, since;
    unsigned bad = image_bounds(q, f, imgs, n, &before, &since, msg, sizeof msg);
    if (bad) {
        free(imgs);
        cJSON_Delete(f);
        return sv_reply_error(q, bad, "%s", msg);
    }
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        int first = 1, tagged = 0, any = 0;
        for (size_t j = 0; j < n; j++) {
            if (strcmp(imgs[j].digest, imgs[i].digest))
                continue;
            first &= j >= i;
            tagged |= imgs[j].ref[0] != 0;
            any |= ref_matches(f, imgs[j].ref);
        }
        /* lis images carry no labels: a label filter matches none */
        if (!first || !any || (dangling_given && dangling == tagged) || sv_filter(f, "label") ||
            (before > 0 && imgs[i].created >= before) || (since > 0 && imgs[i].created <= since))
            continue;
        cJSON *o = cJSON_CreateObject();
        char parent[128];
        parent_of(q->s, imgs[i].digest, parent, sizeof parent);
        cJSON_AddStringToObject(o, "Id", imgs[i].digest);
        cJSON_AddStringToObject(o, "ParentId", parent);
        cJSON_AddItemToObject(o, "RepoTags", tags_of(imgs, n, imgs[i].digest, f));
        cJSON_AddArrayToObject(o, "RepoDigests");
        cJSON_AddNumberToObject(o, "Created", (double)(long)imgs[i].created);
        cJSON_AddNumberToObject(o, "Size", (double)imgs[i].size);
        cJSON_AddNumberToObject(o, "VirtualSize", (double)imgs[i].size);
        cJSON_AddNumberToObject(o, "SharedSize", -1);
        cJSON_AddNumberToObject(o, "Containers", -1);
        cJSON_AddObjectToObject(o, "Labels");
        cJSON_AddItemToArray(a, o);
    }
    free(imgs);
    cJSON_Delete(f);
    return sv_reply_json(q, 200, a);
}

static enum MHD_Result tag(sv_req *q, const char *name)
{
    const char *repo = sv_arg(q, "repo"), *t = sv_arg(q, "tag");
    if (!repo || !*repo)
        return sv_reply_error(q, 400, "repository name must have at least one component");
    char dir[4096], digest[80], want[700], norm[700];
    if (sv_image_resolve(q->s, name, dir, sizeof dir, digest, sizeof digest) < 0)
        return sv_reply_error(q, 404, "No such image: %s", name);
    snprintf(want, sizeof want, "%s%s%s", repo, t && *t ? ":" : "", t && *t ? t : "");
    sv_image_norm(want, norm, sizeof norm);
    lis_error err = {0};
    if (lis_rootfs_tag(q->s->data_dir, digest, norm, &err) < 0)
        return sv_reply_error(q, 400, "%s", err.msg);
    return sv_reply_status(q, 201);
}

static enum MHD_Result del(sv_req *q, const char *name)
{
    char dir[4096], digest[80], norm[600];
    if (sv_image_resolve(q->s, name, dir, sizeof dir, digest, sizeof digest) < 0)
        return sv_reply_error(q, 404, "No such image: %s", name);
    sv_image_norm(name, norm, sizeof norm);
    int is_id = !strncmp(norm, "sha256:", 7) ||
                lis_store_resolve(q->s->data_dir, norm, dir, sizeof dir, NULL) < 0;
    for (sv_container *c = q->s->containers; c; c = c->next)
        if (!strcmp(c->image_id, digest) && !sv_arg_bool(q, "force"))
            return sv_reply_error(q, 409,
                                  "conflict: unable to remove repository reference \"%s\" "
                                  "(must force) - container %.12s is using its referenced image "
                                  "%.19s",
                                  name, c->id, digest + 7);
    return sv_image_remove(q, is_id ? digest : norm, digest, 0);
}

/* ---- removal on a worker: a big image takes a while to delete --------------------- */

static void rm_work(void *arg)
{
    rm_job *j = arg;
    j->rc = lis_rootfs_rm(j->q->s->data_dir, j->target, &j->gone, &j->err);
}

static void rm_done(void *arg, int status)
{
    rm_job *j = arg;
    sv_server *s = j->q->s;
    for (rm_job **p = &s->removing; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            break;
        }
    if (j->rc < 0) {
        sv_req_finish_error(j->q, j->err.code == EBUSY ? 409 : 500, "%s", j->err.msg);
    } else if (j->native) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "deleted", j->digest);
        sv_req_finish(j->q, 200, sv_resp_json(o));
    } else {
        cJSON *a = cJSON_CreateArray();
        cJSON *u = cJSON_CreateObject();
        cJSON_AddStringToObject(u, "Untagged", j->target);
        cJSON_AddItemToArray(a, u);
        if (j->gone) {
            cJSON *d = cJSON_CreateObject();
            cJSON_AddStringToObject(d, "Deleted", j->digest);
            cJSON_AddItemToArray(a, d);
        }
        sv_req_finish(j->q, 200, sv_resp_json(a));
    }
    if (j->rc == 0)
        s->images_removed++;
    sv_autosnap_sweep(s); /* a fork snapshot it was made on may be unused now */
    free(j);
}

enum MHD_Result sv_image_remove(sv_req *q, const char *target, const char *digest, int native)
{
    rm_job *j = calloc(1, sizeof *j);
    if (!j)
        return sv_reply_error(q, 500, "out of memory");
    j->q = q;
    j->native = native;
    snprintf(j->target, sizeof j->target, "%s", target);
    snprintf(j->digest, sizeof j->digest, "%s", digest);
    if (!strncmp(target, "sha256:", 7)) { /* the image goes: it resolves as missing from now */
        j->next = q->s->removing;
        q->s->removing = j;
    }
    sv_req_suspend(q);
    if (sv_job(q->s->loop, rm_work, rm_done, j) < 0) {
        j->rc = lis_oom(&j->err);
        rm_done(j, 0);
    }
    return MHD_YES;
}

typedef struct pull_job {
    sv_req *q;
    char ref[700];
    lis_rootfs_result res;
    lis_error err;
    int rc;
} pull_job;

static void pull_work(void *arg)
{
    pull_job *j = arg;
    lis_rootfs_opts o = {.name = j->ref};
    j->rc = lis_rootfs_pull(j->q->s->data_dir, j->ref, &o, &j->res, &j->err);
}

static void pull_done(void *arg, int status)
{
    pull_job *j = arg;
    if (j->rc < 0) {
        sv_req_finish_error(j->q, 404,
                            "pull access denied for %s, or lis cannot pull it: %s "
                            "(No such image: %s)",
                            j->ref, j->err.msg, j->ref);
    } else {
        char body[2048];
        snprintf(body, sizeof body,
                 "{\"status\":\"Pulling from %s\"}\r\n{\"status\":\"Digest: %s\"}\r\n"
                 "{\"status\":\"Status: %s for %s\"}\r\n",
                 j->ref, j->res.digest,
                 j->res.existed ? "Image is up to date" : "Downloaded newer image", j->ref);
        sv_req_finish(j->q, 200, sv_resp_text(body, "application/json"));
    }
    free(j);
}

static enum MHD_Result create(sv_req *q)
{
    const char *from = sv_arg(q, "fromImage"), *t = sv_arg(q, "tag");
    if (!from || !*from)
        return sv_reply_error(q, 400,
                              "lis serve: images/create needs fromImage (import and build "
                              "are not supported; use lis rootfs import)");
    pull_job *j = calloc(1, sizeof *j);
    if (!j)
        return sv_reply_error(q, 500, "out of memory");
    j->q = q;
    char want[700];
    if (t && *t && !strchr(from, '@'))
        snprintf(want, sizeof want, "%s%s%s", from,
                 t[0] == 's' && !strncmp(t, "sha256:", 7) ? "@" : ":", t);
    else
        snprintf(want, sizeof want, "%s", from);
    sv_image_norm(want, j->ref, sizeof j->ref);
    sv_req_suspend(q);
    if (sv_job(q->s->loop, pull_work, pull_done, j) < 0) {
        free(j);
        sv_req_finish_error(q, 500, "out of memory");
    }
    return MHD_YES;
}

/* rest: "json", "create", "NAME/json", "NAME/tag", "NAME" (DELETE) */
enum MHD_Result sv_images_route(sv_req *q, const char *rest)
{
    int get = !strcmp(q->method, "GET") || !strcmp(q->method, "HEAD");
    if (get && !strcmp(rest, "json"))
        return list(q);
    if (!strcmp(q->method, "POST") && !strcmp(rest, "create"))
        return create(q);
    size_t n = strlen(rest);
    char name[1024];
    if (get && n > 5 && !strcmp(rest + n - 5, "/json")) {
        snprintf(name, sizeof name, "%.*s", (int)(n - 5), rest);
        return inspect(q, name);
    }
    if (!strcmp(q->method, "POST") && n > 4 && !strcmp(rest + n - 4, "/tag")) {
        snprintf(name, sizeof name, "%.*s", (int)(n - 4), rest);
        return tag(q, name);
    }
    if (!strcmp(q->method, "DELETE") && n > 0)
        return del(q, rest);
    return sv_reply_error(q, 404, "page not found");
}
