// Random tensors, dropout and initialisers: PyTorch's numbers for the same seed
// (tests/fixtures/gen_random.py), determinism, moments of large samples, bounds, the
// generator's state, and bad inputs.

#include <algorithm>

#include "test_util.h"

namespace {

struct Moments {
    double mean, std, min, max;
};

Moments moments(tg_tensor *t) {
    std::vector<double> v = values(t);
    double s = 0, ss = 0, mn = INFINITY, mx = -INFINITY;
    for (double x : v) {
        s += x;
        mn = std::min(mn, x);
        mx = std::max(mx, x);
    }
    double m = s / v.size();
    for (double x : v) ss += (x - m) * (x - m);
    return {m, std::sqrt(ss / v.size()), mn, mx};
}

const std::map<std::string, FixtureTensor> &random_fixtures() {
    static const std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/random.txt");
    return fx;
}

// t holds PyTorch's numbers for fixture `name`, to the last bit.
::testing::AssertionResult same_as_torch(const std::string &name, tg_tensor *t) {
    if (!t) return ::testing::AssertionFailure() << name << ": NULL (" << tg_last_error() << ")";
    const FixtureTensor &f = fixture_tensor(random_fixtures(), name);
    std::vector<double> v = values(t);
    if (v.size() != f.data.size())
        return ::testing::AssertionFailure() << name << ": " << v.size() << " values, PyTorch has " << f.data.size();
    for (size_t i = 0; i < v.size(); i++)
        if (v[i] != f.data[i])
            return ::testing::AssertionFailure() << name << "[" << i << "] = " << v[i] << ", PyTorch: " << f.data[i];
    return ::testing::AssertionSuccess();
}

const tg_opts F32 = {TG_FLOAT32, TG_CPU, false}, F64 = {TG_FLOAT64, TG_CPU, false};

TEST_F(TgTest, UniformDrawsAreTorchsForTheSameSeed) {
    tg_manual_seed(1);
    EXPECT_TRUE(same_as_torch("rand_f32", tg_rand(TG_SHAPE(1000), F32)));
    tg_manual_seed(2);
    EXPECT_TRUE(same_as_torch("rand_f64", tg_rand(TG_SHAPE(501), F64)));
    tg_manual_seed(3);
    tg_tensor *u = tg_empty(TG_SHAPE(777), F32), *v = tg_empty(TG_SHAPE(333), F64);
    ASSERT_EQ(tg_uniform_(u, -3, 5), TG_OK);
    ASSERT_EQ(tg_uniform_(v, -0.25, 2), TG_OK);
    EXPECT_TRUE(same_as_torch("uniform_f32", u));
    EXPECT_TRUE(same_as_torch("uniform_f64", v));
}

TEST_F(TgTest, NormalDrawsAreTorchsForTheSameSeed) {
    for (int n : {5, 16, 20, 1000}) {
        tg_manual_seed(4);
        EXPECT_TRUE(same_as_torch("randn_f32_" + std::to_string(n), tg_randn(TG_SHAPE(n), F32)));
    }
    for (int n : {3, 16, 37}) {
        tg_manual_seed(5);
        EXPECT_TRUE(same_as_torch("randn_f64_" + std::to_string(n), tg_randn(TG_SHAPE(n), F64)));
    }
    tg_manual_seed(6);
    tg_tensor *a = tg_empty(TG_SHAPE(100), F32), *b = tg_empty(TG_SHAPE(100), F64);
    ASSERT_EQ(tg_normal_(a, 2, 0.5), TG_OK);
    ASSERT_EQ(tg_normal_(b, -1, 3), TG_OK);
    EXPECT_TRUE(same_as_torch("normal_f32", a));
    EXPECT_TRUE(same_as_torch("normal_f64", b));
    // Fewer than 16 elements: Box-Muller pairs, the second value kept for the next call
    // (of any normal draw) until tg_manual_seed.
    tg_manual_seed(7);
    EXPECT_TRUE(same_as_torch("cache.a", tg_randn(TG_SHAPE(3), F64)));
    EXPECT_TRUE(same_as_torch("cache.b", tg_rand(TG_SHAPE(2), F64)));
    EXPECT_TRUE(same_as_torch("cache.c", tg_randn(TG_SHAPE(1), F64)));
    EXPECT_TRUE(same_as_torch("cache.d", tg_randn(TG_SHAPE(20), F32)));
    EXPECT_TRUE(same_as_torch("cache.e", tg_randn(TG_SHAPE(1), F32)));
    // A non-contiguous tensor draws one element at a time too.
    tg_manual_seed(8);
    tg_tensor *strided = tg_transpose(tg_empty(TG_SHAPE(6, 5), F32), 0, 1);
    ASSERT_EQ(tg_normal_(strided, 0, 1), TG_OK);
    EXPECT_TRUE(same_as_torch("normal_strided", tg_contiguous(tg_transpose(strided, 0, 1))));
}

TEST_F(TgTest, IntegerDrawsAreTorchsForTheSameSeed) {
    tg_manual_seed(9);
    EXPECT_TRUE(same_as_torch("randint_small", tg_randint(0, 10, TG_SHAPE(50), tg_opts{})));
    EXPECT_TRUE(same_as_torch("randint_wide", tg_randint(-5, 1ll << 40, TG_SHAPE(20), tg_opts{})));
    tg_tensor *i32 = tg_randint(-100, 100, TG_SHAPE(30), tg_opts{TG_INT32, TG_CPU, false});
    ASSERT_TRUE(i32);
    EXPECT_EQ(tg_dtype_of(i32), TG_INT32);
    EXPECT_TRUE(same_as_torch("randint_i32", i32));
    tg_manual_seed(10);
    tg_tensor *p = tg_randperm(10, tg_opts{});
    ASSERT_TRUE(p);
    EXPECT_EQ(tg_dtype_of(p), TG_INT64);
    EXPECT_TRUE(same_as_torch("randperm_10", p));
    EXPECT_TRUE(same_as_torch("randperm_1000", tg_randperm(1000, tg_opts{})));
    EXPECT_EQ(tg_numel(tg_randperm(0, tg_opts{})), 0);
}

TEST_F(TgTest, BernoulliAndDropoutAreTorchsForTheSameSeed) {
    tg_manual_seed(11);
    tg_tensor *p = tg_div_scalar(tg_arange(0, 257, 1, F32), 256);
    EXPECT_TRUE(same_as_torch("bernoulli_f32", tg_bernoulli(p)));
    EXPECT_TRUE(same_as_torch("bernoulli_f64", tg_bernoulli(tg_cast(p, TG_FLOAT64))));
    tg_manual_seed(12);
    tg_tensor *x = tg_reshape(tg_div_scalar(tg_sub_scalar(tg_arange(0, 37 * 29, 1, F32), 500), 64), TG_SHAPE(37, 29));
    EXPECT_TRUE(same_as_torch("dropout_f32", tg_dropout(x, 0.3, true)));
    EXPECT_TRUE(same_as_torch("dropout_f64",
                              tg_dropout(tg_div_scalar(tg_sub_scalar(tg_arange(0, 100, 1, F64), 50), 8), 0.5, true)));
}

TEST_F(TgTest, InitialisersAndModulesGetTorchsWeightsForTheSameSeed) {
    tg_manual_seed(13);
    tg_tensor *kn = tg_empty(TG_SHAPE(64, 100), F32), *xu = tg_empty(TG_SHAPE(30, 40), F32);
    tg_tensor *xn = tg_empty(TG_SHAPE(30, 40), F64), *ku = tg_empty(TG_SHAPE(8, 3, 5, 5), F32);
    ASSERT_EQ(tg_kaiming_normal_(kn, 0.1, TG_FAN_OUT), TG_OK);
    ASSERT_EQ(tg_xavier_uniform_(xu, 2.0), TG_OK);
    ASSERT_EQ(tg_xavier_normal_(xn, 1.0), TG_OK);
    ASSERT_EQ(tg_kaiming_uniform_(ku, 0, TG_FAN_IN), TG_OK);
    EXPECT_TRUE(same_as_torch("init.kaiming_normal", kn));
    EXPECT_TRUE(same_as_torch("init.xavier_uniform", xu));
    EXPECT_TRUE(same_as_torch("init.xavier_normal", xn));
    EXPECT_TRUE(same_as_torch("init.kaiming_uniform_conv", ku));

    tg_manual_seed(14);
    tg_module *lin = tg_nn_linear(3, 2, tg_linear_opts{}), *emb = tg_nn_embedding(10, 4, tg_embedding_opts{});
    ASSERT_TRUE(lin && emb) << tg_last_error();
    EXPECT_TRUE(same_as_torch("linear.weight", tg_module_param(lin, "weight")));
    EXPECT_TRUE(same_as_torch("linear.bias", tg_module_param(lin, "bias")));
    EXPECT_TRUE(same_as_torch("embedding.weight", tg_module_param(emb, "weight")));
    tg_module_free(lin);
    tg_module_free(emb);

    // The tutorials' MLP and LeNet+BN, built in PyTorch's order: the last layer is right
    // only if every earlier one drew exactly as many numbers.
    tg_manual_seed(1);
    tg_module *mlp_layers[] = {tg_nn_linear(784, 1024, {}), tg_nn_relu(), tg_nn_linear(1024, 512, {}), tg_nn_relu(),
                               tg_nn_linear(512, 256, {}),  tg_nn_relu(), tg_nn_linear(256, 128, {}),  tg_nn_relu(),
                               tg_nn_linear(128, 10, {})};
    tg_module *mlp = tg_nn_sequential(9, mlp_layers);
    ASSERT_TRUE(mlp) << tg_last_error();
    EXPECT_TRUE(
        same_as_torch("mlp.fc1.weight_head",
                      tg_narrow(tg_flatten(tg_module_param(tg_module_child(mlp, "0"), "weight"), 0, -1), 0, 0, 200)));
    EXPECT_TRUE(same_as_torch("mlp.fc5.weight", tg_module_param(tg_module_child(mlp, "8"), "weight")));
    EXPECT_TRUE(same_as_torch("mlp.fc5.bias", tg_module_param(tg_module_child(mlp, "8"), "bias")));
    tg_module_free(mlp);
    tg_manual_seed(1);
    tg_module *lenet_layers[] = {tg_nn_conv2d(1, 20, 5, tg_conv_opts{}),
                                 tg_nn_batch_norm2d(20, tg_batch_norm_opts{}),
                                 tg_nn_relu(),
                                 tg_nn_max_pool2d(tg_pool_opts{2}),
                                 tg_nn_conv2d(20, 50, 5, tg_conv_opts{}),
                                 tg_nn_batch_norm2d(50, tg_batch_norm_opts{}),
                                 tg_nn_relu(),
                                 tg_nn_max_pool2d(tg_pool_opts{2}),
                                 tg_nn_flatten(1, -1),
                                 tg_nn_linear(800, 500, {}),
                                 tg_nn_relu(),
                                 tg_nn_linear(500, 10, {})};
    tg_module *lenet = tg_nn_sequential(12, lenet_layers);
    ASSERT_TRUE(lenet) << tg_last_error();
    EXPECT_TRUE(same_as_torch("lenet.conv1.weight", tg_module_param(tg_module_child(lenet, "0"), "weight")));
    EXPECT_TRUE(same_as_torch("lenet.fc2.weight", tg_module_param(tg_module_child(lenet, "11"), "weight")));
    EXPECT_TRUE(same_as_torch("lenet.fc2.bias", tg_module_param(tg_module_child(lenet, "11"), "bias")));
    tg_module_free(lenet);
}

// Sizes around normal's blocks of 16 (and the kept value across calls), a 0-dim
// tensor, and randint at its switch to 64-bit draws: one stream, in PyTorch's order.
TEST_F(TgTest, EdgeCasesOfTheDrawsAreTorchs) {
    tg_manual_seed(15);
    for (int n : {15, 17, 31, 33}) {
        EXPECT_TRUE(same_as_torch("edge.randn_f32_" + std::to_string(n), tg_randn(TG_SHAPE(n), F32)));
        EXPECT_TRUE(same_as_torch("edge.randn_f64_" + std::to_string(n), tg_randn(TG_SHAPE(n), F64)));
    }
    EXPECT_TRUE(same_as_torch("edge.randn_0dim", tg_randn(TG_SCALAR_SHAPE, F32)));
    EXPECT_TRUE(same_as_torch("edge.rand_f64_7", tg_rand(TG_SHAPE(7), F64)));
    EXPECT_TRUE(same_as_torch("edge.randint_2p32", tg_randint(0, 1ll << 32, TG_SHAPE(5), tg_opts{})));
    EXPECT_TRUE(same_as_torch("edge.randint_2p32_minus_1", tg_randint(0, (1ll << 32) - 1, TG_SHAPE(5), tg_opts{})));
    EXPECT_EQ(tg_numel(tg_randn(TG_SHAPE(0), F32)), 0);
}

TEST_F(TgTest, LikeFormsAreTorchs) {
    tg_manual_seed(16);
    tg_tensor *r = tg_rand_like(tg_empty(TG_SHAPE(3, 4), F32));
    ASSERT_TRUE(r) << tg_last_error();
    EXPECT_EQ(dims(r), (std::vector<int64_t>{3, 4}));
    EXPECT_TRUE(same_as_torch("like.rand", r));
    tg_tensor *n = tg_randn_like(tg_empty(TG_SHAPE(20), F64));
    ASSERT_TRUE(n);
    EXPECT_EQ(tg_dtype_of(n), TG_FLOAT64);
    EXPECT_TRUE(same_as_torch("like.randn", n));
    EXPECT_TRUE(same_as_torch("like.randint_i64", tg_randint_like(tg_empty(TG_SHAPE(7), tg_opts{TG_INT64}), 3, 9)));
    tg_tensor *f = tg_randint_like(tg_empty(TG_SHAPE(6), F32), -4, 4);
    ASSERT_TRUE(f);
    EXPECT_EQ(tg_dtype_of(f), TG_FLOAT32);
    EXPECT_TRUE(same_as_torch("like.randint_f32", f));
    tg_tensor *i = tg_randint_like(tg_empty(TG_SHAPE(5), tg_opts{TG_INT32}), 0, 1000);
    ASSERT_TRUE(i);
    EXPECT_EQ(tg_dtype_of(i), TG_INT32);
    EXPECT_TRUE(same_as_torch("like.randint_i32", i));
    tg_clear_error();
    EXPECT_EQ(tg_rand_like(tg_empty(TG_SHAPE(2), tg_opts{TG_INT64})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_rand_like: expected a floating dtype (float32 or float64), got int64");
    tg_clear_error();
    EXPECT_EQ(tg_randint_like(tg_empty(TG_SHAPE(2), tg_opts{TG_BOOL}), 0, 2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_randint_like: bool is not supported");
    tg_clear_error();
    EXPECT_EQ(tg_randint_like(tg_empty(TG_SHAPE(2), F32), 2, 2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_randint_like: expected low < high, got low 2, high 2");
    tg_clear_error();
    EXPECT_EQ(tg_randn_like(nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_randn_like: input 0 is NULL");
    tg_clear_error();
}

TEST_F(TgTest, BernoulliInPlaceIsTorchs) {
    tg_manual_seed(17);
    tg_tensor *a = tg_empty(TG_SHAPE(50), F32), *b = tg_empty(TG_SHAPE(20), F64);
    tg_tensor *c = tg_empty(TG_SHAPE(10), tg_opts{TG_INT64});
    uint64_t version = tg_version(a);
    ASSERT_EQ(tg_bernoulli_(a, 0.3), TG_OK);
    EXPECT_GT(tg_version(a), version);
    ASSERT_EQ(tg_bernoulli_(b, 0.9), TG_OK);
    ASSERT_EQ(tg_bernoulli_(c, 0.5), TG_OK);
    EXPECT_TRUE(same_as_torch("bernoulli_.f32", a));
    EXPECT_TRUE(same_as_torch("bernoulli_.f64", b));
    EXPECT_TRUE(same_as_torch("bernoulli_.i64", c));
    tg_clear_error();
    EXPECT_EQ(tg_bernoulli_(a, 1.5), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_bernoulli_: expected p in [0, 1], but got p=1.5");
    tg_clear_error();
    EXPECT_EQ(tg_bernoulli_(nullptr, 0.5), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_bernoulli_: input 0 is NULL");
    tg_clear_error();
}

// torch.multinomial from the same seed: the exponential fast path without replacement
// (argmax / topk of p / q) and the cumulative search with replacement (one sample too, in 1.13), in float32, float64 and bfloat16, then
// the generator's next draws (so each path consumes what PyTorch's does).
TEST_F(TgTest, MultinomialDrawsAreTorchsForTheSameSeed) {
    auto weights = [](const char *name, tg_dtype dt) {
        return fixture_tensor(random_fixtures(), std::string("multinomial.w.") + name).make(dt);
    };
    tg_tensor *w1 = weights("1d", TG_FLOAT32), *w2 = weights("2d", TG_FLOAT32);
    tg_tensor *w64 = weights("2d_f64", TG_FLOAT64), *wb = weights("bf16", TG_BFLOAT16);
    tg_manual_seed(19);
    EXPECT_TRUE(same_as_torch("multinomial.1d_one", tg_multinomial(w1, 1, false)));
    EXPECT_TRUE(same_as_torch("multinomial.1d_norep", tg_multinomial(w1, 4, false)));
    EXPECT_TRUE(same_as_torch("multinomial.1d_rep", tg_multinomial(w1, 9, true)));
    EXPECT_TRUE(same_as_torch("multinomial.2d_norep", tg_multinomial(w2, 3, false)));
    EXPECT_TRUE(same_as_torch("multinomial.2d_rep", tg_multinomial(w2, 12, true)));
    EXPECT_TRUE(same_as_torch("multinomial.2d_f64_one", tg_multinomial(w64, 1, true)));
    EXPECT_TRUE(same_as_torch("multinomial.2d_f64_rep", tg_multinomial(w64, 5, true)));
    EXPECT_TRUE(same_as_torch("multinomial.bf16_rep", tg_multinomial(wb, 6, true)));
    EXPECT_TRUE(same_as_torch("multinomial.bf16_norep", tg_multinomial(wb, 4, false)));
    EXPECT_TRUE(same_as_torch("multinomial.after", tg_rand(TG_SHAPE(3), F32)));
    tg_tensor *out = tg_multinomial(w2, 2, false);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(tg_dtype_of(out), TG_INT64);
    EXPECT_EQ(tg_shape_of(out).dims[0], 3);
    EXPECT_EQ(tg_shape_of(out).dims[1], 2);
    for (double v : values(out)) EXPECT_TRUE(v != 1 && v != 4) << "a category of weight 0 was drawn";

    EXPECT_EQ(tg_multinomial(w1, 5, false), nullptr);
    EXPECT_ERROR_CONTAINS(
        "tg_multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement (5 > 4)");
    tg_clear_error();
    EXPECT_EQ(tg_multinomial(w1, 0, true), nullptr);
    EXPECT_ERROR_CONTAINS("cannot sample n_sample <= 0 samples");
    tg_clear_error();
    EXPECT_EQ(tg_multinomial(tensor_f32({0.5, -0.1}, TG_SHAPE(2)), 1, false), nullptr);
    EXPECT_ERROR_CONTAINS("probability tensor contains either `inf`, `nan` or element < 0 (row 0, category 1: -0.1)");
    tg_clear_error();
    EXPECT_EQ(tg_multinomial(tensor_f32({0, 0, 1, 2}, TG_SHAPE(2, 2)), 1, true), nullptr);
    EXPECT_ERROR_CONTAINS("invalid multinomial distribution (sum of probabilities <= 0) in row 0");
    tg_clear_error();
    EXPECT_EQ(tg_multinomial(tg_ones(TG_SHAPE(2, 2, 2), F32), 1, true), nullptr);
    EXPECT_ERROR_CONTAINS("tg_multinomial: prob_dist must be 1 or 2 dim, got [2, 2, 2]");
    tg_clear_error();
    EXPECT_EQ(tg_multinomial(tg_ones(TG_SHAPE(3), tg_opts{TG_INT64, TG_CPU, false}), 1, true), nullptr);
    EXPECT_ERROR_CONTAINS("multinomial only supports floating-point dtypes for input, got int64");
}

TEST_F(TgTest, RngStateSavesAndRestoresEveryGenerator) {
    tg_manual_seed(21);
    tg_randn(TG_SHAPE(3), F64); // leaves a kept normal value behind
    tg_tensor *state = tg_get_rng_state();
    ASSERT_TRUE(state);
    EXPECT_EQ(tg_dtype_of(state), TG_UINT8);
    std::vector<double> a = values(tg_randn(TG_SHAPE(5), F64)), b = values(tg_rand(TG_SHAPE(700), F32));
    ASSERT_EQ(tg_set_rng_state(state), TG_OK);
    EXPECT_EQ(values(tg_randn(TG_SHAPE(5), F64)), a);
    EXPECT_EQ(values(tg_rand(TG_SHAPE(700), F32)), b);
    // Bytes that are not a state are refused and change nothing.
    tg_tensor *bad = tg_clone(state);
    static_cast<unsigned char *>(tg_data_ptr(bad))[0] ^= 1;
    tg_tensor *next = tg_get_rng_state();
    EXPECT_EQ(tg_set_rng_state(bad), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_set_rng_state: these bytes are not a state from tg_get_rng_state");
    EXPECT_EQ(values(tg_get_rng_state()), values(next));
    EXPECT_EQ(tg_set_rng_state(tg_zeros(TG_SHAPE(4), F32)), TG_ERROR);
    EXPECT_ERROR_CONTAINS("expected a uint8 tensor of shape [2536] from tg_get_rng_state, got float32 [4]");
}

TEST_F(TgTest, SameSeedSameNumbers) {
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_opts o = {dt, TG_CPU, false};
        tg_manual_seed(42);
        int saved = tg_get_num_threads();
        tg_set_num_threads(1);
        std::vector<double> a = values(tg_randn(TG_SHAPE(100001), o)), b = values(tg_rand(TG_SHAPE(70001), o));
        tg_set_num_threads(saved > 1 ? saved : 2);
        tg_manual_seed(42);
        EXPECT_EQ(values(tg_randn(TG_SHAPE(100001), o)), a);
        EXPECT_EQ(values(tg_rand(TG_SHAPE(70001), o)), b);
        tg_set_num_threads(saved);
        // The next draw continues the stream: different numbers.
        EXPECT_NE(values(tg_randn(TG_SHAPE(100001), o)), a);
    }
    tg_manual_seed(7);
    std::vector<double> r = values(tg_randint(0, 10, TG_SHAPE(1000), tg_opts{}));
    tg_manual_seed(7);
    EXPECT_EQ(values(tg_randint(0, 10, TG_SHAPE(1000), tg_opts{})), r);
}

TEST_F(TgTest, MomentsOfLargeSamples) {
    tg_manual_seed(0);
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_opts o = {dt, TG_CPU, false};
        Moments u = moments(tg_rand(TG_SHAPE(200000), o));
        EXPECT_NEAR(u.mean, 0.5, 0.005);
        EXPECT_NEAR(u.std, std::sqrt(1.0 / 12), 0.005);
        EXPECT_GE(u.min, 0.0);
        EXPECT_LT(u.max, 1.0);
        Moments n = moments(tg_randn(TG_SHAPE(200000), o));
        EXPECT_NEAR(n.mean, 0.0, 0.01);
        EXPECT_NEAR(n.std, 1.0, 0.01);
        tg_tensor *t = tg_empty(TG_SHAPE(100000), o);
        ASSERT_EQ(tg_normal_(t, 3, 2), TG_OK);
        Moments nn = moments(t);
        EXPECT_NEAR(nn.mean, 3.0, 0.03);
        EXPECT_NEAR(nn.std, 2.0, 0.03);
        ASSERT_EQ(tg_uniform_(t, -2, 4), TG_OK);
        Moments uu = moments(t);
        EXPECT_NEAR(uu.mean, 1.0, 0.03);
        EXPECT_GE(uu.min, -2.0);
        EXPECT_LT(uu.max, 4.0);
    }
    tg_tensor *ri = tg_randint(-3, 4, TG_SHAPE(50000), tg_opts{});
    EXPECT_EQ(tg_dtype_of(ri), TG_INT64);
    Moments r = moments(ri);
    EXPECT_EQ(r.min, -3);
    EXPECT_EQ(r.max, 3);
    EXPECT_NEAR(r.mean, 0.0, 0.05);
    tg_tensor *p = tg_full(TG_SHAPE(100000), 0.3, tg_opts{});
    EXPECT_NEAR(moments(tg_bernoulli(p)).mean, 0.3, 0.01);
    EXPECT_EQ(moments(tg_bernoulli(tg_zeros(TG_SHAPE(1000), tg_opts{}))).max, 0.0);
    EXPECT_EQ(moments(tg_bernoulli(tg_ones(TG_SHAPE(1000), tg_opts{}))).min, 1.0);
}

TEST_F(TgTest, InPlaceFillsNonContiguousViews) {
    tg_manual_seed(1);
    tg_tensor *t = tg_zeros(TG_SHAPE(4, 6), tg_opts{});
    uint64_t v = tg_version(t);
    tg_tensor *view = tg_transpose(t, 0, 1);
    ASSERT_EQ(tg_uniform_(view, 1, 2), TG_OK);
    EXPECT_GT(tg_version(t), v);
    Moments m = moments(t);
    EXPECT_GE(m.min, 1.0);
    EXPECT_LT(m.max, 2.0);
}

TEST_F(TgTest, Dropout) {
    tg_manual_seed(3);
    tg_tensor *x = tg_requires_grad_(tg_ones(TG_SHAPE(100000), tg_opts{}), true);
    tg_tensor *y = tg_dropout(x, 0.25, true);
    ASSERT_TRUE(y) << tg_last_error();
    std::vector<double> v = values(y);
    size_t kept = 0;
    for (double e : v) {
        if (e != 0) {
            EXPECT_NEAR(e, 1 / 0.75, 1e-6);
            kept++;
        }
    }
    EXPECT_NEAR(kept / 100000.0, 0.75, 0.01);
    ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK);
    EXPECT_EQ(values(tg_grad(x)), v); // the gradient is the mask
    // Same seed, same mask.
    tg_manual_seed(3);
    EXPECT_EQ(values(tg_dropout(x, 0.25, true)), v);
    // Eval and p = 0: identity; p = 1: zeros.
    EXPECT_EQ(values(tg_dropout(x, 0.25, false)), values(x));
    EXPECT_EQ(values(tg_dropout(x, 0, true)), values(x));
    EXPECT_EQ(moments(tg_dropout(x, 1, true)).max, 0.0);
}

TEST_F(TgTest, InitialisersFollowTorchNnInit) {
    tg_manual_seed(9);
    int64_t fan_in = 0, fan_out = 0;
    ASSERT_EQ(tg_calculate_fans(TG_SHAPE(50, 20, 5, 5), &fan_in, &fan_out), TG_OK);
    EXPECT_EQ(fan_in, 500);
    EXPECT_EQ(fan_out, 1250);
    ASSERT_EQ(tg_calculate_fans(TG_SHAPE(10, 784), &fan_in, &fan_out), TG_OK);
    EXPECT_EQ(fan_in, 784);
    EXPECT_EQ(fan_out, 10);

    // Linear's default: kaiming_uniform_(a = sqrt(5)) gives bound 1 / sqrt(fan_in).
    tg_tensor *w = tg_empty(TG_SHAPE(256, 784), tg_opts{});
    ASSERT_EQ(tg_kaiming_uniform_(w, std::sqrt(5.0), TG_FAN_IN), TG_OK);
    Moments m = moments(w);
    double bound = 1 / std::sqrt(784.0);
    EXPECT_GE(m.min, -bound);
    EXPECT_LE(m.max, bound);
    EXPECT_GT(m.max, 0.99 * bound);
    EXPECT_NEAR(m.std, bound / std::sqrt(3.0), 0.01 * bound);
    // a = 0, fan_out: bound = sqrt(2) * sqrt(3 / fan_out).
    tg_tensor *c = tg_empty(TG_SHAPE(50, 20, 5, 5), tg_opts{TG_FLOAT64, TG_CPU, false});
    ASSERT_EQ(tg_kaiming_uniform_(c, 0, TG_FAN_OUT), TG_OK);
    m = moments(c);
    bound = std::sqrt(2.0) * std::sqrt(3.0 / 1250);
    EXPECT_LE(m.max, bound);
    EXPECT_GT(m.max, 0.99 * bound);
    ASSERT_EQ(tg_kaiming_normal_(c, 0.1, TG_FAN_IN), TG_OK);
    EXPECT_NEAR(moments(c).std, std::sqrt(2.0 / 1.01) / std::sqrt(500.0), 0.02 * std::sqrt(2.0 / 500));
    ASSERT_EQ(tg_xavier_uniform_(w, 2.0), TG_OK);
    bound = 2.0 * std::sqrt(6.0 / (784 + 256));
    m = moments(w);
    EXPECT_LE(m.max, bound);
    EXPECT_GT(m.max, 0.99 * bound);
    ASSERT_EQ(tg_xavier_normal_(w, 1.0), TG_OK);
    EXPECT_NEAR(moments(w).std, std::sqrt(2.0 / (784 + 256)), 0.01 * std::sqrt(2.0 / (784 + 256)));
}

TEST_F(TgTest, RandomErrors) {
    tg_clear_error();
    EXPECT_EQ(tg_dropout(tg_ones(TG_SHAPE(3), tg_opts{}), 1.5, true), nullptr);
    EXPECT_ERROR_CONTAINS("tg_dropout: dropout probability has to be between 0 and 1, but got 1.5");
    tg_clear_error();
    EXPECT_EQ(tg_dropout(tg_ones(TG_SHAPE(3), tg_opts{}), -0.1, false), nullptr);
    EXPECT_ERROR_CONTAINS("but got -0.1");
    tg_clear_error();
    EXPECT_EQ(tg_dropout(nullptr, 0.5, true), nullptr);
    EXPECT_ERROR_CONTAINS("tg_dropout: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_rand(TG_SHAPE(3), tg_opts{TG_INT64, TG_CPU, false}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_rand: expected a floating dtype (float32 or float64), got int64");
    tg_clear_error();
    EXPECT_EQ(tg_randn(TG_SHAPE(-1), tg_opts{}), nullptr);
    EXPECT_NE(std::string(tg_last_error()), "");
    tg_clear_error();
    EXPECT_EQ(tg_randint(5, 5, TG_SHAPE(3), tg_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_randint: expected low < high, got low 5, high 5");
    tg_clear_error();
    EXPECT_EQ(tg_randperm(-3, tg_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_randperm: n must be non-negative, got -3");
    tg_clear_error();
    EXPECT_EQ(tg_randperm(4, tg_opts{TG_FLOAT64, TG_CPU, false}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_randperm: expected dtype int64 or int32, got float64");
    tg_clear_error();
    EXPECT_EQ(tg_randperm(4, tg_opts{TG_INT64, TG_CPU, true}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_randperm: integer tensors cannot require grad");
    tg_clear_error();
    tg_tensor *p32 = tg_randperm(6, tg_opts{TG_INT32, TG_CPU, false});
    ASSERT_TRUE(p32);
    EXPECT_EQ(tg_dtype_of(p32), TG_INT32);
    std::vector<double> sorted = values(p32);
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<double>{0, 1, 2, 3, 4, 5}));
    tg_clear_error();
    EXPECT_EQ(tg_bernoulli(nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_bernoulli: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_uniform_(nullptr, 0, 1), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_uniform_: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_normal_(tg_zeros(TG_SHAPE(3), tg_opts{}), 0, -1), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_normal_: expected std >= 0, got -1");
    tg_clear_error();
    EXPECT_EQ(tg_calculate_fans(TG_SHAPE(5), nullptr, nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("fewer than 2 dimensions, got [5]");
    tg_clear_error();
    EXPECT_EQ(tg_kaiming_uniform_(tg_zeros(TG_SHAPE(5), tg_opts{}), 0, TG_FAN_IN), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_kaiming_uniform_: fan in and fan out can not be computed");
    tg_clear_error();
    EXPECT_EQ(tg_xavier_normal_(tg_zeros(TG_SHAPE(2, 2), tg_opts{TG_INT64, TG_CPU, false}), 1), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_xavier_normal_: expected a floating dtype");
}

} // namespace
