// Module forward pre-hooks and forward hooks (register_forward_pre_hook /
// register_forward_hook with a removable handle): order, replacing the input and
// the output, errors from a hook, removal (also from inside a hook), and hooks on
// children of a Sequential.
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

struct Log {
    std::vector<std::string> calls;
};

tg_status log_pre(tg_module *m, tg_tensor **input, void *user) {
    static_cast<Log *>(user)->calls.push_back(std::string("pre:") + tg_module_type_of(m)->name);
    return TG_OK;
}
tg_status log_post(tg_module *m, tg_tensor *, tg_tensor **, void *user) {
    static_cast<Log *>(user)->calls.push_back(std::string("post:") + tg_module_type_of(m)->name);
    return TG_OK;
}
tg_status double_input(tg_module *, tg_tensor **input, void *) {
    *input = tg_mul_scalar(*input, 2.0);
    return *input ? TG_OK : TG_ERROR;
}
// Records the input it saw and adds one to the output.
tg_status add_one_to_output(tg_module *, tg_tensor *input, tg_tensor **output, void *user) {
    *static_cast<double *>(user) = values(input)[0];
    *output = tg_add_scalar(*output, 1.0);
    return *output ? TG_OK : TG_ERROR;
}
tg_status failing_pre(tg_module *m, tg_tensor **, void *) {
    return tg_error("hook refused the input of %s", tg_module_type_of(m)->name);
}

class HooksTest : public TgTest {};

} // namespace

TEST_F(HooksTest, PreHookReplacesInputAndHookReplacesOutput) {
    tg_module *relu = tg_nn_relu();
    double seen = 0;
    tg_hook_handle pre = tg_register_forward_pre_hook(relu, double_input, nullptr);
    tg_hook_handle post = tg_register_forward_hook(relu, add_one_to_output, &seen);
    ASSERT_NE(pre.id, 0u);
    tg_tensor *x = tensor_f32({-1, 3}, TG_SHAPE(2));
    // relu(2x) + 1; the forward hook sees the input the pre-hook left
    EXPECT_TRUE(tensor_near(tg_forward(relu, x), {1, 7}, 0));
    EXPECT_EQ(seen, -2);
    EXPECT_TRUE(tg_hook_remove(pre));
    EXPECT_FALSE(tg_hook_remove(pre)) << "a second remove does nothing";
    EXPECT_TRUE(tensor_near(tg_forward(relu, x), {1, 4}, 0));
    EXPECT_EQ(seen, -1);
    EXPECT_TRUE(tg_hook_remove(post));
    EXPECT_TRUE(tensor_near(tg_forward(relu, x), {0, 3}, 0));
    tg_module_free(relu);
}

TEST_F(HooksTest, GradientFlowsThroughReplacedTensors) {
    tg_module *lin = tg_nn_linear(2, 1, tg_linear_opts{.no_bias = true});
    TG_NO_GRAD { tg_copy_(tg_module_param(lin, "weight"), tensor_f32({3, 5}, TG_SHAPE(1, 2))); }
    double seen = 0;
    tg_register_forward_pre_hook(lin, double_input, nullptr);
    tg_register_forward_hook(lin, add_one_to_output, &seen);
    tg_tensor *x = tensor_f32({1, 2}, TG_SHAPE(1, 2), true);
    tg_tensor *y = tg_forward(lin, x); // w . 2x + 1 = 27
    EXPECT_TRUE(tensor_near(y, {27}, 0));
    ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), {6, 10}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(tg_module_param(lin, "weight")), {2, 4}, 0));
    tg_module_free(lin);
}

TEST_F(HooksTest, OrderAcrossASequential) {
    Log log;
    tg_module *net = TG_NN_SEQUENTIAL(tg_nn_linear(2, 2, tg_linear_opts{}), tg_nn_tanh());
    tg_register_forward_pre_hook(net, log_pre, &log);
    tg_register_forward_hook(net, log_post, &log);
    tg_register_forward_hook(tg_module_child(net, "0"), log_post, &log);
    tg_register_forward_pre_hook(tg_module_child(net, "1"), log_pre, &log);
    tg_register_forward_hook(tg_module_child(net, "1"), log_post, &log);
    ASSERT_NE(tg_forward(net, tensor_f32({1, 2}, TG_SHAPE(1, 2))), nullptr) << tg_last_error();
    EXPECT_EQ(log.calls,
              (std::vector<std::string>{"pre:Sequential", "post:Linear", "pre:Tanh", "post:Tanh", "post:Sequential"}));
    tg_module_free(net);
}

namespace {
struct SelfRemoving {
    tg_hook_handle handle;
    int calls;
};
tg_status remove_self(tg_module *, tg_tensor **, void *user) {
    SelfRemoving *s = static_cast<SelfRemoving *>(user);
    s->calls++;
    tg_hook_remove(s->handle);
    return TG_OK;
}
} // namespace

TEST_F(HooksTest, AHookMayRemoveItselfWhileRunning) {
    Log log;
    tg_module *relu = tg_nn_relu();
    SelfRemoving once = {};
    once.handle = tg_register_forward_pre_hook(relu, remove_self, &once);
    tg_register_forward_pre_hook(relu, log_pre, &log);
    tg_tensor *x = tensor_f32({1}, TG_SHAPE(1));
    ASSERT_NE(tg_forward(relu, x), nullptr);
    ASSERT_NE(tg_forward(relu, x), nullptr);
    EXPECT_EQ(once.calls, 1);
    EXPECT_EQ(log.calls.size(), 2u) << "the hook after the removed one runs every time, once";
    tg_module_free(relu);
}

TEST_F(HooksTest, AFailingHookFailsTheForward) {
    Log log;
    tg_module *relu = tg_nn_relu();
    tg_register_forward_pre_hook(relu, failing_pre, nullptr);
    tg_register_forward_hook(relu, log_post, &log);
    tg_clear_error();
    EXPECT_EQ(tg_forward(relu, tensor_f32({1}, TG_SHAPE(1))), nullptr);
    EXPECT_ERROR_CONTAINS("hook refused the input of ReLU");
    EXPECT_TRUE(log.calls.empty()) << "neither the forward nor later hooks run";
    tg_module_free(relu);
}

TEST_F(HooksTest, BadRegistrations) {
    tg_clear_error();
    tg_hook_handle h = tg_register_forward_hook(nullptr, log_post, nullptr);
    EXPECT_EQ(h.id, 0u);
    EXPECT_ERROR_CONTAINS("tg_register_forward_hook: module is NULL");
    tg_module *relu = tg_nn_relu();
    tg_clear_error();
    h = tg_register_forward_pre_hook(relu, nullptr, nullptr);
    EXPECT_EQ(h.id, 0u);
    EXPECT_ERROR_CONTAINS("tg_register_forward_pre_hook: the hook function is NULL");
    EXPECT_FALSE(tg_hook_remove(h));
    tg_module_free(relu);
}

namespace {
tg_status drop_output(tg_module *, tg_tensor *, tg_tensor **output, void *) {
    *output = nullptr;
    return TG_OK;
}
} // namespace

TEST_F(HooksTest, AHookThatLosesTheOutputIsAnError) {
    tg_module *relu = tg_nn_relu();
    tg_register_forward_hook(relu, drop_output, nullptr);
    tg_clear_error();
    EXPECT_EQ(tg_forward(relu, tensor_f32({1}, TG_SHAPE(1))), nullptr);
    EXPECT_ERROR_CONTAINS("ReLU: a forward hook set the output to NULL");
    tg_module_free(relu);
}
