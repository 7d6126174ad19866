// Handles that know when they are dead (issue 35): a tensor used after the scope that
// made it ended, or released twice, is refused with an error naming it (dtype, shape,
// the call and line that made it under TG_LEAK_TRACE, the TG_SCOPE line that freed it);
// releasing a reference a scope holds is an error, not a double free. Freed structs wait
// in a queue before reuse (core/scope.c), so this works in release builds; sanitizer
// builds free each struct at once (AddressSanitizer reports the use itself), so the
// stale-handle cases are skipped there.
#include <string>

#include "core/thread_exit.h"
#include "test_util.h"

// The source lines of the calls that made the tensors: the wrappers test_util.h leaves out.
#undef TG_NO_TRACE_MACROS
#include "core/trace_macros.h"

namespace {

class StaleHandle : public TgTest {
  protected:
    void SetUp() override {
        TgTest::SetUp();
        trace_was_ = tg_set_leak_trace(true);
    }
    void TearDown() override {
        tg_set_leak_trace(trace_was_);
        TgTest::TearDown();
    }
    bool trace_was_ = false;
};

std::string here(int line) { return std::string(__FILE__) + ":" + std::to_string(line); }

TEST_F(StaleHandle, UseAfterTheScopeNamesTheTensorWhereItWasMadeAndTheScope) {
    if (!TG_RECYCLE_STRUCTS) GTEST_SKIP() << "sanitizer build: AddressSanitizer reports the use after free";
    tg_tensor *kept = nullptr;
    int scope_line = __LINE__ + 1;
    TG_SCOPE {
        kept = tg_ones(TG_SHAPE(2, 3), tg_opts{}); // made_line: the line after the scope's
    }
    int made_line = scope_line + 1;
    tg_clear_error();
    EXPECT_EQ(tg_add(kept, kept), nullptr);
    EXPECT_ERROR_CONTAINS("add: input 0 is a tensor that was freed (float32 [2, 3], made by tg_ones at " +
                          here(made_line) + "), freed by the end of the TG_SCOPE at " + here(scope_line));
    EXPECT_ERROR_CONTAINS("keep it with tg_retain or tg_scope_return");
    tg_clear_error();
    EXPECT_EQ(tg_sum(kept), nullptr);
    EXPECT_ERROR_CONTAINS("input 0 is a tensor that was freed");
    tg_clear_error();
    EXPECT_EQ(tg_data_ptr(kept), nullptr);
    EXPECT_ERROR_CONTAINS("tg_data_ptr: input 0 is a tensor that was freed");
    tg_clear_error();
    EXPECT_TRUE(std::isnan(tg_item(kept)));
    EXPECT_ERROR_CONTAINS("tg_item: input 0 is a tensor that was freed");
    tg_clear_error();
    tg_release(kept); // no double free: refused by name
    EXPECT_ERROR_CONTAINS("tg_release: input 0 is a tensor that was freed (float32 [2, 3]");
    tg_clear_error();
    EXPECT_EQ(tg_retain(kept), nullptr);
    EXPECT_ERROR_CONTAINS("tg_retain: input 0 is a tensor that was freed");
    tg_clear_error();
}

TEST_F(StaleHandle, AStaleHandleStaysRefusedWhileThousandsOfTensorsAreMade) {
    if (!TG_RECYCLE_STRUCTS) GTEST_SKIP() << "sanitizer build";
    tg_tensor *kept = nullptr;
    TG_SCOPE { kept = tg_zeros(TG_SHAPE(4), tg_opts{}); }
    for (int step = 0; step < 30; step++) TG_SCOPE { // 30 steps of 100 tensors: 3,000 structs, inside the queue
            tg_tensor *x = tg_ones(TG_SHAPE(4), tg_opts{});
            for (int i = 0; i < 99; i++) x = tg_add(x, x);
        }
    tg_clear_error();
    EXPECT_EQ(tg_mul(kept, kept), nullptr);
    EXPECT_ERROR_CONTAINS("mul: input 0 is a tensor that was freed (float32 [4], made by tg_zeros");
    tg_clear_error();
}

TEST_F(StaleHandle, ReleasingTwiceNamesTheRelease) {
    if (!TG_RECYCLE_STRUCTS) GTEST_SKIP() << "sanitizer build";
    tg_scope_end(); // out of the fixture's scope: the caller owns what it makes
    tg_tensor *t = tg_full(TG_SHAPE(5), 2.0, tg_opts{TG_FLOAT64});
    tg_release(t);
    tg_clear_error();
    tg_release(t);
    EXPECT_ERROR_CONTAINS("tg_release: input 0 is a tensor that was freed (float64 [5], made by tg_full at");
    EXPECT_ERROR_CONTAINS("freed by the release of its last reference");
    tg_clear_error();
    EXPECT_EQ(tg_relu(t), nullptr);
    EXPECT_ERROR_CONTAINS("input 0 is a tensor that was freed (float64 [5]");
    tg_clear_error();
    tg_scope_begin();
}

TEST_F(StaleHandle, PrintingAFreedTensorSaysSo) {
    if (!TG_RECYCLE_STRUCTS) GTEST_SKIP() << "sanitizer build";
    tg_tensor *kept = nullptr;
    TG_SCOPE { kept = tg_ones(TG_SHAPE(3), tg_opts{}); }
    char *text = nullptr;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    tg_fprint(f, kept);
    fclose(f);
    EXPECT_NE(std::string(text).find("(freed tensor: tg_print: input 0 is a tensor that was freed (float32 [3]"),
              std::string::npos)
        << text;
    free(text);
    tg_clear_error();
}

// Not a use after free, so checked in every build.
TEST_F(StaleHandle, ReleasingATensorItsScopeOwnsIsAnErrorNotADoubleFree) {
    long live = tg_live_tensors();
    TG_SCOPE {
        tg_tensor *t = tg_ones(TG_SHAPE(3), tg_opts{});
        tg_clear_error();
        tg_release(t);
        EXPECT_ERROR_CONTAINS("tg_release: the tensor (float32 [3], made by tg_ones at");
        EXPECT_ERROR_CONTAINS("belongs to the scope that made it, which releases it at its end");
        tg_clear_error();
        EXPECT_EQ(values(t), std::vector<double>({1, 1, 1})); // still alive
        // A reference of one's own is released without a word.
        tg_retain(t);
        tg_release(t);
        EXPECT_FALSE(tg_has_error()) << tg_last_error();
        // So is one handed out of the scope.
        tg_tensor *kept = nullptr;
        TG_SCOPE { kept = tg_scope_return(tg_zeros(TG_SHAPE(2), tg_opts{})); }
        tg_release(kept);
        EXPECT_ERROR_CONTAINS("belongs to the scope"); // the outer scope holds it now
        tg_clear_error();
    }
    EXPECT_EQ(tg_live_tensors(), live);
    tg_scope_end(); // out of the fixture's scope
    tg_tensor *mine = nullptr;
    TG_SCOPE { mine = tg_scope_return(tg_zeros(TG_SHAPE(2), tg_opts{})); } // outermost: now the caller's
    tg_release(mine);
    EXPECT_FALSE(tg_has_error()) << tg_last_error();
    EXPECT_EQ(tg_live_tensors(), live);
    tg_scope_begin();
}

} // namespace
