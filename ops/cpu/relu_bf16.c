/* relu and relu_backward on bfloat16 (ops/cpu/relu_bf16.h), what every activation of a bf16
 * autocast CNN goes through. Each result is one of the inputs or zero, so instead of
 * widening to float32, computing and rounding back (ops/elementwise.c's low-precision
 * rows: three passes) the kernel compares in float32 registers and selects the bf16 bits,
 * 32 elements per step. The same bits as the general path: its float32 result is an
 * input's exact value (rounded back unchanged) or +0, and a NaN result is rounded to
 * 0x7FC0 there, so here too. The compares obey the caller's flushing (core/denormal.h):
 * a subnormal input is <= 0 under DAZ on both paths. */
#include "ops/cpu/relu_bf16.h"

#include "core/parallel.h"
#include "core/simd.h"
#include "core/tensor_impl.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAVE_RELU_BF16 1
#define RELU_TARGET __attribute__((target("avx512f,avx512bw")))

enum { GRAIN = 1 << 15 }; /* elements per task at least */

typedef struct {
    const uint16_t *x, *y; /* relu: x; backward: g in x, the saved value in y */
    uint16_t *out;
} relu_job;

/* Lanes of 32 bf16 where `cmp` holds for their float32 value. */
#define CMP32(v, cmp)                                                       \
    ((__mmask32)_mm512_cmp_ps_mask(widen_lo(v), _mm512_setzero_ps(), cmp) | \
     (__mmask32)_mm512_cmp_ps_mask(widen_hi(v), _mm512_setzero_ps(), cmp) << 16)

RELU_TARGET static inline __m512 widen_lo(__m512i v) { return tg_widen_bf16x16(_mm512_castsi512_si256(v)); }
RELU_TARGET static inline __m512 widen_hi(__m512i v) { return tg_widen_bf16x16(_mm512_extracti64x4_epi64(v, 1)); }
/* NaN lanes of 32 bf16: exponent all ones and a nonzero fraction. */
RELU_TARGET static inline __mmask32 nan32(__m512i v) {
    return _mm512_cmpgt_epu16_mask(_mm512_and_si512(v, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(0x7F80));
}

RELU_TARGET static void relu_range(int64_t i0, int64_t i1, void *arg) {
    const relu_job *j = arg;
    const __m512i qnan = _mm512_set1_epi16(0x7FC0);
    for (int64_t i = i0; i < i1; i += 32) {
        __mmask32 m = i1 - i >= 32 ? ~(__mmask32)0 : (__mmask32)((1u << (i1 - i)) - 1);
        __m512i x = _mm512_maskz_loadu_epi16(m, j->x + i);
        __mmask32 nan = nan32(x);
        __m512i r = _mm512_maskz_mov_epi16(CMP32(x, _CMP_GT_OQ), x); /* x > 0: x, else +0 */
        _mm512_mask_storeu_epi16(j->out + i, m, _mm512_mask_mov_epi16(r, nan, qnan));
    }
}

RELU_TARGET static void relu_backward_range(int64_t i0, int64_t i1, void *arg) {
    const relu_job *j = arg;
    const __m512i qnan = _mm512_set1_epi16(0x7FC0);
    for (int64_t i = i0; i < i1; i += 32) {
        __mmask32 m = i1 - i >= 32 ? ~(__mmask32)0 : (__mmask32)((1u << (i1 - i)) - 1);
        __m512i g = _mm512_maskz_loadu_epi16(m, j->x + i), y = _mm512_maskz_loadu_epi16(m, j->y + i);
        __m512i r = _mm512_mask_mov_epi16(g, nan32(g), qnan);
        r = _mm512_maskz_mov_epi16((__mmask32)~CMP32(y, _CMP_LE_OQ), r); /* y <= 0: +0, else g */
        _mm512_mask_storeu_epi16(j->out + i, m, r);
    }
}
#endif

static bool applies(tg_tensor *out, tg_tensor *a, tg_tensor *b) {
#ifdef HAVE_RELU_BF16
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512bw")) return false;
    tg_tensor *ts[3] = {out, a, b};
    for (int k = 0; k < 3; k++)
        if (ts[k] && (ts[k]->dtype != TG_BFLOAT16 || ts[k]->storage->device.kind != TG_DEVICE_CPU ||
                      !tg_is_contiguous(ts[k]) || !tg_shape_equal(ts[k]->shape, out->shape)))
            return false;
    return true;
#else
    (void)out, (void)a, (void)b;
    return false;
#endif
}

bool tg_relu_bf16_select(tg_tensor *out, tg_tensor *x) {
    if (!applies(out, x, NULL)) return false;
#ifdef HAVE_RELU_BF16
    relu_job j = {tg_data_ptr(x), NULL, tg_data_ptr(out)};
    tg_parallel_for(tg_numel(out), GRAIN, relu_range, &j);
#endif
    return true;
}

bool tg_relu_backward_bf16_select(tg_tensor *out, tg_tensor *g, tg_tensor *y) {
    if (!applies(out, g, y)) return false;
#ifdef HAVE_RELU_BF16
    relu_job j = {tg_data_ptr(g), tg_data_ptr(y), tg_data_ptr(out)};
    tg_parallel_for(tg_numel(out), GRAIN, relu_backward_range, &j);
#endif
    return true;
}
