/* SyncBatchNorm (distributed/sync_batch_norm.h): BatchNorm written with ops around one
 * differentiable all-reduce of the per-channel [sum, sum of squares, count]; autograd
 * derives the backward, whose gradients of those statistics are all-reduced too. */
#include "distributed/sync_batch_norm.h"

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "nn/norm_state.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/norm.h"
#include "ops/norm_running.h"
#include "ops/reduce.h"
#include "ops/shape.h"

/* ---- the differentiable all-reduce ---- */

static tg_tensor *summed_over_ranks(tg_tensor *t) {
    tg_tensor *out = tg_clone_values(t);
    if (out && tg_dist_is_initialized() && tg_dist_world_size() > 1 && tg_dist_all_reduce(out, TG_DIST_SUM))
        return NULL;
    return out;
}

static tg_tensor *all_reduce_forward(tg_ctx *ctx, tg_tensor *const *in) { return summed_over_ranks(in[0]); }

static void all_reduce_backward(tg_ctx *ctx, tg_tensor *grad, tg_tensor **grad_in) {
    grad_in[0] = summed_over_ranks(grad);
}

static const tg_function all_reduce_sum_fn = {
    .name = "dist_all_reduce_sum", .num_inputs = 1, .forward = all_reduce_forward, .backward = all_reduce_backward};

tg_tensor *tg_dist_all_reduce_sum_differentiable(tg_tensor *t) { return tg_apply(&all_reduce_sum_fn, &t); }

/* ---- the module ---- */

/* [C] -> [1, C, 1, ...] to broadcast against x. */
static tg_tensor *per_channel(tg_tensor *v, tg_tensor *x) {
    tg_shape shape = tg_shape_of(x);
    shape.dims[0] = 1;
    for (int d = 2; d < shape.ndim; d++) shape.dims[d] = 1;
    return tg_reshape(v, shape);
}

static tg_tensor *sync_bn_forward(tg_module *self, tg_tensor *x) {
    nn_batch_norm_state *s = tg_module_state(self);
    if (tg_ndim(x) < 2 || tg_size(x, 1) != s->num_features) {
        tg_error("SyncBatchNorm(%lld): the input must be [N, C, ...] with %lld channels in dim 1",
                 (long long)s->num_features, (long long)s->num_features);
        return NULL;
    }
    tg_tensor *weight = tg_module_param(self, "weight"), *bias = tg_module_param(self, "bias");
    tg_tensor *running_mean = tg_module_buffer(self, "running_mean");
    tg_tensor *running_var = tg_module_buffer(self, "running_var");
    bool training = tg_is_training(self);
    double factor;
    if (nn_batch_norm_factor(self, s, &factor)) return NULL;
    if (!training && s->track) return tg_batch_norm(x, running_mean, running_var, weight, bias, false, factor, s->eps);

    int64_t c = s->num_features;
    int dims[TG_MAX_DIMS], num_dims = 0;
    for (int d = 0; d < tg_ndim(x); d++)
        if (d != 1) dims[num_dims++] = d;
    double local_count = (double)(tg_numel(x) / c);
    tg_tensor *sum = tg_reshape(tg_sum_dims(x, dims, num_dims, false), TG_SHAPE(c));
    tg_tensor *squares = tg_reshape(tg_sum_dims(tg_mul(x, x), dims, num_dims, false), TG_SHAPE(c));
    tg_tensor *count = tg_full(TG_SHAPE(1), local_count, (tg_opts){.dtype = tg_dtype_of(x), .device = tg_device_of(x)});
    tg_tensor *global = tg_dist_all_reduce_sum_differentiable(tg_cat((tg_tensor *[]){sum, squares, count}, 3, 0));
    if (!global) return NULL;
    double n = tg_item(tg_narrow(global, 0, 2 * c, 1));
    if (n <= 1 && training) {
        tg_error("SyncBatchNorm(%lld): expected more than 1 value per channel when training, got %g over all ranks",
                 (long long)c, n);
        return NULL;
    }
    tg_tensor *mean = tg_div_scalar(tg_narrow(global, 0, 0, c), n);
    tg_tensor *var = tg_sub(tg_div_scalar(tg_narrow(global, 0, c, c), n), tg_mul(mean, mean));
    if (training && s->track && tg_norm_update_running(running_mean, running_var, mean, var, n / (n - 1), factor))
        return NULL;
    tg_tensor *y = tg_mul(tg_sub(x, per_channel(mean, x)), per_channel(tg_rsqrt(tg_add_scalar(var, s->eps)), x));
    if (weight) y = tg_add(tg_mul(y, per_channel(weight, x)), per_channel(bias, x));
    return y;
}

static const tg_module_type sync_bn_type = {"SyncBatchNorm", sync_bn_forward, NULL, nn_batch_norm_repr};

tg_module *tg_nn_sync_batch_norm(int64_t num_features, tg_batch_norm_opts opts) {
    return nn_batch_norm_new(&sync_bn_type, "tg_nn_sync_batch_norm", num_features, opts);
}
