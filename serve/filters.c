/* filters.c - the `filters` argument of Docker's list endpoints (containers,
 * images, networks, volumes): parsed from both encodings ({"k":{"v":true}}
 * from the docker CLI, {"k":["v"]} from docker-py) into {"k":["v",...]},
 * every key checked against the endpoint's accepted ones, and dockerd's
 * matching rules (api/types/filters: a label's KV list, a regexp, a glob).
 *
 * Why a key that is not accepted is a 400: a filter silently ignored answers
 * every object, and a client that removes what a list returns (compose's
 * `down --remove-orphans`) then removes what it never meant to. */
#include "serve.h"

#include <fnmatch.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

/* Caps: a filter document is part of a URL (64 KiB at most), these only bound
 * the work per object listed. */
#define F_MAX_VALUES 256

static int add_value(cJSON *arr, const char *v, char *msg, size_t mlen)
{
    if (cJSON_GetArraySize(arr) >= F_MAX_VALUES) {
        snprintf(msg, mlen, "too many filter values (at most %d per key)", F_MAX_VALUES);
        return -1;
    }
    cJSON_AddItemToArray(arr, cJSON_CreateString(v));
    return 0;
}

int sv_filters_parse(const char *text, const char *const *accepted, cJSON **out, char *msg,
                     size_t mlen)
{
    *out = NULL;
    if (!text || !*text)
        return 0;
    cJSON *in = cJSON_Parse(text);
    if (!cJSON_IsObject(in)) {
        cJSON_Delete(in);
        snprintf(msg, mlen, "invalid filters: %.200s", text);
        return -1;
    }
    cJSON *f = cJSON_CreateObject();
    const cJSON *k;
    cJSON_ArrayForEach(k, in)
    {
        int ok = 0;
        for (size_t i = 0; accepted[i] && !ok; i++)
            ok = !strcmp(accepted[i], k->string);
        if (!ok) {
            snprintf(msg, mlen, "Invalid filter '%.200s'", k->string);
            goto fail;
        }
        cJSON *arr = cJSON_GetObjectItemCaseSensitive(f, k->string);
        if (!arr)
            arr = cJSON_AddArrayToObject(f, k->string);
        if (!cJSON_IsArray(k) && !cJSON_IsObject(k)) {
            snprintf(msg, mlen, "invalid filters: the value of '%.200s' is not a list", k->string);
            goto fail;
        }
        const cJSON *e;
        cJSON_ArrayForEach(e, k)
        {
            /* {"v": true} names v by its key; ["v"] by its value */
            const char *v = cJSON_IsObject(k) ? e->string : cJSON_GetStringValue(e);
            if (!v) {
                snprintf(msg, mlen, "invalid filters: a value of '%.200s' is not a string",
                         k->string);
                goto fail;
            }
            if (add_value(arr, v, msg, mlen) < 0)
                goto fail;
        }
    }
    cJSON_Delete(in);
    *out = f;
    return 0;
fail:
    cJSON_Delete(in);
    cJSON_Delete(f);
    return -1;
}

const cJSON *sv_filter(const cJSON *f, const char *key)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(f, key);
    return cJSON_GetArraySize(a) > 0 ? a : NULL;
}

int sv_filter_has_value(const cJSON *f, const char *key, const char *v)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, sv_filter(f, key))
    {
        if (!strcmp(e->valuestring, v))
            return 1;
    }
    return 0;
}

int sv_filter_any(const cJSON *f, const char *key, int (*match)(const void *, const char *),
                  const void *obj)
{
    const cJSON *a = sv_filter(f, key), *e;
    if (!a)
        return 1;
    cJSON_ArrayForEach(e, a)
    {
        if (match(obj, e->valuestring))
            return 1;
    }
    return 0;
}

/* dockerd's MatchKVList: every "k" or "k=v" given must hold. */
int sv_filter_labels(const cJSON *f, const char *key, const cJSON *labels)
{
    const cJSON *a = sv_filter(f, key), *e;
    if (!a)
        return 1;
    cJSON_ArrayForEach(e, a)
    {
        const char *want = e->valuestring, *eq = strchr(want, '=');
        char k[1024];
        snprintf(k, sizeof k, "%.*s", eq ? (int)(eq - want) : (int)strlen(want), want);
        const cJSON *have = cJSON_GetObjectItemCaseSensitive(labels, k);
        if (!cJSON_IsString(have) || (eq && strcmp(have->valuestring, eq + 1)))
            return 0;
    }
    return 1;
}

/* dockerd's Match: the value itself, or a regular expression found in s (Go's
 * RE2 and POSIX ERE agree on what names use; one that does not compile
 * matches nothing, as there). */
int sv_filter_regex(const char *pattern, const char *s)
{
    if (!strcmp(pattern, s))
        return 1;
    regex_t re;
    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
        return 0;
    int hit = regexec(&re, s, 0, NULL, 0) == 0;
    regfree(&re);
    return hit;
}

/* Go's path.Match: '*' and '?' do not cross a '/'. */
int sv_filter_glob(const char *pattern, const char *s)
{
    return fnmatch(pattern, s, FNM_PATHNAME) == 0;
}

int sv_filter_bool(const cJSON *f, const char *key, int *value, char *msg, size_t mlen)
{
    const cJSON *a = sv_filter(f, key);
    if (!a)
        return 0;
    if (sv_filter_has_value(f, key, "true"))
        *value = 1;
    else if (sv_filter_has_value(f, key, "false"))
        *value = 0;
    else {
        /* dockerd prints the values as a Go slice: [a b] */
        size_t l = (size_t)snprintf(msg, mlen, "Invalid filter '%s=[", key);
        const cJSON *e;
        cJSON_ArrayForEach(e, a)
        {
            if (l < mlen)
                l += (size_t)snprintf(msg + l, mlen - l, "%s%.100s", e == a->child ? "" : " ",
                                      e->valuestring);
        }
        if (l < mlen)
            snprintf(msg + l, mlen - l, "]'");
        return -1;
    }
    return 1;
}

int sv_filters_dangling(const char *text, const char *const *accepted, cJSON **out, int *dangling,
                        char *msg, size_t mlen)
{
    *dangling = 0;
    if (sv_filters_parse(text, accepted, out, msg, mlen) < 0)
        return -1;
    int r = sv_filter_bool(*out, "dangling", dangling, msg, mlen);
    if (r < 0) {
        cJSON_Delete(*out);
        *out = NULL;
    }
    return r;
}
