/* llm_tokens.c - the token ids and logprobs of an OpenAI-compatible reply
 * (vLLM's return_token_ids and logprobs, agent-lightning's
 * response_token_ids), passed through as the endpoint sent them: checked
 * (integers, numbers), bounded, never made up. */
#include "agent_internal.h"

#include <stdio.h>

#define MAX_TOKEN_IDS (1 << 20) /* per list: a reply over it keeps no ids */

/* a is a list of token ids (integers from 0 to 2^31-1), at most
 * MAX_TOKEN_IDS of them; else 0 with why. */
static int id_list_ok(const cJSON *a, const char *what, char *why, size_t wl)
{
    if (!cJSON_IsArray(a))
        return snprintf(why, wl, "%s is not a list of token ids", what), 0;
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a)
    {
        if (i >= MAX_TOKEN_IDS)
            return snprintf(why, wl, "%s holds more than %d token ids", what, MAX_TOKEN_IDS), 0;
        double v = cJSON_IsNumber(x) ? x->valuedouble : -1;
        if (!(v >= 0 && v <= 2147483647.0 && v == (double)(long)v))
            return snprintf(why, wl, "%s[%d] is not an integer token id", what, i), 0;
        i++;
    }
    return 1;
}

/* choices[0].logprobs.content[].logprob as a list of numbers; NULL with why
 * when malformed, NULL with why empty when the reply has none. */
static cJSON *logprob_list(const cJSON *ch, char *why, size_t wl)
{
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(ch, "logprobs");
    if (!lp || cJSON_IsNull(lp))
        return NULL;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(lp, "content");
    if (!content || cJSON_IsNull(content)) /* {"content": null, "refusal": ...} */
        return NULL;
    if (!cJSON_IsArray(content)) {
        snprintf(why, wl, "choices[0].logprobs.content is not a list");
        return NULL;
    }
    cJSON *out = cJSON_CreateArray();
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, content)
    {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, "logprob");
        if (i >= MAX_TOKEN_IDS || !cJSON_IsNumber(v)) {
            snprintf(why, wl,
                     i >= MAX_TOKEN_IDS ? "choices[0].logprobs.content holds more than %d entries"
                                        : "choices[0].logprobs.content[%d].logprob is not a number",
                     i >= MAX_TOKEN_IDS ? MAX_TOKEN_IDS : i);
            cJSON_Delete(out);
            return NULL;
        }
        cJSON_AddItemToArray(out, cJSON_CreateNumber(v->valuedouble));
        i++;
    }
    return out;
}

/* The reply's token ids and logprobs into out->tokens (detached from the
 * parsed reply j, whose choice is ch), or why there are none. The
 * completion's ids: vLLM's choices[0].token_ids, agent-lightning's
 * response_token_ids (in the choice, or top-level per choice). */
void llm_take_tokens(cJSON *j, cJSON *ch, llm_reply *out)
{
    char *why = out->tokens_why;
    size_t wl = sizeof out->tokens_why;
    /* where each list is: its name in messages, its parent, its key there
     * (NULL: the parent's first item) */
    const char *names[2] = {"prompt_token_ids", "choices[0].token_ids"};
    cJSON *from[2] = {j, ch};
    const char *keys[2] = {"prompt_token_ids", "token_ids"};
    if (!cJSON_GetObjectItemCaseSensitive(ch, "token_ids")) {
        cJSON *top = cJSON_GetObjectItemCaseSensitive(j, "response_token_ids");
        if (cJSON_GetObjectItemCaseSensitive(ch, "response_token_ids"))
            names[1] = "choices[0].response_token_ids", keys[1] = "response_token_ids";
        else if (cJSON_IsArray(top) && cJSON_IsArray(cJSON_GetArrayItem(top, 0)))
            names[1] = "response_token_ids[0]", from[1] = top, keys[1] = NULL;
        else if (top)
            names[1] = "response_token_ids", from[1] = j, keys[1] = "response_token_ids";
    }
    cJSON *ids[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        cJSON *a = keys[i] ? cJSON_GetObjectItemCaseSensitive(from[i], keys[i])
                           : cJSON_GetArrayItem(from[i], 0);
        if (!a || cJSON_IsNull(a))
            continue;
        if (!id_list_ok(a, names[i], why, wl))
            return;
        ids[i] = a;
    }
    if (!ids[0] && !ids[1]) {
        snprintf(why, wl, "the endpoint sent no token ids");
        return;
    }
    cJSON *lps = logprob_list(ch, why, wl);
    if (!lps && why[0])
        return;
    cJSON *t = cJSON_CreateObject();
    const char *outk[2] = {"prompt_ids", "ids"};
    for (int i = 0; i < 2; i++)
        if (ids[i])
            cJSON_AddItemToObject(t, outk[i], cJSON_DetachItemViaPointer(from[i], ids[i]));
    if (lps)
        cJSON_AddItemToObject(t, "logprobs", lps);
    out->tokens = t;
}
