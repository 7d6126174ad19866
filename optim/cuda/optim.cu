// CUDA kernels of optim/optim.c: one fused kernel per parameter and optimizer
// step, grid-stride over its elements. Each element's update is
// optim/update_formulas.h's, the one optim/kernels.c's CPU loops run (the per-element
// form of PyTorch 1.13's _single_tensor_* functions; see the comments there), with the
// scalars cast to the element type once per thread, as there. (nvcc may fuse a
// multiply and an add into one FMA where gcc does not: results can differ from the
// CPU's in the last bit.)
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "optim/cuda/optim.h"
#include "optim/unscale_formula.h"

// optim/update_formulas.h for float and double: one overloaded name per function,
// a struct of scalars per type.
#define TG_PER_TYPE_HEADER "optim/update_formulas.h"
#include "core/cuda/per_type.h"

// Each element type's scalar structs.
template <typename T> struct optim_scalars;
template <> struct optim_scalars<float> {
    typedef tg_sgd_scalars_f32 sgd;
    typedef tg_adam_scalars_f32 adam;
    typedef tg_rmsprop_scalars_f32 rmsprop;
};
template <> struct optim_scalars<double> {
    typedef tg_sgd_scalars_f64 sgd;
    typedef tg_adam_scalars_f64 adam;
    typedef tg_rmsprop_scalars_f64 rmsprop;
};

#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// ============================ kernels ============================

// param, grad, buf (NULL unless momentum): [n] contiguous.
template <typename T> __global__ void sgd_kernel(T *param, const T *grad, T *buf, int64_t n, tg_sgd_args a) {
    typename optim_scalars<T>::sgd s;
    tg_sgd_scalars_of(&a, &s);
    GRID_STRIDE(i, n) tg_sgd_element(param, grad, buf, i, &s, &a);
}

// param, grad, m, v, vmax (NULL unless amsgrad): [n] contiguous.
template <typename T>
__global__ void adam_kernel(T *param, const T *grad, T *m, T *v, T *vmax, int64_t n, tg_adam_args a) {
    typename optim_scalars<T>::adam s;
    tg_adam_scalars_of(&a, &s);
    GRID_STRIDE(i, n) tg_adam_element(param, grad, m, v, vmax, i, &s, &a);
}

// param, grad, sq, gavg (NULL unless centered), buf (NULL unless momentum): [n].
template <typename T>
__global__ void rmsprop_kernel(T *param, const T *grad, T *sq, T *gavg, T *buf, int64_t n, tg_rmsprop_args a) {
    typename optim_scalars<T>::rmsprop s;
    tg_rmsprop_scalars_of(&a, &s);
    GRID_STRIDE(i, n) tg_rmsprop_element(param, grad, sq, gavg, buf, i, &s, &a);
}

// grad: [n] contiguous; found_inf: one int32 on the device, set to 1 and never cleared
// (threads that find a non-finite element all store the same 1).
template <typename T> __global__ void unscale_kernel(T *grad, int64_t n, float inv_scale, int32_t *found_inf) {
    int found = 0;
    GRID_STRIDE(i, n) TG_UNSCALE_ELEMENT(T, grad[i], inv_scale, found);
    if (found) *found_inf = 1;
}

// ============================ launchers ============================

template <typename T> static T *ptr_or_null(tg_tensor *t) { return t ? (T *)tg_elem_ptr(t) : nullptr; }

template <typename T>
static tg_status launch_sgd(const char *op, tg_tensor *p, tg_tensor *g, tg_tensor *buf, const tg_sgd_args *a,
                            cudaStream_t s) {
    int64_t n = tg_numel(p);
    if (n == 0) return TG_OK;
    sgd_kernel<T><<<tg_cuda_blocks(n, tg_cuda_device_of(p)), TG_CUDA_THREADS, 0, s>>>(
        (T *)tg_elem_ptr(p), (const T *)tg_elem_ptr(g), ptr_or_null<T>(buf), n, *a);
    return tg_cuda_check_launch(op);
}

template <typename T>
static tg_status launch_adam(const char *op, tg_tensor *p, tg_tensor *g, tg_tensor *m, tg_tensor *v, tg_tensor *vmax,
                             const tg_adam_args *a, cudaStream_t s) {
    int64_t n = tg_numel(p);
    if (n == 0) return TG_OK;
    adam_kernel<T><<<tg_cuda_blocks(n, tg_cuda_device_of(p)), TG_CUDA_THREADS, 0, s>>>(
        (T *)tg_elem_ptr(p), (const T *)tg_elem_ptr(g), (T *)tg_elem_ptr(m), (T *)tg_elem_ptr(v), ptr_or_null<T>(vmax),
        n, *a);
    return tg_cuda_check_launch(op);
}

template <typename T>
static tg_status launch_rmsprop(const char *op, tg_tensor *p, tg_tensor *g, tg_tensor *sq, tg_tensor *gavg,
                                tg_tensor *buf, const tg_rmsprop_args *a, cudaStream_t s) {
    int64_t n = tg_numel(p);
    if (n == 0) return TG_OK;
    rmsprop_kernel<T><<<tg_cuda_blocks(n, tg_cuda_device_of(p)), TG_CUDA_THREADS, 0, s>>>(
        (T *)tg_elem_ptr(p), (const T *)tg_elem_ptr(g), (T *)tg_elem_ptr(sq), ptr_or_null<T>(gavg), ptr_or_null<T>(buf),
        n, *a);
    return tg_cuda_check_launch(op);
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_sgd_step(tg_tensor *param, tg_tensor *grad, tg_tensor *momentum_buffer,
                                      const tg_sgd_args *a) {
    const char *op = "SGD.step";
    if (a->momentum != 0 && !momentum_buffer)
        return tg_error("%s: momentum %g needs a momentum buffer", op, a->momentum);
    TG_CUDA_ENTER(op, param);
    TG_CUDA_DISPATCH_FLOATING(op, param->dtype,
                              return launch_sgd<scalar_t>(op, param, grad, momentum_buffer, a, stream));
    return TG_OK;
}

extern "C" tg_status tg_cuda_adam_step(tg_tensor *param, tg_tensor *grad, tg_tensor *exp_avg, tg_tensor *exp_avg_sq,
                                       tg_tensor *max_exp_avg_sq, const tg_adam_args *a) {
    const char *op = a->decoupled ? "AdamW.step" : "Adam.step";
    if (a->amsgrad && !max_exp_avg_sq) return tg_error("%s: amsgrad needs max_exp_avg_sq", op);
    TG_CUDA_ENTER(op, param);
    TG_CUDA_DISPATCH_FLOATING(
        op, param->dtype,
        return launch_adam<scalar_t>(op, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, a, stream));
    return TG_OK;
}

extern "C" tg_status tg_cuda_rmsprop_step(tg_tensor *param, tg_tensor *grad, tg_tensor *square_avg, tg_tensor *grad_avg,
                                          tg_tensor *momentum_buffer, const tg_rmsprop_args *a) {
    const char *op = "RMSprop.step";
    if (a->centered && !grad_avg) return tg_error("%s: centered needs grad_avg", op);
    if (a->momentum > 0 && !momentum_buffer)
        return tg_error("%s: momentum %g needs a momentum buffer", op, a->momentum);
    TG_CUDA_ENTER(op, param);
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
