// Pooling: PyTorch fixtures, gradcheck / gradgradcheck, bad inputs.
#include "nn_fixture_util.h"

#include <cmath>

#include "core/denormal.h"

namespace {

class PoolTest : public TgTest, public ::testing::WithParamInterface<tg_dtype> {};

tg_tensor *max_with_indices(std::vector<tg_tensor *> &in, tg_pool_opts o, const std::string &name) {
    tg_tensor *idx = nullptr;
    tg_tensor *y = tg_max_pool2d(in[0], o, &idx);
    EXPECT_TRUE(idx != nullptr);
    if (idx) {
        EXPECT_EQ(tg_dtype_of(idx), TG_INT64);
        EXPECT_TRUE(tensor_near(idx, nn_fixture(name + ".indices").data, 0)) << "indices";
    }
    return y;
}

TEST_P(PoolTest, MaxMatchesPyTorch) {
    tg_dtype dt = GetParam();
    check_nn_case("maxpool_pad", {"x"}, dt, [](auto &in) {
        return max_with_indices(in, tg_pool_opts{.kernel_size = 3, .stride = 2, .padding = 1}, "maxpool_pad");
    });
    check_nn_case("maxpool_default", {"x"}, dt,
                  [](auto &in) { return max_with_indices(in, tg_pool_opts{.kernel_size = 2}, "maxpool_default"); });
    check_nn_case("maxpool_ceil", {"x"}, dt, [](auto &in) {
        return max_with_indices(in, tg_pool_opts{.kernel_size = 3, .stride = 2, .ceil_mode = true}, "maxpool_ceil");
    });
    check_nn_case("maxpool_dil", {"x"}, dt, [](auto &in) {
        return max_with_indices(in, tg_pool_opts{.kernel_size = 3, .stride = 2, .padding = 1, .dilation = 2},
                                "maxpool_dil");
    });
    check_nn_case("maxpool_dil_ceil", {"x"}, dt, [](auto &in) {
        tg_pool_opts o = {.kernel_size = 2, .stride = 4, .padding = 1, .ceil_mode = true, .dilation = 2};
        return max_with_indices(in, o, "maxpool_dil_ceil");
    });
    check_nn_case("maxpool_dil_unit_stride", {"x"}, dt, [](auto &in) {
        return max_with_indices(in, tg_pool_opts{.kernel_size = 2, .stride = 1, .dilation = 3},
                                "maxpool_dil_unit_stride");
    });
    check_nn_case("maxpool_per_dim", {"x"}, dt, [](auto &in) {
        tg_pool_opts o = {.kernel_sizes = {3, 2}, .strides = {2, 1}, .paddings = {1, 0}, .dilations = {1, 2}};
        return max_with_indices(in, o, "maxpool_per_dim");
    });
}

TEST_P(PoolTest, AvgMatchesPyTorch) {
    tg_dtype dt = GetParam();
    check_nn_case("avgpool_pad", {"x"}, dt, [](auto &in) {
        return tg_avg_pool2d(in[0], tg_pool_opts{.kernel_size = 3, .stride = 2, .padding = 1});
    });
    check_nn_case("avgpool_exclude", {"x"}, dt, [](auto &in) {
        return tg_avg_pool2d(in[0],
                             tg_pool_opts{.kernel_size = 3, .stride = 2, .padding = 1, .count_exclude_pad = true});
    });
    check_nn_case("avgpool_ceil", {"x"}, dt, [](auto &in) {
        return tg_avg_pool2d(in[0], tg_pool_opts{.kernel_size = 3, .stride = 2, .padding = 1, .ceil_mode = true});
    });
    check_nn_case("adaptive_34", {"x"}, dt, [](auto &in) { return tg_adaptive_avg_pool2d(in[0], 3, 4); });
    check_nn_case("adaptive_11", {"x"}, dt, [](auto &in) { return tg_adaptive_avg_pool2d(in[0], 1, 1); });
    check_nn_case("avgpool_per_dim", {"x"}, dt, [](auto &in) {
        tg_pool_opts o = {.ceil_mode = true,
                          .count_exclude_pad = true,
                          .kernel_sizes = {2, 3},
                          .strides = {1, 2},
                          .paddings = {1, 1}};
        return tg_avg_pool2d(in[0], o);
    });
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PoolTest, ::testing::Values(TG_FLOAT32, TG_FLOAT64));

enum Kind { MAX, MAX_DILATED, AVG, AVG_EXCLUDE, ADAPTIVE };
struct PoolCase {
    Kind kind;
    bool transpose;
};

tg_tensor *pool_gc(tg_tensor *const *in, void *user) {
    const PoolCase *c = static_cast<const PoolCase *>(user);
    tg_tensor *x = c->transpose ? tg_transpose(in[0], 2, 3) : in[0];
    tg_pool_opts o = {.kernel_size = 3, .stride = 2, .padding = 1};
    switch (c->kind) {
    case MAX: return tg_max_pool2d(x, o, nullptr);
    case MAX_DILATED: o.dilation = 2; return tg_max_pool2d(x, o, nullptr);
    case AVG: return tg_avg_pool2d(x, o);
    case AVG_EXCLUDE: o.count_exclude_pad = true; return tg_avg_pool2d(x, o);
    default: return tg_adaptive_avg_pool2d(x, 2, 3);
    }
}

TEST_F(TgTest, PoolGradcheck) {
    tg_manual_seed(3);
    for (Kind k : {MAX, MAX_DILATED, AVG, AVG_EXCLUDE, ADAPTIVE}) {
        for (bool transpose : {false, true}) {
            SCOPED_TRACE(std::to_string(k) + (transpose ? " transposed" : ""));
            PoolCase c = {k, transpose};
            // Distinct values (a permutation) so max pooling has no ties for finite differences.
            tg_tensor *x = transpose ? tg_randn(TG_SHAPE(2, 2, 6, 5), tg_opts{TG_FLOAT64, TG_CPU, false})
                                     : tg_randn(TG_SHAPE(1, 3, 5, 7), tg_opts{TG_FLOAT64, TG_CPU, false});
            tg_requires_grad_(x, true);
            tg_gradcheck_opts o = {};
            o.user = &c;
            EXPECT_EQ(tg_gradcheck(pool_gc, 1, &x, &o), TG_OK) << tg_last_error();
            EXPECT_EQ(tg_gradgradcheck(pool_gc, 1, &x, &o), TG_OK) << tg_last_error();
        }
    }
}

TEST_F(TgTest, PoolUnbatched) {
    tg_tensor *x = tg_arange(0, 16, 1, tg_opts{});
    tg_tensor *x3 = tg_reshape(x, TG_SHAPE(1, 4, 4));
    tg_tensor *idx = nullptr;
    tg_tensor *y = tg_max_pool2d(x3, tg_pool_opts{.kernel_size = 2}, &idx);
    ASSERT_TRUE(y) << tg_last_error();
    EXPECT_EQ(dims(y), (std::vector<int64_t>{1, 2, 2}));
    EXPECT_TRUE(tensor_near(y, {5, 7, 13, 15}, 0));
    EXPECT_TRUE(tensor_near(idx, {5, 7, 13, 15}, 0));
    EXPECT_TRUE(tensor_near(tg_avg_pool2d(x3, tg_pool_opts{.kernel_size = 2}), {2.5, 4.5, 10.5, 12.5}, 1e-6));
    EXPECT_TRUE(tensor_near(tg_adaptive_avg_pool2d(x3, 1, 1), {7.5}, 1e-6));
}

TEST_F(TgTest, PoolErrors) {
    tg_tensor *x = tg_zeros(TG_SHAPE(2, 3, 4, 4), tg_opts{});
    tg_tensor *idx = (tg_tensor *)0x1;
    tg_clear_error();
    EXPECT_EQ(tg_max_pool2d(nullptr, tg_pool_opts{.kernel_size = 2}, &idx), nullptr);
    EXPECT_EQ(idx, nullptr);
    EXPECT_ERROR_CONTAINS("tg_max_pool2d: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_avg_pool2d(nullptr, tg_pool_opts{.kernel_size = 2}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_avg_pool2d: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_adaptive_avg_pool2d(nullptr, 1, 1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_adaptive_avg_pool2d: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_max_pool2d(tg_zeros(TG_SHAPE(4, 4), tg_opts{}), tg_pool_opts{.kernel_size = 2}, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_max_pool2d: expected input [N, C, H, W] or [C, H, W], got [4, 4]");
    tg_clear_error();
    EXPECT_EQ(
        tg_avg_pool2d(tg_zeros(TG_SHAPE(1, 1, 4, 4), tg_opts{TG_INT64, TG_CPU, false}), tg_pool_opts{.kernel_size = 2}),
        nullptr);
    EXPECT_ERROR_CONTAINS("tg_avg_pool2d: expected a float32, float64, float16 or bfloat16 input, got int64");
    tg_clear_error();
    EXPECT_EQ(tg_max_pool2d(x, tg_pool_opts{}, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("expected kernel_size > 0, stride > 0 and padding >= 0, got kernel_size 0");
    tg_clear_error();
    EXPECT_EQ(tg_max_pool2d(x, tg_pool_opts{.kernel_size = 2, .stride = -1}, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("stride -1");
    tg_clear_error();
    EXPECT_EQ(tg_avg_pool2d(x, tg_pool_opts{.kernel_size = 2, .stride = 1, .padding = 2}), nullptr);
    EXPECT_ERROR_CONTAINS("padding 2 should be at most half of kernel_size 2");
    tg_clear_error();
    EXPECT_EQ(tg_max_pool2d(x, tg_pool_opts{.kernel_size = 5}, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS(
        "tg_max_pool2d: output would be empty: input [2, 3, 4, 4] with kernel_size 5, stride 5, padding 0 gives 0x0");
    tg_pool_opts dilated = {.kernel_size = 2, .stride = 1, .dilation = 4};
    tg_clear_error();
    EXPECT_EQ(tg_max_pool2d(x, dilated, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_max_pool2d: output would be empty: input [2, 3, 4, 4] with kernel_size 2, stride 1, "
                          "padding 0, dilation 4 gives 0x0");
    dilated.dilation = -1;
    tg_clear_error();
    EXPECT_EQ(tg_max_pool2d(x, dilated, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_max_pool2d: dilation should be greater than zero, got -1");
    dilated.dilation = 2;
    tg_clear_error();
    EXPECT_EQ(tg_avg_pool2d(x, dilated), nullptr);
    EXPECT_ERROR_CONTAINS("tg_avg_pool2d: dilation is a max_pool2d option (avg_pool2d has none), got 2");
    // Taps -1 and 2 of the first row window miss a 2-row input: PyTorch returns -inf with an
    // index outside the plane (and its backward writes out of bounds); refused here.
    dilated = {.kernel_size = 2, .stride = 1, .padding = 1, .dilation = 3};
    tg_clear_error();
    EXPECT_EQ(tg_max_pool2d(tg_zeros(TG_SHAPE(1, 1, 2, 4), tg_opts{}), dilated, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_max_pool2d: input [1, 1, 2, 4] with kernel_size 2, stride 1, padding 1, dilation 3: the "
                          "window of output row 0 has no tap inside the input");
    tg_clear_error();
    EXPECT_EQ(tg_max_pool2d(tg_zeros(TG_SHAPE(1, 5, 2), tg_opts{}), dilated, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("the window of output column 0 has no tap inside the input");
    tg_clear_error();
    EXPECT_EQ(tg_adaptive_avg_pool2d(x, 0, 2), nullptr);
    EXPECT_ERROR_CONTAINS("expected an output size > 0, got 0x2");
}

} // namespace

namespace {

template <typename T> std::vector<T> raw(tg_tensor *t) {
    std::vector<T> out((size_t)tg_numel(t));
    EXPECT_EQ(tg_copy_to_host(tg_contiguous(t), out.data(), out.size() * sizeof(T)), TG_OK) << tg_last_error();
    return out;
}

} // namespace

// 2x2 stride-2 max pooling runs in AVX-512 registers for float32 and bfloat16
// (ops/cpu/max_pool2x2.c); float64 keeps the scalar loop of ops/pool.c, which the vector
// kernel must equal: values, indices (ties to the first element, -0 against +0), the
// input gradient bit for bit (-0 and NaN gradients, subnormals with flushing off and on),
// planes of 2 to 35 outputs a row (one register's 16, several, a tail), odd sizes (a row
// and a column outside every window) and a plane with a NaN (the scalar loop's).
TEST_F(TgTest, MaxPool2x2VectorKernelEqualsTheScalarLoop) {
    bool was = tg_get_flush_denormal();
    for (bool flush : {false, true})
        for (tg_shape shape :
             {TG_SHAPE(2, 3, 24, 24), TG_SHAPE(1, 2, 25, 71), TG_SHAPE(3, 1, 4, 5), TG_SHAPE(64, 20, 8, 8)}) {
            SCOPED_TRACE(testing::Message() << "flush " << flush << ", shape [" << shape.dims[0] << ", "
                                            << shape.dims[1] << ", " << shape.dims[2] << ", " << shape.dims[3] << "]");
            tg_set_flush_denormal(flush);
            /* small integers: many ties; a few -0, Inf; bfloat16-exact so all three dtypes hold the same values */
            tg_tensor *x64 = tg_sub_scalar(tg_floor(tg_mul_scalar(tg_rand(shape, tg_opts{.dtype = TG_FLOAT64}), 4)), 2);
            x64 = tg_mul(x64, tg_where(tg_lt_scalar(tg_rand(shape, tg_opts{.dtype = TG_FLOAT64}), 0.1),
                                       tg_full(TG_SCALAR_SHAPE, -0.0, tg_opts{.dtype = TG_FLOAT64}),
                                       tg_ones(TG_SCALAR_SHAPE, tg_opts{.dtype = TG_FLOAT64})));
            ASSERT_EQ(tg_fill_(tg_narrow(tg_narrow(tg_narrow(x64, 0, 0, 1), 1, 0, 1), 3, 1, 1), INFINITY), TG_OK);
            if (shape.dims[0] > 1) {
                ASSERT_EQ(
                    tg_fill_(tg_narrow(tg_narrow(tg_narrow(tg_narrow(x64, 0, 1, 1), 1, 0, 1), 2, 2, 1), 3, 3, 1), NAN),
                    TG_OK);
            }
            tg_pool_opts o{.kernel_size = 2};
            tg_tensor *i64 = nullptr, *y64 = tg_max_pool2d(x64, o, &i64);
            ASSERT_NE(y64, nullptr) << tg_last_error();
            for (tg_dtype dt : {TG_FLOAT32, TG_BFLOAT16}) {
                SCOPED_TRACE(tg_dtype_name(dt));
                tg_tensor *x = tg_requires_grad_(tg_cast(x64, dt), true), *i = nullptr;
                tg_tensor *y = tg_max_pool2d(x, o, &i);
                ASSERT_NE(y, nullptr) << tg_last_error();
                EXPECT_EQ(raw<int64_t>(i), raw<int64_t>(i64));
                EXPECT_EQ(raw<uint32_t>(tg_cast(y, TG_FLOAT32)),
                          raw<uint32_t>(tg_cast(y64, TG_FLOAT32))); /* bits: NaN, -0 */
                /* gradients: -0, NaN and subnormals (+-2^-130) among them, made unflushed */
                tg_set_flush_denormal(false);
                tg_tensor *g32 = tg_randn(tg_shape_of(y), tg_opts{});
                tg_tensor *flat = tg_reshape(g32, TG_SHAPE(-1));
                ASSERT_EQ(tg_fill_(tg_narrow(flat, 0, 0, 1), -0.0), TG_OK);
                ASSERT_EQ(tg_fill_(tg_narrow(flat, 0, 1, 1), NAN), TG_OK);
                ASSERT_EQ(tg_fill_(tg_narrow(flat, 0, 2, 1), ldexp(1.0, -130)), TG_OK);
                ASSERT_EQ(tg_fill_(tg_narrow(flat, 0, 3, 1), -ldexp(1.0, -130)), TG_OK);
                tg_tensor *g = tg_cast(g32, dt);
                tg_set_flush_denormal(flush);
                ASSERT_EQ(tg_backward_with(y, g), TG_OK) << tg_last_error();
                if (dt != TG_BFLOAT16) continue; /* float32's backward is the scalar scatter itself */
                /* the general path's: float32 scatter-add onto zeros of the widened g, rounded once */
                tg_tensor *xs = tg_requires_grad_(tg_cast(x64, TG_FLOAT32), true);
                ASSERT_EQ(tg_backward_with(tg_max_pool2d(xs, o, nullptr), tg_cast(g, TG_FLOAT32)), TG_OK);
                EXPECT_EQ(raw<uint16_t>(tg_grad(x)), raw<uint16_t>(tg_cast(tg_grad(xs), TG_BFLOAT16)));
            }
        }
    tg_set_flush_denormal(was);
}
