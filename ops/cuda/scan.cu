// CUDA kernel of ops/scan.c: cumsum / cumprod along one dim, one thread per line, each
// running ops/scan_line.h's TG_SCAN_LINE (the CPU's formula and accumulator).
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "ops/cuda/scan.h"
#include "ops/reduce_plan.h"
#include "ops/scan_line.h"

template <typename T>
__global__ void scan_kernel(tg_scan_kind kind, tg_reduce_plan px, tg_reduce_plan po, const T *x, T *out) {
    int64_t len = px.inner_numel;
    int64_t xs = px.inner_ndim ? px.inner_strides[0] : 1, os = po.inner_ndim ? po.inner_strides[0] : 1;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < px.outer_numel;
         o += (int64_t)gridDim.x * blockDim.x) {
        typedef typename tg_acc_type<T>::type acc_t;
        const T *line = x + tg_reduce_outer_offset(&px, o);
        T *dst = out + tg_reduce_outer_offset(&po, o);
        TG_SCAN_LINE(kind, T, acc_t, line, xs, dst, os, len);
    }
}

extern "C" tg_status tg_cuda_scan(tg_scan_kind kind, tg_tensor *out, tg_tensor *x, int dim) {
    const char *op = kind == TG_SCAN_SUM ? "tg_cumsum" : "tg_cumprod";
    if (tg_cuda_check_line_dim(op, x, dim)) return TG_ERROR;
    tg_reduce_plan px, po;
    int64_t lines = tg_line_plans(x, out, dim, &px, &po);
    if (lines == 0) return TG_OK;
    TG_CUDA_ENTER(op, x);
    unsigned blocks = tg_cuda_blocks(lines, tg_cuda_device_of(x));
    switch (x->dtype) {
    case TG_FLOAT32:
        scan_kernel<float><<<blocks, TG_CUDA_THREADS, 0, stream>>>(kind, px, po, (const float *)tg_elem_ptr(x),
                                                                   (float *)tg_elem_ptr(out));
        break;
    case TG_FLOAT64:
        scan_kernel<double><<<blocks, TG_CUDA_THREADS, 0, stream>>>(kind, px, po, (const double *)tg_elem_ptr(x),
                                                                    (double *)tg_elem_ptr(out));
        break;
    case TG_INT64:
        scan_kernel<int64_t><<<blocks, TG_CUDA_THREADS, 0, stream>>>(kind, px, po, (const int64_t *)tg_elem_ptr(x),
                                                                     (int64_t *)tg_elem_ptr(out));
        break;
    default: return tg_error("%s: dtype %s has no CUDA kernel", op, tg_dtype_name(x->dtype));
    }
    return tg_cuda_check_launch(op);
}
