/* Op rows of the differential fuzzer: elementwise ops (docs/ops.md, "elementwise"). */
#include "op_diff.h"

/* a nonzero scalar, as a float32 (the opmath of low-precision ops) */
static void draw_scalar_nonzero(const od_row *row, od_case *c) {
    od_draw_scalar(row, c);
    c->d[0] = (double)(float)(od_unif(c, 0.5, 2) * (od_coin(c, 0.5) ? 1 : -1));
}

static void draw_where(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    od_add(c, od_coin(c, 0.5) ? od_broadcastable(c, s) : s, DOM_BOOL);
    od_add(c, od_coin(c, 0.3) ? od_broadcastable(c, s) : s, DOM_ANY);
    od_add(c, od_coin(c, 0.3) ? od_broadcastable(c, s) : s, DOM_ANY);
    c->d[0] = (double)(float)od_unif(c, -2, 2);
    c->d[1] = (double)od_int(c, -2, 2);
    c->i[0] = od_int(c, 0, 2);
}

static int run_where(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    if (c->i[0] == 0) return od_one(tg_where(in[0], in[1], in[2]), out);
    if (c->i[0] == 1) return od_one(tg_where_scalar(in[0], in[1], c->d[0]), out);
    /* tg_where_scalars has no float input: add one so that the dtype of the run shows */
    return od_one(tg_add(tg_where_scalars(in[0], c->d[0], c->d[1]), tg_mul_scalar(in[1], 0)), out);
}

static int run_full_like(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_full_like(in[0], c->d[0]), out);
}

static void draw_softplus(const od_row *row, od_case *c) {
    od_add(c, od_shape(c, 0, 4), DOM_ANY);
    c->d[0] = (double)(float)od_unif(c, 0.5, 3);
    c->d[1] = (double)(float)od_unif(c, 0.5, 20);
}

static int run_softplus(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_softplus(in[0], c->d[0], c->d[1]), out);
}

static void draw_clamp(const od_row *row, od_case *c) {
    od_add(c, od_shape(c, 0, 4), DOM_ANY);
    double a = (double)(float)od_unif(c, -2, 2), b = (double)(float)od_unif(c, -2, 2);
    c->d[0] = a < b ? a : b;
    c->d[1] = a < b ? b : a;
}

static int run_clamp(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_clamp(in[0], c->d[0], c->d[1]), out);
}

static void draw_dim(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    od_add(c, s, row->dom);
    c->i[0] = od_pick_dim(c, s.ndim);
}

static int run_softmin(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_softmin(in[0], (int)c->i[0]), out);
}

static const tg_dtype cast_targets[] = {TG_FLOAT64, TG_FLOAT32, TG_BFLOAT16, TG_FLOAT16, TG_INT64, TG_INT32, TG_BOOL};

static void draw_cast(const od_row *row, od_case *c) {
    od_add(c, od_shape(c, 0, 4), DOM_ANY);
    c->i[0] = od_int(c, 0, 6);
    /* Only a cast to float64 has a gradient finite differences can see. */
    c->no_grad = c->i[0] != 0;
}

static int run_cast(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_cast(in[0], cast_targets[c->i[0]]), out);
}

static void draw_inplace(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    od_add(c, s, DOM_ANY)->contiguous = true; /* written in place (after a clone) */
    od_add(c, od_coin(c, 0.5) ? od_broadcastable(c, s) : s, DOM_ANY);
    c->i[0] = od_int(c, 0, 3);
    c->d[0] = (double)(float)od_unif(c, -2, 2);
    /* known (docs/fuzzing.md): the gradient of mul_scalar_ on a clone of a 0-dim tensor */
    c->no_grad = c->i[0] == 2 && s.ndim == 0;
}

/* add_, mul_, mul_scalar_, add_scaled_ on a clone of in[0] (a graph tensor, so recorded) */
static int run_inplace(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *y = tg_clone(in[0]);
    if (!y) return 0;
    tg_status s;
    switch (c->i[0]) {
    case 0: s = tg_add_(y, in[1]); break;
    case 1: s = tg_mul_(y, in[1]); break;
    case 2: s = tg_mul_scalar_(y, c->d[0]); break;
    default: s = tg_add_scaled_(y, in[1], c->d[0]); break;
    }
    return s == TG_OK ? od_one(y, out) : 0;
}

static int run_copy_fill(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    /* The clone times in[0] keeps the overwritten value in the graph (its gradient is zero). */
    tg_tensor *y = tg_mul(tg_clone(in[0]), in[0]);
    if (!y) return 0;
    tg_status s = c->i[0] % 2 ? tg_fill_(y, c->d[0]) : tg_copy_(y, in[1]);
    return s == TG_OK ? od_one(tg_add(y, in[0]), out) : 0;
}

#define UNARY(fn, doc, domain, extra) \
    { #fn, doc, od_draw_unary, od_run_f1, extra, domain, DOM_ANY, 0, .f1 = fn }
#define BINARY(fn, doc, d1, d2, extra) \
    { #fn, doc, od_draw_binary, od_run_f2, extra, d1, d2, 0, .f2 = fn }
#define SCALAR(fn, doc, draw, domain, extra) \
    { #fn, doc, draw, od_run_fs, extra, domain, DOM_ANY, 0, .fs = fn }

const od_row od_rows_elementwise[] = {
    BINARY(tg_add, "tg_add", DOM_ANY, DOM_ANY, 0),
    BINARY(tg_sub, "tg_add", DOM_ANY, DOM_ANY, 0),
    BINARY(tg_mul, "tg_add", DOM_ANY, DOM_ANY, 0),
    BINARY(tg_div, "tg_add", DOM_ANY, DOM_NONZERO, 0),
    BINARY(tg_maximum, "tg_maximum", DOM_ANY, DOM_ANY, 0),
    BINARY(tg_minimum, "tg_maximum", DOM_ANY, DOM_ANY, 0),
    BINARY(tg_pow, "tg_pow", DOM_POS, DOM_ANY, 0),
    BINARY(tg_atan2, "tg_atan2", DOM_ANY, DOM_NONZERO, 0),
    BINARY(tg_fmod, "tg_fmod", DOM_ANY, DOM_NONZERO, 0),
    BINARY(tg_remainder, "tg_fmod", DOM_ANY, DOM_NONZERO, 0),
    SCALAR(tg_fmod_scalar, "tg_fmod", draw_scalar_nonzero, DOM_ANY, OD_NO_LOWP),
    /* bfloat16 rounds these two scalars to bfloat16 (docs/fuzzing.md, known): float32 only */
    SCALAR(tg_remainder_scalar, "tg_fmod", draw_scalar_nonzero, DOM_ANY, OD_NO_LOWP),
    BINARY(tg_eq, "tg_eq", DOM_SMALLINT, DOM_SMALLINT, OD_NO_GRAD),
    BINARY(tg_ne, "tg_eq", DOM_SMALLINT, DOM_SMALLINT, OD_NO_GRAD),
    BINARY(tg_lt, "tg_eq", DOM_SMALLINT, DOM_SMALLINT, OD_NO_GRAD),
    BINARY(tg_le, "tg_eq", DOM_SMALLINT, DOM_SMALLINT, OD_NO_GRAD),
    BINARY(tg_gt, "tg_eq", DOM_ANY, DOM_ANY, OD_NO_GRAD),
    BINARY(tg_ge, "tg_eq", DOM_SMALLINT, DOM_SMALLINT, OD_NO_GRAD),
    {"tg_where", "tg_where", draw_where, run_where, 0},
    SCALAR(tg_eq_scalar, "tg_eq_scalar", od_draw_scalar, DOM_SMALLINT, OD_NO_GRAD),
    SCALAR(tg_ne_scalar, "tg_eq_scalar", od_draw_scalar, DOM_SMALLINT, OD_NO_GRAD),
    SCALAR(tg_lt_scalar, "tg_eq_scalar", od_draw_scalar, DOM_SMALLINT, OD_NO_GRAD),
    SCALAR(tg_le_scalar, "tg_eq_scalar", od_draw_scalar, DOM_SMALLINT, OD_NO_GRAD),
    SCALAR(tg_gt_scalar, "tg_eq_scalar", od_draw_scalar, DOM_ANY, OD_NO_GRAD),
    SCALAR(tg_ge_scalar, "tg_eq_scalar", od_draw_scalar, DOM_SMALLINT, OD_NO_GRAD),
    {"tg_where_scalar", "tg_where_scalar", draw_where, run_where, 0},
    {"tg_full_like", "tg_full_like", od_draw_scalar, run_full_like, OD_NO_GRAD, DOM_ANY},
    SCALAR(tg_add_scalar, "tg_add_scalar", od_draw_scalar, DOM_ANY, 0),
    SCALAR(tg_sub_scalar, "tg_add_scalar", od_draw_scalar, DOM_ANY, 0),
    SCALAR(tg_mul_scalar, "tg_add_scalar", od_draw_scalar, DOM_ANY, 0),
    SCALAR(tg_div_scalar, "tg_add_scalar", draw_scalar_nonzero, DOM_ANY, 0),
    SCALAR(tg_rsub_scalar, "tg_add_scalar", od_draw_scalar, DOM_ANY, 0),
    SCALAR(tg_pow_scalar, "tg_pow_scalar", od_draw_scalar, DOM_POS, 0),
    UNARY(tg_neg, "tg_neg", DOM_ANY, 0),
    UNARY(tg_exp, "tg_neg", DOM_ANY, 0),
    UNARY(tg_log, "tg_neg", DOM_POS, 0),
    UNARY(tg_sqrt, "tg_neg", DOM_POS, 0),
    UNARY(tg_rsqrt, "tg_neg", DOM_POS, 0),
    UNARY(tg_abs, "tg_neg", DOM_NONZERO, 0),
    UNARY(tg_erf, "tg_neg", DOM_ANY, 0),
    UNARY(tg_reciprocal, "tg_neg", DOM_NONZERO, 0),
    UNARY(tg_square, "tg_neg", DOM_ANY, 0),
    UNARY(tg_sin, "tg_neg", DOM_ANY, 0),
    UNARY(tg_cos, "tg_neg", DOM_ANY, 0),
    UNARY(tg_sign, "tg_sign", DOM_ANY, 0),
    UNARY(tg_expm1, "tg_expm1", DOM_ANY, 0),
    UNARY(tg_log1p, "tg_expm1", DOM_POS, 0),
    UNARY(tg_floor, "tg_floor", DOM_ANY, 0),
    UNARY(tg_ceil, "tg_floor", DOM_ANY, 0),
    UNARY(tg_round, "tg_floor", DOM_ANY, 0),
    UNARY(tg_trunc, "tg_floor", DOM_ANY, 0),
    UNARY(tg_relu, "tg_relu", DOM_NONZERO, 0),
    SCALAR(tg_leaky_relu, "tg_relu", od_draw_scalar, DOM_NONZERO, 0),
    UNARY(tg_sigmoid, "tg_relu", DOM_ANY, 0),
    UNARY(tg_tanh, "tg_relu", DOM_ANY, 0),
    UNARY(tg_gelu, "tg_relu", DOM_ANY, 0),
    UNARY(tg_gelu_tanh, "tg_relu", DOM_ANY, 0),
    UNARY(tg_silu, "tg_relu", DOM_ANY, 0),
    {"tg_softplus", "tg_relu", draw_softplus, run_softplus, 0},
    BINARY(tg_relu_backward, "tg_relu_backward", DOM_ANY, DOM_NONZERO, 0),
    {"tg_clamp", "tg_clamp", draw_clamp, run_clamp, 0},
    UNARY(tg_logsigmoid, "tg_logsigmoid", DOM_ANY, 0),
    SCALAR(tg_elu, "tg_logsigmoid", od_draw_scalar, DOM_NONZERO, 0),
    UNARY(tg_selu, "tg_logsigmoid", DOM_NONZERO, 0),
    UNARY(tg_mish, "tg_logsigmoid", DOM_ANY, 0),
    UNARY(tg_hardswish, "tg_logsigmoid", DOM_ANY, 0),
    UNARY(tg_hardsigmoid, "tg_logsigmoid", DOM_ANY, 0),
    UNARY(tg_softsign, "tg_logsigmoid", DOM_ANY, 0),
    {"tg_softmin", "tg_softmin", draw_dim, run_softmin, OD_NO_GRADGRAD, DOM_ANY}, /* known: docs/fuzzing.md */
    {"tg_cast", "tg_cast", draw_cast, run_cast, 0},
    UNARY(tg_isfinite, "tg_isfinite", DOM_SPECIAL, OD_NO_GRAD),
    {"tg_add_", "tg_add_", draw_inplace, run_inplace, 0},
    {"tg_copy_", "tg_copy_", draw_inplace, run_copy_fill, 0},
    {NULL},
};
