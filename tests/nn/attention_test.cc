// tg_scaled_dot_product_attention (PyTorch 2's semantics; fixtures from the explicit
// formula) and MultiheadAttention against PyTorch 1.13's nn.MultiheadAttention
// (tests/fixtures/gen_attention.py): outputs, weights and gradients, the same seed's
// initial weights, key_padding_mask, bool and float attn_mask, batch_first, per-head
// weights, dropout in training, no bias, unbatched input; gradchecks, state-dict
// names, bad inputs.
#include <cmath>
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/attention.txt");
    return f;
}
tg_tensor *f64(const std::string &name, bool grad = false) { return fixture_tensor(fx(), name).make(TG_FLOAT64, grad); }
std::vector<double> want(const std::string &name) { return fixture_tensor(fx(), name).data; }

class AttentionTest : public TgTest {};

} // namespace

TEST_F(AttentionTest, ScaledDotProductAttentionMatchesTheFormula) {
    struct Case {
        const char *name;
        int mask; // 0 none, 1 float, 2 bool
        bool causal;
    };
    for (Case c : {Case{"plain", 0, false}, Case{"float_mask", 1, false}, Case{"bool_mask", 2, false},
                   Case{"causal", 0, true}}) {
        std::string n = std::string("sdpa_") + c.name;
        tg_tensor *q = f64("sdpa.q", true), *k = f64("sdpa.k", true), *v = f64("sdpa.v", true);
        tg_tensor *mask = c.mask == 1   ? f64("sdpa.float_mask")
                          : c.mask == 2 ? fixture_tensor(fx(), "sdpa.bool_mask").make(TG_BOOL)
                                        : nullptr;
        tg_tensor *y = tg_scaled_dot_product_attention(q, k, v, mask, 0.0, c.causal);
        ASSERT_NE(y, nullptr) << tg_last_error();
        EXPECT_TRUE(tensor_near(y, want(n + ".y"), 1e-13)) << n;
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, f64(n + ".g")))), TG_OK);
        EXPECT_TRUE(tensor_near(tg_grad(q), want(n + ".q_grad"), 1e-13)) << n;
        EXPECT_TRUE(tensor_near(tg_grad(k), want(n + ".k_grad"), 1e-13)) << n;
        EXPECT_TRUE(tensor_near(tg_grad(v), want(n + ".v_grad"), 1e-13)) << n;
    }
}

namespace {
tg_tensor *sdpa_fn(tg_tensor *const *in, void *user) {
    return tg_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.0, user != nullptr);
}
} // namespace

TEST_F(AttentionTest, ScaledDotProductAttentionGradcheckDropoutAndErrors) {
    tg_manual_seed(2);
    tg_opts o = {TG_FLOAT64, TG_CPU, true};
    tg_tensor *in[] = {tg_randn(TG_SHAPE(2, 3, 4), o), tg_randn(TG_SHAPE(2, 5, 4), o), tg_randn(TG_SHAPE(2, 5, 3), o),
                       tg_randn(TG_SHAPE(3, 5), o)};
    tg_gradcheck_opts go = {};
    EXPECT_EQ(tg_gradcheck(sdpa_fn, 4, in, &go), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_gradgradcheck(sdpa_fn, 4, in, &go), TG_OK) << tg_last_error();
    // dropout: the weights are F.dropout's (zero or scaled by 1/(1-p)) of the plain ones
    tg_tensor *plain = nullptr, *dropped = nullptr;
    tg_attention_with_weights(in[0], in[1], in[2], nullptr, 0.0, false, &plain);
    tg_manual_seed(9);
    tg_tensor *y = tg_attention_with_weights(in[0], in[1], in[2], nullptr, 0.5, false, &dropped);
    ASSERT_TRUE(y && plain && dropped) << tg_last_error();
    tg_manual_seed(9);
    tg_tensor *mask = tg_dropout(tg_ones_like(plain), 0.5, true);
    EXPECT_TRUE(tensor_near(dropped, values(tg_mul(plain, mask)), 1e-15));
    EXPECT_TRUE(tensor_near(y, values(tg_matmul(dropped, in[2])), 1e-14));

    tg_clear_error();
    EXPECT_EQ(tg_scaled_dot_product_attention(in[0], in[2], in[1], nullptr, 0, false), nullptr);
    EXPECT_ERROR_CONTAINS("expected query [..., L, E], key [..., S, E] and value [..., S, Ev], got query [2, 3, 4], "
                          "key [2, 5, 3], value [2, 5, 4]");
    tg_clear_error();
    EXPECT_EQ(tg_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0, true), nullptr);
    EXPECT_ERROR_CONTAINS("is_causal and attn_mask are exclusive");
    tg_clear_error();
    EXPECT_EQ(
        tg_scaled_dot_product_attention(in[0], in[1], in[2], tg_zeros(TG_SHAPE(4, 5), tg_opts{TG_FLOAT64}), 0, false),
        nullptr);
    EXPECT_ERROR_CONTAINS("attn_mask [4, 5] (float64) must be bool or floating, on the query's device, and broadcast "
                          "to the scores [..., 3, 5]");
    tg_clear_error();
    EXPECT_EQ(tg_scaled_dot_product_attention(in[0], in[1], in[2], nullptr, 1.0, false), nullptr);
    EXPECT_ERROR_CONTAINS("dropout_p must be in [0, 1), got 1");
}

namespace {
struct MhaCase {
    const char *name;
    uint64_t seed;
    tg_module *(*make)();
    bool self_attention, train, per_head, kpm, attn_mask;
};

void check_mha(const MhaCase &c) {
    SCOPED_TRACE(c.name);
    std::string n = c.name;
    tg_manual_seed(c.seed);
    tg_module *m = c.make();
    ASSERT_NE(m, nullptr) << tg_last_error();
    int count = 0;
    const tg_named_tensor *params = tg_named_parameters(m, &count);
    for (int i = 0; i < count; i++)
        EXPECT_TRUE(tensor_near(params[i].tensor, want(n + "." + params[i].name), 0)) << "init " << params[i].name;
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    tg_train(m, c.train);
    std::vector<tg_tensor *> in;
    if (c.self_attention) {
        tg_tensor *x = f64(n + ".in0", true);
        in = {x, x, x};
    } else {
        for (int k = 0; k < 3; k++) in.push_back(f64(n + ".in" + std::to_string(k), true));
    }
    tg_mha_call_opts o = {};
    if (c.kpm) o.key_padding_mask = fixture_tensor(fx(), n + ".key_padding_mask").make(TG_BOOL);
    if (c.attn_mask) {
        const FixtureTensor &f = fixture_tensor(fx(), n + ".attn_mask");
        o.attn_mask = f.make(f.dtype == "bool" ? TG_BOOL : TG_FLOAT64);
    }
    o.per_head_weights = c.per_head;
    tg_manual_seed(c.seed + 1000);
    tg_tensor *out = nullptr, *weights = nullptr;
    ASSERT_EQ(tg_mha_forward(m, in[0], in[1], in[2], o, &out, &weights), TG_OK) << tg_last_error();
    EXPECT_EQ(dims(out), fixture_tensor(fx(), n + ".out").shape);
    EXPECT_EQ(dims(weights), fixture_tensor(fx(), n + ".weights").shape);
    EXPECT_TRUE(tensor_near(out, want(n + ".out"), 1e-12));
    EXPECT_TRUE(tensor_near(weights, want(n + ".weights"), 1e-12));
    tg_tensor *loss = tg_add(tg_sum(tg_mul(out, f64(n + ".g_out"))), tg_sum(tg_mul(weights, f64(n + ".g_weights"))));
    ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
    for (int k = 0; k < (c.self_attention ? 1 : 3); k++)
        EXPECT_TRUE(tensor_near(tg_grad(in[k]), want(n + ".in" + std::to_string(k) + "_grad"), 1e-12)) << k;
    params = tg_named_parameters(m, &count);
    for (int i = 0; i < count; i++)
        EXPECT_TRUE(tensor_near(tg_grad(params[i].tensor), want(n + "." + params[i].name + "_grad"), 1e-12))
            << params[i].name;
    tg_module_free(m);
}
} // namespace

TEST_F(AttentionTest, MultiheadAttentionMatchesPyTorch) {
    const MhaCase cases[] = {
        {"mha_cross", 11, [] { return tg_nn_multihead_attention(8, 2, tg_mha_opts{}); }, false, false, false, true,
         true},
        {"mha_self_batch_first", 17, [] { return tg_nn_multihead_attention(6, 3, tg_mha_opts{.batch_first = true}); },
         true, false, true, false, true},
        {"mha_dropout_nobias", 18,
         [] { return tg_nn_multihead_attention(4, 2, tg_mha_opts{.dropout = 0.25, .no_bias = true}); }, false, true,
         false, false, false},
        {"mha_unbatched", 22, [] { return tg_nn_multihead_attention(4, 1, tg_mha_opts{}); }, false, false, false, false,
         false},
    };
    for (const MhaCase &c : cases) check_mha(c);
}

TEST_F(AttentionTest, MultiheadAttentionStateDictForwardAndErrors) {
    tg_module *m = tg_nn_multihead_attention(4, 2, tg_mha_opts{});
    int n = 0;
    const tg_named_tensor *sd = tg_state_dict(m, &n);
    std::vector<std::string> names;
    for (int i = 0; i < n; i++) names.push_back(sd[i].name);
    EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
    EXPECT_TRUE(tensor_near(tg_module_get(m, "out_proj.bias"), {0, 0, 0, 0}, 0));
    // tg_forward is self-attention's output
    tg_manual_seed(1);
    tg_tensor *x = tg_randn(TG_SHAPE(3, 2, 4), tg_opts{});
    tg_tensor *out = nullptr;
    ASSERT_EQ(tg_mha_forward(m, x, x, x, tg_mha_call_opts{}, &out, nullptr), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_forward(m, x), values(out), 0));

    tg_clear_error();
    EXPECT_EQ(tg_mha_forward(m, x, tg_zeros(TG_SHAPE(5, 3, 4), tg_opts{}), tg_zeros(TG_SHAPE(5, 3, 4), tg_opts{}),
                             tg_mha_call_opts{}, &out, nullptr),
              TG_ERROR);
    EXPECT_ERROR_CONTAINS("MultiheadAttention(embed_dim=4, num_heads=2): query [3, 2, 4], key [5, 3, 4] and value "
                          "[5, 3, 4] must be [L, B, E], [S, B, E], [S, B, E]");
    EXPECT_EQ(out, nullptr);
    tg_clear_error();
    tg_mha_call_opts bad = {};
    bad.attn_mask = tg_zeros(TG_SHAPE(3, 4), tg_opts{});
    EXPECT_EQ(tg_mha_forward(m, x, x, x, bad, &out, nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("attn_mask [3, 4] (float32) must be bool or floating, [3, 3] or [4, 3, 3]");
    tg_clear_error();
    bad = {};
    bad.key_padding_mask = tg_zeros(TG_SHAPE(2, 3), tg_opts{});
    EXPECT_EQ(tg_mha_forward(m, x, x, x, bad, &out, nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("key_padding_mask [2, 3] (float32) must be bool [2, 3]");
    tg_module *relu = tg_nn_relu();
    tg_clear_error();
    EXPECT_EQ(tg_mha_forward(relu, x, x, x, tg_mha_call_opts{}, &out, nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("the module is ReLU, not a MultiheadAttention");
    tg_clear_error();
    EXPECT_EQ(tg_nn_multihead_attention(6, 4, tg_mha_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("embed_dim=6 must be divisible by num_heads=4");
    tg_module_free(relu);
    tg_module_free(m);
}

TEST_F(AttentionTest, MultiheadAttentionLoadsPyTorchsStateDict) {
    tg_manual_seed(99);
    tg_module *m = tg_nn_multihead_attention(8, 2, tg_mha_opts{});
    tg_tensor_map *from_torch = tg_tensor_map_new();
    for (const char *k : {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"})
        tg_tensor_map_set(from_torch, k, fixture_tensor(fx(), std::string("mha_cross.") + k).make(TG_FLOAT32));
    ASSERT_EQ(tg_module_load_state_map(m, from_torch, true, "PyTorch"), TG_OK) << tg_last_error();
    tg_tensor_map_free(from_torch);
    tg_tensor_map *mine = tg_module_state_map(m);
    tg_module *fresh = tg_nn_multihead_attention(8, 2, tg_mha_opts{});
    ASSERT_EQ(tg_module_load_state_map(fresh, mine, true, nullptr), TG_OK) << tg_last_error();
    tg_tensor_map_free(mine);
    EXPECT_TRUE(tensor_near(tg_module_get(fresh, "in_proj_weight"), want("mha_cross.in_proj_weight"), 0));
    EXPECT_TRUE(tensor_near(tg_module_get(fresh, "out_proj.weight"), want("mha_cross.out_proj.weight"), 0));
    tg_module_free(fresh);
    tg_module_free(m);
}

namespace {
tg_tensor *mha_fn(tg_tensor *const *in, void *user) {
    tg_tensor *out = nullptr, *w = nullptr;
    if (tg_mha_forward(static_cast<tg_module *>(user), in[0], in[1], in[2], tg_mha_call_opts{}, &out, &w))
        return nullptr;
    return tg_add(tg_sum(tg_square(out)), tg_sum(tg_mul(w, w)));
}
} // namespace

TEST_F(AttentionTest, MultiheadAttentionGradcheck) {
    tg_manual_seed(3);
    tg_module *m = tg_nn_multihead_attention(4, 2, tg_mha_opts{});
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    TG_NO_GRAD { // non-zero biases, so that their gradients are exercised at a generic point
        tg_copy_(tg_module_get(m, "in_proj_bias"), tg_randn(TG_SHAPE(12), tg_opts{TG_FLOAT64}));
    }
    tg_opts o = {TG_FLOAT64, TG_CPU, true};
    tg_tensor *in[] = {tg_randn(TG_SHAPE(3, 2, 4), o), tg_randn(TG_SHAPE(2, 2, 4), o), tg_randn(TG_SHAPE(2, 2, 4), o)};
    tg_gradcheck_opts go = {};
    go.user = m;
    EXPECT_EQ(tg_gradcheck(mha_fn, 3, in, &go), TG_OK) << tg_last_error();
    tg_module_free(m);
}

// is_causal (PyTorch 2's hint) without a mask gives what the explicit causal mask of
// PyTorch 1.13's fixture gives: through the fused op's causal path (no weights, no other
// mask) and through the mask path (weights asked for, a key padding mask, appended keys).
// The mask itself made as a new user makes it, tg_triu of a bool tensor, is accepted.
TEST_F(AttentionTest, MultiheadAttentionIsCausal) {
    const std::string n = "mha_self_batch_first";
    tg_manual_seed(17);
    tg_module *m = tg_nn_multihead_attention(6, 3, tg_mha_opts{.batch_first = true});
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    tg_eval(m);
    tg_tensor *x = f64(n + ".in0", true);
    tg_tensor *triu = tg_triu(tg_ones(TG_SHAPE(4, 4), tg_opts{TG_BOOL}), 1);
    ASSERT_EQ(tg_dtype_of(triu), TG_BOOL);
    tg_mha_call_opts causal = {}, masked = {};
    causal.is_causal = true, causal.per_head_weights = true;
    masked.attn_mask = triu, masked.per_head_weights = true;
    tg_tensor *out = nullptr, *w = nullptr, *out_mask = nullptr, *w_mask = nullptr;
    ASSERT_EQ(tg_mha_forward(m, x, x, x, causal, &out, &w), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_mha_forward(m, x, x, x, masked, &out_mask, &w_mask), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(out, want(n + ".out"), 1e-12));
    EXPECT_TRUE(tensor_near(w, want(n + ".weights"), 1e-12));
    EXPECT_TRUE(tensor_near(out_mask, want(n + ".out"), 1e-12));
    EXPECT_TRUE(tensor_near(w_mask, want(n + ".weights"), 1e-12));
    // the fused path: the same output, and the gradients of the mask path
    tg_tensor *fused = nullptr;
    ASSERT_EQ(tg_mha_forward(m, x, x, x, causal, &fused, nullptr), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(fused, want(n + ".out"), 1e-12));
    tg_tensor *g = f64(n + ".g_out");
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(fused, g))), TG_OK) << tg_last_error();
    std::vector<double> x_grad = values(tg_grad(x)), w_grad = values(tg_grad(tg_module_get(m, "in_proj_weight")));
    tg_zero_grad(x);
    tg_module_zero_grad(m);
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(out_mask, g))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), x_grad, 1e-12));
    EXPECT_TRUE(tensor_near(tg_grad(tg_module_get(m, "in_proj_weight")), w_grad, 1e-12));
    // with a key padding mask: the two masks merged, as the explicit mask would be
    tg_tensor *kpm = tg_gt_scalar(tg_rand(TG_SHAPE(2, 4), tg_opts{}), 0.6);
    causal.key_padding_mask = kpm, masked.key_padding_mask = kpm;
    ASSERT_EQ(tg_mha_forward(m, x, x, x, causal, &out, nullptr), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_mha_forward(m, x, x, x, masked, &out_mask, nullptr), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(out, values(out_mask), 1e-12));
    tg_module_free(m);
    // appended keys (add_bias_kv, add_zero_attn) stay visible, as PyTorch pads the mask
    tg_module *kv =
        tg_nn_multihead_attention(6, 3, tg_mha_opts{.batch_first = true, .add_bias_kv = true, .add_zero_attn = true});
    ASSERT_NE(kv, nullptr) << tg_last_error();
    ASSERT_EQ(tg_module_cast(kv, TG_FLOAT64), TG_OK);
    causal = {}, masked = {};
    causal.is_causal = true, masked.attn_mask = triu;
    ASSERT_EQ(tg_mha_forward(kv, x, x, x, causal, &out, nullptr), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_mha_forward(kv, x, x, x, masked, &out_mask, nullptr), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(out, values(out_mask), 1e-12));
    tg_module_free(kv);
}
