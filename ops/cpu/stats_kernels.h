/* var/std/logsumexp/norm's CPU kernel as ordinary functions, for one element type:
 * included once per type by ops/cpu/stats.c with T and NAME(f) (f_f32, f_f64) defined.
 * No include guard, on purpose; it undefines its parameters at its end. Contract: ops/cpu/stats.h. */

/* One output element from the reduced elements of `base` (n of them, k-th at AT(k)). */
#define AT(k) ((double)(flat ? base[(k) * st] : base[tg_reduce_inner_offset(p, (k))]))
typedef struct {
    const tg_reduce_plan *p;
    const T *x;
    T *out;
    tg_stat_kind kind;
    double param;
} NAME(stats_job);
static void NAME(stats_chunk)(int64_t lo_, int64_t hi_, void *arg_) {
    const NAME(stats_job) *j_ = arg_;
    const tg_reduce_plan *p = j_->p;
    const T *x = j_->x;
    T *out = j_->out;
    tg_stat_kind kind = j_->kind;
    double param = j_->param;
    int64_t n = p->inner_numel, st = p->inner_ndim == 1 ? p->inner_strides[0] : 0;
    bool flat = p->inner_ndim <= 1;
    for (int64_t o = lo_; o < hi_; o++) {
        const T *base = x + tg_reduce_outer_offset(p, o);
        double r = 0;
        switch (kind) {
        case STAT_VAR: case STAT_STD: { /* two passes: mean, then squared deviations */
            double sum = 0, ss = 0;
            for (int64_t k = 0; k < n; k++) sum += AT(k);
            double mean = sum / (double)n;
            for (int64_t k = 0; k < n; k++) ss += (AT(k) - mean) * (AT(k) - mean);
            r = ss / fmax(0.0, (double)n - param); /* max(0, N - correction), as PyTorch */
            if (kind == STAT_STD) r = sqrt(r);
            break;
        }
        case STAT_LOGSUMEXP: { /* max shift; an infinite max shifts by 0 (as PyTorch) */
            double m = -INFINITY, sum = 0;
            for (int64_t k = 0; k < n; k++) m = AT(k) > m ? AT(k) : m;
            if (isinf(m)) m = 0;
            for (int64_t k = 0; k < n; k++) sum += exp(AT(k) - m);
            r = log(sum) + m;
            break;
        }
        case STAT_NORM:
            for (int64_t k = 0; k < n; k++) {
                double a = fabs((double)AT(k));
                if (isinf(param)) r = a > r || a != a ? a : r;
                else if (param == 1) r += a;
                else if (param == 2) r += a * a;
                else r += pow(a, param);
            }
            if (param == 2) r = sqrt(r);
            else if (!isinf(param) && param != 1) r = pow(r, 1 / param);
            break;
        }
        out[o] = (T)r;
    }
}
void NAME(tg_cpu_stats)(const tg_reduce_plan *p, const T *x, T *out, tg_stat_kind kind, double param) {
    NAME(stats_job) j_ = {p, x, out, kind, param};
    int64_t outer = p->outer_numel;
    bool par = outer * p->inner_numel >= STATS_GRAIN && outer > 1;
    tg_parallel_for(outer, par ? 1 : outer, NAME(stats_chunk), &j_);
}
#undef AT

/* The parameters end with this instantiation. */
#undef T
#undef NAME
