// select, slice with a step, diagonal, chunk, split, unbind: PyTorch 1.13's values and
// gradients (tests/fixtures/gen_slice.py), gradcheck and gradgradcheck, views of the
// input's storage, and the errors.
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/slice.txt");
    return f;
}

using Parts = std::vector<tg_tensor *>;
using PartsFn = Parts (*)(tg_tensor *);

// Runs fn on the fixture's x, compares every output and the gradient of
// sum_i(out_i * w_i) with PyTorch's.
void check_case(const std::string &name, PartsFn fn) {
    SCOPED_TRACE(name);
    tg_tensor *x = fixture_tensor(fx(), "x").make(TG_FLOAT64, true);
    Parts outs = fn(x);
    ASSERT_FALSE(outs.empty()) << tg_last_error();
    tg_tensor *total = nullptr;
    for (size_t i = 0; i < outs.size(); i++) {
        const FixtureTensor &want = fixture_tensor(fx(), name + "_out" + std::to_string(i));
        ASSERT_NE(outs[i], nullptr) << tg_last_error();
        EXPECT_TRUE(tg_shape_equal(tg_shape_of(outs[i]), want.tg())) << "output " << i;
        EXPECT_TRUE(tensor_near(outs[i], want.data, 0)) << "output " << i;
        EXPECT_TRUE(tg_same_storage(outs[i], x)) << "output " << i << " is a view";
        const FixtureTensor &wt = fixture_tensor(fx(), name + "_w" + std::to_string(i));
        tg_tensor *term = tg_numel(outs[i]) == 0 ? tg_sum(outs[i]) : tg_sum(tg_mul(outs[i], wt.make(TG_FLOAT64)));
        total = total ? tg_add(total, term) : term;
    }
    ASSERT_EQ(tg_backward(total), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), fixture_tensor(fx(), name + "_grad").data, 1e-12));
}

Parts one(tg_tensor *t) { return t ? Parts{t} : Parts{}; }
Parts parts_of(int n, tg_tensor **p) { return n < 0 ? Parts{} : Parts(p, p + n); }

TEST_F(TgTest, SelectSliceAndDiagonalMatchPyTorch) {
    check_case("select", [](tg_tensor *x) { return one(tg_select(x, 1, -2)); });
    check_case("slice_step", [](tg_tensor *x) { return one(tg_slice(x, 1, 1, 7, 2)); });
    check_case("slice_neg", [](tg_tensor *x) { return one(tg_slice(x, -1, -4, -1, 2)); });
    check_case("slice_empty", [](tg_tensor *x) { return one(tg_slice(x, 1, 3, 1, 1)); });
    check_case("diagonal", [](tg_tensor *x) { return one(tg_diagonal(x, 1, 0, 2)); });
    check_case("diagonal_below", [](tg_tensor *x) { return one(tg_diagonal(x, -1, 2, 1)); });
}

TEST_F(TgTest, ChunkSplitAndUnbindMatchPyTorch) {
    check_case("chunk", [](tg_tensor *x) {
        tg_tensor *p[8];
        return parts_of(tg_chunk(x, 3, 2, p, 8), p);
    });
    check_case("split", [](tg_tensor *x) {
        tg_tensor *p[8];
        return parts_of(tg_split(x, 3, 1, p, 8), p);
    });
    check_case("split_sizes", [](tg_tensor *x) {
        tg_tensor *p[8];
        int64_t sizes[3] = {1, 3, 1};
        return parts_of(tg_split_sizes(x, sizes, 3, 2, p, 8), p);
    });
    check_case("unbind", [](tg_tensor *x) {
        tg_tensor *p[8];
        return parts_of(tg_unbind(x, 0, p, 8), p);
    });
}

TEST_F(TgTest, ChunkCountsAsPyTorch) {
    tg_tensor *p[8];
    EXPECT_EQ(tg_chunk(tg_zeros(TG_SHAPE(5), tg_opts{}), 4, 0, p, 8), 3); // pieces of 2, 2, 1
    EXPECT_EQ(tg_numel(p[2]), 1);
    EXPECT_EQ(tg_chunk(tg_zeros(TG_SHAPE(2, 0), tg_opts{}), 3, 1, p, 8), 3); // three empty pieces
    EXPECT_EQ(tg_numel(p[0]), 0);
}

TEST_F(TgTest, SlicesAreDifferentiableTwice) {
    tg_gradcheck_opts o = {};
    tg_tensor *x = fixture_tensor(fx(), "x").make(TG_FLOAT64, true);
    tg_gradcheck_fn fns[] = {
        [](tg_tensor *const *in, void *) { return tg_mul(tg_select(in[0], 2, 1), tg_select(in[0], 2, 3)); },
        [](tg_tensor *const *in, void *) { return tg_square(tg_slice(in[0], 1, 0, TG_SLICE_END, 3)); },
        [](tg_tensor *const *in, void *) { return tg_exp(tg_diagonal(in[0], 0, 1, 2)); },
        // a split of up to four pieces is one node (its gradient a cat): a piece without a
        // gradient, a transposed input; five pieces or more are narrows
        [](tg_tensor *const *in, void *) {
            tg_tensor *p[4];
            if (tg_split(tg_transpose(in[0], 1, 2), 2, 1, p, 4) != 3) return (tg_tensor *)nullptr;
            return tg_mul(p[0], tg_square(p[2]));
        },
        [](tg_tensor *const *in, void *) { // a 1-D input's empty piece keeps its link (op_diff seed 1)
            tg_tensor *p[2];
            int64_t sizes[2] = {0, 60};
            if (tg_split_sizes(tg_flatten(in[0], 0, -1), sizes, 2, 0, p, 2) != 2) return (tg_tensor *)nullptr;
            return p[0];
        },
        [](tg_tensor *const *in, void *) {
            tg_tensor *p[8];
            if (tg_chunk(in[0], 5, 2, p, 8) != 5) return (tg_tensor *)nullptr;
            return tg_mul(p[1], tg_exp(p[4]));
        },
    };
    for (tg_gradcheck_fn fn : fns) {
        EXPECT_EQ(tg_gradcheck(fn, 1, &x, &o), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(fn, 1, &x, &o), TG_OK) << tg_last_error();
    }
}

TEST_F(TgTest, SlicesWriteThroughToTheirBase) {
    tg_tensor *x = tensor_f32({0, 1, 2, 3, 4, 5}, TG_SHAPE(6));
    ASSERT_EQ(tg_fill_(tg_slice(x, 0, 0, TG_SLICE_END, 2), -1), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(x, {-1, 1, -1, 3, -1, 5}, 0));
    tg_tensor *m = tensor_f32({1, 2, 3, 4}, TG_SHAPE(2, 2));
    ASSERT_EQ(tg_fill_(tg_diagonal(m, 0, 0, 1), 0), TG_OK);
    EXPECT_TRUE(tensor_near(m, {0, 2, 3, 0}, 0));
}

TEST_F(TgTest, SliceErrorsNameTheOpAndTheValues) {
    tg_tensor *x = tg_zeros(TG_SHAPE(2, 3), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_select(x, 1, 3), nullptr);
    EXPECT_ERROR_CONTAINS("tg_select: index 3 out of range for tensor of size [2, 3] at dimension 1");
    tg_clear_error();
    EXPECT_EQ(tg_select(tg_zeros(TG_SCALAR_SHAPE, tg_opts{}), 0, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_select: cannot be applied to a 0-dim tensor");
    tg_clear_error();
    EXPECT_EQ(tg_slice(x, 0, 0, 2, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_slice: slice step must be positive, got 0");
    tg_clear_error();
    EXPECT_EQ(tg_slice(x, 2, 0, 1, 1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_slice: dim 2 out of range for a tensor with 2 dims");
    tg_clear_error();
    EXPECT_EQ(tg_diagonal(x, 0, 1, -1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_diagonal: diagonal dimensions cannot be identical 1, -1");
    tg_tensor *p[2];
    tg_clear_error();
    EXPECT_EQ(tg_chunk(x, 0, 0, p, 2), -1);
    EXPECT_ERROR_CONTAINS("tg_chunk: chunks must be greater than 0, got 0");
    tg_clear_error();
    EXPECT_EQ(tg_split(x, 0, 1, p, 2), -1);
    EXPECT_ERROR_CONTAINS("tg_split: split_size can only be 0 if dimension size is 0, but got dimension size of 3");
    tg_clear_error();
    EXPECT_EQ(tg_split(x, 1, 1, p, 2), -1);
    EXPECT_ERROR_CONTAINS("tg_split: makes 3 parts, but parts has room for 2");
    int64_t sizes[2] = {1, 1};
    tg_clear_error();
    EXPECT_EQ(tg_split_sizes(x, sizes, 2, 1, p, 2), -1);
    EXPECT_ERROR_CONTAINS("tg_split_sizes: split_sizes must be non-negative and sum exactly to 3 (the input's size at "
                          "dimension 1), but got split_sizes=[1, 1]");
    tg_clear_error();
    EXPECT_EQ(tg_unbind(x, 1, p, 2), -1);
    EXPECT_ERROR_CONTAINS("tg_unbind: makes 3 parts, but parts has room for 2");
}

} // namespace

// Views of empty tensors at any offset are valid, as PyTorch's: the backward of narrow,
// select, diagonal and pad over an empty input makes them (found by the op fuzzer,
// issue 35). PyTorch 1.13: zeros(2, 0, 3).narrow(2, 1, 2).sum().backward() gives a
// [2, 0, 3] gradient.
TEST_F(TgTest, BackwardThroughViewsOfEmptyTensors) {
    tg_tensor *x = tg_requires_grad_(tg_zeros(TG_SHAPE(2, 0, 3), tg_opts{TG_FLOAT64}), true);
    int64_t pad[2] = {1, -1};
    tg_tensor *outs[] = {tg_narrow(x, 2, 1, 2), tg_select(x, 2, 2), tg_diagonal(x, 1, 0, 2),
                         tg_pad(x, pad, 2, TG_PAD_CONSTANT, 0)};
    for (tg_tensor *y : outs) {
        ASSERT_NE(y, nullptr) << tg_last_error();
        EXPECT_EQ(tg_numel(y), 0);
        ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK) << tg_last_error();
        EXPECT_EQ(dims(tg_grad(x)), (std::vector<int64_t>{2, 0, 3}));
    }
    int64_t one[1] = {1};
    EXPECT_NE(tg_as_strided(tg_zeros(TG_SHAPE(0), tg_opts{}), TG_SHAPE(0), one, 5), nullptr) << tg_last_error();
}
