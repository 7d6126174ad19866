// CUDA kernel of ops/sort.c: the stable sort order along one dim, one thread per line,
// each running ops/sort_line.h's TG_SORT_LINE (the CPU's merge sort and comparison)
// in a slice of a global scratch buffer. Simple rather than fast: lines are sorted
// one per thread, so long lines with few of them use the GPU poorly.
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "ops/cuda/sort.h"
#include "ops/reduce_plan.h"
#include "ops/sort_line.h"

template <typename T>
__global__ void sort_order_kernel(tg_reduce_plan px, tg_reduce_plan po, const T *x, int64_t *out, int64_t *scratch,
                                  bool descending) {
    int64_t len = px.inner_numel;
    int64_t xs = px.inner_ndim ? px.inner_strides[0] : 1, os = po.inner_ndim ? po.inner_strides[0] : 1;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < px.outer_numel;
         o += (int64_t)gridDim.x * blockDim.x) {
        const T *line = x + tg_reduce_outer_offset(&px, o);
        int64_t *order = scratch + 2 * len * o, *tmp = order + len;
        TG_SORT_LINE(T, line, xs, order, tmp, len, descending);
        int64_t *dst = out + tg_reduce_outer_offset(&po, o);
        for (int64_t k = 0; k < len; k++) dst[k * os] = order[k];
    }
}

extern "C" tg_status tg_cuda_sort_order(tg_tensor *order, tg_tensor *x, int dim, bool descending, tg_tensor *scratch) {
    const char *op = "tg_sort";
    if (tg_cuda_check_line_dim(op, x, dim)) return TG_ERROR;
    tg_reduce_plan px, po;
    int64_t lines = tg_line_plans(x, order, dim, &px, &po);
    if (lines == 0) return TG_OK;
    TG_CUDA_ENTER(op, x);
    unsigned blocks = tg_cuda_blocks(lines, tg_cuda_device_of(x));
    int64_t *out = (int64_t *)tg_elem_ptr(order), *work = (int64_t *)tg_elem_ptr(scratch);
    switch (x->dtype) {
    case TG_FLOAT32:
        sort_order_kernel<float>
            <<<blocks, TG_CUDA_THREADS, 0, stream>>>(px, po, (const float *)tg_elem_ptr(x), out, work, descending);
        break;
    case TG_FLOAT64:
        sort_order_kernel<double>
            <<<blocks, TG_CUDA_THREADS, 0, stream>>>(px, po, (const double *)tg_elem_ptr(x), out, work, descending);
        break;
    case TG_INT64:
        sort_order_kernel<int64_t>
            <<<blocks, TG_CUDA_THREADS, 0, stream>>>(px, po, (const int64_t *)tg_elem_ptr(x), out, work, descending);
        break;
    case TG_INT32:
        sort_order_kernel<int32_t>
            <<<blocks, TG_CUDA_THREADS, 0, stream>>>(px, po, (const int32_t *)tg_elem_ptr(x), out, work, descending);
        break;
    case TG_UINT8:
    case TG_BOOL: // one byte, false < true as 0 < 1
        sort_order_kernel<uint8_t>
            <<<blocks, TG_CUDA_THREADS, 0, stream>>>(px, po, (const uint8_t *)tg_elem_ptr(x), out, work, descending);
        break;
    default: return tg_error("%s: dtype %s has no CUDA kernel", op, tg_dtype_name(x->dtype));
    }
    return tg_cuda_check_launch(op);
}
