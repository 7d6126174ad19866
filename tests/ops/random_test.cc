// Random tensors, dropout and initialisers: determinism, moments of large samples,
// bounds, and bad inputs.
#include <omp.h>

#include "test_util.h"

namespace {

struct Moments {
    double mean, std, min, max;
};

Moments moments(tg_tensor *t) {
    std::vector<double> v = values(t);
    double s = 0, ss = 0, mn = INFINITY, mx = -INFINITY;
    for (double x : v) {
        s += x;
        mn = std::min(mn, x);
        mx = std::max(mx, x);
    }
    double m = s / v.size();
    for (double x : v) ss += (x - m) * (x - m);
    return {m, std::sqrt(ss / v.size()), mn, mx};
}

TEST_F(TgTest, SameSeedSameNumbersWhateverTheThreadCount) {
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_opts o = {dt, TG_CPU, false};
        tg_manual_seed(42);
        int saved = omp_get_max_threads();
        omp_set_num_threads(1);
        std::vector<double> a = values(tg_randn(TG_SHAPE(100001), o)), b = values(tg_rand(TG_SHAPE(70001), o));
        omp_set_num_threads(saved > 1 ? saved : 2);
        tg_manual_seed(42);
        EXPECT_EQ(values(tg_randn(TG_SHAPE(100001), o)), a);
        EXPECT_EQ(values(tg_rand(TG_SHAPE(70001), o)), b);
        omp_set_num_threads(saved);
        // The next draw continues the stream: different numbers.
        EXPECT_NE(values(tg_randn(TG_SHAPE(100001), o)), a);
    }
    tg_manual_seed(7);
    std::vector<double> r = values(tg_randint(0, 10, TG_SHAPE(1000), tg_opts{}));
    tg_manual_seed(7);
    EXPECT_EQ(values(tg_randint(0, 10, TG_SHAPE(1000), tg_opts{})), r);
}

TEST_F(TgTest, MomentsOfLargeSamples) {
    tg_manual_seed(0);
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_opts o = {dt, TG_CPU, false};
        Moments u = moments(tg_rand(TG_SHAPE(200000), o));
        EXPECT_NEAR(u.mean, 0.5, 0.005);
        EXPECT_NEAR(u.std, std::sqrt(1.0 / 12), 0.005);
        EXPECT_GE(u.min, 0.0);
        EXPECT_LT(u.max, 1.0);
        Moments n = moments(tg_randn(TG_SHAPE(200000), o));
        EXPECT_NEAR(n.mean, 0.0, 0.01);
        EXPECT_NEAR(n.std, 1.0, 0.01);
        tg_tensor *t = tg_empty(TG_SHAPE(100000), o);
        ASSERT_EQ(tg_normal_(t, 3, 2), TG_OK);
        Moments nn = moments(t);
        EXPECT_NEAR(nn.mean, 3.0, 0.03);
        EXPECT_NEAR(nn.std, 2.0, 0.03);
        ASSERT_EQ(tg_uniform_(t, -2, 4), TG_OK);
        Moments uu = moments(t);
        EXPECT_NEAR(uu.mean, 1.0, 0.03);
        EXPECT_GE(uu.min, -2.0);
        EXPECT_LT(uu.max, 4.0);
    }
    tg_tensor *ri = tg_randint(-3, 4, TG_SHAPE(50000), tg_opts{});
    EXPECT_EQ(tg_dtype_of(ri), TG_INT64);
    Moments r = moments(ri);
    EXPECT_EQ(r.min, -3);
    EXPECT_EQ(r.max, 3);
    EXPECT_NEAR(r.mean, 0.0, 0.05);
    tg_tensor *p = tg_full(TG_SHAPE(100000), 0.3, tg_opts{});
    EXPECT_NEAR(moments(tg_bernoulli(p)).mean, 0.3, 0.01);
    EXPECT_EQ(moments(tg_bernoulli(tg_zeros(TG_SHAPE(1000), tg_opts{}))).max, 0.0);
    EXPECT_EQ(moments(tg_bernoulli(tg_ones(TG_SHAPE(1000), tg_opts{}))).min, 1.0);
}

TEST_F(TgTest, InPlaceFillsNonContiguousViews) {
    tg_manual_seed(1);
    tg_tensor *t = tg_zeros(TG_SHAPE(4, 6), tg_opts{});
    uint64_t v = tg_version(t);
    tg_tensor *view = tg_transpose(t, 0, 1);
    ASSERT_EQ(tg_uniform_(view, 1, 2), TG_OK);
    EXPECT_GT(tg_version(t), v);
    Moments m = moments(t);
    EXPECT_GE(m.min, 1.0);
    EXPECT_LT(m.max, 2.0);
}

TEST_F(TgTest, Dropout) {
    tg_manual_seed(3);
    tg_tensor *x = tg_requires_grad(tg_ones(TG_SHAPE(100000), tg_opts{}), true);
    tg_tensor *y = tg_dropout(x, 0.25, true);
    ASSERT_TRUE(y) << tg_last_error();
    std::vector<double> v = values(y);
    size_t kept = 0;
    for (double e : v) {
        if (e != 0) {
            EXPECT_NEAR(e, 1 / 0.75, 1e-6);
            kept++;
        }
    }
    EXPECT_NEAR(kept / 100000.0, 0.75, 0.01);
    ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK);
    EXPECT_EQ(values(tg_grad(x)), v); // the gradient is the mask
    // Same seed, same mask.
    tg_manual_seed(3);
    EXPECT_EQ(values(tg_dropout(x, 0.25, true)), v);
    // Eval and p = 0: identity; p = 1: zeros.
    EXPECT_EQ(values(tg_dropout(x, 0.25, false)), values(x));
    EXPECT_EQ(values(tg_dropout(x, 0, true)), values(x));
    EXPECT_EQ(moments(tg_dropout(x, 1, true)).max, 0.0);
}

TEST_F(TgTest, InitialisersFollowTorchNnInit) {
    tg_manual_seed(9);
    int64_t fan_in = 0, fan_out = 0;
    ASSERT_EQ(tg_calculate_fans(TG_SHAPE(50, 20, 5, 5), &fan_in, &fan_out), TG_OK);
    EXPECT_EQ(fan_in, 500);
    EXPECT_EQ(fan_out, 1250);
    ASSERT_EQ(tg_calculate_fans(TG_SHAPE(10, 784), &fan_in, &fan_out), TG_OK);
    EXPECT_EQ(fan_in, 784);
    EXPECT_EQ(fan_out, 10);

    // Linear's default: kaiming_uniform_(a = sqrt(5)) gives bound 1 / sqrt(fan_in).
    tg_tensor *w = tg_empty(TG_SHAPE(256, 784), tg_opts{});
    ASSERT_EQ(tg_kaiming_uniform_(w, std::sqrt(5.0), TG_FAN_IN), TG_OK);
    Moments m = moments(w);
    double bound = 1 / std::sqrt(784.0);
    EXPECT_GE(m.min, -bound);
    EXPECT_LE(m.max, bound);
    EXPECT_GT(m.max, 0.99 * bound);
    EXPECT_NEAR(m.std, bound / std::sqrt(3.0), 0.01 * bound);
    // a = 0, fan_out: bound = sqrt(2) * sqrt(3 / fan_out).
    tg_tensor *c = tg_empty(TG_SHAPE(50, 20, 5, 5), tg_opts{TG_FLOAT64, TG_CPU, false});
    ASSERT_EQ(tg_kaiming_uniform_(c, 0, TG_FAN_OUT), TG_OK);
    m = moments(c);
    bound = std::sqrt(2.0) * std::sqrt(3.0 / 1250);
    EXPECT_LE(m.max, bound);
    EXPECT_GT(m.max, 0.99 * bound);
    ASSERT_EQ(tg_kaiming_normal_(c, 0.1, TG_FAN_IN), TG_OK);
    EXPECT_NEAR(moments(c).std, std::sqrt(2.0 / 1.01) / std::sqrt(500.0), 0.02 * std::sqrt(2.0 / 500));
    ASSERT_EQ(tg_xavier_uniform_(w, 2.0), TG_OK);
    bound = 2.0 * std::sqrt(6.0 / (784 + 256));
    m = moments(w);
    EXPECT_LE(m.max, bound);
    EXPECT_GT(m.max, 0.99 * bound);
    ASSERT_EQ(tg_xavier_normal_(w, 1.0), TG_OK);
    EXPECT_NEAR(moments(w).std, std::sqrt(2.0 / (784 + 256)), 0.01 * std::sqrt(2.0 / (784 + 256)));
}

TEST_F(TgTest, RandomErrors) {
    tg_clear_error();
    EXPECT_EQ(tg_dropout(tg_ones(TG_SHAPE(3), tg_opts{}), 1.5, true), nullptr);
    EXPECT_ERROR_CONTAINS("tg_dropout: dropout probability has to be between 0 and 1, but got 1.5");
    tg_clear_error();
    EXPECT_EQ(tg_dropout(tg_ones(TG_SHAPE(3), tg_opts{}), -0.1, false), nullptr);
    EXPECT_ERROR_CONTAINS("but got -0.1");
    tg_clear_error();
    EXPECT_EQ(tg_dropout(nullptr, 0.5, true), nullptr);
    EXPECT_ERROR_CONTAINS("tg_dropout: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_rand(TG_SHAPE(3), tg_opts{TG_INT64, TG_CPU, false}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_rand: expected a floating dtype (float32 or float64), got int64");
    tg_clear_error();
    EXPECT_EQ(tg_randn(TG_SHAPE(-1), tg_opts{}), nullptr);
    EXPECT_NE(std::string(tg_last_error()), "");
    tg_clear_error();
    EXPECT_EQ(tg_randint(5, 5, TG_SHAPE(3), tg_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_randint: expected low < high, got low 5, high 5");
    tg_clear_error();
    EXPECT_EQ(tg_bernoulli(nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_bernoulli: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_uniform_(nullptr, 0, 1), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_uniform_: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_normal_(tg_zeros(TG_SHAPE(3), tg_opts{}), 0, -1), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_normal_: expected std >= 0, got -1");
    tg_clear_error();
    EXPECT_EQ(tg_calculate_fans(TG_SHAPE(5), nullptr, nullptr), TG_ERROR);
    EXPECT_ERROR_CONTAINS("fewer than 2 dimensions, got [5]");
    tg_clear_error();
    EXPECT_EQ(tg_kaiming_uniform_(tg_zeros(TG_SHAPE(5), tg_opts{}), 0, TG_FAN_IN), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_kaiming_uniform_: fan in and fan out can not be computed");
    tg_clear_error();
    EXPECT_EQ(tg_xavier_normal_(tg_zeros(TG_SHAPE(2, 2), tg_opts{TG_INT64, TG_CPU, false}), 1), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_xavier_normal_: expected a floating dtype");
}

} // namespace
