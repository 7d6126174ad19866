/* The formula of fake quantisation, the one definition both devices compile:
 * ops/fake_quantize.c's CPU loop and ops/cuda/fake_quantize.cu's kernel expand
 * TG_FAKE_QUANTIZE, so the CPU tests check the arithmetic the GPU runs. It is
 * PyTorch 1.13's fake_quantize_tensor_cachemask_kernel (and the per-channel one):
 *
 *   inv_scale = 1.0f / scale                        (float32)
 *   q = (int64)(zero_point + nearbyint(x * inv_scale))   (x's type: float or double)
 *   y = (clamp(q, quant_min, quant_max) - zero_point) * scale
 *   inside = quant_min <= q <= quant_max            (the straight-through mask)
 *
 * NaN and +-Inf in x come out as they went in (a NaN scale gives NaN), with a zero
 * mask; PyTorch casts them to int64 (undefined; quant_min on x86), so its fake
 * quantisation of NaN or Inf is a plausible finite number. q is clamped as a float
 * before any integer conversion, so no input is undefined behaviour.
 *
 * x: T (float or double); scale, inv_scale: float; zero_point, quant_min, quant_max:
 * int64_t; y: T lvalue; inside: bool lvalue. TG_NEARBYINT (core/typed_libm.h) is
 * round-half-even of T on both devices. */
#ifndef TG_OPS_FAKE_QUANTIZE_FORMULA_H
#define TG_OPS_FAKE_QUANTIZE_FORMULA_H

#include "core/typed_libm.h"

#define TG_FAKE_QUANTIZE(T, x, scale, inv_scale, zero_point, quant_min, quant_max, y, inside)                 \
    do {                                                                                                      \
        T r_ = (T)(zero_point) + TG_NEARBYINT((x) * (inv_scale));                                             \
        if ((x) - (x) != 0 || r_ != r_) {                                                                     \
            (y) = (x) - (x) != 0 ? (x) : (T)NAN;                                                              \
            (inside) = false;                                                                                 \
        } else {                                                                                              \
            int64_t c_ = r_ < (T)(quant_min) ? (quant_min) : r_ > (T)(quant_max) ? (quant_max) : (int64_t)r_; \
            (y) = (T)((double)(c_ - (zero_point)) * (double)(scale));                                         \
            (inside) = (T)(quant_min) <= r_ && r_ <= (T)(quant_max);                                          \
        }                                                                                                     \
    } while (0)

#endif
