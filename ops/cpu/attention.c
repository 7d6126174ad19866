/* The fused attention's CPU kernels, float32 and float64 (ops/cpu/attention.h): one
 * body, ops/cpu/attention_kernel.h, included once per element type. */
#include "ops/cpu/attention.h"

/* The selects of attn_expf (clamps, -inf -> 0) are if-converted, so its loops vectorise,
 * only when floating-point compares may not trap: the library never reads FP exception
 * flags. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/parallel.h"
#include "ops/cpu/gemm.h"

/* e^x for the float32 kernel, written so that GCC vectorises the loops that call it
 * (libm's expf is one call per element, and the score blocks' exponentials were a third
 * of the fused op's time). Cephes' expf: x = n ln2 + r with ln2 in two parts, e^r by a
 * degree-6 polynomial, 2^n put into the exponent bits; within 2 ulp of expf. Below
 * ln(FLT_MIN) it gives 0, so -inf (a masked score) gives exactly 0; NaN stays NaN. */
static inline float attn_expf(float x) {
    float xc = x > 88.3762626647949f ? 88.3762626647949f : x;
    xc = xc < -87.3365478515625f ? -87.3365478515625f : xc;
    float t = xc * 1.44269504088896341f;
    int32_t n = (int32_t)(t + (t >= 0 ? 0.5f : -0.5f));
    float fn = (float)n, r = xc - fn * 0.693359375f - fn * -2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } two_n = {.i = (n + 127) << 23};
    return x < -87.3365478515625f ? 0.0f : y * two_n.f;
}

/* float32 takes ops/cpu/attention_avx2.h's kernels where the CPU has AVX2 and FMA (they
 * return false otherwise, and the generic body runs). */
struct attn_job_s_f32;
static bool attn_fast_forward_f32(const struct attn_job_s_f32 *j);
static bool attn_fast_backward_f32(const struct attn_job_s_f32 *j);

#define ATT_T float
#define ATT_SFX f32
#define ATT_GEMM tg_gemm_f32
#define ATT_EXP attn_expf
#define ATT_FAST_FORWARD attn_fast_forward_f32
#define ATT_FAST_BACKWARD attn_fast_backward_f32
#include "ops/cpu/attention_kernel.h"
#include "ops/cpu/attention_avx2.h"
#undef ATT_T
#undef ATT_SFX
#undef ATT_GEMM
#undef ATT_EXP
#undef ATT_FAST_FORWARD
#undef ATT_FAST_BACKWARD

#define ATT_T double
#define ATT_SFX f64
#define ATT_GEMM tg_gemm_f64
#define ATT_EXP exp
#define ATT_FAST_FORWARD(j) false
#define ATT_FAST_BACKWARD(j) false
#include "ops/cpu/attention_kernel.h"
#undef ATT_T
#undef ATT_SFX
#undef ATT_GEMM
#undef ATT_EXP
#undef ATT_FAST_FORWARD
#undef ATT_FAST_BACKWARD
