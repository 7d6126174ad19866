/* Eager-mode static quantisation (torch.ao.quantization, PyTorch 1.13): fuse, prepare,
 * calibrate, convert, for models whose layers run in the order they are registered
 * (Sequentials, such as the tutorials' LeNet), wrapped in a QuantWrapper.
 *
 *     model = tg_quant_wrapper(lenet);                      // quant -> lenet -> dequant
 *     tg_fuse_modules(model, "module.0", "module.1");       // Conv2d + ReLU -> ConvReLU2d
 *     tg_qconfig qconfig = tg_get_default_qconfig("onednn");
 *     tg_quant_prepare(model, qconfig);                     // observers
 *     ... forwards on a few batches (calibration) ...
 *     tg_quant_convert(model, qconfig);                     // int8 modules
 *
 * The converted model takes float32 CPU input and returns float32; in between,
 * activations are uint8 tensors holding quint8 values. tapegrad's tensors carry no
 * quantisation parameters (PyTorch's quantised tensors do), so every module that
 * reads quint8 activations keeps the scale and zero point of its input in buffers
 * "input_scale" / "input_zero_point", fixed at conversion (and saved and loaded with
 * the rest). Modules after conversion, with their state dict names:
 * - Quantize (the QuantStub): "scale", "zero_point" (float32 / int64 [1], PyTorch's).
 * - QuantizedConv2d / QuantizedConvReLU2d, QuantizedLinear / QuantizedLinearReLU:
 *   "weight" (uint8: the int8 values + 128, tapegrad having no int8 dtype), "bias"
 *   (float32), "weight_scale" (float32 [out]: per-channel symmetric, so
 *   "weight_zero_point" is int64 zeros), "scale" / "zero_point" (the output's, [1]),
 *   and the input's. PyTorch's names are "weight", "bias", "scale", "zero_point"
 *   (its weight is a quantised tensor holding the per-channel scales; Linear packs
 *   weight and bias in "_packed_params"). int8 GEMM on the CPU (ops/cpu/qconv.h).
 * - QuantizedMaxPool2d: max pooling of the uint8 values (same scale and zero point).
 * - Flatten and Identity stay; DeQuantize (the DeQuantStub) returns float32.
 * Fixture tests compare the converted LeNet with PyTorch's (onednn engine). */
#ifndef TG_QUANT_STATIC_QUANT_H
#define TG_QUANT_STATIC_QUANT_H

#include "nn/module.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.ao.quantization.QConfig: what observes activations (an observer, or a
 * FakeQuantize for QAT) and weights. Each function makes a new module. */
typedef struct {
    tg_module *(*activation)(void);
    tg_module *(*weight)(void);
} tg_qconfig;

/* get_default_qconfig(backend): "onednn" (HistogramObserver, reduce_range false;
 * PerChannelMinMaxObserver qint8 per_channel_symmetric), "x86" / "fbgemm" (the same
 * with reduce_range true for activations), "qnnpack" (reduce_range false; per-tensor
 * symmetric MinMaxObserver weights, which convert refuses: the int8 kernels take
 * per-channel weights). Unknown backends give {NULL, NULL} + error. */
tg_qconfig tg_get_default_qconfig(const char *backend);

/* torch.ao.quantization.QuantStub / DeQuantStub (identity until converted) and
 * QuantWrapper(module): children "quant", "dequant", "module" (PyTorch's order);
 * forward dequant(module(quant(x))). The wrapper takes ownership of module (freed on
 * failure). */
tg_module *tg_nn_quant_stub(void);
tg_module *tg_nn_dequant_stub(void);
tg_module *tg_quant_wrapper(tg_module *module);

/* torch.ao.quantization.fuse_modules(model, [first, second]) for Conv2d + ReLU and
 * Linear + ReLU (dotted names from model, siblings): first becomes ConvReLU2d /
 * LinearReLU (children "0" = the Conv2d / Linear, "1" = the ReLU, as PyTorch's
 * intrinsic modules), second becomes Identity. */
tg_status tg_fuse_modules(tg_module *model, const char *first, const char *second);

/* prepare(model, inplace=True): an observer made by qconfig.activation is added as
 * the child "activation_post_process" of every QuantStub, Conv2d, Linear,
 * ConvReLU2d and LinearReLU, and observes (or, a FakeQuantize, replaces) its output
 * on each forward. Fused modules' insides are not observed. */
tg_status tg_quant_prepare(tg_module *model, tg_qconfig qconfig);

/* convert(model, inplace=True): walks the model in execution order (a QuantWrapper:
 * quant, module, dequant; any other container: its children in order) and replaces
 * every observed module by its int8 version. Weights are quantised by an observer
 * made by qconfig.weight, which must be per-channel symmetric qint8 (PyTorch keeps
 * the qconfig on each module; C passes it again); a QAT module's own
 * weight_fake_quant is used instead. Fails (modules before the failing one already
 * converted) on a module with no int8 version after a QuantStub (an unfused ReLU,
 * say), a layer that was not calibrated, or a non-CPU / non-float32 model. */
tg_status tg_quant_convert(tg_module *model, tg_qconfig qconfig);

/* The converted model's structure without calibration, for tg_load_state_dict to
 * fill from a saved int8 model: as tg_quant_convert on a prepared (fused, QAT or
 * not) model, with every scale 1 and zero point 0 until loaded. Loading rebuilds the
 * int8 kernels' weights (the layers watch their buffers' versions), so the loaded
 * model computes exactly what the saved one did:
 *
 *     tg_module *model = tg_quant_wrapper(make_lenet());
 *     ... the same tg_fuse_modules ...
 *     tg_quant_prepare(model, qconfig);
 *     tg_quant_convert_for_load(model, qconfig);
 *     tg_load_state_dict(model, "lenet_int8.safetensors", true);
 */
tg_status tg_quant_convert_for_load(tg_module *model, tg_qconfig qconfig);

#ifdef __cplusplus
}
#endif

#endif
