/* Scans along a dim: torch.cumsum. */
#ifndef TG_OPS_SCAN_H
#define TG_OPS_SCAN_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.cumsum(x, dim): out[..., k, ...] = x[..., 0, ...] + ... + x[..., k, ...].
 * Floating inputs keep their dtype (accumulated in double, as PyTorch's CPU kernel);
 * integer and bool inputs give int64, as PyTorch. Differentiable (the gradient is
 * the reversed cumsum of the incoming one). CPU and CUDA. */
tg_tensor *tg_cumsum(tg_tensor *x, int dim);

#ifdef __cplusplus
}
#endif
#endif
