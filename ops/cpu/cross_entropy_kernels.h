/* Fused cross entropy's CPU kernel as ordinary functions, for one element type:
 * included once per type by ops/cpu/cross_entropy.c with T and NAME(f) (f_f32, f_f64)
 * defined. No include guard, on purpose; it undefines its parameters at its end. Contract: ops/cpu/cross_entropy.h; the
 * per-element formulas are ops/loss_formulas.h's, shared with ops/cuda/loss.cu. */

/* loss [n*d] and lse [n*d] from x [n, c, d]; ignored elements give loss 0. */
typedef struct {
    const tg_ce_args *a;
    const T *x;
    const int64_t *target;
    T *loss, *lse;
} NAME(ce_forward_job);
static void NAME(ce_forward_chunk)(int64_t lo_, int64_t hi_, void *arg_) {
    const NAME(ce_forward_job) *j_ = arg_;
    const tg_ce_args *a = j_->a;
    const T *x = j_->x;
    const int64_t *target = j_->target;
    T *loss = j_->loss, *lse = j_->lse;
    int64_t C = a->c, D = a->d;
    double eps = a->smoothing;
    for (int64_t r = lo_; r < hi_; r++) {
        int64_t n = r / D, d = r % D;
        const T *row = x + n * C * D + d;
        double m = -INFINITY, s = 0, total = 0;
        for (int64_t c = 0; c < C; c++) m = row[c * D] > m ? row[c * D] : m;
        m = tg_ce_lse_shift(m);
        for (int64_t c = 0; c < C; c++) {
            s += exp(row[c * D] - m);
            total += row[c * D];
        }
        double l = m + log(s);
        lse[r] = (T)l;
        int64_t t = target[r];
        if (tg_ce_ignored(a, t)) {
            loss[r] = 0;
            continue;
        }
        loss[r] = (T)tg_ce_smoothed_nll(l, row[t * D], total, C, eps);
    }
}
void NAME(tg_cpu_cross_entropy)(const tg_ce_args *a, const T *x, const int64_t *target, T *loss, T *lse) {
    NAME(ce_forward_job) j_ = {a, x, target, loss, lse};
    int64_t rows = a->n * a->d;
    tg_parallel_for(rows, a->n * a->c * a->d >= 32768 ? 1 : rows, NAME(ce_forward_chunk), &j_);
}

/* gx [n, c, d] of the loss from x [n, c, d], its lse [n*d] and the upstream gradient g
 * (g[r] per element for reduction none, else g[0]): tg_ce_grad per element. */
typedef struct {
    const tg_ce_args *a;
    const T *x, *lse, *g;
    const int64_t *target;
    T *gx;
} NAME(ce_backward_job);
static void NAME(ce_backward_chunk)(int64_t lo_, int64_t hi_, void *arg_) {
    const NAME(ce_backward_job) *j_ = arg_;
    const tg_ce_args *a = j_->a;
    int64_t C = a->c, D = a->d;
    bool per_element = a->reduction == TG_REDUCTION_NONE, mean = a->reduction == TG_REDUCTION_MEAN;
    for (int64_t r = lo_; r < hi_; r++) {
        int64_t n = r / D, d = r % D, t = j_->target[r];
        double scale = tg_ce_factor(tg_ce_ignored(a, t), mean, a->count) * (double)j_->g[per_element ? r : 0];
        const T *row = j_->x + n * C * D + d;
        T *out = j_->gx + n * C * D + d;
        double l = j_->lse[r];
        for (int64_t c = 0; c < C; c++) out[c * D] = (T)tg_ce_grad(row[c * D], l, c == t, C, a->smoothing, scale);
    }
}
void NAME(tg_cpu_cross_entropy_backward)(const tg_ce_args *a, const T *x, const int64_t *target, const T *lse,
                                         const T *g, T *gx) {
    NAME(ce_backward_job) j_ = {a, x, lse, g, target, gx};
    int64_t rows = a->n * a->d;
    tg_parallel_for(rows, a->n * a->c * a->d >= 32768 ? 1 : rows, NAME(ce_backward_chunk), &j_);
}

/* The parameters end with this instantiation. */
#undef T
#undef NAME
