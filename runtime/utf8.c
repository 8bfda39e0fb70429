/* utf8.c - strict UTF-8 in what lis writes: the check, cuts on a character
 * boundary, and the one stated form of bytes that are not UTF-8 in JSON
 * (lis_json_print: invalid bytes become U+FFFD, the original bytes go
 * base64-encoded into a sibling "<key>_b64"; docs/monitoring.md). */
#include "lis.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t lis_utf8_seq(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* the second byte's range (no overlong, no surrogate) */
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

int lis_utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t l = lis_utf8_seq(s + i, n - i);
        if (!l)
            return 0;
        i += l;
    }
    return 1;
}

size_t lis_utf8_cut(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    /* the last lead byte within 3 bytes of the end, past continuation bytes */
    size_t i = n, back = 0;
    while (i > 0 && back < 3 && (p[i - 1] & 0xC0) == 0x80)
        i--, back++;
    if (i == 0 || p[i - 1] < 0xC2 || p[i - 1] > 0xF4)
        return n; /* ASCII, or no lead byte: nothing of a character to drop */
    size_t want = p[i - 1] >= 0xF0 ? 4 : p[i - 1] >= 0xE0 ? 3 : 2;
    return back + 1 < want ? i - 1 : n;
}

void lis_utf8_copy(char *dst, size_t len, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= len)
        n = lis_utf8_cut(src, len - 1);
    memcpy(dst, src ? src : "", n);
    dst[n] = 0;
}

char *lis_utf8_replace(const char *s, size_t n)
{
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t l = s[i] ? lis_utf8_seq(s + i, n - i) : 0;
        if (!l) { /* one U+FFFD per NUL or byte that starts no valid sequence */
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(o, s + i, l);
        o += l;
        i += l;
    }
    *o = 0;
    return out;
}

char *lis_base64(const void *data, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *o++ = abc[v >> 18 & 63];
        *o++ = abc[v >> 12 & 63];
        *o++ = i + 1 < n ? abc[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? abc[v & 63] : '=';
    }
    *o = 0;
    return out;
}

/* s[0..n) in the stated form under name in obj: its U+FFFD form (into
 * item when given, else a new member), its bytes base64 at "<name>_b64" (or
 * at b64name in map when map is given). */
static int put_form(cJSON *obj, const char *name, cJSON *item, cJSON *map, const char *b64name,
                    const char *s, size_t n)
{
    char *clean = lis_utf8_replace(s, n), *enc = lis_base64(s, n);
    int ok = clean && enc &&
             (item ? cJSON_SetValuestring(item, clean) != NULL
                   : cJSON_AddStringToObject(obj, name, clean) != NULL);
    cJSON *into = map ? map : obj;
    if (ok && into) { /* the bytes beside it */
        char sib[256];
        snprintf(sib, sizeof sib, "%s_b64", name);
        const char *key = map ? b64name : sib;
        cJSON_DeleteItemFromObjectCaseSensitive(into, key);
        ok = cJSON_AddStringToObject(into, key, enc) != NULL;
    }
    free(clean);
    free(enc);
    return ok ? 0 : -1;
}

int lis_json_add_bytes(cJSON *obj, const char *key, const char *s, size_t n)
{
    if (!lis_utf8_valid(s, n) || memchr(s, 0, n))
        return put_form(obj, key, NULL, NULL, NULL, s, n);
    char *t = malloc(n + 1); /* s need not be NUL-terminated at n */
    if (!t)
        return -1;
    memcpy(t, s, n);
    t[n] = 0;
    int ok = cJSON_AddStringToObject(obj, key, t) != NULL;
    free(t);
    return ok ? 0 : -1;
}

static int bad_string(const cJSON *c)
{
    return cJSON_IsString(c) && c->valuestring &&
           !lis_utf8_valid(c->valuestring, strlen(c->valuestring));
}

static int fix_object(cJSON *obj);

/* The strings of array arr (below object member key of parent, or the root
 * when parent is NULL): each invalid one replaced, its bytes kept in *map
 * (made in parent as "<key>_b64") at its index path ("3", "2.0" when nested). */
static int fix_array(cJSON *arr, cJSON *parent, const char *key, cJSON **map, const char *prefix)
{
    size_t i = 0;
    for (cJSON *c = arr->child; c; c = c->next, i++) {
        char path[128];
        snprintf(path, sizeof path, "%s%s%zu", prefix, *prefix ? "." : "", i);
        if (bad_string(c)) {
            if (parent && !*map) {
                char name[256];
                snprintf(name, sizeof name, "%s_b64", key);
                cJSON_DeleteItemFromObjectCaseSensitive(parent, name);
                *map = cJSON_AddObjectToObject(parent, name);
                if (!*map)
                    return -1;
            }
            const char *s = c->valuestring;
            if (put_form(NULL, "", c, parent ? *map : NULL, path, s, strlen(s)) < 0)
                return -1;
        } else if (cJSON_IsArray(c)) {
            if (fix_array(c, parent, key, map, path) < 0)
                return -1;
        } else if (cJSON_IsObject(c) && fix_object(c) < 0) {
            return -1;
        }
    }
    return 0;
}

/* An object's key that is not UTF-8: replaced by its U+FFFD form, its bytes
 * kept in the object's "_b64_keys" at the replaced key. */
static int fix_key(cJSON *obj, cJSON *c, cJSON **keys)
{
    if (!*keys) {
        cJSON_DeleteItemFromObjectCaseSensitive(obj, "_b64_keys");
        *keys = cJSON_AddObjectToObject(obj, "_b64_keys");
        if (!*keys)
            return -1;
    }
    size_t n = strlen(c->string);
    char *clean = lis_utf8_replace(c->string, n), *enc = lis_base64(c->string, n);
    char *copy = clean ? cJSON_malloc(strlen(clean) + 1) : NULL;
    cJSON *e = enc ? cJSON_CreateString(enc) : NULL;
    int ok = copy && e;
    if (ok) {
        strcpy(copy, clean);
        if (!(c->type & cJSON_StringIsConst))
            cJSON_free(c->string);
        c->type &= ~cJSON_StringIsConst;
        c->string = copy;
        ok = cJSON_AddItemToObject(*keys, copy, e);
    } else {
        cJSON_free(copy);
    }
    if (!ok)
        cJSON_Delete(e);
    free(clean);
    free(enc);
    return ok ? 0 : -1;
}

static int fix_object(cJSON *obj)
{
    cJSON *keys = NULL;
    /* the siblings made here are appended and valid: walking over them
     * changes nothing */
    for (cJSON *c = obj->child; c; c = c->next) {
        if (c->string && !lis_utf8_valid(c->string, strlen(c->string)) &&
            fix_key(obj, c, &keys) < 0)
            return -1;
        const char *key = c->string ? c->string : "";
        cJSON *map = NULL;
        if (bad_string(c)) {
            if (put_form(obj, key, c, NULL, NULL, c->valuestring, strlen(c->valuestring)) < 0)
                return -1;
        } else if (cJSON_IsArray(c)) {
            if (fix_array(c, obj, key, &map, "") < 0)
                return -1;
        } else if (cJSON_IsObject(c) && fix_object(c) < 0) {
            return -1;
        }
    }
    return 0;
}

/* 1 when a key or a string of j or below is not valid UTF-8 */
static int needs_fix(const cJSON *j)
{
    if ((j->string && !lis_utf8_valid(j->string, strlen(j->string))) || bad_string(j))
        return 1;
    for (const cJSON *c = j->child; c; c = c->next)
        if (needs_fix(c))
            return 1;
    return 0;
}

char *lis_json_print(const cJSON *j, int formatted)
{
    if (!j)
        return NULL;
    /* j itself is never changed (the agent's history goes to the model as it
     * is): a copy is fixed, and only when something needs it */
    cJSON *copy = NULL;
    if (needs_fix(j)) {
        copy = cJSON_Duplicate(j, 1);
        cJSON *none = NULL;
        int rc = !copy                  ? -1
                 : cJSON_IsObject(copy) ? fix_object(copy)
                 : cJSON_IsArray(copy)  ? fix_array(copy, NULL, "", &none, "")
                 : bad_string(copy)     ? put_form(NULL, "", copy, NULL, NULL, copy->valuestring,
                                                   strlen(copy->valuestring))
                                        : 0; /* only the root's own key (not printed) */
        if (rc < 0) {
            cJSON_Delete(copy);
            return NULL;
        }
        j = copy;
    }
    char *text = formatted ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    cJSON_Delete(copy);
    return text;
}
