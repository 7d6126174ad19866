/* CPU kernel of ops/reduce_stats.c: one statistic per line of x described by p
 * (ops/reduce_plan.h), a row of ops/reduce_formulas.h (var, std, logsumexp, norm)
 * with its first pass, accumulated in double in element order and rounded once into
 * out[o]; param is the row's q. */
#ifndef TG_OPS_CPU_STATS_H
#define TG_OPS_CPU_STATS_H

#include "ops/reduce_formulas.h"
#include "ops/reduce_plan.h"

void tg_cpu_stats_f32(const tg_reduce_plan *p, const float *x, float *out, tg_reduce_kind kind, double param);
void tg_cpu_stats_f64(const tg_reduce_plan *p, const double *x, double *out, tg_reduce_kind kind, double param);

#endif
