/* Batch norm's and layer norm's CPU kernels as ordinary functions, for one element
 * type: included once per type by ops/cpu/norm.c with T (float, double) and NAME(f)
 * (f_f32 or f_f64) defined, so there is one body to read and step through. No include
 * guard, on purpose. Declarations and contracts: ops/cpu/norm.h. The statistics' and the
 * outputs' formulas are ops/norm_formulas.h's. */

/* Sums over one row of n elements in LANES interleaved partial sums, combined in a fixed
 * order: the compiler keeps them in vector registers (one running sum cannot be vectorized,
 * its order of additions being fixed), and the result depends only on n, never on the
 * threads. shifted_sums: d = p[i] - shift, sums of d and d^2 (batch / layer norm forward);
 * grad_sums: sums of g[i] and g[i] * (x[i] - shift) (batch norm backward). */
static inline void NAME(shifted_sums)(const T *restrict p, int64_t n, T shift, T *s, T *ss) {
    T a[LANES] = {0}, b[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) {
            T d = p[i + l] - shift;
            a[l] += d;
            b[l] += d * d;
        }
    T sa = 0, sb = 0;
    for (int l = 0; l < LANES; l++) {
        sa += a[l];
        sb += b[l];
    }
    for (; i < n; i++) {
        T d = p[i] - shift;
        sa += d;
        sb += d * d;
    }
    *s = sa;
    *ss = sb;
}
static inline void NAME(grad_sums)(const T *restrict g, const T *restrict x, int64_t n, T shift, T *sg, T *sgx) {
    T a[LANES] = {0}, b[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) {
            a[l] += g[i + l];
            b[l] += g[i + l] * (x[i + l] - shift);
        }
    T sa = 0, sb = 0;
    for (int l = 0; l < LANES; l++) {
        sa += a[l];
        sb += b[l];
    }
    for (; i < n; i++) {
        sa += g[i];
        sb += g[i] * (x[i] - shift);
    }
    *sg = sa;
    *sgx = sb;
}

/* Batch norm: statistics per channel c of x [outer, C, inner]; w, b [C].
 * Layer norm: statistics per row r of x [rows, inner]; w, b [inner] (or NULL).
 * Two passes: shifted sums (shift = the group's first element, so E[d^2] - E[d]^2 does not
 * cancel badly) for mean and var, then normalise, both by ops/norm_formulas.h (the
 * formulas ops/cuda/norm.cu runs). stats (or NULL) gets mean, invstd in double. */
typedef struct {
    const tg_norm_args *a;
    const T *x, *w, *b, *residual;
    T *y, *mean_out, *var_out;
    double *stats;
} NAME(norm_forward_job);

/* One row of batch norm's output, q = bn(p) (+ r) (ReLU'd when relu): the add and the ReLU
 * over the row just written, while it is in L1, instead of two more passes over y. */
static inline void NAME(bn_out_row)(const T *restrict p, const T *restrict r, T *restrict q, int64_t n, T tm, T sc,
                                    T sh, bool relu) {
    if (r)
        for (int64_t i = 0; i < n; i++) q[i] = TG_BN_OUT(p[i], tm, sc, sh) + r[i];
    else
        for (int64_t i = 0; i < n; i++) q[i] = TG_BN_OUT(p[i], tm, sc, sh);
    if (relu)
        for (int64_t i = 0; i < n; i++) q[i] = TG_RELU_OF(q[i], T);
}
TG_VECTOR_CLONES static void NAME(norm_forward_chunk)(int64_t lo_, int64_t hi_, void *arg_) {
    const NAME(norm_forward_job) *j_ = arg_;
    const tg_norm_args *a = j_->a;
    const T *x = j_->x, *w = j_->w, *b = j_->b;
    T *y = j_->y, *mean_out = j_->mean_out, *var_out = j_->var_out;
    double *stats = j_->stats;
    int64_t O = a->outer, G = a->groups, I = a->inner;
    for (int64_t c = lo_; c < hi_; c++) {
        double s = 0, ss = 0, m = (double)(O * I);
        const T shift = x[c * I];
        for (int64_t o = 0; o < O; o++) {
            T rs, rss;
            NAME(shifted_sums)(x + (o * G + c) * I, I, shift, &rs, &rss);
            s += rs;
            ss += rss;
        }
        const tg_norm_stats st = tg_norm_stats_of(s, ss, m, shift, a->eps);
        mean_out[c] = (T)st.mean;
        var_out[c] = (T)st.var;
        if (stats) {
            stats[2 * c] = st.mean;
            stats[2 * c + 1] = st.invstd;
        }
        for (int64_t o = 0; o < O; o++) {
            const T *p = x + (o * G + c) * I;
            T *q = y + (o * G + c) * I;
            if (a->layer) {
                const T tm = (T)st.mean, ti = (T)st.invstd;
                for (int64_t i = 0; i < I; i++) q[i] = TG_LAYER_NORM_OUT(p[i], tm, ti, w ? w[i] : 1, b ? b[i] : 0);
            } else {
                const T tm = (T)st.mean;
                const tg_bn_fold f = tg_bn_fold_of(&st, tm, w ? w[c] : 1, b ? b[c] : 0);
                const T sc = (T)f.scale, sh = (T)f.shift;
                const T *r = j_->residual ? j_->residual + (o * G + c) * I : NULL;
                NAME(bn_out_row)(p, r, q, I, tm, sc, sh, a->relu);
            }
        }
    }
}
void NAME(tg_cpu_norm_forward)(const tg_norm_args *a, const T *x, const T *w, const T *b, const T *residual, T *y,
                               T *mean_out, T *var_out, double *stats) {
    NAME(norm_forward_job) j_ = {a, x, w, b, residual, y, mean_out, var_out, stats};
    int64_t G = a->groups;
    bool par = a->outer * G * a->inner >= 32768 && G > 1;
    tg_parallel_for(G, par ? 1 : G, NAME(norm_forward_chunk), &j_);
}
/* Batch norm training backward, per channel c of x [O, C, I] (M = O*I elements):
 * pass 1: sum_g = sum(g), sum_gxhat = sum(g * xhat); pass 2:
 * gx = w*invstd/M * (M*g - sum_g - xhat*sum_gxhat) = a*g - b*x + k. Any output may be NULL. */
typedef struct {
    int64_t O, C, I;
    const T *g, *x, *w;
    const double *stats;
    T *gx, *gw, *gb;
} NAME(bn_backward_job);
TG_VECTOR_CLONES static void NAME(bn_backward_chunk)(int64_t lo_, int64_t hi_, void *arg_) {
    const NAME(bn_backward_job) *j_ = arg_;
    int64_t O = j_->O, C = j_->C, I = j_->I;
    const T *g = j_->g, *x = j_->x, *w = j_->w;
    const double *stats = j_->stats;
    T *gx = j_->gx, *gw = j_->gw, *gb = j_->gb;
    for (int64_t c = lo_; c < hi_; c++) {
        double mean = stats[2 * c], invstd = stats[2 * c + 1], m = (double)(O * I);
        double sg = 0, sgx = 0;
        const T tm = (T)mean;
        for (int64_t o = 0; o < O; o++) {
            T rg, rgx;
            NAME(grad_sums)(g + (o * C + c) * I, x + (o * C + c) * I, I, tm, &rg, &rgx);
            sg += rg;
            sgx += rgx;
        }
        sgx -= (mean - (double)tm) * sg; /* sum(g * (x - mean)) from sum(g * (x - tm)) */
        double sgxhat = sgx * invstd;
        if (gw) gw[c] = (T)sgxhat;
        if (gb) gb[c] = (T)sg;
        if (!gx) continue;
        double ca = w[c] * invstd, cb = ca * invstd * sgxhat / m, ck = cb * (mean - tm) - ca * sg / m;
        const T ta = (T)ca, tb = (T)cb, tk = (T)ck;
        for (int64_t o = 0; o < O; o++) {
            const T *gp = g + (o * C + c) * I, *xp = x + (o * C + c) * I;
            T *q = gx + (o * C + c) * I;
            for (int64_t i = 0; i < I; i++) q[i] = ta * gp[i] - tb * (xp[i] - tm) + tk;
        }
    }
}
void NAME(tg_cpu_bn_backward)(int64_t O, int64_t C, int64_t I, const T *g, const T *x, const T *w, const double *stats,
                              T *gx, T *gw, T *gb) {
    NAME(bn_backward_job) j_ = {O, C, I, g, x, w, stats, gx, gw, gb};
    tg_parallel_for(C, O * C * I >= 32768 && C > 1 ? 1 : C, NAME(bn_backward_chunk), &j_);
}

/* Layer norm training backward for x [R, D] from the forward's stats (mean, invstd per row,
 * double), w [D]: per row, with xhat = (x - mean) * invstd and dxhat = g * w,
 * gx = invstd * (dxhat - sum(dxhat) / D - xhat * sum(dxhat * xhat) / D); over the rows,
 * gw = sum(g * xhat), gb = sum(g). Rows go in fixed blocks of LN_ROW_BLOCK, each block's column
 * sums into its own slice of part [blocks][2][D], added block by block at the end, so the
 * results do not depend on the thread count. gx, gw (with gb) may be NULL. */
typedef struct {
    int64_t R, D;
    const T *g, *x, *w;
    const double *stats;
    T *gx, *part;
} NAME(ln_backward_job);
TG_VECTOR_CLONES static void NAME(ln_backward_blocks)(int64_t b0, int64_t b1, void *arg) {
    const NAME(ln_backward_job) *j = arg;
    int64_t D = j->D;
    for (int64_t blk = b0; blk < b1; blk++) {
        T *pw = j->part ? j->part + blk * 2 * D : NULL, *pb = pw ? pw + D : NULL;
        if (pw)
            for (int64_t i = 0; i < 2 * D; i++) pw[i] = 0;
        int64_t r1 = (blk + 1) * LN_ROW_BLOCK < j->R ? (blk + 1) * LN_ROW_BLOCK : j->R;
        for (int64_t r = blk * LN_ROW_BLOCK; r < r1; r++) {
            const T *g = j->g + r * D, *x = j->x + r * D;
            const T mean = (T)j->stats[2 * r], invstd = (T)j->stats[2 * r + 1];
            if (pw)
                for (int64_t i = 0; i < D; i++) {
                    pw[i] += g[i] * ((x[i] - mean) * invstd);
                    pb[i] += g[i];
                }
            if (!j->gx) continue;
            T a[LANES] = {0}, b[LANES] = {0};
            int64_t i = 0;
            for (; i + LANES <= D; i += LANES)
                for (int l = 0; l < LANES; l++) {
                    T dxhat = g[i + l] * j->w[i + l];
                    a[l] += dxhat;
                    b[l] += dxhat * ((x[i + l] - mean) * invstd);
                }
            T s1 = 0, s2 = 0;
            for (int l = 0; l < LANES; l++) {
                s1 += a[l];
                s2 += b[l];
            }
            for (; i < D; i++) {
                T dxhat = g[i] * j->w[i];
                s1 += dxhat;
                s2 += dxhat * ((x[i] - mean) * invstd);
            }
            const T m1 = s1 / (T)D, m2 = s2 / (T)D;
            T *q = j->gx + r * D;
            for (int64_t k = 0; k < D; k++) q[k] = invstd * (g[k] * j->w[k] - m1 - ((x[k] - mean) * invstd) * m2);
        }
    }
}
void NAME(tg_cpu_ln_backward)(int64_t R, int64_t D, const T *g, const T *x, const T *w, const double *stats, T *gx,
                              T *gw, T *gb, T *part) {
    int64_t blocks = (R + LN_ROW_BLOCK - 1) / LN_ROW_BLOCK;
    NAME(ln_backward_job) j = {R, D, g, x, w, stats, gx, gw ? part : NULL};
    tg_parallel_for(blocks, R * D >= 32768 ? 1 : blocks, NAME(ln_backward_blocks), &j);
    if (!gw) return;
    for (int64_t i = 0; i < D; i++) gw[i] = gb[i] = 0;
    for (int64_t blk = 0; blk < blocks; blk++)
        for (int64_t i = 0; i < D; i++) {
            gw[i] += part[blk * 2 * D + i];
            gb[i] += part[blk * 2 * D + D + i];
        }
}

/* The parameters end with this instantiation. */
#undef T
#undef NAME
