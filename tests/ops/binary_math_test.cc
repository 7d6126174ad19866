// atan2, fmod and remainder (rows of ops/binary_formulas.h): PyTorch 1.13's values
// and gradients (tests/fixtures/gen_binary_math.py) in float64 and float32, integer
// results and dtypes, gradcheck and gradgradcheck, and the errors.
#include <cmath>
#include <string>
#include <vector>

#include "op_fixture.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/binary_math.txt");
    return f;
}

void check(const std::string &name, const FixtureOp &op) {
    check_fixture_in(fx(), name, TG_FLOAT64, op);
    check_fixture_in(fx(), name, TG_FLOAT32, op);
}

TEST_F(TgTest, Atan2FmodRemainderMatchPyTorch) {
    check("atan2", [](auto &in, tg_tensor **) { return tg_atan2(in[0], in[1]); });
    check("atan2_broadcast", [](auto &in, tg_tensor **) { return tg_atan2(in[0], in[1]); });
    check("fmod", [](auto &in, tg_tensor **) { return tg_fmod(in[0], in[1]); });
    check("remainder", [](auto &in, tg_tensor **) { return tg_remainder(in[0], in[1]); });
    check("fmod_broadcast", [](auto &in, tg_tensor **) { return tg_fmod(in[0], in[1]); });
    check("remainder_broadcast", [](auto &in, tg_tensor **) { return tg_remainder(in[0], in[1]); });
    check("fmod_scalar", [](auto &in, tg_tensor **) { return tg_fmod_scalar(in[0], -1.5); });
    check("remainder_scalar", [](auto &in, tg_tensor **) { return tg_remainder_scalar(in[0], 2); });
}

TEST_F(TgTest, IntegerFmodAndRemainder) {
    tg_tensor *a = fixture_tensor(fx(), "int_a").make(TG_INT64), *b = fixture_tensor(fx(), "int_b").make(TG_INT64);
    struct {
        tg_tensor *out;
        const char *want;
        tg_dtype dtype;
    } cases[] = {
        {tg_fmod(a, b), "int_fmod", TG_INT64},
        {tg_remainder(a, b), "int_remainder", TG_INT64},
        {tg_remainder_scalar(a, -4), "int_remainder_scalar", TG_INT64},
        {tg_fmod_scalar(a, 2.5), "int_fmod_float_scalar", TG_FLOAT32},
        {tg_atan2(a, b), "int_atan2", TG_FLOAT32},
        {tg_fmod(tg_cast(a, TG_INT32), tg_cast(b, TG_INT32)), "int_fmod", TG_INT32},
        {tg_remainder(tg_cast(a, TG_INT32), tg_cast(b, TG_INT32)), "int_remainder", TG_INT32},
    };
    for (auto &c : cases) {
        SCOPED_TRACE(c.want);
        ASSERT_NE(c.out, nullptr) << tg_last_error();
        EXPECT_EQ(tg_dtype_of(c.out), c.dtype);
        EXPECT_TRUE(tensor_near(c.out, fixture_tensor(fx(), c.want).data, 1e-7));
    }
    // INT64_MIN % -1 would trap in C; it is 0
    tg_tensor *lowest = tensor_i64({INT64_MIN, 5}, TG_SHAPE(2));
    EXPECT_TRUE(tensor_near(tg_remainder_scalar(lowest, -1), {0, 0}, 0));
}

TEST_F(TgTest, FloatingModuloByZeroIsNan) {
    tg_tensor *a = tensor_f32({1.5f, -2}, TG_SHAPE(2));
    std::vector<double> f = values(tg_fmod_scalar(a, 0.0)),
                        r = values(tg_remainder(a, tg_zeros(TG_SHAPE(2), tg_opts{})));
    for (double v : f) EXPECT_TRUE(std::isnan(v));
    for (double v : r) EXPECT_TRUE(std::isnan(v));
}

tg_tensor *atan2_fn(tg_tensor *const *in, void *) { return tg_atan2(in[0], in[1]); }
tg_tensor *fmod_fn(tg_tensor *const *in, void *) { return tg_mul(tg_fmod(in[0], in[1]), in[0]); }
tg_tensor *remainder_fn(tg_tensor *const *in, void *) { return tg_square(tg_remainder(in[0], in[1])); }

TEST_F(TgTest, Atan2FmodRemainderGradcheck) {
    tg_tensor *y = rand64(TG_SHAPE(3, 4), 1), *x = rand64(TG_SHAPE(3, 4), 2);
    EXPECT_GRADCHECK(atan2_fn, y, x);
    EXPECT_GRADGRADCHECK(atan2_fn, y, x);
    // quotients well away from integers, where fmod / remainder jump
    tg_tensor *a = tensor_f64({5.5, -5.3, 2.2, -7.4, 0.3, -0.6}, TG_SHAPE(2, 3), true);
    tg_tensor *b = tensor_f64({2.0, 2.0, -0.9, -2.0, 0.7, 0.8}, TG_SHAPE(2, 3), true);
    EXPECT_GRADCHECK(fmod_fn, a, b);
    EXPECT_GRADGRADCHECK(fmod_fn, a, b);
    EXPECT_GRADCHECK(remainder_fn, a, b);
    EXPECT_GRADGRADCHECK(remainder_fn, a, b);
}

TEST_F(TgTest, BinaryMathErrors) {
    tg_tensor *i = tensor_i64({4, 5}, TG_SHAPE(2));
    tg_clear_error();
    EXPECT_EQ(tg_fmod(i, tensor_i64({1, 0}, TG_SHAPE(2))), nullptr);
    EXPECT_ERROR_CONTAINS("fmod: integer division by zero (ZeroDivisionError)");
    tg_clear_error();
    EXPECT_EQ(tg_remainder_scalar(i, 0), nullptr);
    EXPECT_ERROR_CONTAINS("remainder: integer division by zero");
    tg_clear_error();
    tg_tensor *u8 = tg_cast(i, TG_UINT8);
    EXPECT_EQ(tg_remainder(u8, u8), nullptr);
    EXPECT_ERROR_CONTAINS("remainder: not implemented for uint8 (cast to int64 or a floating dtype first)");
    tg_clear_error();
    EXPECT_EQ(tg_fmod(tg_cast(i, TG_BOOL), tg_cast(i, TG_BOOL)), nullptr);
    EXPECT_ERROR_CONTAINS("fmod: not implemented for bool");
    tg_clear_error();
    EXPECT_EQ(tg_atan2(tg_zeros(TG_SHAPE(2, 3), tg_opts{}), tg_zeros(TG_SHAPE(2), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("atan2: shapes [2, 3] and [2] cannot be broadcast together");
}

} // namespace
