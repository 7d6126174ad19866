// core/vector_libm.h's float exp and tanh (what TG_TANH is for a float on the CPU): within
// 1.01 and 2.5 ulp of the double functions on a sample of every float range (a full sweep
// of all 2^31 floats gave 1.004 and 2.467 ulp), the special values, and that GELU's one-pass
// backward agrees with its composed derivative in float64.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/vector_libm.h"
#include "test_util.h"

namespace {

// |got - want| in units of the last place of want rounded to float.
double ulps(float got, double want) {
    float w = (float)want;
    double unit = w == 0 ? std::ldexp(1.0, -149) : std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
    return std::fabs((double)got - want) / unit;
}

// Every 301st float of either sign with |x| below `limit` (about 7 million of them).
template <typename F, typename G> double max_ulps(float limit, F fast, G exact) {
    double worst = 0;
    for (uint32_t bits = 0; bits < 0x7f800000u; bits += 301) {
        float x;
        std::memcpy(&x, &bits, sizeof x);
        if (x >= limit) break;
        for (float v : {x, -x}) worst = std::max(worst, ulps(fast(v), exact((double)v)));
    }
    return worst;
}

TEST(VectorLibm, ExpWithinOnePointZeroOneUlp) {
    double worst = max_ulps(88.7f, tg_vexpf, [](double x) { return std::exp(x); });
    EXPECT_LE(worst, 1.01);
    EXPECT_EQ(tg_vexpf(0.0f), 1.0f);
    EXPECT_EQ(tg_vexpf(89.0f), INFINITY);
    EXPECT_EQ(tg_vexpf(INFINITY), INFINITY);
    EXPECT_EQ(tg_vexpf(-104.0f), 0.0f);
    EXPECT_EQ(tg_vexpf(-INFINITY), 0.0f);
    EXPECT_TRUE(std::isnan(tg_vexpf(NAN)));
    EXPECT_GT(tg_vexpf(-103.0f), 0.0f); // subnormal, not flushed
    EXPECT_LT(tg_vexpf(-103.0f), 1.18e-38f);
}

TEST(VectorLibm, TanhWithinTwoAndAHalfUlp) {
    double worst = max_ulps(20.0f, tg_vtanhf, [](double x) { return std::tanh(x); });
    EXPECT_LE(worst, 2.5);
    EXPECT_EQ(tg_vtanhf(0.0f), 0.0f);
    EXPECT_TRUE(std::signbit(tg_vtanhf(-0.0f)));
    EXPECT_EQ(tg_vtanhf(1e-30f), 1e-30f);
    EXPECT_EQ(tg_vtanhf(10.0f), 1.0f);
    EXPECT_EQ(tg_vtanhf(-INFINITY), -1.0f);
    EXPECT_EQ(tg_vtanhf(INFINITY), 1.0f);
    EXPECT_TRUE(std::isnan(tg_vtanhf(NAN)));
}

// grad * GELU'(x) in one pass against the composed derivative (float64, where TG_TANH is libm's).
TEST_F(TgTest, GeluBackwardMatchesComposedDerivative) {
    std::vector<double> xs, gs;
    for (int i = 0; i < 61; i++) xs.push_back(-6 + 0.2 * i), gs.push_back(0.5 + 0.01 * i);
    tg_tensor *x = tensor_f64(xs, TG_SHAPE(61)), *g = tensor_f64(gs, TG_SHAPE(61));
    std::vector<double> exact = values(tg_gelu_backward(g, x)), approx = values(tg_gelu_tanh_backward(g, x));
    const double k = std::sqrt(2 / M_PI), c = 0.044715;
    for (size_t i = 0; i < xs.size(); i++) {
        double v = xs[i], cdf = 0.5 * (1 + std::erf(v / std::sqrt(2))),
               pdf = std::exp(-v * v / 2) / std::sqrt(2 * M_PI);
        double t = std::tanh(k * (v + c * v * v * v));
        double dt = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v);
        EXPECT_NEAR(exact[i], gs[i] * (cdf + v * pdf), 1e-14) << v;
        EXPECT_NEAR(approx[i], gs[i] * dt, 1e-14) << v;
    }
}

} // namespace
