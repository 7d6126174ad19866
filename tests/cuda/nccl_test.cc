// The NCCL half of //dist (distributed/nccl.cu) on one rank, without MPI: a communicator of
// one, an all-reduce (sum, avg, max), a broadcast and an all-gather on the GPU.
// tools/gpu_check.sh runs it on the GPU machine; here it reports SKIPPED.
#include <chrono>
#include <vector>

#include "distributed/nccl.h"
#include "test_util.h"

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Waits (at most 30 s) for a queued collective; then tapegrad's stream waits for it.
tg_status finish(void *work) {
    double deadline = now_s() + 30;
    int state = 0;
    while ((state = tg_nccl_query(work)) == 0 && now_s() < deadline) {
    }
    EXPECT_EQ(state, 1) << tg_last_error();
    return tg_nccl_finish(work);
}

TEST_F(TgTest, NcclOneRankCollectives) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no GPU";
    ASSERT_NE(tg_nccl_init, nullptr) << "a CUDA build without NCCL";
    unsigned char id[TG_NCCL_UNIQUE_ID_BYTES];
    ASSERT_EQ(tg_nccl_unique_id(id), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_nccl_init(id, 0, 1, 0, now_s() + 60), TG_OK) << tg_last_error();
    tg_tensor *x = tg_tensor_to(tensor_f32({1.5f, -2, 3}, TG_SHAPE(3)), tg_cuda(0));
    for (int reduce : {0, 1, 2}) { // sum, avg, max over one rank: unchanged
        void *w = tg_nccl_start(TG_NCCL_ALL_REDUCE, tg_data_ptr(x), tg_data_ptr(x), 3, TG_FLOAT32, reduce, 0);
        ASSERT_NE(w, nullptr) << tg_last_error();
        ASSERT_EQ(finish(w), TG_OK);
        EXPECT_TRUE(tensor_near(tg_tensor_to(x, TG_CPU), {1.5, -2, 3}, 0)) << "reduce " << reduce;
    }
    tg_tensor *d = tg_tensor_to(tensor_f64({4, 5}, TG_SHAPE(2)), tg_cuda(0));
    tg_tensor *gathered = tg_empty(TG_SHAPE(2), tg_opts{TG_FLOAT64, tg_cuda(0)});
    void *w = tg_nccl_start(TG_NCCL_ALL_GATHER, tg_data_ptr(d), tg_data_ptr(gathered), 2, TG_FLOAT64, 0, 0);
    ASSERT_NE(w, nullptr) << tg_last_error();
    ASSERT_EQ(finish(w), TG_OK);
    EXPECT_TRUE(tensor_near(tg_tensor_to(gathered, TG_CPU), {4, 5}, 0));
    w = tg_nccl_start(TG_NCCL_BROADCAST, tg_data_ptr(d), tg_data_ptr(d), 2, TG_FLOAT64, 0, 0);
    ASSERT_NE(w, nullptr);
    ASSERT_EQ(finish(w), TG_OK);
    EXPECT_TRUE(tensor_near(tg_tensor_to(d, TG_CPU), {4, 5}, 0));
    tg_nccl_shutdown(0);
}

} // namespace
