/* CPU kernels of the dense stride-1 convolution computed directly (issue 32): conv2d with
 * groups 1, stride 1 and dilation 1 in float32 on a CPU with AVX2 and FMA, the ResNets'
 * 3x3 convolutions. im2col + GEMM (ops/cpu/conv.h) copies every input element kH * kW
 * times and, for a few dozen channels, multiplies thin matrices; here each image's planes
 * are copied once into zero-padded planes, and a register tile of 4 output channels by
 * 8, 16 or 24 outputs sums FMAs straight from them.
 *
 * The trick that keeps the tile simple: an output plane is computed on the padded input's
 * grid, output (oh, ow) at q = oh * Wp + ow, so that tap (ki, kj) of every output reads the
 * padded input at q + ki * Wp + kj, one offset for a whole vector of outputs whichever rows
 * it spans. The columns ow >= Wo of that grid are computed and dropped.
 *
 * The input gradient of a stride-1 convolution is the forward convolution of the gradient,
 * padded by kH - 1 - pH and kW - 1 - pW, with the weight's channels swapped and its taps
 * reversed: the same kernel. The weight gradient sums, per (output channel, input channel,
 * tap), the gradient on that grid (zero in the dropped columns) times the padded input at
 * the tap's offset.
 *
 * Each output element is summed by one thread in a fixed order (the forward and the input
 * gradient over input channels, then taps in (ki, kj) order, one FMA each; the weight
 * gradient in 8 lanes over images and positions in order, then the lanes), so the results
 * do not depend on the thread count. They differ from the GEMM path's in the last bits
 * (another order of the same sums). */
#ifndef TG_OPS_CPU_DIRECT_CONV_H
#define TG_OPS_CPU_DIRECT_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/cpu/conv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True when this CPU has the instructions and g is a convolution the kernels take:
 * groups 1, stride 1, dilation 1, at most 64 taps, padding smaller than the kernel, and a
 * padded grid that drops at most a quarter of its outputs (else the GEMM path is faster). */
bool tg_cpu_direct_conv_applies(const tg_conv_geom *g);

/* Each call takes a float32 workspace of the size its *_workspace function gives, which
 * the caller allocates (ops/conv.c: a tensor, so the allocator's cache serves it). */
int64_t tg_cpu_direct_conv_forward_workspace(const tg_conv_geom *g);
int64_t tg_cpu_direct_conv_input_grad_workspace(const tg_conv_geom *g);
int64_t tg_cpu_direct_conv_weight_grad_workspace(const tg_conv_geom *g);

/* y [N, Co, Ho, Wo] = conv(x [N, C, H, W], w [Co, C, kH, kW]) + bias [Co] (bias may be NULL). */
void tg_cpu_direct_conv_forward(const tg_conv_geom *g, const float *x, const float *w, const float *bias, float *y,
                                float *work);
/* gx [N, C, H, W] = the input gradient of grad [N, Co, Ho, Wo] (every element written). */
void tg_cpu_direct_conv_input_grad(const tg_conv_geom *g, const float *grad, const float *w, float *gx, float *work);
/* gw [Co, C, kH, kW] = the weight gradient (every element written). */
void tg_cpu_direct_conv_weight_grad(const tg_conv_geom *g, const float *x, const float *grad, float *gw, float *work);

#ifdef __cplusplus
}
#endif

#endif
