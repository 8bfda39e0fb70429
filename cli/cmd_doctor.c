/* cmd_doctor.c - `lis doctor [--json]`: the runtime's host checks (lis_doctor),
 * whether the agent's default image is in the store, and a bottom line: what
 * this host can do (sandboxes, lis run and lis batch, lis serve) and how the
 * sandboxes' resources are limited (cgroups or lis's fallback). */
#include "agent_cli.h" /* DEFAULT_IMAGE */
#include "cli_util.h"
#include "cmd.h"
#include "rootfs.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CHECKS 64

static const char *level_name(lis_check_level l)
{
    switch (l) {
    case LIS_CHECK_OK: return "OK";
    case LIS_CHECK_WARN: return "WARN";
    case LIS_CHECK_FAIL: return "FAIL";
    }
    return "?";
}

static const lis_check *find(const lis_check *c, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(c[i].name, name))
            return &c[i];
    return NULL;
}

/* The default image of lis run and lis batch, as one more check. */
static void image_check(lis_ctx *ctx, lis_check *k)
{
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "agent image");
    char dir[4096];
    lis_error err = {0};
    if (ctx &&
        lis_store_resolve(lis_ctx_data_dir(ctx), DEFAULT_IMAGE, dir, sizeof dir, &err) == 0) {
        k->level = LIS_CHECK_OK;
        snprintf(k->detail, sizeof k->detail, "%s is in the store: lis run starts at once",
                 DEFAULT_IMAGE);
        return;
    }
    /* not a problem of the host: the first lis run builds it */
    k->level = LIS_CHECK_OK;
    snprintf(k->detail, sizeof k->detail,
             "%s is not built yet: the first lis run or lis batch builds it (about 5 "
             "minutes), or this, ahead of time:",
             DEFAULT_IMAGE);
    char self[2048];
    ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sn > 0 ? sn : 0] = 0;
    snprintf(k->fix, sizeof k->fix, "%s image build", sn > 0 ? self : "lis");
}

/* One line: what this host can do, and how limits are enforced. */
static void bottom_line(const lis_check *c, size_t n, char *out, size_t len)
{
    const lis_check *fail = NULL;
    for (size_t i = 0; i < n && !fail; i++)
        if (c[i].level == LIS_CHECK_FAIL)
            fail = &c[i];
    if (fail) {
        snprintf(out, len,
                 "this host cannot run sandboxes yet (%s): fix the FAIL above; then lis run, lis "
                 "batch and lis serve work",
                 fail->name);
        return;
    }
    const lis_check *cg = find(c, n, "cgroup delegation"), *img = find(c, n, "agent image");
    int cgroups = cg && cg->level == LIS_CHECK_OK;
    int image = img && !img->fix[0];
    snprintf(out, len,
             "this host can run sandboxes, lis run and lis batch%s, and lis serve; limits: %s",
             image ? "" : " (the first builds the agent image)",
             cgroups ? "cgroup v2 (memory, pids, cpu per sandbox)"
                     : "lis's fallback (processes and memory by lis, CPU by priority; lis "
                       "doctor's cgroups lines say how to get cgroups)");
}

int cmd_doctor(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            puts("usage: lis doctor [--json]\n"
                 "Checks this host for lis (kernel, user namespaces, seccomp, uid maps, cgroups,\n"
                 "overlayfs, limits, the agent image), each problem with its exact fix, and\n"
                 "ends with what the host can do. Exit 1 when a check FAILs.");
            return 0;
        } else {
            cli_error("lis doctor: unknown option '%s' (usage: lis doctor [--json])", argv[i]);
            return 2;
        }
    }
    lis_error err = {0};
    lis_ctx *ctx = lis_ctx_new(NULL, &err);
    if (!ctx)
        cli_error("warning: %s", err.msg);
    lis_check checks[MAX_CHECKS + 1];
    size_t n = lis_doctor(ctx, checks, MAX_CHECKS);
    image_check(ctx, &checks[n++]);
    int worst = 0;
    char line[600];
    bottom_line(checks, n, line, sizeof line);
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    for (size_t i = 0; i < n; i++) {
        if ((int)checks[i].level > worst)
            worst = (int)checks[i].level;
        if (json) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "check", checks[i].name);
            cJSON_AddStringToObject(j, "level", level_name(checks[i].level));
            cJSON_AddStringToObject(j, "detail", checks[i].detail);
            cJSON_AddStringToObject(j, "fix", checks[i].fix);
            cJSON_AddItemToArray(arr, j);
        } else {
            printf("%-4s %-22s %s\n", level_name(checks[i].level), checks[i].name,
                   checks[i].detail);
            if (checks[i].fix[0] && (checks[i].level != LIS_CHECK_OK || i == n - 1))
                printf("     %-22s %s%s\n", "", checks[i].level ? "fix: " : "", checks[i].fix);
        }
    }
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "check", "bottom line");
        cJSON_AddStringToObject(j, "level", level_name((lis_check_level)worst));
        cJSON_AddStringToObject(j, "detail", line);
        cJSON_AddStringToObject(j, "fix", "");
        cJSON_AddItemToArray(arr, j);
        char *s = lis_json_print(arr, 1);
        puts(s ? s : "[]");
        free(s);
        cJSON_Delete(arr);
    } else {
        printf("\n%s\n", line);
    }
    lis_ctx_free(ctx);
    return worst == LIS_CHECK_FAIL ? 1 : 0;
}
