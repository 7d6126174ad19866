/* cosine_similarity and pairwise_distance, composed (see ops/distance.h). */
#include "ops/distance.h"

#include <math.h>

#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"

/* Checks two floating inputs of one dtype and device that broadcast; *out is the shape. */
static tg_status check_pair(const char *op, tg_tensor *x1, tg_tensor *x2, tg_shape *out) {
    if (tg_unusable_(x1)) return tg_error_unusable_input(op, x1, 0);
    if (tg_unusable_(x2)) return tg_error_unusable_input(op, x2, 1);
    if (!tg_dtype_is_floating(x1->dtype) || x1->dtype != x2->dtype)
        return tg_error("%s: expected x1 and x2 of one floating dtype, got %s and %s", op, tg_dtype_name(x1->dtype),
                        tg_dtype_name(x2->dtype));
    if (tg_check_same_device(op, x1, x2, "x1 and x2")) return TG_ERROR;
    char a[128], b[128];
    if (!tg_broadcast_shapes(x1->shape, x2->shape, out))
        return tg_error("%s: x1 %s and x2 %s cannot be broadcast together", op, tg_shape_str(x1->shape, a, sizeof a),
                        tg_shape_str(x2->shape, b, sizeof b));
    return TG_OK;
}

/* max(|x|, eps) over dim (kept), with the gradient of |x| everywhere: the clamp adds
 * a detached shift, so d/dx = x / max(|x|, eps), PyTorch 1.13's (it clamps the norm
 * in place under no_grad, and the norm's backward reads the clamped value). */
static tg_tensor *clamped_norm(tg_tensor *x, int dim, double eps) {
    tg_tensor *squares = tg_sum_dim(tg_square(x), dim, true);
    tg_tensor *shift = tg_detach(tg_sub(tg_clamp(squares, eps * eps, NAN), squares));
    return tg_sqrt(tg_add(squares, shift));
}

tg_tensor *tg_cosine_similarity(tg_tensor *x1, tg_tensor *x2, int dim, double eps) {
    const char *op = "tg_cosine_similarity";
    tg_shape shape;
    if (check_pair(op, x1, x2, &shape)) return NULL;
    int ndim = shape.ndim == 0 ? 1 : shape.ndim; /* a 0-dim pair is one element along dim 0 */
    int d = tg_wrap_dim(dim, ndim);
    if (d < 0) return tg_error("%s: dim %d is out of range for inputs of %d dims", op, dim, shape.ndim), NULL;
    if (!(eps >= 0)) return tg_error("%s: eps must not be negative, got %g", op, eps), NULL;
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_shape s = shape.ndim == 0 ? TG_SHAPE(1) : shape;
        tg_tensor *a = tg_expand(tg_reshape(x1, shape.ndim == 0 ? s : x1->shape), s);
        tg_tensor *b = tg_expand(tg_reshape(x2, shape.ndim == 0 ? s : x2->shape), s);
        tg_tensor *unit_a = tg_div(a, clamped_norm(a, d, eps));
        tg_tensor *unit_b = tg_div(b, clamped_norm(b, d, eps));
        tg_tensor *r = tg_sum_dim(tg_mul(unit_a, unit_b), d, false);
        if (r && shape.ndim == 0) r = tg_reshape(r, TG_SCALAR_SHAPE);
        out = tg_scope_return(r);
    }
    return out;
}

tg_tensor *tg_pairwise_distance(tg_tensor *x1, tg_tensor *x2, double p, double eps, bool keepdim) {
    const char *op = "tg_pairwise_distance";
    tg_shape shape;
    if (check_pair(op, x1, x2, &shape)) return NULL;
    if (!(p > 0)) return tg_error("%s: p must be positive (or INFINITY), got %g", op, p), NULL;
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *diff = tg_add_scalar(tg_sub(x1, x2), eps);
        if (diff && diff->shape.ndim == 0) diff = tg_reshape(diff, TG_SHAPE(1)); /* a 0-dim pair: one element */
        int last = -1;
        tg_tensor *r = tg_norm(diff, p, &last, 1, keepdim && shape.ndim > 0);
        if (r && shape.ndim == 0) r = tg_reshape(r, TG_SCALAR_SHAPE);
        out = tg_scope_return(r);
    }
    return out;
}
