// cuBLAS, loaded on first use.
//
// Linking libcublas makes the dynamic loader relocate libcublasLt at start-up, which
// costs every tapegrad program ~210 MB of resident memory even when it never touches
// a GPU (measured: an empty program linked with -lcublas peaks at 212 MB, with
// -lcudart at 1.5 MB). So the library is not linked: the cuBLAS functions tapegrad
// calls are defined here with cuBLAS's own names and signatures, and each forwards
// to the real one, resolved with dlopen/dlsym the first time any is called. When
// libcublas cannot be loaded they return CUBLAS_STATUS_NOT_INITIALIZED, which the
// callers already turn into an error message.
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

void *library;
pthread_once_t load_once = PTHREAD_ONCE_INIT;

// The loader's search (LD_LIBRARY_PATH, the executable's runpath, ld.so.cache), then
// the toolkit's usual places.
void load() {
    const char *names[] = {"libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13"};
    for (const char *name : names)
        if ((library = dlopen(name, RTLD_NOW | RTLD_LOCAL))) return;
    if (const char *root = getenv("CUDA_PATH")) {
        char path[4096];
        snprintf(path, sizeof path, "%s/lib64/libcublas.so.13", root);
        library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
}

template <typename F> F resolve(const char *symbol) {
    pthread_once(&load_once, load);
    return library ? reinterpret_cast<F>(dlsym(library, symbol)) : nullptr;
}

} // namespace

// Defines `name(params)` forwarding `args` to the real symbol `name`.
#define TG_CUBLAS_FORWARD(name, params, args)                    \
    extern "C" cublasStatus_t CUBLASWINAPI name params {         \
        using fn_t = cublasStatus_t(CUBLASWINAPI *) params;      \
        static fn_t real = resolve<fn_t>(#name);                 \
        return real ? real args : CUBLAS_STATUS_NOT_INITIALIZED; \
    }

TG_CUBLAS_FORWARD(cublasCreate_v2, (cublasHandle_t * handle), (handle))
TG_CUBLAS_FORWARD(cublasDestroy_v2, (cublasHandle_t handle), (handle))
TG_CUBLAS_FORWARD(cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
TG_CUBLAS_FORWARD(cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
TG_CUBLAS_FORWARD(cublasSgemm_v2,
                  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                   const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta, float *C,
                   int ldc),
                  (h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
TG_CUBLAS_FORWARD(cublasDgemm_v2,
                  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                   const double *alpha, const double *A, int lda, const double *B, int ldb, const double *beta,
                   double *C, int ldc),
                  (h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
TG_CUBLAS_FORWARD(cublasSgemmStridedBatched,
                  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                   const float *alpha, const float *A, int lda, long long int sA, const float *B, int ldb,
                   long long int sB, const float *beta, float *C, int ldc, long long int sC, int batch),
                  (h, ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch))
TG_CUBLAS_FORWARD(cublasDgemmStridedBatched,
                  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                   const double *alpha, const double *A, int lda, long long int sA, const double *B, int ldb,
                   long long int sB, const double *beta, double *C, int ldc, long long int sC, int batch),
                  (h, ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch))

TG_CUBLAS_FORWARD(cublasGemmEx,
                  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha,
                   const void *A, cudaDataType At, int lda, const void *B, cudaDataType Bt, int ldb, const void *beta,
                   void *C, cudaDataType Ct, int ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo),
                  (h, ta, tb, m, n, k, alpha, A, At, lda, B, Bt, ldb, beta, C, Ct, ldc, compute, algo))
TG_CUBLAS_FORWARD(cublasGemmStridedBatchedEx,
                  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha,
                   const void *A, cudaDataType At, int lda, long long int sA, const void *B, cudaDataType Bt, int ldb,
                   long long int sB, const void *beta, void *C, cudaDataType Ct, int ldc, long long int sC, int batch,
                   cublasComputeType_t compute, cublasGemmAlgo_t algo),
                  (h, ta, tb, m, n, k, alpha, A, At, lda, sA, B, Bt, ldb, sB, beta, C, Ct, ldc, sC, batch, compute,
                   algo))

extern "C" const char *CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
    using fn_t = const char *(CUBLASWINAPI *)(cublasStatus_t);
    static fn_t real = resolve<fn_t>("cublasGetStatusString");
    if (real) return real(status);
    return status == CUBLAS_STATUS_NOT_INITIALIZED ? "cuBLAS could not be loaded (libcublas.so.13 not found)"
                                                   : "cuBLAS error";
}
