/* ops/random.c's entries for the rest of the library (not installed: tapegrad.h does
 * not include it). */
#ifndef TG_OPS_RANDOM_IMPL_H
#define TG_OPS_RANDOM_IMPL_H

#include "core/tensor.h"
#include "ops/random.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tg_set_rng_state's check without the setting, so that a checkpoint load refuses bad
 * bytes before it changes the model. */
tg_status tg_check_rng_state(tg_tensor *state);

#ifdef __cplusplus
}
#endif
#endif
