// tg_conv2d: PyTorch fixtures (forward and gradients), gradcheck / gradgradcheck,
// and every bad-input path.
#include "nn_fixture_util.h"

namespace {

tg_tensor *conv_fn(std::vector<tg_tensor *> &in, tg_conv_opts o) {
    return tg_conv2d(in[0], in[1], in.size() > 2 ? in[2] : nullptr, o);
}

class Conv2dTest : public TgTest, public ::testing::WithParamInterface<tg_dtype> {};

TEST_P(Conv2dTest, MatchesPyTorch) {
    tg_dtype dt = GetParam();
    check_nn_case("conv_basic", {"x", "w", "b"}, dt, [](auto &in) { return conv_fn(in, {}); });
    check_nn_case("conv_strided", {"x", "w", "b"}, dt, [](auto &in) {
        return conv_fn(in, tg_conv_opts{.stride = 2, .padding = 1, .dilation = 2, .groups = 2});
    });
    check_nn_case("conv_nobias", {"x", "w"}, dt,
                  [](auto &in) { return conv_fn(in, tg_conv_opts{.stride = 3, .padding = 2}); });
    // Per-dim values, padding="same" with an uneven total, Conv2d's padding_mode.
    check_nn_case("conv_per_dim", {"x", "w", "b"}, dt, [](auto &in) {
        return conv_fn(in, tg_conv_opts{.strides = {1, 2}, .paddings = {2, 0}, .dilations = {1, 2}});
    });
    check_nn_case("conv_same_even", {"x", "w", "b"}, dt,
                  [](auto &in) { return conv_fn(in, tg_conv_opts{.dilations = TG_PAIR(1, 2), .padding_same = true}); });
    check_nn_case("conv_reflect", {"x", "w", "b"}, dt, [](auto &in) {
        return conv_fn(in, tg_conv_opts{.strides = {2, 1}, .paddings = {1, 2}, .padding_mode = TG_PAD_REFLECT});
    });
    check_nn_case("conv_same_circular", {"x", "w", "b"}, dt, [](auto &in) {
        return conv_fn(in, tg_conv_opts{.padding_same = true, .padding_mode = TG_PAD_CIRCULAR});
    });
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Conv2dTest, ::testing::Values(TG_FLOAT32, TG_FLOAT64));

struct ConvCase {
    tg_conv_opts opts;
    bool transpose_input; // feeds a non-contiguous input
};

tg_tensor *conv_gc(tg_tensor *const *in, void *user) {
    const ConvCase *c = static_cast<const ConvCase *>(user);
    tg_tensor *x = c->transpose_input ? tg_transpose(in[0], 2, 3) : in[0];
    return tg_conv2d(x, in[1], in[2], c->opts);
}

tg_tensor *rand64(tg_shape s, bool grad = true) {
    tg_tensor *t = tg_randn(s, tg_opts{TG_FLOAT64, TG_CPU, false});
    if (grad) tg_requires_grad_(t, true);
    return t;
}

TEST_F(TgTest, Conv2dGradcheck) {
    tg_manual_seed(1);
    ConvCase plain = {tg_conv_opts{.stride = 1, .padding = 1}, false};
    tg_tensor *in1[] = {rand64(TG_SHAPE(2, 2, 4, 4)), rand64(TG_SHAPE(3, 2, 3, 3)), rand64(TG_SHAPE(3))};
    tg_gradcheck_opts o = {};
    o.user = &plain;
    EXPECT_EQ(tg_gradcheck(conv_gc, 3, in1, &o), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_gradgradcheck(conv_gc, 3, in1, &o), TG_OK) << tg_last_error();

    // Non-contiguous input (a transposed view), stride, dilation and groups.
    ConvCase strided = {tg_conv_opts{.stride = 2, .padding = 1, .dilation = 2, .groups = 2}, true};
    tg_tensor *in2[] = {rand64(TG_SHAPE(2, 4, 6, 5)), rand64(TG_SHAPE(4, 2, 2, 2)), rand64(TG_SHAPE(4))};
    o.user = &strided;
    EXPECT_EQ(tg_gradcheck(conv_gc, 3, in2, &o), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_gradgradcheck(conv_gc, 3, in2, &o), TG_OK) << tg_last_error();

    // Per-dim values, the uneven "same" and a reflect padding_mode.
    ConvCase per_dim = {tg_conv_opts{.strides = {2, 1}, .paddings = {0, 1}, .dilations = {1, 2}}, false};
    ConvCase same = {tg_conv_opts{.dilations = {2, 1}, .padding_same = true, .padding_mode = TG_PAD_REFLECT}, true};
    for (ConvCase *c : {&per_dim, &same}) {
        tg_tensor *in3[] = {rand64(TG_SHAPE(2, 2, 5, 6)), rand64(TG_SHAPE(3, 2, 3, 2)), rand64(TG_SHAPE(3))};
        o.user = c;
        EXPECT_EQ(tg_gradcheck(conv_gc, 3, in3, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(conv_gc, 3, in3, &o), TG_OK) << tg_last_error();
    }
}

TEST_F(TgTest, Conv2dUnbatchedAndLargeBatchChunks) {
    tg_manual_seed(2);
    // Unbatched [C, H, W] input as PyTorch allows.
    tg_tensor *x = tg_randn(TG_SHAPE(2, 5, 5), tg_opts{});
    tg_tensor *w = tg_randn(TG_SHAPE(3, 2, 3, 3), tg_opts{});
    tg_tensor *y = tg_conv2d(x, w, nullptr, tg_conv_opts{});
    ASSERT_TRUE(y) << tg_last_error();
    EXPECT_EQ(dims(y), (std::vector<int64_t>{3, 3, 3}));
    // A batch big enough to be split into several im2col chunks gives the same
    // result per image as convolving the images one by one.
    tg_tensor *xb = tg_randn(TG_SHAPE(40, 20, 12, 12), tg_opts{});
    tg_tensor *wb = tg_randn(TG_SHAPE(50, 20, 5, 5), tg_opts{});
    tg_tensor *yb = tg_conv2d(xb, wb, nullptr, tg_conv_opts{});
    ASSERT_TRUE(yb) << tg_last_error();
    tg_tensor *last = tg_conv2d(tg_narrow(xb, 0, 39, 1), wb, nullptr, tg_conv_opts{});
    EXPECT_TRUE(tensor_near(tg_narrow(yb, 0, 39, 1), values(last), 1e-4, 1e-5));
}

TEST_F(TgTest, Conv2dErrors) {
    tg_tensor *x = tg_zeros(TG_SHAPE(64, 10, 12, 12), tg_opts{});
    tg_tensor *w = tg_zeros(TG_SHAPE(50, 20, 5, 5), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(nullptr, w, nullptr, {}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_conv2d: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(x, nullptr, nullptr, {}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_conv2d: input 1 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(x, w, nullptr, {}), nullptr);
    EXPECT_ERROR_CONTAINS(
        "expected input [N, C, H, W] with C == 20 (weight [50, 20, 5, 5], groups 1), got [64, 10, 12, 12]");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(tg_zeros(TG_SHAPE(12, 12), tg_opts{}), w, nullptr, {}), nullptr);
    EXPECT_ERROR_CONTAINS("expected input [N, C, H, W] (4-D, or 3-D unbatched), got [12, 12]");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(x, tg_zeros(TG_SHAPE(50, 10, 5), tg_opts{}), nullptr, {}), nullptr);
    EXPECT_ERROR_CONTAINS("expected weight [C_out, C_in / groups, kH, kW] (4-D), got [50, 10, 5]");
    tg_tensor *w10 = tg_zeros(TG_SHAPE(50, 10, 5, 5), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(x, w10, tg_zeros(TG_SHAPE(49), tg_opts{}), {}), nullptr);
    EXPECT_ERROR_CONTAINS("expected bias [50] (weight [50, 10, 5, 5]), got [49]");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(x, tg_zeros(TG_SHAPE(50, 10, 5, 5), tg_opts{TG_FLOAT64, TG_CPU, false}), nullptr, {}), nullptr);
    EXPECT_ERROR_CONTAINS("one floating dtype, got input float32, weight float64");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(tg_zeros(TG_SHAPE(1, 10, 5, 5), tg_opts{TG_INT64, TG_CPU, false}),
                        tg_zeros(TG_SHAPE(5, 10, 5, 5), tg_opts{TG_INT64, TG_CPU, false}), nullptr, {}),
              nullptr);
    EXPECT_ERROR_CONTAINS("got input int64, weight int64");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(x, w10, nullptr, tg_conv_opts{.groups = 3}), nullptr);
    EXPECT_ERROR_CONTAINS("50 output channels, not divisible by groups 3");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(x, w10, nullptr, tg_conv_opts{.stride = -1}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_conv2d: stride (-1, -1) and dilation (1, 1) must be positive");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(x, w10, nullptr, tg_conv_opts{.strides = {0, 2}}), nullptr);
    EXPECT_ERROR_CONTAINS("stride (0, 2) and dilation (1, 1) must be positive");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(x, w10, nullptr, tg_conv_opts{.stride = 2, .padding_same = true}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_conv2d: padding='same' is not supported for strided convolutions (stride (2, 2))");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(x, w10, nullptr, tg_conv_opts{.padding = 1, .padding_same = true}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_conv2d: padding_same with padding (1, 1): give one or the other");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(x, w10, nullptr, tg_conv_opts{.padding_mode = (tg_pad_mode)7}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_conv2d: padding_mode 7 is not one of zeros, reflect, replicate, circular");
    tg_clear_error();
    EXPECT_EQ(tg_conv2d(tg_zeros(TG_SHAPE(1, 10, 4, 4), tg_opts{}), w10, nullptr, {}), nullptr);
    EXPECT_ERROR_CONTAINS("output would be empty: input [1, 10, 4, 4] with kernel 5x5, stride (1, 1), padding (0, 0), "
                          "dilation (1, 1) gives 0x0");
    tg_clear_error();
    EXPECT_EQ(
        tg_conv2d(tg_zeros(TG_SHAPE(1, 10, 4, 4), tg_opts{}), w10, nullptr, tg_conv_opts{.padding = 1, .dilation = 2}),
        nullptr);
    EXPECT_ERROR_CONTAINS("output would be empty");
}

} // namespace
