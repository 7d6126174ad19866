/* CUDA entry points of ops/cuda/norm.cu, called by ops/norm.c (weak: NULL without
 * CUDA). Only the forward needs a kernel: the backward is built from ops. */
#ifndef TG_OPS_CUDA_NORM_H
#define TG_OPS_CUDA_NORM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "ops/cpu/norm.h" /* tg_norm_args, the arguments the CPU kernels take */

#ifdef __cplusplus
extern "C" {
#endif

/* x: contiguous, viewed as [a->outer, a->groups, a->inner] (float32/float64), as the
 * CPU's tg_cpu_norm_forward_* take it (ops/cpu/norm.h). Statistics per group over its
 * outer * inner elements: mean[g], var[g] (biased), invstd = 1 / sqrt(var + eps);
 * y = (x - mean) * invstd * w + b, all preallocated and contiguous, by
 * ops/norm_formulas.h as on the CPU.
 *   batch norm (a->layer false): x [N, C, S] (outer N, groups C, inner S = H*W...), w, b [C]
 *   layer norm (a->layer true):  x [rows, inner] (outer 1, groups rows),            w, b [inner]
 * mean and var are [groups]. w and b are never NULL (ones/zeros when absent). */
tg_status tg_cuda_norm_forward(tg_tensor *y, tg_tensor *mean, tg_tensor *var, tg_tensor *x, tg_tensor *w, tg_tensor *b,
                               const tg_norm_args *a) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
