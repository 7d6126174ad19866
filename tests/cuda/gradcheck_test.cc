// tg_gradcheck / tg_gradgradcheck on cuda:0 inputs (PyTorch's gradcheck accepts CUDA
// tensors): the finite differences perturb device memory in place, the one-hot output
// gradients and the projections live on the device; a wrong backward is caught there too.
#include "cuda_test_util.h"
#include "tapegrad.h"

namespace {
tg_tensor *smooth_fn(tg_tensor *const *in, void *) {
    return tg_sum_dim(tg_mul(tg_exp(tg_matmul(in[0], in[1])), tg_tanh(in[0])), 1, false);
}
// x * detach(x): the backward sees only one factor, so its Jacobian is half the true one.
tg_tensor *wrong_fn(tg_tensor *const *in, void *) { return tg_mul(in[0], tg_detach(in[0])); }
} // namespace

TEST_F(TgTest, CudaGradcheckPerturbsDeviceInputs) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *a = on_cuda(random_cpu(TG_SHAPE(3, 3), TG_FLOAT64, 1, -0.5, 0.5));
    tg_tensor *b = on_cuda(random_cpu(TG_SHAPE(3, 3), TG_FLOAT64, 2, -0.5, 0.5));
    ASSERT_TRUE(a && b) << tg_last_error();
    tg_requires_grad_(a, true);
    tg_requires_grad_(b, true);
    std::vector<double> a_before = values(a);
    tg_tensor *in[2] = {a, b};
    tg_gradcheck_opts o{};
    EXPECT_EQ(tg_gradcheck(smooth_fn, 2, in, &o), TG_OK) << tg_last_error();
    EXPECT_LT(o.worst_error, 1e-6);
    EXPECT_EQ(values(a), a_before); // restored
    EXPECT_EQ(tg_gradgradcheck(smooth_fn, 2, in, nullptr), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_device_of(a).kind, TG_DEVICE_CUDA);

    tg_tensor *x = on_cuda(random_cpu(TG_SHAPE(4), TG_FLOAT64, 3));
    tg_requires_grad_(x, true);
    tg_clear_error();
    EXPECT_NE(tg_gradcheck(wrong_fn, 1, &x, nullptr), TG_OK);
    EXPECT_ERROR_CONTAINS("Jacobian mismatch for input 0");
}
