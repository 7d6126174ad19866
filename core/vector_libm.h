/* float exp and tanh as straight-line arithmetic that the compiler vectorizes (internal):
 * glibc's expf and tanhf are calls, one element at a time, so an activation written with
 * them ran at one element per call (GELU's tanh approximation: 9 ns an element on two
 * threads, 40% of the GPT lesson's step). core/typed_libm.h's TG_TANH is tg_vtanhf for a
 * float on the CPU; CUDA keeps its own tanhf.
 *
 * Accuracy (swept over every float in [-103.9, 88.7] and [-20, 20] against the double
 * functions; tests/core/vector_libm_test.cc checks a sample): tg_vexpf within 1.01 ulp of exp,
 * tg_vtanhf within 2.5 ulp of tanh (glibc's are within 1 and 2; PyTorch's vectorized CPU
 * kernels use SLEEF's, within 1). NaN in, NaN out; exp overflows to inf above 88.72 and
 * underflows to 0 below -103.97 (subnormal results between); tanh keeps the sign of zero
 * and reaches +-1 near |x| = 9. */
#ifndef TG_CORE_VECTOR_LIBM_H
#define TG_CORE_VECTOR_LIBM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* 2^n for an integer n in [-126, 127], built from its exponent bits. */
static inline float tg_vlibm_pow2i(int32_t n) {
    uint32_t bits = (uint32_t)(n + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* c ? a : b as bit operations: both sides are computed anyway, and a select the compiler
 * sees as a branch it will not vectorize (it may not speculate a division that can trap). */
static inline float tg_vlibm_pick(int c, float a, float b) {
    uint32_t ab, bb, m = (uint32_t)0 - (uint32_t)(c != 0);
    memcpy(&ab, &a, sizeof ab);
    memcpy(&bb, &b, sizeof bb);
    uint32_t rb = (ab & m) | (bb & ~m);
    float r;
    memcpy(&r, &rb, sizeof r);
    return r;
}

/* e^r on |r| <= ln2 / 2 by Cephes's expf polynomial, evaluated by Estrin's scheme: the
 * loops around it are bound by the latency of one element's chain (Horner's six dependent
 * steps were a third of tanh's), and the pairs below are independent. */
static inline float tg_vlibm_exp_reduced(float r) {
    float r2 = r * r, r4 = r2 * r2;
    float p01 = 1.6666665459e-1f * r + 5.0000001201e-1f;
    float p23 = 8.3334519073e-3f * r + 4.1665795894e-2f;
    float p45 = 1.9875691500e-4f * r + 1.3981999507e-3f;
    float p = (p45 * r4 + p23 * r2) + p01;
    return p * r2 + r + 1.0f;
}

/* x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, Cody and Waite; n rounded to
 * nearest); returns r. */
static inline float tg_vlibm_exp_split(float x, float *n) {
    *n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - *n * 0.693359375f;
    return r - *n * -2.12194440e-4f;
}

/* exp(x): e^r times 2^n, applied as two halves so that the subnormal results (n down to
 * -150) need no special case. */
static inline float tg_vexpf(float x) {
    float xc = x > 88.7228394f ? 88.7228394f : x; /* comparisons, so a NaN passes through */
    xc = xc < -103.972084f ? -103.972084f : xc;
    float n, p = tg_vlibm_exp_reduced(tg_vlibm_exp_split(xc, &n));
    int32_t ni = (int32_t)tg_vlibm_pick(xc == xc, n, 0.0f), n1 = ni / 2;
    float y = p * tg_vlibm_pow2i(n1) * tg_vlibm_pow2i(ni - n1);
    return tg_vlibm_pick(x > 88.7228394f, INFINITY, tg_vlibm_pick(x < -103.972084f, 0.0f, y));
}

/* tanh(x): the odd Taylor series to x^11 below |x| = 0.3 (where 1 - 2 / (e^2|x| + 1) would
 * cancel), that expression above, with x's sign. e^2|x| needs neither tg_vexpf's lower
 * clamp nor its split scaling (n <= 128 after the clamp at 44; tanh is 1 from 9 on). */
static inline float tg_vtanhf(float x) {
    float a = fabsf(x), z = x * x;
    float p = -1382.0f / 155925.0f;
    p = p * z + 62.0f / 2835.0f;
    p = p * z + -17.0f / 315.0f;
    p = p * z + 2.0f / 15.0f;
    p = p * z + -1.0f / 3.0f;
    float small = copysignf(x + x * z * p, x); /* -0 + 0 would be +0 */
    float twice = a > 44.0f ? 88.0f : 2.0f * a, n, e = tg_vlibm_exp_reduced(tg_vlibm_exp_split(twice, &n));
    float big = copysignf(1.0f - 2.0f / (e * tg_vlibm_pow2i((int32_t)tg_vlibm_pick(a == a, n, 0.0f)) + 1.0f), x);
    return tg_vlibm_pick(a < 0.3f, small, big);
}

#endif
