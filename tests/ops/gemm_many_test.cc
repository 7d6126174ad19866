// Several GEMMs at once (tg_gemm_many, ops/cpu/gemm.c) and the linear backward that uses it:
// each product against a float64 reference and bit for bit against the same product
// alone on one thread, on 1, 2, 3 and 4 threads (one whole product per thread, or several
// blocks each), with transposes, alpha and beta, an empty product, a tiny one and small
// ones over a long k (our dot-product kernel, whatever the thread count), short batches
// times a weight (our kernel for x w^T, alone or as blocks of columns), products of B
// untransposed with a short m or k (our row-panel kernel for a layer's dx and dw); and
// linear's two gradients against the products tg_matmul makes on the recorded path
// (create_graph), for a 3-D input and a non-contiguous incoming gradient.
#include <cstring>
#include <dlfcn.h>
#include <unistd.h>
#include <random>
#include <thread>

#include "ops/cpu/gemm.h"
#include "ops/cpu/onednn_gemm.h"
#include "test_util.h"

namespace {

struct Product {
    bool f64, ta, tb;
    int64_t m, n, k;
    double alpha, beta;
    std::vector<double> a, b, c0; // a stored [k, m] when ta (read transposed), b [n, k] when tb
};

Product random_product(bool f64, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, double beta,
                       std::mt19937 &rng) {
    std::normal_distribution<double> normal;
    Product p{f64,
              ta,
              tb,
              m,
              n,
              k,
              alpha,
              beta,
              std::vector<double>(m * k),
              std::vector<double>(k * n),
              std::vector<double>(m * n)};
    for (auto *v : {&p.a, &p.b, &p.c0})
        for (auto &x : *v) x = f64 ? normal(rng) : (double)(float)normal(rng);
    return p;
}

// C as the caller stores it: float or double values in a byte buffer.
struct Output {
    std::vector<unsigned char> bytes;
};

template <typename T> std::vector<T> as(const std::vector<double> &v) { return std::vector<T>(v.begin(), v.end()); }

struct Buffers {
    std::vector<float> af, bf, cf;
    std::vector<double> ad, bd, cd;
    tg_gemm_args args(const Product &p) {
        int64_t lda = p.ta ? p.m : p.k, ldb = p.tb ? p.k : p.n;
        if (p.f64) {
            ad = p.a, bd = p.b, cd = p.c0;
            return {true, p.ta, p.tb, p.m, p.n, p.k, p.alpha, ad.data(), lda, bd.data(), ldb, p.beta, cd.data(), p.n};
        }
        af = as<float>(p.a), bf = as<float>(p.b), cf = as<float>(p.c0);
        return {false, p.ta, p.tb, p.m, p.n, p.k, p.alpha, af.data(), lda, bf.data(), ldb, p.beta, cf.data(), p.n};
    }
    std::vector<double> result(const Product &p) const {
        return p.f64 ? cd : std::vector<double>(cf.begin(), cf.end());
    }
};

::testing::AssertionResult matches_reference(const Product &p, const std::vector<double> &c) {
    double eps = p.f64 ? std::ldexp(1.0, -52) : std::ldexp(1.0, -23);
    for (int64_t i = 0; i < p.m; i++)
        for (int64_t j = 0; j < p.n; j++) {
            double sum = 0, magnitude = 0;
            for (int64_t q = 0; q < p.k; q++) {
                double x = p.ta ? p.a[q * p.m + i] : p.a[i * p.k + q], y = p.tb ? p.b[j * p.k + q] : p.b[q * p.n + j];
                sum += x * y;
                magnitude += std::fabs(x * y);
            }
            double want = p.alpha * sum + p.beta * p.c0[i * p.n + j];
            double bound = (p.k + 2) * eps * (std::fabs(p.alpha) * magnitude + std::fabs(p.beta * p.c0[i * p.n + j]));
            if (!(std::fabs(c[i * p.n + j] - want) <= bound + 1e-300))
                return ::testing::AssertionFailure() << "C[" << i << ", " << j << "] = " << c[i * p.n + j] << ", want "
                                                     << want << " (m " << p.m << ", n " << p.n << ", k " << p.k << ")";
        }
    return ::testing::AssertionSuccess();
}

class GemmManyTest : public TgTest {
  protected:
    void TearDown() override {
        tg_set_num_threads(threads_);
        TgTest::TearDown();
    }
    int threads_ = tg_get_num_threads();
};

TEST_F(GemmManyTest, EachProductAsAloneOnOneThreadOnAnyThreadCount) {
    std::mt19937 rng(5);
    std::vector<Product> products = {
        random_product(false, false, false, 64, 300, 200, 1, 0, rng), // a layer's dx
        random_product(false, true, false, 300, 200, 64, 1, 0, rng),  // its dw (g^T x)
        random_product(true, false, true, 90, 70, 130, -0.5, 2, rng), // float64, alpha and beta
        random_product(false, true, true, 5, 3, 7, 1, 1, rng),        // tiny
        random_product(false, false, false, 0, 40, 10, 1, 0, rng),    // empty
        // a small C over a long k: gemm_dot, k across its 2048-blocks and not a multiple of 16
        random_product(false, false, true, 20, 25, 5000, 0.5, 1, rng),
        random_product(false, false, true, 7, 3, 300, 1, 0, rng),
        // a short batch times a weight (x w^T, m a multiple of 16 up to 64): our kernel on
        // columns of C, n not a multiple of its 6 rows of w, k with and without a tail of 16
        random_product(false, false, true, 64, 70, 100, 1, 0, rng),
        random_product(false, false, true, 32, 500, 784, 0.5, 1, rng),
        random_product(false, false, true, 48, 5, 33, 1, 0, rng),
        random_product(false, false, true, 16, 1, 16, -1, 0.25, rng),
        // B not transposed with m or k at most 64 (alpha 1, beta 0): our tiles of 6 rows x
        // 64 columns, rows and columns past the edge, k in chunks of 128 (partial sums kept
        // in C between them), A read in place or transposed, B packed 1024 columns at a time
        random_product(false, false, false, 20, 37, 300, 1, 0, rng),
        random_product(false, true, false, 77, 1100, 50, 1, 0, rng),
        random_product(false, false, false, 64, 10, 1000, 1, 0, rng),
        random_product(false, true, false, 1, 1, 1, 1, 0, rng),
    };
    std::vector<std::vector<double>> alone;
    tg_set_num_threads(1);
    for (const Product &p : products) {
        Buffers buf;
        tg_gemm_args a = buf.args(p);
        tg_gemm_many(&a, 1);
        alone.push_back(buf.result(p));
        EXPECT_TRUE(matches_reference(p, alone.back()));
    }
    for (int threads : {1, 2, 3, 4}) {
        tg_set_num_threads(threads);
        std::vector<Buffers> bufs(products.size());
        std::vector<tg_gemm_args> args;
        for (size_t i = 0; i < products.size(); i++) args.push_back(bufs[i].args(products[i]));
        tg_gemm_many(args.data(), (int)args.size());
        for (size_t i = 0; i < products.size(); i++)
            if (gemm_split_keeps_bits() || products[i].f64)
                EXPECT_EQ(bufs[i].result(products[i]), alone[i]) << "product " << i << " on " << threads << " threads";
            else EXPECT_TRUE(close_as_gemm(bufs[i].result(products[i]), alone[i])) << "product " << i;
    }
}

// One product split by tg_gemm_f32 itself: blocks of a product too tall for our short-batch
// kernel (80 rows) are short enough for it but run the whole product's kernel (k past
// OpenBLAS's k blocks, so the two differ), so the bits do not depend on the thread count;
// a short batch split by columns; and a weight gradient (k = 64) split by rows and an input
// gradient split by columns, both on the row-panel kernel.
TEST_F(GemmManyTest, OneProductSameBitsOnAnyThreadCount) {
    std::mt19937 rng(6);
    for (Product p : {random_product(false, false, true, 80, 60, 1500, 1, 0, rng),
                      random_product(false, false, true, 64, 1000, 1500, 1, 0, rng),
                      random_product(false, true, false, 700, 900, 64, 1, 0, rng),
                      random_product(false, false, false, 64, 1100, 300, 1, 0, rng)}) {
        std::vector<double> first;
        for (int threads : {1, 2, 3}) {
            tg_set_num_threads(threads);
            Buffers buf;
            tg_gemm_args a = buf.args(p);
            tg_gemm_f32(a.trans_a, a.trans_b, a.m, a.n, a.k, (float)a.alpha, (const float *)a.a, a.lda,
                        (const float *)a.b, a.ldb, (float)a.beta, (float *)a.c, a.ldc);
            if (threads == 1) {
                first = buf.result(p);
                EXPECT_TRUE(matches_reference(p, first));
            } else {
                if (gemm_split_keeps_bits())
                    EXPECT_EQ(buf.result(p), first) << p.m << " x " << p.n << " on " << threads << " threads";
                else EXPECT_TRUE(close_as_gemm(buf.result(p), first)) << p.m << " x " << p.n << " on " << threads;
            }
        }
    }
}

// linear's gradients without a graph (two GEMMs side by side) equal those of the recorded
// path, which computes them with tg_matmul.
TEST_F(GemmManyTest, LinearGradientsSideBySideEqualTheRecordedPath) {
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        for (int threads : {1, 2}) {
            tg_set_num_threads(threads);
            std::vector<tg_tensor *> grads[2];
            for (int create_graph = 0; create_graph < 2; create_graph++) {
                tg_manual_seed(3);
                tg_tensor *x = tg_requires_grad_(tg_randn(TG_SHAPE(3, 40, 96), (tg_opts){.dtype = dt}), true);
                tg_tensor *w = tg_requires_grad_(tg_randn(TG_SHAPE(80, 96), (tg_opts){.dtype = dt}), true);
                tg_tensor *b = tg_requires_grad_(tg_randn(TG_SHAPE(80), (tg_opts){.dtype = dt}), true);
                tg_tensor *weights = tg_randn(TG_SHAPE(80, 40, 3), (tg_opts){.dtype = dt});
                // the incoming gradient is `weights` permuted: not contiguous
                tg_tensor *y = tg_linear(x, w, b);
                tg_tensor *loss = tg_sum(tg_mul(y, tg_permute(weights, (const int[]){2, 1, 0})));
                ASSERT_EQ(tg_backward_with(loss, .create_graph = create_graph != 0), TG_OK);
                for (tg_tensor *t : {x, w, b}) {
                    grads[create_graph].push_back(tg_detach(tg_grad(t)));
                    tg_zero_grad(t); // a recorded gradient refers back to its leaf
                }
            }
            for (size_t i = 0; i < 3; i++) {
                EXPECT_EQ(dims(grads[0][i]), dims(grads[1][i]));
                std::vector<double> got = values(grads[0][i]), want = values(grads[1][i]);
                ASSERT_EQ(got.size(), want.size());
                double tol = dt == TG_FLOAT32 ? 1e-4 : 1e-12;
                for (size_t j = 0; j < got.size(); j++)
                    ASSERT_NEAR(got[j], want[j], tol * (1 + std::fabs(want[j])))
                        << "gradient " << i << " element " << j;
            }
        }
    }
}

// oneDNN's products (ops/cpu/onednn_gemm.h): float32 products of m n k > 100^3 run on
// dnnl_sgemm where Debian's libdnnl2 is installed (./bazelw installs it), in blocks fixed by
// the shape. Each against the float64 reference, and bit for bit on 1, 2 and 3 threads, alone
// and beside another product in tg_gemm_many; among them a shape where oneDNN gives a block
// other bits than the whole product (A B^T with n 128 and k >= 1024, were it cut into two
// columns of 64 by a split per thread), lesson 10's layer shapes, alpha and beta.
TEST_F(GemmManyTest, OneDnnProductsMatchTheReferenceAndKeepTheirBitsOnAnyThreadCount) {
    if (access("/usr/lib/x86_64-linux-gnu/libdnnl.so.2", R_OK) == 0) {
        EXPECT_TRUE(tg_onednn_available());
    }
    if (!tg_onednn_available()) GTEST_SKIP() << "oneDNN (libdnnl2) is not installed: OpenBLAS runs these products";
    std::mt19937 rng(7);
    std::vector<Product> products = {
        random_product(false, false, true, 128, 128, 1024, 1, 0, rng),
        random_product(false, false, false, 128, 2048, 128, 1, 0, rng),
        random_product(false, false, true, 512, 384, 128, 1, 0, rng),  // lesson 10's qkv, forward
        random_product(false, true, false, 384, 128, 512, 1, 0, rng),  // its weight gradient
        random_product(false, false, false, 512, 128, 384, 1, 0, rng), // its input gradient
        random_product(false, true, true, 300, 200, 100, -0.5, 2, rng),
    };
    std::vector<std::vector<double>> first(products.size());
    for (int threads : {1, 2, 3}) {
        tg_set_num_threads(threads);
        for (size_t i = 0; i < products.size(); i++) {
            const Product &p = products[i];
            Buffers alone, beside, other;
            tg_gemm_args a = alone.args(p);
            tg_gemm_f32(a.trans_a, a.trans_b, a.m, a.n, a.k, (float)a.alpha, (const float *)a.a, a.lda,
                        (const float *)a.b, a.ldb, (float)a.beta, (float *)a.c, a.ldc);
            tg_gemm_args two[2] = {beside.args(p), other.args(products[(i + 1) % products.size()])};
            tg_gemm_many(two, 2);
            if (threads == 1) {
                first[i] = alone.result(p);
                EXPECT_TRUE(matches_reference(p, first[i])) << "product " << i;
            }
            EXPECT_EQ(alone.result(p), first[i]) << "product " << i << " on " << threads << " threads";
            EXPECT_EQ(beside.result(p), first[i]) << "product " << i << " beside another, " << threads << " threads";
        }
    }
}

// tg_gemm_f32_bias (linear's forward): op(A) op(B) + bias on every row, on oneDNN's blocks
// (the bias added per block) and on the other paths (C starting as the bias), against the
// float64 reference and bit for bit on 1, 2 and 3 threads.
TEST_F(GemmManyTest, ProductPlusBiasMatchesTheReferenceOnAnyThreadCount) {
    std::mt19937 rng(8);
    std::normal_distribution<double> normal;
    for (Product p : {random_product(false, false, true, 600, 384, 128, 1, 1, rng), // oneDNN's where installed
                      random_product(false, true, true, 200, 700, 64, 1, 1, rng),   // cut into columns
                      random_product(false, false, true, 64, 100, 50, 1, 1, rng),   // the short-batch kernel
                      random_product(false, false, false, 30, 20, 10, 1, 1, rng)}) {
        // the reference's beta C0 is the bias broadcast over the rows
        std::vector<float> bias(p.n);
        for (auto &v : bias) v = (float)normal(rng);
        for (int64_t i = 0; i < p.m; i++)
            for (int64_t j = 0; j < p.n; j++) p.c0[i * p.n + j] = bias[j];
        std::vector<double> first;
        for (int threads : {1, 2, 3}) {
            tg_set_num_threads(threads);
            Buffers buf;
            tg_gemm_args a = buf.args(p);
            std::fill(buf.cf.begin(), buf.cf.end(), NAN); // C's old values are not read
            tg_gemm_f32_bias(a.trans_a, a.trans_b, a.m, a.n, a.k, (const float *)a.a, a.lda, (const float *)a.b, a.ldb,
                             bias.data(), (float *)a.c, a.ldc);
            if (threads == 1) {
                first = buf.result(p);
                EXPECT_TRUE(matches_reference(p, first)) << p.m << " x " << p.n << " x " << p.k;
            } else if (gemm_split_keeps_bits() || (tg_onednn_available() && p.m * p.n * p.k > 1000000)) {
                EXPECT_EQ(buf.result(p), first) << p.m << " x " << p.n << " on " << threads << " threads";
            } else {
                EXPECT_TRUE(close_as_gemm(buf.result(p), first)) << p.m << " x " << p.n << " on " << threads;
            }
        }
    }
}

// tg_gemm_args.a_col_sums (linear's bias gradient beside dx = g w): op(A)'s columns summed
// over its rows, per block of oneDNN's rows then in block order, or in one pass elsewhere;
// against float64 sums and bit for bit on 1, 2 and 3 threads, alone and in tg_gemm_many.
TEST_F(GemmManyTest, ColumnSumsOfABesideTheProduct) {
    std::mt19937 rng(9);
    for (Product p : {random_product(false, false, false, 1000, 128, 384, 1, 0, rng),   // oneDNN's blocks of rows
                      random_product(false, true, false, 700, 64, 200, 1, 0, rng),      // A transposed
                      random_product(false, false, false, 40, 30, 20, 1, 0, rng),       // small: one pass
                      random_product(false, false, false, 100, 2000, 64, 1, 0, rng)}) { // blocks of columns
        std::vector<double> want(p.k, 0.0);
        for (int64_t i = 0; i < p.m; i++)
            for (int64_t q = 0; q < p.k; q++) want[q] += p.ta ? p.a[q * p.m + i] : p.a[i * p.k + q];
        std::vector<float> first;
        for (int threads : {1, 2, 3})
            for (int many = 0; many < 2; many++) {
                tg_set_num_threads(threads);
                Buffers buf, other;
                std::vector<float> sums(p.k, NAN);
                tg_gemm_args a[2] = {buf.args(p), other.args(p)};
                a[0].a_col_sums = sums.data();
                tg_gemm_many(a, many ? 2 : 1);
                EXPECT_TRUE(matches_reference(p, buf.result(p)));
                if (first.empty()) {
                    first = sums;
                    for (int64_t q = 0; q < p.k; q++)
                        EXPECT_NEAR(sums[q], want[q], 1e-5 * (double)p.m) << "column " << q << " of " << p.m << " rows";
                }
                EXPECT_EQ(sums, first) << p.m << " x " << p.k << " on " << threads << " threads, many " << many;
            }
    }
}

// oneDNN runs each product with one OpenMP thread and leaves the caller's OpenMP thread
// count as it was (a program's own OpenMP code keeps its threads).
TEST_F(GemmManyTest, OneDnnLeavesTheCallersOpenMpThreadCount) {
    if (!tg_onednn_available()) GTEST_SKIP() << "oneDNN (libdnnl2) is not installed";
    std::mt19937 rng(10);
    Product p = random_product(false, false, true, 512, 384, 128, 1, 0, rng);
    Buffers buf;
    tg_gemm_args a = buf.args(p);
    tg_set_num_threads(1); // the products on this thread
    tg_gemm_many(&a, 1);   // oneDNN (and its libgomp) loaded
    void *gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!gomp) GTEST_SKIP() << "this oneDNN does not use libgomp";
    auto set = (void (*)(int))dlsym(gomp, "omp_set_num_threads");
    auto get = (int (*)(void))dlsym(gomp, "omp_get_max_threads");
    ASSERT_TRUE(set && get);
    int after = 0;
    std::thread fresh([&] { // a thread's first product (an earlier version set its count to 1 for good)
        set(3);
        tg_gemm_many(&a, 1);
        after = get();
    });
    fresh.join();
    EXPECT_EQ(after, 3);
    EXPECT_TRUE(matches_reference(p, buf.result(p)));
    dlclose(gomp);
}

} // namespace
