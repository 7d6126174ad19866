// CUDA kernel of ops/softmax.c: softmax and log_softmax along one dim, with the
// CPU's formulas (ops/softmax_formulas.h): the row max (NaN wins), the sum of
// exp(x - max) accumulated in double, then exp(x - max) * (1 / sum) or
// x - (max + log(sum)). One block per row; rows along a dim that is not the last
// are read with their stride.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "ops/cuda/softmax.h"
#include "ops/reduce_plan.h"

// ops/softmax_formulas.h for float and double: one overloaded name per function, a
// row struct per type.
#define TG_PER_TYPE_HEADER "ops/softmax_formulas.h"
#include "core/cuda/per_type.h"

template <typename T> struct softmax_row;
template <> struct softmax_row<float> { typedef tg_softmax_row_f32 type; };
template <> struct softmax_row<double> { typedef tg_softmax_row_f64 type; };

// ============================ device helpers ============================

// Block-wide combine (blockDim.x a multiple of 32, at most 1024); every thread gets
// the result. shared: 32 elements of V.
template <typename V, typename F> __device__ __forceinline__ V block_all(V v, V *shared, F combine) {
    for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_down_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    __syncthreads(); // shared may still be read from the previous call
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    V r = shared[0];
    for (int w = 1; w < warps; w++) r = combine(r, shared[w]);
    return r;
}

// ============================ kernels ============================

// Row o of x (plan px: outer = the other dims, inner = dim, len elements at stride
// xs) into the same row of out (plan po, stride os). grid-stride over rows.
template <typename T>
__global__ void softmax_kernel(tg_reduce_plan px, tg_reduce_plan po, const T *x, T *out, bool log_out) {
    __shared__ T shared_t[32];
    __shared__ double shared_d[32];
    int64_t len = px.inner_numel;
    int64_t xs = px.inner_ndim ? px.inner_strides[0] : 1, os = po.inner_ndim ? po.inner_strides[0] : 1;
    for (int64_t o = blockIdx.x; o < px.outer_numel; o += gridDim.x) {
        const T *row = x + tg_reduce_outer_offset(&px, o);
        T *dst = out + tg_reduce_outer_offset(&po, o);
        T m = -INFINITY;
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x) m = tg_softmax_max(m, row[k * xs]);
        m = block_all<T>(m, shared_t, [](T a, T b) { return tg_softmax_max(a, b); });
        double s = 0;
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x) s += (double)tg_softmax_exp(row[k * xs], m);
        s = block_all<double>(s, shared_d, [](double a, double b) { return a + b; });
        typename softmax_row<T>::type r;
        tg_softmax_row_of(m, s, log_out, &r);
        if (log_out) {
            for (int64_t k = threadIdx.x; k < len; k += blockDim.x) dst[k * os] = tg_log_softmax_out(row[k * xs], &r);
        } else {
            for (int64_t k = threadIdx.x; k < len; k += blockDim.x)
                dst[k * os] = tg_softmax_out(tg_softmax_exp(row[k * xs], m), &r);
        }
    }
}

// ============================ launchers ============================

template <typename T>
static tg_status launch_softmax(tg_tensor *out, tg_tensor *x, int dim, bool log_out, cudaStream_t stream) {
    tg_reduce_plan px, po;
    int64_t lines = tg_line_plans(x, out, dim, &px, &po);
    if (lines == 0) return TG_OK;
    int64_t len = px.inner_numel;
    unsigned threads = len <= 32 ? 32 : len <= 128 ? 64 : len <= 1024 ? 128 : 256;
    unsigned blocks = (unsigned)(lines < 65535 * 8 ? lines : 65535 * 8);
    softmax_kernel<T>
        <<<blocks, threads, 0, stream>>>(px, po, (const T *)tg_elem_ptr(x), (T *)tg_elem_ptr(out), log_out);
    return tg_cuda_check_launch(log_out ? "tg_log_softmax" : "tg_softmax");
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_softmax(tg_tensor *out, tg_tensor *x, int dim, bool log) {
    const char *op = log ? "tg_log_softmax" : "tg_softmax";
    if (tg_cuda_check_line_dim(op, x, dim)) return TG_ERROR;
    if (out->dtype != x->dtype) return tg_error("%s: output dtype differs from the input's", op);
    TG_CUDA_ENTER(op, x);
    TG_CUDA_DISPATCH_FLOATING(op, x->dtype, return launch_softmax<scalar_t>(out, x, dim, log, stream));
    return TG_OK;
}
