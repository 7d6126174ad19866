// core/: every error path names the call and the offending values; NULL propagates.
#include <string>
#include <thread>

#include "test_util.h"

TEST_F(TgTest, NegativeSizeIsAnError) {
    EXPECT_EQ(tg_zeros(TG_SHAPE(2, -3), tg_opts{}), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_zeros: negative size -3 in shape [2, -3]");
}

TEST_F(TgTest, UnsupportedDtypeIsAnError) {
    EXPECT_EQ(tg_empty(TG_SHAPE(2), tg_opts{(tg_dtype)TG_NUM_DTYPES}), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_empty: dtype invalid is not supported");
}

TEST_F(TgTest, RequiresGradNeedsFloatingDtype) {
    EXPECT_EQ(tg_zeros(TG_SHAPE(2), tg_opts{TG_INT64, TG_CPU, true}), nullptr);
    EXPECT_ERROR_CONTAINS("only floating-point tensors can require grad, not int64");
    EXPECT_EQ(tg_requires_grad_(tensor_i64({1}, TG_SHAPE(1)), true), nullptr);
    EXPECT_ERROR_CONTAINS("tg_requires_grad_");
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

TEST_F(TgTest, NullInputNamesTheOpAndCarriesTheFirstMessage) {
    tg_tensor *bad = tg_zeros(TG_SHAPE(-1), tg_opts{});
    EXPECT_STREQ(tg_last_error(), "tg_zeros: negative size -1 in shape [-1]");
    unsigned long before = tg_error_count();
    tg_tensor *chained = tg_sum(tg_exp(tg_mul(bad, bad)));
    EXPECT_EQ(chained, nullptr);
    // Each op given NULL records its own error (so tg_error_count tells that it
    // failed), naming itself and the first failure, never the messages in between.
    EXPECT_EQ(tg_error_count(), before + 3);
    EXPECT_STREQ(tg_last_error(), "tg_sum: input 0 is NULL: the op that made it failed: "
                                  "tg_zeros: negative size -1 in shape [-1]");
    EXPECT_TRUE(std::isnan(tg_item(nullptr)));
    EXPECT_STREQ(tg_last_error(), "tg_item: input 0 is NULL: the op that made it failed: "
                                  "tg_zeros: negative size -1 in shape [-1]");
    // A NULL that no failure explains (the error was cleared, or never happened).
    tg_clear_error();
    EXPECT_EQ(tg_exp(nullptr), nullptr);
    EXPECT_STREQ(tg_last_error(), "exp: input 0 is NULL");
    EXPECT_EQ(tg_copy_(nullptr, nullptr), TG_ERROR);
}

// Runs fn with the error mode `mode` and stderr captured; returns what was printed.
template <typename F> static std::string stderr_of(tg_error_mode mode, F fn) {
    tg_error_mode prev = tg_set_error_mode(mode);
    ::testing::internal::CaptureStderr();
    fn();
    std::string out = ::testing::internal::GetCapturedStderr();
    tg_set_error_mode(prev);
    return out;
}

static int occurrences(const std::string &text, const std::string &part) {
    int n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) n++;
    return n;
}

TEST_F(TgTest, WarnModePrintsEachDistinctErrorOnce) {
    std::string out = stderr_of(TG_ERRORS_WARN, [] {
        for (int i = 0; i < 3; i++)
            tg_sum(tg_add(tg_zeros(TG_SHAPE(2, 3), tg_opts{}), tg_zeros(TG_SHAPE(4), tg_opts{})));
        tg_ones(TG_SHAPE(-7), tg_opts{});
    });
    EXPECT_EQ(occurrences(out, "tapegrad: error: add: shapes [2, 3] and [4] cannot be broadcast together\n"), 1) << out;
    EXPECT_EQ(occurrences(out, "tapegrad: error: tg_ones: negative size -7 in shape [-7]\n"), 1) << out;
    EXPECT_EQ(occurrences(out, "input 0 is NULL"), 0) << "the consequences of a printed error are not printed: " << out;
    EXPECT_EQ(occurrences(out, "tapegrad: error: "), 2) << out;
    // The failure is still recorded for the program to read.
    EXPECT_STREQ(tg_last_error(), "tg_ones: negative size -7 in shape [-7]");
}

TEST_F(TgTest, SilentModePrintsNothingAndStillRecords) {
    std::string out = stderr_of(TG_ERRORS_SILENT, [] { tg_ones(TG_SHAPE(-8), tg_opts{}); });
    EXPECT_EQ(out, "");
    EXPECT_STREQ(tg_last_error(), "tg_ones: negative size -8 in shape [-8]");
}

TEST_F(TgTest, HandlerReplacesTheModesAction) {
    static int calls;
    calls = 0;
    std::string out = stderr_of(TG_ERRORS_WARN, [] {
        tg_set_error_handler([](const char *, void *) { calls++; }, nullptr);
        tg_exp(tg_ones(TG_SHAPE(-9), tg_opts{}));
        tg_set_error_handler(nullptr, nullptr);
    });
    EXPECT_EQ(out, "");
    EXPECT_EQ(calls, 2); // the failure and the op given its NULL
}

// A progress bar drawn in place ends its line before a message is printed (issue 35):
// the prelude runs before each message printed, and only then.
TEST_F(TgTest, PreludeRunsBeforeEachPrintedMessageOnly) {
    static int calls;
    calls = 0;
    std::string out = stderr_of(TG_ERRORS_WARN, [] {
        tg_set_error_prelude([](void *) { fputs("[prelude]", stderr), calls++; }, nullptr);
        tg_exp(tg_ones(TG_SHAPE(-11), tg_opts{})); // printed once: the NULL's consequence is not
        tg_ones(TG_SHAPE(-11), tg_opts{});         // the same message again: not printed
        tg_set_error_prelude(nullptr, nullptr);
    });
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(out.rfind("[prelude]tapegrad: error: tg_ones: negative size -11 in shape [-11]\n", 0), 0u) << out;
    out = stderr_of(TG_ERRORS_SILENT, [] {
        tg_set_error_prelude([](void *) { calls++; }, nullptr);
        tg_ones(TG_SHAPE(-12), tg_opts{});
        tg_set_error_prelude(nullptr, nullptr);
    });
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(out, "");
}

TEST(TgErrorsDeathTest, ExitModePrintsAndExits) {
    EXPECT_EXIT(
        {
            tg_set_error_mode(TG_ERRORS_EXIT);
            tg_release(tg_ones(TG_SHAPE(-3), tg_opts{}));
            std::exit(0);
        },
        ::testing::ExitedWithCode(1), "tapegrad: error: tg_ones: negative size -3 in shape \\[-3\\]");
}

TEST(TgErrorsDeathTest, AbortModeAborts) {
    EXPECT_DEATH(
        {
            tg_set_error_mode(TG_ERRORS_ABORT);
            tg_release(tg_ones(TG_SHAPE(-4), tg_opts{}));
        },
        "tapegrad: error: tg_ones: negative size -4");
}

TEST(TgErrorsDeathTest, EnvironmentChoosesTheModeUnlessTheProgramDid) {
    EXPECT_EXIT(
        {
            setenv("TG_ERRORS", "exit", 1);
            tg_set_error_mode(TG_ERRORS_DEFAULT);
            if (tg_get_error_mode() != TG_ERRORS_EXIT) std::exit(3);
            tg_release(tg_ones(TG_SHAPE(-5), tg_opts{}));
            std::exit(0);
        },
        ::testing::ExitedWithCode(1), "tg_ones: negative size -5");
    EXPECT_EXIT(
        {
            setenv("TG_ERRORS", "exit", 1);
            tg_set_error_mode(TG_ERRORS_SILENT); // the program's choice wins
            tg_release(tg_ones(TG_SHAPE(-5), tg_opts{}));
            std::exit(tg_has_error() ? 7 : 0);
        },
        ::testing::ExitedWithCode(7), "");
    EXPECT_EXIT(
        {
            setenv("TG_ERRORS", "loud", 1);
            tg_set_error_mode(TG_ERRORS_DEFAULT);
            std::exit(tg_get_error_mode() == TG_ERRORS_WARN ? 5 : 0);
        },
        ::testing::ExitedWithCode(5), "TG_ERRORS=loud is not one of abort, exit, warn, silent; using warn");
}

// The silent-NaN loop: a shape mistake inside a training loop whose code
// checks nothing. The default mode tells the user once, naming the op and shapes.
TEST_F(TgTest, UncheckedTrainingLoopReportsItsShapeMistakeOnce) {
    tg_manual_seed(0);
    tg_module *model = tg_nn_linear(4, 3, tg_linear_opts{});
    tg_optim *opt = tg_sgd(model, tg_sgd_opts{.lr = 0.1});
    tg_tensor *x = tg_randn(TG_SHAPE(8, 5), tg_opts{}); // 5 features, the model wants 4
    tg_tensor *y = tg_zeros(TG_SHAPE(8), tg_opts{TG_INT64});
    std::vector<double> losses;
    std::string out = stderr_of(TG_ERRORS_WARN, [&] {
        for (int step = 0; step < 3; step++) {
            TG_SCOPE {
                tg_tensor *loss = tg_cross_entropy(tg_forward(model, x), y);
                tg_backward(loss);
                tg_optim_step(opt);
                tg_optim_zero_grad(opt);
                losses.push_back(tg_item(loss));
            }
        }
    });
    EXPECT_EQ(occurrences(out, "tapegrad: error: "), 1) << out;
    EXPECT_NE(out.find("tapegrad: error: Linear(in_features=4, out_features=3): input [8, 5] must end in 4 features\n"),
              std::string::npos)
        << out;
    ASSERT_EQ(losses.size(), 3u);
    EXPECT_TRUE(std::isnan(losses[2]));
    // The program's own check at the end of a step reads the cause.
    EXPECT_TRUE(tg_has_error());
    EXPECT_NE(std::string(tg_last_error()).find("the op that made it failed: Linear(in_features=4"), std::string::npos)
        << tg_last_error();
    tg_optim_free(opt);
    tg_module_free(model);
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
    EXPECT_TRUE(tensor_near(kept, {1, 1, 1}, 0)); // what existed is intact
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
