/* workers.h - batch/ internal: a small fixed pool of threads for the work
 * that blocks (creating and destroying sandboxes, copying files, the editor,
 * scoring), so the event loop never does. A finished job is handed back to
 * the loop's thread: its eventfd becomes readable and bw_pool_reap calls the
 * job's done callback there. */
#ifndef LIS_BATCH_WORKERS_H
#define LIS_BATCH_WORKERS_H

#include "lis.h"

typedef struct bw_pool bw_pool;

bw_pool *bw_pool_new(unsigned threads, lis_error *err);
/* Readable when finished jobs wait for bw_pool_reap. */
int bw_pool_fd(const bw_pool *p);
/* run(arg) on a worker, then done(arg) on the thread calling bw_pool_reap. */
int bw_pool_submit(bw_pool *p, void (*run)(void *arg), void (*done)(void *arg), void *arg,
                   lis_error *err);
/* Calls done() of every finished job; returns how many. */
int bw_pool_reap(bw_pool *p);
unsigned bw_pool_busy(const bw_pool *p);
/* Waits for the queued and running jobs (their done() is not called), stops the threads. */
void bw_pool_free(bw_pool *p);

#endif
