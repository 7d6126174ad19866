/* nonzero, masked_select, x[mask], index_put (see ops/index.h). */
#include "ops/index.h"

#include <stdlib.h>
#include <string.h>

#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/composite.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "ops/slice.h"

/* The row-major positions of the true elements of a bool tensor, on the host;
 * *count gets their number. The caller frees the array. NULL after an error. */
static int64_t *true_positions(tg_tensor *mask, int64_t *count) {
    int64_t *pos = NULL;
    TG_SCOPE {
        tg_tensor *host = tg_contiguous(tg_tensor_to(mask, TG_CPU));
        if (host) {
            const bool *m = tg_data_ptr(host);
            int64_t n = tg_numel(host), k = 0;
            pos = malloc((size_t)(n > 0 ? n : 1) * sizeof *pos);
            TG_ASSERT(pos != NULL);
            for (int64_t i = 0; i < n; i++)
                if (m[i]) pos[k++] = i;
            *count = k;
        }
    }
    return pos;
}

static tg_tensor *index_tensor(const int64_t *v, int64_t n, tg_device device) {
    return tg_tensor_to(tg_from_data(v, TG_SHAPE(n), (tg_opts){.dtype = TG_INT64}), device);
}

static tg_status check_bool(const char *op, const char *what, tg_tensor *t) {
    if (t->dtype != TG_BOOL) return tg_error("%s: %s must be bool, got %s", op, what, tg_dtype_name(t->dtype));
    return TG_OK;
}

tg_tensor *tg_nonzero(tg_tensor *x) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_nonzero", x, 0), NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *mask =
            x->dtype == TG_BOOL
                ? x
                : tg_ne(x, tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = x->dtype, .device = x->storage->device}));
        int64_t count = 0, nd = x->shape.ndim;
        int64_t *pos = mask ? true_positions(mask, &count) : NULL;
        if (pos) {
            int64_t *coords = malloc((size_t)(count * nd > 0 ? count * nd : 1) * sizeof *coords);
            TG_ASSERT(coords != NULL);
            for (int64_t k = 0; k < count; k++) /* unravel, last dim fastest */
                for (int64_t d = nd - 1, rest = pos[k]; d >= 0; d--) {
                    coords[k * nd + d] = rest % x->shape.dims[d];
                    rest /= x->shape.dims[d];
                }
            tg_tensor *c = tg_from_data(coords, TG_SHAPE(count, nd), (tg_opts){.dtype = TG_INT64});
            free(coords);
            free(pos);
            result = tg_scope_return(tg_tensor_to(c, x->storage->device));
        }
    }
    return result;
}

tg_tensor *tg_masked_select(tg_tensor *x, tg_tensor *mask) {
    const char *op = "tg_masked_select";
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), NULL;
    if (tg_unusable_(mask)) return tg_error_unusable_input(op, mask, 1), NULL;
    if (check_bool(op, "mask", mask) || tg_check_same_device(op, x, mask, "input and mask")) return NULL;
    tg_shape shape;
    char a[128], b[128];
    if (!tg_broadcast_shapes(x->shape, mask->shape, &shape))
        return tg_error("%s: input %s and mask %s cannot be broadcast together", op,
                        tg_shape_str(x->shape, a, sizeof a), tg_shape_str(mask->shape, b, sizeof b)),
               NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        int64_t count = 0;
        int64_t *pos = true_positions(tg_expand(mask, shape), &count);
        if (pos) {
            tg_tensor *idx = index_tensor(pos, count, x->storage->device);
            free(pos);
            result = tg_scope_return(tg_take(tg_expand(x, shape), idx));
        }
    }
    return result;
}

tg_tensor *tg_index_mask(tg_tensor *x, tg_tensor *mask) {
    const char *op = "tg_index_mask";
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), NULL;
    if (tg_unusable_(mask)) return tg_error_unusable_input(op, mask, 1), NULL;
    if (check_bool(op, "mask", mask) || tg_check_same_device(op, x, mask, "input and mask")) return NULL;
    int k = mask->shape.ndim;
    bool fits = k <= x->shape.ndim && x->shape.ndim - k + 1 <= TG_MAX_DIMS;
    for (int i = 0; fits && i < k; i++) fits = mask->shape.dims[i] == x->shape.dims[i];
    if (!fits) {
        char a[128], b[128];
        return tg_error("%s: the mask's shape %s must equal the leading dims of the input's %s", op,
                        tg_shape_str(mask->shape, a, sizeof a), tg_shape_str(x->shape, b, sizeof b)),
               NULL;
    }
    tg_shape rows = {0}; /* [prod of the masked dims, remaining dims...] */
    rows.dims[rows.ndim++] = tg_numel(mask);
    for (int i = k; i < x->shape.ndim; i++) rows.dims[rows.ndim++] = x->shape.dims[i];
    tg_tensor *result = NULL;
    TG_SCOPE {
        int64_t count = 0;
        int64_t *pos = true_positions(mask, &count);
        if (pos) {
            tg_tensor *idx = index_tensor(pos, count, x->storage->device);
            free(pos);
            result = tg_scope_return(tg_index_select(tg_reshape(x, rows), 0, idx));
        }
    }
    return result;
}

/* ---- index_put ---- */

/* The index tensors with each bool one replaced by its nonzero columns (one per dim it
 * covers); *n gets the number of indexed dims. */
static tg_status expand_bool_indices(const char *op, tg_tensor *x, tg_tensor *const *indices, int count,
                                     tg_tensor **out, int *n) {
    *n = 0;
    for (int i = 0; i < count; i++) {
        tg_tensor *t = indices[i];
        if (tg_unusable_(t)) return tg_error_unusable_input(op, t, 1 + i);
        if (tg_check_same_device(op, x, t, "input and indices")) return TG_ERROR;
        if (t->dtype != TG_BOOL && t->dtype != TG_INT64)
            return tg_error("%s: index %d must be int64 or bool, got %s", op, i, tg_dtype_name(t->dtype));
        int covers = t->dtype == TG_BOOL ? t->shape.ndim : 1;
        if (t->dtype == TG_BOOL && covers == 0) return tg_error("%s: a 0-dim bool index is not supported", op);
        if (*n + covers > x->shape.ndim)
            return tg_error("%s: too many indices for a tensor with %d dims", op, x->shape.ndim);
        if (t->dtype == TG_INT64) {
            out[(*n)++] = t;
            continue;
        }
        for (int d = 0; d < covers; d++)
            if (t->shape.dims[d] != x->shape.dims[*n + d]) {
                char a[128], b[128];
                return tg_error("%s: the bool index of shape %s does not match dims %d.. of the input's %s", op,
                                tg_shape_str(t->shape, a, sizeof a), *n, tg_shape_str(x->shape, b, sizeof b));
            }
        tg_tensor *nz = tg_nonzero(t);
        if (!nz) return TG_ERROR;
        for (int d = 0; d < covers; d++) out[(*n)++] = tg_select(nz, 1, d);
    }
    return TG_OK;
}

/* Row numbers (over x's first n dims) that the broadcast indices name, on the host,
 * wrapped and bounds-checked: *rows gets an array of tg_shape_numel(ishape). */
static tg_status flat_rows(const char *op, tg_tensor *x, tg_tensor **idx, int n, tg_shape ishape, int64_t **rows) {
    int64_t count = tg_shape_numel(ishape);
    int64_t *r = calloc((size_t)(count > 0 ? count : 1), sizeof *r);
    TG_ASSERT(r != NULL);
    tg_status status = TG_OK;
    int64_t stride = 1;
    for (int j = n - 1; j >= 0 && status == TG_OK; j--) {
        TG_SCOPE {
            tg_tensor *host = tg_contiguous(tg_tensor_to(tg_expand(idx[j], ishape), TG_CPU));
            if (!host) {
                status = TG_ERROR;
            } else {
                const int64_t *v = tg_data_ptr(host);
                int64_t size = x->shape.dims[j];
                for (int64_t k = 0; k < count; k++) {
                    int64_t i = v[k] < 0 ? v[k] + size : v[k];
                    if (i < 0 || i >= size) {
                        status = tg_error("%s: index %lld is out of bounds for dim %d with size %lld", op,
                                          (long long)v[k], j, (long long)size);
                        break;
                    }
                    r[k] += i * stride;
                }
            }
        }
        stride *= x->shape.dims[j];
    }
    if (status) free(r);
    else *rows = r;
    return status;
}

tg_tensor *tg_index_put(tg_tensor *x, tg_tensor *const *indices, int count, tg_tensor *values, bool accumulate) {
    const char *op = "tg_index_put";
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), NULL;
    if (tg_unusable_(values)) return tg_error_unusable_input(op, values, 1 + (count > 0 ? count : 0)), NULL;
    if (count < 1 || count > TG_MAX_DIMS || !indices)
        return tg_error("%s: expected 1 to %d index tensors, got %d", op, TG_MAX_DIMS, count), NULL;
    if (values->dtype != x->dtype)
        return tg_error("%s: values of dtype %s for an input of dtype %s (they must match)", op,
                        tg_dtype_name(values->dtype), tg_dtype_name(x->dtype)),
               NULL;
    if (tg_check_same_device(op, x, values, "input and values")) return NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *idx[TG_MAX_DIMS];
        int n = 0;
        tg_shape ishape = TG_SCALAR_SHAPE, vshape = {0}, rows_shape = {0};
        char a[128], b[128];
        bool ok = expand_bool_indices(op, x, indices, count, idx, &n) == TG_OK;
        for (int j = 0; ok && j < n; j++)
            if (!tg_broadcast_shapes(ishape, idx[j]->shape, &ishape))
                ok = !tg_error("%s: the index shapes cannot be broadcast together (index %d is %s)", op, j,
                               tg_shape_str(idx[j]->shape, a, sizeof a));
        int rest = x->shape.ndim - n;
        if (ok && ishape.ndim + rest > TG_MAX_DIMS) ok = !tg_error("%s: the indexed result has too many dims", op);
        int64_t *rows = NULL;
        if (ok) ok = flat_rows(op, x, idx, n, ishape, &rows) == TG_OK;
        if (ok) {
            int64_t num = tg_shape_numel(ishape), r0 = 1;
            for (int j = 0; j < n; j++) r0 *= x->shape.dims[j];
            vshape = ishape;
            rows_shape.dims[rows_shape.ndim++] = r0;
            for (int d = n; d < x->shape.ndim; d++) {
                vshape.dims[vshape.ndim++] = x->shape.dims[d];
                rows_shape.dims[rows_shape.ndim++] = x->shape.dims[d];
            }
            tg_shape vb;
            if (!tg_broadcast_shapes(values->shape, vshape, &vb) || !tg_shape_equal(vb, vshape)) {
                ok = !tg_error("%s: values of shape %s cannot be broadcast to the indexed shape %s", op,
                               tg_shape_str(values->shape, a, sizeof a), tg_shape_str(vshape, b, sizeof b));
            } else {
                tg_shape flat = rows_shape;
                flat.dims[0] = num;
                tg_tensor *vals = tg_reshape(tg_expand(values, vshape), flat);
                tg_tensor *x2 = tg_reshape(x, rows_shape), *out2;
                if (accumulate) {
                    out2 = tg_index_add(x2, 0, index_tensor(rows, num, x->storage->device), vals);
                } else { /* the last write to a row wins; written rows lose x's value (and gradient) */
                    int64_t *last = malloc((size_t)(r0 > 0 ? r0 : 1) * sizeof *last), kept = 0;
                    int64_t *keep_rows = malloc((size_t)(num > 0 ? num : 1) * sizeof *keep_rows);
                    int64_t *keep_pos = malloc((size_t)(num > 0 ? num : 1) * sizeof *keep_pos);
                    bool *written = calloc((size_t)(r0 > 0 ? r0 : 1), sizeof *written);
                    TG_ASSERT(last && keep_rows && keep_pos && written);
                    for (int64_t k = 0; k < num; k++) last[rows[k]] = k, written[rows[k]] = true;
                    for (int64_t k = 0; k < num; k++)
                        if (last[rows[k]] == k) keep_rows[kept] = rows[k], keep_pos[kept++] = k;
                    tg_shape ws = rows_shape;
                    for (int d = 1; d < ws.ndim; d++) ws.dims[d] = 1;
                    tg_tensor *unwritten = tg_eq_scalar(
                        tg_tensor_to(tg_from_data(written, ws, (tg_opts){.dtype = TG_BOOL}), x->storage->device), 0);
                    tg_tensor *cleared = tg_where_scalar(unwritten, x2, 0);
                    tg_tensor *picked = tg_index_select(vals, 0, index_tensor(keep_pos, kept, x->storage->device));
                    out2 = tg_index_add(cleared, 0, index_tensor(keep_rows, kept, x->storage->device), picked);
                    free(last), free(keep_rows), free(keep_pos), free(written);
                }
                tg_tensor *out = tg_reshape(out2, x->shape);
                if (out) result = tg_scope_return(tg_same_storage(out, x) ? tg_clone(out) : out);
            }
            free(rows);
        }
    }
    return result;
}
