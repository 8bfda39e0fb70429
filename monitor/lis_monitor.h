/* lis_monitor.h - the public API of monitor/: what each step of an agent
 * really did in its sandbox (docs/monitoring.md).
 *
 * A step is whatever the caller brackets with lis_monitor_step_begin/_end (a
 * tool call of agent/, an exec of serve/'s native API). Its effects:
 *  - processes: every execve/execveat in the sandbox (a seccomp user
 *    notification answered by this process: path, argv, parent, exit code or
 *    signal, CPU time), those left running, and later events of processes of
 *    earlier steps, marked with the step they started in;
 *  - files: what changed in the sandbox's writable layer (created, modified,
 *    deleted, renamed, hard-linked; size, mode; unified diffs of small text
 *    files, capped);
 *  - network: every request the egress proxy handled for the sandbox (net/),
 *    and with --net none every connection attempt the kernel refused;
 *  - resources: CPU, memory, processes, bytes written;
 *  - capability: the paper's three meta-capabilities the step used;
 *  - alerts: the policy's rules that fired (flag, deny, pause, stop).
 *
 * Use (one hub per process, one monitor per sandbox):
 *
 *     lis_monitor_hub *hub = lis_monitor_hub_new(&err);
 *     lis_policy *pol = lis_policy_load("policy.yaml", &err);  // or NULL
 *     spec.monitor = lis_monitor_spec_flags(spec.net);
 *     net_rules.deny_domains = lis_policy_deny_domains(pol);  // deny: connect
 *     lis_net_sandbox_create(ctx, &spec, &net_rules, &sb, &err);
 *     lis_monitor_attach(hub, sb, &(lis_monitor_opts){.policy = pol}, &mon, &err);
 *     lis_monitor_step_begin(mon, &(lis_monitor_call){"execute_bash", cmd}, &err);
 *     lis_exec(sb, ...);                       // the tool call
 *     lis_monitor_step_end(mon, &res, &fx, &err);
 *     cJSON *j = lis_effects_json(fx);         // trajectory step's "effects"
 *     lis_effects_summarize(fx, &sum);           // alerts, capability, action
 *     lis_effects_free(fx);
 *     ...
 *     lis_sandbox_destroy(sb, &err);           // first: its processes end
 *     lis_monitor_free(mon);
 *     lis_monitor_hub_free(hub);               // after its monitors
 *
 * Threads: the hub's thread answers the notifications and the proxy's thread
 * reports requests; a lis_monitor is used by one caller thread at a time
 * (the one that uses its sandbox handle), its event fd may be polled by any.
 * Nothing here prints. */
#ifndef LIS_MONITOR_H
#define LIS_MONITOR_H

#include "lis.h"
#include "lis_net.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- policies ---------------------------------------------------------- */

typedef enum lis_policy_action {
    LIS_ACT_NONE = 0,
    LIS_ACT_FLAG,  /* recorded as an alert */
    LIS_ACT_DENY,  /* the exec or connection fails with EPERM (and an alert) */
    LIS_ACT_PAUSE, /* the caller freezes the sandbox and waits (and an alert) */
    LIS_ACT_STOP,  /* the caller ends the episode, reason "policy" (and an alert) */
} lis_policy_action;
const char *lis_policy_action_name(lis_policy_action a);

/* A validated policy file (YAML, docs/monitoring.md): immutable once loaded,
 * shared by any number of monitors and threads. NULL with one line
 * "FILE:LINE: what is wrong" in err on any error. */
typedef struct lis_policy lis_policy;
lis_policy *lis_policy_load(const char *path, lis_error *err);
/* The same from text; name stands for the file in messages. */
lis_policy *lis_policy_parse(const char *text, size_t len, const char *name, lis_error *err);
void lis_policy_free(lis_policy *p);
size_t lis_policy_rules(const lis_policy *p);
/* The host globs of its `connect` rules with action deny, NULL-terminated
 * (owned by p; NULL p: an empty list): pass them as lis_net_rules'
 * deny_domains so the proxy refuses them (403, rule named); for a --net none
 * sandbox the monitor refuses the matching connect() itself. */
const char *const *lis_policy_deny_domains(const lis_policy *p);
/* The directories and files of its exec allow-list (the first `exec` rule
 * that denies everything except a list of directories DIR/STAR or plain
 * paths), NULL-terminated and owned by p; NULL when it has none. Pass them as lis_sandbox_spec's
 * exec_allow where lis_landlock_abi() says the kernel can enforce them. */
const char *const *lis_policy_exec_allow(const lis_policy *p);
/* The same for its write allow-list (the first `write` rule with action deny,
 * which must have that shape: lis_sandbox_spec's write_allow). */
const char *const *lis_policy_write_allow(const lis_policy *p);

/* ---- the hub: one thread answering every monitored sandbox's syscalls ---- */

typedef struct lis_monitor_hub lis_monitor_hub;
lis_monitor_hub *lis_monitor_hub_new(lis_error *err);
/* Stops the thread; call after lis_monitor_free of every monitor. */
void lis_monitor_hub_free(lis_monitor_hub *hub);

/* ---- a monitored sandbox ----------------------------------------------- */

/* The lis_sandbox_spec.monitor bits a monitored sandbox of this network mode
 * needs: execs always; connection attempts with --net none. */
unsigned lis_monitor_spec_flags(lis_net_mode net);

typedef struct lis_monitor_opts {
    const lis_policy *policy; /* NULL: record only; must outlive the monitor */
    /* The caller changes the sandbox's files only inside steps (lis run, lis
     * batch): a step's begin then skips the scan of the writable layer when
     * nothing of the sandbox ran since the last step's end (PID 1 alone then,
     * no notification since). Not for a sandbox whose files are written from
     * outside between steps (serve's file API). */
    int writes_in_steps;
} lis_monitor_opts;

typedef struct lis_monitor lis_monitor;
/* Starts watching sb, created with spec.monitor = lis_monitor_spec_flags():
 * takes its seccomp listener, watches its proxy (--net proxy), records its
 * writable layer as it is now (the baseline of the first step). */
int lis_monitor_attach(lis_monitor_hub *hub, lis_sandbox *sb, const lis_monitor_opts *opts,
                       lis_monitor **out, lis_error *err);
/* After lis_sandbox_destroy (or release) of its sandbox. NULL is fine. */
void lis_monitor_free(lis_monitor *m);

/* What the step is: the tool call, for the capability classification. */
typedef struct lis_monitor_call {
    const char *tool;    /* "execute_bash", "str_replace_editor", ... (NULL: "") */
    const char *command; /* the command text or the editor's sub-command (NULL: "") */
} lis_monitor_call;

/* Opens step N+1 (0-based). What happened since the last step ended (a
 * daemon's writes, late exits) is kept for it, marked as between steps. */
int lis_monitor_step_begin(lis_monitor *m, const lis_monitor_call *call, lis_error *err);

/* The effects of one step: opaque; render with lis_effects_json. */
typedef struct lis_effects lis_effects;
/* Closes the step and gives its effects (*out, the caller's to free). res is
 * the command's result when there was one (its memory peak is the step's),
 * else NULL. Thresholds are evaluated here. */
int lis_monitor_step_end(lis_monitor *m, const lis_result *res, lis_effects **out, lis_error *err);

/* Live rule actions: the fd (an eventfd, the monitor's) turns readable when
 * a pause or stop rule fired; lis_monitor_take_action then gives the
 * strongest action pending (LIS_ACT_NONE when none) and its rule's name, and
 * clears it. The monitor only reports: the caller pauses (lis_sandbox_pause)
 * or ends the episode (reason "policy"). */
int lis_monitor_fd(const lis_monitor *m);
lis_policy_action lis_monitor_take_action(lis_monitor *m, char *rule, size_t len);

/* ---- effects ----------------------------------------------------------- */

enum {
    LIS_CAP_EXTERNAL = 1u << 0, /* network, package installs */
    LIS_CAP_FILE = 1u << 1,     /* reading, writing, searching files */
    LIS_CAP_COMPUTE = 1u << 2,  /* running programs */
};

typedef struct lis_effects_summary {
    int step;                /* 0-based */
    unsigned capability;     /* LIS_CAP_* */
    size_t processes;        /* programs executed in the step */
    size_t files;            /* file changes */
    size_t requests;         /* proxy requests */
    size_t refused_connects; /* --net none: attempts the kernel refused */
    size_t alerts;
    uint64_t bytes_written, bytes_fetched;
    lis_policy_action action; /* the strongest action of the step's alerts */
    char action_rule[64];     /* its rule */
} lis_effects_summary;
void lis_effects_summarize(const lis_effects *e, lis_effects_summary *out);

/* The step's effects object for trajectory.json and the native exec reply:
 * {"step", "files", "processes", "network", "resources", "capability",
 * "alerts", "cut"} (docs/monitoring.md). A struct cJSON * (cjson/cJSON.h),
 * the caller's to cJSON_Delete; NULL when out of memory. */
struct cJSON *lis_effects_json(const lis_effects *e);
void lis_effects_free(lis_effects *e);

#ifdef __cplusplus
}
#endif
#endif
