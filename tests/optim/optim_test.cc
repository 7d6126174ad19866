// Optimizers against PyTorch 1.13 (tests/fixtures/training.txt, written by
// tests/fixtures/gen_training.py): the same initial weights and 20 batches give the
// same per-step losses and final parameters (float64: 1e-8 relative; float32 losses:
// 1e-4 relative), BatchNorm's running statistics and eval outputs match; state
// access, LR schedules, clip_grad_norm and freeing without leaks.
// Parameter groups and OneCycleLR against tests/fixtures/optim_groups.txt (written
// by tests/fixtures/gen_optim_groups.py): OneCycleLR's lr and momentum sequences,
// schedules over two groups, and training with weights and biases in two groups.
#include <cmath>
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fixtures() {
    static const std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/training.txt");
    return fx;
}

const FixtureTensor &fx(const std::string &name) { return fixture_tensor(fixtures(), name); }

tg_optim *make_optimizer(const std::string &config, tg_module *m) {
    if (config == "sgd_momentum") return tg_sgd(m, tg_sgd_opts{.lr = 0.1, .momentum = 0.9});
    if (config == "sgd_nesterov_wd")
        return tg_sgd(m, tg_sgd_opts{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-2, .nesterov = true});
    if (config == "sgd_dampening")
        return tg_sgd(m, tg_sgd_opts{.lr = 0.1, .momentum = 0.5, .dampening = 0.3, .weight_decay = 1e-3});
    if (config == "adam") return tg_adam(m, tg_adam_opts{.lr = 1e-2});
    if (config == "adam_amsgrad_wd") return tg_adam(m, tg_adam_opts{.lr = 1e-2, .weight_decay = 1e-2, .amsgrad = true});
    if (config == "adamw") return tg_adamw(m, tg_adamw_opts{.lr = 1e-2, .weight_decay = 0.1});
    if (config == "adamw_amsgrad") return tg_adamw(m, tg_adamw_opts{.lr = 5e-3, .betas = {0.8, 0.99}, .amsgrad = true});
    if (config == "rmsprop") return tg_rmsprop(m, tg_rmsprop_opts{.lr = 1e-2});
    if (config == "rmsprop_centered_momentum")
        return tg_rmsprop(m, tg_rmsprop_opts{.lr = 1e-3, .weight_decay = 1e-2, .momentum = 0.9, .centered = true});
    ADD_FAILURE() << "unknown config " << config;
    return nullptr;
}

tg_module *make_net(const std::string &net) {
    if (net == "mlp")
        return TG_NN_SEQUENTIAL(tg_nn_linear(6, 8, tg_linear_opts{}), tg_nn_relu(),
                                tg_nn_linear(8, 3, tg_linear_opts{}));
    return TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 3, 3, tg_conv_opts{.padding = 1}),
                            tg_nn_batch_norm2d(3, tg_batch_norm_opts{}), tg_nn_relu(),
                            tg_nn_max_pool2d(tg_pool_opts{.kernel_size = 2}), tg_nn_flatten(1, -1),
                            tg_nn_linear(3 * 3 * 3, 3, tg_linear_opts{}));
}

// The net in `dtype` with PyTorch's initial weights (parameters and buffers).
tg_module *load_net(const std::string &net, tg_dtype dtype) {
    tg_module *m = make_net(net);
    EXPECT_NE(m, nullptr) << tg_last_error();
    if (!m) return nullptr;
    EXPECT_EQ(tg_module_cast(m, dtype), TG_OK) << tg_last_error();
    int n = 0;
    const tg_named_tensor *state = tg_state_dict(m, &n);
    TG_SCOPE {
        for (int i = 0; i < n; i++) {
            std::string key = net + ".init." + state[i].name;
            if (!fixtures().count(key)) continue; // num_batches_tracked: stays 0
            TG_NO_GRAD { EXPECT_EQ(tg_copy_(state[i].tensor, fx(key).make(TG_FLOAT64)), TG_OK) << tg_last_error(); }
        }
    }
    return m;
}

// F.cross_entropy(logits, y) = -mean(log_softmax(logits)[i, y_i]), from ops that exist on every build.
tg_tensor *cross_entropy(tg_tensor *logits, tg_tensor *y) {
    tg_tensor *picked = tg_gather(tg_log_softmax(logits, 1), 1, tg_unsqueeze(y, 1));
    return tg_neg(tg_mean(picked));
}

tg_tensor *batch(tg_tensor *all, int step) {
    tg_tensor *one = tg_narrow(all, 0, step, 1);
    return tg_squeeze(one, 0);
}

// Trains for the fixture's 20 steps; returns the losses.
std::vector<double> train(tg_module *m, tg_optim *opt, const std::string &net, tg_dtype dtype, int first = 0,
                          int last = 20) {
    std::vector<double> losses;
    TG_SCOPE {
        tg_tensor *xs = fx(net + ".x").make(dtype), *ys = fx(net + ".y").make(TG_INT64);
        for (int step = first; step < last; step++) {
            TG_SCOPE {
                tg_tensor *logits = tg_forward(m, batch(xs, step));
                tg_tensor *loss = cross_entropy(logits, batch(ys, step));
                EXPECT_NE(loss, nullptr) << tg_last_error();
                EXPECT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
                EXPECT_EQ(tg_optim_step(opt), TG_OK) << tg_last_error();
                tg_optim_zero_grad(opt);
                losses.push_back(tg_item(loss));
            }
        }
    }
    return losses;
}

::testing::AssertionResult near_rel(const std::vector<double> &got, const std::vector<double> &want, double rtol,
                                    double atol) {
    if (got.size() != want.size())
        return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
    for (size_t i = 0; i < got.size(); i++)
        if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i])))
            return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " != " << want[i];
    return ::testing::AssertionSuccess();
}

void check_against_pytorch(const std::string &net, const std::string &config) {
    SCOPED_TRACE(net + " / " + config);
    // float64: losses and every parameter and buffer within 1e-8 relative.
    long live_before = tg_live_tensors();
    tg_module *m = load_net(net, TG_FLOAT64);
    tg_optim *opt = make_optimizer(config, m);
    ASSERT_NE(opt, nullptr) << tg_last_error();
    std::vector<double> losses = train(m, opt, net, TG_FLOAT64);
    std::string prefix = net + ".f64." + config;
    EXPECT_TRUE(near_rel(losses, fx(prefix + ".losses").data, 1e-8, 0));
    int n = 0;
    const tg_named_tensor *state = tg_state_dict(m, &n);
    for (int i = 0; i < n; i++)
        EXPECT_TRUE(near_rel(values(state[i].tensor), fx(prefix + ".final." + state[i].name).data, 1e-8, 1e-12))
            << state[i].name;
    if (net == "conv") {
        TG_SCOPE {
            tg_eval(m);
            tg_tensor *x = batch(fx(net + ".x").make(TG_FLOAT64), 20);
            // 1e-8 relative to the outputs' scale: an output near zero is a difference of
            // larger terms, so its own relative error can be larger.
            const std::vector<double> &want = fx(prefix + ".eval_out").data;
            double scale = 0;
            for (double v : want) scale = std::max(scale, std::fabs(v));
            EXPECT_TRUE(near_rel(values(tg_forward(m, x)), want, 1e-8, 1e-8 * scale));
        }
    }
    if (config == "adam_amsgrad_wd") {
        int count = tg_optim_state_count(opt);
        EXPECT_EQ(count, 4 * 4);
        for (int i = 0; i < count; i++) {
            const char *name = nullptr;
            tg_tensor *t = nullptr;
            ASSERT_EQ(tg_optim_state_get(opt, i, &name, &t), TG_OK);
            std::string key = prefix + "." + name;
            if (fixtures().count(key)) {
                EXPECT_TRUE(near_rel(values(t), fx(key).data, 1e-8, 1e-12)) << name;
            }
        }
    }
    tg_optim_free(opt);
    tg_module_free(m);
    EXPECT_EQ(tg_live_tensors(), live_before) << "a trained model and its optimizer must free every tensor";

    // float32: the losses within 1e-4 relative.
    m = load_net(net, TG_FLOAT32);
    opt = make_optimizer(config, m);
    losses = train(m, opt, net, TG_FLOAT32);
    EXPECT_TRUE(near_rel(losses, fx(net + ".f32." + config + ".losses").data, 1e-4, 0));
    tg_optim_free(opt);
    tg_module_free(m);
}

} // namespace

class OptimTest : public TgTest {};

#define PYTORCH_CASE(net, config) \
    TEST_F(OptimTest, net##_##config) { check_against_pytorch(#net, #config); }

PYTORCH_CASE(mlp, sgd_momentum)
PYTORCH_CASE(mlp, sgd_nesterov_wd)
PYTORCH_CASE(mlp, sgd_dampening)
PYTORCH_CASE(mlp, adam)
PYTORCH_CASE(mlp, adam_amsgrad_wd)
PYTORCH_CASE(mlp, adamw)
PYTORCH_CASE(mlp, adamw_amsgrad)
PYTORCH_CASE(mlp, rmsprop)
PYTORCH_CASE(mlp, rmsprop_centered_momentum)
PYTORCH_CASE(conv, sgd_momentum)
PYTORCH_CASE(conv, adam)

TEST_F(OptimTest, StateNamesAndRestore) {
    // Train 10 steps, copy the optimizer state into a fresh optimizer on a copy of the
    // model, train both 10 more: identical results (what a checkpoint round trip needs).
    tg_module *a = load_net("mlp", TG_FLOAT64), *b = load_net("mlp", TG_FLOAT64);
    tg_optim *oa = tg_adam(a, tg_adam_opts{.lr = 1e-2, .amsgrad = true});
    tg_optim *ob = tg_adam(b, tg_adam_opts{.lr = 1e-2, .amsgrad = true});
    EXPECT_EQ(tg_optim_state_count(oa), 0) << "state appears at the first step, as in PyTorch";
    train(a, oa, "mlp", TG_FLOAT64, 0, 10);
    ASSERT_EQ(tg_optim_state_count(oa), 16);
    const char *name = nullptr;
    tg_tensor *t = nullptr;
    ASSERT_EQ(tg_optim_state_get(oa, 0, &name, &t), TG_OK);
    EXPECT_STREQ(name, "state.0.step");
    EXPECT_EQ(tg_item(t), 10);
    ASSERT_EQ(tg_optim_state_get(oa, 5, &name, &t), TG_OK);
    EXPECT_STREQ(name, "state.1.exp_avg");
    EXPECT_EQ(tg_optim_state_get(oa, 16, &name, &t), TG_ERROR);
    int n = 0;
    tg_tensor *const *pa = tg_parameters(a, &n);
    tg_tensor *const *pb = tg_parameters(b, &n);
    TG_NO_GRAD {
        for (int i = 0; i < n; i++) tg_copy_(pb[i], pa[i]);
    }
    for (int i = 0; i < tg_optim_state_count(oa); i++) {
        ASSERT_EQ(tg_optim_state_get(oa, i, &name, &t), TG_OK);
        ASSERT_EQ(tg_optim_state_set(ob, name, t), TG_OK) << tg_last_error();
    }
    EXPECT_EQ(tg_optim_state_set(ob, "state.0.momentum_buffer", t), TG_ERROR);
    EXPECT_ERROR_CONTAINS("Adam");
    std::vector<double> la = train(a, oa, "mlp", TG_FLOAT64, 10, 20), lb = train(b, ob, "mlp", TG_FLOAT64, 10, 20);
    EXPECT_EQ(la, lb);
    for (int i = 0; i < n; i++) EXPECT_EQ(values(pa[i]), values(pb[i]));
    tg_optim_free(oa);
    tg_optim_free(ob);
    tg_module_free(a);
    tg_module_free(b);
}

TEST_F(OptimTest, SgdMomentumStateRestoreKeepsFirstStepRule) {
    tg_module *a = load_net("mlp", TG_FLOAT64), *b = load_net("mlp", TG_FLOAT64);
    tg_optim *oa = tg_sgd(a, tg_sgd_opts{.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
    tg_optim *ob = tg_sgd(b, tg_sgd_opts{.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
    train(a, oa, "mlp", TG_FLOAT64, 0, 5);
    int n = 0;
    tg_tensor *const *pa = tg_parameters(a, &n);
    tg_tensor *const *pb = tg_parameters(b, &n);
    TG_NO_GRAD {
        for (int i = 0; i < n; i++) tg_copy_(pb[i], pa[i]);
    }
    ASSERT_EQ(tg_optim_state_count(oa), 4);
    for (int i = 0; i < 4; i++) {
        const char *name;
        tg_tensor *t;
        tg_optim_state_get(oa, i, &name, &t);
        EXPECT_EQ(std::string(name), "state." + std::to_string(i) + ".momentum_buffer");
        ASSERT_EQ(tg_optim_state_set(ob, name, t), TG_OK) << tg_last_error();
    }
    EXPECT_EQ(train(a, oa, "mlp", TG_FLOAT64, 5, 10), train(b, ob, "mlp", TG_FLOAT64, 5, 10));
    tg_optim_free(oa);
    tg_optim_free(ob);
    tg_module_free(a);
    tg_module_free(b);
}

TEST_F(OptimTest, OptionsDefaultsAndErrors) {
    tg_module *m = load_net("mlp", TG_FLOAT32);
    tg_optim *adam = tg_adam(m, tg_adam_opts{});
    EXPECT_DOUBLE_EQ(tg_optim_get_lr(adam), 1e-3);
    EXPECT_STREQ(tg_optim_name(adam), "Adam");
    EXPECT_EQ(tg_optim_num_params(adam), 4);
    EXPECT_EQ(tg_optim_param(adam, 0), tg_module_get(m, "0.weight"));
    tg_optim_set_lr(adam, 0.5);
    EXPECT_DOUBLE_EQ(tg_optim_get_lr(adam), 0.5);
    tg_optim_free(adam);
    EXPECT_EQ(tg_sgd(m, tg_sgd_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("SGD: lr must be given");
    EXPECT_EQ(tg_sgd(m, tg_sgd_opts{.lr = 0.1, .nesterov = true}), nullptr);
    EXPECT_ERROR_CONTAINS("Nesterov");
    EXPECT_EQ(tg_adam(m, tg_adam_opts{.betas = {1.5, 0}}), nullptr);
    EXPECT_ERROR_CONTAINS("Adam: invalid options");
    // A gradient that does not match its parameter is reported with the index.
    tg_tensor *w = tg_module_get(m, "2.bias");
    tg_set_grad(w, tg_zeros(TG_SHAPE(4), tg_opts{}));
    tg_optim *sgd = tg_sgd(m, tg_sgd_opts{.lr = 0.1});
    EXPECT_EQ(tg_optim_step(sgd), TG_ERROR);
    EXPECT_ERROR_CONTAINS("SGD.step: parameter 3 is float32 [3]");
    tg_optim_free(sgd);
    // The optimizer holds its own references: freeing the model first is fine.
    tg_optim *late = tg_rmsprop(m, tg_rmsprop_opts{});
    tg_module_free(m);
    EXPECT_EQ(tg_optim_num_params(late), 4);
    tg_optim_free(late);
}

TEST_F(OptimTest, ParamsArrayAndMaximize) {
    // Minimise (x - 3)^2 with SGD over an explicit parameter array; maximize flips the sign.
    tg_tensor *x = tg_requires_grad_(tg_zeros(TG_SHAPE(1), tg_opts{TG_FLOAT64}), true);
    tg_optim *opt = tg_sgd_params(&x, 1, tg_sgd_opts{.lr = 0.1});
    for (int i = 0; i < 100; i++) TG_SCOPE {
            tg_backward(tg_sum(tg_square(tg_sub_scalar(x, 3.0))));
            tg_optim_step(opt);
            tg_optim_zero_grad(opt);
        }
    EXPECT_NEAR(tg_item(x), 3.0, 1e-6);
    tg_optim_free(opt);
    tg_optim *up = tg_sgd_params(&x, 1, tg_sgd_opts{.lr = 0.1, .maximize = true});
    TG_SCOPE {
        tg_backward(tg_sum(tg_neg(tg_square(tg_sub_scalar(x, 3.0)))));
        uint64_t version = tg_version(x);
        tg_optim_step(up);
        EXPECT_GT(tg_version(x), version) << "an update bumps the parameter's version";
    }
    EXPECT_NEAR(tg_item(x), 3.0, 1e-6);
    tg_optim_free(up);
}

TEST_F(OptimTest, SchedulesMatchPyTorch) {
    struct Case {
        const char *name;
        std::function<tg_lr_scheduler *(tg_optim *)> make;
    };
    static const int milestones[] = {20, 5, 12, 12};
    std::vector<Case> cases = {
        {"step", [](tg_optim *o) { return tg_step_lr(o, 7, 0.5); }},
        {"multistep", [](tg_optim *o) { return tg_multi_step_lr(o, milestones, 4, 0.3); }},
        {"exponential", [](tg_optim *o) { return tg_exponential_lr(o, 0.9); }},
        {"cosine", [](tg_optim *o) { return tg_cosine_annealing_lr(o, 10, 0.001); }},
        {"linear", [](tg_optim *o) { return tg_linear_lr(o, 0.25, 1.0, 8); }},
    };
    tg_tensor *p = tg_requires_grad_(tg_zeros(TG_SHAPE(1), tg_opts{}), true);
    for (const Case &c : cases) {
        SCOPED_TRACE(c.name);
        tg_optim *opt = tg_sgd_params(&p, 1, tg_sgd_opts{.lr = 0.1});
        tg_lr_scheduler *s = c.make(opt);
        ASSERT_NE(s, nullptr) << tg_last_error();
        std::vector<double> lrs = {tg_scheduler_get_last_lr(s)};
        for (int i = 0; i < 35; i++) {
            tg_optim_step(opt);
            tg_scheduler_step(s);
            lrs.push_back(tg_scheduler_get_last_lr(s));
            EXPECT_EQ(tg_optim_get_lr(opt), lrs.back());
        }
        EXPECT_EQ(tg_scheduler_last_epoch(s), 35);
        EXPECT_TRUE(near_rel(lrs, fx(std::string("schedule.") + c.name).data, 1e-12, 0));
        tg_scheduler_free(s);
        tg_optim_free(opt);
    }
}

TEST_F(OptimTest, ClipGradNormMatchesPyTorch) {
    for (tg_dtype dtype : {TG_FLOAT64, TG_FLOAT32}) {
        std::string tag = dtype == TG_FLOAT64 ? "f64" : "f32";
        double rtol = dtype == TG_FLOAT64 ? 1e-12 : 1e-6;
        for (const char *ntag : {"2", "1", "inf", "3"}) {
            for (const char *mtag : {"1", "100"}) {
                SCOPED_TRACE(tag + " norm " + ntag + " max " + mtag);
                double norm_type = std::string(ntag) == "inf" ? INFINITY : std::stod(ntag);
                tg_tensor *params[3];
                std::vector<double> all;
                for (int i = 0; i < 3; i++) {
                    const FixtureTensor &g = fx("clip.grad." + std::to_string(i));
                    params[i] = tg_requires_grad_(tg_zeros(g.tg(), tg_opts{dtype}), true);
                    tg_set_grad(params[i], g.make(dtype));
                }
                double total = tg_clip_grad_norm_params(params, 3, std::stod(mtag), norm_type);
                std::string prefix = "clip." + tag + "." + ntag + "." + mtag;
                EXPECT_NEAR(total, fx(prefix + ".total").data[0], rtol * fx(prefix + ".total").data[0]);
                for (int i = 0; i < 3; i++) {
                    std::vector<double> v = values(tg_grad(params[i]));
                    all.insert(all.end(), v.begin(), v.end());
                }
                EXPECT_TRUE(near_rel(all, fx(prefix + ".clipped").data, rtol, 1e-7));
            }
        }
    }
    // No gradients: 0, nothing touched.
    tg_tensor *p = tg_requires_grad_(tg_zeros(TG_SHAPE(2), tg_opts{}), true);
    EXPECT_EQ(tg_clip_grad_norm_params(&p, 1, 1.0, 2.0), 0.0);
    // A NaN gradient: the total is NaN and every gradient becomes NaN (PyTorch multiplies
    // by clamp(nan, max=1) = nan), so no finite parameter takes an unclipped step.
    tg_tensor *two[2] = {tg_requires_grad_(tg_zeros(TG_SHAPE(2), tg_opts{}), true),
                         tg_requires_grad_(tg_zeros(TG_SHAPE(3), tg_opts{}), true)};
    tg_set_grad(two[0], tensor_f32({3, 4}, TG_SHAPE(2)));
    tg_set_grad(two[1], tensor_f32({1, 2, NAN}, TG_SHAPE(3)));
    tg_clear_error();
    EXPECT_TRUE(std::isnan(tg_clip_grad_norm_params(two, 2, 1.0, 2.0)));
    EXPECT_FALSE(tg_has_error());
    EXPECT_TRUE(tensor_near(tg_grad(two[0]), {NAN, NAN}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(two[1]), {NAN, NAN, NAN}, 0));
}

// torch.nn.utils.clip_grad_value_(params, 0.5): each gradient element clamped to
// [-0.5, 0.5]; a parameter without a gradient is skipped.
TEST_F(OptimTest, ClipGradValueClampsEveryGradient) {
    tg_tensor *params[3];
    params[0] = tg_requires_grad_(tg_zeros(TG_SHAPE(4), tg_opts{TG_FLOAT64}), true);
    params[1] = tg_requires_grad_(tg_zeros(TG_SHAPE(2, 2), tg_opts{}), true);
    params[2] = tg_requires_grad_(tg_zeros(TG_SHAPE(1), tg_opts{}), true); // no gradient
    tg_set_grad(params[0], tensor_f64({-2, -0.25, 0.5, 3}, TG_SHAPE(4)));
    tg_set_grad(params[1], tensor_f32({0.75f, -0.5f, 0.1f, NAN}, TG_SHAPE(2, 2)));
    ASSERT_EQ(tg_clip_grad_value_params(params, 3, 0.5), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(params[0]), {-0.5, -0.25, 0.5, 0.5}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(params[1]), {0.5, -0.5, 0.1, NAN}, 1e-7)); // NaN stays, as clamp_
    EXPECT_EQ(tg_grad(params[2]), nullptr);
    EXPECT_EQ(tg_clip_grad_value_params(params, 3, NAN), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_clip_grad_value: clip_value is NaN");
    // over a model: every parameter's gradient
    tg_module *lin = tg_nn_linear(3, 2, tg_linear_opts{});
    ASSERT_EQ(tg_backward(tg_mul_scalar(tg_sum(tg_forward(lin, tg_ones(TG_SHAPE(4, 3), tg_opts{}))), 10)), TG_OK);
    ASSERT_EQ(tg_clip_grad_value(lin, 1.0), TG_OK);
    int n = 0;
    tg_tensor *const *ps = tg_parameters(lin, &n);
    for (int i = 0; i < n; i++)
        for (double v : values(tg_grad(ps[i]))) EXPECT_EQ(v, 1.0); // 40 (weight) and 40 (bias) clipped to 1
    tg_module_free(lin);
}

// As torch.optim over model.parameters(): a frozen parameter is accepted and left
// alone; a weight tied into two modules is one parameter, stepped once.
TEST_F(OptimTest, FrozenAndTiedParameters) {
    tg_module *a = tg_nn_linear(2, 2, tg_linear_opts{}), *b = tg_nn_linear(2, 2, tg_linear_opts{});
    tg_module *model = TG_NN_SEQUENTIAL(a, b);
    tg_tensor *shared = tg_module_get(model, "0.weight");
    ASSERT_EQ(tg_register_parameter(b, "tied", shared), TG_OK) << tg_last_error();
    tg_tensor *frozen = tg_module_get(model, "1.weight");
    ASSERT_EQ(tg_requires_grad_(frozen, false), frozen);
    int n = 0;
    tg_parameters(model, &n);
    EXPECT_EQ(n, 4) << "0.weight, 0.bias, 1.weight, 1.bias; 1.tied is 0.weight";
    int state = 0;
    tg_state_dict(model, &state);
    EXPECT_EQ(state, 5) << "the state dict keeps both names";
    EXPECT_EQ(tg_module_num_params(model), 4 + 2 + 4 + 2);
    tg_optim *sgd = tg_sgd(model, tg_sgd_opts{.lr = 0.5});
    ASSERT_NE(sgd, nullptr) << tg_last_error();
    std::vector<double> frozen_before = values(frozen), shared_before = values(shared);
    ASSERT_EQ(tg_backward(tg_sum(tg_forward(model, tg_ones(TG_SHAPE(1, 2), tg_opts{})))), TG_OK);
    ASSERT_EQ(tg_optim_step(sgd), TG_OK) << tg_last_error();
    EXPECT_EQ(values(frozen), frozen_before);
    EXPECT_EQ(tg_grad(frozen), nullptr);
    std::vector<double> g = values(tg_grad(shared)), now = values(shared);
    for (size_t i = 0; i < now.size(); i++) EXPECT_NEAR(now[i], shared_before[i] - 0.5 * g[i], 1e-6) << i;
    tg_optim_free(sgd);
    tg_module_free(model);
}

// ---- parameter groups and OneCycleLR (tests/fixtures/optim_groups.txt) ----

namespace {

const std::map<std::string, FixtureTensor> &group_fixtures() {
    static const std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/optim_groups.txt");
    return fx;
}

const FixtureTensor &gfx(const std::string &name) { return fixture_tensor(group_fixtures(), name); }

// Sequential(Linear(6, 8), ReLU, Linear(8, 3)) in `dtype` with the fixture's initial weights.
tg_module *load_group_net(tg_dtype dtype) {
    tg_module *m = make_net("mlp");
    EXPECT_EQ(tg_module_cast(m, dtype), TG_OK) << tg_last_error();
    int n = 0;
    const tg_named_tensor *state = tg_state_dict(m, &n);
    TG_SCOPE {
        TG_NO_GRAD {
            for (int i = 0; i < n; i++)
                EXPECT_EQ(tg_copy_(state[i].tensor, gfx(std::string("groups.init.") + state[i].name).make(TG_FLOAT64)),
                          TG_OK);
        }
    }
    return m;
}

// gen_optim_groups.py's two_groups: weights (0.weight, 2.weight) and biases (0.bias, 2.bias).
struct Split {
    tg_tensor *weights[2], *biases[2];
};
Split split(tg_tensor *const *p) { return Split{{p[0], p[2]}, {p[1], p[3]}}; }

// An optimizer over `p` (the MLP's four parameters, tg_parameters order) as the generator's
// ONECYCLE / TRAINING entry `config` makes it; NULL for an unknown config.
tg_optim *make_group_optimizer(const std::string &config, tg_tensor *const *p) {
    Split s = split(p);
    tg_optim *opt = nullptr;
    tg_param_group_opts g1 = {};
    // One group, over all four parameters.
    if (config == "sgd_cos") return tg_sgd_params(p, 4, tg_sgd_opts{.lr = 0.1, .momentum = 0.9});
    if (config == "sgd_linear") return tg_sgd_params(p, 4, tg_sgd_opts{.lr = 0.1, .momentum = 0.9, .nesterov = true});
    if (config == "sgd_three_phase") return tg_sgd_params(p, 4, tg_sgd_opts{.lr = 0.1, .momentum = 0.5});
    if (config == "sgd_no_cycle") return tg_sgd_params(p, 4, tg_sgd_opts{.lr = 0.1});
    if (config == "adam_cos") return tg_adam_params(p, 4, tg_adam_opts{.lr = 1e-3});
    if (config == "adamw_linear_three_phase") return tg_adamw_params(p, 4, tg_adamw_opts{.lr = 1e-3});
    if (config == "rmsprop_cos") return tg_rmsprop_params(p, 4, tg_rmsprop_opts{.lr = 1e-2, .momentum = 0.5});
    // Two groups: weights with the constructor's options, biases with overrides.
    if (config == "sgd_groups_list") {
        opt = tg_sgd_params(s.weights, 2, tg_sgd_opts{.lr = 0.1, .momentum = 0.9});
        g1 = {.lr = 0.05, .momentum = 0.5};
    } else if (config == "adam_groups_single") {
        opt = tg_adam_params(s.weights, 2, tg_adam_opts{.lr = 1e-2});
        g1 = {.lr = 3e-2, .betas = {0.8, 0.99}};
    } else if (config == "sgd" || config == "sgd_onecycle") {
        opt = tg_sgd_params(s.weights, 2, tg_sgd_opts{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2});
        g1 = {.lr = 0.05, .weight_decay = TG_ZERO, .momentum = 0.5};
    } else if (config == "sgd_mixed_momentum") {
        opt = tg_sgd_params(s.weights, 2,
                            tg_sgd_opts{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-3});
        g1 = {.weight_decay = TG_ZERO, .momentum = TG_ZERO};
    } else if (config == "adam") {
        opt = tg_adam_params(s.weights, 2, tg_adam_opts{.lr = 1e-2, .weight_decay = 1e-2, .amsgrad = true});
        g1 = {.lr = 3e-2, .weight_decay = TG_ZERO, .betas = {0.8, 0.99}};
    } else if (config == "adamw") {
        opt = tg_adamw_params(s.weights, 2, tg_adamw_opts{.lr = 1e-2, .weight_decay = 0.1});
        g1 = {.weight_decay = TG_ZERO, .eps = 1e-6};
    } else if (config == "rmsprop") {
        opt = tg_rmsprop_params(s.weights, 2,
                                tg_rmsprop_opts{.lr = 1e-2, .weight_decay = 1e-3, .momentum = 0.9, .centered = true});
        g1 = {.lr = 5e-3, .momentum = TG_ZERO, .alpha = 0.9};
    } else if (config == "adam_onecycle") {
        opt = tg_adam_params(s.weights, 2, tg_adam_opts{.lr = 1e-2, .weight_decay = 1e-2});
        g1 = {.weight_decay = TG_ZERO};
    } else {
        ADD_FAILURE() << "unknown config " << config;
        return nullptr;
    }
    EXPECT_NE(opt, nullptr) << tg_last_error();
    EXPECT_EQ(tg_optim_add_param_group(opt, s.biases, 2, g1), TG_OK) << tg_last_error();
    return opt;
}

const double kMaxLrs[] = {1.0, 0.1};
const double kTrainMaxLrs[] = {0.5, 0.2};

// The generator's OneCycleLR arguments for `config`.
tg_one_cycle_opts one_cycle_opts(const std::string &config) {
    if (config == "sgd_cos") return tg_one_cycle_opts{.max_lr = 1.0, .total_steps = 30};
    if (config == "sgd_linear")
        return tg_one_cycle_opts{.max_lr = 0.4,
                                 .total_steps = 25,
                                 .pct_start = 0.25,
                                 .anneal_strategy = TG_ANNEAL_LINEAR,
                                 .div_factor = 10,
                                 .final_div_factor = 100};
    if (config == "sgd_three_phase")
        return tg_one_cycle_opts{
            .max_lr = 2.0, .total_steps = 40, .three_phase = true, .base_momentum = 0.7, .max_momentum = 0.9};
    if (config == "sgd_no_cycle")
        return tg_one_cycle_opts{.max_lr = 1.0, .epochs = 3, .steps_per_epoch = 5, .no_cycle_momentum = true};
    if (config == "adam_cos")
        return tg_one_cycle_opts{
            .max_lr = 0.01, .epochs = 4, .steps_per_epoch = 7, .base_momentum = 0.8, .max_momentum = 0.9};
    if (config == "adamw_linear_three_phase")
        return tg_one_cycle_opts{.max_lr = 0.02,
                                 .total_steps = 33,
                                 .pct_start = 0.2,
                                 .anneal_strategy = TG_ANNEAL_LINEAR,
                                 .three_phase = true};
    if (config == "rmsprop_cos") return tg_one_cycle_opts{.max_lr = 0.05, .total_steps = 20};
    if (config == "sgd_groups_list") return tg_one_cycle_opts{.max_lrs = kMaxLrs, .num_max_lrs = 2, .total_steps = 20};
    if (config == "adam_groups_single") return tg_one_cycle_opts{.max_lr = 0.3, .total_steps = 15, .three_phase = true};
    if (config == "sgd_onecycle")
        return tg_one_cycle_opts{.max_lrs = kTrainMaxLrs, .num_max_lrs = 2, .total_steps = 10};
    if (config == "adam_onecycle") return tg_one_cycle_opts{.max_lr = 0.05, .total_steps = 10, .three_phase = true};
    ADD_FAILURE() << "unknown OneCycleLR config " << config;
    return tg_one_cycle_opts{};
}

bool has_one_cycle(const std::string &config) { return config == "sgd_onecycle" || config == "adam_onecycle"; }

// Zero tensors of the MLP's parameter shapes (new references in the current scope).
std::vector<tg_tensor *> mlp_shaped_params() {
    std::vector<tg_tensor *> p;
    for (tg_shape s : {TG_SHAPE(8, 6), TG_SHAPE(8), TG_SHAPE(3, 8), TG_SHAPE(3)})
        p.push_back(tg_requires_grad_(tg_zeros(s, tg_opts{}), true));
    return p;
}

} // namespace

TEST_F(OptimTest, OneCycleMatchesPyTorch) {
    for (const char *name : {"sgd_cos", "sgd_linear", "sgd_three_phase", "sgd_no_cycle", "adam_cos",
                             "adamw_linear_three_phase", "rmsprop_cos", "sgd_groups_list", "adam_groups_single"}) {
        std::string config = name;
        SCOPED_TRACE(config);
        std::vector<tg_tensor *> p = mlp_shaped_params();
        tg_optim *opt = make_group_optimizer(config, p.data());
        ASSERT_NE(opt, nullptr) << tg_last_error();
        tg_lr_scheduler *s = tg_one_cycle_lr(opt, one_cycle_opts(config));
        ASSERT_NE(s, nullptr) << tg_last_error();
        int groups = tg_optim_num_groups(opt);
        int total = (int)gfx("onecycle." + config + ".g0.lr").data.size() - 1;
        std::vector<std::vector<double>> lrs(groups), momenta(groups);
        for (int step = 0; step <= total; step++) {
            if (step > 0) {
                ASSERT_EQ(tg_optim_step(opt), TG_OK) << tg_last_error();
                ASSERT_EQ(tg_scheduler_step(s), TG_OK) << "step " << step << ": " << tg_last_error();
            }
            for (int g = 0; g < groups; g++) {
                lrs[g].push_back(tg_optim_get_group_lr(opt, g));
                momenta[g].push_back(tg_optim_get_group_momentum(opt, g));
                EXPECT_EQ(tg_scheduler_get_group_last_lr(s, g), lrs[g].back());
            }
            EXPECT_EQ(tg_scheduler_get_last_lr(s), lrs[0].back());
        }
        EXPECT_EQ(tg_scheduler_last_epoch(s), total);
        for (int g = 0; g < groups; g++) {
            std::string prefix = "onecycle." + config + ".g" + std::to_string(g);
            EXPECT_TRUE(near_rel(lrs[g], gfx(prefix + ".lr").data, 1e-13, 1e-17)) << "lr of group " << g;
            EXPECT_TRUE(near_rel(momenta[g], gfx(prefix + ".momentum").data, 1e-13, 0)) << "momentum of group " << g;
        }
        // One more step is PyTorch's ValueError; nothing changes.
        double lr = tg_optim_get_lr(opt);
        EXPECT_EQ(tg_scheduler_step(s), TG_ERROR);
        EXPECT_ERROR_CONTAINS("tg_scheduler_step (OneCycleLR): tried to step " + std::to_string(total + 2) +
                              " times; the specified number of total steps is " + std::to_string(total));
        EXPECT_EQ(tg_scheduler_last_epoch(s), total);
        EXPECT_EQ(tg_optim_get_lr(opt), lr);
        tg_scheduler_free(s);
        tg_optim_free(opt);
    }
}

TEST_F(OptimTest, OneCycleErrors) {
    std::vector<tg_tensor *> p = mlp_shaped_params();
    tg_optim *plain = tg_sgd_params(p.data(), 4, tg_sgd_opts{.lr = 0.1});
    // PyTorch 1.13 would switch momentum on here; tapegrad refuses (see optim/schedule.h).
    EXPECT_EQ(tg_one_cycle_lr(plain, tg_one_cycle_opts{.max_lr = 1, .total_steps = 10}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_cycle_lr: cycle_momentum needs momentum, but SGD group 0 has none");
    EXPECT_EQ(tg_optim_get_lr(plain), 0.1) << "a failed constructor changes nothing";
    tg_lr_scheduler *ok =
        tg_one_cycle_lr(plain, tg_one_cycle_opts{.max_lr = 1, .total_steps = 10, .no_cycle_momentum = true});
    EXPECT_NE(ok, nullptr) << tg_last_error();
    EXPECT_NEAR(tg_optim_get_lr(plain), 1.0 / 25, 1e-15) << "max_lr / div_factor";
    EXPECT_EQ(tg_optim_get_group_momentum(plain, 0), 0.0);
    tg_scheduler_free(ok);
    tg_optim_free(plain);

    tg_optim *rms = tg_rmsprop_params(p.data(), 4, tg_rmsprop_opts{});
    EXPECT_EQ(tg_one_cycle_lr(rms, tg_one_cycle_opts{.max_lr = 1, .total_steps = 10}), nullptr);
    EXPECT_ERROR_CONTAINS("RMSprop group 0 has none");
    tg_optim_free(rms);

    tg_optim *sgd = tg_sgd_params(p.data(), 2, tg_sgd_opts{.lr = 0.1, .momentum = 0.9});
    ASSERT_EQ(tg_optim_add_param_group(sgd, p.data() + 2, 2, tg_param_group_opts{.momentum = TG_ZERO}), TG_OK);
    EXPECT_EQ(tg_one_cycle_lr(sgd, tg_one_cycle_opts{.max_lr = 1, .total_steps = 10}), nullptr);
    EXPECT_ERROR_CONTAINS("SGD group 1 has none");
    EXPECT_EQ(tg_one_cycle_lr(sgd, tg_one_cycle_opts{.total_steps = 10}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_cycle_lr: max_lr must be given");
    EXPECT_EQ(tg_one_cycle_lr(sgd, tg_one_cycle_opts{.max_lr = 1, .no_cycle_momentum = true}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_cycle_lr: you must define either total_steps OR (epochs AND steps_per_epoch)");
    EXPECT_EQ(tg_one_cycle_lr(sgd, tg_one_cycle_opts{.max_lr = 1, .epochs = 3, .no_cycle_momentum = true}), nullptr);
    EXPECT_ERROR_CONTAINS("you must define either total_steps");
    EXPECT_EQ(tg_one_cycle_lr(
                  sgd, tg_one_cycle_opts{.max_lr = 1, .total_steps = 5, .pct_start = 1.5, .no_cycle_momentum = true}),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_cycle_lr: expected pct_start between 0 and 1, got 1.5");
    EXPECT_EQ(
        tg_one_cycle_lr(
            sgd, tg_one_cycle_opts{.max_lrs = kMaxLrs, .num_max_lrs = 1, .total_steps = 5, .no_cycle_momentum = true}),
        nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_cycle_lr: expected 2 values for max_lr (one per parameter group), got 1");
    tg_optim_free(sgd);

    tg_optim *adam = tg_adam_params(p.data(), 4, tg_adam_opts{});
    EXPECT_EQ(tg_one_cycle_lr(adam, tg_one_cycle_opts{.max_lr = 1, .total_steps = 5, .max_momentum = 1.5}), nullptr);
    EXPECT_ERROR_CONTAINS("must be in [0, 1) (they are beta1) for Adam");
    // Stepping past the end, as PyTorch's "Tried to step 5 times. The specified number of total steps is 3".
    tg_lr_scheduler *s = tg_one_cycle_lr(adam, tg_one_cycle_opts{.max_lr = 1, .total_steps = 3});
    ASSERT_NE(s, nullptr) << tg_last_error();
    EXPECT_EQ(tg_optim_group_opts(adam, 0).betas[1], 0.999) << "beta2 is untouched";
    for (int i = 0; i < 3; i++) EXPECT_EQ(tg_scheduler_step(s), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_scheduler_step(s), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tried to step 5 times; the specified number of total steps is 3");
    EXPECT_EQ(tg_scheduler_step(nullptr), TG_ERROR);
    tg_scheduler_free(s);
    tg_optim_free(adam);
    EXPECT_EQ(tg_one_cycle_lr(nullptr, tg_one_cycle_opts{.max_lr = 1, .total_steps = 3}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_cycle_lr: optimizer is NULL");
}

using MakeScheduler = std::function<tg_lr_scheduler *(tg_optim *)>;

// SGD with two groups (lr 0.1 and 0.02) scheduled by make(opt) for 25 steps: each
// group's lr after making and after each step (the scheduler is freed at the end).
static void schedule_two_groups(const MakeScheduler &make, std::vector<double> lrs[2],
                                double *last_lr_of_missing_group = nullptr) {
    tg_tensor *p = tg_requires_grad_(tg_zeros(TG_SHAPE(1), tg_opts{}), true);
    tg_tensor *q = tg_requires_grad_(tg_zeros(TG_SHAPE(1), tg_opts{}), true);
    tg_optim *opt = tg_sgd_params(&p, 1, tg_sgd_opts{.lr = 0.1});
    ASSERT_EQ(tg_optim_add_param_group(opt, &q, 1, tg_param_group_opts{.lr = 0.02}), TG_OK);
    tg_lr_scheduler *s = make(opt);
    ASSERT_NE(s, nullptr) << tg_last_error();
    for (int i = 0; i <= 25; i++) {
        if (i > 0) {
            tg_optim_step(opt);
            ASSERT_EQ(tg_scheduler_step(s), TG_OK) << tg_last_error();
        }
        for (int g = 0; g < 2; g++) lrs[g].push_back(tg_optim_get_group_lr(opt, g));
    }
    if (last_lr_of_missing_group) *last_lr_of_missing_group = tg_scheduler_get_group_last_lr(s, 2);
    tg_scheduler_free(s);
    tg_optim_free(opt);
    tg_release(p);
    tg_release(q);
}

TEST_F(OptimTest, SchedulesScaleEachGroupsOwnBaseLr) {
    std::vector<std::pair<const char *, MakeScheduler>> cases = {
        {"cosine", [](tg_optim *o) { return tg_cosine_annealing_lr(o, 10, 0.001); }},
        {"step", [](tg_optim *o) { return tg_step_lr(o, 4, 0.5); }},
        {"linear", [](tg_optim *o) { return tg_linear_lr(o, 0.25, 0, 8); }},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.first);
        std::vector<double> lrs[2];
        double missing = 0;
        schedule_two_groups(c.second, lrs, &missing);
        for (int g = 0; g < 2; g++)
            EXPECT_TRUE(near_rel(lrs[g], gfx(std::string("schedule_groups.") + c.first + ".g" + std::to_string(g)).data,
                                 1e-12, 0))
                << "group " << g;
        EXPECT_TRUE(std::isnan(missing));
    }
}

// LambdaLR (one function per group) and SequentialLR chains (warmup then cosine; a
// LambdaLR warmup; three schedulers) against PyTorch 1.13's group lrs, bit for bit.
static double lambda_per_group(int epoch, int group, void *) {
    return group == 0 ? pow(0.9, epoch) : 1.0 / (epoch + 1);
}
static double warmup_quarters(int epoch, int, void *) { return (epoch + 1) / 4.0; }

TEST_F(OptimTest, LambdaAndSequentialSchedulesMatchPyTorch) {
    std::vector<std::pair<const char *, MakeScheduler>> cases = {
        {"lambda", [](tg_optim *o) { return tg_lambda_lr(o, lambda_per_group, nullptr); }},
        {"warmup_cosine",
         [](tg_optim *o) {
             tg_lr_scheduler *parts[2] = {tg_linear_lr(o, 0.01, 0, 5), tg_cosine_annealing_lr(o, 20, 1e-4)};
             int milestones[1] = {5};
             return tg_sequential_lr(o, parts, 2, milestones);
         }},
        {"lambda_cosine",
         [](tg_optim *o) {
             tg_lr_scheduler *parts[2] = {tg_lambda_lr(o, warmup_quarters, nullptr), tg_cosine_annealing_lr(o, 10, 0)};
             int milestones[1] = {4};
             return tg_sequential_lr(o, parts, 2, milestones);
         }},
        {"three",
         [](tg_optim *o) {
             int steps[2] = {2, 4}, milestones[2] = {3, 7};
             tg_lr_scheduler *parts[3] = {tg_step_lr(o, 2, 0.5), tg_exponential_lr(o, 0.9),
                                          tg_multi_step_lr(o, steps, 2, 0.1)};
             return tg_sequential_lr(o, parts, 3, milestones);
         }},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.first);
        std::vector<double> lrs[2];
        schedule_two_groups(c.second, lrs);
        for (int g = 0; g < 2; g++) {
            const std::vector<double> &want =
                gfx(std::string("schedule_chain.") + c.first + ".g" + std::to_string(g)).data;
            ASSERT_EQ(lrs[g].size(), want.size());
            for (size_t i = 0; i < want.size(); i++) EXPECT_EQ(lrs[g][i], want[i]) << "group " << g << " step " << i;
        }
    }
    tg_tensor *p = tg_requires_grad_(tg_zeros(TG_SHAPE(1), tg_opts{}), true);
    tg_tensor *q = tg_requires_grad_(tg_zeros(TG_SHAPE(1), tg_opts{}), true);
    // Errors: another optimizer's scheduler, milestones out of order, a OneCycleLR.
    tg_optim *a = tg_sgd_params(&p, 1, tg_sgd_opts{.lr = 0.1}), *b = tg_sgd_params(&q, 1, tg_sgd_opts{.lr = 0.1});
    tg_lr_scheduler *mixed[2] = {tg_step_lr(a, 2, 0.5), tg_step_lr(b, 2, 0.5)};
    int one[1] = {3}, bad[2] = {4, 2};
    EXPECT_EQ(tg_sequential_lr(a, mixed, 2, one), nullptr);
    EXPECT_ERROR_CONTAINS("tg_sequential_lr: scheduler 1 (StepLR) was made on another optimizer than the one given");
    tg_lr_scheduler *three[3] = {tg_step_lr(a, 2, 0.5), tg_exponential_lr(a, 0.9), tg_exponential_lr(a, 0.8)};
    EXPECT_EQ(tg_sequential_lr(a, three, 3, bad), nullptr);
    EXPECT_ERROR_CONTAINS("milestones must be positive and increasing, got 2 after 4");
    EXPECT_EQ(tg_lambda_lr(a, nullptr, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_lambda_lr: lr_lambda is NULL");
    tg_optim_free(a);
    tg_optim_free(b);
}

TEST_F(OptimTest, ParamGroupsTrainLikePyTorch) {
    for (const char *name :
         {"sgd", "sgd_mixed_momentum", "adam", "adamw", "rmsprop", "sgd_onecycle", "adam_onecycle"}) {
        std::string config = name;
        SCOPED_TRACE(config);
        long live_before = tg_live_tensors();
        for (tg_dtype dtype : {TG_FLOAT64, TG_FLOAT32}) {
            std::string tag = dtype == TG_FLOAT64 ? "f64" : "f32";
            std::string prefix = "groups." + config + "." + tag;
            tg_module *m = load_group_net(dtype);
            int n = 0;
            tg_tensor *const *params = tg_parameters(m, &n);
            ASSERT_EQ(n, 4);
            tg_optim *opt = make_group_optimizer(config, params);
            ASSERT_NE(opt, nullptr) << tg_last_error();
            ASSERT_EQ(tg_optim_num_groups(opt), 2);
            tg_lr_scheduler *sched = has_one_cycle(config) ? tg_one_cycle_lr(opt, one_cycle_opts(config)) : nullptr;
            if (has_one_cycle(config)) {
                ASSERT_NE(sched, nullptr) << tg_last_error();
            }
            std::vector<double> losses;
            TG_SCOPE {
                tg_tensor *xs = gfx("groups.x").make(dtype), *ys = gfx("groups.y").make(TG_INT64);
                for (int step = 0; step < 10; step++) {
                    TG_SCOPE {
                        tg_tensor *loss = cross_entropy(tg_forward(m, batch(xs, step)), batch(ys, step));
                        ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
                        ASSERT_EQ(tg_optim_step(opt), TG_OK) << tg_last_error();
                        if (sched) {
                            ASSERT_EQ(tg_scheduler_step(sched), TG_OK) << tg_last_error();
                        }
                        tg_optim_zero_grad(opt);
                        losses.push_back(tg_item(loss));
                    }
                }
            }
            if (dtype == TG_FLOAT32) {
                EXPECT_TRUE(near_rel(losses, gfx(prefix + ".losses").data, 1e-4, 0));
            } else {
                EXPECT_TRUE(near_rel(losses, gfx(prefix + ".losses").data, 1e-8, 0));
                const tg_named_tensor *state = tg_state_dict(m, &n);
                for (int i = 0; i < n; i++)
                    EXPECT_TRUE(
                        near_rel(values(state[i].tensor), gfx(prefix + ".final." + state[i].name).data, 1e-8, 1e-12))
                        << state[i].name;
                EXPECT_TRUE(near_rel({tg_optim_get_group_lr(opt, 0), tg_optim_get_group_lr(opt, 1)},
                                     gfx(prefix + ".lrs").data, 1e-13, 0));
                // Every state entry, named as PyTorch's state_dict numbers parameters across groups.
                int count = tg_optim_state_count(opt), expected = 0;
                for (const auto &kv : group_fixtures()) expected += kv.first.rfind(prefix + ".state.", 0) == 0;
                EXPECT_EQ(count, expected);
                for (int i = 0; i < count; i++) {
                    const char *entry = nullptr;
                    tg_tensor *t = nullptr;
                    ASSERT_EQ(tg_optim_state_get(opt, i, &entry, &t), TG_OK);
                    std::string key = prefix + "." + entry;
                    ASSERT_TRUE(group_fixtures().count(key)) << "PyTorch has no state " << entry;
                    EXPECT_TRUE(near_rel(values(t), gfx(key).data, 1e-8, 1e-12)) << entry;
                }
            }
            tg_scheduler_free(sched);
            tg_optim_free(opt);
            tg_module_free(m);
        }
        EXPECT_EQ(tg_live_tensors(), live_before) << "a trained model and its optimizer must free every tensor";
    }
}

TEST_F(OptimTest, ParamGroupsApiAndErrors) {
    std::vector<tg_tensor *> p = mlp_shaped_params();
    tg_optim *sgd = tg_sgd_params(p.data(), 2, tg_sgd_opts{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2});
    EXPECT_EQ(tg_optim_num_groups(sgd), 1);
    // A group's unset options inherit the constructor's (not group 0's current lr); TG_ZERO is a real zero.
    tg_optim_set_group_lr(sgd, 0, 0.7);
    ASSERT_EQ(tg_optim_add_param_group(sgd, p.data() + 2, 1, tg_param_group_opts{.weight_decay = TG_ZERO}), TG_OK);
    ASSERT_EQ(tg_optim_add_param_group(sgd, p.data() + 3, 1, tg_param_group_opts{.lr = 0.5, .momentum = 0.5}), TG_OK);
    EXPECT_EQ(tg_optim_num_groups(sgd), 3);
    EXPECT_EQ(tg_optim_num_params(sgd), 4);
    EXPECT_EQ(tg_optim_group_first_param(sgd, 2), 3);
    EXPECT_EQ(tg_optim_group_num_params(sgd, 0), 2);
    EXPECT_EQ(tg_optim_param_group(sgd, 2), 1);
    EXPECT_EQ(tg_optim_param_group(sgd, 4), -1);
    EXPECT_EQ(tg_optim_param(sgd, 3), p[3]);
    tg_param_group_opts g1 = tg_optim_group_opts(sgd, 1), g2 = tg_optim_group_opts(sgd, 2);
    EXPECT_EQ(g1.lr, 0.1);
    EXPECT_EQ(g1.weight_decay, 0.0);
    EXPECT_EQ(g1.momentum, 0.9);
    EXPECT_EQ(g2.lr, 0.5);
    EXPECT_EQ(g2.weight_decay, 1e-2);
    EXPECT_EQ(g2.momentum, 0.5);
    EXPECT_EQ(g2.betas[0], 0.0) << "SGD has no betas";
    // get_lr is group 0's; set_lr sets every group.
    EXPECT_EQ(tg_optim_get_lr(sgd), 0.7);
    tg_optim_set_lr(sgd, 0.25);
    for (int g = 0; g < 3; g++) EXPECT_EQ(tg_optim_get_group_lr(sgd, g), 0.25);
    EXPECT_TRUE(std::isnan(tg_optim_get_group_lr(sgd, 3)));
    EXPECT_EQ(tg_optim_set_group_lr(sgd, 3, 0.1), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_optim_set_group_lr (SGD): group 3 out of range (3 groups)");

    // A parameter in two groups: named by its position in the new list, with its group and index.
    tg_tensor *again[2] = {tg_requires_grad_(tg_zeros(TG_SHAPE(2), tg_opts{}), true), p[2]};
    EXPECT_EQ(tg_optim_add_param_group(sgd, again, 2, tg_param_group_opts{}), TG_ERROR);
    EXPECT_ERROR_CONTAINS("SGD.add_param_group: parameter 1 is already in parameter group 1 (as parameter 2)");
    tg_tensor *twice[2] = {again[0], again[0]};
    EXPECT_EQ(tg_optim_add_param_group(sgd, twice, 2, tg_param_group_opts{}), TG_ERROR);
    EXPECT_ERROR_CONTAINS("SGD.add_param_group: parameter 1 appears twice (also at 0)");
    EXPECT_EQ(tg_optim_add_param_group(sgd, again, 1, tg_param_group_opts{.betas = {0.5, 0.5}}), TG_ERROR);
    EXPECT_ERROR_CONTAINS("SGD.add_param_group: SGD has no option betas");
    EXPECT_EQ(tg_optim_add_param_group(sgd, again, 1, tg_param_group_opts{.lr = -1}), TG_ERROR);
    EXPECT_ERROR_CONTAINS("SGD.add_param_group: invalid options lr=-1");
    tg_tensor *integer = tg_zeros(TG_SHAPE(2), tg_opts{TG_INT64});
    EXPECT_EQ(tg_optim_add_param_group(sgd, &integer, 1, tg_param_group_opts{}), TG_ERROR);
    EXPECT_ERROR_CONTAINS("SGD.add_param_group: parameter 0 must be a floating leaf tensor (got int64)");
    EXPECT_EQ(tg_optim_num_groups(sgd), 3) << "a failed add changes nothing";
    EXPECT_EQ(tg_optim_num_params(sgd), 4);
    EXPECT_EQ(tg_optim_add_param_group(nullptr, again, 1, tg_param_group_opts{}), TG_ERROR);
    // A repeat across groups at construction time is caught too (PyTorch's constructor goes through add_param_group).
    tg_optim *adam = tg_adam_params(p.data(), 1, tg_adam_opts{});
    EXPECT_EQ(tg_optim_add_param_group(adam, p.data(), 1, tg_param_group_opts{.lr = 1}), TG_ERROR);
    EXPECT_ERROR_CONTAINS("Adam.add_param_group: parameter 0 is already in parameter group 0 (as parameter 0)");
    EXPECT_EQ(tg_optim_add_param_group(adam, p.data() + 1, 1, tg_param_group_opts{.momentum = 0.9}), TG_ERROR);
    EXPECT_ERROR_CONTAINS("Adam.add_param_group: Adam has no option momentum");
    EXPECT_EQ(tg_optim_add_param_group(adam, p.data() + 1, 1, tg_param_group_opts{.betas = {1.0, 0}}), TG_ERROR);
    EXPECT_ERROR_CONTAINS("Adam.add_param_group: invalid betas (1, 0.999)");
    EXPECT_EQ(tg_optim_set_group_momentum(adam, 0, 0.5), TG_OK);
    EXPECT_EQ(tg_optim_group_opts(adam, 0).betas[0], 0.5);
    EXPECT_EQ(tg_optim_set_group_momentum(adam, 0, 1.0), TG_ERROR);
    EXPECT_ERROR_CONTAINS("beta1 must be in [0, 1)");
    tg_optim_free(adam);
    // Nesterov holds for every group.
    tg_optim *nesterov = tg_sgd_params(p.data(), 1, tg_sgd_opts{.lr = 0.1, .momentum = 0.9, .nesterov = true});
    EXPECT_EQ(tg_optim_add_param_group(nesterov, p.data() + 1, 1, tg_param_group_opts{.dampening = 0.5}), TG_ERROR);
    EXPECT_ERROR_CONTAINS("SGD.add_param_group: Nesterov momentum requires");
    tg_optim_free(nesterov);

    // Momentum may change, but not be switched on or off: the state layout is per group.
    EXPECT_EQ(tg_optim_set_group_momentum(sgd, 2, 0.8), TG_OK);
    EXPECT_EQ(tg_optim_get_group_momentum(sgd, 2), 0.8);
    EXPECT_EQ(tg_optim_set_group_momentum(sgd, 2, 0), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_optim_set_group_momentum (SGD): group 2 was made with momentum");
    tg_optim *mixed = tg_sgd_params(p.data(), 1, tg_sgd_opts{.lr = 0.1});
    ASSERT_EQ(tg_optim_add_param_group(mixed, p.data() + 1, 3, tg_param_group_opts{.momentum = 0.9}), TG_OK);
    EXPECT_EQ(tg_optim_set_group_momentum(mixed, 0, 0.9), TG_ERROR);
    EXPECT_ERROR_CONTAINS("group 0 was made without momentum");
    // Per-group state keys: only group 1's parameters have momentum buffers.
    TG_SCOPE {
        for (tg_tensor *t : p) tg_set_grad(t, tg_ones_like(t));
        ASSERT_EQ(tg_optim_step(mixed), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_optim_state_count(mixed), 3);
        const char *entry = nullptr;
        ASSERT_EQ(tg_optim_state_get(mixed, 0, &entry, nullptr), TG_OK);
        EXPECT_STREQ(entry, "state.1.momentum_buffer");
        EXPECT_EQ(tg_optim_state_set(mixed, "state.0.momentum_buffer", tg_ones_like(p[0])), TG_ERROR);
        EXPECT_ERROR_CONTAINS("(parameter 0 is in group 0)");
        // Group 0 is plain SGD at lr 0.1: 0 - 0.1 * 1.
        EXPECT_TRUE(tensor_near(p[0], std::vector<double>(48, -0.1), 1e-7));
        tg_optim_zero_grad(mixed);
    }
    tg_optim_free(mixed);
    tg_optim_free(sgd);
}
