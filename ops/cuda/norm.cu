// CUDA kernel of ops/norm.c: the batch-norm / layer-norm forward with the CPU's
// formulas (ops/norm_formulas.h, the ones ops/cpu/norm_kernels.h runs): per group, the
// sums of d = x - shift and d^2 (shift = the group's first element; d and d^2 in the
// element type as on the CPU, summed in double), the statistics from them, then y.
// One block per group; its elements are x[(o * G + c) * I + i]. The backward is built
// from ops in ops/norm.c.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "ops/cuda/norm.h"
#include "ops/norm_formulas.h"

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
__global__ void norm_forward_kernel(T *y, T *mean_out, T *var_out, const T *x, const T *w, const T *b, tg_norm_args a) {
    __shared__ double shared[32];
    int64_t O = a.outer, G = a.groups, I = a.inner, count = O * I;
    for (int64_t c = blockIdx.x; c < G; c += gridDim.x) {
        const T shift = count > 0 ? x[c * I] : (T)0;
        double s = 0, ss = 0;
        for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
            T d = x[((k / I) * G + c) * I + k % I] - shift;
            s += (double)d;
            ss += (double)(d * d);
        }
        s = norm_block_sum(s, shared);
        ss = norm_block_sum(ss, shared);
        const tg_norm_stats st = tg_norm_stats_of(s, ss, (double)count, (double)shift, a.eps);
        if (threadIdx.x == 0) {
            mean_out[c] = (T)st.mean;
            var_out[c] = (T)st.var;
        }
        if (a.layer) { // w, b [I]
            const T tm = (T)st.mean, ti = (T)st.invstd;
            for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
                int64_t i = k % I, at = ((k / I) * G + c) * I + i;
                y[at] = TG_LAYER_NORM_OUT(x[at], tm, ti, w[i], b[i]);
            }
        } else { // batch norm: w, b [G]
            const T tm = (T)st.mean;
            const tg_bn_fold f = tg_bn_fold_of(&st, (double)tm, (double)w[c], (double)b[c]);
            const T sc = (T)f.scale, sh = (T)f.shift;
            for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
                int64_t at = ((k / I) * G + c) * I + k % I;
                y[at] = TG_BN_OUT(x[at], tm, sc, sh);
            }
        }
    }
}

// ============================ launchers ============================

template <typename T>
static tg_status launch_norm(tg_tensor *y, tg_tensor *mean, tg_tensor *var, tg_tensor *x, tg_tensor *w, tg_tensor *b,
                             const tg_norm_args *a, cudaStream_t stream) {
    if (a->groups == 0) return TG_OK;
    int64_t count = a->outer * a->inner;
    unsigned threads = count <= 64 ? 32 : count <= 512 ? 128 : 256;
    unsigned blocks = (unsigned)(a->groups < 65535 * 8 ? a->groups : 65535 * 8);
    norm_forward_kernel<T><<<blocks, threads, 0, stream>>>((T *)tg_elem_ptr(y), (T *)tg_elem_ptr(mean),
                                                           (T *)tg_elem_ptr(var), (const T *)tg_elem_ptr(x),
                                                           (const T *)tg_elem_ptr(w), (const T *)tg_elem_ptr(b), *a);
    return tg_cuda_check_launch(a->layer ? "tg_layer_norm" : "tg_batch_norm");
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_norm_forward(tg_tensor *y, tg_tensor *mean, tg_tensor *var, tg_tensor *x, tg_tensor *w,
                                          tg_tensor *b, const tg_norm_args *a) {
    const char *op = a->layer ? "tg_layer_norm" : "tg_batch_norm";
    if (!w || !b) return tg_error("%s: CUDA kernel needs weight and bias tensors", op);
    tg_tensor *all[6] = {y, mean, var, x, w, b};
    for (tg_tensor *t : all)
        if (!tg_is_contiguous(t) || t->dtype != x->dtype)
            return tg_error("%s: CUDA kernel expects contiguous tensors of one dtype", op);
    TG_CUDA_ENTER(op, x);
    TG_CUDA_DISPATCH_FLOATING(op, x->dtype, return launch_norm<scalar_t>(y, mean, var, x, w, b, a, stream));
    return TG_OK;
}
