// Elementwise ops on CUDA against the CPU: every unary kind, every binary kind,
// where and casts; contiguous, broadcast and non-contiguous inputs; float32 and
// float64; values and gradients. Skipped without a GPU.
#include <string>

#include "cuda_test_util.h"

struct UnaryCase {
    const char *name;
    std::function<tg_tensor *(tg_tensor *)> f;
    double lo, hi; // input range (log, sqrt: positive)
};

static std::vector<UnaryCase> unary_cases() {
    return {
        {"neg", tg_neg, -2, 2},
        {"exp", tg_exp, -2, 2},
        {"log", tg_log, 0.1, 3},
        {"add_scalar", [](tg_tensor *x) { return tg_add_scalar(x, 1.5); }, -2, 2},
        {"sub_scalar", [](tg_tensor *x) { return tg_sub_scalar(x, 0.5); }, -2, 2},
        {"mul_scalar", [](tg_tensor *x) { return tg_mul_scalar(x, -3); }, -2, 2},
        {"div_scalar", [](tg_tensor *x) { return tg_div_scalar(x, 4); }, -2, 2},
        {"rsub_scalar", [](tg_tensor *x) { return tg_rsub_scalar(x, 1); }, -2, 2},
        {"pow_scalar_2", [](tg_tensor *x) { return tg_pow_scalar(x, 2); }, -2, 2},
        {"pow_scalar_1.5", [](tg_tensor *x) { return tg_pow_scalar(x, 1.5); }, 0.1, 2},
        {"sqrt", tg_sqrt, 0.1, 3},
        {"rsqrt", tg_rsqrt, 0.1, 3},
        {"abs", tg_abs, -2, 2},
        {"sign", tg_sign, -2, 2},
        {"relu", tg_relu, -2, 2},
        {"leaky_relu", [](tg_tensor *x) { return tg_leaky_relu(x, 0.1); }, -2, 2},
        {"sigmoid", tg_sigmoid, -4, 4},
        {"tanh", tg_tanh, -3, 3},
        {"gelu", tg_gelu, -3, 3},
        {"gelu_tanh", tg_gelu_tanh, -3, 3},
        {"silu", tg_silu, -3, 3},
        {"softplus", [](tg_tensor *x) { return tg_softplus(x, 2, 3); }, -3, 3},
        {"clamp", [](tg_tensor *x) { return tg_clamp(x, -0.5, 0.7); }, -2, 2},
        {"erf", tg_erf, -2, 2},
        {"reciprocal", tg_reciprocal, 0.5, 3},
        {"square", tg_square, -2, 2},
        {"sin", tg_sin, -3, 3},
        {"cos", tg_cos, -3, 3},
    };
}

TEST_F(TgTest, CudaUnaryOpsMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (const UnaryCase &c : unary_cases()) {
        for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
            CompareOpts o;
            if (dt == TG_FLOAT64) o.atol = o.rtol = 1e-12;
            tg_tensor *x = random_cpu(TG_SHAPE(37, 129), dt, 1, c.lo, c.hi); // odd sizes: vector tails
            auto f = c.f;
            EXPECT_TRUE(compare_devices([&](const std::vector<tg_tensor *> &in) { return f(in[0]); }, {x}, o))
                << c.name << " " << tg_dtype_name(dt) << " contiguous";
            EXPECT_TRUE(
                compare_devices([&](const std::vector<tg_tensor *> &in) { return f(non_contiguous(in[0])); }, {x}, o))
                << c.name << " " << tg_dtype_name(dt) << " non-contiguous";
            // misaligned start (offset 1): the scalar path of the contiguous kernel
            EXPECT_TRUE(compare_devices(
                [&](const std::vector<tg_tensor *> &in) { return f(tg_narrow(tg_flatten(in[0], 0, -1), 0, 1, 1000)); },
                {x}, o))
                << c.name << " " << tg_dtype_name(dt) << " offset view";
        }
    }
}

TEST_F(TgTest, CudaIntegerUnaryOpsMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_INT64, TG_INT32}) {
        tg_tensor *x = random_cpu(TG_SHAPE(5, 33), dt, 4, -20, 20);
        CompareOpts o;
        o.atol = o.rtol = 0;
        std::vector<std::function<tg_tensor *(tg_tensor *)>> fs = {
            tg_neg,
            tg_abs,
            tg_sign,
            tg_relu,
            tg_square,
            [](tg_tensor *t) { return tg_add_scalar(t, 3); },
            [](tg_tensor *t) { return tg_mul_scalar(t, -2); },
            [](tg_tensor *t) { return tg_rsub_scalar(t, 5); },
            [](tg_tensor *t) { return tg_pow_scalar(t, 3); },
            [](tg_tensor *t) { return tg_clamp(t, -4, 6); },
        };
        for (size_t i = 0; i < fs.size(); i++) {
            auto f = fs[i];
            EXPECT_TRUE(
                compare_devices([&](const std::vector<tg_tensor *> &in) { return f(non_contiguous(in[0])); }, {x}, o))
                << "integer unary #" << i << " " << tg_dtype_name(dt);
        }
    }
}

struct BinaryCase {
    const char *name;
    tg_tensor *(*f)(tg_tensor *, tg_tensor *);
    bool positive; // pow: a positive base
};

TEST_F(TgTest, CudaBinaryOpsMatchCpuWithBroadcasting) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    const BinaryCase cases[] = {
        {"add", tg_add, false},         {"sub", tg_sub, false},
        {"mul", tg_mul, false},         {"div", tg_div, false},
        {"maximum", tg_maximum, false}, {"minimum", tg_minimum, false},
        {"pow", tg_pow, true},          {"eq", tg_eq, false},
        {"ne", tg_ne, false},           {"lt", tg_lt, false},
        {"le", tg_le, false},           {"gt", tg_gt, false},
        {"ge", tg_ge, false},           {"atan2", tg_atan2, false},
        {"fmod", tg_fmod, false},       {"remainder", tg_remainder, false},
    };
    struct Shapes {
        tg_shape a, b;
        const char *what;
    } shapes[] = {
        {TG_SHAPE(17, 65), TG_SHAPE(17, 65), "same shape"},
        {TG_SHAPE(4, 1, 5), TG_SHAPE(3, 1), "both broadcast"},
        {TG_SHAPE(2, 3, 4, 5, 6), TG_SHAPE(5, 1), "rank 5 vs 2"},
        {TG_SHAPE(33, 7), TG_SHAPE(), "scalar"},
        {TG_SHAPE(), TG_SHAPE(9), "scalar first"},
        {TG_SHAPE(2, 1, 3, 1, 2, 1, 2, 3), TG_SHAPE(2, 1, 2, 1, 2, 1, 1), "8 dims"},
    };
    for (const BinaryCase &c : cases) {
        for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
            for (const Shapes &s : shapes) {
                double lo = c.positive ? 0.2 : -2;
                tg_tensor *a = random_cpu(s.a, dt, 1, lo, 2), *b = random_cpu(s.b, dt, 2, -2, 2);
                if (std::string(c.name) == "div") b = tg_add_scalar(tg_abs(b), 0.5); // no division by ~0
                CompareOpts o;
                if (dt == TG_FLOAT64) o.atol = o.rtol = 1e-12;
                auto f = c.f;
                EXPECT_TRUE(
                    compare_devices([&](const std::vector<tg_tensor *> &in) { return f(in[0], in[1]); }, {a, b}, o))
                    << c.name << " " << tg_dtype_name(dt) << " " << s.what;
                if (tg_shape_of(a).ndim >= 2) {
                    EXPECT_TRUE(compare_devices(
                        [&](const std::vector<tg_tensor *> &in) { return f(non_contiguous(in[0]), in[1]); }, {a, b}, o))
                        << c.name << " " << tg_dtype_name(dt) << " " << s.what << " non-contiguous";
                }
            }
        }
    }
}

TEST_F(TgTest, CudaBinaryOpsOnIntegersAndBools) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    CompareOpts o;
    o.atol = o.rtol = 0;
    for (tg_dtype dt : {TG_INT64, TG_INT32, TG_UINT8, TG_BOOL}) {
        tg_tensor *a = random_cpu(TG_SHAPE(6, 40), dt, 1, 0, 9), *b = random_cpu(TG_SHAPE(40), dt, 2, 1, 9);
        std::vector<tg_tensor *(*)(tg_tensor *, tg_tensor *)> fs = {tg_eq, tg_ne, tg_lt, tg_le, tg_gt, tg_ge};
        if (dt != TG_BOOL) fs.insert(fs.end(), {tg_add, tg_sub, tg_mul, tg_maximum, tg_minimum});
        for (auto f : fs) {
            EXPECT_TRUE(compare_devices([&](const std::vector<tg_tensor *> &in) { return f(in[0], in[1]); }, {a, b}, o))
                << tg_dtype_name(dt);
        }
    }
}

// The integer rows of ops/binary_formulas.h, with both signs of dividend and divisor.
TEST_F(TgTest, CudaIntegerFmodAndRemainderMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    CompareOpts o;
    o.atol = o.rtol = 0;
    for (tg_dtype dt : {TG_INT64, TG_INT32}) {
        tg_tensor *a = random_cpu(TG_SHAPE(6, 40), dt, 1, -20, 20);
        std::vector<int64_t> divisors(40);
        for (int k = 0; k < 40; k++) divisors[k] = (k % 2 ? -1 : 1) * (k % 7 + 1); // +-1 .. +-7, never 0
        tg_tensor *b = tg_cast(tensor_i64(divisors, TG_SHAPE(40)), dt);
        for (auto f : {tg_fmod, tg_remainder})
            EXPECT_TRUE(compare_devices([&](const std::vector<tg_tensor *> &in) { return f(in[0], in[1]); }, {a, b}, o))
                << tg_dtype_name(dt);
    }
}

// Every power b^e for |b| <= 9, 0 <= e <= 9 is an integer exact in double; CUDA's pow
// may be 2 ulp off (8.999... for 9), which truncating to an integer would turn into 8.
TEST_F(TgTest, CudaIntegerPowIsExact) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    CompareOpts o;
    o.atol = o.rtol = 0;
    for (tg_dtype dt : {TG_INT64, TG_INT32}) {
        tg_tensor *base = tg_reshape(tg_arange(-9, 10, 1, tg_opts{dt, TG_CPU, false}), TG_SHAPE(19, 1));
        tg_tensor *exponent = tg_arange(0, 10, 1, tg_opts{dt, TG_CPU, false});
        EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_pow(in[0], in[1]); },
                                    {base, exponent}, o))
            << tg_dtype_name(dt);
        for (double e : {2.0, 3.0, 7.0, 9.0})
            EXPECT_TRUE(
                compare_devices([&](const std::vector<tg_tensor *> &in) { return tg_pow_scalar(in[0], e); }, {base}, o))
                << tg_dtype_name(dt) << " pow_scalar " << e;
    }
}

TEST_F(TgTest, CudaMixedDtypesPromoteAsOnCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *a = random_cpu(TG_SHAPE(8, 3), TG_FLOAT32, 1), *b = random_cpu(TG_SHAPE(3), TG_INT64, 2, -5, 5);
    CompareOpts o;
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_mul(in[0], in[1]); }, {a, b}, o));
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_lt(in[1], in[0]); }, {a, b}, o));
}

TEST_F(TgTest, CudaWhereMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(4, 1, 6), TG_FLOAT32, 1), *y = random_cpu(TG_SHAPE(5, 1), TG_FLOAT32, 2);
    tg_tensor *c = random_cpu(TG_SHAPE(5, 6), TG_FLOAT32, 3);
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) { return tg_where(tg_gt(in[2], tg_zeros_like(in[2])), in[0], in[1]); },
        {x, y, c}));
    for (tg_dtype dt : {TG_FLOAT64, TG_INT64, TG_INT32, TG_UINT8, TG_BOOL}) {
        tg_tensor *a = random_cpu(TG_SHAPE(3, 7), dt, 5, 0, 50), *b = random_cpu(TG_SHAPE(7), dt, 6, 0, 50);
        CompareOpts o;
        o.atol = o.rtol = 0;
        EXPECT_TRUE(compare_devices(
            [&](const std::vector<tg_tensor *> &in) { return tg_where(tg_gt(in[0], in[1]), in[0], in[1]); }, {a, b}, o))
            << tg_dtype_name(dt);
    }
}

TEST_F(TgTest, CudaInPlaceOpsMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *a = random_cpu(TG_SHAPE(16, 9), TG_FLOAT32, 1), *b = random_cpu(TG_SHAPE(9), TG_FLOAT32, 2);
    tg_tensor *ga = on_cuda(a), *gb = on_cuda(b);
    ASSERT_EQ(tg_add_(a, b), TG_OK);
    ASSERT_EQ(tg_add_(ga, gb), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_mul_scalar_(a, 3), TG_OK);
    ASSERT_EQ(tg_mul_scalar_(ga, 3), TG_OK);
    ASSERT_EQ(tg_add_scaled_(a, b, -0.5), TG_OK);
    ASSERT_EQ(tg_add_scaled_(ga, gb, -0.5), TG_OK);
    EXPECT_TRUE(same_values(a, ga, 1e-6, 1e-6));
}

TEST_F(TgTest, CudaLargeContiguousAddUsesEveryElement) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    const int64_t n = ((int64_t)1 << 24) + 3; // more elements than one grid pass covers
    tg_tensor *a = tg_arange(0, (double)n, 1, tg_opts{TG_FLOAT64, tg_cuda(0), false});
    tg_tensor *b = tg_full(TG_SHAPE(n), 1, tg_opts{TG_FLOAT64, tg_cuda(0), false});
    tg_tensor *s = tg_sum(tg_add(a, b)); // sum of 1..n
    EXPECT_DOUBLE_EQ(tg_item(s), (double)n * (double)(n + 1) / 2);
}

// Comparisons and where with a scalar, tg_full_like (issue 17): the scalar's 0-dim
// operand lives on the tensor's device, and the results match the CPU's.
TEST_F(TgTest, CudaScalarComparisonsWhereAndFullLike) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(33, 65), TG_FLOAT32, 3);
    tg_tensor *dx = on_cuda(x);
    EXPECT_TRUE(same_values(tg_gt_scalar(x, 0.25), tg_gt_scalar(dx, 0.25), 0, 0));
    EXPECT_TRUE(same_values(tg_le_scalar(x, -1), tg_le_scalar(dx, -1), 0, 0));
    tg_tensor *n = tg_cast(tg_mul_scalar(x, 10), TG_INT64);
    EXPECT_TRUE(same_values(tg_eq_scalar(n, 3), tg_eq_scalar(on_cuda(n), 3), 0, 0));
    EXPECT_TRUE(same_values(tg_ne_scalar(n, 2.5), tg_ne_scalar(on_cuda(n), 2.5), 0, 0));
    tg_tensor *mask = tg_gt_scalar(x, 0), *dmask = tg_gt_scalar(dx, 0);
    EXPECT_TRUE(same_values(tg_where_scalar(mask, x, 0.0), tg_where_scalar(dmask, dx, 0.0), 0, 0));
    EXPECT_TRUE(same_values(tg_where_scalars(mask, 1, 0), tg_where_scalars(dmask, 1, 0), 0, 0));
    EXPECT_TRUE(same_values(tg_full_like(x, 1.5), tg_full_like(dx, 1.5), 0, 0));
}
