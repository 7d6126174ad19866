// GradScaler (optim/grad_scaler.h): a 14-step SGD run with Inf/NaN gradients injected
// against PyTorch 1.13's GradScaler (tests/fixtures/gen_grad_scaler.py: its Python
// class on the CPU with the two CUDA kernels ported), defaults, the call-order
// errors, a disabled scaler, checkpoint resume bit for bit, the scale's floor and the
// limit on non-finite iterations in a row (neither in PyTorch).
#include <cmath>
#include <cstring>
#include <string>

#include "test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &gs_fixtures() {
    static const std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/grad_scaler.txt");
    return fx;
}
const FixtureTensor &fx(const std::string &name) { return fixture_tensor(gs_fixtures(), name); }

// Linear(4, 3) with the fixture's initial parameters (weight, bias in tg_parameters order).
tg_module *initial_model() {
    tg_module *m = tg_nn_linear(4, 3, tg_linear_opts{});
    int n = 0;
    tg_tensor *const *p = tg_parameters(m, &n);
    TG_SCOPE {
        TG_NO_GRAD {
            EXPECT_EQ(tg_copy_(p[0], fx("gs_w0").make(TG_FLOAT32)), TG_OK);
            EXPECT_EQ(tg_copy_(p[1], fx("gs_b0").make(TG_FLOAT32)), TG_OK);
        }
    }
    return m;
}

// One iteration of the fixture's sequence; returns whether the step was skipped.
bool run_step(int step, tg_module *m, tg_optim *opt, tg_grad_scaler *scaler, double *loss_out = nullptr) {
    bool skipped = false;
    TG_SCOPE {
        tg_optim_zero_grad(opt);
        tg_tensor *loss = tg_mse_loss(tg_forward(m, fx("gs_x").make(TG_FLOAT32)), fx("gs_y").make(TG_FLOAT32));
        if (loss_out) *loss_out = tg_item(loss);
        EXPECT_EQ(tg_backward(tg_grad_scaler_scale(scaler, loss)), TG_OK) << tg_last_error();
        int n = 0;
        tg_tensor *const *p = tg_parameters(m, &n);
        if (step == 2 || step == 9 || step == 10) ((float *)tg_data_ptr(tg_grad(p[0])))[1 * 4 + 2] = INFINITY;
        if (step == 5) ((float *)tg_data_ptr(tg_grad(p[1])))[0] = NAN;
        if (step == 4 || step == 11) {
            EXPECT_EQ(tg_grad_scaler_unscale_(scaler, opt), TG_OK) << tg_last_error();
        }
        EXPECT_EQ(tg_grad_scaler_step(scaler, opt, &skipped), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_grad_scaler_update(scaler), TG_OK) << tg_last_error();
    }
    return skipped;
}

tg_grad_scaler_opts fixture_opts() {
    tg_grad_scaler_opts o{};
    o.init_scale = 1024;
    o.growth_interval = 3;
    return o;
}

using GradScalerTest = TgTempDirTest;

TEST_F(GradScalerTest, DefaultsArePyTorchs) {
    tg_grad_scaler *s = tg_grad_scaler_new(nullptr, tg_grad_scaler_opts{});
    ASSERT_NE(s, nullptr) << tg_last_error();
    EXPECT_EQ(tg_grad_scaler_get_scale(s), 65536.0);
    tg_grad_scaler_opts o = tg_grad_scaler_get_opts(s);
    EXPECT_EQ(o.growth_factor, 2.0);
    EXPECT_EQ(o.backoff_factor, 0.5);
    EXPECT_EQ(o.growth_interval, 2000);
    EXPECT_EQ(o.max_consecutive_nonfinite, 1000);
    EXPECT_EQ(tg_grad_scaler_nonfinite_steps(s), 0);
    EXPECT_TRUE(tg_grad_scaler_is_enabled(s));
    EXPECT_EQ(tg_grad_scaler_growth_tracker(s), 0);
    tg_grad_scaler_free(s);
}

TEST_F(GradScalerTest, SequenceWithInfAndNanMatchesPyTorch) {
    tg_module *m = initial_model();
    int n = 0;
    tg_tensor *const *p = tg_parameters(m, &n);
    tg_optim *opt = tg_sgd_params(p, n, tg_sgd_opts{.lr = 0.05, .momentum = 0.9});
    tg_grad_scaler *scaler = tg_grad_scaler_new(opt, fixture_opts());
    ASSERT_NE(scaler, nullptr) << tg_last_error();
    const FixtureTensor &scales = fx("gs_scale"), &trackers = fx("gs_tracker"), &skips = fx("gs_skipped"),
                        &losses = fx("gs_loss");
    ASSERT_EQ(scales.data.size(), 14u);
    int skipped_count = 0;
    for (int step = 0; step < 14; step++) {
        double loss = 0;
        bool skipped = run_step(step, m, opt, scaler, &loss);
        EXPECT_EQ(skipped, skips.data[step] != 0) << "step " << step;
        EXPECT_EQ(tg_grad_scaler_get_scale(scaler), scales.data[step]) << "step " << step;
        EXPECT_EQ(tg_grad_scaler_growth_tracker(scaler), (int64_t)trackers.data[step]) << "step " << step;
        EXPECT_NEAR(loss, losses.data[step], 1e-5 * std::fabs(losses.data[step])) << "step " << step;
        skipped_count += skipped;
    }
    EXPECT_EQ(skipped_count, 4);
    EXPECT_TRUE(tensor_near(p[0], fx("gs_w").data, 1e-6, 1e-5));
    EXPECT_TRUE(tensor_near(p[1], fx("gs_b").data, 1e-6, 1e-5));
    tg_grad_scaler_free(scaler);
    tg_optim_free(opt);
    tg_module_free(m);
}

TEST_F(GradScalerTest, CallOrderErrorsAsPyTorch) {
    tg_module *m = initial_model();
    tg_optim *opt = tg_sgd(m, tg_sgd_opts{.lr = 0.1});
    tg_grad_scaler *s = tg_grad_scaler_new(opt, tg_grad_scaler_opts{});
    tg_clear_error();
    EXPECT_NE(tg_grad_scaler_update(s), TG_OK);
    EXPECT_ERROR_CONTAINS("No inf checks were recorded prior to update");
    TG_SCOPE {
        tg_tensor *loss = tg_sum(tg_forward(m, fx("gs_x").make(TG_FLOAT32)));
        tg_tensor *scaled = tg_grad_scaler_scale(s, loss);
        EXPECT_EQ(tg_item(scaled), tg_item(loss) * 65536.0);
        ASSERT_EQ(tg_backward(scaled), TG_OK);
    }
    ASSERT_EQ(tg_grad_scaler_unscale_(s, opt), TG_OK) << tg_last_error();
    tg_clear_error();
    EXPECT_NE(tg_grad_scaler_unscale_(s, opt), TG_OK);
    EXPECT_ERROR_CONTAINS("unscale_() has already been called on this optimizer since the last update()");
    ASSERT_EQ(tg_grad_scaler_step(s, opt, nullptr), TG_OK);
    tg_clear_error();
    EXPECT_NE(tg_grad_scaler_step(s, opt, nullptr), TG_OK);
    EXPECT_ERROR_CONTAINS("step() has already been called since the last update()");
    tg_clear_error();
    EXPECT_NE(tg_grad_scaler_unscale_(s, opt), TG_OK);
    EXPECT_ERROR_CONTAINS("unscale_() is being called after step()");
    EXPECT_EQ(tg_grad_scaler_update(s), TG_OK);
    EXPECT_EQ(tg_grad_scaler_growth_tracker(s), 1);
    EXPECT_EQ(tg_grad_scaler_update_to(s, 8.0), TG_OK);
    EXPECT_EQ(tg_grad_scaler_get_scale(s), 8.0);
    // One scaler per optimizer (checkpoints hold one); bad factors.
    tg_clear_error();
    EXPECT_EQ(tg_grad_scaler_new(opt, tg_grad_scaler_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("SGD already has a GradScaler");
    tg_clear_error();
    EXPECT_EQ(tg_grad_scaler_new(nullptr, tg_grad_scaler_opts{.growth_factor = 0.9}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_grad_scaler_new: the growth factor must be > 1.0, got 0.9");
    tg_clear_error();
    EXPECT_EQ(tg_grad_scaler_new(nullptr, tg_grad_scaler_opts{.backoff_factor = 1.5}), nullptr);
    EXPECT_ERROR_CONTAINS("the backoff factor must be < 1.0");
    // Freeing the optimizer first leaves the scaler usable for its own state.
    tg_optim_free(opt);
    EXPECT_EQ(tg_grad_scaler_get_scale(s), 8.0);
    tg_grad_scaler_free(s);
    tg_module_free(m);
}

TEST_F(GradScalerTest, RefusesFloat16Gradients) {
    tg_tensor *p = tg_requires_grad_(tg_ones(TG_SHAPE(2), tg_opts{TG_FLOAT16}), true);
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(p, p))), TG_OK) << tg_last_error();
    tg_optim *opt = tg_sgd_params(&p, 1, tg_sgd_opts{.lr = 0.1});
    tg_grad_scaler *s = tg_grad_scaler_new(opt, tg_grad_scaler_opts{});
    tg_clear_error();
    EXPECT_NE(tg_grad_scaler_step(s, opt, nullptr), TG_OK);
    EXPECT_ERROR_CONTAINS("Attempting to unscale FP16 gradients");
    tg_grad_scaler_free(s);
    tg_optim_free(opt);
}

TEST_F(GradScalerTest, DisabledPassesThrough) {
    tg_module *m = initial_model();
    tg_optim *opt = tg_sgd(m, tg_sgd_opts{.lr = 0.1});
    tg_grad_scaler *s = tg_grad_scaler_new(opt, tg_grad_scaler_opts{.disabled = true});
    EXPECT_FALSE(tg_grad_scaler_is_enabled(s));
    EXPECT_EQ(tg_grad_scaler_get_scale(s), 1.0);
    int n = 0;
    tg_tensor *const *p = tg_parameters(m, &n);
    TG_SCOPE {
        tg_tensor *loss = tg_sum(tg_forward(m, fx("gs_x").make(TG_FLOAT32)));
        EXPECT_EQ(tg_grad_scaler_scale(s, loss), loss);
        ASSERT_EQ(tg_backward(loss), TG_OK);
        std::vector<double> before = values(p[1]);
        EXPECT_EQ(tg_grad_scaler_step(s, opt, nullptr), TG_OK);
        EXPECT_NE(values(p[1]), before);
        EXPECT_EQ(tg_grad_scaler_update(s), TG_OK);
    }
    tg_grad_scaler_free(s);
    tg_optim_free(opt);
    tg_module_free(m);
}

TEST_F(GradScalerTest, CheckpointResumesBitForBit) {
    std::string path = dir_ + "/ck.safetensors";
    // Straight run: 14 steps.
    tg_module *a = initial_model();
    tg_optim *oa = tg_sgd(a, tg_sgd_opts{.lr = 0.05, .momentum = 0.9});
    tg_grad_scaler *sa = tg_grad_scaler_new(oa, fixture_opts());
    for (int step = 0; step < 14; step++) {
        run_step(step, a, oa, sa);
        if (step == 7) {
            ASSERT_EQ(tg_save_checkpoint(path.c_str(), a, oa, tg_checkpoint_info{8, 0}), TG_OK) << tg_last_error();
        }
    }
    // Resumed run: fresh model, optimizer and scaler (another init_scale), loaded at step 8.
    tg_module *b = initial_model();
    tg_optim *ob = tg_sgd(b, tg_sgd_opts{.lr = 0.05, .momentum = 0.9});
    tg_grad_scaler *sb = tg_grad_scaler_new(ob, tg_grad_scaler_opts{.init_scale = 7});
    tg_checkpoint_info info{};
    ASSERT_EQ(tg_load_checkpoint(path.c_str(), b, ob, &info), TG_OK) << tg_last_error();
    EXPECT_EQ(info.step, 8);
    EXPECT_EQ(tg_grad_scaler_get_scale(sb), fx("gs_scale").data[7]);
    EXPECT_EQ(tg_grad_scaler_growth_tracker(sb), (int64_t)fx("gs_tracker").data[7]);
    EXPECT_EQ(tg_grad_scaler_get_opts(sb).growth_interval, 3);
    for (int step = 8; step < 14; step++) run_step(step, b, ob, sb);
    EXPECT_EQ(tg_grad_scaler_get_scale(sb), tg_grad_scaler_get_scale(sa));
    EXPECT_EQ(tg_grad_scaler_growth_tracker(sb), tg_grad_scaler_growth_tracker(sa));
    int n = 0;
    tg_tensor *const *pa = tg_parameters(a, &n), *const *pb = tg_parameters(b, &n);
    for (int i = 0; i < n; i++) EXPECT_EQ(values(pa[i]), values(pb[i])) << "parameter " << i;
    // An optimizer with a scaler refuses a checkpoint saved without one.
    std::string plain = dir_ + "/plain.safetensors";
    tg_optim *oc = tg_sgd(b, tg_sgd_opts{.lr = 0.05, .momentum = 0.9});
    ASSERT_EQ(tg_save_checkpoint(plain.c_str(), b, oc, tg_checkpoint_info{}), TG_OK);
    tg_clear_error();
    EXPECT_NE(tg_load_checkpoint(plain.c_str(), b, ob, nullptr), TG_OK);
    EXPECT_ERROR_CONTAINS("holds no GradScaler state");
    tg_optim_free(oc);
    tg_grad_scaler_free(sa);
    tg_grad_scaler_free(sb);
    tg_optim_free(oa);
    tg_optim_free(ob);
    tg_module_free(a);
    tg_module_free(b);
}

// One iteration on two float32 parameters [2] and [3] with loss sum(2 * p0) + sum(2 * p1)
// (gradients exactly 2 * scale); `inf` writes Inf into p1's gradient after backward.
tg_status floor_iteration(tg_grad_scaler *s, tg_optim *opt, tg_tensor *const *p, bool inf, bool *skipped) {
    tg_status st = TG_ERROR;
    TG_SCOPE {
        tg_optim_zero_grad(opt);
        tg_tensor *loss = tg_add(tg_sum(tg_mul_scalar(p[0], 2)), tg_sum(tg_mul_scalar(p[1], 2)));
        EXPECT_EQ(tg_backward(tg_grad_scaler_scale(s, loss)), TG_OK) << tg_last_error();
        if (inf) ((float *)tg_data_ptr(tg_grad(p[1])))[1] = INFINITY;
        st = tg_grad_scaler_step(s, opt, skipped);
        EXPECT_EQ(tg_grad_scaler_update(s), TG_OK) << tg_last_error();
    }
    return st;
}

TEST_F(GradScalerTest, ScaleStopsAtTheSmallestNormalFloat) {
    tg_tensor *p[2] = {tg_requires_grad_(tg_ones(TG_SHAPE(2), tg_opts{}), true),
                       tg_requires_grad_(tg_ones(TG_SHAPE(3), tg_opts{}), true)};
    tg_optim *opt = tg_sgd_params(p, 2, tg_sgd_opts{.lr = 0.25});
    tg_grad_scaler *s = tg_grad_scaler_new(opt, tg_grad_scaler_opts{.max_consecutive_nonfinite = -1});
    ASSERT_NE(s, nullptr) << tg_last_error();
    bool skipped = false;
    // 2^16 halves to 2^-126 = FLT_MIN in 142 steps; PyTorch goes on to 2^-149 and then 0.
    for (int i = 0; i < 142; i++) ASSERT_EQ(floor_iteration(s, opt, p, true, &skipped), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_grad_scaler_get_scale(s), std::ldexp(1.0, -126));
    EXPECT_EQ(tg_grad_scaler_get_scale(s), TG_GRAD_SCALER_MIN_SCALE);
    for (int i = 0; i < 60; i++) ASSERT_EQ(floor_iteration(s, opt, p, true, &skipped), TG_OK) << tg_last_error();
    EXPECT_TRUE(skipped);
    EXPECT_EQ(tg_grad_scaler_get_scale(s), TG_GRAD_SCALER_MIN_SCALE);
    EXPECT_EQ(tg_grad_scaler_nonfinite_steps(s), 202);
    EXPECT_EQ(values(p[0]), std::vector<double>({1, 1})); // every step skipped
    // The next finite step runs: gradients 2 * 2^-126 unscale to exactly 2; 1 - 0.25 * 2.
    ASSERT_EQ(floor_iteration(s, opt, p, false, &skipped), TG_OK) << tg_last_error();
    EXPECT_FALSE(skipped);
    EXPECT_EQ(values(p[0]), std::vector<double>({0.5, 0.5}));
    EXPECT_EQ(values(p[1]), std::vector<double>({0.5, 0.5, 0.5}));
    EXPECT_EQ(tg_grad_scaler_nonfinite_steps(s), 0);
    EXPECT_EQ(tg_grad_scaler_growth_tracker(s), 1);
    // A backoff factor that does not land on the floor is clamped to it: 2^-125 * 0.3.
    ASSERT_EQ(tg_grad_scaler_set_state(s, std::ldexp(1.0, -125), 0,
                                       tg_grad_scaler_opts{.backoff_factor = 0.3, .max_consecutive_nonfinite = -1}),
              TG_OK)
        << tg_last_error();
    ASSERT_EQ(floor_iteration(s, opt, p, true, &skipped), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_grad_scaler_get_scale(s), TG_GRAD_SCALER_MIN_SCALE);
    // A scale that is 0 as a float32 is refused where one is set.
    tg_clear_error();
    EXPECT_NE(tg_grad_scaler_update_to(s, 1e-50), TG_OK);
    EXPECT_ERROR_CONTAINS("tg_grad_scaler_update_to: the scale must be positive and finite as a float32, got 1e-50");
    tg_clear_error();
    EXPECT_EQ(tg_grad_scaler_new(nullptr, tg_grad_scaler_opts{.init_scale = 1e-50}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_grad_scaler_new: the scale must be positive and finite as a float32, got 1e-50");
    tg_grad_scaler_free(s);
    tg_optim_free(opt);
}

TEST_F(GradScalerTest, FailsAfterTooManyNonFiniteIterationsInARow) {
    tg_tensor *p[2] = {tg_requires_grad_(tg_ones(TG_SHAPE(2), tg_opts{}), true),
                       tg_requires_grad_(tg_ones(TG_SHAPE(3), tg_opts{}), true)};
    tg_optim *opt = tg_sgd_params(p, 2, tg_sgd_opts{.lr = 0.25});
    tg_grad_scaler *s = tg_grad_scaler_new(opt, tg_grad_scaler_opts{.max_consecutive_nonfinite = 3});
    ASSERT_NE(s, nullptr) << tg_last_error();
    EXPECT_EQ(tg_grad_scaler_get_opts(s).max_consecutive_nonfinite, 3);
    bool skipped = false;
    EXPECT_EQ(floor_iteration(s, opt, p, true, &skipped), TG_OK) << tg_last_error();
    EXPECT_EQ(floor_iteration(s, opt, p, true, &skipped), TG_OK) << tg_last_error();
    tg_clear_error();
    EXPECT_NE(floor_iteration(s, opt, p, true, &skipped), TG_OK);
    EXPECT_TRUE(skipped);
    EXPECT_ERROR_CONTAINS("tg_grad_scaler_step: 3 iterations in a row with Inf or NaN gradients "
                          "(max_consecutive_nonfinite 3, scale 16384); now the gradient of parameter 1 "
                          "(float32 [3]) of SGD holds Inf or NaN; the step is skipped");
    EXPECT_EQ(values(p[1]), std::vector<double>({1, 1, 1})); // not stepped
    EXPECT_EQ(tg_grad_scaler_nonfinite_steps(s), 3);         // the update still counted it
    tg_clear_error();
    EXPECT_NE(floor_iteration(s, opt, p, true, &skipped), TG_OK); // and every later one fails
    EXPECT_ERROR_CONTAINS("4 iterations in a row");
    // A finite iteration resets the count; the next Inf is 1 of 3 again.
    EXPECT_EQ(floor_iteration(s, opt, p, false, &skipped), TG_OK) << tg_last_error();
    EXPECT_FALSE(skipped);
    EXPECT_EQ(tg_grad_scaler_nonfinite_steps(s), 0);
    EXPECT_EQ(floor_iteration(s, opt, p, true, &skipped), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_grad_scaler_nonfinite_steps(s), 1);
    tg_grad_scaler_free(s);
    tg_optim_free(opt);
}

TEST_F(GradScalerTest, CheckpointKeepsTheNonFiniteCountAndOldFilesLoad) {
    std::string path = dir_ + "/ck.safetensors", old = dir_ + "/old.safetensors";
    tg_module *m = initial_model();
    tg_optim *opt = tg_sgd(m, tg_sgd_opts{.lr = 0.05});
    tg_grad_scaler *s = tg_grad_scaler_new(opt, tg_grad_scaler_opts{.max_consecutive_nonfinite = 7});
    for (int step = 0; step < 3; step++) run_step(step, m, opt, s); // step 2 has an Inf: count 1
    EXPECT_EQ(tg_grad_scaler_nonfinite_steps(s), 1);
    ASSERT_EQ(tg_save_checkpoint(path.c_str(), m, opt, tg_checkpoint_info{3, 0}), TG_OK) << tg_last_error();
    // The same file as a tapegrad from before the limit wrote it: without the two new keys.
    tg_tensor_map *ck = tg_safetensors_load(path.c_str());
    ASSERT_NE(ck, nullptr) << tg_last_error();
    EXPECT_STREQ(tg_tensor_map_metadata(ck, "scaler.nonfinite_steps"), "1");
    EXPECT_STREQ(tg_tensor_map_metadata(ck, "scaler.max_consecutive_nonfinite"), "7");
    tg_tensor_map *stripped = tg_tensor_map_new();
    ASSERT_EQ(tg_tensor_map_merge(stripped, ck, nullptr), TG_OK);
    for (int64_t i = 0; i < tg_tensor_map_metadata_size(ck); i++) {
        std::string key = tg_tensor_map_metadata_key(ck, i);
        if (key != "scaler.nonfinite_steps" && key != "scaler.max_consecutive_nonfinite") {
            ASSERT_EQ(tg_tensor_map_set_metadata(stripped, key.c_str(), tg_tensor_map_metadata_value(ck, i)), TG_OK);
        }
    }
    ASSERT_EQ(tg_safetensors_save(stripped, old.c_str()), TG_OK) << tg_last_error();
    tg_tensor_map_free(stripped);
    tg_tensor_map_free(ck);

    tg_optim *ob = tg_sgd(m, tg_sgd_opts{.lr = 0.05});
    tg_grad_scaler *sb = tg_grad_scaler_new(ob, tg_grad_scaler_opts{.max_consecutive_nonfinite = 50});
    ASSERT_EQ(tg_load_checkpoint(path.c_str(), m, ob, nullptr), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_grad_scaler_nonfinite_steps(sb), 1);
    EXPECT_EQ(tg_grad_scaler_get_opts(sb).max_consecutive_nonfinite, 7);
    EXPECT_EQ(tg_grad_scaler_get_scale(sb), tg_grad_scaler_get_scale(s));
    // The old file: same scale and tracker, count 0, the scaler's own limit.
    tg_grad_scaler_free(sb);
    sb = tg_grad_scaler_new(ob, tg_grad_scaler_opts{.max_consecutive_nonfinite = 50});
    ASSERT_EQ(tg_load_checkpoint(old.c_str(), m, ob, nullptr), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_grad_scaler_nonfinite_steps(sb), 0);
    EXPECT_EQ(tg_grad_scaler_get_opts(sb).max_consecutive_nonfinite, 50);
    EXPECT_EQ(tg_grad_scaler_get_scale(sb), tg_grad_scaler_get_scale(s));
    EXPECT_EQ(tg_grad_scaler_growth_tracker(sb), tg_grad_scaler_growth_tracker(s));
    tg_grad_scaler_free(sb);
    tg_grad_scaler_free(s);
    tg_optim_free(ob);
    tg_optim_free(opt);
    tg_module_free(m);
}

} // namespace

// unscale_ reaches every element of every gradient (expect_unscale_finds_inf_and_nan,
// tests/test_util.h; its CUDA twin is in tests/cuda/lowp_kernels_test.cc).
TEST_F(GradScalerTest, UnscaleReachesEveryElementOfEveryGradient) { expect_unscale_finds_inf_and_nan(TG_CPU); }
