/* Internal to the normalisation modules (nn/layers.c's BatchNorm1d/2d, nn/norm_layers.c,
 * distributed/sync_batch_norm.c): their parameters and running-statistics buffers, and
 * the state, repr, constructor and momentum factor the batch norms share (torch's
 * _NormBase and _BatchNorm). Static inline, so that //distributed:dist (linked against
 * libtapegrad.so, which exports only the public API) needs no extra symbol.
 * Not installed, not part of the API. */
#ifndef TG_NN_NORM_STATE_H
#define TG_NN_NORM_STATE_H

#include <stdio.h>

#include "core/scope.h"
#include "nn/layer_helpers.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "ops/norm_running.h"

/* _NormBase's tensors for c channels: "weight" (ones) and "bias" (zeros) when affine;
 * "running_mean" (zeros), "running_var" (ones) and "num_batches_tracked" (int64 0)
 * when track. */
static inline tg_status nn_register_norm_state(tg_module *m, int64_t c, bool affine, bool track) {
    tg_status status = TG_OK;
    TG_SCOPE {
        if (affine) {
            status = tg_register_parameter(m, "weight", tg_ones(TG_SHAPE(c), (tg_opts){0}));
            if (!status) status = tg_register_parameter(m, "bias", tg_zeros(TG_SHAPE(c), (tg_opts){0}));
        }
        if (!status && track) {
            status = tg_register_buffer(m, "running_mean", tg_zeros(TG_SHAPE(c), (tg_opts){0}));
            if (!status) status = tg_register_buffer(m, "running_var", tg_ones(TG_SHAPE(c), (tg_opts){0}));
            if (!status)
                status = tg_register_buffer(m, "num_batches_tracked",
                                            tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = TG_INT64}));
        }
    }
    return status;
}

/* BatchNorm1d/2d's and SyncBatchNorm's state. */
typedef struct {
    int64_t num_features;
    double eps, momentum;
    bool cumulative, affine, track;
} nn_batch_norm_state;

static inline void nn_batch_norm_repr(tg_module *self, char *buf, size_t size) {
    nn_batch_norm_state *s = tg_module_state(self);
    snprintf(buf, size, "%lld, eps=%g, momentum=%g, affine=%s, track_running_stats=%s", (long long)s->num_features,
             s->eps, s->momentum, s->affine ? "True" : "False", s->track ? "True" : "False");
}

/* A batch norm module of `type` (state nn_batch_norm_state) over c channels; ctor names
 * the constructor in the error for c <= 0. */
static inline tg_module *nn_batch_norm_new(const tg_module_type *type, const char *ctor, int64_t c,
                                           tg_batch_norm_opts opts) {
    if (c <= 0) {
        tg_error("%s: num_features must be positive, got %lld", ctor, (long long)c);
        return NULL;
    }
    tg_module *m = tg_module_new(type, sizeof(nn_batch_norm_state));
    if (!m) return NULL;
    nn_batch_norm_state *s = tg_module_state(m);
    *s = (nn_batch_norm_state){c,
                               tg_option(opts.eps, 1e-5, opts.defaults_filled),
                               tg_option(opts.momentum, 0.1, opts.defaults_filled),
                               opts.cumulative,
                               !opts.no_affine,
                               !opts.no_track_running_stats};
    return nn_finish(m, nn_register_norm_state(m, c, s->affine, s->track));
}

/* _BatchNorm.forward's exponential_average_factor: the momentum; in a training step of a
 * module that tracks running statistics, num_batches_tracked += 1 first, and
 * 1 / num_batches_tracked when cumulative (tg_norm_count_batch). */
static inline tg_status nn_batch_norm_factor(tg_module *self, const nn_batch_norm_state *s, double *factor) {
    *factor = s->momentum;
    if (!tg_is_training(self) || !s->track) return TG_OK;
    return tg_norm_count_batch(tg_module_buffer(self, "num_batches_tracked"), s->cumulative, s->momentum, factor);
}

#endif
