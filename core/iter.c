#include "core/iter.h"

#include "core/tensor_impl.h"

#include "core/parallel.h"

void tg_iter_init(tg_iter *it, const tg_shape *shape, int n, tg_tensor *const *operands) {
    TG_ASSERT(n <= TG_ITER_MAX);
    it->n = n;
    it->numel = tg_shape_numel_inline(shape);
    /* Broadcast each operand's strides to `shape`, dropping size-1 dims. */
    int nd = 0;
    for (int d = 0; d < shape->ndim; d++) {
        if (shape->dims[d] == 1) continue;
        it->shape[nd] = shape->dims[d];
        for (int i = 0; i < n; i++) {
            const tg_tensor *t = operands[i];
            int td = d - (shape->ndim - t->shape.ndim);
            int64_t size = (int64_t)tg_dtype_size_inline(t->dtype);
            it->strides[i][nd] = (td >= 0 && t->shape.dims[td] != 1) ? t->strides[td] * size : 0;
        }
        nd++;
    }
    /* Coalesce neighbours where, for every operand, outer stride == inner stride * inner size. */
    int out = 0;
    for (int d = 0; d < nd; d++) {
        if (out > 0) {
            bool mergeable = true;
            for (int i = 0; i < n && mergeable; i++)
                mergeable = it->strides[i][out - 1] == it->strides[i][d] * it->shape[d];
            if (mergeable) {
                it->shape[out - 1] *= it->shape[d];
                for (int i = 0; i < n; i++) it->strides[i][out - 1] = it->strides[i][d];
                continue;
            }
        }
        it->shape[out] = it->shape[d];
        for (int i = 0; i < n; i++) it->strides[i][out] = it->strides[i][d];
        out++;
    }
    it->ndim = out;
    for (int i = 0; i < n; i++) it->data[i] = tg_elem_ptr(operands[i]);
}

static void run_rows(const tg_iter *it, int64_t first, int64_t last, tg_iter_row_fn fn, void *ctx) {
    int outer = it->ndim - 1;
    int64_t inner = it->ndim ? it->shape[outer] : 1;
    int64_t inner_strides[TG_ITER_MAX];
    for (int i = 0; i < it->n; i++) inner_strides[i] = it->ndim ? it->strides[i][outer] : 0;
    /* Decompose the first row index once, then step like an odometer. */
    int64_t index[TG_MAX_DIMS] = {0};
    int64_t r = first;
    for (int d = outer - 1; d >= 0; d--) {
        index[d] = r % it->shape[d];
        r /= it->shape[d];
    }
    char *ptrs[TG_ITER_MAX];
    for (int row = 0; first + row < last; row++) {
        for (int i = 0; i < it->n; i++) {
            char *p = it->data[i];
            for (int d = 0; d < outer; d++) p += index[d] * it->strides[i][d];
            ptrs[i] = p;
        }
        fn(ptrs, inner_strides, inner, ctx);
        for (int d = outer - 1; d >= 0; d--) {
            if (++index[d] < it->shape[d]) break;
            index[d] = 0;
        }
    }
}

typedef struct {
    const tg_iter *it;
    tg_iter_row_fn fn;
    void *ctx;
} iter_job;

static void rows_chunk(int64_t first, int64_t last, void *arg) {
    const iter_job *j = arg;
    run_rows(j->it, first, last, j->fn, j->ctx);
}

/* Elements [first, last) of an iterator with at most one dim (one long row). */
static void row_part(int64_t first, int64_t last, void *arg) {
    const iter_job *j = arg;
    char *ptrs[TG_ITER_MAX];
    int64_t strides[TG_ITER_MAX];
    for (int i = 0; i < j->it->n; i++) {
        strides[i] = j->it->ndim ? j->it->strides[i][0] : 0;
        ptrs[i] = j->it->data[i] + first * strides[i];
    }
    j->fn(ptrs, strides, last - first, j->ctx);
}

void tg_iter_run(const tg_iter *it, tg_iter_row_fn fn, void *ctx, bool parallel) {
    if (it->numel == 0) return;
    int64_t inner = it->ndim ? it->shape[it->ndim - 1] : 1;
    int64_t rows = it->numel / inner;
    iter_job j = {it, fn, ctx};
    if (parallel && it->numel >= TG_PARALLEL_GRAIN && rows > 1) {
        /* Whole rows per chunk, at least TG_PARALLEL_GRAIN elements each. */
        tg_parallel_for(rows, (TG_PARALLEL_GRAIN + inner - 1) / inner, rows_chunk, &j);
    } else if (parallel && it->numel >= TG_PARALLEL_GRAIN && it->ndim <= 1) {
        /* One long row: split the row itself. */
        tg_parallel_for(it->numel, TG_PARALLEL_GRAIN, row_part, &j);
    } else if (it->ndim <= 1) {
        row_part(0, it->numel, &j); /* one row: no odometer to set up (small ops' common case) */
    } else {
        run_rows(it, 0, rows, fn, ctx);
    }
}
