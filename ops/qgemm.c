/* int8 GEMM (ops/qgemm.h): an AVX512-VNNI kernel picked at run time, and portable C.
 * vpdpbusd multiplies 64 uint8 by 64 int8 bytes and adds each group of four
 * products into one of 16 int32 lanes without saturation, so the kernel is exact. */
#include "ops/qgemm.h"

#include <stdatomic.h>

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TG_QGEMM_X86 1
#endif

static atomic_bool vnni_allowed = true;

bool tg_qgemm_has_vnni(void) {
#ifdef TG_QGEMM_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

void tg_qgemm_allow_vnni(bool allow) { atomic_store(&vnni_allowed, allow); }

/* Work is cut into units of one row of c times up to COLS columns, so that a batch of
 * one row still spreads over the threads. */
#define COLS 64

typedef struct {
    int64_t n, k, blocks; /* blocks: column blocks per row */
    const uint8_t *a;
    const int8_t *b;
    int32_t *c;
} qgemm_args;

static void units_portable(int64_t begin, int64_t end, void *ctx) {
    const qgemm_args *g = ctx;
    for (int64_t u = begin; u < end; u++) {
        int64_t i = u / g->blocks, j0 = u % g->blocks * COLS, j1 = j0 + COLS < g->n ? j0 + COLS : g->n;
        const uint8_t *a = g->a + i * g->k;
        for (int64_t j = j0; j < j1; j++) {
            const int8_t *b = g->b + j * g->k;
            int32_t sum = 0;
            for (int64_t p = 0; p < g->k; p++) sum += (int32_t)a[p] * (int32_t)b[p];
            g->c[i * g->n + j] = sum;
        }
    }
}

#ifdef TG_QGEMM_X86
/* Four weight rows per pass over a's row, so each 64-byte chunk of a is loaded once
 * for four dot products; the tail of k is a masked load (zeros add nothing). */
__attribute__((target("avx512vnni,avx512bw,avx512f"))) static void units_vnni(int64_t begin, int64_t end,
                                                                               void *ctx) {
    const qgemm_args *g = ctx;
    const int64_t k = g->k, full = k / 64 * 64;
    const __mmask64 tail = k > full ? (__mmask64)(~0ULL >> (64 - (k - full))) : 0;
    for (int64_t u = begin; u < end; u++) {
        int64_t i = u / g->blocks, j = u % g->blocks * COLS, j1 = j + COLS < g->n ? j + COLS : g->n;
        const uint8_t *a = g->a + i * k;
        for (; j + 4 <= j1; j += 4) {
            const int8_t *b0 = g->b + j * k, *b1 = b0 + k, *b2 = b1 + k, *b3 = b2 + k;
            __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
            for (int64_t p = 0; p < full; p += 64) {
                __m512i va = _mm512_loadu_si512(a + p);
                s0 = _mm512_dpbusd_epi32(s0, va, _mm512_loadu_si512(b0 + p));
                s1 = _mm512_dpbusd_epi32(s1, va, _mm512_loadu_si512(b1 + p));
                s2 = _mm512_dpbusd_epi32(s2, va, _mm512_loadu_si512(b2 + p));
                s3 = _mm512_dpbusd_epi32(s3, va, _mm512_loadu_si512(b3 + p));
            }
            if (tail) {
                __m512i va = _mm512_maskz_loadu_epi8(tail, a + full);
                s0 = _mm512_dpbusd_epi32(s0, va, _mm512_maskz_loadu_epi8(tail, b0 + full));
                s1 = _mm512_dpbusd_epi32(s1, va, _mm512_maskz_loadu_epi8(tail, b1 + full));
                s2 = _mm512_dpbusd_epi32(s2, va, _mm512_maskz_loadu_epi8(tail, b2 + full));
                s3 = _mm512_dpbusd_epi32(s3, va, _mm512_maskz_loadu_epi8(tail, b3 + full));
            }
            int32_t *c = g->c + i * g->n + j;
            c[0] = _mm512_reduce_add_epi32(s0);
            c[1] = _mm512_reduce_add_epi32(s1);
            c[2] = _mm512_reduce_add_epi32(s2);
            c[3] = _mm512_reduce_add_epi32(s3);
        }
        for (; j < j1; j++) {
            const int8_t *b = g->b + j * k;
            __m512i s = _mm512_setzero_si512();
            for (int64_t p = 0; p < full; p += 64)
                s = _mm512_dpbusd_epi32(s, _mm512_loadu_si512(a + p), _mm512_loadu_si512(b + p));
            if (tail)
                s = _mm512_dpbusd_epi32(s, _mm512_maskz_loadu_epi8(tail, a + full), _mm512_maskz_loadu_epi8(tail, b + full));
            g->c[i * g->n + j] = _mm512_reduce_add_epi32(s);
        }
    }
}
#endif

void tg_qgemm_u8s8s32(int64_t m, int64_t n, int64_t k, const uint8_t *a, const int8_t *b, int32_t *c) {
    if (m <= 0 || n <= 0) return;
    qgemm_args args = {n, k, (n + COLS - 1) / COLS, a, b, c};
    tg_parallel_fn fn = units_portable;
#ifdef TG_QGEMM_X86
    static int vnni = -1; /* decided once: the CPU does not change */
    if (vnni < 0) vnni = tg_qgemm_has_vnni();
    if (vnni && atomic_load(&vnni_allowed)) fn = units_vnni;
#endif
    /* a unit costs up to COLS * k multiply-adds; about 64k of them per chunk */
    int64_t per_unit = (n < COLS ? n : COLS) * (k > 0 ? k : 1);
    int64_t grain = per_unit >= 65536 ? 1 : 65536 / per_unit;
    tg_parallel_for(m * args.blocks, grain, fn, &args);
}

bool tg_qgemm_vnni_enabled(void) {
    static int vnni = -1;
    if (vnni < 0) vnni = tg_qgemm_has_vnni();
    return vnni && atomic_load(&vnni_allowed);
}

int8_t *tg_qgemm_pack(int64_t n, int64_t k, const int8_t *b) {
    int64_t blocks = (n + 15) / 16, groups = (k + 3) / 4;
    int8_t *p = calloc((size_t)(blocks * groups > 0 ? blocks * groups : 1), 64);
    if (!p) return NULL;
    for (int64_t j = 0; j < n; j++)
        for (int64_t q = 0; q < k; q++) p[((j / 16 * groups + q / 4) * 16 + j % 16) * 4 + q % 4] = b[j * k + q];
    return p;
}

typedef struct {
    int64_t n, k, lda;
    const uint8_t *a;
    const int8_t *packed;
    int32_t *c;
} packed_args;

#ifdef TG_QGEMM_X86
/* One row of a at a time: 4 bytes of it broadcast against up to 4 blocks of 16
 * columns (64 columns per pass over k). */
__attribute__((target("avx512vnni,avx512bw,avx512f"))) static void rows_packed(int64_t begin, int64_t end, void *ctx) {
    const packed_args *g = ctx;
    const int64_t groups = (g->k + 3) / 4, blocks = (g->n + 15) / 16, full = g->k / 4;
    for (int64_t i = begin; i < end; i++) {
        const uint8_t *a = g->a + i * g->lda;
        uint8_t last[4] = {0, 0, 0, 0}; /* the tail of k, zero padded */
        for (int64_t q = full * 4; q < g->k; q++) last[q - full * 4] = a[q];
        int32_t tail;
        memcpy(&tail, last, 4);
        int32_t *c = g->c + i * g->n;
        for (int64_t b0 = 0; b0 < blocks; b0 += 4) {
            int nb = blocks - b0 < 4 ? (int)(blocks - b0) : 4;
            __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                              _mm512_setzero_si512()};
            const int8_t *w = g->packed + b0 * groups * 64;
            for (int64_t q = 0; q < groups; q++) {
                int32_t four;
                if (q < full) memcpy(&four, a + q * 4, 4);
                else four = tail;
                __m512i va = _mm512_set1_epi32(four);
                for (int b = 0; b < nb; b++)
                    acc[b] = _mm512_dpbusd_epi32(acc[b], va, _mm512_loadu_si512(w + (b * groups + q) * 64));
            }
            for (int b = 0; b < nb; b++) {
                int64_t j0 = (b0 + b) * 16, left = g->n - j0;
                __mmask16 mask = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
                _mm512_mask_storeu_epi32(c + j0, mask, acc[b]);
            }
        }
    }
}
#endif

void tg_qgemm_u8s8s32_packed(int64_t m, int64_t n, int64_t k, const uint8_t *a, int64_t lda, const int8_t *packed,
                             int32_t *c) {
#ifdef TG_QGEMM_X86
    if (m <= 0 || n <= 0) return;
    packed_args args = {n, k, lda, a, packed, c};
    int64_t per_row = n * (k > 0 ? k : 1);
    tg_parallel_for(m, per_row >= 65536 ? 1 : 65536 / per_row, rows_packed, &args);
#else
    (void)m, (void)n, (void)k, (void)a, (void)lda, (void)packed, (void)c;
    TG_ASSERT(!"tg_qgemm_u8s8s32_packed needs AVX512-VNNI");
#endif
}
