/* Loss functions, with PyTorch's reductions and defaults.
 *
 * One signature rule for every loss: tg_<loss>(input, target) is the PyTorch call
 * with its defaults (reduction='mean', ...), and tg_<loss>_opts(input, target, opts)
 * takes an options struct whose zero fields are those defaults:
 *     tg_mse_loss(pred, y)                                                 F.mse_loss(pred, y)
 *     tg_mse_loss_opts(pred, y, (tg_loss_opts){.reduction = TG_REDUCTION_SUM})   reduction='sum'
 * tg_loss_opts serves cross_entropy, nll_loss, mse_loss and l1_loss (the last two
 * refuse the fields they have no use for); bce_with_logits has tg_bce_opts. */
#ifndef TG_OPS_LOSS_H
#define TG_OPS_LOSS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TG_REDUCTION_MEAN = 0, TG_REDUCTION_SUM, TG_REDUCTION_NONE } tg_reduction;

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

#ifdef __cplusplus
}
#endif
#endif
