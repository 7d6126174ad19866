// Losses: PyTorch fixtures (reductions, ignore_index, label_smoothing, spatial),
// gradcheck / gradgradcheck, bad inputs.
#include "nn_fixture_util.h"

namespace {

class LossTest : public TgTest, public ::testing::WithParamInterface<tg_dtype> {};

tg_loss_opts lopts(tg_reduction r, bool use_ignore = false, int64_t ignore = 0, double smoothing = 0) {
    tg_loss_opts o = {};
    o.reduction = r;
    o.use_ignore_index = use_ignore;
    o.ignore_index = ignore;
    o.label_smoothing = smoothing;
    return o;
}

TEST_P(LossTest, CrossEntropyMatchesPyTorch) {
    tg_dtype dt = GetParam();
    check_nn_case("ce_mean", {"x", "t"}, dt, [](auto &in) { return tg_cross_entropy(in[0], in[1]); });
    check_nn_case("ce_sum", {"x", "t"}, dt,
                  [](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_SUM)); });
    check_nn_case("ce_none", {"x", "t"}, dt,
                  [](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_NONE)); });
    check_nn_case("ce_ignore", {"x", "t"}, dt,
                  [](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_MEAN, true, 1)); });
    check_nn_case("ce_smooth", {"x", "t"}, dt, [](auto &in) {
        return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_MEAN, false, 0, 0.1));
    });
    check_nn_case("ce_smooth_ignore_sum", {"x", "t"}, dt, [](auto &in) {
        return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_SUM, true, 1, 0.2));
    });
    check_nn_case("ce_smooth_ignore_mean", {"x", "t"}, dt, [](auto &in) {
        return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_MEAN, true, 1, 0.2));
    });
    check_nn_case("ce_spatial", {"x", "t"}, dt, [](auto &in) {
        return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_MEAN, false, 0, 0.1));
    });
    check_nn_case("ce_spatial_none", {"x", "t"}, dt,
                  [](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_NONE)); });
}

TEST_P(LossTest, OtherLossesMatchPyTorch) {
    tg_dtype dt = GetParam();
    check_nn_case("nll_mean", {"x", "t"}, dt, [](auto &in) { return tg_nll_loss(in[0], in[1], lopts(TG_REDUCTION_MEAN)); });
    check_nn_case("nll_ignore", {"x", "t"}, dt,
                  [](auto &in) { return tg_nll_loss(in[0], in[1], lopts(TG_REDUCTION_MEAN, true, 3)); });
    check_nn_case("nll_none", {"x", "t"}, dt, [](auto &in) { return tg_nll_loss(in[0], in[1], lopts(TG_REDUCTION_NONE)); });
    const char *names[] = {"mean", "sum", "none"};
    tg_reduction reds[] = {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE};
    for (int i = 0; i < 3; i++) {
        tg_reduction r = reds[i];
        check_nn_case(std::string("mse_") + names[i], {"x", "y"}, dt, [r](auto &in) { return tg_mse_loss(in[0], in[1], r); });
        check_nn_case(std::string("l1_") + names[i], {"x", "y"}, dt, [r](auto &in) { return tg_l1_loss(in[0], in[1], r); });
        check_nn_case(std::string("bce_") + names[i], {"x", "y"}, dt,
                      [r](auto &in) { return tg_binary_cross_entropy_with_logits(in[0], in[1], r); });
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LossTest, ::testing::Values(TG_FLOAT32, TG_FLOAT64));

struct LossCase {
    int kind; // 0 ce, 1 nll, 2 mse, 3 l1, 4 bce
    tg_loss_opts opts;
    tg_tensor *target;
    bool transpose;
};

tg_tensor *loss_gc(tg_tensor *const *in, void *user) {
    const LossCase *c = static_cast<const LossCase *>(user);
    tg_tensor *x = c->transpose ? tg_transpose(in[0], 0, 1) : in[0];
    switch (c->kind) {
    case 0: return tg_cross_entropy_opts(x, c->target, c->opts);
    case 1: return tg_nll_loss(x, c->target, c->opts);
    case 2: return tg_mse_loss(x, in[1], c->opts.reduction);
    case 3: return tg_l1_loss(x, in[1], c->opts.reduction);
    default: return tg_binary_cross_entropy_with_logits(x, in[1], c->opts.reduction);
    }
}

TEST_F(TgTest, LossGradcheck) {
    tg_manual_seed(4);
    tg_opts f64 = {TG_FLOAT64, TG_CPU, false};
    tg_tensor *t4 = tensor_i64({2, 0, 1, 2}, TG_SHAPE(4));
    tg_tensor *t_spatial = tensor_i64({0, 2, 1, 1, 2, 0}, TG_SHAPE(2, 3));
    LossCase cases[] = {
        {0, lopts(TG_REDUCTION_MEAN, true, 0, 0.1), t4, false},
        {0, lopts(TG_REDUCTION_NONE), t4, true},               // non-contiguous logits
        {0, lopts(TG_REDUCTION_SUM, false, 0, 0.3), t_spatial, false},
        {1, lopts(TG_REDUCTION_MEAN, true, 2), t4, false},
        {1, lopts(TG_REDUCTION_NONE), t4, true},
    };
    for (auto &c : cases) {
        SCOPED_TRACE(c.kind);
        tg_tensor *x = c.target == t_spatial ? tg_randn(TG_SHAPE(2, 3, 3), f64)
                       : c.transpose          ? tg_randn(TG_SHAPE(3, 4), f64)
                                              : tg_randn(TG_SHAPE(4, 3), f64);
        tg_requires_grad(x, true);
        tg_tensor *in[] = {x};
        tg_gradcheck_opts o = {};
        o.user = &c;
        EXPECT_EQ(tg_gradcheck(loss_gc, 1, in, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(loss_gc, 1, in, &o), TG_OK) << tg_last_error();
    }
    for (int kind = 2; kind <= 4; kind++) {
        for (bool broadcast : {false, true}) {
            SCOPED_TRACE(kind * 10 + broadcast);
            LossCase c = {kind, lopts(broadcast ? TG_REDUCTION_SUM : TG_REDUCTION_MEAN), nullptr, broadcast};
            tg_tensor *x = tg_requires_grad(tg_randn(broadcast ? TG_SHAPE(4, 3) : TG_SHAPE(3, 4), f64), true);
            // l1 is not differentiable at 0: keep |x - y| away from it.
            tg_tensor *y = kind == 4 ? tg_rand(TG_SHAPE(3, 4), f64) : tg_add_scalar(tg_mul_scalar(tg_rand(TG_SHAPE(3, 4), f64), 0.1), 5);
            if (kind == 4) tg_requires_grad(y, true);
            tg_tensor *in[] = {x, y};
            tg_gradcheck_opts o = {};
            o.user = &c;
            EXPECT_EQ(tg_gradcheck(loss_gc, 2, in, &o), TG_OK) << tg_last_error();
            if (kind != 3) {
                EXPECT_EQ(tg_gradgradcheck(loss_gc, 2, in, &o), TG_OK) << tg_last_error();
            }
        }
    }
}

TEST_F(TgTest, CrossEntropyUnbatchedAndAllIgnored) {
    tg_tensor *x = tensor_f64({1, 2, 3}, TG_SHAPE(3));
    tg_tensor *t = tensor_i64({2}, TG_SCALAR_SHAPE);
    double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
    EXPECT_TRUE(tensor_near(tg_cross_entropy(x, t), {lse - 3}, 1e-12));
    // Every target ignored: the mean is 0/0 = NaN, as in PyTorch.
    tg_tensor *x2 = tensor_f64({1, 2, 3, 4}, TG_SHAPE(2, 2));
    tg_tensor *t2 = tensor_i64({1, 1}, TG_SHAPE(2));
    tg_tensor *l = tg_cross_entropy_opts(x2, t2, lopts(TG_REDUCTION_MEAN, true, 1));
    ASSERT_TRUE(l) << tg_last_error();
    EXPECT_TRUE(std::isnan(tg_item(l)));
}

// PyTorch's default ignore_index is -100: such targets add nothing and the mean
// divides by the other targets; the gradient of their rows is zero.
TEST_F(TgTest, CrossEntropyIgnoresMinus100ByDefault) {
    tg_tensor *x = tensor_f64({1, 2, 3, 0, 0, 0, 3, 1, 1}, TG_SHAPE(3, 3), true);
    tg_tensor *t = tensor_i64({2, -100, 0}, TG_SHAPE(3));
    double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3;
    double l2 = std::log(std::exp(3.0) + 2 * std::exp(1.0)) - 3;
    tg_tensor *loss = tg_cross_entropy(x, t);
    ASSERT_TRUE(loss) << tg_last_error();
    EXPECT_NEAR(tg_item(loss), (l0 + l2) / 2, 1e-12);
    ASSERT_EQ(tg_backward(loss), TG_OK);
    std::vector<double> g = values(tg_grad(x));
    for (int j = 3; j < 6; j++) EXPECT_EQ(g[j], 0) << "ignored row, column " << j - 3;
    EXPECT_NEAR(tg_item(tg_nll_loss(tg_log_softmax(x, 1), t, {})), (l0 + l2) / 2, 1e-12);
    // another ignore_index replaces -100, which is then out of range
    tg_loss_opts o = {};
    o.use_ignore_index = true;
    o.ignore_index = 1;
    EXPECT_EQ(tg_cross_entropy_opts(x, t, o), nullptr);
    EXPECT_ERROR_CONTAINS("target -100 is out of bounds for 3 classes (expected 0 <= target < 3, or the ignore_index 1)");
}

TEST_F(TgTest, LossErrors) {
    tg_tensor *x = tg_zeros(TG_SHAPE(4, 5), tg_opts{});
    tg_tensor *t = tensor_i64({0, 1, 7, 2}, TG_SHAPE(4));
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy(x, t), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cross_entropy: target 7 is out of bounds for 5 classes");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy(x, tensor_i64({0, -1, 0, 0}, TG_SHAPE(4))), nullptr);
    EXPECT_ERROR_CONTAINS("target -1 is out of bounds for 5 classes");
    tg_clear_error();
    EXPECT_EQ(tg_nll_loss(x, t, {}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nll_loss: target 7 is out of bounds for 5 classes");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy(nullptr, t), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cross_entropy: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy(x, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cross_entropy: input 1 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy(x, tg_zeros(TG_SHAPE(4), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("expected int64 class indices as target, got float32");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy(tg_zeros(TG_SHAPE(4, 5), tg_opts{TG_INT64, TG_CPU, false}), t), nullptr);
    EXPECT_ERROR_CONTAINS("expected float32 or float64 input, got int64");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy(x, tensor_i64({0, 1, 2}, TG_SHAPE(3))), nullptr);
    EXPECT_ERROR_CONTAINS("expected target of the input's shape without dim 1 for input [4, 5]");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy_opts(x, tensor_i64({0, 1, 2, 3}, TG_SHAPE(4)), lopts(TG_REDUCTION_MEAN, false, 0, 1.5)), nullptr);
    EXPECT_ERROR_CONTAINS("label_smoothing must be in [0, 1], got 1.5");
    tg_clear_error();
    EXPECT_EQ(tg_mse_loss(x, tg_zeros(TG_SHAPE(3, 5), tg_opts{}), TG_REDUCTION_MEAN), nullptr);
    EXPECT_ERROR_CONTAINS("tg_mse_loss: target [3, 5] does not broadcast with input [4, 5]");
    tg_clear_error();
    EXPECT_EQ(tg_l1_loss(x, tg_zeros(TG_SHAPE(4, 5), tg_opts{TG_FLOAT64, TG_CPU, false}), TG_REDUCTION_MEAN), nullptr);
    EXPECT_ERROR_CONTAINS("tg_l1_loss: expected input and target of one floating dtype, got float32 and float64");
    tg_clear_error();
    EXPECT_EQ(tg_binary_cross_entropy_with_logits(x, tg_zeros(TG_SHAPE(1, 5), tg_opts{}), TG_REDUCTION_MEAN), nullptr);
    EXPECT_ERROR_CONTAINS("target [1, 5] must have the same shape as input [4, 5]");
    tg_clear_error();
    EXPECT_EQ(tg_mse_loss(nullptr, x, TG_REDUCTION_MEAN), nullptr);
    EXPECT_ERROR_CONTAINS("tg_mse_loss: input 0 is NULL");
}

} // namespace
