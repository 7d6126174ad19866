/* The usual split of a transformer's parameters for AdamW (nanoGPT's
 * configure_optimizers): weight decay on the matrices (Linear and Embedding weights,
 * every parameter of 2 or more dims), none on the vectors (biases, LayerNorm and
 * other norm weights). One call instead of sorting the parameters by hand. */
#ifndef TG_OPTIM_DECAY_GROUPS_H
#define TG_OPTIM_DECAY_GROUPS_H

#include "nn/module.h"
#include "optim/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay,
 * "weight_decay": 0.0}], lr, betas, eps): group 0 holds model's parameters of 2 or more
 * dims that require grad, with opts.weight_decay (AdamW's default 1e-2 when 0); group 1
 * its 0- and 1-dim ones, with weight decay 0; both in tg_parameters order, frozen
 * parameters (requires_grad false) in neither, as nanoGPT. Either group may be empty.
 * A NEW optimizer (tg_optim_free), or NULL + error as tg_adamw's. */
tg_optim *tg_adamw_decay_groups(tg_module *model, tg_adamw_opts opts);

#ifdef __cplusplus
}
#endif
#endif
