// Dense stride-1 float32 conv2d (groups 1, dilation 1): the direct CPU kernels of
// ops/cpu/direct_conv.c (issue 32; 3x3 ones with multiples of 8 channels take
// ops/cpu/winograd_conv.c's instead), forward and the three gradients, against the float64
// im2col + GEMM path on the same values (odd sizes, every padding the kernels take, kernels
// from 1x1 to 5x5 and non-square, channel counts that are not a multiple of the 4-channel
// tile, one image), the same bits on 1, 2, 3 and 5 threads, and their reach (which
// convolutions take them). tests/ops/conv_test.cc checks the same path against PyTorch's
// fixtures.
#include <cstring>
#include <string>

#include "ops/cpu/direct_conv.h"
#include "test_util.h"

namespace {

struct Shape {
    int64_t n, c, co, h, w, kh, kw, ph, pw;
    bool bias;
};
const std::vector<Shape> shapes = {
    {2, 12, 16, 8, 8, 3, 3, 1, 1, true},  // a ResNet stage's 8x8 block (12 channels: 16 take Winograd's kernels)
    {3, 3, 5, 11, 13, 3, 3, 1, 1, false}, // the stem's 3 channels, odd sizes, 5 output channels
    {2, 6, 7, 9, 20, 5, 5, 2, 2, true},   // "same" 5x5
    {2, 5, 9, 28, 28, 5, 5, 0, 0, true},  // LeNet's conv1: valid 5x5 on 28x28
    {1, 4, 6, 7, 9, 2, 3, 1, 0, true},    // non-square kernel, padding per dim
    {2, 7, 3, 6, 5, 1, 1, 0, 0, false},   // 1x1
    {2, 2, 4, 3, 40, 3, 3, 2, 1, true},   // padding that reaches past the image's first rows
    {1, 9, 13, 5, 6, 3, 3, 1, 1, true},   // rows narrower than a vector, a quarter dropped
};

tg_tensor *randn(tg_shape s, tg_dtype dt, bool grad = true) {
    tg_tensor *t = tg_randn(s, tg_opts{dt, TG_CPU, false});
    if (grad) tg_requires_grad_(t, true);
    return t;
}
tg_tensor *as_f64(tg_tensor *t, bool grad = true) {
    tg_tensor *c = tg_contiguous(tg_detach(tg_cast(t, TG_FLOAT64)));
    if (grad) tg_requires_grad_(c, true);
    return c;
}
tg_conv_opts opts_of(const Shape &s) {
    tg_conv_opts o = {};
    o.paddings = {(int)s.ph, (int)s.pw};
    return o;
}
tg_conv_geom geom_of(const Shape &s) {
    tg_conv_params p = {1, 1, (int)s.ph, (int)s.pw, 1, 1, 1, s.kh, s.kw, s.h, s.w};
    return tg_conv_make_geom(s.n, s.c, s.co, &p);
}
bool cpu_has_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

TEST_F(TgTest, DirectConvMatchesFloat64GemmPath) {
    tg_manual_seed(32);
    for (const Shape &s : shapes) {
        SCOPED_TRACE(testing::Message() << "n " << s.n << " c " << s.c << " co " << s.co << " " << s.h << "x" << s.w
                                        << " k " << s.kh << "x" << s.kw << " pad " << s.ph << "," << s.pw);
        tg_conv_geom g = geom_of(s);
        EXPECT_EQ(tg_cpu_direct_conv_applies(&g), cpu_has_avx2_fma());
        tg_tensor *x = randn(TG_SHAPE(s.n, s.c, s.h, s.w), TG_FLOAT32);
        tg_tensor *w = randn(TG_SHAPE(s.co, s.c, s.kh, s.kw), TG_FLOAT32);
        tg_tensor *b = s.bias ? randn(TG_SHAPE(s.co), TG_FLOAT32) : nullptr;
        tg_tensor *y = tg_conv2d(x, w, b, opts_of(s));
        ASSERT_NE(y, nullptr) << tg_last_error();
        tg_tensor *gy = randn(tg_shape_of(y), TG_FLOAT32, false);
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, gy))), TG_OK) << tg_last_error();

        tg_tensor *x64 = as_f64(x), *w64 = as_f64(w), *b64 = b ? as_f64(b) : nullptr;
        tg_tensor *y64 = tg_conv2d(x64, w64, b64, opts_of(s));
        ASSERT_NE(y64, nullptr) << tg_last_error();
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(y64, as_f64(gy, false)))), TG_OK) << tg_last_error();
        // float32 sums of up to a few hundred products of N(0, 1) values (and the weight
        // gradient's over every image position): within 1e-4 of the float64 sums.
        EXPECT_EQ(dims(y), dims(y64));
        EXPECT_TRUE(tensor_near(y, values(y64), 1e-4, 1e-5)) << "forward";
        EXPECT_TRUE(tensor_near(tg_grad(x), values(tg_grad(x64)), 1e-4, 1e-5)) << "input gradient";
        EXPECT_TRUE(tensor_near(tg_grad(w), values(tg_grad(w64)), 2e-4, 1e-5)) << "weight gradient";
        if (b) {
            EXPECT_TRUE(tensor_near(tg_grad(b), values(tg_grad(b64)), 2e-4, 1e-5)) << "bias gradient";
        }
    }
}

std::vector<uint32_t> bits(tg_tensor *t) {
    tg_tensor *c = tg_contiguous(t);
    std::vector<uint32_t> out((size_t)tg_numel(c));
    std::memcpy(out.data(), tg_data_ptr(c), out.size() * sizeof(uint32_t));
    return out;
}

// 1, 2, 3 and 5 threads: the same bits (the forward and input gradient split by images,
// the weight gradient by tiles that each sum over every image in order).
TEST_F(TgTest, DirectConvSameBitsOnAnyThreadCount) {
    int saved = tg_get_num_threads();
    tg_manual_seed(35);
    tg_tensor *x = randn(TG_SHAPE(7, 10, 9, 12), TG_FLOAT32, false);
    tg_tensor *w = randn(TG_SHAPE(11, 10, 3, 3), TG_FLOAT32, false);
    tg_tensor *gy = randn(TG_SHAPE(7, 11, 9, 12), TG_FLOAT32, false);
    std::vector<std::vector<uint32_t>> first;
    for (int threads : {1, 2, 3, 5}) {
        SCOPED_TRACE(threads);
        tg_set_num_threads(threads);
        tg_tensor *xs = tg_contiguous(tg_detach(tg_clone(x))), *ws = tg_contiguous(tg_detach(tg_clone(w)));
        tg_requires_grad_(xs, true);
        tg_requires_grad_(ws, true);
        tg_conv_opts o = {};
        o.padding = 1;
        tg_tensor *y = tg_conv2d(xs, ws, nullptr, o);
        ASSERT_NE(y, nullptr) << tg_last_error();
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, gy))), TG_OK) << tg_last_error();
        std::vector<std::vector<uint32_t>> now = {bits(y), bits(tg_grad(xs)), bits(tg_grad(ws))};
        if (first.empty()) first = now;
        else EXPECT_TRUE(now == first) << "results differ from 1 thread's";
    }
    tg_set_num_threads(saved);
}

// What takes the GEMM path instead: strides, dilations, groups, padding as wide as the
// kernel (its input gradient would crop), more than 64 taps, and grids that would drop more
// than a quarter of their outputs (kW - 1 columns of every padded row: LeNet's conv2).
TEST_F(TgTest, DirectConvReach) {
    if (!cpu_has_avx2_fma()) GTEST_SKIP() << "no AVX2 + FMA: every convolution takes the GEMM path";
    auto applies = [](int sh, int sw, int ph, int pw, int dh, int groups, int64_t kh, int64_t kw, int64_t hw = 16) {
        tg_conv_params p = {sh, sw, ph, pw, dh, 1, groups, kh, kw, hw, hw};
        tg_conv_geom g = tg_conv_make_geom(2, 8, 8, &p);
        return tg_cpu_direct_conv_applies(&g);
    };
    EXPECT_TRUE(applies(1, 1, 1, 1, 1, 1, 3, 3));
    EXPECT_TRUE(applies(1, 1, 0, 0, 1, 1, 1, 1));
    EXPECT_TRUE(applies(1, 1, 3, 3, 1, 1, 7, 7, 32));
    EXPECT_FALSE(applies(2, 2, 1, 1, 1, 1, 3, 3));
    EXPECT_FALSE(applies(1, 2, 1, 1, 1, 1, 3, 3));
    EXPECT_FALSE(applies(1, 1, 2, 2, 2, 1, 3, 3));
    EXPECT_FALSE(applies(1, 1, 1, 1, 1, 2, 3, 3));
    EXPECT_FALSE(applies(1, 1, 3, 1, 1, 1, 3, 3));
    EXPECT_FALSE(applies(1, 1, 4, 4, 1, 1, 9, 9));
    EXPECT_TRUE(applies(1, 1, 1, 1, 1, 1, 3, 3, 8));   // ResNet's last stage: 64 of 80
    EXPECT_TRUE(applies(1, 1, 0, 0, 1, 1, 5, 5, 28));  // LeNet's conv1: 576 of 672
    EXPECT_FALSE(applies(1, 1, 0, 0, 1, 1, 5, 5, 12)); // LeNet's conv2: 64 of 96
}

} // namespace
