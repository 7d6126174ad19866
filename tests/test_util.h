// Helpers shared by the GoogleTest suites: a base fixture that checks for leaks,
// tensors from/to std::vector, and the PyTorch fixture reader (tests/fixtures/).
#ifndef TG_TESTS_TEST_UTIL_H
#define TG_TESTS_TEST_UTIL_H

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <unistd.h>
#include <map>
#include <string>
#include <vector>

// Without core/trace_macros.h's wrappers, so that a failing EXPECT_EQ(tg_f(x), ...)
// prints the call as written (tests/core/leak_trace_test.cc turns them on).
#define TG_NO_TRACE_MACROS
#include "tapegrad.h"

// Every test runs inside a scope and must leave no tensor, storage or graph node alive.
class TgTest : public ::testing::Test {
  protected:
    void SetUp() override {
        tg_clear_error();
        live_tensors_ = tg_live_tensors();
        live_storages_ = tg_live_storages();
        live_nodes_ = tg_live_graph_nodes();
        tg_scope_begin();
    }
    void TearDown() override {
        tg_scope_end();
        EXPECT_EQ(tg_scope_depth(), 0) << "a scope was left open";
        EXPECT_EQ(tg_live_tensors(), live_tensors_) << "tensors leaked";
        EXPECT_EQ(tg_live_storages(), live_storages_) << "storages leaked";
        EXPECT_EQ(tg_live_graph_nodes(), live_nodes_) << "graph nodes leaked";
    }
    long live_tensors_ = 0, live_storages_ = 0, live_nodes_ = 0;
};

// TgTest with a fresh temporary directory in dir_, removed after the test.
class TgTempDirTest : public TgTest {
  protected:
    void SetUp() override {
        TgTest::SetUp();
        std::string tmpl = ::testing::TempDir() + "/tapegrad_XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        ASSERT_NE(mkdtemp(buf.data()), nullptr);
        dir_ = buf.data();
    }
    void TearDown() override {
        std::string cmd = "rm -rf '" + dir_ + "'";
        (void)!system(cmd.c_str());
        TgTest::TearDown();
    }
    std::string dir_;
};

// Whether a float32 GEMM split over threads gives the bits of the whole product: where
// the CPU has AVX-512, ops/cpu/gemm.c's own kernels run the split shapes and OpenBLAS's blocks
// are cut where they give the same bits; on AVX2-only CPUs OpenBLAS's Haswell/Zen kernels
// give other bits for a block than for the whole (measured: 64 x 300 x 200 cut at column
// 160 differs in 433 of 19,200 elements), so there the products agree to rounding only.
inline bool gemm_split_keeps_bits() {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

// a and b equal to float32 rounding of a k-long sum (relative to the larger magnitude).
inline ::testing::AssertionResult close_as_gemm(const std::vector<double> &a, const std::vector<double> &b) {
    if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " and " << b.size();
    for (size_t i = 0; i < a.size(); i++)
        if (!(std::fabs(a[i] - b[i]) <= 1e-4 * std::fmax(1.0, std::fmax(std::fabs(a[i]), std::fabs(b[i])))))
            return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " and " << b[i];
    return ::testing::AssertionSuccess();
}

inline tg_tensor *tensor_f32(std::vector<float> v, tg_shape shape, bool requires_grad = false) {
    return tg_from_data(v.data(), shape, tg_opts{TG_FLOAT32, TG_CPU, requires_grad});
}
inline tg_tensor *tensor_f64(std::vector<double> v, tg_shape shape, bool requires_grad = false) {
    return tg_from_data(v.data(), shape, tg_opts{TG_FLOAT64, TG_CPU, requires_grad});
}
inline tg_tensor *tensor_i64(std::vector<int64_t> v, tg_shape shape) {
    return tg_from_data(v.data(), shape, tg_opts{TG_INT64, TG_CPU, false});
}

// The elements in logical order, as doubles (any dtype, device or strides).
inline std::vector<double> values(tg_tensor *t) {
    std::vector<double> out;
    if (!t) return out;
    tg_scope_begin();
    tg_tensor *d = tg_cast(t, TG_FLOAT64);
    out.resize((size_t)tg_numel(t));
    if (d) tg_copy_to_host(d, out.data(), out.size() * sizeof(double));
    tg_scope_end();
    return out;
}

inline ::testing::AssertionResult tensor_near(tg_tensor *t, const std::vector<double> &expected, double atol,
                                              double rtol = 0) {
    if (!t) return ::testing::AssertionFailure() << "tensor is NULL: " << tg_last_error();
    std::vector<double> v = values(t);
    if (v.size() != expected.size())
        return ::testing::AssertionFailure() << "size " << v.size() << " != expected " << expected.size();
    for (size_t i = 0; i < v.size(); i++) {
        double tol = atol + rtol * std::fabs(expected[i]);
        bool both_nan = std::isnan(v[i]) && std::isnan(expected[i]);
        bool equal = v[i] == expected[i]; /* also infinities of one sign, whose difference is NaN */
        if (!both_nan && !equal && !(std::fabs(v[i] - expected[i]) <= tol))
            return ::testing::AssertionFailure()
                   << "element " << i << ": " << v[i] << " != expected " << expected[i] << " (tol " << tol << ")";
    }
    return ::testing::AssertionSuccess();
}

// GradScaler's unscale_ on `device` (tests/optim/grad_scaler_test.cc and
// tests/cuda/lowp_kernels_test.cc): every element of every gradient is multiplied by
// 1/scale, Inf and NaN included, and a non-finite element is found wherever it is: the
// last element of a float32 gradient big enough to be split over threads, of a float64
// one, of a small float32 one; the step is skipped exactly when one was planted.
inline void expect_unscale_finds_inf_and_nan(tg_device device) {
    tg_opts f32 = {TG_FLOAT32, device, false}, f64 = {TG_FLOAT64, device, false};
    tg_tensor *p[3] = {tg_requires_grad_(tg_zeros(TG_SHAPE(100003), f32), true),
                       tg_requires_grad_(tg_zeros(TG_SHAPE(5), f64), true),
                       tg_requires_grad_(tg_zeros(TG_SHAPE(4), f32), true)};
    tg_optim *opt = tg_sgd_params(p, 3, tg_sgd_opts{.lr = 0.1});
    tg_grad_scaler_opts o{};
    o.init_scale = 1024;
    tg_grad_scaler *s = tg_grad_scaler_new(opt, o);
    // where: -1 none; else the parameter whose last gradient element becomes `bad`
    for (int where : {-1, 0, 1, 2})
        for (double bad : {INFINITY, NAN}) TG_SCOPE {
                tg_optim_zero_grad(opt);
                tg_tensor *loss = tg_add(tg_add(tg_sum(tg_mul_scalar(p[0], 3)), tg_sum(tg_mul_scalar(p[1], 3))),
                                         tg_sum(tg_mul_scalar(p[2], 3)));
                ASSERT_EQ(tg_backward(tg_grad_scaler_scale(s, loss)), TG_OK) << tg_last_error();
                if (where >= 0) TG_NO_GRAD {
                        tg_tensor *g = tg_grad(p[where]);
                        ASSERT_EQ(tg_copy_(tg_narrow(g, 0, tg_numel(g) - 1, 1), tg_full(TG_SHAPE(1), bad, f64)), TG_OK)
                            << tg_last_error();
                    }
                ASSERT_EQ(tg_grad_scaler_unscale_(s, opt), TG_OK) << tg_last_error();
                for (int i = 0; i < 3; i++) {
                    std::vector<double> g = values(tg_grad(p[i]));
                    for (size_t k = 0; k < g.size(); k++) {
                        bool is_bad = i == where && k == g.size() - 1;
                        if (!is_bad) ASSERT_EQ(g[k], 3.0) << "parameter " << i << " element " << k;
                        else if (std::isnan(bad)) ASSERT_TRUE(std::isnan(g[k]));
                        else ASSERT_EQ(g[k], INFINITY);
                    }
                }
                bool skipped = false;
                ASSERT_EQ(tg_grad_scaler_step(s, opt, &skipped), TG_OK) << tg_last_error();
                EXPECT_EQ(skipped, where >= 0) << where;
                tg_grad_scaler_update_to(s, 1024); // keep the scale for the next case
            }
    tg_grad_scaler_free(s);
    tg_optim_free(opt);
}

inline std::vector<int64_t> dims(tg_tensor *t) {
    tg_shape s = tg_shape_of(t);
    return std::vector<int64_t>(s.dims, s.dims + s.ndim);
}

// Asserts that the last call failed with a message containing `part`.
#define EXPECT_ERROR_CONTAINS(part)                                       \
    EXPECT_NE(std::string(tg_last_error()).find(part), std::string::npos) \
        << "error message was: \"" << tg_last_error() << "\"; expected it to contain \"" << (part) << "\""

// PyTorch fixtures: text files written by tests/fixtures/fixture_io.py.
//   tensor <name> <dtype> <ndim> <d0> ... <dn-1>
//   <values separated by spaces, %.17g>
struct FixtureTensor {
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<double> data;
    tg_shape tg() const {
        tg_shape s = {};
        for (int64_t d : shape) s.dims[s.ndim++] = d;
        return s;
    }
    // A tensor of this fixture's values in `dtype` (new reference in the current scope).
    tg_tensor *make(tg_dtype dt, bool requires_grad = false) const {
        tg_scope_begin();
        tg_tensor *d = tg_from_data(data.data(), tg(), tg_opts{TG_FLOAT64, TG_CPU, false});
        tg_tensor *c = tg_scope_return(tg_cast(d, dt));
        tg_scope_end();
        if (requires_grad) tg_requires_grad_(c, true);
        return c;
    }
};
std::map<std::string, FixtureTensor> load_fixtures(const std::string &path);
// fixtures[name]; a test failure naming it (and an empty tensor) when the file lacks it.
const FixtureTensor &fixture_tensor(const std::map<std::string, FixtureTensor> &fixtures, const std::string &name);

#endif
