// CUDA kernel of ops/norm.c: the batch-norm / layer-norm forward with the CPU's
// arithmetic (ops/norm.c, NORM_KERNEL): per group, the mean and then the sum of
// squared deviations in double (two passes, biased variance), invstd = 1/sqrt(var
// + eps), then y. One block per group; its elements are x[(o * G + c) * I + i].
// The backward is built from ops in ops/norm.c.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "ops/cuda/norm.h"

namespace {

// Block-wide double sum (blockDim.x a multiple of 32, at most 1024); every thread
// gets it. shared: 32 doubles.
__device__ __forceinline__ double norm_block_sum(double v, double *shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    __syncthreads(); // shared may still be read from the previous call
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    double r = 0;
    for (int w = 0; w < warps; w++) r += shared[w];
    return r;
}

} // namespace

// ============================ kernels ============================

// x, y [O, G, I]; w, b [G] (batch norm) or [I] (layer norm); mean, var [G].
template <typename T>
__global__ void norm_forward_kernel(T *y, T *mean_out, T *var_out, const T *x, const T *w, const T *b, int64_t O,
                                    int64_t G, int64_t I, bool layer, double eps) {
    __shared__ double shared[32];
    int64_t count = O * I;
    for (int64_t c = blockIdx.x; c < G; c += gridDim.x) {
        double s = 0;
        for (int64_t k = threadIdx.x; k < count; k += blockDim.x) s += (double)x[((k / I) * G + c) * I + k % I];
        double mean = norm_block_sum(s, shared) / (double)count;
        double ss = 0;
        for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
            double d = (double)x[((k / I) * G + c) * I + k % I] - mean;
            ss += d * d;
        }
        double var = norm_block_sum(ss, shared) / (double)count, invstd = 1.0 / sqrt(var + eps);
        if (threadIdx.x == 0) {
            mean_out[c] = (T)mean;
            var_out[c] = (T)var;
        }
        double scale = 0, shift = 0;
        if (!layer) { // batch norm: w, b [G]; layer norm reads w, b [I] per element below
            scale = invstd * (double)w[c];
            shift = (double)b[c] - mean * scale;
        }
        for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
            int64_t i = k % I, at = ((k / I) * G + c) * I + i;
            if (layer)
                y[at] = (T)(((double)x[at] - mean) * invstd * (double)w[i] + (double)b[i]);
            else
                y[at] = (T)((double)x[at] * scale + shift);
        }
    }
}

// ============================ launchers ============================

template <typename T>
static tg_status launch_norm(tg_tensor *y, tg_tensor *mean, tg_tensor *var, tg_tensor *x, tg_tensor *w, tg_tensor *b,
                             int64_t outer, int64_t groups, int64_t inner, bool layer, double eps,
                             cudaStream_t stream) {
    if (groups == 0) return TG_OK;
    int64_t count = outer * inner;
    unsigned threads = count <= 64 ? 32 : count <= 512 ? 128 : 256;
    unsigned blocks = (unsigned)(groups < 65535 * 8 ? groups : 65535 * 8);
    norm_forward_kernel<T><<<blocks, threads, 0, stream>>>(
        (T *)tg_elem_ptr(y), (T *)tg_elem_ptr(mean), (T *)tg_elem_ptr(var), (const T *)tg_elem_ptr(x),
        (const T *)tg_elem_ptr(w), (const T *)tg_elem_ptr(b), outer, groups, inner, layer, eps);
    return tg_cuda_check_launch(layer ? "tg_layer_norm" : "tg_batch_norm");
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_norm_forward(tg_tensor *y, tg_tensor *mean, tg_tensor *var, tg_tensor *x, tg_tensor *w,
                                          tg_tensor *b, int64_t outer, int64_t groups, int64_t inner, bool layer,
                                          double eps) {
    const char *op = layer ? "tg_layer_norm" : "tg_batch_norm";
    if (!w || !b) return tg_error("%s: CUDA kernel needs weight and bias tensors", op);
    tg_tensor *all[6] = {y, mean, var, x, w, b};
    for (tg_tensor *t : all)
        if (!tg_is_contiguous(t) || t->dtype != x->dtype)
            return tg_error("%s: CUDA kernel expects contiguous tensors of one dtype", op);
    TG_CUDA_ENTER(op, x);
    TG_CUDA_DISPATCH_FLOATING(
        op, x->dtype, return launch_norm<scalar_t>(y, mean, var, x, w, b, outer, groups, inner, layer, eps, stream));
    return TG_OK;
}
