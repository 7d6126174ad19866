/* The fused attention's shared pieces, the one definition both devices compile
 * (ops/cpu/attention.c and ops/cuda/attention.cu): the plan that describes one call
 * (shapes, row strides, which mask), the causal and mask tests, and the online
 * softmax's per-row update (FlashAttention: a running max m and sum l per query row,
 * the output rescaled by exp(m_old - m_new) when a key block raises the max). Row
 * statistics are kept in double on the CPU and float on CUDA; these functions take
 * double and are called once per row and block, not per element. */
#ifndef TG_OPS_ATTENTION_FORMULAS_H
#define TG_OPS_ATTENTION_FORMULAS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/host_device.h"

/* Which mask a call has: none, bool (false = -inf) or additive (added to the scores). */
enum { TG_ATTN_MASK_NONE = 0, TG_ATTN_MASK_BOOL = 1, TG_ATTN_MASK_ADD = 2 };

/* One call, after broadcasting: `batch` independent (batch..., head) problems, each
 * q [l, e] x k [s, e] -> out [l, ev] with v [s, ev]. Each operand's rows are at its own
 * stride (its last dim is contiguous); the per-problem start of q, k, v and the mask is
 * in an offsets array (4 x batch int64, made by ops/attention.c), so broadcast batch
 * dims and grouped query heads cost no copy. The mask element (i, j) of problem b is
 * at offsets[3][b] + i * mask_row + j * mask_col (strides 0 where it broadcasts).
 * lse [batch, l] is contiguous. The results out, dout, dq, dk and dv ([batch, n, w]:
 * n = l or s, w = e or ev) are laid out by `heads` and `grad_row` (tg_attn_result_start
 * below). */
typedef struct {
    int64_t batch, l, s, e, ev, heads, grad_row;
    int64_t q_row, k_row, v_row, mask_row, mask_col;
    int mask_kind;
    bool causal;
    double scale;
} tg_attn_plan;

/* Where problem b's rows of a result [batch, n, w] start, given their stride `row`. The
 * `heads` problems of one batch entry interleave row by row, [batch / heads, n, heads, w]
 * in memory, as PyTorch's CPU flash attention lays out its output: a 4-D result
 * [B, H, n, w] transposed to [B, n, H, w] is contiguous, so merging the heads back (and
 * splitting a [B, n, H w] gradient into them) costs no copy. heads 1: contiguous. */
TG_HD_INLINE int64_t tg_attn_result_start(const tg_attn_plan *p, int64_t b, int64_t n, int64_t w, int64_t row) {
    return (b / p->heads) * n * row + (b % p->heads) * w;
}

/* The rows of out and dout: heads * ev apart. */
TG_HD_INLINE int64_t tg_attn_out_row(const tg_attn_plan *p) { return p->heads * p->ev; }

/* The rows of dq, dk, dv (w = e or ev): heads * w apart, or grad_row apart when the op
 * packs the three into one [B, n, 3, H, e] buffer, the layout of the q, k and v that a
 * GPT splits from one qkv projection: then their split's gradient is that buffer, no cat. */
TG_HD_INLINE int64_t tg_attn_grad_row(const tg_attn_plan *p, int64_t w) {
    return p->grad_row ? p->grad_row : p->heads * w;
}

/* is_causal: query i sees keys 0..i (the top-left triangle of [l, s], as PyTorch). */
TG_HD_INLINE bool tg_attn_causal_hidden(int64_t i, int64_t j) { return j > i; }

/* The last key query row i can see under is_causal, plus one (s when all). */
TG_HD_INLINE int64_t tg_attn_causal_end(int64_t i, int64_t s) { return i + 1 < s ? i + 1 : s; }

/* The shift of a row's exponentials: its running max, or 0 while every key so far
 * was masked (m = -inf), so that exp(-inf - 0) = 0 instead of exp(-inf + inf) = NaN. */
TG_HD_INLINE double tg_attn_shift(double m) { return m == -INFINITY ? 0.0 : m; }

/* The online softmax's update for one row and one key block whose max is block_max:
 * returns the new running max and sets *rescale to the factor the old sum and output
 * are multiplied by (exp(m_old - m_new); 1 while both are -inf). */
TG_HD_INLINE double tg_attn_online_max(double m_old, double block_max, double *rescale) {
    double m_new = block_max > m_old ? block_max : m_old;
    *rescale = exp(tg_attn_shift(m_old) - tg_attn_shift(m_new));
    if (m_old == -INFINITY) *rescale = 0.0; /* nothing was accumulated: any factor, 0 avoids inf * 0 */
    return m_new;
}

/* The saved log-sum-exp of a finished row: m + log(l). A row with every key masked
 * has l = 0 and lse = -inf; its output 0 / 0 is NaN, as PyTorch's math path. */
TG_HD_INLINE double tg_attn_row_lse(double m, double l) { return tg_attn_shift(m) + log(l); }

/* A score's contribution after the mask: bool masks hide (-inf) where false, additive
 * masks add. */
TG_HD_INLINE double tg_attn_masked_score(double score, int mask_kind, double mask_value) {
    if (mask_kind == TG_ATTN_MASK_BOOL) return mask_value != 0 ? score : -INFINITY;
    if (mask_kind == TG_ATTN_MASK_ADD) return score + mask_value;
    return score;
}

/* FlashAttention-2's backward per element: dS = P * (dP - D), D = rowsum(dO * O). */
TG_HD_INLINE double tg_attn_dscore(double p, double dp, double d) { return p * (dp - d); }

#endif
