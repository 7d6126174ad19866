// First- and second-order gradchecks of the first ops (autograd issue), on
// broadcast and non-contiguous inputs.
#include "test_util.h"

namespace {

struct Case {
    const char *name;
    tg_gradcheck_fn fn;
    int num_inputs;
};

tg_tensor *f_add(tg_tensor *const *x, void *) { return tg_add(x[0], x[1]); }
tg_tensor *f_sub(tg_tensor *const *x, void *) { return tg_sub(x[0], x[1]); }
tg_tensor *f_mul(tg_tensor *const *x, void *) { return tg_mul(x[0], x[1]); }
tg_tensor *f_div(tg_tensor *const *x, void *) { return tg_div(x[0], tg_add_scalar(tg_abs(x[1]), 0.5)); }
tg_tensor *f_neg(tg_tensor *const *x, void *) { return tg_neg(x[0]); }
tg_tensor *f_add_scalar(tg_tensor *const *x, void *) { return tg_add_scalar(x[0], 1.5); }
tg_tensor *f_mul_scalar(tg_tensor *const *x, void *) { return tg_mul_scalar(x[0], -2.5); }
tg_tensor *f_rsub_scalar(tg_tensor *const *x, void *) { return tg_rsub_scalar(x[0], 3.0); }
tg_tensor *f_pow_scalar(tg_tensor *const *x, void *) { return tg_pow_scalar(x[0], 3.0); }
tg_tensor *f_pow_frac(tg_tensor *const *x, void *) { return tg_pow_scalar(tg_add_scalar(tg_abs(x[0]), 0.5), 1.7); }
tg_tensor *f_exp(tg_tensor *const *x, void *) { return tg_exp(x[0]); }
tg_tensor *f_log(tg_tensor *const *x, void *) { return tg_log(tg_add_scalar(tg_abs(x[0]), 0.5)); }
tg_tensor *f_sum_all(tg_tensor *const *x, void *) { return tg_sum(tg_mul(x[0], x[0])); }
tg_tensor *f_sum_dim(tg_tensor *const *x, void *) { return tg_sum_dim(tg_mul(x[0], x[0]), 1, false); }
tg_tensor *f_sum_keepdim(tg_tensor *const *x, void *) {
    const int dims[2] = {0, -1};
    return tg_sum_dims(tg_exp(x[0]), dims, 2, true);
}
tg_tensor *f_mean(tg_tensor *const *x, void *) { return tg_mean_dim(tg_mul(x[0], x[0]), 0, true); }
tg_tensor *f_mean_all(tg_tensor *const *x, void *) { return tg_mean(tg_exp(x[0])); }

const Case kUnary[] = {
    {"neg", f_neg, 1},
    {"add_scalar", f_add_scalar, 1},
    {"mul_scalar", f_mul_scalar, 1},
    {"rsub_scalar", f_rsub_scalar, 1},
    {"pow_scalar", f_pow_scalar, 1},
    {"pow_frac", f_pow_frac, 1},
    {"exp", f_exp, 1},
    {"log", f_log, 1},
    {"sum_all", f_sum_all, 1},
    {"sum_dim", f_sum_dim, 1},
    {"sum_keepdim", f_sum_keepdim, 1},
    {"mean", f_mean, 1},
    {"mean_all", f_mean_all, 1},
};
const Case kBinary[] = {
    {"add", f_add, 2},
    {"sub", f_sub, 2},
    {"mul", f_mul, 2},
    {"div", f_div, 2},
};

// Deterministic float64 inputs in (-1, 1).
tg_tensor *input(tg_shape shape, int seed) {
    tg_tensor *t = tg_empty(shape, tg_opts{TG_FLOAT64});
    double *d = (double *)tg_data_ptr(t);
    for (int64_t i = 0; i < tg_numel(t); i++) d[i] = std::sin(1.3 * (double)i + seed) * 0.9;
    return t;
}

// A non-contiguous [3, 4] tensor: the transpose of a [4, 3].
tg_tensor *transposed(int seed) { return tg_requires_grad_(tg_transpose(input(TG_SHAPE(4, 3), seed), 0, 1), true); }

} // namespace

class GradcheckOps : public TgTest {};

TEST_F(GradcheckOps, UnaryContiguousAndTransposed) {
    for (const Case &c : kUnary) {
        SCOPED_TRACE(c.name);
        tg_tensor *a = tg_requires_grad_(input(TG_SHAPE(3, 4), 1), true);
        tg_gradcheck_opts o = {};
        EXPECT_EQ(tg_gradcheck(c.fn, 1, &a, &o), TG_OK) << tg_last_error();
        tg_tensor *t = transposed(2);
        EXPECT_FALSE(tg_is_contiguous(t));
        EXPECT_EQ(tg_gradcheck(c.fn, 1, &t, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(c.fn, 1, &t, &o), TG_OK) << tg_last_error();
    }
}

TEST_F(GradcheckOps, BinaryBroadcastAndTransposed) {
    for (const Case &c : kBinary) {
        SCOPED_TRACE(c.name);
        tg_gradcheck_opts o = {};
        // [3, 4] with [4] and [3, 1]: gradients are summed back over the broadcast dims.
        tg_tensor *in1[2] = {tg_requires_grad_(input(TG_SHAPE(3, 4), 1), true),
                             tg_requires_grad_(input(TG_SHAPE(4), 2), true)};
        EXPECT_EQ(tg_gradcheck(c.fn, 2, in1, &o), TG_OK) << tg_last_error();
        tg_tensor *in2[2] = {tg_requires_grad_(input(TG_SHAPE(3, 1), 3), true), transposed(4)};
        EXPECT_EQ(tg_gradcheck(c.fn, 2, in2, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(c.fn, 2, in2, &o), TG_OK) << tg_last_error();
        // A scalar (0-dim) operand.
        tg_tensor *in3[2] = {tg_requires_grad_(input(TG_SCALAR_SHAPE, 5), true), transposed(6)};
        EXPECT_EQ(tg_gradcheck(c.fn, 2, in3, &o), TG_OK) << tg_last_error();
    }
}

TEST_F(GradcheckOps, DetectsAWrongGradient) {
    static const tg_function wrong = {
        .name = "wrong_square",
        .num_inputs = 1,
        .forward = [](tg_ctx *ctx, tg_tensor *const *in) -> tg_tensor * {
            tg_ctx_save(ctx, in[0]);
            return tg_mul(in[0], in[0]);
        },
        // missing 2x
        .backward = [](tg_ctx *ctx, tg_tensor *g, tg_tensor **gi) { gi[0] = tg_mul(g, tg_ctx_saved(ctx, 0)); },
        .num_outputs = 1,
        .low_precision = TG_LOW_PRECISION_REFUSE,
        .autocast = TG_AUTOCAST_NONE};
    tg_gradcheck_fn fn = [](tg_tensor *const *x, void *) { return tg_apply(&wrong, x); };
    tg_tensor *a = tg_requires_grad_(input(TG_SHAPE(3), 1), true);
    tg_gradcheck_opts o = {};
    EXPECT_EQ(tg_gradcheck(fn, 1, &a, &o), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_gradcheck: Jacobian mismatch for input 0");
    EXPECT_NEAR(o.worst_numeric, 2 * o.worst_analytic, 1e-6);
}

TEST_F(GradcheckOps, RefusesFloat32Inputs) {
    tg_tensor *a = tg_requires_grad_(tg_ones(TG_SHAPE(2), tg_opts{}), true);
    EXPECT_EQ(tg_gradcheck(f_exp, 1, &a, nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("gradcheck needs float64 inputs");
}
