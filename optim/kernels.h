/* The fused CPU updates behind tg_optim_step (internal to optim/). Each is one pass
 * over n contiguous elements: read grad and state once, write param and state once.
 * Scalars arrive as doubles and are cast to the element type where PyTorch's tensor
 * ops would cast the Python scalar, so float32 rounding follows PyTorch's op by op. */
#ifndef TG_OPTIM_KERNELS_H
#define TG_OPTIM_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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

typedef enum { TG_RULE_SGD, TG_RULE_ADAM, TG_RULE_RMSPROP } tg_optim_rule;

/* One parameter's share of a step: its data, its state and its own scalars (each
 * parameter has its own step count, so its own bias corrections). State by rule, NULL
 * where unused: SGD {momentum_buffer (NULL when momentum == 0)}; Adam {exp_avg,
 * exp_avg_sq, max_exp_avg_sq (NULL unless amsgrad)}; RMSprop {square_avg, grad_avg
 * (NULL unless centered), momentum_buffer (NULL unless momentum > 0)}. */
typedef struct {
    void *param;
    const void *grad;
    void *state[3];
    int64_t n;
    union {
        tg_sgd_args sgd;
        tg_adam_args adam;
        tg_rmsprop_args rmsprop;
    } args;
} tg_optim_tensor;

/* Updates all the tensors in one parallel loop over all their elements (PyTorch's
 * "foreach"/"fused" step): fixed blocks of elements, none straddling two tensors, so a
 * model's small tensors share the threads with its large ones and the pool is woken once
 * per step instead of once per tensor. Each element's arithmetic is the same whichever
 * block and thread it falls in. */
void tg_optim_kernel_f32(tg_optim_rule rule, const tg_optim_tensor *tensors, int count);
void tg_optim_kernel_f64(tg_optim_rule rule, const tg_optim_tensor *tensors, int count);

/* Whether Adam's float32 step computes blocks with subnormal-range values in double
 * (optim/kernels.c: the same bits, without x86's microcode assists); on by default. Tests
 * switch it to compare both forms. Returns the previous setting. */
bool tg_optim_adam_set_exact_blocks(bool on);

/* GradScaler's unscale (optim/unscale_formula.h) of n contiguous elements in place, in
 * parallel blocks: grad *= inv_scale; returns whether any element was Inf or NaN. */
bool tg_unscale_kernel_f32(float *grad, int64_t n, float inv_scale);
bool tg_unscale_kernel_f64(double *grad, int64_t n, float inv_scale);

#ifdef __cplusplus
}
#endif
#endif
