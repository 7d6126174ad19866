/* CPU kernel of ops/reduce_extrema.c: for each line of x described by p
 * (ops/reduce_plan.h), the first maximum (is_max) or minimum, a NaN beating everything
 * (the first NaN is picked, as PyTorch); its value into values[o] and its position along
 * the line into indices[o] (either may be NULL). */
#ifndef TG_OPS_CPU_EXTREME_H
#define TG_OPS_CPU_EXTREME_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/reduce_plan.h"

void tg_cpu_extreme_f32(const tg_reduce_plan *p, const float *x, float *values, int64_t *indices, bool is_max);
void tg_cpu_extreme_f64(const tg_reduce_plan *p, const double *x, double *values, int64_t *indices, bool is_max);
void tg_cpu_extreme_i64(const tg_reduce_plan *p, const int64_t *x, int64_t *values, int64_t *indices, bool is_max);
void tg_cpu_extreme_i32(const tg_reduce_plan *p, const int32_t *x, int32_t *values, int64_t *indices, bool is_max);
void tg_cpu_extreme_u8(const tg_reduce_plan *p, const uint8_t *x, uint8_t *values, int64_t *indices, bool is_max);

#endif
