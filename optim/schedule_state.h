/* Internal (not in tapegrad.h): the link between an optimizer and the schedulers made
 * on it, and a scheduler's state for io/checkpoint.c. A checkpoint of an optimizer
 * holds the state of every scheduler attached to it, in the order they were made. */
#ifndef TG_OPTIM_SCHEDULE_STATE_H
#define TG_OPTIM_SCHEDULE_STATE_H

#include <stddef.h>

#include "optim/optim.h"
#include "optim/schedule.h"

/* optim.c: schedulers made on opt, until freed (tg_scheduler_free detaches). */
void tg_optim_attach_scheduler_(tg_optim *opt, tg_lr_scheduler *s);
void tg_optim_detach_scheduler_(tg_optim *opt, tg_lr_scheduler *s);
int tg_optim_num_schedulers_(const tg_optim *opt);
tg_lr_scheduler *tg_optim_scheduler_(const tg_optim *opt, int i);

/* schedule.c: tg_optim_free tells each attached scheduler that its optimizer is gone
 * (stepping it is then an error instead of a use after free). */
void tg_scheduler_optim_freed_(tg_lr_scheduler *s);

/* What changes as a scheduler steps (PyTorch's scheduler.state_dict() minus the
 * settings): the arrays have num_groups entries, owned by the scheduler. */
typedef struct {
    const char *name; /* "StepLR", ... "OneCycleLR" */
    int last_epoch, step_count, num_groups;
    const double *base_lrs, *last_lrs;
} tg_scheduler_state_;
tg_scheduler_state_ tg_scheduler_get_state_(const tg_lr_scheduler *s);
/* Its settings as text ("step_size=30 gamma=0.10000000000000001"), to check that a
 * resumed run made the same scheduler. */
void tg_scheduler_settings_(const tg_lr_scheduler *s, char *buf, size_t size);
/* Restores a state whose name and num_groups match (checked by the caller). */
void tg_scheduler_set_state_(tg_lr_scheduler *s, int last_epoch, int step_count, const double *base_lrs,
                             const double *last_lrs);

#endif
