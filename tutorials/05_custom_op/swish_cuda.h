/* The CUDA kernel of lesson 05's bias_swish, as a plain C entry point (swish.cu).
 * Compiled in only when the CUDA backend is (TUT_WITH_CUDA is then defined). */
#ifndef TUT_SWISH_CUDA_H
#define TUT_SWISH_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[r, c] = z * sigmoid(beta * z) with z = x[r, c] + b[c], for contiguous device
 * arrays x, y [rows, cols] and b [cols] of float (is_double 0) or double (1).
 * Queued on `stream` (a cudaStream_t: tapegrad's, from tg_cuda_stream). Returns 0,
 * or -1 with a message in err. */
int tut_bias_swish_cuda(void *stream, const void *x, const void *b, void *y, int64_t rows, int64_t cols, double beta,
                        int is_double, char *err, size_t err_size);

#ifdef __cplusplus
}
#endif
#endif
