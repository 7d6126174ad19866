/* CPU kernels of the depthwise convolution (issue 32): conv2d with groups == C > 1 and a
 * weight [C * m, 1, kH, kW] (m: PyTorch's channel multiplier; output channel o reads input
 * channel o / m), computed directly, without im2col or a GEMM (which would be G products of
 * 1 x kH*kW x L). float32 and float64 operands on contiguous NCHW tensors, any stride,
 * padding and dilation per dim; no workspace. ops/conv.c calls these instead of
 * ops/cpu/conv.h's drivers when g->groups == g->c > 1.
 *
 * Each output element is summed by one thread in a fixed order (its taps in (ki, kj)
 * order, then the bias; the weight gradient over images, rows and columns in order, see
 * ops/cpu/depthwise_conv_kernels.h), in T, so the results do not depend on the thread
 * count. The loops are split over the thread pool by planes: the forward by the N * Co
 * output planes, the input gradient by the N * C input planes, the weight gradient by
 * output channels (each sums over all the images). */
#ifndef TG_OPS_CPU_DEPTHWISE_CONV_H
#define TG_OPS_CPU_DEPTHWISE_CONV_H

#include "ops/cpu/conv.h"

/* y [N, Co, Ho, Wo] = depthwise conv(x [N, C, H, W], w [Co, 1, kH, kW]) + bias [Co] (bias may be NULL). */
void tg_cpu_depthwise_conv_forward_f32(const tg_conv_geom *g, const float *x, const float *w, const float *bias,
                                       float *y);
void tg_cpu_depthwise_conv_forward_f64(const tg_conv_geom *g, const double *x, const double *w, const double *bias,
                                       double *y);
/* gx [N, C, H, W] = the input gradient of grad [N, Co, Ho, Wo] (every element written). */
void tg_cpu_depthwise_conv_input_grad_f32(const tg_conv_geom *g, const float *grad, const float *w, float *gx);
void tg_cpu_depthwise_conv_input_grad_f64(const tg_conv_geom *g, const double *grad, const double *w, double *gx);
/* gw [Co, 1, kH, kW] = the weight gradient (every element written). */
void tg_cpu_depthwise_conv_weight_grad_f32(const tg_conv_geom *g, const float *x, const float *grad, float *gw);
void tg_cpu_depthwise_conv_weight_grad_f64(const tg_conv_geom *g, const double *x, const double *grad, double *gw);

#endif
