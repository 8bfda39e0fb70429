/* pull.c - `lis rootfs pull`: the OCI distribution API over libcurl.
 *
 * Anonymous bearer-token auth, image indexes / manifest lists (the host's
 * platform is picked), gzip / zstd / plain layers, every blob's sha256
 * verified before it is used, retries with backoff, the proxy environment
 * (http_proxy, https_proxy, no_proxy; libcurl reads them), progress. */
#include "rf.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_MANIFEST (8u << 20)

static const char ACCEPT_MANIFESTS[] = "Accept: application/vnd.oci.image.index.v1+json, "
                                       "application/vnd.docker.distribution.manifest.list.v2+json, "
                                       "application/vnd.oci.image.manifest.v1+json, "
                                       "application/vnd.docker.distribution.manifest.v2+json";

typedef struct reg {
    char host[256]; /* what the user named: docker.io, ghcr.io, 127.0.0.1:5000 */
    char api[256];  /* the host actually contacted */
    char scheme[8];
    char repo[512];
    char tag[160];   /* "" when pulled by digest */
    char digest[80]; /* "" when pulled by tag */
    char canon[800]; /* host/repo:tag or host/repo@digest */
    char token[8192];
    int insecure, retries;
    rf_progress *pg;
} reg;

typedef struct resp {
    long code;
    char *body;
    size_t len, cap, max;
    int fd; /* download target instead of body, or -1 */
    rf_sha *sha;
    int write_failed;
    char www_auth[1024];
    char ctype[256];
    char dcd[128]; /* Docker-Content-Digest */
    rf_progress *pg;
} resp;

static void resp_reset(resp *r)
{
    r->code = 0;
    r->len = 0;
    r->write_failed = 0;
    r->www_auth[0] = r->ctype[0] = r->dcd[0] = 0;
}

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
    resp *r = arg;
    size_t len = sz * n;
    if (r->fd >= 0) {
        size_t off = 0;
        while (off < len) {
            ssize_t w = write(r->fd, p + off, len - off);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                r->write_failed = errno;
                return 0;
            }
            off += (size_t)w;
        }
        if (r->sha)
            rf_sha_update(r->sha, p, len);
        if (r->pg && r->pg->fn) {
            r->pg->done += len;
            r->pg->fn(r->pg->arg, r->pg->phase, r->pg->done, r->pg->total);
        }
        return len;
    }
    if (r->len + len + 1 > r->max) {
        r->write_failed = EFBIG;
        return 0;
    }
    if (LIS_GROW(r->body, r->cap, r->len + len + 1) < 0) {
        r->write_failed = ENOMEM;
        return 0;
    }
    memcpy(r->body + r->len, p, len);
    r->len += len;
    r->body[r->len] = 0;
    return len;
}

static void header_value(const char *line, size_t n, const char *name, char *out, size_t len)
{
    size_t nl = strlen(name);
    if (n <= nl + 1 || strncasecmp(line, name, nl) || line[nl] != ':')
        return;
    const char *v = line + nl + 1;
    const char *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    snprintf(out, len, "%.*s", (int)(end - v), v);
}

static size_t on_header(char *p, size_t sz, size_t n, void *arg)
{
    resp *r = arg;
    size_t len = sz * n;
    if (len > 5 && !strncmp(p, "HTTP/", 5)) { /* a new response (redirect): forget the old */
        r->www_auth[0] = r->ctype[0] = r->dcd[0] = 0;
    }
    header_value(p, len, "WWW-Authenticate", r->www_auth, sizeof r->www_auth);
    header_value(p, len, "Content-Type", r->ctype, sizeof r->ctype);
    header_value(p, len, "Docker-Content-Digest", r->dcd, sizeof r->dcd);
    return len;
}

static int is_local(const char *host)
{
    return !strncmp(host, "localhost", 9) || !strncmp(host, "127.", 4) ||
           !strncmp(host, "[::1]", 5);
}

/* One GET with retries. Returns 0 with r->code set, -1 on transport failure. */
static int get_once(reg *g, const char *url, const char *accept, int auth, resp *r, lis_error *err)
{
    int tries = g->retries > 0 ? g->retries : 3;
    for (int attempt = 1;; attempt++) {
        resp_reset(r);
        if (r->fd >= 0) {
            if (ftruncate(r->fd, 0) < 0 || lseek(r->fd, 0, SEEK_SET) < 0)
                return lis_fail_errno(err, "cannot write the download");
            if (r->sha) {
                rf_sha_free(r->sha);
                r->sha = rf_sha_new();
            }
        }
        uint64_t pg_start = r->pg ? r->pg->done : 0;
        CURL *c = curl_easy_init();
        if (!c)
            return lis_fail(err, ENOMEM, "cannot start libcurl");
        struct curl_slist *h = NULL;
        char ab[8300];
        if (accept)
            h = curl_slist_append(h, accept);
        if (auth && g->token[0]) {
            snprintf(ab, sizeof ab, "Authorization: Bearer %s", g->token);
            h = curl_slist_append(h, ab);
        }
        char errbuf[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_USERAGENT, "lis/0.1 (rootfs pull)");
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
        curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
        if (g->insecure) {
            curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
            curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
        }
        CURLcode cc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        if (r->write_failed)
            return lis_fail(err, r->write_failed, "%s: %s", url,
                            r->write_failed == EFBIG ? "response too large"
                                                     : strerror(r->write_failed));
        int transient = cc != CURLE_OK || r->code == 429 || r->code >= 500;
        if (!transient)
            return 0;
        if (attempt >= tries) {
            if (cc != CURLE_OK)
                return lis_fail(err, EIO,
                                "cannot reach %s: %s (check the network, the proxy "
                                "settings, or --tls-verify=false for a plain-HTTP registry)",
                                g->api, errbuf[0] ? errbuf : curl_easy_strerror(cc));
            return 0; /* the caller reports the HTTP status */
        }
        if (r->pg)
            r->pg->done = pg_start;
        struct timespec ts = {.tv_sec = attempt / 2, .tv_nsec = (attempt % 2) * 500000000L};
        nanosleep(&ts, NULL);
    }
}

static void auth_param(const char *hdr, const char *key, char *out, size_t len)
{
    out[0] = 0;
    const char *p = hdr;
    size_t kl = strlen(key);
    while ((p = strcasestr(p, key))) {
        if ((p == hdr || p[-1] == ' ' || p[-1] == ',') && p[kl] == '=') {
            p += kl + 1;
            if (*p == '"') {
                p++;
                snprintf(out, len, "%.*s", (int)strcspn(p, "\""), p);
            } else {
                snprintf(out, len, "%.*s", (int)strcspn(p, ", "), p);
            }
            return;
        }
        p += kl;
    }
}

/* Fetches an anonymous bearer token as the WWW-Authenticate challenge asks. */
static int get_token(reg *g, const char *challenge, lis_error *err)
{
    if (strncasecmp(challenge, "Bearer ", 7))
        return lis_fail(err, EACCES,
                        "%s wants '%.40s' authentication; lis pulls anonymously "
                        "(public images only)",
                        g->api, challenge);
    char realm[1024], service[256], scope[600];
    auth_param(challenge + 7, "realm", realm, sizeof realm);
    auth_param(challenge + 7, "service", service, sizeof service);
    auth_param(challenge + 7, "scope", scope, sizeof scope);
    if (!*scope)
        snprintf(scope, sizeof scope, "repository:%s:pull", g->repo);
    if (strncmp(realm, "http://", 7) && strncmp(realm, "https://", 8))
        return lis_fail(err, EPROTO, "%s sent an invalid token realm '%s'", g->api, realm);
    CURL *c = curl_easy_init();
    char *es = c ? curl_easy_escape(c, service, 0) : NULL;
    char *ep = c ? curl_easy_escape(c, scope, 0) : NULL;
    char url[4096];
    snprintf(url, sizeof url, "%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?",
             es ? es : "", ep ? ep : "");
    curl_free(es);
    curl_free(ep);
    if (c)
        curl_easy_cleanup(c);
    resp r = {.fd = -1, .max = 1 << 20};
    int rc = get_once(g, url, NULL, 0, &r, err);
    if (rc == 0 && r.code != 200)
        rc = lis_fail(err, EACCES,
                      "the token service of %s refused an anonymous token for %s "
                      "(HTTP %ld): the image is private or does not exist",
                      g->api, g->repo, r.code);
    cJSON *j = rc == 0 ? cJSON_Parse(r.body ? r.body : "") : NULL;
    if (rc == 0) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "token");
        if (!cJSON_IsString(t))
            t = cJSON_GetObjectItemCaseSensitive(j, "access_token");
        if (cJSON_IsString(t) && strlen(t->valuestring) < sizeof g->token)
            snprintf(g->token, sizeof g->token, "%s", t->valuestring);
        else
            rc = lis_fail(err, EPROTO, "the token service of %s sent no usable token", g->api);
    }
    cJSON_Delete(j);
    free(r.body);
    return rc;
}

/* GET with auth handling: one token fetch on 401, then the final status. */
static int reg_get(reg *g, const char *path, const char *accept, resp *r, lis_error *err)
{
    char url[2048];
    snprintf(url, sizeof url, "%s://%s/v2/%s", g->scheme, g->api, path);
    if (get_once(g, url, accept, 1, r, err) < 0)
        return -1;
    if (r->code == 401 && r->www_auth[0]) {
        char ch[1024];
        snprintf(ch, sizeof ch, "%s", r->www_auth);
        if (get_token(g, ch, err) < 0)
            return -1;
        if (get_once(g, url, accept, 1, r, err) < 0)
            return -1;
    }
    return 0;
}

static int http_fail(reg *g, const resp *r, const char *what, lis_error *err)
{
    if (r->code == 404)
        return lis_fail(err, ENOENT, "%s: %s not found on %s (check the name and tag)", g->canon,
                        what, g->api);
    if (r->code == 401 || r->code == 403)
        return lis_fail(err, EACCES,
                        "%s: access to %s denied by %s (HTTP %ld; lis pulls "
                        "anonymously: public images only)",
                        g->canon, what, g->api, r->code);
    return lis_fail(err, EIO, "%s: %s: HTTP %ld from %s", g->canon, what, r->code, g->api);
}

/* REF -> host, repository, tag/digest (docker's rules for short names). */
static int parse_pull_ref(const char *ref, reg *g, lis_error *err)
{
    char buf[700];
    if (!ref || !*ref || strlen(ref) >= sizeof buf || strchr(ref, ' '))
        return lis_fail(err, EINVAL,
                        "invalid image reference '%s' (e.g. ubuntu:24.04, "
                        "ghcr.io/o/r:t, HOST:PORT/NAME:TAG)",
                        ref ? ref : "");
    snprintf(buf, sizeof buf, "%s", ref);
    char *at = strchr(buf, '@');
    if (at) {
        *at = 0;
        if (!rf_digest_hex(at + 1))
            return lis_fail(err, EINVAL, "invalid digest in '%s' (want NAME@sha256:<64 hex>)", ref);
        snprintf(g->digest, sizeof g->digest, "%s", at + 1);
    }
    char *colon = strrchr(buf, ':');
    if (colon && !strchr(colon, '/')) {
        *colon = 0;
        snprintf(g->tag, sizeof g->tag, "%s", colon + 1);
    } else if (!at) {
        snprintf(g->tag, sizeof g->tag, "latest");
    }
    char *slash = strchr(buf, '/');
    const char *repo = buf;
    snprintf(g->host, sizeof g->host, "docker.io");
    if (slash && (memchr(buf, '.', (size_t)(slash - buf)) ||
                  memchr(buf, ':', (size_t)(slash - buf)) || !strncmp(buf, "localhost/", 10))) {
        *slash = 0;
        snprintf(g->host, sizeof g->host, "%s", buf);
        repo = slash + 1;
    }
    int hub = !strcmp(g->host, "docker.io") || !strcmp(g->host, "index.docker.io");
    if (hub && !strchr(repo, '/'))
        snprintf(g->repo, sizeof g->repo, "library/%s", repo);
    else
        snprintf(g->repo, sizeof g->repo, "%s", repo);
    snprintf(g->api, sizeof g->api, "%s", hub ? "registry-1.docker.io" : g->host);
    /* validate through the store's name rules */
    char chk[1100], n[512], t[160];
    snprintf(chk, sizeof chk, "%s/%s:%s", g->host, g->repo, g->tag[0] ? g->tag : "latest");
    for (char *p = g->repo; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            return lis_fail(err, EINVAL,
                            "invalid image reference '%s': repository names are "
                            "lowercase",
                            ref);
    if (!*repo || rf_parse_ref(chk, n, sizeof n, t, sizeof t, NULL) < 0)
        return lis_fail(err, EINVAL,
                        "invalid image reference '%s' (e.g. ubuntu:24.04, "
                        "ghcr.io/o/r:t, HOST:PORT/NAME:TAG)",
                        ref);
    if (g->digest[0])
        snprintf(g->canon, sizeof g->canon, "%s/%s@%s", g->host, g->repo, g->digest);
    else
        snprintf(g->canon, sizeof g->canon, "%s/%s:%s", g->host, g->repo, g->tag);
    snprintf(g->scheme, sizeof g->scheme, "%s", is_local(g->api) ? "http" : "https");
    return 0;
}

/* Fetches a manifest (by tag or digest), verifying it when the digest is known. */
static int fetch_manifest(reg *g, const char *reference, const char *want_digest, resp *r,
                          char hex[65], lis_error *err)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/manifests/%s", g->repo, reference);
    if (reg_get(g, path, ACCEPT_MANIFESTS, r, err) < 0)
        return -1;
    if (r->code != 200)
        return http_fail(g, r, "the manifest", err);
    rf_sha256_mem(r->body ? r->body : "", r->len, hex);
    const char *want = rf_digest_hex(want_digest);
    if (want && strcmp(want, hex))
        return lis_fail(err, EBADMSG,
                        "%s: the manifest sha256:%.12s does not match its digest "
                        "%.19s; refusing it",
                        g->canon, hex, want_digest);
    return 0;
}

static int fetch_blob(reg *g, const char *digest, int fd, resp *r, lis_error *err)
{
    const char *want = rf_digest_hex(digest);
    if (!want)
        return lis_fail(err, EINVAL, "%s: unsupported blob digest '%s'", g->canon,
                        digest ? digest : "(none)");
    char path[1024];
    snprintf(path, sizeof path, "%s/blobs/%s", g->repo, digest);
    r->fd = fd;
    r->sha = rf_sha_new();
    int rc = reg_get(g, path, NULL, r, err);
    if (rc == 0 && r->code != 200)
        rc = http_fail(g, r, digest, err);
    if (rc == 0) {
        char hex[65];
        if (fd >= 0) {
            rf_sha_hex(r->sha, hex);
        } else {
            rf_sha256_mem(r->body ? r->body : "", r->len, hex);
        }
        if (strcmp(hex, want))
            rc = lis_fail(err, EBADMSG,
                          "%s: blob %.19s does not match its digest (got "
                          "sha256:%.12s): corrupt download or registry; refusing it",
                          g->canon, digest, hex);
    }
    rf_sha_free(r->sha);
    r->sha = NULL;
    return rc;
}

static int layer_type_ok(const char *mt)
{
    if (!mt)
        return 1;
    return !strncmp(mt, "application/vnd.oci.image.layer.v1.tar", 38) ||
           !strcmp(mt, "application/vnd.docker.image.rootfs.diff.tar.gzip") ||
           !strcmp(mt, "application/vnd.docker.image.rootfs.diff.tar");
}

/* The name the pulled image is tagged with: --name, else the reference as the
 * user wrote it (so `--image ubuntu:24.04` finds it), a digest alone as
 * NAME:sha256-<12 hex>. */
static int pull_tagref(const char *ref, const reg *g, const lis_rootfs_opts *o, char *tagref,
                       size_t len, lis_error *err)
{
    if (o && o->name) {
        char sname[512], stag[160];
        if (rf_parse_ref(o->name, sname, sizeof sname, stag, sizeof stag, err) < 0)
            return -1;
        snprintf(tagref, len, "%s", o->name);
        return 0;
    }
    char b[700];
    snprintf(b, sizeof b, "%s", ref);
    char *at = strchr(b, '@');
    if (at)
        *at = 0;
    if (g->digest[0] && !g->tag[0])
        snprintf(tagref, len, "%s:sha256-%.12s", b, g->digest + 7);
    else if (g->tag[0] && !strchr(strrchr(b, '/') ? strrchr(b, '/') : b, ':'))
        snprintf(tagref, len, "%s:%s", b, g->tag);
    else
        snprintf(tagref, len, "%s", b);
    return 0;
}

/* --insecure on a registry that is not local, like podman --tls-verify=false:
 * HTTPS without verification when it answers, else HTTP. */
static void probe_scheme(reg *g)
{
    if (!g->insecure || is_local(g->api))
        return;
    resp probe = {.fd = -1, .max = 1 << 16};
    char url[600];
    snprintf(url, sizeof url, "https://%s/v2/", g->api);
    lis_error ig = {0};
    int saved = g->retries;
    g->retries = 1;
    if (get_once(g, url, NULL, 0, &probe, &ig) < 0)
        snprintf(g->scheme, sizeof g->scheme, "http");
    g->retries = saved;
    free(probe.body);
}

static cJSON *parse_manifest(const reg *g, const resp *r, const char **mt, lis_error *err)
{
    cJSON *man = cJSON_Parse(r->body ? r->body : "");
    if (!man) {
        lis_fail(err, EPROTO, "%s: the manifest is not valid JSON", g->canon);
        return NULL;
    }
    const cJSON *mtj = cJSON_GetObjectItemCaseSensitive(man, "mediaType");
    *mt = cJSON_IsString(mtj) ? mtj->valuestring : r->ctype;
    return man;
}

static int is_index(const cJSON *man, const char *mt)
{
    return rf_is_index_type(mt) || (!cJSON_GetObjectItemCaseSensitive(man, "layers") &&
                                    cJSON_GetObjectItemCaseSensitive(man, "manifests"));
}

/* The manifest an image index names for the platform (r and hex as for
 * resolve_manifest). NULL with err. */
static cJSON *from_index(reg *g, const lis_rootfs_opts *o, cJSON *idx, resp *r, char hex[65],
                         const char **mt, lis_error *err)
{
    cJSON *d = rf_pick_manifest(idx, o ? o->platform : NULL, err);
    if (!d)
        return NULL;
    const cJSON *dd = cJSON_GetObjectItemCaseSensitive(d, "digest");
    if (!cJSON_IsString(dd) || !rf_digest_hex(dd->valuestring)) {
        lis_fail(err, EPROTO, "%s: the image index has an invalid digest", g->canon);
        return NULL;
    }
    char dg[80];
    snprintf(dg, sizeof dg, "%s", dd->valuestring);
    if (fetch_manifest(g, dg, dg, r, hex, err) < 0)
        return NULL;
    return parse_manifest(g, r, mt, err);
}

/* The image manifest of g's reference (r holds its response), through at
 * most three nested image indexes (the platform's entry of each), checked to
 * be schema 2; hex gets its sha256. NULL with err. */
static cJSON *resolve_manifest(reg *g, const lis_rootfs_opts *o, resp *r, char hex[65],
                               lis_error *err)
{
    const char *reference = g->digest[0] ? g->digest : g->tag;
    if (fetch_manifest(g, reference, g->digest, r, hex, err) < 0)
        return NULL;
    if (!g->digest[0] && r->dcd[0] && rf_digest_hex(r->dcd) && strcmp(rf_digest_hex(r->dcd), hex)) {
        lis_fail(err, EBADMSG,
                 "%s: the manifest does not match the digest the registry "
                 "announced (%.19s); refusing it",
                 g->canon, r->dcd);
        return NULL;
    }
    const char *mt;
    cJSON *man = parse_manifest(g, r, &mt, err);
    for (int depth = 0; man && is_index(man, mt); depth++) {
        cJSON *idx = man;
        man = NULL;
        if (depth > 3)
            lis_fail(err, ELOOP, "%s: image indexes nested too deeply", g->canon);
        else
            man = from_index(g, o, idx, r, hex, &mt, err);
        cJSON_Delete(idx);
    }
    if (!man)
        return NULL;
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(man, "schemaVersion");
    if (!cJSON_IsNumber(sv) || sv->valueint != 2) {
        lis_fail(err, EPROTO,
                 "%s: unsupported manifest (schema 1 or unknown); lis needs "
                 "OCI or docker schema 2 images",
                 g->canon);
        cJSON_Delete(man);
        return NULL;
    }
    return man;
}

/* meta.json's registry part: the source, the manifest's digest and the
 * image's config (its blob fetched and verified). NULL with err. */
static cJSON *pull_meta(reg *g, const cJSON *man, const char *hex, lis_error *err)
{
    cJSON *meta = cJSON_CreateObject();
    if (!meta) {
        lis_oom(err);
        return NULL;
    }
    cJSON_AddStringToObject(meta, "source", g->canon);
    cJSON_AddStringToObject(meta, "format", "registry");
    char mdg[80];
    snprintf(mdg, sizeof mdg, "sha256:%s", hex);
    cJSON_AddStringToObject(meta, "manifest", mdg);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(man, "config");
    const cJSON *cd = cJSON_GetObjectItemCaseSensitive(cfg, "digest");
    if (cJSON_IsString(cd)) {
        resp cr = {.fd = -1, .max = MAX_MANIFEST};
        int rc = fetch_blob(g, cd->valuestring, -1, &cr, err);
        if (rc == 0)
            rf_meta_add_config(meta, cr.body ? cr.body : "");
        free(cr.body);
        if (rc < 0) {
            cJSON_Delete(meta);
            return NULL;
        }
    }
    return meta;
}

/* Before any download: the layers' total size (for the progress) and each
 * one's media type. Their number, or -1 with err. */
static int check_layers(const reg *g, const cJSON *ls, rf_progress *pg, lis_error *err)
{
    int n = cJSON_IsArray(ls) ? cJSON_GetArraySize(ls) : 0;
    if (n == 0)
        return lis_fail(err, EPROTO, "%s: the manifest lists no layers", g->canon);
    const cJSON *l;
    cJSON_ArrayForEach(l, ls)
    {
        const cJSON *sz = cJSON_GetObjectItemCaseSensitive(l, "size");
        const cJSON *lmt = cJSON_GetObjectItemCaseSensitive(l, "mediaType");
        /* a registry's number: only a sane size converts (no UB on -1 or 1e300) */
        if (cJSON_IsNumber(sz) && sz->valuedouble >= 0 && sz->valuedouble < 9e18)
            pg->total += (uint64_t)sz->valuedouble;
        if (!layer_type_ok(cJSON_IsString(lmt) ? lmt->valuestring : NULL))
            return lis_fail(err, EPROTO, "%s: unsupported layer type %s", g->canon,
                            lmt->valuestring);
    }
    return n;
}

/* Each layer's blob, verified, into tmp/layerN: files gets the paths (*nl of
 * them, the caller frees them), jl the digests. */
static int fetch_layers(reg *g, const cJSON *ls, const char *tmp, char **files, size_t *nl,
                        cJSON *jl, rf_progress *pg, lis_error *err)
{
    const cJSON *l;
    cJSON_ArrayForEach(l, ls)
    {
        const cJSON *dg = cJSON_GetObjectItemCaseSensitive(l, "digest");
        const char *d = cJSON_IsString(dg) ? dg->valuestring : NULL;
        char fp[4200];
        snprintf(fp, sizeof fp, "%s/layer%zu", tmp, *nl);
        if (!(files[*nl] = strdup(fp)))
            return lis_oom(err);
        (*nl)++;
        int fd = open(fp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
            return lis_fail_errno(err, "cannot create %s", fp);
        resp br = {.fd = fd, .max = 0, .pg = pg};
        int brc = fetch_blob(g, d, fd, &br, err);
        close(fd);
        free(br.body);
        if (brc < 0)
            return -1;
        cJSON_AddItemToArray(jl, cJSON_CreateString(d));
    }
    if (pg->fn)
        pg->fn(pg->arg, pg->phase, pg->total, pg->total);
    return 0;
}

int lis_rootfs_pull(const char *data_dir, const char *ref, const lis_rootfs_opts *o,
                    lis_rootfs_result *res, lis_error *err)
{
    lis_rootfs_result dummy;
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof *res);
    snprintf(res->format, sizeof res->format, "registry");
    reg *g = calloc(1, sizeof *g);
    if (!g)
        return lis_oom(err);
    int rc = -1, lock = -1;
    char tmp[4096] = "", tagref[800], hex[65];
    resp r = {.fd = -1, .max = MAX_MANIFEST};
    cJSON *man = NULL, *meta = NULL;
    char **files = NULL;
    size_t nl = 0;
    rf_progress pg = {.fn = o ? o->progress : NULL,
                      .arg = o ? o->progress_arg : NULL,
                      .phase = "download"};
    if (parse_pull_ref(ref, g, err) < 0 || pull_tagref(ref, g, o, tagref, sizeof tagref, err) < 0)
        goto out;
    g->insecure = o && o->insecure;
    g->retries = o && o->retries > 0 ? o->retries : 3;
    g->pg = &pg;
    probe_scheme(g);
    if (!(man = resolve_manifest(g, o, &r, hex, err)))
        goto out;
    if ((lock = rf_store_open(data_dir, 0, err)) < 0)
        goto out;
    if (rf_blob_exists(data_dir, hex)) {
        res->existed = 1;
        rc = rf_finish_tag(data_dir, hex, tagref, res, err);
        goto out;
    }
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(man, "layers");
    int n;
    if (!(meta = pull_meta(g, man, hex, err)) || (n = check_layers(g, ls, &pg, err)) < 0 ||
        rf_store_tmpdir(data_dir, "pull", tmp, sizeof tmp, err) < 0)
        goto out;
    cJSON *jl = cJSON_AddArrayToObject(meta, "layers");
    if (!(files = calloc((size_t)n + 1, sizeof *files)) || !jl) {
        lis_oom(err);
        goto out;
    }
    if (fetch_layers(g, ls, tmp, files, &nl, jl, &pg, err) < 0)
        goto out;
    /* every blob is verified: now build the tree */
    rc = rf_build_image(data_dir, hex, (const char *const *)files, NULL, nl, 1, meta, o, res, err);
    if (rc == 0)
        rc = rf_finish_tag(data_dir, hex, tagref, res, err);
out:
    if (*tmp)
        rf_rm_tree(tmp);
    for (size_t i = 0; files && i < nl; i++)
        free(files[i]);
    free(files);
    if (lock >= 0)
        close(lock);
    cJSON_Delete(man);
    cJSON_Delete(meta);
    free(r.body);
    free(g);
    return rc;
}
