/* Op rows of the differential fuzzer: views, copies and indexing (docs/ops.md,
 * "shape"). Most rows draw one input and integer options i[0..3]; the run derives the
 * op's arguments from the input's shape, so every draw is valid or refused by both
 * dtypes alike. */
#include "op_diff.h"

static void draw_x(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    od_add(c, s, row->dom);
    for (int j = 0; j < 4; j++) c->i[j] = od_int(c, 0, 7);
    c->d[0] = (double)(float)od_unif(c, -2, 2);
}

static int ndim0(tg_tensor *x) { return tg_ndim(x); }
/* a dim of x from option v (0 for a 0-dim x) */
static int dim_of(tg_tensor *x, int64_t v) { return ndim0(x) ? (int)(v % ndim0(x)) : 0; }
static int64_t size_at(tg_tensor *x, int d) { return ndim0(x) ? tg_size(x, d) : 1; }

static int run_view(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *x = in[0];
    int64_t n = tg_numel(x), last = ndim0(x) ? size_at(x, -1) : 1;
    switch (c->i[0] % 3) {
    case 0: return od_one(tg_view(tg_contiguous(x), TG_SHAPE(n)), out);
    case 1:
        if (last == 0) return od_one(tg_reshape(x, TG_SHAPE(0, 3)), out);
        return od_one(tg_reshape(x, TG_SHAPE(n / last, last, 1)), out);
    default: {
        int a = dim_of(x, c->i[1]), b = dim_of(x, c->i[2]);
        return od_one(tg_flatten(x, a < b ? a : b, a < b ? b : a), out);
    }
    }
}

static int run_squeeze(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    if (c->i[0] % 2) return od_one(tg_squeeze(in[0], dim_of(in[0], c->i[1])), out);
    return od_one(tg_unsqueeze(in[0], (int)(c->i[1] % (ndim0(in[0]) + 1))), out);
}

static int run_transpose(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *x = in[0];
    if (c->i[0] % 2) return od_one(tg_transpose(x, dim_of(x, c->i[1]), dim_of(x, c->i[2])), out);
    int perm[TG_MAX_DIMS];
    for (int d = 0; d < ndim0(x); d++) perm[d] = (d + (int)c->i[1]) % ndim0(x); /* a rotation */
    return od_one(tg_permute(x, perm), out);
}

static int run_narrow(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    int d = dim_of(in[0], c->i[1]);
    int64_t n = size_at(in[0], d), start = c->i[2] % (n + 1);
    return od_one(tg_narrow(in[0], d, start, (n - start) / 2 + (c->i[3] % 2)), out);
}

static void draw_expand(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    od_add(c, od_broadcastable(c, s), DOM_ANY);
    c->i[0] = s.ndim;
    for (int d = 0; d < s.ndim; d++) c->i[1 + d] = s.dims[d];
}

static int run_expand(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_shape t = {.ndim = (int)c->i[0]};
    for (int d = 0; d < t.ndim; d++) t.dims[d] = c->i[1 + d];
    return od_one(tg_expand(in[0], t), out);
}

static int run_select(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    int d = dim_of(in[0], c->i[1]);
    int64_t n = size_at(in[0], d);
    if (c->i[0] % 2) return od_one(tg_select(in[0], d, n ? c->i[2] % n - (c->i[3] % 2 ? n : 0) : 0), out);
    int64_t start = c->i[2] % (n + 1), end = c->i[3] % 2 ? TG_SLICE_END : start + c->i[3] % (n + 1);
    return od_one(tg_slice(in[0], d, start, end, 1 + c->i[0] % 3), out);
}

static int run_diagonal(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *x = in[0];
    return od_one(tg_diagonal(x, c->i[0] - 3, dim_of(x, c->i[1]), dim_of(x, c->i[2])), out);
}

static int run_chunk(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *parts[16] = {0};
    int d = dim_of(in[0], c->i[1]), n;
    int64_t size = size_at(in[0], d);
    switch (c->i[0] % 4) {
    case 0: n = tg_chunk(in[0], 1 + (int)c->i[2], d, parts, 16); break;
    case 1: n = tg_split(in[0], 1 + c->i[2], d, parts, 16); break;
    case 2: {
        int64_t sizes[2] = {size / 2, size - size / 2};
        n = tg_split_sizes(in[0], sizes, 2, d, parts, 16);
        break;
    }
    default: n = tg_unbind(in[0], d, parts, 16); break;
    }
    if (n <= 0) return 0;
    return od_two(parts[0], parts[n - 1], out);
}

static int run_movedim(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *x = in[0];
    if (c->i[0] % 2) return od_one(tg_movedim(x, dim_of(x, c->i[1]), dim_of(x, c->i[2])), out);
    int d = dim_of(x, c->i[1]);
    int64_t sizes[2] = {1, -1};
    return od_one(tg_unflatten(x, d, sizes, 2), out);
}

static int run_repeat(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    int64_t reps[TG_MAX_DIMS];
    int n = ndim0(in[0]) + (int)(c->i[1] % 2);
    for (int d = 0; d < n; d++) reps[d] = (c->i[2] >> d) % 3;
    switch (c->i[0] % 3) {
    case 0: return od_one(tg_repeat(in[0], reps, n), out);
    case 1: return od_one(tg_tile(in[0], reps, n), out);
    default: return od_one(tg_roll(in[0], c->i[2] - 3, dim_of(in[0], c->i[1])), out);
    }
}

static void draw_repeat_interleave(const od_row *row, od_case *c) {
    draw_x(row, c);
    tg_shape s = c->in[0].shape;
    int d = s.ndim ? (int)(c->i[1] % s.ndim) : 0;
    c->i[1] = d;
    od_input *r = od_add(c, TG_SHAPE(s.ndim ? s.dims[d] : 1), DOM_INDEX);
    r->bound = 3;
    r->contiguous = true;
}

static int run_repeat_interleave(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    if (c->i[0] % 2) return od_one(tg_repeat_interleave(in[0], c->i[2] % 3, (int)c->i[1]), out);
    return od_one(tg_repeat_interleave_tensor(in[0], in[1], (int)c->i[1]), out);
}

static void draw_pad(const od_row *row, od_case *c) {
    draw_x(row, c);
    c->in[0].shape = od_shape(c, 2, 4);
    for (int j = 4; j < 8; j++) c->i[j] = od_int(c, -1, 2);
}

static int run_pad(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_pad_mode mode = (tg_pad_mode)(c->i[0] % 4);
    int count = mode == TG_PAD_CONSTANT ? 2 * (1 + (int)(c->i[1] % 2)) : 2 * (1 + (int)(c->i[1] % 2));
    return od_one(tg_pad(in[0], &c->i[4], count, mode, c->d[0]), out);
}

static void draw_flip_take(const od_row *row, od_case *c) {
    draw_x(row, c);
    int64_t n = tg_shape_numel(c->in[0].shape);
    od_input *idx = od_add(c, od_shape(c, 0, 2), DOM_INDEX);
    idx->bound = n;
}

static int run_flip_take(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    if (c->i[0] % 2) return od_one(tg_take(in[0], in[1]), out);
    int dims[2] = {dim_of(in[0], c->i[1]), dim_of(in[0], c->i[2])};
    return od_one(tg_flip(in[0], dims, dims[0] == dims[1] ? 1 : 2), out);
}

static int run_tril(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one((c->i[0] % 2 ? tg_triu : tg_tril)(in[0], c->i[1] - 3), out);
}

static void draw_masked(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    od_add(c, s, DOM_ANY);
    od_add(c, od_coin(c, 0.5) ? od_broadcastable(c, s) : s, DOM_BOOL);
    c->i[0] = od_int(c, 0, 1);
    c->d[0] = (double)(float)od_unif(c, -2, 2);
}

static int run_masked_fill(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_masked_fill(in[0], in[1], c->d[0]), out);
}

static void draw_lerp(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    c->i[0] = od_int(c, 0, 2);
    if (c->i[0] == 0) s = od_shape(c, 1, 1);
    od_add(c, s, DOM_ANY);
    od_add(c, c->i[0] == 0 ? od_shape(c, 1, 1) : od_broadcastable(c, s), DOM_ANY);
    od_add(c, od_broadcastable(c, s), DOM_ANY);
    c->d[0] = (double)(float)od_unif(c, -0.5, 1.5);
}

static int run_lerp(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    if (c->i[0] == 0) return od_one(tg_outer(in[0], in[1]), out);
    if (c->i[0] == 1) return od_one(tg_lerp(in[0], in[1], c->d[0]), out);
    return od_one(tg_lerp_tensor(in[0], in[1], in[2]), out);
}

static void draw_addmm(const od_row *row, od_case *c) {
    int64_t b = od_dim(c), n = od_dim(c), m = od_dim(c), p = od_dim(c);
    c->i[0] = od_int(c, 0, 1);
    bool batched = c->i[0] == 1;
    tg_shape out = batched ? TG_SHAPE(b, n, p) : TG_SHAPE(n, p);
    od_add(c, od_broadcastable(c, out), DOM_ANY);
    od_add(c, batched ? TG_SHAPE(b, n, m) : TG_SHAPE(n, m), DOM_ANY);
    od_add(c, batched ? TG_SHAPE(b, m, p) : TG_SHAPE(m, p), DOM_ANY);
    c->d[0] = od_coin(c, 0.2) ? 0 : (double)(float)od_unif(c, -2, 2);
    c->d[1] = (double)(float)od_unif(c, -2, 2);
}

static int run_addmm(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one((c->i[0] ? tg_baddbmm : tg_addmm)(in[0], in[1], in[2], c->d[0], c->d[1]), out);
}

static void draw_clamp_tensor(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    od_add(c, s, DOM_ANY);
    od_add(c, od_broadcastable(c, s), DOM_ANY);
    od_add(c, od_broadcastable(c, s), DOM_ANY);
    c->i[0] = od_int(c, 0, 1);
    c->d[0] = (double)(float)od_unif(c, -2, 0);
    c->d[1] = (double)(float)od_unif(c, 0, 2);
}

static int run_clamp_tensor(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    if (c->i[0]) return od_one(tg_hardtanh(in[0], c->d[0], c->d[1]), out);
    return od_one(tg_clamp_tensor(in[0], in[1], in[2]), out);
}

static int run_clone(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(c->i[0] % 2 ? tg_clone(in[0]) : tg_contiguous(in[0]), out);
}

static void draw_cat(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 1, 4);
    c->i[0] = od_int(c, 0, 1);
    c->i[1] = od_int(c, 0, s.ndim - 1);
    for (int k = 0; k < 3; k++) {
        tg_shape t = s;
        if (c->i[0] == 0) t.dims[c->i[1]] = od_dim(c);
        od_add(c, t, DOM_ANY);
    }
}

static int run_cat(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one((c->i[0] ? tg_stack : tg_cat)(in, 3, (int)c->i[1]), out);
}

/* x with an index along dim i[1]: 1-D for index_select/index_add (with a src of x's
 * shape but the index's length there), x's rank for gather/scatter_add. */
static void draw_indexed(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 1, 4);
    int d = (int)od_int(c, 0, s.ndim - 1);
    c->i[1] = d;
    od_add(c, s, DOM_ANY);
    bool one_d = row->name[3] == 'i'; /* tg_index_* */
    tg_shape is = s;
    if (one_d) is = TG_SHAPE(od_dim(c));
    else
        for (int k = 0; k < s.ndim; k++) is.dims[k] = od_int(c, 0, s.dims[k]);
    if (!one_d && od_coin(c, 0.5)) is.dims[d] = od_dim(c); /* gather may take more along dim */
    od_input *idx = od_add(c, is, DOM_INDEX);
    idx->bound = s.dims[d];
    tg_shape src = s;
    if (one_d) src.dims[d] = is.dims[0];
    else src = is;
    od_add(c, src, DOM_ANY);
}

static int run_index_select(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_index_select(in[0], (int)c->i[1], in[1]), out);
}

static int run_index_add(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_index_add(in[0], (int)c->i[1], in[1], in[2]), out);
}

static int run_gather(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_gather(in[0], (int)c->i[1], in[1]), out);
}

static int run_scatter_add(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_scatter_add(in[0], (int)c->i[1], in[1], in[2]), out);
}

static int run_nonzero(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_nonzero(in[0]), out);
}

static void draw_mask_select(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    od_add(c, s, DOM_ANY);
    c->i[0] = od_int(c, 0, 1);
    tg_shape m = s;
    if (c->i[0]) m.ndim = (int)od_int(c, 0, s.ndim); /* index_mask: leading dims */
    else if (od_coin(c, 0.5)) m = od_broadcastable(c, s);
    od_add(c, m, DOM_BOOL);
}

static int run_mask_select(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one((c->i[0] ? tg_index_mask : tg_masked_select)(in[0], in[1]), out);
}

static void draw_index_put(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 1, 3);
    od_add(c, s, DOM_ANY);
    tg_shape is = od_shape(c, 0, 2);
    od_input *idx = od_add(c, is, DOM_INDEX);
    idx->bound = s.dims[0];
    tg_shape v = is;
    for (int d = 1; d < s.ndim; d++) v.dims[v.ndim++] = s.dims[d];
    od_add(c, od_broadcastable(c, v), DOM_ANY);
    c->i[0] = od_int(c, 0, 1);
    /* Without accumulate a repeated index keeps the last value and the others get no
     * gradient: finite differences see the same, but only for distinct indices. */
}

static int run_index_put(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_index_put(in[0], &in[1], 1, in[2], c->i[0]), out);
}

static void draw_one_hot(const od_row *row, od_case *c) {
    c->i[0] = od_int(c, 1, 6);
    od_input *idx = od_add(c, od_shape(c, 0, 3), DOM_INDEX);
    idx->bound = c->i[0];
    od_add(c, TG_SCALAR_SHAPE, DOM_ANY); /* makes the run's dtype show */
}

static int run_one_hot(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *h = tg_one_hot(in[0], c->i[0]);
    return od_two(h, tg_mul(tg_cast(h, tg_dtype_of(in[1])), in[1]), out);
}

static void draw_embedding(const od_row *row, od_case *c) {
    int64_t v = od_dim(c) + 1, e = od_dim(c);
    od_add(c, TG_SHAPE(v, e), DOM_ANY);
    od_input *idx = od_add(c, od_shape(c, 0, 3), DOM_INDEX);
    idx->bound = v;
    c->i[0] = od_int(c, 0, 1);
    c->i[1] = od_int(c, -v, v - 1);
    c->no_grad = c->i[0]; /* the padding row gets no gradient, by definition */
}

static int run_embedding(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_embedding_opts o = {.use_padding_idx = c->i[0], .padding_idx = c->i[1]};
    return od_one(tg_embedding(in[0], in[1], o), out);
}

#define X(name, doc, run, extra) \
    { name, doc, draw_x, run, extra, DOM_ANY }

const od_row od_rows_shape[] = {
    X("tg_view", "tg_view", run_view, OD_EXACT),
    X("tg_squeeze", "tg_squeeze", run_squeeze, OD_EXACT),
    X("tg_transpose", "tg_transpose", run_transpose, OD_EXACT),
    X("tg_narrow", "tg_narrow", run_narrow, OD_EXACT),
    {"tg_expand", "tg_expand", draw_expand, run_expand, OD_EXACT},
    X("tg_contiguous", "tg_contiguous", run_clone, OD_EXACT),
    X("tg_select", "tg_select", run_select, OD_EXACT),
    X("tg_diagonal", "tg_diagonal", run_diagonal, OD_EXACT),
    X("tg_chunk", "tg_chunk", run_chunk, OD_EXACT),
    X("tg_movedim", "tg_movedim", run_movedim, OD_EXACT),
    X("tg_repeat", "tg_repeat", run_repeat, OD_EXACT),
    {"tg_repeat_interleave", "tg_repeat_interleave", draw_repeat_interleave, run_repeat_interleave, OD_EXACT},
    {"tg_pad", "tg_pad", draw_pad, run_pad, 0},
    {"tg_flip", "tg_flip", draw_flip_take, run_flip_take, OD_EXACT},
    X("tg_tril", "tg_tril", run_tril, OD_EXACT),
    {"tg_masked_fill", "tg_masked_fill", draw_masked, run_masked_fill, 0},
    {"tg_outer", "tg_outer", draw_lerp, run_lerp, 0},
    {"tg_addmm", "tg_addmm", draw_addmm, run_addmm, 0, .tol = 2},
    {"tg_clamp_tensor", "tg_clamp_tensor", draw_clamp_tensor, run_clamp_tensor, 0},
    X("tg_clone", "tg_clone", run_clone, OD_EXACT),
    {"tg_cat", "tg_cat", draw_cat, run_cat, OD_EXACT},
    {"tg_index_select", "tg_index_select", draw_indexed, run_index_select, OD_EXACT},
    {"tg_index_add", "tg_index_add", draw_indexed, run_index_add, 0},
    {"tg_gather", "tg_gather", draw_indexed, run_gather, OD_EXACT},
    {"tg_scatter_add", "tg_scatter_add", draw_indexed, run_scatter_add, 0},
    {"tg_nonzero", "tg_nonzero", draw_x, run_nonzero, OD_NO_GRAD, DOM_SMALLINT},
    {"tg_masked_select", "tg_masked_select", draw_mask_select, run_mask_select, OD_EXACT},
    {"tg_index_put", "tg_index_put", draw_index_put, run_index_put, 0},
    {"tg_one_hot", "tg_one_hot", draw_one_hot, run_one_hot, OD_NO_GRAD},
    {"tg_embedding", "tg_embedding", draw_embedding, run_embedding, OD_EXACT},
    {NULL},
};
