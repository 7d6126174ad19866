// What a build says about CUDA without needing a GPU: asking for a device that is
// not there is a clear error (never a crash), and a CUDA build links every CUDA
// entry point. These run (and pass) on any machine; the GPU suites next to this
// file skip without a device.
#include <string>

#include "cuda_test_util.h"
#include "ops/cuda/conv.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/gather.h"
#include "ops/cuda/loss.h"
#include "ops/cuda/matmul.h"
#include "ops/cuda/norm.h"
#include "optim/cuda/optim.h"
#include "ops/cuda/pool.h"
#include "ops/cuda/random.h"
#include "ops/cuda/reduce.h"
#include "core/cuda/runtime.h"
#include "ops/cuda/softmax.h"

// One past the last device: cuda:0 on a machine without a GPU.
static int missing_device() { return tg_cuda_device_count(); }

TEST_F(TgTest, AskingForAMissingCudaDeviceIsAClearError) {
    int d = missing_device();
    tg_tensor *t = tg_zeros(TG_SHAPE(2, 3), tg_opts{TG_FLOAT32, tg_cuda(d), false});
    EXPECT_EQ(t, nullptr);
    std::string want = "cuda:" + std::to_string(d) + " requested but ";
    EXPECT_ERROR_CONTAINS(want);
#ifdef TG_WITH_CUDA
    std::string count = std::to_string(d) + (d == 1 ? " CUDA device is present" : " CUDA devices are present");
    EXPECT_ERROR_CONTAINS(count);
#else
    EXPECT_ERROR_CONTAINS("has no CUDA");
#endif
}

TEST_F(TgTest, MovingToAMissingCudaDeviceIsAClearError) {
    int d = missing_device();
    tg_tensor *x = tensor_f32({1, 2, 3}, TG_SHAPE(3));
    EXPECT_EQ(tg_tensor_to(x, tg_cuda(d)), nullptr);
#ifdef TG_WITH_CUDA
    EXPECT_ERROR_CONTAINS("CUDA device");
#else
    EXPECT_ERROR_CONTAINS("has no CUDA");
#endif
}

TEST_F(TgTest, NegativeCudaOrdinalIsAClearError) {
    EXPECT_EQ(tg_empty(TG_SHAPE(1), tg_opts{TG_FLOAT32, tg_cuda(-1), false}), nullptr);
    EXPECT_ERROR_CONTAINS("cuda:-1 requested but");
}

TEST(CudaBuild, DeviceCountIsNeverNegative) {
    EXPECT_GE(tg_cuda_device_count(), 0);
    EXPECT_EQ(tg_cuda_available(), tg_cuda_device_count() > 0);
    tg_cuda_synchronize(); // a no-op without devices, never a crash
}

// The weak entry points resolve exactly when CUDA is compiled in.
TEST(CudaBuild, EntryPointsAreLinkedInCudaBuildsOnly) {
#ifdef TG_WITH_CUDA
    const bool expect = true;
    EXPECT_NE(std::string(tg_build_info()).find("CUDA"), std::string::npos) << tg_build_info();
#else
    const bool expect = false;
#endif
    EXPECT_EQ(tg_cuda_backend != nullptr, expect);
    EXPECT_EQ(tg_cuda_memory_stats != nullptr, expect);
    EXPECT_EQ(tg_cuda_empty_cache != nullptr, expect);
    EXPECT_EQ(tg_set_allow_tf32 != nullptr, expect);
    EXPECT_EQ(tg_cuda_stream != nullptr, expect);
    EXPECT_EQ(tg_cuda_unary != nullptr, expect);
    EXPECT_EQ(tg_cuda_binary != nullptr, expect);
    EXPECT_EQ(tg_cuda_where != nullptr, expect);
    EXPECT_EQ(tg_cuda_sum != nullptr, expect);
    EXPECT_EQ(tg_cuda_extreme != nullptr, expect);
    EXPECT_EQ(tg_cuda_stat != nullptr, expect);
    EXPECT_EQ(tg_cuda_gemm != nullptr, expect);
    EXPECT_EQ(tg_cuda_softmax != nullptr, expect);
    EXPECT_EQ(tg_cuda_cross_entropy_forward != nullptr, expect);
    EXPECT_EQ(tg_cuda_cross_entropy_backward != nullptr, expect);
    EXPECT_EQ(tg_cuda_index_select != nullptr, expect);
    EXPECT_EQ(tg_cuda_index_add != nullptr, expect);
    EXPECT_EQ(tg_cuda_gather != nullptr, expect);
    EXPECT_EQ(tg_cuda_scatter_add != nullptr, expect);
    EXPECT_EQ(tg_cuda_one_hot != nullptr, expect);
    EXPECT_EQ(tg_cuda_conv2d_forward != nullptr, expect);
    EXPECT_EQ(tg_cuda_conv2d_input_grad != nullptr, expect);
    EXPECT_EQ(tg_cuda_conv2d_weight_grad != nullptr, expect);
    EXPECT_EQ(tg_cuda_max_pool2d_forward != nullptr, expect);
    EXPECT_EQ(tg_cuda_max_pool2d_backward != nullptr, expect);
    EXPECT_EQ(tg_cuda_max_pool2d_gather != nullptr, expect);
    EXPECT_EQ(tg_cuda_avg_pool2d_forward != nullptr, expect);
    EXPECT_EQ(tg_cuda_avg_pool2d_backward != nullptr, expect);
    EXPECT_EQ(tg_cuda_norm_forward != nullptr, expect);
    EXPECT_EQ(tg_cuda_random_fill != nullptr, expect);
    EXPECT_EQ(tg_cuda_sgd_step != nullptr, expect);
    EXPECT_EQ(tg_cuda_adam_step != nullptr, expect);
    EXPECT_EQ(tg_cuda_rmsprop_step != nullptr, expect);
#ifdef TG_WITH_CUDA
    const tg_device_backend *b = tg_cuda_backend();
    ASSERT_NE(b, nullptr);
    EXPECT_TRUE(b->device_count && b->alloc && b->free && b->copy && b->memset_zero && b->synchronize &&
                b->copy_strided && b->fill);
    EXPECT_EQ(b->device_count(), tg_cuda_device_count());
#endif
}

// The runtime's own API answers for a device that is not there instead of crashing
// (cuda:0 without a GPU; one past the last device with one).
TEST(CudaBuild, RuntimeApiForAMissingDevice) {
#ifdef TG_WITH_CUDA
    int n = tg_cuda_device_count();
    tg_clear_error();
    EXPECT_EQ(tg_cuda_stream(n), nullptr);
    std::string want = std::to_string(n) + (n == 1 ? " CUDA device is present" : " CUDA devices are present");
    EXPECT_NE(std::string(tg_last_error()).find(want), std::string::npos) << tg_last_error();
    tg_cuda_allocator_stats s = tg_cuda_memory_stats(n);
    EXPECT_EQ(s.allocated, 0u);
    EXPECT_EQ(s.num_mallocs, 0);
    tg_cuda_empty_cache();
    EXPECT_FALSE(tg_get_allow_tf32());
#else
    GTEST_SKIP() << "built without CUDA";
#endif
}
