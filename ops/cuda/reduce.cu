// CUDA kernels of ops/reduce.c: sum over any set of dims (mean is sum / count).
//
// The input is split as in ops/reduce_plan.h into kept ("outer", one output each)
// and reduced ("inner") dims. Two layouts:
//   rows    the reduced elements of one output are contiguous (sum over the last
//           dims, a full sum): a block per output (or a few, for long rows),
//           threads stride along the row, warp shuffles combine.
//   columns the kept dims are the fast ones (sum over the batch dim of [N, C]):
//           a thread per output (32 outputs across a warp, so loads coalesce),
//           8 threads per output split the reduced range, shared memory combines.
// Long reductions with few outputs are split over several blocks that write
// partial sums to scratch memory; a second row pass adds them (deterministic: no
// atomics). Accumulators are double for float32, as on the CPU.
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "ops/cuda/internal.h"
#include "ops/cuda/reduce.h"
#include "ops/reduce_plan.h"

#define COLUMN_X 32 // outputs per column block
#define COLUMN_Y 8  // threads per output in a column block

// ============================ device helpers ============================

__device__ __forceinline__ int64_t outer_offset(const tg_reduce_plan &p, int64_t o) {
    int64_t off = 0;
    for (int d = p.outer_ndim - 1; d >= 0; d--) {
        off += (o % p.outer_shape[d]) * p.outer_strides[d];
        o /= p.outer_shape[d];
    }
    return off;
}

__device__ __forceinline__ int64_t inner_offset(const tg_reduce_plan &p, int64_t k) {
    if (p.inner_ndim == 1) return k * p.inner_strides[0];
    int64_t off = 0;
    for (int d = p.inner_ndim - 1; d >= 0; d--) {
        off += (k % p.inner_shape[d]) * p.inner_strides[d];
        k /= p.inner_shape[d];
    }
    return off;
}

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024); the result
// is valid in thread 0. `shared` holds 32 ACC.
template <typename ACC> __device__ __forceinline__ ACC block_sum(ACC v, ACC *shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    int warps = blockDim.x >> 5;
    v = threadIdx.x < warps ? shared[lane] : (ACC)0;
    if (warp == 0)
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    __syncthreads(); // shared is reused by the next row
    return v;
}

// ============================ kernels ============================

// Rows. grid (splits, rows): block (s, y) sums part s of rows y, y + gridDim.y, ...
// x: input (first element); p: the plan. splits == 1: out[o] = (OUT)sum, out
// contiguous [outer_numel]; else partial[o * splits + s] = sum, partial [outer_numel, splits].
template <typename IN, typename OUT, typename ACC>
__global__ void sum_rows_kernel(tg_reduce_plan p, const IN *x, OUT *out, ACC *partial) {
    __shared__ ACC shared[32];
    int splits = gridDim.x, s = blockIdx.x;
    int64_t stride = (int64_t)splits * blockDim.x;
    for (int64_t o = blockIdx.y; o < p.outer_numel; o += gridDim.y) {
        const IN *base = x + outer_offset(p, o);
        ACC acc = 0;
        for (int64_t k = (int64_t)s * blockDim.x + threadIdx.x; k < p.inner_numel; k += stride)
            acc += (ACC)base[inner_offset(p, k)];
        acc = block_sum<ACC>(acc, shared);
        if (threadIdx.x == 0) {
            if (splits == 1)
                out[o] = (OUT)acc;
            else
                partial[o * splits + s] = acc;
        }
    }
}

// Columns. block (COLUMN_X, COLUMN_Y), grid (ceil(outer / COLUMN_X) or fewer, splits):
// output o = blockIdx.x * COLUMN_X + threadIdx.x (grid-stride), threads y and block
// part s share its reduced range. Writes out[o] (splits == 1) or partial[o * splits + s].
template <typename IN, typename OUT, typename ACC>
__global__ void sum_columns_kernel(tg_reduce_plan p, const IN *x, OUT *out, ACC *partial) {
    __shared__ ACC shared[COLUMN_Y][COLUMN_X];
    int splits = gridDim.y, s = blockIdx.y;
    int64_t stride = (int64_t)splits * COLUMN_Y;
    for (int64_t base_o = (int64_t)blockIdx.x * COLUMN_X; base_o < p.outer_numel; base_o += (int64_t)gridDim.x * COLUMN_X) {
        int64_t o = base_o + threadIdx.x;
        ACC acc = 0;
        if (o < p.outer_numel) {
            const IN *base = x + outer_offset(p, o);
            for (int64_t k = (int64_t)s * COLUMN_Y + threadIdx.y; k < p.inner_numel; k += stride)
                acc += (ACC)base[inner_offset(p, k)];
        }
        shared[threadIdx.y][threadIdx.x] = acc;
        __syncthreads();
        if (threadIdx.y == 0 && o < p.outer_numel) {
            for (int y = 1; y < COLUMN_Y; y++) acc += shared[y][threadIdx.x];
            if (splits == 1)
                out[o] = (OUT)acc;
            else
                partial[o * splits + s] = acc;
        }
        __syncthreads();
    }
}

// ============================ launchers ============================

// The plan of a contiguous [outer, inner] matrix summed over its rows.
static tg_reduce_plan matrix_rows_plan(int64_t outer, int64_t inner) {
    tg_reduce_plan p = {};
    p.outer_ndim = 1;
    p.outer_shape[0] = outer;
    p.outer_strides[0] = inner;
    p.outer_numel = outer;
    p.inner_ndim = 1;
    p.inner_shape[0] = inner;
    p.inner_strides[0] = 1;
    p.inner_numel = inner;
    return p;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

template <typename T> static tg_status launch_sum(tg_tensor *out, tg_tensor *x, const bool *reduce, cudaStream_t stream) {
    typedef typename tg_acc_type<T>::type ACC;
    const char *op = "tg_sum";
    int device = tg_cuda_device_of(x);
    tg_reduce_plan p;
    tg_reduce_plan_init(&p, x, reduce);
    if (p.outer_numel == 0) return TG_OK;
    const T *xp = (const T *)tg_elem_ptr(x);
    T *op_out = (T *)tg_elem_ptr(out);
    int64_t target = (int64_t)tg_cuda_sm_count(device) * 4; // blocks that fill the GPU
    bool rows = p.outer_numel == 1 ||
                (p.inner_ndim >= 1 && p.inner_strides[p.inner_ndim - 1] == 1 && p.inner_numel >= 32);
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
    ACC *partial = nullptr;
    size_t partial_bytes = 0;
    if (splits > 1) {
        partial_bytes = (size_t)(p.outer_numel * splits) * sizeof(ACC);
        partial = (ACC *)tg_cuda_scratch_alloc(device, partial_bytes);
        if (!partial) return TG_ERROR;
    }
    if (rows) {
        dim3 grid((unsigned)splits, (unsigned)clamp64(p.outer_numel, 1, 65535));
        sum_rows_kernel<T, T, ACC><<<grid, threads, 0, stream>>>(p, xp, op_out, partial);
    } else {
        dim3 grid((unsigned)clamp64(ceil_div(p.outer_numel, COLUMN_X), 1, 65535), (unsigned)splits);
        sum_columns_kernel<T, T, ACC><<<grid, dim3(COLUMN_X, COLUMN_Y), 0, stream>>>(p, xp, op_out, partial);
    }
    tg_status status = tg_cuda_check_launch(op);
    if (status == TG_OK && splits > 1) { // second pass: out[o] = sum of partial[o, :]
        tg_reduce_plan q = matrix_rows_plan(p.outer_numel, splits);
        dim3 grid(1, (unsigned)clamp64(p.outer_numel, 1, 65535));
        unsigned t2 = splits <= 32 ? 32 : splits <= 128 ? 128 : 256;
        sum_rows_kernel<ACC, T, ACC><<<grid, t2, 0, stream>>>(q, partial, op_out, (ACC *)nullptr);
        status = tg_cuda_check_launch(op);
    }
    if (partial) tg_cuda_scratch_free(device, partial, partial_bytes); // see STREAM ORDER (runtime.cu)
    return status;
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_sum(tg_tensor *out, tg_tensor *x, const bool *reduce) {
    const char *op = "tg_sum";
    if (out->dtype != x->dtype)
        return tg_error("%s: CUDA kernel expects the output in the input's dtype %s, got %s", op,
                        tg_dtype_name(x->dtype), tg_dtype_name(out->dtype));
    if (!tg_is_contiguous(out)) return tg_error("%s: CUDA kernel expects a contiguous output", op);
    TG_CUDA_ENTER(op, x);
    switch (x->dtype) {
    case TG_FLOAT32: return launch_sum<float>(out, x, reduce, stream);
    case TG_FLOAT64: return launch_sum<double>(out, x, reduce, stream);
    case TG_INT64: return launch_sum<int64_t>(out, x, reduce, stream);
    default: return tg_error("%s: dtype %s has no CUDA kernel (float32, float64, int64)", op, tg_dtype_name(x->dtype));
    }
}
