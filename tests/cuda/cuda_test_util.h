// Helpers of the CUDA suites: run one op on the CPU and on cuda:0 and compare the
// values and the gradients. Every test that touches a GPU starts with
//     if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
// so that a machine without a GPU reports it SKIPPED, never PASSED.
#ifndef TG_TESTS_CUDA_CUDA_TEST_UTIL_H
#define TG_TESTS_CUDA_CUDA_TEST_UTIL_H

#include <functional>
#include <random>
#include <vector>

#include "test_util.h"

inline tg_tensor *on_cuda(tg_tensor *t) { return tg_tensor_to(t, tg_cuda(0)); }

// Uniform values in [lo, hi) of `dtype` on the CPU, from a fixed seed (independent
// of tapegrad's own generator).
inline tg_tensor *random_cpu(tg_shape shape, tg_dtype dtype = TG_FLOAT32, unsigned seed = 1, double lo = -2,
                             double hi = 2) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<double> v((size_t)tg_shape_numel(shape));
    for (double &x : v) x = dist(gen);
    tg_scope_begin();
    tg_tensor *d = tg_from_data(v.data(), shape, tg_opts{TG_FLOAT64, TG_CPU, false});
    tg_tensor *r = tg_scope_return(tg_cast(d, dtype));
    tg_scope_end();
    return r;
}

// Element-by-element comparison of two tensors (any devices, dtypes, strides).
inline ::testing::AssertionResult same_values(tg_tensor *cpu, tg_tensor *cuda, double atol, double rtol) {
    if (!cpu) return ::testing::AssertionFailure() << "CPU result is NULL: " << tg_last_error();
    if (!cuda) return ::testing::AssertionFailure() << "CUDA result is NULL: " << tg_last_error();
    if (dims(cpu) != dims(cuda)) return ::testing::AssertionFailure() << "shapes differ";
    if (tg_dtype_of(cpu) != tg_dtype_of(cuda)) return ::testing::AssertionFailure() << "dtypes differ";
    if (tg_device_of(cuda).kind != TG_DEVICE_CUDA) return ::testing::AssertionFailure() << "result is not on CUDA";
    return tensor_near(cuda, values(cpu), atol, rtol);
}

// A function of tensors, run once with CPU inputs and once with their CUDA copies.
using DeviceFn = std::function<tg_tensor *(const std::vector<tg_tensor *> &)>;

struct CompareOpts {
    double atol = 1e-5, rtol = 1e-5;
    bool grads = true; // also compare d(sum(out * w))/d(input) for floating inputs
};

// Runs f on CPU leaves made from `inputs` and on cuda:0 copies; compares outputs
// and (opts.grads) the inputs' gradients under one random weighting of the output.
inline ::testing::AssertionResult compare_devices(const DeviceFn &f, const std::vector<tg_tensor *> &inputs,
                                                  CompareOpts opts = CompareOpts()) {
    std::vector<tg_tensor *> cpu, gpu;
    for (tg_tensor *t : inputs) {
        bool grad = opts.grads && tg_dtype_is_floating(tg_dtype_of(t));
        tg_tensor *c = tg_clone(t);
        tg_tensor *g = on_cuda(t);
        if (!c || !g) return ::testing::AssertionFailure() << "copy failed: " << tg_last_error();
        if (grad) {
            tg_requires_grad_(c, true);
            tg_requires_grad_(g, true);
        }
        cpu.push_back(c);
        gpu.push_back(g);
    }
    tg_tensor *y_cpu = f(cpu), *y_gpu = f(gpu);
    ::testing::AssertionResult r = same_values(y_cpu, y_gpu, opts.atol, opts.rtol);
    if (!r || !opts.grads || !tg_requires_grad(y_cpu)) return r;
    tg_tensor *w = random_cpu(tg_shape_of(y_cpu), tg_dtype_of(y_cpu), 7);
    if (tg_backward(tg_sum(tg_mul(y_cpu, w))) != TG_OK)
        return ::testing::AssertionFailure() << "CPU backward failed: " << tg_last_error();
    if (tg_backward(tg_sum(tg_mul(y_gpu, on_cuda(w)))) != TG_OK)
        return ::testing::AssertionFailure() << "CUDA backward failed: " << tg_last_error();
    for (size_t i = 0; i < cpu.size(); i++) {
        if (!tg_requires_grad(cpu[i])) continue;
        tg_tensor *gc = tg_grad(cpu[i]), *gg = tg_grad(gpu[i]);
        if (!gc && !gg) continue;
        ::testing::AssertionResult gr = same_values(gc, gg, opts.atol * 10, opts.rtol * 10);
        if (!gr) return ::testing::AssertionFailure() << "gradient of input " << i << ": " << gr.message();
    }
    return ::testing::AssertionSuccess();
}

// x as a non-contiguous view with the same values: stored transposed, viewed back.
inline tg_tensor *non_contiguous(tg_tensor *x) {
    if (tg_ndim(x) == 0) return x;
    if (tg_ndim(x) == 1) { // every other element of [n, 2]
        tg_tensor *pairs = tg_contiguous(tg_expand(tg_unsqueeze(x, 1), TG_SHAPE(tg_size(x, 0), 2)));
        return tg_squeeze(tg_narrow(pairs, 1, 0, 1), 1);
    }
    int n = tg_ndim(x);
    tg_tensor *stored = tg_contiguous(tg_transpose(x, n - 2, n - 1));
    return tg_transpose(stored, n - 2, n - 1);
}

#endif
