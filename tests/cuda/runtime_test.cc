// The CUDA runtime: copies in every direction, copy_strided (broadcast, strides,
// casts), fill, the caching allocator (reuse, statistics, out of memory), streams
// and the TF32 switch. Skipped without a GPU.
#include <cstdint>
#include <string>

#include "cuda_test_util.h"
#include "core/cuda/runtime.h"

static const tg_dtype kAllDtypes[] = {TG_FLOAT32, TG_FLOAT64, TG_INT64, TG_INT32, TG_UINT8, TG_BOOL};

TEST_F(TgTest, CudaRoundTripEveryDtype) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : kAllDtypes) {
        tg_tensor *x = random_cpu(TG_SHAPE(3, 1000), dt, 3, 0, 200);
        tg_tensor *g = on_cuda(x);
        ASSERT_NE(g, nullptr) << tg_last_error();
        EXPECT_EQ(tg_device_of(g).kind, TG_DEVICE_CUDA);
        tg_tensor *back = tg_tensor_to(g, TG_CPU);
        EXPECT_TRUE(tensor_near(back, values(x), 0)) << tg_dtype_name(dt);
    }
}

TEST_F(TgTest, CudaItemAndEmptyTensors) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = tg_full(TG_SHAPE(1), 2.5, tg_opts{TG_FLOAT32, tg_cuda(0), false});
    EXPECT_EQ(tg_item(x), 2.5);
    tg_tensor *e = tg_zeros(TG_SHAPE(0, 4), tg_opts{TG_FLOAT32, tg_cuda(0), false});
    ASSERT_NE(e, nullptr) << tg_last_error();
    EXPECT_EQ(tg_numel(e), 0);
    EXPECT_EQ(values(tg_tensor_to(e, TG_CPU)).size(), 0u);
}

TEST_F(TgTest, CudaFillEveryDtypeAndStridedViews) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : kAllDtypes) {
        tg_tensor *t = tg_full(TG_SHAPE(5, 7), 3, tg_opts{dt, tg_cuda(0), false});
        ASSERT_NE(t, nullptr) << tg_last_error();
        EXPECT_TRUE(tensor_near(t, std::vector<double>(35, dt == TG_BOOL ? 1 : 3), 0)) << tg_dtype_name(dt);
    }
    // fill_ through a transposed column view writes only that column
    tg_tensor *m = tg_zeros(TG_SHAPE(4, 3), tg_opts{TG_FLOAT32, tg_cuda(0), false});
    tg_tensor *col = tg_narrow(m, 1, 1, 1);
    ASSERT_EQ(tg_fill_(col, 9), TG_OK);
    EXPECT_TRUE(tensor_near(m, {0, 9, 0, 0, 9, 0, 0, 9, 0, 0, 9, 0}, 0));
}

TEST_F(TgTest, CudaCopyStridedBroadcastsAndCasts) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dst : kAllDtypes) {
        for (tg_dtype src : kAllDtypes) {
            tg_tensor *x = random_cpu(TG_SHAPE(3, 1, 5), src, 11, -3, 100);
            tg_tensor *want = tg_empty(TG_SHAPE(2, 3, 4, 5), tg_opts{dst, TG_CPU, false});
            ASSERT_EQ(tg_copy_(want, x), TG_OK);
            tg_tensor *got = tg_empty(TG_SHAPE(2, 3, 4, 5), tg_opts{dst, tg_cuda(0), false});
            ASSERT_EQ(tg_copy_(got, on_cuda(x)), TG_OK) << tg_last_error();
            EXPECT_TRUE(same_values(want, got, 0, 0)) << tg_dtype_name(src) << " -> " << tg_dtype_name(dst);
        }
    }
}

TEST_F(TgTest, CudaContiguousOfTransposedAndSlicedViews) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(2, 3, 17, 9), TG_FLOAT64, 5);
    int perm[] = {3, 1, 0, 2};
    tg_tensor *cpu = tg_contiguous(tg_narrow(tg_permute(x, perm), 0, 2, 5));
    tg_tensor *gpu = tg_contiguous(tg_narrow(tg_permute(on_cuda(x), perm), 0, 2, 5));
    EXPECT_TRUE(same_values(cpu, gpu, 0, 0));
    EXPECT_TRUE(tg_is_contiguous(gpu));
}

TEST_F(TgTest, CudaCopyBetweenDevicesWithCast) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(6, 4), TG_FLOAT64, 2);
    tg_tensor *dst = tg_empty(TG_SHAPE(4, 6), tg_opts{TG_FLOAT32, tg_cuda(0), false});
    ASSERT_EQ(tg_copy_(dst, tg_transpose(x, 0, 1)), TG_OK) << tg_last_error(); // CPU -> CUDA, cast, strides
    EXPECT_TRUE(tensor_near(dst, values(tg_transpose(x, 0, 1)), 1e-6));
    tg_tensor *host = tg_empty(TG_SHAPE(6, 4), tg_opts{TG_FLOAT64, TG_CPU, false});
    ASSERT_EQ(tg_copy_(host, tg_transpose(dst, 0, 1)), TG_OK) << tg_last_error(); // CUDA -> CPU
    EXPECT_TRUE(tensor_near(host, values(x), 1e-6));
    if (tg_cuda_device_count() > 1) {
        tg_tensor *other = tg_tensor_to(dst, tg_cuda(1));
        ASSERT_NE(other, nullptr) << tg_last_error();
        EXPECT_TRUE(tensor_near(other, values(dst), 0));
    }
}

// A step that allocates and frees the same sizes: the second makes no cudaMalloc.
static void allocation_step() {
    tg_scope_begin();
    tg_tensor *a = tg_ones(TG_SHAPE(256, 1000), tg_opts{TG_FLOAT32, tg_cuda(0), false});
    tg_tensor *b = tg_add(a, a);
    tg_tensor *c = tg_sum(tg_mul(b, a));
    (void)tg_item(c);
    tg_tensor *d = tg_ones(TG_SHAPE(7), tg_opts{TG_INT64, tg_cuda(0), false});
    (void)d;
    tg_scope_end();
}

TEST_F(TgTest, CudaAllocatorReusesFreedBlocks) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    allocation_step();
    tg_cuda_allocator_stats first = tg_cuda_memory_stats(0);
    allocation_step();
    allocation_step();
    tg_cuda_allocator_stats again = tg_cuda_memory_stats(0);
    EXPECT_EQ(again.num_mallocs, first.num_mallocs) << "a repeated step called cudaMalloc";
    EXPECT_EQ(again.allocated, first.allocated);
    EXPECT_GE(again.peak, (size_t)256 * 1000 * 4 * 2);
    EXPECT_GT(again.cached, 0u);
    tg_cuda_empty_cache();
    tg_cuda_allocator_stats emptied = tg_cuda_memory_stats(0);
    EXPECT_EQ(emptied.cached, 0u);
    EXPECT_GT(emptied.num_frees, again.num_frees);
    allocation_step();
    EXPECT_GT(tg_cuda_memory_stats(0).num_mallocs, again.num_mallocs); // fresh blocks after emptying
}

TEST_F(TgTest, CudaOutOfMemoryIsAnErrorWithSizes) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    const int64_t pib = (int64_t)1 << 50; // 1 PiB of bytes: 2^48 floats
    tg_tensor *t = tg_empty(TG_SHAPE(pib / 4), tg_opts{TG_FLOAT32, tg_cuda(0), false});
    EXPECT_EQ(t, nullptr);
    EXPECT_ERROR_CONTAINS("out of memory: tried to allocate 1125899906842624 bytes on cuda:0 (");
    EXPECT_ERROR_CONTAINS(" bytes free of ");
    // and the device still works afterwards
    tg_tensor *ok = tg_ones(TG_SHAPE(4), tg_opts{TG_FLOAT32, tg_cuda(0), false});
    EXPECT_TRUE(tensor_near(ok, {1, 1, 1, 1}, 0));
}

TEST_F(TgTest, CudaStreamAndTf32Switch) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    EXPECT_NE(tg_cuda_stream(0), nullptr);
    EXPECT_EQ(tg_cuda_stream(0), tg_cuda_stream(0));
    EXPECT_EQ(tg_cuda_stream(tg_cuda_device_count()), nullptr);
    EXPECT_FALSE(tg_get_allow_tf32()); // off by default, as in PyTorch
    tg_set_allow_tf32(true);
    EXPECT_TRUE(tg_get_allow_tf32());
    tg_set_allow_tf32(false);
}

TEST_F(TgTest, CudaMixedDevicesAreRefused) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *a = tensor_f32({1, 2}, TG_SHAPE(2));
    EXPECT_EQ(tg_add(a, on_cuda(a)), nullptr);
    EXPECT_ERROR_CONTAINS("cuda:0");
}
