/* The Box-Muller step of ATen's float32 normal_fill (ops/cpu/random_normal_f32.h). */
#include "ops/cpu/random_normal_f32.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* ATen's float normals (normal_fill_16_AVX2) take log and sincos from avx_mathfun.h:
 * Cephes' single-precision polynomials, not libm. These are the same computations in
 * scalar form, with the same constants and order and a fused multiply-add wherever
 * GCC fuses one when it builds ATen's AVX2 kernels (-mfma), so that the normals are
 * PyTorch's to the last bit. Arguments: log's in (0, 1], sincos's in [0, 2 pi). */
static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline __attribute__((always_inline)) float cephes_logf(float x) {
    /* x = m 2^e with m in [0.5, 1); below sqrt(1/2), m doubles and e drops */
    float e = (float)((int32_t)(f32_bits(x) >> 23) - 0x7f) + 1.0f;
    x = f32_from_bits((f32_bits(x) & ~0x7f800000u) | f32_bits(0.5f));
    if (x < 0.707106781186547524f) {
        e -= 1.0f;
        x = (x - 1.0f) + x;
    } else {
        x = x - 1.0f;
    }
    static const float p[9] = {7.0376836292E-2f,  -1.1514610310E-1f, 1.1676998740E-1f,
                               -1.2420140846E-1f, 1.4249322787E-1f,  -1.6668057665E-1f,
                               2.0000714765E-1f,  -2.4999993993E-1f, 3.3333331174E-1f};
    float z = x * x, y = p[0];
    for (int i = 1; i < 9; i++) y = fmaf(y, x, p[i]);
    y = fmaf(y * x, z, e * -2.12194440e-4f);
    y = fmaf(-z, 0.5f, y);
    return fmaf(e, 0.693359375f, x + y);
}

static inline __attribute__((always_inline)) void cephes_sincosf(float x, float *sin_x, float *cos_x) {
    /* x >= 0 here. j: the octant rounded up to even; x reduced by j pi/4 in three parts */
    int32_t j = ((int32_t)(x * 1.27323954473516f) + 1) & ~1;
    float y = (float)j;
    x = fmaf(y, -0.78515625f, x);
    x = fmaf(y, -2.4187564849853515625e-4f, x);
    x = fmaf(y, -3.77489497744594108e-8f, x);
    float z = x * x;
    float c = fmaf(fmaf(2.443315711809948E-005f, z, -1.388731625493765E-003f), z, 4.166664568298827E-002f);
    c = fmaf(c * z, z, -(z * 0.5f)) + 1.0f;
    float s = fmaf(fmaf(-1.9515295891E-4f, z, 8.3321608736E-3f), z, -1.6666654611E-1f);
    s = fmaf(s * z, x, x);
    bool swap = j & 2; /* the sine polynomial serves the cosine, and back */
    uint32_t sin_sign = (uint32_t)(j & 4) << 29, cos_sign = (uint32_t)(~(j - 2) & 4) << 29;
    *sin_x = f32_from_bits(f32_bits(swap ? c : s) ^ sin_sign);
    *cos_x = f32_from_bits(f32_bits(swap ? s : c) ^ cos_sign);
}

/* normal_fill_16: d[0..15] hold uniforms; pairs (j, j + 8) become two normals. */
static inline __attribute__((always_inline)) void normal_16_f32(float *d, float mean, float std) {
    for (int j = 0; j < 8; j++) {
        float radius = sqrtf(-2.0f * cephes_logf(1.0f - d[j])), s, c;
        cephes_sincosf((float)(2.0 * M_PI) * d[j + 8], &s, &c);
        d[j] = fmaf(radius * c, std, mean);
        d[j + 8] = fmaf(radius * s, std, mean);
    }
}

/* `blocks` blocks of 16. */
WITH_FMA_CLONE static void normal_blocks_f32(float *d, int64_t blocks, float mean, float std) {
    for (int64_t b = 0; b < blocks; b++) normal_16_f32(d + 16 * b, mean, std);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

/* normal_blocks_f32 eight pairs at a time: the same operations on AVX2 vectors (the
 * scalar code above is the reference; tests/ops/random_test.cc checks both against
 * PyTorch on a machine with AVX2, this one). */
#define SET1 _mm256_set1_ps
__attribute__((target("avx2,fma"))) static void normal_blocks_f32_avx2(float *d, int64_t blocks, float mean,
                                                                       float std) {
    static const float p[9] = {7.0376836292E-2f,  -1.1514610310E-1f, 1.1676998740E-1f,
                               -1.2420140846E-1f, 1.4249322787E-1f,  -1.6668057665E-1f,
                               2.0000714765E-1f,  -2.4999993993E-1f, 3.3333331174E-1f};
    const __m256 one = SET1(1.0f), half = SET1(0.5f);
    const __m256i two = _mm256_set1_epi32(2), four = _mm256_set1_epi32(4);
    for (int64_t b = 0; b < blocks; b++, d += 16) {
        /* radius = sqrt(-2 log(1 - u)), cephes_logf */
        __m256 u = _mm256_sub_ps(one, _mm256_loadu_ps(d));
        __m256i exponent = _mm256_sub_epi32(_mm256_srli_epi32(_mm256_castps_si256(u), 23), _mm256_set1_epi32(0x7f));
        __m256 e = _mm256_add_ps(_mm256_cvtepi32_ps(exponent), one);
        __m256 x = _mm256_or_ps(_mm256_and_ps(u, _mm256_castsi256_ps(_mm256_set1_epi32(~0x7f800000))), half);
        __m256 small = _mm256_cmp_ps(x, SET1(0.707106781186547524f), _CMP_LT_OQ);
        e = _mm256_sub_ps(e, _mm256_and_ps(one, small));
        x = _mm256_add_ps(_mm256_sub_ps(x, one), _mm256_and_ps(x, small));
        __m256 z = _mm256_mul_ps(x, x), y = SET1(p[0]);
        for (int i = 1; i < 9; i++) y = _mm256_fmadd_ps(y, x, SET1(p[i]));
        y = _mm256_fmadd_ps(_mm256_mul_ps(y, x), z, _mm256_mul_ps(e, SET1(-2.12194440e-4f)));
        y = _mm256_fnmadd_ps(z, half, y);
        __m256 log_u = _mm256_fmadd_ps(e, SET1(0.693359375f), _mm256_add_ps(x, y));
        __m256 radius = _mm256_sqrt_ps(_mm256_mul_ps(SET1(-2.0f), log_u));
        /* sin and cos of 2 pi u2, cephes_sincosf */
        __m256 t = _mm256_mul_ps(SET1((float)(2.0 * M_PI)), _mm256_loadu_ps(d + 8));
        __m256i j = _mm256_cvttps_epi32(_mm256_mul_ps(t, SET1(1.27323954473516f)));
        j = _mm256_and_si256(_mm256_add_epi32(j, _mm256_set1_epi32(1)), _mm256_set1_epi32(~1));
        __m256 jf = _mm256_cvtepi32_ps(j);
        t = _mm256_fmadd_ps(jf, SET1(-0.78515625f), t);
        t = _mm256_fmadd_ps(jf, SET1(-2.4187564849853515625e-4f), t);
        t = _mm256_fmadd_ps(jf, SET1(-3.77489497744594108e-8f), t);
        z = _mm256_mul_ps(t, t);
        __m256 c = _mm256_fmadd_ps(_mm256_fmadd_ps(SET1(2.443315711809948E-005f), z, SET1(-1.388731625493765E-003f)), z,
                                   SET1(4.166664568298827E-002f));
        c = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(c, z), z, _mm256_mul_ps(z, SET1(-0.5f))), one);
        __m256 s = _mm256_fmadd_ps(_mm256_fmadd_ps(SET1(-1.9515295891E-4f), z, SET1(8.3321608736E-3f)), z,
                                   SET1(-1.6666654611E-1f));
        s = _mm256_fmadd_ps(_mm256_mul_ps(s, z), t, t);
        __m256 swap = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(j, two), two));
        __m256 sin_sign = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(j, four), 29));
        __m256 cos_sign =
            _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_andnot_si256(_mm256_sub_epi32(j, two), four), 29));
        __m256 sin_t = _mm256_xor_ps(_mm256_blendv_ps(s, c, swap), sin_sign);
        __m256 cos_t = _mm256_xor_ps(_mm256_blendv_ps(c, s, swap), cos_sign);
        _mm256_storeu_ps(d, _mm256_fmadd_ps(_mm256_mul_ps(radius, cos_t), SET1(std), SET1(mean)));
        _mm256_storeu_ps(d + 8, _mm256_fmadd_ps(_mm256_mul_ps(radius, sin_t), SET1(std), SET1(mean)));
    }
}
#undef SET1
#endif

void tg_normal_blocks_f32(float *d, int64_t blocks, float mean, float std) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        normal_blocks_f32_avx2(d, blocks, mean, std);
        return;
    }
#endif
    normal_blocks_f32(d, blocks, mean, std);
}
