// select, slice with a step, diagonal and the splits on cuda:0 against the CPU:
// views only change strides, and the gradient is written through the same view, so
// both devices run the same geometry (ops/slice.c) and the device's strided copy.
#include "cuda_test_util.h"

namespace {

TEST_F(TgTest, CudaSlicesMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(3, 4, 5), TG_FLOAT32, 1);
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_select(in[0], 1, -2); }, {x}));
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_slice(in[0], 2, 1, 5, 2); }, {x}));
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_diagonal(in[0], -1, 2, 1); }, {x}));
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) {
            tg_tensor *p[4];
            return tg_chunk(in[0], 3, 2, p, 4) == 3 ? tg_add(tg_sum_dim(p[0], 2, false), tg_sum_dim(p[2], 2, false))
                                                    : nullptr;
        },
        {x}));
}

TEST_F(TgTest, CudaRearrangingOpsMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(2, 3, 4), TG_FLOAT32, 2);
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) {
            int64_t r[4] = {2, 1, 1, 2};
            return tg_repeat(in[0], r, 4);
        },
        {x}));
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_roll(in[0], -3, 2); }, {x}));
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_movedim(in[0], 2, 0); }, {x}));
}

// pad's index modes and repeat_interleave with a tensor upload a host-built index.
TEST_F(TgTest, CudaPadAndRepeatInterleaveMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(2, 3, 4), TG_FLOAT32, 16);
    for (tg_pad_mode mode : {TG_PAD_CONSTANT, TG_PAD_REFLECT, TG_PAD_REPLICATE, TG_PAD_CIRCULAR})
        EXPECT_TRUE(compare_devices(
            [mode](const std::vector<tg_tensor *> &in) {
                int64_t p[4] = {2, -1, 1, 2};
                return tg_pad(in[0], p, 4, mode, 0);
            },
            {x}))
            << "mode " << mode;
    EXPECT_TRUE(
        compare_devices([](const std::vector<tg_tensor *> &in) { return tg_repeat_interleave(in[0], 3, 1); }, {x}));
    tg_tensor *r = tensor_i64({2, 0, 1, 3}, TG_SHAPE(4));
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) { return tg_repeat_interleave_tensor(in[0], in[1], 2); }, {x, r}));
}

// Boolean and advanced indexing read positions on the host, then index on the device.
TEST_F(TgTest, CudaMaskedSelectAndIndexPutMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(3, 4, 2), TG_FLOAT32, 17);
    tg_tensor *m = tg_gt_scalar(random_cpu(TG_SHAPE(3, 4), TG_FLOAT32, 18), 0);
    EXPECT_TRUE(
        compare_devices([](const std::vector<tg_tensor *> &in) { return tg_index_mask(in[0], in[1]); }, {x, m}));
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) { return tg_masked_select(in[0], tg_unsqueeze(in[1], 2)); }, {x, m}));
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_nonzero(in[0]); }, {m}));
    // index_put: the mask alone (values [3, 2]), and the mask beside an index of three along
    // the last dim (values [3]); the mask has three true elements.
    tg_tensor *m3 = tg_gt_scalar(tensor_f32({0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0}, TG_SHAPE(3, 4)), 0);
    for (int nidx : {1, 2})
        for (bool accumulate : {false, true}) {
            tg_tensor *v = random_cpu(nidx == 1 ? TG_SHAPE(3, 2) : TG_SHAPE(3), TG_FLOAT32, 19);
            EXPECT_TRUE(compare_devices(
                [nidx, accumulate](const std::vector<tg_tensor *> &in) {
                    tg_tensor *idx[2] = {in[1], tg_tensor_to(tensor_i64({1, 1, -1}, TG_SHAPE(3)), tg_device_of(in[0]))};
                    return tg_index_put(in[0], idx, nidx, in[2], accumulate);
                },
                {x, m3, v}))
                << nidx << " indices, accumulate " << accumulate;
        }
}

TEST_F(TgTest, CudaEinsumMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *q = random_cpu(TG_SHAPE(2, 3, 4, 5), TG_FLOAT32, 20),
              *k = random_cpu(TG_SHAPE(2, 3, 6, 5), TG_FLOAT32, 21);
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) { return tg_einsum("bhqd,bhkd->bhqk", in.data(), 2); }, {q, k}));
    tg_tensor *s = random_cpu(TG_SHAPE(4, 4, 2), TG_FLOAT32, 22);
    EXPECT_TRUE(
        compare_devices([](const std::vector<tg_tensor *> &in) { return tg_einsum("iij->ji", in.data(), 1); }, {s}));
}

TEST_F(TgTest, CudaCompositeOpsMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(2, 3, 4), TG_FLOAT32, 3);
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_tril(in[0], -1); }, {x}));
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) {
            int d[2] = {0, 2};
            return tg_flip(in[0], d, 2);
        },
        {x}));
    tg_tensor *m = random_cpu(TG_SHAPE(3, 5), TG_FLOAT32, 4), *n = random_cpu(TG_SHAPE(5, 2), TG_FLOAT32, 5);
    tg_tensor *c = random_cpu(TG_SHAPE(2), TG_FLOAT32, 6);
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) { return tg_addmm(in[0], in[1], in[2], 0.5, 2.0); }, {c, m, n}));
}

TEST_F(TgTest, CudaCumsumMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(3, 257, 5), TG_FLOAT32, 8);
    for (int dim : {0, 1, 2})
        EXPECT_TRUE(compare_devices([dim](const std::vector<tg_tensor *> &in) { return tg_cumsum(in[0], dim); }, {x},
                                    CompareOpts{1e-6, 1e-6, true}))
            << "dim " << dim;
    tg_tensor *i = tg_cast(random_cpu(TG_SHAPE(4, 9), TG_FLOAT64, 9, -50, 50), TG_INT32);
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_cumsum(in[0], 1); }, {i}));
}

// cumprod runs the same TG_SCAN_LINE as cumsum; its gradient with zeros and prod's
// are compositions (any_zero reads a count back to the host).
TEST_F(TgTest, CudaCumprodAndProdMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(3, 17, 5), TG_FLOAT32, 12, 0.6, 1.4);
    for (int dim : {0, 1, 2}) {
        EXPECT_TRUE(compare_devices([dim](const std::vector<tg_tensor *> &in) { return tg_cumprod(in[0], dim); }, {x},
                                    CompareOpts{1e-5, 1e-5, true}))
            << "dim " << dim;
        EXPECT_TRUE(
            compare_devices([dim](const std::vector<tg_tensor *> &in) { return tg_prod_dim(in[0], dim, dim == 1); },
                            {x}, CompareOpts{1e-5, 1e-5, true}))
            << "dim " << dim;
    }
    tg_tensor *z = tg_mul(random_cpu(TG_SHAPE(4, 6), TG_FLOAT64, 13),
                          tg_cast(tg_gt_scalar(random_cpu(TG_SHAPE(4, 6), TG_FLOAT64, 14), -1.2), TG_FLOAT64));
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_cumprod(in[0], 1); }, {z}));
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_prod(in[0]); }, {z}));
    tg_tensor *i = tg_cast(random_cpu(TG_SHAPE(4, 9), TG_FLOAT64, 15, -4, 4), TG_INT64);
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_cumprod(in[0], 1); }, {i}));
}

TEST_F(TgTest, CudaAmaxAndTensorClampMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(3, 6, 5), TG_FLOAT32, 10);
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) {
            int d[2] = {0, 2};
            return tg_amax(in[0], d, 2, true);
        },
        {x}));
    tg_tensor *lo = random_cpu(TG_SHAPE(5), TG_FLOAT32, 11, -1, 0);
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) { return tg_clamp_tensor(in[0], in[1], nullptr); }, {x, lo}));
}

TEST_F(TgTest, CudaMoreUnaryOpsMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(1000), TG_FLOAT64, 12, -5, 5);
    using Fn = tg_tensor *(*)(tg_tensor *);
    for (Fn fn : {(Fn)tg_expm1, (Fn)tg_floor, (Fn)tg_round, (Fn)tg_logsigmoid, (Fn)tg_selu, (Fn)tg_mish,
                  (Fn)tg_hardswish, (Fn)tg_hardsigmoid, (Fn)tg_softsign})
        EXPECT_TRUE(compare_devices([fn](const std::vector<tg_tensor *> &in) { return fn(in[0]); }, {x},
                                    CompareOpts{1e-12, 1e-12, true}));
}

} // namespace
