// Losses: PyTorch fixtures (reductions, ignore_index, label_smoothing, spatial),
// gradcheck / gradgradcheck, bad inputs.
#include "nn_fixture_util.h"

namespace {

class LossTest : public TgTest, public ::testing::WithParamInterface<tg_dtype> {};

tg_loss_opts lopts(tg_reduction r, bool use_ignore = false, int64_t ignore = 0, double smoothing = 0,
                   tg_tensor *weight = nullptr) {
    tg_loss_opts o = {};
    o.reduction = r;
    o.use_ignore_index = use_ignore;
    o.ignore_index = ignore;
    o.label_smoothing = smoothing;
    o.weight = weight;
    return o;
}

tg_bce_opts bopts(tg_reduction r, tg_tensor *weight, tg_tensor *pos_weight) {
    tg_bce_opts o = {};
    o.reduction = r;
    o.weight = weight;
    o.pos_weight = pos_weight;
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
    check_nn_case("ce_smooth_ignore_sum", {"x", "t"}, dt,
                  [](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_SUM, true, 1, 0.2)); });
    check_nn_case("ce_smooth_ignore_mean", {"x", "t"}, dt,
                  [](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_MEAN, true, 1, 0.2)); });
    check_nn_case("ce_spatial", {"x", "t"}, dt, [](auto &in) {
        return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_MEAN, false, 0, 0.1));
    });
    check_nn_case("ce_spatial_none", {"x", "t"}, dt,
                  [](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_NONE)); });
}

TEST_P(LossTest, OtherLossesMatchPyTorch) {
    tg_dtype dt = GetParam();
    check_nn_case("nll_mean", {"x", "t"}, dt,
                  [](auto &in) { return tg_nll_loss_opts(in[0], in[1], lopts(TG_REDUCTION_MEAN)); });
    check_nn_case("nll_ignore", {"x", "t"}, dt,
                  [](auto &in) { return tg_nll_loss_opts(in[0], in[1], lopts(TG_REDUCTION_MEAN, true, 3)); });
    check_nn_case("nll_none", {"x", "t"}, dt,
                  [](auto &in) { return tg_nll_loss_opts(in[0], in[1], lopts(TG_REDUCTION_NONE)); });
    const char *names[] = {"mean", "sum", "none"};
    tg_reduction reds[] = {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE};
    for (int i = 0; i < 3; i++) {
        tg_reduction r = reds[i];
        check_nn_case(std::string("mse_") + names[i], {"x", "y"}, dt,
                      [r](auto &in) { return tg_mse_loss_opts(in[0], in[1], tg_loss_opts{r}); });
        check_nn_case(std::string("l1_") + names[i], {"x", "y"}, dt,
                      [r](auto &in) { return tg_l1_loss_opts(in[0], in[1], tg_loss_opts{r}); });
        check_nn_case(std::string("bce_") + names[i], {"x", "y"}, dt,
                      [r](auto &in) { return tg_binary_cross_entropy_with_logits_opts(in[0], in[1], tg_bce_opts{r}); });
    }
}

// Class weights (cross_entropy / nll_loss) and pos_weight / weight (bce with logits).
TEST_P(LossTest, WeightedLossesMatchPyTorch) {
    tg_dtype dt = GetParam();
    const char *names[] = {"mean", "sum", "none"};
    tg_reduction reds[] = {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE};
    for (int i = 0; i < 3; i++) {
        tg_reduction r = reds[i];
        std::string n = names[i];
        check_nn_case("ce_w_" + n, {"x", "t", "wt"}, dt,
                      [r](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(r, false, 0, 0, in[2])); });
        check_nn_case("ce_w_spatial_" + n, {"x", "t", "wt"}, dt,
                      [r](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(r, true, 2, 0, in[2])); });
        check_nn_case("ce_w_smooth_" + n, {"x", "t", "wt"}, dt,
                      [r](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(r, false, 0, 0.15, in[2])); });
        check_nn_case("ce_w_smooth_spatial_" + n, {"x", "t", "wt"}, dt,
                      [r](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(r, true, 0, 0.3, in[2])); });
        check_nn_case("nll_w_" + n, {"x", "t", "wt"}, dt,
                      [r](auto &in) { return tg_nll_loss_opts(in[0], in[1], lopts(r, true, 3, 0, in[2])); });
        check_nn_case("bce_pw_" + n, {"x", "y", "pw"}, dt, [r](auto &in) {
            return tg_binary_cross_entropy_with_logits_opts(in[0], in[1], bopts(r, nullptr, in[2]));
        });
        check_nn_case("bce_pw_w_" + n, {"x", "y", "pw", "bw"}, dt, [r](auto &in) {
            return tg_binary_cross_entropy_with_logits_opts(in[0], in[1], bopts(r, in[3], in[2]));
        });
    }
}

// cross_entropy with class probabilities as target (shaped like the input): reductions,
// class weights, label smoothing, [N, C, d] and unbatched; gradients of input and target.
TEST_P(LossTest, ProbabilityTargetsMatchPyTorch) {
    tg_dtype dt = GetParam();
    const char *names[] = {"mean", "sum", "none"};
    tg_reduction reds[] = {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE};
    for (int i = 0; i < 3; i++) {
        tg_reduction r = reds[i];
        std::string n = names[i];
        check_nn_case("ce_prob_" + n, {"x", "t"}, dt,
                      [r](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(r)); });
        check_nn_case("ce_prob_w_smooth_" + n, {"x", "t", "wt"}, dt,
                      [r](auto &in) { return tg_cross_entropy_opts(in[0], in[1], lopts(r, false, 0, 0.2, in[2])); });
    }
    check_nn_case("ce_prob_spatial", {"x", "t"}, dt, [](auto &in) {
        return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_MEAN, false, 0, 0.1));
    });
    check_nn_case("ce_prob_spatial_w", {"x", "t", "wt"}, dt, [](auto &in) {
        return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_MEAN, false, 0, 0, in[2]));
    });
    check_nn_case("ce_prob_unbatched", {"x", "t"}, dt, [](auto &in) {
        return tg_cross_entropy_opts(in[0], in[1], lopts(TG_REDUCTION_MEAN, false, 0, 0.3));
    });
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LossTest, ::testing::Values(TG_FLOAT32, TG_FLOAT64));

struct LossCase {
    int kind; // 0 ce, 1 nll, 2 mse, 3 l1, 4 bce, 5 bce_opts (in[2] pos_weight, in[3] weight),
              // 6 ce with class probabilities in[1]
    tg_loss_opts opts;
    tg_tensor *target;
    bool transpose;
};

tg_tensor *loss_gc(tg_tensor *const *in, void *user) {
    const LossCase *c = static_cast<const LossCase *>(user);
    tg_tensor *x = c->transpose ? tg_transpose(in[0], 0, 1) : in[0];
    switch (c->kind) {
    case 0: return tg_cross_entropy_opts(x, c->target, c->opts);
    case 1: return tg_nll_loss_opts(x, c->target, c->opts);
    case 2: return tg_mse_loss_opts(x, in[1], tg_loss_opts{c->opts.reduction});
    case 3: return tg_l1_loss_opts(x, in[1], tg_loss_opts{c->opts.reduction});
    case 4: return tg_binary_cross_entropy_with_logits_opts(x, in[1], tg_bce_opts{c->opts.reduction});
    case 6: return tg_cross_entropy_opts(x, in[1], c->opts);
    default: return tg_binary_cross_entropy_with_logits_opts(x, in[1], bopts(c->opts.reduction, in[3], in[2]));
    }
}

TEST_F(TgTest, LossGradcheck) {
    tg_manual_seed(4);
    tg_opts f64 = {TG_FLOAT64, TG_CPU, false};
    tg_tensor *t4 = tensor_i64({2, 0, 1, 2}, TG_SHAPE(4));
    tg_tensor *t_spatial = tensor_i64({0, 2, 1, 1, 2, 0}, TG_SHAPE(2, 3));
    LossCase cases[] = {
        {0, lopts(TG_REDUCTION_MEAN, true, 0, 0.1), t4, false},
        {0, lopts(TG_REDUCTION_NONE), t4, true}, // non-contiguous logits
        {0, lopts(TG_REDUCTION_SUM, false, 0, 0.3), t_spatial, false},
        {1, lopts(TG_REDUCTION_MEAN, true, 2), t4, false},
        {1, lopts(TG_REDUCTION_NONE), t4, true},
    };
    for (auto &c : cases) {
        SCOPED_TRACE(c.kind);
        tg_tensor *x = c.target == t_spatial ? tg_randn(TG_SHAPE(2, 3, 3), f64)
                       : c.transpose         ? tg_randn(TG_SHAPE(3, 4), f64)
                                             : tg_randn(TG_SHAPE(4, 3), f64);
        tg_requires_grad_(x, true);
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
            tg_tensor *x = tg_requires_grad_(tg_randn(broadcast ? TG_SHAPE(4, 3) : TG_SHAPE(3, 4), f64), true);
            // l1 is not differentiable at 0: keep |x - y| away from it.
            tg_tensor *y = kind == 4 ? tg_rand(TG_SHAPE(3, 4), f64)
                                     : tg_add_scalar(tg_mul_scalar(tg_rand(TG_SHAPE(3, 4), f64), 0.1), 5);
            if (kind == 4) tg_requires_grad_(y, true);
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

TEST_F(TgTest, WeightedLossGradcheck) {
    tg_manual_seed(5);
    tg_opts f64 = {TG_FLOAT64, TG_CPU, false};
    tg_tensor *w3 = tensor_f64({0.5, 2.0, 1.25}, TG_SHAPE(3));
    tg_tensor *t4 = tensor_i64({2, 0, -100, 1}, TG_SHAPE(4)); // default ignore_index -100
    tg_tensor *t4i = tensor_i64({2, 0, 1, 2}, TG_SHAPE(4));   // for ignore_index 1 or 2
    tg_tensor *t_spatial = tensor_i64({0, 2, 1, 1, 2, 0}, TG_SHAPE(2, 3));
    LossCase cases[] = {
        {0, lopts(TG_REDUCTION_MEAN, false, 0, 0.2, w3), t4, false},
        {0, lopts(TG_REDUCTION_NONE, true, 1, 0, w3), t4i, true}, // non-contiguous logits
        {0, lopts(TG_REDUCTION_MEAN, true, 0, 0.3, w3), t_spatial, false},
        {1, lopts(TG_REDUCTION_SUM, false, 0, 0, w3), t4, false},
        {1, lopts(TG_REDUCTION_MEAN, true, 2, 0, w3), t4i, true},
    };
    for (auto &c : cases) {
        SCOPED_TRACE(&c - cases);
        tg_tensor *x = c.target == t_spatial ? tg_randn(TG_SHAPE(2, 3, 3), f64)
                       : c.transpose         ? tg_randn(TG_SHAPE(3, 4), f64)
                                             : tg_randn(TG_SHAPE(4, 3), f64);
        tg_requires_grad_(x, true);
        tg_tensor *in[] = {x};
        tg_gradcheck_opts o = {};
        o.user = &c;
        EXPECT_EQ(tg_gradcheck(loss_gc, 1, in, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(loss_gc, 1, in, &o), TG_OK) << tg_last_error();
    }
    // bce with pos_weight [4] (last dim) and weight [3, 1]: gradients in all four inputs
    for (tg_reduction r : {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE}) {
        SCOPED_TRACE(r);
        LossCase c = {5, lopts(r), nullptr, false};
        tg_tensor *x = tg_requires_grad_(tg_mul_scalar(tg_randn(TG_SHAPE(3, 4), f64), 2), true);
        tg_tensor *y = tg_requires_grad_(tg_rand(TG_SHAPE(3, 4), f64), true);
        tg_tensor *pw = tg_requires_grad_(tg_add_scalar(tg_rand(TG_SHAPE(4), f64), 0.5), true);
        tg_tensor *bw = tg_requires_grad_(tg_add_scalar(tg_rand(TG_SHAPE(3, 1), f64), 0.5), true);
        tg_tensor *in[] = {x, y, pw, bw};
        tg_gradcheck_opts o = {};
        o.user = &c;
        EXPECT_EQ(tg_gradcheck(loss_gc, 4, in, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(loss_gc, 4, in, &o), TG_OK) << tg_last_error();
    }
}

// Class probabilities: gradients in the logits and the target, to second order.
TEST_F(TgTest, ProbabilityTargetGradcheck) {
    tg_manual_seed(6);
    tg_opts f64 = {TG_FLOAT64, TG_CPU, false};
    tg_tensor *w3 = tensor_f64({0.5, 2.0, 1.25}, TG_SHAPE(3));
    struct {
        tg_loss_opts opts;
        tg_shape shape;
        bool transpose;
    } cases[] = {
        {lopts(TG_REDUCTION_MEAN), TG_SHAPE(4, 3), false},
        {lopts(TG_REDUCTION_NONE, false, 0, 0.2, w3), TG_SHAPE(3, 4), true}, // non-contiguous logits
        {lopts(TG_REDUCTION_SUM, false, 0, 0.1, w3), TG_SHAPE(2, 3, 2), false},
        {lopts(TG_REDUCTION_MEAN, false, 0, 0.3), TG_SHAPE(3), false},
    };
    for (auto &k : cases) {
        SCOPED_TRACE(&k - cases);
        LossCase c = {6, k.opts, nullptr, k.transpose};
        tg_shape ts = k.shape;
        if (k.transpose) std::swap(ts.dims[0], ts.dims[1]);
        tg_tensor *x = tg_requires_grad_(tg_randn(k.shape, f64), true);
        tg_tensor *t = tg_requires_grad_(tg_rand(ts, f64), true);
        tg_tensor *in[] = {x, t};
        tg_gradcheck_opts o = {};
        o.user = &c;
        EXPECT_EQ(tg_gradcheck(loss_gc, 2, in, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(loss_gc, 2, in, &o), TG_OK) << tg_last_error();
    }
}

// A target shaped like the input switches to class probabilities; the index rules
// (ignore_index -100, int64) do not apply there.
TEST_F(TgTest, ProbabilityTargetRules) {
    tg_tensor *x = tensor_f64({1, 2, 3, 0, -1, 0.5}, TG_SHAPE(2, 3));
    tg_tensor *onehot = tensor_f64({0, 0, 1, 1, 0, 0}, TG_SHAPE(2, 3));
    // one-hot probabilities give the class-index loss
    tg_tensor *by_index = tg_cross_entropy(x, tensor_i64({2, 0}, TG_SHAPE(2)));
    ASSERT_TRUE(by_index) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_cross_entropy(x, onehot), {tg_item(by_index)}, 1e-12));
    // a negative ignore_index other than -100 is accepted (and changes nothing)
    EXPECT_TRUE(
        tensor_near(tg_cross_entropy_opts(x, onehot, lopts(TG_REDUCTION_MEAN, true, -5)), {tg_item(by_index)}, 1e-12));
    // float32 logits with float64 probabilities: float64, as PyTorch promotes
    tg_tensor *l = tg_cross_entropy(tg_cast(x, TG_FLOAT32), onehot);
    ASSERT_TRUE(l) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(l), TG_FLOAT64);
    EXPECT_NEAR(tg_item(l), tg_item(by_index), 1e-6);

    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy(x, tensor_i64({2, 0, 1, 1, 0, 0}, TG_SHAPE(2, 3))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cross_entropy: a target shaped like the input [2, 3] holds class probabilities and must "
                          "be floating, got int64 (class indices are int64 [N, d...])");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy_opts(x, onehot, lopts(TG_REDUCTION_MEAN, true, 0)), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cross_entropy: ignore_index 0 is not supported with class probabilities as target");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy_opts(x, onehot, lopts(TG_REDUCTION_SUM, false, 0, 0, tensor_f64({1, 2}, TG_SHAPE(2)))),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_cross_entropy: expected weight of shape [3] (one per class) for input [2, 3], got [2]");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy_opts(x, onehot, lopts(TG_REDUCTION_MEAN, false, 0, -0.5)), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cross_entropy: label_smoothing must be in [0, 1], got -0.5");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy(tg_zeros(TG_SHAPE(2, 0), tg_opts{}), tg_zeros(TG_SHAPE(2, 0), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cross_entropy: expected at least one class, got input [2, 0]");
    // No rows: the mean is 0/0 = NaN, as in PyTorch.
    tg_tensor *empty = tg_cross_entropy(tg_zeros(TG_SHAPE(0, 3), tg_opts{}), tg_zeros(TG_SHAPE(0, 3), tg_opts{}));
    ASSERT_TRUE(empty) << tg_last_error();
    EXPECT_TRUE(std::isnan(tg_item(empty)));
}

// Unit weights give the unweighted loss and gradient; the weight gets no gradient.
TEST_F(TgTest, CrossEntropyUnitWeightsMatchUnweighted) {
    tg_tensor *x = tensor_f64({1, 2, 3, 0, -1, 0.5, 3, 1, 1, 2, 2, -2}, TG_SHAPE(4, 3), true);
    tg_tensor *t = tensor_i64({2, -100, 0, 1}, TG_SHAPE(4));
    tg_tensor *ones = tensor_f64({1, 1, 1}, TG_SHAPE(3), true);
    tg_tensor *ref = tg_cross_entropy_opts(x, t, lopts(TG_REDUCTION_MEAN, false, 0, 0.1));
    ASSERT_TRUE(ref) << tg_last_error();
    ASSERT_EQ(tg_backward(ref), TG_OK);
    std::vector<double> g_ref = values(tg_grad(x));
    tg_zero_grad(x);
    tg_tensor *l = tg_cross_entropy_opts(x, t, lopts(TG_REDUCTION_MEAN, false, 0, 0.1, ones));
    ASSERT_TRUE(l) << tg_last_error();
    EXPECT_NEAR(tg_item(l), tg_item(ref), 1e-12);
    ASSERT_EQ(tg_backward(l), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), g_ref, 1e-12));
    EXPECT_EQ(tg_grad(ones), nullptr);
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
    EXPECT_NEAR(tg_item(tg_nll_loss(tg_log_softmax(x, 1), t)), (l0 + l2) / 2, 1e-12);
    // another ignore_index replaces -100, which is then out of range
    tg_loss_opts o = {};
    o.use_ignore_index = true;
    o.ignore_index = 1;
    EXPECT_EQ(tg_cross_entropy_opts(x, t, o), nullptr);
    EXPECT_ERROR_CONTAINS(
        "target -100 is out of bounds for 3 classes (expected 0 <= target < 3, or the ignore_index 1)");
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
    EXPECT_EQ(tg_nll_loss(x, t), nullptr);
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
    EXPECT_ERROR_CONTAINS("expected float32, float64, float16 or bfloat16 input, got int64");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy(x, tensor_i64({0, 1, 2}, TG_SHAPE(3))), nullptr);
    EXPECT_ERROR_CONTAINS("expected target of the input's shape without dim 1 for input [4, 5]");
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy_opts(x, tensor_i64({0, 1, 2, 3}, TG_SHAPE(4)), lopts(TG_REDUCTION_MEAN, false, 0, 1.5)),
              nullptr);
    EXPECT_ERROR_CONTAINS("label_smoothing must be in [0, 1], got 1.5");
    tg_clear_error();
    EXPECT_EQ(tg_mse_loss(x, tg_zeros(TG_SHAPE(3, 5), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_mse_loss: target [3, 5] does not broadcast with input [4, 5]");
    tg_clear_error();
    EXPECT_EQ(tg_l1_loss(x, tg_zeros(TG_SHAPE(4, 5), tg_opts{TG_FLOAT64, TG_CPU, false})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_l1_loss: expected input and target of one floating dtype, got float32 and float64");
    tg_clear_error();
    EXPECT_EQ(tg_binary_cross_entropy_with_logits(x, tg_zeros(TG_SHAPE(1, 5), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("target [1, 5] must have the same shape as input [4, 5]");
    tg_clear_error();
    EXPECT_EQ(tg_mse_loss(nullptr, x), nullptr);
    EXPECT_ERROR_CONTAINS("tg_mse_loss: input 0 is NULL");
}

TEST_F(TgTest, WeightedLossErrors) {
    tg_tensor *x = tg_zeros(TG_SHAPE(4, 5), tg_opts{});
    tg_tensor *t = tensor_i64({0, 1, 4, 2}, TG_SHAPE(4));
    tg_clear_error();
    EXPECT_EQ(tg_cross_entropy_opts(x, t, lopts(TG_REDUCTION_MEAN, false, 0, 0, tg_ones(TG_SHAPE(4), tg_opts{}))),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_cross_entropy: expected weight of shape [5] (one per class) for input [4, 5], got [4]");
    tg_clear_error();
    EXPECT_EQ(tg_nll_loss_opts(x, t, lopts(TG_REDUCTION_SUM, false, 0, 0, tg_ones(TG_SHAPE(1, 5), tg_opts{}))),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_nll_loss: expected weight of shape [5] (one per class) for input [4, 5], got [1, 5]");
    tg_clear_error();
    EXPECT_EQ(
        tg_cross_entropy_opts(
            x, t, lopts(TG_REDUCTION_MEAN, false, 0, 0.1, tg_ones(TG_SHAPE(5), tg_opts{TG_FLOAT64, TG_CPU, false}))),
        nullptr);
    EXPECT_ERROR_CONTAINS("tg_cross_entropy: expected weight of the input's dtype float32, got float64");
    tg_clear_error();
    // the target check comes first
    EXPECT_EQ(tg_nll_loss_opts(x, tensor_i64({0, 1, 9, 2}, TG_SHAPE(4)),
                               lopts(TG_REDUCTION_MEAN, false, 0, 0, tg_ones(TG_SHAPE(5), tg_opts{}))),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_nll_loss: target 9 is out of bounds for 5 classes");
    tg_tensor *y = tg_zeros(TG_SHAPE(4, 5), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_binary_cross_entropy_with_logits_opts(
                  x, y, bopts(TG_REDUCTION_MEAN, nullptr, tg_ones(TG_SHAPE(4), tg_opts{}))),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_binary_cross_entropy_with_logits: pos_weight [4] does not broadcast to input [4, 5]");
    tg_clear_error();
    EXPECT_EQ(tg_binary_cross_entropy_with_logits_opts(
                  x, y, bopts(TG_REDUCTION_SUM, tg_ones(TG_SHAPE(2, 4, 5), tg_opts{}), nullptr)),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_binary_cross_entropy_with_logits: weight [2, 4, 5] does not broadcast to input [4, 5]");
    tg_clear_error();
    EXPECT_EQ(tg_binary_cross_entropy_with_logits_opts(
                  x, y, bopts(TG_REDUCTION_NONE, nullptr, tg_ones(TG_SHAPE(5), tg_opts{TG_FLOAT64, TG_CPU, false}))),
              nullptr);
    EXPECT_ERROR_CONTAINS(
        "tg_binary_cross_entropy_with_logits: expected pos_weight of the input's dtype float32, got float64");
    tg_clear_error();
    EXPECT_EQ(tg_binary_cross_entropy_with_logits_opts(x, y, bopts((tg_reduction)7, nullptr, nullptr)), nullptr);
    EXPECT_ERROR_CONTAINS("tg_binary_cross_entropy_with_logits: unknown reduction 7");
}

} // namespace
