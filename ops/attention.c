/* Attention as softmax((q / sqrt(E)) k^T + mask) v: q is scaled before the product,
 * as PyTorch 1.13's MultiheadAttention does (q_scaled = q / sqrt(E)). Masks become one
 * additive floating tensor (bool false / is_causal's upper triangle -> -inf). See
 * ops/attention.h. */
#include "ops/attention.h"

#include <math.h>
#include <stdlib.h>

#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"

/* -inf above the diagonal of [L, S], 0 on and below, in dtype on device. */
static tg_tensor *causal_mask(int64_t l, int64_t s, tg_dtype dtype, tg_device device) {
    double *m = malloc((size_t)(l * s) * sizeof *m + 1);
    TG_ASSERT(m != NULL);
    for (int64_t i = 0; i < l; i++)
        for (int64_t j = 0; j < s; j++) m[i * s + j] = j <= i ? 0.0 : -INFINITY;
    tg_tensor *t = tg_from_data(m, TG_SHAPE(l, s), (tg_opts){.dtype = TG_FLOAT64});
    free(m);
    return t ? tg_tensor_to(tg_cast(t, dtype), device) : NULL;
}

tg_tensor *tg_attention_with_weights(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *attn_mask, double dropout_p,
                                     bool is_causal, tg_tensor **weights) {
    const char *op = "tg_scaled_dot_product_attention";
    if (weights) *weights = NULL;
    if (tg_unusable_(q)) return tg_error_unusable_input(op, q, 0), NULL;
    if (tg_unusable_(k)) return tg_error_unusable_input(op, k, 1), NULL;
    if (tg_unusable_(v)) return tg_error_unusable_input(op, v, 2), NULL;
    char qs[96], ks[96], vs[96], ms[96], d1[16], d2[16];
    tg_shape_str(q->shape, qs, sizeof qs);
    tg_shape_str(k->shape, ks, sizeof ks);
    tg_shape_str(v->shape, vs, sizeof vs);
    int qn = q->shape.ndim, kn = k->shape.ndim, vn = v->shape.ndim;
    if (qn < 2 || kn < 2 || vn < 2 || q->shape.dims[qn - 1] != k->shape.dims[kn - 1] ||
        k->shape.dims[kn - 2] != v->shape.dims[vn - 2])
        return tg_error("%s: expected query [..., L, E], key [..., S, E] and value [..., S, Ev], got query %s, key %s, "
                        "value %s", op, qs, ks, vs), NULL;
    if (!tg_dtype_is_floating(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return tg_error("%s: expected query, key and value of one floating dtype, got %s, %s, %s", op,
                        tg_dtype_name(q->dtype), tg_dtype_name(k->dtype), tg_dtype_name(v->dtype)), NULL;
    if (!tg_device_equal(q->storage->device, k->storage->device) ||
        !tg_device_equal(q->storage->device, v->storage->device))
        return tg_error("%s: expected query, key and value on one device, got query on %s and key on %s", op,
                        tg_device_str(q->storage->device, d1), tg_device_str(k->storage->device, d2)), NULL;
    if (!(dropout_p >= 0 && dropout_p < 1))
        return tg_error("%s: dropout_p must be in [0, 1), got %g", op, dropout_p), NULL;
    if (is_causal && attn_mask)
        return tg_error("%s: is_causal and attn_mask are exclusive (pass one)", op), NULL;
    int64_t l = q->shape.dims[qn - 2], s = k->shape.dims[kn - 2];
    if (attn_mask) {
        tg_shape scores = TG_SHAPE(l, s), out;
        if ((attn_mask->dtype != TG_BOOL && !tg_dtype_is_floating(attn_mask->dtype)) ||
            !tg_broadcast_shapes(attn_mask->shape, scores, &out) || attn_mask->shape.ndim > (qn > kn ? qn : kn) ||
            !tg_device_equal(attn_mask->storage->device, q->storage->device))
            return tg_error("%s: attn_mask %s (%s) must be bool or floating, on the query's device, and broadcast to "
                            "the scores [..., %lld, %lld] (query %s, key %s)", op,
                            tg_shape_str(attn_mask->shape, ms, sizeof ms), tg_dtype_name(attn_mask->dtype),
                            (long long)l, (long long)s, qs, ks), NULL;
        if (out.dims[out.ndim - 1] != s || out.dims[out.ndim - 2] != l)
            return tg_error("%s: attn_mask %s does not broadcast to the scores [..., %lld, %lld]", op,
                            tg_shape_str(attn_mask->shape, ms, sizeof ms), (long long)l, (long long)s), NULL;
    }
    tg_tensor *y = NULL;
    TG_SCOPE {
        tg_tensor *mask = NULL;
        if (is_causal) mask = causal_mask(l, s, q->dtype, q->storage->device);
        else if (attn_mask && attn_mask->dtype == TG_BOOL)
            mask = tg_cast(tg_where_scalars(attn_mask, 0.0, -INFINITY), q->dtype);
        else if (attn_mask)
            mask = attn_mask->dtype == q->dtype ? attn_mask : tg_cast(attn_mask, q->dtype);
        tg_tensor *scaled = tg_div_scalar(q, sqrt((double)q->shape.dims[qn - 1]));
        tg_tensor *scores = tg_matmul(scaled, tg_transpose(k, -2, -1));
        if (mask) scores = tg_add(scores, mask);
        tg_tensor *w = tg_softmax(scores, -1);
        if (w && dropout_p > 0) w = tg_dropout(w, dropout_p, true);
        tg_tensor *out = w ? tg_matmul(w, v) : NULL;
        if (out) {
            y = tg_scope_return(out);
            if (weights) *weights = tg_scope_return(w);
        }
    }
    return y;
}

tg_tensor *tg_scaled_dot_product_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *attn_mask,
                                           double dropout_p, bool is_causal) {
    return tg_attention_with_weights(q, k, v, attn_mask, dropout_p, is_causal, NULL);
}
