/* Op rows of the differential fuzzer: reductions, scans, sorting (docs/ops.md,
 * "reduce" and the reductions of "shape"). Options: i[0] the variant, i[1] a dim,
 * i[2] keepdim, i[3] how many dims of dims[] (i[4..]), d[0] a real option. */
#include <math.h>

#include "op_diff.h"

/* x, one dim (i[1]), keepdim (i[2]), a variant in [0, variants) (i[0]) and a subset of
 * dims (i[3] of them in i[4..6]). */
static void draw_reduce(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    od_add(c, s, row->dom);
    c->i[0] = od_int(c, 0, 5);
    c->i[1] = od_pick_dim(c, s.ndim);
    c->i[2] = od_coin(c, 0.5);
    int n = s.ndim == 0 ? 0 : (int)od_int(c, 1, s.ndim < 3 ? s.ndim : 3);
    int first = s.ndim ? (int)od_int(c, 0, s.ndim - n) : 0;
    c->i[3] = n;
    for (int j = 0; j < n; j++) c->i[4 + j] = first + j; /* distinct, increasing */
}

static void dims_of(const od_case *c, int *dims) {
    for (int j = 0; j < c->i[3]; j++) dims[j] = (int)c->i[4 + j];
}

static int run_sum(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    int dims[3];
    dims_of(c, dims);
    bool mean = row->name[3] == 'm';
    switch (c->i[0] % 3) {
    case 0: return od_one(mean ? tg_mean(in[0]) : tg_sum(in[0]), out);
    case 1: return od_one((mean ? tg_mean_dims : tg_sum_dims)(in[0], dims, (int)c->i[3], c->i[2]), out);
    default: return od_one((mean ? tg_mean_dim : tg_sum_dim)(in[0], (int)c->i[1], c->i[2]), out);
    }
}

static void draw_sum_to(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    od_add(c, s, DOM_ANY);
    tg_shape t = od_broadcastable(c, s);
    c->i[0] = t.ndim;
    for (int d = 0; d < t.ndim; d++) c->i[1 + d] = t.dims[d];
}

static int run_sum_to(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_shape t = {.ndim = (int)c->i[0]};
    for (int d = 0; d < t.ndim; d++) t.dims[d] = c->i[1 + d];
    return od_one(tg_sum_to(in[0], t), out);
}

static int run_max(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(c->i[0] % 2 ? tg_min(in[0]) : tg_max(in[0]), out);
}

static int run_max_dim(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *idx = NULL;
    tg_tensor *v = (c->i[0] % 2 ? tg_min_dim : tg_max_dim)(in[0], (int)c->i[1], c->i[2], &idx);
    return od_two(v, idx, out);
}

static int run_argmax(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one((c->i[0] % 2 ? tg_argmin : tg_argmax)(in[0], (int)c->i[1], c->i[2]), out);
}

static int run_var(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    int dims[3];
    dims_of(c, dims);
    bool unbiased = c->i[0] % 2;
    return od_one((c->i[0] >= 3 ? tg_std : tg_var)(in[0], dims, (int)c->i[3], unbiased, c->i[2]), out);
}

static int run_logsumexp(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_logsumexp(in[0], (int)c->i[1], c->i[2]), out);
}

static int run_norm(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    static const double ps[6] = {2, 1, 3, 0.5, 1.5, INFINITY};
    int dims[3];
    dims_of(c, dims);
    return od_one(tg_norm(in[0], ps[c->i[0]], dims, (int)c->i[3], c->i[2]), out);
}

static int run_softmax(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one((c->i[0] % 2 ? tg_log_softmax : tg_softmax)(in[0], (int)c->i[1]), out);
}

static int run_amax(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    int dims[3];
    dims_of(c, dims);
    return od_one((c->i[0] % 2 ? tg_amin : tg_amax)(in[0], dims, (int)c->i[3], c->i[2]), out);
}

static int run_cumsum(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_cumsum(in[0], (int)c->i[1]), out);
}

static int run_cumprod(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_cumprod(in[0], (int)c->i[1]), out);
}

static int run_prod(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(c->i[0] % 2 ? tg_prod(in[0]) : tg_prod_dim(in[0], (int)c->i[1], c->i[2]), out);
}

static int run_sort(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    if (c->i[0] == 5) return od_one(tg_argsort(in[0], (int)c->i[1], c->i[2]), out);
    tg_tensor *idx = NULL;
    tg_tensor *v = tg_sort(in[0], (int)c->i[1], c->i[2], &idx);
    return od_two(v, idx, out);
}

static int run_topk(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    int64_t n = tg_ndim(in[0]) ? tg_size(in[0], (int)c->i[1]) : 1;
    int64_t k = n > 0 ? 1 + c->i[0] % n : 0;
    tg_tensor *idx = NULL, *v;
    if (c->i[0] % 2) v = tg_topk(in[0], k, (int)c->i[1], c->i[2], true, &idx);
    else v = tg_kthvalue(in[0], k > 0 ? k : 1, (int)c->i[1], c->i[2], &idx);
    return od_two(v, idx, out);
}

static int run_median(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    if (c->i[0] % 2) return od_one(tg_median(in[0]), out);
    tg_tensor *idx = NULL;
    tg_tensor *v = tg_median_dim(in[0], (int)c->i[1], c->i[2], &idx);
    return od_two(v, idx, out);
}

#define REDUCE(name, doc, run, domain, extra) \
    { name, doc, draw_reduce, run, extra, domain }

const od_row od_rows_reduce[] = {
    REDUCE("tg_sum", "tg_sum", run_sum, DOM_ANY, 0),
    REDUCE("tg_mean", "tg_mean", run_sum, DOM_ANY, 0),
    {"tg_sum_to", "tg_sum_to", draw_sum_to, run_sum_to, 0},
    REDUCE("tg_max", "tg_max", run_max, DOM_ANY, 0),
    REDUCE("tg_max_dim", "tg_max_dim", run_max_dim, DOM_ANY, 0),
    REDUCE("tg_argmax", "tg_argmax", run_argmax, DOM_ANY, OD_NO_GRAD),
    REDUCE("tg_var", "tg_var", run_var, DOM_ANY, 0),
    REDUCE("tg_logsumexp", "tg_logsumexp", run_logsumexp, DOM_ANY, 0),
    REDUCE("tg_norm", "tg_norm", run_norm, DOM_NONZERO, 0),
    REDUCE("tg_softmax", "tg_softmax", run_softmax, DOM_ANY, 0),
    REDUCE("tg_amax", "tg_amax", run_amax, DOM_ANY, 0),
    REDUCE("tg_cumsum", "tg_cumsum", run_cumsum, DOM_ANY, 0),
    REDUCE("tg_cumprod", "tg_cumprod", run_cumprod, DOM_ANY, 0),
    REDUCE("tg_prod", "tg_prod", run_prod, DOM_ANY, 0),
    /* sorting refuses bfloat16 (docs/fuzzing.md, known): float32 only */
    REDUCE("tg_sort", "tg_sort", run_sort, DOM_ANY, OD_NO_LOWP),
    REDUCE("tg_topk", "tg_topk", run_topk, DOM_ANY, OD_NO_LOWP),
    REDUCE("tg_median", "tg_median", run_median, DOM_ANY, OD_NO_LOWP),
    {NULL},
};
