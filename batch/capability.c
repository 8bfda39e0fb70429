/* capability.c - the paper's three meta-capabilities (docs/monitoring.md),
 * summed over a run's rows: how many steps used external resources, file
 * management and computation, and the alerts, for the whole task and by the
 * rows' domain (results.json's "capability"; `lis batch report --by domain`
 * prints it). */
#include "results.h"

#include <stdio.h>
#include <string.h>

static const char *const KEYS[] = {"external", "file", "computation"};

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) && v->valuedouble == v->valuedouble ? v->valuedouble : 0;
}

static void bump(cJSON *o, const char *k, double by)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (v)
        cJSON_SetNumberValue(v, v->valuedouble + by);
    else
        cJSON_AddNumberToObject(o, k, by);
}

/* one group's sums: episodes, steps, *_steps, alerts */
static void add_to(cJSON *g, const cJSON *cap, const cJSON *row)
{
    bump(g, "episodes", 1);
    bump(g, "steps", num(cap, "steps"));
    for (int i = 0; i < 3; i++) {
        char k[32];
        snprintf(k, sizeof k, "%s_steps", KEYS[i]);
        bump(g, k, num(cap, KEYS[i]));
    }
    bump(g, "alerts", num(row, "alerts"));
}

cJSON *bcap_new(void) { return cJSON_CreateObject(); }

void bcap_add(cJSON *acc, const cJSON *row)
{
    const cJSON *cap = cJSON_GetObjectItemCaseSensitive(row, "capability");
    if (!acc || !cJSON_IsObject(cap))
        return; /* a row without effects (--no-effects, --mode llm) */
    add_to(acc, cap, row);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(row, "domain");
    const char *dom = cJSON_IsString(d) && *d->valuestring ? d->valuestring : "(none)";
    cJSON *by = cJSON_GetObjectItemCaseSensitive(acc, "by_domain");
    if (!by)
        by = cJSON_AddObjectToObject(acc, "by_domain");
    cJSON *g = cJSON_GetObjectItemCaseSensitive(by, dom);
    if (!g)
        g = cJSON_AddObjectToObject(by, dom);
    if (g)
        add_to(g, cap, row);
}

/* the shares of the steps each capability was used in */
static void shares(cJSON *g)
{
    double steps = num(g, "steps");
    for (int i = 0; i < 3; i++) {
        char k[32];
        snprintf(k, sizeof k, "%s_steps", KEYS[i]);
        cJSON_AddNumberToObject(g, KEYS[i], steps > 0 ? num(g, k) / steps : 0);
    }
}

void bcap_finish(cJSON *results, cJSON *acc)
{
    if (!acc || !cJSON_GetObjectItemCaseSensitive(acc, "episodes")) {
        cJSON_Delete(acc);
        return;
    }
    shares(acc);
    cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(acc, "by_domain")) shares(g);
    cJSON_AddItemToObject(results, "capability", acc);
}

static void line(FILE *f, const char *name, const cJSON *g)
{
    fprintf(f, "  %-22.22s %8.0f %7.0f %9.2f %6.2f %12.2f %7.0f\n", name, num(g, "episodes"),
            num(g, "steps"), num(g, "external"), num(g, "file"), num(g, "computation"),
            num(g, "alerts"));
}

void bcap_print(FILE *f, const cJSON *results)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(results, "capability");
    if (!cJSON_IsObject(c)) {
        fprintf(f,
                "Capability use: none recorded (the run had no effects: it ran without --effects, "
                "or with --mode llm)\n");
        return;
    }
    fprintf(f, "Capability use by domain (the share of steps that used each; "
               "docs/monitoring.md):\n");
    fprintf(f, "  %-22s %8s %7s %9s %6s %12s %7s\n", "domain", "episodes", "steps", "external",
            "file", "computation", "alerts");
    const cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(c, "by_domain")) line(f, g->string, g);
    line(f, "all", c);
}
