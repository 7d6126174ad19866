/* scaled_dot_product_attention: the checks, the fused op (forward and derivative; the
 * kernels are ops/cpu/attention.c and ops/cuda/attention.cu) and the composed reference.
 *
 * The composed version is softmax((q * scale) k^T + mask) v of matmul, softmax and
 * dropout ops, q scaled before the product as PyTorch 1.13's MultiheadAttention does;
 * masks become one additive floating tensor (bool false / is_causal's upper triangle
 * -> -inf). It serves dropout, an attn_mask that requires grad, the attention weights
 * (tg_attention_with_weights) and second derivatives, and is the tests' reference.
 *
 * The fused op sees q, k, v (and the mask) as `batch` problems after broadcasting
 * their leading dims (tg_attn_plan, ops/attention_formulas.h): one int64 offset per
 * problem and operand, so broadcast batches, grouped query heads and transposed views
 * (any row stride, contiguous last dim) cost no copy. Results of 4-D and larger calls
 * are [B, H, n, w] views of [B, n, H, w] memory, as PyTorch's CPU flash attention
 * returns them (tg_attn_result_start): a GPT's transpose(1, 2) and reshape back to
 * [B, n, H w] cost no copy, and neither do its gradients on the way in. float16/bfloat16 inputs are
 * computed in float32 (TG_LOW_PRECISION_IN_FLOAT32: cast on the way in, the output
 * rounded once, as PyTorch's CPU math path). See ops/attention.h. */
#include "ops/attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/function.h"
#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "core/option_defaults.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "onnx/graph.h"
#include "ops/attention_formulas.h"
#include "ops/cpu/attention.h"
#include "ops/cuda/attention.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/matmul.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"

static const char *const OP = "tg_scaled_dot_product_attention";

/* ======================= checks ======================= */

/* Whether the scale is PyTorch's scale=None, 1/sqrt(E): NAN from TG_SDPA_OPTS, else a +0
 * (core/options.h). */
static bool default_scale(tg_sdpa_opts o) { return isnan(tg_option(o.scale, NAN, o.defaults_filled)); }

static double scale_of(tg_sdpa_opts o, int64_t e) { return default_scale(o) ? 1.0 / sqrt((double)e) : o.scale; }

/* The leading dims of t (all but the last `keep`), as a shape. */
static tg_shape lead_shape(const tg_tensor *t, int keep) {
    int n = t->shape.ndim > keep ? t->shape.ndim - keep : 0;
    return tg_shape_from(n, t->shape.dims);
}

/* With enable_gqa and fewer key/value heads than query heads (dim -3): k's and v's
 * leading dims as the query's heads would see them (Hk -> Hq), so they broadcast. */
static bool grouped(const tg_tensor *q, const tg_tensor *k, tg_sdpa_opts o) {
    return o.enable_gqa && q->shape.ndim >= 3 && k->shape.ndim >= 3 &&
           q->shape.dims[q->shape.ndim - 3] != k->shape.dims[k->shape.ndim - 3];
}

static tg_shape heads_as_query(tg_shape lead, const tg_tensor *q) {
    lead.dims[lead.ndim - 1] = q->shape.dims[q->shape.ndim - 3];
    return lead;
}

/* Checks the call; sets *batch to the broadcast leading dims of the result. */
static tg_status check_inputs(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_sdpa_opts o, tg_shape *batch) {
    tg_tensor *attn_mask = o.attn_mask;
    if (tg_unusable_(q)) return tg_error_unusable_input(OP, q, 0);
    if (tg_unusable_(k)) return tg_error_unusable_input(OP, k, 1);
    if (tg_unusable_(v)) return tg_error_unusable_input(OP, v, 2);
    if (attn_mask && tg_unusable_(attn_mask)) return tg_error_unusable_input(OP, attn_mask, 3);
    char qs[96], ks[96], vs[96], ms[96], d1[16], d2[16];
    tg_shape_str(q->shape, qs, sizeof qs);
    tg_shape_str(k->shape, ks, sizeof ks);
    tg_shape_str(v->shape, vs, sizeof vs);
    int qn = q->shape.ndim, kn = k->shape.ndim, vn = v->shape.ndim;
    if (qn < 2 || kn < 2 || vn < 2 || q->shape.dims[qn - 1] != k->shape.dims[kn - 1] ||
        k->shape.dims[kn - 2] != v->shape.dims[vn - 2])
        return tg_error("%s: expected query [..., L, E], key [..., S, E] and value [..., S, Ev], got query %s, key %s, "
                        "value %s",
                        OP, qs, ks, vs);
    if (!tg_dtype_is_floating(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return tg_error("%s: expected query, key and value of one floating dtype, got %s, %s, %s", OP,
                        tg_dtype_name(q->dtype), tg_dtype_name(k->dtype), tg_dtype_name(v->dtype));
    if (!tg_device_equal(q->storage->device, k->storage->device) ||
        !tg_device_equal(q->storage->device, v->storage->device))
        return tg_error("%s: expected query, key and value on one device, got query on %s and key on %s", OP,
                        tg_device_str(q->storage->device, d1), tg_device_str(k->storage->device, d2));
    if (!(o.dropout_p >= 0 && o.dropout_p < 1))
        return tg_error("%s: dropout_p must be in [0, 1), got %g", OP, o.dropout_p);
    if (o.is_causal && attn_mask) return tg_error("%s: is_causal and attn_mask are exclusive (pass one)", OP);
    if (!default_scale(o) && !isfinite(o.scale)) return tg_error("%s: scale must be finite, got %g", OP, o.scale);
    tg_shape kl = lead_shape(k, 2), vl = lead_shape(v, 2);
    if (grouped(q, k, o)) {
        int64_t hq = q->shape.dims[qn - 3], hk = k->shape.dims[kn - 3];
        if (vn < 3 || v->shape.dims[vn - 3] != hk || hk == 0 || hq % hk)
            return tg_error("%s: enable_gqa needs key and value with one head count (dim -3) dividing the query's, "
                            "got query %s, key %s, value %s",
                            OP, qs, ks, vs);
        kl = heads_as_query(kl, q), vl = heads_as_query(vl, q);
    }
    tg_shape lead = lead_shape(q, 2);
    if (!tg_broadcast_shapes(lead, kl, &lead) || !tg_broadcast_shapes(lead, vl, &lead))
        return tg_error("%s: the batch dims of query %s, key %s and value %s do not broadcast%s", OP, qs, ks, vs,
                        o.enable_gqa ? "" : " (grouped query heads need enable_gqa)");
    int64_t l = q->shape.dims[qn - 2], s = k->shape.dims[kn - 2];
    if (attn_mask) {
        tg_shape scores = TG_SHAPE(l, s), out;
        if ((attn_mask->dtype != TG_BOOL && !tg_dtype_is_floating(attn_mask->dtype)) ||
            !tg_broadcast_shapes(attn_mask->shape, scores, &out) || attn_mask->shape.ndim > (qn > kn ? qn : kn) ||
            !tg_device_equal(attn_mask->storage->device, q->storage->device))
            return tg_error("%s: attn_mask %s (%s) must be bool or floating, on the query's device, and broadcast to "
                            "the scores [..., %lld, %lld] (query %s, key %s)",
                            OP, tg_shape_str(attn_mask->shape, ms, sizeof ms), tg_dtype_name(attn_mask->dtype),
                            (long long)l, (long long)s, qs, ks);
        if (out.dims[out.ndim - 1] != s || out.dims[out.ndim - 2] != l)
            return tg_error("%s: attn_mask %s does not broadcast to the scores [..., %lld, %lld]", OP,
                            tg_shape_str(attn_mask->shape, ms, sizeof ms), (long long)l, (long long)s);
        if (!tg_broadcast_shapes(lead, lead_shape(attn_mask, 2), &lead))
            return tg_error("%s: attn_mask %s does not broadcast to the batch dims of query %s, key %s", OP,
                            tg_shape_str(attn_mask->shape, ms, sizeof ms), qs, ks);
    }
    *batch = lead;
    return TG_OK;
}

/* ======================= the composed reference ======================= */

/* -inf above the diagonal of [L, S], 0 on and below, in dtype on device. */
static tg_tensor *causal_mask(int64_t l, int64_t s, tg_dtype dtype, tg_device device) {
    double *m = malloc((size_t)(l * s) * sizeof *m + 1);
    TG_ASSERT(m != NULL);
    for (int64_t i = 0; i < l; i++)
        for (int64_t j = 0; j < s; j++) m[i * s + j] = tg_attn_causal_hidden(i, j) ? -INFINITY : 0.0;
    tg_tensor *t = tg_from_data(m, TG_SHAPE(l, s), (tg_opts){.dtype = TG_FLOAT64});
    free(m);
    return t ? tg_tensor_to(tg_cast(t, dtype), device) : NULL;
}

/* [..., Hk, S, E] -> [..., Hq, S, E], query head h reading key head h / (Hq / Hk), as
 * PyTorch's repeat_interleave under enable_gqa. */
static tg_tensor *repeat_heads(tg_tensor *t, int64_t hq) {
    int n = t->shape.ndim;
    tg_shape wide = t->shape, out = t->shape;
    for (int d = n; d > n - 2; d--) wide.dims[d] = wide.dims[d - 1];
    wide.ndim = n + 1;
    wide.dims[n - 2] = hq / t->shape.dims[n - 3];
    out.dims[n - 3] = hq;
    return tg_reshape(tg_expand(tg_unsqueeze(t, n - 2), wide), out);
}

/* Runs in the caller's scope; inputs checked. */
static tg_tensor *composed(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_sdpa_opts o, tg_tensor **weights) {
    int qn = q->shape.ndim;
    int64_t l = q->shape.dims[qn - 2], s = k->shape.dims[k->shape.ndim - 2], e = q->shape.dims[qn - 1];
    tg_tensor *mask = NULL, *attn_mask = o.attn_mask;
    if (o.is_causal) mask = causal_mask(l, s, q->dtype, q->storage->device);
    else if (attn_mask && attn_mask->dtype == TG_BOOL)
        mask = tg_cast(tg_where_scalars(attn_mask, 0.0, -INFINITY), q->dtype);
    else if (attn_mask) mask = attn_mask->dtype == q->dtype ? attn_mask : tg_cast(attn_mask, q->dtype);
    if (grouped(q, k, o)) k = repeat_heads(k, q->shape.dims[qn - 3]), v = repeat_heads(v, q->shape.dims[qn - 3]);
    /* the default divides q by sqrt(E), PyTorch 1.13's MHA's bits */
    tg_tensor *scaled = default_scale(o) ? tg_div_scalar(q, sqrt((double)e)) : tg_mul_scalar(q, o.scale);
    tg_tensor *scores = tg_matmul(scaled, tg_transpose(k, -2, -1));
    if (mask) scores = tg_add(scores, mask);
    tg_tensor *w = tg_softmax(scores, -1);
    if (w && o.dropout_p > 0) w = tg_dropout(w, o.dropout_p, true);
    if (weights) *weights = w;
    return w ? tg_matmul(w, v) : NULL;
}

tg_tensor *tg_scaled_dot_product_attention_composed(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_sdpa_opts opts) {
    tg_shape batch;
    if (check_inputs(q, k, v, opts, &batch)) return NULL;
    tg_tensor *y = NULL;
    TG_SCOPE { y = tg_scope_return(composed(q, k, v, opts, NULL)); }
    return y;
}

tg_tensor *tg_attention_with_weights(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *attn_mask, double dropout_p,
                                     bool is_causal, tg_tensor **weights) {
    if (weights) *weights = NULL;
    tg_sdpa_opts o = {.attn_mask = attn_mask, .dropout_p = dropout_p, .is_causal = is_causal};
    tg_shape batch;
    if (check_inputs(q, k, v, o, &batch)) return NULL;
    tg_tensor *y = NULL;
    TG_SCOPE {
        tg_tensor *w = NULL, *out = composed(q, k, v, o, &w);
        if (out) {
            y = tg_scope_return(out);
            if (weights) *weights = tg_scope_return(w);
        }
    }
    return y;
}

/* ======================= the fused op ======================= */

typedef struct {
    tg_shape batch; /* the result's leading dims */
    bool has_mask;  /* input 3 is the mask */
    bool is_causal, gqa;
    double scale;
} sdpa_args;

/* t itself when its rows can be read as GEMM operands (contiguous last dim, row stride
 * at least a row), else a contiguous copy (a transposed last dim, negative strides). */
static tg_tensor *rows_ready(tg_tensor *t) {
    int n = t->shape.ndim;
    int64_t rows = t->shape.dims[n - 2], cols = t->shape.dims[n - 1];
    bool ok = (cols <= 1 || t->strides[n - 1] == 1) && (rows <= 1 || t->strides[n - 2] >= (cols > 1 ? cols : 1));
    return ok ? t : tg_contiguous(t);
}

/* Where problem b of `batch` starts in t (leading dims right-aligned; a size-1 dim
 * broadcasts; a smaller head count is a grouped one: head h reads h / (H / Ht)). */
static int64_t problem_offset(tg_shape batch, const int64_t *index, const tg_tensor *t, int keep) {
    int lead = t->shape.ndim > keep ? t->shape.ndim - keep : 0;
    int64_t off = 0;
    for (int d = 0; d < lead; d++) {
        int bd = batch.ndim - lead + d;
        int64_t size = t->shape.dims[d], i = index[bd];
        if (size == 1) continue;
        if (size != batch.dims[bd]) i /= batch.dims[bd] / size;
        off += i * t->strides[d];
    }
    return off;
}

/* The plan of a call and its offsets (4 x batch int64 on the CPU). */
static tg_tensor *make_plan(const sdpa_args *a, tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *mask,
                            tg_attn_plan *p) {
    int qn = q->shape.ndim, kn = k->shape.ndim, vn = v->shape.ndim;
    int64_t batch = tg_shape_numel(a->batch);
    *p = (tg_attn_plan){
        .batch = batch,
        .l = q->shape.dims[qn - 2],
        .s = k->shape.dims[kn - 2],
        .e = q->shape.dims[qn - 1],
        .ev = v->shape.dims[vn - 1],
        .heads = a->batch.ndim >= 2 && a->batch.dims[a->batch.ndim - 1] > 1 ? a->batch.dims[a->batch.ndim - 1] : 1,
        .causal = a->is_causal,
        .scale = a->scale};
    p->q_row = p->l > 1 ? q->strides[qn - 2] : (p->e > 1 ? p->e : 1);
    p->k_row = p->s > 1 ? k->strides[kn - 2] : (p->e > 1 ? p->e : 1);
    p->v_row = p->s > 1 ? v->strides[vn - 2] : (p->ev > 1 ? p->ev : 1);
    if (mask) {
        int mn = mask->shape.ndim;
        p->mask_kind = mask->dtype == TG_BOOL ? TG_ATTN_MASK_BOOL : TG_ATTN_MASK_ADD;
        p->mask_col = mn >= 1 && mask->shape.dims[mn - 1] != 1 ? mask->strides[mn - 1] : 0;
        p->mask_row = mn >= 2 && mask->shape.dims[mn - 2] != 1 ? mask->strides[mn - 2] : 0;
    }
    tg_tensor *offsets = tg_empty(TG_SHAPE(4 * (batch > 0 ? batch : 1)), (tg_opts){.dtype = TG_INT64});
    if (!offsets) return NULL;
    int64_t *off = tg_data_ptr(offsets), index[TG_MAX_DIMS] = {0};
    for (int64_t b = 0; b < batch; b++) {
        for (int d = a->batch.ndim - 1, rest = 0; d >= 0 && !rest; d--) /* index of problem b (odometer) */
            if (b > 0 && ++index[d] == a->batch.dims[d]) index[d] = 0;
            else rest = 1;
        off[b] = problem_offset(a->batch, index, q, 2);
        off[batch + b] = problem_offset(a->batch, index, k, 2);
        off[2 * batch + b] = problem_offset(a->batch, index, v, 2);
        off[3 * batch + b] = mask ? problem_offset(a->batch, index, mask, 2) : 0;
    }
    return offsets;
}

/* batch ++ tail. */
static tg_shape batch_shape(const sdpa_args *a, int n, int64_t d0, int64_t d1) {
    tg_shape s = a->batch;
    s.dims[s.ndim++] = d0;
    if (n == 2) s.dims[s.ndim++] = d1;
    return s;
}

/* A result [batch..., n, w] in the kernels' layout (tg_attn_result_start): with heads
 * interleaved, [batch[:-1]..., n, heads, w] memory seen as [batch..., n, w]. */
static tg_tensor *result_tensor(const sdpa_args *a, const tg_attn_plan *p, int64_t n, int64_t w, tg_opts o) {
    if (p->heads == 1) return tg_empty(batch_shape(a, 2, n, w), o);
    tg_shape s = a->batch;
    s.dims[s.ndim - 1] = n;
    s.dims[s.ndim++] = p->heads;
    s.dims[s.ndim++] = w;
    tg_tensor *t = tg_empty(s, o);
    return t ? tg_transpose(t, -3, -2) : NULL;
}

/* Whether t (the result's shape) is laid out as `like`, a result_tensor. */
static bool same_layout(const tg_tensor *t, const tg_tensor *like) {
    for (int d = 0; d < t->shape.ndim; d++)
        if (t->shape.dims[d] > 1 && t->strides[d] != like->strides[d]) return false;
    return true;
}

/* The output's gradient in the output's layout: g itself when it is (a GPT's, whose heads
 * came from a transposed [B, n, H w]), else a copy. */
static tg_tensor *dout_in_layout(const sdpa_args *a, const tg_attn_plan *p, tg_tensor *g, const tg_tensor *out) {
    if (g && g->dtype != out->dtype) g = tg_cast(g, out->dtype);
    if (!g || same_layout(g, out)) return g;
    tg_tensor *d = result_tensor(a, p, p->l, p->ev, (tg_opts){.dtype = out->dtype, .device = out->storage->device});
    return d && tg_copy_(d, g) == TG_OK ? d : NULL;
}

/* Whether q, k and v are as a GPT splits them from one qkv projection [B, L, 3 H E]: 4-D
 * views [B, H, L, E] of one storage with strides (L R, E, R, 1), R = 3 H E, at offsets o,
 * o + H E, o + 2 H E. */
static bool split_from_one_qkv(const tg_tensor *q, const tg_tensor *k, const tg_tensor *v) {
    if (q->shape.ndim != 4 || !tg_shape_equal(q->shape, k->shape) || !tg_shape_equal(q->shape, v->shape)) return false;
    if (q->storage != k->storage || q->storage != v->storage) return false;
    int64_t heads = q->shape.dims[1], l = q->shape.dims[2], e = q->shape.dims[3], row = 3 * heads * e;
    const int64_t want[4] = {l * row, e, row, 1};
    for (int d = 0; d < 4; d++)
        if (q->strides[d] != want[d] || k->strides[d] != want[d] || v->strides[d] != want[d]) return false;
    return k->offset == q->offset + heads * e && v->offset == k->offset + heads * e;
}

/* dq, dk, dv packed as q, k and v were (split_from_one_qkv): views of one [B, L, 3 H E]
 * buffer, so that the split's backward takes that buffer as its gradient (ops/slice.c)
 * instead of concatenating three. Sets the plan's grad_row. */
static bool packed_grads(tg_tensor *q, tg_attn_plan *p, tg_opts o, tg_tensor **dq, tg_tensor **dk, tg_tensor **dv) {
    int64_t b = q->shape.dims[0], heads = q->shape.dims[1], l = q->shape.dims[2], e = q->shape.dims[3];
    int64_t row = 3 * heads * e;
    tg_tensor *buffer = tg_empty(TG_SHAPE(b, l, row), o);
    if (!buffer) return false;
    const int64_t strides[4] = {l * row, e, row, 1};
    *dq = tg_make_view(OP, buffer, q->shape, strides, 0);
    *dk = tg_make_view(OP, buffer, q->shape, strides, heads * e);
    *dv = tg_make_view(OP, buffer, q->shape, strides, 2 * heads * e);
    p->grad_row = row;
    return *dq && *dk && *dv;
}

static tg_tensor *sdpa_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const sdpa_args *a = tg_ctx_attrs(ctx);
    tg_tensor *q = rows_ready(in[0]), *k = rows_ready(in[1]), *v = rows_ready(in[2]);
    tg_tensor *mask = a->has_mask ? in[3] : NULL;
    if (!q || !k || !v) return NULL;
    tg_attn_plan p;
    tg_tensor *offsets = make_plan(a, q, k, v, mask, &p);
    tg_opts o = {.dtype = q->dtype, .device = q->storage->device};
    tg_tensor *out = result_tensor(a, &p, p.l, p.ev, o), *lse = tg_empty(batch_shape(a, 1, p.l, 0), o);
    if (!offsets || !out || !lse || !(offsets = tg_tensor_to(offsets, o.device))) return NULL; /* the kernels' */
    if (TG_DEVICE_DISPATCH(q, TG_CUDA_CALL(OP, tg_cuda_attention_forward, &p, offsets, q, k, v, mask, out, lse),
                           tg_cpu_attention_forward_f32, tg_cpu_attention_forward_f64, &p, tg_data_ptr(offsets),
                           tg_data_ptr(q), tg_data_ptr(k), tg_data_ptr(v), mask ? tg_data_ptr(mask) : NULL,
                           tg_data_ptr(out), tg_data_ptr(lse)))
        return NULL;
    for (int i = 0; i < 3 + a->has_mask; i++) tg_ctx_save(ctx, in[i]); /* the originals: composed double backward */
    tg_ctx_save(ctx, lse);
    tg_ctx_save(ctx, out);
    return out;
}

/* Under create_graph: the gradients of the composed formula, recorded, so that they
 * differentiate again (the fused kernels' results would be constants). */
static void composed_backward(const sdpa_args *a, tg_ctx *ctx, tg_tensor *const *in, tg_tensor *g,
                              tg_tensor **grad_in) {
    tg_sdpa_opts o = {.attn_mask = a->has_mask ? in[3] : NULL,
                      .is_causal = a->is_causal,
                      .scale = a->scale,
                      .enable_gqa = a->gqa,
                      .defaults_filled = true}; /* a->scale is resolved */
    tg_tensor *y = composed(in[0], in[1], in[2], o, NULL);
    tg_tensor *wrt[3];
    int which[3], n = 0;
    for (int i = 0; i < 3; i++)
        if (tg_ctx_needs_input_grad(ctx, i)) wrt[n] = in[i], which[n++] = i;
    tg_tensor *grads[3] = {NULL, NULL, NULL};
    if (!y || !n || tg_grad_of(&y, &g, 1, wrt, n, grads, (tg_backward_opts){.create_graph = true})) return;
    for (int j = 0; j < n; j++) grad_in[which[j]] = grads[j];
}

/* A gradient over the query's heads [..., Hq, S, E] summed over each group, to the
 * key's [..., Hk, S, E]. */
static tg_tensor *sum_groups(tg_tensor *g, int64_t hk) {
    int n = g->shape.ndim;
    int64_t hq = g->shape.dims[n - 3];
    tg_shape split = g->shape;
    for (int d = n; d > n - 2; d--) split.dims[d] = split.dims[d - 1];
    split.ndim = n + 1;
    split.dims[n - 3] = hk;
    split.dims[n - 2] = hq / hk;
    return tg_sum_dim(tg_reshape(g, split), n - 2, false);
}

static void sdpa_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const sdpa_args *a = tg_ctx_attrs(ctx);
    int n = 3 + a->has_mask;
    tg_tensor *in[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < n; i++)
        if (!(in[i] = tg_ctx_saved(ctx, i))) return;
    if (tg_is_grad_enabled()) return composed_backward(a, ctx, in, g, grad_in);
    tg_tensor *lse = tg_ctx_saved(ctx, n), *out = tg_ctx_saved(ctx, n + 1);
    tg_tensor *q = rows_ready(in[0]), *k = rows_ready(in[1]), *v = rows_ready(in[2]), *mask = in[3];
    if (!lse || !out || !q || !k || !v) return;
    tg_attn_plan p;
    tg_tensor *offsets = make_plan(a, q, k, v, mask, &p);
    tg_opts o = {.dtype = q->dtype, .device = q->storage->device};
    tg_tensor *dout = dout_in_layout(a, &p, g, out), *delta = tg_empty(batch_shape(a, 1, p.l, 0), o);
    tg_tensor *dq = NULL, *dk = NULL, *dv = NULL;
    if (!a->gqa && split_from_one_qkv(q, k, v)) {
        if (!packed_grads(q, &p, o, &dq, &dk, &dv)) return;
    } else {
        dq = result_tensor(a, &p, p.l, p.e, o), dk = result_tensor(a, &p, p.s, p.e, o);
        dv = result_tensor(a, &p, p.s, p.ev, o);
    }
    if (!offsets || !dout || !delta || !dq || !dk || !dv || !(offsets = tg_tensor_to(offsets, o.device))) return;
    if (TG_DEVICE_DISPATCH(
            q,
            TG_CUDA_CALL(OP, tg_cuda_attention_backward, &p, offsets, q, k, v, mask, out, dout, lse, delta, dq, dk, dv),
            tg_cpu_attention_backward_f32, tg_cpu_attention_backward_f64, &p, tg_data_ptr(offsets), tg_data_ptr(q),
            tg_data_ptr(k), tg_data_ptr(v), mask ? tg_data_ptr(mask) : NULL, tg_data_ptr(out), tg_data_ptr(dout),
            tg_data_ptr(lse), tg_data_ptr(delta), tg_data_ptr(dq), tg_data_ptr(dk), tg_data_ptr(dv)))
        return;
    int64_t hk = in[1]->shape.ndim >= 3 ? in[1]->shape.dims[in[1]->shape.ndim - 3] : 1;
    grad_in[0] = dq; /* in the broadcast shape: the engine sums it back to q's */
    grad_in[1] = a->gqa ? sum_groups(dk, hk) : dk;
    grad_in[2] = a->gqa ? sum_groups(dv, hk) : dv;
}

/* Opset 17 has no Attention op: the composed formula, softmax((q * scale) k^T + mask) v,
 * as Transpose, Mul, MatMul, Add (the causal mask a constant [L, S]; a bool mask Where'd
 * to 0 / -inf) and Softmax nodes. */
static tg_status sdpa_onnx(tg_onnx_op *op) {
    const sdpa_args *a = tg_onnx_attrs(op);
    tg_tensor *q = tg_onnx_input(op, 0), *k = tg_onnx_input(op, 1);
    if (a->gqa) return tg_onnx_unsupported(op, "grouped-query attention (enable_gqa) has no ONNX mapping");
    int64_t perm[TG_MAX_DIMS], n = k->shape.ndim, l = q->shape.dims[q->shape.ndim - 2], s = k->shape.dims[n - 2];
    for (int d = 0; d < n; d++) perm[d] = d < n - 2 ? d : 2 * n - 3 - d; /* the last two swapped */
    const char *kt = tg_onnx_value(op), *scaled = tg_onnx_value(op), *scores = tg_onnx_value(op);
    const char *w = tg_onnx_value(op), *y = tg_onnx_output_name(op, 0), *mask = NULL;
    const char *scale = tg_onnx_const_scalar(op, q->dtype, a->scale);
    tg_onnx_node *t = tg_onnx_add_node(op, "Transpose", 1, (const char *[]){tg_onnx_input_name(op, 1)}, 1, &kt);
    tg_onnx_attr_ints(t, "perm", perm, (int)n);
    bool ok = t && tg_onnx_add_node(op, "Mul", 2, (const char *[]){tg_onnx_input_name(op, 0), scale}, 1, &scaled) &&
              tg_onnx_add_node(op, "MatMul", 2, (const char *[]){scaled, kt}, 1, &scores);
    if (a->is_causal) {
        mask = tg_onnx_const_tensor(op, causal_mask(l, s, q->dtype, TG_CPU));
    } else if (a->has_mask && tg_onnx_input(op, 3)->dtype == TG_BOOL) {
        const char *where[] = {tg_onnx_input_name(op, 3), tg_onnx_const_scalar(op, q->dtype, 0),
                               tg_onnx_const_scalar(op, q->dtype, -INFINITY)};
        mask = tg_onnx_value(op);
        ok = ok && tg_onnx_add_node(op, "Where", 3, where, 1, &mask);
    } else if (a->has_mask) {
        mask = tg_onnx_input_name(op, 3);
    }
    if (a->is_causal || a->has_mask) {
        const char *masked = tg_onnx_value(op);
        ok = ok && mask && tg_onnx_add_node(op, "Add", 2, (const char *[]){scores, mask}, 1, &masked);
        scores = masked;
    }
    tg_onnx_node *softmax = ok ? tg_onnx_add_node(op, "Softmax", 1, &scores, 1, &w) : NULL;
    tg_onnx_attr_int(softmax, "axis", -1);
    ok = softmax && tg_onnx_add_node(op, "MatMul", 2, (const char *[]){w, tg_onnx_input_name(op, 2)}, 1, &y);
    return ok ? TG_OK : TG_ERROR;
}

static const tg_function sdpa_fn = {.name = "scaled_dot_product_attention",
                                    .num_inputs = 3,
                                    .forward = sdpa_forward,
                                    .backward = sdpa_backward,
                                    .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                    .onnx = sdpa_onnx};
static const tg_function sdpa_masked_fn = {.name = "scaled_dot_product_attention",
                                           .num_inputs = 4,
                                           .forward = sdpa_forward,
                                           .backward = sdpa_backward,
                                           .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                           .onnx = sdpa_onnx};

/* Whether the fused kernels serve this call (else the composed formula does). */
static bool fused_serves(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_sdpa_opts o) {
    if (o.dropout_p > 0) return false; /* dropout on the weights: composed (docs/attention.md) */
    if (o.attn_mask && o.attn_mask->requires_grad) return false; /* its gradient is [.., L, S] anyway */
    if (tg_on_cuda(q))
        return tg_cuda_attention_forward && tg_cuda_attention_supports &&
               tg_cuda_attention_supports(q->shape.dims[q->shape.ndim - 1], v->shape.dims[v->shape.ndim - 1]);
    return q->storage->device.kind == TG_DEVICE_CPU;
}

tg_tensor *tg_scaled_dot_product_attention_opts(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_sdpa_opts opts) {
    tg_shape batch;
    if (check_inputs(q, k, v, opts, &batch)) return NULL;
    if (!fused_serves(q, k, v, opts)) return tg_scaled_dot_product_attention_composed(q, k, v, opts);
    sdpa_args a = {.batch = batch,
                   .has_mask = opts.attn_mask != NULL,
                   .is_causal = opts.is_causal,
                   .gqa = grouped(q, k, opts),
                   .scale = scale_of(opts, q->shape.dims[q->shape.ndim - 1])};
    tg_tensor *y = NULL;
    TG_SCOPE {
        tg_tensor *mask = opts.attn_mask;
        /* an additive mask in the query's dtype (the kernels read one element type) */
        if (mask && mask->dtype != TG_BOOL && mask->dtype != q->dtype) mask = tg_cast(mask, q->dtype);
        tg_tensor *in[4] = {q, k, v, mask};
        if (!opts.attn_mask || mask)
            y = tg_scope_return(tg_apply_args(opts.attn_mask ? &sdpa_masked_fn : &sdpa_fn, in, &a, sizeof a));
    }
    return y;
}

tg_tensor *tg_scaled_dot_product_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *attn_mask,
                                           double dropout_p, bool is_causal) {
    return tg_scaled_dot_product_attention_opts(
        q, k, v, (tg_sdpa_opts){.attn_mask = attn_mask, .dropout_p = dropout_p, .is_causal = is_causal});
}
