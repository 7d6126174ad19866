/* CUDA entry points of ops/cuda/attention.cu, the fused scaled_dot_product_attention's
 * kernels, called by ops/attention.c (weak: NULL without CUDA). Same contract as the
 * CPU kernels (ops/cpu/attention.h): plan and offsets made by ops/attention.c
 * (offsets: a device int64 tensor of 4 x plan->batch), mask NULL / bool / q's dtype,
 * out [batch, l, ev] and lse [batch, l] written; the backward writes delta (scratch),
 * dq, dk, dv per problem. float32 and float64; ops/attention.c casts float16/bfloat16
 * to float32 first. */
#ifndef TG_OPS_CUDA_ATTENTION_H
#define TG_OPS_CUDA_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "ops/attention_formulas.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the kernels take head dims e (query/key) and ev (value): both at most 128. */
bool tg_cuda_attention_supports(int64_t e, int64_t ev) __attribute__((weak));

tg_status tg_cuda_attention_forward(const tg_attn_plan *plan, tg_tensor *offsets, tg_tensor *q, tg_tensor *k,
                                    tg_tensor *v, tg_tensor *mask, tg_tensor *out, tg_tensor *lse)
    __attribute__((weak));

tg_status tg_cuda_attention_backward(const tg_attn_plan *plan, tg_tensor *offsets, tg_tensor *q, tg_tensor *k,
                                     tg_tensor *v, tg_tensor *mask, tg_tensor *out, tg_tensor *dout, tg_tensor *lse,
                                     tg_tensor *delta, tg_tensor *dq, tg_tensor *dk, tg_tensor *dv)
    __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
