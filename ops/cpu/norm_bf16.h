/* Batch norm training kernels on a bfloat16 input with float32 weight and bias (the mixed
 * batch norm of docs/mixed-precision.md), CPU only (internal; ops/cpu/norm_bf16.c). They read
 * the 2-byte elements, widen each in registers and round each result once, with the
 * float32 kernels' arithmetic in the float32 kernels' order (ops/cpu/norm_kernels.h), so they give the
 * bits of the float32 batch norm of the widened input, rounded once -- without the float32
 * copies of x, y, the output gradient and the input gradient. x is [O, C, I]. */
#ifndef TG_OPS_CPU_NORM_BF16_H
#define TG_OPS_CPU_NORM_BF16_H

#include <stdint.h>

/* y (bfloat16), the batch mean and biased variance per channel (float32), stats [C, 2]
 * (mean, invstd in double) for the backward. */
void tg_bn_forward_bf16(int64_t O, int64_t C, int64_t I, double eps, const uint16_t *x, const float *w, const float *b,
                        uint16_t *y, float *mean_out, float *var_out, double *stats);
/* gx (bfloat16; NULL: not wanted), gw and gb (float32) from g and x (bfloat16). */
void tg_bn_backward_bf16(int64_t O, int64_t C, int64_t I, const uint16_t *g, const uint16_t *x, const float *w,
                         const double *stats, uint16_t *gx, float *gw, float *gb);

#endif
