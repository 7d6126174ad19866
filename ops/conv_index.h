/* The index math of 2-D convolution (im2col / col2im), the one definition both
 * devices compile: the CPU loops in ops/conv.c and the CUDA kernels in
 * ops/cuda/conv.cu call these, so the CPU tests check the taps the GPU reads. Along
 * one dim: stride s, padding p, and kd = k * dilation the offset of kernel tap k. */
#ifndef TG_OPS_CONV_INDEX_H
#define TG_OPS_CONV_INDEX_H

#include <stdint.h>

#include "core/host_device.h"

/* Outputs along a dim of `in` inputs for kernel size k (ATen's conv_output_size; 0
 * when the dilated kernel is longer than the padded input). */
TG_HD_INLINE int64_t tg_conv_out_size(int64_t in, int64_t k, int s, int p, int d) {
    int64_t span = in + 2 * (int64_t)p - (int64_t)d * (k - 1) - 1;
    return span < 0 ? 0 : span / s + 1;
}

/* The input coordinate that output o reads through the tap at offset kd (negative or
 * >= in: the zero padding). */
TG_HD_INLINE int64_t tg_conv_tap(int64_t o, int64_t kd, int s, int p) { return o * s - p + kd; }

/* Its inverse: the output that reads input i through the tap at offset kd, or -1 when
 * none of the `out` outputs does. */
TG_HD_INLINE int64_t tg_conv_tap_output(int64_t i, int64_t kd, int s, int p, int64_t out) {
    int64_t t = i + p - kd;
    if (t < 0 || t % s) return -1;
    return t / s < out ? t / s : -1;
}

/* The outputs [*lo, *hi) (of `out`) whose tap at offset kd lies inside [0, in): the
 * rows or columns a loop can copy without a bounds check. */
TG_HD_INLINE void tg_conv_valid_range(int64_t out, int64_t in, int s, int p, int64_t kd, int64_t *lo, int64_t *hi) {
    int64_t first = p - kd; /* need o*s >= first */
    *lo = first <= 0 ? 0 : (first + s - 1) / s;
    int64_t last = in - 1 + p - kd; /* need o*s <= last */
    *hi = last < 0 ? 0 : last / s + 1;
    if (*hi > out) *hi = out;
    if (*lo > *hi) *lo = *hi;
}

/* Row r of the column matrix [C * kH * kW, ...]: its channel c and kernel tap (ki, kj). */
TG_HD_INLINE void tg_conv_col_row(int64_t r, int64_t kh, int64_t kw, int64_t *c, int64_t *ki, int64_t *kj) {
    *c = r / (kh * kw);
    *ki = (r / kw) % kh;
    *kj = r % kw;
}

#endif
