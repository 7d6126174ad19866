/* torch.nn.TransformerEncoderLayer / TransformerDecoderLayer and the stacks
 * TransformerEncoder / TransformerDecoder, built of MultiheadAttention (nn/attention.h),
 * Linear, LayerNorm and Dropout modules with PyTorch's names, so state dicts load from
 * PyTorch ("self_attn.in_proj_weight", "linear1.weight", "norm1.weight",
 * "layers.0.linear2.bias", "norm.weight", ...). Constructors as in nn/layers.h: a NEW
 * module owned by the caller, or NULL + error; float32 CPU. */
#ifndef TG_NN_TRANSFORMER_H
#define TG_NN_TRANSFORMER_H

#include <stdbool.h>
#include <stdint.h>

#include "nn/module.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The feed-forward block's activation: PyTorch's activation="relu" (the default) or
 * "gelu" (exact), or F.gelu(approximate="tanh") passed as a callable (GPT-2's). */
typedef enum {
    TG_TRANSFORMER_RELU = 0,
    TG_TRANSFORMER_GELU,
    TG_TRANSFORMER_GELU_TANH,
} tg_transformer_activation;

/* A layer's options (zero = PyTorch's defaults). */
typedef struct {
    int64_t dim_feedforward; /* 0: 2048 */
    double dropout;          /* 0: 0.1; no dropout: TG_TRANSFORMER_LAYER_OPTS(.dropout = 0) */
    tg_transformer_activation activation;
    double layer_norm_eps; /* 0: 1e-5 */
    bool batch_first;      /* [B, S, E] instead of [S, B, E] */
    bool norm_first;       /* pre-LayerNorm (x + f(norm(x))) instead of norm(x + f(x)) */
    bool defaults_filled;  /* set by TG_TRANSFORMER_LAYER_OPTS(...): every field as written (core/options.h) */
} tg_transformer_layer_opts;
#define TG_TRANSFORMER_LAYER_OPTS(...) \
    TG_OPTS_WITH_DEFAULTS(tg_transformer_layer_opts, TG_TRANSFORMER_LAYER_DEFAULTS, __VA_ARGS__)
#define TG_TRANSFORMER_LAYER_DEFAULTS .dim_feedforward = 2048, .dropout = 0.1, .layer_norm_eps = 1e-5

/* nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
 * layer_norm_eps, batch_first, norm_first): children "self_attn" (MultiheadAttention
 * with the layer's dropout and batch_first), "linear1" (d_model -> dim_feedforward),
 * "dropout", "linear2", "norm1", "norm2", "dropout1", "dropout2", made in PyTorch's
 * order, so after tg_manual_seed(s) the weights are PyTorch's. Fails unless nhead
 * divides d_model (both positive), dim_feedforward >= 0 and dropout in [0, 1). */
tg_module *tg_nn_transformer_encoder_layer(int64_t d_model, int64_t nhead, tg_transformer_layer_opts opts);
/* nn.TransformerDecoderLayer: as the encoder layer, with "multihead_attn" (the cross
 * attention over the memory) after "self_attn", and "norm3", "dropout3". */
tg_module *tg_nn_transformer_decoder_layer(int64_t d_model, int64_t nhead, tg_transformer_layer_opts opts);

/* nn.TransformerEncoder(encoder_layer, num_layers, norm) / nn.TransformerDecoder:
 * children "layers" (a ModuleList of num_layers layers: the one given is "layers.0",
 * the others copies of it, as PyTorch's deepcopy: the same weights, dtype, device and
 * mode, and the default generator left as PyTorch leaves it) and "norm" when norm is
 * not NULL (any module, run on the last layer's output). Takes ownership of layer and
 * norm, also on failure. Fails unless layer is a TransformerEncoderLayer
 * (TransformerDecoderLayer) and num_layers >= 1. */
tg_module *tg_nn_transformer_encoder(tg_module *encoder_layer, int num_layers, tg_module *norm);
tg_module *tg_nn_transformer_decoder(tg_module *decoder_layer, int num_layers, tg_module *norm);

/* The encoder's optional inputs (zero: none). */
typedef struct {
    /* src_mask ([S, S] or [B * nhead, S, S]): bool, true = NOT allowed, or floating, added
     * (MultiheadAttention's convention) */
    tg_tensor *mask;
    tg_tensor *key_padding_mask; /* src_key_padding_mask: [B, S] bool, true = padding */
    /* PyTorch 2's is_causal: with mask NULL, position i attends to 0..i (no mask to make);
     * with a mask, a hint that it is the causal one (it is used as given) */
    bool is_causal;
} tg_transformer_encoder_call_opts;

/* layer(src, src_mask, src_key_padding_mask, is_causal) for a TransformerEncoderLayer,
 * encoder(src, mask, src_key_padding_mask, is_causal) for a TransformerEncoder: src
 * [S, B, E] ([B, S, E] with batch_first, or unbatched [S, E]) -> the same shape. A NEW
 * reference in the caller's scope, or NULL + error naming the module and the shapes.
 * tg_forward(m, src) is the call without masks. Dropout runs in training mode only. */
tg_tensor *tg_transformer_encoder_forward(tg_module *m, tg_tensor *src, tg_transformer_encoder_call_opts opts);

/* The decoder's optional inputs (zero: none); masks as the encoder's. */
typedef struct {
    tg_tensor *tgt_mask;                /* [T, T] or [B * nhead, T, T] on the self-attention */
    tg_tensor *memory_mask;             /* [T, S] or [B * nhead, T, S] on the cross attention */
    tg_tensor *tgt_key_padding_mask;    /* [B, T] bool */
    tg_tensor *memory_key_padding_mask; /* [B, S] bool */
    bool tgt_is_causal, memory_is_causal;
} tg_transformer_decoder_call_opts;

/* layer(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
 * memory_key_padding_mask, tgt_is_causal, memory_is_causal) for a
 * TransformerDecoderLayer or a TransformerDecoder (every layer attends to the same
 * memory): tgt [T, B, E], memory [S, B, E] (batch_first: [B, T, E], [B, S, E];
 * unbatched [T, E], [S, E]) -> tgt's shape. As tg_transformer_encoder_forward;
 * tg_forward on a decoder fails (it needs the memory). */
tg_tensor *tg_transformer_decoder_forward(tg_module *m, tg_tensor *tgt, tg_tensor *memory,
                                          tg_transformer_decoder_call_opts opts);

#ifdef __cplusplus
}
#endif
#endif
