/* CUDA entry points of ops/cuda/scan.cu (weak: NULL without CUDA), called by
 * ops/scan.c. */
#ifndef TG_OPS_CUDA_SCAN_H
#define TG_OPS_CUDA_SCAN_H

#include "core/tensor.h"
#include "ops/scan_line.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (contiguous, x's shape, x's dtype: float32, float64 or int64) = cumsum or
 * cumprod (kind) of x along dim (already wrapped; x any strides). */
tg_status tg_cuda_scan(tg_scan_kind kind, tg_tensor *out, tg_tensor *x, int dim) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
