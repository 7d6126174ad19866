/* Transformer layers and stacks as PyTorch 2's torch/nn/modules/transformer.py (the
 * "slow path": the fused fast path of PyTorch's inference computes the same), on
 * MultiheadAttention, Linear, LayerNorm and Dropout children. See nn/transformer.h. */
#include "nn/transformer.h"

#include <stdio.h>
#include <stdlib.h>

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "core/rng.h"
#include "core/scope.h"
#include "nn/attention.h"
#include "nn/layer_helpers.h"
#include "nn/layers.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"

typedef struct {
    int64_t d_model, nhead;
    tg_transformer_layer_opts opts; /* as given: the stacks make their copies from them */
} layer_state;

static const char *activation_name(tg_transformer_activation a) {
    return a == TG_TRANSFORMER_GELU ? "gelu" : a == TG_TRANSFORMER_GELU_TANH ? "gelu_tanh" : "relu";
}

static tg_tensor *activation(tg_transformer_activation a, tg_tensor *x) {
    return a == TG_TRANSFORMER_GELU ? tg_gelu(x) : a == TG_TRANSFORMER_GELU_TANH ? tg_gelu_tanh(x) : tg_relu(x);
}

static tg_tensor *child(tg_module *m, const char *name, tg_tensor *x) {
    return tg_forward(tg_module_child(m, name), x);
}

/* x must be [S, B, E] / [B, S, E] or [S, E] with E = d_model. */
static tg_status check_input(tg_module *m, const char *what, tg_tensor *x) {
    const layer_state *s = tg_module_state(m);
    if ((tg_ndim(x) == 2 || tg_ndim(x) == 3) && tg_size(x, -1) == s->d_model) return TG_OK;
    char a[96];
    return tg_error("%s(d_model=%lld, nhead=%lld): %s %s must be %s [%s, %lld] (or unbatched [S, %lld])",
                    tg_module_type_of(m)->name, (long long)s->d_model, (long long)s->nhead, what,
                    nn_shape_text(x, a, sizeof a), s->opts.batch_first ? "batch_first" : "sequence-first",
                    s->opts.batch_first ? "B, S" : "S, B", (long long)s->d_model, (long long)s->d_model);
}

/* dropout_k(attn(q, kv, kv)): _sa_block and _mha_block. In the caller's scope. */
static tg_tensor *attention_block(tg_module *m, const char *attn, const char *dropout, tg_tensor *q, tg_tensor *kv,
                                  tg_tensor *mask, tg_tensor *key_padding_mask, bool is_causal) {
    tg_mha_call_opts o = {.key_padding_mask = key_padding_mask, .attn_mask = mask, .is_causal = is_causal};
    tg_tensor *out = NULL;
    if (tg_mha_forward(tg_module_child(m, attn), q, kv, kv, o, &out, NULL)) return NULL;
    return child(m, dropout, out);
}

/* dropout_k(linear2(dropout(activation(linear1(x))))): _ff_block. */
static tg_tensor *feed_forward(tg_module *m, const char *dropout, tg_tensor *x) {
    const layer_state *s = tg_module_state(m);
    tg_tensor *h = child(m, "dropout", activation(s->opts.activation, child(m, "linear1", x)));
    return child(m, dropout, child(m, "linear2", h));
}

/* x + f(norm(x)) with norm_first, norm(x + f(x)) otherwise; f is block `b` of the layer. */
typedef struct {
    tg_tensor *kv, *mask, *key_padding_mask;
    bool is_causal;
} block_args;

static tg_tensor *block(tg_module *m, int b, const char *norm, tg_tensor *x, const block_args *a) {
    const layer_state *s = tg_module_state(m);
    tg_tensor *in = s->opts.norm_first ? child(m, norm, x) : x;
    if (!in) return NULL;
    tg_tensor *f;
    if (b == 0) f = attention_block(m, "self_attn", "dropout1", in, in, a->mask, a->key_padding_mask, a->is_causal);
    else if (b == 1)
        f = attention_block(m, "multihead_attn", "dropout2", in, a->kv, a->mask, a->key_padding_mask, a->is_causal);
    else f = feed_forward(m, b == 2 ? "dropout3" : "dropout2", in);
    tg_tensor *sum = f ? tg_add(x, f) : NULL;
    return s->opts.norm_first || !sum ? sum : child(m, norm, sum);
}

static tg_tensor *encoder_layer_run(tg_module *m, tg_tensor *src, const tg_transformer_encoder_call_opts *o) {
    if (check_input(m, "src", src)) return NULL;
    block_args sa = {NULL, o->mask, o->key_padding_mask, o->is_causal};
    tg_tensor *x = block(m, 0, "norm1", src, &sa);
    return x ? block(m, 3, "norm2", x, &sa) : NULL; /* 3: the feed-forward with dropout2 */
}

static tg_tensor *decoder_layer_run(tg_module *m, tg_tensor *tgt, tg_tensor *memory,
                                    const tg_transformer_decoder_call_opts *o) {
    if (check_input(m, "tgt", tgt) || check_input(m, "memory", memory)) return NULL;
    block_args sa = {NULL, o->tgt_mask, o->tgt_key_padding_mask, o->tgt_is_causal};
    block_args ca = {memory, o->memory_mask, o->memory_key_padding_mask, o->memory_is_causal};
    tg_tensor *x = block(m, 0, "norm1", tgt, &sa);
    if (x) x = block(m, 1, "norm2", x, &ca);
    return x ? block(m, 2, "norm3", x, &sa) : NULL;
}

static tg_tensor *encoder_layer_forward(tg_module *self, tg_tensor *x) {
    return encoder_layer_run(self, x, &(tg_transformer_encoder_call_opts){0});
}

static tg_tensor *decoder_forward_refused(tg_module *self, tg_tensor *x) {
    (void)x;
    return tg_error("%s: the forward needs the memory too: call tg_transformer_decoder_forward(m, tgt, memory, opts)",
                    tg_module_type_of(self)->name),
           NULL;
}

static void layer_repr(tg_module *self, char *buf, size_t size) {
    const layer_state *s = tg_module_state(self);
    snprintf(buf, size, "activation=%s, batch_first=%s, norm_first=%s", activation_name(s->opts.activation),
             s->opts.batch_first ? "True" : "False", s->opts.norm_first ? "True" : "False");
}

static const tg_module_type encoder_layer_type = {"TransformerEncoderLayer", encoder_layer_forward, NULL, layer_repr};
static const tg_module_type decoder_layer_type = {"TransformerDecoderLayer", decoder_forward_refused, NULL, layer_repr};

static tg_module *make_layer(const tg_module_type *type, int64_t d_model, int64_t nhead,
                             tg_transformer_layer_opts opts) {
    const char *ctor =
        type == &encoder_layer_type ? "tg_nn_transformer_encoder_layer" : "tg_nn_transformer_decoder_layer";
    double p = tg_option(opts.dropout, 0.1, opts.defaults_filled);
    int64_t ff = opts.dim_feedforward ? opts.dim_feedforward : 2048;
    if (d_model <= 0 || nhead <= 0 || d_model % nhead || ff < 0 || !(p >= 0 && p < 1) ||
        (unsigned)opts.activation > TG_TRANSFORMER_GELU_TANH) {
        tg_error("%s: d_model=%lld must be divisible by nhead=%lld (both positive), dim_feedforward=%lld >= 0, "
                 "dropout=%g in [0, 1), activation relu, gelu or gelu_tanh (got %d)",
                 ctor, (long long)d_model, (long long)nhead, (long long)ff, p, (int)opts.activation);
        return NULL;
    }
    bool decoder = type == &decoder_layer_type;
    tg_module *m = tg_module_new(type, sizeof(layer_state));
    *(layer_state *)tg_module_state(m) = (layer_state){d_model, nhead, opts};
    tg_mha_opts attn = {.dropout = p, .batch_first = opts.batch_first};
    tg_layer_norm_opts ln = {.eps = opts.layer_norm_eps, .defaults_filled = opts.defaults_filled};
    /* PyTorch's __init__ order, which is the order of the random draws */
    tg_status status = tg_register_module(m, "self_attn", tg_nn_multihead_attention(d_model, nhead, attn));
    if (!status && decoder)
        status = tg_register_module(m, "multihead_attn", tg_nn_multihead_attention(d_model, nhead, attn));
    if (!status) status = tg_register_module(m, "linear1", tg_nn_linear(d_model, ff, (tg_linear_opts){0}));
    if (!status) status = tg_register_module(m, "dropout", tg_nn_dropout(p));
    if (!status) status = tg_register_module(m, "linear2", tg_nn_linear(ff, d_model, (tg_linear_opts){0}));
    static const char *const norms[3] = {"norm1", "norm2", "norm3"}, *const drops[3] = {"dropout1", "dropout2",
                                                                                        "dropout3"};
    for (int i = 0; !status && i < (decoder ? 3 : 2); i++)
        status = tg_register_module(m, norms[i], tg_nn_layer_norm(TG_SHAPE(d_model), ln));
    for (int i = 0; !status && i < (decoder ? 3 : 2); i++) status = tg_register_module(m, drops[i], tg_nn_dropout(p));
    return nn_finish(m, status);
}

tg_module *tg_nn_transformer_encoder_layer(int64_t d_model, int64_t nhead, tg_transformer_layer_opts opts) {
    return make_layer(&encoder_layer_type, d_model, nhead, opts);
}

tg_module *tg_nn_transformer_decoder_layer(int64_t d_model, int64_t nhead, tg_transformer_layer_opts opts) {
    return make_layer(&decoder_layer_type, d_model, nhead, opts);
}

/* ---- the stacks ---- */

static tg_tensor *stack_norm(tg_module *m, tg_tensor *x) {
    tg_module *norm = tg_module_child(m, "norm");
    return norm && x ? tg_forward(norm, x) : x;
}

static tg_tensor *encoder_run(tg_module *m, tg_tensor *src, const tg_transformer_encoder_call_opts *o) {
    if (tg_module_type_of(m) == &encoder_layer_type) return encoder_layer_run(m, src, o);
    tg_module *layers = tg_module_child(m, "layers");
    tg_tensor *x = src;
    for (int i = 0; x && i < tg_nn_module_list_len(layers); i++)
        x = encoder_layer_run(tg_nn_module_list_get(layers, i), x, o);
    return stack_norm(m, x);
}

static tg_tensor *decoder_run(tg_module *m, tg_tensor *tgt, tg_tensor *memory,
                              const tg_transformer_decoder_call_opts *o) {
    if (tg_module_type_of(m) == &decoder_layer_type) return decoder_layer_run(m, tgt, memory, o);
    tg_module *layers = tg_module_child(m, "layers");
    tg_tensor *x = tgt;
    for (int i = 0; x && i < tg_nn_module_list_len(layers); i++)
        x = decoder_layer_run(tg_nn_module_list_get(layers, i), x, memory, o);
    return stack_norm(m, x);
}

static tg_tensor *encoder_forward(tg_module *self, tg_tensor *x) {
    return encoder_run(self, x, &(tg_transformer_encoder_call_opts){0});
}

static void stack_repr(tg_module *self, char *buf, size_t size) {
    snprintf(buf, size, "num_layers=%d", tg_nn_module_list_len(tg_module_child(self, "layers")));
}

static const tg_module_type encoder_type = {"TransformerEncoder", encoder_forward, NULL, stack_repr};
static const tg_module_type decoder_type = {"TransformerDecoder", decoder_forward_refused, NULL, stack_repr};

/* copy.deepcopy(layer): a layer made from layer's options, with the default generator
 * put back as it was (deepcopy draws nothing), then layer's values, dtype, device,
 * requires_grad flags and mode. */
static tg_module *copy_layer(tg_module *layer) {
    const layer_state *s = tg_module_state(layer);
    tg_rng_state rng = tg_rng_get_state();
    tg_module *copy = make_layer(tg_module_type_of(layer), s->d_model, s->nhead, s->opts);
    tg_rng_set_state(rng);
    if (!copy) return NULL;
    int n = 0, n_copy = 0;
    const tg_named_tensor *from = tg_state_dict(layer, &n);
    tg_status status = TG_OK;
    if (n > 0) status = tg_module_cast(copy, tg_dtype_of(from[0].tensor));
    if (!status && n > 0) status = tg_module_to(copy, tg_device_of(from[0].tensor));
    const tg_named_tensor *to = tg_state_dict(copy, &n_copy);
    TG_ASSERT(n == n_copy);
    TG_NO_GRAD {
        for (int i = 0; !status && i < n; i++) {
            status = tg_copy_(to[i].tensor, from[i].tensor);
            if (!status && !tg_requires_grad(from[i].tensor)) tg_requires_grad_(to[i].tensor, false);
        }
    }
    tg_train(copy, tg_is_training(layer));
    return nn_finish(copy, status);
}

static tg_module *make_stack(const tg_module_type *type, const tg_module_type *layer_type, tg_module *layer,
                             int num_layers, tg_module *norm) {
    const char *ctor = type == &encoder_type ? "tg_nn_transformer_encoder" : "tg_nn_transformer_decoder";
    if (!layer || tg_module_type_of(layer) != layer_type || num_layers < 1) {
        tg_error("%s: needs a %s (got %s) and num_layers >= 1 (got %d)", ctor, layer_type->name,
                 layer ? tg_module_type_of(layer)->name : "NULL", num_layers);
        tg_module_free(layer);
        tg_module_free(norm);
        return NULL;
    }
    /* ModuleList(layer, copy, copy, ...): it owns them all, also when a copy failed (NULL) */
    tg_module **layers = calloc((size_t)num_layers, sizeof *layers);
    TG_ASSERT(layers != NULL);
    layers[0] = layer;
    for (int i = 1; i < num_layers && layers[i - 1]; i++) layers[i] = copy_layer(layer);
    tg_module *list = tg_nn_module_list(num_layers, layers);
    free(layers);
    tg_module *m = tg_module_new(type, 0);
    tg_status status = list ? TG_OK : TG_ERROR;
    if (!status) status = tg_register_module(m, "layers", list);
    else tg_module_free(list);
    if (norm) {
        if (!status) status = tg_register_module(m, "norm", norm);
        else tg_module_free(norm);
    }
    return nn_finish(m, status);
}

tg_module *tg_nn_transformer_encoder(tg_module *encoder_layer, int num_layers, tg_module *norm) {
    return make_stack(&encoder_type, &encoder_layer_type, encoder_layer, num_layers, norm);
}

tg_module *tg_nn_transformer_decoder(tg_module *decoder_layer, int num_layers, tg_module *norm) {
    return make_stack(&decoder_type, &decoder_layer_type, decoder_layer, num_layers, norm);
}

/* ---- the calls with masks ---- */

tg_tensor *tg_transformer_encoder_forward(tg_module *m, tg_tensor *src, tg_transformer_encoder_call_opts opts) {
    if (!m || (tg_module_type_of(m) != &encoder_layer_type && tg_module_type_of(m) != &encoder_type))
        return tg_error("tg_transformer_encoder_forward: the module is %s, not a TransformerEncoderLayer or "
                        "TransformerEncoder",
                        m ? tg_module_type_of(m)->name : "NULL"),
               NULL;
    if (!src) return tg_error_null_input(tg_module_type_of(m)->name, 0), NULL;
    tg_tensor *out = NULL;
    TG_SCOPE { out = tg_scope_return(encoder_run(m, src, &opts)); }
    return out;
}

tg_tensor *tg_transformer_decoder_forward(tg_module *m, tg_tensor *tgt, tg_tensor *memory,
                                          tg_transformer_decoder_call_opts opts) {
    if (!m || (tg_module_type_of(m) != &decoder_layer_type && tg_module_type_of(m) != &decoder_type))
        return tg_error("tg_transformer_decoder_forward: the module is %s, not a TransformerDecoderLayer or "
                        "TransformerDecoder",
                        m ? tg_module_type_of(m)->name : "NULL"),
               NULL;
    if (!tgt || !memory) return tg_error_null_input(tg_module_type_of(m)->name, !tgt ? 0 : 1), NULL;
    tg_tensor *out = NULL;
    TG_SCOPE { out = tg_scope_return(decoder_run(m, tgt, memory, &opts)); }
    return out;
}
