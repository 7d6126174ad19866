// NaN/Inf handling: isfinite helpers, anomaly mode naming the op, and an optimizer
// step that can be told to skip non-finite gradients.
#include "test_util.h"

TEST_F(TgTest, IsFiniteMarksNanAndInf) {
    tg_tensor *x = tensor_f32({1, NAN, INFINITY, -INFINITY, -2}, TG_SHAPE(5));
    EXPECT_TRUE(tensor_near(tg_isfinite(x), {1, 0, 0, 0, 1}, 0));
    EXPECT_EQ(tg_dtype_of(tg_isfinite(x)), TG_BOOL);
    EXPECT_FALSE(tg_all_finite(x));
    EXPECT_TRUE(tg_all_finite(tensor_f64({1e300, -1e-300}, TG_SHAPE(2))));
    EXPECT_TRUE(tg_all_finite(tensor_i64({5}, TG_SHAPE(1))));
    EXPECT_TRUE(
        tensor_near(tg_isfinite(tg_transpose(tensor_f64({NAN, 1, 2, 3}, TG_SHAPE(2, 2)), 0, 1)), {0, 1, 1, 1}, 0));
}

TEST_F(TgTest, OptimizerSkipsNonFiniteGradients) {
    tg_tensor *w = tensor_f32({1, 2}, TG_SHAPE(2), true);
    tg_optim *sgd = tg_sgd_params(&w, 1, tg_sgd_opts{0.5});
    bool skipped = false;
    TG_SCOPE {
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(w, tensor_f32({NAN, 1}, TG_SHAPE(2))))), TG_OK);
        ASSERT_EQ(tg_optim_step_if_finite(sgd, &skipped), TG_OK);
    }
    EXPECT_TRUE(skipped);
    EXPECT_TRUE(tensor_near(w, {1, 2}, 0)); // untouched
    tg_optim_zero_grad(sgd);
    TG_SCOPE {
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(w, tensor_f32({2, 4}, TG_SHAPE(2))))), TG_OK);
        ASSERT_EQ(tg_optim_step_if_finite(sgd, &skipped), TG_OK);
    }
    EXPECT_FALSE(skipped);
    EXPECT_TRUE(tensor_near(w, {0, 0}, 1e-7)); // w - 0.5 * [2, 4]
    tg_optim_free(sgd);
}

TEST_F(TgTest, AnomalyModeFromTheEnvironmentNamesTheFirstBadNode) {
    tg_set_detect_anomaly(true);
    tg_tensor *x = tensor_f64({4, 0}, TG_SHAPE(2), true);
    // sqrt'(0) is Inf: the first node that produces it is sqrt, not the sum or mul after it.
    tg_tensor *y = tg_sum(tg_mul_scalar(tg_sqrt(x), 3));
    EXPECT_EQ(tg_backward(y), TG_ERROR);
    tg_set_detect_anomaly(false);
    EXPECT_ERROR_CONTAINS("backward of 'sqrt'");
    EXPECT_EQ(tg_grad(x), nullptr); // nothing was accumulated
}
