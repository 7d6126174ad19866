// Pruning (quant/prune.h) against PyTorch 1.13's torch.nn.utils.prune
// (tests/fixtures/gen_prune.py): masks of every method on the same weights,
// iterative pruning, the state dict in both directions, remove, and training a
// pruned Linear (pruned entries stay zero, weight_orig's gradient is masked).
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {
int num_pre_hooks(const tg_module *m) {
    int n = 0;
    while (tg_forward_pre_hook_at(m, n, nullptr, nullptr).id) n++;
    return n;
}
} // namespace

namespace {

class PruneTest : public TgTest {
  protected:
    std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/prune.txt");

    tg_module *linear_with(const std::string &weight, const char *bias = nullptr) {
        const FixtureTensor &w = fixture_tensor(fx, weight);
        tg_module *m = tg_nn_linear(w.shape[1], w.shape[0], tg_linear_opts{.no_bias = bias == nullptr});
        TG_SCOPE {
            TG_NO_GRAD {
                tg_copy_(tg_module_param(m, "weight"), w.make(TG_FLOAT32));
                if (bias) tg_copy_(tg_module_param(m, "bias"), fixture_tensor(fx, bias).make(TG_FLOAT32));
            }
        }
        return m;
    }
    tg_module *conv_with(const std::string &weight) {
        const FixtureTensor &w = fixture_tensor(fx, weight);
        tg_module *m = tg_nn_conv2d(w.shape[1], w.shape[0], w.shape[2], tg_conv_opts{});
        TG_SCOPE {
            TG_NO_GRAD { tg_copy_(tg_module_param(m, "weight"), w.make(TG_FLOAT32)); }
        }
        return m;
    }
    void expect_mask(tg_module *m, const std::string &name) {
        tg_tensor *mask = tg_module_buffer(m, "weight_mask");
        ASSERT_NE(mask, nullptr) << name;
        EXPECT_EQ(dims(mask), fixture_tensor(fx, name).shape) << name;
        EXPECT_TRUE(tensor_near(mask, fixture_tensor(fx, name).data, 0, 0)) << name;
    }
    void check(const std::string &name, tg_module *m, const std::function<tg_status(tg_module *)> &prune) {
        ASSERT_EQ(prune(m), TG_OK) << name << ": " << tg_last_error();
        expect_mask(m, name);
        tg_module_free(m);
    }
};

TEST_F(PruneTest, L1UnstructuredMasks) {
    check("l1_frac", linear_with("lin_w"),
          [](tg_module *m) { return tg_prune_l1_unstructured(m, "weight", tg_prune_fraction(0.3)); });
    check("l1_count", linear_with("lin_w"),
          [](tg_module *m) { return tg_prune_l1_unstructured(m, "weight", tg_prune_count(7)); });
    check("l1_half", linear_with("lin_w"),
          [](tg_module *m) { return tg_prune_l1_unstructured(m, "weight", tg_prune_fraction(0.5)); });
    check("l1_round", linear_with("lin_w"),
          [](tg_module *m) { return tg_prune_l1_unstructured(m, "weight", tg_prune_fraction(0.0625)); });
    check("l1_halfeven", linear_with("lin_w"),
          [](tg_module *m) { return tg_prune_l1_unstructured(m, "weight", tg_prune_fraction(0.4375 / 4)); });
}

TEST_F(PruneTest, RandomUnstructuredMasksMatchTorchGenerator) {
    check("random_frac", linear_with("lin_w"), [](tg_module *m) {
        tg_manual_seed(5);
        return tg_prune_random_unstructured(m, "weight", tg_prune_fraction(0.4));
    });
    check("random_count", linear_with("lin_w"), [](tg_module *m) {
        tg_manual_seed(7);
        return tg_prune_random_unstructured(m, "weight", tg_prune_count(11));
    });
}

TEST_F(PruneTest, LnStructuredMasks) {
    check("ln2_dim0", linear_with("lin_w"),
          [](tg_module *m) { return tg_prune_ln_structured(m, "weight", tg_prune_fraction(0.5), 2, 0); });
    check("ln1_dim1", linear_with("lin_w"),
          [](tg_module *m) { return tg_prune_ln_structured(m, "weight", tg_prune_count(3), 1, 1); });
    check("ln1_conv_dim0", conv_with("conv_w"),
          [](tg_module *m) { return tg_prune_ln_structured(m, "weight", tg_prune_fraction(0.5), 1, 0); });
    check("ln2_conv_dim1", conv_with("conv_w"),
          [](tg_module *m) { return tg_prune_ln_structured(m, "weight", tg_prune_count(1), 2, 1); });
    check("lninf_conv_dimm1", conv_with("conv_w"),
          [](tg_module *m) { return tg_prune_ln_structured(m, "weight", tg_prune_count(1), INFINITY, -1); });
}

TEST_F(PruneTest, IterativePruningComposesAsPruningContainer) {
    check("iter_l1_l1", linear_with("lin_w"), [](tg_module *m) {
        tg_status s = tg_prune_l1_unstructured(m, "weight", tg_prune_fraction(0.5));
        return s ? s : tg_prune_l1_unstructured(m, "weight", tg_prune_fraction(0.5));
    });
    check("iter_l1_ln", linear_with("lin_w"), [](tg_module *m) {
        tg_status s = tg_prune_l1_unstructured(m, "weight", tg_prune_fraction(0.3));
        return s ? s : tg_prune_ln_structured(m, "weight", tg_prune_fraction(0.34), 2, 0);
    });
    check("iter_ln_ln", linear_with("lin_w"), [](tg_module *m) {
        tg_status s = tg_prune_ln_structured(m, "weight", tg_prune_count(2), 1, 0);
        return s ? s : tg_prune_ln_structured(m, "weight", tg_prune_fraction(0.5), 1, 0);
    });
    check("iter_ln_random", linear_with("lin_w"), [](tg_module *m) {
        tg_status s = tg_prune_ln_structured(m, "weight", tg_prune_count(1), 2, 1);
        tg_manual_seed(3);
        return s ? s : tg_prune_random_unstructured(m, "weight", tg_prune_fraction(0.25));
    });
    // 48 entries, 24 left after 50%: a count above what is left is PyTorch's ValueError
    tg_module *m = linear_with("lin_w");
    ASSERT_EQ(tg_prune_l1_unstructured(m, "weight", tg_prune_fraction(0.5)), TG_OK);
    tg_clear_error();
    EXPECT_EQ(tg_prune_l1_unstructured(m, "weight", tg_prune_count(25)), TG_ERROR);
    EXPECT_ERROR_CONTAINS("amount=25 should be smaller than the number of parameters to prune=24");
    EXPECT_DOUBLE_EQ(tg_prune_sparsity(m), 0.5);
    tg_module_free(m);
}

TEST_F(PruneTest, GlobalUnstructured) {
    tg_module *a = linear_with("lin_w"), *b = linear_with("lin2_w");
    tg_module *mods[] = {a, b};
    const char *names[] = {"weight", "weight"};
    ASSERT_EQ(tg_prune_global_unstructured(mods, names, 2, TG_PRUNE_L1_UNSTRUCTURED, tg_prune_fraction(0.6)), TG_OK)
        << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_module_buffer(a, "weight_mask"), fixture_tensor(fx, "global_l1_a").data, 0, 0));
    EXPECT_TRUE(tensor_near(tg_module_buffer(b, "weight_mask"), fixture_tensor(fx, "global_l1_b").data, 0, 0));
    tg_module_free(a);
    tg_module_free(b);

    a = linear_with("lin_w");
    b = linear_with("lin2_w");
    mods[0] = a;
    mods[1] = b;
    ASSERT_EQ(tg_prune_l1_unstructured(a, "weight", tg_prune_fraction(0.5)), TG_OK);
    tg_manual_seed(11);
    ASSERT_EQ(tg_prune_global_unstructured(mods, names, 2, TG_PRUNE_RANDOM_UNSTRUCTURED, tg_prune_count(20)), TG_OK)
        << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_module_buffer(a, "weight_mask"), fixture_tensor(fx, "global_random_a").data, 0, 0));
    EXPECT_TRUE(tensor_near(tg_module_buffer(b, "weight_mask"), fixture_tensor(fx, "global_random_b").data, 0, 0));
    // (24 + 20 of 72 entries pruned)
    tg_module *both = TG_NN_SEQUENTIAL(a, b);
    EXPECT_DOUBLE_EQ(tg_prune_sparsity(both), 44.0 / 72.0);
    tg_module_free(both);
}

TEST_F(PruneTest, StateDictNamesAndLoadBothWays) {
    tg_module *m = linear_with("lin_w", "lin_b");
    tg_tensor *w = tg_module_param(m, "weight");
    ASSERT_EQ(tg_prune_l1_unstructured(m, "weight", tg_prune_fraction(0.3)), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_module_param(m, "weight_orig"), w); // the same tensor, moved
    // PyTorch's state dict: sd_<i>_<name>, in order
    const char *expected[] = {"bias", "weight_orig", "weight_mask"};
    int n = 0;
    const tg_named_tensor *sd = tg_state_dict(m, &n);
    ASSERT_EQ(n, 3);
    tg_tensor_map *from_torch = tg_tensor_map_new();
    for (int i = 0; i < n; i++) {
        std::string key = "sd_" + std::to_string(i) + "_" + expected[i];
        EXPECT_STREQ(sd[i].name, expected[i]);
        EXPECT_TRUE(tensor_near(sd[i].tensor, fixture_tensor(fx, key).data, 0, 0)) << key;
        TG_SCOPE { tg_tensor_map_set(from_torch, expected[i], fixture_tensor(fx, key).make(TG_FLOAT32)); }
    }
    int np = 0;
    const tg_named_tensor *params = tg_named_parameters(m, &np);
    ASSERT_EQ(np, 2);
    EXPECT_STREQ(params[1].name, "weight_orig");
    TG_SCOPE {
        tg_tensor *x = fixture_tensor(fx, "x").make(TG_FLOAT32);
        EXPECT_TRUE(tensor_near(tg_forward(m, x), fixture_tensor(fx, "pruned_out").data, 1e-5, 1e-5));

        // PyTorch's file into a pruned model made from other weights
        tg_module *other = tg_nn_linear(8, 6, tg_linear_opts{});
        ASSERT_EQ(tg_prune_random_unstructured(other, "weight", tg_prune_fraction(0.9)), TG_OK);
        ASSERT_EQ(tg_module_load_state_map(other, from_torch, true, nullptr), TG_OK) << tg_last_error();
        EXPECT_TRUE(tensor_near(tg_forward(other, x), fixture_tensor(fx, "pruned_out").data, 1e-5, 1e-5));
        // ours for PyTorch: the same names, shapes and values as PyTorch's own
        tg_tensor_map *ours = tg_module_state_map(m);
        ASSERT_EQ(tg_tensor_map_size(ours), 3);
        for (int i = 0; i < 3; i++)
            EXPECT_TRUE(tensor_near(tg_tensor_map_get(ours, expected[i]),
                                    fixture_tensor(fx, "sd_" + std::to_string(i) + "_" + expected[i]).data, 0, 0));
        tg_tensor_map_free(ours);
        tg_module_free(other);
    }
    tg_tensor_map_free(from_torch);

    // remove: weight is a parameter again (the same tensor), after bias
    ASSERT_EQ(tg_prune_remove(m, "weight"), TG_OK) << tg_last_error();
    sd = tg_state_dict(m, &n);
    ASSERT_EQ(n, 2);
    EXPECT_STREQ(sd[0].name, "bias");
    EXPECT_STREQ(sd[1].name, "weight");
    EXPECT_EQ(sd[1].tensor, w);
    EXPECT_TRUE(tensor_near(w, fixture_tensor(fx, "removed_sd_1_weight").data, 0, 0));
    EXPECT_FALSE(tg_prune_is_pruned(m, "weight"));
    EXPECT_EQ(num_pre_hooks(m), 0);
    tg_clear_error();
    EXPECT_EQ(tg_prune_remove(m, "weight"), TG_ERROR);
    EXPECT_ERROR_CONTAINS("has to be pruned before pruning can be removed");
    tg_module_free(m);
}

TEST_F(PruneTest, TrainingKeepsPrunedWeightsAtZero) {
    tg_module *m = linear_with("lin_w", "lin_b");
    ASSERT_EQ(tg_prune_l1_unstructured(m, "weight", tg_prune_fraction(0.5)), TG_OK);
    tg_optim *opt = tg_sgd(m, tg_sgd_opts{.lr = 0.1});
    ASSERT_NE(opt, nullptr) << tg_last_error();
    TG_SCOPE {
        tg_tensor *x = fixture_tensor(fx, "x").make(TG_FLOAT32);
        tg_tensor *target = fixture_tensor(fx, "target").make(TG_FLOAT32);
        for (int step = 0; step < 3; step++) {
            tg_optim_zero_grad(opt);
            tg_tensor *loss = tg_mse_loss(tg_forward(m, x), target);
            ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
            if (step == 0) {
                EXPECT_TRUE(tensor_near(tg_grad(tg_module_param(m, "weight_orig")),
                                        fixture_tensor(fx, "train_grad_orig0").data, 1e-6, 1e-5));
            }
            ASSERT_EQ(tg_optim_step(opt), TG_OK);
        }
        EXPECT_TRUE(
            tensor_near(tg_module_param(m, "weight_orig"), fixture_tensor(fx, "train_weight_orig").data, 1e-6, 1e-5));
        EXPECT_TRUE(tensor_near(tg_module_param(m, "bias"), fixture_tensor(fx, "train_bias").data, 1e-6, 1e-5));
        EXPECT_TRUE(tensor_near(tg_forward(m, x), fixture_tensor(fx, "train_out").data, 1e-5, 1e-5));
        EXPECT_DOUBLE_EQ(tg_prune_sparsity(m), 0.5);
    }
    tg_optim_free(opt);
    tg_module_free(m);
}

TEST_F(PruneTest, BadInput) {
    tg_module *m = linear_with("lin_w");
    tg_clear_error();
    EXPECT_EQ(tg_prune_l1_unstructured(m, "gamma", tg_prune_fraction(0.5)), TG_ERROR);
    EXPECT_ERROR_CONTAINS("Linear has no parameter \"gamma\" to prune");
    tg_clear_error();
    EXPECT_EQ(tg_prune_l1_unstructured(m, "weight", tg_prune_fraction(1.5)), TG_ERROR);
    EXPECT_ERROR_CONTAINS("amount=1.5 should either be a float in the range [0, 1]");
    tg_clear_error();
    EXPECT_EQ(tg_prune_random_unstructured(m, "weight", tg_prune_count(-1)), TG_ERROR);
    EXPECT_ERROR_CONTAINS("non-negative integer");
    tg_clear_error();
    EXPECT_EQ(tg_prune_l1_unstructured(m, "weight", tg_prune_count(49)), TG_ERROR);
    EXPECT_ERROR_CONTAINS("number of parameters to prune=48");
    tg_clear_error();
    EXPECT_EQ(tg_prune_ln_structured(m, "weight", tg_prune_count(1), 2, 2), TG_ERROR);
    EXPECT_ERROR_CONTAINS("dim 2 is out of range");
    tg_clear_error();
    EXPECT_EQ(tg_prune_ln_structured(m, "bias", tg_prune_count(1), 2, 0), TG_ERROR);
    EXPECT_ERROR_CONTAINS("no parameter \"bias\"");
    tg_clear_error();
    EXPECT_EQ(tg_prune_ln_structured(m, "weight", tg_prune_count(1), 0, 0), TG_ERROR);
    EXPECT_ERROR_CONTAINS("norm order n must be > 0");
    tg_clear_error();
    EXPECT_EQ(tg_prune_l1_unstructured(nullptr, "weight", tg_prune_count(1)), TG_ERROR);
    EXPECT_ERROR_CONTAINS("module is NULL");
    EXPECT_FALSE(tg_prune_is_pruned(m, "weight")); // failures leave the module as it was
    EXPECT_DOUBLE_EQ(tg_prune_sparsity(m), 0.0);
    tg_module *with_bias = linear_with("lin_w", "lin_b");
    tg_clear_error();
    EXPECT_EQ(tg_prune_ln_structured(with_bias, "bias", tg_prune_count(1), 2, 0), TG_ERROR);
    EXPECT_ERROR_CONTAINS("can only be applied to multidimensional tensors");
    TG_SCOPE {
        tg_tensor *bad = tg_ones(TG_SHAPE(3), tg_opts{});
        tg_clear_error();
        EXPECT_EQ(tg_prune_custom_from_mask(m, "weight", bad), TG_ERROR);
        EXPECT_ERROR_CONTAINS("does not match Linear.weight");
    }
    tg_module_free(with_bias);
    tg_module_free(m);
}

TEST_F(PruneTest, CustomFromMaskAndForwardPreHook) {
    tg_module *m = linear_with("lin_w");
    TG_SCOPE {
        tg_tensor *mask = tg_ones(TG_SHAPE(6, 8), tg_opts{});
        TG_NO_GRAD { tg_fill_(tg_select(mask, 0, 2), 0.0); }
        ASSERT_EQ(tg_prune_custom_from_mask(m, "weight", mask), TG_OK) << tg_last_error();
        EXPECT_DOUBLE_EQ(tg_prune_sparsity(m), 8.0 / 48.0);
        tg_tensor *x = tg_ones(TG_SHAPE(1, 8), tg_opts{});
        tg_tensor *y = tg_forward(m, x);
        EXPECT_DOUBLE_EQ(values(y)[2], 0.0); // row 2 of the weight is masked
        EXPECT_EQ(num_pre_hooks(m), 1);
    }
    tg_module_free(m);
}

} // namespace
