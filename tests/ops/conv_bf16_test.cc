// bfloat16 conv2d (ops/conv.c): the bf16 kernels (im2col in bfloat16, the AVX512-BF16
// GEMM summing in float32, each result rounded once) forward and for both gradients,
// against PyTorch 1.13's bfloat16 convolution (oneDNN: float32 sums, rounded once) and
// against tapegrad's float32 convolution of the same bfloat16 values, rounded once;
// second derivatives; autocast; the same bits on 1 and 2 threads; float16 (always the
// float32 op on widened copies) exactly the float32 result rounded once. On a CPU
// without AVX512-BF16 the same checks run the float32 fallback.
#include <cmath>
#include <string>

#include "core/lowp.h"
#include "ops/cpu/gemm.h"
#include "test_util.h"

namespace {

class ConvBf16Test : public TgTest {};

const std::map<std::string, FixtureTensor> &fixtures() {
    static const auto f = load_fixtures("tests/fixtures/conv_bf16.txt");
    return f;
}
const FixtureTensor &fx(const std::string &name) { return fixture_tensor(fixtures(), name); }

double max_abs(const std::vector<double> &v) {
    double m = 0;
    for (double x : v) m = std::fabs(x) > m ? std::fabs(x) : m;
    return m;
}

// Two float32 sums of the same exact products, each rounded once to bfloat16, differ by at
// most one ulp of the element (2^-7 relative at worst) unless they cancel; then by the
// float32 summation error, far below 2^-12 of the largest value.
::testing::AssertionResult bf16_near(tg_tensor *t, const std::vector<double> &want) {
    return tensor_near(t, want, std::ldexp(max_abs(want), -12), std::ldexp(1.0, -7));
}

struct ConvCase {
    std::string name;
    tg_conv_opts opts;
};

const std::vector<ConvCase> cases = {
    {"basic", tg_conv_opts{.stride = 1, .padding = 1}},
    {"strided", tg_conv_opts{.stride = 2, .padding = 1, .dilation = 2}},
    {"groups", tg_conv_opts{.groups = 2}},
    {"wide", tg_conv_opts{.padding = 1}},
};

struct Result {
    tg_tensor *y, *gx, *gw, *gb;
};

// conv2d of (x, w, b) in `dt`, and the gradients of sum(y * gy).
Result run(const std::string &c, tg_conv_opts opts, tg_dtype dt) {
    bool bias = fixtures().count(c + "_b") > 0;
    tg_tensor *x = fx(c + "_x").make(dt, true), *w = fx(c + "_w").make(dt, true);
    tg_tensor *b = bias ? fx(c + "_b").make(dt, true) : nullptr;
    tg_tensor *y = tg_conv2d(x, w, b, opts);
    EXPECT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(y), dt);
    EXPECT_EQ(tg_backward(tg_sum(tg_mul(y, fx(c + "_gy").make(dt)))), TG_OK) << tg_last_error();
    return {y, tg_grad(x), tg_grad(w), b ? tg_grad(b) : nullptr};
}

TEST_F(ConvBf16Test, MatchesPyTorchBfloat16) {
    for (const ConvCase &c : cases) {
        SCOPED_TRACE(c.name);
        Result r = run(c.name, c.opts, TG_BFLOAT16);
        EXPECT_EQ(tg_dtype_of(r.gx), TG_BFLOAT16);
        EXPECT_EQ(tg_dtype_of(r.gw), TG_BFLOAT16);
        EXPECT_TRUE(bf16_near(r.y, fx(c.name + "_y").data)) << "forward";
        EXPECT_TRUE(bf16_near(r.gx, fx(c.name + "_gx").data)) << "input gradient";
        EXPECT_TRUE(bf16_near(r.gw, fx(c.name + "_gw").data)) << "weight gradient";
        if (r.gb) {
            EXPECT_TRUE(bf16_near(r.gb, fx(c.name + "_gb").data)) << "bias gradient";
        }
    }
}

// The float32 convolution of the same bfloat16 values, rounded once: the reference
// the kernels must meet up to float32 summation order.
TEST_F(ConvBf16Test, IsTheFloat32ConvolutionRoundedOnce) {
    for (const ConvCase &c : cases) {
        SCOPED_TRACE(c.name);
        Result lo = run(c.name, c.opts, TG_BFLOAT16), hi = run(c.name, c.opts, TG_FLOAT32);
        EXPECT_TRUE(bf16_near(lo.y, values(tg_cast(hi.y, TG_BFLOAT16))));
        EXPECT_TRUE(bf16_near(lo.gx, values(tg_cast(hi.gx, TG_BFLOAT16))));
        EXPECT_TRUE(bf16_near(lo.gw, values(tg_cast(hi.gw, TG_BFLOAT16))));
        if (lo.gb) {
            EXPECT_EQ(values(lo.gb), values(tg_cast(hi.gb, TG_BFLOAT16)));
        } /* one float32 sum */
    }
}

// Calls large enough that the batch is split over the thread pool's tasks (each a bf16
// GEMM of its own) or, on one thread, cut into several im2col chunks whose weight-gradient
// GEMMs add up: LeNet's second convolution at batch 8 (C*kH*kW = 500), and 6 images of
// 16 x 32 x 32 (3 images per 1 MiB chunk).
TEST_F(ConvBf16Test, LargeCallsMatchFloat32AndDoNotDependOnThreads) {
    struct Geometry {
        tg_shape x, w;
        int padding;
    };
    for (const Geometry &geo : {Geometry{TG_SHAPE(8, 20, 12, 12), TG_SHAPE(50, 20, 5, 5), 0},
                                Geometry{TG_SHAPE(6, 16, 32, 32), TG_SHAPE(16, 16, 3, 3), 1}})
        TG_SCOPE {
            SCOPED_TRACE(geo.x.dims[0]);
            tg_manual_seed(3);
            tg_tensor *x32 = tg_randn(geo.x, tg_opts{}), *w32 = tg_randn(geo.w, tg_opts{});
            // Fresh leaves holding the bfloat16 values, in dt (float32: the reference).
            auto leaf = [](tg_tensor *t, tg_dtype dt) {
                return tg_requires_grad_(tg_cast(tg_cast(t, TG_BFLOAT16), dt), true);
            };
            tg_shape y_shape = tg_shape_of(tg_conv2d(x32, w32, nullptr, tg_conv_opts{.padding = geo.padding}));
            tg_tensor *gy = tg_cast(tg_cast(tg_randn(y_shape, tg_opts{}), TG_BFLOAT16), TG_FLOAT32);
            auto grads = [&](tg_dtype dt) {
                tg_tensor *xi = leaf(x32, dt), *wi = leaf(w32, dt);
                tg_tensor *y = tg_conv2d(xi, wi, nullptr, tg_conv_opts{.padding = geo.padding});
                EXPECT_EQ(tg_backward(tg_sum(tg_mul(y, tg_cast(gy, dt)))), TG_OK) << tg_last_error();
                return std::vector<tg_tensor *>{y, tg_grad(xi), tg_grad(wi)};
            };
            int threads = tg_get_num_threads();
            tg_set_num_threads(2);
            std::vector<tg_tensor *> two = grads(TG_BFLOAT16), ref = grads(TG_FLOAT32);
            tg_set_num_threads(1);
            std::vector<tg_tensor *> one = grads(TG_BFLOAT16);
            tg_set_num_threads(threads);
            for (int i = 0; i < 3; i++) {
                SCOPED_TRACE(i);
                EXPECT_TRUE(bf16_near(two[i], values(tg_cast(ref[i], TG_BFLOAT16))));
                EXPECT_TRUE(bf16_near(one[i], values(tg_cast(ref[i], TG_BFLOAT16))));
            }
            // Each output and input-gradient element is one GEMM sum in k order whatever the
            // threads; the weight gradient adds per-task partial sums (docs/design.md, Threads).
            EXPECT_EQ(values(one[0]), values(two[0]));
            EXPECT_EQ(values(one[1]), values(two[1]));
        }
}

// The bias gradient of a bfloat16 output gradient is summed from the 2-byte elements
// (ops/conv.c, bias_grad_bf16) in the float32 path's order: the bits of the float32
// sums of the widened gradient, over a call split by channels over the thread pool.
TEST_F(ConvBf16Test, BiasGradientIsTheFloat32SumOfTheWidenedGradient) {
    tg_manual_seed(5);
    tg_tensor *x32 = tg_cast(tg_cast(tg_randn(TG_SHAPE(8, 3, 28, 28), tg_opts{}), TG_BFLOAT16), TG_FLOAT32);
    tg_tensor *w32 = tg_cast(tg_cast(tg_randn(TG_SHAPE(20, 3, 5, 5), tg_opts{}), TG_BFLOAT16), TG_FLOAT32);
    tg_tensor *gy = tg_cast(tg_cast(tg_randn(TG_SHAPE(8, 20, 24, 24), tg_opts{}), TG_BFLOAT16), TG_FLOAT32);
    std::vector<tg_tensor *> gb;
    for (tg_dtype dt : {TG_BFLOAT16, TG_FLOAT32}) {
        tg_tensor *b = tg_requires_grad_(tg_zeros(TG_SHAPE(20), tg_opts{.dtype = dt}), true);
        tg_tensor *y = tg_conv2d(tg_cast(x32, dt), tg_cast(w32, dt), b, tg_conv_opts{});
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, tg_cast(gy, dt)))), TG_OK) << tg_last_error();
        gb.push_back(tg_grad(b));
    }
    EXPECT_EQ(tg_dtype_of(gb[0]), TG_BFLOAT16);
    EXPECT_EQ(values(gb[0]), values(tg_cast(gb[1], TG_BFLOAT16)));
}

// The same sums where their order shows. Each image row holds +-1 and 2 (its sum a small
// integer, exact in bfloat16), a +2^100 and a later -2^100 (the small elements between them
// are absorbed, so moving any element across either changes the sum), and +2^25 in even
// images, -2^25 in odd ones but the last (the rounding to float32 after each image drops the row's
// small part, its omission would not). Against the documented order written out here
// (double per image row in index order, rounded to float32, added in double in image
// order, rounded to float32), with 7 images (4 + 3 per vector pass), 11 channels (8 + 3
// lanes) and rows of 35 (four blocks of 8 and 3 more), on 1 and 2 threads.
TEST_F(ConvBf16Test, BiasGradientKeepsTheFloat32PathsOrder) {
    const int64_t N = 7, C = 11, H = 5, W = 7, L = H * W;
    const float small[] = {1.0f, -1.0f, 2.0f, -1.0f};
    std::vector<uint16_t> g((size_t)(N * C * L));
    uint32_t state = 12345;
    auto next = [&](uint32_t n) {
        state = state * 1664525u + 1013904223u;
        return (state >> 8) % n;
    };
    for (int64_t r = 0; r < N * C; r++) {
        uint16_t *row = g.data() + r * L;
        for (int64_t i = 0; i < L; i++) row[i] = tg_float_to_bf16_bits(small[next(4)]);
        int64_t p1 = next((uint32_t)L - 2), p2 = p1 + 1 + next((uint32_t)(L - p1 - 2)), q = (p2 + 1) % L;
        row[p1] = tg_float_to_bf16_bits(0x1p100f);
        row[p2] = tg_float_to_bf16_bits(-0x1p100f);
        if (r / C < N - 1) row[q] = tg_float_to_bf16_bits((r / C) % 2 ? -0x1p25f : 0x1p25f); /* pairs cancel */
    }
    std::vector<uint16_t> want((size_t)C);
    for (int64_t c = 0; c < C; c++) {
        double total = 0;
        for (int64_t b = 0; b < N; b++) {
            double row = 0;
            for (int64_t i = 0; i < L; i++) row += tg_bf16_bits_to_float(g[(size_t)((b * C + c) * L + i)]);
            total += (float)row;
        }
        want[(size_t)c] = tg_float_to_bf16_bits((float)total);
    }
    tg_tensor *gy = tg_from_data(g.data(), TG_SHAPE(N, C, H, W), tg_opts{TG_BFLOAT16});
    tg_tensor *x = tg_ones(TG_SHAPE(N, 1, H, W), tg_opts{TG_BFLOAT16});
    tg_tensor *w = tg_ones(TG_SHAPE(C, 1, 1, 1), tg_opts{TG_BFLOAT16});
    int saved = tg_get_num_threads();
    for (int threads : {1, 2}) {
        tg_set_num_threads(threads);
        tg_tensor *b = tg_requires_grad_(tg_zeros(TG_SHAPE(C), tg_opts{TG_BFLOAT16}), true);
        ASSERT_EQ(tg_backward_with(tg_conv2d(x, w, b, tg_conv_opts{}), gy), TG_OK) << tg_last_error();
        std::vector<uint16_t> got((size_t)C);
        ASSERT_EQ(tg_copy_to_host(tg_grad(b), got.data(), got.size() * 2), TG_OK);
        EXPECT_EQ(got, want) << threads << " thread(s)";
    }
    tg_set_num_threads(saved);
}

// Double backward runs the three bf16 functions on each other's outputs (ops/conv.c's
// adjoint identities); against the same computation in float32.
TEST_F(ConvBf16Test, SecondDerivativesMatchFloat32) {
    auto second = [&](tg_dtype dt) {
        tg_tensor *x = fx("strided_x").make(dt, true), *w = fx("strided_w").make(dt, true);
        tg_tensor *y = tg_conv2d(x, w, nullptr, tg_conv_opts{.stride = 2, .padding = 1, .dilation = 2});
        tg_tensor *gy = fx("strided_gy").make(dt);
        tg_tensor *g[2] = {nullptr, nullptr}, *wrt[2] = {x, w};
        EXPECT_EQ(tg_grad_of(&y, &gy, 1, wrt, 2, g, tg_backward_opts{.create_graph = true}), TG_OK) << tg_last_error();
        // d/dx and d/dw of sum(gx^2) + sum(gw^2): every cross term of the bilinear op.
        tg_tensor *s = tg_add(tg_sum(tg_mul(g[0], g[0])), tg_sum(tg_mul(g[1], g[1])));
        EXPECT_EQ(tg_backward(tg_cast(s, TG_FLOAT32)), TG_OK) << tg_last_error();
        return std::vector<tg_tensor *>{tg_grad(x), tg_grad(w)};
    };
    std::vector<tg_tensor *> lo = second(TG_BFLOAT16), hi = second(TG_FLOAT32);
    for (int i = 0; i < 2; i++) {
        ASSERT_NE(lo[i], nullptr);
        EXPECT_EQ(tg_dtype_of(lo[i]), TG_BFLOAT16);
        // gx and gw are rounded to bfloat16 before they are squared: a few ulps.
        std::vector<double> want = values(hi[i]);
        EXPECT_TRUE(tensor_near(lo[i], want, std::ldexp(max_abs(want), -7), std::ldexp(1.0, -5))) << i;
    }
}

TEST_F(ConvBf16Test, AutocastMatchesPyTorch) {
    tg_tensor *x = fx("autocast_x").make(TG_FLOAT32, true), *w = fx("autocast_w").make(TG_FLOAT32, true);
    tg_tensor *b = fx("autocast_b").make(TG_FLOAT32, true);
    tg_tensor *y = nullptr;
    TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) { y = tg_conv2d(x, w, b, tg_conv_opts{.padding = 1}); }
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(y), TG_BFLOAT16);
    EXPECT_TRUE(bf16_near(y, fx("autocast_y").data));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(tg_cast(y, TG_FLOAT32), fx("autocast_gy").make(TG_FLOAT32)))), TG_OK)
        << tg_last_error();
    // float32 leaves get float32 gradients: the bf16 ones, widened by the casts' backward.
    for (auto [t, name] : {std::pair{x, "gx"}, {w, "gw"}, {b, "gb"}}) {
        SCOPED_TRACE(name);
        EXPECT_EQ(tg_dtype_of(tg_grad(t)), TG_FLOAT32);
        EXPECT_TRUE(bf16_near(tg_grad(t), fx(std::string("autocast_") + name).data));
    }
}

// float16 has no CPU kernel of its own: the float32 op on widened copies, rounded once.
TEST_F(ConvBf16Test, Float16IsTheFloat32ResultRoundedOnce) {
    Result lo = run("basic", cases[0].opts, TG_FLOAT16), hi = run("basic", cases[0].opts, TG_FLOAT32);
    EXPECT_EQ(values(lo.y), values(tg_cast(hi.y, TG_FLOAT16)));
    EXPECT_EQ(values(lo.gx), values(tg_cast(hi.gx, TG_FLOAT16)));
    EXPECT_EQ(values(lo.gw), values(tg_cast(hi.gw, TG_FLOAT16)));
    EXPECT_EQ(values(lo.gb), values(tg_cast(hi.gb, TG_FLOAT16)));
}

TEST_F(ConvBf16Test, TransposedConvolutionUsesTheSameKernels) {
    // conv_transpose2d is conv2d's input gradient: in bfloat16 it is the float32 one rounded once.
    tg_tensor *x = fx("basic_gy").make(TG_FLOAT32), *w = fx("basic_w").make(TG_FLOAT32);
    tg_tensor *lo = tg_conv_transpose2d(tg_cast(x, TG_BFLOAT16), tg_cast(w, TG_BFLOAT16), nullptr,
                                        tg_conv_transpose_opts{.padding = 1});
    tg_tensor *hi = tg_conv_transpose2d(x, w, nullptr, tg_conv_transpose_opts{.padding = 1});
    ASSERT_NE(lo, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(lo), TG_BFLOAT16);
    EXPECT_TRUE(bf16_near(lo, values(tg_cast(hi, TG_BFLOAT16))));
}

TEST_F(ConvBf16Test, MixedDtypesAreRefused) {
    tg_tensor *x = tg_zeros(TG_SHAPE(1, 2, 4, 4), tg_opts{TG_BFLOAT16});
    tg_tensor *w = tg_zeros(TG_SHAPE(3, 2, 3, 3), tg_opts{TG_FLOAT32});
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(x, w, nullptr, tg_conv_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_conv2d: expected input, weight and bias of one floating dtype, got input bfloat16, "
                          "weight float32");
}

} // namespace
