// sort, topk, kthvalue, median on cuda:0 against the CPU: ops/cuda/sort.cu runs the
// same TG_SORT_LINE (ops/sort_line.h), so values and indices must agree exactly, ties
// and NaN included; the gradients go through the device's gather / scatter_add.
#include <cmath>

#include "cuda_test_util.h"

namespace {

TEST_F(TgTest, CudaSortMatchesCpuExactly) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    CompareOpts exact;
    exact.atol = exact.rtol = 0;
    tg_tensor *x = random_cpu(TG_SHAPE(3, 130, 5), TG_FLOAT32, 1);
    // ties: values rounded to a few levels; NaN in one line
    tg_tensor *ties = tg_round(random_cpu(TG_SHAPE(6, 33), TG_FLOAT64, 2, -2, 2));
    tg_tensor *nan_row = tg_reshape(tensor_f64({NAN, 1, NAN, -1, 0, 2, NAN, 1}, TG_SHAPE(8)), TG_SHAPE(1, 8));
    for (bool descending : {false, true}) {
        for (int dim : {0, 1, 2})
            EXPECT_TRUE(compare_devices(
                [dim, descending](const std::vector<tg_tensor *> &in) {
                    tg_tensor *idx = nullptr;
                    tg_tensor *v = tg_sort(in[0], dim, descending, &idx);
                    return v ? tg_add(v, tg_cast(idx, tg_dtype_of(v))) : nullptr; // both outputs in one
                },
                {x}, exact))
                << "dim " << dim;
        for (tg_tensor *t : {ties, nan_row})
            EXPECT_TRUE(compare_devices(
                [descending](const std::vector<tg_tensor *> &in) { return tg_argsort(in[0], 1, descending); }, {t},
                exact));
    }
    tg_tensor *xi = tg_cast(random_cpu(TG_SHAPE(4, 50), TG_FLOAT64, 3, -9, 9), TG_INT32);
    EXPECT_TRUE(
        compare_devices([](const std::vector<tg_tensor *> &in) { return tg_argsort(in[0], 1, false); }, {xi}, exact));
}

TEST_F(TgTest, CudaTopkKthvalueMedianMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    CompareOpts exact;
    exact.atol = exact.rtol = 0;
    tg_tensor *x = tg_round(random_cpu(TG_SHAPE(5, 40), TG_FLOAT32, 4, -3, 3)); // ties
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) { return tg_topk(in[0], 7, 1, true, true, nullptr); }, {x}, exact));
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) {
            tg_tensor *idx = nullptr;
            tg_tensor *v = tg_kthvalue(in[0], 11, 1, false, &idx);
            return v ? tg_add(v, tg_cast(idx, TG_FLOAT32)) : nullptr;
        },
        {x}, exact));
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) {
            tg_tensor *idx = nullptr;
            tg_tensor *v = tg_median_dim(in[0], 0, true, &idx);
            return v ? tg_add(v, tg_cast(idx, TG_FLOAT32)) : nullptr;
        },
        {x}, exact));
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_median(in[0]); }, {x}, exact));
}

} // namespace
