/* Op rows of the differential fuzzer: random numbers and initialisers (docs/ops.md,
 * "random") and fake quantisation. Random draws differ between dtypes by design, so
 * these rows are OD_SEEDED: the driver seeds each run, and two runs with one seed
 * must give the same bits and float64's shapes. bfloat16 is refused by random fills
 * (docs/ops.md), so their low-precision runs are float32 (OD_NO_LOWP). */
#include "op_diff.h"

static void draw_like(const od_row *row, od_case *c) {
    od_add(c, od_shape(c, 0, 4), row->dom);
    for (int j = 0; j < 4; j++) c->i[j] = od_int(c, 0, 7);
    c->d[0] = (double)(float)od_unif(c, 0, 0.9);
}

static int run_rand(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_opts o = {.dtype = tg_dtype_of(in[0])};
    tg_shape s = tg_shape_of(in[0]);
    return od_one(c->i[0] % 2 ? tg_randn(s, o) : tg_rand(s, o), out);
}

static int run_rand_like(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    switch (c->i[0] % 3) {
    case 0: return od_one(tg_rand_like(in[0]), out);
    case 1: return od_one(tg_randn_like(in[0]), out);
    default: return od_one(tg_randint_like(in[0], -3, 1 + c->i[1]), out);
    }
}

static int run_randperm(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_randperm(tg_numel(in[0]), (tg_opts){.dtype = c->i[0] % 2 ? TG_INT64 : tg_dtype_of(in[0])}), out);
}

/* the state saved, a draw, the state restored, the same draw: both outputs equal */
static int run_rng_state(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *state = tg_get_rng_state();
    tg_tensor *a = tg_randn_like(in[0]);
    if (tg_set_rng_state(state) != TG_OK) return 0;
    return od_two(a, tg_randn_like(in[0]), out);
}

static int run_randint(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_randint(-(int64_t)c->i[1], 1 + c->i[2], tg_shape_of(in[0]), (tg_opts){.dtype = TG_INT64}), out);
}

static int run_bernoulli(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    if (c->i[0] % 2) return od_one(tg_bernoulli(in[0]), out);
    tg_tensor *t = tg_clone(in[0]);
    return t && tg_bernoulli_(t, c->d[0]) == TG_OK ? od_one(t, out) : 0;
}

/* weights in (0, 1] as [K] or [N, K]; with replacement or not */
static int run_multinomial(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    int64_t n = tg_numel(in[0]);
    if (n == 0) return 0;
    tg_shape s = tg_ndim(in[0]) >= 2 ? TG_SHAPE(tg_size(in[0], 0), n / tg_size(in[0], 0)) : TG_SHAPE(n);
    tg_tensor *w = tg_add_scalar(tg_reshape(in[0], s), 0.01);
    int64_t k = s.dims[s.ndim - 1];
    return w ? od_one(tg_multinomial(w, 1 + c->i[1] % k, c->i[0] % 2), out) : 0;
}

static int run_uniform_normal(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *t = tg_clone(in[0]);
    if (!t) return 0;
    tg_status s = c->i[0] % 2 ? tg_uniform_(t, -c->d[0], 1 + c->d[0]) : tg_normal_(t, c->d[0], 1 + c->d[0]);
    return s == TG_OK ? od_one(t, out) : 0;
}

static int run_dropout(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_dropout(in[0], c->d[0], c->i[0] % 4 != 0), out);
}

static int run_dropout2d(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(tg_dropout2d(in[0], c->d[0], c->i[0] % 4 != 0), out);
}

static int run_kaiming(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *t = tg_clone(in[0]);
    if (!t) return 0;
    tg_fan_mode mode = (tg_fan_mode)(c->i[1] % 2);
    tg_status s = c->i[0] % 2 ? tg_kaiming_uniform_(t, c->d[0], mode) : tg_kaiming_normal_(t, c->d[0], mode);
    return s == TG_OK ? od_one(t, out) : 0;
}

static int run_xavier(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    tg_tensor *t = tg_clone(in[0]);
    if (!t) return 0;
    tg_status s = c->i[0] % 2 ? tg_xavier_uniform_(t, 1 + c->d[0]) : tg_xavier_normal_(t, 1 + c->d[0]);
    return s == TG_OK ? od_one(t, out) : 0;
}

static void draw_fake_quantize(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 1, 4);
    od_add(c, s, DOM_ANY);
    c->i[0] = od_int(c, 0, 1);
    c->i[1] = od_int(c, 0, s.ndim - 1);   /* axis */
    c->i[2] = od_coin(c, 0.5) ? 0 : -128; /* quant_min: uint8 or int8 */
    c->i[3] = c->i[2] + 255;
    c->i[4] = od_int(c, c->i[2], c->i[3]); /* zero point */
    c->d[0] = (double)(float)od_unif(c, 0.005, 0.1);
    od_add(c, TG_SHAPE(s.dims[c->i[1]]), DOM_POS)->keep_f32 = true;
    od_input *zp = od_add(c, TG_SHAPE(s.dims[c->i[1]]), DOM_INDEX);
    zp->bound = 256; /* shifted by quant_min in the run */
}

/* Piecewise constant in x: the values are compared (a tie of round() may differ by one
 * step in bfloat16, hence the tolerance), the gradient is the clamp mask. */
static int run_fake_quantize(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    if (c->i[0] == 0) return od_one(tg_fake_quantize_per_tensor_affine(in[0], c->d[0], c->i[4], c->i[2], c->i[3]), out);
    tg_tensor *scale = tg_mul_scalar(tg_cast(in[1], TG_FLOAT32), 0.05);
    tg_tensor *zp = tg_add_scalar(in[2], (double)c->i[2]);
    return od_one(tg_fake_quantize_per_channel_affine(in[0], scale, zp, (int)c->i[1], c->i[2], c->i[3]), out);
}

#define RANDOM(name, run, extra) \
    { name, name, draw_like, run, OD_SEEDED | OD_NO_LOWP | OD_NO_GRAD | (extra), DOM_ANY }

const od_row od_rows_random[] = {
    RANDOM("tg_rand", run_rand, 0),
    RANDOM("tg_rand_like", run_rand_like, 0),
    RANDOM("tg_randperm", run_randperm, 0),
    RANDOM("tg_get_rng_state", run_rng_state, OD_SAME_OUTS),
    RANDOM("tg_randint", run_randint, 0),
    {"tg_bernoulli", "tg_bernoulli", draw_like, run_bernoulli, OD_SEEDED | OD_NO_LOWP | OD_NO_GRAD, DOM_UNIT},
    {"tg_multinomial", "tg_multinomial", draw_like, run_multinomial, OD_SEEDED | OD_NO_LOWP | OD_NO_GRAD, DOM_UNIT},
    RANDOM("tg_uniform_", run_uniform_normal, 0),
    /* dropout is differentiable: a seeded run draws the same mask in every gradcheck call */
    {"tg_dropout", "tg_dropout", draw_like, run_dropout, OD_SEEDED | OD_NO_LOWP, DOM_ANY},
    {"tg_dropout2d", "tg_dropout2d", draw_like, run_dropout2d, OD_SEEDED | OD_NO_LOWP, DOM_ANY},
    RANDOM("tg_kaiming_uniform_", run_kaiming, 0),
    RANDOM("tg_xavier_uniform_", run_xavier, 0),
    {"tg_fake_quantize_per_tensor_affine", "tg_fake_quantize_per_tensor_affine", draw_fake_quantize, run_fake_quantize,
     OD_NO_GRAD | OD_NO_LOWP, .tol = 1000},
    /* float32 or float64 input only, as PyTorch */ /* a tie of round() may move a value by one step of the grid */
    {NULL},
};
