/* CPU kernel of ops/reduce_stats.c: one statistic per line of x described by p
 * (ops/reduce_plan.h), accumulated in double and rounded once into out[o]. var/std:
 * two passes (mean, then squared deviations) divided by max(0, N - param), param the
 * correction; logsumexp: shifted by the max (an infinite max by 0, as PyTorch); norm:
 * the param-norm (inf: the max |x|, a NaN winning). */
#ifndef TG_OPS_CPU_STATS_H
#define TG_OPS_CPU_STATS_H

#include "ops/reduce_plan.h"

typedef enum { STAT_VAR, STAT_STD, STAT_LOGSUMEXP, STAT_NORM } tg_stat_kind;

void tg_cpu_stats_f32(const tg_reduce_plan *p, const float *x, float *out, tg_stat_kind kind, double param);
void tg_cpu_stats_f64(const tg_reduce_plan *p, const double *x, double *out, tg_stat_kind kind, double param);

#endif
