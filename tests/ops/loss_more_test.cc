// binary_cross_entropy, kl_div, smooth_l1_loss, huber_loss, triplet_margin_loss and
// the distances (cosine_similarity, pairwise_distance): PyTorch 1.13's values and
// gradients (tests/fixtures/gen_loss_more.py), including the clamped and kinked
// points, gradcheck and gradgradcheck in float64, and the errors.
#include <cmath>
#include <string>
#include <vector>

#include "op_fixture.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/loss_more.txt");
    return f;
}
tg_tensor *constant(const std::string &name, tg_dtype dt) { return fixture_tensor(fx(), name).make(dt); }

using Fn = std::function<tg_tensor *(const std::vector<tg_tensor *> &, tg_dtype)>;

// Runs the case in float64 and, unless `f64_only` (values that float32 cannot hold),
// in float32.
void check(const std::string &name, const Fn &fn, bool f64_only = false) {
    for (tg_dtype dt : {TG_FLOAT64, TG_FLOAT32}) {
        if (dt == TG_FLOAT32 && f64_only) continue;
        check_fixture_in(fx(), name, dt, [&](auto &in, tg_tensor **) { return fn(in, dt); });
    }
}

tg_bce_opts bce(tg_reduction r, tg_tensor *weight = nullptr) {
    tg_bce_opts o = {};
    o.reduction = r;
    o.weight = weight;
    return o;
}
tg_kl_opts kl(tg_reduction r, bool log_target = false) {
    tg_kl_opts o = {};
    o.reduction = r;
    o.log_target = log_target;
    return o;
}
tg_smooth_l1_opts smooth(tg_reduction r, double beta) {
    tg_smooth_l1_opts o = {};
    o.reduction = r;
    o.beta = beta;
    return o;
}
tg_huber_opts huber(tg_reduction r, double delta) {
    tg_huber_opts o = {};
    o.reduction = r;
    o.delta = delta;
    return o;
}
tg_triplet_opts triplet(tg_reduction r, double margin, double p, double eps, bool swap) {
    tg_triplet_opts o = {};
    o.reduction = r;
    o.margin = margin;
    o.p = p;
    o.eps = eps;
    o.swap = swap;
    return o;
}

TEST_F(TgTest, BinaryCrossEntropyMatchesPyTorch) {
    check("bce_mean", [](auto &in, tg_dtype) { return tg_binary_cross_entropy(in[0], in[1]); });
    check("bce_sum_weight", [](auto &in, tg_dtype dt) {
        return tg_binary_cross_entropy_opts(in[0], in[1], bce(TG_REDUCTION_SUM, constant("bce_weight", dt)));
    });
    check("bce_none",
          [](auto &in, tg_dtype) { return tg_binary_cross_entropy_opts(in[0], in[1], bce(TG_REDUCTION_NONE)); });
    // log clamped at -100, gradients divided by max(x (1 - x), 1e-12)
    check(
        "bce_edge",
        [](auto &in, tg_dtype dt) {
            return tg_binary_cross_entropy_opts(in[0], constant("bce_edge_target", dt), bce(TG_REDUCTION_NONE));
        },
        true);
}

TEST_F(TgTest, KlDivMatchesPyTorch) {
    check("kl_mean", [](auto &in, tg_dtype) { return tg_kl_div(in[0], in[1]); });
    check("kl_sum", [](auto &in, tg_dtype) { return tg_kl_div_opts(in[0], in[1], kl(TG_REDUCTION_SUM)); });
    check("kl_batchmean", [](auto &in, tg_dtype) { return tg_kl_div_opts(in[0], in[1], kl(TG_REDUCTION_BATCHMEAN)); });
    check("kl_none_broadcast", [](auto &in, tg_dtype) { return tg_kl_div_opts(in[0], in[1], kl(TG_REDUCTION_NONE)); });
    check("kl_log_target",
          [](auto &in, tg_dtype) { return tg_kl_div_opts(in[0], in[1], kl(TG_REDUCTION_BATCHMEAN, true)); });
    check("kl_zero_target", [](auto &in, tg_dtype dt) { // a zero target contributes 0, not NaN
        return tg_kl_div_opts(in[0], constant("kl_target_zero", dt), kl(TG_REDUCTION_SUM));
    });
}

TEST_F(TgTest, KlDivTargetGradientAtZeroIsFinite) {
    // PyTorch 1.13 gives NaN here (xlogy's 0 / 0); tapegrad gives the finite -input.
    tg_tensor *input = tensor_f64({-1, -2}, TG_SHAPE(2));
    tg_tensor *target = tensor_f64({0, 0.5}, TG_SHAPE(2), true);
    ASSERT_EQ(tg_backward(tg_kl_div_opts(input, target, kl(TG_REDUCTION_SUM))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(target), {1, std::log(0.5) + 1 + 2}, 1e-15));
}

TEST_F(TgTest, SmoothL1AndHuberMatchPyTorchAtTheKinks) {
    check("smooth_l1_mean", [](auto &in, tg_dtype) { return tg_smooth_l1_loss(in[0], in[1]); });
    check("smooth_l1_beta",
          [](auto &in, tg_dtype) { return tg_smooth_l1_loss_opts(in[0], in[1], smooth(TG_REDUCTION_SUM, 0.5)); });
    check("smooth_l1_beta0", [](auto &in, tg_dtype) { // TG_ZERO: a real beta 0, an L1 loss
        return tg_smooth_l1_loss_opts(in[0], in[1], smooth(TG_REDUCTION_NONE, TG_ZERO));
    });
    check("smooth_l1_broadcast",
          [](auto &in, tg_dtype) { return tg_smooth_l1_loss_opts(in[0], in[1], smooth(TG_REDUCTION_MEAN, 2.0)); });
    check("smooth_l1_kinks", [](auto &in, tg_dtype dt) {
        return tg_smooth_l1_loss_opts(in[0], constant("zeros7", dt), smooth(TG_REDUCTION_NONE, 0.5));
    });
    check("huber_mean", [](auto &in, tg_dtype) { return tg_huber_loss(in[0], in[1]); });
    check("huber_delta",
          [](auto &in, tg_dtype) { return tg_huber_loss_opts(in[0], in[1], huber(TG_REDUCTION_SUM, 0.7)); });
    check("huber_kinks", [](auto &in, tg_dtype dt) {
        return tg_huber_loss_opts(in[0], constant("zeros7", dt), huber(TG_REDUCTION_NONE, 0.7));
    });
}

TEST_F(TgTest, DistancesMatchPyTorch) {
    check("cos_dim1", [](auto &in, tg_dtype) { return tg_cosine_similarity(in[0], in[1], 1, 1e-8); });
    check("cos_broadcast", [](auto &in, tg_dtype) { return tg_cosine_similarity(in[0], in[1], -1, 1e-8); });
    check("cos_dim0_3d", [](auto &in, tg_dtype) { return tg_cosine_similarity(in[0], in[1], 0, 1e-6); });
    // norms below eps: clamped, with PyTorch's gradient through the clamped norm
    check(
        "cos_clamped", [](auto &in, tg_dtype) { return tg_cosine_similarity(in[0], in[1], 1, 1e-8); }, true);
    check("pd_default", [](auto &in, tg_dtype) { return tg_pairwise_distance(in[0], in[1], 2, 1e-6, false); });
    check("pd_p1", [](auto &in, tg_dtype) { return tg_pairwise_distance(in[0], in[1], 1, 1e-3, false); });
    check("pd_p3_keepdim", [](auto &in, tg_dtype) { return tg_pairwise_distance(in[0], in[1], 3, 1e-6, true); });
    check("pd_inf", [](auto &in, tg_dtype) { return tg_pairwise_distance(in[0], in[1], INFINITY, 1e-6, false); });
    check("pd_1d", [](auto &in, tg_dtype) { return tg_pairwise_distance(in[0], in[1], 2, 1e-6, false); });
}

TEST_F(TgTest, TripletMarginLossMatchesPyTorch) {
    check("triplet_mean", [](auto &in, tg_dtype) { return tg_triplet_margin_loss(in[0], in[1], in[2]); });
    check("triplet_swap", [](auto &in, tg_dtype) {
        return tg_triplet_margin_loss_opts(in[0], in[1], in[2], triplet(TG_REDUCTION_NONE, 0.5, 1, 0, true));
    });
    check("triplet_sum_p3", [](auto &in, tg_dtype) {
        return tg_triplet_margin_loss_opts(in[0], in[1], in[2], triplet(TG_REDUCTION_SUM, 2, 3, 1e-4, false));
    });
    // loss exactly 0: clamp_min passes the gradient there, as PyTorch's
    tg_tensor *anchor = tg_zeros(TG_SHAPE(1, 2), tg_opts{TG_FLOAT64});
    tg_tensor *positive = tensor_f64({1, 1}, TG_SHAPE(1, 2), true);
    tg_tensor *negative = tensor_f64({1, 1}, TG_SHAPE(1, 2));
    tg_tensor *loss =
        tg_triplet_margin_loss_opts(anchor, positive, negative, triplet(TG_REDUCTION_MEAN, TG_ZERO, 0, 0, false));
    EXPECT_TRUE(tensor_near(loss, {0}, 0));
    ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(positive), {std::sqrt(0.5), std::sqrt(0.5)}, 1e-6));
}

struct Gc {
    int kind;
};

tg_tensor *gc_fn(tg_tensor *const *in, void *user) {
    switch (static_cast<Gc *>(user)->kind) {
    case 0: return tg_binary_cross_entropy_opts(tg_sigmoid(in[0]), in[1], bce(TG_REDUCTION_MEAN, in[2]));
    case 1: return tg_kl_div_opts(in[0], tg_softmax(in[1], 1), kl(TG_REDUCTION_BATCHMEAN));
    case 2: return tg_kl_div_opts(in[0], in[1], kl(TG_REDUCTION_NONE, true));
    case 3: return tg_smooth_l1_loss_opts(in[0], in[1], smooth(TG_REDUCTION_SUM, 0.3));
    case 4: return tg_huber_loss_opts(in[0], in[1], huber(TG_REDUCTION_NONE, 0.4));
    case 5: return tg_cosine_similarity(in[0], in[1], 1, 1e-8);
    case 6: return tg_pairwise_distance(in[0], in[1], 3, 1e-6, true);
    default: return tg_triplet_margin_loss_opts(in[0], in[1], in[2], triplet(TG_REDUCTION_MEAN, 3, 2, 0, true));
    }
}

TEST_F(TgTest, LossesAndDistancesAreDifferentiableTwice) {
    for (int kind = 0; kind <= 7; kind++) {
        SCOPED_TRACE(kind);
        Gc c = {kind};
        tg_gradcheck_opts o = {};
        o.user = &c;
        std::vector<tg_tensor *> in = {rand64(TG_SHAPE(3, 4), 10 + kind), rand64(TG_SHAPE(3, 4), 20 + kind)};
        if (kind == 0) in[1] = tg_requires_grad_(tg_mul_scalar(tg_add_scalar(tg_detach(in[1]), 1), 0.5), true);
        if (kind == 0 || kind == 7) in.push_back(rand64(TG_SHAPE(3, 4), 30 + kind));
        if (kind == 0) in[2] = tg_requires_grad_(tg_add_scalar(tg_detach(in[2]), 2), true); // a positive weight
        EXPECT_EQ(tg_gradcheck(gc_fn, (int)in.size(), in.data(), &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(gc_fn, (int)in.size(), in.data(), &o), TG_OK) << tg_last_error();
    }
}

TEST_F(TgTest, LossMoreErrors) {
    tg_tensor *x = tg_full(TG_SHAPE(2, 3), 0.5, tg_opts{});
    tg_tensor *y = tg_full(TG_SHAPE(2, 3), 0.5, tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_binary_cross_entropy(tensor_f32({0.5f, 1.5f, -0.1f}, TG_SHAPE(3)), tg_zeros(TG_SHAPE(3), tg_opts{})),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_binary_cross_entropy: all elements of input should be between 0 and 1 (2 are not)");
    tg_clear_error();
    EXPECT_EQ(tg_binary_cross_entropy(x, tg_zeros(TG_SHAPE(3), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_binary_cross_entropy: target [3] must have the same shape as input [2, 3]");
    tg_clear_error();
    tg_bce_opts pw = {};
    pw.pos_weight = y;
    EXPECT_EQ(tg_binary_cross_entropy_opts(x, y, pw), nullptr);
    EXPECT_ERROR_CONTAINS("tg_binary_cross_entropy: pos_weight is a binary_cross_entropy_with_logits option");
    tg_clear_error();
    EXPECT_EQ(tg_binary_cross_entropy_opts(x, y, bce(TG_REDUCTION_MEAN, tg_zeros(TG_SHAPE(2), tg_opts{}))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_binary_cross_entropy: weight [2] does not broadcast to input [2, 3]");
    tg_clear_error();
    EXPECT_EQ(tg_mse_loss_opts(x, y, tg_loss_opts{TG_REDUCTION_BATCHMEAN}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_mse_loss: reduction batchmean is kl_div's only");
    tg_clear_error();
    EXPECT_EQ(tg_kl_div_opts(x, y, kl((tg_reduction)9)), nullptr);
    EXPECT_ERROR_CONTAINS("tg_kl_div: unknown reduction 9");
    tg_clear_error();
    EXPECT_EQ(tg_kl_div(x, tg_cast(y, TG_FLOAT64)), nullptr);
    EXPECT_ERROR_CONTAINS("tg_kl_div: expected input and target of one floating dtype, got float32 and float64");
    tg_clear_error();
    EXPECT_EQ(tg_smooth_l1_loss_opts(x, y, smooth(TG_REDUCTION_MEAN, -1)), nullptr);
    EXPECT_ERROR_CONTAINS("tg_smooth_l1_loss: beta must not be negative, got -1");
    tg_clear_error();
    EXPECT_EQ(tg_huber_loss_opts(x, y, huber(TG_REDUCTION_MEAN, TG_ZERO)), nullptr);
    EXPECT_ERROR_CONTAINS("tg_huber_loss: delta must be positive, got -0");
    tg_clear_error();
    EXPECT_EQ(tg_huber_loss(x, tg_zeros(TG_SHAPE(4), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_huber_loss: target [4] does not broadcast with input [2, 3]");
    tg_clear_error();
    EXPECT_EQ(tg_triplet_margin_loss(x, y, tg_zeros(TG_SHAPE(3), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_triplet_margin_loss: anchor, positive and negative must have the same number of dims, "
                          "got 2, 2 and 1");
    tg_clear_error();
    EXPECT_EQ(tg_triplet_margin_loss(x, y, tg_zeros(TG_SHAPE(4, 3), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_triplet_margin_loss: anchor [2, 3], positive [2, 3] and negative [4, 3] cannot be "
                          "broadcast together");
    tg_clear_error();
    EXPECT_EQ(tg_cosine_similarity(x, y, 2, 1e-8), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cosine_similarity: dim 2 is out of range for inputs of 2 dims");
    tg_clear_error();
    EXPECT_EQ(tg_cosine_similarity(x, tg_zeros(TG_SHAPE(4, 3), tg_opts{}), 1, 1e-8), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cosine_similarity: x1 [2, 3] and x2 [4, 3] cannot be broadcast together");
    tg_clear_error();
    EXPECT_EQ(tg_pairwise_distance(x, tg_cast(y, TG_INT64), 2, 1e-6, false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_pairwise_distance: expected x1 and x2 of one floating dtype, got float32 and int64");
    tg_clear_error();
    EXPECT_EQ(tg_pairwise_distance(x, y, 0, 1e-6, false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_pairwise_distance: p must be positive (or INFINITY), got 0");
}

} // namespace
