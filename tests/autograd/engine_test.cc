// The backward engine: accumulation, shared subexpressions, retain_graph, version
// checks, no-grad, hooks, long chains, higher order, grad_of, anomaly mode, DOT.
#include <cstdio>
#include <string>

#include "test_util.h"

TEST_F(TgTest, GradientsAccumulateAcrossBackwardCalls) {
    tg_tensor *x = tensor_f32({1, 2, 3}, TG_SHAPE(3), true);
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(x, x))), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), {2, 4, 6}, 1e-6));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul_scalar(x, 3))), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), {5, 7, 9}, 1e-6));
    tg_zero_grad(x);
    EXPECT_EQ(tg_grad(x), nullptr);
}

TEST_F(TgTest, SharedSubexpressionWithThreeConsumers) {
    // s = x * 2; y = s*s + exp(s) + 3s ; dy/dx = 2 * (2s + exp(s) + 3)
    tg_tensor *x = tensor_f64({0.5, -1.0}, TG_SHAPE(2), true);
    tg_tensor *s = tg_mul_scalar(x, 2);
    tg_tensor *y = tg_sum(tg_add(tg_add(tg_mul(s, s), tg_exp(s)), tg_mul_scalar(s, 3)));
    ASSERT_EQ(tg_backward(y), TG_OK);
    std::vector<double> expected;
    for (double v : {0.5, -1.0}) expected.push_back(2 * (4 * v + std::exp(2 * v) + 3));
    EXPECT_TRUE(tensor_near(tg_grad(x), expected, 1e-12));
}

TEST_F(TgTest, BackwardTwiceNeedsRetainGraph) {
    tg_tensor *x = tensor_f32({2}, TG_SHAPE(1), true);
    tg_tensor *y = tg_sum(tg_exp(tg_mul(x, x)));
    ASSERT_EQ(tg_backward_with(y, .retain_graph = true), TG_OK);
    ASSERT_EQ(tg_backward(y), TG_OK); // the graph was retained once
    double once = 4 * std::exp(4.0);
    EXPECT_TRUE(tensor_near(tg_grad(x), {2 * once}, 1e-2));
    EXPECT_EQ(tg_backward(y), TG_ERROR); // now it is freed
    EXPECT_ERROR_CONTAINS("trying to backward through the graph a second time");
    EXPECT_ERROR_CONTAINS("retain_graph");
    EXPECT_TRUE(tensor_near(tg_grad(x), {2 * once}, 1e-2)); // untouched by the failed call
}

TEST_F(TgTest, InPlaceChangeAfterSaveIsAnError) {
    tg_tensor *x = tensor_f32({1, 2}, TG_SHAPE(2), true);
    tg_tensor *w = tensor_f32({3, 4}, TG_SHAPE(2));
    tg_tensor *y = tg_sum(tg_mul(x, w)); // mul saves w
    ASSERT_EQ(tg_mul_scalar_(w, 2), TG_OK);
    EXPECT_EQ(tg_backward(y), TG_ERROR);
    EXPECT_ERROR_CONTAINS("mul (#");
    EXPECT_ERROR_CONTAINS("modified by an in-place operation (version 1, expected 0)");
}

TEST_F(TgTest, InPlaceOnALeafThatRequiresGradIsRefused) {
    tg_tensor *x = tensor_f32({1, 2}, TG_SHAPE(2), true);
    EXPECT_EQ(tg_mul_scalar_(x, 2), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_mul_scalar_: a leaf Variable that requires grad is being used in an in-place operation");
    TG_NO_GRAD { EXPECT_EQ(tg_mul_scalar_(x, 2), TG_OK); }
    EXPECT_TRUE(tensor_near(x, {2, 4}, 0));
}

TEST_F(TgTest, NoGradRecordsNothing) {
    tg_tensor *x = tensor_f32({1, 2}, TG_SHAPE(2), true);
    long nodes = tg_live_graph_nodes();
    tg_tensor *y = nullptr;
    TG_NO_GRAD {
        EXPECT_FALSE(tg_is_grad_enabled());
        y = tg_exp(tg_mul(x, x));
    }
    EXPECT_TRUE(tg_is_grad_enabled());
    EXPECT_EQ(tg_live_graph_nodes(), nodes);
    EXPECT_FALSE(tg_requires_grad(y));
    EXPECT_EQ(tg_backward(tg_sum(y)), TG_ERROR);
    EXPECT_ERROR_CONTAINS("does not require grad");
    // Nested blocks restore the outer state.
    TG_NO_GRAD {
        TG_NO_GRAD {}
        EXPECT_FALSE(tg_is_grad_enabled());
    }
    EXPECT_TRUE(tg_is_grad_enabled());
}

TEST_F(TgTest, DetachCutsTheGraph) {
    tg_tensor *x = tensor_f32({3}, TG_SHAPE(1), true);
    tg_tensor *d = tg_detach(tg_mul(x, x));
    EXPECT_FALSE(tg_requires_grad(d));
    tg_tensor *y = tg_mul(x, d); // d is a constant 9
    ASSERT_EQ(tg_backward(y), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), {9}, 1e-6));
}

namespace {
tg_tensor *double_it(tg_tensor *grad, void *calls) {
    ++*static_cast<int *>(calls);
    return tg_mul_scalar(grad, 2);
}
tg_tensor *observe(tg_tensor *grad, void *seen) {
    *static_cast<double *>(seen) = values(grad)[0];
    return grad;
}
} // namespace

TEST_F(TgTest, HooksSeeAndReplaceGradients) {
    tg_tensor *x = tensor_f32({1, 2}, TG_SHAPE(2), true);
    int calls = 0;
    double seen_mid = 0;
    ASSERT_EQ(tg_register_hook(x, double_it, &calls), TG_OK);
    tg_tensor *mid = tg_mul_scalar(x, 3);
    ASSERT_EQ(tg_register_hook(mid, observe, &seen_mid), TG_OK);
    // x is used twice: the leaf hook runs once, on the summed gradient.
    tg_tensor *y = tg_sum(tg_add(tg_mul(mid, mid), x));
    ASSERT_EQ(tg_backward(y), TG_OK);
    EXPECT_EQ(calls, 1);
    EXPECT_DOUBLE_EQ(seen_mid, 6.0); // d y / d mid = 2 * mid = 6 at x = 1
    // (18x + 1) * 2
    EXPECT_TRUE(tensor_near(tg_grad(x), {38, 74}, 1e-4));
}

namespace {
struct PostHookLog {
    tg_tensor *other; // the other leaf, whose .grad the hook looks at
    int calls = 0;
    bool other_had_grad = false;
    double own_grad = 0;
};
void post_hook(tg_tensor *leaf, void *user) {
    auto *log = static_cast<PostHookLog *>(user);
    log->calls++;
    log->other_had_grad = tg_grad(log->other) != nullptr;
    log->own_grad = values(tg_grad(leaf))[0];
}
} // namespace

// The post-accumulate hook of a leaf runs once its gradient is in .grad, before the
// backward reaches leaves nearer the input (PyTorch's AccumulateGrad order).
TEST_F(TgTest, PostAccumulateHooksRunAsSoonAsALeafIsDone) {
    tg_tensor *w_in = tensor_f64({2}, TG_SHAPE(1), true);
    tg_tensor *w_out = tensor_f64({5}, TG_SHAPE(1), true);
    PostHookLog in_log, out_log;
    in_log.other = w_out;
    out_log.other = w_in;
    ASSERT_EQ(tg_register_post_accumulate_grad_hook(w_in, post_hook, &in_log), TG_OK);
    ASSERT_EQ(tg_register_post_accumulate_grad_hook(w_out, post_hook, &out_log), TG_OK);
    // y = sum(exp(3 w_in) * w_out + w_in): w_in is reached twice, by the first op and the last.
    tg_tensor *h = tg_exp(tg_mul_scalar(w_in, 3));
    tg_tensor *y = tg_sum(tg_add(tg_mul(h, w_out), w_in));
    ASSERT_EQ(tg_backward(y), TG_OK);
    EXPECT_EQ(out_log.calls, 1);
    EXPECT_EQ(in_log.calls, 1);
    EXPECT_FALSE(out_log.other_had_grad); // w_out finished first
    EXPECT_TRUE(in_log.other_had_grad);
    EXPECT_DOUBLE_EQ(out_log.own_grad, std::exp(6.0));
    EXPECT_NEAR(in_log.own_grad, 3 * 5 * std::exp(6.0) + 1, 1e-9); // the summed gradient
    // A second backward accumulates; the hook sees the sum in .grad.
    ASSERT_EQ(tg_backward(tg_sum(tg_mul_scalar(w_out, 2))), TG_OK);
    EXPECT_EQ(out_log.calls, 2);
    EXPECT_DOUBLE_EQ(out_log.own_grad, std::exp(6.0) + 2);
    EXPECT_TRUE(tg_remove_post_accumulate_grad_hook(w_out, post_hook, &out_log));
    EXPECT_FALSE(tg_remove_post_accumulate_grad_hook(w_out, post_hook, &out_log));
    ASSERT_EQ(tg_backward(tg_sum(w_out)), TG_OK);
    EXPECT_EQ(out_log.calls, 2);
}

TEST_F(TgTest, PostAccumulateHookBadInput) {
    tg_tensor *x = tensor_f32({1}, TG_SHAPE(1), true);
    tg_tensor *y = tg_mul_scalar(x, 2);
    tg_tensor *c = tensor_f32({1}, TG_SHAPE(1), false);
    PostHookLog log;
    tg_clear_error();
    EXPECT_EQ(tg_register_post_accumulate_grad_hook(y, post_hook, &log), TG_ERROR);
    EXPECT_ERROR_CONTAINS("only be registered on leaf tensors, not on the output of 'mul_scalar'");
    tg_clear_error();
    EXPECT_EQ(tg_register_post_accumulate_grad_hook(c, post_hook, &log), TG_ERROR);
    EXPECT_ERROR_CONTAINS("does not require grad");
    tg_clear_error();
    EXPECT_EQ(tg_register_post_accumulate_grad_hook(x, nullptr, &log), TG_ERROR);
    EXPECT_ERROR_CONTAINS("the hook is NULL");
}

TEST_F(TgTest, LongChainBackpropagatesWithoutRecursion) {
    tg_tensor *x = tensor_f64({1.0}, TG_SHAPE(1), true);
    tg_tensor *y = x;
    const int n = 100000;
    TG_SCOPE {
        for (int i = 0; i < n; i++) {
            tg_tensor *next = tg_mul_scalar(y, 1.00001);
            y = next;
        }
        y = tg_scope_return(y);
    }
    // Only y (and its chain of nodes) survives the inner scope.
    EXPECT_EQ(tg_live_graph_nodes(), live_nodes_ + n);
    ASSERT_EQ(tg_backward(y), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), {std::pow(1.00001, n)}, 1e-9, 1e-9));
    // The TgTest teardown checks that releasing y frees all 100,000 nodes (iteratively).
}

TEST_F(TgTest, SecondDerivativeWithCreateGraph) {
    tg_tensor *x = tensor_f64({2.0, -1.0}, TG_SHAPE(2), true);
    tg_tensor *y = tg_sum(tg_pow_scalar(x, 3));
    tg_tensor *grads[1] = {nullptr};
    ASSERT_EQ(tg_grad_of(&y, nullptr, 1, &x, 1, grads, tg_backward_opts{nullptr, false, true}), TG_OK);
    EXPECT_TRUE(tensor_near(grads[0], {12, 3}, 1e-12)); // 3x^2
    EXPECT_EQ(tg_grad(x), nullptr);                     // grad_of does not accumulate
    ASSERT_EQ(tg_backward(tg_sum(grads[0])), TG_OK);    // d/dx sum(3x^2) = 6x
    EXPECT_TRUE(tensor_near(tg_grad(x), {12, -6}, 1e-12));
}

TEST_F(TgTest, GradOfNonLeafAndUnreachedInputs) {
    tg_tensor *x = tensor_f32({1, 2}, TG_SHAPE(2), true);
    tg_tensor *unused = tensor_f32({5}, TG_SHAPE(1), true);
    tg_tensor *h = tg_mul_scalar(x, 2);
    tg_tensor *y = tg_sum(tg_mul(h, h));
    tg_tensor *inputs[2] = {h, unused}, *grads[2];
    ASSERT_EQ(tg_grad_of(&y, nullptr, 1, inputs, 2, grads, tg_backward_opts{}), TG_OK);
    EXPECT_TRUE(tensor_near(grads[0], {4, 8}, 1e-6));
    EXPECT_EQ(grads[1], nullptr);
}

TEST_F(TgTest, NonScalarBackwardNeedsAGradient) {
    tg_tensor *x = tensor_f32({1, 2}, TG_SHAPE(2), true);
    tg_tensor *y = tg_mul(x, x);
    EXPECT_EQ(tg_backward(y), TG_ERROR);
    EXPECT_STREQ(tg_last_error(),
                 "tg_backward: a gradient can be implied only for single-element outputs; output 0 has "
                 "shape [2], pass its gradient");
    tg_tensor *g = tensor_f32({1, 10}, TG_SHAPE(2));
    ASSERT_EQ(tg_backward_with(y, .gradient = g), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), {2, 40}, 1e-6));
    // The gradient given is not aliased into .grad (accumulating must not write into g).
    ASSERT_EQ(tg_backward_with(tg_mul_scalar(x, 1), .gradient = g), TG_OK);
    EXPECT_TRUE(tensor_near(g, {1, 10}, 0));
}

TEST_F(TgTest, AddGivesIndependentGradientsToBothLeaves) {
    tg_tensor *a = tensor_f32({1}, TG_SHAPE(1), true), *b = tensor_f32({2}, TG_SHAPE(1), true);
    ASSERT_EQ(tg_backward(tg_add(a, b)), TG_OK);
    ASSERT_EQ(tg_backward(tg_mul_scalar(a, 5)), TG_OK); // accumulates in place into a.grad only
    EXPECT_TRUE(tensor_near(tg_grad(a), {6}, 1e-6));
    EXPECT_TRUE(tensor_near(tg_grad(b), {1}, 1e-6));
}

TEST_F(TgTest, AnomalyModeNamesTheOp) {
    tg_set_detect_anomaly(true);
    tg_tensor *x = tensor_f32({0, 1}, TG_SHAPE(2), true);
    tg_tensor *y = tg_sum(tg_log(x)); // d/dx log(x) = 1/x: Inf at 0
    EXPECT_EQ(tg_backward(y), TG_ERROR);
    tg_set_detect_anomaly(false);
    EXPECT_ERROR_CONTAINS("anomaly detected: backward of 'log'");
    EXPECT_ERROR_CONTAINS("inputs [2]");
}

TEST_F(TgTest, WrongGradientShapeNamesTheOp) {
    static const tg_function bad = {
        .name = "bad_grad",
        .num_inputs = 1,
        .forward = [](tg_ctx *, tg_tensor *const *in) -> tg_tensor * { return tg_mul_scalar(in[0], 2); },
        .backward = [](tg_ctx *, tg_tensor *, tg_tensor **gi) { gi[0] = tg_ones(TG_SHAPE(5), tg_opts{}); },
        .num_outputs = 1,
        .low_precision = TG_LOW_PRECISION_REFUSE,
        .autocast = TG_AUTOCAST_NONE};
    tg_tensor *x = tensor_f32({1, 2}, TG_SHAPE(2), true);
    tg_tensor *y = tg_sum(tg_apply(&bad, &x));
    EXPECT_EQ(tg_backward(y), TG_ERROR);
    EXPECT_ERROR_CONTAINS("bad_grad (#");
    EXPECT_ERROR_CONTAINS("backward returned a gradient of shape [5] for input 0 of shape [2]");
}

namespace {
// A two-output function: (x + 1, floor-ish indices) where the second output is not differentiable.
tg_tensor *split_forward(tg_ctx *ctx, tg_tensor *const *in) {
    tg_ctx_set_output(ctx, 1, tg_cast(in[0], TG_INT64));
    tg_ctx_mark_non_differentiable(ctx, 1);
    return tg_add_scalar(in[0], 1);
}
void split_backward(tg_ctx *, tg_tensor *g, tg_tensor **gi) { gi[0] = g; }
const tg_function split = {.name = "split",
                           .num_inputs = 1,
                           .forward = split_forward,
                           .backward = split_backward,
                           .num_outputs = 2,
                           .low_precision = TG_LOW_PRECISION_REFUSE,
                           .autocast = TG_AUTOCAST_NONE};
} // namespace

TEST_F(TgTest, MultiOutputWithANonDifferentiableOutput) {
    tg_tensor *x = tensor_f32({1.5f, 2.5f}, TG_SHAPE(2), true);
    tg_tensor *out[2];
    ASSERT_EQ(tg_apply_multi(&split, &x, out), TG_OK);
    EXPECT_TRUE(tg_requires_grad(out[0]));
    EXPECT_FALSE(tg_requires_grad(out[1]));
    EXPECT_TRUE(tensor_near(out[1], {1, 2}, 0));
    ASSERT_EQ(tg_backward(tg_sum(out[0])), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), {1, 1}, 0));
}

TEST_F(TgTest, GraphDotListsOpsAndLeaves) {
    tg_tensor *x = tensor_f32({1, 2}, TG_SHAPE(2), true);
    tg_tensor *y = tg_sum(tg_exp(tg_mul(x, x)));
    char *buf = nullptr;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    ASSERT_EQ(tg_graph_dot(y, f), TG_OK);
    fclose(f);
    std::string dot(buf);
    free(buf);
    EXPECT_EQ(dot.rfind("digraph tapegrad {", 0), 0u);
    EXPECT_NE(dot.find("label=\"sum #"), std::string::npos);
    EXPECT_NE(dot.find("label=\"exp #"), std::string::npos);
    EXPECT_NE(dot.find("label=\"mul #"), std::string::npos);
    EXPECT_NE(dot.find("label=\"leaf [2]\\nrequires_grad\""), std::string::npos);
}
