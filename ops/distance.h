/* Distances between rows of two tensors, as torch.nn.functional's: cosine_similarity
 * and pairwise_distance. Compositions of differentiable ops (sums, norms, where), so
 * they run on every device that has those and differentiate twice. Each returns a NEW
 * reference, or NULL with a message naming the op and the shapes. */
#ifndef TG_OPS_DISTANCE_H
#define TG_OPS_DISTANCE_H

#include <stdbool.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* F.cosine_similarity(x1, x2, dim, eps) (PyTorch's defaults: dim 1, eps 1e-8): the
 * inputs broadcast, then sum over dim of (x1 / max(|x1|, eps)) (x2 / max(|x2|, eps)).
 * As PyTorch 1.13, each norm is clamped without cutting its gradient: the norm's
 * derivative x / max(|x|, eps) is kept where the clamp is active. */
tg_tensor *tg_cosine_similarity(tg_tensor *x1, tg_tensor *x2, int dim, double eps);
/* F.pairwise_distance(x1, x2, p, eps, keepdim) (defaults: p 2, eps 1e-6, keepdim
 * false): the p-norm of x1 - x2 + eps over the last dim of the broadcast shape. p
 * must be positive or INFINITY (PyTorch's p = 0, a count of non-zeros, is not here). */
tg_tensor *tg_pairwise_distance(tg_tensor *x1, tg_tensor *x2, double p, double eps, bool keepdim);

#ifdef __cplusplus
}
#endif
#endif
