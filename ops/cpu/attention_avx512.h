/* The float32 fused attention's leaf kernels on 16 lanes, for CPUs with AVX-512F
 * (included once by ops/cpu/attention_avx2.h, whose drivers take them through its kernel
 * table when the CPU has AVX-512). Each is the AVX2 kernel of the same name without the
 * 512 on twice the lanes, in the same operations, so an element's exp, product and
 * score are the same bits on either path; only the sums across lanes (a row's sum of
 * exponentials) are added in another order. The block products' tiles are 6 rows x 32
 * columns (two 16-column chunks of B, the second masked when the product is narrower),
 * 12 of the 32 zmm as accumulators, which halves the instructions per multiply-add of the
 * AVX2 tile of 6 x 16. */
#define AF512_TARGET __attribute__((target("avx512f")))

/* af_exp8 on 16 lanes. */
AF512_TARGET static inline __m512 af512_exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.3365478515625f);
    __m512 xc = _mm512_max_ps(lo, _mm512_min_ps(_mm512_set1_ps(88.3762626647949f), x));
    __m512 fn = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 r2 = _mm512_mul_ps(r, r), r4 = _mm512_mul_ps(r2, r2);
    __m512 p01 = _mm512_fmadd_ps(_mm512_set1_ps(1.6666665459e-1f), r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 p23 = _mm512_fmadd_ps(_mm512_set1_ps(8.3334519073e-3f), r, _mm512_set1_ps(4.1665795894e-2f));
    __m512 p45 = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), r, _mm512_set1_ps(1.3981999507e-3f));
    __m512 poly = _mm512_fmadd_ps(p45, r4, _mm512_fmadd_ps(p23, r2, p01));
    __m512 y = _mm512_add_ps(_mm512_fmadd_ps(poly, r2, r), _mm512_set1_ps(1.0f));
    __m512i n = _mm512_cvtps_epi32(fn);
    __m512 two_n = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
    __mmask16 below = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    return _mm512_maskz_mov_ps((__mmask16)~below, _mm512_mul_ps(y, two_n));
}

/* Lanes [0, rem) of a vector, rem < 16. */
static inline __mmask16 af512_first_lanes(int64_t rem) { return (__mmask16)((1u << rem) - 1); }

AF512_TARGET static float af512_row_max(const float *row, int64_t n) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) mx = _mm512_max_ps(_mm512_loadu_ps(row + c), mx);
    float lanes[16], m = row_max_f32(row + c, n - c);
    _mm512_storeu_ps(lanes, mx);
    for (int u = 0; u < 16; u++) m = lanes[u] > m ? lanes[u] : m;
    return m;
}

AF512_TARGET static float af512_exp_row(float *restrict row, int64_t n, float shift) {
    __m512 sh = _mm512_set1_ps(shift), sum = _mm512_setzero_ps();
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) {
        __m512 y = af512_exp16(_mm512_sub_ps(_mm512_loadu_ps(row + c), sh));
        _mm512_storeu_ps(row + c, y);
        sum = _mm512_add_ps(sum, y);
    }
    if (c < n) { /* the other lanes as -inf: exp gives them 0 */
        __mmask16 in = af512_first_lanes(n - c);
        __m512 y = af512_exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), in, row + c), sh));
        _mm512_mask_storeu_ps(row + c, in, y);
        sum = _mm512_add_ps(sum, y);
    }
    float lanes[16], total = 0;
    _mm512_storeu_ps(lanes, sum);
    for (int u = 0; u < 16; u++) total += lanes[u];
    return total;
}

AF512_TARGET static void af512_dscore_row(float *restrict pr, float *restrict dr, int64_t n, float lse, float delta) {
    __m512 ls = _mm512_set1_ps(lse), d = _mm512_set1_ps(delta);
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) {
        __m512 p = af512_exp16(_mm512_sub_ps(_mm512_loadu_ps(pr + c), ls));
        _mm512_storeu_ps(pr + c, p);
        _mm512_storeu_ps(dr + c, _mm512_mul_ps(p, _mm512_sub_ps(_mm512_loadu_ps(dr + c), d)));
    }
    if (c < n) {
        __mmask16 in = af512_first_lanes(n - c);
        __m512 p = af512_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(in, pr + c), ls));
        _mm512_mask_storeu_ps(pr + c, in, p);
        _mm512_mask_storeu_ps(dr + c, in, _mm512_mul_ps(p, _mm512_sub_ps(_mm512_maskz_loadu_ps(in, dr + c), d)));
    }
}

/* One row of a tile: c0 (c1) += a * b0 (b1). */
AF512_TARGET __attribute__((always_inline)) static inline void af512_fma_row(const float *a, __m512 b0, __m512 b1,
                                                                             int nv, __m512 *c0, __m512 *c1) {
    __m512 x = _mm512_set1_ps(*a);
    *c0 = _mm512_fmadd_ps(x, b0, *c0);
    if (nv > 1) *c1 = _mm512_fmadd_ps(x, b1, *c1);
}

/* One row of a tile out: c (+)= alpha * (c0, c1), the last chunk's lanes `last`. */
AF512_TARGET __attribute__((always_inline)) static inline void af512_store_row(float *c, __m512 c0, __m512 c1, int nv,
                                                                               __mmask16 last, __m512 alpha, bool acc) {
    __mmask16 m0 = nv > 1 ? (__mmask16)0xffff : last;
    __m512 y0 = _mm512_mul_ps(alpha, c0), y1 = _mm512_mul_ps(alpha, c1);
    _mm512_mask_storeu_ps(c, m0, acc ? _mm512_add_ps(_mm512_maskz_loadu_ps(m0, c), y0) : y0);
    if (nv > 1) _mm512_mask_storeu_ps(c + 16, last, acc ? _mm512_add_ps(_mm512_maskz_loadu_ps(last, c + 16), y1) : y1);
}

/* c[r][0 .. 16 (nv - 1) + lanes of last) (+)= alpha * sum_t a[r ars + t acs] b[..] for
 * r < rows, B's two chunks at b and b + bcs (rows ldb apart): af_tile's 6 x 16 on
 * 6 x 32. */
AF512_TARGET __attribute__((always_inline)) static inline void
af512_tile(int rows, int nv, __mmask16 last, int64_t k, const float *a, int64_t ars, int64_t acs, const float *b,
           int64_t ldb, int64_t bcs, float *c, int64_t ldc, float alpha, bool acc) {
    __m512 z = _mm512_setzero_ps(), c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z,
           c41 = z, c50 = z, c51 = z;
    __mmask16 m0 = nv > 1 ? (__mmask16)0xffff : last;
    for (int64_t t = 0; t < k; t++, a += acs, b += ldb) {
        __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = nv > 1 ? _mm512_maskz_loadu_ps(last, b + bcs) : z;
        af512_fma_row(a, b0, b1, nv, &c00, &c01);
        if (rows > 1) af512_fma_row(a + ars, b0, b1, nv, &c10, &c11);
        if (rows > 2) af512_fma_row(a + 2 * ars, b0, b1, nv, &c20, &c21);
        if (rows > 3) af512_fma_row(a + 3 * ars, b0, b1, nv, &c30, &c31);
        if (rows > 4) af512_fma_row(a + 4 * ars, b0, b1, nv, &c40, &c41);
        if (rows > 5) af512_fma_row(a + 5 * ars, b0, b1, nv, &c50, &c51);
    }
    __m512 al = _mm512_set1_ps(alpha);
    af512_store_row(c, c00, c01, nv, last, al, acc);
    if (rows > 1) af512_store_row(c + ldc, c10, c11, nv, last, al, acc);
    if (rows > 2) af512_store_row(c + 2 * ldc, c20, c21, nv, last, al, acc);
    if (rows > 3) af512_store_row(c + 3 * ldc, c30, c31, nv, last, al, acc);
    if (rows > 4) af512_store_row(c + 4 * ldc, c40, c41, nv, last, al, acc);
    if (rows > 5) af512_store_row(c + 5 * ldc, c50, c51, nv, last, al, acc);
}

/* af512_tile with rows and nv as constants, so that each variant keeps its tile in registers. */
AF512_TARGET static void af512_tile_any(int rows, int nv, __mmask16 last, int64_t k, const float *a, int64_t ars,
                                        int64_t acs, const float *b, int64_t ldb, int64_t bcs, float *c, int64_t ldc,
                                        float alpha, bool acc) {
#define AF512_CASE(R)                                                                         \
    case R:                                                                                   \
        if (nv == 2) af512_tile(R, 2, last, k, a, ars, acs, b, ldb, bcs, c, ldc, alpha, acc); \
        else af512_tile(R, 1, last, k, a, ars, acs, b, ldb, bcs, c, ldc, alpha, acc);         \
        break;
    switch (rows) { AF512_CASE(1) AF512_CASE(2) AF512_CASE(3) AF512_CASE(4) AF512_CASE(5) AF512_CASE(6) }
#undef AF512_CASE
}

/* af_gemm on af512_tile's 6 x 32 tiles (the same arguments and contract). */
AF512_TARGET static void af512_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t ars,
                                    int64_t acs, const float *b, int64_t ldb, int64_t bcs, float *c, int64_t ldc,
                                    bool acc, af_causal causal, int64_t diag) {
    for (int64_t n0 = 0; n0 < n; n0 += 32) {
        int64_t width = n - n0 < 32 ? n - n0 : 32;
        int nv = width > 16 ? 2 : 1;
        __mmask16 last = width - 16 * (nv - 1) == 16 ? (__mmask16)0xffff : af512_first_lanes(width - 16 * (nv - 1));
        for (int64_t r0 = 0; r0 < m; r0 += AF_MR) {
            int rows = m - r0 < AF_MR ? (int)(m - r0) : AF_MR;
            int64_t t0, t1;
            af_tile_terms(causal, r0, rows, n0, k, diag, &t0, &t1);
            if (t1 <= t0) {
                if (acc) continue;
                t0 = t1 = 0; /* stores zeros */
            }
            af512_tile_any(rows, nv, last, t1 - t0, a + r0 * ars + t0 * acs, ars, acs, b + n0 / 16 * bcs + t0 * ldb,
                           ldb, bcs, c + r0 * ldc + n0, ldc, alpha, acc);
        }
    }
}
