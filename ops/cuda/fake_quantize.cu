// CUDA kernel of ops/fake_quantize.c: fake quantisation per tensor or per channel,
// the formula of ops/fake_quantize_formula.h, one element per thread step.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "ops/cuda/fake_quantize.h"
#include "core/cuda/internal.h"

#include "ops/fake_quantize_formula.h"

template <typename T>
__global__ void fake_quantize_kernel(const T *x, T *out, bool *mask, int64_t n, float scale, int64_t zero_point,
                                     const float *scales, const int64_t *zero_points, int64_t inner, int64_t channels,
                                     int64_t quant_min, int64_t quant_max) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float s = scale;
        int64_t zp = zero_point;
        if (scales) {
            int64_t c = i / inner % channels;
            s = scales[c];
            zp = zero_points[c];
        }
        float inv = 1.0f / s;
        T y;
        bool inside;
        TG_FAKE_QUANTIZE(T, x[i], s, inv, zp, quant_min, quant_max, y, inside);
        out[i] = y;
        mask[i] = inside;
    }
}

extern "C" tg_status tg_cuda_fake_quantize(tg_tensor *out, tg_tensor *mask, tg_tensor *x, float scale,
                                           int64_t zero_point, tg_tensor *scales, tg_tensor *zero_points, int64_t inner,
                                           int64_t channels, int64_t quant_min, int64_t quant_max) {
    const char *op = scales ? "tg_fake_quantize_per_channel_affine" : "tg_fake_quantize_per_tensor_affine";
    int64_t n = tg_numel(x);
    if (n == 0) return TG_OK;
    TG_CUDA_ENTER(op, x);
    unsigned blocks = tg_cuda_blocks(n, tg_cuda_device_of(x));
    const float *sp = scales ? (const float *)tg_elem_ptr(scales) : NULL;
    const int64_t *zp = zero_points ? (const int64_t *)tg_elem_ptr(zero_points) : NULL;
    TG_CUDA_DISPATCH_FLOATING(op, x->dtype,
                              fake_quantize_kernel<scalar_t><<<blocks, TG_CUDA_THREADS, 0, stream>>>(
                                  (const scalar_t *)tg_elem_ptr(x), (scalar_t *)tg_elem_ptr(out),
                                  (bool *)tg_elem_ptr(mask), n, scale, zero_point, sp, zp, inner, channels, quant_min,
                                  quant_max));
    return tg_cuda_check_launch(op);
}
