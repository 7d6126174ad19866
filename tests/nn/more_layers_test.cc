// Identity, Softmax, LogSoftmax, ModuleList, Dropout2d (nn/layers.h), Conv1d
// (nn/conv_layers.h), GroupNorm and InstanceNorm2d (nn/norm_layers.h): forward
// values and gradients against PyTorch 1.13 (tests/fixtures/gen_nn_modules.py),
// initial weights from the same seed, float64 gradchecks, state dicts with
// PyTorch's names loaded both ways, and bad inputs.
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/nn_modules.txt");
    return f;
}
tg_tensor *f64(const std::string &name, bool grad = false) { return fixture_tensor(fx(), name).make(TG_FLOAT64, grad); }
std::vector<double> want(const std::string &name) { return fixture_tensor(fx(), name).data; }

std::vector<std::string> state_names(tg_module *m) {
    int n = 0;
    const tg_named_tensor *s = tg_state_dict(m, &n);
    std::vector<std::string> out;
    for (int i = 0; i < n; i++) out.push_back(s[i].name);
    return out;
}

// Loads PyTorch's values (fixture "<case>.<name>") into m under PyTorch's names
// (strictly when the keys are m's whole state dict).
void load_from_pytorch(tg_module *m, const std::string &name, const std::vector<std::string> &keys) {
    tg_tensor_map *map = tg_tensor_map_new();
    for (const std::string &k : keys) {
        tg_tensor *t = tg_module_get(m, k.c_str());
        ASSERT_NE(t, nullptr) << k;
        ASSERT_EQ(tg_tensor_map_set(map, k.c_str(), fixture_tensor(fx(), name + "." + k).make(tg_dtype_of(t))), TG_OK);
    }
    bool strict = keys == state_names(m);
    EXPECT_EQ(tg_module_load_state_map(m, map, strict, "PyTorch"), TG_OK) << tg_last_error();
    tg_tensor_map_free(map);
}

// y = m(x) against "<name>.y"; the gradients of sum(y * g) against "<name>.x_grad" and
// "<name>.<param>_grad" for each of m's parameters.
void check_case(tg_module *m, const std::string &name, double tol) {
    tg_tensor *x = f64(name + ".x", true);
    tg_tensor *y = tg_forward(m, x);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(dims(y), fixture_tensor(fx(), name + ".y").shape) << name;
    EXPECT_TRUE(tensor_near(y, want(name + ".y"), tol)) << name;
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, f64(name + ".g")))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), want(name + ".x_grad"), tol)) << name;
    int n = 0;
    const tg_named_tensor *params = tg_named_parameters(m, &n);
    for (int i = 0; i < n; i++)
        EXPECT_TRUE(tensor_near(tg_grad(params[i].tensor), want(name + "." + params[i].name + "_grad"), tol))
            << name << " " << params[i].name;
}

// Gradcheck of a module's forward with respect to its input and parameters (float64).
tg_tensor *module_fn(tg_tensor *const *in, void *user) { return tg_forward(static_cast<tg_module *>(user), in[0]); }
void gradcheck_module(tg_module *m, tg_shape input_shape) {
    tg_manual_seed(5);
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    tg_tensor *x = tg_randn(input_shape, tg_opts{TG_FLOAT64, TG_CPU, true});
    tg_gradcheck_opts o = {};
    o.user = m;
    EXPECT_EQ(tg_gradcheck(module_fn, 1, &x, &o), TG_OK) << tg_last_error();
}

class MoreLayersTest : public TgTest {};

} // namespace

// ---- Identity, Softmax, LogSoftmax ----

TEST_F(MoreLayersTest, IdentityReturnsItsInput) {
    tg_module *id = tg_nn_identity();
    tg_tensor *x = tensor_f32({1, 2, 3}, TG_SHAPE(3), true);
    tg_tensor *y = tg_forward(id, x);
    EXPECT_EQ(y, x) << "the same tensor, as nn.Identity";
    EXPECT_EQ(state_names(id), std::vector<std::string>{});
    tg_module_free(id);
}

TEST_F(MoreLayersTest, SoftmaxAndLogSoftmaxMatchPyTorch) {
    tg_module *sm = tg_nn_softmax(1), *lsm = tg_nn_log_softmax(-1);
    tg_tensor *x = f64("softmax.x");
    EXPECT_TRUE(tensor_near(tg_forward(sm, x), want("softmax.dim1"), 1e-15));
    EXPECT_TRUE(tensor_near(tg_forward(lsm, x), want("log_softmax.dim_last"), 1e-15));
    tg_clear_error();
    tg_module *bad = tg_nn_softmax(3);
    EXPECT_EQ(tg_forward(bad, x), nullptr);
    EXPECT_ERROR_CONTAINS("3");
    tg_module_free(sm);
    tg_module_free(lsm);
    tg_module_free(bad);
}

// ---- ModuleList ----

TEST_F(MoreLayersTest, ModuleListNamesIndexAndAppend) {
    tg_module *members[] = {tg_nn_linear(2, 3, tg_linear_opts{}), tg_nn_relu()};
    tg_module *list = tg_nn_module_list(2, members);
    ASSERT_NE(list, nullptr) << tg_last_error();
    ASSERT_EQ(tg_nn_module_list_append(list, tg_nn_linear(3, 1, tg_linear_opts{.no_bias = true})), TG_OK);
    EXPECT_EQ(tg_nn_module_list_len(list), 3);
    EXPECT_EQ(state_names(list), (std::vector<std::string>{"0.weight", "0.bias", "2.weight"}));
    EXPECT_EQ(tg_nn_module_list_get(list, -1), tg_module_child(list, "2"));
    EXPECT_STREQ(tg_module_type_of(tg_nn_module_list_get(list, 1))->name, "ReLU");
    tg_clear_error();
    EXPECT_EQ(tg_nn_module_list_get(list, 3), nullptr);
    EXPECT_ERROR_CONTAINS("index 3 is out of range for a ModuleList of 3 modules");
    tg_clear_error();
    EXPECT_EQ(tg_forward(list, tensor_f32({1, 2}, TG_SHAPE(1, 2))), nullptr);
    EXPECT_ERROR_CONTAINS("ModuleList (3 modules) has no forward");
    // a ModuleList inside a Sequential names its members as PyTorch: "1.0.weight"
    tg_module *net = TG_NN_SEQUENTIAL(tg_nn_identity(), tg_nn_module_list(0, nullptr));
    ASSERT_EQ(tg_nn_module_list_append(tg_module_child(net, "1"), tg_nn_linear(1, 1, tg_linear_opts{})), TG_OK);
    EXPECT_EQ(state_names(net), (std::vector<std::string>{"1.0.weight", "1.0.bias"}));
    tg_clear_error();
    EXPECT_EQ(tg_nn_module_list_append(net, tg_nn_relu()), TG_ERROR);
    EXPECT_ERROR_CONTAINS("Sequential, not a ModuleList");
    EXPECT_EQ(tg_nn_module_list_len(net), -1);
    tg_clear_error();
    tg_module *with_null[] = {tg_nn_relu(), nullptr};
    EXPECT_EQ(tg_nn_module_list(2, with_null), nullptr);
    EXPECT_ERROR_CONTAINS("module 1 of 2 is NULL");
    tg_module_free(net);
    tg_module_free(list);
}

// ---- Dropout2d ----

TEST_F(MoreLayersTest, Dropout2dDropsPyTorchsChannels) {
    tg_module *d = tg_nn_dropout2d(0.4);
    tg_manual_seed(11);
    check_case(d, "dropout2d", 1e-15);
    // whole channels: each [n, c] plane is all zero or all x / 0.6
    tg_tensor *x3 = fixture_tensor(fx(), "dropout2d.x3").make(TG_FLOAT32);
    tg_module *d3 = tg_nn_dropout2d(0.5);
    tg_manual_seed(12);
    EXPECT_TRUE(tensor_near(tg_forward(d3, x3), want("dropout2d.y3"), 0)) << "[N, C, L] as PyTorch 1.13";
    tg_eval(d3);
    EXPECT_EQ(tg_forward(d3, x3), x3) << "identity in eval";
    tg_clear_error();
    tg_train(d3, true);
    EXPECT_EQ(tg_forward(d3, tensor_f32({1, 2}, TG_SHAPE(2))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_dropout2d: input [2] must be [N, C, H, W]");
    tg_clear_error();
    EXPECT_EQ(tg_nn_dropout2d(1.5), nullptr);
    EXPECT_ERROR_CONTAINS("p must be in [0, 1], got 1.5");
    tg_module_free(d);
    tg_module_free(d3);
}

TEST_F(MoreLayersTest, Dropout2dOneDropsEverything) {
    tg_tensor *x = tensor_f64({1, 2, 3, 4}, TG_SHAPE(1, 2, 2, 1), true);
    tg_tensor *y = tg_dropout2d(x, 1.0, true);
    EXPECT_TRUE(tensor_near(y, {0, 0, 0, 0}, 0));
    ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), {0, 0, 0, 0}, 0));
}

// ---- Conv1d ----

TEST_F(MoreLayersTest, Conv1dSameSeedSameWeightsAndMatchesPyTorch) {
    tg_manual_seed(3);
    tg_module *m = tg_nn_conv1d(4, 6, 3, tg_conv_opts{.stride = 2, .padding = 1});
    ASSERT_NE(m, nullptr) << tg_last_error();
    EXPECT_EQ(state_names(m), (std::vector<std::string>{"weight", "bias"}));
    EXPECT_EQ(dims(tg_module_param(m, "weight")), (std::vector<int64_t>{6, 4, 3}));
    EXPECT_TRUE(tensor_near(tg_module_param(m, "weight"), want("conv1d.weight"), 0));
    EXPECT_TRUE(tensor_near(tg_module_param(m, "bias"), want("conv1d.bias"), 0));
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    check_case(m, "conv1d", 1e-12);

    tg_manual_seed(4);
    tg_module *g = tg_nn_conv1d(4, 6, 2, tg_conv_opts{.dilation = 2, .groups = 2, .no_bias = true});
    EXPECT_TRUE(tensor_near(tg_module_param(g, "weight"), want("conv1d_groups.weight"), 0));
    ASSERT_EQ(tg_module_cast(g, TG_FLOAT64), TG_OK);
    check_case(g, "conv1d_groups", 1e-12);
    tg_module_free(m);
    tg_module_free(g);
}

TEST_F(MoreLayersTest, Conv1dGradcheckUnbatchedAndErrors) {
    tg_module *m = tg_nn_conv1d(2, 3, 3, tg_conv_opts{.stride = 2, .padding = 2, .dilation = 2});
    gradcheck_module(m, TG_SHAPE(2, 2, 7));
    // unbatched [C, L] is the batched result's row
    tg_tensor *x = tg_randn(TG_SHAPE(2, 7), tg_opts{TG_FLOAT64});
    tg_tensor *batched = tg_forward(m, tg_unsqueeze(x, 0));
    tg_tensor *single = tg_forward(m, x);
    EXPECT_EQ(dims(single), (std::vector<int64_t>{3, 4}));
    EXPECT_TRUE(tensor_near(single, values(batched), 1e-15));
    tg_clear_error();
    EXPECT_EQ(tg_forward(m, tg_zeros(TG_SHAPE(1, 3, 7), tg_opts{TG_FLOAT64})), nullptr);
    EXPECT_ERROR_CONTAINS("Conv1d(2, 3, kernel_size=3): input [1, 3, 7] must be [N, 2, L] or [2, L]");
    tg_clear_error();
    EXPECT_EQ(tg_nn_conv1d(3, 4, 3, tg_conv_opts{.groups = 2}), nullptr);
    EXPECT_ERROR_CONTAINS("must be positive multiples of groups=2");
    tg_module_free(m);
}

// ---- ConvTranspose2d ----

TEST_F(MoreLayersTest, ConvTranspose2dSameSeedSameWeightsAndMatchesPyTorch) {
    tg_manual_seed(13);
    tg_module *m =
        tg_nn_conv_transpose2d(3, 4, 3, tg_conv_transpose_opts{.stride = 2, .padding = 1, .output_padding = 1});
    ASSERT_NE(m, nullptr) << tg_last_error();
    EXPECT_EQ(state_names(m), (std::vector<std::string>{"weight", "bias"}));
    EXPECT_EQ(dims(tg_module_param(m, "weight")), (std::vector<int64_t>{3, 4, 3, 3})) << "[in, out, k, k]";
    EXPECT_TRUE(tensor_near(tg_module_param(m, "weight"), want("conv_transpose.weight"), 0));
    EXPECT_TRUE(tensor_near(tg_module_param(m, "bias"), want("conv_transpose.bias"), 0));
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    check_case(m, "conv_transpose", 1e-12);

    tg_manual_seed(14);
    tg_module *g = tg_nn_conv_transpose2d(
        4, 6, 2, tg_conv_transpose_opts{.stride = 3, .output_padding = 2, .dilation = 2, .groups = 2, .no_bias = true});
    EXPECT_EQ(dims(tg_module_param(g, "weight")), (std::vector<int64_t>{4, 3, 2, 2}));
    EXPECT_TRUE(tensor_near(tg_module_param(g, "weight"), want("conv_transpose_groups.weight"), 0));
    ASSERT_EQ(tg_module_cast(g, TG_FLOAT64), TG_OK);
    check_case(g, "conv_transpose_groups", 1e-12);
    tg_module_free(m);
    tg_module_free(g);

    // output_padding >= stride (PyTorch allows it below dilation)
    tg_manual_seed(15);
    tg_module *big = tg_nn_conv_transpose2d(
        2, 3, 3, tg_conv_transpose_opts{.stride = 1, .padding = 1, .output_padding = 2, .dilation = 3});
    ASSERT_NE(big, nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_module_param(big, "weight"), want("conv_transpose_big_op.weight"), 0));
    ASSERT_EQ(tg_module_cast(big, TG_FLOAT64), TG_OK);
    check_case(big, "conv_transpose_big_op", 1e-12);
    tg_manual_seed(16);
    tg_module *pad = tg_nn_conv_transpose2d(
        2, 2, 2, tg_conv_transpose_opts{.stride = 2, .padding = 3, .output_padding = 3, .dilation = 4});
    ASSERT_EQ(tg_module_cast(pad, TG_FLOAT64), TG_OK);
    check_case(pad, "conv_transpose_big_op_pad", 1e-12);
    tg_module_free(big);
    tg_module_free(pad);
}

namespace {
tg_tensor *conv_transpose_fn(tg_tensor *const *in, void *user) {
    return tg_conv_transpose2d(in[0], in[1], in[2], *static_cast<tg_conv_transpose_opts *>(user));
}
} // namespace

TEST_F(MoreLayersTest, ConvTranspose2dGradcheckSecondOrderAndErrors) {
    tg_manual_seed(6);
    tg_conv_transpose_opts o = {.stride = 2, .padding = 1, .output_padding = 1, .dilation = 2, .groups = 2};
    tg_opts f64o = {TG_FLOAT64, TG_CPU, true};
    tg_tensor *in[] = {tg_randn(TG_SHAPE(2, 4, 3, 2), f64o), tg_randn(TG_SHAPE(4, 1, 2, 3), f64o),
                       tg_randn(TG_SHAPE(2), f64o)};
    tg_gradcheck_opts go = {};
    go.user = &o;
    EXPECT_EQ(tg_gradcheck(conv_transpose_fn, 3, in, &go), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_gradgradcheck(conv_transpose_fn, 3, in, &go), TG_OK) << tg_last_error();
    tg_conv_transpose_opts cropped = {.stride = 1, .padding = 1, .output_padding = 2, .dilation = 3, .groups = 2};
    go.user = &cropped;
    EXPECT_EQ(tg_gradcheck(conv_transpose_fn, 3, in, &go), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_gradgradcheck(conv_transpose_fn, 3, in, &go), TG_OK) << tg_last_error();
    // unbatched input is the batched result's first image
    tg_tensor *batched = tg_conv_transpose2d(in[0], in[1], in[2], o);
    tg_tensor *single = tg_conv_transpose2d(tg_select(in[0], 0, 0), in[1], in[2], o);
    EXPECT_EQ(dims(single), (std::vector<int64_t>{2, 6, 6}));
    EXPECT_TRUE(tensor_near(single, values(tg_select(batched, 0, 0)), 1e-15));

    tg_clear_error();
    EXPECT_EQ(tg_conv_transpose2d(in[0], tg_randn(TG_SHAPE(3, 1, 2, 2), f64o), nullptr, tg_conv_transpose_opts{}),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_conv_transpose2d: expected input [N, C_in, H, W] with C_in == 3 (weight [3, 1, 2, 2]), "
                          "got [2, 4, 3, 2]");
    tg_clear_error();
    EXPECT_EQ(tg_conv_transpose2d(in[0], in[1], nullptr, tg_conv_transpose_opts{.stride = 2, .output_padding = 2}),
              nullptr);
    EXPECT_ERROR_CONTAINS("output_padding (2) must be smaller than either stride (2) or dilation (1)");
    tg_clear_error();
    EXPECT_EQ(tg_conv_transpose2d(in[0], in[1], tg_randn(TG_SHAPE(3), f64o), o), nullptr);
    EXPECT_ERROR_CONTAINS("expected bias [2] (weight [4, 1, 2, 3], groups 2), got [3]");
    tg_clear_error();
    EXPECT_EQ(tg_conv_transpose2d(tg_cast(in[0], TG_FLOAT32), in[1], nullptr, o), nullptr);
    EXPECT_ERROR_CONTAINS("got input float32, weight float64");
    tg_module *m = tg_nn_conv_transpose2d(4, 2, 2, tg_conv_transpose_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_forward(m, tg_zeros(TG_SHAPE(1, 3, 2, 2), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("ConvTranspose2d(4, 2, kernel_size=2): input [1, 3, 2, 2] must be [N, 4, H, W]");
    tg_clear_error();
    EXPECT_EQ(tg_nn_conv_transpose2d(4, 2, 2, tg_conv_transpose_opts{.output_padding = 1}), nullptr);
    EXPECT_ERROR_CONTAINS("output_padding=1 non-negative and below stride or dilation");
    tg_module_free(m);
}

// ---- Upsample ----

TEST_F(MoreLayersTest, UpsampleMatchesPyTorch) {
    struct Case {
        const char *name;
        tg_interpolate_opts opts;
    };
    const Case cases[] = {
        {"nearest_x2", {.mode = TG_INTERP_NEAREST, .scale_factor = {2}}},
        {"nearest_size", {.mode = TG_INTERP_NEAREST, .size = {5, 7}}},
        {"nearest_frac", {.mode = TG_INTERP_NEAREST, .scale_factor = {1.5, 0.75}}},
        {"bilinear_x2", {.mode = TG_INTERP_BILINEAR, .scale_factor = {2}}},
        {"bilinear_size_ac", {.mode = TG_INTERP_BILINEAR, .size = {5, 7}, .align_corners = true}},
        {"bilinear_frac", {.mode = TG_INTERP_BILINEAR, .scale_factor = {1.7, 0.6}}},
        {"bilinear_down_ac", {.mode = TG_INTERP_BILINEAR, .size = {2, 3}, .align_corners = true}},
    };
    for (const Case &c : cases) {
        std::string name = std::string("upsample_") + c.name;
        tg_module *m = tg_nn_upsample(c.opts);
        ASSERT_NE(m, nullptr) << tg_last_error();
        check_case(m, name, 1e-14);
        tg_tensor *x32 = fixture_tensor(fx(), "upsample.x").make(TG_FLOAT32);
        EXPECT_TRUE(tensor_near(tg_forward(m, x32), want(name + ".y32"), 1e-6)) << name << " float32";
        tg_module_free(m);
    }
}

namespace {
tg_tensor *interpolate_fn(tg_tensor *const *in, void *user) {
    return tg_interpolate(in[0], *static_cast<tg_interpolate_opts *>(user));
}
// tg_nn_batch_norm_add_relu with a BatchNorm2d: the bits of relu(bn(x) + r) written as
// three ops, running statistics and num_batches_tracked included, in train and eval
// mode; a module with a hook, and a module that is not a BatchNorm, go through
// tg_forward (the hook runs).
std::vector<std::vector<double>> block_end(bool fused, bool training) {
    tg_manual_seed(31);
    tg_module *bn = tg_nn_batch_norm2d(4, tg_batch_norm_opts{});
    tg_train(bn, training);
    tg_tensor *x = tg_requires_grad_(tg_randn(TG_SHAPE(2, 4, 5, 5), tg_opts{}), true);
    tg_tensor *r = tg_requires_grad_(tg_randn(TG_SHAPE(2, 4, 5, 5), tg_opts{}), true);
    std::vector<std::vector<double>> out;
    for (int step = 0; step < 2; step++) {
        tg_tensor *y = fused ? tg_nn_batch_norm_add_relu(bn, x, r) : tg_relu(tg_add(tg_forward(bn, x), r));
        EXPECT_NE(y, nullptr) << tg_last_error();
        if (!y) break;
        EXPECT_EQ(tg_backward(tg_sum(tg_mul(y, y))), TG_OK) << tg_last_error();
        out.push_back(values(y));
    }
    for (const char *name : {"running_mean", "running_var", "num_batches_tracked"})
        out.push_back(values(tg_module_buffer(bn, name)));
    out.push_back(values(tg_grad(x)));
    out.push_back(values(tg_grad(r)));
    out.push_back(values(tg_grad(tg_module_param(bn, "weight"))));
    tg_module_free(bn);
    return out;
}

TEST_F(TgTest, BatchNormAddReluModuleHasTheBitsOfTheThreeOps) {
    for (bool training : {true, false}) {
        SCOPED_TRACE(training ? "train" : "eval");
        EXPECT_TRUE(block_end(true, training) == block_end(false, training));
    }
}

tg_status count_calls(tg_module *, tg_tensor *, tg_tensor **, void *user) {
    ++*static_cast<int *>(user);
    return TG_OK;
}

TEST_F(TgTest, BatchNormAddReluModuleRunsHooksAndOtherNorms) {
    tg_module *bn = tg_nn_batch_norm2d(3, tg_batch_norm_opts{});
    int calls = 0;
    tg_register_forward_hook(bn, count_calls, &calls);
    tg_tensor *x = tg_randn(TG_SHAPE(2, 3, 4, 4), tg_opts{});
    tg_tensor *y = tg_nn_batch_norm_add_relu(bn, x, nullptr);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(calls, 1);
    tg_module *group = tg_nn_group_norm(1, 3, tg_group_norm_opts{});
    tg_tensor *z = tg_nn_batch_norm_add_relu(group, x, x);
    ASSERT_NE(z, nullptr) << tg_last_error();
    EXPECT_TRUE(values(z) == values(tg_relu(tg_add(tg_forward(group, x), x))));
    tg_clear_error();
    EXPECT_EQ(tg_nn_batch_norm_add_relu(nullptr, x, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_batch_norm_add_relu");
    tg_module_free(bn);
    tg_module_free(group);
}

} // namespace

TEST_F(MoreLayersTest, InterpolateGradcheckAndErrors) {
    tg_manual_seed(8);
    tg_tensor *x = tg_randn(TG_SHAPE(1, 2, 3, 4), tg_opts{TG_FLOAT64, TG_CPU, true});
    tg_interpolate_opts modes[] = {{.mode = TG_INTERP_BILINEAR, .scale_factor = {1.6, 2.2}},
                                   {.mode = TG_INTERP_BILINEAR, .size = {4, 3}, .align_corners = true},
                                   {.mode = TG_INTERP_NEAREST, .size = {5, 6}}};
    for (tg_interpolate_opts &o : modes) {
        tg_gradcheck_opts go = {};
        go.user = &o;
        EXPECT_EQ(tg_gradcheck(interpolate_fn, 1, &x, &go), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(interpolate_fn, 1, &x, &go), TG_OK) << tg_last_error();
    }
    tg_clear_error();
    EXPECT_EQ(tg_interpolate(tg_zeros(TG_SHAPE(2, 3, 4), tg_opts{}), tg_interpolate_opts{.size = {2}}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_interpolate: expected input [N, C, H, W] (4-D, every mode), got [2, 3, 4]");
    tg_clear_error();
    EXPECT_EQ(tg_interpolate(x, tg_interpolate_opts{.size = {2}, .scale_factor = {2}}), nullptr);
    EXPECT_ERROR_CONTAINS("only one of size or scale_factor should be defined");
    tg_clear_error();
    EXPECT_EQ(tg_interpolate(x, tg_interpolate_opts{.scale_factor = {0.1}}), nullptr);
    EXPECT_ERROR_CONTAINS("input [1, 2, 3, 4] and output size 0x0 must be non-empty");
    tg_clear_error();
    EXPECT_EQ(tg_interpolate(x, tg_interpolate_opts{.size = {2}, .align_corners = true}), nullptr);
    EXPECT_ERROR_CONTAINS("align_corners option can only be set with the interpolating modes");
    tg_clear_error();
    EXPECT_EQ(tg_nn_upsample(tg_interpolate_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_upsample: give exactly one of size");
}

TEST_F(MoreLayersTest, ConvStateDictsLoadBothWays) {
    // PyTorch's state (its names) into modules drawn from another seed, then out and back in
    tg_manual_seed(99);
    tg_module *c1 = tg_nn_conv1d(4, 6, 3, tg_conv_opts{.stride = 2, .padding = 1});
    tg_module *ct =
        tg_nn_conv_transpose2d(3, 4, 3, tg_conv_transpose_opts{.stride = 2, .padding = 1, .output_padding = 1});
    load_from_pytorch(c1, "conv1d", {"weight", "bias"});
    load_from_pytorch(ct, "conv_transpose", {"weight", "bias"});
    EXPECT_TRUE(tensor_near(tg_module_param(c1, "weight"), want("conv1d.weight"), 0));
    EXPECT_TRUE(tensor_near(tg_module_param(ct, "bias"), want("conv_transpose.bias"), 0));
    for (tg_module *m : {c1, ct}) {
        tg_tensor_map *map = tg_module_state_map(m);
        tg_module *fresh = tg_module_type_of(m) == tg_module_type_of(c1)
                               ? tg_nn_conv1d(4, 6, 3, tg_conv_opts{.stride = 2, .padding = 1})
                               : tg_nn_conv_transpose2d(
                                     3, 4, 3, tg_conv_transpose_opts{.stride = 2, .padding = 1, .output_padding = 1});
        EXPECT_EQ(tg_module_load_state_map(fresh, map, true, nullptr), TG_OK) << tg_last_error();
        EXPECT_TRUE(tensor_near(tg_module_param(fresh, "weight"), values(tg_module_param(m, "weight")), 0));
        tg_tensor_map_free(map);
        tg_module_free(fresh);
    }
    tg_module_free(c1);
    tg_module_free(ct);
}

// ---- GroupNorm ----

TEST_F(MoreLayersTest, GroupNormMatchesPyTorch) {
    for (const char *name : {"group_norm3d", "group_norm4d"}) {
        tg_module *m = tg_nn_group_norm(3, 6, tg_group_norm_opts{.eps = 1e-4});
        EXPECT_TRUE(tensor_near(tg_module_param(m, "weight"), std::vector<double>(6, 1.0), 0));
        EXPECT_TRUE(tensor_near(tg_module_param(m, "bias"), std::vector<double>(6, 0.0), 0));
        ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
        load_from_pytorch(m, name, {"weight", "bias"});
        check_case(m, name, 1e-12);
        tg_module_free(m);
    }
}

TEST_F(MoreLayersTest, GroupNormGradcheckAndErrors) {
    tg_module *m = tg_nn_group_norm(2, 4, tg_group_norm_opts{});
    TG_NO_GRAD {
        tg_copy_(tg_module_param(m, "weight"), tensor_f32({0.5, -1, 2, 1.5}, TG_SHAPE(4)));
        tg_copy_(tg_module_param(m, "bias"), tensor_f32({0.1, 0.2, -0.3, 0}, TG_SHAPE(4)));
    }
    gradcheck_module(m, TG_SHAPE(2, 4, 3));
    tg_clear_error();
    EXPECT_EQ(tg_forward(m, tg_zeros(TG_SHAPE(2, 3, 3), tg_opts{TG_FLOAT64})), nullptr);
    EXPECT_ERROR_CONTAINS("GroupNorm(2, 4): input [2, 3, 3] must be [N, 4, *]");
    tg_clear_error();
    EXPECT_EQ(tg_nn_group_norm(3, 4, tg_group_norm_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("num_channels=4 must be divisible by num_groups=3");
    tg_module *plain = tg_nn_group_norm(1, 4, tg_group_norm_opts{.no_affine = true});
    EXPECT_EQ(state_names(plain), std::vector<std::string>{});
    tg_module_free(plain);
    tg_module_free(m);
}

// ---- InstanceNorm2d ----

TEST_F(MoreLayersTest, InstanceNorm2dDefaultsMatchPyTorch) {
    tg_module *m = tg_nn_instance_norm2d(3, tg_instance_norm_opts{});
    EXPECT_EQ(state_names(m), std::vector<std::string>{}) << "affine=False, no running stats by default";
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    check_case(m, "instance_norm", 1e-12);
    // unbatched [C, H, W] and eval (no running stats: still the input's statistics)
    tg_eval(m);
    tg_tensor *x = f64("instance_norm.x");
    tg_tensor *first = tg_forward(m, tg_select(x, 0, 0));
    std::vector<double> y = want("instance_norm.y");
    EXPECT_EQ(dims(first), (std::vector<int64_t>{3, 4, 5}));
    EXPECT_TRUE(tensor_near(first, std::vector<double>(y.begin(), y.begin() + 60), 1e-12));
    tg_module_free(m);
}

TEST_F(MoreLayersTest, InstanceNorm2dAffineWithRunningStats) {
    tg_module *m =
        tg_nn_instance_norm2d(3, tg_instance_norm_opts{.momentum = 0.2, .affine = true, .track_running_stats = true});
    EXPECT_EQ(state_names(m),
              (std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}));
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    load_from_pytorch(m, "instance_norm_track", {"weight", "bias"});
    check_case(m, "instance_norm_track", 1e-12);
    EXPECT_TRUE(tensor_near(tg_module_buffer(m, "running_mean"), want("instance_norm_track.running_mean"), 1e-14));
    EXPECT_TRUE(tensor_near(tg_module_buffer(m, "running_var"), want("instance_norm_track.running_var"), 1e-14));
    EXPECT_TRUE(tensor_near(tg_module_buffer(m, "num_batches_tracked"), {0}, 0));
    tg_eval(m);
    EXPECT_TRUE(tensor_near(tg_forward(m, f64("instance_norm_track.x")), want("instance_norm_track.y_eval"), 1e-12));
    // the state dict goes to PyTorch under its names and back
    tg_tensor_map *map = tg_module_state_map(m);
    std::vector<std::string> keys;
    for (int64_t i = 0; i < tg_tensor_map_size(map); i++) keys.push_back(tg_tensor_map_name(map, i));
    EXPECT_EQ(keys, state_names(m));
    tg_module *copy = tg_nn_instance_norm2d(3, tg_instance_norm_opts{.affine = true, .track_running_stats = true});
    ASSERT_EQ(tg_module_cast(copy, TG_FLOAT64), TG_OK);
    EXPECT_EQ(tg_module_load_state_map(copy, map, true, nullptr), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_module_buffer(copy, "running_var"), want("instance_norm_track.running_var"), 1e-14));
    tg_tensor_map_free(map);
    tg_module_free(copy);
    tg_module_free(m);
}

TEST_F(MoreLayersTest, InstanceNorm2dGradcheckAndErrors) {
    tg_module *m = tg_nn_instance_norm2d(2, tg_instance_norm_opts{.affine = true});
    TG_NO_GRAD { tg_copy_(tg_module_param(m, "weight"), tensor_f32({0.5, -2}, TG_SHAPE(2))); }
    gradcheck_module(m, TG_SHAPE(2, 2, 3, 2));
    tg_clear_error();
    EXPECT_EQ(tg_forward(m, tg_zeros(TG_SHAPE(2, 3, 4, 4), tg_opts{TG_FLOAT64})), nullptr);
    EXPECT_ERROR_CONTAINS("InstanceNorm2d(2): input [2, 3, 4, 4] must be [N, 2, H, W] or [2, H, W]");
    tg_clear_error();
    EXPECT_EQ(tg_forward(m, tg_zeros(TG_SHAPE(2, 4), tg_opts{TG_FLOAT64})), nullptr);
    EXPECT_ERROR_CONTAINS("input [2, 4]");
    tg_clear_error();
    EXPECT_EQ(tg_nn_instance_norm2d(0, tg_instance_norm_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("num_features must be positive, got 0");
    tg_module_free(m);
}
