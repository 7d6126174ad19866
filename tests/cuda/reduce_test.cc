// Reductions on CUDA against the CPU: sum/mean over every layout the kernels
// choose between (rows, columns, split long rows and columns, full sums, strided
// inputs), max/min/argmax, var/std, logsumexp and norms. Skipped without a GPU.
#include <cmath>
#include <vector>

#include "cuda_test_util.h"

struct DimsCase {
    tg_shape shape;
    std::vector<int> dims; // empty: all
    const char *what;
};

static std::vector<DimsCase> dims_cases() {
    return {
        {TG_SHAPE(64, 10), {1}, "rows, short"},
        {TG_SHAPE(64, 10), {0}, "columns"},
        {TG_SHAPE(8, 5000), {1}, "rows"},
        {TG_SHAPE(3, 100003), {1}, "few long rows: split"},
        {TG_SHAPE(20000, 7), {0}, "few long columns: split"},
        {TG_SHAPE(1000, 1000), {}, "full sum: split"},
        {TG_SHAPE(6, 7, 8, 9), {1, 3}, "two separated dims"},
        {TG_SHAPE(6, 7, 8, 9), {0, 2}, "outer dims"},
        {TG_SHAPE(6, 7, 8, 9), {2, 3}, "trailing dims merged"},
        {TG_SHAPE(5, 1, 4), {1}, "a size-1 dim"},
        {TG_SHAPE(7), {0}, "a vector"},
        {TG_SHAPE(), {}, "a scalar"},
    };
}

TEST_F(TgTest, CudaSumAndMeanMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (const DimsCase &c : dims_cases()) {
        for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
            tg_tensor *x = random_cpu(c.shape, dt, 3);
            CompareOpts o;
            o.atol = dt == TG_FLOAT32 ? 1e-3 : 1e-9; // sums of up to 1e6 terms
            o.rtol = dt == TG_FLOAT32 ? 1e-5 : 1e-12;
            const int *d = c.dims.data();
            int n = (int)c.dims.size();
            for (bool keepdim : {false, true}) {
                EXPECT_TRUE(compare_devices(
                    [&](const std::vector<tg_tensor *> &in) { return tg_sum_dims(in[0], d, n, keepdim); }, {x}, o))
                    << "sum " << c.what << " " << tg_dtype_name(dt) << " keepdim " << keepdim;
                EXPECT_TRUE(compare_devices(
                    [&](const std::vector<tg_tensor *> &in) { return tg_mean_dims(in[0], d, n, keepdim); }, {x}, o))
                    << "mean " << c.what << " " << tg_dtype_name(dt);
            }
            if (c.shape.ndim >= 2) {
                EXPECT_TRUE(compare_devices(
                    [&](const std::vector<tg_tensor *> &in) { return tg_sum_dims(non_contiguous(in[0]), d, n, false); },
                    {x}, o))
                    << "sum " << c.what << " " << tg_dtype_name(dt) << " non-contiguous";
            }
        }
    }
}

TEST_F(TgTest, CudaIntegerSumIsExact) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_INT64, TG_INT32, TG_UINT8, TG_BOOL}) {
        tg_tensor *x = random_cpu(TG_SHAPE(300, 301), dt, 2, 0, 100);
        CompareOpts o;
        o.atol = o.rtol = 0;
        EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_sum(in[0]); }, {x}, o))
            << tg_dtype_name(dt);
        EXPECT_TRUE(
            compare_devices([](const std::vector<tg_tensor *> &in) { return tg_sum_dim(in[0], 0, false); }, {x}, o))
            << tg_dtype_name(dt);
    }
}

TEST_F(TgTest, CudaSumToUndoesBroadcasting) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *g = random_cpu(TG_SHAPE(4096, 256), TG_FLOAT32, 5); // a bias gradient at batch 4096
    CompareOpts o;
    o.atol = 1e-3;
    EXPECT_TRUE(
        compare_devices([](const std::vector<tg_tensor *> &in) { return tg_sum_to(in[0], TG_SHAPE(256)); }, {g}, o));
}

TEST_F(TgTest, CudaMaxMinArgmaxMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (const DimsCase &c : dims_cases()) {
        if (c.dims.size() != 1) continue;
        for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64, TG_INT64, TG_INT32, TG_UINT8}) {
            tg_tensor *x = random_cpu(c.shape, dt, 9, 0, dt == TG_UINT8 ? 50 : 1000); // ties for integers
            CompareOpts o;
            o.atol = o.rtol = 0;
            int d = c.dims[0];
            for (bool is_max : {true, false}) {
                EXPECT_TRUE(compare_devices(
                    [&](const std::vector<tg_tensor *> &in) {
                        tg_tensor *idx = nullptr;
                        tg_tensor *v = is_max ? tg_max_dim(in[0], d, false, &idx) : tg_min_dim(in[0], d, false, &idx);
                        return v ? idx : nullptr;
                    },
                    {x}, o))
                    << (is_max ? "argmax " : "argmin ") << c.what << " " << tg_dtype_name(dt);
                EXPECT_TRUE(compare_devices(
                    [&](const std::vector<tg_tensor *> &in) {
                        return is_max ? tg_max_dim(in[0], d, true, nullptr) : tg_min_dim(in[0], d, true, nullptr);
                    },
                    {x}, o))
                    << (is_max ? "max " : "min ") << c.what << " " << tg_dtype_name(dt);
            }
        }
    }
    tg_tensor *x = random_cpu(TG_SHAPE(300, 700), TG_FLOAT32, 4);
    CompareOpts o;
    o.atol = o.rtol = 0;
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_max(in[0]); }, {x}, o));
    EXPECT_TRUE(
        compare_devices([](const std::vector<tg_tensor *> &in) { return tg_min(non_contiguous(in[0])); }, {x}, o));
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_argmax(in[0], 1, false); }, {x}, o));
}

// The CPU takes max/min/argmax of bool tensors (as uint8); CUDA must too.
TEST_F(TgTest, CudaMaxMinOfBoolMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = tg_cast(random_cpu(TG_SHAPE(6, 9), TG_UINT8, 3, 0, 2), TG_BOOL); // about half true
    CompareOpts o;
    o.atol = o.rtol = 0;
    for (int d : {0, 1}) {
        EXPECT_TRUE(compare_devices(
            [&](const std::vector<tg_tensor *> &in) { return tg_max_dim(in[0], d, false, nullptr); }, {x}, o))
            << "max dim " << d;
        EXPECT_TRUE(
            compare_devices([&](const std::vector<tg_tensor *> &in) { return tg_argmin(in[0], d, false); }, {x}, o))
            << "argmin dim " << d;
    }
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_max(in[0]); }, {x}, o));
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_min(in[0]); }, {x}, o));
}

TEST_F(TgTest, CudaMaxPropagatesNanAndTakesFirstIndexOnTies) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = on_cuda(tensor_f32({1, 5, 5, 2, NAN, 3, 0, 0, 0}, TG_SHAPE(3, 3)));
    tg_tensor *idx = nullptr;
    tg_tensor *v = tg_max_dim(x, 1, false, &idx);
    ASSERT_NE(v, nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(idx, {1, 1, 0}, 0));
    std::vector<double> got = values(v);
    EXPECT_EQ(got[0], 5);
    EXPECT_TRUE(std::isnan(got[1]));
    EXPECT_EQ(got[2], 0);
}

TEST_F(TgTest, CudaVarStdLogsumexpNormMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (const DimsCase &c : dims_cases()) {
        if (c.shape.ndim == 0) continue;
        for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
            tg_tensor *x = random_cpu(c.shape, dt, 6);
            CompareOpts o;
            o.atol = dt == TG_FLOAT32 ? 1e-4 : 1e-10;
            o.rtol = dt == TG_FLOAT32 ? 1e-4 : 1e-10;
            const int *d = c.dims.data();
            int n = (int)c.dims.size();
            EXPECT_TRUE(compare_devices(
                [&](const std::vector<tg_tensor *> &in) { return tg_var(in[0], d, n, true, false); }, {x}, o))
                << "var " << c.what << " " << tg_dtype_name(dt);
            EXPECT_TRUE(compare_devices(
                [&](const std::vector<tg_tensor *> &in) { return tg_std(in[0], d, n, false, true); }, {x}, o))
                << "std " << c.what << " " << tg_dtype_name(dt);
            if (n == 1) {
                EXPECT_TRUE(compare_devices(
                    [&](const std::vector<tg_tensor *> &in) { return tg_logsumexp(in[0], d[0], false); }, {x}, o))
                    << "logsumexp " << c.what << " " << tg_dtype_name(dt);
            }
            for (double p : {1.0, 2.0, 3.0, (double)INFINITY})
                EXPECT_TRUE(compare_devices(
                    [&](const std::vector<tg_tensor *> &in) { return tg_norm(in[0], p, d, n, false); }, {x}, o))
                    << "norm p=" << p << " " << c.what << " " << tg_dtype_name(dt);
        }
    }
}
