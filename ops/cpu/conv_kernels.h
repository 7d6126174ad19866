/* The convolution's CPU drivers (im2col, col2im, the gathered gradient and the three
 * chunked GEMM loops) as ordinary functions, for one operand type: included once per
 * type by ops/cpu/conv.c with T (the operand: float, double, bf16 bits), A (the
 * accumulator and result: float, double, float), GEMM (the GEMM on T operands into A)
 * and NAME(f) (f_f32, f_f64, f_bf16) defined. No include guard, on purpose; it undefines its parameters at its end.
 * Contract: ops/cpu/conv.h. */

/* col [C*kH*kW, B*L] rows [r0, r1) from x [B, C, H, W]. */
typedef struct {
    const tg_conv_geom *g;
    const T *x;
    int64_t b_count;
    T *col;
} NAME(im2col_job);
static void NAME(im2col_rows)(int64_t r0, int64_t r1, void *arg) {
    const NAME(im2col_job) *j = arg;
    const tg_conv_geom *g = j->g;
    const T *x = j->x;
    int64_t b_count = j->b_count, L = g->ho * g->wo, BL = b_count * L;
    for (int64_t r = r0; r < r1; r++) {
        int64_t c, ki, kj;
        tg_conv_col_row(r, g->kh, g->kw, &c, &ki, &kj);
        int64_t lo, hi, olo, ohi; /* the output columns and rows that read inside the image */
        tg_conv_valid_range(g->wo, g->w, g->sw, g->pw, kj * g->dw, &lo, &hi);
        tg_conv_valid_range(g->ho, g->h, g->sh, g->ph, ki * g->dh, &olo, &ohi);
        bool whole_rows = g->sw == 1 && lo == 0 && hi == g->wo && g->wo * (int64_t)sizeof(T) >= 16;
        for (int64_t b = 0; b < b_count; b++) {
            const T *src = x + (b * g->c + c) * g->h * g->w;
            T *dst = j->col + r * BL + b * L;
            memset(dst, 0, (size_t)(olo * g->wo) * sizeof(T));
            memset(dst + ohi * g->wo, 0, (size_t)((g->ho - ohi) * g->wo) * sizeof(T));
            const T *row =
                src + tg_conv_tap(olo, ki * g->dh, g->sh, g->ph) * g->w + tg_conv_tap(0, kj * g->dw, g->sw, g->pw);
            T *d = dst + olo * g->wo;
            for (int64_t oh = olo; oh < ohi; oh++, d += g->wo, row += g->sh * g->w) {
                if (whole_rows) {
                    copy_short(d, row, (size_t)g->wo * sizeof(T));
                    continue;
                }
                for (int64_t ow = 0; ow < lo; ow++) d[ow] = 0;
                if (g->sw == 1)
                    for (int64_t ow = lo; ow < hi; ow++) d[ow] = row[ow];
                else
                    for (int64_t ow = lo; ow < hi; ow++) d[ow] = row[ow * g->sw];
                for (int64_t ow = hi; ow < g->wo; ow++) d[ow] = 0;
            }
        }
    }
}
static void NAME(im2col)(const tg_conv_geom *g, const T *x, int64_t b_count, T *col) {
    int64_t rows = g->c * g->kh * g->kw, BL = b_count * g->ho * g->wo;
    NAME(im2col_job) j = {g, x, b_count, col};
    tg_parallel_for(rows, rows * BL >= TG_CONV_GRAIN ? 1 : rows, NAME(im2col_rows), &j);
}
/* gx [B, C, H, W] += col2im(col [C*kH*kW, B*L]); each (b, c) plane by one thread. */
typedef struct {
    const tg_conv_geom *g;
    const A *col;
    int64_t b_count;
    A *gx;
} NAME(col2im_job);
static void NAME(col2im_planes)(int64_t p0, int64_t p1, void *arg) {
    const NAME(col2im_job) *j = arg;
    const tg_conv_geom *g = j->g;
    int64_t L = g->ho * g->wo, BL = j->b_count * L;
    bool rows = col2im_rows_apply(g, sizeof(A));
    for (int64_t pl = p0; pl < p1; pl++) {
        int64_t b = pl / g->c, c = pl % g->c;
        A *dst = j->gx + pl * g->h * g->w;
        if (rows) {
            col2im_plane_rows(g, (const float *)j->col, BL, b, c, (float *)dst);
            continue;
        }
        for (int64_t ki = 0; ki < g->kh; ki++)
            for (int64_t kj = 0; kj < g->kw; kj++) {
                int64_t lo, hi;
                tg_conv_valid_range(g->wo, g->w, g->sw, g->pw, kj * g->dw, &lo, &hi);
                const A *src = j->col + ((c * g->kh + ki) * g->kw + kj) * BL + b * L;
                for (int64_t oh = 0; oh < g->ho; oh++) {
                    int64_t ih = tg_conv_tap(oh, ki * g->dh, g->sh, g->ph);
                    if (ih < 0 || ih >= g->h) continue;
                    A *row = dst + ih * g->w + tg_conv_tap(0, kj * g->dw, g->sw, g->pw);
                    const A *s = src + oh * g->wo;
                    for (int64_t ow = lo; ow < hi; ow++) row[ow * g->sw] += s[ow];
                }
            }
    }
}
static void NAME(col2im)(const tg_conv_geom *g, const A *col, int64_t b_count, A *gx) {
    int64_t L = g->ho * g->wo, planes = b_count * g->c;
    NAME(col2im_job) j = {g, col, b_count, gx};
    tg_parallel_for(planes, planes * g->kh * g->kw * L >= TG_CONV_GRAIN ? 1 : planes, NAME(col2im_planes), &j);
}
/* tmp [Co, B*L] (A) -> y [B, Co, L] (A, images n0..), adding the bias. */
typedef struct {
    const tg_conv_geom *g;
    int64_t n0, B;
    const A *bias;
    A *y;
    const A *tmp;
} NAME(scatter_job);
static void NAME(scatter_out)(int64_t p0, int64_t p1, void *arg) {
    const NAME(scatter_job) *j = arg;
    const tg_conv_geom *g = j->g;
    int64_t L = g->ho * g->wo, BL = j->B * L;
    for (int64_t p = p0; p < p1; p++) {
        int64_t b = p / g->co, o = p % g->co;
        A *dst = j->y + ((j->n0 + b) * g->co + o) * L;
        const A *src = j->tmp + o * BL + b * L;
        A add = j->bias ? j->bias[o] : 0;
        for (int64_t l = 0; l < L; l++) dst[l] = src[l] + add;
    }
}
/* grad [B, Co, L] (T, images n0..) -> gmat [Co, B*L]. */
typedef struct {
    const tg_conv_geom *g;
    int64_t n0, B;
    const T *grad;
    T *gmat;
} NAME(gather_job);
static void NAME(gather_rows)(int64_t p0, int64_t p1, void *arg) {
    const NAME(gather_job) *j = arg;
    const tg_conv_geom *g = j->g;
    int64_t L = g->ho * g->wo, BL = j->B * L;
    for (int64_t p = p0; p < p1; p++) {
        int64_t b = p / g->co, o = p % g->co;
        memcpy(j->gmat + o * BL + b * L, j->grad + ((j->n0 + b) * g->co + o) * L, (size_t)L * sizeof(T));
    }
}
static void NAME(gather_grad)(const tg_conv_geom *g, const T *grad, int64_t n0, int64_t B, T *gmat) {
    NAME(gather_job) j = {g, n0, B, grad, gmat};
    int64_t n = B * g->co;
    tg_parallel_for(n, n * g->ho * g->wo >= TG_CONV_GRAIN ? 1 : n, NAME(gather_rows), &j);
}
/* The calls' common arguments; task t of a plan with `threads` tasks takes a block of the
 * chunks, with workspace t (and, for the weight gradient, partial sum t). The workspaces
 * hold T or A elements by call (see workspaces()), so they are untyped here. */
typedef struct {
    const tg_conv_geom *g;
    tg_conv_plan pl;
    const T *x, *w, *grad;
    const A *bias;
    A *out, *part;
    void *col_all, *mat_all;
} NAME(conv_job);
static void NAME(chunk_range)(const NAME(conv_job) *j, int64_t t, int64_t *c0, int64_t *c1) {
    int64_t nchunks = j->pl.chunk > 0 ? (j->g->n + j->pl.chunk - 1) / j->pl.chunk : 0;
    int64_t per = (nchunks + j->pl.threads - 1) / j->pl.threads;
    *c0 = t * per < nchunks ? t * per : nchunks;
    *c1 = *c0 + per < nchunks ? *c0 + per : nchunks;
}
/* y [N, Co, Ho, Wo] = w [Co, C/G, kH, kW] * x [N, C, H, W] + bias [Co] (bias may be NULL). */
static void NAME(forward_tasks)(int64_t t0, int64_t t1, void *arg) {
    const NAME(conv_job) *j = arg;
    const tg_conv_geom *g = j->g;
    int64_t L = g->ho * g->wo, G = g->groups, cog = g->co / G, kg = g->c / G * g->kh * g->kw, chunk = j->pl.chunk;
    for (int64_t t = t0; t < t1; t++) {
        T *col = (T *)j->col_all + t * (g->c * g->kh * g->kw * chunk * L);
        A *tmp = (A *)j->mat_all + t * (g->co * chunk * L);
        int64_t c0, c1;
        NAME(chunk_range)(j, t, &c0, &c1);
        for (int64_t ci = c0; ci < c1; ci++) {
            int64_t n0 = ci * chunk, B = g->n - n0 < chunk ? g->n - n0 : chunk, BL = B * L;
            NAME(im2col)(g, j->x + n0 * g->c * g->h * g->w, B, col);
            for (int64_t gr = 0; gr < G; gr++)
                GEMM(false, false, cog, BL, kg, 1, j->w + gr * cog * kg, kg, col + gr * kg * BL, BL, 0,
                     tmp + gr * cog * BL, BL);
            NAME(scatter_job) sj = {g, n0, B, j->bias, j->out, tmp};
            int64_t n = B * g->co;
            tg_parallel_for(n, n * L >= TG_CONV_GRAIN ? 1 : n, NAME(scatter_out), &sj);
        }
    }
}
void NAME(tg_cpu_conv_forward)(const tg_conv_geom *g, tg_conv_plan pl, const T *x, const T *w, const A *bias, A *y,
                               void *col_all, void *tmp_all) {
    NAME(conv_job) j = {g, pl, x, w, NULL, bias, y, NULL, col_all, tmp_all};
    tg_parallel_for(pl.threads, 1, NAME(forward_tasks), &j);
}
/* gx [N, C, H, W] = col2im(w^T grad). */
static void NAME(input_grad_tasks)(int64_t t0, int64_t t1, void *arg) {
    const NAME(conv_job) *j = arg;
    const tg_conv_geom *g = j->g;
    int64_t L = g->ho * g->wo, G = g->groups, cog = g->co / G, kg = g->c / G * g->kh * g->kw, chunk = j->pl.chunk;
    for (int64_t t = t0; t < t1; t++) {
        A *col = (A *)j->col_all + t * (g->c * g->kh * g->kw * chunk * L);
        T *gmat = (T *)j->mat_all + t * (g->co * chunk * L);
        int64_t c0, c1;
        NAME(chunk_range)(j, t, &c0, &c1);
        for (int64_t ci = c0; ci < c1; ci++) {
            int64_t n0 = ci * chunk, B = g->n - n0 < chunk ? g->n - n0 : chunk, BL = B * L;
            NAME(gather_grad)(g, j->grad, n0, B, gmat);
            for (int64_t gr = 0; gr < G; gr++)
                GEMM(true, false, kg, BL, cog, 1, j->w + gr * cog * kg, kg, gmat + gr * cog * BL, BL, 0,
                     col + gr * kg * BL, BL);
            NAME(col2im)(g, col, B, j->out + n0 * g->c * g->h * g->w);
        }
    }
}
void NAME(tg_cpu_conv_input_grad)(const tg_conv_geom *g, tg_conv_plan pl, const T *grad, const T *w, A *gx,
                                  void *col_all, void *gmat_all) {
    memset(gx, 0, (size_t)(g->n * g->c * g->h * g->w) * sizeof(A));
    NAME(conv_job) j = {g, pl, NULL, w, grad, NULL, gx, NULL, col_all, gmat_all};
    tg_parallel_for(pl.threads, 1, NAME(input_grad_tasks), &j);
}
/* gw [Co, C/G, kH, kW] = sum over images of grad * im2col(x)^T; task t > 0 sums its images
 * into part + (t - 1) * Co * kg, added to gw in task order afterwards. */
static void NAME(weight_grad_tasks)(int64_t t0, int64_t t1, void *arg) {
    const NAME(conv_job) *j = arg;
    const tg_conv_geom *g = j->g;
    int64_t L = g->ho * g->wo, G = g->groups, cog = g->co / G, kg = g->c / G * g->kh * g->kw, chunk = j->pl.chunk;
    int64_t wsize = g->co * kg;
    for (int64_t t = t0; t < t1; t++) {
        T *col = (T *)j->col_all + t * (g->c * g->kh * g->kw * chunk * L);
        T *gmat = (T *)j->mat_all + t * (g->co * chunk * L);
        A *acc = t == 0 ? j->out : j->part + (t - 1) * wsize;
        int64_t c0, c1;
        NAME(chunk_range)(j, t, &c0, &c1);
        for (int64_t ci = c0; ci < c1; ci++) {
            int64_t n0 = ci * chunk, B = g->n - n0 < chunk ? g->n - n0 : chunk, BL = B * L;
            NAME(im2col)(g, j->x + n0 * g->c * g->h * g->w, B, col);
            NAME(gather_grad)(g, j->grad, n0, B, gmat);
            for (int64_t gr = 0; gr < G; gr++)
                GEMM(false, true, cog, kg, BL, 1, gmat + gr * cog * BL, BL, col + gr * kg * BL, BL, 1,
                     acc + gr * cog * kg, kg);
        }
    }
}
void NAME(tg_cpu_conv_weight_grad)(const tg_conv_geom *g, tg_conv_plan pl, const T *x, const T *grad, A *gw,
                                   void *col_all, void *gmat_all, A *part) {
    int64_t wsize = g->co * (g->c / g->groups) * g->kh * g->kw;
    memset(gw, 0, (size_t)wsize * sizeof(A));
    if (pl.threads > 1) memset(part, 0, (size_t)((pl.threads - 1) * wsize) * sizeof(A));
    NAME(conv_job) j = {g, pl, x, NULL, grad, NULL, gw, part, col_all, gmat_all};
    tg_parallel_for(pl.threads, 1, NAME(weight_grad_tasks), &j);
    /* In task order: the same sums for the same plan, whichever threads ran the tasks. */
    for (int t = 1; t < pl.threads; t++)
        for (int64_t i = 0; i < wsize; i++) gw[i] += part[(t - 1) * wsize + i];
}

/* The parameters end with this instantiation. */
#undef T
#undef A
#undef GEMM
#undef NAME
