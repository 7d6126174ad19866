/* CPU kernels of ops/norm.c: batch norm's and layer norm's forward (statistics in
 * double, two passes) and their fused training backward, float32 and float64
 * from one body each (ops/cpu/norm_kernels.h). Results depend on the shapes only,
 * never on the number of threads. */
#ifndef TG_OPS_CPU_NORM_H
#define TG_OPS_CPU_NORM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/shape.h" /* TG_MAX_DIMS */

/* One norm call: x viewed as [outer, groups, inner], statistics per group over
 * outer * inner elements (batch norm: groups = channels; layer norm: groups = rows,
 * outer = 1, the weight over the normalized dims). */
typedef struct {
    double eps;
    int64_t outer, groups, inner; /* x viewed as [outer, groups, inner]; stats per group over outer*inner */
    int dims[TG_MAX_DIMS];        /* the reduced dims of x */
    int num_dims;
    bool layer; /* layer norm: stats per row (groups = rows, outer = 1), weight over the normalized dims */
    bool relu;  /* batch norm only: y = relu(y + residual), tg_batch_norm_add_relu's epilogue */
} tg_norm_args;

/* y = (x - mean) * invstd * w + b per group; mean_out, var_out [groups] (biased var);
 * stats (or NULL) gets mean and invstd in double, for tg_cpu_bn_backward. w, b may be NULL.
 * Batch norm: residual (or NULL, x's shape) is added to y, then ReLU when a->relu, in the
 * same pass, with the bits of the separate add and ReLU ops. */
void tg_cpu_norm_forward_f32(const tg_norm_args *a, const float *x, const float *w, const float *b,
                             const float *residual, float *y, float *mean_out, float *var_out, double *stats);
void tg_cpu_norm_forward_f64(const tg_norm_args *a, const double *x, const double *w, const double *b,
                             const double *residual, double *y, double *mean_out, double *var_out, double *stats);

/* Batch norm training backward for x [O, C, I] from the forward's stats: gx, gw, gb
 * (any may be NULL). */
void tg_cpu_bn_backward_f32(int64_t O, int64_t C, int64_t I, const float *g, const float *x, const float *w,
                            const double *stats, float *gx, float *gw, float *gb);
void tg_cpu_bn_backward_f64(int64_t O, int64_t C, int64_t I, const double *g, const double *x, const double *w,
                            const double *stats, double *gx, double *gw, double *gb);

/* Layer norm training backward for x [R, D] from the forward's stats: gx (or NULL), and gw,
 * gb [D] (both or neither: NULL). part: a workspace of tg_cpu_ln_backward_workspace(R, D)
 * elements (the column sums of fixed blocks of rows, so no result depends on the threads). */
int64_t tg_cpu_ln_backward_workspace(int64_t R, int64_t D);
void tg_cpu_ln_backward_f32(int64_t R, int64_t D, const float *g, const float *x, const float *w, const double *stats,
                            float *gx, float *gw, float *gb, float *part);
void tg_cpu_ln_backward_f64(int64_t R, int64_t D, const double *g, const double *x, const double *w,
                            const double *stats, double *gx, double *gw, double *gb, double *part);

#endif
