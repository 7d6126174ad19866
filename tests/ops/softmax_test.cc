// tg_softmax and tg_log_softmax: PyTorch fixtures, stability on large inputs,
// gradcheck and gradgradcheck (contiguous, middle dim, transposed), errors.
#include "tests/ops/op_fixture.h"

namespace {

tg_tensor *gc_softmax_last(tg_tensor *const *in, void *) { return tg_softmax(in[0], -1); }
tg_tensor *gc_softmax_mid(tg_tensor *const *in, void *) { return tg_softmax(in[0], 1); }
tg_tensor *gc_softmax_transposed(tg_tensor *const *in, void *) { return tg_softmax(tg_transpose(in[0], 0, 1), 1); }
tg_tensor *gc_log_softmax_last(tg_tensor *const *in, void *) { return tg_log_softmax(in[0], -1); }
tg_tensor *gc_log_softmax_first(tg_tensor *const *in, void *) { return tg_log_softmax(in[0], 0); }
tg_tensor *gc_log_softmax_narrowed(tg_tensor *const *in, void *) {
    return tg_log_softmax(tg_narrow(in[0], 1, 1, 3), 1);
}

FixtureOp along(tg_tensor *(*fn)(tg_tensor *, int), int dim) {
    return [fn, dim](const std::vector<tg_tensor *> &in, tg_tensor **) { return fn(in[0], dim); };
}

} // namespace

TEST_F(TgTest, SoftmaxMatchesPyTorch) {
    check_fixture_both("softmax_last", along(tg_softmax, -1));
    check_fixture_both("softmax_dim0", along(tg_softmax, 0));
    check_fixture_both("softmax_3d_mid", along(tg_softmax, 1));
    check_fixture_both("softmax_large", along(tg_softmax, 1));
}

TEST_F(TgTest, LogSoftmaxMatchesPyTorch) {
    check_fixture_both("log_softmax_last", along(tg_log_softmax, -1));
    check_fixture_both("log_softmax_3d_first", along(tg_log_softmax, 0));
}

TEST_F(TgTest, SoftmaxIsStableForHugeInputs) {
    tg_tensor *x = tensor_f32({1000, 1001, 1002, -1000}, TG_SHAPE(1, 4));
    EXPECT_TRUE(tensor_near(tg_softmax(x, 1), {0.09003057317, 0.24472847105, 0.66524095577, 0}, 1e-6));
    EXPECT_TRUE(tensor_near(tg_log_softmax(x, 1), {-2.40760596, -1.40760596, -0.40760596, -2002.40760596}, 1e-3));
}

TEST_F(TgTest, SoftmaxLargeRowsInParallel) {
    // Enough rows to take the parallel path; every row sums to 1.
    tg_tensor *x = tg_mul_scalar(tg_arange(0, 300 * 257, 1, tg_opts{}), 0.001);
    tg_tensor *y = tg_softmax(tg_reshape(x, TG_SHAPE(300, 257)), -1);
    EXPECT_TRUE(tensor_near(tg_sum_dim(y, 1, false), std::vector<double>(300, 1.0), 1e-5));
    tg_tensor *z = tg_softmax(tg_reshape(x, TG_SHAPE(257, 300)), 0); // strided rows
    EXPECT_TRUE(tensor_near(tg_sum_dim(z, 0, false), std::vector<double>(300, 1.0), 1e-5));
}

TEST_F(TgTest, SoftmaxOfScalar) {
    EXPECT_TRUE(tensor_near(tg_softmax(tensor_f32({3}, TG_SCALAR_SHAPE), 0), {1}, 0));
    EXPECT_TRUE(tensor_near(tg_log_softmax(tensor_f32({3}, TG_SCALAR_SHAPE), -1), {0}, 0));
}

TEST_F(TgTest, SoftmaxGradcheck) {
    EXPECT_GRADCHECK(gc_softmax_last, rand64(TG_SHAPE(3, 5), 1));
    EXPECT_GRADCHECK(gc_softmax_mid, rand64(TG_SHAPE(2, 3, 4), 2));
    EXPECT_GRADCHECK(gc_softmax_transposed, rand64(TG_SHAPE(4, 3), 3));
    EXPECT_GRADGRADCHECK(gc_softmax_last, rand64(TG_SHAPE(3, 5), 4));
    EXPECT_GRADGRADCHECK(gc_softmax_transposed, rand64(TG_SHAPE(4, 3), 5));
}

TEST_F(TgTest, LogSoftmaxGradcheck) {
    EXPECT_GRADCHECK(gc_log_softmax_last, rand64(TG_SHAPE(3, 5), 1));
    EXPECT_GRADCHECK(gc_log_softmax_first, rand64(TG_SHAPE(2, 3, 4), 2));
    EXPECT_GRADCHECK(gc_log_softmax_narrowed, rand64(TG_SHAPE(3, 5), 3));
    EXPECT_GRADGRADCHECK(gc_log_softmax_last, rand64(TG_SHAPE(3, 5), 4));
    EXPECT_GRADGRADCHECK(gc_log_softmax_narrowed, rand64(TG_SHAPE(3, 5), 5));
}

TEST_F(TgTest, SoftmaxErrors) {
    tg_tensor *x = tg_ones(TG_SHAPE(2, 3), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_softmax(x, 2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_softmax: dim 2 out of range for a tensor of shape [2, 3]");
    tg_clear_error();
    EXPECT_EQ(tg_log_softmax(x, -3), nullptr);
    EXPECT_ERROR_CONTAINS("tg_log_softmax: dim -3 out of range");
    tg_clear_error();
    EXPECT_EQ(tg_softmax(tg_ones(TG_SHAPE(2, 3), tg_opts{TG_INT64}), 1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_softmax: expected a float32, float64, float16 or bfloat16 tensor, got int64");
    tg_clear_error();
    EXPECT_EQ(tg_softmax(nullptr, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_softmax: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_log_softmax(nullptr, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_log_softmax: input 0 is NULL");
}
