/* admin.c - `lis rootfs ls | inspect | tag | rm | gc` on the store. */
#include "rf.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct tagrow {
    char ref[512];
    char hex[65];
} tagrow;

typedef struct tagv {
    tagrow *v;
    size_t n, cap;
} tagv;

static int read_tag(const char *path, char hex[65])
{
    char line[128] = "";
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    if (!fgets(line, sizeof line, f))
        line[0] = 0;
    fclose(f);
    line[strcspn(line, "\n")] = 0;
    const char *h = rf_digest_hex(line);
    if (!h)
        return -1;
    snprintf(hex, 65, "%s", h);
    return 0;
}

static void walk_tags(const char *base, const char *rel, tagv *out)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s%s%s", base, *rel ? "/" : "", rel);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strstr(e->d_name, ".tmp"))
            continue;
        char sub[PATH_MAX], full[PATH_MAX * 2];
        snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", base, sub);
        struct stat st;
        if (lstat(full, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            walk_tags(base, sub, out);
        } else if (S_ISREG(st.st_mode) && *rel) {
            char hex[65];
            if (read_tag(full, hex) < 0)
                continue;
            if (LIS_GROW(out->v, out->cap, out->n + 1) < 0)
                continue;
            snprintf(out->v[out->n].ref, sizeof out->v[out->n].ref, "%s:%s", rel, e->d_name);
            snprintf(out->v[out->n].hex, 65, "%s", hex);
            out->n++;
        }
    }
    closedir(d);
}

static void all_tags(const char *data_dir, tagv *out)
{
    char base[PATH_MAX];
    snprintf(base, sizeof base, "%s/rootfs/tags", data_dir);
    memset(out, 0, sizeof *out);
    walk_tags(base, "", out);
}

static int cmp_row(const void *a, const void *b)
{
    const tagrow *x = a, *y = b;
    return strcmp(x->ref, y->ref);
}

static cJSON *read_meta(const char *data_dir, const char *hex)
{
    char p[PATH_MAX];
    rf_meta_path(data_dir, hex, p, sizeof p);
    char *t = rf_read_file(p, 8u << 20, NULL);
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    free(t);
    return j;
}

static void fill_image(const char *data_dir, const char *ref, const char *hex, lis_rootfs_image *im)
{
    memset(im, 0, sizeof *im);
    snprintf(im->ref, sizeof im->ref, "%s", ref);
    snprintf(im->digest, sizeof im->digest, "sha256:%s", hex);
    cJSON *m = read_meta(data_dir, hex);
    if (!m)
        return;
    const cJSON *v;
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(m, "source")))
        snprintf(im->source, sizeof im->source, "%s", v->valuestring);
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(m, "format")))
        snprintf(im->format, sizeof im->format, "%s", v->valuestring);
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(m, "size")) && v->valuedouble >= 0 &&
        v->valuedouble < 9e18)
        im->size = (uint64_t)v->valuedouble;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(m, "created")))
        im->created = v->valuedouble;
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(m, "parent")) ||
        cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(m, "parent_dir")))
        snprintf(im->parent, sizeof im->parent, "%s", v->valuestring);
    cJSON_Delete(m);
}

/* The hex of a snapshot's parent image into out (65), or 0 when it has none in the store. */
static int parent_hex(const char *data_dir, const char *hex, char out[65])
{
    cJSON *m = read_meta(data_dir, hex);
    const cJSON *p = m ? cJSON_GetObjectItemCaseSensitive(m, "parent") : NULL;
    const char *h = cJSON_IsString(p) ? rf_digest_hex(p->valuestring) : NULL;
    if (h)
        snprintf(out, 65, "%s", h);
    cJSON_Delete(m);
    return h != NULL;
}

/* The first image whose parent is hex (its hex into child), or 0. */
static int has_child(const char *data_dir, const char *hex, char child[65])
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/rootfs/blobs/sha256", data_dir);
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;
    while (d && !found && (e = readdir(d))) {
        char ph[65];
        if (rf_valid_hex(e->d_name) && parent_hex(data_dir, e->d_name, ph) && !strcmp(ph, hex)) {
            snprintf(child, 65, "%s", e->d_name);
            found = 1;
        }
    }
    if (d)
        closedir(d);
    return found;
}

int lis_rootfs_list(const char *data_dir, lis_rootfs_image **out, size_t *n, lis_error *err)
{
    *out = NULL;
    *n = 0;
    tagv tags;
    all_tags(data_dir, &tags);
    qsort(tags.v, tags.n, sizeof *tags.v, cmp_row);
    char bdir[PATH_MAX];
    snprintf(bdir, sizeof bdir, "%s/rootfs/blobs/sha256", data_dir);
    /* untagged blobs */
    char(*untagged)[65] = NULL;
    size_t nu = 0, cu = 0;
    DIR *d = opendir(bdir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!rf_valid_hex(e->d_name))
            continue;
        int used = 0;
        for (size_t i = 0; i < tags.n && !used; i++)
            used = !strcmp(tags.v[i].hex, e->d_name);
        if (used)
            continue;
        if (LIS_GROW(untagged, cu, nu + 1) < 0)
            break;
        snprintf(untagged[nu++], 65, "%s", e->d_name);
    }
    if (d)
        closedir(d);
    lis_rootfs_image *v = calloc(tags.n + nu + 1, sizeof *v);
    if (!v) {
        free(tags.v);
        free(untagged);
        return lis_oom(err);
    }
    size_t k = 0;
    for (size_t i = 0; i < tags.n; i++) {
        if (!rf_blob_exists(data_dir, tags.v[i].hex))
            continue; /* dangling tag: shown by nothing, removed by gc */
        fill_image(data_dir, tags.v[i].ref, tags.v[i].hex, &v[k++]);
    }
    for (size_t i = 0; i < nu; i++)
        fill_image(data_dir, "", untagged[i], &v[k++]);
    free(tags.v);
    free(untagged);
    *out = v;
    *n = k;
    return 0;
}

/* NAME[:TAG] -> tag file; sha256:HEX or a unique hex prefix (>= 6) -> blob. */
static int resolve_hex(const char *data_dir, const char *ref, char hex[65], char *tagpath,
                       size_t tlen, lis_error *err)
{
    if (tagpath)
        tagpath[0] = 0;
    const char *pre = !strncmp(ref, "sha256:", 7) ? ref + 7 : NULL;
    if (!pre) {
        char name[512], tag[160];
        lis_error e2 = {0};
        if (rf_parse_ref(ref, name, sizeof name, tag, sizeof tag, &e2) == 0) {
            char p[PATH_MAX * 2];
            snprintf(p, sizeof p, "%s/rootfs/tags/%s/%s", data_dir, name, tag);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) {
                if (read_tag(p, hex) < 0)
                    return lis_fail(err, EINVAL,
                                    "the tag file of '%s' is corrupt (lis rootfs rm "
                                    "it and import again)",
                                    ref);
                if (tagpath)
                    snprintf(tagpath, tlen, "%s", p);
                return 0;
            }
        }
        pre = ref;
    }
    size_t pl = strlen(pre);
    int hexok = pl >= 6 && pl <= 64;
    for (size_t i = 0; hexok && i < pl; i++)
        hexok = (pre[i] >= '0' && pre[i] <= '9') || (pre[i] >= 'a' && pre[i] <= 'f');
    int found = 0;
    if (hexok) {
        char bdir[PATH_MAX];
        snprintf(bdir, sizeof bdir, "%s/rootfs/blobs/sha256", data_dir);
        DIR *d = opendir(bdir);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (rf_valid_hex(e->d_name) && !strncmp(e->d_name, pre, pl)) {
                found++;
                snprintf(hex, 65, "%s", e->d_name);
            }
        if (d)
            closedir(d);
    }
    if (found == 1)
        return 0;
    if (found > 1)
        return lis_fail(err, EINVAL, "'%s' matches several images; give more digits", ref);
    return lis_fail(err, ENOENT, "no image '%s' in the store (lis rootfs ls)", ref);
}

int lis_rootfs_inspect(const char *data_dir, const char *ref, char **json, lis_error *err)
{
    char hex[65];
    *json = NULL;
    if (resolve_hex(data_dir, ref, hex, NULL, 0, err) < 0)
        return -1;
    if (!rf_blob_exists(data_dir, hex))
        return lis_fail(err, ENOENT,
                        "image '%s' is tagged but its files are missing (lis rootfs "
                        "gc; import it again)",
                        ref);
    cJSON *m = read_meta(data_dir, hex);
    if (!m)
        m = cJSON_CreateObject();
    char d[80], p[PATH_MAX];
    snprintf(d, sizeof d, "sha256:%s", hex);
    cJSON_DeleteItemFromObject(m, "digest");
    cJSON_AddStringToObject(m, "digest", d);
    rf_blob_path(data_dir, hex, p, sizeof p);
    cJSON_AddStringToObject(m, "path", p);
    cJSON *jt = cJSON_AddArrayToObject(m, "tags");
    tagv tags;
    all_tags(data_dir, &tags);
    qsort(tags.v, tags.n, sizeof *tags.v, cmp_row);
    for (size_t i = 0; i < tags.n; i++)
        if (!strcmp(tags.v[i].hex, hex))
            cJSON_AddItemToArray(jt, cJSON_CreateString(tags.v[i].ref));
    free(tags.v);
    *json = lis_json_print(m, 1);
    cJSON_Delete(m);
    return *json ? 0 : lis_oom(err);
}

int lis_rootfs_tag(const char *data_dir, const char *ref, const char *new_ref, lis_error *err)
{
    char hex[65];
    int lock = rf_store_open(data_dir, 0, err);
    if (lock < 0)
        return -1;
    int rc = resolve_hex(data_dir, ref, hex, NULL, 0, err);
    if (rc == 0 && !rf_blob_exists(data_dir, hex))
        rc = lis_fail(err, ENOENT, "image '%s' has no files (import it again)", ref);
    if (rc == 0)
        rc = rf_tag_write(data_dir, new_ref, hex, NULL, 0, err);
    close(lock);
    return rc;
}

/* Removes the tag file and its now-empty parent directories below tags/. */
static void unlink_tag(const char *data_dir, const char *path)
{
    char base[PATH_MAX], p[PATH_MAX];
    snprintf(base, sizeof base, "%s/rootfs/tags", data_dir);
    snprintf(p, sizeof p, "%s", path);
    unlink(p);
    char *s;
    while ((s = strrchr(p, '/')) && (size_t)(s - p) > strlen(base)) {
        *s = 0;
        if (rmdir(p) < 0)
            break;
    }
}

/* Takes the image out of the store (under the store lock); the tree itself
 * is removed by the caller after the lock is released: a big image takes
 * a while, and readers need not wait for it. trash: the tree to remove. */
static void unstore_image(const char *data_dir, const char *hex, char *trash, size_t tlen)
{
    char p[PATH_MAX];
    rf_blob_path(data_dir, hex, p, sizeof p);
    /* rename first, so a half-deleted tree is never visible under its digest */
    snprintf(trash, tlen, "%s/rootfs/tmp/%d-rm-%s", data_dir, (int)getpid(), hex);
    if (rename(p, trash) < 0)
        snprintf(trash, tlen, "%s", p);
    rf_meta_path(data_dir, hex, p, sizeof p);
    unlink(p);
}

int lis_rootfs_rm(const char *data_dir, const char *ref, int *removed_image, lis_error *err)
{
    if (removed_image)
        *removed_image = 0;
    int lock = rf_store_open(data_dir, 1, err);
    if (lock < 0)
        return -1;
    char hex[65], tagpath[PATH_MAX], trash[PATH_MAX + 64] = "";
    int rc = resolve_hex(data_dir, ref, hex, tagpath, sizeof tagpath, err);
    if (rc == 0) {
        tagv tags;
        all_tags(data_dir, &tags);
        int others = 0;
        char base[PATH_MAX];
        snprintf(base, sizeof base, "%s/rootfs/tags", data_dir);
        for (size_t i = 0; i < tags.n; i++) {
            if (strcmp(tags.v[i].hex, hex))
                continue;
            char p[PATH_MAX * 2];
            char name[512], tag[160];
            if (rf_parse_ref(tags.v[i].ref, name, sizeof name, tag, sizeof tag, NULL) < 0)
                continue;
            snprintf(p, sizeof p, "%s/%s/%s", base, name, tag);
            if (!*tagpath)
                unlink_tag(data_dir, p); /* by digest: every tag goes */
            else if (strcmp(p, tagpath))
                others++;
        }
        free(tags.v);
        char child[65];
        if (!*tagpath && has_child(data_dir, hex, child)) {
            close(lock);
            return lis_fail(err, EBUSY,
                            "image sha256:%.12s is the parent of snapshot "
                            "sha256:%.12s: remove that first",
                            hex, child);
        }
        if (*tagpath)
            unlink_tag(data_dir, tagpath);
        if (!others && rf_blob_exists(data_dir, hex) && !has_child(data_dir, hex, child)) {
            unstore_image(data_dir, hex, trash, sizeof trash);
            if (removed_image)
                *removed_image = 1;
        }
    }
    close(lock);
    if (*trash)
        rf_rm_tree(trash);
    return rc;
}

int lis_rootfs_unstore_unused(const char *data_dir, const char *digest, char *trash, size_t tlen,
                              int *what, lis_error *err)
{
    *what = LIS_UNSTORE_GONE;
    trash[0] = 0;
    const char *hex = rf_digest_hex(digest);
    if (!hex)
        return lis_fail(err, EINVAL, "not an image digest: %s", digest);
    int lock = rf_store_open(data_dir, RF_LOCK_TRY, err);
    if (lock < 0) {
        if (err->code != EWOULDBLOCK)
            return -1;
        *what = LIS_UNSTORE_BUSY;
        return 0;
    }
    if (rf_blob_exists(data_dir, hex)) {
        tagv tags;
        all_tags(data_dir, &tags);
        int tagged = 0;
        for (size_t i = 0; i < tags.n && !tagged; i++)
            tagged = !strcmp(tags.v[i].hex, hex);
        free(tags.v);
        char child[65];
        if (tagged) {
            *what = LIS_UNSTORE_TAGGED;
        } else if (has_child(data_dir, hex, child)) {
            *what = LIS_UNSTORE_PARENT;
        } else {
            unstore_image(data_dir, hex, trash, tlen);
            *what = LIS_UNSTORE_DONE;
        }
    }
    close(lock);
    return 0;
}

int lis_rootfs_trash_rm(const char *trash) { return rf_rm_tree(trash); }

int lis_rootfs_gc(const char *data_dir, const char *const *keep, int *removed, uint64_t *freed,
                  lis_error *err)
{
    if (removed)
        *removed = 0;
    if (freed)
        *freed = 0;
    int lock = rf_store_open(data_dir, 1, err);
    if (lock < 0)
        return -1;
    tagv tags;
    all_tags(data_dir, &tags);
    char dir[PATH_MAX];
    /* leftovers of interrupted imports (nobody holds the store lock now) */
    snprintf(dir, sizeof dir, "%s/rootfs/tmp", data_dir);
    DIR *d = opendir(dir);
    struct dirent *e;
    int dfd = d ? dirfd(d) : -1;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char leftover[PATH_MAX + 256];
        snprintf(leftover, sizeof leftover, "%s/%s", dir, e->d_name);
        if (rf_rm_tree_at(dfd, e->d_name) < 0)
            rf_rm_tree(leftover); /* retries inside the mapped namespace */
    }
    if (d)
        closedir(d);
    /* dangling tags */
    for (size_t i = 0; i < tags.n; i++) {
        if (rf_blob_exists(data_dir, tags.v[i].hex))
            continue;
        char name[512], tag[160], p[PATH_MAX * 2];
        if (rf_parse_ref(tags.v[i].ref, name, sizeof name, tag, sizeof tag, NULL) < 0)
            continue;
        snprintf(p, sizeof p, "%s/rootfs/tags/%s/%s", data_dir, name, tag);
        unlink_tag(data_dir, p);
    }
    /* untagged images not in use: those of no tag, of no live sandbox's chain
     * and parent of no image kept */
    snprintf(dir, sizeof dir, "%s/rootfs/blobs/sha256", data_dir);
    char(*hexes)[65] = NULL;
    char *used = NULL;
    size_t nh = 0, ch = 0;
    d = opendir(dir);
    while (d && (e = readdir(d))) {
        if (!rf_valid_hex(e->d_name))
            continue;
        if (nh == ch) {
            ch = ch ? 2 * ch : 64;
            void *nv = realloc(hexes, ch * sizeof *hexes), *nu = realloc(used, ch);
            if (nv)
                hexes = nv;
            if (nu)
                used = nu;
            if (!nv || !nu) {
                closedir(d);
                free(hexes);
                free(used);
                free(tags.v);
                close(lock);
                return lis_oom(err);
            }
        }
        snprintf(hexes[nh], 65, "%s", e->d_name);
        used[nh] = 0;
        for (size_t i = 0; i < tags.n && !used[nh]; i++)
            used[nh] = !strcmp(tags.v[i].hex, e->d_name);
        char p[PATH_MAX], rp[PATH_MAX];
        rf_blob_path(data_dir, e->d_name, p, sizeof p);
        if (!realpath(p, rp))
            snprintf(rp, sizeof rp, "%s", p);
        for (size_t i = 0; keep && keep[i] && !used[nh]; i++)
            for (const char *c = keep[i]; *c && !used[nh];) { /* each layer of a chain */
                size_t l = strcspn(c, ":");
                used[nh] = (l == strlen(p) && !strncmp(c, p, l)) ||
                           (l == strlen(rp) && !strncmp(c, rp, l));
                c += l + (c[l] == ':');
            }
        nh++;
    }
    if (d)
        closedir(d);
    for (int pass = 0, changed = 1; changed && pass <= LIS_MAX_LAYERS; pass++) {
        changed = 0;
        for (size_t i = 0; i < nh; i++) {
            char ph[65];
            if (!used[i] || !parent_hex(data_dir, hexes[i], ph))
                continue;
            for (size_t j = 0; j < nh; j++)
                if (!used[j] && !strcmp(hexes[j], ph))
                    used[j] = changed = 1;
        }
    }
    for (size_t i = 0; i < nh; i++) {
        if (used[i])
            continue;
        char p[PATH_MAX];
        rf_blob_path(data_dir, hexes[i], p, sizeof p);
        if (freed)
            *freed += rf_tree_size(p);
        char trash[PATH_MAX + 64];
        unstore_image(data_dir, hexes[i], trash, sizeof trash);
        rf_rm_tree(trash); /* gc is rare: under the lock, so no leftover outlives it */
        if (removed)
            (*removed)++;
    }
    free(hexes);
    free(used);
    /* metadata without an image */
    snprintf(dir, sizeof dir, "%s/rootfs/meta/sha256", data_dir);
    d = opendir(dir);
    while (d && (e = readdir(d))) {
        char hex[65];
        if (strlen(e->d_name) != 69 || strcmp(e->d_name + 64, ".json"))
            continue;
        snprintf(hex, sizeof hex, "%.64s", e->d_name);
        if (!rf_blob_exists(data_dir, hex))
            unlinkat(dirfd(d), e->d_name, 0);
    }
    if (d)
        closedir(d);
    free(tags.v);
    close(lock);
    return 0;
}
