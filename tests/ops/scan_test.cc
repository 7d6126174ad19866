// cumsum, cumprod, prod: PyTorch 1.13's values (cumsum and cumprod to the bit: float32
// accumulated in double, as its CPU kernels), gradients (with zeros for cumprod and
// prod), strided input, integer promotion, gradcheck twice, errors.
#include <string>
#include <vector>

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

using Op = tg_tensor *(*)(tg_tensor *);

void check_graded(const std::string &name, Op op) {
    SCOPED_TRACE(name);
    tg_tensor *x = fixture_tensor(fx(), name + "_in").make(TG_FLOAT64, true);
    tg_tensor *out = op(x);
    ASSERT_NE(out, nullptr) << tg_last_error();
    EXPECT_EQ(dims(out), fixture_tensor(fx(), name + "_out").shape);
    EXPECT_TRUE(tensor_near(out, fixture_tensor(fx(), name + "_out").data, 1e-14, 1e-13));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(out, fixture_tensor(fx(), name + "_w").make(TG_FLOAT64)))), TG_OK)
        << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), fixture_tensor(fx(), name + "_grad").data, 1e-12, 1e-12));
}

TEST_F(TgTest, CumprodAndProdMatchPyTorchIncludingZeros) {
    tg_tensor *p32 = fixture_tensor(fx(), "p32").make(TG_FLOAT32);
    EXPECT_TRUE(tensor_near(tg_cumprod(p32, 1), fixture_tensor(fx(), "cumprod32").data, 0));
    check_graded("cumprod", [](tg_tensor *x) { return tg_cumprod(x, 1); });
    check_graded("cumprod_zeros", [](tg_tensor *x) { return tg_cumprod(x, -1); });
    check_graded("prod_dim", [](tg_tensor *x) { return tg_prod_dim(x, 1, false); });
    check_graded("prod_keepdim_zeros", [](tg_tensor *x) { return tg_prod_dim(x, 2, true); });
    check_graded("prod_all", tg_prod);
    check_graded("prod_all_one_zero", tg_prod);
    check_graded("prod_all_two_zeros", tg_prod);
    tg_tensor *xi = tg_cast(fixture_tensor(fx(), "xi").make(TG_INT64), TG_INT32);
    tg_tensor *ci = tg_cumprod(xi, 1), *pi = tg_prod_dim(xi, 0, false);
    EXPECT_EQ(tg_dtype_of(ci), TG_INT64);
    EXPECT_EQ(tg_dtype_of(pi), TG_INT64);
    EXPECT_TRUE(tensor_near(ci, fixture_tensor(fx(), "cumprod_i").data, 0));
    EXPECT_TRUE(tensor_near(pi, fixture_tensor(fx(), "prod_i").data, 0));
    // empty products are 1; a 0-dim tensor is its own product
    EXPECT_TRUE(tensor_near(tg_prod_dim(tg_zeros(TG_SHAPE(2, 0), tg_opts{}), 1, false), {1, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_prod(tg_zeros(TG_SHAPE(0), tg_opts{})), {1}, 0));
    EXPECT_TRUE(tensor_near(tg_prod(tensor_f64({-2.5}, TG_SCALAR_SHAPE)), {-2.5}, 0));
}

TEST_F(TgTest, CumprodAndProdAreDifferentiableTwiceWithZeros) {
    tg_gradcheck_opts o = {};
    tg_tensor *x = fixture_tensor(fx(), "x").make(TG_FLOAT64, true);
    tg_tensor *z = fixture_tensor(fx(), "cumprod_zeros_in").make(TG_FLOAT64, true);
    tg_gradcheck_fn fns[] = {
        [](tg_tensor *const *in, void *) { return tg_cumprod(in[0], 1); },
        [](tg_tensor *const *in, void *) { return tg_cumprod(in[0], 2); },
        [](tg_tensor *const *in, void *) { return tg_prod_dim(in[0], 2, false); },
        [](tg_tensor *const *in, void *) { return tg_prod(tg_narrow(in[0], 0, 1, 1)); }, // two zeros
    };
    for (tg_tensor *t : {x, z}) {
        for (tg_gradcheck_fn fn : fns) {
            EXPECT_EQ(tg_gradcheck(fn, 1, &t, &o), TG_OK) << tg_last_error();
            EXPECT_EQ(tg_gradgradcheck(fn, 1, &t, &o), TG_OK) << tg_last_error();
        }
    }
}

// Lines are split over the thread pool: the same bits with 1 and 3 threads.
TEST_F(TgTest, ScansSplitLinesOverThreads) {
    int threads = tg_get_num_threads();
    tg_tensor *x = tg_cast(tg_add_scalar(tg_rand(TG_SHAPE(300, 500), tg_opts{}), 0.5), TG_FLOAT32);
    tg_set_num_threads(1);
    std::vector<double> sum1 = values(tg_cumsum(x, 1)), prod1 = values(tg_cumprod(x, 0));
    tg_set_num_threads(3);
    tg_tensor *sum3 = tg_cumsum(x, 1), *prod3 = tg_cumprod(x, 0);
    tg_set_num_threads(threads);
    EXPECT_TRUE(tensor_near(sum3, sum1, 0));
    EXPECT_TRUE(tensor_near(prod3, prod1, 0));
}

TEST_F(TgTest, CumsumErrors) {
    tg_clear_error();
    EXPECT_EQ(tg_cumsum(tg_zeros(TG_SHAPE(2, 3), tg_opts{}), 2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cumsum: dim 2 out of range for a tensor with 2 dims");
    tg_clear_error();
    EXPECT_EQ(tg_cumprod(tg_zeros(TG_SHAPE(2, 3), tg_opts{}), -3), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cumprod: dim -3 out of range for a tensor with 2 dims");
    tg_clear_error();
    EXPECT_EQ(tg_prod_dim(tg_zeros(TG_SHAPE(2, 3), tg_opts{}), 2, true), nullptr);
    EXPECT_ERROR_CONTAINS("tg_prod_dim: dim 2 out of range for a tensor with 2 dims");
    tg_clear_error();
    EXPECT_EQ(tg_prod(nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_prod: input 0 is NULL");
}

} // namespace
