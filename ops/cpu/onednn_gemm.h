/* oneDNN's float32 GEMM (dnnl_sgemm) for the large float32 products of ops/cpu/gemm.c:
 * loaded with dlopen at the first such product, held to one thread (tapegrad's pool splits
 * the products), and absent without harm (OpenBLAS then runs them). */
#ifndef TG_OPS_CPU_ONEDNN_GEMM_H
#define TG_OPS_CPU_ONEDNN_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether oneDNN is loaded, or can be (the first call tries): false when its library is
 * not installed, cannot be mapped, or TG_ONEDNN=0 is in the environment. Thread-safe. */
bool tg_onednn_available(void);

/* C [m, n] = alpha op(A) op(B) + beta C, row-major, as cblas_sgemm with CblasRowMajor, on
 * the calling thread. Only after tg_onednn_available() returned true. False, after
 * tg_kernel_fail (core/parallel.h) with the reason, when oneDNN could not allocate its
 * packing buffers; C is then unwritten. Thread-safe. */
bool tg_onednn_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                     int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

#ifdef __cplusplus
}
#endif
#endif
