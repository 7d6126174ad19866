// movedim, unflatten, repeat, tile, roll, repeat_interleave: PyTorch 1.13's values and gradients
// (tests/fixtures/gen_rearrange.py), gradcheck and gradgradcheck, and the errors.
#include <string>

#include "tests/test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/rearrange.txt");
    return f;
}

void check_case(const std::string &name, tg_tensor *(*fn)(tg_tensor *)) {
    SCOPED_TRACE(name);
    tg_tensor *x = fixture_tensor(fx(), "x").make(TG_FLOAT64, true);
    tg_tensor *out = fn(x);
    ASSERT_NE(out, nullptr) << tg_last_error();
    const FixtureTensor &want = fixture_tensor(fx(), name + "_out");
    EXPECT_TRUE(tg_shape_equal(tg_shape_of(out), want.tg()));
    EXPECT_TRUE(tensor_near(out, want.data, 0));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(out, fixture_tensor(fx(), name + "_w").make(TG_FLOAT64)))), TG_OK)
        << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), fixture_tensor(fx(), name + "_grad").data, 1e-12));
}

TEST_F(TgTest, RearrangingOpsMatchPyTorch) {
    check_case("movedim", [](tg_tensor *x) { return tg_movedim(x, 0, 2); });
    check_case("movedim_back", [](tg_tensor *x) { return tg_movedim(x, -1, 0); });
    check_case("unflatten", [](tg_tensor *x) {
        int64_t sizes[2] = {2, -1};
        return tg_unflatten(x, 2, sizes, 2);
    });
    check_case("repeat", [](tg_tensor *x) {
        int64_t r[4] = {2, 1, 1, 2};
        return tg_repeat(x, r, 4);
    });
    check_case("repeat_wide", [](tg_tensor *x) { // 6 dims: the dim-by-dim path
        int64_t r[6] = {1, 2, 1, 1, 1, 3};
        return tg_repeat(x, r, 6);
    });
    check_case("tile", [](tg_tensor *x) {
        int64_t r[1] = {2};
        return tg_tile(x, r, 1);
    });
    check_case("roll", [](tg_tensor *x) { return tg_roll(x, 5, 2); });
    check_case("roll_neg", [](tg_tensor *x) { return tg_roll(x, -1, 1); });
}

TEST_F(TgTest, RepeatInterleaveMatchesPyTorch) {
    check_case("repeat_interleave", [](tg_tensor *x) { return tg_repeat_interleave(x, 2, 1); });
    check_case("repeat_interleave_last", [](tg_tensor *x) { return tg_repeat_interleave(x, 3, -1); });
    check_case("repeat_interleave_tensor", [](tg_tensor *x) {
        return tg_repeat_interleave_tensor(x, tensor_i64({2, 0, 1}, TG_SHAPE(3)), 1);
    });
    check_case("repeat_interleave_one", [](tg_tensor *x) { // one repeat for every element, int32
        return tg_repeat_interleave_tensor(x, tg_cast(tensor_i64({3}, TG_SHAPE(1)), TG_INT32), 0);
    });
    check_case("repeat_interleave_flat", [](tg_tensor *x) { // PyTorch's dim=None: flatten first
        return tg_repeat_interleave_tensor(tg_flatten(x, 0, -1),
                                           tg_remainder_scalar(tg_arange(0, 24, 1, tg_opts{TG_INT64}), 3), 0);
    });
    EXPECT_EQ(tg_size(tg_repeat_interleave(fixture_tensor(fx(), "x").make(TG_FLOAT64), 0, 2), 2), 0);
}

TEST_F(TgTest, RepeatAlwaysCopies) {
    tg_tensor *x = tensor_f32({1, 2}, TG_SHAPE(2));
    int64_t one[1] = {1};
    tg_tensor *r = tg_repeat(x, one, 1);
    ASSERT_NE(r, nullptr);
    EXPECT_FALSE(tg_same_storage(r, x));
    tg_tensor *m = tg_movedim(tg_zeros(TG_SHAPE(2, 3), tg_opts{}), 0, 1);
    EXPECT_EQ(tg_size(m, 0), 3); // movedim is a view: [3, 2]
}

TEST_F(TgTest, RearrangingOpsAreDifferentiableTwice) {
    tg_gradcheck_opts o = {};
    tg_tensor *x = fixture_tensor(fx(), "x").make(TG_FLOAT64, true);
    tg_gradcheck_fn fns[] = {
        [](tg_tensor *const *in, void *) {
            int64_t r[3] = {1, 2, 1};
            return tg_square(tg_repeat(in[0], r, 3));
        },
        [](tg_tensor *const *in, void *) { return tg_mul(tg_roll(in[0], 1, 0), in[0]); },
        [](tg_tensor *const *in, void *) { return tg_exp(tg_movedim(in[0], 1, 0)); },
        [](tg_tensor *const *in, void *) { return tg_square(tg_repeat_interleave(in[0], 2, 2)); },
        [](tg_tensor *const *in, void *) {
            return tg_square(tg_repeat_interleave_tensor(in[0], tensor_i64({1, 3, 0}, TG_SHAPE(3)), 1));
        },
    };
    for (tg_gradcheck_fn fn : fns) {
        EXPECT_EQ(tg_gradcheck(fn, 1, &x, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(fn, 1, &x, &o), TG_OK) << tg_last_error();
    }
}

TEST_F(TgTest, RearrangingErrorsNameTheOp) {
    tg_tensor *x = tg_zeros(TG_SHAPE(2, 6), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_movedim(x, 2, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_movedim: source 2 / destination 0 out of range for a tensor with 2 dims");
    tg_clear_error();
    int64_t bad[2] = {4, -1};
    EXPECT_EQ(tg_unflatten(x, 1, bad, 2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_unflatten: sizes [4, -1] do not multiply to 6, the size of dim 1");
    tg_clear_error();
    int64_t one[1] = {2};
    EXPECT_EQ(tg_repeat(x, one, 1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_repeat: 1 repeats for a tensor with 2 dims");
    tg_clear_error();
    int64_t neg[2] = {1, -1};
    EXPECT_EQ(tg_repeat(x, neg, 2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_repeat: negative repeat -1");
    tg_clear_error();
    EXPECT_EQ(tg_roll(x, 1, 3), nullptr);
    EXPECT_ERROR_CONTAINS("tg_roll: dim 3 out of range for a tensor with 2 dims");
    tg_clear_error();
    EXPECT_EQ(tg_repeat_interleave(x, -1, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_repeat_interleave: repeats can not be negative, got -1");
    tg_clear_error();
    EXPECT_EQ(tg_repeat_interleave(tensor_f64({1}, TG_SCALAR_SHAPE), 2, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_repeat_interleave: dim 0 out of range for a tensor with 0 dims");
    tg_clear_error();
    EXPECT_EQ(tg_repeat_interleave_tensor(x, tensor_i64({1, 2}, TG_SHAPE(2)), 1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_repeat_interleave_tensor: repeats must have the same size as input along dim: 2 "
                          "repeats for size 6");
    tg_clear_error();
    EXPECT_EQ(tg_repeat_interleave_tensor(x, tensor_i64({1, -2}, TG_SHAPE(2)), 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_repeat_interleave_tensor: repeats can not be negative, got -2");
    tg_clear_error();
    EXPECT_EQ(tg_repeat_interleave_tensor(x, tg_zeros(TG_SHAPE(2), tg_opts{}), 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_repeat_interleave_tensor: repeats must be a 0-dim or 1-D int64 or int32 tensor, got "
                          "float32 with 1 dims");
}

} // namespace
