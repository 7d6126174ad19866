// State dicts and training checkpoints: PyTorch names, strict/non-strict loading with
// every mismatch in one message, resume = identical continuation.
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using ModulePtr = std::unique_ptr<tg_module, void (*)(tg_module *)>;
using OptimPtr = std::unique_ptr<tg_optim, void (*)(tg_optim *)>;
using MapPtr = std::unique_ptr<tg_tensor_map, void (*)(tg_tensor_map *)>;

// Sequential(Linear(in, hidden), ReLU, Linear(hidden, 2), BatchNorm1d(2)).
ModulePtr make_model(int64_t in = 4, int64_t hidden = 3) {
    tg_module *layers[4] = {tg_nn_linear(in, hidden, tg_linear_opts{}), tg_nn_relu(),
                            tg_nn_linear(hidden, 2, tg_linear_opts{}), tg_nn_batch_norm1d(2, tg_batch_norm_opts{})};
    return ModulePtr(tg_nn_sequential(4, layers), tg_module_free);
}

class CheckpointTest : public TgTempDirTest {
  protected:
};

// One training step on fixed data; returns the loss.
double train_step(tg_module *model, tg_optim *opt) {
    double loss_value = 0;
    TG_SCOPE {
        tg_tensor *x = tg_randn(TG_SHAPE(5, 4), tg_opts{});
        tg_tensor *y = tg_randn(TG_SHAPE(5, 2), tg_opts{});
        tg_tensor *loss = tg_mse_loss(tg_forward(model, x), y);
        tg_backward(loss);
        tg_optim_step(opt);
        tg_optim_zero_grad(opt);
        loss_value = tg_item(loss);
    }
    return loss_value;
}

TEST_F(CheckpointTest, StateDictRoundTripWithPyTorchNames) {
    tg_manual_seed(1);
    ModulePtr a = make_model(), b = make_model();
    std::string path = dir_ + "/sd.safetensors";
    ASSERT_EQ(tg_save_state_dict(a.get(), path.c_str()), TG_OK) << tg_last_error();
    MapPtr file(tg_safetensors_load(path.c_str()), tg_tensor_map_free);
    ASSERT_NE(file, nullptr);
    std::vector<std::string> names;
    for (int64_t i = 0; i < tg_tensor_map_size(file.get()); i++) names.push_back(tg_tensor_map_name(file.get(), i));
    EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "3.weight", "3.bias",
                                               "3.running_mean", "3.running_var", "3.num_batches_tracked"}));
    EXPECT_EQ(tg_dtype_of(tg_tensor_map_get(file.get(), "3.num_batches_tracked")), TG_INT64);

    tg_tensor *w_before = tg_module_get(b.get(), "0.weight");
    ASSERT_EQ(tg_load_state_dict(b.get(), path.c_str(), true), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_module_get(b.get(), "0.weight"), w_before) << "loaded in place";
    int count = 0;
    const tg_named_tensor *sa = tg_state_dict(a.get(), &count);
    for (int i = 0; i < count; i++)
        EXPECT_TRUE(tensor_near(tg_module_get(b.get(), sa[i].name), values(sa[i].tensor), 0)) << sa[i].name;
    EXPECT_TRUE(tg_requires_grad(tg_module_get(b.get(), "0.weight")));
}

// Issue 35: an int8 scale of 0, -1 or NaN, a zero point out of range and a prune mask
// of 0.5 loaded and ran. Each is now refused naming the file, the key and the value,
// and the module keeps its state.
TEST_F(CheckpointTest, LoadRefusesBadQuantisationStateAndMasks) {
    std::string good = dir_ + "/good.safetensors", bad = dir_ + "/bad.safetensors";
    // one bad value written into key of model's own state, then loaded back into model
    auto expect_refused = [&](tg_module *model, const char *key, double value, const std::string &part) {
        TG_SCOPE {
            tg_tensor_map *map = tg_module_state_map(model);
            tg_tensor *t = tg_clone(tg_tensor_map_get(map, key));
            TG_NO_GRAD { tg_fill_(tg_narrow(tg_flatten(t, 0, -1), 0, tg_numel(t) - 1, 1), value); }
            tg_tensor_map_set(map, key, t);
            ASSERT_EQ(tg_safetensors_save(map, bad.c_str()), TG_OK) << tg_last_error();
            tg_tensor_map_free(map);
            std::vector<double> before = values(tg_module_get(model, key));
            tg_clear_error();
            EXPECT_EQ(tg_load_state_dict(model, bad.c_str(), true), TG_ERROR) << key << " " << value;
            EXPECT_ERROR_CONTAINS("tg_load_state_dict: " + bad + ": \"" + key + "\" holds " + part);
            EXPECT_EQ(values(tg_module_get(model, key)), before);
        }
    };
    tg_manual_seed(3);
    tg_module *dyn = tg_quantize_dynamic(TG_NN_SEQUENTIAL(tg_nn_linear(4, 3, tg_linear_opts{})),
                                         tg_quantize_opts{.per_channel = true});
    ASSERT_NE(dyn, nullptr) << tg_last_error();
    for (auto [v, text] : {std::pair{0.0, "0"}, std::pair{-1.0, "-1"}, std::pair{(double)NAN, "nan"},
                           std::pair{(double)INFINITY, "inf"}})
        expect_refused(dyn, "0.scale", v,
                       std::string(text) + " at flat index 2: a quantisation scale must be finite and positive");
    expect_refused(dyn, "0.zero_point", 300, "300 at flat index 2: the int8 weights are symmetric");
    ASSERT_EQ(tg_save_state_dict(dyn, good.c_str()), TG_OK);
    EXPECT_EQ(tg_load_state_dict(dyn, good.c_str(), true), TG_OK) << tg_last_error(); // a good one loads

    tg_module *pruned = TG_NN_SEQUENTIAL(tg_nn_linear(4, 3, tg_linear_opts{}));
    ASSERT_EQ(tg_prune_l1_unstructured(tg_module_child(pruned, "0"), "weight", tg_prune_fraction(0.5)), TG_OK);
    expect_refused(pruned, "0.weight_mask", 0.5, "0.5 at flat index 11: a prune mask holds only 0 and 1");
    expect_refused(pruned, "0.weight_mask", -1, "-1 at flat index 11");
    ASSERT_EQ(tg_save_state_dict(pruned, good.c_str()), TG_OK);
    EXPECT_EQ(tg_load_state_dict(pruned, good.c_str(), true), TG_OK) << tg_last_error();

    tg_module *fixed = tg_quant_wrapper(TG_NN_SEQUENTIAL(tg_nn_linear(4, 3, tg_linear_opts{})));
    tg_qconfig qc = tg_get_default_qconfig("onednn");
    tg_eval(fixed);
    ASSERT_EQ(tg_quant_prepare(fixed, qc), TG_OK) << tg_last_error();
    TG_NO_GRAD {
        TG_SCOPE { ASSERT_NE(tg_forward(fixed, tg_randn(TG_SHAPE(8, 4), tg_opts{})), nullptr) << tg_last_error(); }
    }
    ASSERT_EQ(tg_quant_convert(fixed, qc), TG_OK) << tg_last_error();
    expect_refused(fixed, "quant.scale", NAN, "nan at flat index 0: a quantisation scale must be finite and positive");
    expect_refused(fixed, "module.0.weight_scale", -1, "-1 at flat index 2");
    expect_refused(fixed, "module.0.zero_point", 256,
                   "256 at flat index 0: a quint8 zero point must be within [0, 255]");
    expect_refused(fixed, "dequant.input_zero_point", -1, "-1 at flat index 0");
    tg_module_free(fixed);
    tg_module_free(pruned);
    tg_module_free(dyn);
}

TEST_F(CheckpointTest, StrictReportsEveryMismatchInOneMessage) {
    ModulePtr small = make_model(4, 3), wide = make_model(6, 3);
    std::string path = dir_ + "/sd.safetensors";
    // The file: small's state, one entry renamed, one extra, one with another dtype.
    MapPtr m(tg_module_state_map(small.get()), tg_tensor_map_free);
    tg_tensor_map_set(m.get(), "extra.weight", tensor_f32({1}, TG_SHAPE(1)));
    tg_tensor *bias = tg_tensor_map_get(m.get(), "2.bias");
    tg_tensor_map_set(m.get(), "2.bias", tg_cast(bias, TG_FLOAT64));
    tg_tensor_map_set(m.get(), "3.runing_mean", tg_tensor_map_get(m.get(), "3.running_mean"));
    tg_tensor_map_remove(m.get(), "3.running_mean");
    ASSERT_EQ(tg_safetensors_save(m.get(), path.c_str()), TG_OK);

    std::vector<double> before = values(tg_module_get(wide.get(), "2.weight"));
    EXPECT_EQ(tg_load_state_dict(wide.get(), path.c_str(), true), TG_ERROR);
    EXPECT_ERROR_CONTAINS(path + ": 5 problems, module unchanged");
    EXPECT_ERROR_CONTAINS("missing keys (1): \"3.running_mean\"");
    EXPECT_ERROR_CONTAINS("unexpected keys (2): \"extra.weight\", \"3.runing_mean\"");
    EXPECT_ERROR_CONTAINS("size mismatch (1): \"0.weight\": [3, 4] in the file, [3, 6] in the module");
    EXPECT_ERROR_CONTAINS("dtype mismatch (1): \"2.bias\": float64 in the file, float32 in the module");
    EXPECT_EQ(values(tg_module_get(wide.get(), "2.weight")), before) << "nothing loaded on failure";

    // Non-strict: names may differ, shapes and dtypes may not.
    EXPECT_EQ(tg_load_state_dict(wide.get(), path.c_str(), false), TG_ERROR);
    EXPECT_ERROR_CONTAINS("2 problems");
    EXPECT_EQ(std::string(tg_last_error()).find("missing"), std::string::npos);
    ModulePtr same = make_model(4, 3);
    tg_tensor_map_set(m.get(), "2.bias", bias);
    ASSERT_EQ(tg_safetensors_save(m.get(), path.c_str()), TG_OK);
    tg_tensor *rm = tg_module_get(same.get(), "3.running_mean");
    ASSERT_EQ(tg_fill_(rm, 7), TG_OK);
    EXPECT_EQ(tg_load_state_dict(same.get(), path.c_str(), false), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(rm, {7, 7}, 0)) << "absent entries keep their values";
    EXPECT_TRUE(tensor_near(tg_module_get(same.get(), "0.weight"), values(tg_module_get(small.get(), "0.weight")), 0));
    EXPECT_EQ(tg_load_state_dict(same.get(), path.c_str(), true), TG_ERROR);
}

TEST_F(CheckpointTest, ResumeContinuesIdentically) {
    tg_manual_seed(3);
    ModulePtr model = make_model();
    OptimPtr opt(tg_adam(model.get(), tg_adam_opts{0.01}), tg_optim_free);
    for (int i = 0; i < 3; i++) train_step(model.get(), opt.get());
    std::string path = dir_ + "/ck.safetensors";
    ASSERT_EQ(tg_save_checkpoint(path.c_str(), model.get(), opt.get(), tg_checkpoint_info{3, 1}), TG_OK)
        << tg_last_error();
    std::vector<double> expected;
    for (int i = 0; i < 3; i++) expected.push_back(train_step(model.get(), opt.get()));

    tg_manual_seed(999); // a different model, optimizer state and RNG stream
    ModulePtr fresh = make_model();
    OptimPtr fresh_opt(tg_adam(fresh.get(), tg_adam_opts{0.5}), tg_optim_free);
    tg_checkpoint_info info = {};
    ASSERT_EQ(tg_load_checkpoint(path.c_str(), fresh.get(), fresh_opt.get(), &info), TG_OK) << tg_last_error();
    EXPECT_EQ(info.step, 3);
    EXPECT_EQ(info.epoch, 1);
    EXPECT_DOUBLE_EQ(tg_optim_get_lr(fresh_opt.get()), 0.01);
    for (int i = 0; i < 3; i++) EXPECT_DOUBLE_EQ(train_step(fresh.get(), fresh_opt.get()), expected[(size_t)i]) << i;

    MapPtr file(tg_safetensors_load(path.c_str()), tg_tensor_map_free);
    EXPECT_NE(tg_tensor_map_get(file.get(), "model.0.weight"), nullptr);
    EXPECT_NE(tg_tensor_map_get(file.get(), "optim.state.0.exp_avg"), nullptr);
    EXPECT_STREQ(tg_tensor_map_metadata(file.get(), "optim.name"), tg_optim_name(opt.get()));
    EXPECT_NE(tg_tensor_map_get(file.get(), "rng.state"), nullptr); // the mt19937 words

    // A file from before rng.state (only the seed and the CUDA offset): loading reseeds.
    ASSERT_TRUE(tg_tensor_map_remove(file.get(), "rng.state"));
    std::string old_path = dir_ + "/old.safetensors";
    ASSERT_EQ(tg_safetensors_save(file.get(), old_path.c_str()), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_load_checkpoint(old_path.c_str(), fresh.get(), fresh_opt.get(), nullptr), TG_OK) << tg_last_error();
    std::vector<double> after_old = values(tg_rand(TG_SHAPE(5), tg_opts{}));
    tg_manual_seed(3);
    EXPECT_EQ(values(tg_rand(TG_SHAPE(5), tg_opts{})), after_old);
}

TEST_F(CheckpointTest, CheckpointErrors) {
    ModulePtr model = make_model();
    OptimPtr sgd(tg_sgd(model.get(), tg_sgd_opts{0.1, 0.9}), tg_optim_free);
    OptimPtr adam(tg_adam(model.get(), tg_adam_opts{}), tg_optim_free);
    std::string sd = dir_ + "/sd.safetensors", ck = dir_ + "/ck.safetensors";
    ASSERT_EQ(tg_save_state_dict(model.get(), sd.c_str()), TG_OK);
    EXPECT_EQ(tg_load_checkpoint(sd.c_str(), model.get(), nullptr, nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("is not a tapegrad checkpoint");
    ASSERT_EQ(tg_save_checkpoint(ck.c_str(), model.get(), sgd.get(), tg_checkpoint_info{}), TG_OK);
    EXPECT_EQ(tg_load_checkpoint(ck.c_str(), model.get(), adam.get(), nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("holds " + std::string(tg_optim_name(sgd.get())) + " state, but the optimizer is " +
                          tg_optim_name(adam.get()));
    ModulePtr other = make_model(5, 3);
    EXPECT_EQ(tg_load_checkpoint(ck.c_str(), other.get(), nullptr, nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("size mismatch (1): \"0.weight\"");
    EXPECT_EQ(tg_load_checkpoint(ck.c_str(), model.get(), nullptr, nullptr), TG_OK) << tg_last_error();
}

// Per-group lrs round-trip; the groups must match; files from before parameter groups
// (only "optim.lr") still load, setting every group's lr.
TEST_F(CheckpointTest, ParamGroupLrs) {
    tg_manual_seed(5);
    // Group 0: the Linear layers (4 tensors), group 1: BatchNorm's weight and bias.
    auto make_opt = [](tg_module *m, int split, double lr0, double lr1) {
        int n = 0;
        tg_tensor *const *p = tg_parameters(m, &n);
        tg_optim *opt = tg_sgd_params(p, split, tg_sgd_opts{.lr = lr0, .momentum = 0.9});
        EXPECT_EQ(tg_optim_add_param_group(opt, p + split, n - split, tg_param_group_opts{.lr = lr1}), TG_OK)
            << tg_last_error();
        return OptimPtr(opt, tg_optim_free);
    };
    ModulePtr model = make_model();
    OptimPtr opt = make_opt(model.get(), 4, 0.01, 0.1);
    for (int i = 0; i < 2; i++) train_step(model.get(), opt.get());
    tg_optim_set_group_lr(opt.get(), 0, 0.02);
    tg_optim_set_group_lr(opt.get(), 1, 0.3);
    ASSERT_EQ(tg_optim_set_group_momentum(opt.get(), 0, 0.85), TG_OK); // as OneCycleLR would
    ASSERT_EQ(tg_optim_set_group_momentum(opt.get(), 1, 0.8), TG_OK);
    std::string path = dir_ + "/ck.safetensors";
    ASSERT_EQ(tg_save_checkpoint(path.c_str(), model.get(), opt.get(), tg_checkpoint_info{2, 0}), TG_OK)
        << tg_last_error();
    std::vector<double> expected;
    for (int i = 0; i < 2; i++) expected.push_back(train_step(model.get(), opt.get()));

    MapPtr file(tg_safetensors_load(path.c_str()), tg_tensor_map_free);
    ASSERT_NE(file, nullptr);
    EXPECT_STREQ(tg_tensor_map_metadata(file.get(), "optim.groups"), "2");
    EXPECT_STREQ(tg_tensor_map_metadata(file.get(), "optim.group.0.params"), "4");
    EXPECT_STREQ(tg_tensor_map_metadata(file.get(), "optim.group.1.lr"), "0.29999999999999999");
    EXPECT_STREQ(tg_tensor_map_metadata(file.get(), "optim.lr"), "0.02") << "group 0's, for older readers";
    EXPECT_STREQ(tg_tensor_map_metadata(file.get(), "optim.group.1.momentum"), "0.80000000000000004");
    EXPECT_NE(tg_tensor_map_get(file.get(), "optim.state.5.momentum_buffer"), nullptr) << "indices run across groups";

    tg_manual_seed(77);
    ModulePtr fresh = make_model();
    OptimPtr fresh_opt = make_opt(fresh.get(), 4, 0.5, 0.5);
    ASSERT_EQ(tg_load_checkpoint(path.c_str(), fresh.get(), fresh_opt.get(), nullptr), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_optim_get_group_lr(fresh_opt.get(), 0), 0.02);
    EXPECT_EQ(tg_optim_get_group_lr(fresh_opt.get(), 1), 0.3);
    EXPECT_EQ(tg_optim_get_group_momentum(fresh_opt.get(), 0), 0.85);
    EXPECT_EQ(tg_optim_get_group_momentum(fresh_opt.get(), 1), 0.8);
    for (int i = 0; i < 2; i++) EXPECT_DOUBLE_EQ(train_step(fresh.get(), fresh_opt.get()), expected[(size_t)i]) << i;

    // Groups that do not match: an error naming both layouts, nothing modified.
    ModulePtr other = make_model();
    std::vector<double> before = values(tg_module_get(other.get(), "0.weight"));
    OptimPtr one_group(tg_sgd(other.get(), tg_sgd_opts{.lr = 0.5, .momentum = 0.9}), tg_optim_free);
    EXPECT_EQ(tg_load_checkpoint(path.c_str(), other.get(), one_group.get(), nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("holds 2 parameter groups, but the optimizer (SGD) has 1");
    EXPECT_EQ(values(tg_module_get(other.get(), "0.weight")), before);
    EXPECT_EQ(tg_optim_get_lr(one_group.get()), 0.5);
    OptimPtr other_split = make_opt(other.get(), 3, 0.5, 0.5);
    EXPECT_EQ(tg_load_checkpoint(path.c_str(), other.get(), other_split.get(), nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("parameter group 0 has 4 parameters in the file, 3 in the optimizer (SGD)");
    EXPECT_EQ(values(tg_module_get(other.get(), "0.weight")), before);

    // A saved momentum the optimizer refuses: an error before the model or the optimizer
    // changes (tests/fuzz/checkpoint_fuzzer found Adam's beta1 1.9 restoring the model first).
    MapPtr bad(tg_tensor_map_new(), tg_tensor_map_free);
    ASSERT_EQ(tg_tensor_map_merge(bad.get(), file.get(), ""), TG_OK);
    for (int64_t i = 0; i < tg_tensor_map_metadata_size(file.get()); i++) {
        std::string key = tg_tensor_map_metadata_key(file.get(), i);
        tg_tensor_map_set_metadata(bad.get(), key.c_str(),
                                   key == "optim.group.1.momentum" ? "-1"
                                                                   : tg_tensor_map_metadata_value(file.get(), i));
    }
    std::string bad_path = dir_ + "/bad_momentum.safetensors";
    ASSERT_EQ(tg_safetensors_save(bad.get(), bad_path.c_str()), TG_OK);
    OptimPtr refused = make_opt(other.get(), 4, 0.5, 0.5);
    EXPECT_EQ(tg_load_checkpoint(bad_path.c_str(), other.get(), refused.get(), nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("the optimizer's parameter group 1: tg_optim_set_group_momentum (SGD): momentum must be "
                          "non-negative, got -1");
    EXPECT_EQ(values(tg_module_get(other.get(), "0.weight")), before);
    EXPECT_EQ(tg_optim_get_group_lr(refused.get(), 0), 0.5);
    EXPECT_EQ(tg_optim_get_group_momentum(refused.get(), 0), 0.9);
    EXPECT_EQ(tg_optim_get_group_momentum(refused.get(), 1), 0.9);

    // A file from before parameter groups: the same file without the group metadata.
    MapPtr old(tg_tensor_map_new(), tg_tensor_map_free);
    ASSERT_EQ(tg_tensor_map_merge(old.get(), file.get(), ""), TG_OK);
    for (int64_t i = 0; i < tg_tensor_map_metadata_size(file.get()); i++) {
        std::string key = tg_tensor_map_metadata_key(file.get(), i);
        if (key.rfind("optim.group", 0) == 0) continue;
        tg_tensor_map_set_metadata(old.get(), key.c_str(), tg_tensor_map_metadata_value(file.get(), i));
    }
    EXPECT_EQ(tg_tensor_map_metadata(old.get(), "optim.groups"), nullptr);
    std::string old_path = dir_ + "/old.safetensors";
    ASSERT_EQ(tg_safetensors_save(old.get(), old_path.c_str()), TG_OK);
    OptimPtr legacy = make_opt(other.get(), 4, 0.5, 0.5);
    ASSERT_EQ(tg_load_checkpoint(old_path.c_str(), other.get(), legacy.get(), nullptr), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_optim_get_group_lr(legacy.get(), 0), 0.02);
    EXPECT_EQ(tg_optim_get_group_lr(legacy.get(), 1), 0.02) << "\"optim.lr\" goes to every group";
}

} // namespace

// A scheduled run resumes bit for bit: every scheduler made on the optimizer is in its
// checkpoint (last_epoch, step count, base and last lrs), checked against the one the
// resumed program makes. CosineAnnealingLR's recursion depends on all of them.
TEST_F(CheckpointTest, ScheduledRunResumesBitExact) {
    struct Run {
        ModulePtr model;
        OptimPtr opt;
        tg_lr_scheduler *cosine, *step;
    };
    auto make_run = [](uint64_t seed) {
        tg_manual_seed(seed);
        Run r{make_model(), OptimPtr(nullptr, tg_optim_free), nullptr, nullptr};
        r.opt.reset(tg_sgd(r.model.get(), tg_sgd_opts{.lr = 0.1, .momentum = 0.9}));
        r.cosine = tg_cosine_annealing_lr(r.opt.get(), 5, 0.001);
        r.step = tg_step_lr(r.opt.get(), 2, 0.5); // chained on the same optimizer, as PyTorch allows
        return r;
    };
    auto advance = [](Run &r, std::vector<double> &losses, std::vector<double> &lrs) {
        losses.push_back(train_step(r.model.get(), r.opt.get()));
        EXPECT_EQ(tg_scheduler_step(r.cosine), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_scheduler_step(r.step), TG_OK) << tg_last_error();
        lrs.push_back(tg_optim_get_lr(r.opt.get()));
    };
    Run run = make_run(11);
    std::vector<double> losses, lrs;
    for (int i = 0; i < 3; i++) advance(run, losses, lrs);
    std::string path = dir_ + "/ck.safetensors";
    ASSERT_EQ(tg_save_checkpoint(path.c_str(), run.model.get(), run.opt.get(), tg_checkpoint_info{3, 0}), TG_OK)
        << tg_last_error();
    std::vector<double> expected_losses, expected_lrs;
    for (int i = 0; i < 4; i++) advance(run, expected_losses, expected_lrs);

    Run resumed = make_run(999); // other weights; its schedulers at epoch 0
    ASSERT_EQ(tg_load_checkpoint(path.c_str(), resumed.model.get(), resumed.opt.get(), nullptr), TG_OK)
        << tg_last_error();
    EXPECT_EQ(tg_scheduler_last_epoch(resumed.cosine), 3);
    EXPECT_EQ(tg_scheduler_get_last_lr(resumed.step), lrs.back());
    std::vector<double> got_losses, got_lrs;
    for (int i = 0; i < 4; i++) advance(resumed, got_losses, got_lrs);
    EXPECT_EQ(got_lrs, expected_lrs); // exactly, not approximately
    EXPECT_EQ(got_losses, expected_losses);
    EXPECT_NE(expected_lrs[0], expected_lrs[1]); // the schedule does move the lr

    MapPtr file(tg_safetensors_load(path.c_str()), tg_tensor_map_free);
    EXPECT_STREQ(tg_tensor_map_metadata(file.get(), "sched.count"), "2");
    EXPECT_STREQ(tg_tensor_map_metadata(file.get(), "sched.0.name"), "CosineAnnealingLR");
    EXPECT_STREQ(tg_tensor_map_metadata(file.get(), "sched.0.settings"), "T_max=5 eta_min=0.001");
    EXPECT_STREQ(tg_tensor_map_metadata(file.get(), "sched.1.settings"), "step_size=2 gamma=0.5");
    EXPECT_STREQ(tg_tensor_map_metadata(file.get(), "sched.1.last_epoch"), "3");
    EXPECT_STREQ(tg_tensor_map_metadata(file.get(), "sched.1.group.0.base_lr"), "0.10000000000000001");
    for (Run *r : {&run, &resumed}) {
        tg_scheduler_free(r->cosine);
        tg_scheduler_free(r->step);
    }
}

TEST_F(CheckpointTest, OneCycleResumeRestoresLrAndMomentumExactly) {
    auto make = [](uint64_t seed, ModulePtr &model, OptimPtr &opt) {
        tg_manual_seed(seed);
        model = make_model();
        opt.reset(tg_adam(model.get(), tg_adam_opts{.lr = 0.01}));
        return tg_one_cycle_lr(opt.get(), tg_one_cycle_opts{.max_lr = 0.05, .total_steps = 10});
    };
    ModulePtr model(nullptr, tg_module_free), model2(nullptr, tg_module_free);
    OptimPtr opt(nullptr, tg_optim_free), opt2(nullptr, tg_optim_free);
    tg_lr_scheduler *s = make(2, model, opt);
    for (int i = 0; i < 4; i++) {
        train_step(model.get(), opt.get());
        ASSERT_EQ(tg_scheduler_step(s), TG_OK) << tg_last_error();
    }
    std::string path = dir_ + "/ck.safetensors";
    ASSERT_EQ(tg_save_checkpoint(path.c_str(), model.get(), opt.get(), tg_checkpoint_info{}), TG_OK);
    // The rest of the run, uninterrupted: losses, lrs and beta1s (the cycled momentum).
    std::vector<double> expected, got;
    for (int i = 0; i < 6; i++) {
        expected.push_back(train_step(model.get(), opt.get()));
        ASSERT_EQ(tg_scheduler_step(s), TG_OK);
        expected.push_back(tg_optim_get_lr(opt.get()));
        expected.push_back(tg_optim_get_group_momentum(opt.get(), 0));
    }
    tg_lr_scheduler *s2 = make(3, model2, opt2);
    ASSERT_EQ(tg_load_checkpoint(path.c_str(), model2.get(), opt2.get(), nullptr), TG_OK) << tg_last_error();
    for (int i = 0; i < 6; i++) {
        got.push_back(train_step(model2.get(), opt2.get()));
        ASSERT_EQ(tg_scheduler_step(s2), TG_OK) << tg_last_error();
        got.push_back(tg_optim_get_lr(opt2.get()));
        got.push_back(tg_optim_get_group_momentum(opt2.get(), 0));
    }
    EXPECT_EQ(got, expected);
    EXPECT_NE(expected[1], expected[4]);
    EXPECT_EQ(tg_scheduler_step(s2), TG_ERROR); // the resumed one knows it is at its last step too
    EXPECT_ERROR_CONTAINS("tried to step 12 times; the specified number of total steps is 10");
    tg_scheduler_free(s);
    tg_scheduler_free(s2);
}

// Found by checkpoint_fuzzer: a corrupt RNG state used to fail after the model was
// restored. It is checked first now, so a failed load leaves the model as it was.
TEST_F(CheckpointTest, CorruptRngStateLeavesModelUnchanged) {
    tg_manual_seed(4);
    ModulePtr model = make_model();
    std::string path = dir_ + "/ck.safetensors", bad = dir_ + "/bad.safetensors";
    ASSERT_EQ(tg_save_checkpoint(path.c_str(), model.get(), nullptr, tg_checkpoint_info{}), TG_OK);
    MapPtr ck(tg_safetensors_load(path.c_str()), tg_tensor_map_free);
    ASSERT_TRUE(ck) << tg_last_error();
    TG_SCOPE {
        tg_tensor *rng = tg_clone(tg_tensor_map_get(ck.get(), "rng.state"));
        ((unsigned char *)tg_data_ptr(rng))[0] ^= 0xff; // the magic bytes
        ASSERT_EQ(tg_tensor_map_set(ck.get(), "rng.state", rng), TG_OK);
    }
    ASSERT_EQ(tg_safetensors_save(ck.get(), bad.c_str()), TG_OK) << tg_last_error();

    ModulePtr other = make_model();
    std::vector<double> w = values(tg_module_get(other.get(), "0.weight"));
    ASSERT_NE(w, values(tg_module_get(model.get(), "0.weight")));
    EXPECT_EQ(tg_load_checkpoint(bad.c_str(), other.get(), nullptr, nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_set_rng_state: these bytes are not a state from tg_get_rng_state");
    EXPECT_EQ(values(tg_module_get(other.get(), "0.weight")), w) << "the model was changed by a failed load";
    ASSERT_EQ(tg_load_checkpoint(path.c_str(), other.get(), nullptr, nullptr), TG_OK) << tg_last_error();
    EXPECT_EQ(values(tg_module_get(other.get(), "0.weight")), values(tg_module_get(model.get(), "0.weight")));
}

TEST_F(CheckpointTest, SchedulerStateMismatchesAreRefusedBeforeAnythingChanges) {
    tg_manual_seed(4);
    ModulePtr model = make_model();
    OptimPtr opt(tg_sgd(model.get(), tg_sgd_opts{.lr = 0.1}), tg_optim_free);
    std::string plain = dir_ + "/plain.safetensors", scheduled = dir_ + "/sched.safetensors";
    ASSERT_EQ(tg_save_checkpoint(plain.c_str(), model.get(), opt.get(), tg_checkpoint_info{}), TG_OK);
    tg_lr_scheduler *s = tg_step_lr(opt.get(), 3, 0.5);
    ASSERT_EQ(tg_save_checkpoint(scheduled.c_str(), model.get(), opt.get(), tg_checkpoint_info{}), TG_OK);

    ModulePtr other = make_model();
    OptimPtr other_opt(tg_sgd(other.get(), tg_sgd_opts{.lr = 0.1}), tg_optim_free);
    std::vector<double> w = values(tg_module_get(other.get(), "0.weight"));
    // No scheduler made for the resumed run: the file's scheduler state is not needed.
    ASSERT_EQ(tg_load_checkpoint(scheduled.c_str(), other.get(), other_opt.get(), nullptr), TG_OK) << tg_last_error();
    EXPECT_EQ(values(tg_module_get(other.get(), "0.weight")), values(tg_module_get(model.get(), "0.weight")));
    TG_NO_GRAD {
        ASSERT_EQ(tg_fill_(tg_module_get(other.get(), "0.weight"), 5), TG_OK);
    } // a parameter: as under torch.no_grad
    w = values(tg_module_get(other.get(), "0.weight"));

    tg_lr_scheduler *wrong = tg_step_lr(other_opt.get(), 4, 0.5);
    EXPECT_EQ(tg_load_checkpoint(scheduled.c_str(), other.get(), other_opt.get(), nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS(": scheduler 0 (StepLR) was made with step_size=3 gamma=0.5 in the file, step_size=4 "
                          "gamma=0.5 here");
    EXPECT_EQ(tg_load_checkpoint(plain.c_str(), other.get(), other_opt.get(), nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("holds no scheduler state (saved without a scheduler, or by an older tapegrad), but 1 "
                          "scheduler was made on the optimizer (SGD)");
    tg_scheduler_free(wrong);
    tg_lr_scheduler *exp = tg_exponential_lr(other_opt.get(), 0.9);
    EXPECT_EQ(tg_load_checkpoint(scheduled.c_str(), other.get(), other_opt.get(), nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("scheduler 0 is StepLR in the file, ExponentialLR here");
    tg_lr_scheduler *second = tg_step_lr(other_opt.get(), 3, 0.5);
    EXPECT_EQ(tg_load_checkpoint(scheduled.c_str(), other.get(), other_opt.get(), nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("holds the state of 1 scheduler, but 2 were made on the optimizer");
    tg_scheduler_free(exp);
    tg_scheduler_free(second);
    tg_scheduler_free(s);
    EXPECT_EQ(values(tg_module_get(other.get(), "0.weight")), w) << "nothing loaded by the failures";

    // A scheduler whose optimizer was freed fails instead of touching freed memory.
    tg_lr_scheduler *orphan = tg_step_lr(other_opt.get(), 3, 0.5);
    other_opt.reset();
    EXPECT_EQ(tg_scheduler_step(orphan), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_scheduler_step: the optimizer of this scheduler was freed");
    tg_scheduler_free(orphan);
}
