/* oci.c - OCI image layouts (directories and tars) and docker-archive tars:
 * choosing the manifest, verifying blobs, and applying the layers in order. */
#include "rf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define MAX_JSON (8u << 20)

const char *rf_host_arch(void)
{
#if defined(__x86_64__)
    return "amd64";
#elif defined(__aarch64__)
    return "arm64";
#elif defined(__arm__)
    return "arm";
#elif defined(__i386__)
    return "386";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return "ppc64le";
#elif defined(__s390x__)
    return "s390x";
#elif defined(__riscv) && __riscv_xlen == 64
    return "riscv64";
#else
    return "unknown";
#endif
}

int rf_is_index_type(const char *mt)
{
    return mt && (!strcmp(mt, "application/vnd.oci.image.index.v1+json") ||
                  !strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json"));
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

cJSON *rf_pick_manifest(cJSON *index, const char *platform, lis_error *err)
{
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(index, "manifests");
    int n = cJSON_IsArray(ms) ? cJSON_GetArraySize(ms) : 0;
    if (n == 0) {
        lis_fail(err, EINVAL, "the image index lists no manifests");
        return NULL;
    }
    char want[128], *wos = want, *warch, *wvar;
    snprintf(want, sizeof want, "%s", platform && *platform ? platform : "");
    if (!*want)
        snprintf(want, sizeof want, "linux/%s", rf_host_arch());
    warch = strchr(want, '/');
    if (!warch) {
        lis_fail(err, EINVAL, "invalid platform '%s' (use OS/ARCH[/VARIANT], e.g. linux/amd64)",
                 want);
        return NULL;
    }
    *warch++ = 0;
    wvar = strchr(warch, '/');
    if (wvar)
        *wvar++ = 0;
    int any_platform = 0;
    cJSON *first = NULL, *latest = NULL, *best = NULL;
    char avail[256] = "";
    cJSON *d;
    cJSON_ArrayForEach(d, ms)
    {
        if (!first)
            first = d;
        const char *rn = jstr(cJSON_GetObjectItemCaseSensitive(d, "annotations"),
                              "org.opencontainers.image.ref.name");
        if (rn && !strcmp(rn, "latest") && !latest)
            latest = d;
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(d, "platform");
        if (!cJSON_IsObject(p))
            continue;
        any_platform = 1;
        const char *os = jstr(p, "os"), *arch = jstr(p, "architecture"), *var = jstr(p, "variant");
        if (os && arch && strcmp(os, "unknown") && strlen(avail) < 200)
            snprintf(avail + strlen(avail), sizeof avail - strlen(avail), "%s%s/%s%s%s",
                     *avail ? ", " : "", os, arch, var ? "/" : "", var ? var : "");
        if (!os || !arch || strcmp(os, wos) || strcmp(arch, warch))
            continue;
        if (wvar && (!var || strcmp(var, wvar)))
            continue;
        if (!best)
            best = d;
    }
    if (best)
        return best;
    if (!any_platform)
        return latest ? latest : first;
    lis_fail(err, ENOENT,
             "the image has no manifest for %s/%s%s%s (it has: %s); choose one "
             "with --platform",
             wos, warch, wvar ? "/" : "", wvar ? wvar : "", avail);
    return NULL;
}

void rf_meta_add_config(cJSON *meta, const char *config_json)
{
    cJSON *c = cJSON_Parse(config_json);
    if (!c)
        return;
    cJSON *out = cJSON_CreateObject();
    const char *s;
    if ((s = jstr(c, "architecture")))
        cJSON_AddStringToObject(out, "architecture", s);
    if ((s = jstr(c, "os")))
        cJSON_AddStringToObject(out, "os", s);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(c, "config");
    static const char *const keys[] = {"Env", "Cmd", "Entrypoint", "WorkingDir", "User", "Labels"};
    for (size_t i = 0; cJSON_IsObject(cfg) && i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, keys[i]);
        if (v && !cJSON_IsNull(v))
            cJSON_AddItemToObject(out, keys[i], cJSON_Duplicate(v, 1));
    }
    cJSON_AddItemToObject(meta, "config", out);
    cJSON_Delete(c);
}

/* dir/rel, resolved, must stay inside dir (image archives may hold symlinks). */
static int inside(const char *dir, const char *rel, char *out, size_t len, lis_error *err)
{
    char rdir[PATH_MAX], p[PATH_MAX * 2], rp[PATH_MAX];
    if (!realpath(dir, rdir))
        return lis_fail_errno(err, "%s", dir);
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    if (rel[0] == '/' || strstr(rel, "..") || !realpath(p, rp))
        return lis_fail(err, ENOENT,
                        "the image refers to '%s', which is missing or outside "
                        "the image (incomplete or unsafe archive)",
                        rel);
    size_t n = strlen(rdir);
    if (strncmp(rp, rdir, n) || rp[n] != '/')
        return lis_fail(err, EPERM,
                        "the image file '%s' points outside the image; refusing it "
                        "(unsafe archive)",
                        rel);
    struct stat st;
    if (stat(rp, &st) < 0 || !S_ISREG(st.st_mode))
        return lis_fail(err, EINVAL, "the image file '%s' is not a regular file", rel);
    snprintf(out, len, "%s", rp);
    return 0;
}

/* Reads blobs/sha256/<hex> of a layout and checks its digest. */
static char *read_blob(const char *dir, const char *digest, size_t *len, lis_error *err)
{
    const char *hex = rf_digest_hex(digest);
    if (!hex) {
        lis_fail(err, EINVAL, "unsupported or invalid digest '%s' (only sha256 is supported)",
                 digest ? digest : "(none)");
        return NULL;
    }
    char rel[100], path[PATH_MAX];
    snprintf(rel, sizeof rel, "blobs/sha256/%s", hex);
    if (inside(dir, rel, path, sizeof path, err) < 0)
        return NULL;
    size_t n = 0;
    char *data = rf_read_file(path, MAX_JSON, &n);
    if (!data) {
        lis_fail_errno(err, "cannot read %s", rel);
        return NULL;
    }
    char got[65];
    rf_sha256_mem(data, n, got);
    if (strcmp(got, hex)) {
        free(data);
        lis_fail(err, EBADMSG, "blob %.19s has sha256 %.12s: corrupt image; refusing it", digest,
                 got);
        return NULL;
    }
    if (len)
        *len = n;
    return data;
}

static void default_ref(const char *source, const char *refname, char *out, size_t len)
{
    char name[512];
    rf_name_from_path(source, name, sizeof name);
    if (refname && (strchr(refname, '/') || strchr(refname, ':'))) {
        char n[512], t[160];
        if (rf_parse_ref(refname, n, sizeof n, t, sizeof t, NULL) == 0) {
            snprintf(out, len, "%s:%s", n, t);
            return;
        }
    }
    char n[512], t[160], try[700];
    snprintf(try, sizeof try, "%s:%s", name, refname && *refname ? refname : "latest");
    if (rf_parse_ref(try, n, sizeof n, t, sizeof t, NULL) == 0)
        snprintf(out, len, "%s:%s", n, t);
    else
        snprintf(out, len, "%s:latest", name);
}

/* The descriptor of index.json to import: by ref name, else the only one / "latest". */
static cJSON *pick_top(cJSON *index, const char *refsel, const char *source,
                       const lis_rootfs_opts *o, lis_error *err)
{
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(index, "manifests");
    char names[256] = "";
    int named = 0, with_platform = 0;
    cJSON *d, *hit = NULL, *latest = NULL;
    cJSON_ArrayForEach(d, ms)
    {
        const char *rn = jstr(cJSON_GetObjectItemCaseSensitive(d, "annotations"),
                              "org.opencontainers.image.ref.name");
        if (cJSON_GetObjectItemCaseSensitive(d, "platform"))
            with_platform = 1;
        if (!rn)
            continue;
        named++;
        if (strlen(names) < 200)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     *names ? ", " : "", rn);
        if (refsel && !strcmp(rn, refsel) && !hit)
            hit = d;
        if (!strcmp(rn, "latest") && !latest)
            latest = d;
    }
    if (refsel) {
        if (!hit)
            lis_fail(err, ENOENT, "%s has no image tagged '%s' (it has: %s)", source, refsel,
                     *names ? names : "no tags");
        return hit;
    }
    if (named > 1 && !with_platform) {
        if (latest)
            return latest;
        lis_fail(err, EINVAL, "%s holds several images (%s); choose one with PATH:TAG", source,
                 names);
        return NULL;
    }
    return rf_pick_manifest(index, o ? o->platform : NULL, err);
}

int rf_import_oci_dir(const char *data_dir, const char *dir, const char *format, const char *source,
                      const char *refsel, const lis_rootfs_opts *o, lis_rootfs_result *res,
                      lis_error *err)
{
    snprintf(res->format, sizeof res->format, "%s", format);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/index.json", dir);
    char *txt = rf_read_file(p, MAX_JSON, NULL);
    if (!txt)
        return lis_fail(err, errno, "%s: cannot read index.json: %s (not an OCI image layout)",
                        source, strerror(errno));
    cJSON *index = cJSON_Parse(txt);
    free(txt);
    if (!index)
        return lis_fail(err, EINVAL, "%s: index.json is not valid JSON", source);
    int rc = -1;
    cJSON *manifest = NULL, *sub = NULL, *meta = NULL;
    char *mtxt = NULL;
    const char **layers = NULL, **lhex = NULL;
    char(*lpath)[PATH_MAX] = NULL;
    cJSON *desc = pick_top(index, refsel, source, o, err);
    if (!desc)
        goto out;
    const char *refname = jstr(cJSON_GetObjectItemCaseSensitive(desc, "annotations"),
                               "org.opencontainers.image.ref.name");
    /* a nested index (multi-platform image): pick the platform inside it */
    for (int depth = 0; rf_is_index_type(jstr(desc, "mediaType")); depth++) {
        if (depth > 4) {
            lis_fail(err, ELOOP, "%s: image indexes nested too deeply", source);
            goto out;
        }
        char *itxt = read_blob(dir, jstr(desc, "digest"), NULL, err);
        if (!itxt)
            goto out;
        cJSON_Delete(sub);
        sub = cJSON_Parse(itxt);
        free(itxt);
        if (!sub) {
            lis_fail(err, EINVAL, "%s: an image index is not valid JSON", source);
            goto out;
        }
        if (!(desc = rf_pick_manifest(sub, o ? o->platform : NULL, err)))
            goto out;
    }
    const char *mdigest = jstr(desc, "digest");
    size_t mlen = 0;
    if (!(mtxt = read_blob(dir, mdigest, &mlen, err)))
        goto out;
    const char *hex = rf_digest_hex(mdigest);
    char ref[700];
    if (o && o->name)
        snprintf(ref, sizeof ref, "%s", o->name);
    else
        default_ref(source, refname, ref, sizeof ref);
    if (rf_blob_exists(data_dir, hex)) {
        res->existed = 1;
        rc = rf_finish_tag(data_dir, hex, ref, res, err);
        goto out;
    }
    if (!(manifest = cJSON_Parse(mtxt))) {
        lis_fail(err, EINVAL, "%s: the image manifest is not valid JSON", source);
        goto out;
    }
    meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "source", source);
    cJSON_AddStringToObject(meta, "format", format);
    cJSON_AddStringToObject(meta, "manifest", mdigest);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(manifest, "config");
    if (cJSON_IsObject(cfg)) {
        char *ctxt = read_blob(dir, jstr(cfg, "digest"), NULL, err);
        if (!ctxt)
            goto out;
        rf_meta_add_config(meta, ctxt);
        free(ctxt);
    }
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(manifest, "layers");
    int n = cJSON_IsArray(ls) ? cJSON_GetArraySize(ls) : 0;
    if (n == 0) {
        lis_fail(err, EINVAL, "%s: the image manifest lists no layers", source);
        goto out;
    }
    layers = calloc((size_t)n, sizeof *layers);
    lhex = calloc((size_t)n, sizeof *lhex);
    lpath = calloc((size_t)n, sizeof *lpath);
    cJSON *jl = cJSON_AddArrayToObject(meta, "layers");
    if (!layers || !lhex || !lpath) {
        lis_oom(err);
        goto out;
    }
    int i = 0;
    const cJSON *l;
    cJSON_ArrayForEach(l, ls)
    {
        const char *d = jstr(l, "digest");
        const char *lh = rf_digest_hex(d);
        if (!lh) {
            lis_fail(err, EINVAL, "%s: layer %d has an invalid digest", source, i + 1);
            goto out;
        }
        char rel[100];
        snprintf(rel, sizeof rel, "blobs/sha256/%s", lh);
        if (inside(dir, rel, lpath[i], sizeof lpath[i], err) < 0)
            goto out;
        layers[i] = lpath[i];
        lhex[i] = lh;
        cJSON_AddItemToArray(jl, cJSON_CreateString(d));
        i++;
    }
    rc = rf_build_image(data_dir, hex, layers, lhex, (size_t)n, 1, meta, o, res, err);
    if (rc == 0)
        rc = rf_finish_tag(data_dir, hex, ref, res, err);
out:
    cJSON_Delete(index);
    cJSON_Delete(sub);
    cJSON_Delete(manifest);
    cJSON_Delete(meta);
    free(mtxt);
    free(layers);
    free(lhex);
    free(lpath);
    return rc;
}

int rf_import_docker_dir(const char *data_dir, const char *dir, const char *archive_hex,
                         const char *source, const lis_rootfs_opts *o, lis_rootfs_result *res,
                         lis_error *err)
{
    snprintf(res->format, sizeof res->format, "docker-archive");
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    char *txt = rf_read_file(p, MAX_JSON, NULL);
    cJSON *m = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    const cJSON *img = cJSON_IsArray(m) ? cJSON_GetArrayItem(m, 0) : NULL;
    if (!cJSON_IsObject(img)) {
        cJSON_Delete(m);
        return lis_fail(err, EINVAL,
                        "%s: manifest.json is missing or not a docker-archive "
                        "manifest",
                        source);
    }
    if (cJSON_GetArraySize(m) > 1) {
        cJSON_Delete(m);
        return lis_fail(err, EINVAL,
                        "%s holds several images; save one image per archive "
                        "(docker save IMAGE, skopeo copy ... docker-archive:FILE)",
                        source);
    }
    int rc = -1;
    cJSON *meta = NULL;
    const char **layers = NULL;
    char(*lpath)[PATH_MAX] = NULL;
    char ref[700];
    const cJSON *tags = cJSON_GetObjectItemCaseSensitive(img, "RepoTags");
    const cJSON *t0 = cJSON_IsArray(tags) ? cJSON_GetArrayItem(tags, 0) : NULL;
    char n_[512], t_[160];
    if (o && o->name)
        snprintf(ref, sizeof ref, "%s", o->name);
    else if (cJSON_IsString(t0) &&
             rf_parse_ref(t0->valuestring, n_, sizeof n_, t_, sizeof t_, NULL) == 0) {
        /* docker.io/library/x:t -> x:t, as users type it */
        const char *short_ = n_;
        if (!strncmp(short_, "docker.io/", 10))
            short_ += 10;
        if (!strncmp(short_, "library/", 8))
            short_ += 8;
        snprintf(ref, sizeof ref, "%s:%s", short_, t_);
    } else
        default_ref(source, NULL, ref, sizeof ref);
    if (rf_blob_exists(data_dir, archive_hex)) {
        res->existed = 1;
        rc = rf_finish_tag(data_dir, archive_hex, ref, res, err);
        goto out;
    }
    meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "source", source);
    cJSON_AddStringToObject(meta, "format", "docker-archive");
    const char *cfg = jstr(img, "Config");
    if (cfg) {
        char cp[PATH_MAX];
        if (inside(dir, cfg, cp, sizeof cp, err) < 0)
            goto out;
        char *ctxt = rf_read_file(cp, MAX_JSON, NULL);
        if (ctxt)
            rf_meta_add_config(meta, ctxt);
        free(ctxt);
    }
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(img, "Layers");
    int n = cJSON_IsArray(ls) ? cJSON_GetArraySize(ls) : 0;
    if (n == 0) {
        lis_fail(err, EINVAL, "%s: the docker-archive manifest lists no layers", source);
        goto out;
    }
    layers = calloc((size_t)n, sizeof *layers);
    lpath = calloc((size_t)n, sizeof *lpath);
    if (!layers || !lpath) {
        lis_oom(err);
        goto out;
    }
    cJSON *jl = cJSON_AddArrayToObject(meta, "layers");
    int i = 0;
    const cJSON *l;
    cJSON_ArrayForEach(l, ls)
    {
        if (!cJSON_IsString(l) || inside(dir, l->valuestring, lpath[i], sizeof lpath[i], err) < 0) {
            if (!cJSON_IsString(l))
                lis_fail(err, EINVAL, "%s: invalid layer entry in manifest.json", source);
            goto out;
        }
        layers[i] = lpath[i];
        cJSON_AddItemToArray(jl, cJSON_CreateString(l->valuestring));
        i++;
    }
    rc = rf_build_image(data_dir, archive_hex, layers, NULL, (size_t)n, 1, meta, o, res, err);
    if (rc == 0)
        rc = rf_finish_tag(data_dir, archive_hex, ref, res, err);
out:
    cJSON_Delete(m);
    cJSON_Delete(meta);
    free(layers);
    free(lpath);
    return rc;
}
