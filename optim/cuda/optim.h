/* CUDA entry points of optim/cuda/optim.cu, called by optim/optim.c through
 * TG_CUDA_CALL. Weak: absent (NULL) in builds without CUDA.
 *
 * Each is ONE fused kernel over the parameter's elements (grid-stride loop): it
 * reads grad and the state once and writes param and the state once, in the
 * parameter's dtype (float32 or float64), each element by optim/update_formulas.h,
 * the formula the CPU's loops run (its comments cite PyTorch). The scalars are the
 * CPU's argument structs (optim/kernels.h).
 * All tensors are contiguous, of the param's shape, dtype and device; the host has
 * already checked that. Scalars come as doubles and are cast to the element type
 * before use, as PyTorch casts Python scalars. The kernels do not bump versions
 * (the caller does) and return TG_OK or an error naming the launch failure. */
#ifndef TG_OPTIM_CUDA_OPTIM_H
#define TG_OPTIM_CUDA_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "optim/kernels.h" /* the arguments, as the CPU's loops take them */

#ifdef __cplusplus
extern "C" {
#endif

/* torch.optim.SGD (_single_tensor_sgd). momentum_buffer is NULL when momentum == 0;
 * a->first_step: the buffer is uninitialised and becomes d_p (PyTorch's clone). */
tg_status tg_cuda_sgd_step(tg_tensor *param, tg_tensor *grad, tg_tensor *momentum_buffer, const tg_sgd_args *a)
    __attribute__((weak));

/* torch.optim.Adam (a->decoupled false) and AdamW (true), non-capturable branch.
 * max_exp_avg_sq is NULL unless a->amsgrad. The bias corrections 1 - beta1^step and
 * sqrt(1 - beta2^step) are computed by the host in double, as PyTorch does in Python. */
tg_status tg_cuda_adam_step(tg_tensor *param, tg_tensor *grad, tg_tensor *exp_avg, tg_tensor *exp_avg_sq,
                            tg_tensor *max_exp_avg_sq, const tg_adam_args *a) __attribute__((weak));

/* torch.optim.RMSprop (_single_tensor_rmsprop). grad_avg is NULL unless a->centered;
 * momentum_buffer is NULL unless a->momentum > 0. */
tg_status tg_cuda_rmsprop_step(tg_tensor *param, tg_tensor *grad, tg_tensor *square_avg, tg_tensor *grad_avg,
                               tg_tensor *momentum_buffer, const tg_rmsprop_args *a) __attribute__((weak));

/* GradScaler's unscale of a float32 / float64 contiguous gradient in place
 * (optim/unscale_formula.h): grad *= inv_scale; sets the int32 at found_inf (device
 * memory on the gradient's device) to 1 if any element was Inf or NaN, and never clears
 * it, so one flag serves all the gradients of a step and is read once. */
tg_status tg_cuda_unscale_check(tg_tensor *grad, float inv_scale, int32_t *found_inf) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
