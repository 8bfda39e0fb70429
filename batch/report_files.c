/* report_files.c - an episode's output files for the report (rp_files in
 * report.h): listed without following links, typed by their extension and,
 * for text, by their content, which is embedded up to a budget. The page
 * builds every URL from "path" itself (each segment URL-encoded). */
#include "report.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEPTH_MAX 16

static const char *const IMAGE[] = {"png", "jpg", "jpeg", "gif",  "webp",
                                    "svg", "bmp", "ico",  "avif", NULL};
static const char *const AUDIO[] = {"wav", "mp3", "ogg",  "oga",  "flac",
                                    "m4a", "aac", "opus", "weba", NULL};
static const char *const VIDEO[] = {"mp4", "webm", "ogv", "mov", "m4v", NULL};
static const char *const HTML[] = {"html", "htm", "xhtml", NULL};
/* known binary formats that are never shown as text, whatever their bytes */
static const char *const BINARY[] = {"pdf", "zip",     "gz",     "tgz",  "xz",   "zst",
                                     "bz2", "tar",     "7z",     "so",   "o",    "a",
                                     "bin", "exe",     "pyc",    "npy",  "npz",  "pt",
                                     "pkl", "parquet", "sqlite", "db",   "woff", "woff2",
                                     "ttf", "otf",     "mid",    "midi", NULL};

static int in(const char *ext, const char *const *list)
{
    for (; *list; list++)
        if (!strcasecmp(ext, *list))
            return 1;
    return 0;
}

static const char *kind_of(const char *name)
{
    const char *dot = strrchr(name, '.');
    const char *ext = dot && dot != name ? dot + 1 : "";
    if (in(ext, IMAGE))
        return "image";
    if (in(ext, AUDIO))
        return "audio";
    if (in(ext, VIDEO))
        return "video";
    if (in(ext, HTML))
        return "html";
    if (in(ext, BINARY))
        return "other";
    return NULL; /* text when its content is */
}

/* UTF-8 without NUL bytes; a sequence cut by the end of a prefix (cut) is
 * allowed and dropped from *n. */
static int is_text(const char *s, size_t *n, int cut)
{
    size_t i = 0, len = *n;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80             ? 1
                   : (c & 0xE0) == 0xC0 ? 2
                   : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4
                                        : 0;
        if (!c || !k || (k == 2 && c < 0xC2) || (k == 4 && c > 0xF4))
            return 0;
        if (i + k > len) {
            if (!cut)
                return 0;
            *n = i;
            return 1;
        }
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80)
                return 0;
        i += k;
    }
    return 1;
}

/* Adds kind and text (the file's content, up to the budget) to e; a file
 * that is not text is kind "other" unless it has a kind already (html). */
static void add_text(cJSON *e, int dfd, const char *name, off_t size, size_t *budget,
                     const char *kind)
{
    size_t want = (size_t)size < RP_TEXT_FILE_MAX ? (size_t)size : RP_TEXT_FILE_MAX;
    if (want > *budget)
        want = *budget;
    if (!want && size) { /* the episode's budget is spent: a link only */
        cJSON_AddStringToObject(e, "kind", kind ? kind : "other");
        cJSON_AddBoolToObject(e, "unread", 1);
        return;
    }
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    char *buf = fd < 0 ? NULL : malloc(want + 1);
    size_t got = 0;
    while (buf && got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (fd >= 0)
        close(fd);
    int cut = got < (size_t)size;
    if (!buf || !is_text(buf, &got, cut)) { /* an HTML page stays one, without its source */
        cJSON_AddStringToObject(e, "kind", kind ? kind : "other");
        free(buf);
        return;
    }
    buf[got] = 0;
    cJSON_AddStringToObject(e, "kind", kind ? kind : "text");
    if (cJSON_AddStringToObject(e, "text", buf))
        *budget -= got;
    if (cut)
        cJSON_AddBoolToObject(e, "cut", 1);
    free(buf);
}

typedef struct walk {
    cJSON *list;
    size_t *budget;
    size_t count;
    int truncated;
} walk;

static void add_entry(walk *w, int dfd, const char *rel, const char *name, const struct stat *st)
{
    cJSON *e = cJSON_CreateObject();
    if (!e)
        return;
    cJSON_AddStringToObject(e, "path", rel);
    cJSON_AddNumberToObject(e, "size", (double)st->st_size);
    const char *kind = kind_of(name);
    if (S_ISLNK(st->st_mode))
        cJSON_AddStringToObject(e, "kind", "link");
    else if (!S_ISREG(st->st_mode))
        cJSON_AddStringToObject(e, "kind", "other");
    else if (!kind || !strcmp(kind, "html"))
        add_text(e, dfd, name, st->st_size, w->budget, kind);
    else
        cJSON_AddStringToObject(e, "kind", kind);
    if (!cJSON_AddItemToArray(w->list, e))
        cJSON_Delete(e);
    w->count++;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void walk_dir(walk *w, int dfd, const char *prefix, int depth)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (LIS_GROW(names, cap, n + 1) < 0)
            break;
        if (!(names[n] = agent_strdup(de->d_name)))
            break;
        n++;
    }
    if (n)
        qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        char rel[4096];
        int len = snprintf(rel, sizeof rel, "%s%s%s", prefix, *prefix ? "/" : "", names[i]);
        if (w->count >= RP_FILES_MAX || len >= (int)sizeof rel) {
            w->truncated = 1;
            continue;
        }
        if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            int sub = depth < DEPTH_MAX ? openat(dirfd(d), names[i],
                                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                                        : -1;
            if (sub >= 0)
                walk_dir(w, sub, rel, depth + 1);
            else
                w->truncated = 1;
        } else {
            add_entry(w, dirfd(d), rel, names[i], &st);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
}

cJSON *rp_files(int dfd, size_t *budget)
{
    walk w = {.list = cJSON_CreateArray(), .budget = budget};
    if (!w.list) {
        close(dfd);
        return NULL;
    }
    walk_dir(&w, dfd, "", 0);
    if (w.truncated) { /* said on the page: more files than listed */
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", "");
        cJSON_AddStringToObject(e, "kind", "more");
        if (!cJSON_AddItemToArray(w.list, e))
            cJSON_Delete(e);
    }
    return w.list;
}

char *rp_json_script(const cJSON *j)
{
    char *raw = lis_json_print(j, 0);
    if (!raw)
        return NULL;
    strbuf b = {0};
    for (const char *p = raw; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '<' || c == '>' || c == '&')
            strbuf_printf(&b, "\\u%04x", c);
        else if (c == 0xE2 && (unsigned char)p[1] == 0x80 &&
                 ((unsigned char)p[2] == 0xA8 || (unsigned char)p[2] == 0xA9)) {
            strbuf_printf(&b, "\\u%04x", (unsigned char)p[2] == 0xA8 ? 0x2028 : 0x2029);
            p += 2;
        } else
            strbuf_putc(&b, (char)c);
    }
    free(raw);
    return strbuf_take(&b);
}
