// The names a PyTorch user guesses (issue 17): torch.full_like, comparisons and
// where with a Python scalar, the two-argument losses. Expected values are worked
// out by hand from PyTorch's semantics (torch.result_type for the scalar: an int
// stays an int, a float does not widen a float32 tensor).
#include <cmath>

#include "test_util.h"

static tg_tensor *bools(std::vector<uint8_t> v, tg_shape shape) {
    return tg_from_data(v.data(), shape, tg_opts{TG_BOOL, TG_CPU, false});
}

TEST_F(TgTest, FullLikeTakesLikesShapeDtypeAndDevice) {
    tg_tensor *f = tg_full_like(tg_zeros(TG_SHAPE(2, 3), tg_opts{TG_FLOAT64}), 2.5);
    ASSERT_NE(f, nullptr) << tg_last_error();
    EXPECT_EQ(dims(f), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(tg_dtype_of(f), TG_FLOAT64);
    EXPECT_TRUE(tensor_near(f, {2.5, 2.5, 2.5, 2.5, 2.5, 2.5}, 0));
    // torch.full_like(torch.zeros(2, dtype=torch.int64), -2.5) -> tensor([-2, -2])
    tg_tensor *i = tg_full_like(tg_zeros(TG_SHAPE(2), tg_opts{TG_INT64}), -2.5);
    EXPECT_EQ(tg_dtype_of(i), TG_INT64);
    EXPECT_TRUE(tensor_near(i, {-2, -2}, 0));
    EXPECT_EQ(tg_full_like(nullptr, 1), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_full_like: input 0 is NULL");
}

TEST_F(TgTest, ComparisonsWithAScalar) {
    tg_tensor *x = tensor_f32({1, 2.5f, 3, NAN}, TG_SHAPE(4));
    EXPECT_TRUE(tensor_near(tg_gt_scalar(x, 2.5), {0, 0, 1, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_ge_scalar(x, 2.5), {0, 1, 1, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_lt_scalar(x, 2.5), {1, 0, 0, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_le_scalar(x, 2.5), {1, 1, 0, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_eq_scalar(x, 3), {0, 0, 1, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_ne_scalar(x, 3), {1, 1, 0, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_ne_scalar(x, NAN), {1, 1, 1, 1}, 0));
    EXPECT_EQ(tg_dtype_of(tg_gt_scalar(x, 1)), TG_BOOL);
    EXPECT_EQ(dims(tg_gt_scalar(x, 1)), (std::vector<int64_t>{4}));
    // float32 x against a Python float compares in float32: float32(0.1) > 0.1 is False
    // in PyTorch (in double it would be True: 0.100000001490116 > 0.1).
    tg_tensor *tenth = tensor_f32({0.1f}, TG_SHAPE(1));
    EXPECT_TRUE(tensor_near(tg_gt_scalar(tenth, 0.1), {0}, 0));
    EXPECT_TRUE(tensor_near(tg_eq_scalar(tenth, 0.1), {1}, 0));
    // int64 x against 2.5 (a float): compared as floats, not truncated to 2.
    tg_tensor *n = tensor_i64({2, 3}, TG_SHAPE(2));
    EXPECT_TRUE(tensor_near(tg_gt_scalar(n, 2.5), {0, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_eq_scalar(n, 2), {1, 0}, 0));
    // 2^53 + 1 is exact as an int64 and compares as one against an integral scalar.
    tg_tensor *big = tensor_i64({9007199254740993LL}, TG_SHAPE(1));
    EXPECT_TRUE(tensor_near(tg_gt_scalar(big, 9007199254740992.0), {1}, 0));
    tg_tensor *b = bools({1, 0}, TG_SHAPE(2));
    EXPECT_TRUE(tensor_near(tg_eq_scalar(b, 1), {1, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_lt_scalar(b, 0.5), {0, 1}, 0));
    EXPECT_EQ(tg_gt_scalar(nullptr, 1), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_gt_scalar: input 0 is NULL");
}

TEST_F(TgTest, WhereWithScalars) {
    tg_tensor *cond = bools({1, 0, 1}, TG_SHAPE(3));
    tg_tensor *x = tensor_f32({1, 2, 3}, TG_SHAPE(3), true);
    tg_tensor *w = tg_where_scalar(cond, x, 0.0); // torch.where(cond, x, 0.0)
    ASSERT_NE(w, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(w), TG_FLOAT32);
    EXPECT_TRUE(tensor_near(w, {1, 0, 3}, 0));
    ASSERT_EQ(tg_backward(tg_sum(w)), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), {1, 0, 1}, 0));
    // int64 x with a fractional other: float32, as torch.where(cond, int_x, 0.5)
    tg_tensor *wi = tg_where_scalar(cond, tensor_i64({4, 5, 6}, TG_SHAPE(3)), 0.5);
    EXPECT_EQ(tg_dtype_of(wi), TG_FLOAT32);
    EXPECT_TRUE(tensor_near(wi, {4, 0.5, 6}, 0));
    // Broadcasting: cond [2, 1] against x [3].
    tg_tensor *c2 = bools({1, 0}, TG_SHAPE(2, 1));
    EXPECT_TRUE(tensor_near(tg_where_scalar(c2, tensor_f32({1, 2, 3}, TG_SHAPE(3)), -1), {1, 2, 3, -1, -1, -1}, 0));
    // Two scalars: int64 when both are ints (torch.where(cond, 1, 0)), else float32.
    tg_tensor *ii = tg_where_scalars(cond, 1, 0);
    EXPECT_EQ(tg_dtype_of(ii), TG_INT64);
    EXPECT_TRUE(tensor_near(ii, {1, 0, 1}, 0));
    tg_tensor *ff = tg_where_scalars(cond, 0.5, -2);
    EXPECT_EQ(tg_dtype_of(ff), TG_FLOAT32);
    EXPECT_TRUE(tensor_near(ff, {0.5, -2, 0.5}, 0));
    EXPECT_EQ(tg_where_scalar(cond, nullptr, 0), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_where_scalar: input 1 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_where_scalar(tensor_f32({1, 0, 1}, TG_SHAPE(3)), x, 0), nullptr); // cond must be bool
    EXPECT_ERROR_CONTAINS("where");
}

TEST_F(TgTest, LossesTakeTwoArgumentsWithPyTorchsDefaults) {
    tg_tensor *x = tensor_f32({1, 2, 3}, TG_SHAPE(3)), *zero = tensor_f32({0, 0, 0}, TG_SHAPE(3));
    EXPECT_NEAR(tg_item(tg_mse_loss(x, zero)), 14.0 / 3, 1e-6); // F.mse_loss(x, y): mean
    EXPECT_NEAR(tg_item(tg_l1_loss(x, zero)), 2.0, 1e-6);
    EXPECT_NEAR(tg_item(tg_mse_loss_opts(x, zero, tg_loss_opts{TG_REDUCTION_SUM})), 14.0, 1e-6);
    EXPECT_TRUE(tensor_near(tg_l1_loss_opts(x, zero, tg_loss_opts{TG_REDUCTION_NONE}), {1, 2, 3}, 1e-6));
    // F.binary_cross_entropy_with_logits(tensor([0., 2.]), tensor([1., 0.])):
    // (log 2 + (2 + log(1 + e^-2))) / 2
    tg_tensor *logits = tensor_f32({0, 2}, TG_SHAPE(2)), *t = tensor_f32({1, 0}, TG_SHAPE(2));
    EXPECT_NEAR(tg_item(tg_binary_cross_entropy_with_logits(logits, t)),
                (std::log(2.0) + 2 + std::log1p(std::exp(-2.0))) / 2, 1e-6);
    // F.nll_loss(log_probs, target): mean of -log_probs[i, target[i]]
    tg_tensor *lp = tensor_f32({-1, -2, -3, -4}, TG_SHAPE(2, 2));
    EXPECT_NEAR(tg_item(tg_nll_loss(lp, tensor_i64({1, 0}, TG_SHAPE(2)))), (2 + 3) / 2.0, 1e-6);
    // The _opts forms of mse and l1 take only a reduction; the rest is refused, not dropped.
    EXPECT_EQ(tg_mse_loss_opts(x, zero, tg_loss_opts{.weight = x}), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_mse_loss: only .reduction applies (PyTorch's mse_loss has no weight)");
    EXPECT_EQ(tg_l1_loss_opts(x, zero, tg_loss_opts{.label_smoothing = 0.1}), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_l1_loss: only .reduction applies (PyTorch's l1_loss has no label_smoothing)");
}

TEST_F(TgTest, TgZeroIsARealZeroWhereZeroMeansTheDefault) {
    EXPECT_EQ(TG_ZERO, 0.0);
    EXPECT_TRUE(std::signbit(TG_ZERO));
    // LeakyReLU: slope 0 is PyTorch's default 0.01, TG_ZERO a real 0 (a ReLU).
    tg_module *dflt = tg_nn_leaky_relu(0), *zero = tg_nn_leaky_relu(TG_ZERO);
    tg_tensor *x = tensor_f32({-2, 3}, TG_SHAPE(2));
    EXPECT_TRUE(tensor_near(tg_forward(dflt, x), {-0.02, 3}, 1e-7));
    EXPECT_TRUE(tensor_near(tg_forward(zero, x), {0, 3}, 0));
    tg_module_free(dflt);
    tg_module_free(zero);
}
