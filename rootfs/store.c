/* store.c - looking up images in the rootfs store (no archive code here:
 * this file is linked into the lis binary itself). */
#include "rootfs.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int valid_hex(const char *s, size_t n)
{
    if (strlen(s) != n)
        return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return 0;
    return 1;
}

/* The "parent" (a digest) or "parent_dir" of a snapshot image's metadata, in
 * out ("" for an image that is no snapshot). 0, or -1 for unreadable meta. */
static int parent_of(const char *data_dir, const char *hex, char *out, size_t len, int *is_dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rootfs/meta/sha256/%s.json", data_dir, hex);
    out[0] = 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return 0; /* imports of old versions had no metadata: a base image */
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *m = cJSON_Parse(buf);
    if (!m)
        return -1;
    cJSON *p = cJSON_GetObjectItem(m, "parent"), *d = cJSON_GetObjectItem(m, "parent_dir");
    *is_dir = !cJSON_IsString(p) && cJSON_IsString(d);
    if (cJSON_IsString(p))
        snprintf(out, len, "%s", p->valuestring);
    else if (cJSON_IsString(d))
        snprintf(out, len, "%s", d->valuestring);
    cJSON_Delete(m);
    return 0;
}

/* The image's directory, then its parents' (a snapshot's chain, top first). */
static int resolve_chain(const char *data_dir, const char *hex, const char *ref, char *dir,
                         size_t len, lis_error *err)
{
    size_t used = 0;
    char cur[80];
    snprintf(cur, sizeof cur, "%s", hex);
    for (int depth = 0;; depth++) {
        if (depth >= LIS_MAX_LAYERS)
            return lis_fail(err, ELOOP, "image '%s' has a chain of more than 32 layers", ref);
        char blob[4096];
        snprintf(blob, sizeof blob, "%s/rootfs/blobs/sha256/%s", data_dir, cur);
        struct stat st;
        if (stat(blob, &st) < 0 || !S_ISDIR(st.st_mode))
            return lis_fail(err, ENOENT,
                            depth ? "a parent layer of image '%s' is missing from the "
                                    "store (lis rootfs ls)"
                                  : "image '%s' is tagged but its files are "
                                    "missing (lis rootfs gc; import it again)",
                            ref);
        int w = snprintf(dir + used, len - used, "%s%s", used ? ":" : "", blob);
        if (w < 0 || (size_t)w >= len - used)
            return lis_fail(err, ENAMETOOLONG, "the chain of layers of image '%s' is too long",
                            ref);
        used += (size_t)w;
        char parent[4096];
        int is_dir = 0;
        if (parent_of(data_dir, cur, parent, sizeof parent, &is_dir) < 0)
            return lis_fail(err, EINVAL, "corrupt metadata of image '%s'", ref);
        if (!parent[0])
            return 0;
        if (is_dir) { /* a snapshot of a sandbox made from --rootfs DIR (or a chain of them) */
            for (const char *c = parent; *c;) {
                char one[4096];
                size_t l = strcspn(c, ":");
                snprintf(one, sizeof one, "%.*s", (int)l, c);
                if (stat(one, &st) < 0 || !S_ISDIR(st.st_mode))
                    return lis_fail(err, ENOENT, "the parent directory %s of image '%s' is gone",
                                    one, ref);
                c += l + (c[l] == ':');
            }
            w = snprintf(dir + used, len - used, ":%s", parent);
            if (w < 0 || (size_t)w >= len - used)
                return lis_fail(err, ENAMETOOLONG, "the chain of layers of image '%s' is too long",
                                ref);
            return 0;
        }
        if (strncmp(parent, "sha256:", 7) || !valid_hex(parent + 7, 64))
            return lis_fail(err, EINVAL, "corrupt parent in the metadata of image '%s'", ref);
        snprintf(cur, sizeof cur, "%s", parent + 7);
    }
}

int lis_store_resolve(const char *data_dir, const char *ref, char *dir, size_t len, lis_error *err)
{
    char digest[80];
    if (!strncmp(ref, "sha256:", 7)) {
        snprintf(digest, sizeof digest, "%s", ref + 7);
    } else {
        char name[512], tag[128] = "latest";
        snprintf(name, sizeof name, "%s", ref);
        char *colon = strrchr(name, ':');
        if (colon && !strchr(colon, '/')) {
            *colon = 0;
            snprintf(tag, sizeof tag, "%s", colon + 1);
        }
        if (!*name || strstr(name, "..") || !*tag || strchr(tag, '/') || tag[0] == '.')
            return lis_fail(err, EINVAL, "invalid image reference '%s'", ref);
        char path[4096];
        snprintf(path, sizeof path, "%s/rootfs/tags/%s/%s", data_dir, name, tag);
        FILE *f = fopen(path, "re");
        if (!f)
            return lis_fail(err, ENOENT,
                            "no image '%s' in the store (lis rootfs ls; lis rootfs "
                            "import or pull it)",
                            ref);
        char line[128] = "";
        if (!fgets(line, sizeof line, f))
            line[0] = 0;
        fclose(f);
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "sha256:", 7))
            return lis_fail(err, EINVAL, "corrupt tag file for '%s'", ref);
        snprintf(digest, sizeof digest, "%s", line + 7);
    }
    if (!valid_hex(digest, 64))
        return lis_fail(err, EINVAL, "invalid digest in '%s'", ref);
    return resolve_chain(data_dir, digest, ref, dir, len, err);
}
