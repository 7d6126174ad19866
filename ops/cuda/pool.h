/* CUDA entry points of ops/cuda/pool.cu, called by ops/pool.c (weak: NULL without
 * CUDA). Tensors are contiguous [N, C, H, W] on one device, float32 or float64;
 * outputs are preallocated (not zeroed). Windows and output sizes follow ATen:
 * the window of output (oh, ow) starts at (oh*sh - ph, ow*sw - pw), kh x kw, clipped to
 * the input; max pooling's taps are dh and dw apart, and ops/pool.c has checked that
 * each window holds one. The geometry (ops/pool_window.h) is the CPU loops' own. */
#ifndef TG_OPS_CUDA_POOL_H
#define TG_OPS_CUDA_POOL_H

#include <stdbool.h>

#include "core/tensor.h"
#include "ops/pool_window.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out [N, C, Ho, Wo] = window maxima of x [N, C, H, W]; indices [N, C, Ho, Wo] int64 =
 * argmax flattened in H*W (first maximum; NaN wins). */
tg_status tg_cuda_max_pool2d_forward(tg_tensor *out, tg_tensor *indices, tg_tensor *x, const tg_pool_geometry *q)
    __attribute__((weak));
/* grad_x [N, C, H, W] = zeros, then grad [N, C, Ho, Wo] added at indices (per plane). */
tg_status tg_cuda_max_pool2d_backward(tg_tensor *grad_x, tg_tensor *grad, tg_tensor *indices) __attribute__((weak));
/* out [N, C, Ho, Wo] = x [N, C, H, W] picked at indices (the double backward). */
tg_status tg_cuda_max_pool2d_gather(tg_tensor *out, tg_tensor *x, tg_tensor *indices) __attribute__((weak));
/* out [N, C, Ho, Wo] = window sums / divisor of x [N, C, H, W]. adaptive: windows
 * floor(o*H/Ho) .. ceil((o+1)*H/Ho), divisor the window size (kernel/stride/padding
 * unused); else divisor = the window size before clipping to the input when
 * include_pad, after clipping otherwise (the end first clipped to H + padding). */
tg_status tg_cuda_avg_pool2d_forward(tg_tensor *out, tg_tensor *x, const tg_pool_geometry *q) __attribute__((weak));
/* grad_x [N, C, H, W] = each grad [N, C, Ho, Wo] element / divisor spread over its window. */
tg_status tg_cuda_avg_pool2d_backward(tg_tensor *grad_x, tg_tensor *grad, const tg_pool_geometry *q)
    __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
