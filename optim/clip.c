/* torch.nn.utils.clip_grad_norm_ and clip_grad_value_ (PyTorch 1.13,
 * torch/nn/utils/clip_grad.py). clip_grad_norm_:
 *     norms = [torch.norm(g, p) for g in grads]; total = torch.norm(torch.stack(norms), p)
 *     clip_coef = max_norm / (total + 1e-6); g.mul_(clamp(clip_coef, max=1))
 * The norms are accumulated in double and rounded to the gradients' dtype where
 * PyTorch's results are tensors of that dtype. */
#include <math.h>
#include <stdlib.h>

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "core/convert.h"
#include "core/scope.h"
#include "ops/elementwise_impl.h"
#include "optim/optim.h"

/* v rounded to a floating dtype (float64: unchanged). */
static double round_to(tg_dtype dtype, double v) {
    uint64_t bits = 0;
    tg_store_from_double(&bits, dtype, v);
    return tg_load_as_double(&bits, dtype);
}

/* The 2-norm of a contiguous float32 CPU gradient read in place, in double with 8 partial
 * sums: the cast to float64 and the copy below were 1.8 ms of lesson 10's step
 * (822 016 parameters, TG_PROFILE). */
static double float_2norm_in_place(const float *x, int64_t n) {
    double part[8] = {0, 0, 0, 0, 0, 0, 0, 0}, acc = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++) part[u] += (double)x[i + u] * (double)x[i + u];
    for (; i < n; i++) acc += (double)x[i] * (double)x[i];
    for (int u = 0; u < 8; u++) acc += part[u];
    return sqrt(acc);
}

/* p-norm of one gradient (host copy in double), rounded to its dtype. */
static tg_status grad_norm(tg_tensor *g, double p, double *out) {
    int64_t n = tg_numel(g);
    if (p == 2 && tg_device_of(g).kind == TG_DEVICE_CPU && tg_dtype_of(g) == TG_FLOAT32 && tg_is_contiguous(g)) {
        *out = round_to(TG_FLOAT32, float_2norm_in_place(tg_data_ptr(g), n));
        return TG_OK;
    }
    double *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    if (!h) return tg_error("tg_clip_grad_norm: out of memory");
    tg_status status = TG_ERROR;
    TG_SCOPE {
        tg_tensor *d = tg_cast(tg_detach(g), TG_FLOAT64);
        if (d) status = tg_copy_to_host(d, h, (size_t)n * sizeof *h);
    }
    if (status == TG_OK) {
        double acc = 0;
        if (isinf(p)) {
            for (int64_t i = 0; i < n; i++) acc = fabs(h[i]) > acc || isnan(h[i]) ? fabs(h[i]) : acc;
        } else if (p == 2) {
            for (int64_t i = 0; i < n; i++) acc += h[i] * h[i];
            acc = sqrt(acc);
        } else if (p == 1) {
            for (int64_t i = 0; i < n; i++) acc += fabs(h[i]);
        } else {
            for (int64_t i = 0; i < n; i++) acc += pow(fabs(h[i]), p);
            acc = pow(acc, 1.0 / p);
        }
        *out = round_to(tg_dtype_of(g), acc);
    }
    free(h);
    return status;
}

double tg_clip_grad_norm_params(tg_tensor *const *params, int count, double max_norm, double norm_type) {
    double p = norm_type == 0 ? 2.0 : norm_type;
    if (!(p > 0)) {
        tg_error("tg_clip_grad_norm: norm_type must be positive or INFINITY, got %g", norm_type);
        return NAN;
    }
    if (count > 0 && !params) {
        tg_error("tg_clip_grad_norm: parameter array is NULL");
        return NAN;
    }
    double *norms = malloc((size_t)(count ? count : 1) * sizeof *norms);
    if (!norms) {
        tg_error("tg_clip_grad_norm: out of memory");
        return NAN;
    }
    int k = 0;
    tg_dtype dtype = TG_FLOAT32;
    for (int i = 0; i < count; i++) {
        tg_tensor *g = params[i] ? tg_grad(params[i]) : NULL;
        if (!g) continue;
        if (k == 0) dtype = tg_dtype_of(g);
        if (grad_norm(g, p, &norms[k++])) {
            free(norms);
            return NAN;
        }
    }
    if (k == 0) {
        free(norms);
        return 0.0;
    }
    double total = 0;
    if (isinf(p)) {
        for (int i = 0; i < k; i++) total = norms[i] > total || isnan(norms[i]) ? norms[i] : total;
    } else {
        for (int i = 0; i < k; i++) total += pow(fabs(norms[i]), p);
        total = p == 2 ? sqrt(total) : pow(total, 1.0 / p);
    }
    free(norms);
    total = round_to(dtype, total);
    double coef;
    if (dtype == TG_FLOAT32) {
        float c = (float)max_norm / ((float)total + 1e-6f);
        coef = c < 1.0f || isnan(c) ? c : 1.0f; /* NaN poisons every gradient, as PyTorch's clamp */
    } else {
        double c = max_norm / (total + 1e-6);
        coef = c < 1.0 || isnan(c) ? c : 1.0;
    }
    tg_status status = TG_OK;
    bool prev = tg_set_grad_enabled(false);
    for (int i = 0; i < count && !status; i++) {
        tg_tensor *g = params[i] ? tg_grad(params[i]) : NULL;
        if (g) status = tg_mul_scalar_(g, coef);
    }
    tg_set_grad_enabled(prev);
    return status ? NAN : total;
}

double tg_clip_grad_norm(tg_module *model, double max_norm, double norm_type) {
    if (!model) {
        tg_error("tg_clip_grad_norm: model is NULL");
        return NAN;
    }
    int n = 0;
    tg_tensor *const *params = tg_parameters(model, &n);
    return tg_clip_grad_norm_params(params, n, max_norm, norm_type);
}

/* clip_grad_value_: g.clamp_(min=-clip_value, max=clip_value) for every gradient. */
tg_status tg_clip_grad_value_params(tg_tensor *const *params, int count, double clip_value) {
    if (isnan(clip_value)) return tg_error("tg_clip_grad_value: clip_value is NaN");
    if (count > 0 && !params) return tg_error("tg_clip_grad_value: parameter array is NULL");
    tg_status status = TG_OK;
    for (int i = 0; i < count && !status; i++) { /* the clamp kernel in place: nothing recorded or copied */
        tg_tensor *g = params[i] ? tg_grad(params[i]) : NULL;
        if (!g) continue;
        status = tg_unary_into("tg_clip_grad_value", TG_UNARY_CLAMP, g, g, -clip_value, clip_value);
        if (!status) tg_bump_version(g);
    }
    return status;
}

tg_status tg_clip_grad_value(tg_module *model, double clip_value) {
    if (!model) return tg_error("tg_clip_grad_value: model is NULL");
    int n = 0;
    tg_tensor *const *params = tg_parameters(model, &n);
    return tg_clip_grad_value_params(params, n, clip_value);
}
