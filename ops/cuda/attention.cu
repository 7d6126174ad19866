// CUDA kernels of the fused scaled_dot_product_attention (ops/attention.c owns the op;
// the contract is ops/cuda/attention.h's, the CPU's twin ops/cpu/attention.c). A
// FlashAttention-2 dataflow on CUDA cores: a block of ATTN_WARPS query rows (one warp
// per row) walks over tiles of keys held in shared memory; lane c scores key c of the
// tile, the warp keeps the row's online softmax (ops/attention_formulas.h, the CPU's own
// per-row code) and each lane owns output dims lane, lane + 32, ... (head dims up to
// 128). The backward recomputes the scores from q, k and the saved log-sum-exp in two
// kernels, dq over key tiles per query row and dk/dv over query tiles per key row, so
// no element is written by two blocks (no atomics: the sums' order is fixed). Not yet
// Tensor Cores (mma) for float16/bfloat16: those are cast to float32 by ops/attention.c.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "ops/attention_formulas.h"
#include "ops/cuda/attention.h"

#define ATTN_WARPS 8
#define ATTN_MAX_DIM 128
#define FULL_MASK 0xffffffffu

// Keys (or queries) per shared-memory tile: 32 in float32, 8 in float64 (48 KiB).
template <typename T> struct attn_tile { static const int rows = 32; };
template <> struct attn_tile<double> { static const int rows = 8; };

// ============================ device helpers ============================

// The score of (i, j) from its dot product: scaled, masked, causal (-inf when hidden).
template <typename T>
__device__ __forceinline__ double attn_score(const tg_attn_plan &p, const unsigned char *mask, int64_t moff, int64_t i,
                                             int64_t j, double dot) {
    if (p.causal && tg_attn_causal_hidden(i, j)) return -INFINITY;
    double m = 0;
    if (p.mask_kind == TG_ATTN_MASK_BOOL) m = ((const bool *)mask)[moff + i * p.mask_row + j * p.mask_col] ? 1 : 0;
    else if (p.mask_kind == TG_ATTN_MASK_ADD) m = (double)((const T *)mask)[moff + i * p.mask_row + j * p.mask_col];
    return tg_attn_masked_score(dot * p.scale, p.mask_kind, m);
}

__device__ __forceinline__ double warp_max(double x) {
    for (int o = 16; o > 0; o >>= 1) x = fmax(x, __shfl_xor_sync(FULL_MASK, x, o));
    return x;
}

__device__ __forceinline__ double warp_sum(double x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(FULL_MASK, x, o);
    return x;
}

// rows [r0, r0 + n) of a [*, cols] operand at row stride `row` into shared tile[n][cols] (zeros past `limit`).
template <typename T>
__device__ __forceinline__ void load_tile(T *tile, const T *src, int64_t r0, int n, int64_t cols, int64_t row,
                                          int64_t limit) {
    for (int64_t x = threadIdx.x; x < n * cols; x += blockDim.x) {
        int64_t r = x / cols, c = x % cols;
        tile[x] = r0 + r < limit ? src[(r0 + r) * row + c] : T(0);
    }
}

template <typename T> __device__ __forceinline__ T dot_row(const T *a, const T *b, int64_t n) {
    T d = 0;
    for (int64_t x = 0; x < n; x++) d += a[x] * b[x];
    return d;
}

// ============================ kernels ============================

// One block: ATTN_WARPS query rows of problem b. Shared: q rows, a key tile, a value tile.
template <typename T>
__global__ void attn_forward_kernel(tg_attn_plan p, const int64_t *off, const T *q, const T *k, const T *v,
                                    const unsigned char *mask, T *out, T *lse) {
    const int BK = attn_tile<T>::rows;
    extern __shared__ unsigned char smem_raw[];
    T *qs = (T *)smem_raw, *ks = qs + ATTN_WARPS * p.e, *vs = ks + BK * p.e;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t nblk = (p.l + ATTN_WARPS - 1) / ATTN_WARPS, b = blockIdx.x / nblk, i0 = blockIdx.x % nblk * ATTN_WARPS;
    int64_t i = i0 + warp, moff = off[3 * p.batch + b];
    const T *qb = q + off[b], *kb = k + off[p.batch + b], *vb = v + off[2 * p.batch + b];
    bool active = i < p.l;
    for (int64_t x = lane; x < p.e; x += 32) qs[warp * p.e + x] = active ? qb[i * p.q_row + x] : T(0);
    int64_t last = i0 + ATTN_WARPS - 1 < p.l ? i0 + ATTN_WARPS - 1 : p.l - 1;
    int64_t kend = p.causal ? tg_attn_causal_end(last, p.s) : p.s;
    double m = -INFINITY, l = 0;
    T acc[ATTN_MAX_DIM / 32] = {0, 0, 0, 0};
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        __syncthreads();
        load_tile(ks, kb, j0, BK, p.e, p.k_row, p.s);
        load_tile(vs, vb, j0, BK, p.ev, p.v_row, p.s);
        __syncthreads();
        if (!active) continue;
        double s = -INFINITY;
        if (lane < BK && j0 + lane < kend)
            s = attn_score<T>(p, mask, moff, i, j0 + lane, (double)dot_row(qs + warp * p.e, ks + lane * p.e, p.e));
        double rescale;
        m = tg_attn_online_max(m, warp_max(s), &rescale);
        T pr = (T)exp(s - tg_attn_shift(m));
        l = l * rescale + warp_sum((double)pr);
        for (int t = 0; t < ATTN_MAX_DIM / 32; t++) acc[t] *= (T)rescale;
        for (int c = 0; c < BK; c++) {
            T pc = __shfl_sync(FULL_MASK, pr, c);
            for (int t = 0; t < ATTN_MAX_DIM / 32; t++)
                if (lane + 32 * t < p.ev) acc[t] += pc * vs[c * p.ev + lane + 32 * t];
        }
    }
    if (!active) return;
    for (int t = 0; t < ATTN_MAX_DIM / 32; t++)
        if (lane + 32 * t < p.ev)
            out[tg_attn_result_start(&p, b, p.l, p.ev, tg_attn_out_row(&p)) + i * tg_attn_out_row(&p) + lane + 32 * t] =
                l == 0 ? T(NAN) : acc[t] / (T)l;
    if (lane == 0) lse[b * p.l + i] = (T)tg_attn_row_lse(m, l);
}

// delta = rowsum(dout * out): one warp per row.
template <typename T> __global__ void attn_delta_kernel(tg_attn_plan p, const T *out, const T *dout, T *delta) {
    int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (r >= p.batch * p.l) return;
    int64_t at = tg_attn_result_start(&p, r / p.l, p.l, p.ev, tg_attn_out_row(&p)) + r % p.l * tg_attn_out_row(&p);
    double d = 0;
    for (int64_t x = lane; x < p.ev; x += 32) d += (double)dout[at + x] * (double)out[at + x];
    d = warp_sum(d);
    if (lane == 0) delta[r] = (T)d;
}

// dq: one warp per query row, over key tiles. Shared: q and dout rows, a key and a value tile.
template <typename T>
__global__ void attn_dq_kernel(tg_attn_plan p, const int64_t *off, const T *q, const T *k, const T *v,
                               const unsigned char *mask, const T *dout, const T *lse, const T *delta, T *dq) {
    const int BK = attn_tile<T>::rows;
    extern __shared__ unsigned char smem_raw[];
    T *qs = (T *)smem_raw, *dos = qs + ATTN_WARPS * p.e, *ks = dos + ATTN_WARPS * p.ev, *vs = ks + BK * p.e;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t nblk = (p.l + ATTN_WARPS - 1) / ATTN_WARPS, b = blockIdx.x / nblk, i0 = blockIdx.x % nblk * ATTN_WARPS;
    int64_t i = i0 + warp, moff = off[3 * p.batch + b];
    const T *qb = q + off[b], *kb = k + off[p.batch + b], *vb = v + off[2 * p.batch + b];
    bool active = i < p.l;
    for (int64_t x = lane; x < p.e; x += 32) qs[warp * p.e + x] = active ? qb[i * p.q_row + x] : T(0);
    const T *dout_i = dout + tg_attn_result_start(&p, b, p.l, p.ev, tg_attn_out_row(&p)) + i * tg_attn_out_row(&p);
    for (int64_t x = lane; x < p.ev; x += 32) dos[warp * p.ev + x] = active ? dout_i[x] : T(0);
    T row_lse = active ? lse[b * p.l + i] : T(0), row_delta = active ? delta[b * p.l + i] : T(0);
    int64_t last = i0 + ATTN_WARPS - 1 < p.l ? i0 + ATTN_WARPS - 1 : p.l - 1;
    int64_t kend = p.causal ? tg_attn_causal_end(last, p.s) : p.s;
    T acc[ATTN_MAX_DIM / 32] = {0, 0, 0, 0};
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        __syncthreads();
        load_tile(ks, kb, j0, BK, p.e, p.k_row, p.s);
        load_tile(vs, vb, j0, BK, p.ev, p.v_row, p.s);
        __syncthreads();
        if (!active) continue;
        T ds = 0;
        if (lane < BK && j0 + lane < kend) {
            double s =
                attn_score<T>(p, mask, moff, i, j0 + lane, (double)dot_row(qs + warp * p.e, ks + lane * p.e, p.e));
            T pr = (T)exp(s - (double)row_lse);
            ds = (T)tg_attn_dscore(pr, dot_row(dos + warp * p.ev, vs + lane * p.ev, p.ev), row_delta);
        }
        for (int c = 0; c < BK; c++) {
            T dc = __shfl_sync(FULL_MASK, ds, c);
            for (int t = 0; t < ATTN_MAX_DIM / 32; t++)
                if (lane + 32 * t < p.e) acc[t] += dc * ks[c * p.e + lane + 32 * t];
        }
    }
    if (!active) return;
    for (int t = 0; t < ATTN_MAX_DIM / 32; t++)
        if (lane + 32 * t < p.e)
            dq[tg_attn_result_start(&p, b, p.l, p.e, tg_attn_grad_row(&p, p.e)) + i * tg_attn_grad_row(&p, p.e) + lane +
               32 * t] = acc[t] * (T)p.scale;
}

// dk, dv: one warp per key row, over query tiles. Shared: k and v rows, a q and a dout tile, their lse and delta.
template <typename T>
__global__ void attn_dkdv_kernel(tg_attn_plan p, const int64_t *off, const T *q, const T *k, const T *v,
                                 const unsigned char *mask, const T *dout, const T *lse, const T *delta, T *dk, T *dv) {
    const int BQ = attn_tile<T>::rows;
    extern __shared__ unsigned char smem_raw[];
    T *kr = (T *)smem_raw, *vr = kr + ATTN_WARPS * p.e, *qs = vr + ATTN_WARPS * p.ev, *dos = qs + BQ * p.e;
    T *ls = dos + BQ * p.ev, *ds_ = ls + BQ;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t nblk = (p.s + ATTN_WARPS - 1) / ATTN_WARPS, b = blockIdx.x / nblk, j0 = blockIdx.x % nblk * ATTN_WARPS;
    int64_t j = j0 + warp, moff = off[3 * p.batch + b];
    const T *qb = q + off[b], *kb = k + off[p.batch + b], *vb = v + off[2 * p.batch + b];
    bool active = j < p.s;
    for (int64_t x = lane; x < p.e; x += 32) kr[warp * p.e + x] = active ? kb[j * p.k_row + x] : T(0);
    for (int64_t x = lane; x < p.ev; x += 32) vr[warp * p.ev + x] = active ? vb[j * p.v_row + x] : T(0);
    int64_t first = p.causal ? j0 : 0; /* query i sees key j only if i >= j */
    T acc_k[ATTN_MAX_DIM / 32] = {0, 0, 0, 0}, acc_v[ATTN_MAX_DIM / 32] = {0, 0, 0, 0};
    for (int64_t r0 = first; r0 < p.l; r0 += BQ) {
        __syncthreads();
        load_tile(qs, qb, r0, BQ, p.e, p.q_row, p.l);
        load_tile(dos, dout + tg_attn_result_start(&p, b, p.l, p.ev, tg_attn_out_row(&p)), r0, BQ, p.ev,
                  tg_attn_out_row(&p), p.l);
        for (int x = threadIdx.x; x < BQ; x += blockDim.x) {
            ls[x] = r0 + x < p.l ? lse[b * p.l + r0 + x] : T(0);
            ds_[x] = r0 + x < p.l ? delta[b * p.l + r0 + x] : T(0);
        }
        __syncthreads();
        if (!active) continue;
        T pr = 0, ds = 0;
        if (lane < BQ && r0 + lane < p.l) {
            double s =
                attn_score<T>(p, mask, moff, r0 + lane, j, (double)dot_row(qs + lane * p.e, kr + warp * p.e, p.e));
            pr = (T)exp(s - (double)ls[lane]);
            ds = (T)tg_attn_dscore(pr, dot_row(dos + lane * p.ev, vr + warp * p.ev, p.ev), ds_[lane]);
        }
        for (int c = 0; c < BQ; c++) {
            T pc = __shfl_sync(FULL_MASK, pr, c), dc = __shfl_sync(FULL_MASK, ds, c);
            for (int t = 0; t < ATTN_MAX_DIM / 32; t++) {
                if (lane + 32 * t < p.ev) acc_v[t] += pc * dos[c * p.ev + lane + 32 * t];
                if (lane + 32 * t < p.e) acc_k[t] += dc * qs[c * p.e + lane + 32 * t];
            }
        }
    }
    if (!active) return;
    for (int t = 0; t < ATTN_MAX_DIM / 32; t++) {
        if (lane + 32 * t < p.ev)
            dv[tg_attn_result_start(&p, b, p.s, p.ev, tg_attn_grad_row(&p, p.ev)) + j * tg_attn_grad_row(&p, p.ev) +
               lane + 32 * t] = acc_v[t];
        if (lane + 32 * t < p.e)
            dk[tg_attn_result_start(&p, b, p.s, p.e, tg_attn_grad_row(&p, p.e)) + j * tg_attn_grad_row(&p, p.e) + lane +
               32 * t] = acc_k[t] * (T)p.scale;
    }
}

// ============================ launchers ============================

static unsigned blocks_of(int64_t problems, int64_t rows) {
    return (unsigned)(problems * ((rows + ATTN_WARPS - 1) / ATTN_WARPS));
}

template <typename T>
static tg_status launch_forward(const tg_attn_plan &p, tg_tensor *off, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                                tg_tensor *mask, tg_tensor *out, tg_tensor *lse, cudaStream_t stream) {
    if (p.batch == 0 || p.l == 0) return TG_OK;
    size_t smem = sizeof(T) * (size_t)(ATTN_WARPS * p.e + attn_tile<T>::rows * (p.e + p.ev));
    attn_forward_kernel<T><<<blocks_of(p.batch, p.l), ATTN_WARPS * 32, smem, stream>>>(
        p, (const int64_t *)tg_elem_ptr(off), (const T *)tg_elem_ptr(q), (const T *)tg_elem_ptr(k),
        (const T *)tg_elem_ptr(v), mask ? (const unsigned char *)tg_elem_ptr(mask) : NULL, (T *)tg_elem_ptr(out),
        (T *)tg_elem_ptr(lse));
    return tg_cuda_check_launch("tg_scaled_dot_product_attention");
}

template <typename T>
static tg_status launch_backward(const tg_attn_plan &p, tg_tensor *off, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                                 tg_tensor *mask, tg_tensor *out, tg_tensor *dout, tg_tensor *lse, tg_tensor *delta,
                                 tg_tensor *dq, tg_tensor *dk, tg_tensor *dv, cudaStream_t stream) {
    const char *op = "tg_scaled_dot_product_attention backward";
    const int64_t *o = (const int64_t *)tg_elem_ptr(off);
    const unsigned char *m = mask ? (const unsigned char *)tg_elem_ptr(mask) : NULL;
    const T *qp = (const T *)tg_elem_ptr(q), *kp = (const T *)tg_elem_ptr(k), *vp = (const T *)tg_elem_ptr(v);
    const T *dop = (const T *)tg_elem_ptr(dout), *lp = (const T *)tg_elem_ptr(lse);
    T *dp = (T *)tg_elem_ptr(delta);
    const int R = attn_tile<T>::rows;
    if (p.batch * p.l > 0) {
        attn_delta_kernel<T>
            <<<(unsigned)((p.batch * p.l * 32 + 255) / 256), 256, 0, stream>>>(p, (const T *)tg_elem_ptr(out), dop, dp);
        if (tg_cuda_check_launch(op)) return TG_ERROR;
        size_t smem = sizeof(T) * (size_t)(ATTN_WARPS * (p.e + p.ev) + R * (p.e + p.ev));
        attn_dq_kernel<T><<<blocks_of(p.batch, p.l), ATTN_WARPS * 32, smem, stream>>>(p, o, qp, kp, vp, m, dop, lp, dp,
                                                                                      (T *)tg_elem_ptr(dq));
        if (tg_cuda_check_launch(op)) return TG_ERROR;
    }
    if (p.batch * p.s > 0) {
        size_t smem = sizeof(T) * (size_t)(ATTN_WARPS * (p.e + p.ev) + R * (p.e + p.ev) + 2 * R);
        attn_dkdv_kernel<T><<<blocks_of(p.batch, p.s), ATTN_WARPS * 32, smem, stream>>>(
            p, o, qp, kp, vp, m, dop, lp, dp, (T *)tg_elem_ptr(dk), (T *)tg_elem_ptr(dv));
        return tg_cuda_check_launch(op);
    }
    return TG_OK;
}

// ============================ entry points ============================

extern "C" bool tg_cuda_attention_supports(int64_t e, int64_t ev) {
    return e >= 1 && ev >= 1 && e <= ATTN_MAX_DIM && ev <= ATTN_MAX_DIM;
}

extern "C" tg_status tg_cuda_attention_forward(const tg_attn_plan *plan, tg_tensor *offsets, tg_tensor *q, tg_tensor *k,
                                               tg_tensor *v, tg_tensor *mask, tg_tensor *out, tg_tensor *lse) {
    const char *op = "tg_scaled_dot_product_attention";
    if (!tg_cuda_attention_supports(plan->e, plan->ev))
        return tg_error("%s: the CUDA kernel takes head dims up to %d, got %lld and %lld", op, ATTN_MAX_DIM,
                        (long long)plan->e, (long long)plan->ev);
    TG_CUDA_ENTER(op, q);
    TG_CUDA_DISPATCH_FLOATING(op, q->dtype,
                              return launch_forward<scalar_t>(*plan, offsets, q, k, v, mask, out, lse, stream));
    return TG_OK;
}

extern "C" tg_status tg_cuda_attention_backward(const tg_attn_plan *plan, tg_tensor *offsets, tg_tensor *q,
                                                tg_tensor *k, tg_tensor *v, tg_tensor *mask, tg_tensor *out,
                                                tg_tensor *dout, tg_tensor *lse, tg_tensor *delta, tg_tensor *dq,
                                                tg_tensor *dk, tg_tensor *dv) {
    const char *op = "tg_scaled_dot_product_attention";
    TG_CUDA_ENTER(op, q);
    TG_CUDA_DISPATCH_FLOATING(
        op, q->dtype,
        return launch_backward<scalar_t>(*plan, offsets, q, k, v, mask, out, dout, lse, delta, dq, dk, dv, stream));
    return TG_OK;
}
