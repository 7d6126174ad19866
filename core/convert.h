/* Reading and writing one element of any dtype as a double: the slow, general path
 * for casts, printing and item(). Kernels use typed loops instead. float16 and
 * bfloat16 go through float32 (core/lowp.h), as PyTorch's casts do. */
#ifndef TG_CORE_CONVERT_H
#define TG_CORE_CONVERT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/lowp.h"

static inline double tg_load_as_double(const void *p, tg_dtype d) {
    switch (d) {
    case TG_FLOAT32: return *(const float *)p;
    case TG_FLOAT64: return *(const double *)p;
    case TG_INT64: return (double)*(const int64_t *)p;
    case TG_INT32: return *(const int32_t *)p;
    case TG_UINT8: return *(const uint8_t *)p;
    case TG_BOOL: return *(const bool *)p;
    case TG_FLOAT16: return tg_half_bits_to_float(*(const uint16_t *)p);
    case TG_BFLOAT16: return tg_bf16_bits_to_float(*(const uint16_t *)p);
    default: return 0;
    }
}

static inline void tg_store_from_double(void *p, tg_dtype d, double v) {
    switch (d) {
    case TG_FLOAT32: *(float *)p = (float)v; break;
    case TG_FLOAT64: *(double *)p = v; break;
    case TG_INT64: *(int64_t *)p = (int64_t)v; break;
    case TG_INT32: *(int32_t *)p = (int32_t)v; break;
    case TG_UINT8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
    case TG_BOOL: *(bool *)p = v != 0; break;
    case TG_FLOAT16: *(uint16_t *)p = tg_float_to_half_bits((float)v); break;
    case TG_BFLOAT16: *(uint16_t *)p = tg_float_to_bf16_bits((float)v); break;
    default: break;
    }
}

#endif
