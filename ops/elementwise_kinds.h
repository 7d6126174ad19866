/* The elementwise kernels' op codes, shared by ops/elementwise.c and
 * ops/cuda/elementwise.cu so both backends compute the same list; the unary kinds
 * are generated from the formula rows of ops/unary_formulas.h. */
#ifndef TG_OPS_ELEMENTWISE_KINDS_H
#define TG_OPS_ELEMENTWISE_KINDS_H

#include <stdbool.h>

#include "core/host_device.h"
#include "ops/binary_formulas.h"
#include "ops/unary_formulas.h"

/* out = f(x; a, b) with two scalar parameters: one kind per row of
 * ops/unary_formulas.h (TG_UNARY_NEG, TG_UNARY_EXP, ...), in the rows' order. */
#define TG_UNARY_KIND_ENTRY(KIND, name, api, saves, autocast, expr, grad) TG_UNARY_##KIND,
typedef enum { TG_UNARY_FLOAT_FORMULAS(TG_UNARY_KIND_ENTRY) TG_UNARY_COUNT } tg_unary_kind;
#undef TG_UNARY_KIND_ENTRY

/* Whether int32 / int64 tensors have the kind (a row of TG_UNARY_INT_FORMULAS); the
 * same answer on both devices. */
#define TG_UNARY_INT_KIND_CASE(KIND, expr) case TG_UNARY_##KIND:
TG_HD_INLINE bool tg_unary_int_kind_ok(tg_unary_kind kind) {
    switch (kind) {
        TG_UNARY_INT_FORMULAS(TG_UNARY_INT_KIND_CASE)
        return true;
    default: return false;
    }
}
#undef TG_UNARY_INT_KIND_CASE

/* out = f(a, b), broadcast: one kind per row of ops/binary_formulas.h, pow, and the
 * comparisons last (they give bool: TG_BINARY_IS_COMPARISON). */
#define TG_BINARY_KIND_ENTRY(KIND, name, expr, saves, grad_a, grad_b) TG_BINARY_##KIND,
#define TG_BINARY_COMPARE_KIND_ENTRY(KIND, name, expr) TG_BINARY_##KIND,
typedef enum {
    TG_BINARY_FORMULAS(TG_BINARY_KIND_ENTRY) TG_BINARY_POW,
    TG_BINARY_FLOAT_FORMULAS(TG_BINARY_KIND_ENTRY) TG_BINARY_COMPARE_FORMULAS(TG_BINARY_COMPARE_KIND_ENTRY)
        TG_BINARY_COUNT
} tg_binary_kind;
#undef TG_BINARY_KIND_ENTRY
#undef TG_BINARY_COMPARE_KIND_ENTRY

#define TG_BINARY_IS_COMPARISON(k) ((k) >= TG_BINARY_EQ)

#endif
