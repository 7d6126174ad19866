/* The index math of 2-D pooling, the one definition both devices compile: the CPU
 * loops in ops/pool.c and the CUDA kernels in ops/cuda/pool.cu call these, so the CPU
 * tests check the windows, divisors and NaN rule the GPU uses. Windows and divisors
 * follow ATen's AvgPool2d.cpp / AdaptiveAveragePooling.cpp / DilatedMaxPool2d.cpp. */
#ifndef TG_OPS_POOL_WINDOW_H
#define TG_OPS_POOL_WINDOW_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/host_device.h"

/* One 2-D pooling call's geometry, what ops/pool.c hands to its loops and to the CUDA
 * kernels: per-dim kernel, stride, padding and dilation (unused when adaptive;
 * dilation 1 unless max pooling), whether the average counts the padding, and the
 * input and output plane sizes. */
typedef struct {
    bool adaptive, include_pad;
    int kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t h, w, ho, wo;
} tg_pool_geometry;

/* Average pooling: the window [*start, *end) of output index o along a dim of `in`
 * inputs and `out` outputs, and its divisor. Adaptive: floor(o*in/out) ..
 * ceil((o+1)*in/out). Else kernel k, stride s, padding p; the divisor counts the
 * padding when include_pad. */
TG_HD_INLINE void tg_pool_avg_window(bool adaptive, int k, int s, int p, bool include_pad, int64_t o, int64_t in,
                                     int64_t out, int64_t *start, int64_t *end, int64_t *div) {
    if (adaptive) {
        *start = (o * in) / out;
        *end = ((o + 1) * in + out - 1) / out;
        *div = *end - *start;
        return;
    }
    int64_t st = o * s - p, e = st + k;
    if (e > in + p) e = in + p;
    int64_t padded = e - st;
    if (st < 0) st = 0;
    if (e > in) e = in;
    *start = st;
    *end = e;
    *div = include_pad ? padded : e - st;
}

/* The first tap of a window starting at `start` that is not in the padding (ATen's
 * `while (start < 0) start += dilation`). */
TG_HD_INLINE int64_t tg_pool_first_tap(int64_t start, int dilation) {
    return start >= 0 ? start : start + (-start + dilation - 1) / dilation * dilation;
}

/* Max pooling: the taps of output index o along a dim of `in` inputs are *first,
 * *first + d, ... below *end (kernel k, stride s, padding p, dilation d). */
TG_HD_INLINE void tg_pool_max_taps(int64_t o, int64_t in, int k, int s, int p, int d, int64_t *first, int64_t *end) {
    int64_t start = o * s - p, e = start + (int64_t)(k - 1) * d + 1;
    *first = tg_pool_first_tap(start, d);
    *end = e < in ? e : in;
}

/* The windows of output row oh and column ow of a geometry. */
TG_HD_INLINE void tg_pool_avg_row(const tg_pool_geometry *q, int64_t oh, int64_t *start, int64_t *end, int64_t *div) {
    tg_pool_avg_window(q->adaptive, q->kh, q->sh, q->ph, q->include_pad, oh, q->h, q->ho, start, end, div);
}
TG_HD_INLINE void tg_pool_avg_col(const tg_pool_geometry *q, int64_t ow, int64_t *start, int64_t *end, int64_t *div) {
    tg_pool_avg_window(q->adaptive, q->kw, q->sw, q->pw, q->include_pad, ow, q->w, q->wo, start, end, div);
}
TG_HD_INLINE void tg_pool_max_row_taps(const tg_pool_geometry *q, int64_t oh, int64_t *first, int64_t *end) {
    tg_pool_max_taps(oh, q->h, q->kh, q->sh, q->ph, q->dh, first, end);
}
TG_HD_INLINE void tg_pool_max_col_taps(const tg_pool_geometry *q, int64_t ow, int64_t *first, int64_t *end) {
    tg_pool_max_taps(ow, q->w, q->kw, q->sw, q->pw, q->dw, first, end);
}

/* "v replaces the running max m": v > m, or v is the first NaN (NaN wins, as in ATen;
 * once m is NaN nothing replaces it). The host's comparison is quiet (islessequal
 * raises no FE_INVALID on NaN); the device has no floating-point exceptions. */
#ifdef __CUDA_ARCH__
#define TG_POOL_MAX_TAKES(v, m) (!((v) <= (m)) & ((m) == (m)))
#else
#define TG_POOL_MAX_TAKES(v, m) (!islessequal((v), (m)) & ((m) == (m)))
#endif

/* The max of one window of the plane src (T, row length W) over rows hs, hs + dh, ..
 * below he and columns ws, ws + dw, .. below we: its value in m and its flat index
 * (ih * W + iw) in best. Ties keep the first index in window order (row-major), as
 * ATen does. The window must hold a tap (ops/pool.c refuses the others). */
#define TG_POOL_MAX_WINDOW(T, src, W, hs, he, ws, we, dh, dw, m, best)            \
    do {                                                                          \
        (best) = (hs) * (W) + (ws);                                               \
        (m) = (src)[best];                                                        \
        for (int64_t ih_ = (hs); ih_ < (he); ih_ += (dh)) {                       \
            const T *row_ = (src) + ih_ * (W);                                    \
            for (int64_t iw_ = (ws); iw_ < (we); iw_ += (dw)) {                   \
                T v_ = row_[iw_];                                                 \
                if (TG_POOL_MAX_TAKES(v_, m)) (m) = v_, (best) = ih_ * (W) + iw_; \
            }                                                                     \
        }                                                                         \
    } while (0)

#endif
