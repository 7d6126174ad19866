/* Scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention,
 * PyTorch 2's semantics), composed of matmul, softmax and dropout, so it runs and
 * differentiates on every device those run on. */
#ifndef TG_OPS_ATTENTION_H
#define TG_OPS_ATTENTION_H

#include <stdbool.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* softmax(q k^T / sqrt(E) + mask) v with q [..., L, E], k [..., S, E], v [..., S, Ev]
 * (leading dims broadcast) -> [..., L, Ev]. attn_mask (or NULL) broadcasts to
 * [..., L, S]: bool, true where a query may attend (false is -inf), or floating,
 * added to the scores. is_causal: query i attends to keys 0..i (the top-left
 * triangle of [L, S]); it excludes attn_mask, as PyTorch. dropout_p in [0, 1) is
 * applied to the attention weights whenever it is positive (as F.dropout with
 * training=True; pass 0 in eval). A row with every key masked gives NaN, as
 * PyTorch's math path. */
tg_tensor *tg_scaled_dot_product_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *attn_mask,
                                           double dropout_p, bool is_causal);

/* The same with the attention weights (softmax, after dropout) into *weights (a NEW
 * reference in the caller's scope), for modules that return them (MultiheadAttention). */
tg_tensor *tg_attention_with_weights(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *attn_mask, double dropout_p,
                                     bool is_causal, tg_tensor **weights);

#ifdef __cplusplus
}
#endif
#endif
