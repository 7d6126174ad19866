/* CPU kernels of ops/reduce.c's sum: out[o] = the sum of each line of x described by p
 * (ops/reduce_plan.h), accumulated in double (int64 in int64) and rounded once; one
 * thread per output in one order, so the result does not depend on the thread count.
 * bfloat16 and float16 are bits, read and rounded as a float32 copy's sum would be. */
#ifndef TG_OPS_CPU_SUM_H
#define TG_OPS_CPU_SUM_H

#include <stdint.h>

#include "ops/reduce_plan.h"

/* Elements a task sums (and TG_REDUCE_GRAIN-element blocks of tg_cpu_sum_all_f32). */
#define TG_REDUCE_GRAIN 32768

void tg_cpu_sum_f32(const tg_reduce_plan *p, const float *x, float *out);
void tg_cpu_sum_f64(const tg_reduce_plan *p, const double *x, double *out);
void tg_cpu_sum_i64(const tg_reduce_plan *p, const int64_t *x, int64_t *out);
void tg_cpu_sum_bf16(const tg_reduce_plan *p, const uint16_t *x, uint16_t *out);
void tg_cpu_sum_f16(const tg_reduce_plan *p, const uint16_t *x, uint16_t *out);

/* The sum of n contiguous float32 in double: fixed blocks summed in parallel, the
 * partials added in block order (the same result for any thread count). */
double tg_cpu_sum_all_f32(const float *x, int64_t n);

#endif
