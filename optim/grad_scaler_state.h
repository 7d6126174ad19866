/* Internal (not in tapegrad.h): the link between an optimizer and the GradScaler made
 * on it, for io/checkpoint.c (as optim/schedule_state.h for schedulers). */
#ifndef TG_OPTIM_GRAD_SCALER_STATE_H
#define TG_OPTIM_GRAD_SCALER_STATE_H

#include "optim/grad_scaler.h"

/* optim.c: at most one scaler per optimizer; attaching a second is an error. */
tg_status tg_optim_attach_scaler_(tg_optim *opt, tg_grad_scaler *s);
void tg_optim_detach_scaler_(tg_optim *opt, tg_grad_scaler *s);
tg_grad_scaler *tg_optim_scaler_(const tg_optim *opt);
/* grad_scaler.c: tg_optim_free tells the scaler its optimizer is gone. */
void tg_grad_scaler_optim_freed_(tg_grad_scaler *s);
/* io/checkpoint.c: restores the count of non-finite iterations in a row (after
 * tg_grad_scaler_set_state, which resets it). */
void tg_grad_scaler_set_nonfinite_steps_(tg_grad_scaler *s, int64_t n);

#endif
