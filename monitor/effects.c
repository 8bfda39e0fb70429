/* effects.c - a step's effects: its capability use (the paper's three
 * meta-capabilities, from what happened and the tool call: the rules are in
 * docs/monitoring.md) and the JSON object of trajectory.json and the native
 * exec reply. */
#include "monitor.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* programs that fetch from outside (package managers, downloaders) */
static const char *const external_progs[] = {"pip",   "pip3", "apt",   "apt-get", "dpkg",  "npm",
                                             "npx",   "yarn", "pnpm",  "conda",   "mamba", "uv",
                                             "cargo", "gem",  "go",    "curl",    "wget",  "git",
                                             "ssh",   "scp",  "rsync", "ping",    NULL};
/* programs that read, write or search files */
static const char *const file_progs[] = {"cat",       "ls",       "find",    "grep",   "egrep",
                                         "fgrep",     "rg",       "head",    "tail",   "sed",
                                         "awk",       "gawk",     "wc",      "cp",     "mv",
                                         "rm",        "mkdir",    "rmdir",   "touch",  "diff",
                                         "tree",      "stat",     "file",    "less",   "more",
                                         "chmod",     "chown",    "ln",      "du",     "tar",
                                         "unzip",     "zip",      "gzip",    "gunzip", "sort",
                                         "uniq",      "cut",      "tee",     "xargs",  "readlink",
                                         "realpath",  "basename", "dirname", "cmp",    "md5sum",
                                         "sha256sum", "nl",       "tr",      "patch",  NULL};
/* shells: they count through what they run */
static const char *const shells[] = {"sh", "bash", "dash", "ash", "busybox", "env", NULL};

static int in(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (!strcmp(*list, s))
            return 1;
    return 0;
}

static void why(lis_effects *e, int k, const char *fmt, const char *arg)
{
    if (!e->cap_why[k][0])
        snprintf(e->cap_why[k], sizeof e->cap_why[k], fmt, arg);
}

/* The program's name: its path's, or argv[0]'s for a multi-call binary
 * (busybox's applets run as /bin/busybox or /proc/self/exe, named by argv[0]). */
static const char *prog_name(const mon_proc *p)
{
    const char *base = strrchr(p->path, '/');
    base = base ? base + 1 : p->path;
    const char *a0 = p->argc ? p->argv : "", *b0 = strrchr(a0, '/');
    b0 = b0 ? b0 + 1 : a0;
    if (*b0 &&
        (!strcmp(base, "busybox") || (!strncmp(p->path, "/proc/", 6) && !strcmp(base, "exe"))))
        return b0;
    return base;
}

void mon_classify(lis_effects *e)
{
    unsigned c = 0;
    if (e->net_total || e->conn_total) {
        c |= LIS_CAP_EXTERNAL;
        why(e, 0, "%s", e->net_total ? "requests through the proxy" : "connection attempts");
    }
    for (size_t i = 0; i < e->nprocs; i++) {
        const mon_proc *p = &e->procs[i];
        if (p->step != e->step || p->denied[0])
            continue;
        const char *base = prog_name(p);
        const char *a1 = p->argc > 1 ? p->argv + strlen(p->argv) + 1 : "";
        const char *a2 = p->argc > 2 ? a1 + strlen(a1) + 1 : "";
        int pip_module = !strncmp(base, "python", 6) && !strcmp(a1, "-m") &&
                         (!strcmp(a2, "pip") || !strcmp(a2, "ensurepip"));
        if (in(external_progs, base) || pip_module) {
            c |= LIS_CAP_EXTERNAL;
            why(e, 0, "ran %s", base);
        } else if (in(file_progs, base)) {
            c |= LIS_CAP_FILE;
            why(e, 1, "ran %s", base);
        } else if (!in(shells, base)) {
            c |= LIS_CAP_COMPUTE;
            why(e, 2, "ran %s", base);
        }
    }
    for (size_t i = 0; i < e->nfiles; i++)
        if (!e->files[i].between) {
            c |= LIS_CAP_FILE;
            why(e, 1, "%s files", "changed");
            break;
        }
    /* the editor tool reads, writes and searches files by itself (no exec) */
    if (e->tool && (strstr(e->tool, "editor") || strstr(e->tool, "file"))) {
        c |= LIS_CAP_FILE;
        why(e, 1, "the %s tool", e->tool);
    }
    e->capability = c;
}

void lis_effects_summarize(const lis_effects *e, lis_effects_summary *out)
{
    memset(out, 0, sizeof *out);
    out->step = e->step;
    out->capability = e->capability;
    for (size_t i = 0; i < e->nprocs; i++)
        out->processes += e->procs[i].step == e->step;
    out->processes += e->procs_total - e->nprocs;
    out->files = e->files_total;
    out->requests = e->net_total;
    out->refused_connects = e->conn_total;
    out->alerts = e->alert_total;
    out->bytes_written = e->bytes_written;
    for (size_t i = 0; i < e->nnet; i++)
        out->bytes_fetched += e->net[i].down;
    for (size_t i = 0; i < e->nalerts; i++)
        if (e->alerts[i].action > out->action) {
            out->action = e->alerts[i].action;
            snprintf(out->action_rule, sizeof out->action_rule, "%s", e->alerts[i].rule);
        }
}

static cJSON *proc_json(const lis_effects *e, const mon_proc *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "pid", p->pid);
    cJSON_AddNumberToObject(o, "ppid", p->ppid);
    cJSON_AddStringToObject(o, "path", p->path);
    cJSON *argv = cJSON_AddArrayToObject(o, "argv");
    const char *a = p->argv;
    for (size_t i = 0; i < p->argc; i++, a += strlen(a) + 1)
        cJSON_AddItemToArray(argv, cJSON_CreateString(a));
    if (p->argv_cut)
        cJSON_AddNumberToObject(o, "argc", (double)p->argc_total);
    cJSON_AddBoolToObject(o, "cut", p->argv_cut);
    cJSON_AddStringToObject(o, "via", p->via);
    if (p->unread[0])
        cJSON_AddStringToObject(o, "unreadable", p->unread);
    cJSON_AddNumberToObject(o, "t", p->t_exec - e->t0);
    int running = p->state == MP_RUNNING;
    cJSON_AddStringToObject(o, "state", p->denied[0] ? "denied" : mon_pstate_name(p->state));
    if (p->denied[0])
        cJSON_AddStringToObject(o, "denied_by", p->denied);
    if (p->decoy) /* another file ran than the exec showed at its check */
        cJSON_AddStringToObject(o, "decoy", p->decoy);
    if (p->killed_after)
        cJSON_AddBoolToObject(o, "killed_after_exec", 1);
    if (p->state == MP_EXITED && !p->denied[0])
        cJSON_AddNumberToObject(o, "exit_code", p->exit_code);
    if (p->state == MP_KILLED) {
        if (p->signal)
            cJSON_AddNumberToObject(o, "signal", p->signal);
        else
            cJSON_AddNullToObject(o, "signal");
    }
    if (p->cpu >= 0)
        cJSON_AddNumberToObject(o, "cpu_seconds", p->cpu);
    if (running)
        cJSON_AddBoolToObject(o, "left_running", 1);
    if (p->step != e->step)
        cJSON_AddNumberToObject(o, "from_step", p->step);
    else if (p->between)
        cJSON_AddBoolToObject(o, "between_steps", 1);
    return o;
}

static cJSON *file_json(const mon_file *f)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "change", mon_fchange_name(f->change));
    cJSON_AddStringToObject(o, "path", f->path);
    if (f->from)
        cJSON_AddStringToObject(o, f->change == MF_LINKED ? "link_of" : "from", f->from);
    char kind[2] = {f->kind, 0};
    cJSON_AddStringToObject(o, "kind", kind);
    if (f->change != MF_DELETED) {
        cJSON_AddNumberToObject(o, "size", (double)f->size);
        char mode[8];
        snprintf(mode, sizeof mode, "%04o", f->mode);
        cJSON_AddStringToObject(o, "mode", mode);
    }
    cJSON_AddNumberToObject(o, "size_delta", (double)f->size_delta);
    if (f->binary)
        cJSON_AddBoolToObject(o, "binary", 1); /* not UTF-8 text: no diff */
    if (f->diff)
        cJSON_AddStringToObject(o, "diff", f->diff);
    else if (f->diff_none)
        cJSON_AddStringToObject(o, "no_diff", f->diff_none);
    if (f->diff_cut)
        cJSON_AddBoolToObject(o, "diff_cut", 1);
    if (f->removed)
        cJSON_AddBoolToObject(o, "removed", 1);
    if (f->between)
        cJSON_AddBoolToObject(o, "between_steps", 1);
    return o;
}

cJSON *lis_effects_json(const lis_effects *e)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "step", e->step);
    cJSON *files = cJSON_AddArrayToObject(o, "files");
    for (size_t i = 0; i < e->nfiles; i++)
        cJSON_AddItemToArray(files, file_json(&e->files[i]));
    cJSON *procs = cJSON_AddArrayToObject(o, "processes");
    for (size_t i = 0; i < e->nprocs; i++)
        cJSON_AddItemToArray(procs, proc_json(e, &e->procs[i]));
    cJSON *net = cJSON_AddObjectToObject(o, "network");
    cJSON *reqs = cJSON_AddArrayToObject(net, "requests");
    for (size_t i = 0; i < e->nnet; i++) {
        const mon_net *n = &e->net[i];
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "host", n->host);
        cJSON_AddNumberToObject(r, "port", n->port);
        cJSON_AddStringToObject(r, "method", n->method);
        cJSON_AddStringToObject(r, "address", n->addr);
        cJSON_AddBoolToObject(r, "dns", n->resolved);
        cJSON_AddBoolToObject(r, "allowed", n->allowed);
        if (n->status)
            cJSON_AddNumberToObject(r, "proxy_status", n->status);
        if (n->rule[0])
            cJSON_AddStringToObject(r, "reason", n->rule);
        if (n->alert[0])
            cJSON_AddStringToObject(r, "rule", n->alert);
        cJSON_AddNumberToObject(r, "bytes_up", (double)n->up);
        cJSON_AddNumberToObject(r, "bytes_down", (double)n->down);
        if (n->between)
            cJSON_AddBoolToObject(r, "between_steps", 1);
        cJSON_AddItemToArray(reqs, r);
    }
    cJSON_AddNumberToObject(net, "refused_connects", (double)e->conn_total);
    cJSON_AddNumberToObject(net, "unrouted", (double)e->unrouted);
    cJSON *cl = cJSON_AddArrayToObject(net, "refused");
    for (size_t i = 0; i < e->nconns; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "address", e->conns[i].addr);
        cJSON_AddNumberToObject(c, "port", e->conns[i].port);
        if (e->conns[i].denied[0])
            cJSON_AddStringToObject(c, "denied_by", e->conns[i].denied);
        cJSON_AddItemToArray(cl, c);
    }
    cJSON_AddNumberToObject(net, "local_connects", (double)e->conn_local);
    cJSON *res = cJSON_AddObjectToObject(o, "resources");
    cJSON_AddNumberToObject(res, "wall_seconds", e->wall);
    if (e->have_stats) {
        cJSON_AddNumberToObject(res, "cpu_seconds", e->cpu);
        cJSON_AddNumberToObject(res, "processes_now", (double)e->nprocs_now);
        cJSON_AddNumberToObject(res, "disk_delta", (double)(int64_t)e->disk_delta);
    }
    if (e->mem_peak)
        cJSON_AddNumberToObject(res, "memory_peak", (double)e->mem_peak);
    lis_effects_summary sum;
    lis_effects_summarize(e, &sum);
    cJSON_AddNumberToObject(res, "processes", (double)sum.processes);
    cJSON_AddNumberToObject(res, "bytes_written", (double)e->bytes_written);
    cJSON_AddNumberToObject(res, "bytes_fetched", (double)sum.bytes_fetched);
    cJSON *cap = cJSON_AddObjectToObject(o, "capability");
    static const char *const names[3] = {"external", "file", "computation"};
    for (int k = 0; k < 3; k++) {
        cJSON_AddBoolToObject(cap, names[k], (e->capability >> k) & 1);
        if (e->cap_why[k][0]) {
            char key[32];
            snprintf(key, sizeof key, "%s_why", names[k]);
            cJSON_AddStringToObject(cap, key, e->cap_why[k]);
        }
    }
    cJSON *al = cJSON_AddArrayToObject(o, "alerts");
    for (size_t i = 0; i < e->nalerts; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "rule", e->alerts[i].rule);
        cJSON_AddStringToObject(a, "action", lis_policy_action_name(e->alerts[i].action));
        cJSON_AddStringToObject(a, "what", e->alerts[i].what);
        cJSON_AddItemToArray(al, a);
    }
    if (e->scan_cut) {
        cJSON_AddBoolToObject(o, "truncated", 1);
        cJSON_AddStringToObject(o, "truncated_why", e->scan_why);
    }
    cJSON *cut = cJSON_AddObjectToObject(o, "cut");
    cJSON_AddNumberToObject(cut, "processes_not_listed", (double)(e->procs_total - e->nprocs));
    cJSON_AddNumberToObject(cut, "files_not_listed", (double)(e->files_total - e->nfiles));
    cJSON_AddNumberToObject(cut, "requests_not_listed", (double)(e->net_total - e->nnet));
    cJSON_AddNumberToObject(cut, "refused_not_listed", (double)(e->conn_total - e->nconns));
    cJSON_AddNumberToObject(cut, "alerts_not_listed", (double)(e->alert_total - e->nalerts));
    cJSON_AddBoolToObject(cut, "layer_scan_cut", e->scan_cut);
    if (e->scan_cut) /* the files listed are not all: what was left and why */
        cJSON_AddStringToObject(cut, "layer_scan_why", e->scan_why);
    cJSON_AddBoolToObject(cut, "diffs_cut", e->diff_cut);
    cJSON_AddNumberToObject(cut, "exec_retries", (double)e->exec_retries);
    cJSON_AddNumberToObject(cut, "forks_without_exec_exited", (double)e->unknown_exits);
    return o;
}

void lis_effects_free(lis_effects *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->nprocs; i++) {
        free(e->procs[i].path);
        free(e->procs[i].decoy);
        free(e->procs[i].argv);
    }
    free(e->procs);
    for (size_t i = 0; i < e->nfiles; i++)
        mon_file_release(&e->files[i]);
    free(e->files);
    free(e->net);
    free(e->conns);
    free(e->alerts);
    free(e->tool);
    free(e->command);
    free(e);
}
