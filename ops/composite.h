/* PyTorch ops that are compositions of other ops (where, index_select, matmul,
 * arithmetic): masked_fill, tril/triu, flip, take, outer, lerp, addmm, baddbmm, clamp with
 * tensor bounds, hardtanh.
 * Their gradients and devices are those of the ops they are made of, so they need
 * no kernels or formulas of their own. Each returns a NEW reference, or NULL with a
 * message naming the op and the shapes. */
#ifndef TG_OPS_COMPOSITE_H
#define TG_OPS_COMPOSITE_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.Tensor.masked_fill(mask, value): x where mask (bool, broadcastable to x's
 * shape) is false, value where it is true. Differentiable in x. */
tg_tensor *tg_masked_fill(tg_tensor *x, tg_tensor *mask, double value);
/* torch.tril / torch.triu(x, diagonal) on the last two dims: elements on and below
 * (above) the diagonal-th diagonal kept, the others zero. */
tg_tensor *tg_tril(tg_tensor *x, int64_t diagonal);
tg_tensor *tg_triu(tg_tensor *x, int64_t diagonal);
/* torch.flip(x, dims): the order of elements reversed along each of dims[0..count). */
tg_tensor *tg_flip(tg_tensor *x, const int *dims, int count);
/* torch.take(x, index): x read as 1-D at int64 index (negative counts from the end);
 * the result has index's shape. */
tg_tensor *tg_take(tg_tensor *x, tg_tensor *index);
/* torch.outer(a, b): a [n] x b [m] -> [n, m]. */
tg_tensor *tg_outer(tg_tensor *a, tg_tensor *b);
/* torch.lerp(a, b, weight) = a + weight * (b - a), with a scalar or a tensor weight. */
tg_tensor *tg_lerp(tg_tensor *a, tg_tensor *b, double weight);
tg_tensor *tg_lerp_tensor(tg_tensor *a, tg_tensor *b, tg_tensor *weight);
/* torch.addmm(c, a, b, beta, alpha) = beta * c + alpha * (a @ b), a [n, k], b [k, m],
 * c broadcastable to [n, m]; beta 0 ignores c (NaN in c does not propagate), as
 * PyTorch. torch.baddbmm is the same for batches a [B, n, k], b [B, k, m]. */
tg_tensor *tg_addmm(tg_tensor *c, tg_tensor *a, tg_tensor *b, double beta, double alpha);
tg_tensor *tg_baddbmm(tg_tensor *c, tg_tensor *a, tg_tensor *b, double beta, double alpha);

/* torch.nn.functional.softmin(x, dim) = softmax(-x, dim). */
tg_tensor *tg_softmin(tg_tensor *x, int dim);
/* torch.clamp(x, min, max) with tensor bounds (broadcast; either may be NULL). A
 * bound that is NaN makes the result NaN, as PyTorch. The gradient goes to x where
 * min <= x <= max, else to the bound that was taken. */
tg_tensor *tg_clamp_tensor(tg_tensor *x, tg_tensor *min, tg_tensor *max);
/* torch.nn.functional.hardtanh(x, min_val, max_val): x clamped, with no gradient at
 * the bounds themselves (PyTorch's hardtanh_backward). */
tg_tensor *tg_hardtanh(tg_tensor *x, double min_val, double max_val);

#ifdef __cplusplus
}
#endif
#endif
