// float16 / bfloat16 on CUDA against the CPU: casts bit for bit (core/lowp.h is
// compiled by both), fills, matmul / linear through cublasGemmEx, ops computed in
// float32 (elementwise, softmax, sum, cross_entropy), all with their gradients, and CUDA autocast's lists (matmul in
// float16, softmax in float32, which the CPU list leaves alone). Skipped without a GPU.
#include <cstring>

#include "cuda_test_util.h"
#include "core/cuda/runtime.h"

namespace {

std::vector<uint16_t> bits16(tg_tensor *t) {
    std::vector<uint16_t> out((size_t)tg_numel(t));
    EXPECT_EQ(tg_copy_to_host(t, out.data(), out.size() * 2), TG_OK) << tg_last_error();
    return out;
}

TEST_F(TgTest, CudaLowPrecisionCastsMatchCpuBitForBit) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    // Every float32 pattern class: random bits (NaN, Inf, subnormals included).
    std::vector<uint32_t> raw(4096);
    uint32_t state = 12345;
    for (uint32_t &u : raw) u = state = state * 1664525u + 1013904223u;
    std::vector<float> xs(raw.size());
    std::memcpy(xs.data(), raw.data(), raw.size() * 4);
    tg_tensor *cpu = tensor_f32(xs, TG_SHAPE((int64_t)xs.size())), *gpu = on_cuda(cpu);
    for (tg_dtype dt : {TG_FLOAT16, TG_BFLOAT16}) {
        tg_tensor *c = tg_cast(cpu, dt), *g = tg_cast(gpu, dt);
        ASSERT_NE(g, nullptr) << tg_last_error();
        EXPECT_EQ(bits16(c), bits16(g)) << tg_dtype_name(dt);
        // And back, and through a transposed (strided) view.
        EXPECT_TRUE(same_values(tg_cast(c, TG_FLOAT32), tg_cast(g, TG_FLOAT32), 0, 0));
        tg_tensor *c2 = tg_reshape(c, TG_SHAPE(64, 64)), *g2 = tg_reshape(g, TG_SHAPE(64, 64));
        EXPECT_TRUE(same_values(tg_contiguous(tg_transpose(c2, 0, 1)), tg_contiguous(tg_transpose(g2, 0, 1)), 0, 0));
        EXPECT_TRUE(same_values(tg_cast(tg_cast(cpu, TG_FLOAT64), dt), tg_cast(tg_cast(gpu, TG_FLOAT64), dt), 0, 0));
        tg_tensor *f = tg_full(TG_SHAPE(5), 0.1, tg_opts{dt, tg_cuda(0)});
        EXPECT_EQ(bits16(f), bits16(tg_full(TG_SHAPE(5), 0.1, tg_opts{dt})));
    }
}

TEST_F(TgTest, CudaLowPrecisionOpsMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_FLOAT16, TG_BFLOAT16}) {
        CompareOpts o;
        o.atol = dt == TG_BFLOAT16 ? 2e-2 : 2e-3;
        o.rtol = o.atol;
        tg_tensor *a = random_cpu(TG_SHAPE(6, 5), dt, 1), *b = random_cpu(TG_SHAPE(5, 4), dt, 2);
        tg_tensor *c = random_cpu(TG_SHAPE(6, 5), dt, 3);
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_mul(tg_add(in[0], in[1]), in[0]); }, {a, c}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_sigmoid(in[0]); }, {a}, o));
        // cublasGemmEx (float32 accumulation) against the CPU's float32 GEMM rounded once.
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_matmul(in[0], in[1]); }, {a, b}, o));
        tg_tensor *ba = random_cpu(TG_SHAPE(3, 6, 5), dt, 4), *bb = random_cpu(TG_SHAPE(3, 5, 4), dt, 5);
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_matmul(in[0], in[1]); }, {ba, bb}, o));
        tg_tensor *w = random_cpu(TG_SHAPE(4, 5), dt, 6), *bias = random_cpu(TG_SHAPE(4), dt, 7);
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_linear(in[0], in[1], in[2]); }, {a, w, bias}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_softmax(in[0], 1); }, {a}, o));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_sum(in[0]); }, {a}, o));
        tg_tensor *target = tensor_i64({0, 4, 2, 1, 3, 0}, TG_SHAPE(6));
        EXPECT_TRUE(compare_devices([](auto &in) { return tg_cross_entropy(in[0], in[1]); }, {a, target}, o));
    }
}

TEST_F(TgTest, CudaAutocastUsesTheCudaLists) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *a = on_cuda(random_cpu(TG_SHAPE(4, 4))), *b = on_cuda(random_cpu(TG_SHAPE(4, 4)));
    TG_AUTOCAST(TG_DEVICE_CUDA, TG_FLOAT16) {
        tg_tensor *p = tg_matmul(a, b);
        ASSERT_NE(p, nullptr) << tg_last_error();
        EXPECT_EQ(tg_dtype_of(p), TG_FLOAT16);
        tg_tensor *s = tg_softmax(p, 1); /* float32 on CUDA (PyTorch's CUDA list) */
        ASSERT_NE(s, nullptr) << tg_last_error();
        EXPECT_EQ(tg_dtype_of(s), TG_FLOAT32);
        EXPECT_EQ(tg_dtype_of(tg_exp(p)), TG_FLOAT32);
        EXPECT_EQ(tg_dtype_of(tg_relu(p)), TG_FLOAT16);
    }
}

} // namespace
