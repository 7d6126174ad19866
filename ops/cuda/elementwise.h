/* CUDA entry points of ops/cuda/elementwise.cu, called by ops/elementwise.c.
 * Weak: absent (NULL) in builds without CUDA. out is preallocated with the result's
 * shape and dtype; inputs already have out's dtype (comparisons: the common dtype). */
#ifndef TG_OPS_CUDA_ELEMENTWISE_H
#define TG_OPS_CUDA_ELEMENTWISE_H

#include "core/tensor.h"
#include "ops/elementwise_kinds.h"

#ifdef __cplusplus
extern "C" {
#endif

tg_status tg_cuda_unary(tg_unary_kind kind, tg_tensor *out, tg_tensor *x, double a, double b) __attribute__((weak));
tg_status tg_cuda_binary(tg_binary_kind kind, tg_tensor *out, tg_tensor *a, tg_tensor *b) __attribute__((weak));
/* out = cond ? a : b (cond bool). */
tg_status tg_cuda_where(tg_tensor *out, tg_tensor *cond, tg_tensor *a, tg_tensor *b) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
