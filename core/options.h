/* Options structs: what a zero field means, and how to pass a real zero.
 *
 * Every options struct (tg_opts, tg_linear_opts, tg_batch_norm_opts, tg_adam_opts,
 * tg_loss_opts, tg_one_cycle_opts, ...) is written as a compound literal that names
 * only what differs from PyTorch's defaults, so a zero (or absent) field means
 * PyTorch's default:
 *
 *     tg_adam(model, (tg_adam_opts){.lr = 3e-4})          torch.optim.Adam(m.parameters(), lr=3e-4)
 *     tg_nn_batch_norm2d(16, (tg_batch_norm_opts){0})      nn.BatchNorm2d(16)
 *
 * Where PyTorch's default is not zero but zero is also a valid choice, write a real
 * zero as TG_ZERO. These are all such fields:
 *
 *     field                                           zero / absent   TG_ZERO
 *     tg_batch_norm_opts.momentum                     0.1             0 (running stats frozen)
 *     tg_batch_norm_opts.eps, tg_layer_norm_opts.eps  1e-5            0
 *     tg_nn_leaky_relu(negative_slope)                0.01            0 (a ReLU)
 *     tg_sgd_opts.lr                                  (required)      0
 *     tg_adam_opts / AdamW .lr, .betas, .eps          1e-3, (0.9, 0.999), 1e-8    0
 *     tg_adam_opts.weight_decay (AdamW)               1e-2            0
 *     tg_rmsprop_opts .lr, .alpha, .eps               1e-2, 0.99, 1e-8            0
 *     tg_param_group_opts, every field                the optimizer's default     0
 *     tg_step_lr / tg_multi_step_lr gamma             0.1             0
 *     tg_linear_lr start_factor, end_factor           1/3, 1.0        0 (start_factor 0 is
 *                                                                     refused, as PyTorch)
 *     tg_one_cycle_opts .max_lr                       (required)      0
 *     tg_one_cycle_opts .pct_start, .div_factor, .final_div_factor, .base_momentum,
 *       .max_momentum                                 0.3, 25, 1e4, 0.85, 0.95    0
 *     tg_sdpa_opts.scale                              1/sqrt(E)       0
 *
 * TG_ZERO is -0.0: it compares equal to 0, so it is zero wherever the library uses it
 * as a number, and its sign bit tells it from an unset field (writing -0.0 is the
 * same). It is for the double fields above; everywhere else 0 is simply 0 (e.g.
 * SGD's momentum and weight_decay, whose PyTorch default is 0). Integer options whose
 * PyTorch default is None and for which 0 is valid take a flag instead:
 * tg_loss_opts.use_ignore_index, tg_embedding_opts.use_padding_idx. Functional ops
 * (tg_leaky_relu(x, slope), tg_softplus(x, beta, threshold)) take plain values. */
#ifndef TG_CORE_OPTIONS_H
#define TG_CORE_OPTIONS_H

#define TG_ZERO (-0.0)

/* A value per spatial dim, [H, W], for the options of convolution and pooling:
 * PyTorch's stride=(1, 2) is .strides = TG_PAIR(1, 2) (or {1, 2} inside a designated
 * initializer). A pair with either field set wins over the option's scalar. */
typedef struct {
    int h, w;
} tg_pair;
#ifdef __cplusplus
#define TG_PAIR(h, w) (tg_pair{(h), (w)})
#else
#define TG_PAIR(h, w) ((tg_pair){(h), (w)})
#endif

#endif
