/* store.c - looking up images in the rootfs store (no archive code here:
 * this file is linked into the lis binary itself). */
#include "rootfs.h"

#include <errno.h>
#include <stdio.h>
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

static int fail(lis_error *err, int code, const char *msg, const char *ref)
{
    if (err) {
        err->code = code;
        snprintf(err->msg, sizeof err->msg, msg, ref);
    }
    return -1;
}

int lis_store_resolve(const char *data_dir, const char *ref, char *dir, size_t len,
                      lis_error *err)
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
            return fail(err, EINVAL, "invalid image reference '%s'", ref);
        char path[4096];
        snprintf(path, sizeof path, "%s/rootfs/tags/%s/%s", data_dir, name, tag);
        FILE *f = fopen(path, "re");
        if (!f)
            return fail(err, ENOENT, "no image '%s' in the store (lis rootfs ls; lis rootfs "
                        "import or pull it)", ref);
        char line[128] = "";
        if (!fgets(line, sizeof line, f))
            line[0] = 0;
        fclose(f);
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "sha256:", 7))
            return fail(err, EINVAL, "corrupt tag file for '%s'", ref);
        snprintf(digest, sizeof digest, "%s", line + 7);
    }
    if (!valid_hex(digest, 64))
        return fail(err, EINVAL, "invalid digest in '%s'", ref);
    snprintf(dir, len, "%s/rootfs/blobs/sha256/%s", data_dir, digest);
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return fail(err, ENOENT, "image '%s' is tagged but its files are missing (lis rootfs gc; "
                    "import it again)", ref);
    return 0;
}
