/* The extreme-element kernel of ops/cpu/extreme.c as ordinary functions, for one
 * element type: included once per type with T and NAME(f) defined (f_f32, f_f64,
 * f_i64, f_i32, f_u8). No include guard, on purpose; it undefines its parameters at its end. Contract: ops/cpu/extreme.h. */

/* The first extreme element of each output's reduced elements; NaN beats everything
 * (it propagates, as in PyTorch), so the first NaN is picked. */
typedef struct {
    const tg_reduce_plan *p;
    const T *x;
    T *values;
    int64_t *indices;
    bool is_max;
} NAME(extreme_job);
static void NAME(extreme_chunk)(int64_t lo_, int64_t hi_, void *arg_) {
    const NAME(extreme_job) *j_ = arg_;
    const tg_reduce_plan *p = j_->p;
    const T *x = j_->x;
    T *values = j_->values;
    int64_t *indices = j_->indices;
    bool is_max = j_->is_max;
    int64_t inner = p->inner_numel;
    int64_t st = p->inner_ndim == 1 ? p->inner_strides[0] : 0;
    for (int64_t o = lo_; o < hi_; o++) {
        const T *base = x + tg_reduce_outer_offset(p, o);
        T best = base[0];
        int64_t best_k = 0;
        for (int64_t k = 1; k < inner && best == best; k++) {
            T v = p->inner_ndim <= 1 ? base[k * st] : base[tg_reduce_inner_offset(p, k)];
            if (v != v || (is_max ? v > best : v < best)) {
                best = v;
                best_k = k;
            }
        }
        if (values) values[o] = best;
        if (indices) indices[o] = best_k;
    }
}
void NAME(tg_cpu_extreme)(const tg_reduce_plan *p, const T *x, T *values, int64_t *indices, bool is_max) {
    NAME(extreme_job) j_ = {p, x, values, indices, is_max};
    int64_t outer = p->outer_numel;
    bool par = outer * p->inner_numel >= EXTREME_GRAIN && outer > 1;
    tg_parallel_for(outer, par ? 1 : outer, NAME(extreme_chunk), &j_);
}

/* The parameters end with this instantiation. */
#undef T
#undef NAME
