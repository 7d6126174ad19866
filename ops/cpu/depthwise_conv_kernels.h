/* The depthwise convolution's CPU kernels (ops/cpu/depthwise_conv.h) as ordinary functions,
 * for one operand type: included once per type by ops/cpu/depthwise_conv.c with T (the
 * operand and accumulator: float, double) and NAME(f) (f_f32, f_f64) defined. No include
 * guard, on purpose; it undefines its parameters at its end.
 *
 * Geometry (tg_conv_geom): input plane [H, W], output plane [Ho, Wo] (L = Ho * Wo), kernel
 * [kH, kW] (K = kH * kW taps), m = Co / C output channels per input channel; output
 * channel o reads input channel o / m. Each plane function works on one plane with the
 * taps outermost: for tap (ki, kj) the output rows [olo, ohi) and columns [lo, hi) whose
 * input lies inside the image (tg_conv_valid_range), one vectorisable row loop each; so
 * each element gets its terms in (ki, kj) order whatever the thread count. The weight
 * gradient works in blocks of DW_TAPS taps by DW_COLS output columns (depthwise_conv.c). */

/* One call's operands; the loops below take [begin, end) ranges of its planes or channels. */
typedef struct {
    const tg_conv_geom *g;
    const T *x, *w, *bias, *grad;
    T *out;
} NAME(dw_job);

/* y[i] += a * x[i * s], i < n. */
static inline void NAME(dw_axpy)(T *restrict y, const T *restrict x, T a, int64_t n, int s) {
    if (s == 1)
        for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
    else
        for (int64_t i = 0; i < n; i++) y[i] += a * x[i * s];
}

/* y[i * s] += a * x[i], i < n. */
static inline void NAME(dw_axpy_scatter)(T *restrict y, const T *restrict x, T a, int64_t n, int s) {
    if (s == 1)
        for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
    else
        for (int64_t i = 0; i < n; i++) y[i * s] += a * x[i];
}

/* acc[i] += a[i] * b[i * s], i < n. */
static inline void NAME(dw_mul_acc)(T *restrict acc, const T *restrict a, const T *restrict b, int64_t n, int s) {
    if (s == 1)
        for (int64_t i = 0; i < n; i++) acc[i] += a[i] * b[i];
    else
        for (int64_t i = 0; i < n; i++) acc[i] += a[i] * b[i * s];
}

/* y [Ho, Wo] (one output plane) = the K taps of w over the input plane x [H, W], then + bias. */
TG_VECTOR_CLONES static void NAME(dw_forward_plane)(const tg_conv_geom *g, const T *restrict x, const T *restrict w,
                                                    T bias, T *restrict y) {
    int64_t L = g->ho * g->wo;
    for (int64_t i = 0; i < L; i++) y[i] = 0;
    for (int64_t ki = 0; ki < g->kh; ki++) {
        int64_t olo, ohi;
        tg_conv_valid_range(g->ho, g->h, g->sh, g->ph, ki * g->dh, &olo, &ohi);
        for (int64_t kj = 0; kj < g->kw; kj++) {
            int64_t lo, hi;
            tg_conv_valid_range(g->wo, g->w, g->sw, g->pw, kj * g->dw, &lo, &hi);
            if (lo >= hi) continue;
            int64_t iw = tg_conv_tap(lo, kj * g->dw, g->sw, g->pw); /* the input column of output column lo */
            for (int64_t oh = olo; oh < ohi; oh++) {
                int64_t ih = tg_conv_tap(oh, ki * g->dh, g->sh, g->ph);
                NAME(dw_axpy)(y + oh * g->wo + lo, x + ih * g->w + iw, w[ki * g->kw + kj], hi - lo, g->sw);
            }
        }
    }
    for (int64_t i = 0; i < L; i++) y[i] += bias;
}

/* Output planes [p0, p1) of [N, Co]. */
static void NAME(dw_forward_planes)(int64_t p0, int64_t p1, void *arg) {
    const NAME(dw_job) *j = arg;
    const tg_conv_geom *g = j->g;
    int64_t m = g->co / g->c, L = g->ho * g->wo, hw = g->h * g->w, K = g->kh * g->kw;
    for (int64_t p = p0; p < p1; p++) {
        int64_t n = p / g->co, o = p % g->co;
        const T *x = j->x + (n * g->c + o / m) * hw;
        NAME(dw_forward_plane)(g, x, j->w + o * K, j->bias ? j->bias[o] : 0, j->out + p * L);
    }
}

/* gx [H, W] (one input plane, channel c) = the sum over its m output planes grad [m, Ho, Wo]
 * (output channels c * m ..) of each tap of their weights w [m, K] times the rows it reads. */
TG_VECTOR_CLONES static void NAME(dw_input_grad_plane)(const tg_conv_geom *g, const T *restrict grad,
                                                       const T *restrict w, T *restrict gx) {
    int64_t m = g->co / g->c, L = g->ho * g->wo, K = g->kh * g->kw;
    for (int64_t i = 0; i < g->h * g->w; i++) gx[i] = 0;
    for (int64_t q = 0; q < m; q++)
        for (int64_t ki = 0; ki < g->kh; ki++) {
            int64_t olo, ohi;
            tg_conv_valid_range(g->ho, g->h, g->sh, g->ph, ki * g->dh, &olo, &ohi);
            for (int64_t kj = 0; kj < g->kw; kj++) {
                int64_t lo, hi;
                tg_conv_valid_range(g->wo, g->w, g->sw, g->pw, kj * g->dw, &lo, &hi);
                if (lo >= hi) continue;
                int64_t iw = tg_conv_tap(lo, kj * g->dw, g->sw, g->pw);
                T wt = w[q * K + ki * g->kw + kj];
                for (int64_t oh = olo; oh < ohi; oh++) {
                    int64_t ih = tg_conv_tap(oh, ki * g->dh, g->sh, g->ph);
                    NAME(dw_axpy_scatter)(gx + ih * g->w + iw, grad + q * L + oh * g->wo + lo, wt, hi - lo, g->sw);
                }
            }
        }
}

/* Input planes [p0, p1) of [N, C]. */
static void NAME(dw_input_grad_planes)(int64_t p0, int64_t p1, void *arg) {
    const NAME(dw_job) *j = arg;
    const tg_conv_geom *g = j->g;
    int64_t m = g->co / g->c, L = g->ho * g->wo, K = g->kh * g->kw;
    for (int64_t p = p0; p < p1; p++) {
        int64_t n = p / g->c, c = p % g->c;
        NAME(dw_input_grad_plane)(g, j->grad + (n * g->co + c * m) * L, j->w + c * m * K, j->out + p * g->h * g->w);
    }
}

/* gw[t] += the weight gradient's terms of taps [t0, t1) at output columns [c0, c1), for one
 * output channel: x and grad are its input and output planes of image 0 (image n at
 * n * C * H * W and n * Co * L). acc[t][col] sums grad * x over images, then rows, in
 * order; its columns are then added in order. */
TG_VECTOR_CLONES static void NAME(dw_weight_grad_block)(const tg_conv_geom *g, const T *restrict x,
                                                        const T *restrict grad, int64_t t0, int64_t t1, int64_t c0,
                                                        int64_t c1, T *restrict gw) {
    T acc[DW_TAPS][DW_COLS];
    int64_t olo[DW_TAPS], ohi[DW_TAPS], lo[DW_TAPS], hi[DW_TAPS];
    for (int64_t t = t0; t < t1; t++) {
        int64_t ki = t / g->kw, kj = t % g->kw, r = t - t0;
        tg_conv_valid_range(g->ho, g->h, g->sh, g->ph, ki * g->dh, &olo[r], &ohi[r]);
        tg_conv_valid_range(g->wo, g->w, g->sw, g->pw, kj * g->dw, &lo[r], &hi[r]);
        lo[r] = lo[r] > c0 ? lo[r] : c0;
        hi[r] = hi[r] < c1 ? hi[r] : c1;
        for (int64_t i = 0; i < c1 - c0; i++) acc[r][i] = 0;
    }
    for (int64_t n = 0; n < g->n; n++) {
        const T *xn = x + n * g->c * g->h * g->w, *gn = grad + n * g->co * g->ho * g->wo;
        for (int64_t t = t0; t < t1; t++) {
            int64_t ki = t / g->kw, kj = t % g->kw, r = t - t0;
            if (lo[r] >= hi[r]) continue;
            int64_t iw = tg_conv_tap(lo[r], kj * g->dw, g->sw, g->pw);
            for (int64_t oh = olo[r]; oh < ohi[r]; oh++) {
                int64_t ih = tg_conv_tap(oh, ki * g->dh, g->sh, g->ph);
                NAME(dw_mul_acc)(acc[r] + lo[r] - c0, gn + oh * g->wo + lo[r], xn + ih * g->w + iw, hi[r] - lo[r],
                                 g->sw);
            }
        }
    }
    for (int64_t t = t0; t < t1; t++) {
        T s = 0;
        for (int64_t i = 0; i < c1 - c0; i++) s += acc[t - t0][i];
        gw[t] += s;
    }
}

/* Output channels [o0, o1): gw [Co, K], each channel's taps summed over all the images. */
static void NAME(dw_weight_grad_channels)(int64_t o0, int64_t o1, void *arg) {
    const NAME(dw_job) *j = arg;
    const tg_conv_geom *g = j->g;
    int64_t m = g->co / g->c, L = g->ho * g->wo, hw = g->h * g->w, K = g->kh * g->kw;
    for (int64_t o = o0; o < o1; o++) {
        T *gw = j->out + o * K;
        for (int64_t t = 0; t < K; t++) gw[t] = 0;
        for (int64_t t0 = 0; t0 < K; t0 += DW_TAPS)
            for (int64_t c0 = 0; c0 < g->wo; c0 += DW_COLS) {
                int64_t t1 = t0 + DW_TAPS < K ? t0 + DW_TAPS : K;
                int64_t c1 = c0 + DW_COLS < g->wo ? c0 + DW_COLS : g->wo;
                NAME(dw_weight_grad_block)(g, j->x + (o / m) * hw, j->grad + o * L, t0, t1, c0, c1, gw);
            }
    }
}

/* Splits n units of `work` multiply-adds each over the pool when the whole is worth it. */
static void NAME(dw_run)(int64_t n, int64_t work, tg_parallel_fn fn, NAME(dw_job) *j) {
    tg_parallel_for(n, n * work >= TG_CONV_GRAIN ? 1 : n, fn, j);
}

void NAME(tg_cpu_depthwise_conv_forward)(const tg_conv_geom *g, const T *x, const T *w, const T *bias, T *y) {
    NAME(dw_job) j = {g, x, w, bias, NULL, y};
    NAME(dw_run)(g->n * g->co, g->ho * g->wo * g->kh * g->kw, NAME(dw_forward_planes), &j);
}

void NAME(tg_cpu_depthwise_conv_input_grad)(const tg_conv_geom *g, const T *grad, const T *w, T *gx) {
    NAME(dw_job) j = {g, NULL, w, NULL, grad, gx};
    NAME(dw_run)(g->n * g->c, g->co / g->c * g->ho * g->wo * g->kh * g->kw, NAME(dw_input_grad_planes), &j);
}

void NAME(tg_cpu_depthwise_conv_weight_grad)(const tg_conv_geom *g, const T *x, const T *grad, T *gw) {
    NAME(dw_job) j = {g, x, NULL, NULL, grad, gw};
    NAME(dw_run)(g->co, g->n * g->ho * g->wo * g->kh * g->kw, NAME(dw_weight_grad_channels), &j);
}

/* The parameters end with this instantiation. */
#undef T
#undef NAME
