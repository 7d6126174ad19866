// matmul and linear on CUDA (cuBLAS) against the CPU (OpenBLAS): plain, batched,
// broadcast batch, vectors, transposed (non-contiguous) operands, float64, and
// gradients. Skipped without a GPU.
#include "cuda_test_util.h"
#include "core/cuda/runtime.h"

struct MatmulCase {
    tg_shape a, b;
    const char *what;
};

TEST_F(TgTest, CudaMatmulMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    const MatmulCase cases[] = {
        {TG_SHAPE(64, 784), TG_SHAPE(784, 128), "2-D"},
        {TG_SHAPE(5, 3), TG_SHAPE(3, 7), "small"},
        {TG_SHAPE(4, 6, 5), TG_SHAPE(4, 5, 3), "batched"},
        {TG_SHAPE(2, 3, 6, 5), TG_SHAPE(5, 4), "broadcast batch"},
        {TG_SHAPE(3, 1, 6, 5), TG_SHAPE(2, 5, 4), "both broadcast"},
        {TG_SHAPE(7), TG_SHAPE(7, 3), "vector-matrix"},
        {TG_SHAPE(3, 7), TG_SHAPE(7), "matrix-vector"},
        {TG_SHAPE(9), TG_SHAPE(9), "dot"},
    };
    for (const MatmulCase &c : cases) {
        for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
            tg_tensor *a = random_cpu(c.a, dt, 1), *b = random_cpu(c.b, dt, 2);
            CompareOpts o;
            o.atol = dt == TG_FLOAT32 ? 1e-4 : 1e-10;
            o.rtol = dt == TG_FLOAT32 ? 1e-4 : 1e-10;
            EXPECT_TRUE(
                compare_devices([](const std::vector<tg_tensor *> &in) { return tg_matmul(in[0], in[1]); }, {a, b}, o))
                << c.what << " " << tg_dtype_name(dt);
            if (c.a.ndim >= 2 && c.b.ndim >= 2) {
                EXPECT_TRUE(compare_devices(
                    [](const std::vector<tg_tensor *> &in) {
                        return tg_matmul(non_contiguous(in[0]), non_contiguous(in[1]));
                    },
                    {a, b}, o))
                    << c.what << " " << tg_dtype_name(dt) << " transposed operands";
            }
        }
    }
}

TEST_F(TgTest, CudaLinearMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(64, 784), TG_FLOAT32, 1), *w = random_cpu(TG_SHAPE(100, 784), TG_FLOAT32, 2);
    tg_tensor *b = random_cpu(TG_SHAPE(100), TG_FLOAT32, 3);
    CompareOpts o;
    o.atol = o.rtol = 1e-4;
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_linear(in[0], in[1], in[2]); },
                                {x, w, b}, o));
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_linear(in[0], in[1], nullptr); },
                                {x, w}, o));
}

TEST_F(TgTest, CudaMatmulWithTf32IsCloseButAllowed) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *a = random_cpu(TG_SHAPE(256, 512), TG_FLOAT32, 1), *b = random_cpu(TG_SHAPE(512, 128), TG_FLOAT32, 2);
    tg_set_allow_tf32(true);
    CompareOpts o;
    o.atol = 0.1; // TF32 keeps 10 mantissa bits: products of sums of 512 terms
    o.rtol = 1e-2;
    o.grads = false;
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_matmul(in[0], in[1]); }, {a, b}, o));
    tg_set_allow_tf32(false);
    o.atol = o.rtol = 1e-4;
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_matmul(in[0], in[1]); }, {a, b}, o));
}
