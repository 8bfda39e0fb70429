/* mounts.h - the root filesystem of a sandbox as a list of operations,
 * prepared by the owner (allocation allowed) and run by the clone child
 * (no allocation). */
#ifndef LIS_MOUNTS_H
#define LIS_MOUNTS_H

#include "internal.h"

typedef struct lis_mount_plan lis_mount_plan;

lis_mount_plan *lis_mount_plan_new(lis_ctx *ctx, const lis_spawn_req *req, lis_error *err);
void lis_mount_plan_free(lis_mount_plan *plan);
/* A plan for req: the context's last one when it was made for the same spec
 * (all but the sandbox's name: every sandbox of a lis batch run), else a new
 * one, kept for the next when it can serve others. Give it back with
 * lis_mount_plan_put; lis_mount_plan_cache_free drops the context's. */
lis_mount_plan *lis_mount_plan_get(lis_ctx *ctx, const lis_spawn_req *req, lis_error *err);
void lis_mount_plan_put(lis_ctx *ctx, lis_mount_plan *plan);
void lis_mount_plan_cache_free(lis_ctx *ctx);
/* Runs in the child, for the sandbox called name (its hostname, unless the
 * spec gave one, and /etc/hosts). Returns 0, or an errno with *stage naming
 * the step. *held: an fd (O_CLOEXEC) of the set-up tmpfs, for lis-init to keep.
 * arena: LIS_COPY_ARENA bytes for copying the image's /tmp (NULL: mapped
 * then). Writes nothing but its own stack, *stage, *held and the arena: the
 * child may share its owner's memory (spawn.c). */
int lis_mount_plan_run(const lis_mount_plan *plan, const char *name, char *arena,
                       const char **stage, int *held);
/* Runs in the child after the plan (loopback is up): with spec.listen_port,
 * opens the listener on 127.0.0.1:listen_port in the sandbox's network
 * namespace and sends it to the owner on the lifeline. Returns 0, or an
 * errno with *stage naming the step. */
int lis_mount_plan_listener(const lis_mount_plan *plan, int life, const char **stage);

#endif
