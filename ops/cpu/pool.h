/* CPU kernels of ops/pool.c (2-D pooling), on contiguous planes: x [planes, H, W] ->
 * y [planes, Ho, Wo] with the geometry q (ops/pool_window.h, the CUDA kernels' too).
 * Max pooling's indices are flat in H*W: the first maximum in window order, a NaN
 * winning, as ATen. Outputs are written whole (the backwards zero theirs first). */
#ifndef TG_OPS_CPU_POOL_H
#define TG_OPS_CPU_POOL_H

#include <stdint.h>

#include "ops/pool_window.h"

void tg_cpu_max_pool_f32(const tg_pool_geometry *q, int64_t planes, const float *x, float *y, int64_t *idx);
void tg_cpu_max_pool_f64(const tg_pool_geometry *q, int64_t planes, const double *x, double *y, int64_t *idx);
/* bfloat16 (bits): each plane widened, the float32 kernel, the maxima rounded back (exact). */
void tg_cpu_max_pool_bf16(const tg_pool_geometry *q, int64_t planes, const uint16_t *x, uint16_t *y, int64_t *idx);

/* Max pooling's backward: gx [planes, in_hw] = zeros, then g [planes, out_hw] added at idx. */
void tg_cpu_max_unpool_f32(int64_t planes, int64_t in_hw, int64_t out_hw, const float *g, const int64_t *idx,
                           float *gx);
void tg_cpu_max_unpool_f64(int64_t planes, int64_t in_hw, int64_t out_hw, const double *g, const int64_t *idx,
                           double *gx);
/* bfloat16: summed in float32 per plane, each element rounded once. */
void tg_cpu_max_unpool_bf16(const tg_pool_geometry *q, int64_t planes, const uint16_t *g, const int64_t *idx,
                            uint16_t *gx);

/* Its double backward: y [planes, out_hw] = g [planes, in_hw] picked at idx. */
void tg_cpu_max_gather_f32(int64_t planes, int64_t in_hw, int64_t out_hw, const float *g, const int64_t *idx, float *y);
void tg_cpu_max_gather_f64(int64_t planes, int64_t in_hw, int64_t out_hw, const double *g, const int64_t *idx,
                           double *y);

/* Average pooling (plain or adaptive, q->adaptive) and its backward (gx zeroed, then
 * each g spread over its window / divisor). */
void tg_cpu_avg_pool_f32(const tg_pool_geometry *q, int64_t planes, const float *x, float *y);
void tg_cpu_avg_pool_f64(const tg_pool_geometry *q, int64_t planes, const double *x, double *y);
void tg_cpu_avg_unpool_f32(const tg_pool_geometry *q, int64_t planes, const float *g, float *gx);
void tg_cpu_avg_unpool_f64(const tg_pool_geometry *q, int64_t planes, const double *g, double *gx);

#endif
