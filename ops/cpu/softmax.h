/* CPU kernel of ops/softmax.c: softmax or log_softmax (log_out) of each line of x
 * described by px (ops/reduce_plan.h: the outer index picks a line, the inner dim runs
 * along it) into out, laid out by po. Stable (exp(x - max), the sum in double); a line
 * whose max is -inf, or holding a NaN, gives NaN, as PyTorch's. */
#ifndef TG_OPS_CPU_SOFTMAX_H
#define TG_OPS_CPU_SOFTMAX_H

#include <stdbool.h>

#include "ops/reduce_plan.h"

void tg_cpu_softmax_f32(const tg_reduce_plan *px, const tg_reduce_plan *po, const float *x, float *out, bool log_out);
void tg_cpu_softmax_f64(const tg_reduce_plan *px, const tg_reduce_plan *po, const double *x, double *out, bool log_out);

#endif
