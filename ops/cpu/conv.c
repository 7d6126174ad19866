/* The convolution's CPU kernels (ops/cpu/conv.h): the chunk plan, im2col / col2im
 * and the GEMM drivers for float32, float64 and bfloat16 operands (one body,
 * ops/cpu/conv_kernels.h), and the bfloat16 forward that rounds as it scatters. Why
 * chunks: the note "conv chunks" in ops/conv.c. */
#include "ops/cpu/conv.h"

#include <stdbool.h>
#include <string.h>

#include "core/lowp.h"
#include "core/parallel.h"
#include "core/simd.h"
#include "ops/conv_index.h"
#include "ops/cpu/gemm.h"

tg_conv_geom tg_conv_make_geom(int64_t n, int64_t c, int64_t co, const tg_conv_params *p) {
    tg_conv_geom g = {n, c, p->h, p->w, co, p->kh, p->kw, 0, 0, p->sh, p->sw, p->ph, p->pw, p->dh, p->dw, p->groups};
    g.ho = tg_conv_out_size(p->h, p->kh, p->sh, p->ph, p->dh);
    g.wo = tg_conv_out_size(p->w, p->kw, p->sw, p->pw, p->dw);
    return g;
}

/* Images per chunk (see "conv chunks"). */
static int64_t chunk_images(const tg_conv_geom *g, size_t elem) {
    int64_t per_image = g->c * g->kh * g->kw * g->ho * g->wo * (int64_t)elem;
    int64_t b = per_image > 0 ? ((int64_t)1 << 20) / per_image : g->n;
    if (b < 1) b = 1;
    return b < g->n ? b : g->n;
}

tg_conv_plan tg_conv_make_plan(const tg_conv_geom *g, size_t elem) {
    tg_conv_plan p = {1, chunk_images(g, elem)};
    int nt = tg_in_parallel_region() ? 1 : tg_get_num_threads();
    int64_t work = g->n * g->co * (g->c / g->groups) * g->kh * g->kw * g->ho * g->wo; /* multiply-adds */
    if (nt < 2 || g->n < nt || work < ((int64_t)1 << 22)) return p;
    /* Weight grad keeps a partial weight per extra thread: only when that stays small next to
     * the work and in memory (a wide conv with many threads keeps the threaded GEMMs). */
    int64_t wsize = g->co * (g->c / g->groups) * g->kh * g->kw;
    if (wsize * nt > work / 16 || (size_t)(wsize * (nt - 1)) * elem > ((size_t)32 << 20)) return p;
    /* A multiple of nt chunks of equal size, each at most the L2-sized chunk. */
    int64_t per = (g->n + (int64_t)nt * p.chunk - 1) / ((int64_t)nt * p.chunk); /* chunks per thread */
    p.threads = nt;
    p.chunk = (g->n + (int64_t)nt * per - 1) / ((int64_t)nt * per);
    return p;
}

/* Copies a short row of n >= 16 bytes in 16-byte moves, the last one overlapping: rows
 * of Wo elements are too short for a memcpy call or a vectorised loop's prologue to
 * pay off (single-threaded, LeNet conv1 forward 1.26 -> 0.71 ms, conv2 2.96 -> 2.60 ms). */
static inline void copy_short(void *restrict dst, const void *restrict src, size_t n) {
    char *d = dst;
    const char *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) memcpy(d + i, s + i, 16);
    if (i < n) memcpy(d + n - 16, s + n - 16, 16);
}

/* col2im of one float32 plane for stride 1 and dilation 1 with rows of at most 16
 * (LeNet's and most small images'): each input row is summed in a register, one masked
 * load of a column row per tap, four rows side by side, and stored once. The generic loop below adds each tap's
 * short row into the plane in memory, and its overlapping unaligned loads and stores
 * (taps one column apart) stall on store forwarding. Each element gets its taps in the
 * same (ki, kj) order either way, so the same sums. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("avx512f"))) static void col2im_plane_rows(const tg_conv_geom *g, const float *col, int64_t BL,
                                                                 int64_t b, int64_t c, float *dst) {
    enum { ROWS = 4 }; /* input rows at a time: four independent chains of adds */
    int64_t L = g->ho * g->wo;
    __mmask16 in_row = (__mmask16)((1u << g->w) - 1);
    for (int64_t ih0 = 0; ih0 < g->h; ih0 += ROWS) {
        int rows = g->h - ih0 < ROWS ? (int)(g->h - ih0) : ROWS;
        __m512 acc[ROWS];
        for (int r = 0; r < ROWS; r++)
            acc[r] = r < rows ? _mm512_maskz_loadu_ps(in_row, dst + (ih0 + r) * g->w) : _mm512_setzero_ps();
        for (int64_t ki = 0; ki < g->kh; ki++) {
            const float *tap = col + (c * g->kh + ki) * g->kw * BL + b * L;
            for (int64_t kj = 0; kj < g->kw; kj++, tap += BL) {
                int64_t d = kj - g->pw; /* iw = ow + d */
                uint32_t lanes = (uint32_t)((1u << g->wo) - 1);
                lanes = d >= 0 ? lanes << d : lanes >> -d;
                __mmask16 m = (__mmask16)(lanes & in_row);
                for (int r = 0; r < ROWS; r++) {
                    int64_t oh = ih0 + r + g->ph - ki; /* ih = oh - ph + ki */
                    if (r >= rows || oh < 0 || oh >= g->ho) continue;
                    /* lane iw reads the tap's row oh at ow = iw - d; masked-off lanes are not read */
                    const char *src = (const char *)(tap + oh * g->wo) - d * (int64_t)sizeof(float);
                    acc[r] = _mm512_add_ps(acc[r], _mm512_maskz_loadu_ps(m, src));
                }
            }
        }
        for (int r = 0; r < rows; r++) _mm512_mask_storeu_ps(dst + (ih0 + r) * g->w, in_row, acc[r]);
    }
}

static bool col2im_rows_apply(const tg_conv_geom *g, size_t elem) {
    return __builtin_cpu_supports("avx512f") && elem == sizeof(float) && g->sh == 1 && g->sw == 1 && g->dh == 1 &&
           g->dw == 1 && g->w <= 16 && g->wo <= 16 && g->pw < 16;
}
#else
static void col2im_plane_rows(const tg_conv_geom *g, const float *col, int64_t BL, int64_t b, int64_t c, float *dst) {
    (void)g, (void)col, (void)BL, (void)b, (void)c, (void)dst;
}
static bool col2im_rows_apply(const tg_conv_geom *g, size_t elem) { return (void)g, (void)elem, false; }
#endif

#define T float
#define A float
#define GEMM tg_gemm_f32
#define NAME(f) f##_f32
#include "ops/cpu/conv_kernels.h"

#define T double
#define A double
#define GEMM tg_gemm_f64
#define NAME(f) f##_f64
#include "ops/cpu/conv_kernels.h"

/* bfloat16 operands, float32 results: the AVX512-BF16 GEMM (ops/cpu/gemm_bf16.c) under the same
 * drivers. im2col and the gathered gradient move 2-byte elements; every GEMM sums in float32
 * into a float32 result (y, the columns col2im adds up, the weight gradient), which the
 * callers round to bfloat16 once. The drivers pass alpha 1 and beta 0 or 1. */
static void gemm_bf16_to_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                             const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, float beta, float *c,
                             int64_t ldc) {
    (void)alpha;
    tg_gemm_bf16(m, n, k, a, trans_a ? 1 : lda, trans_a ? lda : 1, b, trans_b ? 1 : ldb, trans_b ? ldb : 1, beta != 0,
                 c, ldc);
}
/* Its tg_cpu_conv_forward_bf16 (a float32 y) is not used by ops/conv.c, which rounds as it
 * scatters: tg_cpu_conv_forward_bf16_rounded below. */
#define T uint16_t
#define A float
#define GEMM gemm_bf16_to_f32
#define NAME(f) f##_bf16
#include "ops/cpu/conv_kernels.h"

/* dst[i] = bfloat16(src[i] + add), rounded as tg_cast rounds. */
TG_VECTOR_CLONES static void round_to_bf16(const float *restrict src, float add, int64_t n, uint16_t *restrict dst) {
    for (int64_t i = 0; i < n; i++) dst[i] = tg_float_to_bf16_bits(src[i] + add);
}

/* The bfloat16 forward with a bfloat16 output: forward_tasks_bf16's chunks, but each chunk's
 * float32 GEMM result (plus the bias) is rounded as it is scattered into y, so no float32 y
 * is allocated, written and cast (the same bits: each element rounded once). */
typedef struct {
    const tg_conv_geom *g;
    int64_t n0, B;
    const float *bias, *tmp;
    uint16_t *y;
} scatter_rounded_job;
static void scatter_rounded(int64_t p0, int64_t p1, void *arg) {
    const scatter_rounded_job *j = arg;
    const tg_conv_geom *g = j->g;
    int64_t L = g->ho * g->wo, BL = j->B * L;
    for (int64_t p = p0; p < p1; p++) {
        int64_t b = p / g->co, o = p % g->co;
        round_to_bf16(j->tmp + o * BL + b * L, j->bias ? j->bias[o] : 0, L, j->y + ((j->n0 + b) * g->co + o) * L);
    }
}
typedef struct {
    const tg_conv_geom *g;
    tg_conv_plan pl;
    const uint16_t *x, *w;
    const float *bias;
    uint16_t *y;
    void *col_all, *tmp_all;
} forward_rounded_job;
static void forward_rounded_tasks(int64_t t0, int64_t t1, void *arg) {
    const forward_rounded_job *j = arg;
    const tg_conv_geom *g = j->g;
    int64_t L = g->ho * g->wo, G = g->groups, cog = g->co / G, kg = g->c / G * g->kh * g->kw, chunk = j->pl.chunk;
    conv_job_bf16 range = {.g = g, .pl = j->pl};
    for (int64_t t = t0; t < t1; t++) {
        uint16_t *col = (uint16_t *)j->col_all + t * (g->c * g->kh * g->kw * chunk * L);
        float *tmp = (float *)j->tmp_all + t * (g->co * chunk * L);
        int64_t c0, c1;
        chunk_range_bf16(&range, t, &c0, &c1);
        for (int64_t ci = c0; ci < c1; ci++) {
            int64_t n0 = ci * chunk, B = g->n - n0 < chunk ? g->n - n0 : chunk, BL = B * L;
            im2col_bf16(g, j->x + n0 * g->c * g->h * g->w, B, col);
            for (int64_t gr = 0; gr < G; gr++)
                gemm_bf16_to_f32(false, false, cog, BL, kg, 1, j->w + gr * cog * kg, kg, col + gr * kg * BL, BL, 0,
                                 tmp + gr * cog * BL, BL);
            scatter_rounded_job sj = {g, n0, B, j->bias, tmp, j->y};
            int64_t n = B * g->co;
            tg_parallel_for(n, n * L >= TG_CONV_GRAIN ? 1 : n, scatter_rounded, &sj);
        }
    }
}
void tg_cpu_conv_forward_bf16_rounded(const tg_conv_geom *g, tg_conv_plan pl, const uint16_t *x, const uint16_t *w,
                                      const float *bias, uint16_t *y, void *col_all, void *tmp_all) {
    forward_rounded_job j = {g, pl, x, w, bias, y, col_all, tmp_all};
    tg_parallel_for(pl.threads, 1, forward_rounded_tasks, &j);
}
