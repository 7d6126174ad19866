// Elementwise ops (ops/elementwise.h) and tg_sum_to: PyTorch fixtures (forward values
// and input gradients, in float32 and float64; tests/fixtures/gen_elementwise.py),
// gradcheck and gradgradcheck in float64 on contiguous, non-contiguous (transposed,
// sliced) and broadcast inputs, comparisons and casts on integer and bool dtypes,
// in-place ops (values, versions, refusal on a leaf that requires grad), errors.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>

#include "tests/ops/op_fixture.h"

namespace {

using UnaryFn = tg_tensor *(*)(tg_tensor *);
using BinaryFn = tg_tensor *(*)(tg_tensor *, tg_tensor *);
using ScalarFn = tg_tensor *(*)(tg_tensor *, double);

const std::map<std::string, FixtureTensor> &elementwise_fixtures() {
    static const std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/elementwise.txt");
    return fx;
}

void check_both(const std::string &name, const FixtureOp &op) {
    check_fixture_in(elementwise_fixtures(), name, TG_FLOAT32, op);
    check_fixture_in(elementwise_fixtures(), name, TG_FLOAT64, op);
}

FixtureOp unary(UnaryFn fn) {
    return [fn](const std::vector<tg_tensor *> &in, tg_tensor **) { return fn(in[0]); };
}
FixtureOp binary(BinaryFn fn) {
    return [fn](const std::vector<tg_tensor *> &in, tg_tensor **) { return fn(in[0], in[1]); };
}
FixtureOp with_scalar(ScalarFn fn, double s) {
    return [fn, s](const std::vector<tg_tensor *> &in, tg_tensor **) { return fn(in[0], s); };
}
FixtureOp unary_of(std::function<tg_tensor *(tg_tensor *)> fn) {
    return [fn](const std::vector<tg_tensor *> &in, tg_tensor **) { return fn(in[0]); };
}

// A float64 tensor of `shape` with fixed pseudo-random values in [lo, hi).
tg_tensor *in64(tg_shape shape, unsigned seed, double lo = -1, double hi = 1, bool requires_grad = true) {
    std::vector<double> v = values(rand64(shape, seed, false));
    for (double &x : v) x = lo + (x + 1) / 2 * (hi - lo);
    return tensor_f64(v, shape, requires_grad);
}
// A non-contiguous [n, m] leaf: the transpose of an [m, n] tensor.
tg_tensor *transposed64(int64_t n, int64_t m, unsigned seed, double lo = -1, double hi = 1) {
    tg_tensor *t = tg_requires_grad_(tg_transpose(in64(TG_SHAPE(m, n), seed, lo, hi, false), 0, 1), true);
    EXPECT_FALSE(tg_is_contiguous(t));
    return t;
}
// A non-contiguous [n, m] leaf: columns 1..m of an [n, m + 2] tensor.
tg_tensor *sliced64(int64_t n, int64_t m, unsigned seed, double lo = -1, double hi = 1) {
    tg_tensor *t = tg_requires_grad_(tg_narrow(in64(TG_SHAPE(n, m + 2), seed, lo, hi, false), 1, 1, m), true);
    EXPECT_FALSE(tg_is_contiguous(t));
    return t;
}

// gradcheck / gradgradcheck of fn with `user` passed through (default tolerances, or opts).
::testing::AssertionResult gradcheck_ok(tg_gradcheck_fn fn, std::vector<tg_tensor *> in, void *user, bool second_order,
                                        double eps = 0, double atol = 0) {
    tg_gradcheck_opts o = {};
    o.user = user;
    o.eps = eps;
    o.atol = atol;
    tg_status st = second_order ? tg_gradgradcheck(fn, (int)in.size(), in.data(), &o)
                                : tg_gradcheck(fn, (int)in.size(), in.data(), &o);
    if (st == TG_OK) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << (second_order ? "gradgradcheck: " : "gradcheck: ") << tg_last_error();
}

// ---- unary cases for gradcheck: the op and the input range (away from kinks and poles) ----
struct UnaryCase {
    const char *name;
    std::function<tg_tensor *(tg_tensor *)> f;
    double lo, hi;
};

tg_tensor *run_unary(tg_tensor *const *in, void *user) { return static_cast<const UnaryCase *>(user)->f(in[0]); }
// The op on a broadcast (stride-0) input: [3, 1] expanded to [3, 4].
tg_tensor *run_unary_expanded(tg_tensor *const *in, void *user) {
    return static_cast<const UnaryCase *>(user)->f(tg_expand(in[0], TG_SHAPE(3, 4)));
}

std::function<tg_tensor *(tg_tensor *)> scalar_op(ScalarFn fn, double s) {
    return [fn, s](tg_tensor *x) { return fn(x, s); };
}

const std::vector<UnaryCase> &unary_cases() {
    static const std::vector<UnaryCase> cases = {
        {"neg", tg_neg, -1, 1},
        {"abs", tg_abs, -1, 1},
        {"exp", tg_exp, -2, 2},
        {"log", tg_log, 0.2, 3},
        {"sqrt", tg_sqrt, 0.2, 3},
        {"rsqrt", tg_rsqrt, 0.2, 3},
        {"erf", tg_erf, -2, 2},
        {"reciprocal", tg_reciprocal, 0.4, 2},
        {"reciprocal_negative", tg_reciprocal, -2, -0.4},
        {"square", tg_square, -2, 2},
        {"sin", tg_sin, -3, 3},
        {"cos", tg_cos, -3, 3},
        {"sign", tg_sign, -1, 1},
        {"relu", tg_relu, -1, 1},
        {"leaky_relu", [](tg_tensor *x) { return tg_leaky_relu(x, 0.01); }, -1, 1},
        {"leaky_relu_0.2", [](tg_tensor *x) { return tg_leaky_relu(x, 0.2); }, -1, 1},
        {"sigmoid", tg_sigmoid, -4, 4},
        {"tanh", tg_tanh, -3, 3},
        {"gelu", tg_gelu, -3, 3},
        {"gelu_tanh", tg_gelu_tanh, -3, 3},
        {"silu", tg_silu, -4, 4},
        {"softplus", [](tg_tensor *x) { return tg_softplus(x, 1, 20); }, -3, 3},
        {"softplus_beta2_threshold5", [](tg_tensor *x) { return tg_softplus(x, 2, 5); }, -3, 3},
        {"clamp", [](tg_tensor *x) { return tg_clamp(x, -0.5, 0.5); }, -1, 1},
        {"clamp_min", [](tg_tensor *x) { return tg_clamp(x, -0.3, NAN); }, -1, 1},
        {"clamp_max", [](tg_tensor *x) { return tg_clamp(x, NAN, 0.3); }, -1, 1},
        {"add_scalar", scalar_op(tg_add_scalar, 1.5), -1, 1},
        {"sub_scalar", scalar_op(tg_sub_scalar, 2.25), -1, 1},
        {"mul_scalar", scalar_op(tg_mul_scalar, -2.5), -1, 1},
        {"div_scalar", scalar_op(tg_div_scalar, 3), -1, 1},
        {"rsub_scalar", scalar_op(tg_rsub_scalar, 3), -1, 1},
        {"pow_scalar_0", scalar_op(tg_pow_scalar, 0), -1, 1},
        {"pow_scalar_1", scalar_op(tg_pow_scalar, 1), -1, 1},
        {"pow_scalar_2", scalar_op(tg_pow_scalar, 2), -1, 1},
        {"pow_scalar_3", scalar_op(tg_pow_scalar, 3), -1, 1},
        {"pow_scalar_0.5", scalar_op(tg_pow_scalar, 0.5), 0.2, 3},
        {"pow_scalar_-1.5", scalar_op(tg_pow_scalar, -1.5), 0.2, 3},
    };
    return cases;
}

// ---- binary cases for gradcheck ----
struct BinaryCase {
    const char *name;
    BinaryFn f;
    double a_lo, a_hi, b_lo, b_hi;
};

tg_tensor *run_binary(tg_tensor *const *in, void *user) {
    return static_cast<const BinaryCase *>(user)->f(in[0], in[1]);
}

const BinaryCase kBinaryCases[] = {
    {"add", tg_add, -1, 1, -1, 1},
    {"sub", tg_sub, -1, 1, -1, 1},
    {"mul", tg_mul, -1, 1, -1, 1},
    {"div", tg_div, -1, 1, 0.5, 2},
    {"div_negative", tg_div, -1, 1, -2, -0.5},
    {"maximum", tg_maximum, -1, 1, -1, 1},
    {"minimum", tg_minimum, -1, 1, -1, 1},
    {"pow", tg_pow, 0.3, 2, -1.5, 1.5},
};

tg_tensor *run_where(tg_tensor *const *in, void *cond) {
    return tg_where(static_cast<tg_tensor *>(cond), in[0], in[1]);
}
tg_tensor *run_cast_roundtrip(tg_tensor *const *in, void *) {
    return tg_cast(tg_mul(tg_cast(in[0], TG_FLOAT32), tg_cast(in[1], TG_FLOAT32)), TG_FLOAT64);
}
tg_tensor *run_sum_to_31(tg_tensor *const *in, void *) { return tg_sum_to(in[0], TG_SHAPE(3, 1)); }
tg_tensor *run_sum_to_14_of_square(tg_tensor *const *in, void *) { return tg_sum_to(tg_square(in[0]), TG_SHAPE(1, 4)); }

} // namespace

// ======================= PyTorch fixtures =======================

TEST_F(TgTest, BinaryArithmeticMatchesPyTorch) {
    for (const char *name : {"add", "add_bcast"}) check_both(name, binary(tg_add));
    for (const char *name : {"sub", "sub_bcast"}) check_both(name, binary(tg_sub));
    for (const char *name : {"mul", "mul_bcast"}) check_both(name, binary(tg_mul));
    for (const char *name : {"div", "div_bcast", "div_bcast_first"}) check_both(name, binary(tg_div));
}

TEST_F(TgTest, MaximumMinimumMatchPyTorchIncludingTies) {
    // Ties (equal elements) split the gradient in half between the two inputs.
    check_both("maximum_ties", binary(tg_maximum));
    check_both("minimum_ties", binary(tg_minimum));
    check_both("maximum", binary(tg_maximum));
    check_both("maximum_bcast", binary(tg_maximum));
    check_both("minimum_bcast", binary(tg_minimum));
}

TEST_F(TgTest, PowMatchesPyTorch) {
    check_both("pow", binary(tg_pow));
    check_both("pow_bcast", binary(tg_pow));
    check_both("pow_bcast_base", binary(tg_pow));
    // a zero base: PyTorch's gradients are 0 where the exponent is 0 (for the base) and
    // where the base is 0 and the exponent >= 0 (for the exponent), not NaN / -inf
    check_both("pow_zero_base", binary(tg_pow));
}

// PyTorch 1.13's gradients at NaN: clamp passes none ((x >= min) & (x <= max) is
// false), relu passes it (threshold_backward zeroes only x <= 0), maximum/minimum
// pass the whole gradient to both inputs (neither loses).
TEST_F(TgTest, NanGradientsAsPyTorch) {
    tg_tensor *x = tensor_f64({NAN, 0.5}, TG_SHAPE(2), true);
    ASSERT_EQ(tg_backward(tg_sum(tg_clamp(x, -1, 1))), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), {0, 1}, 0));
    tg_tensor *r = tensor_f64({NAN, 0, -1, 2}, TG_SHAPE(4), true); // relu: NaN passes, 0 does not
    ASSERT_EQ(tg_backward(tg_sum(tg_relu(r))), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(r), {1, 0, 0, 1}, 0));
    tg_tensor *a = tensor_f64({NAN, 1, 2, 3}, TG_SHAPE(4), true), *b = tensor_f64({1, NAN, 2, 1}, TG_SHAPE(4), true);
    ASSERT_EQ(tg_backward(tg_sum(tg_maximum(a, b))), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(a), {1, 1, 0.5, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(b), {1, 1, 0.5, 0}, 0));
    tg_zero_grad(a);
    tg_zero_grad(b);
    ASSERT_EQ(tg_backward(tg_sum(tg_minimum(a, b))), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(a), {1, 1, 0.5, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(b), {1, 1, 0.5, 1}, 0));
}

// relu's gradient in one pass, as aten's threshold_backward(grad, x, 0): grad where x > 0
// or x is NaN, else 0, also where grad is NaN (a mask multiplied would give NaN there);
// broadcast and float32; its own gradient is the same mask for grad and none for x.
TEST_F(TgTest, ReluBackwardIsThresholdBackward) {
    tg_tensor *g = tensor_f64({5, 6, 7, 8, NAN, NAN}, TG_SHAPE(6)),
              *x = tensor_f64({-1, 0, 2, NAN, -3, 4}, TG_SHAPE(6));
    EXPECT_TRUE(tensor_near(tg_relu_backward(g, x), {0, 0, 7, 8, 0, NAN}, 0));
    tg_tensor *y = tg_relu_backward(tensor_f32({1, 2}, TG_SHAPE(2, 1)), tensor_f32({-1, 1, 0.5}, TG_SHAPE(3)));
    EXPECT_EQ(dims(y), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(tg_dtype_of(y), TG_FLOAT32);
    EXPECT_TRUE(tensor_near(y, {0, 1, 1, 0, 2, 2}, 0));
    tg_tensor *gg = tensor_f64({1, 2, 3}, TG_SHAPE(3), true), *xx = tensor_f64({-1, 2, 3}, TG_SHAPE(3), true);
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(tg_relu_backward(gg, xx), tensor_f64({10, 20, 30}, TG_SHAPE(3))))), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(gg), {0, 20, 30}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(xx), {0, 0, 0}, 0));
}

// softplus is log1p(exp(beta x)) / beta, as PyTorch: exact far below zero in float32.
TEST_F(TgTest, SoftplusFarBelowZero) {
    tg_tensor *y = tg_softplus(tensor_f32({-20, -50}, TG_SHAPE(2)), 1, 20);
    ASSERT_NE(y, nullptr);
    EXPECT_TRUE(tensor_near(y, {2.0611536e-9, 1.9287499e-22}, 0, 1e-6)); // PyTorch 1.13 float32
}

// torch.can_cast for in-place ops: a float result does not go into an integer tensor.
TEST_F(TgTest, InPlaceRefusesALossyResultType) {
    tg_tensor *i = tensor_i64({1, 2, 3}, TG_SHAPE(3));
    EXPECT_EQ(tg_add_(i, tensor_f32({0.5f, 0.5f, 0.5f}, TG_SHAPE(3))), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_add_: result type float32 can't be cast to the desired output type int64");
    EXPECT_EQ(tg_mul_scalar_(i, 2.5), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_mul_scalar_: result type float32 can't be cast to the desired output type int64");
    EXPECT_EQ(tg_add_scaled_(i, tensor_i64({1, 1, 1}, TG_SHAPE(3)), 0.5), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_add_scaled_: result type float32");
    EXPECT_TRUE(tensor_near(i, {1, 2, 3}, 0)) << "unchanged";
    ASSERT_EQ(tg_mul_scalar_(i, 2), TG_OK);
    ASSERT_EQ(tg_add_(i, tensor_i64({1, 1, 1}, TG_SHAPE(3))), TG_OK);
    EXPECT_TRUE(tensor_near(i, {3, 5, 7}, 0));
    tg_tensor *f = tensor_f64({1, 2}, TG_SHAPE(2));
    ASSERT_EQ(tg_add_(f, tensor_i64({1, 1}, TG_SHAPE(2))), TG_OK); // int into float is fine
    EXPECT_TRUE(tensor_near(f, {2, 3}, 0));
}

TEST_F(TgTest, WhereMatchesPyTorch) {
    FixtureOp where = [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_where(tg_cast(in[0], TG_BOOL), in[1], in[2]); // the bool fixture loads as int64
    };
    check_both("where", where);
    check_both("where_bcast", where);
}

TEST_F(TgTest, ScalarOpsMatchPyTorch) {
    check_both("add_scalar", with_scalar(tg_add_scalar, 1.5));
    check_both("sub_scalar", with_scalar(tg_sub_scalar, 2.25));
    check_both("mul_scalar", with_scalar(tg_mul_scalar, -2.5));
    check_both("div_scalar", with_scalar(tg_div_scalar, 4));
    check_both("div_scalar3", with_scalar(tg_div_scalar, 3));
    check_both("rsub_scalar", with_scalar(tg_rsub_scalar, 3));
}

TEST_F(TgTest, PowScalarMatchesPyTorchIncludingZeroBases) {
    check_both("pow_scalar2", with_scalar(tg_pow_scalar, 2));
    check_both("pow_scalar3", with_scalar(tg_pow_scalar, 3));
    check_both("pow_scalar_half", with_scalar(tg_pow_scalar, 0.5));
    check_both("pow_scalar_neg", with_scalar(tg_pow_scalar, -1.5));
    check_both("pow_scalar0", with_scalar(tg_pow_scalar, 0)); // 0^0 = 1, gradient 0
    check_both("pow_scalar2_zero", with_scalar(tg_pow_scalar, 2));
    check_both("pow_scalar1_zero", with_scalar(tg_pow_scalar, 1)); // gradient 1 at 0
    check_both("pow_scalar3_zero", with_scalar(tg_pow_scalar, 3));
}

TEST_F(TgTest, UnaryMathMatchesPyTorch) {
    check_both("neg", unary(tg_neg));
    check_both("abs", unary(tg_abs)); // gradient 0 at exactly 0 (and -0)
    check_both("exp", unary(tg_exp));
    check_both("log", unary(tg_log));
    check_both("sqrt", unary(tg_sqrt));
    check_both("rsqrt", unary(tg_rsqrt));
    check_both("erf", unary(tg_erf)); // including 0 and +-1e-3
    check_both("reciprocal", unary(tg_reciprocal));
    check_both("square", unary(tg_square));
    check_both("sin", unary(tg_sin));
    check_both("cos", unary(tg_cos));
    check_both("sign", unary(tg_sign)); // gradient zero
}

TEST_F(TgTest, ActivationsMatchPyTorch) {
    check_both("relu", unary(tg_relu));                                                      // gradient 0 at exactly 0
    check_both("leaky_relu", unary_of([](tg_tensor *x) { return tg_leaky_relu(x, 0.01); })); // slope at 0
    check_both("leaky_relu02", unary_of([](tg_tensor *x) { return tg_leaky_relu(x, 0.2); }));
    check_both("sigmoid", unary(tg_sigmoid)); // saturated at +-30
    check_both("tanh", unary(tg_tanh));       // saturated at +-20
    check_both("gelu", unary(tg_gelu));       // around 0 and in the tails
    check_both("gelu_tanh", unary(tg_gelu_tanh));
    check_both("silu", unary(tg_silu));
}

TEST_F(TgTest, SoftplusMatchesPyTorchAroundItsThreshold) {
    check_both("softplus", unary_of([](tg_tensor *x) { return tg_softplus(x, 1, 20); }));
    check_both("softplus_beta", unary_of([](tg_tensor *x) { return tg_softplus(x, 2, 5); }));
    check_both("softplus_beta_half", unary_of([](tg_tensor *x) { return tg_softplus(x, 0.5, 3); }));
}

TEST_F(TgTest, ClampMatchesPyTorchAtItsBounds) {
    // Gradient 1 on [min, max] including exactly at the bounds, as PyTorch.
    check_both("clamp", unary_of([](tg_tensor *x) { return tg_clamp(x, -0.5, 0.5); }));
    check_both("clamp_min", unary_of([](tg_tensor *x) { return tg_clamp(x, -0.25, NAN); }));
    check_both("clamp_max", unary_of([](tg_tensor *x) { return tg_clamp(x, NAN, 0.25); }));
    check_both("clamp_2d", unary_of([](tg_tensor *x) { return tg_clamp(x, -0.7, 1.1); }));
}

TEST_F(TgTest, ComparisonsMatchPyTorch) {
    const std::pair<const char *, BinaryFn> cmps[] = {{"eq_bcast", tg_eq}, {"ne_bcast", tg_ne}, {"lt_bcast", tg_lt},
                                                      {"le_bcast", tg_le}, {"gt_bcast", tg_gt}, {"ge_bcast", tg_ge}};
    for (const auto &c : cmps) {
        BinaryFn fn = c.second;
        check_both(c.first, [fn](const std::vector<tg_tensor *> &in, tg_tensor **) {
            tg_tensor *out = fn(in[0], in[1]); // inputs require grad; the result does not
            EXPECT_EQ(tg_dtype_of(out), TG_BOOL);
            EXPECT_FALSE(tg_requires_grad(out));
            return out;
        });
    }
}

TEST_F(TgTest, CastIsfiniteSumToMatchPyTorch) {
    check_both("cast_to_f32", unary_of([](tg_tensor *x) {
                   tg_tensor *y = tg_cast(x, TG_FLOAT32);
                   EXPECT_EQ(tg_dtype_of(y), TG_FLOAT32);
                   return y;
               }));
    check_both("cast_to_f64", unary_of([](tg_tensor *x) {
                   tg_tensor *y = tg_cast(x, TG_FLOAT64);
                   EXPECT_EQ(tg_dtype_of(y), TG_FLOAT64);
                   return y;
               }));
    check_both("isfinite", unary_of([](tg_tensor *x) {
                   tg_tensor *y = tg_isfinite(x);
                   EXPECT_EQ(tg_dtype_of(y), TG_BOOL);
                   return y;
               }));
    check_both("sum_to", unary_of([](tg_tensor *x) { return tg_sum_to(x, TG_SHAPE(3, 1)); }));
    check_both("sum_to_lead", unary_of([](tg_tensor *x) { return tg_sum_to(x, TG_SHAPE(1, 4)); }));
}

TEST_F(TgTest, MixedFloatDtypesPromoteAndKeepEachInputsGradientDtype) {
    // float32 (x) float64 -> float64, and each gradient comes back in its input's dtype.
    tg_tensor *a = tensor_f32({1, 2, -3}, TG_SHAPE(3), true);
    tg_tensor *b = tensor_f64({0.5, -4, 2}, TG_SHAPE(3), true);
    tg_tensor *y = tg_mul(a, b);
    EXPECT_EQ(tg_dtype_of(y), TG_FLOAT64);
    ASSERT_EQ(tg_backward(tg_sum(tg_add(y, tg_div(a, b)))), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(tg_grad(a)), TG_FLOAT32);
    EXPECT_EQ(tg_dtype_of(tg_grad(b)), TG_FLOAT64);
    // d/da (ab + a/b) = b + 1/b; d/db = a - a/b^2
    EXPECT_TRUE(tensor_near(tg_grad(a), {0.5 + 2, -4 - 0.25, 2 + 0.5}, 1e-6));
    EXPECT_TRUE(tensor_near(tg_grad(b), {1 - 4, 2 - 2.0 / 16, -3 + 3.0 / 4}, 1e-6));
}

// ======================= gradcheck (float64) =======================

TEST_F(TgTest, UnaryGradcheckContiguousTransposedAndBroadcast) {
    unsigned seed = 1;
    for (const UnaryCase &c : unary_cases()) {
        SCOPED_TRACE(c.name);
        void *user = const_cast<UnaryCase *>(&c);
        TG_SCOPE {
            EXPECT_TRUE(gradcheck_ok(run_unary, {in64(TG_SHAPE(2, 3, 4), seed++, c.lo, c.hi)}, user, false));
            tg_tensor *t = transposed64(3, 4, seed++, c.lo, c.hi);
            EXPECT_TRUE(gradcheck_ok(run_unary, {t}, user, false));
            EXPECT_TRUE(gradcheck_ok(run_unary, {t}, user, true));
            tg_tensor *col = in64(TG_SHAPE(3, 1), seed++, c.lo, c.hi);
            EXPECT_TRUE(gradcheck_ok(run_unary_expanded, {col}, user, false));
            EXPECT_TRUE(gradcheck_ok(run_unary_expanded, {col}, user, true));
            EXPECT_TRUE(gradcheck_ok(run_unary, {sliced64(3, 4, seed++, c.lo, c.hi)}, user, true));
        }
    }
}

TEST_F(TgTest, BinaryGradcheckBroadcastAndNonContiguous) {
    unsigned seed = 100;
    for (const BinaryCase &c : kBinaryCases) {
        SCOPED_TRACE(c.name);
        void *user = const_cast<BinaryCase *>(&c);
        TG_SCOPE {
            // [3, 4] with [4]: b's gradient is summed over the broadcast dim.
            std::vector<tg_tensor *> in1 = {in64(TG_SHAPE(3, 4), seed++, c.a_lo, c.a_hi),
                                            in64(TG_SHAPE(4), seed++, c.b_lo, c.b_hi)};
            EXPECT_TRUE(gradcheck_ok(run_binary, in1, user, false));
            EXPECT_TRUE(gradcheck_ok(run_binary, in1, user, true));
            // [3, 1] with a transposed [3, 4]: both broadcast and non-contiguous.
            std::vector<tg_tensor *> in2 = {in64(TG_SHAPE(3, 1), seed++, c.a_lo, c.a_hi),
                                            transposed64(3, 4, seed++, c.b_lo, c.b_hi)};
            EXPECT_TRUE(gradcheck_ok(run_binary, in2, user, false));
            EXPECT_TRUE(gradcheck_ok(run_binary, in2, user, true));
            // A sliced [3, 4] with [2, 1, 4]: the result is [2, 3, 4].
            std::vector<tg_tensor *> in3 = {sliced64(3, 4, seed++, c.a_lo, c.a_hi),
                                            in64(TG_SHAPE(2, 1, 4), seed++, c.b_lo, c.b_hi)};
            EXPECT_TRUE(gradcheck_ok(run_binary, in3, user, false));
            EXPECT_TRUE(gradcheck_ok(run_binary, in3, user, true));
        }
    }
}

TEST_F(TgTest, WhereGradcheck) {
    tg_tensor *cond = tg_gt(in64(TG_SHAPE(3, 4), 7, -1, 1, false), tg_zeros(TG_SHAPE(1), tg_opts{TG_FLOAT64}));
    std::vector<double> c = values(cond);
    ASSERT_TRUE(std::count(c.begin(), c.end(), 1.0) > 0 && std::count(c.begin(), c.end(), 0.0) > 0);
    std::vector<tg_tensor *> in1 = {in64(TG_SHAPE(3, 4), 1), in64(TG_SHAPE(4), 2)};
    EXPECT_TRUE(gradcheck_ok(run_where, in1, cond, false));
    EXPECT_TRUE(gradcheck_ok(run_where, in1, cond, true));
    std::vector<tg_tensor *> in2 = {transposed64(3, 4, 3), in64(TG_SHAPE(2, 3, 1), 4)};
    EXPECT_TRUE(gradcheck_ok(run_where, in2, cond, false));
    EXPECT_TRUE(gradcheck_ok(run_where, in2, cond, true));
    tg_tensor *row = tensor_f64({1, 0, 1, 1}, TG_SHAPE(4));
    tg_tensor *cond_row = tg_ne(row, tg_zeros(TG_SHAPE(4), tg_opts{TG_FLOAT64})); // [4] broadcast to [3, 4]
    std::vector<tg_tensor *> in3 = {in64(TG_SHAPE(3, 1), 5), sliced64(3, 4, 6)};
    EXPECT_TRUE(gradcheck_ok(run_where, in3, cond_row, false));
    EXPECT_TRUE(gradcheck_ok(run_where, in3, cond_row, true));
}

TEST_F(TgTest, CastGradcheckThroughFloat32) {
    // Through float32 the function is only float32-accurate, so a larger step: the
    // function is bilinear, central differences are exact up to rounding.
    std::vector<tg_tensor *> in1 = {in64(TG_SHAPE(3, 4), 1), in64(TG_SHAPE(4), 2)};
    EXPECT_TRUE(gradcheck_ok(run_cast_roundtrip, in1, nullptr, false, 1e-2, 1e-4));
    EXPECT_TRUE(gradcheck_ok(run_cast_roundtrip, in1, nullptr, true, 1e-2, 1e-4));
    std::vector<tg_tensor *> in2 = {transposed64(3, 4, 3), in64(TG_SHAPE(3, 1), 4)};
    EXPECT_TRUE(gradcheck_ok(run_cast_roundtrip, in2, nullptr, false, 1e-2, 1e-4));
    EXPECT_TRUE(gradcheck_ok(run_cast_roundtrip, in2, nullptr, true, 1e-2, 1e-4));
}

TEST_F(TgTest, SumToGradcheck) {
    EXPECT_GRADCHECK(run_sum_to_31, in64(TG_SHAPE(2, 3, 4), 1));
    EXPECT_GRADGRADCHECK(run_sum_to_31, in64(TG_SHAPE(2, 3, 4), 2));
    EXPECT_GRADCHECK(run_sum_to_31, transposed64(3, 4, 3));
    EXPECT_GRADCHECK(run_sum_to_14_of_square, transposed64(3, 4, 4));
    EXPECT_GRADGRADCHECK(run_sum_to_14_of_square, sliced64(3, 4, 5));
}

// ======================= integers, bools, casts =======================

TEST_F(TgTest, IntegerComparisonsWithBroadcast) {
    tg_tensor *a = tensor_i64({1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3));
    tg_tensor *b = tensor_i64({2, 2, 7}, TG_SHAPE(3));
    EXPECT_TRUE(tensor_near(tg_eq(a, b), {0, 1, 0, 0, 0, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_ne(a, b), {1, 0, 1, 1, 1, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_lt(a, b), {1, 0, 1, 0, 0, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_le(a, b), {1, 1, 1, 0, 0, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_gt(a, b), {0, 0, 0, 1, 1, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_ge(a, b), {0, 1, 0, 1, 1, 0}, 0));
    EXPECT_EQ(tg_dtype_of(tg_lt(a, b)), TG_BOOL);
    EXPECT_EQ(dims(tg_ge(b, a)), (std::vector<int64_t>{2, 3}));
    // b on the left, a transposed view on the right ([3, 2] vs [3, 1]).
    tg_tensor *col = tensor_i64({2, 3, 7}, TG_SHAPE(3, 1));
    EXPECT_TRUE(tensor_near(tg_lt(col, tg_transpose(a, 0, 1)), {0, 1, 0, 1, 0, 0}, 0));
    // int64 values beyond float64's 53 bits compare exactly.
    int64_t big = (int64_t{1} << 53) + 1;
    tg_tensor *x = tensor_i64({big, big, -big}, TG_SHAPE(3));
    tg_tensor *y = tensor_i64({big - 1, big, -big + 1}, TG_SHAPE(3));
    EXPECT_TRUE(tensor_near(tg_eq(x, y), {0, 1, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_gt(x, y), {1, 0, 0}, 0));
    // int32 with int64.
    int32_t i32[] = {-1, 0, 5};
    tg_tensor *s = tg_from_data(i32, TG_SHAPE(3), tg_opts{TG_INT32});
    EXPECT_TRUE(tensor_near(tg_le(s, tensor_i64({-1, -1, 6}, TG_SHAPE(3))), {1, 0, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_ne(s, s), {0, 0, 0}, 0));
}

TEST_F(TgTest, BoolAndMixedComparisons) {
    bool bv[] = {false, false, true, true}, cv[] = {false, true, false, true};
    tg_tensor *p = tg_from_data(bv, TG_SHAPE(4), tg_opts{TG_BOOL});
    tg_tensor *q = tg_from_data(cv, TG_SHAPE(4), tg_opts{TG_BOOL});
    EXPECT_TRUE(tensor_near(tg_eq(p, q), {1, 0, 0, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_ne(p, q), {0, 1, 1, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_lt(p, q), {0, 1, 0, 0}, 0)); // false < true
    EXPECT_TRUE(tensor_near(tg_ge(p, q), {1, 0, 1, 1}, 0));
    EXPECT_EQ(tg_dtype_of(tg_eq(p, q)), TG_BOOL);
    // int64 against float32 compares in float32 (promotion), not after truncation.
    tg_tensor *i = tensor_i64({1, 2, 3}, TG_SHAPE(3));
    tg_tensor *f = tensor_f32({1.5f, 2, 2.5f}, TG_SHAPE(3));
    EXPECT_TRUE(tensor_near(tg_lt(i, f), {1, 0, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_eq(i, f), {0, 1, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_gt(i, f), {0, 0, 1}, 0));
    // bool against int64: true == 1.
    EXPECT_TRUE(tensor_near(tg_eq(p, tensor_i64({0, 1, 1, 2}, TG_SHAPE(4))), {1, 0, 1, 0}, 0));
    // NaN: unequal to everything, itself included.
    tg_tensor *n = tensor_f64({NAN, NAN, 1}, TG_SHAPE(3));
    tg_tensor *m = tensor_f64({NAN, 1, 1}, TG_SHAPE(3));
    EXPECT_TRUE(tensor_near(tg_eq(n, m), {0, 0, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_ne(n, m), {1, 1, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_le(n, m), {0, 0, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_gt(n, m), {0, 0, 0}, 0));
}

TEST_F(TgTest, IntegerArithmeticKeepsIntegerDtypes) {
    tg_tensor *a = tensor_i64({7, -3, 0, 12}, TG_SHAPE(2, 2));
    tg_tensor *b = tensor_i64({2, 5}, TG_SHAPE(2));
    tg_tensor *s = tg_add(a, b);
    EXPECT_EQ(tg_dtype_of(s), TG_INT64);
    EXPECT_TRUE(tensor_near(s, {9, 2, 2, 17}, 0));
    EXPECT_TRUE(tensor_near(tg_sub(a, b), {5, -8, -2, 7}, 0));
    EXPECT_TRUE(tensor_near(tg_mul(a, b), {14, -15, 0, 60}, 0));
    EXPECT_TRUE(tensor_near(tg_maximum(a, b), {7, 5, 2, 12}, 0));
    EXPECT_TRUE(tensor_near(tg_minimum(a, b), {2, -3, 0, 5}, 0));
    EXPECT_TRUE(tensor_near(tg_pow(a, tensor_i64({2, 3}, TG_SHAPE(2))), {49, -27, 0, 1728}, 0));
    EXPECT_EQ(tg_dtype_of(tg_pow(a, b)), TG_INT64);
    // Exact beyond 2^53.
    int64_t big = (int64_t{1} << 53) + 1;
    int64_t got = 0;
    tg_copy_to_host(tg_add(tensor_i64({big}, TG_SHAPE(1)), tensor_i64({2}, TG_SHAPE(1))), &got, sizeof got);
    EXPECT_EQ(got, big + 2);
    // int32 with int64 promotes to int64; integers with a float tensor to the float.
    int32_t i32[] = {1, -2};
    tg_tensor *c = tg_from_data(i32, TG_SHAPE(2), tg_opts{TG_INT32});
    EXPECT_EQ(tg_dtype_of(tg_mul(c, b)), TG_INT64);
    EXPECT_EQ(tg_dtype_of(tg_add(c, c)), TG_INT32);
    tg_tensor *cf = tg_add(c, tensor_f32({0.5f, 0.25f}, TG_SHAPE(2)));
    EXPECT_EQ(tg_dtype_of(cf), TG_FLOAT32);
    EXPECT_TRUE(tensor_near(cf, {1.5, -1.75}, 0));
    EXPECT_EQ(tg_dtype_of(tg_sub(a, tensor_f64({1, 1}, TG_SHAPE(2)))), TG_FLOAT64);
    // Unary ops defined for integers.
    EXPECT_TRUE(tensor_near(tg_neg(a), {-7, 3, 0, -12}, 0));
    EXPECT_TRUE(tensor_near(tg_abs(a), {7, 3, 0, 12}, 0));
    EXPECT_TRUE(tensor_near(tg_sign(a), {1, -1, 0, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_relu(a), {7, 0, 0, 12}, 0));
    EXPECT_TRUE(tensor_near(tg_square(a), {49, 9, 0, 144}, 0));
    EXPECT_TRUE(tensor_near(tg_clamp(a, -1, 10), {7, -1, 0, 10}, 0));
    EXPECT_TRUE(tensor_near(tg_pow_scalar(a, 2), {49, 9, 0, 144}, 0));
    EXPECT_TRUE(tensor_near(tg_add_scalar(a, 3), {10, 0, 3, 15}, 0));
    EXPECT_TRUE(tensor_near(tg_mul_scalar(a, -2), {-14, 6, 0, -24}, 0));
    EXPECT_TRUE(tensor_near(tg_rsub_scalar(a, 1), {-6, 4, 1, -11}, 0));
    EXPECT_EQ(tg_dtype_of(tg_abs(c)), TG_INT32);
    EXPECT_TRUE(tensor_near(tg_abs(c), {1, 2}, 0));
    for (tg_tensor *t : {tg_neg(a), tg_abs(a), tg_sign(a), tg_relu(a), tg_clamp(a, -1, 10), tg_add_scalar(a, 3)})
        EXPECT_EQ(tg_dtype_of(t), TG_INT64);
    // where keeps integer dtypes.
    bool cv[] = {true, false};
    tg_tensor *w = tg_where(tg_from_data(cv, TG_SHAPE(2), tg_opts{TG_BOOL}), a, b);
    EXPECT_EQ(tg_dtype_of(w), TG_INT64);
    EXPECT_TRUE(tensor_near(w, {7, 5, 0, 5}, 0));
}

TEST_F(TgTest, CastsBetweenDtypes) {
    tg_tensor *f = tensor_f32({-1.7f, 2.9f, -0.5f, 3, -0.0f, 0.5f}, TG_SHAPE(2, 3));
    tg_tensor *i = tg_cast(f, TG_INT64); // truncation toward zero
    EXPECT_EQ(tg_dtype_of(i), TG_INT64);
    EXPECT_EQ(dims(i), (std::vector<int64_t>{2, 3}));
    EXPECT_TRUE(tensor_near(i, {-1, 2, 0, 3, 0, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_cast(f, TG_INT32), {-1, 2, 0, 3, 0, 0}, 0));
    tg_tensor *b = tg_cast(f, TG_BOOL); // nonzero -> true; -0.0 is zero
    EXPECT_EQ(tg_dtype_of(b), TG_BOOL);
    EXPECT_TRUE(tensor_near(b, {1, 1, 1, 1, 0, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_cast(tensor_f64({NAN, 0}, TG_SHAPE(2)), TG_BOOL), {1, 0}, 0)); // NaN is true
    EXPECT_TRUE(tensor_near(tg_cast(tensor_i64({0, -3, 5}, TG_SHAPE(3)), TG_BOOL), {0, 1, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_cast(b, TG_FLOAT32), {1, 1, 1, 1, 0, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_cast(b, TG_INT64), {1, 1, 1, 1, 0, 1}, 0));
    // int64 -> int32 -> int64 round trip of negatives; int64 -> float32 rounds.
    tg_tensor *neg = tg_cast(tg_cast(tensor_i64({-5, 100000, -2147483648LL}, TG_SHAPE(3)), TG_INT32), TG_INT64);
    EXPECT_TRUE(tensor_near(neg, {-5, 100000, -2147483648.0}, 0));
    EXPECT_TRUE(tensor_near(tg_cast(tensor_i64({16777217}, TG_SHAPE(1)), TG_FLOAT32), {16777216}, 0));
    // float64 -> float32 rounds to nearest.
    float third = 1.0f / 3.0f;
    EXPECT_TRUE(tensor_near(tg_cast(tensor_f64({1.0 / 3}, TG_SHAPE(1)), TG_FLOAT32), {(double)third}, 0));
    // A non-contiguous input gives the elements in logical order.
    EXPECT_TRUE(tensor_near(tg_cast(tg_transpose(f, 0, 1), TG_INT64), {-1, 3, 2, 0, 0, 0}, 0));
    // Casting to the same dtype gives the same tensor (torch .to(dtype) returns self).
    tg_tensor *same = tg_cast(f, TG_FLOAT32);
    EXPECT_EQ(same, f);
}

TEST_F(TgTest, CastGradientsAndRequiresGrad) {
    tg_tensor *x = tensor_f32({1, -2, 3}, TG_SHAPE(3), true);
    tg_tensor *y = tg_cast(x, TG_FLOAT64);
    EXPECT_TRUE(tg_requires_grad(y));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, tensor_f64({0.5, 2, -1}, TG_SHAPE(3))))), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(tg_grad(x)), TG_FLOAT32);
    EXPECT_TRUE(tensor_near(tg_grad(x), {0.5, 2, -1}, 0));
    // Casting to an integer or bool cuts the graph (integers cannot require grad).
    EXPECT_FALSE(tg_requires_grad(tg_cast(x, TG_INT64)));
    EXPECT_FALSE(tg_requires_grad(tg_cast(x, TG_BOOL)));
}

TEST_F(TgTest, IsfiniteAndAllFinite) {
    tg_tensor *x = tensor_f32({1, NAN, INFINITY, -INFINITY, 0, -FLT_MAX}, TG_SHAPE(2, 3));
    tg_tensor *m = tg_isfinite(x);
    EXPECT_EQ(tg_dtype_of(m), TG_BOOL);
    EXPECT_EQ(dims(m), (std::vector<int64_t>{2, 3}));
    EXPECT_TRUE(tensor_near(m, {1, 0, 0, 0, 1, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_isfinite(tg_transpose(x, 0, 1)), {1, 0, 0, 1, 0, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_isfinite(tensor_f64({1e308, INFINITY}, TG_SHAPE(2))), {1, 0}, 0));
    tg_tensor *ints = tg_isfinite(tensor_i64({1, -5, 0}, TG_SHAPE(3)));
    EXPECT_EQ(tg_dtype_of(ints), TG_BOOL);
    EXPECT_TRUE(tensor_near(ints, {1, 1, 1}, 0));
    EXPECT_FALSE(tg_all_finite(x));
    EXPECT_FALSE(tg_all_finite(tensor_f64({1, 2, NAN}, TG_SHAPE(3))));
    EXPECT_TRUE(tg_all_finite(tensor_f32({1, 2, -FLT_MAX}, TG_SHAPE(3))));
    EXPECT_TRUE(tg_all_finite(tensor_i64({1, 2}, TG_SHAPE(2))));
    EXPECT_FALSE(tg_all_finite(tg_narrow(x, 1, 0, 1)));                     // [1, -inf]
    EXPECT_FALSE(tg_all_finite(tg_narrow(tg_transpose(x, 0, 1), 0, 0, 1))); // [1, -inf]
    tg_tensor *finite_cols = tg_narrow(tensor_f32({1, NAN, 2, 3, INFINITY, 4}, TG_SHAPE(2, 3)), 1, 2, 1);
    EXPECT_TRUE(tg_all_finite(finite_cols));
    // isfinite of a tensor that requires grad is not differentiable.
    EXPECT_FALSE(tg_requires_grad(tg_isfinite(tensor_f64({1}, TG_SHAPE(1), true))));
    tg_clear_error();
    EXPECT_FALSE(tg_all_finite(nullptr));
    EXPECT_ERROR_CONTAINS("tg_all_finite: input 0 is NULL");
}

TEST_F(TgTest, LargeStridedAndBroadcastInputsTakeTheParallelPath) {
    // Big enough for the thread pool; transposed and broadcast operands; checked element by element.
    const int64_t n = 300, m = 257;
    tg_tensor *base = tg_arange(0, (double)(n * m), 1, tg_opts{TG_FLOAT64});
    tg_tensor *a = tg_transpose(tg_reshape(base, TG_SHAPE(m, n)), 0, 1);                // [n, m], a[i][j] = j * n + i
    tg_tensor *b = tg_mul_scalar(tg_arange(0, (double)n, 1, tg_opts{TG_FLOAT64}), 0.5); // [n]
    tg_tensor *sum = tg_sub(a, tg_reshape(b, TG_SHAPE(n, 1)));
    std::vector<double> want((size_t)(n * m));
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) want[(size_t)(i * m + j)] = (double)(j * n + i) - 0.5 * (double)i;
    EXPECT_TRUE(tensor_near(sum, want, 0));
    tg_tensor *g = tg_gelu(tg_mul_scalar(a, 1e-4));
    std::vector<double> want_g(want.size());
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            double x = 1e-4 * (double)(j * n + i);
            want_g[(size_t)(i * m + j)] = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
        }
    EXPECT_TRUE(tensor_near(g, want_g, 1e-12, 1e-12));
    tg_tensor *gt = tg_gt(a, tg_reshape(tg_mul_scalar(b, 400), TG_SHAPE(n, 1))); // j * n + i > 200 i
    std::vector<double> got_gt = values(gt);
    size_t mismatches = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) mismatches += got_gt[(size_t)(i * m + j)] != (double)((j * n + i) > 200 * i);
    EXPECT_EQ(mismatches, 0u);
}

// ======================= in place =======================

TEST_F(TgTest, InPlaceOpsValuesAndVersions) {
    tg_tensor *a = tensor_f32({1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3));
    uint64_t v0 = tg_version(a);
    ASSERT_EQ(tg_add_(a, tensor_f32({10, 20, 30}, TG_SHAPE(3))), TG_OK) << tg_last_error(); // broadcast b
    EXPECT_TRUE(tensor_near(a, {11, 22, 33, 14, 25, 36}, 0));
    EXPECT_EQ(tg_version(a), v0 + 1);
    ASSERT_EQ(tg_mul_(a, tensor_f32({2, -1}, TG_SHAPE(2, 1))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(a, {22, 44, 66, -14, -25, -36}, 0));
    EXPECT_EQ(tg_version(a), v0 + 2);
    ASSERT_EQ(tg_mul_scalar_(a, 0.5), TG_OK);
    EXPECT_TRUE(tensor_near(a, {11, 22, 33, -7, -12.5, -18}, 0));
    EXPECT_EQ(tg_version(a), v0 + 3);
    ASSERT_EQ(tg_add_scaled_(a, tensor_f32({2, 4, 6, 8, 10, 12}, TG_SHAPE(2, 3)), -0.5), TG_OK);
    EXPECT_TRUE(tensor_near(a, {10, 20, 30, -11, -17.5, -24}, 0));
    EXPECT_EQ(tg_version(a), v0 + 4);
    EXPECT_EQ(tg_dtype_of(a), TG_FLOAT32);
    // A float64 operand is cast to the target's float32.
    ASSERT_EQ(tg_add_(a, tensor_f64({0.25, 0.25, 0.25, 0.25, 0.25, 0.25}, TG_SHAPE(2, 3))), TG_OK);
    EXPECT_EQ(tg_dtype_of(a), TG_FLOAT32);
    EXPECT_TRUE(tensor_near(a, {10.25, 20.25, 30.25, -10.75, -17.25, -23.75}, 0));
    // Integers.
    tg_tensor *i = tensor_i64({1, -2, 3}, TG_SHAPE(3));
    ASSERT_EQ(tg_add_(i, tensor_i64({5, 5, 5}, TG_SHAPE(3))), TG_OK);
    ASSERT_EQ(tg_mul_scalar_(i, 3), TG_OK);
    EXPECT_TRUE(tensor_near(i, {18, 9, 24}, 0));
    EXPECT_EQ(tg_dtype_of(i), TG_INT64);
}

TEST_F(TgTest, InPlaceThroughAViewWritesTheBaseAndBumpsItsVersion) {
    tg_tensor *base = tensor_f64({1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3));
    tg_tensor *t = tg_transpose(base, 0, 1); // [3, 2], non-contiguous
    uint64_t v0 = tg_version(base);
    ASSERT_EQ(tg_add_(t, tensor_f64({100, 200}, TG_SHAPE(2))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(base, {101, 102, 103, 204, 205, 206}, 0));
    EXPECT_EQ(tg_version(base), v0 + 1);
    EXPECT_EQ(tg_version(t), v0 + 1);
    tg_tensor *col = tg_narrow(base, 1, 1, 1); // [2, 1]: the middle column
    ASSERT_EQ(tg_mul_scalar_(col, -1), TG_OK);
    ASSERT_EQ(tg_add_scaled_(col, tensor_f64({1}, TG_SHAPE(1)), 2), TG_OK);
    EXPECT_TRUE(tensor_near(base, {101, -100, 103, 204, -203, 206}, 0));
    EXPECT_EQ(tg_version(base), v0 + 3);
}

TEST_F(TgTest, InPlaceOnALeafThatRequiresGradIsRefusedAsInPyTorch) {
    tg_tensor *x = tensor_f32({1, 2, 3}, TG_SHAPE(3), true);
    tg_tensor *b = tensor_f32({1, 1, 1}, TG_SHAPE(3));
    uint64_t v0 = tg_version(x);
    tg_clear_error();
    EXPECT_EQ(tg_add_(x, b), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_add_: a leaf Variable that requires grad is being used in an in-place operation");
    tg_clear_error();
    EXPECT_EQ(tg_mul_(x, b), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_mul_: a leaf Variable that requires grad");
    tg_clear_error();
    EXPECT_EQ(tg_mul_scalar_(x, 2), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_mul_scalar_: a leaf Variable that requires grad");
    tg_clear_error();
    EXPECT_EQ(tg_add_scaled_(x, b, 2), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_add_scaled_: a leaf Variable that requires grad");
    EXPECT_TRUE(tensor_near(x, {1, 2, 3}, 0));
    EXPECT_EQ(tg_version(x), v0);
    // Under no-grad (an optimizer step) they work.
    TG_NO_GRAD {
        EXPECT_EQ(tg_add_(x, b), TG_OK);
        EXPECT_EQ(tg_mul_(x, tensor_f32({2, 2, 2}, TG_SHAPE(3))), TG_OK);
        EXPECT_EQ(tg_mul_scalar_(x, 0.5), TG_OK);
        EXPECT_EQ(tg_add_scaled_(x, b, -1), TG_OK);
    }
    EXPECT_TRUE(tensor_near(x, {1, 2, 3}, 0));
    EXPECT_EQ(tg_version(x), v0 + 4);
    EXPECT_TRUE(tg_requires_grad(x));
    EXPECT_TRUE(tg_is_leaf(x));
}

TEST_F(TgTest, BackwardAfterAnInPlaceChangeOfASavedTensorFails) {
    tg_tensor *x = tensor_f64({1, 2}, TG_SHAPE(2), true);
    tg_tensor *w = tensor_f64({3, 4}, TG_SHAPE(2));
    tg_tensor *y = tg_sum(tg_div(x, w));                                            // div saves w
    ASSERT_EQ(tg_add_(tg_narrow(w, 0, 1, 1), tensor_f64({1}, TG_SHAPE(1))), TG_OK); // through a view
    EXPECT_EQ(tg_backward(y), TG_ERROR);
    EXPECT_ERROR_CONTAINS("modified by an in-place operation");
    // exp saves its output: changing the output in place is caught too.
    tg_tensor *e = tg_exp(x);
    tg_tensor *z = tg_sum(e);
    TG_NO_GRAD { ASSERT_EQ(tg_mul_scalar_(e, 2), TG_OK); }
    tg_clear_error();
    EXPECT_EQ(tg_backward(z), TG_ERROR);
    EXPECT_ERROR_CONTAINS("modified by an in-place operation");
}

TEST_F(TgTest, InPlaceErrors) {
    tg_tensor *a = tensor_f32({1, 2, 3}, TG_SHAPE(3));
    uint64_t v0 = tg_version(a);
    tg_clear_error();
    EXPECT_EQ(tg_add_(a, tg_ones(TG_SHAPE(2, 3), tg_opts{})), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_add_: shape [2, 3] cannot be broadcast to the in-place target's shape [3]");
    tg_clear_error();
    EXPECT_EQ(tg_mul_(a, tg_ones(TG_SHAPE(4), tg_opts{})), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_mul_: shapes [3] and [4] cannot be broadcast together");
    tg_clear_error();
    EXPECT_EQ(tg_add_scaled_(a, tg_ones(TG_SHAPE(2), tg_opts{}), 1), TG_ERROR);
    EXPECT_ERROR_CONTAINS("shapes [3] and [2] cannot be broadcast together");
    EXPECT_TRUE(tensor_near(a, {1, 2, 3}, 0));
    EXPECT_EQ(tg_version(a), v0);
    tg_clear_error();
    EXPECT_EQ(tg_add_(nullptr, a), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_add_: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_mul_(a, nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_mul_: input 1 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_mul_scalar_(nullptr, 2), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_mul_scalar_: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_add_scaled_(a, nullptr, 2), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_add_scaled_: input 1 is NULL");
}

// ======================= errors =======================

TEST_F(TgTest, IncompatibleBroadcastsNameTheOpAndShapes) {
    const std::pair<const char *, BinaryFn> ops[] = {
        {"add", tg_add},         {"sub", tg_sub}, {"mul", tg_mul}, {"div", tg_div}, {"maximum", tg_maximum},
        {"minimum", tg_minimum}, {"pow", tg_pow}, {"eq", tg_eq},   {"ne", tg_ne},   {"lt", tg_lt},
        {"le", tg_le},           {"gt", tg_gt},   {"ge", tg_ge}};
    tg_tensor *a = tg_ones(TG_SHAPE(2, 3), tg_opts{});
    tg_tensor *b = tg_ones(TG_SHAPE(4), tg_opts{});
    tg_tensor *c = tg_ones(TG_SHAPE(5, 1, 2), tg_opts{TG_FLOAT64});
    for (const auto &op : ops) {
        SCOPED_TRACE(op.first);
        tg_clear_error();
        EXPECT_EQ(op.second(a, b), nullptr);
        EXPECT_ERROR_CONTAINS(std::string(op.first) + ": shapes [2, 3] and [4] cannot be broadcast together");
        tg_clear_error();
        EXPECT_EQ(op.second(c, a), nullptr);
        EXPECT_ERROR_CONTAINS(std::string(op.first) + ": shapes [5, 1, 2] and [2, 3] cannot be broadcast together");
        tg_clear_error();
        EXPECT_EQ(op.second(a, nullptr), nullptr);
        EXPECT_ERROR_CONTAINS(std::string(op.first) + ": input 1 is NULL");
    }
    bool cv[] = {true, false, true, false, true, false};
    tg_tensor *cond = tg_from_data(cv, TG_SHAPE(2, 3), tg_opts{TG_BOOL});
    tg_clear_error();
    EXPECT_EQ(tg_where(cond, tg_ones(TG_SHAPE(3), tg_opts{}), tg_ones(TG_SHAPE(2), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("where: shapes [2, 3] (condition), [3] and [2] cannot be broadcast together");
    tg_clear_error();
    EXPECT_EQ(tg_where(tg_from_data(cv, TG_SHAPE(6), tg_opts{TG_BOOL}), a, a), nullptr);
    EXPECT_ERROR_CONTAINS("where: shapes [6] (condition), [2, 3] and [2, 3] cannot be broadcast together");
    tg_clear_error();
    EXPECT_EQ(tg_where(a, a, a), nullptr);
    EXPECT_ERROR_CONTAINS("where: condition must be bool, got float32");
    // A failed op in a chain keeps the first message.
    tg_clear_error();
    EXPECT_EQ(tg_exp(tg_mul(tg_add(a, b), a)), nullptr);
    EXPECT_ERROR_CONTAINS("add: shapes [2, 3] and [4] cannot be broadcast together");
}

TEST_F(TgTest, UnaryErrors) {
    tg_tensor *ints = tensor_i64({1, 2}, TG_SHAPE(2));
    const std::pair<const char *, UnaryFn> float_only[] = {
        {"exp", tg_exp},     {"log", tg_log},   {"sqrt", tg_sqrt},
        {"rsqrt", tg_rsqrt}, {"erf", tg_erf},   {"reciprocal", tg_reciprocal},
        {"sin", tg_sin},     {"cos", tg_cos},   {"sigmoid", tg_sigmoid},
        {"tanh", tg_tanh},   {"gelu", tg_gelu}, {"gelu_tanh", tg_gelu_tanh},
        {"silu", tg_silu}};
    for (const auto &op : float_only) {
        SCOPED_TRACE(op.first);
        tg_clear_error();
        EXPECT_EQ(op.second(ints), nullptr);
        EXPECT_ERROR_CONTAINS(std::string(op.first) + ": expected a floating-point tensor, got int64");
        tg_clear_error();
        EXPECT_EQ(op.second(nullptr), nullptr);
        EXPECT_ERROR_CONTAINS(std::string(op.first) + ": input 0 is NULL");
    }
    tg_clear_error();
    EXPECT_EQ(tg_leaky_relu(ints, 0.1), nullptr);
    EXPECT_ERROR_CONTAINS("leaky_relu: expected a floating-point tensor, got int64");
    tg_clear_error();
    EXPECT_EQ(tg_softplus(tensor_f32({1}, TG_SHAPE(1)), 0, 20), nullptr);
    EXPECT_ERROR_CONTAINS("tg_softplus: beta must be non-zero");
    tg_clear_error();
    EXPECT_EQ(tg_clamp(tensor_f32({1}, TG_SHAPE(1)), NAN, NAN), nullptr);
    EXPECT_ERROR_CONTAINS("tg_clamp: at least one of min and max must be given");
    tg_clear_error();
    EXPECT_EQ(tg_cast(tensor_f32({1}, TG_SHAPE(1)), (tg_dtype)TG_NUM_DTYPES), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cast: dtype 8 is not a tg_dtype");
    tg_clear_error();
    EXPECT_EQ(tg_isfinite(nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_isfinite: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_cast(nullptr, TG_FLOAT64), nullptr);
    EXPECT_ERROR_CONTAINS("input 0 is NULL");
}
