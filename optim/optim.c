/* SGD, Adam, AdamW, RMSprop: construction, per-parameter state, and the step that
 * checks each parameter and hands it to one fused update (optim/kernels.c on the
 * CPU, ops/cuda/optim.h on CUDA). See optim/optim.h. */
#include "optim/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "core/scope.h"
#include "ops/elementwise.h"
#include "ops/cuda/optim.h"
#include "ops/dispatch.h"
#include "ops/shape.h"
#include "optim/kernels.h"

typedef enum { KIND_SGD, KIND_ADAM, KIND_ADAMW, KIND_RMSPROP } optim_kind;

#define MAX_KEYS 4

typedef struct {
    bool initialised; /* the tensors exist */
    bool written;     /* a step or tg_optim_state_set has filled them (SGD's first step copies d_p) */
    tg_tensor *t[MAX_KEYS]; /* owned; indexed like tg_optim.keys */
} param_state;

struct tg_optim {
    optim_kind kind;
    const char *name;
    double lr, momentum, dampening, weight_decay, beta1, beta2, eps, alpha;
    bool nesterov, amsgrad, centered, maximize;
    int count;
    tg_tensor **params; /* owned references */
    param_state *state;
    int num_keys;
    const char *keys[MAX_KEYS]; /* the state_dict keys this configuration has, in PyTorch's order */
    int step_key;               /* index of "step" in keys, or -1 (SGD) */
    char name_buf[96];          /* tg_optim_state_get's names */
};

/* Option fields whose zero means "default"; TG_ZERO (-0.0) means a real zero. */
static double or_default(double v, double dflt) {
    if (v == 0) return signbit(v) ? 0.0 : dflt;
    return v;
}

static int key_index(const tg_optim *opt, const char *key) {
    for (int j = 0; j < opt->num_keys; j++)
        if (!strcmp(opt->keys[j], key)) return j;
    return -1;
}

static tg_optim *make(optim_kind kind, const char *name, tg_tensor *const *params, int count) {
    if (count < 0 || (count > 0 && !params)) {
        tg_error("%s: invalid parameter list (count %d)", name, count);
        return NULL;
    }
    for (int i = 0; i < count; i++) {
        if (!params[i]) {
            if (!tg_has_error()) tg_error("%s: parameter %d is NULL", name, i);
            return NULL;
        }
        if (!tg_dtype_is_floating(tg_dtype_of(params[i])) || !tg_is_leaf(params[i]) ||
            !tg_get_requires_grad(params[i])) {
            tg_error("%s: parameter %d must be a floating leaf tensor that requires grad (got %s%s%s)", name, i,
                     tg_dtype_name(tg_dtype_of(params[i])), tg_is_leaf(params[i]) ? "" : ", not a leaf",
                     tg_get_requires_grad(params[i]) ? "" : ", requires_grad false");
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (params[j] == params[i]) {
                tg_error("%s: parameter %d appears twice (also at %d)", name, i, j);
                return NULL;
            }
    }
    tg_optim *opt = calloc(1, sizeof *opt);
    TG_ASSERT(opt != NULL);
    opt->kind = kind;
    opt->name = name;
    opt->count = count;
    opt->params = calloc((size_t)(count ? count : 1), sizeof *opt->params);
    opt->state = calloc((size_t)(count ? count : 1), sizeof *opt->state);
    TG_ASSERT(opt->params && opt->state);
    for (int i = 0; i < count; i++) opt->params[i] = tg_retain(params[i]);
    opt->step_key = -1;
    return opt;
}

static void add_key(tg_optim *opt, const char *key) { opt->keys[opt->num_keys++] = key; }

static tg_tensor *const *model_params(tg_module *model, const char *name, int *count) {
    *count = 0;
    if (!model) {
        tg_error("%s: model is NULL", name);
        return NULL;
    }
    return tg_parameters(model, count);
}

tg_optim *tg_sgd_params(tg_tensor *const *params, int count, tg_sgd_opts o) {
    if (!(o.lr > 0 || (o.lr == 0 && signbit(o.lr)))) {
        tg_error("SGD: lr must be given and positive (PyTorch has no default), got %g", o.lr);
        return NULL;
    }
    if (o.momentum < 0 || o.weight_decay < 0) {
        tg_error("SGD: momentum (%g) and weight_decay (%g) must be non-negative", o.momentum, o.weight_decay);
        return NULL;
    }
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
        tg_error("SGD: Nesterov momentum requires a momentum and zero dampening (momentum=%g, dampening=%g)",
                 o.momentum, o.dampening);
        return NULL;
    }
    tg_optim *opt = make(KIND_SGD, "SGD", params, count);
    if (!opt) return NULL;
    opt->lr = fabs(o.lr);
    opt->momentum = o.momentum;
    opt->dampening = o.dampening;
    opt->weight_decay = o.weight_decay;
    opt->nesterov = o.nesterov;
    opt->maximize = o.maximize;
    if (o.momentum != 0) add_key(opt, "momentum_buffer");
    return opt;
}

tg_optim *tg_sgd(tg_module *model, tg_sgd_opts opts) {
    int n;
    tg_tensor *const *p = model_params(model, "SGD", &n);
    return model ? tg_sgd_params(p, n, opts) : NULL;
}

static tg_optim *make_adam(optim_kind kind, const char *name, tg_tensor *const *params, int count, tg_adam_opts o) {
    double lr = or_default(o.lr, 1e-3), b1 = or_default(o.betas[0], 0.9), b2 = or_default(o.betas[1], 0.999);
    double eps = or_default(o.eps, 1e-8), wd = or_default(o.weight_decay, kind == KIND_ADAMW ? 1e-2 : 0.0);
    if (lr < 0 || eps < 0 || wd < 0 || !(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1)) {
        tg_error("%s: invalid options lr=%g, betas=(%g, %g), eps=%g, weight_decay=%g (betas must be in [0, 1), "
                 "the rest non-negative)", name, lr, b1, b2, eps, wd);
        return NULL;
    }
    tg_optim *opt = make(kind, name, params, count);
    if (!opt) return NULL;
    opt->lr = lr;
    opt->beta1 = b1;
    opt->beta2 = b2;
    opt->eps = eps;
    opt->weight_decay = wd;
    opt->amsgrad = o.amsgrad;
    opt->maximize = o.maximize;
    opt->step_key = 0;
    add_key(opt, "step");
    add_key(opt, "exp_avg");
    add_key(opt, "exp_avg_sq");
    if (o.amsgrad) add_key(opt, "max_exp_avg_sq");
    return opt;
}

tg_optim *tg_adam_params(tg_tensor *const *params, int count, tg_adam_opts opts) {
    return make_adam(KIND_ADAM, "Adam", params, count, opts);
}
tg_optim *tg_adam(tg_module *model, tg_adam_opts opts) {
    int n;
    tg_tensor *const *p = model_params(model, "Adam", &n);
    return model ? tg_adam_params(p, n, opts) : NULL;
}
tg_optim *tg_adamw_params(tg_tensor *const *params, int count, tg_adamw_opts opts) {
    return make_adam(KIND_ADAMW, "AdamW", params, count, opts);
}
tg_optim *tg_adamw(tg_module *model, tg_adamw_opts opts) {
    int n;
    tg_tensor *const *p = model_params(model, "AdamW", &n);
    return model ? tg_adamw_params(p, n, opts) : NULL;
}

tg_optim *tg_rmsprop_params(tg_tensor *const *params, int count, tg_rmsprop_opts o) {
    double lr = or_default(o.lr, 1e-2), alpha = or_default(o.alpha, 0.99), eps = or_default(o.eps, 1e-8);
    if (lr < 0 || alpha < 0 || eps < 0 || o.weight_decay < 0 || o.momentum < 0) {
        tg_error("RMSprop: invalid options lr=%g, alpha=%g, eps=%g, weight_decay=%g, momentum=%g (all must be "
                 "non-negative)", lr, alpha, eps, o.weight_decay, o.momentum);
        return NULL;
    }
    tg_optim *opt = make(KIND_RMSPROP, "RMSprop", params, count);
    if (!opt) return NULL;
    opt->lr = lr;
    opt->alpha = alpha;
    opt->eps = eps;
    opt->weight_decay = o.weight_decay;
    opt->momentum = o.momentum;
    opt->centered = o.centered;
    opt->maximize = o.maximize;
    opt->step_key = 0;
    add_key(opt, "step");
    add_key(opt, "square_avg");
    if (o.momentum > 0) add_key(opt, "momentum_buffer");
    if (o.centered) add_key(opt, "grad_avg");
    return opt;
}
tg_optim *tg_rmsprop(tg_module *model, tg_rmsprop_opts opts) {
    int n;
    tg_tensor *const *p = model_params(model, "RMSprop", &n);
    return model ? tg_rmsprop_params(p, n, opts) : NULL;
}

/* ---- state ---- */

/* PyTorch's lazy state init: zeros like the parameter and step 0. SGD's momentum
 * buffer is left uninitialised: its first step copies d_p into it (torch.clone). */
static tg_status init_state(tg_optim *opt, int i) {
    param_state *s = &opt->state[i];
    if (s->initialised) return TG_OK;
    tg_tensor *p = opt->params[i];
    tg_status status = TG_OK;
    TG_SCOPE {
        for (int j = 0; j < opt->num_keys && !status; j++) {
            tg_tensor *t;
            if (j == opt->step_key)
                t = tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = TG_FLOAT32});
            else if (opt->kind == KIND_SGD)
                t = tg_empty(tg_shape_of(p), (tg_opts){.dtype = tg_dtype_of(p), .device = tg_device_of(p)});
            else
                t = tg_zeros(tg_shape_of(p), (tg_opts){.dtype = tg_dtype_of(p), .device = tg_device_of(p)});
            if (!t) status = TG_ERROR;
            else s->t[j] = tg_retain(t);
        }
    }
    if (status) {
        for (int j = 0; j < MAX_KEYS; j++) {
            tg_release(s->t[j]);
            s->t[j] = NULL;
        }
        return status;
    }
    s->initialised = true;
    return TG_OK;
}

int tg_optim_state_count(tg_optim *opt) {
    if (!opt) return 0;
    int n = 0;
    for (int i = 0; i < opt->count; i++)
        if (opt->state[i].initialised) n += opt->num_keys;
    return n;
}

tg_status tg_optim_state_get(tg_optim *opt, int index, const char **name, tg_tensor **tensor) {
    if (!opt) return tg_error("tg_optim_state_get: optimizer is NULL");
    int k = index;
    for (int i = 0; i < opt->count && k >= 0; i++) {
        if (!opt->state[i].initialised) continue;
        if (k < opt->num_keys) {
            snprintf(opt->name_buf, sizeof opt->name_buf, "state.%d.%s", i, opt->keys[k]);
            if (name) *name = opt->name_buf;
            if (tensor) *tensor = opt->state[i].t[k];
            return TG_OK;
        }
        k -= opt->num_keys;
    }
    return tg_error("tg_optim_state_get (%s): entry %d out of range (%d entries)", opt->name, index,
                    tg_optim_state_count(opt));
}

tg_status tg_optim_state_set(tg_optim *opt, const char *name, tg_tensor *value) {
    if (!opt) return tg_error("tg_optim_state_set: optimizer is NULL");
    if (!value) return tg_error_null_input("tg_optim_state_set", 0);
    int i = -1, consumed = 0;
    if (!name || sscanf(name, "state.%d.%n", &i, &consumed) != 1 || consumed == 0)
        return tg_error("tg_optim_state_set (%s): name \"%s\" is not \"state.<index>.<key>\"", opt->name,
                        name ? name : "(NULL)");
    const char *key = name + consumed;
    if (i < 0 || i >= opt->count)
        return tg_error("tg_optim_state_set (%s): \"%s\": parameter index %d out of range (%d parameters)",
                        opt->name, name, i, opt->count);
    int j = key_index(opt, key);
    if (j < 0)
        return tg_error("tg_optim_state_set (%s): \"%s\": this optimizer's configuration has no state \"%s\"",
                        opt->name, name, key);
    if (init_state(opt, i)) return TG_ERROR;
    tg_tensor *dst = opt->state[i].t[j];
    if (tg_numel(value) != tg_numel(dst)) {
        char a[96], b[96];
        return tg_error("tg_optim_state_set (%s): \"%s\" has shape %s, expected %s", opt->name, name,
                        tg_shape_str(tg_shape_of(value), a, sizeof a), tg_shape_str(tg_shape_of(dst), b, sizeof b));
    }
    tg_status status;
    bool prev = tg_set_grad_enabled(false);
    TG_SCOPE { status = tg_copy_(dst, tg_reshape(tg_detach(value), tg_shape_of(dst))); }
    tg_set_grad_enabled(prev);
    if (!status && opt->kind == KIND_SGD) opt->state[i].written = true;
    return status;
}

/* ---- step ---- */

static tg_status check_grad(tg_optim *opt, int i, tg_tensor *p, tg_tensor *g) {
    char a[96], b[96], da[16], db[16];
    if (!tg_shape_equal(tg_shape_of(p), tg_shape_of(g)) || tg_dtype_of(p) != tg_dtype_of(g) ||
        !tg_device_equal(tg_device_of(p), tg_device_of(g)))
        return tg_error("%s.step: parameter %d is %s %s on %s but its gradient is %s %s on %s", opt->name, i,
                        tg_dtype_name(tg_dtype_of(p)), tg_shape_str(tg_shape_of(p), a, sizeof a),
                        tg_device_str(tg_device_of(p), da), tg_dtype_name(tg_dtype_of(g)),
                        tg_shape_str(tg_shape_of(g), b, sizeof b), tg_device_str(tg_device_of(g), db));
    if (!tg_is_contiguous(p))
        return tg_error("%s.step: parameter %d (%s) is not contiguous", opt->name, i,
                        tg_shape_str(tg_shape_of(p), a, sizeof a));
    if (tg_dtype_of(p) != TG_FLOAT32 && tg_dtype_of(p) != TG_FLOAT64)
        return tg_error("%s.step: parameter %d is %s; only float32 and float64 are updated", opt->name, i,
                        tg_dtype_name(tg_dtype_of(p)));
    param_state *s = &opt->state[i];
    for (int j = 0; j < opt->num_keys; j++) {
        if (j == opt->step_key) continue;
        if (!tg_device_equal(tg_device_of(s->t[j]), tg_device_of(p)) || tg_dtype_of(s->t[j]) != tg_dtype_of(p) ||
            !tg_is_contiguous(s->t[j]))
            return tg_error("%s.step: state \"%s\" of parameter %d is %s on %s but the parameter is %s on %s (move "
                            "the model before making the optimizer)",
                            opt->name, opt->keys[j], i, tg_dtype_name(tg_dtype_of(s->t[j])),
                            tg_device_str(tg_device_of(s->t[j]), da), tg_dtype_name(tg_dtype_of(p)),
                            tg_device_str(tg_device_of(p), db));
    }
    return TG_OK;
}

static tg_tensor *slot(tg_optim *opt, int i, const char *key) {
    int j = key_index(opt, key);
    return j < 0 ? NULL : opt->state[i].t[j];
}

static void *data_or_null(tg_tensor *t) { return t ? tg_data_ptr(t) : NULL; }

static tg_status update_one(tg_optim *opt, int i, tg_tensor *p, tg_tensor *g) {
    bool cuda = tg_device_of(p).kind == TG_DEVICE_CUDA;
    bool f64 = tg_dtype_of(p) == TG_FLOAT64;
    int64_t n = tg_numel(p);
    double step = 0;
    if (opt->step_key >= 0) {
        float *counter = tg_data_ptr(opt->state[i].t[opt->step_key]); /* step_t += 1 */
        *counter += 1.0f;
        step = *counter;
    }
    switch (opt->kind) {
    case KIND_SGD: {
        tg_tensor *buf = slot(opt, i, "momentum_buffer");
        bool first = buf && !opt->state[i].written;
        if (cuda)
            return TG_CUDA_CALL("SGD.step", tg_cuda_sgd_step, p, g, buf, first, opt->lr, opt->momentum,
                                opt->dampening, opt->weight_decay, opt->nesterov, opt->maximize);
        tg_sgd_args args = {opt->lr, opt->momentum, opt->dampening, opt->weight_decay, opt->nesterov,
                            opt->maximize, first};
        if (f64) tg_sgd_kernel_f64(tg_data_ptr(p), tg_data_ptr(g), data_or_null(buf), n, args);
        else tg_sgd_kernel_f32(tg_data_ptr(p), tg_data_ptr(g), data_or_null(buf), n, args);
        return TG_OK;
    }
    case KIND_ADAM:
    case KIND_ADAMW: {
        /* torch/optim/adam.py, adamw.py (non-capturable): the bias corrections in double. */
        double bc1 = 1 - pow(opt->beta1, step), bc2_sqrt = sqrt(1 - pow(opt->beta2, step));
        tg_tensor *m = slot(opt, i, "exp_avg"), *v = slot(opt, i, "exp_avg_sq"), *vmax = slot(opt, i, "max_exp_avg_sq");
        bool decoupled = opt->kind == KIND_ADAMW;
        if (cuda)
            return TG_CUDA_CALL(decoupled ? "AdamW.step" : "Adam.step", tg_cuda_adam_step, p, g, m, v, vmax, opt->lr,
                                opt->beta1, opt->beta2, opt->eps, opt->weight_decay, bc1, bc2_sqrt, opt->amsgrad,
                                decoupled, opt->maximize);
        tg_adam_args args = {opt->lr, opt->beta1, opt->beta2, opt->eps, opt->weight_decay, bc1, bc2_sqrt,
                             opt->amsgrad, decoupled, opt->maximize};
        if (f64)
            tg_adam_kernel_f64(tg_data_ptr(p), tg_data_ptr(g), tg_data_ptr(m), tg_data_ptr(v), data_or_null(vmax), n,
                               args);
        else
            tg_adam_kernel_f32(tg_data_ptr(p), tg_data_ptr(g), tg_data_ptr(m), tg_data_ptr(v), data_or_null(vmax), n,
                               args);
        return TG_OK;
    }
    case KIND_RMSPROP: {
        tg_tensor *sq = slot(opt, i, "square_avg"), *ga = slot(opt, i, "grad_avg"), *buf = slot(opt, i, "momentum_buffer");
        if (cuda)
            return TG_CUDA_CALL("RMSprop.step", tg_cuda_rmsprop_step, p, g, sq, ga, buf, opt->lr, opt->alpha, opt->eps,
                                opt->weight_decay, opt->momentum, opt->centered, opt->maximize);
        tg_rmsprop_args args = {opt->lr, opt->alpha, opt->eps, opt->weight_decay, opt->momentum, opt->centered,
                                opt->maximize};
        if (f64)
            tg_rmsprop_kernel_f64(tg_data_ptr(p), tg_data_ptr(g), tg_data_ptr(sq), data_or_null(ga),
                                  data_or_null(buf), n, args);
        else
            tg_rmsprop_kernel_f32(tg_data_ptr(p), tg_data_ptr(g), tg_data_ptr(sq), data_or_null(ga),
                                  data_or_null(buf), n, args);
        return TG_OK;
    }
    }
    return TG_ERROR;
}

tg_status tg_optim_step(tg_optim *opt) {
    if (!opt) return tg_error("tg_optim_step: optimizer is NULL");
    tg_status status = TG_OK;
    bool prev = tg_set_grad_enabled(false);
    for (int i = 0; i < opt->count && !status; i++) {
        tg_tensor *p = opt->params[i], *g = tg_grad(p);
        if (!g) continue;
        TG_SCOPE {
            status = init_state(opt, i);
            if (!status) status = check_grad(opt, i, p, g);
            tg_tensor *gc = status ? NULL : tg_contiguous(g);
            if (!status && !gc) status = TG_ERROR;
            if (!status) status = update_one(opt, i, p, gc);
            if (!status) {
                opt->state[i].written = true;
                tg_bump_version(p);
                for (int j = 0; j < opt->num_keys; j++) tg_bump_version(opt->state[i].t[j]);
            }
        }
    }
    tg_set_grad_enabled(prev);
    return status;
}

tg_status tg_optim_step_if_finite(tg_optim *opt, bool *skipped) {
    if (!opt) return tg_error("tg_optim_step_if_finite: optimizer is NULL");
    bool finite = true;
    for (int i = 0; i < opt->count && finite; i++) {
        tg_tensor *g = tg_grad(opt->params[i]);
        finite = !g || tg_all_finite(g);
    }
    if (skipped) *skipped = !finite;
    return finite ? tg_optim_step(opt) : TG_OK;
}

void tg_optim_zero_grad(tg_optim *opt) {
    if (!opt) return;
    for (int i = 0; i < opt->count; i++) tg_zero_grad(opt->params[i]);
}

void tg_optim_set_lr(tg_optim *opt, double lr) {
    if (opt) opt->lr = lr;
}
double tg_optim_get_lr(const tg_optim *opt) { return opt ? opt->lr : NAN; }
const char *tg_optim_name(const tg_optim *opt) { return opt ? opt->name : NULL; }
int tg_optim_num_params(const tg_optim *opt) { return opt ? opt->count : 0; }
tg_tensor *tg_optim_param(const tg_optim *opt, int i) {
    return opt && i >= 0 && i < opt->count ? opt->params[i] : NULL;
}

void tg_optim_free(tg_optim *opt) {
    if (!opt) return;
    for (int i = 0; i < opt->count; i++) {
        tg_release(opt->params[i]);
        for (int j = 0; j < MAX_KEYS; j++) tg_release(opt->state[i].t[j]);
    }
    free(opt->params);
    free(opt->state);
    free(opt);
}
