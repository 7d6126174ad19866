// A sum over the leading dim (the bias gradient's layout) against its definition. Reductions
// beyond sum/mean: max/min (all and along a dim, with indices),
// argmax/argmin, var/std, logsumexp, vector norm. PyTorch fixtures, gradcheck and
// gradgradcheck (including non-contiguous inputs), error paths.
#include <cmath>

#include "tests/ops/op_fixture.h"

namespace {

int d0[] = {0}, d1[] = {1}, d02[] = {0, 2}, dm1[] = {-1};

tg_tensor *gc_max(tg_tensor *const *in, void *) { return tg_max(in[0]); }
tg_tensor *gc_min_transposed(tg_tensor *const *in, void *) { return tg_min(tg_transpose(in[0], 0, 1)); }
tg_tensor *gc_max_dim(tg_tensor *const *in, void *) { return tg_max_dim(in[0], 1, false, nullptr); }
tg_tensor *gc_min_dim_keep_t(tg_tensor *const *in, void *) {
    return tg_min_dim(tg_transpose(in[0], 0, 1), 0, true, nullptr);
}
tg_tensor *gc_var(tg_tensor *const *in, void *) { return tg_var(in[0], d1, 1, true, false); }
tg_tensor *gc_var_all_t(tg_tensor *const *in, void *) {
    return tg_var(tg_transpose(in[0], 0, 1), nullptr, 0, false, false);
}
tg_tensor *gc_var_02(tg_tensor *const *in, void *) { return tg_var(in[0], d02, 2, true, true); }
tg_tensor *gc_std(tg_tensor *const *in, void *) { return tg_std(in[0], d0, 1, true, true); }
tg_tensor *gc_std_narrow(tg_tensor *const *in, void *) {
    return tg_std(tg_narrow(in[0], 1, 1, 3), dm1, 1, false, false);
}
tg_tensor *gc_lse(tg_tensor *const *in, void *) { return tg_logsumexp(in[0], 1, false); }
tg_tensor *gc_lse_t(tg_tensor *const *in, void *) { return tg_logsumexp(tg_transpose(in[0], 0, 1), 0, true); }
tg_tensor *gc_norm2(tg_tensor *const *in, void *) { return tg_norm(in[0], 2, nullptr, 0, false); }
tg_tensor *gc_norm1(tg_tensor *const *in, void *) { return tg_norm(in[0], 1, d1, 1, false); }
tg_tensor *gc_norm3_t(tg_tensor *const *in, void *) { return tg_norm(tg_transpose(in[0], 0, 1), 3, d1, 1, true); }
tg_tensor *gc_norminf(tg_tensor *const *in, void *) { return tg_norm(in[0], INFINITY, d0, 1, false); }

FixtureOp values_and_indices(tg_tensor *(*fn)(tg_tensor *, int, bool, tg_tensor **), int dim, bool keepdim) {
    return [fn, dim, keepdim](const std::vector<tg_tensor *> &in, tg_tensor **second) {
        return fn(in[0], dim, keepdim, second);
    };
}

} // namespace

TEST_F(TgTest, MaxMinMatchPyTorch) {
    check_fixture_both("max_all", [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_max(in[0]); });
    check_fixture_both("min_all", [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_min(in[0]); });
    check_fixture_both("max_dim1", values_and_indices(tg_max_dim, 1, false));
    check_fixture_both("min_dim0_keep", values_and_indices(tg_min_dim, 0, true));
    check_fixture_both("max_dim_3d", values_and_indices(tg_max_dim, -2, false));
}

TEST_F(TgTest, ArgmaxArgminMatchPyTorch) {
    check_fixture("argmax1", TG_FLOAT32,
                  [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_argmax(in[0], 1, false); });
    check_fixture("argmin0_keep", TG_FLOAT64,
                  [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_argmin(in[0], 0, true); });
}

TEST_F(TgTest, VarStdMatchPyTorch) {
    check_fixture_both(
        "var_dim1", [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_var(in[0], d1, 1, true, false); });
    check_fixture_both("var_all_biased", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_var(in[0], nullptr, 0, false, false);
    });
    check_fixture_both("var_dims02_keep", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_var(in[0], d02, 2, true, true);
    });
    check_fixture_both("std_dim0_keep", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_std(in[0], d0, 1, true, true);
    });
    check_fixture_both("std_all", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_std(in[0], nullptr, 0, false, false);
    });
}

TEST_F(TgTest, LogsumexpMatchesPyTorch) {
    check_fixture_both("logsumexp1",
                       [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_logsumexp(in[0], 1, false); });
    check_fixture_both("logsumexp0_keep",
                       [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_logsumexp(in[0], 0, true); });
}

TEST_F(TgTest, NormMatchesPyTorch) {
    check_fixture_both("norm2_all", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_norm(in[0], 2, nullptr, 0, false);
    });
    check_fixture_both(
        "norm1_dim1", [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_norm(in[0], 1, d1, 1, false); });
    check_fixture_both("norminf_dim0", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_norm(in[0], INFINITY, d0, 1, false);
    });
    check_fixture_both("norm3_dim1_keep",
                       [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_norm(in[0], 3, d1, 1, true); });
}

TEST_F(TgTest, ExtremaEdgeCases) {
    // NaN propagates and is the selected index; ties pick the first index.
    tg_tensor *x = tensor_f32({1, NAN, 3, 2, 2, 0}, TG_SHAPE(2, 3));
    tg_tensor *idx = nullptr;
    tg_tensor *v = tg_max_dim(x, 1, false, &idx);
    EXPECT_TRUE(std::isnan(values(v)[0]));
    EXPECT_EQ(values(v)[1], 2);
    EXPECT_TRUE(tensor_near(idx, {1, 0}, 0));
    EXPECT_TRUE(std::isnan(tg_item(tg_max(x))));
    EXPECT_TRUE(tensor_near(tg_argmin(x, 1, false), {1, 2}, 0));
    // Integers keep their dtype; indices are int64.
    tg_tensor *ints = tensor_i64({5, -2, 7, 7}, TG_SHAPE(2, 2));
    EXPECT_EQ(tg_dtype_of(tg_max(ints)), TG_INT64);
    EXPECT_EQ(tg_item(tg_min(ints)), -2);
    EXPECT_EQ(tg_dtype_of(tg_argmax(ints, 0, false)), TG_INT64);
    EXPECT_TRUE(tensor_near(tg_argmax(ints, 1, false), {0, 0}, 0));
    // Indices are not differentiable; values are.
    tg_tensor *r = tensor_f64({1, 2, 3}, TG_SHAPE(3), true);
    tg_tensor *vi = tg_max_dim(r, 0, false, &idx);
    EXPECT_TRUE(tg_requires_grad(vi));
    EXPECT_FALSE(tg_requires_grad(idx));
    // Without asking for the indices nothing leaks (TgTest checks).
    EXPECT_NE(tg_min_dim(r, 0, true, nullptr), nullptr);
    // Norm and logsumexp of zeros / -inf follow PyTorch.
    tg_tensor *z = tensor_f64({0, 0}, TG_SHAPE(2), true);
    tg_tensor *n = tg_norm(z, 2, nullptr, 0, false);
    ASSERT_EQ(tg_backward(n), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(z), {0, 0}, 0)); // masked, not NaN
    EXPECT_EQ(tg_item(tg_logsumexp(tensor_f64({-INFINITY, -INFINITY}, TG_SHAPE(2)), 0, false)), -INFINITY);
    EXPECT_EQ(tg_item(tg_logsumexp(tensor_f64({INFINITY, 1}, TG_SHAPE(2)), 0, false)), INFINITY);
}

TEST_F(TgTest, ExtremaGradcheck) {
    EXPECT_GRADCHECK(gc_max, rand64(TG_SHAPE(3, 4), 1));
    EXPECT_GRADCHECK(gc_min_transposed, rand64(TG_SHAPE(3, 4), 2));
    EXPECT_GRADCHECK(gc_max_dim, rand64(TG_SHAPE(2, 3, 4), 3));
    EXPECT_GRADCHECK(gc_min_dim_keep_t, rand64(TG_SHAPE(3, 4), 4));
    EXPECT_GRADGRADCHECK(gc_max_dim, rand64(TG_SHAPE(3, 4), 5));
    EXPECT_GRADGRADCHECK(gc_max, rand64(TG_SHAPE(3, 4), 6));
}

TEST_F(TgTest, VarStdGradcheck) {
    EXPECT_GRADCHECK(gc_var, rand64(TG_SHAPE(3, 4), 1));
    EXPECT_GRADCHECK(gc_var_all_t, rand64(TG_SHAPE(3, 4), 2));
    EXPECT_GRADCHECK(gc_var_02, rand64(TG_SHAPE(2, 3, 4), 3));
    EXPECT_GRADCHECK(gc_std, rand64(TG_SHAPE(3, 4), 4));
    EXPECT_GRADCHECK(gc_std_narrow, rand64(TG_SHAPE(3, 5), 5));
    EXPECT_GRADGRADCHECK(gc_var, rand64(TG_SHAPE(3, 4), 6));
    EXPECT_GRADGRADCHECK(gc_std, rand64(TG_SHAPE(3, 4), 7));
}

TEST_F(TgTest, LogsumexpNormGradcheck) {
    EXPECT_GRADCHECK(gc_lse, rand64(TG_SHAPE(3, 4), 1));
    EXPECT_GRADCHECK(gc_lse_t, rand64(TG_SHAPE(3, 4), 2));
    EXPECT_GRADGRADCHECK(gc_lse, rand64(TG_SHAPE(3, 4), 3));
    EXPECT_GRADCHECK(gc_norm2, rand64(TG_SHAPE(3, 4), 4));
    EXPECT_GRADCHECK(gc_norm1, rand64(TG_SHAPE(3, 4), 5));
    EXPECT_GRADCHECK(gc_norm3_t, rand64(TG_SHAPE(3, 4), 6));
    EXPECT_GRADCHECK(gc_norminf, rand64(TG_SHAPE(3, 4), 7));
    EXPECT_GRADGRADCHECK(gc_norm2, rand64(TG_SHAPE(3, 4), 8));
    EXPECT_GRADGRADCHECK(gc_norm3_t, rand64(TG_SHAPE(3, 4), 9));
}

TEST_F(TgTest, ReductionErrors) {
    tg_tensor *x = tg_ones(TG_SHAPE(2, 3), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_max_dim(x, 2, false, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_max_dim: dim 2 out of range for a tensor of shape [2, 3]");
    tg_clear_error();
    EXPECT_EQ(tg_argmin(x, -3, false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_argmin: dim -3 out of range");
    tg_clear_error();
    EXPECT_EQ(tg_max(tg_ones(TG_SHAPE(0, 3), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_max: cannot reduce over an empty dim of a tensor of shape [0, 3]");
    tg_clear_error();
    EXPECT_EQ(tg_argmax(tg_ones(TG_SHAPE(2, 0), tg_opts{}), 1, false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_argmax: cannot reduce over an empty dim");
    tg_clear_error();
    EXPECT_EQ(tg_var(tg_ones(TG_SHAPE(3), tg_opts{TG_INT64}), nullptr, 0, true, false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_var: expected a float32, float64, float16 or bfloat16 tensor, got int64");
    tg_clear_error();
    int bad[] = {0, 0};
    EXPECT_EQ(tg_std(x, bad, 2, true, false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_std: dim 0 appears twice");
    tg_clear_error();
    EXPECT_EQ(tg_logsumexp(x, 5, false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_logsumexp: dim 5 out of range");
    tg_clear_error();
    EXPECT_EQ(tg_norm(x, -1, nullptr, 0, false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_norm: p must be positive");
    tg_clear_error();
    EXPECT_EQ(tg_norm(tg_ones(TG_SHAPE(3), tg_opts{TG_INT32}), 2, nullptr, 0, false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_norm: expected a float32, float64, float16 or bfloat16 tensor, got int32");
    const char *names[] = {"tg_max",    "tg_min", "tg_max_dim", "tg_min_dim",   "tg_argmax",
                           "tg_argmin", "tg_var", "tg_std",     "tg_logsumexp", "tg_norm"};
    tg_tensor *results[10];
    tg_clear_error();
    results[0] = tg_max(nullptr);
    EXPECT_ERROR_CONTAINS(std::string(names[0]) + ": input 0 is NULL");
    tg_clear_error();
    results[1] = tg_min(nullptr);
    EXPECT_ERROR_CONTAINS(std::string(names[1]) + ": input 0 is NULL");
    tg_clear_error();
    results[2] = tg_max_dim(nullptr, 0, false, nullptr);
    EXPECT_ERROR_CONTAINS(std::string(names[2]) + ": input 0 is NULL");
    tg_clear_error();
    results[3] = tg_min_dim(nullptr, 0, false, nullptr);
    EXPECT_ERROR_CONTAINS(std::string(names[3]) + ": input 0 is NULL");
    tg_clear_error();
    results[4] = tg_argmax(nullptr, 0, false);
    EXPECT_ERROR_CONTAINS(std::string(names[4]) + ": input 0 is NULL");
    tg_clear_error();
    results[5] = tg_argmin(nullptr, 0, false);
    EXPECT_ERROR_CONTAINS(std::string(names[5]) + ": input 0 is NULL");
    tg_clear_error();
    results[6] = tg_var(nullptr, nullptr, 0, true, false);
    EXPECT_ERROR_CONTAINS(std::string(names[6]) + ": input 0 is NULL");
    tg_clear_error();
    results[7] = tg_std(nullptr, nullptr, 0, true, false);
    EXPECT_ERROR_CONTAINS(std::string(names[7]) + ": input 0 is NULL");
    tg_clear_error();
    results[8] = tg_logsumexp(nullptr, 0, false);
    EXPECT_ERROR_CONTAINS(std::string(names[8]) + ": input 0 is NULL");
    tg_clear_error();
    results[9] = tg_norm(nullptr, 2, nullptr, 0, false);
    EXPECT_ERROR_CONTAINS(std::string(names[9]) + ": input 0 is NULL");
    for (tg_tensor *r : results) EXPECT_EQ(r, nullptr);
}

// PyTorch 1.13's norm_backward for 0 < p < 2: sign(x) |x|^(p-1), so a zero element gets
// gradient 0, not 0 * inf = NaN (values from torch.linalg.vector_norm(x, p).backward()).
TEST_F(TgTest, NormGradientAtZeroForSmallP) {
    struct {
        double p;
        std::vector<double> grad;
    } cases[] = {{1.5, {0, 0.71491319095251, -0.71491319095251, 0.412755323243646, 0, 0.583724176072855}},
                 {0.5, {0, 3.393846850117352, -3.393846850117352, 5.878315177510849, 0, 4.156596523969725}}};
    for (const auto &c : cases) {
        tg_tensor *x = tensor_f64({0, 3, -3, 1, 0, 2}, TG_SHAPE(2, 3), true);
        ASSERT_EQ(tg_backward(tg_norm(x, c.p, nullptr, 0, false)), TG_OK) << tg_last_error();
        EXPECT_TRUE(tensor_near(tg_grad(x), c.grad, 1e-12)) << "p = " << c.p;
    }
}

// var/std divide by max(0, N - correction): an empty reduction is NaN, as in PyTorch.
// [rows, cols] -> [cols] (the column kernel: strips of 32 columns and a tail): each column
// summed in row order in double and rounded once, for any thread count.
TEST_F(TgTest, SumOverLeadingDimIsEachColumnsSumInDouble) {
    const int rows = 37, cols = 70;
    std::vector<float> x(rows * cols);
    for (int i = 0; i < rows * cols; i++) x[i] = 1.0f / (float)(i % 97 + 1) - 0.01f * (float)(i % 13);
    int saved = tg_get_num_threads();
    for (int threads : {1, 2, 3}) {
        tg_set_num_threads(threads);
        std::vector<double> got = values(tg_sum_dims(tensor_f32(x, TG_SHAPE(rows, cols)), d0, 1, false));
        ASSERT_EQ(got.size(), (size_t)cols);
        for (int c = 0; c < cols; c++) {
            double want = 0;
            for (int r = 0; r < rows; r++) want += (double)x[r * cols + c];
            EXPECT_EQ(got[c], (double)(float)want) << "column " << c << ", " << threads << " threads";
        }
    }
    tg_set_num_threads(saved);
}

TEST_F(TgTest, VarOfNothingIsNan) {
    tg_tensor *x = tg_zeros(TG_SHAPE(0, 3), tg_opts{TG_FLOAT64});
    EXPECT_TRUE(std::isnan(tg_item(tg_var(x, nullptr, 0, true, false))));
    int dim0 = 0;
    EXPECT_TRUE(tensor_near(tg_std(x, &dim0, 1, true, false), {NAN, NAN, NAN}, 0));
    EXPECT_TRUE(std::isnan(tg_item(tg_var(tensor_f64({4}, TG_SHAPE(1)), nullptr, 0, true, false)))); // N = 1, unbiased
}
