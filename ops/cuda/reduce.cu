// CUDA kernels of ops/reduce.c, ops/reduce_extrema.c and ops/reduce_stats.c: sum,
// max/min with their indices, var, logsumexp and vector norms over any set of dims.
//
// The input is split as in ops/reduce_plan.h into kept ("outer", one output each)
// and reduced ("inner") dims. Two layouts:
//   rows    the reduced elements of one output are contiguous (sum over the last
//           dims, a full sum): a block per output (or a few, for long rows),
//           threads stride along the row, warp shuffles then shared memory combine.
//   columns the kept dims are the fast ones (sum over the batch dim of [N, C]):
//           a thread per output (32 outputs across a warp, so loads coalesce),
//           COLUMN_Y threads per output split the reduced range, shared memory combines.
// Long reductions with few outputs are split over several blocks that write
// partial results to scratch memory; a second row pass combines them
// (deterministic: no atomics). Every reduction is an "op" struct: identity, map
// (element -> accumulator), combine, write. Accumulators are double for float32,
// as on the CPU. var, std, logsumexp and norm are the rows of ops/reduce_formulas.h
// (stat_op), run after their row's first pass (var's mean, logsumexp's max) when it
// has one; the offsets are ops/reduce_plan.h's.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "ops/cuda/reduce.h"
#include "ops/reduce_formulas.h"
#include "ops/reduce_plan.h"

#define COLUMN_X 32 // outputs per column block
#define COLUMN_Y 8  // threads per output in a column block

// ============================ device helpers ============================

// A value and the reduced index it came from (max/min with indices).
template <typename V> struct value_index {
    V value;
    int64_t index; // INT64_MAX: nothing seen yet (the identity)
};

template <typename A> __device__ __forceinline__ A shfl_down(A v, int offset) {
    return __shfl_down_sync(0xffffffffu, v, offset);
}
template <typename V> __device__ __forceinline__ value_index<V> shfl_down(value_index<V> v, int offset) {
    v.value = __shfl_down_sync(0xffffffffu, v.value, offset);
    v.index = __shfl_down_sync(0xffffffffu, v.index, offset);
    return v;
}

// Combines v over the block (blockDim.x a multiple of 32, at most 1024); the result
// is valid in thread 0. `shared` holds 32 accumulators.
template <typename Op>
__device__ __forceinline__ typename Op::acc_t block_reduce(const Op &op, typename Op::acc_t v,
                                                           typename Op::acc_t *shared) {
    for (int o = 16; o > 0; o >>= 1) v = op.combine(v, shfl_down(v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    int warps = blockDim.x >> 5;
    v = lane < warps ? shared[lane] : op.identity();
    if (warp == 0)
        for (int o = 16; o > 0; o >>= 1) v = op.combine(v, shfl_down(v, o));
    __syncthreads(); // shared is reused by the block's next output
    return v;
}

// ============================ reduction ops ============================

// out[o] = sum (OUT may differ from T: the mean pass of var writes double).
template <typename T, typename OUT> struct sum_op {
    typedef T in_t;
    typedef typename tg_acc_type<T>::type acc_t;
    OUT *out;
    double divisor; // 1, or n for a mean (sum / n, the CPU's expression, not sum * (1/n))
    __device__ acc_t identity() const { return 0; }
    __device__ acc_t map(T x, int64_t, int64_t) const { return tg_cast_value<acc_t, T>(x); }
    __device__ acc_t combine(acc_t a, acc_t b) const { return a + b; }
    __device__ void write(acc_t a, int64_t o) const {
        if (divisor == 1) out[o] = tg_cast_value<OUT, acc_t>(a);
        else out[o] = tg_cast_value<OUT, double>((double)a / divisor);
    }
};

// Max or min and the first index where it occurs; NaN wins (PyTorch's max/argmax).
template <typename T> struct extreme_op {
    typedef T in_t;
    typedef typename std::conditional<std::is_floating_point<T>::value, T, int64_t>::type value_t;
    typedef value_index<value_t> acc_t;
    T *values;        // may be NULL
    int64_t *indices; // may be NULL
    bool is_max;
    __device__ acc_t identity() const { return acc_t{(value_t)0, INT64_MAX}; }
    __device__ acc_t map(T x, int64_t, int64_t k) const { return acc_t{(value_t)x, k}; }
    __device__ acc_t combine(acc_t a, acc_t b) const {
        if (a.index == INT64_MAX) return b;
        if (b.index == INT64_MAX) return a;
        bool a_nan = a.value != a.value, b_nan = b.value != b.value;
        if (a_nan || b_nan) {
            if (a_nan && b_nan) return a.index < b.index ? a : b;
            return a_nan ? a : b;
        }
        if (a.value != b.value) return (is_max ? a.value > b.value : a.value < b.value) ? a : b;
        return a.index < b.index ? a : b;
    }
    __device__ void write(acc_t a, int64_t o) const {
        if (values) values[o] = (T)a.value;
        if (indices) indices[o] = a.index;
    }
};

// One pass of a row of ops/reduce_formulas.h: out[o] = its finalised accumulator,
// OUT double for a first pass (into scratch) and T for the statistic; first[o] is the
// first pass's result (NULL: the row has none).
template <typename T, typename OUT> struct stat_op {
    typedef T in_t;
    typedef double acc_t;
    OUT *out;
    const double *first;
    tg_reduce_kind kind;
    double q, n; // the row's parameter; the reduced count
    __device__ double c(int64_t o) const { return first ? first[o] : 0.0; }
    __device__ acc_t identity() const { return tg_reduce_identity(kind, q); }
    __device__ acc_t map(T x, int64_t o, int64_t) const { return tg_reduce_map(kind, (double)x, c(o), q); }
    __device__ acc_t combine(acc_t a, acc_t b) const { return tg_reduce_combine(kind, a, b, q); }
    __device__ void write(acc_t a, int64_t o) const { out[o] = (OUT)tg_reduce_finalise(kind, a, n, c(o), q); }
};

// ============================ kernels ============================

// Rows. grid (splits, rows): block (s, y) reduces part s of outputs y, y + gridDim.y, ...
// x: the input's first element, or (FROM_PARTIAL) partial results [outer, splits']
// with p describing them. splits == 1: op.write(result, o); else
// partial[o * splits + s] = result (partial [outer, splits]).
template <typename Op, bool FROM_PARTIAL>
__global__ void
reduce_rows_kernel(tg_reduce_plan p,
                   const typename std::conditional<FROM_PARTIAL, typename Op::acc_t, typename Op::in_t>::type *x, Op op,
                   typename Op::acc_t *partial) {
    typedef typename Op::acc_t acc_t;
    __shared__ acc_t shared[32];
    int splits = gridDim.x, s = blockIdx.x;
    int64_t stride = (int64_t)splits * blockDim.x;
    for (int64_t o = blockIdx.y; o < p.outer_numel; o += gridDim.y) {
        const auto *base = x + tg_reduce_outer_offset(&p, o);
        acc_t acc = op.identity();
        for (int64_t k = (int64_t)s * blockDim.x + threadIdx.x; k < p.inner_numel; k += stride) {
            if constexpr (FROM_PARTIAL) acc = op.combine(acc, base[tg_reduce_inner_offset(&p, k)]);
            else acc = op.combine(acc, op.map(base[tg_reduce_inner_offset(&p, k)], o, k));
        }
        acc = block_reduce(op, acc, shared);
        if (threadIdx.x == 0) {
            if (splits == 1) op.write(acc, o);
            else partial[o * splits + s] = acc;
        }
    }
}

// Columns. block (COLUMN_X, COLUMN_Y), grid (ceil(outer / COLUMN_X) or fewer, splits):
// output o = blockIdx.x * COLUMN_X + threadIdx.x (grid-stride); threads y and block
// part s share its reduced range. Writes op.write (splits == 1) or partial[o * splits + s].
template <typename Op>
__global__ void reduce_columns_kernel(tg_reduce_plan p, const typename Op::in_t *x, Op op,
                                      typename Op::acc_t *partial) {
    typedef typename Op::acc_t acc_t;
    __shared__ acc_t shared[COLUMN_Y][COLUMN_X];
    int splits = gridDim.y, s = blockIdx.y;
    int64_t stride = (int64_t)splits * COLUMN_Y;
    for (int64_t first = (int64_t)blockIdx.x * COLUMN_X; first < p.outer_numel;
         first += (int64_t)gridDim.x * COLUMN_X) {
        int64_t o = first + threadIdx.x;
        acc_t acc = op.identity();
        if (o < p.outer_numel) {
            const typename Op::in_t *base = x + tg_reduce_outer_offset(&p, o);
            for (int64_t k = (int64_t)s * COLUMN_Y + threadIdx.y; k < p.inner_numel; k += stride)
                acc = op.combine(acc, op.map(base[tg_reduce_inner_offset(&p, k)], o, k));
        }
        shared[threadIdx.y][threadIdx.x] = acc;
        __syncthreads();
        if (threadIdx.y == 0 && o < p.outer_numel) {
            for (int y = 1; y < COLUMN_Y; y++) acc = op.combine(acc, shared[y][threadIdx.x]);
            if (splits == 1) op.write(acc, o);
            else partial[o * splits + s] = acc;
        }
        __syncthreads();
    }
}

// ============================ launchers ============================

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

// Runs `op` over x as planned by p (on x's device and stream).
template <typename Op>
static tg_status launch_reduce(const char *name, const tg_reduce_plan &p, const typename Op::in_t *x, const Op &op,
                               int device, cudaStream_t stream) {
    typedef typename Op::acc_t acc_t;
    if (p.outer_numel == 0) return TG_OK;
    int64_t target = (int64_t)tg_cuda_sm_count(device) * 4; // blocks that fill the GPU
    bool rows =
        p.outer_numel == 1 || (p.inner_ndim >= 1 && p.inner_strides[p.inner_ndim - 1] == 1 && p.inner_numel >= 32);
    int64_t splits = 1;
    unsigned threads = 256;
    if (rows) {
        if (p.outer_numel < target && p.inner_numel > 8192)
            splits = clamp64(ceil_div(target, p.outer_numel), 1, clamp64(ceil_div(p.inner_numel, 4096), 1, 1024));
        if (p.inner_numel < 256) threads = p.inner_numel <= 32 ? 32 : p.inner_numel <= 64 ? 64 : 128;
    } else {
        int64_t column_blocks = ceil_div(p.outer_numel, COLUMN_X);
        if (column_blocks < target && p.inner_numel > 1024)
            splits = clamp64(ceil_div(target, column_blocks), 1, clamp64(ceil_div(p.inner_numel, 512), 1, 1024));
    }
    acc_t *partial = nullptr;
    size_t partial_bytes = 0;
    if (splits > 1) {
        partial_bytes = (size_t)(p.outer_numel * splits) * sizeof(acc_t);
        partial = (acc_t *)tg_cuda_scratch_alloc(device, partial_bytes);
        if (!partial) return TG_ERROR;
    }
    if (rows) {
        dim3 grid((unsigned)splits, (unsigned)clamp64(p.outer_numel, 1, 65535));
        reduce_rows_kernel<Op, false><<<grid, threads, 0, stream>>>(p, x, op, partial);
    } else {
        dim3 grid((unsigned)clamp64(ceil_div(p.outer_numel, COLUMN_X), 1, 65535), (unsigned)splits);
        reduce_columns_kernel<Op><<<grid, dim3(COLUMN_X, COLUMN_Y), 0, stream>>>(p, x, op, partial);
    }
    tg_status status = tg_cuda_check_launch(name);
    if (status == TG_OK && splits > 1) { // second pass over partial [outer, splits]
        tg_reduce_plan q = {};
        q.outer_ndim = q.inner_ndim = 1;
        q.outer_shape[0] = q.outer_numel = p.outer_numel;
        q.outer_strides[0] = splits;
        q.inner_shape[0] = q.inner_numel = splits;
        q.inner_strides[0] = 1;
        dim3 grid(1, (unsigned)clamp64(p.outer_numel, 1, 65535));
        unsigned t2 = splits <= 32 ? 32 : splits <= 128 ? 128 : 256;
        reduce_rows_kernel<Op, true><<<grid, t2, 0, stream>>>(q, partial, op, (acc_t *)nullptr);
        status = tg_cuda_check_launch(name);
    }
    if (partial) tg_cuda_scratch_free(device, partial, partial_bytes); // see STREAM ORDER (runtime.cu)
    return status;
}

static tg_status check_output(const char *op, tg_tensor *out, tg_dtype dtype) {
    if (!out) return TG_OK;
    if (out->dtype != dtype)
        return tg_error("%s: CUDA kernel expects a %s output, got %s", op, tg_dtype_name(dtype),
                        tg_dtype_name(out->dtype));
    if (!tg_is_contiguous(out)) return tg_error("%s: CUDA kernel expects a contiguous output", op);
    return TG_OK;
}

template <typename T> static tg_status run_sum(tg_tensor *out, tg_tensor *x, const bool *reduce, cudaStream_t stream) {
    tg_reduce_plan p;
    tg_reduce_plan_init(&p, x, reduce);
    sum_op<T, T> op = {(T *)tg_elem_ptr(out), 1.0};
    return launch_reduce("tg_sum", p, (const T *)tg_elem_ptr(x), op, tg_cuda_device_of(x), stream);
}

template <typename T>
static tg_status run_extreme(tg_tensor *values, tg_tensor *indices, tg_tensor *x, const bool *reduce, bool is_max,
                             cudaStream_t stream) {
    tg_reduce_plan p;
    tg_reduce_plan_init(&p, x, reduce);
    extreme_op<T> op = {values ? (T *)tg_elem_ptr(values) : nullptr,
                        indices ? (int64_t *)tg_elem_ptr(indices) : nullptr, is_max};
    return launch_reduce(is_max ? "tg_max" : "tg_min", p, (const T *)tg_elem_ptr(x), op, tg_cuda_device_of(x), stream);
}

// Scratch [outer] doubles for a row's first pass.
struct scratch_doubles {
    int device;
    size_t bytes;
    double *ptr;
    scratch_doubles(int d, int64_t n) : device(d), bytes((size_t)(n > 0 ? n : 1) * sizeof(double)) {
        ptr = (double *)tg_cuda_scratch_alloc(device, bytes);
    }
    ~scratch_doubles() {
        if (ptr) tg_cuda_scratch_free(device, ptr, bytes); // see STREAM ORDER (runtime.cu)
    }
};

template <typename T>
static tg_status run_stat(const char *name, tg_tensor *out, tg_tensor *x, const bool *reduce, tg_reduce_kind kind,
                          double q, cudaStream_t stream) {
    int device = tg_cuda_device_of(x);
    tg_reduce_plan p;
    tg_reduce_plan_init(&p, x, reduce);
    const T *xp = (const T *)tg_elem_ptr(x);
    double n = (double)p.inner_numel;
    tg_reduce_kind first = tg_reduce_first(kind);
    if (first == TG_REDUCE_NONE) {
        stat_op<T, T> op = {(T *)tg_elem_ptr(out), nullptr, kind, q, n};
        return launch_reduce(name, p, xp, op, device, stream);
    }
    scratch_doubles c(device, p.outer_numel);
    if (!c.ptr) return TG_ERROR;
    stat_op<T, double> first_op = {c.ptr, nullptr, first, q, n};
    if (launch_reduce(name, p, xp, first_op, device, stream)) return TG_ERROR;
    stat_op<T, T> op = {(T *)tg_elem_ptr(out), c.ptr, kind, q, n};
    return launch_reduce(name, p, xp, op, device, stream);
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_sum(tg_tensor *out, tg_tensor *x, const bool *reduce) {
    const char *op = "tg_sum";
    if (check_output(op, out, x->dtype)) return TG_ERROR;
    TG_CUDA_ENTER(op, x);
    switch (x->dtype) {
    case TG_FLOAT32: return run_sum<float>(out, x, reduce, stream);
    case TG_FLOAT64: return run_sum<double>(out, x, reduce, stream);
    case TG_FLOAT16: return run_sum<tg_half_t>(out, x, reduce, stream);
    case TG_BFLOAT16: return run_sum<tg_bf16_t>(out, x, reduce, stream);
    case TG_INT64: return run_sum<int64_t>(out, x, reduce, stream);
    default:
        return tg_error("%s: dtype %s has no CUDA kernel (float32, float64, float16, bfloat16, int64)", op,
                        tg_dtype_name(x->dtype));
    }
}

extern "C" tg_status tg_cuda_extreme(tg_tensor *values, tg_tensor *indices, tg_tensor *x, const bool *reduce,
                                     bool is_max) {
    const char *op = is_max ? "tg_max" : "tg_min";
    if (check_output(op, values, x->dtype) || check_output(op, indices, TG_INT64)) return TG_ERROR;
    if (!values && !indices) return TG_OK;
    TG_CUDA_ENTER(op, x);
    switch (x->dtype) {
    case TG_FLOAT32: return run_extreme<float>(values, indices, x, reduce, is_max, stream);
    case TG_FLOAT64: return run_extreme<double>(values, indices, x, reduce, is_max, stream);
    case TG_INT64: return run_extreme<int64_t>(values, indices, x, reduce, is_max, stream);
    case TG_INT32: return run_extreme<int32_t>(values, indices, x, reduce, is_max, stream);
    case TG_UINT8:
    case TG_BOOL: /* as the CPU (extreme_u8): bool bytes are 0 or 1 */
        return run_extreme<uint8_t>(values, indices, x, reduce, is_max, stream);
    default: return tg_error("%s: dtype %s has no CUDA kernel", op, tg_dtype_name(x->dtype));
    }
}

extern "C" tg_status tg_cuda_stat(const char *op, tg_tensor *out, tg_tensor *x, const bool *reduce, tg_reduce_kind kind,
                                  double q) {
    if (check_output(op, out, x->dtype)) return TG_ERROR;
    TG_CUDA_ENTER(op, x);
    switch (x->dtype) {
    case TG_FLOAT32: return run_stat<float>(op, out, x, reduce, kind, q, stream);
    case TG_FLOAT64: return run_stat<double>(op, out, x, reduce, kind, q, stream);
    default: return tg_error("%s: expected float32 or float64 on CUDA, got %s", op, tg_dtype_name(x->dtype));
    }
}
