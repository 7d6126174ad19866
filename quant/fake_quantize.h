/* FakeQuantize (torch.ao.quantization.FakeQuantize, PyTorch 1.13): the module that
 * quantisation-aware training puts on weights and activations. Its forward, for x:
 *   1. when the observer is enabled: the observer records x, and the buffers scale
 *      and zero_point get its calculate_qparams();
 *   2. when fake quantisation is enabled: y = fake_quantize_per_tensor_affine(x,
 *      scale, zero_point, quant_min, quant_max), or the per-channel op along the
 *      observer's ch_axis when the observer is per channel (ops/fake_quantize.h: the
 *      straight-through estimator backward); else y = x.
 * Members, as PyTorch's state dict: buffers "fake_quant_enabled" and
 * "observer_enabled" (uint8 [1], 1 or 0), "scale" (float32, [1] until a per-channel
 * observer has seen x) and "zero_point" (int32), and the observer as the child
 * "activation_post_process". */
#ifndef TG_QUANT_FAKE_QUANTIZE_H
#define TG_QUANT_FAKE_QUANTIZE_H

#include <stdbool.h>

#include "nn/module.h"
#include "quant/observer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FakeQuantize(observer=...): takes ownership of observer (any of quant/observer.h's,
 * whose quant_min / quant_max and scheme it uses), also on failure. NULL + error
 * when observer is NULL or not an observer. PyTorch's FakeQuantize() is
 * tg_nn_fake_quantize(tg_nn_moving_average_minmax_observer((tg_observer_opts){0}))
 * (quint8, [0, 255]); its default_per_channel_weight_fake_quant is the moving-average
 * per-channel observer with {.dtype = TG_QINT8, .qscheme = TG_PER_CHANNEL_SYMMETRIC}. */
tg_module *tg_nn_fake_quantize(tg_module *observer);

/* torch.ao.quantization.enable_observer / disable_observer / enable_fake_quant /
 * disable_fake_quant applied with model.apply(): every FakeQuantize in model (itself
 * included). Returns the number of FakeQuantize modules changed. */
int tg_fake_quant_enable_observer(tg_module *model, bool enabled);
int tg_fake_quant_enable_fake_quant(tg_module *model, bool enabled);
/* True for a module made by tg_nn_fake_quantize. */
bool tg_is_fake_quantize(tg_module *m);

#ifdef __cplusplus
}
#endif

#endif
