/* CUDA entry points of ops/cuda/conv.cu, called by ops/conv.c (weak: NULL without
 * CUDA). All tensors are contiguous, on one device, with one floating dtype
 * (float32 or float64); outputs are preallocated (not zeroed). Geometry is plain
 * ints: stride (sh, sw), padding (ph, pw), dilation (dh, dw), groups. With
 * Ho = (H + 2ph - dh(kH-1) - 1) / sh + 1 and likewise Wo. */
#ifndef TG_OPS_CUDA_CONV_H
#define TG_OPS_CUDA_CONV_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out [N, Co, Ho, Wo] = conv2d(x [N, C, H, W], weight [Co, C/groups, kH, kW]) + bias [Co]
 * (bias may be NULL). */
tg_status tg_cuda_conv2d_forward(tg_tensor *out, tg_tensor *x, tg_tensor *weight, tg_tensor *bias, int sh, int sw,
                                 int ph, int pw, int dh, int dw, int groups) __attribute__((weak));
/* grad_x [N, C, H, W] = gradient of the conv with respect to its input, from
 * grad [N, Co, Ho, Wo] and weight [Co, C/groups, kH, kW] (a transposed conv: GEMM + col2im). */
tg_status tg_cuda_conv2d_input_grad(tg_tensor *grad_x, tg_tensor *grad, tg_tensor *weight, int sh, int sw, int ph,
                                    int pw, int dh, int dw, int groups) __attribute__((weak));
/* grad_weight [Co, C/groups, kH, kW] = gradient with respect to the weight, from
 * x [N, C, H, W] and grad [N, Co, Ho, Wo] (im2col + GEMM, summed over the batch). */
tg_status tg_cuda_conv2d_weight_grad(tg_tensor *grad_weight, tg_tensor *x, tg_tensor *grad, int sh, int sw, int ph,
                                     int pw, int dh, int dw, int groups) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
