/* The pooling kernels of ops/cpu/pool.c as ordinary functions, for one element type:
 * included once per type by ops/cpu/pool.c with T (float, double) and NAME(f) (f's name
 * for that type, f_f32 or f_f64) defined, so there is one body to read and step through.
 * No include guard, on purpose; it undefines its parameters at its end. Each kernel walks contiguous planes, the planes split
 * over the thread pool; declarations and contracts: ops/cpu/pool.h. */

/* ---- max pooling ---- */

/* Per plane, row by row; kernel 2 stride 2 without padding (every window whole) has its own loop.
 * Ties keep the first index in window order (row-major), as ATen does. */
typedef struct {
    const tg_pool_geometry *q;
    const T *x;
    T *y;
    int64_t *idx;
} NAME(max_forward_job);
static void NAME(max_forward_chunk)(int64_t lo_, int64_t hi_, void *arg_) {
    const NAME(max_forward_job) *j_ = arg_;
    const tg_pool_geometry *q = j_->q;
    const T *x = j_->x;
    T *y = j_->y;
    int64_t *idx = j_->idx;
    const int64_t H = q->h, W = q->w, Ho = q->ho, Wo = q->wo;
    const bool k2 = whole_2x2(q);
    for (int64_t pl = lo_; pl < hi_; pl++) {
        const T *src = x + pl * H * W;
        T *dst = y + pl * Ho * Wo;
        int64_t *di = idx + pl * Ho * Wo;
        if (k2 && NAME(vector_2x2)(src, H, W, Ho, Wo, dst, di)) continue; /* ops/cpu/max_pool2x2.c */
        if (k2) {
            /* Branch-free (maxss/setcc) assuming no NaN; a plane with a NaN is redone below. */
            int nan = 0;
            for (int64_t oh = 0; oh < Ho; oh++) {
                const int64_t base = 2 * oh * W;
                const T *r0 = src + base, *r1 = r0 + W;
                T *yo = dst + oh * Wo;
                int64_t *io = di + oh * Wo;
                for (int64_t ow = 0; ow < Wo; ow++) {
                    const int64_t i0 = 2 * ow;
                    T a = r0[i0], b = r0[i0 + 1], c = r1[i0], d = r1[i0 + 1];
                    int tb = b > a, td = d > c; /* strict: ties keep the earlier element */
                    T m1 = b > a ? b : a, m2 = d > c ? d : c;
                    int t = m2 > m1;
                    T m = m2 > m1 ? m2 : m1;
                    int64_t code = 2 * t + ((td & t) | (tb & (t ^ 1))); /* bit 0 column, bit 1 row */
                    nan |= (a != a) | (b != b) | (c != c) | (d != d);
                    yo[ow] = m;
                    io[ow] = base + i0 + (code & 1) + (code >> 1) * W;
                }
            }
            if (!nan) continue;
        }
        /* Taps start .. start + (k-1)*d step d, those in the padding skipped; tg_pool_geometry_from
         * refused windows without any tap inside, so src[best] below is in the plane. */
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t hs, he;
            tg_pool_max_row_taps(q, oh, &hs, &he);
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t ws, we, best;
                tg_pool_max_col_taps(q, ow, &ws, &we);
                T m;
                TG_POOL_MAX_WINDOW(T, src, W, hs, he, ws, we, q->dh, q->dw, m, best);
                dst[oh * Wo + ow] = m;
                di[oh * Wo + ow] = best;
            }
        }
    }
}
void NAME(tg_cpu_max_pool)(const tg_pool_geometry *q, int64_t planes, const T *x, T *y, int64_t *idx) {
    NAME(max_forward_job) j_ = {q, x, y, idx};
    bool par = planes > 1 && planes * q->h * q->w >= POOL_PAR_MIN;
    tg_parallel_for(planes, par ? 1 : planes, NAME(max_forward_chunk), &j_);
}
/* gx [planes, H*W] = scatter-add of g [planes, Ho*Wo] at idx (per plane: no races). */
typedef struct {
    int64_t in_hw, out_hw;
    const T *g;
    const int64_t *idx;
    T *out;
} NAME(max_index_job);
static void NAME(max_scatter_chunk)(int64_t lo_, int64_t hi_, void *arg_) {
    const NAME(max_index_job) *j_ = arg_;
    int64_t in_hw = j_->in_hw, out_hw = j_->out_hw;
    for (int64_t pl = lo_; pl < hi_; pl++) {
        T *dst = j_->out + pl * in_hw;
        const T *gp = j_->g + pl * out_hw;
        const int64_t *ip = j_->idx + pl * out_hw;
        memset(dst, 0, (size_t)in_hw * sizeof(T));
        for (int64_t o = 0; o < out_hw; o++) dst[ip[o]] += gp[o];
    }
}
void NAME(tg_cpu_max_unpool)(int64_t planes, int64_t in_hw, int64_t out_hw, const T *g, const int64_t *idx, T *gx) {
    NAME(max_index_job) j_ = {in_hw, out_hw, g, idx, gx};
    bool par = planes > 1 && planes * in_hw >= POOL_PAR_MIN;
    tg_parallel_for(planes, par ? 1 : planes, NAME(max_scatter_chunk), &j_);
}
static void NAME(max_gather_chunk)(int64_t lo_, int64_t hi_, void *arg_) {
    const NAME(max_index_job) *j_ = arg_;
    int64_t in_hw = j_->in_hw, out_hw = j_->out_hw;
    for (int64_t pl = lo_; pl < hi_; pl++)
        for (int64_t o = 0; o < out_hw; o++) j_->out[pl * out_hw + o] = j_->g[pl * in_hw + j_->idx[pl * out_hw + o]];
}
void NAME(tg_cpu_max_gather)(int64_t planes, int64_t in_hw, int64_t out_hw, const T *g, const int64_t *idx, T *y) {
    NAME(max_index_job) j_ = {in_hw, out_hw, g, idx, y};
    tg_parallel_for(planes, planes * out_hw >= POOL_GRAIN ? 1 : planes, NAME(max_gather_chunk), &j_);
}

/* ---- average pooling ---- */

typedef struct {
    const tg_pool_geometry *q;
    const T *in;
    T *out;
} NAME(avg_job);
static void NAME(avg_forward_chunk)(int64_t lo_, int64_t hi_, void *arg_) {
    const NAME(avg_job) *j_ = arg_;
    const tg_pool_geometry *q = j_->q;
    const T *x = j_->in;
    T *y = j_->out;
    int64_t H = q->h, W = q->w, Ho = q->ho, Wo = q->wo;
    for (int64_t pl = lo_; pl < hi_; pl++) {
        const T *src = x + pl * H * W;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t hs, he, hd;
            tg_pool_avg_row(q, oh, &hs, &he, &hd);
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t ws, we, wd;
                tg_pool_avg_col(q, ow, &ws, &we, &wd);
                T acc = 0;
                for (int64_t ih = hs; ih < he; ih++)
                    for (int64_t iw = ws; iw < we; iw++) acc += src[ih * W + iw];
                y[(pl * Ho + oh) * Wo + ow] = acc / (T)(hd * wd);
            }
        }
    }
}
void NAME(tg_cpu_avg_pool)(const tg_pool_geometry *q, int64_t planes, const T *x, T *y) {
    NAME(avg_job) j_ = {q, x, y};
    tg_parallel_for(planes, planes * q->h * q->w >= POOL_GRAIN ? 1 : planes, NAME(avg_forward_chunk), &j_);
}
static void NAME(avg_backward_chunk)(int64_t lo_, int64_t hi_, void *arg_) {
    const NAME(avg_job) *j_ = arg_;
    const tg_pool_geometry *q = j_->q;
    const T *g = j_->in;
    T *gx = j_->out;
    int64_t H = q->h, W = q->w, Ho = q->ho, Wo = q->wo;
    for (int64_t pl = lo_; pl < hi_; pl++) {
        T *dst = gx + pl * H * W;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t hs, he, hd;
            tg_pool_avg_row(q, oh, &hs, &he, &hd);
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t ws, we, wd;
                tg_pool_avg_col(q, ow, &ws, &we, &wd);
                T v = g[(pl * Ho + oh) * Wo + ow] / (T)(hd * wd);
                for (int64_t ih = hs; ih < he; ih++)
                    for (int64_t iw = ws; iw < we; iw++) dst[ih * W + iw] += v;
            }
        }
    }
}
void NAME(tg_cpu_avg_unpool)(const tg_pool_geometry *q, int64_t planes, const T *g, T *gx) {
    memset(gx, 0, (size_t)(planes * q->h * q->w) * sizeof(T));
    NAME(avg_job) j_ = {q, g, gx};
    tg_parallel_for(planes, planes * q->h * q->w >= POOL_GRAIN ? 1 : planes, NAME(avg_backward_chunk), &j_);
}

/* The parameters end with this instantiation. */
#undef T
#undef NAME
