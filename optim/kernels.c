/* Fused CPU optimizer updates (see optim/kernels.h): the loops of
 * optim/update_kernels.h for float32 and float64, and Adam's exact-subnormal blocks. */
#include "optim/kernels.h"

#include <math.h>
#include <stddef.h>

#include "core/denormal_bits.h"
#include "core/parallel.h"
#include "core/simd.h"
#include "optim/unscale_formula.h"

/* Each rule is a serial loop over elements (*_range); tg_optim_kernel_* runs it on blocks
 * of BLOCK elements of all the tensors at once, in parallel when there are more than
 * PARALLEL_MIN elements in all (fewer do not pay for the threads). */
#define BLOCK 16384
#define PARALLEL_MIN 32768
#define OFF(p, lo) ((p) ? (p) + (lo) : NULL) /* optional state tensors may be NULL */

/* x / c correctly rounded, for a divisor fixed over a loop (Adam's bias correction), where
 * y = 1 / c correctly rounded: q = x y is within an ulp of x / c, the remainder x - q c is
 * exact as one FMA, and q + r y rounded is then the correctly rounded quotient
 * (Markstein's theorem, IBM J. Res. Dev. 34(1), 1990), so the same bits as the division at
 * a fraction of its cost: the divider was what bound Adam's loop. Exact as long as r does
 * not underflow, which holds for the square roots of float32/float64 values passed here
 * (x = 0 or x >= 2^-75). An infinite x keeps the quotient x y (the remainder would be NaN).
 * tests/optim/optim_fused_test.cc checks Adam through it against the division, bit for bit,
 * over every binade and the special values; before it was adopted it matched the float32
 * division over all 2^23 significands for 1400 divisors. */
#define DIV_FIXED(T, SUFFIX, FMA)                         \
    static inline T div_fixed_##SUFFIX(T x, T c, T y) {   \
        T q = x * y;                                      \
        T r = FMA(-q, c, x);                              \
        T corrected = FMA(r, y, q);                       \
        return q - q == 0 ? corrected : q; /* q finite */ \
    }
DIV_FIXED(float, f32, __builtin_fmaf)
DIV_FIXED(double, f64, __builtin_fma)

/* Whether div_fixed is used: it needs an FMA instruction (else each FMA is a libm call). */
static bool fixed_division_by_fma(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("fma");
#elif defined(__FP_FAST_FMA) || defined(__aarch64__)
    return true;
#else
    return false;
#endif
}

#define T float
#define NAME(f) f##_f32
#include "optim/update_kernels.h"

#define T double
#define NAME(f) f##_f64
#include "optim/update_kernels.h"

static void adam_common_any_f64(double *param, const double *grad, double *m, double *v, int64_t n, tg_adam_args a) {
    adam_common_f64(param, grad, m, v, n, a);
}

/* Adam's float32 step where IEEE subnormals are kept (the default). x86 takes a microcode
 * assist of ~100x an instruction's time for a vector instruction that reads or makes a
 * float32 subnormal (39 ns against 0.4 for a multiply, on this project's AMX Xeon). The
 * exp_avg of a weight whose gradient stays zero decays into them (0.9 a step): the MLP
 * tutorial's Adam took 0.85 ms a step over its first epoch, 0.43 flushed. So, with
 * AVX-512, a block of 16 elements whose exp_avg holds a nonzero value under 2^-90 (where
 * its products with beta1 and the step size come near the subnormals) computes what
 * exp_avg touches in double, each operation rounded to float32 as it would be: a double
 * result rounded to float is the correctly rounded float result of + - * / and sqrt of
 * float operands (53 >= 2 * 24 + 2 bits, subnormal results included: S. Figueroa, "When is
 * double rounding innocuous?", SIGNUM 30(3), 1995), and such doubles are normal numbers
 * whose conversions take no assist: the same bits at normal speed. Intrinsics, because GCC
 * turns double operations rounded to float back into float ones (by the same theorem).
 * The other blocks run adam_common_f32's loop, in runs. Only exp_avg is looked at (reading
 * one more array to decide costs 5% of the loop, four 50%): a tiny gradient or exp_avg_sq
 * elsewhere is rare and gets the same bits from the loop, assists and all. With FTZ/DAZ
 * set, or without AVX-512, the loop alone. */
static bool adam_exact_blocks = true; /* tests compare both forms: tg_optim_adam_set_exact_blocks */

bool tg_optim_adam_set_exact_blocks(bool on) {
    bool was = adam_exact_blocks;
    adam_exact_blocks = on;
    return was;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define EXACT_TARGET __attribute__((target("avx512f,avx512dq")))

/* Lanes whose |x| is nonzero and below 2^e. */
EXACT_TARGET static inline __mmask16 tiny_lanes(__m512 x, int e) {
    __m512i bits = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF));
    return _mm512_cmplt_epu32_mask(_mm512_sub_epi32(bits, _mm512_set1_epi32(1)),
                                   _mm512_set1_epi32(((e + 127) << 23) - 1));
}

typedef struct {
    __m512 b2, one_b2, bc2_sqrt, inv_bc2_sqrt, eps;
    __m512d decay, b1, one_b1, neg_step_size;
} exact_consts;

/* Rounded to float32 and widened back. */
EXACT_TARGET static inline __m512d rnd(__m512d x) { return _mm512_cvtps_pd(_mm512_cvtpd_ps(x)); }

/* Half h of 16 float32 lanes, widened. */
EXACT_TARGET static inline __m512d wide(__m512 x, int h) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), h)));
}

/* adam_common_f32's statements for the lanes k of 16 elements. exp_avg_sq and the
 * denominator in float32, the vector loop's own operations (they are not near the
 * subnormals here unless the gradient is: then with assists, and the same bits); what
 * exp_avg touches in double, each result rounded to float32. */
EXACT_TARGET static inline void adam_exact16(float *param, const float *grad, float *m, float *v, __mmask16 k,
                                             const exact_consts *c) {
    __m512 g = _mm512_maskz_loadu_ps(k, grad);
    __m512 vi =
        _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, v), c->b2), _mm512_mul_ps(_mm512_mul_ps(c->one_b2, g), g));
    _mm512_mask_storeu_ps(v, k, vi);
    __m512 root = _mm512_sqrt_ps(vi), q = _mm512_mul_ps(root, c->inv_bc2_sqrt); /* div_fixed */
    __m512 r = _mm512_fnmadd_ps(q, c->bc2_sqrt, root);
    __mmask16 finite = _mm512_cmp_ps_mask(_mm512_sub_ps(q, q), _mm512_setzero_ps(), _CMP_EQ_OQ);
    __m512 denom = _mm512_add_ps(_mm512_mask3_fmadd_ps(r, c->inv_bc2_sqrt, q, finite), c->eps);
    __m512 m16 = _mm512_maskz_loadu_ps(k, m), p16 = _mm512_maskz_loadu_ps(k, param);
    __m256 m_out[2], p_out[2];
    for (int h = 0; h < 2; h++) {
        __m512d gd = wide(g, h), p = rnd(_mm512_mul_pd(wide(p16, h), c->decay));
        __m512d mi = rnd(_mm512_add_pd(rnd(_mm512_mul_pd(wide(m16, h), c->b1)), rnd(_mm512_mul_pd(c->one_b1, gd))));
        __m512d step = rnd(_mm512_div_pd(rnd(_mm512_mul_pd(c->neg_step_size, mi)), wide(denom, h)));
        m_out[h] = _mm512_cvtpd_ps(mi);
        p_out[h] = _mm512_cvtpd_ps(_mm512_add_pd(p, step));
    }
    _mm512_mask_storeu_ps(m, k, _mm512_insertf32x8(_mm512_castps256_ps512(m_out[0]), m_out[1], 1));
    _mm512_mask_storeu_ps(param, k, _mm512_insertf32x8(_mm512_castps256_ps512(p_out[0]), p_out[1], 1));
}

enum { EXACT_BLOCK = 16, CLEAN_RUN = 512 /* clean elements gathered before the vector loop runs them (L1) */ };

EXACT_TARGET static void adam_common_exact_f32(float *param, const float *grad, float *m, float *v, int64_t n,
                                               tg_adam_args a) {
    const float bc2_sqrt = (float)a.bias_correction2_sqrt;
    exact_consts c = {
        .b2 = _mm512_set1_ps((float)a.beta2),
        .one_b2 = _mm512_set1_ps((float)(1 - a.beta2)),
        .bc2_sqrt = _mm512_set1_ps(bc2_sqrt),
        .inv_bc2_sqrt = _mm512_set1_ps(1.0f / bc2_sqrt),
        .eps = _mm512_set1_ps((float)a.eps),
        .decay = _mm512_set1_pd((float)(1 - a.lr * a.weight_decay)),
        .b1 = _mm512_set1_pd((float)a.beta1),
        .one_b1 = _mm512_set1_pd((float)(1 - a.beta1)),
        .neg_step_size = _mm512_set1_pd((float)(-(a.lr / a.bias_correction1))),
    };
    int64_t clean = 0; /* the start of the clean run not yet updated */
    for (int64_t i = 0; i < n; i += EXACT_BLOCK) {
        int64_t len = n - i < EXACT_BLOCK ? n - i : EXACT_BLOCK;
        __mmask16 k = len == EXACT_BLOCK ? 0xFFFF : (__mmask16)((1u << len) - 1);
        __mmask16 tiny = tiny_lanes(_mm512_maskz_loadu_ps(k, m + i), -90);
        if (!tiny && i + len - clean < CLEAN_RUN) continue;
        int64_t end = tiny ? i : i + len;
        if (clean < end) adam_common_f32(param + clean, grad + clean, m + clean, v + clean, end - clean, a);
        if (tiny) adam_exact16(param + i, grad + i, m + i, v + i, k, &c);
        clean = i + len;
    }
    if (clean < n) adam_common_f32(param + clean, grad + clean, m + clean, v + clean, n - clean, a);
}
#endif

static void adam_common_any_f32(float *param, const float *grad, float *m, float *v, int64_t n, tg_adam_args a) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    if (adam_exact_blocks && tg_flush_bits() == 0 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512dq")) {
        adam_common_exact_f32(param, grad, m, v, n, a);
        return;
    }
#endif
    adam_common_f32(param, grad, m, v, n, a);
}
