// masked_fill, tril/triu, flip, take, outer, lerp, addmm, baddbmm: PyTorch 1.13's
// values and gradients (tests/fixtures/gen_composite.py), gradcheck and
// gradgradcheck, and the errors.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/composite.txt");
    return f;
}
tg_tensor *leaf(const std::string &name) { return fixture_tensor(fx(), name).make(TG_FLOAT64, true); }
tg_tensor *mask() { return tg_cast(fixture_tensor(fx(), "mask").make(TG_INT64), TG_BOOL); }
tg_tensor *idx() { return fixture_tensor(fx(), "idx").make(TG_INT64); }

using Fn = std::function<tg_tensor *(const std::vector<tg_tensor *> &)>;

void check_case(const std::string &name, const std::vector<std::string> &inputs, const Fn &fn) {
    SCOPED_TRACE(name);
    std::vector<tg_tensor *> in;
    for (const std::string &n : inputs) in.push_back(leaf(n));
    tg_tensor *out = fn(in);
    ASSERT_NE(out, nullptr) << tg_last_error();
    const FixtureTensor &want = fixture_tensor(fx(), name + "_out");
    EXPECT_TRUE(tg_shape_equal(tg_shape_of(out), want.tg()));
    EXPECT_TRUE(tensor_near(out, want.data, 1e-14, 1e-14));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(out, fixture_tensor(fx(), name + "_w").make(TG_FLOAT64)))), TG_OK)
        << tg_last_error();
    for (size_t i = 0; i < in.size(); i++)
        EXPECT_TRUE(
            tensor_near(tg_grad(in[i]), fixture_tensor(fx(), name + "_grad" + std::to_string(i)).data, 1e-12, 1e-12))
            << "gradient of input " << i;
}

TEST_F(TgTest, CompositeOpsMatchPyTorch) {
    check_case("masked_fill", {"x"}, [](auto &in) { return tg_masked_fill(in[0], mask(), -2.5); });
    check_case("tril", {"x"}, [](auto &in) { return tg_tril(in[0], -1); });
    check_case("triu", {"x"}, [](auto &in) { return tg_triu(in[0], 1); });
    check_case("flip", {"x"}, [](auto &in) {
        int dims[2] = {0, 2};
        return tg_flip(in[0], dims, 2);
    });
    check_case("take", {"x"}, [](auto &in) { return tg_take(in[0], idx()); });
    check_case("outer", {"u", "v"}, [](auto &in) { return tg_outer(in[0], in[1]); });
    check_case("lerp", {"a", "b"}, [](auto &in) { return tg_lerp(in[0], in[1], 0.3); });
    check_case("lerp_tensor", {"a", "b", "weight"}, [](auto &in) { return tg_lerp_tensor(in[0], in[1], in[2]); });
    check_case("addmm", {"c", "m", "n"}, [](auto &in) { return tg_addmm(in[0], in[1], in[2], 0.5, 2.0); });
    check_case("baddbmm", {"bc", "ba", "bb"}, [](auto &in) { return tg_baddbmm(in[0], in[1], in[2], -1.0, 0.25); });
}

TEST_F(TgTest, AmaxClampAndHardtanhMatchPyTorchIncludingTies) {
    check_case("amax", {"x"}, [](auto &in) {
        int d[2] = {0, 2};
        return tg_amax(in[0], d, 2, false);
    });
    check_case("amin_keep", {"x"}, [](auto &in) {
        int d[1] = {-1};
        return tg_amin(in[0], d, 1, true);
    });
    check_case("amax_tie", {"tie"}, [](auto &in) { // ties share the gradient
        int d[1] = {1};
        return tg_amax(in[0], d, 1, false);
    });
    check_case("amax_all", {"tie"}, [](auto &in) { return tg_amax(in[0], nullptr, 0, false); });
    check_case("clamp_tensor", {"x", "lo", "hi"}, [](auto &in) { return tg_clamp_tensor(in[0], in[1], in[2]); });
    check_case("clamp_tie", {"tie"}, [](auto &in) { // at a tie x keeps the gradient
        return tg_clamp_tensor(in[0], tensor_f64({3, 0, 2}, TG_SHAPE(3)), nullptr);
    });
    check_case("hardtanh", {"x"}, [](auto &in) { return tg_hardtanh(in[0], -0.5, 0.7); });
    check_case("hardtanh_bounds", {"tie"}, [](auto &in) { return tg_hardtanh(in[0], -1.0, 2.0); });
    tg_tensor *nan_lo = tensor_f64({NAN}, TG_SHAPE(1));
    EXPECT_TRUE(std::isnan(values(tg_clamp_tensor(tensor_f64({1, 2}, TG_SHAPE(2)), nan_lo, nullptr))[1]));
}

TEST_F(TgTest, AddmmWithBetaZeroIgnoresC) {
    tg_tensor *c = tensor_f64({NAN, NAN}, TG_SHAPE(2));
    tg_tensor *a = tensor_f64({1, 2}, TG_SHAPE(1, 2));
    tg_tensor *b = tensor_f64({3, 4, 5, 6}, TG_SHAPE(2, 2));
    EXPECT_TRUE(tensor_near(tg_addmm(c, a, b, 0, 1), {13, 16}, 0));
}

TEST_F(TgTest, CompositeOpsAreDifferentiableTwice) {
    tg_gradcheck_opts o = {};
    tg_tensor *x = leaf("x");
    tg_gradcheck_fn fns[] = {
        [](tg_tensor *const *in, void *) { return tg_square(tg_masked_fill(in[0], mask(), 1.5)); },
        [](tg_tensor *const *in, void *) { return tg_mul(tg_tril(in[0], 0), in[0]); },
        [](tg_tensor *const *in, void *) {
            int d[1] = {1};
            return tg_mul(tg_flip(in[0], d, 1), in[0]);
        },
        [](tg_tensor *const *in, void *) { return tg_exp(tg_take(in[0], idx())); },
        [](tg_tensor *const *in, void *) {
            int d[1] = {1};
            return tg_square(tg_amax(in[0], d, 1, true));
        },
        [](tg_tensor *const *in, void *) { return tg_square(tg_hardtanh(in[0], -0.5, 0.7)); },
    };
    for (tg_gradcheck_fn fn : fns) {
        EXPECT_EQ(tg_gradcheck(fn, 1, &x, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(fn, 1, &x, &o), TG_OK) << tg_last_error();
    }
    tg_tensor *mm[3] = {leaf("c"), leaf("m"), leaf("n")};
    auto addmm = [](tg_tensor *const *in, void *) { return tg_square(tg_addmm(in[0], in[1], in[2], 0.5, 2.0)); };
    EXPECT_EQ(tg_gradcheck(addmm, 3, mm, &o), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_gradgradcheck(addmm, 3, mm, &o), TG_OK) << tg_last_error();
}

// torch.triu / torch.tril keep bool, uint8 and int32 (they returned int64 before):
// torch.ones(2, 3, dtype=d).triu(1) is [[0, 1, 1], [0, 0, 1]] of dtype d, tril(-1)
// [[0, 0, 0], [1, 0, 0]]; int32 values 1..6 tril(0) [[1, 0, 0], [4, 5, 0]].
TEST_F(TgTest, TriangleKeepsTheDtype) {
    for (tg_dtype dt : {TG_BOOL, TG_UINT8, TG_INT32, TG_INT64, TG_FLOAT32, TG_FLOAT64}) {
        SCOPED_TRACE(tg_dtype_name(dt));
        tg_tensor *x = tg_ones(TG_SHAPE(2, 3), tg_opts{dt});
        tg_tensor *u = tg_triu(x, 1), *l = tg_tril(x, -1);
        ASSERT_NE(u, nullptr) << tg_last_error();
        ASSERT_NE(l, nullptr) << tg_last_error();
        EXPECT_EQ(tg_dtype_of(u), dt);
        EXPECT_EQ(tg_dtype_of(l), dt);
        EXPECT_EQ(values(u), std::vector<double>({0, 1, 1, 0, 0, 1}));
        EXPECT_EQ(values(l), std::vector<double>({0, 0, 0, 1, 0, 0}));
    }
    tg_tensor *i = tg_cast(tg_view(tg_arange(1, 7, 1, tg_opts{TG_INT64}), TG_SHAPE(2, 3)), TG_INT32);
    tg_tensor *l = tg_tril(i, 0);
    EXPECT_EQ(tg_dtype_of(l), TG_INT32);
    EXPECT_EQ(values(l), std::vector<double>({1, 0, 0, 4, 5, 0}));
}

TEST_F(TgTest, CompositeErrorsNameTheOpAndShapes) {
    tg_tensor *x = tg_zeros(TG_SHAPE(2, 3), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_masked_fill(x, tg_cast(tg_zeros(TG_SHAPE(4), tg_opts{}), TG_BOOL), 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_masked_fill: mask of shape [4] cannot be broadcast to the input's shape [2, 3]");
    tg_clear_error();
    EXPECT_EQ(tg_masked_fill(x, tg_zeros(TG_SHAPE(3), tg_opts{}), 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_masked_fill: mask must be bool, got float32");
    tg_clear_error();
    EXPECT_EQ(tg_tril(tg_zeros(TG_SHAPE(3), tg_opts{}), 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_tril: input must have at least 2 dims, got 1");
    tg_clear_error();
    int dims[2] = {1, -1};
    EXPECT_EQ(tg_flip(x, dims, 2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_flip: dim -1 is out of range or repeated");
    tg_clear_error();
    EXPECT_EQ(tg_take(x, tensor_i64({6}, TG_SHAPE(1))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_take: index 6 is out of range for input [2, 3] of 6 elements");
    // The index as given, not as wrapped (issue 35: -13 of 12 said "index -1").
    tg_clear_error();
    EXPECT_EQ(tg_take(tg_zeros(TG_SHAPE(3, 4), tg_opts{}), tensor_i64({0, -12, -13}, TG_SHAPE(3))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_take: index -13 is out of range for input [3, 4] of 12 elements");
    EXPECT_TRUE(tensor_near(tg_take(tensor_f32({1, 2, 3}, TG_SHAPE(3)), tensor_i64({-3, 2}, TG_SHAPE(2))), {1, 3}, 0));
    // Composite ops name themselves and their inputs' shapes, not the inner op (sub, lt).
    tg_tensor *a3 = tg_zeros(TG_SHAPE(3), tg_opts{}), *b34 = tg_zeros(TG_SHAPE(3, 4), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_lerp(a3, b34, 0.5), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_lerp: shapes cannot be broadcast together: start [3], end [3, 4]");
    tg_clear_error();
    EXPECT_EQ(tg_lerp_tensor(b34, b34, a3), nullptr);
    EXPECT_STREQ(tg_last_error(),
                 "tg_lerp_tensor: shapes cannot be broadcast together: start [3, 4], end [3, 4], weight [3]");
    tg_clear_error();
    EXPECT_EQ(tg_clamp_tensor(b34, a3, nullptr), nullptr);
    EXPECT_STREQ(tg_last_error(), "tg_clamp_tensor: shapes cannot be broadcast together: input [3, 4], min [3]");
    tg_clear_error();
    EXPECT_EQ(tg_clamp_tensor(b34, tg_zeros(TG_SHAPE(4), tg_opts{}), a3), nullptr);
    EXPECT_STREQ(tg_last_error(),
                 "tg_clamp_tensor: shapes cannot be broadcast together: input [3, 4], min [4], max [3]");
    tg_clear_error();
    EXPECT_EQ(tg_outer(x, x), nullptr);
    EXPECT_ERROR_CONTAINS("tg_outer: expected 1-D inputs, got 2 and 2 dims");
    tg_clear_error();
    EXPECT_EQ(tg_addmm(tg_zeros(TG_SHAPE(2), tg_opts{}), x, x, 1, 1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_addmm: cannot multiply [2, 3] by [2, 3] (expected [n, k] and [k, m])");
    tg_clear_error();
    EXPECT_EQ(tg_addmm(tg_zeros(TG_SHAPE(3), tg_opts{}), x, tg_zeros(TG_SHAPE(3, 2), tg_opts{}), 1, 1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_addmm: c of shape [3] cannot be broadcast to the product's shape [2, 2]");
    tg_clear_error();
    int twice[2] = {1, -1};
    EXPECT_EQ(tg_amax(x, twice, 2, false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_amax: dim 1 appears twice in the dims list");
    tg_clear_error();
    int d0[1] = {0};
    EXPECT_EQ(tg_amin(tg_zeros(TG_SHAPE(0, 2), tg_opts{}), d0, 1, false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_amin: cannot reduce over an empty dim of a tensor of shape [0, 2]");
    tg_clear_error();
    EXPECT_EQ(tg_clamp_tensor(x, nullptr, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_clamp_tensor: at least one of min and max must be given");
    tg_clear_error();
    EXPECT_EQ(tg_hardtanh(x, 1, -1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_hardtanh: min_val 1 must not exceed max_val -1");
}

} // namespace
