/* OpenBLAS for the CPU GEMMs (ops/cpu/gemm.c): loaded by the first product, held to one
 * thread, and guarded so that a product for which OpenBLAS would wait forever for
 * memory fails instead. */
#ifndef TG_OPS_CPU_BLAS_H
#define TG_OPS_CPU_BLAS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C [m, n] = alpha op(A) op(B) + beta C, row-major, as cblas_sgemm / cblas_dgemm (f64)
 * with CblasRowMajor, on the calling thread. False, after tg_kernel_fail (core/parallel.h)
 * with the reason, when OpenBLAS cannot be loaded or has no room for a work buffer; C is
 * then unwritten. Thread-safe: tapegrad's pool calls it from several threads at once. */
bool tg_blas_gemm(bool f64, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                  int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);

/* The kernels OpenBLAS runs ("SkylakeX", "Haswell", ...; openblas_get_corename), "" when
 * the library does not say; NULL after tg_kernel_fail when it cannot be loaded. */
const char *tg_blas_core_name(void);

#ifdef __cplusplus
}
#endif
#endif
