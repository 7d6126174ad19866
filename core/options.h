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
 * Where PyTorch's default is not zero but zero is also a valid choice, the struct has
 * an initialiser macro, TG_<STRUCT>_OPTS(fields...), that starts from PyTorch's
 * defaults written out and sets the fields given, so that a zero is a zero:
 *
 *     tg_nn_batch_norm2d(16, TG_BATCH_NORM_OPTS(.momentum = 0))    momentum=0: frozen stats
 *     tg_adamw(model, TG_ADAMW_OPTS(.lr = 3e-4, .weight_decay = 0))
 *
 * The macro also sets the struct's last field, defaults_filled, which tells the library
 * to take every field as written. These are all such structs:
 *
 *     macro                         defaults it writes
 *     TG_BATCH_NORM_OPTS            eps 1e-5, momentum 0.1
 *     TG_LAYER_NORM_OPTS            eps 1e-5
 *     TG_GROUP_NORM_OPTS            eps 1e-5
 *     TG_INSTANCE_NORM_OPTS         eps 1e-5, momentum 0.1
 *     TG_TRANSFORMER_LAYER_OPTS     dim_feedforward 2048, dropout 0.1, layer_norm_eps 1e-5
 *     TG_SGD_OPTS                   (lr is required: give it; lr 0 is allowed)
 *     TG_ADAM_OPTS / TG_ADAMW_OPTS  lr 1e-3, betas (0.9, 0.999), eps 1e-8; AdamW weight_decay 1e-2
 *     TG_RMSPROP_OPTS               lr 1e-2, alpha 0.99, eps 1e-8
 *     TG_PARAM_GROUP_OPTS           every field NAN: inherit the optimizer's value
 *     TG_ONE_CYCLE_OPTS             pct_start 0.3, div_factor 25, final_div_factor 1e4,
 *                                   base_momentum 0.85, max_momentum 0.95 (max_lr 0 allowed)
 *     TG_SDPA_OPTS                  scale NAN: 1/sqrt(E)
 *     TG_SMOOTH_L1_OPTS, TG_HUBER_OPTS        beta 1, delta 1
 *     TG_TRIPLET_OPTS               margin 1, p 2, eps 1e-6
 *
 * The macros are C (a GNU statement expression, which GCC and Clang accept under
 * -std=c11 -Wall -Wextra -pedantic: the overriding initialisers are the idiom, and the
 * macro silences -Woverride-init for itself); not for file-scope initialisers. In C++,
 * which forbids a designator twice, call them with no arguments and set fields on the
 * value: `auto o = TG_BATCH_NORM_OPTS(); o.momentum = 0;`.
 *
 * TG_ZERO (-0.0) is the older spelling of a real zero in those structs' fields, kept
 * for one release (deprecated): it compares equal to 0, and its sign bit tells it from
 * an unset field. It stays the way to write a real zero for the four plain double
 * parameters whose 0 means PyTorch's default: tg_nn_leaky_relu(negative_slope) (0.01),
 * tg_step_lr / tg_multi_step_lr gamma (0.1), tg_linear_lr start_factor and end_factor
 * (1/3, 1.0; start_factor 0 is refused, as PyTorch). Everywhere else 0 is simply 0
 * (e.g. SGD's momentum and weight_decay, whose PyTorch default is 0). Integer options
 * whose PyTorch default is None and for which 0 is valid take a flag instead:
 * tg_loss_opts.use_ignore_index, tg_embedding_opts.use_padding_idx. Functional ops
 * (tg_leaky_relu(x, slope), tg_softplus(x, beta, threshold)) take plain values. */
#ifndef TG_CORE_OPTIONS_H
#define TG_CORE_OPTIONS_H

#define TG_ZERO (-0.0) /* deprecated in options structs: use their TG_*_OPTS macro */

/* TG_OPTS_WITH_DEFAULTS(type, defaults, fields...): a `type` value holding `defaults`
 * (a macro of designated initialisers), then the caller's `fields`, with defaults_filled
 * set; the TG_*_OPTS macros are written with it. */
#ifndef __cplusplus
#define TG_OPTS_WITH_DEFAULTS(type, defaults, ...)                                           \
    __extension__({                                                                          \
        _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Woverride-init\"") \
            type tg_opts_value_ = {defaults, .defaults_filled = 1, __VA_ARGS__};             \
        _Pragma("GCC diagnostic pop") tg_opts_value_;                                        \
    })
#else
#define TG_OPTS_WITH_DEFAULTS(type, defaults, ...)                                                              \
    ([] {                                                                                                       \
        static_assert(sizeof(#__VA_ARGS__) == 1, "in C++, TG_*_OPTS() takes no fields: set them on the value"); \
        return type{defaults, .defaults_filled = 1};                                                            \
    }())
#endif

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
