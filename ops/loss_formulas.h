/* The per-element formulas of the fused cross-entropy forward, the one definition both
 * devices compile: ops/loss.c's CE_KERNEL and ops/cuda/loss.cu's kernel call these
 * (each reduces a row's max and sums its own way, in double). */
#ifndef TG_OPS_LOSS_FORMULAS_H
#define TG_OPS_LOSS_FORMULAS_H

#include <math.h>
#include <stdint.h>

#include "core/host_device.h"

/* The shift of a row's log-sum-exp: its max m, or 0 when m is -inf (an all -inf row
 * then gives lse = -inf rather than -inf - -inf = NaN). */
TG_HD_INLINE double tg_ce_lse_shift(double m) { return m == -INFINITY ? 0.0 : m; }

/* Loss of one element with label smoothing eps over C classes: (1 - eps) * nll +
 * eps / C * sum_c (lse - x_c), from its log-sum-exp, its target's logit and the sum of
 * its C logits (PyTorch's cross_entropy with label_smoothing). */
TG_HD_INLINE double tg_ce_smoothed_nll(double lse, double target_logit, double logit_sum, int64_t C, double eps) {
    double nll = lse - target_logit, smooth = (double)C * lse - logit_sum;
    return (1 - eps) * nll + eps / (double)C * smooth;
}

#endif
