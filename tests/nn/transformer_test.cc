// Transformer layers and stacks against PyTorch 1.13 (tests/fixtures/gen_transformer.py):
// encoder and decoder layers, post- and pre-norm, relu/gelu/gelu_tanh, batch_first or not,
// with a causal mask and key padding masks, in eval mode and float64: outputs, input and
// parameter gradients; is_causal without a mask gives the explicit mask's values; the
// stacks' copies, final norm and generator; state-dict names; bad inputs.
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/transformer.txt");
    return f;
}
tg_tensor *f64(const std::string &name, bool grad = false) { return fixture_tensor(fx(), name).make(TG_FLOAT64, grad); }
tg_tensor *mask(const std::string &name) {
    const FixtureTensor &f = fixture_tensor(fx(), name);
    return f.make(f.dtype == "bool" ? TG_BOOL : TG_FLOAT64);
}
std::vector<double> want(const std::string &name) { return fixture_tensor(fx(), name).data; }

class TransformerTest : public TgTest {};

struct LayerCase {
    bool decoder, norm_first, batch_first;
    tg_transformer_activation act;
};

std::string case_name(const LayerCase &c) {
    static const char *const acts[] = {"relu", "gelu", "gelu_tanh"};
    return std::string(c.decoder ? "dec" : "enc") + (c.norm_first ? "_pre_" : "_post_") + acts[c.act] +
           (c.batch_first ? "_bf" : "_sf");
}

// Runs m on the case's inputs (causal: is_causal instead of the explicit mask) and checks
// the output and every gradient against the fixture.
void check_run(tg_module *m, const std::string &n, bool decoder, bool causal) {
    SCOPED_TRACE(n + (causal ? " (is_causal)" : ""));
    tg_module_zero_grad(m);
    tg_tensor *in0 = f64(n + ".in0", true), *in1 = decoder ? f64(n + ".in1", true) : nullptr, *out;
    if (decoder) {
        tg_transformer_decoder_call_opts o = {};
        if (causal) o.tgt_is_causal = true;
        else o.tgt_mask = mask("causal_float");
        o.tgt_key_padding_mask = mask("tgt_kpm");
        o.memory_key_padding_mask = mask("kpm");
        out = tg_transformer_decoder_forward(m, in0, in1, o);
    } else {
        tg_transformer_encoder_call_opts o = {};
        if (causal) o.is_causal = true;
        else o.mask = mask("causal_bool");
        o.key_padding_mask = mask("kpm");
        out = tg_transformer_encoder_forward(m, in0, o);
    }
    ASSERT_NE(out, nullptr) << tg_last_error();
    EXPECT_EQ(dims(out), fixture_tensor(fx(), n + ".out").shape);
    EXPECT_TRUE(tensor_near(out, want(n + ".out"), 1e-12, 1e-10));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(out, f64(n + ".g")))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(in0), want(n + ".in0_grad"), 1e-12, 1e-10));
    if (decoder) {
        EXPECT_TRUE(tensor_near(tg_grad(in1), want(n + ".in1_grad"), 1e-12, 1e-10));
    }
    int count = 0;
    const tg_named_tensor *params = tg_named_parameters(m, &count);
    for (int i = 0; i < count; i++)
        EXPECT_TRUE(tensor_near(tg_grad(params[i].tensor), want(n + "." + params[i].name + "_grad"), 1e-12, 1e-10))
            << params[i].name;
}

} // namespace

TEST_F(TransformerTest, LayersMatchPyTorch) {
    int cases = 0;
    for (bool decoder : {false, true})
        for (bool norm_first : {false, true})
            for (tg_transformer_activation act : {TG_TRANSFORMER_RELU, TG_TRANSFORMER_GELU, TG_TRANSFORMER_GELU_TANH})
                for (bool batch_first : {false, true}) {
                    if (act == TG_TRANSFORMER_GELU_TANH && !norm_first) continue;
                    LayerCase c = {decoder, norm_first, batch_first, act};
                    std::string n = case_name(c);
                    tg_manual_seed(1);
                    tg_transformer_layer_opts o = {};
                    o.dim_feedforward = 8, o.activation = act, o.batch_first = batch_first, o.norm_first = norm_first;
                    tg_module *m =
                        decoder ? tg_nn_transformer_decoder_layer(4, 2, o) : tg_nn_transformer_encoder_layer(4, 2, o);
                    ASSERT_NE(m, nullptr) << tg_last_error();
                    int count = 0;
                    const tg_named_tensor *params = tg_named_parameters(m, &count);
                    EXPECT_EQ(count, decoder ? 18 : 12);
                    for (int i = 0; i < count; i++)
                        EXPECT_TRUE(tensor_near(params[i].tensor,
                                                want(std::string(decoder ? "dec" : "enc") + ".init." + params[i].name),
                                                0))
                            << n << " init " << params[i].name;
                    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
                    tg_eval(m);
                    check_run(m, n, decoder, false);
                    check_run(m, n, decoder, true);
                    tg_module_free(m);
                    cases++;
                }
    EXPECT_EQ(cases, 20);
}

TEST_F(TransformerTest, StacksCopyTheLayerAsPyTorch) {
    for (bool decoder : {false, true}) {
        std::string n = decoder ? "dec_stack" : "enc_stack";
        SCOPED_TRACE(n);
        tg_transformer_layer_opts o = {};
        o.dim_feedforward = 8;
        if (decoder) o.activation = TG_TRANSFORMER_GELU, o.batch_first = true;
        else o.norm_first = true;
        tg_manual_seed(decoder ? 7 : 5);
        tg_module *layer =
            decoder ? tg_nn_transformer_decoder_layer(4, 2, o) : tg_nn_transformer_encoder_layer(4, 2, o);
        tg_module *norm = tg_nn_layer_norm(TG_SHAPE(4), tg_layer_norm_opts{});
        tg_module *m = decoder ? tg_nn_transformer_decoder(layer, 2, norm) : tg_nn_transformer_encoder(layer, 2, norm);
        ASSERT_NE(m, nullptr) << tg_last_error();
        // the copies drew nothing: the generator is where PyTorch's deepcopy leaves it
        EXPECT_TRUE(tensor_near(tg_rand(TG_SHAPE(3), tg_opts{}), want(n + ".rand_after"), 0));
        int count = 0;
        const tg_named_tensor *params = tg_named_parameters(m, &count);
        EXPECT_EQ(count, decoder ? 38 : 26);
        for (int i = 0; i < count; i++)
            EXPECT_TRUE(tensor_near(params[i].tensor, want(n + ".init." + params[i].name), 0)) << params[i].name;
        // the copies are tensors of their own
        EXPECT_NE(tg_module_get(m, "layers.0.linear1.weight"), tg_module_get(m, "layers.1.linear1.weight"));
        ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
        tg_eval(m);
        check_run(m, n, decoder, false);
        check_run(m, n, decoder, true);
        tg_module_free(m);
    }
}

TEST_F(TransformerTest, NamesDefaultsTrainingAndErrors) {
    tg_module *m = tg_nn_transformer_encoder_layer(8, 2, tg_transformer_layer_opts{});
    ASSERT_NE(m, nullptr) << tg_last_error();
    int n = 0;
    const tg_named_tensor *sd = tg_state_dict(m, &n);
    std::vector<std::string> names;
    for (int i = 0; i < n; i++) names.push_back(sd[i].name);
    EXPECT_EQ(names, (std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                               "self_attn.out_proj.weight", "self_attn.out_proj.bias", "linear1.weight",
                                               "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight",
                                               "norm1.bias", "norm2.weight", "norm2.bias"}));
    EXPECT_EQ(dims(tg_module_get(m, "linear1.weight")), (std::vector<int64_t>{2048, 8})); // dim_feedforward 2048
    // training: dropout 0.1 in the attention, after it, in and after the feed-forward;
    // the same seed gives the same output, eval gives the plain one
    tg_manual_seed(3);
    tg_tensor *x = tg_randn(TG_SHAPE(5, 2, 8), tg_opts{});
    tg_manual_seed(4);
    tg_tensor *a = tg_forward(m, x);
    tg_manual_seed(4);
    tg_tensor *b = tg_forward(m, x);
    ASSERT_TRUE(a && b) << tg_last_error();
    EXPECT_TRUE(tensor_near(a, values(b), 0));
    tg_eval(m);
    tg_tensor *c = tg_forward(m, x);
    EXPECT_FALSE(tensor_near(c, values(a), 1e-6));
    EXPECT_TRUE(tensor_near(tg_transformer_encoder_forward(m, x, tg_transformer_encoder_call_opts{}), values(c), 0));

    tg_clear_error();
    EXPECT_EQ(tg_forward(m, tg_zeros(TG_SHAPE(5, 2, 6), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("TransformerEncoderLayer(d_model=8, nhead=2): src [5, 2, 6] must be sequence-first "
                          "[S, B, 8] (or unbatched [S, 8])");
    tg_clear_error();
    tg_transformer_encoder_call_opts bad = {};
    bad.key_padding_mask = tg_zeros(TG_SHAPE(2, 4), tg_opts{TG_BOOL});
    EXPECT_EQ(tg_transformer_encoder_forward(m, x, bad), nullptr);
    EXPECT_ERROR_CONTAINS("key_padding_mask [2, 4] (bool) must be bool [2, 5]");
    tg_clear_error();
    EXPECT_EQ(tg_transformer_decoder_forward(m, x, x, tg_transformer_decoder_call_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("the module is TransformerEncoderLayer, not a TransformerDecoderLayer or TransformerDecoder");
    tg_clear_error();
    EXPECT_EQ(tg_nn_transformer_encoder_layer(6, 4, tg_transformer_layer_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_transformer_encoder_layer: d_model=6 must be divisible by nhead=4");
    tg_clear_error();
    EXPECT_EQ(tg_nn_transformer_decoder(m, 2, nullptr), nullptr); // takes m and frees it
    EXPECT_ERROR_CONTAINS("tg_nn_transformer_decoder: needs a TransformerDecoderLayer (got TransformerEncoderLayer)");

    tg_module *d = tg_nn_transformer_decoder_layer(8, 2, tg_transformer_layer_opts{.dim_feedforward = 16});
    ASSERT_NE(d, nullptr) << tg_last_error();
    EXPECT_NE(tg_module_child(d, "multihead_attn"), nullptr);
    EXPECT_NE(tg_module_child(d, "norm3"), nullptr);
    tg_clear_error();
    EXPECT_EQ(tg_forward(d, x), nullptr);
    EXPECT_ERROR_CONTAINS("TransformerDecoderLayer: the forward needs the memory too");
    tg_clear_error();
    EXPECT_EQ(tg_nn_transformer_decoder(d, 0, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("num_layers >= 1 (got 0)");
}
