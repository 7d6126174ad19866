/* CUDA entry points of ops/cuda/loss.cu, called by ops/loss.c (weak: NULL without
 * CUDA). Only cross entropy's fused forward and first-order backward need kernels of
 * their own; nll, mse, l1 and bce-with-logits are built from elementwise/reduction ops. */
#ifndef TG_OPS_CUDA_LOSS_H
#define TG_OPS_CUDA_LOSS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "ops/cpu/cross_entropy.h" /* tg_ce_args: the call's description, as the CPU kernel's */

#ifdef __cplusplus
extern "C" {
#endif

/* x: contiguous logits viewed as [n, c, d] (float32/float64); target: contiguous int64
 * [n * d], already checked to lie in [0, c) or equal ignore_index (when use_ignore).
 * Writes, per element r = (n, d): lse[r] = logsumexp over c of x[n, :, d] and
 * loss[r] = (1 - eps)(lse - x[n, t, d]) + (eps / c)(c * lse - sum_c x[n, :, d]),
 * or 0 when the target is ignored. loss and lse are preallocated, x's dtype, n*d elements. */
tg_status tg_cuda_cross_entropy_forward(tg_tensor *loss, tg_tensor *lse, tg_tensor *x, tg_tensor *target, int64_t n,
                                        int64_t c, int64_t d, bool use_ignore, int64_t ignore_index, double eps)
    __attribute__((weak));

/* gx [n, c, d] = ops/loss_formulas.h's tg_ce_grad per element, from contiguous x, target,
 * the forward's lse [n*d] and the upstream gradient g (n*d values for reduction none,
 * else one, read on the device: no host wait). gx preallocated, contiguous. */
tg_status tg_cuda_cross_entropy_backward(tg_tensor *gx, tg_tensor *x, tg_tensor *target, tg_tensor *lse, tg_tensor *g,
                                         const tg_ce_args *a) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
