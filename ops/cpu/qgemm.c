/* int8 GEMM (ops/cpu/qgemm.h): an AMX kernel and an AVX512-VNNI one picked at run time, and
 * portable C.
 * vpdpbusd multiplies 64 uint8 by 64 int8 bytes and adds each group of four
 * products into one of 16 int32 lanes without saturation, so the kernel is exact. */
#include "ops/cpu/qgemm.h"

#include <stdatomic.h>

#include <stdlib.h>
#include <string.h>

#include "core/amx.h"
#include "core/error.h"
#include "core/parallel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TG_QGEMM_X86 1
#endif

static atomic_bool vnni_allowed = true, amx_allowed = true;

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

bool tg_qgemm_has_amx(void) { return tg_qgemm_has_vnni() && tg_amx_available(TG_AMX_INT8); }

void tg_qgemm_allow_amx(bool allow) { atomic_store(&amx_allowed, allow); }

bool tg_qgemm_amx_enabled(void) {
    static int amx = -1;
    if (amx < 0) amx = tg_qgemm_has_amx() && tg_amx_wanted();
    return amx && atomic_load(&amx_allowed) && tg_qgemm_vnni_enabled();
}

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
__attribute__((target("avx512vnni,avx512bw,avx512f"))) static void units_vnni(int64_t begin, int64_t end, void *ctx) {
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
                s = _mm512_dpbusd_epi32(s, _mm512_maskz_loadu_epi8(tail, a + full),
                                        _mm512_maskz_loadu_epi8(tail, b + full));
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

/* The packing: panels of up to 4 blocks of 16 columns (64 columns); inside a panel, for
 * each group of 4 k values, the panel's blocks one after another (64 bytes each: 16
 * columns x 4 bytes), so the kernel reads one panel as one sequential stream (blocks
 * stored a whole k apart would be 4 streams whose distance, a multiple of 4 KiB when
 * k is, maps them onto the same cache sets). */
#define PANEL_BLOCKS 4
/* Groups of 4 k per panel, padded with zeros to a multiple of 16: an AMX tile's 16 rows
 * (the AMX kernel below reads whole tiles; the VNNI kernel reads only the real groups). */
static int64_t padded_groups(int64_t k) { return ((k + 3) / 4 + 15) / 16 * 16; }
static int64_t panel_offset(int64_t panel, int64_t k) { return panel * PANEL_BLOCKS * padded_groups(k) * 64; }

int8_t *tg_qgemm_pack(int64_t n, int64_t k, const int8_t *b) {
    int64_t blocks = (n + 15) / 16, groups = padded_groups(k);
    int8_t *p = calloc((size_t)(blocks * groups > 0 ? blocks * groups : 1), 64);
    if (!p) return NULL;
    for (int64_t j = 0; j < n; j++) {
        int64_t panel = j / 64,
                in_panel = blocks - panel * PANEL_BLOCKS < PANEL_BLOCKS ? blocks - panel * PANEL_BLOCKS : PANEL_BLOCKS;
        int8_t *dst = p + panel_offset(panel, k) + (j % 64 / 16) * 64 + j % 16 * 4;
        for (int64_t q = 0; q < k; q++) dst[q / 4 * in_panel * 64 + q % 4] = b[j * k + q];
    }
    return p;
}

typedef struct {
    int64_t m, n, k, lda, row_blocks, panels;
    const uint8_t *a;
    const int8_t *packed;
    const tg_qgemm_epilogue *e;
} packed_args;

#ifdef TG_QGEMM_X86
/* Rows per register block: 6 rows x 4 blocks of 16 columns = 24 accumulators, plus 4
 * weight vectors and a broadcast, within the 32 vector registers; each 64-byte weight
 * load then feeds 6 vpdpbusd and each 4-byte broadcast of a 4. */
#define MR 6

/* acc += the products of a (u8) and b (s8), as _mm512_dpbusd_epi32, but with the
 * accumulator tied to its register: GCC 12 copies the intrinsic's accumulator through
 * spare registers and the stack when 24 of them are live. */
__attribute__((target("avx512vnni,avx512bw,avx512f"), always_inline)) static inline __m512i
dpbusd(__m512i acc, __m512i a, __m512i b) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}

/* Applies e to the sums of row i, columns j..j+15 (those in mask), and stores them. */
__attribute__((target("avx512vnni,avx512bw,avx512f"), always_inline)) static inline void
store_sums(const tg_qgemm_epilogue *e, int64_t i, int64_t j, __mmask16 mask, __m512i acc) {
    switch (e->kind) {
    case TG_QGEMM_OUT_S32: _mm512_mask_storeu_epi32((int32_t *)e->out + i * e->ldc + j, mask, acc); break;
    case TG_QGEMM_OUT_F32: {
        __m512i raw = _mm512_sub_epi32(acc, _mm512_mullo_epi32(_mm512_set1_epi32(e->x_zero_point),
                                                               _mm512_maskz_loadu_epi32(mask, e->col_sum + j)));
        __m512 ws = e->per_channel ? _mm512_maskz_loadu_ps(mask, e->w_scale + j) : _mm512_set1_ps(e->w_scale[0]);
        __m512 y = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(raw), _mm512_set1_ps(e->x_scale)), ws);
        if (e->bias) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(mask, e->bias + j));
        _mm512_mask_storeu_ps((float *)e->out + i * e->ldc + j, mask, y);
        break;
    }
    case TG_QGEMM_OUT_U8: {
        __m512i sum = _mm512_add_epi32(acc, _mm512_maskz_loadu_epi32(mask, e->correction + j));
        __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_maskz_loadu_ps(mask, e->mult + j));
        /* nearbyint in the default rounding mode; beyond 2^22 both this and the scalar
         * code's clamp-and-round end at the same clamp */
        v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm512_add_ps(v, _mm512_set1_ps(e->y_zero_point));
        v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(e->lo)), _mm512_set1_ps(255.f));
        _mm512_mask_cvtepi32_storeu_epi8((uint8_t *)e->out + i * e->ldc + j, mask, _mm512_cvttps_epi32(v));
        break;
    }
    }
}

/* c[mr rows, nb * 16 columns (masked to n)] for one row block and one panel; mr and nb
 * are constants after inlining, so the accumulators live in registers. */
__attribute__((target("avx512vnni,avx512bw,avx512f"), always_inline)) static inline void
micro(int mr, int nb, const packed_args *g, int64_t i0, int64_t panel) {
    const int64_t k = g->k, full = k / 4, groups = (k + 3) / 4, lda = g->lda;
    const uint8_t *a = g->a + i0 * lda;
    const int8_t *w = g->packed + panel_offset(panel, k);
    __m512i acc[MR][PANEL_BLOCKS];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int b = 0; b < nb; b++) acc[r][b] = _mm512_setzero_si512();
    for (int64_t q = 0; q < full; q++, w += nb * 64) {
        __m512i wv[PANEL_BLOCKS];
#pragma GCC unroll 4
        for (int b = 0; b < nb; b++) wv[b] = _mm512_loadu_si512(w + b * 64);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            int32_t four;
            memcpy(&four, a + r * lda + q * 4, 4);
            __m512i va = _mm512_set1_epi32(four);
#pragma GCC unroll 4
            for (int b = 0; b < nb; b++) acc[r][b] = dpbusd(acc[r][b], va, wv[b]);
        }
    }
    if (groups > full) { /* the tail of k: the row's last bytes, zero padded (never read past a row) */
        __m512i wv[PANEL_BLOCKS];
#pragma GCC unroll 4
        for (int b = 0; b < nb; b++) wv[b] = _mm512_loadu_si512(w + b * 64);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            uint8_t last[4] = {0, 0, 0, 0};
            for (int64_t p = full * 4; p < k; p++) last[p - full * 4] = a[r * lda + p];
            int32_t four;
            memcpy(&four, last, 4);
            __m512i va = _mm512_set1_epi32(four);
#pragma GCC unroll 4
            for (int b = 0; b < nb; b++) acc[r][b] = dpbusd(acc[r][b], va, wv[b]);
        }
    }
    const int64_t j0 = panel * PANEL_BLOCKS * 16;
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int b = 0; b < nb; b++) {
            int64_t left = g->n - j0 - b * 16;
            __mmask16 mask = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
            store_sums(g->e, i0 + r, j0 + b * 16, mask, acc[r][b]);
        }
}
#define MICRO_NB(mr)                            \
    switch (nb) {                               \
    case 1: micro(mr, 1, g, i0, panel); break;  \
    case 2: micro(mr, 2, g, i0, panel); break;  \
    case 3: micro(mr, 3, g, i0, panel); break;  \
    default: micro(mr, 4, g, i0, panel); break; \
    }

/* Units [begin, end): unit u is row block u % row_blocks of panel u / row_blocks, so a
 * thread's consecutive units reuse one panel of weights from its cache. */
__attribute__((target("avx512vnni,avx512bw,avx512f"))) static void units_packed(int64_t begin, int64_t end, void *ctx) {
    const packed_args *g = ctx;
    const int64_t blocks = (g->n + 15) / 16;
    for (int64_t u = begin; u < end; u++) {
        const int64_t panel = u / g->row_blocks, i0 = u % g->row_blocks * MR;
        const int64_t left = blocks - panel * PANEL_BLOCKS;
        const int nb = left < PANEL_BLOCKS ? (int)left : PANEL_BLOCKS, mr = g->m - i0 < MR ? (int)(g->m - i0) : MR;
        switch (mr) {
        case 1: MICRO_NB(1); break;
        case 2: MICRO_NB(2); break;
        case 3: MICRO_NB(3); break;
        case 4: MICRO_NB(4); break;
        case 5: MICRO_NB(5); break;
        default: MICRO_NB(6); break;
        }
    }
}

/* ---- AMX (TDPBUSD on tiles) ----
 * The packed weights are already AMX's B layout: a block of 16 columns, read as 16
 * groups of 4 k (one 64-byte row each) at a stride of the panel's blocks, is one B
 * tile. A row block of 32 rows is copied with its k padded to 64 with zeros (an A tile
 * row: 64 k of one row; the padding meets the packing's zero groups). A unit is 32 rows
 * x one panel, in two halves of 32 columns: four C tiles of 16 x 16 int32, two A and two
 * B tiles. The sums are exact, so the same as the VNNI kernel's; the epilogue is its
 * store_sums on each row of the C tiles. */
#define AMX_ROWS 32

typedef struct {
    const packed_args *g;
    int64_t kp; /* k padded to 64 */
} amx_args;

#define AMX_INT8_TARGET __attribute__((target("amx-tile,amx-int8,avx512vnni,avx512bw,avx512f")))

AMX_INT8_TARGET static void amx_unit(const packed_args *g, int64_t kp, const uint8_t *arows, int64_t i0,
                                     int64_t panel) {
    const int64_t blocks = (g->n + 15) / 16, left = blocks - panel * PANEL_BLOCKS;
    const int in_panel = left < PANEL_BLOCKS ? (int)left : PANEL_BLOCKS;
    const int mr = g->m - i0 < AMX_ROWS ? (int)(g->m - i0) : AMX_ROWS;
    const int8_t *w = g->packed + panel_offset(panel, g->k);
    int32_t sums[AMX_ROWS * 32] __attribute__((aligned(64)));
    for (int half = 0; half * 2 < in_panel; half++) {
        const int b0 = half * 2, nb = in_panel - b0 < 2 ? in_panel - b0 : 2;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t s = 0; s < kp / 64; s++) {
            const int8_t *b = w + (s * 16 * in_panel + b0) * 64;
            _tile_loadd(4, arows + s * 64, kp);
            _tile_loadd(5, arows + 16 * kp + s * 64, kp);
            _tile_loadd(6, b, in_panel * 64);
            _tile_dpbusd(0, 4, 6);
            _tile_dpbusd(2, 5, 6);
            if (nb == 2) {
                _tile_loadd(7, b + 64, in_panel * 64);
                _tile_dpbusd(1, 4, 7);
                _tile_dpbusd(3, 5, 7);
            }
        }
        _tile_stored(0, sums, 32 * 4);
        _tile_stored(1, sums + 16, 32 * 4);
        _tile_stored(2, sums + 16 * 32, 32 * 4);
        _tile_stored(3, sums + 16 * 32 + 16, 32 * 4);
        const int64_t j0 = panel * PANEL_BLOCKS * 16 + b0 * 16;
        for (int r = 0; r < mr; r++)
            for (int b = 0; b < nb; b++) {
                int64_t cols = g->n - j0 - b * 16;
                __mmask16 mask = cols >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cols) - 1);
                store_sums(g->e, i0 + r, j0 + b * 16, mask, _mm512_load_si512(sums + r * 32 + b * 16));
            }
    }
}

/* Units [begin, end): unit u is panel u % panels of row block u / panels, so a thread's
 * consecutive units reuse one copied row block. */
AMX_INT8_TARGET static void units_amx(int64_t begin, int64_t end, void *ctx) {
    const amx_args *x = ctx;
    const packed_args *g = x->g;
    uint8_t *arows = malloc((size_t)(AMX_ROWS * x->kp));
    if (!arows) { /* 32 rows of k bytes: the op fails as out of memory */
        tg_kernel_fail("out of memory for the int8 GEMM's row block");
        return;
    }
    tg_amx_configure();
    int64_t copied = -1;
    for (int64_t u = begin; u < end; u++) {
        const int64_t rb = u / g->panels, panel = u % g->panels, i0 = rb * AMX_ROWS;
        if (rb != copied) {
            for (int64_t r = 0; r < AMX_ROWS; r++) {
                uint8_t *dst = arows + r * x->kp;
                int64_t filled = 0;
                if (i0 + r < g->m) {
                    memcpy(dst, g->a + (i0 + r) * g->lda, (size_t)g->k);
                    filled = g->k;
                }
                memset(dst + filled, 0, (size_t)(x->kp - filled));
            }
            copied = rb;
            TG_AMX_MEMORY_BARRIER(); /* the copied rows, read by tile loads */
        }
        amx_unit(g, x->kp, arows, i0, panel);
    }
    _tile_release();
    free(arows);
}
#endif

void tg_qgemm_u8s8_packed_epilogue(int64_t m, int64_t n, int64_t k, const uint8_t *a, int64_t lda, const int8_t *packed,
                                   const tg_qgemm_epilogue *e) {
#ifdef TG_QGEMM_X86
    if (m <= 0 || n <= 0) return;
    const int64_t row_blocks = (m + MR - 1) / MR, panels = (n + 63) / 64;
    packed_args args = {m, n, k, lda, row_blocks, panels, a, packed, e};
    if (m >= AMX_ROWS / 2 && tg_qgemm_amx_enabled()) { /* a tile's 16 rows at least; else VNNI wastes less */
        amx_args x = {&args, (k + 63) / 64 * 64};
        const int64_t units = (m + AMX_ROWS - 1) / AMX_ROWS * panels;
        int64_t per_unit = (m < AMX_ROWS ? m : AMX_ROWS) * (n < 64 ? n : 64) * (k > 0 ? k : 1);
        tg_parallel_for(units, per_unit >= 1048576 ? 1 : 1048576 / per_unit, units_amx, &x);
        return;
    }
    /* a unit costs up to MR * 64 * k multiply-adds; at least about 256k of them per
     * chunk (a product smaller than that is over before a second thread would start) */
    int64_t per_unit = (m < MR ? m : MR) * (n < 64 ? n : 64) * (k > 0 ? k : 1);
    tg_parallel_for(row_blocks * panels, per_unit >= 262144 ? 1 : 262144 / per_unit, units_packed, &args);
#else
    (void)m, (void)n, (void)k, (void)a, (void)lda, (void)packed, (void)e;
    TG_ASSERT(!"tg_qgemm_u8s8_packed_epilogue needs AVX512-VNNI");
#endif
}

void tg_qgemm_u8s8s32_packed(int64_t m, int64_t n, int64_t k, const uint8_t *a, int64_t lda, const int8_t *packed,
                             int32_t *c) {
    tg_qgemm_epilogue e = {.kind = TG_QGEMM_OUT_S32, .out = c, .ldc = n};
    tg_qgemm_u8s8_packed_epilogue(m, n, k, a, lda, packed, &e);
}
