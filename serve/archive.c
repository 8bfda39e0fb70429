/* archive.c - HEAD/GET/PUT /containers/{id}/archive: tar out of and into a sandbox with
 * libarchive, straight through the runtime's confined entry API (no host scratch copy).
 *
 * GET streams: a worker walks the tree (lis_walk: paths resolved inside the sandbox's
 * root, no link followed) and writes the tar into a pipe that libmicrohttpd's content
 * reader drains on the loop, so memory stays at the pipe's size whatever the tree; a
 * sparse file goes out as a PAX sparse entry (GNU.sparse 1.0), holes and all in a few KB;
 * the data handed out stops at the sandbox's writable budget, the files past it are
 * left out and named in the server's log. PUT is extracted in two passes over the body:
 * the first reads only the headers and refuses with 413, before anything is written,
 * an archive whose files' apparent sizes would pass what the writable budget has left
 * (a compressed one stops there while decompressing: a 3 MB gzip bomb costs nothing);
 * the second writes each entry through lis_put (each file whole or not at all; on a
 * failure what it made is removed again). Hard links are made, to files of the same
 * archive only. With a full id map both run as root of the mapped namespace
 * (lis_sandbox_as_root), so entries keep their owners both ways, as dockerd's. */
#include "serve.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <time.h>

/* A PUT's headers beyond its files' data: one entry's header and padding at most. */
#define ARC_ENTRY_OVERHEAD 1536
#define ARC_PIPE_SIZE (1 << 20)

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
    int *busy;
} arc_job;

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
    char *txt = lis_json_print(o, 0);
    cJSON_Delete(o);
    sv_base64((const unsigned char *)txt, strlen(txt), j->stat_hdr, sizeof j->stat_hdr);
    free(txt);
}

/* HEAD and the first half of GET: the path's stat, X-Docker-Container-Path-Stat. */
static void stat_work(void *arg)
{
    arc_job *j = arg;
    lis_error err = {0};
    char name[1024], link[PATH_MAX];
    struct stat st;
    j->status = 404;
    snprintf(j->msg, sizeof j->msg, "Could not find the file %s in container %s", j->path,
             j->cname);
    if (lis_file_lstat(j->sb, j->path, &st, link, sizeof link, &err) < 0)
        return;
    export_name(j->path, name, sizeof name);
    if (S_ISLNK(st.st_mode) && link[0] != '/') { /* absolute, as dockerd reports it */
        char abs[PATH_MAX * 2], parent[4096];
        snprintf(parent, sizeof parent, "%s", j->path);
        char *s = strrchr(parent, '/');
        if (s)
            *(s == parent ? s + 1 : s) = 0;
        snprintf(abs, sizeof abs, "%s%s%s", parent, parent[strlen(parent) - 1] == '/' ? "" : "/",
                 link);
        snprintf(link, sizeof link, "%s", abs);
    }
    make_stat(j, name, &st, S_ISLNK(st.st_mode) ? link : NULL);
    j->status = 200;
}

/* ---- GET: the tar streamed through a pipe ------------------------------------------------ */

typedef struct arc_get {
    sv_server *s;
    sv_req *q; /* NULL once the request is over */
    lis_sandbox *sb;
    int *busy;
    char cname[128], path[4096], top[1024];
    int rfd, wfd;
    sv_watch w;
    int done; /* the producer ended: ok 1 after a whole tar, else msg */
    int ok;
    struct MHD_Response *resp; /* until it is sent (get_reply) */
    sv_timer reply_timer;
    char msg[512];
    int refs; /* the response, the producer */
} arc_get;

/* What the producer (maybe in the mapped child) hands back. */
typedef struct get_result {
    int ok;
    char msg[512];
    unsigned long long bytes, skipped, skipped_bytes;
} get_result;

static void get_unref(arc_get *g)
{
    if (--g->refs)
        return;
    sv_loop_unwatch(g->s->loop, &g->w);
    sv_timer_cancel(g->s->loop, &g->reply_timer);
    if (g->rfd >= 0)
        close(g->rfd);
    sv_loop_defer(g->s->loop, free, g); /* an event of this batch may still name its watch */
}

static void skipped_log(void *arg, const char *path, const char *why)
{
    arc_get *g = arg;
    fprintf(stderr, "lis serve: GET archive of %s in %s: %s%s%s not sent: %s\n", g->path, g->cname,
            g->top, strcmp(path, ".") ? "/" : "", strcmp(path, ".") ? path : "", why);
}

typedef struct producer {
    arc_get *g;
    struct archive *a;
    char name[PATH_MAX + 1100];
    uid_t me;
} producer;

/* The uid and gid an entry gets: as the walker sees them, which the mapped
 * child's are (the sandbox's own); as the owner, itself is the sandbox's root
 * and another id nobody there. */
static unsigned long long entry_id(const producer *p, unsigned id)
{
    if (p->me == 0)
        return id;
    return id == p->me ? 0 : 65534;
}

/* Writes e's data as the tar entry's contents: the data extents read, the holes
 * between them as zeros libarchive does not store (the entry is sparse). */
static int write_data(producer *p, const lis_walk_entry *e, lis_error *err)
{
    static const char zeros[1 << 20];
    char buf[65536];
    uint64_t at = 0, size = (uint64_t)e->st.st_size;
    for (size_t i = 0; i <= e->next; i++) {
        uint64_t start = i < e->next ? e->ext[i].off : size;
        uint64_t end = i < e->next ? e->ext[i].off + e->ext[i].len : size;
        for (; at < start;) { /* a hole */
            size_t n = start - at < sizeof zeros ? (size_t)(start - at) : sizeof zeros;
            if (archive_write_data(p->a, zeros, n) < 0)
                return lis_fail(err, EIO, "%s", archive_error_string(p->a));
            at += n;
        }
        while (at < end) {
            size_t want = end - at < sizeof buf ? (size_t)(end - at) : sizeof buf;
            ssize_t n = pread(e->fd, buf, want, (off_t)at);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) { /* it shrank meanwhile: zeros, the size is in the header */
                memset(buf, 0, want);
                n = (ssize_t)want;
            }
            if (archive_write_data(p->a, buf, (size_t)n) < 0)
                return lis_fail(err, EIO, "%s", archive_error_string(p->a));
            at += (uint64_t)n;
        }
    }
    return 0;
}

static int tar_entry(void *arg, const lis_walk_entry *e, lis_error *err)
{
    producer *p = arg;
    const char *top = p->g->top;
    int dot = !strcmp(top, ".");
    if (!e->path[0])
        snprintf(p->name, sizeof p->name, "%s%s", dot ? "." : top,
                 S_ISDIR(e->st.st_mode) ? "/" : "");
    else
        snprintf(p->name, sizeof p->name, "%s%s%s%s", dot ? "" : top, dot ? "" : "/", e->path,
                 S_ISDIR(e->st.st_mode) ? "/" : "");
    struct archive_entry *ae = archive_entry_new();
    if (!ae)
        return lis_oom(err);
    archive_entry_copy_stat(ae, &e->st);
    archive_entry_set_uid(ae, entry_id(p, e->st.st_uid));
    archive_entry_set_gid(ae, entry_id(p, e->st.st_gid));
    archive_entry_set_pathname(ae, p->name);
    archive_entry_set_nlink(ae, 1); /* each file whole: no hard links on the way out */
    if (S_ISLNK(e->st.st_mode)) {
        archive_entry_set_symlink(ae, e->link);
        archive_entry_set_size(ae, 0);
    } else if (!S_ISREG(e->st.st_mode)) {
        archive_entry_set_size(ae, 0);
    } else if (e->data < (uint64_t)e->st.st_size) { /* holes: a sparse entry */
        for (size_t i = 0; i < e->next; i++)
            archive_entry_sparse_add_entry(ae, (la_int64_t)e->ext[i].off,
                                           (la_int64_t)e->ext[i].len);
        if (!e->next) /* nothing but a hole: the map still says so */
            archive_entry_sparse_add_entry(ae, e->st.st_size, 0);
    }
    int rc = archive_write_header(p->a, ae) == ARCHIVE_OK
                 ? 0
                 : lis_fail(err, EIO, "%s: %s", p->name, archive_error_string(p->a));
    archive_entry_free(ae);
    if (rc == 0 && S_ISREG(e->st.st_mode))
        rc = write_data(p, e, err);
    return rc;
}

/* A client that reads nothing for GET_STALL_MS ends its GET: the producer holds the
 * sandbox (it cannot be removed meanwhile), so it must not wait on a reader forever. */
#define GET_STALL_MS 60000

static la_ssize_t pipe_write(struct archive *a, void *arg, const void *buf, size_t n)
{
    int fd = *(int *)arg;
    for (;;) {
        ssize_t w = write(fd, buf, n);
        if (w >= 0)
            return w;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN) {
            archive_set_error(a, errno, "%s", strerror(errno));
            return -1;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int r = poll(&p, 1, GET_STALL_MS);
        if (r == 0) {
            archive_set_error(a, ETIMEDOUT, "the client read nothing for %d s",
                              GET_STALL_MS / 1000);
            return -1;
        }
    }
}

static int produce(void *arg, void *result, lis_error *err)
{
    arc_get *g = arg;
    get_result *r = result;
    producer p = {.g = g, .me = getuid()};
    p.a = archive_write_new();
    if (!p.a)
        return lis_oom(err);
    archive_write_set_format_pax_restricted(p.a);
    archive_write_set_bytes_in_last_block(p.a, 1);
    lis_copy_opts o = {.skipped = skipped_log, .arg = g};
    fcntl(g->wfd, F_SETFL, O_NONBLOCK); /* pipe_write waits, GET_STALL_MS at most */
    archive_write_set_bytes_per_block(p.a, 65536);
    int rc = archive_write_open(p.a, &g->wfd, NULL, pipe_write, NULL) == ARCHIVE_OK
                 ? lis_walk(g->sb, g->path, &o, tar_entry, &p, err)
                 : lis_fail(err, EIO, "%s", archive_error_string(p.a));
    if (rc == 0 && archive_write_close(p.a) != ARCHIVE_OK)
        rc = lis_fail(err, EIO, "%s", archive_error_string(p.a));
    archive_write_free(p.a);
    r->bytes = o.bytes;
    r->skipped = o.skipped_count;
    r->skipped_bytes = o.skipped_bytes;
    r->ok = rc == 0;
    return rc;
}

static void produce_work(void *arg)
{
    arc_get *g = arg;
    get_result r = {0};
    lis_error err = {0};
    /* in the mapped child only the pipe's write end stays: the client's going
     * (its read end closed here) must reach the writer as EPIPE */
    int keep[] = {g->wfd};
    if (lis_sandbox_as_root(g->sb, produce, g, &r, sizeof r, keep, 1, &err) < 0)
        r.ok = 0;
    close(g->wfd); /* the reader sees the end */
    g->wfd = -1;
    g->ok = r.ok;
    if (!r.ok)
        snprintf(g->msg, sizeof g->msg, "%s", err.msg);
    if (r.skipped)
        fprintf(stderr,
                "lis serve: GET archive of %s in %s: %llu files (%llu bytes of data) left out: "
                "a copy out stops at the sandbox's writable budget\n",
                g->path, g->cname, r.skipped, r.skipped_bytes);
}

static void get_reply(arc_get *g);

static void produce_done(void *arg, int status)
{
    arc_get *g = arg;
    (*g->busy)--;
    g->done = 1;
    if (!g->ok)
        fprintf(stderr, "lis serve: GET archive of %s in %s stopped: %s\n", g->path, g->cname,
                g->msg);
    if (g->resp)
        get_reply(g); /* resumes the request */
    else if (g->q)
        sv_req_resume(g->q); /* a reader waiting for this word */
    get_unref(g);
}

/* Watched only while the reader waits (a pipe whose writer went reports EPOLLHUP
 * whatever the events asked), and only once the headers went out. */
static void pipe_ready(void *arg, uint32_t ev)
{
    arc_get *g = arg;
    sv_loop_unwatch(g->s->loop, &g->w);
    if (g->q)
        sv_req_resume(g->q);
}

static ssize_t get_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    arc_get *g = cls;
    ssize_t n = read(g->rfd, buf, max);
    if (n > 0)
        return n;
    if (n < 0 && errno == EINTR)
        return 0;
    if (n < 0 && errno == EAGAIN) { /* nothing yet: wait for the pipe */
        if (g->q &&
            (g->w.added || sv_loop_watch(g->s->loop, &g->w, g->rfd, EPOLLIN, pipe_ready, g) == 0))
            sv_req_suspend(g->q);
        return 0;
    }
    if (!g->done) { /* the end of the pipe before the producer's word: wait for it */
        if (g->q)
            sv_req_suspend(g->q);
        return 0;
    }
    /* a tar cut short must not look whole: the chunked body ends without its end */
    return g->ok ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void get_free(void *cls)
{
    arc_get *g = cls;
    sv_loop_unwatch(g->s->loop, &g->w);
    close(g->rfd); /* a producer still writing gets EPIPE and ends */
    g->rfd = -1;
    get_unref(g);
}

static void get_req_done(sv_req *q)
{
    arc_get *g = q->owner;
    if (g)
        g->q = NULL;
    if (g && g->resp) /* gone before the headers: the response was never handed over */
        get_reply(g);
}

/* The headers go out when the producer is done (a tar that fits in the pipe: the
 * sandbox is free again before the client sees the answer, as it was when GET built
 * the tar first) or after GET_REPLY_WAIT, whichever is first. */
#define GET_REPLY_WAIT 0.05

static void get_reply(arc_get *g)
{
    if (!g->resp)
        return;
    sv_timer_cancel(g->s->loop, &g->reply_timer);
    struct MHD_Response *r = g->resp;
    g->resp = NULL;
    if (g->q)
        sv_req_finish(g->q, 200, r);
    else
        MHD_destroy_response(r);
}

static void reply_due(void *arg) { get_reply(arg); }

/* The stat is known: a worker writes the tar, the headers follow (get_reply). */
static void get_start(arc_job *j)
{
    sv_req *q = j->q;
    arc_get *g = calloc(1, sizeof *g);
    int fds[2] = {-1, -1};
    if (!g || pipe2(fds, O_CLOEXEC) < 0) {
        free(g);
        sv_req_finish_error(q, 500, "streaming the archive: %s", strerror(errno));
        return;
    }
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    fcntl(fds[1], F_SETPIPE_SZ, ARC_PIPE_SIZE); /* fewer wake-ups; the default 64 KiB is fine too */
    *g = (arc_get){.s = q->s,
                   .q = q,
                   .sb = j->sb,
                   .busy = j->busy,
                   .rfd = fds[0],
                   .wfd = fds[1],
                   .refs = 2};
    snprintf(g->cname, sizeof g->cname, "%s", j->cname);
    snprintf(g->path, sizeof g->path, "%s", j->path);
    export_name(j->path, g->top, sizeof g->top);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, get_read, g, get_free);
    sv_resp_headers(r);
    MHD_add_response_header(r, "Content-Type", "application/x-tar");
    MHD_add_response_header(r, "X-Docker-Container-Path-Stat", j->stat_hdr);
    q->owner = g;
    q->on_complete = get_req_done;
    (*g->busy)++; /* the sandbox stays while the producer walks it */
    g->resp = r;
    if (sv_job(q->s->loop, produce_work, produce_done, g) < 0) {
        (*g->busy)--;
        close(g->wfd);
        g->wfd = -1;
        g->done = 1;
        snprintf(g->msg, sizeof g->msg, "out of memory");
        g->refs--;
        get_reply(g);
        return;
    }
    sv_timer_arm(q->s->loop, &g->reply_timer, GET_REPLY_WAIT, reply_due, g);
}

/* ---- PUT: checked, then extracted ----------------------------------------------------------- */

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

static int open_body(struct archive **a, const sv_req *q)
{
    *a = archive_read_new();
    if (!*a)
        return -1;
    archive_read_support_format_tar(*a);
    archive_read_support_format_gnutar(*a);
    archive_read_support_filter_all(*a);
    return archive_read_open_memory(*a, q->body ? q->body : "", q->len) == ARCHIVE_OK ? 0 : -1;
}

/* Names of the regular files so far (the first pass checks hard links against them). */
typedef struct name_set {
    char **v;
    size_t n, cap;
} name_set;

static int name_known(const name_set *s, const char *name)
{
    for (size_t i = s->n; i-- > 0;)
        if (!strcmp(s->v[i], name))
            return 1;
    return 0;
}

static void names_free(name_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

/* The first pass: headers only, every name and link checked, the apparent sizes
 * summed against allowed (stopping as soon as they pass it, before the data of
 * the entry that would). */
static void check_pass(arc_job *j, uint64_t allowed, const char *budget)
{
    struct archive *a;
    name_set names = {0};
    uint64_t sum = 0, entries = 0;
    uint64_t max_entries = allowed == LIS_UNLIMITED ? UINT64_MAX : allowed / 4096;
    if (max_entries < 16384)
        max_entries = 16384; /* as the budget tmpfs's inodes and every copy out */
    j->status = 500;
    if (open_body(&a, j->q) < 0) {
        snprintf(j->msg, sizeof j->msg, "Error processing tar file: %s",
                 a ? archive_error_string(a) : "out of memory");
        archive_read_free(a);
        return;
    }
    struct archive_entry *e;
    int r;
    while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        char nm[PATH_MAX];
        if (++entries > max_entries) {
            j->status = 413;
            snprintf(j->msg, sizeof j->msg,
                     "the archive has more than %llu entries, one per 4 KiB of what the "
                     "container's writable budget has left (%s)",
                     (unsigned long long)max_entries, budget);
            goto out;
        }
        if (clean_name(archive_entry_pathname(e), nm, sizeof nm) < 0) {
            snprintf(j->msg, sizeof j->msg,
                     "Error processing tar file: \"%s\" is outside of \"%s\"",
                     archive_entry_pathname(e), j->path);
            goto out;
        }
        const char *hl = archive_entry_hardlink(e);
        char hn[PATH_MAX];
        if (hl && (clean_name(hl, hn, sizeof hn) < 0 || !name_known(&names, hn))) {
            snprintf(j->msg, sizeof j->msg,
                     "Error processing tar file: hard link \"%s\" to \"%s\", which is not a "
                     "file of this archive",
                     archive_entry_pathname(e), hl);
            goto out;
        }
        if (!hl && archive_entry_filetype(e) == AE_IFREG) {
            uint64_t size = archive_entry_size(e) > 0 ? (uint64_t)archive_entry_size(e) : 0;
            if (size > allowed - sum) {
                j->status = 413;
                snprintf(j->msg, sizeof j->msg,
                         "the archive's files are larger than the %llu bytes the container's "
                         "writable budget has left (%s): %s and the entries before it hold "
                         "%llu bytes",
                         (unsigned long long)allowed, budget, archive_entry_pathname(e),
                         (unsigned long long)(sum + size));
                goto out;
            }
            sum += size;
            if (LIS_GROW(names.v, names.cap, names.n + 1) < 0 || !(names.v[names.n] = strdup(nm))) {
                snprintf(j->msg, sizeof j->msg, "out of memory");
                goto out;
            }
            names.n++;
        }
        /* what libarchive decompressed so far stays near the declared sizes: a
         * bomb of headers (pax records, long names) stops here too */
        if (allowed != LIS_UNLIMITED && (uint64_t)archive_filter_bytes(a, 0) >
                                            allowed + entries * ARC_ENTRY_OVERHEAD + (1u << 20)) {
            j->status = 413;
            snprintf(j->msg, sizeof j->msg,
                     "the archive decompresses to more than the container's writable budget "
                     "has left (%s)",
                     budget);
            goto out;
        }
    }
    if (r != ARCHIVE_EOF) {
        snprintf(j->msg, sizeof j->msg, "Error processing tar file: %s",
                 archive_error_string(a) ? archive_error_string(a) : "unexpected EOF");
        goto out;
    }
    j->status = 0;
out:
    names_free(&names);
    archive_read_free(a);
}

typedef struct put_result {
    unsigned status;
    char msg[1024];
} put_result;

static lis_put_attr attr_of(struct archive_entry *e)
{
    lis_put_attr at = {.mode = archive_entry_perm(e) & 07777, .uid = -1, .gid = -1};
    la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
    if (uid >= 0 && uid <= 65535 && gid >= 0 && gid <= 65535) { /* what a full map holds */
        at.uid = uid;
        at.gid = gid;
    }
    at.mtime.tv_nsec = UTIME_OMIT;
    if (archive_entry_mtime_is_set(e)) {
        at.mtime.tv_sec = archive_entry_mtime(e);
        at.mtime.tv_nsec = archive_entry_mtime_nsec(e);
    }
    return at;
}

/* Copies the entry's data blocks into fd at their offsets (holes stay holes). */
static int put_data(struct archive *a, int fd, uint64_t size, const char *name, lis_error *err)
{
    const void *buf;
    size_t n;
    la_int64_t off;
    int r;
    while ((r = archive_read_data_block(a, &buf, &n, &off)) == ARCHIVE_OK) {
        if (off < 0 || (uint64_t)off > size || n > size - (uint64_t)off)
            return lis_fail(err, EFBIG, "%s: data past its declared size", name);
        for (size_t w = 0; w < n;) {
            ssize_t k = pwrite(fd, (const char *)buf + w, n - w, off + (off_t)w);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                return lis_fail_errno(err, "writing %s", name);
            w += (size_t)k;
        }
    }
    return r == ARCHIVE_EOF ? 0 : lis_fail(err, EIO, "%s: %s", name, archive_error_string(a));
}

/* The second pass, as the sandbox's root (lis_sandbox_as_root). */
static int extract(void *arg, void *result, lis_error *err)
{
    arc_job *j = arg;
    put_result *res = result;
    res->status = 500;
    struct archive *a;
    lis_put *p = lis_put_new(j->sb, j->path, err);
    if (!p)
        return -1;
    if (open_body(&a, j->q) < 0) {
        lis_put_free(p);
        archive_read_free(a);
        return lis_fail(err, EIO, "Error processing tar file: reading it again");
    }
    struct archive_entry *e;
    int r, rc = 0;
    while (rc == 0 && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        char nm[PATH_MAX], hn[PATH_MAX];
        if (clean_name(archive_entry_pathname(e), nm, sizeof nm) < 0) {
            rc = lis_fail(err, EINVAL, "Error processing tar file: %s is outside", nm);
            break;
        }
        if (!nm[0] || !strcmp(nm, ".") || !strcmp(nm, "./"))
            continue;
        lis_put_attr at = attr_of(e);
        const char *hl = archive_entry_hardlink(e);
        mode_t type = archive_entry_filetype(e);
        if (hl) {
            rc = clean_name(hl, hn, sizeof hn) < 0
                     ? lis_fail(err, EINVAL, "Error processing tar file: bad hard link %s", hl)
                     : lis_put_hardlink(p, nm, hn, err);
        } else if (type == AE_IFDIR) {
            rc = lis_put_dir(p, nm, &at, err);
        } else if (type == AE_IFLNK) {
            rc = lis_put_symlink(p, nm, archive_entry_symlink(e) ? archive_entry_symlink(e) : "",
                                 &at, err);
        } else if (type == AE_IFREG) {
            uint64_t size = archive_entry_size(e) > 0 ? (uint64_t)archive_entry_size(e) : 0;
            int fd = lis_put_file(p, nm, err);
            rc = fd < 0 ? -1 : put_data(a, fd, size, nm, err);
            if (rc == 0)
                rc = lis_put_file_done(p, fd, size, &at, err);
        } /* devices, fifos, sockets: not made rootless */
    }
    if (rc == 0 && r != ARCHIVE_EOF)
        rc = lis_fail(err, EIO, "Error processing tar file: %s",
                      archive_error_string(a) ? archive_error_string(a) : "unexpected EOF");
    if (rc == 0)
        rc = lis_put_finish(p, err);
    if (rc < 0)
        lis_put_abort(p); /* what it made that was not there goes again */
    else
        res->status = 200;
    lis_put_free(p);
    archive_read_free(a);
    return rc;
}

/* What an archive may add: what the writable budget has left (a disk upper
 * layer's use is measured, a tmpfs's read), and at most the budget in one
 * request. LIS_UNLIMITED without a budget. */
static uint64_t put_allowed(lis_sandbox *sb, char *why, size_t len)
{
    lis_stats st;
    lis_error err = {0};
    if (lis_sandbox_stats(sb, &st, &err) < 0 || st.disk_limit == LIS_UNLIMITED) {
        snprintf(why, len, "no budget");
        return LIS_UNLIMITED;
    }
    uint64_t left = st.disk_bytes < st.disk_limit ? st.disk_limit - st.disk_bytes : 0;
    snprintf(why, len, "--disk %llu bytes, %llu in use", (unsigned long long)st.disk_limit,
             (unsigned long long)st.disk_bytes);
    return left;
}

static void put_work(void *arg)
{
    arc_job *j = arg;
    char kind;
    lis_error err = {0};
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
    char budget[256];
    check_pass(j, put_allowed(j->sb, budget, sizeof budget), budget);
    if (j->status)
        return;
    put_result res = {.status = 500};
    snprintf(res.msg, sizeof res.msg, "extracting the archive failed");
    if (lis_sandbox_as_root(j->sb, extract, j, &res, sizeof res, NULL, 0, &err) < 0 ||
        res.status != 200) {
        j->status = err.code == ENOSPC || err.code == EFBIG ? 413 : 500;
        snprintf(j->msg, sizeof j->msg, "%s", err.msg[0] ? err.msg : res.msg);
        return;
    }
    j->status = 200;
}

static void arc_done(void *arg, int status)
{
    arc_job *j = arg;
    (*j->busy)--;
    if (j->status != 200) {
        if (j->head)
            sv_req_finish(j->q, j->status, sv_resp_empty());
        else
            sv_req_finish_error(j->q, j->status, "%s", j->msg);
    } else if (j->head) {
        struct MHD_Response *r = sv_resp_empty();
        MHD_add_response_header(r, "X-Docker-Container-Path-Stat", j->stat_hdr);
        sv_req_finish(j->q, 200, r);
    } else if (j->stat_hdr[0]) {
        get_start(j);
    } else {
        sv_req_finish(j->q, 200, sv_resp_empty());
    }
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
    return start(q, sb, cname, head, stat_work, busy);
}

enum MHD_Result sv_archive_put(sv_req *q, lis_sandbox *sb, const char *cname, int *busy)
{
    return start(q, sb, cname, 0, put_work, busy);
}
