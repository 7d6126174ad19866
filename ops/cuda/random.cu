// CUDA kernels of ops/random.c: uniform and normal fills, dropout masks and Bernoulli
// draws from the CUDA generator (core/rng.h: Philox4x32-10 under (seed, offset)), in
// the layout ops/cuda/random.h fixes. Not cuRAND: core/philox.h's tg_philox and
// bits-to-uniform maps, the code the host runs too, so that the host can compute what
// a kernel must draw (tests/cuda/nn_ops_test.cc). Products
// and sums use round-to-nearest intrinsics so that nvcc does not fuse them into FMAs
// the host reference does not use. Normal values go through log/sqrt/cos/sin, whose
// CUDA versions may differ from glibc's in the last bit of a double.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/philox.h"
#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "ops/cuda/random.h"

// ============================ device helpers ============================

// a + (b - a) * u without contraction into an FMA.
__device__ __forceinline__ double lerp_rn(double a, double b, double u) {
    return __dadd_rn(a, __dmul_rn(__dsub_rn(b, a), u));
}

// The layout of ops/cuda/random.h for uniform (kind 0) and normal (kind 1).
template <typename T>
__device__ __forceinline__ double draw(int kind, double a, double b, uint64_t seed, uint64_t offset, int64_t i) {
    uint32_t w[4];
    if (kind == 0) {
        if (sizeof(T) == 8) {
            tg_philox(seed, offset + (uint64_t)i / 2, w);
            int k = 2 * (int)(i % 2);
            return lerp_rn(a, b, tg_philox_unit_f64(w[k], w[k + 1]));
        }
        tg_philox(seed, offset + (uint64_t)i / 4, w);
        double v = lerp_rn(a, b, tg_philox_unit_f32(w[i % 4]));
        if ((float)v >= (float)b && b > a) v = nextafterf((float)b, (float)a);
        return v;
    }
    tg_philox(seed, offset + (uint64_t)i / 4, w);
    int k = (int)(i % 4) / 2 * 2;
    double r = sqrt(__dmul_rn(-2.0, log(tg_uint_to_unit(w[k]))));
    double theta = __dmul_rn(6.283185307179586476925, tg_uint_to_unit(w[k + 1]));
    return __dadd_rn(a, __dmul_rn(b, i % 2 == 0 ? __dmul_rn(r, cos(theta)) : __dmul_rn(r, sin(theta))));
}

// ============================ kernels ============================

// t [n] contiguous: element i = draw(i).
template <typename T>
__global__ void random_fill_kernel(T *t, int64_t n, int kind, double a, double b, uint64_t seed, uint64_t offset) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        t[i] = (T)draw<T>(kind, a, b, seed, offset, i);
}

template <typename T>
__global__ void dropout_mask_kernel(T *mask, int64_t n, uint64_t threshold, T scale, uint64_t seed, uint64_t offset) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t w[4];
        tg_philox(seed, offset + (uint64_t)i / 4, w);
        mask[i] = w[i % 4] < threshold ? (T)0 : scale;
    }
}

template <typename T>
__global__ void bernoulli_kernel(T *out, const T *probs, int64_t n, uint64_t seed, uint64_t offset) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t w[4];
        tg_philox(seed, offset + (uint64_t)i / 4, w);
        out[i] = tg_philox_unit_u32(w[i % 4]) < (double)probs[i] ? (T)1 : (T)0;
    }
}

// ============================ launchers ============================

template <typename T>
static tg_status launch_random_fill(tg_tensor *t, int kind, double a, double b, uint64_t seed, uint64_t offset,
                                    cudaStream_t stream) {
    int64_t n = t->shape.ndim ? tg_shape_numel(t->shape) : 1;
    if (n == 0) return TG_OK;
    random_fill_kernel<T><<<tg_cuda_blocks(n, tg_cuda_device_of(t)), TG_CUDA_THREADS, 0, stream>>>(
        (T *)tg_elem_ptr(t), n, kind, a, b, seed, offset);
    return tg_cuda_check_launch(kind == 0 ? "tg_uniform_" : "tg_normal_");
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_random_fill(tg_tensor *t, int kind, double a, double b, uint64_t seed, uint64_t offset) {
    const char *op = kind == 0 ? "tg_uniform_" : "tg_normal_";
    if (kind != 0 && kind != 1) return tg_error("tg_cuda_random_fill: unknown distribution %d", kind);
    if (!tg_is_contiguous(t)) return tg_error("%s: CUDA kernel expects a contiguous tensor", op);
    TG_CUDA_ENTER(op, t);
    TG_CUDA_DISPATCH_FLOATING(op, t->dtype, return launch_random_fill<scalar_t>(t, kind, a, b, seed, offset, stream));
    return TG_OK;
}

extern "C" tg_status tg_cuda_dropout_mask(tg_tensor *mask, uint64_t threshold, double scale, uint64_t seed,
                                          uint64_t offset) {
    const char *op = "tg_dropout";
    if (!tg_is_contiguous(mask)) return tg_error("%s: CUDA kernel expects a contiguous mask", op);
    int64_t n = mask->shape.ndim ? tg_shape_numel(mask->shape) : 1;
    if (n == 0) return TG_OK;
    TG_CUDA_ENTER(op, mask);
    TG_CUDA_DISPATCH_FLOATING(op, mask->dtype,
                              dropout_mask_kernel<scalar_t>
                              <<<tg_cuda_blocks(n, tg_cuda_device_of(mask)), TG_CUDA_THREADS, 0, stream>>>(
                                  (scalar_t *)tg_elem_ptr(mask), n, threshold, (scalar_t)scale, seed, offset));
    return tg_cuda_check_launch(op);
}

extern "C" tg_status tg_cuda_bernoulli(tg_tensor *out, tg_tensor *probs, uint64_t seed, uint64_t offset) {
    const char *op = "tg_bernoulli";
    if (!tg_is_contiguous(out) || !tg_is_contiguous(probs) || out->dtype != probs->dtype)
        return tg_error("%s: CUDA kernel expects contiguous output and probabilities of one dtype", op);
    int64_t n = out->shape.ndim ? tg_shape_numel(out->shape) : 1;
    if (n == 0) return TG_OK;
    TG_CUDA_ENTER(op, out);
    TG_CUDA_DISPATCH_FLOATING(op, out->dtype,
                              bernoulli_kernel<scalar_t>
                              <<<tg_cuda_blocks(n, tg_cuda_device_of(out)), TG_CUDA_THREADS, 0, stream>>>(
                                  (scalar_t *)tg_elem_ptr(out), (const scalar_t *)tg_elem_ptr(probs), n, seed, offset));
    return tg_cuda_check_launch(op);
}
