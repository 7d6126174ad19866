/* var/std/logsumexp/norm's CPU kernel as ordinary functions, for one element type:
 * included once per type by ops/cpu/stats.c with T and NAME(f) (f_f32, f_f64) defined.
 * No include guard, on purpose; it undefines its parameters at its end. Contract:
 * ops/cpu/stats.h; the formulas are the rows of ops/reduce_formulas.h. */

/* One pass of row `kind` over the line at base: its reduced elements combined in
 * order, c the first pass's result. Always inlined with a constant kind, so the rows'
 * switches fold away. */
static inline __attribute__((always_inline)) double NAME(stats_pass)(tg_reduce_kind kind, const tg_reduce_plan *p,
                                                                     const T *base, double c, double q) {
    int64_t n = p->inner_numel, st = p->inner_ndim == 1 ? p->inner_strides[0] : 0;
    bool flat = p->inner_ndim <= 1;
    double acc = tg_reduce_identity(kind, q);
    for (int64_t k = 0; k < n; k++) {
        double x = (double)(flat ? base[k * st] : base[tg_reduce_inner_offset(p, k)]);
        acc = tg_reduce_combine(kind, acc, tg_reduce_map(kind, x, c, q), q);
    }
    return tg_reduce_finalise(kind, acc, (double)n, c, q);
}

typedef struct {
    const tg_reduce_plan *p;
    const T *x;
    T *out;
    tg_reduce_kind kind;
    double param;
} NAME(stats_job);

/* Outputs [lo, hi) of row `kind`, after its first pass if it has one. */
static inline __attribute__((always_inline)) void NAME(stats_lines)(tg_reduce_kind kind, const NAME(stats_job) *j,
                                                                    int64_t lo, int64_t hi) {
    tg_reduce_kind first = tg_reduce_first(kind);
    for (int64_t o = lo; o < hi; o++) {
        const T *base = j->x + tg_reduce_outer_offset(j->p, o);
        double c = first == TG_REDUCE_NONE ? 0 : NAME(stats_pass)(first, j->p, base, 0, j->param);
        j->out[o] = (T)NAME(stats_pass)(kind, j->p, base, c, j->param);
    }
}

/* One specialisation per row. */
#define STATS_LINES_CASE(KIND, name, api, autocast, first, identity, map, combine, finalise, grad) \
    case TG_REDUCE_##KIND: NAME(stats_lines)(TG_REDUCE_##KIND, j, lo, hi); break;

static void NAME(stats_chunk)(int64_t lo, int64_t hi, void *arg) {
    const NAME(stats_job) *j = arg;
    switch (j->kind) {
        TG_REDUCE_FORMULAS(STATS_LINES_CASE)
    default: break;
    }
}

void NAME(tg_cpu_stats)(const tg_reduce_plan *p, const T *x, T *out, tg_reduce_kind kind, double param) {
    NAME(stats_job) j = {p, x, out, kind, param};
    int64_t outer = p->outer_numel;
    bool par = outer * p->inner_numel >= STATS_GRAIN && outer > 1;
    tg_parallel_for(outer, par ? 1 : outer, NAME(stats_chunk), &j);
}

#undef STATS_LINES_CASE

/* The parameters end with this instantiation. */
#undef T
#undef NAME
