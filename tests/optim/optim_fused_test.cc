// One step updates all of an optimizer's CPU parameters in one parallel loop over blocks
// of elements (optim/kernels.h): every element exactly once with its own gradient, the
// same bits as one optimizer per parameter on any thread count, float32 and float64
// parameters side by side; a bad gradient anywhere leaves every parameter as it was; and
// Adam's division by its bias correction, done by a reciprocal and an FMA correction
// (optim/kernels.c, div_fixed), gives the bits of the division; and Adam's float32 blocks
// near the subnormals, computed in double, give the plain vector loop's bits.
#include <cmath>
#include <cstring>
#include <random>

#include "optim/kernels.h"
#include "test_util.h"

namespace {

class OptimFusedTest : public TgTest {
  protected:
    void TearDown() override {
        tg_set_num_threads(threads_);
        TgTest::TearDown();
    }
    int threads_ = tg_get_num_threads();
};

// Sizes around the 16384-element blocks, and tiny ones among them.
const int64_t kSizes[] = {100000, 7, 16385, 40000, 1, 16384};

std::vector<unsigned char> bytes_of(tg_tensor *t) {
    tg_tensor *c = tg_contiguous(t);
    const unsigned char *p = (const unsigned char *)tg_data_ptr(c);
    return std::vector<unsigned char>(p, p + tg_numel(c) * (tg_dtype_of(c) == TG_FLOAT64 ? 8 : 4));
}

// Integer gradients and SGD with lr 0.5: p - 0.5 g is exact, so every element's expected
// value is known whatever the kernel's instruction choice.
TEST_F(OptimFusedTest, EveryElementOnceWithItsOwnGradient) {
    for (int threads : {1, 2, 3}) {
        tg_set_num_threads(threads);
        std::vector<tg_tensor *> params;
        for (int64_t n : kSizes) {
            tg_tensor *p = tg_requires_grad_(tg_arange(0, (double)n, 1, (tg_opts){TG_FLOAT32}), true);
            tg_set_grad(p, tg_remainder_scalar(tg_arange(0, (double)n, 1, (tg_opts){TG_FLOAT32}), 13.0));
            params.push_back(p);
        }
        tg_optim *opt = tg_sgd_params(params.data(), (int)params.size(), tg_sgd_opts{.lr = 0.5});
        ASSERT_EQ(tg_optim_step(opt), TG_OK);
        for (size_t i = 0; i < params.size(); i++) {
            std::vector<double> got = values(params[i]);
            for (int64_t j = 0; j < kSizes[i]; j++)
                ASSERT_EQ(got[j], (double)j - 0.5 * (double)(j % 13)) << "parameter " << i << " element " << j;
        }
        tg_optim_free(opt);
    }
}

enum Rule { SGD_NESTEROV, ADAM_AMSGRAD, ADAMW, RMSPROP_CENTERED };

tg_optim *make(Rule rule, tg_tensor *const *params, int count) {
    switch (rule) {
    case SGD_NESTEROV:
        return tg_sgd_params(params, count,
                             tg_sgd_opts{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
    case ADAM_AMSGRAD: return tg_adam_params(params, count, tg_adam_opts{.lr = 0.01, .amsgrad = true});
    case ADAMW: return tg_adamw_params(params, count, tg_adamw_opts{.lr = 0.01, .weight_decay = 0.1});
    case RMSPROP_CENTERED:
        return tg_rmsprop_params(params, count, tg_rmsprop_opts{.lr = 0.01, .momentum = 0.5, .centered = true});
    }
    return nullptr;
}

// Three steps with fresh random gradients: all parameters in one optimizer (one loop,
// blocks of several parameters per thread) against one optimizer per parameter on one
// thread, bit for bit.
TEST_F(OptimFusedTest, SameBitsAsOneOptimizerPerParameter) {
    for (Rule rule : {SGD_NESTEROV, ADAM_AMSGRAD, ADAMW, RMSPROP_CENTERED}) {
        for (int threads : {1, 2}) {
            std::vector<tg_tensor *> together, alone;
            tg_manual_seed(11);
            for (size_t i = 0; i < std::size(kSizes); i++) {
                tg_dtype dt = i == 3 ? TG_FLOAT64 : TG_FLOAT32; // one float64 parameter among them
                tg_tensor *p = tg_randn(TG_SHAPE(kSizes[i]), (tg_opts){dt});
                together.push_back(tg_requires_grad_(tg_clone(p), true));
                alone.push_back(tg_requires_grad_(tg_clone(p), true));
            }
            tg_optim *all = make(rule, together.data(), (int)together.size());
            std::vector<tg_optim *> each;
            for (tg_tensor *&p : alone) each.push_back(make(rule, &p, 1));
            for (int step = 0; step < 3; step++) {
                for (size_t i = 0; i < together.size(); i++) {
                    tg_tensor *g = tg_randn(TG_SHAPE(kSizes[i]), (tg_opts){tg_dtype_of(together[i])});
                    tg_set_grad(together[i], g);
                    tg_set_grad(alone[i], g);
                }
                tg_set_num_threads(threads);
                ASSERT_EQ(tg_optim_step(all), TG_OK);
                tg_set_num_threads(1);
                for (tg_optim *o : each) ASSERT_EQ(tg_optim_step(o), TG_OK);
            }
            for (size_t i = 0; i < together.size(); i++)
                EXPECT_EQ(bytes_of(together[i]), bytes_of(alone[i]))
                    << "rule " << rule << ", parameter " << i << ", " << threads << " threads";
            tg_optim_free(all);
            for (tg_optim *o : each) tg_optim_free(o);
        }
    }
}

TEST_F(OptimFusedTest, ABadGradientLeavesEveryParameterAsItWas) {
    tg_tensor *a = tg_requires_grad_(tensor_f32({1, 2, 3}, TG_SHAPE(3)), true);
    tg_tensor *b = tg_requires_grad_(tensor_f32({4, 5}, TG_SHAPE(2)), true);
    tg_tensor *params[] = {a, b};
    tg_optim *opt = tg_adam_params(params, 2, tg_adam_opts{.lr = 0.1});
    tg_set_grad(a, tensor_f32({1, 1, 1}, TG_SHAPE(3)));
    tg_set_grad(b, tensor_f32({1, 1, 1}, TG_SHAPE(3))); // the wrong shape
    tg_clear_error();
    EXPECT_EQ(tg_optim_step(opt), TG_ERROR);
    EXPECT_ERROR_CONTAINS("Adam.step: parameter 1 is float32 [2] on cpu but its gradient is float32 [3]");
    EXPECT_TRUE(tensor_near(a, {1, 2, 3}, 0, 0)) << "parameter 0 was updated";
    EXPECT_TRUE(tensor_near(b, {4, 5}, 0, 0));
    // Fixed, the step runs as the first one: Adam's first step moves each element by lr.
    tg_set_grad(b, tensor_f32({1, 1}, TG_SHAPE(2)));
    tg_clear_error();
    ASSERT_EQ(tg_optim_step(opt), TG_OK);
    EXPECT_TRUE(tensor_near(a, {0.9, 1.9, 2.9}, 1e-6, 0));
    EXPECT_TRUE(tensor_near(b, {3.9, 4.9}, 1e-6, 0));
    tg_optim_free(opt);
}

// Adam and AdamW in float32 and float64 against their formulas written out here with
// plain divisions (PyTorch's ops, one rounding each): square roots of exp_avg_sq values
// from every binade (subnormal, zero, Inf and NaN included) divided by the bias corrections
// of steps 1 to 100000, bit for bit. (Before it was adopted, div_fixed matched the float32
// division over all 2^23 significands for 1400 divisors.)
template <typename T> void adam_against_formula(bool decoupled) {
    const int64_t n = 1 << 16;
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal;
    for (int step : {1, 2, 3, 10, 1000, 100000}) {
        std::vector<T> p(n), g(n), m(n), v(n);
        for (int64_t i = 0; i < n; i++) {
            p[i] = (T)normal(rng), g[i] = (T)(normal(rng) * 1e-3), m[i] = (T)(normal(rng) * 1e-3);
            int e = (int)(rng() % 90) - 80; /* v's binade: 2^-80 .. 2^9, then a few specials */
            v[i] = (T)std::ldexp(1 + (double)(rng() >> 11) * 0x1p-53, e);
            if (i % 997 == 0) v[i] = 0;
            if (i % 1009 == 0) v[i] = std::numeric_limits<T>::denorm_min() * 3;
            if (i % 1013 == 0) v[i] = std::numeric_limits<T>::infinity();
            if (i % 1019 == 0) v[i] = std::numeric_limits<T>::quiet_NaN();
        }
        double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = decoupled ? 0.01 : 0;
        tg_adam_args a = {lr,    b1,        b2,   eps, wd, 1 - std::pow(b1, step), std::sqrt(1 - std::pow(b2, step)),
                          false, decoupled, false};
        std::vector<T> want_p(p), want_m(m), want_v(v);
        for (int64_t i = 0; i < n; i++) {
            T pi = decoupled ? p[i] * (T)(1 - lr * wd) : p[i];
            T mi = m[i] * (T)b1 + (T)(1 - b1) * g[i], vi = v[i] * (T)b2 + (T)(1 - b2) * g[i] * g[i];
            T denom = std::sqrt(vi) / (T)a.bias_correction2_sqrt + (T)eps;
            want_m[i] = mi, want_v[i] = vi;
            want_p[i] = pi + (T)(-(lr / a.bias_correction1)) * mi / denom;
        }
        tg_optim_tensor t = {p.data(), g.data(), {m.data(), v.data(), nullptr}, n, {}};
        t.args.adam = a;
        if (sizeof(T) == 4) tg_optim_kernel_f32(TG_RULE_ADAM, &t, 1);
        else tg_optim_kernel_f64(TG_RULE_ADAM, &t, 1);
        ASSERT_EQ(0, std::memcmp(m.data(), want_m.data(), n * sizeof(T)));
        ASSERT_EQ(0, std::memcmp(v.data(), want_v.data(), n * sizeof(T)));
        for (int64_t i = 0; i < n; i++) {
            if (std::isnan(want_p[i]) && std::isnan(p[i])) continue;
            ASSERT_EQ(0, std::memcmp(&p[i], &want_p[i], sizeof(T)))
                << "step " << step << " element " << i << ": " << p[i] << ", want " << want_p[i] << " (v " << v[i]
                << ")";
        }
    }
}

// With IEEE subnormals, Adam's float32 blocks whose exp_avg is near the subnormals are
// computed in double, each operation rounded to float32 (optim/kernels.c): over 30 steps
// of exp_avg, gradients, exp_avg_sq and parameters from every binade down to the
// subnormals (zeros, -0, Inf and NaN among them, a ragged end), Adam and AdamW, the same
// bits as the plain vector loop.
TEST_F(OptimFusedTest, AdamNearTheSubnormalsHasTheVectorLoopsBits) {
    const int64_t n = 4099;
    std::mt19937_64 rng(11);
    auto binade = [&](int lo, int hi) {
        double v = std::ldexp(1 + (double)(rng() >> 11) * 0x1p-53, lo + (int)(rng() % (uint64_t)(hi - lo + 1)));
        return (float)(rng() & 1 ? -v : v);
    };
    /* two blocks of 16 in three near the subnormals (and half their gradients), the third not */
    auto low = [](int64_t i) { return (i / 16) % 3 != 2; };
    auto gradient = [&](int64_t i) {
        return i % 5 == 0 ? 0.0f : low(i) && i % 2 ? binade(-149, -50) : binade(-30, -5);
    };
    for (bool decoupled : {false, true}) {
        std::vector<float> p(n), g(n), m(n), v(n);
        for (int64_t i = 0; i < n; i++) {
            m[i] = low(i) ? binade(-149, -80) : binade(-20, -5);
            g[i] = gradient(i);
            v[i] = i % 7 == 0 ? binade(-149, -120) : binade(-40, -5);
            p[i] = i % 11 == 0 ? binade(-149, -120) : binade(-10, 2);
        }
        const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
        for (int i = 0; i < 5; i++) {
            m[37 * i + 1] = specials[i], g[41 * i + 2] = specials[i], p[47 * i + 5] = specials[i];
            v[43 * i + 3] = std::fabs(specials[i]);
        }
        std::vector<float> p2(p), m2(m), v2(v);
        for (int step = 1; step <= 30; step++) {
            double lr = 1e-3, b1 = 0.9, b2 = 0.999;
            tg_adam_args a = {lr,
                              b1,
                              b2,
                              1e-8,
                              decoupled ? 0.01 : 0,
                              1 - std::pow(b1, step),
                              std::sqrt(1 - std::pow(b2, step)),
                              false,
                              decoupled,
                              false};
            tg_optim_tensor t = {p.data(), g.data(), {m.data(), v.data(), nullptr}, n, {}};
            tg_optim_tensor t2 = {p2.data(), g.data(), {m2.data(), v2.data(), nullptr}, n, {}};
            t.args.adam = t2.args.adam = a;
            bool was = tg_optim_adam_set_exact_blocks(true);
            tg_optim_kernel_f32(TG_RULE_ADAM, &t, 1);
            tg_optim_adam_set_exact_blocks(false);
            tg_optim_kernel_f32(TG_RULE_ADAM, &t2, 1);
            tg_optim_adam_set_exact_blocks(was);
            for (int64_t i = 0; i < n; i++) {
                const float got[] = {p[i], m[i], v[i]}, want[] = {p2[i], m2[i], v2[i]};
                for (int k = 0; k < 3; k++) {
                    if (std::isnan(got[k]) && std::isnan(want[k])) continue;
                    ASSERT_EQ(0, std::memcmp(&got[k], &want[k], sizeof(float)))
                        << (decoupled ? "AdamW" : "Adam") << ", step " << step << ", element " << i << ", "
                        << "pmv"[k] << " " << got[k] << ", want " << want[k];
                }
            }
            for (int64_t i = 0; i < n; i++) g[i] = gradient(i);
        }
    }
}

TEST_F(OptimFusedTest, AdamsFixedDivisionHasTheDivisionsBits) {
    adam_against_formula<float>(false);
    adam_against_formula<float>(true);
    adam_against_formula<double>(false);
    adam_against_formula<double>(true);
}

} // namespace
