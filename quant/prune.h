/* Pruning (torch.nn.utils.prune): zeroing a share of a module's weight through a
 * mask that is applied on every forward.
 *
 * Pruning `name` ("weight") of a module the first time moves the parameter to
 * `name_orig` (the same tensor: an optimizer that holds it keeps working) and adds the
 * buffer `name_mask` (0/1, the parameter's dtype and device), so the state dict reads
 * "bias", "weight_orig", "weight_mask" exactly as PyTorch's and files load both ways.
 * A forward pre-hook (nn/module.h) sets the attribute `name` = name_orig * name_mask
 * before each forward, so layers that read tg_module_param(self, "weight") see the
 * masked weight, pruned entries stay zero through fine-tuning and gradients reach
 * name_orig masked. Pruning again composes as PyTorch's PruningContainer: the new
 * amount applies to the entries (unstructured) or channels (structured) still
 * unpruned. tg_prune_remove makes it permanent (PyTorch's prune.remove).
 *
 * Masks are PyTorch's: l1 takes torch.topk of |w| (smallest), random ranks
 * tg_rand_like draws (so after the same seed the same mask as PyTorch's CPU
 * generator), ln_structured keeps the channels of largest L-n norm. Among equal
 * scores tapegrad's topk takes the lower index first; PyTorch's selection
 * algorithm may pick others (same count). Masks are computed on the CPU and copied
 * to the weight's device. */
#ifndef TG_QUANT_PRUNE_H
#define TG_QUANT_PRUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "nn/module.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's `amount`: a float fraction in [0, 1] of the entries to prune (rounded as
 * Python's round(), half to even) or an int count (<= the entries left). */
typedef struct {
    bool is_count;
    double fraction;
    int64_t count;
} tg_prune_amount;

static inline tg_prune_amount tg_prune_fraction(double fraction) {
    tg_prune_amount a = {false, fraction, 0};
    return a;
}
static inline tg_prune_amount tg_prune_count(int64_t count) {
    tg_prune_amount a = {true, 0.0, count};
    return a;
}

/* The unstructured scores global pruning ranks by. */
typedef enum { TG_PRUNE_L1_UNSTRUCTURED, TG_PRUNE_RANDOM_UNSTRUCTURED } tg_prune_method;

/* prune.l1_unstructured(module, name, amount): prunes the entries of smallest |w|. */
tg_status tg_prune_l1_unstructured(tg_module *m, const char *name, tg_prune_amount amount);
/* prune.random_unstructured(module, name, amount): prunes entries at random (draws
 * from the default CPU generator, as torch.rand_like). */
tg_status tg_prune_random_unstructured(tg_module *m, const char *name, tg_prune_amount amount);
/* prune.ln_structured(module, name, amount, n, dim): prunes whole slices along dim
 * (dim 0 of a Linear / Conv2d weight: output channels) of smallest L-n norm (n > 0,
 * INFINITY for the max norm); the amount counts slices. The tensor needs >= 2 dims. */
tg_status tg_prune_ln_structured(tg_module *m, const char *name, tg_prune_amount amount, double n, int dim);
/* prune.global_unstructured(parameters, pruning_method, amount): ranks the entries
 * of all count (modules[i], names[i]) tensors together and prunes the amount of
 * them (counted over the entries still unpruned), wherever they are. */
tg_status tg_prune_global_unstructured(tg_module *const *modules, const char *const *names, int count,
                                       tg_prune_method method, tg_prune_amount amount);
/* prune.custom_from_mask(module, name, mask): prunes where mask (same shape) is 0. */
tg_status tg_prune_custom_from_mask(tg_module *m, const char *name, tg_tensor *mask);
/* prune.is_pruned for one tensor: true when m has name_orig and name_mask. */
bool tg_prune_is_pruned(tg_module *m, const char *name);
/* prune.remove(module, name): writes name_orig * name_mask into name_orig (the same
 * tensor), registers it again as the parameter `name` (after m's other parameters,
 * as PyTorch's setattr) and drops the mask and the hook. Fails when not pruned. */
tg_status tg_prune_remove(tg_module *m, const char *name);
/* The fraction of zeros over m's prunable weights: every pruned tensor (its masked
 * values) and every other parameter named "weight" with >= 2 dims (Linear, Conv2d,
 * Embedding), in m and its descendants. 0 when there are none; -1 + error on NULL. */
double tg_prune_sparsity(tg_module *m);

#ifdef __cplusplus
}
#endif

#endif
