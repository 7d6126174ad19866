// Errors, not hangs (tests/distributed/run_mpi.sh, 2 ranks): when one rank fails and stops
// calling collectives, the other's collective fails with a message within
// TG_DIST_TIMEOUT. The group is broken afterwards, so this binary has one test.
#include <chrono>

#include <unistd.h>

#include "tests/distributed/dist_test_util.h"

namespace {

class DistErrors : public DistTest {
  protected:
    void SetUp() override {
        DistTest::SetUp();
        sync_outcome_ = false; // the group is broken on purpose
    }
};

TEST_F(DistErrors, ARankThatFailsMakesTheOthersFailWithinTheTimeout) {
    tg_dist_set_timeout(2.0);
    tg_module *net = tg_nn_linear(4, 2, tg_linear_opts{});
    tg_ddp *ddp = tg_ddp_new(net, tg_ddp_opts{});
    ASSERT_NE(ddp, nullptr) << tg_last_error();
    if (tg_dist_rank() == 1) {
        // Rank 1 raises an error (a batch of the wrong width) and gives up on the step,
        // as a program that checks its errors does: no backward, no all-reduce.
        tg_clear_error();
        tg_tensor *out = tg_ddp_forward(ddp, tg_ones(TG_SHAPE(8, 5), tg_opts{}));
        EXPECT_EQ(out, nullptr);
        EXPECT_ERROR_CONTAINS("input [8, 5] must end in 4 features");
        // Stays away (no collective, no tg_dist_finalize, whose agreement would end rank
        // 0's wait at once: tests/distributed/mismatch_mpi.cc) until rank 0 has timed out.
        sleep(4);
    } else {
        // Rank 0 trains on: its backward's gradient all-reduce waits for rank 1 in vain.
        auto start = std::chrono::steady_clock::now();
        tg_clear_error();
        tg_tensor *loss = tg_sum(tg_ddp_forward(ddp, tg_ones(TG_SHAPE(8, 4), tg_opts{})));
        EXPECT_EQ(tg_backward(loss), TG_ERROR);
        double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // Rank 0 checks every call's agreement, so it names the rank it waits for.
        EXPECT_ERROR_CONTAINS("rank 0 of 2 waited 2 s (TG_DIST_TIMEOUT) at its call #3, all_reduce of bucket 0 of 1 "
                              "(10 elements) in step 1 for rank 1 (no other ranks arrived): it failed, died or "
                              "stopped calling the same collectives");
        EXPECT_GE(waited, 2.0);
        EXPECT_LT(waited, 10.0) << "the error came long after the timeout";
        // The group is broken now: every later collective fails at once.
        tg_clear_error();
        start = std::chrono::steady_clock::now();
        EXPECT_EQ(tg_dist_barrier(), TG_ERROR);
        EXPECT_ERROR_CONTAINS("tg_dist_barrier: the process group of rank 0 is broken by an earlier failure");
        EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5);
    }
    tg_ddp_free(ddp);
    tg_module_free(net);
}

} // namespace
