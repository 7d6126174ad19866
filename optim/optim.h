/* Optimizers (torch.optim): SGD, Adam, AdamW, RMSprop, with PyTorch 1.13's update
 * formulas (the single-tensor implementations in torch/optim/{sgd,adam,adamw,rmsprop}.py),
 * per-parameter state, and the state access that checkpoints need. LR schedules are
 * in optim/schedule.h, gradient clipping at the end of this file.
 *
 *     tg_optim *opt = tg_adam(model, (tg_adam_opts){.lr = 1e-3});
 *     for (...) TG_SCOPE {
 *         tg_tensor *loss = tg_cross_entropy(tg_forward(model, x), y);
 *         tg_backward(loss);
 *         tg_optim_step(opt);
 *         tg_optim_zero_grad(opt);
 *     }
 *     tg_optim_free(opt);
 *
 * An optimizer holds a reference to each of its parameters (so it may be freed
 * before or after the model) and owns its state tensors. Parameters come in groups
 * (optimizer.param_groups): the constructor makes group 0 from its options, and
 * tg_optim_add_param_group adds groups with their own lr, weight_decay, momentum,
 * betas, ... (see below); parameter indices run on across groups, as in PyTorch's
 * state_dict.
 * Updates run without recording (no grad) and in place: on the CPU one fused loop
 * per parameter (split over the thread pool for large ones), on CUDA one fused kernel per parameter
 * (optim/cuda/optim.h). Parameters without a gradient are skipped, as in PyTorch.
 * Options: zero fields mean PyTorch's defaults; for a real zero where the default is
 * not zero (e.g. AdamW's weight_decay) start from the struct's macro,
 * TG_ADAMW_OPTS(.weight_decay = 0), which writes the defaults out (core/options.h). */
#ifndef TG_OPTIM_OPTIM_H
#define TG_OPTIM_OPTIM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "nn/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_optim tg_optim;

/* torch.optim.SGD: lr is required (no default, as in PyTorch); momentum, dampening,
 * weight_decay default 0. Nesterov needs momentum > 0 and dampening 0. */
typedef struct {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize;
    bool defaults_filled; /* set by TG_SGD_OPTS(...): every field as written (core/options.h) */
} tg_sgd_opts;
/* No defaults to write (lr is required), but lr 0 is then allowed: TG_SGD_OPTS(.lr = 0). */
#define TG_SGD_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_sgd_opts, .lr = NAN, __VA_ARGS__)

/* torch.optim.Adam / AdamW: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0
 * for Adam and 1e-2 for AdamW. */
typedef struct {
    double lr;
    double betas[2];
    double eps, weight_decay;
    bool amsgrad, maximize;
    bool defaults_filled; /* set by TG_ADAM_OPTS / TG_ADAMW_OPTS(...): every field as written (core/options.h) */
} tg_adam_opts;
typedef tg_adam_opts tg_adamw_opts;
#define TG_ADAM_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_adam_opts, TG_ADAM_DEFAULTS, __VA_ARGS__)
#define TG_ADAMW_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_adamw_opts, TG_ADAMW_DEFAULTS, __VA_ARGS__)
#define TG_ADAM_DEFAULTS .lr = 1e-3, .betas = {0.9, 0.999}, .eps = 1e-8
#define TG_ADAMW_DEFAULTS TG_ADAM_DEFAULTS, .weight_decay = 1e-2

/* torch.optim.RMSprop: lr 1e-2, alpha 0.99, eps 1e-8, weight_decay 0, momentum 0. */
typedef struct {
    double lr, alpha, eps, weight_decay, momentum;
    bool centered, maximize;
    bool defaults_filled; /* set by TG_RMSPROP_OPTS(...): every field as written (core/options.h) */
} tg_rmsprop_opts;
#define TG_RMSPROP_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_rmsprop_opts, TG_RMSPROP_DEFAULTS, __VA_ARGS__)
#define TG_RMSPROP_DEFAULTS .lr = 1e-2, .alpha = 0.99, .eps = 1e-8

/* Constructors: over tg_parameters(model) (in that order), or over an explicit array
 * of `count` floating leaf tensors (frozen ones, requires_grad false, are kept and
 * never updated, as in PyTorch). Return a NEW optimizer (tg_optim_free), or
 * NULL + error (names the optimizer and the bad option or parameter). */
tg_optim *tg_sgd(tg_module *model, tg_sgd_opts opts);
tg_optim *tg_sgd_params(tg_tensor *const *params, int count, tg_sgd_opts opts);
tg_optim *tg_adam(tg_module *model, tg_adam_opts opts);
tg_optim *tg_adam_params(tg_tensor *const *params, int count, tg_adam_opts opts);
tg_optim *tg_adamw(tg_module *model, tg_adamw_opts opts);
tg_optim *tg_adamw_params(tg_tensor *const *params, int count, tg_adamw_opts opts);
tg_optim *tg_rmsprop(tg_module *model, tg_rmsprop_opts opts);
tg_optim *tg_rmsprop_params(tg_tensor *const *params, int count, tg_rmsprop_opts opts);

/* ---- parameter groups (optimizer.param_groups, optimizer.add_param_group) ----
 * Options of a new group. Zero fields inherit the optimizer's defaults (the options
 * given to the constructor, not group 0's current values, as PyTorch's
 * optimizer.defaults); in TG_PARAM_GROUP_OPTS(...) the fields not given are NAN and a 0
 * is a real zero (no weight decay on biases: TG_PARAM_GROUP_OPTS(.weight_decay = 0)).
 * A field that the optimizer does not have (betas for SGD) must be left unset.
 * nesterov, amsgrad, centered and maximize are the optimizer's, for every group. */
typedef struct {
    double lr, weight_decay;
    double momentum;      /* SGD, RMSprop */
    double dampening;     /* SGD */
    double betas[2];      /* Adam, AdamW */
    double eps;           /* Adam, AdamW, RMSprop */
    double alpha;         /* RMSprop */
    bool defaults_filled; /* set by TG_PARAM_GROUP_OPTS(...): every field as written (core/options.h) */
} tg_param_group_opts;
/* Every field NAN (inherit the optimizer's value) but those given, which are as
 * written: TG_PARAM_GROUP_OPTS(.weight_decay = 0). */
#define TG_PARAM_GROUP_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_param_group_opts, TG_PARAM_GROUP_DEFAULTS, __VA_ARGS__)
#define TG_PARAM_GROUP_DEFAULTS \
    .lr = NAN, .weight_decay = NAN, .momentum = NAN, .dampening = NAN, .betas = {NAN, NAN}, .eps = NAN, .alpha = NAN

/* optimizer.add_param_group({"params": params, **opts}): appends a group of `count`
 * parameters; they take the next parameter indices (tg_optim_param, "state.<i>...").
 * Each must be a floating leaf tensor. Fails (TG_ERROR, optimizer
 * unchanged) on an invalid option, an option the optimizer lacks, or a parameter that
 * appears twice or is already in a group; the message names the optimizer, the
 * parameter's position in `params` and, for a repeat, the group and index it already
 * has (PyTorch: "some parameters appear in more than one parameter group"). */
tg_status tg_optim_add_param_group(tg_optim *opt, tg_tensor *const *params, int count, tg_param_group_opts opts);
/* len(optimizer.param_groups): 1 after construction. */
int tg_optim_num_groups(const tg_optim *opt);
/* Group g's parameters are tg_optim_param(opt, first) ... (opt, first + count - 1). */
int tg_optim_group_first_param(const tg_optim *opt, int g);
int tg_optim_group_num_params(const tg_optim *opt, int g);
/* The group of parameter i, or -1 when i is out of range. */
int tg_optim_param_group(const tg_optim *opt, int i);
/* Group g's hyper-parameters as they are now (lr and momentum may have been changed
 * by a schedule); fields the optimizer lacks are 0. All zeros for a bad g. */
tg_param_group_opts tg_optim_group_opts(const tg_optim *opt, int g);
/* param_groups[g]["lr"]. The setter fails (naming the optimizer) on a bad g and,
 * like PyTorch's dict, takes any value; the getter returns NAN for a bad g. */
tg_status tg_optim_set_group_lr(tg_optim *opt, int g, double lr);
double tg_optim_get_group_lr(const tg_optim *opt, int g);
/* The momentum that OneCycleLR cycles: param_groups[g]["momentum"] for SGD and
 * RMSprop, param_groups[g]["betas"][0] for Adam and AdamW. The setter fails on a bad
 * g, a negative value, a beta1 outside [0, 1), and when it would switch an SGD or
 * RMSprop group's momentum on or off: whether a group has a momentum buffer is fixed
 * when the group is made (its state layout), so a group made without momentum keeps
 * momentum 0, and one made with momentum keeps it positive. */
tg_status tg_optim_set_group_momentum(tg_optim *opt, int g, double momentum);
double tg_optim_get_group_momentum(const tg_optim *opt, int g);

/* optimizer.step(): updates every parameter that has a gradient. Fails (naming the
 * optimizer and the parameter index) when a gradient's shape, dtype or device differs
 * from its parameter's, on non-floating parameters, or when a CUDA kernel is missing. */
tg_status tg_optim_step(tg_optim *opt);
/* tg_optim_step unless a gradient holds NaN or Inf: then nothing is updated and
 * *skipped is set (the "skip this step" of mixed-precision loss scaling). */
tg_status tg_optim_step_if_finite(tg_optim *opt, bool *skipped);
/* optimizer.zero_grad(set_to_none=True): drops every parameter's .grad. */
void tg_optim_zero_grad(tg_optim *opt);
/* set_lr sets every group's lr (`for g in opt.param_groups: g["lr"] = lr`); get_lr
 * reads group 0's (optimizer.param_groups[0]["lr"]). Per group: tg_optim_*_group_lr. */
void tg_optim_set_lr(tg_optim *opt, double lr);
double tg_optim_get_lr(const tg_optim *opt);
/* "SGD", "Adam", "AdamW", "RMSprop". */
const char *tg_optim_name(const tg_optim *opt);
/* The parameters of every group, group by group, each in the order given (borrowed). */
int tg_optim_num_params(const tg_optim *opt);
tg_tensor *tg_optim_param(const tg_optim *opt, int i);
/* Releases the optimizer's parameter references and its state. NULL-safe. */
void tg_optim_free(tg_optim *opt);

/* ---- state, for checkpoints (optimizer.state_dict()["state"]) ----
 * Entries are named as PyTorch's state_dict flattened: "state.<param index>.<key>",
 * keys "step" (a 0-dim float32 CPU tensor, as Adam's in 1.13; RMSprop's too, where
 * PyTorch keeps an int), "exp_avg", "exp_avg_sq", "max_exp_avg_sq" (Adam/AdamW,
 * amsgrad), "momentum_buffer" (SGD with momentum, RMSprop with momentum),
 * "square_avg", "grad_avg" (RMSprop, centered). As in PyTorch, a parameter's state
 * appears at its first step; entries go by parameter index, then in the order
 * PyTorch creates the keys. Parameter indices run on across groups (group 1's first
 * parameter follows group 0's last), and a parameter's keys are its group's (an SGD
 * group with momentum has "momentum_buffer", one without has none). */
int tg_optim_state_count(tg_optim *opt);
/* Entry i: *name (borrowed, valid until the next step/set/free) and *tensor
 * (borrowed; the optimizer's own tensor, so tg_copy_ into it restores it). */
tg_status tg_optim_state_get(tg_optim *opt, int i, const char **name, tg_tensor **tensor);
/* Sets the entry `name` ("state.3.exp_avg") to a copy of value (cast and moved to the
 * parameter's dtype/device; "step" stays float32 CPU), creating the parameter's state
 * when it has none. Fails on an unknown key, a bad index or a shape that differs. */
tg_status tg_optim_state_set(tg_optim *opt, const char *name, tg_tensor *value);

/* ---- gradient clipping ---- */

/* torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type): the norm of all
 * gradients together (norm_type p > 0, or INFINITY for the max), then every gradient
 * is multiplied in place by min(1, max_norm / (total + 1e-6)). Returns the total
 * norm (computed in the gradients' dtype, as PyTorch), 0 when no parameter has a
 * gradient, NAN + error on failure. A NaN total (a NaN gradient) makes every gradient
 * NaN and is returned without an error, as in PyTorch. norm_type 0 means 2. */
double tg_clip_grad_norm(tg_module *model, double max_norm, double norm_type);
double tg_clip_grad_norm_params(tg_tensor *const *params, int count, double max_norm, double norm_type);
/* torch.nn.utils.clip_grad_value_(parameters, clip_value): clamps every gradient in
 * place to [-clip_value, clip_value] (parameters without a gradient are skipped).
 * TG_OK, or TG_ERROR for a NaN clip_value or a NULL model/array. */
tg_status tg_clip_grad_value(tg_module *model, double clip_value);
tg_status tg_clip_grad_value_params(tg_tensor *const *params, int count, double clip_value);

#ifdef __cplusplus
}
#endif

#include "optim/schedule.h"

#endif
