/* Loss scaling (torch.cuda.amp.GradScaler, PyTorch 1.13), for float16 training where
 * small gradients would underflow:
 *
 *     tg_grad_scaler *scaler = tg_grad_scaler_new(opt, (tg_grad_scaler_opts){0});
 *     for (...) TG_SCOPE {
 *         tg_tensor *loss = NULL;
 *         TG_AUTOCAST(TG_DEVICE_CUDA, TG_FLOAT16) { loss = tg_cross_entropy(tg_forward(model, x), y); }
 *         tg_backward(tg_grad_scaler_scale(scaler, loss));   // gradients of loss * scale
 *         tg_grad_scaler_step(scaler, opt, NULL);           // unscales; skips on Inf/NaN
 *         tg_grad_scaler_update(scaler);                    // backs off or grows the scale
 *         tg_optim_zero_grad(opt);
 *     }
 *     tg_grad_scaler_free(scaler);
 *
 * Semantics as PyTorch's: the scale starts at init_scale (2^16) and is a float32;
 * unscale_ multiplies every gradient of an optimizer by the float32 1/scale and
 * records whether any holds Inf/NaN; step unscales (unless unscale_ was called this
 * iteration) and runs the optimizer's step only when nothing was found; update
 * multiplies the scale by backoff_factor (0.5) after an iteration with Inf/NaN and
 * resets the growth tracker, else counts the iteration and after growth_interval
 * (2000) in a row multiplies it by growth_factor (2.0) (kept only if finite).
 * Calling unscale_ twice, or after step, or step twice in one iteration, is an error
 * naming the call, as PyTorch's RuntimeErrors. Several optimizers may be stepped in
 * one iteration; update combines what their unscales found.
 *
 * A scaler is made on an optimizer (`opt`, may be NULL): tg_save_checkpoint of that
 * optimizer saves the scaler's state (scale, growth tracker, factors, interval) and
 * tg_load_checkpoint restores it, as for LR schedulers, so a resumed run continues
 * with the same scale. A disabled scaler (opts.disabled) passes everything through:
 * scale returns the loss, step is tg_optim_step, get_scale is 1.
 * Differences from PyTorch 1.13: it works on the CPU too (torch.cuda.amp's needs
 * CUDA), and it needs no scale() call before step/update (PyTorch creates its scale
 * tensor lazily there). Two guards PyTorch lacks: the backoff stops at
 * TG_GRAD_SCALER_MIN_SCALE (PyTorch's scale reaches 0 after ~150 non-finite steps in
 * a row, and the next finite step's unscale by 1/0 turns every parameter into NaN),
 * and a step fails after opts.max_consecutive_nonfinite such iterations in a row (a
 * run that can no longer make progress), naming the first non-finite gradient. */
#ifndef TG_OPTIM_GRAD_SCALER_H
#define TG_OPTIM_GRAD_SCALER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "optim/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_grad_scaler tg_grad_scaler;

/* The floor of the backoff: the smallest positive normal float32 (FLT_MIN, 2^-126),
 * so that 1/scale (2^126) stays finite; 2^16 halves to it in 142 steps. */
#define TG_GRAD_SCALER_MIN_SCALE 1.17549435082228750797e-38

/* The default of max_consecutive_nonfinite: far past the 142 halvings that take the
 * default scale to the floor, so only a run that cannot recover stops. */
#define TG_GRAD_SCALER_DEFAULT_MAX_NONFINITE 1000

/* Zero fields are PyTorch's defaults: init_scale 65536, growth_factor 2.0,
 * backoff_factor 0.5, growth_interval 2000; enabled unless `disabled`.
 * max_consecutive_nonfinite (not in PyTorch): the step of the N-th iteration in a row
 * whose gradients hold Inf/NaN fails with an error naming the first such gradient
 * (parameter index and shape) and N; 0 means TG_GRAD_SCALER_DEFAULT_MAX_NONFINITE,
 * a negative value never fails (PyTorch's behaviour). */
typedef struct {
    double init_scale, growth_factor, backoff_factor;
    int growth_interval;
    bool disabled;
    int max_consecutive_nonfinite;
} tg_grad_scaler_opts;

/* A NEW scaler (tg_grad_scaler_free), or NULL + error for growth_factor <= 1,
 * backoff_factor outside (0, 1), growth_interval < 0 or a scale that is not positive
 * and finite (PyTorch asserts the factors). */
tg_grad_scaler *tg_grad_scaler_new(tg_optim *opt, tg_grad_scaler_opts opts);
/* Detaches it from its optimizer. NULL-safe. */
void tg_grad_scaler_free(tg_grad_scaler *s);

/* scaler.scale(outputs): outputs * scale (a new reference, recorded; the dtype of
 * outputs, as PyTorch's multiply by a 0-dim float32 gives). */
tg_tensor *tg_grad_scaler_scale(tg_grad_scaler *s, tg_tensor *outputs);
/* scaler.unscale_(optimizer): divides opt's gradients by the scale in place (for
 * clipping before step). Refuses float16 gradients ("Attempting to unscale FP16
 * gradients"): keep float32 master parameters. */
tg_status tg_grad_scaler_unscale_(tg_grad_scaler *s, tg_optim *opt);
/* scaler.step(optimizer): *skipped (may be NULL) tells whether the step was skipped
 * because a gradient held Inf or NaN. Fails (the step skipped, *skipped set) when this
 * is the max_consecutive_nonfinite-th iteration in a row with Inf/NaN; the count goes
 * on with each such update, so every later step fails too until a finite one. */
tg_status tg_grad_scaler_step(tg_grad_scaler *s, tg_optim *opt, bool *skipped);
/* scaler.update(): fails when no optimizer was stepped or unscaled since the last
 * update ("No inf checks were recorded prior to update"). The backoff stops at
 * TG_GRAD_SCALER_MIN_SCALE. */
tg_status tg_grad_scaler_update(tg_grad_scaler *s);
/* scaler.update(new_scale): sets the scale (a positive finite value) and ends the
 * iteration. */
tg_status tg_grad_scaler_update_to(tg_grad_scaler *s, double new_scale);

/* scaler.get_scale() (1.0 when disabled), the growth tracker (iterations without
 * Inf/NaN since the last growth or backoff), is_enabled(). */
double tg_grad_scaler_get_scale(const tg_grad_scaler *s);
int64_t tg_grad_scaler_growth_tracker(const tg_grad_scaler *s);
/* Iterations in a row whose update found Inf/NaN (0 after a finite one). */
int64_t tg_grad_scaler_nonfinite_steps(const tg_grad_scaler *s);
bool tg_grad_scaler_is_enabled(const tg_grad_scaler *s);
/* The options in effect (defaults filled in). */
tg_grad_scaler_opts tg_grad_scaler_get_opts(const tg_grad_scaler *s);
/* scaler.load_state_dict: scale, growth tracker and the factors (what checkpoints
 * restore; the count of non-finite iterations in a row is set to 0). Same checks as
 * tg_grad_scaler_new. */
tg_status tg_grad_scaler_set_state(tg_grad_scaler *s, double scale, int64_t growth_tracker, tg_grad_scaler_opts opts);

#ifdef __cplusplus
}
#endif
#endif
