/* sum's CPU kernel as ordinary functions, for one element type: included once per
 * type by ops/cpu/sum.c with T (the element), ACC (the accumulator), LOAD(v) (an
 * element widened to ACC) and STORE(a) (an accumulated sum rounded to T) and NAME(f)
 * defined. No include guard, on purpose; it undefines its parameters at its end. Contract: ops/cpu/sum.h. */

/* out[o] = sum over the reduced dims, accumulated in double (LOAD widens an element,
 * STORE rounds a sum to T: bfloat16 and float16 are read as they are, with the bits of
 * summing a float32 copy and rounding the float32 result). Three layouts:
 * - columns: leading dims reduced, trailing ones kept and contiguous (bias gradients,
 *   [N, C] -> [C]): rows are added into a row of accumulators, memory read in order;
 * - rows: one reduced dim per output (contiguous or strided);
 * - general: the last reduced dim is walked as a row, the others by offset.
 * Each output is summed by one thread in one order, so the result does not depend on
 * the number of threads. */
typedef struct {
    const tg_reduce_plan *p;
    const T *x;
    T *out;
    ACC *acc;
} NAME(sum_job);
/* Columns [c0, c1) in blocks of 256 (block b covers columns 256b ..). */
static void NAME(sum_cols)(int64_t b0, int64_t b1, void *arg) {
    const NAME(sum_job) *j = arg;
    int64_t cols = j->p->outer_numel, inner = j->p->inner_numel, st = j->p->inner_strides[0];
    for (int64_t b = b0; b < b1; b++) {
        int64_t c0 = b * 256, c1 = c0 + 256 < cols ? c0 + 256 : cols;
        for (int64_t r = 0; r < inner; r++) {
            const T *row = j->x + r * st;
            for (int64_t c = c0; c < c1; c++) j->acc[c] += LOAD(row[c]);
        }
    }
}
static void NAME(sum_rows)(int64_t o0, int64_t o1, void *arg) {
    const NAME(sum_job) *j = arg;
    const tg_reduce_plan *p = j->p;
    int64_t inner = p->inner_numel;
    bool unit = p->inner_ndim == 1 && p->inner_strides[0] == 1;
    for (int64_t o = o0; o < o1; o++) {
        const T *base = j->x + tg_reduce_outer_offset(p, o);
        ACC acc = 0;
        if (unit || p->inner_ndim == 0) { /* 0: only size-1 dims were reduced */
            for (int64_t k = 0; k < inner; k++) acc += LOAD(base[k]);
        } else if (p->inner_ndim == 1) {
            int64_t st = p->inner_strides[0];
            for (int64_t k = 0; k < inner; k++) acc += LOAD(base[k * st]);
        } else {
            int last = p->inner_ndim - 1;
            int64_t len = p->inner_shape[last], st = p->inner_strides[last];
            for (int64_t r = 0; r < inner; r += len) {
                const T *row = base + tg_reduce_inner_offset(p, r);
                for (int64_t k = 0; k < len; k++) acc += LOAD(row[k * st]);
            }
        }
        j->out[o] = STORE(acc);
    }
}
void NAME(tg_cpu_sum)(const tg_reduce_plan *p, const T *x, T *out) {
    int64_t inner = p->inner_numel;
    NAME(sum_job) j = {p, x, out, NULL};
    if (p->outer_ndim == 1 && p->outer_strides[0] == 1 && p->inner_ndim == 1 && p->outer_numel > 1) {
        int64_t cols = p->outer_numel, blocks = (cols + 255) / 256;
        j.acc = calloc((size_t)cols, sizeof(ACC));
        TG_ASSERT(j.acc != NULL);
        bool par = cols * inner >= TG_REDUCE_GRAIN && cols >= 256;
        tg_parallel_for(blocks, par ? 1 : blocks, NAME(sum_cols), &j);
        for (int64_t c = 0; c < cols; c++) out[c] = STORE(j.acc[c]);
        free(j.acc);
        return;
    }
    int64_t outer = p->outer_numel;
    bool par = outer * inner >= TG_REDUCE_GRAIN && outer > 1;
    tg_parallel_for(outer, par ? 1 : outer, NAME(sum_rows), &j);
}

/* The parameters end with this instantiation. */
#undef T
#undef ACC
#undef LOAD
#undef STORE
#undef NAME
