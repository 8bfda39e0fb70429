/* score_judge.c - LLM-as-a-judge for the physics and long_context tasks: the
 * judge prompt and its CORRECT/INCORRECT parsing, through the agent's LLM
 * client; per row while the batch runs, or afterwards over a run directory
 * (`lis batch judge DIR`).
 * original: judge.py's prompt, word for word, and its verdict parsing; it
 * judged each answer 4 times (--num_repeats) and averaged, lis asks once. */
#include "score.h"
#include "score_judge.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *score_judge_prompt(const char *question, const char *ground_truth, const char *answer)
{
    /* thinking before </think> is not the answer */
    const char *a = answer ? answer : "";
    const char *t = strstr(a, "</think>");
    char *after = NULL;
    if (t) {
        const char *b = t + strlen("</think>"), *e = b + strlen(b);
        while (*b == ' ' || (*b >= '\t' && *b <= '\r'))
            b++;
        while (e > b && (e[-1] == ' ' || (e[-1] >= '\t' && e[-1] <= '\r')))
            e--;
        after = agent_strndup(b, (size_t)(e - b));
        a = after ? after : "";
    }
    strbuf s = {0};
    strbuf_printf(&s,
                  "Assess whether the following CANDIDATE ANSWER is CORRECT or INCORRECT.\n"
                  "For the CANDIDATE ANSWER to be correct, it must be consistent with the OFFICIAL ANSWER.\n"
                  "\n"
                  "The question, for reference only: %s\n"
                  "The OFFICIAL ANSWER: %s\n"
                  "CANDIDATE ANSWER TO ASSESS: %s\n"
                  "\n"
                  "Reply only with CORRECT or INCORRECT.",
                  question ? question : "", ground_truth ? ground_truth : "", a);
    free(after);
    return strbuf_take(&s);
}

const char *score_judge_verdict(const char *reply)
{
    /* the last CORRECT that is not the tail of INCORRECT, against the last INCORRECT */
    long last_c = -1, last_i = -1;
    size_t n = strlen(reply);
    for (size_t i = 0; i + 7 <= n; i++) {
        if (strncasecmp(reply + i, "CORRECT", 7) != 0)
            continue;
        if (i >= 2 && strncasecmp(reply + i - 2, "IN", 2) == 0)
            last_i = (long)i - 2;
        else
            last_c = (long)i;
    }
    if (last_c < 0 && last_i < 0)
        return "UNKNOWN";
    return last_i > last_c ? "INCORRECT" : "CORRECT";
}

/* ground_truth as text: a string as is, anything else as JSON */
char *score_judge_text(const cJSON *v)
{
    if (!v)
        return agent_strdup("");
    if (cJSON_IsString(v))
        return agent_strdup(v->valuestring);
    return cJSON_PrintUnformatted(v);
}

int score_judge_ask(llm_client *c, const char *question, const cJSON *ground_truth,
                    const char *answer, double *score, char verdict[16], lis_error *err)
{
    char *gt = score_judge_text(ground_truth);
    char *prompt = gt ? score_judge_prompt(question, gt, answer) : NULL;
    free(gt);
    cJSON *msgs = cJSON_CreateArray(), *m = cJSON_CreateObject();
    if (!prompt || !msgs || !m) {
        free(prompt);
        cJSON_Delete(msgs);
        cJSON_Delete(m);
        return lis_oom(err);
    }
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", prompt);
    cJSON_AddItemToArray(msgs, m);
    free(prompt);
    llm_reply r = {0};
    int rc = llm_chat(c, msgs, NULL, &r, err);
    cJSON_Delete(msgs);
    if (rc) {
        lis_wrap(err, "judge");
        return -1;
    }
    const char *v = score_judge_verdict(r.content ? r.content : "");
    snprintf(verdict, 16, "%s", v);
    *score = strcmp(v, "CORRECT") == 0 ? 1.0 : 0.0;
    llm_reply_free(&r);
    return 0;
}

/* ---- lis batch judge DIR ------------------------------------------------ */

typedef struct jrow {
    cJSON *id; /* borrowed from the results row */
    int attempt;
    const char *question, *answer;
    const cJSON *gt;
} jrow;

typedef struct jstate {
    const llm_config *cfg;
    jrow *rows;
    size_t n, next, done, failed;
    FILE *out;
    int out_fd;
    FILE *log;
    char first_err[400];
    pthread_mutex_t mu;
} jstate;

static char *row_key(const cJSON *id, int attempt)
{
    char *t = id ? lis_json_print(id, 0) : agent_strdup("null");
    if (!t)
        return NULL;
    strbuf b = {0};
    strbuf_printf(&b, "%s@%d", t, attempt);
    free(t);
    return strbuf_take(&b);
}

/* Parses every complete JSON line of path into an array (a torn last line
 * from a crash is skipped); a missing file is an empty array. */
static cJSON *read_jsonl(const char *path, int must_exist, int *ends_nl, lis_error *err)
{
    size_t len = 0;
    *ends_nl = 1;
    if (!must_exist && access(path, F_OK) != 0)
        return cJSON_CreateArray();
    char *data = agent_read_host_file(path, &len, err);
    if (!data)
        return NULL;
    cJSON *arr = cJSON_CreateArray();
    *ends_nl = len == 0 || data[len - 1] == '\n';
    for (char *line = data, *nl; line < data + len; line = nl + 1) {
        nl = memchr(line, '\n', (size_t)(data + len - line));
        if (!nl)
            nl = data + len;
        *nl = 0;
        cJSON *j = cJSON_Parse(line);
        if (cJSON_IsObject(j))
            cJSON_AddItemToArray(arr, j);
        else
            cJSON_Delete(j);
    }
    free(data);
    return arr;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void *judge_thread(void *arg)
{
    jstate *st = arg;
    lis_error err = {0};
    llm_client *c = llm_new(st->cfg, &err);
    for (;;) {
        pthread_mutex_lock(&st->mu);
        size_t i = st->next < st->n ? st->next++ : st->n;
        if (i == st->n || !c) {
            if (!c && i < st->n) {
                st->failed += st->n - i;
                st->next = st->n;
                if (!st->first_err[0])
                    snprintf(st->first_err, sizeof st->first_err, "%s", err.msg);
            }
            pthread_mutex_unlock(&st->mu);
            break;
        }
        pthread_mutex_unlock(&st->mu);
        jrow *r = &st->rows[i];
        double score = 0;
        char verdict[16];
        lis_error e = {0};
        int rc = score_judge_ask(c, r->question, r->gt, r->answer, &score, verdict, &e);
        cJSON *line = rc ? NULL : cJSON_CreateObject();
        if (line) {
            cJSON_AddItemToObject(line, "id", cJSON_Duplicate(r->id, 1));
            cJSON_AddNumberToObject(line, "attempt", r->attempt);
            cJSON_AddNumberToObject(line, "score", score);
            cJSON_AddStringToObject(line, "verdict", verdict);
        }
        char *text = line ? lis_json_print(line, 0) : NULL;
        cJSON_Delete(line);
        pthread_mutex_lock(&st->mu);
        if (text) {
            fprintf(st->out, "%s\n", text);
            if (fflush(st->out) == 0)
                fsync(st->out_fd);
            st->done++;
        } else {
            st->failed++;
            if (!st->first_err[0])
                snprintf(st->first_err, sizeof st->first_err, "%s", rc ? e.msg : "out of memory");
        }
        pthread_mutex_unlock(&st->mu);
        free(text);
    }
    llm_free(c);
    return NULL;
}

int batch_judge_dir(const char *dir, const llm_config *judge, int concurrency, FILE *log,
                    lis_error *err)
{
    char rpath[4096], jpath[4096];
    snprintf(rpath, sizeof rpath, "%s/results.jsonl", dir);
    snprintf(jpath, sizeof jpath, "%s/judge.jsonl", dir);
    int nl;
    cJSON *results = read_jsonl(rpath, 1, &nl, err);
    if (!results)
        return lis_wrap(err, "lis batch judge");
    cJSON *judged = read_jsonl(jpath, 0, &nl, err);
    if (!judged) {
        cJSON_Delete(results);
        return lis_wrap(err, "lis batch judge");
    }
    size_t nres = (size_t)cJSON_GetArraySize(results);
    jstate st = {.cfg = judge, .log = log};
    char **keys = NULL;
    pthread_mutex_init(&st.mu, NULL);
    st.rows = calloc(nres ? nres : 1, sizeof *st.rows);
    int ret = -1;
    if (!st.rows) {
        lis_oom(err);
        goto out;
    }
    /* the keys already judged, and those taken from results.jsonl so far, sorted
     * for lookups (a results.jsonl of 100k rows must not take n^2) */
    size_t nj = (size_t)cJSON_GetArraySize(judged), nk = 0;
    keys = calloc(nj + nres + 1, sizeof *keys);
    if (!keys) {
        lis_oom(err);
        goto out;
    }
    const cJSON *j;
    cJSON_ArrayForEach(j, judged)
    {
        const cJSON *ja = cJSON_GetObjectItem(j, "attempt");
        char *k = row_key(cJSON_GetObjectItem(j, "id"),
                          cJSON_IsNumber(ja) ? (int)agent_json_long(ja) : 0);
        if (k)
            keys[nk++] = k;
    }
    qsort(keys, nk, sizeof *keys, cmp_key);
    size_t nsorted = nk;
    const cJSON *r;
    cJSON_ArrayForEach(r, results)
    {
        cJSON *id = cJSON_GetObjectItem(r, "id");
        if (!id)
            continue;
        const cJSON *at = cJSON_GetObjectItem(r, "attempt");
        int attempt = cJSON_IsNumber(at) ? (int)agent_json_long(at) : 0;
        char *key = row_key(id, attempt);
        if (!key)
            continue;
        int seen = bsearch(&key, keys, nsorted, sizeof *keys, cmp_key) != NULL;
        for (size_t k = nsorted; k < nk && !seen; k++) /* rare: rows after the sorted part */
            seen = strcmp(keys[k], key) == 0;
        if (seen) {
            free(key);
            continue;
        }
        keys[nk++] = key;
        if (nk - nsorted > 64) { /* keep the unsorted tail short */
            qsort(keys, nk, sizeof *keys, cmp_key);
            nsorted = nk;
        }
        const char *ans = cJSON_GetStringValue(cJSON_GetObjectItem(r, "answer"));
        const char *q = cJSON_GetStringValue(cJSON_GetObjectItem(r, "problem_statement"));
        st.rows[st.n++] =
            (jrow){id, attempt, q ? q : "", ans ? ans : "", cJSON_GetObjectItem(r, "ground_truth")};
    }
    if (log)
        fprintf(log,
                "lis batch judge: %zu of %zu episodes to judge with %s "
                "(%zu judged already or repeated)\n",
                st.n, nres, judge->model ? judge->model : "?", nres - st.n);
    if (st.n == 0) {
        ret = 0;
        goto out;
    }
    st.out_fd = open(jpath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    st.out = st.out_fd >= 0 ? fdopen(st.out_fd, "a") : NULL;
    if (!st.out) {
        lis_fail_errno(err, "cannot open %s", jpath);
        if (st.out_fd >= 0)
            close(st.out_fd);
        goto out;
    }
    if (!nl)
        fputc('\n', st.out); /* a torn last line stays its own (ignored) line */
    int nt = concurrency < 1 ? 1 : concurrency > 64 ? 64 : concurrency;
    if ((size_t)nt > st.n)
        nt = (int)st.n;
    pthread_t th[64];
    int started = 0;
    for (int i = 0; i < nt; i++)
        if (pthread_create(&th[started], NULL, judge_thread, &st) == 0)
            started++;
    if (!started)
        judge_thread(&st);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    fclose(st.out);
    if (log)
        fprintf(log, "lis batch judge: %zu judged, %zu failed\n", st.done, st.failed);
    if (st.failed)
        lis_fail(err, EIO, "%zu of %zu episodes could not be judged (run again to retry them): %s",
                 st.failed, st.n, st.first_err);
    else
        ret = 0;
out:
    for (size_t k = 0; keys && keys[k]; k++)
        free(keys[k]);
    free(keys);
    free(st.rows);
    pthread_mutex_destroy(&st.mu);
    cJSON_Delete(results);
    cJSON_Delete(judged);
    return ret;
}
