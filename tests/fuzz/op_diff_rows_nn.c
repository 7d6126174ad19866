/* Op rows of the differential fuzzer: matmul, convolution, pooling, normalisation,
 * losses and attention (docs/ops.md, "matmul", "conv, pool, norm", "loss"). Weights
 * next to a bfloat16 input stay float32 where the op takes that mix (keep_f32). */
#include <math.h>

#include "op_diff.h"

/* a small size: convolutions' cost grows with the product of five of them */
static int64_t small(od_case *c, int64_t lo) { return lo + od_int(c, 0, c->max_size < 4 ? c->max_size : 4); }

static void draw_matmul(const od_row *row, od_case *c) {
    int64_t n = od_dim(c), m = od_dim(c), p = od_dim(c);
    c->i[0] = od_int(c, 0, 3);
    switch (c->i[0]) {
    case 0: od_add(c, TG_SHAPE(n, m), DOM_ANY), od_add(c, TG_SHAPE(m, p), DOM_ANY); break;
    case 1: od_add(c, TG_SHAPE(m), DOM_ANY), od_add(c, TG_SHAPE(m, p), DOM_ANY); break;
    case 2: od_add(c, TG_SHAPE(n, m), DOM_ANY), od_add(c, TG_SHAPE(m), DOM_ANY); break;
    default: {
        tg_shape b = od_shape(c, 1, 2);
        tg_shape a = od_broadcastable(c, b), bb = od_broadcastable(c, b);
        a.dims[a.ndim++] = n, a.dims[a.ndim++] = m;
        bb.dims[bb.ndim++] = m, bb.dims[bb.ndim++] = p;
        od_add(c, a, DOM_ANY), od_add(c, bb, DOM_ANY);
    }
    }
}

static int run_matmul(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_matmul(in[0], in[1]), out);
}

static void draw_linear(const od_row *row, od_case *c) {
    int64_t in_f = od_dim(c), out_f = od_dim(c);
    tg_shape x = od_shape(c, 0, 3);
    x.dims[x.ndim++] = in_f;
    od_add(c, x, DOM_ANY);
    od_add(c, TG_SHAPE(out_f, in_f), DOM_ANY);
    od_add(c, TG_SHAPE(out_f), DOM_ANY);
    c->i[0] = od_int(c, 0, 1);
}

static int run_linear(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_linear(in[0], in[1], c->i[0] ? in[2] : NULL), out);
}

static const char *const equations[] = {"ij,jk->ik", "bij,bjk->bik", "ij->ji",      "ii->i",
                                        "ij,ij->",   "i,j->ij",      "...ij,...jk", "bi,bi->b"};

static void draw_einsum(const od_row *row, od_case *c) {
    int64_t a = od_dim(c), b = od_dim(c), k = od_dim(c), e = od_dim(c);
    c->i[0] = od_int(c, 0, 7);
    switch (c->i[0]) {
    case 0: od_add(c, TG_SHAPE(a, b), DOM_ANY), od_add(c, TG_SHAPE(b, k), DOM_ANY); break;
    case 1: od_add(c, TG_SHAPE(e, a, b), DOM_ANY), od_add(c, TG_SHAPE(e, b, k), DOM_ANY); break;
    case 2: od_add(c, TG_SHAPE(a, b), DOM_ANY); break;
    case 3: od_add(c, TG_SHAPE(a, a), DOM_ANY); break;
    case 4: od_add(c, TG_SHAPE(a, b), DOM_ANY), od_add(c, TG_SHAPE(a, b), DOM_ANY); break;
    case 5: od_add(c, TG_SHAPE(a), DOM_ANY), od_add(c, TG_SHAPE(b), DOM_ANY); break;
    case 6: od_add(c, TG_SHAPE(e, 1, a, b), DOM_ANY), od_add(c, TG_SHAPE(k, a, b, e), DOM_ANY); break;
    default: od_add(c, TG_SHAPE(a, b), DOM_ANY), od_add(c, TG_SHAPE(a, b), DOM_ANY); break;
    }
}

static int run_einsum(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_einsum(equations[c->i[0]], in, c->n_in), out);
}

/* x [N, C, H, W] (or unbatched), weight, bias; i: stride, padding, dilation, groups,
 * output_padding, bias, variant. */
static void draw_conv(const od_row *row, od_case *c) {
    int64_t groups = od_int(c, 1, 2), cin = groups * small(c, 1), cout = groups * small(c, 1);
    int64_t kh = small(c, 1) % 4, kw = small(c, 1) % 4;
    kh = kh ? kh : 1, kw = kw ? kw : 1;
    c->i[0] = od_int(c, 1, 2); /* stride */
    c->i[1] = od_int(c, 0, 1); /* padding */
    c->i[2] = od_int(c, 1, 2); /* dilation */
    c->i[3] = groups;
    c->i[4] = od_int(c, 0, c->i[0] - 1); /* output_padding below stride */
    c->i[5] = od_int(c, 0, 1);           /* bias */
    c->i[6] = od_int(c, 0, 2);           /* variant */
    bool transposed = row->name[7] == '_';
    tg_shape x = TG_SHAPE(small(c, 0) % 3, transposed ? cout : cin, small(c, 1) + kh, small(c, 1) + kw);
    if (od_coin(c, 0.2)) x = TG_SHAPE(x.dims[1], x.dims[2], x.dims[3]);
    od_add(c, x, DOM_ANY);
    od_add(c, transposed ? TG_SHAPE(cout, cin / groups, kh, kw) : TG_SHAPE(cout, cin / groups, kh, kw), DOM_ANY);
    od_add(c, TG_SHAPE(transposed ? cin / groups * groups : cout), DOM_ANY);
}

static int run_conv2d(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_conv_opts o = {(int)c->i[0], (int)c->i[1], (int)c->i[2], (int)c->i[3], !c->i[5]};
    return od_one(tg_conv2d(in[0], in[1], c->i[5] ? in[2] : NULL, o), out);
}

static int run_conv_transpose2d(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_conv_transpose_opts o = {(int)c->i[0], (int)c->i[1], (int)c->i[4], (int)c->i[2], (int)c->i[3], !c->i[5]};
    tg_tensor *bias = c->i[5] ? in[2] : NULL;
    if (c->i[6] == 0 || tg_ndim(in[0]) < 3) return od_one(tg_conv_transpose2d(in[0], in[1], bias, o), out);
    /* output_size: the smallest output, or one more where stride allows */
    o.output_padding = 0;
    int64_t h = tg_size(in[0], -2), w = tg_size(in[0], -1), kh = tg_size(in[1], 2), kw = tg_size(in[1], 3);
    int64_t s = o.stride, p = o.padding, d = o.dilation;
    int64_t oh = (h - 1) * s - 2 * p + d * (kh - 1) + 1 + (c->i[6] == 2 ? s - 1 : 0);
    int64_t ow = (w - 1) * s - 2 * p + d * (kw - 1) + 1;
    return od_one(tg_conv_transpose2d_to_size(in[0], in[1], bias, o, oh, ow), out);
}

static void draw_image(const od_row *row, od_case *c) {
    od_add(c, TG_SHAPE(small(c, 0) % 3, small(c, 1), small(c, 1), small(c, 1)), row->dom);
    for (int j = 0; j < 7; j++) c->i[j] = od_int(c, 0, 7);
    c->d[0] = (double)(float)od_unif(c, 0.4, 3);
    c->d[1] = (double)(float)od_unif(c, 0.4, 3);
}

static int run_interpolate(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_interpolate_opts o = {.mode = (tg_interp_mode)(c->i[0] % 3), .align_corners = c->i[1] % 2 && c->i[0] % 3};
    if (c->i[2] % 2) o.size[0] = 1 + c->i[3], o.size[1] = 1 + c->i[4];
    else o.scale_factor[0] = c->d[0], o.scale_factor[1] = c->d[1];
    return od_one(tg_interpolate(in[0], o), out);
}

static tg_pool_opts pool_opts(const od_case *c) {
    int k = 1 + (int)(c->i[0] % 3);
    tg_pool_opts o = {.kernel_size = k, .stride = 1 + (int)(c->i[1] % 2), .padding = (int)(c->i[2] % (k / 2 + 1))};
    o.ceil_mode = c->i[3] % 2;
    o.count_exclude_pad = c->i[4] % 2;
    o.dilation = 1 + (int)(c->i[5] % 2);
    return o;
}

static int run_max_pool(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *idx = NULL;
    tg_tensor *y = tg_max_pool2d(in[0], pool_opts(c), c->i[6] % 2 ? &idx : NULL);
    return idx ? od_two(y, idx, out) : od_one(y, out);
}

static int run_avg_pool(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_pool_opts o = pool_opts(c);
    o.dilation = 0;
    return od_one(tg_avg_pool2d(in[0], o), out);
}

static int run_adaptive(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_adaptive_avg_pool2d(in[0], 1 + c->i[0] % 4, 1 + c->i[1] % 4), out);
}

static void draw_norm(const od_row *row, od_case *c) {
    bool batch = row->name[3] == 'b';
    tg_shape x = od_shape(c, 2, 4);
    od_add(c, x, DOM_ANY);
    c->i[0] = od_int(c, 1, x.ndim); /* layer_norm: normalized dims */
    c->i[1] = od_int(c, 0, 3);      /* which of weight, bias */
    c->i[2] = od_int(c, 0, 1);      /* batch_norm: training */
    tg_shape p = batch ? TG_SHAPE(x.dims[1]) : (tg_shape){0};
    if (!batch)
        for (int d = x.ndim - (int)c->i[0]; d < x.ndim; d++) p.dims[p.ndim++] = x.dims[d];
    for (int k = 0; k < (batch ? 4 : 2); k++) {
        od_input *w = od_add(c, p, k == 3 ? DOM_POS : DOM_ANY); /* running_var > 0 */
        w->keep_f32 = batch;
        if (batch && k >= 2) w->no_grad = true, w->contiguous = true; /* running stats are updated */
    }
    c->d[0] = od_coin(c, 0.5) ? 1e-5 : (double)(float)od_unif(c, 0.01, 0.5);
    /* known (docs/fuzzing.md): layer_norm's gradient over every dim of x fails */
    c->no_grad = !batch && c->i[0] == x.ndim;
}

static int run_batch_norm(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    /* running stats are updated in place: give the op copies */
    tg_tensor *rm = tg_clone(in[3]), *rv = tg_clone(in[4]);
    tg_tensor *y =
        tg_batch_norm(in[0], rm, rv, c->i[1] & 1 ? in[1] : NULL, c->i[1] & 2 ? in[2] : NULL, c->i[2], 0.1, c->d[0]);
    return c->i[2] ? od_two(y, rm, out) : od_one(y, out);
}

static int run_layer_norm(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_layer_norm(in[0], (int)c->i[0], c->i[1] & 1 ? in[1] : NULL, c->i[1] & 2 ? in[2] : NULL, c->d[0]),
                  out);
}

/* logits [N, C, d...] or [C], class targets or probabilities, a class weight */
static void draw_classes(const od_row *row, od_case *c) {
    tg_shape x = od_shape(c, 1, 4);
    if (x.dims[x.ndim > 1] == 0) x.dims[x.ndim > 1] = 1;
    int64_t classes = x.dims[x.ndim > 1];
    od_add(c, x, DOM_ANY);
    c->i[0] = od_int(c, 0, 2); /* reduction */
    c->i[1] = od_int(c, 0, 1); /* ignore_index */
    c->i[2] = od_int(c, 0, classes - 1);
    c->i[3] = od_int(c, 0, 1);                                         /* weight */
    c->i[4] = row->name[3] == 'c' ? od_int(c, 0, 1) : 0;               /* probabilities */
    c->d[0] = od_coin(c, 0.5) ? 0 : (double)(float)od_unif(c, 0, 0.5); /* label smoothing */
    tg_shape t = x;
    if (!c->i[4]) {
        t.ndim = 0;
        for (int d = 0; d < x.ndim; d++)
            if (d != (x.ndim > 1)) t.dims[t.ndim++] = x.dims[d];
    }
    od_input *target = od_add(c, t, c->i[4] ? DOM_UNIT : DOM_INDEX);
    target->bound = classes;
    od_add(c, TG_SHAPE(classes), DOM_POS)->no_grad = true; /* PyTorch: no gradient for weight */
}

static int run_classes(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_loss_opts o = {.reduction = (tg_reduction)c->i[0],
                      .use_ignore_index = c->i[1],
                      .ignore_index = c->i[2],
                      .weight = c->i[3] ? in[2] : NULL};
    if (row->name[3] == 'c') {
        o.label_smoothing = c->d[0];
        return od_one(tg_cross_entropy_opts(in[0], in[1], o), out);
    }
    return od_one(tg_nll_loss_opts(in[0], in[1], o), out);
}

/* input, target of a broadcastable shape, a weight; reduction i[0] */
static void draw_pair(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    od_add(c, s, row->dom);
    od_add(c, od_coin(c, 0.2) ? od_broadcastable(c, s) : s, row->dom2);
    od_add(c, od_broadcastable(c, s), DOM_POS);
    od_add(c, od_broadcastable(c, s), DOM_POS);
    c->i[0] = od_int(c, 0, 3);
    c->i[1] = od_int(c, 0, 3);
    c->d[0] = od_coin(c, 0.2) ? TG_ZERO : (double)(float)od_unif(c, 0.1, 2);
    c->d[1] = (double)(float)od_unif(c, 0.5, 3);
}

static int run_pair(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_reduction red = (tg_reduction)(c->i[0] % 3);
    const char *n = row->name;
    tg_tensor *a = in[0], *b = in[1];
    if (n[3] == 'm') return od_one(tg_mse_loss_opts(a, b, (tg_loss_opts){.reduction = red}), out);
    if (n[3] == 'l') return od_one(tg_l1_loss_opts(a, b, (tg_loss_opts){.reduction = red}), out);
    if (n[3] == 'k')
        return od_one(tg_kl_div_opts(a, b, (tg_kl_opts){.reduction = (tg_reduction)c->i[0], .log_target = c->i[1] % 2}),
                      out);
    if (n[3] == 's') return od_one(tg_smooth_l1_loss_opts(a, b, (tg_smooth_l1_opts){red, c->d[0]}), out);
    if (n[3] == 'h') return od_one(tg_huber_loss_opts(a, b, (tg_huber_opts){red, c->d[1]}), out);
    tg_bce_opts o = {.reduction = red, .weight = c->i[1] & 1 ? in[2] : NULL};
    if (n[23] == '_') { /* tg_binary_cross_entropy_with_logits */
        o.pos_weight = c->i[1] & 2 ? in[3] : NULL;
        return od_one(tg_binary_cross_entropy_with_logits_opts(a, b, o), out);
    }
    return od_one(tg_binary_cross_entropy_opts(a, b, o), out);
}

static void draw_distance(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 1, 3);
    for (int k = 0; k < 3; k++) od_add(c, k && od_coin(c, 0.2) ? od_broadcastable(c, s) : s, DOM_ANY);
    c->i[0] = od_int(c, 0, 3);
    c->i[1] = od_int(c, 0, 1);
    c->i[2] = od_pick_dim(c, s.ndim);
    c->d[0] = (double)(float)od_unif(c, 0, 2);
}

static const double norms_p[4] = {2, 1, 3, INFINITY};

static int run_triplet(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_triplet_opts o = {
        .reduction = (tg_reduction)(c->i[0] % 3), .margin = c->d[0], .p = norms_p[c->i[0]], .swap = c->i[1]};
    return od_one(tg_triplet_margin_loss_opts(in[0], in[1], in[2], o), out);
}

static int run_cosine(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_cosine_similarity(in[0], in[1], (int)c->i[2], 1e-8), out);
}

static int run_pairwise(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_pairwise_distance(in[0], in[1], norms_p[c->i[0]], 1e-6, c->i[1]), out);
}

static void draw_attention(const od_row *row, od_case *c) {
    tg_shape b = od_shape(c, 0, 2);
    int64_t l = od_dim(c), s = od_dim(c), e = od_dim(c) + 1, ev = od_dim(c);
    tg_shape q = b, k = od_broadcastable(c, b), v;
    q.dims[q.ndim++] = l, q.dims[q.ndim++] = e;
    k.dims[k.ndim++] = s, k.dims[k.ndim++] = e;
    v = k;
    v.dims[v.ndim - 1] = ev;
    od_add(c, q, DOM_ANY), od_add(c, k, DOM_ANY), od_add(c, v, DOM_ANY);
    c->i[0] = od_int(c, 0, 3); /* no mask, causal, bool mask, float mask */
    c->i[1] = od_int(c, 0, 1); /* with weights */
    od_add(c, TG_SHAPE(l, s), c->i[0] == 2 ? DOM_BOOL : DOM_ANY);
}

static int run_attention(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *mask = c->i[0] >= 2 ? in[3] : NULL, *w = NULL;
    if (!c->i[1]) return od_one(tg_scaled_dot_product_attention(in[0], in[1], in[2], mask, 0, c->i[0] == 1), out);
    tg_tensor *y = tg_attention_with_weights(in[0], in[1], in[2], mask, 0, c->i[0] == 1, &w);
    return od_two(y, w, out);
}

/* y = x * x with its gradient retained, then d(sum(y^2))/dy = 2y read back */
static int run_retain_grad(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *x = tg_requires_grad_(tg_clone(tg_detach(in[0])), true);
    tg_tensor *y = tg_mul(x, x);
    if (tg_retain_grad(y) != TG_OK || !tg_retains_grad(y)) return 0;
    if (tg_backward(tg_sum(tg_mul(y, y))) != TG_OK) return 0;
    return od_one(tg_clone(tg_grad(y)), out);
}

#define ROW(name, doc, draw, run, ...) \
    { name, doc, draw, run, __VA_ARGS__ }

const od_row od_rows_nn[] = {
    ROW("tg_matmul", "tg_matmul", draw_matmul, run_matmul, 0, .tol = 2),
    ROW("tg_linear", "tg_linear", draw_linear, run_linear, 0, .tol = 2),
    ROW("tg_einsum", "tg_einsum", draw_einsum, run_einsum, 0, .tol = 2),
    ROW("tg_conv2d", "tg_conv2d", draw_conv, run_conv2d, 0, .tol = 3),
    ROW("tg_conv_transpose2d", "tg_conv_transpose2d", draw_conv, run_conv_transpose2d, 0, .tol = 3),
    ROW("tg_conv_transpose2d_to_size", "tg_conv_transpose2d_to_size", draw_conv, run_conv_transpose2d, 0, .tol = 3),
    ROW("tg_interpolate", "tg_interpolate", draw_image, run_interpolate, 0, DOM_ANY, .tol = 2),
    ROW("tg_max_pool2d", "tg_max_pool2d", draw_image, run_max_pool, 0),
    ROW("tg_avg_pool2d", "tg_avg_pool2d", draw_image, run_avg_pool, 0),
    ROW("tg_adaptive_avg_pool2d", "tg_adaptive_avg_pool2d", draw_image, run_adaptive, 0),
    ROW("tg_batch_norm", "tg_batch_norm", draw_norm, run_batch_norm, 0, .tol = 3),
    ROW("tg_layer_norm", "tg_layer_norm", draw_norm, run_layer_norm, 0, .tol = 3),
    ROW("tg_cross_entropy", "tg_cross_entropy", draw_classes, run_classes, 0, .tol = 2),
    ROW("tg_nll_loss", "tg_nll_loss", draw_classes, run_classes, 0),
    ROW("tg_mse_loss", "tg_mse_loss", draw_pair, run_pair, 0, DOM_ANY, DOM_ANY),
    ROW("tg_l1_loss", "tg_l1_loss", draw_pair, run_pair, 0, DOM_ANY, DOM_ANY),
    ROW("tg_binary_cross_entropy_with_logits", "tg_binary_cross_entropy_with_logits", draw_pair, run_pair, 0, DOM_ANY,
        DOM_UNIT),
    ROW("tg_binary_cross_entropy", "tg_binary_cross_entropy", draw_pair, run_pair, 0, DOM_UNIT, DOM_UNIT),
    ROW("tg_kl_div", "tg_kl_div", draw_pair, run_pair, 0, DOM_ANY, DOM_UNIT),
    ROW("tg_smooth_l1_loss", "tg_smooth_l1_loss", draw_pair, run_pair, 0, DOM_ANY, DOM_ANY),
    ROW("tg_huber_loss", "tg_huber_loss", draw_pair, run_pair, 0, DOM_ANY, DOM_ANY),
    ROW("tg_triplet_margin_loss", "tg_triplet_margin_loss", draw_distance, run_triplet, 0, .tol = 2),
    ROW("tg_cosine_similarity", "tg_cosine_similarity", draw_distance, run_cosine, 0, .tol = 2),
    ROW("tg_pairwise_distance", "tg_pairwise_distance", draw_distance, run_pairwise, 0, .tol = 2),
    ROW("tg_scaled_dot_product_attention", "tg_scaled_dot_product_attention", draw_attention, run_attention, 0,
        .tol = 2),
    ROW("tg_retain_grad", "tg_retain_grad", od_draw_unary, run_retain_grad, OD_NO_GRAD),
    {NULL},
};
