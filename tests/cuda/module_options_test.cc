// The PyTorch module options of tests/nn/module_options_test.cc on cuda:0 against the
// CPU: bicubic interpolation, conv_transpose2d to an output size, an LSTM with
// proj_size and MultiheadAttention with kdim / vdim, add_bias_kv and add_zero_attn
// (all compositions of ops with CUDA kernels), values and gradients.
#include "cuda_test_util.h"
#include "tapegrad.h"

TEST_F(TgTest, CudaBicubicAndConvTransposeToSizeMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_tensor *x = random_cpu(TG_SHAPE(2, 3, 4, 5), dt, 1);
        for (bool ac : {false, true})
            EXPECT_TRUE(compare_devices(
                [ac](const std::vector<tg_tensor *> &in) {
                    return tg_interpolate(in[0], tg_interpolate_opts{TG_INTERP_BICUBIC, {0, 0}, {1.7, 0.6}, ac});
                },
                {x}))
                << tg_dtype_name(dt) << " align_corners " << ac;
        tg_tensor *w = random_cpu(TG_SHAPE(3, 2, 3, 3), dt, 2), *b = random_cpu(TG_SHAPE(2), dt, 3);
        EXPECT_TRUE(compare_devices(
            [](const std::vector<tg_tensor *> &in) {
                return tg_conv_transpose2d_to_size(in[0], in[1], in[2], tg_conv_transpose_opts{.stride = 3}, 13, 16);
            },
            {x, w, b}))
            << tg_dtype_name(dt);
    }
}

namespace {
// The module's result on the CPU and on cuda:0 (a copy of the same weights).
template <typename F> void compare_module(tg_module *m, const std::vector<tg_tensor *> &inputs, F run) {
    std::vector<tg_tensor *> gpu_in;
    for (tg_tensor *t : inputs) gpu_in.push_back(on_cuda(t));
    std::vector<tg_tensor *> cpu_out = run(m, inputs);
    for (tg_tensor *&t : cpu_out) t = tg_detach(t);
    ASSERT_EQ(tg_module_to(m, tg_cuda(0)), TG_OK) << tg_last_error();
    std::vector<tg_tensor *> gpu_out = run(m, gpu_in);
    ASSERT_EQ(cpu_out.size(), gpu_out.size());
    for (size_t k = 0; k < cpu_out.size(); k++) EXPECT_TRUE(same_values(cpu_out[k], gpu_out[k], 1e-5, 1e-5)) << k;
}
} // namespace

TEST_F(TgTest, CudaLstmProjAndAttentionOptionsMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_manual_seed(3);
    tg_module *lstm = tg_nn_lstm(5, 6, tg_rnn_opts{.num_layers = 2, .bidirectional = true, .proj_size = 3});
    compare_module(lstm, {random_cpu(TG_SHAPE(4, 2, 5), TG_FLOAT32, 4)},
                   [](tg_module *m, const std::vector<tg_tensor *> &in) {
                       tg_rnn_result r;
                       EXPECT_EQ(tg_rnn_forward(m, in[0], nullptr, nullptr, &r), TG_OK) << tg_last_error();
                       return std::vector<tg_tensor *>{r.output, r.h_n, r.c_n};
                   });
    tg_module_free(lstm);
    tg_module *mha =
        tg_nn_multihead_attention(8, 2, tg_mha_opts{.kdim = 5, .vdim = 3, .add_bias_kv = true, .add_zero_attn = true});
    compare_module(mha,
                   {random_cpu(TG_SHAPE(4, 3, 8), TG_FLOAT32, 5), random_cpu(TG_SHAPE(6, 3, 5), TG_FLOAT32, 6),
                    random_cpu(TG_SHAPE(6, 3, 3), TG_FLOAT32, 7)},
                   [](tg_module *m, const std::vector<tg_tensor *> &in) {
                       tg_tensor *out = nullptr, *w = nullptr;
                       EXPECT_EQ(tg_mha_forward(m, in[0], in[1], in[2], tg_mha_call_opts{}, &out, &w), TG_OK)
                           << tg_last_error();
                       return std::vector<tg_tensor *>{out, w};
                   });
    tg_module_free(mha);
}
