/* Shared by the .cu files of ops/cuda only (CUDA C++; empty for a C compiler): the
 * per-device context (stream, cuBLAS handle, scratch memory), launch checking,
 * dtype dispatch and the broadcast/strided indexing every elementwise-style kernel
 * uses. Not a public header: extension authors use core/cuda/runtime.h. */
#ifndef TG_CORE_CUDA_INTERNAL_H
#define TG_CORE_CUDA_INTERNAL_H

#ifdef __CUDACC__

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/lowp.h"
#include "core/tensor_impl.h"

/* ---- context (core/cuda/runtime.cu) ---- */

/* Makes cuda:device current for this thread and returns its context's stream
 * (created on first use). Records an error naming op and returns false on failure. */
bool tg_cuda_enter(int device, const char *op, cudaStream_t *stream);
/* The cuBLAS handle of cuda:device (bound to its stream, math mode from
 * tg_set_allow_tf32); NULL + error naming op on failure. Call after tg_cuda_enter. */
cublasHandle_t tg_cuda_cublas(int device, const char *op);
/* Scratch device memory from the caching allocator (partial sums, im2col columns).
 * Freed blocks are reused in stream order, so a scratch buffer may be freed right
 * after the launches that use it are queued. NULL + error on failure. */
void *tg_cuda_scratch_alloc(int device, size_t nbytes);
void tg_cuda_scratch_free(int device, void *ptr, size_t nbytes);
/* Multiprocessors of cuda:device (for grid sizes). */
int tg_cuda_sm_count(int device);
/* Checks the last launch: on error records "<op>: CUDA kernel launch failed: <why>". */
tg_status tg_cuda_check_launch(const char *op);
/* Records "<op>: <what> failed: <cuda error string>" and returns TG_ERROR. */
tg_status tg_cuda_error(const char *op, const char *what, cudaError_t err);

static inline int tg_cuda_device_of(const tg_tensor *t) { return t->storage->device.index; }

/* Enters the device of tensor `t` inside an entry point: declares `stream`, returns
 * TG_ERROR when that fails. */
#define TG_CUDA_ENTER(op, t) \
    cudaStream_t stream;     \
    if (!tg_cuda_enter(tg_cuda_device_of(t), (op), &stream)) return TG_ERROR

/* The line kernels (sort, scan, softmax) run along one existing dim of x. */
static inline tg_status tg_cuda_check_line_dim(const char *op, const tg_tensor *x, int dim) {
    if (x->shape.ndim == 0 || dim < 0 || dim >= x->shape.ndim)
        return tg_error("%s: dim %d is out of range for a CUDA kernel on %d dims", op, dim, x->shape.ndim);
    return TG_OK;
}

/* ---- launch geometry ---- */

#define TG_CUDA_THREADS 256

/* Blocks for a grid-stride loop over n items: enough to fill the GPU a few times,
 * never more than needed (so small tensors launch small grids). */
static inline unsigned tg_cuda_blocks(int64_t n, int device) {
    int64_t need = (n + TG_CUDA_THREADS - 1) / TG_CUDA_THREADS;
    int64_t cap = (int64_t)tg_cuda_sm_count(device) * 8;
    if (need > cap) need = cap;
    return need < 1 ? 1u : (unsigned)need;
}

/* ---- dtypes ---- */

/* Runs the statement `__VA_ARGS__` with `scalar_t` the C++ type of dtype `dt`;
 * returns an error naming op for dtypes without CUDA kernels. */
/* clang-format off */
#define TG_CUDA_CASE(DT, T, ...) case DT: { typedef T scalar_t; __VA_ARGS__; } break;
#define TG_CUDA_DISPATCH_ALL(op, dt, ...)                                                        \
    switch (dt) {                                                                                \
    TG_CUDA_CASE(TG_FLOAT32, float, __VA_ARGS__) TG_CUDA_CASE(TG_FLOAT64, double, __VA_ARGS__)    \
    TG_CUDA_CASE(TG_INT64, int64_t, __VA_ARGS__) TG_CUDA_CASE(TG_INT32, int32_t, __VA_ARGS__)     \
    TG_CUDA_CASE(TG_UINT8, uint8_t, __VA_ARGS__) TG_CUDA_CASE(TG_BOOL, bool, __VA_ARGS__)         \
    default: return tg_error("%s: dtype %s has no CUDA kernel", (op), tg_dtype_name(dt));        \
    }
#define TG_CUDA_DISPATCH_FLOATING(op, dt, ...)                                                   \
    switch (dt) {                                                                                \
    TG_CUDA_CASE(TG_FLOAT32, float, __VA_ARGS__) TG_CUDA_CASE(TG_FLOAT64, double, __VA_ARGS__)    \
    default: return tg_error("%s: expected float32 or float64 on CUDA, got %s", (op), tg_dtype_name(dt)); \
    }
/* clang-format on */

/* The accumulator of reductions: double for float32 too, as the CPU kernels do. */
template <typename T> struct tg_acc_type { typedef T type; };
template <> struct tg_acc_type<float> { typedef double type; };
template <> struct tg_acc_type<int32_t> { typedef int64_t type; };
template <> struct tg_acc_type<uint8_t> { typedef int64_t type; };
template <> struct tg_acc_type<bool> { typedef int64_t type; };

/* The same conversion as core/convert.h's tg_store_from_double(tg_load_as_double()):
 * through double, bool is "!= 0", uint8 wraps through int64. */
template <typename D, typename S> __host__ __device__ __forceinline__ D tg_cast_value(S v) { return (D)(double)v; }
template <> __host__ __device__ __forceinline__ float tg_cast_value<float, float>(float v) { return v; }
template <> __host__ __device__ __forceinline__ double tg_cast_value<double, double>(double v) { return v; }
template <> __host__ __device__ __forceinline__ int64_t tg_cast_value<int64_t, int64_t>(int64_t v) { return v; }
template <> __host__ __device__ __forceinline__ int32_t tg_cast_value<int32_t, int32_t>(int32_t v) { return v; }
template <> __host__ __device__ __forceinline__ uint8_t tg_cast_value<uint8_t, uint8_t>(uint8_t v) { return v; }
template <> __host__ __device__ __forceinline__ bool tg_cast_value<bool, bool>(bool v) { return v; }
template <> __host__ __device__ __forceinline__ int64_t tg_cast_value<int64_t, int32_t>(int32_t v) { return v; }
template <> __host__ __device__ __forceinline__ int64_t tg_cast_value<int64_t, uint8_t>(uint8_t v) { return v; }
template <> __host__ __device__ __forceinline__ int64_t tg_cast_value<int64_t, bool>(bool v) { return v; }
#define TG_CAST_TO_BOOL(S) \
    template <> __host__ __device__ __forceinline__ bool tg_cast_value<bool, S>(S v) { return v != 0; }
TG_CAST_TO_BOOL(float)
TG_CAST_TO_BOOL(double)
TG_CAST_TO_BOOL(int64_t)
TG_CAST_TO_BOOL(int32_t)
TG_CAST_TO_BOOL(uint8_t)
#undef TG_CAST_TO_BOOL
#define TG_CAST_TO_U8(S)                                                                     \
    template <> __host__ __device__ __forceinline__ uint8_t tg_cast_value<uint8_t, S>(S v) { \
        return (uint8_t)(int64_t)(double)v;                                                  \
    }
TG_CAST_TO_U8(float)
TG_CAST_TO_U8(double)
TG_CAST_TO_U8(int64_t)
TG_CAST_TO_U8(int32_t)
TG_CAST_TO_U8(bool)
#undef TG_CAST_TO_U8

/* float16 / bfloat16 elements: the bits, converted through float32 by core/lowp.h's
 * functions, as the CPU's core/convert.h does (so a cast rounds the same on both
 * devices). The copy kernels, the elementwise kernels (ops/cuda/elementwise.cu: each
 * element computed in float32 registers and rounded once) and sum (accumulated as a
 * float32 tensor's sum is, in double) take them; other ops compute them on float32
 * copies (docs/mixed-precision.md). */
struct tg_half_t {
    uint16_t bits;
};
struct tg_bf16_t {
    uint16_t bits;
};
template <> struct tg_acc_type<tg_half_t> { typedef double type; };
template <> struct tg_acc_type<tg_bf16_t> { typedef double type; };
#define TG_CAST_FROM_LOWP(L, TO_FLOAT, D)                                        \
    template <> __host__ __device__ __forceinline__ D tg_cast_value<D, L>(L v) { \
        return tg_cast_value<D, float>(TO_FLOAT(v.bits));                        \
    }
#define TG_CAST_FROM_LOWP_ALL(L, TO_FLOAT)  \
    TG_CAST_FROM_LOWP(L, TO_FLOAT, float)   \
    TG_CAST_FROM_LOWP(L, TO_FLOAT, double)  \
    TG_CAST_FROM_LOWP(L, TO_FLOAT, int64_t) \
    TG_CAST_FROM_LOWP(L, TO_FLOAT, int32_t) \
    TG_CAST_FROM_LOWP(L, TO_FLOAT, uint8_t) \
    TG_CAST_FROM_LOWP(L, TO_FLOAT, bool)
TG_CAST_FROM_LOWP_ALL(tg_half_t, tg_half_bits_to_float)
TG_CAST_FROM_LOWP_ALL(tg_bf16_t, tg_bf16_bits_to_float)
#undef TG_CAST_FROM_LOWP_ALL
#undef TG_CAST_FROM_LOWP
#define TG_CAST_TO_LOWP(L, FROM_FLOAT, S)                                        \
    template <> __host__ __device__ __forceinline__ L tg_cast_value<L, S>(S v) { \
        return L{FROM_FLOAT(tg_cast_value<float, S>(v))};                        \
    }
#define TG_CAST_TO_LOWP_ALL(L, FROM_FLOAT, OTHER) \
    TG_CAST_TO_LOWP(L, FROM_FLOAT, float)         \
    TG_CAST_TO_LOWP(L, FROM_FLOAT, double)        \
    TG_CAST_TO_LOWP(L, FROM_FLOAT, int64_t)       \
    TG_CAST_TO_LOWP(L, FROM_FLOAT, int32_t)       \
    TG_CAST_TO_LOWP(L, FROM_FLOAT, uint8_t)       \
    TG_CAST_TO_LOWP(L, FROM_FLOAT, bool)          \
    TG_CAST_TO_LOWP(L, FROM_FLOAT, OTHER)         \
    template <> __host__ __device__ __forceinline__ L tg_cast_value<L, L>(L v) { return v; }
TG_CAST_TO_LOWP_ALL(tg_half_t, tg_float_to_half_bits, tg_bf16_t)
TG_CAST_TO_LOWP_ALL(tg_bf16_t, tg_float_to_bf16_bits, tg_half_t)
#undef TG_CAST_TO_LOWP_ALL
#undef TG_CAST_TO_LOWP

/* ---- broadcast / strided indexing ----
 * N operands broadcast to one shape (operand 0 is the output). On the host, dims
 * of size 1 are dropped and neighbouring dims merged where every operand is
 * contiguous across them, so a contiguous or row-broadcast case becomes one or two
 * dims. In the kernel, offsets(i) turns a linear index over the shape (row-major)
 * into each operand's element offset. */
template <int N> struct tg_indexer {
    int ndim;
    int64_t sizes[TG_MAX_DIMS];      /* outer to inner */
    int64_t strides[TG_MAX_DIMS][N]; /* in elements; 0 on broadcast dims */
    int64_t numel;

    __device__ __forceinline__ void offsets(int64_t i, int64_t *off) const {
#pragma unroll
        for (int k = 0; k < N; k++) off[k] = 0;
        if (ndim == 1) { /* contiguous after merging, or one broadcast/strided dim */
#pragma unroll
            for (int k = 0; k < N; k++) off[k] = i * strides[0][k];
            return;
        }
        if (numel <= INT32_MAX) { /* 32-bit division is several times cheaper */
            uint32_t j = (uint32_t)i;
            for (int d = ndim - 1; d >= 0; d--) {
                uint32_t size = (uint32_t)sizes[d];
                int64_t c = j % size;
                j /= size;
#pragma unroll
                for (int k = 0; k < N; k++) off[k] += c * strides[d][k];
            }
            return;
        }
        for (int d = ndim - 1; d >= 0; d--) {
            int64_t size = sizes[d];
            int64_t c = i % size;
            i /= size;
#pragma unroll
            for (int k = 0; k < N; k++) off[k] += c * strides[d][k];
        }
    }
};

/* Builds the indexer for `shape` (the output's) and the operands' strides (each
 * operand broadcast to shape by the usual right-aligned rule). */
template <int N> static inline tg_indexer<N> tg_make_indexer(tg_shape shape, tg_tensor *const *operands) {
    tg_indexer<N> ix;
    int64_t sizes[TG_MAX_DIMS], strides[TG_MAX_DIMS][N];
    int nd = 0;
    ix.numel = 1;
    for (int d = 0; d < shape.ndim; d++) {
        int64_t size = shape.dims[d];
        ix.numel *= size;
        if (size == 1) continue;
        sizes[nd] = size;
        for (int k = 0; k < N; k++) {
            const tg_tensor *t = operands[k];
            int td = d - (shape.ndim - t->shape.ndim);
            strides[nd][k] = (td < 0 || t->shape.dims[td] == 1) ? 0 : t->strides[td];
        }
        nd++;
    }
    /* Merge dim d into the one before when every operand steps across it evenly. */
    int out = 0;
    for (int d = 0; d < nd; d++) {
        bool merge = out > 0;
        for (int k = 0; merge && k < N; k++) merge = ix.strides[out - 1][k] == strides[d][k] * sizes[d];
        if (merge) {
            ix.sizes[out - 1] *= sizes[d];
            for (int k = 0; k < N; k++) ix.strides[out - 1][k] = strides[d][k];
            continue;
        }
        ix.sizes[out] = sizes[d];
        for (int k = 0; k < N; k++) ix.strides[out][k] = strides[d][k];
        out++;
    }
    ix.ndim = out;
    return ix;
}

/* True when the indexer is one dim with unit strides (or a single element): every
 * operand is contiguous over the whole shape. */
template <int N> static inline bool tg_indexer_contiguous(const tg_indexer<N> &ix) {
    if (ix.ndim == 0) return true;
    if (ix.ndim != 1) return false;
    for (int k = 0; k < N; k++)
        if (ix.strides[0][k] != 1) return false;
    return true;
}

#endif /* __CUDACC__ */
#endif
