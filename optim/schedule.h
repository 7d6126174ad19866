/* Learning-rate schedules (torch.optim.lr_scheduler), producing PyTorch 1.13's
 * sequences: the chainable (recursive) get_lr() forms that scheduler.step() uses,
 * so the numbers agree with PyTorch's to the last bits.
 *
 *     tg_lr_scheduler *sched = tg_step_lr(opt, 30, 0.1);
 *     for (int epoch = 0; epoch < 100; epoch++) {
 *         train_one_epoch(...);              // tg_optim_step(opt) inside
 *         tg_scheduler_step(sched);          // after the optimizer, as in PyTorch
 *     }
 *     tg_scheduler_free(sched);
 *
 * Making a scheduler records each parameter group's lr as that group's base lr
 * (PyTorch's base_lrs; for a second scheduler on the same optimizer, the first one's,
 * as PyTorch's group['initial_lr']) and sets epoch 0 (and, for LinearLR, the first factor), like
 * PyTorch's constructor's initial step; each step then computes every group's lr
 * from its own lr and base lr. The groups are those the optimizer has when the
 * scheduler is made; a group added later is left alone. A scheduler borrows the
 * optimizer and is attached to it until tg_scheduler_free: checkpoints of the
 * optimizer hold its state (io/checkpoint.h), so a resumed run that makes the same
 * schedulers continues bit for bit. Either may be freed first; stepping a scheduler
 * whose optimizer was freed is an error. */
#ifndef TG_OPTIM_SCHEDULE_H
#define TG_OPTIM_SCHEDULE_H

#include <stdbool.h>

#include "core/error.h"
#include "core/options.h" /* TG_OPTS_WITH_DEFAULTS, TG_ZERO */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_optim tg_optim;
typedef struct tg_lr_scheduler tg_lr_scheduler;

/* StepLR(step_size, gamma): lr *= gamma every step_size epochs. gamma 0 means 0.1. */
tg_lr_scheduler *tg_step_lr(tg_optim *opt, int step_size, double gamma);
/* MultiStepLR(milestones, gamma): lr *= gamma at each milestone (sorted, repeats
 * multiply, as Counter(milestones)). gamma 0 means 0.1. */
tg_lr_scheduler *tg_multi_step_lr(tg_optim *opt, const int *milestones, int count, double gamma);
/* ExponentialLR(gamma): lr *= gamma every epoch. */
tg_lr_scheduler *tg_exponential_lr(tg_optim *opt, double gamma);
/* CosineAnnealingLR(T_max, eta_min). */
tg_lr_scheduler *tg_cosine_annealing_lr(tg_optim *opt, int t_max, double eta_min);
/* LinearLR(start_factor, end_factor, total_iters); zeros mean 1/3, 1.0, 5. */
tg_lr_scheduler *tg_linear_lr(tg_optim *opt, double start_factor, double end_factor, int total_iters);

/* LambdaLR's factor for group g at epoch: lr = base_lr * lr_lambda(epoch, g, user)
 * (PyTorch's lr_lambda, or its list of one per group). */
typedef double (*tg_lr_lambda)(int epoch, int group, void *user);
/* LambdaLR(lr_lambda): user is passed through, borrowed. */
tg_lr_scheduler *tg_lambda_lr(tg_optim *opt, tg_lr_lambda lr_lambda, void *user);
/* SequentialLR(schedulers, milestones): schedulers[0] until epoch milestones[0], then
 * schedulers[1] (started with its step(0), the closed form at epoch 0), ...; count - 1
 * increasing milestones. Warmup then cosine, as GPT recipes:
 *     tg_lr_scheduler *parts[2] = {tg_linear_lr(opt, 0.01, 1, 5), tg_cosine_annealing_lr(opt, 95, 1e-5)};
 *     tg_lr_scheduler *sched = tg_sequential_lr(opt, parts, 2, (int[]){5});
 * The schedulers must be made on opt (their base lrs are the lrs before the first
 * one, as PyTorch's initial_lr); it takes them over and frees them with itself (also
 * when it fails). OneCycleLR and nested SequentialLRs are refused. */
tg_lr_scheduler *tg_sequential_lr(tg_optim *opt, tg_lr_scheduler *const *schedulers, int count, const int *milestones);

typedef enum { TG_ANNEAL_COS = 0, TG_ANNEAL_LINEAR = 1 } tg_anneal_strategy;

/* OneCycleLR's options (torch.optim.lr_scheduler.OneCycleLR); zero fields mean
 * PyTorch's defaults; in TG_ONE_CYCLE_OPTS(...) (PyTorch's defaults written out) a zero
 * is a zero (core/options.h). */
typedef struct {
    double max_lr;         /* required: every group's peak lr (PyTorch's single max_lr) */
    const double *max_lrs; /* or one per group (num_max_lrs = tg_optim_num_groups); overrides max_lr */
    int num_max_lrs;
    int total_steps; /* required, or epochs and steps_per_epoch (total = their product) */
    int epochs, steps_per_epoch;
    double pct_start;                   /* 0.3: the share of the steps spent rising */
    tg_anneal_strategy anneal_strategy; /* TG_ANNEAL_COS (default) or TG_ANNEAL_LINEAR */
    double div_factor;                  /* 25: initial_lr = max_lr / div_factor */
    double final_div_factor;            /* 1e4: min_lr = initial_lr / final_div_factor */
    bool three_phase;                   /* rise, fall back to initial_lr, then anneal to min_lr */
    bool no_cycle_momentum;             /* cycle_momentum=False (PyTorch's default is True) */
    double base_momentum, max_momentum; /* 0.85, 0.95 */
    bool defaults_filled;               /* set by TG_ONE_CYCLE_OPTS(...): every field as written */
} tg_one_cycle_opts;
#define TG_ONE_CYCLE_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_one_cycle_opts, TG_ONE_CYCLE_DEFAULTS, __VA_ARGS__)
#define TG_ONE_CYCLE_DEFAULTS \
    .pct_start = 0.3, .div_factor = 25.0, .final_div_factor = 1e4, .base_momentum = 0.85, .max_momentum = 0.95

/* OneCycleLR: the lr rises from max_lr / div_factor to max_lr over pct_start of
 * total_steps, then anneals to initial_lr / final_div_factor (three_phase: falls back
 * to initial_lr by 2 * pct_start, then anneals), by cosine or linearly; with
 * momentum cycling (the default), the momentum moves the opposite way between
 * max_momentum and base_momentum: SGD's and RMSprop's momentum, Adam's and AdamW's
 * beta1 (tg_optim_get_group_momentum). Making it sets each group's lr to
 * initial_lr and its momentum to max_momentum, as PyTorch's constructor. It may be
 * stepped total_steps times (the last step extrapolates past the end, as PyTorch).
 * Returns NULL + error (naming tg_one_cycle_lr) for a missing max_lr, no total_steps
 * nor epochs and steps_per_epoch, pct_start outside [0, 1], a max_lrs count that is
 * not the number of groups, non-positive factors, and cycle_momentum on an SGD or
 * RMSprop group made without momentum. There PyTorch 1.13 silently switches momentum
 * on (sets it to max_momentum); tapegrad refuses, since a group's momentum buffer is
 * fixed when the group is made: give the optimizer a momentum, or set
 * .no_cycle_momentum. */
tg_lr_scheduler *tg_one_cycle_lr(tg_optim *opt, tg_one_cycle_opts opts);

/* scheduler.step(): advances one epoch and sets every scheduled group's lr (and, for
 * OneCycleLR, momentum). Fails (TG_ERROR, nothing changed) on a NULL scheduler and when
 * a OneCycleLR is stepped more than total_steps times (PyTorch's ValueError "Tried to
 * step X times. The specified number of total steps is Y"; PyTorch still advances
 * last_epoch, tapegrad does not). */
tg_status tg_scheduler_step(tg_lr_scheduler *s);
/* scheduler.get_last_lr()[0]; NAN for NULL. */
double tg_scheduler_get_last_lr(const tg_lr_scheduler *s);
/* scheduler.get_last_lr()[g]; NAN for a NULL scheduler or a group it does not schedule. */
double tg_scheduler_get_group_last_lr(const tg_lr_scheduler *s, int g);
/* scheduler.last_epoch. */
int tg_scheduler_last_epoch(const tg_lr_scheduler *s);
void tg_scheduler_free(tg_lr_scheduler *s);

#ifdef __cplusplus
}
#endif
#endif
