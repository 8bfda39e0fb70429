/* ctl_client.c - `lis batch ctl DIR status|pause|resume|stop [ID...]`
 * (lis_batch_ctl in lis_batch.h): one HTTP request (libcurl) over the
 * running batch's control socket DIR/ctl.sock (live.c serves it), its
 * answer printed. */
#include "lis_batch.h"
#include "results.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPLY_MAX (64u << 20) /* the status of a very large run */

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    strbuf *b = arg;
    if (b->len + size * n > REPLY_MAX)
        return 0;
    strbuf_putn(b, p, size * n);
    return size * n;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

static void print_status(FILE *out, const cJSON *s)
{
    fprintf(out,
            "%s: %.0f/%.0f done, %.0f running (%.0f paused), %.0f queued, %.0f errors, "
            "%.0f alerts%s%s\n",
            str(s, "task"), num(s, "done"), num(s, "total"), num(s, "running"), num(s, "paused"),
            num(s, "queued"), num(s, "errors"), num(s, "alerts"),
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "draining")) ? ", draining" : "",
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "paused_all")) ? ", paused" : "");
    const cJSON *e;
    int n = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(s, "episodes"))
    {
        if (!n++)
            fprintf(out, "  %-24s %-9s %5s %-8s %6s  %s\n", "episode", "state", "step", "doing",
                    "alerts", "last step");
        char state[48];
        snprintf(state, sizeof state, "%s",
                 cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "paused")) ? "paused"
                                                                             : str(e, "state"));
        fprintf(out, "  %-24.24s %-9s %5.0f %-8s %6.0f  %s %.80s\n", str(e, "key"), state,
                num(e, "step"), str(e, "doing"), num(e, "alerts"), str(e, "tool"),
                str(e, "command"));
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "paused")))
            fprintf(out, "  %-24s paused by %s\n", "", str(e, "paused_by"));
    }
    const cJSON *a;
    n = 0;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(s, "latest_alerts"))
    {
        if (!n++)
            fprintf(out, "latest alerts:\n");
        fprintf(out, "  %-24.24s step %-4.0f %-24s %-5s %s\n", str(a, "key"), num(a, "step"),
                str(a, "rule"), str(a, "action"), str(a, "what"));
    }
}

/* No lis batch answers on DIR: a run that ended says how; one that died
 * (kill -9, a crash) is found, its files repaired and its leftovers removed;
 * a directory that is no run says so. Always -1 (err). */
static int not_running(const char *dir, lis_error *err)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/run.json", dir);
    if (access(path, F_OK) != 0)
        return lis_fail(err, ENOENT,
                        "%s is not a lis batch run's directory (no run.json; give "
                        "<output-dir>/<YYYYmmdd_HHMMSS>_<task>)",
                        dir);
    lis_error rerr = {0};
    int repaired = batch_repair_if_dead(dir, &rerr);
    if (repaired < 0)
        return lis_fail(err, rerr.code, "lis batch ctl: %s", rerr.msg);
    size_t len = 0;
    char *text = agent_read_host_file(path, &len, &rerr);
    cJSON *j = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    const char *st = str(j, "status"), *why = str(j, "status_message");
    const char *fin = str(j, "finish_command");
    char tail[600] = "";
    if (*fin && strcmp(st, "complete"))
        snprintf(tail, sizeof tail, "; finish it with: %.500s", fin);
    lis_fail(err, ESRCH, "no lis batch runs on %s: %s%s%s%.300s%s%s", dir,
             repaired ? "its process ended without a word (kill -9, a crash); its files now say "
                      : "it has ended: ",
             *st ? st : "?", *why ? " (" : "", why, *why ? ")" : "", tail);
    cJSON_Delete(j);
    return -1;
}

int lis_batch_ctl(const char *dir, const char *verb, const char *const *ids, size_t n, FILE *out,
                  lis_error *err)
{
    /* the socket through the directory's fd: DIR may be longer than sun_path */
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return lis_fail_errno(err, "lis batch ctl: %s", dir);
    struct stat st;
    if (fstatat(dfd, "ctl.sock", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode)) {
        close(dfd);
        return not_running(dir, err);
    }
    char sock[64], url[64];
    snprintf(sock, sizeof sock, "/proc/self/fd/%d/ctl.sock", dfd);
    snprintf(url, sizeof url, "http://lis-batch/%s", verb);
    cJSON *body = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(body, "ids");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(ids[i]));
    char *text = lis_json_print(body, 0);
    cJSON_Delete(body);
    CURL *h = curl_easy_init();
    strbuf reply = {0};
    long status = 0;
    int rc = -1;
    if (!h || !text) {
        lis_oom(err);
        goto out;
    }
    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, sock);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (strcmp(verb, "status"))
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_COULDNT_CONNECT) { /* a socket nobody listens on: its run died */
        not_running(dir, err);
        goto out;
    }
    if (cc != CURLE_OK) {
        lis_fail(err, ECONNREFUSED, "no lis batch answers on %s/ctl.sock (%s)", dir,
                 curl_easy_strerror(cc));
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    cJSON *j = reply.s ? cJSON_ParseWithLength(reply.s, reply.len) : NULL;
    if (status != 200 || !j) {
        lis_fail(err, EIO, "lis batch ctl %s: HTTP %ld: %s", verb, status,
                 j ? str(j, "error") : "not JSON");
        cJSON_Delete(j);
        goto out;
    }
    if (!strcmp(verb, "status")) {
        print_status(out, j);
    } else if (cJSON_GetObjectItemCaseSensitive(j, "done")) {
        fprintf(out, "%s\n", str(j, "done"));
    } else {
        const cJSON *k;
        int m = 0;
        cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(j, "episodes"))
        {
            fprintf(out, "%s %s\n", verb, cJSON_GetStringValue(k) ? k->valuestring : "?");
            m++;
        }
        if (!m)
            fprintf(out, "%s: no running episode matched\n", verb);
        cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(j, "not_running"))
            fprintf(out, "not running: %s\n", cJSON_GetStringValue(k) ? k->valuestring : "?");
    }
    cJSON_Delete(j);
    rc = 0;
out:
    if (h)
        curl_easy_cleanup(h);
    free(text);
    strbuf_release(&reply);
    close(dfd);
    return rc;
}
