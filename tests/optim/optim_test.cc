// Optimizers against PyTorch 1.13 (tests/fixtures/training.txt, written by
// tests/fixtures/gen_training.py): the same initial weights and 20 batches give the
// same per-step losses and final parameters (float64: 1e-8 relative; float32 losses:
// 1e-4 relative), BatchNorm's running statistics and eval outputs match; state
// access, LR schedules, clip_grad_norm and freeing without leaks.
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

const FixtureTensor &fx(const std::string &name) {
    static FixtureTensor empty;
    auto it = fixtures().find(name);
    if (it == fixtures().end()) {
        ADD_FAILURE() << "no fixture tensor " << name;
        return empty;
    }
    return it->second;
}

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
        return TG_NN_SEQUENTIAL(tg_nn_linear(6, 8, tg_linear_opts{}), tg_nn_relu(), tg_nn_linear(8, 3, tg_linear_opts{}));
    return TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 3, 3, tg_conv_opts{.padding = 1}), tg_nn_batch_norm2d(3, tg_batch_norm_opts{}),
                            tg_nn_relu(), tg_nn_max_pool2d(tg_pool_opts{.kernel_size = 2}), tg_nn_flatten(1, -1),
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
            if (!fixtures().count(key)) continue;  // num_batches_tracked: stays 0
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

}  // namespace

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
    tg_tensor *x = tg_requires_grad(tg_zeros(TG_SHAPE(1), tg_opts{TG_FLOAT64}), true);
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
    tg_tensor *p = tg_requires_grad(tg_zeros(TG_SHAPE(1), tg_opts{}), true);
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
                    params[i] = tg_requires_grad(tg_zeros(g.tg(), tg_opts{dtype}), true);
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
    tg_tensor *p = tg_requires_grad(tg_zeros(TG_SHAPE(2), tg_opts{}), true);
    EXPECT_EQ(tg_clip_grad_norm_params(&p, 1, 1.0, 2.0), 0.0);
}
