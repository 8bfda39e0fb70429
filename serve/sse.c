/* sse.c - a server-sent events response (text/event-stream), the one
 * machinery of serve/'s event streams (api_exec.c's command output,
 * api_rl.c's episode events). The events queue in a buffer that
 * libmicrohttpd's content reader drains; a producer stops while the backlog is
 * at SV_STREAM_HIGH (sv_sse_full) and is called back (room) once the client
 * has read it down to half of that, so a slow reader never grows memory
 * without bound. While the buffer is empty the request is suspended; a queued
 * byte resumes it. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sv_sse_queue(sv_sse *e, const char *txt, size_t n)
{
    if (!e->q)
        return;                          /* nobody reads it */
    if (e->off && e->len + n > e->cap) { /* what was read makes room: the buffer stays
                                          * the backlog's size, not the stream's */
        memmove(e->buf, e->buf + e->off, e->len - e->off);
        e->len -= e->off;
        e->off = 0;
    }
    if (LIS_GROW(e->buf, e->cap, e->len + n) < 0)
        return;
    memcpy(e->buf + e->len, txt, n);
    e->len += n;
    sv_req_resume(e->q);
}

void sv_sse_event(sv_sse *e, long id, const char *name, cJSON *doc)
{
    char *txt = lis_json_print(doc, 0); /* compact: one line, as "data:" wants */
    cJSON_Delete(doc);
    if (!txt)
        return;
    size_t n = strlen(txt) + strlen(name) + 64;
    char *ev = malloc(n);
    if (ev) {
        char idl[40] = "";
        if (id >= 0)
            snprintf(idl, sizeof idl, "id: %ld\n", id);
        int k = snprintf(ev, n, "%sevent: %s\ndata: %s\n\n", idl, name, txt);
        sv_sse_queue(e, ev, (size_t)k);
    }
    free(ev);
    free(txt);
}

int sv_sse_full(sv_sse *e)
{
    e->paused = e->len - e->off >= SV_STREAM_HIGH;
    return e->paused;
}

void sv_sse_end(sv_sse *e)
{
    e->done = 1;
    if (e->q)
        sv_req_resume(e->q);
}

void sv_sse_req_done(sv_sse *e)
{
    e->q = NULL;
    e->off = e->len = 0;
    if (e->paused) { /* nobody reads: the producer may go on (into nothing) */
        e->paused = 0;
        if (e->room)
            e->room(e->owner);
    }
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    sv_sse *e = cls;
    if (e->off == e->len) {
        e->off = e->len = 0;
        if (e->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (e->q)
            sv_req_suspend(e->q);
        return 0;
    }
    size_t n = e->len - e->off < max ? e->len - e->off : max;
    memcpy(buf, e->buf + e->off, n);
    e->off += n;
    if (e->paused && e->len - e->off < SV_STREAM_HIGH / 2) {
        e->paused = 0;
        if (e->room)
            e->room(e->owner);
    }
    return (ssize_t)n;
}

static void response_free(void *cls)
{
    sv_sse *e = cls;
    if (e->freed)
        e->freed(e->owner);
}

enum MHD_Result sv_sse_reply(sv_sse *e, sv_req *q)
{
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, reader, e, response_free);
    if (!r) {
        response_free(e); /* as if it had been made and gone */
        return MHD_NO;
    }
    sv_resp_headers(r);
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    return sv_reply(q, 200, r);
}
