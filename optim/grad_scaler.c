/* torch.cuda.amp.GradScaler (PyTorch 1.13, torch/cuda/amp/grad_scaler.py and the
 * _amp_update_scale_ / _amp_foreach_non_finite_check_and_unscale_ kernels). */
#include "optim/grad_scaler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "optim/cuda/optim.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "optim/kernels.h"
#include "optim/grad_scaler_state.h"

/* Where an optimizer is in the current iteration (PyTorch's OptState). */
typedef enum { STAGE_READY = 0, STAGE_UNSCALED, STAGE_STEPPED } stage;

typedef struct {
    const tg_optim *opt; /* identity only */
    stage stage;
    bool found_inf;
} per_optim;

struct tg_grad_scaler {
    tg_optim *home; /* the optimizer whose checkpoints hold this scaler; NULL once freed */
    tg_grad_scaler_opts opts;
    float scale;
    int64_t growth_tracker;
    int64_t nonfinite_steps; /* updates in a row that found Inf/NaN */
    per_optim *iter;         /* optimizers seen since the last update */
    int num_iter;
};

static tg_status check_opts(const char *op, double scale, tg_grad_scaler_opts o) {
    if (!(o.growth_factor > 1.0)) return tg_error("%s: the growth factor must be > 1.0, got %g", op, o.growth_factor);
    if (!(o.backoff_factor > 0 && o.backoff_factor < 1.0))
        return tg_error("%s: the backoff factor must be < 1.0 (and > 0), got %g", op, o.backoff_factor);
    if (o.growth_interval <= 0) return tg_error("%s: growth_interval must be positive, got %d", op, o.growth_interval);
    if (!((float)scale > 0 && isfinite((float)scale))) /* as a float32: 1e-50 would be 0 */
        return tg_error("%s: the scale must be positive and finite as a float32, got %g", op, scale);
    return TG_OK;
}

static tg_grad_scaler_opts with_defaults(tg_grad_scaler_opts o) {
    if (o.init_scale == 0) o.init_scale = 65536.0;
    if (o.growth_factor == 0) o.growth_factor = 2.0;
    if (o.backoff_factor == 0) o.backoff_factor = 0.5;
    if (o.growth_interval == 0) o.growth_interval = 2000;
    if (o.max_consecutive_nonfinite == 0) o.max_consecutive_nonfinite = TG_GRAD_SCALER_DEFAULT_MAX_NONFINITE;
    return o;
}

tg_grad_scaler *tg_grad_scaler_new(tg_optim *opt, tg_grad_scaler_opts opts) {
    opts = with_defaults(opts);
    if (check_opts("tg_grad_scaler_new", opts.init_scale, opts)) return NULL;
    tg_grad_scaler *s = calloc(1, sizeof *s);
    if (!s) return tg_error("tg_grad_scaler_new: out of memory"), NULL;
    s->opts = opts;
    s->scale = (float)opts.init_scale;
    if (opt && tg_optim_attach_scaler_(opt, s)) {
        free(s);
        return NULL;
    }
    s->home = opt;
    return s;
}

void tg_grad_scaler_free(tg_grad_scaler *s) {
    if (!s) return;
    if (s->home) tg_optim_detach_scaler_(s->home, s);
    free(s->iter);
    free(s);
}

void tg_grad_scaler_optim_freed_(tg_grad_scaler *s) { s->home = NULL; }

bool tg_grad_scaler_is_enabled(const tg_grad_scaler *s) { return s && !s->opts.disabled; }
double tg_grad_scaler_get_scale(const tg_grad_scaler *s) {
    return !s ? NAN : s->opts.disabled ? 1.0 : (double)s->scale;
}
int64_t tg_grad_scaler_growth_tracker(const tg_grad_scaler *s) { return s ? s->growth_tracker : 0; }
int64_t tg_grad_scaler_nonfinite_steps(const tg_grad_scaler *s) { return s ? s->nonfinite_steps : 0; }
void tg_grad_scaler_set_nonfinite_steps_(tg_grad_scaler *s, int64_t n) { s->nonfinite_steps = n > 0 ? n : 0; }
tg_grad_scaler_opts tg_grad_scaler_get_opts(const tg_grad_scaler *s) { return s ? s->opts : (tg_grad_scaler_opts){0}; }

tg_status tg_grad_scaler_set_state(tg_grad_scaler *s, double scale, int64_t growth_tracker, tg_grad_scaler_opts opts) {
    if (!s) return tg_error("tg_grad_scaler_set_state: scaler is NULL");
    opts = with_defaults(opts);
    if (check_opts("tg_grad_scaler_set_state", scale, opts)) return TG_ERROR;
    if (growth_tracker < 0)
        return tg_error("tg_grad_scaler_set_state: negative growth tracker %lld", (long long)growth_tracker);
    s->opts = opts;
    s->scale = (float)scale;
    s->growth_tracker = growth_tracker;
    s->nonfinite_steps = 0;
    return TG_OK;
}

tg_tensor *tg_grad_scaler_scale(tg_grad_scaler *s, tg_tensor *outputs) {
    if (!s) return tg_error("tg_grad_scaler_scale: scaler is NULL"), NULL;
    if (tg_unusable_(outputs)) return tg_error_unusable_input("tg_grad_scaler_scale", outputs, 0), NULL;
    if (s->opts.disabled) return tg_scope_track(tg_retain(outputs));
    tg_tensor *out = NULL;
    TG_SCOPE { /* outputs * a 0-dim float32 scale: outputs' dtype, as PyTorch's promotion */
        tg_tensor *scale = tg_full(TG_SCALAR_SHAPE, s->scale, (tg_opts){.device = tg_device_of(outputs)});
        out = tg_scope_return(tg_mul(outputs, scale));
    }
    return out;
}

static per_optim *iteration_state(tg_grad_scaler *s, const tg_optim *opt) {
    for (int i = 0; i < s->num_iter; i++)
        if (s->iter[i].opt == opt) return &s->iter[i];
    per_optim *grown = realloc(s->iter, (size_t)(s->num_iter + 1) * sizeof *grown);
    if (!grown) return tg_error("tg_grad_scaler: out of memory"), NULL;
    s->iter = grown;
    s->iter[s->num_iter] = (per_optim){opt, STAGE_READY, false};
    return &s->iter[s->num_iter++];
}

/* The generic unscale of one gradient (bfloat16, non-contiguous): two passes. */
static tg_status unscale_by_ops(tg_tensor *g, float inv_scale, bool *found) {
    *found |= !tg_all_finite(g);
    return tg_mul_scalar_(g, inv_scale);
}

/* One gradient by the fused kernel (optim/unscale_formula.h): on the CPU into `found`,
 * on CUDA into a device flag per device, in `flags` (read once, after the last). */
#define MAX_FLAG_DEVICES 16
static tg_status unscale_one(tg_tensor *g, float inv_scale, bool *found, tg_tensor **flags) {
    tg_dtype dt = tg_dtype_of(g);
    tg_device dev = tg_device_of(g);
    bool fused = (dt == TG_FLOAT32 || dt == TG_FLOAT64) && tg_is_contiguous(g) &&
                 (dev.kind == TG_DEVICE_CPU || (dev.kind == TG_DEVICE_CUDA && dev.index < MAX_FLAG_DEVICES));
    if (!fused) return unscale_by_ops(g, inv_scale, found);
    if (dev.kind == TG_DEVICE_CPU) {
        *found |= dt == TG_FLOAT32 ? tg_unscale_kernel_f32(tg_data_ptr(g), tg_numel(g), inv_scale)
                                   : tg_unscale_kernel_f64(tg_data_ptr(g), tg_numel(g), inv_scale);
    } else {
        tg_tensor **flag = &flags[dev.index];
        if (!*flag && !(*flag = tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = TG_INT32, .device = dev})))
            return TG_ERROR;
        if (TG_CUDA_CALL("tg_grad_scaler_unscale_", tg_cuda_unscale_check, g, inv_scale, tg_data_ptr(*flag)))
            return TG_ERROR;
    }
    tg_bump_version(g);
    return TG_OK;
}

/* _unscale_grads_ with _amp_foreach_non_finite_check_and_unscale_: every gradient is
 * multiplied by inv_scale (even after an Inf was found); found is set on any Inf/NaN.
 * One pass over each gradient, and one wait for the GPU per device, not per gradient. */
static tg_status unscale(const char *op, tg_grad_scaler *s, tg_optim *opt, per_optim *st) {
    float inv_scale = (float)(1.0 / (double)s->scale); /* _scale.double().reciprocal().float() */
    int n = tg_optim_num_params(opt);
    for (int i = 0; i < n; i++) {
        tg_tensor *g = tg_grad(tg_optim_param(opt, i));
        if (g && tg_dtype_of(g) == TG_FLOAT16)
            return tg_error("%s: Attempting to unscale FP16 gradients (parameter %d is float16; keep float32 "
                            "master parameters)",
                            op, i);
    }
    bool found = false, was = tg_set_grad_enabled(false);
    tg_status status = TG_OK;
    tg_tensor *flags[MAX_FLAG_DEVICES] = {0};
    TG_SCOPE {
        for (int i = 0; i < n && !status; i++) {
            tg_tensor *g = tg_grad(tg_optim_param(opt, i));
            if (g) status = unscale_one(g, inv_scale, &found, flags);
        }
        for (int d = 0; d < MAX_FLAG_DEVICES && !status; d++) {
            int32_t flag = 0;
            if (flags[d] && !(status = tg_copy_to_host(flags[d], &flag, sizeof flag))) found |= flag != 0;
        }
    }
    tg_set_grad_enabled(was);
    if (status) return status;
    st->found_inf = found;
    st->stage = STAGE_UNSCALED;
    return TG_OK;
}

tg_status tg_grad_scaler_unscale_(tg_grad_scaler *s, tg_optim *opt) {
    const char *op = "tg_grad_scaler_unscale_";
    if (!s || !opt) return tg_error("%s: %s is NULL", op, s ? "optimizer" : "scaler");
    if (s->opts.disabled) return TG_OK;
    per_optim *st = iteration_state(s, opt);
    if (!st) return TG_ERROR;
    if (st->stage == STAGE_UNSCALED)
        return tg_error("%s: unscale_() has already been called on this optimizer since the last update()", op);
    if (st->stage == STAGE_STEPPED) return tg_error("%s: unscale_() is being called after step()", op);
    return unscale(op, s, opt, st);
}

/* The error of the max_consecutive_nonfinite-th non-finite iteration in a row: names
 * the first gradient holding Inf/NaN (found again: only this path pays for it). */
static tg_status too_many_nonfinite(const char *op, const tg_grad_scaler *s, tg_optim *opt) {
    int n = tg_optim_num_params(opt), first = -1;
    for (int i = 0; i < n && first < 0; i++) {
        tg_tensor *g = tg_grad(tg_optim_param(opt, i));
        if (g && !tg_all_finite(g)) first = i;
    }
    char where[192] = "a gradient";
    if (first >= 0) {
        char sh[128];
        tg_tensor *p = tg_optim_param(opt, first);
        snprintf(where, sizeof where, "the gradient of parameter %d (%s %s)", first, tg_dtype_name(tg_dtype_of(p)),
                 tg_shape_str(tg_shape_of(p), sh, sizeof sh));
    }
    return tg_error("%s: %lld iterations in a row with Inf or NaN gradients (max_consecutive_nonfinite %d, scale "
                    "%g); now %s of %s holds Inf or NaN; the step is skipped",
                    op, (long long)s->nonfinite_steps + 1, s->opts.max_consecutive_nonfinite, (double)s->scale, where,
                    tg_optim_name(opt));
}

tg_status tg_grad_scaler_step(tg_grad_scaler *s, tg_optim *opt, bool *skipped) {
    const char *op = "tg_grad_scaler_step";
    if (skipped) *skipped = false;
    if (!s || !opt) return tg_error("%s: %s is NULL", op, s ? "optimizer" : "scaler");
    if (s->opts.disabled) return tg_optim_step(opt);
    per_optim *st = iteration_state(s, opt);
    if (!st) return TG_ERROR;
    if (st->stage == STAGE_STEPPED) return tg_error("%s: step() has already been called since the last update()", op);
    if (st->stage == STAGE_READY && unscale(op, s, opt, st)) return TG_ERROR;
    tg_status status = st->found_inf ? TG_OK : tg_optim_step(opt);
    if (skipped) *skipped = st->found_inf;
    st->stage = STAGE_STEPPED;
    int max = s->opts.max_consecutive_nonfinite;
    if (st->found_inf && max > 0 && s->nonfinite_steps + 1 >= max) status = too_many_nonfinite(op, s, opt);
    return status;
}

static void end_iteration(tg_grad_scaler *s) {
    free(s->iter);
    s->iter = NULL;
    s->num_iter = 0;
}

tg_status tg_grad_scaler_update(tg_grad_scaler *s) {
    if (!s) return tg_error("tg_grad_scaler_update: scaler is NULL");
    if (s->opts.disabled) return TG_OK;
    bool checked = false, found = false;
    for (int i = 0; i < s->num_iter; i++) {
        checked |= s->iter[i].stage != STAGE_READY;
        found |= s->iter[i].found_inf;
    }
    if (!checked)
        return tg_error("tg_grad_scaler_update: No inf checks were recorded prior to update (call "
                        "tg_grad_scaler_step or tg_grad_scaler_unscale_ first)");
    /* _amp_update_scale_ */
    if (found) { /* the floor: a scale of 0 would make the next unscale multiply by Inf */
        s->scale = fmaxf((float)((double)s->scale * s->opts.backoff_factor), (float)TG_GRAD_SCALER_MIN_SCALE);
        s->growth_tracker = 0;
    } else if (s->growth_tracker + 1 == s->opts.growth_interval) {
        float grown = (float)((double)s->scale * s->opts.growth_factor);
        if (isfinite(grown)) s->scale = grown;
        s->growth_tracker = 0;
    } else {
        s->growth_tracker++;
    }
    s->nonfinite_steps = found ? s->nonfinite_steps + 1 : 0;
    end_iteration(s);
    return TG_OK;
}

tg_status tg_grad_scaler_update_to(tg_grad_scaler *s, double new_scale) {
    if (!s) return tg_error("tg_grad_scaler_update_to: scaler is NULL");
    if (s->opts.disabled) return TG_OK;
    if (!((float)new_scale > 0 && isfinite((float)new_scale)))
        return tg_error("tg_grad_scaler_update_to: the scale must be positive and finite as a float32, got %g",
                        new_scale);
    bool checked = false, found = false; /* an iteration without a step leaves the count */
    for (int i = 0; i < s->num_iter; i++) {
        checked |= s->iter[i].stage != STAGE_READY;
        found |= s->iter[i].found_inf;
    }
    if (checked) s->nonfinite_steps = found ? s->nonfinite_steps + 1 : 0;
    s->scale = (float)new_scale;
    end_iteration(s);
    return TG_OK;
}
