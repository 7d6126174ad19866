// tg_matmul and tg_linear: PyTorch fixture values and gradients, gradcheck (first and
// second order) on plain, broadcast and non-contiguous operands, and the error paths.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/parallel.h"
#include "ops/cpu/blas.h"
#include "ops/cpu/onednn_gemm.h"
#include "tests/ops/op_fixture.h"

namespace {

tg_tensor *matmul2(const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_matmul(in[0], in[1]); }

tg_tensor *gc_matmul(tg_tensor *const *in, void *) { return tg_matmul(in[0], in[1]); }
// a stored as [k, n], b as [m, k]: both operands are transposed views.
tg_tensor *gc_matmul_transposed(tg_tensor *const *in, void *) {
    return tg_matmul(tg_transpose(in[0], 0, 1), tg_transpose(in[1], 0, 1));
}
// b narrowed along its rows and columns: a strided view BLAS cannot take directly.
tg_tensor *gc_matmul_narrowed(tg_tensor *const *in, void *) {
    return tg_matmul(in[0], tg_narrow(tg_narrow(in[1], 1, 1, 3), 0, 0, 4));
}
tg_tensor *gc_linear(tg_tensor *const *in, void *) { return tg_linear(in[0], in[1], in[2]); }
tg_tensor *gc_linear_no_bias(tg_tensor *const *in, void *) { return tg_linear(in[0], in[1], nullptr); }

} // namespace

TEST_F(TgTest, MatmulMatchesPyTorch) {
    for (const char *name : {"mm", "bmm_broadcast", "bmm_broadcast2", "mv", "vm", "dot", "vbm", "bmv"})
        check_fixture_both(name, matmul2);
}

TEST_F(TgTest, MatmulTransposedViewsMatchPyTorch) {
    check_fixture_both("mm_transposed", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_matmul(tg_transpose(in[0], 0, 1), tg_transpose(in[1], 0, 1));
    });
}

TEST_F(TgTest, LinearMatchesPyTorch) {
    auto with_bias = [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_linear(in[0], in[1], in[2]); };
    check_fixture_both("linear", with_bias);
    check_fixture_both("linear_1d", with_bias);
    check_fixture_both("linear_nobias", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_linear(in[0], in[1], nullptr);
    });
}

TEST_F(TgTest, MatmulShapes) {
    tg_tensor *a = tg_ones(TG_SHAPE(2, 1, 3, 4), tg_opts{}), *b = tg_ones(TG_SHAPE(5, 4, 6), tg_opts{});
    EXPECT_EQ(dims(tg_matmul(a, b)), (std::vector<int64_t>{2, 5, 3, 6}));
    EXPECT_EQ(dims(tg_matmul(tg_ones(TG_SHAPE(4), tg_opts{}), b)), (std::vector<int64_t>{5, 6}));
    EXPECT_EQ(dims(tg_matmul(a, tg_ones(TG_SHAPE(4), tg_opts{}))), (std::vector<int64_t>{2, 1, 3}));
    // k == 0 gives zeros, as in PyTorch.
    tg_tensor *z = tg_matmul(tg_ones(TG_SHAPE(2, 0), tg_opts{}), tg_ones(TG_SHAPE(0, 3), tg_opts{}));
    EXPECT_TRUE(tensor_near(z, std::vector<double>(6, 0.0), 0));
}

TEST_F(TgTest, MatmulGradcheck) {
    EXPECT_GRADCHECK(gc_matmul, rand64(TG_SHAPE(3, 4), 1), rand64(TG_SHAPE(4, 2), 2));
    EXPECT_GRADCHECK(gc_matmul, rand64(TG_SHAPE(2, 1, 3, 4), 3), rand64(TG_SHAPE(3, 4, 2), 4)); // broadcast batch
    EXPECT_GRADCHECK(gc_matmul, rand64(TG_SHAPE(4), 5), rand64(TG_SHAPE(2, 4, 3), 6));          // 1-D left
    EXPECT_GRADCHECK(gc_matmul, rand64(TG_SHAPE(2, 3, 4), 7), rand64(TG_SHAPE(4), 8));          // 1-D right
    EXPECT_GRADCHECK(gc_matmul_transposed, rand64(TG_SHAPE(4, 3), 9), rand64(TG_SHAPE(2, 4), 10));
    EXPECT_GRADCHECK(gc_matmul_narrowed, rand64(TG_SHAPE(2, 4), 11), rand64(TG_SHAPE(5, 5), 12));
}

TEST_F(TgTest, MatmulGradgradcheck) {
    EXPECT_GRADGRADCHECK(gc_matmul, rand64(TG_SHAPE(3, 4), 1), rand64(TG_SHAPE(4, 2), 2));
    EXPECT_GRADGRADCHECK(gc_matmul, rand64(TG_SHAPE(2, 3, 4), 3), rand64(TG_SHAPE(4, 2), 4));
    EXPECT_GRADGRADCHECK(gc_matmul_transposed, rand64(TG_SHAPE(4, 3), 9), rand64(TG_SHAPE(2, 4), 10));
}

TEST_F(TgTest, LinearGradcheck) {
    EXPECT_GRADCHECK(gc_linear, rand64(TG_SHAPE(2, 3, 4), 1), rand64(TG_SHAPE(5, 4), 2), rand64(TG_SHAPE(5), 3));
    // A transposed (non-contiguous) input.
    EXPECT_GRADCHECK(
        [](tg_tensor *const *in, void *) -> tg_tensor * { return tg_linear(tg_transpose(in[0], 0, 1), in[1], in[2]); },
        rand64(TG_SHAPE(4, 3), 4), rand64(TG_SHAPE(2, 4), 5), rand64(TG_SHAPE(2), 6));
    EXPECT_GRADCHECK(gc_linear_no_bias, rand64(TG_SHAPE(4), 7), rand64(TG_SHAPE(3, 4), 8));
    EXPECT_GRADGRADCHECK(gc_linear, rand64(TG_SHAPE(2, 3), 1), rand64(TG_SHAPE(4, 3), 2), rand64(TG_SHAPE(4), 3));
}

TEST_F(TgTest, MatmulLargeBatchedMatchesLoop) {
    // The folded single-GEMM path (b shared by the batch) and the per-batch path agree.
    tg_tensor *a = rand64(TG_SHAPE(3, 5, 7), 1, false), *b = rand64(TG_SHAPE(7, 2), 2, false);
    tg_tensor *folded = tg_matmul(a, b);
    tg_tensor *per_batch = tg_matmul(a, tg_expand(b, TG_SHAPE(3, 7, 2)));
    EXPECT_TRUE(tensor_near(folded, values(per_batch), 1e-12));
}

TEST_F(TgTest, MatmulErrors) {
    tg_tensor *a = tg_ones(TG_SHAPE(64, 784), tg_opts{}), *b = tg_ones(TG_SHAPE(512, 10), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_matmul(a, b), nullptr);
    EXPECT_ERROR_CONTAINS("tg_matmul: cannot multiply [64, 784] by [512, 10]: inner sizes 784 != 512");
    tg_clear_error();
    EXPECT_EQ(tg_matmul(tg_ones(TG_SCALAR_SHAPE, tg_opts{}), b), nullptr);
    EXPECT_ERROR_CONTAINS("at least 1 dim");
    tg_clear_error();
    EXPECT_EQ(tg_matmul(tg_ones(TG_SHAPE(2, 3), tg_opts{}), tg_ones(TG_SHAPE(3, 2), tg_opts{TG_FLOAT64})), nullptr);
    EXPECT_ERROR_CONTAINS("float32 and float64");
    tg_clear_error();
    EXPECT_EQ(tg_matmul(tg_ones(TG_SHAPE(2, 3), tg_opts{TG_INT64}), tg_ones(TG_SHAPE(3, 2), tg_opts{TG_INT64})),
              nullptr);
    EXPECT_ERROR_CONTAINS("expected float32, float64, float16 or bfloat16 tensors, got int64");
    tg_clear_error();
    EXPECT_EQ(tg_matmul(tg_ones(TG_SHAPE(2, 2, 3), tg_opts{}), tg_ones(TG_SHAPE(3, 3, 2), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("batch dims of [2, 2, 3] and [3, 3, 2] cannot be broadcast");
    tg_clear_error();
    EXPECT_EQ(tg_matmul(nullptr, b), nullptr);
    EXPECT_ERROR_CONTAINS("tg_matmul: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_matmul(a, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_matmul: input 1 is NULL");
}

TEST_F(TgTest, LinearErrors) {
    tg_tensor *x = tg_ones(TG_SHAPE(8, 4), tg_opts{}), *w = tg_ones(TG_SHAPE(3, 4), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_linear(x, tg_ones(TG_SHAPE(4), tg_opts{}), nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_linear: weight must be 2-D");
    tg_clear_error();
    EXPECT_EQ(tg_linear(x, tg_ones(TG_SHAPE(3, 5), tg_opts{}), nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("in_features 4 != 5");
    tg_clear_error();
    EXPECT_EQ(tg_linear(x, w, tg_ones(TG_SHAPE(4), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_linear: bias must be [3] for weight [3, 4], got [4]");
    tg_clear_error();
    EXPECT_EQ(tg_linear(x, w, tg_ones(TG_SHAPE(3), tg_opts{TG_FLOAT64})), nullptr);
    EXPECT_ERROR_CONTAINS("float32 and float64");
    tg_clear_error();
    EXPECT_EQ(tg_linear(tg_ones(TG_SCALAR_SHAPE, tg_opts{}), w, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("at least 1 dim");
    tg_clear_error();
    EXPECT_EQ(tg_linear(nullptr, w, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_linear: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_linear(x, nullptr, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_linear: input 1 is NULL");
}

// OpenBLAS 0.3.21 gives a CPU model newer than its table (an Emerald Rapids Xeon) its SSE3
// "Prescott" kernels; ops/cpu/blas.c then loads it again with the core the CPU's features
// call for. The user's OPENBLAS_CORETYPE is left alone. The contract is AVX2 kernels on a
// CPU with AVX2 + FMA: OpenBLAS's own choice stands where it has them (its Zen core on an
// AVX-512 Zen would be kept).
TEST_F(TgTest, OpenBlasRunsVectorKernelsTheCpuHas) {
    const char *core = tg_blas_core_name();
    ASSERT_NE(core, nullptr) << tg_last_error();
    if (getenv("OPENBLAS_CORETYPE")) GTEST_SKIP() << "OPENBLAS_CORETYPE is set: the user's choice";
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2 + FMA";
    std::string name = core;
    EXPECT_TRUE(name == "Haswell" || name == "Zen" || name == "SkylakeX" || name == "Cooperlake" ||
                name == "SapphireRapids" || name == "Excavator")
        << "OpenBLAS runs its " << name << " kernels on a CPU with AVX2 and FMA";
}

#ifndef __SANITIZE_ADDRESS__ // AddressSanitizer reserves terabytes of shadow: no address-space limit applies
/* Under `ulimit -v`, a large product on a thread whose earlier products were small must
 * fail with the out-of-memory error, not hang: on the AVX-512 cores OpenBLAS's
 * small-matrix kernels take no work buffer, so the large one is the thread's first to
 * map one (lesson 03 hung in CI at 700 MB). Run in a child under an alarm. */
static long address_space_bytes() {
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld", &pages) != 1) pages = 0;
    if (f) fclose(f);
    return pages * sysconf(_SC_PAGESIZE);
}

TEST_F(TgTest, OpenBlasLargeProductAfterSmallOnesFailsUnderAMemoryLimit) {
    ASSERT_NE(tg_blas_core_name(), nullptr) << tg_last_error();
    std::vector<float> a(512 * 512, 1.0f), b(512 * 512, 1.0f), c(512 * 512);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        alarm(20); /* a hang ends as SIGALRM */
        if (!tg_blas_gemm(false, false, false, 32, 32, 32, 1.0, a.data(), 32, b.data(), 32, 0.0, c.data(), 32))
            _exit(2);
        if (c[0] != 32.0f) _exit(3);
        struct rlimit limit = {(rlim_t)address_space_bytes() + (64 << 20), RLIM_INFINITY};
        if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(4);
        bool ran =
            tg_blas_gemm(false, false, false, 512, 512, 512, 1.0, a.data(), 512, b.data(), 512, 0.0, c.data(), 512);
        if (ran) _exit(5);                          /* no room for a 128 MiB buffer under this limit */
        const char *why = tg_kernel_failure_take(); /* the op that called the product reports it */
        _exit(why && strstr(why, "out of memory") ? 0 : 6);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status)
                                   << (WTERMSIG(status) == SIGALRM ? " (it hung in OpenBLAS)" : "");
    EXPECT_EQ(WEXITSTATUS(status), 0) << "2: small product failed, 3: wrong value, 4: setrlimit failed, "
                                         "5: the large product ran, 6: the error is not out of memory";
}

/* oneDNN's products under `ulimit -v`: with no address space left, the product either fails
 * with the out-of-memory error or runs in memory already mapped (no retry loop, no crash);
 * with room it gives the right values. Its kernels are made by a first product before the
 * limit, as in a training run. */
TEST_F(TgTest, OneDnnProductUnderAMemoryLimitFailsOrRunsRight) {
    if (!tg_onednn_available()) GTEST_SKIP() << "oneDNN (libdnnl2) is not installed";
    const int n = 1024;
    std::vector<float> a((size_t)n * n, 1.0f), b((size_t)n * n, 1.0f), c((size_t)n * n);
    for (int room_mib : {0, 256}) {
        pid_t child = fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            alarm(20);
            if (!tg_onednn_sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n)) _exit(2);
            struct rlimit limit = {(rlim_t)address_space_bytes() + ((rlim_t)room_mib << 20), RLIM_INFINITY};
            if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(4);
            std::fill(c.begin(), c.end(), 0.0f);
            bool ran = tg_onednn_sgemm(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
            if (ran) _exit(c[0] == (float)n && c[(size_t)n * n - 1] == (float)n ? 0 : 3);
            const char *why = tg_kernel_failure_take();
            _exit(room_mib == 0 && why && strstr(why, "out of memory") ? 0 : 6);
        }
        int status = 0;
        ASSERT_EQ(waitpid(child, &status, 0), child);
        ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status);
        EXPECT_EQ(WEXITSTATUS(status), 0) << "room " << room_mib << " MiB; 2: the first product failed, 3: wrong "
                                          << "values, 4: setrlimit failed, 6: failed without room to spare or not "
                                          << "as out of memory";
    }
}

/* oneDNN's first product makes its JIT kernels (about 6 MB) under a std::call_once, where a
 * failed allocation throws std::bad_alloc that nothing catches: the process aborted when the
 * first large product came under `ulimit -v` (ulimit_test, 1 run in 6 at 400000 KiB). Now
 * loading makes that first call, and leaves oneDNN unused when there is no room: with 3 MiB
 * of address space left after oneDNN's library is mapped, its first use must not abort. A
 * death test, so that the child re-runs this test alone with oneDNN not yet used. */
static void first_onednn_use_with_3_mib_of_room() {
    const int n = 512;
    std::vector<float> a((size_t)n * n, 1.0f), b((size_t)n * n, 1.0f), c((size_t)n * n);
    struct rlimit limit = {(rlim_t)address_space_bytes() + ((rlim_t)3 << 20), RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(4);
    if (!tg_onednn_available()) _exit(0); /* refused for want of room: products stay on OpenBLAS */
    if (tg_onednn_sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n))
        _exit(c[0] == (float)n && c[(size_t)n * n - 1] == (float)n ? 0 : 3);
    const char *why = tg_kernel_failure_take();
    _exit(why && strstr(why, "out of memory") ? 0 : 6);
}

TEST(OneDnnLoadTest, FirstUseWithLittleAddressSpaceLeftDoesNotAbort) {
    void *library = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!library) library = dlopen("libdnnl.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!library) GTEST_SKIP() << "oneDNN (libdnnl2) is not installed";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(first_onednn_use_with_3_mib_of_room(), testing::ExitedWithCode(0), "")
        << "3: wrong values, 4: setrlimit failed, 6: failed but not as out of memory";
    dlclose(library);
}
#endif
