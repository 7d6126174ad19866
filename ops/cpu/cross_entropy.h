/* CPU kernels of ops/loss.c's fused cross entropy: for logits x [n, c, d] and int64
 * targets [n*d], each element's loss (label-smoothed NLL of the log-softmax; 0 where the
 * target is ignored) and log-sum-exp; and the first-order gradient of the logits. Each
 * value in double, rounded once. */
#ifndef TG_OPS_CPU_CROSS_ENTROPY_H
#define TG_OPS_CPU_CROSS_ENTROPY_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/loss.h" /* tg_reduction */

/* One cross-entropy call. */
typedef struct {
    tg_reduction reduction;
    bool use_ignore;
    int64_t ignore_index;
    double smoothing;
    int64_t count;   /* non-ignored targets (the mean's divisor) */
    int64_t n, c, d; /* logits viewed as [n, c, d] */
} tg_ce_args;

static inline bool tg_ce_ignored(const tg_ce_args *a, int64_t t) { return a->use_ignore && t == a->ignore_index; }

void tg_cpu_cross_entropy_f32(const tg_ce_args *a, const float *x, const int64_t *target, float *loss, float *lse);
void tg_cpu_cross_entropy_f64(const tg_ce_args *a, const double *x, const int64_t *target, double *loss, double *lse);
/* gx [n, c, d] from x, target and the forward's lse [n*d]; g is the upstream gradient:
 * n*d values for reduction none, else one. */
void tg_cpu_cross_entropy_backward_f32(const tg_ce_args *a, const float *x, const int64_t *target, const float *lse,
                                       const float *g, float *gx);
void tg_cpu_cross_entropy_backward_f64(const tg_ce_args *a, const double *x, const int64_t *target, const double *lse,
                                       const double *g, double *gx);

#endif
