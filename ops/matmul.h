/* Matrix products through OpenBLAS on the CPU and cuBLAS on CUDA. */
#ifndef TG_OPS_MATMUL_H
#define TG_OPS_MATMUL_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Matrix product with torch.matmul's rules: a [..., n, k] x b [..., k, m] -> [..., n, m],
 * batch dims broadcast; 1-D operands are promoted (and the added dim removed) as in
 * PyTorch. Returns a new reference. Fails (NULL + message) on rank-0 inputs, inner
 * sizes that differ, or dtypes/devices that differ. float32/float64 only. */
tg_tensor *tg_matmul(tg_tensor *a, tg_tensor *b);

/* torch.nn.functional.linear: x [..., in] * weight[out, in]^T + bias[out].
 * bias may be NULL (no bias). One GEMM with the transpose folded in, no copies. */
tg_tensor *tg_linear(tg_tensor *x, tg_tensor *weight, tg_tensor *bias);

#ifdef __cplusplus
}
#endif
#endif
