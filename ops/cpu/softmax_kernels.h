/* softmax / log_softmax's CPU kernel as ordinary functions, for one element type:
 * included once per type by ops/cpu/softmax.c with T and NAME(f) (f_f32, f_f64)
 * defined. No include guard, on purpose; it undefines its parameters at its end.
 * Contract: ops/cpu/softmax.h. The formulas are ops/softmax_formulas.h's, the ones
 * ops/cuda/softmax.cu's kernel runs. */

#define TYPED NAME /* C names the formulas' struct as their functions */
#include "ops/softmax_formulas.h"
#undef TYPED

/* One row of `len` elements at stride xs (input) / os (output). Stable: exp(x - max).
 * A row whose max is -inf (all -inf) gives NaN, as PyTorch's. */
typedef struct {
    const tg_reduce_plan *px, *po;
    const T *x;
    T *out;
    bool log_out;
} NAME(softmax_job);
static void NAME(softmax_chunk)(int64_t lo_, int64_t hi_, void *arg_) {
    const NAME(softmax_job) *j_ = arg_;
    const tg_reduce_plan *px = j_->px, *po = j_->po;
    const T *x = j_->x;
    T *out = j_->out;
    bool log_out = j_->log_out;
    int64_t len = px->inner_numel;
    int64_t xs = px->inner_ndim ? px->inner_strides[0] : 1, os = po->inner_ndim ? po->inner_strides[0] : 1;
    for (int64_t o = lo_; o < hi_; o++) {
        const T *row = x + tg_reduce_outer_offset(px, o);
        T *dst = out + tg_reduce_outer_offset(po, o);
        T max = -INFINITY;
        for (int64_t k = 0; k < len; k++) {
            T v = row[k * xs];
            max = NAME(tg_softmax_max)(max, v);
            if (v != v) break;
        }
        double sum = 0;
        NAME(tg_softmax_row) r;
        if (log_out) {
            for (int64_t k = 0; k < len; k++) sum += NAME(tg_softmax_exp)(row[k * xs], max);
            NAME(tg_softmax_row_of)(max, sum, true, &r);
            for (int64_t k = 0; k < len; k++) dst[k * os] = NAME(tg_log_softmax_out)(row[k * xs], &r);
        } else {
            for (int64_t k = 0; k < len; k++) {
                T e = NAME(tg_softmax_exp)(row[k * xs], max);
                dst[k * os] = e;
                sum += e;
            }
            NAME(tg_softmax_row_of)(max, sum, false, &r);
            for (int64_t k = 0; k < len; k++) dst[k * os] = NAME(tg_softmax_out)(dst[k * os], &r);
        }
    }
}
void NAME(tg_cpu_softmax)(const tg_reduce_plan *px, const tg_reduce_plan *po, const T *x, T *out, bool log_out) {
    NAME(softmax_job) j_ = {px, po, x, out, log_out};
    int64_t outer = px->outer_numel;
    bool par = outer * px->inner_numel >= SOFTMAX_GRAIN && outer > 1;
    tg_parallel_for(outer, par ? 1 : outer, NAME(softmax_chunk), &j_);
}

/* The parameters end with this instantiation. */
#undef T
#undef NAME
