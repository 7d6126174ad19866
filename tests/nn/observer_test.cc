// Observers (quant/observer.h) against PyTorch 1.13's (tests/fixtures/gen_observer.py):
// the recorded ranges and histograms after every batch and calculate_qparams'
// scale and zero point, exactly (the same float32 arithmetic), plus the errors.
#include <map>
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

class ObserverTest : public TgTest {
  protected:
    std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/observer.txt");

    // Feeds the fixture batches input0, input1, ... to obs and compares its state with
    // `tag`'s after each, exactly.
    void check(const char *tag, tg_module *obs, const char *input, int batches) {
        ASSERT_NE(obs, nullptr) << tg_last_error();
        for (int i = 0; i < batches; i++) {
            std::string p = std::string(tag) + "_" + std::to_string(i) + "_";
            TG_SCOPE {
                tg_tensor *x = fixture_tensor(fx, std::string(input) + std::to_string(i)).make(TG_FLOAT32);
                tg_tensor *y = tg_forward(obs, x);
                ASSERT_NE(y, nullptr) << tg_last_error();
                EXPECT_EQ(y, x); // the input itself comes back
                EXPECT_TRUE(tensor_near(tg_reshape(tg_module_buffer(obs, "min_val"), TG_SHAPE(-1)),
                                        fixture_tensor(fx, p + "min_val").data, 0, 0))
                    << p;
                EXPECT_TRUE(tensor_near(tg_reshape(tg_module_buffer(obs, "max_val"), TG_SHAPE(-1)),
                                        fixture_tensor(fx, p + "max_val").data, 0, 0))
                    << p;
                if (tg_module_buffer(obs, "histogram")) {
                    EXPECT_TRUE(
                        tensor_near(tg_module_buffer(obs, "histogram"), fixture_tensor(fx, p + "histogram").data, 0, 0))
                        << p;
                }
                tg_tensor *scale, *zp;
                ASSERT_EQ(tg_observer_calculate_qparams(obs, &scale, &zp), TG_OK) << tg_last_error();
                EXPECT_EQ(tg_dtype_of(scale), TG_FLOAT32);
                EXPECT_EQ(tg_dtype_of(zp), TG_INT64);
                EXPECT_TRUE(tensor_near(scale, fixture_tensor(fx, p + "scale").data, 0, 0)) << p;
                EXPECT_TRUE(tensor_near(zp, fixture_tensor(fx, p + "zero_point").data, 0, 0)) << p;
            }
        }
        tg_module_free(obs);
    }
};

TEST_F(ObserverTest, MinMaxMatchesPyTorch) {
    check("minmax", tg_nn_minmax_observer(tg_observer_opts{}), "act", 4);
    check("minmax_rr", tg_nn_minmax_observer(tg_observer_opts{.reduce_range = true}), "act", 4);
    check("minmax_sym", tg_nn_minmax_observer(tg_observer_opts{.dtype = TG_QINT8, .qscheme = TG_PER_TENSOR_SYMMETRIC}),
          "act", 4);
    check("minmax_sym_u8", tg_nn_minmax_observer(tg_observer_opts{.qscheme = TG_PER_TENSOR_SYMMETRIC}), "act", 4);
}

TEST_F(ObserverTest, MovingAverageMatchesPyTorch) {
    check("moving", tg_nn_moving_average_minmax_observer(tg_observer_opts{}), "act", 4);
    check("moving_c",
          tg_nn_moving_average_minmax_observer(
              tg_observer_opts{.quant_min = 0, .quant_max = 127, .averaging_constant = 0.3}),
          "act", 4);
}

TEST_F(ObserverTest, PerChannelMatchesPyTorch) {
    check("perch_sym",
          tg_nn_per_channel_minmax_observer(tg_observer_opts{.dtype = TG_QINT8, .qscheme = TG_PER_CHANNEL_SYMMETRIC}),
          "wt", 2);
    check("perch_aff1", tg_nn_per_channel_minmax_observer(tg_observer_opts{.ch_axis = 1}), "wt", 2);
    check("perch_moving",
          tg_nn_moving_average_per_channel_minmax_observer(
              tg_observer_opts{.dtype = TG_QINT8, .qscheme = TG_PER_CHANNEL_SYMMETRIC}),
          "wt", 2);
}

TEST_F(ObserverTest, HistogramMatchesPyTorch) {
    // onednn's static qconfig (reduce_range false) and fbgemm / x86's (true)
    check("hist", tg_nn_histogram_observer(tg_observer_opts{}), "act", 4);
    check("hist_rr", tg_nn_histogram_observer(tg_observer_opts{.reduce_range = true}), "act", 4);
}

TEST_F(ObserverTest, HistogramOfScaledBatchesMatchesPyTorch) {
    // the same ReLU batch scaled by 1, 1.7, 0.5; a batch inside (-1, 1) and a slightly wider one
    tg_module *relu = tg_nn_histogram_observer(tg_observer_opts{});
    tg_module *small = tg_nn_histogram_observer(tg_observer_opts{});
    TG_SCOPE {
        tg_tensor *a = fixture_tensor(fx, "act3").make(TG_FLOAT32), *b = fixture_tensor(fx, "act2").make(TG_FLOAT32);
        double factors[] = {1, 1.7, 0.5};
        for (int i = 0; i < 3; i++) {
            std::string p = "hist_relu_" + std::to_string(i) + "_";
            ASSERT_NE(tg_forward(relu, tg_mul_scalar(a, factors[i])), nullptr);
            EXPECT_TRUE(
                tensor_near(tg_module_buffer(relu, "histogram"), fixture_tensor(fx, p + "histogram").data, 0, 0))
                << p;
            tg_tensor *scale, *zp;
            ASSERT_EQ(tg_observer_calculate_qparams(relu, &scale, &zp), TG_OK);
            EXPECT_TRUE(tensor_near(scale, fixture_tensor(fx, p + "scale").data, 0, 0)) << p;
            EXPECT_TRUE(tensor_near(zp, fixture_tensor(fx, p + "zero_point").data, 0, 0)) << p;
        }
        for (int i = 0; i < 2; i++) {
            std::string p = "hist_small_" + std::to_string(i) + "_";
            ASSERT_NE(tg_forward(small, tg_mul_scalar(b, i ? 1.01 : 1.0)), nullptr);
            EXPECT_TRUE(
                tensor_near(tg_module_buffer(small, "histogram"), fixture_tensor(fx, p + "histogram").data, 0, 0))
                << p;
            tg_tensor *scale, *zp;
            ASSERT_EQ(tg_observer_calculate_qparams(small, &scale, &zp), TG_OK);
            EXPECT_TRUE(tensor_near(scale, fixture_tensor(fx, p + "scale").data, 0, 0)) << p;
            EXPECT_TRUE(tensor_near(zp, fixture_tensor(fx, p + "zero_point").data, 0, 0)) << p;
        }
    }
    tg_module_free(relu);
    tg_module_free(small);
}

TEST_F(ObserverTest, StateDictNamesDefaultsAndErrors) {
    tg_module *h = tg_nn_histogram_observer(tg_observer_opts{});
    int n = 0;
    const tg_named_tensor *sd = tg_state_dict(h, &n);
    ASSERT_EQ(n, 4);
    EXPECT_STREQ(sd[0].name, "eps");
    EXPECT_STREQ(sd[1].name, "histogram");
    EXPECT_STREQ(sd[2].name, "min_val");
    EXPECT_STREQ(sd[3].name, "max_val");
    TG_SCOPE {
        tg_tensor *scale, *zp; // nothing observed: PyTorch's 1 and 0
        ASSERT_EQ(tg_observer_calculate_qparams(h, &scale, &zp), TG_OK);
        EXPECT_TRUE(tensor_near(scale, {1.0}, 0, 0));
        EXPECT_TRUE(tensor_near(zp, {0.0}, 0, 0));
    }
    tg_module_free(h);
    tg_module *pc = tg_nn_per_channel_minmax_observer(tg_observer_opts{});
    tg_observer_info info;
    ASSERT_EQ(tg_observer_get_info(pc, &info), TG_OK);
    EXPECT_EQ(info.qscheme, TG_PER_CHANNEL_AFFINE);
    EXPECT_EQ(info.quant_min, 0);
    EXPECT_EQ(info.quant_max, 255);
    TG_SCOPE {
        ASSERT_NE(tg_forward(pc, tg_ones(TG_SHAPE(3, 2), tg_opts{})), nullptr);
        tg_clear_error();
        EXPECT_EQ(tg_forward(pc, tg_ones(TG_SHAPE(4, 2), tg_opts{})), nullptr);
        EXPECT_ERROR_CONTAINS("PerChannelMinMaxObserver: the input has 4 channels along ch_axis 0, the observer saw 3");
        tg_clear_error();
        EXPECT_EQ(tg_forward(pc, tg_ones(TG_SHAPE(3), tg_opts{.dtype = TG_INT64})), nullptr);
        EXPECT_ERROR_CONTAINS("PerChannelMinMaxObserver: expected a floating input, got int64");
    }
    tg_module_free(pc);
    tg_module *qint8_rr = tg_nn_minmax_observer(tg_observer_opts{.dtype = TG_QINT8, .reduce_range = true});
    ASSERT_EQ(tg_observer_get_info(qint8_rr, &info), TG_OK);
    EXPECT_EQ(info.quant_min, -64);
    EXPECT_EQ(info.quant_max, 63);
    tg_clear_error();
    EXPECT_EQ(tg_observer_get_info(tg_module_child(qint8_rr, "x"), &info), TG_ERROR);
    tg_module_free(qint8_rr);

    tg_clear_error();
    EXPECT_EQ(tg_nn_minmax_observer(tg_observer_opts{.qscheme = TG_PER_CHANNEL_SYMMETRIC}), nullptr);
    EXPECT_ERROR_CONTAINS("qscheme per_channel_symmetric is not supported (MinMaxObserver takes per_tensor_affine");
    tg_clear_error();
    EXPECT_EQ(tg_nn_per_channel_minmax_observer(tg_observer_opts{.qscheme = TG_PER_TENSOR_AFFINE}), nullptr);
    EXPECT_ERROR_CONTAINS("PerChannelMinMaxObserver takes per_channel_affine or per_channel_symmetric");
    tg_clear_error();
    EXPECT_EQ(tg_nn_minmax_observer(tg_observer_opts{.qscheme = TG_PER_TENSOR_SYMMETRIC, .reduce_range = true}),
              nullptr);
    EXPECT_ERROR_CONTAINS("cannot reduce range for symmetric quantization for quint8");
    tg_clear_error();
    EXPECT_EQ(tg_nn_minmax_observer(tg_observer_opts{.quant_min = 3, .quant_max = 100}), nullptr);
    EXPECT_ERROR_CONTAINS("quant_min 3 and quant_max 100 must satisfy 0 <= quant_min <= 0 <= quant_max <= 255");
    tg_module *lin = tg_nn_linear(2, 2, tg_linear_opts{});
    TG_SCOPE {
        tg_tensor *scale, *zp;
        tg_clear_error();
        EXPECT_EQ(tg_observer_calculate_qparams(lin, &scale, &zp), TG_ERROR);
        EXPECT_ERROR_CONTAINS("tg_observer_calculate_qparams: expected an observer, got Linear");
    }
    tg_module_free(lin);
}

} // namespace
