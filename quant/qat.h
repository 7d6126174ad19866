/* Quantisation-aware training (torch.ao.quantization.prepare_qat, PyTorch 1.13,
 * eager mode): the float model trains with fake quantisation of its weights and
 * activations (straight-through gradients, ops/fake_quantize.h), then
 * tg_quant_convert (quant/static_quant.h) turns it into the same int8 modules as
 * post-training quantisation, with the qparams learnt in training.
 *
 *     model = tg_quant_wrapper(lenet);
 *     tg_fuse_modules(model, "module.0", "module.1");   ... (fuse_modules_qat)
 *     tg_qconfig qc = tg_get_default_qat_qconfig("onednn");
 *     tg_quant_prepare_qat(model, qc);
 *     ... train ...
 *     tg_eval(model);
 *     tg_quant_convert(model, qc);
 */
#ifndef TG_QUANT_QAT_H
#define TG_QUANT_QAT_H

#include "nn/module.h"
#include "quant/static_quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* get_default_qat_qconfig(backend, version=0): activations FakeQuantize with a
 * MovingAverageMinMaxObserver (quint8 [0, 255]; reduce_range for "x86" / "fbgemm"),
 * weights default_per_channel_weight_fake_quant (MovingAveragePerChannelMinMaxObserver,
 * qint8 per_channel_symmetric, [-128, 127]). "onednn", "x86", "fbgemm"; else
 * {NULL, NULL} + error. (version 1, PyTorch's default, fuses the same observer and
 * fake quantisation into one op, FusedMovingAvgObsFakeQuantize.) */
tg_qconfig tg_get_default_qat_qconfig(const char *backend);

/* prepare_qat(model, inplace=True): every Conv2d, ConvReLU2d, Linear and LinearReLU
 * becomes its QAT module (QATConv2d, QATConvReLU2d, QATLinear, QATLinearReLU: the
 * same weight and bias tensors, a child "weight_fake_quant" made by qconfig.weight,
 * forward conv/linear with the fake-quantised weight, then ReLU when fused), then
 * tg_quant_prepare adds qconfig.activation (a FakeQuantize) on every output. State
 * dict names as PyTorch's QAT modules: "weight", "bias", "weight_fake_quant.*",
 * "activation_post_process.*". The model is put in training mode. */
tg_status tg_quant_prepare_qat(tg_module *model, tg_qconfig qconfig);

#ifdef __cplusplus
}
#endif

#endif
