// core/: creation, access, copies, views (strides and shared storage), printing.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "test_util.h"

TEST_F(TgTest, CreationFillsValues) {
    EXPECT_TRUE(tensor_near(tg_zeros(TG_SHAPE(2, 2), tg_opts{}), {0, 0, 0, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_ones(TG_SHAPE(3), tg_opts{TG_FLOAT64}), {1, 1, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_full(TG_SHAPE(2), 2.5, tg_opts{}), {2.5, 2.5}, 0));
    EXPECT_TRUE(tensor_near(tg_arange(0, 5, 1, tg_opts{TG_INT64}), {0, 1, 2, 3, 4}, 0));
    EXPECT_TRUE(tensor_near(tg_arange(1, 2, 0.25, tg_opts{}), {1, 1.25, 1.5, 1.75}, 0));
    tg_tensor *t = tg_full(TG_SHAPE(2, 3), 7, tg_opts{TG_INT32});
    EXPECT_EQ(tg_dtype_of(t), TG_INT32);
    EXPECT_EQ(dims(t), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(tg_numel(t), 6);
    EXPECT_TRUE(tg_is_contiguous(t));
    EXPECT_EQ(tg_stride(t, 0), 3);
    EXPECT_EQ(tg_stride(t, -1), 1);
}

// PyTorch 1.13: torch.full((2,), nan, dtype=torch.int64) raises "value cannot be converted
// to type int64_t without overflow" (c10's checked_convert), as do Inf, 1e30 and 2^31
// into int32, 300 and -0.5 into uint8; 2.7 truncates to 2, 2147483647 and -2^31 fit
// int32, and an integral -1 wraps to 255 in uint8 (a Python int's rule).
TEST_F(TgTest, IntegerFillsRefuseValuesOutOfRange) {
    struct {
        double v;
        tg_dtype dt;
        const char *msg;
    } bad[] = {
        {NAN, TG_INT64, "tg_full: value nan cannot be converted to type int64 without overflow"},
        {1e30, TG_INT64, "tg_full: value 1e+30 cannot be converted to type int64 without overflow"},
        {0x1p63, TG_INT64, "tg_full: value 9.223372036854776e+18 cannot be converted to type int64"},
        {-INFINITY, TG_INT32, "tg_full: value -inf cannot be converted to type int32 without overflow"},
        {2147483648.0, TG_INT32, "tg_full: value 2147483648 cannot be converted to type int32 without overflow"},
        {300, TG_UINT8, "tg_full: value 300 cannot be converted to type uint8 without overflow"},
        {-0.5, TG_UINT8, "tg_full: value -0.5 cannot be converted to type uint8 without overflow"},
        {INFINITY, TG_UINT8, "tg_full: value inf cannot be converted to type uint8 without overflow"},
    };
    for (auto &c : bad) {
        tg_clear_error();
        EXPECT_EQ(tg_full(TG_SHAPE(2), c.v, tg_opts{c.dt}), nullptr);
        EXPECT_ERROR_CONTAINS(c.msg);
    }
    EXPECT_TRUE(tensor_near(tg_full(TG_SHAPE(2), 2.7, tg_opts{TG_INT32}), {2, 2}, 0));
    EXPECT_TRUE(tensor_near(tg_full(TG_SHAPE(1), 2147483647.0, tg_opts{TG_INT32}), {2147483647.0}, 0));
    EXPECT_TRUE(tensor_near(tg_full(TG_SHAPE(1), -2147483648.0, tg_opts{TG_INT32}), {-2147483648.0}, 0));
    EXPECT_TRUE(tensor_near(tg_full(TG_SHAPE(1), -1, tg_opts{TG_UINT8}), {255}, 0));
    EXPECT_TRUE(tensor_near(tg_full(TG_SHAPE(1), -0x1p63, tg_opts{TG_INT64}), {-0x1p63}, 0));
    EXPECT_TRUE(std::isnan(tg_item(tg_full(TG_SHAPE(1), NAN, tg_opts{TG_FLOAT32}))));
    // The other fills: tg_full_like, tg_fill_ (PyTorch's fill_ raises the same), masked_fill.
    tg_tensor *x = tg_zeros(TG_SHAPE(2), tg_opts{TG_INT64});
    tg_clear_error();
    EXPECT_EQ(tg_full_like(x, INFINITY), nullptr);
    EXPECT_ERROR_CONTAINS("tg_full_like: value inf cannot be converted to type int64 without overflow");
    tg_clear_error();
    EXPECT_NE(tg_fill_(x, NAN), TG_OK);
    EXPECT_ERROR_CONTAINS("tg_fill_: value nan cannot be converted to type int64 without overflow");
    EXPECT_TRUE(tensor_near(x, {0, 0}, 0)); // untouched
    tg_clear_error();
    EXPECT_EQ(tg_masked_fill(x, tg_ne_scalar(x, 1), 1e19), nullptr);
    EXPECT_ERROR_CONTAINS("tg_masked_fill: value 1e+19 cannot be converted to type int64 without overflow");
}

// tg_arange(0, 1e19, 1) said "negative size -9223372036854775808" (an undefined
// double -> int64 conversion); the count is now checked as a double first.
TEST_F(TgTest, ArangeChecksItsCountAndValuesBeforeConverting) {
    tg_clear_error();
    EXPECT_EQ(tg_arange(0, 1e19, 1, tg_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS(
        "tg_arange: (end - start) / step gives 1e+19 elements, too many (start 0, end 1e+19, step 1)");
    tg_clear_error();
    EXPECT_EQ(tg_arange(-1e308, 1e308, 1e-300, tg_opts{TG_FLOAT64}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_arange: (end - start) / step gives inf elements, too many");
    // Values an integer dtype cannot hold: the last one, 2e9 + 2 * 1e9, into int32.
    EXPECT_TRUE(tensor_near(tg_arange(3e9, 6e9, 1e9, tg_opts{TG_INT64}), {3e9, 4e9, 5e9}, 0));
    tg_clear_error();
    EXPECT_EQ(tg_arange(2e9, 5e9, 1e9, tg_opts{TG_INT32}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_arange: value 4e+09 cannot be converted to type int32 without overflow");
    EXPECT_TRUE(tensor_near(tg_arange(0, 2e9, 1e9, tg_opts{TG_INT32}), {0, 1e9}, 0));
}

TEST_F(TgTest, ScalarShapeAndItem) {
    tg_tensor *s = tg_full(TG_SCALAR_SHAPE, 3.0, tg_opts{});
    EXPECT_EQ(tg_ndim(s), 0);
    EXPECT_EQ(tg_numel(s), 1);
    EXPECT_DOUBLE_EQ(tg_item(s), 3.0);
}

TEST_F(TgTest, FromDataAndCopyToHostRoundTrip) {
    int64_t in[6] = {1, -2, 3, -4, 5, -6};
    tg_tensor *t = tg_from_data(in, TG_SHAPE(2, 3), tg_opts{TG_INT64});
    int64_t out[6] = {0};
    ASSERT_EQ(tg_copy_to_host(t, out, sizeof out), TG_OK);
    EXPECT_EQ(0, memcmp(in, out, sizeof in));
}

TEST_F(TgTest, StorageIsSixtyFourByteAligned) {
    for (int n : {1, 3, 17, 1000}) {
        tg_tensor *t = tg_empty(TG_SHAPE(n), tg_opts{});
        EXPECT_EQ((uintptr_t)tg_data_ptr(t) % 64, 0u);
    }
}

TEST_F(TgTest, TransposeIsAViewWithSwappedStrides) {
    tg_tensor *m = tensor_f32({1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3));
    tg_tensor *t = tg_transpose(m, 0, 1);
    EXPECT_EQ(dims(t), (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(tg_stride(t, 0), 1);
    EXPECT_EQ(tg_stride(t, 1), 3);
    EXPECT_FALSE(tg_is_contiguous(t));
    EXPECT_TRUE(tg_same_storage(m, t));
    EXPECT_TRUE(tensor_near(t, {1, 4, 2, 5, 3, 6}, 0));
    // Writing through the base shows in the view.
    ((float *)tg_data_ptr(m))[1] = 20;
    EXPECT_TRUE(tensor_near(t, {1, 4, 20, 5, 3, 6}, 0));
}

TEST_F(TgTest, ContiguousCopiesOnlyWhenNeeded) {
    tg_tensor *m = tensor_f32({1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3));
    tg_tensor *same = tg_contiguous(m);
    EXPECT_EQ(same, m);
    tg_tensor *c = tg_contiguous(tg_transpose(m, 0, 1));
    EXPECT_TRUE(tg_is_contiguous(c));
    EXPECT_FALSE(tg_same_storage(c, m));
    EXPECT_EQ(tg_stride(c, 0), 2);
    EXPECT_TRUE(tensor_near(c, {1, 4, 2, 5, 3, 6}, 0));
}

TEST_F(TgTest, ViewReshapeNarrowPermute) {
    tg_tensor *x = tg_arange(0, 24, 1, tg_opts{});
    tg_tensor *v = tg_view(x, TG_SHAPE(2, -1, 4));
    EXPECT_EQ(dims(v), (std::vector<int64_t>{2, 3, 4}));
    EXPECT_TRUE(tg_same_storage(x, v));
    tg_tensor *p = tg_permute(v, (const int[]){2, 0, 1});
    EXPECT_EQ(dims(p), (std::vector<int64_t>{4, 2, 3}));
    EXPECT_EQ(tg_stride(p, 0), 1);
    EXPECT_EQ(tg_stride(p, 1), 12);
    EXPECT_EQ(tg_stride(p, 2), 4);
    // A view of a permuted tensor is refused, reshape copies.
    tg_clear_error();
    EXPECT_EQ(tg_view(p, TG_SHAPE(24)), nullptr);
    EXPECT_ERROR_CONTAINS("tg_view: a tensor of shape [4, 2, 3]");
    tg_tensor *r = tg_reshape(p, TG_SHAPE(24));
    ASSERT_NE(r, nullptr);
    EXPECT_FALSE(tg_same_storage(r, x));
    EXPECT_EQ(values(r)[1], 4.0);
    // narrow shares storage, offset moves.
    tg_tensor *n = tg_narrow(v, 1, 1, 2);
    EXPECT_EQ(dims(n), (std::vector<int64_t>{2, 2, 4}));
    EXPECT_EQ(tg_offset(n), 4);
    EXPECT_TRUE(tg_same_storage(n, x));
    EXPECT_EQ(values(n)[0], 4.0);
    EXPECT_EQ(values(n)[8], 16.0);
    // Reshape of a contiguous tensor is a view.
    EXPECT_TRUE(tg_same_storage(tg_reshape(x, TG_SHAPE(4, 6)), x));
    // unsqueeze / squeeze / flatten / expand.
    EXPECT_EQ(dims(tg_unsqueeze(x, 0)), (std::vector<int64_t>{1, 24}));
    EXPECT_EQ(dims(tg_squeeze(tg_unsqueeze(x, -1), -1)), (std::vector<int64_t>{24}));
    EXPECT_EQ(dims(tg_flatten(v, 1, 2)), (std::vector<int64_t>{2, 12}));
    tg_tensor *e = tg_expand(tensor_f32({1, 2}, TG_SHAPE(2, 1)), TG_SHAPE(2, 3));
    EXPECT_EQ(tg_stride(e, 1), 0);
    EXPECT_TRUE(tensor_near(e, {1, 1, 1, 2, 2, 2}, 0));
}

TEST_F(TgTest, CopyBroadcastsAndCasts) {
    tg_tensor *dst = tg_zeros(TG_SHAPE(2, 3), tg_opts{TG_FLOAT64});
    ASSERT_EQ(tg_copy_(dst, tensor_i64({1, 2, 3}, TG_SHAPE(3))), TG_OK);
    EXPECT_TRUE(tensor_near(dst, {1, 2, 3, 1, 2, 3}, 0));
    uint64_t v = tg_version(dst);
    tg_fill_(tg_narrow(dst, 0, 1, 1), -1);
    EXPECT_EQ(tg_version(dst), v + 1); // views share the version counter
    EXPECT_TRUE(tensor_near(dst, {1, 2, 3, -1, -1, -1}, 0));
    tg_tensor *b = tg_cast(tensor_f32({0, 2.5f, -1}, TG_SHAPE(3)), TG_BOOL);
    EXPECT_TRUE(tensor_near(b, {0, 1, 1}, 0));
    tg_tensor *i = tg_cast(tensor_f32({1.9f, -1.9f}, TG_SHAPE(2)), TG_INT32);
    EXPECT_TRUE(tensor_near(i, {1, -1}, 0)); // truncation toward zero, as PyTorch
}

TEST_F(TgTest, ClonesAreIndependent) {
    tg_tensor *a = tensor_f32({1, 2}, TG_SHAPE(2));
    tg_tensor *c = tg_clone(a);
    ((float *)tg_data_ptr(a))[0] = 9;
    EXPECT_TRUE(tensor_near(c, {1, 2}, 0));
}

TEST_F(TgTest, PrintLooksLikePyTorch) {
    char *buf = nullptr;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    tg_fprint(f, tensor_f32({1, 2, 3, 4}, TG_SHAPE(2, 2)));
    tg_fprint(f, tensor_i64({7}, TG_SHAPE(1)));
    fclose(f);
    EXPECT_STREQ(buf, "tensor([[1.0000, 2.0000],\n"
                      "        [3.0000, 4.0000]], shape=[2, 2], dtype=float32, device=cpu)\n"
                      "tensor([7], shape=[1], dtype=int64, device=cpu)\n");
    free(buf);
}

TEST_F(TgTest, PrintSummarisesLargeTensors) {
    char *buf = nullptr;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    tg_fprint(f, tg_arange(0, 2000, 1, tg_opts{TG_INT64}));
    fclose(f);
    EXPECT_STREQ(buf, "tensor([0, 1, 2, ..., 1997, 1998, 1999], shape=[2000], dtype=int64, device=cpu)\n");
    free(buf);
}

TEST_F(TgTest, ToSameDeviceReturnsSameTensor) {
    tg_tensor *a = tensor_f32({1}, TG_SHAPE(1));
    EXPECT_EQ(tg_tensor_to(a, TG_CPU), a);
}

TEST_F(TgTest, CpuCachingAllocatorReusesBlocks) {
    TG_SCOPE { tg_empty(TG_SHAPE(1 << 20), tg_opts{}); }
    tg_memory_stats before = tg_cpu_memory_stats();
    TG_SCOPE { tg_empty(TG_SHAPE(1 << 20), tg_opts{}); }
    tg_memory_stats after = tg_cpu_memory_stats();
    EXPECT_GE(before.cached, (size_t)4 << 20);
    EXPECT_EQ(after.cached, before.cached);
    EXPECT_EQ(after.allocated, before.allocated);
}

// The peak restarts from what is held when reset, and then follows the highest
// allocation again (4 MiB and 1 MiB blocks: sizes of their own size classes).
TEST_F(TgTest, CpuPeakResetsToWhatIsAllocated) {
    tg_tensor *held = tg_empty(TG_SHAPE(1 << 18), tg_opts{}); // 1 MiB, kept (the test's scope owns it)
    TG_SCOPE { tg_empty(TG_SHAPE(1 << 20), tg_opts{}); }      // 4 MiB, freed
    tg_memory_stats before = tg_cpu_memory_stats();
    EXPECT_GE(before.peak, before.allocated + ((size_t)4 << 20));
    tg_cpu_reset_peak_memory_stats();
    EXPECT_EQ(tg_cpu_memory_stats().peak, before.allocated);
    TG_SCOPE {
        tg_empty(TG_SHAPE(1 << 18), tg_opts{});
        tg_empty(TG_SHAPE(1 << 18), tg_opts{});
    }
    tg_memory_stats after = tg_cpu_memory_stats();
    EXPECT_EQ(after.allocated, before.allocated);
    EXPECT_EQ(after.peak, before.allocated + ((size_t)2 << 20));
    EXPECT_NE(held, nullptr);
}

// Small blocks go through a per-thread cache (core/storage.c): reused without the
// system, counted as cached, handed to the shared lists when their thread exits, and
// returned to the system by tg_cpu_empty_cache. The counts stay exact throughout.
TEST_F(TgTest, CpuThreadCacheKeepsStatsExact) {
    tg_cpu_empty_cache();
    tg_memory_stats start = tg_cpu_memory_stats();
    EXPECT_EQ(start.cached, 0u);
    TG_SCOPE { tg_empty(TG_SHAPE(3), tg_opts{}); } // 12 bytes: a 64-byte block
    tg_memory_stats warm = tg_cpu_memory_stats();
    EXPECT_EQ(warm.cached, 64u);
    EXPECT_EQ(warm.allocated, start.allocated);
    TG_SCOPE { tg_empty(TG_SHAPE(3), tg_opts{}); }
    EXPECT_EQ(tg_cpu_memory_stats().system_allocs, warm.system_allocs); // reused
    std::thread worker([] {
        TG_SCOPE {
            for (int i = 0; i < 100; i++) tg_empty(TG_SHAPE(40), tg_opts{}); // 160 bytes: 192-byte blocks
        }
    });
    worker.join();
    tg_memory_stats joined = tg_cpu_memory_stats();
    EXPECT_EQ(joined.cached, 64u + 100 * 192u);
    EXPECT_EQ(joined.allocated, start.allocated);
    EXPECT_GE(joined.peak, start.allocated + 100 * 192u);
    tg_cpu_empty_cache(); // the exited thread's blocks included
    EXPECT_EQ(tg_cpu_memory_stats().cached, 0u);
}
