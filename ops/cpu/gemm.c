/* CPU GEMM split over the thread pool (ops/cpu/gemm.h). */
#include "ops/cpu/gemm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "core/simd.h"
#include "ops/cpu/blas.h"
#include "ops/cpu/onednn_gemm.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) /* as core/simd.h: its helpers are GCC-only */
#define HAVE_DOT_KERNEL 1                                           /* gemm_dot below */
#include <immintrin.h>
#define DOT_TARGET __attribute__((target("avx512f")))
#define DOT_KB 2048 /* k per block: (m + n) rows of it in L2 */
#endif
#define SKINNY_M_MAX 64   /* the short product below: at most 4 zmm of A^T per k */
#define SKINNY_K_MAX 4096 /* A^T ([k, m]) within L2 */

#define BLOCK_ALIGN 16 /* block edges on a multiple of the micro-kernels' tile sizes */

/* A product cut into blocks of C along its longer dim: block b is units
 * [units b / blocks, units (b + 1) / blocks) of BLOCK_ALIGN rows (or columns). */
typedef struct {
    tg_gemm_args p;
    bool by_rows;          /* blocks are rows of C (else columns) */
    bool onednn;           /* oneDNN's, in blocks fixed by the shape (else OpenBLAS's, a block per thread) */
    int64_t units, blocks; /* blocks of whole units */
    const float *bias;     /* oneDNN's only: added to each row of a block right after its product */
    float *col_partials;   /* oneDNN's by rows with p.a_col_sums: [blocks, k] sums of A's rows per block */
} gemm_job;

static void call_blas(const tg_gemm_args *g, int64_t m, int64_t n, const void *a, const void *b, void *c) {
    tg_blas_gemm(g->f64, g->trans_a, g->trans_b, m, n, g->k, g->alpha, a, g->lda, b, g->ldb, g->beta, c, g->ldc);
}

/* ---- oneDNN's products ----
 * A float32 product of m n k > 100^3 that none of our own kernels below takes runs on
 * oneDNN's sgemm when it is installed (ops/cpu/onednn_gemm.h). oneDNN picks its kernels
 * by the shape it is given, so a block of C is not always summed as the whole product
 * would be (seen: 128 x 4096 x 1024 cut at 48 rows). So that results stay independent of
 * the thread count, such a product is always cut into the same blocks along the longer
 * side of C, their number fixed by the shape: blocks of about ONEDNN_BLOCK_WORK
 * multiply-adds (0.1 ms of a core), at least ONEDNN_BLOCK_MIN rows, an even number of
 * them so that two threads share them evenly; the threads take blocks as they finish. */
#define ONEDNN_BLOCK_WORK (INT64_C(1) << 24)
#define ONEDNN_BLOCK_MIN 128

static bool use_onednn(const tg_gemm_args *g) {
    return !g->f64 && (double)g->m * (double)g->n * (double)g->k > 1e6 && tg_onednn_available();
}

static int64_t onednn_blocks(const tg_gemm_args *g, bool by_rows, int64_t units) {
    int64_t side = by_rows ? g->m : g->n, row_work = (by_rows ? g->n : g->m) * g->k;
    int64_t rows = ONEDNN_BLOCK_WORK / (row_work > 0 ? row_work : 1);
    rows = rows < ONEDNN_BLOCK_MIN ? ONEDNN_BLOCK_MIN : rows;
    int64_t blocks = (side + rows / 2) / rows;
    blocks = blocks < 2 ? 2 : blocks + (blocks & 1);
    return blocks < units ? blocks : units;
}

static bool use_dot(const tg_gemm_args *g);
static void gemm_dot(const tg_gemm_args *g);
static bool use_skinny(const tg_gemm_args *g);
static void skinny_serial(const tg_gemm_args *g);
static bool use_panel(const tg_gemm_args *g);
static void panel_serial(const tg_gemm_args *g);

/* bias [n] added to each of C's m rows. */
static void add_bias(float *c, int64_t ldc, int64_t m, int64_t n, const float *bias) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) c[i * ldc + j] += bias[j];
}

/* Units [u0, u1) of BLOCK_ALIGN rows (or columns) of C. */
static void gemm_units(const gemm_job *j, int64_t u0, int64_t u1) {
    const tg_gemm_args *g = &j->p;
    int64_t es = g->f64 ? 8 : 4, dim = j->by_rows ? g->m : g->n;
    int64_t lo = u0 * BLOCK_ALIGN, hi = u1 * BLOCK_ALIGN < dim ? u1 * BLOCK_ALIGN : dim;
    const char *a = g->a, *b = g->b;
    char *c = g->c;
    if (lo == 0 && hi == dim && use_dot(g)) {
        gemm_dot(g);
        return;
    }
    tg_gemm_args part = *g; /* the block's own product */
    if (j->by_rows) part.m = hi - lo, part.a = a + (g->trans_a ? lo : lo * g->lda) * es, part.c = c + lo * g->ldc * es;
    else part.n = hi - lo, part.b = b + (g->trans_b ? lo * g->ldb : lo) * es, part.c = c + lo * es;
    if (use_skinny(g)) /* the kernel the whole product runs alone, so the same bits (a block of it is eligible too) */
        skinny_serial(&part);
    else if (use_panel(g)) panel_serial(&part);
    else if (j->onednn) {
        if (tg_onednn_sgemm(part.trans_a, part.trans_b, part.m, part.n, part.k, (float)part.alpha, part.a, part.lda,
                            part.b, part.ldb, (float)part.beta, part.c, part.ldc) &&
            j->bias)
            add_bias(part.c, part.ldc, part.m, part.n, j->by_rows ? j->bias : j->bias + lo);
    } else call_blas(&part, part.m, part.n, part.a, part.b, part.c);
}

/* sums [k] = rows [r0, r1) of op(A) [m, k] summed, in row order. */
static void sum_a_rows(const tg_gemm_args *g, int64_t r0, int64_t r1, float *sums) {
    const float *a = g->a;
    int64_t k = g->k;
    if (g->trans_a) { /* op(A)'s rows are A's columns: each sum runs along a row of A */
        for (int64_t q = 0; q < k; q++) {
            float s = 0;
            for (int64_t r = r0; r < r1; r++) s += a[q * g->lda + r];
            sums[q] = s;
        }
        return;
    }
    for (int64_t q = 0; q < k; q++) sums[q] = 0;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t q = 0; q < k; q++) sums[q] += a[r * g->lda + q];
}

/* The job's blocks [b0, b1). */
static void gemm_blocks(int64_t b0, int64_t b1, void *arg) {
    const gemm_job *j = arg;
    for (int64_t b = b0; b < b1; b++) {
        int64_t u0 = j->units * b / j->blocks, u1 = j->units * (b + 1) / j->blocks;
        gemm_units(j, u0, u1);
        if (j->col_partials)
            sum_a_rows(&j->p, u0 * BLOCK_ALIGN, u1 * BLOCK_ALIGN < j->p.m ? u1 * BLOCK_ALIGN : j->p.m,
                       j->col_partials + b * j->p.k);
    }
}

/* p.a_col_sums: per block when oneDNN's blocks are rows (col_partials, NULL if it cannot be
 * had), finished by col_sums_finish after the product. */
static void col_sums_start(gemm_job *j) {
    if (j->p.a_col_sums && j->onednn && j->by_rows)
        j->col_partials = malloc((size_t)(j->blocks * j->p.k) * sizeof(float));
}

static void col_sums_finish(gemm_job *j) {
    float *sums = j->p.a_col_sums;
    if (!sums) return;
    if (!j->col_partials) {
        sum_a_rows(&j->p, 0, j->p.m, sums);
        return;
    }
    memcpy(sums, j->col_partials, (size_t)j->p.k * sizeof(float));
    for (int64_t b = 1; b < j->blocks; b++)
        for (int64_t q = 0; q < j->p.k; q++) sums[q] += j->col_partials[b * j->p.k + q];
    free(j->col_partials);
    j->col_partials = NULL;
}

/* Units [u0, u1) of OpenBLAS's product, one block of whole grains per thread: OpenBLAS's
 * float64 kernels give a block of 16 rows other bits than one of 32, so the cuts of earlier
 * versions stay (tests/ops/gemm_many_test.cc). */
static void gemm_unit_range(int64_t u0, int64_t u1, void *arg) { gemm_units(arg, u0, u1); }

/* The CPU's own kernels: whether gemm_dot and the others below can run here. */
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static bool dot_supported;
static void detect_cpu(void) {
#ifdef HAVE_DOT_KERNEL
    __builtin_cpu_init();
    dot_supported = __builtin_cpu_supports("avx512f");
#endif
}

/* The job of product g in `blocks` blocks along the longer dim of C (at most one per
 * unit), or in oneDNN's fixed blocks. OpenBLAS's: one block per thread, since the other
 * operand is packed once per block (OpenBLAS packs B's panel per call). */
static gemm_job job_of(const tg_gemm_args *g, int64_t blocks) {
    gemm_job j = {.p = *g, .by_rows = g->m >= g->n};
    j.units = ((j.by_rows ? g->m : g->n) + BLOCK_ALIGN - 1) / BLOCK_ALIGN;
    j.onednn = !use_dot(g) && !use_skinny(g) && !use_panel(g) && use_onednn(g);
    j.blocks = j.onednn ? onednn_blocks(g, j.by_rows, j.units) : blocks < 1 ? 1 : blocks < j.units ? blocks : j.units;
    return j;
}

static bool on_one_thread(int threads, int64_t work) {
    return threads <= 1 || work < TG_GEMM_PARALLEL_MIN || tg_in_parallel_region();
}

/* ---- a small C over a long k ----
 * C [m, n] = alpha A [m, k] B [n, k]^T + beta C with m * n small and k long: a narrow
 * convolution's weight gradient (LeNet's first layer: C is 20 x 25, k = images x 576).
 * OpenBLAS packs both operands for a few multiply-adds each there (28 GFLOP/s of its 90).
 * Here each element of C is a dot product of two contiguous rows: 4 x 4 elements at a
 * time in 16 zmm accumulators, k in blocks that stay in L2, the 16 lanes summed at the
 * end of each block. */
#ifdef HAVE_DOT_KERNEL

/* sums[i][j] = sum over q < k of a_i[q] b_j[q], for the 4 rows a_i and b_j given. */
DOT_TARGET static void dot_4x4(const float *const a[4], const float *const b[4], int64_t k, float sums[4][4]) {
    __m512 acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
    for (int64_t q = 0; q < k; q += 16) {
        __mmask16 mask = k - q >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (k - q)) - 1);
        __m512 av[4], bv[4];
        for (int i = 0; i < 4; i++) av[i] = _mm512_maskz_loadu_ps(mask, a[i] + q);
        for (int j = 0; j < 4; j++) bv[j] = _mm512_maskz_loadu_ps(mask, b[j] + q);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) acc[i][j] = _mm512_fmadd_ps(av[i], bv[j], acc[i][j]);
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) sums[i][j] = _mm512_reduce_add_ps(acc[i][j]);
}

static void gemm_dot(const tg_gemm_args *g) {
    const float *a = g->a, *b = g->b;
    float *c = g->c, alpha = (float)g->alpha, beta = (float)g->beta;
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < g->n; j++) c[i * g->ldc + j] = beta == 0 ? 0 : beta * c[i * g->ldc + j];
    for (int64_t q0 = 0; q0 < g->k; q0 += DOT_KB) {
        int64_t kb = g->k - q0 < DOT_KB ? g->k - q0 : DOT_KB;
        for (int64_t i0 = 0; i0 < g->m; i0 += 4)
            for (int64_t j0 = 0; j0 < g->n; j0 += 4) {
                const float *ar[4], *br[4]; /* rows past the edge repeat the last one; their sums are dropped */
                for (int t = 0; t < 4; t++) {
                    ar[t] = a + (i0 + t < g->m ? i0 + t : g->m - 1) * g->lda + q0;
                    br[t] = b + (j0 + t < g->n ? j0 + t : g->n - 1) * g->ldb + q0;
                }
                float sums[4][4];
                dot_4x4(ar, br, kb, sums);
                for (int i = 0; i < 4 && i0 + i < g->m; i++)
                    for (int j = 0; j < 4 && j0 + j < g->n; j++) c[(i0 + i) * g->ldc + j0 + j] += alpha * sums[i][j];
            }
    }
}
#else
static void gemm_dot(const tg_gemm_args *g) { (void)g; }
#endif

/* ---- a short batch times a weight ----
 * C [m, n] = alpha A [m, k] B [n, k]^T + beta C with m a multiple of 16 up to 64: a
 * linear layer's forward at a training batch. OpenBLAS packs all of B (the weight, read
 * once) for a few rows of A, and two threads splitting it scale poorly (64 x 1024 x 784:
 * 794 us on one, 500 us on two). Here A^T is copied once ([k, m], in L2), and each
 * thread streams its own rows of B once, unpacked: 6 rows of B (broadcast one element
 * at a time) against m columns of A^T in 6 x m / 16 zmm accumulators, so C^T's 6 x m tile
 * is written transposed at the end. Every element of C is summed over k in k order on
 * one thread, so the result does not depend on the thread count. */
#ifdef HAVE_DOT_KERNEL
enum { SKINNY_ROWS = 6 };

typedef struct {
    const tg_gemm_args *g;
    const float *at; /* A^T, [k, m] */
} skinny_job;

/* C^T rows [j0, j0 + rows) (rows <= SKINNY_ROWS), all m columns, into C transposed. */
#define SKINNY_TILE(MV)                                                                                               \
    DOT_TARGET static void skinny_tile_##MV(const skinny_job *s, int64_t j0, int rows) {                              \
        const tg_gemm_args *g = s->g;                                                                                 \
        const float *b = g->b;                                                                                        \
        const float *brow[SKINNY_ROWS];                                                                               \
        for (int r = 0; r < SKINNY_ROWS; r++) brow[r] = b + (j0 + (r < rows ? r : rows - 1)) * g->ldb;                \
        __m512 acc[SKINNY_ROWS][MV];                                                                                  \
        _Pragma("GCC unroll 8") for (int r = 0; r < SKINNY_ROWS; r++)                                                 \
            _Pragma("GCC unroll 4") for (int v = 0; v < MV; v++) acc[r][v] = _mm512_setzero_ps();                     \
        const float *at = s->at;                                                                                      \
        for (int64_t q = 0; q < g->k; q++, at += MV * 16) {                                                           \
            __m512 x[MV];                                                                                             \
            _Pragma("GCC unroll 4") for (int v = 0; v < MV; v++) x[v] = _mm512_loadu_ps(at + v * 16);                 \
            _Pragma("GCC unroll 8") for (int r = 0; r < SKINNY_ROWS; r++) {                                           \
                __m512 w = _mm512_set1_ps(brow[r][q]);                                                                \
                _Pragma("GCC unroll 4") for (int v = 0; v < MV; v++) acc[r][v] = _mm512_fmadd_ps(w, x[v], acc[r][v]); \
            }                                                                                                         \
        }                                                                                                             \
        float t[SKINNY_ROWS][MV * 16];                                                                                \
        _Pragma("GCC unroll 8") for (int r = 0; r < SKINNY_ROWS; r++)                                                 \
            _Pragma("GCC unroll 4") for (int v = 0; v < MV; v++) _mm512_storeu_ps(t[r] + v * 16, acc[r][v]);          \
        float *c = g->c, alpha = (float)g->alpha, beta = (float)g->beta;                                              \
        for (int64_t i = 0; i < MV * 16; i++)                                                                         \
            for (int r = 0; r < rows; r++) {                                                                          \
                float *y = c + i * g->ldc + j0 + r;                                                                   \
                *y = beta == 0 ? alpha * t[r][i] : alpha * t[r][i] + beta * *y;                                       \
            }                                                                                                         \
    }
SKINNY_TILE(1)
SKINNY_TILE(2)
SKINNY_TILE(3)
SKINNY_TILE(4)

static void skinny_rows(int64_t u0, int64_t u1, void *arg) {
    const skinny_job *s = arg;
    int64_t n = s->g->n;
    for (int64_t u = u0; u < u1; u++) {
        int64_t j0 = u * SKINNY_ROWS;
        int rows = (int)(n - j0 < SKINNY_ROWS ? n - j0 : SKINNY_ROWS);
        switch (s->g->m / 16) {
        case 1: skinny_tile_1(s, j0, rows); break;
        case 2: skinny_tile_2(s, j0, rows); break;
        case 3: skinny_tile_3(s, j0, rows); break;
        default: skinny_tile_4(s, j0, rows); break;
        }
    }
}

/* at [k, m] = A^T, A [m, k] (m a multiple of 16) at row stride lda: 16 x 16 blocks by
 * register transposes, the last k % 16 columns one element at a time. */
DOT_TARGET static void transpose_a(const float *a, int64_t lda, int64_t m, int64_t k, float *at) {
    int64_t blocked = k / 16 * 16;
    for (int64_t i0 = 0; i0 < m; i0 += 16) {
        for (int64_t q0 = 0; q0 < blocked; q0 += 16) {
            __m512i r[16];
            for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(a + (i0 + i) * lda + q0);
            tg_transpose16_epi32(r);
            for (int q = 0; q < 16; q++) _mm512_storeu_si512(at + (q0 + q) * m + i0, r[q]);
        }
        for (int64_t q = blocked; q < k; q++)
            for (int i = 0; i < 16; i++) at[q * m + i0 + i] = a[(i0 + i) * lda + q];
    }
}

/* The product on the calling thread (OpenBLAS's if A^T's copy cannot be had), or split
 * over the pool by rows of C^T: each tile the same whatever the split. */
static void gemm_skinny(const tg_gemm_args *g, int threads) {
    int64_t m = g->m, k = g->k;
    float *at = malloc((size_t)(m * k) * sizeof(float));
    if (!at) {
        call_blas(g, g->m, g->n, g->a, g->b, g->c);
        return;
    }
    transpose_a(g->a, g->lda, m, k, at);
    skinny_job s = {g, at};
    int64_t units = (g->n + SKINNY_ROWS - 1) / SKINNY_ROWS;
    if (on_one_thread(threads, m * g->n * k)) skinny_rows(0, units, &s);
    else tg_parallel_for(units, (units + threads - 1) / threads, skinny_rows, &s);
    free(at);
}

static void skinny_serial(const tg_gemm_args *g) { gemm_skinny(g, 1); }
#else
static void gemm_skinny(const tg_gemm_args *g, int threads) { (void)g, (void)threads; }
static void skinny_serial(const tg_gemm_args *g) { (void)g; }
#endif

/* ---- a short side times rows of B ----
 * C [m, n] = A B with B not transposed and m or k short (at most 64): a linear layer's
 * input gradient at a training batch (g [64, out] w [out, in]) and its weight gradient
 * (g^T [out, 64] x [64, in], summed over the batch), and a convolution's products with few
 * channels. OpenBLAS first clears C for these (a memset of the whole weight gradient) and
 * runs them at 110-125 GFLOP/s on one thread of this core's 200. Here C is computed in tiles
 * of 6 rows x 64 columns in 24 zmm accumulators: per k, 6 elements of A broadcast against 4
 * zmm of one row of B. k is cut into chunks of 128; per chunk A is packed tile by tile
 * (6 elements per k, whatever its layout: B's rows 4 KiB apart had thrashed one L1 set) and
 * B's rows are read front to back into strips of 64 columns, each strip then in L1 for all
 * the row tiles. Between chunks a tile's partial sums wait in C itself, which changes no
 * bit: every element of C is one FMA chain over k in k order, whatever the tiling or the
 * thread count. Only for alpha 1 and beta 0 (a fresh product), the gradients' case. In the
 * MLP tutorial an epoch took 3.18-3.29 s instead of 3.53-3.66 s (three alternating runs),
 * LeNet 7.6 instead of 7.9-8.2 s. */
#ifdef HAVE_DOT_KERNEL
enum { PANEL_ROWS = 6, PANEL_KC = 128, PANEL_W = 64, PANEL_GROUP = 1024 /* columns of B packed at once */ };

/* C [i0, i0 + rows) x [j0, j0 + 16 * (MV - 1) + last) += sum over the chunk's kc values
 * of q of ap[q][r] bp[q][...], starting from zero or from C's partial sums. ap: the
 * tile's 6 elements of A per q; bp: the strip of B, PANEL_W floats per q. `last` (1..16)
 * is how many columns the last zmm holds. */
#define PANEL_TILE(MV)                                                                                                \
    DOT_TARGET static void panel_tile_##MV(const float *ap, const float *bp, int64_t kc, float *c, int64_t ldc,       \
                                           int rows, int last, bool resume) {                                         \
        __mmask16 mask[MV];                                                                                           \
        _Pragma("GCC unroll 4") for (int v = 0; v < MV; v++) mask[v] =                                                \
            v < MV - 1 ? (__mmask16)0xffff : (__mmask16)((1u << last) - 1);                                           \
        __m512 acc[PANEL_ROWS][MV];                                                                                   \
        _Pragma("GCC unroll 8") for (int r = 0; r < PANEL_ROWS; r++)                                                  \
            _Pragma("GCC unroll 4") for (int v = 0; v < MV; v++) acc[r][v] =                                          \
                resume && r < rows ? _mm512_maskz_loadu_ps(mask[v], c + r * ldc + v * 16) : _mm512_setzero_ps();      \
        for (int64_t q = 0; q < kc; q++, ap += PANEL_ROWS, bp += PANEL_W) {                                           \
            __m512 x[MV];                                                                                             \
            _Pragma("GCC unroll 4") for (int v = 0; v < MV; v++) x[v] = _mm512_load_ps(bp + v * 16);                  \
            _Pragma("GCC unroll 8") for (int r = 0; r < PANEL_ROWS; r++) {                                            \
                __m512 w = _mm512_set1_ps(ap[r]);                                                                     \
                _Pragma("GCC unroll 4") for (int v = 0; v < MV; v++) acc[r][v] = _mm512_fmadd_ps(w, x[v], acc[r][v]); \
            }                                                                                                         \
        }                                                                                                             \
        _Pragma("GCC unroll 8") for (int r = 0; r < PANEL_ROWS; r++) /* unrolled: acc stays in registers */           \
            if (r < rows) _Pragma("GCC unroll 4") for (int v = 0; v < MV; v++)                                        \
                _mm512_mask_storeu_ps(c + r * ldc + v * 16, mask[v], acc[r][v]);                                      \
    }
PANEL_TILE(1)
PANEL_TILE(2)
PANEL_TILE(3)
PANEL_TILE(4)

/* A's rows [0, m) over q in [q0, q1) as tiles of PANEL_ROWS rows, q-major in each (rows
 * past m repeat the last one; their sums are never stored). */
static void pack_a(const tg_gemm_args *g, int64_t q0, int64_t q1, float *ap) {
    const float *a = g->a;
    int64_t kc = q1 - q0;
    for (int64_t i0 = 0; i0 < g->m; i0 += PANEL_ROWS, ap += PANEL_ROWS * kc) {
        int rows = (int)(g->m - i0 < PANEL_ROWS ? g->m - i0 : PANEL_ROWS);
        if (g->trans_a) { /* A (i, q) at a[q * lda + i]: a tile's elements for one q are adjacent */
            const float *src = a + q0 * g->lda + i0;
            for (int64_t q = 0; q < kc; q++, src += g->lda)
                for (int r = 0; r < PANEL_ROWS; r++) ap[q * PANEL_ROWS + r] = src[r < rows ? r : rows - 1];
        } else { /* A (i, q) at a[i * lda + q]: one row of the tile at a time */
            for (int r = 0; r < PANEL_ROWS; r++) {
                const float *src = a + (i0 + (r < rows ? r : rows - 1)) * g->lda + q0;
                for (int64_t q = 0; q < kc; q++) ap[q * PANEL_ROWS + r] = src[q];
            }
        }
    }
}

/* B's rows [q0, q1) x columns [j0, j0 + width) as strips of PANEL_W columns, each q-major
 * (zero past width): each row of B read once, front to back, so the hardware prefetches it. */
DOT_TARGET static void pack_b(const tg_gemm_args *g, int64_t q0, int64_t q1, int64_t j0, int64_t width, float *bp) {
    const float *b = g->b;
    int64_t kc = q1 - q0;
    for (int64_t q = q0; q < q1; q++) {
        const float *row = b + q * g->ldb + j0;
        float *dst = bp + (q - q0) * PANEL_W;
        for (int64_t j = 0; j < width; j += 16) {
            int64_t left = width - j;
            __mmask16 mask = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
            _mm512_store_ps(dst + (j / PANEL_W) * kc * PANEL_W + j % PANEL_W, _mm512_maskz_loadu_ps(mask, row + j));
        }
        for (int64_t j = (width + 15) / 16 * 16; j % PANEL_W; j += 16) /* the last strip's unused zmm */
            _mm512_store_ps(dst + (j / PANEL_W) * kc * PANEL_W + j % PANEL_W, _mm512_setzero_ps());
    }
}

static void panel_serial(const tg_gemm_args *g) {
    int64_t tiles = (g->m + PANEL_ROWS - 1) / PANEL_ROWS, kc_max = g->k < PANEL_KC ? g->k : PANEL_KC;
    int64_t group = g->n < PANEL_GROUP ? (g->n + PANEL_W - 1) / PANEL_W * PANEL_W : PANEL_GROUP;
    float *ap = malloc((size_t)(tiles * PANEL_ROWS * kc_max) * sizeof(float));
    float *bp = aligned_alloc(64, (size_t)(kc_max * group) * sizeof(float));
    if (!ap || !bp) {
        free(ap), free(bp);
        call_blas(g, g->m, g->n, g->a, g->b, g->c);
        return;
    }
    for (int64_t q0 = 0; q0 < g->k; q0 += PANEL_KC) {
        int64_t q1 = g->k - q0 < PANEL_KC ? g->k : q0 + PANEL_KC, kc = q1 - q0;
        pack_a(g, q0, q1, ap);
        for (int64_t g0 = 0; g0 < g->n; g0 += group) {
            int64_t gw = g->n - g0 < group ? g->n - g0 : group;
            pack_b(g, q0, q1, g0, gw, bp);
            for (int64_t j = 0; j < gw; j += PANEL_W) {
                int64_t width = gw - j < PANEL_W ? gw - j : PANEL_W;
                int mv = (int)((width + 15) / 16), last = (int)(width - 16 * (mv - 1));
                const float *strip = bp + j / PANEL_W * kc * PANEL_W;
                for (int64_t t = 0; t < tiles; t++) {
                    int64_t i0 = t * PANEL_ROWS;
                    int rows = (int)(g->m - i0 < PANEL_ROWS ? g->m - i0 : PANEL_ROWS);
                    const float *at = ap + t * PANEL_ROWS * kc;
                    float *c = (float *)g->c + i0 * g->ldc + g0 + j;
                    switch (mv) {
                    case 1: panel_tile_1(at, strip, kc, c, g->ldc, rows, last, q0 > 0); break;
                    case 2: panel_tile_2(at, strip, kc, c, g->ldc, rows, last, q0 > 0); break;
                    case 3: panel_tile_3(at, strip, kc, c, g->ldc, rows, last, q0 > 0); break;
                    default: panel_tile_4(at, strip, kc, c, g->ldc, rows, last, q0 > 0); break;
                    }
                }
            }
        }
    }
    free(ap);
    free(bp);
}
#else
static void panel_serial(const tg_gemm_args *g) { (void)g; }
#endif

static bool use_panel(const tg_gemm_args *g) {
    return dot_supported && !g->f64 && !g->trans_b && g->alpha == 1 && g->beta == 0 && g->k > 0 &&
           (g->m <= 64 || g->k <= 64);
}

static bool use_skinny(const tg_gemm_args *g) {
    return dot_supported && !g->f64 && !g->trans_a && g->trans_b && g->m > 0 && g->m % 16 == 0 &&
           g->m <= SKINNY_M_MAX && g->k <= SKINNY_K_MAX && g->n > 0;
}

static bool use_dot(const tg_gemm_args *g) {
    return dot_supported && !g->f64 && !g->trans_a && g->trans_b && g->m * g->n <= 1024 && g->k >= 256;
}

static void run_onednn(const gemm_job *j, int threads) {
    if (on_one_thread(threads, j->p.m * j->p.n * j->p.k)) gemm_blocks(0, j->blocks, (void *)j);
    else tg_parallel_for(j->blocks, 1, gemm_blocks, (void *)j);
}

/* The product, without its column sums. */
static void gemm_product(const tg_gemm_args *g, gemm_job *j) {
    int threads = tg_get_num_threads();
    if (use_dot(g)) { /* one thread whatever the count: faster there than OpenBLAS on two */
        gemm_dot(g);
        return;
    }
    if (use_skinny(g)) {
        gemm_skinny(g, threads);
        return;
    }
    if (j->onednn) {
        run_onednn(j, threads);
        return;
    }
    if (on_one_thread(threads, g->m * g->n * g->k)) {
        if (use_panel(g)) panel_serial(g);
        else call_blas(g, g->m, g->n, g->a, g->b, g->c);
        return;
    }
    tg_parallel_for(j->units, (j->units + threads - 1) / threads, gemm_unit_range, j);
}

static void gemm(const tg_gemm_args *g) {
    pthread_once(&cpu_once, detect_cpu);
    if (g->m <= 0 || g->n <= 0) return;
    gemm_job j = job_of(g, tg_get_num_threads());
    col_sums_start(&j);
    gemm_product(g, &j);
    col_sums_finish(&j);
}

/* ---- several products at once ---- */

enum { MANY_MAX = 8 };

typedef struct {
    gemm_job job[MANY_MAX];
    int64_t first[MANY_MAX + 1]; /* first[i]: product i's first block */
    int count;
} many_job;

/* Blocks [b0, b1) of all the products, numbered product after product. */
static void many_blocks(int64_t b0, int64_t b1, void *arg) {
    const many_job *mj = arg;
    for (int64_t b = b0; b < b1; b++) {
        int i = 0;
        while (b >= mj->first[i + 1]) i++;
        gemm_blocks(b - mj->first[i], b - mj->first[i] + 1, (void *)&mj->job[i]);
    }
}

void tg_gemm_many(const tg_gemm_args *products, int count) {
    pthread_once(&cpu_once, detect_cpu);
    many_job mj = {.count = 0};
    double total = 0;
    for (int i = 0; i < count; i++)
        if (products[i].m > 0 && products[i].n > 0) total += (double)products[i].m * products[i].n * products[i].k;
    int threads = tg_get_num_threads();
    if (count > MANY_MAX || on_one_thread(threads, (int64_t)total)) {
        for (int i = 0; i < count; i++) gemm(&products[i]);
        return;
    }
    mj.first[0] = 0;
    for (int i = 0; i < count; i++) {
        const tg_gemm_args *g = &products[i];
        if (g->m <= 0 || g->n <= 0) continue;
        int c = mj.count++;
        /* threads shared in proportion to the multiply-adds, at least one block each */
        int64_t blocks = (int64_t)(threads * ((double)g->m * g->n * g->k) / total + 0.5);
        mj.job[c] = job_of(g, use_dot(g) ? 1 : blocks);
        mj.first[c + 1] = mj.first[c] + mj.job[c].blocks;
    }
    for (int c = 0; c < mj.count; c++) col_sums_start(&mj.job[c]);
    tg_parallel_for(mj.first[mj.count], 1, many_blocks, &mj);
    for (int c = 0; c < mj.count; c++) col_sums_finish(&mj.job[c]);
}

bool tg_gemm_sums_a_in_blocks(const tg_gemm_args *g) {
    pthread_once(&cpu_once, detect_cpu);
    if (g->f64 || g->m <= 0 || g->n <= 0 || g->k <= 0) return false;
    gemm_job j = job_of(g, 1);
    return j.onednn && j.by_rows;
}

void tg_gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    gemm(&(tg_gemm_args){false, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL});
}

void tg_gemm_f32_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                      const float *b, int64_t ldb, const float *bias, float *c, int64_t ldc) {
    pthread_once(&cpu_once, detect_cpu);
    if (m <= 0 || n <= 0) return;
    tg_gemm_args g = {false, trans_a, trans_b, m, n, k, 1, a, lda, b, ldb, 0, c, ldc, NULL};
    gemm_job j = job_of(&g, 1);
    if (j.onednn) {
        j.bias = bias;
        run_onednn(&j, tg_get_num_threads());
        return;
    }
    for (int64_t i = 0; i < m; i++) memcpy(c + i * ldc, bias, (size_t)n * sizeof(float));
    g.beta = 1; /* the product added to the bias */
    gemm(&g);
}

void tg_gemm_f64(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                 int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc) {
    gemm(&(tg_gemm_args){true, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL});
}
