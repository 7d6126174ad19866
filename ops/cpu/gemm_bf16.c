/* bfloat16 GEMM with AVX512-BF16's vdpbf16ps (ops/cpu/gemm.h).
 *
 * Goto/BLIS blocking: for each KC-deep slice of k, B's slice is packed into NR-column
 * panels (kept in L1 while A's row slivers stream past), A's slice into MR-row slivers,
 * both as pairs of consecutive k (the unit vdpbf16ps multiplies and adds). The micro
 * kernel holds an MR x NR tile of C in 2 * MR zmm registers; each C element is carried
 * over all of k in k order, whatever the blocking or the threads. On CPUs with AMX the
 * same blocking feeds tile registers instead (the AMX section below). */
#include "ops/cpu/gemm.h"

#include <stdlib.h>
#include <string.h>

#include "core/amx.h"
#include "core/lowp.h"
#include "core/parallel.h"
#include "core/simd.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAVE_BF16_KERNEL 1
#include <immintrin.h>
#include <pthread.h>
#define BF16_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))
#endif

enum {
    MR = 8,     /* rows of C per micro tile */
    NR = 32,    /* columns of C per micro tile: two zmm of float32 */
    KC = 384,   /* k per packed slice (even): a B panel is NR * KC * 2 bytes = 24 KiB, in L1 */
    MC = 96,    /* rows of A per packed block: MC * KC * 2 bytes = 72 KiB, in L2 */
    NC = 3072,  /* columns of B per packed slice: NC * KC * 2 bytes = 2.25 MiB, in L3 */
    SPLIT = 32, /* threads split C in units of this many rows or columns (a multiple of MR and NR) */
};

bool tg_gemm_bf16_supported(void) {
#ifdef HAVE_BF16_KERNEL
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

#ifdef HAVE_BF16_KERNEL

typedef struct {
    int64_t m, n, k;
    const uint16_t *a, *b;
    const float *b32; /* instead of b: float32, rounded to bfloat16 while packed */
    int64_t a_rs, a_cs, b_rs, b_cs;
    bool accumulate, by_rows;
    float *c;
    uint16_t *c16;          /* instead of c: C rounded to bfloat16 by the micro kernel (all of k in one slice) */
    bool round32;           /* with c: C rounded to bfloat16 values, stored as float32 (all of k in one slice) */
    const uint16_t *bias16; /* per column of C (bfloat16): the sums start from it instead of zero */
    int64_t ldc;
} bf16_job;

/* B's element at offset i (in elements) as bfloat16 bits. */
static inline uint16_t b_at(const bf16_job *g, int64_t i) {
    return g->b32 ? tg_float_to_bf16_bits(g->b32[i]) : g->b[i];
}

/* A [rows, kc] from (row0, k0) into slivers of MR rows: sliver s, pair p, row r at
 * (s * pairs + p) * MR + r, each a 32-bit pair (k even in the low half); padding rows and
 * the odd k's partner are zero. */
static void pack_a(const bf16_job *g, int64_t row0, int64_t rows, int64_t k0, int64_t kc, uint32_t *dst) {
    int64_t pairs = (kc + 1) / 2, full = kc / 2;
    for (int64_t s = 0; s < (rows + MR - 1) / MR; s++) {
        if (g->a_rs == 1 && rows - s * MR >= MR) { /* A = G^T (a weight's gradient): rows are contiguous */
            const uint16_t *src = g->a + row0 + s * MR + k0 * g->a_cs;
            uint32_t *out = dst + s * pairs * MR;
            for (int64_t p = 0; p < pairs; p++) {
                const uint16_t *even = src + 2 * p * g->a_cs, *odd = even + g->a_cs;
                bool has_odd = 2 * p + 1 < kc;
                for (int r = 0; r < MR; r++) out[p * MR + r] = even[r] | (has_odd ? (uint32_t)odd[r] << 16 : 0);
            }
            continue;
        }
        for (int r = 0; r < MR; r++) {
            int64_t i = s * MR + r;
            uint32_t *out = dst + s * pairs * MR + r;
            if (i >= rows) {
                for (int64_t p = 0; p < pairs; p++) out[p * MR] = 0;
                continue;
            }
            const uint16_t *src = g->a + (row0 + i) * g->a_rs + k0 * g->a_cs;
            if (g->a_cs == 1) /* a row-major row: its pairs are 32-bit words already */
                for (int64_t p = 0; p < full; p++) memcpy(out + p * MR, src + 2 * p, sizeof(uint32_t));
            else
                for (int64_t p = 0; p < full; p++)
                    out[p * MR] = src[2 * p * g->a_cs] | (uint32_t)src[(2 * p + 1) * g->a_cs] << 16;
            if (pairs > full) out[full * MR] = src[2 * full * g->a_cs];
        }
    }
}

/* 16 float32 values rounded to bfloat16 as core/lowp.h's tg_float_to_bf16_bits (nearest,
 * ties to even, NaN as 0x7FC0): the same bits as a cast. */
BF16_TARGET static inline __m256i round_to_bf16(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC0)));
}

/* 32 consecutive bfloat16 values of B: read as they are, or rounded from float32. */
BF16_TARGET static inline __m512i load32(const bf16_job *g, int64_t i) {
    if (!g->b32) return _mm512_loadu_si512(g->b + i);
    __m256i lo = round_to_bf16(_mm512_loadu_ps(g->b32 + i)), hi = round_to_bf16(_mm512_loadu_ps(g->b32 + i + 16));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* Two rows of 32 row-major bfloat16 columns (at offsets r0, r1 of B) interleaved into 32
 * pairs (one panel row). */
BF16_TARGET static void interleave_rows(const bf16_job *g, int64_t r0, int64_t r1, uint16_t *out) {
    static const uint16_t lo_idx[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                        8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    static const uint16_t hi_idx[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                        24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
    __m512i x = load32(g, r0), y = load32(g, r1);
    _mm512_storeu_si512(out, _mm512_permutex2var_epi16(x, _mm512_loadu_si512(lo_idx), y));
    _mm512_storeu_si512(out + 32, _mm512_permutex2var_epi16(x, _mm512_loadu_si512(hi_idx), y));
}

/* The first `pairs` (a multiple of 16) pairs of the first `rows` (<= NR) rows of W (row j at
 * offset src + j * ld of B, k contiguous) into a panel: pair p of row j to ((p * NR) + j) * 2,
 * zero for rows from `rows` to NR, 16 rows by 16 pairs (one 32-bit lane each) per register
 * transpose. */
BF16_TARGET static void transpose_pairs(const bf16_job *g, int64_t src, int64_t ld, int64_t pairs, int rows,
                                        uint16_t *panel) {
    for (int64_t p0 = 0; p0 < pairs; p0 += 16)
        for (int half = 0; half < NR / 16; half++) {
            __m512i r[16];
            for (int j = 0; j < 16; j++)
                r[j] = half * 16 + j < rows ? load32(g, src + (half * 16 + j) * ld + 2 * p0) : _mm512_setzero_si512();
            tg_transpose16_epi32(r);
            for (int p = 0; p < 16; p++) _mm512_storeu_si512(panel + ((p0 + p) * NR + half * 16) * 2, r[p]);
        }
}

/* B [kc, cols] from (k0, col0) into panels of NR columns: panel q, pair p, column j at
 * ((q * pstride + p) * NR + j) * 2 (+1 for the odd k); padding (columns, the odd k's
 * partner, and pairs from (kc + 1) / 2 up to pstride) is zero. */
static void pack_b(const bf16_job *g, int64_t k0, int64_t kc, int64_t col0, int64_t cols, int64_t pstride,
                   uint16_t *dst) {
    int64_t pairs = (kc + 1) / 2;
    for (int64_t q = 0; q < (cols + NR - 1) / NR; q++) {
        if (pstride > pairs) memset(dst + (q * pstride + pairs) * NR * 2, 0, (size_t)((pstride - pairs) * NR * 2) * 2);
        if (g->b_rs == 1) { /* B = W^T (linear, a weight's gradient): a column is a row of W, read along */
            uint16_t *panel = dst + q * pstride * NR * 2;
            int rows = cols - q * NR < NR ? (int)(cols - q * NR) : NR; /* a last, narrower panel: zeros */
            int64_t blocked = kc / 2 / 16 * 16; /* pairs moved 16 x 16 at a time by register transposes */
            transpose_pairs(g, k0 + (col0 + q * NR) * g->b_cs, g->b_cs, blocked, rows, panel);
            for (int j = 0; j < NR; j++) {
                if (j >= rows) {
                    for (int64_t p = blocked; p < pairs; p++) panel[(p * NR + j) * 2] = panel[(p * NR + j) * 2 + 1] = 0;
                    continue;
                }
                int64_t src = k0 + (col0 + q * NR + j) * g->b_cs;
                for (int64_t p = blocked; p < kc / 2; p++) {
                    panel[(p * NR + j) * 2] = b_at(g, src + 2 * p);
                    panel[(p * NR + j) * 2 + 1] = b_at(g, src + 2 * p + 1);
                }
                if (kc % 2)
                    panel[((pairs - 1) * NR + j) * 2] = b_at(g, src + kc - 1),
                                                   panel[((pairs - 1) * NR + j) * 2 + 1] = 0;
            }
            continue;
        }
        for (int64_t p = 0; p < pairs; p++) {
            uint16_t *out = dst + (q * pstride + p) * NR * 2;
            int64_t kk = k0 + 2 * p;
            bool has_odd = 2 * p + 1 < kc;
            int64_t src = kk * g->b_rs + (col0 + q * NR) * g->b_cs;
            if (g->b_cs == 1 && has_odd && cols - q * NR >= NR) { /* row-major B, a whole panel row */
                interleave_rows(g, src, src + g->b_rs, out);
                continue;
            }

            for (int j = 0; j < NR; j++) {
                if (q * NR + j < cols) {
                    out[2 * j] = b_at(g, src + j * g->b_cs);
                    out[2 * j + 1] = has_odd ? b_at(g, src + j * g->b_cs + g->b_rs) : 0;
                } else {
                    out[2 * j] = out[2 * j + 1] = 0;
                }
            }
        }
    }
}

/* C tile [mr <= MR, nr <= NR] (+)= A sliver * B panel over `pairs` pairs of k; with c16,
 * the tile (all of k, no old C) is stored rounded to bfloat16 there instead, and with
 * round32 stored in c rounded to bfloat16 values. */
BF16_TARGET static void micro_kernel(int64_t pairs, const uint32_t *ap, const uint16_t *bp, float *c, uint16_t *c16,
                                     bool round32, int64_t ldc, int mr, int nr, bool load_c, const uint16_t *bias) {
    __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    __m512 start0 = _mm512_setzero_ps(), start1 = _mm512_setzero_ps();
    if (bias && !load_c) {
        start0 = tg_widen_bf16x16(_mm256_maskz_loadu_epi16(m0, bias));
        start1 = tg_widen_bf16x16(_mm256_maskz_loadu_epi16(m1, bias + 16));
    }
    __m512 acc[MR][2];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        if (load_c && r < mr) {
            acc[r][0] = _mm512_maskz_loadu_ps(m0, c + r * ldc);
            acc[r][1] = _mm512_maskz_loadu_ps(m1, c + r * ldc + 16);
        } else {
            acc[r][0] = start0;
            acc[r][1] = start1;
        }
    }
    for (int64_t p = 0; p < pairs; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + 32);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[r]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
        ap += MR;
        bp += NR * 2;
    }
    if (c16) {
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++)
            if (r < mr) {
                _mm256_mask_storeu_epi16(c16 + r * ldc, m0, round_to_bf16(acc[r][0]));
                _mm256_mask_storeu_epi16(c16 + r * ldc + 16, m1, round_to_bf16(acc[r][1]));
            }
        return;
    }
    if (round32) {
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++)
            if (r < mr) {
                _mm512_mask_storeu_ps(c + r * ldc, m0, tg_widen_bf16x16(round_to_bf16(acc[r][0])));
                _mm512_mask_storeu_ps(c + r * ldc + 16, m1, tg_widen_bf16x16(round_to_bf16(acc[r][1])));
            }
        return;
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
        if (r < mr) {
            _mm512_mask_storeu_ps(c + r * ldc, m0, acc[r][0]);
            _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc[r][1]);
        }
}

/* C [m, n] block at (row0, col0) on one thread. */
static void gemm_serial(const bf16_job *g, int64_t row0, int64_t m, int64_t col0, int64_t n) {
    int64_t nc_max = n < NC ? n : NC, mc_max = m < MC ? m : MC, kc_max = g->k < KC ? g->k : KC;
    int64_t pairs_max = (kc_max + 1) / 2;
    uint16_t *bpack = malloc((size_t)((nc_max + NR - 1) / NR * pairs_max * NR * 2) * sizeof(uint16_t));
    uint32_t *apack = malloc((size_t)((mc_max + MR - 1) / MR * pairs_max * MR) * sizeof(uint32_t));
    if (!bpack || !apack) { /* a few hundred KiB: the op fails as out of memory */
        free(bpack), free(apack);
        tg_kernel_fail("out of memory for the bfloat16 GEMM's packed blocks");
        return;
    }
    for (int64_t jc = 0; jc < n; jc += NC) {
        int64_t nc = n - jc < NC ? n - jc : NC;
        for (int64_t pc = 0; pc < g->k; pc += KC) {
            int64_t kc = g->k - pc < KC ? g->k - pc : KC, pairs = (kc + 1) / 2;
            pack_b(g, pc, kc, col0 + jc, nc, pairs, bpack);
            bool load_c = pc > 0 || g->accumulate;
            for (int64_t ic = 0; ic < m; ic += MC) {
                int64_t mc = m - ic < MC ? m - ic : MC;
                pack_a(g, row0 + ic, mc, pc, kc, apack);
                for (int64_t jr = 0; jr < nc; jr += NR)
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        int nr = (int)(nc - jr < NR ? nc - jr : NR), mr = (int)(mc - ir < MR ? mc - ir : MR);
                        int64_t at = (row0 + ic + ir) * g->ldc + col0 + jc + jr;
                        micro_kernel(pairs, apack + ir / MR * pairs * MR, bpack + jr / NR * pairs * NR * 2,
                                     g->c16 ? NULL : g->c + at, g->c16 ? g->c16 + at : NULL, g->round32, g->ldc, mr, nr,
                                     load_c, g->bias16 ? g->bias16 + col0 + jc + jr : NULL);
                    }
            }
        }
    }
    free(bpack);
    free(apack);
}

/* ---- AMX (Sapphire Rapids and later): TDPBF16PS on 16 x 16 float32 tiles ----
 * The same blocking and the same packed B panels (pairs padded to a multiple of 16, a
 * tile's rows); A is packed as plain rows of k (padded to 32, a tile's 64 bytes) instead
 * of slivers. The micro tile is 32 x 32 of C in four tile registers, A's two 16-row
 * tiles and B's two 16-column tiles beside them, each C element still summed over k in
 * k order, two k at a time. core/amx.h says whether the process may use the tiles; each
 * thread loads the tile configuration itself. */
#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512bf16,avx512f,avx512bw,avx512vl")))
enum {
    AMX_MR = 32,
    AMX_KSTEP = 32,
    AMX_KC = 1024, /* k per slice: the tiles stream A and B from L2, so a deeper slice keeps C in the
                    * tiles over all of k for the tutorials' layers (and lets the kernel round it) */
    AMX_NC = 1024, /* columns of B per slice: AMX_NC * AMX_KC * 2 bytes = 2 MiB */
};

static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static bool amx_available, amx_enabled;
static void amx_probe(void) {
    amx_available = tg_gemm_bf16_supported() && tg_amx_available(TG_AMX_BF16);
    amx_enabled = amx_available && tg_amx_wanted();
}

/* A [rows, kc] from (row0, k0) as rows of kcp bfloat16 (k contiguous), rows padded to a
 * multiple of AMX_MR and k to kcp with zeros. */
static void pack_a_rows(const bf16_job *g, int64_t row0, int64_t rows, int64_t k0, int64_t kc, int64_t kcp,
                        uint16_t *dst) {
    int64_t rows_padded = (rows + AMX_MR - 1) / AMX_MR * AMX_MR;
    if (g->a_cs == 1) {
        for (int64_t r = 0; r < rows; r++) {
            memcpy(dst + r * kcp, g->a + (row0 + r) * g->a_rs + k0, (size_t)kc * sizeof(uint16_t));
            memset(dst + r * kcp + kc, 0, (size_t)(kcp - kc) * sizeof(uint16_t));
        }
    } else { /* A = G^T (a weight's gradient): read along A's columns, which are contiguous when a_rs == 1 */
        for (int64_t r = 0; r < rows; r++) memset(dst + r * kcp + kc, 0, (size_t)(kcp - kc) * sizeof(uint16_t));
        for (int64_t q = 0; q < kc; q++) {
            const uint16_t *src = g->a + row0 * g->a_rs + (k0 + q) * g->a_cs;
            for (int64_t r = 0; r < rows; r++) dst[r * kcp + q] = src[r * g->a_rs];
        }
    }
    memset(dst + rows * kcp, 0, (size_t)((rows_padded - rows) * kcp) * sizeof(uint16_t));
}

/* C tile [mr <= 32, nr <= 32] (+)= A rows (ld kcp) * B panel over kcp k; with c16 the
 * tile (all of k, no old C) is stored rounded to bfloat16 there instead, and with round32
 * stored in c rounded to bfloat16 values. */
AMX_TARGET static void amx_micro(int64_t kcp, const uint16_t *ap, const uint16_t *bp, float *c, uint16_t *c16,
                                 bool round32, int64_t ldc, int mr, int nr, bool load_c, const uint16_t *bias) {
    float tile[AMX_MR * NR] __attribute__((aligned(64)));
    bool whole = mr == AMX_MR && nr == NR && !c16 && !round32; /* C itself is the tiles' memory */
    float *base = whole ? c : tile;
    int64_t ld = whole ? ldc : NR;
    if (load_c) {
        if (!whole)
            for (int r = 0; r < AMX_MR; r++)
                for (int j = 0; j < NR; j++) tile[r * NR + j] = r < mr && j < nr ? c[r * ldc + j] : 0.0f;
        TG_AMX_MEMORY_BARRIER();
        _tile_loadd(0, base, ld * 4);
        _tile_loadd(1, base + 16, ld * 4);
        _tile_loadd(2, base + 16 * ld, ld * 4);
        _tile_loadd(3, base + 16 * ld + 16, ld * 4);
    } else if (bias) { /* every row of the tiles starts as the bias (a row stride of 0) */
        float start[NR] __attribute__((aligned(64)));
        for (int j = 0; j < NR; j++) start[j] = j < nr ? tg_bf16_bits_to_float(bias[j]) : 0.0f;
        TG_AMX_MEMORY_BARRIER();
        _tile_loadd(0, start, 0);
        _tile_loadd(1, start + 16, 0);
        _tile_loadd(2, start, 0);
        _tile_loadd(3, start + 16, 0);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int64_t s = 0; s < kcp / AMX_KSTEP; s++) {
        const uint16_t *a = ap + s * AMX_KSTEP, *b = bp + s * 16 * NR * 2;
        _tile_loadd(4, a, kcp * 2);
        _tile_loadd(5, a + 16 * kcp, kcp * 2);
        _tile_loadd(6, b, NR * 2 * 2);
        _tile_loadd(7, b + 32, NR * 2 * 2);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, base, ld * 4);
    _tile_stored(1, base + 16, ld * 4);
    _tile_stored(2, base + 16 * ld, ld * 4);
    _tile_stored(3, base + 16 * ld + 16, ld * 4);
    if (whole) return;
    __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    for (int r = 0; r < mr; r++) {
        __m512 lo = _mm512_load_ps(tile + r * NR), hi = _mm512_load_ps(tile + r * NR + 16);
        if (c16) {
            _mm256_mask_storeu_epi16(c16 + r * ldc, m0, round_to_bf16(lo));
            _mm256_mask_storeu_epi16(c16 + r * ldc + 16, m1, round_to_bf16(hi));
        } else if (round32) {
            _mm512_mask_storeu_ps(c + r * ldc, m0, tg_widen_bf16x16(round_to_bf16(lo)));
            _mm512_mask_storeu_ps(c + r * ldc + 16, m1, tg_widen_bf16x16(round_to_bf16(hi)));
        } else {
            _mm512_mask_storeu_ps(c + r * ldc, m0, lo);
            _mm512_mask_storeu_ps(c + r * ldc + 16, m1, hi);
        }
    }
}

/* C [m, n] block at (row0, col0) on one thread, with AMX. */
AMX_TARGET static void gemm_serial_amx(const bf16_job *g, int64_t row0, int64_t m, int64_t col0, int64_t n) {
    int64_t nc_max = n < AMX_NC ? n : AMX_NC, mc_max = m < MC ? m : MC, kc_max = g->k < AMX_KC ? g->k : AMX_KC;
    int64_t kcp_max = (kc_max + AMX_KSTEP - 1) / AMX_KSTEP * AMX_KSTEP;
    uint16_t *bpack = malloc((size_t)((nc_max + NR - 1) / NR * kcp_max * NR) * sizeof(uint16_t));
    uint16_t *apack = malloc((size_t)((mc_max + AMX_MR - 1) / AMX_MR * AMX_MR * kcp_max) * sizeof(uint16_t));
    if (!bpack || !apack) { /* up to 2 MiB: the op fails as out of memory */
        free(bpack), free(apack);
        tg_kernel_fail("out of memory for the bfloat16 GEMM's packed blocks");
        return;
    }
    tg_amx_configure();
    for (int64_t jc = 0; jc < n; jc += AMX_NC) {
        int64_t nc = n - jc < AMX_NC ? n - jc : AMX_NC;
        for (int64_t pc = 0; pc < g->k; pc += AMX_KC) {
            int64_t kc = g->k - pc < AMX_KC ? g->k - pc : AMX_KC, kcp = (kc + AMX_KSTEP - 1) / AMX_KSTEP * AMX_KSTEP;
            pack_b(g, pc, kc, col0 + jc, nc, kcp / 2, bpack);
            bool load_c = pc > 0 || g->accumulate;
            for (int64_t ic = 0; ic < m; ic += MC) {
                int64_t mc = m - ic < MC ? m - ic : MC;
                pack_a_rows(g, row0 + ic, mc, pc, kc, kcp, apack);
                TG_AMX_MEMORY_BARRIER(); /* the packed panels, read by tile loads */
                for (int64_t jr = 0; jr < nc; jr += NR)
                    for (int64_t ir = 0; ir < mc; ir += AMX_MR) {
                        int nr = (int)(nc - jr < NR ? nc - jr : NR), mr = (int)(mc - ir < AMX_MR ? mc - ir : AMX_MR);
                        int64_t at = (row0 + ic + ir) * g->ldc + col0 + jc + jr;
                        amx_micro(kcp, apack + ir * kcp, bpack + jr / NR * kcp * NR, g->c16 ? NULL : g->c + at,
                                  g->c16 ? g->c16 + at : NULL, g->round32, g->ldc, mr, nr, load_c,
                                  g->bias16 ? g->bias16 + col0 + jc + jr : NULL);
                    }
            }
        }
    }
    _tile_release();
    free(bpack);
    free(apack);
}

/* The calling thread's share, with AMX where the CPU and the OS allow it. */
static void serial(const bf16_job *g, int64_t row0, int64_t m, int64_t col0, int64_t n) {
    pthread_once(&amx_once, amx_probe);
    if (amx_enabled) gemm_serial_amx(g, row0, m, col0, n);
    else gemm_serial(g, row0, m, col0, n);
}

static void gemm_split(int64_t u0, int64_t u1, void *arg) {
    const bf16_job *g = arg;
    int64_t dim = g->by_rows ? g->m : g->n;
    int64_t lo = u0 * SPLIT, hi = u1 * SPLIT < dim ? u1 * SPLIT : dim;
    if (g->by_rows) serial(g, lo, hi - lo, 0, g->n);
    else serial(g, 0, g->m, lo, hi - lo);
}

#endif

#ifdef HAVE_BF16_KERNEL
/* On the calling thread, or split over the pool by blocks of rows or columns of C. */
static void run(bf16_job g) {
    int threads = tg_get_num_threads();
    if (threads <= 1 || g.m * g.n * g.k < TG_GEMM_PARALLEL_MIN || tg_in_parallel_region()) {
        serial(&g, 0, g.m, 0, g.n);
        return;
    }
    g.by_rows = g.m >= g.n;
    int64_t units = ((g.by_rows ? g.m : g.n) + SPLIT - 1) / SPLIT;
    tg_parallel_for(units, (units + threads - 1) / threads, gemm_split, &g);
}
#endif

/* The slice of the kernel in use: the rounded outputs need all of k in one. */
static int64_t slice_k(void) {
#ifdef HAVE_BF16_KERNEL
    pthread_once(&amx_once, amx_probe);
    return amx_enabled ? AMX_KC : KC;
#else
    return 0;
#endif
}

bool tg_gemm_bf16_rounds(int64_t k) { return tg_gemm_bf16_supported() && k <= slice_k(); }

void tg_gemm_bf16_general(tg_gemm_bf16_args x) {
    if (x.m <= 0 || x.n <= 0) return;
    if (x.k <= 0) {
        if (x.accumulate && x.c_kind == TG_BF16_C_F32) return;
        for (int64_t i = 0; i < x.m; i++) /* C = the bias, or zeros */
            for (int64_t j = 0; j < x.n; j++) {
                uint16_t v = x.bias ? x.bias[j] : 0;
                if (x.c_kind == TG_BF16_C_BF16) ((uint16_t *)x.c)[i * x.ldc + j] = v;
                else ((float *)x.c)[i * x.ldc + j] = tg_bf16_bits_to_float(v);
            }
        return;
    }
    if (x.bias && x.accumulate) abort(); /* the sums start from C's old values or from the bias, not both */
#ifdef HAVE_BF16_KERNEL
    if (x.c_kind != TG_BF16_C_F32 && x.k > slice_k()) abort(); /* callers check tg_gemm_bf16_rounds(k) first */
    run((bf16_job){.m = x.m,
                   .n = x.n,
                   .k = x.k,
                   .a = x.a,
                   .b = x.b32 ? NULL : x.b,
                   .b32 = x.b32,
                   .a_rs = x.a_rs,
                   .a_cs = x.a_cs,
                   .b_rs = x.b_rs,
                   .b_cs = x.b_cs,
                   .accumulate = x.accumulate && x.c_kind == TG_BF16_C_F32,
                   .c = x.c_kind == TG_BF16_C_BF16 ? NULL : x.c,
                   .c16 = x.c_kind == TG_BF16_C_BF16 ? x.c : NULL,
                   .round32 = x.c_kind == TG_BF16_C_ROUNDED_F32,
                   .bias16 = x.bias,
                   .ldc = x.ldc});
#else
    abort(); /* callers check tg_gemm_bf16_supported() first */
#endif
}

/* The operands of both entry points; the caller sets c_kind, c, ldc and accumulate. */
static tg_gemm_bf16_args operands(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t a_rs, int64_t a_cs,
                                  const uint16_t *b, int64_t b_rs, int64_t b_cs) {
    return (tg_gemm_bf16_args){
        .m = m, .n = n, .k = k, .a = a, .a_rs = a_rs, .a_cs = a_cs, .b = b, .b_rs = b_rs, .b_cs = b_cs};
}

void tg_gemm_bf16(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t a_rs, int64_t a_cs, const uint16_t *b,
                  int64_t b_rs, int64_t b_cs, bool accumulate, float *c, int64_t ldc) {
    tg_gemm_bf16_args args = operands(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs);
    args.c_kind = TG_BF16_C_F32;
    args.accumulate = accumulate;
    args.c = c;
    args.ldc = ldc;
    tg_gemm_bf16_general(args);
}

void tg_gemm_bf16_rounded(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t a_rs, int64_t a_cs,
                          const uint16_t *b, int64_t b_rs, int64_t b_cs, uint16_t *c, int64_t ldc) {
    tg_gemm_bf16_args args = operands(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs);
    args.c_kind = TG_BF16_C_BF16;
    args.c = c;
    args.ldc = ldc;
    tg_gemm_bf16_general(args);
}

bool tg_gemm_bf16_amx_available(void) {
#ifdef HAVE_BF16_KERNEL
    pthread_once(&amx_once, amx_probe);
    return amx_available;
#else
    return false;
#endif
}

bool tg_gemm_bf16_set_amx(bool on) {
#ifdef HAVE_BF16_KERNEL
    pthread_once(&amx_once, amx_probe);
    bool was = amx_enabled;
    amx_enabled = on && amx_available;
    return was;
#else
    (void)on;
    return false;
#endif
}
