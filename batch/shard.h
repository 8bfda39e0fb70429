/* shard.h - batch/ internal: the rows of one shard (implemented in shard.c;
 * the public half, lis_batch_shard_resolve and lis_batch_merge, is in
 * lis_batch.h). Row i of a task (0-based, after --start-id/--end-id) is in
 * shard i % N. */
#ifndef LIS_BATCH_SHARD_H
#define LIS_BATCH_SHARD_H

#include "agent.h"

#include <stddef.h>

/* Rows in shard index of count (count 0: all nrows). */
size_t batch_shard_rows(size_t nrows, int index, int count);
/* Row row is in the shard (always with count 0). */
int batch_shard_has(size_t row, int index, int count);
/* Adds "shard": {index, count, rows} to a run's config (nothing with count
 * 0), so that --resume refuses another shard and merge knows what is whole. */
void batch_shard_config(cJSON *config, int index, int count, size_t rows);

#endif
