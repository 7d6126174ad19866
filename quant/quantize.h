/* Post-training dynamic quantisation of Linear (torch.ao.quantization.quantize_dynamic
 * with dtype=torch.qint8): weights stored as int8 with a scale (zero point 0), inputs
 * quantised to uint8 on every call from their own range, an exact uint8 x int8 ->
 * int32 product (ops/cpu/qgemm.h: AVX512-VNNI where the CPU has it, portable C
 * elsewhere), and float32 out.
 *
 * The numbers are PyTorch 1.13's:
 * - weights: the default qconfig's MinMaxObserver(qint8, per_tensor_symmetric):
 *   scale = max(|min(w, 0)|, max(w, 0)) / 127.5 in float32 (at least float32 eps),
 *   q = clamp(nearbyint(w * (1 / scale)), -128, 127). per_channel is
 *   per_channel_dynamic_qconfig (the same per output row).
 * - inputs: min and max over the whole input (with 0), ChooseQuantizationParams with
 *   reduce_range (quint8 in [0, 127], as fbgemm and onednn on x86): scale =
 *   (max - min) / 127, a nudged zero point, q = clamp(nearbyint(x / scale) + zp, 0, 255).
 * - out = (float)(acc - zp * sum_k q_w) * x_scale * w_scale + bias.
 * The forward records no gradient (PyTorch's quantised modules are inference-only)
 * and runs on float32 CPU tensors. */
#ifndef TG_QUANT_QUANTIZE_H
#define TG_QUANT_QUANTIZE_H

#include <stdbool.h>

#include "nn/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    bool per_channel; /* per_channel_dynamic_qconfig: one scale per output row */
} tg_quantize_opts;

/* quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8), in place: every Linear
 * among model's descendants is replaced by a DynamicQuantizedLinear made from its
 * current float32 CPU weights. Returns model, or, when model is itself a Linear, its
 * quantised replacement (model is then freed). NULL + error (model untouched) when
 * a Linear is not float32 on the CPU. */
tg_module *tg_quantize_dynamic(tg_module *model, tg_quantize_opts opts);
/* One DynamicQuantizedLinear from a Linear (which stays the caller's). Its members,
 * all buffers, so that tg_save_state_dict / tg_load_state_dict save and load the
 * quantised model: "weight" (uint8 [out, in]: the int8 values + 128, i.e. the same
 * numbers as quint8 with zero point 128, one byte each), "scale" (float32, [1] or
 * [out_features]), "zero_point" (int64, zeros: of the int8 values) and "bias"
 * (float32) when the Linear has one. Load into a model quantised with the same
 * opts (the shapes are checked). */
tg_module *tg_nn_dynamic_quantized_linear(tg_module *linear, tg_quantize_opts opts);
/* The int8 weight of a DynamicQuantizedLinear as a new int32 [out, in] tensor (in
 * the current scope), or NULL + error for another kind of module. */
tg_tensor *tg_quantized_linear_weight(tg_module *qlinear);

/* True when the int8 GEMM runs the AVX512-VNNI kernel on this CPU (else portable C). */
bool tg_quantize_uses_vnni(void);
/* True when, beside it, products of 16 rows or more run on AMX tiles (AMX-INT8, granted
 * by the OS, TG_AMX not 0): the same exact sums. */
bool tg_quantize_uses_amx(void);

#ifdef __cplusplus
}
#endif

#endif
