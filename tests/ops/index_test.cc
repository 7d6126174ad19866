// nonzero, masked_select, x[mask] (tg_index_mask), index_put: PyTorch 1.13's values
// and gradients (tests/fixtures/gen_index.py), gradcheck and gradgradcheck, errors.
#include <functional>
#include <string>
#include <vector>

#include "op_fixture.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/index.txt");
    return f;
}
tg_tensor *leaf(const std::string &name) { return fixture_tensor(fx(), name).make(TG_FLOAT64, true); }
tg_tensor *i64(const std::string &name) { return fixture_tensor(fx(), name).make(TG_INT64); }
tg_tensor *mask(const std::string &name) { return tg_cast(i64(name), TG_BOOL); }

using Fn = std::function<tg_tensor *(const std::vector<tg_tensor *> &)>;

void check_case(const std::string &name, const std::vector<std::string> &inputs, const Fn &fn) {
    SCOPED_TRACE(name);
    std::vector<tg_tensor *> in;
    for (const std::string &n : inputs) in.push_back(leaf(n));
    tg_tensor *out = fn(in);
    ASSERT_NE(out, nullptr) << tg_last_error();
    const FixtureTensor &want = fixture_tensor(fx(), name + "_out");
    EXPECT_EQ(dims(out), want.shape);
    EXPECT_TRUE(tensor_near(out, want.data, 1e-14));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(out, fixture_tensor(fx(), name + "_w").make(TG_FLOAT64)))), TG_OK)
        << tg_last_error();
    for (size_t i = 0; i < in.size(); i++)
        EXPECT_TRUE(tensor_near(tg_grad(in[i]), fixture_tensor(fx(), name + "_grad" + std::to_string(i)).data, 1e-12))
            << "gradient of input " << i;
}

TEST_F(TgTest, NonzeroAndMaskedSelectMatchPyTorch) {
    tg_tensor *nz = tg_nonzero(mask("mask"));
    EXPECT_EQ(dims(nz), fixture_tensor(fx(), "nonzero").shape);
    EXPECT_TRUE(tensor_near(nz, fixture_tensor(fx(), "nonzero").data, 0));
    EXPECT_TRUE(tensor_near(tg_nonzero(tensor_f64({0, 1.5, -2, 0}, TG_SHAPE(2, 2))),
                            fixture_tensor(fx(), "nonzero_x").data, 0));
    check_case("masked_select", {"x"}, [](auto &in) { return tg_masked_select(in[0], mask("mask_full")); });
    check_case("masked_select_broadcast", {"x"},
               [](auto &in) { return tg_masked_select(tg_select(in[0], 2, 0), mask("mask_row")); });
    check_case("index_mask", {"x"}, [](auto &in) { return tg_index_mask(in[0], mask("mask")); });
    check_case("index_mask_full", {"x"}, [](auto &in) { return tg_index_mask(in[0], mask("mask_full")); });
}

TEST_F(TgTest, IndexPutMatchesPyTorch) {
    check_case("index_put", {"x", "v1"}, [](auto &in) {
        tg_tensor *idx[2] = {i64("i0"), i64("i1")};
        return tg_index_put(in[0], idx, 2, in[1], false);
    });
    check_case("index_put_acc", {"x", "v1"}, [](auto &in) {
        tg_tensor *idx[2] = {i64("i0"), i64("i1")};
        return tg_index_put(in[0], idx, 2, in[1], true);
    });
    check_case("index_put_acc_repeat", {"x", "v_rep"}, [](auto &in) {
        tg_tensor *idx[1] = {i64("rep")};
        return tg_index_put(in[0], idx, 1, in[1], true);
    });
    check_case("index_put_mask", {"x", "v_row"}, [](auto &in) { // x[mask] = v (masked assignment)
        tg_tensor *idx[1] = {mask("mask")};
        return tg_index_put(in[0], idx, 1, in[1], false);
    });
    check_case("index_put_mask_acc", {"x", "v_row"}, [](auto &in) {
        tg_tensor *idx[1] = {mask("mask")};
        return tg_index_put(in[0], idx, 1, in[1], true);
    });
}

TEST_F(TgTest, IndexPutWithoutAccumulateKeepsTheLastWrite) {
    tg_tensor *x = tensor_f64({NAN, 2, 3}, TG_SHAPE(3));
    tg_tensor *v = tensor_f64({10, 20, 30}, TG_SHAPE(3), true);
    tg_tensor *idx[1] = {tensor_i64({0, 2, 0}, TG_SHAPE(3))};
    tg_tensor *out = tg_index_put(x, idx, 1, v, false);
    EXPECT_TRUE(tensor_near(out, {30, 2, 20}, 0)); // the NaN it overwrote is gone
    ASSERT_EQ(tg_backward(tg_sum(out)), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(v), {0, 1, 1}, 0));
    EXPECT_TRUE(tensor_near(x, {NAN, 2, 3}, 0)); // x itself untouched
}

tg_tensor *put_fn(tg_tensor *const *in, void *) {
    tg_tensor *idx[2] = {tensor_i64({0, 2, -1}, TG_SHAPE(3)), tensor_i64({1, 3, 0}, TG_SHAPE(3))};
    return tg_square(tg_index_put(in[0], idx, 2, in[1], false));
}
tg_tensor *acc_fn(tg_tensor *const *in, void *) {
    tg_tensor *idx[1] = {tensor_i64({1, 1, 0}, TG_SHAPE(3))};
    return tg_mul(tg_index_put(in[0], idx, 1, tg_unsqueeze(in[1], 1), true), in[0]);
}
tg_tensor *select_fn(tg_tensor *const *in, void *) {
    tg_tensor *m = tg_gt_scalar(tg_detach(in[0]), 0);
    return tg_add(tg_square(tg_masked_select(in[0], m)),
                  tg_sum(tg_index_mask(in[1], tg_select(tg_gt_scalar(tg_detach(in[1]), 0), 1, 0))));
}

TEST_F(TgTest, IndexingGradcheck) {
    tg_gradcheck_opts o = {};
    tg_tensor *in[2] = {fixture_tensor(fx(), "x").make(TG_FLOAT64, true),
                        tensor_f64({1, -2, 3, 4, -5, 6}, TG_SHAPE(3, 2), true)};
    tg_tensor *x3 = rand64(TG_SHAPE(3, 4, 2), 3), *v3 = rand64(TG_SHAPE(3, 2), 4);
    tg_tensor *gc[2] = {x3, v3};
    for (tg_gradcheck_fn fn : {put_fn, acc_fn}) {
        EXPECT_EQ(tg_gradcheck(fn, 2, gc, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(fn, 2, gc, &o), TG_OK) << tg_last_error();
    }
    EXPECT_EQ(tg_gradcheck(select_fn, 2, in, &o), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_gradgradcheck(select_fn, 2, in, &o), TG_OK) << tg_last_error();
}

TEST_F(TgTest, IndexingErrors) {
    tg_tensor *x = tg_zeros(TG_SHAPE(3, 4), tg_opts{});
    tg_tensor *m2 = tg_cast(tg_zeros(TG_SHAPE(2), tg_opts{}), TG_BOOL);
    tg_clear_error();
    EXPECT_EQ(tg_masked_select(x, m2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_masked_select: input [3, 4] and mask [2] cannot be broadcast together");
    tg_clear_error();
    EXPECT_EQ(tg_masked_select(x, tg_zeros(TG_SHAPE(4), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_masked_select: mask must be bool, got float32");
    tg_clear_error();
    EXPECT_EQ(tg_index_mask(x, m2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_mask: the mask's shape [2] must equal the leading dims of the input's [3, 4]");
    tg_clear_error();
    tg_tensor *bad[1] = {tensor_i64({0, 3}, TG_SHAPE(2))};
    EXPECT_EQ(tg_index_put(x, bad, 1, tg_zeros(TG_SCALAR_SHAPE, tg_opts{}), false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_put: index 3 is out of bounds for dim 0 with size 3");
    tg_clear_error();
    tg_tensor *three[3] = {tensor_i64({0}, TG_SHAPE(1)), tensor_i64({0}, TG_SHAPE(1)), tensor_i64({0}, TG_SHAPE(1))};
    EXPECT_EQ(tg_index_put(x, three, 3, tg_zeros(TG_SCALAR_SHAPE, tg_opts{}), false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_put: too many indices for a tensor with 2 dims");
    tg_clear_error();
    tg_tensor *two[1] = {tensor_i64({0, 1}, TG_SHAPE(2))};
    EXPECT_EQ(tg_index_put(x, two, 1, tg_zeros(TG_SHAPE(3), tg_opts{}), false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_put: values of shape [3] cannot be broadcast to the indexed shape [2, 4]");
    tg_clear_error();
    EXPECT_EQ(tg_index_put(x, two, 1, tg_zeros(TG_SCALAR_SHAPE, tg_opts{TG_FLOAT64}), false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_put: values of dtype float64 for an input of dtype float32 (they must match)");
    tg_clear_error();
    tg_tensor *fidx[1] = {tg_zeros(TG_SHAPE(2), tg_opts{})};
    EXPECT_EQ(tg_index_put(x, fidx, 1, tg_zeros(TG_SCALAR_SHAPE, tg_opts{}), false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_put: index 0 must be int64 or bool, got float32");
    tg_clear_error();
    tg_tensor *bm[1] = {tg_cast(tg_zeros(TG_SHAPE(3, 3), tg_opts{}), TG_BOOL)};
    EXPECT_EQ(tg_index_put(x, bm, 1, tg_zeros(TG_SCALAR_SHAPE, tg_opts{}), false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_put: the bool index of shape [3, 3] does not match dims 0.. of the input's [3, 4]");
}

} // namespace
