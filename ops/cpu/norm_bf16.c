/* Mixed batch norm kernels on bfloat16 elements (ops/cpu/norm_bf16.h). Each loop is the float32
 * kernel's of ops/cpu/norm_kernels.h (norm_forward, the row sums: 16 interleaved partial sums per row,
 * combined in the same order, statistics in double) with each element widened where it is
 * read and each result rounded where it is written, so the bits are those of the float32
 * kernel on a widened copy followed by a cast; the statistics and outputs by
 * ops/norm_formulas.h, as there. */
#include "ops/cpu/norm_bf16.h"

#include <math.h>
#include <stdbool.h>

#include "core/lowp.h"
#include "core/parallel.h"
#include "core/simd.h"
#include "ops/norm_formulas.h"

#define LANES 16

static inline float widen(uint16_t h) { return tg_bf16_bits_to_float(h); }

/* The row sums of ops/cpu/norm_kernels.h on widened elements: the first n / LANES * LANES
 * elements go to LANES interleaved partial sums (the *_lanes functions, which return how
 * many elements that was), combined in lane order, then the rest one by one. On AVX-512
 * the partial sums live in one zmm register each (the compiler leaves the portable loop
 * scalar, the widening in the way: 4% of a bf16 LeNet-BN step each); the same operations
 * per lane (a subtract, a multiply, an add: no FMA, as -std=c11 contracts none), so the
 * same bits either way. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAVE_AVX512_SUMS 1
__attribute__((target("avx512f"))) static inline __m512 widen16(const uint16_t *p) {
    return tg_widen_bf16x16(_mm256_loadu_si256((const __m256i *)p));
}

__attribute__((target("avx512f"))) static int64_t shifted_lanes16(const uint16_t *p, int64_t n, float shift, float *a,
                                                                  float *b) {
    __m512 va = _mm512_setzero_ps(), vb = _mm512_setzero_ps(), sh = _mm512_set1_ps(shift);
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        __m512 d = _mm512_sub_ps(widen16(p + i), sh);
        va = _mm512_add_ps(va, d);
        vb = _mm512_add_ps(vb, _mm512_mul_ps(d, d));
    }
    _mm512_storeu_ps(a, va);
    _mm512_storeu_ps(b, vb);
    return i;
}

__attribute__((target("avx512f"))) static int64_t grad_lanes16(const uint16_t *g, const uint16_t *x, int64_t n,
                                                               float shift, float *a, float *b) {
    __m512 va = _mm512_setzero_ps(), vb = _mm512_setzero_ps(), sh = _mm512_set1_ps(shift);
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        __m512 gv = widen16(g + i);
        va = _mm512_add_ps(va, gv);
        vb = _mm512_add_ps(vb, _mm512_mul_ps(gv, _mm512_sub_ps(widen16(x + i), sh)));
    }
    _mm512_storeu_ps(a, va);
    _mm512_storeu_ps(b, vb);
    return i;
}
#endif

/* d = p[i] - shift: partial sums of d and d^2. */
static int64_t shifted_lanes(const uint16_t *restrict p, int64_t n, float shift, float *a, float *b) {
#ifdef HAVE_AVX512_SUMS
    if (__builtin_cpu_supports("avx512f")) return shifted_lanes16(p, n, shift, a, b);
#endif
    for (int l = 0; l < LANES; l++) a[l] = b[l] = 0;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) {
            float d = widen(p[i + l]) - shift;
            a[l] += d;
            b[l] += d * d;
        }
    return i;
}

/* partial sums of g[i] and g[i] * (x[i] - shift). */
static int64_t grad_lanes(const uint16_t *restrict g, const uint16_t *restrict x, int64_t n, float shift, float *a,
                          float *b) {
#ifdef HAVE_AVX512_SUMS
    if (__builtin_cpu_supports("avx512f")) return grad_lanes16(g, x, n, shift, a, b);
#endif
    for (int l = 0; l < LANES; l++) a[l] = b[l] = 0;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) {
            float gv = widen(g[i + l]);
            a[l] += gv;
            b[l] += gv * (widen(x[i + l]) - shift);
        }
    return i;
}

/* sums of d = p[i] - shift and d^2 (shifted_sums_f32 of ops/cpu/norm_kernels.h). */
static void shifted_sums(const uint16_t *restrict p, int64_t n, float shift, float *s, float *ss) {
    float a[LANES], b[LANES], sa = 0, sb = 0;
    int64_t i = shifted_lanes(p, n, shift, a, b);
    for (int l = 0; l < LANES; l++) {
        sa += a[l];
        sb += b[l];
    }
    for (; i < n; i++) {
        float d = widen(p[i]) - shift;
        sa += d;
        sb += d * d;
    }
    *s = sa;
    *ss = sb;
}

/* sums of g[i] and g[i] * (x[i] - shift) (grad_sums_f32 of ops/cpu/norm_kernels.h). */
static void grad_sums(const uint16_t *restrict g, const uint16_t *restrict x, int64_t n, float shift, float *sg,
                      float *sgx) {
    float a[LANES], b[LANES], sa = 0, sb = 0;
    int64_t i = grad_lanes(g, x, n, shift, a, b);
    for (int l = 0; l < LANES; l++) {
        sa += a[l];
        sb += b[l];
    }
    for (; i < n; i++) {
        float gv = widen(g[i]);
        sa += gv;
        sb += gv * (widen(x[i]) - shift);
    }
    *sg = sa;
    *sgx = sb;
}

TG_VECTOR_CLONES static void normalize_row(const uint16_t *restrict p, int64_t n, float tm, float sc, float sh,
                                           uint16_t *restrict q) {
    for (int64_t i = 0; i < n; i++) q[i] = tg_float_to_bf16_bits(TG_BN_OUT(widen(p[i]), tm, sc, sh));
}

TG_VECTOR_CLONES static void grad_row(const uint16_t *restrict gp, const uint16_t *restrict xp, int64_t n, float ta,
                                      float tb, float tm, float tk, uint16_t *restrict q) {
    for (int64_t i = 0; i < n; i++) q[i] = tg_float_to_bf16_bits(ta * widen(gp[i]) - tb * (widen(xp[i]) - tm) + tk);
}

typedef struct {
    int64_t O, C, I;
    double eps;
    const uint16_t *x, *g;
    const float *w, *b;
    uint16_t *y;
    float *mean_out, *var_out, *gw, *gb;
    double *stats;
} bn_job;

static void forward_channels(int64_t lo, int64_t hi, void *arg) {
    const bn_job *j = arg;
    int64_t O = j->O, C = j->C, I = j->I;
    for (int64_t c = lo; c < hi; c++) {
        double s = 0, ss = 0, m = (double)(O * I);
        const float shift = widen(j->x[c * I]);
        for (int64_t o = 0; o < O; o++) {
            float rs, rss;
            shifted_sums(j->x + (o * C + c) * I, I, shift, &rs, &rss);
            s += rs;
            ss += rss;
        }
        const tg_norm_stats st = tg_norm_stats_of(s, ss, m, shift, j->eps);
        j->mean_out[c] = (float)st.mean;
        j->var_out[c] = (float)st.var;
        j->stats[2 * c] = st.mean;
        j->stats[2 * c + 1] = st.invstd;
        const float tm = (float)st.mean;
        const tg_bn_fold f = tg_bn_fold_of(&st, tm, j->w[c], j->b[c]);
        for (int64_t o = 0; o < O; o++)
            normalize_row(j->x + (o * C + c) * I, I, tm, (float)f.scale, (float)f.shift, j->y + (o * C + c) * I);
    }
}

void tg_bn_forward_bf16(int64_t O, int64_t C, int64_t I, double eps, const uint16_t *x, const float *w, const float *b,
                        uint16_t *y, float *mean_out, float *var_out, double *stats) {
    bn_job j = {O, C, I, eps, x, NULL, w, b, y, mean_out, var_out, NULL, NULL, stats};
    bool par = O * C * I >= 32768 && C > 1; /* norm.c's threshold */
    tg_parallel_for(C, par ? 1 : C, forward_channels, &j);
}

static void backward_channels(int64_t lo, int64_t hi, void *arg) {
    const bn_job *j = arg;
    int64_t O = j->O, C = j->C, I = j->I;
    for (int64_t c = lo; c < hi; c++) {
        double mean = j->stats[2 * c], invstd = j->stats[2 * c + 1], m = (double)(O * I);
        double sg = 0, sgx = 0;
        const float tm = (float)mean;
        for (int64_t o = 0; o < O; o++) {
            float rg, rgx;
            grad_sums(j->g + (o * C + c) * I, j->x + (o * C + c) * I, I, tm, &rg, &rgx);
            sg += rg;
            sgx += rgx;
        }
        sgx -= (mean - (double)tm) * sg; /* sum(g * (x - mean)) from sum(g * (x - tm)) */
        double sgxhat = sgx * invstd;
        j->gw[c] = (float)sgxhat;
        j->gb[c] = (float)sg;
        if (!j->y) continue;
        double ca = j->w[c] * invstd, cb = ca * invstd * sgxhat / m, ck = cb * (mean - tm) - ca * sg / m;
        for (int64_t o = 0; o < O; o++)
            grad_row(j->g + (o * C + c) * I, j->x + (o * C + c) * I, I, (float)ca, (float)cb, tm, (float)ck,
                     j->y + (o * C + c) * I);
    }
}

void tg_bn_backward_bf16(int64_t O, int64_t C, int64_t I, const uint16_t *g, const uint16_t *x, const float *w,
                         const double *stats, uint16_t *gx, float *gw, float *gb) {
    bn_job j = {O, C, I, 0, x, g, w, NULL, gx, NULL, NULL, gw, gb, (double *)stats};
    tg_parallel_for(C, O * C * I >= 32768 && C > 1 ? 1 : C, backward_channels, &j);
}
