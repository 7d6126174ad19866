/* The TG_*_OPTS initialiser macros as a C program writes them (C++ forbids a
 * designator twice, so tests/core/options_test.cc calls these): each returns the
 * struct its macro makes. tests/options_macros.c. */
#ifndef TG_TESTS_OPTIONS_MACROS_H
#define TG_TESTS_OPTIONS_MACROS_H

#include "tapegrad.h"

#ifdef __cplusplus
extern "C" {
#endif

tg_batch_norm_opts c_batch_norm_momentum_zero(void);      /* TG_BATCH_NORM_OPTS(.momentum = 0) */
tg_batch_norm_opts c_batch_norm_defaults_eps(double eps); /* TG_BATCH_NORM_OPTS(.eps = eps, .no_affine = true) */
tg_layer_norm_opts c_layer_norm_eps_zero(void);           /* TG_LAYER_NORM_OPTS(.eps = 0) */
tg_instance_norm_opts
c_instance_norm_momentum_zero(void); /* TG_INSTANCE_NORM_OPTS(.momentum = 0, .track_running_stats = true) */
tg_transformer_layer_opts
c_transformer_no_dropout(void);             /* TG_TRANSFORMER_LAYER_OPTS(.dropout = 0, .dim_feedforward = 16) */
tg_sgd_opts c_sgd_lr(double lr);            /* TG_SGD_OPTS(.lr = lr) */
tg_sgd_opts c_sgd_no_lr(void);              /* TG_SGD_OPTS(.momentum = 0.9) */
tg_adam_opts c_adam_beta1_zero(void);       /* TG_ADAM_OPTS(.betas = {0, 0.999}) */
tg_adamw_opts c_adamw_no_decay(void);       /* TG_ADAMW_OPTS(.lr = 3e-4, .weight_decay = 0) */
tg_rmsprop_opts c_rmsprop_alpha_zero(void); /* TG_RMSPROP_OPTS(.alpha = 0) */
tg_param_group_opts c_group_no_decay(void); /* TG_PARAM_GROUP_OPTS(.weight_decay = 0) */
tg_param_group_opts c_group_betas(void);    /* TG_PARAM_GROUP_OPTS(.betas = {0.5, 0.9}) */
tg_one_cycle_opts
c_one_cycle_base_momentum_zero(void);    /* TG_ONE_CYCLE_OPTS(.max_lr = 0.1, .total_steps = 10, .base_momentum = 0) */
tg_sdpa_opts c_sdpa_scale(double scale); /* TG_SDPA_OPTS(.scale = scale) */
tg_sdpa_opts c_sdpa_defaults(void);      /* TG_SDPA_OPTS() */
tg_smooth_l1_opts c_smooth_l1_beta_zero(void); /* TG_SMOOTH_L1_OPTS(.beta = 0) */
tg_huber_opts c_huber_defaults(void);          /* TG_HUBER_OPTS(.reduction = TG_REDUCTION_SUM) */
tg_triplet_opts c_triplet_margin_zero(void);   /* TG_TRIPLET_OPTS(.margin = 0) */

#ifdef __cplusplus
}
#endif

#endif
