/* CPU kernels of the fused scaled_dot_product_attention (ops/attention.c owns the op:
 * checks, broadcasting into a tg_attn_plan, the tensors these write into).
 * FlashAttention-2 on blocks of ATTN_BLOCK_Q queries against ATTN_BLOCK_K keys: the
 * forward keeps an online softmax per query row and saves the row's log-sum-exp; the
 * backward recomputes each score block from q, k and that log-sum-exp. Nothing of size
 * [l, s] is ever held: each chunk of work has a few block-sized scratch buffers
 * (malloc'd: two 128 x 256 score blocks, or one and a 128-row output block). The products are
 * ops/cpu/gemm.h's (on the calling thread, inside the parallel loop); the work is split
 * over (problem, query block) in the forward and the dq pass and over (problem, key
 * block) in the dk/dv pass, so every element is summed in a fixed order by one thread
 * and the results do not depend on the thread count. A scratch allocation that fails
 * is reported with tg_kernel_fail. float32 on CPUs with AVX2 and FMA takes
 * ops/cpu/attention_avx2.h instead: its own block kernels and a one-pass backward, whose
 * leaf kernels are ops/cpu/attention_avx512.h's on CPUs with AVX-512. */
#ifndef TG_OPS_CPU_ATTENTION_H
#define TG_OPS_CPU_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/attention_formulas.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_BLOCK_Q 128
#define ATTN_BLOCK_K 256

/* offsets: 4 x plan->batch (q, k, v, mask starts per problem; see tg_attn_plan). mask:
 * NULL, bool bytes or the element type (additive). out [batch, l, ev], lse [batch, l]. */
void tg_cpu_attention_forward_f32(const tg_attn_plan *plan, const int64_t *offsets, const float *q, const float *k,
                                  const float *v, const void *mask, float *out, float *lse);
void tg_cpu_attention_forward_f64(const tg_attn_plan *plan, const int64_t *offsets, const double *q, const double *k,
                                  const double *v, const void *mask, double *out, double *lse);

/* dout and out [batch, l, ev] contiguous; delta [batch, l] is scratch (rowsum(dout *
 * out)); writes dq [batch, l, e], dk [batch, s, e], dv [batch, s, ev] (contiguous, per
 * problem: summing broadcast problems is the caller's). */
void tg_cpu_attention_backward_f32(const tg_attn_plan *plan, const int64_t *offsets, const float *q, const float *k,
                                   const float *v, const void *mask, const float *out, const float *dout,
                                   const float *lse, float *delta, float *dq, float *dk, float *dv);
void tg_cpu_attention_backward_f64(const tg_attn_plan *plan, const int64_t *offsets, const double *q, const double *k,
                                   const double *v, const void *mask, const double *out, const double *dout,
                                   const double *lse, double *delta, double *dq, double *dk, double *dv);

/* Whether float32 takes the AVX-512 leaf kernels where the CPU has them (the default);
 * false keeps the AVX2 ones, so that tests check both on one machine. Returns the
 * previous setting (false where this build has no x86-64 kernels). */
bool tg_cpu_attention_set_avx512(bool on);

#ifdef __cplusplus
}
#endif
#endif
