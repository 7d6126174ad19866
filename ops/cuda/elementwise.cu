// CUDA kernels of ops/elementwise.c: every tg_unary_kind and tg_binary_kind, and
// where. Each kind computes exactly the CPU expression (ops/elementwise.c), in the
// element type; float16 / bfloat16 elements (tg_half_t / tg_bf16_t storage) are widened
// to float32, computed by the float32 row and rounded once with core/lowp.h's
// conversion, as the CPU computes them. Two paths per op: all operands contiguous with one shape (vector
// loads of 16 bytes when every pointer allows it), and the general one (up to
// TG_MAX_DIMS dims, broadcasting by stride 0, any strides; see tg_indexer).
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "core/tensor_impl.h"
#include "ops/cuda/elementwise.h"
#include "core/cuda/internal.h"
#include "ops/binary_formulas.h"
#include "ops/unary_formulas.h"
#include "core/typed_libm.h" // TG_EXP and the rest, tg_int_pow: the rows' libm on both devices

// ============================ element functions ============================

struct unary_params {
    tg_unary_kind kind;
    double a, b; // the op's scalar parameters, converted to T in the kernel as the CPU does
};

#define UNARY_DEVICE_CASE(KIND, expr) \
    case TG_UNARY_##KIND: return expr;
// A float row's formula column (its other columns are the host's autograd).
#define UNARY_DEVICE_FLOAT_CASE(KIND, name, api, saves, autocast, expr, grad) UNARY_DEVICE_CASE(KIND, expr)

// y = f(x) for float32/float64: the rows of ops/unary_formulas.h, as on the CPU.
template <typename scalar_t> __device__ __forceinline__ scalar_t unary_float(const unary_params &p, scalar_t x) {
    const scalar_t a = (scalar_t)p.a, b = (scalar_t)p.b;
    switch (p.kind) {
        TG_UNARY_FLOAT_FORMULAS(UNARY_DEVICE_FLOAT_CASE)
    default: return x;
    }
}

// y = f(x) for int64/int32: the rows of TG_UNARY_INT_FORMULAS (ops/unary_formulas.h),
// as the CPU's INT_UNARY_ROW; other kinds are refused on the host (tg_unary_int_kind_ok).
template <typename T> __device__ __forceinline__ T unary_int(const unary_params &p, T x) {
    typedef T scalar_t;
    const T a = (T)p.a, b = (T)p.b;
    const double pa = p.a, pb = p.b;
    switch (p.kind) {
        TG_UNARY_INT_FORMULAS(UNARY_DEVICE_CASE)
    default: return x;
    }
}

// float16 / bfloat16 storage types (core/cuda/internal.h), computed in float32 registers.
template <typename T>
constexpr bool is_low_precision_v = std::is_same<T, tg_half_t>::value || std::is_same<T, tg_bf16_t>::value;

template <typename T> __device__ __forceinline__ T unary_apply(const unary_params &p, T x) {
    if constexpr (is_low_precision_v<T>)
        return tg_cast_value<T, float>(unary_float<float>(p, tg_cast_value<float, T>(x)));
    else if constexpr (std::is_floating_point<T>::value) return unary_float<T>(p, x);
    else return unary_int<T>(p, x);
}

#define BINARY_DEVICE_CASE(KIND, expr) \
    case TG_BINARY_##KIND: return expr;
// The formula column of the arithmetic and comparison rows (the rest is the host's autograd).
#define BINARY_DEVICE_ARITH_CASE(KIND, name, expr, saves, grad_a, grad_b) BINARY_DEVICE_CASE(KIND, expr)
#define BINARY_DEVICE_COMPARE_CASE(KIND, name, expr) BINARY_DEVICE_CASE(KIND, expr)

// z = f(x, y): the rows of ops/binary_formulas.h, as on the CPU; arithmetic kinds give
// T, comparisons bool. The floating and integer tables only where the CPU has them
// (uint8 and bool fmod are refused on the host).
template <typename T> __device__ __forceinline__ T binary_arith(tg_binary_kind kind, T x, T y) {
    typedef T scalar_t;
    switch (kind) {
        TG_BINARY_FORMULAS(BINARY_DEVICE_ARITH_CASE)
    case TG_BINARY_POW:
        if constexpr (std::is_floating_point<T>::value) return TG_POW(x, y);
        else return (T)TG_BINARY_INT_POW(x, y);
    default: break;
    }
    if constexpr (std::is_floating_point<T>::value) {
        switch (kind) {
            TG_BINARY_FLOAT_FORMULAS(BINARY_DEVICE_ARITH_CASE)
        default: break;
        }
    } else if constexpr (std::is_same<T, int64_t>::value || std::is_same<T, int32_t>::value) {
        switch (kind) {
            TG_BINARY_INT_FORMULAS(BINARY_DEVICE_CASE)
        default: break;
        }
    }
    return x;
}

template <typename T> __device__ __forceinline__ bool binary_compare(tg_binary_kind kind, T x, T y) {
    switch (kind) {
        TG_BINARY_COMPARE_FORMULAS(BINARY_DEVICE_COMPARE_CASE)
    default: return false;
    }
}

template <typename T, typename O> __device__ __forceinline__ O binary_apply(tg_binary_kind kind, T x, T y) {
    if constexpr (is_low_precision_v<T>) { // O is T (arithmetic) or bool (comparisons)
        float fx = tg_cast_value<float, T>(x), fy = tg_cast_value<float, T>(y);
        if constexpr (std::is_same<O, bool>::value) return binary_compare<float>(kind, fx, fy);
        else return tg_cast_value<T, float>(binary_arith<float>(kind, fx, fy));
    } else if constexpr (std::is_same<O, T>::value) // bool inputs: O == T for comparisons too
        return TG_BINARY_IS_COMPARISON(kind) ? (T)binary_compare<T>(kind, x, y) : binary_arith<T>(kind, x, y);
    else return binary_compare<T>(kind, x, y);
}

// 16 bytes of elements, for vector loads and stores.
template <typename T> struct alignas(16) vec16 {
    static constexpr int N = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
    T v[N];
};

// ============================ kernels ============================

// out[i] = f(x[i]), i < n; out and x contiguous. VEC: every pointer 16-byte aligned,
// so whole vec16 chunks are loaded at once; the n % N tail goes element by element.
template <typename T, bool VEC> __global__ void unary_contiguous_kernel(int64_t n, T *out, const T *x, unary_params p) {
    int64_t start = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, step = (int64_t)gridDim.x * blockDim.x;
    int64_t done = 0;
    if constexpr (VEC) {
        constexpr int N = vec16<T>::N;
        int64_t chunks = n / N;
        const vec16<T> *xv = (const vec16<T> *)x;
        vec16<T> *ov = (vec16<T> *)out;
        for (int64_t c = start; c < chunks; c += step) {
            vec16<T> v = xv[c];
#pragma unroll
            for (int k = 0; k < N; k++) v.v[k] = unary_apply<T>(p, v.v[k]);
            ov[c] = v;
        }
        done = chunks * N;
    }
    for (int64_t i = done + start; i < n; i += step) out[i] = unary_apply<T>(p, x[i]);
}

// out = f(x) with x broadcast to out's shape, any strides. ix: 0 out, 1 x.
template <typename T> __global__ void unary_strided_kernel(tg_indexer<2> ix, T *out, const T *x, unary_params p) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < ix.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[2];
        ix.offsets(i, off);
        out[off[0]] = unary_apply<T>(p, x[off[1]]);
    }
}

// out[i] = f(a[i], b[i]), i < n, all contiguous; O is T, or bool for comparisons
// (vector loads only where O and T have one size).
template <typename T, typename O, bool VEC>
__global__ void binary_contiguous_kernel(int64_t n, O *out, const T *a, const T *b, tg_binary_kind kind) {
    int64_t start = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, step = (int64_t)gridDim.x * blockDim.x;
    int64_t done = 0;
    if constexpr (VEC && sizeof(O) == sizeof(T)) {
        constexpr int N = vec16<T>::N;
        int64_t chunks = n / N;
        const vec16<T> *av = (const vec16<T> *)a, *bv = (const vec16<T> *)b;
        vec16<O> *ov = (vec16<O> *)out;
        for (int64_t c = start; c < chunks; c += step) {
            vec16<T> x = av[c], y = bv[c];
            vec16<O> z;
#pragma unroll
            for (int k = 0; k < N; k++) z.v[k] = binary_apply<T, O>(kind, x.v[k], y.v[k]);
            ov[c] = z;
        }
        done = chunks * N;
    }
    for (int64_t i = done + start; i < n; i += step) out[i] = binary_apply<T, O>(kind, a[i], b[i]);
}

// out = f(a, b) broadcast to out's shape, any strides. ix: 0 out, 1 a, 2 b.
template <typename T, typename O>
__global__ void binary_strided_kernel(tg_indexer<3> ix, O *out, const T *a, const T *b, tg_binary_kind kind) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < ix.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        ix.offsets(i, off);
        out[off[0]] = binary_apply<T, O>(kind, a[off[1]], b[off[2]]);
    }
}

// out = cond ? a : b, broadcast; E an unsigned type of the element's size (the
// selection only moves bits). ix: 0 out, 1 cond, 2 a, 3 b.
template <typename E> __global__ void where_kernel(tg_indexer<4> ix, E *out, const bool *cond, const E *a, const E *b) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < ix.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[4];
        ix.offsets(i, off);
        out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
    }
}

// ============================ launchers ============================

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

template <typename T>
static tg_status launch_unary(const char *op, tg_tensor *out, tg_tensor *x, unary_params p, cudaStream_t stream) {
    tg_tensor *ops[2] = {out, x};
    tg_indexer<2> ix = tg_make_indexer<2>(out->shape, ops);
    if (ix.numel == 0) return TG_OK;
    int device = tg_cuda_device_of(out);
    T *o = (T *)tg_elem_ptr(out);
    const T *xp = (const T *)tg_elem_ptr(x);
    if (tg_indexer_contiguous(ix)) {
        unsigned blocks = tg_cuda_blocks((ix.numel + vec16<T>::N - 1) / vec16<T>::N, device);
        if (aligned16(o) && aligned16(xp))
            unary_contiguous_kernel<T, true><<<blocks, TG_CUDA_THREADS, 0, stream>>>(ix.numel, o, xp, p);
        else
            unary_contiguous_kernel<T, false>
                <<<tg_cuda_blocks(ix.numel, device), TG_CUDA_THREADS, 0, stream>>>(ix.numel, o, xp, p);
    } else {
        unary_strided_kernel<T><<<tg_cuda_blocks(ix.numel, device), TG_CUDA_THREADS, 0, stream>>>(ix, o, xp, p);
    }
    return tg_cuda_check_launch(op);
}

template <typename T, typename O>
static tg_status launch_binary(const char *op, tg_binary_kind kind, tg_tensor *out, tg_tensor *a, tg_tensor *b,
                               cudaStream_t stream) {
    tg_tensor *ops[3] = {out, a, b};
    tg_indexer<3> ix = tg_make_indexer<3>(out->shape, ops);
    if (ix.numel == 0) return TG_OK;
    int device = tg_cuda_device_of(out);
    O *o = (O *)tg_elem_ptr(out);
    const T *ap = (const T *)tg_elem_ptr(a), *bp = (const T *)tg_elem_ptr(b);
    if (tg_indexer_contiguous(ix)) {
        if (sizeof(O) == sizeof(T) && aligned16(o) && aligned16(ap) && aligned16(bp))
            binary_contiguous_kernel<T, O, true>
                <<<tg_cuda_blocks((ix.numel + vec16<T>::N - 1) / vec16<T>::N, device), TG_CUDA_THREADS, 0, stream>>>(
                    ix.numel, o, ap, bp, kind);
        else
            binary_contiguous_kernel<T, O, false>
                <<<tg_cuda_blocks(ix.numel, device), TG_CUDA_THREADS, 0, stream>>>(ix.numel, o, ap, bp, kind);
    } else {
        binary_strided_kernel<T, O>
            <<<tg_cuda_blocks(ix.numel, device), TG_CUDA_THREADS, 0, stream>>>(ix, o, ap, bp, kind);
    }
    return tg_cuda_check_launch(op);
}

template <typename E>
static tg_status launch_where(tg_tensor *out, tg_tensor *cond, tg_tensor *a, tg_tensor *b, cudaStream_t stream) {
    tg_tensor *ops[4] = {out, cond, a, b};
    tg_indexer<4> ix = tg_make_indexer<4>(out->shape, ops);
    if (ix.numel == 0) return TG_OK;
    where_kernel<E><<<tg_cuda_blocks(ix.numel, tg_cuda_device_of(out)), TG_CUDA_THREADS, 0, stream>>>(
        ix, (E *)tg_elem_ptr(out), (const bool *)tg_elem_ptr(cond), (const E *)tg_elem_ptr(a),
        (const E *)tg_elem_ptr(b));
    return tg_cuda_check_launch("tg_where");
}

static tg_status check_dtypes(const char *op, tg_tensor *out, tg_tensor *x) {
    if (x->dtype == out->dtype) return TG_OK;
    return tg_error("%s: CUDA kernel expects the input in the output's dtype %s, got %s", op, tg_dtype_name(out->dtype),
                    tg_dtype_name(x->dtype));
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_unary(tg_unary_kind kind, tg_tensor *out, tg_tensor *x, double a, double b) {
    const char *op = "tg_unary (CUDA)";
    if (check_dtypes(op, out, x)) return TG_ERROR;
    TG_CUDA_ENTER(op, out);
    unary_params p = {kind, a, b};
    switch (x->dtype) {
    case TG_FLOAT32: return launch_unary<float>(op, out, x, p, stream);
    case TG_FLOAT64: return launch_unary<double>(op, out, x, p, stream);
    case TG_FLOAT16: return launch_unary<tg_half_t>(op, out, x, p, stream);
    case TG_BFLOAT16: return launch_unary<tg_bf16_t>(op, out, x, p, stream);
    case TG_INT64:
        if (tg_unary_int_kind_ok(kind)) return launch_unary<int64_t>(op, out, x, p, stream);
        break;
    case TG_INT32:
        if (tg_unary_int_kind_ok(kind)) return launch_unary<int32_t>(op, out, x, p, stream);
        break;
    default: break;
    }
    return tg_error("%s: kind %d not implemented for dtype %s", op, (int)kind, tg_dtype_name(x->dtype));
}

extern "C" tg_status tg_cuda_binary(tg_binary_kind kind, tg_tensor *out, tg_tensor *a, tg_tensor *b) {
    const char *op = "tg_binary (CUDA)";
    if (a->dtype != b->dtype)
        return tg_error("%s: CUDA kernel expects one input dtype, got %s and %s", op, tg_dtype_name(a->dtype),
                        tg_dtype_name(b->dtype));
    bool compare = TG_BINARY_IS_COMPARISON(kind);
    if (compare ? out->dtype != TG_BOOL : check_dtypes(op, out, a) != TG_OK)
        return compare ? tg_error("%s: comparison output must be bool, got %s", op, tg_dtype_name(out->dtype))
                       : TG_ERROR;
    TG_CUDA_ENTER(op, out);
    if (a->dtype == TG_FLOAT16)
        return compare ? launch_binary<tg_half_t, bool>(op, kind, out, a, b, stream)
                       : launch_binary<tg_half_t, tg_half_t>(op, kind, out, a, b, stream);
    if (a->dtype == TG_BFLOAT16)
        return compare ? launch_binary<tg_bf16_t, bool>(op, kind, out, a, b, stream)
                       : launch_binary<tg_bf16_t, tg_bf16_t>(op, kind, out, a, b, stream);
    if (compare) {
        TG_CUDA_DISPATCH_ALL(op, a->dtype, return launch_binary<scalar_t, bool>(op, kind, out, a, b, stream));
    } else {
        TG_CUDA_DISPATCH_ALL(op, a->dtype, return launch_binary<scalar_t, scalar_t>(op, kind, out, a, b, stream));
    }
    return TG_OK;
}

extern "C" tg_status tg_cuda_where(tg_tensor *out, tg_tensor *cond, tg_tensor *a, tg_tensor *b) {
    const char *op = "tg_where";
    if (cond->dtype != TG_BOOL) return tg_error("%s: condition must be bool, got %s", op, tg_dtype_name(cond->dtype));
    if (check_dtypes(op, out, a) || check_dtypes(op, out, b)) return TG_ERROR;
    TG_CUDA_ENTER(op, out);
    switch (tg_dtype_size(out->dtype)) {
    case 1: return launch_where<uint8_t>(out, cond, a, b, stream);
    case 2: return launch_where<uint16_t>(out, cond, a, b, stream);
    case 4: return launch_where<uint32_t>(out, cond, a, b, stream);
    case 8: return launch_where<uint64_t>(out, cond, a, b, stream);
    default: return tg_error("%s: dtype %s has no CUDA kernel", op, tg_dtype_name(out->dtype));
    }
}
