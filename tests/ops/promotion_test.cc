// Dtype rules of PyTorch 1.13 that tapegrad follows, checked by hand: tensor-scalar
// arithmetic (torch.result_type with a Python int or float), 0-dim tensors in binary
// ops, true division by a scalar, gradients of mixed-dtype ops in the input's dtype,
// and clamp with min > max.
#include <cmath>

#include "test_util.h"

namespace {

tg_tensor *ints(std::vector<int64_t> v, tg_dtype dt = TG_INT64) {
    return tg_cast(tensor_i64(v, TG_SHAPE((int64_t)v.size())), dt);
}

} // namespace

// torch.tensor([1, 2, 3]) / 2 -> float32 [0.5, 1, 1.5]; * 2.5 -> float32; + 2 -> int64.
TEST_F(TgTest, IntegerTensorWithScalarPromotesAsPyTorch) {
    tg_tensor *x = ints({1, 2, 3});
    struct Case {
        const char *what;
        tg_tensor *y;
        tg_dtype dtype;
        std::vector<double> expected;
    } cases[] = {
        {"div 2", tg_div_scalar(x, 2), TG_FLOAT32, {0.5, 1, 1.5}},
        {"div 1 (true division even when exact)", tg_div_scalar(x, 1), TG_FLOAT32, {1, 2, 3}},
        {"mul 2.5", tg_mul_scalar(x, 2.5), TG_FLOAT32, {2.5, 5, 7.5}},
        {"add 0.5", tg_add_scalar(x, 0.5), TG_FLOAT32, {1.5, 2.5, 3.5}},
        {"sub 0.25", tg_sub_scalar(x, 0.25), TG_FLOAT32, {0.75, 1.75, 2.75}},
        {"rsub 0.5", tg_rsub_scalar(x, 0.5), TG_FLOAT32, {-0.5, -1.5, -2.5}},
        {"pow 0.5", tg_pow_scalar(x, 0.5), TG_FLOAT32, {1, std::sqrt(2.0), std::sqrt(3.0)}},
        {"add 2 (integral: stays int64)", tg_add_scalar(x, 2), TG_INT64, {3, 4, 5}},
        {"mul -3", tg_mul_scalar(x, -3), TG_INT64, {-3, -6, -9}},
        {"pow 3", tg_pow_scalar(x, 3), TG_INT64, {1, 8, 27}},
        {"int32 add 1", tg_add_scalar(ints({1, 2, 3}, TG_INT32), 1), TG_INT32, {2, 3, 4}},
        {"bool mul 2 -> int64", tg_mul_scalar(ints({1, 0, 1}, TG_BOOL), 2), TG_INT64, {2, 0, 2}},
        {"bool add 0.5 -> float32", tg_add_scalar(ints({1, 0, 1}, TG_BOOL), 0.5), TG_FLOAT32, {1.5, 0.5, 1.5}},
        {"float64 stays float64", tg_add_scalar(tg_cast(x, TG_FLOAT64), 0.5), TG_FLOAT64, {1.5, 2.5, 3.5}},
    };
    for (const Case &c : cases) {
        ASSERT_NE(c.y, nullptr) << c.what << ": " << tg_last_error();
        EXPECT_EQ(tg_dtype_of(c.y), c.dtype) << c.what << ": " << tg_dtype_name(tg_dtype_of(c.y));
        EXPECT_TRUE(tensor_near(c.y, c.expected, 1e-6)) << c.what;
    }
}

TEST_F(TgTest, IntegerToNegativeIntegerPowerIsAnError) {
    EXPECT_EQ(tg_pow_scalar(ints({1, 2}), -1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_pow_scalar: integers to negative integer powers are not allowed (int64 tensor");
    tg_tensor *y = tg_pow_scalar(ints({1, 2}), -0.5); // a fractional exponent makes it float32
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(y, {1, 1 / std::sqrt(2.0)}, 1e-6));
}

// PyTorch divides (x / 3 in float32), it does not multiply by a rounded 1/3: the two
// differ in the last bit for about a quarter of these values.
TEST_F(TgTest, DivScalarIsTrueDivision) {
    std::vector<float> xs;
    for (int i = 1; i <= 100; i++) xs.push_back((float)i * 0.1f);
    tg_tensor *y = tg_div_scalar(tensor_f32(xs, TG_SHAPE(100)), 3);
    ASSERT_NE(y, nullptr);
    std::vector<double> got = values(y);
    int differs_from_reciprocal = 0;
    for (size_t i = 0; i < xs.size(); i++) {
        EXPECT_EQ((float)got[i], xs[i] / 3.0f) << "x = " << xs[i];
        differs_from_reciprocal += xs[i] / 3.0f != xs[i] * (float)(1.0 / 3);
    }
    EXPECT_GT(differs_from_reciprocal, 0); // the test can tell the two apart
    // and its gradient is g / s
    tg_tensor *x = tensor_f64({1, 2}, TG_SHAPE(2), true);
    ASSERT_EQ(tg_backward(tg_sum(tg_div_scalar(x, 4))), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), {0.25, 0.25}, 0));
}

// torch.result_type: a 0-dim tensor does not widen a dimensioned one of its category.
TEST_F(TgTest, ZeroDimTensorsPromoteOnlyAcrossCategories) {
    tg_tensor *f32 = tg_ones(TG_SHAPE(2), tg_opts{TG_FLOAT32, TG_CPU, false});
    tg_tensor *i32 = tg_ones(TG_SHAPE(2), tg_opts{TG_INT32, TG_CPU, false});
    tg_tensor *f64_0d = tg_full(TG_SHAPE(), 2.5, tg_opts{TG_FLOAT64, TG_CPU, false});
    tg_tensor *i64_0d = tg_full(TG_SHAPE(), 3, tg_opts{TG_INT64, TG_CPU, false});
    tg_tensor *bool_1d = tg_gt(f32, tg_zeros(TG_SHAPE(2), tg_opts{}));
    struct Case {
        const char *what;
        tg_tensor *y;
        tg_dtype dtype;
        double first;
    } cases[] = {
        {"float32[2] * float64[]", tg_mul(f32, f64_0d), TG_FLOAT32, 2.5},
        {"float64[] * float32[2]", tg_mul(f64_0d, f32), TG_FLOAT32, 2.5},
        {"int32[2] + int64[]", tg_add(i32, i64_0d), TG_INT32, 4},
        {"int32[2] * float64[] (higher category)", tg_mul(i32, f64_0d), TG_FLOAT64, 2.5},
        {"bool[2] + int64[]", tg_add(bool_1d, i64_0d), TG_INT64, 4},
        {"float64[] + int64[] (both 0-dim)", tg_add(f64_0d, i64_0d), TG_FLOAT64, 5.5},
        {"float32[2] + float64[1] (1-dim: promotes)",
         tg_add(f32, tg_full(TG_SHAPE(1), 1, tg_opts{TG_FLOAT64, TG_CPU, false})), TG_FLOAT64, 2},
    };
    for (const Case &c : cases) {
        ASSERT_NE(c.y, nullptr) << c.what << ": " << tg_last_error();
        EXPECT_EQ(tg_dtype_of(c.y), c.dtype) << c.what << ": got " << tg_dtype_name(tg_dtype_of(c.y));
        EXPECT_EQ(values(c.y)[0], c.first) << c.what;
    }
}

// A mixed-dtype op computes in the wider dtype; each input's gradient comes back in its
// own dtype (PyTorch's engine casts it), here for a float32 and a float64 leaf.
TEST_F(TgTest, MixedDtypeGradientsComeBackInTheInputsDtype) {
    tg_tensor *a = tensor_f32({1, 2, 3}, TG_SHAPE(3), true);
    tg_tensor *b = tensor_f64({4, 5, 6}, TG_SHAPE(3), true);
    tg_tensor *y = tg_mul(a, b);
    ASSERT_NE(y, nullptr);
    EXPECT_EQ(tg_dtype_of(y), TG_FLOAT64);
    ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(tg_grad(a)), TG_FLOAT32);
    EXPECT_EQ(tg_dtype_of(tg_grad(b)), TG_FLOAT64);
    EXPECT_TRUE(tensor_near(tg_grad(a), {4, 5, 6}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(b), {1, 2, 3}, 0));
    // and through a broadcast 0-dim float64 factor
    tg_tensor *s = tensor_f64({2}, TG_SHAPE(), true);
    tg_tensor *c = tensor_f32({1, 2, 3}, TG_SHAPE(3), true);
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(c, s))), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(tg_grad(s)), TG_FLOAT64);
    EXPECT_TRUE(tensor_near(tg_grad(s), {6}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(c), {2, 2, 2}, 0));
}

// torch.clamp(x, min, max) = min(max(x, min), max): with min > max every element is
// max, and no gradient flows.
TEST_F(TgTest, ClampWithMinAboveMaxGivesMax) {
    tg_tensor *x = tensor_f64({-1, 0.5, 2}, TG_SHAPE(3), true);
    tg_tensor *y = tg_clamp(x, 1, -1);
    ASSERT_NE(y, nullptr);
    EXPECT_TRUE(tensor_near(y, {-1, -1, -1}, 0));
    ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), {0, 0, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_clamp(ints({-5, 0, 5}), 2, -2), {-2, -2, -2}, 0));
    // the ordinary case still clamps both ways, NaN passes through
    EXPECT_TRUE(tensor_near(tg_clamp(tensor_f32({-3, 0, 3, NAN}, TG_SHAPE(4)), -1, 1), {-1, 0, 1, NAN}, 0));
}
