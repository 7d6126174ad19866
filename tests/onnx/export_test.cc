// tg_onnx_export: the tutorials' models written as ONNX, checked by Debian's
// python3-onnx (onnx.checker, full check) and run by an independent runtime, OpenCV's
// DNN module (python3-opencv), against tapegrad's own eval-mode forward at batch sizes
// 1 and 7 (the file was exported at batch 2). Both come with ./bazelw's packages.
#include "tests/onnx/onnx_test_util.h"

namespace {

using tg_onnx_test::raw_arg;
using tg_onnx_test::run_checker;
using tg_onnx_test::run_python;

class OnnxExportTest : public TgTempDirTest {
  protected:
    // Exports `model` at batch 2, then checks the file and compares OpenCV's outputs with
    // the model's at batch sizes 1 and 7. `sample` is one input's shape without the batch.
    void export_and_compare(tg_module *model, std::vector<int64_t> sample) {
        std::string path = dir_ + "/model.onnx", args = path + " --opencv";
        auto batch_of = tg_onnx_test::randn_batch(sample);
        ASSERT_EQ(tg_onnx_export(model, batch_of(2), path.c_str(), nullptr), TG_OK) << tg_last_error();
        tg_eval(model);
        for (int64_t n : {1, 7}) {
            tg_tensor *x = batch_of(n), *y = tg_forward(model, x);
            ASSERT_NE(y, nullptr) << tg_last_error();
            args +=
                " " + raw_arg(x, dir_ + "/x" + std::to_string(n)) + " " + raw_arg(y, dir_ + "/y" + std::to_string(n));
        }
        std::string log;
        EXPECT_EQ(run_checker(args, &log), 0) << log;
        EXPECT_NE(log.find("batch 1: max error"), std::string::npos) << log;
        EXPECT_NE(log.find("batch 7: max error"), std::string::npos) << log;
        tg_module_free(model);
    }
};

tg_module *make_mlp() { // lesson 02
    return TG_NN_SEQUENTIAL(
        tg_nn_flatten(1, -1), tg_nn_linear(784, 1024, tg_linear_opts{}), tg_nn_relu(),
        tg_nn_linear(1024, 512, tg_linear_opts{}), tg_nn_relu(), tg_nn_linear(512, 256, tg_linear_opts{}), tg_nn_relu(),
        tg_nn_linear(256, 128, tg_linear_opts{}), tg_nn_relu(), tg_nn_linear(128, 10, tg_linear_opts{}));
}

tg_module *make_lenet(bool batch_norm) { // lessons 03 and 04
    tg_pool_opts pool2 = {};
    pool2.kernel_size = 2;
    if (!batch_norm)
        return TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 20, 5, tg_conv_opts{}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                                tg_nn_conv2d(20, 50, 5, tg_conv_opts{}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                                tg_nn_flatten(1, -1), tg_nn_linear(800, 500, tg_linear_opts{}), tg_nn_relu(),
                                tg_nn_linear(500, 10, tg_linear_opts{}));
    tg_module *m = TG_NN_SEQUENTIAL(
        tg_nn_conv2d(1, 20, 5, tg_conv_opts{}), tg_nn_batch_norm2d(20, tg_batch_norm_opts{}), tg_nn_relu(),
        tg_nn_max_pool2d(pool2), tg_nn_conv2d(20, 50, 5, tg_conv_opts{}), tg_nn_batch_norm2d(50, tg_batch_norm_opts{}),
        tg_nn_relu(), tg_nn_max_pool2d(pool2), tg_nn_flatten(1, -1), tg_nn_linear(800, 500, tg_linear_opts{}),
        tg_nn_relu(), tg_nn_linear(500, 10, tg_linear_opts{}));
    // running statistics other than 0 and 1: one training-mode forward
    tg_release(tg_forward(m, tg_mul_scalar(tg_add_scalar(tg_randn(TG_SHAPE(8, 1, 28, 28), tg_opts{}), 0.5), 2)));
    return m;
}

TEST_F(OnnxExportTest, MlpRunsInOpenCvAsInTapegrad) {
    tg_manual_seed(1);
    export_and_compare(make_mlp(), {1, 28, 28});
}

TEST_F(OnnxExportTest, LeNetRunsInOpenCvAsInTapegrad) {
    tg_manual_seed(2);
    export_and_compare(make_lenet(false), {1, 28, 28});
}

TEST_F(OnnxExportTest, LeNetBatchNormUsesRunningStatistics) {
    tg_manual_seed(3);
    tg_module *m = make_lenet(true);
    ASSERT_TRUE(tg_is_training(m));
    export_and_compare(m, {1, 28, 28});
}

TEST_F(OnnxExportTest, InitializersCarryStateDictNamesAndBatchIsFree) {
    tg_manual_seed(4);
    tg_module *m = make_mlp();
    std::string path = dir_ + "/mlp.onnx";
    ASSERT_EQ(tg_onnx_export(m, tg_randn(TG_SHAPE(3, 1, 28, 28), tg_opts{}), path.c_str(), nullptr), TG_OK)
        << tg_last_error();
    EXPECT_TRUE(tg_is_training(m)) << "training mode restored";
    std::string log;
    std::string script = "import onnx; m = onnx.load('" + path +
                         "'); g = m.graph; "
                         "print(sorted(i.name for i in g.initializer if not i.name.startswith('const'))); "
                         "print([n.op_type for n in g.node]); "
                         "print(g.input[0].name, g.input[0].type.tensor_type.shape.dim[0].dim_param, "
                         "g.output[0].name, g.output[0].type.tensor_type.shape.dim[0].dim_param)";
    EXPECT_EQ(run_python("-c \"" + script + "\"", &log), 0) << log;
    EXPECT_NE(log.find("['1.bias', '1.weight', '3.bias', '3.weight', '5.bias', '5.weight', '7.bias', '7.weight', "
                       "'9.bias', '9.weight']"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("['Reshape', 'Gemm', 'Relu', 'Gemm', 'Relu', 'Gemm', 'Relu', 'Gemm', 'Relu', 'Gemm']"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("input batch output batch"), std::string::npos) << log;
    tg_module_free(m);
}

// ---- errors: a clear message, no file left behind ----

tg_tensor *no_onnx_forward(tg_ctx *, tg_tensor *const *in) { return tg_mul_scalar(in[0], 2); }
const tg_function kNoOnnx = {
    .name = "double_it", .num_inputs = 1, .forward = no_onnx_forward, .low_precision = TG_LOW_PRECISION_NATIVE};
tg_tensor *doubler_forward(tg_module *, tg_tensor *x) { return tg_apply(&kNoOnnx, &x); }
const tg_module_type kDoubler = {.name = "Doubler", .forward = doubler_forward};

TEST_F(OnnxExportTest, OpWithoutMappingNamesOpAndModuleAndWritesNothing) {
    tg_module *m = TG_NN_SEQUENTIAL(tg_nn_linear(4, 4, tg_linear_opts{}), tg_module_new(&kDoubler, 0));
    std::string path = dir_ + "/x.onnx";
    EXPECT_EQ(tg_onnx_export(m, tg_randn(TG_SHAPE(2, 4), tg_opts{}), path.c_str(), nullptr), TG_ERROR);
    EXPECT_NE(std::string(tg_last_error()).find("double_it in 1 (Doubler): no ONNX mapping"), std::string::npos)
        << tg_last_error();
    EXPECT_NE(access(path.c_str(), F_OK), 0);
    EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
    tg_module_free(m);
}

TEST_F(OnnxExportTest, UnwritablePathAndBadOptionsAreErrors) {
    tg_module *m = TG_NN_SEQUENTIAL(tg_nn_linear(4, 4, tg_linear_opts{}));
    tg_tensor *x = tg_randn(TG_SHAPE(2, 4), tg_opts{});
    std::string path = dir_ + "/missing/x.onnx";
    EXPECT_EQ(tg_onnx_export(m, x, path.c_str(), nullptr), TG_ERROR);
    EXPECT_NE(std::string(tg_last_error()).find("cannot create " + path + ".tmp"), std::string::npos)
        << tg_last_error();
    tg_onnx_opts old = {.opset = 11};
    EXPECT_EQ(tg_onnx_export(m, x, (dir_ + "/y.onnx").c_str(), &old), TG_ERROR);
    EXPECT_NE(std::string(tg_last_error()).find("opset 11 is not supported (13 to 17)"), std::string::npos)
        << tg_last_error();
    tg_onnx_opts same = {.input_name = "x", .output_name = "x"};
    EXPECT_EQ(tg_onnx_export(m, x, (dir_ + "/y.onnx").c_str(), &same), TG_ERROR);
    EXPECT_EQ(tg_onnx_export(nullptr, x, (dir_ + "/y.onnx").c_str(), nullptr), TG_ERROR);
    EXPECT_EQ(tg_onnx_export(m, nullptr, (dir_ + "/y.onnx").c_str(), nullptr), TG_ERROR);
    EXPECT_NE(access((dir_ + "/y.onnx").c_str(), F_OK), 0);
    tg_module_free(m);
}

// A forward that makes a tensor with the input's batch size outside any recorded op
// (tg_ones of x's shape: a constant of the example's batch in the file) cannot run at
// another batch size: refused unless the batch is static. Its noise (tg_randn_like, an
// op: RandomNormalLike) is drawn in both traces, and the caller's stream is left as it was.
tg_tensor *noisy_forward(tg_module *, tg_tensor *x) {
    return tg_add(tg_add(x, tg_mul_scalar(tg_randn_like(x), 0.1)), tg_ones(tg_shape_of(x), tg_opts{}));
}
const tg_module_type kNoisy = {.name = "Noisy", .forward = noisy_forward};

TEST_F(OnnxExportTest, ConstantTakenFromTheBatchIsRefusedAndRngLeftAlone) {
    tg_module *m = TG_NN_SEQUENTIAL(tg_nn_linear(4, 4, tg_linear_opts{}), tg_module_new(&kNoisy, 0));
    tg_tensor *x = tg_randn(TG_SHAPE(2, 4), tg_opts{});
    std::string path = dir_ + "/noisy.onnx";
    tg_manual_seed(7);
    tg_tensor *expected = tg_randn(TG_SHAPE(3), tg_opts{});
    tg_manual_seed(7);
    EXPECT_EQ(tg_onnx_export(m, x, path.c_str(), nullptr), TG_ERROR);
    EXPECT_NE(std::string(tg_last_error()).find("differs between batch 2 and 3"), std::string::npos) << tg_last_error();
    EXPECT_NE(access(path.c_str(), F_OK), 0);
    EXPECT_TRUE(tensor_near(tg_randn(TG_SHAPE(3), tg_opts{}), values(expected), 0))
        << "the export drew from the stream";
    tg_onnx_opts fixed = {};
    fixed.static_batch = true;
    EXPECT_EQ(tg_onnx_export(m, x, path.c_str(), &fixed), TG_OK) << tg_last_error();
    tg_module_free(m);
}

} // namespace
