/* float16 and bfloat16 <-> float32, bit for bit as PyTorch (c10/util/Half.h,
 * c10/util/BFloat16.h): the one definition the CPU (C) and CUDA (nvcc) both compile,
 * so a tensor rounds the same on either device. Storage is the raw uint16_t.
 *
 * - float32 -> either: round to nearest, ties to even; overflow gives Inf; float16
 *   subnormals are rounded exactly (no flush to zero).
 * - NaN stays a quiet NaN: float16 keeps the sign (0x7E00 / 0xFE00, as c10's
 *   fp16_ieee_from_fp32_value); bfloat16 gives 0x7FC0 (c10's scalar
 *   round_to_nearest_even; PyTorch's AVX2/AVX512 loops give 0xFFFF, also a NaN).
 * - either -> float32 is exact; a float16 signalling NaN comes back quiet (c10 goes
 *   through a float multiply there), a bfloat16 one keeps its bits (c10 shifts).
 * - float64 goes through float32, as PyTorch's casts do (static_cast<c10::Half>(double)
 *   converts to float first), so a double can round twice; tests/fixtures/lowp.txt
 *   holds such cases.
 * Integer-only arithmetic: no dependence on the FPU's flush-to-zero or rounding mode. */
#ifndef TG_CORE_LOWP_H
#define TG_CORE_LOWP_H

#include <stdint.h>
#include <string.h>

#include "core/host_device.h"

TG_HD_INLINE uint32_t tg_float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

TG_HD_INLINE float tg_bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Adds 1 to the kept bits when the dropped ones (rem, of `half` = the midpoint) round up. */
TG_HD_INLINE uint32_t tg_round_half_even(uint32_t kept, uint32_t rem, uint32_t half) {
    return kept + (rem > half || (rem == half && (kept & 1u)));
}

TG_HD_INLINE uint16_t tg_float_to_bf16_bits(float f) {
    uint32_t u = tg_float_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

TG_HD_INLINE float tg_bf16_bits_to_float(uint16_t h) { return tg_bits_float((uint32_t)h << 16); }

TG_HD_INLINE uint16_t tg_float_to_half_bits(float f) {
    uint32_t u = tg_float_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u, ax = u & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);  /* NaN */
    if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* >= 65520: Inf (65504 is odd) */
    if (ax >= 0x38800000u) {                                  /* a normal float16: rebias, drop 13 bits */
        uint32_t r = ax - 0x38000000u;
        return (uint16_t)(sign | tg_round_half_even(r >> 13, r & 0x1FFFu, 0x1000u));
    }
    if (ax <= 0x33000000u) return (uint16_t)sign; /* <= 2^-25: rounds to (signed) zero */
    /* A subnormal float16 m * 2^-24: the 24-bit significand shifted right by 126 - exponent. */
    uint32_t shift = 126u - (ax >> 23), mant = (ax & 0x7FFFFFu) | 0x800000u;
    uint32_t m = tg_round_half_even(mant >> shift, mant & ((1u << shift) - 1u), 1u << (shift - 1u));
    return (uint16_t)(sign | m); /* m == 0x400 is the smallest normal, correctly encoded */
}

TG_HD_INLINE float tg_half_bits_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return tg_bits_float(sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0u));
    if (e != 0) return tg_bits_float(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0) return tg_bits_float(sign);
    e = 113u; /* subnormal m * 2^-24: normalise */
    while (!(m & 0x400u)) {
        m <<= 1;
        e--;
    }
    return tg_bits_float(sign | (e << 23) | ((m & 0x3FFu) << 13));
}

#endif
