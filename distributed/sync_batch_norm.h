/* torch.nn.SyncBatchNorm: a BatchNorm whose training statistics are those of the
 * global batch, every rank's samples together, instead of each rank's own (DDP leaves
 * BatchNorm local by default, as PyTorch). Per channel, the forward all-reduces the
 * sums, sums of squares and counts of the ranks' batches, and the backward
 * all-reduces their gradients, so the result equals one BatchNorm over the
 * concatenated batch (tests/distributed/ddp_mpi.cc). Collective in training: every rank
 * runs its forward and backward.
 *
 * Same parameters ("weight", "bias"), buffers ("running_mean", "running_var",
 * "num_batches_tracked") and options as tg_nn_batch_norm1d/2d, for any input
 * [N, C, ...]; the running variance is updated with the global unbiased variance. In
 * eval mode (running statistics) and with one rank it is a BatchNorm. The variance is
 * E[x^2] - E[x]^2 over the global batch (PyTorch combines per-rank Welford
 * statistics): inputs with a large mean relative to their spread lose precision. */
#ifndef TG_DISTRIBUTED_SYNC_BATCH_NORM_H
#define TG_DISTRIBUTED_SYNC_BATCH_NORM_H

#include "distributed/dist.h"
#include "nn/layers.h"
#include "nn/module.h"

#ifdef __cplusplus
extern "C" {
#endif

tg_module *tg_nn_sync_batch_norm(int64_t num_features, tg_batch_norm_opts opts);

/* The differentiable all-reduce (sum) it is built on: the sum of t over ranks, whose
 * gradient is the sum over ranks of the output's gradients (every rank's output
 * depends on every rank's t). A new tensor; t is unchanged. */
tg_tensor *tg_dist_all_reduce_sum_differentiable(tg_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
