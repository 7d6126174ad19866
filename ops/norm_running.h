/* Internal to the normalisation code (ops/norm.c, nn/layers.c, nn/norm_layers.c,
 * distributed/sync_batch_norm.c): PyTorch's running statistics, one formula for every
 * layer that keeps them. Static inline, so that //distributed:dist (linked against
 * libtapegrad.so, which exports only the public API) needs no extra symbol.
 * Not installed, not part of the API. */
#ifndef TG_OPS_NORM_RUNNING_H
#define TG_OPS_NORM_RUNNING_H

#include <stdbool.h>

#include "autograd/grad_mode.h"
#include "core/scope.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

/* _BatchNorm.forward's exponential_average_factor, for a training step of a layer that
 * tracks running statistics: num_batches_tracked += 1, then *factor = 1 /
 * num_batches_tracked when cumulative (momentum=None: a cumulative moving average),
 * else momentum. */
static inline tg_status tg_norm_count_batch(tg_tensor *num_batches_tracked, bool cumulative, double momentum,
                                            double *factor) {
    *factor = momentum;
    tg_status status = TG_ERROR;
    TG_SCOPE {
        tg_tensor *one =
            tg_full(TG_SCALAR_SHAPE, 1, (tg_opts){.dtype = TG_INT64, .device = tg_device_of(num_batches_tracked)});
        if (one && !tg_add_(num_batches_tracked, one)) status = TG_OK;
    }
    if (status == TG_OK && cumulative) *factor = 1.0 / tg_item(num_batches_tracked);
    return status;
}

/* running = (1 - factor) * running + factor * stat, in place and unrecorded, as
 * F.batch_norm updates its buffers. The variance's stat is var * var_correction:
 * n / (n - 1) makes the biased variance of n values unbiased, as PyTorch's running_var
 * holds (1 when var is unbiased already). mean and var are cast to the buffers' dtype. */
static inline tg_status tg_norm_update_running(tg_tensor *running_mean, tg_tensor *running_var, tg_tensor *mean,
                                               tg_tensor *var, double var_correction, double factor) {
    tg_status status = TG_ERROR;
    TG_NO_GRAD {
        TG_SCOPE {
            if (tg_dtype_of(mean) != tg_dtype_of(running_mean)) mean = tg_cast(mean, tg_dtype_of(running_mean));
            if (tg_dtype_of(var) != tg_dtype_of(running_var)) var = tg_cast(var, tg_dtype_of(running_var));
            if (mean && var && !tg_mul_scalar_(running_mean, 1 - factor) &&
                !tg_add_scaled_(running_mean, mean, factor) && !tg_mul_scalar_(running_var, 1 - factor) &&
                !tg_add_scaled_(running_var, var, factor * var_correction))
                status = TG_OK;
        }
    }
    return status;
}

#endif
