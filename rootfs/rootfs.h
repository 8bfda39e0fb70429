/* rootfs.h - the content-addressed rootfs store, as used by the runtime and
 * the CLI. Import and pull live in the liblis-rootfs plugin (rootfs/import.c,
 * rootfs/pull.c); only the lookup is linked into the lis binary. */
#ifndef LIS_ROOTFS_H
#define LIS_ROOTFS_H

#include "lis.h"
#include <stddef.h>

/* Store layout under <data_dir>/rootfs/:
 *   blobs/sha256/<hex>/        one extracted root filesystem per digest
 *   tags/<name>/<tag>          a file holding "sha256:<hex>\n"
 * Resolves "NAME[:TAG]" (TAG defaults to latest) or "sha256:<hex>" to the
 * extracted directory. */
int lis_store_resolve(const char *data_dir, const char *ref, char *dir, size_t len,
                      lis_error *err);

#endif
