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
} NAME(sum_job);
/* Strips [b0, b1) of SUM_STRIP columns (strip b covers columns SUM_STRIP b ..): each strip's
 * sums stay in registers while the rows go by (an array of accumulators in memory cost a
 * load and a store per element), and a wide matrix gives one task per strip. */
TG_VECTOR_CLONES static void NAME(sum_cols)(int64_t b0, int64_t b1, void *arg) {
    const NAME(sum_job) *j = arg;
    int64_t cols = j->p->outer_numel, inner = j->p->inner_numel, st = j->p->inner_strides[0];
    for (int64_t b = b0; b < b1; b++) {
        int64_t c0 = b * SUM_STRIP;
        if (c0 + SUM_STRIP <= cols) {
            ACC acc[SUM_STRIP] = {0};
            for (int64_t r = 0; r < inner; r++) {
                const T *row = j->x + r * st + c0;
                for (int u = 0; u < SUM_STRIP; u++) acc[u] += LOAD(row[u]);
            }
            for (int u = 0; u < SUM_STRIP; u++) j->out[c0 + u] = STORE(acc[u]);
        } else {
            for (int64_t c = c0; c < cols; c++) {
                ACC acc = 0;
                for (int64_t r = 0; r < inner; r++) acc += LOAD(j->x[r * st + c]);
                j->out[c] = STORE(acc);
            }
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
    NAME(sum_job) j = {p, x, out};
    if (p->outer_ndim == 1 && p->outer_strides[0] == 1 && p->inner_ndim == 1 && p->outer_numel > 1) {
        int64_t cols = p->outer_numel, strips = (cols + SUM_STRIP - 1) / SUM_STRIP;
        bool par = cols * inner >= TG_REDUCE_GRAIN && strips > 1;
        tg_parallel_for(strips, par ? 1 : strips, NAME(sum_cols), &j);
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
