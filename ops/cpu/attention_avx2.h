/* The float32 fused attention on x86-64 CPUs with AVX2 and FMA (included once by
 * ops/cpu/attention.c, after the float32 body, whose mask, online-softmax and dS row
 * functions it calls). The block products are this file's own register-blocked kernel
 * instead of GEMM calls: on blocks of 64 x 128 x 64 OpenBLAS spent most of its time
 * packing. The library is built for baseline x86-64, so these functions are compiled
 * for AVX2 + FMA by target attributes and taken only when the CPU has both (checked at
 * each call), for head dims that are multiples of 8; otherwise the generic body runs.
 *
 * Forward: as the generic one, on 64 query rows x 128 keys, k transposed into 16-key
 * panels once per key block. Backward: one pass (S and dP computed once per block pair,
 * 5 products instead of the generic 7): a task owns a problem's key blocks g, g + G,
 * g + 2G, ... (interleaved, so that causal work is balanced), writes their dk and dv,
 * and adds dS K into its own dq partial [l, e]; the G partials are summed in the order
 * g = 0, 1, ... afterwards. G depends on the shape only (never the thread count), so
 * every element is summed in a fixed order and the bits do not depend on the threads.
 * On CPUs with AVX-512 the drivers take ops/cpu/attention_avx512.h's leaf kernels (16
 * lanes, 6 x 32 tiles) through a table, af_kernels. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#define AF_TARGET __attribute__((target("avx2,fma")))
#define AF_BQ 64   /* query rows per block */
#define AF_BK 128  /* keys per block, a multiple of 16 (the kernel's width) */
#define AF_MR 6    /* rows of the kernel's tile: 6 x 16 accumulators = 12 of the 16 ymm */
#define AF_TASKS 8 /* the backward splits a problem's keys into up to ceil(AF_TASKS / batch) parts */

/* One row of a tile: c0 (c1) += a * b0 (b1). */
AF_TARGET __attribute__((always_inline)) static inline void af_fma_row(const float *a, __m256 b0, __m256 b1, int nv,
                                                                       __m256 *c0, __m256 *c1) {
    __m256 x = _mm256_broadcast_ss(a);
    *c0 = _mm256_fmadd_ps(x, b0, *c0);
    if (nv > 1) *c1 = _mm256_fmadd_ps(x, b1, *c1);
}

/* One row of a tile out: c (+)= alpha * (c0, c1). */
AF_TARGET __attribute__((always_inline)) static inline void af_store_row(float *c, __m256 c0, __m256 c1, int nv,
                                                                         __m256 alpha, bool acc) {
    __m256 y0 = _mm256_mul_ps(alpha, c0), y1 = _mm256_mul_ps(alpha, c1);
    _mm256_storeu_ps(c, acc ? _mm256_add_ps(_mm256_loadu_ps(c), y0) : y0);
    if (nv > 1) _mm256_storeu_ps(c + 8, acc ? _mm256_add_ps(_mm256_loadu_ps(c + 8), y1) : y1);
}

/* c[r][0 .. 8 nv) (+)= alpha * sum_t a[r ars + t acs] b[t ldb + 0 .. 8 nv) for r < rows:
 * one tile, its accumulators in registers (rows and nv are constants where it is
 * inlined; named variables, as GCC keeps an array of them in memory). */
AF_TARGET __attribute__((always_inline)) static inline void af_tile(int rows, int nv, int64_t k, const float *a,
                                                                    int64_t ars, int64_t acs, const float *b,
                                                                    int64_t ldb, float *c, int64_t ldc, float alpha,
                                                                    bool acc) {
    __m256 z = _mm256_setzero_ps(), c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z,
           c41 = z, c50 = z, c51 = z;
    for (int64_t t = 0; t < k; t++, a += acs, b += ldb) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = nv > 1 ? _mm256_loadu_ps(b + 8) : z;
        af_fma_row(a, b0, b1, nv, &c00, &c01);
        if (rows > 1) af_fma_row(a + ars, b0, b1, nv, &c10, &c11);
        if (rows > 2) af_fma_row(a + 2 * ars, b0, b1, nv, &c20, &c21);
        if (rows > 3) af_fma_row(a + 3 * ars, b0, b1, nv, &c30, &c31);
        if (rows > 4) af_fma_row(a + 4 * ars, b0, b1, nv, &c40, &c41);
        if (rows > 5) af_fma_row(a + 5 * ars, b0, b1, nv, &c50, &c51);
    }
    __m256 al = _mm256_set1_ps(alpha);
    af_store_row(c, c00, c01, nv, al, acc);
    if (rows > 1) af_store_row(c + ldc, c10, c11, nv, al, acc);
    if (rows > 2) af_store_row(c + 2 * ldc, c20, c21, nv, al, acc);
    if (rows > 3) af_store_row(c + 3 * ldc, c30, c31, nv, al, acc);
    if (rows > 4) af_store_row(c + 4 * ldc, c40, c41, nv, al, acc);
    if (rows > 5) af_store_row(c + 5 * ldc, c50, c51, nv, al, acc);
}

/* af_tile with rows and nv as constants, so that each variant keeps its tile in registers. */
AF_TARGET static void af_tile_any(int rows, int nv, int64_t k, const float *a, int64_t ars, int64_t acs, const float *b,
                                  int64_t ldb, float *c, int64_t ldc, float alpha, bool acc) {
#define AF_CASE(R)                                                              \
    case R:                                                                     \
        if (nv == 2) af_tile(R, 2, k, a, ars, acs, b, ldb, c, ldc, alpha, acc); \
        else af_tile(R, 1, k, a, ars, acs, b, ldb, c, ldc, alpha, acc);         \
        break;
    switch (rows) { AF_CASE(1) AF_CASE(2) AF_CASE(3) AF_CASE(4) AF_CASE(5) AF_CASE(6) }
#undef AF_CASE
}

/* Which part of a product a causal block needs. Element (r, c) of a score block (query
 * i0 + r, key j0 + c) is seen iff c <= r + diag, diag = i0 - j0; a masked score's p and ds
 * are exactly 0, so the products skip them (FlashAttention's causal skipping, on tiles):
 *   AF_SCORES       C is a score block [queries, keys]: tiles with no seen element are
 *                   not computed (zeros are stored when not accumulating);
 *   AF_SUM_KEYS     the sum runs over keys t for query rows r: t <= r + diag;
 *   AF_SUM_QUERIES  the sum runs over queries t for key rows r: t >= r - diag. */
typedef enum { AF_DENSE, AF_SCORES, AF_SUM_KEYS, AF_SUM_QUERIES } af_causal;

/* The terms [t0, t1) of a tile's sum (rows [r0, r0 + rows), columns from n0) that the
 * causal mask leaves, out of [0, k); t1 <= t0 when none (AVX2 and AVX-512 tiles alike). */
static inline void af_tile_terms(af_causal causal, int64_t r0, int rows, int64_t n0, int64_t k, int64_t diag,
                                 int64_t *t0, int64_t *t1) {
    *t0 = 0, *t1 = k;
    if (causal == AF_SCORES && n0 > r0 + rows - 1 + diag) *t1 = 0;
    if (causal == AF_SUM_KEYS && r0 + rows + diag < *t1) *t1 = r0 + rows + diag;
    if (causal == AF_SUM_QUERIES && r0 - diag > 0) *t0 = r0 - diag;
}

/* C [m, n] (+)= alpha A B, n a multiple of 8: A's element (r, t) at a[r ars + t acs] (a
 * transposed operand is a stride), B's 16-column chunks bcs apart, rows ldb apart (16
 * and ldb for a row-major B; k * 16 and 16 for af_pack_t's panels). A chunk of B (k x
 * 16) stays in L1 while the tiles of A go by. Under `causal` (not AF_DENSE) only the
 * part of the product the causal mask leaves is computed; dropped terms are exact zeros,
 * so the sums are the same. */
AF_TARGET static void af_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t ars, int64_t acs,
                              const float *b, int64_t ldb, int64_t bcs, float *c, int64_t ldc, bool acc,
                              af_causal causal, int64_t diag) {
    for (int64_t n0 = 0; n0 < n; n0 += 16) {
        int nv = n - n0 >= 16 ? 2 : 1;
        for (int64_t r0 = 0; r0 < m; r0 += AF_MR) {
            int rows = m - r0 < AF_MR ? (int)(m - r0) : AF_MR;
            int64_t t0, t1;
            af_tile_terms(causal, r0, rows, n0, k, diag, &t0, &t1);
            if (t1 <= t0) {
                if (acc) continue;
                t0 = t1 = 0; /* stores zeros */
            }
            af_tile_any(rows, nv, t1 - t0, a + r0 * ars + t0 * acs, ars, acs, b + n0 / 16 * bcs + t0 * ldb, ldb,
                        c + r0 * ldc + n0, ldc, alpha, acc);
        }
    }
}

/* dst = panels of 16 rows of src [n, k] (row stride ld), transposed: panel p is [k][16]
 * of rows 16p .. 16p + 15, rows past n zero (their scores are computed and never read). */
static void af_pack_t(const float *src, int64_t ld, int64_t n, int64_t k, float *restrict dst) {
    for (int64_t r = 0; r < (n + 15) / 16 * 16; r++) {
        float *d = dst + r / 16 * k * 16 + r % 16;
        for (int64_t t = 0; t < k; t++) d[t * 16] = r < n ? src[r * ld + t] : 0.0f;
    }
}

static int64_t af_pad16(int64_t n) { return (n + 15) / 16 * 16; }

/* attn_expf (ops/cpu/attention.c) on 8 lanes, its constants, with FMAs, n rounded to
 * nearest (even) and the polynomial by Estrin's scheme: the loops that call it are bound
 * by the latency of one exp, and this halves its dependency chain (GCC does not
 * vectorise attn_expf's selects inside these target functions). Masked scores (-inf)
 * give exactly 0, NaN stays NaN (min/max return their second operand on NaN). */
AF_TARGET static inline __m256 af_exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3365478515625f);
    __m256 xc = _mm256_max_ps(lo, _mm256_min_ps(_mm256_set1_ps(88.3762626647949f), x));
    __m256 fn = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 r2 = _mm256_mul_ps(r, r), r4 = _mm256_mul_ps(r2, r2);
    __m256 p01 = _mm256_fmadd_ps(_mm256_set1_ps(1.6666665459e-1f), r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 p23 = _mm256_fmadd_ps(_mm256_set1_ps(8.3334519073e-3f), r, _mm256_set1_ps(4.1665795894e-2f));
    __m256 p45 = _mm256_fmadd_ps(_mm256_set1_ps(1.9875691500e-4f), r, _mm256_set1_ps(1.3981999507e-3f));
    __m256 poly = _mm256_fmadd_ps(p45, r4, _mm256_fmadd_ps(p23, r2, p01));
    __m256 y = _mm256_add_ps(_mm256_fmadd_ps(poly, r2, r), _mm256_set1_ps(1.0f));
    __m256i n = _mm256_cvtps_epi32(fn);
    __m256 two_n = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
    return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), _mm256_mul_ps(y, two_n));
}

/* row_max_f32 and exp_row_f32 for online_rows_f32, 8 lanes at a time; the tails by the
 * scalar formula. */
AF_TARGET static float af_row_max(const float *row, int64_t n) {
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) mx = _mm256_max_ps(_mm256_loadu_ps(row + c), mx);
    float lanes[8], m = row_max_f32(row + c, n - c);
    _mm256_storeu_ps(lanes, mx);
    for (int u = 0; u < 8; u++) m = lanes[u] > m ? lanes[u] : m;
    return m;
}

/* Lanes [0, rem) of a vector, for a row's last partial vector (causal rows end anywhere). */
AF_TARGET static inline __m256i af_first_lanes(int64_t rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

AF_TARGET static float af_exp_row(float *restrict row, int64_t n, float shift) {
    __m256 sh = _mm256_set1_ps(shift), sum = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) {
        __m256 y = af_exp8(_mm256_sub_ps(_mm256_loadu_ps(row + c), sh));
        _mm256_storeu_ps(row + c, y);
        sum = _mm256_add_ps(sum, y);
    }
    if (c < n) { /* the other lanes as -inf: exp gives them 0 */
        __m256i in = af_first_lanes(n - c);
        __m256 x =
            _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(row + c, in), _mm256_castsi256_ps(in));
        __m256 y = af_exp8(_mm256_sub_ps(x, sh));
        _mm256_maskstore_ps(row + c, in, y);
        sum = _mm256_add_ps(sum, y);
    }
    float lanes[8], total = 0;
    _mm256_storeu_ps(lanes, sum);
    for (int u = 0; u < 8; u++) total += lanes[u];
    return total;
}

/* dscore_row_f32, 8 lanes at a time: p = exp(s - lse), ds = p (dp - delta). */
AF_TARGET static void af_dscore_row(float *restrict pr, float *restrict dr, int64_t n, float lse, float delta) {
    __m256 ls = _mm256_set1_ps(lse), d = _mm256_set1_ps(delta);
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) {
        __m256 p = af_exp8(_mm256_sub_ps(_mm256_loadu_ps(pr + c), ls));
        _mm256_storeu_ps(pr + c, p);
        _mm256_storeu_ps(dr + c, _mm256_mul_ps(p, _mm256_sub_ps(_mm256_loadu_ps(dr + c), d)));
    }
    if (c < n) {
        __m256i in = af_first_lanes(n - c);
        __m256 p = af_exp8(_mm256_sub_ps(_mm256_maskload_ps(pr + c, in), ls));
        _mm256_maskstore_ps(pr + c, in, p);
        _mm256_maskstore_ps(dr + c, in, _mm256_mul_ps(p, _mm256_sub_ps(_mm256_maskload_ps(dr + c, in), d)));
    }
}

#include "ops/cpu/attention_avx512.h"

/* The leaf kernels the drivers below call: AVX-512's where the CPU has it (and
 * tg_cpu_attention_set_avx512 has not turned them off), else AVX2's; chosen once per call
 * of the op, so that all its blocks take the same ones. */
typedef struct {
    void (*gemm)(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t ars, int64_t acs, const float *b,
                 int64_t ldb, int64_t bcs, float *c, int64_t ldc, bool acc, af_causal causal, int64_t diag);
    float (*row_max)(const float *row, int64_t n);
    float (*exp_row)(float *restrict row, int64_t n, float shift);
    void (*dscore_row)(float *restrict pr, float *restrict dr, int64_t n, float lse, float delta);
} af_kernels;
static const af_kernels af_kernels_avx2 = {af_gemm, af_row_max, af_exp_row, af_dscore_row};
static const af_kernels af_kernels_avx512 = {af512_gemm, af512_row_max, af512_exp_row, af512_dscore_row};
static _Atomic bool af_avx512_on = true;

static const af_kernels *af_kernels_here(void) {
    return atomic_load(&af_avx512_on) && __builtin_cpu_supports("avx512f") ? &af_kernels_avx512 : &af_kernels_avx2;
}

bool tg_cpu_attention_set_avx512(bool on) { return atomic_exchange(&af_avx512_on, on); }

typedef struct {
    const attn_job_f32 *j;
    const af_kernels *kn;
} af_fwd_job;

/* Forward of tasks (problem, query block of AF_BQ) in [begin, end). */
AF_TARGET static void af_forward_chunk(int64_t begin, int64_t end, void *ctx) {
    const af_fwd_job *w = ctx;
    const attn_job_f32 *j = w->j;
    const af_kernels *kn = w->kn;
    const tg_attn_plan *p = j->p;
    int64_t nq = (p->l + AF_BQ - 1) / AF_BQ, e = p->e, ev = p->ev;
    float *s = malloc(sizeof(float) * (AF_BQ * AF_BK + AF_BQ * ev + AF_BK * e) + 2 * sizeof(double) * AF_BQ);
    if (!s) return tg_kernel_fail("out of memory for the attention's score block");
    float *acc = s + AF_BQ * AF_BK, *kt = acc + AF_BQ * ev;
    double *m = (double *)(kt + AF_BK * e), *l = m + AF_BQ;
    af_causal scores = p->causal ? AF_SCORES : AF_DENSE, sum_keys = p->causal ? AF_SUM_KEYS : AF_DENSE;
    for (int64_t t = begin; t < end; t++) {
        int64_t b = t / nq, i0 = t % nq * AF_BQ, bi = p->l - i0 < AF_BQ ? p->l - i0 : AF_BQ;
        const float *q = j->q + j->off[b], *k = j->k + j->off[p->batch + b], *v = j->v + j->off[2 * p->batch + b];
        const void *mask = mask_of_f32(j, b);
        for (int64_t r = 0; r < bi; r++) m[r] = -INFINITY, l[r] = 0;
        for (int64_t x = 0; x < bi * ev; x++) acc[x] = 0;
        int64_t kend = keys_end_f32(p, i0, bi);
        for (int64_t j0 = 0; j0 < kend; j0 += AF_BK) {
            int64_t bj = kend - j0 < AF_BK ? kend - j0 : AF_BK;
            af_pack_t(k + j0 * p->k_row, p->k_row, bj, e, kt);
            kn->gemm(bi, af_pad16(bj), e, (float)p->scale, q + i0 * p->q_row, p->q_row, 1, kt, 16, 16 * e, s, AF_BK,
                     false, scores, i0 - j0);
            mask_block_f32(p, mask, i0, bi, j0, bj, s, AF_BK);
            online_rows_f32(p, i0, j0, s, AF_BK, bi, bj, m, l, acc, kn->row_max, kn->exp_row);
            kn->gemm(bi, ev, bj, 1.0f, s, AF_BK, 1, v + j0 * p->v_row, p->v_row, 16, acc, ev, true, sum_keys, i0 - j0);
        }
        finish_rows_f32(j, b, i0, bi, m, l, acc);
    }
    free(s);
}

typedef struct {
    const attn_job_f32 *j;
    const af_kernels *kn;
    int64_t parts;  /* G: key-block parts per problem */
    float *dq_part; /* parts 1 .. G-1, [G - 1][batch][l][e] (part 0 is dq itself) */
} af_bwd_job;

/* Backward of tasks (problem, part g) in [begin, end): per key block of the part, every
 * query block that sees it: S, P = exp(S - lse), dP = dO V^T, dS = P (dP - D), then
 * dV += P^T dO, dK += scale dS^T Q, dq_g += scale dS K. */
AF_TARGET static void af_backward_chunk(int64_t begin, int64_t end, void *ctx) {
    const af_bwd_job *w = ctx;
    const attn_job_f32 *j = w->j;
    const af_kernels *kn = w->kn;
    const tg_attn_plan *p = j->p;
    int64_t e = p->e, ev = p->ev, nk = (p->s + AF_BK - 1) / AF_BK;
    int64_t ld_o = tg_attn_out_row(p), ld_k = tg_attn_grad_row(p, e), ld_v = tg_attn_grad_row(p, ev);
    float *s = malloc(sizeof(float) * (2 * AF_BQ * AF_BK + AF_BK * (e + ev)));
    if (!s) return tg_kernel_fail("out of memory for the attention's score block");
    float *ds = s + AF_BQ * AF_BK, *kt = ds + AF_BQ * AF_BK, *vt = kt + AF_BK * e;
    af_causal scores = p->causal ? AF_SCORES : AF_DENSE, sum_keys = p->causal ? AF_SUM_KEYS : AF_DENSE,
              sum_queries = p->causal ? AF_SUM_QUERIES : AF_DENSE;
    for (int64_t t = begin; t < end; t++) {
        int64_t b = t / w->parts, g = t % w->parts;
        const float *q = j->q + j->off[b], *k = j->k + j->off[p->batch + b], *v = j->v + j->off[2 * p->batch + b];
        const void *mask = mask_of_f32(j, b);
        const float *dout = j->dout + tg_attn_result_start(p, b, p->l, ev, ld_o);
        int64_t ldq = g == 0 ? ld_k : e; /* part 0 is dq itself, the others are contiguous */
        float *dq = g == 0 ? j->dq + tg_attn_result_start(p, b, p->l, e, ld_k)
                           : w->dq_part + ((g - 1) * p->batch + b) * p->l * e;
        zero_rows_f32(dq, p->l, e, ldq);
        for (int64_t kb = g; kb < nk; kb += w->parts) {
            int64_t j0 = kb * AF_BK, bj = p->s - j0 < AF_BK ? p->s - j0 : AF_BK;
            float *dk = j->dk + tg_attn_result_start(p, b, p->s, e, ld_k) + j0 * ld_k;
            float *dv = j->dv + tg_attn_result_start(p, b, p->s, ev, ld_v) + j0 * ld_v;
            zero_rows_f32(dk, bj, e, ld_k);
            zero_rows_f32(dv, bj, ev, ld_v);
            af_pack_t(k + j0 * p->k_row, p->k_row, bj, e, kt);
            af_pack_t(v + j0 * p->v_row, p->v_row, bj, ev, vt);
            int64_t first = p->causal ? j0 / AF_BQ * AF_BQ : 0; /* query i sees key j only if i >= j */
            for (int64_t i0 = first; i0 < p->l; i0 += AF_BQ) {
                int64_t bi = p->l - i0 < AF_BQ ? p->l - i0 : AF_BQ, diag = i0 - j0;
                int64_t seen = p->causal ? tg_attn_causal_end(i0 + bi - 1, p->s) - j0 : bj; /* keys this block sees */
                seen = seen < bj ? seen : bj;
                if (seen <= 0) continue;
                const float *qi = q + i0 * p->q_row, *douti = dout + i0 * ld_o;
                kn->gemm(bi, af_pad16(seen), e, (float)p->scale, qi, p->q_row, 1, kt, 16, 16 * e, s, AF_BK, false,
                         scores, diag);
                mask_block_f32(p, mask, i0, bi, j0, seen, s, AF_BK);
                kn->gemm(bi, af_pad16(seen), ev, 1.0f, douti, ld_o, 1, vt, 16, 16 * ev, ds, AF_BK, false, scores, diag);
                for (int64_t r = 0; r < bi; r++) {
                    int64_t n = row_keys_f32(p, i0 + r, j0, seen);
                    kn->dscore_row(s + r * AF_BK, ds + r * AF_BK, n, j->lse[b * p->l + i0 + r],
                                   j->delta[b * p->l + i0 + r]);
                    for (int64_t c = n; c < seen; c++) s[r * AF_BK + c] = ds[r * AF_BK + c] = 0; /* hidden: p = 0 */
                }
                kn->gemm(seen, ev, bi, 1.0f, s, 1, AF_BK, douti, ld_o, 16, dv, ld_v, true, sum_queries, diag);
                kn->gemm(seen, e, bi, (float)p->scale, ds, 1, AF_BK, qi, p->q_row, 16, dk, ld_k, true, sum_queries,
                         diag);
                kn->gemm(bi, e, seen, (float)p->scale, ds, AF_BK, 1, k + j0 * p->k_row, p->k_row, 16, dq + i0 * ldq,
                         ldq, true, sum_keys, diag);
            }
        }
    }
    free(s);
}

/* dq += parts 1 .. G-1 in that order, rows [begin, end) of batch * l. */
static void af_sum_parts(int64_t begin, int64_t end, void *ctx) {
    const af_bwd_job *w = ctx;
    const tg_attn_plan *p = w->j->p;
    int64_t e = p->e, part = p->batch * p->l * e, ldq = tg_attn_grad_row(p, e);
    for (int64_t r = begin; r < end; r++) {
        float *dq = w->j->dq + tg_attn_result_start(p, r / p->l, p->l, e, ldq) + r % p->l * ldq;
        for (int64_t g = 1; g < w->parts; g++) {
            const float *src = w->dq_part + (g - 1) * part + r * e;
            for (int64_t x = 0; x < e; x++) dq[x] += src[x];
        }
    }
}

static bool af_usable(const tg_attn_plan *p) {
    return p->e % 8 == 0 && p->ev % 8 == 0 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static bool attn_fast_forward_f32(const attn_job_f32 *j) {
    if (!af_usable(j->p)) return false;
    int64_t tasks = j->p->batch * ((j->p->l + AF_BQ - 1) / AF_BQ);
    af_fwd_job w = {.j = j, .kn = af_kernels_here()};
    tg_parallel_for(tasks, grain_f32(j->p, tasks), af_forward_chunk, &w);
    return true;
}

/* After delta (the generic body computed it). */
static bool attn_fast_backward_f32(const attn_job_f32 *j) {
    const tg_attn_plan *p = j->p;
    if (!af_usable(p)) return false;
    int64_t nk = (p->s + AF_BK - 1) / AF_BK, parts = (AF_TASKS + p->batch - 1) / p->batch;
    af_bwd_job w = {.j = j, .kn = af_kernels_here(), .parts = parts < nk ? parts : nk};
    if (w.parts > 1) {
        w.dq_part = malloc(sizeof(float) * (size_t)((w.parts - 1) * p->batch * p->l * p->e));
        if (!w.dq_part) {
            tg_kernel_fail("out of memory for the attention's dq parts");
            return true;
        }
    }
    int64_t tasks = p->batch * w.parts;
    tg_parallel_for(tasks, grain_f32(p, tasks), af_backward_chunk, &w);
    if (w.parts > 1) {
        int64_t rows = p->batch * p->l;
        tg_parallel_for(rows, rows * p->e >= 32768 ? 1 : rows, af_sum_parts, &w);
    }
    free(w.dq_part);
    return true;
}

#else
bool tg_cpu_attention_set_avx512(bool on) { return (void)on, false; }
static bool attn_fast_forward_f32(const attn_job_f32 *j) { return false; }
static bool attn_fast_backward_f32(const attn_job_f32 *j) { return false; }
#endif
