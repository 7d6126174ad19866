/* Internal to the built-in modules' sources (nn/layers.c, nn/conv_layers.c,
 * nn/norm_layers.c, nn/attention.c, nn/transformer.c): option defaults, weight init, the constructors' common exit, shape text for
 * error messages. Not installed, not part of the API. */
#ifndef TG_NN_LAYER_HELPERS_H
#define TG_NN_LAYER_HELPERS_H

#include <math.h>
#include <stddef.h>

#include "core/option_defaults.h" /* tg_option: a field whose zero means the default */
#include "core/tensor.h"
#include "nn/module.h"

/* Constructors make their tensors inside a TG_SCOPE of their own, so that the
 * module's reference (taken by tg_register_*) is the only one left; on failure the
 * half-made module is freed. */
static inline tg_module *nn_finish(tg_module *m, tg_status status) {
    if (status != TG_OK) {
        tg_module_free(m);
        return NULL;
    }
    return m;
}

/* kaiming_uniform_(weight, a=sqrt(5)); bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (torch.nn.Linear /
 * _ConvNd reset_parameters), registered as "weight" and "bias" (nn/layers.c). */
tg_status nn_init_weight_and_bias(tg_module *m, tg_shape weight_shape, int64_t bias_size, bool bias);

static inline const char *nn_shape_text(tg_tensor *t, char *buf, size_t size) {
    return tg_shape_str(tg_shape_of(t), buf, size);
}

#endif
