/* Inline forms of core/dtype.h's per-element queries, for the library's own files.
 * The library asks them several times per op (creating, iterating, dispatching), and
 * as calls into another file they showed in the per-op profile (bench/overhead.c);
 * core/dtype.c's exported functions are defined with these, so the two agree. */
#ifndef TG_CORE_DTYPE_IMPL_H
#define TG_CORE_DTYPE_IMPL_H

#include "core/dtype.h"

/* Bytes per element; 0 for a value outside the enum. */
static inline size_t tg_dtype_size_inline(tg_dtype d) {
    switch (d) {
    case TG_FLOAT64:
    case TG_INT64: return 8;
    case TG_FLOAT32:
    case TG_INT32: return 4;
    case TG_FLOAT16:
    case TG_BFLOAT16: return 2;
    case TG_UINT8:
    case TG_BOOL: return 1;
    default: return 0;
    }
}

static inline bool tg_dtype_is_low_precision_inline(tg_dtype d) { return d == TG_FLOAT16 || d == TG_BFLOAT16; }

#endif
