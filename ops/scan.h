/* Scans along a dim and the product: torch.cumsum, torch.cumprod, torch.prod. */
#ifndef TG_OPS_SCAN_H
#define TG_OPS_SCAN_H

#include <stdbool.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.cumsum(x, dim): out[..., k, ...] = x[..., 0, ...] + ... + x[..., k, ...].
 * Floating inputs keep their dtype (accumulated in double, as PyTorch's CPU kernel);
 * integer and bool inputs give int64, as PyTorch. Differentiable (the gradient is
 * the reversed cumsum of the incoming one). CPU and CUDA. */
tg_tensor *tg_cumsum(tg_tensor *x, int dim);
/* torch.cumprod(x, dim): the running product, with cumsum's dtypes and accumulator.
 * Differentiable, also where x has zeros (PyTorch's formula: with a zero on the line
 * the gradient takes O(n^2) work and memory per line, without one O(n)); twice. */
tg_tensor *tg_cumprod(tg_tensor *x, int dim);
/* torch.prod(x) (all elements, a 0-dim result) and torch.prod(x, dim, keepdim). An
 * empty product is 1; integers and bool give int64, as PyTorch. The gradient
 * prod_{i != j} x_i is right with zeros (two exclusive running products), twice
 * differentiable. The value is the last element of cumprod (float32 accumulated in
 * double), so float32 results may differ from PyTorch's in the last bit. */
tg_tensor *tg_prod(tg_tensor *x);
tg_tensor *tg_prod_dim(tg_tensor *x, int dim, bool keepdim);

#ifdef __cplusplus
}
#endif
#endif
