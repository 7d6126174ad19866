/* CUDA entry point of ops/cuda/fake_quantize.cu (weak: NULL without CUDA), called by
 * ops/fake_quantize.c. */
#ifndef TG_OPS_CUDA_FAKE_QUANTIZE_H
#define TG_OPS_CUDA_FAKE_QUANTIZE_H

#include <stdint.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (x's dtype) and mask (bool), both contiguous, from contiguous x (float32 or
 * float64) by TG_FAKE_QUANTIZE. Per tensor when scales is NULL (scale, zero_point);
 * else per channel: element i uses scales[c] (float32) and zero_points[c] (int64),
 * c = i / inner % channels, both contiguous on x's device. */
tg_status tg_cuda_fake_quantize(tg_tensor *out, tg_tensor *mask, tg_tensor *x, float scale, int64_t zero_point,
                                tg_tensor *scales, tg_tensor *zero_points, int64_t inner, int64_t channels,
                                int64_t quant_min, int64_t quant_max) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
