/* SGD, Adam, AdamW, RMSprop: construction, parameter groups, per-parameter state,
 * and the step that checks each parameter and hands it, with its group's
 * hyper-parameters, to one fused update (optim/kernels.c on the CPU,
 * optim/cuda/optim.h on CUDA). See optim/optim.h. */
#include "optim/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "autograd/profile.h"
#include "core/option_defaults.h"
#include "core/scope.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "optim/cuda/optim.h"
#include "ops/dispatch.h"
#include "ops/shape.h"
#include "optim/kernels.h"
#include "optim/grad_scaler_state.h"
#include "optim/schedule_state.h"
#include "core/tensor_impl.h"

typedef enum { KIND_SGD, KIND_ADAM, KIND_ADAMW, KIND_RMSPROP } optim_kind;

#define MAX_KEYS 4

typedef struct {
    bool initialised;       /* the tensors exist */
    bool written;           /* a step or tg_optim_state_set has filled them (SGD's first step copies d_p) */
    tg_tensor *t[MAX_KEYS]; /* owned; indexed like the group's keys */
} param_state;

/* One param_groups entry's hyper-parameters (those a schedule or a group may change). */
typedef struct {
    double lr, momentum, dampening, weight_decay, beta1, beta2, eps, alpha;
} hyper;

typedef struct {
    hyper h;
    int first, count; /* its parameters: params[first .. first + count) */
    int num_keys;
    const char *keys[MAX_KEYS]; /* the state_dict keys this group's parameters have, in PyTorch's order */
} param_group;

struct tg_optim {
    optim_kind kind;
    const char *name;
    hyper defaults; /* optimizer.defaults: what a new group inherits */
    bool nesterov, amsgrad, centered, maximize;
    int count;
    tg_tensor **params; /* owned references, group by group */
    param_state *state;
    int *group_of; /* [count] */
    int capacity;  /* of params, state, group_of */
    param_group *groups;
    int num_groups;
    int step_key;                 /* index of "step" in every group's keys, or -1 (SGD) */
    char name_buf[96];            /* tg_optim_state_get's names */
    tg_lr_scheduler **schedulers; /* borrowed: made on this optimizer and not yet freed */
    int num_schedulers;
    tg_grad_scaler *scaler; /* borrowed: the GradScaler made on this optimizer, if any */
};

static int key_index(const param_group *g, const char *key) {
    for (int j = 0; j < g->num_keys; j++)
        if (!strcmp(g->keys[j], key)) return j;
    return -1;
}

static const param_group *group_of_param(const tg_optim *opt, int i) { return &opt->groups[opt->group_of[i]]; }

/* Checks a list of new parameters: each a floating leaf, none twice,
 * none already in the optimizer. `op` prefixes the message. */
static tg_status check_new_params(const tg_optim *opt, const char *op, tg_tensor *const *params, int count) {
    if (count < 0 || (count > 0 && !params)) return tg_error("%s: invalid parameter list (count %d)", op, count);
    for (int i = 0; i < count; i++) {
        if (!params[i]) {
            if (!tg_has_error()) tg_error("%s: parameter %d is NULL", op, i);
            return TG_ERROR;
        }
        /* Frozen parameters (requires_grad false) are accepted and never updated (they
         * get no gradient), as PyTorch's optimizers over model.parameters() do. */
        if (!tg_dtype_is_floating(tg_dtype_of(params[i])) || !tg_is_leaf(params[i]))
            return tg_error("%s: parameter %d must be a floating leaf tensor (got %s%s)", op, i,
                            tg_dtype_name(tg_dtype_of(params[i])), tg_is_leaf(params[i]) ? "" : ", not a leaf");
        for (int j = 0; j < i; j++)
            if (params[j] == params[i]) return tg_error("%s: parameter %d appears twice (also at %d)", op, i, j);
        for (int j = 0; opt && j < opt->count; j++)
            if (opt->params[j] == params[i])
                return tg_error("%s: parameter %d is already in parameter group %d (as parameter %d); a parameter "
                                "may be in one group only (PyTorch: \"some parameters appear in more than one "
                                "parameter group\")",
                                op, i, opt->group_of[j], j);
    }
    return TG_OK;
}

static void reserve(tg_optim *opt, int total) {
    if (total <= opt->capacity) return;
    int cap = opt->capacity ? opt->capacity : 4;
    while (cap < total) cap *= 2;
    opt->params = realloc(opt->params, (size_t)cap * sizeof *opt->params);
    opt->state = realloc(opt->state, (size_t)cap * sizeof *opt->state);
    opt->group_of = realloc(opt->group_of, (size_t)cap * sizeof *opt->group_of);
    TG_ASSERT(opt->params && opt->state && opt->group_of);
    memset(opt->state + opt->capacity, 0, (size_t)(cap - opt->capacity) * sizeof *opt->state);
    opt->capacity = cap;
}

static void add_key(param_group *g, const char *key) { g->keys[g->num_keys++] = key; }

/* The state keys of a group with hyper-parameters h, in the order PyTorch creates them. */
static void set_keys(const tg_optim *opt, param_group *g) {
    g->num_keys = 0;
    switch (opt->kind) {
    case KIND_SGD:
        if (g->h.momentum != 0) add_key(g, "momentum_buffer");
        break;
    case KIND_ADAM:
    case KIND_ADAMW:
        add_key(g, "step");
        add_key(g, "exp_avg");
        add_key(g, "exp_avg_sq");
        if (opt->amsgrad) add_key(g, "max_exp_avg_sq");
        break;
    case KIND_RMSPROP:
        add_key(g, "step");
        add_key(g, "square_avg");
        if (g->h.momentum > 0) add_key(g, "momentum_buffer");
        if (opt->centered) add_key(g, "grad_avg");
        break;
    }
}

/* Appends a group (params already checked) with hyper-parameters h. */
static void append_group(tg_optim *opt, tg_tensor *const *params, int count, hyper h) {
    opt->groups = realloc(opt->groups, (size_t)(opt->num_groups + 1) * sizeof *opt->groups);
    TG_ASSERT(opt->groups != NULL);
    param_group *g = &opt->groups[opt->num_groups];
    memset(g, 0, sizeof *g);
    g->h = h;
    g->first = opt->count;
    g->count = count;
    set_keys(opt, g);
    reserve(opt, opt->count + count);
    for (int i = 0; i < count; i++) {
        opt->params[opt->count + i] = tg_retain(params[i]);
        opt->group_of[opt->count + i] = opt->num_groups;
        memset(&opt->state[opt->count + i], 0, sizeof opt->state[0]);
    }
    opt->count += count;
    opt->num_groups++;
}

static tg_optim *make(optim_kind kind, const char *name, tg_tensor *const *params, int count) {
    if (check_new_params(NULL, name, params, count)) return NULL;
    tg_optim *opt = calloc(1, sizeof *opt);
    TG_ASSERT(opt != NULL);
    opt->kind = kind;
    opt->name = name;
    opt->step_key = kind == KIND_SGD ? -1 : 0;
    return opt;
}

/* The constructors end here: group 0 from the defaults. */
static tg_optim *finish(tg_optim *opt, tg_tensor *const *params, int count) {
    append_group(opt, params, count, opt->defaults);
    return opt;
}

static tg_tensor *const *model_params(tg_module *model, const char *name, int *count) {
    *count = 0;
    if (!model) {
        tg_error("%s: model is NULL", name);
        return NULL;
    }
    return tg_parameters(model, count);
}

tg_optim *tg_sgd_params(tg_tensor *const *params, int count, tg_sgd_opts o) {
    bool lr_given = o.defaults_filled ? o.lr >= 0 : (o.lr > 0 || (o.lr == 0 && signbit(o.lr)));
    if (!lr_given) {
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
    opt->defaults =
        (hyper){.lr = fabs(o.lr), .momentum = o.momentum, .dampening = o.dampening, .weight_decay = o.weight_decay};
    opt->nesterov = o.nesterov;
    opt->maximize = o.maximize;
    return finish(opt, params, count);
}

tg_optim *tg_sgd(tg_module *model, tg_sgd_opts opts) {
    int n;
    tg_tensor *const *p = model_params(model, "SGD", &n);
    return model ? tg_sgd_params(p, n, opts) : NULL;
}

static tg_optim *make_adam(optim_kind kind, const char *name, tg_tensor *const *params, int count, tg_adam_opts o) {
    bool filled = o.defaults_filled;
    double lr = tg_option(o.lr, 1e-3, filled), b1 = tg_option(o.betas[0], 0.9, filled),
           b2 = tg_option(o.betas[1], 0.999, filled), eps = tg_option(o.eps, 1e-8, filled),
           wd = tg_option(o.weight_decay, kind == KIND_ADAMW ? 1e-2 : 0.0, filled);
    if (lr < 0 || eps < 0 || wd < 0 || !(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1)) {
        tg_error("%s: invalid options lr=%g, betas=(%g, %g), eps=%g, weight_decay=%g (betas must be in [0, 1), "
                 "the rest non-negative)",
                 name, lr, b1, b2, eps, wd);
        return NULL;
    }
    tg_optim *opt = make(kind, name, params, count);
    if (!opt) return NULL;
    opt->defaults = (hyper){.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd};
    opt->amsgrad = o.amsgrad;
    opt->maximize = o.maximize;
    return finish(opt, params, count);
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
    bool filled = o.defaults_filled;
    double lr = tg_option(o.lr, 1e-2, filled), alpha = tg_option(o.alpha, 0.99, filled),
           eps = tg_option(o.eps, 1e-8, filled);
    if (lr < 0 || alpha < 0 || eps < 0 || o.weight_decay < 0 || o.momentum < 0) {
        tg_error("RMSprop: invalid options lr=%g, alpha=%g, eps=%g, weight_decay=%g, momentum=%g (all must be "
                 "non-negative)",
                 lr, alpha, eps, o.weight_decay, o.momentum);
        return NULL;
    }
    tg_optim *opt = make(KIND_RMSPROP, "RMSprop", params, count);
    if (!opt) return NULL;
    opt->defaults =
        (hyper){.lr = lr, .alpha = alpha, .eps = eps, .weight_decay = o.weight_decay, .momentum = o.momentum};
    opt->centered = o.centered;
    opt->maximize = o.maximize;
    return finish(opt, params, count);
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
    const param_group *g = group_of_param(opt, i);
    tg_status status = TG_OK;
    TG_SCOPE {
        for (int j = 0; j < g->num_keys && !status; j++) {
            tg_tensor *t;
            if (j == opt->step_key) t = tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = TG_FLOAT32});
            else if (opt->kind == KIND_SGD)
                t = tg_empty(tg_shape_of(p), (tg_opts){.dtype = tg_dtype_of(p), .device = tg_device_of(p)});
            else t = tg_zeros(tg_shape_of(p), (tg_opts){.dtype = tg_dtype_of(p), .device = tg_device_of(p)});
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
        if (opt->state[i].initialised) n += group_of_param(opt, i)->num_keys;
    return n;
}

tg_status tg_optim_state_get(tg_optim *opt, int index, const char **name, tg_tensor **tensor) {
    if (!opt) return tg_error("tg_optim_state_get: optimizer is NULL");
    int k = index;
    for (int i = 0; i < opt->count && k >= 0; i++) {
        if (!opt->state[i].initialised) continue;
        const param_group *g = group_of_param(opt, i);
        if (k < g->num_keys) {
            snprintf(opt->name_buf, sizeof opt->name_buf, "state.%d.%s", i, g->keys[k]);
            if (name) *name = opt->name_buf;
            if (tensor) *tensor = opt->state[i].t[k];
            return TG_OK;
        }
        k -= g->num_keys;
    }
    return tg_error("tg_optim_state_get (%s): entry %d out of range (%d entries)", opt->name, index,
                    tg_optim_state_count(opt));
}

tg_status tg_optim_state_set(tg_optim *opt, const char *name, tg_tensor *value) {
    if (!opt) return tg_error("tg_optim_state_set: optimizer is NULL");
    if (tg_unusable_(value)) return tg_error_unusable_input("tg_optim_state_set", value, 0);
    int i = -1, consumed = 0;
    if (!name || sscanf(name, "state.%d.%n", &i, &consumed) != 1 || consumed == 0)
        return tg_error("tg_optim_state_set (%s): name \"%s\" is not \"state.<index>.<key>\"", opt->name,
                        name ? name : "(NULL)");
    const char *key = name + consumed;
    if (i < 0 || i >= opt->count)
        return tg_error("tg_optim_state_set (%s): \"%s\": parameter index %d out of range (%d parameters)", opt->name,
                        name, i, opt->count);
    int j = key_index(group_of_param(opt, i), key);
    if (j < 0)
        return tg_error("tg_optim_state_set (%s): \"%s\": this optimizer's configuration has no state \"%s\" "
                        "(parameter %d is in group %d)",
                        opt->name, name, key, i, opt->group_of[i]);
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
    const param_group *group = group_of_param(opt, i);
    for (int j = 0; j < group->num_keys; j++) {
        if (j == opt->step_key) continue;
        if (!tg_device_equal(tg_device_of(s->t[j]), tg_device_of(p)) || tg_dtype_of(s->t[j]) != tg_dtype_of(p) ||
            !tg_is_contiguous(s->t[j]))
            return tg_error("%s.step: state \"%s\" of parameter %d is %s on %s but the parameter is %s on %s (move "
                            "the model before making the optimizer)",
                            opt->name, group->keys[j], i, tg_dtype_name(tg_dtype_of(s->t[j])),
                            tg_device_str(tg_device_of(s->t[j]), da), tg_dtype_name(tg_dtype_of(p)),
                            tg_device_str(tg_device_of(p), db));
    }
    return TG_OK;
}

static tg_tensor *slot(tg_optim *opt, int i, const char *key) {
    int j = key_index(group_of_param(opt, i), key);
    return j < 0 ? NULL : opt->state[i].t[j];
}

static void *data_or_null(tg_tensor *t) { return t ? tg_data_ptr(t) : NULL; }

/* Parameter i's update: its arguments in *cpu; on CUDA, run now (the kernel takes the
 * same arguments); on the CPU, described in *cpu for tg_optim_kernel_* to run with the
 * others (`cpu->param` stays NULL on CUDA). Advances the parameter's step count. */
static tg_status update_one(tg_optim *opt, int i, tg_tensor *p, tg_tensor *g, tg_optim_tensor *cpu) {
    bool cuda = tg_device_of(p).kind == TG_DEVICE_CUDA;
    const hyper *h = &group_of_param(opt, i)->h;
    double step = 0;
    if (opt->step_key >= 0) {
        float *counter = tg_data_ptr(opt->state[i].t[opt->step_key]); /* step_t += 1 */
        *counter += 1.0f;
        step = *counter;
    }
    *cpu = (tg_optim_tensor){.param = cuda ? NULL : tg_data_ptr(p), .grad = tg_data_ptr(g), .n = tg_numel(p)};
    switch (opt->kind) {
    case KIND_SGD: {
        tg_tensor *buf = slot(opt, i, "momentum_buffer");
        bool first = buf && !opt->state[i].written;
        cpu->args.sgd =
            (tg_sgd_args){h->lr, h->momentum, h->dampening, h->weight_decay, opt->nesterov, opt->maximize, first};
        if (cuda) return TG_CUDA_CALL("SGD.step", tg_cuda_sgd_step, p, g, buf, &cpu->args.sgd);
        cpu->state[0] = data_or_null(buf);
        return TG_OK;
    }
    case KIND_ADAM:
    case KIND_ADAMW: {
        /* torch/optim/adam.py, adamw.py (non-capturable): the bias corrections in double. */
        double bc1 = 1 - pow(h->beta1, step), bc2_sqrt = sqrt(1 - pow(h->beta2, step));
        tg_tensor *m = slot(opt, i, "exp_avg"), *v = slot(opt, i, "exp_avg_sq"), *vmax = slot(opt, i, "max_exp_avg_sq");
        bool decoupled = opt->kind == KIND_ADAMW;
        cpu->args.adam = (tg_adam_args){h->lr, h->beta1, h->beta2,     h->eps,    h->weight_decay,
                                        bc1,   bc2_sqrt, opt->amsgrad, decoupled, opt->maximize};
        if (cuda)
            return TG_CUDA_CALL(decoupled ? "AdamW.step" : "Adam.step", tg_cuda_adam_step, p, g, m, v, vmax,
                                &cpu->args.adam);
        cpu->state[0] = tg_data_ptr(m);
        cpu->state[1] = tg_data_ptr(v);
        cpu->state[2] = data_or_null(vmax);
        return TG_OK;
    }
    case KIND_RMSPROP: {
        tg_tensor *sq = slot(opt, i, "square_avg"), *ga = slot(opt, i, "grad_avg"),
                  *buf = slot(opt, i, "momentum_buffer");
        cpu->args.rmsprop =
            (tg_rmsprop_args){h->lr, h->alpha, h->eps, h->weight_decay, h->momentum, opt->centered, opt->maximize};
        if (cuda) return TG_CUDA_CALL("RMSprop.step", tg_cuda_rmsprop_step, p, g, sq, ga, buf, &cpu->args.rmsprop);
        cpu->state[0] = tg_data_ptr(sq);
        cpu->state[1] = data_or_null(ga);
        cpu->state[2] = data_or_null(buf);
        return TG_OK;
    }
    }
    return TG_ERROR;
}

/* Every parameter's gradient and state is checked before any is updated, so a bad
 * gradient leaves the whole model as it was. The CPU parameters are then updated
 * together, one parallel loop per dtype (optim/kernels.h). */
tg_status tg_optim_step(tg_optim *opt) {
    if (!opt) return tg_error("tg_optim_step: optimizer is NULL");
    tg_status status = TG_OK;
    double start = tg_profile_enabled() ? tg_profile_clock() : 0;
    bool prev = tg_set_grad_enabled(false);
    tg_optim_tensor *cpu = opt->count ? calloc((size_t)opt->count, sizeof *cpu) : NULL;
    tg_tensor **grads = opt->count ? calloc((size_t)opt->count, sizeof *grads) : NULL;
    if (opt->count && (!cpu || !grads)) status = tg_error("%s.step: out of memory", opt->name);
    TG_SCOPE { /* holds contiguous copies of scattered gradients until the update */
        for (int i = 0; i < opt->count && !status; i++) {
            tg_tensor *p = opt->params[i], *g = tg_grad(p);
            if (!g) continue;
            status = init_state(opt, i);
            if (!status) status = check_grad(opt, i, p, g);
            if (!status && !(grads[i] = tg_contiguous(g))) status = TG_ERROR;
        }
        const tg_optim_rule rule = opt->kind == KIND_SGD       ? TG_RULE_SGD
                                   : opt->kind == KIND_RMSPROP ? TG_RULE_RMSPROP
                                                               : TG_RULE_ADAM;
        int n32 = 0, n64 = 0;
        bool checked = !status; /* past this point a parameter that counted its step is updated */
        for (int i = 0; i < opt->count && checked; i++) {
            if (!grads[i]) continue;
            tg_optim_tensor t;
            if (status || (status = update_one(opt, i, opt->params[i], grads[i], &t))) { /* a CUDA launch failed */
                grads[i] = NULL;
                continue;
            }
            /* float32 from the front of the array, float64 from the back */
            if (t.param && tg_dtype_of(opt->params[i]) == TG_FLOAT64) cpu[opt->count - 1 - n64++] = t;
            else if (t.param) cpu[n32++] = t;
        }
        if (checked) {
            tg_optim_kernel_f32(rule, cpu, n32);
            tg_optim_kernel_f64(rule, cpu + opt->count - n64, n64);
            for (int i = 0; i < opt->count; i++) {
                if (!grads[i]) continue;
                opt->state[i].written = true;
                tg_bump_version(opt->params[i]);
                for (int j = 0; j < group_of_param(opt, i)->num_keys; j++) tg_bump_version(opt->state[i].t[j]);
            }
        }
    }
    free(cpu);
    free(grads);
    tg_set_grad_enabled(prev);
    /* The whole update, every parameter, as one row of TG_PROFILE's table. */
    if (start) tg_profile_record(opt->name, false, tg_profile_clock() - start, 0);
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

/* ---- parameter groups ---- */

/* Group options: unset (NAN from TG_PARAM_GROUP_OPTS, else +0) inherits the default; a
 * zero from the macro or TG_ZERO (-0.0) is a real zero (core/option_defaults.h). */

tg_status tg_optim_add_param_group(tg_optim *opt, tg_tensor *const *params, int count, tg_param_group_opts o) {
    if (!opt) return tg_error("tg_optim_add_param_group: optimizer is NULL");
    char op[64];
    snprintf(op, sizeof op, "%s.add_param_group", opt->name);
    bool f = o.defaults_filled;
    bool sgd = opt->kind == KIND_SGD, adam = opt->kind == KIND_ADAM || opt->kind == KIND_ADAMW,
         rms = opt->kind == KIND_RMSPROP;
    bool betas = tg_option_given(o.betas[0], f) || tg_option_given(o.betas[1], f);
    const char *foreign = !sgd && !rms && tg_option_given(o.momentum, f) ? "momentum"
                          : !sgd && tg_option_given(o.dampening, f)      ? "dampening"
                          : !adam && betas                               ? "betas"
                          : sgd && tg_option_given(o.eps, f)             ? "eps"
                          : !rms && tg_option_given(o.alpha, f)          ? "alpha"
                                                                         : NULL;
    if (foreign) return tg_error("%s: %s has no option %s", op, opt->name, foreign);
    const hyper *d = &opt->defaults;
    hyper h = {
        .lr = tg_option(o.lr, d->lr, f),
        .weight_decay = tg_option(o.weight_decay, d->weight_decay, f),
        .momentum = tg_option(o.momentum, d->momentum, f),
        .dampening = tg_option(o.dampening, d->dampening, f),
        .beta1 = tg_option(o.betas[0], d->beta1, f),
        .beta2 = tg_option(o.betas[1], d->beta2, f),
        .eps = tg_option(o.eps, d->eps, f),
        .alpha = tg_option(o.alpha, d->alpha, f),
    };
    if (!(h.lr >= 0) || !(h.weight_decay >= 0) || !(h.momentum >= 0) || !(h.eps >= 0) || !(h.alpha >= 0))
        return tg_error("%s: invalid options lr=%g, weight_decay=%g, momentum=%g, eps=%g, alpha=%g (must be "
                        "non-negative)",
                        op, h.lr, h.weight_decay, h.momentum, h.eps, h.alpha);
    if (adam && !(h.beta1 >= 0 && h.beta1 < 1 && h.beta2 >= 0 && h.beta2 < 1))
        return tg_error("%s: invalid betas (%g, %g): must be in [0, 1)", op, h.beta1, h.beta2);
    if (sgd && opt->nesterov && (h.momentum <= 0 || h.dampening != 0))
        return tg_error("%s: Nesterov momentum requires a momentum and zero dampening (momentum=%g, dampening=%g)", op,
                        h.momentum, h.dampening);
    if (check_new_params(opt, op, params, count)) return TG_ERROR;
    append_group(opt, params, count, h);
    return TG_OK;
}

int tg_optim_num_groups(const tg_optim *opt) { return opt ? opt->num_groups : 0; }

static bool group_ok(const tg_optim *opt, int g) { return opt && g >= 0 && g < opt->num_groups; }

int tg_optim_group_first_param(const tg_optim *opt, int g) { return group_ok(opt, g) ? opt->groups[g].first : -1; }
int tg_optim_group_num_params(const tg_optim *opt, int g) { return group_ok(opt, g) ? opt->groups[g].count : 0; }
int tg_optim_param_group(const tg_optim *opt, int i) { return opt && i >= 0 && i < opt->count ? opt->group_of[i] : -1; }

tg_param_group_opts tg_optim_group_opts(const tg_optim *opt, int g) {
    tg_param_group_opts o = {0};
    if (!group_ok(opt, g)) return o;
    const hyper *h = &opt->groups[g].h;
    o.lr = h->lr;
    o.weight_decay = h->weight_decay;
    switch (opt->kind) {
    case KIND_SGD:
        o.momentum = h->momentum;
        o.dampening = h->dampening;
        break;
    case KIND_ADAM:
    case KIND_ADAMW:
        o.betas[0] = h->beta1;
        o.betas[1] = h->beta2;
        o.eps = h->eps;
        break;
    case KIND_RMSPROP:
        o.momentum = h->momentum;
        o.eps = h->eps;
        o.alpha = h->alpha;
        break;
    }
    return o;
}

static tg_status bad_group(const tg_optim *opt, const char *op, int g) {
    if (!opt) return tg_error("%s: optimizer is NULL", op);
    return tg_error("%s (%s): group %d out of range (%d groups)", op, opt->name, g, opt->num_groups);
}

tg_status tg_optim_set_group_lr(tg_optim *opt, int g, double lr) {
    if (!group_ok(opt, g)) return bad_group(opt, "tg_optim_set_group_lr", g);
    opt->groups[g].h.lr = lr;
    return TG_OK;
}

double tg_optim_get_group_lr(const tg_optim *opt, int g) { return group_ok(opt, g) ? opt->groups[g].h.lr : NAN; }

tg_status tg_optim_set_group_momentum(tg_optim *opt, int g, double momentum) {
    const char *op = "tg_optim_set_group_momentum";
    if (!group_ok(opt, g)) return bad_group(opt, op, g);
    param_group *group = &opt->groups[g];
    if (opt->kind == KIND_ADAM || opt->kind == KIND_ADAMW) {
        if (!(momentum >= 0 && momentum < 1))
            return tg_error("%s (%s): beta1 must be in [0, 1), got %g", op, opt->name, momentum);
        group->h.beta1 = momentum;
        return TG_OK;
    }
    if (!(momentum >= 0)) return tg_error("%s (%s): momentum must be non-negative, got %g", op, opt->name, momentum);
    bool has_buffer = key_index(group, "momentum_buffer") >= 0;
    if (has_buffer != (momentum > 0))
        return tg_error("%s (%s): group %d was made %s momentum, so its momentum stays %s (got %g): whether a "
                        "group keeps a momentum buffer is fixed when the group is made",
                        op, opt->name, g, has_buffer ? "with" : "without", has_buffer ? "positive" : "0", momentum);
    group->h.momentum = momentum;
    return TG_OK;
}

double tg_optim_get_group_momentum(const tg_optim *opt, int g) {
    if (!group_ok(opt, g)) return NAN;
    return opt->kind == KIND_ADAM || opt->kind == KIND_ADAMW ? opt->groups[g].h.beta1 : opt->groups[g].h.momentum;
}

void tg_optim_set_lr(tg_optim *opt, double lr) {
    if (!opt) return;
    for (int g = 0; g < opt->num_groups; g++) opt->groups[g].h.lr = lr;
}
double tg_optim_get_lr(const tg_optim *opt) { return opt && opt->num_groups ? opt->groups[0].h.lr : NAN; }
const char *tg_optim_name(const tg_optim *opt) { return opt ? opt->name : NULL; }
int tg_optim_num_params(const tg_optim *opt) { return opt ? opt->count : 0; }
tg_tensor *tg_optim_param(const tg_optim *opt, int i) {
    return opt && i >= 0 && i < opt->count ? opt->params[i] : NULL;
}

void tg_optim_attach_scheduler_(tg_optim *opt, tg_lr_scheduler *s) {
    tg_lr_scheduler **list = realloc(opt->schedulers, (size_t)(opt->num_schedulers + 1) * sizeof *list);
    TG_ASSERT(list != NULL);
    opt->schedulers = list;
    opt->schedulers[opt->num_schedulers++] = s;
}

void tg_optim_detach_scheduler_(tg_optim *opt, tg_lr_scheduler *s) {
    for (int i = 0; i < opt->num_schedulers; i++) {
        if (opt->schedulers[i] != s) continue;
        memmove(&opt->schedulers[i], &opt->schedulers[i + 1],
                (size_t)(opt->num_schedulers - i - 1) * sizeof *opt->schedulers);
        opt->num_schedulers--;
        return;
    }
}

int tg_optim_num_schedulers_(const tg_optim *opt) { return opt ? opt->num_schedulers : 0; }
tg_lr_scheduler *tg_optim_scheduler_(const tg_optim *opt, int i) {
    return opt && i >= 0 && i < opt->num_schedulers ? opt->schedulers[i] : NULL;
}

tg_status tg_optim_attach_scaler_(tg_optim *opt, tg_grad_scaler *s) {
    if (opt->scaler)
        return tg_error("tg_grad_scaler_new: %s already has a GradScaler (a checkpoint holds one per optimizer); "
                        "free it first",
                        opt->name);
    opt->scaler = s;
    return TG_OK;
}

void tg_optim_detach_scaler_(tg_optim *opt, tg_grad_scaler *s) {
    if (opt->scaler == s) opt->scaler = NULL;
}

tg_grad_scaler *tg_optim_scaler_(const tg_optim *opt) { return opt ? opt->scaler : NULL; }

void tg_optim_free(tg_optim *opt) {
    if (!opt) return;
    if (opt->scaler) tg_grad_scaler_optim_freed_(opt->scaler);
    for (int i = 0; i < opt->num_schedulers; i++) tg_scheduler_optim_freed_(opt->schedulers[i]);
    free(opt->schedulers);
    for (int i = 0; i < opt->count; i++) {
        tg_release(opt->params[i]);
        for (int j = 0; j < MAX_KEYS; j++) tg_release(opt->state[i].t[j]);
    }
    free(opt->params);
    free(opt->state);
    free(opt->group_of);
    free(opt->groups);
    free(opt);
}
