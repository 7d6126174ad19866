/* TG_HD_INLINE: a function that the CPU files (C) and the CUDA files (nvcc) both
 * compile, `static __host__ __device__ __forceinline__` under nvcc and plain
 * `static inline` in C. The headers that hold a formula both devices run
 * (docs/design.md, "One formula per op, both devices") declare their functions with
 * it, so a CPU test checks the very code a kernel runs. */
#ifndef TG_CORE_HOST_DEVICE_H
#define TG_CORE_HOST_DEVICE_H

#ifdef __CUDACC__
#define TG_HD_INLINE static __host__ __device__ __forceinline__
#else
#define TG_HD_INLINE static inline
#endif

#endif
