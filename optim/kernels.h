/* The fused CPU updates behind tg_optim_step (internal to optim/). Each is one pass
 * over n contiguous elements: read grad and state once, write param and state once.
 * Scalars arrive as doubles and are cast to the element type where PyTorch's tensor
 * ops would cast the Python scalar, so float32 rounding follows PyTorch's op by op. */
#ifndef TG_OPTIM_KERNELS_H
#define TG_OPTIM_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize;
    bool first_step; /* the momentum buffer is empty: it becomes d_p */
} tg_sgd_args;

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    double bias_correction1, bias_correction2_sqrt;
    bool amsgrad, decoupled, maximize;
} tg_adam_args;

typedef struct {
    double lr, alpha, eps, weight_decay, momentum;
    bool centered, maximize;
} tg_rmsprop_args;

/* buf NULL when momentum == 0. */
void tg_sgd_kernel_f32(float *param, const float *grad, float *buf, int64_t n, tg_sgd_args a);
void tg_sgd_kernel_f64(double *param, const double *grad, double *buf, int64_t n, tg_sgd_args a);
/* max_exp_avg_sq NULL unless amsgrad. */
void tg_adam_kernel_f32(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, float *max_exp_avg_sq,
                        int64_t n, tg_adam_args a);
void tg_adam_kernel_f64(double *param, const double *grad, double *exp_avg, double *exp_avg_sq,
                        double *max_exp_avg_sq, int64_t n, tg_adam_args a);
/* grad_avg NULL unless centered; buf NULL unless momentum > 0. */
void tg_rmsprop_kernel_f32(float *param, const float *grad, float *square_avg, float *grad_avg, float *buf, int64_t n,
                           tg_rmsprop_args a);
void tg_rmsprop_kernel_f64(double *param, const double *grad, double *square_avg, double *grad_avg, double *buf,
                           int64_t n, tg_rmsprop_args a);

#endif
