// tg_onnx_export of the recurrent modules (ONNX's LSTM / GRU / RNN nodes, one per layer
// and direction, not unrolled) and of lesson 12's int8 models (QDQ: QuantizeLinear /
// DequantizeLinear around int8 weights and uint8 activations).
//
// Each file passes onnx.checker (full check, tests/onnx/fixtures/check_onnx.py) and is
// then run by tests/onnx/fixtures/eval_onnx_numpy.py, a numpy evaluation of the
// exported graph (nothing of tapegrad), against tapegrad's eval-mode outputs at batch
// sizes 1 and 7 (the file exported at batch 2): float32 within 1e-5 of the output's
// scale, QDQ within one quantisation step of the output. OpenCV 4.6's DNN module
// (Debian's python3-opencv) imports neither kind, so it is not the runtime here:
// - LSTM: "recurrent_layers.cpp:176: (expected: 'hInternal.cols == Wh.cols'), where
//   'hInternal.cols' is -1" without initial_h; with initial_h it must be a constant of
//   the batch's size ("onnx_importer.cpp:1660: shape(blob) == blobShape"), which a file
//   with a free batch cannot have; and Squeeze with axes as an input (opset 13+) fails
//   ("onnx_importer.cpp:2464: node_proto.input_size() == 1").
// - GRU: "onnx_importer.cpp:1873: node_proto.input_size() == 6 in function 'parseGRU'"
//   (the same constant initial_h), RNN: "Can't create layer" (no RNN importer).
//   Lesson 09's model stops before that, at its Embedding's Gather ("onnx_importer.cpp:571:
//   Blob view_0 not found in const blobs": Gather of a computed index tensor).
// - QDQ: "quantization_utils.cpp:103: inputs.size() == 1 in function 'getMemoryShapes'"
//   on the DequantizeLinear of a constant int8 weight (it dequantises activations only);
//   the dynamic MLP stops earlier, at the Min of its input's range with a constant 0
//   ("eltwise_layer.cpp:189: inputs.size() >= 2").
// The numpy script tries OpenCV anyway (--opencv) and prints what it says.
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "tests/test_util.h"

namespace {

// Runs `/usr/bin/python3 <args>` (Debian's, with python3-onnx); returns its exit status
// and appends its output to *out.
int run_python(const std::string &args, std::string *out) {
    FILE *p = popen(("/usr/bin/python3 " + args + " 2>&1").c_str(), "r");
    if (!p) return -1;
    char buf[512];
    while (fgets(buf, sizeof buf, p)) *out += buf;
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// "PATH:SHAPE[:int64]": t's values in a raw file for the scripts.
std::string raw_arg(tg_tensor *t, const std::string &path) {
    tg_tensor *c = tg_contiguous(t);
    std::ofstream f(path, std::ios::binary);
    f.write(static_cast<const char *>(tg_data_ptr(c)), (std::streamsize)(tg_numel(c) * tg_dtype_size(tg_dtype_of(c))));
    std::string s = path + ":";
    for (int d = 0; d < tg_ndim(t); d++) s += (d ? "," : "") + std::to_string(tg_size(t, d));
    return s + (tg_dtype_of(t) == TG_INT64 ? ":int64" : "");
}

std::function<tg_tensor *(int64_t)> randn_batch(std::vector<int64_t> sample) {
    return [sample](int64_t n) {
        tg_shape s = {0};
        s.dims[s.ndim++] = n;
        for (int64_t d : sample) s.dims[s.ndim++] = d;
        return tg_randn(s, tg_opts{});
    };
}

class OnnxRecurrentQuantTest : public TgTempDirTest {
  protected:
    // Exports `model` on batch_of(2), checks the file, evaluates it with numpy at batch
    // sizes 1 and 7 against the model's eval-mode outputs (tolerance flags for
    // eval_onnx_numpy.py in `tolerance`). Returns both scripts' output; frees the model.
    std::string export_and_evaluate(tg_module *model, const std::function<tg_tensor *(int64_t)> &batch_of,
                                    const std::string &tolerance = "") {
        std::string path = dir_ + "/model.onnx", log;
        tg_status s = tg_onnx_export(model, batch_of(2), path.c_str(), nullptr);
        EXPECT_EQ(s, TG_OK) << tg_last_error();
        if (s == TG_OK) {
            EXPECT_EQ(run_python("tests/onnx/fixtures/check_onnx.py " + path, &log), 0) << log;
            EXPECT_NE(log.find("onnx.checker: " + path + " ok"), std::string::npos) << log;
            std::string args = "tests/onnx/fixtures/eval_onnx_numpy.py " + path + " --opencv " + tolerance;
            tg_eval(model);
            for (int64_t n : {1, 7}) {
                tg_tensor *x = batch_of(n), *y = tg_forward(model, x);
                EXPECT_NE(y, nullptr) << tg_last_error();
                if (!y) break;
                std::string tag = std::to_string(n);
                args += " " + raw_arg(x, dir_ + "/x" + tag) + " " + raw_arg(y, dir_ + "/y" + tag);
            }
            EXPECT_EQ(run_python(args, &log), 0) << log;
            EXPECT_NE(log.find("numpy: batch 1: max error"), std::string::npos) << log;
            EXPECT_NE(log.find("numpy: batch 7: max error"), std::string::npos) << log;
            // the graph's op types and initializers' element types, for the tests' own checks
            run_python("-c \"import onnx, collections; g = onnx.load('" + path +
                           "').graph; "
                           "print('nodes:', ' '.join(n.op_type for n in g.node)); "
                           "print('int8 initializers:', sum(i.data_type == 3 for i in g.initializer))\"",
                       &log);
        }
        printf("%s", log.c_str());
        tg_module_free(model);
        return log;
    }
};

int count(const std::string &log, const std::string &what) {
    int n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) n++;
    return n;
}

// The line that starts with `prefix`.
std::string line(const std::string &log, const std::string &prefix) {
    size_t at = log.find(prefix);
    return at == std::string::npos ? "" : log.substr(at, log.find('\n', at) - at);
}

tg_rnn_opts rnn_opts(int layers, bool batch_first, bool bidirectional) {
    tg_rnn_opts o = {};
    o.num_layers = layers;
    o.batch_first = batch_first;
    o.bidirectional = bidirectional;
    return o;
}

// ---- recurrent ----

TEST_F(OnnxRecurrentQuantTest, TwoLayerLstmIsTwoStackedLstmNodes) {
    tg_manual_seed(1);
    tg_module *m = TG_NN_SEQUENTIAL(tg_nn_lstm(6, 8, rnn_opts(2, true, false)), tg_nn_linear(8, 3, tg_linear_opts{}));
    std::string log = export_and_evaluate(m, randn_batch({5, 6})); // [B, T, I]
    std::string nodes = line(log, "nodes:");
    EXPECT_EQ(count(nodes, " LSTM"), 2) << nodes;      // not unrolled: one node per layer
    EXPECT_GE(count(nodes, " Transpose"), 2) << nodes; // batch_first in and out (and Linear's weight)
    EXPECT_EQ(count(nodes, " Sigmoid"), 0) << nodes;
}

TEST_F(OnnxRecurrentQuantTest, BidirectionalGruIsForwardAndReverseNodes) {
    tg_manual_seed(2);
    tg_module *m = TG_NN_SEQUENTIAL(tg_nn_gru(4, 5, rnn_opts(2, true, true)), tg_nn_linear(10, 2, tg_linear_opts{}));
    std::string log = export_and_evaluate(m, randn_batch({6, 4}));
    EXPECT_EQ(count(line(log, "nodes:"), " GRU"), 4) << log;
}

TEST_F(OnnxRecurrentQuantTest, ElmanRnnAndLstmWithoutBias) {
    tg_manual_seed(3);
    tg_rnn_opts no_bias = rnn_opts(1, true, true);
    no_bias.no_bias = true;
    tg_module *m = TG_NN_SEQUENTIAL(tg_nn_rnn(3, 4, rnn_opts(1, true, false)), tg_nn_lstm(4, 5, no_bias));
    std::string log = export_and_evaluate(m, randn_batch({4, 3}));
    std::string nodes = line(log, "nodes:");
    EXPECT_EQ(count(nodes, " RNN"), 1) << nodes;
    EXPECT_EQ(count(nodes, " LSTM"), 2) << nodes;
}

// Lesson 09's model: Embedding -> 2-layer LSTM -> Linear over [T, B] character ids
// (time first: dim 0, the free one, is T here), the state starting at zeros.
tg_tensor *lm_forward(tg_module *self, tg_tensor *x) {
    tg_tensor *embedded = tg_forward(tg_module_child(self, "encoder"), x);
    tg_rnn_result r;
    if (tg_rnn_forward(tg_module_child(self, "rnn"), embedded, nullptr, nullptr, &r)) return nullptr;
    tg_tensor *flat = tg_reshape(r.output, TG_SHAPE(tg_size(x, 0) * tg_size(x, 1), 16));
    return tg_forward(tg_module_child(self, "decoder"), flat);
}
const tg_module_type kLm = {.name = "RNNModel", .forward = lm_forward};

TEST_F(OnnxRecurrentQuantTest, LessonNineLanguageModel) {
    tg_manual_seed(4);
    tg_module *m = tg_module_new(&kLm, 0);
    tg_register_module(m, "encoder", tg_nn_embedding(30, 12, tg_embedding_opts{}));
    tg_register_module(m, "rnn", tg_nn_lstm(12, 16, rnn_opts(2, false, false)));
    tg_register_module(m, "decoder", tg_nn_linear(16, 30, tg_linear_opts{}));
    auto ids = [](int64_t steps) {
        std::vector<int64_t> v((size_t)steps * 3);
        for (size_t i = 0; i < v.size(); i++) v[i] = (int64_t)((i * 7 + 3) % 30);
        tg_opts o = {};
        o.dtype = TG_INT64;
        return tg_from_data(v.data(), TG_SHAPE(steps, 3), o);
    };
    std::string log = export_and_evaluate(m, ids);
    EXPECT_EQ(count(line(log, "nodes:"), " LSTM"), 2) << log;
}

TEST_F(OnnxRecurrentQuantTest, ExportLeavesTrainingNumbersAndGradientsAlone) {
    tg_manual_seed(5);
    tg_module *m = tg_nn_lstm(3, 4, rnn_opts(2, true, true));
    tg_tensor *x = tg_randn(TG_SHAPE(2, 5, 3), tg_opts{});
    tg_tensor *before = tg_forward(m, x);
    ASSERT_EQ(tg_onnx_export(m, x, (dir_ + "/m.onnx").c_str(), nullptr), TG_OK) << tg_last_error();
    tg_tensor *after = tg_forward(m, x);
    ASSERT_NE(after, nullptr);
    EXPECT_EQ(memcmp(tg_data_ptr(tg_contiguous(before)), tg_data_ptr(tg_contiguous(after)), 2 * 5 * 8 * sizeof(float)),
              0);
    tg_backward(tg_sum(after));
    EXPECT_NE(tg_grad(tg_module_param(m, "weight_hh_l1_reverse")), nullptr) << "the layers still record backward";
    tg_module_free(m);
}

TEST_F(OnnxRecurrentQuantTest, LstmProjectionIsAClearError) {
    tg_rnn_opts o = rnn_opts(1, true, false);
    o.proj_size = 2;
    tg_module *m = TG_NN_SEQUENTIAL(tg_nn_lstm(3, 4, o));
    std::string path = dir_ + "/p.onnx";
    EXPECT_EQ(tg_onnx_export(m, tg_randn(TG_SHAPE(2, 5, 3), tg_opts{}), path.c_str(), nullptr), TG_ERROR);
    EXPECT_NE(std::string(tg_last_error()).find("in 0 (LSTM): ONNX's LSTM has no projection"), std::string::npos)
        << tg_last_error();
    EXPECT_NE(access(path.c_str(), F_OK), 0);
    tg_module_free(m);
}

// ---- lesson 12's int8 models ----

tg_module *make_mlp() {
    return TG_NN_SEQUENTIAL(
        tg_nn_linear(784, 1024, tg_linear_opts{}), tg_nn_relu(), tg_nn_linear(1024, 512, tg_linear_opts{}),
        tg_nn_relu(), tg_nn_linear(512, 256, tg_linear_opts{}), tg_nn_relu(), tg_nn_linear(256, 128, tg_linear_opts{}),
        tg_nn_relu(), tg_nn_linear(128, 10, tg_linear_opts{}));
}

TEST_F(OnnxRecurrentQuantTest, DynamicInt8MlpIsQdq) {
    for (bool per_channel : {false, true}) {
        tg_manual_seed(6);
        tg_quantize_opts o = {};
        o.per_channel = per_channel;
        tg_module *m = tg_quantize_dynamic(make_mlp(), o);
        ASSERT_NE(m, nullptr) << tg_last_error();
        // The outputs are float: the int8 sums are exact on both sides, so what is left is
        // float rounding (and, rarely, an input rounded to the next quantisation step).
        std::string log = export_and_evaluate(m, randn_batch({784}), "--rtol 1e-4");
        std::string nodes = line(log, "nodes:");
        EXPECT_EQ(count(nodes, " QuantizeLinear"), 5) << nodes;
        EXPECT_EQ(count(nodes, " DequantizeLinear"), 10) << nodes;
        EXPECT_NE(log.find("int8 initializers: 10"), std::string::npos) << log; // weights and zero points
    }
}

TEST_F(OnnxRecurrentQuantTest, StaticInt8LeNetIsQdqWithinOneStep) {
    tg_manual_seed(7);
    tg_pool_opts pool2 = {};
    pool2.kernel_size = 2;
    tg_module *lenet = TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 20, 5, tg_conv_opts{}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                                        tg_nn_conv2d(20, 50, 5, tg_conv_opts{}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                                        tg_nn_flatten(1, -1), tg_nn_linear(800, 500, tg_linear_opts{}), tg_nn_relu(),
                                        tg_nn_linear(500, 10, tg_linear_opts{}));
    tg_module *q = tg_quant_wrapper(lenet); // as lesson 12
    ASSERT_EQ(tg_fuse_modules(q, "module.0", "module.1"), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_fuse_modules(q, "module.3", "module.4"), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_fuse_modules(q, "module.7", "module.8"), TG_OK) << tg_last_error();
    tg_eval(q);
    tg_qconfig qconfig = tg_get_default_qconfig("onednn");
    ASSERT_EQ(tg_quant_prepare(q, qconfig), TG_OK) << tg_last_error();
    TG_NO_GRAD {
        for (int i = 0; i < 4; i++) tg_forward(q, tg_randn(TG_SHAPE(8, 1, 28, 28), tg_opts{}));
    }
    ASSERT_EQ(tg_quant_convert(q, qconfig), TG_OK) << tg_last_error();
    // one step of the output: the scale its DeQuantize reads
    float step =
        *static_cast<const float *>(tg_data_ptr(tg_module_buffer(tg_module_child(q, "dequant"), "input_scale")));
    char tol[64];
    snprintf(tol, sizeof tol, "--atol %.9g", step * 1.0001);
    std::string log = export_and_evaluate(q, randn_batch({1, 28, 28}), tol);
    std::string nodes = line(log, "nodes:");
    EXPECT_EQ(count(nodes, " QuantizeLinear"), 5) << nodes; // the input and each layer's output
    EXPECT_EQ(count(nodes, " DequantizeLinear"), 9) << nodes;
    EXPECT_EQ(count(nodes, " MaxPool"), 2) << nodes;
    EXPECT_NE(log.find("int8 initializers: 8"), std::string::npos) << log;
}

} // namespace
