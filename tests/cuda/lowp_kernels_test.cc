// float16 / bfloat16 CUDA kernels (ops/cuda/elementwise.cu, ops/cuda/reduce.cu's sum)
// against the CPU. Both widen each element to float32, compute the same row of
// ops/unary_formulas.h / ops/binary_formulas.h and round once with core/lowp.h, so
// arithmetic that IEEE float32 rounds correctly on both devices (+, -, *, /, sqrt,
// max, comparisons, the scalar ops) must give the same bits; transcendental functions
// (CUDA's libm and glibc differ by an ulp or two of float32) within one ulp of the
// dtype. Gradients (written with the same ops) likewise. Skipped without a GPU.
#include <cmath>

#include "cuda_test_util.h"
#include "ops/cuda/runtime.h"

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

}  // namespace
