// binary_cross_entropy, kl_div, smooth_l1 / huber, triplet_margin_loss and the
// distances on cuda:0 against the CPU. They are compositions of ops with CUDA paths
// (and bce's backward is written with ops), so this checks that every piece they use
// exists on the device, including bce's range check (a count read back to the host).
#include "cuda_test_util.h"

namespace {

TEST_F(TgTest, CudaLossesAndDistancesMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *p = random_cpu(TG_SHAPE(3, 4), TG_FLOAT32, 1, 0.05, 0.95);
    tg_tensor *y = random_cpu(TG_SHAPE(3, 4), TG_FLOAT32, 2, 0, 1);
    tg_tensor *a = random_cpu(TG_SHAPE(3, 4), TG_FLOAT32, 3), *b = random_cpu(TG_SHAPE(3, 4), TG_FLOAT32, 4);
    tg_tensor *c = random_cpu(TG_SHAPE(3, 4), TG_FLOAT32, 5);
    EXPECT_TRUE(compare_devices([](auto &in) { return tg_binary_cross_entropy(in[0], in[1]); }, {p, y}));
    EXPECT_TRUE(compare_devices(
        [](auto &in) {
            tg_kl_opts o = {};
            o.reduction = TG_REDUCTION_BATCHMEAN;
            return tg_kl_div_opts(tg_log_softmax(in[0], 1), in[1], o);
        },
        {a, y}));
    EXPECT_TRUE(compare_devices([](auto &in) { return tg_smooth_l1_loss(in[0], in[1]); }, {a, b}));
    EXPECT_TRUE(compare_devices([](auto &in) { return tg_huber_loss(in[0], in[1]); }, {a, b}));
    EXPECT_TRUE(compare_devices([](auto &in) { return tg_cosine_similarity(in[0], in[1], 1, 1e-8); }, {a, b}));
    EXPECT_TRUE(compare_devices([](auto &in) { return tg_pairwise_distance(in[0], in[1], 3, 1e-6, true); }, {a, b}));
    EXPECT_TRUE(compare_devices(
        [](auto &in) {
            tg_triplet_opts o = {};
            o.swap = true;
            return tg_triplet_margin_loss_opts(in[0], in[1], in[2], o);
        },
        {a, b, c}));
    tg_clear_error();
    EXPECT_EQ(tg_binary_cross_entropy(on_cuda(a), on_cuda(y)), nullptr);
    EXPECT_ERROR_CONTAINS("tg_binary_cross_entropy: all elements of input should be between 0 and 1");
}

} // namespace
