// cumsum: PyTorch 1.13's values to the bit (float32 accumulated in double, as its CPU
// kernel), gradient, strided input, integer promotion, gradcheck twice, errors.
#include <string>

#include "tests/test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/scan.txt");
    return f;
}

TEST_F(TgTest, CumsumMatchesPyTorchToTheBit) {
    tg_tensor *x32 = fixture_tensor(fx(), "x32").make(TG_FLOAT32);
    tg_tensor *c32 = tg_cumsum(x32, 1);
    ASSERT_NE(c32, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(c32), TG_FLOAT32);
    EXPECT_TRUE(tensor_near(c32, fixture_tensor(fx(), "cumsum32").data, 0));
    tg_tensor *x = fixture_tensor(fx(), "x").make(TG_FLOAT64, true);
    tg_tensor *c = tg_cumsum(x, -2);
    EXPECT_TRUE(tensor_near(c, fixture_tensor(fx(), "cumsum").data, 0));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(c, fixture_tensor(fx(), "w").make(TG_FLOAT64)))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), fixture_tensor(fx(), "cumsum_grad").data, 1e-12));
    EXPECT_TRUE(tensor_near(tg_cumsum(tg_transpose(x, 0, 2), 0), fixture_tensor(fx(), "cumsum_t").data, 0));
    tg_tensor *xi = tg_cast(fixture_tensor(fx(), "xi").make(TG_INT64), TG_INT32);
    tg_tensor *ci = tg_cumsum(xi, 1);
    EXPECT_EQ(tg_dtype_of(ci), TG_INT64);
    EXPECT_TRUE(tensor_near(ci, fixture_tensor(fx(), "cumsum_i").data, 0));
    EXPECT_TRUE(tensor_near(tg_cumsum(tensor_f64({3}, TG_SCALAR_SHAPE), 0), {3}, 0));
}

TEST_F(TgTest, CumsumIsDifferentiableTwice) {
    tg_gradcheck_opts o = {};
    tg_tensor *x = fixture_tensor(fx(), "x").make(TG_FLOAT64, true);
    auto fn = [](tg_tensor *const *in, void *) { return tg_square(tg_cumsum(in[0], 1)); };
    EXPECT_EQ(tg_gradcheck(fn, 1, &x, &o), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_gradgradcheck(fn, 1, &x, &o), TG_OK) << tg_last_error();
}

TEST_F(TgTest, CumsumErrors) {
    tg_clear_error();
    EXPECT_EQ(tg_cumsum(tg_zeros(TG_SHAPE(2, 3), tg_opts{}), 2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cumsum: dim 2 out of range for a tensor with 2 dims");
}

}  // namespace
