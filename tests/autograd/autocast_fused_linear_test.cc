// tg_linear under CPU bfloat16 autocast on float32 parameters fuses the casts of the weight
// and bias into the bfloat16 products (ops/matmul.c): the output and every gradient must be
// the bits of the composition linear(cast(x), cast(w), cast(b)) computed outside autocast,
// on both bfloat16 kernels, for the kernel's rounding paths (k within one packed slice of
// 384 or 1024 and past it, for y, dx and dw), a 3-D input, no bias, and under create_graph.
#include <cstring>

#include "ops/cpu/gemm.h"
#include "test_util.h"

namespace {

struct Result {
    std::vector<double> y, gx, gw, gb;
    std::string grad_fn;
};

// One forward and backward of sum(y * r); fused: under autocast, else explicit casts.
Result run(bool fused, tg_tensor *x, tg_tensor *w, tg_tensor *b, tg_tensor *r) {
    Result res;
    TG_SCOPE {
        tg_tensor *xs = tg_requires_grad_(tg_clone(x), true), *ws = tg_requires_grad_(tg_clone(w), true);
        tg_tensor *bs = b ? tg_requires_grad_(tg_clone(b), true) : nullptr;
        tg_tensor *y = nullptr;
        if (fused) {
            TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) { y = tg_linear(xs, ws, bs); }
        } else {
            y = tg_linear(tg_cast(xs, TG_BFLOAT16), tg_cast(ws, TG_BFLOAT16), bs ? tg_cast(bs, TG_BFLOAT16) : nullptr);
        }
        EXPECT_NE(y, nullptr) << tg_last_error();
        if (!y) return res;
        EXPECT_EQ(tg_dtype_of(y), TG_BFLOAT16);
        res.grad_fn = tg_grad_fn_name(y);
        EXPECT_EQ(tg_backward(tg_sum(tg_mul(tg_cast(y, TG_FLOAT32), r))), TG_OK) << tg_last_error();
        res.y = values(y);
        res.gx = values(tg_grad(xs));
        res.gw = values(tg_grad(ws));
        EXPECT_EQ(tg_dtype_of(tg_grad(ws)), TG_FLOAT32);
        if (bs) res.gb = values(tg_grad(bs));
    }
    return res;
}

bool same_bits(const std::vector<double> &a, const std::vector<double> &b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

} // namespace

TEST_F(TgTest, AutocastLinearOnFloat32WeightsIsTheCompositionBitForBit) {
    if (!tg_gemm_bf16_supported()) GTEST_SKIP() << "no AVX512-BF16 on this CPU: autocast's linear is not fused";
    struct Case {
        tg_shape x, w;
        bool bias;
    } cases[] = {
        {TG_SHAPE(64, 784), TG_SHAPE(1024, 784), true}, // the MLP's first layer: k = 784, 1024 for dx
        {TG_SHAPE(64, 128), TG_SHAPE(10, 128), true},   // its last: everything within one slice
        {TG_SHAPE(5, 7), TG_SHAPE(3, 7), false},        // tile edges, no bias
        {TG_SHAPE(2, 3, 40), TG_SHAPE(50, 40), true},   // a 3-D input
        {TG_SHAPE(400, 20), TG_SHAPE(30, 20), true},    // dw's k = 400 rows
        {TG_SHAPE(9, 1100), TG_SHAPE(40, 1100), true},  // the forward's k past either kernel's slice
        {TG_SHAPE(1030, 20), TG_SHAPE(33, 20), true},   // dw's k = 1030 rows, past either slice
    };
    bool was = tg_gemm_bf16_set_amx(false);
    for (bool amx : {false, true}) {
        if (amx && !tg_gemm_bf16_amx_available()) continue;
        tg_gemm_bf16_set_amx(amx);
        unsigned seed = 1;
        for (const Case &c : cases) {
            tg_manual_seed(seed++);
            tg_tensor *x = tg_randn(c.x, tg_opts{}), *w = tg_randn(c.w, tg_opts{});
            tg_tensor *b = c.bias ? tg_randn(TG_SHAPE(c.w.dims[0]), tg_opts{}) : nullptr;
            tg_shape ys = c.x;
            ys.dims[ys.ndim - 1] = c.w.dims[0];
            tg_tensor *r = tg_randn(ys, tg_opts{});
            Result fused = run(true, x, w, b, r), reference = run(false, x, w, b, r);
            std::string what = std::string(amx ? "AMX" : "AVX512-BF16") + ", weight " + std::to_string(c.w.dims[0]) +
                               " x " + std::to_string(c.w.dims[1]);
            EXPECT_EQ(fused.grad_fn, "linear") << what;
            EXPECT_FALSE(fused.y.empty()) << what;
            EXPECT_TRUE(same_bits(fused.y, reference.y)) << what;
            EXPECT_TRUE(same_bits(fused.gx, reference.gx)) << what;
            EXPECT_TRUE(same_bits(fused.gw, reference.gw)) << what;
            EXPECT_TRUE(same_bits(fused.gb, reference.gb)) << what;
        }
    }
    tg_gemm_bf16_set_amx(was);
}

// With create_graph the fused op's backward is built from ops, so a gradient of the
// gradient exists and equals the composition's.
TEST_F(TgTest, AutocastLinearOnFloat32WeightsHasASecondDerivative) {
    if (!tg_gemm_bf16_supported()) GTEST_SKIP() << "no AVX512-BF16 on this CPU: autocast's linear is not fused";
    std::vector<double> result[2];
    for (int fused = 0; fused < 2; fused++) TG_SCOPE {
            tg_manual_seed(9);
            tg_tensor *x = tg_requires_grad_(tg_randn(TG_SHAPE(6, 5), tg_opts{}), true);
            tg_tensor *w = tg_requires_grad_(tg_randn(TG_SHAPE(4, 5), tg_opts{}), true);
            tg_tensor *y = nullptr;
            if (fused) {
                TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) { y = tg_linear(x, w, nullptr); }
            } else {
                y = tg_linear(tg_cast(x, TG_BFLOAT16), tg_cast(w, TG_BFLOAT16), nullptr);
            }
            tg_tensor *loss = tg_sum(tg_square(tg_cast(y, TG_FLOAT32)));
            tg_tensor *gw = nullptr;
            ASSERT_EQ(tg_grad_of(&loss, nullptr, 1, &w, 1, &gw, tg_backward_opts{.create_graph = true}), TG_OK)
                << tg_last_error();
            ASSERT_TRUE(gw && tg_requires_grad(gw));
            ASSERT_EQ(tg_backward(tg_sum(tg_square(gw))), TG_OK) << tg_last_error();
            result[fused] = values(tg_grad(x));
        }
    EXPECT_TRUE(same_bits(result[0], result[1]));
    EXPECT_GT(result[0].size(), 0u);
}
