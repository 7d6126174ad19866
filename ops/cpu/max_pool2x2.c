/* 2x2 stride-2 max pooling in AVX-512 registers (ops/cpu/max_pool2x2.h).
 *
 * Sixteen outputs at a time: 32 elements of each of the window's two input rows are
 * loaded (bfloat16 widened to float32 on the way: exact), split into even and odd
 * columns, and compared as ops/pool.c's scalar 2x2 loop does, element for element:
 * tb = b > a, td = d > c, m1 = tb ? b : a, m2 = td ? d : c, t = m2 > m1, m = t ? m2 : m1,
 * so the same values and the same indices. The backward writes every input element of
 * the windows once (g where the index points, else 0) instead of clearing the plane and
 * scattering. */
#include "ops/cpu/max_pool2x2.h"

#include <string.h>

#include "core/simd.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAVE_MAX2X2 1
#define MAX2X2_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,bmi2")))
#endif

bool tg_max_pool2x2_available(void) {
#ifdef HAVE_MAX2X2
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("bmi2");
#else
    return false;
#endif
}

#ifdef HAVE_MAX2X2
static const int32_t even_idx[16] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
static const int32_t odd_idx[16] = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};

/* 2n (n <= 16) consecutive elements from p as float32, split into even and odd columns. */
MAX2X2_TARGET static inline void load_pairs(const void *p, bool bf16, int n, __m512 *even, __m512 *odd) {
    __m512 lo, hi;
    if (bf16) {
        __mmask32 m = n >= 16 ? ~(__mmask32)0 : (__mmask32)((1u << (2 * n)) - 1);
        __m512i v = _mm512_maskz_loadu_epi16(m, p);
        lo = tg_widen_bf16x16(_mm512_castsi512_si256(v));
        hi = tg_widen_bf16x16(_mm512_extracti64x4_epi64(v, 1));
    } else {
        int lo_n = 2 * n < 16 ? 2 * n : 16, hi_n = 2 * n - lo_n;
        lo = _mm512_maskz_loadu_ps((__mmask16)((1u << lo_n) - 1), p);
        hi = _mm512_maskz_loadu_ps((__mmask16)((1u << hi_n) - 1), (const float *)p + 16);
    }
    *even = _mm512_permutex2var_ps(lo, _mm512_loadu_si512(even_idx), hi);
    *odd = _mm512_permutex2var_ps(lo, _mm512_loadu_si512(odd_idx), hi);
}

MAX2X2_TARGET static inline bool plane(const void *x, bool bf16, int64_t w, int64_t ho, int64_t wo, void *y,
                                       int64_t *idx) {
    size_t es = bf16 ? 2 : 4;
    __mmask16 nan = 0;
    const __m512i lane2 = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0); /* 2 * lane */
    for (int64_t oh = 0; oh < ho; oh++) {
        const char *r0 = (const char *)x + (size_t)(2 * oh * w) * es, *r1 = r0 + (size_t)w * es;
        for (int64_t ow = 0; ow < wo; ow += 16) {
            int n = wo - ow < 16 ? (int)(wo - ow) : 16;
            __mmask16 live = (__mmask16)((1u << n) - 1);
            __m512 a, b, c, d;
            load_pairs(r0 + (size_t)(2 * ow) * es, bf16, n, &a, &b);
            load_pairs(r1 + (size_t)(2 * ow) * es, bf16, n, &c, &d);
            nan |= _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(c, d, _CMP_UNORD_Q);
            __mmask16 tb = _mm512_cmp_ps_mask(b, a, _CMP_GT_OQ), td = _mm512_cmp_ps_mask(d, c, _CMP_GT_OQ);
            __m512 m1 = _mm512_mask_blend_ps(tb, a, b), m2 = _mm512_mask_blend_ps(td, c, d);
            __mmask16 t = _mm512_cmp_ps_mask(m2, m1, _CMP_GT_OQ);
            __m512 m = _mm512_mask_blend_ps(t, m1, m2);
            __mmask16 col = (__mmask16)((td & t) | (tb & ~t));
            int64_t *io = idx + oh * wo + ow;
            for (int half = 0; half < 2; half++) { /* the indices as int64, 8 per register */
                __mmask8 c8 = (__mmask8)(col >> (8 * half)), r8 = (__mmask8)(t >> (8 * half));
                __mmask8 l8 = (__mmask8)(live >> (8 * half));
                __m512i base = _mm512_add_epi64(_mm512_set1_epi64(2 * oh * w + 2 * (ow + 8 * half)), lane2);
                base = _mm512_mask_add_epi64(base, c8, base, _mm512_set1_epi64(1));
                base = _mm512_mask_add_epi64(base, r8, base, _mm512_set1_epi64(w));
                _mm512_mask_storeu_epi64(io + 8 * half, l8, base);
            }
            if (bf16) /* m is a widened bfloat16: its top half is exact */
                _mm256_mask_storeu_epi16((uint16_t *)y + oh * wo + ow, live,
                                         _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(m), 16)));
            else _mm512_mask_storeu_ps((float *)y + oh * wo + ow, live, m);
        }
    }
    return nan == 0;
}

MAX2X2_TARGET bool tg_max_pool2x2_plane_f32(const float *x, int64_t h, int64_t w, int64_t ho, int64_t wo, float *y,
                                            int64_t *idx) {
    (void)h;
    return plane(x, false, w, ho, wo, y, idx);
}

MAX2X2_TARGET bool tg_max_pool2x2_plane_bf16(const uint16_t *x, int64_t h, int64_t w, int64_t ho, int64_t wo,
                                             uint16_t *y, int64_t *idx) {
    (void)h;
    return plane(x, true, w, ho, wo, y, idx);
}

/* Window rows 2 oh and 2 oh + 1, columns 2 ow .. 2 ow + 31: g's 16 values placed at
 * even / odd columns by where each index points, zero elsewhere. */
MAX2X2_TARGET bool tg_max_unpool2x2_plane_bf16(const uint16_t *g, const int64_t *idx, int64_t h, int64_t w, int64_t ho,
                                               int64_t wo, uint16_t *gx) {
    static const uint16_t interleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                            8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i lane2 = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), perm = _mm512_loadu_si512(interleave);
    unsigned csr = _mm_getcsr();
    bool daz = csr & 0x0040, ftz = csr & 0x8000;
    for (int64_t oh = 0; oh < ho; oh++) {
        uint16_t *r0 = gx + 2 * oh * w, *r1 = r0 + w;
        for (int64_t ow = 0; ow < wo; ow += 16) {
            int n = wo - ow < 16 ? (int)(wo - ow) : 16;
            __mmask16 live = (__mmask16)((1u << n) - 1);
            __mmask16 at[4] = {0, 0, 0, 0}; /* index at (row 0, col 0), (0, 1), (1, 0), (1, 1) */
            for (int half = 0; half < 2; half++) {
                __mmask8 l8 = (__mmask8)(live >> (8 * half));
                __m512i rel =
                    _mm512_sub_epi64(_mm512_maskz_loadu_epi64(l8, idx + oh * wo + ow + 8 * half),
                                     _mm512_add_epi64(_mm512_set1_epi64(2 * oh * w + 2 * (ow + 8 * half)), lane2));
                int64_t offs[4] = {0, 1, w, w + 1};
                for (int q = 0; q < 4; q++)
                    at[q] |=
                        (__mmask16)(_mm512_mask_cmpeq_epi64_mask(l8, rel, _mm512_set1_epi64(offs[q])) << (8 * half));
            }
            if ((at[0] | at[1] | at[2] | at[3]) != live) return false;
            __m256i v = _mm256_maskz_loadu_epi16(live, g + oh * wo + ow);
            /* the float32 0 + g rounded: -0 gives +0, a NaN 0x7FC0; under DAZ a subnormal g
             * is 0 (+0 again), under FTZ alone a subnormal sum is a zero of its sign */
            __m256i mag = _mm256_and_si256(v, _mm256_set1_epi16(0x7FFF));
            __mmask16 zero_exp =
                _mm256_cmpeq_epi16_mask(_mm256_and_si256(v, _mm256_set1_epi16(0x7F80)), _mm256_setzero_si256());
            __mmask16 exact_zero = _mm256_cmpeq_epi16_mask(mag, _mm256_setzero_si256());
            if (daz) {
                v = _mm256_mask_mov_epi16(v, zero_exp, _mm256_setzero_si256());
            } else {
                v = _mm256_mask_mov_epi16(v, exact_zero, _mm256_setzero_si256());
                if (ftz)
                    v = _mm256_mask_mov_epi16(v, (__mmask16)(zero_exp & ~exact_zero),
                                              _mm256_and_si256(v, _mm256_set1_epi16((short)0x8000)));
            }
            v = _mm256_mask_mov_epi16(v, _mm256_cmpgt_epu16_mask(mag, _mm256_set1_epi16(0x7F80)),
                                      _mm256_set1_epi16(0x7FC0));
            __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1); /* g | g */
            __m512i pairs = _mm512_permutexvar_epi16(perm, both);               /* g0 g0 g1 g1 ... */
            __mmask32 cols = n >= 16 ? ~(__mmask32)0 : (__mmask32)((1u << (2 * n)) - 1);
            /* column pair p: even lane 2p from at[0] / at[2], odd lane 2p + 1 from at[1] / at[3] */
            __mmask32 top = (__mmask32)_pdep_u32(at[0], 0x55555555u) | (__mmask32)_pdep_u32(at[1], 0xAAAAAAAAu);
            __mmask32 bottom = (__mmask32)_pdep_u32(at[2], 0x55555555u) | (__mmask32)_pdep_u32(at[3], 0xAAAAAAAAu);
            _mm512_mask_storeu_epi16(r0 + 2 * ow, cols, _mm512_maskz_mov_epi16(top, pairs));
            _mm512_mask_storeu_epi16(r1 + 2 * ow, cols, _mm512_maskz_mov_epi16(bottom, pairs));
        }
        for (int64_t c = 2 * wo; c < w; c++) r0[c] = r1[c] = 0; /* columns outside every window */
    }
    if (h > 2 * ho) memset(gx + 2 * ho * w, 0, (size_t)((h - 2 * ho) * w) * sizeof(uint16_t));
    return true;
}
#else
bool tg_max_pool2x2_plane_f32(const float *x, int64_t h, int64_t w, int64_t ho, int64_t wo, float *y, int64_t *idx) {
    (void)x, (void)h, (void)w, (void)ho, (void)wo, (void)y, (void)idx;
    return false;
}
bool tg_max_pool2x2_plane_bf16(const uint16_t *x, int64_t h, int64_t w, int64_t ho, int64_t wo, uint16_t *y,
                               int64_t *idx) {
    (void)x, (void)h, (void)w, (void)ho, (void)wo, (void)y, (void)idx;
    return false;
}
bool tg_max_unpool2x2_plane_bf16(const uint16_t *g, const int64_t *idx, int64_t h, int64_t w, int64_t ho, int64_t wo,
                                 uint16_t *gx) {
    (void)g, (void)idx, (void)h, (void)w, (void)ho, (void)wo, (void)gx;
    return false;
}
#endif
