// TG_PROFILE: per-op forward/backward times, call counts and bytes.
#include <cstdio>
#include <string>

#include "test_util.h"

namespace {
// The table collected so far, as tg_profile_print writes it; the profile starts over.
std::string profile_table() {
    char *buf = nullptr;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    tg_profile_print(f);
    fclose(f);
    std::string table(buf);
    free(buf);
    tg_profile_reset();
    return table;
}
} // namespace

TEST_F(TgTest, ProfileCountsCallsAndBytesPerOp) {
    tg_profile_reset();
    tg_profile_enable(true);
    tg_tensor *x = tg_requires_grad_(tg_ones(TG_SHAPE(1000), tg_opts{}), true);
    for (int i = 0; i < 3; i++) tg_backward(tg_sum(tg_exp(x)));
    tg_profile_enable(false);
    std::string table = profile_table();
    // exp: 3 forward calls of 4000 bytes each (0.0 MB rounded), 3 backward calls.
    size_t row = table.find("\nexp ");
    ASSERT_NE(row, std::string::npos) << table;
    int fwd_calls = 0, bwd_calls = 0;
    double fwd_ms = 0, fwd_mb = 0;
    ASSERT_EQ(sscanf(table.c_str() + row + 4, "%d %lf %lf %d", &fwd_calls, &fwd_ms, &fwd_mb, &bwd_calls), 4) << table;
    EXPECT_EQ(fwd_calls, 3);
    EXPECT_EQ(bwd_calls, 3);
    EXPECT_GE(fwd_ms, 0.0);
    EXPECT_NE(table.find("\nsum "), std::string::npos);
    // exp's backward multiplies by its output: that mul is backward work, not forward.
    row = table.find("\nmul ");
    ASSERT_NE(row, std::string::npos) << table;
    ASSERT_EQ(sscanf(table.c_str() + row + 4, "%d %lf %lf %d", &fwd_calls, &fwd_ms, &fwd_mb, &bwd_calls), 4) << table;
    EXPECT_EQ(fwd_calls, 0) << table;
    EXPECT_EQ(bwd_calls, 3) << table;
}

// The whole backward walk and the whole optimizer step are rows of their own.
TEST_F(TgTest, ProfileRowsForTheBackwardWalkAndTheOptimizerStep) {
    tg_profile_reset();
    tg_profile_enable(true);
    tg_tensor *x = tg_requires_grad_(tg_ones(TG_SHAPE(10), tg_opts{}), true);
    tg_optim *opt = tg_sgd_params(&x, 1, tg_sgd_opts{.lr = 0.1});
    ASSERT_NE(opt, nullptr);
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(tg_backward(tg_sum(tg_exp(x))), TG_OK);
        ASSERT_EQ(tg_optim_step(opt), TG_OK);
        tg_optim_zero_grad(opt);
    }
    tg_profile_enable(false);
    std::string table = profile_table();
    tg_optim_free(opt);
    int fwd_calls = -1, bwd_calls = -1;
    double ms = 0, mb = 0;
    size_t row = table.find("\ntg_backward ");
    ASSERT_NE(row, std::string::npos) << table;
    ASSERT_EQ(sscanf(table.c_str() + row + 12, "%d %lf %lf %d", &fwd_calls, &ms, &mb, &bwd_calls), 4) << table;
    EXPECT_EQ(fwd_calls, 0);
    EXPECT_EQ(bwd_calls, 2);
    row = table.find("\nSGD ");
    ASSERT_NE(row, std::string::npos) << table;
    ASSERT_EQ(sscanf(table.c_str() + row + 4, "%d %lf %lf %d", &fwd_calls, &ms, &mb, &bwd_calls), 4) << table;
    EXPECT_EQ(fwd_calls, 2);
    EXPECT_EQ(bwd_calls, 0);
}
