/* Compositions of differentiable ops (see ops/composite.h). */
#include "ops/composite.h"

#include <stdio.h>
#include <stdlib.h>

#include "autograd/autocast_impl.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/shape.h"

tg_tensor *tg_masked_fill(tg_tensor *x, tg_tensor *mask, double value) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_masked_fill", x, 0), NULL;
    if (tg_unusable_(mask)) return tg_error_unusable_input("tg_masked_fill", mask, 1), NULL;
    char a[128], b[128];
    tg_shape out;
    if (mask->dtype != TG_BOOL)
        return tg_error("tg_masked_fill: mask must be bool, got %s", tg_dtype_name(mask->dtype)), NULL;
    if (!tg_broadcast_shapes(x->shape, mask->shape, &out) || !tg_shape_equal(out, x->shape))
        return tg_error("tg_masked_fill: mask of shape %s cannot be broadcast to the input's shape %s",
                        tg_shape_str(mask->shape, a, sizeof a), tg_shape_str(x->shape, b, sizeof b)),
               NULL;
    if (tg_check_fill_value("tg_masked_fill", x->dtype, value)) return NULL;
    tg_tensor *result = NULL;
    TG_SCOPE { result = tg_scope_return(tg_where_scalar(tg_eq_scalar(mask, 0), x, value)); }
    return result;
}

/* Keeps x where (col - row) compares to k as `lower` says, on the last two dims. */
static tg_tensor *triangle(const char *op, tg_tensor *x, int64_t k, bool lower) {
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), NULL;
    if (x->shape.ndim < 2) return tg_error("%s: input must have at least 2 dims, got %d", op, x->shape.ndim), NULL;
    int64_t rows = x->shape.dims[x->shape.ndim - 2], cols = x->shape.dims[x->shape.ndim - 1];
    tg_opts idx = {.dtype = TG_INT64, .device = x->storage->device};
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *r = tg_view(tg_arange(0, (double)rows, 1, idx), TG_SHAPE(rows, 1));
        tg_tensor *c = tg_view(tg_arange(0, (double)cols, 1, idx), TG_SHAPE(1, cols));
        tg_tensor *shifted = tg_add_scalar(r, (double)k); /* row + k */
        tg_tensor *keep = lower ? tg_le(c, shifted) : tg_ge(c, shifted);
        /* A zero of x's dtype: where with an int64 scalar would promote bool/uint8/int32 */
        tg_tensor *zero = tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
        result = tg_scope_return(tg_where(keep, x, zero));
    }
    return result;
}

tg_tensor *tg_tril(tg_tensor *x, int64_t diagonal) { return triangle("tg_tril", x, diagonal, true); }
tg_tensor *tg_triu(tg_tensor *x, int64_t diagonal) { return triangle("tg_triu", x, diagonal, false); }

tg_tensor *tg_flip(tg_tensor *x, const int *dims, int count) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_flip", x, 0), NULL;
    if (count < 0 || (count > 0 && !dims)) return tg_error("tg_flip: %d dims given", count), NULL;
    bool seen[TG_MAX_DIMS] = {0};
    for (int i = 0; i < count; i++) {
        int d = tg_wrap_dim(dims[i], x->shape.ndim);
        if (d < 0 || (x->shape.ndim > 0 && seen[d]))
            return tg_error("tg_flip: dim %d is out of range or repeated (a tensor with %d dims)", dims[i],
                            x->shape.ndim),
                   NULL;
        if (x->shape.ndim > 0) seen[d] = true;
    }
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *y = tg_clone(x); /* a copy even when nothing is flipped, as PyTorch */
        for (int d = 0; y && d < x->shape.ndim; d++) {
            if (!seen[d] || x->shape.dims[d] < 2) continue;
            int64_t n = x->shape.dims[d];
            y = tg_index_select(
                y, d, tg_arange((double)(n - 1), -1, -1, (tg_opts){.dtype = TG_INT64, .device = x->storage->device}));
        }
        if (y) result = tg_scope_return(y);
    }
    return result;
}

tg_tensor *tg_take(tg_tensor *x, tg_tensor *index) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_take", x, 0), NULL;
    if (tg_unusable_(index)) return tg_error_unusable_input("tg_take", index, 1), NULL;
    if (index->dtype != TG_INT64)
        return tg_error("tg_take: index must be int64, got %s", tg_dtype_name(index->dtype)), NULL;
    int64_t n = tg_numel(x), count = tg_numel(index);
    /* Checked here on the host, so that the message gives the index as the user wrote
     * it (index_select sees it after the wrap: -13 of 12 would read as -1). */
    int64_t *host = malloc((size_t)(count > 0 ? count : 1) * sizeof *host);
    if (!host) return tg_error("tg_take: out of memory"), NULL;
    tg_status st = tg_copy_to_host(index, host, (size_t)count * sizeof *host);
    for (int64_t i = 0; i < count && !st; i++)
        if (host[i] < -n || host[i] >= n) {
            char xs[128];
            st = tg_error("tg_take: index %lld is out of range for input %s of %lld elements", (long long)host[i],
                          tg_shape_str(x->shape, xs, sizeof xs), (long long)n);
        }
    free(host);
    if (st) return NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *flat = tg_reshape(index, TG_SHAPE(count));
        tg_tensor *wrapped = tg_where(tg_lt_scalar(flat, 0), tg_add_scalar(flat, (double)n), flat);
        tg_tensor *picked = tg_index_select(tg_reshape(x, TG_SHAPE(n)), 0, wrapped);
        result = tg_scope_return(tg_reshape(picked, index->shape));
    }
    return result;
}

tg_tensor *tg_outer(tg_tensor *a, tg_tensor *b) {
    if (tg_unusable_(a)) return tg_error_unusable_input("tg_outer", a, 0), NULL;
    if (tg_unusable_(b)) return tg_error_unusable_input("tg_outer", b, 1), NULL;
    if (a->shape.ndim != 1 || b->shape.ndim != 1)
        return tg_error("tg_outer: expected 1-D inputs, got %d and %d dims", a->shape.ndim, b->shape.ndim), NULL;
    tg_tensor *result = NULL;
    TG_SCOPE { result = tg_scope_return(tg_mul(tg_unsqueeze(a, 1), tg_unsqueeze(b, 0))); }
    return result;
}

/* Checks up front that the shapes of the n tensors broadcast, so that a composite op's
 * message names it and its inputs, not the inner op (sub, lt, ...). */
static tg_status check_broadcast(const char *op, tg_tensor *const *t, const char *const *names, int n) {
    tg_shape out = t[0]->shape;
    bool ok = true;
    for (int i = 1; i < n && ok; i++)
        if (t[i]) ok = tg_broadcast_shapes(out, t[i]->shape, &out);
    if (ok) return TG_OK;
    char msg[512] = "", s[128];
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof msg; i++)
        if (t[i])
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s %s", len ? ", " : "", names[i],
                                    tg_shape_str(t[i]->shape, s, sizeof s));
    return tg_error("%s: shapes cannot be broadcast together: %s", op, msg);
}

tg_tensor *tg_lerp(tg_tensor *a, tg_tensor *b, double weight) {
    if (tg_unusable_(a)) return tg_error_unusable_input("tg_lerp", a, 0), NULL;
    if (tg_unusable_(b)) return tg_error_unusable_input("tg_lerp", b, 1), NULL;
    if (check_broadcast("tg_lerp", (tg_tensor *[]){a, b}, (const char *[]){"start", "end"}, 2)) return NULL;
    tg_tensor *result = NULL;
    TG_SCOPE { result = tg_scope_return(tg_add(a, tg_mul_scalar(tg_sub(b, a), weight))); }
    return result;
}

tg_tensor *tg_lerp_tensor(tg_tensor *a, tg_tensor *b, tg_tensor *weight) {
    if (tg_unusable_(a)) return tg_error_unusable_input("tg_lerp_tensor", a, 0), NULL;
    if (tg_unusable_(b)) return tg_error_unusable_input("tg_lerp_tensor", b, 1), NULL;
    if (tg_unusable_(weight)) return tg_error_unusable_input("tg_lerp_tensor", weight, 2), NULL;
    if (check_broadcast("tg_lerp_tensor", (tg_tensor *[]){a, b, weight}, (const char *[]){"start", "end", "weight"}, 3))
        return NULL;
    tg_tensor *result = NULL;
    TG_SCOPE { result = tg_scope_return(tg_add(a, tg_mul(weight, tg_sub(b, a)))); }
    return result;
}

static tg_tensor *scaled_product(const char *op, int rank, tg_tensor *c, tg_tensor *a, tg_tensor *b, double beta,
                                 double alpha) {
    for (int i = 0; i < 3; i++) {
        tg_tensor *t = i == 0 ? c : i == 1 ? a : b;
        if (tg_unusable_(t)) return tg_error_unusable_input(op, t, i), NULL;
    }
    char sa[128], sb[128], sc[128];
    if (a->shape.ndim != rank || b->shape.ndim != rank || (rank == 3 && a->shape.dims[0] != b->shape.dims[0]) ||
        a->shape.dims[rank - 1] != b->shape.dims[rank - 2])
        return tg_error("%s: cannot multiply %s by %s (expected %s)", op, tg_shape_str(a->shape, sa, sizeof sa),
                        tg_shape_str(b->shape, sb, sizeof sb),
                        rank == 2 ? "[n, k] and [k, m]" : "[B, n, k] and [B, k, m]"),
               NULL;
    tg_shape out = a->shape, bc;
    out.dims[rank - 1] = b->shape.dims[rank - 1];
    if (!tg_broadcast_shapes(c->shape, out, &bc) || !tg_shape_equal(bc, out))
        return tg_error("%s: c of shape %s cannot be broadcast to the product's shape %s", op,
                        tg_shape_str(c->shape, sc, sizeof sc), tg_shape_str(out, sa, sizeof sa)),
               NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *cab[] = {c, a, b}; /* in autocast's lower-precision list, as PyTorch's addmm */
        if (tg_autocast_inputs(TG_AUTOCAST_LOWER, cab, 3)) break;
        c = cab[0], a = cab[1], b = cab[2];
        tg_tensor *p = tg_matmul(a, b);
        if (p && alpha != 1) p = tg_mul_scalar(p, alpha);
        if (p && beta != 0) p = tg_add(p, beta != 1 ? tg_mul_scalar(c, beta) : c);
        if (p) result = tg_scope_return(p);
    }
    return result;
}

tg_tensor *tg_addmm(tg_tensor *c, tg_tensor *a, tg_tensor *b, double beta, double alpha) {
    return scaled_product("tg_addmm", 2, c, a, b, beta, alpha);
}

tg_tensor *tg_baddbmm(tg_tensor *c, tg_tensor *a, tg_tensor *b, double beta, double alpha) {
    return scaled_product("tg_baddbmm", 3, c, a, b, beta, alpha);
}

tg_tensor *tg_clamp_tensor(tg_tensor *x, tg_tensor *min, tg_tensor *max) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_clamp_tensor", x, 0), NULL;
    if (!min && !max) return tg_error("tg_clamp_tensor: at least one of min and max must be given"), NULL;
    if (check_broadcast("tg_clamp_tensor", (tg_tensor *[]){x, min, max}, (const char *[]){"input", "min", "max"}, 3))
        return NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *y = x;
        /* where(x < min, min, x): a tie keeps x (and its gradient), NaN in x stays; a NaN
         * bound is taken explicitly, as PyTorch propagates it. */
        if (min) y = tg_where(tg_ne(min, min), min, tg_where(tg_lt(y, min), min, y));
        if (max && y) y = tg_where(tg_ne(max, max), max, tg_where(tg_gt(y, max), max, y));
        if (y) result = tg_scope_return(y == x ? tg_clone(x) : y);
    }
    return result;
}

tg_tensor *tg_hardtanh(tg_tensor *x, double min_val, double max_val) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_hardtanh", x, 0), NULL;
    if (!(min_val <= max_val))
        return tg_error("tg_hardtanh: min_val %g must not exceed max_val %g", min_val, max_val), NULL;
    tg_tensor *result = NULL;
    TG_SCOPE { /* x not at or beyond a bound passes (with its gradient; NaN stays NaN) */
        tg_tensor *below_max = tg_eq_scalar(tg_ge_scalar(x, max_val), 0);
        tg_tensor *above_min = tg_eq_scalar(tg_le_scalar(x, min_val), 0);
        result = tg_scope_return(tg_where_scalar(above_min, tg_where_scalar(below_max, x, max_val), min_val));
    }
    return result;
}

tg_tensor *tg_softmin(tg_tensor *x, int dim) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_softmin", x, 0), NULL;
    tg_tensor *result = NULL;
    TG_SCOPE { result = tg_scope_return(tg_softmax(tg_neg(x), dim)); }
    return result;
}
