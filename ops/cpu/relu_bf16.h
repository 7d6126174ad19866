/* relu and its backward on bfloat16 CPU tensors, selecting bits (ops/cpu/relu_bf16.c).
 * Called by ops/elementwise.c before its general low-precision path; each returns false,
 * having done nothing, when its case does not apply. */
#ifndef TG_OPS_CPU_RELU_BF16_H
#define TG_OPS_CPU_RELU_BF16_H

#include <stdbool.h>

#include "core/tensor.h"

/* out = relu(x): all bfloat16, contiguous, one shape, on the CPU, AVX512-BW. */
bool tg_relu_bf16_select(tg_tensor *out, tg_tensor *x);

/* out = relu_backward(g, y) (g where y > 0 or NaN, else 0): the same conditions. */
bool tg_relu_backward_bf16_select(tg_tensor *out, tg_tensor *g, tg_tensor *y);

#endif
