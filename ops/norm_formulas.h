/* Batch norm's and layer norm's formulas, the one definition both devices compile:
 * ops/cpu/norm_kernels.h's loops and ops/cuda/norm.cu's kernel call these, so the CPU
 * tests check the arithmetic the GPU runs. A group's statistics come from the sums of
 * d = x - shift and d^2 over its elements, shift being the group's first element (so
 * that E[d^2] - E[d]^2 does not cancel badly); each device sums its own way (the CPU in
 * the element type, 16 interleaved partial sums per row, the rows in double; a CUDA
 * block in double per thread, then a tree). */
#ifndef TG_OPS_NORM_FORMULAS_H
#define TG_OPS_NORM_FORMULAS_H

#include <math.h>

#include "core/host_device.h"

/* A group's mean, biased variance and 1 / sqrt(var + eps), in double. */
typedef struct {
    double mean, var, invstd;
} tg_norm_stats;

/* From s = sum(d), ss = sum(d^2) over count elements, d = x - shift. A variance that
 * rounding made negative is 0. */
TG_HD_INLINE tg_norm_stats tg_norm_stats_of(double s, double ss, double count, double shift, double eps) {
    tg_norm_stats r;
    double dmean = s / count, var = ss / count - dmean * dmean;
    if (var < 0) var = 0;
    r.mean = dmean + shift;
    r.var = var;
    r.invstd = 1.0 / sqrt(var + eps);
    return r;
}

/* Layer norm's output in the element type T (as PyTorch's vectorized CPU kernel, which
 * works in float): tm, ti the row's mean and invstd rounded to T, w, b the weight and
 * bias of the element's position (1 and 0 without). Computing it in double took 0.45 ms
 * for a [4096, 128] float32 forward, seven times an add of that size. */
#define TG_LAYER_NORM_OUT(x, tm, ti, w, b) (((x) - (tm)) * (ti) * (w) + (b))

/* Batch norm's output as one multiply-add per element in the element type:
 * y = (x - tm) * scale + shift, with tm the mean rounded to the element type (given,
 * as (double)(T)mean) and scale, shift folded here in double from the channel's
 * weight and bias (then rounded to the element type). */
typedef struct {
    double scale, shift;
} tg_bn_fold;

TG_HD_INLINE tg_bn_fold tg_bn_fold_of(const tg_norm_stats *st, double tm, double w, double b) {
    tg_bn_fold f;
    f.scale = st->invstd * w;
    f.shift = b - (st->mean - tm) * f.scale;
    return f;
}

/* x, tm, scale, shift of one element type T. */
#define TG_BN_OUT(x, tm, scale, shift) (((x) - (tm)) * (scale) + (shift))

#endif
