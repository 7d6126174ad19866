// The FakeQuantize module (quant/fake_quantize.h) against PyTorch 1.13's
// (tests/fixtures/gen_fake_quantize.py): an activation FakeQuantize (moving-average
// min-max, quint8) and default_per_channel_weight_fake_quant (moving-average per
// channel, qint8 symmetric) over four batches with the observer and the fake
// quantisation switched off in turn: outputs, input gradients, scale and zero point.
#include <map>
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

class FakeQuantizeModuleTest : public TgTest {
  protected:
    std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/fake_quantize.txt");
};

TEST_F(FakeQuantizeModuleTest, MatchesPyTorchWithObserverAndFakeQuantToggled) {
    tg_module *act = tg_nn_fake_quantize(tg_nn_moving_average_minmax_observer(tg_observer_opts{}));
    tg_module *wt = tg_nn_fake_quantize(tg_nn_moving_average_per_channel_minmax_observer(
        tg_observer_opts{.dtype = TG_QINT8, .qscheme = TG_PER_CHANNEL_SYMMETRIC}));
    ASSERT_TRUE(act && wt) << tg_last_error();
    bool steps[4][2] = {{true, true}, {true, true}, {false, true}, {true, false}};
    for (int i = 0; i < 4; i++) {
        for (auto [tag, fq] : {std::pair{"act", act}, std::pair{"wt", wt}}) {
            EXPECT_EQ(tg_fake_quant_enable_observer(fq, steps[i][0]), 1);
            EXPECT_EQ(tg_fake_quant_enable_fake_quant(fq, steps[i][1]), 1);
            std::string p = std::string(tag) + "_" + std::to_string(i) + "_";
            TG_SCOPE {
                auto &b = fixture_tensor(fx, "batch" + std::to_string(i));
                tg_tensor *x = b.make(TG_FLOAT32, true);
                tg_tensor *y = tg_forward(fq, x);
                ASSERT_NE(y, nullptr) << tg_last_error();
                EXPECT_TRUE(tensor_near(y, fixture_tensor(fx, p + "y").data, 0, 0)) << p;
                ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, tg_flip(b.make(TG_FLOAT32), (const int[]){0}, 1)))), TG_OK);
                EXPECT_TRUE(tensor_near(tg_grad(x), fixture_tensor(fx, p + "grad").data, 0, 0)) << p;
                EXPECT_TRUE(tensor_near(tg_module_buffer(fq, "scale"), fixture_tensor(fx, p + "scale").data, 0, 0))
                    << p;
                EXPECT_TRUE(
                    tensor_near(tg_module_buffer(fq, "zero_point"), fixture_tensor(fx, p + "zero_point").data, 0, 0))
                    << p;
            }
        }
    }
    int n = 0;
    const tg_named_tensor *sd = tg_state_dict(wt, &n);
    const char *names[] = {"fake_quant_enabled",
                           "observer_enabled",
                           "scale",
                           "zero_point",
                           "activation_post_process.eps",
                           "activation_post_process.min_val",
                           "activation_post_process.max_val"};
    ASSERT_EQ(n, 7);
    for (int i = 0; i < 7; i++) EXPECT_STREQ(sd[i].name, names[i]);
    EXPECT_EQ(tg_dtype_of(sd[0].tensor), TG_UINT8);
    EXPECT_EQ(tg_dtype_of(sd[3].tensor), TG_INT32);
    tg_module_free(act);
    tg_module_free(wt);
}

TEST_F(FakeQuantizeModuleTest, EnableWalksTheModelAndErrors) {
    tg_module *model = TG_NN_SEQUENTIAL(tg_nn_fake_quantize(tg_nn_minmax_observer(tg_observer_opts{})), tg_nn_relu(),
                                        tg_nn_fake_quantize(tg_nn_histogram_observer(tg_observer_opts{})));
    ASSERT_NE(model, nullptr) << tg_last_error();
    EXPECT_EQ(tg_fake_quant_enable_observer(model, false), 2);
    EXPECT_EQ(tg_fake_quant_enable_fake_quant(model, false), 2);
    TG_SCOPE {
        tg_tensor *x = tg_randn(TG_SHAPE(3, 4), tg_opts{});
        EXPECT_TRUE(tensor_near(tg_forward(model, x), values(tg_relu(x)), 0, 0)); // both off: identity
        EXPECT_EQ(values(tg_module_get(model, "0.activation_post_process.min_val")), std::vector<double>{INFINITY});
    }
    tg_module_free(model);
    tg_clear_error();
    EXPECT_EQ(tg_nn_fake_quantize(tg_nn_relu()), nullptr); // the ReLU is freed
    EXPECT_ERROR_CONTAINS("tg_nn_fake_quantize: expected an observer, got ReLU");
}

} // namespace
