// PyTorch module options (tests/fixtures/gen_module_options.py, PyTorch 1.13):
// ConvTranspose2d's forward(input, output_size), LSTM's proj_size, MultiheadAttention's
// kdim / vdim (q/k/v_proj_weight), add_bias_kv and add_zero_attn, and Upsample's
// bicubic mode. Each: the same seed gives PyTorch's weights and names, outputs and
// gradients (inputs, states, every parameter) match in float64, float64 gradchecks, and
// bad inputs fail with PyTorch's message.
#include <functional>
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/module_options.txt");
    return f;
}
tg_tensor *f64(const std::string &name, bool grad = false) { return fixture_tensor(fx(), name).make(TG_FLOAT64, grad); }
std::vector<double> want(const std::string &name) { return fixture_tensor(fx(), name).data; }

std::vector<std::string> param_names(tg_module *m) {
    int n = 0;
    const tg_named_tensor *p = tg_named_parameters(m, &n);
    std::vector<std::string> out;
    for (int i = 0; i < n; i++) out.push_back(p[i].name);
    return out;
}

// Makes the module after tg_manual_seed(seed), checks its parameters' names, shapes and
// values against PyTorch's, casts it to float64, runs `run` on the case's inputs in{k}
// and checks outputs out{k} and the gradients of sum(out_k * g_k).
using Run = std::function<std::vector<tg_tensor *>(tg_module *, const std::vector<tg_tensor *> &)>;
void check_case(const std::string &n, uint64_t seed, const std::function<tg_module *()> &make, int inputs,
                const std::vector<std::string> &names, const Run &run, double tol = 1e-12) {
    SCOPED_TRACE(n);
    tg_manual_seed(seed);
    tg_module *m = make();
    ASSERT_NE(m, nullptr) << tg_last_error();
    EXPECT_EQ(param_names(m), names);
    int count = 0;
    const tg_named_tensor *params = tg_named_parameters(m, &count);
    for (int i = 0; i < count; i++) {
        EXPECT_EQ(dims(params[i].tensor), fixture_tensor(fx(), n + "." + params[i].name).shape) << params[i].name;
        EXPECT_TRUE(tensor_near(params[i].tensor, want(n + "." + params[i].name), 0)) << "init " << params[i].name;
    }
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    std::vector<tg_tensor *> in;
    for (int k = 0; k < inputs; k++) in.push_back(f64(n + ".in" + std::to_string(k), true));
    std::vector<tg_tensor *> outs = run(m, in);
    ASSERT_FALSE(outs.empty()) << tg_last_error();
    tg_tensor *loss = nullptr;
    for (size_t k = 0; k < outs.size(); k++) {
        std::string key = n + ".out" + std::to_string(k);
        ASSERT_NE(outs[k], nullptr) << key << ": " << tg_last_error();
        EXPECT_EQ(dims(outs[k]), fixture_tensor(fx(), key).shape) << key;
        EXPECT_TRUE(tensor_near(outs[k], want(key), tol)) << key;
        tg_tensor *term = tg_sum(tg_mul(outs[k], f64(n + ".g" + std::to_string(k))));
        loss = loss ? tg_add(loss, term) : term;
    }
    ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
    for (int k = 0; k < inputs; k++)
        EXPECT_TRUE(tensor_near(tg_grad(in[k]), want(n + ".in" + std::to_string(k) + "_grad"), tol)) << "in" << k;
    params = tg_named_parameters(m, &count);
    for (int i = 0; i < count; i++)
        EXPECT_TRUE(tensor_near(tg_grad(params[i].tensor), want(n + "." + params[i].name + "_grad"), tol))
            << params[i].name << " grad";
    tg_module_free(m);
}

} // namespace

// ---- ConvTranspose2d.forward(input, output_size) ----

TEST_F(TgTest, ConvTranspose2dOutputSizeMatchesPyTorch) {
    // output_padding inferred per dim: 2 on H, 1 on W (4 sizes: the leading N, C ignored)
    check_case(
        "convt_size", 31,
        [] { return tg_nn_conv_transpose2d(3, 4, 3, tg_conv_transpose_opts{.stride = 3, .padding = 1}); }, 1,
        {"weight", "bias"},
        [](tg_module *m, const std::vector<tg_tensor *> &in) {
            const int64_t size[4] = {2, 4, 12, 14};
            return std::vector<tg_tensor *>{tg_nn_conv_transpose2d_forward_size(m, in[0], size, 4)};
        });
    check_case(
        "convt_size_unbatched", 33,
        [] {
            return tg_nn_conv_transpose2d(2, 3, 2, tg_conv_transpose_opts{.stride = 2, .dilation = 2, .no_bias = true});
        },
        1, {"weight"},
        [](tg_module *m, const std::vector<tg_tensor *> &in) {
            const int64_t size[3] = {5, 7, 8}; // [C, H, W] for a 3-D input; C ignored
            return std::vector<tg_tensor *>{tg_nn_conv_transpose2d_forward_size(m, in[0], size, 3)};
        });
}

TEST_F(TgTest, ConvTranspose2dOutputSizeTwoSizesGradcheckAndErrors) {
    tg_manual_seed(31);
    tg_module *m = tg_nn_conv_transpose2d(3, 4, 3, tg_conv_transpose_opts{.stride = 3, .padding = 1});
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    tg_tensor *x = f64("convt_size.in0");
    const int64_t hw[2] = {12, 14};
    EXPECT_TRUE(tensor_near(tg_nn_conv_transpose2d_forward_size(m, x, hw, 2), want("convt_size.out0"), 1e-12));
    // the functional form, with output_padding in opts ignored as PyTorch ignores the module's
    tg_conv_transpose_opts o = {.stride = 3, .padding = 1, .output_padding = 2};
    tg_tensor *y = tg_conv_transpose2d_to_size(x, tg_module_param(m, "weight"), tg_module_param(m, "bias"), o, 12, 14);
    EXPECT_TRUE(tensor_near(y, want("convt_size.out0"), 1e-12));
    // the smallest size is output_padding 0: the plain forward
    EXPECT_TRUE(tensor_near(tg_conv_transpose2d_to_size(x, tg_module_param(m, "weight"), nullptr, o, 10, 13),
                            values(tg_conv_transpose2d(x, tg_module_param(m, "weight"), nullptr,
                                                       tg_conv_transpose_opts{.stride = 3, .padding = 1})),
                            0));

    tg_opts f64o = {TG_FLOAT64, TG_CPU, true};
    tg_tensor *in[] = {tg_randn(TG_SHAPE(1, 2, 2, 3), f64o), tg_randn(TG_SHAPE(2, 3, 2, 2), f64o),
                       tg_randn(TG_SHAPE(3), f64o)};
    tg_gradcheck_opts go = {};
    auto fn = [](tg_tensor *const *t, void *) {
        return tg_conv_transpose2d_to_size(t[0], t[1], t[2], tg_conv_transpose_opts{.stride = 2}, 5, 6);
    };
    EXPECT_EQ(tg_gradcheck(fn, 3, in, &go), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_gradgradcheck(fn, 3, in, &go), TG_OK) << tg_last_error();

    tg_clear_error();
    const int64_t big[2] = {13, 14};
    EXPECT_EQ(tg_nn_conv_transpose2d_forward_size(m, x, big, 2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_conv_transpose2d_to_size: requested an output size of [13, 14], but valid sizes range "
                          "from [10, 13] to [12, 15] (for an input of [4, 5])");
    tg_clear_error();
    const int64_t small[2] = {12, 12};
    EXPECT_EQ(tg_nn_conv_transpose2d_forward_size(m, x, small, 2), nullptr);
    EXPECT_ERROR_CONTAINS("requested an output size of [12, 12], but valid sizes range from [10, 13] to [12, 15]");
    tg_clear_error();
    const int64_t three[3] = {4, 12, 14};
    EXPECT_EQ(tg_nn_conv_transpose2d_forward_size(m, x, three, 3), nullptr);
    EXPECT_ERROR_CONTAINS("ConvTranspose2D: for 4D input, output_size must have 2 or 4 elements (got 3)");
    tg_clear_error();
    EXPECT_EQ(tg_nn_conv_transpose2d_forward_size(m, x, nullptr, 0), nullptr);
    EXPECT_ERROR_CONTAINS("output_size must have 2 or 4 elements (got 0)");
    tg_clear_error();
    EXPECT_EQ(tg_nn_conv_transpose2d_forward_size(m, tg_zeros(TG_SHAPE(2, 2, 4, 5), tg_opts{TG_FLOAT64}), hw, 2),
              nullptr);
    EXPECT_ERROR_CONTAINS("ConvTranspose2d(3, 4, kernel_size=3): input [2, 2, 4, 5] must be [N, 3, H, W]");
    tg_module *relu = tg_nn_relu();
    tg_clear_error();
    EXPECT_EQ(tg_nn_conv_transpose2d_forward_size(relu, x, hw, 2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_conv_transpose2d_forward_size: expected a ConvTranspose2d module, got ReLU");
    tg_module_free(relu);
    tg_module_free(m);
}

// ---- LSTM proj_size ----

namespace {
Run lstm_run(bool with_state) {
    return [with_state](tg_module *m, const std::vector<tg_tensor *> &in) {
        tg_rnn_result r;
        if (tg_rnn_forward(m, in[0], with_state ? in[1] : nullptr, with_state ? in[2] : nullptr, &r))
            return std::vector<tg_tensor *>{};
        return std::vector<tg_tensor *>{r.output, r.h_n, r.c_n};
    };
}
std::vector<std::string> lstm_names(int layers, bool bidirectional, bool bias) {
    std::vector<std::string> out;
    for (int l = 0; l < layers; l++)
        for (int d = 0; d < (bidirectional ? 2 : 1); d++) {
            std::string suffix = "_l" + std::to_string(l) + (d ? "_reverse" : "");
            for (const char *w : {"weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"})
                if (bias || std::string(w).rfind("bias", 0) != 0) out.push_back(w + suffix);
        }
    return out;
}
} // namespace

TEST_F(TgTest, LstmProjSizeMatchesPyTorch) {
    check_case(
        "lstm_proj", 41,
        [] { return tg_nn_lstm(5, 6, tg_rnn_opts{.num_layers = 2, .bidirectional = true, .proj_size = 3}); }, 3,
        lstm_names(2, true, true), lstm_run(true));
    check_case(
        "lstm_proj_bf", 45,
        [] { return tg_nn_lstm(4, 5, tg_rnn_opts{.no_bias = true, .batch_first = true, .proj_size = 2}); }, 1,
        lstm_names(1, false, false), lstm_run(false));
    check_case(
        "lstm_proj_unbatched", 47, [] { return tg_nn_lstm(3, 4, tg_rnn_opts{.proj_size = 1}); }, 1,
        lstm_names(1, false, true), lstm_run(false));
}

TEST_F(TgTest, LstmProjSizeGradcheckStatesAndErrors) {
    tg_manual_seed(5);
    tg_module *m = tg_nn_lstm(3, 4, tg_rnn_opts{.num_layers = 2, .proj_size = 2});
    ASSERT_NE(m, nullptr) << tg_last_error();
    char repr[256];
    tg_module_type_of(m)->extra_repr(m, repr, sizeof repr);
    EXPECT_NE(std::string(repr).find("proj_size=2"), std::string::npos) << repr;
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    tg_opts o = {TG_FLOAT64, TG_CPU, true};
    tg_tensor *in[] = {tg_randn(TG_SHAPE(3, 2, 3), o), tg_randn(TG_SHAPE(2, 2, 2), o), tg_randn(TG_SHAPE(2, 2, 4), o)};
    tg_gradcheck_opts go = {};
    go.user = m;
    auto fn = [](tg_tensor *const *t, void *user) -> tg_tensor * {
        tg_rnn_result r;
        if (tg_rnn_forward(static_cast<tg_module *>(user), t[0], t[1], t[2], &r)) return nullptr;
        return tg_add(tg_add(tg_sum(tg_square(r.output)), tg_sum(r.h_n)), tg_sum(tg_square(r.c_n)));
    };
    EXPECT_EQ(tg_gradcheck(fn, 3, in, &go), TG_OK) << tg_last_error();

    tg_rnn_result r;
    tg_clear_error(); // h0 has the projection's size, c0 the hidden size
    EXPECT_EQ(tg_rnn_forward(m, in[0], in[2], in[2], &r), TG_ERROR);
    EXPECT_ERROR_CONTAINS("LSTM(3, 4): h0 [2, 2, 4] must be [2, 2, 2]");
    tg_clear_error();
    EXPECT_EQ(tg_rnn_forward(m, in[0], in[1], in[1], &r), TG_ERROR);
    EXPECT_ERROR_CONTAINS("LSTM(3, 4): c0 [2, 2, 2] must be [2, 2, 4]");
    tg_clear_error();
    EXPECT_EQ(tg_nn_lstm(3, 4, tg_rnn_opts{.proj_size = 4}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_lstm: proj_size has to be smaller than hidden_size (got proj_size=4, hidden_size=4)");
    tg_clear_error();
    EXPECT_EQ(tg_nn_lstm(3, 4, tg_rnn_opts{.proj_size = -1}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_lstm: proj_size should be a positive integer or zero to disable projections");
    tg_clear_error();
    EXPECT_EQ(tg_nn_gru(3, 4, tg_rnn_opts{.proj_size = 2}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_gru: proj_size argument is only supported for LSTM, not RNN or GRU");
    tg_clear_error();
    EXPECT_EQ(tg_nn_lstm_cell(3, 4, tg_rnn_opts{.proj_size = 2}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_lstm_cell: proj_size argument is only supported for LSTM");
    tg_module_free(m);
}

// ---- MultiheadAttention kdim / vdim, add_bias_kv, add_zero_attn ----

namespace {
Run mha_run(const std::string &n, bool kpm, bool attn_mask, bool per_head) {
    return [=](tg_module *m, const std::vector<tg_tensor *> &in) {
        tg_mha_call_opts o = {};
        if (kpm) o.key_padding_mask = fixture_tensor(fx(), n + ".key_padding_mask").make(TG_BOOL);
        if (attn_mask) {
            const FixtureTensor &f = fixture_tensor(fx(), n + ".attn_mask");
            o.attn_mask = f.make(f.dtype == "bool" ? TG_BOOL : TG_FLOAT64);
        }
        o.per_head_weights = per_head;
        tg_tensor *out = nullptr, *weights = nullptr;
        if (tg_mha_forward(m, in[0], in[1], in[2], o, &out, &weights)) return std::vector<tg_tensor *>{};
        return std::vector<tg_tensor *>{out, weights};
    };
}
} // namespace

TEST_F(TgTest, MultiheadAttentionOptionsMatchPyTorch) {
    check_case(
        "mha_kdim", 51, [] { return tg_nn_multihead_attention(8, 2, tg_mha_opts{.kdim = 5, .vdim = 3}); }, 3,
        {"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"},
        mha_run("mha_kdim", true, false, false));
    check_case(
        "mha_bias_kv_zero", 55,
        [] { return tg_nn_multihead_attention(6, 3, tg_mha_opts{.add_bias_kv = true, .add_zero_attn = true}); }, 3,
        {"in_proj_weight", "in_proj_bias", "bias_k", "bias_v", "out_proj.weight", "out_proj.bias"},
        mha_run("mha_bias_kv_zero", true, true, false));
    check_case(
        "mha_kdim_bias_kv", 60,
        [] {
            return tg_nn_multihead_attention(
                4, 2, tg_mha_opts{.no_bias = true, .batch_first = true, .kdim = 3, .vdim = 5, .add_bias_kv = true});
        },
        3, {"q_proj_weight", "k_proj_weight", "v_proj_weight", "bias_k", "bias_v", "out_proj.weight"},
        mha_run("mha_kdim_bias_kv", false, false, true));
    check_case(
        "mha_zero_attn_bool", 64, [] { return tg_nn_multihead_attention(4, 1, tg_mha_opts{.add_zero_attn = true}); }, 3,
        {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"},
        mha_run("mha_zero_attn_bool", false, true, false));
}

TEST_F(TgTest, MultiheadAttentionOptionsGradcheckStateDictAndErrors) {
    tg_manual_seed(8);
    tg_module *m =
        tg_nn_multihead_attention(4, 2, tg_mha_opts{.kdim = 3, .vdim = 2, .add_bias_kv = true, .add_zero_attn = true});
    ASSERT_NE(m, nullptr) << tg_last_error();
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    TG_NO_GRAD { // non-zero biases, so that their gradients are exercised at a generic point
        tg_copy_(tg_module_get(m, "in_proj_bias"), tg_randn(TG_SHAPE(12), tg_opts{TG_FLOAT64}));
    }
    tg_opts o = {TG_FLOAT64, TG_CPU, true};
    tg_tensor *in[] = {tg_randn(TG_SHAPE(3, 2, 4), o), tg_randn(TG_SHAPE(2, 2, 3), o), tg_randn(TG_SHAPE(2, 2, 2), o)};
    tg_gradcheck_opts go = {};
    go.user = m;
    auto fn = [](tg_tensor *const *t, void *user) -> tg_tensor * {
        tg_tensor *out = nullptr, *w = nullptr;
        if (tg_mha_forward(static_cast<tg_module *>(user), t[0], t[1], t[2], tg_mha_call_opts{}, &out, &w))
            return nullptr;
        return tg_add(tg_sum(tg_square(out)), tg_sum(tg_mul(w, w)));
    };
    EXPECT_EQ(tg_gradcheck(fn, 3, in, &go), TG_OK) << tg_last_error();

    // PyTorch's state dict loads strictly under its names
    tg_module *fresh = tg_nn_multihead_attention(8, 2, tg_mha_opts{.kdim = 5, .vdim = 3});
    tg_tensor_map *from_torch = tg_tensor_map_new();
    for (const char *k :
         {"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"})
        tg_tensor_map_set(from_torch, k, fixture_tensor(fx(), std::string("mha_kdim.") + k).make(TG_FLOAT32));
    EXPECT_EQ(tg_module_load_state_map(fresh, from_torch, true, "PyTorch"), TG_OK) << tg_last_error();
    tg_tensor_map_free(from_torch);
    EXPECT_TRUE(tensor_near(tg_module_get(fresh, "k_proj_weight"), want("mha_kdim.k_proj_weight"), 0));
    tg_module_free(fresh);

    tg_tensor *out = nullptr;
    tg_clear_error(); // the key has embed_dim features, not kdim
    EXPECT_EQ(tg_mha_forward(m, in[0], in[0], in[2], tg_mha_call_opts{}, &out, nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("MultiheadAttention(embed_dim=4, num_heads=2): query [3, 2, 4], key [3, 2, 4] and value "
                          "[2, 2, 2] must be [L, B, E], [S, B, kdim=3], [S, B, vdim=2]");
    EXPECT_EQ(out, nullptr);
    tg_clear_error(); // masks are given for the S keys the caller passed
    tg_mha_call_opts bad = {};
    bad.key_padding_mask = tg_zeros(TG_SHAPE(2, 4), tg_opts{TG_BOOL});
    EXPECT_EQ(tg_mha_forward(m, in[0], in[1], in[2], bad, &out, nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("key_padding_mask [2, 4] (bool) must be bool [2, 2]");
    tg_clear_error();
    EXPECT_EQ(tg_nn_multihead_attention(4, 2, tg_mha_opts{.kdim = -1}), nullptr);
    EXPECT_ERROR_CONTAINS("kdim=-1 and vdim=0 positive (or 0: embed_dim)");
    tg_module_free(m);
}

// ---- Upsample bicubic ----

TEST_F(TgTest, UpsampleBicubicMatchesPyTorch) {
    struct Case {
        const char *name;
        tg_interpolate_opts opts;
    } cases[] = {
        {"x2", {TG_INTERP_BICUBIC, {0, 0}, {2, 0}, false}},
        {"x2_ac", {TG_INTERP_BICUBIC, {0, 0}, {2, 0}, true}},
        {"size_ac", {TG_INTERP_BICUBIC, {5, 7}, {0, 0}, true}},
        {"frac", {TG_INTERP_BICUBIC, {0, 0}, {1.7, 0.6}, false}},
        {"down", {TG_INTERP_BICUBIC, {2, 3}, {0, 0}, false}},
        {"same_h", {TG_INTERP_BICUBIC, {3, 9}, {0, 0}, false}},
    };
    for (const Case &c : cases) {
        std::string n = std::string("bicubic_") + c.name;
        tg_interpolate_opts opts = c.opts;
        check_case(
            n, 0, [opts] { return tg_nn_upsample(opts); }, 1, {},
            [opts](tg_module *m, const std::vector<tg_tensor *> &in) {
                return std::vector<tg_tensor *>{tg_forward(m, in[0])};
            });
        // float32: weights computed in float, as ATen's opmath type; the sums of positive and
        // negative taps differ from PyTorch's in a few float ulps of the terms (the largest
        // difference seen is 2.0e-6; float64 above agrees to 1e-12)
        tg_tensor *y32 = tg_interpolate(fixture_tensor(fx(), n + ".in0").make(TG_FLOAT32), opts);
        ASSERT_NE(y32, nullptr) << tg_last_error();
        EXPECT_EQ(tg_dtype_of(y32), TG_FLOAT32);
        EXPECT_TRUE(tensor_near(y32, want(n + ".out32"), 1e-5)) << n;
    }
}

TEST_F(TgTest, UpsampleBicubicGradcheckSameSizeAndErrors) {
    tg_opts o = {TG_FLOAT64, TG_CPU, true};
    tg_tensor *x = tg_randn(TG_SHAPE(1, 2, 3, 4), o);
    tg_gradcheck_opts go = {};
    for (bool ac : {false, true}) {
        go.user = &ac;
        auto fn = [](tg_tensor *const *t, void *user) {
            tg_interpolate_opts opts = {TG_INTERP_BICUBIC, {5, 3}, {0, 0}, *static_cast<bool *>(user)};
            return tg_interpolate(t[0], opts);
        };
        EXPECT_EQ(tg_gradcheck(fn, 1, &x, &go), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(fn, 1, &x, &go), TG_OK) << tg_last_error();
    }
    // both sizes unchanged: the input's values (ATen copies)
    tg_tensor *same = tg_interpolate(x, tg_interpolate_opts{TG_INTERP_BICUBIC, {3, 4}, {0, 0}, false});
    EXPECT_TRUE(tensor_near(same, values(x), 0));
    tg_module *up = tg_nn_upsample(tg_interpolate_opts{TG_INTERP_BICUBIC, {0, 0}, {2, 0}, true});
    char repr[128];
    tg_module_type_of(up)->extra_repr(up, repr, sizeof repr);
    EXPECT_NE(std::string(repr).find("mode='bicubic'"), std::string::npos) << repr;
    tg_module_free(up);
    tg_clear_error();
    EXPECT_EQ(tg_interpolate(x, tg_interpolate_opts{(tg_interp_mode)7, {3, 4}, {0, 0}, false}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_interpolate: unknown mode 7 (TG_INTERP_NEAREST, TG_INTERP_BILINEAR or "
                          "TG_INTERP_BICUBIC)");
    tg_clear_error();
    EXPECT_EQ(tg_interpolate(tg_zeros(TG_SHAPE(2, 3, 4), tg_opts{TG_FLOAT64}),
                             tg_interpolate_opts{TG_INTERP_BICUBIC, {3, 4}, {0, 0}, false}),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_interpolate: expected input [N, C, H, W] (4-D, every mode), got [2, 3, 4]");
    tg_clear_error();
    EXPECT_EQ(tg_interpolate(tg_zeros(TG_SHAPE(1, 1, 2, 2), tg_opts{TG_INT64}),
                             tg_interpolate_opts{TG_INTERP_BICUBIC, {3, 4}, {0, 0}, false}),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_interpolate: expected a floating input, got int64");
}
