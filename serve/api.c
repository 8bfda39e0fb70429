/* api.c - lis serve's native API under /lis/v1/ (docs/api.md): sandboxes
 * create / get / list / delete (a create may carry an Idempotency-Key), files
 * read / write / list / stat, a sandbox's timeout (removed when it ends),
 * health and capacity, and the routes of the
 * rest: exec is api_exec.c; pause, resume, stats, snapshot, fork and the
 * snapshot list are state.c. Sandboxes are the Docker side's containers
 * (containers.c) made without a started command, so both APIs see the same
 * ones. The slow calls (create, delete, files) run as worker jobs, the
 * container's busy count keeping the sandbox alive meanwhile. */
#include "serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define API_FILE_MAX SV_BODY_FILE_MAX /* largest file read or written in one request */
#define API_DEFAULT_MEM (256ull << 20)
#define API_HOST_RESERVE (256ull << 20)

/* ---- a sandbox's timeout ---------------------------------------------------------------- */

static enum MHD_Result timeout_op(sv_req *q, sv_container *c)
{
    cJSON *b = q->len ? cJSON_ParseWithLength(q->body, q->len) : NULL;
    double t = cJSON_IsObject(b) && cJSON_GetObjectItemCaseSensitive(b, "timeout")
                   ? sv_body_timeout(b)
                   : -1;
    cJSON_Delete(b);
    if (t < 0)
        return sv_reply_error(q, 400,
                              "the body must be {\"timeout\": seconds from now, 0 to "
                              "%.0f; 0 for none}",
                              SV_TIMEOUT_MAX);
    sv_container_set_timeout(c, t);
    return sv_reply_json(q, 200, sv_sandbox_json(c));
}

/* ---- create ---------------------------------------------------------------------------- */

static void created(sv_req *q, sv_container *c, const char *err)
{
    if (!c) {
        sv_req_finish_error(q, 500, "creating the sandbox: %s", err);
        return;
    }
    /* counted from the end of the creation; kept in the create body */
    sv_container_set_timeout(c, sv_jnum(c->config, "LisTimeout"));
    sv_req_finish(q, 201, sv_resp_json(sv_sandbox_json(c)));
}

static enum MHD_Result create(sv_req *q)
{
    cJSON *b = q->len ? cJSON_ParseWithLength(q->body, q->len) : NULL;
    if (!cJSON_IsObject(b)) {
        cJSON_Delete(b);
        return sv_reply_error(q, 400, "the body must be a JSON object with at least \"image\"");
    }
    const char *key = MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, "Idempotency-Key");
    if (key && (!*key || strlen(key) >= sizeof((sv_container *)0)->idem)) {
        cJSON_Delete(b);
        return sv_reply_error(q, 400, "Idempotency-Key must be 1 to 127 characters");
    }
    if (key)
        for (sv_container *c = q->s->containers; c; c = c->next)
            if (!strcmp(c->idem, key) && !sv_removing(c)) { /* a deleted one is forgotten */
                cJSON_Delete(b);
                if (!c->sb)
                    return sv_reply_error(q, 409,
                                          "a create with Idempotency-Key %s is in progress; "
                                          "retry it",
                                          key);
                struct MHD_Response *r = sv_resp_json(sv_sandbox_json(c));
                MHD_add_response_header(r, "Idempotent-Replayed", "true");
                return sv_reply(q, 200, r);
            }
    const char *image = sv_jstr(b, "image"), *net = sv_jstr(b, "net"), *name = sv_jstr(b, "name");
    double mem = sv_jsize(cJSON_GetObjectItemCaseSensitive(b, "memory"));
    double life = sv_body_timeout(b);
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(b, "env");
    const char *bad = !image    ? "\"image\" is required"
                      : mem < 0 ? "\"memory\" must be bytes or a size such as \"512m\""
                      : net && strcmp(net, "none") && strcmp(net, "proxy") && strcmp(net, "host")
                          ? "\"net\" must be none, proxy or host"
                      : env && !cJSON_IsObject(env) && !cJSON_IsNull(env)
                          ? "\"env\" must be an object of strings"
                      : life < 0 ? "\"timeout\" must be seconds, 0 to 2592000 (30 days); 0 or "
                                   "null for none"
                                 : NULL;
    if (bad) {
        cJSON_Delete(b);
        return sv_reply_error(q, 400, "%s", bad);
    }
    /* the Docker create body containers.c understands */
    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddStringToObject(cfg, "Image", image);
    cJSON *cmd = cJSON_AddArrayToObject(cfg, "Cmd");
    cJSON_AddItemToArray(cmd, cJSON_CreateString("sleep"));
    cJSON_AddItemToArray(cmd, cJSON_CreateString("infinity"));
    if (sv_env_append(cJSON_AddArrayToObject(cfg, "Env"), env) < 0) {
        cJSON_Delete(cfg);
        cJSON_Delete(b);
        return sv_reply_error(q, 400, "\"env\" must map names (without '=') to strings");
    }
    if (life > 0)
        cJSON_AddNumberToObject(cfg, "LisTimeout", life);
    char fxmsg[600];
    if (sv_effects_body(b, cfg, fxmsg, sizeof fxmsg) < 0) { /* "effects", "policy" */
        cJSON_Delete(cfg);
        cJSON_Delete(b);
        return sv_reply_error(q, 400, "%s", fxmsg);
    }
    cJSON *hc = cJSON_AddObjectToObject(cfg, "HostConfig");
    if (mem > 0)
        cJSON_AddNumberToObject(hc, "Memory", mem);
    if (net)
        cJSON_AddStringToObject(hc, "NetworkMode", net);
    char nm[128] = "";
    if (name)
        snprintf(nm, sizeof nm, "%s", name);
    cJSON_Delete(b);
    return sv_container_create(q, cfg, name ? nm : NULL, key, created);
}

static enum MHD_Result list(sv_req *q)
{
    cJSON *a = cJSON_CreateArray();
    for (sv_container *c = q->s->containers; c; c = c->next)
        cJSON_AddItemToArray(a, sv_sandbox_json(c));
    return sv_reply_json(q, 200, a);
}

/* ---- files ------------------------------------------------------------------------------- */

enum { F_READ, F_WRITE, F_STAT, F_LIST };

typedef struct file_job {
    sv_req *q;
    sv_container *c;
    int op;
    char path[4096];
    lis_error err;
    int rc;
    char kind;
    uint64_t size;
    char *data; /* read: the file; list: find's output */
    size_t len;
} file_job;

static const char *kind_name(char k)
{
    return k == 'f' ? "file" : k == 'd' ? "dir" : k == 'l' ? "symlink" : "other";
}

static void file_work(void *arg)
{
    file_job *j = arg;
    lis_sandbox *sb = j->c->sb;
    switch (j->op) {
    case F_READ:
        j->rc = lis_file_read(sb, j->path, API_FILE_MAX, &j->data, &j->len, &j->err);
        break;
    case F_WRITE:
        j->rc = lis_file_write(sb, j->path, j->q->body ? j->q->body : "", j->q->len, 0644, &j->err);
        break;
    case F_STAT: j->rc = lis_file_stat(sb, j->path, &j->kind, &j->size, &j->err); break;
    case F_LIST: {
        j->rc = lis_file_stat(sb, j->path, &j->kind, &j->size, &j->err);
        if (j->rc < 0)
            break;
        if (j->kind != 'd') {
            j->rc = lis_fail(&j->err, ENOTDIR, "%s is not a directory", j->path);
            break;
        }
        /* the runtime has no directory listing: the image's find (GNU) lists it */
        const char *argv[] = {"find", j->path,   "-mindepth",       "1", "-maxdepth",
                              "1",    "-printf", "%y\\t%s\\t%f\\0", NULL};
        lis_exec_spec e = {.argv = argv,
                           .cwd = "/",
                           .out = LIS_STDIO_CAPTURE,
                           .err = LIS_STDIO_CAPTURE,
                           .out_cap = 16u << 20};
        lis_result r;
        j->rc = lis_exec(sb, &e, &r, &j->err);
        if (j->rc < 0)
            break;
        if (r.exit_code != 0) {
            j->rc = lis_fail(&j->err, EIO, "listing %s: find exited %d: %.200s", j->path,
                             r.exit_code, r.err.data ? r.err.data : "");
        } else if (r.out.dropped) {
            j->rc = lis_fail(&j->err, EFBIG, "%s has too many entries to list at once", j->path);
        } else {
            j->data = r.out.data;
            j->len = r.out.len;
            r.out.data = NULL;
        }
        lis_result_free(&r);
        break;
    }
    }
}

static cJSON *list_json(const char *dir, const char *buf, size_t len)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t off = 0; off < len;) {
        const char *ent = buf + off;
        size_t n = strnlen(ent, len - off);
        off += n + 1;
        const char *t1 = memchr(ent, '\t', n);
        const char *t2 = t1 ? memchr(t1 + 1, '\t', n - (size_t)(t1 + 1 - ent)) : NULL;
        if (!t2)
            continue;
        char nm[4096], p[8192];
        snprintf(nm, sizeof nm, "%.*s", (int)(n - (size_t)(t2 + 1 - ent)), t2 + 1);
        snprintf(p, sizeof p, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", nm);
        char k = ent[0] == 'f' ? 'f' : ent[0] == 'd' ? 'd' : ent[0] == 'l' ? 'l' : 'o';
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", nm);
        cJSON_AddStringToObject(o, "path", p);
        cJSON_AddStringToObject(o, "type", kind_name(k));
        cJSON_AddNumberToObject(o, "size", strtod(t1 + 1, NULL));
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static void file_done(void *arg, int status)
{
    file_job *j = arg;
    j->c->busy--;
    if (j->rc < 0) {
        unsigned st = j->err.code == ENOENT                             ? 404
                      : j->err.code == ENOTDIR || j->err.code == EISDIR ? 400
                      : j->err.code == EFBIG                            ? 413
                                                                        : 400;
        sv_req_finish_error(j->q, st, "%s", j->err.msg);
    } else if (j->op == F_READ) {
        struct MHD_Response *r =
            MHD_create_response_from_buffer(j->len, j->data, MHD_RESPMEM_MUST_FREE);
        j->data = NULL;
        sv_resp_headers(r);
        MHD_add_response_header(r, "Content-Type", "application/octet-stream");
        sv_req_finish(j->q, 200, r);
    } else if (j->op == F_LIST) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", j->path);
        cJSON_AddItemToObject(o, "entries", list_json(j->path, j->data, j->len));
        sv_req_finish(j->q, 200, sv_resp_json(o));
    } else {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", j->path);
        if (j->op == F_STAT) {
            cJSON_AddStringToObject(o, "type", kind_name(j->kind));
            cJSON_AddNumberToObject(o, "size", (double)j->size);
        } else {
            cJSON_AddNumberToObject(o, "size", (double)j->q->len);
        }
        sv_req_finish(j->q, 200, sv_resp_json(o));
    }
    free(j->data);
    free(j);
}

static enum MHD_Result files(sv_req *q, sv_container *c, int op)
{
    const char *path = sv_arg(q, "path");
    if (!path || path[0] != '/')
        return sv_reply_error(q, 400, "the query needs path=/an/absolute/path");
    if (strlen(path) >= sizeof((file_job *)0)->path)
        return sv_reply_error(q, 400, "path too long");
    if (op == F_WRITE && q->len > API_FILE_MAX)
        return sv_reply_error(q, 413, "a file written at once holds at most %u bytes",
                              API_FILE_MAX);
    file_job *j = calloc(1, sizeof *j);
    if (!j)
        return sv_reply_error(q, 500, "out of memory");
    j->q = q;
    j->c = c;
    j->op = op;
    snprintf(j->path, sizeof j->path, "%s", path);
    c->busy++;
    sv_req_suspend(q);
    if (sv_job(q->s->loop, file_work, file_done, j) < 0) {
        c->busy--;
        free(j);
        sv_req_finish_error(q, 500, "out of memory");
    }
    return MHD_YES;
}

/* ---- health and capacity -------------------------------------------------------------------- */

static unsigned long long mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

static int count(sv_server *s)
{
    int n = 0;
    for (sv_container *c = s->containers; c; c = c->next)
        n++;
    return n;
}

/* How many more sandboxes fit now: the host's available memory, less a
 * reserve for the host, over what one sandbox may use (the server's default
 * --memory, or 256 MiB when it sets none). An estimate: sandboxes that use
 * less than their limit leave room for more. */
static enum MHD_Result capacity(sv_req *q)
{
    unsigned long long avail = mem_available();
    unsigned long long per =
        q->s->opts.limits.memory_bytes ? q->s->opts.limits.memory_bytes : API_DEFAULT_MEM;
    unsigned long long fit = avail > API_HOST_RESERVE ? (avail - API_HOST_RESERVE) / per : 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "sandboxes", count(q->s));
    cJSON_AddNumberToObject(o, "available", (double)fit);
    cJSON_AddNumberToObject(o, "memory_available", (double)avail);
    cJSON_AddNumberToObject(o, "memory_per_sandbox", (double)per);
    cJSON_AddNumberToObject(o, "memory_reserved", (double)API_HOST_RESERVE);
    return sv_reply_json(q, 200, o);
}

static enum MHD_Result health(sv_req *q)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "ok");
    cJSON_AddStringToObject(o, "api", "v1");
    cJSON_AddNumberToObject(o, "sandboxes", count(q->s));
    return sv_reply_json(q, 200, o);
}

/* ---- routing ---------------------------------------------------------------------------------- */

static enum MHD_Result on_sandbox(sv_req *q, sv_container *c, const char *op)
{
    const char *m = q->method;
    int get = !strcmp(m, "GET"), post = !strcmp(m, "POST");
    if (!*op) {
        if (get)
            return sv_reply_json(q, 200, sv_sandbox_json(c));
        if (!strcmp(m, "DELETE")) {
            if (sv_removing(c))
                return sv_reply_error(q, 409, "sandbox %s is already being deleted", c->id);
            if (c->busy)
                return sv_reply_error(q, 409,
                                      "sandbox %s is busy (being created, copied or "
                                      "snapshotted); try again",
                                      c->id);
            sv_container_remove(c, q);
            return MHD_YES;
        }
        return sv_reply_error(q, 405, "%s is not allowed on a sandbox", m);
    }
    if (!c->sb || sv_removing(c))
        return sv_reply_error(q, 409, "sandbox %s is %s", c->id, sv_sandbox_state(c));
    if (!strcmp(op, "snapshot") || !strcmp(op, "fork") || !strcmp(op, "pause") ||
        !strcmp(op, "resume") || !strcmp(op, "stats"))
        return sv_state_route(q, c, op);
    if (!strcmp(op, "exec") && post)
        return sv_api_exec(q, c);
    if (!strcmp(op, "timeout") && post)
        return timeout_op(q, c);
    if (!strcmp(op, "files") && get)
        return files(q, c, F_READ);
    if (!strcmp(op, "files") && (!strcmp(m, "PUT") || post))
        return files(q, c, F_WRITE);
    if (!strcmp(op, "files/list") && get)
        return files(q, c, F_LIST);
    if (!strcmp(op, "files/stat") && get)
        return files(q, c, F_STAT);
    return sv_reply_error(q, 404, "no such endpoint: %s /lis/v1/sandboxes/{id}/%s", m, op);
}

/* rest: the path after /lis/v1/ */
enum MHD_Result sv_api_route(sv_req *q, const char *rest)
{
    const char *m = q->method;
    int get = !strcmp(m, "GET");
    if (!strcmp(rest, "health") && get)
        return health(q);
    if (!strcmp(rest, "capacity") && get)
        return capacity(q);
    if (!strcmp(rest, "sandboxes")) {
        if (!strcmp(m, "POST"))
            return create(q);
        if (get)
            return list(q);
        return sv_reply_error(q, 405, "%s is not allowed on /lis/v1/sandboxes", m);
    }
    if (!strcmp(rest, "snapshots") || !strncmp(rest, "snapshots/", 10)) {
        if (rest[9] && rest[10] && !strcmp(m, "DELETE"))
            return sv_snapshot_delete(q, rest + 10);
        if (!get)
            return sv_reply_error(q, 405, "%s is not allowed on /lis/v1/snapshots", m);
        return sv_snapshots(q, rest[9] ? rest + 10 : "");
    }
    if (sv_rl_owns(rest)) /* groups, episodes, envs, rl: the episodes API */
        return sv_rl_route(q, rest);
    if (!strncmp(rest, "sandboxes/", 10)) {
        const char *id = rest + 10;
        const char *slash = strchr(id, '/');
        char ref[256];
        snprintf(ref, sizeof ref, "%.*s", slash ? (int)(slash - id) : (int)strlen(id), id);
        sv_container *c = sv_container_find(q->s, ref);
        if (!c)
            return sv_reply_error(q, 404, "no such sandbox: %s", ref);
        return on_sandbox(q, c, slash ? slash + 1 : "");
    }
    return sv_reply_error(q, 404, "no such endpoint: %s /lis/v1/%s", m, rest);
}
