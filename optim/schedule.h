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
 * Making a scheduler records the optimizer's lr as base lr and sets epoch 0 (and,
 * for LinearLR, the first factor), like PyTorch's constructor's initial step. A
 * scheduler borrows the optimizer: free it first, or at least never step it after
 * tg_optim_free. */
#ifndef TG_OPTIM_SCHEDULE_H
#define TG_OPTIM_SCHEDULE_H

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

/* scheduler.step(): advances one epoch and sets the optimizer's lr. */
void tg_scheduler_step(tg_lr_scheduler *s);
/* scheduler.get_last_lr()[0]. */
double tg_scheduler_get_last_lr(const tg_lr_scheduler *s);
/* scheduler.last_epoch. */
int tg_scheduler_last_epoch(const tg_lr_scheduler *s);
void tg_scheduler_free(tg_lr_scheduler *s);

#ifdef __cplusplus
}
#endif
#endif
