// core/: every error path names the call and the offending values; NULL propagates.
#include <string>
#include <thread>

#include "test_util.h"

TEST_F(TgTest, NegativeSizeIsAnError) {
    EXPECT_EQ(tg_zeros(TG_SHAPE(2, -3), tg_opts{}), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_zeros: negative size -3 in shape [2, -3]");
}

TEST_F(TgTest, UnsupportedDtypeIsAnError) {
    EXPECT_EQ(tg_empty(TG_SHAPE(2), tg_opts{TG_FLOAT16}), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_empty: dtype float16 is not supported");
}

TEST_F(TgTest, RequiresGradNeedsFloatingDtype) {
    EXPECT_EQ(tg_zeros(TG_SHAPE(2), tg_opts{TG_INT64, TG_CPU, true}), nullptr);
    EXPECT_ERROR_CONTAINS("only floating-point tensors can require grad, not int64");
    EXPECT_EQ(tg_requires_grad(tensor_i64({1}, TG_SHAPE(1)), true), nullptr);
    EXPECT_ERROR_CONTAINS("tg_requires_grad");
}

TEST_F(TgTest, ItemOfManyElements) {
    EXPECT_TRUE(std::isnan(tg_item(tg_zeros(TG_SHAPE(2, 2), tg_opts{}))));
    EXPECT_STREQ(tg_last_error(), "tg_item: a tensor with 4 elements (shape [2, 2]) cannot be converted to a scalar");
}

TEST_F(TgTest, CopyToHostChecksBufferSize) {
    float buf[3];
    EXPECT_EQ(tg_copy_to_host(tg_zeros(TG_SHAPE(4), tg_opts{}), buf, sizeof buf), TG_ERROR);
    EXPECT_STREQ(tg_last_error(),
                 "tg_copy_to_host: buffer of 12 bytes given for a float32 tensor of shape [4] (16 bytes)");
}

TEST_F(TgTest, BroadcastFailureNamesShapes) {
    EXPECT_EQ(tg_add(tg_zeros(TG_SHAPE(2, 3), tg_opts{}), tg_zeros(TG_SHAPE(4), tg_opts{})), nullptr);
    EXPECT_STREQ(tg_last_error(), "add: shapes [2, 3] and [4] cannot be broadcast together");
}

TEST_F(TgTest, CopyShapeMismatch) {
    EXPECT_EQ(tg_copy_(tg_zeros(TG_SHAPE(2), tg_opts{}), tg_zeros(TG_SHAPE(3), tg_opts{})), TG_ERROR);
    EXPECT_STREQ(tg_last_error(), "tg_copy_: source of shape [3] cannot be broadcast to destination shape [2]");
}

TEST_F(TgTest, ViewSizeMismatch) {
    EXPECT_EQ(tg_view(tg_zeros(TG_SHAPE(6), tg_opts{}), TG_SHAPE(4, -1)), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_view: shape [4, -1] is invalid for a tensor of shape [6] (6 elements)");
}

TEST_F(TgTest, DimOutOfRange) {
    tg_tensor *t = tg_zeros(TG_SHAPE(2, 3), tg_opts{});
    EXPECT_EQ(tg_transpose(t, 0, 2), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_transpose: dims 0, 2 out of range for a tensor with 2 dims");
    EXPECT_EQ(tg_narrow(t, 1, 2, 2), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_narrow: start 2 + length 2 exceeds size 3 of dim 1 (shape [2, 3])");
    EXPECT_EQ(tg_size(t, 5), -1);
    EXPECT_STREQ(tg_last_error(), "tg_size: dim 5 out of range for a tensor with 2 dims");
    EXPECT_EQ(tg_expand(t, TG_SHAPE(4, 3)), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_expand: a tensor of shape [2, 3] cannot be expanded to [4, 3]");
    EXPECT_EQ(tg_permute(t, (const int[]){0, 0}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_permute: dims are not a permutation");
}

TEST_F(TgTest, NullInputKeepsTheFirstMessage) {
    tg_tensor *bad = tg_zeros(TG_SHAPE(-1), tg_opts{});
    std::string first = tg_last_error();
    tg_tensor *chained = tg_sum(tg_exp(tg_mul(bad, bad)));
    EXPECT_EQ(chained, nullptr);
    EXPECT_EQ(first, tg_last_error());
    tg_clear_error();
    EXPECT_EQ(tg_exp(nullptr), nullptr);
    EXPECT_STREQ(tg_last_error(), "exp: input 0 is NULL");
    EXPECT_EQ(tg_copy_(nullptr, nullptr), TG_ERROR);
}

TEST_F(TgTest, ErrorHandlerIsCalled) {
    static std::string seen;
    tg_set_error_handler([](const char *msg, void *user) { seen = msg + std::string(static_cast<const char *>(user)); },
                         (void *)"!");
    tg_ones(TG_SHAPE(-2), tg_opts{});
    tg_set_error_handler(nullptr, nullptr);
    EXPECT_EQ(seen, "tg_ones: negative size -2 in shape [-2]!");
}

TEST_F(TgTest, ErrorsArePerThread) {
    tg_zeros(TG_SHAPE(-1), tg_opts{});
    std::string other;
    std::thread t([&] { other = tg_last_error(); });
    t.join();
    EXPECT_EQ(other, "");
    EXPECT_STRNE(tg_last_error(), "");
}

TEST_F(TgTest, SimulatedOutOfMemoryIsAnErrorAndLeaksNothing) {
    tg_tensor *kept = tg_ones(TG_SHAPE(3), tg_opts{});
    tg_debug_fail_allocations_after(0);
    EXPECT_EQ(tg_zeros(TG_SHAPE(1000), tg_opts{}), nullptr);
    tg_debug_fail_allocations_after(-1);
    EXPECT_STREQ(tg_last_error(), "tg_zeros: out of memory allocating 4000 bytes on cpu");
    EXPECT_TRUE(tensor_near(kept, {1, 1, 1}, 0));  // what existed is intact
}

TEST(TgCuda, CudaTensorWithoutDeviceIsAClearError) {
    if (tg_cuda_available()) GTEST_SKIP() << "a CUDA device is present; this checks the no-device message";
    tg_clear_error();
    EXPECT_EQ(tg_zeros(TG_SHAPE(2), tg_opts{TG_FLOAT32, tg_cuda(0), false}), nullptr);
    std::string msg = tg_last_error();
#ifdef TG_WITH_CUDA
    EXPECT_EQ(msg, "tg_zeros: device cuda:0 requested but 0 CUDA devices are present");
#else
    EXPECT_EQ(msg, "tg_zeros: device cuda:0 requested but this build of tapegrad has no CUDA (built with "
                   "--config=cpu_only or without a CUDA toolkit)");
#endif
    EXPECT_EQ(tg_live_tensors(), 0);
}

TEST(TgCuda, HostDeviceRoundTrip) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    TG_SCOPE {
        tg_tensor *h = tg_arange(0, 1000, 1, tg_opts{});
        tg_tensor *d = tg_tensor_to(h, tg_cuda(0));
        ASSERT_NE(d, nullptr) << tg_last_error();
        EXPECT_EQ(tg_device_of(d).kind, TG_DEVICE_CUDA);
        tg_tensor *dt = tg_transpose(tg_view(d, TG_SHAPE(10, 100)), 0, 1);
        tg_tensor *back = tg_tensor_to(tg_contiguous(dt), TG_CPU);
        EXPECT_TRUE(tensor_near(back, values(tg_contiguous(tg_transpose(tg_view(h, TG_SHAPE(10, 100)), 0, 1))), 0));
        EXPECT_DOUBLE_EQ(tg_item(tg_narrow(d, 0, 7, 1)), 7.0);
    }
}

TEST_F(TgTest, HugeShapesAreRefusedNotOverflowed) {
    EXPECT_EQ(tg_empty(TG_SHAPE(1LL << 31, 1LL << 31, 1LL << 31), tg_opts{}), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_empty: shape [2147483648, 2147483648, 2147483648] has too many elements");
    tg_tensor *empty = tg_empty(TG_SHAPE(0, 1LL << 40, 1LL << 40), tg_opts{});
    ASSERT_NE(empty, nullptr);
    EXPECT_EQ(tg_numel(empty), 0);
}
