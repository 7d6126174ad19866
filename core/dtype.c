#include "core/dtype.h"

#include "core/dtype_impl.h"

static const struct {
    const char *name;
    bool floating;
    int rank; /* promotion order */
} info[TG_NUM_DTYPES] = {
    [TG_FLOAT32] = {"float32", true, 5}, [TG_FLOAT64] = {"float64", true, 6},   [TG_INT64] = {"int64", false, 3},
    [TG_INT32] = {"int32", false, 2},    [TG_UINT8] = {"uint8", false, 1},      [TG_BOOL] = {"bool", false, 0},
    [TG_FLOAT16] = {"float16", true, 4}, [TG_BFLOAT16] = {"bfloat16", true, 4},
};

static bool valid(tg_dtype d) { return (unsigned)d < TG_NUM_DTYPES; }

size_t tg_dtype_size(tg_dtype d) { return tg_dtype_size_inline(d); }
const char *tg_dtype_name(tg_dtype d) { return valid(d) ? info[d].name : "invalid"; }
bool tg_dtype_is_floating(tg_dtype d) { return valid(d) && info[d].floating; }
bool tg_dtype_is_supported(tg_dtype d) { return valid(d); }
bool tg_dtype_is_low_precision(tg_dtype d) { return tg_dtype_is_low_precision_inline(d); }

tg_dtype tg_promote_types(tg_dtype a, tg_dtype b) {
    if (info[a].rank == info[b].rank && a != b) return TG_FLOAT32; /* float16 with bfloat16 */
    return info[a].rank >= info[b].rank ? a : b;
}
