// CUDA kernels of ops/conv.c: conv2d as im2col + cuBLAS GEMM (through
// tg_cuda_gemm, ops/cuda/matmul.cu), its input gradient as GEMM + col2im, its
// weight gradient as im2col + one GEMM per chunk of images whose inner dimension runs
// over the chunk's images and positions together (columns [K, chunk, P] and the
// output gradient regrouped as [Cog, chunk, P]: one launch, not one per image).
// Groups are handled one at a time; the batch is processed in chunks so the column
// buffer stays under COLUMN_LIMIT elements. Shapes (Cg = C / groups, Cog = Co / groups,
// K = Cg*kH*kW, P = Ho*Wo): columns [chunk, K, P]. The taps and the column rows are the CPU's own
// index math (ops/conv_index.h).
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "ops/conv_index.h"
#include "ops/cuda/conv.h"
#include "core/cuda/internal.h"
#include "ops/cuda/matmul.h"

#define COLUMN_LIMIT ((int64_t)1 << 26) // elements of the column buffer (256 MiB of float32)

namespace {

struct conv_geometry {
    int64_t N, C, H, W, Co, kH, kW, Ho, Wo;
    int sh, sw, ph, pw, dh, dw, groups;
    int64_t Cg, Cog, K, P;
};

} // namespace

#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// ============================ kernels ============================

// cols from images n0 .. n0+count-1 of x [N, C, H, W], channels of group g, as
// [count, K, P] (BY_IMAGE) or [K, count, P] (the weight gradient's rows).
template <typename T, bool BY_IMAGE>
__global__ void im2col_kernel(conv_geometry q, const T *x, T *cols, int64_t n0, int64_t count, int g) {
    GRID_STRIDE(e, count * q.K * q.P) {
        int64_t p = e % q.P;
        int64_t kidx = BY_IMAGE ? (e / q.P) % q.K : e / (q.P * count);
        int64_t i = BY_IMAGE ? e / (q.P * q.K) : (e / q.P) % count;
        int64_t c, kh, kw;
        tg_conv_col_row(kidx, q.kH, q.kW, &c, &kh, &kw);
        int64_t ow = p % q.Wo, oh = p / q.Wo;
        int64_t ih = tg_conv_tap(oh, kh * q.dh, q.sh, q.ph), iw = tg_conv_tap(ow, kw * q.dw, q.sw, q.pw);
        T v = 0;
        if (ih >= 0 && ih < q.H && iw >= 0 && iw < q.W) v = x[(((n0 + i) * q.C + g * q.Cg + c) * q.H + ih) * q.W + iw];
        cols[e] = v;
    }
}

// out [Cog, count, P] = grad [N, Co, P]'s images n0 .. n0+count-1, channels of group g.
template <typename T>
__global__ void group_rows_kernel(conv_geometry q, const T *grad, T *out, int64_t n0, int64_t count, int g) {
    GRID_STRIDE(e, q.Cog * count * q.P) {
        int64_t p = e % q.P, i = (e / q.P) % count, c = e / (q.P * count);
        out[e] = grad[((n0 + i) * q.Co + g * q.Cog + c) * q.P + p];
    }
}

// grad_x [N, C, H, W] (images n0.., channels of group g) = sum of the columns
// [count, K, P] that read each input element (each element summed by one thread:
// deterministic, no atomics).
template <typename T>
__global__ void col2im_kernel(conv_geometry q, const T *cols, T *gx, int64_t n0, int64_t count, int g) {
    GRID_STRIDE(e, count * q.Cg * q.H * q.W) {
        int64_t iw = e % q.W, ih = (e / q.W) % q.H, c = (e / (q.W * q.H)) % q.Cg, i = e / (q.W * q.H * q.Cg);
        T acc = 0;
        for (int64_t kh = 0; kh < q.kH; kh++) {
            int64_t oh = tg_conv_tap_output(ih, kh * q.dh, q.sh, q.ph, q.Ho);
            if (oh < 0) continue;
            for (int64_t kw = 0; kw < q.kW; kw++) {
                int64_t ow = tg_conv_tap_output(iw, kw * q.dw, q.sw, q.pw, q.Wo);
                if (ow < 0) continue;
                acc += cols[(i * q.K + (c * q.kH + kh) * q.kW + kw) * q.P + oh * q.Wo + ow];
            }
        }
        gx[(((n0 + i) * q.C + g * q.Cg + c) * q.H + ih) * q.W + iw] = acc;
    }
}

// out [N, Co, P] += bias [Co].
template <typename T> __global__ void add_bias_kernel(T *out, const T *bias, int64_t N, int64_t Co, int64_t P) {
    GRID_STRIDE(e, N * Co * P) out[e] += bias[(e / P) % Co];
}

// ============================ launchers ============================

static conv_geometry geometry(tg_tensor *x, tg_tensor *weight, tg_tensor *y, int sh, int sw, int ph, int pw, int dh,
                              int dw, int groups) {
    conv_geometry q;
    q.N = x->shape.dims[0];
    q.C = x->shape.dims[1];
    q.H = x->shape.dims[2];
    q.W = x->shape.dims[3];
    q.Co = weight->shape.dims[0];
    q.kH = weight->shape.dims[2];
    q.kW = weight->shape.dims[3];
    q.Ho = y->shape.dims[2];
    q.Wo = y->shape.dims[3];
    q.sh = sh;
    q.sw = sw;
    q.ph = ph;
    q.pw = pw;
    q.dh = dh;
    q.dw = dw;
    q.groups = groups;
    q.Cg = q.C / groups;
    q.Cog = q.Co / groups;
    q.K = q.Cg * q.kH * q.kW;
    q.P = q.Ho * q.Wo;
    return q;
}

static tg_status check_conv(const char *op, tg_tensor *const *ts, int n, int groups) {
    for (int i = 0; i < n; i++)
        if (ts[i] && (ts[i]->shape.ndim != 4 || !tg_is_contiguous(ts[i]) || ts[i]->dtype != ts[0]->dtype))
            return tg_error("%s: CUDA kernel expects contiguous 4-D tensors of one dtype", op);
    if (groups < 1) return tg_error("%s: groups must be positive, got %d", op, groups);
    return TG_OK;
}

// Images per chunk so that [chunk, K, P] fits COLUMN_LIMIT (at least one).
static int64_t chunk_of(const conv_geometry &q) {
    int64_t per = q.K * q.P > 0 ? q.K * q.P : 1, c = COLUMN_LIMIT / per;
    return c < 1 ? 1 : c > q.N ? q.N : c;
}

template <typename T>
static tg_status conv_forward(const conv_geometry &q, tg_tensor *out, tg_tensor *x, tg_tensor *weight, tg_tensor *bias,
                              int device, cudaStream_t stream) {
    const char *op = "tg_conv2d";
    int64_t chunk = chunk_of(q);
    size_t bytes = (size_t)(chunk * q.K * q.P) * sizeof(T);
    T *cols = (T *)tg_cuda_scratch_alloc(device, bytes);
    if (!cols) return TG_ERROR;
    tg_status st = TG_OK;
    const T *xp = (const T *)tg_elem_ptr(x), *wp = (const T *)tg_elem_ptr(weight);
    T *yp = (T *)tg_elem_ptr(out);
    tg_dtype dt = x->dtype;
    for (int64_t n0 = 0; n0 < q.N && !st; n0 += chunk) {
        int64_t count = q.N - n0 < chunk ? q.N - n0 : chunk;
        for (int g = 0; g < q.groups && !st; g++) {
            im2col_kernel<T, true>
                <<<tg_cuda_blocks(count * q.K * q.P, device), TG_CUDA_THREADS, 0, stream>>>(q, xp, cols, n0, count, g);
            st = tg_cuda_check_launch(op);
            // y_i [Cog, P] = W_g [Cog, K] * cols_i [K, P]
            if (!st)
                st = tg_cuda_gemm(dt, device, false, false, q.Cog, q.P, q.K, 1.0, wp + g * q.Cog * q.K, q.K, 0, cols,
                                  q.P, q.K * q.P, 0.0, yp + (n0 * q.Co + g * q.Cog) * q.P, q.P, q.Co * q.P, count);
        }
    }
    if (!st && bias) {
        add_bias_kernel<T><<<tg_cuda_blocks(q.N * q.Co * q.P, device), TG_CUDA_THREADS, 0, stream>>>(
            yp, (const T *)tg_elem_ptr(bias), q.N, q.Co, q.P);
        st = tg_cuda_check_launch(op);
    }
    tg_cuda_scratch_free(device, cols, bytes); // see STREAM ORDER (runtime.cu)
    return st;
}

template <typename T>
static tg_status conv_input_grad(const conv_geometry &q, tg_tensor *grad_x, tg_tensor *grad, tg_tensor *weight,
                                 int device, cudaStream_t stream) {
    const char *op = "tg_conv2d backward";
    int64_t chunk = chunk_of(q);
    size_t bytes = (size_t)(chunk * q.K * q.P) * sizeof(T);
    T *cols = (T *)tg_cuda_scratch_alloc(device, bytes);
    if (!cols) return TG_ERROR;
    tg_status st = TG_OK;
    const T *gp = (const T *)tg_elem_ptr(grad), *wp = (const T *)tg_elem_ptr(weight);
    T *gxp = (T *)tg_elem_ptr(grad_x);
    for (int64_t n0 = 0; n0 < q.N && !st; n0 += chunk) {
        int64_t count = q.N - n0 < chunk ? q.N - n0 : chunk;
        for (int g = 0; g < q.groups && !st; g++) {
            // cols_i [K, P] = W_g^T [K, Cog] * grad_i [Cog, P]
            st = tg_cuda_gemm(grad->dtype, device, true, false, q.K, q.P, q.Cog, 1.0, wp + g * q.Cog * q.K, q.K, 0,
                              gp + (n0 * q.Co + g * q.Cog) * q.P, q.P, q.Co * q.P, 0.0, cols, q.P, q.K * q.P, count);
            if (st) break;
            col2im_kernel<T><<<tg_cuda_blocks(count * q.Cg * q.H * q.W, device), TG_CUDA_THREADS, 0, stream>>>(
                q, cols, gxp, n0, count, g);
            st = tg_cuda_check_launch(op);
        }
    }
    tg_cuda_scratch_free(device, cols, bytes);
    return st;
}

template <typename T>
static tg_status conv_weight_grad(const conv_geometry &q, tg_tensor *grad_weight, tg_tensor *x, tg_tensor *grad,
                                  int device, cudaStream_t stream) {
    const char *op = "tg_conv2d backward";
    int64_t chunk = chunk_of(q);
    size_t bytes = (size_t)(chunk * q.K * q.P) * sizeof(T), rows_bytes = (size_t)(chunk * q.Cog * q.P) * sizeof(T);
    T *cols = (T *)tg_cuda_scratch_alloc(device, bytes);
    if (!cols) return TG_ERROR;
    T *rows = (T *)tg_cuda_scratch_alloc(device, rows_bytes);
    if (!rows) {
        tg_cuda_scratch_free(device, cols, bytes);
        return TG_ERROR;
    }
    tg_status st = TG_OK;
    const T *xp = (const T *)tg_elem_ptr(x), *gp = (const T *)tg_elem_ptr(grad);
    T *gwp = (T *)tg_elem_ptr(grad_weight);
    for (int64_t n0 = 0; n0 < q.N && !st; n0 += chunk) {
        int64_t count = q.N - n0 < chunk ? q.N - n0 : chunk;
        for (int g = 0; g < q.groups && !st; g++) {
            im2col_kernel<T, false>
                <<<tg_cuda_blocks(count * q.K * q.P, device), TG_CUDA_THREADS, 0, stream>>>(q, xp, cols, n0, count, g);
            group_rows_kernel<T><<<tg_cuda_blocks(q.Cog * count * q.P, device), TG_CUDA_THREADS, 0, stream>>>(
                q, gp, rows, n0, count, g);
            st = tg_cuda_check_launch(op);
            // gw_g [Cog, K] (+)= rows [Cog, count * P] * cols^T [count * P, K]
            if (!st)
                st = tg_cuda_gemm(grad->dtype, device, false, true, q.Cog, q.K, count * q.P, 1.0, rows, count * q.P, 0,
                                  cols, count * q.P, 0, n0 == 0 ? 0.0 : 1.0, gwp + g * q.Cog * q.K, q.K, 0, 1);
        }
    }
    tg_cuda_scratch_free(device, rows, rows_bytes);
    tg_cuda_scratch_free(device, cols, bytes);
    return st;
}

// ============================ entry points ============================

extern "C" tg_status tg_cuda_conv2d_forward(tg_tensor *out, tg_tensor *x, tg_tensor *weight, tg_tensor *bias, int sh,
                                            int sw, int ph, int pw, int dh, int dw, int groups) {
    const char *op = "tg_conv2d";
    tg_tensor *ts[3] = {x, weight, out};
    if (check_conv(op, ts, 3, groups)) return TG_ERROR;
    if (bias && (!tg_is_contiguous(bias) || bias->dtype != x->dtype)) return tg_error("%s: bad bias", op);
    conv_geometry q = geometry(x, weight, out, sh, sw, ph, pw, dh, dw, groups);
    if (q.N * q.Co * q.P == 0) return TG_OK;
    TG_CUDA_ENTER(op, x);
    int device = tg_cuda_device_of(x);
    if (q.K == 0) { // no input channels: the output is the bias (or zero)
        cudaError_t err =
            cudaMemsetAsync(tg_elem_ptr(out), 0, (size_t)tg_numel(out) * tg_dtype_size(out->dtype), stream);
        if (err != cudaSuccess) return tg_cuda_error(op, "cudaMemsetAsync", err);
        if (!bias) return TG_OK;
    }
    TG_CUDA_DISPATCH_FLOATING(op, x->dtype, return conv_forward<scalar_t>(q, out, x, weight, bias, device, stream));
    return TG_OK;
}

extern "C" tg_status tg_cuda_conv2d_input_grad(tg_tensor *grad_x, tg_tensor *grad, tg_tensor *weight, int sh, int sw,
                                               int ph, int pw, int dh, int dw, int groups) {
    const char *op = "tg_conv2d backward";
    tg_tensor *ts[3] = {grad_x, grad, weight};
    if (check_conv(op, ts, 3, groups)) return TG_ERROR;
    conv_geometry q = geometry(grad_x, weight, grad, sh, sw, ph, pw, dh, dw, groups);
    if (tg_numel(grad_x) == 0) return TG_OK;
    TG_CUDA_ENTER(op, grad_x);
    if (q.P == 0 || q.Cog == 0) {
        cudaError_t err =
            cudaMemsetAsync(tg_elem_ptr(grad_x), 0, (size_t)tg_numel(grad_x) * tg_dtype_size(grad_x->dtype), stream);
        return err == cudaSuccess ? TG_OK : tg_cuda_error(op, "cudaMemsetAsync", err);
    }
    TG_CUDA_DISPATCH_FLOATING(
        op, grad->dtype, return conv_input_grad<scalar_t>(q, grad_x, grad, weight, tg_cuda_device_of(grad_x), stream));
    return TG_OK;
}

extern "C" tg_status tg_cuda_conv2d_weight_grad(tg_tensor *grad_weight, tg_tensor *x, tg_tensor *grad, int sh, int sw,
                                                int ph, int pw, int dh, int dw, int groups) {
    const char *op = "tg_conv2d backward";
    tg_tensor *ts[3] = {grad_weight, x, grad};
    if (check_conv(op, ts, 3, groups)) return TG_ERROR;
    conv_geometry q = geometry(x, grad_weight, grad, sh, sw, ph, pw, dh, dw, groups);
    if (tg_numel(grad_weight) == 0) return TG_OK;
    TG_CUDA_ENTER(op, x);
    if (q.N == 0 || q.P == 0) {
        cudaError_t err = cudaMemsetAsync(tg_elem_ptr(grad_weight), 0,
                                          (size_t)tg_numel(grad_weight) * tg_dtype_size(grad_weight->dtype), stream);
        return err == cudaSuccess ? TG_OK : tg_cuda_error(op, "cudaMemsetAsync", err);
    }
    TG_CUDA_DISPATCH_FLOATING(op, x->dtype,
                              return conv_weight_grad<scalar_t>(q, grad_weight, x, grad, tg_cuda_device_of(x), stream));
    return TG_OK;
}
