// Leaks: loop and block macros end their scope however they are left, and live
// tensors are reported with the source line that made them (core/trace.h).
#include <cstdio>
#include <string>

#include "test_util.h"

// The leak report's source lines: the wrappers that test_util.h leaves out.
#undef TG_NO_TRACE_MACROS
#include "core/trace_macros.h"

// The exit-report tests' children leave tensors alive on purpose; LeakSanitizer (the
// asan CI stage) must not count those.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAK_ON_PURPOSE() __lsan_disable()
#else
#define LEAK_ON_PURPOSE() ((void)0)
#endif

namespace {

// Everything tg_report_live_tensors writes.
std::string live_report() {
    FILE *f = tmpfile();
    if (!f) return "tmpfile failed";
    tg_report_live_tensors(f);
    std::string out;
    rewind(f);
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    fclose(f);
    return out;
}

tg_loader *small_loader() {
    tg_loader *ld = nullptr;
    TG_SCOPE {
        tg_tensor *x = tg_arange(0, 12, 1, tg_opts{});
        tg_tensor *y = tg_arange(0, 12, 1, tg_opts{TG_INT64});
        ld = tg_loader_new(tg_view(x, TG_SHAPE(6, 2)), tg_view(y, TG_SHAPE(6, 2)), tg_loader_opts{.batch_size = 2});
    }
    return ld;
}

} // namespace

TEST_F(TgTest, BreakOutOfForEachBatchLeaksNothingAndEndsThePass) {
    tg_loader *ld = small_loader();
    ASSERT_NE(ld, nullptr) << tg_last_error();
    long baseline = tg_live_tensors();
    int depth = tg_scope_depth();
    tg_tensor *bx = nullptr, *by = nullptr;
    int seen = 0;
    TG_FOR_EACH_BATCH(ld, bx, by) {
        tg_tensor *tmp = tg_mul_scalar(bx, 2); // a temporary of the step
        (void)tmp;
        if (++seen == 2) break;
    }
    EXPECT_EQ(seen, 2);
    EXPECT_EQ(tg_scope_depth(), depth);
    EXPECT_EQ(tg_live_tensors(), baseline);
    // As leaving a `for x, y in loader` loop: the next pass is the next epoch, whole.
    seen = 0;
    double first = NAN;
    TG_FOR_EACH_BATCH(ld, bx, by) {
        if (seen++ == 0) first = values(bx)[0];
    }
    EXPECT_EQ(seen, 3);
    EXPECT_EQ(first, 0.0);
    EXPECT_EQ(tg_loader_epoch(ld), 1);
    EXPECT_EQ(tg_live_tensors(), baseline);
    tg_loader_free(ld);
}

static int batches_before_return(tg_loader *ld, int stop_at) {
    tg_tensor *bx = nullptr, *by = nullptr;
    int seen = 0;
    TG_FOR_EACH_BATCH(ld, bx, by) {
        if (++seen == stop_at) return seen;
    }
    return -1;
}

TEST_F(TgTest, ReturnOutOfForEachBatchLeaksNothing) {
    tg_loader *ld = small_loader();
    long baseline = tg_live_tensors();
    EXPECT_EQ(batches_before_return(ld, 1), 1);
    EXPECT_EQ(tg_live_tensors(), baseline);
    EXPECT_EQ(batches_before_return(ld, 3), 3); // a fresh pass: 3 batches again
    EXPECT_EQ(tg_live_tensors(), baseline);
    EXPECT_EQ(tg_scope_depth(), 1); // the fixture's own
    tg_loader_free(ld);
}

TEST_F(TgTest, ContinueInForEachBatchStillVisitsEveryBatch) {
    tg_loader *ld = small_loader();
    long baseline = tg_live_tensors();
    tg_tensor *bx = nullptr, *by = nullptr;
    int seen = 0;
    TG_FOR_EACH_BATCH(ld, bx, by) {
        seen++;
        if (seen < 3) continue;
    }
    EXPECT_EQ(seen, 3);
    EXPECT_EQ(tg_live_tensors(), baseline);
    tg_loader_free(ld);
}

static tg_tensor *made_in_scope_then_returned(bool keep) {
    TG_SCOPE {
        tg_tensor *t = tg_ones(TG_SHAPE(3), tg_opts{});
        if (keep) return tg_scope_return(t);
        return nullptr;
    }
    return nullptr;
}

TEST_F(TgTest, ReturnOutOfScopeEndsIt) {
    long baseline = tg_live_tensors();
    EXPECT_EQ(made_in_scope_then_returned(false), nullptr);
    EXPECT_EQ(tg_scope_depth(), 1);
    EXPECT_EQ(tg_live_tensors(), baseline);
    tg_tensor *kept = made_in_scope_then_returned(true); // handed to the fixture's scope
    EXPECT_TRUE(tensor_near(kept, {1, 1, 1}, 0));
    EXPECT_EQ(tg_live_tensors(), baseline + 1);
}

TEST_F(TgTest, BreakOutOfScopeLeavesTheBlockAndEndsIt) {
    long baseline = tg_live_tensors();
    int after = 0;
    for (int i = 0; i < 3; i++) {
        TG_SCOPE {
            tg_zeros(TG_SHAPE(4), tg_opts{});
            if (i == 1) break; // leaves the TG_SCOPE block, not the for loop
            after++;
        }
    }
    EXPECT_EQ(after, 2);
    EXPECT_EQ(tg_scope_depth(), 1);
    EXPECT_EQ(tg_live_tensors(), baseline);
}

static bool grad_enabled_inside_no_grad_then_return() {
    TG_NO_GRAD { return tg_is_grad_enabled(); }
    return true;
}

TEST_F(TgTest, ReturnOutOfNoGradRestoresGradMode) {
    ASSERT_TRUE(tg_is_grad_enabled());
    EXPECT_FALSE(grad_enabled_inside_no_grad_then_return());
    EXPECT_TRUE(tg_is_grad_enabled());
}

TEST_F(TgTest, ReportNamesTheLineAndTheCall) {
    bool prev = tg_set_leak_trace(true);
    tg_tensor *a = tg_zeros(TG_SHAPE(2, 3), tg_opts{});
    const int line_a = __LINE__ - 1;
    tg_tensor *s = tg_sum(tg_mul(a, a)); // the product to tg_mul, the sum to tg_sum
    const int line_s = __LINE__ - 1;
    tg_tensor *d = tg_zeros(TG_SHAPE(4), tg_opts{TG_INT64});
    const int line_d = __LINE__ - 1;
    std::string report = live_report();
    tg_set_leak_trace(prev);
    const std::string here = std::string(__FILE__) + ":";
    EXPECT_NE(report.find(here + std::to_string(line_a) + ": tg_zeros: 1 tensor (float32 [2, 3])\n"), std::string::npos)
        << report;
    EXPECT_NE(report.find(here + std::to_string(line_s) + ": tg_mul: 1 tensor (float32 [2, 3])\n"), std::string::npos)
        << report;
    EXPECT_NE(report.find(here + std::to_string(line_s) + ": tg_sum: 1 tensor (float32 [])\n"), std::string::npos)
        << report;
    EXPECT_NE(report.find(here + std::to_string(line_d) + ": tg_zeros: 1 tensor (int64 [4])\n"), std::string::npos)
        << report;
    EXPECT_EQ(report.rfind("tapegrad: ", 0), 0u) << report;
    (void)s, (void)d;
}

TEST_F(TgTest, RecordsAreFreedWithTheirTensors) {
    bool prev = tg_set_leak_trace(true);
    TG_SCOPE {
        for (int i = 0; i < 100; i++) tg_ones(TG_SHAPE(2), tg_opts{});
    }
    const int line = __LINE__ - 2;
    std::string report = live_report();
    tg_set_leak_trace(prev);
    EXPECT_EQ(report.find(std::string(__FILE__) + ":" + std::to_string(line)), std::string::npos) << report;
}

// The exit reports, in a child process (gtest's death tests fork).
TEST(TgLeakDeathTest, ExitReportNamesTheLineThatLeaked) {
    EXPECT_EXIT(
        {
            LEAK_ON_PURPOSE();
            tg_set_leak_trace(true);
            tg_tensor *w = tg_mul_scalar(tg_randn(TG_SHAPE(5, 7), tg_opts{}), 0.1); // set-up code: both leak
            (void)w;
            std::exit(0);
        },
        ::testing::ExitedWithCode(0),
        "tapegrad: [0-9]+ tensors still alive at exit, made by:\n(.*\n)*  .*leak_trace_test.cc:[0-9]+: tg_randn: 1 "
        "tensor \\(float32 \\[5, 7\\]\\)");
}

TEST(TgLeakDeathTest, ExitReportWithoutTraceCountsAndSaysHowToSeeMore) {
    EXPECT_EXIT(
        {
            LEAK_ON_PURPOSE();
            tg_set_leak_trace(false);
            long before = tg_live_tensors();
            tg_tensor *t = tg_ones(TG_SHAPE(3), tg_opts{});
            (void)t;
            std::exit(before == 0 ? 0 : 4);
        },
        ::testing::ExitedWithCode(0),
        "^tapegrad: 1 tensor still alive at exit \\(never released; run with TG_LEAK_TRACE=1 to see the lines that "
        "made it\\)\n$");
}

TEST(TgLeakDeathTest, NoExitReportWhenTurnedOffOrNothingLeaked) {
    EXPECT_EXIT(
        {
            LEAK_ON_PURPOSE();
            setenv("TG_LEAK_TRACE", "0", 1);
            tg_ones(TG_SHAPE(3), tg_opts{});
            std::exit(0);
        },
        ::testing::ExitedWithCode(0), "^$");
    EXPECT_EXIT(
        {
            tg_release(tg_ones(TG_SHAPE(3), tg_opts{}));
            std::exit(0);
        },
        ::testing::ExitedWithCode(0), "^$");
    // exit() inside a scope: its tensors are not leaked, just not freed yet.
    EXPECT_EXIT(
        {
            LEAK_ON_PURPOSE();
            TG_SCOPE {
                tg_ones(TG_SHAPE(3), tg_opts{});
                std::exit(0);
            }
        },
        ::testing::ExitedWithCode(0), "^$");
}
