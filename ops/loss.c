/* Loss functions (CUDA kernels: ops/cuda/loss.cu).
 *
 * cross_entropy is a fused log_softmax + nll kernel; its first-order backward is
 * another (ops/loss_formulas.h's tg_ce_grad on both devices); under create_graph, and
 * for nll, the backward is written with ops on constants built from the targets, so
 * both are differentiable to any order. With eps = label_smoothing, a non-ignored
 * element's loss and gradient are (PyTorch's cross_entropy_loss_label_smoothing,
 * aten/src/ATen/native/LossNLL.cpp):
 *   loss = -(1 - eps) log p_t - (eps / C) sum_c log p_c
 *   dloss/dx_c = p_c - (1 - eps) [c == t] - eps / C
 * and the mean divides by the number of non-ignored targets (both parts).
 * With class weights (opts.weight) both losses take a composed path instead
 * (weighted_loss below), differentiated by autograd; so does cross_entropy with
 * class probabilities as target (prob_target_loss).
 * mse/l1/bce-with-logits are compositions of differentiable ops. */
#include "ops/loss.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/autocast_impl.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/option_defaults.h"
#include "core/parallel.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/cuda/loss.h"
#include "ops/dispatch.h"
#include "ops/distance.h"
#include "ops/elementwise.h"
#include "ops/cpu/cross_entropy.h"
#include "ops/loss_formulas.h"
#include "ops/reduce.h"
#include "ops/shape.h"

typedef tg_ce_args ce_args; /* ops/cpu/cross_entropy.h */

/* A reduction the loss knows: batchmean is kl_div's only, as PyTorch's. */
static tg_status check_reduction(const char *op, tg_reduction r, bool allow_batchmean) {
    if (r == TG_REDUCTION_BATCHMEAN && !allow_batchmean)
        return tg_error("%s: reduction batchmean is kl_div's only (use mean, sum or none)", op);
    if (r < TG_REDUCTION_MEAN || r > TG_REDUCTION_BATCHMEAN) return tg_error("%s: unknown reduction %d", op, (int)r);
    return TG_OK;
}

static bool ignored(const ce_args *a, int64_t t) { return tg_ce_ignored(a, t); }

/* PyTorch's default ignore_index is -100: targets of -100 are skipped unless another
 * index is asked for (the usual padding label). */
static int64_t ignore_index_of(tg_loss_opts o) { return o.use_ignore_index ? o.ignore_index : -100; }

/* Checks logits [N, C, d...] (or [C]) against int64 target [N, d...] (or []) and
 * counts the non-ignored targets; reads the targets on the host. */
static tg_status check_targets(const char *op, tg_tensor *x, tg_tensor *target, ce_args *a) {
    char xs[128], ts[128];
    tg_shape_str(x->shape, xs, sizeof xs);
    tg_shape_str(target->shape, ts, sizeof ts);
    if (!tg_dtype_is_floating(x->dtype))
        return tg_error("%s: expected float32, float64, float16 or bfloat16 input, got %s", op,
                        tg_dtype_name(x->dtype));
    if (target->dtype != TG_INT64)
        return tg_error("%s: expected int64 class indices as target, got %s", op, tg_dtype_name(target->dtype));
    if (tg_check_same_device(op, x, target, "input and target")) return TG_ERROR;
    if (x->shape.ndim == 0) return tg_error("%s: expected input [N, C] or [N, C, d...], got a 0-dim tensor", op);
    bool unbatched = x->shape.ndim == 1;
    bool shape_ok = target->shape.ndim == (unbatched ? 0 : x->shape.ndim - 1);
    for (int i = 0; shape_ok && !unbatched && i < target->shape.ndim; i++)
        shape_ok = target->shape.dims[i] == x->shape.dims[i == 0 ? 0 : i + 1];
    if (!shape_ok)
        return tg_error("%s: expected target %s for input %s (input [N, C, d...] needs target [N, d...]), got %s", op,
                        unbatched ? "[]" : "of the input's shape without dim 1", xs, ts);
    a->n = unbatched ? 1 : x->shape.dims[0];
    a->c = unbatched ? x->shape.dims[0] : x->shape.dims[1];
    a->d = 1;
    for (int i = 2; i < x->shape.ndim; i++) a->d *= x->shape.dims[i];
    if (a->c == 0) return tg_error("%s: expected at least one class, got input %s", op, xs);
    tg_status status = TG_OK;
    a->count = 0;
    TG_SCOPE {
        tg_tensor *host = tg_contiguous(tg_tensor_to(target, TG_CPU));
        if (!host) {
            status = TG_ERROR;
        } else {
            const int64_t *t = tg_data_ptr(host);
            int64_t n = tg_numel(host);
            for (int64_t i = 0; i < n; i++) {
                if (ignored(a, t[i])) continue;
                if (t[i] < 0 || t[i] >= a->c) {
                    status =
                        tg_error("%s: target %lld is out of bounds for %lld classes "
                                 "(expected 0 <= target < %lld, or the ignore_index %lld)",
                                 op, (long long)t[i], (long long)a->c, (long long)a->c, (long long)a->ignore_index);
                    break;
                }
                a->count++;
            }
        }
    }
    return status;
}

/* ======================= fused cross entropy ======================= */

/* [N, 1, d...] (or [1]) shape for per-element constants broadcast against the logits. */
static tg_shape keep_class_dim(tg_shape x) {
    tg_shape s = x;
    if (s.ndim == 1) s.dims[0] = 1;
    else s.dims[1] = 1;
    return s;
}

/* The reduction of per-element losses [N, d...]. */
static tg_tensor *reduce_losses(tg_tensor *losses, const ce_args *a) {
    switch (a->reduction) {
    case TG_REDUCTION_NONE: return losses;
    case TG_REDUCTION_SUM: return tg_sum(losses);
    default: return tg_div_scalar(tg_sum(losses), (double)a->count);
    }
}

static tg_tensor *ce_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const ce_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_contiguous(in[0]), *target = tg_contiguous(in[1]);
    if (!x || !target) return NULL;
    tg_opts o = {.dtype = x->dtype, .device = x->storage->device};
    tg_tensor *losses = tg_empty(target->shape, o), *lse = tg_empty(keep_class_dim(x->shape), o);
    if (!losses || !lse) return NULL;
    if (TG_DEVICE_DISPATCH(x,
                           TG_CUDA_CALL("tg_cross_entropy", tg_cuda_cross_entropy_forward, losses, lse, x, target, a->n,
                                        a->c, a->d, a->use_ignore, a->ignore_index, a->smoothing),
                           tg_cpu_cross_entropy_f32, tg_cpu_cross_entropy_f64, a, tg_data_ptr(x), tg_data_ptr(target),
                           tg_data_ptr(losses), tg_data_ptr(lse)))
        return NULL;
    tg_ctx_save(ctx, in[0]);
    tg_ctx_save(ctx, in[1]);
    tg_ctx_save(ctx, lse);
    return reduce_losses(losses, a);
}

/* Host-built constants of the backward, moved to x's device:
 *   *weight [N, 1, d...]: the reduction's factor per element (0 when ignored)
 *   *dist   [N, C, d...]: the target distribution (1 - eps) onehot + eps / C
 *                         (nll: just the onehot), times -1 when `negate`. */
static tg_status target_constants(tg_tensor *x, tg_tensor *target, const ce_args *a, double eps, tg_tensor **weight,
                                  tg_tensor **dist) {
    tg_tensor *host_t = tg_contiguous(tg_tensor_to(target, TG_CPU));
    tg_tensor *w = tg_empty(keep_class_dim(x->shape), (tg_opts){.dtype = TG_FLOAT64});
    tg_tensor *p = tg_empty(x->shape, (tg_opts){.dtype = TG_FLOAT64});
    if (!host_t || !w || !p) return TG_ERROR;
    const int64_t *t = tg_data_ptr(host_t);
    double *wd = tg_data_ptr(w), *pd = tg_data_ptr(p);
    int64_t C = a->c, D = a->d;
    for (int64_t r = 0; r < a->n * D; r++) {
        int64_t n = r / D, d = r % D;
        bool skip = ignored(a, t[r]);
        wd[r] = tg_ce_factor(skip, a->reduction == TG_REDUCTION_MEAN, a->count);
        for (int64_t c = 0; c < C; c++)
            pd[n * C * D + c * D + d] = skip ? 0 : (1 - eps) * (c == t[r]) + eps / (double)C;
    }
    *weight = tg_tensor_to(tg_cast(w, x->dtype), x->storage->device);
    *dist = tg_tensor_to(tg_cast(p, x->dtype), x->storage->device);
    return *weight && *dist ? TG_OK : TG_ERROR;
}

/* The upstream gradient broadcast against [N, 1, d...]. */
static tg_tensor *broadcast_grad(tg_tensor *g, const ce_args *a, tg_shape x_shape) {
    if (a->reduction != TG_REDUCTION_NONE) return g;
    return tg_reshape(g, keep_class_dim(x_shape));
}

/* The first-order gradient in one pass on either device (tg_ce_grad per element): no
 * host-built constants, so no host wait on CUDA. Not when backward records a graph
 * (create_graph): then the composed expression below, differentiable again. */
static tg_tensor *ce_backward_fused(const ce_args *a, tg_tensor *x, tg_tensor *target, tg_tensor *lse, tg_tensor *g) {
    x = tg_contiguous(x), target = tg_contiguous(target), lse = tg_contiguous(lse), g = tg_contiguous(g);
    tg_tensor *gx = x ? tg_empty(x->shape, (tg_opts){.dtype = x->dtype, .device = x->storage->device}) : NULL;
    if (!gx || !target || !lse || !g) return NULL;
    if (TG_DEVICE_DISPATCH(x,
                           TG_CUDA_CALL("tg_cross_entropy", tg_cuda_cross_entropy_backward, gx, x, target, lse, g, a),
                           tg_cpu_cross_entropy_backward_f32, tg_cpu_cross_entropy_backward_f64, a, tg_data_ptr(x),
                           tg_data_ptr(target), tg_data_ptr(lse), tg_data_ptr(g), tg_data_ptr(gx)))
        return NULL;
    return gx;
}

static void ce_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const ce_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_ctx_saved(ctx, 0), *target = tg_ctx_saved(ctx, 1), *lse = tg_ctx_saved(ctx, 2);
    if (!x || !target || !lse) return;
    if (!tg_is_grad_enabled() && g->dtype == x->dtype && (x->dtype == TG_FLOAT32 || x->dtype == TG_FLOAT64)) {
        grad_in[0] = ce_backward_fused(a, x, target, lse, g);
        return;
    }
    tg_tensor *weight, *dist;
    if (target_constants(x, target, a, a->smoothing, &weight, &dist)) return;
    /* softmax as e / sum(e) with e = exp(x - lse): lse is only a constant shift here,
     * so the expression stays exact for higher derivatives. */
    tg_tensor *e = tg_exp(tg_sub(x, tg_detach(lse)));
    tg_tensor *p = tg_div(e, tg_sum_dim(e, x->shape.ndim == 1 ? 0 : 1, true));
    grad_in[0] = tg_mul(tg_sub(p, dist), tg_mul(weight, broadcast_grad(g, a, x->shape)));
}

static const tg_function ce_fn = {.name = "cross_entropy",
                                  .num_inputs = 2,
                                  .forward = ce_forward,
                                  .backward = ce_backward,
                                  .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                  .autocast = TG_AUTOCAST_NONE};

/* ======================= class weights (composed) ======================= */

/* A weight tensor `name` of a loss: the input's dtype, on the input's device. */
static tg_status check_weight_like_input(const char *op, const char *name, tg_tensor *x, tg_tensor *w) {
    if (w->dtype != x->dtype)
        return tg_error("%s: expected %s of the input's dtype %s, got %s", op, name, tg_dtype_name(x->dtype),
                        tg_dtype_name(w->dtype));
    char what[64];
    snprintf(what, sizeof what, "input and %s", name);
    return tg_check_same_device(op, x, w, what);
}

/* Checks opts.weight: a 1-D [C] tensor of x's floating dtype on x's device. */
static tg_status check_class_weight(const char *op, tg_tensor *x, tg_tensor *w, int64_t c) {
    char xs[128], ws[128];
    tg_shape_str(x->shape, xs, sizeof xs);
    tg_shape_str(w->shape, ws, sizeof ws);
    if (w->shape.ndim != 1 || w->shape.dims[0] != c)
        return tg_error("%s: expected weight of shape [%lld] (one per class) for input %s, got %s", op, (long long)c,
                        xs, ws);
    return check_weight_like_input(op, "weight", x, w);
}

/* cross_entropy (log_softmax first) or nll_loss with class weights, composed of
 * differentiable ops on the input's device (PyTorch 1.13's nll_loss_nd and
 * cross_entropy_loss_label_smoothing):
 *   w_r      = weight[t_r] (0 when ignored)
 *   loss_r   = -(1 - eps) w_r logp[r, t_r] - (eps / C) sum_c weight[c] logp[r, c]  (0 when ignored)
 *   mean     = sum_r loss_r / sum_r w_r */
static tg_tensor *weighted_loss(tg_tensor *x, tg_tensor *target, const ce_args *a, tg_tensor *weight,
                                bool log_softmax) {
    tg_tensor *out = NULL;
    TG_SCOPE {
        int class_dim = x->shape.ndim == 1 ? 0 : 1;
        tg_tensor *unused, *onehot;
        if (target_constants(x, target, a, 0, &unused, &onehot) == TG_OK) {
            tg_shape ws = x->shape; /* [1, C, 1...] (or [C]) */
            for (int i = 0; i < ws.ndim; i++) ws.dims[i] = i == class_dim ? a->c : 1;
            tg_tensor *wb = tg_reshape(tg_detach(weight), ws);
            tg_tensor *logp = log_softmax ? tg_log_softmax(x, class_dim) : x;
            tg_tensor *zero = tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
            /* where, not a product, so that a -inf log-probability elsewhere stays out */
            tg_tensor *hit = tg_ne(onehot, zero);
            tg_tensor *picked = tg_where(hit, logp, zero);
            tg_tensor *w_elem = tg_sum_dim(tg_mul(onehot, wb), class_dim, false);
            tg_tensor *losses = tg_neg(tg_sum_dim(tg_mul(picked, wb), class_dim, false));
            if (a->smoothing > 0) {
                tg_tensor *kept = tg_ne(tg_sum_dim(onehot, class_dim, false), zero);
                tg_tensor *smooth = tg_neg(tg_sum_dim(tg_mul(logp, wb), class_dim, false));
                smooth = tg_where(kept, smooth, zero);
                losses =
                    tg_add(tg_mul_scalar(losses, 1 - a->smoothing), tg_mul_scalar(smooth, a->smoothing / (double)a->c));
            }
            tg_tensor *r = a->reduction == TG_REDUCTION_NONE  ? losses
                           : a->reduction == TG_REDUCTION_SUM ? tg_sum(losses)
                                                              : tg_div(tg_sum(losses), tg_sum(w_elem));
            out = tg_scope_return(r);
        }
    }
    return out;
}

/* ======================= class probabilities (composed) ======================= */

/* cross_entropy with a target of class probabilities shaped like the input, composed
 * of differentiable ops as PyTorch 1.13's cross_entropy_loss_prob_target (LossNLL.cpp):
 *   loss_r = -sum_c weight[c] ((1 - eps) target[r, c] + eps / C) logp[r, c]
 *   mean   = sum_r loss_r / (numel / C)   (every row counts once: no weights in the divisor)
 * Differentiable in the input and the target; the class weight is a constant, as above. */
static tg_tensor *prob_target_loss(const char *op, tg_tensor *x, tg_tensor *target, tg_loss_opts o) {
    char xs[128];
    tg_shape_str(x->shape, xs, sizeof xs);
    if (!tg_dtype_is_floating(x->dtype))
        return tg_error("%s: expected float32, float64, float16 or bfloat16 input, got %s", op,
                        tg_dtype_name(x->dtype)),
               NULL;
    if (x->shape.ndim == 0) return tg_error("%s: expected input [N, C] or [N, C, d...], got a 0-dim tensor", op), NULL;
    if (!tg_dtype_is_floating(target->dtype))
        return tg_error("%s: a target shaped like the input %s holds class probabilities and must be floating, "
                        "got %s (class indices are int64 [N, d...])",
                        op, xs, tg_dtype_name(target->dtype)),
               NULL;
    if (tg_check_same_device(op, x, target, "input and target")) return NULL;
    /* PyTorch refuses a non-negative one: its default -100 means "none" */
    if (o.use_ignore_index && o.ignore_index >= 0)
        return tg_error("%s: ignore_index %lld is not supported with class probabilities as target", op,
                        (long long)o.ignore_index),
               NULL;
    int class_dim = x->shape.ndim == 1 ? 0 : 1;
    int64_t c = x->shape.dims[class_dim];
    if (c == 0) return tg_error("%s: expected at least one class, got input %s", op, xs), NULL;
    if (o.weight && check_class_weight(op, x, o.weight, c)) return NULL;
    tg_tensor *out = NULL;
    TG_SCOPE {
        double eps = o.label_smoothing;
        tg_tensor *p = eps > 0 ? tg_add_scalar(tg_mul_scalar(target, 1 - eps), eps / (double)c) : target;
        tg_tensor *terms = tg_mul(tg_log_softmax(x, class_dim), p);
        if (o.weight) {
            tg_shape ws = x->shape; /* [1, C, 1...] (or [C]) */
            for (int i = 0; i < ws.ndim; i++) ws.dims[i] = i == class_dim ? c : 1;
            terms = tg_mul(terms, tg_reshape(tg_detach(o.weight), ws));
        }
        tg_tensor *losses = tg_neg(tg_sum_dim(terms, class_dim, false));
        tg_tensor *r = o.reduction == TG_REDUCTION_NONE  ? losses
                       : o.reduction == TG_REDUCTION_SUM ? tg_sum(losses)
                                                         : tg_div_scalar(tg_sum(losses), (double)(tg_numel(x) / c));
        out = tg_scope_return(r);
    }
    return out;
}

static tg_tensor *cross_entropy_impl(tg_tensor *logits, tg_tensor *target, tg_loss_opts opts) {
    const char *op = "tg_cross_entropy";
    if (tg_unusable_(logits)) return tg_error_unusable_input(op, logits, 0), NULL;
    if (tg_unusable_(target)) return tg_error_unusable_input(op, target, 1), NULL;
    if (!(opts.label_smoothing >= 0 && opts.label_smoothing <= 1))
        return tg_error("%s: label_smoothing must be in [0, 1], got %g", op, opts.label_smoothing), NULL;
    if (check_reduction(op, opts.reduction, false)) return NULL;
    /* PyTorch's rule: a target of the input's shape is class probabilities */
    if (tg_shape_equal(logits->shape, target->shape)) return prob_target_loss(op, logits, target, opts);
    ce_args a = {opts.reduction, true, ignore_index_of(opts), opts.label_smoothing, 0, 0, 0, 0};
    if (check_targets(op, logits, target, &a)) return NULL;
    if (opts.weight) {
        if (check_class_weight(op, logits, opts.weight, a.c)) return NULL;
        return weighted_loss(logits, target, &a, opts.weight, true);
    }
    return tg_apply_args(&ce_fn, (tg_tensor *[]){logits, target}, &a, sizeof a);
}

/* The tg_loss_opts losses are in autocast's float32 list, as in PyTorch's: impl runs on
 * the input, target and weight cast first. */
typedef tg_tensor *(*loss_impl)(tg_tensor *input, tg_tensor *target, tg_loss_opts opts);

static tg_tensor *in_float32_under_autocast(loss_impl impl, tg_tensor *input, tg_tensor *target, tg_loss_opts opts) {
    if (!tg_autocast_active()) return impl(input, target, opts);
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *t[] = {input, target, opts.weight};
        if (tg_autocast_inputs(TG_AUTOCAST_FLOAT32, t, 3)) break;
        opts.weight = t[2];
        out = tg_scope_return(impl(t[0], t[1], opts));
    }
    return out;
}

tg_tensor *tg_cross_entropy_opts(tg_tensor *logits, tg_tensor *target, tg_loss_opts opts) {
    return in_float32_under_autocast(cross_entropy_impl, logits, target, opts);
}

tg_tensor *tg_cross_entropy(tg_tensor *logits, tg_tensor *target) {
    return tg_cross_entropy_opts(logits, target, (tg_loss_opts){0});
}

/* ======================= nll ======================= */

static tg_tensor *nll_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const ce_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = in[0], *target = in[1];
    /* loss = -x[target] per element, picked with the backward's onehot constants
     * (where, not a product, so that a -inf log-probability elsewhere stays out). */
    tg_tensor *weight, *dist;
    if (target_constants(x, target, a, 0, &weight, &dist)) return NULL;
    int class_dim = x->shape.ndim == 1 ? 0 : 1;
    tg_tensor *zero = tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
    tg_tensor *picked = tg_where(tg_ne(dist, zero), x, zero);
    tg_tensor *losses = tg_neg(tg_sum_dim(picked, class_dim, false));
    tg_ctx_save(ctx, in[0]);
    tg_ctx_save(ctx, in[1]);
    return losses ? reduce_losses(losses, a) : NULL;
}

static void nll_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const ce_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_ctx_saved(ctx, 0), *target = tg_ctx_saved(ctx, 1);
    tg_tensor *weight, *dist;
    if (!x || !target || target_constants(x, target, a, 0, &weight, &dist)) return;
    grad_in[0] = tg_mul(tg_neg(dist), tg_mul(weight, broadcast_grad(g, a, x->shape)));
}

static const tg_function nll_fn = {.name = "nll_loss",
                                   .num_inputs = 2,
                                   .forward = nll_forward,
                                   .backward = nll_backward,
                                   .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                   .autocast = TG_AUTOCAST_NONE};

tg_tensor *tg_nll_loss(tg_tensor *log_probs, tg_tensor *target) {
    return tg_nll_loss_opts(log_probs, target, (tg_loss_opts){0});
}

static tg_tensor *nll_loss_impl(tg_tensor *log_probs, tg_tensor *target, tg_loss_opts opts) {
    const char *op = "tg_nll_loss";
    if (tg_unusable_(log_probs)) return tg_error_unusable_input(op, log_probs, 0), NULL;
    if (tg_unusable_(target)) return tg_error_unusable_input(op, target, 1), NULL;
    if (check_reduction(op, opts.reduction, false)) return NULL;
    if (opts.label_smoothing != 0)
        return tg_error("%s: label_smoothing is a cross_entropy option, got %g", op, opts.label_smoothing), NULL;
    ce_args a = {opts.reduction, true, ignore_index_of(opts), 0, 0, 0, 0, 0};
    if (check_targets(op, log_probs, target, &a)) return NULL;
    if (opts.weight) {
        if (check_class_weight(op, log_probs, opts.weight, a.c)) return NULL;
        return weighted_loss(log_probs, target, &a, opts.weight, false);
    }
    return tg_apply_args(&nll_fn, (tg_tensor *[]){log_probs, target}, &a, sizeof a);
}

tg_tensor *tg_nll_loss_opts(tg_tensor *log_probs, tg_tensor *target, tg_loss_opts opts) {
    return in_float32_under_autocast(nll_loss_impl, log_probs, target, opts);
}

/* ======================= elementwise losses ======================= */

static tg_status check_pair(const char *op, tg_tensor *input, tg_tensor *target, tg_reduction reduction,
                            bool same_shape) {
    char a[128], b[128];
    tg_shape out;
    if (tg_unusable_(input)) return tg_error_unusable_input(op, input, 0);
    if (tg_unusable_(target)) return tg_error_unusable_input(op, target, 1);
    if (check_reduction(op, reduction, false)) return TG_ERROR;
    if (!tg_dtype_is_floating(input->dtype) || input->dtype != target->dtype)
        return tg_error("%s: expected input and target of one floating dtype, got %s and %s", op,
                        tg_dtype_name(input->dtype), tg_dtype_name(target->dtype));
    tg_shape_str(input->shape, a, sizeof a);
    tg_shape_str(target->shape, b, sizeof b);
    if (same_shape ? !tg_shape_equal(input->shape, target->shape)
                   : !tg_broadcast_shapes(input->shape, target->shape, &out))
        return tg_error("%s: target %s %s input %s", op, b,
                        same_shape ? "must have the same shape as" : "does not broadcast with", a);
    return TG_OK;
}

static tg_tensor *reduce(tg_tensor *t, tg_reduction r) {
    return r == TG_REDUCTION_NONE ? t : r == TG_REDUCTION_SUM ? tg_sum(t) : tg_mean(t);
}

/* mse_loss and l1_loss take only a reduction: a field of tg_loss_opts that they would
 * ignore is refused rather than dropped. */
static tg_status only_reduction(const char *op, tg_loss_opts o) {
    if (o.use_ignore_index || o.ignore_index || o.label_smoothing != 0 || o.weight)
        return tg_error("%s: only .reduction applies (PyTorch's %s has no %s)", op, op + 3,
                        o.weight                 ? "weight"
                        : o.label_smoothing != 0 ? "label_smoothing"
                                                 : "ignore_index");
    return TG_OK;
}

static tg_tensor *mse_loss_impl(tg_tensor *input, tg_tensor *target, tg_loss_opts opts) {
    const char *op = "tg_mse_loss";
    if (check_pair(op, input, target, opts.reduction, false) || only_reduction(op, opts)) return NULL;
    tg_tensor *out = NULL;
    TG_SCOPE { out = tg_scope_return(reduce(tg_square(tg_sub(input, target)), opts.reduction)); }
    return out;
}

tg_tensor *tg_mse_loss_opts(tg_tensor *input, tg_tensor *target, tg_loss_opts opts) {
    return in_float32_under_autocast(mse_loss_impl, input, target, opts);
}

tg_tensor *tg_mse_loss(tg_tensor *input, tg_tensor *target) {
    return tg_mse_loss_opts(input, target, (tg_loss_opts){0});
}

static tg_tensor *l1_loss_impl(tg_tensor *input, tg_tensor *target, tg_loss_opts opts) {
    const char *op = "tg_l1_loss";
    if (check_pair(op, input, target, opts.reduction, false) || only_reduction(op, opts)) return NULL;
    tg_tensor *out = NULL;
    TG_SCOPE { out = tg_scope_return(reduce(tg_abs(tg_sub(input, target)), opts.reduction)); }
    return out;
}

tg_tensor *tg_l1_loss_opts(tg_tensor *input, tg_tensor *target, tg_loss_opts opts) {
    return in_float32_under_autocast(l1_loss_impl, input, target, opts);
}

tg_tensor *tg_l1_loss(tg_tensor *input, tg_tensor *target) { return tg_l1_loss_opts(input, target, (tg_loss_opts){0}); }

/* Checks an optional weight of bce_with_logits: the input's dtype and device, and
 * broadcastable to the input's shape (PyTorch multiplies in place). */
static tg_status check_bce_weight(const char *op, const char *name, tg_tensor *x, tg_tensor *w) {
    char xs[128], ws[128];
    tg_shape out;
    tg_shape_str(x->shape, xs, sizeof xs);
    tg_shape_str(w->shape, ws, sizeof ws);
    if (check_weight_like_input(op, name, x, w)) return TG_ERROR;
    if (!tg_broadcast_shapes(x->shape, w->shape, &out) || !tg_shape_equal(out, x->shape))
        return tg_error("%s: %s %s does not broadcast to input %s", op, name, ws, xs);
    return TG_OK;
}

/* ATen's binary_cross_entropy_with_logits (Loss.cpp): with m = max(-x, 0),
 *   sp = m + log(exp(-m) + exp(-x - m))            (= log(1 + exp(-x)))
 *   loss = (1 - y) x + (1 + (pos_weight - 1) y) sp,  times weight. */
static tg_tensor *binary_cross_entropy_with_logits_impl(tg_tensor *logits, tg_tensor *target, tg_bce_opts opts) {
    const char *op = "tg_binary_cross_entropy_with_logits";
    if (check_pair(op, logits, target, opts.reduction, true)) return NULL;
    if (opts.weight && check_bce_weight(op, "weight", logits, opts.weight)) return NULL;
    if (opts.pos_weight && check_bce_weight(op, "pos_weight", logits, opts.pos_weight)) return NULL;
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *m = tg_relu(tg_neg(logits));
        tg_tensor *sp = tg_add(m, tg_log(tg_add(tg_exp(tg_neg(m)), tg_exp(tg_sub(tg_neg(logits), m)))));
        if (opts.pos_weight) sp = tg_mul(tg_add_scalar(tg_mul(tg_sub_scalar(opts.pos_weight, 1), target), 1), sp);
        tg_tensor *loss = tg_add(tg_mul(tg_rsub_scalar(target, 1), logits), sp);
        if (opts.weight) loss = tg_mul(loss, opts.weight);
        out = tg_scope_return(reduce(loss, opts.reduction));
    }
    return out;
}

/* In autocast's float32 list, as in PyTorch's (inputs and weights cast first). */
tg_tensor *tg_binary_cross_entropy_with_logits_opts(tg_tensor *logits, tg_tensor *target, tg_bce_opts opts) {
    if (!tg_autocast_active()) return binary_cross_entropy_with_logits_impl(logits, target, opts);
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *t[] = {logits, target, opts.weight, opts.pos_weight};
        if (tg_autocast_inputs(TG_AUTOCAST_FLOAT32, t, 4)) break;
        opts.weight = t[2], opts.pos_weight = t[3];
        out = tg_scope_return(binary_cross_entropy_with_logits_impl(t[0], t[1], opts));
    }
    return out;
}

tg_tensor *tg_binary_cross_entropy_with_logits(tg_tensor *logits, tg_tensor *target) {
    return tg_binary_cross_entropy_with_logits_opts(logits, target, (tg_bce_opts){0});
}

/* ======================= binary_cross_entropy ======================= */

/* -(y max(log x, -100) + (1 - y) max(log(1 - x), -100)) per element, with PyTorch
 * 1.13's own gradients (binary_cross_entropy_backward and _target_backward in
 * Loss.cpp): they differ from the clamped formula's at x = 0 and 1, where PyTorch
 * divides by max(x (1 - x), 1e-12). The backward is written with ops, so it runs on
 * any device and differentiates again. */
static tg_tensor *bce_forward(tg_ctx *ctx, tg_tensor *const *in) {
    tg_tensor *x = in[0], *y = in[1];
    tg_ctx_save(ctx, x);
    tg_ctx_save(ctx, y);
    tg_tensor *log_x = tg_clamp(tg_log(x), -100, NAN);
    tg_tensor *log_1mx = tg_clamp(tg_log(tg_rsub_scalar(x, 1)), -100, NAN);
    return tg_neg(tg_add(tg_mul(y, log_x), tg_mul(tg_rsub_scalar(y, 1), log_1mx)));
}

static void bce_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    tg_tensor *x = tg_ctx_saved(ctx, 0), *y = tg_ctx_saved(ctx, 1);
    if (!x || !y) return;
    if (tg_ctx_needs_input_grad(ctx, 0)) {
        /* PyTorch's EPSILON is the float 1e-12 (9.99999996e-13 as a double) */
        tg_tensor *denominator = tg_clamp(tg_mul(x, tg_rsub_scalar(x, 1)), (double)1e-12f, NAN);
        grad_in[0] = tg_mul(g, tg_div(tg_sub(x, y), denominator));
    }
    if (tg_ctx_needs_input_grad(ctx, 1)) grad_in[1] = tg_mul(g, tg_sub(tg_log(tg_rsub_scalar(x, 1)), tg_log(x)));
}

static const tg_function bce_fn = {.name = "binary_cross_entropy",
                                   .num_inputs = 2,
                                   .forward = bce_forward,
                                   .backward = bce_backward,
                                   .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                   .autocast = TG_AUTOCAST_FLOAT32};

/* PyTorch's CPU kernel refuses probabilities outside [0, 1] (its CUDA kernel asserts):
 * one count read on the host. */
static tg_status check_probabilities(const char *op, tg_tensor *x) {
    tg_status status = TG_OK;
    TG_SCOPE {
        tg_tensor *outside = tg_sum(tg_cast(tg_eq_scalar(tg_mul(tg_ge_scalar(x, 0), tg_le_scalar(x, 1)), 0), TG_INT64));
        tg_tensor *host = outside ? tg_tensor_to(outside, TG_CPU) : NULL;
        if (!host) status = TG_ERROR;
        else if (*(const int64_t *)tg_data_ptr(host) > 0)
            status = tg_error("%s: all elements of input should be between 0 and 1 (%lld are not)", op,
                              (long long)*(const int64_t *)tg_data_ptr(host));
    }
    return status;
}

tg_tensor *tg_binary_cross_entropy_opts(tg_tensor *input, tg_tensor *target, tg_bce_opts opts) {
    const char *op = "tg_binary_cross_entropy";
    if (check_pair(op, input, target, opts.reduction, true)) return NULL;
    if (opts.pos_weight) return tg_error("%s: pos_weight is a binary_cross_entropy_with_logits option", op), NULL;
    if (opts.weight && check_bce_weight(op, "weight", input, opts.weight)) return NULL;
    if (check_probabilities(op, input)) return NULL;
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *loss = tg_apply(&bce_fn, (tg_tensor *[]){input, target});
        if (opts.weight) loss = tg_mul(loss, opts.weight);
        out = tg_scope_return(reduce(loss, opts.reduction));
    }
    return out;
}

tg_tensor *tg_binary_cross_entropy(tg_tensor *input, tg_tensor *target) {
    return tg_binary_cross_entropy_opts(input, target, (tg_bce_opts){0});
}

/* ======================= kl_div, smooth_l1, huber (composed) ======================= */

/* t log t, 0 where t == 0 (torch.xlogy(t, t)). The log reads a 1 there, so that the
 * unused branch is finite and its zero gradient stays zero (0 * log 0 would be NaN). */
static tg_tensor *x_log_x(tg_tensor *t) {
    tg_tensor *nonzero = tg_ne_scalar(t, 0);
    return tg_where_scalar(nonzero, tg_mul(t, tg_log(tg_where_scalar(nonzero, t, 1.0))), 0.0);
}

/* PyTorch's kl_div (Loss.cpp) and F.kl_div's batchmean (the sum over the input's
 * first dim; a 0-dim input is just summed). */
tg_tensor *tg_kl_div_opts(tg_tensor *input, tg_tensor *target, tg_kl_opts opts) {
    const char *op = "tg_kl_div";
    if (input && target && check_reduction(op, opts.reduction, true)) return NULL;
    bool batchmean = opts.reduction == TG_REDUCTION_BATCHMEAN;
    /* check_pair knows the three reductions; batchmean is checked above */
    if (check_pair(op, input, target, batchmean ? TG_REDUCTION_SUM : opts.reduction, false)) return NULL;
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *pointwise = opts.log_target ? tg_mul(tg_exp(target), tg_sub(target, input))
                                               : tg_sub(x_log_x(target), tg_mul(target, input));
        tg_tensor *r;
        if (batchmean) {
            r = tg_sum(pointwise);
            if (input->shape.ndim > 0) r = tg_div_scalar(r, (double)input->shape.dims[0]);
        } else {
            r = reduce(pointwise, opts.reduction);
        }
        out = tg_scope_return(r);
    }
    return out;
}

tg_tensor *tg_kl_div(tg_tensor *input, tg_tensor *target) { return tg_kl_div_opts(input, target, (tg_kl_opts){0}); }

/* The two pieces of smooth_l1 / huber, chosen with where: inside |d| < k,
 * inside_scale * d^2, else outside_scale * (|d| - k / 2). PyTorch's backward gives
 * the outside slope at |d| == k, as this does. */
static tg_tensor *piecewise_quadratic(tg_tensor *d, double k, double inside_scale, double outside_scale) {
    tg_tensor *abs_d = tg_abs(d);
    tg_tensor *inside = tg_mul_scalar(tg_square(d), inside_scale);
    tg_tensor *outside = tg_mul_scalar(tg_sub_scalar(abs_d, 0.5 * k), outside_scale);
    return tg_where(tg_lt_scalar(abs_d, k), inside, outside);
}

tg_tensor *tg_smooth_l1_loss_opts(tg_tensor *input, tg_tensor *target, tg_smooth_l1_opts opts) {
    const char *op = "tg_smooth_l1_loss";
    if (check_pair(op, input, target, opts.reduction, false)) return NULL;
    double beta = tg_option(opts.beta, 1.0, opts.defaults_filled);
    if (!(beta >= 0)) return tg_error("%s: beta must not be negative, got %g", op, beta), NULL;
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *d = tg_sub(input, target);
        /* beta 0 is an L1 loss (PyTorch calls l1_loss) */
        tg_tensor *loss = beta == 0 ? tg_abs(d) : piecewise_quadratic(d, beta, 0.5 / beta, 1.0);
        out = tg_scope_return(reduce(loss, opts.reduction));
    }
    return out;
}

tg_tensor *tg_smooth_l1_loss(tg_tensor *input, tg_tensor *target) {
    return tg_smooth_l1_loss_opts(input, target, (tg_smooth_l1_opts){0});
}

tg_tensor *tg_huber_loss_opts(tg_tensor *input, tg_tensor *target, tg_huber_opts opts) {
    const char *op = "tg_huber_loss";
    if (check_pair(op, input, target, opts.reduction, false)) return NULL;
    double delta = tg_option(opts.delta, 1.0, opts.defaults_filled);
    if (!(delta > 0)) return tg_error("%s: delta must be positive, got %g", op, opts.delta), NULL; /* as given */
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *loss = piecewise_quadratic(tg_sub(input, target), delta, 0.5, delta);
        out = tg_scope_return(reduce(loss, opts.reduction));
    }
    return out;
}

tg_tensor *tg_huber_loss(tg_tensor *input, tg_tensor *target) {
    return tg_huber_loss_opts(input, target, (tg_huber_opts){0});
}

/* ======================= triplet_margin_loss (composed) ======================= */

tg_tensor *tg_triplet_margin_loss_opts(tg_tensor *anchor, tg_tensor *positive, tg_tensor *negative,
                                       tg_triplet_opts opts) {
    const char *op = "tg_triplet_margin_loss";
    tg_tensor *in[3] = {anchor, positive, negative};
    for (int i = 0; i < 3; i++)
        if (tg_unusable_(in[i])) return tg_error_unusable_input(op, in[i], i), NULL;
    if (check_reduction(op, opts.reduction, false)) return NULL;
    if (anchor->shape.ndim != positive->shape.ndim || anchor->shape.ndim != negative->shape.ndim)
        return tg_error("%s: anchor, positive and negative must have the same number of dims, got %d, %d and %d", op,
                        anchor->shape.ndim, positive->shape.ndim, negative->shape.ndim),
               NULL;
    tg_shape ap, apn;
    char sa[128], sp[128], sn[128];
    if (!tg_broadcast_shapes(anchor->shape, positive->shape, &ap) || !tg_broadcast_shapes(ap, negative->shape, &apn))
        return tg_error("%s: anchor %s, positive %s and negative %s cannot be broadcast together", op,
                        tg_shape_str(anchor->shape, sa, sizeof sa), tg_shape_str(positive->shape, sp, sizeof sp),
                        tg_shape_str(negative->shape, sn, sizeof sn)),
               NULL;
    bool filled = opts.defaults_filled;
    double margin = tg_option(opts.margin, 1.0, filled), p = tg_option(opts.p, 2.0, filled),
           eps = tg_option(opts.eps, 1e-6, filled);
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *d_pos = tg_pairwise_distance(anchor, positive, p, eps, false);
        tg_tensor *d_neg = tg_pairwise_distance(anchor, negative, p, eps, false);
        if (opts.swap) d_neg = tg_minimum(d_neg, tg_pairwise_distance(positive, negative, p, eps, false));
        /* clamp passes the gradient at 0 itself, as PyTorch's clamp_min */
        tg_tensor *loss = tg_clamp(tg_add_scalar(tg_sub(d_pos, d_neg), margin), 0, NAN);
        if (loss) out = tg_scope_return(reduce(loss, opts.reduction));
    }
    return out;
}

tg_tensor *tg_triplet_margin_loss(tg_tensor *anchor, tg_tensor *positive, tg_tensor *negative) {
    return tg_triplet_margin_loss_opts(anchor, positive, negative, (tg_triplet_opts){0});
}
