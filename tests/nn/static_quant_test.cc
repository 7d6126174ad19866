// Static quantisation of the tutorials' LeNet (quant/static_quant.h) against PyTorch
// 1.13's eager flow (tests/fixtures/gen_static_quant.py: QuantWrapper, fuse_modules,
// get_default_qconfig('onednn'), prepare, three calibration batches, convert, onednn
// engine). tapegrad draws the same weights and inputs from seed 0. Checked: the
// qparams of every layer, the int8 weights, the quint8 activations after each layer
// (within one quantisation step) and the output (within one step of the last layer's
// output scale).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "ops/cpu/qgemm.h"
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

// Largest |a - b| over the elements.
double max_diff(tg_tensor *a, const std::vector<double> &b) {
    std::vector<double> v = values(a);
    EXPECT_EQ(v.size(), b.size());
    double m = 0;
    for (size_t i = 0; i < v.size() && i < b.size(); i++) m = std::fmax(m, std::fabs(v[i] - b[i]));
    return m;
}

class StaticQuantTest : public TgTempDirTest {
  protected:
    std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/static_quant.txt");
    tg_module *lenet = nullptr;
    std::vector<tg_tensor *> calib;
    tg_tensor *test = nullptr;

    void SetUp() override {
        TgTempDirTest::SetUp();
        tg_manual_seed(0); // (the tensors below belong to the test's scope)
        lenet = make_lenet();
        for (int i = 0; i < 3; i++) calib.push_back(tg_rand(TG_SHAPE(8, 1, 28, 28), tg_opts{}));
        test = tg_rand(TG_SHAPE(5, 1, 28, 28), tg_opts{});
    }
    void TearDown() override {
        if (lenet) tg_module_free(lenet); // a test that did not quantise it
        TgTempDirTest::TearDown();
    }

    // The fused, prepared, calibrated and converted LeNet (takes lenet).
    tg_module *quantise(tg_qconfig qc) {
        tg_module *m = tg_quant_wrapper(lenet);
        lenet = nullptr;
        EXPECT_EQ(tg_fuse_modules(m, "module.0", "module.1"), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_fuse_modules(m, "module.3", "module.4"), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_fuse_modules(m, "module.7", "module.8"), TG_OK) << tg_last_error();
        tg_eval(m);
        EXPECT_EQ(tg_quant_prepare(m, qc), TG_OK) << tg_last_error();
        TG_NO_GRAD {
            for (tg_tensor *c : calib) TG_SCOPE {
                    EXPECT_NE(tg_forward(m, c), nullptr) << tg_last_error();
                }
        }
        EXPECT_EQ(tg_quant_convert(m, qc), TG_OK) << tg_last_error();
        return m;
    }
};

TEST_F(StaticQuantTest, LeNetMatchesPyTorchOnednn) {
    // the same weights and inputs as PyTorch's
    const char *names[] = {"0.weight", "0.bias", "3.weight", "3.bias", "7.weight", "7.bias", "9.weight", "9.bias"};
    TG_SCOPE {
        for (const char *n : names)
            EXPECT_NEAR(tg_item(tg_sum(tg_cast(tg_module_get(lenet, n), TG_FLOAT64))),
                        fixture_tensor(fx, std::string("float_sum_") + n).data[0], 1e-9)
                << n;
        EXPECT_NEAR(tg_item(tg_sum(tg_cast(test, TG_FLOAT64))), fixture_tensor(fx, "test_sum").data[0], 1e-9);
        tg_eval(lenet);
        EXPECT_LE(max_diff(tg_forward(lenet, test), fixture_tensor(fx, "float_out").data), 1e-5);
    }
    tg_module *m = quantise(tg_get_default_qconfig("onednn"));
    const char *types[] = {"QuantizedConvReLU2d",
                           "Identity",
                           "QuantizedMaxPool2d",
                           "QuantizedConvReLU2d",
                           "Identity",
                           "QuantizedMaxPool2d",
                           "Flatten",
                           "QuantizedLinearReLU",
                           "Identity",
                           "QuantizedLinear"};
    tg_module *seq = tg_module_child(m, "module");
    for (int i = 0; i < 10; i++)
        EXPECT_STREQ(tg_module_type_of(tg_module_child(seq, std::to_string(i).c_str()))->name, types[i]) << i;
    EXPECT_STREQ(tg_module_type_of(tg_module_child(m, "quant"))->name, "Quantize");
    EXPECT_STREQ(tg_module_type_of(tg_module_child(m, "dequant"))->name, "DeQuantize");
    TG_SCOPE {
        // the quant stub's qparams: the histogram of the inputs, exactly
        EXPECT_TRUE(tensor_near(tg_module_get(m, "quant.scale"), fixture_tensor(fx, "quant_scale").data, 0, 0));
        EXPECT_TRUE(
            tensor_near(tg_module_get(m, "quant.zero_point"), fixture_tensor(fx, "quant_zero_point").data, 0, 0));
        for (const char *i : {"0", "3", "7", "9"}) {
            std::string p = std::string("q") + i + "_", pre = std::string("module.") + i + ".";
            tg_tensor *w = tg_module_get(m, (pre + "weight").c_str());
            // weights: exactly PyTorch's int8 values and per-channel scales (first rows)
            tg_tensor *rows = tg_sub_scalar(tg_cast(tg_narrow(w, 0, 0, 4), TG_INT64), 128);
            EXPECT_TRUE(tensor_near(rows, fixture_tensor(fx, p + "weight_int").data, 0, 0)) << p;
            EXPECT_TRUE(tensor_near(tg_module_get(m, (pre + "weight_scale").c_str()),
                                    fixture_tensor(fx, p + "weight_scale").data, 0, 0))
                << p;
            // output qparams: the histogram of our float activations, which differ from
            // PyTorch's in the last bits (another summation order), so the scale may too
            EXPECT_TRUE(
                tensor_near(tg_module_get(m, (pre + "scale").c_str()), fixture_tensor(fx, p + "scale").data, 0, 1e-5))
                << p;
            EXPECT_TRUE(tensor_near(tg_module_get(m, (pre + "zero_point").c_str()),
                                    fixture_tensor(fx, p + "zero_point").data, 0, 0))
                << p;
        }
        // quint8 after each stage: within one step of PyTorch's (requantisation rounding)
        tg_tensor *x = tg_forward(tg_module_child(m, "quant"), test);
        EXPECT_TRUE(tensor_near(x, fixture_tensor(fx, "q_stage_quant").data, 0, 0));
        for (int i = 0; i < 10; i++) {
            x = tg_forward(tg_module_child(seq, std::to_string(i).c_str()), x);
            ASSERT_NE(x, nullptr) << tg_last_error();
            if (i == 0 || i == 3 || i == 7 || i == 9) {
                std::string key = "q_stage" + std::to_string(i);
                EXPECT_LE(max_diff(x, fixture_tensor(fx, key).data), 1.0) << key;
            }
        }
        // the model's float output: within one quantisation step of the last layer
        double step = fixture_tensor(fx, "q9_scale").data[0];
        double diff = max_diff(tg_forward(m, test), fixture_tensor(fx, "q_out").data);
        printf("quantised LeNet vs PyTorch: max |diff| %g (one step %g)\n", diff, step);
        EXPECT_LE(diff, step * 1.0001) << "one step is " << step;
    }
    tg_module_free(m);
}

static long file_size(const std::string &path) {
    FILE *f = fopen(path.c_str(), "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

TEST_F(StaticQuantTest, SaveAndLoadTheInt8Model) {
    std::string float_path = dir_ + "/lenet.safetensors", int8_path = dir_ + "/lenet_int8.safetensors";
    ASSERT_EQ(tg_save_state_dict(lenet, float_path.c_str()), TG_OK) << tg_last_error();
    tg_qconfig qc = tg_get_default_qconfig("onednn");
    tg_module *m = quantise(qc);
    ASSERT_EQ(tg_save_state_dict(m, int8_path.c_str()), TG_OK) << tg_last_error();
    int n = 0;
    const tg_named_tensor *sd = tg_state_dict(m, &n);
    std::vector<std::string> names;
    for (int i = 0; i < n; i++) names.push_back(sd[i].name);
    const std::vector<std::string> expect = {
        "quant.scale",     "quant.zero_point",    "dequant.input_scale",   "dequant.input_zero_point",
        "module.0.weight", "module.0.bias",       "module.0.weight_scale", "module.0.weight_zero_point",
        "module.0.scale",  "module.0.zero_point", "module.0.input_scale",  "module.0.input_zero_point"};
    ASSERT_GE(names.size(), expect.size());
    EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 12), expect);
    double ratio = (double)file_size(float_path) / (double)file_size(int8_path);
    EXPECT_GT(ratio, 3.5) << "float32 file / int8 file";
    printf("LeNet file: float32 %ld bytes, int8 %ld bytes (%.2fx)\n", file_size(float_path), file_size(int8_path),
           ratio);

    // other weights, no calibration: the skeleton, then the file
    tg_manual_seed(5);
    tg_module *other = tg_quant_wrapper(make_lenet());
    for (auto [a, b] :
         {std::pair{"module.0", "module.1"}, std::pair{"module.3", "module.4"}, std::pair{"module.7", "module.8"}})
        ASSERT_EQ(tg_fuse_modules(other, a, b), TG_OK);
    ASSERT_EQ(tg_quant_prepare(other, qc), TG_OK);
    ASSERT_EQ(tg_quant_convert_for_load(other, qc), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_load_state_dict(other, int8_path.c_str(), true), TG_OK) << tg_last_error();
    TG_SCOPE { EXPECT_TRUE(tensor_near(tg_forward(other, test), values(tg_forward(m, test)), 0, 0)); }
    tg_module_free(other);
    tg_module_free(m);
}

// A Conv2d with stride, padding and dilation (padding reads the input's zero point)
// and a MaxPool2d with padding and ceil_mode, against float references computed from
// the dequantised input and weights: the conv within one step of its output scale,
// the pool exactly.
TEST_F(StaticQuantTest, ConvOptionsAndPoolAgainstDequantisedReference) {
    tg_pool_opts pool = {};
    pool.kernel_size = 3;
    pool.stride = 2;
    pool.padding = 1;
    pool.ceil_mode = true;
    tg_conv_opts co = {};
    co.stride = 2;
    co.padding = 1;
    co.dilation = 2;
    tg_module *m = tg_quant_wrapper(TG_NN_SEQUENTIAL(tg_nn_conv2d(3, 4, 3, co), tg_nn_max_pool2d(pool)));
    tg_qconfig qc = tg_get_default_qconfig("onednn");
    tg_eval(m);
    ASSERT_EQ(tg_quant_prepare(m, qc), TG_OK);
    tg_module *seq = tg_module_child(m, "module"), *conv = tg_module_child(seq, "0");
    TG_SCOPE {
        tg_tensor *x = tg_sub_scalar(tg_mul_scalar(tg_rand(TG_SHAPE(2, 3, 11, 10), tg_opts{}), 4), 1);
        tg_tensor *w = tg_clone(tg_module_param(conv, "weight")), *b = tg_clone(tg_module_param(conv, "bias"));
        ASSERT_NE(tg_forward(m, x), nullptr);
        ASSERT_EQ(tg_quant_convert(m, qc), TG_OK) << tg_last_error();
        EXPECT_STREQ(tg_module_type_of(tg_module_child(seq, "0"))->name, "QuantizedConv2d");
        EXPECT_STREQ(tg_module_type_of(tg_module_child(seq, "1"))->name, "QuantizedMaxPool2d");
        auto dequant = [](tg_tensor *q, double scale, double zp) {
            return tg_mul_scalar(tg_sub_scalar(tg_cast(q, TG_FLOAT32), zp), scale);
        };
        double xs = values(tg_module_get(m, "quant.scale"))[0], xz = values(tg_module_get(m, "quant.zero_point"))[0];
        tg_tensor *xq = tg_forward(tg_module_child(m, "quant"), x);
        tg_tensor *wscale = tg_module_get(m, "module.0.weight_scale");
        tg_tensor *wint = tg_sub_scalar(tg_cast(tg_module_get(m, "module.0.weight"), TG_FLOAT32), 128);
        tg_tensor *wdq = tg_mul(wint, tg_reshape(wscale, TG_SHAPE(4, 1, 1, 1)));
        EXPECT_LE(max_diff(wdq, values(w)), values(tg_max(wscale))[0] / 2 + 1e-7); // weights round to nearest
        tg_tensor *ref = tg_conv2d(dequant(xq, xs, xz), wdq, b, co);
        double ys = values(tg_module_get(m, "module.0.scale"))[0],
               yz = values(tg_module_get(m, "module.0.zero_point"))[0];
        tg_tensor *yq = tg_forward(tg_module_child(seq, "0"), xq);
        ASSERT_NE(yq, nullptr) << tg_last_error();
        EXPECT_EQ(dims(yq), dims(ref));
        // the reference quantised to the output's grid; ours may round the other way once
        tg_tensor *ref_q = tg_clamp(tg_add_scalar(tg_round(tg_div_scalar(ref, ys)), yz), 0, 255);
        EXPECT_LE(max_diff(tg_cast(yq, TG_FLOAT32), values(ref_q)), 1.0);
        tg_tensor *pooled = tg_forward(tg_module_child(seq, "1"), yq);
        tg_tensor *ref_pool = tg_max_pool2d(tg_cast(yq, TG_FLOAT32), pool, nullptr);
        EXPECT_EQ(dims(pooled), dims(ref_pool));
        EXPECT_TRUE(tensor_near(tg_cast(pooled, TG_FLOAT32), values(ref_pool), 0, 0));
    }
    tg_module_free(m);
}

// The packed VNNI kernels (requantisation in registers, im2col rows padded to 4 bytes,
// the positions-first output turned into planes) and the portable ones give the same
// bytes after every layer: the LeNet at batch 5 and 1, and convolutions with stride,
// padding and dilation (the other im2col) at batch 2 and 1.
TEST_F(StaticQuantTest, PortableKernelsGiveTheSameBytesAsVnni) {
    if (!tg_qgemm_has_vnni()) GTEST_LOG_(INFO) << "no AVX512-VNNI here: both runs use the portable kernels";
    tg_qconfig qc = tg_get_default_qconfig("onednn");
    tg_module *m = quantise(qc);
    tg_conv_opts strided = {};
    strided.stride = 2;
    tg_conv_opts padded = {};
    padded.padding = 2;
    padded.dilation = 2;
    tg_module *convs = tg_quant_wrapper(
        TG_NN_SEQUENTIAL(tg_nn_conv2d(3, 20, 3, strided), tg_nn_relu(), tg_nn_conv2d(20, 70, 3, padded)));
    ASSERT_EQ(tg_fuse_modules(convs, "module.0", "module.1"), TG_OK) << tg_last_error();
    tg_eval(convs);
    ASSERT_EQ(tg_quant_prepare(convs, qc), TG_OK);
    TG_SCOPE {
        tg_tensor *images = tg_rand(TG_SHAPE(2, 3, 13, 12), tg_opts{});
        ASSERT_NE(tg_forward(convs, images), nullptr);
        ASSERT_EQ(tg_quant_convert(convs, qc), TG_OK) << tg_last_error();
        for (auto [model, input] : {std::pair{m, test}, std::pair{convs, images}}) {
            for (int64_t batch : {tg_size(input, 0), (int64_t)1}) {
                std::vector<std::vector<double>> runs[2];
                for (int vnni = 0; vnni < 2; vnni++) {
                    tg_qgemm_allow_vnni(vnni == 1);
                    tg_tensor *x = tg_forward(tg_module_child(model, "quant"), tg_narrow(input, 0, 0, batch));
                    tg_module *seq = tg_module_child(model, "module");
                    for (int i = 0; i < tg_module_num_children(seq) && x; i++) {
                        x = tg_forward(tg_module_child_at(seq, i, nullptr), x);
                        if (x) runs[vnni].push_back(values(x));
                    }
                    ASSERT_NE(x, nullptr) << tg_last_error();
                }
                tg_qgemm_allow_vnni(true);
                ASSERT_EQ(runs[0].size(), runs[1].size());
                for (size_t i = 0; i < runs[0].size(); i++) EXPECT_EQ(runs[0][i], runs[1][i]) << "layer " << i;
            }
        }
    }
    tg_module_free(m);
    tg_module_free(convs);
}

// Issue 35: quantize_per_tensor writes 0 for NaN and Inf (PyTorch too), a NaN weight
// was quantised to finite values, a NaN activation was skipped by the observers. Now:
// the Quantize module fails naming the element, calibration on NaN / Inf fails (as
// PyTorch's HistogramObserver raises), and convert refuses a NaN weight by name.
TEST_F(StaticQuantTest, NonFiniteInputsAndWeightsAreRefused) {
    tg_module *m = tg_quant_wrapper(lenet);
    lenet = nullptr;
    ASSERT_EQ(tg_fuse_modules(m, "module.0", "module.1"), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_fuse_modules(m, "module.3", "module.4"), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_fuse_modules(m, "module.7", "module.8"), TG_OK) << tg_last_error();
    tg_eval(m);
    tg_qconfig qc = tg_get_default_qconfig("onednn");
    ASSERT_EQ(tg_quant_prepare(m, qc), TG_OK) << tg_last_error();
    TG_NO_GRAD {
        TG_SCOPE {
            tg_tensor *bad = tg_clone(calib[0]);
            tg_fill_(tg_narrow(tg_flatten(bad, 0, -1), 0, 7, 1), INFINITY);
            tg_clear_error();
            EXPECT_EQ(tg_forward(m, bad), nullptr);
            EXPECT_ERROR_CONTAINS("HistogramObserver: the input holds inf: a histogram needs a finite range");
        }
        for (tg_tensor *c : calib) TG_SCOPE {
                ASSERT_NE(tg_forward(m, c), nullptr) << tg_last_error();
            }
        TG_SCOPE { tg_fill_(tg_narrow(tg_flatten(tg_module_get(m, "module.3.0.weight"), 0, -1), 0, 4, 1), NAN); }
    }
    tg_clear_error();
    EXPECT_EQ(tg_quant_convert(m, qc), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_quant_convert: \"module.3.0.weight\" holds nan at flat index 4: a weight with NaN or "
                          "Inf cannot be quantised");
    tg_module_free(m);

    lenet = make_lenet();
    m = quantise(tg_get_default_qconfig("onednn")); // a fresh LeNet, quantised
    TG_SCOPE {
        tg_tensor *x = tg_clone(test);
        tg_fill_(tg_narrow(tg_flatten(x, 0, -1), 0, 30, 1), NAN);
        tg_clear_error();
        EXPECT_EQ(tg_forward(m, x), nullptr);
        EXPECT_ERROR_CONTAINS(
            "Quantize: input [5, 1, 28, 28] holds nan at flat index 30: quint8 cannot hold NaN or Inf");
        EXPECT_NE(tg_forward(m, test), nullptr) << tg_last_error();
    }
    tg_module_free(m);
}

TEST_F(StaticQuantTest, ErrorsAndUnfusedRelu) {
    tg_module *m = tg_quant_wrapper(lenet);
    lenet = nullptr;
    tg_clear_error();
    EXPECT_EQ(tg_fuse_modules(m, "module.0", "module.2"), TG_ERROR);
    EXPECT_ERROR_CONTAINS("can fuse Conv2d + ReLU or Linear + ReLU, got Conv2d (\"module.0\") + MaxPool2d");
    tg_clear_error();
    EXPECT_EQ(tg_fuse_modules(m, "module.0", "module.42"), TG_ERROR);
    EXPECT_ERROR_CONTAINS("no module \"module.42\" in the model");
    tg_qconfig qc = tg_get_default_qconfig("onednn");
    ASSERT_EQ(tg_quant_prepare(m, qc), TG_OK);
    tg_clear_error();
    EXPECT_EQ(tg_quant_convert(m, qc), TG_ERROR); // nothing calibrated yet
    EXPECT_ERROR_CONTAINS("\"quant\" was not calibrated (its observer saw no input)");
    TG_SCOPE { ASSERT_NE(tg_forward(m, calib[0]), nullptr) << tg_last_error(); }
    tg_clear_error();
    EXPECT_EQ(tg_quant_convert(m, qc), TG_ERROR); // ReLU "module.1" was not fused
    EXPECT_ERROR_CONTAINS("ReLU \"module.1\" has no int8 version");
    tg_clear_error();
    tg_conv_opts co;
    EXPECT_EQ(tg_nn_conv2d_get_opts(tg_module_child(m, "quant"), &co), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_nn_conv2d_get_opts: expected a Conv2d, got Quantize"); // converted before the ReLU failed
    tg_module_free(m);
    tg_clear_error();
    tg_qconfig bad = tg_get_default_qconfig("tpu");
    EXPECT_EQ(bad.activation, nullptr);
    EXPECT_ERROR_CONTAINS("unknown backend \"tpu\"");
}

} // namespace
