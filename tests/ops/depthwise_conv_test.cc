// Depthwise conv2d (groups == input channels > 1, out channels = C * multiplier): the direct
// CPU kernels of ops/cpu/depthwise_conv.c (issue 32), forward and both gradients, against
// PyTorch 1.13 (tests/fixtures/gen_depthwise_conv.py), against the im2col + GEMM path (the
// same conv as a dense block-diagonal conv with groups = 1), the float32 kernels against
// the float64 ones, gradcheck / gradgradcheck in float64, the same bits on 1, 2, 3 and 5
// threads, conv_transpose2d (whose forward is the input gradient) and the low-precision
// dtypes (the float32 kernels on widened copies).
#include <cstring>
#include <string>

#include "test_util.h"

namespace {

class DepthwiseConvTest : public TgTest, public ::testing::WithParamInterface<tg_dtype> {};

const std::map<std::string, FixtureTensor> &fixtures() {
    static const auto f = load_fixtures("tests/fixtures/depthwise_conv.txt");
    return f;
}
const FixtureTensor &fx(const std::string &name) { return fixture_tensor(fixtures(), name); }

struct Case {
    std::string name;
    tg_conv_opts opts;
};

const std::vector<Case> fixture_cases = {
    {"c3_k3", tg_conv_opts{.padding = 1, .groups = 3}},
    {"c4_m2", tg_conv_opts{.groups = 4, .strides = {2, 1}, .paddings = {1, 2}, .dilations = {1, 2}}},
    {"c8_k5_n3", tg_conv_opts{.stride = 2, .padding = 2, .groups = 8}},
    {"k1_m2", tg_conv_opts{.groups = 5}},
};

struct Result {
    tg_tensor *y, *gx, *gw, *gb;
};

// y = conv2d(x, w, b) and the gradients of sum(y * gy); b may be NULL.
Result run(tg_tensor *x, tg_tensor *w, tg_tensor *b, tg_tensor *gy, tg_conv_opts o) {
    tg_tensor *y = tg_conv2d(x, w, b, o);
    EXPECT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(tg_backward(tg_sum(tg_mul(y, gy))), TG_OK) << tg_last_error();
    return {y, tg_grad(x), tg_grad(w), b ? tg_grad(b) : nullptr};
}

TEST_P(DepthwiseConvTest, MatchesPyTorch) {
    tg_dtype dt = GetParam();
    double tol = dt == TG_FLOAT64 ? 1e-12 : 2e-5;
    for (const Case &c : fixture_cases) {
        SCOPED_TRACE(c.name);
        bool bias = fixtures().count(c.name + "_b") > 0;
        tg_tensor *x = fx(c.name + "_x").make(dt, true), *w = fx(c.name + "_w").make(dt, true);
        tg_tensor *b = bias ? fx(c.name + "_b").make(dt, true) : nullptr;
        Result r = run(x, w, b, fx(c.name + "_gy").make(dt), c.opts);
        EXPECT_EQ(dims(r.y), fx(c.name + "_y").shape);
        EXPECT_TRUE(tensor_near(r.y, fx(c.name + "_y").data, tol, tol)) << "forward";
        EXPECT_TRUE(tensor_near(r.gx, fx(c.name + "_gx").data, tol, tol)) << "input gradient";
        EXPECT_TRUE(tensor_near(r.gw, fx(c.name + "_gw").data, tol, tol)) << "weight gradient";
        if (bias) {
            EXPECT_TRUE(tensor_near(r.gb, fx(c.name + "_gb").data, tol, tol)) << "bias gradient";
        }
    }
}

// conv_transpose2d with groups == out channels and 2 input channels per group: its forward
// is the depthwise input gradient, its gradients the depthwise forward and weight gradient.
TEST_P(DepthwiseConvTest, ConvTransposeMatchesPyTorch) {
    tg_dtype dt = GetParam();
    double tol = dt == TG_FLOAT64 ? 1e-12 : 2e-5;
    tg_tensor *x = fx("transpose_x").make(dt, true), *w = fx("transpose_w").make(dt, true);
    tg_tensor *b = fx("transpose_b").make(dt, true);
    tg_conv_transpose_opts o = {};
    o.stride = 2, o.padding = 1, o.output_padding = 1, o.groups = 3;
    tg_tensor *y = tg_conv_transpose2d(x, w, b, o);
    ASSERT_NE(y, nullptr) << tg_last_error();
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, fx("transpose_gy").make(dt)))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(y, fx("transpose_y").data, tol, tol)) << "forward";
    EXPECT_TRUE(tensor_near(tg_grad(x), fx("transpose_gx").data, tol, tol)) << "input gradient";
    EXPECT_TRUE(tensor_near(tg_grad(w), fx("transpose_gw").data, tol, tol)) << "weight gradient";
    EXPECT_TRUE(tensor_near(tg_grad(b), fx("transpose_gb").data, tol, tol)) << "bias gradient";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DepthwiseConvTest, ::testing::Values(TG_FLOAT32, TG_FLOAT64));

// Shapes for the comparisons below: odd sizes, a multiplier, strides, dilations, padding
// wider than the kernel reaches, more than 16 taps (the weight gradient's tap blocks), rows
// longer than 256 (its column blocks), a 1x1 kernel, one image.
struct Shape {
    int64_t n, c, m, h, w, kh, kw;
    tg_conv_opts opts; // groups is set to c
};
const std::vector<Shape> shapes = {
    {2, 3, 1, 7, 6, 3, 3, tg_conv_opts{.padding = 1}},
    {3, 5, 2, 13, 9, 3, 5, tg_conv_opts{.strides = {2, 1}, .paddings = {1, 2}, .dilations = {1, 2}}},
    {2, 4, 3, 11, 10, 5, 5, tg_conv_opts{.stride = 2, .padding = 2}},
    {1, 6, 1, 9, 8, 3, 3, tg_conv_opts{.strides = {1, 3}, .paddings = {3, 4}, .dilations = {2, 1}}},
    {2, 2, 2, 6, 7, 5, 4, tg_conv_opts{.strides = {3, 2}, .dilations = {1, 2}}},
    {2, 3, 1, 3, 300, 1, 3, tg_conv_opts{.padding = 1}},
    {1, 2, 1, 9, 9, 7, 7, tg_conv_opts{.padding = 3}},
    {2, 7, 2, 5, 5, 1, 1, tg_conv_opts{}},
};

tg_tensor *randn(tg_shape s, tg_dtype dt, bool grad = true) {
    tg_tensor *t = tg_randn(s, tg_opts{dt, TG_CPU, false});
    if (grad) tg_requires_grad_(t, true);
    return t;
}

tg_tensor *detached_copy(tg_tensor *t, bool grad = true) {
    tg_tensor *c = tg_contiguous(tg_detach(tg_clone(t)));
    if (grad) tg_requires_grad_(c, true);
    return c;
}

// The dense weight [C*m, C, kH, kW] of a depthwise one [C*m, 1, kH, kW]: output channel o
// keeps its kernel at input channel o / m and zeros elsewhere (as an op of w, so that its
// gradient reaches w).
tg_tensor *block_diagonal(tg_tensor *w, int64_t c, int64_t m) {
    std::vector<double> mask((size_t)(c * m * c), 0.0);
    for (int64_t o = 0; o < c * m; o++) mask[(size_t)(o * c + o / m)] = 1;
    tg_tensor *mk = tg_cast(tensor_f64(mask, TG_SHAPE(c * m, c, 1, 1)), tg_dtype_of(w));
    return tg_mul(w, mk);
}

TEST_F(TgTest, DepthwiseMatchesDenseGemmPath) {
    tg_manual_seed(32);
    for (const Shape &s : shapes) {
        SCOPED_TRACE(testing::Message() << "n " << s.n << " c " << s.c << " m " << s.m << " " << s.h << "x" << s.w
                                        << " k " << s.kh << "x" << s.kw);
        tg_conv_opts dw = s.opts, dense = s.opts;
        dw.groups = (int)s.c;
        dense.groups = 1;
        tg_tensor *x = randn(TG_SHAPE(s.n, s.c, s.h, s.w), TG_FLOAT32);
        tg_tensor *w = randn(TG_SHAPE(s.c * s.m, 1, s.kh, s.kw), TG_FLOAT32);
        tg_tensor *b = randn(TG_SHAPE(s.c * s.m), TG_FLOAT32);
        tg_tensor *y = tg_conv2d(x, w, b, dw);
        ASSERT_NE(y, nullptr) << tg_last_error();
        tg_tensor *gy = randn(tg_shape_of(y), TG_FLOAT32, false);
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, gy))), TG_OK) << tg_last_error();

        tg_tensor *x2 = detached_copy(x), *w2 = detached_copy(w), *b2 = detached_copy(b);
        tg_tensor *y2 = tg_conv2d(x2, block_diagonal(w2, s.c, s.m), b2, dense);
        ASSERT_NE(y2, nullptr) << tg_last_error();
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(y2, gy))), TG_OK) << tg_last_error();
        EXPECT_TRUE(close_as_gemm(values(y), values(y2))) << "forward";
        EXPECT_TRUE(close_as_gemm(values(tg_grad(x)), values(tg_grad(x2)))) << "input gradient";
        EXPECT_TRUE(close_as_gemm(values(tg_grad(w)), values(tg_grad(w2)))) << "weight gradient";
        EXPECT_TRUE(close_as_gemm(values(tg_grad(b)), values(tg_grad(b2)))) << "bias gradient";
    }
}

// The float32 kernels against the float64 ones on the same values (sums of up to a few
// thousand terms: float32 rounding, relative to the sum of the magnitudes).
TEST_F(TgTest, DepthwiseFloat32MatchesFloat64) {
    tg_manual_seed(33);
    for (const Shape &s : shapes) {
        tg_conv_opts o = s.opts;
        o.groups = (int)s.c;
        tg_tensor *x = randn(TG_SHAPE(s.n, s.c, s.h, s.w), TG_FLOAT32);
        tg_tensor *w = randn(TG_SHAPE(s.c * s.m, 1, s.kh, s.kw), TG_FLOAT32);
        tg_tensor *gy = nullptr;
        Result r32{}, r64{};
        for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
            tg_tensor *xd = detached_copy(tg_cast(x, dt)), *wd = detached_copy(tg_cast(w, dt));
            tg_tensor *y = tg_conv2d(xd, wd, nullptr, o);
            ASSERT_NE(y, nullptr) << tg_last_error();
            if (!gy) gy = randn(tg_shape_of(y), TG_FLOAT32, false);
            (dt == TG_FLOAT32 ? r32 : r64) = run(xd, wd, nullptr, tg_cast(gy, dt), o);
        }
        EXPECT_TRUE(tensor_near(r32.y, values(r64.y), 1e-5, 1e-5));
        EXPECT_TRUE(tensor_near(r32.gx, values(r64.gx), 1e-5, 1e-5));
        EXPECT_TRUE(tensor_near(r32.gw, values(r64.gw), 2e-4, 1e-5));
    }
}

struct GcCase {
    tg_conv_opts opts;
    bool transpose_input; // feeds a non-contiguous input
};

tg_tensor *conv_gc(tg_tensor *const *in, void *user) {
    const GcCase *c = static_cast<const GcCase *>(user);
    tg_tensor *x = c->transpose_input ? tg_transpose(in[0], 2, 3) : in[0];
    return tg_conv2d(x, in[1], in[2], c->opts);
}

TEST_F(TgTest, DepthwiseGradcheck) {
    tg_manual_seed(34);
    // x [N, C, H, W] (transposed for the second: the input is [2, 3, 5, 6]), w [C*m, 1, kH, kW].
    GcCase plain = {tg_conv_opts{.padding = 1, .groups = 3}, false};
    GcCase strided = {tg_conv_opts{.groups = 3, .strides = {2, 1}, .paddings = {1, 2}, .dilations = {1, 2}}, true};
    GcCase pointwise = {tg_conv_opts{.groups = 2}, false};
    struct {
        GcCase *c;
        tg_shape x, w;
    } cases[] = {{&plain, TG_SHAPE(2, 3, 4, 5), TG_SHAPE(3, 1, 3, 3)},
                 {&strided, TG_SHAPE(2, 3, 6, 5), TG_SHAPE(6, 1, 3, 2)},
                 {&pointwise, TG_SHAPE(1, 2, 3, 3), TG_SHAPE(6, 1, 1, 1)}};
    for (auto &k : cases) {
        tg_tensor *in[] = {randn(k.x, TG_FLOAT64), randn(k.w, TG_FLOAT64), randn(TG_SHAPE(k.w.dims[0]), TG_FLOAT64)};
        tg_gradcheck_opts o = {};
        o.user = k.c;
        EXPECT_EQ(tg_gradcheck(conv_gc, 3, in, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(conv_gc, 3, in, &o), TG_OK) << tg_last_error();
    }
}

std::vector<uint32_t> bits(tg_tensor *t) {
    std::vector<double> v = values(t);
    std::vector<uint32_t> out(v.size());
    for (size_t i = 0; i < v.size(); i++) {
        float f = (float)v[i];
        std::memcpy(&out[i], &f, sizeof f);
    }
    return out;
}

// Forward and both gradients of a conv big enough to be split over the pool, float32, on
// 1, 2, 3 and 5 threads: the same bits.
TEST_F(TgTest, DepthwiseSameBitsOnAnyThreadCount) {
    int saved = tg_get_num_threads();
    tg_manual_seed(35);
    tg_tensor *x = randn(TG_SHAPE(5, 6, 33, 31), TG_FLOAT32, false);
    tg_tensor *w = randn(TG_SHAPE(12, 1, 3, 3), TG_FLOAT32, false);
    tg_tensor *b = randn(TG_SHAPE(12), TG_FLOAT32, false);
    tg_tensor *gy = nullptr;
    std::vector<std::vector<uint32_t>> first;
    for (int threads : {1, 2, 3, 5}) {
        SCOPED_TRACE(threads);
        tg_set_num_threads(threads);
        tg_tensor *xs = detached_copy(x), *ws = detached_copy(w), *bs = detached_copy(b);
        tg_conv_opts o = {.padding = 1, .groups = 6, .strides = {1, 2}};
        tg_tensor *y = tg_conv2d(xs, ws, bs, o);
        ASSERT_NE(y, nullptr) << tg_last_error();
        if (!gy) gy = randn(tg_shape_of(y), TG_FLOAT32, false);
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, gy))), TG_OK) << tg_last_error();
        std::vector<std::vector<uint32_t>> now = {bits(y), bits(tg_grad(xs)), bits(tg_grad(ws)), bits(tg_grad(bs))};
        if (first.empty()) first = now;
        else EXPECT_TRUE(now == first) << "results differ from 1 thread's";
    }
    tg_set_num_threads(saved);
}

// float16 (and bfloat16 without AVX512-BF16) run the float32 op on widened copies, rounded
// once: the depthwise kernels' float32 result rounded.
TEST_F(TgTest, DepthwiseLowPrecisionIsFloat32Rounded) {
    tg_manual_seed(36);
    tg_tensor *x = tg_cast(randn(TG_SHAPE(2, 4, 6, 5), TG_FLOAT32, false), TG_FLOAT16);
    tg_tensor *w = tg_cast(randn(TG_SHAPE(8, 1, 3, 3), TG_FLOAT32, false), TG_FLOAT16);
    tg_conv_opts o = {.padding = 1, .groups = 4};
    tg_tensor *y = tg_conv2d(x, w, nullptr, o);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(y), TG_FLOAT16);
    tg_tensor *want = tg_cast(tg_conv2d(tg_cast(x, TG_FLOAT32), tg_cast(w, TG_FLOAT32), nullptr, o), TG_FLOAT16);
    EXPECT_TRUE(tensor_near(y, values(want), 0));
}

// An unbatched [C, H, W] input, as PyTorch allows, is the batch of one.
TEST_F(TgTest, DepthwiseUnbatched) {
    tg_manual_seed(37);
    tg_tensor *x = randn(TG_SHAPE(3, 5, 6), TG_FLOAT32, false), *w = randn(TG_SHAPE(6, 1, 3, 3), TG_FLOAT32, false);
    tg_conv_opts o = {.stride = 2, .padding = 1, .groups = 3};
    tg_tensor *y = tg_conv2d(x, w, nullptr, o);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(dims(y), (std::vector<int64_t>{6, 3, 3}));
    EXPECT_TRUE(tensor_near(y, values(tg_conv2d(tg_unsqueeze(x, 0), w, nullptr, o)), 0));
}

} // namespace
