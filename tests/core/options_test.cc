// The options structs' initialiser macros (core/options.h): PyTorch's defaults written
// out, so that a zero is a zero. The structs come from tests/options_macros.c, written
// as a C user writes them; each is checked for its fields and for what the library does
// with it, against the older TG_ZERO spelling where there is one.
#include <cmath>
#include <vector>

#include "options_macros.h"
#include "tapegrad.h"
#include "test_util.h"

namespace {

class OptionsTest : public TgTest {};

TEST_F(OptionsTest, BatchNormMomentumZeroFreezesTheRunningStatistics) {
    tg_batch_norm_opts o = c_batch_norm_momentum_zero();
    EXPECT_EQ(o.eps, 1e-5);
    EXPECT_EQ(o.momentum, 0.0);
    EXPECT_TRUE(o.defaults_filled);
    tg_tensor *x = tensor_f32({1, 10, 3, 20}, TG_SHAPE(2, 2));
    tg_module *frozen = tg_nn_batch_norm1d(2, o);
    ASSERT_NE(tg_forward(frozen, x), nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_module_get(frozen, "running_mean"), {0, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_module_get(frozen, "running_var"), {1, 1}, 0));
    tg_module_free(frozen);

    // The macro with other fields keeps PyTorch's momentum: 0.1 of the batch mean (2, 15).
    tg_module *moving = tg_nn_batch_norm1d(2, c_batch_norm_defaults_eps(1e-3));
    ASSERT_NE(tg_forward(moving, x), nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_module_get(moving, "running_mean"), {0.2, 1.5}, 1e-6));
    EXPECT_EQ(tg_module_get(moving, "weight"), nullptr); // .no_affine = true
    tg_module_free(moving);

    // C++: the macro with no fields, then the fields set on the value.
    tg_batch_norm_opts cpp = TG_BATCH_NORM_OPTS();
    cpp.momentum = 0;
    EXPECT_EQ(cpp.eps, 1e-5);
    EXPECT_TRUE(cpp.defaults_filled);
    tg_module *same = tg_nn_batch_norm1d(2, cpp);
    ASSERT_NE(tg_forward(same, x), nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_module_get(same, "running_mean"), {0, 0}, 0));
    tg_module_free(same);
}

TEST_F(OptionsTest, NormsTakeAZeroEpsAndMomentum) {
    // eps 0: the row [1, 3] (mean 2, variance 1) normalises to exactly [-1, 1].
    tg_module *ln = tg_nn_layer_norm(TG_SHAPE(2), c_layer_norm_eps_zero());
    tg_tensor *y = tg_forward(ln, tensor_f32({1, 3}, TG_SHAPE(1, 2)));
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(y, {-1, 1}, 0));
    tg_module_free(ln);
    tg_module *ln_default = tg_nn_layer_norm(TG_SHAPE(2), TG_LAYER_NORM_OPTS());
    y = tg_forward(ln_default, tensor_f32({1, 3}, TG_SHAPE(1, 2)));
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_FALSE(tensor_near(y, {-1, 1}, 1e-6)); // eps 1e-5: 1 / sqrt(1 + 1e-5) = 1 - 5e-6
    EXPECT_TRUE(tensor_near(y, {-1 / std::sqrt(1 + 1e-5), 1 / std::sqrt(1 + 1e-5)}, 1e-7));
    tg_module_free(ln_default);

    tg_module *in = tg_nn_instance_norm2d(1, c_instance_norm_momentum_zero());
    ASSERT_NE(tg_forward(in, tensor_f32({1, 2, 3, 4}, TG_SHAPE(1, 1, 2, 2))), nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_module_get(in, "running_mean"), {0}, 0));
    tg_module_free(in);
}

TEST_F(OptionsTest, TransformerLayerWithoutDropoutIsDeterministicInTraining) {
    tg_transformer_layer_opts o = c_transformer_no_dropout();
    EXPECT_EQ(o.dropout, 0.0);
    EXPECT_EQ(o.layer_norm_eps, 1e-5);
    EXPECT_EQ(o.dim_feedforward, 16);
    tg_manual_seed(4);
    tg_module *layer = tg_nn_transformer_encoder_layer(8, 2, o);
    ASSERT_NE(layer, nullptr) << tg_last_error();
    tg_tensor *x = tg_randn(TG_SHAPE(3, 2, 8), tg_opts{});
    std::vector<double> first = values(tg_forward(layer, x));
    EXPECT_TRUE(tensor_near(tg_forward(layer, x), first, 0));
    tg_module_free(layer);
    // The zero-initialised struct's 0 is PyTorch's dropout 0.1: two training forwards differ.
    tg_module *dropping = tg_nn_transformer_encoder_layer(8, 2, tg_transformer_layer_opts{.dim_feedforward = 16});
    std::vector<double> a = values(tg_forward(dropping, x));
    EXPECT_FALSE(tensor_near(tg_forward(dropping, x), a, 1e-6));
    tg_module_free(dropping);
}

TEST_F(OptionsTest, OptimizersTakeRealZeros) {
    tg_tensor *w = tensor_f32({1, 2}, TG_SHAPE(2), true);
    tg_tensor *b = tensor_f32({3}, TG_SHAPE(1), true);

    tg_optim *sgd0 = tg_sgd_params(&w, 1, c_sgd_lr(0)); // lr 0 given: allowed
    ASSERT_NE(sgd0, nullptr) << tg_last_error();
    EXPECT_EQ(tg_optim_group_opts(sgd0, 0).lr, 0.0);
    tg_optim_free(sgd0);
    EXPECT_EQ(tg_sgd_params(&w, 1, c_sgd_no_lr()), nullptr); // lr not given: PyTorch has no default
    EXPECT_ERROR_CONTAINS("SGD: lr must be given");

    tg_optim *adam = tg_adam_params(&w, 1, c_adam_beta1_zero());
    ASSERT_NE(adam, nullptr) << tg_last_error();
    tg_param_group_opts g = tg_optim_group_opts(adam, 0);
    EXPECT_EQ(g.betas[0], 0.0);
    EXPECT_EQ(g.betas[1], 0.999);
    EXPECT_EQ(g.lr, 1e-3);
    EXPECT_EQ(g.eps, 1e-8);
    tg_optim_free(adam);

    tg_optim *adamw = tg_adamw_params(&w, 1, c_adamw_no_decay());
    g = tg_optim_group_opts(adamw, 0);
    EXPECT_EQ(g.weight_decay, 0.0);
    EXPECT_EQ(g.lr, 3e-4);
    tg_optim_free(adamw);
    tg_optim *adamw_default = tg_adamw_params(&w, 1, TG_ADAMW_OPTS());
    EXPECT_EQ(tg_optim_group_opts(adamw_default, 0).weight_decay, 1e-2);
    tg_optim_free(adamw_default);

    tg_optim *rms = tg_rmsprop_params(&w, 1, c_rmsprop_alpha_zero());
    g = tg_optim_group_opts(rms, 0);
    EXPECT_EQ(g.alpha, 0.0);
    EXPECT_EQ(g.lr, 1e-2);
    tg_optim_free(rms);

    // A group from TG_PARAM_GROUP_OPTS: weight_decay 0 as written, the rest inherited.
    tg_optim *sgd = tg_sgd_params(&w, 1, tg_sgd_opts{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
    ASSERT_EQ(tg_optim_add_param_group(sgd, &b, 1, c_group_no_decay()), TG_OK) << tg_last_error();
    g = tg_optim_group_opts(sgd, 1);
    EXPECT_EQ(g.weight_decay, 0.0);
    EXPECT_EQ(g.lr, 0.1);
    EXPECT_EQ(g.momentum, 0.9);
    tg_tensor *b2 = tensor_f32({4}, TG_SHAPE(1), true);
    EXPECT_EQ(tg_optim_add_param_group(sgd, &b2, 1, c_group_betas()), TG_ERROR);
    EXPECT_ERROR_CONTAINS("SGD has no option betas");
    tg_optim_free(sgd);
}

TEST_F(OptionsTest, OneCycleBaseMomentumZero) {
    tg_one_cycle_opts o = c_one_cycle_base_momentum_zero();
    EXPECT_EQ(o.pct_start, 0.3);
    EXPECT_EQ(o.div_factor, 25.0);
    EXPECT_EQ(o.final_div_factor, 1e4);
    EXPECT_EQ(o.max_momentum, 0.95);
    // Adam's beta1 cycles (SGD refuses a momentum of 0, as PyTorch's would be switched off).
    tg_tensor *w = tensor_f32({1}, TG_SHAPE(1), true);
    tg_optim *adam = tg_adam_params(&w, 1, tg_adam_opts{});
    tg_lr_scheduler *s = tg_one_cycle_lr(adam, o);
    ASSERT_NE(s, nullptr) << tg_last_error();
    EXPECT_EQ(tg_optim_group_opts(adam, 0).betas[0], 0.95); // the cycle starts at max_momentum
    // The first phase ends at step pct_start * 10 - 1 = 2, at base_momentum: 0.
    ASSERT_EQ(tg_scheduler_step(s), TG_OK);
    ASSERT_EQ(tg_scheduler_step(s), TG_OK);
    EXPECT_EQ(tg_optim_group_opts(adam, 0).betas[0], 0.0);
    // The zero-initialised struct's base_momentum 0 is PyTorch's 0.85.
    tg_lr_scheduler *legacy = tg_one_cycle_lr(adam, tg_one_cycle_opts{.max_lr = 0.1, .total_steps = 10});
    ASSERT_NE(legacy, nullptr) << tg_last_error();
    ASSERT_EQ(tg_scheduler_step(legacy), TG_OK);
    ASSERT_EQ(tg_scheduler_step(legacy), TG_OK);
    EXPECT_NEAR(tg_optim_group_opts(adam, 0).betas[0], 0.85, 1e-12);
    tg_scheduler_free(legacy);
    tg_scheduler_free(s);
    tg_optim_free(adam);
}

TEST_F(OptionsTest, AttentionScaleZeroAveragesTheValues) {
    tg_manual_seed(2);
    tg_tensor *q = tg_randn(TG_SHAPE(1, 2, 3), tg_opts{});
    tg_tensor *k = tg_randn(TG_SHAPE(1, 4, 3), tg_opts{});
    tg_tensor *v = tensor_f32({1, 2, 3, 4, 5, 6, 7, 8}, TG_SHAPE(1, 4, 2));
    // scale 0: every score is 0, each query's output the mean of the values' rows.
    tg_tensor *y = tg_scaled_dot_product_attention_opts(q, k, v, c_sdpa_scale(0));
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(y, {4, 5, 4, 5}, 1e-6));
    // TG_SDPA_OPTS(): scale=None, the same as the zero-initialised struct, bit for bit.
    tg_tensor *dflt = tg_scaled_dot_product_attention_opts(q, k, v, c_sdpa_defaults());
    ASSERT_NE(dflt, nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(dflt, values(tg_scaled_dot_product_attention_opts(q, k, v, tg_sdpa_opts{})), 0));
    EXPECT_FALSE(tensor_near(dflt, {4, 5, 4, 5}, 1e-3));
    EXPECT_EQ(tg_scaled_dot_product_attention_opts(q, k, v, c_sdpa_scale(INFINITY)), nullptr);
    EXPECT_ERROR_CONTAINS("scale must be finite");
}

TEST_F(OptionsTest, LossesTakeAZeroBetaAndMargin) {
    tg_tensor *x = tensor_f64({0.1, -2, 0.5}, TG_SHAPE(3));
    tg_tensor *t = tensor_f64({0, 0, 0}, TG_SHAPE(3));
    // beta 0 is the L1 loss; the older TG_ZERO spelling gives the same.
    tg_tensor *l1 = tg_smooth_l1_loss_opts(x, t, c_smooth_l1_beta_zero());
    ASSERT_NE(l1, nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(l1, values(tg_l1_loss(x, t)), 0));
    EXPECT_TRUE(tensor_near(l1, values(tg_smooth_l1_loss_opts(x, t, tg_smooth_l1_opts{.beta = TG_ZERO})), 0));
    // Huber's defaults with another reduction: delta 1, summed: 0.005 + 1.5 + 0.125.
    EXPECT_TRUE(tensor_near(tg_huber_loss_opts(x, t, c_huber_defaults()), {1.63}, 1e-12));
    tg_tensor *a = tensor_f64({0, 0}, TG_SHAPE(1, 2)), *p = tensor_f64({3, 4}, TG_SHAPE(1, 2)),
              *n = tensor_f64({6, 8}, TG_SHAPE(1, 2));
    tg_triplet_opts zero_margin = c_triplet_margin_zero();
    EXPECT_EQ(zero_margin.p, 2.0);
    EXPECT_EQ(zero_margin.eps, 1e-6);
    tg_tensor *loss = tg_triplet_margin_loss_opts(a, p, n, zero_margin);
    ASSERT_NE(loss, nullptr) << tg_last_error();
    // d(a, p) ~ 5, d(a, n) ~ 10 (eps 1e-6 added to the differences).
    EXPECT_TRUE(tensor_near(loss, {0}, 0));
    // The positive farther than the negative: 10 - 5 + 0, and + 1 with PyTorch's margin.
    EXPECT_TRUE(tensor_near(tg_triplet_margin_loss_opts(a, n, p, zero_margin), {5}, 1e-5));
    EXPECT_TRUE(tensor_near(tg_triplet_margin_loss_opts(a, n, p, tg_triplet_opts{}), {6}, 1e-5));
}

} // namespace
