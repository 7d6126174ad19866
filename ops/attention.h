/* Scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention,
 * PyTorch 2's semantics): fused on the CPU and CUDA (ops/attention.c owns the op; the
 * kernels are ops/cpu/attention.c and ops/cuda/attention.cu), with the composed formula
 * of matmul, softmax and dropout kept beside it as the reference and fallback. */
#ifndef TG_OPS_ATTENTION_H
#define TG_OPS_ATTENTION_H

#include <math.h>
#include <stdbool.h>

#include "core/options.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The options of scaled_dot_product_attention, as PyTorch 2's keyword arguments; zero
 * fields are its defaults. */
typedef struct {
    tg_tensor *attn_mask; /* NULL, bool (true = attend) or floating (added), broadcast to [..., L, S] */
    double dropout_p;     /* in [0, 1); applied whenever positive (pass 0 in eval) */
    bool is_causal;       /* query i sees keys 0..i (top-left triangle); excludes attn_mask */
    double scale;         /* 0: 1/sqrt(E) (a real 0: TG_SDPA_OPTS(.scale = 0)) */
    bool enable_gqa;      /* key/value with fewer heads (dim -3) than the query, a divisor of
                           * its count: query head h uses key head h / (Hq / Hk) */
    bool defaults_filled; /* set by TG_SDPA_OPTS(...): every field as written (core/options.h) */
} tg_sdpa_opts;
/* scale NAN: 1/sqrt(E) (PyTorch's scale=None); any value given is as written. */
#define TG_SDPA_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_sdpa_opts, .scale = NAN, __VA_ARGS__)

/* F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale,
 * enable_gqa). Fused (FlashAttention-2) on the CPU, and on CUDA for head dims up to
 * 128: blocks of queries against blocks of keys with an online softmax; the backward
 * recomputes the scores from q, k and the saved per-row log-sum-exp, so forward +
 * backward hold O(L + S) per problem beyond inputs, outputs and gradients (never the
 * [L, S] scores). float16/bfloat16 inputs are computed in float32 and the output
 * rounded once to their dtype. The composed formula (matmul, softmax, dropout) serves
 * dropout_p > 0, an attn_mask that requires grad, other devices or head dims, and
 * second derivatives (a backward under create_graph records the composed formula's
 * gradients, so they differentiate again). docs/attention.md. */
tg_tensor *tg_scaled_dot_product_attention_opts(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_sdpa_opts opts);

/* The composed formula itself, always: softmax((q * scale) k^T + mask) v of matmul,
 * softmax and dropout ops (the fused op's reference in tests and benchmarks). */
tg_tensor *tg_scaled_dot_product_attention_composed(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_sdpa_opts opts);

/* softmax(q k^T / sqrt(E) + mask) v with q [..., L, E], k [..., S, E], v [..., S, Ev]
 * (leading dims broadcast) -> [..., L, Ev]. attn_mask (or NULL) broadcasts to
 * [..., L, S]: bool, true where a query may attend (false is -inf), or floating,
 * added to the scores. is_causal: query i attends to keys 0..i (the top-left
 * triangle of [L, S]); it excludes attn_mask, as PyTorch. dropout_p in [0, 1) is
 * applied to the attention weights whenever it is positive (as F.dropout with
 * training=True; pass 0 in eval). A row with every key masked gives NaN, as
 * PyTorch's math path. tg_scaled_dot_product_attention_opts with these fields. */
tg_tensor *tg_scaled_dot_product_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *attn_mask,
                                           double dropout_p, bool is_causal);

/* The composed formula with the attention weights (softmax, after dropout) into *weights (a NEW
 * reference in the caller's scope), for modules that return them (MultiheadAttention). */
tg_tensor *tg_attention_with_weights(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *attn_mask, double dropout_p,
                                     bool is_causal, tg_tensor **weights);

#ifdef __cplusplus
}
#endif
#endif
