// Autocast (autograd/autocast.h): each op's output dtype under CPU bfloat16 autocast
// against PyTorch 1.13's (tests/fixtures/gen_autocast.py), nesting and disabling,
// float32 gradients for float32 parameters (an MLP's values against PyTorch), the
// CUDA-only float32 list, refusals of unusable dtypes, and no autocast inside
// backward.
#include <functional>

#include "test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &autocast_fixtures() {
    static const std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/autocast.txt");
    return fx;
}
const FixtureTensor &fx(const std::string &name) { return fixture_tensor(autocast_fixtures(), name); }

tg_tensor *r(tg_shape s, tg_dtype dt) { return tg_cast(tg_randn(s, tg_opts{}), dt); }
tg_tensor *idx3() { return tensor_i64({0, 1, 2}, TG_SHAPE(3)); }

using Op = std::function<tg_tensor *(tg_dtype)>;

const std::vector<std::pair<std::string, Op>> &ops() {
    static const std::vector<std::pair<std::string, Op>> list = {
        {"matmul", [](tg_dtype d) { return tg_matmul(r(TG_SHAPE(3, 4), d), r(TG_SHAPE(4, 5), d)); }},
        {"matmul_batched", [](tg_dtype d) { return tg_matmul(r(TG_SHAPE(2, 3, 4), d), r(TG_SHAPE(2, 4, 5), d)); }},
        {"addmm",
         [](tg_dtype d) { return tg_addmm(r(TG_SHAPE(5), d), r(TG_SHAPE(3, 4), d), r(TG_SHAPE(4, 5), d), 1, 1); }},
        {"baddbmm",
         [](tg_dtype d) {
             return tg_baddbmm(r(TG_SHAPE(2, 3, 5), d), r(TG_SHAPE(2, 3, 4), d), r(TG_SHAPE(2, 4, 5), d), 1, 1);
         }},
        {"linear", [](tg_dtype d) { return tg_linear(r(TG_SHAPE(3, 4), d), r(TG_SHAPE(5, 4), d), r(TG_SHAPE(5), d)); }},
        {"conv2d",
         [](tg_dtype d) {
             return tg_conv2d(r(TG_SHAPE(1, 2, 5, 5), d), r(TG_SHAPE(3, 2, 3, 3), d), r(TG_SHAPE(3), d),
                              tg_conv_opts{});
         }},
        {"softmax", [](tg_dtype d) { return tg_softmax(r(TG_SHAPE(3, 4), d), 1); }},
        {"log_softmax", [](tg_dtype d) { return tg_log_softmax(r(TG_SHAPE(3, 4), d), 1); }},
        {"cross_entropy", [](tg_dtype d) { return tg_cross_entropy(r(TG_SHAPE(3, 4), d), idx3()); }},
        {"nll_loss", [](tg_dtype d) { return tg_nll_loss(r(TG_SHAPE(3, 4), d), idx3()); }},
        {"mse_loss", [](tg_dtype d) { return tg_mse_loss(r(TG_SHAPE(3, 4), d), r(TG_SHAPE(3, 4), d)); }},
        {"l1_loss", [](tg_dtype d) { return tg_l1_loss(r(TG_SHAPE(3, 4), d), r(TG_SHAPE(3, 4), d)); }},
        {"bce_with_logits",
         [](tg_dtype d) {
             return tg_binary_cross_entropy_with_logits(r(TG_SHAPE(3, 4), d),
                                                        tg_cast(tg_rand(TG_SHAPE(3, 4), tg_opts{}), d));
         }},
        {"layer_norm",
         [](tg_dtype d) { return tg_layer_norm(r(TG_SHAPE(3, 4), d), 1, r(TG_SHAPE(4), d), r(TG_SHAPE(4), d), 1e-5); }},
        {"exp", [](tg_dtype d) { return tg_exp(r(TG_SHAPE(3), d)); }},
        {"log", [](tg_dtype d) { return tg_log(tg_abs(r(TG_SHAPE(3), d))); }},
        {"pow", [](tg_dtype d) { return tg_pow_scalar(r(TG_SHAPE(3), d), 2); }},
        {"sum", [](tg_dtype d) { return tg_sum(r(TG_SHAPE(3), d)); }},
        {"mean", [](tg_dtype d) { return tg_mean(r(TG_SHAPE(3), d)); }},
        {"relu", [](tg_dtype d) { return tg_relu(r(TG_SHAPE(3), d)); }},
        {"add", [](tg_dtype d) { return tg_add(r(TG_SHAPE(3), d), r(TG_SHAPE(3), d)); }},
        {"max_pool2d",
         [](tg_dtype d) { return tg_max_pool2d(r(TG_SHAPE(1, 1, 4, 4), d), tg_pool_opts{.kernel_size = 2}, nullptr); }},
        {"avg_pool2d",
         [](tg_dtype d) { return tg_avg_pool2d(r(TG_SHAPE(1, 1, 4, 4), d), tg_pool_opts{.kernel_size = 2}); }},
        {"norm", [](tg_dtype d) { return tg_norm(r(TG_SHAPE(3), d), 2, nullptr, 0, false); }},
        {"logsumexp", [](tg_dtype d) { return tg_logsumexp(r(TG_SHAPE(3), d), 0, false); }},
        {"cumsum", [](tg_dtype d) { return tg_cumsum(r(TG_SHAPE(3), d), 0); }},
        {"gelu", [](tg_dtype d) { return tg_gelu(r(TG_SHAPE(3), d)); }},
        {"sigmoid", [](tg_dtype d) { return tg_sigmoid(r(TG_SHAPE(3), d)); }},
        {"embedding",
         [](tg_dtype d) {
             return tg_embedding(r(TG_SHAPE(3, 4), d), tensor_i64({0, 1}, TG_SHAPE(2)), tg_embedding_opts{});
         }},
        {"add_with_bf16", [](tg_dtype d) { return tg_add(r(TG_SHAPE(2), d), r(TG_SHAPE(2), TG_BFLOAT16)); }},
        {"matmul_with_bf16",
         [](tg_dtype d) { return tg_matmul(r(TG_SHAPE(3, 4), d), r(TG_SHAPE(4, 5), TG_BFLOAT16)); }},
        {"linear_float64",
         [](tg_dtype) { return tg_linear(r(TG_SHAPE(3, 4), TG_FLOAT64), r(TG_SHAPE(5, 4), TG_FLOAT64), nullptr); }},
    };
    return list;
}

using AutocastTest = TgTest;

TEST_F(AutocastTest, OutputDtypesMatchPyTorchCpuBfloat16) {
    EXPECT_FALSE(tg_is_autocast_enabled(TG_DEVICE_CPU));
    EXPECT_EQ(tg_get_autocast_dtype(TG_DEVICE_CPU), TG_BFLOAT16);
    int checked = 0;
    TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) {
        EXPECT_TRUE(tg_is_autocast_enabled(TG_DEVICE_CPU));
        EXPECT_FALSE(tg_is_autocast_enabled(TG_DEVICE_CUDA));
        for (const auto &[name, op] : ops()) {
            const FixtureTensor &want = fx("dtype_" + name);
            ASSERT_EQ(want.data.size(), 2u) << name;
            tg_dtype ins[2] = {TG_FLOAT32, TG_BFLOAT16};
            for (int k = 0; k < 2; k++) {
                TG_SCOPE {
                    tg_tensor *y = op(ins[k]);
                    ASSERT_NE(y, nullptr) << name << ": " << tg_last_error();
                    EXPECT_EQ(tg_dtype_of(y), (tg_dtype)(int)want.data[k])
                        << name << " with " << tg_dtype_name(ins[k]) << " inputs gave "
                        << tg_dtype_name(tg_dtype_of(y));
                    checked++;
                }
            }
        }
    }
    EXPECT_EQ(checked, 2 * (int)ops().size());
    EXPECT_FALSE(tg_is_autocast_enabled(TG_DEVICE_CPU));
}

TEST_F(AutocastTest, NestsAndDisablesLikeTorchAutocast) {
    auto mm = [] { return tg_dtype_of(tg_matmul(r(TG_SHAPE(2, 2), TG_FLOAT32), r(TG_SHAPE(2, 2), TG_FLOAT32))); };
    EXPECT_EQ(mm(), TG_FLOAT32);
    TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) {
        EXPECT_EQ(mm(), TG_BFLOAT16);
        TG_AUTOCAST_IF(TG_DEVICE_CPU, TG_BFLOAT16, false) {
            EXPECT_FALSE(tg_is_autocast_enabled(TG_DEVICE_CPU));
            EXPECT_EQ(mm(), (tg_dtype)(int)fx("dtype_disabled_matmul").data[0]);
            TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) { EXPECT_EQ(mm(), TG_BFLOAT16); }
            EXPECT_EQ(mm(), TG_FLOAT32);
        }
        EXPECT_EQ(mm(), (tg_dtype)(int)fx("dtype_after_disabled_matmul").data[0]);
        // CUDA autocast does not touch CPU tensors.
        TG_AUTOCAST_IF(TG_DEVICE_CPU, TG_BFLOAT16, false) {
            TG_AUTOCAST(TG_DEVICE_CUDA, TG_FLOAT16) { EXPECT_EQ(mm(), TG_FLOAT32); }
        }
    }
    EXPECT_EQ(mm(), TG_FLOAT32);
    // Left by return (the cleanup restores the state).
    auto leave_early = [&] {
        TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) { return; }
    };
    leave_early();
    EXPECT_FALSE(tg_is_autocast_enabled(TG_DEVICE_CPU));
}

TEST_F(AutocastTest, UnusableDtypeIsAnErrorAndLeavesAutocastOff) {
    tg_clear_error();
    TG_AUTOCAST(TG_DEVICE_CPU, TG_FLOAT16) {
        EXPECT_ERROR_CONTAINS("tg_set_autocast: CPU autocast supports bfloat16, not float16");
        EXPECT_FALSE(tg_is_autocast_enabled(TG_DEVICE_CPU));
    }
    tg_clear_error();
    TG_AUTOCAST(TG_DEVICE_CUDA, TG_FLOAT32) {
        EXPECT_ERROR_CONTAINS("CUDA autocast supports float16 and bfloat16, not float32");
    }
    TG_AUTOCAST(TG_DEVICE_CUDA, TG_BFLOAT16) { EXPECT_EQ(tg_get_autocast_dtype(TG_DEVICE_CUDA), TG_BFLOAT16); }
    EXPECT_EQ(tg_get_autocast_dtype(TG_DEVICE_CUDA), TG_FLOAT16);
}

TEST_F(AutocastTest, MlpMatchesPyTorchAndFloat32ParametersGetFloat32Gradients) {
    tg_tensor *x = fx("mlp_x").make(TG_FLOAT32), *y = fx("mlp_y").make(TG_INT64);
    tg_tensor *w1 = fx("mlp_w1").make(TG_FLOAT32, true), *b1 = fx("mlp_b1").make(TG_FLOAT32, true);
    tg_tensor *w2 = fx("mlp_w2").make(TG_FLOAT32, true), *b2 = fx("mlp_b2").make(TG_FLOAT32, true);
    tg_tensor *logits = nullptr, *loss = nullptr;
    TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) {
        logits = tg_linear(tg_relu(tg_linear(x, w1, b1)), w2, b2);
        loss = tg_cross_entropy(logits, y);
    }
    ASSERT_NE(loss, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(logits), TG_BFLOAT16);
    EXPECT_EQ(tg_dtype_of(loss), TG_FLOAT32);
    // Two bfloat16 ulps of the largest logit: PyTorch's GEMM rounds partial sums.
    EXPECT_TRUE(tensor_near(logits, fx("mlp_logits").data, 0.03, 0.01));
    EXPECT_TRUE(tensor_near(loss, fx("mlp_loss").data, 0.01, 0.01));
    ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
    const char *names[] = {"w1", "b1", "w2", "b2"};
    tg_tensor *params[] = {w1, b1, w2, b2};
    for (int i = 0; i < 4; i++) {
        tg_tensor *g = tg_grad(params[i]);
        ASSERT_NE(g, nullptr) << names[i];
        EXPECT_EQ(tg_dtype_of(g), TG_FLOAT32) << names[i];
        EXPECT_TRUE(tensor_near(g, fx(std::string("mlp_grad_") + names[i]).data, 0.01, 0.02)) << names[i];
    }
}

TEST_F(AutocastTest, BackwardInsideTheRegionIsNotAutocast) {
    tg_tensor *w = tg_requires_grad_(r(TG_SHAPE(3, 3), TG_FLOAT32), true);
    TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) {
        tg_tensor *loss = tg_sum(tg_matmul(w, w)); /* bfloat16 product, bfloat16 sum */
        EXPECT_EQ(tg_dtype_of(loss), TG_BFLOAT16);
        ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
    }
    ASSERT_NE(tg_grad(w), nullptr);
    EXPECT_EQ(tg_dtype_of(tg_grad(w)), TG_FLOAT32);
}

TEST_F(AutocastTest, CudaListCastsSoftmaxOnlyForCudaTensors) {
    // CPU tensors under CUDA autocast are untouched; the CUDA float32 list (softmax,
    // exp, sum, ...) is checked on a GPU in tests/cuda/autocast_test.cc.
    TG_AUTOCAST(TG_DEVICE_CUDA, TG_FLOAT16) {
        tg_tensor *s = tg_softmax(r(TG_SHAPE(2, 3), TG_BFLOAT16), 1);
        ASSERT_NE(s, nullptr) << tg_last_error();
        EXPECT_EQ(tg_dtype_of(s), TG_BFLOAT16);
    }
}

} // namespace
