// The CUDA kernel of lesson 05's bias_swish (see swish_cuda.h). Reads top to
// bottom as tapegrad's own .cu files: the kernel, then the C entry point.
#include <cuda_runtime.h>

#include <stdio.h>

#include "tutorials/05_custom_op/swish_cuda.h"

// y [rows, cols] = z * sigmoid(beta * z), z = x [rows, cols] + b [cols]; a grid-stride loop.
template <typename T> __global__ void bias_swish_kernel(const T *x, const T *b, T *y, int64_t n, int64_t cols, T beta) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        T z = x[i] + b[i % cols];
        y[i] = z / (T(1) + exp(-beta * z));
    }
}

extern "C" int tut_bias_swish_cuda(void *stream, const void *x, const void *b, void *y, int64_t rows, int64_t cols,
                                   double beta, int is_double, char *err, size_t err_size) {
    int64_t n = rows * cols;
    if (n == 0) return 0;
    int threads = 256;
    int64_t want = (n + threads - 1) / threads;
    int blocks = (int)(want < 4096 ? want : 4096);
    cudaStream_t s = (cudaStream_t)stream;
    if (is_double)
        bias_swish_kernel<double>
            <<<blocks, threads, 0, s>>>((const double *)x, (const double *)b, (double *)y, n, cols, beta);
    else
        bias_swish_kernel<float>
            <<<blocks, threads, 0, s>>>((const float *)x, (const float *)b, (float *)y, n, cols, (float)beta);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(err, err_size, "bias_swish: CUDA launch failed: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}
