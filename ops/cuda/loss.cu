// CUDA kernel of ops/loss.c: the fused cross-entropy forward (log-sum-exp and the
// label-smoothed negative log likelihood per element), with the CPU's arithmetic
// (ops/loss.c, CE_KERNEL: double accumulators, max shift, -inf max shifted by 0; the
// shift and the smoothed loss are ops/loss_formulas.h, the CPU's own code).
// One warp per element r = (n, d); its C logits are x[n, :, d] at stride D.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "ops/cuda/loss.h"
#include "ops/loss_formulas.h"

#define WARPS_PER_BLOCK 4

// ============================ kernels ============================

// x [n, c, d] contiguous, target [n*d] int64; loss, lse [n*d].
template <typename T>
__global__ void cross_entropy_forward_kernel(const T *x, const int64_t *target, T *loss, T *lse, int64_t N, int64_t C,
                                             int64_t D, bool use_ignore, int64_t ignore_index, double eps) {
    int lane = threadIdx.x & 31;
    int64_t warp = (int64_t)blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5);
    int64_t warps = (int64_t)gridDim.x * WARPS_PER_BLOCK;
    for (int64_t r = warp; r < N * D; r += warps) {
        int64_t n = r / D, d = r % D;
        const T *row = x + n * C * D + d;
        double m = -INFINITY;
        for (int64_t c = lane; c < C; c += 32) m = (double)row[c * D] > m ? (double)row[c * D] : m;
        for (int o = 16; o > 0; o >>= 1) {
            double other = __shfl_xor_sync(0xffffffffu, m, o);
            m = other > m ? other : m;
        }
        m = tg_ce_lse_shift(m);
        double s = 0, total = 0;
        for (int64_t c = lane; c < C; c += 32) {
            s += exp((double)row[c * D] - m);
            total += (double)row[c * D];
        }
        for (int o = 16; o > 0; o >>= 1) {
            s += __shfl_xor_sync(0xffffffffu, s, o);
            total += __shfl_xor_sync(0xffffffffu, total, o);
        }
        if (lane == 0) {
            double l = m + log(s);
            lse[r] = (T)l;
            int64_t t = target[r];
            if (use_ignore && t == ignore_index) {
                loss[r] = 0;
            } else {
                loss[r] = (T)tg_ce_smoothed_nll(l, (double)row[t * D], total, C, eps);
            }
        }
    }
}

// gx [n, c, d]: one thread per element (n, c, d), grid-stride; g[r] or g[0] read here.
template <typename T>
__global__ void cross_entropy_backward_kernel(const T *x, const int64_t *target, const T *lse, const T *g, T *gx,
                                              int64_t N, int64_t C, int64_t D, bool use_ignore, int64_t ignore_index,
                                              double eps, bool per_element, bool mean, int64_t count) {
    int64_t total = N * C * D, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        int64_t n = i / (C * D), c = i / D % C, d = i % D, r = n * D + d, t = target[r];
        double scale = tg_ce_factor(use_ignore && t == ignore_index, mean, count) * (double)g[per_element ? r : 0];
        gx[i] = (T)tg_ce_grad((double)x[i], (double)lse[r], c == t, C, eps, scale);
    }
}

// ============================ launchers ============================

template <typename T>
static tg_status launch_cross_entropy(tg_tensor *loss, tg_tensor *lse, tg_tensor *x, tg_tensor *target, int64_t n,
                                      int64_t c, int64_t d, bool use_ignore, int64_t ignore_index, double eps,
                                      cudaStream_t stream) {
    int64_t rows = n * d;
    if (rows == 0) return TG_OK;
    int64_t blocks = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
    int64_t cap = (int64_t)tg_cuda_sm_count(tg_cuda_device_of(x)) * 16;
    cross_entropy_forward_kernel<T><<<(unsigned)(blocks < cap ? blocks : cap), WARPS_PER_BLOCK * 32, 0, stream>>>(
        (const T *)tg_elem_ptr(x), (const int64_t *)tg_elem_ptr(target), (T *)tg_elem_ptr(loss), (T *)tg_elem_ptr(lse),
        n, c, d, use_ignore, ignore_index, eps);
    return tg_cuda_check_launch("tg_cross_entropy");
}

template <typename T>
static tg_status launch_cross_entropy_backward(tg_tensor *gx, tg_tensor *x, tg_tensor *target, tg_tensor *lse,
                                               tg_tensor *g, const tg_ce_args *a, cudaStream_t stream) {
    int64_t total = a->n * a->c * a->d;
    if (total == 0) return TG_OK;
    int64_t blocks = (total + 255) / 256, cap = (int64_t)tg_cuda_sm_count(tg_cuda_device_of(x)) * 32;
    cross_entropy_backward_kernel<T><<<(unsigned)(blocks < cap ? blocks : cap), 256, 0, stream>>>(
        (const T *)tg_elem_ptr(x), (const int64_t *)tg_elem_ptr(target), (const T *)tg_elem_ptr(lse),
        (const T *)tg_elem_ptr(g), (T *)tg_elem_ptr(gx), a->n, a->c, a->d, a->use_ignore, a->ignore_index, a->smoothing,
        a->reduction == TG_REDUCTION_NONE, a->reduction == TG_REDUCTION_MEAN, a->count);
    return tg_cuda_check_launch("tg_cross_entropy backward");
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_cross_entropy_forward(tg_tensor *loss, tg_tensor *lse, tg_tensor *x, tg_tensor *target,
                                                   int64_t n, int64_t c, int64_t d, bool use_ignore,
                                                   int64_t ignore_index, double eps) {
    const char *op = "tg_cross_entropy";
    if (target->dtype != TG_INT64) return tg_error("%s: CUDA kernel expects int64 targets", op);
    if (!tg_is_contiguous(x) || !tg_is_contiguous(target) || !tg_is_contiguous(loss) || !tg_is_contiguous(lse))
        return tg_error("%s: CUDA kernel expects contiguous tensors", op);
    TG_CUDA_ENTER(op, x);
    TG_CUDA_DISPATCH_FLOATING(
        op, x->dtype,
        return launch_cross_entropy<scalar_t>(loss, lse, x, target, n, c, d, use_ignore, ignore_index, eps, stream));
    return TG_OK;
}

extern "C" tg_status tg_cuda_cross_entropy_backward(tg_tensor *gx, tg_tensor *x, tg_tensor *target, tg_tensor *lse,
                                                    tg_tensor *g, const tg_ce_args *a) {
    const char *op = "tg_cross_entropy backward";
    if (!tg_is_contiguous(gx) || !tg_is_contiguous(x) || !tg_is_contiguous(target) || !tg_is_contiguous(lse) ||
        !tg_is_contiguous(g))
        return tg_error("%s: CUDA kernel expects contiguous tensors", op);
    TG_CUDA_ENTER(op, x);
    TG_CUDA_DISPATCH_FLOATING(op, x->dtype,
                              return launch_cross_entropy_backward<scalar_t>(gx, x, target, lse, g, a, stream));
    return TG_OK;
}
