/* Element types. TG_FLOAT32 is zero, so a zeroed options struct means float32. */
#ifndef TG_CORE_DTYPE_H
#define TG_CORE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TG_FLOAT32 = 0,
    TG_FLOAT64,
    TG_INT64,
    TG_INT32,
    TG_UINT8,
    TG_BOOL,
    TG_FLOAT16,  /* IEEE half: 2 bytes, stored as the bits (core/lowp.h) */
    TG_BFLOAT16, /* bfloat16: float32's top 2 bytes (core/lowp.h) */
    TG_NUM_DTYPES
} tg_dtype;

/* Bytes per element. */
size_t tg_dtype_size(tg_dtype dtype);
/* "float32", "int64", ... (PyTorch's names without the "torch." prefix). */
const char *tg_dtype_name(tg_dtype dtype);
bool tg_dtype_is_floating(tg_dtype dtype);
/* True for the dtypes tensors can have (all of the enum). */
bool tg_dtype_is_supported(tg_dtype dtype);
/* float16 or bfloat16: the low-precision floating dtypes, which most ops compute in
 * float32 and round once (docs/mixed-precision.md). */
bool tg_dtype_is_low_precision(tg_dtype dtype);
/* torch.promote_types: bool < uint8 < int32 < int64 < float16, bfloat16 < float32 <
 * float64, and float16 with bfloat16 gives float32. */
tg_dtype tg_promote_types(tg_dtype a, tg_dtype b);

#ifdef __cplusplus
}
#endif
#endif
