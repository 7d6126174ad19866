// The module system: names and order as PyTorch's named_parameters/state_dict,
// train/eval, moves and casts, freeing without leaks, the printed summary, and a
// user-defined module written against the public header only.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

std::vector<std::string> names_of(const tg_named_tensor *items, int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; i++) out.push_back(items[i].name);
    return out;
}

std::string summary_of(tg_module *m, tg_shape input) {
    char *buf = nullptr;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    tg_status status = tg_module_print(m, input, f);
    fclose(f);
    std::string s = buf ? buf : "";
    free(buf);
    EXPECT_EQ(status, TG_OK) << tg_last_error();
    return s;
}

// ---- a user module: y = fc2(tanh(fc1(x))) * scale, with its own parameter and state ----
struct UserState {
    int calls;
};

tg_tensor *user_forward(tg_module *self, tg_tensor *x) {
    UserState *s = (UserState *)tg_module_state(self);
    s->calls++;
    tg_tensor *h = tg_tanh(tg_forward(tg_module_child(self, "fc1"), x));
    return tg_mul(tg_forward(tg_module_child(self, "fc2"), h), tg_module_param(self, "scale"));
}

int user_frees = 0;
void user_free(tg_module *) { user_frees++; }
void user_repr(tg_module *, char *buf, size_t size) { snprintf(buf, size, "custom"); }

const tg_module_type user_type = {"TwoLayer", user_forward, user_free, user_repr};

tg_module *make_user_module() {
    tg_module *m = tg_module_new(&user_type, sizeof(UserState));
    tg_register_parameter(m, "scale", tg_full(TG_SHAPE(2), 2.0, tg_opts{}));
    tg_register_module(m, "fc1", tg_nn_linear(3, 4, tg_linear_opts{}));
    tg_register_module(m, "fc2", tg_nn_linear(4, 2, tg_linear_opts{}));
    tg_register_buffer(m, "calls_seen", tg_zeros(TG_SHAPE(1), tg_opts{}));
    return m;
}

tg_module *make_convnet() {
    tg_module *features =
        TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 4, 3, tg_conv_opts{.padding = 1}), tg_nn_batch_norm2d(4, tg_batch_norm_opts{}),
                         tg_nn_relu(), tg_nn_max_pool2d(tg_pool_opts{.kernel_size = 2}));
    tg_module *classifier = TG_NN_SEQUENTIAL(tg_nn_flatten(1, -1), tg_nn_linear(4 * 3 * 3, 5, tg_linear_opts{}));
    tg_module *net = TG_NN_SEQUENTIAL(features, classifier);
    return net;
}

} // namespace

class ModuleTest : public TgTest {};

TEST_F(ModuleTest, SequentialNamesMatchPyTorch) {
    tg_module *net = TG_NN_SEQUENTIAL(tg_nn_linear(4, 3, tg_linear_opts{}), tg_nn_relu(),
                                      tg_nn_linear(3, 2, tg_linear_opts{.no_bias = true}));
    ASSERT_NE(net, nullptr) << tg_last_error();
    int n = 0;
    const tg_named_tensor *params = tg_named_parameters(net, &n);
    EXPECT_EQ(names_of(params, n), (std::vector<std::string>{"0.weight", "0.bias", "2.weight"}));
    EXPECT_EQ(dims(params[0].tensor), (std::vector<int64_t>{3, 4}));
    EXPECT_EQ(dims(params[1].tensor), (std::vector<int64_t>{3}));
    EXPECT_EQ(dims(params[2].tensor), (std::vector<int64_t>{2, 3}));
    for (int i = 0; i < n; i++) {
        EXPECT_TRUE(tg_requires_grad(params[i].tensor));
        EXPECT_TRUE(tg_is_leaf(params[i].tensor));
    }
    int np = 0;
    tg_tensor *const *plain = tg_parameters(net, &np);
    ASSERT_EQ(np, 3);
    for (int i = 0; i < np; i++) EXPECT_EQ(plain[i], params[i].tensor);
    EXPECT_EQ(tg_module_num_params(net), 12 + 3 + 6);
    EXPECT_EQ(tg_module_get(net, "2.weight"), params[2].tensor);
    EXPECT_EQ(tg_module_get(net, "2.bias"), nullptr);
    EXPECT_EQ(tg_module_num_children(net), 3);
    const char *name = nullptr;
    EXPECT_NE(tg_module_child_at(net, 1, &name), nullptr);
    EXPECT_STREQ(name, "1");
    EXPECT_STREQ(tg_module_type_of(tg_module_child(net, "1"))->name, "ReLU");
    tg_module_free(net);
}

TEST_F(ModuleTest, NestedStateDictOrderMatchesPyTorch) {
    // nn.Sequential(nn.Sequential(Conv2d, BatchNorm2d, ReLU, MaxPool2d), nn.Sequential(Flatten, Linear))
    tg_module *net = make_convnet();
    ASSERT_NE(net, nullptr) << tg_last_error();
    int n = 0;
    const tg_named_tensor *params = tg_named_parameters(net, &n);
    EXPECT_EQ(names_of(params, n),
              (std::vector<std::string>{"0.0.weight", "0.0.bias", "0.1.weight", "0.1.bias", "1.1.weight", "1.1.bias"}));
    const tg_named_tensor *buffers = tg_named_buffers(net, &n);
    EXPECT_EQ(names_of(buffers, n),
              (std::vector<std::string>{"0.1.running_mean", "0.1.running_var", "0.1.num_batches_tracked"}));
    const tg_named_tensor *state = tg_state_dict(net, &n);
    EXPECT_EQ(names_of(state, n),
              (std::vector<std::string>{"0.0.weight", "0.0.bias", "0.1.weight", "0.1.bias", "0.1.running_mean",
                                        "0.1.running_var", "0.1.num_batches_tracked", "1.1.weight", "1.1.bias"}));
    tg_tensor *tracked = tg_module_get(net, "0.1.num_batches_tracked");
    ASSERT_NE(tracked, nullptr);
    EXPECT_EQ(tg_dtype_of(tracked), TG_INT64);
    EXPECT_EQ(tg_ndim(tracked), 0);
    EXPECT_FALSE(tg_requires_grad(tracked));
    EXPECT_TRUE(tensor_near(tg_module_get(net, "0.1.running_var"), {1, 1, 1, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_module_get(net, "0.1.running_mean"), {0, 0, 0, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_module_get(net, "0.1.weight"), {1, 1, 1, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_module_get(net, "0.1.bias"), {0, 0, 0, 0}, 0));
    tg_module_free(net);
}

TEST_F(ModuleTest, UserModuleNamesForwardAndFree) {
    user_frees = 0;
    tg_module *m = make_user_module();
    ASSERT_FALSE(tg_has_error()) << tg_last_error();
    int n = 0;
    const tg_named_tensor *state = tg_state_dict(m, &n);
    EXPECT_EQ(names_of(state, n),
              (std::vector<std::string>{"scale", "calls_seen", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
    tg_tensor *x = tensor_f32({1, 2, 3, -1, 0, 1}, TG_SHAPE(2, 3));
    tg_tensor *y = tg_forward(m, x);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(dims(y), (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(((UserState *)tg_module_state(m))->calls, 1);
    // Same as composing the functional ops by hand.
    tg_tensor *fc1w = tg_module_get(m, "fc1.weight"), *fc1b = tg_module_get(m, "fc1.bias");
    tg_tensor *fc2w = tg_module_get(m, "fc2.weight"), *fc2b = tg_module_get(m, "fc2.bias");
    tg_tensor *expected = tg_mul_scalar(tg_linear(tg_tanh(tg_linear(x, fc1w, fc1b)), fc2w, fc2b), 2.0);
    EXPECT_TRUE(tensor_near(y, values(expected), 1e-6));
    // Backward reaches every parameter.
    ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK) << tg_last_error();
    const tg_named_tensor *params = tg_named_parameters(m, &n);
    EXPECT_EQ(n, 5);
    for (int i = 0; i < n; i++) EXPECT_NE(tg_grad(params[i].tensor), nullptr) << params[i].name;
    tg_module_zero_grad(m);
    for (int i = 0; i < n; i++) EXPECT_EQ(tg_grad(params[i].tensor), nullptr) << params[i].name;
    // Registration errors name the module and the member.
    EXPECT_EQ(tg_register_parameter(m, "scale", tg_zeros(TG_SHAPE(1), tg_opts{})), TG_ERROR);
    EXPECT_ERROR_CONTAINS("TwoLayer: a member named \"scale\" already exists");
    EXPECT_EQ(tg_register_buffer(m, "a.b", tg_zeros(TG_SHAPE(1), tg_opts{})), TG_ERROR);
    EXPECT_ERROR_CONTAINS("contain no '.'");
    tg_module_free(m);
    EXPECT_EQ(user_frees, 1);
}

TEST_F(ModuleTest, ForwardResultBelongsToCallersScope) {
    tg_module *net =
        TG_NN_SEQUENTIAL(tg_nn_linear(3, 8, tg_linear_opts{}), tg_nn_relu(), tg_nn_linear(8, 2, tg_linear_opts{}));
    tg_tensor *x = tg_retain(tensor_f32({1, 2, 3}, TG_SHAPE(1, 3)));
    long before = tg_live_tensors();
    TG_SCOPE {
        tg_tensor *y = tg_forward(net, x);
        EXPECT_NE(y, nullptr);
    }
    EXPECT_EQ(tg_live_tensors(), before) << "the scope must free the forward's result and temporaries";
    // Outside any scope the caller owns the result.
    tg_scope_end();
    tg_tensor *y = tg_forward(net, x);
    tg_scope_begin();
    ASSERT_NE(y, nullptr) << tg_last_error();
    tg_release(y);
    tg_release(x);
    tg_module_free(net);
}

TEST_F(ModuleTest, TrainEvalIsRecursive) {
    tg_module *net = make_convnet();
    EXPECT_TRUE(tg_is_training(net));
    tg_eval(net);
    EXPECT_FALSE(tg_is_training(net));
    EXPECT_FALSE(tg_is_training(tg_module_child(tg_module_child(net, "0"), "1")));
    tg_train(net, true);
    EXPECT_TRUE(tg_is_training(tg_module_child(tg_module_child(net, "0"), "1")));
    // A child added to an eval-mode parent takes its mode.
    tg_module *seq = TG_NN_SEQUENTIAL(tg_nn_relu());
    tg_eval(seq);
    tg_nn_sequential_append(seq, tg_nn_dropout(0.5));
    EXPECT_FALSE(tg_is_training(tg_module_child(seq, "1")));
    tg_module_free(seq);
    tg_module_free(net);
}

TEST_F(ModuleTest, DropoutIsIdentityInEval) {
    tg_module *drop = tg_nn_dropout(0.5);
    tg_eval(drop);
    tg_tensor *x = tensor_f32({1, 2, 3, 4}, TG_SHAPE(4));
    tg_tensor *y = tg_forward(drop, x);
    EXPECT_TRUE(tensor_near(y, {1, 2, 3, 4}, 0)) << tg_last_error();
    tg_module_free(drop);
}

TEST_F(ModuleTest, CastAndMoveKeepTensorIdentity) {
    tg_module *net =
        TG_NN_SEQUENTIAL(tg_nn_linear(3, 2, tg_linear_opts{}), tg_nn_batch_norm1d(2, tg_batch_norm_opts{}));
    tg_tensor *w = tg_module_get(net, "0.weight");
    std::vector<double> before = values(w);
    ASSERT_EQ(tg_module_cast(net, TG_FLOAT64), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_module_get(net, "0.weight"), w);
    EXPECT_EQ(tg_dtype_of(w), TG_FLOAT64);
    EXPECT_TRUE(tg_requires_grad(w));
    EXPECT_TRUE(tensor_near(w, before, 0));
    EXPECT_EQ(tg_dtype_of(tg_module_get(net, "1.running_var")), TG_FLOAT64);
    EXPECT_EQ(tg_dtype_of(tg_module_get(net, "1.num_batches_tracked")), TG_INT64);
    // tg_to dispatches on the argument type.
    EXPECT_EQ(tg_to(net, TG_CPU), TG_OK);
    tg_tensor *moved = tg_to(w, TG_CPU);
    EXPECT_NE(moved, nullptr);
    // A float64 model runs on float64 input.
    tg_tensor *x = tensor_f64({1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3));
    tg_tensor *y = tg_forward(tg_module_child(net, "0"), x);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(y), TG_FLOAT64);
    tg_module_free(net);
}

TEST_F(ModuleTest, ErrorsNameTheLayerAndShapes) {
    tg_module *lin = tg_nn_linear(4, 2, tg_linear_opts{});
    tg_tensor *x = tensor_f32({1, 2, 3}, TG_SHAPE(1, 3));
    EXPECT_EQ(tg_forward(lin, x), nullptr);
    EXPECT_ERROR_CONTAINS("Linear(in_features=4, out_features=2): input [1, 3]");
    tg_clear_error();
    EXPECT_EQ(tg_forward(lin, nullptr), nullptr);
    EXPECT_TRUE(tg_has_error());
    tg_module_free(lin);

    tg_clear_error();
    tg_module *bad = TG_NN_SEQUENTIAL(tg_nn_relu(), tg_nn_dropout(2.0), tg_nn_tanh());
    EXPECT_EQ(bad, nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_dropout: p must be in [0, 1]");
    tg_clear_error();
    EXPECT_EQ(tg_nn_conv2d(3, 4, 3, tg_conv_opts{.groups = 2}), nullptr);
    EXPECT_ERROR_CONTAINS("divisible by groups");
}

TEST_F(ModuleTest, PrintSummary) {
    tg_module *net = TG_NN_SEQUENTIAL(tg_nn_flatten(1, -1), tg_nn_linear(784, 128, tg_linear_opts{}), tg_nn_relu(),
                                      tg_nn_linear(128, 10, tg_linear_opts{}));
    std::string s = summary_of(net, TG_SHAPE(1, 1, 28, 28));
    EXPECT_NE(s.find("Sequential (input [1, 1, 28, 28])"), std::string::npos) << s;
    EXPECT_NE(s.find("0 (Flatten)"), std::string::npos) << s;
    EXPECT_NE(s.find("[1, 784]"), std::string::npos) << s;
    EXPECT_NE(s.find("1 (Linear)"), std::string::npos) << s;
    EXPECT_NE(s.find("100480"), std::string::npos) << s;
    EXPECT_NE(s.find("3 (Linear)"), std::string::npos) << s;
    EXPECT_NE(s.find("1290"), std::string::npos) << s;
    EXPECT_NE(s.find("Output: [1, 10]"), std::string::npos) << s;
    EXPECT_NE(s.find("Total params: 101770"), std::string::npos) << s;
    EXPECT_NE(s.find("Trainable params: 101770"), std::string::npos) << s;
    // A failing layer shows "?" and the summary still prints.
    std::string bad = summary_of(net, TG_SHAPE(1, 5));
    EXPECT_NE(bad.find("1 (Linear)"), std::string::npos);
    EXPECT_NE(bad.find("?"), std::string::npos) << bad;
    tg_clear_error();
    tg_module_free(net);
}

TEST_F(ModuleTest, PrintNestedAndUserModules) {
    tg_module *m = make_user_module();
    std::string s = summary_of(m, TG_SHAPE(5, 3));
    EXPECT_NE(s.find("TwoLayer (input [5, 3])"), std::string::npos) << s;
    EXPECT_NE(s.find("fc1 (Linear)"), std::string::npos) << s;
    EXPECT_NE(s.find("[5, 4]"), std::string::npos) << s;
    EXPECT_NE(s.find("(own parameters)"), std::string::npos) << s;
    EXPECT_NE(s.find("Total params: 28"), std::string::npos) << s; // 2 + 16 + 10
    tg_module_free(m);
}

TEST_F(ModuleTest, FreeingReleasesEverything) {
    long before = tg_live_tensors();
    tg_scope_end(); // outside any scope: nothing is kept by a scope
    tg_module *net = TG_NN_SEQUENTIAL(
        tg_nn_linear(8, 8, tg_linear_opts{}), tg_nn_layer_norm(TG_SHAPE(8), tg_layer_norm_opts{}),
        tg_nn_embedding(10, 4, tg_embedding_opts{}), tg_nn_leaky_relu(0), tg_nn_gelu(), tg_nn_sigmoid());
    tg_scope_begin();
    ASSERT_NE(net, nullptr) << tg_last_error();
    EXPECT_GT(tg_live_tensors(), before);
    tg_module_free(net);
    EXPECT_EQ(tg_live_tensors(), before);
}

TEST_F(ModuleTest, BatchNormTracksBatchesAndFreezesInEval) {
    tg_module *bn = tg_nn_batch_norm1d(2, tg_batch_norm_opts{.cumulative = true});
    tg_tensor *a = tensor_f64({1, 10, 3, 20}, TG_SHAPE(2, 2)); // channel means 2, 15
    tg_tensor *b = tensor_f64({5, 0, 7, 2}, TG_SHAPE(2, 2));   // channel means 6, 1
    ASSERT_EQ(tg_module_cast(bn, TG_FLOAT64), TG_OK);
    ASSERT_NE(tg_forward(bn, a), nullptr) << tg_last_error();
    ASSERT_NE(tg_forward(bn, b), nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_module_get(bn, "num_batches_tracked"), {2}, 0));
    // momentum=None: the running mean is the plain average of the batch means.
    EXPECT_TRUE(tensor_near(tg_module_get(bn, "running_mean"), {4, 8}, 1e-12));
    std::vector<double> mean = values(tg_module_get(bn, "running_mean"));
    tg_eval(bn);
    tg_tensor *y = tg_forward(bn, a);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(values(tg_module_get(bn, "running_mean")), mean);
    EXPECT_TRUE(tensor_near(tg_module_get(bn, "num_batches_tracked"), {2}, 0));
    tg_module_free(bn);

    // TG_ZERO momentum: a real 0, the running statistics never move.
    tg_module *frozen = tg_nn_batch_norm1d(2, tg_batch_norm_opts{.momentum = TG_ZERO});
    ASSERT_NE(tg_forward(frozen, tensor_f32({1, 10, 3, 20}, TG_SHAPE(2, 2))), nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_module_get(frozen, "running_mean"), {0, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_module_get(frozen, "running_var"), {1, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_module_get(frozen, "num_batches_tracked"), {1}, 0));
    EXPECT_EQ(tg_forward(frozen, tensor_f32({1, 2, 3}, TG_SHAPE(1, 3))), nullptr);
    EXPECT_ERROR_CONTAINS("BatchNorm1d(2): input [1, 3]");
    tg_module_free(frozen);
}

TEST_F(ModuleTest, LayersMatchTheirFunctionalOps) {
    tg_manual_seed(3);
    tg_tensor *x = tg_randn(TG_SHAPE(2, 3, 6, 6), tg_opts{});
    tg_module *conv = tg_nn_conv2d(3, 4, 3, tg_conv_opts{.stride = 2, .padding = 1});
    tg_tensor *y = tg_forward(conv, x);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(dims(y), (std::vector<int64_t>{2, 4, 3, 3}));
    tg_tensor *ref = tg_conv2d(x, tg_module_param(conv, "weight"), tg_module_param(conv, "bias"),
                               tg_conv_opts{.stride = 2, .padding = 1});
    EXPECT_TRUE(tensor_near(y, values(ref), 0));
    tg_module *pool = tg_nn_avg_pool2d(tg_pool_opts{.kernel_size = 2});
    EXPECT_EQ(dims(tg_forward(pool, x)), (std::vector<int64_t>{2, 3, 3, 3}));
    tg_module *ln = tg_nn_layer_norm(TG_SHAPE(6), tg_layer_norm_opts{});
    EXPECT_TRUE(tensor_near(tg_forward(ln, x), values(tg_layer_norm(x, 1, nullptr, nullptr, 1e-5)), 1e-6));
    tg_module *emb = tg_nn_embedding(5, 2, tg_embedding_opts{});
    tg_tensor *rows = tg_forward(emb, tensor_i64({4, 0, 4}, TG_SHAPE(3)));
    ASSERT_NE(rows, nullptr) << tg_last_error();
    std::vector<double> w = values(tg_module_param(emb, "weight"));
    EXPECT_TRUE(tensor_near(rows, {w[8], w[9], w[0], w[1], w[8], w[9]}, 0));
    tg_module *leaky = tg_nn_leaky_relu(0);
    EXPECT_TRUE(tensor_near(tg_forward(leaky, tensor_f32({-100, 2}, TG_SHAPE(2))), {-1, 2}, 1e-6));
    tg_module_free(conv);
    tg_module_free(pool);
    tg_module_free(ln);
    tg_module_free(emb);
    tg_module_free(leaky);
}

static std::string extra_repr(tg_module *m) {
    char buf[128] = "";
    tg_module_type_of(m)->extra_repr(m, buf, sizeof buf);
    return buf;
}

// nn.Embedding(5, 2, padding_idx=-2): the padding row starts at zero (reset_parameters)
// and gets no gradient; the index is stored from 0 up, as PyTorch's repr shows it.
TEST_F(ModuleTest, EmbeddingPaddingIdx) {
    tg_manual_seed(4);
    tg_embedding_opts o = {};
    o.use_padding_idx = true;
    o.padding_idx = -2;
    tg_module *emb = tg_nn_embedding(5, 2, o);
    ASSERT_NE(emb, nullptr) << tg_last_error();
    EXPECT_EQ(extra_repr(emb), "5, 2, padding_idx=3");
    tg_tensor *w = tg_module_param(emb, "weight");
    std::vector<double> v = values(w);
    EXPECT_EQ(v[6], 0.0);
    EXPECT_EQ(v[7], 0.0);
    for (int i : {0, 1, 2, 3, 4, 5, 8, 9}) EXPECT_NE(v[i], 0.0) << i;
    tg_tensor *rows = tg_forward(emb, tensor_i64({3, 1, 3}, TG_SHAPE(3)));
    ASSERT_NE(rows, nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(rows, {0, 0, v[2], v[3], 0, 0}, 0));
    ASSERT_EQ(tg_backward(tg_sum(rows)), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(w), {0, 0, 1, 1, 0, 0, 0, 0, 0, 0}, 0));
    tg_module_free(emb);
    emb = tg_nn_embedding(5, 2, tg_embedding_opts{});
    EXPECT_EQ(extra_repr(emb), "5, 2");
    tg_module_free(emb);

    o.padding_idx = 5;
    tg_clear_error();
    EXPECT_EQ(tg_nn_embedding(5, 2, o), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_embedding: padding_idx 5 is out of range for 5 embeddings (expected -5 <= "
                          "padding_idx < 5)");
}

TEST_F(ModuleTest, MaxPoolDilation) {
    tg_module *pool = tg_nn_max_pool2d(tg_pool_opts{.kernel_size = 2, .stride = 1, .dilation = 2});
    ASSERT_NE(pool, nullptr) << tg_last_error();
    EXPECT_EQ(extra_repr(pool), "kernel_size=2, stride=1, padding=0, dilation=2");
    tg_tensor *x = tg_reshape(tg_arange(0, 16, 1, tg_opts{}), TG_SHAPE(1, 1, 4, 4));
    // taps (i, j), (i, j+2), (i+2, j), (i+2, j+2): the max is the last one
    EXPECT_TRUE(tensor_near(tg_forward(pool, x), {10, 11, 14, 15}, 0));
    tg_module_free(pool);
    tg_clear_error();
    EXPECT_EQ(tg_nn_avg_pool2d(tg_pool_opts{.kernel_size = 2, .dilation = 2}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_avg_pool2d: dilation=2 must be 0 or 1 (AvgPool2d has no dilation)");
    tg_clear_error();
    EXPECT_EQ(tg_nn_max_pool2d(tg_pool_opts{.kernel_size = 2, .dilation = -1}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_max_pool2d: dilation=-1 must be non-negative (0 means 1)");
}

namespace {
int hook_calls = 0;
tg_status scaling_hook(tg_module *m, tg_tensor **x, void *ctx) {
    hook_calls++;
    return tg_module_set_attr(m, "scale", tg_mul_scalar(*x, *(double *)ctx));
}
tg_status failing_hook(tg_module *m, tg_tensor **x, void *ctx) { return tg_error("failing_hook: refused"); }
int num_pre_hooks(const tg_module *m) {
    int n = 0;
    while (tg_forward_pre_hook_at(m, n, nullptr, nullptr).id) n++;
    return n;
}
} // namespace

TEST_F(ModuleTest, ForwardPreHooksAttributesAndUnregister) {
    tg_module *lin = tg_nn_linear(2, 2, tg_linear_opts{});
    double *factor = (double *)malloc(sizeof(double));
    *factor = 3.0;
    tg_hook_handle h = tg_register_forward_pre_hook_owned(lin, scaling_hook, factor, free); // lin frees factor
    ASSERT_NE(h.id, 0u);
    tg_forward_pre_hook_fn fn = nullptr;
    void *user = nullptr;
    EXPECT_EQ(tg_forward_pre_hook_at(lin, 0, &fn, &user).id, h.id);
    EXPECT_EQ(fn, scaling_hook);
    EXPECT_EQ(user, factor);
    hook_calls = 0;
    tg_tensor *x = tensor_f32({1, 2}, TG_SHAPE(1, 2));
    ASSERT_NE(tg_forward(lin, x), nullptr) << tg_last_error();
    EXPECT_EQ(hook_calls, 1);
    EXPECT_TRUE(tensor_near(tg_module_attr(lin, "scale"), {3, 6}, 0));
    EXPECT_EQ(tg_module_param(lin, "scale"), tg_module_attr(lin, "scale")); // getattr falls back
    int n = 0;
    tg_state_dict(lin, &n);
    EXPECT_EQ(n, 2); // attributes are not state

    tg_hook_handle failing = tg_register_forward_pre_hook(lin, failing_hook, nullptr);
    tg_clear_error();
    EXPECT_EQ(tg_forward(lin, x), nullptr);
    EXPECT_ERROR_CONTAINS("failing_hook: refused");
    EXPECT_TRUE(tg_hook_remove(failing));
    EXPECT_EQ(num_pre_hooks(lin), 1);
    EXPECT_FALSE(tg_hook_remove(failing)); // a second remove does nothing, as PyTorch's

    ASSERT_EQ(tg_module_set_attr(lin, "scale", nullptr), TG_OK);
    EXPECT_EQ(tg_module_attr(lin, "scale"), nullptr);
    ASSERT_EQ(tg_unregister_parameter(lin, "bias"), TG_OK);
    tg_state_dict(lin, &n);
    EXPECT_EQ(n, 1);
    tg_clear_error();
    EXPECT_EQ(tg_unregister_buffer(lin, "bias"), TG_ERROR);
    EXPECT_ERROR_CONTAINS("Linear: no buffer named \"bias\" to remove");
    tg_module_free(lin); // frees the remaining hook's ctx
}

TEST_F(ModuleTest, ReplaceChild) {
    tg_module *seq = TG_NN_SEQUENTIAL(tg_nn_linear(2, 2, tg_linear_opts{}), tg_nn_relu());
    tg_eval(seq);
    ASSERT_EQ(tg_module_replace_child(seq, "0", tg_nn_tanh()), TG_OK) << tg_last_error();
    EXPECT_STREQ(tg_module_type_of(tg_module_child(seq, "0"))->name, "Tanh");
    EXPECT_FALSE(tg_is_training(tg_module_child(seq, "0"))); // takes the parent's mode
    int n = 0;
    tg_state_dict(seq, &n);
    EXPECT_EQ(n, 0); // the Linear's members went with it
    tg_clear_error();
    EXPECT_EQ(tg_module_replace_child(seq, "7", tg_nn_relu()), TG_ERROR); // the new child is freed
    EXPECT_ERROR_CONTAINS("Sequential: no child module named \"7\" to replace");
    tg_clear_error();
    EXPECT_EQ(tg_module_replace_child(seq, "1", tg_module_child(seq, "0")), TG_ERROR);
    EXPECT_ERROR_CONTAINS("already has a parent");
    tg_module_free(seq);
}

// Conv2d with a non-square kernel, per-dim options, padding="same" and padding_mode:
// PyTorch's repr (strings from nn.Conv2d of 1.13), the weight's shape, and the forward
// equal to tg_conv2d with the module's own weight (the op's values are checked against
// PyTorch in tests/ops/conv_test.cc).
TEST_F(ModuleTest, Conv2dPerDimOptionsAndPaddingMode) {
    tg_manual_seed(6);
    tg_module *same = tg_nn_conv2d(
        2, 3, 0,
        tg_conv_opts{.no_bias = true, .padding_same = true, .padding_mode = TG_PAD_CIRCULAR, .kernel_sizes = {3, 1}});
    ASSERT_NE(same, nullptr) << tg_last_error();
    EXPECT_EQ(extra_repr(same),
              "2, 3, kernel_size=(3, 1), stride=(1, 1), padding=same, bias=False, padding_mode=circular");
    EXPECT_EQ(tg_shape_of(tg_module_get(same, "weight")).dims[2], 3);
    EXPECT_EQ(tg_shape_of(tg_module_get(same, "weight")).dims[3], 1);
    tg_module *strided =
        tg_nn_conv2d(2, 4, 3, tg_conv_opts{.groups = 2, .strides = {1, 2}, .paddings = {2, 0}, .dilations = {1, 2}});
    ASSERT_NE(strided, nullptr) << tg_last_error();
    EXPECT_EQ(extra_repr(strided),
              "2, 4, kernel_size=(3, 3), stride=(1, 2), padding=(2, 0), dilation=(1, 2), groups=2");
    TG_SCOPE {
        tg_tensor *x = tg_randn(TG_SHAPE(2, 2, 5, 6), tg_opts{});
        tg_tensor *y = tg_forward(same, x);
        ASSERT_NE(y, nullptr) << tg_last_error();
        EXPECT_EQ(tg_shape_of(y).dims[2], 5);
        EXPECT_EQ(tg_shape_of(y).dims[3], 6);
        tg_tensor *want = tg_conv2d(x, tg_module_get(same, "weight"), nullptr,
                                    tg_conv_opts{.padding_same = true, .padding_mode = TG_PAD_CIRCULAR});
        EXPECT_TRUE(tensor_near(y, values(want), 0));
    }
    EXPECT_EQ(tg_nn_conv2d(2, 3, 3, tg_conv_opts{.stride = 2, .padding_same = true}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_conv2d: padding='same' is not supported for strided convolutions (stride (2, 2))");
    tg_clear_error();
    EXPECT_EQ(tg_nn_conv2d(2, 3, 3, tg_conv_opts{.strides = {1, 0}}), nullptr);
    EXPECT_ERROR_CONTAINS("stride=(1, 0)");
    tg_module_free(same);
    tg_module_free(strided);
}

// nn.AdaptiveAvgPool2d: (1, 1) is the global average (the mean over H and W), other
// sizes the adaptive windows; values hand-computed.
TEST_F(ModuleTest, AdaptiveAvgPool2d) {
    tg_module *global = tg_nn_adaptive_avg_pool2d(1, 1), *two = tg_nn_adaptive_avg_pool2d(1, 2);
    ASSERT_NE(global, nullptr);
    EXPECT_EQ(extra_repr(global), "output_size=(1, 1)");
    TG_SCOPE {
        tg_tensor *x =
            tg_requires_grad_(tensor_f32({1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60}, TG_SHAPE(1, 2, 2, 3)), true);
        tg_tensor *y = tg_forward(global, x);
        ASSERT_NE(y, nullptr) << tg_last_error();
        EXPECT_EQ(tg_shape_of(y).ndim, 4);
        EXPECT_TRUE(tensor_near(y, {3.5, 35}, 1e-6));
        ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK);
        EXPECT_TRUE(tensor_near(tg_grad(x), std::vector<double>(12, 1.0 / 6), 1e-7));
        // Width 3 into 2: windows [0, 2) and [1, 3).
        EXPECT_TRUE(tensor_near(tg_forward(two, x), {3, 4, 30, 40}, 1e-6));
    }
    EXPECT_EQ(tg_nn_adaptive_avg_pool2d(0, 1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_adaptive_avg_pool2d: output_size=(0, 1) must be positive");
    tg_module_free(global);
    tg_module_free(two);
}

// A model that starts with an Embedding needs token ids: tg_module_print's float zeros
// make every row "?", tg_module_print_input runs the given int64 example.
TEST_F(ModuleTest, PrintWithAnExampleInputOfAnyDtype) {
    tg_module *m = TG_NN_SEQUENTIAL(tg_nn_embedding(10, 8, tg_embedding_opts{}), tg_nn_linear(8, 4, tg_linear_opts{}));
    ASSERT_NE(m, nullptr) << tg_last_error();
    std::string zeros = summary_of(m, TG_SHAPE(2, 5));
    EXPECT_NE(zeros.find("Output: ?"), std::string::npos) << zeros;
    tg_tensor *tokens = tensor_i64({1, 2, 3, 4, 5, 9, 8, 7, 6, 0}, TG_SHAPE(2, 5));
    char *buf = nullptr;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    tg_clear_error();
    EXPECT_EQ(tg_module_print_input(m, tokens, f), TG_OK) << tg_last_error();
    fclose(f);
    std::string s = buf ? buf : "";
    free(buf);
    EXPECT_NE(s.find("Sequential (input [2, 5] int64)"), std::string::npos) << s;
    EXPECT_NE(s.find("0 (Embedding)"), std::string::npos) << s;
    EXPECT_NE(s.find("[2, 5, 8]"), std::string::npos) << s;
    EXPECT_NE(s.find("Output: [2, 5, 4]"), std::string::npos) << s;
    EXPECT_EQ(s.find('?'), std::string::npos) << s;
    EXPECT_STREQ(tg_last_error(), "");
    EXPECT_TRUE(tg_is_training(m)); // the mode is put back
    EXPECT_EQ(values(tokens), (std::vector<double>{1, 2, 3, 4, 5, 9, 8, 7, 6, 0}));
    EXPECT_EQ(tg_module_print_input(m, nullptr, stdout), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_module_print_input");
    tg_module_free(m);
}

// MaxPool2d / AvgPool2d with per-dim sizes: PyTorch's repr (a tuple where the dims
// differ), the windows (values hand-computed), the errors.
TEST_F(ModuleTest, PoolPerDimOptions) {
    tg_module *pool = tg_nn_max_pool2d(tg_pool_opts{.kernel_sizes = {2, 1}, .strides = {2, 1}});
    ASSERT_NE(pool, nullptr) << tg_last_error();
    EXPECT_EQ(extra_repr(pool), "kernel_size=(2, 1), stride=(2, 1), padding=0");
    TG_SCOPE {
        tg_tensor *x = tg_reshape(tg_arange(0, 8, 1, tg_opts{}), TG_SHAPE(1, 1, 4, 2));
        // rows {0,1} and {2,3}, one column each: the lower row's element
        EXPECT_TRUE(tensor_near(tg_forward(pool, x), {2, 3, 6, 7}, 0));
    }
    tg_module_free(pool);
    EXPECT_EQ(tg_nn_avg_pool2d(tg_pool_opts{.kernel_sizes = {2, 3}, .dilations = {1, 2}}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_avg_pool2d: dilation=(1, 2) must be 0 or 1 (AvgPool2d has no dilation)");
    tg_clear_error();
    EXPECT_EQ(tg_nn_max_pool2d(tg_pool_opts{.kernel_sizes = {2, 3}, .paddings = {0, 2}}), nullptr);
    EXPECT_ERROR_CONTAINS("kernel_size=(2, 3) must be positive, stride=0 non-negative and padding=(0, 2) at most half");
}
