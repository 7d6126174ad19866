// CUDA side of ops/matmul.c: GEMM through cuBLAS (no kernels of our own).
//
// tg_cuda_gemm speaks row-major, cuBLAS column-major. A row-major matrix [r, c]
// with leading dimension ld is, read column-major, its transpose [c, r] with the
// same ld. So row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T:
// cuBLAS is called with the operands swapped and m and n swapped, and each
// operand keeps its own transpose flag.
//
// TF32: cuBLAS uses TF32 tensor cores for float32 only when tg_set_allow_tf32(true)
// (the handle's math mode is set in tg_cuda_cublas, core/cuda/runtime.cu). float16 and
// bfloat16 go through cublasGemmEx with float32 accumulation.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>

#include "core/cuda/internal.h"
#include "ops/cuda/matmul.h"

// ============================ launchers ============================

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

static tg_status cublas_failed(const char *what, cublasStatus_t st) {
    return tg_error("tg_matmul: %s failed: %s", what, cublasGetStatusString(st));
}

// Column-major call: C' [n, m] = op(B') [n, k] * op(A') [k, m], batched.
static tg_status gemm_f32(cublasHandle_t h, cublasOperation_t op_b, cublasOperation_t op_a, int n, int m, int k,
                          float alpha, const float *b, int ldb, int64_t stride_b, const float *a, int lda,
                          int64_t stride_a, float beta, float *c, int ldc, int64_t stride_c, int batch) {
    cublasStatus_t st = batch == 1 ? cublasSgemm(h, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc)
                                   : cublasSgemmStridedBatched(h, op_b, op_a, n, m, k, &alpha, b, ldb, stride_b, a, lda,
                                                               stride_a, &beta, c, ldc, stride_c, batch);
    return st == CUBLAS_STATUS_SUCCESS ? TG_OK : cublas_failed("cublasSgemm", st);
}

static tg_status gemm_f64(cublasHandle_t h, cublasOperation_t op_b, cublasOperation_t op_a, int n, int m, int k,
                          double alpha, const double *b, int ldb, int64_t stride_b, const double *a, int lda,
                          int64_t stride_a, double beta, double *c, int ldc, int64_t stride_c, int batch) {
    cublasStatus_t st = batch == 1 ? cublasDgemm(h, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc)
                                   : cublasDgemmStridedBatched(h, op_b, op_a, n, m, k, &alpha, b, ldb, stride_b, a, lda,
                                                               stride_a, &beta, c, ldc, stride_c, batch);
    return st == CUBLAS_STATUS_SUCCESS ? TG_OK : cublas_failed("cublasDgemm", st);
}

// float16 / bfloat16 operands and result, float32 accumulation (Tensor Cores where the
// GPU has them): cublasGemmEx, as PyTorch's CUDA half/bf16 GEMM. alpha and beta are
// float32 (CUBLAS_COMPUTE_32F); C is read (beta) and written in the 16-bit type,
// rounded once.
static tg_status gemm_lowp(cublasHandle_t h, cudaDataType type, cublasOperation_t op_b, cublasOperation_t op_a, int n,
                           int m, int k, float alpha, const void *b, int ldb, int64_t stride_b, const void *a, int lda,
                           int64_t stride_a, float beta, void *c, int ldc, int64_t stride_c, int batch) {
    cublasStatus_t st = batch == 1 ? cublasGemmEx(h, op_b, op_a, n, m, k, &alpha, b, type, ldb, a, type, lda, &beta, c,
                                                  type, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
                                   : cublasGemmStridedBatchedEx(h, op_b, op_a, n, m, k, &alpha, b, type, ldb, stride_b,
                                                                a, type, lda, stride_a, &beta, c, type, ldc, stride_c,
                                                                batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? TG_OK : cublas_failed("cublasGemmEx", st);
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_gemm(tg_dtype dtype, int device, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                  int64_t k, double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                                  int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc, int64_t stride_c,
                                  int64_t batch) {
    const char *op = "tg_matmul";
    if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return TG_OK; // nothing to multiply (the caller filled C)
    if (!fits_int(m) || !fits_int(n) || !fits_int(k) || !fits_int(lda) || !fits_int(ldb) || !fits_int(ldc) ||
        !fits_int(batch))
        return tg_error("%s: sizes beyond 2^31 are not supported by the CUDA GEMM (m %lld, n %lld, k %lld, batch %lld)",
                        op, (long long)m, (long long)n, (long long)k, (long long)batch);
    cudaStream_t stream;
    if (!tg_cuda_enter(device, op, &stream)) return TG_ERROR;
    cublasHandle_t h = tg_cuda_cublas(device, op);
    if (!h) return TG_ERROR;
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    switch (dtype) {
    case TG_FLOAT32:
        return gemm_f32(h, op_b, op_a, (int)n, (int)m, (int)k, (float)alpha, (const float *)b, (int)ldb, stride_b,
                        (const float *)a, (int)lda, stride_a, (float)beta, (float *)c, (int)ldc, stride_c, (int)batch);
    case TG_FLOAT64:
        return gemm_f64(h, op_b, op_a, (int)n, (int)m, (int)k, alpha, (const double *)b, (int)ldb, stride_b,
                        (const double *)a, (int)lda, stride_a, beta, (double *)c, (int)ldc, stride_c, (int)batch);
    case TG_FLOAT16:
    case TG_BFLOAT16:
        return gemm_lowp(h, dtype == TG_FLOAT16 ? CUDA_R_16F : CUDA_R_16BF, op_b, op_a, (int)n, (int)m, (int)k,
                         (float)alpha, b, (int)ldb, stride_b, a, (int)lda, stride_a, (float)beta, c, (int)ldc, stride_c,
                         (int)batch);
    default:
        return tg_error("%s: CUDA GEMM supports float32, float64, float16 and bfloat16, not %s", op,
                        tg_dtype_name(dtype));
    }
}
