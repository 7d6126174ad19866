// tg_dist collectives on CPU tensors (MPI), run on 2 ranks by tests/distributed/run_mpi.sh.
#include <vector>

#include "tests/distributed/dist_test_util.h"

namespace {

int rank() { return tg_dist_rank(); }

TEST_F(DistTest, RanksAreDistinctAndTheWorldIsTwo) {
    ASSERT_TRUE(tg_dist_is_initialized());
    ASSERT_EQ(tg_dist_world_size(), 2);
    tg_tensor *mine = tensor_i64({rank()}, TG_SHAPE(1));
    tg_tensor *all = tg_dist_all_gather(mine);
    ASSERT_NE(all, nullptr) << tg_last_error();
    EXPECT_EQ(values(all), (std::vector<double>{0, 1}));
    EXPECT_EQ(tg_dist_local_rank(), rank()); // one machine
    EXPECT_EQ(tg_dist_barrier(), TG_OK);
}

TEST_F(DistTest, AllReduceSumAvgMax) {
    // rank 0: [1, -2, 3.5], rank 1: [10, 20, -30]
    std::vector<double> r0 = {1, -2, 3.5}, r1 = {10, 20, -30};
    const std::vector<double> &v = rank() == 0 ? r0 : r1;
    tg_tensor *a = tensor_f64(v, TG_SHAPE(3));
    ASSERT_EQ(tg_dist_all_reduce(a, TG_DIST_SUM), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(a, {11, 18, -26.5}, 0));
    tg_tensor *b = tensor_f32({(float)v[0], (float)v[1], (float)v[2]}, TG_SHAPE(3));
    ASSERT_EQ(tg_dist_all_reduce(b, TG_DIST_AVG), TG_OK);
    EXPECT_TRUE(tensor_near(b, {5.5, 9, -13.25}, 0));
    tg_tensor *c = tensor_f64(v, TG_SHAPE(3));
    ASSERT_EQ(tg_dist_all_reduce(c, TG_DIST_MAX), TG_OK);
    EXPECT_TRUE(tensor_near(c, {10, 20, 3.5}, 0));
    tg_tensor *d = tensor_i64({rank() + 1, 7 * rank()}, TG_SHAPE(2));
    ASSERT_EQ(tg_dist_all_reduce(d, TG_DIST_SUM), TG_OK);
    EXPECT_EQ(values(d), (std::vector<double>{3, 7}));
}

TEST_F(DistTest, BroadcastFromEitherRoot) {
    tg_tensor *t = tensor_f32({(float)rank(), 2.0f * rank() + 1}, TG_SHAPE(2, 1));
    ASSERT_EQ(tg_dist_broadcast(t, 1), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(t, {1, 3}, 0));
    tg_tensor *u = tensor_i64({rank() + 5}, TG_SHAPE(1));
    ASSERT_EQ(tg_dist_broadcast(u, 0), TG_OK);
    EXPECT_EQ(values(u), (std::vector<double>{5}));
}

TEST_F(DistTest, AllGatherStacksAlongDimZero) {
    tg_tensor *t = tensor_f64({10.0 * rank(), 10.0 * rank() + 1, 10.0 * rank() + 2, 10.0 * rank() + 3}, TG_SHAPE(2, 2));
    tg_tensor *all = tg_dist_all_gather(t);
    ASSERT_NE(all, nullptr) << tg_last_error();
    EXPECT_EQ(dims(all), (std::vector<int64_t>{4, 2}));
    EXPECT_EQ(values(all), (std::vector<double>{0, 1, 2, 3, 10, 11, 12, 13}));
}

TEST_F(DistTest, ReduceScatterGivesEachRankItsRows) {
    // Both ranks: rows [r+1, 2(r+1)], [3(r+1), 4(r+1)]; the sum over ranks is 3x rank 0's.
    double k = rank() + 1;
    tg_tensor *t = tensor_f64({k, 2 * k, 3 * k, 4 * k}, TG_SHAPE(2, 2));
    tg_tensor *part = tg_dist_reduce_scatter(t, TG_DIST_SUM);
    ASSERT_NE(part, nullptr) << tg_last_error();
    EXPECT_EQ(dims(part), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(values(part), rank() == 0 ? (std::vector<double>{3, 6}) : (std::vector<double>{9, 12}));
    tg_tensor *avg = tg_dist_reduce_scatter(t, TG_DIST_AVG);
    ASSERT_NE(avg, nullptr);
    EXPECT_EQ(values(avg), rank() == 0 ? (std::vector<double>{1.5, 3}) : (std::vector<double>{4.5, 6}));
}

TEST_F(DistTest, NonBlockingAllReduceOverlapsOtherWork) {
    tg_tensor *t = tensor_f32(std::vector<float>(1000, (float)(rank() + 1)), TG_SHAPE(1000));
    tg_dist_work *w = tg_dist_all_reduce_start(t, TG_DIST_AVG);
    ASSERT_NE(w, nullptr) << tg_last_error();
    tg_tensor *other = tg_sum(tg_ones(TG_SHAPE(100), tg_opts{})); // work meanwhile
    EXPECT_TRUE(tensor_near(other, {100}, 0));
    (void)tg_dist_test(w);
    ASSERT_EQ(tg_dist_wait(w), TG_OK);
    EXPECT_TRUE(tensor_near(t, std::vector<double>(1000, 1.5), 0));
    EXPECT_EQ(tg_dist_wait(nullptr), TG_OK);
}

// Bad arguments fail on every rank before any message is sent, so the group stays usable.
TEST_F(DistTest, BadArgumentsAreErrorsNamingTheCall) {
    tg_tensor *m = tg_zeros(TG_SHAPE(2, 3), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_dist_all_reduce(tg_transpose(m, 0, 1), TG_DIST_SUM), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_dist_all_reduce: the tensor must be contiguous");
    tg_clear_error();
    EXPECT_EQ(tg_dist_all_reduce(tg_zeros(TG_SHAPE(2), (tg_opts){.dtype = TG_BOOL}), TG_DIST_SUM), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_dist_all_reduce: dtype bool is not supported");
    tg_clear_error();
    EXPECT_EQ(tg_dist_all_reduce(tg_zeros(TG_SHAPE(2), (tg_opts){.dtype = TG_INT64}), TG_DIST_AVG), TG_ERROR);
    EXPECT_ERROR_CONTAINS("TG_DIST_AVG needs a floating dtype, not int64");
    tg_clear_error();
    EXPECT_EQ(tg_dist_broadcast(m, 2), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_dist_broadcast: root 2 is not a rank (world size 2)");
    tg_clear_error();
    EXPECT_EQ(tg_dist_reduce_scatter(tg_zeros(TG_SHAPE(3), tg_opts{}), TG_DIST_SUM), nullptr);
    EXPECT_ERROR_CONTAINS("tg_dist_reduce_scatter: dim 0 (3) must be divisible by the world size 2");
    tg_clear_error();
    EXPECT_EQ(tg_dist_all_gather(tg_sum(tg_ones(TG_SHAPE(2), tg_opts{}))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_dist_all_gather: the tensor is 0-dim");
    tg_clear_error();
    EXPECT_EQ(tg_dist_all_reduce(nullptr, TG_DIST_SUM), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_dist_all_reduce");
    tg_clear_error();
    EXPECT_EQ(tg_dist_init(), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_dist_init: already initialized");
    // Still in step: a collective after the errors works.
    tg_tensor *one = tensor_f64({1}, TG_SHAPE(1));
    ASSERT_EQ(tg_dist_all_reduce(one, TG_DIST_SUM), TG_OK);
    EXPECT_TRUE(tensor_near(one, {2}, 0));
}

} // namespace
