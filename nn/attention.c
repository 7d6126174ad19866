/* MultiheadAttention as F.multi_head_attention_forward of PyTorch 1.13 (the packed
 * in-projection, heads folded into the batch [B * heads, L, head_dim], masks merged
 * into one additive float mask, dropout on the weights in training, out_proj), with
 * the attention itself from ops/attention.c: the fused op when the weights are not
 * asked for, the composed formula (which makes them) when they are. See nn/attention.h. */
#include "nn/attention.h"

#include <math.h>
#include <stdio.h>

#include "autograd/grad_mode.h"
#include "core/scope.h"
#include "nn/layer_helpers.h"
#include "nn/layers.h"
#include "ops/attention.h"
#include "ops/composite.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/matmul.h"
#include "ops/pad.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"

typedef struct {
    int64_t embed_dim, num_heads;
    double dropout;
    bool batch_first;
    int64_t kdim, vdim;
    bool separate_weights; /* kdim or vdim differ from embed_dim: q/k/v_proj_weight */
    bool add_bias_kv, add_zero_attn;
} mha_state;

/* A bool mask (true = masked) as 0 / -inf in dtype; a floating one cast to dtype. */
static tg_tensor *additive(tg_tensor *mask, tg_dtype dtype) {
    if (tg_dtype_of(mask) == TG_BOOL) return tg_cast(tg_where_scalars(mask, -INFINITY, 0.0), dtype);
    return tg_dtype_of(mask) == dtype ? mask : tg_cast(mask, dtype);
}

/* query [L, B, E] / [B, L, E] (or unbatched [L, E]), key and value alike with the
 * module's kdim / vdim, one batch size, key and value of one length. */
static tg_status check_inputs(const mha_state *s, tg_tensor *query, tg_tensor *key, tg_tensor *value) {
    int64_t e = s->embed_dim;
    int nd = tg_ndim(query);
    bool batched = nd == 3;
    int seq_dim = batched && s->batch_first ? 1 : 0;
    bool shapes_ok = (nd == 2 || nd == 3) && tg_ndim(key) == nd && tg_ndim(value) == nd && tg_size(query, -1) == e &&
                     tg_size(key, -1) == s->kdim && tg_size(value, -1) == s->vdim &&
                     tg_size(key, seq_dim) == tg_size(value, seq_dim);
    int batch_dim = s->batch_first ? 0 : 1;
    if (shapes_ok && batched)
        shapes_ok = tg_size(key, batch_dim) == tg_size(query, batch_dim) &&
                    tg_size(value, batch_dim) == tg_size(query, batch_dim);
    if (shapes_ok) return TG_OK;
    /* kdim and vdim name themselves when they differ from E */
    char a[96], b[96], c[96], kd[32] = "E", vd[32] = "E", want[160];
    if (s->separate_weights) {
        snprintf(kd, sizeof kd, "kdim=%lld", (long long)s->kdim);
        snprintf(vd, sizeof vd, "vdim=%lld", (long long)s->vdim);
    }
    snprintf(want, sizeof want, "%s, [%s, %s], [%s, %s] (or unbatched [L, E], [S, %s], [S, %s])",
             s->batch_first ? "[B, L, E]" : "[L, B, E]", s->batch_first ? "B, S" : "S, B", kd,
             s->batch_first ? "B, S" : "S, B", vd, kd, vd);
    return tg_error("MultiheadAttention(embed_dim=%lld, num_heads=%lld): query %s, key %s and value %s must be %s "
                    "with one batch size, key and value of one length",
                    (long long)e, (long long)s->num_heads, nn_shape_text(query, a, sizeof a),
                    nn_shape_text(key, b, sizeof b), nn_shape_text(value, c, sizeof c), want);
}

/* The masks as one additive [L, S] or [B * heads, L, S] (or [B * heads, 1, S]) in
 * dtype, or NULL when there is none; *mask set, status returned. */
static tg_status combined_mask(const mha_state *s, const tg_mha_call_opts *o, bool batched, int64_t l, int64_t bsz,
                               int64_t src, tg_dtype dtype, tg_tensor **mask) {
    char a[96], b[96];
    int64_t heads = s->num_heads;
    *mask = NULL;
    if (o->attn_mask) {
        tg_tensor *am = o->attn_mask;
        bool ok = tg_dtype_of(am) == TG_BOOL || tg_dtype_is_floating(tg_dtype_of(am));
        ok =
            ok && ((tg_ndim(am) == 2 && tg_size(am, 0) == l && tg_size(am, 1) == src) ||
                   (tg_ndim(am) == 3 && tg_size(am, 0) == bsz * heads && tg_size(am, 1) == l && tg_size(am, 2) == src));
        if (!ok)
            return tg_error("MultiheadAttention: attn_mask %s (%s) must be bool or floating, [%lld, %lld] or "
                            "[%lld, %lld, %lld]",
                            nn_shape_text(am, a, sizeof a), tg_dtype_name(tg_dtype_of(am)), (long long)l,
                            (long long)src, (long long)(bsz * heads), (long long)l, (long long)src);
        *mask = additive(am, dtype);
    }
    if (o->key_padding_mask) {
        tg_tensor *kp = o->key_padding_mask;
        tg_shape want = batched ? TG_SHAPE(bsz, src) : TG_SHAPE(src);
        if (tg_dtype_of(kp) != TG_BOOL || !tg_shape_equal(tg_shape_of(kp), want))
            return tg_error("MultiheadAttention: key_padding_mask %s (%s) must be bool %s",
                            nn_shape_text(kp, a, sizeof a), tg_dtype_name(tg_dtype_of(kp)),
                            tg_shape_str(want, b, sizeof b));
        tg_tensor *kpf = tg_reshape(additive(kp, dtype), TG_SHAPE(bsz, 1, 1, src));
        kpf = tg_reshape(tg_expand(kpf, TG_SHAPE(bsz, heads, 1, src)), TG_SHAPE(bsz * heads, 1, src));
        *mask = *mask ? tg_add(*mask, kpf) : kpf;
        if (!*mask) return TG_ERROR;
    }
    return TG_OK;
}

/* The in-projection of q, k, v ([len, B, E]) to [B * heads, len, hd]: packed (rows
 * [0, E) of in_proj_weight for q, [E, 2E) for k, [2E, 3E) for v) or q/k/v_proj_weight;
 * in_proj_bias is packed either way; bias_k / bias_v and the zero position appended. */
static tg_status in_projection(tg_module *m, const mha_state *s, tg_tensor *const in[3], const int64_t lens[3],
                               int64_t bsz, tg_tensor *proj[3]) {
    int64_t e = s->embed_dim, heads = s->num_heads, hd = e / heads;
    tg_tensor *w = s->separate_weights ? NULL : tg_module_param(m, "in_proj_weight");
    tg_tensor *bias = tg_module_param(m, "in_proj_bias");
    static const char *const separate[3] = {"q_proj_weight", "k_proj_weight", "v_proj_weight"};
    for (int i = 0; i < 3; i++) {
        tg_tensor *wi = w ? tg_narrow(w, 0, i * e, e) : tg_module_param(m, separate[i]);
        proj[i] = tg_linear(in[i], wi, bias ? tg_narrow(bias, 0, i * e, e) : NULL); /* [len, B, E] */
        if (i > 0 && s->add_bias_kv && proj[i]) { /* bias_k / bias_v as one more position, every batch */
            tg_tensor *extra = tg_expand(tg_module_param(m, i == 1 ? "bias_k" : "bias_v"), TG_SHAPE(1, bsz, e));
            tg_tensor *parts[2] = {proj[i], extra};
            proj[i] = extra ? tg_cat(parts, 2, 0) : NULL;
        }
        int64_t len = i > 0 && s->add_bias_kv ? lens[i] + 1 : lens[i];
        proj[i] = tg_transpose(tg_reshape(proj[i], TG_SHAPE(len, bsz * heads, hd)), 0, 1); /* [B * heads, len, hd] */
        if (i > 0 && s->add_zero_attn && proj[i]) {
            tg_tensor *parts[2] = {proj[i],
                                   tg_zeros(TG_SHAPE(bsz * heads, 1, hd),
                                            (tg_opts){.dtype = tg_dtype_of(proj[i]), .device = tg_device_of(proj[i])})};
            proj[i] = parts[1] ? tg_cat(parts, 2, 1) : NULL;
        }
        if (!proj[i]) return TG_ERROR;
    }
    return TG_OK;
}

/* Runs in the caller's scope. */
static tg_status run(tg_module *m, tg_tensor *query, tg_tensor *key, tg_tensor *value, tg_mha_call_opts o,
                     tg_tensor **output, tg_tensor **weights) {
    const mha_state *s = tg_module_state(m);
    int64_t e = s->embed_dim, heads = s->num_heads;
    if (check_inputs(s, query, key, value)) return TG_ERROR;
    bool batched = tg_ndim(query) == 3;
    tg_tensor *q = query, *k = key, *v = value;
    if (!batched) {
        q = tg_unsqueeze(q, 1), k = tg_unsqueeze(k, 1), v = tg_unsqueeze(v, 1);
    } else if (s->batch_first) {
        q = tg_transpose(q, 0, 1), k = tg_transpose(k, 0, 1), v = tg_transpose(v, 0, 1);
    }
    if (!q || !k || !v) return TG_ERROR;
    int64_t l = tg_size(q, 0), bsz = tg_size(q, 1), src = tg_size(k, 0);

    /* is_causal without a mask: the fused op's causal path when no other mask joins it and
     * no key is appended (its triangle would hide the appended keys, which PyTorch's padded
     * mask leaves visible); otherwise the triangle as a bool mask, true above the diagonal */
    int64_t extra_keys = (int64_t)s->add_bias_kv + (int64_t)s->add_zero_attn;
    bool fused_causal = o.is_causal && !o.attn_mask && !o.key_padding_mask && !weights && !extra_keys;
    if (o.is_causal && !o.attn_mask && !fused_causal) {
        o.attn_mask = tg_triu(tg_ones(TG_SHAPE(l, src), (tg_opts){.dtype = TG_BOOL, .device = tg_device_of(query)}), 1);
        if (!o.attn_mask) return TG_ERROR;
    }
    tg_tensor *mask, *proj[3];
    if (combined_mask(s, &o, batched, l, bsz, src, tg_dtype_of(query), &mask)) return TG_ERROR;
    if (in_projection(m, s, (tg_tensor *const[]){q, k, v}, (const int64_t[]){l, src, src}, bsz, proj)) return TG_ERROR;
    /* the appended keys are unmasked: PyTorch pads both masks with zeros (False) */
    if (mask && extra_keys) {
        int64_t pad[2] = {0, extra_keys};
        mask = tg_pad(mask, pad, 2, TG_PAD_CONSTANT, 0.0);
        if (!mask) return TG_ERROR;
    }
    src += extra_keys;
    double p = tg_is_training(m) ? s->dropout : 0.0;
    tg_tensor *attn_weights = NULL; /* the weights need the composed formula; the fused op otherwise */
    tg_tensor *attn = weights ? tg_attention_with_weights(proj[0], proj[1], proj[2], mask, p, false, &attn_weights)
                              : tg_scaled_dot_product_attention(proj[0], proj[1], proj[2], mask, p, fused_causal);
    if (!attn) return TG_ERROR;
    tg_tensor *merged = tg_reshape(tg_transpose(attn, 0, 1), TG_SHAPE(l, bsz, e));
    tg_module *out_proj = tg_module_child(m, "out_proj");
    tg_tensor *out =
        merged ? tg_linear(merged, tg_module_param(out_proj, "weight"), tg_module_param(out_proj, "bias")) : NULL;
    if (!out) return TG_ERROR;
    if (!batched) out = tg_squeeze(out, 1);
    else if (s->batch_first) out = tg_transpose(out, 0, 1);
    tg_tensor *wts = NULL;
    if (weights) {
        wts = tg_reshape(attn_weights, TG_SHAPE(bsz, heads, l, src));
        if (!o.per_head_weights) wts = tg_div_scalar(tg_sum_dim(wts, 1, false), (double)heads);
        if (wts && !batched) wts = tg_squeeze(wts, 0);
        if (!wts) return TG_ERROR;
    }
    if (!out) return TG_ERROR;
    *output = out;
    if (weights) *weights = wts;
    return TG_OK;
}

static tg_tensor *mha_module_forward(tg_module *self, tg_tensor *x) {
    tg_tensor *out = NULL;
    return run(self, x, x, x, (tg_mha_call_opts){0}, &out, NULL) ? NULL : out;
}

static void mha_repr(tg_module *self, char *buf, size_t size) {
    mha_state *s = tg_module_state(self);
    int n = snprintf(buf, size, "embed_dim=%lld, num_heads=%lld, dropout=%g, batch_first=%s", (long long)s->embed_dim,
                     (long long)s->num_heads, s->dropout, s->batch_first ? "True" : "False");
    if (n >= 0 && (size_t)n < size && s->separate_weights)
        n += snprintf(buf + n, size - (size_t)n, ", kdim=%lld, vdim=%lld", (long long)s->kdim, (long long)s->vdim);
    if (n >= 0 && (size_t)n < size && s->add_bias_kv) n += snprintf(buf + n, size - (size_t)n, ", add_bias_kv=True");
    if (n >= 0 && (size_t)n < size && s->add_zero_attn) snprintf(buf + n, size - (size_t)n, ", add_zero_attn=True");
}

static const tg_module_type mha_type = {"MultiheadAttention", mha_module_forward, NULL, mha_repr};

tg_status tg_mha_forward(tg_module *m, tg_tensor *query, tg_tensor *key, tg_tensor *value, tg_mha_call_opts opts,
                         tg_tensor **output, tg_tensor **weights) {
    if (!output) return tg_error("tg_mha_forward: output is NULL");
    *output = NULL;
    if (weights) *weights = NULL;
    if (!m || tg_module_type_of(m) != &mha_type)
        return tg_error("tg_mha_forward: the module is %s, not a MultiheadAttention",
                        m ? tg_module_type_of(m)->name : "NULL");
    if (!query || !key || !value) return tg_error_null_input("MultiheadAttention", !query ? 0 : !key ? 1 : 2);
    tg_tensor *out = NULL, *w = NULL;
    tg_scope_begin();
    tg_status status = run(m, query, key, value, opts, &out, weights ? &w : NULL);
    if (!status) {
        tg_scope_return(out);
        if (w) tg_scope_return(w);
    }
    tg_scope_end();
    if (!status) {
        *output = out;
        if (weights) *weights = w;
    }
    return status;
}

tg_module *tg_nn_multihead_attention(int64_t embed_dim, int64_t num_heads, tg_mha_opts opts) {
    if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads || !(opts.dropout >= 0 && opts.dropout < 1) ||
        opts.kdim < 0 || opts.vdim < 0) {
        tg_error("tg_nn_multihead_attention: embed_dim=%lld must be divisible by num_heads=%lld (both positive), "
                 "dropout=%g in [0, 1), kdim=%lld and vdim=%lld positive (or 0: embed_dim)",
                 (long long)embed_dim, (long long)num_heads, opts.dropout, (long long)opts.kdim, (long long)opts.vdim);
        return NULL;
    }
    int64_t kdim = opts.kdim ? opts.kdim : embed_dim, vdim = opts.vdim ? opts.vdim : embed_dim;
    bool separate = kdim != embed_dim || vdim != embed_dim; /* PyTorch's not _qkv_same_embed_dim */
    tg_module *m = tg_module_new(&mha_type, sizeof(mha_state));
    *(mha_state *)tg_module_state(m) = (mha_state){embed_dim, num_heads, opts.dropout,     opts.batch_first,  kdim,
                                                   vdim,      separate,  opts.add_bias_kv, opts.add_zero_attn};
    tg_status status = TG_OK;
    TG_SCOPE {
        /* PyTorch's __init__ order: empty projection tensors, out_proj's Linear (which draws
         * its weight and bias), bias_k and bias_v, then _reset_parameters: xavier_uniform_ of
         * in_proj_weight (or q, k, v_proj_weight), zero biases, xavier_normal_(bias_k, bias_v) */
        static const char *const names[3] = {"q_proj_weight", "k_proj_weight", "v_proj_weight"};
        int64_t in_dims[3] = {embed_dim, kdim, vdim};
        tg_tensor *w[3] = {NULL, NULL, NULL};
        for (int i = 0; i < (separate ? 3 : 1); i++)
            w[i] =
                tg_empty(separate ? TG_SHAPE(embed_dim, in_dims[i]) : TG_SHAPE(3 * embed_dim, embed_dim), (tg_opts){0});
        tg_tensor *b = opts.no_bias ? NULL : tg_zeros(TG_SHAPE(3 * embed_dim), (tg_opts){0});
        tg_module *out_proj = tg_nn_linear(embed_dim, embed_dim, (tg_linear_opts){.no_bias = opts.no_bias});
        tg_tensor *bias_kv[2] = {NULL, NULL};
        for (int i = 0; opts.add_bias_kv && i < 2; i++) bias_kv[i] = tg_empty(TG_SHAPE(1, 1, embed_dim), (tg_opts){0});
        status = w[0] && (!separate || (w[1] && w[2])) && (b || opts.no_bias) && out_proj &&
                         (!opts.add_bias_kv || (bias_kv[0] && bias_kv[1]))
                     ? TG_OK
                     : TG_ERROR;
        for (int i = 0; !status && i < (separate ? 3 : 1); i++) status = tg_xavier_uniform_(w[i], 1.0);
        if (!status && !opts.no_bias) TG_NO_GRAD {
                status = tg_fill_(tg_module_param(out_proj, "bias"), 0.0);
            }
        for (int i = 0; !status && opts.add_bias_kv && i < 2; i++) status = tg_xavier_normal_(bias_kv[i], 1.0);
        for (int i = 0; !status && i < (separate ? 3 : 1); i++)
            status = tg_register_parameter(m, separate ? names[i] : "in_proj_weight", w[i]);
        if (!status && b) status = tg_register_parameter(m, "in_proj_bias", b);
        if (!status) status = tg_register_module(m, "out_proj", out_proj);
        else tg_module_free(out_proj);
        if (!status && opts.add_bias_kv) status = tg_register_parameter(m, "bias_k", bias_kv[0]);
        if (!status && opts.add_bias_kv) status = tg_register_parameter(m, "bias_v", bias_kv[1]);
    }
    if (status) {
        tg_module_free(m);
        return NULL;
    }
    return m;
}
