/* score_cmd.c - --scorer CMD: any language's scorer. Per row, /bin/sh -c CMD
 * gets {"answer":..., "ground_truth":..., "row":{every other field}} on stdin
 * and prints one number on stdout. A process per row (not resident): the
 * contract stays trivial for a script, and a scorer that leaks or crashes
 * affects one row only. */
#include "score.h"
#include "score_proc.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

int score_cmd_run(const char *cmd, const char *answer, const cJSON *row, double timeout,
                  double *score, lis_error *err)
{
    cJSON *req = cJSON_CreateObject();
    cJSON *r = cJSON_IsObject(row) ? cJSON_Duplicate(row, 1) : cJSON_CreateObject();
    const cJSON *gt = cJSON_GetObjectItem(row, "ground_truth");
    cJSON *g = gt ? cJSON_Duplicate(gt, 1) : cJSON_CreateNull();
    if (!req || !r || !g) {
        cJSON_Delete(req), cJSON_Delete(r), cJSON_Delete(g);
        return lis_oom(err);
    }
    cJSON_DeleteItemFromObject(r, "ground_truth");
    cJSON_AddStringToObject(req, "answer", answer ? answer : "");
    cJSON_AddItemToObject(req, "ground_truth", g);
    cJSON_AddItemToObject(req, "row", r);
    char *in = lis_json_print(req, 0);
    cJSON_Delete(req);
    if (!in)
        return lis_oom(err);

    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    sproc p;
    if (sproc_spawn(argv, 0, &p, err)) {
        free(in);
        return lis_wrap(err, "--scorer command");
    }
    strbuf out = {0}, tail = {0};
    sproc_rc rc = sproc_talk(&p, in, strlen(in), 0, &out, &tail, timeout);
    free(in);
    int st = sproc_end(&p, rc != SP_OK);
    char last[320], sts[64];
    sproc_last_line(&tail, last, sizeof last);
    sproc_status_text(st, sts, sizeof sts);
    int ret = -1;
    if (rc == SP_TIMEOUT) {
        lis_fail(err, ETIMEDOUT, "--scorer command gave no answer in %.0f s (killed)", timeout);
    } else if (rc != SP_OK) {
        lis_fail(err, EIO, "--scorer command: reading its output failed (more than 1 MB?)");
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        lis_fail(err, EIO, "--scorer command failed (%s)%s%s", sts, *last ? ": " : "", last);
    } else {
        /* one number, surrounding white space allowed */
        const char *s = out.s ? out.s : "";
        char *end;
        errno = 0;
        double x = strtod(s, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
            end++;
        if (end == s || *end || errno == ERANGE || !isfinite(x)) {
            char shown[64];
            size_t n = strcspn(s, "\n");
            snprintf(shown, sizeof shown, "%.*s%s", (int)(n > 40 ? 40 : n), s, n > 40 ? "..." : "");
            lis_fail(err, EINVAL, "--scorer command printed \"%s\", not a number", shown);
        } else {
            *score = x;
            ret = 0;
        }
    }
    strbuf_release(&out);
    strbuf_release(&tail);
    return ret;
}
