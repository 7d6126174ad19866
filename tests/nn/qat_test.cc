// Quantisation-aware training of the tutorials' LeNet (quant/qat.h) against PyTorch
// 1.13 (tests/fixtures/gen_qat.py): the same weights and data from seed 0, fused,
// prepare_qat with the onednn QAT qconfig, four SGD steps with fake-quantised
// weights and activations, then convert. Checked: the losses, the trained weights,
// the learnt qparams, and the int8 model's output (within one quantisation step of the
// last layer; measured 4.4e-7, a step being 7.1e-4).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

tg_module *make_lenet() {
    tg_pool_opts pool2 = {};
    pool2.kernel_size = 2;
    return TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 20, 5, tg_conv_opts{}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                            tg_nn_conv2d(20, 50, 5, tg_conv_opts{}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                            tg_nn_flatten(1, -1), tg_nn_linear(800, 500, tg_linear_opts{}), tg_nn_relu(),
                            tg_nn_linear(500, 10, tg_linear_opts{}));
}

class QatTest : public TgTest {
  protected:
    std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/qat.txt");
};

TEST_F(QatTest, LeNetTrainsAndConvertsAsPyTorch) {
    tg_manual_seed(0);
    tg_module *model = tg_quant_wrapper(make_lenet());
    std::vector<tg_tensor *> xs, ys;
    for (int i = 0; i < 4; i++) xs.push_back(tg_rand(TG_SHAPE(8, 1, 28, 28), tg_opts{}));
    for (int i = 0; i < 4; i++) ys.push_back(tg_randint(0, 10, TG_SHAPE(8), tg_opts{.dtype = TG_INT64}));
    tg_tensor *test = tg_rand(TG_SHAPE(5, 1, 28, 28), tg_opts{});
    EXPECT_TRUE(tensor_near(tg_stack(ys.data(), 4, 0), fixture_tensor(fx, "labels").data, 0, 0));

    for (auto [a, b] :
         {std::pair{"module.0", "module.1"}, std::pair{"module.3", "module.4"}, std::pair{"module.7", "module.8"}})
        ASSERT_EQ(tg_fuse_modules(model, a, b), TG_OK) << tg_last_error();
    tg_qconfig qc = tg_get_default_qat_qconfig("onednn");
    ASSERT_EQ(tg_quant_prepare_qat(model, qc), TG_OK) << tg_last_error();
    EXPECT_STREQ(tg_module_type_of(tg_module_child(tg_module_child(model, "module"), "0"))->name, "QATConvReLU2d");
    int n = 0;
    const tg_named_tensor *sd = tg_state_dict(model, &n);
    ASSERT_GE(n, 10);
    EXPECT_STREQ(sd[0].name, "quant.activation_post_process.fake_quant_enabled");
    EXPECT_STREQ(sd[7].name, "module.0.weight");
    EXPECT_STREQ(sd[9].name, "module.0.weight_fake_quant.fake_quant_enabled");

    tg_optim *opt = tg_sgd(model, tg_sgd_opts{.lr = 0.05, .momentum = 0.9});
    const std::vector<double> &losses = fixture_tensor(fx, "losses").data;
    for (int i = 0; i < 4; i++) {
        TG_SCOPE {
            tg_tensor *loss = tg_cross_entropy(tg_forward(model, xs[i]), ys[i]);
            ASSERT_NE(loss, nullptr) << tg_last_error();
            tg_optim_zero_grad(opt);
            ASSERT_EQ(tg_backward(loss), TG_OK);
            tg_optim_step(opt);
            EXPECT_NEAR(tg_item(loss), losses[i], 1e-5) << "step " << i;
        }
    }
    tg_optim_free(opt);
    TG_SCOPE {
        for (const char *name : {"module.0.weight", "module.7.weight", "module.9.bias"})
            EXPECT_NEAR(tg_item(tg_sum(tg_cast(tg_module_get(model, name), TG_FLOAT64))),
                        fixture_tensor(fx, std::string("trained_sum_") + name).data[0], 1e-4)
                << name;
        for (const char *name : {"quant", "module.0", "module.3", "module.7", "module.9"}) {
            std::string p = std::string(name) + ".activation_post_process.";
            EXPECT_TRUE(tensor_near(tg_module_get(model, (p + "scale").c_str()),
                                    fixture_tensor(fx, std::string("fq_") + name + "_scale").data, 0, 1e-5))
                << name;
            EXPECT_TRUE(tensor_near(tg_module_get(model, (p + "zero_point").c_str()),
                                    fixture_tensor(fx, std::string("fq_") + name + "_zero_point").data, 0, 0))
                << name;
        }
        tg_eval(model);
        TG_NO_GRAD { // PyTorch's eval forward still observes (FakeQuantize ignores eval)
            EXPECT_TRUE(tensor_near(tg_forward(model, test), fixture_tensor(fx, "qat_eval_out").data, 2e-5, 0));
        }
    }
    ASSERT_EQ(tg_quant_convert(model, qc), TG_OK) << tg_last_error();
    EXPECT_STREQ(tg_module_type_of(tg_module_child(tg_module_child(model, "module"), "0"))->name,
                 "QuantizedConvReLU2d");
    EXPECT_STREQ(tg_module_type_of(tg_module_child(tg_module_child(model, "module"), "9"))->name, "QuantizedLinear");
    TG_SCOPE {
        EXPECT_TRUE(tensor_near(tg_module_get(model, "module.0.weight_scale"),
                                fixture_tensor(fx, "q0_weight_scale").data, 0, 1e-5));
        double step = fixture_tensor(fx, "q9_scale").data[0];
        std::vector<double> ours = values(tg_forward(model, test)), theirs = fixture_tensor(fx, "q_out").data;
        double diff = 0;
        for (size_t i = 0; i < ours.size(); i++) diff = std::fmax(diff, std::fabs(ours[i] - theirs[i]));
        printf("QAT LeNet int8 vs PyTorch: max |diff| %g (one step %g)\n", diff, step);
        EXPECT_LE(diff, step * 1.0001);
    }
    tg_module_free(model);
}

} // namespace
