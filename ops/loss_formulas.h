/* The per-element formulas of the fused cross entropy, the one definition both devices
 * compile: ops/cpu/cross_entropy_kernels.h and ops/cuda/loss.cu's kernels call these
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

/* The gradient of one element's loss with respect to its logit x_c (first order; the
 * composed backward of ops/loss.c serves higher orders): softmax minus the target
 * distribution (1 - eps) [c == t] + eps / C, from x_c and the row's log-sum-exp, times
 * the element's scale (the upstream gradient times the reduction's factor, 0 when the
 * target is ignored). */
TG_HD_INLINE double tg_ce_grad(double x, double lse, bool is_target, int64_t C, double eps, double scale) {
    return (exp(x - lse) - ((is_target ? 1 - eps : 0) + eps / (double)C)) * scale;
}

/* The reduction's factor of an element: 1 / count (the non-ignored targets) for the mean,
 * 1 for the sum and none; 0 when the element's target is ignored. */
TG_HD_INLINE double tg_ce_factor(bool ignored, bool mean, int64_t count) {
    return ignored ? 0.0 : mean ? 1.0 / (double)count : 1.0;
}

#endif
