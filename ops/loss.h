/* Loss functions, with PyTorch's reductions and defaults.
 *
 * One signature rule for every loss: tg_<loss>(input, target) is the PyTorch call
 * with its defaults (reduction='mean', ...), and tg_<loss>_opts(input, target, opts)
 * takes an options struct whose zero fields are those defaults:
 *     tg_mse_loss(pred, y)                                                 F.mse_loss(pred, y)
 *     tg_mse_loss_opts(pred, y, (tg_loss_opts){.reduction = TG_REDUCTION_SUM})   reduction='sum'
 * tg_loss_opts serves cross_entropy, nll_loss, mse_loss and l1_loss (the last two
 * refuse the fields they have no use for); bce_with_logits and binary_cross_entropy
 * have tg_bce_opts, kl_div tg_kl_opts, smooth_l1 / huber tg_smooth_l1_opts /
 * tg_huber_opts, triplet_margin_loss tg_triplet_opts. Fields whose PyTorch default is
 * not zero (beta, delta, margin, p, eps) read 0 as that default; their macros
 * (TG_SMOOTH_L1_OPTS, TG_HUBER_OPTS, TG_TRIPLET_OPTS) write the defaults out, so that a
 * zero is a zero (core/options.h). */
#ifndef TG_OPS_LOSS_H
#define TG_OPS_LOSS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/options.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* BATCHMEAN (the sum divided by the input's first dim) is kl_div's only; the other
 * losses refuse it. */
typedef enum { TG_REDUCTION_MEAN = 0, TG_REDUCTION_SUM, TG_REDUCTION_NONE, TG_REDUCTION_BATCHMEAN } tg_reduction;

/* Zero fields: mean reduction, ignore_index -100 (PyTorch's default: targets of -100
 * are skipped, the mean divides by the others), no smoothing, no class weights. */
typedef struct {
    tg_reduction reduction;
    bool use_ignore_index; /* true: ignore_index below instead of -100 */
    int64_t ignore_index;
    double label_smoothing;
    /* PyTorch's `weight`: NULL, or a 1-D [C] tensor of the input's dtype and device.
     * Each element's loss is multiplied by weight[target]; the mean divides by the sum
     * of weight[target] over the non-ignored targets. With label_smoothing, the
     * smoothing term is -sum_c weight[c] log p_c / C (PyTorch 1.13). No gradient
     * flows into the weight. */
    tg_tensor *weight;
} tg_loss_opts;

/* Options of tg_binary_cross_entropy_with_logits_opts; zero fields: mean, no weights. */
typedef struct {
    tg_reduction reduction;
    tg_tensor *weight;     /* NULL or broadcastable to the input: rescales each element's loss */
    tg_tensor *pos_weight; /* NULL or broadcastable to the input (usually [C], the last dim):
                            * the positive term's weight, log_weight = 1 + (pos_weight - 1) target */
} tg_bce_opts;

/* torch.nn.functional.cross_entropy: logits [N, C] (or [N, C, d...]) and int64 class
 * indices [N] (or [N, d...]). Fused log_softmax + nll with its own backward.
 * Fails on a target out of range [0, C) (naming it), wrong dtypes or shapes.
 * A floating target of the logits' shape holds class probabilities (PyTorch 1.13):
 * loss = -sum_c weight[c] ((1 - eps) target_c + eps / C) log_softmax(logits)_c per
 * row, the mean divides by the number of rows (N times d...), whatever the weights;
 * a non-negative ignore_index is refused there. Differentiable in the target too. */
tg_tensor *tg_cross_entropy(tg_tensor *logits, tg_tensor *target);
tg_tensor *tg_cross_entropy_opts(tg_tensor *logits, tg_tensor *target, tg_loss_opts opts);
/* torch.nn.functional.nll_loss on log-probabilities. */
tg_tensor *tg_nll_loss(tg_tensor *log_probs, tg_tensor *target);
tg_tensor *tg_nll_loss_opts(tg_tensor *log_probs, tg_tensor *target, tg_loss_opts opts);
/* mse_loss, l1_loss (same shapes, or broadcastable as PyTorch warns but allows).
 * The _opts forms take only .reduction (another non-zero field is an error). */
tg_tensor *tg_mse_loss(tg_tensor *input, tg_tensor *target);
tg_tensor *tg_mse_loss_opts(tg_tensor *input, tg_tensor *target, tg_loss_opts opts);
tg_tensor *tg_l1_loss(tg_tensor *input, tg_tensor *target);
tg_tensor *tg_l1_loss_opts(tg_tensor *input, tg_tensor *target, tg_loss_opts opts);
/* binary_cross_entropy_with_logits (numerically stable form). */
tg_tensor *tg_binary_cross_entropy_with_logits(tg_tensor *logits, tg_tensor *target);
/* The same with PyTorch's weight and pos_weight (same dtype and device as the input;
 * both must broadcast to the input's shape). Differentiable in logits, target,
 * weight and pos_weight. */
tg_tensor *tg_binary_cross_entropy_with_logits_opts(tg_tensor *logits, tg_tensor *target, tg_bce_opts opts);

/* binary_cross_entropy on probabilities in [0, 1] (checked: an element outside is an
 * error, as PyTorch's CPU kernel): -w (y log x + (1 - y) log(1 - x)), each log clamped
 * at -100. Gradients as PyTorch 1.13's: w (x - y) / max(x (1 - x), 1e-12) for the
 * input, w (log(1 - x) - log x) (unclamped) for the target; the weight's is the
 * element's loss. Target of the input's shape; opts.weight broadcastable to it;
 * opts.pos_weight is refused (a bce_with_logits option). */
tg_tensor *tg_binary_cross_entropy(tg_tensor *input, tg_tensor *target);
tg_tensor *tg_binary_cross_entropy_opts(tg_tensor *input, tg_tensor *target, tg_bce_opts opts);

/* Options of tg_kl_div_opts; zero fields: mean (elementwise, PyTorch's default),
 * target given as probabilities. */
typedef struct {
    tg_reduction reduction; /* also TG_REDUCTION_BATCHMEAN: sum / input's dim 0 */
    bool log_target;        /* target holds log-probabilities */
} tg_kl_opts;
/* torch.nn.functional.kl_div(input, target) with input log-probabilities:
 * target (log target - input), or exp(target) (target - input) with log_target;
 * a zero target contributes 0 (xlogy). Broadcasting as PyTorch. The target's gradient
 * at a zero target is finite here (-input), where PyTorch 1.13 gives NaN. */
tg_tensor *tg_kl_div(tg_tensor *input, tg_tensor *target);
tg_tensor *tg_kl_div_opts(tg_tensor *input, tg_tensor *target, tg_kl_opts opts);

/* Options of tg_smooth_l1_loss_opts; zero fields: mean, beta 1 (beta 0, an L1 loss
 * as PyTorch's: TG_SMOOTH_L1_OPTS(.beta = 0)). */
typedef struct {
    tg_reduction reduction;
    double beta;
    bool defaults_filled; /* set by TG_SMOOTH_L1_OPTS(...): every field as written (core/options.h) */
} tg_smooth_l1_opts;
#define TG_SMOOTH_L1_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_smooth_l1_opts, .beta = 1.0, __VA_ARGS__)
/* torch.nn.functional.smooth_l1_loss: with d = input - target,
 * 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta. A negative beta is an error. */
tg_tensor *tg_smooth_l1_loss(tg_tensor *input, tg_tensor *target);
tg_tensor *tg_smooth_l1_loss_opts(tg_tensor *input, tg_tensor *target, tg_smooth_l1_opts opts);

/* Options of tg_huber_loss_opts; zero fields: mean, delta 1. */
typedef struct {
    tg_reduction reduction;
    double delta;
    bool defaults_filled; /* set by TG_HUBER_OPTS(...): every field as written (core/options.h) */
} tg_huber_opts;
#define TG_HUBER_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_huber_opts, .delta = 1.0, __VA_ARGS__)
/* torch.nn.functional.huber_loss: 0.5 d^2 where |d| < delta, else
 * delta (|d| - 0.5 delta). delta must be positive. */
tg_tensor *tg_huber_loss(tg_tensor *input, tg_tensor *target);
tg_tensor *tg_huber_loss_opts(tg_tensor *input, tg_tensor *target, tg_huber_opts opts);

/* Options of tg_triplet_margin_loss_opts; zero fields: mean, margin 1, p 2, eps 1e-6,
 * no swap (a real zero margin or eps: TG_TRIPLET_OPTS(.margin = 0)). */
typedef struct {
    tg_reduction reduction;
    double margin;
    double p;             /* the distance's norm: positive, or INFINITY */
    double eps;           /* added to the differences, as tg_pairwise_distance */
    bool swap;            /* the negative distance is min(d(a, n), d(p, n)) */
    bool defaults_filled; /* set by TG_TRIPLET_OPTS(...): every field as written (core/options.h) */
} tg_triplet_opts;
#define TG_TRIPLET_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_triplet_opts, .margin = 1.0, .p = 2.0, .eps = 1e-6, __VA_ARGS__)
/* torch.nn.functional.triplet_margin_loss(anchor, positive, negative):
 * max(d(a, p) - d(a, n) + margin, 0) with d = tg_pairwise_distance over the last dim.
 * The three must have the same number of dims and broadcast together. */
tg_tensor *tg_triplet_margin_loss(tg_tensor *anchor, tg_tensor *positive, tg_tensor *negative);
tg_tensor *tg_triplet_margin_loss_opts(tg_tensor *anchor, tg_tensor *positive, tg_tensor *negative,
                                       tg_triplet_opts opts);

#ifdef __cplusplus
}
#endif
#endif
