/* Loss functions, with PyTorch's reductions and defaults. */
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
 * are skipped, the mean divides by the others), no smoothing. */
typedef struct {
    tg_reduction reduction;
    bool use_ignore_index; /* true: ignore_index below instead of -100 */
    int64_t ignore_index;
    double label_smoothing;
} tg_loss_opts;

/* torch.nn.functional.cross_entropy: logits [N, C] (or [N, C, d...]) and int64 class
 * indices [N] (or [N, d...]). Fused log_softmax + nll with its own backward.
 * Fails on a target out of range [0, C) (naming it), wrong dtypes or shapes. */
tg_tensor *tg_cross_entropy(tg_tensor *logits, tg_tensor *target);
tg_tensor *tg_cross_entropy_opts(tg_tensor *logits, tg_tensor *target, tg_loss_opts opts);
/* torch.nn.functional.nll_loss on log-probabilities. */
tg_tensor *tg_nll_loss(tg_tensor *log_probs, tg_tensor *target, tg_loss_opts opts);
/* mse_loss, l1_loss (same shapes, or broadcastable as PyTorch warns but allows). */
tg_tensor *tg_mse_loss(tg_tensor *input, tg_tensor *target, tg_reduction reduction);
tg_tensor *tg_l1_loss(tg_tensor *input, tg_tensor *target, tg_reduction reduction);
/* binary_cross_entropy_with_logits (numerically stable form). */
tg_tensor *tg_binary_cross_entropy_with_logits(tg_tensor *logits, tg_tensor *target, tg_reduction reduction);

#ifdef __cplusplus
}
#endif
#endif
