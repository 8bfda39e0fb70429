/* archive.c - HEAD/GET/PUT /containers/{id}/archive: tar in and out with
 * libarchive, through a private host scratch directory and the runtime's
 * confined copies (lis_copy_in / lis_copy_out resolve every path inside the
 * sandbox root and never follow a symlink out of it). The tar is unpacked
 * on the host first with libarchive's secure flags (no "..", no writing
 * through symlinks), so a hostile archive can touch only the scratch
 * directory; only then is the tree copied in. Ownership in the tar is not
 * kept (rootless: files belong to the sandbox's root; docs/serve.md). */
#include "serve.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <time.h>

typedef struct arc_job {
    sv_req *q;
    lis_sandbox *sb;
    char cname[128];
    char path[4096];
    int head;
    /* results */
    unsigned status;
    char msg[1024];
    char stat_hdr[1024];
    char *tar;
    size_t tar_len, tar_cap;
    int *busy;
} arc_job;

static int scratch(sv_server *s, char *out, size_t len)
{
    snprintf(out, len, "%s/arc-XXXXXX", s->tmp_dir);
    return mkdtemp(out) ? 0 : -1;
}

static void rmtree(const char *p)
{
    lis_error e = {0};
    lis_host_rmtree(p, &e);
}

/* Go os.FileMode from st_mode */
static unsigned long go_mode(mode_t m)
{
    unsigned long g = m & 0777;
    if (S_ISDIR(m))
        g |= 1ul << 31;
    if (S_ISLNK(m))
        g |= 1ul << 27;
    if (S_ISBLK(m))
        g |= 1ul << 26;
    if (S_ISFIFO(m))
        g |= 1ul << 25;
    if (S_ISSOCK(m))
        g |= 1ul << 24;
    if (m & S_ISUID)
        g |= 1ul << 23;
    if (m & S_ISGID)
        g |= 1ul << 22;
    if (S_ISCHR(m))
        g |= (1ul << 21) | (1ul << 26);
    if (m & S_ISVTX)
        g |= 1ul << 20;
    return g;
}

void sv_base64(const unsigned char *in, size_t n, char *out, size_t len)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < len; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = 0;
}

/* The entry name a path exports as: its basename, "." for …/. */
static void export_name(const char *path, char *out, size_t len)
{
    size_t n = strlen(path);
    if (n >= 2 && !strcmp(path + n - 2, "/.")) {
        snprintf(out, len, ".");
        return;
    }
    char b[4096];
    snprintf(b, sizeof b, "%s", path);
    while ((n = strlen(b)) > 1 && b[n - 1] == '/')
        b[n - 1] = 0;
    const char *s = strrchr(b, '/');
    snprintf(out, len, "%s", s && s[1] ? s + 1 : (s ? "/" : b));
}

static void make_stat(arc_job *j, const char *name, const struct stat *st, const char *link)
{
    char ts[64];
    sv_rfc3339((double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9, ts, sizeof ts);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddNumberToObject(o, "size", (double)st->st_size);
    cJSON_AddNumberToObject(o, "mode", (double)go_mode(st->st_mode));
    cJSON_AddStringToObject(o, "mtime", ts);
    cJSON_AddStringToObject(o, "linkTarget", link ? link : "");
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    sv_base64((const unsigned char *)txt, strlen(txt), j->stat_hdr, sizeof j->stat_hdr);
    free(txt);
}

static la_ssize_t mem_write(struct archive *a, void *arg, const void *buf, size_t n)
{
    arc_job *j = arg;
    if (LIS_GROW(j->tar, j->tar_cap, j->tar_len + n) < 0) {
        archive_set_error(a, ENOMEM, "out of memory");
        return -1;
    }
    memcpy(j->tar + j->tar_len, buf, n);
    j->tar_len += n;
    return (la_ssize_t)n;
}

/* Adds host path `full` as archive name `name`, recursively. */
static int tar_add(struct archive *a, const char *full, const char *name)
{
    struct stat st;
    if (lstat(full, &st) < 0)
        return -1;
    struct archive_entry *e = archive_entry_new();
    archive_entry_copy_stat(e, &st);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    char nm[PATH_MAX + 2];
    snprintf(nm, sizeof nm, "%s%s", name, S_ISDIR(st.st_mode) && strcmp(name, ".") ? "/" : "");
    archive_entry_set_pathname(e, S_ISDIR(st.st_mode) && !strcmp(name, ".") ? "./" : nm);
    if (S_ISLNK(st.st_mode)) {
        char t[PATH_MAX];
        ssize_t n = readlink(full, t, sizeof t - 1);
        t[n > 0 ? n : 0] = 0;
        archive_entry_set_symlink(e, t);
        archive_entry_set_size(e, 0);
    } else if (!S_ISREG(st.st_mode)) {
        archive_entry_set_size(e, 0);
    }
    int rc = archive_write_header(a, e) == ARCHIVE_OK ? 0 : -1;
    archive_entry_free(e);
    if (rc < 0)
        return -1;
    if (S_ISREG(st.st_mode)) {
        FILE *f = fopen(full, "rbe");
        if (!f)
            return -1;
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            if (archive_write_data(a, buf, n) < 0) {
                fclose(f);
                return -1;
            }
        fclose(f);
    } else if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(full);
        if (!d)
            return -1;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            char cf[PATH_MAX], cn[PATH_MAX];
            snprintf(cf, sizeof cf, "%s/%s", full, de->d_name);
            snprintf(cn, sizeof cn, "%s/%s", strcmp(name, ".") ? name : ".", de->d_name);
            if (tar_add(a, cf, !strcmp(name, ".") ? cn + 2 : cn) < 0) {
                closedir(d);
                return -1;
            }
        }
        closedir(d);
    }
    return 0;
}

static void get_work(void *arg)
{
    arc_job *j = arg;
    char kind;
    lis_error err = {0};
    char tmp[4200], dst[4300], name[1024];
    j->status = 404;
    snprintf(j->msg, sizeof j->msg, "Could not find the file %s in container %s", j->path,
             j->cname);
    if (lis_file_stat(j->sb, j->path, &kind, NULL, &err) < 0)
        return;
    export_name(j->path, name, sizeof name);
    if (j->head && kind == 'd') { /* cp asks only IsDir(): no copy of the tree for that */
        struct stat ds = {.st_mode = S_IFDIR | 0755, .st_size = 4096};
        clock_gettime(CLOCK_REALTIME, &ds.st_mtim);
        make_stat(j, name, &ds, NULL);
        j->status = 200;
        return;
    }
    if (scratch(j->q->s, tmp, sizeof tmp) < 0) {
        j->status = 500;
        snprintf(j->msg, sizeof j->msg, "scratch directory: %s", strerror(errno));
        return;
    }
    snprintf(dst, sizeof dst, "%s/x", tmp);
    if (lis_copy_out(j->sb, j->path, dst, &err) < 0) {
        j->status = 500;
        snprintf(j->msg, sizeof j->msg, "%s", err.msg);
        rmtree(tmp);
        return;
    }
    struct stat st;
    char link[PATH_MAX] = "";
    lstat(dst, &st);
    if (S_ISLNK(st.st_mode)) {
        ssize_t n = readlink(dst, link, sizeof link - 1);
        link[n > 0 ? n : 0] = 0;
        if (link[0] != '/') { /* absolute, as dockerd reports it */
            char abs[PATH_MAX * 2], parent[4096];
            snprintf(parent, sizeof parent, "%s", j->path);
            char *s = strrchr(parent, '/');
            if (s)
                *(s == parent ? s + 1 : s) = 0;
            snprintf(abs, sizeof abs, "%s%s%s", parent,
                     parent[strlen(parent) - 1] == '/' ? "" : "/", link);
            snprintf(link, sizeof link, "%s", abs);
        }
    }
    make_stat(j, name, &st, link[0] ? link : NULL);
    j->status = 200;
    if (!j->head) {
        struct archive *a = archive_write_new();
        archive_write_set_format_pax_restricted(a);
        archive_write_set_bytes_in_last_block(a, 1);
        if (archive_write_open(a, j, NULL, mem_write, NULL) != ARCHIVE_OK ||
            tar_add(a, dst, name) < 0 || archive_write_close(a) != ARCHIVE_OK) {
            j->status = 500;
            snprintf(j->msg, sizeof j->msg, "writing the archive: %s", archive_error_string(a));
        }
        archive_write_free(a);
    }
    rmtree(tmp);
}

/* Rejects "..", strips a leading "/" (dockerd puts /abs.txt at P/abs.txt). */
static int clean_name(const char *in, char *out, size_t len)
{
    while (*in == '/')
        in++;
    snprintf(out, len, "%s", in);
    for (char *p = out; *p;) {
        char *e = strchrnul(p, '/');
        if (e - p == 2 && p[0] == '.' && p[1] == '.')
            return -1;
        p = *e ? e + 1 : e;
    }
    return 0;
}

static void put_work(void *arg)
{
    arc_job *j = arg;
    char kind;
    lis_error err = {0};
    char tmp[4200], root[4300];
    j->status = 404;
    snprintf(j->msg, sizeof j->msg, "Could not find the file %s in container %s", j->path,
             j->cname);
    char dirp[4200];
    snprintf(dirp, sizeof dirp, "%s%s", j->path, j->path[strlen(j->path) - 1] == '/' ? "." : "/.");
    if (lis_file_stat(j->sb, j->path, &kind, NULL, &err) < 0)
        return;
    if (kind == 'l' && lis_file_stat(j->sb, dirp, &kind, NULL, &err) < 0)
        return;
    if (kind != 'd') {
        j->status = 500;
        snprintf(j->msg, sizeof j->msg, "extraction point is not a directory");
        return;
    }
    j->status = 500;
    if (scratch(j->q->s, tmp, sizeof tmp) < 0) {
        snprintf(j->msg, sizeof j->msg, "scratch directory: %s", strerror(errno));
        return;
    }
    snprintf(root, sizeof root, "%s/x", tmp);
    mkdir(root, 0700);
    struct archive *a = archive_read_new();
    archive_read_support_format_tar(a);
    archive_read_support_format_gnutar(a);
    archive_read_support_filter_all(a);
    struct archive *w = archive_write_disk_new();
    archive_write_disk_set_options(w, ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
                                          ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                          ARCHIVE_EXTRACT_SECURE_NODOTDOT);
    int ok = 1;
    if (archive_read_open_memory(a, j->q->body ? j->q->body : "", j->q->len) != ARCHIVE_OK) {
        snprintf(j->msg, sizeof j->msg, "Error processing tar file: %s", archive_error_string(a));
        ok = 0;
    }
    struct archive_entry *e;
    int r;
    while (ok && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        char nm[PATH_MAX], full[PATH_MAX + 4400];
        if (clean_name(archive_entry_pathname(e), nm, sizeof nm) < 0) {
            snprintf(j->msg, sizeof j->msg,
                     "Error processing tar file: \"%s\" is outside of \"%s\"",
                     archive_entry_pathname(e), j->path);
            ok = 0;
            break;
        }
        if (!nm[0] || !strcmp(nm, ".") || !strcmp(nm, "./"))
            continue;
        mode_t type = archive_entry_filetype(e);
        if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
            continue; /* devices, fifos: not made rootless */
        snprintf(full, sizeof full, "%s/%s", root, nm);
        archive_entry_set_pathname(e, full);
        const char *hl = archive_entry_hardlink(e);
        if (hl) {
            char hn[PATH_MAX], hf[PATH_MAX + 4400];
            if (clean_name(hl, hn, sizeof hn) < 0) {
                ok = 0;
                snprintf(j->msg, sizeof j->msg, "Error processing tar file: bad hard link %s", hl);
                break;
            }
            snprintf(hf, sizeof hf, "%s/%s", root, hn);
            archive_entry_set_hardlink(e, hf);
        }
        if (archive_write_header(w, e) != ARCHIVE_OK) {
            snprintf(j->msg, sizeof j->msg, "Error processing tar file: %s: %s", nm,
                     archive_error_string(w));
            ok = 0;
            break;
        }
        const void *buf;
        size_t sz;
        la_int64_t off;
        while ((r = archive_read_data_block(a, &buf, &sz, &off)) == ARCHIVE_OK)
            if (archive_write_data_block(w, buf, sz, off) != ARCHIVE_OK)
                break;
        archive_write_finish_entry(w);
    }
    if (ok && r != ARCHIVE_EOF) {
        snprintf(j->msg, sizeof j->msg, "Error processing tar file: %s",
                 archive_error_string(a) ? archive_error_string(a) : "unexpected EOF");
        ok = 0;
    }
    archive_read_free(a);
    archive_write_close(w);
    archive_write_free(w);
    DIR *d = ok ? opendir(root) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char src[PATH_MAX + 4400];
        snprintf(src, sizeof src, "%s/%s", root, de->d_name);
        if (lis_copy_in(j->sb, src, j->path, &err) < 0) {
            snprintf(j->msg, sizeof j->msg, "%s", err.msg);
            ok = 0;
            break;
        }
    }
    if (d)
        closedir(d);
    if (ok)
        j->status = 200;
    rmtree(tmp);
}

static void arc_done(void *arg, int status)
{
    arc_job *j = arg;
    (*j->busy)--;
    struct MHD_Response *r;
    if (j->status != 200) {
        if (j->head) {
            r = sv_resp_empty();
            sv_req_finish(j->q, j->status, r);
        } else {
            sv_req_finish_error(j->q, j->status, "%s", j->msg);
        }
    } else if (j->head || j->tar || !j->stat_hdr[0]) {
        r = j->tar ? MHD_create_response_from_buffer(j->tar_len, j->tar, MHD_RESPMEM_MUST_FREE)
                   : sv_resp_empty();
        if (j->tar) {
            sv_resp_headers(r);
            MHD_add_response_header(r, "Content-Type", "application/x-tar");
            j->tar = NULL;
        }
        if (j->stat_hdr[0])
            MHD_add_response_header(r, "X-Docker-Container-Path-Stat", j->stat_hdr);
        sv_req_finish(j->q, 200, r);
    } else {
        sv_req_finish(j->q, 200, sv_resp_empty());
    }
    free(j->tar);
    free(j);
}

static enum MHD_Result start(sv_req *q, lis_sandbox *sb, const char *cname, int head,
                             void (*work)(void *), int *busy)
{
    const char *p = sv_arg(q, "path");
    if (!p || !*p)
        return sv_reply_error(q, 400, "bad parameter: path cannot be empty");
    if (p[0] != '/')
        return sv_reply_error(q, 400, "bad parameter: path must be absolute (got %s)", p);
    arc_job *j = calloc(1, sizeof *j);
    if (!j)
        return sv_reply_error(q, 500, "out of memory");
    j->q = q;
    j->sb = sb;
    j->head = head;
    j->busy = busy;
    snprintf(j->cname, sizeof j->cname, "%s", cname);
    snprintf(j->path, sizeof j->path, "%s", p);
    (*busy)++;
    sv_req_suspend(q);
    if (sv_job(q->s->loop, work, arc_done, j) < 0) {
        (*busy)--;
        free(j);
        sv_req_finish_error(q, 500, "out of memory");
    }
    return MHD_YES;
}

enum MHD_Result sv_archive_head_get(sv_req *q, lis_sandbox *sb, const char *cname, int head,
                                    int *busy)
{
    return start(q, sb, cname, head, get_work, busy);
}

enum MHD_Result sv_archive_put(sv_req *q, lis_sandbox *sb, const char *cname, int *busy)
{
    return start(q, sb, cname, 0, put_work, busy);
}
