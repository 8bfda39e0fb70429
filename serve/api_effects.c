/* api_effects.c - the native API's effects (docs/api.md, docs/monitoring.md):
 * a sandbox created through /lis/v1/ is watched by monitor/ unless its body
 * says "effects": false, with its own "policy" (YAML text) if it has one; an
 * exec whose body says "effects": true is one step of its monitor, and its
 * exit event carries that step's effects. The Docker API's containers are
 * never watched (Docker clients see nothing new). One hub per server, made at
 * the first watched sandbox. */
#include "serve.h"

#include <stdio.h>
#include <string.h>

#define POLICY_TEXT_MAX (1u << 20) /* as a policy file (monitor/policy.c) */

int sv_effects_body(const cJSON *body, cJSON *cfg, char *msg, size_t mlen)
{
    const cJSON *fx = cJSON_GetObjectItemCaseSensitive(body, "effects");
    const cJSON *pol = cJSON_GetObjectItemCaseSensitive(body, "policy");
    if (fx && !cJSON_IsBool(fx) && !cJSON_IsNull(fx)) {
        snprintf(msg, mlen, "\"effects\" must be true or false");
        return -1;
    }
    int on = !cJSON_IsFalse(fx); /* on unless asked not to */
    if (pol && !cJSON_IsNull(pol)) {
        if (!cJSON_IsString(pol) || strlen(pol->valuestring) > POLICY_TEXT_MAX) {
            snprintf(msg, mlen,
                     "\"policy\" must be the text of a policy file (YAML, at most 1 MiB)");
            return -1;
        }
        if (!on) {
            snprintf(msg, mlen,
                     "a \"policy\" matches effects: it cannot go with \"effects\": false");
            return -1;
        }
        lis_error err = {0};
        lis_policy *p =
            lis_policy_parse(pol->valuestring, strlen(pol->valuestring), "policy", &err);
        if (!p) {
            snprintf(msg, mlen, "%s", err.msg);
            return -1;
        }
        lis_policy_free(p);
        cJSON_AddStringToObject(cfg, "LisPolicy", pol->valuestring);
    }
    cJSON_AddBoolToObject(cfg, "LisEffects", on);
    return 0;
}

int sv_effects_setup(sv_server *s, sv_container *c, const cJSON *cfg, unsigned *status, char *msg,
                     size_t mlen)
{
    const char *pol = sv_jstr(cfg, "LisPolicy");
    lis_error err = {0};
    c->effects = sv_jbool(cfg, "LisEffects");
    if (!c->effects)
        return 0;
    if (pol && !(c->policy = lis_policy_parse(pol, strlen(pol), "policy", &err))) {
        *status = 400;
        snprintf(msg, mlen, "%s", err.msg);
        return -1;
    }
    if (!s->hub && !(s->hub = lis_monitor_hub_new(&err))) {
        lis_policy_free(c->policy);
        c->policy = NULL;
        *status = 500;
        snprintf(msg, mlen, "starting the monitor: %s", err.msg);
        return -1;
    }
    return 0;
}

int sv_effects_begin(sv_container *c, const char *command, unsigned *status, char *msg, size_t mlen)
{
    *status = 409;
    if (!c->mon) { /* what the user did: a fork without effects, or a create */
        const char *parent = sv_jstr(c->config, "LisForkOf");
        if (parent)
            snprintf(msg, mlen,
                     "sandbox %s records no effects: it is a fork of %.12s made without them "
                     "(fork with \"effects\": true records them)",
                     c->id, parent);
        else
            snprintf(msg, mlen,
                     "sandbox %s records no effects: create it through /lis/v1/sandboxes without "
                     "\"effects\": false",
                     c->id);
        return -1;
    }
    if (c->fx_step_open) {
        snprintf(msg, mlen,
                 "sandbox %s: another exec is recording its effects; effects are the "
                 "sandbox's, one exec at a time",
                 c->id);
        return -1;
    }
    lis_monitor_call call = {"exec", command};
    lis_error err = {0};
    if (lis_monitor_step_begin(c->mon, &call, &err) < 0) {
        *status = 500;
        snprintf(msg, mlen, "recording effects: %s", err.msg);
        return -1;
    }
    c->fx_step_open = 1;
    return 0;
}

cJSON *sv_effects_end(sv_container *c, const lis_result *res)
{
    if (!c || !c->mon || !c->fx_step_open)
        return NULL;
    c->fx_step_open = 0;
    return sv_effects_close(c->mon, res);
}

cJSON *sv_effects_close(lis_monitor *mon, const lis_result *res)
{
    lis_effects *fx = NULL;
    lis_error err = {0};
    if (lis_monitor_step_end(mon, res, &fx, &err) < 0) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "error", err.msg);
        return e;
    }
    cJSON *j = lis_effects_json(fx);
    lis_effects_free(fx);
    return j;
}
