// sort, argsort, topk, kthvalue, median: PyTorch 1.13's values, int64 indices (with
// ties, where the stable order decides, and NaN) and gradients
// (tests/fixtures/gen_sort.py), integer dtypes, gradcheck and gradgradcheck, errors.
#include <cmath>
#include <string>
#include <vector>

#include "op_fixture.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/sort.txt");
    return f;
}

void check(const std::string &name, const FixtureOp &op) {
    check_fixture_in(fx(), name, TG_FLOAT64, op);
    check_fixture_in(fx(), name, TG_FLOAT32, op);
}

TEST_F(TgTest, SortMatchesPyTorchWithTiesAndNan) {
    check("sort", [](auto &in, tg_tensor **i) { return tg_sort(in[0], 1, false, i); });
    check("sort_desc_last", [](auto &in, tg_tensor **i) { return tg_sort(in[0], -1, true, i); });
    check("sort_ties", [](auto &in, tg_tensor **i) { return tg_sort(in[0], 1, false, i); });
    check("sort_ties_desc", [](auto &in, tg_tensor **i) { return tg_sort(in[0], 1, true, i); });
    check("sort_ties_dim0", [](auto &in, tg_tensor **i) { return tg_sort(in[0], 0, true, i); });
    check("sort_nan", [](auto &in, tg_tensor **i) { return tg_sort(in[0], 1, false, i); });
    check("sort_nan_desc", [](auto &in, tg_tensor **i) { return tg_sort(in[0], 1, true, i); });
}

TEST_F(TgTest, TopkKthvalueMedianMatchPyTorch) {
    check("topk", [](auto &in, tg_tensor **i) { return tg_topk(in[0], 3, 1, true, true, i); });
    check("topk_smallest", [](auto &in, tg_tensor **i) { return tg_topk(in[0], 2, 0, false, true, i); });
    check("kthvalue", [](auto &in, tg_tensor **i) { return tg_kthvalue(in[0], 2, 1, false, i); });
    check("kthvalue_keepdim", [](auto &in, tg_tensor **i) { return tg_kthvalue(in[0], 4, -1, true, i); });
    check("median_odd", [](auto &in, tg_tensor **i) { return tg_median_dim(in[0], 1, false, i); });
    check("median_even_keepdim", [](auto &in, tg_tensor **i) { return tg_median_dim(in[0], 2, true, i); });
    check("median_ties", [](auto &in, tg_tensor **i) { return tg_median_dim(in[0], 1, false, i); });
    check("median_nan", [](auto &in, tg_tensor **i) { return tg_median_dim(in[0], 1, false, i); });
    tg_tensor *x = fixture_tensor(fx(), "sort_in0").make(TG_FLOAT64, true);
    tg_tensor *m = tg_median(x);
    EXPECT_TRUE(tensor_near(m, fixture_tensor(fx(), "median_all").data, 0));
    ASSERT_EQ(tg_backward(m), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), fixture_tensor(fx(), "median_all_grad").data, 0));
    EXPECT_TRUE(tensor_near(tg_median(fixture_tensor(fx(), "sort_nan_in0").make(TG_FLOAT32)),
                            fixture_tensor(fx(), "median_all_nan").data, 0));
    EXPECT_TRUE(std::isnan(values(tg_median(tg_zeros(TG_SHAPE(0), tg_opts{})))[0]));
}

// Among equal values topk and kthvalue take them in index order (PyTorch leaves this
// to its selection algorithm; the values agree either way).
TEST_F(TgTest, TopkAndKthvalueTakeTiesInIndexOrder) {
    tg_tensor *ties = tensor_f64({2, 1, 2, 1, 3, 1}, TG_SHAPE(1, 6));
    tg_tensor *idx = nullptr;
    EXPECT_TRUE(tensor_near(tg_topk(ties, 4, 1, true, true, &idx), {3, 2, 2, 1}, 0));
    EXPECT_TRUE(tensor_near(idx, {4, 0, 2, 1}, 0));
    EXPECT_TRUE(tensor_near(tg_topk(ties, 3, 1, false, true, &idx), {1, 1, 1}, 0));
    EXPECT_TRUE(tensor_near(idx, {1, 3, 5}, 0));
    EXPECT_TRUE(tensor_near(tg_kthvalue(ties, 3, 1, false, &idx), {1}, 0));
    EXPECT_TRUE(tensor_near(idx, {5}, 0));
}

TEST_F(TgTest, SortIntegersScalarsAndEmpty) {
    tg_tensor *xi = tg_cast(fixture_tensor(fx(), "xi").make(TG_INT64), TG_INT32);
    tg_tensor *idx = nullptr;
    tg_tensor *v = tg_sort(xi, 1, false, &idx);
    ASSERT_NE(v, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(v), TG_INT32);
    EXPECT_EQ(tg_dtype_of(idx), TG_INT64);
    EXPECT_TRUE(tensor_near(idx, fixture_tensor(fx(), "sort_i_stable").data, 0));
    EXPECT_TRUE(tensor_near(tg_argsort(xi, 1, true), fixture_tensor(fx(), "argsort_i_desc").data, 0));
    tg_tensor *b = tg_cast(tensor_i64({1, 0, 1, 0}, TG_SHAPE(4)), TG_BOOL);
    EXPECT_TRUE(tensor_near(tg_argsort(b, 0, false), {1, 3, 0, 2}, 0));
    tg_tensor *s = tensor_f64({2.5}, TG_SCALAR_SHAPE);
    tg_tensor *si = nullptr;
    tg_tensor *sv = tg_topk(s, 1, -1, true, true, &si);
    EXPECT_EQ(dims(sv), std::vector<int64_t>{});
    EXPECT_TRUE(tensor_near(sv, {2.5}, 0));
    EXPECT_TRUE(tensor_near(si, {0}, 0));
    EXPECT_EQ(dims(tg_topk(tg_zeros(TG_SHAPE(3, 4), tg_opts{}), 0, 1, true, true, nullptr)),
              (std::vector<int64_t>{3, 0}));
    EXPECT_EQ(dims(tg_sort(tg_zeros(TG_SHAPE(0, 4), tg_opts{}), 1, false, nullptr)), (std::vector<int64_t>{0, 4}));
}

// Large inputs split their lines over the thread pool: the same order with 1 and 3
// threads, and sorted.
TEST_F(TgTest, SortSplitsLinesOverThreads) {
    int threads = tg_get_num_threads();
    tg_tensor *x = tg_round(tg_mul_scalar(rand64(TG_SHAPE(40, 3000), 11, false), 50)); // ties too
    tg_set_num_threads(1);
    tg_tensor *one = tg_argsort(x, 1, true);
    tg_set_num_threads(3);
    tg_tensor *three = tg_argsort(x, 1, true);
    tg_set_num_threads(threads);
    ASSERT_NE(one, nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(three, values(one), 0));
    std::vector<double> v = values(tg_gather(x, 1, one)), idx = values(one);
    for (size_t i = 0; i + 1 < v.size(); i++) {
        if ((i + 1) % 3000 == 0) continue; // the next line starts
        ASSERT_TRUE(v[i] > v[i + 1] || (v[i] == v[i + 1] && idx[i] < idx[i + 1])) << "position " << i;
    }
}

tg_tensor *sort_fn(tg_tensor *const *in, void *) { return tg_square(tg_sort(in[0], 1, true, nullptr)); }
tg_tensor *topk_fn(tg_tensor *const *in, void *) { return tg_exp(tg_topk(in[0], 2, -1, false, true, nullptr)); }
tg_tensor *kth_fn(tg_tensor *const *in, void *) { return tg_square(tg_kthvalue(in[0], 3, 0, true, nullptr)); }
tg_tensor *median_fn(tg_tensor *const *in, void *) { return tg_square(tg_median_dim(in[0], 1, false, nullptr)); }

TEST_F(TgTest, SortFamilyGradcheck) {
    tg_tensor *x = rand64(TG_SHAPE(4, 5, 3), 7);
    for (tg_gradcheck_fn fn : {sort_fn, topk_fn, kth_fn, median_fn}) {
        EXPECT_GRADCHECK(fn, x);
        EXPECT_GRADGRADCHECK(fn, x);
    }
}

TEST_F(TgTest, SortFamilyErrors) {
    tg_tensor *x = tg_zeros(TG_SHAPE(2, 3), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_sort(x, 2, false, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_sort: dim 2 out of range for a tensor with 2 dims");
    tg_clear_error();
    tg_tensor *idx = x;
    EXPECT_EQ(tg_topk(x, 4, 1, true, true, &idx), nullptr);
    EXPECT_EQ(idx, nullptr);
    EXPECT_ERROR_CONTAINS("tg_topk: k 4 out of range for dim 1 of size 3 (0 <= k <= size)");
    tg_clear_error();
    EXPECT_EQ(tg_kthvalue(x, 0, 0, false, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_kthvalue: k 0 out of range for dim 0 of size 2 (1 <= k <= size)");
    tg_clear_error();
    EXPECT_EQ(tg_median_dim(tg_zeros(TG_SHAPE(2, 0), tg_opts{}), 1, false, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_median_dim: cannot take the median over dim 1 of size 0");
    tg_clear_error();
    EXPECT_EQ(tg_median(tg_zeros(TG_SHAPE(0), tg_opts{TG_INT64})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_median: an empty int64 tensor has no median");
    tg_clear_error();
    EXPECT_EQ(tg_argsort(nullptr, 0, false), nullptr);
    EXPECT_ERROR_CONTAINS("tg_argsort: input 0 is NULL");
}

} // namespace
