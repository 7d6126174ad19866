// Ranks that disagree (tests/distributed/run_mpi.sh, 2 ranks; issue 35): models of other shapes
// or with an extra layer, collectives of other sizes, dtypes or kinds, a rank a step
// behind. Each is an error on both ranks within 10 s that names what each rank has, and
// nothing is written into the tensors; the group stays usable (every rank made the same
// number of calls), so one binary runs every case.
#include <chrono>
#include <string>
#include <vector>

#include "tests/distributed/dist_test_util.h"

namespace {

class DistMismatch : public DistTest {
  protected:
    void SetUp() override {
        DistTest::SetUp();
        tg_dist_set_timeout(20.0);
        start_ = std::chrono::steady_clock::now();
    }
    double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
    std::chrono::steady_clock::time_point start_;
};

std::vector<double> all_values(tg_module *m) {
    int n = 0;
    tg_tensor *const *p = tg_parameters(m, &n);
    std::vector<double> out;
    for (int i = 0; i < n; i++)
        for (double v : values(p[i])) out.push_back(v);
    return out;
}

TEST_F(DistMismatch, ModelsWithTheSameSizeButOtherShapesAreRefused) {
    int rank = tg_dist_rank();
    tg_manual_seed(10 + rank); // different weights: a broadcast would show
    tg_module *net = rank == 0 ? tg_nn_linear(4, 6, tg_linear_opts{}) : tg_nn_linear(6, 4, tg_linear_opts{});
    std::vector<double> before = all_values(net);
    tg_clear_error();
    tg_ddp *ddp = tg_ddp_new(net, tg_ddp_opts{});
    EXPECT_EQ(ddp, nullptr);
    EXPECT_ERROR_CONTAINS("tg_ddp_new: the ranks' models differ");
    EXPECT_ERROR_CONTAINS(
        "rank 0 has parameter weight float32 [6, 4] where rank 1 has parameter weight float32 [4, 6]");
    EXPECT_EQ(all_values(net), before) << "nothing may be broadcast";
    EXPECT_LT(seconds(), 10.0);
    tg_clear_error();
    tg_module_free(net);
}

TEST_F(DistMismatch, AnExtraLayerIsRefusedAtOnce) {
    int rank = tg_dist_rank();
    tg_module *net = rank == 0 ? TG_NN_SEQUENTIAL(tg_nn_linear(4, 4, tg_linear_opts{}))
                               : TG_NN_SEQUENTIAL(tg_nn_linear(4, 4, tg_linear_opts{}), tg_nn_relu(),
                                                  tg_nn_linear(4, 2, tg_linear_opts{}));
    tg_clear_error();
    EXPECT_EQ(tg_ddp_new(net, tg_ddp_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("rank 0 has nothing more where rank 1 has parameter 2.weight float32 [2, 4]");
    EXPECT_LT(seconds(), 10.0) << "not after TG_DIST_TIMEOUT";
    tg_clear_error();
    tg_module_free(net);
}

TEST_F(DistMismatch, BuffersAreComparedToo) {
    int rank = tg_dist_rank();
    tg_module *net = TG_NN_SEQUENTIAL(tg_nn_linear(4, 3, tg_linear_opts{}),
                                      rank == 0 ? tg_nn_batch_norm1d(3, tg_batch_norm_opts{}) : tg_nn_relu());
    tg_clear_error();
    EXPECT_EQ(tg_ddp_new(net, tg_ddp_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("the ranks' models differ");
    EXPECT_ERROR_CONTAINS("rank 0 has parameter 1.weight float32 [3] where rank 1 has nothing more");
    tg_clear_error();
    tg_module_free(net);
}

TEST_F(DistMismatch, AllReducesOfOtherSizesFailOnEveryRankAndTouchNothing) {
    int rank = tg_dist_rank();
    tg_tensor *t = tg_full(TG_SHAPE(rank == 0 ? 4 : 5), 1.0 + rank, tg_opts{});
    std::vector<double> before = values(t);
    tg_clear_error();
    EXPECT_EQ(tg_dist_all_reduce(t, TG_DIST_SUM), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_dist_all_reduce: the ranks' collectives differ");
    EXPECT_ERROR_CONTAINS("all_reduce of float32 [4]");
    EXPECT_ERROR_CONTAINS("all_reduce of float32 [5]");
    EXPECT_ERROR_CONTAINS(rank == 0 ? "rank 0 (this rank)" : "rank 1 (this rank)");
    EXPECT_EQ(values(t), before);
    EXPECT_LT(seconds(), 10.0);
    // The group is still usable: the next matching call works.
    tg_clear_error();
    tg_tensor *u = tg_full(TG_SHAPE(3), 1.0 + rank, tg_opts{});
    ASSERT_EQ(tg_dist_all_reduce(u, TG_DIST_SUM), TG_OK) << tg_last_error();
    EXPECT_EQ(values(u), std::vector<double>({3, 3, 3}));
}

TEST_F(DistMismatch, OtherDtypesFail) {
    int rank = tg_dist_rank();
    tg_tensor *t = tg_ones(TG_SHAPE(4), tg_opts{rank == 0 ? TG_FLOAT32 : TG_FLOAT64});
    tg_clear_error();
    EXPECT_EQ(tg_dist_broadcast(t, 0), TG_ERROR);
    EXPECT_ERROR_CONTAINS("broadcast of float32 [4]");
    EXPECT_ERROR_CONTAINS("broadcast of float64 [4]");
    EXPECT_EQ(values(t), std::vector<double>({1, 1, 1, 1}));
    tg_clear_error();
}

TEST_F(DistMismatch, ABroadcastMetByAnAllReduceFails) {
    int rank = tg_dist_rank();
    tg_tensor *t = tg_full(TG_SHAPE(2, 3), 7.0 + rank, tg_opts{});
    tg_clear_error();
    tg_status status = rank == 0 ? tg_dist_broadcast(t, 0) : tg_dist_all_reduce(t, TG_DIST_SUM);
    EXPECT_EQ(status, TG_ERROR);
    EXPECT_ERROR_CONTAINS("rank 0");
    EXPECT_ERROR_CONTAINS("broadcast of float32 [2, 3]");
    EXPECT_ERROR_CONTAINS("all_reduce of float32 [2, 3]");
    EXPECT_EQ(values(t), std::vector<double>(6, 7.0 + rank));
    tg_clear_error();
}

// A rank that skips a training step pairs its next collectives with the other's later
// ones: here rank 1 goes on to save (a barrier first) while rank 0 reduces a bucket of
// its extra step. Both fail at once, and rank 0's weights keep their values.
TEST_F(DistMismatch, ARankThatSkippedAStepFailsInsteadOfMixingSteps) {
    int rank = tg_dist_rank();
    tg_manual_seed(4);
    tg_module *net = tg_nn_linear(4, 2, tg_linear_opts{});
    tg_ddp *ddp = tg_ddp_new(net, tg_ddp_opts{});
    ASSERT_NE(ddp, nullptr) << tg_last_error();
    tg_tensor *x = tg_full(TG_SHAPE(3, 4), 0.5 + rank, tg_opts{});
    int steps = rank == 0 ? 3 : 2;
    tg_status last = TG_OK;
    for (int s = 0; s < steps; s++) TG_SCOPE {
            tg_module_zero_grad(net);
            last = tg_backward(tg_sum(tg_ddp_forward(ddp, x)));
        }
    std::string message = tg_has_error() ? tg_last_error() : "";
    tg_clear_error();
    if (rank == 0) {
        EXPECT_EQ(last, TG_ERROR); // its third step's all-reduce met rank 1's barrier
        (void)tg_dist_barrier();   // the barrier rank 1 is about to call second
        tg_clear_error();
        EXPECT_NE(message.find("all_reduce of bucket 0 of 1 (10 elements) in step 3"), std::string::npos) << message;
        EXPECT_NE(message.find("rank 1: call #"), std::string::npos) << message;
        EXPECT_NE(message.find("barrier"), std::string::npos) << message;
    } else {
        EXPECT_EQ(last, TG_OK);
        EXPECT_EQ(tg_dist_barrier(), TG_ERROR);
        EXPECT_ERROR_CONTAINS("all_reduce of bucket 0 of 1 (10 elements) in step 3");
        tg_clear_error();
        EXPECT_EQ(tg_dist_barrier(), TG_OK) << tg_last_error(); // in step again
    }
    EXPECT_LT(seconds(), 10.0);
    tg_ddp_free(ddp);
    tg_module_free(net);
}

} // namespace
