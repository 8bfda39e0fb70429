/* cgroups.h - the resource envelope of a sandbox (runtime/ only).
 *
 * Modes, best first:
 *   v2  a delegated cgroup v2 subtree: the owner sits in a leaf (lis.owner),
 *       each sandbox in <base>/lis-<name>, entered at clone time
 *       (CLONE_INTO_CGROUP); memory.max/high/swap.max, pids.max, cpu.max.
 *   v1  root on a host whose controllers are on cgroup v1: memory, pids and
 *       cpu hierarchies, <own cgroup>/lis-<name> in each (a fallback).
 *   none  no limits; a one-line warning on stderr per sandbox, or an error
 *       with limits.require.
 * See docs/cgroups.md. */
#ifndef LIS_CGROUPS_H
#define LIS_CGROUPS_H

#include "lis.h"
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

enum { LIS_CG_NONE = 0, LIS_CG_V2, LIS_CG_V1 };

/* One sandbox's cgroup (its PID 1 and everything below it). */
typedef struct lis_cg {
    int kind;                /* LIS_CG_V2 or LIS_CG_V1 */
    int fd;                  /* v2: the cgroup directory, for CLONE_INTO_CGROUP; else -1 */
    uint64_t mem_max;        /* enforced memory limit in bytes, 0 when none */
    char dir[PATH_MAX];      /* v2: the cgroup; v1: the memory cgroup ("" when none) */
    char pids_dir[PATH_MAX]; /* v1 only */
    char cpu_dir[PATH_MAX];  /* v1 only */
} lis_cg;

/* What a command's result needs: counters at its start. */
typedef struct lis_cg_mark {
    uint64_t oom0, peak0;
    int peak_fd; /* v2 >= 6.12: a memory.peak fd reset at the start; else -1 */
} lis_cg_mark;

/* What the host offers (discovery only, nothing changed). */
typedef struct lis_cg_info {
    int kind;              /* LIS_CG_V2, LIS_CG_V1 or LIS_CG_NONE */
    int unified;           /* a cgroup2 hierarchy is mounted */
    int hybrid;            /* controllers bound to v1 */
    int delegated;         /* v2: our cgroup is writable by us */
    char base[PATH_MAX];   /* v2: where sandbox cgroups go */
    char controllers[128]; /* v2: available in base (cgroup.controllers) */
    char reason[256];      /* LIS_CG_NONE: why, one phrase */
} lis_cg_info;

void lis_cg_probe(lis_ctx *ctx, lis_cg_info *info);

/* Creates the cgroup of a new sandbox with the limits applied (defaults
 * resolved). *out is NULL when limits cannot be enforced: then a warning goes
 * to stderr, or, with lim->require, this fails. */
int lis_cg_create(lis_ctx *ctx, const char *name, const lis_limits *lim, lis_cg **out,
                  lis_error *err);
/* v1: puts the freshly cloned (still waiting) PID 1 into the cgroups. */
int lis_cg_attach(const lis_cg *cg, pid_t pid, lis_error *err);
/* Finds the cgroup of a running sandbox from its PID 1; NULL when none. */
lis_cg *lis_cg_of_pid(lis_ctx *ctx, pid_t pid);
/* Kills everything in the cgroup (cgroup.kill). */
void lis_cg_kill(const lis_cg *cg);
/* Waits until empty, reads the final counters into st (may be NULL),
 * removes the cgroup and frees cg. */
int lis_cg_remove(lis_cg *cg, lis_stats *st);
void lis_cg_free(lis_cg *cg);
void lis_cg_stats(const lis_cg *cg, lis_stats *st);
/* Stats of a running sandbox that we have no handle for. */
void lis_cg_pid_stats(lis_ctx *ctx, pid_t pid, lis_stats *st);
/* Removes empty sandbox cgroups left behind (an owner killed with -9). */
int lis_cg_gc(lis_ctx *ctx, int *removed);

void lis_cg_cmd_begin(const lis_cg *cg, lis_cg_mark *m);
/* Fills res->memory_peak, res->oom_killed and, when the OOM killer ended the
 * command, res->err_msg. Closes what begin opened. */
void lis_cg_cmd_end(const lis_cg *cg, lis_cg_mark *m, lis_result *res);

/* Freezes (on 1) or thaws the cgroup (v2 freezer), waiting until frozen.
 * 1 when done, 0 when cg has no freezer (none, or v1), -1 on error. */
int lis_cg_freeze(const lis_cg *cg, int on, lis_error *err);

void lis_cg_ctx_free(lis_ctx *ctx);

#endif
