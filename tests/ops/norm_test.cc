// Batch norm (train and eval, running statistics) and layer norm: PyTorch fixtures,
// gradcheck / gradgradcheck, bad inputs.
#include <cmath>

#include "nn_fixture_util.h"

namespace {

class NormTest : public TgTest, public ::testing::WithParamInterface<tg_dtype> {};

TEST_P(NormTest, BatchNormMatchesPyTorch) {
    tg_dtype dt = GetParam();
    for (std::string tag : {"4d", "2d"}) {
        for (bool training : {true, false}) {
            std::string name = std::string(training ? "bn_train_" : "bn_eval_") + tag;
            std::vector<tg_tensor *> in = check_nn_case(name, {"x", "w", "b", "rm", "rv"}, dt, [training](auto &in) {
                tg_requires_grad_(in[3], false);
                tg_requires_grad_(in[4], false);
                return tg_batch_norm(in[0], in[3], in[4], in[1], in[2], training, 0.1, 1e-5);
            });
            SCOPED_TRACE(name);
            EXPECT_TRUE(tensor_near(in[3], nn_fixture(name + ".rm_after").data, nn_atol(dt), nn_rtol(dt)));
            EXPECT_TRUE(tensor_near(in[4], nn_fixture(name + ".rv_after").data, nn_atol(dt), nn_rtol(dt)));
        }
    }
}

TEST_P(NormTest, LayerNormMatchesPyTorch) {
    tg_dtype dt = GetParam();
    check_nn_case("ln_2", {"x", "w", "b"}, dt, [](auto &in) { return tg_layer_norm(in[0], 2, in[1], in[2], 1e-5); });
    check_nn_case("ln_1", {"x"}, dt, [](auto &in) { return tg_layer_norm(in[0], 1, nullptr, nullptr, 1e-5); });
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NormTest, ::testing::Values(TG_FLOAT32, TG_FLOAT64));

struct NormCase {
    int kind; // 0 batch norm train, 1 batch norm eval, 2 layer norm
    bool transpose;
    tg_tensor *rm, *rv;
};

tg_tensor *norm_gc(tg_tensor *const *in, void *user) {
    const NormCase *c = static_cast<const NormCase *>(user);
    tg_tensor *x = c->transpose ? tg_transpose(in[0], 2, 3) : in[0];
    if (c->kind == 2) return tg_layer_norm(x, 2, in[1], in[2], 1e-5);
    return tg_batch_norm(x, c->rm, c->rv, in[1], in[2], c->kind == 0, 0.1, 1e-5);
}

TEST_F(TgTest, NormGradcheck) {
    tg_manual_seed(5);
    tg_opts f64 = {TG_FLOAT64, TG_CPU, false};
    for (int kind = 0; kind < 3; kind++) {
        for (bool transpose : {false, true}) {
            SCOPED_TRACE(kind * 10 + transpose);
            // Running stats are updated by every call: fresh ones are fine for gradcheck.
            NormCase c = {kind, transpose, tg_zeros(TG_SHAPE(3), f64), tg_ones(TG_SHAPE(3), f64)};
            tg_tensor *x =
                tg_requires_grad_(tg_randn(transpose ? TG_SHAPE(2, 3, 4, 3) : TG_SHAPE(2, 3, 3, 4), f64), true);
            tg_shape ps = kind == 2 ? TG_SHAPE(3, 4) : TG_SHAPE(3);
            tg_tensor *w = tg_requires_grad_(tg_randn(ps, f64), true);
            tg_tensor *b = tg_requires_grad_(tg_randn(ps, f64), true);
            tg_tensor *in[] = {x, w, b};
            tg_gradcheck_opts o = {};
            o.user = &c;
            EXPECT_EQ(tg_gradcheck(norm_gc, 3, in, &o), TG_OK) << tg_last_error();
            EXPECT_EQ(tg_gradgradcheck(norm_gc, 3, in, &o), TG_OK) << tg_last_error();
        }
    }
}

// Layer norm's fused CPU backward (ops/cpu/norm_kernels.h, taken when the backward is not
// recorded) against the composed formula (taken with create_graph), on rows that span several
// of its 64-row blocks and a width with a tail past its 16 lanes; and the same bits on 1, 2
// and 3 threads.
std::vector<std::vector<double>> layer_norm_grads(tg_dtype dt, bool create_graph) {
    tg_manual_seed(11);
    tg_opts o = {dt, TG_CPU, false};
    tg_tensor *x = tg_requires_grad_(tg_add_scalar(tg_randn(TG_SHAPE(3, 100, 37), o), 3), true);
    tg_tensor *w = tg_requires_grad_(tg_randn(TG_SHAPE(37), o), true);
    tg_tensor *b = tg_requires_grad_(tg_randn(TG_SHAPE(37), o), true);
    tg_tensor *g = tg_randn(TG_SHAPE(3, 100, 37), o);
    tg_tensor *y = tg_layer_norm(x, 1, w, b, 1e-5);
    tg_tensor *in[] = {x, w, b}, *grads[3];
    tg_backward_opts bo = {};
    bo.create_graph = create_graph;
    EXPECT_EQ(tg_grad_of(&y, &g, 1, in, 3, grads, bo), TG_OK) << tg_last_error();
    return {values(grads[0]), values(grads[1]), values(grads[2])};
}

TEST_F(TgTest, LayerNormFusedBackwardMatchesComposed) {
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        SCOPED_TRACE(tg_dtype_name(dt));
        double tol = dt == TG_FLOAT64 ? 1e-12 : 1e-4;
        auto fused = layer_norm_grads(dt, false), composed = layer_norm_grads(dt, true);
        const char *what[] = {"input", "weight", "bias"};
        for (int i = 0; i < 3; i++) {
            ASSERT_EQ(fused[i].size(), composed[i].size());
            for (size_t k = 0; k < fused[i].size(); k++)
                ASSERT_NEAR(fused[i][k], composed[i][k], tol * (1 + std::fabs(composed[i][k]))) << what[i] << " " << k;
        }
    }
    int saved = tg_get_num_threads();
    std::vector<std::vector<double>> first;
    for (int threads : {1, 2, 3}) {
        tg_set_num_threads(threads);
        auto now = layer_norm_grads(TG_FLOAT32, false);
        if (first.empty()) first = now;
        else EXPECT_TRUE(now == first) << threads << " threads";
    }
    tg_set_num_threads(saved);
}

// tg_batch_norm_add_relu against the three ops it replaces, relu(batch_norm(x) + r): the
// fused CPU kernels (training, float32 / float64) give the same bits for the output, the
// running statistics and every gradient (x, weight, bias, residual), with and without a
// residual, on 1 and 2 threads; eval mode and a broadcast residual take the composed ops.
struct BnReluRun {
    std::vector<std::vector<double>> values; // y, running mean, running var, dx, dw, db, dr
};

BnReluRun bn_relu_run(tg_dtype dt, bool fused, bool residual, bool training, tg_shape rshape) {
    tg_manual_seed(21);
    tg_opts o = {dt, TG_CPU, false};
    tg_tensor *x = tg_requires_grad_(tg_add_scalar(tg_randn(TG_SHAPE(3, 5, 7, 9), o), 0.5), true);
    tg_tensor *w = tg_requires_grad_(tg_randn(TG_SHAPE(5), o), true);
    tg_tensor *b = tg_requires_grad_(tg_randn(TG_SHAPE(5), o), true);
    tg_tensor *r = residual ? tg_requires_grad_(tg_randn(rshape, o), true) : nullptr;
    tg_tensor *rm = tg_zeros(TG_SHAPE(5), o), *rv = tg_ones(TG_SHAPE(5), o);
    tg_tensor *g = tg_randn(TG_SHAPE(3, 5, 7, 9), o);
    tg_tensor *y = nullptr;
    if (fused) {
        y = tg_batch_norm_add_relu(x, r, rm, rv, w, b, training, 0.1, 1e-5);
    } else {
        tg_tensor *n = tg_batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
        y = tg_relu(r ? tg_add(n, r) : n);
    }
    EXPECT_NE(y, nullptr) << tg_last_error();
    BnReluRun run;
    if (!y) return run;
    run.values = {values(y), values(rm), values(rv)};
    tg_tensor *in[] = {x, w, b, r}, *grads[4] = {};
    EXPECT_EQ(tg_grad_of(&y, &g, 1, in, residual ? 4 : 3, grads, tg_backward_opts{}), TG_OK) << tg_last_error();
    for (int i = 0; i < (residual ? 4 : 3); i++) run.values.push_back(values(grads[i]));
    return run;
}

TEST_F(TgTest, BatchNormAddReluHasTheBitsOfTheThreeOps) {
    const char *what[] = {"y", "running_mean", "running_var", "dx", "dweight", "dbias", "dresidual"};
    int saved = tg_get_num_threads();
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64})
        for (bool residual : {false, true})
            for (bool training : {true, false})
                for (int threads : {1, 2}) {
                    tg_set_num_threads(threads);
                    SCOPED_TRACE(testing::Message() << tg_dtype_name(dt) << (residual ? " residual" : "")
                                                    << (training ? " train " : " eval ") << threads << " threads");
                    BnReluRun fused = bn_relu_run(dt, true, residual, training, TG_SHAPE(3, 5, 7, 9));
                    BnReluRun composed = bn_relu_run(dt, false, residual, training, TG_SHAPE(3, 5, 7, 9));
                    ASSERT_EQ(fused.values.size(), composed.values.size());
                    for (size_t i = 0; i < fused.values.size(); i++)
                        EXPECT_TRUE(fused.values[i] == composed.values[i]) << what[i];
                }
    tg_set_num_threads(saved);
    // A residual that broadcasts ([5, 1, 1] against [3, 5, 7, 9]) takes the composed ops.
    BnReluRun fused = bn_relu_run(TG_FLOAT32, true, true, true, TG_SHAPE(5, 1, 1));
    BnReluRun composed = bn_relu_run(TG_FLOAT32, false, true, true, TG_SHAPE(5, 1, 1));
    EXPECT_TRUE(fused.values == composed.values);
}

// The ReLU's mask: the output is 0 where bn(x) + r < 0, and the gradient of x, w, b and r
// is 0 there (the fused path's masked gradient against finite differences, float64).
tg_tensor *bn_add_relu_gc(tg_tensor *const *in, void *user) {
    return tg_batch_norm_add_relu(in[0], in[3], nullptr, nullptr, in[1], in[2], true, 0.1, 1e-5);
}

TEST_F(TgTest, BatchNormAddReluGradcheck) {
    tg_manual_seed(22);
    tg_opts f64 = {TG_FLOAT64, TG_CPU, false};
    tg_tensor *x = tg_requires_grad_(tg_randn(TG_SHAPE(2, 3, 3, 4), f64), true);
    tg_tensor *w = tg_requires_grad_(tg_randn(TG_SHAPE(3), f64), true);
    tg_tensor *b = tg_requires_grad_(tg_randn(TG_SHAPE(3), f64), true);
    tg_tensor *r = tg_requires_grad_(tg_randn(TG_SHAPE(2, 3, 3, 4), f64), true);
    tg_tensor *in[] = {x, w, b, r};
    tg_tensor *y = bn_add_relu_gc(in, nullptr);
    ASSERT_NE(y, nullptr) << tg_last_error();
    std::vector<double> v = values(y);
    int zeros = 0;
    for (double e : v) zeros += e == 0;
    EXPECT_GT(zeros, 0) << "the ReLU masks some outputs";
    EXPECT_LT(zeros, (int)v.size());
    EXPECT_EQ(tg_gradcheck(bn_add_relu_gc, 4, in, nullptr), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_gradgradcheck(bn_add_relu_gc, 4, in, nullptr), TG_OK) << tg_last_error();
}

TEST_F(TgTest, BatchNormAddReluErrorsNameTheOp) {
    tg_tensor *x = tg_zeros(TG_SHAPE(4, 3, 2, 2), tg_opts{});
    tg_tensor *c2 = tg_ones(TG_SHAPE(2), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_batch_norm_add_relu(x, nullptr, nullptr, nullptr, c2, nullptr, true, 0.1, 1e-5), nullptr);
    EXPECT_NE(std::string(tg_last_error()).find("tg_batch_norm_add_relu"), std::string::npos) << tg_last_error();
    tg_clear_error();
    EXPECT_EQ(tg_batch_norm_add_relu(nullptr, x, nullptr, nullptr, nullptr, nullptr, true, 0.1, 1e-5), nullptr);
    EXPECT_NE(std::string(tg_last_error()).find("tg_batch_norm_add_relu"), std::string::npos) << tg_last_error();
    tg_clear_error();
    // A residual that does not broadcast: the add's error.
    EXPECT_EQ(tg_batch_norm_add_relu(x, tg_zeros(TG_SHAPE(4, 2, 2, 2), tg_opts{}), nullptr, nullptr, nullptr, nullptr,
                                     true, 0.1, 1e-5),
              nullptr);
    EXPECT_TRUE(tg_has_error());
    tg_clear_error();
}

TEST_F(TgTest, BatchNormWithoutAffineOrRunningStats) {
    tg_tensor *x = tensor_f64({1, 2, 3, 5}, TG_SHAPE(4, 1));
    tg_tensor *y = tg_batch_norm(x, nullptr, nullptr, nullptr, nullptr, true, 0.1, 0);
    double m = 2.75, v = (1.75 * 1.75 + 0.75 * 0.75 + 0.25 * 0.25 + 2.25 * 2.25) / 4;
    EXPECT_TRUE(tensor_near(
        y, {(1 - m) / std::sqrt(v), (2 - m) / std::sqrt(v), (3 - m) / std::sqrt(v), (5 - m) / std::sqrt(v)}, 1e-12));
}

TEST_F(TgTest, NormErrors) {
    tg_tensor *x = tg_zeros(TG_SHAPE(4, 3, 2, 2), tg_opts{});
    tg_tensor *c3 = tg_ones(TG_SHAPE(3), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_batch_norm(nullptr, c3, c3, c3, c3, true, 0.1, 1e-5), nullptr);
    EXPECT_ERROR_CONTAINS("tg_batch_norm: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_batch_norm(tg_zeros(TG_SHAPE(4), tg_opts{}), nullptr, nullptr, nullptr, nullptr, true, 0.1, 1e-5),
              nullptr);
    EXPECT_ERROR_CONTAINS("expected input [N, C, ...] (at least 2-D), got [4]");
    tg_clear_error();
    EXPECT_EQ(tg_batch_norm(x, c3, c3, tg_ones(TG_SHAPE(4), tg_opts{}), c3, true, 0.1, 1e-5), nullptr);
    EXPECT_ERROR_CONTAINS("tg_batch_norm: expected weight of shape [3] for input [4, 3, 2, 2], got [4]");
    tg_clear_error();
    EXPECT_EQ(tg_batch_norm(x, tg_zeros(TG_SHAPE(3), tg_opts{TG_FLOAT64, TG_CPU, false}), c3, c3, c3, true, 0.1, 1e-5),
              nullptr);
    EXPECT_ERROR_CONTAINS("expected running_mean of the input's dtype float32, got float64");
    tg_clear_error();
    EXPECT_EQ(tg_batch_norm(tg_zeros(TG_SHAPE(4, 3), tg_opts{TG_INT64, TG_CPU, false}), nullptr, nullptr, nullptr,
                            nullptr, true, 0.1, 1e-5),
              nullptr);
    EXPECT_ERROR_CONTAINS("expected a float32, float64, float16 or bfloat16 input, got int64");
    tg_clear_error();
    EXPECT_EQ(tg_batch_norm(x, nullptr, nullptr, c3, c3, false, 0.1, 1e-5), nullptr);
    EXPECT_ERROR_CONTAINS("running_mean and running_var must be given in evaluation mode");
    tg_clear_error();
    EXPECT_EQ(tg_batch_norm(tg_zeros(TG_SHAPE(1, 3), tg_opts{}), nullptr, nullptr, c3, c3, true, 0.1, 1e-5), nullptr);
    EXPECT_ERROR_CONTAINS("expected more than 1 value per channel when training, got input [1, 3]");
    tg_clear_error();
    EXPECT_EQ(tg_layer_norm(nullptr, 1, nullptr, nullptr, 1e-5), nullptr);
    EXPECT_ERROR_CONTAINS("tg_layer_norm: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_layer_norm(x, 5, nullptr, nullptr, 1e-5), nullptr);
    EXPECT_ERROR_CONTAINS("expected 1 <= normalized_ndim <= 4 for input [4, 3, 2, 2], got 5");
    tg_clear_error();
    EXPECT_EQ(tg_layer_norm(x, 2, tg_ones(TG_SHAPE(3, 2), tg_opts{}), nullptr, 1e-5), nullptr);
    EXPECT_ERROR_CONTAINS("tg_layer_norm: expected weight of shape [2, 2] for input [4, 3, 2, 2], got [3, 2]");
}

} // namespace
