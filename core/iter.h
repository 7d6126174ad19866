/* Strided iteration over up to TG_ITER_MAX operands broadcast to one shape: the
 * general path of every CPU elementwise kernel (contiguous inputs take fast paths
 * in the kernels themselves). Dims are coalesced where memory allows, so a
 * contiguous or row-broadcast case becomes a few long rows. */
#ifndef TG_CORE_ITER_H
#define TG_CORE_ITER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_ITER_MAX 4

typedef struct {
    int n;    /* operands */
    int ndim; /* after coalescing, outer to inner */
    int64_t shape[TG_MAX_DIMS];
    int64_t strides[TG_ITER_MAX][TG_MAX_DIMS]; /* in bytes; 0 on broadcast dims */
    char *data[TG_ITER_MAX];
    int64_t numel;
} tg_iter;

/* Operands must broadcast to `*shape` (the caller has checked). The shape by pointer:
 * copying it into the call showed in the per-op profile (bench/overhead.c). */
void tg_iter_init(tg_iter *it, const tg_shape *shape, int n, tg_tensor *const *operands);

/* Called once per innermost row: ptrs[i] points at operand i's first element of the
 * row, strides[i] is its inner stride in bytes, n the row length. */
typedef void (*tg_iter_row_fn)(char **ptrs, const int64_t *strides, int64_t n, void *ctx);

/* Runs fn over every row; rows are split across the thread pool (core/parallel.h) when
 * the work is large enough to pay for it and `parallel` allows (false for
 * order-dependent work). */
void tg_iter_run(const tg_iter *it, tg_iter_row_fn fn, void *ctx, bool parallel);

/* Element counts above which CPU kernels go parallel. */
#define TG_PARALLEL_GRAIN 32768

#ifdef __cplusplus
}
#endif
#endif
