// CUDA kernels of ops/gather.c: index_select, index_add, gather, scatter_add and
// one_hot. A thread per element of the index-shaped side. Index values are checked
// in the kernel: the first bad one is recorded in a small device flag that the host
// reads back after the launch (one wait per call, as PyTorch's device asserts cost),
// so a bad index is an error naming the op, never a crash or a silent wrong read.
// The adds are atomic (repeated indices accumulate): float sums may differ from the
// CPU's in the last bits, as the order of additions is not fixed.
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "ops/cuda/gather.h"
#include "core/cuda/internal.h"

// ============================ device helpers ============================

// flag[0]: 0, or 1 once a bad index was seen; flag[1]: that index value.
__device__ __forceinline__ void report_bad_index(unsigned long long *flag, int64_t value) {
    if (atomicCAS(flag, 0ull, 1ull) == 0ull) flag[1] = (unsigned long long)value;
}

// Atomic out += v for each dtype (bool: or). uint8/bool go through the 32-bit word
// holding them (blocks are 256-byte aligned, so the word lies inside the allocation).
__device__ __forceinline__ void atomic_add_elem(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add_elem(double *p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add_elem(int32_t *p, int32_t v) { atomicAdd((int *)p, (int)v); }
__device__ __forceinline__ void atomic_add_elem(int64_t *p, int64_t v) {
    atomicAdd((unsigned long long *)p, (unsigned long long)v); // two's complement: same bits
}
__device__ __forceinline__ void atomic_byte_update(uint8_t *p, uint8_t v, bool logical_or) {
    unsigned int *word = (unsigned int *)((uintptr_t)p & ~(uintptr_t)3);
    unsigned int shift = (unsigned int)((uintptr_t)p & 3) * 8;
    unsigned int old = *word, assumed;
    do {
        assumed = old;
        uint8_t cur = (uint8_t)((assumed >> shift) & 0xffu);
        uint8_t next = logical_or ? (uint8_t)(cur || v) : (uint8_t)(cur + v);
        unsigned int repl = (assumed & ~(0xffu << shift)) | ((unsigned int)next << shift);
        old = atomicCAS(word, assumed, repl);
    } while (assumed != old);
}
__device__ __forceinline__ void atomic_add_elem(uint8_t *p, uint8_t v) { atomic_byte_update(p, v, false); }
__device__ __forceinline__ void atomic_add_elem(bool *p, bool v) { atomic_byte_update((uint8_t *)p, (uint8_t)v, true); }

// The shapes gather/scatter_add walk: index [ndim] (contiguous) and x/out (contiguous
// strides), with the index value replacing the coordinate along dim.
struct gather_geometry {
    int ndim, dim;
    int64_t index_dims[TG_MAX_DIMS];
    int64_t x_strides[TG_MAX_DIMS];
    int64_t size;  // x's size along dim
    int64_t numel; // elements of index
};

__device__ __forceinline__ int64_t gather_offset(const gather_geometry &g, int64_t p, int64_t v) {
    int64_t off = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        int64_t c = p % g.index_dims[d];
        p /= g.index_dims[d];
        off += (d == g.dim ? v : c) * g.x_strides[d];
    }
    return off;
}

#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// ============================ kernels ============================

// ADD false, index_select: out [outer, n, inner] = x [outer, size, inner] at index [n].
// ADD true, index_add: out [outer, size, inner] += x [outer, n, inner] at index [n].
template <typename T, bool ADD>
__global__ void index_dim_kernel(T *out, const T *x, const int64_t *index, int64_t outer, int64_t size, int64_t inner,
                                 int64_t n, unsigned long long *flag) {
    GRID_STRIDE(e, outer * n * inner) {
        int64_t r = e % inner, i = (e / inner) % n, o = e / (inner * n);
        int64_t v = index[i];
        if (v < 0 || v >= size) {
            report_bad_index(flag, v);
            continue;
        }
        if (ADD) atomic_add_elem(&out[(o * size + v) * inner + r], x[e]);
        else out[e] = x[(o * size + v) * inner + r];
    }
}

// ADD false, gather: out[p] = x[offset of p with index[p] along dim] (out, index: index's
// shape). ADD true, scatter_add: out[offset of p with index[p] along dim] += x[p].
template <typename T, bool ADD>
__global__ void gather_kernel(T *out, const T *x, const int64_t *index, gather_geometry g, unsigned long long *flag) {
    GRID_STRIDE(p, g.numel) {
        int64_t v = index[p];
        if (v < 0 || v >= g.size) {
            report_bad_index(flag, v);
            continue;
        }
        if (ADD) atomic_add_elem(&out[gather_offset(g, p, v)], x[p]);
        else out[p] = x[gather_offset(g, p, v)];
    }
}

// out [n, classes] (zeros) = 1 at (i, index[i]).
__global__ void one_hot_kernel(int64_t *out, const int64_t *index, int64_t n, int64_t classes,
                               unsigned long long *flag) {
    GRID_STRIDE(i, n) {
        int64_t v = index[i];
        if (v < 0 || v >= classes) {
            report_bad_index(flag, v);
            continue;
        }
        out[i * classes + v] = 1;
    }
}

// ============================ launchers ============================

// The device flag of one call: allocated and zeroed before the launch, read after.
struct index_flag {
    int device;
    unsigned long long *ptr = nullptr;
    cudaStream_t stream;
    index_flag(int d, cudaStream_t s) : device(d), stream(s) {
        ptr = (unsigned long long *)tg_cuda_scratch_alloc(device, 2 * sizeof(unsigned long long));
        if (ptr && cudaMemsetAsync(ptr, 0, 2 * sizeof(unsigned long long), stream) != cudaSuccess) {
            tg_cuda_scratch_free(device, ptr, 2 * sizeof(unsigned long long));
            ptr = nullptr;
            tg_error("CUDA index check: cudaMemsetAsync failed");
        }
    }
    ~index_flag() {
        if (ptr) tg_cuda_scratch_free(device, ptr, 2 * sizeof(unsigned long long)); // see STREAM ORDER
    }
    // After the launch: waits; *bad is set when some index was out of range, *value to
    // the first one reported.
    tg_status read(const char *op, bool *bad, long long *value) {
        unsigned long long host[2] = {0, 0};
        cudaError_t err = cudaMemcpyAsync(host, ptr, sizeof host, cudaMemcpyDeviceToHost, stream);
        if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
        if (err != cudaSuccess) return tg_cuda_error(op, "reading the index check", err);
        *bad = host[0] != 0;
        *value = (long long)host[1];
        return TG_OK;
    }
    // read(), then reports the first bad index like ops/gather.c does.
    tg_status check(const char *op, int dim, int64_t size) {
        bool bad;
        long long value;
        if (read(op, &bad, &value)) return TG_ERROR;
        if (bad)
            return tg_error("%s: index %lld is out of range for dim %d of size %lld", op, value, dim, (long long)size);
        return TG_OK;
    }
};

static void split_at(tg_shape s, int dim, int64_t *outer, int64_t *size, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    *size = s.ndim > 0 ? s.dims[dim] : 1;
    for (int d = 0; d < s.ndim; d++) {
        if (d < dim) *outer *= s.dims[d];
        if (d > dim) *inner *= s.dims[d];
    }
}

static gather_geometry make_geometry(tg_shape xshape, tg_shape ishape, int dim) {
    gather_geometry g = {};
    g.ndim = ishape.ndim;
    g.dim = dim;
    tg_contiguous_strides(xshape, g.x_strides);
    for (int d = 0; d < ishape.ndim; d++) g.index_dims[d] = ishape.dims[d];
    g.size = xshape.ndim > 0 ? xshape.dims[dim] : 1;
    g.numel = tg_shape_numel(ishape);
    return g;
}

static tg_status check_index(const char *op, tg_tensor *index) {
    if (index->dtype != TG_INT64 || !tg_is_contiguous(index))
        return tg_error("%s: CUDA kernel expects a contiguous int64 index, got %s", op, tg_dtype_name(index->dtype));
    return TG_OK;
}

// ============================ entry points ============================

// index_select (ADD false: out = x picked along dim) and index_add (ADD true: out += x
// added along dim); `big` is the side of full size along dim (x, or out).
template <bool ADD>
static tg_status index_dim(const char *op, tg_tensor *out, tg_tensor *x, int dim, tg_tensor *index) {
    if (check_index(op, index)) return TG_ERROR;
    if (ADD && x->dtype != out->dtype) return tg_error("%s: source and output dtypes differ", op);
    tg_tensor *big = ADD ? out : x;
    int64_t outer, size, inner, n = tg_numel(index);
    split_at(big->shape, dim, &outer, &size, &inner);
    if (outer * n * inner == 0) return TG_OK;
    TG_CUDA_ENTER(op, big);
    int device = tg_cuda_device_of(big);
    index_flag flag(device, stream);
    if (!flag.ptr) return TG_ERROR;
    unsigned blocks = tg_cuda_blocks(outer * n * inner, device);
    const int64_t *idx = (const int64_t *)tg_elem_ptr(index);
    TG_CUDA_DISPATCH_ALL(
        op, big->dtype,
        index_dim_kernel<scalar_t, ADD><<<blocks, TG_CUDA_THREADS, 0, stream>>>(
            (scalar_t *)tg_elem_ptr(out), (const scalar_t *)tg_elem_ptr(x), idx, outer, size, inner, n, flag.ptr));
    if (tg_cuda_check_launch(op)) return TG_ERROR;
    return flag.check(op, dim, size);
}

// gather (ADD false: out, index's shape, = x picked) and scatter_add (ADD true: x,
// index's shape, added into out); `big` as in index_dim.
template <bool ADD>
static tg_status gather_scatter(const char *op, tg_tensor *out, tg_tensor *x, int dim, tg_tensor *index) {
    if (check_index(op, index)) return TG_ERROR;
    if (ADD && x->dtype != out->dtype) return tg_error("%s: source and output dtypes differ", op);
    tg_tensor *big = ADD ? out : x;
    gather_geometry g = make_geometry(big->shape, index->shape, dim);
    if (g.numel == 0) return TG_OK;
    TG_CUDA_ENTER(op, big);
    int device = tg_cuda_device_of(big);
    index_flag flag(device, stream);
    if (!flag.ptr) return TG_ERROR;
    unsigned blocks = tg_cuda_blocks(g.numel, device);
    TG_CUDA_DISPATCH_ALL(op, big->dtype,
                         gather_kernel<scalar_t, ADD><<<blocks, TG_CUDA_THREADS, 0, stream>>>(
                             (scalar_t *)tg_elem_ptr(out), (const scalar_t *)tg_elem_ptr(x),
                             (const int64_t *)tg_elem_ptr(index), g, flag.ptr));
    if (tg_cuda_check_launch(op)) return TG_ERROR;
    return flag.check(op, dim, g.size);
}

extern "C" tg_status tg_cuda_index_select(tg_tensor *out, tg_tensor *x, int dim, tg_tensor *index) {
    return index_dim<false>("tg_index_select", out, x, dim, index);
}

extern "C" tg_status tg_cuda_index_add(tg_tensor *out, int dim, tg_tensor *index, tg_tensor *src) {
    return index_dim<true>("tg_index_add", out, src, dim, index);
}

extern "C" tg_status tg_cuda_gather(tg_tensor *out, tg_tensor *x, int dim, tg_tensor *index) {
    return gather_scatter<false>("tg_gather", out, x, dim, index);
}

extern "C" tg_status tg_cuda_scatter_add(tg_tensor *out, int dim, tg_tensor *index, tg_tensor *src) {
    return gather_scatter<true>("tg_scatter_add", out, src, dim, index);
}

extern "C" tg_status tg_cuda_one_hot(tg_tensor *out, tg_tensor *index) {
    const char *op = "tg_one_hot";
    if (check_index(op, index)) return TG_ERROR;
    if (out->dtype != TG_INT64 || out->shape.ndim < 1) return tg_error("%s: expected an int64 [..., C] output", op);
    int64_t n = tg_numel(index), classes = out->shape.dims[out->shape.ndim - 1];
    if (n == 0) return TG_OK;
    TG_CUDA_ENTER(op, out);
    int device = tg_cuda_device_of(out);
    index_flag flag(device, stream);
    if (!flag.ptr) return TG_ERROR;
    one_hot_kernel<<<tg_cuda_blocks(n, device), TG_CUDA_THREADS, 0, stream>>>(
        (int64_t *)tg_elem_ptr(out), (const int64_t *)tg_elem_ptr(index), n, classes, flag.ptr);
    if (tg_cuda_check_launch(op)) return TG_ERROR;
    bool bad;
    long long value;
    if (flag.read(op, &bad, &value)) return TG_ERROR;
    if (bad) /* the CPU's message (ops/gather.c) */
        return tg_error("%s: class value %lld is out of range [0, %lld)", op, value, (long long)classes);
    return TG_OK;
}
