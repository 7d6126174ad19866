// tg_checkpoint (autograd/checkpoint.h): the gradients with checkpointing are the
// gradients without, bit for bit on the CPU (an MLP; a Transformer encoder layer with
// dropout in training, whose masks the restored generator redraws); the parameters
// get theirs when no input requires grad (use_reentrant=False); the peak memory of a
// deep chain is lower; errors.
#include <cstdio>
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

class CheckpointTest : public TgTest {};

tg_tensor *module_fn(tg_tensor *const *in, void *user) { return tg_forward(static_cast<tg_module *>(user), in[0]); }

struct Grads {
    std::vector<double> x;
    std::vector<std::vector<double>> params;
};

// sum(m(x) * g)'s gradients, with or without checkpointing m.
Grads run(tg_module *m, tg_tensor *x, bool checkpoint, std::vector<double> *out_values = nullptr) {
    Grads r;
    tg_module_zero_grad(m);
    if (tg_requires_grad(x)) tg_zero_grad(x);
    tg_scope_begin();
    tg_tensor *y = checkpoint ? tg_checkpoint(module_fn, m, &x, 1) : tg_forward(m, x);
    EXPECT_NE(y, nullptr) << tg_last_error();
    if (out_values) *out_values = values(y);
    tg_tensor *g = tg_cos(tg_reshape(tg_arange(0, (double)tg_numel(y), 1, tg_opts{tg_dtype_of(y)}), tg_shape_of(y)));
    EXPECT_EQ(tg_backward(tg_sum(tg_mul(y, g))), TG_OK) << tg_last_error();
    tg_scope_end();
    if (tg_requires_grad(x)) r.x = values(tg_grad(x));
    int n = 0;
    tg_tensor *const *params = tg_parameters(m, &n);
    for (int i = 0; i < n; i++) r.params.push_back(values(tg_grad(params[i])));
    return r;
}

void expect_same(const Grads &a, const Grads &b) {
    EXPECT_EQ(a.x, b.x);
    ASSERT_EQ(a.params.size(), b.params.size());
    for (size_t i = 0; i < a.params.size(); i++) {
        EXPECT_FALSE(a.params[i].empty()) << "parameter " << i << " has no gradient";
        EXPECT_EQ(a.params[i], b.params[i]) << "parameter " << i;
    }
}

} // namespace

TEST_F(CheckpointTest, MlpGradientsAreTheSame) {
    tg_manual_seed(1);
    tg_module *m =
        TG_NN_SEQUENTIAL(tg_nn_linear(8, 16, tg_linear_opts{}), tg_nn_tanh(), tg_nn_linear(16, 4, tg_linear_opts{}));
    ASSERT_NE(m, nullptr) << tg_last_error();
    tg_tensor *x = tg_requires_grad_(tg_randn(TG_SHAPE(5, 8), tg_opts{}), true);
    std::vector<double> y_plain, y_ckpt;
    Grads plain = run(m, x, false, &y_plain), ckpt = run(m, x, true, &y_ckpt);
    EXPECT_EQ(y_plain, y_ckpt);
    expect_same(plain, ckpt);
    // use_reentrant=False: no input requires grad, the parameters still get gradients
    tg_tensor *x0 = tg_detach(x);
    expect_same(run(m, x0, false), run(m, x0, true));
    // grad mode off: fn itself, nothing recorded
    TG_NO_GRAD {
        tg_tensor *y = tg_checkpoint(module_fn, m, &x, 1);
        ASSERT_NE(y, nullptr) << tg_last_error();
        EXPECT_FALSE(tg_requires_grad(y));
        EXPECT_EQ(values(y), y_plain);
    }
    tg_module_free(m);
}

TEST_F(CheckpointTest, TransformerLayerWithDropoutInTraining) {
    tg_manual_seed(2);
    tg_transformer_layer_opts o = {};
    o.dim_feedforward = 32, o.dropout = 0.2, o.norm_first = true, o.activation = TG_TRANSFORMER_GELU;
    tg_module *m = tg_nn_transformer_encoder_layer(16, 4, o);
    ASSERT_NE(m, nullptr) << tg_last_error();
    tg_train(m, true);
    tg_tensor *x = tg_requires_grad_(tg_randn(TG_SHAPE(6, 3, 16), tg_opts{}), true);
    std::vector<double> y_plain, y_ckpt, after_plain, after_ckpt;
    tg_manual_seed(10);
    Grads plain = run(m, x, false, &y_plain);
    after_plain = values(tg_rand(TG_SHAPE(4), tg_opts{}));
    tg_manual_seed(10);
    Grads ckpt = run(m, x, true, &y_ckpt);
    after_ckpt = values(tg_rand(TG_SHAPE(4), tg_opts{}));
    EXPECT_EQ(y_plain, y_ckpt);
    expect_same(plain, ckpt);
    // the recompute put the generator back where the forward had left it
    EXPECT_EQ(after_plain, after_ckpt);
    // dropout did drop: another seed gives other gradients
    tg_manual_seed(11);
    EXPECT_NE(run(m, x, true).x, plain.x);
    tg_module_free(m);
}

namespace {
constexpr int kBlocks = 32, kPerSegment = 4, kWidth = 128, kBatch = 1024;

tg_tensor *blocks(tg_tensor *x, tg_tensor *const *w, int count) {
    for (int i = 0; x && i < count; i++) x = tg_tanh(tg_matmul(x, w[i]));
    return x;
}
tg_tensor *segment_fn(tg_tensor *const *in, void *user) {
    return blocks(in[0], static_cast<tg_tensor *const *>(user), kPerSegment);
}

// forward + backward of the chain; returns the peak bytes above what was allocated before
size_t chain_peak(tg_tensor *x, const std::vector<tg_tensor *> &w, bool checkpoint, std::vector<double> *x_grad) {
    tg_zero_grad(x);
    for (tg_tensor *t : w) tg_zero_grad(t);
    size_t before = tg_cpu_memory_stats().allocated;
    tg_cpu_reset_peak_memory_stats();
    tg_scope_begin();
    tg_tensor *y = x;
    for (int s = 0; y && s < kBlocks / kPerSegment; s++)
        y = checkpoint ? tg_checkpoint(segment_fn, (void *)(w.data() + s * kPerSegment), &y, 1)
                       : blocks(y, w.data() + s * kPerSegment, kPerSegment);
    EXPECT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(tg_backward(tg_sum(y)), TG_OK) << tg_last_error();
    tg_scope_end();
    size_t peak = tg_cpu_memory_stats().peak - before;
    *x_grad = values(tg_grad(x));
    return peak;
}
} // namespace

TEST_F(CheckpointTest, DeepChainPeakMemoryIsLower) {
    tg_manual_seed(3);
    std::vector<tg_tensor *> w;
    for (int i = 0; i < kBlocks; i++)
        w.push_back(tg_requires_grad_(tg_mul_scalar(tg_randn(TG_SHAPE(kWidth, kWidth), tg_opts{}), 0.09), true));
    tg_tensor *x = tg_requires_grad_(tg_randn(TG_SHAPE(kBatch, kWidth), tg_opts{}), true);
    std::vector<double> g_plain, g_ckpt;
    size_t plain = chain_peak(x, w, false, &g_plain);
    std::vector<double> w0_plain = values(tg_grad(w[0]));
    size_t ckpt = chain_peak(x, w, true, &g_ckpt);
    EXPECT_EQ(g_plain, g_ckpt);
    EXPECT_EQ(w0_plain, values(tg_grad(w[0])));
    // without: every block keeps its matmul input and tanh output (32 x 2 x 512 KiB);
    // with: 8 segment inputs and one segment's recompute at a time
    std::printf("deep chain peak: %zu bytes with checkpointing, %zu without\n", ckpt, plain);
    EXPECT_LT(ckpt * 2, plain) << "peak with checkpointing " << ckpt << " bytes, without " << plain;
}

namespace {
tg_tensor *failing_fn(tg_tensor *const *in, void *) {
    return tg_matmul(in[0], in[0]); // [2, 3] @ [2, 3]
}
tg_tensor *square_fn(tg_tensor *const *in, void *) { return tg_mul(in[0], in[1]); }
} // namespace

TEST_F(CheckpointTest, Errors) {
    tg_tensor *x = tg_requires_grad_(tg_ones(TG_SHAPE(2, 3), tg_opts{}), true);
    tg_tensor *in2[] = {x, x};
    EXPECT_EQ(tg_checkpoint(nullptr, nullptr, &x, 1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_checkpoint: needs a function and 1 to 7 inputs, got NULL and 1");
    tg_clear_error();
    EXPECT_EQ(tg_checkpoint(square_fn, nullptr, in2, 0), nullptr);
    EXPECT_ERROR_CONTAINS("got a function and 0");
    tg_clear_error();
    tg_tensor *with_null[] = {x, nullptr};
    EXPECT_EQ(tg_checkpoint(square_fn, nullptr, with_null, 2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_checkpoint: input 1");
    tg_clear_error();
    EXPECT_EQ(tg_checkpoint(failing_fn, nullptr, &x, 1), nullptr);
    EXPECT_ERROR_CONTAINS("[2, 3]");
    tg_clear_error();

    // second derivatives and tg_grad_of are refused in backward
    tg_tensor *y = tg_checkpoint(square_fn, nullptr, in2, 2);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(tg_backward_with(tg_sum(y), .create_graph = true), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_checkpoint: second derivatives (create_graph)");
    tg_clear_error();
    tg_zero_grad(x);
    y = tg_checkpoint(square_fn, nullptr, in2, 2);
    tg_tensor *g = nullptr;
    tg_tensor *loss = tg_sum(y);
    EXPECT_EQ(tg_grad_of(&loss, nullptr, 1, &x, 1, &g, tg_backward_opts{}), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_checkpoint: not compatible with tg_grad_of");
    tg_clear_error();
    // an input written in place after the call
    tg_tensor *a = tg_requires_grad_(tg_ones(TG_SHAPE(3), tg_opts{}), true);
    tg_tensor *in_a[] = {a, a};
    y = tg_checkpoint(square_fn, nullptr, in_a, 2);
    TG_NO_GRAD { ASSERT_EQ(tg_fill_(a, 2.0), TG_OK); }
    EXPECT_EQ(tg_backward(tg_sum(y)), TG_ERROR);
    EXPECT_ERROR_CONTAINS("modified");
    tg_clear_error();
    // the plain case works: d(sum(x * x)) = 2x
    tg_zero_grad(x);
    y = tg_checkpoint(square_fn, nullptr, in2, 2);
    ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), {2, 2, 2, 2, 2, 2}, 0));
}
