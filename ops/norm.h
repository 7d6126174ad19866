/* Normalisation: batch norm (train and eval) and layer norm. */
#ifndef TG_OPS_NORM_H
#define TG_OPS_NORM_H

#include <stdbool.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.nn.functional.batch_norm on x [N, C, ...]: in training, normalises with the
 * batch statistics and, when running_mean/running_var are given, updates them in
 * place with `momentum` (running_var with the unbiased batch variance, as PyTorch);
 * in eval, uses the running statistics. weight/bias [C] may be NULL. */
tg_tensor *tg_batch_norm(tg_tensor *x, tg_tensor *running_mean, tg_tensor *running_var, tg_tensor *weight,
                         tg_tensor *bias, bool training, double momentum, double eps);

/* relu(batch_norm(x, ...) + residual): a ResNet block's end (residual NULL: its middle,
 * relu(batch_norm(x))), as cuDNN's fused batch norm + add + activation; PyTorch eager
 * writes the three ops. The values and gradients are the bits of
 * tg_relu(tg_add(tg_batch_norm(...), residual)). On the CPU in training, float32 or float64,
 * with a residual of x's shape, one pass writes the output (the add and the ReLU while each
 * row is in cache) and backward masks the gradient once for both; elsewhere (CUDA, 16-bit
 * inputs, eval, a broadcast residual) it runs those three ops. */
tg_tensor *tg_batch_norm_add_relu(tg_tensor *x, tg_tensor *residual, tg_tensor *running_mean, tg_tensor *running_var,
                                  tg_tensor *weight, tg_tensor *bias, bool training, double momentum, double eps);

/* torch.nn.functional.layer_norm over the last normalized_ndim dims; weight/bias
 * (of those dims' shape) may be NULL. */
tg_tensor *tg_layer_norm(tg_tensor *x, int normalized_ndim, tg_tensor *weight, tg_tensor *bias, double eps);

#ifdef __cplusplus
}
#endif
#endif
