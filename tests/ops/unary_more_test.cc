// expm1, log1p, floor, ceil, round, trunc, logsigmoid, elu, selu, mish, hardswish,
// hardsigmoid, softsign (one row each in ops/unary_formulas.h) and softmin: PyTorch 1.13's
// values and gradients (tests/fixtures/gen_unary_more.py), including the kinks at
// -3, 0 and 3 and round's halves; gradcheck twice; errors.
#include <string>
#include <utility>
#include <vector>

#include "tests/test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/unary_more.txt");
    return f;
}

using UnaryFn = tg_tensor *(*)(tg_tensor *);

const std::vector<std::pair<std::string, UnaryFn>> &cases() {
    static const std::vector<std::pair<std::string, UnaryFn>> c = {
        {"expm1", tg_expm1},
        {"log1p", tg_log1p},
        {"floor", tg_floor},
        {"ceil", tg_ceil},
        {"round", tg_round},
        {"trunc", tg_trunc},
        {"logsigmoid", tg_logsigmoid},
        {"elu", [](tg_tensor *x) { return tg_elu(x, 0.7); }},
        {"selu", tg_selu},
        {"mish", tg_mish},
        {"hardswish", tg_hardswish},
        {"hardsigmoid", tg_hardsigmoid},
        {"softmin",
         [](tg_tensor *x) { return tg_reshape(tg_softmin(tg_reshape(x, TG_SHAPE(4, 8)), 1), TG_SHAPE(32)); }},
        {"softsign", tg_softsign}, /* added as docs/design.md shows: a row and a declaration */
    };
    return c;
}

TEST_F(TgTest, MoreUnaryOpsMatchPyTorch) {
    for (const auto &[name, fn] : cases()) {
        SCOPED_TRACE(name);
        const FixtureTensor &src = fixture_tensor(fx(), name == "log1p" ? "xpos" : "x");
        tg_tensor *x = src.make(TG_FLOAT64, true);
        tg_tensor *y = fn(x);
        ASSERT_NE(y, nullptr) << tg_last_error();
        EXPECT_TRUE(tensor_near(y, fixture_tensor(fx(), name + "_y").data, 1e-15, 1e-14));
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, fixture_tensor(fx(), "w").make(TG_FLOAT64)))), TG_OK) << tg_last_error();
        EXPECT_TRUE(tensor_near(tg_grad(x), fixture_tensor(fx(), name + "_grad").data, 1e-13, 1e-12));
        // float32: libm's float functions against PyTorch's kernels, within an ulp or two
        EXPECT_TRUE(tensor_near(fn(src.make(TG_FLOAT32)), fixture_tensor(fx(), name + "_y32").data, 1e-7, 3e-7));
    }
}

TEST_F(TgTest, MoreUnaryOpsAreDifferentiableTwice) {
    tg_gradcheck_opts o = {};
    // Away from the kinks, where finite differences are meaningful.
    tg_tensor *x = tensor_f64({-2.2, -0.7, 0.4, 1.3, 2.6, -4.1, 5.0}, TG_SHAPE(7), true);
    tg_gradcheck_fn fns[] = {
        [](tg_tensor *const *in, void *) { return tg_expm1(in[0]); },
        [](tg_tensor *const *in, void *) { return tg_log1p(tg_exp(in[0])); },
        [](tg_tensor *const *in, void *) { return tg_logsigmoid(in[0]); },
        [](tg_tensor *const *in, void *) { return tg_elu(in[0], 0.7); },
        [](tg_tensor *const *in, void *) { return tg_selu(in[0]); },
        [](tg_tensor *const *in, void *) { return tg_mish(in[0]); },
        [](tg_tensor *const *in, void *) { return tg_hardswish(in[0]); },
        [](tg_tensor *const *in, void *) { return tg_mul(tg_hardsigmoid(in[0]), in[0]); },
        [](tg_tensor *const *in, void *) { return tg_softmin(in[0], 0); },
        [](tg_tensor *const *in, void *) { return tg_softsign(in[0]); },
    };
    for (tg_gradcheck_fn fn : fns) {
        EXPECT_EQ(tg_gradcheck(fn, 1, &x, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(fn, 1, &x, &o), TG_OK) << tg_last_error();
    }
}

TEST_F(TgTest, MoreUnaryOpsRefuseIntegers) {
    tg_tensor *i = tensor_i64({1, 2}, TG_SHAPE(2));
    for (const auto &[name, fn] : cases()) {
        if (name == "softmin") continue;
        tg_clear_error();
        EXPECT_EQ(fn(i), nullptr) << name;
        EXPECT_ERROR_CONTAINS(name + ": expected a floating-point tensor, got int64");
    }
}

} // namespace
