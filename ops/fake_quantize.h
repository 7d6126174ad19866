/* Fake quantisation (torch.fake_quantize_per_tensor_affine and
 * torch.fake_quantize_per_channel_affine, PyTorch 1.13): x is rounded to the grid
 * of a quantised type and back, y = (clamp(round(x / scale) + zp, qmin, qmax) - zp)
 * * scale (ops/fake_quantize_formula.h has the exact arithmetic), so training sees
 * the quantisation error. The gradient is the straight-through estimator: the
 * incoming gradient where round(x / scale) + zp lies in [quant_min, quant_max], 0
 * where it was clamped (PyTorch's cachemask backward). No gradient reaches scale or
 * zero_point. float32 and float64 inputs, CPU and CUDA. Results are new references
 * in the current scope; NULL + error on bad arguments. */
#ifndef TG_OPS_FAKE_QUANTIZE_H
#define TG_OPS_FAKE_QUANTIZE_H

#include <stdint.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One scale (used as float32) and zero point; quant_min <= zero_point <= quant_max. */
tg_tensor *tg_fake_quantize_per_tensor_affine(tg_tensor *x, double scale, int64_t zero_point, int64_t quant_min,
                                              int64_t quant_max);
/* One scale and zero point per slice of x along axis: scale float32 [C], zero_point
 * int32 or int64 [C] (PyTorch takes int32 or float), C = x's size along axis, on
 * x's device. */
tg_tensor *tg_fake_quantize_per_channel_affine(tg_tensor *x, tg_tensor *scale, tg_tensor *zero_point, int axis,
                                               int64_t quant_min, int64_t quant_max);

#ifdef __cplusplus
}
#endif

#endif
