// CUDA kernels of optim/optim.c: one fused kernel per parameter and optimizer
// step. Each loop body is optim/kernels.c's CPU body, statement by statement
// (itself the per-element form of PyTorch 1.13's _single_tensor_* functions; see
// the comments there). Scalars are cast to the element type first, as there.
// (nvcc may fuse a multiply and an add into one FMA where gcc does not: results
// can differ from the CPU's in the last bit.)
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "optim/cuda/optim.h"
#include "optim/unscale_formula.h"

__device__ __forceinline__ float dsqrt_opt(float x) { return sqrtf(x); }
__device__ __forceinline__ double dsqrt_opt(double x) { return sqrt(x); }

struct sgd_args {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize, first_step;
};
struct adam_args {
    double lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2_sqrt;
    bool amsgrad, decoupled, maximize;
};
struct rmsprop_args {
    double lr, alpha, eps, weight_decay, momentum;
    bool centered, maximize;
};

// ============================ kernels ============================

// param, grad, buf (NULL unless momentum): [n] contiguous.
template <typename T> __global__ void sgd_kernel(T *param, const T *grad, T *buf, int64_t n, sgd_args a) {
    const T wd = (T)a.weight_decay, mom = (T)a.momentum, keep = (T)(1 - a.dampening);
    const T neg_lr = (T)(-a.lr);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        T d_p = a.maximize ? -grad[i] : grad[i];
        if (a.weight_decay != 0) d_p = d_p + wd * param[i];
        if (a.momentum != 0) {
            T b = a.first_step ? d_p : buf[i] * mom + keep * d_p;
            buf[i] = b;
            d_p = a.nesterov ? d_p + mom * b : b;
        }
        param[i] = param[i] + neg_lr * d_p;
    }
}

// param, grad, m, v, vmax (NULL unless amsgrad): [n] contiguous.
template <typename T> __global__ void adam_kernel(T *param, const T *grad, T *m, T *v, T *vmax, int64_t n, adam_args a) {
    const T decay = (T)(1 - a.lr * a.weight_decay), wd = (T)a.weight_decay;
    const T b1 = (T)a.beta1, one_b1 = (T)(1 - a.beta1);
    const T b2 = (T)a.beta2, one_b2 = (T)(1 - a.beta2);
    const T bc2_sqrt = (T)a.bias_correction2_sqrt, eps = (T)a.eps;
    const T neg_step_size = (T)(-(a.lr / a.bias_correction1));
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        T g = a.maximize ? -grad[i] : grad[i];
        T p = param[i];
        if (a.decoupled) p = p * decay;
        else if (a.weight_decay != 0) g = g + wd * p;
        T mi = m[i] * b1 + one_b1 * g;
        T vi = v[i] * b2 + one_b2 * g * g;
        m[i] = mi;
        v[i] = vi;
        if (a.amsgrad) {
            T mx = vmax[i] > vi ? vmax[i] : vi;
            if (vi != vi) mx = vi;
            vmax[i] = mx;
            vi = mx;
        }
        T denom = dsqrt_opt(vi) / bc2_sqrt + eps;
        param[i] = p + neg_step_size * mi / denom;
    }
}

// param, grad, sq, gavg (NULL unless centered), buf (NULL unless momentum): [n].
template <typename T>
__global__ void rmsprop_kernel(T *param, const T *grad, T *sq, T *gavg, T *buf, int64_t n, rmsprop_args a) {
    const T wd = (T)a.weight_decay, alpha = (T)a.alpha, one_alpha = (T)(1 - a.alpha);
    const T eps = (T)a.eps, mom = (T)a.momentum, neg_lr = (T)(-a.lr);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        T g = a.maximize ? -grad[i] : grad[i];
        if (a.weight_decay != 0) g = g + wd * param[i];
        T s = sq[i] * alpha + one_alpha * g * g;
        sq[i] = s;
        T avg;
        if (a.centered) {
            T ga = gavg[i] * alpha + one_alpha * g;
            gavg[i] = ga;
            avg = dsqrt_opt(s + (T)(-1) * ga * ga);
        } else {
            avg = dsqrt_opt(s);
        }
        avg = avg + eps;
        if (a.momentum > 0) {
            T b = buf[i] * mom + g / avg;
            buf[i] = b;
            param[i] = param[i] + neg_lr * b;
        } else {
            param[i] = param[i] + neg_lr * g / avg;
        }
    }
}

// grad: [n] contiguous; found_inf: one int32 on the device, set to 1 and never cleared
// (threads that find a non-finite element all store the same 1).
template <typename T> __global__ void unscale_kernel(T *grad, int64_t n, float inv_scale, int32_t *found_inf) {
    int found = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        TG_UNSCALE_ELEMENT(T, grad[i], inv_scale, found);
    if (found) *found_inf = 1;
}

// ============================ launchers ============================

template <typename T> static T *ptr_or_null(tg_tensor *t) { return t ? (T *)tg_elem_ptr(t) : nullptr; }

template <typename T>
static tg_status launch_sgd(const char *op, tg_tensor *p, tg_tensor *g, tg_tensor *buf, sgd_args a, cudaStream_t s) {
    int64_t n = tg_numel(p);
    if (n == 0) return TG_OK;
    sgd_kernel<T><<<tg_cuda_blocks(n, tg_cuda_device_of(p)), TG_CUDA_THREADS, 0, s>>>(
        (T *)tg_elem_ptr(p), (const T *)tg_elem_ptr(g), ptr_or_null<T>(buf), n, a);
    return tg_cuda_check_launch(op);
}

template <typename T>
static tg_status launch_adam(const char *op, tg_tensor *p, tg_tensor *g, tg_tensor *m, tg_tensor *v, tg_tensor *vmax,
                             adam_args a, cudaStream_t s) {
    int64_t n = tg_numel(p);
    if (n == 0) return TG_OK;
    adam_kernel<T><<<tg_cuda_blocks(n, tg_cuda_device_of(p)), TG_CUDA_THREADS, 0, s>>>(
        (T *)tg_elem_ptr(p), (const T *)tg_elem_ptr(g), (T *)tg_elem_ptr(m), (T *)tg_elem_ptr(v),
        ptr_or_null<T>(vmax), n, a);
    return tg_cuda_check_launch(op);
}

template <typename T>
static tg_status launch_rmsprop(const char *op, tg_tensor *p, tg_tensor *g, tg_tensor *sq, tg_tensor *gavg,
                                tg_tensor *buf, rmsprop_args a, cudaStream_t s) {
    int64_t n = tg_numel(p);
    if (n == 0) return TG_OK;
    rmsprop_kernel<T><<<tg_cuda_blocks(n, tg_cuda_device_of(p)), TG_CUDA_THREADS, 0, s>>>(
        (T *)tg_elem_ptr(p), (const T *)tg_elem_ptr(g), (T *)tg_elem_ptr(sq), ptr_or_null<T>(gavg),
        ptr_or_null<T>(buf), n, a);
    return tg_cuda_check_launch(op);
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_sgd_step(tg_tensor *param, tg_tensor *grad, tg_tensor *momentum_buffer, bool first_step,
                                      double lr, double momentum, double dampening, double weight_decay,
                                      bool nesterov, bool maximize) {
    const char *op = "SGD.step";
    if (momentum != 0 && !momentum_buffer) return tg_error("%s: momentum %g needs a momentum buffer", op, momentum);
    TG_CUDA_ENTER(op, param);
    sgd_args a = {lr, momentum, dampening, weight_decay, nesterov, maximize, first_step};
    TG_CUDA_DISPATCH_FLOATING(op, param->dtype, return launch_sgd<scalar_t>(op, param, grad, momentum_buffer, a, stream));
    return TG_OK;
}

extern "C" tg_status tg_cuda_adam_step(tg_tensor *param, tg_tensor *grad, tg_tensor *exp_avg, tg_tensor *exp_avg_sq,
                                       tg_tensor *max_exp_avg_sq, double lr, double beta1, double beta2, double eps,
                                       double weight_decay, double bias_correction1, double bias_correction2_sqrt,
                                       bool amsgrad, bool decoupled, bool maximize) {
    const char *op = decoupled ? "AdamW.step" : "Adam.step";
    if (amsgrad && !max_exp_avg_sq) return tg_error("%s: amsgrad needs max_exp_avg_sq", op);
    TG_CUDA_ENTER(op, param);
    adam_args a = {lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2_sqrt,
                   amsgrad, decoupled, maximize};
    TG_CUDA_DISPATCH_FLOATING(
        op, param->dtype, return launch_adam<scalar_t>(op, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, a, stream));
    return TG_OK;
}

extern "C" tg_status tg_cuda_rmsprop_step(tg_tensor *param, tg_tensor *grad, tg_tensor *square_avg,
                                          tg_tensor *grad_avg, tg_tensor *momentum_buffer, double lr, double alpha,
                                          double eps, double weight_decay, double momentum, bool centered,
                                          bool maximize) {
    const char *op = "RMSprop.step";
    if (centered && !grad_avg) return tg_error("%s: centered needs grad_avg", op);
    if (momentum > 0 && !momentum_buffer) return tg_error("%s: momentum %g needs a momentum buffer", op, momentum);
    TG_CUDA_ENTER(op, param);
    rmsprop_args a = {lr, alpha, eps, weight_decay, momentum, centered, maximize};
    TG_CUDA_DISPATCH_FLOATING(
        op, param->dtype,
        return launch_rmsprop<scalar_t>(op, param, grad, square_avg, grad_avg, momentum_buffer, a, stream));
    return TG_OK;
}

extern "C" tg_status tg_cuda_unscale_check(tg_tensor *grad, float inv_scale, int32_t *found_inf) {
    const char *op = "tg_grad_scaler_unscale_";
    TG_CUDA_ENTER(op, grad);
    int64_t n = tg_numel(grad);
    if (n == 0) return TG_OK;
    TG_CUDA_DISPATCH_FLOATING(op, grad->dtype, {
        unscale_kernel<scalar_t><<<tg_cuda_blocks(n, tg_cuda_device_of(grad)), TG_CUDA_THREADS, 0, stream>>>(
            (scalar_t *)tg_elem_ptr(grad), n, inv_scale, found_inf);
        return tg_cuda_check_launch(op);
    });
    return TG_OK;
}
