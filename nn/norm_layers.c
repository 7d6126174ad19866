/* GroupNorm and InstanceNorm2d on the norm ops: the statistics come from
 * tg_layer_norm over a reshaped input (a group, or a plane, is its last dim), the
 * per-channel affine is a broadcast multiply-add. See nn/norm_layers.h. */
#include "nn/norm_layers.h"

#include <math.h>
#include <stdio.h>

#include "autograd/grad_mode.h"
#include "core/scope.h"
#include "nn/layer_helpers.h"
#include "nn/norm_state.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/norm.h"
#include "ops/norm_running.h"
#include "ops/reduce.h"
#include "ops/shape.h"

/* y * weight + bias with [C] parameters broadcast along dim 1 of an ndim-dim y. */
static tg_tensor *channel_affine(tg_tensor *y, tg_tensor *weight, tg_tensor *bias) {
    if (!weight || !y) return y;
    tg_shape shape = {.ndim = tg_ndim(y)};
    for (int d = 0; d < shape.ndim; d++) shape.dims[d] = d == 1 ? tg_size(y, 1) : 1;
    return tg_add(tg_mul(y, tg_reshape(weight, shape)), tg_reshape(bias, shape));
}

/* ---- GroupNorm ---- */

typedef struct {
    int64_t num_groups, num_channels;
    double eps;
    bool affine;
} group_norm_state;

static void group_norm_repr(tg_module *self, char *buf, size_t size) {
    group_norm_state *s = tg_module_state(self);
    snprintf(buf, size, "%lld, %lld, eps=%g, affine=%s", (long long)s->num_groups, (long long)s->num_channels, s->eps,
             s->affine ? "True" : "False");
}

static tg_tensor *group_norm_forward(tg_module *self, tg_tensor *x) {
    group_norm_state *s = tg_module_state(self);
    if (tg_ndim(x) < 2 || tg_size(x, 1) != s->num_channels) {
        char buf[96];
        tg_error("GroupNorm(%lld, %lld): input %s must be [N, %lld, *]", (long long)s->num_groups,
                 (long long)s->num_channels, tg_shape_str(tg_shape_of(x), buf, sizeof buf), (long long)s->num_channels);
        return NULL;
    }
    int64_t n = tg_size(x, 0), per_group = tg_numel(x) / (n ? n : 1) / s->num_groups;
    tg_tensor *grouped = tg_reshape(x, TG_SHAPE(n, s->num_groups, per_group));
    tg_tensor *normed = grouped ? tg_layer_norm(grouped, 1, NULL, NULL, s->eps) : NULL;
    tg_tensor *y = normed ? tg_reshape(normed, tg_shape_of(x)) : NULL;
    return channel_affine(y, tg_module_param(self, "weight"), tg_module_param(self, "bias"));
}

static const tg_module_type group_norm_type = {"GroupNorm", group_norm_forward, NULL, group_norm_repr};

tg_module *tg_nn_group_norm(int64_t num_groups, int64_t num_channels, tg_group_norm_opts opts) {
    if (num_groups <= 0 || num_channels <= 0 || num_channels % num_groups) {
        tg_error("tg_nn_group_norm: num_channels=%lld must be divisible by num_groups=%lld (both positive)",
                 (long long)num_channels, (long long)num_groups);
        return NULL;
    }
    tg_module *m = tg_module_new(&group_norm_type, sizeof(group_norm_state));
    *(group_norm_state *)tg_module_state(m) =
        (group_norm_state){num_groups, num_channels, tg_option(opts.eps, 1e-5, opts.defaults_filled), !opts.no_affine};
    return nn_finish(m, nn_register_norm_state(m, num_channels, !opts.no_affine, false));
}

/* ---- InstanceNorm2d ---- */

typedef struct {
    int64_t num_features;
    double eps, momentum;
    bool affine, track;
} instance_norm_state;

static void instance_norm_repr(tg_module *self, char *buf, size_t size) {
    instance_norm_state *s = tg_module_state(self);
    snprintf(buf, size, "%lld, eps=%g, momentum=%g, affine=%s, track_running_stats=%s", (long long)s->num_features,
             s->eps, s->momentum, s->affine ? "True" : "False", s->track ? "True" : "False");
}

/* The running update with the mean over n of each plane's statistic (the variance
 * unbiased per plane): what F.instance_norm's batch_norm over [1, N*C, H, W] with
 * repeated buffers, averaged back, gives. */
static tg_status update_running_stats(instance_norm_state *s, tg_tensor *x, tg_tensor *running_mean,
                                      tg_tensor *running_var) {
    int hw[2] = {2, 3};
    tg_tensor *xd = tg_detach(x);
    tg_tensor *mean = tg_mean_dim(tg_mean_dims(xd, hw, 2, false), 0, false);
    tg_tensor *var = tg_mean_dim(tg_var(xd, hw, 2, true, false), 0, false);
    if (!mean || !var) return TG_ERROR;
    return tg_norm_update_running(running_mean, running_var, mean, var, 1.0, s->momentum);
}

static tg_tensor *instance_norm_forward(tg_module *self, tg_tensor *x) {
    instance_norm_state *s = tg_module_state(self);
    int nd = tg_ndim(x);
    bool channels_ok = nd >= 3 && (tg_size(x, -3) == s->num_features || !(s->affine || s->track));
    if ((nd != 3 && nd != 4) || !channels_ok) {
        char buf[96];
        tg_error("InstanceNorm2d(%lld): input %s must be [N, %lld, H, W] or [%lld, H, W]", (long long)s->num_features,
                 tg_shape_str(tg_shape_of(x), buf, sizeof buf), (long long)s->num_features, (long long)s->num_features);
        return NULL;
    }
    tg_tensor *x4 = nd == 3 ? tg_unsqueeze(x, 0) : x;
    tg_tensor *weight = tg_module_param(self, "weight"), *bias = tg_module_param(self, "bias");
    tg_tensor *running_mean = tg_module_buffer(self, "running_mean");
    tg_tensor *running_var = tg_module_buffer(self, "running_var");
    bool use_input_stats = tg_is_training(self) || !s->track;
    tg_tensor *y;
    if (use_input_stats) {
        /* _InstanceNorm.forward leaves num_batches_tracked alone (it stays 0) */
        if (s->track && update_running_stats(s, x4, running_mean, running_var)) return NULL;
        y = channel_affine(tg_layer_norm(x4, 2, NULL, NULL, s->eps), weight, bias);
    } else {
        y = tg_batch_norm(x4, running_mean, running_var, weight, bias, false, 0.0, s->eps);
    }
    return y && nd == 3 ? tg_squeeze(y, 0) : y;
}

static const tg_module_type instance_norm_type = {"InstanceNorm2d", instance_norm_forward, NULL, instance_norm_repr};

tg_module *tg_nn_instance_norm2d(int64_t num_features, tg_instance_norm_opts opts) {
    if (num_features <= 0) {
        tg_error("tg_nn_instance_norm2d: num_features must be positive, got %lld", (long long)num_features);
        return NULL;
    }
    tg_module *m = tg_module_new(&instance_norm_type, sizeof(instance_norm_state));
    instance_norm_state *s = tg_module_state(m);
    *s = (instance_norm_state){num_features, tg_option(opts.eps, 1e-5, opts.defaults_filled),
                               tg_option(opts.momentum, 0.1, opts.defaults_filled), opts.affine,
                               opts.track_running_stats};
    return nn_finish(m, nn_register_norm_state(m, num_features, s->affine, s->track));
}
