/* DistributedDataParallel: one module per rank, each on its own shard of the data,
 * gradients averaged over the ranks during backward, so that N ranks with batch B
 * train as one process with batch N*B.
 *
 *     tg_dist_init();
 *     tg_module *net = make_net();                    // same architecture everywhere
 *     tg_ddp *ddp = tg_ddp_new(net, (tg_ddp_opts){0}); // rank 0's weights everywhere
 *     tg_optimizer *opt = tg_sgd(tg_parameters(net, &n), n, ...);
 *     TG_FOR_EACH_BATCH(loader, x, y) {               // loader sharded: .world_size, .rank
 *         tg_optim_zero_grad(opt);
 *         tg_backward(tg_cross_entropy(tg_ddp_forward(ddp, x), y));
 *         tg_optim_step(opt);                         // gradients are averaged by now
 *     }
 *     tg_ddp_free(ddp); tg_module_free(net); tg_dist_finalize();
 *
 * As PyTorch's DDP:
 * - tg_ddp_new checks that every rank has the same parameters and buffers (names,
 *   dtypes, shapes; PyTorch checks shapes) and fails on every rank naming the first
 *   difference, then broadcasts rank 0's parameters and buffers to every rank.
 * - Parameters are grouped into buckets in reverse registration order (the order
 *   backward produces their gradients): the first bucket holds up to 1 MB (or bucket_cap_mb when smaller), the
 *   others up to bucket_cap_mb (25 MB), split by dtype and device. A post-accumulate
 *   hook on each parameter copies its gradient into its bucket; a full bucket's
 *   all-reduce (average) starts at once, MPI_Iallreduce on the CPU, NCCL on its own
 *   stream on a GPU, while backward goes on with the layers nearer the input. When
 *   the last parameter's gradient is in, the backward waits for every bucket and
 *   writes the averages into .grad, so that tg_optim_step right after tg_backward
 *   sees them (PyTorch's end-of-backward callback). Buckets start in order, so every
 *   rank issues the same collectives in the same order.
 * - Every parameter must get a gradient in each synchronised backward (PyTorch's
 *   find_unused_parameters=False); tg_ddp_forward reports a previous backward that
 *   left buckets unreduced.
 * - tg_ddp_set_sync(ddp, false) is no_sync(): backwards only accumulate .grad
 *   locally; the next backward with sync on reduces the accumulated sum.
 * - Buffers (BatchNorm's running statistics) are broadcast from rank 0 before every
 *   forward (broadcast_buffers=True); BatchNorm normalises with each rank's own batch
 *   statistics; tg_nn_sync_batch_norm (distributed/sync_batch_norm.h) uses the global batch's.
 * - Checkpoints: rank 0 saves (io/checkpoint.h), every rank loads; the module is
 *   the plain module (no "module." prefix in the names).
 * With one rank (or without tg_dist_init) it does nothing but forward.
 *
 * Ownership: the module stays the caller's and must outlive the wrapper. */
#ifndef TG_DISTRIBUTED_DDP_H
#define TG_DISTRIBUTED_DDP_H

#include "distributed/dist.h"
#include "nn/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_ddp tg_ddp;

/* Zero fields mean PyTorch's defaults. */
typedef struct {
    double bucket_cap_mb; /* 0: 25 (MiB, as PyTorch's bucket_cap_mb) */
    bool no_buffer_sync;  /* true: broadcast_buffers=False */
} tg_ddp_opts;

/* Wraps m: broadcasts rank 0's parameters and buffers (collective: every rank calls
 * it), builds the buckets, registers the hooks. NULL + error on a NULL module, a bad
 * bucket size, or a failed broadcast. */
tg_ddp *tg_ddp_new(tg_module *m, tg_ddp_opts opts);
/* Removes the hooks and frees the buckets (not the module). NULL-safe. */
void tg_ddp_free(tg_ddp *ddp);
tg_module *tg_ddp_module(tg_ddp *ddp);

/* m(x), after broadcasting the buffers. Fails when the previous synchronised backward
 * did not give every parameter a gradient (its buckets never finished). */
tg_tensor *tg_ddp_forward(tg_ddp *ddp, tg_tensor *x);

/* no_sync(): false makes the following backwards accumulate locally; true again
 * (the default) makes the next backward reduce the accumulated gradients. */
void tg_ddp_set_sync(tg_ddp *ddp, bool sync);

/* Buckets: their count and the parameter indices (into tg_parameters) of bucket b,
 * in the order their gradients are expected. */
int tg_ddp_num_buckets(const tg_ddp *ddp);
const int *tg_ddp_bucket(const tg_ddp *ddp, int b, int *count);

/* What the reductions cost, summed over the synchronised backwards so far. */
typedef struct {
    long steps;
    double comm_s; /* from the first bucket's start to the last bucket's end, per step */
    double wait_s; /* of that, the time backward stood waiting at its end */
    double bytes;  /* gradient bytes all-reduced per rank */
} tg_ddp_stats;
tg_ddp_stats tg_ddp_get_stats(const tg_ddp *ddp);
void tg_ddp_reset_stats(tg_ddp *ddp);

#ifdef __cplusplus
}
#endif
#endif
