/* MultiheadAttention as F.multi_head_attention_forward of PyTorch 1.13 (the packed
 * in-projection, heads folded into the batch [B * heads, L, head_dim], masks merged
 * into one additive float mask, dropout on the weights in training, out_proj), with
 * the attention itself from ops/attention.c. See nn/attention.h. */
#include "nn/attention.h"

#include <math.h>
#include <stdio.h>

#include "autograd/grad_mode.h"
#include "core/scope.h"
#include "nn/layer_helpers.h"
#include "nn/layers.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/matmul.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"

typedef struct {
    int64_t embed_dim, num_heads;
    double dropout;
    bool batch_first;
} mha_state;

/* A bool mask (true = masked) as 0 / -inf in dtype; a floating one cast to dtype. */
static tg_tensor *additive(tg_tensor *mask, tg_dtype dtype) {
    if (tg_dtype_of(mask) == TG_BOOL) return tg_cast(tg_where_scalars(mask, -INFINITY, 0.0), dtype);
    return tg_dtype_of(mask) == dtype ? mask : tg_cast(mask, dtype);
}

/* Runs in the caller's scope. */
static tg_status run(tg_module *m, tg_tensor *query, tg_tensor *key, tg_tensor *value, tg_mha_call_opts o,
                     tg_tensor **output, tg_tensor **weights) {
    const mha_state *s = tg_module_state(m);
    int64_t e = s->embed_dim, heads = s->num_heads, hd = e / heads;
    char a[96], b[96], c[96];
    int nd = tg_ndim(query);
    bool batched = nd == 3;
    int seq_dim = batched && s->batch_first ? 1 : 0;
    bool shapes_ok = (nd == 2 || nd == 3) && tg_ndim(key) == nd && tg_ndim(value) == nd && tg_size(query, -1) == e &&
                     tg_size(key, -1) == e && tg_size(value, -1) == e &&
                     tg_size(key, seq_dim) == tg_size(value, seq_dim);
    int batch_dim = s->batch_first ? 0 : 1;
    if (shapes_ok && batched)
        shapes_ok = tg_size(key, batch_dim) == tg_size(query, batch_dim) &&
                    tg_size(value, batch_dim) == tg_size(query, batch_dim);
    if (!shapes_ok)
        return tg_error("MultiheadAttention(embed_dim=%lld, num_heads=%lld): query %s, key %s and value %s must be %s "
                        "with one batch size, key and value of one length",
                        (long long)e, (long long)heads, nn_shape_text(query, a, sizeof a),
                        nn_shape_text(key, b, sizeof b), nn_shape_text(value, c, sizeof c),
                        s->batch_first ? "[B, L, E], [B, S, E], [B, S, E] (or unbatched [L, E], [S, E])"
                                       : "[L, B, E], [S, B, E], [S, B, E] (or unbatched [L, E], [S, E])");
    tg_tensor *q = query, *k = key, *v = value;
    if (!batched) {
        q = tg_unsqueeze(q, 1), k = tg_unsqueeze(k, 1), v = tg_unsqueeze(v, 1);
    } else if (s->batch_first) {
        q = tg_transpose(q, 0, 1), k = tg_transpose(k, 0, 1), v = tg_transpose(v, 0, 1);
    }
    if (!q || !k || !v) return TG_ERROR;
    int64_t l = tg_size(q, 0), bsz = tg_size(q, 1), src = tg_size(k, 0);

    /* masks: one additive [L, S] or [B * heads, L, S] (or [B * heads, 1, S]) */
    tg_tensor *mask = NULL;
    if (o.attn_mask) {
        tg_tensor *am = o.attn_mask;
        bool ok = tg_dtype_of(am) == TG_BOOL || tg_dtype_is_floating(tg_dtype_of(am));
        ok = ok && ((tg_ndim(am) == 2 && tg_size(am, 0) == l && tg_size(am, 1) == src) ||
                    (tg_ndim(am) == 3 && tg_size(am, 0) == bsz * heads && tg_size(am, 1) == l &&
                     tg_size(am, 2) == src));
        if (!ok)
            return tg_error("MultiheadAttention: attn_mask %s (%s) must be bool or floating, [%lld, %lld] or "
                            "[%lld, %lld, %lld]", nn_shape_text(am, a, sizeof a), tg_dtype_name(tg_dtype_of(am)),
                            (long long)l, (long long)src, (long long)(bsz * heads), (long long)l, (long long)src);
        mask = additive(am, tg_dtype_of(query));
    }
    if (o.key_padding_mask) {
        tg_tensor *kp = o.key_padding_mask;
        tg_shape want = batched ? TG_SHAPE(bsz, src) : TG_SHAPE(src);
        if (tg_dtype_of(kp) != TG_BOOL || !tg_shape_equal(tg_shape_of(kp), want))
            return tg_error("MultiheadAttention: key_padding_mask %s (%s) must be bool %s",
                            nn_shape_text(kp, a, sizeof a), tg_dtype_name(tg_dtype_of(kp)),
                            tg_shape_str(want, b, sizeof b));
        tg_tensor *kpf = tg_reshape(additive(kp, tg_dtype_of(query)), TG_SHAPE(bsz, 1, 1, src));
        kpf = tg_reshape(tg_expand(kpf, TG_SHAPE(bsz, heads, 1, src)), TG_SHAPE(bsz * heads, 1, src));
        mask = mask ? tg_add(mask, kpf) : kpf;
        if (!mask) return TG_ERROR;
    }

    /* the packed in-projection: rows [0, E) for q, [E, 2E) for k, [2E, 3E) for v */
    tg_tensor *w = tg_module_param(m, "in_proj_weight"), *bias = tg_module_param(m, "in_proj_bias");
    tg_tensor *proj[3], *in[3] = {q, k, v};
    int64_t lens[3] = {l, src, src};
    for (int i = 0; i < 3; i++) {
        tg_tensor *p = tg_linear(in[i], tg_narrow(w, 0, i * e, e), bias ? tg_narrow(bias, 0, i * e, e) : NULL);
        proj[i] = tg_transpose(tg_reshape(p, TG_SHAPE(lens[i], bsz * heads, hd)), 0, 1); /* [B * heads, len, hd] */
        if (!proj[i]) return TG_ERROR;
    }
    double p = tg_is_training(m) ? s->dropout : 0.0;
    tg_tensor *attn_weights = NULL;
    tg_tensor *attn = tg_attention_with_weights(proj[0], proj[1], proj[2], mask, p, false, &attn_weights);
    if (!attn) return TG_ERROR;
    tg_tensor *merged = tg_reshape(tg_transpose(attn, 0, 1), TG_SHAPE(l, bsz, e));
    tg_module *out_proj = tg_module_child(m, "out_proj");
    tg_tensor *out = merged ? tg_linear(merged, tg_module_param(out_proj, "weight"), tg_module_param(out_proj, "bias"))
                            : NULL;
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
    snprintf(buf, size, "embed_dim=%lld, num_heads=%lld, dropout=%g, batch_first=%s", (long long)s->embed_dim,
             (long long)s->num_heads, s->dropout, s->batch_first ? "True" : "False");
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
    if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads || !(opts.dropout >= 0 && opts.dropout < 1)) {
        tg_error("tg_nn_multihead_attention: embed_dim=%lld must be divisible by num_heads=%lld (both positive), "
                 "dropout=%g in [0, 1)", (long long)embed_dim, (long long)num_heads, opts.dropout);
        return NULL;
    }
    tg_module *m = tg_module_new(&mha_type, sizeof(mha_state));
    *(mha_state *)tg_module_state(m) = (mha_state){embed_dim, num_heads, opts.dropout, opts.batch_first};
    tg_status status = TG_OK;
    TG_SCOPE {
        /* PyTorch's __init__ order: empty in_proj tensors, out_proj's Linear (which draws its
         * weight and bias), then _reset_parameters: xavier_uniform_(in_proj_weight), zero biases */
        tg_tensor *w = tg_empty(TG_SHAPE(3 * embed_dim, embed_dim), (tg_opts){0});
        tg_tensor *b = opts.no_bias ? NULL : tg_zeros(TG_SHAPE(3 * embed_dim), (tg_opts){0});
        tg_module *out_proj = tg_nn_linear(embed_dim, embed_dim, (tg_linear_opts){.no_bias = opts.no_bias});
        status = w && (b || opts.no_bias) && out_proj ? TG_OK : TG_ERROR;
        if (!status) status = tg_xavier_uniform_(w, 1.0);
        if (!status && !opts.no_bias) TG_NO_GRAD { status = tg_fill_(tg_module_param(out_proj, "bias"), 0.0); }
        if (!status) status = tg_register_parameter(m, "in_proj_weight", w);
        if (!status && b) status = tg_register_parameter(m, "in_proj_bias", b);
        if (!status) status = tg_register_module(m, "out_proj", out_proj);
        else tg_module_free(out_proj);
    }
    if (status) {
        tg_module_free(m);
        return NULL;
    }
    return m;
}
