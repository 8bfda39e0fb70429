/* monitorlib.h - what the monitor suites share (test_monitor.c,
 * test_monitor_exec.c): the probe bound at /mprobe, monitored sandboxes, one
 * step's effects as JSON and the lookups the suites assert on. */
#ifndef LIS_TEST_MONITORLIB_H
#define LIS_TEST_MONITORLIB_H

#include "lis_monitor.h"
#include "testlib.h"

#include <cjson/cJSON.h>

/* tests/monitor_probe, built static, bound read-only at /mprobe */
const char *probe(void);
/* A monitored sandbox; rules: its proxy's (--net proxy only). */
lis_sandbox *msb_rules(lis_ctx *ctx, lis_net_mode net, const lis_net_rules *rules,
                       lis_limits limits);
lis_sandbox *msb_limits(lis_ctx *ctx, const lis_policy *pol, lis_net_mode net, lis_limits limits);
lis_sandbox *msb(lis_ctx *ctx, const lis_policy *pol, lis_net_mode net);
lis_monitor *mon(lis_monitor_hub *hub, lis_sandbox *sb, const lis_policy *pol);

/* One monitored sandbox (no policy, --net none) on a hub of its own: the
 * set-up of most tests here. */
typedef struct mfix {
    lis_ctx *ctx;
    lis_monitor_hub *hub;
    lis_sandbox *sb;
    lis_monitor *m;
} mfix;

mfix mfix_open(void);
void mfix_close(mfix *f);
/* A monitored sandbox under a policy given as YAML (*pol: the caller frees it). */
mfix mfix_policy(const char *yaml, lis_policy **pol);
/* One step: sh -c cmd between begin and end; its effects as JSON. */
cJSON *step(lis_monitor *m, lis_sandbox *sb, const char *cmd, lis_result *out);
const char *str(const cJSON *o, const char *k);
double num(const cJSON *o, const char *k, double dflt);
/* The file change of path in fx, NULL when none. */
const cJSON *file_at(const cJSON *fx, const char *path);
void expect_file(const cJSON *fx, const char *path, const char *change);
/* The process whose argv joined by spaces is argv. */
const cJSON *proc_argv(const cJSON *fx, const char *argv);
const cJSON *expect_proc(const cJSON *fx, const char *argv, const char *state);
size_t count(const cJSON *fx, const char *key);
/* The processes of fx denied by rule. */
size_t count_denied(const cJSON *fx, const char *rule);

#endif
