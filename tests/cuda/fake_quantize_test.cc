// Fake quantisation on cuda:0 against the CPU (the same formula header,
// ops/fake_quantize_formula.h): values and straight-through gradients, exactly.
#include "cuda_test_util.h"

namespace {

TEST_F(TgTest, CudaFakeQuantizeMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    CompareOpts exact;
    exact.atol = 0;
    exact.rtol = 0;
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_tensor *x = random_cpu(TG_SHAPE(6, 5, 4), dt, 1, -3, 3);
        EXPECT_TRUE(compare_devices(
            [](auto &in) { return tg_fake_quantize_per_tensor_affine(in[0], 0.05, 7, -20, 40); }, {x}, exact));
        tg_tensor *scale = random_cpu(TG_SHAPE(5), TG_FLOAT32, 2, 0.01, 0.2);
        tg_tensor *zp = tg_cast(tg_mul_scalar(random_cpu(TG_SHAPE(5), TG_FLOAT32, 3, -4, 4), 1), TG_INT32);
        EXPECT_TRUE(compare_devices(
            [](auto &in) { return tg_fake_quantize_per_channel_affine(in[0], in[1], in[2], 1, -30, 30); },
            {x, scale, zp}, exact));
    }
}

TEST_F(TgTest, CudaFakeQuantizeModuleMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_module *cpu = tg_nn_fake_quantize(tg_nn_moving_average_per_channel_minmax_observer(
        tg_observer_opts{.dtype = TG_QINT8, .qscheme = TG_PER_CHANNEL_SYMMETRIC}));
    tg_module *gpu = tg_nn_fake_quantize(tg_nn_moving_average_per_channel_minmax_observer(
        tg_observer_opts{.dtype = TG_QINT8, .qscheme = TG_PER_CHANNEL_SYMMETRIC}));
    ASSERT_EQ(tg_module_to(gpu, tg_cuda(0)), TG_OK);
    for (unsigned seed = 1; seed < 4; seed++) {
        tg_tensor *x = random_cpu(TG_SHAPE(4, 3, 2), TG_FLOAT32, seed);
        EXPECT_TRUE(same_values(tg_forward(cpu, x), tg_forward(gpu, on_cuda(x)), 0, 0));
    }
    tg_module_free(cpu);
    tg_module_free(gpu);
}

} // namespace
