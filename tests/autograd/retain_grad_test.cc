// retain_grad on non-leaf tensors: .grad is the gradient flowing into the tensor
// (summed over its uses, after its hooks), summed over backward calls, moved with the
// tensor through a recorded in-place write, safe when the tensor is freed first.
// Expected values are worked out by hand from PyTorch's semantics (y = x * x, loss =
// sum(y * w) gives y.grad = w).
#include "tests/test_util.h"

namespace {

TEST_F(TgTest, RetainGradKeepsTheGradientFlowingIntoANonLeaf) {
    tg_tensor *x = tensor_f64({1, 2, 3}, TG_SHAPE(3), true);
    tg_tensor *w = tensor_f64({0.5, -1, 2}, TG_SHAPE(3));
    tg_tensor *y = tg_mul(x, x);
    EXPECT_FALSE(tg_retains_grad(y));
    ASSERT_EQ(tg_retain_grad(y), TG_OK) << tg_last_error();
    EXPECT_TRUE(tg_retains_grad(y));
    tg_tensor *other = tg_mul(x, x); // not retained: no .grad, as PyTorch (None)
    ASSERT_EQ(tg_backward(tg_add(tg_sum(tg_mul(y, w)), tg_sum(tg_mul(y, y)))), TG_OK) << tg_last_error();
    // d/dy [y w + y^2] = w + 2 y, y = [1, 4, 9]
    EXPECT_TRUE(tensor_near(tg_grad(y), {2.5, 7, 20}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(x), {5, 28, 120}, 0)); // (w + 2y) 2x
    EXPECT_EQ(tg_grad(other), nullptr);
}

TEST_F(TgTest, RetainedGradientsAddUpOverBackwardCalls) {
    tg_tensor *x = tensor_f64({1, 2}, TG_SHAPE(2), true);
    tg_tensor *y = tg_mul_scalar(x, 3);
    ASSERT_EQ(tg_retain_grad(y), TG_OK);
    tg_tensor *loss = tg_sum(tg_mul(y, tensor_f64({1, -2}, TG_SHAPE(2))));
    ASSERT_EQ(tg_backward_with(loss, .retain_graph = true), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(y), {1, -2}, 0));
    ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(y), {2, -4}, 0));
    tg_zero_grad(y);
    EXPECT_EQ(tg_grad(y), nullptr);
}

tg_tensor *double_it(tg_tensor *g, void *) { return tg_mul_scalar(g, 2); }

TEST_F(TgTest, RetainedGradientComesAfterTheHooks) {
    tg_tensor *x = tensor_f64({1, 2}, TG_SHAPE(2), true);
    tg_tensor *y = tg_mul_scalar(x, 3);
    ASSERT_EQ(tg_retain_grad(y), TG_OK);
    ASSERT_EQ(tg_register_hook(y, double_it, nullptr), TG_OK); // registered later, still runs first
    ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(y), {2, 2}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(x), {6, 6}, 0));
}

TEST_F(TgTest, RetainGradFollowsAnInPlaceWrite) {
    tg_tensor *x = tensor_f64({1, 2}, TG_SHAPE(2), true);
    tg_tensor *y = tg_mul_scalar(x, 3);
    ASSERT_EQ(tg_retain_grad(y), TG_OK);
    tg_tensor *c = tensor_f64({10, 20}, TG_SHAPE(2), true);
    ASSERT_EQ(tg_add_(y, c), TG_OK) << tg_last_error(); // y is now the sum's output
    EXPECT_TRUE(tg_retains_grad(y));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, tensor_f64({1, 5}, TG_SHAPE(2))))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(y), {1, 5}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(x), {3, 15}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(c), {1, 5}, 0));
}

TEST_F(TgTest, RetainGradOnLeavesFreedTensorsAndGradOf) {
    tg_tensor *x = tensor_f64({1, 2}, TG_SHAPE(2), true);
    ASSERT_EQ(tg_retain_grad(x), TG_OK); // a leaf: nothing to do
    EXPECT_FALSE(tg_retains_grad(x));
    tg_tensor *loss = nullptr;
    TG_SCOPE { // y is freed before the backward that reaches its node
        tg_tensor *y = tg_mul_scalar(x, 3);
        ASSERT_EQ(tg_retain_grad(y), TG_OK);
        loss = tg_scope_return(tg_sum(y));
    }
    ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), {3, 3}, 0));
    tg_tensor *y = tg_mul_scalar(x, 2);
    ASSERT_EQ(tg_retain_grad(y), TG_OK);
    tg_tensor *out = tg_sum(y), *g = nullptr;
    ASSERT_EQ(tg_grad_of(&out, nullptr, 1, &x, 1, &g, tg_backward_opts{}), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(g, {2, 2}, 0));
    EXPECT_EQ(tg_grad(y), nullptr); // torch.autograd.grad leaves .grad alone
}

TEST_F(TgTest, RetainGradErrors) {
    tg_clear_error();
    EXPECT_EQ(tg_retain_grad(tg_zeros(TG_SHAPE(2), tg_opts{})), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_retain_grad: cannot retain the gradient of a tensor that does not require grad");
    tg_clear_error();
    EXPECT_EQ(tg_retain_grad(nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_retain_grad: input 0 is NULL");
}

} // namespace
