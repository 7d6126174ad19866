/* torch.nn.MultiheadAttention on tg_attention_with_weights (ops/attention.h).
 * Constructor as in nn/layers.h: a NEW module or NULL + error; float32 CPU. */
#ifndef TG_NN_ATTENTION_H
#define TG_NN_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "nn/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double dropout;     /* on the attention weights, in training */
    bool no_bias;       /* bias=False: no in_proj_bias, out_proj without bias */
    bool batch_first;   /* [B, L, E] instead of [L, B, E] */
    int64_t kdim, vdim; /* key's and value's feature sizes; 0: embed_dim */
    bool add_bias_kv;   /* learned bias_k, bias_v [1, 1, E] appended to the keys and values */
    bool add_zero_attn; /* a zero key and value appended (after bias_k, bias_v) */
} tg_mha_opts;

/* torch.nn.MultiheadAttention(embed_dim, num_heads, dropout, bias, add_bias_kv,
 * add_zero_attn, kdim, vdim, batch_first), parameters as PyTorch's:
 * - kdim == vdim == embed_dim: "in_proj_weight" [3E, E] (xavier_uniform_);
 *   otherwise "q_proj_weight" [E, E], "k_proj_weight" [E, kdim], "v_proj_weight"
 *   [E, vdim] (each xavier_uniform_);
 * - "in_proj_bias" [3E] (zeros), child "out_proj" (Linear(E, E), bias zeroed);
 * - with add_bias_kv, "bias_k" and "bias_v" [1, 1, E] (xavier_normal_),
 * drawn in PyTorch's order (out_proj's Linear init, the projection weights, bias_k,
 * bias_v). Fails unless num_heads divides embed_dim and kdim, vdim >= 0. */
tg_module *tg_nn_multihead_attention(int64_t embed_dim, int64_t num_heads, tg_mha_opts opts);

/* The call's optional arguments (zero = PyTorch's defaults). */
typedef struct {
    /* [B, S] (or [S] unbatched) bool, true = that key is ignored; or NULL */
    tg_tensor *key_padding_mask;
    /* [L, S] or [B * num_heads, L, S]: bool, true = NOT allowed (MultiheadAttention's
     * convention, the opposite of scaled_dot_product_attention's), or floating, added */
    tg_tensor *attn_mask;
    bool per_head_weights; /* average_attn_weights=False: weights [B, num_heads, L, S] */
    /* PyTorch 2's is_causal hint: with attn_mask NULL, query i attends to keys 0..i (the
     * top-left triangle of [L, S], as generate_square_subsequent_mask for L == S), through
     * the fused attention's own causal path when nothing else needs a mask; with an
     * attn_mask, that mask is used as given (the hint says it is causal, as PyTorch). */
    bool is_causal;
} tg_mha_call_opts;

/* attn_output, attn_weights = m(query, key, value, key_padding_mask, need_weights,
 * attn_mask, average_attn_weights): query [L, B, E], key [S, B, kdim] and value
 * [S, B, vdim] ([B, L, E] with batch_first; [L, E] and [S, *] unbatched) -> *output
 * [L, B, E]; *weights (when weights is not NULL: need_weights=True) [B, L, S'] averaged
 * over the heads, or [B, num_heads, L, S'], S' = S + add_bias_kv + add_zero_attn (the
 * masks are given for S and take the appended keys as unmasked, as PyTorch pads them).
 * NEW references in the caller's scope.
 * tg_forward(m, x) is self-attention m(x, x, x)'s output; hooks run with tg_forward only. */
tg_status tg_mha_forward(tg_module *m, tg_tensor *query, tg_tensor *key, tg_tensor *value, tg_mha_call_opts opts,
                         tg_tensor **output, tg_tensor **weights);

#ifdef __cplusplus
}
#endif
#endif
