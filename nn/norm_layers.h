/* Normalisation modules beyond BatchNorm and LayerNorm (nn/layers.h):
 * torch.nn.GroupNorm and torch.nn.InstanceNorm2d, composed of the layer-norm and
 * batch-norm ops (ops/norm.h), so they run on every device those run on.
 * Constructors as in nn/layers.h: a NEW module or NULL + error; float32 CPU. */
#ifndef TG_NN_NORM_LAYERS_H
#define TG_NN_NORM_LAYERS_H

#include <stdbool.h>
#include <stdint.h>

#include "nn/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double eps;           /* 0: 1e-5 */
    bool no_affine;       /* affine=False */
    bool defaults_filled; /* set by TG_GROUP_NORM_OPTS(...): every field as written (core/options.h) */
} tg_group_norm_opts;
#define TG_GROUP_NORM_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_group_norm_opts, .eps = 1e-5, __VA_ARGS__)

/* torch.nn.GroupNorm(num_groups, num_channels): normalises each sample's channels in
 * num_groups groups (biased variance, over the group's channels and all positions),
 * then scales per channel: "weight" ones, "bias" zeros [num_channels] unless
 * no_affine. Input [N, C, *]. Fails unless num_groups divides num_channels. */
tg_module *tg_nn_group_norm(int64_t num_groups, int64_t num_channels, tg_group_norm_opts opts);

typedef struct {
    double eps;               /* 0: 1e-5 */
    double momentum;          /* 0: 0.1; a real 0: TG_INSTANCE_NORM_OPTS(.momentum = 0) */
    bool affine;              /* PyTorch's default is affine=False */
    bool track_running_stats; /* PyTorch's default is False */
    bool defaults_filled;     /* set by TG_INSTANCE_NORM_OPTS(...): every field as written (core/options.h) */
} tg_instance_norm_opts;
#define TG_INSTANCE_NORM_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_instance_norm_opts, TG_INSTANCE_NORM_DEFAULTS, __VA_ARGS__)
#define TG_INSTANCE_NORM_DEFAULTS .eps = 1e-5, .momentum = 0.1

/* torch.nn.InstanceNorm2d(num_features): normalises each [n, c] plane over H, W
 * (biased variance). affine: "weight" ones, "bias" zeros [C]. track_running_stats:
 * buffers "running_mean" zeros, "running_var" ones, "num_batches_tracked" (int64 0,
 * left at 0 as PyTorch's InstanceNorm leaves it);
 * training updates them with the mean over the batch of each plane's mean and
 * unbiased variance (PyTorch's repeat-then-average) and eval normalises with them.
 * Input [N, C, H, W] or unbatched [C, H, W]. */
tg_module *tg_nn_instance_norm2d(int64_t num_features, tg_instance_norm_opts opts);

#ifdef __cplusplus
}
#endif
#endif
