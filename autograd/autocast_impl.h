/* Autocast's hooks for the library (not public): tg_apply asks which inputs to
 * cast, forwards and backwards suspend it, composite ops of the float32 list cast
 * their inputs at entry. */
#ifndef TG_AUTOGRAD_AUTOCAST_IMPL_H
#define TG_AUTOGRAD_AUTOCAST_IMPL_H

#include "autograd/autocast.h"
#include "autograd/function.h"

/* True when autocast is on for some device kind and not suspended on this thread. */
bool tg_autocast_active(void);
/* Suspends autocast on this thread until the matching resume (nests). */
void tg_autocast_suspend(void);
void tg_autocast_resume(void);
/* The dtype an input t of an op of this policy is cast to under the current
 * autocast state, or -1 to leave it (not floating, float64, another device kind,
 * already right). */
int tg_autocast_target(tg_autocast_policy policy, const tg_tensor *t);
/* t cast to `to` for an op under autocast, owned by the current scope: through the
 * region's cast cache when t is a float32 leaf that requires grad (autograd/autocast.h). */
tg_tensor *tg_autocast_cast(tg_tensor *t, tg_dtype to);
/* For a composite op (a loss, addmm): when autocast is active, replaces each tensor
 * of ts (NULLs skipped) that `policy` casts by its cast, owned by the current scope.
 * Its inner ops then see the dtypes PyTorch's op would. */
tg_status tg_autocast_inputs(tg_autocast_policy policy, tg_tensor **ts, int n);

#endif
