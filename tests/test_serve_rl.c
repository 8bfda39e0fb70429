/* test_serve_rl.c - serve/'s side of the episodes API (docs/rl.md, serve/api_rl.c):
 * its routes under /lis/v1/, ?wait= and the event ids checked, the body caps
 * (80 MiB for POST /lis/v1/groups, the JSON cap elsewhere), the long-poll
 * waiters bounded and freed when their client hangs up, the events stream
 * (SSE) resumed by Last-Event-ID, and the --rl-* flags. Plain HTTP/1.0 over
 * the unix socket (the answer ends with the connection).
 *
 * serve_rl/requests_refused_with_one_line needs nothing of rl/ but its
 * lis_rl_owns. The other tests need rl/'s core (the episodes themselves):
 * they are marked "NEEDS rl/'s core" and run once rl/ is merged. */
#include "testlib.h"

#include "serve/server.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define WAITERS_MAX 1024 /* serve/api_rl.c's RL_WAITERS_MAX */

static int uconnect(const char *sock)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0, "socket: %s", strerror(errno));
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "connect %s: %s", sock,
                 strerror(errno));
    return fd;
}

/* Sends a request (HTTP/1.0: its answer ends with the connection); a server
 * that answers early and closes may leave part of the body unsent. */
static int req_send(const char *sock, const char *method, const char *path, const char *hdrs,
                    const char *body, size_t blen)
{
    int fd = uconnect(sock);
    char head[8192];
    int n =
        snprintf(head, sizeof head, "%s %s HTTP/1.0\r\nHost: lis\r\n%sContent-Length: %zu\r\n\r\n",
                 method, path, hdrs ? hdrs : "", blen);
    cr_assert_eq(send(fd, head, (size_t)n, MSG_NOSIGNAL), n);
    for (size_t off = 0; body && off < blen;) {
        ssize_t k = send(fd, body + off, blen - off, MSG_NOSIGNAL);
        if (k <= 0)
            break;
        off += (size_t)k;
    }
    return fd;
}

/* The whole answer (until the server closes), NUL-terminated. */
static char *read_all(int fd)
{
    size_t len = 0, cap = 65536;
    char *b = malloc(cap);
    for (;;) {
        if (len + 4096 > cap)
            b = realloc(b, cap *= 2);
        ssize_t k = recv(fd, b + len, cap - len - 1, 0);
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    b[len] = 0;
    close(fd);
    return b;
}

static int status_of(const char *raw)
{
    int st = 0;
    return sscanf(raw, "HTTP/1.%*d %d", &st) == 1 ? st : 0;
}

static const char *body_of(const char *raw)
{
    const char *p = strstr(raw, "\r\n\r\n");
    return p ? p + 4 : "";
}

/* One request; its answer's raw text (headers and body). */
static char *http(const char *sock, const char *method, const char *path, const char *hdrs,
                  const char *body, size_t blen)
{
    return read_all(req_send(sock, method, path, hdrs, body, blen));
}

/* The answer is status with a one-line {"message"} holding want. */
static void expect_error(const char *raw, int status, const char *want)
{
    const char *b = body_of(raw);
    cr_assert_eq(status_of(raw), status, "want %d, got:\n%s", status, raw);
    cr_assert(strchr(b, '\n') == b + strlen(b) - 1, "not one line:\n%s", raw);
    cJSON *j = cJSON_Parse(b);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
    cr_assert(cJSON_IsString(m) && strstr(m->valuestring, want), "want a message with '%s':\n%s",
              want, raw);
    cJSON_Delete(j);
}

static void start(ts_server *s, const char *const *extra) { ts_start_args(s, extra); }

Test(serve_rl, requests_refused_with_one_line, .timeout = 120)
{
    /* the flags: a bad value is one line, nothing starts */
    const char *bad[] = {"--rl-max-live 0", "--rl-max-n abc", "--rl-max-live 70000", "--rl-max-n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int code;
        char *out = t_lis(&code, "serve --socket %s/none.sock %s 2>&1", t_tmpdir(), bad[i]);
        cr_assert(code == 2 &&
                      strstr(out,
                             i < 3 ? "wants a positive number up to 65536" : "missing value") &&
                      strstr(out, bad[i][9] == 'l' ? "--rl-max-live" : "--rl-max-n") &&
                      strchr(out, '\n') == out + strlen(out) - 1,
                  "lis serve %s: %d %s", bad[i], code, out);
        free(out);
    }
    ts_server s;
    start(&s, NULL);
    const char *waits[] = {"abc", "601", "-1", "nan", "", "1e9"};
    for (size_t i = 0; i < sizeof waits / sizeof *waits; i++) {
        char path[128];
        snprintf(path, sizeof path, "/lis/v1/episodes/e-x?wait=%s", waits[i]);
        char *r = http(s.sock, "GET", path, NULL, NULL, 0);
        expect_error(r, 400, "?wait= must be seconds from 0 to 600");
        free(r);
    }
    char *r = http(s.sock, "GET", "/lis/v1/episodes/e-x/events", "Last-Event-ID: abc\r\n", NULL, 0);
    expect_error(r, 400, "Last-Event-ID must be an event id");
    free(r);
    r = http(s.sock, "GET", "/lis/v1/episodes/e-x/events?after=-3", NULL, NULL, 0);
    expect_error(r, 400, "?after= must be an event id");
    free(r);
    /* 2 MiB: over the JSON cap of every route but POST /lis/v1/groups */
    size_t big = 2u << 20;
    char *junk = malloc(big);
    memset(junk, 'x', big);
    r = http(s.sock, "POST", "/lis/v1/episodes/e-x/cancel", NULL, junk, big);
    expect_error(r, 413, "request body too large: POST /lis/v1/episodes/e-x/cancel takes at most");
    free(r);
    r = http(s.sock, "POST", "/lis/v1/groups", NULL, junk, big); /* read whole, then parsed */
    expect_error(r, 400, "the body of POST /lis/v1/groups must be JSON");
    free(r);
    free(junk);
    /* past the groups' 80 MiB: refused from its Content-Length, before a byte of it */
    int fd = uconnect(s.sock);
    const char *head = "POST /lis/v1/groups HTTP/1.0\r\nContent-Length: 94371840\r\n\r\n";
    cr_assert_eq(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
    r = read_all(fd);
    expect_error(r, 413, "takes at most 83886080 bytes");
    free(r);
    cr_assert_eq(ts_stop(&s), 0);
}

/* ---- NEEDS rl/'s core (run after rl/ is merged) ----------------------------------------- */

Test(serve_rl, episodes_api_answers, .timeout = 120)
{
    ts_server s;
    const char *extra[] = {"--rl-max-live", "7", "--rl-max-n", "3", NULL};
    start(&s, extra);
    char *r = http(s.sock, "GET", "/lis/v1/rl/status", NULL, NULL, 0);
    cr_assert_eq(status_of(r), 200, "%s", r);
    cJSON *j = cJSON_Parse(body_of(r));
    cr_assert(cJSON_IsObject(j), "%s", r);
    /* --rl-max-live reached rl/ */
    cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "max_live")), 7, "%s", r);
    cJSON_Delete(j);
    free(r);
    r = http(s.sock, "GET", "/lis/v1/episodes/nope", NULL, NULL, 0);
    expect_error(r, 404, "");
    free(r);
    r = http(s.sock, "GET", "/lis/v1/rl/nope", NULL, NULL, 0);
    expect_error(r, 404, "");
    free(r);
    r = http(s.sock, "POST", "/lis/v1/groups", NULL, "{}", 2);
    expect_error(r, 400, "task");
    free(r);
    cr_assert_eq(ts_stop(&s), 0);
}

/* Posts a group of one episode against a model at port; its group and episode ids. */
static void post_group(const char *sock, int port, char *gid, char *eid)
{
    char body[1024];
    snprintf(body, sizeof body,
             "{\"task\": {\"id\": \"t1\", \"image\": \"lis-test:v1\", \"prompt\": \"say hi\","
             " \"reward\": {\"scorer\": \"builtin:match\", \"ground_truth\": \"hi\"}},"
             " \"n\": 1, \"max_steps\": 2, \"deadline_s\": 600,"
             " \"inference\": {\"base_url\": \"http://127.0.0.1:%d/v1\", \"model\": \"m\","
             " \"api_key\": \"x\"}}",
             port);
    char *r = http(sock, "POST", "/lis/v1/groups", NULL, body, strlen(body));
    cr_assert_eq(status_of(r), 202, "%s", r);
    cJSON *j = cJSON_Parse(body_of(r));
    const char *g = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "group_id"));
    const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "episode_ids"), 0);
    cr_assert(g && cJSON_IsString(e), "%s", r);
    snprintf(gid, 128, "%s", g);
    snprintf(eid, 128, "%s", e->valuestring);
    cJSON_Delete(j);
    free(r);
}

/* A server with a group of one episode whose model never answers (the
 * endpoint's fd returned: close it at the end). */
static int start_with_episode(ts_server *s, char *gid, char *eid)
{
    int port, lfd = t_silent_endpoint(&port);
    start(s, NULL);
    post_group(s->sock, port, gid, eid);
    return lfd;
}

Test(serve_rl, waiters_bounded_and_freed_on_hang_up, .timeout = 240)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max < WAITERS_MAX + 256)
        cr_skip_test("RLIMIT_NOFILE's hard limit is %lu", (unsigned long)rl.rlim_max);
    rl.rlim_cur = rl.rlim_max;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    ts_server s;
    char gid[128], eid[128], path[300];
    int lfd = start_with_episode(&s, gid, eid);
    snprintf(path, sizeof path, "/lis/v1/episodes/%s?wait=600", eid);
    /* the episode waits on its model: every long-poll waits, up to the bound */
    enum { N = WAITERS_MAX + 4 };
    static int fds[N];
    static int answered[N];
    for (int i = 0; i < N; i++)
        fds[i] = req_send(s.sock, "GET", path, NULL, NULL, 0);
    int over = 0;
    while (over < N - WAITERS_MAX) { /* those past the bound answer at once */
        struct pollfd *p = calloc(N, sizeof *p);
        for (int i = 0; i < N; i++)
            p[i] = (struct pollfd){.fd = answered[i] ? -1 : fds[i], .events = POLLIN};
        cr_assert_gt(poll(p, N, -1), 0);
        for (int i = 0; i < N; i++)
            if (p[i].revents) {
                char *r = read_all(fds[i]);
                answered[i] = 1;
                expect_error(r, 503, "1024 requests wait on the episodes API already");
                free(r);
                over++;
            }
        free(p);
    }
    /* the others still wait: nothing to read on any */
    int silent = 0;
    for (int i = 0; i < N; i++) {
        if (answered[i])
            continue;
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        cr_assert_eq(poll(&p, 1, 0), 0, "waiter %d answered", i);
        silent++;
    }
    cr_assert_eq(silent, WAITERS_MAX);
    /* ten clients hang up: their places are free again (a look once a second) */
    for (int i = 0, k = 0; i < N && k < 10; i++)
        if (!answered[i]) {
            close(fds[i]);
            answered[i] = 1;
            k++;
        }
    snprintf(path, sizeof path, "/lis/v1/episodes/%s?wait=0.2", eid);
    int st = 503;
    for (int tries = 0; tries < 300 && st == 503; tries++) {
        char *r = http(s.sock, "GET", path, NULL, NULL, 0);
        st = status_of(r);
        free(r);
        if (st == 503)
            usleep(100000);
    }
    cr_assert_eq(st, 200, "a long-poll still refused after ten waiters hung up");
    for (int i = 0; i < N; i++)
        if (!answered[i])
            close(fds[i]);
    char cancel[300];
    snprintf(cancel, sizeof cancel, "/lis/v1/groups/%s/cancel", gid);
    free(http(s.sock, "POST", cancel, NULL, NULL, 0));
    close(lfd);
    cr_assert_eq(ts_stop(&s), 0);
}

/* The events of raw (a whole SSE answer): their ids into ids (n of them), the last name. */
static int sse_events(const char *raw, long *ids, int max, char *last, size_t llen)
{
    int n = 0;
    const char *p = body_of(raw);
    while (*p && n < max) {
        long id;
        char name[64];
        int used = 0;
        cr_assert(sscanf(p, "id: %ld\nevent: %63[^\n]\ndata: %n", &id, name, &used) == 2 && used,
                  "not an event at: %.200s", p);
        const char *end = strstr(p + used, "\n\n");
        cr_assert(end, "an event without its end: %.200s", p);
        char *data = strndup(p + used, (size_t)(end - p - used));
        cJSON *j = cJSON_Parse(data);
        cr_assert(j && !strchr(data, '\n'), "data is not one line of JSON: %s", data);
        cJSON_Delete(j);
        free(data);
        cr_assert(n == 0 || id > ids[n - 1], "ids do not grow: %ld after %ld", id, ids[n - 1]);
        ids[n++] = id;
        snprintf(last, llen, "%s", name);
        p = end + 2;
    }
    return n;
}

Test(serve_rl, events_stream_ends_and_resumes, .timeout = 240)
{
    ts_server s;
    char gid[128], eid[128], path[300];
    int lfd = start_with_episode(&s, gid, eid);
    snprintf(path, sizeof path, "/lis/v1/episodes/%s/cancel", eid);
    char *r = http(s.sock, "POST", path, NULL, NULL, 0);
    cr_assert(status_of(r) / 100 == 2, "%s", r);
    free(r);
    /* from the start: to the final event, then the stream ends */
    snprintf(path, sizeof path, "/lis/v1/episodes/%s/events", eid);
    r = http(s.sock, "GET", path, NULL, NULL, 0);
    cr_assert(status_of(r) == 200 && strstr(r, "Content-Type: text/event-stream"), "%s", r);
    long ids[256], ids2[256];
    char last[64] = "", last2[64] = "";
    int n = sse_events(r, ids, 256, last, sizeof last);
    cr_assert(n >= 1 && !strcmp(last, "final"), "%s", r);
    free(r);
    /* resumed after the first: the others, the same */
    char hdr[64];
    snprintf(hdr, sizeof hdr, "Last-Event-ID: %ld\r\n", ids[0]);
    r = http(s.sock, "GET", path, hdr, NULL, 0);
    int n2 = sse_events(r, ids2, 256, last2, sizeof last2);
    cr_assert_eq(n2, n - 1, "%s", r);
    for (int i = 0; i < n2; i++)
        cr_assert_eq(ids2[i], ids[i + 1]);
    free(r);
    snprintf(path, sizeof path, "/lis/v1/episodes/%s/events?after=%ld", eid, ids[0]);
    r = http(s.sock, "GET", path, NULL, NULL, 0);
    cr_assert_eq(sse_events(r, ids2, 256, last2, sizeof last2), n - 1, "%s", r);
    free(r);
    r = http(s.sock, "GET", "/lis/v1/episodes/nope/events", NULL, NULL, 0);
    expect_error(r, 404, "");
    free(r);
    close(lfd);
    cr_assert_eq(ts_stop(&s), 0);
}
