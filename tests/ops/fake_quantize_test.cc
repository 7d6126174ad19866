// Fake quantisation ops (ops/fake_quantize.h) against PyTorch 1.13
// (tests/fixtures/gen_fake_quantize.py): values past both clamps and at the .5 ties,
// float32 and float64, per tensor and per channel along either axis; forward values
// and the straight-through gradients exactly. Then the argument errors.
#include <map>
#include <string>

#include "tapegrad.h"
#include "test_util.h"

namespace {

class FakeQuantizeOpTest : public TgTest {
  protected:
    std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/fake_quantize.txt");
};

TEST_F(FakeQuantizeOpTest, PerTensorMatchesPyTorch) {
    for (auto [dt, tag] : {std::pair{TG_FLOAT32, "f32"}, std::pair{TG_FLOAT64, "f64"}}) {
        TG_SCOPE {
            tg_tensor *x = fixture_tensor(fx, "x").make(dt, true);
            tg_tensor *y = tg_fake_quantize_per_tensor_affine(x, 0.1, 3, -20, 40);
            ASSERT_NE(y, nullptr) << tg_last_error();
            EXPECT_EQ(tg_dtype_of(y), dt);
            EXPECT_TRUE(tensor_near(y, fixture_tensor(fx, std::string("pt_") + tag + "_y").data, 0, 0)) << tag;
            ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, fixture_tensor(fx, "g").make(dt)))), TG_OK);
            EXPECT_TRUE(tensor_near(tg_grad(x), fixture_tensor(fx, std::string("pt_") + tag + "_grad").data, 0, 0))
                << tag;
        }
    }
}

// Issue 35: PyTorch 1.13 casts NaN and Inf to int64 (quant_min on x86), so
// fake_quantize_per_tensor_affine([1, nan, inf, -inf], 0.1, 0, 0, 255) is [1, 0, 0, 0].
// Here NaN and Inf pass through with a zero gradient; a huge finite value still clamps.
TEST_F(FakeQuantizeOpTest, NonFiniteValuesPropagate) {
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        TG_SCOPE {
            tg_tensor *x = dt == TG_FLOAT32 ? tensor_f32({1, NAN, INFINITY, -INFINITY, 1e30f}, TG_SHAPE(5), true)
                                            : tensor_f64({1, NAN, INFINITY, -INFINITY, 1e30}, TG_SHAPE(5), true);
            tg_tensor *y = tg_fake_quantize_per_tensor_affine(x, 0.1, 0, 0, 255);
            ASSERT_NE(y, nullptr) << tg_last_error();
            EXPECT_TRUE(tensor_near(y, {1, NAN, INFINITY, -INFINITY, 255 * (double)0.1f}, 1e-6));
            ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK) << tg_last_error();
            EXPECT_TRUE(tensor_near(tg_grad(x), {1, 0, 0, 0, 0}, 0));
            tg_tensor *xc = tg_cast(tensor_f64({NAN, 0.3, INFINITY, -1}, TG_SHAPE(2, 2)), dt);
            tg_tensor *yc = tg_fake_quantize_per_channel_affine(xc, tensor_f32({0.1f, 0.2f}, TG_SHAPE(2)),
                                                                tensor_i64({0, 0}, TG_SHAPE(2)), 0, -128, 127);
            EXPECT_TRUE(tensor_near(yc, {NAN, 0.3, INFINITY, -1}, 1e-6));
        }
    }
}

TEST_F(FakeQuantizeOpTest, PerChannelMatchesPyTorch) {
    for (int axis : {0, 1}) {
        TG_SCOPE {
            tg_tensor *x = fixture_tensor(fx, "x").make(TG_FLOAT32, true);
            tg_tensor *scale = fixture_tensor(fx, "pc_scale").make(TG_FLOAT32);
            tg_tensor *zp = fixture_tensor(fx, "pc_zero_point").make(axis ? TG_INT64 : TG_INT32);
            tg_tensor *y = tg_fake_quantize_per_channel_affine(x, scale, zp, axis, -30, 30);
            ASSERT_NE(y, nullptr) << tg_last_error();
            std::string p = "pc" + std::to_string(axis);
            EXPECT_TRUE(tensor_near(y, fixture_tensor(fx, p + "_y").data, 0, 0)) << p;
            ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, fixture_tensor(fx, "g").make(TG_FLOAT32)))), TG_OK);
            EXPECT_TRUE(tensor_near(tg_grad(x), fixture_tensor(fx, p + "_grad").data, 0, 0)) << p;
        }
    }
}

TEST_F(FakeQuantizeOpTest, HandComputedAndStraightThrough) {
    TG_SCOPE {
        // scale 0.5, zp 2, [0, 6]: x / 0.5 rounds half to even; 2.0 -> q 6 (kept), 2.3 -> q 7 (clamped)
        const float xs[] = {-1.0f, -1.3f, 0.25f, 0.75f, 2.0f, 2.3f};
        tg_tensor *x = tg_requires_grad_(tg_from_data(xs, TG_SHAPE(6), tg_opts{}), true);
        tg_tensor *y = tg_fake_quantize_per_tensor_affine(x, 0.5, 2, 0, 6);
        EXPECT_TRUE(tensor_near(y, {-1.0, -1.0, 0.0, 1.0, 2.0, 2.0}, 0, 0));
        ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK);
        EXPECT_TRUE(tensor_near(tg_grad(x), {1, 0, 1, 1, 1, 0}, 0, 0));
    }
}

TEST_F(FakeQuantizeOpTest, Errors) {
    TG_SCOPE {
        tg_tensor *x = tg_ones(TG_SHAPE(2, 3), tg_opts{});
        tg_clear_error();
        EXPECT_EQ(tg_fake_quantize_per_tensor_affine(x, 0.1, 300, 0, 255), nullptr);
        EXPECT_ERROR_CONTAINS("tg_fake_quantize_per_tensor_affine: `zero_point` must be between `quant_min` and "
                              "`quant_max`, got 300 not in [0, 255]");
        tg_clear_error();
        EXPECT_EQ(tg_fake_quantize_per_tensor_affine(x, 0.1, 0, 5, 1), nullptr);
        EXPECT_ERROR_CONTAINS("`quant_min` should be less than or equal to `quant_max`, got 5 and 1");
        tg_clear_error();
        EXPECT_EQ(tg_fake_quantize_per_tensor_affine(tg_ones(TG_SHAPE(2), tg_opts{.dtype = TG_INT64}), 0.1, 0, 0, 255),
                  nullptr);
        EXPECT_ERROR_CONTAINS("expected a float32 or float64 input, got int64");
        tg_tensor *s3 = tg_ones(TG_SHAPE(3), tg_opts{}), *z3 = tg_zeros(TG_SHAPE(3), tg_opts{.dtype = TG_INT32});
        tg_clear_error();
        EXPECT_EQ(tg_fake_quantize_per_channel_affine(x, s3, z3, 0, 0, 255), nullptr);
        EXPECT_ERROR_CONTAINS("tg_fake_quantize_per_channel_affine: expected scale and zero_point of shape [2] (input "
                              "[2, 3], axis 0), got [3] and [3]");
        tg_clear_error();
        EXPECT_EQ(tg_fake_quantize_per_channel_affine(x, s3, z3, 2, 0, 255), nullptr);
        EXPECT_ERROR_CONTAINS("`axis` must be between 0 and the number of dimensions of the input (2), got 2");
        tg_clear_error();
        EXPECT_EQ(
            tg_fake_quantize_per_channel_affine(x, tg_ones(TG_SHAPE(3), tg_opts{.dtype = TG_FLOAT64}), z3, 1, 0, 255),
            nullptr);
        EXPECT_ERROR_CONTAINS("expected a float32 scale and an int32 or int64 zero_point, got float64 and int32");
        tg_clear_error();
        EXPECT_EQ(
            tg_fake_quantize_per_channel_affine(x, s3, tg_full(TG_SHAPE(3), -1, tg_opts{.dtype = TG_INT32}), 1, 0, 255),
            nullptr);
        EXPECT_ERROR_CONTAINS("`zero_point` must be between `quant_min` and `quant_max`, got -1 not in [0, 255]");
    }
}

} // namespace
