// CUDA kernels of ops/pool.c: max pooling (forward with argmax indices, the
// scatter-add backward, the gather double backward) and average pooling (plain and
// adaptive; forward and backward). Windows, taps, divisors and the NaN rule are the
// CPU's own code (ops/pool_window.h). A thread per output element;
// the backwards add into grad_x atomically (windows may overlap), so float sums may
// differ from the CPU's in the last bits.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "ops/cuda/pool.h"
#include "ops/pool_window.h"

namespace {

__device__ __forceinline__ void pool_atomic_add(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void pool_atomic_add(double *p, double v) { atomicAdd(p, v); }

} // namespace

#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// ============================ kernels ============================

// x [planes, H, W] -> y, idx [planes, Ho, Wo]; idx flattened in H*W. Taps q.dh, q.dw apart.
template <typename T>
__global__ void max_pool_forward_kernel(tg_pool_geometry q, int64_t planes, const T *x, T *y, int64_t *idx) {
    GRID_STRIDE(e, planes * q.ho * q.wo) {
        int64_t ow = e % q.wo, oh = (e / q.wo) % q.ho, pl = e / (q.wo * q.ho);
        const T *src = x + pl * q.h * q.w;
        int64_t hs, he, ws, we, best;
        tg_pool_max_row_taps(&q, oh, &hs, &he);
        tg_pool_max_col_taps(&q, ow, &ws, &we);
        T m;
        TG_POOL_MAX_WINDOW(T, src, q.w, hs, he, ws, we, q.dh, q.dw, m, best);
        y[e] = m;
        idx[e] = best;
    }
}

// gx [planes, in_hw] (zeroed) += g [planes, out_hw] at idx.
template <typename T>
__global__ void max_pool_scatter_kernel(T *gx, const T *g, const int64_t *idx, int64_t planes, int64_t in_hw,
                                        int64_t out_hw) {
    GRID_STRIDE(e, planes * out_hw) pool_atomic_add(&gx[(e / out_hw) * in_hw + idx[e]], g[e]);
}

// y [planes, out_hw] = x [planes, in_hw] at idx.
template <typename T>
__global__ void max_pool_gather_kernel(T *y, const T *x, const int64_t *idx, int64_t planes, int64_t in_hw,
                                       int64_t out_hw) {
    GRID_STRIDE(e, planes * out_hw) y[e] = x[(e / out_hw) * in_hw + idx[e]];
}

// y [planes, Ho, Wo] = window sums / divisor of x [planes, H, W].
template <typename T> __global__ void avg_pool_forward_kernel(tg_pool_geometry q, int64_t planes, const T *x, T *y) {
    GRID_STRIDE(e, planes * q.ho * q.wo) {
        int64_t ow = e % q.wo, oh = (e / q.wo) % q.ho, pl = e / (q.wo * q.ho);
        const T *src = x + pl * q.h * q.w;
        int64_t hs, he, hd, ws, we, wd;
        tg_pool_avg_row(&q, oh, &hs, &he, &hd);
        tg_pool_avg_col(&q, ow, &ws, &we, &wd);
        T acc = 0;
        for (int64_t ih = hs; ih < he; ih++)
            for (int64_t iw = ws; iw < we; iw++) acc += src[ih * q.w + iw];
        y[e] = acc / (T)(hd * wd);
    }
}

// gx [planes, H, W] (zeroed) += each g [planes, Ho, Wo] / divisor over its window.
template <typename T> __global__ void avg_pool_backward_kernel(tg_pool_geometry q, int64_t planes, const T *g, T *gx) {
    GRID_STRIDE(e, planes * q.ho * q.wo) {
        int64_t ow = e % q.wo, oh = (e / q.wo) % q.ho, pl = e / (q.wo * q.ho);
        T *dst = gx + pl * q.h * q.w;
        int64_t hs, he, hd, ws, we, wd;
        tg_pool_avg_row(&q, oh, &hs, &he, &hd);
        tg_pool_avg_col(&q, ow, &ws, &we, &wd);
        T v = g[e] / (T)(hd * wd);
        for (int64_t ih = hs; ih < he; ih++)
            for (int64_t iw = ws; iw < we; iw++) pool_atomic_add(&dst[ih * q.w + iw], v);
    }
}

// ============================ launchers ============================

static tg_status check_planes(const char *op, tg_tensor *const *ts, int n) {
    for (int i = 0; i < n; i++)
        if (ts[i]->shape.ndim != 4 || !tg_is_contiguous(ts[i]))
            return tg_error("%s: CUDA kernel expects contiguous [N, C, H, W] tensors", op);
    return TG_OK;
}

static int64_t planes_of(const tg_tensor *t) { return t->shape.dims[0] * t->shape.dims[1]; }

static tg_status zero(tg_tensor *t, cudaStream_t stream, const char *op) {
    size_t bytes = (size_t)tg_numel(t) * tg_dtype_size(t->dtype);
    cudaError_t err = bytes ? cudaMemsetAsync(tg_elem_ptr(t), 0, bytes, stream) : cudaSuccess;
    return err == cudaSuccess ? TG_OK : tg_cuda_error(op, "cudaMemsetAsync", err);
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_max_pool2d_forward(tg_tensor *out, tg_tensor *indices, tg_tensor *x,
                                                const tg_pool_geometry *q) {
    const char *op = "tg_max_pool2d";
    tg_tensor *ts[3] = {out, indices, x};
    if (check_planes(op, ts, 3)) return TG_ERROR;
    int64_t planes = planes_of(x), n = planes * q->ho * q->wo;
    if (n == 0) return TG_OK;
    TG_CUDA_ENTER(op, x);
    unsigned blocks = tg_cuda_blocks(n, tg_cuda_device_of(x));
    TG_CUDA_DISPATCH_FLOATING(op, x->dtype,
                              max_pool_forward_kernel<scalar_t><<<blocks, TG_CUDA_THREADS, 0, stream>>>(
                                  *q, planes, (const scalar_t *)tg_elem_ptr(x), (scalar_t *)tg_elem_ptr(out),
                                  (int64_t *)tg_elem_ptr(indices)));
    return tg_cuda_check_launch(op);
}

extern "C" tg_status tg_cuda_max_pool2d_backward(tg_tensor *grad_x, tg_tensor *grad, tg_tensor *indices) {
    const char *op = "tg_max_pool2d backward";
    tg_tensor *ts[3] = {grad_x, grad, indices};
    if (check_planes(op, ts, 3)) return TG_ERROR;
    TG_CUDA_ENTER(op, grad_x);
    if (zero(grad_x, stream, op)) return TG_ERROR;
    int64_t planes = grad_x->shape.dims[0] * grad_x->shape.dims[1];
    int64_t in_hw = grad_x->shape.dims[2] * grad_x->shape.dims[3], out_hw = grad->shape.dims[2] * grad->shape.dims[3];
    if (planes * out_hw == 0) return TG_OK;
    unsigned blocks = tg_cuda_blocks(planes * out_hw, tg_cuda_device_of(grad_x));
    TG_CUDA_DISPATCH_FLOATING(op, grad_x->dtype,
                              max_pool_scatter_kernel<scalar_t><<<blocks, TG_CUDA_THREADS, 0, stream>>>(
                                  (scalar_t *)tg_elem_ptr(grad_x), (const scalar_t *)tg_elem_ptr(grad),
                                  (const int64_t *)tg_elem_ptr(indices), planes, in_hw, out_hw));
    return tg_cuda_check_launch(op);
}

extern "C" tg_status tg_cuda_max_pool2d_gather(tg_tensor *out, tg_tensor *x, tg_tensor *indices) {
    const char *op = "tg_max_pool2d double backward";
    tg_tensor *ts[3] = {out, x, indices};
    if (check_planes(op, ts, 3)) return TG_ERROR;
    int64_t planes = x->shape.dims[0] * x->shape.dims[1];
    int64_t in_hw = x->shape.dims[2] * x->shape.dims[3], out_hw = out->shape.dims[2] * out->shape.dims[3];
    if (planes * out_hw == 0) return TG_OK;
    TG_CUDA_ENTER(op, x);
    unsigned blocks = tg_cuda_blocks(planes * out_hw, tg_cuda_device_of(x));
    TG_CUDA_DISPATCH_FLOATING(op, x->dtype,
                              max_pool_gather_kernel<scalar_t><<<blocks, TG_CUDA_THREADS, 0, stream>>>(
                                  (scalar_t *)tg_elem_ptr(out), (const scalar_t *)tg_elem_ptr(x),
                                  (const int64_t *)tg_elem_ptr(indices), planes, in_hw, out_hw));
    return tg_cuda_check_launch(op);
}

extern "C" tg_status tg_cuda_avg_pool2d_forward(tg_tensor *out, tg_tensor *x, const tg_pool_geometry *q) {
    const char *op = q->adaptive ? "tg_adaptive_avg_pool2d" : "tg_avg_pool2d";
    tg_tensor *ts[2] = {out, x};
    if (check_planes(op, ts, 2)) return TG_ERROR;
    int64_t planes = planes_of(x), n = planes * q->ho * q->wo;
    if (n == 0) return TG_OK;
    TG_CUDA_ENTER(op, x);
    unsigned blocks = tg_cuda_blocks(n, tg_cuda_device_of(x));
    TG_CUDA_DISPATCH_FLOATING(op, x->dtype,
                              avg_pool_forward_kernel<scalar_t><<<blocks, TG_CUDA_THREADS, 0, stream>>>(
                                  *q, planes, (const scalar_t *)tg_elem_ptr(x), (scalar_t *)tg_elem_ptr(out)));
    return tg_cuda_check_launch(op);
}

extern "C" tg_status tg_cuda_avg_pool2d_backward(tg_tensor *grad_x, tg_tensor *grad, const tg_pool_geometry *q) {
    const char *op = q->adaptive ? "tg_adaptive_avg_pool2d backward" : "tg_avg_pool2d backward";
    tg_tensor *ts[2] = {grad_x, grad};
    if (check_planes(op, ts, 2)) return TG_ERROR;
    TG_CUDA_ENTER(op, grad_x);
    if (zero(grad_x, stream, op)) return TG_ERROR;
    int64_t planes = planes_of(grad_x), n = planes * q->ho * q->wo;
    if (n == 0) return TG_OK;
    unsigned blocks = tg_cuda_blocks(n, tg_cuda_device_of(grad_x));
    TG_CUDA_DISPATCH_FLOATING(op, grad_x->dtype,
                              avg_pool_backward_kernel<scalar_t><<<blocks, TG_CUDA_THREADS, 0, stream>>>(
                                  *q, planes, (const scalar_t *)tg_elem_ptr(grad), (scalar_t *)tg_elem_ptr(grad_x)));
    return tg_cuda_check_launch(op);
}
