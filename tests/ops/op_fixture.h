// Checking an op against tests/fixtures/matmul_reduce.txt (written by
// tests/fixtures/gen_matmul_reduce.py): forward values, a second output when the case
// has one, and the input gradients of sum(out * w).
#ifndef TG_TESTS_OPS_OP_FIXTURE_H
#define TG_TESTS_OPS_OP_FIXTURE_H

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"

// The op under test: builds the output from the inputs; may set *second (a new
// reference) for ops with two outputs.
using FixtureOp = std::function<tg_tensor *(const std::vector<tg_tensor *> &in, tg_tensor **second)>;

inline const std::map<std::string, FixtureTensor> &matmul_reduce_fixtures() {
    static const std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/matmul_reduce.txt");
    return fx;
}

// Float inputs are made in `dtype` and require grad; int64 fixtures stay int64.
// `fx` is a loaded fixture file in this format (e.g. elementwise.txt).
inline void check_fixture_in(const std::map<std::string, FixtureTensor> &fx, const std::string &name, tg_dtype dtype,
                             const FixtureOp &op) {
    SCOPED_TRACE("fixture case " + name + " in " + tg_dtype_name(dtype));
    double atol = dtype == TG_FLOAT32 ? 1e-5 : 1e-10, rtol = dtype == TG_FLOAT32 ? 1e-4 : 1e-10;
    TG_SCOPE {
        std::vector<tg_tensor *> in;
        for (int i = 0;; i++) {
            auto it = fx.find(name + "_in" + std::to_string(i));
            if (it == fx.end()) break;
            bool is_float = it->second.dtype == "float64";
            in.push_back(it->second.make(is_float ? dtype : TG_INT64, is_float));
        }
        ASSERT_FALSE(in.empty()) << "no inputs in the fixture file";
        tg_tensor *second = nullptr;
        tg_tensor *out = op(in, &second);
        ASSERT_NE(out, nullptr) << tg_last_error();
        const FixtureTensor &want = fx.at(name + "_out");
        EXPECT_EQ(dims(out), want.shape);
        EXPECT_TRUE(tensor_near(out, want.data, atol, rtol)) << "forward";
        auto second_it = fx.find(name + "_out1");
        if (second_it != fx.end()) {
            ASSERT_NE(second, nullptr);
            EXPECT_EQ(dims(second), second_it->second.shape);
            EXPECT_TRUE(tensor_near(second, second_it->second.data, 0)) << "second output";
        }
        auto w_it = fx.find(name + "_w");
        if (w_it != fx.end()) {
            tg_tensor *loss = tg_sum(tg_mul(out, w_it->second.make(dtype)));
            ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
            for (size_t i = 0; i < in.size(); i++) {
                auto g_it = fx.find(name + "_grad" + std::to_string(i));
                if (g_it == fx.end()) continue;
                tg_tensor *g = tg_grad(in[i]);
                if (!g) {
                    for (double v : g_it->second.data) EXPECT_EQ(v, 0.0) << "input " << i << " got no gradient";
                    continue;
                }
                EXPECT_EQ(dims(g), g_it->second.shape);
                EXPECT_TRUE(tensor_near(g, g_it->second.data, atol, rtol)) << "gradient of input " << i;
            }
        }
    }
}

inline void check_fixture(const std::string &name, tg_dtype dtype, const FixtureOp &op) {
    check_fixture_in(matmul_reduce_fixtures(), name, dtype, op);
}

// Runs check_fixture in float32 and float64.
inline void check_fixture_both(const std::string &name, const FixtureOp &op) {
    check_fixture(name, TG_FLOAT32, op);
    check_fixture(name, TG_FLOAT64, op);
}

// A float64 tensor of `shape` with fixed pseudo-random values in [-1, 1) (requires grad).
inline tg_tensor *rand64(tg_shape shape, unsigned seed, bool requires_grad = true) {
    std::vector<double> v((size_t)tg_shape_numel(shape));
    unsigned s = seed * 2654435761u + 12345u;
    for (double &x : v) {
        s = s * 1664525u + 1013904223u;
        x = (double)(s >> 8) / (double)(1u << 24) * 2 - 1;
    }
    return tensor_f64(v, shape, requires_grad);
}

#define EXPECT_GRADCHECK(fn, ...)                                                        \
    do {                                                                                 \
        tg_tensor *gc_in_[] = {__VA_ARGS__};                                             \
        int gc_n_ = (int)(sizeof gc_in_ / sizeof gc_in_[0]);                             \
        EXPECT_EQ(tg_gradcheck((fn), gc_n_, gc_in_, nullptr), TG_OK) << tg_last_error(); \
    } while (0)
#define EXPECT_GRADGRADCHECK(fn, ...)                                                        \
    do {                                                                                     \
        tg_tensor *gc_in_[] = {__VA_ARGS__};                                                 \
        int gc_n_ = (int)(sizeof gc_in_ / sizeof gc_in_[0]);                                 \
        EXPECT_EQ(tg_gradgradcheck((fn), gc_n_, gc_in_, nullptr), TG_OK) << tg_last_error(); \
    } while (0)

#endif
