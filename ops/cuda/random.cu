// CUDA kernels of ops/random.c: uniform and normal fills, dropout masks and Bernoulli
// draws from the CUDA generator (core/rng.h: Philox4x32-10 under (seed, offset)), in
// the layout ops/cuda/random.h fixes. Not cuRAND: a device copy of tg_philox, so that
// the host can compute what a kernel must draw (tests/cuda/nn_ops_test.cc). Products
// and sums use round-to-nearest intrinsics so that nvcc does not fuse them into FMAs
// the host reference does not use. Normal values go through log/sqrt/cos/sin, whose
// CUDA versions may differ from glibc's in the last bit of a double.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "ops/cuda/internal.h"
#include "ops/cuda/random.h"

// ============================ device helpers ============================

// core/rng.h tg_philox, on the device.
__device__ __forceinline__ void philox(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

__device__ __forceinline__ double uint_to_unit(uint32_t bits) { return ((double)bits + 1.0) / 4294967296.0; }

// a + (b - a) * u without contraction into an FMA.
__device__ __forceinline__ double lerp_rn(double a, double b, double u) {
    return __dadd_rn(a, __dmul_rn(__dsub_rn(b, a), u));
}

// The layout of ops/cuda/random.h for uniform (kind 0) and normal (kind 1).
template <typename T> __device__ __forceinline__ double draw(int kind, double a, double b, uint64_t seed,
                                                              uint64_t offset, int64_t i) {
    uint32_t w[4];
    if (kind == 0) {
        if (sizeof(T) == 8) {
            philox(seed, offset + (uint64_t)i / 2, w);
            int k = 2 * (int)(i % 2);
            double u = (double)((((uint64_t)w[k]) << 21) ^ (w[k + 1] >> 11)) * (1.0 / 9007199254740992.0);
            return lerp_rn(a, b, u);
        }
        philox(seed, offset + (uint64_t)i / 4, w);
        double u = (double)(w[i % 4] >> 8) * (1.0 / 16777216.0);
        double v = lerp_rn(a, b, u);
        if ((float)v >= (float)b && b > a) v = nextafterf((float)b, (float)a);
        return v;
    }
    philox(seed, offset + (uint64_t)i / 4, w);
    int k = (int)(i % 4) / 2 * 2;
    double r = sqrt(__dmul_rn(-2.0, log(uint_to_unit(w[k]))));
    double theta = __dmul_rn(6.283185307179586476925, uint_to_unit(w[k + 1]));
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
        philox(seed, offset + (uint64_t)i / 4, w);
        mask[i] = w[i % 4] < threshold ? (T)0 : scale;
    }
}

template <typename T>
__global__ void bernoulli_kernel(T *out, const T *probs, int64_t n, uint64_t seed, uint64_t offset) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t w[4];
        philox(seed, offset + (uint64_t)i / 4, w);
        out[i] = (double)w[i % 4] * (1.0 / 4294967296.0) < (double)probs[i] ? (T)1 : (T)0;
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
    TG_CUDA_DISPATCH_FLOATING(
        op, mask->dtype,
        dropout_mask_kernel<scalar_t><<<tg_cuda_blocks(n, tg_cuda_device_of(mask)), TG_CUDA_THREADS, 0, stream>>>(
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
    TG_CUDA_DISPATCH_FLOATING(
        op, out->dtype,
        bernoulli_kernel<scalar_t><<<tg_cuda_blocks(n, tg_cuda_device_of(out)), TG_CUDA_THREADS, 0, stream>>>(
            (scalar_t *)tg_elem_ptr(out), (const scalar_t *)tg_elem_ptr(probs), n, seed, offset));
    return tg_cuda_check_launch(op);
}
