/* tg_adamw_decay_groups (optim/decay_groups.h): two parameter groups over AdamW. */
#include "optim/decay_groups.h"

#include <stdlib.h>

#include "autograd/grad.h"
#include "core/options.h"

tg_optim *tg_adamw_decay_groups(tg_module *model, tg_adamw_opts opts) {
    if (!model) return tg_error("tg_adamw_decay_groups: model is NULL"), NULL;
    int n = 0;
    tg_tensor *const *params = tg_parameters(model, &n);
    size_t bytes = (size_t)(n ? n : 1) * sizeof(tg_tensor *);
    tg_tensor **decay = malloc(bytes), **no_decay = malloc(bytes);
    TG_ASSERT(decay && no_decay);
    int num_decay = 0, num_no_decay = 0;
    for (int i = 0; i < n; i++) {
        if (!tg_requires_grad(params[i])) continue;
        if (tg_ndim(params[i]) >= 2) decay[num_decay++] = params[i];
        else no_decay[num_no_decay++] = params[i];
    }
    tg_optim *opt = tg_adamw_params(decay, num_decay, opts);
    if (opt && tg_optim_add_param_group(opt, no_decay, num_no_decay, TG_PARAM_GROUP_OPTS(.weight_decay = 0))) {
        tg_optim_free(opt);
        opt = NULL;
    }
    free(decay);
    free(no_decay);
    return opt;
}
