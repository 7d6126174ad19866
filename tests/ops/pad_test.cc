// pad: PyTorch 1.13's values and gradients for every mode (tests/fixtures/gen_pad.py),
// negative pads, gradcheck and gradgradcheck, and the errors.
#include <string>

#include "tests/test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/pad.txt");
    return f;
}

void check_case(const std::string &name, const std::string &input, std::vector<int64_t> pad, tg_pad_mode mode,
                double value = 0) {
    SCOPED_TRACE(name);
    tg_tensor *x = fixture_tensor(fx(), input).make(TG_FLOAT64, true);
    tg_tensor *out = tg_pad(x, pad.data(), (int)pad.size(), mode, value);
    ASSERT_NE(out, nullptr) << tg_last_error();
    const FixtureTensor &want = fixture_tensor(fx(), name + "_out");
    EXPECT_EQ(dims(out), want.shape);
    EXPECT_TRUE(tensor_near(out, want.data, 0));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(out, fixture_tensor(fx(), name + "_w").make(TG_FLOAT64)))), TG_OK)
        << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), fixture_tensor(fx(), name + "_grad").data, 1e-12));
}

TEST_F(TgTest, PadMatchesPyTorch) {
    check_case("constant", "x3", {1, 2}, TG_PAD_CONSTANT);
    check_case("constant_value", "x3", {0, 1, 2, 0, 1, 1}, TG_PAD_CONSTANT, -1.5);
    check_case("constant_crop", "x3", {-1, 2, 1, -2}, TG_PAD_CONSTANT);
    check_case("reflect_1d", "x3", {3, 2}, TG_PAD_REFLECT);
    check_case("reflect_2d", "x4", {2, 1, 1, 2}, TG_PAD_REFLECT);
    check_case("reflect_2d_unbatched", "x3", {1, 3, 2, 0}, TG_PAD_REFLECT);
    check_case("reflect_crop", "x3", {-1, 2}, TG_PAD_REFLECT);
    check_case("replicate_1d", "x3", {2, 5}, TG_PAD_REPLICATE);
    check_case("replicate_2d", "x4", {1, 2, 3, 0}, TG_PAD_REPLICATE);
    check_case("replicate_3d", "x5", {1, 1, 0, 2, 2, 1}, TG_PAD_REPLICATE);
    check_case("circular_2d", "x4", {2, 1, 3, 1}, TG_PAD_CIRCULAR);
    check_case("circular_crop_left", "x3", {-1, 2}, TG_PAD_CIRCULAR);
    check_case("circular_crop_right", "x3", {2, -1}, TG_PAD_CIRCULAR);
    check_case("circular_crop_2d", "x4", {-2, 1, 1, -1}, TG_PAD_CIRCULAR);
}

// Circular with negative pads crops, then wraps what is left. x = arange(numel) of
// `shape`, w = arange(1, out numel + 1); out and grad of sum(out * w) as PyTorch 1.13's
// F.pad(x, pad, mode='circular') gives them (each case run there: the first two are the
// ones of issue 35; random-valued cases are in gen_pad.py's circular_crop_*).
TEST_F(TgTest, PadCircularCropsThenWraps) {
    struct {
        std::vector<int64_t> shape, pad, out_shape;
        std::vector<double> out, grad;
    } cases[] = {
        {{1, 1, 5}, {-1, 2}, {1, 1, 6}, {1, 2, 3, 4, 1, 2}, {0, 6, 8, 3, 4}},
        {{1, 1, 5}, {2, -1}, {1, 1, 6}, {2, 3, 0, 1, 2, 3}, {3, 4, 6, 8, 0}},
        {{1, 1, 5}, {3, -2}, {1, 1, 6}, {0, 1, 2, 0, 1, 2}, {5, 7, 9, 0, 0}},
        {{1, 1, 5}, {-2, -1}, {1, 1, 2}, {2, 3}, {0, 0, 1, 2, 0}},
        {{1, 1, 3, 4},
         {-1, 2, 1, -1},
         {1, 1, 3, 5},
         {5, 6, 7, 5, 6, 1, 2, 3, 1, 2, 5, 6, 7, 5, 6},
         {0, 15, 17, 8, 0, 30, 34, 16, 0, 0, 0, 0}},
        {{1, 2, 3, 4},
         {2, -1, -1, 1},
         {1, 2, 3, 5},
         {5, 6, 4, 5, 6, 9, 10, 8, 9, 10, 5, 6, 4, 5, 6, 17, 18, 16, 17, 18, 21, 22, 20, 21, 22, 17, 18, 16, 17, 18},
         {0, 0, 0, 0, 16, 30, 34, 0, 8, 15, 17, 0, 0, 0, 0, 0, 46, 90, 94, 0, 23, 45, 47, 0}},
        {{1, 1, 3, 4},
         {1, -2, -1, 2},
         {1, 1, 4, 3},
         {5, 4, 5, 9, 8, 9, 5, 4, 5, 9, 8, 9},
         {0, 0, 0, 0, 10, 20, 0, 0, 16, 32, 0, 0}},
    };
    for (auto &c : cases) {
        SCOPED_TRACE(::testing::PrintToString(c.pad));
        tg_shape shape{};
        shape.ndim = (int)c.shape.size();
        for (int i = 0; i < shape.ndim; i++) shape.dims[i] = c.shape[i];
        int64_t n = 1;
        for (int64_t d : c.shape) n *= d;
        tg_tensor *x = tg_requires_grad_(tg_view(tg_arange(0, (double)n, 1, tg_opts{TG_FLOAT64}), shape), true);
        ASSERT_NE(x, nullptr) << tg_last_error();
        tg_tensor *out = tg_pad(x, c.pad.data(), (int)c.pad.size(), TG_PAD_CIRCULAR, 0);
        ASSERT_NE(out, nullptr) << tg_last_error();
        EXPECT_EQ(dims(out), c.out_shape);
        EXPECT_EQ(values(out), c.out);
        tg_tensor *w = tg_reshape(tg_arange(1, (double)tg_numel(out) + 1, 1, tg_opts{TG_FLOAT64}), tg_shape_of(out));
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(out, w))), TG_OK) << tg_last_error();
        EXPECT_EQ(values(tg_grad(x)), c.grad);
    }
    // The unbatched form [C, W] and an integer dtype crop the same way.
    int64_t p[2] = {-1, 2};
    tg_tensor *y = tg_pad(tg_view(tg_arange(0, 5, 1, tg_opts{TG_INT64}), TG_SHAPE(1, 5)), p, 2, TG_PAD_CIRCULAR, 0);
    EXPECT_EQ(tg_dtype_of(y), TG_INT64);
    EXPECT_EQ(values(y), std::vector<double>({1, 2, 3, 4, 1, 2}));
}

TEST_F(TgTest, PadCopiesAndKeepsIntegerDtypes) {
    tg_tensor *x = tensor_i64({1, 2, 3}, TG_SHAPE(1, 3));
    int64_t none[2] = {0, 0}, two[2] = {2, 0};
    tg_tensor *same = tg_pad(x, none, 2, TG_PAD_CONSTANT, 0);
    ASSERT_NE(same, nullptr) << tg_last_error();
    EXPECT_FALSE(tg_same_storage(same, x));
    tg_tensor *r = tg_pad(x, two, 2, TG_PAD_REFLECT, 0);
    EXPECT_EQ(tg_dtype_of(r), TG_INT64);
    EXPECT_TRUE(tensor_near(r, {3, 2, 1, 2, 3}, 0));
    EXPECT_TRUE(tensor_near(tg_pad(x, two, 2, TG_PAD_CONSTANT, 7), {7, 7, 1, 2, 3}, 0));
}

TEST_F(TgTest, PadIsDifferentiableTwice) {
    tg_gradcheck_opts o = {};
    tg_tensor *x = fixture_tensor(fx(), "x4").make(TG_FLOAT64, true);
    tg_gradcheck_fn fns[] = {
        [](tg_tensor *const *in, void *) {
            int64_t p[4] = {1, -1, 2, 1};
            return tg_square(tg_pad(in[0], p, 4, TG_PAD_CONSTANT, 0.5));
        },
        [](tg_tensor *const *in, void *) {
            int64_t p[4] = {3, 1, 1, 2};
            return tg_square(tg_pad(in[0], p, 4, TG_PAD_REFLECT, 0));
        },
        [](tg_tensor *const *in, void *) {
            int64_t p[4] = {2, 2, 0, 1};
            return tg_square(tg_pad(in[0], p, 4, TG_PAD_REPLICATE, 0));
        },
        [](tg_tensor *const *in, void *) {
            int64_t p[4] = {4, 3, 1, 2};
            return tg_square(tg_pad(in[0], p, 4, TG_PAD_CIRCULAR, 0));
        },
        [](tg_tensor *const *in, void *) { // circular, cropping then wrapping
            int64_t p[4] = {-1, 2, 1, -1};
            return tg_square(tg_pad(in[0], p, 4, TG_PAD_CIRCULAR, 0));
        },
    };
    for (tg_gradcheck_fn fn : fns) {
        EXPECT_EQ(tg_gradcheck(fn, 1, &x, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(fn, 1, &x, &o), TG_OK) << tg_last_error();
    }
}

TEST_F(TgTest, PadErrors) {
    tg_tensor *x = tg_zeros(TG_SHAPE(1, 3, 4), tg_opts{});
    int64_t p3[3] = {1, 2, 3}, p8[8] = {1, 1, 0, 0, 0, 0, 1, 1}, big[2] = {4, 1}, crop[2] = {1, -6},
            p4[4] = {1, 1, 1, 1};
    int64_t wrap[2] = {5, 0}, crop_wrap[2] = {-3, 3};
    struct {
        const int64_t *pad;
        int count;
        int mode; // an int: an out-of-range value in a C++ enum object is undefined
        double value;
        tg_tensor *input;
        const char *msg;
    } cases[] = {
        {p3, 3, TG_PAD_CONSTANT, 0, x, "tg_pad: padding length must be divisible by 2, got 3"},
        {p8, 8, TG_PAD_CONSTANT, 0, x, "tg_pad: padding length 8 too large for input [1, 3, 4]"},
        {big, 2, TG_PAD_REFLECT, 0, x,
         "tg_pad: padding (4, 1) of dim 2 of input [1, 3, 4] must be less than the dim's size for reflect"},
        {wrap, 2, TG_PAD_CIRCULAR, 0, x, "tg_pad: padding (5, 0) of dim 2 of input [1, 3, 4] would wrap around"},
        {crop_wrap, 2, TG_PAD_CIRCULAR, 0, x,
         "tg_pad: padding (-3, 3) of dim 2 of input [1, 3, 4] would wrap around more than once (pads larger than "
         "what cropping leaves)"},
        {crop, 2, TG_PAD_CONSTANT, 0, x,
         "tg_pad: padding (1, -6) of dim 2 of input [1, 3, 4] would give a negative size"},
        {p4, 4, TG_PAD_REPLICATE, 0, tg_zeros(TG_SHAPE(3, 4), tg_opts{}),
         "tg_pad: replicate padding of the last 2 dims needs an input of 3 or 4 dims, got [3, 4]"},
        {p4, 4, TG_PAD_REFLECT, 1.0, x, "tg_pad: padding mode reflect does not take a value (got 1)"},
        {p4, 4, 9, 0, x, "tg_pad: unknown mode 9"},
    };
    for (auto &c : cases) {
        tg_clear_error();
        EXPECT_EQ(tg_pad(c.input, c.pad, c.count, static_cast<tg_pad_mode>(c.mode), c.value), nullptr);
        EXPECT_ERROR_CONTAINS(c.msg);
    }
}

} // namespace
