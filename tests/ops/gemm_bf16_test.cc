// bfloat16 GEMM with vdpbf16ps (ops/cpu/gemm_bf16.c): against a float64 reference of the
// same bfloat16 inputs (the result must be that sum in float32, up to float32 rounding of
// each partial sum), at odd sizes that cross every blocking edge, with transposed and
// strided operands, Inf/NaN/overflow, the same bits on 1 and 2 threads, and through
// tg_matmul / tg_linear. Every case runs on both kernels: AVX512-BF16 (vdpbf16ps) and AMX
// (TDPBF16PS tiles); SKIPPED on CPUs without AVX512-BF16 (the float32 fallback is what
// tests/core/lowp_test.cc checks there), the AMX half SKIPPED without AMX.
#include <cstring>
#include <random>

#include "core/lowp.h"
#include "ops/cpu/gemm.h"
#include "test_util.h"

namespace {

uint16_t bf16_of(float f) { return tg_float_to_bf16_bits(f); }
float float_of(uint16_t h) { return tg_bf16_bits_to_float(h); }

struct Matrix {
    int64_t rows, cols;
    bool transposed; // stored as [cols, rows], read through swapped strides
    std::vector<uint16_t> data;
    uint16_t at(int64_t r, int64_t c) const { return transposed ? data[c * rows + r] : data[r * cols + c]; }
    int64_t rs() const { return transposed ? 1 : cols; }
    int64_t cs() const { return transposed ? rows : 1; }
};

Matrix random_matrix(int64_t rows, int64_t cols, bool transposed, std::mt19937 &rng) {
    std::normal_distribution<float> normal;
    Matrix m{rows, cols, transposed, std::vector<uint16_t>((size_t)(rows * cols))};
    for (auto &v : m.data) v = bf16_of(normal(rng));
    return m;
}

// |c - exact| <= (k + 1) * 2^-24 * sum |a b|: float32 summation of exact products, in any order.
::testing::AssertionResult matches_reference(const Matrix &a, const Matrix &b, const std::vector<float> &c,
                                             const std::vector<float> *c0) {
    int64_t m = a.rows, k = a.cols, n = b.cols;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double exact = c0 ? (*c0)[i * n + j] : 0, magnitude = std::fabs(exact);
            for (int64_t q = 0; q < k; q++) {
                double p = (double)float_of(a.at(i, q)) * float_of(b.at(q, j));
                exact += p;
                magnitude += std::fabs(p);
            }
            double got = c[i * n + j], bound = (double)(k + 1) * std::ldexp(magnitude, -24) + 1e-37;
            if (!(std::fabs(got - exact) <= bound))
                return ::testing::AssertionFailure()
                       << "C[" << i << ", " << j << "] = " << got << ", want " << exact << " +- " << bound << " (m "
                       << m << ", n " << n << ", k " << k << ")";
        }
    return ::testing::AssertionSuccess();
}

std::vector<float> run(const Matrix &a, const Matrix &b, const std::vector<float> *c0) {
    std::vector<float> c = c0 ? *c0 : std::vector<float>((size_t)(a.rows * b.cols), -7.0f);
    tg_gemm_bf16(a.rows, b.cols, a.cols, a.data.data(), a.rs(), a.cs(), b.data.data(), b.rs(), b.cs(), c0 != nullptr,
                 c.data(), b.cols);
    return c;
}

// The parameter: true for the AMX kernel, false for the AVX512-BF16 one.
class GemmBf16Test : public TgTest, public ::testing::WithParamInterface<bool> {
  protected:
    void SetUp() override {
        TgTest::SetUp();
        if (!tg_gemm_bf16_supported()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
        if (GetParam() && !tg_gemm_bf16_amx_available())
            GTEST_SKIP() << "no AMX on this CPU (or not granted by the OS)";
        amx_ = tg_gemm_bf16_set_amx(GetParam());
    }
    void TearDown() override {
        tg_gemm_bf16_set_amx(amx_);
        tg_set_num_threads(threads_);
        TgTest::TearDown();
    }
    int threads_ = tg_get_num_threads();
    bool amx_ = false;
};

TEST_P(GemmBf16Test, RandomMatricesOfOddSizesAndTransposes) {
    std::mt19937 rng(1);
    // m, n, k: tiles of 8 x 32, k in pairs, slices of 384 k, 96 rows and 3072 columns.
    const int64_t sizes[][3] = {{1, 1, 1},    {1, 1, 2},     {3, 5, 7},     {8, 32, 2},     {9, 33, 3},
                                {17, 31, 65}, {96, 64, 384}, {97, 65, 385}, {130, 70, 771}, {5, 3100, 9}};
    int cases = 0;
    for (auto &s : sizes)
        for (int t = 0; t < 4; t++)
            for (int acc = 0; acc < 2; acc++) {
                Matrix a = random_matrix(s[0], s[2], t & 1, rng), b = random_matrix(s[2], s[1], t & 2, rng);
                std::vector<float> c0((size_t)(s[0] * s[1]));
                for (auto &v : c0) v = std::normal_distribution<float>()(rng);
                EXPECT_TRUE(matches_reference(a, b, run(a, b, acc ? &c0 : nullptr), acc ? &c0 : nullptr))
                    << "transposes " << t << ", accumulate " << acc;
                cases++;
            }
    EXPECT_EQ(cases, 80);
}

TEST_P(GemmBf16Test, EmptyKGivesZerosOrLeavesCAlone) {
    std::vector<float> c(6, 3.0f);
    tg_gemm_bf16(2, 3, 0, nullptr, 0, 1, nullptr, 3, 1, true, c.data(), 3);
    EXPECT_EQ(c, std::vector<float>(6, 3.0f));
    tg_gemm_bf16(2, 3, 0, nullptr, 0, 1, nullptr, 3, 1, false, c.data(), 3);
    EXPECT_EQ(c, std::vector<float>(6, 0.0f));
}

TEST_P(GemmBf16Test, InfNanAndOverflowPropagate) {
    // A [3, 2] rows: (inf, 1), (nan, 0), (3e38, 3e38); B [2, 2] = [[1, -1], [1, 1]].
    float inf = INFINITY, nan = NAN;
    Matrix a{3, 2, false, {bf16_of(inf), bf16_of(1), bf16_of(nan), bf16_of(0), bf16_of(3e38f), bf16_of(3e38f)}};
    Matrix b{2, 2, false, {bf16_of(1), bf16_of(-1), bf16_of(1), bf16_of(1)}};
    std::vector<float> c = run(a, b, nullptr);
    EXPECT_EQ(c[0], inf);
    EXPECT_EQ(c[1], -inf);
    EXPECT_TRUE(std::isnan(c[2]));
    EXPECT_TRUE(std::isnan(c[3]));
    EXPECT_EQ(c[4], inf) << "3e38 + 3e38 overflows float32";
    EXPECT_EQ(c[5], float_of(bf16_of(3e38f)) * -1 + float_of(bf16_of(3e38f)));
}

TEST_P(GemmBf16Test, SameBitsOnOneAndTwoThreads) {
    std::mt19937 rng(2);
    for (bool tall : {true, false}) { // split by rows, then by columns
        Matrix a = random_matrix(tall ? 300 : 40, 200, false, rng), b = random_matrix(200, tall ? 40 : 300, true, rng);
        tg_set_num_threads(1);
        std::vector<float> one = run(a, b, nullptr);
        tg_set_num_threads(2);
        std::vector<float> two = run(a, b, nullptr);
        EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
        EXPECT_TRUE(matches_reference(a, b, two, nullptr));
    }
}

// tg_gemm_bf16_rounded: the kernel rounds its float32 tiles to bfloat16 itself (k up to
// one slice of 384), bit for bit tg_gemm_bf16's float32 C cast afterwards, on every
// tile edge, transposed operands, NaN and Inf, one and two threads; the probe says no
// past one slice. matmul takes it for such a k (a weight's gradient over a batch).
TEST_P(GemmBf16Test, RoundedOutputIsTheFloat32ResultCastOnce) {
    EXPECT_TRUE(tg_gemm_bf16_rounds(384));
    EXPECT_EQ(tg_gemm_bf16_rounds(385), GetParam()) << "AMX's slice is 1024 deep, AVX512-BF16's 384";
    EXPECT_EQ(tg_gemm_bf16_rounds(1024), GetParam());
    EXPECT_FALSE(tg_gemm_bf16_rounds(1025));
    std::mt19937 rng(3);
    const int64_t sizes[][3] = {{1, 1, 1},     {3, 5, 7},      {9, 33, 3}, {17, 31, 65},
                                {97, 65, 384}, {300, 784, 64}, {64, 40, 2}};
    for (int threads : {1, 2}) {
        tg_set_num_threads(threads);
        for (auto &s : sizes)
            for (int t = 0; t < 4; t++) {
                Matrix a = random_matrix(s[0], s[2], t & 1, rng), b = random_matrix(s[2], s[1], t & 2, rng);
                if (s[0] == 3) a.data[4] = bf16_of(NAN), a.data[7] = bf16_of(INFINITY);
                std::vector<float> c = run(a, b, nullptr);
                std::vector<uint16_t> want(c.size()), got(c.size(), 0xAAAA);
                for (size_t i = 0; i < c.size(); i++) want[i] = bf16_of(c[i]);
                tg_gemm_bf16_rounded(a.rows, b.cols, a.cols, a.data.data(), a.rs(), a.cs(), b.data.data(), b.rs(),
                                     b.cs(), got.data(), b.cols);
                EXPECT_EQ(got, want) << s[0] << " x " << s[1] << " x " << s[2] << ", transposes " << t << ", threads "
                                     << threads;
            }
    }
    std::vector<uint16_t> zeros(6, 0xAAAA);
    tg_gemm_bf16_rounded(2, 3, 0, nullptr, 0, 1, nullptr, 3, 1, zeros.data(), 3);
    EXPECT_EQ(zeros, std::vector<uint16_t>(6, 0));
}

// tg_gemm_bf16_general: a float32 B rounded while it is packed gives the bits of the same
// product on B cast first (ties, NaN, Inf, subnormals, -0 included; B as a linear's W^T,
// row-major, and at a stride of neither); the rounded outputs (bfloat16, and bfloat16
// values stored as float32) are the float32 result cast once; on one and two threads.
TEST_P(GemmBf16Test, Float32BRoundedWhilePackedIsTheCastFirst) {
    std::mt19937 rng(5);
    const int64_t sizes[][3] = {{1, 1, 1},      {3, 5, 7},     {9, 33, 3},    {17, 31, 65},
                                {64, 100, 384}, {40, 64, 784}, {64, 1030, 33}};
    for (int threads : {1, 2}) {
        tg_set_num_threads(threads);
        for (auto &s : sizes)
            for (int layout = 0; layout < 3; layout++) { // B row-major, transposed (W^T), every other column
                int64_t m = s[0], n = s[1], k = s[2];
                Matrix a = random_matrix(m, k, false, rng);
                int64_t ld = layout == 2 ? 2 * n : layout == 1 ? k : n; // storage rows
                std::vector<float> b32((size_t)((layout == 1 ? n : k) * ld));
                std::normal_distribution<float> normal;
                for (auto &v : b32) v = normal(rng);
                const float specials[] = {NAN,    INFINITY, -INFINITY, 1.00390625f /* a tie: 0x3F808000 */,
                                          1e-40f, -0.0f,    3.0e38f};
                for (size_t i = 0; i < 7 && i < b32.size(); i++) b32[(i * 7919) % b32.size()] = specials[i];
                std::vector<uint16_t> b16(b32.size());
                for (size_t i = 0; i < b32.size(); i++) b16[i] = bf16_of(b32[i]);
                int64_t rs = layout == 1 ? 1 : ld, cs = layout == 1 ? k : layout == 2 ? 2 : 1;
                std::vector<float> want((size_t)(m * n), 0.5f), got(want);
                tg_gemm_bf16(m, n, k, a.data.data(), a.rs(), a.cs(), b16.data(), rs, cs, true, want.data(), n);
                tg_gemm_bf16_args g{};
                g.m = m, g.n = n, g.k = k, g.a = a.data.data(), g.a_rs = a.rs(), g.a_cs = a.cs(), g.b32 = b32.data();
                g.b_rs = rs, g.b_cs = cs, g.c_kind = TG_BF16_C_F32, g.accumulate = true, g.c = got.data(), g.ldc = n;
                tg_gemm_bf16_general(g);
                std::string what = std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k) +
                                   ", layout " + std::to_string(layout) + ", threads " + std::to_string(threads);
                EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << what;
                if (!tg_gemm_bf16_rounds(k)) continue;
                std::vector<float> plain((size_t)(m * n));
                tg_gemm_bf16(m, n, k, a.data.data(), a.rs(), a.cs(), b16.data(), rs, cs, false, plain.data(), n);
                std::vector<uint16_t> want16(plain.size()), got16(plain.size(), 0xAAAA);
                std::vector<float> want32(plain.size()), got32(plain.size(), -7.0f);
                for (size_t i = 0; i < plain.size(); i++)
                    want16[i] = bf16_of(plain[i]), want32[i] = float_of(want16[i]);
                g.accumulate = false, g.c_kind = TG_BF16_C_BF16, g.c = got16.data();
                tg_gemm_bf16_general(g);
                EXPECT_EQ(got16, want16) << what;
                g.c_kind = TG_BF16_C_ROUNDED_F32, g.c = got32.data();
                tg_gemm_bf16_general(g);
                EXPECT_EQ(std::memcmp(got32.data(), want32.data(), got32.size() * sizeof(float)), 0) << what;
            }
    }
}

// A bias (bfloat16, one per column) starts each column's sums: the bits of a C filled with
// the widened bias and accumulated, for every output kind, on tile edges, past a slice
// (float32 output), NaN / Inf / -0 in the bias, k = 0, one and two threads.
TEST_P(GemmBf16Test, BiasStartsEachColumnsSums) {
    std::mt19937 rng(7);
    const int64_t sizes[][3] = {{1, 1, 1}, {3, 5, 7}, {33, 47, 65}, {64, 1024, 784}, {40, 70, 1100}, {5, 9, 0}};
    for (int threads : {1, 2}) {
        tg_set_num_threads(threads);
        for (auto &s : sizes) {
            int64_t m = s[0], n = s[1], k = s[2];
            Matrix a = random_matrix(m, k, false, rng), b = random_matrix(k, n, true, rng);
            Matrix bias = random_matrix(1, n, false, rng);
            const float specials[] = {NAN, INFINITY, -0.0f};
            for (size_t i = 0; i < 3 && i < (size_t)n; i++) bias.data[(i * 31) % n] = bf16_of(specials[i]);
            std::vector<float> filled((size_t)(m * n));
            for (int64_t i = 0; i < m * n; i++) filled[i] = float_of(bias.data[i % n]);
            std::vector<float> want = run(a, b, &filled);
            tg_gemm_bf16_args g{};
            g.m = m, g.n = n, g.k = k, g.a = a.data.data(), g.a_rs = a.rs(), g.a_cs = a.cs(), g.b = b.data.data();
            g.b_rs = b.rs(), g.b_cs = b.cs(), g.bias = bias.data.data(), g.ldc = n;
            std::string what = std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k) +
                               ", threads " + std::to_string(threads);
            std::vector<float> got((size_t)(m * n), -7.0f);
            g.c_kind = TG_BF16_C_F32, g.c = got.data();
            tg_gemm_bf16_general(g);
            EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << what;
            if (!tg_gemm_bf16_rounds(k)) continue;
            std::vector<uint16_t> want16(want.size()), got16(want.size(), 0xAAAA);
            std::vector<float> want32(want.size()), got32(want.size(), -7.0f);
            for (size_t i = 0; i < want.size(); i++) want16[i] = bf16_of(want[i]), want32[i] = float_of(want16[i]);
            g.c_kind = TG_BF16_C_BF16, g.c = got16.data();
            tg_gemm_bf16_general(g);
            EXPECT_EQ(got16, want16) << what;
            g.c_kind = TG_BF16_C_ROUNDED_F32, g.c = got32.data();
            tg_gemm_bf16_general(g);
            EXPECT_EQ(std::memcmp(got32.data(), want32.data(), got32.size() * sizeof(float)), 0) << what;
        }
    }
}

// tg_matmul / tg_linear on bfloat16: the float32 product of the widened inputs, rounded
// once to bfloat16, give or take one bfloat16 step where the float32 sums differ in order.
::testing::AssertionResult within_one_bf16_step(tg_tensor *got, tg_tensor *want32) {
    std::vector<double> g = values(got), w = values(want32);
    if (g.size() != w.size()) return ::testing::AssertionFailure() << "sizes " << g.size() << " vs " << w.size();
    for (size_t i = 0; i < g.size(); i++)
        if (!(std::fabs(g[i] - w[i]) <= std::ldexp(std::fabs(w[i]), -7) + 1e-30))
            return ::testing::AssertionFailure() << "element " << i << ": " << g[i] << " vs " << w[i];
    return ::testing::AssertionSuccess();
}

TEST_P(GemmBf16Test, MatmulAndLinearUseItAndAgreeWithFloat32) {
    tg_manual_seed(3);
    tg_opts bf = {TG_BFLOAT16, TG_CPU, false};
    tg_tensor *a = tg_cast(tg_randn(TG_SHAPE(2, 3, 37, 45), {}), TG_BFLOAT16);
    tg_tensor *b = tg_cast(tg_randn(TG_SHAPE(3, 45, 29), {}), TG_BFLOAT16); // broadcast over a's first dim
    tg_tensor *a32 = tg_cast(a, TG_FLOAT32), *b32 = tg_cast(b, TG_FLOAT32);
    tg_tensor *c = tg_matmul(a, b);
    ASSERT_NE(c, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(c), TG_BFLOAT16);
    EXPECT_EQ(dims(c), (std::vector<int64_t>{2, 3, 37, 29}));
    EXPECT_TRUE(within_one_bf16_step(c, tg_matmul(a32, b32)));
    // Transposed views, no copies: a^T [.., 45, 37] @ a [.., 37, 45].
    tg_tensor *at = tg_transpose(a, -1, -2);
    EXPECT_TRUE(within_one_bf16_step(tg_matmul(at, a), tg_matmul(tg_transpose(a32, -1, -2), a32)));
    // Large enough to split over threads, 1-D operand.
    tg_tensor *x = tg_cast(tg_randn(TG_SHAPE(300, 257), {}), TG_BFLOAT16),
              *v = tg_cast(tg_randn(TG_SHAPE(257), {}), TG_BFLOAT16);
    EXPECT_TRUE(within_one_bf16_step(tg_matmul(x, v), tg_matmul(tg_cast(x, TG_FLOAT32), tg_cast(v, TG_FLOAT32))));
    // Linear with bias, 3-D input.
    tg_tensor *in = tg_cast(tg_randn(TG_SHAPE(4, 33, 70), {}), TG_BFLOAT16);
    tg_tensor *w = tg_cast(tg_randn(TG_SHAPE(50, 70), {}), TG_BFLOAT16),
              *bias = tg_cast(tg_randn(TG_SHAPE(50), {}), TG_BFLOAT16);
    tg_tensor *y = tg_linear(in, w, bias);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(y), TG_BFLOAT16);
    EXPECT_TRUE(
        within_one_bf16_step(y, tg_linear(tg_cast(in, TG_FLOAT32), tg_cast(w, TG_FLOAT32), tg_cast(bias, TG_FLOAT32))));
    EXPECT_TRUE(within_one_bf16_step(tg_linear(in, w, nullptr),
                                     tg_linear(tg_cast(in, TG_FLOAT32), tg_cast(w, TG_FLOAT32), nullptr)));
    // Empty inner dim: zeros (plus the bias).
    tg_tensor *e = tg_matmul(tg_zeros(TG_SHAPE(3, 0), bf), tg_zeros(TG_SHAPE(0, 4), bf));
    EXPECT_EQ(values(e), std::vector<double>(12, 0.0));
}

TEST_P(GemmBf16Test, GradientsOfMatmulAndLinearAreBfloat16) {
    tg_manual_seed(4);
    tg_tensor *x = tg_cast(tg_randn(TG_SHAPE(6, 9), {}), TG_BFLOAT16),
              *w = tg_cast(tg_randn(TG_SHAPE(5, 9), {}), TG_BFLOAT16);
    tg_requires_grad_(x, true);
    tg_requires_grad_(w, true);
    ASSERT_EQ(tg_backward(tg_sum(tg_linear(x, w, nullptr))), TG_OK) << tg_last_error();
    // d sum(x w^T) / dx [i, q] = sum_j w[j, q]: a column sum of w, in bfloat16.
    const int dim0 = 0;
    tg_tensor *want = tg_sum_dims(tg_cast(w, TG_FLOAT32), &dim0, 1, false);
    ASSERT_EQ(tg_dtype_of(tg_grad(x)), TG_BFLOAT16);
    std::vector<double> g = values(tg_grad(x)), s = values(want);
    for (int64_t i = 0; i < 6; i++)
        for (int64_t q = 0; q < 9; q++) EXPECT_NEAR(g[i * 9 + q], s[q], std::ldexp(std::fabs(s[q]), -7) + 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Kernels, GemmBf16Test, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &info) { return info.param ? "Amx" : "Avx512Bf16"; });

// Where AMX is available it is the kernel in use, unless TG_AMX=0 says otherwise.
TEST(GemmBf16Amx, OnByDefaultWhereAvailable) {
    if (!tg_gemm_bf16_amx_available()) GTEST_SKIP() << "no AMX on this CPU (or not granted by the OS)";
    bool was = tg_gemm_bf16_set_amx(true);
    EXPECT_EQ(was, getenv("TG_AMX") == nullptr || getenv("TG_AMX")[0] != '0');
    tg_gemm_bf16_set_amx(was);
}

} // namespace
