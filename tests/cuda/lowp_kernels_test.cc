// float16 / bfloat16 CUDA kernels (ops/cuda/elementwise.cu, ops/cuda/reduce.cu's sum)
// against the CPU. Both widen each element to float32, compute the same row of
// ops/unary_formulas.h / ops/binary_formulas.h and round once with core/lowp.h, so
// arithmetic that IEEE float32 rounds correctly on both devices (+, -, *, /, sqrt,
// max, comparisons, the scalar ops) must give the same bits; transcendental functions
// (CUDA's libm and glibc differ by an ulp or two of float32) within one ulp of the
// dtype. Gradients (written with the same ops) likewise. And the AMP recipe's steps
// (autocast, GradScaler, SGD on float32 master weights) against the CPU's. Skipped
// without a GPU.
#include <cmath>

#include "cuda_test_util.h"
#include "core/cuda/runtime.h"

namespace {

double ulp_of(tg_dtype dt) { return dt == TG_BFLOAT16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10); }

TEST_F(TgTest, CudaLowPrecisionArithmeticIsBitExact) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_FLOAT16, TG_BFLOAT16}) {
        SCOPED_TRACE(tg_dtype_name(dt));
        CompareOpts exact;
        exact.atol = exact.rtol = 0;
        tg_tensor *a = random_cpu(TG_SHAPE(33, 17), dt, 1), *b = random_cpu(TG_SHAPE(33, 17), dt, 2);
        tg_tensor *row = random_cpu(TG_SHAPE(17), dt, 3), *pos = random_cpu(TG_SHAPE(33, 17), dt, 4, 0.25, 4);
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_add(in[0], in[1]); }, {a, b}, exact));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_sub(in[0], in[1]); }, {a, b}, exact));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_mul(in[0], in[1]); }, {a, b}, exact));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_div(in[0], in[1]); }, {a, pos}, exact));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_maximum(in[0], in[1]); }, {a, b}, exact));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_sqrt(in[0]); }, {pos}, exact));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_relu(in[0]); }, {a}, exact));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_neg(in[0]); }, {a}, exact));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_abs(in[0]); }, {a}, exact));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_mul_scalar(in[0], 0.1); }, {a}, exact));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_add_scalar(in[0], 1.7); }, {a}, exact));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_clamp(in[0], -0.5, 0.75); }, {a}, exact));
        // Broadcast (a row) and strided (transposed) operands: the general kernels.
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_mul(in[0], in[1]); }, {a, row}, exact));
        EXPECT_TRUE(compare_devices(
            [](auto &in) { return tg_add(tg_transpose(in[0], 0, 1), tg_transpose(in[1], 0, 1)); }, {a, b}, exact));
        // Comparisons give bool.
        exact.grads = false;
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_gt(in[0], in[1]); }, {a, b}, exact));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_eq(in[0], in[0]); }, {a}, exact));
        tg_tensor *g = tg_gt(on_cuda(a), on_cuda(b));
        ASSERT_NE(g, nullptr) << tg_last_error();
        EXPECT_EQ(tg_dtype_of(g), TG_BOOL);
    }
}

TEST_F(TgTest, CudaLowPrecisionTranscendentalsWithinAnUlp) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_FLOAT16, TG_BFLOAT16}) {
        SCOPED_TRACE(tg_dtype_name(dt));
        CompareOpts o;
        o.rtol = ulp_of(dt);
        o.atol = 1e-6;
        tg_tensor *a = random_cpu(TG_SHAPE(40, 25), dt, 5), *pos = random_cpu(TG_SHAPE(40, 25), dt, 6, 0.25, 4);
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_exp(in[0]); }, {a}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_log(in[0]); }, {pos}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_tanh(in[0]); }, {a}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_sigmoid(in[0]); }, {a}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_gelu(in[0]); }, {a}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_pow(in[0], in[1]); }, {pos, a}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_pow_scalar(in[0], 1.5); }, {pos}, o));
    }
}

TEST_F(TgTest, CudaLowPrecisionSumAndMeanMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_FLOAT16, TG_BFLOAT16}) {
        SCOPED_TRACE(tg_dtype_name(dt));
        // Both sum in double and round through float32 once; the order of the double sums
        // differs, which moves a result by far less than an ulp of the dtype.
        CompareOpts o;
        o.rtol = ulp_of(dt);
        o.atol = 1e-3;
        tg_tensor *a = random_cpu(TG_SHAPE(37, 29), dt, 8, 0, 1);
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_sum(in[0]); }, {a}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_sum_dim(in[0], 0, false); }, {a}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_sum_dim(in[0], 1, true); }, {a}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_mean_dim(in[0], 1, false); }, {a}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_mean(in[0]); }, {a}, o));
        // Long enough for the split (two-pass) reduction; float16's sum stays finite (< 65504).
        tg_tensor *big = random_cpu(TG_SHAPE(200000), dt, 9, 0, 0.5);
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_sum(in[0]); }, {big}, o));
        tg_tensor *s = tg_sum(on_cuda(a));
        ASSERT_NE(s, nullptr) << tg_last_error();
        EXPECT_EQ(tg_dtype_of(s), dt);
    }
}

// The AMP recipe on CUDA: float32 parameters, a bfloat16 autocast forward, the GradScaler
// and SGD. Gradients come back float32 through the recorded casts, so the optimizer
// kernels (optim/cuda/optim.cu) update float32 master weights; the steps must move the
// parameters as the CPU's steps do (the two bfloat16 GEMMs differ by rounding only).
TEST_F(TgTest, CudaAutocastStepsUpdateFloat32MasterWeights) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(16, 8), TG_FLOAT32, 11);
    tg_tensor *y = tensor_i64({0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}, TG_SHAPE(16));
    std::vector<tg_tensor *> before, after[2];
    for (int cuda = 0; cuda < 2; cuda++) {
        tg_manual_seed(5);
        tg_module *model = tg_nn_linear(8, 4, tg_linear_opts{});
        ASSERT_NE(model, nullptr) << tg_last_error();
        tg_device dev = cuda ? tg_cuda(0) : TG_CPU;
        ASSERT_EQ(tg_module_to(model, dev), TG_OK) << tg_last_error();
        if (!cuda) TG_NO_GRAD {
                for (const char *n : {"weight", "bias"}) before.push_back(tg_clone(tg_module_param(model, n)));
            }
        tg_optim *opt = tg_sgd(model, tg_sgd_opts{.lr = 0.5});
        tg_grad_scaler *scaler = tg_grad_scaler_new(opt, tg_grad_scaler_opts{});
        ASSERT_TRUE(opt && scaler) << tg_last_error();
        tg_tensor *xd = tg_tensor_to(x, dev), *yd = tg_tensor_to(y, dev);
        for (int step = 0; step < 3; step++) TG_SCOPE {
                tg_tensor *loss = nullptr;
                TG_AUTOCAST(cuda ? TG_DEVICE_CUDA : TG_DEVICE_CPU, TG_BFLOAT16) {
                    loss = tg_cross_entropy(tg_forward(model, xd), yd);
                }
                ASSERT_NE(loss, nullptr) << tg_last_error();
                ASSERT_EQ(tg_backward(tg_grad_scaler_scale(scaler, loss)), TG_OK) << tg_last_error();
                EXPECT_EQ(tg_dtype_of(tg_grad(tg_module_param(model, "weight"))), TG_FLOAT32);
                bool skipped = true;
                ASSERT_EQ(tg_grad_scaler_step(scaler, opt, &skipped), TG_OK) << tg_last_error();
                EXPECT_FALSE(skipped);
                ASSERT_EQ(tg_grad_scaler_update(scaler), TG_OK) << tg_last_error();
                tg_optim_zero_grad(opt);
            }
        for (const char *n : {"weight", "bias"}) {
            tg_tensor *p = tg_module_param(model, n);
            EXPECT_EQ(tg_dtype_of(p), TG_FLOAT32);
            after[cuda].push_back(tg_tensor_to(p, TG_CPU));
        }
        tg_grad_scaler_free(scaler);
        tg_optim_free(opt);
        tg_module_free(model);
    }
    for (size_t i = 0; i < before.size(); i++) {
        // The parameters moved (by about 0.1), and by the same amounts on both devices.
        tg_tensor *moved_cpu = tg_sub(after[0][i], before[i]), *moved_cuda = tg_sub(after[1][i], before[i]);
        EXPECT_GT(tg_item(tg_amax(tg_abs(moved_cpu), nullptr, 0, false)), 1e-2);
        EXPECT_TRUE(tensor_near(moved_cuda, values(moved_cpu), 2e-3, 3e-2)) << i;
    }
}

} // namespace

// GradScaler's fused unscale on CUDA (optim/cuda/optim.cu, one device flag read once per
// step): every element multiplied by 1/scale, a non-finite element found in any gradient.
TEST_F(TgTest, CudaGradScalerUnscaleFindsInfAndNanAnywhere) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    expect_unscale_finds_inf_and_nan(tg_cuda(0)); // tests/test_util.h
}
