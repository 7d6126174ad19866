/* CUDA entry points of ops/cuda/matmul.cu (cuBLAS), called by ops/matmul.c.
 * Weak: absent (NULL) in builds without CUDA. */
#ifndef TG_OPS_CUDA_MATMUL_H
#define TG_OPS_CUDA_MATMUL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Strided-batched GEMM in ROW-MAJOR terms (as cblas_?gemm with CblasRowMajor), on the
 * current stream of CUDA device `device`, for float32/float64:
 *   for i < batch: C_i [m, n] = alpha * op(A_i) [m, k] * op(B_i) [k, n] + beta * C_i
 *   A_i = a + i * stride_a, B_i = b + i * stride_b, C_i = c + i * stride_c (elements;
 *   stride_a / stride_b may be 0 for a broadcast operand); op(X) = X^T when trans_X.
 * lda/ldb/ldc are row-major leading dimensions. (With cuBLAS's column-major
 * convention this is C^T = op(B)^T op(A)^T: swap the operands.) m, n, k > 0. */
tg_status tg_cuda_gemm(tg_dtype dtype, int device, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                       double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb,
                       int64_t stride_b, double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch)
    __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
