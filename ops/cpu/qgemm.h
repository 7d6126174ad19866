/* The int8 GEMM of dynamic quantisation (quant/quantize.h): uint8 activations times
 * int8 weights, summed exactly in int32, as fbgemm's u8s8s32 product. Library-
 * internal (not in tapegrad.h); the caller owns every buffer. */
#ifndef TG_OPS_CPU_QGEMM_H
#define TG_OPS_CPU_QGEMM_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* c[i*n + j] = sum_p a[i*k + p] * b[j*k + p] for i < m, j < n: a is m x k row-major,
 * b is n x k row-major (a Linear weight's layout, so every dot product reads two
 * contiguous rows). Rows of c (in blocks of 64 columns) are split over the thread pool; each element is
 * computed by one thread, so the result does not depend on the thread count (and
 * is exact, so not on the kernel either). k < 2^16 keeps every sum within int32. */
void tg_qgemm_u8s8s32(int64_t m, int64_t n, int64_t k, const uint8_t *a, const int8_t *b, int32_t *c);
/* The same product with b packed for broadcasting a: 16 output columns by 4 bytes of
 * k per 64-byte vector, so one vpdpbusd multiplies 4 values of a row of a (broadcast)
 * by 16 columns, with no horizontal sums (what static quantisation's layers and a
 * dynamic Linear's batches use: their k can be as small as 25). Blocks of 6 rows by
 * 64 columns are computed in registers and split over the thread pool (each element by
 * one thread). tg_qgemm_pack makes the packing from b (n x k row-major; malloc'ed, the
 * caller frees; zeros pad n to 16 and k to 4); tg_qgemm_u8s8s32_packed runs it (rows
 * of a are lda bytes apart; no byte past a row's k is read; a packing made for k also
 * serves k rounded up to 4, its zeros cancelling any finite bytes of a there) and
 * needs tg_qgemm_vnni_enabled(). */
int8_t *tg_qgemm_pack(int64_t n, int64_t k, const int8_t *b);
void tg_qgemm_u8s8s32_packed(int64_t m, int64_t n, int64_t k, const uint8_t *a, int64_t lda, const int8_t *packed,
                             int32_t *c);

/* What the packed kernel does with each exact int32 sum acc[i][j] while it is still in
 * a register (no int32 matrix is written and read back). out holds m rows of ldc
 * elements. The arithmetic is the scalar code's, in the same order, so the results are
 * identical to it (quant/quantize.c's and ops/cpu/qconv.c's portable paths). */
typedef enum {
    TG_QGEMM_OUT_S32, /* int32 out: acc */
    /* float out, dynamic quantisation's (fbgemm's ReQuantizeForFloat):
     * (float)(acc - x_zero_point * col_sum[j]) * x_scale * w_scale[per_channel ? j : 0] + bias[j] */
    TG_QGEMM_OUT_F32,
    /* uint8 out, static quantisation's (onednn's): with v = nearbyint((float)(acc + correction[j]) *
     * mult[j]) + y_zero_point, clamp(v, lo, 255) */
    TG_QGEMM_OUT_U8,
} tg_qgemm_out_kind;

typedef struct {
    tg_qgemm_out_kind kind;
    void *out;
    int64_t ldc;
    /* TG_QGEMM_OUT_F32 (bias may be NULL) */
    int32_t x_zero_point;
    float x_scale;
    const int32_t *col_sum;
    const float *w_scale, *bias;
    bool per_channel;
    /* TG_QGEMM_OUT_U8 */
    const int32_t *correction;
    const float *mult;
    float y_zero_point, lo;
} tg_qgemm_epilogue;

/* tg_qgemm_u8s8s32_packed with the epilogue e applied to every sum. */
void tg_qgemm_u8s8_packed_epilogue(int64_t m, int64_t n, int64_t k, const uint8_t *a, int64_t lda, const int8_t *packed,
                                   const tg_qgemm_epilogue *e);
/* tg_qgemm_has_vnni() and not switched off by tg_qgemm_allow_vnni(false). */
bool tg_qgemm_vnni_enabled(void);
/* True when this CPU runs the AVX512-VNNI kernel (vpdpbusd); else portable C. */
bool tg_qgemm_has_vnni(void);
/* Tests: false forces the portable kernel (true restores the run-time choice). */
void tg_qgemm_allow_vnni(bool allow);
/* AMX (TDPBUSD tiles, core/amx.h) for the packed product of 16 rows or more, where the
 * CPU has AMX-INT8 and the OS grants it, unless TG_AMX=0; the same exact sums, so the
 * same results as the VNNI kernel. tg_qgemm_allow_amx(false) keeps the VNNI kernel
 * (tests compare the two); tg_qgemm_amx_enabled() says whether AMX runs. */
bool tg_qgemm_has_amx(void);
void tg_qgemm_allow_amx(bool allow);
bool tg_qgemm_amx_enabled(void);

#ifdef __cplusplus
}
#endif

#endif
