/* The CUDA runtime of tapegrad (core/cuda/runtime.cu): per-device stream, cuBLAS
 * handle, random state and caching allocator, and the switches PyTorch keeps in
 * torch.cuda / torch.backends. Plain C, no CUDA headers needed: a build without
 * CUDA has none of these symbols (they are weak, so NULL there): check
 * tg_cuda_available() before calling any of them:
 *
 *     if (tg_cuda_available()) {
 *         tg_cuda_allocator_stats s = tg_cuda_memory_stats(0);
 *         printf("%zu bytes in use, %ld cudaMalloc calls\n", s.allocated, s.num_mallocs);
 *     }
 */
#ifndef TG_CORE_CUDA_RUNTIME_H
#define TG_CORE_CUDA_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Caching allocator statistics of one device, in bytes (torch.cuda.memory_stats). */
typedef struct {
    size_t allocated; /* held by live storages (rounded to the allocator's size classes) */
    size_t cached;    /* freed by tapegrad, kept for reuse (torch.cuda.memory_reserved - allocated) */
    size_t peak;      /* highest `allocated` so far (torch.cuda.max_memory_allocated) */
    long num_mallocs; /* cudaMalloc calls made so far; flat across steady-state training steps */
    long num_frees;   /* cudaFree calls (tg_cuda_empty_cache, out-of-memory retries) */
} tg_cuda_allocator_stats;

/* Statistics of cuda:`device`; all zero for a device never used or not present. */
tg_cuda_allocator_stats tg_cuda_memory_stats(int device) __attribute__((weak));

/* Waits for every device and returns all cached blocks to the driver
 * (torch.cuda.empty_cache). Live tensors are untouched. */
void tg_cuda_empty_cache(void) __attribute__((weak));

/* Lets cuBLAS use TF32 tensor cores for float32 GEMMs (about 10 bits of mantissa in
 * the products; torch.backends.cuda.matmul.allow_tf32). Off by default, as in
 * PyTorch. Applies to every device from the next matmul on. */
void tg_set_allow_tf32(bool allow) __attribute__((weak));
bool tg_get_allow_tf32(void) __attribute__((weak));

/* The stream (a cudaStream_t, as void *) on which tapegrad queues all work for
 * cuda:`device`, for extension authors who launch their own kernels: launch on it
 * and the ordering with tapegrad's own kernels is kept. NULL + error when the device
 * does not exist. */
void *tg_cuda_stream(int device) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
