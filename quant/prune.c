/* Pruning (torch.nn.utils.prune, PyTorch 1.13's prune.py): masks, the forward
 * pre-hook that applies them, remove, sparsity. See quant/prune.h. Masks are computed
 * on CPU float64 copies; scores that are ranked go through tg_topk in the weight's
 * dtype (rand draws) or float64 (|w|, exact), as PyTorch ranks them. */
#include "quant/prune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/sort.h"

#define NAME_MAX_LEN 120

static const char *module_name(tg_module *m) {
    const tg_module_type *t = tg_module_type_of(m);
    return t && t->name ? t->name : "Module";
}

static void suffixed(char *out, const char *name, const char *suffix) {
    snprintf(out, NAME_MAX_LEN + 8, "%s%s", name, suffix);
}

bool tg_prune_is_pruned(tg_module *m, const char *name) {
    if (!m || !name || strlen(name) > NAME_MAX_LEN) return false;
    char orig[NAME_MAX_LEN + 8], mask[NAME_MAX_LEN + 8];
    suffixed(orig, name, "_orig");
    suffixed(mask, name, "_mask");
    /* tg_module_param would also find an attribute; the _orig member must be a parameter */
    int n = 0;
    const tg_named_tensor *own = tg_named_parameters(m, &n);
    bool has_orig = false;
    for (int i = 0; i < n && !has_orig; i++) has_orig = !strcmp(own[i].name, orig);
    return has_orig && tg_module_buffer(m, mask) != NULL;
}

/* ---- the hook: name = name_orig * name_mask before each forward ---- */

static tg_status set_effective(tg_module *m, const char *name) {
    char orig[NAME_MAX_LEN + 8], mask[NAME_MAX_LEN + 8];
    suffixed(orig, name, "_orig");
    suffixed(mask, name, "_mask");
    tg_scope_begin();
    tg_tensor *w = tg_mul(tg_module_param(m, orig), tg_module_buffer(m, mask));
    tg_status status = w ? tg_module_set_attr(m, name, w) : TG_ERROR;
    tg_scope_end();
    return status;
}

static tg_status prune_hook(tg_module *m, tg_tensor **input, void *name) {
    return set_effective(m, (const char *)name);
}

/* The pruning hook of m's `name`, or {NULL, 0}. */
static tg_hook_handle find_hook(tg_module *m, const char *name) {
    tg_forward_pre_hook_fn fn = NULL;
    void *user = NULL;
    tg_hook_handle h;
    for (int i = 0; (h = tg_forward_pre_hook_at(m, i, &fn, &user)).id; i++)
        if (fn == prune_hook && !strcmp((const char *)user, name)) return h;
    return h;
}

/* ---- reading tensors and making masks ---- */

/* The values of t as a malloc'd float64 array (row-major), or NULL + error. */
static double *values_of(tg_tensor *t) {
    double *out = NULL;
    bool prev = tg_set_grad_enabled(false);
    tg_scope_begin();
    tg_tensor *cpu = tg_contiguous(tg_cast(tg_tensor_to(tg_detach(t), TG_CPU), TG_FLOAT64));
    if (cpu) {
        int64_t n = tg_numel(cpu);
        out = malloc((size_t)(n ? n : 1) * sizeof *out);
        TG_ASSERT(out != NULL);
        memcpy(out, tg_data_ptr(cpu), (size_t)n * sizeof *out);
    }
    tg_scope_end();
    tg_set_grad_enabled(prev);
    return out;
}

/* A tensor of `values` with like's shape, dtype and device (a new reference in the scope). */
static tg_tensor *tensor_like(const double *values, tg_tensor *like) {
    tg_tensor *t = tg_from_data(values, tg_shape_of(like), (tg_opts){.dtype = TG_FLOAT64});
    return tg_tensor_to(tg_cast(t, tg_dtype_of(like)), tg_device_of(like));
}

/* PyTorch's _validate_pruning_amount(_init) and _compute_nparams_toprune. */
static tg_status nparams_toprune(const char *op, tg_prune_amount a, int64_t size, int64_t *k) {
    if (a.is_count) {
        if (a.count < 0)
            return tg_error("%s: amount=%lld should either be a float in the range [0, 1] or a non-negative integer",
                            op, (long long)a.count);
        if (a.count > size)
            return tg_error("%s: amount=%lld should be smaller than the number of parameters to prune=%lld", op,
                            (long long)a.count, (long long)size);
        *k = a.count;
        return TG_OK;
    }
    if (!(a.fraction >= 0.0 && a.fraction <= 1.0))
        return tg_error("%s: amount=%g should either be a float in the range [0, 1] or a non-negative integer", op,
                        a.fraction);
    *k = (int64_t)nearbyint(a.fraction * (double)size); /* Python's round(): half to even */
    return TG_OK;
}

/* Unstructured pruning inside a PruningContainer: ranks the entries where mask is 1
 * and zeroes k of them in mask. scores: n values (|w| for l1; unused for random,
 * which draws its own in `dtype`). */
static tg_status unstructured(const char *op, const double *scores, int64_t n, tg_dtype dtype, bool random,
                              tg_prune_amount amount, double *mask) {
    int64_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    TG_ASSERT(idx != NULL);
    int64_t live = 0;
    for (int64_t i = 0; i < n; i++)
        if (mask[i] == 1.0) idx[live++] = i;
    int64_t k = 0;
    tg_status status = nparams_toprune(op, amount, live, &k);
    if (status || k == 0) {
        free(idx);
        return status;
    }
    status = TG_ERROR;
    bool prev = tg_set_grad_enabled(false);
    tg_scope_begin();
    tg_tensor *ranked = NULL;
    if (random) {
        ranked = tg_rand(TG_SHAPE(live), (tg_opts){.dtype = dtype}); /* torch.rand_like(t[slc]) */
    } else {
        double *sel = malloc((size_t)live * sizeof *sel);
        TG_ASSERT(sel != NULL);
        for (int64_t j = 0; j < live; j++) sel[j] = fabs(scores[idx[j]]);
        ranked = tg_from_data(sel, TG_SHAPE(live), (tg_opts){.dtype = TG_FLOAT64});
        free(sel);
    }
    tg_tensor *indices = NULL;
    /* random prunes the k largest draws, l1 the k smallest |w| */
    if (ranked && tg_topk(ranked, k, 0, random, true, &indices) && indices) {
        const int64_t *pick = tg_data_ptr(indices);
        for (int64_t j = 0; j < k; j++) mask[idx[pick[j]]] = 0.0;
        status = TG_OK;
    }
    tg_scope_end();
    tg_set_grad_enabled(prev);
    free(idx);
    return status;
}

/* LnStructured inside a PruningContainer: among the slices along dim with some mask
 * entry left, keeps the (kept - k) of largest L-n norm of w and zeroes the rest. */
static tg_status structured(const char *op, const double *w, tg_shape shape, tg_dtype dtype, double p, int dim,
                            tg_prune_amount amount, double *mask) {
    int64_t outer = 1, inner = 1, size = shape.dims[dim];
    for (int d = 0; d < dim; d++) outer *= shape.dims[d];
    for (int d = dim + 1; d < shape.ndim; d++) inner *= shape.dims[d];
    int64_t *channels = malloc((size_t)(size ? size : 1) * sizeof *channels);
    TG_ASSERT(channels != NULL);
    int64_t kept = 0;
    for (int64_t c = 0; c < size; c++) {
        double sum = 0;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) sum += mask[(o * size + c) * inner + i];
        if (sum != 0) channels[kept++] = c;
    }
    int64_t k = 0;
    tg_status status = nparams_toprune(op, amount, kept, &k);
    if (status || k == 0) {
        free(channels);
        return status;
    }
    int64_t sub_n = outer * kept * inner;
    double *sub = malloc((size_t)(sub_n > 0 ? sub_n : 1) * sizeof *sub);
    TG_ASSERT(sub != NULL);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < kept; j++)
            memcpy(sub + (o * kept + j) * inner, w + (o * size + channels[j]) * inner, (size_t)inner * sizeof *sub);
    status = TG_ERROR;
    bool prev = tg_set_grad_enabled(false);
    tg_scope_begin();
    /* the norms in the weight's dtype, as torch.norm(t[slc], p=n, dim=other dims) */
    tg_tensor *t = tg_cast(tg_from_data(sub, TG_SHAPE(outer, kept, inner), (tg_opts){.dtype = TG_FLOAT64}), dtype);
    const int other[] = {0, 2};
    tg_tensor *norms = t ? tg_norm(t, p, other, 2, false) : NULL;
    tg_tensor *indices = NULL;
    if (norms && tg_topk(norms, kept - k, 0, true, true, &indices) && indices) {
        const int64_t *keep = tg_data_ptr(indices);
        bool *keeps = calloc((size_t)kept, sizeof *keeps);
        TG_ASSERT(keeps != NULL);
        for (int64_t j = 0; j < kept - k; j++) keeps[keep[j]] = true;
        for (int64_t j = 0; j < kept; j++) {
            if (keeps[j]) continue;
            for (int64_t o = 0; o < outer; o++)
                for (int64_t i = 0; i < inner; i++) mask[(o * size + channels[j]) * inner + i] = 0.0;
        }
        free(keeps);
        status = TG_OK;
    }
    tg_scope_end();
    tg_set_grad_enabled(prev);
    free(sub);
    free(channels);
    return status;
}

/* ---- pruning a module's tensor ---- */

/* The tensor to prune: name_orig when already pruned, else the parameter `name`.
 * NULL + error naming op when m has neither. */
static tg_tensor *target(const char *op, tg_module *m, const char *name) {
    if (!m) {
        tg_error("%s: module is NULL", op);
        return NULL;
    }
    if (!name || !*name || strlen(name) > NAME_MAX_LEN || strchr(name, '.')) {
        tg_error("%s: tensor name \"%s\" must be a plain member name (no '.', at most %d characters)", op,
                 name ? name : "(NULL)", NAME_MAX_LEN);
        return NULL;
    }
    char orig[NAME_MAX_LEN + 8];
    suffixed(orig, name, "_orig");
    if (tg_prune_is_pruned(m, name)) return tg_module_param(m, orig);
    int n = 0;
    const tg_named_tensor *own = tg_named_parameters(m, &n);
    for (int i = 0; i < n; i++)
        if (!strcmp(own[i].name, name)) return own[i].tensor;
    tg_error("%s: %s has no parameter \"%s\" to prune", op, module_name(m), name);
    return NULL;
}

/* The current mask of name (ones when not pruned) and the scores PyTorch ranks
 * (getattr(module, name): the masked weight), as float64 arrays the caller frees. */
static tg_status current(tg_module *m, const char *name, tg_tensor *w, double **scores, double **mask) {
    *scores = values_of(w);
    if (!*scores) return TG_ERROR;
    int64_t n = tg_numel(w);
    if (tg_prune_is_pruned(m, name)) {
        char mask_name[NAME_MAX_LEN + 8];
        suffixed(mask_name, name, "_mask");
        *mask = values_of(tg_module_buffer(m, mask_name));
        if (!*mask) {
            free(*scores);
            return TG_ERROR;
        }
        for (int64_t i = 0; i < n; i++) (*scores)[i] *= (*mask)[i];
    } else {
        *mask = malloc((size_t)(n ? n : 1) * sizeof **mask);
        TG_ASSERT(*mask != NULL);
        for (int64_t i = 0; i < n; i++) (*mask)[i] = 1.0;
    }
    return TG_OK;
}

/* Installs `mask` (float64, w's shape) as name_mask: the first time moves the
 * parameter to name_orig and adds the buffer and the hook; later, overwrites the
 * buffer in place (its position in the state dict stays, as PyTorch's). Then sets
 * the attribute `name` as the hook would. */
static tg_status install(tg_module *m, const char *name, tg_tensor *w, const double *mask) {
    char orig[NAME_MAX_LEN + 8], mask_name[NAME_MAX_LEN + 8];
    suffixed(orig, name, "_orig");
    suffixed(mask_name, name, "_mask");
    tg_status status = TG_ERROR;
    tg_scope_begin();
    tg_tensor *mask_t = tensor_like(mask, w);
    if (mask_t && tg_prune_is_pruned(m, name)) {
        TG_NO_GRAD { status = tg_copy_(tg_module_buffer(m, mask_name), mask_t); }
    } else if (mask_t) {
        tg_retain(w);
        /* PyTorch appends name_orig to _parameters, then deletes name */
        status = tg_unregister_parameter(m, name);
        if (!status) status = tg_register_parameter(m, orig, w);
        if (!status) status = tg_register_buffer(m, mask_name, mask_t);
        tg_release(w);
        if (!status && !find_hook(m, name).id) {
            size_t len = strlen(name) + 1;
            char *ctx = malloc(len);
            TG_ASSERT(ctx != NULL);
            memcpy(ctx, name, len);
            if (!tg_register_forward_pre_hook_owned(m, prune_hook, ctx, free).id) status = TG_ERROR;
        }
    }
    tg_scope_end();
    return status ? status : set_effective(m, name);
}

static tg_status prune_unstructured(const char *op, tg_module *m, const char *name, tg_prune_amount amount,
                                    bool random) {
    tg_tensor *w = target(op, m, name);
    if (!w) return TG_ERROR;
    double *scores = NULL, *mask = NULL;
    if (current(m, name, w, &scores, &mask)) return TG_ERROR;
    tg_status status = unstructured(op, scores, tg_numel(w), tg_dtype_of(w), random, amount, mask);
    if (!status) status = install(m, name, w, mask);
    free(scores);
    free(mask);
    return status;
}

tg_status tg_prune_l1_unstructured(tg_module *m, const char *name, tg_prune_amount amount) {
    return prune_unstructured("tg_prune_l1_unstructured", m, name, amount, false);
}

tg_status tg_prune_random_unstructured(tg_module *m, const char *name, tg_prune_amount amount) {
    return prune_unstructured("tg_prune_random_unstructured", m, name, amount, true);
}

tg_status tg_prune_ln_structured(tg_module *m, const char *name, tg_prune_amount amount, double n, int dim) {
    const char *op = "tg_prune_ln_structured";
    tg_tensor *w = target(op, m, name);
    if (!w) return TG_ERROR;
    tg_shape shape = tg_shape_of(w);
    if (shape.ndim < 2) {
        char s[64];
        tg_shape_str(shape, s, sizeof s);
        return tg_error("%s: structured pruning can only be applied to multidimensional tensors; %s.%s has shape %s",
                        op, module_name(m), name, s);
    }
    if (dim < -shape.ndim || dim >= shape.ndim)
        return tg_error("%s: dim %d is out of range for %s.%s with %d dims", op, dim, module_name(m), name, shape.ndim);
    if (!(n > 0)) return tg_error("%s: the norm order n must be > 0 (INFINITY for the max norm), got %g", op, n);
    if (dim < 0) dim += shape.ndim;
    double *scores = NULL, *mask = NULL;
    if (current(m, name, w, &scores, &mask)) return TG_ERROR;
    tg_status status = structured(op, scores, shape, tg_dtype_of(w), n, dim, amount, mask);
    if (!status) status = install(m, name, w, mask);
    free(scores);
    free(mask);
    return status;
}

tg_status tg_prune_custom_from_mask(tg_module *m, const char *name, tg_tensor *mask_t) {
    const char *op = "tg_prune_custom_from_mask";
    tg_tensor *w = target(op, m, name);
    if (!w) return TG_ERROR;
    if (tg_unusable_(mask_t)) return tg_error_unusable_input(op, mask_t, 0);
    if (!tg_shape_equal(tg_shape_of(mask_t), tg_shape_of(w))) {
        char a[64], b[64];
        tg_shape_str(tg_shape_of(mask_t), a, sizeof a);
        tg_shape_str(tg_shape_of(w), b, sizeof b);
        return tg_error("%s: mask of shape %s does not match %s.%s of shape %s", op, a, module_name(m), name, b);
    }
    double *scores = NULL, *mask = NULL, *given = values_of(mask_t);
    if (!given) return TG_ERROR;
    if (current(m, name, w, &scores, &mask)) {
        free(given);
        return TG_ERROR;
    }
    for (int64_t i = 0; i < tg_numel(w); i++) mask[i] *= given[i] != 0 ? 1.0 : 0.0; /* default_mask * mask */
    tg_status status = install(m, name, w, mask);
    free(given);
    free(scores);
    free(mask);
    return status;
}

tg_status tg_prune_global_unstructured(tg_module *const *modules, const char *const *names, int count,
                                       tg_prune_method method, tg_prune_amount amount) {
    const char *op = "tg_prune_global_unstructured";
    if (count < 1 || !modules || !names)
        return tg_error("%s: needs at least one (module, name) pair, got %d", op, count);
    if (method != TG_PRUNE_L1_UNSTRUCTURED && method != TG_PRUNE_RANDOM_UNSTRUCTURED)
        return tg_error("%s: unknown pruning method %d (global pruning is unstructured only)", op, (int)method);
    int64_t total = 0;
    tg_dtype dtype = TG_FLOAT32;
    for (int i = 0; i < count; i++) {
        tg_tensor *w = target(op, modules[i], names[i]);
        if (!w) return TG_ERROR;
        if (i == 0) dtype = tg_dtype_of(w);
        total += tg_numel(w);
    }
    /* parameters_to_vector of the scores and of the masks */
    double *scores = malloc((size_t)(total ? total : 1) * sizeof *scores);
    double *mask = malloc((size_t)(total ? total : 1) * sizeof *mask);
    TG_ASSERT(scores != NULL && mask != NULL);
    tg_status status = TG_OK;
    for (int64_t i = 0, at = 0; i < count && !status; i++) {
        tg_tensor *w = target(op, modules[i], names[i]);
        double *s = NULL, *k = NULL;
        status = current(modules[i], names[i], w, &s, &k);
        if (status) break;
        memcpy(scores + at, s, (size_t)tg_numel(w) * sizeof *s);
        memcpy(mask + at, k, (size_t)tg_numel(w) * sizeof *k);
        at += tg_numel(w);
        free(s);
        free(k);
    }
    if (!status) status = unstructured(op, scores, total, dtype, method == TG_PRUNE_RANDOM_UNSTRUCTURED, amount, mask);
    for (int64_t i = 0, at = 0; i < count && !status; i++) {
        tg_tensor *w = target(op, modules[i], names[i]);
        status = install(modules[i], names[i], w, mask + at); /* custom_from_mask of the slice */
        at += tg_numel(w);
    }
    free(scores);
    free(mask);
    return status;
}

tg_status tg_prune_remove(tg_module *m, const char *name) {
    const char *op = "tg_prune_remove";
    if (!m) return tg_error("%s: module is NULL", op);
    if (!tg_prune_is_pruned(m, name))
        return tg_error("%s: parameter \"%s\" of %s has to be pruned before pruning can be removed", op,
                        name ? name : "(NULL)", module_name(m));
    char orig[NAME_MAX_LEN + 8], mask_name[NAME_MAX_LEN + 8];
    suffixed(orig, name, "_orig");
    suffixed(mask_name, name, "_mask");
    tg_tensor *w = tg_module_param(m, orig);
    tg_status status = TG_ERROR;
    tg_scope_begin();
    TG_NO_GRAD {
        tg_tensor *masked = tg_mul(w, tg_module_buffer(m, mask_name));
        status = masked ? tg_copy_(w, masked) : TG_ERROR; /* orig.data = weight.data */
    }
    if (!status) {
        tg_retain(w);
        tg_hook_remove(find_hook(m, name));
        tg_module_set_attr(m, name, NULL);
        status = tg_unregister_parameter(m, orig);
        if (!status) status = tg_unregister_buffer(m, mask_name);
        if (!status) status = tg_register_parameter(m, name, w);
        tg_release(w);
    }
    tg_scope_end();
    return status;
}

/* Adds the zeros and entries of m's prunable weights (own members) and its descendants'. */
static tg_status count_zeros(tg_module *m, int64_t *zeros, int64_t *total) {
    int n = 0;
    const tg_named_tensor *params = tg_named_parameters(m, &n);
    for (int i = 0; i < n; i++) {
        const char *pname = params[i].name;
        if (strchr(pname, '.')) continue; /* a descendant's: counted below */
        size_t len = strlen(pname);
        tg_tensor *counted = NULL;
        bool orig = len > 5 && !strcmp(pname + len - 5, "_orig");
        char base[NAME_MAX_LEN + 8] = "";
        if (orig && len - 5 <= NAME_MAX_LEN) {
            memcpy(base, pname, len - 5);
            base[len - 5] = '\0';
        }
        if (orig && tg_prune_is_pruned(m, base)) {
            char mask_name[NAME_MAX_LEN + 8];
            suffixed(mask_name, base, "_mask");
            counted = tg_mul(params[i].tensor, tg_module_buffer(m, mask_name));
        } else if (!strcmp(pname, "weight") && tg_ndim(params[i].tensor) >= 2) {
            counted = params[i].tensor;
        }
        if (!counted) continue;
        double *v = values_of(counted);
        if (!v) return TG_ERROR;
        for (int64_t j = 0; j < tg_numel(counted); j++) *zeros += v[j] == 0.0;
        *total += tg_numel(counted);
        free(v);
    }
    for (int i = 0; i < tg_module_num_children(m); i++)
        if (count_zeros(tg_module_child_at(m, i, NULL), zeros, total)) return TG_ERROR;
    return TG_OK;
}

double tg_prune_sparsity(tg_module *m) {
    if (!m) {
        tg_error("tg_prune_sparsity: module is NULL");
        return -1.0;
    }
    int64_t zeros = 0, total = 0;
    tg_status status = TG_OK;
    bool prev = tg_set_grad_enabled(false);
    tg_scope_begin();
    status = count_zeros(m, &zeros, &total);
    tg_scope_end();
    tg_set_grad_enabled(prev);
    if (status) return -1.0;
    return total ? (double)zeros / (double)total : 0.0;
}
