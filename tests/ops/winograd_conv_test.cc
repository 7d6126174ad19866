// The 3x3 stride-1 float32 convolution by Winograd F(4x4, 3x3) (ops/cpu/winograd_conv.c,
// issue 32): the kernels called on their own, forward, input gradient and weight gradient,
// against the float64 convolution on the same values (odd sizes and cut tiles, every
// padding the kernels take, 8 to 64 channels, blocks that span images), the same bits on 1,
// 2, 3 and 5 threads, the same bits with the AVX-512 product tiles as with the AVX2 ones,
// their reach, and tg_conv2d taking them for a ResNet block.
// tests/ops/conv_test.cc checks tg_conv2d against PyTorch's fixtures.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "ops/cpu/winograd_conv.h"
#include "test_util.h"

namespace {

struct Shape {
    int64_t n, c, co, h, w, ph, pw;
    bool bias;
};
const std::vector<Shape> shapes = {
    {2, 16, 16, 8, 8, 1, 1, true},   // a ResNet stage-3 block: blocks of tile rows span both images
    {3, 8, 24, 11, 13, 1, 1, false}, // odd sizes: the last tile row and column cut
    {2, 16, 8, 9, 20, 2, 2, true},   // padding 2 (a "full" 3x3): its input gradient has padding 0
    {1, 8, 16, 7, 9, 1, 0, true},    // padding per dimension
    {2, 32, 16, 5, 6, 0, 0, false},  // "valid"
    {1, 64, 64, 8, 8, 1, 1, true},   // 64 channels: 6-row blocks leave 4
    {5, 8, 8, 32, 32, 1, 1, true},   // ResNet's first stage size, several blocks an image
    {3, 96, 72, 10, 11, 1, 1, true}, // wide: blocks of at least 16 tiles, more than C + Co alone gives
};

tg_conv_geom geom_of(const Shape &s) {
    tg_conv_params p = {1, 1, (int)s.ph, (int)s.pw, 1, 1, 1, 3, 3, s.h, s.w};
    return tg_conv_make_geom(s.n, s.c, s.co, &p);
}
std::vector<float> floats(tg_tensor *t) {
    tg_tensor *c = tg_contiguous(t);
    std::vector<float> out((size_t)tg_numel(c));
    std::memcpy(out.data(), tg_data_ptr(c), out.size() * sizeof(float));
    return out;
}
// The largest |actual - expected| over `scale`, the spread of the sums.
double max_scaled_error(const std::vector<float> &actual, const std::vector<double> &expected, double scale) {
    double worst = 0;
    for (size_t i = 0; i < actual.size(); i++) worst = std::max(worst, std::fabs(actual[i] - expected[i]) / scale);
    return worst;
}
bool cpu_has_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// The three kernels on x, w, bias and the output gradient gy (float32 values).
struct Results {
    std::vector<float> y, gx, gw;
};
Results run_kernels(const tg_conv_geom &g, const std::vector<float> &x, const std::vector<float> &w,
                    const std::vector<float> *bias, const std::vector<float> &gy) {
    Results r;
    r.y.assign((size_t)(g.n * g.co * g.ho * g.wo), NAN);
    r.gx.assign((size_t)(g.n * g.c * g.h * g.w), NAN);
    r.gw.assign((size_t)(g.co * g.c * 9), NAN);
    std::vector<float> work((size_t)tg_cpu_winograd_conv_forward_workspace(&g), NAN);
    tg_cpu_winograd_conv_forward(&g, x.data(), w.data(), bias ? bias->data() : nullptr, r.y.data(), work.data());
    work.assign((size_t)tg_cpu_winograd_conv_input_grad_workspace(&g), NAN);
    tg_cpu_winograd_conv_input_grad(&g, gy.data(), w.data(), r.gx.data(), work.data());
    work.assign((size_t)tg_cpu_winograd_conv_weight_grad_workspace(&g), NAN);
    tg_cpu_winograd_conv_weight_grad(&g, x.data(), gy.data(), r.gw.data(), work.data());
    return r;
}

TEST_F(TgTest, WinogradConvMatchesFloat64Convolution) {
    if (!cpu_has_avx2_fma()) GTEST_SKIP() << "no AVX2 + FMA: the kernels do not run here";
    tg_manual_seed(33);
    for (const Shape &s : shapes) {
        SCOPED_TRACE(testing::Message() << "n " << s.n << " c " << s.c << " co " << s.co << " " << s.h << "x" << s.w
                                        << " pad " << s.ph << "," << s.pw);
        tg_conv_geom g = geom_of(s);
        ASSERT_TRUE(tg_cpu_winograd_conv_applies(&g));
        tg_tensor *x = tg_randn(TG_SHAPE(s.n, s.c, s.h, s.w), tg_opts{TG_FLOAT64, TG_CPU, true});
        tg_tensor *w = tg_randn(TG_SHAPE(s.co, s.c, 3, 3), tg_opts{TG_FLOAT64, TG_CPU, true});
        tg_tensor *b = s.bias ? tg_randn(TG_SHAPE(s.co), tg_opts{TG_FLOAT64, TG_CPU, true}) : nullptr;
        tg_tensor *gy = tg_randn(TG_SHAPE(s.n, s.co, g.ho, g.wo), tg_opts{TG_FLOAT64, TG_CPU, false});
        // The float32 values are the float64 ones rounded: the reference runs on the same numbers.
        for (tg_tensor **t : {&x, &w, &b, &gy}) {
            if (!*t) continue;
            bool grad = tg_requires_grad(*t);
            *t = tg_contiguous(tg_detach(tg_cast(tg_cast(*t, TG_FLOAT32), TG_FLOAT64)));
            if (grad) tg_requires_grad_(*t, true);
        }
        tg_conv_opts o = {};
        o.paddings = {(int)s.ph, (int)s.pw};
        tg_tensor *y64 = tg_conv2d(x, w, b, o);
        ASSERT_NE(y64, nullptr) << tg_last_error();
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(y64, gy))), TG_OK) << tg_last_error();

        std::vector<float> bias = b ? floats(tg_cast(b, TG_FLOAT32)) : std::vector<float>();
        Results r = run_kernels(g, floats(tg_cast(x, TG_FLOAT32)), floats(tg_cast(w, TG_FLOAT32)), b ? &bias : nullptr,
                                floats(tg_cast(gy, TG_FLOAT32)));
        // F(4x4, 3x3)'s transforms (factors up to 8 and 1/24) round more than a direct sum:
        // about 1e-5 of a sum's spread, sqrt(terms) for terms of N(0, 1) products, where
        // float32 sums in order reach 1e-6. A wrong coefficient is off by O(1).
        double fwd = max_scaled_error(r.y, values(y64), std::sqrt(9.0 * s.c));
        double igrad = max_scaled_error(r.gx, values(tg_grad(x)), std::sqrt(9.0 * s.co));
        double wgrad = max_scaled_error(r.gw, values(tg_grad(w)), std::sqrt((double)(s.n * g.ho * g.wo)));
        printf("scaled errors: forward %.2e, input gradient %.2e, weight gradient %.2e\n", fwd, igrad, wgrad);
        EXPECT_LT(fwd, 5e-5) << "forward";
        EXPECT_LT(igrad, 5e-5) << "input gradient";
        EXPECT_LT(wgrad, 5e-5) << "weight gradient";
    }
}

std::vector<uint32_t> bits(const std::vector<float> &v) {
    std::vector<uint32_t> out(v.size());
    std::memcpy(out.data(), v.data(), v.size() * sizeof(uint32_t));
    return out;
}

// 1, 2, 3 and 5 threads: the same bits (the forward and input gradient split by blocks of
// tile rows, the weight gradient's sums each over every tile in order).
TEST_F(TgTest, WinogradConvSameBitsOnAnyThreadCount) {
    if (!cpu_has_avx2_fma()) GTEST_SKIP() << "no AVX2 + FMA: the kernels do not run here";
    int saved = tg_get_num_threads();
    tg_manual_seed(34);
    Shape s = {7, 16, 24, 9, 12, 1, 1, false};
    tg_conv_geom g = geom_of(s);
    std::vector<float> x = floats(tg_randn(TG_SHAPE(s.n, s.c, s.h, s.w), tg_opts{}));
    std::vector<float> w = floats(tg_randn(TG_SHAPE(s.co, s.c, 3, 3), tg_opts{}));
    std::vector<float> gy = floats(tg_randn(TG_SHAPE(s.n, s.co, g.ho, g.wo), tg_opts{}));
    Results first;
    for (int threads : {1, 2, 3, 5}) {
        SCOPED_TRACE(threads);
        tg_set_num_threads(threads);
        Results now = run_kernels(g, x, w, nullptr, gy);
        if (threads == 1) {
            first = now;
            continue;
        }
        EXPECT_TRUE(bits(now.y) == bits(first.y)) << "forward differs from 1 thread's";
        EXPECT_TRUE(bits(now.gx) == bits(first.gx)) << "input gradient differs from 1 thread's";
        EXPECT_TRUE(bits(now.gw) == bits(first.gw)) << "weight gradient differs from 1 thread's";
    }
    tg_set_num_threads(saved);
}

// The AVX-512 product tiles (6 x 32 output channels, the last vector 8 lanes when Co is
// not a multiple of 16) sum each output in the AVX2 tiles' order: the same bits.
TEST_F(TgTest, WinogradConvAvx512TilesGiveTheAvx2Bits) {
    if (!cpu_has_avx2_fma() || !__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512 here";
    tg_manual_seed(35);
    for (const Shape &s : {Shape{3, 24, 40, 9, 12, 1, 1, true}, Shape{2, 64, 16, 8, 8, 1, 1, false},
                           Shape{1, 16, 8, 7, 9, 2, 2, true}, Shape{2, 16, 32, 20, 37, 1, 1, true}}) {
        tg_conv_geom g = geom_of(s);
        std::vector<float> x = floats(tg_randn(TG_SHAPE(s.n, s.c, s.h, s.w), tg_opts{}));
        std::vector<float> w = floats(tg_randn(TG_SHAPE(s.co, s.c, 3, 3), tg_opts{}));
        std::vector<float> b = floats(tg_randn(TG_SHAPE(s.co), tg_opts{}));
        std::vector<float> gy = floats(tg_randn(TG_SHAPE(s.n, s.co, g.ho, g.wo), tg_opts{}));
        bool was = tg_cpu_winograd_set_avx512(true);
        Results wide = run_kernels(g, x, w, s.bias ? &b : nullptr, gy);
        tg_cpu_winograd_set_avx512(false);
        Results narrow = run_kernels(g, x, w, s.bias ? &b : nullptr, gy);
        tg_cpu_winograd_set_avx512(was);
        SCOPED_TRACE(testing::Message() << "c " << s.c << " co " << s.co);
        EXPECT_TRUE(bits(wide.y) == bits(narrow.y)) << "forward";
        EXPECT_TRUE(bits(wide.gx) == bits(narrow.gx)) << "input gradient";
        EXPECT_TRUE(bits(wide.gw) == bits(narrow.gw)) << "weight gradient";
    }
}

// What the kernels take: 3x3, stride 1, dilation 1, groups 1, padding 0 to 2, channel counts
// that are multiples of 8 (the ResNets'); the rest goes to the direct or GEMM paths.
TEST_F(TgTest, WinogradConvReach) {
    if (!cpu_has_avx2_fma()) GTEST_SKIP() << "no AVX2 + FMA: every convolution takes another path";
    auto applies = [](int64_t c, int64_t co, int sh, int ph, int dh, int groups, int64_t k) {
        tg_conv_params p = {sh, sh, ph, ph, dh, dh, groups, k, k, 16, 16};
        tg_conv_geom g = tg_conv_make_geom(2, c, co, &p);
        return tg_cpu_winograd_conv_applies(&g);
    };
    EXPECT_TRUE(applies(16, 16, 1, 1, 1, 1, 3));
    EXPECT_TRUE(applies(64, 32, 1, 2, 1, 1, 3));
    EXPECT_TRUE(applies(8, 8, 1, 0, 1, 1, 3));
    EXPECT_FALSE(applies(3, 16, 1, 1, 1, 1, 3));  // the stem's 3 channels
    EXPECT_FALSE(applies(16, 12, 1, 1, 1, 1, 3)); // 12 output channels
    EXPECT_FALSE(applies(16, 16, 2, 1, 1, 1, 3)); // stride 2
    EXPECT_FALSE(applies(16, 16, 1, 2, 2, 1, 3)); // dilation 2
    EXPECT_FALSE(applies(16, 16, 1, 1, 1, 2, 3)); // groups 2
    EXPECT_FALSE(applies(16, 16, 1, 3, 1, 1, 3)); // padding 3
    EXPECT_FALSE(applies(16, 16, 1, 0, 1, 1, 1)); // 1x1
    EXPECT_FALSE(applies(16, 16, 1, 2, 1, 1, 5)); // 5x5
    // Where tg_conv2d takes them: tiles enough to pay for the transformed weights.
    auto applies_at = [](int64_t n, int64_t c, int64_t hw) {
        tg_conv_params p = {1, 1, 1, 1, 1, 1, 1, 3, 3, hw, hw};
        tg_conv_geom g = tg_conv_make_geom(n, c, c, &p);
        return tg_cpu_winograd_conv_applies(&g) && tg_cpu_winograd_conv_pays(&g);
    };
    EXPECT_TRUE(applies_at(8, 64, 8));     // 32 tiles of 64 channels
    EXPECT_FALSE(applies_at(4, 64, 8));    // 16
    EXPECT_TRUE(applies_at(64, 256, 8));   // 256 tiles of 256 channels
    EXPECT_FALSE(applies_at(8, 256, 8));   // 32
    EXPECT_FALSE(applies_at(256, 512, 4)); // 512 channels: the GEMM path at any batch
    EXPECT_TRUE(applies_at(128, 64, 8));   // ResNet-20's last stage at batch 128
}

// tg_conv2d takes the kernels for a ResNet block's convolution: its values are the kernels'.
TEST_F(TgTest, Conv2dTakesWinogradForResNetBlocks) {
    if (!cpu_has_avx2_fma()) GTEST_SKIP() << "no AVX2 + FMA: every convolution takes another path";
    tg_manual_seed(36);
    Shape s = {4, 16, 16, 16, 16, 1, 1, false}; /* 64 tiles: enough to pay */
    tg_conv_geom g = geom_of(s);
    tg_tensor *x = tg_randn(TG_SHAPE(s.n, s.c, s.h, s.w), tg_opts{});
    tg_tensor *w = tg_randn(TG_SHAPE(s.co, s.c, 3, 3), tg_opts{});
    tg_conv_opts o = {};
    o.padding = 1;
    tg_tensor *y = tg_conv2d(x, w, nullptr, o);
    ASSERT_NE(y, nullptr) << tg_last_error();
    std::vector<float> gy(floats(y).size(), 0.0f);
    Results r = run_kernels(g, floats(x), floats(w), nullptr, gy);
    EXPECT_TRUE(bits(floats(y)) == bits(r.y));
}

} // namespace
